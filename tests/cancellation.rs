//! Cancellation against a real ZooKeeper: every future of the public API dropped at a random
//! moment leaves nothing behind (no node, no watch, no grant held for nobody) and the next call on
//! the same handle works at once. Each round ends with the server-side leftover check
//! ([`settled`]), whose control is `the_leftover_check_catches_a_node_and_a_watch_left_behind`.
#![cfg(feature = "testkit")]

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::recipe::FencingToken;
use actix_zookeeper::testkit::{TestZooKeeper, unique_root};
use common::*;

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
    settled_within(s, zk, dir, held, watches, PATIENCE).await
}

/// How long the leftover checks give a clean-up that runs on its own (a detached delete, a
/// watch removed as its owner stops) before they call what is left a leftover.
const PATIENCE: Duration = Duration::from_secs(5);

/// How long the controls give a leftover they are meant to catch: it stays however long they
/// wait, so the check's verdict is the same after any wait, and a shorter one saves the suite
/// the full patience for every catch.
const LEFT_FOR_GOOD: Duration = Duration::from_millis(500);

/// [`settled`], patient for `patience`.
async fn settled_within(
    s: &SessionHandle,
    zk: &TestZooKeeper,
    dir: &str,
    held: &[String],
    watches: Option<u64>,
    patience: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + patience;
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
    let caught = settled_within(&s, &zk, "/l", &[], before, LEFT_FOR_GOOD).await;
    assert!(caught.as_ref().is_err_and(|e| e.contains("stray")), "{caught:?}");
    assert_eq!(settled(&s, &zk, "/l", std::slice::from_ref(&stray), before).await, Ok(()), "held nodes are fine");
    s.delete(&stray, None).await.expect("delete");

    if before.is_some() {
        // An exists watch on a missing node stays until the node is created.
        let (watcher, _) = (Recorded::<WatchEvent>::start(), ());
        s.exists_watched("/l/missing", watcher.recipient.clone()).await.expect("exists");
        let caught = settled_within(&s, &zk, "/l", &[], before, LEFT_FOR_GOOD).await;
        assert!(caught.as_ref().is_err_and(|e| e.contains("watches")), "{caught:?}");
        s.create("/l/missing", "", CreateMode::Persistent).await.expect("create fires the watch");
        assert_eq!(settled(&s, &zk, "/l", &[], before).await, Ok(()));
    }
    s.close().await;
}

/// Regression: `tokio::time::timeout` around a handle's `acquire` while another session
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
    let holder = LockHandle::start(b.clone(), LockConfig::new("/l").with_participant_id("holder")).expect("lock");
    let lock = LockHandle::start(a.clone(), LockConfig::new("/l").with_participant_id("impatient")).expect("lock");
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
    assert!(
        matches!(&acquired[..], [LockEvent::Acquired { grant: only, .. }] if *only == grant),
        "nothing granted to an abandoned attempt: {acquired:?}"
    );
    settled(&a, &zk, "/l", &[], before).await.expect("nothing left");
    a.close().await;
    b.close().await;
}

/// Regression: a re-entrant `acquire` (already holding) whose future is dropped with the
/// grant in it must not give the lock back under its holder (it sent `GiveBack` with the held
/// token, and another session took the lock). Lock and semaphore.
#[actix_rt::test]
async fn a_dropped_reentrant_acquire_leaves_the_grant_with_its_holder() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("cancel-reentrant");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let lock = LockHandle::start(a.clone(), LockConfig::new("/l")).expect("lock");
    let other = LockHandle::start(b.clone(), LockConfig::new("/l")).expect("lock");
    let pool = SemaphoreHandle::start(a.clone(), SemaphoreConfig::new("/s", 1)).expect("semaphore");
    let other_pool = SemaphoreHandle::start(b.clone(), SemaphoreConfig::new("/s", 1)).expect("semaphore");
    let grant = lock.acquire(None).await.expect("holds");
    let lease = pool.acquire(None).await.expect("holds a lease");
    for _ in 0..3 {
        // Sent at the call; answered at once (held already); dropped unread.
        let again = lock.acquire_reentrant(None);
        let again_lease = pool.acquire_reentrant(None);
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
    assert_eq!(lock.acquire_reentrant(None).await, Ok(grant.clone()));
    lock.release().await.expect("release");
    pool.release().await.expect("release");
    other.acquire(Some(Duration::from_secs(10))).await.expect("the other takes it after the release");
    other.release().await.expect("release");
    a.close().await;
    b.close().await;
}

/// `TryAcquire` says "busy" (`Ok(None)`) only once its node is deleted, as
/// docs/recipes/lock.md says: a listing made right after the answer shows the holder's node alone.
#[actix_rt::test]
async fn a_try_acquire_says_busy_only_once_its_node_is_gone() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("cancel-try");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let holder = LockHandle::start(b.clone(), LockConfig::new("/l")).expect("lock");
    let trier = LockHandle::start(a.clone(), LockConfig::new("/l")).expect("lock");
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
                        // Half the releases are dropped at a random moment, some at once: a
                        // release is carried out all the same (the live one takes it below).
                        let release = dropper.release();
                        if rng.below(2) == 0 {
                            let delay = if rng.below(2) == 0 { Duration::ZERO } else { rng.drop_delay() };
                            let _ = futures::future::select(release, Box::pin(actix_rt::time::sleep(delay))).await;
                        } else {
                            release.await.expect("release what was received");
                        }
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
        if let LockEvent::Acquired { grant, .. } = event {
            if !received.contains(&grant.token) {
                assert!(
                    !abandoned_while_held.contains(&i),
                    "a grant to an attempt abandoned while the lock was held: {event:?}"
                );
                let released = announced[i + 1..]
                    .iter()
                    .any(|e| matches!(e, LockEvent::Released { node, .. } if *node == grant.node));
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
    let round = hammer_lock_shaped(
        "cancel-lock",
        &zk,
        |s| LockHandle::start(s.clone(), LockConfig::new("/l")).expect("lock"),
        40,
    )
    .await;
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
    let make = |s: &SessionHandle| SemaphoreHandle::start(s.clone(), SemaphoreConfig::new("/s", 1)).expect("semaphore");
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
    use actix_zookeeper::discovery::{DiscoveryConfig, ServiceDiscovery, ServiceInstance};
    use actix_zookeeper::election::{ElectionActor, ElectionConfig, ElectionHandle, Stop as StopElection};
    use actix_zookeeper::group::{GroupConfig, GroupEvent, GroupMember, Leave};
    use actix_zookeeper::persistent::{PersistentNodeConfig, PersistentNodeHandle};
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("stop-random");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    for dir in ["/l", "/s", "/e", "/g", "/c", "/p", "/d/svc"] {
        a.ensure_path(dir).await.expect("dir");
    }
    let before = watch_count(&zk);
    let mut rng = Rng::seeded("stop-random");
    let discovery = |s: &SessionHandle| ServiceDiscovery::new(s.clone(), DiscoveryConfig::new("/d")).expect("base");
    let other_lock = LockHandle::start(b.clone(), LockConfig::new("/l")).expect("lock");
    let other_pool = SemaphoreHandle::start(b.clone(), SemaphoreConfig::new("/s", 1)).expect("semaphore");
    let other_leader =
        ElectionHandle::start(b.clone(), ElectionConfig::new("/e").with_participant_id("other")).expect("election");
    let (mut kept_made, mut member_made) = (0usize, 0usize);
    for round in 0..12 {
        let by_message = rng.below(2) == 0;
        // A lock actor acquiring (with the other participant holding in half the rounds).
        let blocked = rng.below(2) == 0;
        if blocked {
            other_lock.acquire(None).await.expect("the other holds");
            other_pool.acquire(None).await.expect("the other holds the lease");
        }
        let lock = LockActor::new(a.clone(), LockConfig::new("/l")).start();
        lock.do_send(Acquire::default());
        // A semaphore participant acquiring a lease (the only one: the other holds it in the
        // rounds where it holds the lock).
        let pool = SemaphoreActor::new(a.clone(), SemaphoreConfig::new("/s", 1)).start();
        pool.do_send(Acquire::default());
        // An election participant joining, next to the other one.
        let election = ElectionActor::new(a.clone(), ElectionConfig::new("/e").with_participant_id("me")).start();
        // A group member joining.
        let member = GroupMember::new(a.clone(), GroupConfig::new("/g", "me")).expect("config").start();
        // A cache setting its watch.
        let cache = CacheActor::new(a.clone(), CacheConfig::new("/c")).expect("config");
        let cache = cache.start();
        // A kept node being created, and a service registration whose `register` is dropped
        // (or its registration, when it was made in time).
        let kept = PersistentNodeHandle::start(a.clone(), PersistentNodeConfig::new("/p/me", CreateMode::Ephemeral))
            .expect("config");
        let registering = actix_rt::spawn(discovery(&a).register(ServiceInstance::new("svc", "me")));
        actix_rt::time::sleep(rng.drop_delay() * 4).await;
        // Which window the stops hit: with our nodes made (their deletes are what a stop owes),
        // or with the creates still on their way.
        let made = [a.exists("/p/me"), a.exists("/g/me")];
        for (made, tally) in futures::future::join_all(made).await.into_iter().zip([&mut kept_made, &mut member_made]) {
            *tally += usize::from(made.is_ok_and(|stat| stat.is_some()));
        }
        if by_message {
            drop(kept.stop());
        }
        drop(kept);
        registering.abort();
        drop(registering);
        stop_one(lock, by_message, |l| l.do_send(Release));
        stop_one(pool, by_message, |p| p.do_send(Release));
        stop_one(election, by_message, |e| e.do_send(StopElection));
        stop_one(member, by_message, |m| m.do_send(Leave));
        stop_one(cache, by_message, |c| c.do_send(StopCache));
        let held: Vec<String> = if blocked {
            let mut held: Vec<String> =
                ephemerals_under(&b, "/l").await.into_iter().filter(|n| n.starts_with("/l/")).take(1).collect();
            held.extend(ephemerals_under(&b, "/s").await);
            held
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
                for dir in ["/l", "/s", "/e", "/g", "/p", "/d"] {
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
            other_pool.release().await.expect("release");
        }
        // The live participants go on: the lock and the lease are free, the other leads, the id
        // joins elsewhere.
        other_lock.acquire(Some(Duration::from_secs(10))).await.expect("the lock was left held");
        other_lock.release().await.expect("release");
        other_pool.acquire(Some(Duration::from_secs(10))).await.expect("the lease was left held");
        other_pool.release().await.expect("release");
        bounded("the other leads", other_leader.leadership()).await.expect("the other leads");
        let elsewhere = GroupMember::new(b.clone(), GroupConfig::new("/g", "me")).expect("config").start();
        let joined = Recorded::<GroupEvent>::start();
        elsewhere.do_send(actix_zookeeper::group::Subscribe { recipient: joined.recipient.clone() });
        joined.wait_for(0, Duration::from_secs(10), |e| matches!(e, GroupEvent::Joined { .. })).await;
        elsewhere.send(Leave).await.expect("member").expect("leave");
        let registered =
            bounded("the id registers elsewhere", discovery(&b).register(ServiceInstance::new("svc", "me")))
                .await
                .expect("the id was left taken");
        registered.unregister().await.expect("unregistered");
    }
    other_leader.stop().await;
    settled(&a, &zk, "/", &[], before).await.unwrap_or_else(|e| panic!("after the rounds: {e}"));
    eprintln!("stopped with the kept node made in {kept_made} of 12 rounds, the member's node in {member_made}");
    // The rounds hit the window that matters: a stop that owes a delete. (The group member
    // joins after a read of its group, so under load its node may not be made yet in any
    // round: counted, not required.)
    assert!(kept_made > 0, "no round stopped the kept node after it was made");
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
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
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
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("cancel-election");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let me = ElectionHandle::start(a.clone(), ElectionConfig::new("/e").with_participant_id("me")).expect("election");
    let other =
        ElectionHandle::start(b.clone(), ElectionConfig::new("/e").with_participant_id("other")).expect("election");
    let mut rng = Rng::seeded("cancel-election");
    for round in 0..20 {
        let call: futures::future::LocalBoxFuture<'_, _> = match rng.below(4) {
            0 => Box::pin(async { me.leadership().await.map(|_| ()) }),
            1 => Box::pin(me.resign_and_requeue()),
            2 => Box::pin(me.join()),
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
    me.stop().await;
    other.stop().await;
    settled(&a, &zk, "/e", &[], None).await.expect("nothing left");
    a.close().await;
    b.close().await;
}

/// Counter adds (`counter::add`) dropped at random moments, some at once (before the actor
/// could take them: actix skipped those, and they were lost): an add is sent when it is made,
/// so a dropped one is neither lost nor applied twice: the count ends at the number of adds
/// made, and the counter answers the next request at once.
#[actix_rt::test]
async fn counter_adds_dropped_at_random_moments_apply_exactly_once() {
    use actix::Actor;
    use actix_zookeeper::counter::{GetCount, SharedCount, SharedCountConfig, add};
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("cancel-counter")).await;
    let counter = SharedCount::new(s.clone(), SharedCountConfig::new("/n")).start();
    let mut rng = Rng::seeded("cancel-counter");
    let (mut dropped, mut completed) = (0, 0);
    for n in 0..40 {
        if n % 4 == 0 {
            drop(add(&counter, 1));
            dropped += 1;
            continue;
        }
        let adding = Box::pin(add(&counter, 1));
        match futures::future::select(adding, Box::pin(actix_rt::time::sleep(rng.drop_delay()))).await {
            futures::future::Either::Left((answer, _)) => {
                answer.expect("add");
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
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("cancel-takeover");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let holder = LockHandle::start(b.clone(), LockConfig::new("/l")).expect("lock");
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

    fn handle(&mut self, delivery: actix_zookeeper::queue::Delivery, _: &mut actix::Context<Self>) {
        let acked = self.acked.clone();
        let pause = Duration::from_millis(10 + u64::from(delivery.data[1] % 20));
        // Detached, so that every ack's answer is read: a worker stops with its consumer, and a
        // future of the worker's own would be dropped with an ack out, which then applies
        // unrecorded (the item is gone, acked, but the count misses it).
        actix::spawn(async move {
            actix_rt::time::sleep(pause).await;
            if delivery.ack().await.is_ok() {
                acked.lock().expect("acked").push(delivery.data.clone());
            }
        });
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
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
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

// ---- per-session leftovers ------------------------------------------------------------------

/// The paths session `s` holds watches on (`wchc`), when the test has a server of its own.
async fn watches_of(zk: &TestZooKeeper, s: &SessionHandle) -> Option<Vec<String>> {
    let TestZooKeeper::Embedded(server) = zk else { return None };
    let id = s.session().await?.session_id.0;
    let wchc = actix_zookeeper::testkit::wchc(&server.address()).expect("wchc");
    let ours = format!("0x{id:x}");
    let mut paths = Vec::new();
    let mut in_ours = false;
    for line in wchc.lines() {
        if line.starts_with("0x") {
            in_ours = line.trim() == ours;
        } else if in_ours && !line.trim().is_empty() {
            paths.push(line.trim().to_owned());
        }
    }
    Some(paths)
}

/// The ephemeral nodes session `s` owns under `dir`.
async fn ephemerals_of(s: &SessionHandle, dir: &str) -> Vec<String> {
    s.connected().await.expect("a live session");
    let ours = s.session().await.expect("a live session").session_id.0;
    let mut owned = Vec::new();
    for node in ephemerals_under(s, dir).await {
        if s.exists(&node).await.ok().flatten().is_some_and(|stat| stat.ephemeral_owner == ours) {
            owned.push(node);
        }
    }
    owned
}

/// The per-session leftover check: within a few seconds, session `s` owns no ephemeral node
/// under `dir` and holds no watch on the server. `Err` says what stayed.
async fn nothing_of(s: &SessionHandle, zk: &TestZooKeeper, dir: &str) -> Result<(), String> {
    nothing_of_within(s, zk, dir, PATIENCE).await
}

/// [`nothing_of`], patient for `patience`.
async fn nothing_of_within(s: &SessionHandle, zk: &TestZooKeeper, dir: &str, patience: Duration) -> Result<(), String> {
    let deadline = Instant::now() + patience;
    loop {
        let nodes = ephemerals_of(s, dir).await;
        let watches = match watches_of(zk, s).await {
            Some(watches) => watches,
            None if watch_count(zk).is_none() => Vec::new(),
            None => vec!["(no live session to ask about)".to_owned()],
        };
        if nodes.is_empty() && watches.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("left behind: nodes {nodes:?}, watches on {watches:?}"));
        }
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The control of [`nothing_of`]: a node and a watch of the session are caught, another
/// session's are not.
#[actix_rt::test]
async fn the_per_session_leftover_check_catches_a_node_and_a_watch_of_that_session() {
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cancel-control-session");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    a.ensure_path("/d").await.expect("dir");
    assert_eq!(nothing_of(&a, &zk, "/d").await, Ok(()));
    let theirs = b.create("/d/theirs", "", CreateMode::Ephemeral).await.expect("their node").path;
    assert_eq!(nothing_of(&a, &zk, "/d").await, Ok(()), "another session's node is not ours");
    let stray = a.create("/d/stray", "", CreateMode::Ephemeral).await.expect("our node").path;
    let caught = nothing_of_within(&a, &zk, "/d", LEFT_FOR_GOOD).await;
    assert!(caught.as_ref().is_err_and(|e| e.contains("stray")), "{caught:?}");
    a.delete(&stray, None).await.expect("delete");
    if watch_count(&zk).is_some() {
        let watcher = Recorded::<WatchEvent>::start();
        a.exists_watched("/d/missing", watcher.recipient.clone()).await.expect("exists");
        let caught = nothing_of_within(&a, &zk, "/d", LEFT_FOR_GOOD).await;
        assert!(caught.as_ref().is_err_and(|e| e.contains("/d/missing")), "{caught:?}");
        a.create("/d/missing", "", CreateMode::Persistent).await.expect("create fires the watch");
    }
    assert_eq!(nothing_of(&a, &zk, "/d").await, Ok(()));
    b.delete(&theirs, None).await.expect("delete");
    a.close().await;
    b.close().await;
}

// ---- session requests -----------------------------------------------------------------------

/// Regression, found by the harness: `add_watch` dropped after the session took it and before
/// its answer (a `timeout`, a `select!`) left a persistent watch for good, delivering to a
/// recipient that still lives, and the caller never had the id to remove it. Now a watch whose
/// caller went before it was told the id is removed. (Dropped before the session took it, actix
/// never hands the request over.) The answer is held back by the proxy until the watch is set
/// on the server; then the caller goes and the link is reset, so the watch is added again on
/// the same session and answered to nobody.
#[actix_rt::test]
async fn a_dropped_add_watch_leaves_no_watch() {
    use actix_zookeeper::testkit::{ClientLinks, Direction};
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    if watch_count(&zk).is_none() {
        return; // needs `wchc` on a server of its own
    }
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &unique_root("cancel-add-watch")).await;
    s.ensure_path("/w").await.expect("dir");
    let watcher = Recorded::<WatchEvent>::start();
    links.proxy(0).set_latency(Direction::Downstream, Duration::from_secs(60));
    let adding = s.add_watch("/w", PersistentWatchMode::Node, watcher.recipient.clone());
    wait_until_async("the watch set on the server", || async {
        watches_of(&zk, &s).await.is_some_and(|w| w.iter().any(|p| p.ends_with("/w")))
    })
    .await;
    drop(adding);
    links.reset();
    links.heal();
    s.connected().await.expect("reconnected");
    // The session adds its watches again once the link is back; give it the round trip.
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    nothing_of(&s, &zk, "/w").await.expect("no watch outlives its dropped request");
    s.set_data("/w", "changed", None).await.expect("write");
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert!(watcher.snapshot().is_empty(), "events from a watch nobody holds: {:?}", watcher.snapshot());
    // The next one, awaited, works.
    let id = bounded("a watch", s.add_watch("/w", PersistentWatchMode::Node, watcher.recipient.clone()))
        .await
        .expect("watch");
    s.set_data("/w", "again", None).await.expect("write");
    watcher.wait_for(0, Duration::from_secs(10), |e| e.kind == WatchEventKind::DataChanged).await;
    s.remove_watch(id);
    nothing_of(&s, &zk, "/w").await.expect("a removed watch is gone");
    s.close().await;
}

/// Session requests dropped at random moments: every write applies exactly once whether or not
/// its future was awaited (it is sent when it is made), a dropped read or `sync` loses only its
/// answer, a dropped `add_watch` leaves no watch, and the next request is answered at once.
#[actix_rt::test]
async fn session_requests_dropped_at_random_moments_apply_once_and_leave_no_watch() {
    use futures::FutureExt;
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("cancel-session")).await;
    s.ensure_path("/r/w").await.expect("dir");
    let watcher = Recorded::<WatchEvent>::start();
    let mut rng = Rng::seeded("cancel-session");
    let (mut made, mut dropped) = (0, 0);
    for _ in 0..80 {
        let call: futures::future::LocalBoxFuture<'_, ()> = match rng.below(5) {
            0 => {
                made += 1;
                Box::pin(s.create("/r/n-", "", CreateMode::PersistentSequential).map(|r| {
                    r.expect("create");
                }))
            }
            1 => Box::pin(s.children("/r").map(|r| {
                r.expect("children");
            })),
            2 => Box::pin(s.get_data("/r").map(|r| {
                r.expect("get");
            })),
            // An awaited watch is removed by its caller, so only a dropped one could stay.
            3 => Box::pin(s.add_watch("/r/w", PersistentWatchMode::Node, watcher.recipient.clone()).map(|r| {
                s.remove_watch(r.expect("watch"));
            })),
            _ => Box::pin(s.sync("/r").map(|r| {
                r.expect("sync");
            })),
        };
        if let futures::future::Either::Right(_) =
            futures::future::select(call, Box::pin(actix_rt::time::sleep(rng.drop_delay()))).await
        {
            dropped += 1;
        }
        bounded("the next request", s.exists("/r")).await.expect("exists");
    }
    println!("{dropped} of 80 requests dropped");
    assert!(dropped > 0, "the harness dropped no request");
    let created = || async { children(&s, "/r").await.into_iter().filter(|n| n.starts_with("n-")).count() };
    wait_until_async("every create applied", || async { created().await == made }).await;
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(created().await, made, "a create applied twice");
    nothing_of(&s, &zk, "/r").await.expect("no watch left by a dropped add_watch");
    s.close().await;
}

// ---- barriers -------------------------------------------------------------------------------

/// Barrier calls dropped at random moments next to a live member on another session: a dropped
/// `enter`, double-barrier `leave` or barrier `wait` leaves no member node and no watch of ours
/// (its drop removes them), the other member's `leave` is not held back by ours, and the next
/// `enter`/`leave` pair goes through at once.
#[actix_rt::test]
async fn barrier_calls_dropped_at_random_moments_leave_nothing_behind() {
    use actix_zookeeper::barrier::{BarrierError, DistributedBarrier, DistributedDoubleBarrier};
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cancel-barrier");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let me = DistributedDoubleBarrier::new(a.clone(), "/b", 2).expect("barrier");
    let other = DistributedDoubleBarrier::new(b.clone(), "/b", 2).expect("barrier");
    let gate = DistributedBarrier::new(a.clone(), "/gate").expect("barrier");
    DistributedBarrier::new(b.clone(), "/gate").expect("barrier").set().await.expect("set the gate");
    let mut rng = Rng::seeded("cancel-barrier");
    let mut dropped = 0;
    for round in 0..24 {
        let kind = rng.below(3);
        let mut other_leaving = None;
        let call: futures::future::LocalBoxFuture<'_, Result<(), BarrierError>> = match kind {
            // The other member has not entered: ours waits.
            0 => Box::pin(me.enter(None)),
            // The gate is set: ours waits.
            1 => Box::pin(gate.wait(None)),
            // Both inside; both leave, and ours is dropped on the way.
            _ => {
                let (mine, theirs) =
                    bounded("both enter", futures::future::join(me.enter(None), other.enter(None))).await;
                mine.expect("we enter");
                theirs.expect("they enter");
                other_leaving = Some(actix_rt::spawn(other.leave(Some(Duration::from_secs(20)))));
                Box::pin(me.leave(None))
            }
        };
        if let futures::future::Either::Right(_) =
            futures::future::select(call, Box::pin(actix_rt::time::sleep(rng.drop_delay()))).await
        {
            dropped += 1;
        }
        if let Some(leaving) = other_leaving {
            bounded("the other member's leave", leaving).await.expect("task").expect("they left");
        }
        nothing_of(&a, &zk, "/").await.unwrap_or_else(|e| panic!("round {round} ({kind}): {e}"));
        // The next calls go through at once.
        let (mine, theirs) = bounded("both enter", futures::future::join(me.enter(None), other.enter(None))).await;
        mine.expect("we enter");
        theirs.expect("they enter");
        let (mine, theirs) = bounded("both leave", futures::future::join(me.leave(None), other.leave(None))).await;
        mine.expect("we leave");
        theirs.expect("they leave");
        assert_eq!(ephemerals_under(&b, "/b").await, Vec::<String>::new(), "round {round}: a member node stayed");
    }
    println!("{dropped} of 24 barrier calls dropped");
    assert!(dropped > 0, "the harness dropped no call");
    nothing_of(&a, &zk, "/").await.expect("nothing left");
    a.close().await;
    b.close().await;
}

// ---- master–worker --------------------------------------------------------------------------

/// Runs a task after 0–20 ms (from its payload) and answers `done:<payload>`, counting runs.
struct EchoRunner {
    runs: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<Vec<u8>, usize>>>,
}

impl actix::Actor for EchoRunner {
    type Context = actix::Context<Self>;
}

impl actix::Handler<actix_zookeeper::tasks::TaskAssigned> for EchoRunner {
    type Result = actix::ResponseFuture<actix_zookeeper::tasks::TaskOutcome>;

    fn handle(&mut self, task: actix_zookeeper::tasks::TaskAssigned, _: &mut actix::Context<Self>) -> Self::Result {
        let runs = self.runs.clone();
        Box::pin(async move {
            let pause = Duration::from_millis(u64::from(task.data.last().copied().unwrap_or(0) % 20));
            actix_rt::time::sleep(pause).await;
            *runs.lock().expect("runs").entry(task.data.clone()).or_default() += 1;
            [b"done:".as_slice(), &task.data].concat().into()
        })
    }
}

type Runs = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<Vec<u8>, usize>>>;

fn echo_worker(session: &SessionHandle, id: &str, runs: &Runs) -> actix::Addr<actix_zookeeper::tasks::TaskWorker> {
    use actix::Actor;
    use actix_zookeeper::tasks::{TaskWorker, TaskWorkerConfig};
    let runner = EchoRunner { runs: runs.clone() }.start();
    let config = TaskWorkerConfig::new("/jobs", id, runner.recipient()).with_concurrency(2);
    TaskWorker::new(session.clone(), config).expect("worker config").start()
}

fn master(session: &SessionHandle, id: &str) -> actix::Addr<actix_zookeeper::tasks::TaskMaster> {
    use actix::Actor;
    use actix_zookeeper::tasks::{TaskMaster, TaskMasterConfig};
    TaskMaster::new(session.clone(), TaskMasterConfig::new("/jobs").with_master_id(id)).expect("master config").start()
}

/// `TaskClient::submit_as` and `result` dropped at random moments, against a live master and
/// worker: a dropped submission applies once (it is sent when it is made; the id tells), a
/// dropped `result` withdraws its watch, and the next call is answered at once. Every task is
/// run once and its result read in the end; the client's session holds no watch.
#[actix_rt::test]
async fn task_calls_dropped_at_random_moments_leave_nothing_behind() {
    use actix_zookeeper::tasks::{TaskClient, TaskError, TaskId, TaskState};
    use futures::FutureExt;
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cancel-tasks");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let runs = Runs::default();
    let _master = master(&b, "live-master");
    let _worker = echo_worker(&b, "live-worker", &runs);
    let client = TaskClient::new(a.clone(), "/jobs").expect("client");
    // (id, payload, whether its submission was dropped)
    let mut tasks: Vec<(TaskId, Vec<u8>, bool)> = Vec::new();
    let mut rng = Rng::seeded("cancel-tasks");
    let mut dropped = 0;
    for round in 0..40u8 {
        let submitting = tasks.is_empty() || rng.below(2) == 0;
        let call: futures::future::LocalBoxFuture<'_, ()> = if submitting {
            let (id, data) = (TaskId::random(), vec![b't', round]);
            tasks.push((id.clone(), data.clone(), false));
            Box::pin(client.submit_as(id, data).map(|r| {
                r.expect("submit");
            }))
        } else {
            let (id, data, _) = tasks[rng.below(tasks.len() as u64) as usize].clone();
            Box::pin(client.result(&id, Duration::from_secs(10)).map(move |r| match r {
                Ok(out) => assert_eq!(out, [b"done:".as_slice(), &data].concat()),
                // A submission dropped before it was stored: its state says so below.
                Err(TaskError::UnknownTask { .. }) => {}
                Err(e) => panic!("result: {e}"),
            }))
        };
        if let futures::future::Either::Right(_) =
            futures::future::select(call, Box::pin(actix_rt::time::sleep(rng.drop_delay()))).await
        {
            dropped += 1;
            if submitting {
                tasks.last_mut().expect("a task").2 = true;
            }
        }
        let (last, _, _) = tasks.last().expect("a task");
        bounded("the next call", client.state(last)).await.expect("state");
    }
    println!("{dropped} of 40 task calls dropped");
    assert!(dropped > 0, "the harness dropped no call");
    let mut never_stored = 0;
    for (id, data, submit_dropped) in &tasks {
        // A dropped submission applied or not (its first try is sent when it is made; a retry,
        // e.g. after the first use of the root made the directories, went with the future); the
        // id tells which. A task either is stored and run once, or is not and never runs.
        if client.state(id).await.expect("state") == TaskState::Unknown {
            assert!(submit_dropped, "{id:?}: an answered submission was never stored");
            never_stored += 1;
            continue;
        }
        let out = bounded("a result", client.result(id, Duration::from_secs(30))).await.expect("result");
        assert_eq!(&out, &[b"done:".as_slice(), data].concat());
    }
    println!("{never_stored} dropped submissions did not apply");
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    for (id, data, _) in &tasks {
        let stored = client.state(id).await.expect("state") != TaskState::Unknown;
        let ran = runs.lock().expect("runs").get(data).copied();
        assert_eq!(ran, stored.then_some(1), "{data:?}: run once if stored, never if not");
    }
    nothing_of(&a, &zk, "/").await.expect("no watch left by a dropped result");
    a.close().await;
    b.close().await;
}

/// Task masters, task workers and shared counters stopped at random moments under load (by
/// their stop message or by dropping their last address), next to a live master and worker on
/// another session: after each stop their session owns no node and holds no watch, every
/// submitted task is finished with its result, and the counter is never ahead of the adds made.
#[actix_rt::test]
async fn task_and_counter_actors_stopped_at_random_moments_leave_nothing_behind() {
    use actix::Actor;
    use actix_zookeeper::counter::{AddCount, GetCount, SharedCount, SharedCountConfig, Stop as StopCount};
    use actix_zookeeper::tasks::{Stop, TaskClient};
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("stop-tasks");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let runs = Runs::default();
    let mut live_master = master(&b, "live-master");
    let _live_worker = echo_worker(&b, "live-worker", &runs);
    let client = TaskClient::new(b.clone(), "/jobs").expect("client");
    let reader = SharedCount::new(b.clone(), SharedCountConfig::new("/n")).start();
    let mut rng = Rng::seeded("stop-tasks");
    let mut adds = 0i32;
    for round in 0..12u8 {
        // In half the rounds ours is first in line (the live master joins again behind it).
        let ours_first = rng.below(2) == 0;
        if ours_first {
            live_master.send(Stop).await.expect("master");
        }
        let my_master = master(&a, "mine");
        if ours_first {
            live_master = master(&b, "live-master");
        }
        let my_worker = echo_worker(&a, "mine", &runs);
        let counter = SharedCount::new(a.clone(), SharedCountConfig::new("/n")).start();
        let mut submitted = Vec::new();
        for n in 0..6u8 {
            let data = vec![round, n];
            submitted.push((client.submit(data.clone()).await.expect("submit"), data));
            counter.do_send(AddCount { by: 1 });
            adds += 1;
        }
        actix_rt::time::sleep(Duration::from_millis(rng.below(150))).await;
        let by_message = rng.below(2) == 0;
        stop_one(my_master, by_message, |m| m.do_send(Stop));
        stop_one(my_worker, by_message, |w| w.do_send(Stop));
        stop_one(counter, by_message, |c| c.do_send(StopCount));
        nothing_of(&a, &zk, "/").await.unwrap_or_else(|e| panic!("round {round} (by message: {by_message}): {e}"));
        // Read on the stopped counter's own session (so after every write it sent): a stopped
        // counter must not apply an add later (read again after the tasks' results came).
        let stored = || async {
            let data = a.get_data("/n").await.expect("the count's node").data;
            actix_zookeeper::counter::decode_count("/n", &data).expect("a count")
        };
        let after_stop = stored().await;
        for (id, data) in &submitted {
            let out = bounded("a result", client.result(id, Duration::from_secs(30))).await.expect("result");
            assert_eq!(&out, &[b"done:".as_slice(), data].concat(), "round {round}");
        }
        let now = reader.send(GetCount).await.expect("counter").expect("count");
        assert!(now.value <= adds, "round {round}: the count {} is ahead of the {adds} adds made", now.value);
        assert_eq!(stored().await, after_stop, "round {round}: the count moved after its counter stopped");
    }
    live_master.do_send(Stop);
    a.close().await;
    b.close().await;
}

// ---- queue settlements and puts --------------------------------------------------------------

/// A worker that settles each delivery with an `ack` whose future it drops after 0–3 ms (some
/// at once), counting deliveries.
struct DroppingAckWorker {
    delivered: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl actix::Actor for DroppingAckWorker {
    type Context = actix::Context<Self>;
}

impl actix::Handler<actix_zookeeper::queue::Delivery> for DroppingAckWorker {
    type Result = ();

    fn handle(&mut self, delivery: actix_zookeeper::queue::Delivery, ctx: &mut actix::Context<Self>) {
        use actix::{ActorFutureExt, AsyncContext, WrapFuture};
        self.delivered.lock().expect("delivered").push(delivery.data.clone());
        let dropped = self.dropped.clone();
        let delay = Duration::from_micros(u64::from(delivery.data[1] % 4) * 1_000);
        if delivery.data[1] % 5 == 0 {
            // Dropped before the consumer could take it (it runs on this thread too).
            drop(delivery.ack());
            self.dropped.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return;
        }
        ctx.spawn(
            async move {
                let ack = Box::pin(delivery.ack());
                if let futures::future::Either::Right(_) =
                    futures::future::select(ack, Box::pin(actix_rt::time::sleep(delay))).await
                {
                    dropped.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
            .into_actor(self)
            .map(|(), _, _| ()),
        );
    }
}

impl actix::Handler<actix_zookeeper::queue::Revoked> for DroppingAckWorker {
    type Result = ();

    fn handle(&mut self, _: actix_zookeeper::queue::Revoked, _: &mut actix::Context<Self>) {}
}

/// A worker's `ack` dropped before its answer (a `timeout`, a `select!`) still settles: it is
/// sent when it is made, like a ZooKeeper write. Dropped before the consumer took it, actix
/// skipped it: the claim stayed, the slot stayed taken, and a consumer whose every slot met
/// such a drop delivered nothing more. Every item is delivered once and removed, and no claim
/// is left.
#[actix_rt::test]
async fn queue_acks_dropped_at_random_moments_still_settle() {
    use actix::Actor;
    use actix_zookeeper::queue::{ConsumerConfig, Queue, QueueConsumerActor, Stop as StopConsumer};
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("cancel-ack")).await;
    let items: Vec<Vec<u8>> = (0..120u16).map(|n| n.to_be_bytes().to_vec()).collect();
    Queue::new(s.clone(), "/q").put_all(items.clone()).await.expect("put");
    let delivered = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let dropped = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (d, x) = (delivered.clone(), dropped.clone());
    let config = ConsumerConfig::new("/q")
        .with_workers(2, move |_| DroppingAckWorker { delivered: d.clone(), dropped: x.clone() })
        .with_concurrency(4);
    let consumer = QueueConsumerActor::new(s.clone(), config).start();
    wait_until_async("every item settled", || async {
        children(&s, "/q").await.into_iter().all(|n| n == "claims") && children(&s, "/q/claims").await.is_empty()
    })
    .await;
    let dropped = dropped.load(std::sync::atomic::Ordering::SeqCst);
    println!("{dropped} of {} acks dropped", items.len());
    assert!(dropped > 0, "no ack was dropped");
    let mut got = delivered.lock().expect("delivered").clone();
    got.sort();
    assert_eq!(got, items, "every item delivered once");
    consumer.do_send(StopConsumer);
    s.close().await;
}

/// `release()`, `resign()` and `join()` dropped before their actor took them (a `select!` that
/// lost at once, a `let _ =` of the future) still happen: each is sent when it is made, as their
/// docs say. actix skips a request whose caller went before it was handled, so the lock stayed
/// held, the leader kept leading, and the participant stayed out of line. The actors run on this
/// thread, so each drop comes before the actor could take the request.
#[actix_rt::test]
async fn a_release_resign_or_join_dropped_at_once_still_happens() {
    use actix_zookeeper::election::{ElectionConfig, ElectionHandle};
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("cancel-release");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let lock = LockHandle::start(a.clone(), LockConfig::new("/l")).expect("lock");
    let other_lock = LockHandle::start(b.clone(), LockConfig::new("/l")).expect("lock");
    let pool = SemaphoreHandle::start(a.clone(), SemaphoreConfig::new("/s", 1)).expect("semaphore");
    let other_pool = SemaphoreHandle::start(b.clone(), SemaphoreConfig::new("/s", 1)).expect("semaphore");
    for round in 0..3 {
        lock.acquire(None).await.expect("holds");
        drop(lock.release());
        bounded("the other takes the lock", other_lock.acquire(None))
            .await
            .unwrap_or_else(|e| panic!("round {round}: lock left held: {e}"));
        other_lock.release().await.expect("release");
        pool.acquire(None).await.expect("holds");
        drop(pool.release());
        bounded("the other takes the lease", other_pool.acquire(None))
            .await
            .unwrap_or_else(|e| panic!("round {round}: lease left held: {e}"));
        other_pool.release().await.expect("release");
    }
    let me = ElectionHandle::start(a.clone(), ElectionConfig::new("/e").with_participant_id("me")).expect("election");
    bounded("we lead", me.leadership()).await.expect("we lead");
    let other =
        ElectionHandle::start(b.clone(), ElectionConfig::new("/e").with_participant_id("other")).expect("election");
    for round in 0..3 {
        drop(me.resign());
        bounded("the other leads", other.leadership()).await.unwrap_or_else(|e| panic!("round {round}: {e}"));
        drop(me.join());
        wait_until_async("we stand in line again", || async {
            me.participants().await.unwrap_or_default() == ["other", "me"]
        })
        .await;
        other.resign_and_requeue().await.expect("hand over");
        let term = bounded("we lead again", me.leadership()).await.expect("we lead");
        // A proclaim dropped at once is written all the same, fenced by our term.
        drop(me.proclaim(format!("round {round}")));
        let observer = actix_zookeeper::election::ElectionObserverHandle::start(b.clone(), "/e").expect("observer");
        let wanted = Some(format!("round {round}").into_bytes());
        wait_until_async("the dropped proclaim applied", || {
            let (observer, wanted) = (observer.clone(), wanted.clone());
            async move {
                observer.current().await.ok().flatten().is_some_and(|p| p.term == term.token && p.value == wanted)
            }
        })
        .await;
    }
    me.stop().await;
    other.stop().await;
    a.close().await;
    b.close().await;
}

/// Session writes dropped at once, before the session's actor took them (`let _ =` of the
/// future, a `select!` lost at once): each still applies, as the session's docs say (a write is
/// sent when it is made). actix skipped a request whose caller went before it was handled.
#[actix_rt::test]
async fn session_writes_dropped_at_once_still_apply() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("cancel-write-at-once")).await;
    s.ensure_path("/r").await.expect("dir");
    for _ in 0..50 {
        drop(s.create("/r/n-", "", CreateMode::PersistentSequential));
    }
    s.sync("/r").await.expect("sync");
    wait_until_async("every create applied", || async { children(&s, "/r").await.len() == 50 }).await;
    s.close().await;
}

/// `Queue::put_with_id` dropped at a random moment (a caller's own timeout), then called again
/// with the same id, queues the item once, as its docs promise ("a producer that retries after
/// ... a timeout of its own does not queue the item twice"). The new call looked the id up only
/// after a lost reply of its own, so a create sent by the dropped call made a second item.
#[actix_rt::test]
async fn a_put_with_id_retried_after_a_dropped_attempt_queues_the_item_once() {
    use actix_zookeeper::queue::Queue;
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("cancel-put-id")).await;
    let queue = Queue::new(s.clone(), "/q");
    let mut rng = Rng::seeded("cancel-put-id");
    let mut dropped = 0;
    for n in 0..30u8 {
        let id = format!("req-{n}");
        let first = Box::pin(queue.put_with_id(&id, vec![n]));
        // Every tenth attempt is dropped right after its first poll: the random delays alone
        // (the timer's granularity is a millisecond) may let every attempt finish on a fast run.
        let delay = rng.drop_delay();
        let gives_up: std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> =
            if n % 10 == 0 { Box::pin(async {}) } else { Box::pin(actix_rt::time::sleep(delay)) };
        if let futures::future::Either::Right(_) = futures::future::select(first, gives_up).await {
            dropped += 1;
            bounded("the retry", queue.put_with_id(&id, vec![n])).await.expect("retry");
        }
    }
    println!("{dropped} of 30 first attempts dropped");
    assert!(dropped > 0, "no attempt was dropped");
    let items = children(&s, "/q").await;
    for n in 0..30u8 {
        let prefix = format!("qn-req-{n}-");
        let copies = items.iter().filter(|name| name.starts_with(&prefix)).count();
        assert_eq!(copies, 1, "req-{n}: {copies} items: {items:?}");
    }
    s.close().await;
}

/// Questions to the cache, the group member and the counter (`Snapshot`, `Members`,
/// `GetCount`, sent with `Addr::send`) dropped at random moments: each loses only its answer;
/// the actor answers the next one at once and correctly, and nothing of ours is left but the
/// member node we hold.
#[actix_rt::test]
async fn questions_to_recipe_actors_dropped_at_random_moments_lose_only_their_answer() {
    use actix::Actor;
    use actix_zookeeper::cache::{CacheActor, CacheConfig, Snapshot, Stop as StopCache};
    use actix_zookeeper::counter::{GetCount, SharedCount, SharedCountConfig, add};
    use actix_zookeeper::group::{GroupConfig, GroupMember, Leave, Members};
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("cancel-questions")).await;
    s.ensure_path("/c/x").await.expect("tree");
    let cache = CacheActor::new(s.clone(), CacheConfig::new("/c")).expect("config").start();
    let member = GroupMember::new(s.clone(), GroupConfig::new("/g", "me")).expect("config").start();
    let counter = SharedCount::new(s.clone(), SharedCountConfig::new("/n")).start();
    add(&counter, 7).await.expect("add");
    wait_until_async("the cache loaded and we joined", || async {
        cache.send(Snapshot).await.is_ok_and(|nodes| nodes.contains_key("/c/x"))
            && member.send(Members).await.is_ok_and(|members| members.contains_key("me"))
    })
    .await;
    let mut rng = Rng::seeded("cancel-questions");
    let mut dropped = 0;
    for _ in 0..30 {
        let question: futures::future::LocalBoxFuture<'_, ()> = match rng.below(3) {
            // Each sent when it is made (`Addr::send` queues at once), awaited by the future.
            0 => {
                let asked = cache.send(Snapshot);
                Box::pin(async move {
                    let _ = asked.await;
                })
            }
            1 => {
                let asked = member.send(Members);
                Box::pin(async move {
                    let _ = asked.await;
                })
            }
            _ => {
                let asked = counter.send(GetCount);
                Box::pin(async move {
                    let _ = asked.await;
                })
            }
        };
        // Half dropped at once (before the actor took it), half within a loopback round trip.
        if rng.below(2) == 0 {
            drop(question);
            dropped += 1;
        } else if let futures::future::Either::Right(_) =
            futures::future::select(question, Box::pin(actix_rt::time::sleep(rng.drop_delay() / 8))).await
        {
            dropped += 1;
        }
        let (nodes, members, count) = bounded(
            "the next answers",
            futures::future::join3(cache.send(Snapshot), member.send(Members), counter.send(GetCount)),
        )
        .await;
        assert!(nodes.expect("cache").contains_key("/c/x"));
        assert!(members.expect("member").contains_key("me"));
        assert_eq!(count.expect("counter").expect("count").value, 7);
    }
    println!("{dropped} of 30 questions dropped");
    assert!(dropped > 0, "no question was dropped");
    member.send(Leave).await.expect("member").expect("leave");
    cache.do_send(StopCache);
    drop(counter);
    nothing_of(&s, &zk, "/").await.expect("nothing left");
    s.close().await;
}

/// The window of a cache stopped before its persistent watch was confirmed, hit on purpose: the
/// replies are held back, the server counts the watch (so the `addWatch` applied), and only then
/// is the cache stopped. Once the reply arrives, the watch is removed: none is left on the
/// server.
#[actix_rt::test]
async fn a_cache_stopped_before_its_watch_was_confirmed_leaves_no_watch() {
    use actix_zookeeper::cache::{CacheConfig, CacheHandle};
    use actix_zookeeper::testkit::{ClientLinks, Direction};
    init_tracing();
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
    let root = unique_root("cache-stop-window");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &root).await;
    s.ensure_path("/c").await.expect("dir");
    let Some(before) = watch_count(&zk) else { return };
    links.proxy(0).set_latency(Direction::Downstream, Duration::from_millis(600));
    let cache = CacheHandle::start(s.clone(), CacheConfig::new("/c")).expect("cache");
    let deadline = Instant::now() + Duration::from_secs(5);
    while watch_count(&zk).is_some_and(|now| now <= before) {
        assert!(Instant::now() < deadline, "the server never counted the cache's watch");
        actix_rt::time::sleep(Duration::from_millis(5)).await;
    }
    let stopped = cache.stop();
    links.proxy(0).set_latency(Direction::Downstream, Duration::ZERO);
    bounded("the cache's stop", stopped).await;
    settled(&s, &zk, "/", &[], Some(before)).await.unwrap_or_else(|e| panic!("{e}"));
    s.close().await;
}
