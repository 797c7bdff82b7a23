//! Why a persistent-node request failed.

use std::time::Duration;

use crate::error::Error;

/// Why a [`PersistentNode`](super::PersistentNode) request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PersistentNodeError {
    /// The node was not created within the time given.
    #[error("{path} was not created within {after:?}")]
    Timeout {
        /// The path (or prefix) configured.
        path: String,
        /// The time given.
        after: Duration,
    },
    /// The node does not exist now (not created yet, or being created again): `SetData` needs
    /// it. The data is kept for the next create all the same.
    #[error("{path} does not exist now; the data will be used when it is created")]
    NotCreated {
        /// The path (or prefix) configured.
        path: String,
    },
    /// The node cannot be created (a bad path, no permission, TTL nodes not enabled on the
    /// server, ...); the actor has stopped trying.
    #[error("{path} cannot be created: {source}")]
    Failed {
        /// The path (or prefix) configured.
        path: String,
        /// Why.
        source: Error,
    },
    /// The node was not deleted and stays at `path`: its delete was refused for good (`NoAuth`,
    /// say), or the session closed before it could be sent.
    #[error("{path} was not deleted and stays: {source}")]
    NotDeleted {
        /// The node's path.
        path: String,
        /// Why.
        source: Error,
    },
    /// The actor has stopped.
    #[error("the persistent node {path} has stopped")]
    Stopped {
        /// The path (or prefix) configured.
        path: String,
    },
    /// A ZooKeeper request failed (`SetData` met a connection loss: it may have applied).
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
