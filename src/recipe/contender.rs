//! The contender protocol, written once: one protected ephemeral-sequential node, from create to
//! delete, waiting on one node only.
//!
//! Owns: the [`Contender`] and its state machine
//! `Creating → (Recovering →) Waiting{watch} → Holding → Done`. Used by every queue-shaped recipe
//! (mutex, read/write lock, semaphore guard, leader latch).
//! Does not own: replies to users, subscribers, timeouts, or what a `Suspended` connection means
//! for a holder — the owning recipe actor decides those.
//!
//! # One actor per participant
//! A contender is not an actor: it lives inside its recipe actor (a [`ContenderHost`]) and runs
//! its steps there, so its watch events, its replies and the session's events reach one
//! mailbox in the order the session saw them, and a participant costs no actor start.
//! A step's reports go into an outbox that [`step`] hands to the host once the step is done, so
//! a host never meets its contender half-way through a step. Its one-shot watches are futures of
//! the host (`*_until_dropped`): their events come straight back to the contender, never through
//! the host's `WatchEvent` handler, and a watch still pending when the host stops leaves the
//! server with it.
//!
//! # Protocol
//! 1. **Protected create, pipelined.** Create `<dir>/_c_<guid>-<name>` (ephemeral, sequential) and,
//!    in the same breath, list `<dir>`: the session keeps request order, so the listing already
//!    contains our node and the uncontended case costs one round trip. The create's stat gives the
//!    fencing token (`czxid`) and the session that owns the node.
//! 2. **Stand in line.** Sort by sequence number; hold when nothing blocks ([`Rule`]); else set an
//!    `exists` watch on the *one* node that blocks (no herd).
//! 3. **Hand-off without a read.** When the watched node goes and it was the only blocker, nothing
//!    can sort below us any more (new nodes get higher numbers): hold at once. The same holds
//!    when this process saw the watched node hold an exclusive grant ([`known_heads`]): it was
//!    first in line, so its deletion leaves nothing ahead of us. Otherwise list the line again.
//! 4. **Own node watched.** A data watch on our own node tells us when someone else deleted it
//!    (a holder then reports `Lost{NodeDeleted}`; a waiter stands in line again). A waiter sets
//!    it with its first watch on the node ahead (step 3 relies on it). A node granted at once is
//!    watched only once it has been held for [`OWN_WATCH_AFTER`]: most such holds are shorter,
//!    and the watch was a fourth request in every uncontended cycle, in front of the release's
//!    delete. A deletion by someone else in that time is still reported, when the
//!    watch's read finds the node gone.
//! 5. **Connection loss during create.** The reply is lost, not necessarily the node: `sync`
//!    and list the directory (the member serving us after the loss may lag the leader), find
//!    nodes carrying our GUID, adopt one only if its `ephemeralOwner` is the current session
//!    (CURATOR-604/696), delete any other, then create again if none was adopted.
//! 6. **Leave.** The node is deleted, retried through connection loss until it is gone or its
//!    session is (CURATOR-678, kazoo#732); a contender that leaves mid-create deletes whatever its
//!    GUID created ([`Contender::leave`], a detached future: it completes whatever the host does
//!    next, stopping included).
//!
//! The host hands [`SessionEvent`]s to its contender (one subscription per recipe actor, not one
//! per attempt), after its holder core has seen them.

use actix::prelude::*;
use futures::future::LocalBoxFuture;
use tracing::{debug, info, warn};

use super::known_heads;
use super::naming::{self, Rule, Standing};
use crate::error::Error;
use crate::path;
use crate::retry::{Attempted, Backoff, RetryPolicy, Verdict, retried};
use crate::session::requests::{Children, CreateMode, Created, EnsurePath};
use crate::session::{PinnedSession, SessionEvent, SessionHandle, SessionId, WatchEvent, WatchEventKind};
use crate::token::FencingToken;

/// What to contend for.
#[derive(Debug, Clone)]
pub struct ContenderSpec {
    /// The directory the contenders' nodes live in (created as container nodes when missing).
    pub dir: String,
    /// The node name before the sequence number (`lock-`, `__READ__`, `latch-`, ...).
    pub name: &'static str,
    /// Which earlier nodes block this one.
    pub rule: Rule,
    /// The node's data (Curator stores the participant id).
    pub data: Vec<u8>,
    /// Echoed in every [`ContenderReport`].
    pub tag: u64,
    /// How the contender retries (the recipe's policy).
    pub retry: RetryPolicy,
    /// Report revocation requests ([`ContenderEvent::RevocationRequested`]): the own-node watch
    /// is then set from the grant on, not [`OWN_WATCH_AFTER`] later.
    pub revocable: bool,
}

/// What Curator's `Revoker` writes into a lock node to ask its owner to let go.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Why a held node (a grant, a lease, a term) ended: the one reason every layer uses, from the
/// contender that sees the node go to the lock's public reason (`LockLostReason` is this) and
/// the election's (`LeadershipLostReason`, which adds resigning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Loss {
    /// The session that owned the node expired; the server deleted the node.
    SessionExpired,
    /// Someone else deleted the node.
    NodeDeleted,
    /// The session was closed.
    SessionClosed,
    /// Conservative policy: the connection stayed down for a whole session timeout, so the
    /// server has probably expired the session; the node is deleted once we are back. Decided
    /// by the holder core; a contender never reports it.
    DisconnectedTooLong,
}

/// A [`ContenderEvent`] with the tag of the contender that sent it, so an owner that has moved on
/// to a new attempt can tell stale reports from current ones.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ContenderReport {
    /// The [`ContenderSpec::tag`] of the sender.
    pub tag: u64,
    /// What happened.
    pub event: ContenderEvent,
}

/// What a contender tells its owner.
#[derive(Debug, Clone)]
pub enum ContenderEvent {
    /// The node holds the grant.
    Granted {
        /// The node's full path.
        node: String,
        /// Its `czxid`.
        token: FencingToken,
        /// Its version (for guarded writes).
        version: i32,
        /// The session that owns the node.
        session_id: SessionId,
        /// That session's generation: requests about the node are pinned to it.
        generation: u64,
    },
    /// The node is in line behind `ahead` (sent once per wait, for `TryAcquire` and tracing).
    Waiting {
        /// The node's full path.
        node: String,
        /// The node it waits on (for a lease: the lease directory).
        ahead: String,
        /// The first node in line in the listing that put it in line (an election's leader, so
        /// that it needs no listing of its own to learn who leads); `None` for a lease.
        head: Option<String>,
    },
    /// The node held the grant and no longer does; the contender is done.
    Lost {
        /// The node's full path.
        node: String,
        /// Why.
        reason: Loss,
    },
    /// The contender cannot go on (bad path, no permission, parent is ephemeral, ...); it is
    /// done, and what it made is being deleted.
    Failed {
        /// What went wrong.
        error: Error,
    },
    /// Someone wrote [`REVOKE_MESSAGE`] into our node (Curator's `Revoker`): they ask its owner
    /// to let go. Only with [`ContenderSpec::revocable`]; once per write. Nothing changes here:
    /// the owner decides.
    RevocationRequested {
        /// The node's full path.
        node: String,
    },
}

/// How long a node granted at once is held before its own-node watch is set (protocol step 4).
pub(crate) const OWN_WATCH_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

#[derive(Debug, Clone)]
struct Node {
    path: String,
    name: String,
    token: FencingToken,
    version: i32,
    owner: SessionId,
    /// The generation of the session that made it: deletes are pinned to it, so that one sent
    /// after that session ended answers `SessionLost` (the node went with it) instead of
    /// waiting for whichever session comes next.
    generation: u64,
}

/// The watch on our own node (protocol step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnWatch {
    /// Not set, and not planned.
    Unset,
    /// To be set after [`OWN_WATCH_AFTER`].
    Armed,
    /// Its read is on its way: set only if that read is answered.
    Requested,
    /// Set: the server answered the read that set it.
    Set,
}

#[derive(Debug)]
enum State {
    /// No session is live (between an expiry and the next session): nothing is sent until one
    /// is, so a withdrawal meanwhile has nothing to delete.
    AwaitingSession,
    /// `create` (pinned to the session of generation `on`) and `getChildren` are in flight.
    Creating { on: u64 },
    /// The create's outcome (on the session of generation `on`) is unknown: looking for our
    /// GUID, with reads pinned to that session.
    Recovering { on: u64 },
    /// In line, watching the one node that blocks us.
    Waiting { node: Node, watch: String, blockers: usize },
    /// Holding the grant.
    Holding { node: Node },
    /// Finished: nothing more is sent, and nothing of ours is left to delete (or its deletion
    /// runs detached).
    Done,
}

/// A recipe actor that runs contenders inside it (see the [module docs](self)): it finds one by
/// its tag, and hears its reports as [`ContenderReport`]s.
pub(crate) trait ContenderHost: Actor<Context = Context<Self>> + Handler<ContenderReport> {
    /// The contender tagged `tag`, while this host still has it.
    fn contender(&mut self, tag: u64) -> Option<&mut Contender>;
}

/// Runs one step `f` of `host`'s contender tagged `tag` (if it still has one), then hands the
/// step's reports to the host.
pub(crate) fn step<H: ContenderHost>(
    host: &mut H,
    tag: u64,
    ctx: &mut Context<H>,
    f: impl FnOnce(&mut Contender, &mut Context<H>),
) {
    step_of(host, tag, None, ctx, f);
}

/// [`step`], only for the contender numbered `serial`: a future or a timer of a contender that
/// has been replaced (an attempt begun again under the same tag) touches nothing.
fn step_of<H: ContenderHost>(
    host: &mut H,
    tag: u64,
    serial: Option<u64>,
    ctx: &mut Context<H>,
    f: impl FnOnce(&mut Contender, &mut Context<H>),
) {
    let Some(contender) = host.contender(tag).filter(|c| serial.is_none_or(|s| s == c.serial)) else { return };
    f(contender, ctx);
    let said = std::mem::take(&mut contender.outbox);
    for event in said {
        <H as Handler<ContenderReport>>::handle(host, ContenderReport { tag, event }, ctx);
    }
}

/// Numbers contenders, for [`step_of`].
static SERIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One participant's node in a queue-shaped recipe, run inside its host; see the
/// [module docs](self).
pub(crate) struct Contender {
    session: SessionHandle,
    spec: ContenderSpec,
    /// Tells this contender from an earlier one under the same tag.
    serial: u64,
    guid: String,
    state: State,
    /// How long to wait before the next retry of a failed read; reset by every success.
    backoff: Backoff,
    /// Where the watch on our current node stands (protocol step 4).
    own_watch: OwnWatch,
    /// Our node and its version at the last revocation request reported: one report per write
    /// (a node made later, e.g. after an expiry, starts from version 0 again).
    revocation_reported: Option<(String, i32)>,
    /// The latest session generation heard to have expired. A reply can be polled after the
    /// session's `Expired` was handled (both were ready at once); a node it names from such a
    /// session went with it and is never granted.
    expired: u64,
    /// What the current step has to say; [`step`] hands it to the host.
    outbox: Vec<ContenderEvent>,
    /// Its pending timers (see [`after`](Self::after)) and its wait for a session.
    timers: Vec<SpawnHandle>,
    /// The wait for the event of its watch on the node (or the directory) ahead.
    ahead: Option<SpawnHandle>,
    span: tracing::Span,
}

impl Contender {
    /// A contender for `spec` on `session`; it begins with [`begin`](Self::begin).
    pub(crate) fn new(session: SessionHandle, spec: ContenderSpec) -> Self {
        let span = tracing::info_span!("zk.contender", dir = %spec.dir, name = spec.name);
        let backoff = spec.retry.backoff();
        Contender {
            session,
            spec,
            serial: SERIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            guid: naming::new_guid(),
            state: State::AwaitingSession,
            backoff,
            own_watch: OwnWatch::Unset,
            revocation_reported: None,
            expired: 0,
            outbox: Vec::new(),
            timers: Vec::new(),
            ahead: None,
            span,
        }
    }

    /// The tag its reports carry.
    pub(crate) fn tag(&self) -> u64 {
        self.spec.tag
    }

    /// Stands in line (protocol step 1). Reports nothing at once: what it learns comes later,
    /// through [`step`].
    pub(crate) fn begin<H: ContenderHost>(&mut self, ctx: &mut Context<H>) {
        let _span = self.span.clone().entered();
        self.contend(ctx);
    }

    fn report(&mut self, event: ContenderEvent) {
        self.outbox.push(event);
    }

    /// Runs `then` on this contender (if it is still its host's) once `fut` resolves. The
    /// future itself runs to its end whatever becomes of the contender, unless its host stops.
    fn later<H: ContenderHost, T: 'static>(
        &self,
        ctx: &mut Context<H>,
        fut: impl std::future::Future<Output = T> + 'static,
        then: impl FnOnce(&mut Contender, T, &mut Context<H>) + 'static,
    ) -> SpawnHandle {
        let (tag, serial) = (self.spec.tag, self.serial);
        ctx.spawn(actix::fut::wrap_future::<_, H>(fut).map(move |out, host, ctx| {
            step_of(host, tag, Some(serial), ctx, move |contender, ctx| {
                let _span = contender.span.clone().entered();
                then(contender, out, ctx)
            })
        }))
    }

    /// Runs `then` on this contender (if it is still its host's) after `delay`. The timer is
    /// cancelled when the contender leaves or stands down ([`quiet`](Self::quiet)): actix polls
    /// every pending item of an actor each time it wakes, and a participant acquiring a thousand
    /// times a second would otherwise carry a hundred own-watch timers of contenders long gone.
    fn after<H: ContenderHost>(
        &mut self,
        ctx: &mut Context<H>,
        delay: std::time::Duration,
        then: impl FnOnce(&mut Contender, &mut Context<H>) + 'static,
    ) {
        let (tag, serial) = (self.spec.tag, self.serial);
        let timer = ctx.run_later(delay, move |host, ctx| step_of(host, tag, Some(serial), ctx, then));
        self.timers.push(timer);
    }

    /// Cancels what this contender still waits for, before it leaves or stands down: its
    /// timers, its wait for a session, and its watch on the node (or directory) ahead, which
    /// then leaves the server. Not the watch on its own node: that node's delete fires it.
    pub(crate) fn quiet<H: ContenderHost>(&mut self, ctx: &mut Context<H>) {
        for pending in self.timers.drain(..).chain(self.ahead.take()) {
            ctx.cancel_future(pending);
        }
    }

    fn node(&self) -> Option<&Node> {
        match &self.state {
            State::Waiting { node, .. } | State::Holding { node } => Some(node),
            _ => None,
        }
    }

    fn prefix(&self) -> String {
        path::join(&self.spec.dir, &naming::protected_name(&self.guid, self.spec.name))
    }

    /// Step 1: pipelined protected create + listing.
    ///
    /// Only on the live session, pinned to it: a create queued while no session is live would be
    /// sent on whichever session comes next, and a leave meanwhile would have to wait for that
    /// session (forever, with the servers unreachable) to delete what the create made.
    fn contend<H: ContenderHost>(&mut self, ctx: &mut Context<H>) {
        let Some(on) = self.session.live_generation().filter(|&on| on > self.expired) else {
            self.state = State::AwaitingSession;
            let up = self.session.connected();
            let waiting = self.later(ctx, up, |act, up, ctx| {
                if !matches!(act.state, State::AwaitingSession) {
                    return;
                }
                match up {
                    Ok(_) => act.contend(ctx),
                    Err(error) => act.fail(error, ctx),
                }
            });
            self.timers.push(waiting);
            return;
        };
        self.state = State::Creating { on };
        let create =
            self.session.pinned(on).create(&self.prefix(), self.spec.data.clone(), CreateMode::EphemeralSequential);
        let list = self.session.children(&self.spec.dir);
        let both = async move { (create.await, list.await) };
        self.later(ctx, both, |act, (created, listed), ctx| act.on_created(created, listed, ctx));
    }

    fn on_created<H: ContenderHost>(
        &mut self,
        created: Result<Created, Error>,
        listed: Result<Children, Error>,
        ctx: &mut Context<H>,
    ) {
        if !matches!(self.state, State::Creating { .. }) {
            return;
        }
        match created {
            Ok(created) => {
                let name = path::name(&created.path).to_string();
                let node = Node {
                    path: created.path,
                    name,
                    token: FencingToken(created.stat.czxid),
                    version: created.stat.version,
                    owner: SessionId(created.stat.ephemeral_owner),
                    generation: self.creating_on(),
                };
                debug!(node = %node.path, token = %node.token, "contender node created");
                self.adopt(node, listed.ok(), ctx);
            }
            Err(Error::NoNode { .. }) => {
                // The directory is missing: create it the way Curator does (containers), then
                // stand in line again.
                let ensure = self.session.request(EnsurePath { path: self.spec.dir.clone(), containers: true });
                self.later(ctx, ensure, |act, ensured, ctx| match ensured {
                    Ok(()) => act.contend(ctx),
                    // A dropped connection (a server refusing containers closes it) is tried
                    // again by the policy; a final error ends the contender.
                    Err(error) => act.retry_or_fail(error, ctx, Self::contend),
                });
            }
            Err(Error::SessionLost { .. }) => {
                // The session expired while creating; requests wait for the next session.
                self.guid = naming::new_guid();
                self.contend(ctx);
            }
            // Anything else leaves the create's outcome unknown: find out by GUID (on giving
            // up too: leaving then deletes whatever node bears it).
            Err(err) => {
                debug!(error = %err, "create outcome unknown; recovering by GUID");
                self.state = State::Recovering { on: self.creating_on() };
                self.retry_or_fail(err, ctx, Self::recover);
            }
        }
    }

    /// Takes `node` as ours, then stands in line.
    fn adopt<H: ContenderHost>(&mut self, node: Node, listing: Option<Children>, ctx: &mut Context<H>) {
        if node.generation <= self.expired {
            // Its session's expiry was handled before this reply: the node went with it.
            debug!(node = %node.path, "created on a session that has expired since; creating again");
            self.guid = naming::new_guid();
            self.contend(ctx);
            return;
        }
        self.backoff.reset();
        self.own_watch = OwnWatch::Unset;
        self.state = State::Waiting { node, watch: String::new(), blockers: usize::MAX };
        match listing {
            Some(children) => self.stand(children.names, ctx),
            None => self.relist(ctx),
        }
    }

    fn relist<H: ContenderHost>(&mut self, ctx: &mut Context<H>) {
        self.list_line(false, ctx);
    }

    /// Lists the directory and stands on that listing; `watched` (lease rule): with a children
    /// watch, which is then the watch that listing calls for.
    fn list_line<H: ContenderHost>(&mut self, watched: bool, ctx: &mut Context<H>) {
        use futures::FutureExt;
        let list = if watched {
            let (list, fired) = self.session.children_until_dropped(&self.spec.dir);
            self.hear_ahead(ctx, fired);
            list.left_future()
        } else {
            self.session.children(&self.spec.dir).right_future()
        };
        self.later(ctx, list, move |act, listed, ctx| {
            if !matches!(act.state, State::Waiting { .. }) {
                return;
            }
            match listed {
                Ok(children) => {
                    act.backoff.reset();
                    act.stand_on(children.names, watched, ctx)
                }
                Err(error) => act.retry_or_fail(error, ctx, if watched { Self::watch_children } else { Self::relist }),
            }
        });
    }

    /// Step 2: where do we stand?
    fn stand<H: ContenderHost>(&mut self, children: Vec<String>, ctx: &mut Context<H>) {
        self.stand_on(children, false, ctx);
    }

    /// `watch_in_place`: the watch this listing calls for is already set (a lease listing read
    /// with a children watch; an owner's listing while our predecessor watch stands).
    fn stand_on<H: ContenderHost>(&mut self, children: Vec<String>, watch_in_place: bool, ctx: &mut Context<H>) {
        let State::Waiting { node, .. } = &self.state else { return };
        let node = node.clone();
        match naming::standing(&children, &node.name, self.spec.rule) {
            Standing::Holds => self.hold(node, ctx),
            Standing::WaitsForAny => {
                self.watch_own_once(ctx);
                // A lease frees up when any holder leaves: watch the directory's children. Only
                // the holder of the semaphore's guard mutex gets here, so this is no herd.
                let dir = self.spec.dir.clone();
                if !matches!(&self.state, State::Waiting { watch, .. } if *watch == dir) {
                    self.report(ContenderEvent::Waiting { node: node.path.clone(), ahead: dir.clone(), head: None });
                }
                self.state = State::Waiting { node, watch: dir, blockers: usize::MAX };
                if !watch_in_place {
                    self.watch_children(ctx);
                }
            }
            Standing::Waits { watch, blockers } => {
                let watched = path::join(&self.spec.dir, &watch);
                if let State::Waiting { watch: current, blockers: known, .. } = &mut self.state {
                    if *current == watched && watch_in_place {
                        // Same node ahead, watch already set: only the count may have dropped.
                        *known = blockers;
                        return;
                    }
                }
                debug!(node = %node.name, %watch, blockers, "waiting on the node ahead");
                if !matches!(&self.state, State::Waiting { watch: w, .. } if *w == watched) {
                    let head = naming::first_in_line(&children).map(|head| path::join(&self.spec.dir, head));
                    self.report(ContenderEvent::Waiting { node: node.path.clone(), ahead: watched.clone(), head });
                }
                self.state = State::Waiting { node, watch: watched.clone(), blockers };
                // Before the watch ahead: holding without a read (step 3) is safe only while a
                // deletion of our own node would be heard.
                self.watch_own_once(ctx);
                self.watch_ahead(watched, ctx);
            }
            Standing::Missing => self.on_own_node_deleted(ctx),
        }
    }

    /// Waits for the event of a one-shot watch set by a read (`fired`), as a future of the host.
    /// The own node's is not cancelled when the contender goes: that node's delete fires it for
    /// free, where withdrawing it first would cost a request per acquisition (measured: W7 1.01
    /// → 2.04 requests per grant). One still pending when the host stops leaves the server then.
    fn hear<H: ContenderHost>(
        &self,
        ctx: &mut Context<H>,
        fired: futures::channel::oneshot::Receiver<WatchEvent>,
    ) -> SpawnHandle {
        self.later(ctx, fired, |act, fired, ctx| {
            // No event: the read set no watch (it failed), and says so itself.
            if let Ok(event) = fired {
                act.watch_event(event, ctx);
            }
        })
    }

    /// [`hear`](Self::hear) for the watch ahead, which replaces any earlier one (a node ahead
    /// that changed, or the same one watched again after a reconnect: the client withdraws a
    /// watcher from the server only when no other of the same kind is left on its path), and
    /// which [`quiet`](Self::quiet) cancels: a node ahead may outlive many of our attempts.
    fn hear_ahead<H: ContenderHost>(
        &mut self,
        ctx: &mut Context<H>,
        fired: futures::channel::oneshot::Receiver<WatchEvent>,
    ) {
        let heard = self.hear(ctx, fired);
        if let Some(earlier) = self.ahead.replace(heard) {
            ctx.cancel_future(earlier);
        }
    }

    /// Watches our own node. A data watch, not an `exists` watch: it is only ever set on a node
    /// that exists, so none is left on the server once the node is gone (an `exists` watch on a
    /// missing node stays until that path is created, and sequential names never come back).
    /// Fired by a data change (Curator's `Revoker` writes into lock nodes), it is set again.
    fn watch_own<H: ContenderHost>(&mut self, path: String, ctx: &mut Context<H>) {
        self.own_watch = OwnWatch::Requested;
        let (read, fired) = self.session.get_data_until_dropped(&path);
        self.hear(ctx, fired);
        self.later(ctx, read, move |act, read, ctx| {
            if act.node().is_none_or(|node| node.path != path) {
                return; // a read for a node we no longer count on
            }
            match read {
                Ok(read) => {
                    if act.own_watch == OwnWatch::Requested {
                        act.own_watch = OwnWatch::Set;
                    }
                    act.revocation_requested(&path, &read.data, read.stat.version);
                }
                Err(Error::NoNode { .. }) => act.on_own_node_deleted(ctx),
                // No reply, no watch: the client registers a one-shot watch only from its reply,
                // and the server dropped whatever it registered with the connection. Set it again
                // (sent now, it waits in the client for the next connection).
                Err(error) => {
                    act.own_watch = OwnWatch::Unset;
                    if error.is_final() {
                        warn!(%error, "cannot watch our own node");
                        return;
                    }
                    // Not bounded by the attempt limit: while we hold, whether a connection
                    // problem ends the grant is the connection policy's decision, not a retry
                    // count's.
                    let delay = act.backoff.next_delay();
                    act.after(ctx, delay, move |act, ctx| {
                        if act.own_watch == OwnWatch::Unset && act.node().is_some_and(|node| node.path == path) {
                            act.watch_own(path, ctx);
                        }
                    });
                }
            }
        });
    }

    /// Reports a revocation request found in our node's data (at `version`), once per write:
    /// also one written before the watch was set, which Curator's own lock would miss.
    fn revocation_requested(&mut self, path: &str, data: &[u8], version: i32) {
        let seen = Some((path.to_owned(), version));
        if self.spec.revocable && data == REVOKE_MESSAGE && self.revocation_reported != seen {
            self.revocation_reported = seen;
            info!(node = %path, "revocation requested");
            self.report(ContenderEvent::RevocationRequested { node: path.to_owned() });
        }
    }

    /// Watches the node ahead of ours, with a data watch for the same reason as
    /// [`watch_own`](Self::watch_own); a missing node ahead means it is gone.
    fn watch_ahead<H: ContenderHost>(&mut self, watched: String, ctx: &mut Context<H>) {
        let (read, fired) = self.session.get_data_until_dropped(&watched);
        self.hear_ahead(ctx, fired);
        self.later(ctx, read, move |act, read, ctx| match read {
            Ok(_) => {}
            Err(Error::NoNode { .. }) => act.on_watched_deleted(&watched, ctx),
            Err(_) => act.relist(ctx),
        });
    }

    /// Lists the directory with a children watch (lease rule), and stands on that listing.
    fn watch_children<H: ContenderHost>(&mut self, ctx: &mut Context<H>) {
        self.list_line(true, ctx);
    }

    /// Step 4, now: watch our node, unless that is done already.
    fn watch_own_once<H: ContenderHost>(&mut self, ctx: &mut Context<H>) {
        if !matches!(self.own_watch, OwnWatch::Requested | OwnWatch::Set) {
            if let Some(path) = self.node().map(|node| node.path.clone()) {
                self.watch_own(path, ctx);
            }
        }
    }

    /// Step 4, later: watch our node once it has been ours for [`OWN_WATCH_AFTER`], if it still
    /// is and nothing has watched it meanwhile.
    fn watch_own_later<H: ContenderHost>(&mut self, ctx: &mut Context<H>) {
        let Some(path) = self.node().map(|node| node.path.clone()) else { return };
        if self.own_watch != OwnWatch::Unset {
            return;
        }
        self.own_watch = OwnWatch::Armed;
        self.after(ctx, OWN_WATCH_AFTER, move |act, ctx| {
            if act.own_watch == OwnWatch::Armed && act.node().is_some_and(|node| node.path == path) {
                act.watch_own(path, ctx);
            }
        });
    }

    fn hold<H: ContenderHost>(&mut self, node: Node, ctx: &mut Context<H>) {
        info!(node = %node.path, token = %node.token, "granted");
        if self.spec.rule == Rule::Exclusive {
            // An exclusive grant means first in line: our successor in this process may take
            // the grant from our node's deletion alone.
            known_heads::record(&node.path);
        }
        self.report(ContenderEvent::Granted {
            node: node.path.clone(),
            token: node.token,
            version: node.version,
            session_id: node.owner,
            generation: node.generation,
        });
        self.state = State::Holding { node };
        if self.spec.revocable {
            // A revocation request is heard only through this watch.
            self.watch_own_once(ctx);
        } else {
            self.watch_own_later(ctx);
        }
    }

    /// Step 3: the node ahead is gone.
    fn on_watched_deleted<H: ContenderHost>(&mut self, watched: &str, ctx: &mut Context<H>) {
        let State::Waiting { node, watch, blockers } = &self.state else { return };
        if watch != watched {
            return; // a watch from an earlier wait
        }
        // The watched node was the only one in the way, or this process saw it first in line:
        // either way nothing that could block us is left.
        // ... and only while a deletion of our own node would be heard (step 4).
        let own_watched = matches!(self.own_watch, OwnWatch::Requested | OwnWatch::Set);
        if own_watched && (*blockers == 1 || known_heads::was_first(watched)) {
            crate::metrics::hand_off(&self.spec.dir, "none");
            let node = node.clone();
            self.hold(node, ctx);
        } else {
            crate::metrics::hand_off(&self.spec.dir, "listing");
            self.relist(ctx);
        }
    }

    /// Step 4: our own node is gone while we still count on it.
    fn on_own_node_deleted<H: ContenderHost>(&mut self, ctx: &mut Context<H>) {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Holding { node } => {
                warn!(node = %node.path, "held node deleted by someone else");
                self.report(ContenderEvent::Lost { node: node.path, reason: Loss::NodeDeleted });
            }
            State::Waiting { node, .. } => {
                info!(node = %node.path, "our node vanished while waiting; standing in line again");
                self.guid = naming::new_guid();
                self.contend(ctx);
            }
            other => self.state = other,
        }
    }

    /// Step 5: find what our lost create did.
    ///
    /// `sync` first, the listing behind it (one round trip more than the listing alone, on this
    /// rare path): after a connection loss the client may be served by another member, and the
    /// server only refuses a reconnect from a client that has seen more than it has applied.
    /// We never saw our create's reply, so the member may not yet have the create that the
    /// leader applied (or is about to commit): without the `sync` the listing can miss our node,
    /// and we would create a second one behind it and wait on ourselves.
    fn recover<H: ContenderHost>(&mut self, ctx: &mut Context<H>) {
        let State::Recovering { on } = self.state else { return };
        // Pinned to the create's session: once it has ended, whatever the create made went with
        // it, and a read queued for the next session could wait for ever (servers unreachable).
        let pinned = self.session.pinned(on);
        let synced = pinned.sync(&self.spec.dir);
        let list = pinned.children(&self.spec.dir);
        let session = self.session.session();
        let all = async move { (synced.await, list.await, session.await) };
        self.later(ctx, all, move |act, (synced, listed, session), ctx| {
            if !matches!(act.state, State::Recovering { .. }) {
                return;
            }
            // A listing is only trusted behind a `sync` that succeeded.
            let children = match synced.and(listed) {
                Ok(children) => children,
                // No directory, so no node of ours in it (the lost create did not happen), or
                // the create's session ended and took it along.
                Err(Error::NoNode { .. } | Error::SessionLost { .. }) => return act.nothing_made(ctx),
                Err(error) => return act.retry_or_fail(error, ctx, Self::recover),
            };
            let Some(session) = session.filter(|s| s.generation == on) else {
                // The listing was of the create's session, which is no longer the live one.
                return act.nothing_made(ctx);
            };
            // No reset here: the step is "have our node", and a create that keeps failing must
            // use up the policy's attempts however well the recovery reads go. `adopt` resets.
            let ours: Vec<String> =
                children.names.iter().filter(|c| naming::belongs_to(c, &act.guid)).cloned().collect();
            act.inspect_recovered(ours, children, session.session_id, ctx);
        });
    }

    /// Recovery found that the lost create left nothing of ours: create again (with a new
    /// GUID: a node of an ended session bearing the old one may still be listed until the server
    /// removes it).
    fn nothing_made<H: ContenderHost>(&mut self, ctx: &mut Context<H>) {
        self.guid = naming::new_guid();
        self.contend(ctx);
    }

    /// The generation the create in flight (or under recovery) was sent on.
    fn creating_on(&self) -> u64 {
        match self.state {
            State::Creating { on } | State::Recovering { on } => on,
            // A create's answer that arrives after the contender finished: nothing is sent on
            // a generation that never was.
            _ => 0,
        }
    }

    /// Every node bearing our GUID was made by one of our creates: the first on the current
    /// session is adopted; every other one (a duplicate, or a node of an earlier session the
    /// server has not removed yet, CURATOR-604/696) is deleted, never acquired on.
    fn inspect_recovered<H: ContenderHost>(
        &mut self,
        ours: Vec<String>,
        listing: Children,
        current: SessionId,
        ctx: &mut Context<H>,
    ) {
        let on = self.creating_on();
        if ours.is_empty() {
            debug!("the lost create did not happen; creating again");
            self.contend(ctx);
            return;
        }
        let pinned = self.session.pinned(on);
        let reads: Vec<_> = ours.iter().map(|name| pinned.exists(&path::join(&self.spec.dir, name))).collect();
        self.later(ctx, futures::future::join_all(reads), move |act, stats, ctx| {
            if !matches!(act.state, State::Recovering { .. }) {
                return;
            }
            let mut adopted = None;
            let mut others = Vec::new();
            for (name, stat) in ours.into_iter().zip(stats) {
                match stat {
                    Ok(Some(stat)) if stat.ephemeral_owner == current.0 && adopted.is_none() => {
                        adopted = Some((name, stat))
                    }
                    Ok(Some(_)) => others.push(path::join(&act.spec.dir, &name)),
                    Ok(None) => {}
                    Err(Error::SessionLost { .. }) => return act.nothing_made(ctx),
                    Err(error) => return act.retry_or_fail(error, ctx, Self::recover),
                }
            }
            let deletes = futures::future::join_all(
                others.into_iter().map(|other| delete_until_gone(pinned.clone(), other)).collect::<Vec<_>>(),
            );
            match adopted {
                Some((name, stat)) => {
                    let node_path = path::join(&act.spec.dir, &name);
                    info!(node = %node_path, "adopting the node our lost create made");
                    let node = Node {
                        path: node_path,
                        name,
                        token: FencingToken(stat.czxid),
                        version: stat.version,
                        owner: SessionId(stat.ephemeral_owner),
                        generation: on,
                    };
                    // The others may sort ahead of ours: the adopted node then waits for their
                    // deletion like for any predecessor's. Detached: they are deleted whatever
                    // becomes of us.
                    actix::spawn(deletes);
                    act.adopt(node, Some(listing), ctx);
                }
                // Nothing of the current session: once the others are gone, recovery finds
                // nothing and creates again.
                None => {
                    act.later(ctx, deletes, |act, _, ctx| act.recover(ctx));
                }
            }
        });
    }

    /// After a step failed with `error`: `again` after the policy's delay, or give up.
    fn retry_or_fail<H: ContenderHost>(
        &mut self,
        error: Error,
        ctx: &mut Context<H>,
        again: fn(&mut Self, &mut Context<H>),
    ) {
        match self.backoff.verdict(&error) {
            Verdict::RetryAfter(delay) => self.after(ctx, delay, again),
            Verdict::GiveUp => self.fail(error, ctx),
        }
    }

    /// Gives up: tells the host, and deletes whatever node we have (detached).
    fn fail<H: ContenderHost>(&mut self, error: Error, ctx: &mut Context<H>) {
        warn!(error = %error, "contender failed");
        self.quiet(ctx);
        self.let_go();
        self.report(ContenderEvent::Failed { error });
    }

    /// A one-shot watch of ours fired.
    fn watch_event<H: ContenderHost>(&mut self, event: WatchEvent, ctx: &mut Context<H>) {
        if event.kind == WatchEventKind::ChildrenChanged {
            if matches!(&self.state, State::Waiting { watch, .. } if *watch == event.path) {
                self.watch_children(ctx);
            }
            return;
        }
        if event.kind == WatchEventKind::SessionEnded {
            return; // the session events say what to do
        }
        if event.kind != WatchEventKind::NodeDeleted {
            // A data change fired a one-shot watch without ending anything: watch again, or
            // the deletion that matters would never be heard.
            if self.node().is_some_and(|node| node.path == event.path) {
                self.watch_own(event.path, ctx);
            } else if matches!(&self.state, State::Waiting { watch, .. } if *watch == event.path) {
                self.watch_ahead(event.path, ctx);
            }
            return;
        }
        if self.node().is_some_and(|node| node.path == event.path) {
            self.on_own_node_deleted(ctx);
        } else {
            self.on_watched_deleted(&event.path, ctx);
        }
    }

    /// A session event, handed on by the host once its holder core has seen it.
    pub(crate) fn session_event<H: ContenderHost>(&mut self, event: &SessionEvent, ctx: &mut Context<H>) {
        let _span = self.span.clone().entered();
        match *event {
            SessionEvent::Expired { session_id, generation } => {
                self.expired = self.expired.max(generation);
                let ours = self.node().is_some_and(|node| node.owner == session_id);
                match &self.state {
                    State::Holding { node } if ours => {
                        let node = node.path.clone();
                        self.state = State::Done;
                        self.report(ContenderEvent::Lost { node, reason: Loss::SessionExpired });
                    }
                    State::Waiting { .. } if ours => {
                        info!("session expired while waiting; standing in line on the next session");
                        self.guid = naming::new_guid();
                        self.contend(ctx); // waits for the next session
                    }
                    // Creating / Recovering: the pending request reports `SessionLost`, or
                    // `adopt` sees the expired generation.
                    _ => {}
                }
            }
            // Watches are re-set by the client on reconnect, but a deletion that happened while
            // we were away is only seen by reading again.
            SessionEvent::Reconnected { .. } if matches!(self.state, State::Waiting { .. }) => self.relist(ctx),
            SessionEvent::Closed => {
                let event = match &self.state {
                    State::Holding { node } => {
                        ContenderEvent::Lost { node: node.path.clone(), reason: Loss::SessionClosed }
                    }
                    _ => ContenderEvent::Failed { error: Error::Closed },
                };
                self.state = State::Done;
                self.report(event);
            }
            _ => {}
        }
    }

    /// A listing of the contender's directory that its host read for its own reasons (an
    /// election watching who leads). It lets a waiting contender learn that fewer nodes stand
    /// ahead of it, so that the next hand-off needs no read of its own.
    ///
    /// Safe with any listing that contains the contender's node: such a listing was taken after
    /// the node was created, and nodes ahead of it can only disappear afterwards, so it can only
    /// overstate what stands ahead.
    pub(crate) fn relisted<H: ContenderHost>(&mut self, names: Vec<String>, ctx: &mut Context<H>) {
        let State::Waiting { node, .. } = &self.state else { return };
        if self.spec.rule == Rule::Exclusive && names.contains(&node.name) {
            self.stand_on(names, true, ctx);
        }
    }

    /// The host deletes the held node itself (it has the path from `Granted`): the contender is
    /// done without a second delete. Only while holding; otherwise this is
    /// [`leave`](Self::leave), detached.
    pub(crate) fn stand_down(mut self) {
        if matches!(self.state, State::Holding { .. }) {
            self.state = State::Done;
        } else {
            self.let_go();
        }
    }

    /// [`leave`](Self::leave), detached: nobody waits for the node to be gone.
    pub(crate) fn let_go(&mut self) {
        if let Some(leaving) = self.leave() {
            actix::spawn(async move {
                let _ = leaving.await;
            });
        }
    }

    /// Leaves the line (or gives up the grant): the contender is done, and the returned future
    /// deletes what it made. The first request is sent now, so whatever the host sends next
    /// reaches the server after it; the future runs on its own (the host may be stopping).
    /// `None` when nothing of ours can exist.
    pub(crate) fn leave(&mut self) -> Option<LocalBoxFuture<'static, Result<(), Error>>> {
        let session = self.session.clone();
        match std::mem::replace(&mut self.state, State::Done) {
            State::Waiting { node, .. } | State::Holding { node } => {
                Some(Box::pin(delete_until_gone(session.pinned(node.generation), node.path)))
            }
            // Nothing was sent: nothing of ours exists.
            State::AwaitingSession | State::Done => None,
            State::Creating { on } | State::Recovering { on } => {
                Some(Box::pin(delete_by_guid(&session, on, self.spec.dir.clone(), self.guid.clone())))
            }
        }
    }
}

/// Deletes whatever nodes bearing `guid` the create sent on the session of generation `on` made
/// in `dir`: sent after that create, and synced, so it sees the create's node if there is one
/// (also when the connection moved to another member meanwhile).
fn delete_by_guid(
    session: &SessionHandle,
    on: u64,
    dir: String,
    guid: String,
) -> impl std::future::Future<Output = Result<(), Error>> + 'static {
    // On the create's session only: once it has ended, so has what it made.
    let pinned = session.pinned(on);
    // Cleanup of our own node: without the attempt limit.
    let backoff = session.retry_policy().without_attempt_limit().backoff();
    let (lister, dir_listed) = (pinned.clone(), dir.clone());
    let listed = retried(backoff, move || {
        // Synced first, as in `recover`: the server now serving us may not have applied the
        // create yet.
        let synced = lister.sync(&dir_listed);
        let listed = lister.children(&dir_listed);
        async move {
            match synced.await.and(listed.await) {
                Ok(children) => Attempted::Done(children.names),
                // Gone with the session (or never there).
                Err(Error::SessionLost { .. } | Error::NoNode { .. }) => Attempted::Done(Vec::new()),
                Err(err) if err.is_final() => Attempted::Failed(err),
                Err(err) => Attempted::Again(err),
            }
        }
    });
    async move {
        let names = listed.await?;
        for name in names.iter().filter(|c| naming::belongs_to(c, &guid)) {
            delete_until_gone(pinned.clone(), path::join(&dir, name)).await?;
        }
        Ok(())
    }
}

/// Deletes `path`, retrying through connection loss, until it is gone or its session is.
///
/// Pinned to the session that made the node: once that session has ended, the node went with
/// it, and a delete queued for the next session would wait for one (for ever, with the servers
/// unreachable).
///
/// The first delete is sent *now*, in the caller's handler, so that whatever the caller sends
/// next (a new contender's create, say) reaches the server after it.
pub(crate) fn delete_until_gone(
    session: PinnedSession,
    path: String,
) -> impl std::future::Future<Output = Result<(), Error>> + 'static {
    // Without the attempt limit: giving up would leave our node blocking the others until our
    // session ends.
    let backoff = session.handle().retry_policy().without_attempt_limit().backoff();
    retried(backoff, move || {
        let (sent, path) = (session.delete(&path, None), path.clone());
        async move {
            match sent.await {
                Ok(()) | Err(Error::NoNode { .. } | Error::SessionLost { .. }) => Attempted::Done(()),
                // `Closed` is final too: nothing more can be sent.
                Err(err) if err.is_final() => Attempted::Failed(err),
                Err(err) => {
                    debug!(%path, error = %err, "delete interrupted; retrying");
                    Attempted::Again(err)
                }
            }
        }
    })
}
