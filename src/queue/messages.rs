//! What a queue consumer hands its workers and is told by them.

use std::future::Future;

use actix::WeakRecipient;
use actix::prelude::*;

use super::error::QueueError;
use crate::recipe::FencingToken;

/// One item handed to a worker. Settle it with [`ack`](Delivery::ack) or
/// [`nack`](Delivery::nack). Dropped unsettled (its last clone; a worker that stopped with it in
/// hand or in its mailbox, or one that let it go), it counts as nacked: the item is delivered
/// again (or dead-lettered after its last attempt).
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct Delivery {
    /// The item's node name (`qn-<seq>`), unique in its queue.
    pub id: String,
    /// The item.
    pub data: Vec<u8>,
    /// 1 for the first delivery, then one more per `Nack` before this one.
    pub attempt: u32,
    /// The claim's czxid: larger for every later claim of any item of this queue.
    pub token: FencingToken,
    /// The consumer, held weakly: deliveries out with workers do not keep a consumer alive
    /// whose last address its user dropped.
    pub(super) settle: WeakRecipient<SettleAnswering>,
    /// Nacks the delivery when its last clone is dropped without an ack or a nack.
    pub(super) unsettled: std::sync::Arc<Unsettled>,
}

/// What gives a delivery's item back when the delivery is dropped unsettled: as the worker lets
/// it go, not when a sweep notices (a worker that is alive but dropped it would otherwise keep
/// the item's claim, and a slot, until the consumer stops).
pub(super) struct Unsettled {
    id: String,
    token: FencingToken,
    consumer: WeakRecipient<SettleAnswering>,
    settled: std::sync::atomic::AtomicBool,
}

impl Unsettled {
    pub(super) fn new(id: String, token: FencingToken, consumer: WeakRecipient<SettleAnswering>) -> Self {
        Unsettled { id, token, consumer, settled: std::sync::atomic::AtomicBool::new(false) }
    }
}

impl Drop for Unsettled {
    fn drop(&mut self) {
        if self.settled.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if let Some(consumer) = self.consumer.upgrade() {
            // Nobody reads the answer; a delivery the consumer no longer holds is refused there.
            let (answer, _) = futures::channel::oneshot::channel();
            let settle = Settle { id: std::mem::take(&mut self.id), token: self.token, outcome: Outcome::Nack };
            consumer.do_send(SettleAnswering { settle, answer });
        }
    }
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("id", &self.id)
            .field("bytes", &self.data.len())
            .field("attempt", &self.attempt)
            .field("token", &self.token)
            .finish()
    }
}

impl Delivery {
    /// Done: remove the item. Fails with [`QueueError::Revoked`] / [`QueueError::ClaimLost`] if
    /// this consumer no longer holds it (nothing is then removed).
    ///
    /// # Cancel safety
    /// The settlement is sent when `ack` (or `nack`) is called, like a ZooKeeper write: dropping
    /// the future loses only its answer, and the settlement applies all the same.
    pub fn ack(&self) -> impl Future<Output = Result<(), QueueError>> + 'static {
        self.settle(Outcome::Ack)
    }

    /// Failed: deliver again later (or dead-letter it after `max_attempts`).
    ///
    /// # Cancel safety
    /// Sent when this is called, as [`ack`](Self::ack) is: dropping the future loses only its
    /// answer, and the nack applies all the same.
    pub fn nack(&self) -> impl Future<Output = Result<(), QueueError>> + 'static {
        self.settle(Outcome::Nack)
    }

    /// Poison: move the item to the consumer's dead-letter path now, whatever its attempt
    /// count (other failures, nacked, are retried under the consumer's attempt limit). The item
    /// is moved as it was put (same data; `reason` is logged with it, not stored), in one
    /// `multi` with the claim's delete, as a dead letter after the last attempt is.
    ///
    /// Fails with [`QueueError::DeadLetterUnavailable`] when the consumer has no dead-letter
    /// path or delivers at most once (the item is not in the queue any more): nothing changes,
    /// and the delivery is still to be settled. Fails as [`ack`](Self::ack) does when this
    /// consumer no longer holds it.
    ///
    /// # Cancel safety
    /// Sent when this is called, as [`ack`](Self::ack) is.
    pub fn dead_letter(&self, reason: impl Into<String>) -> impl Future<Output = Result<(), QueueError>> + 'static {
        self.settle(Outcome::DeadLetter { reason: reason.into() })
    }

    fn settle(&self, outcome: Outcome) -> impl Future<Output = Result<(), QueueError>> + 'static {
        let (id, token) = (self.id.clone(), self.token);
        // A dead letter refused leaves the delivery to be settled; one that applied makes the
        // drop's nack a settlement of nothing, which the consumer refuses.
        if !matches!(outcome, Outcome::DeadLetter { .. }) {
            self.unsettled.settled.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        // A consumer that has stopped revoked this delivery already.
        let (answer, answered) = futures::channel::oneshot::channel();
        let sent = self.settle.upgrade().map(|consumer| {
            // Not `send`: actix skips a request whose caller went before it was handled, and a
            // dropped settlement would hold its claim (and its slot) until the consumer stops.
            consumer.do_send(SettleAnswering { settle: Settle { id: id.clone(), token, outcome }, answer })
        });
        async move {
            match sent {
                Some(()) => answered.await.unwrap_or(Err(QueueError::Revoked { id })),
                None => Err(QueueError::Revoked { id }),
            }
        }
    }
}

/// A delivery no longer counts: its consumer's session ended (the item will be delivered
/// again), or the consumer stopped. Stop working on it if you can; its ack will fail.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Revoked {
    /// The item.
    pub id: String,
    /// The revoked delivery's token ([`Delivery::token`]): the same item may be delivered again,
    /// with a larger token, and that delivery is not revoked.
    pub token: FencingToken,
}

/// Resolves once the consumer is idle: nothing delivered, claimed or being settled, and its
/// latest listing of the queue found nothing it could claim (the queue is empty, or what is left
/// is claimed by other consumers or cannot be read). At once when it is idle now.
/// [`QueueError::Stopped`] if the consumer stops first.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<(), QueueError>")]
pub struct WaitIdle;

pub use crate::stop::Stop;

/// The signal that turns `true` once the consumer has stopped and its claims are given back
/// (`None` once it has stopped): what a [`QueueConsumerHandle`](super::QueueConsumerHandle) made
/// from an address asks for before it stops the consumer.
#[derive(Message, Debug)]
#[rtype(result = "Option<tokio::sync::watch::Receiver<bool>>")]
pub(crate) struct Released;

/// [`Settle`] answered on a channel the worker's future owns: what [`Delivery`] sends, so that
/// the settlement is handled whether or not that future is still there.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct SettleAnswering {
    pub(crate) settle: Settle,
    pub(crate) answer: futures::channel::oneshot::Sender<Result<(), QueueError>>,
}

/// How a delivery ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Processed: remove the item.
    Ack,
    /// Not processed: deliver again (or dead-letter).
    Nack,
    /// Poison: move the item to the dead-letter path now ([`Delivery::dead_letter`]).
    DeadLetter {
        /// Why, as the worker says (logged with the move).
        reason: String,
    },
}

/// Settle a delivery (what [`Delivery::ack`] and [`Delivery::nack`] send).
///
/// A settlement names the delivery, not only the item: the same item may be delivered again
/// (after a session's end or a nack), and a settlement of an earlier delivery then answers
/// [`QueueError::Revoked`] and changes nothing.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), QueueError>")]
pub struct Settle {
    /// The item.
    pub id: String,
    /// The delivery's token ([`Delivery::token`]).
    pub token: FencingToken,
    /// Ack or nack.
    pub outcome: Outcome,
}

pub use crate::events::Subscribe;

/// What happened to a queue consumer, told to its subscribers
/// ([`QueueConsumerHandle::events`](super::QueueConsumerHandle::events)). Deliveries go to the
/// workers, not here.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
#[non_exhaustive]
pub enum ConsumerEvent {
    /// An item this consumer cannot read (`error`: no permission on it, say) was left in the
    /// queue, for an operator or a consumer that may read it; it is skipped from now on. Told
    /// once per item.
    ItemSetAside {
        /// The item's node name.
        id: String,
        /// Why it cannot be read.
        error: crate::error::Error,
    },
    /// The consumer gave up for good on a final error (no permission on the queue, a bad path)
    /// and stopped: its claimed items went back to the queue, its workers heard
    /// [`Revoked`].
    Failed {
        /// What it met.
        error: crate::error::Error,
    },
}
