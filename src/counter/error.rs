//! Why a shared-count request failed.

use crate::error::Error;

/// Why a shared-count request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CounterError {
    /// The node does not hold a count: its data is not exactly 4 bytes.
    #[error("{path} does not hold a count: its data is {len} bytes, a count is 4 (a big-endian i32)")]
    NotACount {
        /// The counter's node.
        path: String,
        /// How many bytes it holds.
        len: usize,
    },
    /// `AddCount` would take the count past `i32::MIN` / `i32::MAX`; nothing was written.
    #[error("adding {by} to the count {value} at {path} overflows an i32; nothing was written")]
    Overflow {
        /// The counter's node.
        path: String,
        /// The count that was read.
        value: i32,
        /// What was to be added.
        by: i32,
    },
    /// A write was sent, and the connection (or the session) was lost or closed before its
    /// reply: it may or may not have been applied. Read the count before deciding whether to
    /// write again.
    #[error("the write to {path} may or may not have been applied: {source}")]
    OutcomeUnknown {
        /// The counter's node.
        path: String,
        /// What interrupted the request.
        source: Error,
    },
    /// The node was deleted and created again after the expected count was read, and this
    /// compare-and-set reached the new node at the expected version (ZooKeeper compares
    /// versions only, and a new node's start at 0 again): the count now holds the written value,
    /// but not as the successor of the expected one.
    #[error("{path} was created again after the expected count was read; the write reached the new node")]
    Recreated {
        /// The counter's node.
        path: String,
    },
    /// The counter's actor has stopped.
    #[error("the shared count actor has stopped")]
    Stopped,
    /// A ZooKeeper request failed (invalid path, no permission, connection lost during a read,
    /// no session in time, ...). Reads are safe to repeat.
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}

impl CounterError {
    /// The path this error concerns, when it concerns one.
    pub fn path(&self) -> Option<&str> {
        match self {
            CounterError::NotACount { path, .. }
            | CounterError::Overflow { path, .. }
            | CounterError::OutcomeUnknown { path, .. }
            | CounterError::Recreated { path } => Some(path),
            CounterError::Stopped => None,
            CounterError::ZooKeeper(err) => err.path(),
        }
    }
}
