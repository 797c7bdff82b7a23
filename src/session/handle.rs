//! [`SessionHandle`]: a cheap, cloneable front door to a [`SessionActor`].
//!
//! Owns: starting the session on an Arbiter of its own, and async methods over the request
//! messages. Does not own any state: every method is one message to the actor.
//!
//! Each method queues its request *when it is called*, not when the returned future is first
//! polled, so `let a = h.create(..); let b = h.children(..);` sends both, in that order, before
//! either is awaited (one round trip for both).
//!
//! # Cancel safety
//! Every request future is cancel-safe in tokio's sense for reads (dropping it loses nothing but
//! the answer); a write is sent when the method is called, so dropping its future does not
//! withdraw it: the write applies (or fails) all the same, as with every ZooKeeper client (the
//! request goes as `Told`, which the actor carries out even when its caller went first). A
//! dropped watched read (`*_watched`) still sets its watch: the watch belongs to its `watcher`
//! actor, not to the future, and is removed once that actor stops.

use std::future::Future;
use std::sync::Arc;

use actix::{Actor, Addr, Arbiter, ArbiterHandle, Handler, Message, Recipient};

use super::actor::SessionActor;
use super::config::SessionConfig;
use super::events::{SessionEvent, WatchEvent, WatchId};
use super::health::{Health, HealthBoard};
use super::lease::Lease;
use super::live::LiveCell;
use super::requests::*;
use super::residents::Residents;
use super::watch::{Owned, Watcher};
use super::{Features, ServerFeatures};
use crate::error::{Error, Result};
use crate::events::EventStream;
use crate::reply::{Answer, Told};
use crate::retry::RetryPolicy;

/// A cloneable handle to a running session.
#[derive(Clone, Debug)]
pub struct SessionHandle {
    addr: Addr<SessionActor>,
    /// The session's own thread, where recipes start the actors that talk to the session most.
    arbiter: ArbiterHandle,
    /// The live session's id and generation (kept by the actor).
    live: Arc<LiveCell>,
    /// How the recipes on this session retry, unless their own config says otherwise.
    retry: RetryPolicy,
    /// Until when the live session is certainly alive (kept by the actor).
    lease: Lease,
    /// The session's and its recipes' health (kept by the actor and the recipes).
    health: HealthBoard,
    /// What the server supports (declared, or learned by the actor).
    features: Features,
    /// The recipe actors living on the session's thread, which stops only after them.
    residents: Residents,
}

impl SessionHandle {
    /// Starts a [`SessionActor`] for `config` on a new Arbiter (its own thread) and returns a
    /// handle to it. Connecting happens in the background: subscribe to hear `Connected`, or just
    /// send requests (they wait for the session, up to the request timeout).
    ///
    /// Must be called inside a running actix `System`.
    pub fn start(config: SessionConfig) -> Result<SessionHandle> {
        config.validate()?;
        let arbiter = Arbiter::new();
        let live = Arc::new(LiveCell::default());
        let cell = live.clone();
        let retry = config.retry();
        let lease = Lease::new();
        let health = HealthBoard::new(lease.clone());
        let features = Features::new(config.server_version());
        let (kept_lease, kept_health, kept_features) = (lease.clone(), health.clone(), features.clone());
        let residents = Residents::new(arbiter.handle());
        let neighbours = residents.clone();
        let addr = SessionActor::start_in_arbiter(&arbiter.handle(), move |_| {
            SessionActor::new(config, true)
                .with_live_cell(cell)
                .with_shared(kept_lease, kept_health, kept_features)
                .with_residents(neighbours)
        });
        Ok(SessionHandle { addr, arbiter: arbiter.handle(), live, retry, lease, health, features, residents })
    }

    /// The session's own thread (its Arbiter), for a latency-sensitive program: an actor
    /// started there (`Actor::start_in_arbiter`) and a task spawned there
    /// (`ArbiterHandle::spawn`) get the session's replies and watch events without waking
    /// another thread, which is one thread hop less per request (measured in
    /// `docs/performance.md`). The lock and semaphore handles start their participants there.
    /// `None` once the session has stopped. The thread itself stops once the session and those
    /// participants have: a lock or semaphore handle kept after its session closed keeps that
    /// thread (idle) until the handle is dropped or stopped.
    ///
    /// The trade-off: everything there shares one thread with the session actor, so a handler
    /// that computes or blocks for long delays every recipe's replies; and for a session that
    /// does not follow the ensemble's reconfiguration
    /// ([`with_ensemble_tracking(false)`](super::SessionConfig::with_ensemble_tracking)), whose
    /// connection runs on that thread too, the client's pings and the session's heartbeats (a
    /// session the server hears nothing from for its whole timeout expires). Keep the default (your actors on your own
    /// threads) unless each step is short and latency matters.
    pub fn arbiter(&self) -> Option<&ArbiterHandle> {
        self.addr.connected().then_some(&self.arbiter)
    }

    /// A place on the session's thread for a recipe actor started there: the thread runs until
    /// the session and every such actor have stopped.
    pub(crate) fn resident(&self) -> super::residents::Resident {
        self.residents.enter()
    }

    /// The live session's generation, `None` while no session is live (connecting, or
    /// rebuilding after an expiry), as far as the session actor knows. A request pinned to it
    /// ([`pinned`](Self::pinned)) is sent only on that session: one that meets a later session
    /// fails `SessionLost` without being sent.
    pub(crate) fn live_generation(&self) -> Option<u64> {
        self.live.generation()
    }

    /// The live session's [`Lease`]: until when it is certainly alive on the server, renewed by
    /// every answered write or `sync` (and, once read, by a `sync` heartbeat when the session is
    /// otherwise quiet). Every
    /// grant and term carries it; this is the session's own, for work not tied to a grant.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The session's health now, with every recipe running on it: for readiness and liveness
    /// probes (`docs/recipes/health.md`). Built when asked; no request is sent.
    pub fn health(&self) -> Health {
        self.health.snapshot()
    }

    /// Every change of [`health`](Self::health) from now on: the whole snapshot after each
    /// change of the session's state or of a recipe's (changes in quick succession may be
    /// folded into the latest).
    pub fn health_changes(&self) -> impl futures::Stream<Item = Health> + Send + 'static + use<> {
        self.health.changes()
    }

    /// What is known of the server's features: declared
    /// ([`SessionConfig::with_server_version`]) or learned from its answers.
    pub fn server_features(&self) -> ServerFeatures {
        self.features.snapshot()
    }

    /// The board recipes put their health on.
    pub(crate) fn health_board(&self) -> &HealthBoard {
        &self.health
    }

    /// How the recipes on this session retry a failed request, unless their own config says
    /// otherwise ([`SessionConfig::with_retry`]).
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// The rule every recipe follows: its config's policy if it has one, else the session's.
    pub(crate) fn retry_policy_or(&self, own: Option<RetryPolicy>) -> RetryPolicy {
        own.unwrap_or(self.retry)
    }

    /// The actor's address, for sending request messages directly from another actor.
    pub fn addr(&self) -> &Addr<SessionActor> {
        &self.addr
    }

    /// Sends any request message; resolves to its reply.
    ///
    /// # Cancel safety
    /// Sent when this is called and carried out whether or not the future is awaited:
    /// dropping it loses only the reply (a write applies, or fails, all the same).
    pub fn request<M, T>(&self, msg: M) -> impl Future<Output = Result<T>> + 'static + use<M, T>
    where
        M: Message<Result = Result<T>> + Send + 'static,
        T: Send + 'static,
        SessionActor: Handler<M>,
    {
        // Not `Addr::send`: actix skips a request whose caller went before the actor took it,
        // and a write must apply once it is made, awaited or not.
        let (told, reply) = Told::new(msg);
        self.addr.do_send::<Told<M>>(told);
        async move { reply.await.map_err(|_| Error::Closed)? }
    }

    /// Requests that run only on the session of `generation` (see [`PinnedSession`](super::PinnedSession)).
    pub fn pinned(&self, generation: u64) -> super::PinnedSession {
        super::PinnedSession::new(self.clone(), generation)
    }

    /// Creates a node (session default ACL).
    ///
    /// # Cancel safety
    /// The create is sent when this is called: dropping the future does not withdraw it. The
    /// node is created (or not) all the same; only the answer is lost (for a sequential node,
    /// with its name).
    pub fn create<D: Into<Vec<u8>>>(
        &self,
        path: &str,
        data: D,
        mode: CreateMode,
    ) -> impl Future<Output = Result<Created>> + 'static + use<D> {
        self.request(Create::new(path, data, mode))
    }

    /// Deletes a node, optionally only at `version`.
    ///
    /// # Cancel safety
    /// The delete is sent when this is called: dropping the future does not withdraw it, and
    /// only its answer is lost.
    pub fn delete(&self, path: &str, version: Option<i32>) -> impl Future<Output = Result<()>> + 'static + use<> {
        self.request(Delete { path: path.into(), version })
    }

    /// Reads a node's data and stat.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read, sent when this is called; dropping the future loses only the
    /// answer.
    pub fn get_data(&self, path: &str) -> impl Future<Output = Result<NodeData>> + 'static + use<> {
        self.request(GetData { path: path.into(), watch: None })
    }

    /// Reads a node's data and leaves a one-shot watch for `watcher`.
    ///
    /// # Cancel safety
    /// A read sent when this is called: dropping the future loses only the answer. The
    /// watch is left as an awaited call would leave it, and its event still goes to `watcher`.
    ///
    /// `watcher` is held weakly, as subscribers are: keep its actor's address for as long as it
    /// should hear the event; a watch whose owner has stopped is removed.
    pub fn get_data_watched(
        &self,
        path: &str,
        watcher: Recipient<WatchEvent>,
    ) -> impl Future<Output = Result<NodeData>> + 'static + use<> {
        self.request(GetData { path: path.into(), watch: Some(watcher) })
    }

    /// Replaces a node's data, optionally only at `version`.
    ///
    /// # Cancel safety
    /// The write is sent when this is called: dropping the future does not withdraw it, and
    /// only its answer is lost.
    pub fn set_data<D: Into<Vec<u8>>>(
        &self,
        path: &str,
        data: D,
        version: Option<i32>,
    ) -> impl Future<Output = Result<Stat>> + 'static + use<D> {
        self.request(SetData { path: path.into(), data: data.into(), version })
    }

    /// Reads a node's ACL and its stat (the stat's `aversion` is the ACL's version).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read; dropping the future loses only the answer.
    pub fn get_acl(&self, path: &str) -> impl Future<Output = Result<(Vec<Acl>, Stat)>> + 'static + use<> {
        self.request(GetAcl { path: path.into() })
    }

    /// Replaces a node's ACL, optionally only at ACL version `version` (`aversion`). An empty
    /// ACL is refused before it is sent ([`Error::InvalidAcl`]). Needs the `ADMIN` permission on
    /// the node ([`Error::NoAuth`] otherwise).
    ///
    /// # Cancel safety
    /// The write is sent when this is called: dropping the future does not withdraw it, and
    /// only its answer is lost.
    pub fn set_acl(
        &self,
        path: &str,
        acl: Vec<Acl>,
        version: Option<i32>,
    ) -> impl Future<Output = Result<Stat>> + 'static + use<> {
        self.request(SetAcl { path: path.into(), acl, version })
    }

    /// Reads a node's stat, `None` if it does not exist.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read, sent when this is called; dropping the future loses only the
    /// answer.
    pub fn exists(&self, path: &str) -> impl Future<Output = Result<Option<Stat>>> + 'static + use<> {
        self.request(Exists { path: path.into(), watch: None })
    }

    /// Reads a node's stat and leaves a one-shot watch (creation, change, deletion).
    ///
    /// # Cancel safety
    /// A read sent when this is called: dropping the future loses only the answer. The
    /// watch is left as an awaited call would leave it, and its event still goes to `watcher`.
    ///
    /// `watcher` is held weakly, as subscribers are: keep its actor's address for as long as it
    /// should hear the event; a watch whose owner has stopped is removed.
    pub fn exists_watched(
        &self,
        path: &str,
        watcher: Recipient<WatchEvent>,
    ) -> impl Future<Output = Result<Option<Stat>>> + 'static + use<> {
        self.request(Exists { path: path.into(), watch: Some(watcher) })
    }

    /// Lists a node's children.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read, sent when this is called; dropping the future loses only the
    /// answer.
    pub fn children(&self, path: &str) -> impl Future<Output = Result<Children>> + 'static + use<> {
        self.request(GetChildren { path: path.into(), watch: None })
    }

    /// Lists a node's children and leaves a one-shot watch on them.
    ///
    /// # Cancel safety
    /// A read sent when this is called: dropping the future loses only the answer. The
    /// watch is left as an awaited call would leave it, and its event still goes to `watcher`.
    ///
    /// `watcher` is held weakly, as subscribers are: keep its actor's address for as long as it
    /// should hear the event; a watch whose owner has stopped is removed.
    pub fn children_watched(
        &self,
        path: &str,
        watcher: Recipient<WatchEvent>,
    ) -> impl Future<Output = Result<Children>> + 'static + use<> {
        self.request(GetChildren { path: path.into(), watch: Some(watcher) })
    }

    /// Applies `ops` atomically.
    ///
    /// # Cancel safety
    /// The transaction is sent when this is called: dropping the future does not withdraw
    /// it; it applies (all of it) or fails (none of it) all the same, and only the answer is lost.
    pub fn multi(&self, ops: Vec<Op>) -> impl Future<Output = Result<Vec<OpResult>>> + 'static + use<> {
        self.request(Multi { ops })
    }

    /// [`get_data_watched`](Self::get_data_watched) for a recipe actor: its watch leaves the
    /// server as soon as the actor stops (`watcher`'s owner drops), with nothing polling.
    pub(crate) fn get_data_watched_by(
        &self,
        path: &str,
        watcher: &Watcher,
    ) -> impl Future<Output = Result<NodeData>> + 'static + use<> {
        let request = GetData { path: path.into(), watch: Some(watcher.recipient.clone()) };
        self.request(Owned { request, gone: watcher.gone.clone() })
    }

    /// [`exists_watched`](Self::exists_watched) for a recipe actor (see
    /// [`get_data_watched_by`](Self::get_data_watched_by)).
    pub(crate) fn exists_watched_by(
        &self,
        path: &str,
        watcher: &Watcher,
    ) -> impl Future<Output = Result<Option<Stat>>> + 'static + use<> {
        let request = Exists { path: path.into(), watch: Some(watcher.recipient.clone()) };
        self.request(Owned { request, gone: watcher.gone.clone() })
    }

    /// [`children_watched`](Self::children_watched) for a recipe actor (see
    /// [`get_data_watched_by`](Self::get_data_watched_by)).
    pub(crate) fn children_watched_by(
        &self,
        path: &str,
        watcher: &Watcher,
    ) -> impl Future<Output = Result<Children>> + 'static + use<> {
        let request = GetChildren { path: path.into(), watch: Some(watcher.recipient.clone()) };
        self.request(Owned { request, gone: watcher.gone.clone() })
    }

    /// Reads a node and leaves a one-shot watch whose event comes on the returned receiver;
    /// dropping the receiver withdraws the watch.
    pub(crate) fn get_data_until_dropped(
        &self,
        path: &str,
    ) -> (impl Future<Output = Result<NodeData>> + 'static + use<>, futures::channel::oneshot::Receiver<WatchEvent>)
    {
        let (tx, rx) = futures::channel::oneshot::channel();
        (self.request(GetDataUntilDropped { path: path.into(), tx }), rx)
    }

    /// Reads a node's stat and leaves a one-shot watch whose event comes on the returned
    /// receiver; dropping the receiver withdraws the watch.
    pub(crate) fn exists_until_dropped(
        &self,
        path: &str,
    ) -> (impl Future<Output = Result<Option<Stat>>> + 'static + use<>, futures::channel::oneshot::Receiver<WatchEvent>)
    {
        let (tx, rx) = futures::channel::oneshot::channel();
        (self.request(ExistsUntilDropped { path: path.into(), tx }), rx)
    }

    /// Lists a node's children and leaves a one-shot watch whose event comes on the returned
    /// receiver; dropping the receiver withdraws the watch.
    pub(crate) fn children_until_dropped(
        &self,
        path: &str,
    ) -> (impl Future<Output = Result<Children>> + 'static + use<>, futures::channel::oneshot::Receiver<WatchEvent>)
    {
        let (tx, rx) = futures::channel::oneshot::channel();
        (self.request(GetChildrenUntilDropped { path: path.into(), tx }), rx)
    }

    /// Syncs the connected server with the leader on `path`.
    ///
    /// # Cancel safety
    /// Cancel-safe: sent when this is called; dropping the future loses only the answer (a
    /// sync changes no data).
    pub fn sync(&self, path: &str) -> impl Future<Output = Result<()>> + 'static + use<> {
        self.request(Sync { path: path.into() })
    }

    /// Creates `path` and its missing ancestors.
    ///
    /// # Cancel safety
    /// Sent when this is called and carried out to the end whether or not the future is
    /// awaited: dropping it loses only the answer. Calling it again is harmless.
    pub fn ensure_path(&self, path: &str) -> impl Future<Output = Result<()>> + 'static + use<> {
        self.request(EnsurePath { path: path.into(), containers: false })
    }

    /// Creates the missing ancestors of `path` (not `path` itself) as container nodes, as
    /// Curator's `creatingParentContainersIfNeeded` does: for a recipe's node whose create found
    /// no parent.
    pub(crate) fn ensure_parent_containers(&self, path: &str) -> impl Future<Output = Result<()>> + 'static + use<> {
        let parent = crate::path::parent(path).filter(|parent| *parent != "/").map(str::to_owned);
        let ensured = parent.map(|path| self.request(EnsurePath { path, containers: true }));
        async move {
            match ensured {
                Some(ensured) => ensured.await,
                None => Ok(()),
            }
        }
    }

    /// Deletes `path` and everything below it.
    ///
    /// # Cancel safety
    /// Sent when this is called and carried out to the end whether or not the future is
    /// awaited: dropping it does not stop the deletion, and only its answer is lost.
    pub fn delete_recursive(&self, path: &str) -> impl Future<Output = Result<()>> + 'static + use<> {
        self.request(DeleteRecursive { path: path.into() })
    }

    /// Adds a persistent (or persistent-recursive) watch delivering to `watcher`, held weakly:
    /// the watch is removed once its owner has stopped (keep the owner's address).
    ///
    /// # Cancel safety
    /// Dropping the future before it resolves leaves no watch: one set for a caller that went
    /// is removed by the session, and one whose id reached the dropped future unread is removed
    /// by the drop (nobody else could remove either: the id was never told).
    pub fn add_watch(
        &self,
        path: &str,
        mode: PersistentWatchMode,
        watcher: Recipient<WatchEvent>,
    ) -> impl Future<Output = Result<WatchId>> + 'static + use<> {
        let remover = self.addr.clone();
        let (reply, answer) = Answer::channel(move |unread: Option<Result<WatchId>>| {
            if let Some(Ok(id)) = unread {
                remover.do_send(RemoveWatch { id });
            }
        });
        self.addr.do_send(AddWatchAnswering { add: AddWatch { path: path.into(), mode, recipient: watcher }, reply });
        async move { answer.await.unwrap_or(Err(Error::Closed)) }
    }

    /// Removes a persistent watch.
    pub fn remove_watch(&self, id: WatchId) {
        self.addr.do_send(RemoveWatch { id });
    }

    /// Every [`SessionEvent`] from now on, starting with the current state, as a stream this
    /// caller owns: `ctx.add_stream(session.events())` in an actor, or
    /// `while let Some(event) = events.next().await`. Dropping it unsubscribes; a reader that falls
    /// behind is told what it missed ([`crate::events`]).
    pub fn events(&self) -> EventStream<SessionEvent> {
        crate::events::events(&self.addr)
    }

    /// Tells `recipe` [`Goodbye`] before the session closes (held weakly).
    pub(crate) fn on_close(&self, recipe: Recipient<Goodbye>) {
        self.addr.do_send(OnClose { recipient: recipe });
    }

    /// Sends every [`SessionEvent`] to `subscriber`, starting with the current state. Held
    /// weakly: keep your subscriber's address, or use [`events`](Self::events), which cannot go
    /// silent.
    pub fn subscribe(&self, subscriber: Recipient<SessionEvent>) {
        self.addr.do_send(Subscribe { recipient: subscriber });
    }

    /// The current session, if one is up.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read of the session actor's state; dropping the future loses only the
    /// answer.
    pub fn session(&self) -> impl Future<Output = Option<SessionSnapshot>> + 'static + use<> {
        let reply = self.addr.send(GetSession);
        async move { reply.await.ok().flatten() }
    }

    /// Resolves once the session is connected (at once when it is), like Curator's
    /// `blockUntilConnected`; [`Error::Closed`] when the session is closed first. Wrap it in a
    /// timeout to bound the wait.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future only stops the wait; the session is not affected.
    pub fn connected(&self) -> impl Future<Output = Result<SessionSnapshot>> + 'static + use<> {
        let reply = self.addr.send(WaitConnected);
        async move { reply.await.map_err(|_| Error::Closed)? }
    }

    /// Runs `serving` (an actix-web server, say) to its end, then closes the session as
    /// [`close`](Self::close) does (recipes let go first, bounded), and returns what `serving`
    /// returned: the one line that makes a service's shutdown clean.
    ///
    /// ```no_run
    /// # async fn demo(session: actix_zookeeper::SessionHandle, server: impl std::future::Future<Output = std::io::Result<()>>) -> std::io::Result<()> {
    /// // `server` is `HttpServer::new(..).bind(..)?.run()`, with actix-web's own signal handling.
    /// session.close_after(server).await
    /// # }
    /// ```
    ///
    /// Why: on Ctrl-C or SIGTERM actix-web stops accepting, finishes what is in flight, and its
    /// server future resolves; the program then returns from `main` and its System stops, and
    /// with it the session's thread, before any goodbye (the service's registration and election
    /// node would stay until the session expires on the server). Closing between the two lets
    /// the recipes release, resign, leave and unregister while the session can still carry it.
    /// Do not set actix-web's `system_exit()`: it stops the System (and the session's thread)
    /// itself, before this close.
    ///
    /// # Cancel safety
    /// Dropped before `serving` ends, nothing is closed; dropped after, the close goes on (it
    /// is sent when `serving` ends).
    pub fn close_after<F: Future>(&self, serving: F) -> impl Future<Output = F::Output> + use<F> {
        let session = self.clone();
        async move {
            let served = serving.await;
            session.close().await;
            served
        }
    }

    /// Closes the session (ephemerals go at once) and stops the actor. Resolves when done.
    ///
    /// # Cancel safety
    /// The close is sent when this is called: dropping the future does not stop it.
    pub fn close(&self) -> impl Future<Output = ()> + 'static + use<> {
        let (told, reply) = Told::new(Close);
        self.addr.do_send(told);
        async move {
            let _ = reply.await;
        }
    }

    /// True while the actor runs.
    pub fn is_running(&self) -> bool {
        self.addr.connected()
    }
}
