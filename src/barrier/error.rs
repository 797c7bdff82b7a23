//! Why a barrier operation failed.

use std::time::Duration;

use crate::error::Error;

/// Why a barrier operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BarrierError {
    /// The barrier path breaks ZooKeeper's path rules, or is the root; nothing was sent.
    #[error("invalid barrier path {path:?}: {reason}")]
    InvalidPath {
        /// The path given.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A double barrier needs at least one member.
    #[error("invalid member count {member_count} for the double barrier at {path}: it must be at least 1")]
    InvalidMemberCount {
        /// The barrier path.
        path: String,
        /// The count given.
        member_count: usize,
    },
    /// The barrier did not open (or the others did not leave) within the time asked for.
    /// A double-barrier member that times out has removed its member node.
    #[error("barrier {path} still closed after {waited:?}")]
    Timeout {
        /// The barrier path.
        path: String,
        /// How long we waited.
        waited: Duration,
    },
    /// `leave` without a successful `enter` (or after a `leave` that already ended).
    #[error("member {member} has not entered the double barrier at {path}")]
    NotEntered {
        /// The barrier path.
        path: String,
        /// This member's id (the name of its node).
        member: String,
    },
    /// A ZooKeeper request failed for a reason that retrying cannot fix (no permission, an
    /// ephemeral parent, a closed session, an outage longer than the retry budget, ...).
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
