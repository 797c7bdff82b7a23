//! The multi-lock against a real ZooKeeper: no deadlock between multi-locks taking the same
//! locks in opposite orders, exclusion, all-or-nothing under timeouts, failures, drops and expiry,
//! and one guarded write over every grant.
#![cfg(feature = "testkit")]

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_zookeeper::lock::*;
use actix_zookeeper::path;
use actix_zookeeper::prelude::*;
use actix_zookeeper::recipe::FenceError;
use actix_zookeeper::testkit::{ClientLinks, HoldLog, TestZooKeeper, expire_session, unique_root};
use actix_zookeeper::{Acl, Permission};
use common::*;

const WAIT: Duration = Duration::from_secs(20);

/// How long the exclusion test's holders hold.
const HOLD: Duration = Duration::from_millis(20);

/// Children of `dir` (none when it does not exist).
async fn nodes(session: &SessionHandle, dir: &str) -> Vec<String> {
    session.children(dir).await.map(|c| c.names).unwrap_or_default()
}

/// Row "multi-locks over the same locks": two multi-locks given /a and /b in opposite orders and a
/// plain lock on /b, each on its own session, take turns 15 times each. Nobody deadlocks (the
/// rounds end), and no two holds of /a, or of /b, overlap (judged on one clock after the run).
#[actix_rt::test]
async fn multi_locks_in_opposite_orders_never_deadlock_and_exclude_each_other() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("multi-hammer");
    let (holds_a, holds_b) = (Arc::new(HoldLog::new()), Arc::new(HoldLog::new()));
    let mut tasks = Vec::new();
    for order in [["/a", "/b"], ["/b", "/a"]] {
        let session = session_at(&zk.connect_string(), &root).await;
        let multi =
            MultiLock::start(session.clone(), order.iter().map(|dir| LockConfig::new(*dir)).collect()).expect("multi");
        let (holds_a, holds_b) = (holds_a.clone(), holds_b.clone());
        tasks.push(actix_rt::spawn(async move {
            for _ in 0..15 {
                let grant = multi.acquire(Some(WAIT)).await.expect("both locks");
                let granted = Instant::now();
                // Long enough that a second holder, granted after notifications and actor hops,
                // lands while this hold is still counted (a `yield_now` could not catch one).
                actix_rt::time::sleep(HOLD).await;
                let released = Instant::now();
                let [a, b] = [&grant.grants[0], &grant.grants[1]];
                assert!(a.node.starts_with("/a/") && b.node.starts_with("/b/"), "taken by directory: {grant:?}");
                holds_a.record(a.token.0, granted, released);
                holds_b.record(b.token.0, granted, released);
                multi.release().await.expect("release both");
            }
        }));
    }
    let session = session_at(&zk.connect_string(), &root).await;
    let single = LockHandle::start(session, LockConfig::new("/b")).expect("lock");
    let holds = holds_b.clone();
    tasks.push(actix_rt::spawn(async move {
        for _ in 0..15 {
            let grant = single.acquire(Some(WAIT)).await.expect("/b");
            let granted = Instant::now();
            actix_rt::time::sleep(HOLD).await;
            holds.record(grant.token.0, granted, Instant::now());
            single.release().await.expect("release /b");
        }
    }));
    for task in tasks {
        bounded("the rounds (a deadlock never ends)", task).await.expect("task");
    }
    assert_eq!((holds_a.len(), holds_b.len()), (30, 45));
    assert_eq!((holds_a.violations(), holds_b.violations()), (0, 0), "overlapping holds");
}

/// Rows "a lock of the multi-lock cannot be taken" (timeout, failure): what was taken is
/// released before the error is answered; the timeout names the lock waited for.
#[actix_rt::test]
async fn a_multi_lock_that_cannot_take_every_lock_gives_back_what_it_took() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("multi-partial");
    let (s, other) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let blocker = LockHandle::start(other.clone(), LockConfig::new("/b")).expect("lock");
    blocker.acquire(None).await.expect("someone holds /b");
    let multi = MultiLock::start(s.clone(), vec![LockConfig::new("/b"), LockConfig::new("/a")]).expect("multi");
    let timeout = Duration::from_millis(500);
    let outcome = multi.acquire(Some(timeout)).await;
    assert_eq!(outcome, Err(LockError::Timeout { dir: "/b".into(), after: timeout }));
    assert_eq!(nodes(&other, "/a").await, Vec::<String>::new(), "/a given back before the answer");
    assert_eq!(nodes(&other, "/b").await.len(), 1, "only the blocker's node in /b");
    blocker.release().await.expect("the blocker lets go");
    let grant = multi.acquire(Some(WAIT)).await.expect("both now");
    assert_eq!(grant.grants.len(), 2);
    multi.release().await.expect("release");

    // A lock that fails (no right to create in its directory) after one was taken.
    let read_only = vec![Acl::new_const(Permission::READ, "world", "anyone")];
    let closed = actix_zookeeper::session::requests::Create::new("/closed", "", CreateMode::Persistent);
    other.request(closed.with_acl(read_only)).await.expect("a directory nobody may create in");
    let failing =
        MultiLock::start(s.clone(), vec![LockConfig::new("/a"), LockConfig::new("/closed/lock")]).expect("multi");
    let outcome = failing.acquire(Some(WAIT)).await;
    assert!(matches!(outcome, Err(LockError::ZooKeeper(Error::NoAuth { .. }))), "{outcome:?}");
    assert_eq!(nodes(&other, "/a").await, Vec::<String>::new(), "/a given back");
}

/// Row "guarded write": one transaction checks every grant; with one of the nodes gone it is
/// refused (`Ended` names that node) and nothing is written.
#[actix_rt::test]
async fn the_multi_grant_guards_a_write_with_every_lock() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("multi-guard");
    let (s, other) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let multi = MultiLock::start(s.clone(), vec![LockConfig::new("/a"), LockConfig::new("/b")]).expect("multi");
    let grant = multi.acquire(Some(WAIT)).await.expect("both");
    let create = |path: &str| vec![Op::Create { path: path.into(), data: vec![], mode: CreateMode::Persistent }];
    grant.guarded_write(&s, create("/while-held")).await.expect("applies while both are held");
    let b_node = grant.grants[1].node.clone();
    other.delete(&b_node, None).await.expect("someone deletes /b's grant node");
    let refused = grant.guarded_write(&s, create("/after")).await;
    assert_eq!(refused, Err(FenceError::Ended { node: b_node }));
    assert_eq!(s.exists("/after").await.expect("exists"), None, "nothing written");
    assert!(s.exists("/while-held").await.expect("exists").is_some());
    multi.stop().await;
}

/// Row "the multi-lock holder's session expires": every lock is `Lost`, and the guarded write is
/// refused.
#[actix_rt::test]
async fn a_multi_lock_holder_whose_session_expires_loses_every_lock() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("multi-expiry");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &root).await;
    let multi = MultiLock::start(s.clone(), vec![LockConfig::new("/a"), LockConfig::new("/b")]).expect("multi");
    let events = Recorded::<LockEvent>::start();
    multi.subscribe(events.recipient.clone());
    let grant = multi.acquire(Some(WAIT)).await.expect("both");
    let info = s.session().await.expect("session").info;
    links.blackhole();
    expire_session(&zk.connect_string(), &info).await.expect("expired");
    links.heal();
    let lost = |e: &LockEvent| matches!(e, LockEvent::Lost { reason: LockLostReason::SessionExpired, .. });
    let (i, _) = events.wait_for(0, WAIT, lost).await;
    events.wait_for(i + 1, WAIT, lost).await;
    let refused = grant.guarded_write(&s, vec![]).await;
    assert!(matches!(refused, Err(FenceError::Ended { .. })), "{refused:?}");
    multi.stop().await;
}

/// Rows "`acquire` dropped", "stopped", "session closed": a multi-acquire dropped while it waits
/// for its second lock gives back the first and leaves the line; a stopped multi-lock leaves no
/// node; on a closed session `acquire` fails; bad configs are typed errors.
#[actix_rt::test]
async fn dropped_stopped_closed_and_bad_multi_locks_leave_nothing_behind() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("multi-dropped");
    let (s, other) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let blocker = LockHandle::start(other.clone(), LockConfig::new("/b")).expect("lock");
    blocker.acquire(None).await.expect("someone holds /b");
    let multi = MultiLock::start(s.clone(), vec![LockConfig::new("/a"), LockConfig::new("/b")]).expect("multi");
    let acquiring = actix_rt::spawn({
        let multi = multi.clone();
        async move { multi.acquire(None).await }
    });
    wait_until_async("holding /a, in line for /b", || async {
        nodes(&other, "/a").await.len() == 1 && nodes(&other, "/b").await.len() == 2
    })
    .await;
    acquiring.abort();
    wait_until_async("/a given back and /b's line left", || async {
        nodes(&other, "/a").await.is_empty() && nodes(&other, "/b").await.len() == 1
    })
    .await;
    blocker.release().await.expect("the blocker lets go");

    multi.acquire(Some(WAIT)).await.expect("both");
    multi.stop().await;
    assert!(nodes(&other, "/a").await.is_empty() && nodes(&other, "/b").await.is_empty(), "stopped: nothing held");

    let closed = MultiLock::start(s.clone(), vec![LockConfig::new("/a"), LockConfig::new("/b")]).expect("multi");
    s.close().await;
    let outcome = closed.acquire(Some(WAIT)).await;
    assert!(outcome.is_err(), "{outcome:?}");
    assert!(nodes(&other, "/a").await.is_empty(), "nothing created on a closed session");

    let invalid = |outcome: Result<MultiLock, LockError>| matches!(outcome, Err(LockError::InvalidConfig { .. }));
    assert!(invalid(MultiLock::start(other.clone(), vec![])));
    let twice = vec![LockConfig::new("/a"), LockConfig::new("/a").with_kind(LockKind::Read)];
    assert!(invalid(MultiLock::start(other.clone(), twice)));
}

/// Row "a re-entrant `acquire` fails or is dropped": the locks held before it began stay held.
/// The multi-lock holds /a and /b; /b's node is deleted by someone else, who then holds /b. A
/// second `acquire` finds /a held (same grant) and waits for /b; dropped, it must leave /a with
/// its holder (it released /a when it gave back everything it had "taken").
#[actix_rt::test]
async fn a_dropped_reentrant_multi_acquire_keeps_the_locks_held_before() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("multi-reentrant");
    let (s, other) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let multi = MultiLock::start(s.clone(), vec![LockConfig::new("/a"), LockConfig::new("/b")]).expect("multi");
    let events = Recorded::<LockEvent>::start();
    multi.subscribe(events.recipient.clone());
    let grant = multi.acquire(Some(WAIT)).await.expect("both");
    let (a_node, b_node) = (grant.grants[0].node.clone(), grant.grants[1].node.clone());
    other.delete(&b_node, None).await.expect("someone deletes /b's grant node");
    events.wait_for(0, WAIT, |e| matches!(e, LockEvent::Lost { .. })).await;
    let blocker = LockHandle::start(other.clone(), LockConfig::new("/b")).expect("lock");
    blocker.acquire(Some(WAIT)).await.expect("someone else holds /b now");
    let again = actix_rt::spawn({
        let multi = multi.clone();
        async move { multi.acquire(None).await }
    });
    wait_until_async("in line for /b again", || async { nodes(&other, "/b").await.len() == 2 }).await;
    again.abort();
    wait_until_async("the line for /b left", || async { nodes(&other, "/b").await.len() == 1 }).await;
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(nodes(&other, "/a").await, vec![path::name(&a_node).to_owned()], "/a still held, by the same node");
    grant.grants[0].guarded_write(&s, vec![]).await.expect("still the holder of /a");
    blocker.release().await.expect("blocker releases");
    multi.stop().await;
}
