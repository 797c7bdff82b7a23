//! Errors of the cache recipe.

use crate::error::Error;

/// Why a cache cannot be made, or could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The cache's actor has stopped.
    #[error("the cache of {path} has stopped")]
    Stopped {
        /// The cached path.
        path: String,
    },
    /// The path is invalid.
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
