//! Helpers shared by the integration tests: a recorder actor for events, session set-up, the fault
//! scenarios (`scenario`) and their history checkers (`history`, pure functions), and a tree that
//! random writers change (`tree`).
//! Every test talks to a real ZooKeeper started by the testkit (or `ZK_CONNECT`).
#![allow(dead_code)]

pub mod curator;
pub mod history;
pub mod scenario;
pub mod tree;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::unique_root;

/// Collects every message it receives, so a test can wait for one that matches.
pub struct Recorder<E> {
    events: Arc<Mutex<Vec<E>>>,
}

impl<E: Unpin + 'static> Actor for Recorder<E> {
    type Context = Context<Self>;
}

impl<E> Handler<E> for Recorder<E>
where
    E: Message<Result = ()> + Unpin + 'static,
{
    type Result = ();

    fn handle(&mut self, msg: E, _: &mut Context<Self>) {
        self.events.lock().expect("recorder lock").push(msg);
    }
}

/// The test's side of a [`Recorder`].
pub struct Recorded<E: Message<Result = ()> + Unpin + Send + 'static> {
    pub recipient: Recipient<E>,
    pub addr: Addr<Recorder<E>>,
    events: Arc<Mutex<Vec<E>>>,
}

impl<E: Message<Result = ()> + Unpin + Send + Clone + std::fmt::Debug + 'static> Recorded<E> {
    pub fn start() -> Self {
        let events = Arc::new(Mutex::new(Vec::new()));
        let addr = Recorder { events: events.clone() }.start();
        Recorded { recipient: addr.clone().recipient(), addr, events }
    }

    pub fn snapshot(&self) -> Vec<E> {
        self.events.lock().expect("recorder lock").clone()
    }

    /// Waits for the first event (at index `from` or later) matching `pred`; returns its index
    /// and the event. Panics with everything received so far when it does not come in time.
    pub async fn wait_for(&self, from: usize, within: Duration, pred: impl Fn(&E) -> bool) -> (usize, E) {
        let deadline = Instant::now() + within;
        loop {
            // Evaluated on a copy: a predicate may itself look at this recorder.
            let events = self.snapshot();
            if let Some((i, e)) = events.iter().enumerate().skip(from).find(|(_, e)| pred(e)) {
                return (i, e.clone());
            }
            if Instant::now() > deadline {
                panic!("no matching event within {within:?}; received: {:#?}", self.snapshot());
            }
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

/// A config for `connect` under a fresh chroot of its own.
pub fn config(connect: &str, test: &str) -> SessionConfig {
    SessionConfig::new(connect).with_chroot(unique_root(test)).with_session_timeout(Duration::from_secs(4))
}

/// Starts a session and waits until it is connected; returns it with its event recorder.
pub async fn connected(config: SessionConfig) -> (SessionHandle, Recorded<SessionEvent>) {
    let session = SessionHandle::start(config).expect("valid config");
    let events = Recorded::<SessionEvent>::start();
    session.subscribe(events.recipient.clone());
    events.wait_for(0, Duration::from_secs(20), |e| matches!(e, SessionEvent::Connected { .. })).await;
    (session, events)
}

/// A connected session to `connect` under `root`, with the tests' 4 s session timeout.
pub async fn session_at(connect: &str, root: &str) -> SessionHandle {
    session_with_timeout(connect, root, Duration::from_secs(4)).await
}

/// A connected session to `connect` under `root`, with session timeout `timeout`.
pub async fn session_with_timeout(connect: &str, root: &str, timeout: Duration) -> SessionHandle {
    connected(SessionConfig::new(connect).with_chroot(root).with_session_timeout(timeout)).await.0
}

/// A session whose connection runs through a [`FaultProxy`](actix_zookeeper::testkit::FaultProxy)
/// (for latency and cuts), and an observer session straight to the server, both under `root`.
pub struct Proxied {
    /// The proxy in front of `zk` that `session` connects through.
    pub proxy: actix_zookeeper::testkit::FaultProxy,
    /// The session through the proxy.
    pub session: SessionHandle,
    /// A session to the server itself, to look at what the other one did.
    pub observer: SessionHandle,
}

/// Starts a proxy in front of `zk`, a session through it and an observer straight to `zk`, both
/// under `root`, with session timeout `timeout`.
pub async fn proxied(zk: &str, root: &str, timeout: Duration) -> Proxied {
    let proxy = actix_zookeeper::testkit::FaultProxy::start(zk).expect("proxy");
    let session = session_with_timeout(&proxy.address(), root, timeout).await;
    let observer = session_at(zk, root).await;
    Proxied { proxy, session, observer }
}

/// Fails the test instead of hanging.
pub async fn bounded<F: std::future::Future>(what: &str, fut: F) -> F::Output {
    match actix_rt::time::timeout(Duration::from_secs(20), fut).await {
        Ok(out) => out,
        Err(_) => panic!("{what} did not finish within 20 s"),
    }
}

/// How long the shared helpers below wait before failing the test.
const HELPER_WAIT: Duration = Duration::from_secs(60);

/// Waits until `done` holds; fails the test (naming `what`) after a minute.
pub async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + HELPER_WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen within {HELPER_WAIT:?}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The children of `dir` (none if it does not exist). A fault test may be reading while its own
/// connection moves to another server: connection problems are retried for a minute.
pub async fn children(s: &SessionHandle, dir: &str) -> Vec<String> {
    let deadline = Instant::now() + HELPER_WAIT;
    loop {
        match s.children(dir).await {
            Ok(c) => return c.names,
            Err(Error::NoNode { .. }) => return Vec::new(),
            Err(e) if e.is_transient() && Instant::now() < deadline => {
                actix_rt::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("{dir}: {e}"),
        }
    }
}

/// The server's count of packets received (`mntr`), to show that a client stopped asking. Use a
/// server of the test's own (`ZkServer::start()`), so that the count is the test's alone.
pub fn packets_received(server: &str) -> u64 {
    let report = actix_zookeeper::testkit::mntr(server).expect("mntr");
    report
        .lines()
        .find_map(|line| line.strip_prefix("zk_packets_received"))
        .and_then(|value| value.trim().parse().ok())
        .expect("zk_packets_received in mntr")
}

/// The test's own server, for a test that reads the server's counters; `None` (skip) when the
/// tests share one (`ZK_CONNECT`): its counters count other tests' requests too.
pub fn server_of_our_own() -> Option<actix_zookeeper::testkit::TestZooKeeper> {
    let zk = actix_zookeeper::testkit::TestZooKeeper::from_env().expect("ZooKeeper");
    matches!(zk, actix_zookeeper::testkit::TestZooKeeper::Embedded(_)).then_some(zk)
}

/// Listings the server has answered (`getChildren`, from the `mntr` of its first member). Count
/// only on a server of the test's own: a shared one counts other tests' listings too.
pub fn listings(zk: &actix_zookeeper::testkit::TestZooKeeper) -> u64 {
    let connect = zk.connect_string();
    let host = connect.split(',').next().expect("a host");
    let mntr = actix_zookeeper::testkit::mntr(host).expect("mntr");
    ["zk_response_packet_get_children_cache_hits", "zk_response_packet_get_children_cache_misses"]
        .iter()
        .map(|key| mntr.lines().find_map(|line| line.strip_prefix(key)?.trim().parse::<u64>().ok()).expect("a counter"))
        .sum()
}

/// A directory at `path` that anyone may create and delete in, but nobody may read: listing it
/// is `NoAuth`, a final error.
pub async fn unreadable_dir(session: &SessionHandle, path: &str) {
    use actix_zookeeper::Permission;
    dir_allowing(session, path, Permission::CREATE | Permission::DELETE).await
}

/// A directory at `path` that anyone may read but nobody may create in: creating a child is
/// `NoAuth`, a final error.
pub async fn read_only_dir(session: &SessionHandle, path: &str) {
    dir_allowing(session, path, actix_zookeeper::Permission::READ).await
}

/// A directory at `path` in which anyone may read and create, but nobody may delete: deleting
/// a child is `NoAuth`, a final error.
pub async fn undeletable_dir(session: &SessionHandle, path: &str) {
    use actix_zookeeper::Permission;
    dir_allowing(session, path, Permission::READ | Permission::CREATE).await
}

async fn dir_allowing(session: &SessionHandle, path: &str, allowed: actix_zookeeper::Permission) {
    let create_and_delete_only = vec![actix_zookeeper::Acl::new_const(allowed, "world", "anyone")];
    session
        .request(
            actix_zookeeper::session::requests::Create::new(path, "", actix_zookeeper::CreateMode::Persistent)
                .with_acl(create_and_delete_only),
        )
        .await
        .expect("a directory nobody may read");
}

/// Counts the holders of something exclusive, as a test's workers see it: entering while
/// another holds is a violation. A worker holds from the grant until just before it releases,
/// and long enough (`hold`) that a wrong second grant, which arrives after a notification and
/// several actor hops, lands while the first is still counted.
#[derive(Clone, Default)]
pub struct Exclusive {
    holders: Arc<std::sync::atomic::AtomicUsize>,
    violations: Arc<std::sync::atomic::AtomicUsize>,
}

impl Exclusive {
    /// A grant arrived.
    pub fn enter(&self) {
        use std::sync::atomic::Ordering;
        if self.holders.fetch_add(1, Ordering::SeqCst) != 0 {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Holds for `hold`, then counts the holder out (call it right before releasing).
    pub async fn hold_and_leave(&self, hold: Duration) {
        actix_rt::time::sleep(hold).await;
        self.holders.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Grants that came while another was held.
    pub fn violations(&self) -> usize {
        self.violations.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Kills (SIGKILL) the ensemble member serving `session`'s connection, then waits until another
/// member serves it: a fail-over test first proves that its fault happened and that the
/// connection moved (a test that fell back to killing member 0 proved nothing when
/// the client was elsewhere). Returns the killed member.
pub async fn kill_the_serving_member(
    ensemble: &mut actix_zookeeper::testkit::ZkEnsemble,
    session: &SessionHandle,
) -> usize {
    let id = session.session().await.expect("session").session_id.0;
    let killed = ensemble.member_serving(id).expect("a member serves the session");
    ensemble.kill_member(killed).expect("kill -9 the member");
    let deadline = Instant::now() + HELPER_WAIT;
    loop {
        match ensemble.member_serving(id) {
            Some(now) if now != killed => return killed,
            _ => {
                assert!(Instant::now() < deadline, "the session never moved off member {killed}");
                actix_rt::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Waits (bounded) until the async `check` holds.
pub async fn wait_until_async<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = Instant::now() + HELPER_WAIT;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How late the lagging follower of a [`LaggingFollower`] hears its leader. Below the
/// testkit's `syncLimit × tickTime` (1 s), so the leader keeps it as a follower.
pub const LAG: Duration = Duration::from_millis(600);

/// A 3-member ensemble in which a client cut off from the leader reconnects to a follower that
/// hears the leader [`LAG`] late (review 3, D). The third member is cut off, so a write commits
/// only once that follower acked it, `LAG` after the leader proposed it. A session that loses a
/// write's reply by [`cut_leader`](Self::cut_leader) soon after sending it is answered by the
/// follower before that write's commit reaches it: the follower's answer to the session's
/// revalidation comes behind the proposal, not behind its commit.
pub struct LaggingFollower {
    pub ensemble: actix_zookeeper::testkit::ZkEnsemble,
    pub leader: usize,
    pub follower: usize,
    to_leader: Option<actix_zookeeper::testkit::FaultProxy>,
    to_follower: actix_zookeeper::testkit::FaultProxy,
}

impl LaggingFollower {
    pub fn start() -> LaggingFollower {
        use actix_zookeeper::testkit::{FaultProxy, ZkEnsemble};
        let ensemble = ZkEnsemble::start(3).expect("3-node ensemble");
        let leader = ensemble.wait_for_leader(HELPER_WAIT).expect("a leader");
        let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
        let (follower, cut) = (others[0], others[1]);
        ensemble.isolate(cut);
        let to_leader = FaultProxy::start(&ensemble.member_address(leader)).expect("proxy");
        let to_follower = FaultProxy::start(&ensemble.member_address(follower)).expect("proxy");
        LaggingFollower { ensemble, leader, follower, to_leader: Some(to_leader), to_follower }
    }

    /// A session under `root` that reaches the leader and the lagging follower, through proxies.
    pub fn config(&self, root: &str) -> SessionConfig {
        let to_leader = self.to_leader.as_ref().expect("the leader's link").address();
        SessionConfig::new(format!("{to_leader},{}", self.to_follower.address()))
            .with_chroot(root)
            .with_session_timeout(Duration::from_secs(10))
            .with_connection_timeout(Duration::from_secs(2))
    }

    /// A session (see [`config`](Self::config)) connected to the leader: the follower's link
    /// holds new connections until it is.
    pub async fn connect_on_leader(&self, root: &str) -> SessionHandle {
        self.to_follower.blackhole();
        let (session, _) = connected(self.config(root)).await;
        let id = session.session().await.expect("session").session_id.0;
        assert_eq!(self.ensemble.member_serving(id), Some(self.leader), "the session starts on the leader");
        self.to_follower.heal();
        session
    }

    /// From now on the follower hears the leader `LAG` late. Returns once it has caught up with
    /// everything written before, so that it accepts a client that has seen all that.
    pub async fn lag(&self) {
        use actix_zookeeper::testkit::Direction;
        let (quorum, _) = self.ensemble.member_link(self.follower, self.leader).expect("follower → leader link");
        quorum.set_latency(Direction::Downstream, LAG);
        actix_rt::time::sleep(LAG * 3).await;
    }

    /// Cuts the client off the leader for good: its connection is reset (a reply on its way is
    /// lost) and new ones are refused, so it reconnects to the follower at once.
    pub fn cut_leader(&mut self) {
        drop(self.to_leader.take());
    }

    /// The member serving `session` now.
    pub async fn serving(&self, session: &SessionHandle) -> Option<usize> {
        self.ensemble.member_serving(session.session().await.expect("session").session_id.0)
    }
}
