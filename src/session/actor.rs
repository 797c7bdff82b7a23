//! The [`SessionActor`]: the one owner of the ZooKeeper connection.
//!
//! Owns: the `zookeeper_client::Client`, the session's state machine
//! (`Connecting → Live{Up|Down} → (Expired →) Connecting → ... → Closed`), the session
//! generation, rebuilding a session after expiry, the subscribers of [`SessionEvent`]s, the
//! queue of requests that arrive while no session exists, and the persistent-watch registry.
//! Does not own recipes: they talk to it through messages (or a [`SessionHandle`]).
//!
//! This file holds the state machine and the connection's lifecycle (connect, session states,
//! rebuild, sweep) and how a request is sent (`dispatch`); the rest is by concern in `actor/`:
//! `nodes.rs` (the node requests' handlers), `multi.rs`, `watches.rs` (persistent watches),
//! `reconfig.rs` (following the ensemble's reconfiguration), `subscribers.rs` (who hears the
//! session) and `close.rs`.
//!
//! [`SessionHandle`]: super::SessionHandle

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use crate::reply::Told;
use actix::WeakRecipient;
use actix::prelude::*;
use futures::channel::oneshot;
use tracing::{Instrument, debug, info, warn};
use zookeeper_client::{
    Client, MultiWriteError, MultiWriteResult, PersistentWatcher, SessionState, StateWatcher, WatchedEvent,
};

use super::Features;
use super::client::{ClientThread, Retired};
use super::config::SessionConfig;
use super::damper::{Damped, Damper};
use super::ensemble::Tracked;
use super::events::{SessionEvent, SessionId, WatchEvent, WatchEventKind, WatchId};
use super::health::{HealthBoard, SessionState as HealthState};
use super::lease::Lease;
use super::requests::*;
use super::sizing;
use super::watch::{Owned, PersistentWatch, ReconnectGate, WatchRegistry, WatchSink, deliver_once};
use crate::error::{Error, Result};
use crate::events::{Listen, Subscribers};
use crate::metrics;
use crate::path;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// A request waiting for a session (or for a session to move): called with the client (its
/// generation, and its retirement signal), or with the error that ended the wait.
type Pending = Box<dyn FnOnce(Result<(Client, u64, Retired)>)>;

/// How often orphaned watches and subscribers (whose actor stopped) are swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// How long `Close` waits for the server to confirm the session is closed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The longest `Reconnected` waits for the persistent watches to be added again.
/// The shortest period at which the lease heartbeat looks whether one is due.
const MIN_HEARTBEAT_TICK: Duration = Duration::from_millis(20);
const RECONNECT_HOLD: Duration = Duration::from_secs(2);

/// The session's state machine.
enum State {
    /// No session: the first connection, or a rebuild after expiry.
    Connecting { task: SpawnHandle },
    /// A session exists (connected or not).
    Live(Live),
    /// Closed by request, by an authentication failure, or because the policy gave up.
    Closed,
}

struct Live {
    client: Client,
    session_id: SessionId,
    link: Connection,
    state_task: SpawnHandle,
    /// The connect string `client` was built with.
    hosts: String,
    /// The thread `client` runs on; tells what went through `client` when the session moves
    /// away from it.
    thread: ClientThread,
    /// The timeout the lease and the heartbeat were last sized for.
    negotiated: Duration,
}

/// The watch on the ensemble's configuration (see `actor/reconfig.rs`).
enum ConfigWatch {
    /// None: read (and watch) it on the next session, move or reconnect.
    Unset,
    /// Reading it, or watching it.
    Set(SpawnHandle),
    /// This session's server publishes none, or does not let us read it: not tried again on it.
    Untracked,
}

/// The connection under a live session.
enum Connection {
    Up,
    Down {
        since: Instant,
    },
    /// Down, and the session is moving to a client of a new ensemble configuration: the old
    /// client is retired, requests wait for the new one.
    Moving {
        since: Instant,
        task: SpawnHandle,
    },
}

/// Owns the ZooKeeper connection: the one place that talks to `zookeeper_client`.
///
/// # Order of requests
/// Every handler *calls the client method before returning*: the client library writes the
/// request to its send queue at call time, so the order in which messages reach this actor is
/// the order in which ZooKeeper sees them. The client's futures borrow the client, so each
/// request is an `async move` block that owns a clone of the client; it is polled once inside the
/// handler (which sends the request) and the rest of it is handed back to actix.
///
/// # Recovery
/// - *Disconnected*: the client library reconnects on its own; subscribers get `Suspended`,
///   then `Reconnected` (same session id) or `Expired`.
/// - *Expired*: the client library never builds a new session, so this actor does: it
///   drops the dead client, connects again with the [`RebuildPolicy`](super::RebuildPolicy)'s
///   backoff, re-registers the persistent watches, and sends `Connected` with the next generation.
/// - Requests sent while no session exists wait (up to the request timeout) and are sent, in
///   order, as soon as the new session is up.
/// - Persistent watches are added again after a reconnect of the same session, because the
///   client library (0.11.2) does not re-set them itself.
///
///
/// Start it with [`SessionHandle::start`](super::SessionHandle::start), which puts it on its own
/// Arbiter (thread): the client's heartbeat runs on the thread that connected, so a busy
/// application thread must not be able to starve it.
pub struct SessionActor {
    config: SessionConfig,
    state: State,
    generation: u64,
    /// Weak, so that subscribing does not keep a subscriber alive.
    subscribers: Subscribers<SessionEvent>,
    /// Recipe actors to tell [`Goodbye`] before closing.
    goodbyes: Vec<WeakRecipient<Goodbye>>,
    /// `Some` once a close began: the callers of later closes, answered when it is done (a
    /// second close must not cut the first one's goodbyes short).
    closing: Option<Vec<oneshot::Sender<()>>>,
    pending: VecDeque<Pending>,
    watches: WatchRegistry,
    /// `Reconnected`, held until the persistent watches are added again.
    gate: ReconnectGate<SessionEvent>,
    /// Callers of [`WaitConnected`] waiting for the session to be connected.
    awaiting_connection: Vec<crate::reply::Pending<Result<SessionSnapshot>>>,
    owns_arbiter: bool,
    /// Who else lives on its own Arbiter: it stops with the last of them (see `residents`).
    residents: Option<super::residents::Residents>,
    /// What ended the actor, when it was not a close: told to callers instead of `Closed`.
    ended_by: Option<Error>,
    /// Since when the connection is down (for the time-suspended metric).
    suspended_at: Option<std::time::Instant>,
    /// The id of the live session, 0 while none is (before the first, after an expiry, once
    /// closed): shared with every [`SessionHandle`](super::SessionHandle), so that an actor on
    /// another thread can tell, without a message, whether a session it got a reply from has
    /// ended since.
    live: Arc<super::live::LiveCell>,
    /// Until when the live session is certainly alive on the server, shared with every handle.
    lease: Lease,
    /// The session's and its recipes' health, shared with every handle.
    health: HealthBoard,
    /// What the server supports, shared with every handle and the requests in flight.
    pub(super) features: Features,
    /// The flap damper between the connection and the subscribers, when configured.
    pub(super) damper: Option<Damper>,
    /// Ourselves, weakly (a strong address would keep us alive), for the damper's timers.
    me: Option<actix::WeakAddr<SessionActor>>,
    /// The lease heartbeat's timer, armed for each session's negotiated timeout.
    heartbeat_task: Option<SpawnHandle>,
    /// What the session knows of the ensemble's configuration (see `ensemble.rs`).
    ensemble: Tracked,
    /// The watch on the ensemble's configuration.
    config_watch: ConfigWatch,
}

/// The damper's window `0` ended.
#[derive(Message)]
#[rtype(result = "()")]
struct WindowEnded(u64);

impl SessionActor {
    /// A session actor for `config`. `owns_arbiter`: stop the current Arbiter when the actor
    /// stops (true when it was started on an Arbiter of its own).
    pub fn new(config: SessionConfig, owns_arbiter: bool) -> Self {
        let features = Features::new(config.server_version());
        let damper = config.flap_damper().map(|_| Damper::new());
        SessionActor {
            config,
            state: State::Closed,
            generation: 0,
            subscribers: Subscribers::quiet(),
            goodbyes: Vec::new(),
            closing: None,
            pending: VecDeque::new(),
            watches: WatchRegistry::default(),
            gate: ReconnectGate::default(),
            awaiting_connection: Vec::new(),
            owns_arbiter,
            residents: None,
            ended_by: None,
            suspended_at: None,
            live: Arc::new(super::live::LiveCell::default()),
            lease: Lease::new(),
            health: HealthBoard::new(Lease::new()),
            features,
            damper,
            me: None,
            heartbeat_task: None,
            ensemble: Tracked::default(),
            config_watch: ConfigWatch::Unset,
        }
    }

    /// Shares its Arbiter with `residents`: it stops with the last of them.
    pub(crate) fn with_residents(mut self, residents: super::residents::Residents) -> Self {
        self.residents = Some(residents);
        self
    }

    /// Keeps the live session's id in `cell` (see the field).
    pub(crate) fn with_live_cell(mut self, cell: Arc<super::live::LiveCell>) -> Self {
        self.live = cell;
        self
    }

    /// Keeps the lease, the health and what the server supports where the handles see them.
    pub(crate) fn with_shared(mut self, lease: Lease, health: HealthBoard, features: Features) -> Self {
        self.lease = lease;
        self.health = health;
        self.features = features;
        self
    }

    fn session_id(&self) -> Option<SessionId> {
        match &self.state {
            State::Live(live) => Some(live.session_id),
            _ => None,
        }
    }

    fn snapshot(&self) -> Option<SessionSnapshot> {
        let State::Live(live) = &self.state else { return None };
        Some(SessionSnapshot {
            session_id: live.session_id,
            generation: self.generation,
            timeout: live.client.session_timeout(),
            connected: matches!(live.link, Connection::Up),
            info: live.client.session().clone(),
        })
    }

    /// Answers the callers of [`WaitConnected`] when the session is connected, or closed.
    fn answer_awaiting_connection(&mut self) {
        let answer = match self.snapshot() {
            Some(snapshot) if snapshot.connected => Ok(snapshot),
            _ if matches!(self.state, State::Closed) => Err(self.ended_by.clone().unwrap_or(Error::Closed)),
            _ => return,
        };
        for waiter in self.awaiting_connection.drain(..) {
            let _ = waiter.send(answer.clone());
        }
    }

    /// The session's metrics: every state it reports, and how long each suspension lasted.
    fn count(&mut self, event: &SessionEvent) {
        let state = match event {
            SessionEvent::Connected { .. } => "connected",
            SessionEvent::Suspended { .. } => "suspended",
            SessionEvent::Reconnected { .. } => "reconnected",
            SessionEvent::Expired { .. } => "expired",
            SessionEvent::AuthFailed => "auth_failed",
            SessionEvent::Closed => "closed",
        };
        metrics::session_state(state);
        if matches!(event, SessionEvent::Suspended { .. }) {
            self.suspended_at.get_or_insert_with(std::time::Instant::now);
        } else if let Some(since) = self.suspended_at.take() {
            metrics::session_suspended(since.elapsed());
        }
    }

    fn broadcast(&mut self, event: SessionEvent) {
        self.count(&event);
        if matches!(event, SessionEvent::Connected { .. } | SessionEvent::Reconnected { .. } | SessionEvent::Closed) {
            // After the state change that the event reports (callers broadcast last).
            self.answer_awaiting_connection();
        }
        let Some(damper) = self.damper.as_mut() else {
            self.subscribers.tell(event);
            return;
        };
        let damped = damper.event(event);
        self.tell_damped(damped);
    }

    /// Tells subscribers what the damper let through, and arms its timer when it asks.
    fn tell_damped(&mut self, damped: Damped) {
        let (events, window) = match damped {
            Damped::Tell(events) => (events, None),
            Damped::TellAndArm(events, window) => (events, Some(window)),
        };
        for event in events {
            debug!(?event, "told after the damper");
            self.subscribers.tell(event);
        }
        if let (Some(window), Some(span), Some(me)) = (window, self.config.flap_damper(), self.me.clone()) {
            actix::spawn(async move {
                tokio::time::sleep(span).await;
                if let Some(me) = me.upgrade() {
                    me.do_send(WindowEnded(window));
                }
            });
        }
    }

    // ---- connection lifecycle -------------------------------------------------------------

    fn connect(&mut self, ctx: &mut Context<Self>, attempt: u32) {
        let Some(delay) = self.config.rebuild_policy().delay(attempt) else {
            warn!(attempt, "giving up on connecting: the rebuild policy is exhausted");
            self.finish(ctx);
            return;
        };
        if attempt == 0 {
            self.health.session(HealthState::Connecting { since: Instant::now() }, None, self.generation);
        }
        let hosts = self.ensemble.connect_string(self.config.hosts());
        let open = self.open_client(hosts.clone(), None);
        // Only a session that follows reconfigurations moves, and only a move needs the client
        // on a thread of its own (see `client.rs`).
        let own_thread = self.config.ensemble_tracking();
        let fut = async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let (thread, opened) = ClientThread::open(open, own_thread);
            opened.await.map(|(client, sent)| (client, sent, thread))
        };
        let task =
            ctx.spawn(fut.instrument(tracing::info_span!("zk.connect", hosts = %hosts, attempt)).into_actor(self).map(
                move |outcome, act, ctx| {
                    if !matches!(act.state, State::Connecting { .. }) {
                        return; // closed meanwhile; dropping the client closes the session
                    }
                    match outcome {
                        Ok((client, sent, thread)) => act.on_session(client, sent, thread, hosts, ctx),
                        Err(Error::AuthFailed) => act.auth_failed(ctx),
                        // Trying again cannot help: a certificate problem, or a server older
                        // than its declared version (every create would be refused).
                        Err(error @ (Error::Tls { .. } | Error::Unsupported { .. })) => act.cannot_connect(error, ctx),
                        Err(err) => {
                            warn!(attempt, error = %err, "could not establish a session; will retry");
                            act.connect(ctx, attempt + 1);
                        }
                    }
                },
            ));
        self.state = State::Connecting { task };
    }

    /// Connects a client to `hosts`: a new session, or `session` taken over (a session moving
    /// to the servers of a new ensemble configuration). Resolves to the client and when its
    /// connection was asked for (the lease counts from there).
    pub(super) fn open_client(
        &self,
        hosts: String,
        session: Option<zookeeper_client::SessionInfo>,
    ) -> impl Future<Output = Result<(Client, Instant)>> + Send + 'static {
        let moving = session.is_some();
        let connector = self.config.connector().map(|connector| match session {
            Some(session) => connector.with_session(session),
            None => connector,
        });
        #[cfg(feature = "tls")]
        let tls = self.config.tls().cloned();
        let chroot = self.config.chroot().map(str::to_string);
        let acl = self.config.default_acl().to_vec();
        async move {
            let connector = connector?;
            // The lease counts from here: the server created the session after this.
            let sent = Instant::now();
            #[cfg(feature = "tls")]
            let client = match tls {
                Some(tls) => {
                    tls.check(&hosts).await?;
                    connector.secure_connect(&hosts).await
                }
                None => connector.connect(&hosts).await,
            };
            #[cfg(not(feature = "tls"))]
            let client = connector.connect(&hosts).await;
            let client = client.map_err(|e| Error::from_zk("/", e))?;
            let Some(root) = chroot else { return Ok((client, sent)) };
            if !moving {
                // Curator creates its namespace on demand; so do we, with the default ACL.
                client
                    .mkdir(&root, &CreateMode::Persistent.options(&acl))
                    .await
                    .map_err(|e| Error::from_zk_needing(&root, super::Feature::Create2, e))?;
            }
            client
                .chroot(root.clone())
                .map(|client| (client, sent))
                .map_err(|_| Error::InvalidPath { path: root, reason: "rejected as a chroot".into() })
        }
    }

    fn on_session(
        &mut self,
        client: Client,
        sent: Instant,
        thread: ClientThread,
        hosts: String,
        ctx: &mut Context<Self>,
    ) {
        self.generation += 1;
        let generation = self.generation;
        let session_id = client.session_id();
        self.features.connected_again();
        let timeout = client.session_timeout();
        self.lease.began(session_id, sent, timeout, self.config.lease_margin(timeout));
        let read_only = client.session().is_readonly();
        self.lease.read_only(read_only);
        self.arm_heartbeat(timeout, ctx);
        self.health.session(HealthState::Connected { since: Instant::now(), read_only }, Some(session_id), generation);
        let state_task = Self::watch_state(client.state_watcher(), generation, ctx);
        info!(session = %session_id, generation, timeout = ?client.session_timeout(), "session established");
        let retired = thread.retired();
        self.state = State::Live(Live {
            client: client.clone(),
            session_id,
            link: Connection::Up,
            state_task,
            hosts,
            thread,
            negotiated: timeout,
        });
        self.live.set(session_id, generation);
        // Watches first, then the requests that waited, then the news: anything a subscriber
        // sends after `Connected` reaches the server after all of these.
        for id in self.watches.ids() {
            self.register_watch(id, None, ctx);
        }
        for pending in self.pending.drain(..) {
            pending(Ok((client.clone(), generation, retired.clone())));
        }
        self.track_ensemble(ctx);
        self.broadcast(SessionEvent::Connected { session_id, generation });
    }

    fn watch_state(mut watcher: StateWatcher, generation: u64, ctx: &mut Context<Self>) -> SpawnHandle {
        let next = async move {
            let state = watcher.changed().await;
            (state, watcher)
        };
        ctx.spawn(
            next.into_actor_free()
                .map(move |(state, watcher), act: &mut Self, ctx| act.on_state(generation, state, watcher, ctx)),
        )
    }

    fn on_state(&mut self, generation: u64, state: SessionState, watcher: StateWatcher, ctx: &mut Context<Self>) {
        if generation != self.generation {
            return;
        }
        let State::Live(live) = &mut self.state else { return };
        let session_id = live.session_id;
        let span = tracing::info_span!("zk.session", session = %session_id, generation);
        let _entered = span.enter();
        match state {
            SessionState::Disconnected => {
                info!("connection lost; session suspended");
                let since = Instant::now();
                live.link = Connection::Down { since };
                live.state_task = Self::watch_state(watcher, generation, ctx);
                self.health.session(HealthState::Suspended { since }, Some(session_id), generation);
                self.watches.mark_stale();
                // A `Reconnected` still held is moot: another follows this outage.
                let _ = self.gate.release();
                self.broadcast(SessionEvent::Suspended { session_id, generation });
                self.consider_moving(ctx);
            }
            SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                live.state_task = Self::watch_state(watcher, generation, ctx);
                self.link_up(state == SessionState::ConnectedReadOnly, ctx);
            }
            SessionState::Expired => self.expired(ctx),
            SessionState::AuthFailed => self.auth_failed(ctx),
            SessionState::Closed => {
                info!("session closed");
                self.finish(ctx);
            }
        }
    }

    /// The live session's connection is up (again): after a reconnect, or after the session
    /// moved to a new client.
    fn link_up(&mut self, read_only: bool, ctx: &mut Context<Self>) {
        let State::Live(live) = &mut self.state else { return };
        let (session_id, generation) = (live.session_id, self.generation);
        let was_down = match live.link {
            Connection::Down { since } | Connection::Moving { since, .. } => {
                info!(after = ?since.elapsed(), read_only, "reconnected; same session");
                true
            }
            Connection::Up => false,
        };
        live.link = Connection::Up;
        self.lease.read_only(read_only);
        // A reconnect renegotiates the timeout (a server restarted with a lower
        // `maxSessionTimeout` grants less): the server counts the session's life from the
        // reconnect with the new timeout, and every renewal the lease counts from was sent
        // before it, so the new span applies to it at once.
        let timeout = live.client.session_timeout();
        if std::mem::replace(&mut live.negotiated, timeout) != timeout {
            info!(?timeout, "the session's timeout was renegotiated on the reconnect");
            self.lease.respan(session_id, timeout, self.config.lease_margin(timeout));
            self.arm_heartbeat(timeout, ctx);
        }
        if was_down {
            // Maybe another member, maybe of another version (see `features.rs`).
            self.features.connected_again();
            let up = HealthState::Connected { since: Instant::now(), read_only };
            self.health.session(up, Some(session_id), generation);
        }
        // A persistent watch whose re-registration failed during the outage (or that a move
        // left behind) gets another chance now.
        for id in self.watches.ids() {
            if self.watches.get_mut(id).is_some_and(|w| w.task.is_none()) {
                self.register_watch(id, None, ctx);
            }
        }
        if was_down {
            let news = SessionEvent::Reconnected { session_id, generation, read_only };
            match self.gate.reconnected(news, self.watches.any_stale()) {
                Some(news) => self.broadcast(news),
                None => {
                    ctx.run_later(RECONNECT_HOLD, |act, _| {
                        if let Some(news) = act.gate.release() {
                            warn!("a persistent watch was not added again in time; telling Reconnected anyway");
                            act.broadcast(news);
                        }
                    });
                }
            }
        }
        // The outage may have outlasted the lease's renewals: renew it now.
        self.heartbeat(ctx);
        if matches!(self.config_watch, ConfigWatch::Unset) {
            self.track_ensemble(ctx);
        }
    }

    /// The live session expired (the client library said so, or a move found it gone).
    fn expired(&mut self, ctx: &mut Context<Self>) {
        let State::Live(live) = &self.state else { return };
        let (session_id, generation) = (live.session_id, self.generation);
        warn!("session expired");
        self.live.clear();
        self.lease.ended(session_id);
        let _ = self.gate.release();
        for task in self.watches.take_tasks() {
            ctx.cancel_future(task);
        }
        self.unwatch_config(ctx);
        // Requests that waited for a move were meant for this session.
        for pending in self.pending.drain(..) {
            pending(Err(Error::SessionLost { path: String::new() }));
        }
        self.broadcast(SessionEvent::Expired { session_id, generation });
        if self.config.rebuild_policy().rebuilds_after_expiry() {
            self.connect(ctx, 0);
        } else {
            warn!("the rebuild policy says never: the session actor stops");
            self.finish(ctx);
        }
    }

    fn auth_failed(&mut self, ctx: &mut Context<Self>) {
        warn!("authentication failed; closing the session actor");
        self.ended_by = Some(Error::AuthFailed);
        self.broadcast(SessionEvent::AuthFailed);
        self.finish(ctx);
    }

    /// A session cannot be built, and trying again cannot help (a certificate problem): callers
    /// waiting for a session and pending requests hear `error`; subscribers hear `Closed`.
    fn cannot_connect(&mut self, error: Error, ctx: &mut Context<Self>) {
        warn!(%error, "cannot connect; closing the session actor");
        self.ended_by = Some(error);
        self.finish(ctx);
    }

    /// Ends everything: pending requests fail with `Closed` (or what ended the actor),
    /// subscribers hear `Closed`.
    fn finish(&mut self, ctx: &mut Context<Self>) {
        self.live.clear();
        self.lease.closed();
        self.health.session(HealthState::Closed, None, self.generation);
        match std::mem::replace(&mut self.state, State::Closed) {
            State::Connecting { task, .. } => {
                ctx.cancel_future(task);
            }
            State::Live(live) => {
                ctx.cancel_future(live.state_task);
                if let Connection::Moving { task, .. } = live.link {
                    ctx.cancel_future(task);
                }
            }
            State::Closed => {}
        }
        self.unwatch_config(ctx);
        for task in self.watches.take_tasks() {
            ctx.cancel_future(task);
        }
        for mut watch in self.watches.drain() {
            watch.settle(Err(Error::Closed));
        }
        let ended_by = self.ended_by.clone().unwrap_or(Error::Closed);
        for pending in self.pending.drain(..) {
            pending(Err(ended_by.clone()));
        }
        self.broadcast(SessionEvent::Closed);
        self.subscribers.clear();
        for waiter in self.closing.take().into_iter().flatten() {
            let _ = waiter.send(());
        }
        ctx.stop();
    }

    fn sweep(&mut self, ctx: &mut Context<Self>) {
        for id in self.watches.orphans() {
            debug!(?id, "removing a persistent watch whose owner stopped");
            if let Some(task) = self.watches.remove(id).and_then(|w| w.task) {
                ctx.cancel_future(task);
            }
        }
        self.subscribers.sweep();
    }

    // ---- requests ---------------------------------------------------------------------------

    /// Checks a path before anything is sent.
    fn check(&self, path: &str, sequential: bool) -> Result<()> {
        path::validate(path, sequential)
    }

    /// Checks that a request of `size` bytes (as [`sizing`] counts them) fits the server.
    fn check_size(&self, path: &str, size: usize) -> Result<()> {
        let limit = self.config.max_request_size();
        if size > limit { Err(Error::DataTooLarge { path: path.to_string(), size, limit }) } else { Ok(()) }
    }

    /// Bytes the chroot adds to every path sent.
    fn chroot_len(&self) -> usize {
        self.config.chroot().map_or(0, str::len)
    }

    /// Runs `op` on the current client *now* (sending its request), or queues it until a session
    /// exists. `op` gets an owned client clone and the session generation.
    fn dispatch<T: 'static>(
        &mut self,
        traced: Traced,
        op: impl FnOnce(Client, u64, Retired) -> BoxFuture<Result<T>> + 'static,
    ) -> BoxFuture<Result<T>> {
        let Traced { op: name, span, path } = traced;
        let started = std::time::Instant::now();
        // Only what the quorum's leader handled renews the lease (see `lease.rs`).
        let lease = matches!(name, "create" | "delete" | "set_data" | "multi" | "sync").then(|| self.lease.clone());
        let lost_path = path.clone();
        let op = move |client: Client, generation, retired: Retired| -> BoxFuture<Result<T>> {
            let (session, sent) = (client.session_id(), Instant::now());
            let sent_op = op(client, generation, retired.clone());
            Box::pin(async move {
                // A client retired because the session moved answers nothing more: what was
                // sent through it may or may not have been applied.
                // The retirement first: a retired client's futures must not be polled (see
                // `ClientThread::retire`).
                let outcome = futures::select_biased! {
                    () = futures::FutureExt::fuse(retired.wait()) => Err(Error::ConnectionLoss { path }),
                    outcome = futures::FutureExt::fuse(sent_op) => outcome,
                };
                metrics::request(name, outcome.is_ok(), started.elapsed());
                if let Some(lease) = lease.filter(|_| outcome.as_ref().map_or_else(Error::answered_by_server, |_| true))
                {
                    lease.heard(session, sent);
                }
                outcome
            })
        };
        match &self.state {
            State::Live(Live { client, thread, link: Connection::Up | Connection::Down { .. }, .. }) => {
                send_now(op(client.clone(), self.generation, thread.retired()).instrument(span))
            }
            State::Closed => Box::pin(futures::future::ready(Err(Error::Closed))),
            State::Connecting { .. } | State::Live(Live { link: Connection::Moving { .. }, .. }) => {
                let (tx, rx) = oneshot::channel::<BoxFuture<Result<T>>>();
                self.pending.push_back(Box::new(move |session| {
                    // The caller gave up waiting: do not send a request nobody will read.
                    if tx.is_canceled() {
                        return;
                    }
                    let fut = match session {
                        Ok((client, generation, retired)) => send_now(op(client, generation, retired).instrument(span)),
                        // A move that ended in the session's expiry: this was meant for it.
                        Err(Error::SessionLost { .. }) => failed(Error::SessionLost { path: lost_path }),
                        Err(err) => failed(err),
                    };
                    let _ = tx.send(fut);
                }));
                let wait = self.config.request_timeout();
                Box::pin(async move {
                    match tokio::time::timeout(wait, rx).await {
                        Ok(Ok(fut)) => fut.await,
                        Ok(Err(_)) => Err(Error::Closed),
                        Err(_) => Err(Error::Timeout { what: "a session".into(), after: wait }),
                    }
                })
            }
        }
    }

    /// Keeps a wanted lease fresh: when nothing has renewed it for a third of the session
    /// timeout (looked at every twelfth, so the `sync` leaves by 5/12 of the timeout, when at
    /// least 0.7 - 5/12 = 0.28 of it is left of the lease with the default margin), sends a
    /// `sync` of the chroot's root (it goes through the quorum's leader, which
    /// is what a renewal must prove). The client's own pings renew the session on the server
    /// too, but their replies are not told to us, and a follower answers them alone.
    fn heartbeat(&mut self, ctx: &mut Context<Self>) {
        let State::Live(live) = &self.state else { return };
        if !matches!(live.link, Connection::Up) || !self.lease.is_wanted() {
            return;
        }
        let quiet_for = self.lease.peek().map_or(Duration::MAX, |(heard, _)| heard.elapsed());
        if quiet_for < live.client.session_timeout() / 3 {
            return;
        }
        let reply = <Self as Handler<Sync>>::handle(self, Sync { path: "/".to_owned() }, ctx);
        ctx.spawn(reply.into_actor_free().map(|_, _: &mut Self, _| ()));
    }

    /// Looks whether a heartbeat is due twelve times per negotiated session timeout.
    fn arm_heartbeat(&mut self, negotiated: Duration, ctx: &mut Context<Self>) {
        if let Some(old) = self.heartbeat_task.take() {
            ctx.cancel_future(old);
        }
        let beat = (negotiated / 12).max(MIN_HEARTBEAT_TICK);
        self.heartbeat_task = Some(ctx.run_interval(beat, |act, ctx| act.heartbeat(ctx)));
    }

    fn span(&self, op: &'static str, path: &str) -> Traced {
        // Field values are evaluated only when the span is enabled: no formatting otherwise.
        let session = self.session_id().map(tracing::field::display);
        let span = tracing::debug_span!("zk.request", op, path, session, generation = self.generation);
        Traced { op, span, path: path.to_owned() }
    }
}

/// A request's span, its operation's name for the request-latency metric, and its path for the
/// errors the session itself answers.
struct Traced {
    op: &'static str,
    span: tracing::Span,
    path: String,
}

/// Polls a request future once, right now, so that its request is written to the client's
/// queue inside the current handler; returns the rest of it. The no-op waker is fine: whoever
/// polls the returned future next registers a real waker.
fn send_now<T: 'static>(fut: impl Future<Output = T> + 'static) -> BoxFuture<T> {
    let mut fut: BoxFuture<T> = Box::pin(fut);
    let mut cx = TaskContext::from_waker(futures::task::noop_waker_ref());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(value) => Box::pin(futures::future::ready(value)),
        Poll::Pending => fut,
    }
}

fn failed<T: 'static>(err: Error) -> BoxFuture<Result<T>> {
    Box::pin(futures::future::ready(Err(err)))
}

/// `into_actor` without needing the actor value (the futures here own everything they use).
pub(crate) trait IntoActorFree: Future + Sized + 'static {
    fn into_actor_free<A: Actor>(self) -> actix::fut::future::FutureWrap<Self, A> {
        actix::fut::wrap_future(self)
    }
}

impl<F: Future + 'static> IntoActorFree for F {}

impl Actor for SessionActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Senders must never be told "mailbox full": actix would then deliver that message
        // later than ones sent after it, and request order is what pipelining relies on.
        ctx.set_mailbox_capacity(1 << 20);
        self.me = Some(ctx.address().downgrade());
        if self.config.world_open_with_auth() {
            // Authentication names who we are; it protects nothing while the nodes we make
            // let anyone in (README, "Protecting nodes").
            warn!(
                "authentication is configured but the default ACL is open to the world: every node \
                 the recipes make stays readable, writable and deletable by anyone; set \
                 SessionConfig::with_default_acl (e.g. creator-only)"
            );
        }
        ctx.run_interval(SWEEP_INTERVAL, |act, ctx| act.sweep(ctx));
        // The lifetime rule every recipe follows: dropping the last address (every
        // `SessionHandle`, those held by recipe actors included) ends the actor, here by closing
        // the session (its ephemerals go at once), as that drop happens: neither the sweep's
        // interval nor anything else the session runs keeps it alive.
        crate::stop::when_unaddressed(ctx, |act: &mut Self, ctx| {
            if !matches!(act.state, State::Closed) {
                info!("the last handle to the session was dropped; closing it");
                ctx.notify(Close);
            }
        });
        self.connect(ctx, 0);
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        if !matches!(self.state, State::Closed) {
            self.state = State::Closed;
            self.broadcast(SessionEvent::Closed);
        }
        match (&self.residents, self.owns_arbiter) {
            (Some(residents), true) => residents.session_stopped(),
            (None, true) => {
                Arbiter::current().stop();
            }
            (_, false) => {}
        }
    }
}

impl Handler<WindowEnded> for SessionActor {
    type Result = ();

    fn handle(&mut self, msg: WindowEnded, _: &mut Context<Self>) {
        if let Some(damper) = self.damper.as_mut() {
            let damped = damper.window_ended(msg.0);
            self.tell_damped(damped);
        }
    }
}

mod close;
mod multi;
mod nodes;
mod reconfig;
mod subscribers;
mod watches;
