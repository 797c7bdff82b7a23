//! The typed handles (`LockHandle`, `SemaphoreHandle`, `ElectionHandle`,
//! `SessionHandle::connected`) against a real ZooKeeper: each method does what its doc says, a
//! stopped actor is a typed error, and a dropped `acquire` never keeps a grant nobody has. Every
//! recipe handle's `start` refuses a path that is not one, and then nothing starts.
#![cfg(feature = "testkit")]

use crate::common;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_zookeeper::election::{ElectionConfig, ElectionError, ElectionHandle};
use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{TestZooKeeper, ZkServer, unique_root};
use common::*;

const WAIT: Duration = Duration::from_secs(20);

/// Polls `future` once, so that its request is on its way, and hands it back.
async fn poll_once<F: Future + Unpin>(mut future: F) -> F {
    std::future::poll_fn(|cx: &mut Context<'_>| {
        let _ = Pin::new(&mut future).poll(cx);
        Poll::Ready(())
    })
    .await;
    future
}

#[actix_rt::test]
async fn a_lock_handle_acquires_tries_releases_and_names_holder_and_waiters() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("lock-handle");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let alice = LockHandle::start(a.clone(), LockConfig::new("/l").with_participant_id("alice")).expect("lock");
    let bob = LockHandle::start(b.clone(), LockConfig::new("/l").with_participant_id("bob")).expect("lock");
    assert_eq!(alice.holder().await, Ok(None), "nobody holds a lock nobody asked for");

    let grant = alice.acquire(None).await.expect("alice acquires");
    assert_eq!(alice.acquire_reentrant(None).await, Ok(grant.clone()), "holding already, re-entrant: the same grant");
    assert_eq!(bob.try_acquire().await, Ok(None), "held by alice: bob's try says no");
    let waiting = actix_rt::spawn(bob.acquire(Some(Duration::from_secs(10))));
    wait_until_async("the handle's effect", || async { alice.participants().await.map(|p| p.len()) == Ok(2) }).await;
    assert_eq!(bob.participants().await, Ok(vec!["alice".to_string(), "bob".to_string()]));
    assert_eq!(bob.holder().await, Ok(Some("alice".to_string())));

    alice.release().await.expect("alice releases");
    let bobs = bounded("bob gets the lock", waiting).await.expect("task").expect("bob acquires");
    assert!(bobs.token > grant.token);
    assert_eq!(alice.holder().await, Ok(Some("bob".to_string())));
    assert_eq!(alice.release().await, Err(LockError::NotHeld { dir: "/l".into() }));
    let timed_out = alice.acquire(Some(Duration::from_millis(200))).await;
    assert!(matches!(timed_out, Err(LockError::Timeout { .. })), "{timed_out:?}");
    bob.release().await.expect("bob releases");
    a.close().await;
    b.close().await;
}

#[actix_rt::test]
async fn a_semaphore_handle_hands_out_its_leases_and_no_more() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("sem-handle");
    let s = session_at(&zk.connect_string(), &root).await;
    let pool: Vec<_> = (0..3)
        .map(|i| {
            SemaphoreHandle::start(s.clone(), SemaphoreConfig::new("/pool", 2).with_participant_id(format!("p{i}")))
                .expect("semaphore")
        })
        .collect();
    let first = pool[0].acquire(None).await.expect("first lease");
    let second = pool[1].acquire(None).await.expect("second lease");
    assert_ne!(first.node, second.node);
    let third = pool[2].acquire(Some(Duration::from_millis(500))).await;
    assert!(matches!(third, Err(LockError::Timeout { .. })), "only two leases: {third:?}");
    assert_eq!(pool[2].participants().await.map(|p| p.len()), Ok(2));
    pool[0].release().await.expect("give one back");
    pool[2].acquire(Some(Duration::from_secs(10))).await.expect("the third gets the freed lease");

    let none = SemaphoreHandle::start(s.clone(), SemaphoreConfig::new("/none", 0));
    assert!(matches!(none, Err(LockError::InvalidConfig { .. })), "0 leases is refused at start");
    // The actor started directly (no handle) answers its first request with it.
    let none = actix::Actor::start(SemaphoreActor::new(s.clone(), SemaphoreConfig::new("/none", 0)));
    let answer = bounded("acquire", none.send(Acquire::default())).await.expect("actor");
    assert!(matches!(answer, Err(LockError::InvalidConfig { .. })), "0 leases is a typed error");
    s.close().await;
}

#[actix_rt::test]
async fn a_stopped_actor_is_a_typed_error_not_a_mailbox_error() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("stopped-handle");
    let s = session_at(&zk.connect_string(), &root).await;
    let lock = LockHandle::start(s.clone(), LockConfig::new("/l")).expect("lock");
    let election = ElectionHandle::start(s.clone(), ElectionConfig::new("/e")).expect("election");
    election.stop().await;
    lock.stop().await;
    assert_eq!(lock.acquire(None).await, Err(LockError::Stopped { dir: "/l".into() }));
    assert_eq!(lock.release().await, Err(LockError::Stopped { dir: "/l".into() }));
    assert_eq!(election.leader().await, Err(ElectionError::Stopped { path: "/e".into() }));
    assert_eq!(election.leadership().await.map(|_| ()), Err(ElectionError::Stopped { path: "/e".into() }));
    s.close().await;
}

/// The participant's session goes through a proxy that delays requests by 300 ms, so its
/// node's delete lands well after a stop is asked for; the node is read on another session the
/// moment `stop()` resolves. (A `stop()` that resolved when the actor stopped, its node deleted
/// right after, failed this.)
#[actix_rt::test]
async fn an_election_stop_resolves_once_the_participant_and_its_node_are_gone() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("stop-election");
    let Proxied { proxy, session: s, observer } = proxied(&zk.connect_string(), &root, Duration::from_secs(4)).await;
    let election = ElectionHandle::start(s.clone(), ElectionConfig::new("/e")).expect("election");
    bounded("leadership", election.leadership()).await.expect("leads");
    assert!(election.addr().connected(), "running before the stop");
    assert_eq!(children(&observer, "/e").await.len(), 1, "in line before the stop (control)");
    proxy.set_latency(actix_zookeeper::testkit::Direction::Upstream, Duration::from_millis(300));
    bounded("the stop", election.stop()).await;
    assert!(!election.addr().connected(), "the participant is gone once stop() resolved");
    assert_eq!(children(&observer, "/e").await, Vec::<String>::new(), "the node is gone once stop() resolved");
    assert_eq!(election.leader().await, Err(ElectionError::Stopped { path: "/e".into() }));
    observer.close().await;
    s.close().await;
}

/// Regression: a grant handed to a caller that has just gone away stayed with an actor
/// nobody would release. Here the grant reaches the caller's reply channel and the caller drops
/// its `acquire` future without polling it again: the handle gives the grant back, so the next
/// participant gets the lock. The control does the same with the raw `send(Acquire)` future:
/// there the grant is lost and the lock stays held, which shows the test can catch the defect.
#[actix_rt::test]
async fn a_grant_that_reached_a_dropped_acquire_is_given_back() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("dropped-acquire");
    let s = session_at(&zk.connect_string(), &root).await;
    for raw in [false, true] {
        let dir = format!("/l-{raw}");
        let a = LockHandle::start(s.clone(), LockConfig::new(&dir)).expect("lock");
        let b = LockHandle::start(s.clone(), LockConfig::new(&dir)).expect("lock");
        let c = LockHandle::start(s.clone(), LockConfig::new(&dir)).expect("lock");
        a.acquire(None).await.expect("a holds");
        let events = Recorded::<LockEvent>::start();
        b.subscribe(events.recipient.clone());
        // B waits: its request is sent, its future is kept but not polled any more.
        let dropped: Pin<Box<dyn Future<Output = ()>>> = if raw {
            let request = b.addr().send(Acquire::default());
            Box::pin(async move {
                let _ = request.await;
            })
        } else {
            let acquiring = b.acquire(None);
            Box::pin(async move {
                let _ = acquiring.await;
            })
        };
        let dropped = poll_once(dropped).await;
        wait_until_async("the handle's effect", || async { a.participants().await.map(|p| p.len()) == Ok(2) }).await;
        a.release().await.expect("a releases");
        // The grant is in B's reply channel once B's subscribers hear of it.
        events.wait_for(0, WAIT, |e| matches!(e, LockEvent::Acquired { .. })).await;
        actix_rt::time::sleep(Duration::from_millis(100)).await;
        drop(dropped);
        let c_gets_it = c.acquire(Some(Duration::from_secs(3))).await;
        if raw {
            assert!(
                matches!(c_gets_it, Err(LockError::Timeout { .. })),
                "control: the raw request lost the grant, and the lock stays held: {c_gets_it:?}"
            );
            b.release().await.expect("b gives back what nobody took");
        } else {
            c_gets_it.expect("the handle gave the grant back: c gets the lock");
            c.release().await.expect("c releases");
        }
    }
    s.close().await;
}

#[actix_rt::test]
async fn an_election_handle_awaits_leadership_resigns_requeues_and_rejoins() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("election-handle");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let alpha =
        ElectionHandle::start(a.clone(), ElectionConfig::new("/e").with_participant_id("alpha")).expect("election");
    let term = bounded("alpha leads", alpha.leadership()).await.expect("alpha leads");
    let bravo =
        ElectionHandle::start(b.clone(), ElectionConfig::new("/e").with_participant_id("bravo")).expect("election");
    let bravo_leads = actix_rt::spawn(bravo.leadership());
    wait_until_async("the handle's effect", || async { alpha.participants().await.map(|p| p.len()) == Ok(2) }).await;
    assert_eq!(bravo.leader().await, Ok(Some("alpha".to_string())));
    assert_eq!(bravo.participants().await, Ok(vec!["alpha".to_string(), "bravo".to_string()]));
    assert_eq!(alpha.leadership().await.map(|t| t.token), Ok(term.token), "leading: answered at once");

    alpha.resign_and_requeue().await.expect("alpha hands over");
    let bravos = bounded("bravo leads", bravo_leads).await.expect("task").expect("bravo leads");
    assert!(bravos.token > term.token);
    assert_eq!(alpha.participants().await, Ok(vec!["bravo".to_string(), "alpha".to_string()]), "alpha at the back");

    bravo.resign().await.expect("bravo leaves");
    assert_eq!(bravo.leadership().await.map(|_| ()), Err(ElectionError::NotParticipating { path: "/e".into() }));
    bounded("alpha leads again", alpha.leadership()).await.expect("alpha leads again");
    bravo.join().await.expect("bravo rejoins");
    wait_until_async("the handle's effect", || async { alpha.participants().await.map(|p| p.len()) == Ok(2) }).await;
    a.close().await;
    b.close().await;
}

#[actix_rt::test]
async fn connected_resolves_when_the_session_is_up_and_again_after_a_server_restart() {
    init_tracing();
    let mut server = ZkServer::start().expect("ZooKeeper");
    let cfg = SessionConfig::new(server.connect_string()).with_session_timeout(Duration::from_secs(10));
    let session = SessionHandle::start(cfg).expect("session");
    let first = bounded("connected", session.connected()).await.expect("connected");
    assert!(first.connected);
    server.stop().expect("stop");
    // Wait until the session has noticed.
    wait_until_async("the handle's effect", || async { session.session().await.is_some_and(|s| !s.connected) }).await;
    let again = actix_rt::spawn(session.connected());
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert!(!again.is_finished(), "connected() waits while the server is down");
    server.restart().expect("restart");
    let second = bounded("connected again", again).await.expect("task").expect("connected again");
    assert_eq!(second.session_id, first.session_id, "the same session, reconnected");
    session.close().await;
    assert_eq!(session.connected().await.map(|_| ()), Err(Error::Closed));
}

/// One lifetime rule for the session and every recipe: dropping the last address stops the
/// actor and ends what it held. A lock whose last handle is dropped releases; a session whose
/// last handle is dropped (the lock's own included) closes, and its ephemerals go.
#[actix_rt::test]
async fn dropping_the_last_handle_releases_the_lock_and_closes_the_session() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("last-handle");
    let observer = session_at(&zk.connect_string(), &root).await;
    let s = session_at(&zk.connect_string(), &root).await;
    s.create("/mine", "", CreateMode::Ephemeral).await.expect("an ephemeral of the session");
    let lock = LockHandle::start(s.clone(), LockConfig::new("/l")).expect("lock");
    lock.acquire(None).await.expect("acquire");
    drop(lock);
    wait_until_async("the handle's effect", || async {
        observer.children("/l").await.map(|c| c.names.is_empty()).unwrap_or(true)
    })
    .await;
    assert!(observer.exists("/mine").await.expect("exists").is_some(), "the session lives while a handle does");
    drop(s);
    wait_until_async("the handle's effect", || async { observer.exists("/mine").await.expect("exists").is_none() })
        .await;
    observer.close().await;
}

/// One subscriber of two lock handles tells their events apart by the participant each names:
/// every grant and release of alice's is told as alice's, bob's as bob's, over several rounds
/// and through an expiry of alice's session (her `Lost` is hers).
#[actix_rt::test]
async fn one_subscriber_of_two_lock_handles_tells_their_events_apart() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("lock-events-named");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let alice = LockHandle::start(a.clone(), LockConfig::new("/l").with_participant_id("alice")).expect("lock");
    let bob = LockHandle::start(b.clone(), LockConfig::new("/l").with_participant_id("bob")).expect("lock");
    let heard = Recorded::<LockEvent>::start();
    alice.subscribe(heard.recipient.clone());
    bob.subscribe(heard.recipient.clone());
    let mut grants = Vec::new();
    for _ in 0..3 {
        for (who, lock) in [("alice", &alice), ("bob", &bob)] {
            let grant = lock.acquire(None).await.expect("acquire");
            lock.release().await.expect("release");
            grants.push((who, grant));
        }
    }
    for (who, grant) in &grants {
        heard
            .wait_for(
                0,
                WAIT,
                |e| matches!(e, LockEvent::Acquired { participant, grant: g } if participant == who && g == grant),
            )
            .await;
        heard
            .wait_for(
                0,
                WAIT,
                |e| matches!(e, LockEvent::Released { participant, node } if participant == who && *node == grant.node),
            )
            .await;
    }
    let held = alice.acquire(None).await.expect("alice again");
    let info = a.session().await.expect("alice's session").info;
    actix_zookeeper::testkit::expire_session(&zk.connect_string(), &info).await.expect("expire alice's session");
    let (_, lost) =
        heard.wait_for(0, WAIT, |e| matches!(e, LockEvent::Lost { token, .. } if *token == held.token)).await;
    assert_eq!(lost.participant(), "alice", "{lost:?}");
    for event in heard.snapshot() {
        let nodes_of =
            |who: &str| grants.iter().filter(|(w, _)| *w == who).map(|(_, g)| g.node.clone()).collect::<Vec<_>>();
        match &event {
            LockEvent::Acquired { participant, grant } if grant.node != held.node => {
                assert!(nodes_of(participant).contains(&grant.node), "{event:?} names the wrong participant")
            }
            LockEvent::Released { participant, node } => {
                assert!(nodes_of(participant).contains(node), "{event:?} names the wrong participant")
            }
            _ => {}
        }
    }
    a.close().await;
    b.close().await;
}

/// A lock's and a semaphore's `stop()` give back what they hold (or leave the line) and resolve
/// only once the node is deleted: their session goes through a proxy that delays requests by
/// 300 ms, and the nodes are read on another session the moment `stop()` resolves.
#[actix_rt::test]
async fn lock_and_semaphore_stops_resolve_once_their_nodes_are_gone() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("stop-lock");
    let Proxied { proxy, session: s, observer } = proxied(&zk.connect_string(), &root, Duration::from_secs(4)).await;
    let holder = LockHandle::start(s.clone(), LockConfig::new("/l").with_participant_id("holder")).expect("lock");
    let waiter = LockHandle::start(s.clone(), LockConfig::new("/l").with_participant_id("waiter")).expect("lock");
    let pool = SemaphoreHandle::start(s.clone(), SemaphoreConfig::new("/p", 1)).expect("semaphore");
    holder.acquire(None).await.expect("holder");
    let waiting = actix_rt::spawn(waiter.acquire(None));
    pool.acquire(None).await.expect("lease");
    wait_until_async("two in line", || async { children(&observer, "/l").await.len() == 2 }).await;
    assert_eq!(children(&observer, "/p/leases").await.len(), 1, "the lease is held (control)");

    proxy.set_latency(actix_zookeeper::testkit::Direction::Upstream, Duration::from_millis(300));
    bounded("the waiter's stop", waiter.stop()).await;
    assert!(!waiter.addr().connected(), "stopped once stop() resolved");
    assert_eq!(children(&observer, "/l").await.len(), 1, "the waiter left the line before stop() resolved");
    assert!(bounded("the dropped wait", waiting).await.expect("task").is_err(), "its acquire is answered");
    bounded("the holder's stop", holder.stop()).await;
    assert_eq!(children(&observer, "/l").await, Vec::<String>::new(), "released before stop() resolved");
    assert_eq!(holder.acquire(None).await, Err(LockError::Stopped { dir: "/l".into() }));
    bounded("the pool's stop", pool.stop()).await;
    assert_eq!(children(&observer, "/p/leases").await, Vec::<String>::new(), "the lease is back");
    proxy.set_latency(actix_zookeeper::testkit::Direction::Upstream, Duration::ZERO);
    observer.close().await;
    s.close().await;
}

/// Every handle starts the same way, `start(session, config) -> Result`: a path that is not one
/// is refused by `start` with an error naming it, and nothing starts (no actor reports on the
/// session's board, no node is made, no queue worker is built).
#[actix_rt::test]
async fn every_start_refuses_a_path_that_is_not_one_and_nothing_starts() {
    use actix_zookeeper::counter::{CounterError, SharedCountConfig, SharedCountHandle};
    use actix_zookeeper::election::ElectionObserverHandle;
    use actix_zookeeper::queue::{ConsumerConfig, QueueConsumerHandle, QueueError};
    use actix_zookeeper::shared::{SharedValueConfig, SharedValueError, SharedValueHandle};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("handle-starts");
    let s = session_at(&zk.connect_string(), &root).await;
    let bad = "no/leading/slash";
    let names_it = |error: &Error| matches!(error, Error::InvalidPath { path, .. } if path == bad);

    match LockHandle::start(s.clone(), LockConfig::new(bad)) {
        Err(LockError::ZooKeeper(error)) => assert!(names_it(&error), "{error:?}"),
        other => panic!("lock: {other:?}"),
    }
    match SemaphoreHandle::start(s.clone(), SemaphoreConfig::new(bad, 2)) {
        Err(LockError::ZooKeeper(error)) => assert!(names_it(&error), "{error:?}"),
        other => panic!("semaphore: {other:?}"),
    }
    match SemaphoreHandle::start(s.clone(), SemaphoreConfig::new("/pool", 0)) {
        Err(LockError::InvalidConfig { dir, .. }) => assert_eq!(dir, "/pool"),
        other => panic!("semaphore of no lease: {other:?}"),
    }
    match MultiLock::start(s.clone(), vec![LockConfig::new("/fine"), LockConfig::new(bad)]) {
        Err(LockError::ZooKeeper(error)) => assert!(names_it(&error), "{error:?}"),
        other => panic!("multi-lock: {}", other.is_ok()),
    }
    match ElectionHandle::start(s.clone(), ElectionConfig::new(bad)) {
        Err(ElectionError::ZooKeeper(error)) => assert!(names_it(&error), "{error:?}"),
        other => panic!("election: {other:?}"),
    }
    match ElectionObserverHandle::start(s.clone(), bad) {
        Err(ElectionError::ZooKeeper(error)) => assert!(names_it(&error), "{error:?}"),
        other => panic!("observer: {other:?}"),
    }
    match SharedCountHandle::start(s.clone(), SharedCountConfig::new(bad)) {
        Err(CounterError::ZooKeeper(error)) => assert!(names_it(&error), "{error:?}"),
        other => panic!("count: {other:?}"),
    }
    match SharedValueHandle::start(s.clone(), SharedValueConfig::new(bad)) {
        Err(SharedValueError::ZooKeeper(error)) => assert!(names_it(&error), "{error:?}"),
        other => panic!("value: {other:?}"),
    }
    let built = Arc::new(AtomicUsize::new(0));
    for config in [ConsumerConfig::new(bad), ConsumerConfig::new("/queue").with_dead_letter(bad)] {
        let counted = built.clone();
        let config = config.with_workers(2, move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            Acker
        });
        match QueueConsumerHandle::start(s.clone(), config) {
            Err(QueueError::ZooKeeper(error)) => assert!(names_it(&error), "{error:?}"),
            other => panic!("consumer: {}", other.is_ok()),
        }
    }

    // Nothing started: an actor reports on the board as it starts, and would make its node; a
    // consumer builds its workers as it starts. The good half of the multi-lock started nothing
    // either. Checked after a round trip, so that an actor started by mistake had its turn.
    s.ensure_path("/probe").await.expect("a round trip");
    actix_rt::task::yield_now().await;
    let health = s.health();
    assert!(health.recipes.is_empty(), "{:#?}", health.recipes);
    assert_eq!(built.load(Ordering::SeqCst), 0, "workers were built");
    let names = children(&s, "/").await;
    assert_eq!(names, vec!["probe".to_owned()], "nodes were made");
    s.close().await;
}

/// A queue worker that settles every delivery (built only if a consumer starts).
struct Acker;

impl actix::Actor for Acker {
    type Context = actix::Context<Self>;
}

impl actix::Handler<actix_zookeeper::queue::Delivery> for Acker {
    type Result = ();

    fn handle(&mut self, delivery: actix_zookeeper::queue::Delivery, ctx: &mut Self::Context) {
        use actix::AsyncContext;
        ctx.spawn(actix::fut::wrap_future(async move {
            let _ = delivery.ack().await;
        }));
    }
}

impl actix::Handler<actix_zookeeper::queue::Revoked> for Acker {
    type Result = ();

    fn handle(&mut self, _: actix_zookeeper::queue::Revoked, _: &mut Self::Context) {}
}

/// A lock or semaphore handle outlives its session's close: the participant runs on the
/// session's thread, and still answers what it is asked with the session's error (`Closed`),
/// not as an actor that stopped under its feet when the session's thread ended.
#[actix_rt::test]
async fn a_lock_handle_answers_closed_after_its_session_closed() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("closed-under");
    let s = session_at(&zk.connect_string(), &root).await;
    let lock = LockHandle::start(s.clone(), LockConfig::new("/l")).expect("lock");
    let semaphore = SemaphoreHandle::start(s.clone(), SemaphoreConfig::new("/sem", 2)).expect("semaphore");
    assert_eq!(lock.participants().await, Ok(Vec::new()), "the lock's participant answers");
    s.close().await;
    let lock_after = bounded("a lock acquire after the close", lock.acquire(None)).await;
    assert!(matches!(lock_after, Err(LockError::ZooKeeper(actix_zookeeper::Error::Closed))), "{lock_after:?}");
    let lease_after = bounded("a semaphore acquire after the close", semaphore.acquire(None)).await;
    assert!(matches!(lease_after, Err(LockError::ZooKeeper(actix_zookeeper::Error::Closed))), "{lease_after:?}");
}
