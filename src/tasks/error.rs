//! Why a master–worker operation failed.

use crate::error::Error;

/// Why a master–worker operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// A task id that this recipe did not make.
    #[error("invalid task id {id:?}: {reason}")]
    InvalidTaskId {
        /// The id given.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A worker id that cannot be a node name.
    #[error("invalid worker id {id:?}: {reason}")]
    InvalidWorkerId {
        /// The id given.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No such task: never submitted here, or its result was forgotten.
    #[error("no task {id} under {root}")]
    UnknownTask {
        /// The task.
        id: String,
        /// The installation's root.
        root: String,
    },
    /// The result did not come within the time asked for (the task may still finish).
    #[error("task {id} has no result after {waited:?}")]
    Timeout {
        /// The task.
        id: String,
        /// How long we waited.
        waited: std::time::Duration,
    },
    /// A master's write was refused because its term has ended (its election node is gone):
    /// another master may be in charge, so nothing was written.
    #[error("this master's term (node {node}) has ended; the write was not applied")]
    Deposed {
        /// The election node of the ended term.
        node: String,
    },
    /// A master's write failed without an answer saying whether it applied: the connection
    /// dropped, or the session expired, while it was in flight (`source` says which). It may
    /// have applied. After `SessionLost` the term has ended as well (its election node was
    /// ephemeral to that session); either way, read back before acting on the write.
    #[error("the outcome of the write fenced by master node {node} is unknown (it may have applied): {source}")]
    OutcomeUnknown {
        /// The election node of the term that fenced the write.
        node: String,
        /// Why the outcome is unknown ([`Error::outcome_unknown`] holds for it).
        source: Error,
    },
    /// The task's runner gave up on it ([`TaskOutcome::GiveUp`](super::TaskOutcome::GiveUp)):
    /// it has no result and is not run again.
    #[error("task {id} was given up by its runner: {reason}")]
    Abandoned {
        /// The task.
        id: String,
        /// The runner's reason.
        reason: String,
    },
    /// Another live session is registered with this worker id.
    #[error("worker id {id} is registered by another session")]
    WorkerIdTaken {
        /// The worker id.
        id: String,
    },
    /// The master candidate's (or worker's) actor has stopped.
    #[error("the actor of the installation at {root} has stopped")]
    Stopped {
        /// The installation's root.
        root: String,
    },
    /// A ZooKeeper request failed (e.g. `DataTooLarge` for an oversize payload).
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}

crate::recipe::error_from_fence!(TaskError, Deposed);
