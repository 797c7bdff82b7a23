//! [`LockActor`]: one participant of one lock (exclusive, read or write).
//!
//! Owns: starting one contender per attempt and wording what the holder core decides as lock
//! requests and [`LockEvent`]s. Does not own the node (the contender's) or any decision about
//! holding (the holder core's, `recipe::holder`: attempts, callers, link state, connection
//! policy, expiry, release).

use actix::prelude::*;

use super::config::LockConfig;
use super::error::LockError;
use super::grant::LockGrant;
use super::holding::{self, LockWaiter};
use super::messages::{Acquire, LockEvent, Participants, TryAcquire};
use crate::recipe::holder::{self, Attempt, ContenderSlot, Happened, Holder, HolderHost};
use crate::recipe::shell::Shell;
use crate::recipe::{ContenderEvent, ContenderReport, ContenderSpec, Reply};
use crate::reply::Asked;
use crate::session::SessionHandle;

/// One participant of one lock (exclusive, read or write); see `docs/recipes/lock.md`.
///
/// Each attempt is a contender (one node in line); the holder core decides what requests, contender reports
/// and session events mean. Most programs use it through a [`LockHandle`](super::LockHandle).
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
    config: LockConfig,
    holder: Holder<LockGrant, LockWaiter>,
    contender: ContenderSlot,
    /// Kept last: its lifeline must drop after everything else the actor holds.
    shell: Shell<LockEvent>,
}

impl LockActor {
    /// A lock actor; start it on your Arbiter with `.start()`.
    pub fn new(session: SessionHandle, config: LockConfig) -> Self {
        let span = tracing::info_span!("zk.lock", dir = %config.dir, kind = ?config.kind);
        let holder = Holder::new(config.participation.policy, true, config.reacquire_after_loss);
        LockActor {
            shell: Shell::new(session, span, config.participation.retry),
            config,
            holder,
            contender: ContenderSlot::new(),
        }
    }
}

impl HolderHost for LockActor {
    crate::recipe::holder::host_parts!(LockGrant, LockWaiter, Lock at dir);

    fn begin(&mut self, attempt: Attempt, ctx: &mut Context<Self>) {
        let (name, rule) = (self.config.kind.node_name(), self.config.kind.rule());
        let spec = ContenderSpec {
            revocable: self.config.revocable,
            ..self.spec(attempt, self.config.dir.clone(), name, rule)
        };
        self.contender.start(attempt, self.shell.session(), spec, ctx);
    }

    fn slots(&mut self) -> &mut [ContenderSlot] {
        std::slice::from_mut(&mut self.contender)
    }

    fn tell(&mut self, happened: Happened<LockGrant>, _: &mut Context<Self>) {
        if let Some(event) = holding::event(&self.config.participation.id, happened) {
            self.shell.tell(event);
        }
    }
}

impl Handler<Acquire> for LockActor {
    type Result = Reply<Result<LockGrant, LockError>>;

    fn handle(&mut self, msg: Acquire, ctx: &mut Context<Self>) -> Self::Result {
        let dir = self.config.dir.clone();
        holding::acquire(self, &dir, msg.timeout, ctx)
    }
}

impl Handler<TryAcquire> for LockActor {
    type Result = Reply<Result<Option<LockGrant>, LockError>>;

    fn handle(&mut self, _: TryAcquire, ctx: &mut Context<Self>) -> Self::Result {
        let dir = self.config.dir.clone();
        let (pending, reply) = Reply::later(Err(LockError::Cancelled { dir: dir.clone() }));
        let effects = self.holder.acquire(LockWaiter::try_acquire(&dir, pending));
        holder::run(self, effects, ctx);
        reply
    }
}

holding::answers_lock_requests!(LockActor);

impl Handler<Asked<TryAcquire>> for LockActor {
    type Result = ();

    fn handle(&mut self, asked: Asked<TryAcquire>, ctx: &mut Context<Self>) {
        asked.answer::<Self, _>(ctx, |request, ctx| <Self as Handler<TryAcquire>>::handle(self, request, ctx));
    }
}

impl Handler<Participants> for LockActor {
    type Result = ResponseFuture<Result<Vec<String>, LockError>>;

    fn handle(&mut self, _: Participants, _: &mut Context<Self>) -> Self::Result {
        holding::participants(self.shell.session(), self.config.dir.clone())
    }
}

impl Handler<ContenderReport> for LockActor {
    type Result = ();

    fn handle(&mut self, report: ContenderReport, ctx: &mut Context<Self>) {
        if let ContenderEvent::RevocationRequested { node } = &report.event {
            if self.contender.holds(report.tag) {
                let participant = self.config.participation.id.clone();
                self.shell.tell(LockEvent::RevocationRequested { participant, node: node.clone() });
            }
            return;
        }
        holder::report(self, report.tag, report.event, ctx);
    }
}

crate::recipe::shell::on_the_shell!(LockActor => LockEvent, Subscribe);
