//! What other processes leave in a recipe's directory, against a real ZooKeeper: names no
//! recipe of ours or Curator's would write (non-ASCII, a number too large for 64 bits, no number
//! at all) are skipped, and the recipe goes on working around them. The decoders themselves are
//! property-tested over arbitrary bytes and names beside their code (`mod bad_input`).
#![cfg(feature = "testkit")]

use crate::common;

use std::time::Duration;

use actix_zookeeper::election::{ElectionConfig, ElectionHandle};
use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{TestZooKeeper, unique_root};
use common::*;

const WAIT: Duration = Duration::from_secs(30);

/// Names that are no contender's: no sequence number, non-ASCII around a number, a run of
/// digits too long for 64 bits, and a number too short.
const HOSTILE: [&str; 5] = ["garbage", "lock-\u{fc}", "\u{e9}-lock-", "lock-99999999999999999999", "latch-0000012"];

async fn seed(s: &SessionHandle, dir: &str) {
    s.ensure_path(dir).await.expect("dir");
    for name in HOSTILE {
        s.create(&format!("{dir}/{name}"), "?", CreateMode::Persistent).await.expect("hostile node");
    }
}

#[actix_rt::test]
async fn a_lock_hands_over_around_nodes_no_contender_wrote() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("bad-input-lock");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    seed(&a, "/l").await;
    let (first, second) = (
        LockHandle::start(a.clone(), LockConfig::new("/l")).expect("lock"),
        LockHandle::start(b.clone(), LockConfig::new("/l")).expect("lock"),
    );
    for round in 0..3 {
        bounded("first acquires", first.acquire(Some(WAIT))).await.expect("first holds");
        let waiting = second.acquire(Some(WAIT));
        actix_rt::time::sleep(Duration::from_millis(50)).await;
        first.release().await.expect("released");
        bounded("the hand-over", waiting).await.unwrap_or_else(|e| panic!("round {round}: {e}"));
        second.release().await.expect("released");
    }
    let mut left = children(&a, "/l").await;
    left.sort();
    let mut expected = HOSTILE.to_vec();
    expected.sort();
    assert_eq!(left, expected, "our nodes went, the others stay");
    first.stop().await;
    second.stop().await;
    a.close().await;
    b.close().await;
}

#[actix_rt::test]
async fn an_election_hands_over_around_nodes_no_participant_wrote() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("bad-input-election");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    seed(&a, "/e").await;
    let first =
        ElectionHandle::start(a.clone(), ElectionConfig::new("/e").with_participant_id("first")).expect("election");
    bounded("first leads", first.leadership()).await.expect("first leads");
    let second =
        ElectionHandle::start(b.clone(), ElectionConfig::new("/e").with_participant_id("second")).expect("election");
    wait_until_async("both in line", || async { first.participants().await.unwrap_or_default().len() == 2 }).await;
    assert_eq!(second.leader().await.expect("leader").as_deref(), Some("first"));
    first.resign().await.expect("resigned");
    bounded("second leads", second.leadership()).await.expect("second leads");
    assert_eq!(second.participants().await.expect("participants"), ["second"], "a foreign node is no participant");
    first.stop().await;
    second.stop().await;
    a.close().await;
    b.close().await;
}

/// The server refuses a code point above U+FFFF (Java sees a surrogate pair); the session says so
/// before sending, naming the path, instead of passing on the server's bare "bad arguments". Each
/// name the check lets through, the server takes.
#[actix_rt::test]
async fn names_the_server_refuses_are_refused_before_sending() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("bad-input-names")).await;
    s.ensure_path("/n").await.expect("dir");
    for refused in ["\u{1F600}", "a\u{10000}", "\u{E000}", "\u{FFFF}"] {
        let path = format!("/n/{refused}");
        let err = s.create(&path, "", CreateMode::Persistent).await.unwrap_err();
        assert!(matches!(&err, Error::InvalidPath { path: p, .. } if *p == path), "{refused:?}: {err:?}");
    }
    for taken in ["\u{fc}ber", "\u{D7FF}", "\u{F900}", "\u{FFEF}", "lock-\u{4E2D}"] {
        s.create(&format!("/n/{taken}"), "", CreateMode::Persistent).await.unwrap_or_else(|e| panic!("{taken:?}: {e}"));
    }
    assert_eq!(children(&s, "/n").await.len(), 5);
    s.close().await;
}
