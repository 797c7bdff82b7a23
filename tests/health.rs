//! Health for probes: `SessionHandle::health()` (the session and every recipe on it) and
//! `health_changes()`, through a partition, an expiry, a close, and each recipe's life.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::cache::{CacheConfig, CacheHandle};
use actix_zookeeper::election::{ElectionConfig, ElectionHandle};
use actix_zookeeper::group::{GroupConfig, GroupMemberHandle};
use actix_zookeeper::health::{Health, RecipeState, SessionState};
use actix_zookeeper::lock::{LockConfig, LockHandle};
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::{
    ConsumerConfig, Delivery, Queue, QueueConsumerActor, QueueConsumerHandle, Revoked, Worker,
};
use actix_zookeeper::tasks::{
    TaskAssigned, TaskClient, TaskMasterConfig, TaskMasterHandle, TaskOutcome, TaskWorkerConfig, TaskWorkerHandle,
};
use actix_zookeeper::testkit::{ClientLinks, TestZooKeeper, expire_session, unique_root};
use common::*;
use futures::StreamExt;

const WAIT: Duration = Duration::from_secs(30);

/// Every snapshot `health_changes()` yielded.
#[derive(Clone, Default)]
struct Changes(Arc<Mutex<Vec<Health>>>);

impl Changes {
    fn follow(session: &SessionHandle) -> Changes {
        let changes = Changes::default();
        let mut stream = Box::pin(session.health_changes());
        let kept = changes.clone();
        actix_rt::spawn(async move {
            while let Some(health) = stream.next().await {
                kept.0.lock().expect("changes").push(health);
            }
        });
        changes
    }

    fn any(&self, pred: impl Fn(&Health) -> bool) -> bool {
        self.0.lock().expect("changes").iter().any(pred)
    }
}

async fn health_until(session: &SessionHandle, what: &str, pred: impl Fn(&Health) -> bool) -> Health {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let health = session.health();
        if pred(&health) {
            return health;
        }
        assert!(std::time::Instant::now() < deadline, "no {what} within {WAIT:?}; health: {health:#?}");
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
}

#[actix_rt::test]
async fn a_sessions_health_follows_a_partition_an_expiry_and_a_close() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("health-session");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let session = session_with_timeout(&links.connect_string(), &root, Duration::from_secs(4)).await;
    let changes = Changes::follow(&session);
    let first =
        health_until(&session, "connected", |h| matches!(h.session.state, SessionState::Connected { .. })).await;
    let id = first.session.session_id.expect("a live session");
    assert_eq!(first.session.generation, 1);
    assert!(first.session.last_contact.is_some() && first.session.valid_until.is_some());
    assert!(first.is_ready() && first.is_alive(Duration::from_secs(1)));

    let info = session.session().await.expect("a live session").info;
    links.blackhole();
    let cut = health_until(&session, "suspended", |h| matches!(h.session.state, SessionState::Suspended { .. })).await;
    assert!(!cut.is_ready(), "suspended is not ready");
    assert!(cut.is_alive(Duration::from_secs(60)), "but alive, within the patience");
    assert_eq!(cut.session.session_id, Some(id), "the same session, maybe alive");

    expire_session(&zk.connect_string(), &info).await.expect("expire");
    links.heal();
    let rebuilt = health_until(&session, "a new session", |h| h.session.generation == 2 && h.is_ready()).await;
    assert_ne!(rebuilt.session.session_id, Some(id));
    session.close().await;
    let closed = health_until(&session, "closed", |h| h.session.state == SessionState::Closed).await;
    assert!(!closed.is_alive(Duration::MAX) && !closed.is_ready());
    assert_eq!(closed.session.valid_until, None);
    wait_until("the stream saw each state", || {
        changes.any(|h| matches!(h.session.state, SessionState::Suspended { .. }))
            && changes.any(|h| h.session.generation == 2)
            && changes.any(|h| h.session.state == SessionState::Closed)
    })
    .await;
}

/// Keeps every delivery unsettled.
struct Keeper(Arc<Mutex<Vec<Delivery>>>);

impl Actor for Keeper {
    type Context = Context<Self>;
}

impl Handler<Delivery> for Keeper {
    type Result = ();

    fn handle(&mut self, delivery: Delivery, _: &mut Context<Self>) {
        self.0.lock().expect("kept").push(delivery);
    }
}

impl Handler<Revoked> for Keeper {
    type Result = ();

    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {}
}

fn state_of(health: &Health, kind: &str, path: &str) -> Option<RecipeState> {
    health.recipes.iter().find(|r| r.kind == kind && r.path == path).map(|r| r.state.clone())
}

#[actix_rt::test]
async fn each_recipe_reports_what_it_holds_and_leaves_the_board_with_its_actor() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("health-recipes");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let session = session_with_timeout(&links.connect_string(), &root, Duration::from_secs(6)).await;
    let holder = LockHandle::start(session.clone(), LockConfig::new("/lock")).expect("lock");
    let grant = bounded("acquire", holder.acquire(None)).await.expect("held");
    let waiter = LockHandle::start(session.clone(), LockConfig::new("/lock")).expect("lock");
    let waiting = waiter.acquire(None);
    let waiting = actix_rt::spawn(waiting);
    let election = ElectionHandle::start(session.clone(), ElectionConfig::new("/leader")).expect("election");
    let term = bounded("lead", election.leadership()).await.expect("leads");
    let queue = Queue::new(session.clone(), "/q");
    queue.put("job").await.expect("put");
    let kept = Arc::new(Mutex::new(Vec::new()));
    let keeper = Keeper(kept.clone()).start();
    let consumer =
        QueueConsumerActor::new(session.clone(), ConsumerConfig::new("/q").with_worker(Worker::new(&keeper))).start();

    let health = health_until(&session, "every recipe at work", |h| {
        h.recipes.iter().filter(|r| r.kind == "lock").count() == 2
            && state_of(h, "queue-consumer", "/q") == Some(RecipeState::Consuming { in_flight: 1 })
            && state_of(h, "election", "/leader").is_some()
    })
    .await;
    let locks: Vec<_> = health.recipes.iter().filter(|r| r.kind == "lock").map(|r| r.state.clone()).collect();
    assert_eq!(locks, [RecipeState::Holding { token: grant.token }, RecipeState::Waiting]);
    assert_eq!(state_of(&health, "election", "/leader"), Some(RecipeState::Holding { token: term.token }));

    // Cut off: held grants are suspended; back: held again, same terms.
    links.blackhole();
    health_until(&session, "suspended grants", |h| {
        state_of(h, "election", "/leader") == Some(RecipeState::Suspended { token: term.token })
            && h.recipes.iter().any(|r| r.state == RecipeState::Suspended { token: grant.token })
    })
    .await;
    links.heal();
    health_until(&session, "held again", |h| {
        state_of(h, "election", "/leader") == Some(RecipeState::Holding { token: term.token })
    })
    .await;

    // Settled: nothing in flight. Stopped: gone from the board.
    let delivery = kept.lock().expect("kept").pop().expect("a delivery");
    delivery.ack().await.expect("ack");
    health_until(&session, "nothing in flight", |h| {
        state_of(h, "queue-consumer", "/q") == Some(RecipeState::Consuming { in_flight: 0 })
    })
    .await;
    holder.release().await.expect("release");
    bounded("the waiter's turn", waiting).await.expect("task").expect("held");
    election.stop().await;
    consumer.do_send(actix_zookeeper::queue::Stop);
    drop(consumer);
    waiter.stop().await;
    holder.stop().await;
    health_until(&session, "an empty board", |h| h.recipes.is_empty()).await;
    session.close().await;
}

#[actix_rt::test]
async fn a_recipe_that_failed_for_good_is_not_ready() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("health-failed");
    let session = session_at(&zk.connect_string(), &root).await;
    unreadable_dir(&session, "/closed").await;
    let election = ElectionHandle::start(session.clone(), ElectionConfig::new("/closed")).expect("election");
    let health = health_until(&session, "a failed election", |h| {
        matches!(state_of(h, "election", "/closed"), Some(RecipeState::Failed { .. }))
    })
    .await;
    assert!(!health.is_ready(), "{health:#?}");
    assert!(health.is_alive(Duration::from_secs(1)), "the session is fine");
    election.stop().await;
    // A consumer that cannot read its queue stops, and stays on the board as failed (a recipe
    // that vanished would look healthy to a probe).
    unreadable_dir(&session, "/closed-q").await;
    let keeper = Keeper(Arc::new(Mutex::new(Vec::new()))).start();
    let consumer =
        QueueConsumerActor::new(session.clone(), ConsumerConfig::new("/closed-q").with_worker(Worker::new(&keeper)))
            .start();
    let health = health_until(&session, "a failed consumer", |h| {
        matches!(state_of(h, "queue-consumer", "/closed-q"), Some(RecipeState::Failed { .. }))
    })
    .await;
    assert!(!health.is_ready(), "{health:#?}");
    drop(consumer);
    session.close().await;
}

/// Regression (issue 39, item 4): a recipe that gave up left its `Failed` entry on the board
/// for good: readiness stayed false behind working replacements, and each restart added an
/// entry (3 cycles, 3 entries). A failed entry now leaves when a recipe of the same kind starts
/// on the same path; readiness speaks of the recipes that run. (Leaving with the failed recipe's
/// handle: the next test.)
#[actix_rt::test]
async fn a_failed_recipe_leaves_the_board_when_replaced() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("health-failed-leaves");
    let session = session_at(&zk.connect_string(), &root).await;
    // Unreadable, until the ACL is changed back (ADMIN is allowed).
    {
        use actix_zookeeper::{Acl, Permission};
        let unreadable =
            vec![Acl::new_const(Permission::CREATE | Permission::DELETE | Permission::ADMIN, "world", "anyone")];
        let create =
            actix_zookeeper::session::requests::Create::new("/q", "", CreateMode::Persistent).with_acl(unreadable);
        session.request(create).await.expect("a directory nobody may read");
    }
    let keeper = Keeper(Arc::new(Mutex::new(Vec::new()))).start();
    let failed_entries = |h: &Health| {
        h.recipes.iter().filter(|r| r.path == "/q" && matches!(r.state, RecipeState::Failed { .. })).count()
    };
    // Three restarts of a consumer that fails, each handle kept: one failed entry at a time.
    let mut kept = Vec::new();
    for cycle in 1..=3 {
        let consumer =
            QueueConsumerActor::new(session.clone(), ConsumerConfig::new("/q").with_worker(Worker::new(&keeper)))
                .start();
        // It gives up and stops (its handle kept): only then is its own entry `Failed`.
        wait_until("the consumer gave up", || !consumer.connected()).await;
        let health = session.health();
        assert_eq!(failed_entries(&health), 1, "cycle {cycle}: {health:#?}");
        assert_eq!(health.recipes.iter().filter(|r| r.path == "/q").count(), 1, "cycle {cycle}: {health:#?}");
        assert!(!health.is_ready());
        kept.push(consumer);
    }
    // The fault is fixed; a working replacement takes the failed one's place.
    session
        .set_acl("/q", vec![actix_zookeeper::Acl::new_const(actix_zookeeper::Permission::ALL, "world", "anyone")], None)
        .await
        .expect("readable again");
    let working =
        QueueConsumerActor::new(session.clone(), ConsumerConfig::new("/q").with_worker(Worker::new(&keeper))).start();
    let health = health_until(&session, "ready behind the working replacement", |h| {
        h.is_ready() && state_of(h, "queue-consumer", "/q").is_some()
    })
    .await;
    assert_eq!(failed_entries(&health), 0, "{health:#?}");
    drop(working);
    drop(kept);
    session.close().await;
}

/// Regression (issue 39, item 4): a recipe started through a handle that gave up kept its
/// `Failed` entry on the board after the user stopped it or dropped every handle to it, so
/// readiness stayed false with nothing failed running. The entry now leaves then (and stays
/// while a handle is kept: a recipe that vanished would look healthy). For each kind that gives
/// up (queue consumer, cache, task worker): one failed instance stopped, another dropped. (A
/// cache gives up when its session is closed: its own session's board is checked.)
#[actix_rt::test]
async fn a_failed_recipe_leaves_the_board_when_its_handle_is_stopped_or_dropped() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("health-failed-dropped");
    let session = session_at(&zk.connect_string(), &root).await;
    unreadable_dir(&session, "/closed").await;
    read_only_dir(&session, "/tasks").await;
    let keeper = Keeper(Arc::new(Mutex::new(Vec::new()))).start();
    let runner = SlowRunner.start();
    let failed = |kind: &'static str, path: &'static str| {
        move |h: &Health| matches!(state_of(h, kind, path), Some(RecipeState::Failed { .. }))
    };
    let gone = |kind: &'static str, path: &'static str| move |h: &Health| state_of(h, kind, path).is_none();
    for stop in [true, false] {
        let consumer = QueueConsumerHandle::start(
            session.clone(),
            ConsumerConfig::new("/closed").with_worker(Worker::new(&keeper)),
        )
        .expect("consumer");
        let worker =
            TaskWorkerHandle::start(session.clone(), TaskWorkerConfig::new("/tasks", "w1", runner.clone().recipient()))
                .expect("worker");
        let closing = session_at(&zk.connect_string(), &root).await;
        let cache = CacheHandle::start(closing.clone(), CacheConfig::new("/tasks")).expect("cache");
        health_until(&closing, "a watching cache", |h| state_of(h, "cache", "/tasks") == Some(RecipeState::Watching))
            .await;
        closing.close().await;
        health_until(&closing, "a failed cache", failed("cache", "/tasks")).await;
        for (kind, path) in [("queue-consumer", "/closed"), ("task-worker", "/tasks")] {
            health_until(&session, &format!("a failed {kind}"), failed(kind, path)).await;
        }
        // Given up, with its handle kept: it stays, and readiness says so.
        actix_rt::time::sleep(Duration::from_millis(300)).await;
        let health = session.health();
        assert!(!health.is_ready(), "{health:#?}");
        assert_eq!(health.recipes.iter().filter(|r| matches!(r.state, RecipeState::Failed { .. })).count(), 2);
        assert!(failed("cache", "/tasks")(&closing.health()), "{:#?}", closing.health());
        if stop {
            bounded("the consumer's stop", consumer.stop()).await;
            health_until(&session, "the stopped consumer gone", gone("queue-consumer", "/closed")).await;
            bounded("the worker's stop", worker.stop()).await;
            health_until(&session, "the stopped worker gone", gone("task-worker", "/tasks")).await;
            bounded("the cache's stop", cache.stop()).await;
            health_until(&closing, "the stopped cache gone", gone("cache", "/tasks")).await;
        } else {
            // A clone outlives the first drop: still kept.
            let (consumer_clone, cache_clone, worker_clone) = (consumer.clone(), cache.clone(), worker.clone());
            drop((consumer, cache, worker));
            actix_rt::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(session.health().recipes.len(), 2, "{:#?}", session.health());
            assert_eq!(closing.health().recipes.len(), 1, "{:#?}", closing.health());
            drop(consumer_clone);
            health_until(&session, "the dropped consumer gone", gone("queue-consumer", "/closed")).await;
            drop(worker_clone);
            health_until(&session, "the dropped worker gone", gone("task-worker", "/tasks")).await;
            drop(cache_clone);
            health_until(&closing, "the dropped cache gone", gone("cache", "/tasks")).await;
        }
        let health = session.health();
        assert!(health.is_ready(), "stop={stop}: nothing failed runs: {health:#?}");
        assert!(health.recipes.is_empty(), "{health:#?}");
        assert!(closing.health().recipes.is_empty(), "{:#?}", closing.health());
    }
    session.close().await;
}

/// Runs each task for a while.
struct SlowRunner;

impl Actor for SlowRunner {
    type Context = Context<Self>;
}

impl Handler<TaskAssigned> for SlowRunner {
    type Result = ResponseFuture<TaskOutcome>;

    fn handle(&mut self, task: TaskAssigned, _: &mut Context<Self>) -> Self::Result {
        Box::pin(async move {
            actix_rt::time::sleep(Duration::from_millis(1500)).await;
            task.data.into()
        })
    }
}

/// A cache is `Idle` while it loads and `Watching` once loaded; a task worker reports the tasks
/// it runs as `Consuming`.
#[actix_rt::test]
async fn caches_and_task_workers_report_what_they_do() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("health-cache-tasks");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let session = session_at(&links.connect_string(), &root).await;
    session.ensure_path("/c/a").await.expect("a tree");
    // Replies held back, so that the load takes a while: `Idle` all along it.
    links.proxy(0).set_latency(actix_zookeeper::testkit::Direction::Downstream, Duration::from_millis(300));
    let cache = CacheHandle::start(session.clone(), CacheConfig::new("/c")).expect("cache");
    let mut loaded = cache.events();
    health_until(&session, "a loading cache", |h| state_of(h, "cache", "/c") == Some(RecipeState::Idle)).await;
    let early = actix_rt::time::timeout(Duration::from_millis(100), loaded.next()).await;
    assert!(early.is_err(), "Idle while nothing of the load was in yet: {early:?}");
    health_until(&session, "a watching cache", |h| state_of(h, "cache", "/c") == Some(RecipeState::Watching)).await;
    bounded("the load's end", async {
        while let Some(event) = loaded.next().await {
            if matches!(event, Ok(actix_zookeeper::cache::CacheEvent::CacheInitialized)) {
                return;
            }
        }
        panic!("the cache's events ended before it was loaded");
    })
    .await;
    links.proxy(0).set_latency(actix_zookeeper::testkit::Direction::Downstream, Duration::ZERO);

    let _master = TaskMasterHandle::start(session.clone(), TaskMasterConfig::new("/jobs")).expect("master");
    let runner = SlowRunner.start();
    let worker = TaskWorkerHandle::start(session.clone(), TaskWorkerConfig::new("/jobs", "w1", runner.recipient()))
        .expect("worker");
    let client = TaskClient::new(session.clone(), "/jobs").expect("client");
    let task = client.submit("job").await.expect("submitted");
    health_until(&session, "a running task", |h| {
        state_of(h, "task-worker", "/jobs") == Some(RecipeState::Consuming { in_flight: 1 })
    })
    .await;
    bounded("the result", client.result(&task, Duration::from_secs(20))).await.expect("done");
    health_until(&session, "nothing running", |h| {
        state_of(h, "task-worker", "/jobs") == Some(RecipeState::Consuming { in_flight: 0 })
    })
    .await;
    worker.stop().await;
    drop(cache);
    session.close().await;
}

#[actix_rt::test]
async fn a_dropped_change_stream_or_handle_leaves_nothing_on_the_board() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let session = session_at(&zk.connect_string(), &unique_root("health-dropped")).await;
    // A stream dropped before (and after) its first item: later changes still reach the others.
    drop(session.health_changes());
    let mut early = Box::pin(session.health_changes());
    let changes = Changes::follow(&session);
    let lock = LockHandle::start(session.clone(), LockConfig::new("/lock")).expect("lock");
    let grant = bounded("acquire", lock.acquire(None)).await.expect("held");
    bounded("a change", early.next()).await.expect("a snapshot");
    drop(early);
    wait_until("the holding lock was streamed", || {
        changes.any(|h| h.recipes.iter().any(|r| r.state == RecipeState::Holding { token: grant.token }))
    })
    .await;
    // The last handle dropped: the actor stops, leaves the line, and its entry leaves the board.
    drop(lock);
    health_until(&session, "an empty board", |h| h.recipes.is_empty()).await;
    wait_until("the stream saw it go", || changes.any(|h| h.recipes.is_empty() && h.is_ready())).await;
    session.close().await;
}

/// Issue 39, item 4: every recipe kind reports. Persistent and TTL nodes and registrations are
/// `Kept` (a node held by another session's ephemeral: `Waiting`); shared values, counts and
/// election observers are `Watching` once read, and `Idle` while the connection is down;
/// barriers (waits, enters) and atomic writes are `Waiting` while the call waits. Each entry
/// leaves with its recipe (or its call).
#[actix_rt::test]
async fn every_recipe_kind_reports_and_leaves_the_board() {
    use actix_zookeeper::atomic::{AtomicLongConfig, DistributedAtomicLong};
    use actix_zookeeper::barrier::{DistributedBarrier, DistributedDoubleBarrier};
    use actix_zookeeper::counter::{SharedCountConfig, SharedCountHandle};
    use actix_zookeeper::discovery::{DiscoveryConfig, ServiceDiscovery, ServiceInstance};
    use actix_zookeeper::election::ElectionObserverHandle;
    use actix_zookeeper::persistent::{
        PersistentNodeConfig, PersistentNodeHandle, PersistentTtlNode, PersistentTtlNodeConfig,
    };
    use actix_zookeeper::shared::{SharedValueConfig, SharedValueHandle};

    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("health-every-kind");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &root).await;
    let other = session_at(&zk.connect_string(), &root).await;
    let is = |kind: &'static str, path: &'static str, state: RecipeState| {
        move |h: &Health| state_of(h, kind, path) == Some(state.clone())
    };

    let node =
        PersistentNodeHandle::start(s.clone(), PersistentNodeConfig::new("/pn", CreateMode::Persistent)).expect("node");
    let ttl = PersistentTtlNode::start(s.clone(), PersistentTtlNodeConfig::new("/ttl", Duration::from_secs(30)))
        .expect("ttl node");
    other.create("/held", "", CreateMode::Ephemeral).await.expect("another session's ephemeral");
    let blocked = PersistentNodeHandle::start(s.clone(), PersistentNodeConfig::new("/held", CreateMode::Ephemeral))
        .expect("node");
    let discovery = ServiceDiscovery::new(s.clone(), DiscoveryConfig::new("/services")).expect("discovery");
    let registration = discovery.register(ServiceInstance::new("svc", "i1")).await.expect("registered");
    let value = SharedValueHandle::start(s.clone(), SharedValueConfig::new("/v")).expect("value");
    let count = SharedCountHandle::start(s.clone(), SharedCountConfig::new("/n")).expect("count");
    let observer = ElectionObserverHandle::start(s.clone(), "/e").expect("observer");
    health_until(&s, "a kept node", is("persistent-node", "/pn", RecipeState::Kept)).await;
    health_until(&s, "a kept TTL node", is("ttl-node", "/ttl", RecipeState::Kept)).await;
    health_until(&s, "a blocked node", is("persistent-node", "/held", RecipeState::Waiting)).await;
    health_until(&s, "a registration", is("registration", "/services/svc/i1", RecipeState::Kept)).await;
    health_until(&s, "a watched value", is("shared-value", "/v", RecipeState::Watching)).await;
    health_until(&s, "a watched count", is("shared-count", "/n", RecipeState::Watching)).await;
    health_until(&s, "an observer", is("election-observer", "/e", RecipeState::Watching)).await;

    // Cut off: what follows changes stops being watched, and an atomic write waits.
    links.blackhole();
    health_until(&s, "a value no longer watched", is("shared-value", "/v", RecipeState::Idle)).await;
    health_until(&s, "an observer no longer watching", is("election-observer", "/e", RecipeState::Idle)).await;
    let atomic = DistributedAtomicLong::new(s.clone(), AtomicLongConfig::new("/a"));
    let adding = actix_rt::spawn(async move { atomic.increment().await });
    health_until(&s, "an atomic write waiting", is("atomic-long", "/a", RecipeState::Waiting)).await;
    links.heal();
    let added = bounded("the atomic write", adding).await.expect("task").expect("added");
    assert!(added.succeeded && added.post == 1, "{added:?}");
    health_until(&s, "the atomic write done", |h| state_of(h, "atomic-long", "/a").is_none()).await;
    health_until(&s, "the value watched again", is("shared-value", "/v", RecipeState::Watching)).await;

    let barrier = DistributedBarrier::new(s.clone(), "/b").expect("barrier");
    barrier.set().await.expect("set");
    let waiting = actix_rt::spawn(barrier.wait(Some(WAIT)));
    health_until(&s, "a barrier wait", is("barrier", "/b", RecipeState::Waiting)).await;
    DistributedBarrier::new(other.clone(), "/b").expect("barrier").remove().await.expect("removed");
    bounded("the wait", waiting).await.expect("task").expect("the barrier went");
    let double = DistributedDoubleBarrier::new(s.clone(), "/d", 2).expect("double barrier");
    let entering = actix_rt::spawn(double.enter(Some(WAIT)));
    health_until(&s, "a double barrier enter", is("double-barrier", "/d", RecipeState::Waiting)).await;
    entering.abort();

    node.stop().await;
    ttl.stop().await;
    blocked.stop().await;
    registration.unregister().await.expect("unregistered");
    value.stop().await;
    count.stop().await;
    observer.stop().await;
    let kinds = ["persistent-node", "ttl-node", "registration", "shared-value", "shared-count", "election-observer"];
    let h = health_until(&s, "every entry gone", |h| {
        h.recipes.iter().all(|r| !kinds.contains(&r.kind) && r.kind != "barrier" && r.kind != "double-barrier")
    })
    .await;
    assert!(h.is_ready(), "{h:#?}");
    s.close().await;
    other.close().await;
}

/// Each handle reads its own recipe's entry (`health()`), also where two recipes of one kind
/// share a path (a lock's holder and its waiter), and `None` once its recipe has stopped.
#[actix_rt::test]
async fn every_handle_reads_its_own_entry_and_none_once_stopped() {
    use actix_zookeeper::counter::{SharedCountConfig, SharedCountHandle};
    use actix_zookeeper::discovery::{DiscoveryConfig, ServiceDiscovery, ServiceInstance};
    use actix_zookeeper::election::ElectionObserverHandle;
    use actix_zookeeper::health::RecipeHealth;
    use actix_zookeeper::lock::{SemaphoreConfig, SemaphoreHandle};
    use actix_zookeeper::persistent::{
        PersistentNodeConfig, PersistentNodeHandle, PersistentTtlNode, PersistentTtlNodeConfig,
    };
    use actix_zookeeper::shared::{SharedValueConfig, SharedValueHandle};

    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("health-handles");
    let s = session_at(&zk.connect_string(), &root).await;
    let reads = |what: &str, health: Option<RecipeHealth>, kind: &str, path: &str, state: RecipeState| {
        let health = health.unwrap_or_else(|| panic!("{what}: no entry"));
        assert_eq!((health.kind, health.path.as_str(), &health.state), (kind, path, &state), "{what}");
    };
    async fn entry(what: &str, read: impl Fn() -> Option<RecipeHealth>, state: RecipeState) -> RecipeHealth {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            match read() {
                Some(health) if health.state == state => return health,
                other => assert!(std::time::Instant::now() < deadline, "{what}: {other:?}, not {state:?}"),
            }
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
    }

    let holder = LockHandle::start(s.clone(), LockConfig::new("/lock")).expect("lock");
    let grant = bounded("acquire", holder.acquire(None)).await.expect("held");
    let waiter = LockHandle::start(s.clone(), LockConfig::new("/lock")).expect("lock");
    let waiting = actix_rt::spawn(waiter.acquire(None));
    entry("the waiter", || waiter.health(), RecipeState::Waiting).await;
    reads("the holder", holder.health(), "lock", "/lock", RecipeState::Holding { token: grant.token });
    reads("the waiter", waiter.health(), "lock", "/lock", RecipeState::Waiting);
    let semaphore = SemaphoreHandle::start(s.clone(), SemaphoreConfig::new("/sem", 2)).expect("semaphore");
    let lease = bounded("a lease", semaphore.acquire(None)).await.expect("leased");
    reads("the semaphore", semaphore.health(), "semaphore", "/sem", RecipeState::Holding { token: lease.token });
    let election = ElectionHandle::start(s.clone(), ElectionConfig::new("/leader")).expect("election");
    let term = bounded("lead", election.leadership()).await.expect("leads");
    entry("the leader", || election.health(), RecipeState::Holding { token: term.token }).await;
    let observer = ElectionObserverHandle::start(s.clone(), "/leader").expect("observer");
    entry("the observer", || observer.health(), RecipeState::Watching).await;
    let cache = CacheHandle::start(s.clone(), CacheConfig::new("/leader")).expect("cache");
    entry("the cache", || cache.health(), RecipeState::Watching).await;
    let keeper = Keeper(Arc::new(Mutex::new(Vec::new()))).start();
    let consumer = QueueConsumerHandle::start(s.clone(), ConsumerConfig::new("/q").with_worker(Worker::new(&keeper)))
        .expect("consumer");
    entry("the consumer", || consumer.health(), RecipeState::Consuming { in_flight: 0 }).await;
    let worker =
        TaskWorkerHandle::start(s.clone(), TaskWorkerConfig::new("/tasks", "w1", SlowRunner.start().recipient()))
            .expect("worker");
    // Idle until it runs a task.
    reads("the worker", worker.health(), "task-worker", "/tasks", RecipeState::Idle);
    let value = SharedValueHandle::start(s.clone(), SharedValueConfig::new("/v")).expect("value");
    entry("the value", || value.health(), RecipeState::Watching).await;
    let count = SharedCountHandle::start(s.clone(), SharedCountConfig::new("/n")).expect("count");
    entry("the count", || count.health(), RecipeState::Watching).await;
    let node =
        PersistentNodeHandle::start(s.clone(), PersistentNodeConfig::new("/pn", CreateMode::Persistent)).expect("node");
    entry("the node", || node.health(), RecipeState::Kept).await;
    let ttl = PersistentTtlNode::start(s.clone(), PersistentTtlNodeConfig::new("/ttl", Duration::from_secs(30)))
        .expect("ttl node");
    let ttl_health = entry("the TTL node", || ttl.health(), RecipeState::Kept).await;
    assert_eq!((ttl_health.kind, ttl_health.path.as_str()), ("ttl-node", "/ttl"));
    let discovery = ServiceDiscovery::new(s.clone(), DiscoveryConfig::new("/services")).expect("discovery");
    let registration = discovery.register(ServiceInstance::new("svc", "i1")).await.expect("registered");
    let registered = entry("the registration", || registration.health(), RecipeState::Kept).await;
    assert_eq!((registered.kind, registered.path.as_str()), ("registration", "/services/svc/i1"));
    // Those whose entry is their election's or their view's.
    let services = discovery.cache("svc").expect("service cache");
    let viewed = entry("the service cache", || services.health(), RecipeState::Watching).await;
    assert_eq!((viewed.kind, viewed.path.as_str()), ("cache", "/services/svc"));
    let member = GroupMemberHandle::start(s.clone(), GroupConfig::new("/group", "m1")).expect("member");
    let viewed = entry("the group member", || member.health(), RecipeState::Watching).await;
    assert_eq!((viewed.kind, viewed.path.as_str()), ("cache", "/group"));
    let master = TaskMasterHandle::start(s.clone(), TaskMasterConfig::new("/tasks")).expect("master");
    let mastering = bounded("mastering", async {
        loop {
            if let Some(term) = master.term().await.expect("the master's term") {
                return term;
            }
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let elected = entry("the master", || master.health(), RecipeState::Holding { token: mastering.token }).await;
    assert_eq!(elected.kind, "election");

    // Stopped: none. The holder first, so that the waiter's turn comes and it holds.
    holder.release().await.expect("release");
    let second = bounded("the waiter's turn", waiting).await.expect("task").expect("held");
    reads("the waiter holding", waiter.health(), "lock", "/lock", RecipeState::Holding { token: second.token });
    holder.stop().await;
    assert_eq!(holder.health(), None, "the stopped holder");
    reads("the waiter, still running", waiter.health(), "lock", "/lock", RecipeState::Holding { token: second.token });
    waiter.stop().await;
    semaphore.stop().await;
    election.stop().await;
    observer.stop().await;
    cache.stop().await;
    consumer.stop().await;
    worker.stop().await;
    value.stop().await;
    count.stop().await;
    node.stop().await;
    ttl.stop().await;
    registration.unregister().await.expect("unregistered");
    services.stop().await;
    member.stop().await;
    master.stop().await;
    let after = [
        ("waiter", waiter.health()),
        ("semaphore", semaphore.health()),
        ("election", election.health()),
        ("observer", observer.health()),
        ("cache", cache.health()),
        ("consumer", consumer.health()),
        ("worker", worker.health()),
        ("value", value.health()),
        ("count", count.health()),
        ("node", node.health()),
        ("ttl", ttl.health()),
        ("registration", registration.health()),
        ("service cache", services.health()),
        ("member", member.health()),
        ("master", master.health()),
    ];
    for (what, health) in after {
        assert_eq!(health, None, "{what} after its stop");
    }
    assert!(s.health().recipes.is_empty(), "{:#?}", s.health());
    s.close().await;
}
