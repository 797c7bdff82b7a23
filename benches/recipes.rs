//! Lock benchmark against a real ZooKeeper server (see `docs/performance.md`).
//!
//! ```text
//! cargo bench --features testkit --bench recipes -- [W1|W2|all]
//! ```
//!
//! - **W1**: one session, one [`LockActor`], 500 warm-up then 2000 × (acquire; release), once with
//!   the release awaited and once pipelined (`do_send(Release)` followed at once by the next
//!   `Acquire`, both queued in order on the one session).
//! - **W2**: 8 sessions, 8 lock actors on one lock, 2000 acquisitions in total.
//!
//! Each workload also measures raw `zookeeper_client` round trips (ephemeral create, delete,
//! `exists`) in the same run, as the yardstick. One JSON line per result goes to stdout;
//! progress goes to stderr. With `ZK=host:port` set, that server is used instead of starting one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use actix::{Actor, Addr};
use actix_zookeeper::lock::{Acquire, LockActor, LockConfig, Release};
use actix_zookeeper::testkit::{self, ServerOptions, ZkServer};
use actix_zookeeper::{SessionConfig, SessionHandle};

const LIB: &str = "actix-zookeeper";
const W1_WARMUP: usize = 500;
const W1_ITERATIONS: usize = 2000;
const W2_CLIENTS: usize = 8;
const W2_ACQUISITIONS: usize = 2000;
const RAW_WARMUP: usize = 200;
const RAW_OPS: usize = 1000;
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Workload {
    W1,
    W2,
    All,
}

impl Workload {
    fn runs(self, which: Workload) -> bool {
        self == Workload::All || self == which
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ReleaseMode {
    /// `lock.send(Release).await`, then the next acquire.
    Awaited,
    /// `lock.do_send(Release)`, then at once the next acquire.
    Pipelined,
}

impl ReleaseMode {
    fn name(self) -> &'static str {
        match self {
            ReleaseMode::Awaited => "awaited",
            ReleaseMode::Pipelined => "pipelined",
        }
    }
}

/// Raw `zookeeper_client` medians in microseconds.
#[derive(Clone, Copy, Debug)]
struct RawBaseline {
    create_p50: u128,
    delete_p50: u128,
    rtt_p50: u128,
}

fn main() {
    let workload = parse_workload();

    let external = std::env::var("ZK").ok().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let (server, connect) = match external {
        Some(connect) => {
            eprintln!("using the ZooKeeper server at {connect} (from $ZK)");
            (None, connect)
        }
        None => {
            let server = ZkServer::start_with(ServerOptions::benchmark())
                .expect("start ZooKeeper (apt-get install zookeeper, or set ZK=host:port)");
            eprintln!("started ZooKeeper at {} (dir {})", server.connect_string(), server.dir().display());
            let connect = server.connect_string();
            (Some(server), connect)
        }
    };

    actix::System::new().block_on(async move {
        if workload.runs(Workload::W1) {
            for line in w1(&connect).await {
                println!("{line}");
            }
        }
        if workload.runs(Workload::W2) {
            println!("{}", w2(&connect).await);
        }
    });

    drop(server);
}

/// `W1`, `W2` or `all` (default); cargo's own flags (`--bench`, ...) are ignored.
fn parse_workload() -> Workload {
    let mut workload = Workload::All;
    for arg in std::env::args().skip(1) {
        if arg.starts_with("--") {
            continue;
        }
        workload = match arg.to_ascii_lowercase().as_str() {
            "w1" => Workload::W1,
            "w2" => Workload::W2,
            "all" => Workload::All,
            other => {
                eprintln!("unknown workload {other:?}; expected W1, W2 or all");
                std::process::exit(2);
            }
        };
    }
    workload
}

// ---- statistics ---------------------------------------------------------------------------------

/// The `p`-th percentile (nearest rank) of `samples`, in microseconds.
fn percentile(samples: &mut [u128], p: f64) -> u128 {
    assert!(!samples.is_empty(), "no samples");
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

fn micros(since: Instant) -> u128 {
    since.elapsed().as_micros()
}

fn per_second(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

// ---- raw baseline -------------------------------------------------------------------------------

/// Sequential raw round trips with a bare `zookeeper_client::Client`: `RAW_OPS` ephemeral creates
/// of `<root>/raw-<i>`, `RAW_OPS` deletes of them, and `RAW_OPS` `exists` of `<root>`.
async fn raw_baseline(connect: &str, root: &str) -> RawBaseline {
    use zookeeper_client::{Acls, Client, CreateMode, Error};

    let client = Client::connect(connect).await.expect("raw client connects");
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    match client.create(root, b"", &persistent).await {
        Ok(_) | Err(Error::NodeExists) => {}
        Err(e) => panic!("raw create {root}: {e}"),
    }

    for _ in 0..RAW_WARMUP {
        client.check_stat(root).await.expect("raw exists");
    }

    let mut creates = Vec::with_capacity(RAW_OPS);
    for i in 0..RAW_OPS {
        let path = format!("{root}/raw-{i}");
        let t = Instant::now();
        client.create(&path, b"", &ephemeral).await.expect("raw create");
        creates.push(micros(t));
    }
    let mut deletes = Vec::with_capacity(RAW_OPS);
    for i in 0..RAW_OPS {
        let path = format!("{root}/raw-{i}");
        let t = Instant::now();
        client.delete(&path, None).await.expect("raw delete");
        deletes.push(micros(t));
    }
    let mut rtts = Vec::with_capacity(RAW_OPS);
    for _ in 0..RAW_OPS {
        let t = Instant::now();
        client.check_stat(root).await.expect("raw exists");
        rtts.push(micros(t));
    }

    let raw = RawBaseline {
        create_p50: percentile(&mut creates, 50.0),
        delete_p50: percentile(&mut deletes, 50.0),
        rtt_p50: percentile(&mut rtts, 50.0),
    };
    eprintln!(
        "raw zookeeper-client: create p50 {} us, delete p50 {} us, exists p50 {} us",
        raw.create_p50, raw.delete_p50, raw.rtt_p50
    );
    raw
}

// ---- helpers ------------------------------------------------------------------------------------

fn start_session(connect: &str, root: &str) -> SessionHandle {
    SessionHandle::start(SessionConfig::new(connect).with_chroot(root).with_session_timeout(SESSION_TIMEOUT))
        .expect("session starts")
}

async fn acquire(lock: &Addr<LockActor>) {
    lock.send(Acquire::default()).await.expect("lock actor alive").expect("lock acquired");
}

async fn release(lock: &Addr<LockActor>) {
    lock.send(Release).await.expect("lock actor alive").expect("lock released");
}

/// One W1 cycle; returns (acquire, release) in microseconds.
async fn cycle(lock: &Addr<LockActor>, mode: ReleaseMode) -> (u128, u128) {
    let t = Instant::now();
    acquire(lock).await;
    let acquired = micros(t);
    let t = Instant::now();
    match mode {
        ReleaseMode::Awaited => release(lock).await,
        ReleaseMode::Pipelined => lock.do_send(Release),
    }
    (acquired, micros(t))
}

// ---- W1 -----------------------------------------------------------------------------------------

async fn w1(connect: &str) -> Vec<String> {
    let root = testkit::unique_root("bench-w1");
    eprintln!("W1: root {root}");
    let raw = raw_baseline(connect, &root).await;

    let session = start_session(connect, &root);
    session.ensure_path("/bench").await.expect("ensure /bench");
    let lock = LockActor::new(session.clone(), LockConfig::new("/bench/lock")).start();

    let mut lines = Vec::new();
    for mode in [ReleaseMode::Awaited, ReleaseMode::Pipelined] {
        eprintln!("W1 ({}): {W1_WARMUP} warm-up cycles", mode.name());
        for _ in 0..W1_WARMUP {
            cycle(&lock, mode).await;
        }
        eprintln!("W1 ({}): {W1_ITERATIONS} measured cycles", mode.name());
        let mut acquires = Vec::with_capacity(W1_ITERATIONS);
        let mut releases = Vec::with_capacity(W1_ITERATIONS);
        let started = Instant::now();
        for _ in 0..W1_ITERATIONS {
            let (a, r) = cycle(&lock, mode).await;
            acquires.push(a);
            releases.push(r);
        }
        let elapsed = started.elapsed();
        let acq_per_s = per_second(W1_ITERATIONS, elapsed);
        let cycle_us = 1e6 / acq_per_s;
        lines.push(format!(
            "{{\"lib\":\"{LIB}\",\"workload\":\"W1\",\"release\":\"{}\",\"iterations\":{W1_ITERATIONS},\
             \"acq_per_s\":{acq_per_s:.1},\"acquire_p50_us\":{},\"acquire_p99_us\":{},\
             \"release_p50_us\":{},\"release_p99_us\":{},\"zk_create_p50_us\":{},\"zk_delete_p50_us\":{},\
             \"zk_rtt_p50_us\":{},\"ratio_cycle_to_rtt\":{:.2}}}",
            mode.name(),
            percentile(&mut acquires, 50.0),
            percentile(&mut acquires, 99.0),
            percentile(&mut releases, 50.0),
            percentile(&mut releases, 99.0),
            raw.create_p50,
            raw.delete_p50,
            raw.rtt_p50,
            cycle_us / raw.rtt_p50.max(1) as f64,
        ));
    }

    drop(lock);
    session.close().await;
    lines
}

// ---- W2 -----------------------------------------------------------------------------------------

async fn w2(connect: &str) -> String {
    let root = testkit::unique_root("bench-w2");
    eprintln!("W2: root {root}");
    let raw = raw_baseline(connect, &root).await;

    let sessions: Vec<SessionHandle> = (0..W2_CLIENTS).map(|_| start_session(connect, &root)).collect();
    sessions[0].ensure_path("/bench").await.expect("ensure /bench");
    // Every session up before the clock starts.
    for session in &sessions {
        session.exists("/bench").await.expect("session up");
    }
    let locks: Vec<Addr<LockActor>> =
        sessions.iter().map(|s| LockActor::new(s.clone(), LockConfig::new("/bench/lock")).start()).collect();

    let tickets = Arc::new(AtomicUsize::new(0));
    let holders = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(AtomicUsize::new(0));
    eprintln!("W2: {W2_CLIENTS} clients, {W2_ACQUISITIONS} acquisitions");

    let started = Instant::now();
    let loops: Vec<_> = locks
        .iter()
        .cloned()
        .map(|lock| {
            let (tickets, holders, violations) = (tickets.clone(), holders.clone(), violations.clone());
            actix::spawn(async move {
                let mut waits = Vec::new();
                while tickets.fetch_add(1, Ordering::SeqCst) < W2_ACQUISITIONS {
                    let t = Instant::now();
                    acquire(&lock).await;
                    waits.push(micros(t));
                    if holders.fetch_add(1, Ordering::SeqCst) != 0 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    // Hold across a scheduling point, so that an overlapping grant to another
                    // actor (all loops share this thread) would get to run and be counted.
                    tokio::task::yield_now().await;
                    if holders.fetch_sub(1, Ordering::SeqCst) != 1 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    release(&lock).await;
                }
                waits
            })
        })
        .collect();
    let mut waits = Vec::with_capacity(W2_ACQUISITIONS);
    for handle in loops {
        waits.extend(handle.await.expect("W2 loop finished"));
    }
    let elapsed = started.elapsed();
    assert_eq!(waits.len(), W2_ACQUISITIONS);

    drop(locks);
    for session in &sessions {
        session.close().await;
    }

    format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W2\",\"clients\":{W2_CLIENTS},\"acquisitions\":{W2_ACQUISITIONS},\
         \"acq_per_s\":{:.1},\"wait_p50_us\":{},\"wait_p99_us\":{},\"violations\":{},\"zk_rtt_p50_us\":{}}}",
        per_second(W2_ACQUISITIONS, elapsed),
        percentile(&mut waits, 50.0),
        percentile(&mut waits, 99.0),
        violations.load(Ordering::SeqCst),
        raw.rtt_p50,
    )
}
