//! Any ZooKeeper-compatible server: the recipes' core behaviour through a proxy that answers as
//! ZooKeeper 3.4, or as a server without persistent watches, containers or TTL
//! (`testkit::OlderServer`), with the fallbacks of `docs/compatibility.md` and typed
//! `Unsupported` errors where none exists.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_zookeeper::atomic::{AtomicLongConfig, DistributedAtomicLong};
use actix_zookeeper::barrier::{DistributedBarrier, DistributedDoubleBarrier};
use actix_zookeeper::cache::{CacheConfig, CacheEvent, CacheHandle, CacheScope};
use actix_zookeeper::counter::{SharedCountConfig, SharedCountHandle};
use actix_zookeeper::discovery::{DiscoveryConfig, ServiceDiscovery, ServiceInstance};
use actix_zookeeper::election::{ElectionConfig, ElectionHandle, ElectionObserverHandle};
use actix_zookeeper::group::{GroupConfig, GroupMemberHandle};
use actix_zookeeper::lock::{LockConfig, LockHandle, LockKind, MultiLock, SemaphoreConfig, SemaphoreHandle};
use actix_zookeeper::persistent::{PersistentNodeConfig, PersistentNodeHandle};
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::{ConsumerConfig, Delivery, Queue, QueueConsumerHandle, QueueError, Revoked, Worker};
use actix_zookeeper::session::requests::EnsurePath;
use actix_zookeeper::session::{Feature, Support};
use actix_zookeeper::shared::{SharedValueConfig, SharedValueHandle};
use actix_zookeeper::tasks::{
    TaskAssigned, TaskClient, TaskError, TaskMasterConfig, TaskMasterHandle, TaskOutcome, TaskWorkerConfig,
    TaskWorkerHandle,
};
use actix_zookeeper::testkit::{FaultProxy, OlderServer, ServerOptions, TestZooKeeper, ZkServer, unique_root};
use common::*;
use futures::StreamExt;

const WAIT: Duration = Duration::from_secs(30);

/// A declared server version.
type Version = (u32, u32, u32);

/// The server kinds every test here runs against, with the version a careful user declares
/// for each (`None`: not declared; learned from the answers).
fn kinds() -> [(OlderServer, Option<Version>); 2] {
    [(OlderServer::zookeeper_3_4(), Some((3, 4, 14))), (OlderServer::without_extras(), None)]
}

/// The answer to a read, asked again while it meets the connection a refusal closed (a server
/// closes it after answering `Unimplemented`).
async fn wait_for_answer<T, F: std::future::Future<Output = Result<T>>>(read: impl Fn() -> F) -> T {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        match read().await {
            Err(Error::ConnectionLoss { .. }) if std::time::Instant::now() < deadline => {
                actix_rt::time::sleep(Duration::from_millis(50)).await;
            }
            answer => return answer.expect("an answer"),
        }
    }
}

/// Whether a server of that declared version lacks `create2`, which every create inside a
/// `multi` is sent as (zookeeper-client encodes them so whatever the version): 3.4.
fn lacks_create2(version: Option<Version>) -> bool {
    version.is_some_and(|v| v < (3, 5, 0))
}

async fn session_as(proxy: &FaultProxy, root: &str, version: Option<Version>) -> SessionHandle {
    let mut config = SessionConfig::new(proxy.address()).with_chroot(root).with_session_timeout(Duration::from_secs(4));
    if let Some((major, minor, patch)) = version {
        config = config.with_server_version(major, minor, patch);
    }
    connected(config).await.0
}

#[actix_rt::test]
async fn the_session_falls_back_where_it_can_and_refuses_typed_where_it_cannot() {
    init_tracing();
    // A short container check, so that a container's removal is seen (the control).
    let zk = ZkServer::start_with(ServerOptions::default().with_container_check_interval(Duration::from_millis(100)))
        .expect("ZooKeeper");
    for (kind, version) in kinds() {
        let root = unique_root("compat-session");
        let proxy = FaultProxy::start_as(&zk.connect_string(), kind.clone()).expect("proxy");
        let session = session_as(&proxy, &root, version).await;
        let direct = session_at(&zk.connect_string(), &root).await;

        // A create answers with the node's stat (read after a plain create on "3.4").
        let created = session.create("/plain", "x", CreateMode::Persistent).await.expect("create");
        let stat = direct.exists("/plain").await.expect("exists").expect("made");
        assert_eq!(created.stat.czxid, stat.czxid, "{}: the stat of the node made", kind.name());

        // Recipe parents: containers where there are some, plain nodes here, which stay.
        session.request(EnsurePath { path: "/parents/a".into(), containers: true }).await.expect("parents");
        direct.request(EnsurePath { path: "/control/a".into(), containers: true }).await.expect("containers");
        for dir in ["/parents", "/control"] {
            direct.create(&format!("{dir}/a/child"), "", CreateMode::Persistent).await.expect("child");
            direct.delete(&format!("{dir}/a/child"), None).await.expect("delete child");
        }
        wait_until_async("the control's container went", || {
            let direct = direct.clone();
            async move { direct.exists("/control/a").await.expect("exists").is_none() }
        })
        .await;
        assert!(direct.exists("/parents/a").await.expect("exists").is_some(), "{}: a plain parent stays", kind.name());
        assert_eq!(session.server_features().containers, Support::No, "{}", kind.name());

        // No fallback for TTL nodes or persistent watches: a typed refusal, nothing made.
        match session.create("/ttl", "", CreateMode::PersistentWithTtl(Duration::from_secs(5))).await {
            Err(Error::Unsupported { path, feature: Feature::Ttl }) => assert_eq!(path, "/ttl"),
            other => panic!("{}: expected Unsupported TTL, got {other:?}", kind.name()),
        }
        assert_eq!(direct.exists("/ttl").await.expect("exists"), None);
        // The recipe on top says the same, typed, and makes nothing.
        let ttl_node = actix_zookeeper::persistent::PersistentTtlNode::start(
            session.clone(),
            actix_zookeeper::persistent::PersistentTtlNodeConfig::new("/ttl-node", Duration::from_secs(5)),
        )
        .expect("a valid TTL node");
        let refused = bounded("the TTL node's first create", ttl_node.wait_for_initial_create(None)).await;
        assert!(
            matches!(
                &refused,
                Err(actix_zookeeper::persistent::PersistentNodeError::Failed {
                    source: Error::Unsupported { feature: Feature::Ttl, .. },
                    ..
                })
            ),
            "{}: {refused:?}",
            kind.name()
        );
        assert_eq!(direct.exists("/ttl-node").await.expect("exists"), None);
        ttl_node.stop().await;
        let (me, _) = connected_recorder();
        match session.add_watch("/plain", PersistentWatchMode::Node, me).await {
            Err(Error::Unsupported { feature: Feature::PersistentWatches, .. }) => {}
            other => panic!("{}: expected Unsupported watches, got {other:?}", kind.name()),
        }
        let features = session.server_features();
        assert_eq!((features.ttl, features.persistent_watches), (Support::No, Support::No), "{}", kind.name());
        session.close().await;
        direct.close().await;
    }

    // "3.4" not declared: every create is refused, and the error says what to do. Here the
    // chroot cannot be made, so the session ends with that error instead of retrying forever.
    let proxy = FaultProxy::start_as(&zk.connect_string(), OlderServer::zookeeper_3_4()).expect("proxy");
    let config = SessionConfig::new(proxy.address()).with_chroot(unique_root("compat-undeclared"));
    let session = SessionHandle::start(config).expect("config");
    match bounded("the create", session.create("/n", "", CreateMode::Persistent)).await {
        Err(error @ Error::Unsupported { feature: Feature::Create2, .. }) => {
            assert!(error.to_string().contains("with_server_version"), "{error}")
        }
        other => panic!("expected Unsupported create2, got {other:?}"),
    }
    session.close().await;
}

/// A recipient for watch events nobody reads (the watch is refused anyway).
fn connected_recorder() -> (actix::Recipient<WatchEvent>, Recorded<WatchEvent>) {
    let recorded = Recorded::<WatchEvent>::start();
    (recorded.recipient.clone(), recorded)
}

#[actix_rt::test]
async fn locks_elections_and_queues_work_on_older_servers() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    for (kind, version) in kinds() {
        let root = unique_root("compat-recipes");
        let proxy = FaultProxy::start_as(&zk.connect_string(), kind.clone()).expect("proxy");
        let (a, b) = (session_as(&proxy, &root, version).await, session_as(&proxy, &root, version).await);

        // Lock: one holder at a time, tokens growing.
        let (first, second) = (
            LockHandle::start(a.clone(), LockConfig::new("/lock")).expect("lock"),
            LockHandle::start(b.clone(), LockConfig::new("/lock")).expect("lock"),
        );
        let mut last = None;
        for round in 0..3 {
            let held = bounded("acquire", first.acquire(None)).await.expect("first holds");
            assert!(held.token.0 > 0 && Some(held.token) > last, "{}: round {round}", kind.name());
            assert!(second.try_acquire().await.expect("try").is_none(), "{}: exclusive", kind.name());
            first.release().await.expect("release");
            let other = bounded("acquire", second.acquire(None)).await.expect("second holds");
            assert!(other.token > held.token);
            second.release().await.expect("release");
            last = Some(other.token);
        }

        // Election: a hand-off, and an observer of the leader's value.
        let leader = ElectionHandle::start(a.clone(), ElectionConfig::new("/leader").with_participant_id("a"))
            .expect("election");
        let term = bounded("a leads", leader.leadership()).await.expect("leads");
        let next = ElectionHandle::start(b.clone(), ElectionConfig::new("/leader").with_participant_id("b"))
            .expect("election");
        let observer = ElectionObserverHandle::start(b.clone(), "/leader").expect("observer");
        leader.proclaim("v").await.expect("proclaim");
        wait_until_async("the observer sees the value", || {
            let observer = observer.clone();
            async move {
                observer.current().await.ok().flatten().is_some_and(|p| p.value.as_deref() == Some(&b"v"[..]))
            }
        })
        .await;
        leader.resign().await.expect("resign");
        let next_term = bounded("b leads", next.leadership()).await.expect("b leads");
        assert!(next_term.token > term.token, "{}", kind.name());

        // Queue: what is put is taken, in order. A take is a `multi` with a create, which 3.4
        // cannot read (see `lacks_create2`): refused typed there, and the item stays.
        let queue = Queue::new(a.clone(), "/q");
        for i in 0..5 {
            queue.put(format!("item-{i}")).await.expect("put");
        }
        let other = Queue::new(b.clone(), "/q");
        if lacks_create2(version) {
            let refused = bounded("take", other.take(None)).await;
            assert!(
                matches!(&refused, Err(QueueError::ZooKeeper(Error::Unsupported { feature: Feature::Create2, .. }))),
                "{}: {refused:?}",
                kind.name()
            );
            assert_eq!(a.children("/q").await.expect("items").names.iter().filter(|n| n.starts_with("qn-")).count(), 5);
            // `put_all` is a `multi` of creates too: refused typed, nothing put.
            let refused = queue.put_all(vec![b"a".to_vec(), b"b".to_vec()]).await;
            assert!(
                matches!(&refused, Err(QueueError::ZooKeeper(Error::Multi { .. } | Error::Unsupported { .. }))),
                "{}: {refused:?}",
                kind.name()
            );
            assert_eq!(a.children("/q").await.expect("items").names.iter().filter(|n| n.starts_with("qn-")).count(), 5);
        } else {
            for i in 0..5 {
                let item = bounded("take", other.take(None)).await.expect("take");
                assert_eq!(item, format!("item-{i}").into_bytes(), "{}", kind.name());
            }
            queue.put_all(vec![b"a".to_vec(), b"b".to_vec()]).await.expect("put_all");
            for item in ["a", "b"] {
                let taken = bounded("take", other.take(None)).await.expect("take");
                assert_eq!(taken, item.as_bytes(), "{}", kind.name());
            }
        }

        // Counter: increments from two sessions all count.
        let counts: Vec<_> = [&a, &b]
            .iter()
            .map(|s| SharedCountHandle::start((*s).clone(), SharedCountConfig::new("/count")).expect("count"))
            .collect();
        for count in &counts {
            for _ in 0..5 {
                count.add(1).await.expect("add");
            }
        }
        for count in &counts {
            wait_until_async("every increment counted", || {
                let count = count.clone();
                async move { count.get().await.is_ok_and(|now| now.value == 10) }
            })
            .await;
        }

        for handle in [&leader, &next] {
            handle.stop().await;
        }
        a.close().await;
        b.close().await;
    }
}

#[actix_rt::test]
async fn caches_follow_changes_with_one_shot_watches_where_there_are_no_persistent_ones() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    for (kind, version) in kinds() {
        let root = unique_root("compat-cache");
        let proxy = FaultProxy::start_as(&zk.connect_string(), kind.clone()).expect("proxy");
        let session = session_as(&proxy, &root, version).await;
        let writer = session_at(&zk.connect_string(), &root).await;
        writer.ensure_path("/tree/a").await.expect("tree");
        let cache = CacheHandle::start(
            session.clone(),
            CacheConfig::new("/tree").with_scope(CacheScope::Tree { max_depth: None }),
        )
        .expect("cache");
        let mut events = cache.events();
        let mut seen = Vec::new();
        let mut until = async |what: &str, pred: &dyn Fn(&CacheEvent) -> bool| {
            let deadline = std::time::Instant::now() + WAIT;
            loop {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                match actix_rt::time::timeout(left, events.next()).await {
                    Ok(Some(Ok(event))) => {
                        let hit = pred(&event);
                        seen.push(event);
                        if hit {
                            return;
                        }
                    }
                    other => panic!("{}: no {what}: {other:?}; seen {seen:#?}", kind.name()),
                }
            }
        };
        until("load", &|e| matches!(e, CacheEvent::CacheInitialized)).await;
        // A first child under a leaf, a deeper one, a data change, a deletion: each is seen.
        writer.create("/tree/a/b", "1", CreateMode::Persistent).await.expect("b");
        until("b added", &|e| matches!(e, CacheEvent::NodeAdded { path, .. } if path == "/tree/a/b")).await;
        writer.create("/tree/a/b/c", "", CreateMode::Persistent).await.expect("c");
        until("c added", &|e| matches!(e, CacheEvent::NodeAdded { path, .. } if path == "/tree/a/b/c")).await;
        writer.set_data("/tree/a/b", "2", None).await.expect("set");
        until("b updated", &|e| matches!(e, CacheEvent::NodeUpdated { path, data, .. } if path == "/tree/a/b" && data.as_deref() == Some(&b"2"[..]))).await;
        writer.delete("/tree/a/b/c", None).await.expect("delete");
        until("c removed", &|e| matches!(e, CacheEvent::NodeRemoved { path, .. } if path == "/tree/a/b/c")).await;
        let held = cache.snapshot().await.expect("snapshot");
        assert_eq!(held.keys().cloned().collect::<Vec<_>>(), ["/tree", "/tree/a", "/tree/a/b"], "{}", kind.name());
        assert_eq!(session.server_features().persistent_watches, Support::No);
        session.close().await;
        writer.close().await;
    }
}

/// Review of session 17: on one-shot watches, a cache whose path did not exist yet never saw it
/// made, nor the children it then got (listing a missing node sets no watch).
#[actix_rt::test]
async fn a_cache_on_one_shot_watches_sees_its_missing_path_made_and_filled() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    for scope in [CacheScope::Children, CacheScope::Tree { max_depth: None }] {
        let root = unique_root("compat-cache-missing");
        let proxy = FaultProxy::start_as(&zk.connect_string(), OlderServer::without_extras()).expect("proxy");
        let session = session_as(&proxy, &root, None).await;
        let writer = session_at(&zk.connect_string(), &root).await;
        let cache = CacheHandle::start(session.clone(), CacheConfig::new("/later").with_scope(scope)).expect("cache");
        let mut events = cache.events();
        loop {
            if let Ok(CacheEvent::CacheInitialized) = bounded("load", events.next()).await.expect("events") {
                break;
            }
        }
        writer.create("/later", "", CreateMode::Persistent).await.expect("made");
        writer.create("/later/child", "c", CreateMode::Persistent).await.expect("child");
        loop {
            match bounded("the child", events.next()).await.expect("events") {
                Ok(CacheEvent::NodeAdded { path, .. }) if path == "/later/child" => break,
                Ok(_) => {}
                Err(missed) => panic!("{missed}"),
            }
        }
        session.close().await;
        writer.close().await;
    }
}

/// Acks every delivery and keeps its data once the ack is answered.
struct Acker(Arc<Mutex<Vec<Vec<u8>>>>);

impl actix::Actor for Acker {
    type Context = actix::Context<Self>;
}

impl actix::Handler<Delivery> for Acker {
    type Result = ();

    fn handle(&mut self, delivery: Delivery, ctx: &mut actix::Context<Self>) {
        let acked = self.0.clone();
        let ack = delivery.ack();
        actix::AsyncContext::spawn(
            ctx,
            actix::fut::wrap_future(async move {
                ack.await.expect("acked");
                acked.lock().expect("acked").push(delivery.data.clone());
            }),
        );
    }
}

impl actix::Handler<Revoked> for Acker {
    type Result = ();

    fn handle(&mut self, _: Revoked, _: &mut actix::Context<Self>) {}
}

/// Sets every delivery aside as a dead letter and keeps the answer.
struct DeadLetterer(Arc<Mutex<Vec<Result<(), QueueError>>>>);

impl actix::Actor for DeadLetterer {
    type Context = actix::Context<Self>;
}

impl actix::Handler<Delivery> for DeadLetterer {
    type Result = ();

    fn handle(&mut self, delivery: Delivery, ctx: &mut actix::Context<Self>) {
        let answers = self.0.clone();
        let letter = delivery.dead_letter("poison");
        actix::AsyncContext::spawn(
            ctx,
            actix::fut::wrap_future(async move {
                let answer = letter.await;
                answers.lock().expect("answers").push(answer);
            }),
        );
    }
}

impl actix::Handler<Revoked> for DeadLetterer {
    type Result = ();

    fn handle(&mut self, _: Revoked, _: &mut actix::Context<Self>) {}
}

/// Runs `task` for the test's payload.
struct Doubler;

impl actix::Actor for Doubler {
    type Context = actix::Context<Self>;
}

impl actix::Handler<TaskAssigned> for Doubler {
    type Result = actix::ResponseFuture<TaskOutcome>;

    fn handle(&mut self, task: TaskAssigned, _: &mut actix::Context<Self>) -> Self::Result {
        Box::pin(async move { [task.data.clone(), task.data].concat().into() })
    }
}

/// The recipes `locks_elections_and_queues_work_on_older_servers` leaves out, each in its core
/// use, on each older server: a semaphore, a read/write lock, a multi-lock, a queue consumer,
/// both barriers, a shared value, a persistent node, an atomic long, a group, service discovery
/// and master–worker tasks (whose master watches with persistent watches where there are some,
/// and reads every second where there are none; a submission is refused typed on 3.4).
#[actix_rt::test]
async fn the_other_recipes_work_on_older_servers() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    for (kind, version) in kinds() {
        let name = kind.name();
        let root = unique_root("compat-others");
        let proxy = FaultProxy::start_as(&zk.connect_string(), kind.clone()).expect("proxy");
        let (a, b) = (session_as(&proxy, &root, version).await, session_as(&proxy, &root, version).await);

        // Semaphore: two leases of two, the third waits until one is released.
        let sems: Vec<_> = [&a, &b, &a]
            .iter()
            .map(|s| SemaphoreHandle::start((*s).clone(), SemaphoreConfig::new("/sem", 2)).expect("semaphore"))
            .collect();
        bounded("lease 1", sems[0].acquire(None)).await.expect("lease 1");
        bounded("lease 2", sems[1].acquire(None)).await.expect("lease 2");
        let third = actix_rt::spawn(sems[2].acquire(None));
        actix_rt::time::sleep(Duration::from_millis(300)).await;
        assert!(!third.is_finished(), "{name}: a third lease of two");
        sems[0].release().await.expect("release");
        bounded("lease 3", third).await.expect("joined").expect("lease 3");

        // A read/write lock: two readers at once, the writer after them.
        let reader = |s: &SessionHandle| {
            LockHandle::start(s.clone(), LockConfig::new("/rw").with_kind(LockKind::Read)).expect("lock")
        };
        let (r1, r2) = (reader(&a), reader(&b));
        bounded("read 1", r1.acquire(None)).await.expect("read 1");
        bounded("read 2", r2.acquire(None)).await.expect("read 2: readers share");
        let writer = LockHandle::start(a.clone(), LockConfig::new("/rw").with_kind(LockKind::Write)).expect("lock");
        let writing = actix_rt::spawn(writer.acquire(None));
        actix_rt::time::sleep(Duration::from_millis(300)).await;
        assert!(!writing.is_finished(), "{name}: the writer waits for the readers");
        r1.release().await.expect("release");
        r2.release().await.expect("release");
        bounded("write", writing).await.expect("joined").expect("the writer holds");
        writer.release().await.expect("release");

        // A multi-lock: both locks, or none.
        let both = MultiLock::start(a.clone(), vec![LockConfig::new("/m1"), LockConfig::new("/m2")]).expect("multi");
        bounded("both", both.acquire(None)).await.expect("both held");
        let single = LockHandle::start(b.clone(), LockConfig::new("/m2")).expect("lock");
        assert!(single.try_acquire().await.expect("try").is_none(), "{name}: /m2 is held");

        // A queue consumer: claims (a create each) and acks (a `multi` of deletes) work everywhere.
        // Put on the session that already learnt what the server lacks: on another, the first
        // refusal closes the connection, and a request in flight then is a `ConnectionLoss`.
        Queue::new(a.clone(), "/work").put("job").await.expect("put");
        let acked = Arc::new(Mutex::new(Vec::new()));
        let acker = actix::Actor::start(Acker(acked.clone()));
        let consumer =
            QueueConsumerHandle::start(a.clone(), ConsumerConfig::new("/work").with_worker(Worker::new(&acker)))
                .expect("consumer");
        wait_until("the job acked", || acked.lock().expect("acked").len() == 1).await;
        assert_eq!(acked.lock().expect("acked")[0], b"job", "{name}");
        // `b`'s own reads may meet a connection a refusal of one of its recipes cut: `children`
        // asks again.
        assert!(children(&b, "/work").await.iter().all(|n| !n.starts_with("qn-")), "{name}");
        consumer.stop().await;

        // A dead letter moves the item in one `multi` with a create: refused typed on 3.4, where
        // the item stays in its queue; moved elsewhere.
        // The directories first, each retried: a container create refused on an undeclared
        // server cuts the connection, and what was in flight then is a `ConnectionLoss`.
        for dir in ["/poison", "/dead"] {
            wait_until_async("the directory", || {
                let a = a.clone();
                async move { a.ensure_path(dir).await.is_ok() }
            })
            .await;
        }
        Queue::new(a.clone(), "/poison").put("bad").await.expect("put");
        let answers = Arc::new(Mutex::new(Vec::new()));
        let letterer = actix::Actor::start(DeadLetterer(answers.clone()));
        let consumer = QueueConsumerHandle::start(
            a.clone(),
            ConsumerConfig::new("/poison").with_dead_letter("/dead").with_worker(Worker::new(&letterer)),
        )
        .expect("consumer");
        wait_until("the dead letter answered", || !answers.lock().expect("answers").is_empty()).await;
        let answer = answers.lock().expect("answers")[0].clone();
        let queued = |dir: &'static str| {
            let b = b.clone();
            async move { children(&b, dir).await.iter().filter(|n| n.starts_with("qn-")).count() }
        };
        if lacks_create2(version) {
            assert!(
                matches!(&answer, Err(QueueError::ZooKeeper(Error::Multi { .. } | Error::Unsupported { .. }))),
                "{name}: {answer:?}"
            );
            assert_eq!((queued("/poison").await, queued("/dead").await), (1, 0), "{name}: nothing moved");
        } else {
            answer.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!((queued("/poison").await, queued("/dead").await), (0, 1), "{name}: moved");
        }
        consumer.stop().await;

        // Barriers: a double barrier of two lets both in and out; a set barrier holds a waiter
        // until it is removed.
        let members = [&a, &b].map(|s| DistributedDoubleBarrier::new(s.clone(), "/double", 2).expect("barrier"));
        let entering: Vec<_> = members.iter().map(|m| actix_rt::spawn(m.enter(Some(WAIT)))).collect();
        for entered in entering {
            bounded("enter", entered).await.expect("joined").expect("entered");
        }
        let leaving: Vec<_> = members.iter().map(|m| actix_rt::spawn(m.leave(Some(WAIT)))).collect();
        for left in leaving {
            bounded("leave", left).await.expect("joined").expect("left");
        }
        let gate = DistributedBarrier::new(a.clone(), "/gate").expect("barrier");
        gate.set().await.expect("set");
        let waiter = actix_rt::spawn(DistributedBarrier::new(b.clone(), "/gate").expect("barrier").wait(Some(WAIT)));
        actix_rt::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiter.is_finished(), "{name}: the gate holds");
        gate.remove().await.expect("remove");
        bounded("through the gate", waiter).await.expect("joined").expect("passed");

        // A shared value: set on one session, heard on the other.
        let (mine, theirs) = (
            SharedValueHandle::start(a.clone(), SharedValueConfig::new("/value").with_seed("seed")).expect("value"),
            SharedValueHandle::start(b.clone(), SharedValueConfig::new("/value").with_seed("seed")).expect("value"),
        );
        mine.set("new").await.expect("set");
        wait_until_async("the other session hears the value", || {
            let theirs = theirs.clone();
            async move { theirs.get().await.is_ok_and(|v| v.value == b"new") }
        })
        .await;

        // A persistent node: made, deleted by someone else, made again.
        let node = PersistentNodeHandle::start(a.clone(), PersistentNodeConfig::new("/node", CreateMode::Ephemeral))
            .expect("node");
        node.wait_for_initial_create(Some(WAIT)).await.expect("made");
        // Asked again after a cut connection: a delete whose reply was lost may have applied.
        let mut cut = false;
        loop {
            match b.delete("/node", None).await {
                Ok(()) => break,
                Err(Error::NoNode { .. }) if cut => break,
                Err(Error::ConnectionLoss { .. }) => cut = true,
                Err(e) => panic!("{name}: deleted by another: {e}"),
            }
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }
        wait_until_async("made again", || {
            let b = b.clone();
            async move { b.exists("/node").await.is_ok_and(|stat| stat.is_some()) }
        })
        .await;
        node.stop().await;

        // An atomic long: increments from both sessions all count.
        let longs = [&a, &b].map(|s| DistributedAtomicLong::new(s.clone(), AtomicLongConfig::new("/long")));
        for long in &longs {
            for _ in 0..3 {
                assert!(long.increment().await.expect("increment").succeeded, "{name}");
            }
        }
        assert_eq!(longs[0].get().await.expect("get").post, 6, "{name}");

        // A group: both members see both.
        let group: Vec<_> = [(&a, "ga"), (&b, "gb")]
            .iter()
            .map(|(s, id)| GroupMemberHandle::start((*s).clone(), GroupConfig::new("/group", *id)).expect("member"))
            .collect();
        for member in &group {
            wait_until_async("both members", || {
                let member = member.clone();
                async move { member.members().await.is_ok_and(|m| m.keys().eq(["ga", "gb"].iter())) }
            })
            .await;
        }

        // Service discovery: an instance registered on one session is found and cached on the other.
        let registry = ServiceDiscovery::new(a.clone(), DiscoveryConfig::new("/services")).expect("discovery");
        let finder = ServiceDiscovery::new(b.clone(), DiscoveryConfig::new("/services")).expect("discovery");
        let instance = ServiceInstance::new("billing", "one").with_address("10.0.0.1").with_port(80);
        let _registration = registry.register(instance.clone()).await.expect("registered");
        wait_until_async("the instance queried", || {
            let (finder, instance) = (finder.clone(), instance.clone());
            async move { finder.query_for_instances("billing").await.is_ok_and(|found| found == vec![instance]) }
        })
        .await;
        let cache = finder.cache("billing").expect("cache");
        wait_until_async("the cache has it", || {
            let cache = cache.clone();
            async move { cache.instances().await.is_ok_and(|found| found.len() == 1) }
        })
        .await;

        // Master–worker: tasks submitted are run and their results read.
        let _master = TaskMasterHandle::start(a.clone(), TaskMasterConfig::new("/tasks")).expect("master");
        let runner = actix::Actor::start(Doubler);
        let _worker = TaskWorkerHandle::start(b.clone(), TaskWorkerConfig::new("/tasks", "w", runner.recipient()))
            .expect("worker");
        let client = TaskClient::new(a.clone(), "/tasks").expect("client");
        if lacks_create2(version) {
            // A submission is a `multi` of creates: refused typed on 3.4.
            let refused = client.submit("ab").await;
            assert!(
                matches!(&refused, Err(TaskError::ZooKeeper(Error::Unsupported { feature: Feature::Create2, .. }))),
                "{name}: {refused:?}"
            );
        } else {
            let task = client.submit("ab").await.expect("submitted");
            let result = bounded("the result", client.result(&task, WAIT)).await.expect("a result");
            assert_eq!(result, b"abab", "{name}");
        }

        a.close().await;
        b.close().await;
    }
}

/// A `multi` holding a create of a kind the server lacks (a container, a TTL node) is refused as
/// a whole, as such a server refuses it: `Error::Multi { index, Unsupported }` naming that op,
/// nothing applied. Once the server is known to lack it (declared, or learned from the first
/// refusal), the session refuses it without sending. A plain `multi` works.
#[actix_rt::test]
async fn a_multi_with_a_create_the_server_lacks_is_refused_typed_and_applies_nothing() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    for (kind, version) in kinds() {
        let name = kind.name();
        let root = unique_root("compat-multi");
        let proxy = FaultProxy::start_as(&zk.connect_string(), kind.clone()).expect("proxy");
        let session = session_as(&proxy, &root, version).await;
        let plain = vec![Op::Create { path: "/plain".into(), data: b"p".to_vec(), mode: CreateMode::Persistent }];
        let answer = session.multi(plain).await;
        if lacks_create2(version) {
            // zookeeper-client sends a create inside a `multi` as `create2`, which 3.4 lacks.
            assert!(
                matches!(&answer, Err(Error::Multi { index: 0, source }) if matches!(&**source, Error::Unsupported { feature: Feature::Create2, .. })),
                "{name}: {answer:?}"
            );
        } else {
            answer.expect("a plain multi");
        }
        session.ensure_path("/updated").await.expect("a node");
        let updates = vec![
            Op::Check { path: "/updated".into(), version: 0 },
            Op::SetData { path: "/updated".into(), data: b"q".to_vec(), version: None },
        ];
        session.multi(updates).await.expect("a multi without creates works everywhere");
        for (mode, feature) in [
            (CreateMode::Container, Feature::Containers),
            (CreateMode::PersistentWithTtl(Duration::from_secs(60)), Feature::Ttl),
        ] {
            for attempt in 0..2 {
                let ops = vec![
                    Op::Create { path: "/before".into(), data: Vec::new(), mode: CreateMode::Persistent },
                    Op::Create { path: "/lacking".into(), data: Vec::new(), mode },
                ];
                // On 3.4 the plain create before it is already one the server cannot read.
                let (at, blamed, feature) =
                    if lacks_create2(version) { (0, "/before", Feature::Create2) } else { (1, "/lacking", feature) };
                match bounded("the multi", session.multi(ops)).await {
                    Err(Error::Multi { index, source }) if index == at => assert!(
                        matches!(&*source, Error::Unsupported { path, feature: f } if path == blamed && *f == feature),
                        "{name}, {feature:?}, attempt {attempt}: {source:?}"
                    ),
                    other => {
                        panic!("{name}, {feature:?}, attempt {attempt}: expected Multi/Unsupported, got {other:?}")
                    }
                }
                // The refusal closed the connection (as a server does): read once it is back.
                let before = wait_for_answer(|| session.exists("/before")).await;
                assert!(before.is_none(), "{name}: nothing applied");
            }
        }
        session.close().await;
    }
}

/// A mixed ensemble during a rolling upgrade: the session moves from a member with persistent
/// watches to one without. The watch it adds again is refused there; its owner is told
/// (`WatchRefused`), a cache goes on with one-shot watches and keeps following changes, a task
/// master reads its tree every second and keeps assigning, and once
/// the session is back on a newer member, persistent watches are asked for again, not switched
/// off for good by the old member's refusal.
#[actix_rt::test]
async fn a_move_to_an_older_member_is_told_and_a_cache_falls_back_to_one_shot_watches() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("compat-mixed");
    let newer = FaultProxy::start(&zk.connect_string()).expect("proxy");
    let older = FaultProxy::start_as(&zk.connect_string(), OlderServer::without_extras()).expect("proxy");
    older.blackhole();
    let config = SessionConfig::new(format!("{},{}", newer.address(), older.address()))
        .with_chroot(&root)
        .with_session_timeout(Duration::from_secs(6));
    let (session, session_events) = connected(config).await;
    let writer = session_at(&zk.connect_string(), &root).await;
    writer.ensure_path("/tree/a").await.expect("tree");
    let (me, watched) = connected_recorder();
    let id = session.add_watch("/tree", PersistentWatchMode::Recursive, me).await.expect("a persistent watch");
    assert_eq!(session.server_features().persistent_watches, Support::Yes);
    let cache =
        CacheHandle::start(session.clone(), CacheConfig::new("/tree").with_scope(CacheScope::Tree { max_depth: None }))
            .expect("cache");
    let mut events = cache.events();
    let mut until = async |what: &str, pred: &dyn Fn(&CacheEvent) -> bool| {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match actix_rt::time::timeout(left, events.next()).await {
                Ok(Some(Ok(event))) if pred(&event) => return,
                Ok(Some(_)) => {}
                other => panic!("no {what}: {other:?}"),
            }
        }
    };
    until("load", &|e| matches!(e, CacheEvent::CacheInitialized)).await;
    // A task master on the same session (its watches are persistent), a worker and a client on
    // a session of their own.
    let _master = TaskMasterHandle::start(session.clone(), TaskMasterConfig::new("/tasks")).expect("master");
    let runner = actix::Actor::start(Doubler);
    let _worker = TaskWorkerHandle::start(writer.clone(), TaskWorkerConfig::new("/tasks", "w", runner.recipient()))
        .expect("worker");
    let client = TaskClient::new(writer.clone(), "/tasks").expect("client");
    let task = client.submit("ab").await.expect("submitted");
    assert_eq!(bounded("a result before the move", client.result(&task, WAIT)).await.expect("result"), b"abab");

    // To the older member.
    older.heal();
    newer.blackhole();
    newer.reset();
    let refused = |e: &WatchEvent| e.kind == WatchEventKind::WatchRefused(WatchRefusal::Unsupported);
    let (_, told) = watched.wait_for(0, WAIT, refused).await;
    assert_eq!((told.watch, told.path.as_str()), (Some(id), "/tree"), "the owner hears which watch went");
    writer.create("/tree/a/b", "1", CreateMode::Persistent).await.expect("b");
    until("b added on the older member", &|e| matches!(e, CacheEvent::NodeAdded { path, .. } if path == "/tree/a/b"))
        .await;
    writer.set_data("/tree/a/b", "2", None).await.expect("set");
    until("b updated", &|e| {
        matches!(e, CacheEvent::NodeUpdated { path, data, .. } if path == "/tree/a/b" && data.as_deref() == Some(&b"2"[..]))
    })
    .await;
    assert_eq!(session.server_features().persistent_watches, Support::No, "learned from the older member");
    // The master lost its watches too, and reads every second instead: tasks are still assigned.
    // Submitted once the moves are over (each refusal cuts the connection, and every reconnect
    // makes the master read everything once): from then on only the polling can see it.
    let settled = session_events.snapshot().len();
    actix_rt::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(session_events.snapshot().len(), settled, "the session was still moving");
    let task = client.submit("cd").await.expect("submitted");
    assert_eq!(bounded("a result after the move", client.result(&task, WAIT)).await.expect("result"), b"cdcd");

    // Back to a newer member: asked again.
    let moves = session_events.snapshot().len();
    newer.heal();
    older.blackhole();
    older.reset();
    session_events
        .wait_for(moves, WAIT, |e| matches!(e, SessionEvent::Reconnected { .. } | SessionEvent::Connected { .. }))
        .await;
    let (me, _watched) = connected_recorder();
    session.add_watch("/tree", PersistentWatchMode::Node, me).await.expect("a newer member takes persistent watches");
    assert_eq!(session.server_features().persistent_watches, Support::Yes);
    writer.delete("/tree/a/b", None).await.expect("delete");
    until("b removed", &|e| matches!(e, CacheEvent::NodeRemoved { path, .. } if path == "/tree/a/b")).await;
    cache.stop().await;
    session.close().await;
    writer.close().await;
}
