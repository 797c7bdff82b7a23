//! [`QueueConsumerActor`]: consumes a queue and feeds a pool of worker actors.
//!
//! Owns: the in-flight set and its limit (`concurrency`), delivering to workers, giving claims
//! back, revoking deliveries whose session ended, and stopping. Does not own finding work
//! (listing the queue, claiming or taking items: `consumer/claiming.rs`), the producer side
//! ([`Queue`]), nor what an ack, a nack or a dead letter writes and how settlements are
//! batched (`consumer/settlement.rs`).
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
use crate::error::Error;
use crate::metrics;
use crate::path;
use crate::recipe::FencingToken;
use crate::recipe::guarded::{delete_fenced, delete_own_ephemeral_holding};
use crate::recipe::shell::Shell;
use crate::reply::{Pending, Reply};
use crate::retry::Backoff;
use crate::session::requests::NodeData;
use crate::session::{SessionEvent, SessionHandle, WatchEvent, WatchEventKind};

mod claiming;
mod settlement;
use settlement::PendingSettle;

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
        let shell = Shell::new(session, span, config.retry).on_board("queue-consumer", &config.queue);
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
            // A new session, or ours back: events may have been missed while away, so look
            // again. A consumer started while its session was suspended heard `Suspended`, never
            // `Connected`: it starts now.
            SessionEvent::Connected { .. } | SessionEvent::Reconnected { .. } => {
                event.moves_to_new_session(&mut self.generation);
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
