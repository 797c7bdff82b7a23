//! [`AtomicValue`]: what an operation of a [`DistributedAtomicLong`](super::DistributedAtomicLong)
//! answers, as Curator's `AtomicValue` does.

use std::time::Duration;

/// The outcome of one operation: whether it changed the value, and the value before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "an operation may not have succeeded: check `succeeded`"]
pub struct AtomicValue {
    /// True when the operation applied (a read always does). False when it gave up: every
    /// optimistic try met a concurrent write and the policy allowed no more (nor did the
    /// promoted lock, if any), or a compare-and-set found another value.
    pub succeeded: bool,
    /// The value read before the write (for a failed compare-and-set: the value found).
    pub pre: i64,
    /// The value written; the same as `pre` when nothing was written (Curator answers 0 there).
    pub post: i64,
    /// How it got there.
    pub stats: AtomicStats,
}

/// How many tries an operation took, and how long (Curator's `AtomicStats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AtomicStats {
    /// Optimistic tries (read, then a write at the version read).
    pub optimistic_tries: u32,
    /// Tries made while holding the promoted lock.
    pub promoted_tries: u32,
    /// Time spent in the optimistic tries.
    pub optimistic_time: Duration,
    /// Time spent acquiring and holding the promoted lock.
    pub promoted_time: Duration,
}
