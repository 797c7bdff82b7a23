//! The tree cache under a partition: the cache's session reaches the server only through fault
//! proxies; three writers on sessions of their own change the tree at random before, during and
//! after the partition. Once the partition has healed and the writers are done, the cache's
//! snapshot must equal a fresh walk of the server (judged by `check_cache`), and the cache must
//! have said it re-synced.
#![cfg(feature = "testkit")]

use crate::common;

use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::cache::{CacheActor, CacheConfig, CacheEvent, Snapshot, Subscribe};
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{ClientLinks, ZkServer, unique_root};
use common::history::check_cache;
use common::scenario::{PAST_TIMEOUT, SESSION_TIMEOUT, WAIT, WITHIN_TIMEOUT, rounds, within_limit};
use common::tree::{prepare_dirs, walk, write_randomly};
use common::*;

async fn run(name: &str, outage: Duration) {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root(name);
    let links = ClientLinks::to(&[server.address().as_str()]).expect("fault proxy");
    let session_at =
        |connect: String| SessionConfig::new(connect).with_chroot(root.clone()).with_session_timeout(SESSION_TIMEOUT);
    let (reader, reader_events) = connected(session_at(links.connect_string())).await;
    prepare_dirs(&reader).await;
    let events = Recorded::<CacheEvent>::start();
    let cache = CacheActor::new(reader.clone(), CacheConfig::new("/t")).expect("config").start();
    cache.do_send(Subscribe { recipient: events.recipient.clone() });
    events.wait_for(0, WAIT, |e| *e == CacheEvent::CacheInitialized).await;

    let mut writers = Vec::new();
    for seed in 1..4 {
        let (s, _) = connected(session_at(server.address())).await;
        writers.push(actix_rt::spawn(write_randomly(s, seed, rounds(600), 200)));
    }
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    // The server's transaction id at a moment, read by a write of our own on a direct session:
    // two readings more than one apart mean the writers wrote in between.
    let (probe, _) = connected(session_at(server.address())).await;
    probe.create("/probe", "", CreateMode::Persistent).await.expect("probe");
    let zxid_now = || async { probe.set_data("/probe", "", None).await.expect("probe write").mzxid };
    let before = events.snapshot().len();
    links.blackhole();
    let cut_at = zxid_now().await;
    actix_rt::time::sleep(outage).await;
    let healed_at = zxid_now().await;
    links.heal();
    assert!(
        healed_at - cut_at > 1,
        "no write happened while the cache was cut off (zxid {cut_at:#x} then {healed_at:#x}): the outage proved nothing"
    );
    // The fault happened: the cache's session was cut off (and, past the timeout, expired).
    let (suspended, _) = reader_events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Suspended { .. })).await;
    if outage > SESSION_TIMEOUT {
        reader_events.wait_for(suspended, WAIT, |e| matches!(e, SessionEvent::Expired { .. })).await;
    } else {
        reader_events.wait_for(suspended, WAIT, |e| matches!(e, SessionEvent::Reconnected { .. })).await;
    }
    let (resynced, _) = events.wait_for(before, WAIT, |e| *e == CacheEvent::CacheResynced).await;
    // The re-sync reported what the cache missed while cut off (there was something: above).
    let missed = events.snapshot()[before..resynced]
        .iter()
        .filter(|e| {
            matches!(e, CacheEvent::NodeAdded { .. } | CacheEvent::NodeUpdated { .. } | CacheEvent::NodeRemoved { .. })
        })
        .count();
    assert!(missed > 0, "the re-sync reported no change made during the outage");
    for writer in writers {
        writer.await.expect("writer");
    }

    // The cache applies what it hears in order; give it until a deadline to catch up, then let
    // the checker judge the last comparison.
    let deadline = Instant::now() + WAIT;
    let (snapshot, server_now) = loop {
        let server_now = walk(&reader, "/t").await;
        let snapshot: std::collections::BTreeMap<String, Vec<u8>> = cache
            .send(Snapshot)
            .await
            .expect("cache")
            .into_iter()
            .map(|(p, n)| (p, n.data.unwrap_or_default()))
            .collect();
        if snapshot == server_now || Instant::now() > deadline {
            break (snapshot, server_now);
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(server_now.len() > 11, "the writers left nodes to compare: {}", server_now.len());
    let violations = check_cache(&snapshot, &server_now);
    assert!(violations.is_empty(), "{name}: the cache differs from the server after healing: {violations:#?}");
    reader.close().await;
    probe.close().await;
}

#[actix_rt::test]
async fn cache_partitioned_within_its_session_timeout() {
    within_limit(run("cache-short-partition", WITHIN_TIMEOUT)).await;
}

#[actix_rt::test]
async fn cache_partitioned_past_its_session_timeout() {
    within_limit(run("cache-long-partition", PAST_TIMEOUT)).await;
}
