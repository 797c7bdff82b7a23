//! Errors of the election recipe.

use crate::error::Error;

/// Why an election request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ElectionError {
    /// This participant is not in line (it resigned without requeue, or it failed), so it
    /// cannot become leader until it joins again.
    #[error("not taking part in election {path}")]
    NotParticipating {
        /// The election directory.
        path: String,
    },
    /// This participant does not lead (or no longer does: its term's node is gone), so it cannot
    /// proclaim; nothing was written.
    #[error("not the leader of election {path}: nothing was proclaimed")]
    NotLeader {
        /// The election directory.
        path: String,
    },
    /// A proclaim was in flight when the connection dropped or the session expired: it may have
    /// applied (observers will tell), or not.
    #[error("the outcome of a proclaim in election {path} is unknown (it may have applied): {source}")]
    OutcomeUnknown {
        /// The election directory.
        path: String,
        /// Why the outcome is unknown.
        source: Error,
    },
    /// The election actor has stopped.
    #[error("the actor of election {path} has stopped")]
    Stopped {
        /// The election directory.
        path: String,
    },
    /// A ZooKeeper request failed.
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
