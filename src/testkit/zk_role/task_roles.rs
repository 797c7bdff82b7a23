//! The `task-worker` and `task-master` roles of master–worker task assignment.

use super::*;

pub(crate) async fn task_worker_role(
    session: &SessionHandle,
    id: &str,
    root: &str,
    concurrency: usize,
    work: Duration,
) -> Result<(), String> {
    let runner = Runner { id: id.to_owned(), work }.start();
    let config = TaskWorkerConfig::new(root, id, runner.recipient()).with_concurrency(concurrency);
    let worker = TaskWorker::new(session.clone(), config).map_err(|e| e.to_string())?.start();
    let printer = Printer::<WorkerEvent>::printing(&worker);
    until_killed((worker, printer)).await
}

/// The user's side of a worker: "runs" a task by sleeping, answers `<data>|by=<id>`.
pub(crate) struct Runner {
    pub(crate) id: String,
    pub(crate) work: Duration,
}

impl Actor for Runner {
    type Context = Context<Self>;
}

impl Handler<TaskAssigned> for Runner {
    type Result = ResponseFuture<TaskOutcome>;

    fn handle(&mut self, task: TaskAssigned, _: &mut Context<Self>) -> Self::Result {
        emit!("assigned", task = task.task_id);
        let result = format!("{}|by={}", String::from_utf8_lossy(&task.data), self.id).into_bytes();
        let work = self.work;
        Box::pin(async move {
            tokio::time::sleep(work).await;
            result.into()
        })
    }
}

impl Printed for WorkerEvent {
    fn print(self) {
        match self {
            WorkerEvent::TaskFinished { task_id } => emit!("finished", task = task_id),
            WorkerEvent::TaskDiscarded { task_id, reason } => {
                emit!("discarded", task = task_id, reason = compact(&reason))
            }
            other => emit!("worker-event", what = compact(&other)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// task-master

pub(crate) async fn task_master_role(session: &SessionHandle, id: &str, root: &str) -> Result<(), String> {
    let config = TaskMasterConfig::new(root).with_master_id(id);
    let master = TaskMaster::new(session.clone(), config).map_err(|e| e.to_string())?.start();
    let printer = Printer::<MasterEvent>::printing(&master);
    until_killed((master, printer)).await
}

impl Printed for MasterEvent {
    fn print(self) {
        emit!("master-event", what = compact(&self));
        if let MasterEvent::BecameMaster { fence } = self {
            emit!("term", token = fence.token.0);
        }
    }
}
