//! [`TaskMasterHandle`] and [`TaskWorkerHandle`]: async methods over a master candidate and a
//! worker, for programs that want answers rather than messages. (Submitting tasks and reading
//! results is [`TaskClient`](super::TaskClient)'s, which needs no actor.)
//!
//! Owns: turning each request into one message and its reply into a `Result` (a stopped actor
//! is [`TaskError::Stopped`]). Does not own any state: the actors do. A handle holds a strong
//! address: the actor lives while a handle (or another address) does.

use std::future::Future;

use actix::prelude::*;

use super::error::TaskError;
use super::master::{TaskMaster, TaskMasterConfig};
use super::master_fence::MasterFence;
use super::messages::{CurrentTerm, MasterEvent, Stop, WorkerEvent};
use super::worker::{TaskWorker, TaskWorkerConfig};
use crate::recipe::shell::start_tagged;
use crate::reply::ask;
use crate::session::SessionHandle;
use crate::session::health::HealthTag;

/// A cloneable handle to one master candidate (a [`TaskMaster`] actor).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::tasks::TaskError> {
/// use actix_zookeeper::tasks::{TaskMasterConfig, TaskMasterHandle};
///
/// let master = TaskMasterHandle::start(session, TaskMasterConfig::new("/jobs"))?;
/// if let Some(fence) = master.term().await? {
///     println!("master with token {}", fence.token);
/// }
/// master.stop().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct TaskMasterHandle {
    addr: Addr<TaskMaster>,
    root: String,
    health: HealthTag,
}

impl TaskMasterHandle {
    /// Starts a [`TaskMaster`] for `config` on the current Arbiter; it enters the election at
    /// once. [`TaskError`] for an unusable root, before anything starts.
    pub fn start(session: SessionHandle, config: TaskMasterConfig) -> Result<TaskMasterHandle, TaskError> {
        let root = config.root().to_owned();
        let (addr, health) = start_tagged(TaskMaster::new(session, config)?);
        Ok(TaskMasterHandle { addr, root, health })
    }

    /// A handle to a running candidate of the installation at `root`.
    pub fn new(addr: Addr<TaskMaster>, root: impl Into<String>) -> TaskMasterHandle {
        TaskMasterHandle { addr, root: root.into(), health: HealthTag::default() }
    }

    /// The fence of the current term if this candidate is master now ([`CurrentTerm`]).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read of memory.
    pub fn term(&self) -> impl Future<Output = Result<Option<MasterFence>, TaskError>> + 'static {
        ask(&self.addr, CurrentTerm, TaskError::Stopped { root: self.root.clone() })
    }

    crate::recipe::handle::handle_basics!(TaskMaster => MasterEvent, subscribed: ", the current state first", health: "A master's entry is its election's (kind `election`, `Holding` while it is the master).");

    /// Leaves the election (a master ends its term and hands over at once) and stops the
    /// candidate ([`Stop`]). Sent when called; the future resolves once its election node
    /// is deleted and the candidate has stopped. While ZooKeeper cannot be reached, the delete is
    /// retried and the stop (and any request to the candidate) waits with it.
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        self.addr.do_send(Stop);
        crate::stop::stopped(&self.addr)
    }
}

/// A cloneable handle to one worker (a [`TaskWorker`] actor).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle, runner: actix::Recipient<actix_zookeeper::tasks::TaskAssigned>)
/// # -> Result<(), actix_zookeeper::tasks::TaskError> {
/// use actix_zookeeper::tasks::{TaskWorkerConfig, TaskWorkerHandle};
///
/// let worker = TaskWorkerHandle::start(session, TaskWorkerConfig::new("/jobs", "worker-1", runner))?;
/// // ... later: finish the running tasks, deregister, stop.
/// worker.stop().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct TaskWorkerHandle {
    addr: Addr<TaskWorker>,
    /// Keeps the worker's entry on the health board if it fails for good, until the last
    /// handle is dropped or one stops it.
    health: crate::session::health::HealthTag,
}

impl TaskWorkerHandle {
    /// Starts a [`TaskWorker`] for `config` on the current Arbiter.
    /// [`TaskError`] for an unusable root or worker id, before anything starts.
    pub fn start(session: SessionHandle, config: TaskWorkerConfig) -> Result<TaskWorkerHandle, TaskError> {
        let (addr, health) = start_tagged(TaskWorker::new(session, config)?);
        Ok(TaskWorkerHandle { addr, health })
    }

    /// A handle to a running worker.
    pub fn new(addr: Addr<TaskWorker>) -> TaskWorkerHandle {
        TaskWorkerHandle { addr, health: Default::default() }
    }

    crate::recipe::handle::handle_basics!(TaskWorker => WorkerEvent);

    /// Stops taking tasks, lets the running ones finish and report, deregisters, and stops
    /// ([`Stop`]). Sent when called; the future resolves once the worker has stopped, after
    /// its registration was deleted (the master then moves its unstarted assignments).
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        self.addr.do_send(Stop);
        self.health.release();
        crate::stop::stopped(&self.addr)
    }
}
