//! [`TaskWorker`]: registers a worker, runs what is assigned to it, records the results.
//!
//! Owns: the worker's registration (`<root>/workers/<id>`, ephemeral, re-made on every new
//! session), watching its assignment directory (`<root>/assign/<id>/`), handing each task to
//! the user's actor as [`TaskAssigned`], at most `concurrency` at a time, and finishing a task
//! (result into `status/<task>`, assignment removed) in one transaction. Does not own who gets
//! which task: that is the master's.
//!
//! Registration state machine: `Unregistered → Registering → Registered{generation}`; when the
//! session (and so the registration) ends: `→ WaitingForRuns → Registering → ...`; and
//! `Draining → Stopped` after [`Stop`]. A task that started under a session that expired
//! still finishes, and its result counts if the task is still assigned here (the master may
//! have moved it meanwhile; then the result is dropped and [`WorkerEvent::TaskDiscarded`] says
//! so). The worker registers again only once such runs are over, so it never runs more than
//! its concurrency.

use std::collections::{BTreeSet, HashMap, HashSet};

use actix::prelude::*;
use tracing::{debug, info, warn};

use super::error::TaskError;
use super::layout::{Layout, TaskId, check_worker_id};
use super::messages::*;
use crate::error::Error;
use crate::recipe::guarded::{delete_own_ephemeral, delete_own_ephemeral_detached};
use crate::recipe::registration::{NextStep, again_after, next_step, register_ephemeral};
use crate::recipe::shell::Shell;
use crate::retry::{Attempted, Backoff, RetryPolicy, again_later, retried};
use crate::session::requests::Goodbye;
use crate::session::requests::Op;
use crate::session::{IntoActorFree, SessionEvent, SessionHandle, WatchEvent};

/// How a [`TaskWorker`] works.
#[derive(Clone, Debug)]
#[must_use]
pub struct TaskWorkerConfig {
    root: String,
    worker_id: String,
    runner: Recipient<TaskAssigned>,
    concurrency: usize,
    retry: Option<RetryPolicy>,
}

impl TaskWorkerConfig {
    /// A worker `worker_id` of the installation at `root` whose tasks `runner` runs (your
    /// actor: it is sent a [`TaskAssigned`] per task, and its reply is the task's result), one
    /// at a time.
    pub fn new(root: impl Into<String>, worker_id: impl Into<String>, runner: Recipient<TaskAssigned>) -> Self {
        TaskWorkerConfig { root: root.into(), worker_id: worker_id.into(), runner, concurrency: 1, retry: None }
    }

    crate::builder::setters! {
        /// How this worker retries a failed request; default: its session's policy
        /// ([`SessionConfig::with_retry`](crate::session::SessionConfig::with_retry)).
        with_retry(retry: RetryPolicy) => some;
    }

    /// Runs at most `n` tasks at once (at least 1). Registered as the worker's capacity, so the
    /// master assigns it no more than that.
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Registration {
    Unregistered,
    /// The registration ended while tasks were running: register again once they are done, so
    /// that the worker never runs more than its concurrency (the master does not count runs of
    /// an ended registration).
    WaitingForRuns,
    Registering {
        generation: u64,
    },
    Registered {
        generation: u64,
    },
    /// Stopping: no new tasks; deregister once the running ones are done.
    Draining,
    Stopped,
}

/// One worker; see `docs/recipes/master-worker.md`.
///
/// ```no_run
/// # fn demo(session: actix_zookeeper::SessionHandle, runner: actix::Recipient<actix_zookeeper::tasks::TaskAssigned>)
/// # -> Result<(), actix_zookeeper::tasks::TaskError> {
/// use actix::Actor;
/// use actix_zookeeper::tasks::{TaskWorker, TaskWorkerConfig};
///
/// let config = TaskWorkerConfig::new("/jobs", "worker-1", runner).with_concurrency(4); // runner: your actor
/// let worker = TaskWorker::new(session, config)?.start();
/// # Ok(()) }
/// ```
pub struct TaskWorker {
    layout: Layout,
    config: TaskWorkerConfig,
    registration: Registration,
    /// The newest session generation seen.
    generation: u64,
    /// Tasks handed to the runner and not yet settled, with the session generation of the
    /// registration they were started under (their result is written on that session only).
    running: HashMap<String, u64>,
    /// The newest session generation known to have ended.
    ended: u64,
    /// Assigned here and not started yet.
    backlog: BTreeSet<String>,
    /// Tasks whose result could not be written: not run again by this worker.
    failed: HashSet<String>,
    /// Our registration node's `czxid`: assignments older than it are forfeit.
    registered_at: i64,
    listing: bool,
    list_again: bool,
    /// Delay before the next retry of a failed registration or read; reset by a success.
    backoff: Backoff,
    stop_waiters: Vec<futures::channel::oneshot::Sender<()>>,
    /// Kept last: its lifeline must drop after everything else the actor holds.
    shell: Shell<WorkerEvent>,
}

impl TaskWorker {
    /// A worker; start it with `.start()`.
    pub fn new(session: SessionHandle, config: TaskWorkerConfig) -> Result<TaskWorker, TaskError> {
        let layout = Layout::new(&config.root)?;
        check_worker_id(&config.worker_id)?;
        let span = tracing::info_span!("zk.tasks.worker", root = %config.root, id = %config.worker_id);
        // Its health entry says how many tasks are running.
        let shell = Shell::new(session, span, config.retry).on_board("task-worker", &config.root);
        let backoff = shell.retry().backoff();
        Ok(TaskWorker {
            shell,
            layout,
            config,
            registration: Registration::Unregistered,
            generation: 0,
            running: HashMap::new(),
            ended: 0,
            backlog: BTreeSet::new(),
            failed: HashSet::new(),
            registered_at: 0,
            listing: false,
            list_again: false,
            backoff,
            stop_waiters: Vec::new(),
        })
    }

    fn tell(&mut self, event: WorkerEvent) {
        self.shell.tell(event);
    }

    /// A final error (no permission, a bad path): retrying cannot help. Tells subscribers once
    /// and stops (deregistering, like `Stop`).
    fn give_up(&mut self, error: Error, ctx: &mut Context<Self>) {
        warn!(parent: self.shell.span(), %error, "cannot go on; stopping");
        // A worker that vanished from the board would look healthy to a probe.
        self.shell.fail_for_good(error.to_string());
        self.tell(WorkerEvent::Failed { error: TaskError::ZooKeeper(error) });
        ctx.stop();
    }

    fn accepting(&self) -> bool {
        matches!(self.registration, Registration::Registered { .. })
    }

    /// Makes sure our directories exist, then creates our ephemeral registration. A node left by
    /// our own lost create is adopted; one of another live session means the id is taken.
    fn register(&mut self, ctx: &mut Context<Self>) {
        if matches!(self.registration, Registration::Draining | Registration::Stopped) {
            return;
        }
        let generation = self.generation;
        self.registration = Registration::Registering { generation };
        let parents = vec![self.layout.workers(), self.layout.assign_dir(&self.config.worker_id)];
        let node = self.layout.worker(&self.config.worker_id);
        let capacity = self.config.concurrency.to_string().into_bytes();
        let register = register_ephemeral(&self.shell.session().pinned(generation), parents, node.clone(), capacity);
        ctx.spawn(register.into_actor_free().map(move |registered, act: &mut Self, ctx| {
            if act.registration != (Registration::Registering { generation }) {
                return; // stopped, or a newer session is registering
            }
            match next_step(registered, &mut act.backoff, &node) {
                NextStep::Registered(czxid) => {
                    info!(parent: act.shell.span(), generation, "registered");
                    act.registration = Registration::Registered { generation };
                    act.registered_at = czxid;
                    act.tell(WorkerEvent::Registered { generation });
                    act.list(ctx);
                }
                NextStep::AwaitSession => {
                    debug!(parent: act.shell.span(), generation, "the session ended before the registration; registering on the next")
                }
                NextStep::GiveUp(error) => act.give_up(error, ctx),
                NextStep::RetryAfter { delay, taken } => {
                    if taken {
                        act.worker_id_taken();
                    }
                    let registering = Registration::Registering { generation };
                    again_after(ctx, delay, move |act: &Self| act.registration == registering, Self::register);
                }
            }
        }));
    }

    /// Our id is another live session's worker: told, and tried again later.
    fn worker_id_taken(&mut self) {
        let error = TaskError::WorkerIdTaken { id: self.config.worker_id.clone() };
        warn!(parent: self.shell.span(), %error, "cannot register; trying again");
        self.tell(WorkerEvent::RegistrationFailed { error });
    }

    /// Lists our assignments, leaving a watch; one listing at a time.
    fn list(&mut self, ctx: &mut Context<Self>) {
        if self.listing {
            self.list_again = true;
            return;
        }
        if !self.accepting() {
            return;
        }
        self.listing = true;
        let dir = self.layout.assign_dir(&self.config.worker_id);
        let listed = self.shell.session().children_watched_by(&dir, &self.shell.watcher(ctx));
        ctx.spawn(listed.into_actor(self).map(move |listed, act, ctx| {
            act.listing = false;
            match listed {
                Ok(children) => {
                    let assigned: BTreeSet<String> = children.names.into_iter().collect();
                    // Moved away before we started them.
                    act.backlog.retain(|t| assigned.contains(t));
                    act.failed.retain(|t| assigned.contains(t));
                    for task in assigned {
                        // An assignment of an earlier registration of ours is read again (and
                        // left alone again) rather than remembered by name: the master may put
                        // it back and assign the same task here anew, under the same name, before
                        // we list again. Its czxid tells, not its name.
                        if !act.running.contains_key(&task) && !act.failed.contains(&task) {
                            act.backlog.insert(task);
                        }
                    }
                    act.start_tasks(ctx);
                }
                Err(Error::NoNode { .. }) => {
                    // The master removed our directory while we were not registered: make it
                    // again, then list.
                    let made = act.shell.session().ensure_path(&dir);
                    act.listing = true;
                    ctx.spawn(made.into_actor(act).map(|_, act, ctx| {
                        act.listing = false;
                        act.list(ctx);
                    }));
                    return;
                }
                Err(error) => {
                    debug!(parent: act.shell.span(), %error, "cannot list assignments");
                    if let Err(error) = again_later(&mut act.backoff, error, ctx, |act: &mut Self, ctx| act.list(ctx)) {
                        act.give_up(error, ctx);
                        return;
                    }
                }
            }
            if std::mem::take(&mut act.list_again) {
                act.list(ctx);
            }
        }));
    }

    fn start_tasks(&mut self, ctx: &mut Context<Self>) {
        while self.accepting() && self.running.len() < self.config.concurrency {
            let Some(task) = self.backlog.pop_first() else { break };
            self.start(task, ctx);
        }
    }

    /// Reads the task's payload and hands it to the runner; its reply is the result.
    fn start(&mut self, task: String, ctx: &mut Context<Self>) {
        let Ok(task_id) = TaskId::parse(task.clone()) else {
            warn!(parent: self.shell.span(), %task, "not a task id; ignored");
            self.failed.insert(task);
            return;
        };
        let Registration::Registered { generation } = self.registration else { return };
        self.running.insert(task.clone(), generation);
        self.count_running();
        let read = self.shell.session().get_data(&self.layout.assignment(&self.config.worker_id, &task));
        let registered_at = self.registered_at;
        ctx.spawn(read.into_actor(self).then(move |read, act, ctx| {
            let handed = match read {
                Ok(node) if node.stat.czxid < registered_at => {
                    debug!(parent: act.shell.span(), %task, "assigned to our previous registration; the master takes it back");
                    None
                }
                Ok(node) => {
                    debug!(parent: act.shell.span(), %task, "task started");
                    act.tell(WorkerEvent::TaskStarted { task_id: task_id.clone() });
                    let assignment = Assignment { data: node.data.clone(), version: node.stat.version };
                    Some((act.config.runner.send(TaskAssigned { task_id, data: node.data }), assignment))
                }
                Err(error) => {
                    // Moved away (NoNode), or the connection dropped: the next listing
                    // decides.
                    debug!(parent: act.shell.span(), %task, %error, "cannot read the task");
                    if !matches!(error, Error::NoNode { .. })
                        && let Err(error) =
                            again_later(&mut act.backoff, error, ctx, |act: &mut Self, ctx| act.list(ctx))
                    {
                        act.give_up(error, ctx);
                    }
                    None
                }
            };
            async move {
                match handed {
                    Some((reply, assignment)) => Run::Done(reply.await, assignment),
                    None => Run::NotStarted,
                }
            }
            .into_actor_free()
            .map(move |run, act: &mut Self, ctx| match run {
                Run::Done(Ok(TaskOutcome::Done(result)), _) => {
                    act.finish(task, Record::Result(result), generation, ctx)
                }
                Run::Done(Ok(TaskOutcome::GiveUp { reason }), _) => {
                    act.finish(task, Record::GaveUp(reason), generation, ctx)
                }
                Run::Done(Ok(TaskOutcome::RetryLater { after }), assignment) => {
                    ctx.run_later(after, move |act, ctx| act.give_back(task, assignment, generation, ctx));
                }
                Run::Done(Err(_), _) => {
                    warn!(parent: act.shell.span(), "the task runner has stopped; the worker stops");
                    act.running.remove(&task);
                    act.count_running();
                    act.registration = Registration::Draining;
                    act.after_task(ctx);
                }
                Run::NotStarted => {
                    act.running.remove(&task);
                    act.count_running();
                    act.after_task(ctx);
                }
            })
        }));
    }

    /// Writes the result and removes the assignment in one transaction: the task is finished
    /// exactly once (the status node is written only at version 0), and only while it is still
    /// assigned here.
    ///
    /// The write is pinned to the session of the registration the run started under. The
    /// master takes back every assignment of an ended registration, so a result of one is not
    /// wanted; and while our session lives the task stays ours, so nobody else can have written
    /// its status. That is what makes a `BadVersion` after a lost reply our own earlier write:
    /// checked on any later session it could be another worker's.
    fn finish(&mut self, task: String, record: Record, generation: u64, ctx: &mut Context<Self>) {
        let session = self.shell.session().pinned(generation);
        let status = self.layout.status_of(&task);
        let assignment = self.layout.assignment(&self.config.worker_id, &task);
        let ended = generation <= self.ended;
        let gave_up = match &record {
            Record::GaveUp(reason) => Some(reason.clone()),
            Record::Result(_) => None,
        };
        // Not limited: a result given up on while our session lives would leave the task assigned
        // to us, and nobody would ever finish it.
        let backoff = self.shell.retry().without_attempt_limit().backoff();
        let write = async move {
            if ended {
                // Known before anything is sent: the registration is gone, the master has the
                // task back.
                return Finish::Discarded(DiscardReason::Reassigned);
            }
            // Only a result that may have been written can explain a `BadVersion` later; one
            // never sent (`Timeout`) means another finish got there.
            let unsure = std::cell::Cell::new(false);
            let recorded = retried(backoff, || {
                let mut ops = match &record {
                    Record::Result(result) => {
                        vec![Op::SetData { path: status.clone(), data: result.clone(), version: Some(0) }]
                    }
                    Record::GaveUp(reason) => vec![
                        Op::SetData { path: status.clone(), data: reason.clone().into_bytes(), version: Some(0) },
                        Op::SetData { path: status.clone(), data: reason.clone().into_bytes(), version: Some(1) },
                    ],
                };
                let delete_at = ops.len();
                ops.push(Op::Delete { path: assignment.clone(), version: None });
                let written = session.multi(ops);
                let (session, assignment, unsure) = (&session, &assignment, &unsure);
                async move {
                    match written.await {
                        Ok(_) => Attempted::Done(Finish::Recorded),
                        Err(Error::Multi { index: 0, source }) => {
                            let reason = match *source {
                                // Our session lives, so this is our own earlier attempt.
                                Error::BadVersion { .. } if unsure.get() => return Attempted::Done(Finish::Recorded),
                                Error::BadVersion { .. } => DiscardReason::AlreadyFinished,
                                Error::NoNode { .. } => DiscardReason::Forgotten,
                                other => return Attempted::Done(Finish::Failed(other.into())),
                            };
                            // Nobody needs the assignment any more.
                            let _ = session.delete(assignment, None).await;
                            Attempted::Done(Finish::Discarded(reason))
                        }
                        Err(Error::Multi { index, .. }) if index == delete_at => {
                            Attempted::Done(Finish::Discarded(DiscardReason::Reassigned))
                        }
                        // The session ended with the write's outcome unknown (its reply lost, or
                        // the request still on its way): it may have applied in the session's
                        // last moments, and nothing later can tell whose write the status holds.
                        Err(Error::SessionLost { .. }) => Attempted::Done(Finish::Unknown),
                        Err(error) if error.is_transient() => {
                            unsure.set(unsure.get() || error.outcome_unknown());
                            Attempted::Again(error)
                        }
                        Err(error) => Attempted::Done(Finish::Failed(error.into())),
                    }
                }
            });
            recorded.await.unwrap_or_else(|error| Finish::Failed(error.into()))
        };
        ctx.spawn(write.into_actor_free().map(move |finish, act: &mut Self, ctx| {
            act.running.remove(&task);
            act.count_running();
            if let Ok(task_id) = TaskId::parse(task.clone()) {
                match finish {
                    Finish::Recorded => match gave_up {
                        Some(reason) => {
                            info!(parent: act.shell.span(), task = %task_id, %reason, "task given up; recorded");
                            act.tell(WorkerEvent::TaskAbandoned { task_id, reason });
                        }
                        None => {
                            debug!(parent: act.shell.span(), task = %task_id, "task finished");
                            act.tell(WorkerEvent::TaskFinished { task_id });
                        }
                    },
                    Finish::Discarded(reason) => {
                        info!(parent: act.shell.span(), task = %task_id, ?reason, "result discarded");
                        act.tell(WorkerEvent::TaskDiscarded { task_id, reason });
                    }
                    Finish::Unknown => {
                        warn!(parent: act.shell.span(), task = %task_id, "the session ended before the result was confirmed");
                        act.tell(WorkerEvent::TaskOutcomeUnknown { task_id });
                    }
                    Finish::Failed(error) => {
                        warn!(parent: act.shell.span(), task = %task_id, %error, "cannot record the result");
                        act.failed.insert(task);
                        act.tell(WorkerEvent::TaskFailed { task_id, error });
                    }
                }
            }
            act.after_task(ctx);
        }));
    }

    /// Puts a task the runner wants to run later back in `tasks/` (payload and all), in one
    /// transaction with the removal of our assignment at the version read, on our
    /// registration's session: if that has ended, the master has put the task back already.
    fn give_back(&mut self, task: String, assignment: Assignment, generation: u64, ctx: &mut Context<Self>) {
        let session = self.shell.session().pinned(generation);
        let ops = vec![
            Op::Delete {
                path: self.layout.assignment(&self.config.worker_id, &task),
                version: Some(assignment.version),
            },
            Op::Create {
                path: self.layout.task(&task),
                data: assignment.data,
                mode: crate::session::requests::CreateMode::Persistent,
            },
        ];
        let returned = retried(self.shell.retry().backoff(), move || {
            let sent = session.multi(ops.clone());
            async move {
                match sent.await {
                    Ok(_) => Attempted::Done(true),
                    // Applied before its reply was lost (the assignment is gone, the task back).
                    Err(Error::Multi { index: 0, source }) if matches!(*source, Error::NoNode { .. }) => {
                        Attempted::Done(false)
                    }
                    Err(error) if error.is_transient() && !matches!(error, Error::SessionLost { .. }) => {
                        Attempted::Again(error)
                    }
                    Err(error) => Attempted::Failed(error),
                }
            }
        });
        let returned = async move { returned.await.unwrap_or(false) };
        ctx.spawn(returned.into_actor_free().map(move |returned, act: &mut Self, ctx| {
            act.running.remove(&task);
            act.count_running();
            if returned {
                if let Ok(task_id) = TaskId::parse(task.clone()) {
                    debug!(parent: act.shell.span(), task = %task_id, "task put back to run later");
                    act.tell(WorkerEvent::TaskReturned { task_id });
                }
            }
            act.after_task(ctx);
        }));
    }

    fn after_task(&mut self, ctx: &mut Context<Self>) {
        match self.registration {
            Registration::Draining if self.running.is_empty() => self.deregister(ctx),
            Registration::WaitingForRuns if self.running.is_empty() => self.register(ctx),
            _ => self.start_tasks(ctx),
        }
    }

    /// Registers now, or (while runs of an ended registration go on) once they are done.
    fn register_when_idle(&mut self, ctx: &mut Context<Self>) {
        if matches!(self.registration, Registration::Draining | Registration::Stopped) {
            return;
        }
        if self.running.is_empty() {
            self.register(ctx);
        } else {
            info!(parent: self.shell.span(), running = self.running.len(), "registering again once the running tasks end");
            self.registration = Registration::WaitingForRuns;
        }
    }

    /// Removes the registration (the master then puts back what we did not start) and our
    /// directory if it is empty, then stops.
    fn deregister(&mut self, ctx: &mut Context<Self>) {
        self.registration = Registration::Stopped;
        let session = self.shell.session().pinned(self.generation);
        let registration = delete_own_ephemeral(session.clone(), self.layout.worker(&self.config.worker_id));
        let dir = self.layout.assign_dir(&self.config.worker_id);
        let gone = async move {
            let _ = registration.await;
            // Fails (NotEmpty) when tasks are still assigned here: the master moves them and
            // removes the directory. On our registration's session only: once it has ended, the
            // master does that too, and a delete queued for the next session would hold the
            // stop until one comes (up to the request timeout, with the servers unreachable).
            let _ = session.delete(&dir, None).await;
        };
        ctx.wait(gone.into_actor_free().map(|(), act: &mut Self, ctx| {
            info!(parent: act.shell.span(), "deregistered and stopped");
            act.tell(WorkerEvent::Stopped);
            for waiter in act.stop_waiters.drain(..) {
                let _ = waiter.send(());
            }
            ctx.stop();
        }));
    }
}

enum Run {
    /// The runner's reply (an error: the runner has stopped), and the assignment it ran.
    Done(Result<TaskOutcome, MailboxError>, Assignment),
    /// Not handed to the runner (gone, forfeit, or unreadable).
    NotStarted,
}

/// An assignment as read when its run started: what to put back if the runner asks to retry.
struct Assignment {
    data: Vec<u8>,
    version: i32,
}

/// What a finished run records in the task's status.
enum Record {
    /// The result (the status is written once: version 1).
    Result(Vec<u8>),
    /// The runner gave up; the reason is written twice, so the status is at version 2: how a
    /// client tells a failure from a result without another node.
    GaveUp(String),
}

enum Finish {
    Recorded,
    Discarded(DiscardReason),
    Unknown,
    Failed(TaskError),
}

impl TaskWorker {
    /// Tells the session's health board how many tasks are running.
    fn count_running(&mut self) {
        if let Some(health) = self.shell.health() {
            health.set(crate::session::health::RecipeState::Consuming { in_flight: self.running.len() });
        }
    }
}

impl Actor for TaskWorker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.shell.hear_session(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        if self.registration != Registration::Stopped {
            // Stopped without Stop: deregister anyway, so the master re-assigns our tasks
            // now rather than after the session ends.
            let node = self.layout.worker(&self.config.worker_id);
            delete_own_ephemeral_detached(self.shell.session().pinned(self.generation), node);
        }
    }
}

impl Handler<SessionEvent> for TaskWorker {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        // The first sight of a new session is when to register.
        if event.moves_to_new_session(&mut self.generation) {
            if matches!(self.registration, Registration::Registered { .. }) {
                warn!(parent: self.shell.span(), generation = self.generation, "registration lost with the session");
                self.tell(WorkerEvent::RegistrationLost);
            }
            self.register_when_idle(ctx);
            return;
        }
        match event {
            SessionEvent::Expired { .. } => {
                if matches!(self.registration, Registration::Registered { .. }) {
                    warn!(parent: self.shell.span(), "session expired: registration lost");
                    self.registration = Registration::Unregistered;
                    self.tell(WorkerEvent::RegistrationLost);
                }
                // What was assigned to the ended registration is the master's again.
                self.backlog.clear();
                self.ended = self.ended.max(self.generation);
            }
            // A one-shot watch survives a reconnect, but a listing that failed meanwhile did not
            // leave one.
            SessionEvent::Reconnected { .. } => self.list(ctx),
            _ => {}
        }
    }
}

impl Handler<WatchEvent> for TaskWorker {
    type Result = ();

    fn handle(&mut self, _: WatchEvent, ctx: &mut Context<Self>) {
        self.list(ctx);
    }
}

impl Handler<Subscribe<WorkerEvent>> for TaskWorker {
    type Result = ();

    fn handle(&mut self, msg: Subscribe<WorkerEvent>, _: &mut Context<Self>) {
        if let Registration::Registered { generation } = self.registration {
            msg.recipient.do_send(WorkerEvent::Registered { generation });
        }
        self.shell.subscribers().add(msg.recipient);
    }
}

/// Stops taking tasks, lets the running ones finish, then deregisters and stops; resolves when
/// the worker has stopped. Unstarted assignments go back to the master.
impl Handler<Stop> for TaskWorker {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = futures::channel::oneshot::channel();
        self.stop_waiters.push(tx);
        if !matches!(self.registration, Registration::Draining | Registration::Stopped) {
            info!(parent: self.shell.span(), running = self.running.len(), "stopping: finishing running tasks first");
            self.registration = Registration::Draining;
            self.backlog.clear();
            if self.running.is_empty() {
                self.deregister(ctx);
            }
        }
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

crate::recipe::shell::on_the_shell!(TaskWorker => WorkerEvent);

impl Handler<Goodbye> for TaskWorker {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Goodbye, ctx: &mut Context<Self>) -> Self::Result {
        // The session is closing: stop as `Stop` does (running tasks finish and report,
        // then the registration goes), within the session's bound for goodbyes.
        <Self as Handler<Stop>>::handle(self, Stop, ctx)
    }
}
