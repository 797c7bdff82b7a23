//! [`LockActor`]: one participant of one lock (exclusive, read or write).
//!
//! Owns: the lock's request/reply handling (`Acquire`, `TryAcquire`, `Release`), timeouts,
//! cancellation, the connection policy for a holder, and [`LockEvent`]s to subscribers.
//! Does not own the node: each attempt is a [`Contender`] (protected create, predecessor watch,
//! recovery), started on this actor's Arbiter.
//!
//! State machine: `Idle → Acquiring{attempt} → Held{grant, link: Up|Suspended} → Idle`.

use actix::prelude::*;
use futures::channel::oneshot;
use tracing::{debug, info, warn};

use super::error::LockError;
use super::grant::LockGrant;
use super::messages::{Acquire, GiveBack, LockEvent, LockLostReason, Participants, Release, Subscribe, TryAcquire};
use crate::recipe::naming::{self, LOCK_NAME, READ_NAME, Rule, WRITE_NAME};
use crate::recipe::{
    Abandon, ConnectionPolicy, Contender, ContenderEvent, ContenderReport, ContenderSpec, Reply, Withdraw,
    delete_until_gone, disconnect_deadline,
};
use crate::session::{SessionEvent, SessionHandle};

/// Which lock of a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LockKind {
    /// Curator's `InterProcessMutex`: nodes `_c_<uuid>-lock-<seq>`.
    #[default]
    Exclusive,
    /// The read side of Curator's `InterProcessReadWriteLock`: nodes `_c_<uuid>-__READ__<seq>`;
    /// held by many readers at once while no writer is ahead.
    Read,
    /// The write side: nodes `_c_<uuid>-__WRIT__<seq>`; excludes readers and writers.
    Write,
}

impl LockKind {
    fn node_name(self) -> &'static str {
        match self {
            LockKind::Exclusive => LOCK_NAME,
            LockKind::Read => READ_NAME,
            LockKind::Write => WRITE_NAME,
        }
    }

    fn rule(self) -> Rule {
        match self {
            LockKind::Exclusive | LockKind::Write => Rule::Exclusive,
            LockKind::Read => Rule::Shared,
        }
    }
}

/// How a [`LockActor`] behaves.
#[derive(Debug, Clone)]
pub struct LockConfig {
    dir: String,
    kind: LockKind,
    participant_id: String,
    policy: ConnectionPolicy,
    reacquire_after_loss: bool,
}

impl LockConfig {
    /// An exclusive lock at `dir` (the directory holding the contenders' nodes).
    pub fn new(dir: impl Into<String>) -> Self {
        LockConfig {
            dir: dir.into(),
            kind: LockKind::Exclusive,
            participant_id: naming::default_participant_id(),
            policy: ConnectionPolicy::default(),
            reacquire_after_loss: false,
        }
    }

    /// Exclusive, read or write.
    pub fn with_kind(mut self, kind: LockKind) -> Self {
        self.kind = kind;
        self
    }

    /// Stored as the lock node's data (default: the host name), so that operators can see who
    /// holds or waits.
    pub fn with_participant_id(mut self, id: impl Into<String>) -> Self {
        self.participant_id = id.into();
        self
    }

    /// What a holder assumes when the connection drops (default: conservative).
    pub fn with_policy(mut self, policy: ConnectionPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// After losing a held lock (session expired, node deleted), stand in line again on our own.
    /// Off by default: a holder that lost its lock must decide what it was doing first.
    pub fn with_reacquire_after_loss(mut self, reacquire: bool) -> Self {
        self.reacquire_after_loss = reacquire;
        self
    }

    /// The lock directory.
    pub fn dir(&self) -> &str {
        &self.dir
    }
}

/// Who is waiting for the current attempt.
enum Pending {
    Acquire(oneshot::Sender<Result<LockGrant, LockError>>),
    Try(oneshot::Sender<Result<Option<LockGrant>, LockError>>),
    /// Re-entering after a loss (`reacquire_after_loss`): nobody waits for a reply.
    Reacquire,
}

enum Link {
    Up,
    Suspended { deadline: Option<SpawnHandle> },
}

enum LockState {
    Idle,
    Acquiring { attempt: u64, contender: Addr<Contender>, pending: Pending },
    Held { attempt: u64, contender: Addr<Contender>, grant: LockGrant, link: Link },
}

/// One participant of one lock (exclusive, read or write).
///
/// Each attempt is a [`Contender`]; this actor handles the requests, timeouts, cancellation,
/// the connection policy of a holder, and tells subscribers what happened. State machine:
/// `Idle → Acquiring{attempt} → Held{grant, link: Up|Suspended} → Idle`.
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::lock::LockError> {
/// use actix::Actor;
/// use actix_zookeeper::lock::{Acquire, LockActor, LockConfig, Release};
///
/// let lock = LockActor::new(session.clone(), LockConfig::new("/locks/report")).start();
/// let grant = lock.send(Acquire::default()).await.expect("lock actor alive")?;
/// println!("holding {} with token {}", grant.node, grant.token);
/// lock.send(Release).await.expect("lock actor alive")?;
/// # Ok(()) }
/// ```
pub struct LockActor {
    session: SessionHandle,
    config: LockConfig,
    state: LockState,
    attempts: u64,
    subscribers: Vec<Recipient<LockEvent>>,
    span: tracing::Span,
}

impl LockActor {
    /// A lock actor; start it on your Arbiter with `.start()`.
    pub fn new(session: SessionHandle, config: LockConfig) -> Self {
        let span = tracing::info_span!("zk.lock", dir = %config.dir, kind = ?config.kind);
        LockActor { session, config, state: LockState::Idle, attempts: 0, subscribers: Vec::new(), span }
    }

    fn broadcast(&mut self, event: LockEvent) {
        self.subscribers.retain(|s| s.connected());
        for subscriber in &self.subscribers {
            subscriber.do_send(event.clone());
        }
    }

    fn start_attempt(&mut self, pending: Pending, ctx: &mut Context<Self>) -> u64 {
        self.attempts += 1;
        let attempt = self.attempts;
        let spec = ContenderSpec {
            dir: self.config.dir.clone(),
            name: self.config.kind.node_name(),
            rule: self.config.kind.rule(),
            data: self.config.participant_id.clone().into_bytes(),
            tag: attempt,
        };
        let contender = Contender::new(self.session.clone(), spec, ctx.address().recipient()).start();
        debug!(parent: &self.span, attempt, "standing in line");
        self.state = LockState::Acquiring { attempt, contender, pending };
        attempt
    }

    /// Withdraws `contender` in the background; `then` runs once its node is gone.
    fn withdraw(
        &mut self,
        contender: Addr<Contender>,
        ctx: &mut Context<Self>,
        then: impl FnOnce(&mut Self, Result<(), LockError>) + 'static,
    ) {
        let withdrawn = contender.send(Withdraw);
        ctx.spawn(withdrawn.into_actor(self).map(move |outcome, act, _| {
            let outcome = match outcome {
                Ok(Ok(())) | Err(_) => Ok(()), // a stopped contender already cleaned up
                Ok(Err(err)) => Err(LockError::ZooKeeper(err)),
            };
            then(act, outcome)
        }));
    }

    /// Ends the current attempt or holding, leaving the actor idle.
    fn abandon(&mut self, ctx: &mut Context<Self>) -> Option<Pending> {
        match std::mem::replace(&mut self.state, LockState::Idle) {
            LockState::Idle => None,
            LockState::Acquiring { contender, pending, .. } => {
                self.withdraw(contender, ctx, |_, _| {});
                Some(pending)
            }
            LockState::Held { contender, link, .. } => {
                if let Link::Suspended { deadline: Some(timer) } = link {
                    ctx.cancel_future(timer);
                }
                self.withdraw(contender, ctx, |_, _| {});
                None
            }
        }
    }

    fn on_granted(&mut self, grant: LockGrant, ctx: &mut Context<Self>) {
        let LockState::Acquiring { attempt, .. } = &self.state else { return };
        let attempt = *attempt;
        let LockState::Acquiring { contender, pending, .. } = std::mem::replace(&mut self.state, LockState::Idle)
        else {
            return;
        };
        let delivered = match pending {
            Pending::Acquire(reply) => reply.send(Ok(grant.clone())).is_ok(),
            Pending::Try(reply) => reply.send(Ok(Some(grant.clone()))).is_ok(),
            Pending::Reacquire => true,
        };
        if !delivered {
            // The caller gave up (dropped its request): nobody holds this grant, so give it back.
            debug!(parent: &self.span, node = %grant.node, "acquire cancelled by its caller; releasing");
            self.withdraw(contender, ctx, |_, _| {});
            return;
        }
        info!(parent: &self.span, node = %grant.node, token = %grant.token, "lock acquired");
        self.state = LockState::Held { attempt, contender, grant: grant.clone(), link: Link::Up };
        self.broadcast(LockEvent::Acquired { grant });
    }

    fn on_lost(&mut self, reason: LockLostReason, ctx: &mut Context<Self>) {
        let LockState::Held { grant, .. } = &self.state else { return };
        let token = grant.token;
        warn!(parent: &self.span, node = %grant.node, ?reason, "lock lost");
        self.abandon(ctx);
        self.broadcast(LockEvent::Lost { token, reason });
        if self.config.reacquire_after_loss {
            self.start_attempt(Pending::Reacquire, ctx);
        }
    }

    fn on_suspended(&mut self, ctx: &mut Context<Self>) {
        let LockState::Held { attempt, grant, link, .. } = &mut self.state else { return };
        if !matches!(link, Link::Up) {
            return;
        }
        let (attempt, token) = (*attempt, grant.token);
        *link = Link::Suspended { deadline: None };
        self.broadcast(LockEvent::Suspended { token });
        if self.config.policy == ConnectionPolicy::Conservative {
            let timer = disconnect_deadline(&self.session, ctx, move |act: &mut Self, ctx| {
                if matches!(&act.state, LockState::Held { attempt: a, link: Link::Suspended { .. }, .. } if *a == attempt)
                {
                    act.on_lost(LockLostReason::DisconnectedTooLong, ctx);
                }
            });
            if let LockState::Held { link: Link::Suspended { deadline }, .. } = &mut self.state {
                *deadline = Some(timer);
            }
        }
    }

    fn on_reconnected(&mut self, ctx: &mut Context<Self>) {
        let LockState::Held { grant, link, .. } = &mut self.state else { return };
        if let Link::Suspended { deadline } = std::mem::replace(link, Link::Up) {
            if let Some(timer) = deadline {
                ctx.cancel_future(timer);
            }
            let token = grant.token;
            self.broadcast(LockEvent::Reconnected { token });
        }
    }

    /// A caller that dropped its `Acquire` must not keep a node in the line forever. Checked
    /// only while waiting (a periodic timer would keep the actor alive after its last address
    /// is dropped, and dropping it is how a user stops it).
    fn watch_for_cancellation(&mut self, attempt: u64, ctx: &mut Context<Self>) {
        ctx.run_later(std::time::Duration::from_millis(250), move |act, ctx| match &act.state {
            LockState::Acquiring { attempt: a, pending: Pending::Acquire(reply), .. } if *a == attempt => {
                if reply.is_canceled() {
                    debug!(parent: &act.span, "acquire abandoned by its caller; leaving the line");
                    act.abandon(ctx);
                } else {
                    act.watch_for_cancellation(attempt, ctx);
                }
            }
            _ => {}
        });
    }

    fn current_contender(&self) -> Option<&Addr<Contender>> {
        match &self.state {
            LockState::Acquiring { contender, .. } | LockState::Held { contender, .. } => Some(contender),
            LockState::Idle => None,
        }
    }

    fn current_attempt(&self) -> Option<u64> {
        match &self.state {
            LockState::Acquiring { attempt, .. } | LockState::Held { attempt, .. } => Some(*attempt),
            LockState::Idle => None,
        }
    }
}

impl Actor for LockActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.session.subscribe(ctx.address().recipient());
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        // Stopping releases: the contender deletes its node (it outlives us on the Arbiter).
        if let Some(contender) = self.current_contender() {
            contender.do_send(Withdraw);
        }
    }
}

impl Handler<Acquire> for LockActor {
    type Result = Reply<Result<LockGrant, LockError>>;

    fn handle(&mut self, msg: Acquire, ctx: &mut Context<Self>) -> Self::Result {
        let dir = self.config.dir.clone();
        let (tx, reply) = Reply::later(Err(LockError::Cancelled { dir: dir.clone() }));
        match &mut self.state {
            LockState::Held { grant, .. } => return Reply::Now(Ok(grant.clone())),
            LockState::Acquiring { pending: pending @ Pending::Reacquire, .. } => *pending = Pending::Acquire(tx),
            LockState::Acquiring { .. } => return Reply::Now(Err(LockError::AcquireInProgress { dir })),
            LockState::Idle => {
                let attempt = self.start_attempt(Pending::Acquire(tx), ctx);
                self.watch_for_cancellation(attempt, ctx);
            }
        }
        if let (Some(timeout), Some(attempt)) = (msg.timeout, self.current_attempt()) {
            ctx.run_later(timeout, move |act, ctx| {
                if matches!(&act.state, LockState::Acquiring { attempt: a, .. } if *a == attempt) {
                    info!(parent: &act.span, ?timeout, "acquire timed out; leaving the line");
                    if let Some(Pending::Acquire(reply)) = act.abandon(ctx) {
                        let _ = reply.send(Err(LockError::Timeout { dir: act.config.dir.clone(), after: timeout }));
                    }
                }
            });
        }
        reply
    }
}

impl Handler<TryAcquire> for LockActor {
    type Result = Reply<Result<Option<LockGrant>, LockError>>;

    fn handle(&mut self, _: TryAcquire, ctx: &mut Context<Self>) -> Self::Result {
        let dir = self.config.dir.clone();
        match &self.state {
            LockState::Held { grant, .. } => return Reply::Now(Ok(Some(grant.clone()))),
            LockState::Acquiring { .. } => return Reply::Now(Err(LockError::AcquireInProgress { dir })),
            LockState::Idle => {}
        }
        let (tx, reply) = Reply::later(Err(LockError::Cancelled { dir }));
        self.start_attempt(Pending::Try(tx), ctx);
        reply
    }
}

impl Handler<Release> for LockActor {
    type Result = ResponseFuture<Result<(), LockError>>;

    fn handle(&mut self, _: Release, ctx: &mut Context<Self>) -> Self::Result {
        let dir = self.config.dir.clone();
        let (tx, rx) = oneshot::channel();
        match std::mem::replace(&mut self.state, LockState::Idle) {
            LockState::Idle => return Box::pin(futures::future::ready(Err(LockError::NotHeld { dir }))),
            LockState::Acquiring { contender, pending, .. } => {
                match pending {
                    Pending::Acquire(reply) => {
                        let _ = reply.send(Err(LockError::Cancelled { dir: dir.clone() }));
                    }
                    Pending::Try(reply) => {
                        let _ = reply.send(Err(LockError::Cancelled { dir: dir.clone() }));
                    }
                    Pending::Reacquire => {}
                }
                self.withdraw(contender, ctx, move |_, outcome| {
                    let _ = tx.send(outcome);
                });
            }
            LockState::Held { contender, grant, link, .. } => {
                if let Link::Suspended { deadline: Some(timer) } = link {
                    ctx.cancel_future(timer);
                }
                // The delete is sent now and we are idle at once: a following `Acquire` queues
                // its create right behind the delete on the session.
                // Detached, so that the delete completes even if we stop right after (a dropped
                // request is never handled by the session).
                let deleted = delete_until_gone(self.session.clone(), grant.node.clone());
                contender.do_send(Abandon);
                let me = ctx.address().downgrade();
                actix::spawn(async move {
                    let outcome = deleted.await.map_err(LockError::ZooKeeper);
                    if outcome.is_ok() {
                        if let Some(me) = me.upgrade() {
                            me.do_send(Announce(LockEvent::Released { node: grant.node }));
                        }
                    }
                    let _ = tx.send(outcome);
                });
            }
        }
        Box::pin(async move { rx.await.unwrap_or(Ok(())) })
    }
}

impl Handler<ContenderReport> for LockActor {
    type Result = ();

    fn handle(&mut self, report: ContenderReport, ctx: &mut Context<Self>) {
        if Some(report.tag) != self.current_attempt() {
            return; // from an attempt we already left; that contender cleans up after itself
        }
        match report.event {
            ContenderEvent::Granted { node, token, version, .. } => {
                self.on_granted(LockGrant { node, token, version }, ctx)
            }
            ContenderEvent::Waiting { .. } => {
                if matches!(&self.state, LockState::Acquiring { pending: Pending::Try(_), .. }) {
                    if let Some(Pending::Try(reply)) = self.abandon(ctx) {
                        let _ = reply.send(Ok(None));
                    }
                }
            }
            ContenderEvent::Lost { reason, .. } => self.on_lost(reason.into(), ctx),
            ContenderEvent::Failed { error } => match std::mem::replace(&mut self.state, LockState::Idle) {
                LockState::Acquiring { pending, .. } => match pending {
                    Pending::Acquire(reply) => {
                        let _ = reply.send(Err(LockError::ZooKeeper(error)));
                    }
                    Pending::Try(reply) => {
                        let _ = reply.send(Err(LockError::ZooKeeper(error)));
                    }
                    Pending::Reacquire => warn!(parent: &self.span, %error, "could not re-acquire the lock"),
                },
                LockState::Held { grant, .. } => {
                    self.broadcast(LockEvent::Lost { token: grant.token, reason: LockLostReason::SessionClosed })
                }
                LockState::Idle => {}
            },
        }
    }
}

impl Handler<SessionEvent> for LockActor {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        if let Some(contender) = self.current_contender() {
            contender.do_send(event.clone());
        }
        match event {
            SessionEvent::Suspended { .. } => self.on_suspended(ctx),
            SessionEvent::Reconnected { .. } => self.on_reconnected(ctx),
            _ => {}
        }
    }
}

impl Handler<Subscribe> for LockActor {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) {
        self.subscribers.push(msg.recipient);
    }
}

/// An event to tell subscribers from outside the actor's context (a detached task).
#[derive(Message)]
#[rtype(result = "()")]
struct Announce(LockEvent);

impl Handler<Announce> for LockActor {
    type Result = ();

    fn handle(&mut self, msg: Announce, _: &mut Context<Self>) {
        if let LockEvent::Released { node } = &msg.0 {
            info!(parent: &self.span, %node, "lock released");
        }
        self.broadcast(msg.0);
    }
}

impl Handler<Participants> for LockActor {
    type Result = ResponseFuture<Result<Vec<String>, LockError>>;

    fn handle(&mut self, _: Participants, _: &mut Context<Self>) -> Self::Result {
        let read = crate::recipe::participants::read_participants(self.session.clone(), self.config.dir.clone());
        Box::pin(async move { read.await.map_err(LockError::ZooKeeper) })
    }
}

impl Handler<GiveBack> for LockActor {
    type Result = ();

    fn handle(&mut self, msg: GiveBack, ctx: &mut Context<Self>) {
        if matches!(&self.state, LockState::Held { grant, .. } if grant.token == msg.token) {
            ctx.notify(Release);
        }
    }
}
