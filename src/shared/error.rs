//! Why a shared-value request failed.

use crate::error::Error;

/// Why a [`SharedValue`](super::SharedValue) request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SharedValueError {
    /// The write may or may not have been applied (the connection or session was lost while it
    /// was on its way): read before writing again.
    #[error("the write to {path} may or may not have been applied: {source}")]
    OutcomeUnknown {
        /// The node.
        path: String,
        /// What was lost.
        source: Error,
    },
    /// A compare-and-set reached a node created after its expected value was read (at the
    /// expected version): it was applied to the new node. Never reported as `Ok(true)`.
    #[error("{path} was created again after the expected value was read; the write reached the new node")]
    Recreated {
        /// The node.
        path: String,
    },
    /// The actor has stopped.
    #[error("the shared value actor has stopped")]
    Stopped,
    /// A ZooKeeper request failed (invalid path, no permission, ...). Reads are safe to repeat.
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
