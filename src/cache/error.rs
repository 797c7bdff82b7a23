//! Errors of the cache recipe.

use crate::error::Error;

/// Why a cache cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The path is invalid.
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
