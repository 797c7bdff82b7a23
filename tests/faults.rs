//! The session under faults: server restart, server-side expiry, an ensemble member killed,
//! and a busy application thread.
#![cfg(feature = "testkit")]

use crate::common;

use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{TestZooKeeper, ZkEnsemble, ZkServer, expire_session};
use common::*;

const WAIT: Duration = Duration::from_secs(20);

#[actix_rt::test]
async fn restart_within_the_session_timeout_keeps_the_session() {
    init_tracing();
    let mut server = ZkServer::start().expect("ZooKeeper");
    let cfg = config(&server.connect_string(), "restart").with_session_timeout(Duration::from_secs(10));
    let (s, events) = connected(cfg).await;
    let before = s.session().await.expect("session");
    let watch = Recorded::<WatchEvent>::start();
    s.add_watch("/r", PersistentWatchMode::Recursive, watch.recipient.clone()).await.expect("watch");
    s.create("/r", "", CreateMode::Persistent).await.expect("/r");
    s.create("/r/eph", "", CreateMode::Ephemeral).await.expect("ephemeral");

    server.stop().expect("stop");
    let (i, _) = events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Suspended { .. })).await;
    server.restart().expect("restart");
    let (_, back) = events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Reconnected { .. })).await;
    assert_eq!(back, SessionEvent::Reconnected { session_id: before.session_id, generation: 1, read_only: false });
    assert!(!events.snapshot().iter().any(|e| matches!(e, SessionEvent::Expired { .. })));

    // Same session: the ephemeral survived and the watch still delivers.
    let eph = s.exists("/r/eph").await.expect("exists").expect("ephemeral survived");
    assert_eq!(eph.ephemeral_owner, before.session_id.0);
    s.create("/r/after", "", CreateMode::Persistent).await.expect("create after restart");
    let (_, e) = watch.wait_for(0, WAIT, |e| e.path == "/r/after").await;
    assert_eq!(e.kind, WatchEventKind::NodeCreated);
    s.close().await;
}

#[actix_rt::test]
async fn server_side_expiry_builds_a_new_session_on_its_own() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("a ZooKeeper server");
    let (s, events) = connected(config(&zk.connect_string(), "expiry")).await;
    let old = s.session().await.expect("session");
    let watch = Recorded::<WatchEvent>::start();
    s.add_watch("/x", PersistentWatchMode::Recursive, watch.recipient.clone()).await.expect("watch");
    s.create("/x", "", CreateMode::Persistent).await.expect("/x");
    s.create("/x/eph", "", CreateMode::Ephemeral).await.expect("ephemeral");
    let pending_one_shot = Recorded::<WatchEvent>::start();
    s.get_data_watched("/x", pending_one_shot.recipient.clone()).await.expect("one-shot watch");

    expire_session(&zk.connect_string(), &old.info).await.expect("server-side expiry");

    let (i, expired) = events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Expired { .. })).await;
    assert_eq!(expired, SessionEvent::Expired { session_id: old.session_id, generation: 1 });
    let (_, connected) = events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Connected { .. })).await;
    let SessionEvent::Connected { session_id, generation } = connected else { unreachable!() };
    assert_eq!(generation, 2);
    assert_ne!(session_id, old.session_id);
    let now = s.session().await.expect("new session");
    assert_eq!((now.session_id, now.generation), (session_id, 2));

    // The server deleted the old session's ephemeral; the recipe-facing one-shot watch heard
    // that its session ended; the persistent watch was re-registered and delivers again.
    assert!(s.exists("/x/eph").await.expect("exists").is_none(), "ephemeral of the expired session is gone");
    pending_one_shot.wait_for(0, WAIT, |e| e.kind == WatchEventKind::SessionEnded || e.path == "/x/eph").await;
    s.create("/x/new", "", CreateMode::Ephemeral).await.expect("create in the new session");
    let (_, e) = watch.wait_for(0, WAIT, |e| e.path == "/x/new").await;
    assert_eq!((e.kind, e.generation), (WatchEventKind::NodeCreated, 2));
    let eph = s.exists("/x/new").await.expect("exists").expect("new ephemeral");
    assert_eq!(eph.ephemeral_owner, session_id.0);
    s.close().await;
}

#[actix_rt::test]
async fn killing_the_connected_ensemble_member_keeps_the_session() {
    init_tracing();
    let mut ensemble = ZkEnsemble::start(3).expect("3-node ensemble");
    let cfg = config(&ensemble.connect_string(), "ensemble").with_session_timeout(Duration::from_secs(10));
    let (s, events) = connected(cfg).await;
    let before = s.session().await.expect("session");
    let watch = Recorded::<WatchEvent>::start();
    s.add_watch("/e", PersistentWatchMode::Node, watch.recipient.clone()).await.expect("watch");
    s.create("/e", "", CreateMode::Ephemeral).await.expect("ephemeral");

    let serving = ensemble.member_serving(before.session_id.0).expect("a member serves the session");
    ensemble.kill_member(serving).expect("kill -9 the member");
    let (i, _) = events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Suspended { .. })).await;
    let (_, back) = events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Reconnected { .. })).await;
    assert_eq!(back, SessionEvent::Reconnected { session_id: before.session_id, generation: 1, read_only: false });
    let now_serving = ensemble.member_serving(before.session_id.0);
    assert!(now_serving.is_some() && now_serving != Some(serving), "moved to another member: {now_serving:?}");

    let eph = s.exists("/e").await.expect("exists").expect("ephemeral survived");
    assert_eq!(eph.ephemeral_owner, before.session_id.0);
    s.set_data("/e", "still here", None).await.expect("write after failover");
    watch.wait_for(0, WAIT, |e| e.kind == WatchEventKind::DataChanged).await;
    ensemble.restart_member(serving).expect("restart the member");
    s.close().await;
}

/// An application actor that blocks its thread (a defect in the application, but a common one).
struct Busy;

impl Actor for Busy {
    type Context = Context<Self>;
}

#[derive(Message)]
#[rtype(result = "()")]
struct BlockFor(Duration);

impl Handler<BlockFor> for Busy {
    type Result = ();
    fn handle(&mut self, msg: BlockFor, _: &mut Context<Self>) {
        std::thread::sleep(msg.0);
    }
}

#[actix_rt::test]
async fn a_busy_application_thread_does_not_cost_the_session() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("a ZooKeeper server");
    let cfg = config(&zk.connect_string(), "busy").with_session_timeout(Duration::from_millis(1500));
    let (s, events) = connected(cfg).await;
    let before = s.session().await.expect("session");
    s.create("/busy", "", CreateMode::Ephemeral).await.expect("ephemeral");

    // Blocks the thread this test and the application actor share for over twice the timeout.
    let busy = Busy.start();
    busy.send(BlockFor(before.timeout * 3)).await.expect("busy actor ran");

    let after = s.session().await.expect("session");
    assert_eq!((after.session_id, after.generation), (before.session_id, 1));
    assert!(
        !events.snapshot().iter().any(|e| matches!(e, SessionEvent::Expired { .. } | SessionEvent::Suspended { .. })),
        "{:?}",
        events.snapshot()
    );
    assert!(s.exists("/busy").await.expect("exists").is_some(), "the ephemeral is still there");
    s.close().await;
}

#[actix_rt::test]
async fn the_rebuild_policy_gives_up_after_its_attempts() {
    init_tracing();
    // Nothing listens on port 1: every attempt fails, after at most the session timeout.
    let cfg = SessionConfig::new("127.0.0.1:1")
        .with_session_timeout(Duration::from_millis(500))
        .with_request_timeout(Duration::from_secs(30))
        .with_rebuild_policy(
            RebuildPolicy::attempts(2).with_backoff(Duration::from_millis(50), Duration::from_millis(50)),
        );
    let s = SessionHandle::start(cfg).expect("config");
    let events = Recorded::<SessionEvent>::start();
    s.subscribe(events.recipient.clone());
    let waiting = s.get_data("/anything");
    events.wait_for(0, WAIT, |e| *e == SessionEvent::Closed).await;
    assert_eq!(bounded("queued request", waiting).await.unwrap_err(), Error::Closed);
    assert!(!events.snapshot().iter().any(|e| matches!(e, SessionEvent::Connected { .. })));
    assert_eq!(s.exists("/x").await.unwrap_err(), Error::Closed);
}

#[actix_rt::test]
async fn a_never_rebuild_policy_ends_the_actor_when_the_session_expires() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let cfg = config(&zk.connect_string(), "never-rebuild").with_rebuild_policy(RebuildPolicy::never());
    let (s, events) = connected(cfg).await;
    let info = s.session().await.expect("session").info;
    expire_session(&zk.connect_string(), &info).await.expect("expire");
    let (expired, _) = events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Expired { .. })).await;
    events.wait_for(expired, WAIT, |e| *e == SessionEvent::Closed).await;
    assert!(
        !events.snapshot().iter().any(|e| matches!(e, SessionEvent::Connected { generation: 2, .. })),
        "no second session"
    );
    assert_eq!(s.exists("/x").await.unwrap_err(), Error::Closed);
}
