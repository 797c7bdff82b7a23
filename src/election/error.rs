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
