//! The session's persistent watches: registering each with the server (again after every
//! reconnect and on every new session, since the client does not), reading their events and
//! handing them to their recipients, and the `AddWatch` / `RemoveWatch` requests.
//! Does not own the registry's data structure (`session/watch.rs`).

use super::*;
use crate::session::Feature;
use crate::session::events::WatchRefusal;
use crate::session::watch::owner;

impl SessionActor {
    /// Sends `addWatch` for a registered watch. `previous` is the watcher it replaces after a
    /// reconnect; it is dropped only once the new one is registered, because dropping the last
    /// client-side watcher of a path makes the client remove the watch on the server.
    pub(super) fn register_watch(&mut self, id: WatchId, previous: Option<PersistentWatcher>, ctx: &mut Context<Self>) {
        let State::Live(live) = &self.state else { return };
        let (client, retired) = (live.client.clone(), live.thread.retired());
        let generation = self.generation;
        let Some(watch) = self.watches.get_mut(id) else { return };
        let path = watch.path.clone();
        let mode = watch.client_mode();
        let span = tracing::debug_span!("zk.add_watch", path = %path, ?mode, generation);
        let features = self.features.clone();
        let watcher_retired = retired.clone();
        let fut = send_now(
            Box::pin(async move {
                // The retirement first (see `ClientThread::retire`); the move registers it again.
                let registered = futures::select_biased! {
                    () = futures::FutureExt::fuse(retired.wait()) => Err(zookeeper_client::Error::ConnectionLoss),
                    registered = futures::FutureExt::fuse(client.watch(&path, mode)) => registered,
                };
                match &registered {
                    Ok(_) => features.learned(Feature::PersistentWatches, true),
                    Err(zookeeper_client::Error::Unimplemented) => features.learned(Feature::PersistentWatches, false),
                    Err(_) => {}
                }
                drop(previous);
                registered.map_err(|e| Error::from_zk_needing(&path, Feature::PersistentWatches, e))
            })
            .instrument(span),
        );
        let task = ctx.spawn(fut.into_actor_free().map(move |outcome, act: &mut Self, ctx| {
            act.on_watch_registered(id, generation, outcome, watcher_retired, ctx)
        }));
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
        retired: Retired,
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
                watch.task = Some(Self::next_watch_event(id, generation, watcher, retired, ctx));
            }
            Err(err) if err.is_transient() => {
                // Retried on the next `SyncConnected` or the next session.
                debug!(?id, error = %err, "persistent watch not registered yet");
                watch.task = None;
            }
            Err(err) => {
                warn!(?id, path = %watch.path, error = %err, "persistent watch refused");
                let Some(mut watch) = self.watches.remove(id) else { return };
                // Answered before: this was the watch added again (after a reconnect or on a
                // new session), and its owner relies on it. Tell the owner, or it would wait
                // for events that never come.
                let added_again = watch.waiters.is_empty();
                watch.settle(Err(err.clone()));
                if let Some(owner) = owner(&watch.recipient).filter(|_| added_again) {
                    let kind = WatchEventKind::WatchRefused(WatchRefusal::of(&err));
                    owner.do_send(WatchEvent { path: watch.path, kind, generation, watch: Some(id) });
                }
            }
        }
    }

    fn next_watch_event(
        id: WatchId,
        generation: u64,
        mut watcher: PersistentWatcher,
        retired: Retired,
        ctx: &mut Context<Self>,
    ) -> SpawnHandle {
        let next = async move {
            // The retirement first (see `ClientThread::retire`): the move registers it again.
            let event = futures::select_biased! {
                () = futures::FutureExt::fuse(retired.clone().wait()) => None,
                event = futures::FutureExt::fuse(watcher.changed()) => Some(event),
            };
            (event, watcher, retired)
        };
        ctx.spawn(next.into_actor_free().map(move |(event, watcher, retired), act: &mut Self, ctx| {
            if let Some(event) = event {
                act.on_watch_event(id, generation, event, watcher, retired, ctx);
            }
        }))
    }

    fn on_watch_event(
        &mut self,
        id: WatchId,
        generation: u64,
        event: WatchedEvent,
        watcher: PersistentWatcher,
        retired: Retired,
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
                let Some(owner) = owner(&watch.recipient) else {
                    self.watches.remove(id);
                    return;
                };
                owner.do_send(WatchEvent { path: event.path, kind, generation, watch: Some(id) });
            }
        }
        watch.task = Some(Self::next_watch_event(id, generation, watcher, retired, ctx));
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
        if !self.features.may_have(Feature::PersistentWatches) {
            let _ = reply.send(Err(Error::Unsupported { path: msg.path, feature: Feature::PersistentWatches }));
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
            recipient: msg.recipient.downgrade(),
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
