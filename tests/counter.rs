//! The shared counter against a real ZooKeeper: exact concurrent increments from several
//! sessions, Curator 5.4 `SharedCount` interop, change notifications across a server-side
//! expiry, a server restart and an ensemble member outage, writes cut off by a crash, bad input.
#![cfg(feature = "testkit")]

use crate::common;
use crate::common::curator;

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::counter::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{
    ClientLinks, Direction, TestZooKeeper, ZkEnsemble, ZkServer, expire_session, unique_root,
};
use common::*;
use curator::{CuratorPeer, off_thread as peer};

const WAIT: Duration = Duration::from_secs(20);

/// A session config under `root`, shared by every session of one test.
fn at(connect: &str, root: &str, timeout: Duration) -> SessionConfig {
    SessionConfig::new(connect).with_chroot(root).with_session_timeout(timeout)
}

fn start_count(session: &SessionHandle, path: &str, seed: i32) -> Addr<SharedCount> {
    SharedCount::new(session.clone(), SharedCountConfig::new(path).with_seed(seed)).start()
}

/// A count's value and version (which node it belongs to is checked where it matters).
fn vv(count: VersionedCount) -> (i32, i32) {
    (count.value, count.version)
}

async fn get(count: &Addr<SharedCount>) -> VersionedCount {
    bounded("GetCount", count.send(GetCount)).await.expect("actor").expect("count")
}

/// A count actor subscribed to by a fresh recorder.
fn watched(count: &Addr<SharedCount>) -> Recorded<CountChanged> {
    let changes = Recorded::<CountChanged>::start();
    count.do_send(Subscribe { recipient: changes.recipient.clone() });
    changes
}

/// Waits for `GetCount` to answer `value` (a watched copy may lag a write by a notification).
async fn eventually(count: &Addr<SharedCount>, value: i32) -> VersionedCount {
    let deadline = Instant::now() + WAIT;
    loop {
        let now = get(count).await;
        if now.value == value {
            return now;
        }
        assert!(Instant::now() < deadline, "count is {now:?}, expected {value}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One increment the way Curator documents it: read, compare-and-set, again on `false`.
/// Returns how many attempts lost.
async fn increment(count: Addr<SharedCount>) -> u64 {
    let mut lost = 0;
    loop {
        let seen = count.send(GetCount).await.expect("actor").expect("GetCount");
        let set = TrySetCount { value: seen.value + 1, expected: seen };
        if count.send(set).await.expect("actor").expect("TrySetCount") {
            return lost;
        }
        lost += 1;
    }
}

#[actix_rt::test]
async fn four_sessions_incrementing_concurrently_end_at_exactly_2000() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("counter-cas");
    let mut sessions = Vec::new();
    let mut counts = Vec::new();
    for _ in 0..4 {
        let (s, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(10))).await;
        counts.push(start_count(&s, "/counters/hits", 0));
        sessions.push(s);
    }

    let started = Instant::now();
    let successes: Vec<Rc<Cell<u64>>> = (0..4).map(|_| Rc::new(Cell::new(0))).collect();
    let mut lost = 0;
    // Eight incrementers per session, 62 or 63 increments each in turn: 32 compare-and-sets in
    // flight on one node from four sessions. (All 2,000 at once made every round's 1,999 losers
    // try again: 400,000 lost attempts, 10 s of CPU, with no more contention per write.)
    let tasks = counts.iter().zip(&successes).flat_map(|(count, won)| {
        (0..8).map(move |i| {
            let (count, won) = (count.clone(), won.clone());
            async move {
                let mut lost = 0;
                for _ in 0..(500 + 7 - i) / 8 {
                    lost += increment(count.clone()).await;
                    won.set(won.get() + 1);
                }
                lost
            }
        })
    });
    let all = futures::future::join_all(tasks);
    match actix_rt::time::timeout(Duration::from_secs(300), all).await {
        Ok(losses) => lost += losses.iter().sum::<u64>(),
        Err(_) => panic!("2000 increments not done in 300 s; successes so far {successes:?}"),
    }
    let won: Vec<u64> = successes.iter().map(|c| c.get()).collect();
    println!("2000 increments in {:?}: successful CAS per session {won:?}, lost attempts {lost}", started.elapsed());
    assert_eq!(won.iter().sum::<u64>(), 2000);

    // A fresh session reads 2000, at version 2000 (one write per increment, none lost or doubled).
    let (fresh, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(10))).await;
    let reader = start_count(&fresh, "/counters/hits", 0);
    assert_eq!(vv(get(&reader).await), (2000, 2000));
    let raw = fresh.get_data("/counters/hits").await.expect("raw read");
    assert_eq!(raw.data, [0x00, 0x00, 0x07, 0xd0], "4 bytes, big-endian");
    assert_eq!(raw.stat.version, 2000);
    // Every counter's watched copy converges too.
    for count in &counts {
        assert_eq!(eventually(count, 2000).await.version, 2000);
    }
    for s in sessions.iter().chain([&fresh]) {
        s.close().await;
    }
}

#[actix_rt::test]
async fn rust_and_curator_share_one_count() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("counter-curator");
    let (s1, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(10))).await;
    let (s2, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(10))).await;

    // Rust creates the count (seed 100); Curator, started later with seed 0, finds it.
    let c1 = start_count(&s1, "/shared/count", 100);
    assert_eq!(vv(get(&c1).await), (100, 0));
    let c2 = start_count(&s2, "/shared/count", 0);
    let connect = format!("{}{root}", zk.connect_string());
    let java = actix_rt::task::spawn_blocking(move || CuratorPeer::start_count(&connect, "/shared/count", 0))
        .await
        .expect("peer start")
        .expect("Curator peer (apt-get install libcurator-recipes-java)");
    let (java, seen) = peer(java, |p| p.count_get(WAIT)).await;
    assert_eq!(seen.expect("Curator get"), (100, 0), "Curator reads the count Rust created");

    // Curator (4 threads, 600 increments) and two Rust sessions (300 `add`s each) at once.
    let curator = peer(java, |p| p.count_increment(600, 4, Duration::from_secs(120)));
    let rust = futures::future::join_all(
        [&c1, &c2].into_iter().flat_map(|c| (0..300).map(move |_| add(c, 1))).collect::<Vec<_>>(),
    );
    let ((java, curator), rust) = futures::join!(curator, rust);
    let (won, lost) = curator.expect("Curator increments");
    assert_eq!(won, 600);
    assert!(rust.iter().all(|r| r.is_ok()), "{:?}", rust.iter().find(|r| r.is_err()));
    println!("Curator lost {lost} attempts while Rust added concurrently");
    let total = 100 + 600 + 600;
    assert_eq!(vv(eventually(&c1, total).await), (total, 1200));
    let raw = s1.get_data("/shared/count").await.expect("raw");
    assert_eq!(raw.data, total.to_be_bytes());
    let deadline = Instant::now() + WAIT;
    let mut java = java;
    loop {
        let (back, seen) = peer(java, |p| p.count_get(WAIT)).await;
        java = back;
        if seen.expect("Curator get") == (total, 1200) {
            break;
        }
        assert!(Instant::now() < deadline, "Curator never saw {total}");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }

    // Curator sets; the Rust subscriber hears it.
    let changes = watched(&c2);
    let (java, set) = peer(java, |p| p.count_set(4242, WAIT)).await;
    set.expect("Curator set");
    let (_, changed) = changes.wait_for(0, WAIT, |c| c.value == 4242).await;
    assert_eq!((changed.value, changed.version), (4242, 1201));

    // Rust sets a negative count; Curator's SharedCount reads it (two's complement agrees).
    let written = c1.send(SetCount { value: -7 }).await.expect("actor").expect("set");
    assert_eq!(vv(written), (-7, 1202));
    let deadline = Instant::now() + WAIT;
    let mut java = java;
    loop {
        let (back, seen) = peer(java, |p| p.count_get(WAIT)).await;
        java = back;
        if seen.expect("Curator get") == (-7, 1202) {
            break;
        }
        assert!(Instant::now() < deadline, "Curator never saw -7");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    // And a Rust compare-and-set against Curator's last write.
    let (java, set) = peer(java, |p| p.count_set(5, WAIT)).await;
    set.expect("Curator set");
    let now = changes.wait_for(0, WAIT, |c| c.value == 5).await.1;
    assert!(c2.send(TrySetCount { value: 6, expected: now.into() }).await.expect("actor").expect("cas"));
    assert!(!c2.send(TrySetCount { value: 7, expected: now.into() }).await.expect("actor").expect("cas"));
    drop(java);
    s1.close().await;
    s2.close().await;
}

#[actix_rt::test]
async fn subscribers_see_every_change_in_version_order() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("counter-order");
    let (a, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(10))).await;
    let (b, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(10))).await;
    let count = start_count(&a, "/c", 0);
    let changes = watched(&count);
    changes.wait_for(0, WAIT, |c| (c.value, c.version) == (0, 0)).await;

    // Paced writes from another session: each one is reported, in order.
    for k in 1..=10 {
        b.set_data("/c", encode_count(k * 10), Some(k - 1)).await.expect("set");
        changes.wait_for(0, WAIT, |c| c.version == k).await;
    }
    let paced: Vec<_> = changes.snapshot().iter().map(|c| (c.value, c.version)).collect();
    let expected: Vec<_> = (0..=10).map(|k| (k * 10, k)).collect();
    assert_eq!(paced, expected);

    // A burst: versions strictly grow, every value belongs to its version, the last is there.
    let burst: Vec<_> = (11..=60).map(|k| b.set_data("/c", encode_count(k * 10), Some(k - 1))).collect();
    for write in burst {
        write.await.expect("burst write");
    }
    changes.wait_for(0, WAIT, |c| c.version == 60).await;
    // Our own write is reported as well.
    let own = count.send(SetCount { value: 7 }).await.expect("actor").expect("set");
    assert_eq!(vv(own), (7, 61));
    changes.wait_for(0, WAIT, |c| c.version == 61).await;
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    let all = changes.snapshot();
    assert!(all.windows(2).all(|w| w[0].version < w[1].version), "{all:?}");
    assert!(all.iter().all(|c| c.value == c.version * 10 || c.version == 61), "{all:?}");
    assert_eq!(all.last().map(|c| (c.value, c.version)), Some((7, 61)));
    println!("burst of 50 writes reported as {} notifications", all.len() - 12);

    // A late subscriber starts with the current count.
    let late = watched(&count);
    late.wait_for(0, WAIT, |c| (c.value, c.version) == (7, 61)).await;
    a.close().await;
    b.close().await;
}

#[actix_rt::test]
async fn a_change_made_around_a_server_side_expiry_is_reported_by_the_new_session() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("counter-expiry");
    let (a, a_events) = connected(at(&zk.connect_string(), &root, Duration::from_secs(4))).await;
    let (b, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(4))).await;
    let count = start_count(&a, "/c", 1);
    let changes = watched(&count);
    changes.wait_for(0, WAIT, |c| c.value == 1).await;

    let info = a.session().await.expect("session").info;
    expire_session(&zk.connect_string(), &info).await.expect("server-side expiry");
    b.set_data("/c", encode_count(41), None).await.expect("write while A's session is gone");
    let (i, _) = a_events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Expired { .. })).await;
    a_events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Connected { generation: 2, .. })).await;
    changes.wait_for(0, WAIT, |c| c.value == 41).await;

    // The new session watches again.
    b.set_data("/c", encode_count(42), None).await.expect("write");
    let (_, last) = changes.wait_for(0, WAIT, |c| c.value == 42).await;
    assert_eq!(get(&count).await, last.into());
    let all = changes.snapshot();
    assert!(all.windows(2).all(|w| w[0].version < w[1].version), "{all:?}");
    a.close().await;
    b.close().await;
}

#[actix_rt::test]
async fn after_a_server_restart_the_count_is_read_and_watched_again() {
    init_tracing();
    let mut server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root("counter-restart");
    let (a, a_events) = connected(at(&server.connect_string(), &root, Duration::from_secs(10))).await;
    let (b, _) = connected(at(&server.connect_string(), &root, Duration::from_secs(10))).await;
    let count = start_count(&a, "/c", 0);
    let changes = watched(&count);
    changes.wait_for(0, WAIT, |c| c.version == 0).await;
    let before = a.session().await.expect("session").session_id;

    server.stop().expect("stop");
    let (i, _) = a_events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Suspended { .. })).await;
    server.restart().expect("restart");
    // Sent at once: it may reach the server before A is back.
    b.set_data("/c", encode_count(11), None).await.expect("write after restart");
    let (_, back) = a_events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Reconnected { .. })).await;
    assert_eq!(back, SessionEvent::Reconnected { session_id: before, generation: 1, read_only: false });
    changes.wait_for(0, WAIT, |c| c.value == 11).await;

    b.set_data("/c", encode_count(12), None).await.expect("write");
    changes.wait_for(0, WAIT, |c| c.value == 12).await;
    assert_eq!(eventually(&count, 12).await.version, 2);
    a.close().await;
    b.close().await;
}

#[actix_rt::test]
async fn changes_made_while_disconnected_are_reported_after_reconnect_and_after_a_new_session() {
    init_tracing();
    let mut ensemble = ZkEnsemble::start(3).expect("3-node ensemble");
    let root = unique_root("counter-outage");
    // A talks to one follower only; B to the two other members.
    let leader = ensemble.leader().expect("a quorum leader");
    let m = (0..3).find(|&i| i != leader).expect("a follower");
    let others: Vec<String> = (0..3).filter(|&i| i != m).map(|i| ensemble.member_address(i)).collect();
    let b_connect = others.join(",");
    let (a, a_events) = connected(at(&ensemble.member_address(m), &root, Duration::from_secs(30))).await;
    let (b, _) = connected(at(&b_connect, &root, Duration::from_secs(30))).await;
    let count = start_count(&a, "/c", 0);
    let changes = watched(&count);
    changes.wait_for(0, WAIT, |c| c.version == 0).await;
    let info = a.session().await.expect("session").info;

    // 1. A's member is down (A's session lives on); B writes; A's member comes back.
    ensemble.stop_member(m).expect("stop A's member");
    let (i, _) = a_events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Suspended { .. })).await;
    b.set_data("/c", encode_count(1001), None).await.expect("write while A is disconnected");
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    assert!(changes.snapshot().iter().all(|c| c.value != 1001), "A cannot know yet");
    ensemble.restart_member(m).expect("restart A's member");
    let (i, _) = a_events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Reconnected { generation: 1, .. })).await;
    changes.wait_for(0, WAIT, |c| c.value == 1001).await;

    // 2. Down again, and A's session is expired meanwhile; B writes; A comes back with a new
    //    session and reports the write.
    ensemble.stop_member(m).expect("stop A's member");
    let (i, _) = a_events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Suspended { .. })).await;
    expire_session(&b_connect, &info).await.expect("expire A's session through the other members");
    b.set_data("/c", encode_count(2002), None).await.expect("write while A has no session");
    ensemble.restart_member(m).expect("restart A's member");
    a_events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Connected { generation: 2, .. })).await;
    changes.wait_for(0, WAIT, |c| c.value == 2002).await;

    // 3. And watches on the new session.
    b.set_data("/c", encode_count(3003), None).await.expect("write");
    changes.wait_for(0, WAIT, |c| c.value == 3003).await;
    let all = changes.snapshot();
    assert!(all.windows(2).all(|w| w[0].version < w[1].version), "{all:?}");
    a.close().await;
    b.close().await;
}

#[actix_rt::test]
async fn a_crash_during_writes_gives_typed_errors_and_never_loses_count_of_what_applied() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root("counter-crash");
    let connect = server.connect_string();
    let (a, _) = connected(at(&connect, &root, Duration::from_secs(10))).await;
    let count = start_count(&a, "/c", 0);
    get(&count).await;
    let overwritten = start_count(&a, "/s", 0);
    get(&overwritten).await;

    let running = Rc::new(Cell::new(true));
    let (won, unknown, read_failed) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let loops: Vec<_> = (0..8)
        .map(|_| {
            let (count, running) = (count.clone(), running.clone());
            let (won, unknown, read_failed) = (won.clone(), unknown.clone(), read_failed.clone());
            async move {
                while running.get() {
                    match bounded("an add during a crash", add(&count, 1)).await {
                        Ok(_) => won.set(won.get() + 1),
                        Err(CounterError::OutcomeUnknown { path, .. }) => {
                            assert_eq!(path, "/c");
                            unknown.set(unknown.get() + 1);
                        }
                        // A read cut off: nothing was written, try again.
                        Err(CounterError::ZooKeeper(err)) if err.is_transient() => {
                            read_failed.set(read_failed.get() + 1)
                        }
                        Err(other) => panic!("unexpected error {other:?}"),
                    }
                }
            }
        })
        .collect();
    // Unconditional writes keep a write in flight nearly all the time.
    let (sets, sets_unknown) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let setters: Vec<_> = (0..4)
        .map(|_| {
            let (count, running, sets, sets_unknown) =
                (overwritten.clone(), running.clone(), sets.clone(), sets_unknown.clone());
            async move {
                while running.get() {
                    match bounded("a set during a crash", count.send(SetCount { value: 1 })).await.expect("actor") {
                        Ok(written) => {
                            assert_eq!(written.value, 1);
                            sets.set(sets.get() + 1);
                        }
                        Err(CounterError::OutcomeUnknown { .. }) => sets_unknown.set(sets_unknown.get() + 1),
                        Err(other) => panic!("unexpected error {other:?}"),
                    }
                }
            }
        })
        .collect();
    let crash = async {
        actix_rt::time::sleep(Duration::from_millis(300)).await;
        while won.get() < 10 {
            actix_rt::time::sleep(Duration::from_millis(10)).await;
        }
        // A crash can fall between two writes (each actor has at most one in
        // flight, and a write made while cut off waits for the reconnect), so
        // crash again until one meets a write in flight, a few times at most.
        let mut server = server;
        for _ in 0..5 {
            server = actix_rt::task::spawn_blocking(move || {
                let mut server = server;
                server.kill().expect("kill");
                std::thread::sleep(Duration::from_millis(500));
                server.restart().expect("restart");
                server
            })
            .await
            .expect("crash");
            actix_rt::time::sleep(Duration::from_millis(500)).await;
            if unknown.get() + sets_unknown.get() > 0 {
                break;
            }
        }
        running.set(false);
        server
    };
    let (_, _, server) = futures::join!(futures::future::join_all(loops), futures::future::join_all(setters), crash);
    let (won, unknown) = (won.get(), unknown.get());
    println!(
        "adds applied: {won}, outcome unknown: {unknown}, reads cut off: {}; sets: {} applied, {} unknown",
        read_failed.get(),
        sets.get(),
        sets_unknown.get()
    );
    assert!(won > 0);
    // The fault happened: a write was cut off in flight, and was told as such.
    assert!(unknown + sets_unknown.get() > 0, "no write met the crash");

    let (fresh, _) = connected(at(&server.connect_string(), &root, Duration::from_secs(10))).await;
    let total = fresh.get_data("/c").await.expect("raw read");
    let total = u64::try_from(decode_count("/c", &total.data).expect("a count")).expect("positive");
    assert!(won <= total && total <= won + unknown, "{won} applied, {unknown} unknown, count {total}");
    a.close().await;
    fresh.close().await;
}

#[actix_rt::test]
async fn a_deleted_count_is_created_again_with_the_seed() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("counter-deleted");
    let (s, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(10))).await;
    // Parents are created on demand; an existing node keeps its count whatever the seed.
    s.create("/existing", encode_count(77), CreateMode::Persistent).await.expect("create");
    let existing = start_count(&s, "/existing", 5);
    assert_eq!(vv(get(&existing).await), (77, 0));

    let count = start_count(&s, "/deep/er/c", 9);
    let changes = watched(&count);
    assert_eq!(vv(get(&count).await), (9, 0));
    count.send(SetCount { value: 50 }).await.expect("actor").expect("set");
    let (set, _) = changes.wait_for(0, WAIT, |c| c.value == 50).await;
    s.delete("/deep/er/c", None).await.expect("delete");
    let (i, again) = changes.wait_for(set + 1, WAIT, |c| c.value == 9).await;
    assert_eq!((i, again.version), (set + 1, 0), "{:?}", changes.snapshot());
    assert_eq!(s.get_data("/deep/er/c").await.expect("recreated").data, encode_count(9));
    // A compare-and-set against the deleted node's version does not apply.
    let stale = VersionedCount::guess(50, 1);
    assert!(!count.send(TrySetCount { value: 51, expected: stale }).await.expect("actor").expect("cas"));
    assert_eq!(vv(add(&count, 1).await.expect("add")), (10, 1));
    s.close().await;
}

#[actix_rt::test]
async fn bad_input_gets_a_typed_error_naming_the_path() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("counter-bad");
    let (s, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(10))).await;

    // Not 4 bytes: NotACount, for every request that needs the count.
    for (path, data) in [("/three", &b"\x00\x00\x01"[..]), ("/five", b"\x00\x00\x00\x01\x00"), ("/empty", b"")] {
        s.create(path, data, CreateMode::Persistent).await.expect("create");
        let count = start_count(&s, path, 0);
        let changes = watched(&count);
        let not_a_count = CounterError::NotACount { path: path.into(), len: data.len() };
        assert_eq!(count.send(GetCount).await.expect("actor"), Err(not_a_count.clone()));
        let guess = TrySetCount { value: 1, expected: VersionedCount::guess(0, 0) };
        assert_eq!(count.send(guess).await.expect("actor"), Err(not_a_count.clone()));
        assert_eq!(add(&count, 1).await, Err(not_a_count.clone()));
        assert_eq!(s.get_data(path).await.expect("read").data, data, "nothing was written");
        assert!(changes.snapshot().is_empty(), "{:?}", changes.snapshot());
        assert_eq!(not_a_count.path(), Some(path));
        // An unconditional set repairs it.
        let set = count.send(SetCount { value: 5 }).await.expect("actor").expect("set");
        assert_eq!(vv(set), (5, 1));
        assert_eq!(get(&count).await, set);
        changes.wait_for(0, WAIT, |c| (c.value, c.version) == (5, 1)).await;
    }

    // Invalid paths: a typed error for every request, nothing sent.
    for path in ["relative", "/a//b", "/trailing/", "", "/a/./b"] {
        let count = start_count(&s, path, 0);
        let invalid = |r: Result<(), CounterError>| match r {
            Err(CounterError::ZooKeeper(Error::InvalidPath { path: p, .. })) => p == path,
            _ => false,
        };
        assert!(invalid(count.send(GetCount).await.expect("actor").map(|_| ())), "{path}");
        let guess = TrySetCount { value: 1, expected: VersionedCount::guess(0, 0) };
        assert!(invalid(count.send(guess).await.expect("actor").map(|_| ())), "{path}");
        assert!(invalid(count.send(SetCount { value: 1 }).await.expect("actor").map(|_| ())), "{path}");
        assert!(invalid(add(&count, 1).await.map(|_| ())), "{path}");
    }

    // Overflow: refused before anything is written.
    let max = start_count(&s, "/max", i32::MAX);
    assert_eq!(add(&max, 1).await, Err(CounterError::Overflow { path: "/max".into(), value: i32::MAX, by: 1 }));
    assert_eq!(add(&max, -1).await.map(vv), Ok((i32::MAX - 1, 1)));

    // A stopped counter says so.
    max.send(Stop).await.expect("actor");
    assert_eq!(add(&max, 1).await, Err(CounterError::Stopped));
    s.close().await;
}

#[actix_rt::test]
async fn dropping_the_last_address_stops_the_counter() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("counter-drop");
    let (s, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(10))).await;
    let count = start_count(&s, "/c", 3);
    let changes = watched(&count);
    changes.wait_for(0, WAIT, |c| c.value == 3).await;
    // Its watch is armed, and still it stops: the watch holds it only weakly.
    drop(count);
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    s.set_data("/c", encode_count(4), None).await.expect("write");
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        changes.snapshot().iter().map(|c| (c.value, c.version)).collect::<Vec<_>>(),
        [(3, 0)],
        "a stopped counter reports nothing"
    );
    s.close().await;
}

/// Regression: versions start again at 0 when a node is deleted and created again, so a
/// count read from the old node passed a compare-and-set on the new one (same version). A count
/// now says which node it was read from, and a compare-and-set against another node fails.
#[actix_rt::test]
async fn a_count_read_from_a_deleted_node_never_sets_the_new_one() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("counter-recreated");
    let (s, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(10))).await;
    let (other, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(10))).await;
    let count = start_count(&s, "/c", 0);
    let changes = watched(&count);
    let old = get(&count).await;
    assert_eq!(vv(old), (0, 0));

    // Another process deletes the count and makes it again, at version 0 like the old one; in one
    // transaction, or our counter (which makes a deleted count again) may get there first.
    other
        .multi(vec![
            Op::Delete { path: "/c".into(), version: None },
            Op::Create { path: "/c".into(), data: encode_count(0).to_vec(), mode: CreateMode::Persistent },
        ])
        .await
        .expect("delete and create again");
    let new = other.exists("/c").await.expect("exists").expect("there").czxid;
    assert_ne!(new, old.czxid);
    changes.wait_for(0, WAIT, |c| c.czxid == new).await;

    let set = count.send(TrySetCount { value: 1, expected: old }).await.expect("actor");
    assert_eq!(set, Ok(false), "a count of the old node does not set the new one");
    let node = other.get_data("/c").await.expect("read");
    assert_eq!((node.data, node.stat.version), (encode_count(0).to_vec(), 0), "nothing was written");
    // A count read from the new node does.
    let fresh = get(&count).await;
    assert_eq!(fresh.czxid, new);
    assert_eq!(count.send(TrySetCount { value: 1, expected: fresh }).await.expect("actor"), Ok(true));
    s.close().await;
    other.close().await;
}

// ---- Failure-table rows (docs/recipes/counter.md), one test each -------------------------------

/// The count stored on the server, read raw.
async fn stored(s: &SessionHandle, path: &str) -> i32 {
    decode_count(path, &s.get_data(path).await.expect("raw read").data).expect("a count")
}

/// Row "someone else wrote first": a `TrySetCount` at the version we read is `Ok(false)` and
/// writes nothing; our copy then has the other writer's count.
#[actix_rt::test]
async fn a_try_set_after_someone_else_wrote_is_refused() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("counter-stale");
    let (a, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(4))).await;
    let (b, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(4))).await;
    let ours = start_count(&a, "/c", 5);
    let theirs = start_count(&b, "/c", 5);
    let read = get(&ours).await;
    theirs.send(SetCount { value: 40 }).await.expect("actor").expect("they write first");
    let refused = ours.send(TrySetCount { value: 6, expected: read }).await.expect("actor");
    assert_eq!(refused, Ok(false));
    assert_eq!(stored(&a, "/c").await, 40, "nothing written by the refused set");
    assert_eq!(eventually(&ours, 40).await.value, 40);
}

/// Rows "disconnected (session lives)" and "session expired on the server": requests made while
/// the session is cut off wait for the connection (the same session, or a new one after an
/// expiry) and are answered after it, each applied once.
#[actix_rt::test]
async fn requests_made_while_cut_off_are_answered_after_a_reconnect_and_after_an_expiry() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("counter-offline");
    let (s, events) = connected(at(&links.connect_string(), &root, Duration::from_secs(6))).await;
    let (observer, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(6))).await;
    let count = start_count(&s, "/c", 0);
    assert_eq!(get(&count).await.value, 0);

    for expire in [false, true] {
        let before = stored(&observer, "/c").await;
        let info = s.session().await.expect("session").info;
        links.blackhole();
        links.reset();
        events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Suspended { .. })).await;
        if expire {
            expire_session(&zk.connect_string(), &info).await.expect("expire");
        }
        let adding = actix_rt::spawn(add(&count, 1));
        let reading = actix_rt::spawn(count.send(GetCount));
        actix_rt::time::sleep(Duration::from_millis(500)).await;
        assert!(!adding.is_finished() && !reading.is_finished(), "answered while cut off");
        links.heal();
        let added = bounded("the add", adding).await.expect("task").expect("applied");
        assert_eq!(added.value, before + 1, "expire: {expire}");
        let read = bounded("the read", reading).await.expect("task").expect("actor").expect("count");
        assert!(read.value == before || read.value == before + 1, "expire: {expire}: {read:?}");
        assert_eq!(stored(&observer, "/c").await, before + 1, "applied once (expire: {expire})");
        let generation = s.session().await.expect("session").generation;
        assert_eq!(generation, if expire { 2 } else { 1 }, "expire: {expire}");
    }
}

/// Row "connection lost while a write is in flight": the add applied, its reply was lost (held
/// by the proxy, then the connection dropped): `OutcomeUnknown`, never `Ok`, never retried.
#[actix_rt::test]
async fn an_add_whose_reply_is_lost_is_an_unknown_outcome() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("counter-unknown");
    let (s, _) = connected(at(&links.connect_string(), &root, Duration::from_secs(10))).await;
    let (observer, _) = connected(at(&zk.connect_string(), &root, Duration::from_secs(10))).await;
    let count = start_count(&s, "/c", 0);
    assert_eq!(get(&count).await.value, 0);
    links.proxy(0).set_latency(Direction::Downstream, Duration::from_secs(60));
    let adding = actix_rt::spawn(add(&count, 1));
    // The fault happened: the write applied, its reply is held.
    wait_until_async("the add applied", || async { stored(&observer, "/c").await == 1 }).await;
    links.reset();
    links.heal();
    let outcome = bounded("the add", adding).await.expect("task");
    assert!(matches!(&outcome, Err(CounterError::OutcomeUnknown { path, .. }) if path == "/c"), "{outcome:?}");
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(stored(&observer, "/c").await, 1, "not retried");
}
