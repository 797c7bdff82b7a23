//! [`CacheActor`]: one cache, from its watch to its subscribers.
//!
//! Owns: the watch, the cached nodes, the initial load and every re-sync (a *walk*), and the
//! order in which reads are applied. Does not own the session's reconnects: it only reacts to
//! them.
//!
//! **Ordering.** Every read the cache makes — for a watch event or for a walk — is sent at once
//! and its result applied in the order sent (one ordered pipeline). The server answers reads in
//! the order it receives them, so applying them in send order never goes back in time for a
//! node; a watch event therefore only triggers a read of its node (level-triggered), and
//! a deletion is applied when the read says the node is gone.
//!
//! **Walks.** The initial load and every re-sync read the whole scope (children listed only
//! where a node has children). A re-sync then removes what no read since the walk began has
//! seen, and reports exactly the differences: like kube-runtime's watcher re-list.
//!
//! **Without persistent watches** (a server older than 3.6, or one without them: the session
//! answers `Unsupported`), the cache falls back to one-shot watches, as Curator's caches did
//! before 3.6: every node read sets a data (or `exists`) watch and every listing a children
//! watch, each once until it fires; a node event reads that node again, a children event walks
//! the scope again (a re-sync, which reports only the differences). It costs a walk per change
//! of the tree's shape, measured in `docs/performance.md`.
//!
//! Phases: `Loading → Live → Resyncing → Live ...`; `Failed` ends the actor.

use std::collections::BTreeMap;

use actix::prelude::*;
use futures::channel::mpsc;
use futures::{FutureExt, StreamExt};
use tracing::{debug, info, warn};

use super::config::CacheConfig;
use super::error::CacheError;
use super::messages::*;
use crate::error::Error;
use crate::path;
use crate::recipe::shell::Shell;
use crate::retry::{Backoff, again_later};
use crate::session::requests::PersistentWatchMode;
use crate::session::requests::Stat;
use crate::session::watch::Watcher;
use crate::session::{Feature, SessionEvent, SessionHandle, WatchEvent, WatchEventKind, WatchId, WatchRefusal};

/// Reads in flight at most (they are all sent already; this bounds only what is polled).
const PIPELINE: usize = 1 << 20;

type PendingRead = futures::future::BoxFuture<'static, Read>;

/// A node as read: its data (if kept) and stat.
type NodeRead = (Option<Vec<u8>>, Stat);

/// What a read found.
enum Found {
    /// The node; `None` when it does not exist.
    Node(Result<Option<NodeRead>, Error>),
    /// Its children; `None` when it does not exist.
    Children(Result<Option<Vec<String>>, Error>),
}

/// A read, in the pipeline.
#[derive(Message)]
#[rtype(result = "()")]
struct Read {
    path: String,
    depth: usize,
    /// The order it was sent in.
    seq: u64,
    /// The walk it belongs to, if any.
    walk: Option<u64>,
    found: Found,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Loading,
    Live,
    Resyncing,
    Failed,
}

/// A walk in progress.
struct Walk {
    id: u64,
    /// Reads sent before this one cannot confirm that a node still exists.
    started_at: u64,
    /// Reads of this walk not yet applied.
    pending: usize,
    /// A read failed (disconnected), with this error: the walk cannot tell what is gone; the
    /// next reconnect starts another.
    broken: Option<Error>,
}

/// A node held, with the read that last confirmed it.
struct Held {
    node: CachedNode,
    confirmed_at: u64,
}

/// A cache of one node, its children, or a subtree; see `docs/recipes/cache.md`.
///
/// ```no_run
/// # fn demo(session: actix_zookeeper::SessionHandle, me: actix::Recipient<actix_zookeeper::cache::CacheEvent>) {
/// use actix::Actor;
/// use actix_zookeeper::cache::{CacheActor, CacheConfig, CacheScope, Subscribe};
///
/// let config = CacheConfig::new("/services/billing/config").with_scope(CacheScope::Node);
/// let cache = CacheActor::new(session, config).expect("a valid path").start();
/// cache.do_send(Subscribe { recipient: me }); // NodeAdded, NodeUpdated, NodeRemoved, ...
/// # }
/// ```
pub struct CacheActor {
    config: CacheConfig,
    phase: Phase,
    nodes: BTreeMap<String, Held>,
    /// Delay before walking again after a load that failed; reset by a load that completes.
    backoff: Backoff,
    pipeline: Option<mpsc::UnboundedSender<PendingRead>>,
    next_seq: u64,
    walks: u64,
    walk: Option<Walk>,
    /// Nodes that cannot be read for good, told once until they can be read again.
    skipped: std::collections::BTreeSet<String>,
    watch: Option<WatchId>,
    /// One-shot watches instead of the persistent one (the server has none).
    oneshot: Option<OneShot>,
    /// A children event came during a walk: walk again once it is done (so that churn delays
    /// the next walk instead of restarting the current one forever).
    walk_due: bool,
    generation: u64,
    /// Kept last: its lifeline must drop after everything else the actor holds.
    shell: Shell<CacheEvent>,
}

/// The one-shot watches set on the server, so that a read sets each only once until it fires.
#[derive(Default)]
struct OneShot {
    /// Where to deliver them.
    me: Option<Watcher>,
    /// Nodes with a data (or `exists`) watch.
    data: std::collections::HashSet<String>,
    /// Nodes with a children watch.
    children: std::collections::HashSet<String>,
}

impl OneShot {
    /// The recipient for a watch on `path` of this kind, when none is set there yet.
    fn arm(&mut self, path: &str, children: bool) -> Option<Watcher> {
        let set = if children { &mut self.children } else { &mut self.data };
        if set.insert(path.to_owned()) { self.me.clone() } else { None }
    }
}

impl CacheActor {
    /// A cache; start it with `.start()`. It sets its watch, then loads.
    pub fn new(session: SessionHandle, config: CacheConfig) -> Result<CacheActor, CacheError> {
        config.validate()?;
        let span = tracing::info_span!("zk.cache", path = %config.path, scope = ?config.scope);
        let shell = Shell::new(session, span, config.retry).on_board("cache", &config.path);
        let backoff = shell.retry().backoff();
        Ok(CacheActor {
            shell,
            config,
            phase: Phase::Loading,
            nodes: BTreeMap::new(),
            backoff,
            pipeline: None,
            next_seq: 0,
            walks: 0,
            walk: None,
            skipped: Default::default(),
            watch: None,
            oneshot: None,
            walk_due: false,
            generation: 0,
        })
    }

    /// Tells the session's health board what the cache is doing.
    fn report(&mut self, state: crate::session::health::RecipeState) {
        if let Some(health) = self.shell.health() {
            health.set(state);
        }
    }

    fn tell(&mut self, event: CacheEvent) {
        let kind = match &event {
            CacheEvent::NodeAdded { .. } => "node_added",
            CacheEvent::NodeUpdated { .. } => "node_updated",
            CacheEvent::NodeRemoved { .. } => "node_removed",
            CacheEvent::NodeSkipped { .. } => "node_skipped",
            CacheEvent::CacheInitialized => "initialized",
            CacheEvent::CacheResynced => "resynced",
            CacheEvent::CacheFailed { .. } => "failed",
        };
        crate::metrics::cache(kind, &self.config.path);
        self.shell.tell(event);
    }

    /// Sends a read of `path` now; its result is applied after every read sent before it.
    fn read_node(&mut self, path: String, depth: usize, walk: Option<u64>) {
        let watcher = self.oneshot.as_mut().and_then(|oneshot| oneshot.arm(&path, false));
        if let Some(me) = watcher {
            let (session, keep_data, target) = (self.shell.session().clone(), self.config.keep_data, path.clone());
            let found = async move { Found::Node(read_watched(&session, &target, keep_data, me).await) }.boxed();
            self.push(path, depth, walk, found);
            return;
        }
        let found = if self.config.keep_data {
            let read = self.shell.session().get_data(&path);
            async move {
                Found::Node(match read.await {
                    Ok(node) => Ok(Some((Some(node.data), node.stat))),
                    Err(Error::NoNode { .. }) => Ok(None),
                    Err(error) => Err(error),
                })
            }
            .boxed()
        } else {
            let read = self.shell.session().exists(&path);
            async move { Found::Node(read.await.map(|stat| stat.map(|stat| (None, stat)))) }.boxed()
        };
        self.push(path, depth, walk, found);
    }

    fn list(&mut self, path: String, depth: usize, walk: Option<u64>) {
        let watcher = self.oneshot.as_mut().and_then(|oneshot| oneshot.arm(&path, true));
        let read = match watcher {
            Some(me) => self.shell.session().children_watched_by(&path, &me).boxed(),
            None => self.shell.session().children(&path).boxed(),
        };
        let found = async move {
            Found::Children(match read.await {
                Ok(children) => Ok(Some(children.names)),
                Err(Error::NoNode { .. }) => Ok(None),
                Err(error) => Err(error),
            })
        }
        .boxed();
        self.push(path, depth, walk, found);
    }

    fn push(
        &mut self,
        path: String,
        depth: usize,
        walk: Option<u64>,
        found: futures::future::BoxFuture<'static, Found>,
    ) {
        self.next_seq += 1;
        let seq = self.next_seq;
        if let (Some(id), Some(current)) = (walk, self.walk.as_mut()) {
            if current.id == id {
                current.pending += 1;
            }
        }
        let read = found.map(move |found| Read { path, depth, seq, walk, found }).boxed();
        if let Some(pipeline) = &self.pipeline {
            let _ = pipeline.unbounded_send(read);
        }
    }

    /// Reads the whole scope again.
    fn start_walk(&mut self) {
        self.walks += 1;
        let id = self.walks;
        self.walk = Some(Walk { id, started_at: self.next_seq, pending: 0, broken: None });
        debug!(parent: self.shell.span(), walk = id, "reading the whole scope");
        let root = self.config.path.clone();
        if self.config.holds(0) {
            self.read_node(root, 0, Some(id));
        } else {
            self.list(root, 0, Some(id));
        }
    }

    fn apply(&mut self, read: Read, ctx: &mut Context<Self>) {
        let current_walk = self.walk.as_ref().map(|w| w.id);
        let in_walk = read.walk.is_some() && read.walk == current_walk;
        match read.found {
            Found::Node(Ok(found)) => {
                self.skipped.remove(&read.path);
                // One-shot watching lists even a leaf: its children watch is how a first child
                // is seen.
                let expand = match &found {
                    Some((_, stat)) => {
                        in_walk
                            && (stat.num_children > 0 || self.oneshot.is_some())
                            && self.config.lists_below(read.depth)
                    }
                    None => false,
                };
                self.apply_node(&read.path, found, read.seq);
                if expand {
                    self.list(read.path.clone(), read.depth, read.walk);
                }
            }
            Found::Children(Ok(Some(names))) if in_walk => {
                for name in names {
                    let child = path::join(&read.path, &name);
                    if self.config.holds(read.depth + 1) {
                        self.read_node(child, read.depth + 1, read.walk);
                    } else if self.config.lists_below(read.depth + 1) {
                        self.list(child, read.depth + 1, read.walk);
                    }
                }
            }
            Found::Children(Ok(None)) if self.oneshot.is_some() => {
                // No watch is set by listing a missing node: watch for it to be made.
                self.await_creation(read.path.clone(), ctx);
            }
            Found::Children(Ok(_)) => {}
            Found::Node(Err(error)) | Found::Children(Err(error)) if error.is_final() => {
                // One node nobody lets us read must not keep the whole cache from converging:
                // skip it. It exists (a missing node answers `NoNode`),
                // so what we hold of it, if anything, still stands.
                if let Some(held) = self.nodes.get_mut(&read.path) {
                    held.confirmed_at = held.confirmed_at.max(read.seq);
                }
                if self.skipped.insert(read.path.clone()) {
                    warn!(parent: self.shell.span(), path = %read.path, %error, "cannot read a node; skipping it");
                    self.tell(CacheEvent::NodeSkipped { path: read.path.clone(), error });
                }
            }
            Found::Node(Err(error)) | Found::Children(Err(error)) => {
                debug!(parent: self.shell.span(), path = %read.path, %error, "a read failed");
                // Its one-shot watch may not have been set: the next read sets it.
                if let Some(oneshot) = self.oneshot.as_mut() {
                    oneshot.data.remove(&read.path);
                    oneshot.children.remove(&read.path);
                }
                if in_walk {
                    if let Some(walk) = self.walk.as_mut() {
                        walk.broken = Some(error);
                    }
                }
            }
        }
        if in_walk {
            self.walk_read_done(ctx);
        }
    }

    /// Applies what a read says about one node, and tells subscribers what changed.
    fn apply_node(&mut self, path: &str, found: Option<NodeRead>, seq: u64) {
        let Some((data, stat)) = found else {
            if self.nodes.contains_key(path) {
                self.remove_subtree(path);
            }
            return;
        };
        let held = self.nodes.get(path).map(|held| (held.node.stat.czxid, held.node.stat.mzxid));
        match held {
            // Deleted and created again between two reads: first the removal, then the new node.
            Some((czxid, _)) if czxid != stat.czxid => self.remove_subtree(path),
            Some((_, mzxid)) => {
                if let Some(held) = self.nodes.get_mut(path) {
                    held.confirmed_at = held.confirmed_at.max(seq);
                    if stat.mzxid > mzxid {
                        held.node = CachedNode { data: data.clone(), stat };
                        self.tell(CacheEvent::NodeUpdated { path: path.to_owned(), data, stat });
                    }
                }
                return;
            }
            None => {}
        }
        self.nodes.insert(path.to_owned(), Held { node: CachedNode { data: data.clone(), stat }, confirmed_at: seq });
        self.tell(CacheEvent::NodeAdded { path: path.to_owned(), data, stat });
    }

    /// Removes a node and whatever is held below it (a node cannot be deleted before its
    /// children, so they are gone too), deepest first.
    fn remove_subtree(&mut self, path: &str) {
        let prefix = if path == "/" { "/".to_owned() } else { format!("{path}/") };
        let below: Vec<String> = self
            .nodes
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .map(|(p, _)| p.clone())
            .collect();
        for gone in below.into_iter().rev().chain(std::iter::once(path.to_owned())) {
            if self.nodes.remove(&gone).is_some() {
                self.tell(CacheEvent::NodeRemoved { path: gone });
            }
        }
    }

    fn walk_read_done(&mut self, ctx: &mut Context<Self>) {
        let Some(walk) = self.walk.as_mut() else { return };
        walk.pending = walk.pending.saturating_sub(1);
        if walk.pending > 0 {
            return;
        }
        let Some(walk) = self.walk.take() else { return };
        if let Some(error) = walk.broken {
            debug!(parent: self.shell.span(), walk = walk.id, "the walk was cut short by the connection; the next reconnect walks again");
            if std::mem::take(&mut self.walk_due) {
                // A children event it was to follow: try again, in case no reconnect comes.
                ctx.run_later(std::time::Duration::from_millis(100), |act, _| act.rewalk());
            }
            // A load that failed before any reconnect comes (e.g. a request timeout) tries again.
            if self.phase == Phase::Loading {
                if let Err(error) = again_later(&mut self.backoff, error, ctx, |act: &mut Self, _| act.start_walk()) {
                    self.fail(error, ctx);
                }
            }
            return;
        }
        self.backoff.reset();
        // Whatever no read since the walk began has seen is gone.
        let stale: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, held)| held.confirmed_at <= walk.started_at)
            .map(|(p, _)| p.clone())
            .collect();
        for path in stale {
            self.remove_subtree(&path);
        }
        match self.phase {
            Phase::Loading => {
                info!(parent: self.shell.span(), nodes = self.nodes.len(), "cache loaded");
                self.phase = Phase::Live;
                self.report(crate::session::health::RecipeState::Watching);
                self.tell(CacheEvent::CacheInitialized);
            }
            Phase::Resyncing => {
                info!(parent: self.shell.span(), nodes = self.nodes.len(), "cache re-synced");
                self.phase = Phase::Live;
                self.report(crate::session::health::RecipeState::Watching);
                self.tell(CacheEvent::CacheResynced);
            }
            Phase::Live | Phase::Failed => {}
        }
        if std::mem::take(&mut self.walk_due) {
            self.start_walk();
        }
    }

    /// One-shot watching found `path` missing where it lists children: its children watch was
    /// not set; an `exists` watch is, and its creation walks the scope again.
    fn await_creation(&mut self, path: String, ctx: &mut Context<Self>) {
        let Some(oneshot) = self.oneshot.as_mut() else { return };
        oneshot.children.remove(&path);
        let Some(me) = oneshot.arm(&path, false) else { return };
        let exists = self.shell.session().exists_watched_by(&path, &me);
        ctx.spawn(exists.into_actor(self).map(move |exists, act, _| match exists {
            // Made meanwhile: no event comes for it.
            Ok(Some(_)) => act.rewalk(),
            Ok(None) => {}
            Err(_) => {
                if let Some(oneshot) = act.oneshot.as_mut() {
                    oneshot.data.remove(&path);
                }
            }
        }));
    }

    /// A child came or went (one-shot watching): walk the scope again, quietly (it is no
    /// re-sync: nothing was missed), once the walk under way, if any, is done.
    fn rewalk(&mut self) {
        if self.phase == Phase::Failed {
            return;
        }
        if self.walk.is_some() {
            self.walk_due = true;
        } else {
            self.start_walk();
        }
    }

    fn resync(&mut self) {
        if self.phase == Phase::Failed || (self.watch.is_none() && self.oneshot.is_none()) {
            return;
        }
        if self.phase == Phase::Live {
            self.phase = Phase::Resyncing;
            self.report(crate::session::health::RecipeState::Idle);
        }
        self.start_walk();
    }

    /// The session could not add the cache's persistent watch again (the connection moved to
    /// a member without them, or the path's ACL changed): without it, nothing would tell the
    /// cache of a change, and it would serve what it holds as if it were current.
    fn watch_refused(&mut self, refusal: WatchRefusal, ctx: &mut Context<Self>) {
        self.watch = None;
        match refusal {
            // What a cache on an older server does from the start (see `started`).
            WatchRefusal::Unsupported => {
                warn!(parent: self.shell.span(), "the server no longer has persistent watches; using one-shot watches");
                self.oneshot = Some(OneShot { me: Some(self.shell.watcher(ctx)), ..OneShot::default() });
                self.resync();
            }
            WatchRefusal::NoAuth => self.fail(Error::NoAuth { path: self.config.path.clone() }, ctx),
            _ => {
                let reason = "the server refused to add the cache's persistent watch again".to_owned();
                self.fail(Error::BadArguments { path: self.config.path.clone(), reason }, ctx);
            }
        }
    }

    fn fail(&mut self, error: Error, ctx: &mut Context<Self>) {
        warn!(parent: self.shell.span(), %error, "the cache cannot work; it stops");
        self.phase = Phase::Failed;
        self.shell.fail_for_good(error.to_string());
        self.tell(CacheEvent::CacheFailed { error });
        ctx.stop();
    }
}

/// Reads `path` and sets a one-shot watch that fires when it is created, changed or deleted: a
/// data watch on a node there, an `exists` watch on a missing one.
async fn read_watched(
    session: &SessionHandle,
    path: &str,
    keep_data: bool,
    me: Watcher,
) -> Result<Option<NodeRead>, Error> {
    if !keep_data {
        return session.exists_watched_by(path, &me).await.map(|stat| stat.map(|stat| (None, stat)));
    }
    match session.get_data_watched_by(path, &me).await {
        Ok(node) => Ok(Some((Some(node.data), node.stat))),
        // No watch is set on a missing node by a read: an `exists` sets one.
        Err(Error::NoNode { .. }) => match session.exists_watched_by(path, &me).await? {
            None => Ok(None),
            // Made in between: its `exists` watch stands for the data watch.
            Some(_) => match session.get_data(path).await {
                Ok(node) => Ok(Some((Some(node.data), node.stat))),
                Err(Error::NoNode { .. }) => Ok(None),
                Err(error) => Err(error),
            },
        },
        Err(error) => Err(error),
    }
}

impl Actor for CacheActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let (tx, rx) = mpsc::unbounded::<PendingRead>();
        self.pipeline = Some(tx);
        // The pipeline runs as a task of its own that hands each result to the cache in order,
        // holding the cache only weakly: dropping the cache's last address stops it (and its
        // watch goes), as with the lock actors. A stream added to the context would keep it
        // alive forever.
        let cache = ctx.address().downgrade();
        actix::spawn(rx.buffered(PIPELINE).for_each(move |read| {
            if let Some(cache) = cache.upgrade() {
                cache.do_send(read);
            }
            futures::future::ready(())
        }));
        self.shell.session().subscribe(ctx.address().recipient());
        // One watch for the whole scope, in place before the first read so nothing changes
        // unseen; the children and tree scopes need the recursive kind to see data changes of
        // the nodes below.
        let mode = if self.config.lists_below(0) { PersistentWatchMode::Recursive } else { PersistentWatchMode::Node };
        // Spawned, not waited for: the mailbox stays open, so a subscriber that came with the
        // start hears even a failure to set the watch (with `wait`, the failure came first and
        // nobody was told). Watch events before the watch is known are ignored: the walk that
        // follows reads the same nodes.
        let added = self.shell.session().add_watch(&self.config.path, mode, ctx.address().recipient());
        // The answer goes through a detached task: a cache stopped before it arrives never
        // learns the watch's id, so the task removes the watch itself, at once (else it stays on
        // the server until the session's next look for watches whose owner has stopped).
        let (answer, answered) = futures::channel::oneshot::channel();
        let session = self.shell.session().clone();
        actix::spawn(async move {
            if let Err(Ok(id)) = answer.send(added.await) {
                session.remove_watch(id);
            }
        });
        ctx.spawn(answered.into_actor(self).map(|added, act, ctx| match added {
            Ok(Ok(id)) => {
                act.watch = Some(id);
                act.start_walk();
            }
            Ok(Err(Error::Unsupported { feature: Feature::PersistentWatches, .. })) => {
                info!(parent: act.shell.span(), "the server has no persistent watches; using one-shot watches");
                act.oneshot = Some(OneShot { me: Some(act.shell.watcher(ctx)), ..OneShot::default() });
                act.start_walk();
            }
            Ok(Err(error)) => act.fail(error, ctx),
            Err(_) => {}
        }));
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        if let Some(id) = self.watch.take() {
            self.shell.session().remove_watch(id);
        }
    }
}

impl Handler<Read> for CacheActor {
    type Result = ();

    fn handle(&mut self, read: Read, ctx: &mut Context<Self>) {
        self.apply(read, ctx);
    }
}

impl Handler<WatchEvent> for CacheActor {
    type Result = ();

    fn handle(&mut self, event: WatchEvent, ctx: &mut Context<Self>) {
        if let WatchEventKind::WatchRefused(refusal) = event.kind {
            if event.watch.is_some() && event.watch == self.watch {
                self.watch_refused(refusal, ctx);
            }
            return;
        }
        if let Some(oneshot) = self.oneshot.as_mut() {
            if event.generation < self.generation {
                return; // a watch of an ended session; the new session's walk sets new ones
            }
            match event.kind {
                WatchEventKind::DataChanged => {
                    oneshot.data.remove(&event.path);
                }
                WatchEventKind::NodeCreated => {
                    oneshot.data.remove(&event.path);
                    // Its children (and itself, if held) are read by a walk, which also sets
                    // its children watch.
                    self.rewalk();
                    return;
                }
                WatchEventKind::NodeDeleted => {
                    oneshot.data.remove(&event.path);
                    oneshot.children.remove(&event.path);
                }
                WatchEventKind::ChildrenChanged => {
                    oneshot.children.remove(&event.path);
                    // A child came or went somewhere in the scope: walk it again.
                    self.rewalk();
                    return;
                }
                WatchEventKind::SessionEnded | WatchEventKind::WatchRefused(_) => return,
            }
            if let Some(depth) = self.config.depth_of(&event.path).filter(|depth| self.config.holds(*depth)) {
                self.read_node(event.path, depth, None);
            }
            return;
        }
        if self.watch.is_none() {
            return;
        }
        let Some(depth) = self.config.depth_of(&event.path) else { return };
        if !self.config.holds(depth) {
            return;
        }
        match event.kind {
            WatchEventKind::NodeCreated | WatchEventKind::DataChanged | WatchEventKind::NodeDeleted => {
                self.read_node(event.path, depth, None)
            }
            WatchEventKind::ChildrenChanged | WatchEventKind::SessionEnded | WatchEventKind::WatchRefused(_) => {}
        }
    }
}

impl Handler<SessionEvent> for CacheActor {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        match event {
            // Events may have been missed while disconnected (or under the old session).
            SessionEvent::Reconnected { generation, .. } => {
                self.generation = generation;
                self.resync();
            }
            // Nothing will ever change the cache again: say so rather than serve a snapshot
            // that silently stopped following the tree.
            SessionEvent::Closed => self.fail(Error::Closed, ctx),
            SessionEvent::AuthFailed => self.fail(Error::AuthFailed, ctx),
            // The first session we see needs no re-sync: the initial load reads it. (A cache
            // created while its session is suspended first hears `Suspended`/`Reconnected`,
            // which tell the generation too.)
            SessionEvent::Connected { generation, .. } => {
                let first = self.generation == 0;
                self.generation = generation;
                // A new session has none of the old one's watches.
                if let Some(oneshot) = self.oneshot.as_mut() {
                    oneshot.data.clear();
                    oneshot.children.clear();
                }
                if !first {
                    self.resync();
                }
            }
            SessionEvent::Suspended { generation, .. } | SessionEvent::Expired { generation, .. } => {
                self.generation = self.generation.max(generation);
            }
        }
    }
}

impl Handler<Get> for CacheActor {
    type Result = Option<CachedNode>;

    fn handle(&mut self, msg: Get, _: &mut Context<Self>) -> Option<CachedNode> {
        self.nodes.get(&msg.path).map(|held| held.node.clone())
    }
}

impl Handler<Snapshot> for CacheActor {
    type Result = MessageResult<Snapshot>;

    fn handle(&mut self, _: Snapshot, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.nodes.iter().map(|(path, held)| (path.clone(), held.node.clone())).collect())
    }
}

/// A subscriber that comes after the initial load first gets `NodeAdded` for every node held
/// and `CacheInitialized`, so that every subscriber sees the same story.
impl Handler<Subscribe<CacheEvent>> for CacheActor {
    type Result = ();

    fn handle(&mut self, msg: Subscribe<CacheEvent>, _: &mut Context<Self>) {
        // What is held already, then (once loaded) that the load is complete: a late subscriber
        // sees the same story as an early one.
        for (path, held) in &self.nodes {
            msg.recipient.do_send(CacheEvent::NodeAdded {
                path: path.clone(),
                data: held.node.data.clone(),
                stat: held.node.stat,
            });
        }
        if matches!(self.phase, Phase::Live | Phase::Resyncing) {
            msg.recipient.do_send(CacheEvent::CacheInitialized);
        }
        self.shell.subscribers().add(msg.recipient);
    }
}

/// Stops the cache; its watch is removed.
impl Handler<Stop> for CacheActor {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

crate::recipe::shell::on_the_shell!(CacheActor => CacheEvent);
