//! [`QueueConsumerActor`]: consumes a queue and feeds a pool of worker actors.
//!
//! Owns: claiming items (at-least-once) or taking them (at-most-once), the in-flight set and
//! its limit (`concurrency`), delivering to workers, settling acks and nacks, dead letters, and
//! revoking deliveries whose session ended. Does not own the producer side ([`Queue`]).
//!
//! At-least-once, per item: `create <queue>/claims/<item>` (ephemeral) ‖ `getData <item>` — one
//! round trip, one write; on `Ack`: `multi(delete claim, delete item)` — one round trip, one
//! write. The claim is the fence: a consumer whose session ended has lost its claims with it,
//! so its late ack fails and changes nothing. Nack: `multi(delete claim, setData item)` bumps
//! the item's version, which counts attempts; past `max_attempts` the item moves to the
//! dead-letter path in one `multi`.
//!
//! [`Queue`]: super::Queue

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use actix::prelude::*;
use futures::channel::oneshot;
use tracing::{debug, info, warn};

use super::QueueError;
use super::config::{ConsumerConfig, DeliveryMode};
use super::messages::{Delivery, Outcome, Released, Revoked, Settle, SettleAnswering, Stop, WaitIdle};
use super::{item, plan};
use crate::error::Error;
use crate::metrics;
use crate::path;
use crate::recipe::FencingToken;
use crate::recipe::guarded::{FencedDelete, delete_fenced, delete_own_ephemeral_holding};
use crate::reply::{Answer, Pending, Reply};
use crate::retry::{Attempted, Backoff, RetryPolicy, Verdict, again_later, retried};
use crate::session::requests::{CreateMode, NodeData, Op};
use crate::session::{PinnedSession, SessionEvent, SessionHandle, WatchEvent, WatchEventKind};

/// A plan remembers this many items per in-flight slot (at least `PLAN_MIN`): enough that
/// listings are rare, few enough that memory does not follow the backlog, and that the oldest
/// items are worked on first. A consumer starts at a random place in its plan (measured: a
/// window of 4 × concurrency made consumers collide twice as often, at half the rate), except
/// one of concurrency 1, which keeps strict queue order.
const PLAN_PER_SLOT: usize = 16;
const PLAN_MIN: usize = 1024;
/// Claims in a row that found their item taken or gone before the plan is dropped.
const MISSES_BEFORE_RELIST: usize = 8;

/// How often deliveries held by stopped workers are looked for.
const WORKER_SWEEP: Duration = Duration::from_millis(500);

/// Stops consuming: claimed items go back to the queue at once, workers get [`Revoked`].
impl Handler<Stop> for QueueConsumerActor {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        info!(parent: &self.span, in_flight = self.in_flight.len(), "stopping");
        ctx.stop();
    }
}

/// A release running detached, as the consumer remembers it.
type Release = futures::future::Shared<futures::future::LocalBoxFuture<'static, ()>>;

struct InFlight {
    /// `None` in at-most-once mode (the item is already gone).
    claim: Option<String>,
    data: Vec<u8>,
    version: i32,
    /// The session the claim was made on: its settlement goes to that session or nowhere.
    generation: u64,
    /// The claim's czxid: which claim on this item is ours.
    token: FencingToken,
    worker: usize,
    /// A settlement is under way: a second one is refused, not sent.
    settling: bool,
}

/// Consumes one queue and feeds a pool of workers; see `docs/recipes/queue.md`.
///
/// It runs until sent [`Stop`], or until its last address is dropped (deliveries out with
/// workers hold one), like every recipe actor; stopping gives claimed items back at once.
pub struct QueueConsumerActor {
    session: SessionHandle,
    config: ConsumerConfig,
    in_flight: HashMap<String, InFlight>,
    /// Items whose claim (or take) is in flight.
    claiming: HashSet<String>,
    /// Items whose claim of ours is being given back after a claim that went wrong: not claimed
    /// again until that is done. The release of a claim whose create had an unknown outcome
    /// deletes "the claim holding our id on our session", which a second claim of ours would
    /// also be: claimed again meanwhile (a `Reconnected` fills), the release deleted the new
    /// claim under its delivery, and the item went to another consumer while being worked on.
    releasing: HashSet<String>,
    /// Items to try next, from the last listing (see `plan.rs`).
    candidates: VecDeque<String>,
    /// Claims in a row that found their item taken or gone.
    misses: usize,
    /// A listing is in flight; `relist` asks for another one when it returns.
    listing: bool,
    /// A listing has returned on the current session (idle means something only after one).
    listed: bool,
    /// Releases running detached (claims given back), which a stop waits for.
    releases: Vec<Release>,
    /// Set to `true` once the consumer has stopped and every claim it held is given back.
    released: Option<tokio::sync::watch::Sender<bool>>,
    /// Callers waiting until the consumer is idle ([`WaitIdle`]).
    idle_waiters: Vec<Pending<Result<(), QueueError>>>,
    relist: bool,
    /// The timer that lists again when the first item not yet due is due, and when.
    wake: Option<(u64, SpawnHandle)>,
    generation: u64,
    next_worker: usize,
    /// Malformed names already reported (so a foreign node is logged once, not on every listing).
    reported: HashSet<String>,
    /// Items that cannot be read (a final error such as `NoAuth`): reported once and skipped,
    /// never taken or claimed again by this consumer, so one bad item never blocks the rest.
    set_aside: HashSet<String>,
    /// Deliveries revoked by a session's end (item and token), so that their late settlement
    /// says so.
    revoked: HashSet<(String, FencingToken)>,
    /// Settlements waiting to go out together in one `multi`.
    settling: Vec<PendingSettle>,
    flush_scheduled: bool,
    /// The config's policy, else the session's.
    retry: RetryPolicy,
    /// Delay before the next retry of a failed listing, claim or take; reset by a listing.
    backoff: Backoff,
    /// Its slot on the session's health board: items in flight (`None` once left as failed).
    health: Option<crate::session::health::HealthSlot>,
    /// Where a handle keeps the failed entry (see `HealthSlot::keep_failed`); `None` for an
    /// actor started by hand.
    failure: Option<crate::session::health::FailureKeeper>,
    span: tracing::Span,
    /// Dropped with the actor: tells whoever awaits its end (a handle's `stop()`).
    lifeline: crate::stop::Lifeline,
}

impl QueueConsumerActor {
    /// A consumer; start it with `.start()`. It begins once the session is up.
    pub fn new(session: SessionHandle, config: ConsumerConfig) -> Self {
        let span = tracing::info_span!("zk.queue", queue = %config.queue, consumer = %config.consumer_id);
        let retry = session.retry_policy_or(config.retry);
        let health = Some(session.health_board().slot("queue-consumer", &config.queue));
        QueueConsumerActor {
            lifeline: Default::default(),
            health,
            failure: None,
            session,
            config,
            in_flight: HashMap::new(),
            claiming: HashSet::new(),
            releasing: HashSet::new(),
            candidates: VecDeque::new(),
            misses: 0,
            listing: false,
            listed: false,
            idle_waiters: Vec::new(),
            releases: Vec::new(),
            released: Some(tokio::sync::watch::channel(false).0),
            relist: false,
            wake: None,
            generation: 0,
            next_worker: 0,
            reported: HashSet::new(),
            set_aside: HashSet::new(),
            revoked: HashSet::new(),
            settling: Vec::new(),
            flush_scheduled: false,
            retry,
            backoff: retry.backoff(),
            span,
        }
    }

    /// Keeps a failed entry with the handle's `keeper` (see `HealthSlot::keep_failed`).
    pub(crate) fn with_failure_keeper(mut self, keeper: crate::session::health::FailureKeeper) -> Self {
        self.failure = Some(keeper);
        self
    }

    /// Turns `true` once this consumer has stopped and every claim it held is given back.
    pub(crate) fn released(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.released.as_ref().map(tokio::sync::watch::Sender::subscribe)
    }

    fn item_path(&self, id: &str) -> String {
        path::join(&self.config.queue, id)
    }

    fn free(&self) -> usize {
        // A claim being given back still takes its slot: a consumer of concurrency 1 takes the
        // next item only once the one before is settled or given back (strict order).
        self.config.limit().saturating_sub(self.in_flight.len() + self.claiming.len() + self.releasing.len())
    }

    /// Runs a release on a detached task (it outlives a stop: a future in the context is
    /// dropped, and a request nobody awaits is never sent), remembered so that a stop waits for
    /// it ([`QueueConsumerHandle::stop`](super::QueueConsumerHandle::stop) resolves once every
    /// claim is given back). Resolves when it is done.
    fn detached<T: 'static>(
        &mut self,
        release: impl std::future::Future<Output = T> + 'static,
    ) -> impl std::future::Future<Output = ()> + 'static {
        let running = actix::spawn(release);
        let done: Release = futures::future::FutureExt::shared(Box::pin(async move {
            let _ = running.await;
        })
            as futures::future::LocalBoxFuture<'static, ()>);
        // Driven on its own too, so that it completes (and is forgotten) even if nobody awaits it.
        actix::spawn(done.clone());
        self.releases.retain(|release| release.peek().is_none());
        self.releases.push(done.clone());
        done
    }

    /// Looks for work: claims the next items of the plan while there is room, and lists the
    /// queue again only once the plan is used up.
    fn fill(&mut self, ctx: &mut Context<Self>) {
        // Stopping: messages already in the mailbox are still handled, but claim nothing more.
        if self.generation == 0 || ctx.state().stopping() {
            return;
        }
        self.claim_candidates(ctx);
        if self.free() > 0 && self.candidates.is_empty() {
            self.list(ctx);
        }
        self.answer_if_idle();
    }

    /// Idle: nothing delivered, claimed, given back or being settled, and the latest listing of the queue
    /// (on the current session) found nothing this consumer could claim.
    fn is_idle(&self) -> bool {
        self.generation != 0
            && self.listed
            && !self.listing
            && self.in_flight.is_empty()
            && self.claiming.is_empty()
            && self.releasing.is_empty()
            && self.candidates.is_empty()
            && self.settling.is_empty()
    }

    fn answer_if_idle(&mut self) {
        if !self.idle_waiters.is_empty() && self.is_idle() {
            debug!(parent: &self.span, waiters = self.idle_waiters.len(), "idle");
            for waiter in self.idle_waiters.drain(..) {
                let _ = waiter.send(Ok(()));
            }
        }
    }

    /// Lists the queue (with a watch, so an empty queue costs nothing until an item arrives) and
    /// the claims, makes a new plan from them, and claims what fits. A listing that finds
    /// nothing to claim waits for its watch: it never lists again by itself.
    fn list(&mut self, ctx: &mut Context<Self>) {
        if self.listing {
            self.relist = true;
            return;
        }
        self.listing = true;
        let items = self.session.children_watched(&self.config.queue, ctx.address().recipient());
        let claims = match self.config.mode {
            DeliveryMode::AtLeastOnce => Some(self.session.children(&self.config.claims())),
            DeliveryMode::AtMostOnce => None,
        };
        let both = async move {
            let claims = match claims {
                Some(claims) => claims.await.map(|c| c.names),
                None => Ok(Vec::new()),
            };
            (items.await, claims)
        };
        ctx.spawn(both.into_actor(self).map(|(items, claims), act, ctx| {
            act.listing = false;
            match items {
                Ok(children) => {
                    act.listed = true;
                    act.backoff.reset();
                    let claimed: HashSet<String> = claims.unwrap_or_default().into_iter().collect();
                    act.report_strays(&children.names);
                    let listed: HashSet<&String> = children.names.iter().collect();
                    act.set_aside.retain(|id| listed.contains(id));
                    let plan = act.plan(children.names, &claimed);
                    act.candidates = plan.candidates;
                    act.wake_when_due(plan.next_due_ms, ctx);
                    if plan.held_elsewhere {
                        // Items held by other consumers come back when their claims go: watch
                        // the claims.
                        let watch = act.session.children_watched(&act.config.claims(), ctx.address().recipient());
                        ctx.spawn(watch.into_actor(act).map(|_, _, _| ()));
                    }
                    if std::mem::take(&mut act.relist) {
                        act.fill(ctx);
                    } else {
                        act.claim_candidates(ctx);
                        act.answer_if_idle();
                    }
                }
                Err(Error::NoNode { .. }) => {
                    // No queue yet: create it so that the watch has something to watch.
                    let ensure = act.session.ensure_path(&act.config.queue);
                    ctx.spawn(ensure.into_actor(act).map(|_, act, ctx| act.fill(ctx)));
                }
                Err(err) => {
                    // What the last listing found is no longer known to be all there is.
                    act.listed = false;
                    debug!(parent: &act.span, error = %err, "listing failed");
                    if let Err(err) = again_later(&mut act.backoff, err, ctx, |act: &mut Self, ctx| act.fill(ctx)) {
                        act.give_up(err, ctx);
                    }
                }
            }
        }));
    }

    /// Lists again when the first item not yet due is due: no listing in between (a new item
    /// fires the queue's watch), and one timer at a time, for the earliest due time seen.
    fn wake_when_due(&mut self, next_due_ms: Option<u64>, ctx: &mut Context<Self>) {
        let Some(due) = next_due_ms else { return };
        if self.wake.as_ref().is_some_and(|(at, _)| *at <= due) {
            return;
        }
        if let Some((_, timer)) = self.wake.take() {
            ctx.cancel_future(timer);
        }
        let after = std::time::Duration::from_millis(due.saturating_sub(item::now_ms()));
        debug!(parent: &self.span, ?after, "the next item is not due yet; listing again then");
        let timer = ctx.run_later(after, |act, ctx| {
            act.wake = None;
            // The guards of `fill` (a session, not stopping), but a listing even with candidates
            // left: the item now due may go before them.
            if act.generation != 0 && !ctx.state().stopping() {
                act.list(ctx);
            }
        });
        self.wake = Some((due, timer));
    }

    /// Claims from the plan without listing again (right after a listing).
    fn claim_candidates(&mut self, ctx: &mut Context<Self>) {
        while self.free() > 0 {
            let Some(id) = self.candidates.pop_front() else { break };
            if !self.in_flight.contains_key(&id)
                && !self.claiming.contains(&id)
                && !self.releasing.contains(&id)
                && !self.set_aside.contains(&id)
            {
                self.claim(id, ctx);
            }
        }
    }

    /// The plan for a listing: this consumer's share of the oldest items.
    fn plan(&mut self, names: Vec<String>, claimed: &HashSet<String>) -> plan::Plan {
        use std::hash::{BuildHasher, Hasher};
        let limit = self.config.limit();
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write(self.config.consumer_id.as_bytes());
        let keep = (limit * PLAN_PER_SLOT).max(PLAN_MIN);
        // A consumer that works on one item at a time keeps strict queue order.
        let spread = if limit > 1 { keep } else { 1 };
        let shape = plan::Shape { keep, spread, offset: hasher.finish(), now_ms: item::now_ms() };
        let (in_flight, claiming) = (&self.in_flight, &self.claiming);
        plan::plan(names, claimed, |id| in_flight.contains_key(id) || claiming.contains(id), shape)
    }

    /// Foreign nodes in the queue directory are reported once and skipped.
    fn report_strays(&mut self, names: &[String]) {
        for name in names {
            let is_item = item::parse(name).is_some();
            if !is_item && name != "claims" && self.reported.insert(name.clone()) {
                warn!(parent: &self.span, node = %name, "not a queue item (expected qn-<10 digits>, see docs/recipes/queue.md); skipping it");
            }
        }
    }

    fn claim(&mut self, id: String, ctx: &mut Context<Self>) {
        self.claiming.insert(id.clone());
        let item = self.item_path(&id);
        let generation = self.generation;
        match self.config.mode {
            DeliveryMode::AtLeastOnce => {
                // Claim and read in one round trip: the session sends both before either returns.
                let claim_path = path::join(&self.config.claims(), &id);
                // Pinned: a claim is made for this session; if it has ended, none is made.
                let pinned = self.session.pinned(generation);
                let create = pinned.create(&claim_path, self.config.consumer_id.clone(), CreateMode::Ephemeral);
                let read = self.session.get_data(&item);
                let both = async move { (create.await, read.await) };
                ctx.spawn(both.into_actor(self).map(move |(created, read), act, ctx| {
                    act.claiming.remove(&id);
                    if act.generation != generation {
                        // The session ended meanwhile, and a claim made on it (the create was
                        // pinned to it) went with it.
                        return;
                    }
                    match (created, read) {
                        (Ok(claim), Ok(node)) => {
                            act.deliver(id, Some(claim_path), node, FencingToken(claim.stat.czxid), ctx)
                        }
                        (Ok(claim), Err(error)) => {
                            // Finished by someone else meanwhile, or unreadable now: give the claim
                            // back (through connection loss too: a claim we forget about would
                            // block the item for as long as our session lives). We made it on
                            // this session a moment ago, so its version is the one to delete.
                            if error.is_final() {
                                act.set_item_aside(&id, &error);
                            } else {
                                act.missed();
                            }
                            let first = pinned.delete(&claim_path, Some(claim.stat.version));
                            let release = async move {
                                if first.await.is_err() {
                                    let _ = delete_fenced(pinned, claim_path, claim.stat.czxid).await;
                                }
                            };
                            act.releasing.insert(id.clone());
                            let release = act.detached(release);
                            ctx.spawn(release.into_actor(act).map(move |_, act, ctx| {
                                act.releasing.remove(&id);
                                act.fill(ctx)
                            }));
                        }
                        (Err(Error::NodeExists { .. }), _) => {
                            act.missed();
                            act.fill(ctx);
                        }
                        (Err(Error::NoNode { .. }), _) => {
                            // No claims directory yet: the item is still to be tried first.
                            act.candidates.push_front(id);
                            let ensure = act.session.ensure_path(&act.config.claims());
                            ctx.spawn(ensure.into_actor(act).map(|_, act, ctx| act.fill(ctx)));
                        }
                        (Err(err), _) if err.is_final() => act.give_up(err, ctx),
                        (Err(err), _) => {
                            // The create may have happened: if the claim is ours, give it back.
                            debug!(parent: &act.span, %id, error = %err, "claim outcome unknown; checking");
                            // Ours only if it holds our id: another consumer on this session
                            // may have claimed the item meanwhile.
                            let ours = Some(act.config.consumer_id.clone().into_bytes());
                            let release = act.detached(delete_own_ephemeral_holding(pinned, claim_path, ours));
                            let verdict = act.backoff.verdict(&err);
                            act.releasing.insert(id.clone());
                            ctx.spawn(release.into_actor(act).map(move |_, act, ctx| {
                                // Still to be tried first, now that no claim of ours is on it.
                                act.releasing.remove(&id);
                                act.candidates.push_front(id);
                                match verdict {
                                    Verdict::RetryAfter(delay) => {
                                        ctx.run_later(delay, |act, ctx| act.fill(ctx));
                                    }
                                    Verdict::GiveUp => act.give_up(err, ctx),
                                }
                            }));
                        }
                    }
                }));
            }
            DeliveryMode::AtMostOnce => {
                // Read, then delete at the version read: whoever's delete succeeds has the item.
                // Never the delete without a successful read, or an item nobody could read
                // would be gone without a delivery.
                let session = self.session.clone();
                let take = async move {
                    let node = session.get_data(&item).await?;
                    session.delete(&item, Some(node.stat.version)).await.map(|()| node)
                };
                ctx.spawn(take.into_actor(self).map(move |taken, act, ctx| {
                    act.claiming.remove(&id);
                    match taken {
                        Ok(node) => {
                            let token = FencingToken(node.stat.mzxid);
                            act.deliver(id, None, node, token, ctx)
                        }
                        // Someone else took it first.
                        Err(Error::NoNode { .. } | Error::BadVersion { .. }) => act.fill(ctx),
                        Err(error) if error.is_final() => {
                            act.set_item_aside(&id, &error);
                            act.fill(ctx);
                        }
                        Err(error) => {
                            debug!(parent: &act.span, %id, %error, "take failed");
                            act.candidates.push_front(id);
                            if let Err(error) =
                                again_later(&mut act.backoff, error, ctx, |act: &mut Self, ctx| act.fill(ctx))
                            {
                                act.give_up(error, ctx);
                            }
                        }
                    }
                }));
            }
        }
    }

    /// One item this consumer cannot read: report it once and skip it from now on (it stays
    /// in the queue for an operator or a consumer that may read it).
    fn set_item_aside(&mut self, id: &str, error: &Error) {
        if self.set_aside.insert(id.to_owned()) {
            tracing::error!(parent: &self.span, %id, %error, "cannot read this item; leaving it in the queue and skipping it");
        }
    }

    /// A claim found its item taken or finished by another consumer. A few in a row mean this
    /// consumer has caught up with another one's part of the plan: list again (a fresh plan,
    /// from a new place) rather than walk through items that are gone.
    fn missed(&mut self) {
        self.misses += 1;
        if self.misses >= MISSES_BEFORE_RELIST {
            self.misses = 0;
            self.candidates.clear();
        }
    }

    fn deliver(
        &mut self,
        id: String,
        claim: Option<String>,
        node: NodeData,
        token: FencingToken,
        ctx: &mut Context<Self>,
    ) {
        let workers = self.config.workers.len();
        let Some(worker) = (0..workers)
            .map(|i| (self.next_worker + i) % workers)
            .find(|&w| self.config.workers[w].deliver.connected())
        else {
            warn!(parent: &self.span, %id, "no worker is running; giving the item back");
            self.give_back(id, claim, token);
            return;
        };
        self.next_worker = worker + 1;
        self.misses = 0;
        let attempt = u32::try_from(node.stat.version).unwrap_or(0) + 1;
        debug!(parent: &self.span, %id, attempt, %token, worker, "delivering");
        let delivery = Delivery {
            id: id.clone(),
            data: node.data.clone(),
            attempt,
            token,
            settle: ctx.address().downgrade().recipient::<SettleAnswering>(),
        };
        self.in_flight.insert(
            id,
            InFlight {
                claim,
                data: node.data,
                version: node.stat.version,
                generation: self.generation,
                token,
                worker,
                settling: false,
            },
        );
        self.config.workers[worker].deliver.do_send(delivery);
        metrics::queue("delivered", &self.config.queue, 1);
        if attempt > 1 {
            metrics::queue("redelivered", &self.config.queue, 1);
        }
        self.count_in_flight();
        self.fill(ctx);
    }

    /// Tells the metrics and the health board how many items are in flight.
    fn count_in_flight(&mut self) {
        metrics::queue_in_flight(&self.config.queue, self.in_flight.len());
        if let Some(health) = self.health.as_mut() {
            health.set(crate::session::health::RecipeState::Consuming { in_flight: self.in_flight.len() });
        }
    }

    /// Releases a claim without counting an attempt.
    fn give_back(&mut self, id: String, claim: Option<String>, token: FencingToken) {
        if let Some(claim) = claim {
            // Runs on its own; the stop waits for it.
            drop(self.detached(delete_fenced(self.session.pinned(self.generation), claim, token.0)));
        } else {
            warn!(parent: &self.span, %id, "at-most-once item could not be delivered and is lost");
        }
    }

    /// The operations that settle `id` as `outcome`, and what they do to the item (its metric's
    /// event: `acked`, `nacked` or `dead_lettered`).
    fn settle_ops(&self, id: &str, flight: &InFlight, outcome: &Outcome) -> (Vec<Op>, &'static str) {
        let Some(claim) = flight.claim.clone() else { return (Vec::new(), "acked") };
        let item = self.item_path(id);
        let mut ops = vec![Op::Delete { path: claim, version: None }];
        let attempt = u32::try_from(flight.version).unwrap_or(0) + 1;
        let fate = match outcome {
            Outcome::Ack => Fate::Removed,
            Outcome::Nack if self.config.max_attempts.is_some_and(|max| attempt >= max) => Fate::DeadLettered,
            Outcome::Nack => Fate::Retried,
            // A worker's call: at once, whatever the attempt count.
            Outcome::DeadLetter { .. } => Fate::DeadLettered,
        };
        let event = match fate {
            Fate::Removed => {
                ops.push(Op::Delete { path: item, version: None });
                "acked"
            }
            Fate::DeadLettered => {
                if let Some(dead) = &self.config.dead_letter {
                    // A new sequence number in the dead-letter queue: two queues may share one
                    // dead-letter path, and their item names collide.
                    ops.push(Op::Create {
                        path: path::join(dead, super::ITEM_PREFIX),
                        data: flight.data.clone(),
                        mode: CreateMode::PersistentSequential,
                    });
                }
                ops.push(Op::Delete { path: item, version: None });
                "dead_lettered"
            }
            // Rewriting the same data bumps the version, which counts the attempts.
            Fate::Retried => {
                ops.push(Op::SetData { path: item, data: flight.data.clone(), version: Some(flight.version) });
                "nacked"
            }
        };
        (ops, event)
    }

    /// Workers that stopped without settling: their items count as failed attempts.
    /// A final error (no permission, a bad path): retrying cannot help. The consumer stops
    /// (claimed items go back, workers hear `Revoked`) rather than ask again forever.
    fn give_up(&mut self, error: Error, ctx: &mut Context<Self>) {
        tracing::error!(parent: &self.span, %error, "cannot consume this queue; stopping");
        if let Some(health) = self.health.take() {
            health.keep_failed(error.to_string(), self.failure.as_ref());
        }
        ctx.stop();
    }

    fn sweep_workers(&mut self, ctx: &mut Context<Self>) {
        // A settlement that ended without a `fill` after it leaves the consumer idle unseen.
        self.answer_if_idle();
        // The lifetime rule: the sweep's own timer must not keep a consumer alive whose last
        // address is gone (deliveries out with workers hold it only weakly: a busy consumer
        // whose user let go must stop too, not consume the whole queue first).
        if !ctx.connected() {
            info!(parent: &self.span, "the last address of the consumer was dropped; stopping");
            ctx.stop();
            return;
        }
        let orphaned: Vec<(String, FencingToken)> = self
            .in_flight
            .iter()
            .filter(|(_, f)| !f.settling && !self.config.workers[f.worker].deliver.connected())
            .map(|(id, f)| (id.clone(), f.token))
            .collect();
        for (id, token) in orphaned {
            info!(parent: &self.span, %id, "its worker stopped; the item will be delivered again");
            let me = ctx.address();
            ctx.spawn(
                async move { me.send(Settle { id, token, outcome: Outcome::Nack }).await }
                    .into_actor(self)
                    .map(|_, _, _| ()),
            );
        }
    }

    fn revoke_all(&mut self) {
        const REMEMBERED: usize = 10_000;
        if self.revoked.len() > REMEMBERED {
            self.revoked.clear();
        }
        for (id, flight) in self.in_flight.drain() {
            self.revoked.insert((id.clone(), flight.token));
            self.config.workers[flight.worker].revoke.do_send(Revoked { id, token: flight.token });
        }
        self.count_in_flight();
        self.claiming.clear();
        self.candidates.clear();
        self.listing = false;
        self.listed = false;
    }
}

crate::stop::keeps_a_lifeline!(QueueConsumerActor);

impl Actor for QueueConsumerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(1024);
        self.count_in_flight();
        // Workers the config describes by a factory start with the consumer, on its Arbiter.
        self.config.start_workers();
        self.session.subscribe(ctx.address().recipient());
        ctx.run_interval(WORKER_SWEEP, |act, ctx| act.sweep_workers(ctx));
        if let Some(dead) = self.config.dead_letter.clone() {
            let ensure = self.session.ensure_path(&dead);
            ctx.spawn(ensure.into_actor(self).map(|ensured, act, _| {
                if let Err(error) = ensured {
                    warn!(parent: &act.span, %error, "cannot create the dead-letter path");
                }
            }));
        }
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        // Give claimed items back at once rather than when the session ends. Detached: futures
        // of a stopped actor are dropped, and a dropped request is never handled by the session.
        let mut releases: Vec<futures::future::LocalBoxFuture<'static, ()>> = Vec::new();
        for (id, flight) in self.in_flight.drain() {
            if let Some(claim) = flight.claim {
                let deleted = delete_fenced(self.session.pinned(flight.generation), claim, flight.token.0);
                releases.push(Box::pin(async move {
                    let _ = deleted.await;
                }));
            }
            self.config.workers[flight.worker].revoke.do_send(Revoked { id, token: flight.token });
        }
        // Claims sent whose reply we will never read (its future is dropped with us). Asked after
        // the creates (one session: requests are handled in order), so it sees every claim they
        // made, whenever their replies come.
        if self.config.mode == DeliveryMode::AtLeastOnce && self.generation != 0 {
            for id in self.claiming.drain() {
                let claim = path::join(&self.config.claims(), &id);
                // Only a claim holding our id: another consumer on this session may hold the
                // item (our create then failed with `NodeExists`), and its claim is not ours.
                let ours = Some(self.config.consumer_id.clone().into_bytes());
                let deleted = delete_own_ephemeral_holding(self.session.pinned(self.generation), claim, ours);
                releases.push(Box::pin(async move {
                    let _ = deleted.await;
                }));
            }
        }
        // And the releases already running (claims that went wrong, items given back).
        releases.extend(self.releases.drain(..).map(|release| Box::pin(release) as _));
        let released = self.released.take();
        actix::spawn(async move {
            futures::future::join_all(releases).await;
            if let Some(released) = released {
                let _ = released.send(true);
            }
        });
    }
}

impl Handler<Released> for QueueConsumerActor {
    type Result = Option<tokio::sync::watch::Receiver<bool>>;

    fn handle(&mut self, _: Released, _: &mut Context<Self>) -> Self::Result {
        self.released()
    }
}

impl Handler<WaitIdle> for QueueConsumerActor {
    type Result = Reply<Result<(), QueueError>>;

    fn handle(&mut self, _: WaitIdle, _: &mut Context<Self>) -> Self::Result {
        if self.is_idle() {
            return Reply::Now(Ok(()));
        }
        let (waiter, reply) = Reply::later(Err(QueueError::Stopped { queue: self.config.queue.clone() }));
        self.idle_waiters.push(waiter);
        reply
    }
}

impl Handler<Settle> for QueueConsumerActor {
    type Result = ResponseFuture<Result<(), QueueError>>;

    /// A raw `Addr::send` caller (workers settle through [`Delivery`](super::Delivery), which
    /// sends `SettleAnswering`).
    fn handle(&mut self, msg: Settle, ctx: &mut Context<Self>) -> Self::Result {
        let id = msg.id.clone();
        let (answer, answered) = oneshot::channel();
        self.settle(msg, answer, ctx);
        Box::pin(async move { answered.await.unwrap_or(Err(QueueError::Revoked { id })) })
    }
}

impl Handler<SettleAnswering> for QueueConsumerActor {
    type Result = ();

    fn handle(&mut self, msg: SettleAnswering, ctx: &mut Context<Self>) {
        self.settle(msg.settle, msg.answer, ctx);
    }
}

impl QueueConsumerActor {
    /// Settles a delivery and answers `answer` with the outcome. The worker's future may be
    /// gone by then: the settlement applies all the same (it was sent when the worker made it).
    fn settle(&mut self, msg: Settle, answer: oneshot::Sender<Result<(), QueueError>>, ctx: &mut Context<Self>) {
        let Settle { id, token, outcome } = msg;
        let was_revoked = self.revoked.remove(&(id.clone(), token));
        let Some(flight) = self.in_flight.get(&id) else {
            let error = if was_revoked { QueueError::Revoked { id } } else { QueueError::UnknownDelivery { id } };
            let _ = answer.send(Err(error));
            return;
        };
        if flight.token != token {
            // An earlier delivery of an item delivered again since (after a session's end, or a
            // nack): settling it would settle the later delivery's claim under its worker.
            debug!(parent: &self.span, %id, %token, current = %flight.token, "settlement of an earlier delivery");
            let _ = answer.send(Err(QueueError::Revoked { id }));
            return;
        }
        if flight.generation != self.generation {
            self.in_flight.remove(&id);
            let _ = answer.send(Err(QueueError::Revoked { id }));
            return;
        }
        if flight.settling {
            let _ = answer.send(Err(QueueError::AlreadySettling { id }));
            return;
        }
        if let Outcome::DeadLetter { reason } = &outcome {
            // Refused before anything is sent: the delivery stays held, to be acked or nacked.
            let why = if flight.claim.is_none() {
                Some("the consumer delivers at most once: the item left the queue when it was delivered")
            } else if self.config.dead_letter.is_none() {
                Some("the consumer has no dead-letter path (ConsumerConfig::with_dead_letter)")
            } else {
                None
            };
            if let Some(why) = why {
                let _ = answer.send(Err(QueueError::DeadLetterUnavailable { id, why }));
                return;
            }
            warn!(parent: &self.span, %id, %reason, "dead-lettered by its worker");
        }
        let (ops, event) = self.settle_ops(&id, flight, &outcome);
        let (generation, token) = (flight.generation, flight.token);
        let Some(claim) = flight.claim.clone() else {
            // At-most-once: the item left the queue before it was delivered.
            self.in_flight.remove(&id);
            self.count_in_flight();
            self.fill(ctx);
            let _ = answer.send(Ok(()));
            return;
        };
        // Settlements that arrive together go out together, in one `multi`.
        if let Some(flight) = self.in_flight.get_mut(&id) {
            flight.settling = true;
        }
        self.settling.push(PendingSettle {
            id: id.clone(),
            ops,
            claim,
            generation,
            token,
            dead_letter_made: false,
            event,
            answer,
        });
        if !std::mem::replace(&mut self.flush_scheduled, true) {
            ctx.notify(Flush);
        }
    }
}

/// What a settlement does to its item.
enum Fate {
    /// Acked: removed from the queue.
    Removed,
    /// Nacked within the attempt limit: delivered again later.
    Retried,
    /// Poison, or out of attempts: moved to the dead-letter path (dropped without one).
    DeadLettered,
}

/// A settlement waiting for the next batch.
struct PendingSettle {
    id: String,
    ops: Vec<Op>,
    claim: String,
    /// The claim's session and czxid.
    generation: u64,
    token: FencingToken,
    /// The dead-letter path was made again after a move found it gone (once only).
    dead_letter_made: bool,
    /// What the settlement does to the item, for its metric.
    event: &'static str,
    answer: oneshot::Sender<Result<(), QueueError>>,
}

/// Sends the settlements gathered so far (queued behind the `Settle`s already in the mailbox,
/// so a burst of acks becomes one `multi`).
#[derive(Message)]
#[rtype(result = "()")]
struct Flush;

/// Largest number of settlements in one `multi`. A batch too large for the server in bytes (a
/// nack carries the item's data) is refused before it is sent and split in two.
const MAX_BATCH: usize = 64;

impl Handler<Flush> for QueueConsumerActor {
    type Result = ();

    fn handle(&mut self, _: Flush, ctx: &mut Context<Self>) {
        self.flush_scheduled = false;
        while !self.settling.is_empty() {
            let rest = self.settling.split_off(self.settling.len().min(MAX_BATCH));
            let batch = std::mem::replace(&mut self.settling, rest);
            self.send_batch(batch, ctx);
        }
    }
}

impl QueueConsumerActor {
    fn send_batch(&mut self, batch: Vec<PendingSettle>, ctx: &mut Context<Self>) {
        let ops: Vec<Op> = batch.iter().flat_map(|p| p.ops.iter().cloned()).collect();
        // The batch is atomic: its first claim is gone exactly when the whole batch applied.
        // Every settlement in it belongs to the same session (the batch is gathered between
        // two mailbox turns, and a flight of an older session is answered `Revoked` up front).
        let first = &batch[0];
        let settled = settle_on_session(
            self.session.pinned(first.generation),
            ops,
            first.claim.clone(),
            first.token,
            // Without the attempt limit: a settlement given up on with its outcome unknown
            // could not be answered truthfully ("nothing of the batch applied").
            self.retry.without_attempt_limit().backoff(),
        );
        // Detached: a consumer that stops while the batch is out must not leave its workers with
        // a wrong answer (a dropped reply reads as `Revoked`, "nothing removed", though the
        // `multi` applies). Without us, the task answers them itself; and an outcome that reached
        // us just as we stopped, unread in the channel, is answered by the channel's drop.
        let (back, settled_back) = Answer::channel(|unread: Option<(Result<(), Error>, Vec<PendingSettle>)>| {
            if let Some((settled, batch)) = unread {
                answer_without_consumer(settled, batch);
            }
        });
        actix::spawn(async move {
            let settled = settled.await;
            if let Err((settled, batch)) = back.send((settled, batch)) {
                answer_without_consumer(settled, batch);
            }
        });
        ctx.spawn(settled_back.into_actor(self).map(move |back, act, ctx| {
            let Ok((settled, batch)) = back else { return };
            match settled {
                Ok(()) => {
                    for pending in batch {
                        act.finish(pending, Ok(()));
                    }
                }
                Err(Error::Multi { index, source }) => {
                    // One settlement failed and none was applied: answer that one, send the rest again.
                    let mut batch = batch;
                    let mut start = 0;
                    let culprit = batch
                        .iter()
                        .position(|p| {
                            let found = index < start + p.ops.len();
                            if !found {
                                start += p.ops.len();
                            }
                            found
                        })
                        .unwrap_or(0);
                    let mut failed = batch.remove(culprit);
                    let failed_op = failed.ops.get(index - start);
                    let moving = failed.ops.iter().any(|op| matches!(op, Op::Create { .. }));
                    if index == start && matches!(*source, Error::NoNode { .. }) {
                        let id = failed.id.clone();
                        act.finish(failed, Err(QueueError::ClaimLost { id }));
                    } else if matches!((failed_op, &*source), (Some(Op::Create { .. }), Error::NoNode { .. }))
                        && !std::mem::replace(&mut failed.dead_letter_made, true)
                    {
                        // The dead-letter path is gone (deleted since we made it): make it
                        // again and move the item once more.
                        let dead = act.config.dead_letter.clone().unwrap_or_default();
                        let made = act.session.ensure_path(&dead);
                        ctx.spawn(made.into_actor(act).map(move |_, act, ctx| {
                            act.settling.push(failed);
                            if !std::mem::replace(&mut act.flush_scheduled, true) {
                                ctx.notify(Flush);
                            }
                        }));
                    } else if moving {
                        // The item used up its attempts but cannot be moved: keep our claim, so
                        // that nobody is handed it again only to fail the same way. It is set
                        // aside until our session ends.
                        tracing::error!(parent: &act.span, id = %failed.id, error = %source, "cannot move the item to the dead-letter path; keeping it claimed");
                        act.finish(failed, Err(QueueError::ZooKeeper(*source)));
                    } else {
                        // Give the item back rather than keep it claimed.
                        drop(act.detached(delete_fenced(
                            act.session.pinned(failed.generation),
                            failed.claim.clone(),
                            failed.token.0,
                        )));
                        act.finish(failed, Err(QueueError::ZooKeeper(*source)));
                    }
                    if !batch.is_empty() {
                        act.send_batch(batch, ctx);
                    }
                }
                Err(Error::DataTooLarge { .. }) if batch.len() > 1 => {
                    // Refused before sending: halves fit, or split again.
                    let mut first = batch;
                    let second = first.split_off(first.len() / 2);
                    act.send_batch(first, ctx);
                    act.send_batch(second, ctx);
                    return;
                }
                Err(error @ Error::DataTooLarge { .. }) => {
                    let pending = batch.into_iter().next().expect("a batch of one");
                    act.settle_too_large(pending, error, ctx);
                    return;
                }
                Err(Error::SessionLost { .. }) => {
                    for pending in batch {
                        let id = pending.id.clone();
                        act.finish(pending, Err(QueueError::Revoked { id }));
                    }
                }
                Err(err) => {
                    for pending in batch {
                        act.finish(pending, Err(QueueError::ZooKeeper(err.clone())));
                    }
                }
            }
            act.fill(ctx);
        }));
    }

    /// One settlement whose `multi` cannot fit in a request: a nack of an item near the size
    /// limit (the item's data plus the claim's delete). The nack goes in two steps instead,
    /// both on the claim's session: the attempt is counted first (the item rewritten at the
    /// version we read), then the claim is given back. A dead-letter move that cannot fit keeps
    /// the item claimed, like any move that fails for good.
    fn settle_too_large(&mut self, pending: PendingSettle, error: Error, ctx: &mut Context<Self>) {
        let session = self.session.pinned(pending.generation);
        let rewrite = pending.ops.iter().find_map(|op| match op {
            Op::SetData { path, data, version: Some(version) } => Some((path.clone(), data.clone(), *version)),
            _ => None,
        });
        let Some((item, data, version)) = rewrite else {
            tracing::error!(parent: &self.span, id = %pending.id, %error, "the settlement cannot fit in a request; keeping the item claimed");
            self.finish(pending, Err(QueueError::ZooKeeper(error)));
            return;
        };
        let (claim, token) = (pending.claim.clone(), pending.token);
        // Whether an earlier attempt may have written it (its reply lost).
        let unsure = std::rc::Rc::new(std::cell::Cell::new(false));
        let (writer, written_item) = (session.clone(), item.clone());
        let written = retried(self.retry.backoff(), move || {
            let sent = writer.set_data(&written_item, data.clone(), Some(version));
            let unsure = unsure.clone();
            async move {
                match sent.await {
                    Ok(_) => Attempted::Done(()),
                    // Only we write the item while our claim stands: our own earlier attempt.
                    Err(Error::BadVersion { .. }) if unsure.get() => Attempted::Done(()),
                    Err(err) if err.is_transient() && !matches!(err, Error::SessionLost { .. }) => {
                        unsure.set(unsure.get() || err.outcome_unknown());
                        Attempted::Again(err)
                    }
                    Err(err) => Attempted::Failed(err),
                }
            }
        });
        let nacked = async move {
            written.await?;
            match delete_fenced(session, claim, token.0).await? {
                FencedDelete::SessionEnded => Err(Error::SessionLost { path: item }),
                FencedDelete::Deleted | FencedDelete::NotOurs => Ok(()),
            }
        };
        ctx.spawn(nacked.into_actor(self).map(move |nacked, act, ctx| {
            let result = match nacked {
                Ok(()) => Ok(()),
                Err(Error::SessionLost { .. }) => Err(QueueError::Revoked { id: pending.id.clone() }),
                Err(error) => Err(QueueError::ZooKeeper(error)),
            };
            act.finish(pending, result);
            act.fill(ctx);
        }));
    }

    fn finish(&mut self, pending: PendingSettle, result: Result<(), QueueError>) {
        self.in_flight.remove(&pending.id);
        if result.is_ok() {
            metrics::queue(pending.event, &self.config.queue, 1);
        }
        self.count_in_flight();
        let _ = pending.answer.send(result);
    }
}

/// Answers the settlements of a batch whose consumer stopped before the batch's outcome came:
/// applied is `Ok`; a session that ended is `Revoked`; anything else the error (nothing of the
/// batch applied; the claims went with the consumer's stop).
fn answer_without_consumer(settled: Result<(), Error>, batch: Vec<PendingSettle>) {
    for pending in batch {
        let answer = match &settled {
            Ok(()) => Ok(()),
            Err(Error::SessionLost { .. }) => Err(QueueError::Revoked { id: pending.id.clone() }),
            Err(Error::Multi { source, .. }) => Err(QueueError::ZooKeeper((**source).clone())),
            Err(error) => Err(QueueError::ZooKeeper(error.clone())),
        };
        let _ = pending.answer.send(answer);
    }
}

/// Applies a settlement on the session its claim was made on, riding out connection loss.
///
/// When an attempt's outcome is unknown, our claim tells: in our own session only our
/// settlement deletes it (every claim delete is fenced by czxid), so a claim that is gone (or
/// replaced by a later claim) means the settlement applied, and our claim still there means try
/// again. Every request is pinned to the claim's session: once that session has ended the
/// answer is `SessionLost`, never a look at a later session, where "no claim" proves nothing.
fn settle_on_session(
    session: PinnedSession,
    ops: Vec<Op>,
    claim: String,
    token: FencingToken,
    backoff: Backoff,
) -> impl std::future::Future<Output = Result<(), Error>> + 'static {
    let mut sent = false;
    retried(backoff, move || {
        // After the first attempt its outcome is unknown: read back before sending again.
        let read_back = std::mem::replace(&mut sent, true);
        let (session, ops, claim) = (session.clone(), ops.clone(), claim.clone());
        async move {
            if read_back {
                // Synced first: a member that has not applied our `multi` yet would show the
                // claim still there, and the `multi` sent again would fail (`ClaimLost`) though
                // the first one applied.
                let synced = session.sync(path::parent(&claim).unwrap_or("/"));
                let read = session.exists(&claim);
                match synced.await.and(read.await) {
                    Ok(Some(stat)) if stat.czxid == token.0 => {}
                    Ok(_) => return Attempted::Done(()),
                    Err(error @ Error::SessionLost { .. }) => return Attempted::Failed(error),
                    // The backoff gives up on a final error.
                    Err(error) => return Attempted::Again(error),
                }
            }
            match session.multi(ops).await {
                Ok(_) => Attempted::Done(()),
                Err(error @ Error::SessionLost { .. }) => Attempted::Failed(error),
                Err(error) => Attempted::judged(Err(error)),
            }
        }
    })
}

impl Handler<SessionEvent> for QueueConsumerActor {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        match event {
            SessionEvent::Connected { generation, .. } => {
                self.generation = generation;
                self.fill(ctx);
            }
            SessionEvent::Expired { .. } => {
                warn!(parent: &self.span, in_flight = self.in_flight.len(), "session expired; revoking deliveries");
                self.revoke_all();
                // The new session's first listing sets the timer again.
                if let Some((_, timer)) = self.wake.take() {
                    ctx.cancel_future(timer);
                }
                // Nothing is claimed until the next session is up; replies from the old one
                // are recognised by their generation.
                self.generation = 0;
            }
            // Events may have been missed while away: look again. A consumer started while its
            // session was suspended heard `Suspended`, never `Connected`: it starts now.
            SessionEvent::Reconnected { generation, .. } => {
                if self.generation == 0 {
                    self.generation = generation;
                }
                self.fill(ctx);
            }
            _ => {}
        }
    }
}

impl Handler<WatchEvent> for QueueConsumerActor {
    type Result = ();

    fn handle(&mut self, event: WatchEvent, ctx: &mut Context<Self>) {
        if event.kind != WatchEventKind::DataChanged {
            self.fill(ctx);
        }
    }
}
