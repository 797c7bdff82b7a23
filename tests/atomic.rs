//! The distributed atomic long against a real ZooKeeper: lost updates under contention (also
//! beside Curator's own `DistributedAtomicLong`), promotion to a lock, lost replies, bad input.
#![cfg(feature = "testkit")]

use crate::common;
use crate::common::curator;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use actix_zookeeper::atomic::*;
use actix_zookeeper::lock::LockConfig;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{Direction, TestZooKeeper, expire_session, unique_root};
use common::*;
use curator::{CuratorPeer, off_thread as peer};

const WAIT: Duration = Duration::from_secs(20);

/// Tries enough for every increment of a contended run to succeed.
fn patient() -> RetryPolicy {
    RetryPolicy::new(Duration::from_millis(1), Duration::from_millis(20)).with_max_attempts(10_000)
}

/// Increments `n` times on `session`, returning every (pre, post) of a succeeded increment.
async fn increments(session: SessionHandle, path: &str, n: usize) -> Vec<(i64, i64)> {
    let value = DistributedAtomicLong::new(session, AtomicLongConfig::new(path).with_retry(patient()));
    let mut done = Vec::with_capacity(n);
    for _ in 0..n {
        let added = value.increment().await.expect("increment");
        assert!(added.succeeded, "a patient increment gave up: {added:?}");
        done.push((added.pre, added.post));
    }
    done
}

/// Row "concurrent writers": 4 sessions, 2 tasks each, 50 increments per task. Every increment
/// succeeds exactly once: the posts are 1..=400, each seen once, each one more than its pre.
#[actix_rt::test]
async fn increments_from_many_sessions_lose_none_and_see_each_value_once() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("atomic-hammer");
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let session = session_at(&zk.connect_string(), &root).await;
        for _ in 0..2 {
            tasks.push(actix_rt::spawn(increments(session.clone(), "/deep/value", 50)));
        }
    }
    let mut posts = BTreeSet::new();
    for task in tasks {
        for (pre, post) in bounded("the increments", task).await.expect("task") {
            assert_eq!(post, pre + 1, "an increment is one more than what it read");
            assert!(posts.insert(post), "two increments wrote {post}: one was lost");
        }
    }
    assert_eq!(posts, (1..=400).collect::<BTreeSet<i64>>());
    let observer = session_at(&zk.connect_string(), &root).await;
    let stored = observer.get_data("/deep/value").await.expect("the node").data;
    assert_eq!(stored, encode_long(400).to_vec(), "Curator's 8-byte format");
}

/// Row "concurrent writers", with Curator: a Curator `DistributedAtomicLong` (two threads, 200
/// increments) and two Rust sessions (100 increments each) on one value: 400, read by both.
#[actix_rt::test]
async fn curator_and_rust_increments_share_one_value() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("atomic-curator");
    let java = actix_rt::task::spawn_blocking({
        let connect = format!("{}{root}", zk.connect_string());
        move || CuratorPeer::start_atomic(&connect, "/shared/value")
    })
    .await
    .expect("peer start")
    .expect("Curator peer (apt-get install libcurator-recipes-java)");
    let java_increments = actix_rt::spawn(peer(java, |p| p.count_increment(200, 2, WAIT * 3)));
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let rust = [
        actix_rt::spawn(increments(a.clone(), "/shared/value", 100)),
        actix_rt::spawn(increments(b, "/shared/value", 100)),
    ];
    for task in rust {
        assert_eq!(bounded("rust increments", task).await.expect("task").len(), 100);
    }
    let (java, counted) = java_increments.await.expect("java task");
    let (successes, _conflicts) = counted.expect("Curator increments");
    assert_eq!(successes, 200);
    let value = DistributedAtomicLong::new(a, AtomicLongConfig::new("/shared/value"));
    assert_eq!(value.get().await.expect("get").post, 400, "no increment lost");
    let (_java, seen) = peer(java, |p| p.atomic_get(WAIT)).await;
    assert_eq!(seen.expect("Curator reads"), 400, "Curator reads what Rust wrote");
}

/// Starts an increment on `session` whose one optimistic write is beaten: requests reach the
/// server 300 ms late, so its read lands at ~300 ms and its write at ~600 ms, and `observer`
/// writes 100 in between. Returns the increment's task once the proxy is healed.
async fn beaten_increment(
    proxy: &actix_zookeeper::testkit::FaultProxy,
    session: &SessionHandle,
    observer: &SessionHandle,
    config: AtomicLongConfig,
) -> actix_rt::task::JoinHandle<Result<AtomicValue, AtomicError>> {
    let value = DistributedAtomicLong::new(session.clone(), config);
    proxy.set_latency(Direction::Upstream, Duration::from_millis(300));
    let increment = actix_rt::spawn(async move { value.increment().await });
    actix_rt::time::sleep(Duration::from_millis(450)).await;
    let observed = DistributedAtomicLong::new(observer.clone(), AtomicLongConfig::new("/value"));
    observed.force_set(100).await.expect("the observer writes first");
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    proxy.heal();
    increment
}

fn one_try() -> RetryPolicy {
    RetryPolicy::new(Duration::from_millis(1), Duration::from_millis(1)).with_max_attempts(1)
}

/// Row "every optimistic try meets a concurrent write": with one try, an increment whose write
/// is beaten gives up with nothing written; promoted to a lock, the same increment tries again
/// holding it and succeeds.
#[actix_rt::test]
async fn optimistic_tries_give_up_and_the_promoted_lock_succeeds() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("atomic-promoted");
    let Proxied { proxy, session, observer } = proxied(&zk.connect_string(), &root, Duration::from_secs(10)).await;
    let config = AtomicLongConfig::new("/value").with_retry(one_try());
    let given_up = beaten_increment(&proxy, &session, &observer, config).await;
    let given_up = bounded("the increment", given_up).await.expect("task").expect("increment");
    assert!(!given_up.succeeded, "{given_up:?}");
    assert_eq!((given_up.pre, given_up.post, given_up.stats.optimistic_tries), (0, 0, 1));
    let value = DistributedAtomicLong::new(observer.clone(), AtomicLongConfig::new("/value"));
    assert_eq!(value.get().await.expect("get").post, 100, "nothing written by the increment that gave up");

    let promoted = AtomicLongConfig::new("/value")
        .with_retry(one_try())
        .promoted_to_lock(PromotedToLock::new("/value-lock").with_max_lock_time(WAIT));
    let done = beaten_increment(&proxy, &session, &observer, promoted).await;
    let done = bounded("the increment", done).await.expect("task").expect("increment");
    assert!(done.succeeded, "{done:?}");
    assert_eq!((done.pre, done.post), (100, 101), "tried again under the lock, over the observer's write");
    assert_eq!((done.stats.optimistic_tries, done.stats.promoted_tries), (1, 1));
    assert_eq!(value.get().await.expect("get").post, 101);
    let lock_nodes = observer.children("/value-lock").await.map(|c| c.names).unwrap_or_default();
    assert!(lock_nodes.is_empty(), "the promoted lock is released: {lock_nodes:?}");
}

/// Rows "future dropped", "actor stopped" and "session closed": an increment dropped while its
/// promotion waits for the lock leaves no lock node behind and writes nothing; on a closed
/// session every operation answers `Closed`.
#[actix_rt::test]
async fn a_dropped_or_closed_operation_leaves_nothing_behind() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("atomic-dropped");
    let Proxied { proxy, session, observer } = proxied(&zk.connect_string(), &root, Duration::from_secs(10)).await;
    // Someone holds the promoted lock, so the promotion waits in line.
    let blocker =
        actix_zookeeper::lock::LockHandle::start(observer.clone(), LockConfig::new("/value-lock")).expect("lock");
    blocker.acquire(None).await.expect("the blocker holds the lock");
    let promoted =
        AtomicLongConfig::new("/value").with_retry(one_try()).promoted_to_lock(PromotedToLock::new("/value-lock"));
    let increment = beaten_increment(&proxy, &session, &observer, promoted).await;
    let line = || async { observer.children("/value-lock").await.map(|c| c.names.len()).unwrap_or(0) };
    let deadline = Instant::now() + WAIT;
    while line().await < 2 {
        assert!(Instant::now() < deadline, "the promotion never stood in line");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    increment.abort();
    wait_until_async("the dropped promotion's node is gone", || async { line().await == 1 }).await;
    blocker.release().await.expect("the blocker releases");
    let value = DistributedAtomicLong::new(observer.clone(), AtomicLongConfig::new("/value"));
    assert_eq!(value.get().await.expect("get").post, 100, "the dropped increment wrote nothing");

    session.close().await;
    let closed = DistributedAtomicLong::new(session.clone(), AtomicLongConfig::new("/value"));
    assert_eq!(closed.get().await, Err(AtomicError::ZooKeeper(Error::Closed)));
    assert_eq!(closed.increment().await, Err(AtomicError::ZooKeeper(Error::Closed)));
    assert_eq!(closed.force_set(1).await, Err(AtomicError::ZooKeeper(Error::Closed)));
}

/// Holds an increment's write in the proxy (requests 500 ms late: its read lands at ~500 ms,
/// its write at ~1000 ms) and returns its task at ~750 ms, the write still on its way.
async fn increment_with_its_write_in_flight(
    proxy: &actix_zookeeper::testkit::FaultProxy,
    session: &SessionHandle,
) -> actix_rt::task::JoinHandle<Result<AtomicValue, AtomicError>> {
    let value = DistributedAtomicLong::new(session.clone(), AtomicLongConfig::new("/value"));
    value.force_set(7).await.expect("a value to start from");
    proxy.set_latency(Direction::Upstream, Duration::from_millis(500));
    let increment = actix_rt::spawn(async move { value.increment().await });
    actix_rt::time::sleep(Duration::from_millis(750)).await;
    increment
}

/// Row "a write's reply lost, the node still at the version it expected": the connection goes
/// while the write is still in the proxy; read back, the node has not moved, so the increment
/// tries again and succeeds, once.
#[actix_rt::test]
async fn a_write_lost_on_its_way_is_tried_again() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("atomic-lost-request");
    let Proxied { proxy, session, observer } = proxied(&zk.connect_string(), &root, Duration::from_secs(10)).await;
    let increment = increment_with_its_write_in_flight(&proxy, &session).await;
    proxy.reset();
    proxy.heal();
    let added = bounded("the increment", increment).await.expect("task").expect("increment");
    assert!(added.succeeded && (added.pre, added.post) == (7, 8), "{added:?}");
    assert!(added.stats.optimistic_tries >= 2, "tried again after the read-back: {added:?}");
    let value = DistributedAtomicLong::new(observer, AtomicLongConfig::new("/value"));
    assert_eq!(value.get().await.expect("get").post, 8, "applied once");
}

/// Row "a write's reply lost, the node moved on": the write applied and its reply is held, then
/// the connection goes (and, the second time, the session expires on the server first). Read
/// back, the node is past the expected version: `OutcomeUnknown`, never `Ok`, never applied twice.
#[actix_rt::test]
async fn a_write_whose_reply_is_lost_is_an_unknown_outcome() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    for expire in [false, true] {
        let root = unique_root("atomic-lost-reply");
        let Proxied { proxy, session, observer } = proxied(&zk.connect_string(), &root, Duration::from_secs(10)).await;
        let info = session.session().await.expect("session").info;
        let increment = increment_with_its_write_in_flight(&proxy, &session).await;
        proxy.set_latency(Direction::Downstream, Duration::from_secs(60));
        let value = DistributedAtomicLong::new(observer, AtomicLongConfig::new("/value"));
        let deadline = Instant::now() + WAIT;
        while value.get().await.expect("get").post != 8 {
            assert!(Instant::now() < deadline, "the write never reached the server");
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
        if expire {
            expire_session(&zk.connect_string(), &info).await.expect("expired on the server");
        }
        proxy.reset();
        proxy.heal();
        let outcome = bounded("the increment", increment).await.expect("task");
        assert!(
            matches!(&outcome, Err(AtomicError::OutcomeUnknown { path, pre: 7, attempted: 8, .. }) if path == "/value"),
            "expire: {expire}: {outcome:?}"
        );
        actix_rt::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(value.get().await.expect("get").post, 8, "not tried again (expire: {expire})");
        let generation = session.session().await.expect("session").generation;
        assert_eq!(generation, if expire { 2 } else { 1 }, "expire: {expire}");
    }
}

/// Every operation's answer, as Curator's: a missing node reads 0 and is not `expected` by a
/// compare-and-set; `initialize` creates once; a node deleted by someone else starts from 0.
#[actix_rt::test]
async fn the_api_answers_as_curators_does() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("atomic-api");
    let session = session_at(&zk.connect_string(), &root).await;
    let value = DistributedAtomicLong::new(session.clone(), AtomicLongConfig::new("/a/b"));
    let read = value.get().await.expect("get");
    assert!(read.succeeded && (read.pre, read.post) == (0, 0), "{read:?}");
    let cas = value.compare_and_set(0, 5).await.expect("cas");
    assert!(!cas.succeeded, "a missing node is not `expected`: {cas:?}");
    assert!(value.initialize(5).await.expect("initialize"), "created");
    assert!(!value.initialize(6).await.expect("initialize"), "already there");
    let cas = value.compare_and_set(4, 9).await.expect("cas");
    assert!(!cas.succeeded && (cas.pre, cas.post) == (5, 5), "{cas:?}");
    let cas = value.compare_and_set(5, 9).await.expect("cas");
    assert!(cas.succeeded && (cas.pre, cas.post) == (5, 9), "{cas:?}");
    let set = value.try_set(20).await.expect("try_set");
    assert!(set.succeeded && (set.pre, set.post) == (9, 20), "{set:?}");
    assert_eq!(value.decrement().await.expect("decrement").post, 19);
    assert_eq!(value.subtract(4).await.expect("subtract").post, 15);
    assert_eq!(value.add(-20).await.expect("add").post, -5);
    value.force_set(-7).await.expect("force_set");
    assert_eq!(value.get().await.expect("get").post, -7);
    session.delete("/a/b", None).await.expect("deleted by someone else");
    let added = value.increment().await.expect("increment");
    assert!(added.succeeded && (added.pre, added.post) == (0, 1), "starts from 0 again: {added:?}");
    assert_eq!(session.get_data("/a/b").await.expect("node").data, encode_long(1).to_vec());
}

/// Row "the node holds something else, a bad path, an overflow": typed errors, nothing written.
#[actix_rt::test]
async fn bad_input_gets_typed_errors_and_writes_nothing() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("atomic-bad");
    let session = session_at(&zk.connect_string(), &root).await;
    session.create("/count", vec![0, 0, 0, 7], CreateMode::Persistent).await.expect("a SharedCount's 4 bytes");
    let value = DistributedAtomicLong::new(session.clone(), AtomicLongConfig::new("/count"));
    let not_a_long = AtomicError::NotALong { path: "/count".into(), len: 4 };
    assert_eq!(value.get().await, Err(not_a_long.clone()));
    assert_eq!(value.increment().await, Err(not_a_long));
    assert_eq!(session.get_data("/count").await.expect("node").data, vec![0, 0, 0, 7], "untouched");

    let bad = DistributedAtomicLong::new(session.clone(), AtomicLongConfig::new("no-slash"));
    assert!(matches!(bad.increment().await, Err(AtomicError::ZooKeeper(Error::InvalidPath { .. }))));

    let big = DistributedAtomicLong::new(session.clone(), AtomicLongConfig::new("/big"));
    big.force_set(i64::MAX).await.expect("force_set");
    assert!(matches!(big.increment().await, Err(AtomicError::Overflow { value: i64::MAX, by: 1, .. })));
    assert!(matches!(big.subtract(i64::MIN).await, Err(AtomicError::Overflow { by: i64::MIN, .. })));
    assert_eq!(big.get().await.expect("get").post, i64::MAX, "nothing written");
}
