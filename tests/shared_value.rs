//! The shared value against a real ZooKeeper: seeded, read, compared-and-set, set, watched
//! across sessions, a cut-off and an expiry, made again after a deletion; a lost write reply;
//! bytes shared with Curator's `SharedCount` (built on Curator's `SharedValue`); bad input, a
//! dropped read, a stop and a closed session. The core under it is the counter's too
//! (`counter.rs` tests it in the count's format).
#![cfg(feature = "testkit")]

use crate::common;

use std::time::Duration;

use actix_zookeeper::prelude::*;
use actix_zookeeper::shared::*;
use actix_zookeeper::testkit::{ClientLinks, Direction, TestZooKeeper, expire_session, unique_root};
use common::curator::{CuratorPeer, off_thread as peer};
use common::*;

const WAIT: Duration = Duration::from_secs(20);

fn start(session: &SessionHandle, path: &str, seed: &str) -> (SharedValueHandle, Recorded<ValueChanged>) {
    let value = SharedValueHandle::start(session.clone(), SharedValueConfig::new(path).with_seed(seed)).expect("value");
    let changes = Recorded::<ValueChanged>::start();
    value.subscribe(changes.recipient.clone());
    (value, changes)
}

fn is(value: &'static str) -> impl Fn(&ValueChanged) -> bool {
    move |c| c.value == value.as_bytes()
}

/// Seeded when missing, read, compared-and-set (a stale expectation refused), set; every change
/// heard by a second session's value, in version order.
#[actix_rt::test]
async fn a_value_is_seeded_compared_and_set_and_heard_elsewhere() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("shared-value");
    let (s1, s2) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let (a, _) = start(&s1, "/config/mode", "normal");
    let first = a.get().await.expect("get");
    assert_eq!((first.value.as_slice(), first.version), (&b"normal"[..], 0));
    let (b, heard) = start(&s2, "/config/mode", "ignored: the node exists");
    heard.wait_for(0, WAIT, is("normal")).await;

    assert!(a.try_set("maintenance", first.clone()).await.expect("cas"));
    assert!(!a.try_set("stale", first.clone()).await.expect("cas"), "a stale expectation is refused");
    let (i, _) = heard.wait_for(0, WAIT, is("maintenance")).await;
    // Its copy is at version 1 now: a guess at that version with another value is refused
    // without a request (Curator compares with its copy the same way).
    assert!(
        !b.try_set("guess", VersionedValue::guess("wrong", 1)).await.expect("cas"),
        "another value at that version"
    );
    let set = b.set("").await.expect("set");
    assert_eq!((set.value.as_slice(), set.version), (&b""[..], 2));
    heard.wait_for(i + 1, WAIT, is("")).await;
    let versions: Vec<i32> = heard.snapshot().iter().map(|c| c.version).collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "in version order: {versions:?}");
    assert_eq!(s1.get_data("/config/mode").await.expect("read").data, b"");
    s1.close().await;
    s2.close().await;
}

/// Rows "node deleted", "cut off", "session expired": made again with the seed (an expectation
/// read from the old node never sets the new one); changes made while cut off and around an
/// expiry are heard after.
#[actix_rt::test]
async fn a_value_is_made_again_after_a_deletion_and_changes_made_while_away_are_heard() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("shared-value-faults");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &root).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    let (value, heard) = start(&s, "/v", "seed");
    let old = value.get().await.expect("get");
    observer.delete("/v", None).await.expect("someone deletes it");
    let (i, again) = heard.wait_for(0, WAIT, |c| c.value == b"seed" && c.czxid != old.czxid).await;
    assert_eq!(again.version, 0);
    assert!(!value.try_set("x", old).await.expect("cas"), "the old node's expectation");

    links.blackhole();
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    observer.set_data("/v", b"while cut off".to_vec(), None).await.expect("write");
    links.heal();
    let (i, _) = heard.wait_for(i + 1, WAIT, is("while cut off")).await;

    let info = s.session().await.expect("session").info;
    links.blackhole();
    expire_session(&zk.connect_string(), &info).await.expect("expired");
    observer.set_data("/v", b"around the expiry".to_vec(), None).await.expect("write");
    links.heal();
    heard.wait_for(i + 1, WAIT, is("around the expiry")).await;
    let now = value.get().await.expect("get on the new session");
    assert_eq!(now.value, b"around the expiry");
    s.close().await;
    observer.close().await;
}

/// Row "connection lost while a write is in flight": `OutcomeUnknown`, not retried.
#[actix_rt::test]
async fn a_write_whose_reply_is_lost_is_an_unknown_outcome() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("shared-value-unknown");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &root).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    let (value, _) = start(&s, "/v", "0");
    let now = value.get().await.expect("get");
    links.proxy(0).set_latency(Direction::Downstream, Duration::from_secs(60));
    let setting = actix_rt::spawn(value.try_set("1", now));
    wait_until_async("the write applied", || {
        let observer = observer.clone();
        async move { observer.get_data("/v").await.is_ok_and(|n| n.data == b"1") }
    })
    .await;
    links.reset();
    links.heal();
    let outcome = bounded("the write", setting).await.expect("task");
    assert!(matches!(&outcome, Err(SharedValueError::OutcomeUnknown { path, .. }) if path == "/v"), "{outcome:?}");
    s.close().await;
    observer.close().await;
}

/// Curator's `SharedCount` is its `SharedValue` with 4 bytes: what Curator writes we read as
/// those bytes, and a compare-and-set of ours against Curator's version is what Curator reads.
#[actix_rt::test]
async fn curator_and_a_shared_value_share_one_node() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("shared-value-curator");
    let s = session_at(&zk.connect_string(), &root).await;
    let connect = format!("{}{root}", zk.connect_string());
    let java = actix_rt::task::spawn_blocking(move || CuratorPeer::start_count(&connect, "/shared", 7))
        .await
        .expect("peer start")
        .expect("Curator peer (apt-get install libcurator-recipes-java)");
    let (value, heard) = start(&s, "/shared", "unused: Curator made it");
    let seen = value.get().await.expect("get");
    assert_eq!((seen.value.as_slice(), seen.version), (&7i32.to_be_bytes()[..], 0));
    let (java, set) = peer(java, |p| p.count_set(42, WAIT)).await;
    set.expect("Curator sets");
    let (_, changed) = heard.wait_for(0, WAIT, |c| c.value == 42i32.to_be_bytes()).await;
    assert!(value.try_set(43i32.to_be_bytes(), changed.clone().into()).await.expect("cas"));
    assert!(!value.try_set(44i32.to_be_bytes(), changed.into()).await.expect("cas"));
    let deadline = std::time::Instant::now() + WAIT;
    let mut java = java;
    loop {
        let (back, seen) = peer(java, |p| p.count_get(WAIT)).await;
        java = back;
        if seen.expect("Curator get") == (43, 2) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "Curator never read our compare-and-set");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    s.close().await;
}

/// Rows "bad input", "a read's future dropped", "actor stopped", "session closed".
#[actix_rt::test]
async fn bad_input_a_dropped_read_a_stop_and_a_closed_session() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("shared-value-bad")).await;
    let bad = SharedValueHandle::start(s.clone(), SharedValueConfig::new("no/slash"));
    assert!(matches!(bad, Err(SharedValueError::ZooKeeper(Error::InvalidPath { .. }))), "refused at start");
    // The actor started directly (no handle) answers its requests with it.
    let bad =
        SharedValueHandle::new(actix::Actor::start(SharedValue::new(s.clone(), SharedValueConfig::new("no/slash"))));
    assert!(matches!(bad.get().await, Err(SharedValueError::ZooKeeper(Error::InvalidPath { .. }))));
    assert!(matches!(bad.set("x").await, Err(SharedValueError::ZooKeeper(Error::InvalidPath { .. }))));

    let (value, _) = start(&s, "/v", "seed");
    for round in 0..10u64 {
        let _ = actix_rt::time::timeout(Duration::from_micros(round * 200), value.get()).await;
    }
    assert_eq!(value.get().await.expect("answered after dropped reads").value, b"seed");
    value.stop().await;
    assert!(matches!(value.get().await, Err(SharedValueError::Stopped)));
    assert_eq!(s.get_data("/v").await.expect("the node stays").data, b"seed");

    let (after, _) = start(&s, "/w", "seed");
    after.get().await.expect("get");
    s.close().await;
    let refused = after.get().await;
    assert!(matches!(refused, Err(SharedValueError::ZooKeeper(Error::Closed))), "a closed session: {refused:?}");
    // A write after the close never left, but the session answers it as it answers one cut off
    // on its way: `Closed`, its outcome said to be unknown.
    let refused = after.set("x").await;
    assert!(matches!(refused, Err(SharedValueError::OutcomeUnknown { source: Error::Closed, .. })), "{refused:?}");
}
