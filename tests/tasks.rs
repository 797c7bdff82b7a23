//! Master–worker task assignment against a real ZooKeeper: every task finished exactly once,
//! every result delivered, nothing left behind, across master expiry, worker expiry, a server
//! restart, a lost submission reply and an ensemble member's death.
#![cfg(feature = "testkit")]

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::tasks::*;
use actix_zookeeper::testkit::{TestZooKeeper, ZkEnsemble, ZkServer, expire_session, unique_root};
use common::*;
use futures::future::join_all;

const WAIT: Duration = Duration::from_secs(60);
const ROOT: &str = "/jobs";

/// What the runners saw, shared by all workers of a test.
#[derive(Clone, Default)]
struct Ledger {
    /// Runs in progress, by task.
    running: Arc<Mutex<HashSet<TaskId>>>,
    /// Tasks that started while another run of the same task was in progress.
    overlaps: Arc<Mutex<Vec<TaskId>>>,
    /// Completed runs per task.
    runs: Arc<Mutex<HashMap<TaskId, usize>>>,
    /// Runs in progress and the most seen at once, per worker.
    now: Arc<Mutex<HashMap<String, usize>>>,
    most: Arc<Mutex<HashMap<String, usize>>>,
}

impl Ledger {
    fn runs_of(&self, task: &TaskId) -> usize {
        self.runs.lock().expect("runs").get(task).copied().unwrap_or(0)
    }
}

/// Runs tasks for one worker: waits `delay`, answers `done:<payload>`. The first `hold` tasks
/// wait until the test releases them.
struct Runner {
    worker: String,
    ledger: Ledger,
    delay: Duration,
    hold: Arc<AtomicUsize>,
    release: Arc<tokio::sync::Notify>,
}

impl Actor for Runner {
    type Context = Context<Self>;
}

impl Handler<TaskAssigned> for Runner {
    type Result = ResponseFuture<Vec<u8>>;

    fn handle(&mut self, task: TaskAssigned, _: &mut Context<Self>) -> Self::Result {
        let ledger = self.ledger.clone();
        if !ledger.running.lock().expect("running").insert(task.task_id.clone()) {
            ledger.overlaps.lock().expect("overlaps").push(task.task_id.clone());
        }
        {
            let mut now = ledger.now.lock().expect("now");
            let n = now.entry(self.worker.clone()).or_default();
            *n += 1;
            let mut most = ledger.most.lock().expect("most");
            let m = most.entry(self.worker.clone()).or_default();
            *m = (*m).max(*n);
        }
        let held = self.hold.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |h| h.checked_sub(1)).is_ok();
        let release = self.release.clone();
        let delay = self.delay;
        let worker = self.worker.clone();
        Box::pin(async move {
            if held {
                release.notified().await;
            } else if !delay.is_zero() {
                actix_rt::time::sleep(delay).await;
            }
            ledger.running.lock().expect("running").remove(&task.task_id);
            *ledger.now.lock().expect("now").entry(worker).or_default() -= 1;
            *ledger.runs.lock().expect("runs").entry(task.task_id.clone()).or_default() += 1;
            [b"done:".as_slice(), &task.data].concat()
        })
    }
}

/// One test's installation: sessions under one chroot, shared ledger.
struct Rig {
    connect: String,
    chroot: String,
    ledger: Ledger,
    timeout: Duration,
}

struct Worker {
    addr: Addr<TaskWorker>,
    session: SessionHandle,
    events: Recorded<WorkerEvent>,
    release: Arc<tokio::sync::Notify>,
}

struct Master {
    addr: Addr<TaskMaster>,
    session: SessionHandle,
    events: Recorded<MasterEvent>,
}

impl Rig {
    fn new(connect: String, test: &str) -> Rig {
        Rig { connect, chroot: unique_root(test), ledger: Ledger::default(), timeout: Duration::from_secs(4) }
    }

    async fn session(&self) -> SessionHandle {
        let config = SessionConfig::new(self.connect.clone())
            .with_chroot(self.chroot.clone())
            .with_session_timeout(self.timeout);
        connected(config).await.0
    }

    async fn master(&self, id: &str) -> Master {
        let session = self.session().await;
        let events = Recorded::<MasterEvent>::start();
        let config = TaskMasterConfig::new(ROOT).with_master_id(id);
        let addr = TaskMaster::new(session.clone(), config).expect("valid master config").start();
        addr.do_send(SubscribeMaster { recipient: events.recipient.clone() });
        Master { addr, session, events }
    }

    async fn worker(&self, id: &str, concurrency: usize, delay: Duration, hold: usize) -> Worker {
        let session = self.session().await;
        let release = Arc::new(tokio::sync::Notify::new());
        let runner = Runner {
            worker: id.to_owned(),
            ledger: self.ledger.clone(),
            delay,
            hold: Arc::new(AtomicUsize::new(hold)),
            release: release.clone(),
        }
        .start();
        let events = Recorded::<WorkerEvent>::start();
        let config = TaskWorkerConfig::new(ROOT, id).with_concurrency(concurrency);
        let addr = TaskWorker::new(session.clone(), config, runner.recipient()).expect("valid worker config").start();
        addr.do_send(SubscribeWorker { recipient: events.recipient.clone() });
        events.wait_for(0, WAIT, |e| matches!(e, WorkerEvent::Registered { .. })).await;
        Worker { addr, session, events, release }
    }

    async fn client(&self) -> TaskClient {
        TaskClient::new(self.session().await, ROOT).expect("valid client")
    }
}

/// Submits `n` tasks (all requests sent before any reply is awaited); returns (id, payload).
async fn submit(client: &TaskClient, tag: &str, n: usize) -> Vec<(TaskId, Vec<u8>)> {
    let payloads: Vec<Vec<u8>> = (0..n).map(|i| format!("{tag}-{i}").into_bytes()).collect();
    let submitted: Vec<_> = payloads.iter().map(|p| client.submit(p.clone())).collect();
    let ids = join_all(submitted).await;
    ids.into_iter().zip(payloads).map(|(id, p)| (id.expect("submitted"), p)).collect()
}

/// Waits for every result and checks it.
async fn expect_results(client: &TaskClient, tasks: &[(TaskId, Vec<u8>)]) {
    let results = join_all(tasks.iter().map(|(id, _)| client.result(id, Duration::from_secs(120)))).await;
    for ((id, payload), result) in tasks.iter().zip(results) {
        let result = result.unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(result, [b"done:".as_slice(), payload].concat(), "{id}");
    }
}

async fn children(s: &SessionHandle, dir: &str) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    loop {
        match s.children(dir).await {
            Ok(c) => return c.names,
            Err(Error::NoNode { .. }) => return Vec::new(),
            Err(e) if e.is_connection_problem() && Instant::now() < deadline => {
                actix_rt::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("{dir}: {e}"),
        }
    }
}

/// Every task's status was written exactly once (version 1), and nothing is left waiting or
/// assigned.
async fn assert_finished_and_clean(s: &SessionHandle, tasks: &[(TaskId, Vec<u8>)]) {
    for (id, _) in tasks {
        let status = s.get_data(&format!("{ROOT}/status/{id}")).await.expect("status");
        assert_eq!(status.stat.version, 1, "{id}: the result is written exactly once");
    }
    assert_eq!(children(s, &format!("{ROOT}/tasks")).await, Vec::<String>::new(), "nothing left under tasks/");
    for dir in children(s, &format!("{ROOT}/assign")).await {
        let left = children(s, &format!("{ROOT}/assign/{dir}")).await;
        assert!(left.is_empty(), "nothing left assigned to {dir}: {left:?}");
    }
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen within {WAIT:?}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn current_master(masters: &[&Master]) -> usize {
    let deadline = Instant::now() + WAIT;
    loop {
        for (i, m) in masters.iter().enumerate() {
            if m.addr.send(CurrentTerm).await.expect("master").is_some() {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "nobody became master");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix_rt::test]
async fn two_masters_four_workers_two_clients_500_tasks_each_finished_once() {
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let rig = Rig::new(zk.connect_string(), "tasks-500");
    let masters = [rig.master("m1").await, rig.master("m2").await];
    let mut workers = Vec::new();
    for i in 0..4 {
        workers.push(rig.worker(&format!("w{i}"), 4, Duration::from_millis(1), 0).await);
    }
    let clients = [rig.client().await, rig.client().await];
    let (a, b) = futures::join!(submit(&clients[0], "a", 250), submit(&clients[1], "b", 250));
    futures::join!(expect_results(&clients[0], &a), expect_results(&clients[1], &b));

    let all: Vec<_> = a.iter().chain(&b).cloned().collect();
    for (id, _) in &all {
        assert_eq!(rig.ledger.runs_of(id), 1, "{id} ran exactly once");
    }
    assert!(rig.ledger.overlaps.lock().expect("overlaps").is_empty());
    for (worker, most) in rig.ledger.most.lock().expect("most").iter() {
        assert!(*most <= 4, "{worker} ran {most} tasks at once (concurrency 4)");
    }
    let used = rig.ledger.most.lock().expect("most").len();
    assert_eq!(used, 4, "every worker got work");
    let observer = rig.session().await;
    assert_finished_and_clean(&observer, &all).await;

    // Both masters took part; exactly one is master.
    let leaders = join_all(masters.iter().map(|m| m.addr.send(CurrentTerm))).await;
    assert_eq!(leaders.iter().filter(|t| matches!(t, Ok(Some(_)))).count(), 1);

    // Workers that stop deregister and remove their (empty) directories.
    for w in &workers {
        w.addr.send(StopWorker).await.expect("worker stops");
    }
    let s = &workers[0].session;
    assert!(children(s, &format!("{ROOT}/workers")).await.is_empty());
    let deadline = Instant::now() + WAIT;
    while !children(s, &format!("{ROOT}/assign")).await.is_empty() {
        assert!(Instant::now() < deadline, "assignment directories left behind");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    for m in &masters {
        m.addr.send(StopMaster).await.expect("master stops");
    }
}
