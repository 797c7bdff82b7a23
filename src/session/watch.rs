//! Who asked for which watch, and how watch events reach them.
//!
//! Owns: the registry of persistent watches (path, mode, owner, and the task that reads the
//! client's watcher), the delivery of one-shot watches, and the rule that a watch holds its
//! owner **weakly**: a pending or persistent watch never keeps an actor alive, and a watch whose
//! owner stopped is removed (from the client and the server). Callers hand in a plain
//! `Recipient`; nobody else decides weak or strong. A recipe actor hands in a [`Watcher`] too,
//! whose [`WatchOwner`] drops with the actor: its one-shot watches then learn at once that it
//! stopped, where a bare recipient is looked at every [`OWNER_CHECK`]. Does not own when watches are
//! (re-)registered: the [`SessionActor`](super::SessionActor) decides that from the session's
//! state (on request, and again for every new session after an expiry).
//!
//! A persistent watch is added again by the session after a reconnect of the same session (the
//! client library, 0.11.2, does not re-send it: see [`ReconnectGate`]) and re-registered on a new
//! session. Events that happened while disconnected may be missed (ZOOKEEPER-4698): owners re-read
//! state on `Reconnected`/`Connected`, as recipes do.

use std::collections::BTreeMap;

use actix::{Recipient, SpawnHandle, WeakRecipient};
use futures::channel::oneshot;
use zookeeper_client::OneshotWatcher;

use super::client::Retired;
use super::events::{WatchEvent, WatchEventKind, WatchId};
use super::requests::PersistentWatchMode;
use crate::error::Error;

/// One persistent watch and its state.
pub(crate) struct PersistentWatch {
    pub(crate) path: String,
    pub(crate) mode: PersistentWatchMode,
    /// The owner, held weakly.
    pub(crate) recipient: WeakRecipient<WatchEvent>,
    /// The task that registers the watch or reads its events; `None` while there is no session
    /// to register it on.
    pub(crate) task: Option<SpawnHandle>,
    /// Callers of `AddWatch` waiting for the first registration.
    pub(crate) waiters: Vec<tokio::sync::oneshot::Sender<Result<WatchId, Error>>>,
    /// The connection dropped since this watch was last (re-)registered: it must be added
    /// again before owners hear `Reconnected` (see [`ReconnectGate`]).
    pub(crate) stale: bool,
}

impl PersistentWatch {
    pub(crate) fn client_mode(&self) -> zookeeper_client::AddWatchMode {
        match self.mode {
            PersistentWatchMode::Node => zookeeper_client::AddWatchMode::Persistent,
            PersistentWatchMode::Recursive => zookeeper_client::AddWatchMode::PersistentRecursive,
        }
    }

    /// Answers the callers waiting for the registration; false when every one of them had
    /// gone (nobody was told the watch's id, so nobody could ever remove it).
    pub(crate) fn settle(&mut self, outcome: Result<WatchId, Error>) -> bool {
        let waited = !self.waiters.is_empty();
        let mut told = false;
        for waiter in self.waiters.drain(..) {
            told |= waiter.send(outcome.clone()).is_ok();
        }
        told || !waited
    }

    /// Whether everyone who asked for this watch went before being told its id.
    fn abandoned(&self) -> bool {
        !self.waiters.is_empty() && self.waiters.iter().all(tokio::sync::oneshot::Sender::is_closed)
    }
}

/// All persistent watches of a session, by id (ordered, so re-registration keeps the order in
/// which they were first asked for).
#[derive(Default)]
pub(crate) struct WatchRegistry {
    next_id: u64,
    watches: BTreeMap<WatchId, PersistentWatch>,
}

impl WatchRegistry {
    pub(crate) fn insert(&mut self, watch: PersistentWatch) -> WatchId {
        self.next_id += 1;
        let id = WatchId(self.next_id);
        self.watches.insert(id, watch);
        id
    }

    pub(crate) fn get_mut(&mut self, id: WatchId) -> Option<&mut PersistentWatch> {
        self.watches.get_mut(&id)
    }

    pub(crate) fn remove(&mut self, id: WatchId) -> Option<PersistentWatch> {
        self.watches.remove(&id)
    }

    pub(crate) fn ids(&self) -> Vec<WatchId> {
        self.watches.keys().copied().collect()
    }

    /// The mode of the persistent watches already set on `path`, if any.
    pub(crate) fn mode_on(&self, path: &str) -> Option<PersistentWatchMode> {
        self.watches.values().find(|w| w.path == path).map(|w| w.mode)
    }

    /// Ids of watches whose owner has stopped, or whose callers all went before the watch was
    /// set (a dropped `add_watch`).
    pub(crate) fn orphans(&self) -> Vec<WatchId> {
        self.watches.iter().filter(|(_, w)| owner(&w.recipient).is_none() || w.abandoned()).map(|(id, _)| *id).collect()
    }

    /// Takes every running task, leaving the watches unregistered (after expiry or on close).
    pub(crate) fn take_tasks(&mut self) -> Vec<SpawnHandle> {
        self.watches.values_mut().filter_map(|w| w.task.take()).collect()
    }

    pub(crate) fn drain(&mut self) -> Vec<PersistentWatch> {
        std::mem::take(&mut self.watches).into_values().collect()
    }

    /// The connection dropped: every watch must be added again on the same session.
    pub(crate) fn mark_stale(&mut self) {
        self.watches.values_mut().for_each(|w| w.stale = true);
    }

    /// Whether some watch still waits to be added again since the connection dropped.
    pub(crate) fn any_stale(&self) -> bool {
        self.watches.values().any(|w| w.stale)
    }
}

/// Holds `Reconnected` back until every persistent watch has been added again.
///
/// The client library (0.11.2) does not re-send persistent watches after a reconnect; the
/// session adds each one again when its watcher hears the connection is back. Owners re-read
/// what they watch when they hear `Reconnected`; if that re-read reached the server before the
/// watch was added again, a change between the two would be seen by neither. So the news
/// waits until the last re-registration has been sent: requests sent after it reach the server
/// after the watches. A watch whose watcher never says the
/// connection is back would hold the news forever, so it is let go after a bound.
#[derive(Debug)]
pub(crate) struct ReconnectGate<E> {
    held: Option<E>,
}

impl<E> Default for ReconnectGate<E> {
    fn default() -> Self {
        ReconnectGate { held: None }
    }
}

impl<E> ReconnectGate<E> {
    /// The connection is back: the news, to tell now if no watch is stale (else held).
    pub(crate) fn reconnected(&mut self, news: E, any_stale: bool) -> Option<E> {
        if any_stale {
            self.held = Some(news);
            None
        } else {
            self.held = None;
            Some(news)
        }
    }

    /// A watch was added again: the held news, if that was the last stale one.
    pub(crate) fn watch_added(&mut self, any_stale: bool) -> Option<E> {
        if any_stale { None } else { self.held.take() }
    }

    /// Waited long enough, or the connection dropped again: whatever is held.
    pub(crate) fn release(&mut self) -> Option<E> {
        self.held.take()
    }
}

/// Where a one-shot watch's event goes.
pub(crate) enum WatchSink {
    /// To an actor, held weakly, with what tells that it stopped when it is a recipe actor's.
    Actor(WeakRecipient<WatchEvent>, Option<OwnerGone>),
    /// To plain async code waiting for it. Dropping the receiver withdraws the watch: a caller
    /// that gave up (a `take` or a `result` that timed out) leaves nothing behind.
    Once(oneshot::Sender<WatchEvent>),
}

/// Held by an actor that sets one-shot watches (in its shell) and dropped with it: what tells
/// its pending watches that it has stopped, so that they leave the server then. actix has no
/// signal of an actor's end; this is one, and nothing polls.
#[derive(Debug)]
pub(crate) struct WatchOwner(tokio::sync::watch::Sender<()>);

impl Default for WatchOwner {
    fn default() -> Self {
        WatchOwner(tokio::sync::watch::channel(()).0)
    }
}

impl WatchOwner {
    /// Who gets the events of the watches this owner sets: `recipient`, its actor's.
    pub(crate) fn watcher(&self, recipient: Recipient<WatchEvent>) -> Watcher {
        Watcher { recipient, gone: OwnerGone(self.0.subscribe()) }
    }
}

/// Resolves once its [`WatchOwner`] is dropped.
#[derive(Debug, Clone)]
pub(crate) struct OwnerGone(tokio::sync::watch::Receiver<()>);

impl OwnerGone {
    async fn wait(mut self) {
        // Nothing is ever sent: `changed` fails once the owner is dropped.
        while self.0.changed().await.is_ok() {}
    }
}

/// A recipe actor as the owner of one-shot watches: where their events go, and what tells them
/// it has stopped.
#[derive(Debug, Clone)]
pub(crate) struct Watcher {
    pub(crate) recipient: Recipient<WatchEvent>,
    pub(crate) gone: OwnerGone,
}

/// A watched read (`GetData`, `Exists`, `GetChildren`) of a recipe actor, with what tells its
/// watch that the actor has stopped (see [`Watcher`]).
#[derive(Debug)]
pub(crate) struct Owned<M> {
    pub(crate) request: M,
    pub(crate) gone: OwnerGone,
}

impl<M: actix::Message> actix::Message for Owned<M> {
    type Result = M::Result;
}

/// The owner of a watch, while it runs.
pub(crate) fn owner(recipient: &WeakRecipient<WatchEvent>) -> Option<Recipient<WatchEvent>> {
    recipient.upgrade().filter(|owner| owner.connected())
}

/// How often a pending one-shot watch looks whether its owner stopped.
const OWNER_CHECK: std::time::Duration = std::time::Duration::from_millis(250);

/// Resolves once `recipient`'s actor has stopped: a watch left on the server by a stopped actor
/// would stay until its node changed (a stop leaves no watch behind). A recipe actor's `gone`
/// says so when it drops; for a bare recipient, actix offers no notification, so it looks every
/// [`OWNER_CHECK`].
async fn until_stopped(recipient: WeakRecipient<WatchEvent>, gone: Option<OwnerGone>) {
    if let Some(gone) = gone {
        return gone.wait().await;
    }
    let mut tick = tokio::time::interval(OWNER_CHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while owner(&recipient).is_some() {
        tick.tick().await;
    }
}

/// Delivers a one-shot watch's single event to its sink. Runs as a detached task: it ends when
/// the event fires (at the latest when the session ends), when a [`WatchSink::Once`]'s receiver
/// is dropped, or when a [`WatchSink::Actor`]'s actor stops: then the watcher is dropped too,
/// which removes it from the client and the server.
///
/// When the client is retired because the session moved to the servers of a new ensemble
/// configuration, the watch cannot go with it: the sink is told `on_move` (`DataChanged` or
/// `ChildrenChanged`: "read again"), as a server tells a reconnecting client of what changed
/// while it was away.
pub(crate) fn deliver_once(
    watcher: OneshotWatcher,
    path: String,
    sink: WatchSink,
    generation: u64,
    retired: Retired,
    on_move: WatchEventKind,
) {
    actix::spawn(async move {
        let changed = futures::FutureExt::map(watcher.changed(), |event| {
            let kind = WatchEventKind::from_zk(event.event_type).unwrap_or(WatchEventKind::SessionEnded);
            (kind, (!event.path.is_empty()).then_some(event.path))
        });
        let moved = futures::FutureExt::map(retired.wait(), move |()| (on_move, None));
        let fired = futures::future::select(Box::pin(moved), Box::pin(changed));
        let fired = futures::FutureExt::map(fired, |either| either.factor_first().0);
        let ((kind, fired_path), sink) = match sink {
            WatchSink::Actor(recipient, gone) => {
                futures::pin_mut!(fired);
                let stopped = until_stopped(recipient.clone(), gone);
                futures::pin_mut!(stopped);
                match futures::future::select(fired, stopped).await {
                    futures::future::Either::Left((event, _)) => (event, WatchSink::Actor(recipient, None)),
                    futures::future::Either::Right(_) => {
                        tracing::debug!(%path, "the watch's owner stopped; removing it");
                        return;
                    }
                }
            }
            WatchSink::Once(mut tx) => {
                let gave_up = tx.cancellation();
                futures::pin_mut!(fired);
                match futures::future::select(fired, gave_up).await {
                    futures::future::Either::Left((event, _)) => (event, WatchSink::Once(tx)),
                    futures::future::Either::Right(_) => {
                        tracing::debug!(%path, "nobody waits for the watch any more; removing it");
                        return;
                    }
                }
            }
        };
        let path = fired_path.unwrap_or(path);
        tracing::debug!(%path, ?kind, generation, "one-shot watch fired");
        let event = WatchEvent { path, kind, generation, watch: None };
        match sink {
            // do_send bypasses the mailbox limit: a watch event must not be dropped for backpressure.
            WatchSink::Actor(recipient, _) => {
                if let Some(owner) = owner(&recipient) {
                    owner.do_send(event);
                }
            }
            WatchSink::Once(tx) => {
                let _ = tx.send(event);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::ReconnectGate;

    #[test]
    fn the_news_waits_for_the_last_stale_watch() {
        let mut gate = ReconnectGate::default();
        assert_eq!(gate.reconnected("back", true), None);
        assert_eq!(gate.watch_added(true), None, "one watch still to add");
        assert_eq!(gate.watch_added(false), Some("back"));
        assert_eq!(gate.watch_added(false), None, "told once");
    }

    #[test]
    fn no_stale_watch_means_no_wait() {
        let mut gate = ReconnectGate::default();
        assert_eq!(gate.reconnected("back", false), Some("back"));
        assert_eq!(gate.release(), None);
    }

    #[test]
    fn a_held_news_is_let_go_after_the_bound() {
        let mut gate = ReconnectGate::default();
        assert_eq!(gate.reconnected("back", true), None);
        assert_eq!(gate.release(), Some("back"));
        assert_eq!(gate.watch_added(false), None);
    }

    /// The signal a recipe actor's watches wait on: its owner's drop ends the wait at once while
    /// the actor's recipient is still alive (a bare recipient would be looked at on a timer, and
    /// found alive).
    #[test]
    fn a_watch_learns_its_owner_went_when_the_owner_drops_not_before() {
        use actix::Actor;
        use futures::FutureExt;

        struct Sink;
        impl Actor for Sink {
            type Context = actix::Context<Self>;
        }
        impl actix::Handler<super::WatchEvent> for Sink {
            type Result = ();
            fn handle(&mut self, _: super::WatchEvent, _: &mut Self::Context) {}
        }

        actix::System::new().block_on(async {
            let sink = Sink.start();
            let owner = super::WatchOwner::default();
            let watcher = owner.watcher(sink.clone().recipient());
            let mut owned = Box::pin(super::until_stopped(watcher.recipient.downgrade(), Some(watcher.gone.clone())));
            let mut bare = Box::pin(super::until_stopped(watcher.recipient.downgrade(), None));
            tokio::task::yield_now().await;
            assert!((&mut owned).now_or_never().is_none(), "the owner is still there");
            drop(owner);
            tokio::time::timeout(std::time::Duration::from_secs(5), owned).await.expect("told at the owner's drop");
            assert!((&mut bare).now_or_never().is_none(), "a bare recipient whose actor runs is not gone");
            drop(sink);
        });
    }
}
