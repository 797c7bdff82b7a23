//! Settling deliveries: what an ack, a nack or a dead letter does to its item and claim, and
//! how settlements that arrive together go out together (one `multi` per batch, pinned to the
//! session of their claims, read back when the outcome is unknown).
//!
//! Owns: `Settle` and `SettleAnswering`, the operations of each outcome, batching, and the
//! answers. Does not own delivery, claims or the in-flight set (the consumer's, in the parent
//! module).

use actix::prelude::*;
use futures::channel::oneshot;
use tracing::{debug, warn};

use super::super::QueueError;
use super::super::messages::{Outcome, Settle, SettleAnswering};
use super::{InFlight, QueueConsumerActor};
use crate::error::Error;
use crate::metrics;
use crate::path;
use crate::recipe::FencingToken;
use crate::recipe::guarded::{FencedDelete, delete_fenced};
use crate::reply::Answer;
use crate::retry::{Attempted, Backoff, retried};
use crate::session::PinnedSession;
use crate::session::requests::{CreateMode, Op};

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
                        path: path::join(dead, super::super::item::ITEM_PREFIX),
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
            debug!(parent: self.shell.span(), %id, %token, current = %flight.token, "settlement of an earlier delivery");
            let _ = answer.send(Err(QueueError::Revoked { id }));
            return;
        }
        if flight.generation != self.generation {
            self.in_flight.remove(&id);
            let _ = answer.send(Err(QueueError::Revoked { id }));
            // A slot is free, and the consumer may be idle now.
            self.count_in_flight();
            self.fill(ctx);
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
            warn!(parent: self.shell.span(), %id, %reason, "dead-lettered by its worker");
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
pub(super) struct PendingSettle {
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
            self.shell.session().pinned(first.generation),
            ops,
            first.claim.clone(),
            first.token,
            // Without the attempt limit: a settlement given up on with its outcome unknown
            // could not be answered truthfully ("nothing of the batch applied").
            self.shell.retry().without_attempt_limit().backoff(),
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
                        let made = act.shell.session().ensure_path(&dead);
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
                        tracing::error!(parent: act.shell.span(), id = %failed.id, error = %source, "cannot move the item to the dead-letter path; keeping it claimed");
                        act.finish(failed, Err(QueueError::ZooKeeper(*source)));
                    } else {
                        // Give the item back rather than keep it claimed.
                        drop(act.detached(delete_fenced(
                            act.shell.session().pinned(failed.generation),
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
        let session = self.shell.session().pinned(pending.generation);
        let rewrite = pending.ops.iter().find_map(|op| match op {
            Op::SetData { path, data, version: Some(version) } => Some((path.clone(), data.clone(), *version)),
            _ => None,
        });
        let Some((item, data, version)) = rewrite else {
            tracing::error!(parent: self.shell.span(), id = %pending.id, %error, "the settlement cannot fit in a request; keeping the item claimed");
            self.finish(pending, Err(QueueError::ZooKeeper(error)));
            self.fill(ctx);
            return;
        };
        let (claim, token) = (pending.claim.clone(), pending.token);
        // Whether an earlier attempt may have written it (its reply lost).
        let unsure = std::rc::Rc::new(std::cell::Cell::new(false));
        let (writer, written_item) = (session.clone(), item.clone());
        let written = retried(self.shell.retry().backoff(), move || {
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
