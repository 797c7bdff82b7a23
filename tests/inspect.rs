//! `zk-inspect` against a real server while recipes are active: a held lock with
//! waiters, an election, a queue with a claim, a running master–worker installation. Runs the
//! binary as a user would and checks what it prints, in plain words and as JSON.
#![cfg(all(feature = "testkit", feature = "cli"))]

use crate::common;

use std::process::Command;
use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::election::{ElectionActor, ElectionConfig};
use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::{ConsumerConfig, Delivery, Queue, QueueConsumerActor, Revoked, Worker};
use actix_zookeeper::tasks::{
    TaskAssigned, TaskClient, TaskMaster, TaskMasterConfig, TaskOutcome, TaskWorker, TaskWorkerConfig,
};
use actix_zookeeper::testkit::{TestZooKeeper, unique_root};
use common::*;

/// Runs `zk-inspect --server <connect> <args>`; its stdout, or a failure with its stderr.
fn inspect(connect: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_zk-inspect"))
        .arg("--server")
        .arg(connect)
        .args(args)
        .output()
        .expect("zk-inspect runs");
    assert!(out.status.success(), "zk-inspect {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

fn json(connect: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(inspect(connect, &all).trim()).expect("one JSON object")
}

/// Keeps every delivery without settling it (so its claim stays).
struct Keeper(Vec<Delivery>);

impl Actor for Keeper {
    type Context = Context<Self>;
}

impl Handler<Delivery> for Keeper {
    type Result = ();

    fn handle(&mut self, delivery: Delivery, _: &mut Context<Self>) {
        self.0.push(delivery);
    }
}

impl Handler<Revoked> for Keeper {
    type Result = ();

    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {}
}

/// Never finishes a task.
struct Sitter;

impl Actor for Sitter {
    type Context = Context<Self>;
}

impl Handler<TaskAssigned> for Sitter {
    type Result = ResponseFuture<TaskOutcome>;

    fn handle(&mut self, _: TaskAssigned, _: &mut Context<Self>) -> Self::Result {
        Box::pin(futures::future::pending())
    }
}

#[actix_rt::test]
async fn a_held_lock_with_waiters_is_shown_in_line_order() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let connect = zk.connect_string();
    let lock_path = format!("{}/lock", unique_root("inspect-lock"));
    let (s, _) = connected(SessionConfig::new(&connect)).await;
    let start = |id: &str| LockActor::new(s.clone(), LockConfig::new(&lock_path).with_participant_id(id)).start();
    let (alice, bob, carol) = (start("alice"), start("bob"), start("carol"));
    let held = alice.send(Acquire::default()).await.expect("actor").expect("alice holds");
    let _bob = actix_rt::spawn(bob.send(Acquire::default()));
    wait_until_async("bob in line", || async { children(&s, &lock_path).await.len() == 2 }).await;
    let _carol = actix_rt::spawn(carol.send(Acquire::default()));
    wait_until_async("carol in line", || async { children(&s, &lock_path).await.len() == 3 }).await;

    let plain = inspect(&connect, &["locks", &lock_path]);
    let lines: Vec<&str> = plain.lines().collect();
    assert_eq!(lines[0], format!("lock {lock_path}: 1 holding, 2 waiting"), "{plain}");
    assert!(lines[1].trim_start().starts_with("holds    alice"), "{plain}");
    assert!(lines[2].trim_start().starts_with("waits    bob"), "{plain}");
    assert!(lines[3].trim_start().starts_with("waits    carol"), "{plain}");
    assert!(lines[1].contains(&format!("token 0x{:x}", held.token.0)), "the holder's fencing token: {plain}");

    let report = json(&connect, &["locks", &lock_path]);
    let members = report["members"].as_array().expect("members");
    let ids: Vec<&str> = members.iter().map(|m| m["participant"].as_str().expect("id")).collect();
    assert_eq!(ids, ["alice", "bob", "carol"]);
    let holds: Vec<bool> = members.iter().map(|m| m["holds"].as_bool().expect("holds")).collect();
    assert_eq!(holds, [true, false, false]);
    assert_eq!(members[0]["token"].as_i64(), Some(held.token.0));
    let session_id = format!("0x{:x}", s.session().await.expect("session").session_id.0);
    assert!(members.iter().all(|m| m["session_id"] == session_id.as_str()), "{report}");

    alice.send(Release).await.expect("actor").expect("release");
    wait_until("bob holds", || {
        inspect(&connect, &["locks", &lock_path]).lines().nth(1).is_some_and(|l| l.contains("holds    bob"))
    })
    .await;
}

#[actix_rt::test]
async fn an_election_a_queue_and_a_master_worker_installation_are_shown() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let connect = zk.connect_string();
    let root = unique_root("inspect-more");
    let (s, _) = connected(SessionConfig::new(&connect)).await;

    // An election.
    let leader_path = format!("{root}/leader");
    let p0 = ElectionActor::new(s.clone(), ElectionConfig::new(&leader_path).with_participant_id("p0")).start();
    wait_until_async("p0 in line", || async { children(&s, &leader_path).await.len() == 1 }).await;
    let p1 = ElectionActor::new(s.clone(), ElectionConfig::new(&leader_path).with_participant_id("p1")).start();
    wait_until_async("p1 in line", || async { children(&s, &leader_path).await.len() == 2 }).await;
    let plain = inspect(&connect, &["election", &leader_path]);
    assert!(plain.starts_with(&format!("election {leader_path}: p0 leads")), "{plain}");
    assert!(plain.lines().nth(2).is_some_and(|l| l.trim_start().starts_with("follows  p1")), "{plain}");

    // A queue: three items, one claimed by consumer c1 (its worker keeps the delivery).
    let queue_path = format!("{root}/q");
    let queue = Queue::new(s.clone(), &queue_path);
    for i in 0..3 {
        queue.put(format!("item {i}")).await.expect("put");
    }
    let keeper = Keeper(Vec::new()).start();
    let consumer =
        ConsumerConfig::new(&queue_path).with_consumer_id("c1").with_concurrency(1).with_worker(Worker::new(&keeper));
    let _consumer = QueueConsumerActor::new(s.clone(), consumer).start();
    let claims = format!("{queue_path}/claims");
    wait_until_async("one claim", || async { children(&s, &claims).await.len() == 1 }).await;
    let report = json(&connect, &["queue", &queue_path, "--dead-letter", &format!("{root}/dead")]);
    assert_eq!(report["depth"], 3, "{report}");
    assert_eq!(report["claimed"].as_array().map(Vec::len), Some(1), "{report}");
    assert_eq!(report["claimed"][0]["consumer"], "c1", "{report}");
    assert_eq!(report["dead_letters"], 0, "{report}");
    assert!(report["oldest_age_ms"].as_u64().is_some(), "{report}");
    let plain = inspect(&connect, &["queue", &queue_path]);
    assert!(plain.starts_with(&format!("queue {queue_path}: 3 items, 1 claimed")), "{plain}");

    // A master–worker installation: a master, a worker of capacity 2 that never finishes, and
    // three tasks (two assigned, one pending).
    let tasks_root = format!("{root}/render");
    let _master =
        TaskMaster::new(s.clone(), TaskMasterConfig::new(&tasks_root).with_master_id("m1")).expect("master").start();
    let sitter = Sitter.start();
    let worker_config = TaskWorkerConfig::new(&tasks_root, "w1", sitter.recipient()).with_concurrency(2);
    let _worker = TaskWorker::new(s.clone(), worker_config).expect("worker").start();
    let client = TaskClient::new(s.clone(), &tasks_root).expect("client");
    for i in 0..3 {
        client.submit(format!("frame {i}")).await.expect("submit");
    }
    wait_until("two assigned, one pending", || {
        let report = json(&connect, &["tasks", &tasks_root]);
        report["assigned"] == 2 && report["pending"] == 1
    })
    .await;
    let report = json(&connect, &["tasks", &tasks_root]);
    assert_eq!(report["master"], "m1", "{report}");
    assert_eq!(report["workers"][0]["id"], "w1", "{report}");
    assert_eq!(report["workers"][0]["capacity"], 2, "{report}");
    assert_eq!(report["workers"][0]["load"], 2, "{report}");
    assert_eq!(report["finished"], 0, "{report}");
    let plain = inspect(&connect, &["tasks", &tasks_root]);
    assert!(
        plain.starts_with(&format!("tasks {tasks_root}: master m1; 1 pending, 2 assigned, 0 finished; 1 workers")),
        "{plain}"
    );
    drop((p0, p1));
    actix_rt::time::sleep(Duration::from_millis(50)).await;
}

#[test]
fn an_unreachable_server_is_a_clear_error_not_a_hang() {
    use std::process::Stdio;
    use std::time::Instant;
    let mut child = Command::new(env!("CARGO_BIN_EXE_zk-inspect"))
        .args(["--server", "127.0.0.1:1", "--timeout", "2", "locks", "/lock"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zk-inspect runs");
    // Bounded: a hang fails the test (and stops the child) instead of hanging the run.
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("zk-inspect's status").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("zk-inspect against an unreachable server did not exit within 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("zk-inspect's output");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("zk-inspect: 127.0.0.1:1: no session within 2 s"), "{stderr}");
}

#[actix_rt::test]
async fn watch_mode_reads_again_every_second() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let connect = zk.connect_string();
    let lock_path = format!("{}/lock", unique_root("inspect-watch"));
    let (s, _) = connected(SessionConfig::new(&connect)).await;
    let lock = LockActor::new(s.clone(), LockConfig::new(&lock_path).with_participant_id("alice")).start();
    lock.send(Acquire::default()).await.expect("actor").expect("alice holds");
    let mut child = Command::new(env!("CARGO_BIN_EXE_zk-inspect"))
        .args(["--server", &connect, "--watch", "--json", "locks", &lock_path])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("zk-inspect runs");
    actix_rt::time::sleep(Duration::from_millis(1500)).await;
    lock.send(Release).await.expect("actor").expect("release");
    actix_rt::time::sleep(Duration::from_millis(1500)).await;
    child.kill().expect("stop watching");
    let out = child.wait_with_output().expect("output");
    let reports: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    assert!(reports.len() >= 2, "{} reports in 3 s", reports.len());
    let holders = |r: &serde_json::Value| r["members"].as_array().map_or(0, |m| m.len());
    assert_eq!(holders(&reports[0]), 1, "alice held at first");
    assert_eq!(holders(reports.last().expect("a report")), 0, "and the watch saw her let go");
}

#[actix_rt::test]
async fn read_write_locks_and_semaphores_show_every_holder() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let connect = zk.connect_string();
    let root = unique_root("inspect-rw-sem");
    let (s, _) = connected(SessionConfig::new(&connect)).await;

    // Two readers hold; a writer waits behind them; a reader after the writer waits too.
    let rw = format!("{root}/rw");
    let lock = |kind, id: &str| {
        LockActor::new(s.clone(), LockConfig::new(&rw).with_kind(kind).with_participant_id(id)).start()
    };
    let (r1, r2, w, r3) = (
        lock(LockKind::Read, "r1"),
        lock(LockKind::Read, "r2"),
        lock(LockKind::Write, "w"),
        lock(LockKind::Read, "r3"),
    );
    r1.send(Acquire::default()).await.expect("actor").expect("r1 reads");
    r2.send(Acquire::default()).await.expect("actor").expect("r2 reads");
    let _w = actix_rt::spawn(w.send(Acquire::default()));
    wait_until_async("the writer in line", || async { children(&s, &rw).await.len() == 3 }).await;
    let _r3 = actix_rt::spawn(r3.send(Acquire::default()));
    wait_until_async("r3 in line", || async { children(&s, &rw).await.len() == 4 }).await;
    let report = json(&connect, &["locks", &rw]);
    assert_eq!(report["kind"], "read-write lock", "{report}");
    let line: Vec<(String, bool)> = report["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| (m["participant"].as_str().expect("id").to_owned(), m["holds"].as_bool().expect("holds")))
        .collect();
    let expected = [("r1", true), ("r2", true), ("w", false), ("r3", false)].map(|(id, holds)| (id.to_owned(), holds));
    assert_eq!(line, expected, "{report}");

    // A semaphore of two leases, both taken.
    let sem = format!("{root}/sem");
    let lease = || SemaphoreActor::new(s.clone(), SemaphoreConfig::new(&sem, 2)).start();
    let (a, b) = (lease(), lease());
    a.send(Acquire::default()).await.expect("actor").expect("a lease");
    b.send(Acquire::default()).await.expect("actor").expect("another lease");
    let plain = inspect(&connect, &["locks", &sem]);
    assert!(plain.starts_with(&format!("semaphore {sem}: 2 holding, 0 waiting")), "{plain}");
}

/// `services` shows each service's instances (ours and a node that is not one), with address,
/// type, enabled and owner; `node` shows a kept node's mode and owner, also under its protected
/// name, and says `missing` for none.
#[actix_rt::test]
async fn services_and_kept_nodes_are_shown() {
    use actix_zookeeper::discovery::{DiscoveryConfig, ServiceDiscovery, ServiceInstance};
    use actix_zookeeper::persistent::{PersistentNodeConfig, PersistentNodeHandle};

    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let connect = zk.connect_string();
    let root = unique_root("inspect-services");
    let (s, _) = connected(SessionConfig::new(&connect)).await;
    let base = format!("{root}/services");
    let d = ServiceDiscovery::new(s.clone(), DiscoveryConfig::new(&base)).expect("discovery");
    let a = d.register(ServiceInstance::new("billing", "a").with_address("10.0.0.1").with_port(80)).await.expect("a");
    let b = d.register(ServiceInstance::new("billing", "b").with_enabled(false)).await.expect("b");
    s.create(&format!("{base}/billing/junk"), b"not json".to_vec(), CreateMode::Persistent).await.expect("junk");
    let session_id = format!("0x{:x}", s.session().await.expect("session").session_id.0);

    let report = json(&connect, &["services", &base]);
    let instances = report["services"][0]["instances"].as_array().expect("instances").clone();
    assert_eq!(report["services"][0]["name"], "billing", "{report}");
    assert_eq!(instances.len(), 3, "{report}");
    assert_eq!((&instances[0]["id"], &instances[0]["address"]), (&"a".into(), &"10.0.0.1:80".into()), "{report}");
    assert_eq!((&instances[0]["enabled"], &instances[0]["session_id"]), (&true.into(), &session_id.as_str().into()));
    assert_eq!((&instances[1]["id"], &instances[1]["enabled"]), (&"b".into(), &false.into()), "{report}");
    assert!(instances[2]["unreadable"].as_str().is_some_and(|why| why.contains("not JSON")), "{report}");
    let plain = inspect(&connect, &["services", &base]);
    assert!(plain.starts_with(&format!("services {base}: 1\n  billing: 3 instances")), "{plain}");
    assert!(plain.contains("10.0.0.1:80") && plain.contains("disabled") && plain.contains("junk"), "{plain}");

    let kept = format!("{root}/kept/host");
    let config = PersistentNodeConfig::new(&kept, CreateMode::Ephemeral).with_data("hello").with_protection(true);
    let node = PersistentNodeHandle::start(s.clone(), config).expect("node");
    let actual = node.wait_for_initial_create(Some(Duration::from_secs(20))).await.expect("created");
    assert_ne!(actual, kept, "protected");
    let report = json(&connect, &["node", &kept]);
    assert_eq!((&report["path"], &report["kind"]), (&actual.as_str().into(), &"ephemeral".into()), "{report}");
    assert_eq!((&report["session_id"], &report["data"]), (&session_id.as_str().into(), &"hello".into()), "{report}");
    let plain = inspect(&connect, &["node", &format!("{root}/nothing")]);
    assert_eq!(plain.trim(), format!("node {root}/nothing: missing"));
    node.stop().await;
    a.unregister().await.expect("unregistered");
    b.unregister().await.expect("unregistered");
}
