//! Errors of the lock recipes.

use std::time::Duration;

use crate::error::Error;

/// Why a lock request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock was not granted within the requested time; our node is deleted.
    #[error("lock {dir} not acquired within {after:?}")]
    Timeout {
        /// The lock directory.
        dir: String,
        /// The timeout that elapsed.
        after: Duration,
    },
    /// Another `Acquire` of this actor is still waiting.
    #[error("an acquire of lock {dir} is already in progress")]
    AcquireInProgress {
        /// The lock directory.
        dir: String,
    },
    /// `Release` without holding (or waiting for) the lock.
    #[error("lock {dir} is not held")]
    NotHeld {
        /// The lock directory.
        dir: String,
    },
    /// The waiting `Acquire` was cancelled by a `Release` (or the actor stopped).
    #[error("acquiring lock {dir} was cancelled")]
    Cancelled {
        /// The lock directory.
        dir: String,
    },
    /// A guarded write found the lock node gone: whoever wrote no longer holds the lock, and
    /// nothing of the write was applied.
    #[error("lock node {node} no longer exists: the lock is no longer held, the write was not applied")]
    NoLongerHeld {
        /// The lock node that was checked.
        node: String,
    },
    /// The lock had already been lost when it was released (its session expired, or someone
    /// else deleted its node): nothing was deleted, and subscribers were told `Lost`.
    #[error("lock {dir} was already lost ({reason:?}) when released")]
    Lost {
        /// The lock directory.
        dir: String,
        /// Why it was lost.
        reason: super::LockLostReason,
    },
    /// The configuration cannot work (a semaphore with no leases, ...); nothing was sent.
    #[error("lock {dir} is misconfigured: {reason}")]
    InvalidConfig {
        /// The lock directory.
        dir: String,
        /// What is wrong.
        reason: String,
    },
    /// The lock actor has stopped; whatever it held is released.
    #[error("the actor of lock {dir} has stopped")]
    Stopped {
        /// The lock directory.
        dir: String,
    },
    /// A ZooKeeper request failed (bad path, parent is ephemeral, no permission, ...).
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
