//! [`PersistentNode`]: one node kept in existence (Curator's `PersistentNode`).
//!
//! Owns: the node's state machine `Creating → Live | Blocked → ... → Stopping` and its effects:
//! creating (or taking over) the node, watching it, creating it again when it goes, and deleting
//! it at stop. Does not own the session's reconnects or expiries: it hears them.

use actix::prelude::*;
use futures::channel::oneshot;
use tracing::{debug, info, warn};

use super::config::PersistentNodeConfig;
use super::error::PersistentNodeError;
use super::messages::{ActualPath, PersistentNodeEvent, SetData, WaitForInitialCreate};
use crate::error::Error;
use crate::path;
use crate::recipe::guarded::{Sessions, delete_created_at};
use crate::recipe::naming;
use crate::recipe::shell::Shell;
use crate::retry::{Backoff, RetryPolicy};
use crate::session::health::RecipeState;
use crate::session::requests::CreateMode;
use crate::session::{SessionEvent, SessionHandle, WatchEvent, WatchEventKind};

/// Keeps one node in existence; see `docs/recipes/persistent-node.md`. Most programs use it
/// through a [`PersistentNodeHandle`](super::PersistentNodeHandle).
pub struct PersistentNode {
    config: PersistentNodeConfig,
    /// The protected name's GUID (`None` without protection).
    guid: Option<String>,
    state: State,
    /// The node's full path once it was first made: every later create uses it.
    path: Option<String>,
    /// The session generation the node was made (or taken over) on.
    made_on: u64,
    /// Its `czxid`: a persistent node is deleted only while it is still this one.
    made_czxid: i64,
    /// A create is on its way (one at a time: its outcome decides the next step).
    in_flight: bool,
    /// Another create is wanted once the one on its way is done (a new session meanwhile).
    again: bool,
    /// The data the create on its way writes.
    writing: Vec<u8>,
    generation: u64,
    backoff: Backoff,
    waiters: Vec<oneshot::Sender<Result<String, PersistentNodeError>>>,
    /// Where the last create whose outcome is unknown aimed (its reply was lost, and no create
    /// has made the node since): a stop looks for our node there.
    maybe_made: Option<String>,
    /// What a stop could not delete, for the handles to tell once the actor has gone.
    left: Left,
    /// Kept last: its lifeline must drop after everything else the actor holds.
    shell: Shell<PersistentNodeEvent>,
}

/// The node a stop left behind (with why), shared by the actor and its handles.
pub(crate) type Left = std::sync::Arc<std::sync::Mutex<Option<PersistentNodeError>>>;

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// A create (or take-over) is on its way.
    Creating,
    /// The node exists at `path` and is watched.
    Live,
    /// Another live session's ephemeral holds the path; it is watched.
    Blocked,
    /// It cannot be made; nothing more is tried.
    Failed(PersistentNodeError),
    /// Deleting the node, then stopping.
    Stopping,
}

/// What a create found.
enum Made {
    /// Ours at this path (created, found by its GUID, or taken over), on the session of this
    /// generation, with its `czxid` (which node it is: a delete is fenced by it).
    Ours(String, u64, i64),
    /// Another live session's ephemeral node is at this path.
    Blocked(String),
}

/// A create's outcome, back at the actor (the create runs detached: a stop waits for it).
#[derive(Message)]
#[rtype(result = "()")]
struct MadeReport(Result<Made, Error>, String);

impl PersistentNode {
    /// What a stop leaves behind, shared with the handles.
    pub(crate) fn left(&self) -> Left {
        self.left.clone()
    }

    /// What the health board calls this node.
    fn kind(&self) -> &'static str {
        match (self.config.replace_persistent, self.config.touched) {
            (true, _) => "registration",
            (false, Some(_)) => "ttl-node",
            (false, None) => "persistent-node",
        }
    }

    /// Puts where the node stands on its health slot.
    fn report(&mut self) {
        let state = match &self.state {
            State::Creating => RecipeState::Idle,
            State::Live => RecipeState::Kept,
            State::Blocked => RecipeState::Waiting,
            State::Failed(error) => RecipeState::Failed { reason: error.to_string() },
            State::Stopping => return,
        };
        if let Some(health) = self.shell.health() {
            health.set(state);
        }
    }

    /// A persistent node for `config` on `session`; start it with `.start()`. A path that can
    /// never be created fails at once (`PersistentNodeError::Failed`).
    pub fn new(session: SessionHandle, config: PersistentNodeConfig) -> Result<Self, PersistentNodeError> {
        path::validate(&config.path, config.mode.is_sequential())
            .map_err(|source| PersistentNodeError::Failed { path: config.path.clone(), source })?;
        let span = tracing::info_span!("zk.persistent_node", path = %config.path, mode = ?config.mode);
        let shell = Shell::new(session, span, config.retry);
        let backoff = shell.retry().without_attempt_limit().backoff();
        let guid = config.protected.then(naming::new_guid);
        Ok(PersistentNode {
            shell,
            config,
            guid,
            state: State::Creating,
            path: None,
            made_on: 0,
            made_czxid: 0,
            in_flight: false,
            again: false,
            writing: Vec::new(),
            generation: 0,
            backoff,
            waiters: Vec::new(),
            maybe_made: None,
            left: Left::default(),
        })
    }

    /// The path to create at first: the configured one, or its protected form.
    fn first_path(&self) -> String {
        match &self.guid {
            None => self.config.path.clone(),
            Some(guid) => {
                let parent = path::parent(&self.config.path).unwrap_or("/");
                path::join(parent, &naming::protected_name(guid, path::name(&self.config.path)))
            }
        }
    }

    /// Creates (or takes over) the node: now, or once the create on its way is done.
    fn ensure(&mut self, ctx: &mut Context<Self>) {
        if matches!(self.state, State::Failed(_) | State::Stopping) {
            return;
        }
        self.state = State::Creating;
        self.report();
        if self.in_flight {
            self.again = true;
            return;
        }
        self.in_flight = true;
        let (target, mode) = match &self.path {
            // Made before: the same name again, without a new sequence number (as Curator).
            Some(path) => (path.clone(), without_sequence(self.config.mode)),
            None => (self.first_path(), self.config.mode),
        };
        debug!(parent: self.shell.span(), %target, "creating");
        self.writing = self.config.data.clone();
        let replace = self.config.replace_persistent && is_ephemeral(mode);
        let made =
            make(self.shell.session().clone(), target.clone(), mode, self.writing.clone(), self.guid.clone(), replace);
        let (me, session, retry) = (ctx.address(), self.shell.session().clone(), self.shell.retry());
        // Detached, so that a stop cannot drop it half way: an actor gone by the time it is made
        // has nobody to keep the node, which is deleted again.
        actix::spawn(async move {
            let made = made.await;
            let orphan = match &made {
                Ok(Made::Ours(path, generation, czxid)) => Some((path.clone(), *generation, *czxid)),
                _ => None,
            };
            if me.send(MadeReport(made, target)).await.is_err() {
                if let Some((path, generation, czxid)) = orphan {
                    let _ = delete_ours(&session, path, generation, czxid, mode, retry).await;
                }
            }
        });
    }

    fn on_made(&mut self, made: Result<Made, Error>, target: String, ctx: &mut Context<Self>) {
        let _span = self.shell.span().clone().entered();
        self.in_flight = false;
        match &made {
            Ok(Made::Ours(..)) => self.maybe_made = None,
            // Its reply lost: the create may have made the node. A stop deletes it if so.
            Err(error) if !error.was_not_applied() => self.maybe_made = Some(target),
            _ => {}
        }
        if self.state == State::Stopping {
            // A stop waited for this create: it deletes what it made.
            let made = match made {
                Ok(Made::Ours(path, generation, czxid)) => Some((path, generation, czxid)),
                _ => None,
            };
            self.finish_stop(made, ctx);
            return;
        }
        if std::mem::take(&mut self.again) {
            if let Ok(Made::Ours(path, generation, czxid)) = &made {
                self.path = Some(path.clone());
                self.made_on = *generation;
                self.made_czxid = *czxid;
            }
            self.ensure(ctx);
            return;
        }
        match made {
            Ok(Made::Ours(path, generation, czxid)) => {
                info!(%path, "created");
                self.backoff.reset();
                self.path = Some(path.clone());
                self.made_on = generation;
                self.made_czxid = czxid;
                self.state = State::Live;
                self.report();
                if self.writing != self.config.data {
                    // Set while the create was on its way: the node has the data before.
                    let (session, data) = (self.shell.session().clone(), self.config.data.clone());
                    let written = session.set_data(&path, data, None);
                    actix::spawn(async move {
                        if let Err(error) = written.await {
                            warn!(%error, "could not write the data set during the create");
                        }
                    });
                }
                for waiter in self.waiters.drain(..) {
                    let _ = waiter.send(Ok(path.clone()));
                }
                self.shell.tell(PersistentNodeEvent::Created { path: path.clone() });
                self.watch(path, ctx);
            }
            Ok(Made::Blocked(path)) => {
                info!(%path, "another session's ephemeral node is there; waiting for it to go");
                self.state = State::Blocked;
                self.report();
                self.shell.tell(PersistentNodeEvent::Blocked { path: path.clone() });
                let watched = self.shell.session().exists_watched_by(&path, &self.shell.watcher(ctx));
                ctx.spawn(watched.into_actor(self).map(move |exists, act, ctx| match exists {
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) if act.state == State::Blocked => act.ensure(ctx),
                    _ => {}
                }));
            }
            Err(error)
                if cannot_be_made(&error)
                    || (self.config.replace_persistent && matches!(error, Error::NotEmpty { .. })) =>
            {
                warn!(%error, "cannot create the node; giving up");
                let failed = PersistentNodeError::Failed { path: self.config.path.clone(), source: error };
                self.state = State::Failed(failed.clone());
                self.report();
                for waiter in self.waiters.drain(..) {
                    let _ = waiter.send(Err(failed.clone()));
                }
                self.shell.tell(PersistentNodeEvent::Failed { error: failed });
            }
            Err(error) => {
                let delay = self.backoff.next_delay();
                debug!(%error, ?delay, "create interrupted; trying again");
                ctx.run_later(delay, |act, ctx| {
                    if act.state == State::Creating && !act.in_flight {
                        act.ensure(ctx);
                    }
                });
            }
        }
    }

    /// Watches our node: a data watch, fired by its deletion (and by a data change, after which
    /// it is set again).
    fn watch(&mut self, path: String, ctx: &mut Context<Self>) {
        let read = self.shell.session().get_data_watched_by(&path, &self.shell.watcher(ctx));
        ctx.spawn(read.into_actor(self).map(move |read, act, ctx| {
            if act.state != State::Live || act.path.as_deref() != Some(path.as_str()) {
                return;
            }
            match read {
                Ok(_) => {}
                Err(Error::NoNode { .. }) => act.on_deleted(ctx),
                Err(error) => {
                    let delay = act.backoff.next_delay();
                    debug!(parent: act.shell.span(), %error, "cannot watch the node; again later");
                    ctx.run_later(delay, move |act, ctx| {
                        if act.state == State::Live {
                            act.watch(path, ctx);
                        }
                    });
                }
            }
        }));
    }

    /// Touches a TTL node's child (`touch`), creating it when missing: a TTL node with a child
    /// is never expired, and the child lives while it is written within its TTL (Curator's
    /// `PersistentTtlNode`).
    fn touch(&mut self) {
        let (State::Live, Some(path), Some(ttl)) = (&self.state, &self.path, self.config.touched) else { return };
        let child = path::join(path, TOUCHED_CHILD);
        let (session, span) = (self.shell.session().clone(), self.shell.span().clone());
        actix::spawn(async move {
            let touched = match session.set_data(&child, Vec::new(), None).await {
                Err(Error::NoNode { .. }) => {
                    session.create(&child, Vec::new(), CreateMode::PersistentWithTtl(ttl)).await.map(drop)
                }
                other => other.map(drop),
            };
            match touched {
                // The node itself is gone: its watch makes it again, and the next touch its child.
                Ok(()) | Err(Error::NoNode { .. } | Error::NodeExists { .. }) => {}
                Err(error) => debug!(parent: &span, %error, "could not touch the TTL node's child"),
            }
        });
    }

    /// Deletes `node` (the node we made, and the session generation it was made on), then stops.
    /// A TTL node is kept: its TTL ends it once nothing touches it.
    fn finish_stop(&mut self, node: Option<(String, u64, i64)>, ctx: &mut Context<Self>) {
        let kept = self.config.touched.is_some();
        let node = node.filter(|_| !kept);
        // No node known, but a create whose reply was lost may have made one: an ephemeral of
        // ours there goes too (found by its GUID when protected; checked by its owner).
        let maybe = self.maybe_made.take().filter(|_| node.is_none() && !kept && is_ephemeral(self.config.mode));
        let (session, mode, guid, generation) =
            (self.shell.session().clone(), self.config.mode, self.guid.clone(), self.generation);
        let (left, span, retry) = (self.left.clone(), self.shell.span().clone(), self.shell.retry());
        ctx.wait(
            async move {
                if let Some((path, generation, czxid)) = node {
                    if let Err(source) = delete_ours(&session, path.clone(), generation, czxid, mode, retry).await {
                        warn!(parent: &span, %path, error = %source, "the node was not deleted; it stays");
                        *left.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                            Some(PersistentNodeError::NotDeleted { path, source });
                    }
                } else if let Some(target) = maybe {
                    let _ = delete_if_made(&session, target, guid, generation).await;
                }
            }
            .into_actor(self)
            .map(|_, _, ctx| ctx.stop()),
        );
    }

    fn on_deleted(&mut self, ctx: &mut Context<Self>) {
        if let (State::Live, Some(path)) = (&self.state, self.path.clone()) {
            info!(parent: self.shell.span(), %path, "the node is gone; creating it again");
            self.shell.tell(PersistentNodeEvent::Deleted { path });
            self.ensure(ctx);
        }
    }
}

/// Creates `target` in `mode` (its parents as containers), or takes over what is there: our
/// own session's node, or a persistent one (its data replaced, as Curator does); another live
/// session's ephemeral is [`Made::Blocked`]. A protected create whose reply was lost is looked
/// for by its GUID before it is sent again. With `replace`, a persistent node without children
/// is deleted (by its version) and ours created in its place.
async fn make(
    session: SessionHandle,
    target: String,
    mode: CreateMode,
    data: Vec<u8>,
    guid: Option<String>,
    replace: bool,
) -> Result<Made, Error> {
    let current = session.session().await;
    let owner = current.as_ref().map(|s| s.session_id.0);
    let generation = current.map_or(0, |s| s.generation);
    // An ephemeral is made on the session it is reported made on (`generation`), or not at all:
    // one that landed on the next session would be deleted (pinned) on this one, which cannot,
    // and would stay. With no session live there is nothing to make it on yet; the caller tries
    // again.
    let ephemeral = is_ephemeral(mode);
    if ephemeral && owner.is_none() {
        return Err(Error::SessionLost { path: target });
    }
    // A protected sequential create is looked for before it is made (again): an earlier create
    // whose reply was lost may have made it, on this session or before it.
    if mode.is_sequential() {
        if let Some((found, czxid)) = find_by_guid(&session, &target, guid.as_deref(), owner).await? {
            return Ok(Made::Ours(found, generation, czxid));
        }
    }
    for _ in 0..3 {
        let create = if ephemeral {
            futures::future::Either::Left(session.pinned(generation).create(&target, data.clone(), mode))
        } else {
            futures::future::Either::Right(session.create(&target, data.clone(), mode))
        };
        let failed = match create.await {
            Ok(created) => return Ok(Made::Ours(created.path, generation, created.stat.czxid)),
            Err(error) => error,
        };
        match failed {
            Error::NoNode { .. } => session.ensure_parent_containers(&target).await?,
            Error::NodeExists { .. } => match session.exists(&target).await? {
                None => {}
                Some(stat) if is_session_owner(stat.ephemeral_owner) && Some(stat.ephemeral_owner) != owner => {
                    return Ok(Made::Blocked(target));
                }
                // A node no session owns (persistent, container, TTL) where an ephemeral is wanted:
                // taken over, it would outlive us. Deleted and made again; one with children cannot
                // be, and the create fails for good.
                Some(stat) if replace && !is_session_owner(stat.ephemeral_owner) => {
                    if stat.num_children > 0 {
                        return Err(Error::NotEmpty { path: target });
                    }
                    match session.delete(&target, Some(stat.version)).await {
                        Ok(()) | Err(Error::NoNode { .. } | Error::BadVersion { .. }) => {}
                        Err(error) => return Err(error),
                    }
                }
                Some(stat) => match session.set_data(&target, data.clone(), Some(stat.version)).await {
                    Ok(written) => return Ok(Made::Ours(target, generation, written.czxid)),
                    Err(Error::NoNode { .. } | Error::BadVersion { .. }) => {}
                    Err(error) => return Err(error),
                },
            },
            // A sequential create is looked for by its GUID before it is sent again (above).
            error => return Err(error),
        }
    }
    Err(Error::ConnectionLoss { path: target })
}

/// The node of our session whose name carries `guid`, under `target`'s parent (a sequential
/// create whose reply was lost). Synced first: the member serving us may not have applied it.
async fn find_by_guid(
    session: &SessionHandle,
    target: &str,
    guid: Option<&str>,
    owner: Option<i64>,
) -> Result<Option<(String, i64)>, Error> {
    let (Some(guid), Some(parent)) = (guid, path::parent(target)) else { return Ok(None) };
    session.sync(parent).await?;
    let children = match session.children(parent).await {
        Ok(children) => children.names,
        Err(Error::NoNode { .. }) => return Ok(None),
        Err(error) => return Err(error),
    };
    for name in children.into_iter().filter(|name| naming::belongs_to(name, guid)) {
        let found = path::join(parent, &name);
        if let Some(stat) = session.exists(&found).await? {
            if !is_session_owner(stat.ephemeral_owner) || Some(stat.ephemeral_owner) == owner {
                return Ok(Some((found, stat.czxid)));
            }
        }
    }
    Ok(None)
}

/// Deletes the ephemeral a create aimed at `target` may have made on the session of
/// `generation`: looked for by `guid` when protected, deleted only if that session owns it.
async fn delete_if_made(
    session: &SessionHandle,
    target: String,
    guid: Option<String>,
    generation: u64,
) -> Result<(), Error> {
    let pinned = session.pinned(generation);
    let path = match guid {
        Some(_) => {
            let owner = session.session().await.filter(|s| s.generation == generation).map(|s| s.session_id.0);
            let Some(owner) = owner else { return Ok(()) };
            match find_by_guid(session, &target, guid.as_deref(), Some(owner)).await? {
                Some((found, _)) => found,
                None => return Ok(()),
            }
        }
        None => target,
    };
    crate::recipe::guarded::delete_own_ephemeral(pinned, path).await
}

/// Whether a node's `ephemeralOwner` is a session: not 0 (persistent) and not the markers
/// ZooKeeper stores there for container nodes (`i64::MIN`) and TTL nodes (top byte `0xFF`).
fn is_session_owner(owner: i64) -> bool {
    owner != 0 && owner != i64::MIN && (owner >> 56) != -1
}

/// Errors after which creating again cannot help: the request's own, and a server that does not
/// know the create mode (TTL nodes not enabled).
fn cannot_be_made(error: &Error) -> bool {
    error.is_final() || matches!(error, Error::ZooKeeper { source: zookeeper_client::Error::Unimplemented, .. })
}

/// Deletes our node at `path`, made on the session of `generation`: an ephemeral only on that
/// session (on a later one the path may be another's node by then), any other node only while
/// it is still the one we made or took over (`czxid`: someone may have deleted it and made
/// another there, a registration of another process, say), on whatever session.
async fn delete_ours(
    session: &SessionHandle,
    path: String,
    generation: u64,
    czxid: i64,
    mode: CreateMode,
    retry: RetryPolicy,
) -> Result<(), Error> {
    if is_ephemeral(mode) {
        return crate::recipe::guarded::delete_own_ephemeral(session.pinned(generation), path).await;
    }
    // The node's own policy, without the attempt limit: a node left behind stays for good.
    let backoff = retry.without_attempt_limit().backoff();
    let stat_of = |path: &str| session.exists(path);
    let delete_at = |path: &str, version| session.delete(path, Some(version));
    // Never `SessionEnded`: on whichever session is current, an expiry is retried.
    delete_created_at(path, czxid, backoff, Sessions::Current, stat_of, delete_at).await.map(drop)
}

fn is_ephemeral(mode: CreateMode) -> bool {
    matches!(mode, CreateMode::Ephemeral | CreateMode::EphemeralSequential)
}

/// The child a TTL node's upkeep touches (Curator's `PersistentTtlNode.DEFAULT_CHILD_NODE_NAME`).
pub(crate) const TOUCHED_CHILD: &str = "touch";

/// `mode` without its sequence number: a node made before is made again under its own name.
fn without_sequence(mode: CreateMode) -> CreateMode {
    match mode {
        CreateMode::EphemeralSequential => CreateMode::Ephemeral,
        CreateMode::PersistentSequential => CreateMode::Persistent,
        CreateMode::PersistentSequentialWithTtl(ttl) => CreateMode::PersistentWithTtl(ttl),
        other => other,
    }
}

impl Actor for PersistentNode {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Its entry is on the board from its start.
        let kind = self.kind();
        self.shell.health_slot(kind, &self.config.path);
        self.report();
        self.shell.session().subscribe(ctx.address().recipient());
        // A close lets the node go first, as its stop does (Curator's `ServiceDiscovery.close()`
        // unregisters every instance, persistent ones too): a persistent node left by a close
        // would outlive its owner for good.
        self.shell.session().on_close(ctx.address().recipient());
        if let Some(ttl) = self.config.touched {
            ctx.run_interval(ttl / 2, |act, ctx| {
                if ctx.connected() {
                    act.touch();
                }
            });
            // The lifetime rule: an interval keeps an actix actor alive, so the actor whose last
            // address its user dropped is stopped at that drop (the node then goes after its
            // TTL, as after a stop).
            crate::stop::stop_when_unaddressed(ctx);
        }
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        // Stopped without a `Stop` (its last address dropped): the node goes all the same (a TTL
        // node is left to its TTL).
        let kept = self.config.touched.is_some();
        if let (State::Live, Some(path), false) = (&self.state, self.path.take(), kept) {
            let (session, generation, czxid, mode, retry) =
                (self.shell.session().clone(), self.made_on, self.made_czxid, self.config.mode, self.shell.retry());
            actix::spawn(async move {
                let _ = delete_ours(&session, path, generation, czxid, mode, retry).await;
            });
        }
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(Err(PersistentNodeError::Stopped { path: self.config.path.clone() }));
        }
    }
}

impl Handler<SessionEvent> for PersistentNode {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        // A new session (the first, or one after an expiry): an ephemeral went with the old one,
        // and every watch did.
        if event.moves_to_new_session(&mut self.generation) {
            self.ensure(ctx);
            return;
        }
        match event {
            // An ephemeral went with its session: it is not ours to report, write or delete now.
            SessionEvent::Expired { .. } if self.state == State::Live && is_ephemeral(self.config.mode) => {
                self.state = State::Creating;
                self.report();
            }
            // The same session: a deletion while cut off fires the watch the client sets again.
            SessionEvent::Closed => ctx.stop(),
            _ => {}
        }
    }
}

impl Handler<WatchEvent> for PersistentNode {
    type Result = ();

    fn handle(&mut self, event: WatchEvent, ctx: &mut Context<Self>) {
        if self.path.as_deref() != Some(event.path.as_str()) && self.state != State::Blocked {
            return;
        }
        match (event.kind, &self.state) {
            (WatchEventKind::NodeDeleted, State::Live) => self.on_deleted(ctx),
            // A change of the blocker's data spends the one-shot watch too (and a session that
            // moved says "read again" this way): look again, which watches again.
            (WatchEventKind::NodeDeleted | WatchEventKind::DataChanged, State::Blocked) => self.ensure(ctx),
            (WatchEventKind::DataChanged, State::Live) => self.watch(event.path, ctx),
            _ => {}
        }
    }
}

impl Handler<WaitForInitialCreate> for PersistentNode {
    type Result = ResponseFuture<Result<String, PersistentNodeError>>;

    fn handle(&mut self, msg: WaitForInitialCreate, _: &mut Context<Self>) -> Self::Result {
        let path = self.config.path.clone();
        match (&self.state, &self.path) {
            (State::Live, Some(now)) => return Box::pin(futures::future::ready(Ok(now.clone()))),
            (State::Failed(failed), _) => return Box::pin(futures::future::ready(Err(failed.clone()))),
            _ => {}
        }
        let (waiter, created) = oneshot::channel();
        // Waiters that timed out (or were dropped) are not kept.
        self.waiters.retain(|waiter| !waiter.is_canceled());
        self.waiters.push(waiter);
        Box::pin(async move {
            let stopped = || PersistentNodeError::Stopped { path: path.clone() };
            match msg.timeout {
                None => created.await.unwrap_or_else(|_| Err(stopped())),
                Some(after) => match tokio::time::timeout(after, created).await {
                    Ok(created) => created.unwrap_or_else(|_| Err(stopped())),
                    Err(_) => Err(PersistentNodeError::Timeout { path: path.clone(), after }),
                },
            }
        })
    }
}

impl Handler<SetData> for PersistentNode {
    type Result = ResponseFuture<Result<(), PersistentNodeError>>;

    fn handle(&mut self, msg: SetData, _: &mut Context<Self>) -> Self::Result {
        self.config.data = msg.data.clone();
        match (&self.state, &self.path) {
            (State::Live, Some(path)) => {
                // An ephemeral is written on the session that made it only: on a later one the
                // path may hold another process's node already.
                let written: futures::future::BoxFuture<'static, Result<_, Error>> = if is_ephemeral(self.config.mode) {
                    Box::pin(self.shell.session().pinned(self.made_on).set_data(path, msg.data, None))
                } else {
                    Box::pin(self.shell.session().set_data(path, msg.data, None))
                };
                Box::pin(async move { written.await.map(drop).map_err(PersistentNodeError::from) })
            }
            _ => {
                let path = self.config.path.clone();
                Box::pin(futures::future::ready(Err(PersistentNodeError::NotCreated { path })))
            }
        }
    }
}

impl Handler<ActualPath> for PersistentNode {
    type Result = Option<String>;

    fn handle(&mut self, _: ActualPath, _: &mut Context<Self>) -> Option<String> {
        if self.state == State::Live { self.path.clone() } else { None }
    }
}

crate::recipe::shell::on_the_shell!(PersistentNode => PersistentNodeEvent, Subscribe);

/// Deletes the node (retried until it is gone or its session is), then stops the actor; `stopped`
/// is dropped with the actor (actix has no future for an actor's end).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct DeleteAndStop {
    pub(crate) stopped: oneshot::Sender<()>,
}

impl Handler<DeleteAndStop> for PersistentNode {
    type Result = ();

    fn handle(&mut self, msg: DeleteAndStop, ctx: &mut Context<Self>) {
        self.shell.await_stopped(crate::stop::AwaitStopped(msg.stopped));
        if self.state == State::Stopping {
            return;
        }
        let live = self.state == State::Live;
        self.state = State::Stopping;
        let node = self.path.take().filter(|_| live).map(|path| (path, self.made_on, self.made_czxid));
        // A create on its way reports back first, and `on_made` finishes the stop.
        if !self.in_flight {
            self.finish_stop(node, ctx);
        }
    }
}

impl Handler<crate::session::requests::Goodbye> for PersistentNode {
    type Result = ResponseFuture<()>;

    /// The session is closing: stop as [`DeleteAndStop`] does (the node deleted, a TTL node left
    /// to its TTL), and answer once stopped.
    fn handle(&mut self, _: crate::session::requests::Goodbye, ctx: &mut Context<Self>) -> Self::Result {
        let (stopped, done) = oneshot::channel();
        <Self as Handler<DeleteAndStop>>::handle(self, DeleteAndStop { stopped }, ctx);
        Box::pin(async move {
            let _ = done.await;
        })
    }
}

impl Handler<MadeReport> for PersistentNode {
    type Result = ();

    fn handle(&mut self, report: MadeReport, ctx: &mut Context<Self>) {
        self.on_made(report.0, report.1, ctx);
    }
}
