//! What an error says about its request, against a real ZooKeeper: never sent, refused, or of
//! unknown outcome; and a guarded write interrupted by its session's expiry.
#![cfg(feature = "testkit")]

use crate::common;

use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::recipe::FenceError;
use actix_zookeeper::testkit::{ClientLinks, Direction, TestZooKeeper, expire_session, unique_root};
use common::*;

const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

fn config_at(connect: &str, root: &str) -> SessionConfig {
    SessionConfig::new(connect).with_chroot(root).with_session_timeout(SESSION_TIMEOUT)
}

fn set(path: &str, data: &str) -> Vec<Op> {
    vec![Op::SetData { path: path.into(), data: data.as_bytes().to_vec(), version: None }]
}

/// A holder on a session whose link runs through a fault proxy, and an observer on a direct
/// link, sharing a root with `/data` = "initial".
async fn holder_and_observer(
    zk: &TestZooKeeper,
    links: &ClientLinks,
    test: &str,
) -> (SessionHandle, SessionHandle, Addr<LockActor>, LockGrant) {
    let root = unique_root(test);
    let holder = connected(config_at(&links.connect_string(), &root)).await.0;
    let observer = connected(config_at(&zk.connect_string(), &root)).await.0;
    observer.create("/data", "initial", CreateMode::Persistent).await.expect("/data");
    let lock = LockActor::new(holder.clone(), LockConfig::new("/l")).start();
    let grant = lock.send(Acquire::default()).await.expect("actor").expect("acquire");
    (holder, observer, lock, grant)
}

/// Regression: a guarded write that fails with `SessionLost` was reported
/// as `Ended` ("nothing was written"). Here it is handed to the client while the link is
/// down and the session then expires; whether the client got it out first is not something the
/// holder can know (zookeeper-client 0.11 does not say), so the answer must be "unknown".
#[actix_rt::test]
async fn a_guarded_write_whose_session_expires_in_flight_has_an_unknown_outcome() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to(zk.connect_string().split(',')).expect("fault proxy");
    let (holder, observer, _lock, grant) = holder_and_observer(&zk, &links, "errors-expire-unsent").await;
    let info = holder.session().await.expect("session").info;

    let events = Recorded::<SessionEvent>::start();
    holder.subscribe(events.recipient.clone());
    links.blackhole();
    events.wait_for(0, Duration::from_secs(20), |e| matches!(e, SessionEvent::Suspended { .. })).await;
    let write = actix_rt::spawn(grant.guarded_write(&holder, set("/data", "by the holder")));
    expire_session(&zk.connect_string(), &info).await.expect("expire the holder's session");
    links.heal();
    let err = bounded("the guarded write's answer", write).await.expect("task").unwrap_err();

    match &err {
        FenceError::OutcomeUnknown { node, source } => {
            assert_eq!(*node, grant.node);
            assert!(matches!(source, Error::SessionLost { .. }), "{source:?}");
            assert!(source.outcome_unknown() && !source.was_not_applied(), "{source:?}");
        }
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
    assert_eq!(observer.get_data("/data").await.expect("/data").data, b"initial", "this one did not apply");
    holder.close().await;
    observer.close().await;
}

/// Regression: the same, but the write reached the server and applied
/// before the expiry; only its reply was held back. "Not applied" would have been a lie.
#[actix_rt::test]
async fn a_guarded_write_that_applied_before_its_session_expired_is_not_reported_as_not_applied() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to(zk.connect_string().split(',')).expect("fault proxy");
    let (holder, observer, _lock, grant) = holder_and_observer(&zk, &links, "errors-expire-applied").await;
    let info = holder.session().await.expect("session").info;

    // Requests reach the server; nothing comes back until long after the session is gone.
    links.proxy(0).set_latency(Direction::Downstream, Duration::from_secs(120));
    let write = actix_rt::spawn(grant.guarded_write(&holder, set("/data", "by the holder")));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while observer.get_data("/data").await.expect("/data").data != b"by the holder" {
        assert!(std::time::Instant::now() < deadline, "the write did not reach the server");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    expire_session(&zk.connect_string(), &info).await.expect("expire the holder's session");
    let err = bounded("the guarded write's answer", write).await.expect("task").unwrap_err();
    links.heal();

    assert!(
        matches!(&err, FenceError::OutcomeUnknown { node, source } if *node == grant.node && source.outcome_unknown()),
        "the write applied, so it must not be reported as not applied: {err:?}"
    );
    holder.close().await;
    observer.close().await;
}

/// A request that waits for a session that never comes up was never sent: `Timeout`, and it is
/// not sent later either, once a session is up.
#[actix_rt::test]
async fn a_request_that_never_got_a_session_was_not_sent() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to(zk.connect_string().split(',')).expect("fault proxy");
    let root = unique_root("errors-not-sent");
    links.blackhole();
    let s = SessionHandle::start(
        config_at(&links.connect_string(), &root).with_request_timeout(Duration::from_millis(500)),
    )
    .expect("config");
    let err = bounded("the create's answer", s.create("/never", "", CreateMode::Persistent)).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(err.not_sent() && err.was_not_applied() && !err.outcome_unknown(), "{err:?}");
    assert!(err.is_transient(), "a session may still come up");

    links.heal();
    let observer = connected(config_at(&zk.connect_string(), &root)).await.0;
    // Give the first session time to come up and send whatever it still had queued.
    let events = Recorded::<SessionEvent>::start();
    s.subscribe(events.recipient.clone());
    events.wait_for(0, Duration::from_secs(20), |e| matches!(e, SessionEvent::Connected { .. })).await;
    s.sync("/").await.expect("sync");
    assert_eq!(observer.exists("/never").await.expect("exists"), None, "a timed-out request is not sent late");
    s.close().await;
    observer.close().await;
}

/// A request in flight when the connection drops has an unknown outcome.
#[actix_rt::test]
async fn a_request_in_flight_when_the_connection_drops_has_an_unknown_outcome() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to(zk.connect_string().split(',')).expect("fault proxy");
    let root = unique_root("errors-connection-loss");
    let s = connected(config_at(&links.connect_string(), &root)).await.0;

    links.blackhole();
    let err = bounded("the create's answer", s.create("/maybe", "", CreateMode::Persistent)).await.unwrap_err();
    links.heal();
    assert!(matches!(err, Error::ConnectionLoss { ref path } if path == "/maybe"), "{err:?}");
    assert!(err.outcome_unknown() && !err.was_not_applied() && !err.not_sent(), "{err:?}");
    assert!(err.is_transient());
    s.close().await;
}
