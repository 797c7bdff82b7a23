//! [`ElectionActor`]: one participant of one election.
//!
//! Owns: when to contend (on start, after a loss, after a `Resign` with requeue), what leading
//! means under each connection policy, the leader actor's life, and observing who leads.
//! Does not own the node: each attempt is a [`Contender`].
//!
//! State machine: `Idle → Contending{attempt} → Leading{token, link: Up|Suspended} → ...`.

use actix::prelude::*;
use tracing::{debug, info, warn};

use super::messages::*;
use crate::path;
use crate::recipe::naming::{self, LATCH_NAME, Rule};
use crate::recipe::participants;
use crate::recipe::{
    Abandon, ConnectionPolicy, Contender, ContenderEvent, ContenderReport, ContenderSpec, FencingToken, Relisted,
    Withdraw, delete_until_gone, disconnect_deadline,
};
use crate::session::{SessionEvent, SessionHandle, WatchEvent, WatchEventKind};

type LeaderFactory = Box<dyn Fn(LeaderTerm) -> Recipient<StopLeading>>;

/// How an [`ElectionActor`] takes part.
pub struct ElectionConfig {
    path: String,
    participant_id: String,
    policy: ConnectionPolicy,
    requeue_after_loss: bool,
    leader: Option<LeaderFactory>,
}

impl std::fmt::Debug for ElectionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElectionConfig")
            .field("path", &self.path)
            .field("participant_id", &self.participant_id)
            .field("policy", &self.policy)
            .field("requeue_after_loss", &self.requeue_after_loss)
            .field("leader_actor", &self.leader.is_some())
            .finish()
    }
}

impl ElectionConfig {
    /// An election at `path` (the directory of the participants' nodes).
    pub fn new(path: impl Into<String>) -> Self {
        ElectionConfig {
            path: path.into(),
            participant_id: naming::default_participant_id(),
            policy: ConnectionPolicy::default(),
            requeue_after_loss: true,
            leader: None,
        }
    }

    /// Stored as our node's data; what other participants see in `LeaderChanged`.
    pub fn with_participant_id(mut self, id: impl Into<String>) -> Self {
        self.participant_id = id.into();
        self
    }

    /// What a leader assumes when the connection drops (default: conservative).
    pub fn with_policy(mut self, policy: ConnectionPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// After losing leadership, stand in line again (default: yes, like Curator's
    /// `autoRequeue`).
    pub fn with_requeue_after_loss(mut self, requeue: bool) -> Self {
        self.requeue_after_loss = requeue;
        self
    }

    /// Leader-actor mode: `factory` builds the actor that does the leader's work. It is started
    /// (on this actor's Arbiter) when leadership is acquired or restored, and sent
    /// [`StopLeading`] when leadership is suspended, lost or given up.
    pub fn with_leader_actor<A, F>(mut self, factory: F) -> Self
    where
        A: Actor<Context = Context<A>> + Handler<StopLeading>,
        F: Fn(LeaderTerm) -> A + 'static,
    {
        self.leader = Some(Box::new(move |term| factory(term).start().recipient()));
        self
    }
}

enum Link {
    Up,
    Suspended { deadline: Option<SpawnHandle> },
}

enum ElectionState {
    /// Not taking part (resigned without requeue, or failed).
    Idle,
    /// In line.
    Contending { attempt: u64, contender: Addr<Contender> },
    /// Leading.
    Leading {
        attempt: u64,
        contender: Addr<Contender>,
        node: String,
        token: FencingToken,
        version: i32,
        link: Link,
        leader: Option<Recipient<StopLeading>>,
    },
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
    session: SessionHandle,
    config: ElectionConfig,
    state: ElectionState,
    attempts: u64,
    subscribers: Vec<Recipient<ElectionEvent>>,
    /// The leader node whose data watch tells us when leadership moves. Set *before* the read
    /// that places the watch is sent: the deletion event can overtake the read's reply.
    watched_leader: Option<String>,
    /// The last leader id reported in `LeaderChanged`.
    leader_id: Option<String>,
    /// Callers of [`Leadership`] waiting for this participant to lead.
    awaiting: Vec<futures::channel::oneshot::Sender<Result<LeaderTerm, ElectionError>>>,
    span: tracing::Span,
}

impl ElectionActor {
    /// A participant; start it with `.start()`. It enters the election at once.
    pub fn new(session: SessionHandle, config: ElectionConfig) -> Self {
        let span = tracing::info_span!("zk.election", path = %config.path, id = %config.participant_id);
        ElectionActor {
            session,
            config,
            state: ElectionState::Idle,
            attempts: 0,
            subscribers: Vec::new(),
            watched_leader: None,
            leader_id: None,
            awaiting: Vec::new(),
            span,
        }
    }

    fn broadcast(&mut self, event: ElectionEvent) {
        self.subscribers.retain(|s| s.connected());
        for subscriber in &self.subscribers {
            subscriber.do_send(event.clone());
        }
    }

    fn contend(&mut self, ctx: &mut Context<Self>) {
        self.attempts += 1;
        let attempt = self.attempts;
        let spec = ContenderSpec {
            dir: self.config.path.clone(),
            name: LATCH_NAME,
            rule: Rule::Exclusive,
            data: self.config.participant_id.clone().into_bytes(),
            tag: attempt,
        };
        let contender = Contender::new(self.session.clone(), spec, ctx.address().recipient()).start();
        debug!(parent: &self.span, attempt, "entering the election");
        self.state = ElectionState::Contending { attempt, contender };
    }

    fn attempt(&self) -> Option<u64> {
        match &self.state {
            ElectionState::Contending { attempt, .. } | ElectionState::Leading { attempt, .. } => Some(*attempt),
            ElectionState::Idle => None,
        }
    }

    fn start_leader(&mut self) {
        let ElectionState::Leading { node, token, version, leader, .. } = &mut self.state else { return };
        if let (None, Some(factory)) = (&leader, &self.config.leader) {
            *leader = Some(factory(LeaderTerm { token: *token, node: node.clone(), version: *version }));
        }
    }

    fn stop_leader(&mut self) {
        if let ElectionState::Leading { leader, .. } = &mut self.state {
            if let Some(leader) = leader.take() {
                leader.do_send(StopLeading);
            }
        }
    }

    /// Leaves the current attempt (leading or not), withdrawing its node.
    fn leave(&mut self, ctx: &mut Context<Self>) -> Option<FencingToken> {
        self.stop_leader();
        match std::mem::replace(&mut self.state, ElectionState::Idle) {
            ElectionState::Idle => None,
            ElectionState::Contending { contender, .. } => {
                contender.do_send(Withdraw);
                None
            }
            ElectionState::Leading { contender, node, token, link, .. } => {
                if let Link::Suspended { deadline: Some(timer) } = link {
                    ctx.cancel_future(timer);
                }
                // The delete is sent now, ahead of anything we send next (a new contender's
                // create, an observation): the successor's hand-off starts as early as it can.
                // Detached, so that it completes even when we are stopping (a dropped request is
                // never handled by the session).
                let deleted = delete_until_gone(self.session.clone(), node);
                contender.do_send(Abandon);
                let span = self.span.clone();
                actix::spawn(async move {
                    if let Err(error) = deleted.await {
                        warn!(parent: &span, %error, "could not delete our leader node");
                    }
                });
                Some(token)
            }
        }
    }

    fn lose(&mut self, reason: LeadershipLostReason, ctx: &mut Context<Self>) {
        let Some(token) = self.leave(ctx) else { return };
        warn!(parent: &self.span, ?reason, %token, "leadership lost");
        self.broadcast(ElectionEvent::LeadershipLost { token, reason });
        if self.config.requeue_after_loss {
            self.contend(ctx);
        }
        self.observe(ctx);
    }

    fn on_granted(&mut self, node: String, token: FencingToken, version: i32) {
        let ElectionState::Contending { attempt, contender } = std::mem::replace(&mut self.state, ElectionState::Idle)
        else {
            return;
        };
        info!(parent: &self.span, %node, %token, "leadership acquired");
        self.state = ElectionState::Leading {
            attempt,
            contender,
            node: node.clone(),
            token,
            version,
            link: Link::Up,
            leader: None,
        };
        self.broadcast(ElectionEvent::LeadershipAcquired { token });
        let term = LeaderTerm { token, node: node.clone(), version };
        for waiter in self.awaiting.drain(..) {
            let _ = waiter.send(Ok(term.clone()));
        }
        self.start_leader();
        // Our own node is watched by our contender, not by the observer.
        self.watched_leader = None;
        self.report_leader(Some(self.config.participant_id.clone()));
    }

    fn report_leader(&mut self, id: Option<String>) {
        if self.leader_id != id {
            debug!(parent: &self.span, leader = ?id, "leader changed");
            self.leader_id = id.clone();
            self.broadcast(ElectionEvent::LeaderChanged { leader_id: id });
        }
    }

    /// Reads who leads now and watches that node, to report `LeaderChanged`. Every participant
    /// watches the leader's node: learning of a new leader is the point, so this one event
    /// reaches everybody by design (the contenders themselves still watch only their
    /// predecessor).
    fn observe(&mut self, ctx: &mut Context<Self>) {
        let list = self.session.children(&self.config.path);
        ctx.spawn(list.into_actor(self).map(|listed, act, ctx| {
            let names = match listed {
                Ok(children) => children.names,
                Err(crate::Error::NoNode { .. }) => Vec::new(),
                Err(err) => {
                    debug!(parent: &act.span, error = %err, "cannot read the election; will retry");
                    ctx.run_later(std::time::Duration::from_millis(200), |act, ctx| act.observe(ctx));
                    return;
                }
            };
            // Our contender may learn from this listing that fewer nodes stand ahead of it, so
            // that its hand-off needs no read of its own.
            if let ElectionState::Contending { contender, .. } = &act.state {
                contender.do_send(Relisted { names: names.clone() });
            }
            let names = path::sequential_in_order(names);
            let Some(first) = names.first() else {
                act.watched_leader = None;
                act.report_leader(None);
                return;
            };
            let node = path::join(&act.config.path, first);
            if act.watched_leader.as_deref() == Some(node.as_str()) {
                return; // its watch is set (or being set)
            }
            act.watched_leader = Some(node.clone());
            act.watch_leader(node, ctx);
        }));
    }

    /// Reads the leader's node `node` (its data is the leader's id) and watches it.
    fn watch_leader(&mut self, node: String, ctx: &mut Context<Self>) {
        let read = self.session.get_data_watched(&node, ctx.address().recipient());
        ctx.spawn(read.into_actor(self).map(move |read, act, ctx| {
            if act.watched_leader.as_deref() != Some(node.as_str()) {
                return; // it went (its deletion was seen first) and we moved on
            }
            match read {
                Ok(data) => act.report_leader(Some(String::from_utf8_lossy(&data.data).into_owned())),
                Err(_) => {
                    act.watched_leader = None; // gone meanwhile: read again
                    act.observe(ctx);
                }
            }
        }));
    }

    fn on_suspended(&mut self, ctx: &mut Context<Self>) {
        let policy = self.config.policy;
        let ElectionState::Leading { attempt, token, link, .. } = &mut self.state else { return };
        if !matches!(link, Link::Up) {
            return;
        }
        let (attempt, token) = (*attempt, *token);
        *link = Link::Suspended { deadline: None };
        self.broadcast(ElectionEvent::LeadershipSuspended { token });
        if policy == ConnectionPolicy::Conservative {
            self.stop_leader();
            let timer = disconnect_deadline(&self.session, ctx, move |act: &mut Self, ctx| {
                if act.attempt() == Some(attempt) {
                    act.lose(LeadershipLostReason::DisconnectedTooLong, ctx);
                }
            });
            if let ElectionState::Leading { link: Link::Suspended { deadline }, .. } = &mut self.state {
                *deadline = Some(timer);
            }
        }
    }

    /// Back on the same session: lead again only if our node is still there (it cannot have
    /// lost its place: nodes ahead of the first can never appear).
    fn on_reconnected(&mut self, ctx: &mut Context<Self>) {
        let ElectionState::Leading { attempt, node, link: Link::Suspended { .. }, .. } = &self.state else {
            self.observe(ctx);
            return;
        };
        let attempt = *attempt;
        let still_there = self.session.exists(node);
        ctx.spawn(still_there.into_actor(self).map(move |exists, act, ctx| {
            if act.attempt() != Some(attempt) {
                return;
            }
            match exists {
                Ok(Some(_)) => {
                    let ElectionState::Leading { token, link, .. } = &mut act.state else { return };
                    if let Link::Suspended { deadline: Some(timer) } = std::mem::replace(link, Link::Up) {
                        ctx.cancel_future(timer);
                    }
                    let token = *token;
                    info!(parent: &act.span, %token, "leadership restored");
                    act.broadcast(ElectionEvent::LeadershipRestored { token });
                    act.start_leader();
                }
                Ok(None) => act.lose(LeadershipLostReason::NodeDeleted, ctx),
                Err(_) => {} // disconnected again; the next Reconnected asks again
            }
            act.observe(ctx);
        }));
    }

    /// Reads every participant's id, in line order.
    fn read_participants(&self) -> impl std::future::Future<Output = Result<Vec<String>, ElectionError>> + 'static {
        let read = participants::read_participants(self.session.clone(), self.config.path.clone());
        async move { Ok(read.await?) }
    }

    /// Reads the leader's id only (the first node's data).
    fn read_leader(&self) -> impl std::future::Future<Output = Result<Option<String>, ElectionError>> + 'static {
        let read = participants::read_first(self.session.clone(), self.config.path.clone());
        async move { Ok(read.await?) }
    }
}

impl Actor for ElectionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.session.subscribe(ctx.address().recipient());
        self.contend(ctx);
    }

    fn stopped(&mut self, ctx: &mut Self::Context) {
        if let Some(token) = self.leave(ctx) {
            self.broadcast(ElectionEvent::LeadershipLost { token, reason: LeadershipLostReason::Resigned });
        }
    }
}

impl Handler<ContenderReport> for ElectionActor {
    type Result = ();

    fn handle(&mut self, report: ContenderReport, ctx: &mut Context<Self>) {
        if Some(report.tag) != self.attempt() {
            return;
        }
        match report.event {
            ContenderEvent::Granted { node, token, version, .. } => self.on_granted(node, token, version),
            ContenderEvent::Waiting { .. } => self.observe(ctx),
            // The contender has stopped already; withdrawing it again is harmless.
            ContenderEvent::Lost { reason, .. } => self.lose(reason.into(), ctx),
            ContenderEvent::Failed { error } => {
                warn!(parent: &self.span, %error, "cannot take part in the election");
                self.state = ElectionState::Idle;
                self.broadcast(ElectionEvent::ElectionFailed { error });
            }
        }
    }
}

impl Handler<WatchEvent> for ElectionActor {
    type Result = ();

    fn handle(&mut self, event: WatchEvent, ctx: &mut Context<Self>) {
        debug!(parent: &self.span, path = %event.path, kind = ?event.kind, "watch event");
        if self.watched_leader.as_deref() != Some(event.path.as_str()) {
            return;
        }
        match event.kind {
            // The term goes on, but the change consumed the one-shot watch: without a new one,
            // the next change of leader would never be heard.
            WatchEventKind::DataChanged => self.watch_leader(event.path, ctx),
            _ => {
                self.watched_leader = None;
                self.observe(ctx);
            }
        }
    }
}

impl Handler<SessionEvent> for ElectionActor {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        match &self.state {
            ElectionState::Contending { contender, .. } | ElectionState::Leading { contender, .. } => {
                contender.do_send(event.clone())
            }
            ElectionState::Idle => {}
        }
        match event {
            SessionEvent::Suspended { .. } => self.on_suspended(ctx),
            SessionEvent::Reconnected { .. } => self.on_reconnected(ctx),
            SessionEvent::Connected { generation, .. } if generation > 1 => self.observe(ctx),
            _ => {}
        }
    }
}

impl Handler<Resign> for ElectionActor {
    type Result = Result<(), ElectionError>;

    fn handle(&mut self, msg: Resign, ctx: &mut Context<Self>) -> Self::Result {
        if let Some(token) = self.leave(ctx) {
            info!(parent: &self.span, %token, requeue = msg.requeue, "resigned");
            self.broadcast(ElectionEvent::LeadershipLost { token, reason: LeadershipLostReason::Resigned });
        }
        if msg.requeue {
            self.contend(ctx);
        }
        self.observe(ctx);
        Ok(())
    }
}

impl Handler<Stop> for ElectionActor {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        // `stopped` leaves the election (and tells a leader it resigned).
        ctx.stop();
    }
}

impl Handler<Join> for ElectionActor {
    type Result = ();

    fn handle(&mut self, _: Join, ctx: &mut Context<Self>) {
        if matches!(self.state, ElectionState::Idle) {
            self.contend(ctx);
        }
    }
}

impl Handler<Participants> for ElectionActor {
    type Result = ResponseFuture<Result<Vec<String>, ElectionError>>;

    fn handle(&mut self, _: Participants, _: &mut Context<Self>) -> Self::Result {
        Box::pin(self.read_participants())
    }
}

impl Handler<CurrentLeader> for ElectionActor {
    type Result = ResponseFuture<Result<Option<String>, ElectionError>>;

    fn handle(&mut self, _: CurrentLeader, _: &mut Context<Self>) -> Self::Result {
        Box::pin(self.read_leader())
    }
}

impl Handler<Subscribe> for ElectionActor {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) {
        // A late subscriber learns the current leader at once.
        if let Some(id) = &self.leader_id {
            msg.recipient.do_send(ElectionEvent::LeaderChanged { leader_id: Some(id.clone()) });
        }
        self.subscribers.push(msg.recipient);
    }
}

impl Handler<Leadership> for ElectionActor {
    type Result = crate::recipe::Reply<Result<LeaderTerm, ElectionError>>;

    fn handle(&mut self, _: Leadership, _: &mut Context<Self>) -> Self::Result {
        use crate::recipe::Reply;
        let path = self.config.path.clone();
        match &self.state {
            ElectionState::Leading { node, token, version, link: Link::Up, .. } => {
                Reply::Now(Ok(LeaderTerm { token: *token, node: node.clone(), version: *version }))
            }
            ElectionState::Idle => Reply::Now(Err(ElectionError::NotParticipating { path })),
            _ => {
                let (tx, reply) = Reply::later(Err(ElectionError::Stopped { path }));
                self.awaiting.push(tx);
                reply
            }
        }
    }
}
