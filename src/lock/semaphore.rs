//! [`SemaphoreActor`]: one participant of a counting semaphore (Curator's
//! `InterProcessSemaphoreV2`).
//!
//! Owns: getting and giving back one lease. Does not own the node protocol (two
//! [`Contender`]s per attempt: the guard mutex, then the lease).
//!
//! Protocol (Curator's): take the guard mutex at `<dir>/locks`; create a protected lease node
//! `<dir>/leases/_c_<uuid>-lease-<seq>`; the lease is held while fewer than `max_leases` lease
//! nodes sort before it; otherwise wait, still holding the guard, for the lease directory's
//! children to change. Once the lease is held, give the guard back. Only the guard's holder
//! watches the lease directory, so a returned lease wakes one waiter, not all.
//!
//! State machine: `Idle → Guarding{attempt} → Leasing{attempt} → Held{grant} → Idle`.

use actix::prelude::*;
use tracing::{info, warn};

use super::error::LockError;
use super::grant::LockGrant;
use super::messages::{Acquire, GiveBack, LockEvent, LockLostReason, Participants, Release, Subscribe};
use crate::path;
use crate::recipe::naming::{self, LEASE_NAME, LOCK_NAME, Rule};
use crate::recipe::{
    ConnectionPolicy, Contender, ContenderEvent, ContenderReport, ContenderSpec, Reply, Withdraw, disconnect_deadline,
};
use crate::session::{SessionEvent, SessionHandle};

type Answer = futures::channel::oneshot::Sender<Result<LockGrant, LockError>>;

/// How a [`SemaphoreActor`] behaves.
#[derive(Debug, Clone)]
pub struct SemaphoreConfig {
    dir: String,
    max_leases: usize,
    participant_id: String,
    policy: ConnectionPolicy,
}

impl SemaphoreConfig {
    /// A semaphore at `dir` with `max_leases` leases. Every participant must use the same number
    /// (as with Curator, nothing checks it).
    pub fn new(dir: impl Into<String>, max_leases: usize) -> Self {
        SemaphoreConfig {
            dir: dir.into(),
            max_leases: max_leases.max(1),
            participant_id: naming::default_participant_id(),
            policy: ConnectionPolicy::default(),
        }
    }

    /// Stored as the lease node's data (default: the host name).
    pub fn with_participant_id(mut self, id: impl Into<String>) -> Self {
        self.participant_id = id.into();
        self
    }

    /// What a lease holder assumes when the connection drops (default: conservative).
    pub fn with_policy(mut self, policy: ConnectionPolicy) -> Self {
        self.policy = policy;
        self
    }
}

enum State {
    Idle,
    /// Waiting for the guard mutex.
    Guarding {
        attempt: u64,
        guard: Addr<Contender>,
        answer: Answer,
    },
    /// Holding the guard, waiting for a lease.
    Leasing {
        attempt: u64,
        guard: Addr<Contender>,
        lease: Addr<Contender>,
        answer: Answer,
    },
    /// Holding a lease.
    Held {
        attempt: u64,
        lease: Addr<Contender>,
        grant: LockGrant,
        deadline: Option<SpawnHandle>,
    },
}

/// One participant of a counting semaphore; answers [`Acquire`] with a [`LockGrant`] for its
/// lease node, and [`Release`] by deleting it.
///
/// Protocol (Curator's `InterProcessSemaphoreV2`): take the guard mutex at `<dir>/locks`; create
/// a protected lease node `<dir>/leases/_c_<uuid>-lease-<seq>`; the lease is held while fewer
/// than `max_leases` lease nodes sort before it, else wait (holding the guard) for the lease
/// directory to change; then give the guard back. Only the guard's holder watches the lease
/// directory, so a returned lease wakes one waiter.
pub struct SemaphoreActor {
    session: SessionHandle,
    config: SemaphoreConfig,
    state: State,
    attempts: u64,
    subscribers: Vec<Recipient<LockEvent>>,
    span: tracing::Span,
}

impl SemaphoreActor {
    /// A semaphore participant; start it with `.start()`.
    pub fn new(session: SessionHandle, config: SemaphoreConfig) -> Self {
        let span = tracing::info_span!("zk.semaphore", dir = %config.dir, max = config.max_leases);
        SemaphoreActor { session, config, state: State::Idle, attempts: 0, subscribers: Vec::new(), span }
    }

    fn broadcast(&mut self, event: LockEvent) {
        self.subscribers.retain(|s| s.connected());
        for subscriber in &self.subscribers {
            subscriber.do_send(event.clone());
        }
    }

    // Guard and lease contenders of attempt `n` carry tags 2n and 2n+1.
    fn contender(
        &self,
        ctx: &mut Context<Self>,
        tag: u64,
        dir: String,
        name: &'static str,
        rule: Rule,
    ) -> Addr<Contender> {
        let spec = ContenderSpec { dir, name, rule, data: self.config.participant_id.clone().into_bytes(), tag };
        Contender::new(self.session.clone(), spec, ctx.address().recipient()).start()
    }

    fn start_attempt(&mut self, answer: Answer, ctx: &mut Context<Self>) -> u64 {
        self.attempts += 1;
        let attempt = self.attempts;
        let guard = self.contender(ctx, 2 * attempt, path::join(&self.config.dir, "locks"), LOCK_NAME, Rule::Exclusive);
        self.state = State::Guarding { attempt, guard, answer };
        attempt
    }

    /// Leaves whatever the current attempt holds; returns the waiting caller, if any.
    fn abandon(&mut self, ctx: &mut Context<Self>) -> Option<Answer> {
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Idle => None,
            State::Guarding { guard, answer, .. } => {
                guard.do_send(Withdraw);
                Some(answer)
            }
            State::Leasing { guard, lease, answer, .. } => {
                guard.do_send(Withdraw);
                lease.do_send(Withdraw);
                Some(answer)
            }
            State::Held { lease, deadline, .. } => {
                if let Some(timer) = deadline {
                    ctx.cancel_future(timer);
                }
                lease.do_send(Withdraw);
                None
            }
        }
    }

    fn attempt(&self) -> Option<u64> {
        match &self.state {
            State::Idle => None,
            State::Guarding { attempt, .. } | State::Leasing { attempt, .. } | State::Held { attempt, .. } => {
                Some(*attempt)
            }
        }
    }

    fn on_guard(&mut self, event: ContenderEvent, ctx: &mut Context<Self>) {
        match event {
            ContenderEvent::Granted { .. } => {
                let State::Guarding { attempt, guard, answer } = std::mem::replace(&mut self.state, State::Idle) else {
                    return;
                };
                let leases = path::join(&self.config.dir, "leases");
                let lease =
                    self.contender(ctx, 2 * attempt + 1, leases, LEASE_NAME, Rule::Leases(self.config.max_leases));
                self.state = State::Leasing { attempt, guard, lease, answer };
            }
            ContenderEvent::Waiting { .. } => {}
            // The guard went away under us (session expired while waiting for a lease): start over.
            ContenderEvent::Lost { .. } => {
                if let Some(answer) = self.abandon(ctx) {
                    self.start_attempt(answer, ctx);
                }
            }
            ContenderEvent::Failed { error } => self.fail(LockError::ZooKeeper(error), ctx),
        }
    }

    fn on_lease(&mut self, event: ContenderEvent, ctx: &mut Context<Self>) {
        match event {
            ContenderEvent::Granted { node, token, version, .. } => {
                let State::Leasing { attempt, guard, lease, answer } = std::mem::replace(&mut self.state, State::Idle)
                else {
                    return;
                };
                guard.do_send(Withdraw);
                let grant = LockGrant { node, token, version };
                if answer.send(Ok(grant.clone())).is_err() {
                    lease.do_send(Withdraw); // the caller is gone
                    return;
                }
                info!(parent: &self.span, node = %grant.node, token = %grant.token, "lease acquired");
                self.state = State::Held { attempt, lease, grant: grant.clone(), deadline: None };
                self.broadcast(LockEvent::Acquired { grant });
            }
            ContenderEvent::Waiting { .. } => {}
            ContenderEvent::Lost { reason, .. } => self.on_lost(reason.into(), ctx),
            ContenderEvent::Failed { error } => self.fail(LockError::ZooKeeper(error), ctx),
        }
    }

    fn on_lost(&mut self, reason: LockLostReason, ctx: &mut Context<Self>) {
        let State::Held { grant, .. } = &self.state else { return };
        let token = grant.token;
        warn!(parent: &self.span, node = %grant.node, ?reason, "lease lost");
        self.abandon(ctx);
        self.broadcast(LockEvent::Lost { token, reason });
    }

    fn fail(&mut self, error: LockError, ctx: &mut Context<Self>) {
        if let Some(answer) = self.abandon(ctx) {
            let _ = answer.send(Err(error));
        }
    }
}

impl Actor for SemaphoreActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.session.subscribe(ctx.address().recipient());
    }

    fn stopped(&mut self, ctx: &mut Self::Context) {
        self.abandon(ctx);
    }
}

impl Handler<Acquire> for SemaphoreActor {
    type Result = Reply<Result<LockGrant, LockError>>;

    fn handle(&mut self, msg: Acquire, ctx: &mut Context<Self>) -> Self::Result {
        let dir = self.config.dir.clone();
        match &self.state {
            State::Held { grant, .. } => return Reply::Now(Ok(grant.clone())),
            State::Guarding { .. } | State::Leasing { .. } => {
                return Reply::Now(Err(LockError::AcquireInProgress { dir }));
            }
            State::Idle => {}
        }
        let (answer, reply) = Reply::later(Err(LockError::Cancelled { dir }));
        let attempt = self.start_attempt(answer, ctx);
        if let Some(timeout) = msg.timeout {
            ctx.run_later(timeout, move |act, ctx| {
                if act.attempt() == Some(attempt) && !matches!(act.state, State::Held { .. }) {
                    if let Some(answer) = act.abandon(ctx) {
                        let _ = answer.send(Err(LockError::Timeout { dir: act.config.dir.clone(), after: timeout }));
                    }
                }
            });
        }
        reply
    }
}

impl Handler<Release> for SemaphoreActor {
    type Result = ResponseFuture<Result<(), LockError>>;

    fn handle(&mut self, _: Release, ctx: &mut Context<Self>) -> Self::Result {
        let dir = self.config.dir.clone();
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Idle => Box::pin(futures::future::ready(Err(LockError::NotHeld { dir }))),
            state @ (State::Guarding { .. } | State::Leasing { .. }) => {
                self.state = state;
                if let Some(answer) = self.abandon(ctx) {
                    let _ = answer.send(Err(LockError::Cancelled { dir }));
                }
                Box::pin(futures::future::ready(Ok(())))
            }
            State::Held { lease, grant, deadline, .. } => {
                if let Some(timer) = deadline {
                    ctx.cancel_future(timer);
                }
                let withdrawn = lease.send(Withdraw);
                let node = grant.node;
                let me = ctx.address();
                Box::pin(async move {
                    match withdrawn.await {
                        Ok(Err(err)) => Err(LockError::ZooKeeper(err)),
                        _ => {
                            me.do_send(Announce(LockEvent::Released { node }));
                            Ok(())
                        }
                    }
                })
            }
        }
    }
}

/// Sends an event to subscribers from outside the actor's context.
#[derive(Message)]
#[rtype(result = "()")]
struct Announce(LockEvent);

impl Handler<Announce> for SemaphoreActor {
    type Result = ();

    fn handle(&mut self, msg: Announce, _: &mut Context<Self>) {
        self.broadcast(msg.0);
    }
}

impl Handler<ContenderReport> for SemaphoreActor {
    type Result = ();

    fn handle(&mut self, report: ContenderReport, ctx: &mut Context<Self>) {
        if Some(report.tag / 2) != self.attempt() {
            return;
        }
        if report.tag % 2 == 0 { self.on_guard(report.event, ctx) } else { self.on_lease(report.event, ctx) }
    }
}

impl Handler<SessionEvent> for SemaphoreActor {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        match &self.state {
            State::Guarding { guard, .. } => guard.do_send(event.clone()),
            State::Leasing { guard, lease, .. } => {
                guard.do_send(event.clone());
                lease.do_send(event.clone());
            }
            State::Held { lease, .. } => lease.do_send(event.clone()),
            State::Idle => {}
        }
        let State::Held { attempt, grant, deadline, .. } = &mut self.state else { return };
        let (attempt, token) = (*attempt, grant.token);
        match event {
            SessionEvent::Suspended { .. } if deadline.is_none() => {
                if self.config.policy == ConnectionPolicy::Conservative {
                    let timer = disconnect_deadline(&self.session, ctx, move |act: &mut Self, ctx| {
                        if act.attempt() == Some(attempt) {
                            act.on_lost(LockLostReason::DisconnectedTooLong, ctx);
                        }
                    });
                    if let State::Held { deadline, .. } = &mut self.state {
                        *deadline = Some(timer);
                    }
                }
                self.broadcast(LockEvent::Suspended { token });
            }
            SessionEvent::Reconnected { .. } => {
                if let Some(timer) = deadline.take() {
                    ctx.cancel_future(timer);
                }
                self.broadcast(LockEvent::Reconnected { token });
            }
            _ => {}
        }
    }
}

impl Handler<Subscribe> for SemaphoreActor {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) {
        self.subscribers.push(msg.recipient);
    }
}

impl Handler<Participants> for SemaphoreActor {
    type Result = ResponseFuture<Result<Vec<String>, LockError>>;

    fn handle(&mut self, _: Participants, _: &mut Context<Self>) -> Self::Result {
        let dir = path::join(&self.config.dir, "leases");
        let read = crate::recipe::participants::read_participants(self.session.clone(), dir);
        Box::pin(async move { read.await.map_err(LockError::ZooKeeper) })
    }
}

impl Handler<GiveBack> for SemaphoreActor {
    type Result = ();

    fn handle(&mut self, msg: GiveBack, ctx: &mut Context<Self>) {
        if matches!(&self.state, State::Held { grant, .. } if grant.token == msg.token) {
            ctx.notify(Release);
        }
    }
}
