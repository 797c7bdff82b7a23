//! The contender protocol, written once: one protected ephemeral-sequential node, from create to
//! delete, waiting on one node only.
//!
//! Owns: the [`Contender`] actor and its state machine
//! `Creating → (Recovering →) Waiting{watch} → Holding → Withdrawing → Done`. Used by every
//! queue-shaped recipe (mutex, read/write lock, semaphore guard, leader latch).
//! Does not own: replies to users, subscribers, timeouts, or what a `Suspended` connection means
//! for a holder — the owning recipe actor decides those.
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
//! 6. **Withdraw / stop.** The node is deleted, retried through connection loss until it is gone
//!    or its session is (CURATOR-678, kazoo#732); a contender stopped mid-create deletes whatever
//!    its GUID created.
//!
//! The owner forwards [`SessionEvent`]s to its contender (one subscription per recipe actor,
//! not one per attempt).

use actix::WeakRecipient;
use actix::prelude::*;
use futures::channel::oneshot;
use tracing::{debug, info, warn};

use super::known_heads;
use super::naming::{self, Rule, Standing};
use crate::error::Error;
use crate::path;
use crate::retry::{Attempted, Backoff, RetryPolicy, again_later, retried};
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
/// contender that sees the node go to the recipe's own public reason (`LockLostReason`,
/// `LeadershipLostReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// The session that owned the node expired; the server deleted the node.
    SessionExpired,
    /// Someone else deleted the node.
    NodeDeleted,
    /// The session was closed.
    SessionClosed,
    /// Conservative policy: disconnected for a whole session timeout. Decided by the holder
    /// core; a contender never reports it.
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
    /// The node held the grant and no longer does; the contender has stopped.
    Lost {
        /// The node's full path.
        node: String,
        /// Why.
        reason: Loss,
    },
    /// The contender cannot go on (bad path, no permission, parent is ephemeral, ...); it has
    /// stopped and left no node behind.
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

/// Leave the line (or give up the grant): delete the node and stop. Resolves once the node is
/// gone.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), Error>")]
pub struct Withdraw;

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
    /// Deleting our node.
    Withdrawing,
    /// Finished; the actor is stopping.
    Done,
}

/// One participant's node in a queue-shaped recipe; see the [module docs](self).
pub struct Contender {
    session: SessionHandle,
    spec: ContenderSpec,
    /// Weak: a contender must not keep its owner alive (stopping the owner is how a user
    /// releases).
    owner: WeakRecipient<ContenderReport>,
    guid: String,
    state: State,
    /// Callers of `Withdraw` waiting for the node to be gone.
    withdrawals: Vec<oneshot::Sender<Result<(), Error>>>,
    /// How long to wait before the next retry of a failed read; reset by every success.
    backoff: Backoff,
    /// Where the watch on our current node stands (protocol step 4).
    own_watch: OwnWatch,
    /// Our node and its version at the last revocation request reported: one report per write
    /// (a node made later, e.g. after an expiry, starts from version 0 again).
    revocation_reported: Option<(String, i32)>,
    span: tracing::Span,
}

impl Contender {
    /// A contender for `spec` on `session`, reporting to `owner`; it begins once started (on the
    /// session's Arbiter, see `ContenderSlot::start`).
    pub fn new(session: SessionHandle, spec: ContenderSpec, owner: Recipient<ContenderReport>) -> Self {
        let span = tracing::info_span!("zk.contender", dir = %spec.dir, name = spec.name);
        let backoff = spec.retry.backoff();
        Contender {
            session,
            spec,
            owner: owner.downgrade(),
            guid: naming::new_guid(),
            state: State::AwaitingSession,
            withdrawals: Vec::new(),
            backoff,
            own_watch: OwnWatch::Unset,
            revocation_reported: None,
            span,
        }
    }

    fn report(&self, event: ContenderEvent) {
        if let Some(owner) = self.owner.upgrade() {
            owner.do_send(ContenderReport { tag: self.spec.tag, event });
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
    /// sent on whichever session comes next, and a stop meanwhile would have to wait for that
    /// session (forever, with the servers unreachable) to delete what the create made.
    fn contend(&mut self, ctx: &mut Context<Self>) {
        let Some(on) = self.session.live_generation() else {
            self.state = State::AwaitingSession;
            let up = self.session.connected();
            ctx.spawn(up.into_actor(self).map(|up, act, ctx| {
                if !matches!(act.state, State::AwaitingSession) {
                    return;
                }
                match up {
                    Ok(_) => act.contend(ctx),
                    Err(error) => act.fail(error, ctx),
                }
            }));
            return;
        };
        self.state = State::Creating { on };
        let create =
            self.session.pinned(on).create(&self.prefix(), self.spec.data.clone(), CreateMode::EphemeralSequential);
        let list = self.session.children(&self.spec.dir);
        let both = async move { (create.await, list.await) };
        ctx.spawn(both.into_actor(self).map(|(created, listed), act, ctx| act.on_created(created, listed, ctx)));
    }

    fn on_created(
        &mut self,
        created: Result<Created, Error>,
        listed: Result<Children, Error>,
        ctx: &mut Context<Self>,
    ) {
        let _span = self.span.clone().entered();
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
            Err(Error::NoNode { .. }) if !self.withdrawing() => {
                // The directory is missing: create it the way Curator does (containers), then
                // stand in line again.
                let ensure = self.session.request(EnsurePath { path: self.spec.dir.clone(), containers: true });
                ctx.spawn(ensure.into_actor(self).map(|ensured, act, ctx| match ensured {
                    Ok(()) => act.contend(ctx),
                    // A dropped connection (a server refusing containers closes it) is tried
                    // again by the policy; a final error ends the contender.
                    Err(error) => act.retry_or_fail(error, ctx, Self::contend),
                }));
            }
            // Withdrawing, and the create certainly left nothing: the directory is missing, or
            // the node went with its session.
            Err(Error::NoNode { .. } | Error::SessionLost { .. }) if self.withdrawing() => self.finish(Ok(()), ctx),
            Err(Error::SessionLost { .. }) => {
                // The session expired while creating; requests wait for the next session.
                self.guid = naming::new_guid();
                self.contend(ctx);
            }
            // Anything else leaves the create's outcome unknown: find out by GUID (on giving
            // up too: `stopped` then deletes whatever node bears it).
            Err(err) => {
                debug!(error = %err, "create outcome unknown; recovering by GUID");
                self.state = State::Recovering { on: self.creating_on() };
                self.retry_or_fail(err, ctx, Self::recover);
            }
        }
    }

    /// Takes `node` as ours, then stands in line (or withdraws, if asked meanwhile).
    fn adopt(&mut self, node: Node, listing: Option<Children>, ctx: &mut Context<Self>) {
        self.backoff.reset();
        self.own_watch = OwnWatch::Unset;
        self.state = State::Waiting { node, watch: String::new(), blockers: usize::MAX };
        if self.withdrawing() {
            self.withdraw(ctx);
            return;
        }
        match listing {
            Some(children) => self.stand(children.names, ctx),
            None => self.relist(ctx),
        }
    }

    fn relist(&mut self, ctx: &mut Context<Self>) {
        let list = self.session.children(&self.spec.dir);
        ctx.spawn(list.into_actor(self).map(|listed, act, ctx| {
            if !matches!(act.state, State::Waiting { .. }) {
                return;
            }
            match listed {
                Ok(children) => {
                    act.backoff.reset();
                    act.stand(children.names, ctx)
                }
                Err(error) => act.retry_or_fail(error, ctx, Self::relist),
            }
        }));
    }

    /// Step 2: where do we stand?
    fn stand(&mut self, children: Vec<String>, ctx: &mut Context<Self>) {
        self.stand_on(children, false, ctx);
    }

    /// `watch_in_place`: the watch this listing calls for is already set (a lease listing read
    /// with a children watch; an owner's listing while our predecessor watch stands).
    fn stand_on(&mut self, children: Vec<String>, watch_in_place: bool, ctx: &mut Context<Self>) {
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

    /// Watches our own node. A data watch, not an `exists` watch: it is only ever set on a node
    /// that exists, so none is left on the server once the node is gone (an `exists` watch on a
    /// missing node stays until that path is created, and sequential names never come back).
    /// Fired by a data change (Curator's `Revoker` writes into lock nodes), it is set again.
    ///
    /// The contender's watches are set with a bare recipient, not a `Watcher` whose owner drops
    /// with the contender as the recipe actors' are: a contender stops as its node is deleted,
    /// and that delete fires the watch for free, where removing it first costs a request per
    /// acquisition (measured: W7 1.01 → 2.04 requests per grant, W2 5.0 → 6.06, both slower).
    fn watch_own(&mut self, path: String, ctx: &mut Context<Self>) {
        self.own_watch = OwnWatch::Requested;
        let read = self.session.get_data_watched(&path, ctx.address().recipient());
        ctx.spawn(read.into_actor(self).map(move |read, act, ctx| {
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
                        warn!(parent: &act.span, %error, "cannot watch our own node");
                        return;
                    }
                    // Not bounded by the attempt limit: while we hold, whether a connection
                    // problem ends the grant is the connection policy's decision, not a retry
                    // count's.
                    let delay = act.backoff.next_delay();
                    ctx.run_later(delay, move |act, ctx| {
                        if act.own_watch == OwnWatch::Unset && act.node().is_some_and(|node| node.path == path) {
                            act.watch_own(path, ctx);
                        }
                    });
                }
            }
        }));
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
    fn watch_ahead(&mut self, watched: String, ctx: &mut Context<Self>) {
        let read = self.session.get_data_watched(&watched, ctx.address().recipient());
        ctx.spawn(read.into_actor(self).map(move |read, act, ctx| match read {
            Ok(_) => {}
            Err(Error::NoNode { .. }) => act.on_watched_deleted(&watched, ctx),
            Err(_) => act.relist(ctx),
        }));
    }

    /// Lists the directory with a children watch (lease rule), and stands on that listing.
    fn watch_children(&mut self, ctx: &mut Context<Self>) {
        let list = self.session.children_watched(&self.spec.dir, ctx.address().recipient());
        ctx.spawn(list.into_actor(self).map(|listed, act, ctx| {
            if !matches!(act.state, State::Waiting { .. }) {
                return;
            }
            match listed {
                Ok(children) => {
                    act.backoff.reset();
                    act.stand_on(children.names, true, ctx)
                }
                Err(error) => act.retry_or_fail(error, ctx, Self::watch_children),
            }
        }));
    }

    /// Step 4, now: watch our node, unless that is done already.
    fn watch_own_once(&mut self, ctx: &mut Context<Self>) {
        if !matches!(self.own_watch, OwnWatch::Requested | OwnWatch::Set) {
            if let Some(path) = self.node().map(|node| node.path.clone()) {
                self.watch_own(path, ctx);
            }
        }
    }

    /// Step 4, later: watch our node once it has been ours for [`OWN_WATCH_AFTER`], if it still
    /// is and nothing has watched it meanwhile.
    fn watch_own_later(&mut self, ctx: &mut Context<Self>) {
        let Some(path) = self.node().map(|node| node.path.clone()) else { return };
        if self.own_watch != OwnWatch::Unset {
            return;
        }
        self.own_watch = OwnWatch::Armed;
        ctx.run_later(OWN_WATCH_AFTER, move |act, ctx| {
            if act.own_watch == OwnWatch::Armed && act.node().is_some_and(|node| node.path == path) {
                act.watch_own(path, ctx);
            }
        });
    }

    fn hold(&mut self, node: Node, ctx: &mut Context<Self>) {
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
    fn on_watched_deleted(&mut self, watched: &str, ctx: &mut Context<Self>) {
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
    fn on_own_node_deleted(&mut self, ctx: &mut Context<Self>) {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Holding { node } => {
                warn!(node = %node.path, "held node deleted by someone else");
                self.report(ContenderEvent::Lost { node: node.path, reason: Loss::NodeDeleted });
                ctx.stop();
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
    fn recover(&mut self, ctx: &mut Context<Self>) {
        let State::Recovering { on } = self.state else { return };
        // Pinned to the create's session: once it has ended, whatever the create made went with
        // it, and a read queued for the next session could wait for ever (servers unreachable).
        let pinned = self.session.pinned(on);
        let synced = pinned.sync(&self.spec.dir);
        let list = pinned.children(&self.spec.dir);
        let session = self.session.session();
        let all = async move { (synced.await, list.await, session.await) };
        ctx.spawn(all.into_actor(self).map(move |(synced, listed, session), act, ctx| {
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
        }));
    }

    /// Recovery found that the lost create left nothing of ours: finish a withdrawal, or
    /// create again (with a new GUID: a node of an ended session bearing the old one may still
    /// be listed until the server removes it).
    fn nothing_made(&mut self, ctx: &mut Context<Self>) {
        if self.withdrawing() {
            self.finish(Ok(()), ctx);
        } else {
            self.guid = naming::new_guid();
            self.contend(ctx);
        }
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
    fn inspect_recovered(&mut self, ours: Vec<String>, listing: Children, current: SessionId, ctx: &mut Context<Self>) {
        let on = self.creating_on();
        if ours.is_empty() {
            debug!("the lost create did not happen; creating again");
            if self.withdrawing() {
                self.finish(Ok(()), ctx);
            } else {
                self.contend(ctx);
            }
            return;
        }
        let pinned = self.session.pinned(on);
        let reads: Vec<_> = ours.iter().map(|name| pinned.exists(&path::join(&self.spec.dir, name))).collect();
        ctx.spawn(futures::future::join_all(reads).into_actor(self).map(move |stats, act, ctx| {
            let mut adopted = None;
            let mut others = Vec::new();
            for (name, stat) in ours.into_iter().zip(stats) {
                match stat {
                    Ok(Some(stat)) if stat.ephemeral_owner == current.0 && adopted.is_none() && !act.withdrawing() => {
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
                    // deletion like for any predecessor's.
                    ctx.spawn(deletes.into_actor(act).map(|_, _, _| ()));
                    act.adopt(node, Some(listing), ctx);
                }
                // Withdrawing, or nothing of the current session: once the others are gone,
                // recovery finds nothing and creates again (or finishes).
                None => {
                    ctx.spawn(deletes.into_actor(act).map(|_, act, ctx| act.recover(ctx)));
                }
            }
        }));
    }

    fn withdrawing(&self) -> bool {
        !self.withdrawals.is_empty()
    }

    /// Step 6: delete our node (if any) and stop.
    fn withdraw(&mut self, ctx: &mut Context<Self>) {
        match std::mem::replace(&mut self.state, State::Withdrawing) {
            State::Waiting { node, .. } | State::Holding { node } => {
                let delete = delete_until_gone(self.session.pinned(node.generation), node.path);
                ctx.spawn(delete.into_actor(self).map(|outcome, act, ctx| act.finish(outcome, ctx)));
            }
            // The create (or its recovery) is in flight; its callback sees `withdrawing()`.
            state @ (State::Creating { .. } | State::Recovering { .. }) => self.state = state,
            // Nothing was sent: nothing of ours exists.
            State::AwaitingSession | State::Done => self.finish(Ok(()), ctx),
            State::Withdrawing => {}
        }
    }

    fn finish(&mut self, outcome: Result<(), Error>, ctx: &mut Context<Self>) {
        self.state = State::Done;
        for waiter in self.withdrawals.drain(..) {
            let _ = waiter.send(outcome.clone());
        }
        ctx.stop();
    }

    /// After a step failed with `error`: `step` again after the policy's delay, or give up.
    fn retry_or_fail(&mut self, error: Error, ctx: &mut Context<Self>, step: fn(&mut Self, &mut Context<Self>)) {
        if let Err(error) = again_later(&mut self.backoff, error, ctx, step) {
            self.fail(error, ctx);
        }
    }

    /// Gives up: tells the owner, and stops; `stopped` deletes whatever node we have.
    fn fail(&mut self, error: Error, ctx: &mut Context<Self>) {
        warn!(parent: &self.span, error = %error, "contender failed");
        self.report(ContenderEvent::Failed { error });
        for waiter in self.withdrawals.drain(..) {
            let _ = waiter.send(Ok(()));
        }
        ctx.stop();
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

/// The owner deletes the held node itself (it has the path from `Granted`) and wants the
/// contender gone without a second delete. Only meaningful while holding; otherwise it acts as
/// [`Withdraw`] without a reply.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct Abandon;

impl Handler<Abandon> for Contender {
    type Result = ();

    fn handle(&mut self, _: Abandon, ctx: &mut Context<Self>) {
        if matches!(self.state, State::Holding { .. }) {
            self.state = State::Done;
            ctx.stop();
        } else {
            self.withdraw(ctx);
        }
    }
}

impl Actor for Contender {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.contend(ctx);
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        // Stopped without withdrawing: never leave a node behind. Detached tasks outlive us.
        let session = self.session.clone();
        match std::mem::replace(&mut self.state, State::Done) {
            State::Waiting { node, .. } | State::Holding { node } => {
                actix::spawn(async move {
                    let _ = delete_until_gone(session.pinned(node.generation), node.path).await;
                });
            }
            State::AwaitingSession => {}
            State::Creating { on } | State::Recovering { on } => {
                // Sent after the create, and synced, so it sees the create's node if there is
                // one (also when the connection moved to another member meanwhile).
                let (dir, guid) = (self.spec.dir.clone(), self.guid.clone());
                // On the create's session only: once it has ended, so has what it made.
                let pinned = session.pinned(on);
                // Cleanup of our own node: without the attempt limit.
                let backoff = session.retry_policy().without_attempt_limit().backoff();
                let (lister, dir_listed) = (pinned.clone(), dir.clone());
                let listed = retried(backoff, move || {
                    // Synced first, as in `recover`: the server now serving us may not have
                    // applied the create yet.
                    let synced = lister.sync(&dir_listed);
                    let listed = lister.children(&dir_listed);
                    async move {
                        match synced.await.and(listed.await) {
                            Ok(children) => Attempted::Done(children.names),
                            // Gone with the session (or never there).
                            Err(Error::SessionLost { .. } | Error::NoNode { .. }) => Attempted::Done(Vec::new()),
                            Err(err) => Attempted::Again(err),
                        }
                    }
                });
                actix::spawn(async move {
                    let Ok(names) = listed.await else { return };
                    for name in names.iter().filter(|c| naming::belongs_to(c, &guid)) {
                        let _ = delete_until_gone(pinned.clone(), path::join(&dir, name)).await;
                    }
                });
            }
            State::Withdrawing | State::Done => {}
        }
    }
}

impl Handler<WatchEvent> for Contender {
    type Result = ();

    fn handle(&mut self, event: WatchEvent, ctx: &mut Context<Self>) {
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
}

impl Handler<SessionEvent> for Contender {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        match event {
            SessionEvent::Expired { session_id, generation } => {
                let ours = self.node().is_some_and(|node| node.owner == session_id);
                match &self.state {
                    State::Holding { node } if ours => {
                        self.report(ContenderEvent::Lost { node: node.path.clone(), reason: Loss::SessionExpired });
                        self.state = State::Done;
                        ctx.stop();
                    }
                    State::Waiting { .. } if ours => {
                        info!("session expired while waiting; standing in line on the next session");
                        self.guid = naming::new_guid();
                        self.contend(ctx); // waits for the next session
                    }
                    // Withdrawing while the create's session ended: whatever it made went with
                    // that session, and nothing was sent on another (the create is pinned).
                    State::Creating { on } | State::Recovering { on } if *on == generation && self.withdrawing() => {
                        self.finish(Ok(()), ctx)
                    }
                    // Creating / Recovering: the pending request reports `SessionLost`.
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
                self.report(event);
                self.state = State::Done;
                ctx.stop();
            }
            _ => {}
        }
    }
}

/// A listing of the contender's directory that its owner read for its own reasons (an election
/// watching who leads). It lets a waiting contender learn that fewer nodes stand ahead of it, so
/// that the next hand-off needs no read of its own.
///
/// Safe with any listing that contains the contender's node: such a listing was taken after the
/// node was created, and nodes ahead of it can only disappear afterwards, so it can only
/// overstate what stands ahead.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Relisted {
    /// Child names of the directory.
    pub names: Vec<String>,
}

impl Handler<Relisted> for Contender {
    type Result = ();

    fn handle(&mut self, msg: Relisted, ctx: &mut Context<Self>) {
        let State::Waiting { node, .. } = &self.state else { return };
        if self.spec.rule == Rule::Exclusive && msg.names.contains(&node.name) {
            self.stand_on(msg.names, true, ctx);
        }
    }
}

impl Handler<Withdraw> for Contender {
    type Result = ResponseFuture<Result<(), Error>>;

    fn handle(&mut self, _: Withdraw, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        self.withdrawals.push(tx);
        self.withdraw(ctx);
        Box::pin(async move { rx.await.unwrap_or(Ok(())) })
    }
}
