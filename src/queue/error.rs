//! Errors of the queue recipe.

use crate::error::Error;

/// Why a queue operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// `element`/`remove`/`take` found nothing (or `take` timed out).
    #[error("queue {queue} is empty")]
    Empty {
        /// The queue path.
        queue: String,
    },
    /// The delivery belonged to a session that has ended before this settlement was confirmed
    /// on it, or the item has been delivered again since (a later delivery, with a larger token,
    /// holds it now and stays valid). Nothing is ever sent for it on a later session or against
    /// a later delivery's claim. The settlement was not applied,
    /// unless it reached the server in the session's last moments and the fault that ended the
    /// session also lost its reply; either way the item no longer belongs to this delivery: it
    /// is delivered again (perhaps to another consumer) unless it is already settled.
    #[error("delivery {id} was revoked (its session ended before the settlement was confirmed)")]
    Revoked {
        /// The item.
        id: String,
    },
    /// The claim on the item vanished before the ack (its session ended on the server): the ack
    /// changed nothing and the item will be delivered again.
    #[error("the claim on {id} is gone; the item was not removed and will be delivered again")]
    ClaimLost {
        /// The item.
        id: String,
    },
    /// This delivery's settlement is already under way (a second `ack`/`nack`); this one was
    /// not sent. The first one's answer says what happened.
    #[error("delivery {id} is already being settled")]
    AlreadySettling {
        /// The item.
        id: String,
    },
    /// [`Delivery::dead_letter`](super::Delivery::dead_letter) cannot set the item aside:
    /// nothing was changed and the delivery is still held (ack or nack it).
    #[error("cannot dead-letter {id}: {why}")]
    DeadLetterUnavailable {
        /// The item.
        id: String,
        /// Why: the consumer has no dead-letter path, or it delivers at most once.
        why: &'static str,
    },
    /// No delivery with this id is in flight at this consumer.
    #[error("no delivery {id} is in flight here")]
    UnknownDelivery {
        /// The item.
        id: String,
    },
    /// A `poll`, `remove` or `take` lost the answer to its removal of item `id`, and its session
    /// ended before the removal could be read back: the item is gone from the queue, removed
    /// either by this call or by another taker, and nobody can tell which. Its data is here so
    /// that nothing is lost; handling it may handle it twice. (While the session lives, a lost
    /// answer is read back and never ends here.)
    #[error("the removal of item {id} may or may not have applied (its session ended before it could be read back)")]
    TakeOutcomeUnknown {
        /// The item's node name.
        id: String,
        /// The item's data, as read before the removal.
        data: Vec<u8>,
        /// The error that lost the answer.
        source: Error,
    },
    /// An item id given to [`Queue::put_with_id`](super::Queue::put_with_id) that cannot be
    /// part of a node name.
    #[error("invalid item id {id:?}: {reason}")]
    InvalidItemId {
        /// The id given.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The queue consumer's actor has stopped.
    #[error("the consumer of queue {queue} has stopped")]
    Stopped {
        /// The queue path.
        queue: String,
    },
    /// A ZooKeeper request failed (e.g. `DataTooLarge` for an oversize item).
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
