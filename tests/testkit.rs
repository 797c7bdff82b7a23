//! Integration tests of the testkit against real ZooKeeper servers.
#![cfg(feature = "testkit")]

use std::time::{Duration, Instant};

use actix_zookeeper::testkit::{
    TestZooKeeper, TestkitError, ZkEnsemble, ZkServer, expire_session, mntr, ruok, sessions_on, srvr, unique_root,
};
use zookeeper_client::{Acls, Client, CreateMode, SessionState, StateWatcher};

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

async fn connect(connect_string: &str) -> Client {
    Client::connector().with_session_timeout(Duration::from_secs(10)).connect(connect_string).await.expect("connect")
}

async fn wait_for_state(watcher: &mut StateWatcher, wanted: SessionState, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let state = tokio::time::timeout_at(deadline.into(), watcher.changed())
            .await
            .unwrap_or_else(|_| panic!("state {wanted:?} not reached within {within:?}"));
        if state == wanted {
            return;
        }
        assert!(!state.is_terminated(), "reached terminal state {state:?} while waiting for {wanted:?}");
    }
}

#[tokio::test]
async fn standalone_server_expires_sessions_server_side() {
    init_tracing();
    let server = ZkServer::start().expect("start server");
    let addr = server.address();
    assert_eq!(addr, format!("127.0.0.1:{}", server.port()));
    assert_eq!(server.connect_string(), addr);
    assert!(server.is_running());
    assert!(ruok(&addr));
    let status = srvr(&addr).expect("srvr");
    assert!(status.contains("Mode: standalone"), "{status}");
    assert!(mntr(&addr).expect("mntr").contains("zk_version"));

    let client = connect(&server.connect_string()).await;
    let root = unique_root("expire");
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    client.create(&root, b"", &persistent).await.expect("create root");
    let node = format!("{root}/eph");
    client.create(&node, b"x", &ephemeral).await.expect("create ephemeral");
    let session_id = client.session_id().0;
    assert!(sessions_on(&addr).expect("cons").contains(&session_id));

    let mut watcher = client.state_watcher();
    expire_session(&server.connect_string(), &client.session().clone()).await.expect("expire");
    wait_for_state(&mut watcher, SessionState::Expired, Duration::from_secs(20)).await;

    let fresh = connect(&server.connect_string()).await;
    assert_eq!(fresh.check_stat(&node).await.expect("check_stat"), None);
    assert!(fresh.check_stat(&root).await.expect("check_stat").is_some());
    assert!(!sessions_on(&addr).expect("cons").contains(&session_id));
}

#[tokio::test]
async fn stop_and_restart_keep_data() {
    init_tracing();
    let mut server = ZkServer::start().expect("start server");
    let port = server.port();
    let root = unique_root("restart/stop");
    assert!(!root[1..].contains('/'), "{root}");
    {
        let client = connect(&server.connect_string()).await;
        let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
        client.create(&root, b"kept", &persistent).await.expect("create");
    }

    server.stop().expect("stop");
    assert!(!server.is_running());
    assert!(!ruok(&server.address()));
    assert!(matches!(server.stop(), Err(TestkitError::NotRunning { .. })));
    server.restart().expect("restart after stop");
    assert_eq!(server.port(), port);
    let client = connect(&server.connect_string()).await;
    assert_eq!(client.get_data(&root).await.expect("get").0, b"kept");
    drop(client);

    server.kill().expect("kill");
    assert!(!server.is_running());
    assert!(matches!(server.kill(), Err(TestkitError::NotRunning { .. })));
    server.restart().expect("restart after kill");
    assert!(server.is_running());
    let client = connect(&server.connect_string()).await;
    assert_eq!(client.get_data(&root).await.expect("get").0, b"kept");

    // Restarting a running server is a stop plus a start.
    server.restart().expect("restart while running");
    assert!(server.is_running());
    assert!(srvr(&server.address()).expect("srvr").contains("Mode: standalone"));
}

#[tokio::test]
async fn ensemble_member_failure_keeps_the_session() {
    init_tracing();
    let started = Instant::now();
    let mut ensemble = ZkEnsemble::start(3).expect("start ensemble");
    eprintln!("ensemble of 3 ready after {:?}", started.elapsed());
    assert_eq!(ensemble.len(), 3);
    assert!(!ensemble.is_empty());
    let members: Vec<String> = (0..3).map(|i| ensemble.member_address(i)).collect();
    assert_eq!(ensemble.connect_string(), members.join(","));
    for addr in &members {
        let status = srvr(addr).expect("srvr");
        assert!(status.contains("Mode: leader") || status.contains("Mode: follower"), "{status}");
    }
    assert!(ensemble.leader().is_some());
    assert!(matches!(ensemble.kill_member(3), Err(TestkitError::NoSuchMember { index: 3, len: 3 })));

    let client = connect(&ensemble.connect_string()).await;
    let session_id = client.session_id();
    let root = unique_root("ensemble");
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client.create(&root, b"", &persistent).await.expect("create");

    let serving = ensemble.member_serving(session_id.0).expect("some member serves the session");
    let mut watcher = client.state_watcher();
    ensemble.kill_member(serving).expect("kill member");
    assert!(!ensemble.is_member_running(serving));
    let failover = Instant::now();
    wait_for_state(&mut watcher, SessionState::Disconnected, Duration::from_secs(20)).await;
    wait_for_state(&mut watcher, SessionState::SyncConnected, Duration::from_secs(30)).await;
    eprintln!("client reconnected after {:?}", failover.elapsed());
    assert_eq!(client.session_id(), session_id);
    assert!(client.check_stat(&root).await.expect("check_stat").is_some());
    let now_serving = ensemble.member_serving(session_id.0);
    assert!(now_serving.is_some() && now_serving != Some(serving));

    let restart = Instant::now();
    ensemble.restart_member(serving).expect("restart member");
    eprintln!("member restarted after {:?}", restart.elapsed());
    assert!(ensemble.is_member_running(serving));
    let status = srvr(&ensemble.member_address(serving)).expect("srvr");
    assert!(status.contains("Mode: "), "{status}");
    let direct = connect(&ensemble.member_address(serving)).await;
    direct.sync(&root).await.expect("sync");
    assert!(direct.check_stat(&root).await.expect("check_stat").is_some());

    ensemble.stop_member(serving).expect("stop member");
    assert!(!ensemble.is_member_running(serving));
    ensemble.restart_member(serving).expect("restart member after stop");

    // Expiry works through an ensemble too.
    expire_session(&ensemble.connect_string(), &client.session().clone()).await.expect("expire");
    wait_for_state(&mut watcher, SessionState::Expired, Duration::from_secs(20)).await;
}

#[test]
fn unique_roots_are_unique_and_valid() {
    let a = unique_root("a b/c");
    let b = unique_root("a b/c");
    assert_ne!(a, b);
    assert!(a.starts_with("/t-a-b-c-"), "{a}");
    assert!(a[1..].chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'), "{a}");
}

#[test]
fn test_zookeeper_from_env() {
    init_tracing();
    let mut zk = TestZooKeeper::from_env().expect("test zookeeper");
    match std::env::var("ZK_CONNECT") {
        Ok(connect) if !connect.trim().is_empty() => {
            assert_eq!(zk.connect_string(), connect.trim());
            assert!(zk.embedded_mut().is_none());
        }
        _ => {
            let addr = zk.connect_string();
            assert!(ruok(&addr));
            assert!(zk.embedded_mut().is_some());
        }
    }
}

#[test]
fn empty_ensemble_is_rejected() {
    assert!(matches!(ZkEnsemble::start(0), Err(TestkitError::EmptyEnsemble)));
}

#[test]
fn drop_kills_the_server_and_removes_its_dir() {
    let server = ZkServer::start().expect("start server");
    let addr = server.address();
    let dir = server.dir().to_path_buf();
    assert!(dir.join("zookeeper.log").is_file());
    drop(server);
    assert!(!ruok(&addr));
    assert!(!dir.exists());
}

#[test]
fn server_outlives_the_thread_that_started_it() {
    // PR_SET_PDEATHSIG is per forking thread; the testkit forks from a process-lifetime thread.
    let server = std::thread::spawn(|| ZkServer::start().expect("start server")).join().expect("starter thread");
    std::thread::sleep(Duration::from_millis(500));
    assert!(server.is_running());
    assert!(ruok(&server.address()));
}
