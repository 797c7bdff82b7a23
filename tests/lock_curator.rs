//! Wire compatibility with Apache Curator 5.4: a Java service using Curator's
//! `InterProcessMutex` / `InterProcessReadWriteLock` / `InterProcessSemaphoreV2` and a Rust
//! service using this crate share one lock and see mutual exclusion, both ways round.
#![cfg(feature = "testkit")]

use crate::common;
use crate::common::curator;

use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::lock::*;
use actix_zookeeper::testkit::{TestZooKeeper, unique_root};
use common::*;
use curator::{CuratorPeer, off_thread as peer};

const REPLY: Duration = Duration::from_secs(20);
const STILL_BLOCKED: Duration = Duration::from_secs(1);

async fn start_peer(connect: String, path: &'static str, kind: &'static str) -> CuratorPeer {
    actix_rt::task::spawn_blocking(move || CuratorPeer::start(&connect, path, kind))
        .await
        .expect("peer start")
        .expect("Curator peer (apt-get install libcurator-recipes-java)")
}

#[actix_rt::test]
async fn curator_mutex_and_lock_actor_exclude_each_other() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("curator-mutex");
    let (s, _) = connected(config_at(&zk.connect_string(), &root)).await;
    let java = start_peer(format!("{}{root}", zk.connect_string()), "/shared", "mutex").await;
    let rust = LockActor::new(s.clone(), LockConfig::new("/shared")).start();

    // Java holds; Rust waits until Java releases.
    let (java, node) = peer(java, |p| p.acquire(REPLY)).await;
    let node = node.expect("Curator acquires");
    assert!(node.starts_with("/shared/_c_") && node.contains("-lock-"), "{node}");
    let waiting = actix_rt::spawn(rust.send(Acquire::default()));
    actix_rt::time::sleep(STILL_BLOCKED).await;
    assert!(!waiting.is_finished(), "the Rust lock must wait while Curator holds");
    #[cfg(feature = "cli")]
    inspector_sees_curator_holding(&zk.connect_string(), &format!("{root}/shared"), &node);
    let (java, released) = peer(java, |p| p.release(REPLY)).await;
    released.expect("Curator releases");
    let grant = bounded("rust acquires", waiting).await.expect("task").expect("actor").expect("acquire");
    assert!(path_seq(&grant.node) > path_seq(&node), "the Rust node queued behind Curator's");

    // Rust holds; Java waits until Rust releases.
    let (java, sent) = peer(java, |p| p.send("acquire")).await;
    sent.expect("send acquire");
    let (java, line) = peer(java, |p| p.try_line(STILL_BLOCKED)).await;
    assert_eq!(line.expect("peer alive"), None, "Curator must wait while the Rust lock is held");
    rust.send(Release).await.expect("actor").expect("release");
    let (java, acquired) = peer(java, |p| p.expect_acquired(REPLY)).await;
    acquired.expect("Curator acquires after the Rust release");
    let (_java, released) = peer(java, |p| p.release(REPLY)).await;
    released.expect("Curator releases");
    s.close().await;
}

#[actix_rt::test]
async fn curator_read_write_lock_interoperates() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("curator-rw");
    let (s, _) = connected(config_at(&zk.connect_string(), &root)).await;
    let connect = format!("{}{root}", zk.connect_string());
    let java_writer = start_peer(connect.clone(), "/rw", "write").await;
    let java_reader = start_peer(connect, "/rw", "read").await;
    let rust_reader = LockActor::new(s.clone(), LockConfig::new("/rw").with_kind(LockKind::Read)).start();
    let rust_writer = LockActor::new(s.clone(), LockConfig::new("/rw").with_kind(LockKind::Write)).start();

    // A Curator writer excludes a Rust reader.
    let (java_writer, node) = peer(java_writer, |p| p.acquire(REPLY)).await;
    assert!(node.expect("Curator write lock").contains("-__WRIT__"));
    let reading = actix_rt::spawn(rust_reader.send(Acquire::default()));
    actix_rt::time::sleep(STILL_BLOCKED).await;
    assert!(!reading.is_finished(), "a Rust reader waits for the Curator writer");
    let (java_writer, released) = peer(java_writer, |p| p.release(REPLY)).await;
    released.expect("Curator releases the write lock");
    let read = bounded("rust read", reading).await.expect("task").expect("actor").expect("read lock");
    assert!(read.node.contains("-__READ__"));

    // Readers of both languages share.
    let (java_reader, node) = peer(java_reader, |p| p.acquire(REPLY)).await;
    assert!(node.expect("Curator read lock while Rust reads").contains("-__READ__"));

    // A Rust writer waits for both readers; a Curator writer then waits for the Rust writer.
    let writing = actix_rt::spawn(rust_writer.send(Acquire::default()));
    actix_rt::time::sleep(STILL_BLOCKED).await;
    assert!(!writing.is_finished());
    rust_reader.send(Release).await.expect("actor").expect("release read");
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert!(!writing.is_finished(), "the Curator reader still holds");
    let (_java_reader, released) = peer(java_reader, |p| p.release(REPLY)).await;
    released.expect("Curator releases the read lock");
    bounded("rust write", writing).await.expect("task").expect("actor").expect("write lock");
    let (java_writer, sent) = peer(java_writer, |p| p.send("acquire")).await;
    sent.expect("send");
    let (java_writer, line) = peer(java_writer, |p| p.try_line(STILL_BLOCKED)).await;
    assert_eq!(line.expect("peer alive"), None, "Curator's writer waits for the Rust writer");
    rust_writer.send(Release).await.expect("actor").expect("release write");
    let (_java_writer, acquired) = peer(java_writer, |p| p.expect_acquired(REPLY)).await;
    acquired.expect("Curator writer acquires");
    s.close().await;
}

#[actix_rt::test]
async fn curator_semaphore_and_semaphore_actor_share_leases() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("curator-sem");
    let (s, _) = connected(config_at(&zk.connect_string(), &root)).await;
    let java = start_peer(format!("{}{root}", zk.connect_string()), "/sem", "semaphore:2").await;
    let rust_a = SemaphoreActor::new(s.clone(), SemaphoreConfig::new("/sem", 2)).start();
    let rust_b = SemaphoreActor::new(s.clone(), SemaphoreConfig::new("/sem", 2)).start();

    let (java, lease) = peer(java, |p| p.acquire(REPLY)).await;
    assert!(lease.expect("Curator lease").starts_with("/sem/leases/_c_"));
    let a = rust_a.send(Acquire::default()).await.expect("actor").expect("second lease");
    let waiting = actix_rt::spawn(rust_b.send(Acquire::default()));
    actix_rt::time::sleep(STILL_BLOCKED).await;
    assert!(!waiting.is_finished(), "two leases are taken (one Curator, one Rust)");
    let (_java, released) = peer(java, |p| p.release(REPLY)).await;
    released.expect("Curator returns its lease");
    let b = bounded("third participant", waiting).await.expect("task").expect("actor").expect("lease");
    assert!(b.token > a.token);
    rust_a.send(Release).await.expect("actor").expect("release");
    rust_b.send(Release).await.expect("actor").expect("release");
    s.close().await;
}

/// Revocation, both ways: Curator's `Revoker` reaches our revocable holder, and our `revoke`
/// reaches a Curator `InterProcessMutex` that made itself revocable. Neither request releases
/// anything: each holder keeps its lock until it releases.
#[actix_rt::test]
async fn revocation_requests_cross_between_curator_and_lock_actors() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("curator-revoke");
    let (s, _) = connected(config_at(&zk.connect_string(), &root)).await;
    let java = start_peer(format!("{}{root}", zk.connect_string()), "/shared", "mutex").await;

    // Curator's Revoker -> our revocable holder.
    let rust = LockActor::new(s.clone(), LockConfig::new("/shared").with_participant_id("rust").revocable()).start();
    let events = Recorded::<LockEvent>::start();
    rust.do_send(Subscribe { recipient: events.recipient.clone() });
    let grant = rust.send(Acquire::default()).await.expect("actor").expect("rust acquires");
    let (java, revoked) = peer(java, {
        let node = grant.node.clone();
        move |p| p.revoke(&node, REPLY)
    })
    .await;
    revoked.expect("Curator's Revoker writes into our node");
    let (_, heard) = events.wait_for(0, REPLY, |e| matches!(e, LockEvent::RevocationRequested { .. })).await;
    assert_eq!(heard, LockEvent::RevocationRequested { participant: "rust".into(), node: grant.node.clone() });
    grant.guarded_write(&s, vec![]).await.expect("still the holder: a request releases nothing");
    rust.send(Release).await.expect("actor").expect("release");

    // Our revoke -> Curator's revocable mutex.
    let (java, made) = peer(java, |p| p.make_revocable(REPLY)).await;
    made.expect("makeRevocable");
    let (java, node) = peer(java, |p| p.acquire(REPLY)).await;
    let node = node.expect("Curator acquires");
    assert_eq!(revoke(&s, &node).await, Ok(Revocation::Requested));
    let (java, heard) = peer(java, |p| p.revocation_requested(REPLY)).await;
    assert!(heard.expect("peer alive"), "Curator's revocation listener never fired");
    let (_java, released) = peer(java, |p| p.release(REPLY)).await;
    released.expect("Curator releases");
    assert_eq!(revoke(&s, &node).await, Ok(Revocation::NoSuchNode), "nothing to revoke once released");
    s.close().await;
}

/// `zk-inspect` reads Curator's layout: Curator's node holds, ours waits behind it.
#[cfg(feature = "cli")]
fn inspector_sees_curator_holding(connect: &str, lock: &str, curator_node: &str) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zk-inspect"))
        .args(["--server", connect, "--json", "locks", lock])
        .output()
        .expect("zk-inspect runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let members = report["members"].as_array().expect("members");
    assert_eq!(members.len(), 2, "{report}");
    let curator_name = curator_node.rsplit('/').next().expect("a name");
    assert_eq!(members[0]["node"], curator_name, "{report}");
    assert_eq!(members[0]["holds"], true, "{report}");
    assert_eq!(members[1]["holds"], false, "{report}");
}

fn config_at(connect: &str, root: &str) -> actix_zookeeper::SessionConfig {
    actix_zookeeper::SessionConfig::new(connect).with_chroot(root).with_session_timeout(Duration::from_secs(6))
}

fn path_seq(node: &str) -> Option<u64> {
    actix_zookeeper::path::sequence(node)
}
