//! [`SharedNode`]: one shared value node, as an actor — the core under
//! [`SharedValue`](super::SharedValue) (bytes) and [`SharedCount`](crate::counter::SharedCount)
//! (Curator's 4-byte count), written once for both (Curator builds its `SharedCount` on its
//! `SharedValue` the same way).
//!
//! Owns: creating the node with the seed, the watched copy of the value (what it is, whether it
//! is current), reading again after a watch fires, a reconnect or a new session, versioned and
//! unconditional writes, and telling subscribers. Does not own what the bytes mean (a
//! [`SharedFormat`]), the messages (each front's), or the session.
//!
//! Watching: a one-shot data watch, armed again by the read that follows each event. The client
//! library sets one-shot watches again after a reconnect with the last zxid it saw, so the server
//! fires them for a change made while we were away; on top of that the value is read again on
//! `Reconnected` and on every new session. (A persistent watch would need no re-arming, but after
//! a reconnect it is added again at a moment this actor cannot observe, and changes before that
//! are not reported: ZOOKEEPER-4698.)

use std::collections::HashMap;
use std::future::Future;

use actix::prelude::*;
use tracing::{debug, info, warn};

use crate::error::Error;
use crate::events::Listen;
use crate::path;
use crate::recipe::shell::Shell;
use crate::reply::Reply;
use crate::retry::{Backoff, RetryPolicy, again_later};
use crate::session::health::RecipeState;
use crate::session::requests::{CreateMode, NodeData, Stat};
use crate::session::watch::Watcher;
use crate::session::{SessionEvent, SessionHandle, WatchEvent, WatchEventKind};

/// How often a create/read (or set/create) round may find the node or its parent gone again
/// (someone deleting it concurrently) before giving up with `NoNode`.
const ATTEMPTS: usize = 5;

/// Why a request to a shared node failed, before a front names it in its own error type.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Failure {
    /// The node's data is not a value of this format (`len` bytes).
    NotOfFormat {
        /// The data's length.
        len: usize,
    },
    /// A write whose outcome is unknown (it may have applied).
    OutcomeUnknown(Error),
    /// A compare-and-set reached a node created after its value was read.
    Recreated,
    /// The actor stopped before answering.
    Stopped,
    /// A ZooKeeper request failed.
    ZooKeeper(Error),
}

impl Failure {
    fn of_write(err: Error) -> Failure {
        if err.outcome_unknown() { Failure::OutcomeUnknown(err) } else { Failure::ZooKeeper(err) }
    }
}

/// What a shared node's data means: its value type and bytes, and how a front names its
/// answers, errors and change events.
pub trait SharedFormat: Sized + Unpin + 'static {
    /// The value.
    type Value: Clone + PartialEq + std::fmt::Debug + Send + Unpin + 'static;
    /// A value with the version and `czxid` of the node it was read from.
    type Versioned: Clone + std::fmt::Debug + Send + Unpin + 'static;
    /// The front's error.
    type Error: Clone + std::fmt::Debug + Send + Unpin + 'static;
    /// The front's change event.
    type Event: Message<Result = ()> + Clone + Send + std::fmt::Debug + Unpin + 'static;
    /// The value's bytes.
    fn encode(value: &Self::Value) -> Vec<u8>;
    /// The value in `data`; `None` when the data is not one.
    fn decode(data: &[u8]) -> Option<Self::Value>;
    /// A versioned value.
    fn versioned(value: Self::Value, version: i32, czxid: i64) -> Self::Versioned;
    /// A versioned value's parts.
    fn parts(versioned: &Self::Versioned) -> (&Self::Value, i32, i64);
    /// The change event for a value.
    fn changed(value: Self::Value, version: i32, czxid: i64) -> Self::Event;
    /// The front's error for a failure at `path`.
    fn failure(path: &str, failure: Failure) -> Self::Error;
    /// What the node is called in its span (`count`, `value`): a `count` is a `shared-count` on
    /// its session's health board, any other a `shared-value`.
    const KIND: &'static str = "value";
}

/// Writes a [`SharedFormat`]'s `versioned`, `parts` and `changed` for a versioned value and a
/// change event whose fields are `value`, `version` and `czxid`.
macro_rules! versioned_fields {
    ($value:ty, $versioned:ident, $event:ident) => {
        fn versioned(value: $value, version: i32, czxid: i64) -> $versioned {
            $versioned { value, version, czxid }
        }

        fn parts(versioned: &$versioned) -> (&$value, i32, i64) {
            (&versioned.value, versioned.version, versioned.czxid)
        }

        fn changed(value: $value, version: i32, czxid: i64) -> $event {
            $event { value, version, czxid }
        }
    };
}
pub(crate) use versioned_fields;

/// Where a shared node lives, its seed and its retry policy.
#[derive(Debug, Clone)]
pub struct NodeConfig<V> {
    /// The node's path.
    pub path: String,
    /// The value it is created with when missing.
    pub seed: V,
    /// How failed reads are retried (`None`: the session's policy).
    pub retry: Option<RetryPolicy>,
}

/// The node as last seen (by a read, or in the reply to our own write).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen<V> {
    /// The value, or the length of data that is not one.
    content: Result<V, usize>,
    version: i32,
    /// Which node (a re-created node has a new one).
    czxid: i64,
    /// Orders everything seen: every change of the node, its re-creation included, has a
    /// larger zxid than the one before.
    mzxid: i64,
}

impl<V: Clone> Seen<V> {
    fn new(stat: &Stat, content: Result<V, usize>) -> Seen<V> {
        Seen { content, version: stat.version, czxid: stat.czxid, mzxid: stat.mzxid }
    }
}

type ValueReply<F> = crate::reply::Pending<Result<<F as SharedFormat>::Versioned, <F as SharedFormat>::Error>>;
type SetReply<F> = crate::reply::Pending<Result<bool, <F as SharedFormat>::Error>>;

/// One read of the node at a time; requests for another while it runs are merged into one.
struct Reader<F: SharedFormat> {
    busy: bool,
    /// The running read leaves a watch.
    watched: bool,
    /// Read again when this one is done.
    again: bool,
    /// Create the node (with the seed) before the next read.
    create: bool,
    /// Gets waiting for the next read (sent after they asked).
    queued: Vec<ValueReply<F>>,
}

impl<F: SharedFormat> Default for Reader<F> {
    fn default() -> Self {
        Reader { busy: false, watched: false, again: false, create: false, queued: Vec::new() }
    }
}

/// One shared node; see `docs/recipes/shared-value.md` and `docs/recipes/counter.md`.
///
/// On start it creates the node with the seed if it is missing, reads it and watches it. It
/// answers a get from that watched copy while the copy is current, and writes with a
/// compare-and-set on the node's version, an unconditional set, and (for a count) an add.
/// Subscribers get a change event for every change it learns of, in version order, including
/// changes made while it was disconnected or between two sessions.
///
/// Stop it with its front's `Stop` or by dropping every address of it.
pub struct SharedNode<F: SharedFormat> {
    config: NodeConfig<F::Value>,
    /// Set when the path is unusable: every request fails with it, nothing is sent.
    invalid: Option<Error>,
    seen: Option<Seen<F::Value>>,
    /// `seen` is the node as it is now, as far as ZooKeeper's guarantees go: a watch is armed on
    /// a connected session and has not fired since `seen` was read.
    fresh: bool,
    /// Our one-shot watches set on the node in this session: watched reads that succeeded,
    /// minus watch events. A watch is armed while this is above 0. Counting (rather than a
    /// flag) copes with both surprises: an event that overtakes the reply of the read that set
    /// its watch (the count dips below 0 and comes back to 0, so we arm again), and two watches
    /// set at once (both fire, the count goes to 0, one read arms one watch again).
    watches: i64,
    connected: bool,
    /// The newest session generation we have heard of.
    generation: u64,
    reader: Reader<F>,
    /// Compare-and-sets in flight, by expected version, with the callers that asked for the same
    /// version meanwhile (they lose whatever happens: only one write at a version can apply).
    in_flight: HashMap<i32, Vec<SetReply<F>>>,
    /// Delay before reading again after a failed read that no session event will follow.
    backoff: Backoff,
    /// What the health board calls it (`shared-value`, `shared-count`).
    kind: &'static str,
    /// Kept last: its lifeline must drop after everything else the actor holds.
    shell: Shell<F::Event>,
}

impl<F: SharedFormat> SharedNode<F> {
    /// A shared node (a [`SharedCount`](crate::counter::SharedCount), a
    /// [`SharedValue`](crate::shared::SharedValue)) for `config`, its config or a [`NodeConfig`];
    /// start it with `.start()`.
    pub fn new(session: SessionHandle, config: impl Into<NodeConfig<F::Value>>) -> Self {
        let config = config.into();
        let kind = F::KIND;
        let span = tracing::info_span!("zk.shared", kind, path = %config.path);
        let shell = Shell::new(session, span, config.retry);
        let backoff = shell.retry().backoff();
        SharedNode {
            shell,
            config,
            invalid: None,
            seen: None,
            fresh: false,
            watches: 0,
            connected: false,
            generation: 0,
            reader: Reader::default(),
            in_flight: HashMap::new(),
            backoff,
            kind: if kind == "count" { "shared-count" } else { "shared-value" },
        }
    }

    /// `seen` is (`true`) or may not be (`false`) the node as it is now; the health board
    /// says `Watching` or `Idle`.
    fn set_fresh(&mut self, fresh: bool) {
        self.fresh = fresh;
        if let Some(health) = self.shell.health() {
            health.set(if fresh { RecipeState::Watching } else { RecipeState::Idle });
        }
    }

    pub(crate) fn path(&self) -> &str {
        &self.config.path
    }

    fn fail(&self, failure: Failure) -> F::Error {
        F::failure(self.path(), failure)
    }

    /// Takes in the node as seen in a read or a write's reply; keeps it if it is newer than
    /// what we have, and tells the subscribers about a new value.
    fn accept(&mut self, seen: Seen<F::Value>) {
        if self.seen.as_ref().is_some_and(|known| known.mzxid >= seen.mzxid) {
            return;
        }
        match &seen.content {
            Ok(value) => {
                debug!(parent: self.shell.span(), ?value, version = seen.version, "value changed");
                self.shell.tell(F::changed(value.clone(), seen.version, seen.czxid));
            }
            Err(len) => {
                warn!(parent: self.shell.span(), len, version = seen.version, "the node does not hold a value of its format");
            }
        }
        self.seen = Some(seen);
    }

    fn accept_node(&mut self, node: &NodeData) {
        let content = F::decode(&node.data).ok_or(node.data.len());
        self.accept(Seen::new(&node.stat, content));
    }

    fn current(&self) -> Result<F::Versioned, F::Error> {
        match &self.seen {
            Some(seen) => match &seen.content {
                Ok(value) => Ok(F::versioned(value.clone(), seen.version, seen.czxid)),
                Err(len) => Err(self.fail(Failure::NotOfFormat { len: *len })),
            },
            // Only after a failed first read, whose error the callers already got.
            None => Err(self.fail(Failure::ZooKeeper(Error::NoNode { path: self.path().to_owned() }))),
        }
    }
    /// Reads the node (creating it first with `create`), leaving a watch unless one is armed.
    /// While a read runs, a new one is queued to follow it: one read at a time, and every
    /// waiting `GetCount` is answered by a read sent after it asked.
    fn refresh(&mut self, create: bool, ctx: &mut Context<Self>) {
        if let Some(err) = &self.invalid {
            let err = self.fail(Failure::ZooKeeper(err.clone()));
            for waiter in self.reader.queued.drain(..) {
                let _ = waiter.send(Err(err.clone()));
            }
            return;
        }
        self.reader.create |= create;
        if self.reader.busy {
            self.reader.again = true;
            return;
        }
        // The session holds a watch's owner weakly: our address does not keep us alive.
        let watch = if self.watches > 0 { None } else { Some(self.shell.watcher(ctx)) };
        let create = std::mem::take(&mut self.reader.create);
        let waiters = std::mem::take(&mut self.reader.queued);
        self.reader = Reader { busy: true, watched: watch.is_some(), ..Reader::default() };
        let seed = F::encode(&self.config.seed);
        let read = read_node(self.shell.session().clone(), self.path().to_owned(), seed, watch, create);
        ctx.spawn(read.into_actor(self).map(move |outcome, act, ctx| act.on_read(outcome, waiters, ctx)));
    }

    fn on_read(&mut self, outcome: Result<NodeData, Error>, waiters: Vec<ValueReply<F>>, ctx: &mut Context<Self>) {
        let Reader { watched, again, .. } = self.reader;
        self.reader.busy = false;
        let answer = match outcome {
            Ok(node) => {
                if watched {
                    self.watches += 1;
                }
                self.backoff.reset();
                self.accept_node(&node);
                self.set_fresh(self.watches > 0 && self.connected && !again);
                self.current()
            }
            // The read was bound to a session that ended before it was answered (it waited
            // through an expiry): nothing was read, and the waiters wait on for the new
            // session's read, as the docs promise, instead of being told a session they never
            // chose is gone.
            Err(err @ Error::SessionLost { .. }) => {
                self.set_fresh(false);
                let again = again_later(&mut self.backoff, err, ctx, |act: &mut Self, ctx| {
                    if !act.reader.busy && (!act.reader.queued.is_empty() || !act.fresh) {
                        act.refresh(false, ctx);
                    }
                });
                match again {
                    Ok(()) => {
                        debug!(parent: self.shell.span(), "the read's session ended; reading on the next one");
                        self.reader.queued.extend(waiters);
                        return;
                    }
                    Err(err) => Err(self.fail(Failure::ZooKeeper(err))),
                }
            }
            Err(err) => {
                debug!(parent: self.shell.span(), error = %err, "cannot read the value");
                self.set_fresh(false);
                // A reconnect or a new session reads again too; this covers a failure that no
                // session event follows. The waiters hear the error either way.
                // Given up, nothing is scheduled: the next session event reads again.
                let _ = again_later(&mut self.backoff, err.clone(), ctx, |act: &mut Self, ctx| {
                    if !act.fresh && !act.reader.busy {
                        act.refresh(false, ctx);
                    }
                });
                Err(self.fail(Failure::ZooKeeper(err)))
            }
        };
        for waiter in waiters {
            let _ = waiter.send(answer.clone());
        }
        if self.reader.again || !self.reader.queued.is_empty() {
            self.refresh(false, ctx);
        }
    }

    /// Forgets every watch: their session is gone.
    fn watches_gone(&mut self) {
        self.watches = 0;
        self.set_fresh(false);
    }

    fn on_try_set(
        &mut self,
        value: F::Value,
        expected_czxid: i64,
        outcome: Result<Stat, Error>,
        read: Option<Result<NodeData, Error>>,
        ctx: &mut Context<Self>,
    ) -> Result<bool, Failure> {
        match outcome {
            Ok(stat) => {
                self.accept(Seen::new(&stat, Ok(value)));
                if expected_czxid != 0 && stat.czxid != expected_czxid {
                    warn!(parent: self.shell.span(), "a compare-and-set reached a node created after its value was read");
                    return Err(Failure::Recreated);
                }
                Ok(true)
            }
            Err(Error::BadVersion { .. }) => {
                // Read right behind the write: what it shows is at least as new as what beat us.
                if let Some(Ok(node)) = read {
                    self.accept_node(&node);
                }
                Ok(false)
            }
            Err(Error::NoNode { .. }) => {
                // Deleted: the version we expected is gone with it. Re-create it with the seed.
                info!(parent: self.shell.span(), "the node is gone; creating it again with the seed");
                self.set_fresh(false);
                self.refresh(true, ctx);
                Ok(false)
            }
            Err(err) => Err(Failure::of_write(err)),
        }
    }

    /// The value: from the watched copy while it is current, else read now.
    pub(crate) fn get(&mut self, ctx: &mut Context<Self>) -> Reply<Result<F::Versioned, F::Error>> {
        if let Some(err) = &self.invalid {
            return Reply::Now(Err(self.fail(Failure::ZooKeeper(err.clone()))));
        }
        if self.fresh {
            return Reply::Now(self.current());
        }
        let (tx, reply) = Reply::later(Err(self.fail(Failure::Stopped)));
        self.reader.queued.push(tx);
        self.refresh(false, ctx);
        reply
    }

    /// Writes `value` if the node is still at `expected`'s version (and still its node).
    pub(crate) fn try_set(
        &mut self,
        value: F::Value,
        expected: F::Versioned,
        ctx: &mut Context<Self>,
    ) -> Reply<Result<bool, F::Error>> {
        if let Some(err) = &self.invalid {
            return Reply::Now(Err(self.fail(Failure::ZooKeeper(err.clone()))));
        }
        let (expected_value, expected_version, expected_czxid) = F::parts(&expected);
        if let Some(seen) = &self.seen {
            match &seen.content {
                Err(len) if seen.version == expected_version => {
                    return Reply::Now(Err(self.fail(Failure::NotOfFormat { len: *len })));
                }
                Ok(seen_value) if seen.version == expected_version && seen_value != expected_value => {
                    return Reply::Now(Ok(false));
                }
                // Another node than the one the value was read from: its versions mean nothing
                // for this one.
                _ if expected_czxid != 0 && expected_czxid != seen.czxid => return Reply::Now(Ok(false)),
                // Versions only grow (a re-created node is a reason to read again anyway).
                _ if expected_version < seen.version => return Reply::Now(Ok(false)),
                _ => {}
            }
        }
        let (tx, reply) = Reply::later(Err(self.fail(Failure::Stopped)));
        if let Some(waiting) = self.in_flight.get_mut(&expected_version) {
            waiting.push(tx);
            return reply;
        }
        self.in_flight.insert(expected_version, Vec::new());
        // The read follows the write in the same round trip; it is needed only if we lose.
        let set = self.shell.session().set_data(self.path(), F::encode(&value), Some(expected_version));
        let read = self.shell.session().get_data(self.path());
        let sent = async move {
            match set.await {
                Err(err @ Error::BadVersion { .. }) => (Err(err), Some(read.await)),
                outcome => (outcome, None),
            }
        };
        ctx.spawn(sent.into_actor(self).map(move |(outcome, read), act, ctx| {
            let answer = act.on_try_set(value, expected_czxid, outcome, read, ctx);
            debug!(parent: act.shell.span(), expected = expected_version, ?answer, "try set");
            let others = match &answer {
                // Only a request error that retrying cannot cure is theirs too.
                Err(Failure::ZooKeeper(err)) => Err(act.fail(Failure::ZooKeeper(err.clone()))),
                _ => Ok(false),
            };
            let answer = answer.map_err(|failure| act.fail(failure));
            for waiter in act.in_flight.remove(&expected_version).unwrap_or_default() {
                let _ = waiter.send(others.clone());
            }
            let _ = tx.send(answer);
        }));
        reply
    }

    /// Writes `value` whatever the node holds (creating it if missing).
    pub(crate) fn set(&mut self, value: F::Value, ctx: &mut Context<Self>) -> Reply<Result<F::Versioned, F::Error>> {
        if let Some(err) = &self.invalid {
            return Reply::Now(Err(self.fail(Failure::ZooKeeper(err.clone()))));
        }
        let (tx, reply) = Reply::later(Err(self.fail(Failure::Stopped)));
        let written = write_node(self.shell.session().clone(), self.path().to_owned(), F::encode(&value));
        ctx.spawn(written.into_actor(self).map(move |outcome, act, _| {
            let answer = match outcome {
                Ok(stat) => {
                    act.accept(Seen::new(&stat, Ok(value.clone())));
                    Ok(F::versioned(value, stat.version, stat.czxid))
                }
                Err(err) => Err(act.fail(Failure::of_write(err))),
            };
            debug!(parent: act.shell.span(), ?answer, "set");
            let _ = tx.send(answer);
        }));
        reply
    }
}

/// Sends every change to the recipient, the current value first if known.
impl<F: SharedFormat> Handler<crate::events::Subscribe<F::Event>> for SharedNode<F> {
    type Result = ();

    fn handle(&mut self, msg: crate::events::Subscribe<F::Event>, _: &mut Context<Self>) {
        if let Some(Seen { content: Ok(value), version, czxid, .. }) = &self.seen {
            msg.recipient.do_send(F::changed(value.clone(), *version, *czxid));
        }
        self.shell.subscribers().add(msg.recipient);
    }
}

/// Stops the actor. The node stays (a shared value outlives its users).
impl<F: SharedFormat> Handler<crate::stop::Stop> for SharedNode<F> {
    type Result = ();

    fn handle(&mut self, _: crate::stop::Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

/// Writes a shared node's handlers of its format's requests: the read `$get`, the
/// compare-and-set `$try_set` and the write `$set` (each also as a `Told`, for the writes).
macro_rules! answers_node_requests {
    ($node:ty: $get:ident, $try_set:ident, $set:ident => $versioned:ty, $error:ty) => {
        impl actix::Handler<$get> for $node {
            type Result = $crate::reply::Reply<Result<$versioned, $error>>;

            fn handle(&mut self, _: $get, ctx: &mut actix::Context<Self>) -> Self::Result {
                self.get(ctx)
            }
        }

        impl actix::Handler<$try_set> for $node {
            type Result = $crate::reply::Reply<Result<bool, $error>>;

            fn handle(&mut self, msg: $try_set, ctx: &mut actix::Context<Self>) -> Self::Result {
                self.try_set(msg.value, msg.expected, ctx)
            }
        }

        impl actix::Handler<$set> for $node {
            type Result = $crate::reply::Reply<Result<$versioned, $error>>;

            fn handle(&mut self, msg: $set, ctx: &mut actix::Context<Self>) -> Self::Result {
                self.set(msg.value, ctx)
            }
        }

        $crate::reply::handle_told!($node: $set, $try_set);
    };
}
pub(crate) use answers_node_requests;

/// Reads the node at `path`, leaving a watch for `watch`; creates it with `seed` first when
/// `create`, or when the read finds it missing (its parents as containers, like Curator's
/// `creatingParentContainersIfNeeded`). The first requests are sent before this returns.
fn read_node(
    session: SessionHandle,
    path: String,
    seed: Vec<u8>,
    watch: Option<Watcher>,
    create: bool,
) -> impl Future<Output = Result<NodeData, Error>> + 'static {
    let gone = Error::NoNode { path: path.clone() };
    let send = move |session: &SessionHandle, create: bool| {
        // The create goes first, so the read that follows it sees the node.
        let created = create.then(|| session.create(&path, seed.clone(), CreateMode::Persistent));
        let read = match &watch {
            Some(watcher) => futures::future::Either::Left(session.get_data_watched_by(&path, watcher)),
            None => futures::future::Either::Right(session.get_data(&path)),
        };
        (created, read, path.clone())
    };
    let mut next = Some(send(&session, create));
    async move {
        for _ in 0..ATTEMPTS {
            let Some((created, read, path)) = next.take() else { break };
            // A create refused for another reason (e.g. `NoAuth`: creating needs a right on the
            // parent that reading and writing the count do not) matters only if the node is
            // missing.
            let mut refused = None;
            if let Some(created) = created {
                match created.await {
                    Ok(_) | Err(Error::NodeExists { .. }) => {}
                    Err(Error::NoNode { .. }) => {
                        session.ensure_parent_containers(&path).await?;
                        next = Some(send(&session, true));
                        continue;
                    }
                    Err(err) => refused = Some(err),
                }
            }
            match (read.await, refused) {
                (Err(Error::NoNode { .. }), Some(refused)) => return Err(refused),
                (Err(Error::NoNode { .. }), None) => next = Some(send(&session, true)),
                (other, _) => return other,
            }
        }
        Err(gone)
    }
}

/// Writes `value` whatever the node holds, creating the node (and its parents) if missing. The
/// first request is sent before this returns.
fn write_node(
    session: SessionHandle,
    path: String,
    data: Vec<u8>,
) -> impl Future<Output = Result<Stat, Error>> + 'static {
    let first = session.set_data(&path, data.clone(), None);
    async move {
        let mut set = Some(first);
        for _ in 0..ATTEMPTS {
            let outcome = match set.take() {
                Some(first) => first.await,
                None => session.set_data(&path, data.clone(), None).await,
            };
            match outcome {
                Err(Error::NoNode { .. }) => {}
                other => return other,
            }
            match session.create(&path, data.clone(), CreateMode::Persistent).await {
                Ok(created) => return Ok(created.stat),
                Err(Error::NodeExists { .. }) => {}
                Err(Error::NoNode { .. }) => session.ensure_parent_containers(&path).await?,
                Err(err) => return Err(err),
            }
        }
        Err(Error::NoNode { path })
    }
}

impl<F: SharedFormat> Handler<crate::stop::AwaitStopped> for SharedNode<F> {
    type Result = ();

    fn handle(&mut self, waiter: crate::stop::AwaitStopped, _: &mut Context<Self>) {
        self.shell.await_stopped(waiter);
    }
}

impl<F: SharedFormat> crate::recipe::shell::OnShell for SharedNode<F> {
    type Event = F::Event;

    fn shell(&self) -> &Shell<F::Event> {
        &self.shell
    }

    fn shell_mut(&mut self) -> &mut Shell<F::Event> {
        &mut self.shell
    }
}

impl<F: SharedFormat> Actor for SharedNode<F> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let health = self.shell.health_slot(self.kind, &self.config.path);
        if let Err(err) = path::validate(&self.config.path, false) {
            health.set(RecipeState::Failed { reason: err.to_string() });
            warn!(parent: self.shell.span(), error = %err, "unusable path; every request will fail");
            self.invalid = Some(err);
            return;
        }
        self.shell.session().subscribe(ctx.address().recipient());
        self.refresh(true, ctx);
    }
}

impl<F: SharedFormat> Handler<WatchEvent> for SharedNode<F> {
    type Result = ();

    fn handle(&mut self, event: WatchEvent, ctx: &mut Context<Self>) {
        debug!(parent: self.shell.span(), kind = ?event.kind, generation = event.generation, "watch event");
        if event.generation < self.generation {
            return; // a watch of an ended session; the new session's read covers it
        }
        if event.kind == WatchEventKind::SessionEnded {
            // The next session's `Connected` reads again; reading now would wait for it anyway.
            self.watches_gone();
            return;
        }
        self.watches -= 1;
        self.set_fresh(false);
        // A deletion is handled by the read: it finds the node missing and creates it again.
        self.refresh(false, ctx);
    }
}

impl<F: SharedFormat> Handler<SessionEvent> for SharedNode<F> {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        match event {
            SessionEvent::Connected { generation, .. } => {
                let new_session = self.generation != 0 && generation > self.generation;
                self.generation = self.generation.max(generation);
                self.connected = true;
                if new_session {
                    info!(parent: self.shell.span(), generation, "new session; reading the value again");
                    self.watches_gone();
                }
                if !self.fresh {
                    self.refresh(false, ctx);
                }
            }
            SessionEvent::Reconnected { .. } => {
                // Changes made while we were away: the client sets our watches again with the
                // last zxid it saw, so the server fires them for such a change; read anyway.
                self.connected = true;
                self.refresh(false, ctx);
            }
            SessionEvent::Suspended { .. } => {
                self.connected = false;
                self.set_fresh(false);
            }
            SessionEvent::Expired { .. } | SessionEvent::Closed | SessionEvent::AuthFailed => {
                self.connected = false;
                self.watches_gone();
            }
        }
    }
}

impl<F: SharedFormat> Handler<Listen<F::Event>> for SharedNode<F> {
    type Result = ();

    fn handle(&mut self, msg: Listen<F::Event>, _: &mut Context<Self>) {
        self.shell.subscribers().listen(msg.listener);
    }
}
