//! [`QueueConsumerActor`]: consumes a queue and feeds a pool of worker actors.
//!
//! Owns: claiming items (at-least-once) or taking them (at-most-once), the in-flight set and
//! its limit (`concurrency`), delivering to workers, and revoking deliveries whose session
//! ended. Does not own the producer side ([`Queue`]), nor what an ack, a nack or a dead letter
//! writes and how settlements are batched (`consumer/settlement.rs`).
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

use actix::prelude::*;
use tracing::{debug, info, warn};

use super::QueueError;
use super::config::{ConsumerConfig, DeliveryMode};
use super::messages::{ConsumerEvent, Delivery, Released, Revoked, SettleAnswering, Stop, Unsettled, WaitIdle};
use super::{item, plan};
use crate::error::Error;
use crate::metrics;
use crate::path;
use crate::recipe::FencingToken;
use crate::recipe::guarded::{delete_fenced, delete_own_ephemeral_holding};
use crate::recipe::shell::Shell;
use crate::reply::{Pending, Reply};
use crate::retry::{Backoff, again_later};
use crate::session::requests::{CreateMode, NodeData};
use crate::session::{SessionEvent, SessionHandle, WatchEvent, WatchEventKind};

mod settlement;
use settlement::PendingSettle;

/// A plan remembers this many items per in-flight slot (at least `PLAN_MIN`): enough that
/// listings are rare, few enough that memory does not follow the backlog, and that the oldest
/// items are worked on first. A consumer starts at a random place in its plan (measured: a
/// window of 4 × concurrency made consumers collide twice as often, at half the rate), except
/// one of concurrency 1, which keeps strict queue order.
const PLAN_PER_SLOT: usize = 16;
const PLAN_MIN: usize = 1024;
/// Claims in a row that found their item taken or gone before the plan is dropped.
const MISSES_BEFORE_RELIST: usize = 8;

/// Stops consuming: claimed items go back to the queue at once, workers get [`Revoked`].
impl Handler<Stop> for QueueConsumerActor {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        info!(parent: self.shell.span(), in_flight = self.in_flight.len(), "stopping");
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
    /// Delay before the next retry of a failed listing, claim or take; reset by a listing.
    backoff: Backoff,
    /// Kept last: its lifeline must drop after everything else the actor holds.
    shell: Shell<ConsumerEvent>,
}

impl QueueConsumerActor {
    /// A consumer; start it with `.start()`. It begins once the session is up.
    pub fn new(session: SessionHandle, config: ConsumerConfig) -> Self {
        let span = tracing::info_span!("zk.queue", queue = %config.queue, consumer = %config.consumer_id);
        // Its health entry says how many items are in flight.
        let mut shell = Shell::new(session, span, config.retry);
        shell.health_slot("queue-consumer", &config.queue);
        let backoff = shell.retry().backoff();
        QueueConsumerActor {
            shell,
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
            backoff,
        }
    }

    /// Shows the entry to the handle's `tag`, and keeps a failed one there (see
    /// `HealthSlot::keep_failed`).
    pub(crate) fn with_health_tag(mut self, tag: crate::session::health::HealthTag) -> Self {
        self.shell.show_health_to(tag);
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
            debug!(parent: self.shell.span(), waiters = self.idle_waiters.len(), "idle");
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
        let items = self.shell.session().children_watched_by(&self.config.queue, &self.shell.watcher(ctx));
        let claims = match self.config.mode {
            DeliveryMode::AtLeastOnce => Some(self.shell.session().children(&self.config.claims())),
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
                        // the claims. The watch is set after the listing: a claim that went in
                        // between fires nothing, so its answer is compared with what was listed.
                        let watch = act.shell.session().children_watched_by(&act.config.claims(), &act.shell.watcher(ctx));
                        ctx.spawn(watch.into_actor(act).map(move |watched, act, ctx| {
                            let gone = match watched {
                                Ok(now) => {
                                    let now: HashSet<String> = now.names.into_iter().collect();
                                    !claimed.is_subset(&now)
                                }
                                Err(_) => false,
                            };
                            if gone {
                                debug!(parent: act.shell.span(), "a claim went before its watch was set; listing again");
                                act.list(ctx);
                            }
                        }));
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
                    let ensure = act.shell.session().ensure_path(&act.config.queue);
                    ctx.spawn(ensure.into_actor(act).map(|_, act, ctx| act.fill(ctx)));
                }
                Err(err) => {
                    // What the last listing found is no longer known to be all there is.
                    act.listed = false;
                    debug!(parent: act.shell.span(), error = %err, "listing failed");
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
        debug!(parent: self.shell.span(), ?after, "the next item is not due yet; listing again then");
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
                warn!(parent: self.shell.span(), node = %name, "not a queue item (expected qn-<10 digits>, see docs/recipes/queue.md); skipping it");
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
                let pinned = self.shell.session().pinned(generation);
                let create = pinned.create(&claim_path, self.config.consumer_id.clone(), CreateMode::Ephemeral);
                let read = self.shell.session().get_data(&item);
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
                            let ensure = act.shell.session().ensure_path(&act.config.claims());
                            ctx.spawn(ensure.into_actor(act).map(|_, act, ctx| act.fill(ctx)));
                        }
                        (Err(err), _) if err.is_final() => act.give_up(err, ctx),
                        (Err(err), _) => {
                            // The create may have happened: if the claim is ours, give it back.
                            debug!(parent: act.shell.span(), %id, error = %err, "claim outcome unknown; checking");
                            // Ours only if it holds our id: another consumer on this session
                            // may have claimed the item meanwhile.
                            let ours = Some(act.config.consumer_id.clone().into_bytes());
                            let release = act.detached(delete_own_ephemeral_holding(pinned, claim_path, ours));
                            act.releasing.insert(id.clone());
                            ctx.spawn(release.into_actor(act).map(move |_, act, ctx| {
                                // Still to be tried first, now that no claim of ours is on it.
                                act.releasing.remove(&id);
                                act.candidates.push_front(id);
                                if let Err(err) =
                                    again_later(&mut act.backoff, err, ctx, |act: &mut Self, ctx| act.fill(ctx))
                                {
                                    act.give_up(err, ctx);
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
                let session = self.shell.session().clone();
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
                            debug!(parent: act.shell.span(), %id, %error, "take failed");
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
            tracing::error!(parent: self.shell.span(), %id, %error, "cannot read this item; leaving it in the queue and skipping it");
            self.shell.tell(ConsumerEvent::ItemSetAside { id: id.to_owned(), error: error.clone() });
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
            warn!(parent: self.shell.span(), %id, "no worker is running; giving the item back");
            self.give_back(id, claim, token);
            self.answer_if_idle();
            return;
        };
        self.next_worker = worker + 1;
        self.misses = 0;
        let attempt = u32::try_from(node.stat.version).unwrap_or(0) + 1;
        debug!(parent: self.shell.span(), %id, attempt, %token, worker, "delivering");
        let settle = ctx.address().downgrade().recipient::<SettleAnswering>();
        let delivery = Delivery {
            id: id.clone(),
            data: node.data.clone(),
            attempt,
            token,
            unsettled: std::sync::Arc::new(Unsettled::new(id.clone(), token, settle.clone())),
            settle,
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
        if let Some(health) = self.shell.health() {
            health.set(crate::session::health::RecipeState::Consuming { in_flight: self.in_flight.len() });
        }
    }

    /// Releases a claim without counting an attempt.
    fn give_back(&mut self, id: String, claim: Option<String>, token: FencingToken) {
        if let Some(claim) = claim {
            // Runs on its own; the stop waits for it.
            drop(self.detached(delete_fenced(self.shell.session().pinned(self.generation), claim, token.0)));
        } else {
            warn!(parent: self.shell.span(), %id, "at-most-once item could not be delivered and is lost");
        }
    }

    /// A final error (no permission, a bad path): retrying cannot help. The consumer stops
    /// (claimed items go back, workers hear `Revoked`) rather than ask again forever.
    fn give_up(&mut self, error: Error, ctx: &mut Context<Self>) {
        tracing::error!(parent: self.shell.span(), %error, "cannot consume this queue; stopping");
        self.shell.tell(ConsumerEvent::Failed { error: error.clone() });
        self.shell.fail_for_good(error.to_string());
        ctx.stop();
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

impl Actor for QueueConsumerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(1024);
        self.count_in_flight();
        // Workers the config describes by a factory start with the consumer, on its Arbiter.
        self.config.start_workers();
        self.shell.session().subscribe(ctx.address().recipient());
        // The lifetime rule: neither the idle check's timer nor the claims in flight keep a consumer
        // alive whose last address is gone (deliveries out with workers hold it only weakly: a
        // busy consumer whose user let go must stop too, not consume the whole queue first).
        crate::stop::stop_when_unaddressed(ctx);
        if let Some(dead) = self.config.dead_letter.clone() {
            let ensure = self.shell.session().ensure_path(&dead);
            ctx.spawn(ensure.into_actor(self).map(|ensured, act, _| {
                if let Err(error) = ensured {
                    warn!(parent: act.shell.span(), %error, "cannot create the dead-letter path");
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
                let deleted = delete_fenced(self.shell.session().pinned(flight.generation), claim, flight.token.0);
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
                let deleted = delete_own_ephemeral_holding(self.shell.session().pinned(self.generation), claim, ours);
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

crate::recipe::shell::on_the_shell!(QueueConsumerActor => ConsumerEvent, Subscribe);

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

impl Handler<SessionEvent> for QueueConsumerActor {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        match event {
            SessionEvent::Connected { generation, .. } => {
                self.generation = generation;
                self.fill(ctx);
            }
            SessionEvent::Expired { .. } => {
                warn!(parent: self.shell.span(), in_flight = self.in_flight.len(), "session expired; revoking deliveries");
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
