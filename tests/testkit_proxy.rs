//! The testkit's fault proxies against real ZooKeeper: each fault is shown to bite, on a session
//! behind a [`FaultProxy`] and on an ensemble whose member links are proxied.
#![cfg(feature = "testkit")]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use actix_zookeeper::SessionId;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{
    ClientLinks, Direction, FaultProxy, TestkitError, ZkEnsemble, ZkServer, sessions_on, srvr, unique_root,
};
use common::*;

const WAIT: Duration = Duration::from_secs(20);

/// A single-threaded echo server for the proxy's own mechanics.
fn echo_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                while let Ok(n @ 1..) = stream.read(&mut buf) {
                    if stream.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    address
}

fn wait_until_blocking(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads what is there within `within`; empty if nothing came.
fn read_some(stream: &mut TcpStream, within: Duration) -> std::io::Result<Vec<u8>> {
    stream.set_read_timeout(Some(within))?;
    let mut buf = [0u8; 1024];
    match stream.read(&mut buf) {
        Ok(n) => Ok(buf[..n].to_vec()),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// The mechanics on plain TCP: a blackhole holds bytes (and delivers them in order at heal) and
/// holds new connections without forwarding them (reset at heal); reset closes everything;
/// dropping the proxy closes its port.
#[test]
fn blackhole_holds_bytes_and_connections_reset_closes_drop_stops() {
    let proxy = FaultProxy::start(&echo_server()).expect("proxy");
    let mut old = TcpStream::connect(proxy.address()).expect("connect");
    old.write_all(b"a").expect("write");
    assert_eq!(read_some(&mut old, WAIT).expect("read"), b"a");
    assert_eq!(proxy.connections(), 1);

    proxy.blackhole();
    assert!(proxy.is_blackholed());
    old.write_all(b"bc").expect("a write into a partition still succeeds locally");
    assert_eq!(read_some(&mut old, Duration::from_millis(300)).expect("read"), b"", "nothing crosses a blackhole");
    let mut held = TcpStream::connect(proxy.address()).expect("a partition still accepts connections");
    held.write_all(b"lost").expect("write");
    wait_until_blocking("the held connection is counted", || proxy.connections() == 2);
    assert_eq!(read_some(&mut held, Duration::from_millis(200)).expect("read"), b"");

    proxy.heal();
    let mut echoed = Vec::new();
    while echoed.len() < 2 {
        let more = read_some(&mut old, WAIT).expect("read after heal");
        assert!(!more.is_empty(), "the held bytes come through after heal");
        echoed.extend(more);
    }
    assert_eq!(echoed, b"bc");
    match read_some(&mut held, WAIT) {
        Ok(bytes) => assert!(bytes.is_empty(), "{bytes:?}"),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
    }
    wait_until_blocking("the held connection is closed", || proxy.connections() == 1);

    proxy.reset();
    let err = read_some(&mut old, WAIT).expect_err("a reset connection fails");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
    wait_until_blocking("the reset connection is gone", || proxy.connections() == 0);
    let mut fresh = TcpStream::connect(proxy.address()).expect("new connections still work");
    fresh.write_all(b"d").expect("write");
    assert_eq!(read_some(&mut fresh, WAIT).expect("read"), b"d");

    let address = proxy.address();
    drop(proxy);
    // The drop waits for the proxy thread to close its listener, but only so long: under load the
    // thread may close it a moment after the drop returns.
    wait_until_blocking("a dropped proxy no longer listens", || TcpStream::connect(&address).is_err());
    match read_some(&mut fresh, WAIT) {
        Ok(bytes) => assert!(bytes.is_empty(), "{bytes:?}"),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
    }
}

async fn session_id(s: &SessionHandle) -> SessionId {
    s.session().await.expect("session").session_id
}

#[actix_rt::test]
async fn a_short_blackhole_suspends_and_the_session_survives() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let proxy = FaultProxy::start(&server.address()).expect("proxy");
    let cfg = config(&proxy.address(), "blackhole-short").with_session_timeout(Duration::from_secs(6));
    let (s, events) = connected(cfg).await;
    let id = session_id(&s).await;
    s.create("/eph", "", CreateMode::Ephemeral).await.expect("ephemeral");

    proxy.blackhole();
    let (i, _) = events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Suspended { .. })).await;
    // A partition, not a close: the server still has the connection and the session.
    assert!(sessions_on(&server.address()).expect("cons").contains(&id.0));
    proxy.heal();
    let (_, back) = events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Reconnected { .. })).await;
    assert_eq!(back, SessionEvent::Reconnected { session_id: id, generation: 1, read_only: false });
    assert!(!events.snapshot().iter().any(|e| matches!(e, SessionEvent::Expired { .. })));
    assert_eq!(s.exists("/eph").await.expect("exists").expect("ephemeral survived").ephemeral_owner, id.0);
    s.close().await;
}

#[actix_rt::test]
async fn a_blackhole_past_the_session_timeout_lets_the_server_expire_the_session() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let proxy = FaultProxy::start(&server.address()).expect("proxy");
    let root = unique_root("blackhole-long");
    let cfg = SessionConfig::new(proxy.address()).with_chroot(&root).with_session_timeout(Duration::from_secs(2));
    let (s, events) = connected(cfg).await;
    let old = session_id(&s).await;
    s.create("/eph", "", CreateMode::Ephemeral).await.expect("ephemeral");
    let (observer, _) = connected(SessionConfig::new(server.address()).with_chroot(&root)).await;
    assert!(observer.exists("/eph").await.expect("exists").is_some());

    proxy.blackhole();
    let cut = Instant::now();
    // The server, not the client, ends the session: an observer beside the partition sees the
    // ephemeral go while the client is still cut off.
    bounded("the server deleting the ephemeral", async {
        while observer.exists("/eph").await.expect("exists").is_some() {
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let expired_after = cut.elapsed();
    assert!(proxy.is_blackholed());
    proxy.heal();

    let (i, expired) = events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Expired { .. })).await;
    assert_eq!(expired, SessionEvent::Expired { session_id: old, generation: 1 });
    let (_, new) = events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Connected { .. })).await;
    let SessionEvent::Connected { session_id: new_id, generation } = new else { unreachable!() };
    assert_eq!(generation, 2);
    assert_ne!(new_id, old);
    assert!(s.exists("/eph").await.expect("exists").is_none(), "the old session's ephemeral is gone");
    tracing::info!(?expired_after, "server expired the session");
    observer.close().await;
    s.close().await;
}

#[actix_rt::test]
async fn a_reset_suspends_and_the_session_reconnects() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let proxy = FaultProxy::start(&server.address()).expect("proxy");
    let (s, events) = connected(config(&proxy.address(), "reset")).await;
    let id = session_id(&s).await;

    proxy.reset();
    let (i, _) = events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Suspended { .. })).await;
    let (_, back) = events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Reconnected { .. })).await;
    assert_eq!(back, SessionEvent::Reconnected { session_id: id, generation: 1, read_only: false });
    s.create("/after", "", CreateMode::Ephemeral).await.expect("works after the reset");
    s.close().await;
}

#[actix_rt::test]
async fn upstream_latency_delays_a_request_and_heal_removes_it() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let proxy = FaultProxy::start(&server.address()).expect("proxy");
    let (s, events) = connected(config(&proxy.address(), "latency")).await;
    s.exists("/").await.expect("warm-up");

    let latency = Duration::from_millis(200);
    proxy.set_latency(Direction::Upstream, latency);
    let started = Instant::now();
    s.exists("/").await.expect("a request through a slow link");
    let took = started.elapsed();
    assert!(took >= latency, "a request took {took:?} with {latency:?} upstream latency");

    proxy.heal();
    s.exists("/").await.expect("a request after heal");
    assert!(!events.snapshot().iter().any(|e| matches!(e, SessionEvent::Suspended { .. })));
    s.close().await;
}

#[actix_rt::test]
async fn a_bandwidth_limit_slows_a_large_read() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let proxy = FaultProxy::start(&server.address()).expect("proxy");
    let cfg = config(&proxy.address(), "bandwidth").with_session_timeout(Duration::from_secs(10));
    let (s, _events) = connected(cfg).await;
    let payload = vec![7u8; 100_000];
    s.create("/big", payload.clone(), CreateMode::Persistent).await.expect("create");

    let rate = 50_000;
    proxy.set_bandwidth(Direction::Downstream, Some(rate));
    let started = Instant::now();
    let read = s.get_data("/big").await.expect("read through a thin link");
    let took = started.elapsed();
    assert_eq!(read.data, payload);
    // 100 kB at 50 kB/s: two seconds, less the first ~50 ms piece that goes at once.
    assert!(took >= Duration::from_millis(1500), "100 kB at {rate} B/s took {took:?}");
    proxy.heal();
    s.close().await;
}

/// Socket inodes of a process (`pid` or `self`).
fn socket_inodes(pid: &str) -> BTreeSet<u64> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return BTreeSet::new() };
    dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok())
        .collect()
}

/// Established IPv4 TCP connections: (local port, remote port) -> socket inode.
fn established() -> BTreeMap<(u16, u16), u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.get(3) != Some(&"01") {
                return None;
            }
            let port = |s: &str| u16::from_str_radix(s.rsplit(':').next()?, 16).ok();
            Some(((port(f.get(1)?)?, port(f.get(2)?)?), f.get(9)?.parse().ok()?))
        })
        .collect()
}

/// Connections of a member JVM whose other end is not in this process (i.e. not a proxy, and not
/// this test's clients): two members talking past the proxies.
fn direct_member_connections(ens: &ZkEnsemble) -> Vec<String> {
    let table = established();
    let mine = socket_inodes("self");
    let mut direct = Vec::new();
    for i in 0..ens.len() {
        let Some(pid) = ens.member_pid(i) else { continue };
        let theirs = socket_inodes(&pid.to_string());
        for (&(local, remote), inode) in &table {
            if theirs.contains(inode) && table.get(&(remote, local)).is_some_and(|peer| !mine.contains(peer)) {
                direct.push(format!("member {i}: port {local} <-> port {remote}"));
            }
        }
    }
    direct
}

fn mode(ens: &ZkEnsemble, i: usize) -> String {
    match srvr(&ens.member_address(i)) {
        Ok(answer) => answer.lines().find_map(|l| l.strip_prefix("Mode: ")).unwrap_or("not serving").to_owned(),
        Err(e) => format!("unreachable: {e}"),
    }
}

/// The ensemble's single leader, polled without blocking the actix thread (a session runs there).
async fn leader_of(ens: &ZkEnsemble, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        match ens.wait_for_leader(Duration::ZERO) {
            Ok(leader) => return leader,
            Err(TestkitError::NoLeader { modes, .. }) if Instant::now() >= deadline => {
                panic!("no single leader within {within:?}: {modes}")
            }
            Err(TestkitError::NoLeader { .. }) => actix_rt::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("{e}"),
        }
    }
}

async fn wait_for_mode(ens: &ZkEnsemble, i: usize, what: &str, pred: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        let now = mode(ens, i);
        if pred(&now) {
            return;
        }
        assert!(Instant::now() < deadline, "member {i}: {what} not within {WAIT:?}; mode {now}");
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates `path`, retrying while the session moves between members.
async fn create_retrying(s: &SessionHandle, path: &str, mode: CreateMode) {
    let deadline = Instant::now() + WAIT;
    loop {
        match s.create(path, "", mode).await {
            Ok(_) => return,
            Err(Error::NodeExists { .. }) => return,
            Err(e) if e.is_transient() && Instant::now() < deadline => {
                actix_rt::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("create {path}: {e}"),
        }
    }
}

#[actix_rt::test]
async fn isolating_the_leader_elects_another_and_heal_brings_it_back_as_follower() {
    init_tracing();
    let ens = ZkEnsemble::start(3).expect("3-node ensemble");
    let old = ens.wait_for_leader(WAIT).expect("a leader");
    assert_eq!(direct_member_connections(&ens), Vec::<String>::new(), "members talk only through the proxies");
    let links = ClientLinks::to(ens.connect_string().split(',')).expect("client links");
    let cfg = config(&links.connect_string(), "isolate-leader").with_session_timeout(Duration::from_secs(10));
    let (s, events) = connected(cfg).await;
    let id = session_id(&s).await;
    s.create("/eph", "", CreateMode::Ephemeral).await.expect("ephemeral");

    ens.isolate(old);
    wait_for_mode(&ens, old, "the isolated leader steps down", |m| m != "leader").await;
    let new = leader_of(&ens, WAIT).await;
    assert_ne!(new, old, "another member leads");
    // The client keeps its session, wherever it is served now.
    create_retrying(&s, "/during", CreateMode::Persistent).await;
    assert_eq!(session_id(&s).await, id);
    assert_eq!(s.exists("/eph").await.expect("exists").expect("ephemeral survived").ephemeral_owner, id.0);

    ens.heal();
    wait_for_mode(&ens, old, "the old leader rejoins as a follower", |m| m == "follower").await;
    assert_eq!(leader_of(&ens, WAIT).await, new);
    assert!(!events.snapshot().iter().any(|e| matches!(e, SessionEvent::Expired { .. })));
    assert_eq!(direct_member_connections(&ens), Vec::<String>::new());
    s.close().await;
}

#[actix_rt::test]
async fn a_partitioned_minority_member_stops_serving_and_rejoins() {
    init_tracing();
    let mut ens = ZkEnsemble::start(3).expect("3-node ensemble");
    let leader = ens.wait_for_leader(WAIT).expect("a leader");
    let minority = (leader + 1) % 3;
    let majority: Vec<usize> = (0..3).filter(|&i| i != minority).collect();
    // A client that only knows the minority member.
    let links = ClientLinks::to([ens.member_address(minority)]).expect("client link");
    let cfg = config(&links.connect_string(), "minority").with_session_timeout(Duration::from_secs(20));
    let (s, events) = connected(cfg).await;
    let id = session_id(&s).await;

    ens.partition(&[minority], &majority);
    let (i, _) = events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Suspended { .. })).await;
    wait_for_mode(&ens, minority, "the minority member stops serving", |m| m == "not serving").await;
    assert_eq!(leader_of(&ens, WAIT).await, leader, "the majority keeps its leader");

    ens.heal();
    wait_for_mode(&ens, minority, "the minority member serves again", |m| m == "follower").await;
    let (_, back) = events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Reconnected { .. })).await;
    assert_eq!(back, SessionEvent::Reconnected { session_id: id, generation: 1, read_only: false });
    s.close().await;

    // Proxied links survive a member's restart (same configuration, same proxies).
    ens.kill_member(minority).expect("kill");
    ens.restart_member(minority).expect("restart");
    assert_eq!(ens.wait_for_leader(WAIT).expect("a leader"), leader);
    assert_eq!(direct_member_connections(&ens), Vec::<String>::new());
}
