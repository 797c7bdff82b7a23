//! Wire compatibility with Curator 5.4's `LeaderLatch`: Java and Rust participants in one
//! election, one leader at a time, hand-off in both directions.
#![cfg(feature = "testkit")]

use crate::common;
use crate::common::curator;

use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::election::*;
use actix_zookeeper::testkit::{TestZooKeeper, unique_root};
use common::*;
use curator::{CuratorPeer, off_thread as peer};

const REPLY: Duration = Duration::from_secs(20);

async fn start_latch(connect: String, id: &'static str) -> CuratorPeer {
    actix_rt::task::spawn_blocking(move || CuratorPeer::start_latch(&connect, "/election", id))
        .await
        .expect("peer start")
        .expect("Curator peer (apt-get install libcurator-recipes-java)")
}

fn leads(events: &Recorded<ElectionEvent>) -> bool {
    let mut leading = false;
    for e in events.snapshot() {
        match e {
            ElectionEvent::LeadershipAcquired { .. } | ElectionEvent::LeadershipRestored { .. } => leading = true,
            ElectionEvent::LeadershipLost { .. } | ElectionEvent::LeadershipSuspended { .. } => leading = false,
            _ => {}
        }
    }
    leading
}

#[actix_rt::test]
async fn curator_leader_latch_and_election_actors_share_one_election() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("curator-latch");
    let cfg = actix_zookeeper::SessionConfig::new(zk.connect_string()).with_chroot(root.clone());
    let (s, _) = connected(cfg).await;
    let connect = format!("{}{root}", zk.connect_string());

    // Java joins first and leads.
    let java = start_latch(connect.clone(), "java").await;
    let (java, node) = peer(java, |p| p.latch_start(REPLY)).await;
    let node = node.expect("latch started");
    assert!(node.starts_with("/election/_c_") && node.contains("-latch-"), "{node}");
    let (java, event) = peer(java, |p| p.next_leadership_event(REPLY)).await;
    assert_eq!(event.expect("peer"), Some(true), "the first participant leads");

    // Two Rust participants queue behind it and learn who leads.
    let mut rust = Vec::new();
    for id in ["rust-1", "rust-2"] {
        let events = Recorded::<ElectionEvent>::start();
        let e = ElectionActor::new(s.clone(), ElectionConfig::new("/election").with_participant_id(id)).start();
        e.do_send(Subscribe { recipient: events.recipient.clone() });
        rust.push((e, events));
    }
    for (_, events) in &rust {
        events.wait_for(0, REPLY, |e| *e == ElectionEvent::LeaderChanged { leader_id: Some("java".into()) }).await;
    }
    let ids = rust[0].0.send(Participants).await.expect("actor").expect("participants");
    assert_eq!(ids, ["java", "rust-1", "rust-2"]);
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert!(rust.iter().all(|(_, ev)| !leads(ev)), "no Rust participant leads while Java does");

    // Java leaves: the next in line (Rust) takes over, and everyone learns it.
    let (_java, closed) = peer(java, |p| p.latch_close(REPLY)).await;
    closed.expect("latch closed");
    rust[0].1.wait_for(0, REPLY, |e| matches!(e, ElectionEvent::LeadershipAcquired { .. })).await;
    rust[1].1.wait_for(0, REPLY, |e| *e == ElectionEvent::LeaderChanged { leader_id: Some("rust-1".into()) }).await;
    assert!(!leads(&rust[1].1));

    // A new Java participant sees the Rust leader; when both Rust participants leave, Java leads.
    let java2 = start_latch(connect, "java-2").await;
    let (java2, started) = peer(java2, |p| p.latch_start(REPLY)).await;
    started.expect("second latch started");
    let (java2, leader) = peer(java2, |p| p.leader_id(REPLY)).await;
    assert_eq!(leader.expect("peer").as_deref(), Some("rust-1"), "Curator sees the Rust leader");
    let (java2, has) = peer(java2, |p| p.has_leadership(REPLY)).await;
    assert!(!has.expect("peer"));
    for (e, _) in &rust {
        e.send(Resign { requeue: false }).await.expect("actor").expect("resign");
    }
    let (java2, event) = peer(java2, |p| p.next_leadership_event(REPLY)).await;
    assert_eq!(event.expect("peer"), Some(true), "Curator takes over from Rust");
    rust[0]
        .1
        .wait_for(0, REPLY, |e| {
            *e == ElectionEvent::LeadershipLost { token: token_of(&rust[0].1), reason: LeadershipLostReason::Resigned }
        })
        .await;
    let (_java2, closed) = peer(java2, |p| p.latch_close(REPLY)).await;
    closed.expect("closed");
    s.close().await;
}

fn token_of(events: &Recorded<ElectionEvent>) -> FencingToken {
    events
        .snapshot()
        .into_iter()
        .find_map(|e| match e {
            ElectionEvent::LeadershipAcquired { token } => Some(token),
            _ => None,
        })
        .expect("acquired")
}

/// A proclaiming Rust leader leaves Curator's `LeaderLatch` a valid latch: Curator sees the Rust
/// leader, waits behind it and takes over; our observer follows Curator's term, without a value
/// (Curator proclaims none), and never shows the Rust term's value as Curator's.
#[actix_rt::test]
async fn a_proclaimed_value_leaves_curators_leader_latch_working() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("curator-proclaim");
    let cfg = actix_zookeeper::SessionConfig::new(zk.connect_string()).with_chroot(root.clone());
    let (s, _) = connected(cfg).await;
    let connect = format!("{}{root}", zk.connect_string());
    let rust = ElectionHandle::start(s.clone(), ElectionConfig::new("/election").with_participant_id("rust"))
        .expect("election");
    let term = bounded("rust leads", rust.leadership()).await.expect("leads");
    rust.proclaim("config-v7").await.expect("proclaimed");
    let observer = ElectionObserverHandle::start(s.clone(), "/election").expect("observer");

    let java = start_latch(connect, "java").await;
    let (java, started) = peer(java, |p| p.latch_start(REPLY)).await;
    started.expect("latch started beside a proclaimed value");
    let (java, leader) = peer(java, |p| p.leader_id(REPLY)).await;
    assert_eq!(leader.expect("peer").as_deref(), Some("rust"), "Curator sees the Rust leader");
    let (java, has) = peer(java, |p| p.has_leadership(REPLY)).await;
    assert!(!has.expect("peer"));
    let seen = observer.current().await.expect("current").expect("a leader");
    assert_eq!(
        (seen.leader_id.as_str(), seen.term, seen.value.as_deref()),
        ("rust", term.token, Some(&b"config-v7"[..]))
    );

    rust.resign().await.expect("resign");
    let (java, event) = peer(java, |p| p.next_leadership_event(REPLY)).await;
    assert_eq!(event.expect("peer"), Some(true), "Curator takes over");
    let deadline = std::time::Instant::now() + REPLY;
    let now = loop {
        let now = observer.current().await.expect("current");
        if now.as_ref().is_some_and(|p| p.leader_id == "java") {
            break now.expect("java");
        }
        assert!(std::time::Instant::now() < deadline, "the observer did not follow Curator's term: {now:?}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(now.term > term.token);
    assert_eq!(now.value, None, "the Rust term's value is not Curator's");
    // A Rust participant behind the Curator leader cannot proclaim.
    rust.join().await.expect("join");
    assert!(matches!(rust.proclaim("x").await, Err(ElectionError::NotLeader { .. })));
    let (_java, closed) = peer(java, |p| p.latch_close(REPLY)).await;
    closed.expect("closed");
    rust.stop().await;
    s.close().await;
}
