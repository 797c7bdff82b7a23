//! The holder's pure state machine: [`Holder`], what it is told and the [`Effect`]s it asks for.
//! No I/O and no actor: every race is a sequence of method calls (see the tests below).

use std::time::Duration;

use actix::SpawnHandle;
use futures::channel::oneshot;

use crate::error::Error;
use crate::recipe::contender::ContenderEvent;
pub(crate) use crate::recipe::contender::Loss;
use crate::session::{SessionEvent, SessionId};
use crate::token::FencingToken;

/// What a holder (of a lock, a lease, a leadership) assumes when the connection drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConnectionPolicy {
    /// `Suspended` means "you may no longer hold it"; if the connection is not back within the
    /// session timeout the grant is reported lost (Curator's standard policy). The default.
    #[default]
    Conservative,
    /// Only a session expiry (or the node's deletion) ends a grant; `Suspended` is informational
    /// (Curator's `SessionConnectionStateErrorPolicy`).
    ExpiryOnly,
}

/// The number of an attempt; reports carry it so a recipe can ignore an attempt it left.
pub(crate) type Attempt = u64;

/// Why a waiting caller gets no grant.
#[derive(Debug, Clone)]
pub(crate) enum Refusal {
    /// Its own timeout passed.
    Timeout(Duration),
    /// A `Release` (or resign) withdrew the attempt.
    Cancelled,
    /// Another caller of this participant already waits (locks admit one at a time).
    InProgress,
    /// The attempt failed for good.
    Failed(Error),
    /// The session was closed.
    Closed,
}

/// A caller waiting for a grant; each recipe wraps its reply channel in one.
pub(crate) trait Waiter<G> {
    /// Hands `grant` over; `false` when the caller has gone and nobody received it.
    fn grant(self, grant: &G) -> bool;
    /// The attempt stands in line behind someone. A caller that only wanted a free grant leaves
    /// ([`InLine::Leaves`]: it is answered once the attempt's node is gone, or at once when other
    /// callers keep the attempt); any other comes back to go on waiting.
    fn in_line(self) -> InLine<Self>
    where
        Self: Sized;
    /// Answers that no grant comes.
    fn refuse(self, why: Refusal);
    /// True once the caller stopped waiting.
    fn is_gone(&self) -> bool;
    /// [`is_gone`](Self::is_gone), and otherwise `cx` is woken when the caller goes.
    fn poll_gone(&self, cx: &mut std::task::Context<'_>) -> bool;
}

/// What a waiter does when its attempt stands in line behind someone.
pub(crate) enum InLine<W> {
    /// It goes on waiting.
    Waits(W),
    /// It wanted only a free grant: this channel hears when the attempt's node is gone, and the
    /// waiter is answered then (never before: an answer "busy" promises our node is deleted).
    Leaves(ReleaseAnswer),
}

/// What the core needs of a recipe's grant: to be told when it has ended, so that no copy of it
/// is current any more ([`Fence::end`](crate::recipe::Fence)).
pub(crate) trait Grant: Clone {
    /// The grant of `node`, won by `session` with `token` at `version`.
    fn won(node: &str, token: FencingToken, version: i32, session: SessionId, lease: crate::session::Lease) -> Self;

    /// The grant ended (released, lost, given up).
    fn end(&self);
}

impl Grant for crate::recipe::Fence {
    fn won(node: &str, token: FencingToken, version: i32, session: SessionId, lease: crate::session::Lease) -> Self {
        crate::recipe::Fence::won(node, token, version, session, lease)
    }

    fn end(&self) {
        crate::recipe::Fence::end(self);
    }
}

/// A grant as the core keeps it: the recipe's grant plus what the core needs to judge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Granted<G> {
    /// The recipe's grant (a `LockGrant`, a `LeaderTerm`).
    pub grant: G,
    /// The node that won.
    pub node: String,
    /// Its fencing token.
    pub token: FencingToken,
    /// The session that owns the node.
    pub session: SessionId,
    /// That session's generation (the release's delete is pinned to it).
    pub generation: u64,
}

/// How a held grant's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GrantConnection {
    /// Connected.
    Up,
    /// Disconnected; the session may live on.
    Suspended,
    /// Reconnected on the same session; reading the node again before saying so.
    Verifying,
}

/// Where the holder stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Phase<G> {
    /// No attempt.
    Idle,
    /// In line for a grant.
    Acquiring {
        /// The attempt.
        attempt: Attempt,
    },
    /// Holding.
    Held {
        /// The attempt that won.
        attempt: Attempt,
        /// What was won.
        held: Granted<G>,
        /// The connection.
        link: GrantConnection,
        /// How many callers were handed this grant (re-entrant acquires count too) and have not
        /// given it back: a grant is given back for good only when none of them has it.
        handed: u32,
    },
}

/// What happened, for the recipe to tell its subscribers in its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Happened<G> {
    /// Granted.
    Acquired(Granted<G>),
    /// Held, but the connection dropped.
    Suspended(Granted<G>),
    /// Held, connected again, and the node is still there.
    Restored(Granted<G>),
    /// No longer held, and not by our choice.
    Lost(Granted<G>, Loss),
    /// No longer held: our delete removed the node.
    Released(Granted<G>),
    /// An attempt nobody waited on (an election's) failed for good.
    Failed(Error),
}

/// Why a release did not delete the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReleaseError {
    /// Nothing was held or awaited.
    NotHeld,
    /// The grant had already been lost.
    Lost(Loss),
    /// The delete failed.
    ZooKeeper(Error),
}

/// Where the answer to a release goes.
pub(crate) type ReleaseAnswer = oneshot::Sender<Result<(), ReleaseError>>;

/// How a delete of a held node ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Deleted {
    /// Our delete removed it.
    ByUs,
    /// It was gone already; `unsure` when an earlier try of ours may have removed it (its reply
    /// was lost with the connection).
    Gone {
        /// An earlier try's outcome is unknown.
        unsure: bool,
        /// The delete was refused because its session had expired.
        session_lost: bool,
    },
}

/// Something the host must do, in the order given.
#[derive(Debug)]
pub(crate) enum Effect<G> {
    /// Start the contender(s) of this attempt.
    Begin(Attempt),
    /// Withdraw the attempt's contender(s) (they delete their nodes); answer `then` once done.
    Withdraw {
        /// The attempt.
        attempt: Attempt,
        /// A release, or callers that left the line, waiting for it.
        then: Vec<ReleaseAnswer>,
    },
    /// Stop the attempt's contender(s) without a delete: the holder deletes the node itself.
    StandDown(Attempt),
    /// Delete the held node, then report through [`Holder::released`].
    Delete {
        /// What is released.
        held: Granted<G>,
        /// A release waiting for it.
        then: Option<ReleaseAnswer>,
    },
    /// Read the node again, then report through [`Holder::verified`].
    Verify {
        /// The attempt.
        attempt: Attempt,
        /// The node.
        node: String,
    },
    /// Start the disconnect deadline; it reports through [`Holder::deadline_passed`].
    ArmDeadline(Attempt),
    /// Cancel the disconnect deadline.
    CancelDeadline,
    /// Tell the recipe what happened.
    Tell(Happened<G>),
}

/// How many expired sessions to remember: reports of older ones cannot still be in flight.
const DEAD_SESSIONS: usize = 16;

/// The holder state machine; see the [module docs](self).
pub(crate) struct Holder<G, W> {
    phase: Phase<G>,
    attempts: Attempt,
    waiters: Vec<W>,
    /// Contend without callers (an election while joined; a lock re-acquiring after a loss).
    keep: bool,
    /// After a loss, contend again without callers (lock re-acquire, election re-queue).
    again_after_loss: bool,
    /// One waiting caller at a time: two callers of one participant would share one grant.
    single_caller: bool,
    policy: ConnectionPolicy,
    /// The connection is down (`Suspended` heard, no `Reconnected`/`Connected` since), whatever
    /// the phase: a grant that lands now was computed before the drop.
    suspended: bool,
    dead: Vec<SessionId>,
    last_loss: Option<Loss>,
    /// The running disconnect deadline (kept here for [`run`](super::run); no transition reads it).
    pub(super) deadline: Option<SpawnHandle>,
    /// True while the check for callers that went away is armed (kept for [`run`](super::run)):
    /// one timer per actor, not one per attempt.
    pub(super) checking_callers: bool,
    /// The caller's timeout of the attempt in line, if it has one (kept for [`run`](super::run)),
    /// cancelled once the attempt is granted or left.
    pub(super) timeout: Option<(Attempt, SpawnHandle)>,
    /// When the attempt in line began and when its grant came (kept for [`run`](super::run),
    /// for the wait and hold metrics; no transition reads them).
    pub(super) timing: Timing,
}

/// When the attempt in line began, and when its grant came.
#[derive(Debug, Default)]
pub(crate) struct Timing {
    pub(super) begun: Option<std::time::Instant>,
    pub(super) granted: Option<std::time::Instant>,
}

impl<G: Grant, W: Waiter<G>> Holder<G, W> {
    /// An idle holder.
    pub(crate) fn new(policy: ConnectionPolicy, single_caller: bool, again_after_loss: bool) -> Self {
        Holder {
            phase: Phase::Idle,
            attempts: 0,
            waiters: Vec::new(),
            keep: false,
            again_after_loss,
            single_caller,
            policy,
            suspended: false,
            dead: Vec::new(),
            last_loss: None,
            deadline: None,
            checking_callers: false,
            timing: Timing::default(),
            timeout: None,
        }
    }

    /// Where the holder stands.
    pub(crate) fn phase(&self) -> &Phase<G> {
        &self.phase
    }

    /// The current attempt, if any.
    pub(crate) fn attempt(&self) -> Option<Attempt> {
        match &self.phase {
            Phase::Idle => None,
            Phase::Acquiring { attempt } | Phase::Held { attempt, .. } => Some(*attempt),
        }
    }

    /// True while `attempt` is in line.
    pub(crate) fn is_acquiring(&self, attempt: Attempt) -> bool {
        matches!(self.phase, Phase::Acquiring { attempt: a } if a == attempt)
    }

    /// True while the grant of `attempt` waits for its node to be read again after a reconnect.
    pub(crate) fn is_verifying(&self, attempt: Attempt) -> bool {
        matches!(self.phase, Phase::Held { attempt: a, link: GrantConnection::Verifying, .. } if a == attempt)
    }

    /// The grant held, if any.
    pub(crate) fn held(&self) -> Option<&Granted<G>> {
        match &self.phase {
            Phase::Held { held, .. } => Some(held),
            _ => None,
        }
    }

    /// True while contending or holding without callers (an election participant in line).
    pub(crate) fn keeps_contending(&self) -> bool {
        self.keep
    }

    /// Forgets callers that went away, keeping the attempt: a caller that comes next takes over
    /// its place in line at once instead of being answered "in progress".
    pub(crate) fn forget_gone(&mut self) {
        self.waiters.retain(|waiter| !waiter.is_gone());
    }

    /// True while callers wait.
    pub(crate) fn has_waiters(&self) -> bool {
        !self.waiters.is_empty()
    }

    /// True if a waiting caller has gone; `cx` is woken when one of the others goes (every
    /// waiter is asked, so that each one's going wakes it).
    pub(crate) fn poll_callers_gone(&self, cx: &mut std::task::Context<'_>) -> bool {
        // Not `any`: it would stop at the first gone caller and leave the rest unasked.
        let asked: Vec<bool> = self.waiters.iter().map(|waiter| waiter.poll_gone(cx)).collect();
        asked.contains(&true)
    }

    fn begin(&mut self) -> Vec<Effect<G>> {
        self.attempts += 1;
        self.phase = Phase::Acquiring { attempt: self.attempts };
        vec![Effect::Begin(self.attempts)]
    }

    /// Leaves the current attempt without a grant; `then` hears when its nodes are gone.
    fn leave(&mut self, then: Vec<ReleaseAnswer>) -> Vec<Effect<G>> {
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Acquiring { attempt } => vec![Effect::Withdraw { attempt, then }],
            phase => {
                self.phase = phase;
                for answer in then {
                    let _ = answer.send(Ok(()));
                }
                Vec::new()
            }
        }
    }

    /// A caller wants the grant (and waits for it).
    pub(crate) fn acquire(&mut self, waiter: W) -> Vec<Effect<G>> {
        self.forget_gone();
        match &mut self.phase {
            Phase::Held { held, handed, .. } => {
                if waiter.grant(&held.grant) {
                    *handed += 1;
                }
                Vec::new()
            }
            Phase::Acquiring { .. } if self.single_caller && !self.waiters.is_empty() => {
                waiter.refuse(Refusal::InProgress);
                Vec::new()
            }
            Phase::Acquiring { .. } => {
                self.waiters.push(waiter);
                Vec::new()
            }
            Phase::Idle => {
                self.last_loss = None;
                self.waiters.push(waiter);
                self.begin()
            }
        }
    }

    /// Contend (or stop contending) whether or not anybody waits: an election's join and resign.
    pub(crate) fn keep_contending(&mut self, keep: bool) -> Vec<Effect<G>> {
        self.keep = keep;
        match &self.phase {
            Phase::Idle if keep => self.begin(),
            Phase::Acquiring { .. } if !keep && self.waiters.is_empty() => self.leave(Vec::new()),
            _ => Vec::new(),
        }
    }

    /// The session `id` has ended (the session actor knows; its `Expired` may not have reached
    /// us yet): a grant computed from its replies is not handed out.
    pub(crate) fn session_ended(&mut self, id: SessionId) {
        if !self.dead.contains(&id) {
            if self.dead.len() == DEAD_SESSIONS {
                self.dead.remove(0);
            }
            self.dead.push(id);
        }
    }

    /// How a grant for `attempt` from `session` would be held, were it reported now: `None` when
    /// it would not be (an attempt left, a session known dead). Read before the report, so that
    /// what the recipe shows (its health) is current before its callers are answered.
    pub(crate) fn would_hold(&self, attempt: Attempt, session: SessionId) -> Option<GrantConnection> {
        (self.is_acquiring(attempt) && !self.dead.contains(&session)).then_some(self.link_now())
    }

    /// How a grant made now is held: suspended while the connection is.
    fn link_now(&self) -> GrantConnection {
        if self.suspended { GrantConnection::Suspended } else { GrantConnection::Up }
    }

    /// The contender of `attempt` won.
    pub(crate) fn granted(&mut self, attempt: Attempt, held: Granted<G>) -> Vec<Effect<G>> {
        if !self.is_acquiring(attempt) {
            return Vec::new();
        }
        if self.dead.contains(&held.session) {
            // Computed from replies of a session that has expired since: the node is gone.
            let mut effects = vec![Effect::Withdraw { attempt, then: Vec::new() }];
            effects.extend(self.begin());
            return effects;
        }
        let mut handed = 0;
        for waiter in self.waiters.drain(..) {
            handed += u32::from(waiter.grant(&held.grant));
        }
        if handed == 0 && !self.keep {
            // Nobody took it: give it back rather than hold a grant no one knows about.
            return self.leave(Vec::new());
        }
        let link = self.link_now();
        self.phase = Phase::Held { attempt, held: held.clone(), link, handed };
        let mut effects = vec![Effect::Tell(Happened::Acquired(held.clone()))];
        if link == GrantConnection::Suspended {
            // The contender's report trailed the `Suspended` (it runs on the session's thread):
            // held, but suspended like a grant the drop caught; `Reconnected` reads it again.
            effects.push(Effect::Tell(Happened::Suspended(held)));
            if self.policy == ConnectionPolicy::Conservative {
                effects.push(Effect::ArmDeadline(attempt));
            }
        }
        effects
    }

    /// Starts `attempt` over with a new one, keeping its callers (a semaphore whose guard was
    /// lost before its lease was granted).
    pub(crate) fn restart(&mut self, attempt: Attempt) -> Vec<Effect<G>> {
        if !self.is_acquiring(attempt) {
            return Vec::new();
        }
        let mut effects = vec![Effect::Withdraw { attempt, then: Vec::new() }];
        effects.extend(self.begin());
        effects
    }

    /// A contender's report about `attempt`; `grant` words a won node as the recipe's grant.
    pub(crate) fn report(
        &mut self,
        attempt: Attempt,
        event: ContenderEvent,
        grant: impl FnOnce(&str, FencingToken, i32, SessionId) -> G,
    ) -> Vec<Effect<G>> {
        match event {
            ContenderEvent::Granted { node, token, version, session_id, generation } => {
                let grant = grant(&node, token, version, session_id);
                self.granted(attempt, Granted { grant, node, token, session: session_id, generation })
            }
            ContenderEvent::Waiting { .. } => self.in_line(attempt),
            ContenderEvent::Lost { reason, .. } => self.lost(attempt, reason),
            ContenderEvent::Failed { error } => self.failed(attempt, error),
            // Changes nothing here: the recipe tells its subscribers, and they decide.
            ContenderEvent::RevocationRequested { .. } => Vec::new(),
        }
    }

    /// The contender of `attempt` stands in line behind someone.
    pub(crate) fn in_line(&mut self, attempt: Attempt) -> Vec<Effect<G>> {
        if !self.is_acquiring(attempt) {
            return Vec::new();
        }
        let mut leaving = Vec::new();
        for waiter in std::mem::take(&mut self.waiters) {
            match waiter.in_line() {
                InLine::Waits(waiter) => self.waiters.push(waiter),
                InLine::Leaves(answer) => leaving.push(answer),
            }
        }
        if self.waiters.is_empty() && !self.keep {
            self.leave(leaving)
        } else {
            // The attempt carries on for others: the node that stays is not the leaver's.
            for answer in leaving {
                let _ = answer.send(Ok(()));
            }
            Vec::new()
        }
    }

    /// The contender of `attempt` lost its node.
    pub(crate) fn lost(&mut self, attempt: Attempt, loss: Loss) -> Vec<Effect<G>> {
        match &self.phase {
            Phase::Held { attempt: a, .. } if *a == attempt => self.lose(loss),
            _ => Vec::new(),
        }
    }

    /// The contender of `attempt` cannot go on.
    pub(crate) fn failed(&mut self, attempt: Attempt, error: Error) -> Vec<Effect<G>> {
        match &self.phase {
            Phase::Acquiring { attempt: a } if *a == attempt => {
                self.phase = Phase::Idle;
                self.keep = false;
                let waiters = std::mem::take(&mut self.waiters);
                if waiters.is_empty() {
                    return vec![Effect::Tell(Happened::Failed(error))];
                }
                for waiter in waiters {
                    waiter.refuse(Refusal::Failed(error.clone()));
                }
                Vec::new()
            }
            Phase::Held { attempt: a, .. } if *a == attempt => self.lose(Loss::SessionClosed),
            _ => Vec::new(),
        }
    }

    fn lose(&mut self, loss: Loss) -> Vec<Effect<G>> {
        let Phase::Held { attempt, held, link, .. } = std::mem::replace(&mut self.phase, Phase::Idle) else {
            return Vec::new();
        };
        held.grant.end();
        self.last_loss = Some(loss);
        let mut effects = Vec::new();
        if link != GrantConnection::Up {
            effects.push(Effect::CancelDeadline);
        }
        // The contender has stopped or is about to; withdrawing it again is harmless and deletes
        // a node that outlived a lost connection.
        effects.push(Effect::Withdraw { attempt, then: Vec::new() });
        effects.push(Effect::Tell(Happened::Lost(held, loss)));
        self.keep = self.again_after_loss && loss != Loss::SessionClosed;
        if self.keep {
            effects.extend(self.begin());
        }
        effects
    }

    /// The caller's own timeout for `attempt` passed.
    pub(crate) fn timed_out(&mut self, attempt: Attempt, after: Duration) -> Vec<Effect<G>> {
        if !self.is_acquiring(attempt) {
            return Vec::new();
        }
        for waiter in self.waiters.drain(..) {
            waiter.refuse(Refusal::Timeout(after));
        }
        if self.keep { Vec::new() } else { self.leave(Vec::new()) }
    }

    /// Forgets callers that stopped waiting; leaves the line when none is left.
    pub(crate) fn drop_gone(&mut self, attempt: Attempt) -> Vec<Effect<G>> {
        if !self.is_acquiring(attempt) {
            return Vec::new();
        }
        self.waiters.retain(|waiter| !waiter.is_gone());
        if self.waiters.is_empty() && !self.keep { self.leave(Vec::new()) } else { Vec::new() }
    }

    /// A caller handed the grant with `token` did not take it (its future was dropped with the
    /// grant in it). The grant is given up once no caller it was handed to still has it: a
    /// re-entrant acquire dropped this way leaves the grant with whoever got it first.
    pub(crate) fn give_back(&mut self, token: FencingToken) -> Vec<Effect<G>> {
        match &mut self.phase {
            Phase::Held { held, handed, .. } if held.token == token && *handed > 0 => {
                *handed -= 1;
                if *handed > 0 || self.keep {
                    return Vec::new();
                }
                self.let_go(None)
            }
            _ => Vec::new(),
        }
    }

    /// Give the grant up, or stop waiting for it; `answer` hears how it went.
    pub(crate) fn release(&mut self, answer: ReleaseAnswer) -> Vec<Effect<G>> {
        self.let_go(Some(answer))
    }

    fn let_go(&mut self, answer: Option<ReleaseAnswer>) -> Vec<Effect<G>> {
        self.keep = false;
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => {
                if let Some(answer) = answer {
                    let _ = answer.send(Err(self.last_loss.map_or(ReleaseError::NotHeld, ReleaseError::Lost)));
                }
                Vec::new()
            }
            Phase::Acquiring { attempt } => {
                for waiter in self.waiters.drain(..) {
                    waiter.refuse(Refusal::Cancelled);
                }
                vec![Effect::Withdraw { attempt, then: answer.into_iter().collect() }]
            }
            Phase::Held { attempt, held, link, .. } => {
                // Ended from the moment it is given up, not once the delete is answered.
                held.grant.end();
                let mut effects = Vec::new();
                if link != GrantConnection::Up {
                    effects.push(Effect::CancelDeadline);
                }
                // Stand down first: our delete must not look like somebody else's to the
                // contender still watching the node.
                effects.push(Effect::StandDown(attempt));
                effects.push(Effect::Delete { held, then: answer });
                effects
            }
        }
    }

    /// The actor stops: leave whatever is held or awaited.
    pub(crate) fn stop(&mut self) -> Vec<Effect<G>> {
        self.keep = false;
        for waiter in self.waiters.drain(..) {
            waiter.refuse(Refusal::Cancelled);
        }
        match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Idle => Vec::new(),
            // The contender outlives us and deletes its node.
            Phase::Acquiring { attempt } => vec![Effect::Withdraw { attempt, then: Vec::new() }],
            Phase::Held { attempt, held, .. } => {
                held.grant.end();
                vec![Effect::Withdraw { attempt, then: Vec::new() }]
            }
        }
    }

    /// The delete of a released node ended.
    pub(crate) fn released(
        &mut self,
        held: Granted<G>,
        outcome: Result<Deleted, Error>,
        then: Option<ReleaseAnswer>,
    ) -> Vec<Effect<G>> {
        let expired = self.dead.contains(&held.session);
        let (effects, answer) = match outcome {
            Ok(Deleted::ByUs) => (vec![Effect::Tell(Happened::Released(held))], Ok(())),
            Ok(Deleted::Gone { unsure: true, session_lost: false }) if !expired => {
                // Our earlier try's reply was lost; the session lives, so that try removed it.
                (vec![Effect::Tell(Happened::Released(held))], Ok(()))
            }
            Ok(Deleted::Gone { session_lost, .. }) => {
                let loss = if session_lost || expired { Loss::SessionExpired } else { Loss::NodeDeleted };
                self.last_loss = Some(loss);
                (vec![Effect::Tell(Happened::Lost(held, loss))], Err(ReleaseError::Lost(loss)))
            }
            Err(Error::Closed) => (
                vec![Effect::Tell(Happened::Lost(held, Loss::SessionClosed))],
                Err(ReleaseError::ZooKeeper(Error::Closed)),
            ),
            Err(error) => (Vec::new(), Err(ReleaseError::ZooKeeper(error))),
        };
        if let Some(then) = then {
            let _ = then.send(answer);
        }
        effects
    }

    /// A session event.
    pub(crate) fn session(&mut self, event: &SessionEvent) -> Vec<Effect<G>> {
        match event {
            SessionEvent::Suspended { .. } => {
                self.suspended = true;
                let policy = self.policy;
                let Phase::Held { attempt, held, link, .. } = &mut self.phase else { return Vec::new() };
                if *link != GrantConnection::Up {
                    if *link == GrantConnection::Verifying {
                        *link = GrantConnection::Suspended;
                    }
                    return Vec::new();
                }
                *link = GrantConnection::Suspended;
                let mut effects = vec![Effect::Tell(Happened::Suspended(held.clone()))];
                if policy == ConnectionPolicy::Conservative {
                    effects.push(Effect::ArmDeadline(*attempt));
                }
                effects
            }
            SessionEvent::Reconnected { .. } => {
                self.suspended = false;
                let Phase::Held { attempt, held, link, .. } = &mut self.phase else { return Vec::new() };
                if *link == GrantConnection::Up {
                    return Vec::new();
                }
                *link = GrantConnection::Verifying;
                vec![Effect::Verify { attempt: *attempt, node: held.node.clone() }]
            }
            SessionEvent::Expired { session_id, .. } => {
                self.session_ended(*session_id);
                match &self.phase {
                    Phase::Held { held, .. } if held.session == *session_id => self.lose(Loss::SessionExpired),
                    _ => Vec::new(),
                }
            }
            SessionEvent::Closed => {
                self.keep = false;
                self.again_after_loss = false;
                for waiter in self.waiters.drain(..) {
                    waiter.refuse(Refusal::Closed);
                }
                match &self.phase {
                    Phase::Held { .. } => self.lose(Loss::SessionClosed),
                    Phase::Acquiring { .. } => self.leave(Vec::new()),
                    Phase::Idle => Vec::new(),
                }
            }
            // Connected (a new session) changes nothing held: an expiry came first.
            SessionEvent::Connected { .. } => {
                self.suspended = false;
                Vec::new()
            }
            // AuthFailed changes nothing held.
            _ => Vec::new(),
        }
    }

    /// The read after a reconnect came back: `Ok(true)` when the node is still there.
    pub(crate) fn verified(&mut self, attempt: Attempt, exists: Result<bool, Error>) -> Vec<Effect<G>> {
        let Phase::Held { attempt: a, held, link: GrantConnection::Verifying, .. } = &mut self.phase else {
            return Vec::new();
        };
        if *a != attempt {
            return Vec::new();
        }
        match exists {
            Ok(true) => {
                let held = held.clone();
                if let Phase::Held { link, .. } = &mut self.phase {
                    *link = GrantConnection::Up;
                }
                vec![Effect::CancelDeadline, Effect::Tell(Happened::Restored(held))]
            }
            Ok(false) => self.lose(Loss::NodeDeleted),
            // Disconnected again: the next `Reconnected` reads again.
            Err(_) => Vec::new(),
        }
    }

    /// The disconnect deadline of `attempt` passed.
    pub(crate) fn deadline_passed(&mut self, attempt: Attempt) -> Vec<Effect<G>> {
        match &self.phase {
            Phase::Held { attempt: a, link, .. } if *a == attempt && *link != GrantConnection::Up => {
                self.lose(Loss::DisconnectedTooLong)
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    use super::*;

    /// A caller that records what it was told; `gone` (which a test may set later) makes it
    /// refuse grants.
    struct Caller {
        log: Rc<RefCell<Vec<String>>>,
        gone: Rc<Cell<bool>>,
        try_only: bool,
    }

    impl Grant for u32 {
        fn won(_: &str, token: FencingToken, _: i32, _: SessionId, _: crate::session::Lease) -> Self {
            u32::try_from(token.0).unwrap_or(u32::MAX)
        }

        fn end(&self) {}
    }

    impl Waiter<u32> for Caller {
        fn grant(self, grant: &u32) -> bool {
            if self.gone.get() {
                return false;
            }
            self.log.borrow_mut().push(format!("granted {grant}"));
            true
        }
        fn in_line(self) -> InLine<Self> {
            if self.try_only {
                let (answer, _) = oneshot::channel();
                self.log.borrow_mut().push("leaves".into());
                InLine::Leaves(answer)
            } else {
                InLine::Waits(self)
            }
        }
        fn refuse(self, why: Refusal) {
            self.log.borrow_mut().push(format!("refused {why:?}"));
        }
        fn is_gone(&self) -> bool {
            self.gone.get()
        }
        fn poll_gone(&self, _: &mut std::task::Context<'_>) -> bool {
            self.gone.get()
        }
    }

    type Core = Holder<u32, Caller>;

    fn caller(log: &Rc<RefCell<Vec<String>>>) -> Caller {
        Caller { log: log.clone(), gone: Rc::new(Cell::new(false)), try_only: false }
    }

    /// A caller, and the switch that makes it go away.
    fn leaving_caller(log: &Rc<RefCell<Vec<String>>>) -> (Caller, Rc<Cell<bool>>) {
        let gone = Rc::new(Cell::new(false));
        (Caller { log: log.clone(), gone: gone.clone(), try_only: false }, gone)
    }

    fn held(session: i64) -> Granted<u32> {
        Granted {
            grant: 7,
            node: "/l/n-1".into(),
            token: FencingToken(100),
            session: SessionId(session),
            generation: 1,
        }
    }

    fn expired(session: i64) -> SessionEvent {
        SessionEvent::Expired { session_id: SessionId(session), generation: 1 }
    }

    fn kinds<G: std::fmt::Debug>(effects: &[Effect<G>]) -> Vec<String> {
        effects
            .iter()
            .map(|e| match e {
                Effect::Begin(a) => format!("Begin({a})"),
                Effect::Withdraw { attempt, then } => {
                    format!("Withdraw({attempt}{})", ",answer".repeat(then.len()))
                }
                Effect::StandDown(a) => format!("StandDown({a})"),
                Effect::Delete { .. } => "Delete".into(),
                Effect::Verify { attempt, .. } => format!("Verify({attempt})"),
                Effect::ArmDeadline(a) => format!("ArmDeadline({a})"),
                Effect::CancelDeadline => "CancelDeadline".into(),
                Effect::Tell(h) => format!("Tell({})", format!("{h:?}").split('(').next().unwrap_or_default()),
            })
            .collect()
    }

    /// A lock's core under the conservative policy, and the log its callers write.
    fn lock_core() -> (Core, Rc<RefCell<Vec<String>>>) {
        (Core::new(ConnectionPolicy::Conservative, true, false), Rc::new(RefCell::new(Vec::new())))
    }

    /// The effects of a held grant lost for `loss`: its deadline cancelled, its node withdrawn.
    fn assert_lost(effects: &[Effect<u32>], loss: Loss) {
        assert_eq!(kinds(effects), ["CancelDeadline", "Withdraw(1)", "Tell(Lost)"]);
        assert!(matches!(&effects[2], Effect::Tell(Happened::Lost(_, lost)) if *lost == loss));
    }

    fn holding(policy: ConnectionPolicy) -> (Core, Rc<RefCell<Vec<String>>>) {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut core = Core::new(policy, true, false);
        assert_eq!(kinds(&core.acquire(caller(&log))), ["Begin(1)"]);
        assert_eq!(kinds(&core.granted(1, held(1))), ["Tell(Acquired)"]);
        (core, log)
    }

    #[test]
    fn a_grant_nobody_received_is_given_back() {
        let (mut core, log) = lock_core();
        core.acquire(Caller { log: log.clone(), gone: Rc::new(Cell::new(true)), try_only: false });
        assert_eq!(kinds(&core.granted(1, held(1))), ["Withdraw(1)"]);
        assert_eq!(core.phase(), &Phase::Idle);
    }

    #[test]
    fn a_grant_from_an_expired_session_is_not_handed_out() {
        let (mut core, log) = lock_core();
        core.acquire(caller(&log));
        core.session(&expired(1));
        assert_eq!(kinds(&core.granted(1, held(1))), ["Withdraw(1)", "Begin(2)"]);
        assert!(log.borrow().is_empty(), "the caller still waits: {:?}", log.borrow());
        assert_eq!(kinds(&core.granted(2, held(2))), ["Tell(Acquired)"]);
        assert_eq!(*log.borrow(), ["granted 7"]);
    }

    #[test]
    fn a_grant_from_a_session_known_to_have_ended_is_not_handed_out_before_its_expiry_arrives() {
        let (mut core, log) = lock_core();
        core.acquire(caller(&log));
        core.session_ended(held(1).session);
        assert_eq!(kinds(&core.granted(1, held(1))), ["Withdraw(1)", "Begin(2)"]);
        assert!(log.borrow().is_empty(), "the caller still waits: {:?}", log.borrow());
        // The `Expired` itself, arriving later, changes nothing for the new attempt.
        assert!(core.session(&expired(1)).is_empty());
    }

    #[test]
    fn an_expiry_ends_a_held_grant_before_the_contender_reports_and_a_release_then_says_lost() {
        let (mut core, _) = holding(ConnectionPolicy::ExpiryOnly);
        let effects = core.session(&expired(1));
        assert_eq!(kinds(&effects), ["Withdraw(1)", "Tell(Lost)"]);
        assert!(matches!(&effects[1], Effect::Tell(Happened::Lost(_, Loss::SessionExpired))));
        // The contender's own report, arriving later, changes nothing.
        assert!(core.lost(1, Loss::SessionExpired).is_empty());
        let (answer, mut reply) = oneshot::channel();
        assert!(core.release(answer).is_empty());
        assert_eq!(reply.try_recv().ok().flatten(), Some(Err(ReleaseError::Lost(Loss::SessionExpired))));
    }

    #[test]
    fn an_expiry_of_another_session_leaves_the_grant_alone() {
        let (mut core, _) = holding(ConnectionPolicy::Conservative);
        assert!(core.session(&expired(9)).is_empty());
        assert!(core.held().is_some());
    }

    #[test]
    fn releasing_stands_the_contender_down_before_deleting() {
        let (mut core, _) = holding(ConnectionPolicy::Conservative);
        let (answer, _reply) = oneshot::channel();
        assert_eq!(kinds(&core.release(answer)), ["StandDown(1)", "Delete"]);
        assert_eq!(core.phase(), &Phase::Idle);
    }

    #[test]
    fn a_release_whose_node_was_already_gone_is_a_loss_not_a_release() {
        let (mut core, _) = holding(ConnectionPolicy::Conservative);
        let (answer, mut reply) = oneshot::channel();
        core.release(answer);
        let (then, mut reply2) = oneshot::channel();
        let effects = core.released(held(1), Ok(Deleted::Gone { unsure: false, session_lost: true }), Some(then));
        assert!(matches!(&effects[..], [Effect::Tell(Happened::Lost(_, Loss::SessionExpired))]));
        assert_eq!(reply2.try_recv().ok().flatten(), Some(Err(ReleaseError::Lost(Loss::SessionExpired))));
        let effects = core.released(held(1), Ok(Deleted::Gone { unsure: false, session_lost: false }), None);
        assert!(matches!(&effects[..], [Effect::Tell(Happened::Lost(_, Loss::NodeDeleted))]));
        let effects = core.released(held(1), Ok(Deleted::ByUs), None);
        assert!(matches!(&effects[..], [Effect::Tell(Happened::Released(_))]));
        // A lost reply on a live session: our own earlier try removed it.
        let effects = core.released(held(1), Ok(Deleted::Gone { unsure: true, session_lost: false }), None);
        assert!(matches!(&effects[..], [Effect::Tell(Happened::Released(_))]));
        // ... but not once that session is known to have expired.
        core.session(&expired(1));
        let effects = core.released(held(1), Ok(Deleted::Gone { unsure: true, session_lost: false }), None);
        assert!(matches!(&effects[..], [Effect::Tell(Happened::Lost(_, Loss::SessionExpired))]));
        drop(reply.try_recv());
    }

    #[test]
    fn conservative_suspension_arms_a_deadline_that_ends_the_grant() {
        let (mut core, _) = holding(ConnectionPolicy::Conservative);
        let suspended = SessionEvent::Suspended { session_id: SessionId(1), generation: 1 };
        assert_eq!(kinds(&core.session(&suspended)), ["Tell(Suspended)", "ArmDeadline(1)"]);
        assert!(core.session(&suspended).is_empty(), "a second Suspended says nothing new");
        let effects = core.deadline_passed(1);
        assert_lost(&effects, Loss::DisconnectedTooLong);
    }

    #[test]
    fn a_grant_that_lands_while_suspended_is_held_suspended_and_read_again_on_reconnect() {
        let (mut core, log) = lock_core();
        assert_eq!(kinds(&core.acquire(caller(&log))), ["Begin(1)"]);
        let suspended = SessionEvent::Suspended { session_id: SessionId(1), generation: 1 };
        assert!(core.session(&suspended).is_empty(), "nothing held yet");
        // The contender computed the grant before the drop; its report arrives after it.
        let effects = core.granted(1, held(1));
        assert_eq!(kinds(&effects), ["Tell(Acquired)", "Tell(Suspended)", "ArmDeadline(1)"]);
        assert_eq!(*log.borrow(), ["granted 7"]);
        assert!(matches!(core.phase(), Phase::Held { link: GrantConnection::Suspended, .. }));
        let back = SessionEvent::Reconnected { session_id: SessionId(1), generation: 1, read_only: false };
        assert_eq!(kinds(&core.session(&back)), ["Verify(1)"]);
        assert_eq!(kinds(&core.verified(1, Ok(true))), ["CancelDeadline", "Tell(Restored)"]);

        // Never back: the deadline ends it like any suspended grant.
        let mut core = Core::new(ConnectionPolicy::Conservative, true, false);
        core.acquire(caller(&log));
        core.session(&suspended);
        core.granted(1, held(1));
        let effects = core.deadline_passed(1);
        assert_lost(&effects, Loss::DisconnectedTooLong);
    }

    #[test]
    fn expiry_only_suspension_arms_nothing() {
        let (mut core, _) = holding(ConnectionPolicy::ExpiryOnly);
        let suspended = SessionEvent::Suspended { session_id: SessionId(1), generation: 1 };
        assert_eq!(kinds(&core.session(&suspended)), ["Tell(Suspended)"]);
    }

    #[test]
    fn a_reconnect_reads_the_node_before_restoring() {
        let (mut core, _) = holding(ConnectionPolicy::Conservative);
        core.session(&SessionEvent::Suspended { session_id: SessionId(1), generation: 1 });
        let back = SessionEvent::Reconnected { session_id: SessionId(1), generation: 1, read_only: false };
        assert_eq!(kinds(&core.session(&back)), ["Verify(1)"]);
        assert_eq!(kinds(&core.verified(1, Ok(true))), ["CancelDeadline", "Tell(Restored)"]);

        core.session(&SessionEvent::Suspended { session_id: SessionId(1), generation: 1 });
        core.session(&back);
        let effects = core.verified(1, Ok(false));
        assert_lost(&effects, Loss::NodeDeleted);
    }

    #[test]
    fn reports_of_an_attempt_that_was_left_are_ignored() {
        let (mut core, log) = lock_core();
        core.acquire(caller(&log));
        assert_eq!(kinds(&core.timed_out(1, Duration::from_secs(1))), ["Withdraw(1)"]);
        assert_eq!(*log.borrow(), ["refused Timeout(1s)"]);
        core.acquire(caller(&log));
        assert!(core.granted(1, held(1)).is_empty());
        assert!(core.lost(1, Loss::NodeDeleted).is_empty());
        assert_eq!(core.phase(), &Phase::Acquiring { attempt: 2 });
    }

    #[test]
    fn one_caller_at_a_time_and_a_try_leaves_when_in_line() {
        let (mut core, log) = lock_core();
        core.acquire(Caller { log: log.clone(), gone: Rc::new(Cell::new(false)), try_only: true });
        assert!(core.acquire(caller(&log)).is_empty());
        assert_eq!(*log.borrow(), ["refused InProgress"]);
        // The try is answered through the withdraw (once its node is gone), not before it.
        assert_eq!(kinds(&core.in_line(1)), ["Withdraw(1,answer)"]);
        assert_eq!(*log.borrow(), ["refused InProgress", "leaves"]);
    }

    #[test]
    fn a_caller_that_went_away_leaves_its_place_in_line_to_the_next_at_once() {
        let (mut core, log) = lock_core();
        let (first, gone) = leaving_caller(&log);
        assert_eq!(kinds(&core.acquire(first)), ["Begin(1)"]);
        gone.set(true);
        // Not "in progress": the new caller takes over the attempt already in line.
        assert!(core.acquire(caller(&log)).is_empty());
        assert_eq!(core.phase(), &Phase::Acquiring { attempt: 1 });
        assert_eq!(kinds(&core.granted(1, held(1))), ["Tell(Acquired)"]);
        assert_eq!(*log.borrow(), ["granted 7"]);
    }

    #[test]
    fn a_dropped_reentrant_acquire_does_not_give_the_grant_back_under_its_holder() {
        let (mut core, log) = holding(ConnectionPolicy::Conservative);
        // A second acquire while holding gets the same grant, and its caller drops it unread.
        assert!(core.acquire(caller(&log)).is_empty());
        assert_eq!(*log.borrow(), ["granted 7", "granted 7"]);
        assert!(core.give_back(held(1).token).is_empty(), "the first caller still has it");
        assert!(core.held().is_some());
        // The first caller drops it too: now nobody has it.
        assert_eq!(kinds(&core.give_back(held(1).token)), ["StandDown(1)", "Delete"]);
        assert_eq!(core.phase(), &Phase::Idle);
        // A give-back of an old grant touches nothing.
        let (mut core, _) = holding(ConnectionPolicy::Conservative);
        assert!(core.give_back(FencingToken(1)).is_empty());
        assert!(core.held().is_some());
    }

    #[test]
    fn a_grant_given_back_by_its_only_caller_is_released() {
        let (mut core, _) = holding(ConnectionPolicy::Conservative);
        assert_eq!(kinds(&core.give_back(held(1).token)), ["StandDown(1)", "Delete"]);
        assert!(core.give_back(held(1).token).is_empty(), "given back once only");
    }

    #[test]
    fn an_election_contends_without_callers_and_again_after_a_loss() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut core = Core::new(ConnectionPolicy::Conservative, false, true);
        assert_eq!(kinds(&core.keep_contending(true)), ["Begin(1)"]);
        assert!(core.in_line(1).is_empty(), "no caller needed to stay in line");
        core.acquire(caller(&log));
        core.acquire(caller(&log));
        assert_eq!(kinds(&core.granted(1, held(1))), ["Tell(Acquired)"]);
        assert_eq!(*log.borrow(), ["granted 7", "granted 7"]);
        assert_eq!(kinds(&core.lost(1, Loss::NodeDeleted)), ["Withdraw(1)", "Tell(Lost)", "Begin(2)"]);
    }

    #[test]
    fn a_failed_attempt_answers_its_callers_or_tells_when_none_waits() {
        let (mut core, log) = lock_core();
        core.acquire(caller(&log));
        assert!(core.failed(1, Error::NoAuth { path: "/l".into() }).is_empty());
        assert_eq!(log.borrow().len(), 1);
        assert!(log.borrow()[0].starts_with("refused Failed"));
        let mut election = Core::new(ConnectionPolicy::Conservative, false, true);
        election.keep_contending(true);
        assert_eq!(kinds(&election.failed(1, Error::NoAuth { path: "/e".into() })), ["Tell(Failed)"]);
        assert!(!election.keeps_contending());
    }
}
