//! What the master–worker actors are asked, and what they tell.

use actix::Message;

use super::error::TaskError;
use super::layout::TaskId;
use super::master_fence::MasterFence;
use crate::error::Error;
use crate::recipe::FencingToken;

/// Sent by a [`TaskWorker`](super::TaskWorker) to the user's actor: run this task. The
/// handler's reply says what the run came to ([`TaskOutcome`]; a `Vec<u8>` converts into
/// [`TaskOutcome::Done`]): a result is written to `status/<task>` for the client.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "TaskOutcome")]
pub struct TaskAssigned {
    /// The task.
    pub task_id: TaskId,
    /// Its payload, as submitted.
    pub data: Vec<u8>,
}

/// What a run of a task came to: the runner's reply to [`TaskAssigned`].
#[derive(actix::MessageResponse, Debug, Clone, PartialEq, Eq)]
pub enum TaskOutcome {
    /// The task's result, recorded for the client.
    Done(Vec<u8>),
    /// Not now (a resource is busy, a dependency is down): keep the task for `after`, then put
    /// it back so that a worker (perhaps this one) runs it again. Nothing is recorded.
    RetryLater {
        /// How long to wait before the task is put back.
        after: std::time::Duration,
    },
    /// The task cannot succeed: record it as failed with `reason`. The client's
    /// [`result`](super::TaskClient::result) answers [`TaskError::Abandoned`](super::TaskError::Abandoned),
    /// and the task is not run again.
    GiveUp {
        /// Why, for the client.
        reason: String,
    },
}

impl From<Vec<u8>> for TaskOutcome {
    fn from(result: Vec<u8>) -> Self {
        TaskOutcome::Done(result)
    }
}

pub use crate::events::Subscribe;

/// The fence of the current term if this candidate is master now.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Option<MasterFence>")]
pub struct CurrentTerm;

pub use crate::stop::Stop;

/// What happened to a master candidate, told in the past tense.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
#[non_exhaustive]
pub enum MasterEvent {
    /// Somebody (perhaps us) is master now; `None`: no candidate is in line.
    MasterChanged {
        /// The master's id.
        master_id: Option<String>,
    },
    /// We are master: a term started. Nothing is assigned before the view is rebuilt.
    BecameMaster {
        /// Fences every write of this term.
        fence: MasterFence,
    },
    /// The term's view was read from ZooKeeper (not from any earlier master's memory).
    Rebuilt {
        /// Registered workers.
        workers: usize,
        /// Tasks waiting in `tasks/`.
        pending: usize,
        /// Tasks under `assign/`.
        assigned: usize,
    },
    /// A worker registered.
    WorkerJoined {
        /// Its id.
        worker_id: String,
    },
    /// A worker's registration disappeared (it stopped, died or its session expired).
    WorkerLeft {
        /// Its id.
        worker_id: String,
    },
    /// A task was moved from `tasks/` to a worker.
    Assigned {
        /// The task.
        task_id: TaskId,
        /// The worker.
        worker_id: String,
    },
    /// An unfinished task of a worker that left was put back in `tasks/`, to be assigned again.
    Requeued {
        /// The task.
        task_id: TaskId,
        /// The worker that left.
        from_worker: String,
    },
    /// The term ended (leadership suspended or lost, or we stopped): its actor has stopped and
    /// writes nothing more. Its fence fails once the election node is gone (lost, stopped);
    /// after a suspension the same node may lead again, and the next `BecameMaster` carries
    /// the same fence (see `docs/recipes/master-worker.md`).
    MastershipEnded {
        /// The ended term's token.
        token: FencingToken,
    },
    /// This candidate cannot take part (bad path, no permission, ...).
    MasterFailed {
        /// What went wrong.
        error: Error,
    },
}

/// Why a finished run's result was not recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiscardReason {
    /// The task was taken from this worker (its registration was lost meanwhile) and given to
    /// another.
    Reassigned,
    /// Another run of the task finished first; its result stands.
    AlreadyFinished,
    /// The client forgot the task (its status node is gone).
    Forgotten,
}

/// What happened at a worker, told in the past tense.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
#[non_exhaustive]
pub enum WorkerEvent {
    /// Registered under `workers/<id>` for session `generation`.
    Registered {
        /// The session generation registered in.
        generation: u64,
    },
    /// The registration is gone with its session; the master will re-assign our unfinished
    /// tasks. Running tasks go on; a new registration follows on the new session.
    RegistrationLost,
    /// Could not register because the id is taken by another live session; retried (with
    /// backoff) until that session ends. A final error is `Failed` instead.
    RegistrationFailed {
        /// What went wrong.
        error: TaskError,
    },
    /// A task was handed to the user's actor.
    TaskStarted {
        /// The task.
        task_id: TaskId,
    },
    /// This run's result was written, by this worker, and its assignment removed, in one
    /// transaction. Never reported for a result another run wrote.
    TaskFinished {
        /// The task.
        task_id: TaskId,
    },
    /// A run finished but its result was not recorded.
    TaskDiscarded {
        /// The task.
        task_id: TaskId,
        /// Why.
        reason: DiscardReason,
    },
    /// The runner gave up on the task ([`TaskOutcome::GiveUp`]); its failure is recorded for the
    /// client, in one transaction with the assignment's removal.
    TaskAbandoned {
        /// The task.
        task_id: TaskId,
        /// The runner's reason.
        reason: String,
    },
    /// The runner asked to run the task later ([`TaskOutcome::RetryLater`]): after the wait it
    /// was put back, for a worker to run again.
    TaskReturned {
        /// The task.
        task_id: TaskId,
    },
    /// A run finished and its result was sent, but the session it belongs to ended before the
    /// server's answer came: the result may or may not be recorded. If it was not, the master
    /// gives the task to another worker; either way this worker does nothing more about it.
    TaskOutcomeUnknown {
        /// The task.
        task_id: TaskId,
    },
    /// A result could not be written (e.g. larger than the server accepts); the assignment is
    /// left in place for an operator, and this worker does not run the task again.
    TaskFailed {
        /// The task.
        task_id: TaskId,
        /// What went wrong.
        error: TaskError,
    },
    /// The worker cannot go on (a final error such as `NoAuth` on its directories) and has
    /// stopped; retrying could not help.
    Failed {
        /// What went wrong.
        error: TaskError,
    },
    /// The worker deregistered and stopped.
    Stopped,
}
