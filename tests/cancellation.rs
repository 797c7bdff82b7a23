//! Cancellation against a real ZooKeeper: every future of the public API dropped at a random
//! moment leaves nothing behind (no node, no watch, no grant held for nobody) and the next call on
//! the same handle works at once. Each round ends with the server-side leftover check
//! ([`settled`]), whose control is `the_leftover_check_catches_a_node_and_a_watch_left_behind`.
#![cfg(feature = "testkit")]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::recipe::FencingToken;
use actix_zookeeper::testkit::{TestZooKeeper, unique_root};
use common::*;

async fn session_at(connect: &str, root: &str) -> SessionHandle {
    let cfg = SessionConfig::new(connect).with_chroot(root).with_session_timeout(Duration::from_secs(4));
    connected(cfg).await.0
}

/// A small random source for drop delays; the seed is printed so a failing run can be replayed
/// (`CANCEL_SEED`).
struct Rng(u64);

impl Rng {
    fn seeded(test: &str) -> Rng {
        let seed = std::env::var("CANCEL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
        });
        println!("{test}: CANCEL_SEED={seed}");
        Rng(seed | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    /// A delay between nothing and a few round trips on loopback.
    fn drop_delay(&mut self) -> Duration {
        Duration::from_micros(self.below(4_000))
    }
}

/// Every ephemeral node under `dir`, at any depth (contender nodes, leases, guards, claims).
async fn ephemerals_under(s: &SessionHandle, dir: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(path) = todo.pop() {
        for name in children(s, &path).await {
            let child = format!("{}/{name}", path.trim_end_matches('/'));
            match s.exists(&child).await {
                Ok(Some(stat)) if stat.ephemeral_owner != 0 => found.push(child),
                Ok(Some(_)) => todo.push(child),
                Ok(None) => {}
                Err(e) => panic!("{child}: {e}"),
            }
        }
    }
    found
}

/// The server's count of watches (`mntr`), when the test has a server of its own.
fn watch_count(zk: &TestZooKeeper) -> Option<u64> {
    let TestZooKeeper::Embedded(server) = zk else { return None };
    let mntr = actix_zookeeper::testkit::mntr(&server.address()).expect("mntr");
    mntr.lines().find_map(|line| line.strip_prefix("zk_watch_count")?.trim().parse().ok())
}

/// The leftover check: within a few seconds, nothing ephemeral stands under `dir` but `held`, and
/// the server holds no more watches than `watches` (the count before the test's recipes ran).
/// `Err` says what stayed.
async fn settled(
    s: &SessionHandle,
    zk: &TestZooKeeper,
    dir: &str,
    held: &[String],
    watches: Option<u64>,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let extra: Vec<_> = ephemerals_under(s, dir).await.into_iter().filter(|n| !held.contains(n)).collect();
        let now = watch_count(zk);
        let watch_left = matches!((watches, now), (Some(before), Some(now)) if now > before);
        if extra.is_empty() && !watch_left {
            return Ok(());
        }
        if Instant::now() > deadline {
            let watched = match zk {
                TestZooKeeper::Embedded(server) => {
                    actix_zookeeper::testkit::wchp(&server.address()).unwrap_or_default()
                }
                TestZooKeeper::External(_) => String::new(),
            };
            return Err(format!("left behind: nodes {extra:?}, watches {now:?} (before: {watches:?}) {watched}"));
        }
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The control: a node and a watch left behind are both caught, and gone they pass.
#[actix_rt::test]
async fn the_leftover_check_catches_a_node_and_a_watch_left_behind() {
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cancel-control");
    let s = session_at(&zk.connect_string(), &root).await;
    s.ensure_path("/l").await.expect("dir");
    let before = watch_count(&zk);
    assert_eq!(settled(&s, &zk, "/l", &[], before).await, Ok(()));

    let stray = s.create("/l/stray-", "", CreateMode::EphemeralSequential).await.expect("a stray node").path;
    let caught = settled(&s, &zk, "/l", &[], before).await;
    assert!(caught.as_ref().is_err_and(|e| e.contains("stray")), "{caught:?}");
    assert_eq!(settled(&s, &zk, "/l", std::slice::from_ref(&stray), before).await, Ok(()), "held nodes are fine");
    s.delete(&stray, None).await.expect("delete");

    if before.is_some() {
        // An exists watch on a missing node stays until the node is created.
        let (watcher, _) = (Recorded::<WatchEvent>::start(), ());
        s.exists_watched("/l/missing", watcher.recipient.clone()).await.expect("exists");
        let caught = settled(&s, &zk, "/l", &[], before).await;
        assert!(caught.as_ref().is_err_and(|e| e.contains("watches")), "{caught:?}");
        s.create("/l/missing", "", CreateMode::Persistent).await.expect("create fires the watch");
        assert_eq!(settled(&s, &zk, "/l", &[], before).await, Ok(()));
    }
    s.close().await;
}

/// Issue 25, defect 1: `tokio::time::timeout` around a handle's `acquire` while another session
/// holds. The attempt leaves the line when the timeout drops it (the handle's relay kept the
/// request alive before, and the node stayed until the holder let go); the next `acquire` on the
/// same handle is not `AcquireInProgress`; and the abandoned attempt is never granted.
#[actix_rt::test]
async fn an_acquire_dropped_by_a_timeout_leaves_the_line_and_the_next_one_starts_at_once() {
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cancel-timeout");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let before = watch_count(&zk);
    let holder = LockHandle::start(b.clone(), LockConfig::new("/l").with_participant_id("holder"));
    let lock = LockHandle::start(a.clone(), LockConfig::new("/l").with_participant_id("impatient"));
    let events = Recorded::<LockEvent>::start();
    lock.subscribe(events.recipient.clone());
    let held = holder.acquire(None).await.expect("the holder holds");

    for round in 0..5 {
        let got = tokio::time::timeout(Duration::from_millis(200), lock.acquire(None)).await;
        assert!(got.is_err(), "round {round}: the lock is held, the wait times out");
        settled(&a, &zk, "/l", std::slice::from_ref(&held.node), None)
            .await
            .unwrap_or_else(|e| panic!("round {round}: the dropped attempt stays in line: {e}"));
    }
    // A new wait starts at once, and is granted when the holder lets go.
    let waiting = actix_rt::spawn(lock.acquire(Some(Duration::from_secs(10))));
    wait_until_async("the new attempt in line", || async { lock.participants().await.map(|p| p.len()) == Ok(2) }).await;
    holder.release().await.expect("release");
    let grant = bounded("the new wait", waiting).await.expect("task").expect("granted");
    lock.release().await.expect("release");
    // Exactly one grant for the impatient participant: the one it received.
    let acquired: Vec<_> = events.snapshot().into_iter().filter(|e| matches!(e, LockEvent::Acquired { .. })).collect();
    assert_eq!(acquired, [LockEvent::Acquired { grant }], "nothing granted to an abandoned attempt");
    settled(&a, &zk, "/l", &[], before).await.expect("nothing left");
    a.close().await;
    b.close().await;
}

/// Issue 25, defect 2: a re-entrant `acquire` (already holding) whose future is dropped with the
/// grant in it must not give the lock back under its holder (it sent `GiveBack` with the held
/// token, and another session took the lock). Lock and semaphore.
#[actix_rt::test]
async fn a_dropped_reentrant_acquire_leaves_the_grant_with_its_holder() {
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cancel-reentrant");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let lock = LockHandle::start(a.clone(), LockConfig::new("/l"));
    let other = LockHandle::start(b.clone(), LockConfig::new("/l"));
    let pool = SemaphoreHandle::start(a.clone(), SemaphoreConfig::new("/s", 1));
    let other_pool = SemaphoreHandle::start(b.clone(), SemaphoreConfig::new("/s", 1));
    let grant = lock.acquire(None).await.expect("holds");
    let lease = pool.acquire(None).await.expect("holds a lease");
    for _ in 0..3 {
        // Sent at the call; answered at once (held already); dropped unread.
        let again = lock.acquire(None);
        let again_lease = pool.acquire(None);
        actix_rt::time::sleep(Duration::from_millis(50)).await;
        drop((again, again_lease));
    }
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(other.try_acquire().await, Ok(None), "the lock stays with its holder");
    assert!(a.exists(&grant.node).await.expect("read").is_some(), "the holder's node stays");
    let taken = tokio::time::timeout(Duration::from_millis(300), other_pool.acquire(None)).await;
    assert!(taken.is_err(), "the lease stays with its holder: {taken:?}");
    assert!(a.exists(&lease.node).await.expect("read").is_some(), "the lease node stays");
    // A re-entrant acquire that *is* read changes nothing either, and one release ends it.
    assert_eq!(lock.acquire(None).await, Ok(grant.clone()));
    lock.release().await.expect("release");
    pool.release().await.expect("release");
    other.acquire(Some(Duration::from_secs(10))).await.expect("the other takes it after the release");
    other.release().await.expect("release");
    a.close().await;
    b.close().await;
}

/// Issue 25, defect 8: `TryAcquire` says "busy" (`Ok(None)`) only once its node is deleted, as
/// docs/recipes/lock.md says: a listing made right after the answer shows the holder's node alone.
#[actix_rt::test]
async fn a_try_acquire_says_busy_only_once_its_node_is_gone() {
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cancel-try");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let holder = LockHandle::start(b.clone(), LockConfig::new("/l"));
    let trier = LockHandle::start(a.clone(), LockConfig::new("/l"));
    let held = holder.acquire(None).await.expect("holds");
    for round in 0..30 {
        assert_eq!(trier.try_acquire().await, Ok(None), "round {round}");
        let line = a.children("/l").await.expect("listing").names;
        assert_eq!(line.len(), 1, "round {round}: the try's node is still in line after its answer: {line:?}");
    }
    assert!(held.node.ends_with(&a.children("/l").await.expect("listing").names[0]));
    holder.release().await.expect("release");
    a.close().await;
    b.close().await;
}

/// One participant whose calls are dropped at random moments, against a second live participant;
/// `exclusive` for a lock (one holder).
struct Round {
    dropped_waiting: u32,
    dropped_holding: u32,
    completed: u32,
}

/// The harness for lock-shaped handles: rounds of "start `acquire` or `try_acquire`, drop it after
/// a random delay, start again", with the other participant holding in half of them. After each
/// round: the next call on the same handle works at once, the other participant can take the lock
/// (nothing left held), and [`settled`] finds nothing left. Over the run: every grant the dropping
/// participant's events announce was received by a call or given back (never one granted to an
/// attempt abandoned while someone else held).
async fn hammer_lock_shaped<H: LockShaped>(
    test: &str,
    zk: &TestZooKeeper,
    make: impl Fn(&SessionHandle) -> H,
    rounds: u32,
) -> Round {
    let root = unique_root(test);
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let before = watch_count(zk);
    let (dropper, live) = (make(&a), make(&b));
    let events = Recorded::<LockEvent>::start();
    dropper.subscribe(events.recipient.clone());
    let mut rng = Rng::seeded(test);
    let mut round = Round { dropped_waiting: 0, dropped_holding: 0, completed: 0 };
    let mut received = BTreeSet::<FencingToken>::new();
    let mut abandoned_while_held = Vec::new();
    for n in 0..rounds {
        let blocked = rng.below(2) == 0;
        let held = if blocked { Some(live.acquire_now().await.expect("the live one holds")) } else { None };
        let try_only = rng.below(3) == 0;
        let call = dropper.start(try_only);
        let delay = rng.drop_delay();
        let raced = futures::future::select(call, Box::pin(actix_rt::time::sleep(delay))).await;
        match raced {
            futures::future::Either::Left((outcome, _)) => {
                round.completed += 1;
                match outcome {
                    Ok(Some(grant)) => {
                        received.insert(grant.token);
                        dropper.release().await.expect("release what was received");
                    }
                    Ok(None) => assert!(blocked || try_only, "round {n}: a free lock's acquire answered nothing"),
                    Err(e) => panic!("round {n}: {e:?}"),
                }
            }
            futures::future::Either::Right(((), call)) => {
                drop(call);
                if blocked { round.dropped_waiting += 1 } else { round.dropped_holding += 1 }
            }
        }
        if let Some(held) = held {
            // Abandoned while someone else held: the attempt must leave the line before the lock
            // is free, so it is never granted.
            let holding = std::slice::from_ref(&held.node);
            settled(&a, zk, &root_relative(&held.node), holding, None)
                .await
                .unwrap_or_else(|e| panic!("round {n}: the dropped call stays in line: {e}"));
            abandoned_while_held.push(events.snapshot().len());
            live.release().await.expect("the live one releases");
        }
        // The next call on the same handle works at once, and nothing was left held.
        let next = dropper.acquire_within(Duration::from_secs(10)).await;
        let next = next.unwrap_or_else(|e| panic!("round {n}: the next acquire after a dropped one: {e:?}"));
        received.insert(next.token);
        dropper.release().await.expect("release");
        let other = live.acquire_within(Duration::from_secs(10)).await;
        other.unwrap_or_else(|e| panic!("round {n}: the lock was left held: {e:?}"));
        live.release().await.expect("release");
    }
    settled(&a, zk, "/", &[], before).await.unwrap_or_else(|e| panic!("after {rounds} rounds: {e}"));
    // Grants nobody received are given back at once: `Acquired` then `Released` for a token no
    // call returned. Never for an attempt abandoned while the lock was held by the other.
    let announced = events.snapshot();
    for (i, event) in announced.iter().enumerate() {
        if let LockEvent::Acquired { grant } = event {
            if !received.contains(&grant.token) {
                assert!(
                    !abandoned_while_held.contains(&i),
                    "a grant to an attempt abandoned while the lock was held: {event:?}"
                );
                let released =
                    announced[i + 1..].iter().any(|e| matches!(e, LockEvent::Released { node } if *node == grant.node));
                assert!(released, "a grant nobody received was not given back: {event:?}\n{announced:#?}");
            }
        }
    }
    a.close().await;
    b.close().await;
    round
}

/// `/l/_c_...-lock-0000000001` → `/l`; `/s/leases/_c_...` → `/s`.
fn root_relative(node: &str) -> String {
    let top = node.trim_start_matches('/').split('/').next().unwrap_or_default();
    format!("/{top}")
}

/// What the harness needs of a lock or semaphore handle.
trait LockShaped {
    fn start(&self, try_only: bool) -> futures::future::BoxFuture<'static, Result<Option<LockGrant>, LockError>>;
    fn acquire_within(&self, within: Duration) -> futures::future::BoxFuture<'static, Result<LockGrant, LockError>>;
    fn acquire_now(&self) -> futures::future::BoxFuture<'static, Result<LockGrant, LockError>> {
        self.acquire_within(Duration::from_secs(10))
    }
    fn release(&self) -> futures::future::BoxFuture<'static, Result<(), LockError>>;
    fn subscribe(&self, to: actix::Recipient<LockEvent>);
}

impl LockShaped for LockHandle {
    fn start(&self, try_only: bool) -> futures::future::BoxFuture<'static, Result<Option<LockGrant>, LockError>> {
        use futures::FutureExt;
        if try_only { Box::pin(self.try_acquire()) } else { Box::pin(self.acquire(None).map(|r| r.map(Some))) }
    }
    fn acquire_within(&self, within: Duration) -> futures::future::BoxFuture<'static, Result<LockGrant, LockError>> {
        Box::pin(self.acquire(Some(within)))
    }
    fn release(&self) -> futures::future::BoxFuture<'static, Result<(), LockError>> {
        Box::pin(LockHandle::release(self))
    }
    fn subscribe(&self, to: actix::Recipient<LockEvent>) {
        LockHandle::subscribe(self, to)
    }
}

impl LockShaped for SemaphoreHandle {
    fn start(&self, _: bool) -> futures::future::BoxFuture<'static, Result<Option<LockGrant>, LockError>> {
        use futures::FutureExt;
        Box::pin(self.acquire(None).map(|r| r.map(Some)))
    }
    fn acquire_within(&self, within: Duration) -> futures::future::BoxFuture<'static, Result<LockGrant, LockError>> {
        Box::pin(self.acquire(Some(within)))
    }
    fn release(&self) -> futures::future::BoxFuture<'static, Result<(), LockError>> {
        Box::pin(SemaphoreHandle::release(self))
    }
    fn subscribe(&self, to: actix::Recipient<LockEvent>) {
        SemaphoreHandle::subscribe(self, to)
    }
}

#[actix_rt::test]
async fn lock_calls_dropped_at_random_moments_leave_nothing_behind() {
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let round =
        hammer_lock_shaped("cancel-lock", &zk, |s| LockHandle::start(s.clone(), LockConfig::new("/l")), 40).await;
    println!(
        "lock: {} dropped while waiting, {} dropped around a free grant, {} completed",
        round.dropped_waiting, round.dropped_holding, round.completed
    );
    assert!(round.dropped_waiting > 0, "the harness dropped no call while it waited");
}

#[actix_rt::test]
async fn semaphore_calls_dropped_at_random_moments_leave_nothing_behind() {
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let make = |s: &SessionHandle| SemaphoreHandle::start(s.clone(), SemaphoreConfig::new("/s", 1));
    let round = hammer_lock_shaped("cancel-semaphore", &zk, make, 30).await;
    println!(
        "semaphore: {} dropped while waiting, {} dropped around a free grant, {} completed",
        round.dropped_waiting, round.dropped_holding, round.completed
    );
    assert!(round.dropped_waiting > 0, "the harness dropped no call while it waited");
}

// ---- actors stopped at a random moment ------------------------------------------------------

/// Stops `addr` the way a round picks: its stop message, or its last address dropped.
fn stop_one<A: actix::Actor>(addr: actix::Addr<A>, by_message: bool, stop: impl FnOnce(&actix::Addr<A>)) {
    if by_message {
        stop(&addr);
    }
    drop(addr);
}

/// Recipe actors stopped at a random moment while they work (creating, waiting, holding, leading,
/// joining, watching), by their stop message or by dropping their last address: after each round
/// nothing of theirs is left on the server (nodes or watches), and the live participant beside
/// them goes on (takes the lock, leads, joins under the same id).
#[actix_rt::test]
async fn recipe_actors_stopped_at_random_moments_leave_nothing_behind() {
    use actix::Actor;
    use actix_zookeeper::cache::{CacheActor, CacheConfig, Stop as StopCache};
    use actix_zookeeper::election::{ElectionActor, ElectionConfig, ElectionHandle, Stop as StopElection};
    use actix_zookeeper::group::{GroupConfig, GroupEvent, GroupMember, Leave};
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("stop-random");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    for dir in ["/l", "/e", "/g", "/c"] {
        a.ensure_path(dir).await.expect("dir");
    }
    let before = watch_count(&zk);
    let mut rng = Rng::seeded("stop-random");
    let other_lock = LockHandle::start(b.clone(), LockConfig::new("/l"));
    let other_leader = ElectionHandle::start(b.clone(), ElectionConfig::new("/e").with_participant_id("other"));
    for round in 0..12 {
        let by_message = rng.below(2) == 0;
        // A lock actor acquiring (with the other participant holding in half the rounds).
        let blocked = rng.below(2) == 0;
        if blocked {
            other_lock.acquire(None).await.expect("the other holds");
        }
        let lock = LockActor::new(a.clone(), LockConfig::new("/l")).start();
        lock.do_send(Acquire::default());
        // An election participant joining, next to the other one.
        let election = ElectionActor::new(a.clone(), ElectionConfig::new("/e").with_participant_id("me")).start();
        // A group member joining.
        let member = GroupMember::new(a.clone(), GroupConfig::new("/g", "me")).expect("config").start();
        // A cache setting its watch.
        let cache = CacheActor::new(a.clone(), CacheConfig::new("/c")).expect("config");
        let cache = cache.start();
        actix_rt::time::sleep(rng.drop_delay() * 4).await;
        stop_one(lock, by_message, |l| l.do_send(Release));
        stop_one(election, by_message, |e| e.do_send(StopElection));
        stop_one(member, by_message, |m| m.do_send(Leave));
        stop_one(cache, by_message, |c| c.do_send(StopCache));
        let held: Vec<String> = if blocked {
            ephemerals_under(&b, "/l").await.into_iter().filter(|n| n.starts_with("/l/")).take(1).collect()
        } else {
            Vec::new()
        };
        // The other participant's own nodes stay; nothing else may.
        let mut theirs = held.clone();
        theirs.extend(ephemerals_under(&b, "/e").await.into_iter().take(1));
        let mine_left = async {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let mut left = Vec::new();
                for dir in ["/l", "/e", "/g"] {
                    for node in ephemerals_under(&a, dir).await {
                        let owner = a.exists(&node).await.ok().flatten().map(|s| s.ephemeral_owner);
                        let ours = a.session().await.map(|s| s.session_id.0);
                        if owner.is_some() && owner == ours {
                            left.push(node);
                        }
                    }
                }
                if left.is_empty() || Instant::now() > deadline {
                    return left;
                }
                actix_rt::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let left = mine_left.await;
        assert!(left.is_empty(), "round {round} (by message: {by_message}): left behind {left:?}");
        if blocked {
            other_lock.release().await.expect("release");
        }
        // The live participants go on: the lock is free, the other leads, the id joins elsewhere.
        other_lock.acquire(Some(Duration::from_secs(10))).await.expect("the lock was left held");
        other_lock.release().await.expect("release");
        bounded("the other leads", other_leader.leadership()).await.expect("the other leads");
        let elsewhere = GroupMember::new(b.clone(), GroupConfig::new("/g", "me")).expect("config").start();
        let joined = Recorded::<GroupEvent>::start();
        elsewhere.do_send(actix_zookeeper::group::Subscribe { recipient: joined.recipient.clone() });
        joined.wait_for(0, Duration::from_secs(10), |e| matches!(e, GroupEvent::Joined { .. })).await;
        elsewhere.send(Leave).await.expect("member").expect("leave");
    }
    other_leader.stop();
    settled(&a, &zk, "/", &[], before).await.unwrap_or_else(|e| panic!("after the rounds: {e}"));
    a.close().await;
    b.close().await;
}

/// `Queue::take` and `poll` dropped at random moments (a `timeout`, a `select!`) lose no item:
/// one dropped after its removal applied puts the item back under its own name (it lost the
/// item before). Every item put is taken exactly once over the run, and nothing is left.
#[actix_rt::test]
async fn queue_takes_dropped_at_random_moments_lose_no_item() {
    use actix_zookeeper::queue::Queue;
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cancel-take");
    let s = session_at(&zk.connect_string(), &root).await;
    let queue = Queue::new(s.clone(), "/q");
    let items: Vec<Vec<u8>> = (0..60u16).map(|n| n.to_be_bytes().to_vec()).collect();
    queue.put_all(items.clone()).await.expect("put");
    let mut rng = Rng::seeded("cancel-take");
    let mut taken = Vec::new();
    let (mut dropped, mut completed) = (0, 0);
    while taken.len() < items.len() {
        let call: futures::future::LocalBoxFuture<'_, _> = if rng.below(2) == 0 {
            Box::pin(async { queue.take(Some(Duration::from_secs(5))).await.map(Some) })
        } else {
            Box::pin(queue.poll())
        };
        match futures::future::select(call, Box::pin(actix_rt::time::sleep(rng.drop_delay()))).await {
            futures::future::Either::Left((item, _)) => match item.expect("take") {
                Some(item) => {
                    taken.push(item);
                    completed += 1;
                }
                // The last items may be on their way back from a dropped take.
                None => actix_rt::time::sleep(Duration::from_millis(10)).await,
            },
            futures::future::Either::Right(_) => {
                dropped += 1;
                // A put-back is detached: let it land before the next listing.
                actix_rt::time::sleep(Duration::from_millis(5)).await;
            }
        }
        assert!(dropped < 10_000, "the harness never completes a take");
    }
    println!("{completed} takes completed, {dropped} dropped");
    assert!(dropped > 0, "the harness dropped no take");
    let mut sorted = taken.clone();
    sorted.sort();
    assert_eq!(sorted, items, "every item taken exactly once");
    assert_eq!(queue.poll().await.expect("poll"), None, "nothing left");
    s.close().await;
}

/// Election futures dropped at random moments: a dropped `leadership()` leaves the participant
/// in line as it was (it only stops waiting), a dropped `resign()` still resigns, and the next
/// call works at once. After each round exactly the participants that take part stand in line.
#[actix_rt::test]
async fn election_calls_dropped_at_random_moments_leave_nothing_behind() {
    use actix_zookeeper::election::{ElectionConfig, ElectionHandle};
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cancel-election");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let me = ElectionHandle::start(a.clone(), ElectionConfig::new("/e").with_participant_id("me"));
    let other = ElectionHandle::start(b.clone(), ElectionConfig::new("/e").with_participant_id("other"));
    let mut rng = Rng::seeded("cancel-election");
    for round in 0..20 {
        let call: futures::future::LocalBoxFuture<'_, _> = match rng.below(3) {
            0 => Box::pin(async { me.leadership().await.map(|_| ()) }),
            1 => Box::pin(me.resign_and_requeue()),
            _ => Box::pin(me.resign()),
        };
        let _ = futures::future::select(call, Box::pin(actix_rt::time::sleep(rng.drop_delay()))).await;
        // Whatever was dropped: joining again works at once, and then both stand in line once.
        bounded("a resign", me.resign()).await.expect("resign");
        bounded("a join", me.join()).await.expect("join");
        wait_until_async("both in line, once each", || async {
            let mut line = me.participants().await.unwrap_or_default();
            line.sort();
            line == ["me", "other"]
        })
        .await;
        // Someone leads.
        let leader = bounded("a leader", other.leader()).await.expect("leader");
        assert!(leader.is_some(), "round {round}: nobody leads");
    }
    me.stop();
    other.stop();
    settled(&a, &zk, "/e", &[], None).await.expect("nothing left");
    a.close().await;
    b.close().await;
}

/// Counter requests dropped at random moments: a request is sent when it is made (the actor
/// has it in its mailbox), so a dropped `AddCount` is neither lost nor applied twice: the count
/// ends at the number of adds made, and the counter answers the next request at once.
#[actix_rt::test]
async fn counter_adds_dropped_at_random_moments_apply_exactly_once() {
    use actix::Actor;
    use actix_zookeeper::counter::{AddCount, GetCount, SharedCount, SharedCountConfig};
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("cancel-counter")).await;
    let counter = SharedCount::new(s.clone(), SharedCountConfig::new("/n")).start();
    let mut rng = Rng::seeded("cancel-counter");
    let (mut dropped, mut completed) = (0, 0);
    for _ in 0..40 {
        let add = Box::pin(counter.send(AddCount { by: 1 }));
        match futures::future::select(add, Box::pin(actix_rt::time::sleep(rng.drop_delay()))).await {
            futures::future::Either::Left((answer, _)) => {
                answer.expect("actor").expect("add");
                completed += 1;
            }
            futures::future::Either::Right(_) => dropped += 1,
        }
    }
    println!("{completed} adds answered, {dropped} dropped");
    wait_until_async("every add applied once", || async {
        counter.send(GetCount).await.ok().and_then(Result::ok).is_some_and(|now| now.value == 40)
    })
    .await;
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    let now = counter.send(GetCount).await.expect("actor").expect("count");
    assert_eq!(now.value, 40, "no add applied twice");
    s.close().await;
}

/// A caller that takes over the place in line of one that went away (a raw `Addr::send`
/// dropped, the next `Acquire` right behind it) gets its own timeout: it is answered `Timeout`
/// in time, not left waiting for the holder.
#[actix_rt::test]
async fn a_caller_taking_over_an_abandoned_place_in_line_keeps_its_own_timeout() {
    use actix::Actor;
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cancel-takeover");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let holder = LockHandle::start(b.clone(), LockConfig::new("/l"));
    holder.acquire(None).await.expect("holds");
    let waiter = LockActor::new(a.clone(), LockConfig::new("/l")).start();
    for round in 0..3 {
        let first = waiter.send(Acquire::default());
        wait_until_async("the first caller in line", || async { children(&a, "/l").await.len() == 2 }).await;
        drop(first);
        let second = waiter.send(Acquire { timeout: Some(Duration::from_millis(300)) });
        let answer = bounded("the second caller's timeout", second).await.expect("actor");
        assert!(matches!(answer, Err(LockError::Timeout { .. })), "round {round}: {answer:?}");
        settled(&a, &zk, "/l", &ephemerals_under(&b, "/l").await, None).await.expect("the attempt left the line");
    }
    // The other way round: a caller without a timeout does not inherit the gone caller's.
    let first = waiter.send(Acquire { timeout: Some(Duration::from_millis(300)) });
    wait_until_async("the first caller in line", || async { children(&a, "/l").await.len() == 2 }).await;
    drop(first);
    let mut second = Box::pin(waiter.send(Acquire::default()));
    let early = tokio::time::timeout(Duration::from_millis(800), &mut second).await;
    assert!(early.is_err(), "answered before the holder let go: {early:?}");
    holder.release().await.expect("release");
    bounded("the grant", second).await.expect("actor").expect("granted once the holder let go");
    waiter.send(Release).await.expect("actor").expect("release");
    a.close().await;
    b.close().await;
}

/// A worker that acks each delivery after a short while, counting the acks answered `Ok`.
struct AckWorker {
    acked: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

impl actix::Actor for AckWorker {
    type Context = actix::Context<Self>;
}

impl actix::Handler<actix_zookeeper::queue::Delivery> for AckWorker {
    type Result = ();

    fn handle(&mut self, delivery: actix_zookeeper::queue::Delivery, ctx: &mut actix::Context<Self>) {
        use actix::{ActorFutureExt, AsyncContext, WrapFuture};
        let acked = self.acked.clone();
        let pause = Duration::from_millis(10 + u64::from(delivery.data[1] % 20));
        ctx.spawn(
            async move {
                actix_rt::time::sleep(pause).await;
                if delivery.ack().await.is_ok() {
                    acked.lock().expect("acked").push(delivery.data.clone());
                }
            }
            .into_actor(self)
            .map(|(), _, _| ()),
        );
    }
}

impl actix::Handler<actix_zookeeper::queue::Revoked> for AckWorker {
    type Result = ();

    fn handle(&mut self, _: actix_zookeeper::queue::Revoked, _: &mut actix::Context<Self>) {}
}

/// Queue consumers stopped at random moments under load (by `Stop` or by dropping their last
/// address), one after another on the same session: no claim is left behind after any stop, and
/// over the run every item is acked exactly once (none lost, none twice).
#[actix_rt::test]
async fn queue_consumers_stopped_at_random_moments_leave_no_claim_and_lose_no_item() {
    use actix::Actor;
    use actix_zookeeper::queue::{ConsumerConfig, Queue, QueueConsumerActor, Stop as StopConsumer};
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cancel-consumer");
    let s = session_at(&zk.connect_string(), &root).await;
    let items: Vec<Vec<u8>> = (0..300u16).map(|n| n.to_be_bytes().to_vec()).collect();
    Queue::new(s.clone(), "/q").put_all(items.clone()).await.expect("put");
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut rng = Rng::seeded("cancel-consumer");
    let mut rounds = 0;
    while acked.lock().expect("acked").len() < items.len() {
        rounds += 1;
        if rounds == 200 {
            let left = children(&s, "/q").await;
            panic!("no progress: {} acked; left in /q: {left:?}", acked.lock().expect("acked").len());
        }
        let shared = acked.clone();
        let config =
            ConsumerConfig::new("/q").with_workers(2, move |_| AckWorker { acked: shared.clone() }).with_concurrency(4);
        let consumer = QueueConsumerActor::new(s.clone(), config).start();
        // From before its first claim to well into its work (a delivery takes 10-30 ms).
        actix_rt::time::sleep(Duration::from_millis(rng.below(150))).await;
        stop_one(consumer, rng.below(2) == 0, |c| c.do_send(StopConsumer));
        // No claim outlives its consumer.
        wait_until_async("no claim left", || async { children(&s, "/q/claims").await.is_empty() }).await;
    }
    println!("{rounds} consumers stopped at random moments");
    assert!(rounds > 1, "every item was acked before the first stop: no stop met work in flight");
    let mut got = acked.lock().expect("acked").clone();
    got.sort();
    assert_eq!(got, items, "every item acked exactly once over {rounds} consumers");
    s.close().await;
}
