//! Exclusive, read/write locks and the semaphore against a real ZooKeeper: safety under
//! contention, fencing, cancellation, and faults.
#![cfg(feature = "testkit")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::lock::*;
use actix_zookeeper::path;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{TestZooKeeper, ZkServer, expire_session, unique_root};
use common::*;

const WAIT: Duration = Duration::from_secs(20);

async fn session_at(connect: &str, root: &str) -> SessionHandle {
    let cfg = SessionConfig::new(connect).with_chroot(root).with_session_timeout(Duration::from_secs(4));
    connected(cfg).await.0
}

/// Children of `dir`, treating a missing directory (containers go when empty) as empty.
async fn nodes(session: &SessionHandle, dir: &str) -> Vec<String> {
    match session.children(dir).await {
        Ok(children) => children.names,
        Err(Error::NoNode { .. }) => Vec::new(),
        Err(err) => panic!("listing {dir}: {err}"),
    }
}

#[actix_rt::test]
async fn mutual_exclusion_fifo_and_increasing_tokens_under_contention() {
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("mutex");
    let mut sessions = Vec::new();
    for _ in 0..4 {
        sessions.push(session_at(&zk.connect_string(), &root).await);
    }
    let holders = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(AtomicUsize::new(0));
    let grants = Arc::new(std::sync::Mutex::new(Vec::<LockGrant>::new()));
    const ROUNDS_PER_ACTOR: usize = 38; // 8 actors: 304 acquisitions in all

    let mut workers = Vec::new();
    for i in 0..8 {
        let lock =
            LockActor::new(sessions[i % 4].clone(), LockConfig::new("/lock").with_participant_id(format!("w{i}")))
                .start();
        let (holders, violations, grants) = (holders.clone(), violations.clone(), grants.clone());
        workers.push(actix_rt::spawn(async move {
            for _ in 0..ROUNDS_PER_ACTOR {
                let grant = lock.send(Acquire::default()).await.expect("lock actor").expect("acquire");
                if holders.fetch_add(1, Ordering::SeqCst) != 0 {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                grants.lock().expect("grants").push(grant);
                // Hold across a few scheduler turns so that overlapping holders would show.
                for _ in 0..3 {
                    actix_rt::task::yield_now().await;
                }
                holders.fetch_sub(1, Ordering::SeqCst);
                lock.send(Release).await.expect("lock actor").expect("release");
            }
        }));
    }
    for worker in workers {
        bounded("worker", worker).await.expect("worker finished");
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0, "two holders at once");
    let grants = grants.lock().expect("grants").clone();
    assert_eq!(grants.len(), 8 * ROUNDS_PER_ACTOR);
    for pair in grants.windows(2) {
        assert!(pair[0].token < pair[1].token, "fencing tokens must increase: {pair:?}");
        let (a, b) = (path::sequence(&pair[0].node), path::sequence(&pair[1].node));
        assert!(a < b, "grants follow the queue order (FIFO): {pair:?}");
        assert!(pair[1].node.starts_with("/lock/_c_") && pair[1].node.contains("-lock-"), "Curator layout");
    }
    assert!(nodes(&sessions[0], "/lock").await.is_empty(), "no orphan node");
    for s in sessions {
        s.close().await;
    }
}

#[actix_rt::test]
async fn timeout_cancel_and_stop_leave_no_node_behind() {
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cancel");
    let s = session_at(&zk.connect_string(), &root).await;
    let holder = LockActor::new(s.clone(), LockConfig::new("/l")).start();
    let waiter = LockActor::new(s.clone(), LockConfig::new("/l")).start();
    let grant = holder.send(Acquire::default()).await.expect("actor").expect("acquire");

    // A timed-out acquire: an error, and its node is gone.
    let err = waiter.send(Acquire { timeout: Some(Duration::from_millis(300)) }).await.expect("actor").unwrap_err();
    assert!(matches!(err, LockError::Timeout { .. }), "{err:?}");
    wait_until_nodes(&s, "/l", 1).await;

    // TryAcquire while held: None, and nothing left behind.
    assert_eq!(waiter.send(TryAcquire).await.expect("actor").expect("try"), None);
    wait_until_nodes(&s, "/l", 1).await;

    // A waiting acquire cancelled by Release.
    let pending = waiter.send(Acquire::default());
    wait_until_nodes(&s, "/l", 2).await;
    waiter.send(Release).await.expect("actor").expect("release while waiting");
    assert!(matches!(pending.await.expect("actor"), Err(LockError::Cancelled { .. })));
    wait_until_nodes(&s, "/l", 1).await;

    // A waiting actor that is stopped.
    let doomed = LockActor::new(s.clone(), LockConfig::new("/l")).start();
    let _pending = doomed.send(Acquire::default());
    wait_until_nodes(&s, "/l", 2).await;
    drop(_pending);
    drop(doomed); // last address gone: the actor stops, its contender withdraws
    wait_until_nodes(&s, "/l", 1).await;

    // Re-entrant acquire returns the same grant; release; try succeeds now.
    assert_eq!(holder.send(Acquire::default()).await.expect("actor").expect("again"), grant);
    holder.send(Release).await.expect("actor").expect("release");
    let g = waiter.send(TryAcquire).await.expect("actor").expect("try").expect("free now");
    assert!(g.token > grant.token);
    waiter.send(Release).await.expect("actor").expect("release");
    assert!(matches!(waiter.send(Release).await.expect("actor"), Err(LockError::NotHeld { .. })));
    wait_until_nodes(&s, "/l", 0).await;
    s.close().await;
}

async fn wait_until_nodes(s: &SessionHandle, dir: &str, n: usize) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let found = nodes(s, dir).await;
        if found.len() == n {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "expected {n} nodes in {dir}, found {found:?}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}
