//! How a [`DistributedAtomicLong`](super::DistributedAtomicLong) tries.

use std::time::Duration;

use crate::retry::RetryPolicy;

/// A distributed atomic long's node, how it retries, and whether it is promoted to a lock.
#[derive(Debug, Clone)]
#[must_use]
pub struct AtomicLongConfig {
    pub(super) path: String,
    pub(super) retry: Option<RetryPolicy>,
    pub(super) promoted: Option<PromotedToLock>,
}

/// Curator's `PromotedToLock`: when every optimistic try met a concurrent write, take an
/// exclusive lock (an `InterProcessMutex` at `lock_path`, shared with Curator's) and try again
/// while holding it. Every writer of the value must use the same lock path for it to help.
#[derive(Debug, Clone)]
#[must_use]
pub struct PromotedToLock {
    pub(super) lock_path: String,
    pub(super) max_lock_time: Option<Duration>,
    pub(super) retry: Option<RetryPolicy>,
}

/// How many optimistic tries an operation makes when its policy sets no attempt limit: a
/// conflict loop must end.
pub(super) const DEFAULT_TRIES: u32 = 10;

impl AtomicLongConfig {
    /// The value at `path` (created on the first write; missing parents as containers).
    pub fn new(path: impl Into<String>) -> Self {
        AtomicLongConfig { path: path.into(), retry: None, promoted: None }
    }

    crate::builder::setters! {
        /// How the optimistic tries are spaced and how many there are (its attempt limit), and how
        /// a failed request is retried. Default: the session's policy
        /// ([`SessionConfig::with_retry`](crate::session::SessionConfig::with_retry)), with at most
        /// 10 tries when it has no attempt limit.
        with_retry(retry: RetryPolicy) => some;

        /// After the optimistic tries, take this lock and try again (Curator's `PromotedToLock`).
        promoted_to_lock(promoted: PromotedToLock) => some;
    }

    /// The value's node.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl PromotedToLock {
    /// Promote to the lock at `lock_path`, waiting for it without a bound.
    pub fn new(lock_path: impl Into<String>) -> Self {
        PromotedToLock { lock_path: lock_path.into(), max_lock_time: None, retry: None }
    }

    crate::builder::setters! {
        /// Wait at most this long for the lock; an operation that does not get it answers
        /// `succeeded: false`.
        with_max_lock_time(max_lock_time: Duration) => some;

        /// The tries made while holding the lock. Default: the value's own policy.
        with_retry(retry: RetryPolicy) => some;
    }
}
