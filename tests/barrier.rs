//! Barriers against a real ZooKeeper: a double barrier where nobody passes `enter` before all
//! members arrived nor `leave` before all started leaving, round after round; waiters of a
//! barrier released by its removal; a session expiry and a server restart while members wait;
//! bad input; and nothing left behind after a timeout or a dropped wait.
#![cfg(feature = "testkit")]

use crate::common;
use crate::common::curator;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use actix_zookeeper::barrier::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{ClientLinks, TestZooKeeper, ZkServer, expire_session, unique_root};
use common::*;
use futures::future::join_all;

/// Generous bound for a barrier operation that should succeed.
const WAIT: Duration = Duration::from_secs(60);
/// A short timeout for operations meant to time out.
const SHORT: Duration = Duration::from_millis(300);

/// Sessions of one test, all under one chroot.
struct Rig {
    connect: String,
    chroot: String,
    session_timeout: Duration,
}

impl Rig {
    fn new(connect: String, test: &str) -> Rig {
        Rig { connect, chroot: unique_root(test), session_timeout: Duration::from_secs(4) }
    }

    async fn session(&self) -> SessionHandle {
        let config = SessionConfig::new(self.connect.clone())
            .with_chroot(self.chroot.clone())
            .with_session_timeout(self.session_timeout);
        connected(config).await.0
    }
}

/// Children of `dir` (a missing directory counts as empty: the barrier's container may have
/// been reaped), retrying through connection trouble.
async fn nodes(session: &SessionHandle, dir: &str) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    loop {
        match session.children(dir).await {
            Ok(children) => {
                let mut names = children.names;
                names.sort();
                return names;
            }
            Err(Error::NoNode { .. }) => return Vec::new(),
            Err(e) if e.is_transient() && Instant::now() < deadline => {
                actix_rt::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("listing {dir}: {e}"),
        }
    }
}

async fn wait_until<F: std::future::Future<Output = bool>>(what: &str, mut done: impl FnMut() -> F) {
    let deadline = Instant::now() + WAIT;
    while !done().await {
        assert!(Instant::now() < deadline, "{what} did not happen within {WAIT:?}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The member node's owner (ephemeralOwner), `None` while it does not exist.
async fn owner_of(session: &SessionHandle, node: &str) -> Option<i64> {
    match session.exists(node).await {
        Ok(stat) => stat.map(|s| s.ephemeral_owner),
        Err(e) if e.is_transient() => None,
        Err(e) => panic!("exists {node}: {e}"),
    }
}

fn counters(n: usize) -> Arc<Vec<AtomicUsize>> {
    Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect())
}

#[actix_rt::test]
async fn five_members_enter_together_and_leave_together_round_after_round() {
    init_tracing();
    const MEMBERS: usize = 5;
    const ROUNDS: usize = 4;
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let rig = Rig::new(zk.connect_string(), "barrier-rounds");
    let arrived = counters(ROUNDS);
    let leaving = counters(ROUNDS);
    let mut members = Vec::new();
    for i in 0..MEMBERS {
        let barrier = DistributedDoubleBarrier::new(rig.session().await, "/rounds", MEMBERS).expect("valid barrier");
        let (arrived, leaving) = (arrived.clone(), leaving.clone());
        members.push(actix_rt::spawn(async move {
            for round in 0..ROUNDS {
                // Staggered arrivals: member 4 comes last, 160 ms after member 0.
                actix_rt::time::sleep(Duration::from_millis(40 * i as u64)).await;
                arrived[round].fetch_add(1, Ordering::SeqCst);
                barrier.enter(Some(WAIT)).await.unwrap_or_else(|e| panic!("member {i} round {round} enter: {e}"));
                let seen = arrived[round].load(Ordering::SeqCst);
                assert_eq!(seen, MEMBERS, "member {i} passed enter in round {round} with only {seen} arrived");
                // Staggered work: member 0 leaves last.
                actix_rt::time::sleep(Duration::from_millis(40 * (MEMBERS - 1 - i) as u64)).await;
                leaving[round].fetch_add(1, Ordering::SeqCst);
                barrier.leave(Some(WAIT)).await.unwrap_or_else(|e| panic!("member {i} round {round} leave: {e}"));
                let seen = leaving[round].load(Ordering::SeqCst);
                assert_eq!(seen, MEMBERS, "member {i} passed leave in round {round} with only {seen} leaving");
            }
            barrier
        }));
    }
    let barriers: Vec<DistributedDoubleBarrier> =
        match actix_rt::time::timeout(Duration::from_secs(120), join_all(members)).await {
            Ok(done) => done.into_iter().map(|m| m.expect("member ran to the end")).collect(),
            Err(_) => panic!("the rounds did not finish within 120 s"),
        };
    let ids: std::collections::HashSet<&str> = barriers.iter().map(|b| b.member_id()).collect();
    assert_eq!(ids.len(), MEMBERS, "every member has its own id");
    // Curator leaves the (container) barrier node, and nothing under it.
    let observer = rig.session().await;
    assert_eq!(nodes(&observer, "/rounds").await, Vec::<String>::new(), "nodes left after the last round");
}

#[actix_rt::test]
async fn the_double_barrier_uses_curators_layout() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let rig = Rig::new(zk.connect_string(), "barrier-layout");
    let (sa, sb, observer) = (rig.session().await, rig.session().await, rig.session().await);
    let a = DistributedDoubleBarrier::new(sa.clone(), "/deep/layout", 2).expect("valid barrier");
    let b = DistributedDoubleBarrier::new(sb, "/deep/layout", 2).expect("valid barrier");
    assert_eq!(a.member_id().len(), 36, "a UUID, as Curator's UUID.randomUUID()");
    assert_eq!((a.path(), a.member_count()), ("/deep/layout", 2));

    let entering = actix_rt::spawn(a.enter(Some(WAIT)));
    wait_until("a's member node", || async { nodes(&observer, "/deep/layout").await == [a.member_id()] }).await;
    let owner = owner_of(&observer, &format!("/deep/layout/{}", a.member_id())).await;
    let session_a = sa.session().await.expect("a's session").session_id;
    assert_eq!(owner, Some(session_a.0), "the member node is an ephemeral of a's session");
    // The barrier node and its parent are containers (Curator's creatingParentContainersIfNeeded);
    // ZooKeeper reports ephemeralOwner 0 for containers, so only "not ephemeral" shows here.
    assert_eq!(owner_of(&observer, "/deep/layout").await, Some(0));
    actix_rt::time::sleep(SHORT).await;
    assert!(!entering.is_finished(), "one of two members must wait");

    bounded("b enters", b.enter(Some(WAIT))).await.expect("b enters");
    bounded("a enters", entering).await.expect("a's task").expect("a enters");
    let mut expected = vec![a.member_id().to_owned(), b.member_id().to_owned(), READY_NODE.to_owned()];
    expected.sort();
    assert_eq!(nodes(&observer, "/deep/layout").await, expected);
    // `ready` is persistent.
    assert_eq!(owner_of(&observer, "/deep/layout/ready").await, Some(0));

    let (left_a, left_b) = futures::join!(a.leave(Some(WAIT)), b.leave(Some(WAIT)));
    left_a.expect("a leaves");
    left_b.expect("b leaves");
    assert_eq!(nodes(&observer, "/deep/layout").await, Vec::<String>::new());
}

#[actix_rt::test]
async fn waiters_are_released_when_the_barrier_is_removed() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let rig = Rig::new(zk.connect_string(), "barrier-single");
    let setter = DistributedBarrier::new(rig.session().await, "/gate/hold").expect("valid barrier");
    assert_eq!(setter.path(), "/gate/hold");
    // The parent is created on demand; setting twice is fine.
    setter.set().await.expect("set");
    setter.set().await.expect("set again");

    let removed = Arc::new(AtomicBool::new(false));
    let released = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    let mut sessions = Vec::new();
    for i in 0..3 {
        let session = rig.session().await;
        sessions.push(session.clone());
        let barrier = DistributedBarrier::new(session, "/gate/hold").expect("valid barrier");
        let (removed, released) = (removed.clone(), released.clone());
        waiters.push(actix_rt::spawn(async move {
            barrier.wait(Some(WAIT)).await.unwrap_or_else(|e| panic!("waiter {i}: {e}"));
            assert!(removed.load(Ordering::SeqCst), "waiter {i} passed a barrier that was still set");
            released.fetch_add(1, Ordering::SeqCst);
        }));
    }

    // While set, a wait with a short timeout times out, naming the barrier.
    let short = DistributedBarrier::new(sessions[0].clone(), "/gate/hold").expect("valid barrier");
    match short.wait(Some(SHORT)).await {
        Err(BarrierError::Timeout { path, waited }) => assert_eq!((path.as_str(), waited), ("/gate/hold", SHORT)),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(released.load(Ordering::SeqCst), 0);

    removed.store(true, Ordering::SeqCst);
    setter.remove().await.expect("remove");
    for waiter in waiters {
        bounded("a waiter is released", waiter).await.expect("waiter ran to the end");
    }
    assert_eq!(released.load(Ordering::SeqCst), 3);
    setter.remove().await.expect("removing a removed barrier is fine");

    // Waiting on a barrier that is not set returns at once (no timeout needed).
    let never = DistributedBarrier::new(sessions[1].clone(), "/gate/never-set").expect("valid barrier");
    bounded("wait on a missing barrier", never.wait(None)).await.expect("not set: open");
    bounded("wait on a removed barrier", short.wait(None)).await.expect("removed: open");

    // Set and removed again: the same handles work for another cycle.
    setter.set().await.expect("set");
    let again = actix_rt::spawn(short.wait(None));
    actix_rt::time::sleep(SHORT).await;
    assert!(!again.is_finished(), "set again: waiters wait again");
    setter.remove().await.expect("remove");
    bounded("released again", again).await.expect("task").expect("open");
}

#[actix_rt::test]
async fn a_member_whose_session_expires_in_enter_enters_again_on_its_new_session() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let rig = Rig::new(zk.connect_string(), "barrier-expiry-enter");
    let (sa, sb, observer) = (rig.session().await, rig.session().await, rig.session().await);
    let a = DistributedDoubleBarrier::new(sa.clone(), "/expiry", 2).expect("valid barrier");
    let b = DistributedDoubleBarrier::new(sb, "/expiry", 2).expect("valid barrier");
    let node = format!("/expiry/{}", a.member_id());

    let entering = actix_rt::spawn(a.enter(Some(WAIT)));
    wait_until("a's member node", || async { owner_of(&observer, &node).await.is_some() }).await;
    let before = sa.session().await.expect("a's session");
    assert_eq!(owner_of(&observer, &node).await, Some(before.session_id.0));

    expire_session(&zk.connect_string(), &before.info).await.expect("expire a's session");
    // The server deletes the node with the session; a creates it again on its new session and
    // keeps waiting (it has not been counted).
    wait_until("a's node on its new session", || async {
        let now = sa.session().await;
        match (now, owner_of(&observer, &node).await) {
            (Some(now), Some(owner)) => now.generation > before.generation && owner == now.session_id.0,
            _ => false,
        }
    })
    .await;
    assert!(!entering.is_finished(), "a still waits: the barrier is not complete");

    bounded("b enters", b.enter(Some(WAIT))).await.expect("b enters");
    bounded("a enters", entering).await.expect("a's task").expect("a enters across the expiry");
    let (left_a, left_b) = futures::join!(a.leave(Some(WAIT)), b.leave(Some(WAIT)));
    left_a.expect("a leaves");
    left_b.expect("b leaves");
    assert_eq!(nodes(&observer, "/expiry").await, Vec::<String>::new());
}

#[actix_rt::test]
async fn a_member_whose_session_expires_in_leave_still_waits_for_the_others() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let rig = Rig::new(zk.connect_string(), "barrier-expiry-leave");
    let (sa, sb, observer) = (rig.session().await, rig.session().await, rig.session().await);
    let a = DistributedDoubleBarrier::new(sa.clone(), "/expiry", 2).expect("valid barrier");
    let b = DistributedDoubleBarrier::new(sb, "/expiry", 2).expect("valid barrier");
    let (entered_a, entered_b) = futures::join!(a.enter(Some(WAIT)), b.enter(Some(WAIT)));
    entered_a.expect("a enters");
    entered_b.expect("b enters");

    let b_leaving = Arc::new(AtomicBool::new(false));
    let leaving = {
        let (b_leaving, leave) = (b_leaving.clone(), a.leave(Some(WAIT)));
        actix_rt::spawn(async move {
            leave.await.expect("a leaves across the expiry");
            assert!(b_leaving.load(Ordering::SeqCst), "a passed leave before b started leaving");
        })
    };
    actix_rt::time::sleep(SHORT).await;
    let before = sa.session().await.expect("a's session");
    expire_session(&zk.connect_string(), &before.info).await.expect("expire a's session");
    wait_until("a's new session", || async { sa.session().await.is_some_and(|s| s.generation > before.generation) })
        .await;
    actix_rt::time::sleep(SHORT).await;
    assert!(!leaving.is_finished(), "a's node went with its session, but b has not left");
    assert_eq!(nodes(&observer, "/expiry").await, [b.member_id(), READY_NODE], "a's node is gone, b's is there");

    b_leaving.store(true, Ordering::SeqCst);
    bounded("b leaves", b.leave(Some(WAIT))).await.expect("b leaves");
    bounded("a leaves", leaving).await.expect("a's leave ran to the end");
    assert_eq!(nodes(&observer, "/expiry").await, Vec::<String>::new());
}

#[actix_rt::test]
async fn a_server_restart_while_members_wait_does_not_lose_the_barrier() {
    init_tracing();
    let mut server = ZkServer::start().expect("ZooKeeper");
    let mut rig = Rig::new(server.connect_string(), "barrier-restart");
    rig.session_timeout = Duration::from_secs(10);
    let mut barriers = Vec::new();
    for _ in 0..3 {
        barriers.push(DistributedDoubleBarrier::new(rig.session().await, "/restart", 3).expect("valid barrier"));
    }
    let observer = rig.session().await;

    // Two members wait in enter when the server goes down; the third arrives while it is down.
    let arrived = Arc::new(AtomicUsize::new(0));
    let enter = |barrier: &DistributedDoubleBarrier| {
        let (arrived, entering) = (arrived.clone(), barrier.enter(Some(WAIT)));
        arrived.fetch_add(1, Ordering::SeqCst);
        actix_rt::spawn(async move {
            entering.await.expect("enter across the restart");
            assert_eq!(arrived.load(Ordering::SeqCst), 3, "passed enter before all arrived");
        })
    };
    let mut entering = vec![enter(&barriers[0]), enter(&barriers[1])];
    wait_until("two member nodes", || async { nodes(&observer, "/restart").await.len() == 2 }).await;
    server.stop().expect("stop");
    entering.push(enter(&barriers[2]));
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    assert!(entering.iter().all(|e| !e.is_finished()), "nobody passes while the server is down");
    server.restart().expect("restart");
    for e in entering {
        bounded("enter after the restart", e).await.expect("member ran to the end");
    }

    // Two members wait in leave when the server goes down; the third leaves after the restart.
    let third_leaving = Arc::new(AtomicBool::new(false));
    let leave = |barrier: &DistributedDoubleBarrier| {
        let (third_leaving, leaving) = (third_leaving.clone(), barrier.leave(Some(WAIT)));
        actix_rt::spawn(async move {
            leaving.await.expect("leave across the restart");
            assert!(third_leaving.load(Ordering::SeqCst), "passed leave before the third started leaving");
        })
    };
    let leaving = vec![leave(&barriers[0]), leave(&barriers[1])];
    actix_rt::time::sleep(SHORT).await;
    server.stop().expect("stop");
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    server.restart().expect("restart");
    assert!(leaving.iter().all(|l| !l.is_finished()), "nobody passes leave before the third leaves");
    third_leaving.store(true, Ordering::SeqCst);
    bounded("the third leaves", barriers[2].leave(Some(WAIT))).await.expect("the third leaves");
    for l in leaving {
        bounded("leave after the restart", l).await.expect("member ran to the end");
    }
    assert_eq!(nodes(&observer, "/restart").await, Vec::<String>::new());
}

#[actix_rt::test]
async fn bad_input_gets_typed_errors() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let rig = Rig::new(zk.connect_string(), "barrier-bad-input");
    let session = rig.session().await;

    match DistributedDoubleBarrier::new(session.clone(), "/b", 0) {
        Err(BarrierError::InvalidMemberCount { path, member_count }) => {
            assert_eq!((path.as_str(), member_count), ("/b", 0))
        }
        other => panic!("member count 0: {other:?}"),
    }
    for bad in ["", "b", "/a//b", "/a/", "/a/./b", "/a\u{1}", "/"] {
        match DistributedDoubleBarrier::new(session.clone(), bad, 2) {
            Err(BarrierError::InvalidPath { path, .. }) => assert_eq!(path, bad),
            other => panic!("double barrier at {bad:?}: {other:?}"),
        }
        match DistributedBarrier::new(session.clone(), bad) {
            Err(e @ BarrierError::InvalidPath { .. }) => assert!(e.to_string().contains(&format!("{bad:?}")), "{e}"),
            other => panic!("barrier at {bad:?}: {other:?}"),
        }
    }

    // A barrier under an ephemeral node: ZooKeeper's refusal, naming the path.
    session.create("/ephemeral", "", CreateMode::Ephemeral).await.expect("ephemeral parent");
    let under = DistributedBarrier::new(session.clone(), "/ephemeral/gate").expect("valid barrier");
    match under.set().await {
        Err(BarrierError::ZooKeeper(Error::NoChildrenForEphemerals { path })) => assert_eq!(path, "/ephemeral/gate"),
        other => panic!("barrier under an ephemeral: {other:?}"),
    }
    let under = DistributedDoubleBarrier::new(session.clone(), "/ephemeral/double", 2).expect("valid barrier");
    match under.enter(Some(WAIT)).await {
        Err(BarrierError::ZooKeeper(Error::NoChildrenForEphemerals { path })) => {
            assert_eq!(path, "/ephemeral/double")
        }
        other => panic!("double barrier under an ephemeral: {other:?}"),
    }
}

#[actix_rt::test]
async fn timeouts_and_dropped_waits_leave_no_member_node_behind() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let rig = Rig::new(zk.connect_string(), "barrier-timeouts");
    let (sa, sb, observer) = (rig.session().await, rig.session().await, rig.session().await);

    // Alone in a barrier of three: enter times out, and its node is gone when it returns.
    let lonely = DistributedDoubleBarrier::new(sa.clone(), "/lonely", 3).expect("valid barrier");
    match lonely.enter(Some(SHORT)).await {
        Err(BarrierError::Timeout { path, waited }) => assert_eq!((path.as_str(), waited), ("/lonely", SHORT)),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(nodes(&observer, "/lonely").await, Vec::<String>::new(), "enter's timeout left a node");
    match lonely.leave(Some(WAIT)).await {
        Err(BarrierError::NotEntered { path, member }) => {
            assert_eq!((path.as_str(), member.as_str()), ("/lonely", lonely.member_id()))
        }
        other => panic!("leave without enter: {other:?}"),
    }

    // A dropped enter removes its node too.
    let dropped = DistributedDoubleBarrier::new(sa.clone(), "/lonely", 3).expect("valid barrier");
    let entering = actix_rt::spawn(dropped.enter(None));
    wait_until("the member node", || async { nodes(&observer, "/lonely").await == [dropped.member_id()] }).await;
    entering.abort();
    wait_until("the dropped member's node is removed", || async { nodes(&observer, "/lonely").await.is_empty() }).await;

    // Leave times out while the other member stays; its node is gone, the other can still leave.
    let a = DistributedDoubleBarrier::new(sa, "/pair", 2).expect("valid barrier");
    let b = DistributedDoubleBarrier::new(sb, "/pair", 2).expect("valid barrier");
    let (entered_a, entered_b) = futures::join!(a.enter(Some(WAIT)), b.enter(Some(WAIT)));
    entered_a.expect("a enters");
    entered_b.expect("b enters");
    match a.leave(Some(SHORT)).await {
        Err(BarrierError::Timeout { path, .. }) => assert_eq!(path, "/pair"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(nodes(&observer, "/pair").await, [b.member_id()], "a's node is gone (and `ready`, as Curator)");
    bounded("b leaves", b.leave(Some(WAIT))).await.expect("b leaves alone");
    assert_eq!(nodes(&observer, "/pair").await, Vec::<String>::new());
}

#[actix_rt::test]
async fn a_member_that_finished_leaving_and_entered_again_does_not_hold_back_a_slow_leaver() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let rig = Rig::new(zk.connect_string(), "barrier-next-round");
    let (sa, sb, observer) = (rig.session().await, rig.session().await, rig.session().await);
    let a = DistributedDoubleBarrier::new(sa, "/reuse", 2).expect("valid barrier");
    let b = DistributedDoubleBarrier::new(sb, "/reuse", 2).expect("valid barrier");
    let (entered_a, entered_b) = futures::join!(a.enter(Some(WAIT)), b.enter(Some(WAIT)));
    entered_a.expect("a enters");
    entered_b.expect("b enters");
    let (low, high) = if a.member_id() < b.member_id() { (&a, &b) } else { (&b, &a) };

    // The higher member leaves first: it deletes its node and waits for the lowest.
    let high_leaving = actix_rt::spawn(high.leave(Some(WAIT)));
    let high_node = format!("/reuse/{}", high.member_id());
    wait_until("the higher member's node is deleted", || async { owner_of(&observer, &high_node).await.is_none() })
        .await;
    // Two members of the next round arrive (named to sort first) before the lowest leaves. With
    // Curator's algorithm the higher member would now wait for them: they are not in its round.
    for next in ["00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"] {
        observer.create(&format!("/reuse/{next}"), "", CreateMode::Ephemeral).await.expect("next-round member");
    }
    let low_leaving = actix_rt::spawn(low.leave(Some(WAIT)));
    bounded("the higher member's leave", high_leaving).await.expect("task").expect("it left: its round is over");
    // The lowest saw the next-round members when it began leaving (Curator's threshold semantics:
    // late members count), so it waits for them.
    actix_rt::time::sleep(SHORT).await;
    assert!(!low_leaving.is_finished());
    for next in ["00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"] {
        observer.delete(&format!("/reuse/{next}"), None).await.expect("next-round member leaves");
    }
    bounded("the lowest member's leave", low_leaving).await.expect("task").expect("it left");
    assert_eq!(nodes(&observer, "/reuse").await, Vec::<String>::new());
}

/// A Curator 5.4 `DistributedDoubleBarrier` member and `DistributedBarrier` user in a JVM,
/// driven line by line: commands `enter`, `leave` (60 s timeouts), `set`, `remove`, `wait`;
/// replies `ENTERED` / `LEFT` / `SET` / `REMOVED` / `OPEN`, `TIMEOUT` or `ERROR <message>`.
const CURATOR_BARRIER_PEER: &str = r#"
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.retry.RetryNTimes;

public class BarrierPeer {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 10000, 10000, new RetryNTimes(20, 200));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.out.println("ERROR not connected");
            System.exit(1);
        }
        DistributedDoubleBarrier members = new DistributedDoubleBarrier(client, args[1], Integer.parseInt(args[2]));
        DistributedBarrier barrier = new DistributedBarrier(client, args[3]);
        System.out.println("READY");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String reply;
            try {
                switch (line.trim()) {
                    case "enter": reply = members.enter(60, TimeUnit.SECONDS) ? "ENTERED" : "TIMEOUT"; break;
                    case "leave": reply = members.leave(60, TimeUnit.SECONDS) ? "LEFT" : "TIMEOUT"; break;
                    case "set": barrier.setBarrier(); reply = "SET"; break;
                    case "remove": barrier.removeBarrier(); reply = "REMOVED"; break;
                    case "wait": reply = barrier.waitOnBarrier(60, TimeUnit.SECONDS) ? "OPEN" : "TIMEOUT"; break;
                    case "quit": client.close(); return;
                    default: reply = "ERROR unknown command " + line;
                }
            } catch (Exception e) {
                reply = "ERROR " + e;
            }
            System.out.println(reply);
            System.out.flush();
        }
        client.close();
    }
}
"#;

/// The JVM running [`CURATOR_BARRIER_PEER`]; killed (and reaped) when dropped.
struct CuratorBarrierPeer {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: std::path::PathBuf,
}

impl CuratorBarrierPeer {
    /// Starts the peer (Java's single-file source launcher compiles it) and waits for `READY`.
    fn start(connect: &str, double: &str, count: usize, single: &str) -> CuratorBarrierPeer {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let classpath = curator::curator_classpath().expect("Curator jars (apt-get install libcurator-recipes-java)");
        let dir = std::env::temp_dir()
            .join(format!("actix-zookeeper-barrier-peer-{}", unique_root("p").trim_start_matches('/')));
        std::fs::create_dir_all(&dir).expect("peer directory");
        let source = dir.join("BarrierPeer.java");
        std::fs::write(&source, CURATOR_BARRIER_PEER).expect("peer source");
        let stderr = dir.join("stderr");
        let mut child = Command::new("java")
            .args(["-XX:TieredStopAtLevel=1", "-Xmx128m", "-XX:+UseSerialGC"])
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .arg("-cp")
            .arg(&classpath)
            .arg(&source)
            .args([connect, double, &count.to_string(), single])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("peer stderr"))
            .spawn()
            .expect("java");
        let (stdin, stdout) = (child.stdin.take().expect("stdin"), child.stdout.take().expect("stdout"));
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut peer = CuratorBarrierPeer { child, stdin, lines, stderr };
        assert_eq!(peer.next_line(), "READY");
        peer
    }

    fn next_line(&mut self) -> String {
        match self.lines.recv_timeout(Duration::from_secs(90)) {
            Ok(line) => line,
            Err(e) => panic!(
                "Curator peer: no reply ({e}); stderr: {}",
                std::fs::read_to_string(&self.stderr).unwrap_or_default()
            ),
        }
    }

    /// Sends `command` and waits for its reply (blocking: call from `spawn_blocking`).
    fn ask(mut self, command: &str) -> (CuratorBarrierPeer, String) {
        use std::io::Write;
        writeln!(self.stdin, "{command}").and_then(|()| self.stdin.flush()).expect("peer stdin");
        let reply = self.next_line();
        (self, reply)
    }
}

impl Drop for CuratorBarrierPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = self.stderr.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Runs `command` on the peer off the actix thread; the handle yields the peer and the reply.
fn ask(peer: CuratorBarrierPeer, command: &'static str) -> actix_rt::task::JoinHandle<(CuratorBarrierPeer, String)> {
    actix_rt::task::spawn_blocking(move || peer.ask(command))
}

#[actix_rt::test]
async fn curator_and_rust_members_share_a_double_barrier_and_a_barrier() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let rig = Rig::new(zk.connect_string(), "barrier-curator");
    let (sa, sb, observer) = (rig.session().await, rig.session().await, rig.session().await);
    // The chroot exists now (the sessions made it); Curator uses it as its connect string's chroot.
    let connect = format!("{}{}", zk.connect_string(), rig.chroot);
    let mut peer = actix_rt::task::spawn_blocking(move || CuratorBarrierPeer::start(&connect, "/shared", 3, "/gate"))
        .await
        .expect("Curator peer");
    let a = DistributedDoubleBarrier::new(sa.clone(), "/shared", 3).expect("valid barrier");
    let b = DistributedDoubleBarrier::new(sb, "/shared", 3).expect("valid barrier");

    for round in 0..2 {
        let curator_first = round == 0;
        // enter: in round 0 Curator arrives first and Rust completes the count; then the reverse.
        let (mut curator, a_entering);
        if curator_first {
            curator = ask(peer, "enter");
            actix_rt::time::sleep(SHORT).await;
            a_entering = actix_rt::spawn(a.enter(Some(WAIT)));
        } else {
            a_entering = actix_rt::spawn(a.enter(Some(WAIT)));
            actix_rt::time::sleep(SHORT).await;
            curator = ask(peer, "enter");
        }
        actix_rt::time::sleep(SHORT).await;
        assert!(!curator.is_finished() && !a_entering.is_finished(), "round {round}: 2 of 3 must wait");
        bounded("b enters", b.enter(Some(WAIT))).await.expect("b enters");
        bounded("a enters", a_entering).await.expect("task").expect("a enters");
        let (back, reply) = bounded("Curator enters", curator).await.expect("peer");
        assert_eq!(reply, "ENTERED", "round {round}");
        peer = back;

        // leave: the Rust members wait for Curator's member (round 0), then the reverse.
        let (a_leaving, b_leaving);
        if curator_first {
            a_leaving = actix_rt::spawn(a.leave(Some(WAIT)));
            b_leaving = actix_rt::spawn(b.leave(Some(WAIT)));
            actix_rt::time::sleep(SHORT).await;
            assert!(!a_leaving.is_finished() && !b_leaving.is_finished(), "Rust members wait for Curator's");
            curator = ask(peer, "leave");
        } else {
            curator = ask(peer, "leave");
            a_leaving = actix_rt::spawn(a.leave(Some(WAIT)));
            actix_rt::time::sleep(SHORT).await;
            assert!(!curator.is_finished() && !a_leaving.is_finished(), "Curator's member waits for b");
            b_leaving = actix_rt::spawn(b.leave(Some(WAIT)));
        }
        bounded("a leaves", a_leaving).await.expect("task").expect("a leaves");
        bounded("b leaves", b_leaving).await.expect("task").expect("b leaves");
        let (back, reply) = bounded("Curator leaves", curator).await.expect("peer");
        assert_eq!(reply, "LEFT", "round {round}");
        peer = back;
        assert_eq!(nodes(&observer, "/shared").await, Vec::<String>::new(), "round {round}: nothing left");
    }

    // DistributedBarrier: Curator sets, Rust waits; Rust sets, Curator waits.
    let (back, reply) = ask(peer, "set").await.expect("peer");
    assert_eq!(reply, "SET");
    let gate = DistributedBarrier::new(sa, "/gate").expect("valid barrier");
    let waiting = actix_rt::spawn(gate.wait(Some(WAIT)));
    actix_rt::time::sleep(SHORT).await;
    assert!(!waiting.is_finished(), "Curator's barrier holds a Rust waiter");
    let (back, reply) = ask(back, "remove").await.expect("peer");
    assert_eq!(reply, "REMOVED");
    bounded("Rust waiter released", waiting).await.expect("task").expect("open");

    gate.set().await.expect("set");
    let curator = ask(back, "wait");
    actix_rt::time::sleep(SHORT).await;
    assert!(!curator.is_finished(), "a Rust barrier holds Curator's waiter");
    gate.remove().await.expect("remove");
    let (_peer, reply) = bounded("Curator waiter released", curator).await.expect("peer");
    assert_eq!(reply, "OPEN");
}

// ---- Failure-table rows (docs/recipes/barrier.md), one test each -------------------------------

/// Rows "connection drops, session lives" and "our session expires" for
/// `DistributedBarrier::wait`: the wait goes on through a server restart and through an expiry
/// of the waiter's session, and ends when the barrier is removed (a removal made while the
/// waiter was cut off included).
#[actix_rt::test]
async fn a_barrier_wait_outlasts_a_restart_and_an_expiry() {
    init_tracing();
    let mut server = ZkServer::start().expect("ZooKeeper");
    let links = ClientLinks::to([server.connect_string()]).expect("proxy");
    let mut rig = Rig::new(links.connect_string(), "barrier-wait-faults");
    rig.session_timeout = Duration::from_secs(6);
    let waiter = rig.session().await;
    let setter = Rig { connect: server.connect_string(), ..rig }.session().await;
    let gate = DistributedBarrier::new(setter.clone(), "/gate").expect("valid barrier");
    let watched = DistributedBarrier::new(waiter.clone(), "/gate").expect("valid barrier");

    // A restart within the session timeout.
    gate.set().await.expect("set");
    let waiting = actix_rt::spawn(watched.wait(Some(WAIT)));
    actix_rt::time::sleep(SHORT).await;
    server.stop().expect("stop");
    server.restart().expect("restart");
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "the barrier is still set");
    gate.remove().await.expect("remove");
    bounded("the wait ends", waiting).await.expect("task").expect("released");

    // An expiry of the waiter's session, the barrier removed while it is cut off.
    gate.set().await.expect("set again");
    let waiting = actix_rt::spawn(watched.wait(Some(WAIT)));
    actix_rt::time::sleep(SHORT).await;
    let info = waiter.session().await.expect("session").info;
    links.blackhole();
    expire_session(&server.connect_string(), &info).await.expect("expire the waiter's session");
    gate.remove().await.expect("remove while the waiter is cut off");
    actix_rt::time::sleep(SHORT).await;
    assert!(!waiting.is_finished(), "the waiter cannot know yet");
    links.heal();
    bounded("the wait ends on the new session", waiting).await.expect("task").expect("released");
    assert_eq!(waiter.session().await.expect("session").generation, 2, "the fault happened: a new session");
}

/// Row "the future is dropped" for `leave`: our node is deleted, and the other member can leave.
#[actix_rt::test]
async fn a_dropped_leave_removes_its_member_node() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let rig = Rig::new(zk.connect_string(), "barrier-dropped-leave");
    let (sa, sb, observer) = (rig.session().await, rig.session().await, rig.session().await);
    let a = DistributedDoubleBarrier::new(sa, "/pair", 2).expect("valid barrier");
    let b = DistributedDoubleBarrier::new(sb, "/pair", 2).expect("valid barrier");
    let (entered_a, entered_b) = futures::join!(a.enter(Some(WAIT)), b.enter(Some(WAIT)));
    entered_a.expect("a enters");
    entered_b.expect("b enters");
    let leaving = actix_rt::spawn(a.leave(None));
    actix_rt::time::sleep(SHORT).await;
    assert!(!leaving.is_finished(), "a waits for b to leave");
    leaving.abort();
    wait_until("a's node is removed", || async {
        !nodes(&observer, "/pair").await.contains(&a.member_id().to_owned())
    })
    .await;
    bounded("b leaves", b.leave(Some(WAIT))).await.expect("b leaves alone");
    assert_eq!(nodes(&observer, "/pair").await, Vec::<String>::new());
}

/// Rows "session closed" and "no permission": `ZooKeeper(Closed)` from every operation on a
/// closed session; `NoAuth` naming the path where the barrier's directory denies us.
#[actix_rt::test]
async fn a_closed_session_and_a_denied_directory_get_typed_errors() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let rig = Rig::new(zk.connect_string(), "barrier-closed");
    let s = rig.session().await;

    read_only_dir(&s, "/closed").await;
    let gate = DistributedBarrier::new(s.clone(), "/closed/gate").expect("valid barrier");
    match gate.set().await {
        Err(BarrierError::ZooKeeper(Error::NoAuth { path })) => assert_eq!(path, "/closed/gate"),
        other => panic!("set in a read-only directory: {other:?}"),
    }
    let phase = DistributedDoubleBarrier::new(s.clone(), "/closed", 2).expect("valid barrier");
    match phase.enter(Some(WAIT)).await {
        Err(BarrierError::ZooKeeper(Error::NoAuth { path })) => assert!(path.starts_with("/closed"), "{path}"),
        other => panic!("enter in a read-only directory: {other:?}"),
    }

    // Entered where we may create but not delete: leaving is refused, naming our node.
    undeletable_dir(&s, "/sticky").await;
    let other = rig.session().await;
    let a = DistributedDoubleBarrier::new(s.clone(), "/sticky", 2).expect("valid barrier");
    let b = DistributedDoubleBarrier::new(other, "/sticky", 2).expect("valid barrier");
    let (entered_a, entered_b) = futures::join!(a.enter(Some(WAIT)), b.enter(Some(WAIT)));
    entered_a.expect("a enters");
    entered_b.expect("b enters");
    // The lowest member waits for the other to leave first; the other's delete is refused,
    // so the lowest then times out (its own delete, on the way out, is refused too).
    let (left_a, left_b) = futures::join!(a.leave(Some(Duration::from_secs(2))), b.leave(Some(Duration::from_secs(2))));
    let no_auth = |r: &Result<(), BarrierError>| matches!(r, Err(BarrierError::ZooKeeper(Error::NoAuth { path })) if path.starts_with("/sticky"));
    let timed_out = |r: &Result<(), BarrierError>| matches!(r, Err(BarrierError::Timeout { .. }));
    assert!(
        (no_auth(&left_a) || no_auth(&left_b)) && [&left_a, &left_b].iter().all(|r| no_auth(r) || timed_out(r)),
        "leave where we may not delete: {left_a:?}, {left_b:?}"
    );

    let gate = DistributedBarrier::new(s.clone(), "/gate").expect("valid barrier");
    gate.set().await.expect("set");
    let phase = DistributedDoubleBarrier::new(s.clone(), "/phase", 2).expect("valid barrier");
    s.close().await;
    let closed = |r: Result<(), BarrierError>| matches!(r, Err(BarrierError::ZooKeeper(Error::Closed)));
    assert!(closed(bounded("set", gate.set()).await), "set");
    assert!(closed(bounded("wait", gate.wait(Some(WAIT))).await), "wait");
    assert!(closed(bounded("remove", gate.remove()).await), "remove");
    assert!(closed(bounded("enter", phase.enter(Some(WAIT))).await), "enter");
}

/// Row "the future is dropped": a wait or an `enter` that gives up (times out, or is dropped)
/// withdraws its one-shot watch from the client and the server; nothing is left behind. Before
/// the fix each abandoned wait kept a watch (and a forwarding actor) until the node changed.
#[actix_rt::test]
async fn waits_that_give_up_leave_no_watch_behind() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let rig = Rig::new(server.connect_string(), "barrier-no-watch");
    let s = rig.session().await;
    let gate = DistributedBarrier::new(s.clone(), "/gate").expect("valid barrier");
    gate.set().await.expect("set");
    for _ in 0..20 {
        let waited = gate.wait(Some(Duration::from_millis(20))).await;
        assert!(matches!(waited, Err(BarrierError::Timeout { .. })), "{waited:?}");
    }
    let lonely = DistributedDoubleBarrier::new(s.clone(), "/lonely", 3).expect("valid barrier");
    for _ in 0..5 {
        let entered = lonely.enter(Some(Duration::from_millis(50))).await;
        assert!(matches!(entered, Err(BarrierError::Timeout { .. })), "{entered:?}");
    }
    // The server's count of watches; nothing else watches on this server.
    let watches = || {
        let mntr = actix_zookeeper::testkit::mntr(&server.connect_string()).expect("mntr");
        mntr.lines().find_map(|l| l.strip_prefix("zk_watch_count")?.trim().parse::<u64>().ok()).expect("zk_watch_count")
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while watches() > 0 {
        assert!(Instant::now() < deadline, "{} watches left after every wait gave up", watches());
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    // A wait that does not give up still sees the removal.
    let waiting = actix_rt::spawn(gate.wait(Some(WAIT)));
    actix_rt::time::sleep(SHORT).await;
    gate.remove().await.expect("remove");
    bounded("the wait ends", waiting).await.expect("task").expect("released");
}
