//! The handles of the queue consumer, the task master and worker, the cache, the group member
//! and the shared count, against a real ZooKeeper: each method does what its doc says, `stop()`
//! resolves only once what it promises has happened (checked right after it resolves, never
//! after a sleep), and a stopped actor is a typed error. Also: `ConsumerConfig::with_workers`
//! only describes, `QueueConsumerHandle::idle` and `Queue::drained`.
#![cfg(feature = "testkit")]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::cache::{CacheConfig, CacheError, CacheEvent, CacheHandle, CacheScope};
use actix_zookeeper::counter::{CounterError, SharedCountConfig, SharedCountHandle};
use actix_zookeeper::group::{GroupConfig, GroupError, GroupEvent, GroupMemberHandle};
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::{ConsumerConfig, Delivery, ITEM_PREFIX, Queue, QueueConsumerHandle, QueueError, Revoked};
use actix_zookeeper::tasks::{
    MasterEvent, TaskAssigned, TaskClient, TaskMasterConfig, TaskMasterHandle, TaskOutcome, TaskWorkerConfig,
    TaskWorkerHandle, WorkerEvent,
};
use actix_zookeeper::testkit::{Direction, TestZooKeeper, unique_root};
use common::*;
use futures::StreamExt;

/// Resolves `what` within 20 s, or fails the test.
async fn next_event<E: std::fmt::Debug>(events: &mut EventStream<E>, what: &str, mut wanted: impl FnMut(&E) -> bool) {
    bounded(what, async {
        while let Some(event) = events.next().await {
            if wanted(&event.expect("no event missed")) {
                return;
            }
        }
        panic!("the events ended before {what}");
    })
    .await
}

#[actix_rt::test]
async fn a_shared_count_handle_reads_writes_adds_tells_and_stops() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("count-handle");
    let s = session_at(&zk.connect_string(), &root).await;
    let count = SharedCountHandle::start(s.clone(), SharedCountConfig::new("/c").with_seed(5)).expect("count");
    let mut events = count.events();
    let now = bounded("get", count.get()).await.expect("the seeded count");
    assert_eq!(now.value, 5);
    assert_eq!(count.try_set(7, now).await, Ok(true), "nobody wrote since the read");
    assert_eq!(count.try_set(9, now).await, Ok(false), "a stale expected count loses");
    let set = count.set(10).await.expect("set");
    assert_eq!(set.value, 10);
    let added = count.add(-3).await.expect("add");
    assert_eq!(added.value, 7);
    assert_eq!(added.version, set.version + 1);
    next_event(&mut events, "the add told", |changed| changed.value == 7 && changed.version == added.version).await;
    let stored = s.get_data("/c").await.expect("the node");
    assert_eq!(actix_zookeeper::counter::decode_count("/c", &stored.data), Ok(7), "the node holds what add answered");

    bounded("the stop", count.stop()).await;
    assert!(!count.addr().connected(), "stopped once stop() resolved");
    assert_eq!(count.get().await, Err(CounterError::Stopped));
    assert_eq!(count.add(1).await, Err(CounterError::Stopped));
    assert!(s.exists("/c").await.expect("exists").is_some(), "the count outlives its actor");
    s.close().await;
}

#[actix_rt::test]
async fn a_cache_handle_answers_from_memory_tells_changes_and_stops() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("cache-handle");
    let s = session_at(&zk.connect_string(), &root).await;
    s.ensure_path("/c").await.expect("dir");
    s.create("/c/a", "one", CreateMode::Persistent).await.expect("a");
    let cache = CacheHandle::start(s.clone(), CacheConfig::new("/c").with_scope(CacheScope::Children)).expect("cache");
    let mut events = cache.events();
    next_event(&mut events, "the load", |e| *e == CacheEvent::CacheInitialized).await;
    assert_eq!(cache.get("/c/a").await.expect("get").and_then(|n| n.data), Some(b"one".to_vec()));
    s.create("/c/b", "two", CreateMode::Persistent).await.expect("b");
    next_event(&mut events, "b added", |e| matches!(e, CacheEvent::NodeAdded { path, .. } if path == "/c/b")).await;
    let held: Vec<String> = cache.snapshot().await.expect("snapshot").into_keys().collect();
    assert!(held.contains(&"/c/a".to_string()) && held.contains(&"/c/b".to_string()), "{held:?}");

    bounded("the stop", cache.stop()).await;
    assert!(!cache.addr().connected(), "stopped once stop() resolved");
    assert_eq!(cache.get("/c/a").await, Err(CacheError::Stopped { path: "/c".into() }));
    assert!(matches!(CacheHandle::start(s.clone(), CacheConfig::new("no-slash")), Err(CacheError::ZooKeeper(_))));
    s.close().await;
}

#[actix_rt::test]
async fn a_group_member_handle_lists_members_and_its_stop_leaves_before_it_resolves() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("group-handle");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let alice = GroupMemberHandle::start(a.clone(), GroupConfig::new("/g", "alice").with_data("1")).expect("alice");
    let bob = GroupMemberHandle::start(b.clone(), GroupConfig::new("/g", "bob")).expect("bob");
    let mut events = bob.events();
    let (mut saw_alice, mut joined) = (false, false);
    next_event(&mut events, "alice seen and bob joined", |e| {
        saw_alice |= matches!(e, GroupEvent::MemberJoined { id, .. } if id == "alice");
        joined |= matches!(e, GroupEvent::Joined { .. });
        saw_alice && joined
    })
    .await;
    let members = bob.members().await.expect("members");
    assert_eq!(members.get("alice"), Some(&b"1".to_vec()));

    // `stop()` leaves: the node is gone when it resolves, not later.
    assert!(a.exists("/g/alice").await.expect("exists").is_some(), "alice is in before the stop");
    bounded("alice's stop", alice.stop()).await;
    assert!(!alice.addr().connected(), "stopped once stop() resolved");
    assert_eq!(a.exists("/g/alice").await, Ok(None), "alice's node is gone once stop() resolved");
    assert_eq!(alice.members().await, Err(GroupError::Stopped { group: "/g".into() }));

    bounded("bob's leave", bob.leave()).await.expect("bob leaves");
    assert_eq!(b.exists("/g/bob").await, Ok(None), "bob's node is gone once leave() resolved");
    assert!(matches!(
        GroupMemberHandle::start(a.clone(), GroupConfig::new("/g", "a/b")),
        Err(GroupError::InvalidId { .. })
    ));
    a.close().await;
    b.close().await;
}

/// Answers every task with its payload reversed.
struct Reverser;

impl Actor for Reverser {
    type Context = Context<Self>;
}

impl Handler<TaskAssigned> for Reverser {
    type Result = TaskOutcome;
    fn handle(&mut self, task: TaskAssigned, _: &mut Context<Self>) -> TaskOutcome {
        TaskOutcome::Done(task.data.into_iter().rev().collect())
    }
}

/// The master's session goes through a proxy that delays its requests by 300 ms when it stops,
/// so the delete of its election node lands well after the stop is asked for; the node is read
/// on another session the moment `stop()` resolves. (A stop that resolved when the candidate
/// stopped, its node deleted right after, failed this.)
#[actix_rt::test]
async fn task_master_and_worker_handles_run_a_task_and_their_stops_resolve_after_they_left() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("tasks-handle");
    let Proxied { proxy, session: slow, observer: s } =
        proxied(&zk.connect_string(), &root, Duration::from_secs(4)).await;
    let master = TaskMasterHandle::start(slow.clone(), TaskMasterConfig::new("/t")).expect("master");
    let mut master_events = master.events();
    let runner = Reverser.start();
    let worker = TaskWorkerHandle::start(s.clone(), TaskWorkerConfig::new("/t", "w1", runner.clone().recipient()))
        .expect("worker");
    let mut worker_events = worker.events();
    next_event(&mut master_events, "mastership", |e| matches!(e, MasterEvent::BecameMaster { .. })).await;
    let fence = master.term().await.expect("term").expect("master now");
    next_event(&mut worker_events, "registration", |e| matches!(e, WorkerEvent::Registered { .. })).await;

    let client = TaskClient::new(s.clone(), "/t").expect("client");
    let task = client.submit("abc").await.expect("submit");
    assert_eq!(client.result(&task, Duration::from_secs(20)).await, Ok(b"cba".to_vec()));

    assert!(s.exists("/t/workers/w1").await.expect("exists").is_some(), "registered before the stop");
    bounded("the worker's stop", worker.stop()).await;
    assert!(!worker.addr().connected(), "stopped once stop() resolved");
    assert_eq!(s.exists("/t/workers/w1").await, Ok(None), "deregistered once stop() resolved");

    let in_line = |names: &[String]| names.iter().any(|n| fence.node.ends_with(n.as_str()));
    assert!(in_line(&children(&s, "/t/master").await), "the master's node is there before the stop (control)");
    proxy.set_latency(Direction::Upstream, Duration::from_millis(300));
    bounded("the master's stop", master.stop()).await;
    assert!(!master.addr().connected(), "stopped once stop() resolved");
    assert!(!in_line(&children(&s, "/t/master").await), "the master's node is gone once stop() resolved");
    assert!(master.term().await.is_err(), "a stopped master answers with an error");
    assert!(matches!(
        TaskWorkerHandle::start(s.clone(), TaskWorkerConfig::new("/t", "a/b", runner.recipient())),
        Err(actix_zookeeper::tasks::TaskError::InvalidWorkerId { .. })
    ));
    proxy.set_latency(Direction::Upstream, Duration::ZERO);
    slow.close().await;
    s.close().await;
}

/// Holds every delivery until told; counts what it acked.
#[derive(Clone, Default)]
struct Pool {
    held: Arc<std::sync::Mutex<Vec<Delivery>>>,
    acked: Arc<AtomicUsize>,
    revoked: Arc<AtomicUsize>,
}

struct PoolWorker {
    pool: Pool,
    ack: bool,
}

impl Actor for PoolWorker {
    type Context = Context<Self>;
}

impl Handler<Delivery> for PoolWorker {
    type Result = ();
    fn handle(&mut self, delivery: Delivery, _: &mut Context<Self>) {
        if !self.ack {
            self.pool.held.lock().expect("held").push(delivery);
            return;
        }
        let acked = self.pool.acked.clone();
        // Detached: the answer is read whatever happens to this actor.
        actix_rt::spawn(async move {
            if delivery.ack().await.is_ok() {
                acked.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
}

impl Handler<Revoked> for PoolWorker {
    type Result = ();
    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {
        self.pool.revoked.fetch_add(1, Ordering::SeqCst);
    }
}

#[actix_rt::test]
async fn with_workers_only_describes_the_pool_starts_with_the_consumer() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("describe-workers");
    let s = session_at(&zk.connect_string(), &root).await;
    let made = Arc::new(AtomicUsize::new(0));
    let pool = Pool::default();
    let (m, p) = (made.clone(), pool.clone());
    let config = ConsumerConfig::new("/q").with_workers(3, move |_| {
        m.fetch_add(1, Ordering::SeqCst);
        PoolWorker { pool: p.clone(), ack: true }
    });
    let _copy = config.clone();
    actix_rt::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(made.load(Ordering::SeqCst), 0, "building (and cloning) a config starts no worker");
    let consumer = QueueConsumerHandle::start(s.clone(), config).expect("consumer");
    wait_until("the pool to start", || made.load(Ordering::SeqCst) == 3).await;
    let queue = Queue::new(s.clone(), "/q");
    queue.put_all((0..30).map(|i| vec![i]).collect()).await.expect("put");
    // Drained first: an `idle()` asked at once may come before the consumer has heard of the
    // items, and rightly answer that it has nothing to do.
    bounded("drained", queue.drained()).await.expect("drained");
    bounded("idle", consumer.idle()).await.expect("idle");
    wait_until("every ack answered", || pool.acked.load(Ordering::SeqCst) == 30).await;
    consumer.stop().await;
    assert_eq!(made.load(Ordering::SeqCst), 3, "the pool is started once");
    s.close().await;
}

#[actix_rt::test]
async fn idle_waits_for_in_flight_items_and_answers_at_once_when_idle() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("consumer-idle");
    let s = session_at(&zk.connect_string(), &root).await;
    let queue = Queue::new(s.clone(), "/q");
    let pool = Pool::default();
    let p = pool.clone();
    let consumer = QueueConsumerHandle::start(
        s.clone(),
        ConsumerConfig::new("/q")
            .with_workers(1, move |_| PoolWorker { pool: p.clone(), ack: false })
            .with_concurrency(4),
    )
    .expect("consumer");
    bounded("idle on an empty queue", consumer.idle()).await.expect("idle");
    queue.put_all((0..4).map(|i| vec![i]).collect()).await.expect("put");
    wait_until("four deliveries held", || pool.held.lock().expect("held").len() == 4).await;
    let idle = actix_rt::spawn(consumer.idle());
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    assert!(!idle.is_finished(), "not idle while deliveries are out (control)");
    let held: Vec<Delivery> = std::mem::take(&mut *pool.held.lock().expect("held"));
    for delivery in &held[..3] {
        delivery.ack().await.expect("ack");
    }
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert!(!idle.is_finished(), "not idle while one delivery is out");
    held[3].ack().await.expect("ack");
    bounded("idle after the last ack", idle).await.expect("task").expect("idle");
    assert_eq!(queue.len().await, Ok(0));

    queue.put("late").await.expect("put");
    wait_until("the late item held", || pool.held.lock().expect("held").len() == 1).await;
    let waiting = actix_rt::spawn(consumer.idle());
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "not idle while the late item is out");
    consumer.stop().await;
    assert_eq!(
        bounded("the waiter's answer", waiting).await.expect("task"),
        Err(QueueError::Stopped { queue: "/q".into() }),
        "a consumer that stops before it is idle answers Stopped"
    );
    s.close().await;
}

/// The consumer's session goes through a proxy that delays requests by 300 ms, so its claims'
/// deletes land well after the actor has stopped; the claims are read on another session, right
/// when `stop()` resolves. (A `stop()` that resolved when the actor stopped failed this in every
/// round.)
#[actix_rt::test]
async fn a_consumer_stop_resolves_once_its_claims_are_given_back() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("consumer-stop");
    let Proxied { proxy, session: slow, observer: s } =
        proxied(&zk.connect_string(), &root, Duration::from_secs(4)).await;
    let queue = Queue::new(s.clone(), "/q");
    queue.put_all((0..20).map(|i| vec![i]).collect()).await.expect("put");
    for round in 0..3 {
        let pool = Pool::default();
        let p = pool.clone();
        let consumer = QueueConsumerHandle::start(
            slow.clone(),
            ConsumerConfig::new("/q")
                .with_consumer_id(format!("round-{round}"))
                .with_workers(2, move |_| PoolWorker { pool: p.clone(), ack: false })
                .with_concurrency(8),
        )
        .expect("consumer");
        wait_until("eight deliveries held", || pool.held.lock().expect("held").len() == 8).await;
        assert_eq!(children(&s, "/q/claims").await.len(), 8, "round {round}: claimed before the stop (control)");
        proxy.set_latency(Direction::Upstream, Duration::from_millis(300));
        bounded("the stop", consumer.stop()).await;
        assert!(!consumer.addr().connected(), "stopped once stop() resolved");
        assert_eq!(children(&s, "/q/claims").await, Vec::<String>::new(), "round {round}: claims left after stop()");
        assert_eq!(pool.revoked.load(Ordering::SeqCst), 8, "round {round}: every held delivery revoked");
        proxy.set_latency(Direction::Upstream, Duration::ZERO);
        let held = pool.held.lock().expect("held").drain(..).collect::<Vec<_>>();
        for delivery in held {
            assert!(delivery.ack().await.is_err(), "an ack after the stop fails");
        }
    }
    assert_eq!(queue.len().await, Ok(20), "nothing was lost");
    slow.close().await;
    s.close().await;
}

#[actix_rt::test]
async fn drained_resolves_once_the_last_item_is_acked_not_when_it_is_claimed() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-drained");
    let s = session_at(&zk.connect_string(), &root).await;
    let queue = Queue::new(s.clone(), "/q");
    bounded("drained when the queue does not exist", queue.drained()).await.expect("drained");
    queue.put_all((0..3).map(|i| vec![i]).collect()).await.expect("put");
    let drained = actix_rt::spawn({
        let queue = queue.clone();
        async move { queue.drained().await }
    });
    let pool = Pool::default();
    let p = pool.clone();
    let consumer = QueueConsumerHandle::start(
        s.clone(),
        ConsumerConfig::new("/q")
            .with_workers(1, move |_| PoolWorker { pool: p.clone(), ack: false })
            .with_concurrency(3),
    )
    .expect("consumer");
    wait_until("three deliveries held", || pool.held.lock().expect("held").len() == 3).await;
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert!(!drained.is_finished(), "claimed items are still in the queue (control)");
    let held: Vec<Delivery> = std::mem::take(&mut *pool.held.lock().expect("held"));
    for delivery in &held {
        delivery.ack().await.expect("ack");
    }
    bounded("drained", drained).await.expect("task").expect("drained");
    let left: Vec<String> = children(&s, "/q").await.into_iter().filter(|n| n.starts_with(ITEM_PREFIX)).collect();
    assert!(left.is_empty(), "{left:?}");
    consumer.stop().await;
    s.close().await;
}

/// Regression: a consumer whose claims' creates lost their replies to a connection reset gives
/// those claims back on detached tasks, retried until the connection is back. `stop()` resolved
/// at once (nothing was delivered or being claimed any more) while the claims stood, and stand
/// they did for as long as the link was down. It must wait for those releases too.
#[actix_rt::test]
async fn a_consumer_stop_waits_for_claims_being_given_back_after_a_lost_reply() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("consumer-stop-releasing");
    let Proxied { proxy, session: s, observer } = proxied(&zk.connect_string(), &root, Duration::from_secs(10)).await;
    observer.ensure_path("/q/claims").await.expect("claims dir");
    Queue::new(observer.clone(), "/q").put_all((0..8u8).map(|n| vec![n]).collect()).await.expect("put");
    proxy.set_latency(Direction::Downstream, Duration::from_secs(2));
    let pool = Pool::default();
    let p = pool.clone();
    let consumer = QueueConsumerHandle::start(
        s.clone(),
        ConsumerConfig::new("/q")
            .with_workers(1, move |_| PoolWorker { pool: p.clone(), ack: true })
            .with_concurrency(4),
    )
    .expect("consumer");
    // The fault: four creates applied, their replies held by the proxy, then the connection
    // reset (the replies are lost) and the link cut (the releases cannot get through).
    wait_until_async("4 claims", || async { children(&observer, "/q/claims").await.len() == 4 }).await;
    proxy.blackhole();
    proxy.reset();
    // The creates' `ConnectionLoss` reaches the consumer at once; it then gives the claims back
    // on tasks of their own (stopped before that, it would give them back as claims in flight).
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let stopping = actix_rt::spawn(consumer.stop());
    actix_rt::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(children(&observer, "/q/claims").await.len(), 4, "the claims stand while the link is down (control)");
    assert!(!stopping.is_finished(), "stop() resolved while its claims stood");
    proxy.set_latency(Direction::Downstream, Duration::ZERO);
    proxy.heal();
    bounded("the stop", stopping).await.expect("task");
    assert_eq!(children(&observer, "/q/claims").await, Vec::<String>::new(), "claims left after stop()");
    assert!(pool.held.lock().expect("held").is_empty() && pool.acked.load(Ordering::SeqCst) == 0, "nothing delivered");
    assert_eq!(s.session().await.expect("session").generation, 1, "no expiry did the cleanup");
    s.close().await;
    observer.close().await;
}
