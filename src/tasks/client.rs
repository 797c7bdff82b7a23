//! [`TaskClient`]: submit tasks and wait for their results.
//!
//! Owns: submitting (`tasks/<task>` and an empty `status/<task>` in one transaction, retried
//! safely after a lost reply), waiting for a result with a watch on the status node, forgetting
//! a result, and a read-only [`Overview`] of an installation. Not an actor: a client is a cheap
//! handle, used from any actor or task inside an actix `System`.

use std::future::Future;
use std::time::Duration;

use tracing::debug;

use super::error::TaskError;
use super::layout::{Layout, TaskId};
use crate::error::Error;
use crate::path;
use crate::retry::{Attempted, retried};
use crate::session::SessionHandle;
use crate::session::requests::CreateMode;
use crate::session::requests::Op;

/// What an installation looks like right now (read from ZooKeeper).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overview {
    /// The master's id, if there is a master.
    pub master: Option<String>,
    /// Registered workers, by id.
    pub workers: Vec<String>,
    /// Tasks waiting for a worker.
    pub pending: usize,
    /// Tasks assigned and not finished.
    pub assigned: usize,
}

/// Where a task is, as [`TaskClient::state`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskState {
    /// No such task: never stored (a submission that did not apply), or forgotten.
    Unknown,
    /// Stored, waiting for a worker.
    Waiting,
    /// Given to a worker, no result yet.
    Assigned,
    /// Its result is recorded.
    Finished,
    /// Its runner gave up on it (the client's `result` says why).
    Abandoned,
}

/// Submits tasks to one master–worker installation and waits for their results.
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::tasks::TaskError> {
/// use std::time::Duration;
/// use actix_zookeeper::tasks::TaskClient;
///
/// let client = TaskClient::new(session, "/jobs")?;
/// let task = client.submit("resize photo 42").await?;
/// let result = client.result(&task, Duration::from_secs(30)).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TaskClient {
    session: SessionHandle,
    layout: Layout,
    root: String,
}

impl TaskClient {
    /// A client of the installation at `root`.
    pub fn new(session: SessionHandle, root: &str) -> Result<TaskClient, TaskError> {
        Ok(TaskClient { session, layout: Layout::new(root)?, root: root.to_owned() })
    }

    /// Submits a task; resolves to its id once it is stored. A submission whose reply was lost
    /// is sent again with the same id, and the transaction cannot apply twice (the status node
    /// it creates already exists), so one call never makes two tasks.
    ///
    /// # Cancel safety
    /// The first try is sent when this is called (later ones only while the future is
    /// polled). Dropped before it resolves, the task may or may not have been stored, and its id
    /// goes with the future: use [`submit_as`](Self::submit_as) to be able to find out.
    pub fn submit<D: Into<Vec<u8>>>(&self, data: D) -> impl Future<Output = Result<TaskId, TaskError>> + 'static {
        self.submit_as(TaskId::random(), data)
    }

    /// Submits a task under an id chosen beforehand ([`TaskId::random`]). If this fails with
    /// an error whose outcome is unknown (the session closed with the submission in flight), the
    /// id still tells: [`state`](Self::state) says whether the task was stored. Submitting the
    /// same id again is safe: it never makes a second task while the first one's status exists.
    ///
    /// # Cancel safety
    /// The first try is sent when this is called (later ones only while the future is
    /// polled). Dropped before it resolves, the task may or may not have been stored:
    /// [`state`](Self::state) tells, and submitting the same id again is safe (see above).
    pub fn submit_as<D: Into<Vec<u8>>>(
        &self,
        id: TaskId,
        data: D,
    ) -> impl Future<Output = Result<TaskId, TaskError>> + 'static {
        let ops = vec![
            Op::Create { path: self.layout.task(id.as_str()), data: data.into(), mode: CreateMode::Persistent },
            Op::Create { path: self.layout.status_of(id.as_str()), data: Vec::new(), mode: CreateMode::Persistent },
        ];
        let session = self.session.clone();
        let layout = self.layout.clone();
        let backoff = self.session.retry_policy().backoff();
        // The first attempt is sent now, so that submissions leave in the order they were made.
        let submitted = retried(backoff, move || {
            let reply = session.multi(ops.clone());
            let (session, layout, ops, id) = (session.clone(), layout.clone(), ops.clone(), id.clone());
            async move {
                match reply.await {
                    Err(Error::Multi { source, .. }) if matches!(*source, Error::NoNode { .. }) => {
                        // First use of this root: make the directories, then send again.
                        if let Err(error) = layout.ensure(&session).await {
                            return Attempted::Failed(error);
                        }
                        submission(id, session.multi(ops).await)
                    }
                    answer => submission(id, answer),
                }
            }
        });
        async move { submitted.await.map_err(TaskError::from) }
    }

    /// Waits up to `timeout` for the task's result (a watch on its status node, not polling).
    /// The result stays stored until [`forget`](Self::forget), so asking twice is fine.
    ///
    /// # Cancel safety
    /// Cancel-safe: reads only; dropped (a `select!`, an outer timeout), its watch on the
    /// status node is withdrawn, and the result stays stored for a later call.
    pub fn result(
        &self,
        task: &TaskId,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<u8>, TaskError>> + 'static {
        let session = self.session.clone();
        let status = self.layout.status_of(task.as_str());
        let root = self.root.clone();
        let id = task.clone();
        let wait = async move {
            loop {
                let read = retried(session.retry_policy().backoff(), || {
                    // Withdrawn when this future is dropped (a timeout): nothing is left behind.
                    let (read, fired) = session.get_data_until_dropped(&status);
                    async move {
                        match read.await {
                            Ok(node) => Attempted::Done(Some((node, fired))),
                            Err(Error::NoNode { .. }) => Attempted::Done(None),
                            Err(error) => Attempted::judged(Err(error)),
                        }
                    }
                });
                match read.await? {
                    None => return Err(TaskError::UnknownTask { id: id.as_str().to_owned(), root }),
                    // Written twice: the runner gave up, and the data is its reason.
                    Some((node, _)) if node.stat.version > 1 => {
                        return Err(TaskError::Abandoned {
                            id: id.as_str().to_owned(),
                            reason: String::from_utf8_lossy(&node.data).into_owned(),
                        });
                    }
                    Some((node, _)) if node.stat.version > 0 => return Ok(node.data),
                    // Not finished: the watch fires when the result is written (or the
                    // connection state changes); then read again.
                    Some((_, fired)) => {
                        let _ = fired.await;
                    }
                }
            }
        };
        let id = task.clone();
        async move {
            match tokio::time::timeout(timeout, wait).await {
                Ok(result) => result,
                Err(_) => Err(TaskError::Timeout { id: id.as_str().to_owned(), waited: timeout }),
            }
        }
    }

    /// Where a task is now: looked up by its id (also after a submission whose outcome was
    /// unknown).
    ///
    /// # Cancel safety
    /// Cancel-safe: two reads, sent when this is called; dropping the future loses only the
    /// answer.
    pub fn state(&self, task: &TaskId) -> impl Future<Output = Result<TaskState, TaskError>> + 'static {
        let status = self.session.exists(&self.layout.status_of(task.as_str()));
        let waiting = self.session.exists(&self.layout.task(task.as_str()));
        async move {
            let or_none = |read: Result<Option<crate::session::requests::Stat>, Error>| match read {
                Ok(stat) => Ok(stat),
                Err(Error::NoNode { .. }) => Ok(None),
                Err(error) => Err(error),
            };
            let (status, waiting) = (or_none(status.await)?, or_none(waiting.await)?);
            Ok(match status {
                None => TaskState::Unknown,
                Some(stat) if stat.version > 1 => TaskState::Abandoned,
                Some(stat) if stat.version > 0 => TaskState::Finished,
                Some(_) if waiting.is_some() => TaskState::Waiting,
                Some(_) => TaskState::Assigned,
            })
        }
    }

    /// Deletes a task's status (and so its result). A task not yet finished is still run; its
    /// result is then dropped.
    ///
    /// # Cancel safety
    /// The delete is sent when this is called: dropping the future does not withdraw it, and
    /// the result is forgotten all the same.
    pub fn forget(&self, task: &TaskId) -> impl Future<Output = Result<(), TaskError>> + 'static {
        let deleted = self.session.delete(&self.layout.status_of(task.as_str()), None);
        async move {
            match deleted.await {
                Ok(()) | Err(Error::NoNode { .. }) => Ok(()),
                Err(error) => Err(error.into()),
            }
        }
    }

    /// Reads who is master, which workers are registered, and how many tasks wait or run.
    ///
    /// The directories are read one after another, not in one snapshot: a task assigned
    /// between the reads can be counted both waiting and assigned (or neither, when put back).
    ///
    /// # Cancel safety
    /// Cancel-safe: reads only (sent on the first poll); dropping the future loses only the
    /// answer.
    pub fn overview(&self) -> impl Future<Output = Result<Overview, TaskError>> + 'static {
        let session = self.session.clone();
        let layout = self.layout.clone();
        async move {
            let (masters, workers, tasks, dirs) = (
                session.children(&layout.master()),
                session.children(&layout.workers()),
                session.children(&layout.tasks()),
                session.children(&layout.assign()),
            );
            let or_empty = |listed: Result<crate::session::requests::Children, Error>| match listed {
                Ok(children) => Ok(children.names),
                Err(Error::NoNode { .. }) => Ok(Vec::new()),
                Err(error) => Err(error),
            };
            let masters = path::sequential_in_order(or_empty(masters.await)?);
            let mut workers = or_empty(workers.await)?;
            workers.sort();
            let pending = or_empty(tasks.await)?.len();
            let dirs = or_empty(dirs.await)?;
            let contents: Vec<_> = dirs.iter().map(|d| session.children(&layout.assign_dir(d))).collect();
            let master = match masters.first() {
                Some(first) => match session.get_data(&path::join(&layout.master(), first)).await {
                    Ok(node) => Some(String::from_utf8_lossy(&node.data).into_owned()),
                    Err(Error::NoNode { .. }) => None,
                    Err(error) => return Err(error.into()),
                },
                None => None,
            };
            let mut assigned = 0;
            for listed in contents {
                assigned += or_empty(listed.await)?.len();
            }
            Ok(Overview { master, workers, pending, assigned })
        }
    }
}

/// What a submission's answer means: a task that exists (made now, or by an earlier attempt or
/// call whose reply was lost) is submitted.
fn submission(id: TaskId, answer: Result<Vec<crate::session::requests::OpResult>, Error>) -> Attempted<TaskId> {
    match answer {
        Ok(_) => Attempted::Done(id),
        // Our own earlier attempt applied after all (or an earlier call with this id did): the
        // task exists (perhaps already moved on to a worker), or its status does. Ids are this
        // client's GUIDs or the caller's own choice, so nobody else's task has this one.
        Err(Error::Multi { source, .. }) if matches!(*source, Error::NodeExists { .. }) => {
            debug!(task = %id, "submission had applied before its reply was lost");
            Attempted::Done(id)
        }
        Err(error) if error.is_transient() => Attempted::Again(error),
        // Name the real problem (e.g. `DataTooLarge` for the task's path), not the transaction
        // around it.
        Err(Error::Multi { source, .. }) => Attempted::Failed(*source),
        Err(error) => Attempted::Failed(error),
    }
}
