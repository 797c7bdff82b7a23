//! Errors of the group recipe.

use crate::error::Error;

/// Why a group operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupError {
    /// The member id cannot be a node name.
    #[error("invalid member id {id:?}: {reason}")]
    InvalidId {
        /// The id given.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Another live session is a member under this id.
    #[error("member id {id} is taken by another session")]
    IdTaken {
        /// The id.
        id: String,
    },
    /// The member's actor has stopped.
    #[error("the member of group {group} has stopped")]
    Stopped {
        /// The group's path.
        group: String,
    },
    /// A ZooKeeper request failed.
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
