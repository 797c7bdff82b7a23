//! Why an operation of a [`DistributedAtomicLong`](super::DistributedAtomicLong) failed.

use crate::error::Error;
use crate::lock::LockError;

/// Why an atomic-long operation failed. A conflict is not an error: it is an
/// [`AtomicValue`](super::AtomicValue) with `succeeded: false`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AtomicError {
    /// The node does not hold a value: its data is neither empty nor 8 bytes.
    #[error("{path} does not hold an atomic long: its data is {len} bytes, a value is 8 (a big-endian i64)")]
    NotALong {
        /// The value's node.
        path: String,
        /// How many bytes it holds.
        len: usize,
    },
    /// Adding to the value would take it past `i64::MIN` / `i64::MAX`; nothing was written.
    /// (Curator wraps around.)
    #[error("adding {by} to {value} at {path} overflows an i64; nothing was written")]
    Overflow {
        /// The value's node.
        path: String,
        /// The value read.
        value: i64,
        /// What was to be added.
        by: i64,
    },
    /// A write was sent, its reply was lost with the connection (or the session), and reading
    /// back could not tell whether it applied: the node had moved on from the version the write
    /// expected (by this write or another), or could not be read in time. Read the value before
    /// deciding whether to write again.
    #[error("the write of {attempted} (over {pre}) to {path} may or may not have been applied: {source}")]
    OutcomeUnknown {
        /// The value's node.
        path: String,
        /// The value the write was made over.
        pre: i64,
        /// The value it tried to write.
        attempted: i64,
        /// What interrupted the request.
        source: Error,
    },
    /// The lock the operation was promoted to failed (not a timeout: that is `succeeded: false`).
    #[error("the promoted lock failed: {0}")]
    Lock(LockError),
    /// A ZooKeeper request failed (invalid path, no permission, no session in time, ...); no
    /// write of it may have applied.
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
