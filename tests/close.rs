//! `SessionHandle::close()` against a real ZooKeeper: the recipes on the session let go first
//! (release, resign, leave, deregister) while the session can still carry their deletes, so their
//! subscribers hear what they did (`Released`, `Resigned`), not that the session went; and a close
//! whose server is gone does not wait for goodbyes that cannot happen.
#![cfg(feature = "testkit")]

use crate::common;

use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::election::{ElectionConfig, ElectionEvent, ElectionHandle, LeadershipLostReason};
use actix_zookeeper::group::{GroupConfig, GroupEvent, GroupMember, Subscribe as GroupSubscribe};
use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{TestZooKeeper, unique_root};
use common::*;
use futures::StreamExt;

async fn session_at(connect: &str, root: &str) -> SessionHandle {
    let cfg = SessionConfig::new(connect).with_chroot(root).with_session_timeout(Duration::from_secs(4));
    connected(cfg).await.0
}

/// Reads `stream` until `done` matches, failing the test after 20 s.
async fn until<E: std::fmt::Debug>(
    what: &str,
    stream: &mut (impl futures::Stream<Item = Result<E, actix_zookeeper::events::Missed>> + Unpin),
    done: impl Fn(&E) -> bool,
) -> Vec<E> {
    let mut seen = Vec::new();
    loop {
        match bounded(what, stream.next()).await {
            Some(Ok(event)) => {
                let stop = done(&event);
                seen.push(event);
                if stop {
                    return seen;
                }
            }
            other => panic!("{what}: {other:?} after {seen:?}"),
        }
    }
}

#[actix_rt::test]
async fn closing_a_session_lets_its_recipes_release_resign_and_leave_first() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("close-goodbye");
    let (s, other) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let lock = LockHandle::start(s.clone(), LockConfig::new("/l")).expect("lock");
    let waiter = LockHandle::start(s.clone(), LockConfig::new("/w")).expect("lock");
    let pool = SemaphoreHandle::start(s.clone(), SemaphoreConfig::new("/s", 1)).expect("semaphore");
    let election =
        ElectionHandle::start(s.clone(), ElectionConfig::new("/e").with_participant_id("me")).expect("election");
    let member = GroupMember::new(s.clone(), GroupConfig::new("/g", "me")).expect("config").start();
    let group_events = Recorded::<GroupEvent>::start();
    member.do_send(GroupSubscribe { recipient: group_events.recipient.clone() });
    let (mut lock_events, mut pool_events, mut election_events) = (lock.events(), pool.events(), election.events());

    let grant = lock.acquire(None).await.expect("lock");
    let lease = pool.acquire(None).await.expect("lease");
    let term = election.leadership().await.expect("leads");
    group_events.wait_for(0, WAIT, |e| matches!(e, GroupEvent::Joined { .. })).await;
    // A waiter in line behind another session's holder.
    let blocker = LockHandle::start(other.clone(), LockConfig::new("/w")).expect("lock");
    blocker.acquire(None).await.expect("the other session holds /w");
    let waiting = actix_rt::spawn(waiter.acquire(None));
    wait_until_async("the waiter in line", || async { children(&other, "/w").await.len() == 2 }).await;
    // An ephemeral nobody lets go: it goes with the session's end, in the close's own
    // transaction, so its directory's pzxid tells when the session ended.
    s.ensure_path("/m").await.expect("marker dir");
    s.create("/m/marker", "", CreateMode::Ephemeral).await.expect("marker");

    s.close().await;

    until(
        "the lock's release",
        &mut lock_events,
        |e| matches!(e, LockEvent::Released { node, .. } if *node == grant.node),
    )
    .await;
    until(
        "the lease's release",
        &mut pool_events,
        |e| matches!(e, LockEvent::Released { node, .. } if *node == lease.node),
    )
    .await;
    let resigned = ElectionEvent::LeadershipLost { token: term.token, reason: LeadershipLostReason::Resigned };
    until("the resign", &mut election_events, |e| *e == resigned).await;
    let waited = bounded("the waiter's answer", waiting).await.expect("task");
    assert!(matches!(waited, Err(LockError::Cancelled { .. })), "the waiter left the line: {waited:?}");
    for dir in ["/l", "/s/leases", "/e", "/g"] {
        assert!(children(&other, dir).await.is_empty(), "{dir} is empty after the close");
    }
    assert_eq!(children(&other, "/w").await.len(), 1, "only the other session's holder is left in /w");
    // The member left first: its node's delete is an earlier transaction than the session's end
    // (a member that did not would be deleted in the close's own transaction: equal pzxids).
    let pzxid = |dir: &'static str| {
        let other = other.clone();
        async move { other.exists(dir).await.expect("exists").expect("dir").pzxid }
    };
    let (left, ended) = (pzxid("/g").await, pzxid("/m").await);
    assert!(left < ended, "the member left before the session ended: {left} vs {ended}");
    blocker.release().await.expect("release");
    other.close().await;
}

/// The bound: goodbyes that cannot reach the server (the link blackholed just before the close,
/// so the session still looks up) do not hold the close up for ever.
#[actix_rt::test]
async fn a_close_whose_goodbyes_cannot_reach_the_server_still_closes() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = actix_zookeeper::testkit::ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &unique_root("close-cut-off")).await;
    let lock = LockHandle::start(s.clone(), LockConfig::new("/l")).expect("lock");
    let mut events = lock.events();
    lock.acquire(None).await.expect("lock");
    links.blackhole();
    let started = Instant::now();
    bounded("the close", s.close()).await;
    let took = started.elapsed();
    // The goodbyes' bound (5 s) and the close's own wait for the server's answer (at most 5 s
    // more; here the client gives the silent connection up first, and the close ends about 7 s
    // in, which a 7 s bound met only by a hair), and no more than a little on top.
    assert!(took < Duration::from_secs(11), "closed in {took:?} with the link cut");
    let heard = until("the end of the grant", &mut events, |e| matches!(e, LockEvent::Lost { .. })).await;
    assert!(!heard.iter().any(|e| matches!(e, LockEvent::Released { .. })), "no release could happen: {heard:?}");
}

const WAIT: Duration = Duration::from_secs(20);

/// Rows "session closed" of the cache and the counter: neither has a node of its own to let go
/// (the cache's watch goes with the session), so they do not say goodbye; but neither goes on as
/// if nothing happened. The cache tells `CacheFailed { Closed }` and stops on its own (it kept
/// serving a snapshot that no longer followed the tree, without a word); the counter answers
/// every later request with a typed `Closed`, never a stale count as fresh.
#[actix_rt::test]
async fn a_closed_session_ends_its_cache_with_a_word_and_its_counter_answers_closed() {
    use actix_zookeeper::cache::{CacheActor, CacheConfig, CacheEvent, Subscribe as CacheSubscribe};
    use actix_zookeeper::counter::{CounterError, GetCount, SharedCount, SharedCountConfig, add};
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("close-cache-counter")).await;
    s.ensure_path("/c/x").await.expect("tree");
    let events = Recorded::<CacheEvent>::start();
    let cache = CacheActor::new(s.clone(), CacheConfig::new("/c")).expect("config").start();
    cache.do_send(CacheSubscribe { recipient: events.recipient.clone() });
    events.wait_for(0, Duration::from_secs(20), |e| *e == CacheEvent::CacheInitialized).await;
    let counter = SharedCount::new(s.clone(), SharedCountConfig::new("/n")).start();
    add(&counter, 5).await.expect("add");

    bounded("the close", s.close()).await;
    let (_, failed) =
        events.wait_for(0, Duration::from_secs(20), |e| matches!(e, CacheEvent::CacheFailed { .. })).await;
    assert!(matches!(&failed, CacheEvent::CacheFailed { error: Error::Closed }), "{failed:?}");
    // The test keeps the cache's address: it stops on its own.
    wait_until("the cache stopped", || !cache.connected()).await;

    let added = bounded("an add after the close", add(&counter, 1)).await;
    assert!(matches!(added, Err(CounterError::ZooKeeper(Error::Closed))), "{added:?}");
    let read = bounded("a read after the close", counter.send(GetCount)).await.expect("counter");
    assert!(matches!(read, Err(CounterError::ZooKeeper(Error::Closed))), "{read:?}");
}

/// Row "master's session closed" (master–worker): the master's election participant says
/// goodbye for it, so its term ends first (`MastershipEnded`, its actor stopped) and the next
/// candidate's term starts; nothing of the master's is left.
#[actix_rt::test]
async fn closing_a_masters_session_ends_its_term_first_and_the_next_candidate_takes_over() {
    use actix_zookeeper::tasks::{MasterEvent, Stop, Subscribe, TaskMaster, TaskMasterConfig};
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("close-master");
    let (s, other) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let (mine, theirs) = (Recorded::<MasterEvent>::start(), Recorded::<MasterEvent>::start());
    let me = TaskMaster::new(s.clone(), TaskMasterConfig::new("/jobs").with_master_id("me")).expect("config").start();
    me.do_send(Subscribe { recipient: mine.recipient.clone() });
    let (_, began) = mine.wait_for(0, WAIT, |e| matches!(e, MasterEvent::BecameMaster { .. })).await;
    let MasterEvent::BecameMaster { fence } = began else { unreachable!() };
    let next =
        TaskMaster::new(other.clone(), TaskMasterConfig::new("/jobs").with_master_id("next")).expect("config").start();
    next.do_send(Subscribe { recipient: theirs.recipient.clone() });
    wait_until_async("both in line", || async { children(&other, "/jobs/master").await.len() == 2 }).await;

    s.close().await;
    mine.wait_for(0, WAIT, |e| *e == MasterEvent::MastershipEnded { token: fence.token }).await;
    theirs.wait_for(0, WAIT, |e| matches!(e, MasterEvent::BecameMaster { .. })).await;
    assert_eq!(children(&other, "/jobs/master").await.len(), 1, "only the next candidate stands in line");
    next.send(Stop).await.expect("master");
    other.close().await;
}

/// Regression: a second `close()` while the first one's goodbyes are out waits for the
/// same close; it used to close at once, cutting the goodbyes short (the holder's release never
/// reached the server, and its lock ended `Lost` instead of `Released`).
#[actix_rt::test]
async fn a_second_close_waits_for_the_first_ones_goodbyes() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("close-twice");
    for round in 0..5 {
        let s = session_at(&zk.connect_string(), &root).await;
        let lock = LockHandle::start(s.clone(), LockConfig::new(format!("/l{round}"))).expect("lock");
        let mut events = lock.events();
        let grant = lock.acquire(None).await.expect("lock");
        let (first, second) = (s.close(), s.close());
        bounded("both closes", futures::future::join(first, second)).await;
        let heard = until("the end of the grant", &mut events, |e| {
            matches!(e, LockEvent::Released { .. } | LockEvent::Lost { .. })
        })
        .await;
        assert!(
            matches!(heard.last(), Some(LockEvent::Released { node, .. }) if *node == grant.node),
            "round {round}: {heard:?}"
        );
    }
}

/// Issue 39, item 3: `stop()` of a recipe whose session expired while the server cannot be
/// reached resolves (an election's stop was still waiting after 80 s): the session is gone on
/// the server, so nothing of ours can remain, and there is nothing left to delete. Each recipe
/// holds something at the expiry (a lock, leadership, a semaphore lease, a group membership, an
/// ephemeral node, a waiting lock contender), and each stop is bounded.
#[actix_rt::test]
async fn stops_after_an_expiry_with_the_server_unreachable_resolve() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("stop-after-expiry");
    let links = actix_zookeeper::testkit::ClientLinks::to([zk.connect_string()]).expect("proxy");
    let (s, events) = connected(
        SessionConfig::new(links.connect_string()).with_chroot(&root).with_session_timeout(Duration::from_secs(2)),
    )
    .await;
    let other = session_at(&zk.connect_string(), &root).await;

    let lock = LockHandle::start(s.clone(), LockConfig::new("/lock")).expect("lock");
    bounded("lock", lock.acquire(None)).await.expect("held");
    let held_elsewhere = LockHandle::start(other.clone(), LockConfig::new("/busy")).expect("lock");
    bounded("busy", held_elsewhere.acquire(None)).await.expect("held by the other session");
    let waiting = LockHandle::start(s.clone(), LockConfig::new("/busy")).expect("lock");
    let waiter = waiting.acquire(None);
    let election = ElectionHandle::start(s.clone(), ElectionConfig::new("/election")).expect("election");
    bounded("leads", election.leadership()).await.expect("leads");
    let semaphore = SemaphoreHandle::start(s.clone(), SemaphoreConfig::new("/sem", 2)).expect("semaphore");
    bounded("lease", semaphore.acquire(None)).await.expect("a lease");
    let member =
        actix_zookeeper::group::GroupMemberHandle::start(s.clone(), GroupConfig::new("/group", "m1")).expect("member");
    let node = PersistentNodeHandle::start(s.clone(), PersistentNodeConfig::new("/node", CreateMode::Ephemeral))
        .expect("node");
    bounded("node", node.wait_for_initial_create(None)).await.expect("made");
    Queue::new(s.clone(), "/q").put(b"x".to_vec()).await.expect("put");
    let consumer = QueueConsumerHandle::start(s.clone(), ConsumerConfig::new("/q").with_workers(1, |_| HoldingWorker))
        .expect("consumer");
    let discovery = actix_zookeeper::discovery::ServiceDiscovery::new(
        s.clone(),
        actix_zookeeper::discovery::DiscoveryConfig::new("/services"),
    )
    .expect("discovery");
    let registration =
        discovery.register(actix_zookeeper::discovery::ServiceInstance::new("svc", "i1")).await.expect("registered");
    let cache = CacheHandle::start(s.clone(), CacheConfig::new("/q")).expect("cache");
    wait_until_async("the item is claimed", || {
        let other = other.clone();
        async move { other.children("/q/claims").await.is_ok_and(|c| c.names.len() == 1) }
    })
    .await;
    wait_until_async("the member is in", || {
        let other = other.clone();
        async move { other.exists("/group/m1").await.is_ok_and(|stat| stat.is_some()) }
    })
    .await;

    let info = s.session().await.expect("session").info;
    links.blackhole();
    actix_zookeeper::testkit::expire_session(&zk.connect_string(), &info).await.expect("expired on the server");
    let from = events.snapshot().len();
    events.wait_for(from, Duration::from_secs(20), |e| matches!(e, SessionEvent::Expired { .. })).await;

    bounded("the lock's stop", lock.stop()).await;
    bounded("the waiting contender's stop", waiting.stop()).await;
    bounded("the election's stop", election.stop()).await;
    bounded("the semaphore's stop", semaphore.stop()).await;
    bounded("the group member's stop", member.stop()).await;
    bounded("the node's stop", node.stop()).await;
    bounded("the consumer's stop", consumer.stop()).await;
    bounded("the registration's stop", registration.unregister()).await.expect("a dynamic node goes with its session");
    bounded("the cache's stop", cache.stop()).await;
    drop(waiter);
    for (dir, left) in [("/lock", 0), ("/busy", 1), ("/election", 0), ("/sem/leases", 0), ("/group", 0)] {
        let children = other.children(dir).await.map(|c| c.names).unwrap_or_default();
        assert_eq!(children.len(), left, "{dir}: {children:?} (only the other session's lock node stays)");
    }
    assert!(other.exists("/node").await.expect("exists").is_none(), "the ephemeral went with its session");
    links.heal();
    held_elsewhere.stop().await;
    s.close().await;
    other.close().await;
}

/// Issue 39, item 3: a stop that races the session's expiry, with the server unreachable,
/// resolves. The stops are sent while the session still looks alive, and the owners' thread is
/// held until the session actor has moved on to building the next session: the owners then
/// handle the stop before they hear `Expired` (the window the recipes' two-hop session events
/// leave), and their deletes reach a session actor that has no session. Such a delete was queued
/// for whichever session came next, retried for ever with the server gone; it now goes to the
/// session the node was made on, and a session that ended deleted the node itself.
#[actix_rt::test]
async fn stops_sent_as_the_session_expires_resolve_with_the_server_unreachable() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("stop-racing-expiry");
    let links = actix_zookeeper::testkit::ClientLinks::to([zk.connect_string()]).expect("proxy");
    let (s, _events) = connected(
        SessionConfig::new(links.connect_string()).with_chroot(&root).with_session_timeout(Duration::from_secs(2)),
    )
    .await;
    let other = session_at(&zk.connect_string(), &root).await;

    let lock = LockHandle::start(s.clone(), LockConfig::new("/lock")).expect("lock");
    bounded("lock", lock.acquire(None)).await.expect("held");
    let held_elsewhere = LockHandle::start(other.clone(), LockConfig::new("/busy")).expect("lock");
    bounded("busy", held_elsewhere.acquire(None)).await.expect("held by the other session");
    let waiting = LockHandle::start(s.clone(), LockConfig::new("/busy")).expect("lock");
    let waiter = waiting.acquire(None);
    wait_until_async("the waiter stands in line", || {
        let other = other.clone();
        async move { other.children("/busy").await.is_ok_and(|c| c.names.len() == 2) }
    })
    .await;
    let election = ElectionHandle::start(s.clone(), ElectionConfig::new("/election")).expect("election");
    bounded("leads", election.leadership()).await.expect("leads");
    let semaphore = SemaphoreHandle::start(s.clone(), SemaphoreConfig::new("/sem", 2)).expect("semaphore");
    bounded("lease", semaphore.acquire(None)).await.expect("a lease");
    let member =
        actix_zookeeper::group::GroupMemberHandle::start(s.clone(), GroupConfig::new("/group", "m1")).expect("member");
    let node = PersistentNodeHandle::start(s.clone(), PersistentNodeConfig::new("/node", CreateMode::Ephemeral))
        .expect("node");
    bounded("node", node.wait_for_initial_create(None)).await.expect("made");
    Queue::new(s.clone(), "/q").put(b"x".to_vec()).await.expect("put");
    let consumer = QueueConsumerHandle::start(s.clone(), ConsumerConfig::new("/q").with_workers(1, |_| HoldingWorker))
        .expect("consumer");
    let runner = IdleRunner.start();
    let worker = actix_zookeeper::tasks::TaskWorkerHandle::start(
        s.clone(),
        actix_zookeeper::tasks::TaskWorkerConfig::new("/tasks", "w1", runner.recipient()),
    )
    .expect("worker");
    for (what, dir, count) in
        [("claimed", "/q/claims", 1), ("in the group", "/group", 1), ("registered", "/tasks/workers", 1)]
    {
        wait_until_async(what, || {
            let other = other.clone();
            async move { other.children(dir).await.is_ok_and(|c| c.names.len() == count) }
        })
        .await;
    }

    let info = s.session().await.expect("session").info;
    links.blackhole();
    actix_zookeeper::testkit::expire_session(&zk.connect_string(), &info).await.expect("expired on the server");
    // Sent now, while the session still looks alive to the recipes.
    let (lock_stop, waiting_stop, election_stop) = (lock.stop(), waiting.stop(), election.stop());
    let (semaphore_stop, member_stop, node_stop) = (semaphore.stop(), member.stop(), node.stop());
    let (consumer_stop, worker_stop) = (consumer.stop(), worker.stop());
    // The owners run on this thread: hold it until the session actor has handled the expiry.
    let held_from = Instant::now();
    while !matches!(s.health().session.state, actix_zookeeper::health::SessionState::Connecting { .. }) {
        assert!(held_from.elapsed() < Duration::from_secs(30), "the session never declared the expiry");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));

    bounded("the waiting contender's stop", waiting_stop).await;
    bounded("the lock holder's stop", lock_stop).await;
    bounded("the leader's stop", election_stop).await;
    bounded("the semaphore's stop", semaphore_stop).await;
    bounded("the group member's stop", member_stop).await;
    bounded("the node's stop", node_stop).await;
    bounded("the consumer's stop", consumer_stop).await;
    bounded("the task worker's stop", worker_stop).await;
    drop(waiter);
    assert!(other.exists("/node").await.expect("exists").is_none(), "the ephemeral went with its session");
    for (dir, left) in [
        ("/lock", 0),
        ("/busy", 1),
        ("/election", 0),
        ("/sem/leases", 0),
        ("/group", 0),
        ("/q/claims", 0),
        ("/tasks/workers", 0),
    ] {
        let children = other.children(dir).await.map(|c| c.names).unwrap_or_default();
        assert_eq!(children.len(), left, "{dir}: {children:?} (only the other session's lock node stays)");
    }
    links.heal();
    held_elsewhere.stop().await;
    s.close().await;
    other.close().await;
}

/// A task runner that is never given a task.
struct IdleRunner;

impl Actor for IdleRunner {
    type Context = Context<Self>;
}

impl Handler<actix_zookeeper::tasks::TaskAssigned> for IdleRunner {
    type Result = actix_zookeeper::tasks::TaskOutcome;
    fn handle(&mut self, task: actix_zookeeper::tasks::TaskAssigned, _: &mut Context<Self>) -> Self::Result {
        actix_zookeeper::tasks::TaskOutcome::Done(task.data)
    }
}

/// A worker that keeps every delivery (so that its claim is held at the expiry).
struct HoldingWorker;

impl Actor for HoldingWorker {
    type Context = Context<Self>;
}

impl Handler<actix_zookeeper::queue::Delivery> for HoldingWorker {
    type Result = ();
    fn handle(&mut self, _: actix_zookeeper::queue::Delivery, _: &mut Context<Self>) {}
}

impl Handler<actix_zookeeper::queue::Revoked> for HoldingWorker {
    type Result = ();
    fn handle(&mut self, _: actix_zookeeper::queue::Revoked, _: &mut Context<Self>) {}
}

/// Issue 39, item 7: `close_after(serving)` closes the session once the server future ends (as
/// actix-web's does on Ctrl-C), with the recipes letting go first: the election node and the
/// ephemeral node are gone when it resolves, and it returns what the server returned.
#[actix_rt::test]
async fn close_after_a_server_ends_lets_the_recipes_go_first() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("close-after");
    let s = session_at(&zk.connect_string(), &root).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    let election = ElectionHandle::start(s.clone(), ElectionConfig::new("/election")).expect("election");
    bounded("leads", election.leadership()).await.expect("leads");
    let node = PersistentNodeHandle::start(s.clone(), PersistentNodeConfig::new("/node", CreateMode::Ephemeral))
        .expect("node");
    bounded("made", node.wait_for_initial_create(None)).await.expect("made");
    let (stop_serving, serving) = futures::channel::oneshot::channel::<()>();
    let server = async move {
        let _ = serving.await;
        Ok::<u16, std::io::Error>(8080)
    };
    let shutdown = actix_rt::spawn(s.close_after(server));
    actix_rt::time::sleep(Duration::from_millis(100)).await;
    assert!(!shutdown.is_finished(), "nothing closes while the server runs");
    assert!(observer.exists("/node").await.expect("exists").is_some());
    stop_serving.send(()).expect("the server stops");
    let served = bounded("the shutdown", shutdown).await.expect("task");
    assert_eq!(served.expect("what the server returned"), 8080);
    assert!(observer.children("/election").await.map(|c| c.names).unwrap_or_default().is_empty(), "resigned");
    assert!(observer.exists("/node").await.expect("exists").is_none(), "the ephemeral went");
    assert!(matches!(s.exists("/").await, Err(Error::Closed)), "the session is closed");
    observer.close().await;
}

/// A worker that keeps every delivery, for the test to settle later.
struct KeepingWorker(std::sync::Arc<std::sync::Mutex<Vec<actix_zookeeper::queue::Delivery>>>);

impl Actor for KeepingWorker {
    type Context = Context<Self>;
}

impl Handler<actix_zookeeper::queue::Delivery> for KeepingWorker {
    type Result = ();
    fn handle(&mut self, delivery: actix_zookeeper::queue::Delivery, _: &mut Context<Self>) {
        self.0.lock().expect("kept").push(delivery);
    }
}

impl Handler<actix_zookeeper::queue::Revoked> for KeepingWorker {
    type Result = ();
    fn handle(&mut self, _: actix_zookeeper::queue::Revoked, _: &mut Context<Self>) {}
}

/// `docs/recipes/queue.md`, "session closed": a consumer holding a delivery when its session is
/// closed. The claim goes with the session (at once: the close ends it), the item is back in
/// line for anyone, and the kept delivery's late settlement answers an error and changes
/// nothing.
#[actix_rt::test]
async fn closing_a_consumers_session_returns_its_claimed_item_and_a_late_settle_changes_nothing() {
    use actix_zookeeper::queue::{ConsumerConfig, Queue, QueueConsumerHandle, QueueError};
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("close-queue");
    let (s, other) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    Queue::new(s.clone(), "/q").put(b"x".to_vec()).await.expect("put");
    let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keeping = kept.clone();
    let _consumer = QueueConsumerHandle::start(
        s.clone(),
        ConsumerConfig::new("/q").with_workers(1, move |_| KeepingWorker(keeping.clone())),
    )
    .expect("consumer");
    wait_until("the delivery", || !kept.lock().expect("kept").is_empty()).await;
    assert_eq!(children(&other, "/q/claims").await.len(), 1, "claimed");

    s.close().await;
    assert!(children(&other, "/q/claims").await.is_empty(), "the claim went with the close");
    let line = Queue::new(other.clone(), "/q");
    assert_eq!(line.peek().await.expect("peek").as_deref(), Some(&b"x"[..]), "the item is back in line");
    let delivery = kept.lock().expect("kept").pop().expect("a delivery");
    let late = bounded("the late ack", delivery.ack()).await;
    assert!(matches!(late, Err(QueueError::ZooKeeper(Error::Closed))), "{late:?}");
    assert_eq!(line.len().await.expect("len"), 1, "the late ack deleted nothing");
    other.close().await;
}
