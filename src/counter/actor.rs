//! [`SharedCount`]: one shared counter node, as an actor.
//!
//! Owns: creating the node with the seed, the watched copy of the count (what it is, whether it
//! is current), reading again after a watch fires, a reconnect or a new session, versioned and
//! unconditional writes, and telling subscribers. Does not own the session.
//!
//! Watching: a one-shot data watch, armed again by the read that follows each event. The client
//! library sets one-shot watches again after a reconnect with the last zxid it saw, so the server
//! fires them for a change made while we were away; on top of that the count is read again on
//! `Reconnected` and on every new session. (A persistent watch would need no re-arming, but after
//! a reconnect it is added again at a moment this actor cannot observe, and changes before that
//! are not reported: ZOOKEEPER-4698.)

use std::collections::HashMap;
use std::future::Future;

use actix::prelude::*;
use tracing::{debug, info, warn};

use super::config::SharedCountConfig;
use super::error::CounterError;
use super::format::{decode_count, encode_count};
use super::messages::*;
use crate::error::Error;
use crate::events::{Listen, Subscribers};
use crate::path;
use crate::reply::Reply;
use crate::retry::{Backoff, Verdict};
use crate::session::requests::{CreateMode, NodeData, Stat};
use crate::session::{SessionEvent, SessionHandle, WatchEvent, WatchEventKind};

/// How often a create/read (or set/create) round may find the node or its parent gone again
/// (someone deleting it concurrently) before giving up with `NoNode`.
const ATTEMPTS: usize = 5;

/// The node as last seen (by a read, or in the reply to our own write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    /// The count, or the length of data that is not one.
    content: Result<i32, usize>,
    version: i32,
    /// Which node (a re-created node has a new one).
    czxid: i64,
    /// Orders everything seen: every change of the node, its re-creation included, has a
    /// larger zxid than the one before.
    mzxid: i64,
}

impl Seen {
    fn new(stat: &Stat, content: Result<i32, usize>) -> Seen {
        Seen { content, version: stat.version, czxid: stat.czxid, mzxid: stat.mzxid }
    }

    fn answer(&self, path: &str) -> Result<VersionedCount, CounterError> {
        match self.content {
            Ok(value) => Ok(VersionedCount { value, version: self.version, czxid: self.czxid }),
            Err(len) => Err(CounterError::NotACount { path: path.to_owned(), len }),
        }
    }
}

type CountReply = crate::reply::Pending<Result<VersionedCount, CounterError>>;
type SetReply = crate::reply::Pending<Result<bool, CounterError>>;

/// One read of the node at a time; requests for another while it runs are merged into one.
#[derive(Default)]
struct Reader {
    busy: bool,
    /// The running read leaves a watch.
    watched: bool,
    /// Read again when this one is done.
    again: bool,
    /// Create the node (with the seed) before the next read.
    create: bool,
    /// `GetCount`s waiting for the next read (sent after they asked).
    queued: Vec<CountReply>,
}

/// One shared counter (Curator's `SharedCount`); see `docs/recipes/counter.md`.
///
/// On start it creates the node with the seed if it is missing, reads it and watches it. It
/// answers [`GetCount`] from that watched copy while the copy is current, and writes with
/// [`TrySetCount`] (compare-and-set on the node's version), [`SetCount`] and [`AddCount`].
/// Subscribers ([`Subscribe`]) get [`CountChanged`] for every change it learns of, in
/// version order, including changes made while it was disconnected or between two sessions.
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), Box<dyn std::error::Error>> {
/// use actix::Actor;
/// use actix_zookeeper::counter::{GetCount, SharedCount, SharedCountConfig, TrySetCount, add};
///
/// let count = SharedCount::new(session, SharedCountConfig::new("/stats/visits").with_seed(0)).start();
/// let now = count.send(GetCount).await??;
/// if !count.send(TrySetCount { value: now.value + 1, expected: now }).await?? {
///     // somebody else wrote first: read again and retry, or let `add` do that
/// }
/// let after = add(&count, 10).await?;
/// # Ok(()) }
/// ```
///
/// Stop it with [`Stop`] or by dropping every address of it.
pub struct SharedCount {
    session: SessionHandle,
    config: SharedCountConfig,
    /// Set when the path is unusable: every request fails with it, nothing is sent.
    invalid: Option<Error>,
    seen: Option<Seen>,
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
    reader: Reader,
    /// `TrySetCount`s in flight, by expected version, with the callers that asked for the same
    /// version meanwhile (they lose whatever happens: only one write at a version can apply).
    in_flight: HashMap<i32, Vec<SetReply>>,
    subscribers: Subscribers<CountChanged>,
    /// Delay before reading again after a failed read that no session event will follow.
    backoff: Backoff,
    span: tracing::Span,
}

impl SharedCount {
    /// A counter; start it with `.start()`.
    pub fn new(session: SessionHandle, config: SharedCountConfig) -> Self {
        let span = tracing::info_span!("zk.counter", path = %config.path);
        let backoff = session.retry_policy_or(config.retry).backoff();
        SharedCount {
            session,
            config,
            invalid: None,
            seen: None,
            fresh: false,
            watches: 0,
            connected: false,
            generation: 0,
            reader: Reader::default(),
            in_flight: HashMap::new(),
            subscribers: Subscribers::new(),
            backoff,
            span,
        }
    }

    fn path(&self) -> &str {
        &self.config.path
    }

    fn broadcast(&mut self, changed: CountChanged) {
        self.subscribers.tell(changed);
    }

    /// Takes in the node as seen in a read or a write's reply; keeps it if it is newer than
    /// what we have, and tells the subscribers about a new count.
    fn accept(&mut self, seen: Seen) {
        if self.seen.is_some_and(|known| known.mzxid >= seen.mzxid) {
            return;
        }
        self.seen = Some(seen);
        match seen.content {
            Ok(value) => {
                debug!(parent: &self.span, value, version = seen.version, "count changed");
                self.broadcast(CountChanged { value, version: seen.version, czxid: seen.czxid });
            }
            Err(len) => {
                warn!(parent: &self.span, len, version = seen.version, "the node does not hold a count");
            }
        }
    }

    fn accept_node(&mut self, node: &NodeData) {
        let content = decode_count(self.path(), &node.data).map_err(|_| node.data.len());
        self.accept(Seen::new(&node.stat, content));
    }

    fn current(&self) -> Result<VersionedCount, CounterError> {
        match &self.seen {
            Some(seen) => seen.answer(self.path()),
            // Only after a failed first read, whose error the callers already got.
            None => Err(CounterError::ZooKeeper(Error::NoNode { path: self.path().to_owned() })),
        }
    }

    /// Reads the node (creating it first with `create`), leaving a watch unless one is armed.
    /// While a read runs, a new one is queued to follow it: one read at a time, and every
    /// waiting `GetCount` is answered by a read sent after it asked.
    fn refresh(&mut self, create: bool, ctx: &mut Context<Self>) {
        if let Some(err) = &self.invalid {
            let err = CounterError::ZooKeeper(err.clone());
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
        let watch = if self.watches > 0 { None } else { Some(ctx.address().recipient()) };
        let create = std::mem::take(&mut self.reader.create);
        let waiters = std::mem::take(&mut self.reader.queued);
        self.reader = Reader { busy: true, watched: watch.is_some(), ..Reader::default() };
        let read = read_node(self.session.clone(), self.path().to_owned(), self.config.seed, watch, create);
        ctx.spawn(read.into_actor(self).map(move |outcome, act, ctx| act.on_read(outcome, waiters, ctx)));
    }

    fn on_read(&mut self, outcome: Result<NodeData, Error>, waiters: Vec<CountReply>, ctx: &mut Context<Self>) {
        let Reader { watched, again, .. } = self.reader;
        self.reader.busy = false;
        let answer = match outcome {
            Ok(node) => {
                if watched {
                    self.watches += 1;
                }
                self.backoff.reset();
                self.accept_node(&node);
                self.fresh = self.watches > 0 && self.connected && !again;
                self.current()
            }
            // The read was bound to a session that ended before it was answered (it waited
            // through an expiry): nothing was read, and the waiters wait on for the new
            // session's read, as the docs promise, instead of being told a session they never
            // chose is gone.
            Err(err @ Error::SessionLost { .. }) => {
                self.fresh = false;
                if let Verdict::RetryAfter(delay) = self.backoff.verdict(&err) {
                    debug!(parent: &self.span, "the read's session ended; reading on the next one");
                    self.reader.queued.extend(waiters);
                    ctx.run_later(delay, |act, ctx| {
                        if !act.reader.busy && (!act.reader.queued.is_empty() || !act.fresh) {
                            act.refresh(false, ctx);
                        }
                    });
                    return;
                }
                Err(CounterError::ZooKeeper(err))
            }
            Err(err) => {
                debug!(parent: &self.span, error = %err, "cannot read the count");
                self.fresh = false;
                // A reconnect or a new session reads again too; this covers a failure that no
                // session event follows. The waiters hear the error either way.
                if let Verdict::RetryAfter(delay) = self.backoff.verdict(&err) {
                    ctx.run_later(delay, |act, ctx| {
                        if !act.fresh && !act.reader.busy {
                            act.refresh(false, ctx);
                        }
                    });
                }
                Err(CounterError::ZooKeeper(err))
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
        self.fresh = false;
    }

    fn on_try_set(
        &mut self,
        msg: &TrySetCount,
        outcome: Result<Stat, Error>,
        read: Option<Result<NodeData, Error>>,
        ctx: &mut Context<Self>,
    ) -> Result<bool, CounterError> {
        match outcome {
            Ok(stat) => {
                self.accept(Seen::new(&stat, Ok(msg.value)));
                if msg.expected.czxid != 0 && stat.czxid != msg.expected.czxid {
                    warn!(parent: &self.span, "a compare-and-set reached a node created after its count was read");
                    return Err(CounterError::Recreated { path: self.path().to_owned() });
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
                info!(parent: &self.span, "the node is gone; creating it again with the seed");
                self.fresh = false;
                self.refresh(true, ctx);
                Ok(false)
            }
            Err(err) => Err(CounterError::of_write(self.path(), err)),
        }
    }
}

/// Reads the node at `path`, leaving a watch for `watch`; creates it with `seed` first when
/// `create`, or when the read finds it missing (its parents as containers, like Curator's
/// `creatingParentContainersIfNeeded`). The first requests are sent before this returns.
fn read_node(
    session: SessionHandle,
    path: String,
    seed: i32,
    watch: Option<Recipient<WatchEvent>>,
    create: bool,
) -> impl Future<Output = Result<NodeData, Error>> + 'static {
    let gone = Error::NoNode { path: path.clone() };
    let send = move |session: &SessionHandle, create: bool| {
        // The create goes first, so the read that follows it sees the node.
        let created = create.then(|| session.create(&path, encode_count(seed), CreateMode::Persistent));
        let read = match &watch {
            Some(watcher) => futures::future::Either::Left(session.get_data_watched(&path, watcher.clone())),
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
fn write_node(session: SessionHandle, path: String, value: i32) -> impl Future<Output = Result<Stat, Error>> + 'static {
    let data = encode_count(value);
    let first = session.set_data(&path, data, None);
    async move {
        let mut set = Some(first);
        for _ in 0..ATTEMPTS {
            let outcome = match set.take() {
                Some(first) => first.await,
                None => session.set_data(&path, data, None).await,
            };
            match outcome {
                Err(Error::NoNode { .. }) => {}
                other => return other,
            }
            match session.create(&path, data, CreateMode::Persistent).await {
                Ok(created) => return Ok(created.stat),
                Err(Error::NodeExists { .. }) => {}
                Err(Error::NoNode { .. }) => session.ensure_parent_containers(&path).await?,
                Err(err) => return Err(err),
            }
        }
        Err(Error::NoNode { path })
    }
}

impl Actor for SharedCount {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        if let Err(err) = path::validate(&self.config.path, false) {
            warn!(parent: &self.span, error = %err, "unusable counter path; every request will fail");
            self.invalid = Some(err);
            return;
        }
        self.session.subscribe(ctx.address().recipient());
        self.refresh(true, ctx);
    }
}

impl Handler<GetCount> for SharedCount {
    type Result = Reply<Result<VersionedCount, CounterError>>;

    fn handle(&mut self, _: GetCount, ctx: &mut Context<Self>) -> Self::Result {
        if let Some(err) = &self.invalid {
            return Reply::Now(Err(err.clone().into()));
        }
        if self.fresh {
            return Reply::Now(self.current());
        }
        let (tx, reply) = Reply::later(Err(CounterError::Stopped));
        self.reader.queued.push(tx);
        self.refresh(false, ctx);
        reply
    }
}

impl Handler<TrySetCount> for SharedCount {
    type Result = Reply<Result<bool, CounterError>>;

    fn handle(&mut self, msg: TrySetCount, ctx: &mut Context<Self>) -> Self::Result {
        if let Some(err) = &self.invalid {
            return Reply::Now(Err(err.clone().into()));
        }
        let expected = msg.expected;
        if let Some(seen) = self.seen {
            match seen.content {
                Err(len) if seen.version == expected.version => {
                    return Reply::Now(Err(CounterError::NotACount { path: self.path().to_owned(), len }));
                }
                Ok(value) if seen.version == expected.version && value != expected.value => {
                    return Reply::Now(Ok(false));
                }
                // Another node than the one the count was read from: its versions mean nothing
                // for this one.
                _ if expected.czxid != 0 && expected.czxid != seen.czxid => return Reply::Now(Ok(false)),
                // Versions only grow (a re-created node is a reason to read again anyway).
                _ if expected.version < seen.version => return Reply::Now(Ok(false)),
                _ => {}
            }
        }
        let (tx, reply) = Reply::later(Err(CounterError::Stopped));
        if let Some(waiting) = self.in_flight.get_mut(&expected.version) {
            waiting.push(tx);
            return reply;
        }
        self.in_flight.insert(expected.version, Vec::new());
        // The read follows the write in the same round trip; it is needed only if we lose.
        let set = self.session.set_data(self.path(), encode_count(msg.value), Some(expected.version));
        let read = self.session.get_data(self.path());
        let sent = async move {
            match set.await {
                Err(err @ Error::BadVersion { .. }) => (Err(err), Some(read.await)),
                outcome => (outcome, None),
            }
        };
        ctx.spawn(sent.into_actor(self).map(move |(outcome, read), act, ctx| {
            let answer = act.on_try_set(&msg, outcome, read, ctx);
            debug!(parent: &act.span, value = msg.value, expected = expected.version, ?answer, "try set");
            let others = match &answer {
                // Only a request error that retrying cannot cure is theirs too.
                Err(CounterError::ZooKeeper(err)) => Err(CounterError::ZooKeeper(err.clone())),
                _ => Ok(false),
            };
            for waiter in act.in_flight.remove(&expected.version).unwrap_or_default() {
                let _ = waiter.send(others.clone());
            }
            let _ = tx.send(answer);
        }));
        reply
    }
}

impl Handler<SetCount> for SharedCount {
    type Result = Reply<Result<VersionedCount, CounterError>>;

    fn handle(&mut self, msg: SetCount, ctx: &mut Context<Self>) -> Self::Result {
        if let Some(err) = &self.invalid {
            return Reply::Now(Err(err.clone().into()));
        }
        let (tx, reply) = Reply::later(Err(CounterError::Stopped));
        let written = write_node(self.session.clone(), self.path().to_owned(), msg.value);
        ctx.spawn(written.into_actor(self).map(move |outcome, act, _| {
            let answer = match outcome {
                Ok(stat) => {
                    act.accept(Seen::new(&stat, Ok(msg.value)));
                    Ok(VersionedCount { value: msg.value, version: stat.version, czxid: stat.czxid })
                }
                Err(err) => Err(CounterError::of_write(act.path(), err)),
            };
            debug!(parent: &act.span, value = msg.value, ?answer, "set");
            let _ = tx.send(answer);
        }));
        reply
    }
}

impl Handler<AddCount> for SharedCount {
    type Result = ResponseFuture<Result<VersionedCount, CounterError>>;

    fn handle(&mut self, msg: AddCount, ctx: &mut Context<Self>) -> Self::Result {
        let me = ctx.address();
        let path = self.path().to_owned();
        Box::pin(async move {
            loop {
                let current = me.send(GetCount).await.map_err(|_| CounterError::Stopped)??;
                let value = current.value.checked_add(msg.by).ok_or_else(|| CounterError::Overflow {
                    path: path.clone(),
                    value: current.value,
                    by: msg.by,
                })?;
                let set = TrySetCount { value, expected: current };
                if me.send(set).await.map_err(|_| CounterError::Stopped)?? {
                    // A versioned write that applies moves the version by exactly one.
                    return Ok(VersionedCount {
                        value,
                        version: current.version.wrapping_add(1),
                        czxid: current.czxid,
                    });
                }
            }
        })
    }
}

impl Handler<Subscribe> for SharedCount {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) {
        if let Some(Seen { content: Ok(value), version, czxid, .. }) = self.seen {
            msg.recipient.do_send(CountChanged { value, version, czxid });
        }
        self.subscribers.add(msg.recipient);
    }
}

impl Handler<Stop> for SharedCount {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

impl Handler<WatchEvent> for SharedCount {
    type Result = ();

    fn handle(&mut self, event: WatchEvent, ctx: &mut Context<Self>) {
        debug!(parent: &self.span, kind = ?event.kind, generation = event.generation, "watch event");
        if event.generation < self.generation {
            return; // a watch of an ended session; the new session's read covers it
        }
        if event.kind == WatchEventKind::SessionEnded {
            // The next session's `Connected` reads again; reading now would wait for it anyway.
            self.watches_gone();
            return;
        }
        self.watches -= 1;
        self.fresh = false;
        // A deletion is handled by the read: it finds the node missing and creates it again.
        self.refresh(false, ctx);
    }
}

impl Handler<SessionEvent> for SharedCount {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        match event {
            SessionEvent::Connected { generation, .. } => {
                let new_session = self.generation != 0 && generation > self.generation;
                self.generation = self.generation.max(generation);
                self.connected = true;
                if new_session {
                    info!(parent: &self.span, generation, "new session; reading the count again");
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
                self.fresh = false;
            }
            SessionEvent::Expired { .. } | SessionEvent::Closed | SessionEvent::AuthFailed => {
                self.connected = false;
                self.watches_gone();
            }
        }
    }
}

/// Adds `by` to the count of `counter` ([`AddCount`]); a stopped actor is
/// [`CounterError::Stopped`].
///
/// # Cancel safety
/// The add is sent when this is called: dropping the future does not withdraw it, and it applies
/// once. (A raw `counter.send(AddCount { .. })` dropped before the actor took it is skipped by
/// actix.)
pub fn add(
    counter: &Addr<SharedCount>,
    by: i32,
) -> impl Future<Output = Result<VersionedCount, CounterError>> + 'static + use<> {
    let told = crate::reply::tell(counter, AddCount { by }, CounterError::Stopped);
    async move { told.await? }
}

crate::reply::handle_told!(SharedCount: AddCount, SetCount, TrySetCount);

impl Handler<Listen<CountChanged>> for SharedCount {
    type Result = ();

    fn handle(&mut self, msg: Listen<CountChanged>, _: &mut Context<Self>) {
        self.subscribers.listen(msg.listener);
    }
}
