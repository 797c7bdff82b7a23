//! Errors of the lock recipes.

use std::time::Duration;

use crate::error::Error;

crate::recipe::error_from_fence!(LockError, NoLongerHeld);

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
    /// A guarded write failed without an answer saying whether it applied: the connection
    /// dropped, or the session expired, while it was in flight (`source` says which). It may
    /// have applied: a write that reached the server before the expiry did, even though the
    /// lock is lost by now. Do not send it again blindly: read back what it would have changed,
    /// or make it idempotent by naming what it creates after the grant's token (see "Retrying a
    /// guarded write" in `docs/recipes/lock.md`).
    #[error("the outcome of the write guarded by lock node {node} is unknown (it may have applied): {source}")]
    OutcomeUnknown {
        /// The lock node that guarded the write.
        node: String,
        /// Why the outcome is unknown ([`Error::outcome_unknown`] holds for it).
        source: Error,
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
