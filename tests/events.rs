//! Events as streams (`events()`, `actix_zookeeper::events::events`) against a real ZooKeeper:
//! read inside an actor with `ctx.add_stream` (whose address nobody keeps: the idiom that heard
//! nothing through `subscribe`), read with `.next().await`, the rule for a reader that falls
//! behind, and the session's events across a server restart.
#![cfg(feature = "testkit")]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::counter::{SetCount, SharedCount, SharedCountConfig};
use actix_zookeeper::election::{ElectionConfig, ElectionEvent, ElectionHandle};
use actix_zookeeper::events::{EVENT_BUFFER, Missed};
use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{TestZooKeeper, ZkServer, unique_root};
use common::*;
use futures::StreamExt;

/// An actor that logs a lock's events from a stream; nobody keeps its address.
struct Logger {
    log: Arc<Mutex<Vec<LockEvent>>>,
}

impl Actor for Logger {
    type Context = Context<Self>;
}

impl StreamHandler<Result<LockEvent, Missed>> for Logger {
    fn handle(&mut self, event: Result<LockEvent, Missed>, _: &mut Context<Self>) {
        self.log.lock().expect("log").push(event.expect("a reader this fast misses nothing"));
    }
}

#[actix_rt::test]
async fn an_actor_whose_address_nobody_keeps_hears_a_locks_events_through_add_stream() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("events-actor")).await;
    let lock = LockHandle::start(s.clone(), LockConfig::new("/l").with_participant_id("me")).expect("lock");
    let log = Arc::new(Mutex::new(Vec::new()));
    let events = lock.events();
    let shared = log.clone();
    // The address is dropped at once: `subscribe(Logger.start().recipient())` heard nothing.
    drop(Logger::create(move |ctx| {
        ctx.add_stream(events);
        Logger { log: shared }
    }));
    let grant = lock.acquire(None).await.expect("acquire");
    lock.release().await.expect("release");
    wait_until("both events heard", || log.lock().expect("log").len() == 2).await;
    assert_eq!(
        *log.lock().expect("log"),
        [
            LockEvent::Acquired { participant: "me".into(), grant: grant.clone() },
            LockEvent::Released { participant: "me".into(), node: grant.node }
        ]
    );
    s.close().await;
}

/// Read with `next`; dropped, the election goes on as before. That the dropped stream's
/// listener is let go of is checked where every recipe's events go through
/// (`events.rs::tests::a_dropped_stream_leaves_the_subscribers_and_the_others_go_on`): no
/// handle counts its readers.
#[actix_rt::test]
async fn a_stream_read_with_next_hears_an_elections_events_and_dropping_it_harms_nothing() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("events-next")).await;
    let election =
        ElectionHandle::start(s.clone(), ElectionConfig::new("/e").with_participant_id("me")).expect("election");
    let mut events = election.events();
    let term = election.leadership().await.expect("leads");
    let first = bounded("an event", events.next()).await;
    assert_eq!(first, Some(Ok(ElectionEvent::LeadershipAcquired { token: term.token })));
    drop(events);
    // Nobody reads any more: the election goes on as before.
    election.resign_and_requeue().await.expect("resign");
    election.leadership().await.expect("leads again");
    s.close().await;
}

/// The documented rule: a reader [`EVENT_BUFFER`] events behind misses the events that do not fit,
/// is told how many (`Err(Missed)`) before the next event it gets, and hears the rest in order.
#[actix_rt::test]
async fn a_reader_that_falls_behind_is_told_how_many_events_it_missed() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("events-lag")).await;
    let lock = LockHandle::start(s.clone(), LockConfig::new("/l")).expect("lock");
    let mut events = lock.events();
    let cycles = EVENT_BUFFER / 2 + 22; // two events a cycle: 44 more than fit
    for _ in 0..cycles {
        lock.acquire(None).await.expect("acquire");
        lock.release().await.expect("release");
    }
    // The reader catches up with what fit, then the next event comes.
    for n in 0..EVENT_BUFFER {
        let event = bounded("a buffered event", events.next()).await.expect("the lock lives");
        assert!(event.is_ok(), "event {n}: {event:?}");
    }
    let grant = lock.acquire(None).await.expect("one more");
    let notice = bounded("the notice", events.next()).await.expect("the lock lives");
    assert_eq!(notice, Err(Missed { count: (2 * cycles - EVENT_BUFFER) as u64 }));
    let next = bounded("the event after it", events.next()).await.expect("the lock lives");
    assert!(matches!(next, Ok(LockEvent::Acquired { grant: ref told, .. }) if *told == grant), "{next:?}");
    lock.release().await.expect("release");
    s.close().await;
}

/// For actors without a handle: `actix_zookeeper::events::events(&addr)`.
#[actix_rt::test]
async fn a_counters_changes_read_as_a_stream() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("events-counter")).await;
    let counter = SharedCount::new(s.clone(), SharedCountConfig::new("/count")).start();
    let mut changes = actix_zookeeper::events::events(&counter);
    for value in 1..=3 {
        counter.send(SetCount { value }).await.expect("actor").expect("set");
        loop {
            let change = bounded("a change", changes.next()).await.expect("alive").expect("in time");
            if change.value == value {
                break;
            }
        }
    }
    s.close().await;
}

/// The session's own events through a server restart: where it stands first, then the fault.
#[actix_rt::test]
async fn the_sessions_events_as_a_stream_through_a_server_restart() {
    init_tracing();
    let mut server = ZkServer::start().expect("ZooKeeper");
    let s = session_at(&server.connect_string(), &unique_root("events-session")).await;
    let mut events = s.events();
    let now = bounded("the current state", events.next()).await;
    assert!(matches!(now, Some(Ok(SessionEvent::Connected { generation: 1, .. }))), "{now:?}");
    server.restart().expect("restart");
    let mut seen = Vec::new();
    while !matches!(seen.last(), Some(SessionEvent::Reconnected { .. })) {
        seen.push(bounded("the restart's events", events.next()).await.expect("alive").expect("in time"));
    }
    assert!(matches!(seen[0], SessionEvent::Suspended { generation: 1, .. }), "{seen:?}");
    s.close().await;
    loop {
        match bounded("Closed", events.next()).await {
            Some(Ok(SessionEvent::Closed)) | None => break,
            Some(other) => assert!(other.is_ok(), "{other:?}"),
        }
    }
}

/// An actor that owns a lock (holds its handle), holds it, and reads its events; `owned` picks
/// `read_while_addressed` (else `ctx.add_stream`).
struct LockOwner {
    lock: LockHandle,
    owned: bool,
    heard: Arc<Mutex<Vec<LockEvent>>>,
}

impl Actor for LockOwner {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if self.owned {
            self.lock.events().read_while_addressed(ctx);
        } else {
            ctx.add_stream(self.lock.events());
        }
        let lock = self.lock.clone();
        ctx.spawn(
            async move {
                lock.acquire(None).await.expect("the owner takes the lock");
            }
            .into_actor(self),
        );
    }
}

impl StreamHandler<Result<LockEvent, Missed>> for LockOwner {
    fn handle(&mut self, event: Result<LockEvent, Missed>, _: &mut Context<Self>) {
        self.heard.lock().expect("heard").push(event.expect("no miss"));
    }
}

/// An actor that owns the recipe whose events it reads stops when its last
/// address is dropped, and the recipe with it (the lock is released). With `ctx.add_stream` (the
/// control) the two keep each other alive: the lock stays held after the owner was let go.
#[actix_rt::test]
async fn an_actor_reading_the_events_of_a_recipe_it_owns_stops_with_its_last_address() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("events-owner");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let other = LockHandle::start(b.clone(), LockConfig::new("/l")).expect("lock");
    for owned in [true, false] {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let owner = LockOwner {
            lock: LockHandle::start(a.clone(), LockConfig::new("/l")).expect("lock"),
            owned,
            heard: heard.clone(),
        }
        .start();
        wait_until("the owner holds", || {
            heard.lock().expect("heard").iter().any(|e| matches!(e, LockEvent::Acquired { .. }))
        })
        .await;
        drop(owner);
        let taken = tokio::time::timeout(Duration::from_secs(3), other.acquire(None)).await;
        if owned {
            taken.expect("the owner stopped and its lock was released").expect("acquire");
            other.release().await.expect("release");
        } else {
            // The control: the cycle holds the lock; a way out is the session's close below.
            assert!(taken.is_err(), "with add_stream the owner and its lock keep each other alive: {taken:?}");
            bounded("a close", a.close()).await;
        }
    }
    b.close().await;
}
