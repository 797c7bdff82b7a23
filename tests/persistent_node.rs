//! The persistent node against a real ZooKeeper: created again after deletion, expiry and a
//! cut-off, existing nodes taken over or waited for, protected sequential names kept, and what a
//! bad path, a dropped wait, a stop and a closed session leave.
#![cfg(feature = "testkit")]

use crate::common;

use std::time::{Duration, Instant};

use actix_zookeeper::persistent::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{ClientLinks, TestZooKeeper, expire_session, unique_root};
use actix_zookeeper::{Acl, Permission};
use common::*;

const WAIT: Duration = Duration::from_secs(20);

fn start(
    session: &SessionHandle,
    config: PersistentNodeConfig,
) -> (PersistentNodeHandle, Recorded<PersistentNodeEvent>) {
    let node = PersistentNodeHandle::start(session.clone(), config).expect("a valid node");
    let events = Recorded::<PersistentNodeEvent>::start();
    node.subscribe(events.recipient.clone());
    (node, events)
}

fn created(e: &PersistentNodeEvent) -> bool {
    matches!(e, PersistentNodeEvent::Created { .. })
}

/// Waits until `path` exists on `observer` with `data`, owned by `owner` (0: persistent).
async fn wait_for_node(observer: &SessionHandle, path: &str, data: &[u8], owner: i64) {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(node) = observer.get_data(path).await {
            if node.data == data && node.stat.ephemeral_owner == owner {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{path} never held {data:?} owned by {owner:#x}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Rows "someone deletes the node", "its session expires": an ephemeral node is created again
/// after each, under the same name, with its data (updated with `set_data` in between), owned by
/// the session of the moment; `stop()` deletes it.
#[actix_rt::test]
async fn an_ephemeral_node_is_created_again_after_deletion_and_expiry() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("persistent-ephemeral");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &root).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    let (node, events) = start(&s, PersistentNodeConfig::new("/svc/host-a", CreateMode::Ephemeral).with_data("v1"));
    let path = node.wait_for_initial_create(Some(WAIT)).await.expect("created");
    assert_eq!(path, "/svc/host-a");
    let owner = s.session().await.expect("session").session_id.0;
    wait_for_node(&observer, &path, b"v1", owner).await;
    node.set_data("v2").await.expect("set_data");
    wait_for_node(&observer, &path, b"v2", owner).await;

    observer.delete(&path, None).await.expect("someone deletes it");
    let (i, deleted) = events.wait_for(1, WAIT, |e| matches!(e, PersistentNodeEvent::Deleted { .. })).await;
    assert_eq!(deleted, PersistentNodeEvent::Deleted { path: path.clone() });
    let (j, _) = events.wait_for(i + 1, WAIT, created).await;
    wait_for_node(&observer, &path, b"v2", owner).await;

    let info = s.session().await.expect("session").info;
    links.blackhole();
    expire_session(&zk.connect_string(), &info).await.expect("expired");
    links.heal();
    let deadline = Instant::now() + WAIT;
    let new_owner = loop {
        match s.session().await {
            Some(now) if now.generation == 2 => break now.session_id.0,
            _ => assert!(Instant::now() < deadline, "no new session"),
        }
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    };
    wait_for_node(&observer, &path, b"v2", new_owner).await;
    // The actor hears its create's reply a moment after the observer can see the node.
    events.wait_for(j + 1, WAIT, created).await;
    assert_eq!(node.actual_path().await, Ok(Some(path.clone())));

    node.stop().await;
    assert_eq!(observer.exists(&path).await.expect("exists"), None, "stop deletes it");
}

/// Row "cut off within the session timeout": the node is deleted while its session is cut off;
/// once back, the watch the client sets again fires and the node is created again, once.
#[actix_rt::test]
async fn a_node_deleted_while_cut_off_is_created_again_once_back() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("persistent-cut-off");
    let Proxied { proxy, session: s, observer } = proxied(&zk.connect_string(), &root, Duration::from_secs(10)).await;
    let (node, events) = start(&s, PersistentNodeConfig::new("/marker", CreateMode::Persistent).with_data("m"));
    node.wait_for_initial_create(Some(WAIT)).await.expect("created");
    proxy.blackhole();
    observer.delete("/marker", None).await.expect("deleted while cut off");
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    proxy.reset();
    proxy.heal();
    let (i, _) = events.wait_for(1, WAIT, created).await;
    wait_for_node(&observer, "/marker", b"m", 0).await;
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(events.snapshot().iter().skip(i + 1).filter(|e| created(e)).count(), 0, "created again once");
    assert_eq!(s.session().await.expect("session").generation, 1, "the same session");
    node.stop().await;
}

/// Rows "a persistent node is already there", "another live session's ephemeral is at the
/// path": the first is taken over with our data; the second is waited for (`Blocked`), and ours
/// is created once it goes.
#[actix_rt::test]
async fn an_existing_node_is_taken_over_and_another_sessions_ephemeral_waited_for() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("persistent-existing");
    let (s, other) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    other.create("/kept", "theirs", CreateMode::Persistent).await.expect("a node already there");
    let (kept, _) = start(&s, PersistentNodeConfig::new("/kept", CreateMode::Persistent).with_data("ours"));
    kept.wait_for_initial_create(Some(WAIT)).await.expect("taken over");
    wait_for_node(&other, "/kept", b"ours", 0).await;

    other.create("/eph", "theirs", CreateMode::Ephemeral).await.expect("another session's ephemeral");
    let (eph, events) = start(&s, PersistentNodeConfig::new("/eph", CreateMode::Ephemeral).with_data("ours"));
    let (_, blocked) = events.wait_for(0, WAIT, |e| matches!(e, PersistentNodeEvent::Blocked { .. })).await;
    assert_eq!(blocked, PersistentNodeEvent::Blocked { path: "/eph".into() });
    let waited = eph.wait_for_initial_create(Some(Duration::from_millis(300))).await;
    assert_eq!(waited, Err(PersistentNodeError::Timeout { path: "/eph".into(), after: Duration::from_millis(300) }));
    assert_eq!(other.get_data("/eph").await.expect("theirs").data, b"theirs", "not overwritten");
    let their_id = other.session().await.expect("session").session_id.0;
    other.close().await;
    let path = eph.wait_for_initial_create(Some(WAIT)).await.expect("created once theirs went");
    let owner = s.session().await.expect("session").session_id.0;
    assert_ne!(owner, their_id);
    wait_for_node(&s, &path, b"ours", owner).await;
    kept.stop().await;
    eph.stop().await;
}

/// Review of session 18: a node waiting for another session's ephemeral (`Blocked`) spent its
/// one-shot `exists` watch on a change of that node's data and never heard it go.
#[actix_rt::test]
async fn a_blocked_node_still_hears_the_blocker_go_after_its_data_changed() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("persistent-blocked-data");
    let (s, other) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    other.create("/eph", "theirs", CreateMode::Ephemeral).await.expect("another session's ephemeral");
    let (eph, events) = start(&s, PersistentNodeConfig::new("/eph", CreateMode::Ephemeral).with_data("ours"));
    events.wait_for(0, WAIT, |e| matches!(e, PersistentNodeEvent::Blocked { .. })).await;
    other.set_data("/eph", "theirs, changed", None).await.expect("their data changes");
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    other.delete("/eph", None).await.expect("theirs goes");
    let path = eph.wait_for_initial_create(Some(WAIT)).await.expect("created once theirs went");
    wait_for_node(&s, &path, b"ours", s.session().await.expect("session").session_id.0).await;
    eph.stop().await;
    other.close().await;
}

/// Row "a protected sequential node deleted": its name is Curator's protected one with a number;
/// deleted, it is created again under the same full name.
#[actix_rt::test]
async fn a_protected_sequential_node_keeps_its_name() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("persistent-sequential");
    let (s, observer) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let (node, events) =
        start(&s, PersistentNodeConfig::new("/workers/w-", CreateMode::EphemeralSequential).with_data("x"));
    let path = node.wait_for_initial_create(Some(WAIT)).await.expect("created");
    let name = actix_zookeeper::path::name(&path).to_owned();
    assert!(name.starts_with("_c_") && name.contains("-w-"), "{name}");
    assert!(actix_zookeeper::path::sequence(&name).is_some(), "numbered: {name}");
    observer.delete(&path, None).await.expect("deleted by someone");
    let (i, _) = events.wait_for(0, WAIT, |e| matches!(e, PersistentNodeEvent::Deleted { .. })).await;
    let (_, again) = events.wait_for(i + 1, WAIT, created).await;
    assert_eq!(again, PersistentNodeEvent::Created { path: path.clone() }, "the same name, not a new number");
    assert_eq!(observer.children("/workers").await.expect("listing").names, vec![name]);
    node.stop().await;
    assert!(observer.children("/workers").await.map(|c| c.names.is_empty()).unwrap_or(true));
}

/// Rows "bad path, no permission", "future dropped", "actor stopped", "session closed".
#[actix_rt::test]
async fn bad_input_dropped_waits_stops_and_a_closed_session() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("persistent-bad");
    let (s, observer) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let bad = PersistentNodeHandle::start(s.clone(), PersistentNodeConfig::new("no-slash", CreateMode::Persistent));
    assert!(matches!(bad, Err(PersistentNodeError::Failed { source: Error::InvalidPath { .. }, .. })), "{bad:?}");

    let read_only = vec![Acl::new_const(Permission::READ, "world", "anyone")];
    let closed = actix_zookeeper::session::requests::Create::new("/closed", "", CreateMode::Persistent);
    observer.request(closed.with_acl(read_only)).await.expect("a directory nobody may create in");
    let (denied, events) = start(&s, PersistentNodeConfig::new("/closed/node", CreateMode::Persistent));
    let (_, failed) = events.wait_for(0, WAIT, |e| matches!(e, PersistentNodeEvent::Failed { .. })).await;
    assert!(
        matches!(
            &failed,
            PersistentNodeEvent::Failed { error: PersistentNodeError::Failed { source: Error::NoAuth { .. }, .. } }
        ),
        "{failed:?}"
    );
    assert!(matches!(denied.wait_for_initial_create(None).await, Err(PersistentNodeError::Failed { .. })));
    assert_eq!(denied.set_data("x").await, Err(PersistentNodeError::NotCreated { path: "/closed/node".into() }));

    // A dropped wait changes nothing; dropping the last handle deletes the node.
    let (node, _) = start(&s, PersistentNodeConfig::new("/dropped", CreateMode::Persistent));
    drop(tokio::time::timeout(Duration::from_millis(1), node.wait_for_initial_create(None)).await);
    node.wait_for_initial_create(Some(WAIT)).await.expect("created all the same");
    drop(node);
    wait_until_async("the last handle dropped: node deleted", || async {
        observer.exists("/dropped").await.map(|stat| stat.is_none()).unwrap_or(false)
    })
    .await;

    // A closed session: the actor stops, its ephemeral goes with the session.
    let (eph, _) = start(&s, PersistentNodeConfig::new("/eph", CreateMode::Ephemeral));
    eph.wait_for_initial_create(Some(WAIT)).await.expect("created");
    s.close().await;
    wait_until_async("the ephemeral gone with the session", || async {
        observer.exists("/eph").await.map(|stat| stat.is_none()).unwrap_or(false)
    })
    .await;
    wait_until_async("the actor stopped", || async { !eph.addr().connected() }).await;
    assert_eq!(eph.actual_path().await, Err(PersistentNodeError::Stopped { path: "/eph".into() }));
}

/// Rows "stopped while its create is on its way", "data set while its create is on its way":
/// requests reach the server 500 ms late. A `set_data` made meanwhile reaches the node once it
/// exists; a stop made meanwhile waits for the create and deletes what it made (the create used
/// to be dropped with the actor, and its node stayed).
#[actix_rt::test]
async fn a_create_on_its_way_is_neither_left_behind_nor_given_old_data() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("persistent-in-flight");
    let Proxied { proxy, session: s, observer } = proxied(&zk.connect_string(), &root, Duration::from_secs(10)).await;
    proxy.set_latency(actix_zookeeper::testkit::Direction::Upstream, Duration::from_millis(500));
    let (node, _) = start(&s, PersistentNodeConfig::new("/data", CreateMode::Persistent).with_data("old"));
    actix_rt::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(node.set_data("new").await, Err(PersistentNodeError::NotCreated { path: "/data".into() }));
    node.wait_for_initial_create(Some(WAIT)).await.expect("created");
    wait_for_node(&observer, "/data", b"new", 0).await;
    node.stop().await;

    let (stopped, _) = start(&s, PersistentNodeConfig::new("/stopped", CreateMode::Persistent));
    actix_rt::time::sleep(Duration::from_millis(100)).await;
    bounded("the stop", stopped.stop()).await;
    proxy.heal();
    actix_rt::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(observer.exists("/stopped").await.expect("exists"), None, "the create on its way was deleted");
}

/// Row "a container or TTL node after a new session": after an expiry the node is taken over
/// again, not `Blocked`. ZooKeeper marks these nodes inside (containers `i64::MIN`, TTL nodes a top
/// byte of `0xFF` in `ephemeralOwner`), which is no session; 3.8 shows clients 0 (checked here),
/// and the crate ignores the markers for a server that shows them.
#[actix_rt::test]
async fn container_and_ttl_nodes_are_ours_again_after_a_new_session() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("persistent-container");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &root).await;
    let ttl = CreateMode::PersistentWithTtl(Duration::from_secs(60));
    let mut nodes = Vec::new();
    for (path, mode) in [("/container", CreateMode::Container), ("/ttl", ttl)] {
        let (node, events) = start(&s, PersistentNodeConfig::new(path, mode).with_data("d"));
        node.wait_for_initial_create(Some(WAIT)).await.expect("created");
        nodes.push((node, events));
    }
    // What this server shows clients of the markers: nothing.
    let owner = |path: &'static str| {
        let s = s.clone();
        async move { s.exists(path).await.expect("exists").expect("there").ephemeral_owner }
    };
    let (container, ttl) = (owner("/container").await, owner("/ttl").await);
    assert_eq!((container, ttl), (0, 0), "container {container:#x}, ttl {ttl:#x}");
    let info = s.session().await.expect("session").info;
    links.blackhole();
    expire_session(&zk.connect_string(), &info).await.expect("expired");
    links.heal();
    for (node, events) in &nodes {
        let (i, _) = events.wait_for(0, WAIT, created).await;
        let (_, again) = events.wait_for(i + 1, WAIT, created).await;
        assert!(matches!(again, PersistentNodeEvent::Created { .. }), "{again:?}");
        assert!(
            !events.snapshot().iter().any(|e| matches!(e, PersistentNodeEvent::Blocked { .. })),
            "{:?}",
            events.snapshot()
        );
        node.stop().await;
    }
}

/// Regression (issue 39, item 3): dropping the last handle of a `PersistentTtlNode` without
/// `stop()` left its actor running (its touch interval kept it alive): it touched its child
/// forever, the node was never reaped, and the session stayed pinned open. It now stops as
/// every recipe does when its last handle goes, and the node goes after its TTL.
#[actix_rt::test]
async fn a_dropped_ttl_node_stops_touching_and_is_reaped() {
    use actix_zookeeper::testkit::{ServerOptions, ZkServer};
    init_tracing();
    let server =
        ZkServer::start_with(ServerOptions::default().with_container_check_interval(Duration::from_millis(100)))
            .expect("a ZooKeeper server");
    let s = session_at(&server.connect_string(), "/ttl-dropped").await;
    let ttl = Duration::from_millis(600);
    let node = PersistentTtlNode::start(s.clone(), PersistentTtlNodeConfig::new("/node", ttl).with_data("data"))
        .expect("a valid node");
    node.wait_for_initial_create(Some(WAIT)).await.expect("created");
    wait_until_async("the child touched", || {
        let s = s.clone();
        async move { matches!(s.exists("/node/touch").await, Ok(Some(_))) }
    })
    .await;
    let mut events = node.events();
    drop(node);
    bounded("the actor stops (its event stream ends)", async {
        while futures::StreamExt::next(&mut events).await.is_some() {}
    })
    .await;
    wait_until_async("the child, then the node, reaped", || {
        let s = s.clone();
        async move { matches!(s.exists("/node").await, Ok(None)) }
    })
    .await;
    s.close().await;
}

/// Row "a TTL node's owner runs / stops": kept past many TTLs while its child is touched (the
/// control, a TTL node nobody touches, is reaped on the same server), made again after a
/// deletion, and left to its TTL at stop: child then node reaped.
#[actix_rt::test]
async fn a_ttl_node_lives_while_touched_and_goes_after_its_ttl_once_stopped() {
    use actix_zookeeper::testkit::{ServerOptions, ZkServer};
    init_tracing();
    let server =
        ZkServer::start_with(ServerOptions::default().with_container_check_interval(Duration::from_millis(100)))
            .expect("a ZooKeeper server");
    let s = session_at(&server.connect_string(), "/ttl").await;
    // Long enough that rebuilding the expired session below (no touches meanwhile) fits inside
    // one TTL on a loaded machine: at 600 ms the node was once reaped in that gap.
    let ttl = Duration::from_millis(1200);
    s.create("/control", "", CreateMode::PersistentWithTtl(ttl)).await.expect("the control");
    let node = PersistentTtlNode::start(s.clone(), PersistentTtlNodeConfig::new("/kept/node", ttl).with_data("data"))
        .expect("a valid node");
    assert_eq!(node.wait_for_initial_create(Some(WAIT)).await.expect("created"), "/kept/node");
    assert_eq!((node.ttl(), node.child_path()), (ttl, "/kept/node/touch".to_owned()));
    wait_until_async("the control reaped", || {
        let s = s.clone();
        async move { matches!(s.exists("/control").await, Ok(None)) }
    })
    .await;
    // Five TTLs, with the reaper looking every 100 ms: kept all along.
    let until = Instant::now() + ttl * 5;
    let mut touches = std::collections::BTreeSet::new();
    while Instant::now() < until {
        assert!(s.exists("/kept/node").await.expect("exists").is_some(), "a kept TTL node was reaped");
        if let Some(stat) = s.exists("/kept/node/touch").await.expect("exists") {
            touches.insert(stat.mtime);
        }
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(touches.len() >= 4, "the child is touched every half TTL: {touches:?}");
    assert_eq!(s.get_data("/kept/node").await.expect("read").data, b"data");

    let mut events = node.events();
    s.delete_recursive("/kept/node").await.expect("someone deletes it");
    let again = bounded("made again", async {
        loop {
            if let Some(Ok(PersistentNodeEvent::Created { path })) = futures::StreamExt::next(&mut events).await {
                return path;
            }
        }
    })
    .await;
    assert_eq!(again, "/kept/node");

    // Its session expires: a TTL node is no session's, so it stays, and the new session touches.
    let info = s.session().await.expect("session").info;
    expire_session(&server.connect_string(), &info).await.expect("expired");
    let until = Instant::now() + ttl * 4;
    while Instant::now() < until {
        // A read may fail while the session changes; one that answers must find the node.
        assert!(!matches!(s.exists("/kept/node").await, Ok(None)), "reaped");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    wait_until_async("touched on the new session", || {
        let s = s.clone();
        async move { matches!(s.exists("/kept/node/touch").await, Ok(Some(_))) }
    })
    .await;

    node.stop().await;
    assert!(s.exists("/kept/node").await.expect("exists").is_some(), "kept at stop");
    wait_until_async("the child, then the node, reaped", || {
        let s = s.clone();
        async move { matches!(s.exists("/kept/node").await, Ok(None)) }
    })
    .await;

    for bad in [Duration::ZERO, MAX_TTL + Duration::from_millis(1)] {
        let refused = PersistentTtlNode::start(s.clone(), PersistentTtlNodeConfig::new("/bad", bad));
        assert!(
            matches!(refused, Err(PersistentNodeError::Failed { source: Error::BadArguments { .. }, .. })),
            "{bad:?}"
        );
    }
    s.close().await;
}
