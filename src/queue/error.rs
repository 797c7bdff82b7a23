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
    /// The delivery belonged to a session that is gone: the item will be (or was) delivered
    /// again, perhaps to another consumer; this settlement changed nothing.
    #[error("delivery {id} was revoked (its session ended); nothing was changed")]
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
    /// No delivery with this id is in flight at this consumer.
    #[error("no delivery {id} is in flight here")]
    UnknownDelivery {
        /// The item.
        id: String,
    },
    /// A ZooKeeper request failed (e.g. `DataTooLarge` for an oversize item).
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
