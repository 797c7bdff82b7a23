//! Group membership against a real ZooKeeper: everyone sees everyone, a member whose session
//! expires leaves everywhere and joins again on its new session, a server restart changes
//! nothing, leaving is seen, bad ids get typed errors.
#![cfg(feature = "testkit")]

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::group::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{ClientLinks, TestZooKeeper, ZkServer, expire_session, unique_root};
use common::*;

const WAIT: Duration = Duration::from_secs(30);
const GROUP: &str = "/svc/members";

struct Member {
    addr: Addr<GroupMember>,
    session: SessionHandle,
    events: Recorded<GroupEvent>,
}

async fn member(connect: &str, root: &str, id: &str, timeout: Duration) -> Member {
    let cfg = SessionConfig::new(connect).with_chroot(root).with_session_timeout(timeout);
    let (session, _) = connected(cfg).await;
    let events = Recorded::<GroupEvent>::start();
    let config = GroupConfig::new(GROUP, id).with_data(format!("data-of-{id}"));
    let addr = GroupMember::new(session.clone(), config).expect("valid config").start();
    addr.do_send(Subscribe { recipient: events.recipient.clone() });
    Member { addr, session, events }
}

async fn sees(m: &Member, ids: &[&str]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let members: BTreeMap<String, Vec<u8>> = m.addr.send(Members).await.expect("member");
        let got: Vec<&str> = members.keys().map(String::as_str).collect();
        if got == ids {
            for (id, data) in &members {
                assert_eq!(data, format!("data-of-{id}").as_bytes());
            }
            return;
        }
        assert!(Instant::now() < deadline, "expected members {ids:?}, have {got:?}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix_rt::test]
async fn a_members_session_expires_it_leaves_everywhere_and_joins_again() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("group-expiry");
    let timeout = Duration::from_secs(4);
    let a = member(&zk.connect_string(), &root, "a", timeout).await;
    let b = member(&zk.connect_string(), &root, "b", timeout).await;
    let c = member(&zk.connect_string(), &root, "c", timeout).await;
    for m in [&a, &b, &c] {
        m.events.wait_for(0, WAIT, |e| matches!(e, GroupEvent::Joined { generation: 1 })).await;
        sees(m, &["a", "b", "c"]).await;
    }
    for m in [&a, &b] {
        m.events.wait_for(0, WAIT, |e| matches!(e, GroupEvent::MemberJoined { id, .. } if id == "c")).await;
    }

    let before: Vec<usize> = [&a, &b].iter().map(|m| m.events.snapshot().len()).collect();
    let info = c.session.session().await.expect("session").info;
    expire_session(&zk.connect_string(), &info).await.expect("expire c");
    for (m, from) in [&a, &b].into_iter().zip(before) {
        let (left, _) = m.events.wait_for(from, WAIT, |e| *e == GroupEvent::MemberLeft { id: "c".into() }).await;
        m.events.wait_for(left, WAIT, |e| matches!(e, GroupEvent::MemberJoined { id, .. } if id == "c")).await;
    }
    c.events.wait_for(0, WAIT, |e| matches!(e, GroupEvent::Joined { generation: 2 })).await;
    for m in [&a, &b, &c] {
        sees(m, &["a", "b", "c"]).await;
    }
    let owner = c.session.session().await.expect("session").session_id;
    let node = a.session.exists(&format!("{GROUP}/c")).await.expect("exists").expect("c's node");
    assert_eq!(node.ephemeral_owner, owner.0, "c's node belongs to its new session");

    // Leaving is seen by the others; nothing is left of the one who left.
    b.addr.send(Leave).await.expect("member").expect("leave");
    a.events.wait_for(0, WAIT, |e| *e == GroupEvent::MemberLeft { id: "b".into() }).await;
    sees(&a, &["a", "c"]).await;
    assert_eq!(a.session.exists(&format!("{GROUP}/b")).await.expect("exists"), None);
}

#[actix_rt::test]
async fn a_server_restart_keeps_the_group_and_late_subscribers_see_it() {
    init_tracing();
    let mut server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root("group-restart");
    let timeout = Duration::from_secs(10);
    let a = member(&server.connect_string(), &root, "a", timeout).await;
    let b = member(&server.connect_string(), &root, "b", timeout).await;
    sees(&a, &["a", "b"]).await;
    server.stop().expect("stop");
    server.restart().expect("restart");
    a.events.wait_for(0, WAIT, |e| *e == GroupEvent::ViewResynced).await;
    let c = member(&server.connect_string(), &root, "c", timeout).await;
    for m in [&a, &b, &c] {
        sees(m, &["a", "b", "c"]).await;
    }
    assert!(
        !a.events.snapshot().iter().any(|e| matches!(e, GroupEvent::MemberLeft { .. })),
        "nobody left across the restart"
    );
    let late = Recorded::<GroupEvent>::start();
    a.addr.do_send(Subscribe { recipient: late.recipient.clone() });
    let (ready, _) = late.wait_for(0, WAIT, |e| *e == GroupEvent::ViewReady).await;
    let joined: Vec<_> = late.snapshot()[..ready]
        .iter()
        .filter_map(|e| match e {
            GroupEvent::MemberJoined { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(joined, ["a", "b", "c"]);
}

#[actix_rt::test]
async fn bad_ids_and_a_taken_id_get_typed_errors() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("group-bad");
    let cfg = SessionConfig::new(zk.connect_string()).with_chroot(root.clone());
    let (s, _) = connected(cfg).await;
    for bad in ["", "a/b", ".."] {
        assert!(
            matches!(GroupMember::new(s.clone(), GroupConfig::new(GROUP, bad)), Err(GroupError::InvalidId { .. })),
            "{bad:?}"
        );
    }
    assert!(matches!(GroupMember::new(s.clone(), GroupConfig::new("svc", "a")), Err(GroupError::ZooKeeper(_))));

    // The same id from a second live session: refused with a typed event, not stolen.
    let first = member(&zk.connect_string(), &root, "same", Duration::from_secs(4)).await;
    first.events.wait_for(0, WAIT, |e| matches!(e, GroupEvent::Joined { .. })).await;
    let second = member(&zk.connect_string(), &root, "same", Duration::from_secs(4)).await;
    second
        .events
        .wait_for(
            0,
            WAIT,
            |e| matches!(e, GroupEvent::JoinFailed { error: GroupError::IdTaken { id } } if id == "same"),
        )
        .await;
    // Once the first leaves, the second gets in.
    first.addr.send(Leave).await.expect("member").expect("leave");
    second.events.wait_for(0, WAIT, |e| matches!(e, GroupEvent::Joined { .. })).await;
}

#[actix_rt::test]
async fn three_node_ensemble_loses_a_member_and_the_group_is_unchanged() {
    init_tracing();
    let mut ensemble = actix_zookeeper::testkit::ZkEnsemble::start(3).expect("ensemble");
    let root = unique_root("group-ensemble");
    let timeout = Duration::from_secs(10);
    let a = member(&ensemble.connect_string(), &root, "a", timeout).await;
    let b = member(&ensemble.connect_string(), &root, "b", timeout).await;
    sees(&a, &["a", "b"]).await;
    sees(&b, &["a", "b"]).await;
    kill_the_serving_member(&mut ensemble, &a.session).await;
    a.events.wait_for(0, WAIT, |e| *e == GroupEvent::ViewResynced).await;
    let c = member(&ensemble.connect_string(), &root, "c", timeout).await;
    for m in [&a, &b, &c] {
        sees(m, &["a", "b", "c"]).await;
    }
    for m in [&a, &b] {
        assert!(!m.events.snapshot().iter().any(|e| matches!(e, GroupEvent::MemberLeft { .. })), "nobody left");
    }
}

#[actix_rt::test]
async fn recipes_created_while_the_session_is_suspended_join_and_resync_later() {
    use actix_zookeeper::cache::{self, CacheActor, CacheConfig, CacheEvent};
    init_tracing();
    let mut server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root("group-suspended");
    let cfg =
        SessionConfig::new(server.connect_string()).with_chroot(root).with_session_timeout(Duration::from_secs(10));
    let (s, session_events) = connected(cfg).await;
    s.ensure_path("/cfg").await.expect("dir");
    s.create("/cfg/a", "1", CreateMode::Persistent).await.expect("a");
    server.stop().expect("stop");
    session_events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Suspended { .. })).await;

    // Both are made while the session is suspended.
    let events = Recorded::<GroupEvent>::start();
    let member =
        GroupMember::new(s.clone(), GroupConfig::new(GROUP, "m").with_data("data-of-m")).expect("config").start();
    member.do_send(Subscribe { recipient: events.recipient.clone() });
    let cache_events = Recorded::<CacheEvent>::start();
    let cache = CacheActor::new(s.clone(), CacheConfig::new("/cfg")).expect("config").start();
    cache.do_send(cache::Subscribe { recipient: cache_events.recipient.clone() });

    server.restart().expect("restart");
    events.wait_for(0, WAIT, |e| matches!(e, GroupEvent::Joined { generation: 1 })).await;
    cache_events.wait_for(0, WAIT, |e| *e == CacheEvent::CacheInitialized).await;

    // After an expiry, the member joins again and the cache re-syncs.
    let info = s.session().await.expect("session").info;
    expire_session(&server.connect_string(), &info).await.expect("expire");
    events.wait_for(0, WAIT, |e| matches!(e, GroupEvent::Joined { generation: 2 })).await;
    cache_events.wait_for(0, WAIT, |e| *e == CacheEvent::CacheResynced).await;
    sees(&Member { addr: member.clone(), session: s.clone(), events: Recorded::<GroupEvent>::start() }, &["m"]).await;
}

/// Regression: a final error was retried forever (a member that may not create its node
/// said `JoinFailed` and tried again every second). Now it says so once and asks nothing
/// more.
#[actix_rt::test]
async fn a_member_that_may_not_join_says_so_once_and_stops_asking() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root("group-no-create");
    let (session, _) = connected(
        SessionConfig::new(server.connect_string()).with_chroot(root).with_session_timeout(Duration::from_secs(4)),
    )
    .await;
    session.ensure_path("/svc").await.expect("parent");
    read_only_dir(&session, GROUP).await;
    let events = Recorded::<GroupEvent>::start();
    let addr = GroupMember::new(session.clone(), GroupConfig::new(GROUP, "a")).expect("valid config").start();
    addr.do_send(Subscribe { recipient: events.recipient.clone() });
    let (_, failed) = events.wait_for(0, WAIT, |e| matches!(e, GroupEvent::JoinFailed { .. })).await;
    assert!(
        matches!(&failed, GroupEvent::JoinFailed { error: GroupError::ZooKeeper(Error::NoAuth { .. }) }),
        "{failed:?}"
    );
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let before = packets_received(&server.connect_string());
    actix_rt::time::sleep(Duration::from_secs(2)).await;
    let sent = packets_received(&server.connect_string()) - before;
    assert!(sent <= 6, "the member kept asking after a final error: {sent} packets in 2 s");
    assert_eq!(events.snapshot().iter().filter(|e| matches!(e, GroupEvent::JoinFailed { .. })).count(), 1, "told once");
    session.close().await;
}

/// Regression: a member whose id was taken by another session while its own session was
/// being rebuilt deleted that session's node when told to leave (its delete had no owner check),
/// and the other process stayed out of the group for its session's life.
#[actix_rt::test]
async fn leaving_never_deletes_another_sessions_member_node() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("group-leave-fenced");
    let a = member(&links.connect_string(), &root, "x", Duration::from_secs(4)).await;
    a.events.wait_for(0, WAIT, |e| matches!(e, GroupEvent::Joined { .. })).await;
    let other = connected(SessionConfig::new(zk.connect_string()).with_chroot(&root)).await.0;

    // a's session ends on the server while a cannot reach it, and another process takes the id
    // before a's new session can try to join again.
    let info = a.session.session().await.expect("session").info;
    links.blackhole();
    expire_session(&zk.connect_string(), &info).await.expect("expire a's session");
    let node = format!("{GROUP}/x");
    other.create(&node, "the other process", CreateMode::Ephemeral).await.expect("the other process joins as x");
    links.heal();
    let owner = other.session().await.expect("session").session_id;
    a.events.wait_for(0, WAIT, |e| matches!(e, GroupEvent::JoinFailed { .. })).await;

    let left = a.addr.send(Leave).await.expect("member");
    assert_eq!(left, Ok(()));
    let stat = other.exists(&node).await.expect("exists").expect("the other process's node is still there");
    assert_eq!(stat.ephemeral_owner, owner.0, "x is still the other process's");
    other.close().await;
    a.session.close().await;
}

// ---- Failure-table rows (docs/recipes/group.md), one test each ---------------------------------

/// The member node of `id` (its path, under `GROUP`).
fn node_of(id: &str) -> String {
    format!("{GROUP}/{id}")
}

/// Row "our node is deleted by someone else": we join again at once, on the same session, and
/// the others see us leave and come back.
#[actix_rt::test]
async fn a_member_whose_node_is_deleted_joins_again_at_once() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("group-deleted");
    let timeout = Duration::from_secs(4);
    let a = member(&zk.connect_string(), &root, "a", timeout).await;
    let b = member(&zk.connect_string(), &root, "b", timeout).await;
    sees(&a, &["a", "b"]).await;
    sees(&b, &["a", "b"]).await;
    let from = b.events.snapshot().len();
    b.session.delete(&node_of("a"), None).await.expect("delete a's node");
    let (left, _) = b.events.wait_for(from, WAIT, |e| *e == GroupEvent::MemberLeft { id: "a".into() }).await;
    b.events.wait_for(left, WAIT, |e| matches!(e, GroupEvent::MemberJoined { id, .. } if id == "a")).await;
    let owner = a.session.session().await.expect("session").session_id.0;
    let node = b.session.exists(&node_of("a")).await.expect("exists").expect("a's node is back");
    assert_eq!(node.ephemeral_owner, owner, "made again by a's own session");
    sees(&a, &["a", "b"]).await;
}

/// Row "the actor stops without `Leave`": its node is deleted, and the others see it leave.
#[actix_rt::test]
async fn a_member_that_stops_without_leave_deletes_its_node() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("group-stopped");
    let timeout = Duration::from_secs(20);
    let a = member(&zk.connect_string(), &root, "a", timeout).await;
    let b = member(&zk.connect_string(), &root, "b", timeout).await;
    sees(&b, &["a", "b"]).await;
    let from = b.events.snapshot().len();
    let Member { addr, session, .. } = a;
    let weak = addr.downgrade();
    drop(addr);
    wait_until("a's actor stopped", || weak.upgrade().is_none()).await;
    // Long before its session (20 s) could end: the actor deleted its node itself.
    b.events.wait_for(from, Duration::from_secs(5), |e| *e == GroupEvent::MemberLeft { id: "a".into() }).await;
    assert!(b.session.exists(&node_of("a")).await.expect("exists").is_none());
    assert!(session.session().await.is_some_and(|s| s.connected), "the session itself lives on");
    sees(&b, &["b"]).await;
}

/// Row "our connection drops and comes back": what changed meanwhile (a member left, another
/// joined) is reported when the view re-syncs, then `ViewResynced`.
#[actix_rt::test]
async fn changes_made_while_a_member_was_cut_off_are_reported_on_resync() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("group-resync");
    let timeout = Duration::from_secs(6);
    let a = member(&links.connect_string(), &root, "a", timeout).await;
    let b = member(&zk.connect_string(), &root, "b", timeout).await;
    sees(&a, &["a", "b"]).await;

    links.blackhole();
    links.reset();
    let from = a.events.snapshot().len();
    b.addr.send(Leave).await.expect("member").expect("b leaves");
    let c = member(&zk.connect_string(), &root, "c", timeout).await;
    sees(&c, &["a", "c"]).await;
    // The fault happened: a heard nothing of it while cut off.
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(a.events.snapshot().len(), from, "a heard changes while cut off: {:?}", &a.events.snapshot()[from..]);
    links.heal();
    let (resynced, _) = a.events.wait_for(from, WAIT, |e| *e == GroupEvent::ViewResynced).await;
    let told = &a.events.snapshot()[from..resynced];
    assert!(told.contains(&GroupEvent::MemberLeft { id: "b".into() }), "{told:?}");
    assert!(told.iter().any(|e| matches!(e, GroupEvent::MemberJoined { id, .. } if id == "c")), "{told:?}");
    sees(&a, &["a", "c"]).await;
}

/// Regression: `Leave` within a round trip of the join. Its delete looked for the node
/// before the join's create was sent, found nothing and answered `Ok`; the create then applied and
/// the member stopped: a ghost member, and `IdTaken` for the same id elsewhere, until the session
/// ended. Now the leave waits for the join in flight and deletes what it created.
#[actix_rt::test]
async fn a_leave_right_after_the_join_leaves_no_ghost_member() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("group-leave-early");
    let cfg = |c: &str| SessionConfig::new(c).with_chroot(&root).with_session_timeout(Duration::from_secs(10));
    let (observer, _) = connected(cfg(&zk.connect_string())).await;
    observer.ensure_path(GROUP).await.expect("group");
    for round in 0..3 {
        let (s, _) = connected(cfg(&links.connect_string())).await;
        // Replies come late: the join's first request is out, its create not sent yet.
        links.proxy(0).set_latency(actix_zookeeper::testkit::Direction::Downstream, Duration::from_millis(400));
        let addr = GroupMember::new(s.clone(), GroupConfig::new(GROUP, "a")).expect("config").start();
        actix_rt::time::sleep(Duration::from_millis(150)).await;
        bounded("leave", addr.send(Leave)).await.expect("member").expect("leave");
        links.heal();
        // The answer came; nothing of ours may stand in the group now or later.
        assert!(children(&observer, GROUP).await.is_empty(), "round {round}: a ghost member");
        actix_rt::time::sleep(Duration::from_secs(1)).await;
        assert!(children(&observer, GROUP).await.is_empty(), "round {round}: a ghost member after the leave");
        // The same id joins elsewhere at once.
        let again = member(&zk.connect_string(), &root, "a", Duration::from_secs(10)).await;
        again.events.wait_for(0, WAIT, |e| matches!(e, GroupEvent::Joined { .. })).await;
        again.addr.send(Leave).await.expect("member").expect("leave");
        again.session.close().await;
        s.close().await;
    }
    observer.close().await;
}

#[actix_rt::test]
async fn a_join_given_up_with_its_create_applied_leaves_no_member_behind() {
    // The create reaches the server and applies; its reply is held back by the proxy and then
    // lost with the connection: `ConnectionLoss`, outcome unknown. With one attempt allowed the
    // member gives up at once, and must remove the node that create made: nobody else may see a
    // member whose join was reported failed (the session lives on, so the node would stay).
    use actix_zookeeper::testkit::Direction;
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("group-give-up-applied");
    let (s, _) = connected(SessionConfig::new(links.connect_string()).with_chroot(&root)).await;
    let observer = connected(SessionConfig::new(zk.connect_string()).with_chroot(&root)).await.0;
    links.proxy(0).set_latency(Direction::Downstream, Duration::from_secs(2));
    let events = Recorded::<GroupEvent>::start();
    let config = GroupConfig::new("/", "m").with_retry(RetryPolicy::default().with_max_attempts(1));
    let member = GroupMember::new(s.clone(), config).expect("valid config").start();
    member.do_send(Subscribe { recipient: events.recipient.clone() });
    wait_until_async("the create applied", || async { observer.exists("/m").await.ok().flatten().is_some() }).await;
    links.proxy(0).set_latency(Direction::Downstream, Duration::ZERO);
    links.reset();
    events
        .wait_for(
            0,
            WAIT,
            |e| matches!(e, GroupEvent::JoinFailed { error: GroupError::ZooKeeper(error) } if error.outcome_unknown()),
        )
        .await;
    wait_until_async("the member node removed", || async { observer.exists("/m").await.ok().flatten().is_none() })
        .await;
    assert!(!events.snapshot().iter().any(|e| matches!(e, GroupEvent::Joined { .. })), "{:?}", events.snapshot());
    s.close().await;
    observer.close().await;
}
