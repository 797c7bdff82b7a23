//! The [`SessionActor`]: the one owner of the ZooKeeper connection.
//!
//! Owns: the `zookeeper_client::Client`, the session's state machine
//! (`Connecting → Live{Up|Down} → (Expired →) Connecting → ... → Closed`), the session
//! generation, rebuilding a session after expiry, the subscribers of [`SessionEvent`]s, the
//! queue of requests that arrive while no session exists, and the persistent-watch registry.
//! Does not own recipes: they talk to it through messages (or a [`SessionHandle`]).
//!
//! [`SessionHandle`]: super::SessionHandle

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
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

use super::config::SessionConfig;
use super::events::{SessionEvent, SessionId, WatchEvent, WatchEventKind, WatchId};
use super::requests::*;
use super::sizing;
use super::watch::{PersistentWatch, ReconnectGate, WatchRegistry, WatchSink, deliver_once};
use crate::error::{Error, Result};
use crate::events::{Listen, Subscribers};
use crate::metrics;
use crate::path;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// A request waiting for a session: called with the new client (and its generation), or with
/// the error that ended the wait.
type Pending = Box<dyn FnOnce(Result<(Client, u64)>)>;

/// How often orphaned watches and subscribers (whose actor stopped) are swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// How long `Close` waits for the server to confirm the session is closed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

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
    link: Link,
    state_task: SpawnHandle,
}

/// The connection under a live session.
#[derive(Clone, Copy)]
enum Link {
    Up,
    Down { since: Instant },
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
    /// What ended the actor, when it was not a close: told to callers instead of `Closed`.
    ended_by: Option<Error>,
    /// Since when the connection is down (for the time-suspended metric).
    suspended_at: Option<std::time::Instant>,
    /// The id of the live session, 0 while none is (before the first, after an expiry, once
    /// closed): shared with every [`SessionHandle`](super::SessionHandle), so that an actor on
    /// another thread can tell, without a message, whether a session it got a reply from has
    /// ended since.
    live: Arc<AtomicI64>,
}

impl SessionActor {
    /// A session actor for `config`. `owns_arbiter`: stop the current Arbiter when the actor
    /// stops (true when it was started on an Arbiter of its own).
    pub fn new(config: SessionConfig, owns_arbiter: bool) -> Self {
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
            ended_by: None,
            suspended_at: None,
            live: Arc::new(AtomicI64::new(0)),
        }
    }

    /// Keeps the live session's id in `cell` (see the field).
    pub(crate) fn with_live_cell(mut self, cell: Arc<AtomicI64>) -> Self {
        self.live = cell;
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
            connected: matches!(live.link, Link::Up),
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
        self.subscribers.tell(event);
    }

    // ---- connection lifecycle -------------------------------------------------------------

    fn connect(&mut self, ctx: &mut Context<Self>, attempt: u32) {
        let Some(delay) = self.config.rebuild_policy().delay(attempt) else {
            warn!(attempt, "giving up on connecting: the rebuild policy is exhausted");
            self.finish(ctx);
            return;
        };
        let connector = self.config.connector();
        #[cfg(feature = "tls")]
        let tls = self.config.tls().cloned();
        let hosts = self.config.hosts().to_string();
        let chroot = self.config.chroot().map(str::to_string);
        let acl = self.config.default_acl().to_vec();
        let fut = async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let connector = connector?;
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
            let Some(root) = chroot else { return Ok(client) };
            // Curator creates its namespace on demand; so do we, with the default ACL.
            client.mkdir(&root, &CreateMode::Persistent.options(&acl)).await.map_err(|e| Error::from_zk(&root, e))?;
            client
                .chroot(root.clone())
                .map_err(|_| Error::InvalidPath { path: root, reason: "rejected as a chroot".into() })
        };
        let task = ctx.spawn(
            fut.instrument(tracing::info_span!("zk.connect", hosts = %self.config.hosts(), attempt))
                .into_actor(self)
                .map(move |outcome, act, ctx| {
                    if !matches!(act.state, State::Connecting { .. }) {
                        return; // closed meanwhile; dropping the client closes the session
                    }
                    match outcome {
                        Ok(client) => act.on_session(client, ctx),
                        Err(Error::AuthFailed) => act.auth_failed(ctx),
                        Err(error @ Error::Tls { .. }) => act.cannot_connect(error, ctx),
                        Err(err) => {
                            warn!(attempt, error = %err, "could not establish a session; will retry");
                            act.connect(ctx, attempt + 1);
                        }
                    }
                }),
        );
        self.state = State::Connecting { task };
    }

    fn on_session(&mut self, client: Client, ctx: &mut Context<Self>) {
        self.generation += 1;
        let generation = self.generation;
        let session_id = client.session_id();
        let state_task = Self::watch_state(client.state_watcher(), generation, ctx);
        info!(session = %session_id, generation, timeout = ?client.session_timeout(), "session established");
        self.state = State::Live(Live { client: client.clone(), session_id, link: Link::Up, state_task });
        self.live.store(session_id.0, Ordering::SeqCst);
        // Watches first, then the requests that waited, then the news: anything a subscriber
        // sends after `Connected` reaches the server after all of these.
        for id in self.watches.ids() {
            self.register_watch(id, None, ctx);
        }
        for pending in self.pending.drain(..) {
            pending(Ok((client.clone(), generation)));
        }
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
                live.link = Link::Down { since: Instant::now() };
                live.state_task = Self::watch_state(watcher, generation, ctx);
                self.watches.mark_stale();
                // A `Reconnected` still held is moot: another follows this outage.
                let _ = self.gate.release();
                self.broadcast(SessionEvent::Suspended { session_id, generation });
            }
            SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                let read_only = state == SessionState::ConnectedReadOnly;
                let was_down = match live.link {
                    Link::Down { since } => {
                        info!(after = ?since.elapsed(), read_only, "reconnected; same session");
                        true
                    }
                    Link::Up => false,
                };
                live.link = Link::Up;
                live.state_task = Self::watch_state(watcher, generation, ctx);
                // A persistent watch whose re-registration failed during the outage gets
                // another chance now.
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
            }
            SessionState::Expired => {
                warn!("session expired");
                self.live.store(0, Ordering::SeqCst);
                let _ = self.gate.release();
                for task in self.watches.take_tasks() {
                    ctx.cancel_future(task);
                }
                self.broadcast(SessionEvent::Expired { session_id, generation });
                if self.config.rebuild_policy().rebuilds_after_expiry() {
                    self.connect(ctx, 0);
                } else {
                    warn!("the rebuild policy says never: the session actor stops");
                    self.finish(ctx);
                }
            }
            SessionState::AuthFailed => self.auth_failed(ctx),
            SessionState::Closed => {
                info!("session closed");
                self.finish(ctx);
            }
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
        self.live.store(0, Ordering::SeqCst);
        match std::mem::replace(&mut self.state, State::Closed) {
            State::Connecting { task, .. } => {
                ctx.cancel_future(task);
            }
            State::Live(live) => {
                ctx.cancel_future(live.state_task);
            }
            State::Closed => {}
        }
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
        // The lifetime rule every recipe follows: dropping the last address (every
        // `SessionHandle`, those held by recipe actors included) ends the actor, here by closing
        // the session (its ephemerals go at once). The interval itself would keep it alive.
        if !ctx.connected() && !matches!(self.state, State::Closed) {
            info!("the last handle to the session was dropped; closing it");
            ctx.notify(Close);
        }
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
        op: impl FnOnce(Client, u64) -> BoxFuture<Result<T>> + 'static,
    ) -> BoxFuture<Result<T>> {
        let Traced { op: name, span } = traced;
        let started = std::time::Instant::now();
        let op = move |client, generation| -> BoxFuture<Result<T>> {
            Box::pin(futures::FutureExt::map(op(client, generation), move |outcome| {
                metrics::request(name, outcome.is_ok(), started.elapsed());
                outcome
            }))
        };
        match &self.state {
            State::Live(live) => send_now(op(live.client.clone(), self.generation).instrument(span)),
            State::Closed => Box::pin(futures::future::ready(Err(Error::Closed))),
            State::Connecting { .. } => {
                let (tx, rx) = oneshot::channel::<BoxFuture<Result<T>>>();
                self.pending.push_back(Box::new(move |session| {
                    // The caller gave up waiting: do not send a request nobody will read.
                    if tx.is_canceled() {
                        return;
                    }
                    let fut = match session {
                        Ok((client, generation)) => send_now(op(client, generation).instrument(span)),
                        Err(err) => Box::pin(futures::future::ready(Err(err))) as BoxFuture<_>,
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

    fn span(&self, op: &'static str, path: &str) -> Traced {
        let session = self.session_id().map(|id| id.to_string()).unwrap_or_default();
        Traced { op, span: tracing::debug_span!("zk.request", op, path, session, generation = self.generation) }
    }

    // ---- persistent watches ---------------------------------------------------------------

    /// Sends `addWatch` for a registered watch. `previous` is the watcher it replaces after a
    /// reconnect; it is dropped only once the new one is registered, because dropping the last
    /// client-side watcher of a path makes the client remove the watch on the server.
    fn register_watch(&mut self, id: WatchId, previous: Option<PersistentWatcher>, ctx: &mut Context<Self>) {
        let State::Live(live) = &self.state else { return };
        let client = live.client.clone();
        let generation = self.generation;
        let Some(watch) = self.watches.get_mut(id) else { return };
        let path = watch.path.clone();
        let mode = watch.client_mode();
        let span = tracing::debug_span!("zk.add_watch", path = %path, ?mode, generation);
        let fut = send_now(
            Box::pin(async move {
                let registered = client.watch(&path, mode).await.map_err(|e| Error::from_zk(&path, e));
                drop(previous);
                registered
            })
            .instrument(span),
        );
        let task = ctx.spawn(
            fut.into_actor_free()
                .map(move |outcome, act: &mut Self, ctx| act.on_watch_registered(id, generation, outcome, ctx)),
        );
        if let Some(old) = watch.task.replace(task) {
            ctx.cancel_future(old);
        }
        // Sent: whatever an owner sends from now on reaches the server after it.
        watch.stale = false;
        if let Some(news) = self.gate.watch_added(self.watches.any_stale()) {
            self.broadcast(news);
        }
    }

    fn on_watch_registered(
        &mut self,
        id: WatchId,
        generation: u64,
        outcome: Result<PersistentWatcher>,
        ctx: &mut Context<Self>,
    ) {
        if generation != self.generation {
            return;
        }
        let Some(watch) = self.watches.get_mut(id) else { return };
        match outcome {
            Ok(watcher) => {
                if !watch.settle(Ok(id)) {
                    // Dropping the watcher removes the watch on the server.
                    debug!(?id, path = %watch.path, "persistent watch set for a caller that went; removed");
                    self.watches.remove(id);
                    return;
                }
                watch.task = Some(Self::next_watch_event(id, generation, watcher, ctx));
            }
            Err(err) if err.is_transient() => {
                // Retried on the next `SyncConnected` or the next session.
                debug!(?id, error = %err, "persistent watch not registered yet");
                watch.task = None;
            }
            Err(err) => {
                warn!(?id, error = %err, "persistent watch refused");
                if let Some(mut watch) = self.watches.remove(id) {
                    watch.settle(Err(err));
                }
            }
        }
    }

    fn next_watch_event(
        id: WatchId,
        generation: u64,
        mut watcher: PersistentWatcher,
        ctx: &mut Context<Self>,
    ) -> SpawnHandle {
        let next = async move {
            let event = watcher.changed().await;
            (event, watcher)
        };
        ctx.spawn(
            next.into_actor_free().map(move |(event, watcher), act: &mut Self, ctx| {
                act.on_watch_event(id, generation, event, watcher, ctx)
            }),
        )
    }

    fn on_watch_event(
        &mut self,
        id: WatchId,
        generation: u64,
        event: WatchedEvent,
        watcher: PersistentWatcher,
        ctx: &mut Context<Self>,
    ) {
        if generation != self.generation {
            return;
        }
        // Removed meanwhile: dropping `watcher` removes it from the client.
        let Some(watch) = self.watches.get_mut(id) else { return };
        match WatchEventKind::from_zk(event.event_type) {
            // The client must not be polled after a terminal state (it panics); the watch is
            // re-registered on the next session.
            None if event.session_state.is_terminated() => {
                watch.task = None;
                return;
            }
            // Back on the same session: the client library (0.11.2) re-sets only one-shot
            // watches on reconnect (its `resend_watches` never sends `SetWatches2`), so the
            // persistent watch is added again here. Events in between are lost either way
            // (ZOOKEEPER-4698); owners re-read on `Reconnected`.
            None if event.session_state == SessionState::SyncConnected
                || event.session_state == SessionState::ConnectedReadOnly =>
            {
                self.register_watch(id, Some(watcher), ctx);
                return;
            }
            // Disconnected: subscribers hear about it as a `SessionEvent`.
            None => {}
            Some(kind) => {
                if !watch.recipient.connected() {
                    self.watches.remove(id);
                    return;
                }
                watch.recipient.do_send(WatchEvent { path: event.path, kind, generation, watch: Some(id) });
            }
        }
        watch.task = Some(Self::next_watch_event(id, generation, watcher, ctx));
    }
}

/// The longest `Reconnected` waits for the persistent watches to be added again.
const RECONNECT_HOLD: Duration = Duration::from_secs(2);

/// A request's span, and its operation's name for the request-latency metric.
struct Traced {
    op: &'static str,
    span: tracing::Span,
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
        ctx.run_interval(SWEEP_INTERVAL, |act, ctx| act.sweep(ctx));
        self.connect(ctx, 0);
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        if !matches!(self.state, State::Closed) {
            self.state = State::Closed;
            self.broadcast(SessionEvent::Closed);
        }
        if self.owns_arbiter {
            Arbiter::current().stop();
        }
    }
}

// ---- handlers ---------------------------------------------------------------------------------

impl Handler<Create> for SessionActor {
    type Result = ResponseFuture<Result<Created>>;

    fn handle(&mut self, msg: Create, _: &mut Context<Self>) -> Self::Result {
        if let Err(err) = self.check(&msg.path, msg.mode.is_sequential()) {
            return failed(err);
        }
        let Create { path, data, mode, acl } = msg;
        let acl = acl.unwrap_or_else(|| self.config.default_acl().to_vec());
        if let Err(err) = self.check_size(&path, sizing::create(&path, &data, &acl, self.chroot_len())) {
            return failed(err);
        }
        let span = self.span("create", &path);
        self.dispatch(span, move |client, _| {
            Box::pin(async move {
                let (stat, sequence) =
                    client.create(&path, &data, &mode.options(&acl)).await.map_err(|e| Error::from_zk(&path, e))?;
                if mode.is_sequential() {
                    let number = u64::try_from(sequence.into_i64()).ok();
                    Ok(Created { path: format!("{path}{sequence}"), stat, sequence: number })
                } else {
                    Ok(Created { path, stat, sequence: None })
                }
            })
        })
    }
}

impl Handler<Delete> for SessionActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: Delete, _: &mut Context<Self>) -> Self::Result {
        if let Err(err) = self.check(&msg.path, false) {
            return failed(err);
        }
        let span = self.span("delete", &msg.path);
        self.dispatch(span, move |client, _| {
            Box::pin(
                async move { client.delete(&msg.path, msg.version).await.map_err(|e| Error::from_zk(&msg.path, e)) },
            )
        })
    }
}

impl Handler<GetData> for SessionActor {
    type Result = ResponseFuture<Result<NodeData>>;

    fn handle(&mut self, msg: GetData, _: &mut Context<Self>) -> Self::Result {
        self.get_data(msg.path, msg.watch.map(WatchSink::Actor))
    }
}

impl Handler<GetDataUntilDropped> for SessionActor {
    type Result = ResponseFuture<Result<NodeData>>;

    fn handle(&mut self, msg: GetDataUntilDropped, _: &mut Context<Self>) -> Self::Result {
        self.get_data(msg.path, Some(WatchSink::Once(msg.tx)))
    }
}

impl SessionActor {
    fn get_data(&mut self, path: String, sink: Option<WatchSink>) -> ResponseFuture<Result<NodeData>> {
        if let Err(err) = self.check(&path, false) {
            return failed(err);
        }
        let span = self.span("get_data", &path);
        self.dispatch(span, move |client, generation| {
            Box::pin(async move {
                let fail = |e| Error::from_zk(&path, e);
                match sink {
                    None => client.get_data(&path).await.map(|(data, stat)| NodeData { data, stat }).map_err(fail),
                    Some(sink) => {
                        let (data, stat, watcher) = client.get_and_watch_data(&path).await.map_err(fail)?;
                        deliver_once(watcher, path.clone(), sink, generation);
                        Ok(NodeData { data, stat })
                    }
                }
            })
        })
    }

    fn get_children(&mut self, path: String, sink: Option<WatchSink>) -> ResponseFuture<Result<Children>> {
        if let Err(err) = self.check(&path, false) {
            return failed(err);
        }
        let span = self.span("get_children", &path);
        self.dispatch(span, move |client, generation| {
            Box::pin(async move {
                let fail = |e| Error::from_zk(&path, e);
                match sink {
                    None => {
                        client.get_children(&path).await.map(|(names, stat)| Children { names, stat }).map_err(fail)
                    }
                    Some(sink) => {
                        let (names, stat, watcher) = client.get_and_watch_children(&path).await.map_err(fail)?;
                        deliver_once(watcher, path.clone(), sink, generation);
                        Ok(Children { names, stat })
                    }
                }
            })
        })
    }
}

impl Handler<SetData> for SessionActor {
    type Result = ResponseFuture<Result<Stat>>;

    fn handle(&mut self, msg: SetData, _: &mut Context<Self>) -> Self::Result {
        if let Err(err) = self.check(&msg.path, false) {
            return failed(err);
        }
        if let Err(err) = self.check_size(&msg.path, sizing::set_data(&msg.path, &msg.data, self.chroot_len())) {
            return failed(err);
        }
        let span = self.span("set_data", &msg.path);
        self.dispatch(span, move |client, _| {
            Box::pin(async move {
                client.set_data(&msg.path, &msg.data, msg.version).await.map_err(|e| Error::from_zk(&msg.path, e))
            })
        })
    }
}

impl Handler<Exists> for SessionActor {
    type Result = ResponseFuture<Result<Option<Stat>>>;

    fn handle(&mut self, msg: Exists, _: &mut Context<Self>) -> Self::Result {
        self.exists(msg.path, msg.watch.map(WatchSink::Actor))
    }
}

impl Handler<ExistsUntilDropped> for SessionActor {
    type Result = ResponseFuture<Result<Option<Stat>>>;

    fn handle(&mut self, msg: ExistsUntilDropped, _: &mut Context<Self>) -> Self::Result {
        self.exists(msg.path, Some(WatchSink::Once(msg.tx)))
    }
}

impl SessionActor {
    fn exists(&mut self, path: String, sink: Option<WatchSink>) -> ResponseFuture<Result<Option<Stat>>> {
        if let Err(err) = self.check(&path, false) {
            return failed(err);
        }
        let span = self.span("exists", &path);
        self.dispatch(span, move |client, generation| {
            Box::pin(async move {
                let fail = |e| Error::from_zk(&path, e);
                match sink {
                    None => client.check_stat(&path).await.map_err(fail),
                    Some(sink) => {
                        let (stat, watcher) = client.check_and_watch_stat(&path).await.map_err(fail)?;
                        deliver_once(watcher, path.clone(), sink, generation);
                        Ok(stat)
                    }
                }
            })
        })
    }
}

impl Handler<GetChildren> for SessionActor {
    type Result = ResponseFuture<Result<Children>>;

    fn handle(&mut self, msg: GetChildren, _: &mut Context<Self>) -> Self::Result {
        self.get_children(msg.path, msg.watch.map(WatchSink::Actor))
    }
}

impl Handler<GetChildrenUntilDropped> for SessionActor {
    type Result = ResponseFuture<Result<Children>>;

    fn handle(&mut self, msg: GetChildrenUntilDropped, _: &mut Context<Self>) -> Self::Result {
        self.get_children(msg.path, Some(WatchSink::Once(msg.tx)))
    }
}

impl Handler<Multi> for SessionActor {
    type Result = ResponseFuture<Result<Vec<OpResult>>>;

    fn handle(&mut self, msg: Multi, _: &mut Context<Self>) -> Self::Result {
        for (index, op) in msg.ops.iter().enumerate() {
            let sequential = matches!(op, Op::Create { mode, .. } if mode.is_sequential());
            if let Err(err) = self.check(op.path(), sequential) {
                return failed(Error::Multi { index, source: Box::new(err) });
            }
        }
        let acl = self.config.default_acl().to_vec();
        let first = msg.ops.first().map(|op| op.path().to_string()).unwrap_or_else(|| "/".into());
        // The whole request counts, not each op: a `multi` of small ops can be too large.
        if let Err(err) = self.check_size(&first, sizing::multi(&msg.ops, &acl, self.chroot_len())) {
            return failed(err);
        }
        let span = self.span("multi", &first);
        self.dispatch(span, move |client, _| {
            Box::pin(async move {
                let ops = msg.ops;
                let mut writer = client.new_multi_writer();
                for (index, op) in ops.iter().enumerate() {
                    let added = match op {
                        Op::Check { path, version } => writer.add_check_version(path, *version),
                        Op::Create { path, data, mode } => writer.add_create(path, data, &mode.options(&acl)),
                        Op::SetData { path, data, version } => writer.add_set_data(path, data, *version),
                        Op::Delete { path, version } => writer.add_delete(path, *version),
                    };
                    added.map_err(|e| Error::Multi { index, source: Box::new(Error::from_zk(op.path(), e)) })?;
                }
                multi_reply(&ops, &first, writer.commit().await)
            })
        })
    }
}

/// `OnSession<M>` for the requests a pinned write needs (a blanket impl over every `M` sends
/// the trait solver into a loop).
macro_rules! on_session {
    ($($request:ty),*) => {$(
        impl Handler<OnSession<$request>> for SessionActor {
            type Result = <Self as Handler<$request>>::Result;

            fn handle(&mut self, msg: OnSession<$request>, ctx: &mut Context<Self>) -> Self::Result {
                // Checked in the handler that sends the request: nothing can switch sessions
                // between the check and the send, and the client of an ended session only
                // answers `Expired`.
                let same = matches!(self.state, State::Live(_)) && self.generation == msg.generation;
                if !same {
                    return failed(Error::SessionLost { path: msg.path });
                }
                <Self as Handler<$request>>::handle(self, msg.request, ctx)
            }
        }
    )*};
}

on_session!(Create, Delete, Exists, GetData, SetData, Multi, Sync);

/// Translates the server's reply to a `multi` of `ops`; `first` is the first op's path.
///
/// Every index and count in the reply is checked against the request: the reply comes from the
/// network, and one that does not fit must fail this request, not panic the task serving it.
fn multi_reply(
    ops: &[Op],
    first: &str,
    reply: std::result::Result<Vec<MultiWriteResult>, MultiWriteError>,
) -> Result<Vec<OpResult>> {
    let unexpected = |reason: String| Error::UnexpectedReply { path: first.to_owned(), reason };
    let results = match reply {
        Ok(results) => results,
        Err(MultiWriteError::RequestFailed { source }) => return Err(Error::from_zk(first, source)),
        Err(MultiWriteError::OperationFailed { index, source }) => {
            return Err(match ops.get(index) {
                Some(op) => Error::Multi { index, source: Box::new(Error::from_zk(op.path(), source)) },
                None => unexpected(format!(
                    "operation #{index} failed ({source}), but the multi has {} operations",
                    ops.len()
                )),
            });
        }
    };
    if results.len() != ops.len() {
        return Err(unexpected(format!("{} results for {} operations", results.len(), ops.len())));
    }
    ops.iter()
        .zip(results)
        .enumerate()
        .map(|(index, (op, result))| match (op, result) {
            (Op::Check { .. }, MultiWriteResult::Check) => Ok(OpResult::Checked),
            (Op::Create { .. }, MultiWriteResult::Create { path, stat }) => Ok(OpResult::Created { path, stat }),
            (Op::SetData { .. }, MultiWriteResult::SetData { stat }) => Ok(OpResult::DataSet { stat }),
            (Op::Delete { .. }, MultiWriteResult::Delete) => Ok(OpResult::Deleted),
            (op, other) => Err(unexpected(format!("result #{index} is {other:?} for an operation on {}", op.path()))),
        })
        .collect()
}

impl Handler<Sync> for SessionActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: Sync, _: &mut Context<Self>) -> Self::Result {
        if let Err(err) = self.check(&msg.path, false) {
            return failed(err);
        }
        let span = self.span("sync", &msg.path);
        self.dispatch(span, move |client, _| {
            Box::pin(async move { client.sync(&msg.path).await.map_err(|e| Error::from_zk(&msg.path, e)) })
        })
    }
}

impl Handler<EnsurePath> for SessionActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: EnsurePath, _: &mut Context<Self>) -> Self::Result {
        if let Err(err) = self.check(&msg.path, false) {
            return failed(err);
        }
        if msg.path == "/" {
            return Box::pin(futures::future::ready(Ok(())));
        }
        let acl = self.config.default_acl().to_vec();
        let span = self.span("ensure_path", &msg.path);
        self.dispatch(span, move |client, _| {
            Box::pin(async move {
                let mode = if msg.containers { CreateMode::Container } else { CreateMode::Persistent };
                client.mkdir(&msg.path, &mode.options(&acl)).await.map_err(|e| Error::from_zk(&msg.path, e))
            })
        })
    }
}

impl Handler<DeleteRecursive> for SessionActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: DeleteRecursive, _: &mut Context<Self>) -> Self::Result {
        if let Err(err) = self.check(&msg.path, false) {
            return failed(err);
        }
        let span = self.span("delete_recursive", &msg.path);
        self.dispatch(span, move |client, _| Box::pin(async move { delete_tree(&client, &msg.path).await }))
    }
}

/// Deletes a subtree, deepest nodes first. A node that gains a child meanwhile (`NotEmpty`)
/// makes the whole walk start again, a few times, before giving up.
async fn delete_tree(client: &Client, root: &str) -> Result<()> {
    use zookeeper_client::Error as Zk;
    const ATTEMPTS: usize = 5;
    for _ in 0..ATTEMPTS {
        let mut nodes = vec![root.to_string()];
        let mut next = 0;
        while next < nodes.len() {
            match client.list_children(&nodes[next]).await {
                Ok(children) => {
                    let parent = nodes[next].clone();
                    nodes.extend(children.iter().map(|child| path::join(&parent, child)));
                }
                Err(Zk::NoNode) => {}
                Err(e) => return Err(Error::from_zk(&nodes[next], e)),
            }
            next += 1;
        }
        let mut raced = false;
        for node in nodes.iter().rev().filter(|node| node.as_str() != "/") {
            match client.delete(node, None).await {
                Ok(()) | Err(Zk::NoNode) => {}
                Err(Zk::NotEmpty) => {
                    raced = true;
                    break;
                }
                Err(e) => return Err(Error::from_zk(node, e)),
            }
        }
        if !raced {
            return Ok(());
        }
    }
    Err(Error::NotEmpty { path: root.to_string() })
}

/// Every request the handle makes, carried out whether or not its caller still waits.
impl<M> Handler<Told<M>> for SessionActor
where
    M: Message + Send + 'static,
    M::Result: Send,
    SessionActor: Handler<M>,
{
    type Result = ();

    fn handle(&mut self, told: Told<M>, ctx: &mut Context<Self>) {
        told.answer::<Self, _>(ctx, |request, ctx| <Self as Handler<M>>::handle(self, request, ctx));
    }
}

impl Handler<AddWatch> for SessionActor {
    type Result = ResponseFuture<Result<WatchId>>;

    /// A raw `Addr::send` caller: its going cannot be seen once actix handed the request over
    /// (the handles use `AddWatchAnswering`).
    fn handle(&mut self, msg: AddWatch, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.add_watch(msg, tx, ctx);
        Box::pin(async move { rx.await.unwrap_or(Err(Error::Closed)) })
    }
}

impl Handler<AddWatchAnswering> for SessionActor {
    type Result = ();

    fn handle(&mut self, msg: AddWatchAnswering, ctx: &mut Context<Self>) {
        self.add_watch(msg.add, msg.reply, ctx);
    }
}

impl SessionActor {
    /// Registers a persistent watch and answers `reply` once it is set. A caller that goes
    /// before it is told the id cannot remove the watch, so such a watch is removed: when it is
    /// set (`on_watch_registered`), or by the sweep while it waits for a session. A watch not
    /// set within the request timeout is removed too and answered `Timeout`, so that `Err`
    /// always means no watch stays.
    fn add_watch(
        &mut self,
        msg: AddWatch,
        reply: tokio::sync::oneshot::Sender<Result<WatchId>>,
        ctx: &mut Context<Self>,
    ) {
        if let Err(err) = self.check(&msg.path, false) {
            let _ = reply.send(Err(err));
            return;
        }
        if matches!(self.state, State::Closed) {
            let _ = reply.send(Err(Error::Closed));
            return;
        }
        if let Some(other) = self.watches.mode_on(&msg.path).filter(|mode| *mode != msg.mode) {
            let _ = reply.send(Err(Error::BadArguments {
                path: msg.path,
                reason: format!(
                    "this session already has a {other:?} persistent watch here; ZooKeeper keeps one \
                     persistent watch mode per path and session"
                ),
            }));
            return;
        }
        let id = self.watches.insert(PersistentWatch {
            path: msg.path,
            mode: msg.mode,
            recipient: msg.recipient,
            task: None,
            waiters: vec![reply],
            stale: false,
        });
        // With no session yet, the watch is registered as soon as one is up.
        self.register_watch(id, None, ctx);
        let wait = self.config.request_timeout();
        ctx.run_later(wait, move |act, ctx| {
            let unanswered = act.watches.get_mut(id).is_some_and(|w| !w.waiters.is_empty());
            if unanswered && let Some(mut watch) = act.watches.remove(id) {
                debug!(?id, path = %watch.path, "persistent watch not set in time; removed");
                if let Some(task) = watch.task.take() {
                    ctx.cancel_future(task);
                }
                watch.settle(Err(Error::Timeout { what: "a persistent watch".into(), after: wait }));
            }
        });
    }
}

impl Handler<RemoveWatch> for SessionActor {
    type Result = ();

    fn handle(&mut self, msg: RemoveWatch, ctx: &mut Context<Self>) {
        if let Some(watch) = self.watches.remove(msg.id) {
            debug!(id = ?msg.id, path = %watch.path, "persistent watch removed");
            if let Some(task) = watch.task {
                ctx.cancel_future(task);
            }
        }
    }
}

impl SessionActor {
    /// The event that says where the session stands now, for a new subscriber.
    fn now(&self) -> Option<SessionEvent> {
        match &self.state {
            State::Live(live) => match live.link {
                Link::Up => Some(SessionEvent::Connected { session_id: live.session_id, generation: self.generation }),
                Link::Down { .. } => {
                    Some(SessionEvent::Suspended { session_id: live.session_id, generation: self.generation })
                }
            },
            State::Connecting { .. } => None,
            State::Closed => Some(SessionEvent::Closed),
        }
    }
}

impl Handler<Subscribe> for SessionActor {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) {
        if let Some(event) = self.now() {
            msg.recipient.do_send(event);
        }
        self.subscribers.add(msg.recipient);
    }
}

impl Handler<Listen<SessionEvent>> for SessionActor {
    type Result = ();

    fn handle(&mut self, mut msg: Listen<SessionEvent>, _: &mut Context<Self>) {
        if let Some(event) = self.now() {
            msg.listener.offer(event);
        }
        self.subscribers.listen(msg.listener);
    }
}

impl Handler<GetSession> for SessionActor {
    type Result = Option<SessionSnapshot>;

    fn handle(&mut self, _: GetSession, _: &mut Context<Self>) -> Self::Result {
        self.snapshot()
    }
}

impl Handler<WaitConnected> for SessionActor {
    type Result = crate::reply::Reply<Result<SessionSnapshot>>;

    fn handle(&mut self, _: WaitConnected, _: &mut Context<Self>) -> Self::Result {
        match self.snapshot() {
            Some(snapshot) if snapshot.connected => crate::reply::Reply::Now(Ok(snapshot)),
            _ if matches!(self.state, State::Closed) && self.generation > 0 => {
                crate::reply::Reply::Now(Err(Error::Closed))
            }
            _ => {
                let (pending, reply) = crate::reply::Reply::later(Err(Error::Closed));
                self.awaiting_connection.push(pending);
                reply
            }
        }
    }
}

impl Handler<OnClose> for SessionActor {
    type Result = ();

    fn handle(&mut self, msg: OnClose, _: &mut Context<Self>) {
        self.goodbyes.retain(|weak| weak.upgrade().is_some_and(|r| r.connected()));
        self.goodbyes.push(msg.recipient.downgrade());
    }
}

impl Handler<Close> for SessionActor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, _: Close, _: &mut Context<Self>) -> Self::Result {
        if let Some(waiters) = &mut self.closing {
            let (done, closed) = oneshot::channel();
            waiters.push(done);
            return Box::pin(
                async move {
                    let _ = closed.await;
                }
                .into_actor_free(),
            );
        }
        self.closing = Some(Vec::new());
        // Goodbyes first, while the session can still carry the recipes' deletes; whoever has not
        // answered within the bound is cut off by the close (the server deletes its ephemerals).
        let live = matches!(&self.state, State::Live(live) if matches!(live.link, Link::Up));
        let recipes: Vec<_> = std::mem::take(&mut self.goodbyes).iter().filter_map(|weak| weak.upgrade()).collect();
        if !live || recipes.is_empty() {
            return Box::pin(actix::fut::ready(()).then(|(), act: &mut Self, ctx| act.close_now(ctx)));
        }
        info!(recipes = recipes.len(), "closing: the recipes let go first");
        let said = futures::future::join_all(recipes.iter().map(|recipe| recipe.send(Goodbye)));
        let bounded = async move {
            if tokio::time::timeout(GOODBYE_BOUND, said).await.is_err() {
                warn!(bound = ?GOODBYE_BOUND, "closing before every recipe let go");
            }
        };
        Box::pin(bounded.into_actor_free().then(|(), act: &mut Self, ctx| act.close_now(ctx)))
    }
}

impl SessionActor {
    fn close_now(&mut self, ctx: &mut Context<Self>) -> ResponseActFuture<Self, ()> {
        let State::Live(live) = &mut self.state else {
            self.finish(ctx);
            return Box::pin(actix::fut::ready(()));
        };
        info!(session = %live.session_id, "closing the session");
        let mut watcher = live.client.state_watcher();
        // Dropping the last client clone makes the client library send CloseSession, so the
        // server deletes our ephemerals now rather than after the session timeout.
        ctx.cancel_future(live.state_task);
        self.state = State::Closed;
        for task in self.watches.take_tasks() {
            ctx.cancel_future(task);
        }
        let closed = async move {
            let _ =
                tokio::time::timeout(CLOSE_GRACE, async { while !watcher.changed().await.is_terminated() {} }).await;
        };
        Box::pin(closed.into_actor_free().map(|(), act: &mut Self, ctx| act.finish(ctx)))
    }
}

/// A real server never sends a `multi` reply that does not fit the request, so these feed the
/// translation crafted replies (see "Issue 13: errors" in `docs/decisions.md`).
#[cfg(test)]
mod tests {
    use zookeeper_client::{MultiWriteError, MultiWriteResult, Stat};

    use super::multi_reply;
    use crate::error::Error;
    use crate::session::requests::{Op, OpResult};

    fn stat() -> Stat {
        Stat {
            czxid: 1,
            mzxid: 2,
            pzxid: 1,
            ctime: 0,
            mtime: 0,
            version: 1,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 1,
            num_children: 0,
        }
    }

    fn ops() -> Vec<Op> {
        vec![
            Op::Check { path: "/guard".into(), version: 0 },
            Op::SetData { path: "/data".into(), data: b"x".to_vec(), version: None },
        ]
    }

    fn unexpected(reply: std::result::Result<Vec<MultiWriteResult>, MultiWriteError>) -> String {
        match multi_reply(&ops(), "/guard", reply) {
            Err(Error::UnexpectedReply { path, reason }) => {
                assert_eq!(path, "/guard", "names the request's first path");
                reason
            }
            other => panic!("expected UnexpectedReply, got {other:?}"),
        }
    }

    #[test]
    fn a_failure_at_an_index_the_request_does_not_have_is_an_error_not_a_panic() {
        let reason =
            unexpected(Err(MultiWriteError::OperationFailed { index: 2, source: zookeeper_client::Error::NoNode }));
        assert!(reason.contains('2'), "{reason}");
        unexpected(Err(MultiWriteError::OperationFailed {
            index: usize::MAX,
            source: zookeeper_client::Error::NoNode,
        }));
    }

    #[test]
    fn more_results_than_operations_is_an_error_not_a_panic() {
        unexpected(Ok(vec![
            MultiWriteResult::Check,
            MultiWriteResult::SetData { stat: stat() },
            MultiWriteResult::Delete,
        ]));
    }

    #[test]
    fn fewer_results_than_operations_is_an_error() {
        unexpected(Ok(vec![MultiWriteResult::Check]));
        unexpected(Ok(vec![]));
    }

    #[test]
    fn a_result_of_another_kind_than_its_operation_is_an_error() {
        unexpected(Ok(vec![MultiWriteResult::Check, MultiWriteResult::Delete]));
    }

    #[test]
    fn a_fitting_reply_is_translated() {
        let stat = stat();
        assert_eq!(
            multi_reply(&ops(), "/guard", Ok(vec![MultiWriteResult::Check, MultiWriteResult::SetData { stat }])),
            Ok(vec![OpResult::Checked, OpResult::DataSet { stat }])
        );
        assert_eq!(
            multi_reply(
                &ops(),
                "/guard",
                Err(MultiWriteError::OperationFailed { index: 1, source: zookeeper_client::Error::BadVersion })
            ),
            Err(Error::Multi { index: 1, source: Box::new(Error::BadVersion { path: "/data".into() }) })
        );
        assert_eq!(
            multi_reply(
                &ops(),
                "/guard",
                Err(MultiWriteError::RequestFailed { source: zookeeper_client::Error::ConnectionLoss })
            ),
            Err(Error::ConnectionLoss { path: "/guard".into() })
        );
    }
}
