//! [`MasterTerm`]: the master's work during one term of office.
//!
//! Owns: the master's view of workers, pending tasks and assignments, and the writes that
//! assign tasks and put back those of workers that left. Does not own the election: the
//! [`TaskMaster`](super::TaskMaster) runs one, and a fresh `MasterTerm` is started for every
//! term and stopped when it ends, so a term never inherits a view from an earlier one.
//!
//! The term is a level-triggered reconcile loop, in the style of a Kubernetes controller:
//! watch events only mark parts of the view *dirty*; one *pass* at a time re-reads what is
//! dirty, then writes what the view calls for (assign pending tasks to workers with room, put
//! back the tasks of workers that left). The first pass reads everything before writing
//! anything. Every write is fenced by the term ([`MasterFence`]), so a deposed master writes
//! nothing.
//!
//! State machine: `Rebuilding → Assigning → Ended`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use actix::prelude::*;
use futures::future::join_all;
use tracing::{debug, info, warn};

use super::backlog::Backlog;
use super::error::TaskError;
use super::layout::{Layout, TaskId};
use super::master_fence::MasterFence;
use super::messages::MasterEvent;
use super::strategy::{AssignStrategy, WorkerLoad};
use crate::election::StopLeading;
use crate::error::Error;
use crate::retry::{Backoff, RetryPolicy};
use crate::session::requests::CreateMode;
use crate::session::requests::Op;
use crate::session::requests::OpResult;
use crate::session::requests::PersistentWatchMode;
use crate::session::{IntoActorFree, SessionEvent, SessionHandle, WatchEvent, WatchEventKind, WatchId};

/// What must be read again before the next writes.
#[derive(Debug, Default)]
struct Dirty {
    workers: bool,
    /// List all of `tasks/` (at the start, after a reconnect, after a failed write).
    tasks: bool,
    /// Tasks whose creation was seen: read just these.
    new_tasks: BTreeSet<String>,
    /// The set of assignment directories.
    assign: bool,
    /// Assignment directories whose contents changed.
    dirs: BTreeSet<String>,
}

impl Dirty {
    fn everything() -> Dirty {
        Dirty { workers: true, tasks: true, assign: true, ..Dirty::default() }
    }

    fn any(&self) -> bool {
        self.workers || self.tasks || self.assign || !self.dirs.is_empty() || !self.new_tasks.is_empty()
    }

    fn merge(&mut self, other: Dirty) {
        self.workers |= other.workers;
        self.tasks |= other.tasks;
        self.new_tasks.extend(other.new_tasks);
        self.assign |= other.assign;
        self.dirs.extend(other.dirs);
    }
}

/// A worker's registration as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Registration {
    /// The registration node's `czxid`: assignments made before it belong to an earlier
    /// registration (an earlier session) of the same worker id, and are put back.
    czxid: i64,
    capacity: usize,
}

/// An assignment whose reply has not come yet counts as made after every registration.
const JUST_ASSIGNED: i64 = i64::MAX;

/// The term's view, built from ZooKeeper only.
#[derive(Debug, Default)]
struct View {
    /// Registered workers.
    workers: BTreeMap<String, Registration>,
    /// Assignment directories and the tasks in them, with each assignment's `czxid`.
    dirs: BTreeMap<String, BTreeMap<String, i64>>,
    /// Tasks waiting in `tasks/`, oldest first (by `czxid`), without their payloads.
    pending: Backlog,
}

/// An assignment directory's tasks, each with its `czxid` (`None`: gone before it was read).
type DirContents = Vec<(String, Option<i64>)>;

/// What one pass read.
#[derive(Debug, Default)]
struct Reads {
    /// `workers/` children and each one's registration (`None`: left meanwhile).
    workers: Option<Vec<(String, Option<Registration>)>>,
    /// `assign/` children.
    dirs: Option<Vec<String>>,
    /// Contents of assignment directories (`None`: the directory is gone), with the `czxid` of
    /// assignments not in the view before (`None`: gone meanwhile).
    dir_contents: Vec<(String, Option<DirContents>)>,
    /// `tasks/` children and each new task's `czxid` (`None`: gone meanwhile).
    tasks: Option<Vec<String>>,
    created: Vec<(String, Option<i64>)>,
}

/// What one write achieved.
enum Outcome {
    Assigned {
        task: String,
        worker: String,
        czxid: Option<i64>,
    },
    Requeued {
        task: String,
        worker: String,
    },
    DirRemoved,
    /// The term has ended: stop writing.
    Deposed,
    /// Something changed under us or the connection dropped: read again.
    Retry {
        dirty: Dirty,
        error: TaskError,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing is written before the first full read.
    Rebuilding,
    Assigning,
    Ended,
}

/// The master's work for one term; started by the [`TaskMaster`](super::TaskMaster)'s
/// election when leadership is won, sent [`StopLeading`] when it is suspended or lost.
pub(crate) struct MasterTerm {
    session: SessionHandle,
    layout: Layout,
    fence: MasterFence,
    strategy: Box<dyn AssignStrategy>,
    /// Weak: the master owns its election, which owns this term; a strong hold back would keep
    /// the master alive after its last address is dropped.
    report: actix::WeakRecipient<MasterEvent>,
    phase: Phase,
    view: View,
    dirty: Dirty,
    pass_running: bool,
    watches: Vec<WatchId>,
    /// Reading everything every second, for want of a watch.
    polling: bool,
    /// Delay before reading again after a failed pass; reset by a pass that succeeds.
    backoff: Backoff,
    span: tracing::Span,
}

/// Tells the master, if it still runs.
fn tell(report: &actix::WeakRecipient<MasterEvent>, event: MasterEvent) {
    if let Some(report) = report.upgrade() {
        report.do_send(event);
    }
}

impl MasterTerm {
    pub(crate) fn new(
        session: SessionHandle,
        layout: Layout,
        fence: MasterFence,
        strategy: Box<dyn AssignStrategy>,
        report: actix::WeakRecipient<MasterEvent>,
        retry: RetryPolicy,
    ) -> MasterTerm {
        let span = tracing::info_span!("zk.tasks.master_term", root = %layout.assign(), node = %fence.node, token = %fence.token);
        MasterTerm {
            session,
            layout,
            fence,
            strategy,
            report,
            phase: Phase::Rebuilding,
            view: View::default(),
            dirty: Dirty::everything(),
            pass_running: false,
            watches: Vec::new(),
            polling: false,
            // Only the delays: a term never gives up a pass (it holds its office until it ends).
            backoff: retry.backoff(),
            span,
        }
    }

    fn tell(&self, event: MasterEvent) {
        tell(&self.report, event);
    }

    /// Starts a pass unless one is running (it will look at the dirty marks when it ends).
    fn kick(&mut self, ctx: &mut Context<Self>) {
        if self.pass_running || self.phase == Phase::Ended || !self.dirty.any() {
            return;
        }
        self.pass_running = true;
        let dirty = std::mem::take(&mut self.dirty);
        let reads = self.read(&dirty);
        ctx.spawn(
            reads
                .into_actor_free()
                .then(move |reads, act: &mut Self, _| {
                    let (writes, read_failed) = match reads {
                        Ok(reads) => {
                            act.apply_reads(reads);
                            (act.write(), false)
                        }
                        Err(error) => {
                            debug!(parent: &act.span, %error, "reading the view failed; will read again");
                            act.dirty.merge(dirty);
                            (Vec::new(), true)
                        }
                    };
                    join_all(writes).into_actor_free().map(move |outcomes, _, _| (outcomes, read_failed))
                })
                .map(|(outcomes, read_failed), act: &mut Self, ctx| {
                    act.pass_running = false;
                    let write_failed = act.apply_outcomes(outcomes);
                    // After a failure, pause before reading again: a closed or disconnected
                    // session fails at once, and reading again at once would spin.
                    if read_failed || write_failed {
                        act.retry_later(ctx);
                    } else {
                        act.backoff.reset();
                        act.kick(ctx);
                    }
                }),
        );
    }

    fn retry_later(&mut self, ctx: &mut Context<Self>) {
        let delay = self.backoff.next_delay();
        ctx.run_later(delay, |act, ctx| act.kick(ctx));
    }

    /// Reads what `dirty` names: listings first (all sent at once), then every listed worker's
    /// registration (a worker may have registered again under the same id), the payloads of
    /// new tasks, and the `czxid`s of assignments not seen before.
    fn read(&self, dirty: &Dirty) -> impl Future<Output = Result<Reads, Error>> + 'static + use<> {
        let session = self.session.clone();
        let layout = self.layout.clone();
        let known_tasks: BTreeSet<String> = self.view.pending.names().cloned().collect();
        let known_assignments: BTreeMap<String, BTreeSet<String>> =
            // An assignment whose reply never came is read again.
            self.view
                .dirs
                .iter()
                .map(|(d, tasks)| {
                    (d.clone(), tasks.iter().filter(|(_, czxid)| **czxid != JUST_ASSIGNED).map(|(t, _)| t.clone()).collect())
                })
                .collect();
        let list_workers = dirty.workers.then(|| session.children(&layout.workers()));
        let list_dirs = dirty.assign.then(|| session.children(&layout.assign()));
        let list_tasks = dirty.tasks.then(|| session.children(&layout.tasks()));
        let seen_tasks: Vec<String> =
            dirty.new_tasks.iter().filter(|t| !known_tasks.contains(*t) && is_task(t)).cloned().collect();
        let dir_reads: Vec<_> =
            dirty.dirs.iter().map(|d| (d.clone(), session.children(&layout.assign_dir(d)))).collect();
        async move {
            let mut reads = Reads::default();
            let workers = match list_workers {
                Some(list) => Some(list.await?.names),
                None => None,
            };
            if let Some(list) = list_dirs {
                reads.dirs = Some(list.await?.names);
            }
            if let Some(list) = list_tasks {
                reads.tasks = Some(list.await?.names.into_iter().filter(|t| is_task(t)).collect());
            }
            let mut listings = Vec::new();
            for (dir, list) in dir_reads {
                listings.push((dir, absent_as_none(list.await)?.map(|c| c.names)));
            }
            let listed: BTreeSet<String> = listings.iter().map(|(d, _)| d.clone()).collect();
            let more_dirs: Vec<_> = reads
                .dirs
                .iter()
                .flatten()
                .filter(|d| !listed.contains(*d))
                .map(|d| (d.clone(), session.children(&layout.assign_dir(d))))
                .collect();
            // Second round, again all sent before any is awaited.
            let registrations: Vec<_> =
                workers.iter().flatten().map(|w| (w.clone(), session.get_data(&layout.worker(w)))).collect();
            // When each new task was submitted (its stat, not its payload: the payload is read
            // when the task is assigned).
            let stats: Vec<_> = reads
                .tasks
                .iter()
                .flatten()
                .filter(|t| !known_tasks.contains(*t) && !seen_tasks.contains(*t))
                .chain(&seen_tasks)
                .map(|t| (t.clone(), session.exists(&layout.task(t))))
                .collect();
            for (dir, list) in more_dirs {
                listings.push((dir, absent_as_none(list.await)?.map(|c| c.names)));
            }
            if workers.is_some() {
                let mut read = Vec::with_capacity(registrations.len());
                for (worker, node) in registrations {
                    let registration = absent_as_none(node.await)?
                        .map(|node| Registration { czxid: node.stat.czxid, capacity: parse_capacity(&node.data) });
                    read.push((worker, registration));
                }
                reads.workers = Some(read);
            }
            for (task, stat) in stats {
                reads.created.push((task, stat.await?.map(|stat| stat.czxid)));
            }
            // Third round: when each new assignment was made.
            let no_names = BTreeSet::new();
            let stats: Vec<_> = listings
                .into_iter()
                .map(|(dir, names)| {
                    let known = known_assignments.get(&dir).unwrap_or(&no_names);
                    let names = names.map(|names| {
                        names
                            .into_iter()
                            .map(|t| {
                                let stat = (!known.contains(&t)).then(|| session.exists(&layout.assignment(&dir, &t)));
                                (t, stat)
                            })
                            .collect::<Vec<_>>()
                    });
                    (dir, names)
                })
                .collect();
            for (dir, names) in stats {
                let Some(names) = names else {
                    reads.dir_contents.push((dir, None));
                    continue;
                };
                let mut contents = Vec::with_capacity(names.len());
                for (task, stat) in names {
                    let czxid = match stat {
                        // Known already: keep the view's czxid.
                        None => Some(JUST_ASSIGNED),
                        Some(stat) => stat.await?.map(|s| s.czxid),
                    };
                    contents.push((task, czxid));
                }
                reads.dir_contents.push((dir, Some(contents)));
            }
            Ok(reads)
        }
    }

    fn apply_reads(&mut self, reads: Reads) {
        let span = self.span.clone();
        let view = &mut self.view;
        if let Some(listed) = reads.workers {
            let listed: BTreeMap<String, Registration> =
                listed.into_iter().filter_map(|(w, registration)| registration.map(|r| (w, r))).collect();
            let previous = std::mem::replace(&mut view.workers, listed);
            for (worker_id, before) in &previous {
                if view.workers.get(worker_id).is_none_or(|now| now.czxid != before.czxid) {
                    info!(parent: &span, worker = %worker_id, "worker left");
                    tell(&self.report, MasterEvent::WorkerLeft { worker_id: worker_id.clone() });
                }
            }
            for (worker_id, now) in &view.workers {
                if previous.get(worker_id).is_none_or(|before| before.czxid != now.czxid) {
                    info!(parent: &span, worker = %worker_id, capacity = now.capacity, "worker joined");
                    tell(&self.report, MasterEvent::WorkerJoined { worker_id: worker_id.clone() });
                }
            }
        }
        if let Some(dirs) = reads.dirs {
            let dirs: BTreeSet<String> = dirs.into_iter().collect();
            view.dirs.retain(|d, _| dirs.contains(d));
        }
        for (dir, contents) in reads.dir_contents {
            let Some(contents) = contents else {
                view.dirs.remove(&dir);
                continue;
            };
            let before = view.dirs.remove(&dir).unwrap_or_default();
            let now = contents
                .into_iter()
                .filter_map(|(task, czxid)| {
                    let czxid = match czxid? {
                        JUST_ASSIGNED => before.get(&task).copied().unwrap_or(JUST_ASSIGNED),
                        czxid => czxid,
                    };
                    Some((task, czxid))
                })
                .collect();
            view.dirs.insert(dir, now);
        }
        if let Some(tasks) = reads.tasks {
            let listed: BTreeSet<String> = tasks.into_iter().collect();
            view.pending.retain(|t| listed.contains(t));
        }
        // Only this term's own assignments delete tasks, and not before reading them: a task
        // read now is still waiting.
        for (task, czxid) in reads.created {
            if let Some(czxid) = czxid {
                view.pending.insert(task, czxid);
            }
        }
        if self.phase == Phase::Rebuilding {
            self.phase = Phase::Assigning;
            let assigned = view.dirs.values().map(BTreeMap::len).sum();
            info!(parent: &span, workers = view.workers.len(), pending = view.pending.len(), assigned, "view rebuilt from ZooKeeper");
            tell(
                &self.report,
                MasterEvent::Rebuilt { workers: view.workers.len(), pending: view.pending.len(), assigned },
            );
        }
    }

    /// Sends the writes the view calls for (all at once) and returns their outcomes to await.
    fn write(&mut self) -> Vec<std::pin::Pin<Box<dyn Future<Output = Outcome>>>> {
        let mut writes: Vec<std::pin::Pin<Box<dyn Future<Output = Outcome>>>> = Vec::new();
        // Assignments whose registration ended (the worker left, or registered again on a new
        // session since): put them back; then remove directories of workers that left.
        let mut stale = Vec::new();
        let mut empty_orphans = Vec::new();
        for (dir, tasks) in &self.view.dirs {
            let registration = self.view.workers.get(dir);
            if registration.is_none() && tasks.is_empty() {
                empty_orphans.push(dir.clone());
            }
            for (task, czxid) in tasks {
                if registration.is_none_or(|r| *czxid < r.czxid) {
                    stale.push((dir.clone(), task.clone()));
                }
            }
        }
        for worker in empty_orphans {
            writes.push(Box::pin(self.remove_dir(worker)));
        }
        for (worker, task) in stale {
            writes.push(Box::pin(self.requeue(worker, task)));
        }
        // Pending tasks, oldest first, to workers with room: no more than there is room for
        // are looked at (the backlog is kept in order; nothing is sorted per pass).
        let room: usize = self
            .view
            .workers
            .iter()
            .map(|(w, registration)| {
                let assigned = self
                    .view
                    .dirs
                    .get(w)
                    .map_or(0, |tasks| tasks.values().filter(|czxid| **czxid >= registration.czxid).count());
                registration.capacity.saturating_sub(assigned)
            })
            .sum();
        for task in self.view.pending.oldest(room) {
            let candidates: Vec<WorkerLoad> = self
                .view
                .workers
                .iter()
                .map(|(w, registration)| WorkerLoad {
                    worker_id: w.clone(),
                    // Stale assignments are on their way back: they do not count.
                    assigned: self
                        .view
                        .dirs
                        .get(w)
                        .map_or(0, |tasks| tasks.values().filter(|czxid| **czxid >= registration.czxid).count()),
                    capacity: registration.capacity,
                })
                .filter(|w| w.assigned < w.capacity)
                .collect();
            if candidates.is_empty() {
                break;
            }
            let choice = self.strategy.pick(&task, &candidates).min(candidates.len() - 1);
            let worker = candidates[choice].worker_id.clone();
            if !self.view.pending.remove(&task) {
                continue;
            }
            writes.push(Box::pin(self.assign(task, worker)));
        }
        writes
    }

    /// Moves `task` from `tasks/` to `assign/<worker>/` in one fenced transaction (creating the
    /// worker's directory in it when the view has none), so it is never in both places or in
    /// neither. The view counts it as assigned at once, so that capacity holds within a pass.
    /// The payload is read here, for this task only, and the move is made at the version read.
    fn assign(&mut self, task: String, worker: String) -> impl Future<Output = Outcome> + 'static {
        let make_dir = !self.view.dirs.contains_key(&worker);
        self.view.dirs.entry(worker.clone()).or_default().insert(task.clone(), JUST_ASSIGNED);
        debug!(parent: &self.span, %task, %worker, "assigning");
        let (session, fence, layout) = (self.session.clone(), self.fence.clone(), self.layout.clone());
        let read = session.get_data(&layout.task(&task));
        async move {
            let retry = |worker: String| Dirty { tasks: true, assign: true, dirs: [worker].into(), ..Dirty::default() };
            let node = match read.await {
                Ok(node) => node,
                Err(error) => return Outcome::Retry { dirty: retry(worker), error: error.into() },
            };
            let mut ops = vec![Op::Delete { path: layout.task(&task), version: Some(node.stat.version) }];
            if make_dir {
                ops.push(Op::Create {
                    path: layout.assign_dir(&worker),
                    data: Vec::new(),
                    mode: CreateMode::Persistent,
                });
            }
            ops.push(Op::Create {
                path: layout.assignment(&worker, &task),
                data: node.data,
                mode: CreateMode::Persistent,
            });
            match fence.guarded_write(&session, ops).await.map_err(TaskError::from) {
                Ok(results) => {
                    // The server may answer a create inside a multi with an invalid stat
                    // (ZOOKEEPER-4026); then the next read of the directory asks for it.
                    let czxid = results.iter().rev().find_map(|r| match r {
                        OpResult::Created { stat, .. } if stat.czxid > 0 => Some(stat.czxid),
                        _ => None,
                    });
                    Outcome::Assigned { task, worker, czxid }
                }
                Err(error) => write_failed(error, retry(worker)),
            }
        }
    }

    /// Puts an unfinished task of a worker that left back in `tasks/` (payload and all), in one
    /// fenced transaction with the assignment's removal.
    fn requeue(&self, worker: String, task: String) -> impl Future<Output = Outcome> + 'static {
        let session = self.session.clone();
        let fence = self.fence.clone();
        let assignment = self.layout.assignment(&worker, &task);
        let back = self.layout.task(&task);
        let read = session.get_data(&assignment);
        async move {
            let dirty = || Dirty { tasks: true, dirs: [worker.clone()].into(), ..Dirty::default() };
            let node = match read.await {
                Ok(node) => node,
                Err(error) => return Outcome::Retry { dirty: dirty(), error: error.into() },
            };
            let ops = vec![
                Op::Delete { path: assignment, version: Some(node.stat.version) },
                Op::Create { path: back, data: node.data, mode: CreateMode::Persistent },
            ];
            match fence.guarded_write(&session, ops).await.map_err(TaskError::from) {
                Ok(_) => Outcome::Requeued { task, worker },
                Err(error) => write_failed(error, dirty()),
            }
        }
    }

    /// Removes the empty directory of a worker that left.
    fn remove_dir(&self, worker: String) -> impl Future<Output = Outcome> + 'static {
        let ops = vec![Op::Delete { path: self.layout.assign_dir(&worker), version: None }];
        let write = self.fence.guarded_write(&self.session, ops);
        async move {
            match write.await {
                Ok(_) => Outcome::DirRemoved,
                // Its worker came back and was given a task meanwhile, or another master's
                // cleanup got there first: the next read shows which.
                Err(error) => {
                    write_failed(error.into(), Dirty { assign: true, dirs: [worker].into(), ..Dirty::default() })
                }
            }
        }
    }

    /// Applies what the writes achieved; true when something must be read again after a pause.
    fn apply_outcomes(&mut self, outcomes: Vec<Outcome>) -> bool {
        let mut retry = false;
        for outcome in outcomes {
            match outcome {
                Outcome::Assigned { task, worker, czxid } => {
                    if let (Some(czxid), Some(dir)) = (czxid, self.view.dirs.get_mut(&worker)) {
                        if let Some(made) = dir.get_mut(&task) {
                            *made = czxid;
                        }
                    }
                    crate::metrics::task("assigned", self.layout.root());
                    if let Ok(task_id) = TaskId::parse(task) {
                        self.tell(MasterEvent::Assigned { task_id, worker_id: worker });
                    }
                }
                Outcome::Requeued { task, worker } => {
                    info!(parent: &self.span, %task, %worker, "task put back: its worker left");
                    crate::metrics::task("reassigned", self.layout.root());
                    if let Some(dir) = self.view.dirs.get_mut(&worker) {
                        dir.remove(&task);
                    }
                    self.dirty.new_tasks.insert(task.clone());
                    if let Ok(task_id) = TaskId::parse(task) {
                        self.tell(MasterEvent::Requeued { task_id, from_worker: worker });
                    }
                }
                Outcome::DirRemoved => self.dirty.assign = true,
                Outcome::Deposed => {
                    if self.phase != Phase::Ended {
                        warn!(parent: &self.span, "a fenced write found this term ended");
                        self.phase = Phase::Ended;
                    }
                }
                Outcome::Retry { dirty, error } => {
                    debug!(parent: &self.span, %error, "a write failed (it may have applied); reading again");
                    self.dirty.merge(dirty);
                    retry = true;
                }
            }
        }
        retry
    }

    /// Without a watch a change could go unseen: read everything every second instead, for
    /// the rest of the term.
    fn poll(&mut self, ctx: &mut Context<Self>) {
        if std::mem::replace(&mut self.polling, true) {
            return;
        }
        info!(parent: &self.span, "reading every second");
        ctx.run_interval(Duration::from_secs(1), |act, ctx| {
            act.dirty.merge(Dirty::everything());
            act.kick(ctx);
        });
        self.dirty.merge(Dirty::everything());
        self.kick(ctx);
    }

    fn on_watch(&mut self, event: &WatchEvent) {
        let assign = self.layout.assign();
        if event.path == self.layout.workers() {
            self.dirty.workers = true;
        } else if event.path == self.layout.tasks() {
            self.dirty.tasks = true;
        } else if let Some(task) = event.path.strip_prefix(&self.layout.tasks()).and_then(|r| r.strip_prefix('/')) {
            // The recursive watch names the task: read just it, rather than listing them all
            // (this term's own assignments delete tasks too).
            match event.kind {
                WatchEventKind::NodeCreated => {
                    self.dirty.new_tasks.insert(task.to_owned());
                }
                WatchEventKind::NodeDeleted => {
                    self.view.pending.remove(task);
                }
                _ => {}
            }
        } else if let Some(rest) = event.path.strip_prefix(&assign).and_then(|r| r.strip_prefix('/')) {
            match rest.split_once('/') {
                Some((dir, _task)) => {
                    self.dirty.dirs.insert(dir.to_owned());
                }
                None => {
                    self.dirty.assign = true;
                    self.dirty.dirs.insert(rest.to_owned());
                }
            }
        } else if event.path == assign {
            self.dirty.assign = true;
        }
    }
}

/// What a failed fenced write means for the term: over, or read `dirty` again (which also shows
/// whether a write whose outcome is unknown applied; the view is never updated on a guess).
fn write_failed(error: TaskError, dirty: Dirty) -> Outcome {
    match error {
        TaskError::Deposed { .. } => Outcome::Deposed,
        // The term's election node was ephemeral to the expired session, so the term is over
        // whether or not the write applied; the next term reads what is there.
        TaskError::OutcomeUnknown { source: Error::SessionLost { .. }, .. } => Outcome::Deposed,
        error => Outcome::Retry { dirty, error },
    }
}

/// `NoNode` as `None`: a node that went between listing and reading is not an error.
fn absent_as_none<T>(read: Result<T, Error>) -> Result<Option<T>, Error> {
    match read {
        Ok(value) => Ok(Some(value)),
        Err(Error::NoNode { .. }) => Ok(None),
        Err(err) => Err(err),
    }
}

/// A worker's registration data is its capacity in decimal; anything else counts as 1, so a
/// registration made by other software still gets work, one task at a time.
/// Whether a node under `tasks/` is a task: one another client left there under another name
/// is never assigned (a worker could not run it), and stays where it is.
fn is_task(name: &str) -> bool {
    let task = TaskId::parse(name).is_ok();
    if !task {
        debug!(node = name, "not a task id under tasks/; skipped");
    }
    task
}

pub(crate) fn parse_capacity(data: &[u8]) -> usize {
    std::str::from_utf8(data).ok().and_then(|s| s.trim().parse::<usize>().ok()).filter(|&n| n > 0).unwrap_or(1)
}

impl Actor for MasterTerm {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        info!(parent: &self.span, "term started: rebuilding the view from ZooKeeper");
        self.tell(MasterEvent::BecameMaster { fence: self.fence.clone() });
        self.session.subscribe(ctx.address().recipient());
        // The watches are in place before the first read, so nothing changes unseen.
        let me = ctx.address().recipient::<WatchEvent>();
        let watches = vec![
            self.session.add_watch(&self.layout.workers(), PersistentWatchMode::Node, me.clone()),
            self.session.add_watch(&self.layout.tasks(), PersistentWatchMode::Recursive, me.clone()),
            self.session.add_watch(&self.layout.assign(), PersistentWatchMode::Recursive, me),
        ];
        ctx.wait(join_all(watches).into_actor_free().map(|added, act: &mut Self, ctx| {
            for watch in added {
                match watch {
                    Ok(id) => act.watches.push(id),
                    Err(error) => {
                        warn!(parent: &act.span, %error, "could not watch");
                        act.poll(ctx);
                    }
                }
            }
            act.kick(ctx);
        }));
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        for id in self.watches.drain(..) {
            self.session.remove_watch(id);
        }
        info!(parent: &self.span, "term ended");
        self.tell(MasterEvent::MastershipEnded { token: self.fence.token });
    }
}

impl Handler<WatchEvent> for MasterTerm {
    type Result = ();

    fn handle(&mut self, event: WatchEvent, ctx: &mut Context<Self>) {
        if let WatchEventKind::WatchRefused(refusal) = event.kind {
            warn!(parent: &self.span, path = %event.path, ?refusal, "a watch could not be added again");
            self.watches.retain(|id| Some(*id) != event.watch);
            self.poll(ctx);
            return;
        }
        self.on_watch(&event);
        self.kick(ctx);
    }
}

impl Handler<SessionEvent> for MasterTerm {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        // Persistent watches can miss events while disconnected: read everything again.
        if matches!(event, SessionEvent::Reconnected { .. } | SessionEvent::Connected { .. }) {
            self.dirty.merge(Dirty::everything());
            self.kick(ctx);
        }
    }
}

impl Handler<StopLeading> for MasterTerm {
    type Result = ();

    fn handle(&mut self, _: StopLeading, ctx: &mut Context<Self>) {
        self.phase = Phase::Ended;
        ctx.stop();
    }
}
