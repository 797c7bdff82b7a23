//! The user's retry policy is what ends a recipe's retries: with an attempt limit of `n`, a
//! recipe whose request keeps failing for a passing reason gives up after exactly `n` attempts,
//! with its typed error; without one it keeps trying.
//!
//! The failure is real: a request larger than the server's `jute.maxbuffer` (sent because the
//! session's `max_request_size` is raised above it) makes the server close the connection, so
//! the client sees `ConnectionLoss`, a passing error, and the session reconnects. Each attempt
//! is therefore one oversized request the server refused, and the server logs each refusal
//! (`Len error`): the attempts are counted there. (Counting the session's `Suspended` events was
//! flaky: under load two refusals can fall in one connection drop as the session sees it.)
#![cfg(feature = "testkit")]

use crate::common;

use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::group::{GroupConfig, GroupError, GroupEvent, GroupMember, Subscribe};
use actix_zookeeper::lock::{LockConfig, LockError, LockHandle};
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::{Queue, QueueError};
use actix_zookeeper::retry::RetryPolicy;
use actix_zookeeper::testkit::{ZkServer, unique_root};
use common::*;

/// More than the server's default `jute.maxbuffer` (0xfffff bytes).
const OVERSIZED: usize = 0x12_0000;

/// Three seconds between attempts, without jitter: long enough for the session to have
/// reconnected before the next attempt, so that its reads (a listing, a recovery read) succeed
/// and only the oversized request fails. An attempt made before the reconnect fails too (the
/// recipe is right to count it), but no `Suspended` counts it: with 20 ms a loaded machine saw
/// that, and with one second a CI-like load (three tests at once on two cores) once did.
fn policy(attempts: Option<u32>) -> RetryPolicy {
    let policy = RetryPolicy::new(Duration::from_secs(3), Duration::from_secs(3)).with_jitter(0.0);
    match attempts {
        Some(n) => policy.with_max_attempts(n),
        None => policy,
    }
}

/// A session that sends requests of any size, with `retry` as its recipes' policy.
async fn session(server: &ZkServer, test: &str, retry: RetryPolicy) -> SessionHandle {
    connected(
        SessionConfig::new(server.connect_string())
            .with_chroot(unique_root(test))
            .with_max_request_size(4 << 20)
            .with_retry(retry),
    )
    .await
    .0
}

/// The oversized requests the server has refused so far: one `Len error` in its log each.
fn refusals(server: &ZkServer) -> usize {
    let log = std::fs::read_to_string(server.dir().join("zookeeper.log")).expect("the server's log");
    log.matches("Len error").count()
}

/// Exactly `attempts` attempts were made: the last refusal may reach the log a moment after the
/// recipe's error reached the test, so wait for it (bounded); then, after giving up, nothing
/// tries again: the count stays where it is.
async fn exactly_attempts(server: &ZkServer, attempts: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while refusals(server) < attempts && std::time::Instant::now() < deadline {
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(refusals(server), attempts, "attempts: {}", server.log_tail());
    // Longer than the policy's delay: a retry after giving up would have come by now.
    actix_rt::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(refusals(server), attempts, "an attempt after giving up: {}", server.log_tail());
}

fn is_connection_loss(error: &actix_zookeeper::Error) -> bool {
    matches!(error, actix_zookeeper::Error::ConnectionLoss { .. })
}

#[actix_rt::test]
async fn a_lock_with_a_limit_of_two_gives_up_after_exactly_two_attempts_with_its_error() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    // The session's own policy has no limit: the lock's config is what limits.
    let session = session(&server, "retry-lock", policy(None)).await;
    let config = LockConfig::new("/locks/l").with_participant_id("x".repeat(OVERSIZED)).with_retry(policy(Some(2)));
    let lock = LockHandle::start(session.clone(), config).expect("lock");
    let outcome = bounded("an acquire that gives up", lock.acquire(None)).await;
    assert!(
        matches!(&outcome, Err(LockError::ZooKeeper(error)) if is_connection_loss(error)),
        "expected the lock's typed error, got {outcome:?}"
    );
    exactly_attempts(&server, 2).await;
    session.close().await;
}

#[actix_rt::test]
async fn without_a_limit_the_same_lock_keeps_trying() {
    // The control: the same failure with no limit does not end the acquire, so the two tests
    // above and below see the limit at work, not some other end.
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let session = session(&server, "retry-control", policy(None)).await;
    let config = LockConfig::new("/locks/l").with_participant_id("x".repeat(OVERSIZED));
    let lock = LockHandle::start(session.clone(), config).expect("lock");
    let acquire = lock.acquire(None);
    futures::pin_mut!(acquire);
    // One attempt past the limit of two the tests above and below set.
    let tried = async {
        while refusals(&server) < 3 {
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
    };
    futures::pin_mut!(tried);
    match bounded("three attempts", futures::future::select(acquire, tried)).await {
        futures::future::Either::Left((outcome, _)) => panic!("the acquire ended without a limit: {outcome:?}"),
        futures::future::Either::Right(((), _)) => {}
    }
    session.close().await;
}

#[actix_rt::test]
async fn a_group_member_with_a_limit_of_two_fails_its_join_after_exactly_two_attempts() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let session = session(&server, "retry-group", policy(None)).await;
    let joined = Recorded::<GroupEvent>::start();
    let config = GroupConfig::new("/group", "m").with_data(vec![7u8; OVERSIZED]).with_retry(policy(Some(2)));
    let member = GroupMember::new(session.clone(), config).expect("valid config").start();
    member.do_send(Subscribe { recipient: joined.recipient.clone() });
    joined
        .wait_for(0, Duration::from_secs(20), |e| {
            matches!(e, GroupEvent::JoinFailed { error: GroupError::ZooKeeper(error) } if is_connection_loss(error))
        })
        .await;
    exactly_attempts(&server, 2).await;
    assert!(!joined.snapshot().iter().any(|e| matches!(e, GroupEvent::Joined { .. })), "{:?}", joined.snapshot());
    session.close().await;
}

#[actix_rt::test]
async fn the_sessions_policy_limits_a_queue_put_to_exactly_two_attempts() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    // No recipe config here: the session's policy is every recipe's default.
    let session = session(&server, "retry-queue", policy(Some(2))).await;
    let queue = Queue::new(session.clone(), "/q");
    let outcome = bounded("a put that gives up", queue.put_with_id("big", vec![1u8; OVERSIZED])).await;
    assert!(
        matches!(&outcome, Err(QueueError::ZooKeeper(error)) if is_connection_loss(error)),
        "expected the queue's typed error, got {outcome:?}"
    );
    exactly_attempts(&server, 2).await;
    // Nothing was queued: each attempt's create never reached the tree.
    assert_eq!(queue.len().await.expect("length"), 0);
    session.close().await;
}
