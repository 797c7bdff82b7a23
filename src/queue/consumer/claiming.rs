//! Finding work: listing the queue (and its claims), planning which items to try, and
//! claiming (at-least-once) or taking (at-most-once) them, with what a claim that went wrong
//! leaves to give back.
//!
//! Owns: the listing and its watches, the plan's shape, the timer for items not yet due, the
//! claim or take of one item and its misses. Does not own delivery, the in-flight set or
//! stopping (the consumer's, in the parent module), nor settlement (`settlement.rs`).

use std::collections::HashSet;

use actix::prelude::*;
use tracing::{debug, warn};

use super::super::config::DeliveryMode;
use super::super::messages::ConsumerEvent;
use super::super::{item, plan};
use super::QueueConsumerActor;
use crate::error::Error;
use crate::path;
use crate::recipe::FencingToken;
use crate::recipe::guarded::{delete_fenced, delete_own_ephemeral_holding};
use crate::retry::again_later;
use crate::session::requests::CreateMode;

/// A plan remembers this many items per in-flight slot (at least `PLAN_MIN`): enough that
/// listings are rare, few enough that memory does not follow the backlog, and that the oldest
/// items are worked on first. A consumer starts at a random place in its plan (measured: a
/// window of 4 × concurrency made consumers collide twice as often, at half the rate), except
/// one of concurrency 1, which keeps strict queue order.
const PLAN_PER_SLOT: usize = 16;
const PLAN_MIN: usize = 1024;
/// Claims in a row that found their item taken or gone before the plan is dropped.
const MISSES_BEFORE_RELIST: usize = 8;

impl QueueConsumerActor {
    /// Lists the queue (with a watch, so an empty queue costs nothing until an item arrives) and
    /// the claims, makes a new plan from them, and claims what fits. A listing that finds
    /// nothing to claim waits for its watch: it never lists again by itself.
    pub(super) fn list(&mut self, ctx: &mut Context<Self>) {
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
    pub(super) fn claim_candidates(&mut self, ctx: &mut Context<Self>) {
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
}
