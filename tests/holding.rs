//! What every holder (lock, semaphore, election) promises in the races and faults that once broke
//! it, against a real ZooKeeper. Each test says which defect it guards;
//! the holder core's own unit tests (`src/recipe/holder.rs`) replay the same races without a
//! server.
#![cfg(feature = "testkit")]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::election::{self, ElectionActor, ElectionConfig, ElectionEvent};
use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{ClientLinks, Direction, TestZooKeeper, ZkServer, expire_session, unique_root, wchp};
use actix_zookeeper::{Acl, Permission};
use common::*;

const WAIT: Duration = Duration::from_secs(20);

/// Children of `dir`, a missing directory counting as empty.
async fn nodes(session: &SessionHandle, dir: &str) -> Vec<String> {
    match session.children(dir).await {
        Ok(children) => children.names,
        Err(Error::NoNode { .. }) => Vec::new(),
        Err(err) => panic!("listing {dir}: {err}"),
    }
}

/// Regression: a withdrawal (release, resign, timeout) while the first create is in flight on a
/// directory that does not exist yet was never answered: the contender looked for its node in a
/// directory that was not there, every 100 ms, forever.
#[actix_rt::test]
async fn a_withdrawal_while_the_first_create_meets_a_missing_directory_is_answered() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("missing-dir");
    let s = session_at(&zk.connect_string(), &root).await;
    for round in 0..5 {
        let dir = format!("/lock-{round}/a/b");
        let lock = LockActor::new(s.clone(), LockConfig::new(dir.clone())).start();
        // Both are queued before the actor runs: the release meets the create in flight.
        let acquiring = lock.send(Acquire::default());
        let released = lock.send(Release);
        let released = bounded("the lock's release is answered", released).await.expect("actor");
        assert_eq!(released, Ok(()), "round {round}");
        let acquired = bounded("the acquire is answered", acquiring).await.expect("actor");
        assert!(matches!(acquired, Err(LockError::Cancelled { .. })), "round {round}: {acquired:?}");

        let dir = format!("/sem-{round}/a");
        let semaphore = SemaphoreActor::new(s.clone(), SemaphoreConfig::new(dir.clone(), 2)).start();
        let acquiring = semaphore.send(Acquire::default());
        let released = semaphore.send(Release);
        bounded("the semaphore's release is answered", released).await.expect("actor").expect("release");
        let _ = bounded("the semaphore's acquire is answered", acquiring).await.expect("actor");

        let dir = format!("/election-{round}/a");
        let participant = ElectionActor::new(s.clone(), ElectionConfig::new(dir.clone())).start();
        let resigned = participant.send(election::Resign { requeue: false });
        bounded("the resign is answered", resigned).await.expect("actor").expect("resign");

        let timed = LockActor::new(s.clone(), LockConfig::new(format!("/timed-{round}/a"))).start();
        let acquired = timed.send(Acquire { timeout: Some(Duration::from_millis(1)) });
        let acquired = bounded("a 1 ms acquire is answered", acquired).await.expect("actor");
        assert!(matches!(acquired, Err(LockError::Timeout { .. }) | Ok(_)), "round {round}: {acquired:?}");
    }
    // Nothing was left behind anywhere.
    for dir in ["/lock-4/a/b", "/sem-4/a/leases", "/sem-4/a/locks", "/election-4/a", "/timed-4/a"] {
        wait_until_async(&format!("{dir} empty"), || async { nodes(&s, dir).await.is_empty() }).await;
    }
    s.close().await;
}

/// Regression: a release that meets a session expiry (sent while the client cannot yet know the
/// session is gone) was answered `Ok` and told as `Released`, although the server, not our
/// delete, removed the node: the holder had lost the lock before it let go.
#[actix_rt::test]
async fn a_release_that_meets_an_expiry_is_answered_lost_not_released() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("release-expired");
    let s = session_with_timeout(&links.connect_string(), &root, Duration::from_secs(2)).await;
    // Expiry-only, so the disconnect alone does not end the grant first.
    let config = LockConfig::new("/l").with_policy(ConnectionPolicy::ExpiryOnly);
    let lock = LockActor::new(s.clone(), config).start();
    let events = Recorded::<LockEvent>::start();
    lock.do_send(Subscribe { recipient: events.recipient.clone() });
    let grant = lock.send(Acquire::default()).await.expect("actor").expect("acquire");

    links.blackhole();
    let info = s.session().await.expect("session").info;
    expire_session(&zk.connect_string(), &info).await.expect("expire on the server");
    let released = lock.send(Release);
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    links.heal();

    let released = bounded("the release is answered", released).await.expect("actor");
    assert_eq!(released, Err(LockError::Lost { dir: "/l".into(), reason: LockLostReason::SessionExpired }));
    let (_, lost) = events.wait_for(0, WAIT, |e| matches!(e, LockEvent::Lost { .. })).await;
    assert!(
        matches!(&lost, LockEvent::Lost { token, reason: LockLostReason::SessionExpired, .. } if *token == grant.token),
        "{lost:?}"
    );
    assert!(
        !events.snapshot().iter().any(|e| matches!(e, LockEvent::Released { .. })),
        "told Released for a node the server deleted: {:?}",
        events.snapshot()
    );
    s.close().await;
}

/// Regression: a release sent its delete before telling the contender to stand down; a contender
/// that heard of the deletion first reported it as somebody else's (a spurious `Lost`), about one
/// release in 300.
#[actix_rt::test]
async fn many_releases_never_report_a_loss() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("release-race");
    let sessions = [session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await];
    let losses = Arc::new(AtomicUsize::new(0));
    // Busy threads, as in a loaded CI run: the race needs the releasing thread to be descheduled
    // between its two steps.
    let busy = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let spinners: Vec<_> = (0..3)
        .map(|_| {
            let busy = busy.clone();
            std::thread::spawn(move || {
                while busy.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let mut workers = Vec::new();
    for (i, s) in sessions.iter().enumerate() {
        // One lock per worker: nobody waits, so every cycle is a grant and a release.
        let lock = LockActor::new(s.clone(), LockConfig::new(format!("/l{i}"))).start();
        let events = Recorded::<LockEvent>::start();
        lock.do_send(Subscribe { recipient: events.recipient.clone() });
        let losses = losses.clone();
        workers.push(actix_rt::spawn(async move {
            for _ in 0..rounds(400) {
                lock.send(Acquire::default()).await.expect("actor").expect("acquire");
                lock.send(Release).await.expect("actor").expect("release");
            }
            actix_rt::time::sleep(Duration::from_millis(300)).await;
            let lost: Vec<_> = events.snapshot().into_iter().filter(|e| matches!(e, LockEvent::Lost { .. })).collect();
            losses.fetch_add(lost.len(), Ordering::SeqCst);
        }));
    }
    for worker in workers {
        worker.await.expect("worker");
    }
    busy.store(false, Ordering::Relaxed);
    for spinner in spinners {
        spinner.join().expect("spinner");
    }
    assert_eq!(losses.load(Ordering::SeqCst), 0, "a release was reported as a loss");
    for s in sessions {
        s.close().await;
    }
}

/// `n` rounds, times `ZK_SOAK` when set.
fn rounds(n: usize) -> usize {
    n * std::env::var("ZK_SOAK").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}

/// Regression: a grant handed out in the moment its session expires must be alive when
/// handed out, or be followed by `Lost`. A grant computed from replies of a session that had
/// just expired was handed out as if held, and a semaphore whose guard reported its loss after
/// the lease was held withdrew the lease without a word. The check: after every round, a
/// participant that was answered `Ok` and told nothing since must still own its node. The rounds
/// are counted by how their grant turned out: the race this guards (a grant handed out on the
/// session that was expiring, then reported lost) must have happened at least once, else the
/// check held for no grant that mattered. (The take-over that expires the session takes
/// 0.1–0.6 s, the delete one round trip: the waiter is mostly granted on the expiring session.)
#[actix_rt::test]
async fn grants_handed_out_around_an_expiry_are_alive_or_reported_lost() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("grant-expiry");
    let observer = session_at(&zk.connect_string(), &root).await;
    let mut violations = Vec::new();
    let mut granted_rounds = 0;
    let (mut reported_lost, mut alive) = (0, 0);
    for round in 0..rounds(12) {
        for semaphore in [false, true] {
            let dir = format!("/r{round}-{semaphore}");
            let a = session_with_timeout(&zk.connect_string(), &root, Duration::from_secs(2)).await;
            let b = session_with_timeout(&zk.connect_string(), &root, Duration::from_secs(2)).await;
            let (holder, waiter, subscribe): (Recipient<Acquire>, Recipient<Acquire>, Recipient<Subscribe<LockEvent>>) =
                if semaphore {
                    let waiter = SemaphoreActor::new(b.clone(), SemaphoreConfig::new(dir.clone(), 1)).start();
                    (
                        SemaphoreActor::new(a.clone(), SemaphoreConfig::new(dir.clone(), 1)).start().recipient(),
                        waiter.clone().recipient(),
                        waiter.recipient(),
                    )
                } else {
                    let waiter = LockActor::new(b.clone(), LockConfig::new(dir.clone())).start();
                    (
                        LockActor::new(a.clone(), LockConfig::new(dir.clone())).start().recipient(),
                        waiter.clone().recipient(),
                        waiter.recipient(),
                    )
                };
            let events = Recorded::<LockEvent>::start();
            subscribe.do_send(Subscribe { recipient: events.recipient.clone() });
            let first = holder.send(Acquire::default()).await.expect("actor").expect("holder");
            let waiting = actix_rt::spawn(waiter.send(Acquire { timeout: Some(Duration::from_secs(15)) }));
            let leases = if semaphore { format!("{dir}/leases") } else { dir.clone() };
            wait_until_async("the waiter stands in line", || async { nodes(&observer, &leases).await.len() == 2 })
                .await;
            // The holder's node goes and the waiter's session expires in the same moment.
            let info = b.session().await.expect("session").info;
            let connect = zk.connect_string();
            let (freed, expired) = futures::join!(observer.delete(&first.node, None), expire_session(&connect, &info));
            freed.expect("free the grant");
            expired.expect("expire the waiter's session");
            let outcome = waiting.await.expect("task").expect("actor");
            if let Ok(grant) = outcome {
                granted_rounds += 1;
                // Alive when handed out means: on the waiter's current session, or reported lost
                // (the client may hear of the expiry a while after the server ended the session).
                let deadline = Instant::now() + Duration::from_secs(5);
                loop {
                    let owner = observer.exists(&grant.node).await.expect("exists").map(|stat| stat.ephemeral_owner);
                    // No session while the waiter's is being rebuilt.
                    let current = b.session().await.map(|now| now.session_id.0);
                    let told_lost = events
                        .snapshot()
                        .iter()
                        .any(|e| matches!(e, LockEvent::Lost { token, .. } if *token == grant.token));
                    if told_lost {
                        reported_lost += 1;
                        break;
                    }
                    if owner.is_some() && owner == current {
                        alive += 1;
                        break;
                    }
                    if Instant::now() > deadline {
                        violations
                            .push(format!("round {round} semaphore={semaphore}: {} is gone ({owner:?})", grant.node));
                        break;
                    }
                    actix_rt::time::sleep(Duration::from_millis(100)).await;
                }
            }
            a.close().await;
            b.close().await;
        }
    }
    println!("{granted_rounds} grants were handed out around an expiry: {reported_lost} reported lost, {alive} alive");
    assert!(violations.is_empty(), "dead grants handed out: {violations:#?}");
    assert!(
        reported_lost > 0,
        "no round handed out a grant on the expiring session and reported it lost \
         ({granted_rounds} granted, {alive} alive): the race was never run"
    );
    observer.close().await;
}

/// A final error ends participation once: a participant that may create in an election's
/// directory but not read it reports `ElectionFailed` naming the missing permission, and asks
/// nothing more.
#[actix_rt::test]
async fn an_unreadable_election_fails_once_and_stops_asking() {
    init_tracing();
    // A server of its own: its request counter counts this test's requests only.
    let server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root("no-read");
    let s = session_at(&server.connect_string(), &root).await;
    let create_and_delete_only = vec![Acl::new_const(Permission::CREATE | Permission::DELETE, "world", "anyone")];
    s.request(
        actix_zookeeper::session::requests::Create::new("/e", "", CreateMode::Persistent)
            .with_acl(create_and_delete_only),
    )
    .await
    .expect("an election directory nobody may read");
    let participant = ElectionActor::new(s.clone(), ElectionConfig::new("/e")).start();
    let events = Recorded::<ElectionEvent>::start();
    participant.do_send(election::Subscribe { recipient: events.recipient.clone() });
    let (_, failed) = events.wait_for(0, WAIT, |e| matches!(e, ElectionEvent::ElectionFailed { .. })).await;
    assert!(
        matches!(&failed, ElectionEvent::ElectionFailed { error: Error::NoAuth { .. } }),
        "the failure names the missing permission: {failed:?}"
    );
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let before = packets_received(&server.connect_string());
    actix_rt::time::sleep(Duration::from_secs(2)).await;
    let sent = packets_received(&server.connect_string()) - before;
    // Pings (every third of the session timeout) and the four-letter words themselves only.
    assert!(sent <= 8, "the participant kept asking after a final error: {sent} packets in 2 s");
    s.close().await;
}

/// Regression: a watch set on the node ahead when that node was already gone (an `exists` watch on
/// a missing path) stayed on the server and in every reconnect's `SetWatches` forever, since
/// sequential names never come back. The waiter's requests are slowed on their way to the server
/// so that the node ahead goes between the waiter's listing and its watch.
#[actix_rt::test]
async fn a_waiter_leaves_no_watch_on_a_node_that_was_gone_when_it_looked() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("gone-ahead");
    let direct = session_at(&zk.connect_string(), &root).await;
    let slow = session_at(&links.connect_string(), &root).await;
    let holder = LockActor::new(direct.clone(), LockConfig::new("/l")).start();
    let waiter = LockActor::new(slow.clone(), LockConfig::new("/l")).start();
    let grant = holder.send(Acquire::default()).await.expect("actor").expect("holder");

    links.proxy(0).set_latency(Direction::Upstream, Duration::from_millis(1000));
    let waiting = actix_rt::spawn(waiter.send(Acquire { timeout: Some(Duration::from_secs(15)) }));
    // The waiter's node is there: its listing is on the way back, its watch request not yet sent
    // (it reaches the server a second after it is sent).
    let deadline = Instant::now() + WAIT;
    while nodes(&direct, "/l").await.len() < 2 {
        assert!(Instant::now() < deadline, "the waiter's node never appeared");
    }
    // Its listing, sent right behind the create, is read by now; its watch is a second away.
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    direct.delete(&grant.node, None).await.expect("the node ahead goes");
    bounded("the waiter gets the lock", waiting).await.expect("task").expect("actor").expect("waiter");
    links.proxy(0).set_latency(Direction::Upstream, Duration::ZERO);

    let watches = wchp(&zk.connect_string()).expect("wchp");
    let ours: Vec<&str> = watches.lines().map(str::trim).filter(|line| line.starts_with(&root)).collect();
    let mut stale = Vec::new();
    for path in ours {
        let relative = &path[root.len()..];
        if direct.exists(relative).await.expect("exists").is_none() {
            stale.push(path.to_string());
        }
    }
    assert!(stale.is_empty(), "watches left on paths that are gone: {stale:?}");
    slow.close().await;
    direct.close().await;
}

/// Regression, forced: a grant computed after its session expired was handed out as if held.
/// Here the waiter's thread is held up while the node ahead goes and then its
/// session expires, so that its contender computes the grant (from the deletion of the node
/// ahead) after the session that owns its node has ended. The grant must not be handed out: the
/// waiter stands in line again on its new session and is granted there.
#[actix_rt::test]
async fn a_grant_computed_after_its_session_expired_is_not_handed_out() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("stale-grant");
    let observer = session_at(&zk.connect_string(), &root).await;
    let (h, w) = (
        session_with_timeout(&zk.connect_string(), &root, Duration::from_secs(2)).await,
        session_with_timeout(&zk.connect_string(), &root, Duration::from_secs(2)).await,
    );
    let holder = LockActor::new(h.clone(), LockConfig::new("/l")).start();
    let waiter = LockActor::new(w.clone(), LockConfig::new("/l")).start();
    let events = Recorded::<LockEvent>::start();
    waiter.do_send(Subscribe { recipient: events.recipient.clone() });
    let first = holder.send(Acquire::default()).await.expect("actor").expect("holder");
    let waiting = waiter.send(Acquire { timeout: Some(Duration::from_secs(20)) });
    wait_until_async("the waiter stands in line", || async { nodes(&observer, "/l").await.len() == 2 }).await;
    actix_rt::time::sleep(Duration::from_millis(300)).await; // its watch on the node ahead is set

    let old = w.session().await.expect("session");
    let (connect, info, node, deleter) = (zk.connect_string(), old.info.clone(), first.node.clone(), observer.clone());
    let faults = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async move {
            deleter.delete(&node, None).await.expect("the node ahead goes");
            tokio::time::sleep(Duration::from_millis(300)).await; // the waiter's client hears of it
            expire_session(&connect, &info).await.expect("expire the waiter's session");
        });
    });
    // This thread runs the waiter's actors: while it sleeps, the deletion and the expiry queue up.
    std::thread::sleep(Duration::from_secs(3));
    faults.join().expect("faults");

    let grant = bounded("the waiter is answered", waiting).await.expect("actor").expect("the waiter acquires");
    let now = w.session().await.expect("session");
    assert_ne!(now.session_id, old.session_id, "the waiter's session was rebuilt");
    let owner = observer.exists(&grant.node).await.expect("exists").map(|stat| stat.ephemeral_owner);
    assert_eq!(
        owner,
        Some(now.session_id.0),
        "handed a grant whose node died with the old session (events: {:?})",
        events.snapshot()
    );
    for s in [observer, h, w] {
        s.close().await;
    }
}

/// Regression: a final error was retried forever. A lock whose create was lost with the connection
/// looks for its node by listing the directory; when that listing is refused (`NoAuth`: the
/// participant may create in the directory but not read it) it asked again every 100 ms for as
/// long as it lived, and the acquire never ended.
#[actix_rt::test]
async fn a_lock_whose_directory_cannot_be_read_fails_once_and_stops_asking() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let links = ClientLinks::to([server.connect_string()]).expect("proxy");
    let root = unique_root("no-read-lock");
    let admin = session_at(&server.connect_string(), &root).await;
    let create_and_delete_only = vec![Acl::new_const(Permission::CREATE | Permission::DELETE, "world", "anyone")];
    admin
        .request(
            actix_zookeeper::session::requests::Create::new("/l", "", CreateMode::Persistent)
                .with_acl(create_and_delete_only),
        )
        .await
        .expect("a lock directory nobody may read");
    let s = session_at(&links.connect_string(), &root).await;
    let lock = LockActor::new(s.clone(), LockConfig::new("/l")).start();
    // The create and its listing go into a dead link: their outcome is unknown, and finding out
    // means listing the directory.
    links.blackhole();
    let acquiring = lock.send(Acquire::default());
    actix_rt::time::sleep(Duration::from_secs(4)).await;
    links.heal();
    let outcome = bounded("the acquire ends", acquiring).await.expect("actor");
    assert!(
        matches!(&outcome, Err(LockError::ZooKeeper(Error::NoAuth { path })) if path == "/l"),
        "a typed error naming the directory: {outcome:?}"
    );
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let before = packets_received(&server.connect_string());
    actix_rt::time::sleep(Duration::from_secs(2)).await;
    let sent = packets_received(&server.connect_string()) - before;
    // Two sessions' pings and the counter's own reads come to about 5; asking again every 100 ms,
    // as before the fix, adds 20.
    assert!(sent <= 10, "the lock kept asking after a final error: {sent} packets in 2 s");
    s.close().await;
    admin.close().await;
}

/// Regression, forced: the semaphore's guard reports its loss just after the lease was granted
/// (both reports waiting in the actor's mailbox, the lease's first). The lease was then withdrawn
/// without a `Lost` event or an answer: the caller believed it held a lease that was gone. The
/// waiter's replies are slowed, and its thread held up, so that the lease's listing and the
/// guard's deletion are handled in that order.
#[actix_rt::test]
async fn a_guard_lost_after_the_lease_was_granted_does_not_end_the_lease_silently() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("guard-after-lease");
    let observer = session_at(&zk.connect_string(), &root).await;
    let h = session_at(&zk.connect_string(), &root).await;
    let w = session_with_timeout(&links.connect_string(), &root, Duration::from_secs(10)).await;
    let holder = SemaphoreActor::new(h.clone(), SemaphoreConfig::new("/sem", 1)).start();
    let waiter = SemaphoreActor::new(w.clone(), SemaphoreConfig::new("/sem", 1)).start();
    let events = Recorded::<LockEvent>::start();
    waiter.do_send(Subscribe { recipient: events.recipient.clone() });
    let first = holder.send(Acquire::default()).await.expect("actor").expect("holder");
    let waiting = actix_rt::spawn(waiter.send(Acquire { timeout: Some(Duration::from_secs(20)) }));
    wait_until_async("the waiter holds the guard and waits", || async {
        nodes(&observer, "/sem/leases").await.len() == 2 && nodes(&observer, "/sem/locks").await.len() == 1
    })
    .await;
    actix_rt::time::sleep(Duration::from_millis(300)).await; // its children watch is set
    let guard = format!("/sem/locks/{}", nodes(&observer, "/sem/locks").await[0]);

    links.proxy(0).set_latency(Direction::Downstream, Duration::from_millis(500));
    let t0 = Instant::now();
    // t0: a lease frees up; the waiter hears of it at ~500 ms and has its listing back at ~1000.
    observer.delete(&first.node, None).await.expect("free the lease");
    // ~600: the waiter's guard goes; it hears of it at ~1100.
    actix_rt::time::sleep(Duration::from_millis(600).saturating_sub(t0.elapsed())).await;
    observer.delete(&guard, None).await.expect("delete the waiter's guard");
    // ~900 to ~1600: the waiter's thread is busy; both news wait, the listing's first.
    actix_rt::time::sleep(Duration::from_millis(900).saturating_sub(t0.elapsed())).await;
    std::thread::sleep(Duration::from_millis(700));
    links.proxy(0).set_latency(Direction::Downstream, Duration::ZERO);

    let lease = bounded("the waiter is answered", waiting).await.expect("task").expect("actor").expect("lease");
    actix_rt::time::sleep(Duration::from_millis(1000)).await;
    let still_there = observer.exists(&lease.node).await.expect("exists").is_some();
    let told_lost =
        events.snapshot().iter().any(|e| matches!(e, LockEvent::Lost { token, .. } if *token == lease.token));
    assert!(
        still_there || told_lost,
        "the lease {} is gone and nobody was told (events: {:?})",
        lease.node,
        events.snapshot()
    );
    for s in [observer, h, w] {
        s.close().await;
    }
}
