//! What a recipe actor provides to the holder core ([`HolderHost`]), and [`run`], which performs
//! the core's effects for it: starting and withdrawing contenders, deleting a released node,
//! reading a node again after a reconnect, the disconnect deadline, checking for callers that
//! went away.

use std::time::Duration;

use actix::prelude::*;
use futures::FutureExt;
use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use tracing::{debug, info, warn};

use super::state::{Attempt, Deleted, Effect, GrantConnection, Happened, Holder, Phase, ReleaseError, Waiter};
use crate::error::Error;
use crate::metrics;
use crate::recipe::contender::{self, Contender, ContenderEvent, ContenderHost, ContenderSpec};
use crate::recipe::naming::Rule;
use crate::recipe::shell::{OnShell, start_beside_session};
use crate::retry::{Attempted, Backoff, RetryPolicy, Verdict, retried};
use crate::session::health::{HealthTag, RecipeState};
use crate::session::{PinnedSession, SessionEvent, SessionHandle};

/// A recipe actor built on a [`Holder`]: it starts its contenders and words its events; the
/// core decides the rest.
pub(crate) trait HolderHost: OnShell + Handler<crate::recipe::ContenderReport> {
    /// The recipe's grant.
    type Grant: super::state::Grant + 'static;
    /// The recipe's waiting caller.
    type Waiter: Waiter<Self::Grant> + 'static;
    /// The core.
    fn holder(&mut self) -> &mut Holder<Self::Grant, Self::Waiter>;
    /// The session.
    fn session(&self) -> &SessionHandle {
        self.shell().session()
    }
    /// How the recipe retries: its config's policy, else its session's.
    fn retry(&self) -> RetryPolicy {
        self.shell().retry()
    }
    /// The recipe's span.
    fn span(&self) -> &tracing::Span {
        self.shell().span()
    }
    /// The recipe's kind and path, as its metrics name them.
    fn metric(&self) -> (metrics::GrantKind, &str);
    /// The participant's id, which its nodes carry.
    fn participant_id(&self) -> &str;
    /// A contender of this participant: its node `name` in `dir`, in line by `rule`, carrying the
    /// participant's id, tagged `tag`, retrying as the recipe does.
    fn spec(&self, tag: u64, dir: String, name: &'static str, rule: Rule) -> ContenderSpec {
        let data = self.participant_id().as_bytes().to_vec();
        ContenderSpec { dir, name, rule, data, tag, retry: self.retry(), revocable: false }
    }
    /// Starts the contender(s) of `attempt`.
    fn begin(&mut self, attempt: Attempt, ctx: &mut Context<Self>);
    /// Its contender slots: one, or a semaphore's guard and lease. A contender is found by its
    /// tag in whichever slot holds it ([`ContenderHost`]).
    fn slots(&mut self) -> &mut [ContenderSlot];
    /// Withdraws the contender(s) of `attempt`; resolves once their nodes are gone.
    fn withdraw(&mut self, attempt: Attempt, ctx: &mut Context<Self>) -> LocalBoxFuture<'static, Result<(), Error>> {
        let withdrawals: Vec<_> = self.slots().iter_mut().map(|slot| slot.withdraw(attempt, ctx)).collect();
        Box::pin(futures::future::join_all(withdrawals).map(|outcomes| outcomes.into_iter().collect()))
    }
    /// Stops the contender(s) of `attempt` without deleting: the core deletes the node.
    fn stand_down(&mut self, attempt: Attempt, ctx: &mut Context<Self>) {
        for slot in self.slots() {
            slot.stand_down(attempt, ctx);
        }
    }
    /// Tells subscribers (and does whatever else the recipe does when this happens).
    fn tell(&mut self, happened: Happened<Self::Grant>, ctx: &mut Context<Self>);
}

/// Starts the host `make` builds on its session's thread ([`start_beside_session`]), its health
/// entry shown to a new tag, which is returned for the host's handle.
pub(crate) fn start_host<H: HolderHost>(
    session: &SessionHandle,
    make: impl FnOnce() -> H + Send + 'static,
) -> (Addr<H>, HealthTag) {
    let health = HealthTag::default();
    let tag = health.clone();
    let addr = start_beside_session(session, move |resident| {
        let mut host = make();
        host.shell_mut().show_health_to(tag);
        host.shell_mut().reside(resident);
        host
    });
    (addr, health)
}

/// Writes a [`HolderHost`]'s associated types, its `holder` (its field `holder`), its `metric`
/// (`GrantKind::$kind` at its config's field `$path`) and its `participant_id` (its config's).
macro_rules! host_parts {
    ($grant:ty, $waiter:ty, $kind:ident at $path:ident) => {
        type Grant = $grant;
        type Waiter = $waiter;

        fn holder(&mut self) -> &mut $crate::recipe::holder::Holder<$grant, $waiter> {
            &mut self.holder
        }

        fn metric(&self) -> ($crate::metrics::GrantKind, &str) {
            ($crate::metrics::GrantKind::$kind, &self.config.$path)
        }

        fn participant_id(&self) -> &str {
            &self.config.participation.id
        }
    };
}
pub(crate) use host_parts;

/// The contender of the current attempt, for a host that needs one per attempt (or one per
/// step of an attempt, like the semaphore's guard and lease): started, stood down and withdrawn
/// by attempt number, so that an effect for an attempt already left touches nothing. The
/// contender runs inside the host (see `recipe::contender`).
pub(crate) struct ContenderSlot {
    /// Boxed: an idle participant (most of a service's locks, most of the time) keeps a pointer,
    /// not a whole contender's worth of room.
    current: Option<Box<(Attempt, Contender)>>,
}

impl ContenderSlot {
    /// Empty.
    pub(crate) fn new() -> Self {
        ContenderSlot { current: None }
    }

    /// Starts a contender for `spec` (its tag names the attempt's reports) in `ctx`'s host,
    /// replacing whatever the slot held (which leaves, detached).
    pub(crate) fn start<H: ContenderHost>(
        &mut self,
        attempt: Attempt,
        session: &SessionHandle,
        spec: ContenderSpec,
        ctx: &mut Context<H>,
    ) {
        if let Some(mut earlier) = self.current.take().map(|slot| slot.1) {
            earlier.quiet(ctx);
            earlier.let_go();
        }
        let mut contender = Contender::new(session.clone(), spec);
        contender.begin(ctx);
        self.current = Some(Box::new((attempt, contender)));
    }

    /// True while the slot holds a contender of `attempt`.
    pub(crate) fn holds(&self, attempt: Attempt) -> bool {
        self.current.as_ref().is_some_and(|slot| slot.0 == attempt)
    }

    /// The contender tagged `tag`, if the slot holds it (for [`ContenderHost::contender`]).
    pub(crate) fn tagged(&mut self, tag: u64) -> Option<&mut Contender> {
        self.current.as_mut().map(|slot| &mut slot.1).filter(|contender| contender.tag() == tag)
    }

    /// The tag of the contender the slot holds.
    pub(crate) fn tag(&self) -> Option<u64> {
        self.current.as_ref().map(|slot| slot.1.tag())
    }

    /// Takes the contender of `attempt` out, its timers cancelled.
    fn take<H: ContenderHost>(&mut self, attempt: Attempt, ctx: &mut Context<H>) -> Option<Contender> {
        let (_, mut contender) = *self.current.take_if(|slot| slot.0 == attempt)?;
        contender.quiet(ctx);
        Some(contender)
    }

    /// Withdraws the contender of `attempt` (it deletes its node); resolves once the node is
    /// gone. The delete runs on its own: the host may stop meanwhile.
    pub(crate) fn withdraw<H: ContenderHost>(
        &mut self,
        attempt: Attempt,
        ctx: &mut Context<H>,
    ) -> LocalBoxFuture<'static, Result<(), Error>> {
        match self.take(attempt, ctx).and_then(|mut contender| contender.leave()) {
            Some(leaving) => {
                let (done, outcome) = oneshot::channel();
                actix::spawn(async move {
                    let _ = done.send(leaving.await);
                });
                Box::pin(outcome.map(|outcome| outcome.unwrap_or(Ok(()))))
            }
            None => Box::pin(futures::future::ready(Ok(()))),
        }
    }

    /// Withdraws the contender of `attempt` without waiting for it.
    pub(crate) fn let_go<H: ContenderHost>(&mut self, attempt: Attempt, ctx: &mut Context<H>) {
        if let Some(mut contender) = self.take(attempt, ctx) {
            contender.let_go();
        }
    }

    /// Withdraws the contender of `attempt` once `after` resolves, detached (its host may be
    /// gone by then): an election that stops while its leader actor is still stopping.
    pub(crate) fn withdraw_after<H: ContenderHost>(
        &mut self,
        attempt: Attempt,
        after: impl std::future::Future<Output = ()> + 'static,
        ctx: &mut Context<H>,
    ) {
        if let Some(mut contender) = self.take(attempt, ctx) {
            actix::spawn(async move {
                after.await;
                if let Some(leaving) = contender.leave() {
                    let _ = leaving.await;
                }
            });
        }
    }

    /// Lets whatever contender the slot holds go, detached.
    pub(crate) fn let_go_any<H: ContenderHost>(&mut self, ctx: &mut Context<H>) {
        if let Some(mut contender) = self.current.take().map(|slot| slot.1) {
            contender.quiet(ctx);
            contender.let_go();
        }
    }

    /// Stops the contender of `attempt` without a delete.
    pub(crate) fn stand_down<H: ContenderHost>(&mut self, attempt: Attempt, ctx: &mut Context<H>) {
        if let Some(contender) = self.take(attempt, ctx) {
            contender.stand_down();
        }
    }
}

/// A session event for a holder host: its core first, then its contenders (a session expiry
/// ends a held grant before a contender says so).
pub(crate) fn session_event<H: HolderHost>(host: &mut H, event: &SessionEvent, ctx: &mut Context<H>) {
    let tags: Vec<u64> = host.slots().iter().filter_map(ContenderSlot::tag).collect();
    let effects = host.holder().session(event);
    run(host, effects, ctx);
    for tag in tags {
        contender::step(host, tag, ctx, |contender, ctx| contender.session_event(event, ctx));
    }
}

/// The host stops: the core lets go of its grant or leaves the line, then every contender left
/// goes too (one the core no longer counts on, a semaphore's guard say, must not outlive it).
pub(crate) fn stopped<H: HolderHost>(host: &mut H, ctx: &mut Context<H>) {
    let effects = host.holder().stop();
    run(host, effects, ctx);
    for slot in host.slots() {
        slot.let_go_any(ctx);
    }
}

impl<H: HolderHost> ContenderHost for H {
    fn contender(&mut self, tag: u64) -> Option<&mut Contender> {
        self.slots().iter_mut().find_map(|slot| slot.tagged(tag))
    }
}

/// A handle's caller stopped waiting (dropped its future): the attempt leaves the line now if no
/// caller is left, instead of at the next periodic check.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub(crate) struct CallerGone;

/// [`CallerGone`] for a holder host.
pub(crate) fn caller_gone<H: HolderHost>(host: &mut H, ctx: &mut Context<H>) {
    let Some(attempt) = host.holder().attempt() else { return };
    let effects = host.holder().drop_gone(attempt);
    run(host, effects, ctx);
}

/// [`Goodbye`](crate::session::requests::Goodbye) for a holder host (its session is closing): let
/// go of the grant, or leave the line; answered once the node is gone.
pub(crate) fn goodbye<H: HolderHost>(host: &mut H, ctx: &mut Context<H>) -> futures::future::BoxFuture<'static, ()> {
    let (answer, answered) = oneshot::channel();
    let effects = host.holder().release(answer);
    run(host, effects, ctx);
    Box::pin(async move {
        let _ = answered.await;
    })
}

/// Feeds a contender's report about `attempt` to the core; the won node is worded as the
/// recipe's grant.
pub(crate) fn report<H: HolderHost>(host: &mut H, attempt: Attempt, event: ContenderEvent, ctx: &mut Context<H>) {
    if let ContenderEvent::Granted { token, session_id, .. } = &event {
        // Shown before the core answers the callers: a caller on another thread (the actor runs
        // on the session's) reads the recipe's health as soon as its acquire returns.
        if let Some(link) = host.holder().would_hold(attempt, *session_id) {
            let state = match link {
                GrantConnection::Up => RecipeState::Holding { token: *token },
                _ => RecipeState::Suspended { token: *token },
            };
            show_health(host, state);
        }
    }
    let lease = host.session().lease().clone();
    let effects = host.holder().report(attempt, event, |node, token, version, session| {
        <H::Grant as super::state::Grant>::won(node, token, version, session, lease)
    });
    run(host, effects, ctx);
}

/// Performs `effects` for `host`, in order.
pub(crate) fn run<H: HolderHost>(host: &mut H, effects: Vec<Effect<H::Grant>>, ctx: &mut Context<H>) {
    let failed = effects.iter().find_map(|effect| match effect {
        Effect::Tell(Happened::Failed(error)) => Some(error.to_string()),
        _ => None,
    });
    perform(host, effects, ctx);
    check_callers(host, ctx);
    settle_timeout(host, ctx);
    report_health(host, failed);
}

/// Puts where the core stands on the recipe's health slot: the one place every lock, semaphore
/// and election reports its health.
fn report_health<H: HolderHost>(host: &mut H, failed: Option<String>) {
    let state = match host.holder().phase() {
        Phase::Idle => match failed {
            Some(reason) => RecipeState::Failed { reason },
            None => RecipeState::Idle,
        },
        Phase::Acquiring { .. } => RecipeState::Waiting,
        Phase::Held { held, link: GrantConnection::Up, .. } => RecipeState::Holding { token: held.token },
        Phase::Held { held, .. } => RecipeState::Suspended { token: held.token },
    };
    show_health(host, state);
}

/// Puts `state` on the recipe's health slot (made the first time). A failure stays told until
/// the recipe does something again.
fn show_health<H: HolderHost>(host: &mut H, state: RecipeState) {
    if !host.shell().has_health() {
        let (kind, path) = host.metric();
        let path = path.to_owned();
        host.shell_mut().health_slot(kind.label(), &path);
    }
    let Some(slot) = host.shell_mut().health() else { return };
    if state != RecipeState::Idle || !matches!(slot.state(), RecipeState::Failed { .. }) {
        slot.set(state);
    }
}

fn perform<H: HolderHost>(host: &mut H, effects: Vec<Effect<H::Grant>>, ctx: &mut Context<H>) {
    for effect in effects {
        match effect {
            Effect::Begin(attempt) => {
                debug!(parent: host.span(), attempt, "standing in line");
                host.holder().timing.begun = Some(std::time::Instant::now());
                host.begin(attempt, ctx);
            }
            Effect::Withdraw { attempt, then } => {
                debug!(parent: host.span(), attempt, "leaving the line");
                let withdrawn = host.withdraw(attempt, ctx);
                actix::spawn(async move {
                    let outcome = withdrawn.await.map_err(ReleaseError::ZooKeeper);
                    for answer in then {
                        let _ = answer.send(outcome.clone());
                    }
                });
            }
            Effect::StandDown(attempt) => host.stand_down(attempt, ctx),
            Effect::Delete { held, then } => {
                info!(parent: host.span(), node = %held.node, token = %held.token, "releasing");
                // Detached, so that the delete (and its retries) complete even if we stop now; the
                // request itself is sent here, ahead of anything we send next.
                let deleted = delete_held(host.session().pinned(held.generation), held.node.clone(), host.retry());
                let (done, outcome) = oneshot::channel();
                actix::spawn(async move {
                    let _ = done.send(deleted.await);
                });
                ctx.spawn(outcome.into_actor(host).map(move |outcome, act, ctx| {
                    let outcome = outcome.unwrap_or(Err(Error::Closed));
                    let effects = act.holder().released(held, outcome, then);
                    run(act, effects, ctx);
                }));
            }
            Effect::Verify { attempt, node } => {
                let backoff = host.retry().backoff();
                verify(host, attempt, node, backoff, ctx)
            }
            Effect::ArmDeadline(attempt) => {
                let timer = disconnect_deadline(host.session(), ctx, move |act: &mut H, ctx| {
                    let effects = act.holder().deadline_passed(attempt);
                    run(act, effects, ctx);
                });
                if let Some(old) = host.holder().deadline.replace(timer) {
                    ctx.cancel_future(old);
                }
            }
            Effect::CancelDeadline => {
                if let Some(timer) = host.holder().deadline.take() {
                    ctx.cancel_future(timer);
                }
            }
            Effect::Tell(happened) => {
                count(host, &happened);
                match &happened {
                    Happened::Acquired(held) => {
                        info!(parent: host.span(), node = %held.node, token = %held.token, "acquired")
                    }
                    Happened::Lost(held, loss) => warn!(parent: host.span(), node = %held.node, ?loss, "lost"),
                    Happened::Released(held) => info!(parent: host.span(), node = %held.node, "released"),
                    Happened::Suspended(held) => info!(parent: host.span(), node = %held.node, "suspended"),
                    Happened::Restored(held) => info!(parent: host.span(), node = %held.node, "restored"),
                    Happened::Failed(error) => warn!(parent: host.span(), %error, "failed"),
                }
                host.tell(happened, ctx);
            }
        }
    }
}

/// The wait and hold metrics of what `happened`.
fn count<H: HolderHost>(host: &mut H, happened: &Happened<H::Grant>) {
    let now = std::time::Instant::now();
    let ended = match happened {
        Happened::Acquired(_) => {
            let waited = host.holder().timing.begun.take().map(|begun| now - begun).unwrap_or_default();
            host.holder().timing.granted = Some(now);
            let (kind, path) = host.metric();
            metrics::granted(kind, path, waited);
            return;
        }
        Happened::Released(_) => "released",
        Happened::Lost(..) => "lost",
        Happened::Suspended(_) | Happened::Restored(_) | Happened::Failed(_) => return,
    };
    if let Some(granted) = host.holder().timing.granted.take() {
        let (kind, path) = host.metric();
        metrics::grant_ended(kind, path, now - granted, ended);
    }
}

/// Reads the held node again after a reconnect. A read that fails for a passing reason (the
/// connection flapped again) is tried again while the grant still waits for it: giving up would
/// leave the grant unconfirmed until the disconnect deadline calls it lost, though it lives.
fn verify<H: HolderHost>(host: &mut H, attempt: Attempt, node: String, mut backoff: Backoff, ctx: &mut Context<H>) {
    let read = host.session().exists(&node);
    ctx.spawn(read.into_actor(host).map(move |read, act, ctx| {
        let verdict = match &read {
            Err(error) if act.holder().is_verifying(attempt) => backoff.verdict(error),
            _ => Verdict::GiveUp,
        };
        match (read, verdict) {
            (Err(error), Verdict::RetryAfter(delay)) => {
                debug!(parent: act.span(), %node, %error, "reading the held node again failed; retrying");
                ctx.run_later(delay, move |act, ctx| {
                    if act.holder().is_verifying(attempt) {
                        verify(act, attempt, node, backoff, ctx);
                    }
                });
            }
            (read, _) => {
                let effects = act.holder().verified(attempt, read.map(|stat| stat.is_some()));
                run(act, effects, ctx);
            }
        }
    }));
}

/// Ends `attempt` after `after` if it has not been granted by then (a caller's own timeout).
/// The timer is cancelled as soon as the attempt is granted or left (see [`run`]).
pub(crate) fn time_out<H: HolderHost>(host: &mut H, attempt: Attempt, after: Duration, ctx: &mut Context<H>) {
    let timer = ctx.run_later(after, move |act, ctx| {
        act.holder().timeout = None;
        let effects = act.holder().timed_out(attempt, after);
        run(act, effects, ctx);
    });
    if let Some((_, old)) = host.holder().timeout.replace((attempt, timer)) {
        ctx.cancel_future(old);
    }
}

/// Cancels the caller's timeout, whatever its attempt (a caller without one took the place in
/// line of a caller that had one).
pub(crate) fn cancel_timeout<H: HolderHost>(host: &mut H, ctx: &mut Context<H>) {
    if let Some((_, timer)) = host.holder().timeout.take() {
        ctx.cancel_future(timer);
    }
}

/// Cancels the caller's timeout once its attempt no longer waits: a timer left to run out keeps
/// costing (actix polls every pending future of an actor whenever the actor wakes).
fn settle_timeout<H: HolderHost>(host: &mut H, ctx: &mut Context<H>) {
    let holder = host.holder();
    let waiting = holder.timeout.as_ref().is_some_and(|(attempt, _)| holder.is_acquiring(*attempt));
    if !waiting {
        if let Some((_, timer)) = host.holder().timeout.take() {
            ctx.cancel_future(timer);
        }
    }
}

/// A caller that dropped its request must not keep a node in line: watched while callers wait
/// in line, and acted on as the caller goes, not on a timer: the watch asks each waiting
/// caller's reply channel to wake the actor when its caller drops it.
///
/// One watch per actor, whichever attempt it finds: actix polls every future an actor has
/// spawned each time the actor wakes, so a watch per `Acquire` (most of them granted at once)
/// would make every message cost as much as the watches pending.
fn check_callers<H: HolderHost>(host: &mut H, ctx: &mut Context<H>) {
    if !host.holder().attempt().is_some_and(|attempt| host.holder().is_acquiring(attempt))
        || !host.holder().has_waiters()
        || std::mem::replace(&mut host.holder().checking_callers, true)
    {
        return;
    }
    ctx.spawn(CallersWatch);
}

/// The watch of [`check_callers`]: ends once no caller waits in line.
struct CallersWatch;

impl<H: HolderHost> ActorFuture<H> for CallersWatch {
    type Output = ();

    fn poll(
        self: std::pin::Pin<&mut Self>,
        act: &mut H,
        ctx: &mut Context<H>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        loop {
            let attempt = act.holder().attempt().filter(|&attempt| act.holder().is_acquiring(attempt));
            let Some(attempt) = attempt.filter(|_| act.holder().has_waiters()) else {
                act.holder().checking_callers = false;
                return std::task::Poll::Ready(());
            };
            if !act.holder().poll_callers_gone(cx) {
                return std::task::Poll::Pending;
            }
            let effects = act.holder().drop_gone(attempt);
            run(act, effects, ctx);
        }
    }
}

/// Deletes a held node, retrying through connection loss, and says whether it was ours to delete.
///
/// Pinned to the session that made the node: once that session has ended, the node went with
/// it, and a delete queued for the next session would wait for one (for ever, with the servers
/// unreachable).
fn delete_held(
    session: PinnedSession,
    path: String,
    retry: RetryPolicy,
) -> impl std::future::Future<Output = Result<Deleted, Error>> {
    // Without the attempt limit: the contender has stood down, so a delete given up on would
    // leave our node in the others' way until our session ends.
    let backoff = retry.without_attempt_limit().backoff();
    // Whether an earlier attempt may have deleted it (its reply lost).
    let unsure = std::rc::Rc::new(std::cell::Cell::new(false));
    retried(backoff, move || {
        let (sent, path, unsure) = (session.delete(&path, None), path.clone(), unsure.clone());
        async move {
            match sent.await {
                Ok(()) => Attempted::Done(Deleted::ByUs),
                Err(Error::NoNode { .. }) => {
                    Attempted::Done(Deleted::Gone { unsure: unsure.get(), session_lost: false })
                }
                Err(Error::SessionLost { .. }) => {
                    Attempted::Done(Deleted::Gone { unsure: unsure.get(), session_lost: true })
                }
                Err(err) => {
                    debug!(%path, error = %err, "delete interrupted; retrying");
                    if matches!(err, Error::ConnectionLoss { .. }) {
                        unsure.set(true);
                    }
                    Attempted::Again(err)
                }
            }
        }
    })
}

/// Under [`ConnectionPolicy::Conservative`](super::ConnectionPolicy::Conservative), a holder whose connection dropped stops claiming its
/// grant after one session timeout: by then the server has most likely expired the session.
/// Runs `give_up` after the session's negotiated timeout; cancel the returned handle when the
/// connection comes back.
fn disconnect_deadline<A>(
    session: &SessionHandle,
    ctx: &mut Context<A>,
    give_up: impl FnOnce(&mut A, &mut Context<A>) + 'static,
) -> SpawnHandle
where
    A: Actor<Context = Context<A>>,
{
    use crate::session::IntoActorFree;
    let snapshot = session.session();
    let wait = async move {
        let timeout = snapshot.await.map(|s| s.timeout).unwrap_or_default();
        tokio::time::sleep(timeout).await;
    };
    ctx.spawn(wait.into_actor_free().map(move |(), act, ctx| give_up(act, ctx)))
}
