//! [`ElectionActor`]: one participant of one election.
//!
//! Owns: starting one contender per attempt and wording what the holder core decides as
//! [`ElectionEvent`]s; the leader actor's life is in `leader_actor`, observing who leads
//! (`LeaderChanged`) in `following`.
//! Does not own the node (the contender's) or any decision about holding leadership (the holder
//! core's, `recipe::holder`: attempts, link state, connection policy, expiry, resigning). A
//! participant contends whenever it has joined: on start, after a loss (with re-queue), after
//! `Join` or a `Resign` with re-queue.

mod following;
mod leader_actor;

use actix::prelude::*;
use futures::FutureExt;
use futures::channel::oneshot;
use tracing::debug;

use super::config::ElectionConfig;
use super::error::ElectionError;
use super::messages::*;
use crate::error::Error;
use crate::recipe::holder::{
    self, Attempt, ContenderSlot, Happened, Holder, HolderHost, InLine, Loss, Refusal, ReleaseError, Waiter,
};
use crate::recipe::naming::{LATCH_NAME, Rule};
use crate::recipe::participants;
use crate::recipe::shell::Shell;
use crate::recipe::{ConnectionPolicy, ContenderEvent, ContenderReport, FencingToken, Reply};
use crate::reply::Pending;
use crate::session::requests::Goodbye;
use crate::session::{SessionEvent, SessionHandle};
use leader_actor::{AfterStop, LeaderStopped};

/// A caller of [`Leadership`].
pub(crate) struct LeadershipWaiter {
    path: String,
    reply: Pending<Result<LeaderTerm, ElectionError>>,
}

impl Waiter<LeaderTerm> for LeadershipWaiter {
    fn grant(self, term: &LeaderTerm) -> bool {
        self.reply.send(Ok(term.clone())).is_ok()
    }

    fn in_line(self) -> InLine<Self> {
        InLine::Waits(self)
    }

    fn refuse(self, why: Refusal) {
        let error = match why {
            Refusal::Failed(error) => ElectionError::ZooKeeper(error),
            Refusal::Closed => ElectionError::ZooKeeper(Error::Closed),
            Refusal::Timeout(_) | Refusal::Cancelled | Refusal::InProgress => {
                ElectionError::NotParticipating { path: self.path }
            }
        };
        let _ = self.reply.send(Err(error));
    }

    fn is_gone(&self) -> bool {
        self.reply.is_canceled()
    }

    fn poll_gone(&self, cx: &mut std::task::Context<'_>) -> bool {
        self.reply.poll_canceled(cx)
    }
}

fn lost_reason(loss: Loss) -> LeadershipLostReason {
    match loss {
        Loss::SessionExpired => LeadershipLostReason::SessionExpired,
        Loss::NodeDeleted => LeadershipLostReason::NodeDeleted,
        Loss::SessionClosed => LeadershipLostReason::SessionClosed,
        Loss::DisconnectedTooLong => LeadershipLostReason::DisconnectedTooLong,
    }
}

/// One participant of one election; see `docs/recipes/election.md`.
///
/// ```no_run
/// # fn demo(session: actix_zookeeper::SessionHandle, me: actix::Recipient<actix_zookeeper::election::ElectionEvent>) {
/// use actix::Actor;
/// use actix_zookeeper::election::{ElectionActor, ElectionConfig, Subscribe};
///
/// let election = ElectionActor::new(session, ElectionConfig::new("/services/billing/leader")).start();
/// election.do_send(Subscribe { recipient: me }); // LeadershipAcquired, LeaderChanged, ...
/// # }
/// ```
pub struct ElectionActor {
    config: ElectionConfig,
    holder: Holder<LeaderTerm, LeadershipWaiter>,
    contender: ContenderSlot,
    /// The user's leader actor (leader-actor mode), while it runs, and what tells when it
    /// has stopped.
    leader: Option<(Recipient<StopLeading>, LeaderStopped)>,
    /// A leader actor told to stop that may not have stopped yet. Until it has (or
    /// `leader_stop_timeout` passed), our node is not deleted and no new leader actor starts:
    /// Curator's `LeaderSelector` deletes its node only once `takeLeadership` returned.
    leader_stopping: Option<LeaderStopped>,
    /// What waits for `leader_stopping`, in the order asked.
    after_stop: Vec<AfterStop>,
    /// The term whose leader actor should run (set when it is acquired or restored, cleared
    /// when it is told to stop): a start that waited for the last actor to stop checks it.
    leading: Option<FencingToken>,
    /// The leader node whose data watch tells us when leadership moves. Set *before* the read
    /// that places the watch is sent: the deletion event can overtake the read's reply.
    watched_leader: Option<String>,
    /// The last leader id reported in `LeaderChanged`.
    leader_id: Option<String>,
    /// A term already told as ended (resigned: a leader stops *before* its node is deleted, or
    /// two would act at once); what the delete later finds is not told again.
    ended: Option<FencingToken>,
    /// Answers to `Resign { requeue: true }`, sent once the new node stands in line.
    requeued: Vec<(oneshot::Sender<ReleaseOutcome>, ReleaseOutcome)>,
    /// Requeuing resigns whose delete is not answered yet: the participant is between terms,
    /// not out of the election.
    requeuing: usize,
    /// `Leadership` asked while requeuing: asked again once the participant stands in line.
    after_requeue: Vec<LeadershipWaiter>,
    /// Kept last: its lifeline must drop after everything else the actor holds.
    shell: Shell<ElectionEvent>,
}

/// How the delete of a resign ended, as the holder core answered it.
type ReleaseOutcome = Result<Result<(), ReleaseError>, oneshot::Canceled>;

impl ElectionActor {
    /// A participant; start it with `.start()`. It enters the election at once.
    pub fn new(session: SessionHandle, config: ElectionConfig) -> Self {
        let span = tracing::info_span!("zk.election", path = %config.path, id = %config.participation.id);
        let holder = Holder::new(config.participation.policy, false, config.requeue_after_loss);
        ElectionActor {
            shell: Shell::new(session, span, config.participation.retry),
            config,
            holder,
            contender: ContenderSlot::new(),
            leader: None,
            leader_stopping: None,
            after_stop: Vec::new(),
            leading: None,
            watched_leader: None,
            leader_id: None,
            ended: None,
            requeued: Vec::new(),
            requeuing: 0,
            after_requeue: Vec::new(),
        }
    }

    /// True while the held term was resigned and its node not yet deleted (its leader actor is
    /// stopping).
    fn resigning(&self) -> bool {
        self.holder.held().is_some_and(|held| self.ended == Some(held.token))
    }
}

impl HolderHost for ElectionActor {
    crate::recipe::holder::host_parts!(LeaderTerm, LeadershipWaiter, Election at path);

    fn begin(&mut self, attempt: Attempt, ctx: &mut Context<Self>) {
        let spec = self.spec(attempt, self.config.path.clone(), LATCH_NAME, Rule::Exclusive);
        self.contender.start(attempt, self.shell.session(), spec, ctx);
    }

    fn slots(&mut self) -> &mut [ContenderSlot] {
        std::slice::from_mut(&mut self.contender)
    }

    fn tell(&mut self, happened: Happened<LeaderTerm>, ctx: &mut Context<Self>) {
        // A resigned term was told as ended already; while its leader actor stops, its node
        // stays and may still be suspended or restored: nothing of it is told again.
        match &happened {
            Happened::Lost(held, _) | Happened::Released(held) if self.ended == Some(held.token) => {
                self.observe(ctx);
                return;
            }
            Happened::Suspended(held) | Happened::Restored(held) if self.ended == Some(held.token) => return,
            _ => {}
        }
        let event = match happened {
            Happened::Acquired(held) => {
                self.start_leader(held.grant, ctx);
                self.watched_leader = None;
                self.shell.tell(ElectionEvent::LeadershipAcquired { token: held.token });
                self.report_leader(Some(self.config.participation.id.clone()));
                return;
            }
            Happened::Suspended(held) => {
                if self.config.participation.policy == ConnectionPolicy::Conservative {
                    self.stop_leader();
                }
                ElectionEvent::LeadershipSuspended { token: held.token }
            }
            Happened::Restored(held) => {
                self.start_leader(held.grant, ctx);
                ElectionEvent::LeadershipRestored { token: held.token }
            }
            Happened::Lost(held, loss) => {
                self.stop_leader();
                self.observe(ctx);
                ElectionEvent::LeadershipLost { token: held.token, reason: lost_reason(loss) }
            }
            Happened::Released(held) => {
                self.stop_leader();
                self.observe(ctx);
                ElectionEvent::LeadershipLost { token: held.token, reason: LeadershipLostReason::Resigned }
            }
            Happened::Failed(error) => ElectionEvent::ElectionFailed { error },
        };
        self.shell.tell(event);
    }
}

impl Actor for ElectionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Dropping the last address is how a user stops it, whatever timer is pending.
        self.shell.attach(ctx);
        let effects = self.holder.keep_contending(true);
        holder::run(self, effects, ctx);
    }

    fn stopped(&mut self, ctx: &mut Self::Context) {
        // Leaving deletes our node (the contender outlives us); a leader hears it resigned.
        if let Some(held) = self.holder.held() {
            let token = held.token;
            self.stop_leader();
            if self.ended != Some(token) {
                self.shell.tell(ElectionEvent::LeadershipLost { token, reason: LeadershipLostReason::Resigned });
            }
        }
        let attempt = self.holder.attempt();
        let effects = self.holder.stop();
        match (self.leader_stopping.take(), attempt) {
            // The runtime itself is shutting down (a `System` dropped): nothing could be sent.
            (Some(_), Some(_)) if tokio::runtime::Handle::try_current().is_err() => return,
            // Our context is gone (the last address was dropped while leading): the contender
            // deletes the node once the leader actor has stopped, detached. `stop` asked for
            // nothing but that withdrawal.
            (Some(stopped), Some(attempt)) => {
                let limit = self.config.leader_stop_timeout;
                self.contender.withdraw_after(attempt, tokio::time::timeout(limit, stopped).map(|_| ()), ctx);
            }
            _ => holder::run(self, effects, ctx),
        }
        self.contender.let_go_any(ctx);
    }
}

impl Handler<ContenderReport> for ElectionActor {
    type Result = ();

    fn handle(&mut self, report: ContenderReport, ctx: &mut Context<Self>) {
        let stands = matches!(
            report.event,
            ContenderEvent::Waiting { .. } | ContenderEvent::Granted { .. } | ContenderEvent::Failed { .. }
        );
        if stands && self.holder.is_acquiring(report.tag) {
            for (reply, outcome) in self.requeued.drain(..) {
                let _ = reply.send(outcome);
            }
        }
        if let ContenderEvent::Waiting { head, .. } = &report.event {
            if self.holder.is_acquiring(report.tag) {
                // The contender's listing says who leads: no listing of our own (with a line of
                // n participants, n joins listed it 2n times).
                match head.clone() {
                    Some(head) => self.follow(head, ctx),
                    None => self.observe(ctx),
                }
            }
        }
        holder::report(self, report.tag, report.event, ctx);
    }
}

impl Handler<SessionEvent> for ElectionActor {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        holder::session_event(self, &event, ctx);
        // What changed while we were away is only seen by reading again.
        match event {
            SessionEvent::Reconnected { .. } => self.observe(ctx),
            SessionEvent::Connected { generation, .. } if generation > 1 => self.observe(ctx),
            _ => {}
        }
    }
}

impl Handler<Resign> for ElectionActor {
    type Result = ResponseFuture<Result<(), ElectionError>>;

    fn handle(&mut self, msg: Resign, ctx: &mut Context<Self>) -> Self::Result {
        self.begin_resign();
        // The node goes once the leader actor has *stopped* (not just been told to): the next
        // leader starts as soon as it is gone.
        let (reply, replied) = oneshot::channel();
        let requeue = msg.requeue;
        self.after_leader_stopped(ctx, move |act, ctx| act.resign(requeue, reply, ctx));
        Box::pin(async move {
            match replied.await.unwrap_or(Err(oneshot::Canceled)) {
                // Not leading, or leadership already lost (told as `LeadershipLost`): either way
                // this participant has left the line, which is all a resign asks.
                Ok(Ok(())) | Ok(Err(ReleaseError::NotHeld | ReleaseError::Lost(_))) | Err(_) => Ok(()),
                Ok(Err(ReleaseError::ZooKeeper(error))) => Err(ElectionError::ZooKeeper(error)),
            }
        })
    }
}

impl ElectionActor {
    /// A leader stops leading (its actor told to stop, subscribers told it resigned) before its
    /// node goes; a second resign while the first waits tells nothing again.
    fn begin_resign(&mut self) {
        if let Some(held) = self.holder.held() {
            let token = held.token;
            if self.ended != Some(token) {
                self.ended = Some(token);
                // Told lost now: no copy of the term is current from here on.
                crate::recipe::holder::Grant::end(&held.grant);
                self.stop_leader();
                self.shell.tell(ElectionEvent::LeadershipLost { token, reason: LeadershipLostReason::Resigned });
            }
        }
    }

    /// Deletes our node (or leaves the line); `reply` hears how it went.
    fn resign(&mut self, requeue: bool, reply: oneshot::Sender<ReleaseOutcome>, ctx: &mut Context<Self>) {
        // A term won again while the last leader actor was stopping is given up here too: its
        // leader actor must not start behind this resign.
        self.leading = None;
        let (answer, answered) = oneshot::channel();
        let effects = self.holder.release(answer);
        holder::run(self, effects, ctx);
        if requeue {
            self.requeuing += 1;
        }
        // The requeue's create and the read of who leads wait for the delete's answer: sent
        // right behind it, they held up the next leader's notification (W3's
        // hand-off p50 0.64-0.87 ms with them, 0.46-0.53 ms after). The caller still hears
        // only once the new node stands in line.
        ctx.spawn(answered.into_actor(self).map(move |outcome, act, ctx| {
            if requeue {
                act.requeuing -= 1;
                act.requeued.push((reply, outcome));
                let effects = act.holder.keep_contending(true);
                holder::run(act, effects, ctx);
                for waiter in std::mem::take(&mut act.after_requeue) {
                    let effects = act.holder.acquire(waiter);
                    holder::run(act, effects, ctx);
                }
            } else {
                let _ = reply.send(outcome);
            }
            act.observe(ctx);
        }));
    }
}

/// Leaves the election (as [`Resign`] without requeue) and stops the actor.
impl Handler<Stop> for ElectionActor {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        // Like a resign, the leader actor stops before our node goes; `stopped` then leaves
        // the election.
        self.begin_resign();
        self.after_leader_stopped(ctx, |act, ctx| {
            act.leading = None;
            ctx.stop();
        });
    }
}

crate::reply::handle_told!(ElectionActor: Resign, Join, Proclaim);

impl Handler<Proclaim> for ElectionActor {
    type Result = ResponseFuture<Result<(), ElectionError>>;

    fn handle(&mut self, msg: Proclaim, _: &mut Context<Self>) -> Self::Result {
        let _entered = self.shell.span().enter();
        match self.holder.held() {
            // A resigned term is over for us even while its node stands.
            Some(held) if !self.resigning() => {
                debug!(token = %held.token, bytes = msg.value.len(), "proclaim");
                Box::pin(super::proclamation::proclaim(self.shell.session(), &held.grant, msg.value))
            }
            _ => {
                let path = self.config.path.clone();
                Box::pin(async move { Err(ElectionError::NotLeader { path }) })
            }
        }
    }
}

impl Handler<ResignAndStop> for ElectionActor {
    type Result = ();

    fn handle(&mut self, _: ResignAndStop, ctx: &mut Context<Self>) {
        // Resigned first, so that the node is gone before the actor: stopping at once would
        // leave its delete to a detached task nobody can wait for.
        let resigned = <Self as Handler<Resign>>::handle(self, Resign { requeue: false }, ctx);
        ctx.spawn(actix::fut::wrap_future::<_, Self>(resigned).map(|_, _, ctx| ctx.stop()));
    }
}

impl Handler<Join> for ElectionActor {
    type Result = ();

    fn handle(&mut self, _: Join, ctx: &mut Context<Self>) {
        // After a resign that waits for its leader actor, the join follows the resign.
        self.after_leader_stopped(ctx, |act, ctx| {
            let effects = act.holder.keep_contending(true);
            holder::run(act, effects, ctx);
        });
    }
}

impl Handler<Participants> for ElectionActor {
    type Result = ResponseFuture<Result<Vec<String>, ElectionError>>;

    fn handle(&mut self, _: Participants, _: &mut Context<Self>) -> Self::Result {
        let read = participants::read_participants(self.shell.session().clone(), self.config.path.clone());
        Box::pin(async move { Ok(read.await?) })
    }
}

impl Handler<CurrentLeader> for ElectionActor {
    type Result = ResponseFuture<Result<Option<String>, ElectionError>>;

    fn handle(&mut self, _: CurrentLeader, _: &mut Context<Self>) -> Self::Result {
        let read = participants::read_first(self.shell.session().clone(), self.config.path.clone());
        Box::pin(async move { Ok(read.await?) })
    }
}

impl Handler<Leadership> for ElectionActor {
    type Result = Reply<Result<LeaderTerm, ElectionError>>;

    fn handle(&mut self, _: Leadership, ctx: &mut Context<Self>) -> Self::Result {
        let path = self.config.path.clone();
        if !self.resigning() && !self.holder.keeps_contending() && self.requeuing == 0 {
            return Reply::Now(Err(ElectionError::NotParticipating { path }));
        }
        let (pending, reply) = Reply::later(Err(ElectionError::Stopped { path: path.clone() }));
        // A resigned term whose node still stands (its leader actor stopping) is not handed
        // out: asked again once the resign has gone through.
        self.after_leader_stopped(ctx, move |act, ctx| {
            if !act.holder.keeps_contending() {
                if act.requeuing > 0 {
                    act.after_requeue.push(LeadershipWaiter { path, reply: pending });
                    return;
                }
                let _ = pending.send(Err(ElectionError::NotParticipating { path }));
                return;
            }
            let effects = act.holder.acquire(LeadershipWaiter { path, reply: pending });
            holder::run(act, effects, ctx);
        });
        reply
    }
}

impl Handler<Subscribe<ElectionEvent>> for ElectionActor {
    type Result = ();

    fn handle(&mut self, msg: Subscribe<ElectionEvent>, _: &mut Context<Self>) {
        // A late subscriber learns the current leader at once.
        if let Some(id) = &self.leader_id {
            msg.recipient.do_send(ElectionEvent::LeaderChanged { leader_id: Some(id.clone()) });
        }
        self.shell.subscribers().add(msg.recipient);
    }
}

crate::recipe::shell::on_the_shell!(ElectionActor => ElectionEvent);

impl Handler<Goodbye> for ElectionActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Goodbye, ctx: &mut Context<Self>) -> Self::Result {
        // The session is closing: resign (a leader stops leading first), and stay out of line.
        let resigned = <Self as Handler<Resign>>::handle(self, Resign { requeue: false }, ctx);
        Box::pin(async move {
            let _ = resigned.await;
        })
    }
}
