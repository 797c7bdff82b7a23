//! Requests to a [`PersistentNode`](super::PersistentNode) (imperative) and what it tells its
//! subscribers (past tense).

use std::time::Duration;

use actix::Message;

use super::error::PersistentNodeError;

/// Resolves with the node's path once it exists (at once if it does now), or fails after
/// `timeout` (Curator's `waitForInitialCreate`).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<String, PersistentNodeError>")]
pub struct WaitForInitialCreate {
    /// How long to wait; `None`: until it exists or the actor stops.
    pub timeout: Option<Duration>,
}

/// Replaces the node's data (kept for every later create too).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), PersistentNodeError>")]
pub struct SetData {
    /// The new data.
    pub data: Vec<u8>,
}

/// The node's path now (with its sequence number), or `None` while it does not exist.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Option<String>")]
pub struct ActualPath;

pub use crate::events::Subscribe;

/// What happened to the node.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
#[non_exhaustive]
pub enum PersistentNodeEvent {
    /// The node exists now, created (or an existing one of ours, or a persistent one, taken
    /// over with our data) at `path`: at start, after a deletion, after a new session.
    Created {
        /// Its full path.
        path: String,
    },
    /// The node was found gone (deleted by someone, or with its session); it is being created
    /// again.
    Deleted {
        /// Its full path.
        path: String,
    },
    /// Another live session's ephemeral node holds the path: ours is created once it goes.
    Blocked {
        /// The path.
        path: String,
    },
    /// The node cannot be created (see [`PersistentNodeError::Failed`]); the actor stopped trying.
    Failed {
        /// Why.
        error: PersistentNodeError,
    },
}
