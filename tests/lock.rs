//! Exclusive, read/write locks and the semaphore against a real ZooKeeper: safety under
//! contention, fencing, cancellation, and faults.
#![cfg(feature = "testkit")]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::lock::*;
use actix_zookeeper::path;
use actix_zookeeper::prelude::*;
use actix_zookeeper::recipe::FenceError;
use actix_zookeeper::testkit::{ClientLinks, Direction, HoldLog, TestZooKeeper, ZkServer, expire_session, unique_root};
use common::*;

const WAIT: Duration = Duration::from_secs(20);

/// Children of `dir`, treating a missing directory (containers go when empty) as empty.
async fn nodes(session: &SessionHandle, dir: &str) -> Vec<String> {
    match session.children(dir).await {
        Ok(children) => children.names,
        Err(Error::NoNode { .. }) => Vec::new(),
        Err(err) => panic!("listing {dir}: {err}"),
    }
}

/// How long a test's holder keeps the lock before releasing it (see [`Exclusive`]).
const HOLD: Duration = Duration::from_millis(2);

/// The control for the holder check: two workers that "acquire" with no lock at all, as a
/// broken grant would, are caught holding at once (a check that could not see a
/// second grant proved nothing).
#[actix_rt::test]
async fn the_holder_check_catches_two_holders() {
    let exclusive = Exclusive::default();
    let broken: Vec<_> = (0..2)
        .map(|_| {
            let exclusive = exclusive.clone();
            actix_rt::spawn(async move {
                for _ in 0..5 {
                    exclusive.enter();
                    exclusive.hold_and_leave(HOLD).await;
                }
            })
        })
        .collect();
    for worker in broken {
        worker.await.expect("worker");
    }
    assert!(exclusive.violations() > 0, "two holders at once were not counted");
}

#[actix_rt::test]
async fn mutual_exclusion_fifo_and_increasing_tokens_under_contention() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("mutex");
    let mut sessions = Vec::new();
    for _ in 0..4 {
        sessions.push(session_at(&zk.connect_string(), &root).await);
    }
    let exclusive = Exclusive::default();
    let holds = Arc::new(HoldLog::new());
    let grants = Arc::new(std::sync::Mutex::new(Vec::<LockGrant>::new()));
    const ROUNDS_PER_ACTOR: usize = 38; // 8 actors: 304 acquisitions in all

    let mut workers = Vec::new();
    for i in 0..8 {
        let lock =
            LockActor::new(sessions[i % 4].clone(), LockConfig::new("/lock").with_participant_id(format!("w{i}")))
                .start();
        let (exclusive, grants, holds) = (exclusive.clone(), grants.clone(), holds.clone());
        workers.push(actix_rt::spawn(async move {
            for _ in 0..ROUNDS_PER_ACTOR {
                let grant = lock.send(Acquire::default()).await.expect("lock actor").expect("acquire");
                let granted = std::time::Instant::now();
                exclusive.enter();
                grants.lock().expect("grants").push(grant.clone());
                // Held until the release is sent, and long enough that a wrong second grant
                // (a notification and several actor hops away) would land meanwhile.
                exclusive.hold_and_leave(HOLD).await;
                holds.record(grant.token.0, granted, std::time::Instant::now());
                lock.send(Release).await.expect("lock actor").expect("release");
            }
        }));
    }
    for worker in workers {
        bounded("worker", worker).await.expect("worker finished");
    }
    assert_eq!(exclusive.violations(), 0, "two holders at once");
    assert_eq!((holds.len(), holds.violations()), (8 * ROUNDS_PER_ACTOR, 0), "overlapping holds");
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
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
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

#[actix_rt::test]
async fn expired_holder_loses_the_lock_and_its_guarded_write_fails() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("expire-lock");
    // A's link goes through a proxy, so its session can be expired while it cannot hear of it:
    // it then learns of the expiry from the server, before any event of the deleted node.
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let (a, b) = (session_at(&links.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    a.create("/data", "initial", CreateMode::Persistent).await.expect("/data");
    let lock_a = LockActor::new(a.clone(), LockConfig::new("/l").with_participant_id("a")).start();
    let lock_b = LockActor::new(b.clone(), LockConfig::new("/l").with_participant_id("b")).start();
    let events_a = Recorded::<LockEvent>::start();
    lock_a.do_send(Subscribe { recipient: events_a.recipient.clone() });

    let grant_a = lock_a.send(Acquire::default()).await.expect("actor").expect("a acquires");
    assert_eq!(a.get_data(&grant_a.node).await.expect("lock node").data, b"a", "participant id as data");
    let write = |v: &str| vec![Op::SetData { path: "/data".into(), data: v.as_bytes().to_vec(), version: None }];
    grant_a.guarded_write(&a, write("by a, holding")).await.expect("guarded write while holding");
    let waiting_b = lock_b.send(Acquire::default());

    let info = a.session().await.expect("session").info;
    links.blackhole();
    expire_session(&zk.connect_string(), &info).await.expect("expire a's session");
    // The server deleted a's node with the session: b holds while a is still cut off.
    let grant_b = bounded("b gets the lock", waiting_b).await.expect("actor").expect("b acquires");
    assert!(events_a.snapshot().iter().all(|e| !matches!(e, LockEvent::Lost { .. })), "a heard nothing yet");
    links.heal();
    let (_, lost) = events_a.wait_for(0, WAIT, |e| matches!(e, LockEvent::Lost { .. })).await;
    assert!(
        matches!(&lost, LockEvent::Lost { token, reason: LockLostReason::SessionExpired, .. } if *token == grant_a.token),
        "{lost:?}"
    );

    assert!(grant_b.token > grant_a.token, "fencing token grows");
    // The old holder's guarded write fails (its node is gone) and lands nothing.
    let err = guarded_until_known(&grant_a, &a, write("by a, stale")).await.unwrap_err();
    assert_eq!(err, FenceError::Ended { node: grant_a.node.clone() });
    grant_b.guarded_write(&b, write("by b")).await.expect("b writes");
    assert_eq!(b.get_data("/data").await.expect("data").data, b"by b");
    // A does not silently re-acquire, and a release now says the lock was lost, not released.
    assert!(matches!(lock_a.send(Release).await.expect("actor"), Err(LockError::Lost { .. })));
    lock_b.send(Release).await.expect("actor").expect("release");
    assert!(nodes(&b, "/l").await.is_empty(), "no orphan node");
    a.close().await;
    b.close().await;
}

#[actix_rt::test]
async fn server_restart_while_holding_and_waiting_keeps_one_holder() {
    init_tracing();
    let mut server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root("restart-lock");
    let cfg = || {
        SessionConfig::new(server.connect_string())
            .with_chroot(root.clone())
            .with_session_timeout(Duration::from_secs(10))
    };
    let (a, _) = connected(cfg()).await;
    let (b, _) = connected(cfg()).await;
    let lock_a = LockActor::new(a.clone(), LockConfig::new("/l")).start();
    let lock_b = LockActor::new(b.clone(), LockConfig::new("/l")).start();
    let events_a = Recorded::<LockEvent>::start();
    lock_a.do_send(Subscribe { recipient: events_a.recipient.clone() });
    let grant_a = lock_a.send(Acquire::default()).await.expect("actor").expect("a acquires");
    let waiting_b = actix_rt::spawn(lock_b.send(Acquire::default()));
    wait_until_nodes(&a, "/l", 2).await;

    server.stop().expect("stop");
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    server.restart().expect("restart");
    let (i, _) = events_a.wait_for(0, WAIT, |e| matches!(e, LockEvent::Suspended { .. })).await;
    events_a.wait_for(i, WAIT, |e| matches!(e, LockEvent::Reconnected { token, .. } if *token == grant_a.token)).await;
    assert!(!events_a.snapshot().iter().any(|e| matches!(e, LockEvent::Lost { .. })), "{:?}", events_a.snapshot());
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting_b.is_finished(), "b must not hold while a does");

    lock_a.send(Release).await.expect("actor").expect("a releases");
    let grant_b = bounded("b gets the lock", waiting_b).await.expect("task").expect("actor").expect("b acquires");
    assert!(grant_b.token > grant_a.token);
    lock_b.send(Release).await.expect("actor").expect("b releases");
    wait_until_nodes(&a, "/l", 0).await;
    a.close().await;
    b.close().await;
}

/// A create whose reply is lost for certain: the proxy holds every reply, the test sees the node
/// made on the server (so the request applied and its reply did not arrive), then drops the
/// connection. The lock finds its node by GUID and adopts it; cancelled instead, it deletes it.
#[actix_rt::test]
async fn a_lost_create_reply_leaves_exactly_one_node_or_none_after_cancel() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("lost-create");
    let s = session_at(&links.connect_string(), &root).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    let lock = LockActor::new(s.clone(), LockConfig::new("/l")).start();
    s.ensure_path("/l").await.expect("dir");
    for round in 0..3 {
        let found = lose_the_reply_of(&links, &observer, 1, || actix_rt::spawn(lock.send(Acquire::default()))).await;
        let grant =
            bounded("acquire across a lost reply", found).await.expect("task").expect("actor").expect("acquire");
        let nodes_now = nodes(&observer, "/l").await;
        assert_eq!(nodes_now.len(), 1, "round {round}: exactly one node for the attempt: {nodes_now:?}");
        assert_eq!(path::join("/l", &nodes_now[0]), grant.node, "round {round}: the node made before the cut");
        lock.send(Release).await.expect("actor").expect("release");
        wait_until_nodes(&observer, "/l", 0).await;
    }

    // Cancelled after a lost reply: nothing left.
    let holder = LockActor::new(observer.clone(), LockConfig::new("/l")).start();
    holder.send(Acquire::default()).await.expect("actor").expect("holder");
    let waiting = lose_the_reply_of(&links, &observer, 2, || actix_rt::spawn(lock.send(Acquire::default()))).await;
    lock.send(Release).await.expect("actor").expect("cancel");
    assert!(matches!(
        bounded("cancelled", waiting).await.expect("task").expect("actor"),
        Err(LockError::Cancelled { .. })
    ));
    wait_until_nodes(&observer, "/l", 1).await;
    holder.send(Release).await.expect("actor").expect("release");
    wait_until_nodes(&observer, "/l", 0).await;
    s.close().await;
    observer.close().await;
}

/// Starts `request` while the proxy holds every reply, waits until `observer` sees `nodes` in
/// `/l` (the create applied), then drops the connection, so its reply is lost for certain.
async fn lose_the_reply_of<T>(
    links: &ClientLinks,
    observer: &SessionHandle,
    nodes: usize,
    request: impl FnOnce() -> T,
) -> T {
    links.proxy(0).set_latency(Direction::Downstream, Duration::from_secs(60));
    let started = request();
    wait_until_nodes(observer, "/l", nodes).await;
    links.reset();
    links.heal();
    started
}

/// A create whose reply is lost, recovered through a follower that has not applied it yet
/// (review 3, D; see `LaggingFollower`): the recovery must still find the node by its GUID.
/// Without a `sync` before its listing it misses it, creates a second node behind its own
/// first one, and waits on itself for as long as its session lives.
#[actix_rt::test]
async fn a_lost_create_recovered_through_a_lagging_follower_leaves_one_node() {
    init_tracing();
    let mut setup = LaggingFollower::start();
    let root = unique_root("lagging-follower-lock");
    let observer = session_at(&setup.ensemble.member_address(setup.leader), &root).await;
    observer.ensure_path("/l").await.expect("dir");
    let s = setup.connect_on_leader(&root).await;
    let lock = LockActor::new(s.clone(), LockConfig::new("/l")).start();
    setup.lag().await;
    let acquiring = actix_rt::spawn(lock.send(Acquire::default()));
    // The create is at the leader now; it commits once the follower acks it, LAG from now.
    actix_rt::time::sleep(Duration::from_millis(100)).await;
    setup.cut_leader();
    let grant = bounded("acquire across a lost reply, recovered through a lagging follower", acquiring)
        .await
        .expect("task")
        .expect("actor")
        .expect("acquire");
    assert_eq!(setup.serving(&s).await, Some(setup.follower), "recovered through the lagging follower");
    let nodes_now = nodes(&observer, "/l").await;
    assert_eq!(nodes_now.len(), 1, "exactly one node for the attempt: {nodes_now:?}");
    assert_eq!(path::join("/l", &nodes_now[0]), grant.node, "the node made before the cut");
    lock.send(Release).await.expect("actor").expect("release");
    wait_until_nodes(&observer, "/l", 0).await;
    s.close().await;
    observer.close().await;
}

#[actix_rt::test]
async fn fifty_waiters_each_watch_only_their_predecessor() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("herd");
    let mut sessions = Vec::new();
    for _ in 0..5 {
        sessions.push(session_at(&zk.connect_string(), &root).await);
    }
    let holder = LockActor::new(sessions[0].clone(), LockConfig::new("/l")).start();
    let first = holder.send(Acquire::default()).await.expect("actor").expect("holder");
    let mut waiters = Vec::new();
    for i in 0..50 {
        let lock = LockActor::new(sessions[i % 5].clone(), LockConfig::new("/l")).start();
        waiters.push((lock.clone(), actix_rt::spawn(lock.send(Acquire::default()))));
    }
    wait_until_nodes(&sessions[0], "/l", 51).await;
    actix_rt::time::sleep(Duration::from_millis(300)).await;

    // The server's view: nobody watches the directory's children, and no lock node is watched
    // by more than its own session and its successor's.
    let by_path = actix_zookeeper::testkit::wchp(&zk.connect_string()).expect("wchp");
    let watchers = parse_wchp(&by_path);
    let dir = format!("{root}/l");
    assert!(!watchers.contains_key(&dir), "no one watches the directory (that would be a herd)");
    let lock_nodes: Vec<_> = watchers.iter().filter(|(p, _)| p.starts_with(&format!("{dir}/"))).collect();
    assert_eq!(lock_nodes.len(), 51, "every node is watched (by its owner, and by its successor)");
    for (path, sessions) in &lock_nodes {
        assert!(sessions.len() <= 2, "{path} is watched by {} sessions: {sessions:?}", sessions.len());
    }

    // Each release hands the lock to exactly one waiter, in queue order.
    holder.send(Release).await.expect("actor").expect("release");
    let mut previous = first.token;
    let (mut locks, mut waiting): (Vec<_>, Vec<_>) = waiters.into_iter().unzip();
    while !waiting.is_empty() {
        let (granted, index, rest) = bounded("hand-off", futures::future::select_all(waiting)).await;
        let grant = granted.expect("task").expect("actor").expect("acquire");
        assert!(grant.token > previous, "grants follow the queue");
        previous = grant.token;
        actix_rt::time::sleep(Duration::from_millis(20)).await;
        assert!(rest.iter().all(|w| !w.is_finished()), "a release woke more than one waiter");
        let lock = locks.swap_remove(index); // select_all hands back the rest swap-removed too
        lock.send(Release).await.expect("actor").expect("release");
        waiting = rest;
    }
    wait_until_nodes(&sessions[0], "/l", 0).await;
    for s in sessions {
        s.close().await;
    }
}

/// `wchp` output: a path line followed by tab-indented session ids.
fn parse_wchp(text: &str) -> std::collections::HashMap<String, Vec<String>> {
    let mut map = std::collections::HashMap::<String, Vec<String>>::new();
    let mut current = None;
    for line in text.lines() {
        if line.starts_with('/') {
            current = Some(line.trim().to_string());
            map.entry(line.trim().to_string()).or_default();
        } else if let (Some(path), id) = (&current, line.trim()) {
            if !id.is_empty() {
                map.entry(path.clone()).or_default().push(id.to_string());
            }
        }
    }
    map
}

#[actix_rt::test]
async fn read_write_lock_shares_reads_excludes_writes_and_does_not_starve_writers() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("rw");
    let s = session_at(&zk.connect_string(), &root).await;
    let reader = |id: &str| {
        LockActor::new(s.clone(), LockConfig::new("/rw").with_kind(LockKind::Read).with_participant_id(id)).start()
    };
    let writer = LockActor::new(s.clone(), LockConfig::new("/rw").with_kind(LockKind::Write)).start();
    let (r1, r2, r3) = (reader("r1"), reader("r2"), reader("r3"));

    // Readers share.
    let g1 = r1.send(Acquire::default()).await.expect("actor").expect("r1");
    let g2 = r2.send(Acquire::default()).await.expect("actor").expect("r2");
    assert!(g1.node.contains("-__READ__") && g2.node.contains("-__READ__"), "Curator layout");

    // A writer waits for every reader ahead of it.
    let w = actix_rt::spawn(writer.send(Acquire::default()));
    wait_until_nodes(&s, "/rw", 3).await;
    // A reader that arrives after the writer queues behind it: writers are not starved.
    let late = actix_rt::spawn(r3.send(Acquire::default()));
    wait_until_nodes(&s, "/rw", 4).await;
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert!(!w.is_finished() && !late.is_finished());

    r1.send(Release).await.expect("actor").expect("r1 releases");
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    assert!(!w.is_finished(), "one reader still holds");
    r2.send(Release).await.expect("actor").expect("r2 releases");
    let gw = bounded("writer", w).await.expect("task").expect("actor").expect("writer acquires");
    assert!(gw.node.contains("-__WRIT__"));
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    assert!(!late.is_finished(), "the writer excludes readers");
    writer.send(Release).await.expect("actor").expect("writer releases");
    let g3 = bounded("late reader", late).await.expect("task").expect("actor").expect("r3");
    assert!(g3.token > gw.token);
    r3.send(Release).await.expect("actor").expect("r3 releases");
    wait_until_nodes(&s, "/rw", 0).await;
    s.close().await;
}

#[actix_rt::test]
async fn semaphore_never_grants_more_than_its_leases() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("sem");
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(session_at(&zk.connect_string(), &root).await);
    }
    let holders = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for i in 0..10 {
        let sem = SemaphoreActor::new(sessions[i % 3].clone(), SemaphoreConfig::new("/sem", 3)).start();
        let (holders, most) = (holders.clone(), most.clone());
        workers.push(actix_rt::spawn(async move {
            for _ in 0..6 {
                let grant = sem.send(Acquire::default()).await.expect("actor").expect("lease");
                assert!(grant.node.starts_with("/sem/leases/_c_") && grant.node.contains("-lease-"), "{}", grant.node);
                let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                // Long enough for leases to overlap: the guard mutex hands out one lease at a time,
                // and with 5 ms holds a loaded machine sometimes saw every holder alone.
                actix_rt::time::sleep(Duration::from_millis(40)).await;
                holders.fetch_sub(1, Ordering::SeqCst);
                sem.send(Release).await.expect("actor").expect("release");
            }
        }));
    }
    for worker in workers {
        bounded("semaphore worker", worker).await.expect("worker");
    }
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 3, "at most 3 holders at once, saw {most}");
    assert!(most >= 2, "leases are shared (saw at most {most} holders)");
    assert!(nodes(&sessions[0], "/sem/leases").await.is_empty(), "no lease left");
    assert!(nodes(&sessions[0], "/sem/locks").await.is_empty(), "no guard node left");
    for s in sessions {
        s.close().await;
    }
}

/// A semaphore whose lease cannot be made (its directory refuses the create) fails the acquire
/// and gives its guard back at once, while the participant lives on: a guard kept for a lease
/// that cannot come would keep every other participant of the semaphore waiting behind it.
#[actix_rt::test]
async fn a_semaphore_whose_lease_fails_gives_its_guard_back() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("semfail");
    let s = session_at(&zk.connect_string(), &root).await;
    s.ensure_path("/sem").await.expect("semaphore directory");
    read_only_dir(&s, "/sem/leases").await;
    let sem = SemaphoreActor::new(s.clone(), SemaphoreConfig::new("/sem", 2)).start();
    let err = bounded("a lease that cannot be made", sem.send(Acquire::default())).await.expect("actor").unwrap_err();
    assert!(matches!(&err, LockError::ZooKeeper(Error::NoAuth { .. })), "{err:?}");
    wait_until_nodes(&s, "/sem/locks", 0).await;
    assert!(sem.connected(), "the participant lives on");
    drop(sem);
    s.close().await;
}

#[actix_rt::test]
async fn bad_lock_paths_get_typed_errors() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("badlock");
    let s = session_at(&zk.connect_string(), &root).await;
    let invalid = LockActor::new(s.clone(), LockConfig::new("no/leading/slash")).start();
    let err = bounded("invalid path", invalid.send(Acquire::default())).await.expect("actor").unwrap_err();
    assert!(matches!(&err, LockError::ZooKeeper(Error::InvalidPath { .. })), "{err:?}");

    s.create("/eph", "", CreateMode::Ephemeral).await.expect("ephemeral");
    for dir in ["/eph", "/eph/locks"] {
        let under_ephemeral = LockActor::new(s.clone(), LockConfig::new(dir)).start();
        let err = bounded("lock under an ephemeral", under_ephemeral.send(Acquire::default()))
            .await
            .expect("actor")
            .unwrap_err();
        assert!(matches!(&err, LockError::ZooKeeper(Error::NoChildrenForEphemerals { .. })), "{dir}: {err:?}");
    }
    assert!(nodes(&s, "/eph").await.is_empty());

    // No permission to create in the directory: a final error, told once.
    read_only_dir(&s, "/closed").await;
    let closed = LockActor::new(s.clone(), LockConfig::new("/closed")).start();
    let err = bounded("lock in a read-only dir", closed.send(Acquire::default())).await.expect("actor").unwrap_err();
    assert!(matches!(&err, LockError::ZooKeeper(Error::NoAuth { path }) if path.starts_with("/closed")), "{err:?}");
    s.close().await;
}

#[actix_rt::test]
async fn killing_the_ensemble_member_of_the_holder_keeps_the_lock_exclusive() {
    init_tracing();
    let mut ensemble = actix_zookeeper::testkit::ZkEnsemble::start(3).expect("ensemble");
    let root = unique_root("ensemble-lock");
    // 20 s: with the tests running side by side on two cores, the two members left once took
    // over 10 s to elect a leader, and a conservative holder gives up after a session timeout
    // offline. The point is the fail-over within the session, not its speed.
    let cfg = || {
        SessionConfig::new(ensemble.connect_string())
            .with_chroot(root.clone())
            .with_session_timeout(Duration::from_secs(20))
    };
    let (a, _) = connected(cfg()).await;
    let (b, _) = connected(cfg()).await;
    let lock_a = LockActor::new(a.clone(), LockConfig::new("/l")).start();
    let lock_b = LockActor::new(b.clone(), LockConfig::new("/l")).start();
    let events_a = Recorded::<LockEvent>::start();
    lock_a.do_send(Subscribe { recipient: events_a.recipient.clone() });
    let grant_a = lock_a.send(Acquire::default()).await.expect("actor").expect("a acquires");
    let waiting_b = actix_rt::spawn(lock_b.send(Acquire::default()));
    wait_until_nodes(&a, "/l", 2).await;

    kill_the_serving_member(&mut ensemble, &a).await;
    events_a.wait_for(0, WAIT, |e| matches!(e, LockEvent::Reconnected { token, .. } if *token == grant_a.token)).await;
    assert!(!events_a.snapshot().iter().any(|e| matches!(e, LockEvent::Lost { .. })));
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting_b.is_finished(), "b waits while a holds");
    grant_a.guarded_write(&a, vec![]).await.expect("a still holds after fail-over");

    lock_a.send(Release).await.expect("actor").expect("release");
    let grant_b = bounded("b", waiting_b).await.expect("task").expect("actor").expect("b acquires");
    assert!(grant_b.token > grant_a.token);
    lock_b.send(Release).await.expect("actor").expect("release");
    wait_until_nodes(&a, "/l", 0).await;
    a.close().await;
    b.close().await;
}

/// Two holders on one session, cut off (the proxy drops the connection and holds new ones)
/// for longer than the session timeout: the conservative one gives up after a whole session
/// timeout offline, while the expiry-only one still holds, and loses only to the expiry.
#[actix_rt::test]
async fn conservative_holders_give_up_after_a_session_timeout_offline_expiry_only_holders_at_the_expiry() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("policy");
    let cfg = SessionConfig::new(links.connect_string()).with_chroot(root).with_session_timeout(Duration::from_secs(2));
    let (s, _) = connected(cfg).await;
    let (cautious, cautious_events) = holder(&s, LockConfig::new("/cautious"));
    let (relaxed, relaxed_events) = holder(&s, LockConfig::new("/relaxed").with_policy(ConnectionPolicy::ExpiryOnly));
    let c = cautious.send(Acquire::default()).await.expect("actor").expect("cautious");
    let r = relaxed.send(Acquire::default()).await.expect("actor").expect("relaxed");

    links.blackhole();
    links.reset();
    let (_, lost) = cautious_events.wait_for(0, WAIT, |e| matches!(e, LockEvent::Lost { .. })).await;
    assert!(
        matches!(&lost, LockEvent::Lost { token, reason: LockLostReason::DisconnectedTooLong, .. } if *token == c.token),
        "{lost:?}"
    );
    relaxed_events.wait_for(0, WAIT, |e| matches!(e, LockEvent::Suspended { token, .. } if *token == r.token)).await;
    assert!(
        !relaxed_events.snapshot().iter().any(|e| matches!(e, LockEvent::Lost { .. })),
        "the expiry-only holder gave up before the expiry: {:?}",
        relaxed_events.snapshot()
    );

    let (_, lost) = relaxed_events.wait_for(0, WAIT, |e| matches!(e, LockEvent::Lost { .. })).await;
    assert!(
        matches!(&lost, LockEvent::Lost { token, reason: LockLostReason::SessionExpired, .. } if *token == r.token),
        "{lost:?}"
    );
    links.heal();
    assert!(matches!(
        cautious.send(Release).await.expect("actor"),
        Err(LockError::Lost { reason: LockLostReason::DisconnectedTooLong, .. })
    ));
    assert!(matches!(
        relaxed.send(Release).await.expect("actor"),
        Err(LockError::Lost { reason: LockLostReason::SessionExpired, .. })
    ));
    wait_until_nodes(&s, "/cautious", 0).await;
    wait_until_nodes(&s, "/relaxed", 0).await;
    s.close().await;
}

/// An outage shorter than the session timeout costs an expiry-only holder nothing: it is told
/// `Suspended`, then `Reconnected` with the same token, and its node is the one it had (the
/// old test's outage outlasted the client's own expiry, so the branch it meant to test
/// did not run).
#[actix_rt::test]
async fn an_expiry_only_holder_keeps_the_lock_through_a_short_outage() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("short-outage");
    let cfg = SessionConfig::new(links.connect_string()).with_chroot(root).with_session_timeout(Duration::from_secs(6));
    let (s, session_events) = connected(cfg).await;
    let (relaxed, events) = holder(&s, LockConfig::new("/relaxed").with_policy(ConnectionPolicy::ExpiryOnly));
    let grant = relaxed.send(Acquire::default()).await.expect("actor").expect("relaxed");
    let node = s.get_data(&grant.node).await.expect("our node").stat;

    links.blackhole();
    links.reset();
    // The fault happened: the holder heard it.
    let (i, _) =
        events.wait_for(0, WAIT, |e| matches!(e, LockEvent::Suspended { token, .. } if *token == grant.token)).await;
    actix_rt::time::sleep(Duration::from_millis(1500)).await;
    links.heal();
    events.wait_for(i, WAIT, |e| matches!(e, LockEvent::Reconnected { token, .. } if *token == grant.token)).await;
    assert!(
        !events.snapshot().iter().any(|e| matches!(e, LockEvent::Lost { .. })),
        "lost through a short outage: {:?}",
        events.snapshot()
    );
    assert!(
        !session_events.snapshot().iter().any(|e| matches!(e, SessionEvent::Expired { .. })),
        "the session should have survived"
    );
    let stat = s.get_data(&grant.node).await.expect("our node is still there").stat;
    assert_eq!(stat.czxid, node.czxid, "the same node");
    grant.guarded_write(&s, vec![]).await.expect("still the holder");
    relaxed.send(Release).await.expect("actor").expect("release");
    wait_until_nodes(&s, "/relaxed", 0).await;
    s.close().await;
}

/// A lock actor and the events it sends.
fn holder(s: &SessionHandle, config: LockConfig) -> (Addr<LockActor>, Recorded<LockEvent>) {
    let lock = LockActor::new(s.clone(), config).start();
    let events = Recorded::<LockEvent>::start();
    lock.do_send(Subscribe { recipient: events.recipient.clone() });
    (lock, events)
}

#[actix_rt::test]
async fn an_expired_lease_holder_frees_its_lease_for_a_waiter() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("sem-expiry");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let (a, b) = (session_at(&links.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let holder = SemaphoreActor::new(a.clone(), SemaphoreConfig::new("/sem", 1)).start();
    let waiter = SemaphoreActor::new(b.clone(), SemaphoreConfig::new("/sem", 1)).start();
    let events = Recorded::<LockEvent>::start();
    holder.do_send(Subscribe { recipient: events.recipient.clone() });
    let lease = holder.send(Acquire::default()).await.expect("actor").expect("lease");
    let waiting = actix_rt::spawn(waiter.send(Acquire::default()));
    wait_until_nodes(&b, "/sem/leases", 2).await;
    assert_eq!(nodes(&b, "/sem/locks").await.len(), 1, "the waiter holds the guard while it waits");

    let info = a.session().await.expect("session").info;
    links.blackhole();
    expire_session(&zk.connect_string(), &info).await.expect("expire");
    let second = bounded("waiter gets the lease", waiting).await.expect("task").expect("actor").expect("lease");
    links.heal();
    let (_, lost) = events.wait_for(0, WAIT, |e| matches!(e, LockEvent::Lost { .. })).await;
    assert!(
        matches!(&lost, LockEvent::Lost { token, reason: LockLostReason::SessionExpired, .. } if *token == lease.token),
        "{lost:?}"
    );
    assert!(second.token > lease.token);
    let err = guarded_until_known(&lease, &a, vec![]).await.unwrap_err();
    assert!(matches!(err, FenceError::Ended { .. }));
    waiter.send(Release).await.expect("actor").expect("release");
    wait_until_nodes(&b, "/sem/leases", 0).await;
    wait_until_nodes(&b, "/sem/locks", 0).await;
    a.close().await;
    b.close().await;
}

#[actix_rt::test]
async fn a_holder_stopped_right_after_release_leaves_no_node() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("release-stop");
    let s = session_at(&zk.connect_string(), &root).await;
    for _ in 0..5 {
        let lock = LockActor::new(s.clone(), LockConfig::new("/l")).start();
        lock.send(Acquire::default()).await.expect("actor").expect("acquire");
        lock.do_send(Release);
        drop(lock); // the actor stops at once; its release must still happen
    }
    wait_until_nodes(&s, "/l", 0).await;
    s.close().await;
}

/// A guarded write, tried again while it could not be sent or its outcome is unknown (the
/// session that just expired may still be reconnecting when the test writes). Sending again is
/// fine here only because every caller then checks that the write did not apply at all.
async fn guarded_until_known(grant: &LockGrant, s: &SessionHandle, ops: Vec<Op>) -> Result<Vec<OpResult>, FenceError> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        match grant.guarded_write(s, ops.clone()).await {
            Err(FenceError::ZooKeeper(e)) if e.is_transient() && std::time::Instant::now() < deadline => {
                actix_rt::time::sleep(Duration::from_millis(50)).await
            }
            Err(FenceError::OutcomeUnknown { .. }) if std::time::Instant::now() < deadline => {
                actix_rt::time::sleep(Duration::from_millis(50)).await
            }
            outcome => return outcome,
        }
    }
}

/// Whether the server's `wchp` lists a watch on `path` (the server's path, chroot included) by
/// the session `id`.
fn watched_by(server: &ZkServer, path: &str, id: i64) -> bool {
    let by_path = actix_zookeeper::testkit::wchp(&server.address()).expect("wchp");
    parse_wchp(&by_path).get(path).is_some_and(|sessions| sessions.contains(&format!("0x{id:x}")))
}

/// Regression: a data change on the node a waiter watches (Curator's
/// `Revoker` writes `__REVOKE__` into lock nodes) fires the watch without ending the wait; the
/// waiter must watch again, and wake when the holder releases. A server of the test's own, whose
/// `wchp` shows the waiter's watch: the write's reply comes after the server fired (and dropped)
/// that watch, so a watch by the waiter's session seen after the reply was set again.
#[actix_rt::test]
async fn a_waiter_wakes_after_its_predecessor_was_written_to() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root("revoke-waiter");
    let (a, b, other) = (
        session_at(&server.connect_string(), &root).await,
        session_at(&server.connect_string(), &root).await,
        session_at(&server.connect_string(), &root).await,
    );
    let b_id = b.session().await.expect("b's session").session_id.0;
    let (waiter, events) = holder(&b, LockConfig::new("/lock").with_participant_id("b"));
    let holder = LockActor::new(a, LockConfig::new("/lock").with_participant_id("a")).start();
    let grant = holder.send(Acquire::default()).await.expect("actor").expect("a holds");
    let waiting = waiter.send(Acquire { timeout: Some(Duration::from_secs(10)) });
    wait_until_nodes(&other, "/lock", 2).await;
    let watched = format!("{root}{}", grant.node);
    let b_watches = || watched_by(&server, &watched, b_id);
    wait_until("the waiter's watch on the holder's node", b_watches).await;
    other.set_data(&grant.node, "__REVOKE__", None).await.expect("write into the holder's node");
    wait_until("the waiter's watch set again after the data change", b_watches).await;
    let granted_early = events.snapshot().into_iter().any(|e| matches!(e, LockEvent::Acquired { .. }));
    assert!(!granted_early, "the data change granted the lock while a held it: {:?}", events.snapshot());
    holder.send(Release).await.expect("actor").expect("release");
    let granted = waiting.await.expect("actor");
    assert!(granted.is_ok(), "the waiter never woke after the release: {granted:?}");
}

/// Regression: a data change on the held node fires the holder's watch on
/// it; the holder must watch again, and learn when the node is deleted afterwards. The watch is
/// seen on the server (`wchp`), as in `a_waiter_wakes_after_its_predecessor_was_written_to`.
#[actix_rt::test]
async fn a_holder_learns_its_node_was_deleted_after_it_was_written_to() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root("revoke-holder");
    let a = session_at(&server.connect_string(), &root).await;
    let other = session_at(&server.connect_string(), &root).await;
    let a_id = a.session().await.expect("a's session").session_id.0;
    let holder = LockActor::new(a, LockConfig::new("/lock").with_participant_id("a")).start();
    let events = Recorded::<LockEvent>::start();
    holder.do_send(Subscribe { recipient: events.recipient.clone() });
    let grant = holder.send(Acquire::default()).await.expect("actor").expect("a holds");
    let watched = format!("{root}{}", grant.node);
    let a_watches = || watched_by(&server, &watched, a_id);
    wait_until("the holder's watch on its node", a_watches).await;
    other.set_data(&grant.node, "__REVOKE__", None).await.expect("write into the held node");
    wait_until("the holder's watch set again after the data change", a_watches).await;
    let lost_early = events.snapshot().into_iter().any(|e| matches!(e, LockEvent::Lost { .. }));
    assert!(!lost_early, "the data change was taken for a loss: {:?}", events.snapshot());
    other.delete(&grant.node, None).await.expect("delete the held node");
    let (_, lost) = events.wait_for(0, Duration::from_secs(10), |e| matches!(e, LockEvent::Lost { .. })).await;
    assert!(
        matches!(&lost, LockEvent::Lost { token, reason: LockLostReason::NodeDeleted, .. } if *token == grant.token),
        "{lost:?}"
    );
}

/// A node granted at once is watched only once it has been held a while (the watch used to be a
/// fourth request in every uncontended cycle). A deletion by someone else right after the grant,
/// before that watch is set, is still reported: the watch's read finds the node gone.
#[actix_rt::test]
async fn a_holder_whose_node_is_deleted_right_after_the_grant_learns_it() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("deleted-at-once");
    let (a, other) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let holder = LockActor::new(a, LockConfig::new("/lock").with_participant_id("a")).start();
    let events = Recorded::<LockEvent>::start();
    holder.do_send(Subscribe { recipient: events.recipient.clone() });
    for _ in 0..5 {
        let grant = holder.send(Acquire::default()).await.expect("actor").expect("a holds");
        other.delete(&grant.node, None).await.expect("delete the held node at once");
        let (_, lost) = events
            .wait_for(
                0,
                Duration::from_secs(10),
                |e| matches!(e, LockEvent::Lost { token, .. } if *token == grant.token),
            )
            .await;
        assert!(
            matches!(&lost, LockEvent::Lost { token, reason: LockLostReason::NodeDeleted, .. } if *token == grant.token),
            "{lost:?}"
        );
    }
}

/// A waiter whose node ahead held the lock in this process takes the lock when that
/// node goes, without listing the line (it was first, and nothing sorts below it); every such
/// hand-off used to cost a listing. The control: a line headed by nodes this process never saw
/// hold (made by hand) costs a listing when the node just ahead goes, so the count can see one.
#[actix_rt::test]
async fn a_hand_off_inside_this_process_lists_nothing() {
    init_tracing();
    let Some(zk) = server_of_our_own() else { return };
    let root = unique_root("in-process-hand-off");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let locks: Vec<Addr<LockActor>> = (0..4)
        .map(|i| {
            let session = if i % 2 == 0 { a.clone() } else { b.clone() };
            LockActor::new(session, LockConfig::new("/l").with_participant_id(format!("p{i}"))).start()
        })
        .collect();
    let first = locks[0].send(Acquire::default()).await.expect("actor").expect("p0 holds");
    let mut waiting = Vec::new();
    for (i, lock) in locks.iter().enumerate().skip(1) {
        waiting.push(actix_rt::spawn(lock.send(Acquire::default())));
        wait_until_nodes(&a, "/l", i + 1).await;
    }
    // Every waiter's watches set (a listing each, before the count starts).
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    let before = listings(&zk);
    let mut token = first.token;
    locks[0].send(Release).await.expect("actor").expect("release");
    for (i, waiter) in waiting.into_iter().enumerate() {
        let grant = bounded("the next in line", waiter).await.expect("task").expect("actor").expect("grant");
        assert!(grant.token > token, "p{} is granted after the one before it", i + 1);
        token = grant.token;
        locks[i + 1].send(Release).await.expect("actor").expect("release");
    }
    assert_eq!(listings(&zk) - before, 0, "listings during 3 hand-offs inside this process");

    // The control: two nodes made by hand, then a waiter behind them.
    let made = |n: usize| {
        let a = a.clone();
        async move {
            let prefix = format!("/l/_c_0000000{n}-0000-0000-0000-000000000000-lock-");
            a.create(&prefix, "by hand", CreateMode::EphemeralSequential).await.expect("node made by hand").path
        }
    };
    let (r1, r2) = (made(1).await, made(2).await);
    let waiter = actix_rt::spawn(locks[1].send(Acquire::default()));
    wait_until_nodes(&a, "/l", 3).await;
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    let before = listings(&zk);
    a.delete(&r2, None).await.expect("delete the node just ahead");
    wait_until("the waiter lists the line again", || listings(&zk) > before).await;
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "the node that went was never first: r1 still heads the line");
    a.delete(&r1, None).await.expect("delete the head");
    let grant = bounded("the waiter gets the lock", waiter).await.expect("task").expect("actor").expect("grant");
    assert!(grant.token > token);
    locks[1].send(Release).await.expect("actor").expect("release");
}

/// The node ahead of a waiter goes while the head of the line still holds: the waiter
/// must not take the lock, even though the holder is known in this process to be first (only the
/// node it watched counts, and that one never held).
#[actix_rt::test]
async fn a_waiter_whose_node_ahead_leaves_the_line_keeps_waiting_for_the_holder() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("ahead-leaves");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    for round in 0..5 {
        let holder = LockActor::new(a.clone(), LockConfig::new("/l")).start();
        let leaver = LockActor::new(b.clone(), LockConfig::new("/l")).start();
        let waiter = LockActor::new(a.clone(), LockConfig::new("/l")).start();
        let held = holder.send(Acquire::default()).await.expect("actor").expect("holder holds");
        let leaving = actix_rt::spawn(leaver.send(Acquire { timeout: Some(Duration::from_millis(600)) }));
        wait_until_nodes(&a, "/l", 2).await;
        let waiting = actix_rt::spawn(waiter.send(Acquire::default()));
        wait_until_nodes(&a, "/l", 3).await;
        let left = bounded("the one ahead gives up", leaving).await.expect("task").expect("actor");
        assert!(left.is_err(), "round {round}: the one in the middle cannot have been granted: {left:?}");
        wait_until_nodes(&a, "/l", 2).await;
        actix_rt::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "round {round}: granted while {} holds", held.node);
        holder.send(Release).await.expect("actor").expect("release");
        let grant = bounded("the waiter gets the lock", waiting).await.expect("task").expect("actor").expect("grant");
        assert!(grant.token > held.token);
        waiter.send(Release).await.expect("actor").expect("release");
        wait_until_nodes(&a, "/l", 0).await;
    }
}

// ---- Failure-table rows (docs/recipes/lock.md), one test each ----------------------------------

/// Row "session expired", waiting: the node went with the session; the waiter stands in line
/// again on its new session, on its own, and gets the lock when the holder lets go.
#[actix_rt::test]
async fn a_waiter_whose_session_expires_stands_in_line_again() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("expired-waiter");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&links.connect_string(), &root).await);
    let holder = LockActor::new(a.clone(), LockConfig::new("/l")).start();
    let waiter = LockActor::new(b.clone(), LockConfig::new("/l")).start();
    holder.send(Acquire::default()).await.expect("actor").expect("a holds");
    let waiting = actix_rt::spawn(waiter.send(Acquire::default()));
    wait_until_nodes(&a, "/l", 2).await;
    let first = nodes(&a, "/l").await;

    let old = b.session().await.expect("session");
    links.blackhole();
    expire_session(&zk.connect_string(), &old.info).await.expect("expire the waiter's session");
    wait_until_nodes(&a, "/l", 1).await;
    links.heal();
    // In line again, with a node of its new session.
    wait_until_async("the waiter is in line again", || async {
        let now = nodes(&a, "/l").await;
        now.len() == 2 && now.iter().any(|n| !first.contains(n))
    })
    .await;
    assert!(!waiting.is_finished(), "still waiting while a holds");
    holder.send(Release).await.expect("actor").expect("release");
    let grant = bounded("the waiter gets the lock", waiting).await.expect("task").expect("actor").expect("grant");
    let owner = a.exists(&grant.node).await.expect("exists").expect("the granted node").ephemeral_owner;
    let new = b.session().await.expect("session").session_id.0;
    assert_eq!(owner, new, "held by the waiter's new session");
    assert_ne!(new, old.session_id.0);
    waiter.send(Release).await.expect("actor").expect("release");
    wait_until_nodes(&a, "/l", 0).await;
}

/// Row "session expired", holding, with `with_reacquire_after_loss(true)`: `Lost` first, then
/// the lock is taken again on the new session, with a larger token.
#[actix_rt::test]
async fn a_holder_that_reacquires_after_a_loss_holds_again_on_its_new_session() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("reacquire");
    let s = session_at(&links.connect_string(), &root).await;
    let (lock, events) = holder(&s, LockConfig::new("/l").with_reacquire_after_loss(true));
    let grant = lock.send(Acquire::default()).await.expect("actor").expect("holds");

    let info = s.session().await.expect("session").info;
    links.blackhole();
    expire_session(&zk.connect_string(), &info).await.expect("expire");
    links.heal();
    let (i, lost) = events.wait_for(0, WAIT, |e| matches!(e, LockEvent::Lost { .. })).await;
    assert!(
        matches!(&lost, LockEvent::Lost { token, reason: LockLostReason::SessionExpired, .. } if *token == grant.token),
        "{lost:?}"
    );
    let (_, again) = events.wait_for(i, WAIT, |e| matches!(e, LockEvent::Acquired { .. })).await;
    let LockEvent::Acquired { grant: again, .. } = again else { unreachable!() };
    assert!(again.token > grant.token, "a new term");
    let owner = s.exists(&again.node).await.expect("exists").expect("the new node").ephemeral_owner;
    assert_eq!(owner, s.session().await.expect("session").session_id.0);
    lock.send(Release).await.expect("actor").expect("release");
    wait_until_nodes(&s, "/l", 0).await;
}

/// Row "node deleted by someone else", waiting: the waiter stands in line again (a new node),
/// and still gets the lock.
#[actix_rt::test]
async fn a_waiter_whose_node_is_deleted_stands_in_line_again() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("deleted-waiter");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let holder = LockActor::new(a.clone(), LockConfig::new("/l")).start();
    let waiter = LockActor::new(b.clone(), LockConfig::new("/l")).start();
    let held = holder.send(Acquire::default()).await.expect("actor").expect("a holds");
    let waiting = actix_rt::spawn(waiter.send(Acquire::default()));
    wait_until_nodes(&a, "/l", 2).await;
    let theirs = nodes(&a, "/l").await.into_iter().map(|n| path::join("/l", &n)).find(|n| *n != held.node);
    let theirs = theirs.expect("the waiter's node");
    a.delete(&theirs, None).await.expect("delete the waiter's node");
    wait_until_async("the waiter is in line again", || async {
        let now = nodes(&a, "/l").await;
        now.len() == 2 && !now.iter().any(|n| path::join("/l", n) == theirs)
    })
    .await;
    assert!(!waiting.is_finished(), "still waiting while a holds");
    holder.send(Release).await.expect("actor").expect("release");
    let grant = bounded("the waiter gets the lock", waiting).await.expect("task").expect("actor").expect("grant");
    assert_ne!(grant.node, theirs);
    waiter.send(Release).await.expect("actor").expect("release");
    wait_until_nodes(&a, "/l", 0).await;
}

/// Row "reconnected, same session", holding, node gone: a node deleted while the holder was
/// cut off is `Lost { NodeDeleted }` once it is back, never `Reconnected`.
#[actix_rt::test]
async fn a_holder_whose_node_was_deleted_while_it_was_cut_off_learns_it_on_reconnect() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("deleted-offline");
    let s = session_at(&links.connect_string(), &root).await;
    let other = session_at(&zk.connect_string(), &root).await;
    let (lock, events) = holder(&s, LockConfig::new("/l"));
    let grant = lock.send(Acquire::default()).await.expect("actor").expect("holds");

    links.blackhole();
    links.reset();
    let (i, _) =
        events.wait_for(0, WAIT, |e| matches!(e, LockEvent::Suspended { token, .. } if *token == grant.token)).await;
    other.delete(&grant.node, None).await.expect("delete the held node");
    links.heal();
    let (_, back) =
        events.wait_for(i, WAIT, |e| matches!(e, LockEvent::Reconnected { .. } | LockEvent::Lost { .. })).await;
    assert!(
        matches!(&back, LockEvent::Lost { token, reason: LockLostReason::NodeDeleted, .. } if *token == grant.token),
        "{back:?}"
    );
    assert!(matches!(
        lock.send(Release).await.expect("actor"),
        Err(LockError::Lost { reason: LockLostReason::NodeDeleted, .. })
    ));
}

/// Row "caller drops its `Acquire`": a waiting request dropped by its caller withdraws its
/// node; dropped as the lock is handed to it, the grant nobody receives is given back. Over
/// rounds with the drop before, at and after the hand-off, the lock is never left held. The
/// give-back path is taken for sure: in the last rounds the caller drops its future only once
/// the waiter has told `Acquired` (the grant is in the caller's channel, unread), and the rounds
/// whose grant nobody received are counted from the waiter's events (`Acquired`, then
/// `Released` of that node, with no caller having it).
#[actix_rt::test]
async fn a_dropped_acquire_withdraws_and_a_grant_nobody_receives_is_given_back() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("dropped-raw");
    let s = session_at(&zk.connect_string(), &root).await;
    let (holder, waiter, third) = (
        LockActor::new(s.clone(), LockConfig::new("/l")).start(),
        LockActor::new(s.clone(), LockConfig::new("/l")).start(),
        LockActor::new(s.clone(), LockConfig::new("/l")).start(),
    );
    let waiter_events = Recorded::<LockEvent>::start();
    waiter.do_send(Subscribe { recipient: waiter_events.recipient.clone() });
    // Dropped while waiting: withdrawn without anyone releasing.
    holder.send(Acquire::default()).await.expect("actor").expect("holds");
    let waiting = actix_rt::spawn(waiter.send(Acquire::default()));
    wait_until_nodes(&s, "/l", 2).await;
    waiting.abort();
    wait_until_nodes(&s, "/l", 1).await;
    holder.send(Release).await.expect("actor").expect("release");

    // Dropped around the hand-off, through the handle (a raw `send` whose answer is already in
    // its channel when dropped cannot give it back: `handles.rs` shows that control). The caller
    // gives up after `delay`, dropping its future: before the grant, as it arrives, or after it.
    // The delay is polled first: a grant that came with the deadline is dropped unread.
    // From round 10 on, the caller waits until the waiter told `Acquired`, then drops its
    // future without reading it.
    const DELAYED: u64 = 10;
    const UNREAD: u64 = 3;
    let waiter = LockHandle::new(waiter, "/l");
    let (mut received, mut given_back) = (0, 0);
    for round in 0..DELAYED + UNREAD {
        holder.send(Acquire::default()).await.expect("actor").expect("holds");
        let from = waiter_events.snapshot().len();
        let acquiring = Box::pin(waiter.acquire(None));
        wait_until_nodes(&s, "/l", 2).await;
        holder.do_send(Release);
        let got = if round < DELAYED {
            let delay = Box::pin(actix_rt::time::sleep(Duration::from_micros(round * 400)));
            match futures::future::select(delay, acquiring).await {
                futures::future::Either::Right((grant, _)) => Some(grant),
                futures::future::Either::Left(((), unread)) => {
                    drop(unread);
                    None
                }
            }
        } else {
            waiter_events.wait_for(from, WAIT, |e| matches!(e, LockEvent::Acquired { .. })).await;
            drop(acquiring);
            None
        };
        let caller_has_it = got.is_some();
        if let Some(grant) = got {
            // Received before the caller gave up: the caller's to release.
            grant.expect("grant");
            waiter.release().await.expect("release");
            received += 1;
        }
        let next = third.send(Acquire { timeout: Some(Duration::from_secs(10)) }).await.expect("actor");
        next.unwrap_or_else(|e| panic!("round {round}: the lock was left held: {e:?}"));
        third.send(Release).await.expect("actor").expect("release");
        wait_until_nodes(&s, "/l", 0).await;
        // The waiter was granted the lock this round, and no caller had it: it gave it back.
        let acquired = waiter_events.snapshot()[from..].iter().find_map(|e| match e {
            LockEvent::Acquired { grant, .. } => Some(grant.node.clone()),
            _ => None,
        });
        match acquired {
            Some(node) if !caller_has_it => {
                waiter_events
                    .wait_for(from, WAIT, |e| matches!(e, LockEvent::Released { node: n, .. } if *n == node))
                    .await;
                given_back += 1;
            }
            None if round >= DELAYED => panic!("round {round}: the waiter never told `Acquired`"),
            _ => {}
        }
    }
    println!("{received} of {DELAYED} grants were received before the caller gave up; {given_back} given back unread");
    assert!(given_back >= UNREAD as usize, "the give-back path was taken: {given_back} rounds");
}

/// Row "`Release` meets connection loss": the delete is tried again until it is known to have
/// applied; the answer is `Ok` and the event `Released`, and no node is left. Once with the
/// reply lost (the delete applied), once with the request lost (it did not).
#[actix_rt::test]
async fn a_release_that_meets_a_connection_loss_is_retried_until_the_node_is_gone() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("release-loss");
    let s = session_at(&links.connect_string(), &root).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    let (lock, events) = holder(&s, LockConfig::new("/l").with_policy(ConnectionPolicy::ExpiryOnly));
    for reply_lost in [true, false] {
        let grant = lock.send(Acquire::default()).await.expect("actor").expect("holds");
        let from = events.snapshot().len();
        let releasing = if reply_lost {
            links.proxy(0).set_latency(Direction::Downstream, Duration::from_secs(60));
            let releasing = lock.send(Release);
            // The fault happened: the node is gone on the server, its reply held by the proxy.
            wait_until_nodes(&observer, "/l", 0).await;
            releasing
        } else {
            links.blackhole();
            let releasing = lock.send(Release);
            actix_rt::time::sleep(Duration::from_millis(300)).await;
            // The fault happened: the request never reached the server.
            assert_eq!(nodes(&observer, "/l").await.len(), 1, "the delete must not have applied yet");
            releasing
        };
        links.reset();
        links.heal();
        let released = bounded("the release is answered", releasing).await.expect("actor");
        assert_eq!(released, Ok(()), "reply lost: {reply_lost}");
        let (_, told) = events.wait_for(from, WAIT, |e| !matches!(e, LockEvent::Suspended { .. })).await;
        let told = if matches!(told, LockEvent::Reconnected { .. }) {
            events.wait_for(from, WAIT, |e| matches!(e, LockEvent::Released { .. } | LockEvent::Lost { .. })).await.1
        } else {
            told
        };
        assert!(
            matches!(&told, LockEvent::Released { node, .. } if *node == grant.node),
            "reply lost: {reply_lost}: {told:?}"
        );
        wait_until_nodes(&observer, "/l", 0).await;
    }
}

/// Row "connection lost during the create", the recovery that finds another session's node
/// under our GUID: it adopts only its own session's node and deletes the other (CURATOR-604).
#[actix_rt::test]
async fn a_recovered_create_adopts_only_its_own_sessions_node() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("foreign-guid");
    let s = session_at(&links.connect_string(), &root).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    let lock = LockActor::new(s.clone(), LockConfig::new("/l")).start();
    s.ensure_path("/l").await.expect("dir");

    links.proxy(0).set_latency(Direction::Downstream, Duration::from_secs(60));
    let acquiring = actix_rt::spawn(lock.send(Acquire::default()));
    wait_until_nodes(&observer, "/l", 1).await;
    let ours = nodes(&observer, "/l").await.remove(0);
    // Another session makes a node under the same GUID (as a previous session of ours whose
    // node the server has not removed yet would have), before our lock can look.
    let prefix = &ours[..ours.rfind("-lock-").expect("Curator's name") + "-lock-".len()];
    let foreign = observer.create(&format!("/l/{prefix}"), "", CreateMode::EphemeralSequential).await.expect("foreign");
    links.reset();
    links.heal();

    let grant = bounded("acquire across a lost reply", acquiring).await.expect("task").expect("actor").expect("grant");
    assert_eq!(grant.node, path::join("/l", &ours), "adopted its own node");
    wait_until_async("the other session's node is deleted", || async {
        observer.exists(&foreign.path).await.expect("exists").is_none()
    })
    .await;
    lock.send(Release).await.expect("actor").expect("release");
    wait_until_nodes(&observer, "/l", 0).await;
}

/// Regression: the read that sets a holder's own-node watch loses its reply (the server
/// applied it, then the connection broke, and the server dropped the watch with the connection).
/// The contender had marked the watch as set when it sent the read, so it never set it again and
/// a deletion of the node by someone else went unheard. Now it is set again, and heard.
#[actix_rt::test]
async fn a_holder_whose_own_node_watch_lost_its_reply_sets_it_again_and_hears_a_deletion() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let links = ClientLinks::to([server.connect_string()]).expect("proxy");
    let root = unique_root("own-watch-lost");
    let s = session_at(&links.connect_string(), &root).await;
    let observer = session_at(&server.connect_string(), &root).await;
    let (lock, events) = holder(&s, LockConfig::new("/l"));
    let grant = lock.send(Acquire::default()).await.expect("actor").expect("acquire");
    // Before the holder's own-node watch is asked for (after 100 ms of holding): its reply is held.
    links.proxy(0).set_latency(Direction::Downstream, Duration::from_secs(60));
    let watched = || actix_zookeeper::testkit::wchp(&server.address()).expect("wchp").contains(&grant.node);
    wait_until("the own-node watch on the server, its reply held", watched).await;
    links.reset();
    links.heal();
    events.wait_for(0, WAIT, |e| matches!(e, LockEvent::Reconnected { token, .. } if *token == grant.token)).await;
    assert!(s.session().await.is_some_and(|now| now.generation == 1), "the same session");
    wait_until("the own-node watch set again", watched).await;
    observer.delete(&grant.node, None).await.expect("someone else deletes the node");
    events
        .wait_for(0, WAIT, |e| {
            matches!(e, LockEvent::Lost { token, reason: LockLostReason::NodeDeleted, .. } if *token == grant.token)
        })
        .await;
    s.close().await;
    observer.close().await;
}

/// Regression: a grant whose report reaches the lock actor after the session's `Suspended`
/// (the contender runs on the session's thread, so the two can arrive in either order) was held as
/// if connected: no `Suspended`, no disconnect deadline, no read on `Reconnected`. The order is
/// forced here by handing the waiter its `Suspended` just before the real hand-off.
#[actix_rt::test]
async fn a_grant_that_arrives_after_suspended_is_held_suspended_and_read_again_on_reconnect() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("grant-while-suspended");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let first = LockActor::new(a.clone(), LockConfig::new("/l")).start();
    let (second, events) = holder(&b, LockConfig::new("/l"));
    first.send(Acquire::default()).await.expect("actor").expect("acquire");
    let waiting = actix_rt::spawn(second.send(Acquire::default()));
    wait_until_nodes(&a, "/l", 2).await;
    let now = b.session().await.expect("b's session");
    second.do_send(SessionEvent::Suspended { session_id: now.session_id, generation: now.generation });
    first.send(Release).await.expect("actor").expect("release");
    let grant = bounded("the hand-off", waiting).await.expect("task").expect("actor").expect("granted");
    let (i, _) = events.wait_for(0, WAIT, |e| matches!(e, LockEvent::Acquired { .. })).await;
    events.wait_for(i, WAIT, |e| matches!(e, LockEvent::Suspended { token, .. } if *token == grant.token)).await;
    second.do_send(SessionEvent::Reconnected {
        session_id: now.session_id,
        generation: now.generation,
        read_only: false,
    });
    events.wait_for(i, WAIT, |e| matches!(e, LockEvent::Reconnected { token, .. } if *token == grant.token)).await;
    second.send(Release).await.expect("actor").expect("release");
    a.close().await;
    b.close().await;
}

fn revocation_requested(e: &LockEvent) -> bool {
    matches!(e, LockEvent::RevocationRequested { .. })
}

/// Rows "revocation requested" (docs/recipes/lock.md): a revocable holder and a revocable waiter
/// each hear one `RevocationRequested` per request and keep their place; the holder's guarded
/// writes still apply after one (they failed as `Ended` when the fence checked the node's
/// version, which the request changes). A participant that is not revocable hears nothing: the
/// control, checked after a later request to a revocable one has been heard.
#[actix_rt::test]
async fn revocable_participants_hear_revocation_requests_and_keep_their_place() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("revocable");
    let connect = zk.connect_string();
    let (a, b) = (session_at(&connect, &root).await, session_at(&connect, &root).await);
    let (c, other) = (session_at(&connect, &root).await, session_at(&connect, &root).await);
    let (holder_a, a_events) = holder(&a, LockConfig::new("/lock").with_participant_id("a").revocable());
    let (waiter_b, b_events) = holder(&b, LockConfig::new("/lock").with_participant_id("b").revocable());
    let (waiter_c, c_events) = holder(&c, LockConfig::new("/lock").with_participant_id("c"));
    let grant = holder_a.send(Acquire::default()).await.expect("actor").expect("a holds");
    let b_waits = waiter_b.send(Acquire { timeout: Some(WAIT) });
    wait_until_nodes(&other, "/lock", 2).await;
    let c_waits = waiter_c.send(Acquire { timeout: Some(WAIT) });
    wait_until_nodes(&other, "/lock", 3).await;
    let line = path::sequential_in_order(nodes(&other, "/lock").await);
    let (b_node, c_node) = (format!("/lock/{}", line[1]), format!("/lock/{}", line[2]));

    let mut from = 0;
    for round in 1..=2 {
        assert_eq!(revoke(&other, &grant.node).await, Ok(Revocation::Requested));
        let (i, heard) = a_events.wait_for(from, WAIT, revocation_requested).await;
        assert_eq!(heard, LockEvent::RevocationRequested { participant: "a".into(), node: grant.node.clone() });
        from = i + 1;
        let heard = a_events.snapshot().into_iter().filter(revocation_requested).count();
        assert_eq!(heard, round, "one event per request");
        grant.guarded_write(&a, vec![]).await.expect("a revocation request does not end the grant");
    }
    assert_eq!(revoke(&other, &c_node).await, Ok(Revocation::Requested));
    assert_eq!(revoke(&other, &b_node).await, Ok(Revocation::Requested));
    let (_, heard) = b_events.wait_for(0, WAIT, revocation_requested).await;
    assert_eq!(heard, LockEvent::RevocationRequested { participant: "b".into(), node: b_node.clone() });
    assert!(!c_events.snapshot().iter().any(revocation_requested), "c is not revocable: {:?}", c_events.snapshot());
    assert_eq!(nodes(&other, "/lock").await.len(), 3, "nobody left the line");

    holder_a.send(Release).await.expect("actor").expect("release");
    let b_grant = b_waits.await.expect("actor").expect("b holds after a's release");
    assert_eq!(b_grant.node, b_node);
    b_grant.guarded_write(&b, vec![]).await.expect("b's grant stands, revocation request and all");
    assert_eq!(revoke(&other, &grant.node).await, Ok(Revocation::NoSuchNode));
    assert!(matches!(revoke(&other, "no-slash").await, Err(LockError::ZooKeeper(Error::InvalidPath { .. }))));
    waiter_b.send(Release).await.expect("actor").expect("b releases");
    c_waits.await.expect("actor").expect("c holds last");
}

/// Row "revocation requested while cut off": the request is written while the holder's
/// connection is down; the holder hears it once back, on the same session, still holding.
#[actix_rt::test]
async fn a_revocation_requested_while_the_holder_is_cut_off_is_heard_once_back() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("revoke-cut-off");
    let Proxied { proxy, session: a, observer: other } =
        proxied(&zk.connect_string(), &root, Duration::from_secs(10)).await;
    let config = LockConfig::new("/lock").with_participant_id("a").with_policy(ConnectionPolicy::ExpiryOnly);
    let (lock, events) = holder(&a, config.revocable());
    let grant = lock.send(Acquire::default()).await.expect("actor").expect("a holds");
    proxy.blackhole();
    assert_eq!(revoke(&other, &grant.node).await, Ok(Revocation::Requested));
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    assert!(!events.snapshot().iter().any(revocation_requested), "heard through a blackhole?");
    proxy.reset();
    proxy.heal();
    let (_, heard) = events.wait_for(0, WAIT, revocation_requested).await;
    assert_eq!(heard, LockEvent::RevocationRequested { participant: "a".into(), node: grant.node.clone() });
    assert_eq!(a.session().await.expect("session").generation, 1, "the same session");
    grant.guarded_write(&a, vec![]).await.expect("still the holder");
    lock.send(Release).await.expect("actor").expect("release");
}

/// Row "revocation requested" after the waiter stood in line again: a revocable waiter asked
/// once, whose session then expires, hears a request to its new node too (the new node starts
/// at version 0 again, and a report kept by version alone took the second request for the
/// first).
#[actix_rt::test]
async fn a_waiter_in_line_again_after_an_expiry_hears_a_new_revocation_request() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("revoke-again");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let (a, other) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let b = session_with_timeout(&links.connect_string(), &root, Duration::from_secs(4)).await;
    let (holder_a, _) = holder(&a, LockConfig::new("/lock").with_participant_id("a"));
    let (waiter_b, b_events) = holder(&b, LockConfig::new("/lock").with_participant_id("b").revocable());
    holder_a.send(Acquire::default()).await.expect("actor").expect("a holds");
    let b_waits = waiter_b.send(Acquire { timeout: Some(Duration::from_secs(60)) });
    wait_until_nodes(&other, "/lock", 2).await;
    let first = format!("/lock/{}", path::sequential_in_order(nodes(&other, "/lock").await)[1]);
    assert_eq!(revoke(&other, &first).await, Ok(Revocation::Requested));
    let (i, _) = b_events.wait_for(0, WAIT, revocation_requested).await;

    let info = b.session().await.expect("b's session").info;
    links.blackhole();
    expire_session(&zk.connect_string(), &info).await.expect("expire b's session");
    links.heal();
    let deadline = std::time::Instant::now() + WAIT;
    let second = loop {
        let line = path::sequential_in_order(nodes(&other, "/lock").await);
        if line.len() == 2 && format!("/lock/{}", line[1]) != first {
            break format!("/lock/{}", line[1]);
        }
        assert!(std::time::Instant::now() < deadline, "b never stood in line again: {line:?}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(revoke(&other, &second).await, Ok(Revocation::Requested));
    let (_, heard) = b_events.wait_for(i + 1, WAIT, revocation_requested).await;
    assert_eq!(heard, LockEvent::RevocationRequested { participant: "b".into(), node: second });
    holder_a.send(Release).await.expect("actor").expect("a releases");
    b_waits.await.expect("actor").expect("b holds after a");
}

/// Who is inside a critical section guarded by one shared handle, and the most seen at once.
#[derive(Clone, Default)]
struct Inside {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    rounds: Arc<AtomicUsize>,
}

impl Inside {
    async fn hold(&self, token: FencingToken, tokens: &std::sync::Mutex<Vec<FencingToken>>) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokens.lock().expect("tokens").push(token);
        // Long enough for a second task that shares the grant to be inside too.
        actix_rt::time::sleep(Duration::from_millis(20)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        self.rounds.fetch_add(1, Ordering::SeqCst);
    }
}

/// Regression (issue 39, item 6): the natural actix-web design, one `LockHandle` in the app
/// state used by every request, let two concurrent requests hold the lock at once (the second
/// got the first's grant: re-entrancy per participant). Tasks that share a handle now exclude
/// each other: four tasks, ten rounds each, never two inside, and every round a new grant.
#[actix_rt::test]
async fn tasks_sharing_one_handle_exclude_each_other() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("lock-shared-handle");
    let s = session_at(&zk.connect_string(), &root).await;
    let lock = LockHandle::start(s.clone(), LockConfig::new("/l")).expect("lock");
    let inside = Inside::default();
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (lock, inside, tokens) = (lock.clone(), inside.clone(), tokens.clone());
            actix_rt::spawn(async move {
                for _ in 0..10 {
                    let grant = lock.acquire(Some(WAIT)).await.expect("acquired");
                    inside.hold(grant.token, &tokens).await;
                    lock.release().await.expect("released");
                }
            })
        })
        .collect();
    for task in tasks {
        bounded("a task's rounds", task).await.expect("task");
    }
    assert_eq!(inside.rounds.load(Ordering::SeqCst), 40);
    assert_eq!(inside.most.load(Ordering::SeqCst), 1, "two tasks held the lock at once");
    let tokens = tokens.lock().expect("tokens").clone();
    let mut distinct = tokens.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 40, "every round is a grant of its own: {tokens:?}");
    lock.stop().await;
    s.close().await;
}

/// The control for the test above: re-entrancy asked for explicitly shares the grant, and the
/// check sees two inside. Also the guard: dropped, it releases, and the task waiting on the
/// same handle gets a new grant.
#[actix_rt::test]
async fn an_explicit_reentrant_acquire_shares_the_grant_and_a_dropped_guard_releases() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("lock-reentrant-guard");
    let s = session_at(&zk.connect_string(), &root).await;
    let lock = LockHandle::start(s.clone(), LockConfig::new("/l")).expect("lock");
    let inside = Inside::default();
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let grant = lock.acquire(Some(WAIT)).await.expect("acquired");
    let nested = {
        let (lock, inside, tokens) = (lock.clone(), inside.clone(), tokens.clone());
        actix_rt::spawn(async move {
            let again = lock.acquire_reentrant(Some(WAIT)).await.expect("re-entrant");
            inside.hold(again.token, &tokens).await;
            again
        })
    };
    inside.hold(grant.token, &tokens).await;
    let again = bounded("the nested acquire", nested).await.expect("task");
    assert_eq!(again, grant, "the same grant");
    assert_eq!(inside.most.load(Ordering::SeqCst), 2, "the control: the check sees a shared grant");
    lock.release().await.expect("one release ends it");

    let guard = lock.lock(Some(WAIT)).await.expect("locked");
    let waiting = {
        let lock = lock.clone();
        actix_rt::spawn(async move { lock.lock(Some(WAIT)).await.map(|guard| guard.token) })
    };
    actix_rt::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "the second task waits while the guard is held");
    assert!(lock.try_acquire().await.expect("try").is_none(), "busy for a third task too");
    let first = guard.token;
    drop(guard);
    let second = bounded("the waiting task's lock", waiting).await.expect("task").expect("locked");
    assert!(second > first, "a new grant after the dropped guard: {first:?} then {second:?}");
    wait_until_nodes(&s, "/l", 0).await;
    s.close().await;
}
