//! The benchmark's harness: the server, sessions, the raw `zookeeper-client` yardsticks,
//! percentiles and the shared lock helpers. Owns nothing about any one workload; each workload is
//! a file of its own (`w1_lock_cycle.rs`, ...) listed in `main.rs`.

pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
pub(crate) use std::sync::{Arc, Mutex};
pub(crate) use std::time::{Duration, Instant};

pub(crate) use actix::{Actor, Addr, AsyncContext, Context, Handler, WrapFuture};
pub(crate) use actix_zookeeper::cache::{self, CacheActor, CacheConfig, CacheEvent};
pub(crate) use actix_zookeeper::election::{
    ElectionActor, ElectionConfig, ElectionEvent, ElectionHandle, FencingToken, Resign, Subscribe,
};
pub(crate) use actix_zookeeper::lock::{Acquire, LockActor, LockConfig, Release};
pub(crate) use actix_zookeeper::queue::{
    ConsumerConfig, Delivery, DeliveryMode, ITEM_PREFIX, Queue, QueueConsumerActor, Revoked,
};
pub(crate) use actix_zookeeper::tasks::{
    MasterEvent, Stop, TaskAssigned, TaskClient, TaskId, TaskMaster, TaskMasterConfig, TaskOutcome, TaskWorker,
    TaskWorkerConfig, WorkerEvent,
};
pub(crate) use actix_zookeeper::testkit::{self, HoldLog, ServerOptions, ZkServer};
pub(crate) use actix_zookeeper::{CreateMode, Op, SessionConfig, SessionHandle};

pub(crate) const LIB: &str = "actix-zookeeper";
pub(crate) const RAW_HANDOFF_WARMUP: usize = 50;
pub(crate) const RAW_HANDOFF_OPS: usize = 300;
pub(crate) const RAW_WARMUP: usize = 200;
pub(crate) const RAW_OPS: usize = 1000;
pub(crate) const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Raw `zookeeper_client` medians in microseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawBaseline {
    pub(crate) create_p50: u128,
    pub(crate) delete_p50: u128,
    pub(crate) rtt_p50: u128,
}

// ---- statistics ---------------------------------------------------------------------------------

/// The `p`-th percentile (nearest rank) of `samples`, in microseconds.
pub(crate) fn percentile(samples: &mut [u128], p: f64) -> u128 {
    assert!(!samples.is_empty(), "no samples");
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

pub(crate) fn micros(since: Instant) -> u128 {
    since.elapsed().as_micros()
}

pub(crate) fn per_second(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

// ---- raw baseline -------------------------------------------------------------------------------

/// Sequential raw round trips with a bare `zookeeper_client::Client`: `RAW_OPS` ephemeral creates
/// of `<root>/raw-<i>`, `RAW_OPS` deletes of them, and `RAW_OPS` `exists` of `<root>`.
pub(crate) async fn raw_baseline(connect: &str, root: &str) -> RawBaseline {
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

/// A session as the workloads use it. `ZK_BENCH_TRACKING=1` turns ensemble tracking on (the
/// client then runs on a thread of its own: one thread hop more each way per request).
pub(crate) fn start_session(connect: &str, root: &str) -> SessionHandle {
    let tracking = std::env::var("ZK_BENCH_TRACKING").is_ok_and(|v| v == "1");
    let config = SessionConfig::new(connect)
        .with_chroot(root)
        .with_session_timeout(SESSION_TIMEOUT)
        .with_ensemble_tracking(tracking);
    SessionHandle::start(config).expect("session starts")
}

pub(crate) async fn acquire(lock: &Addr<LockActor>) {
    lock.send(Acquire::default()).await.expect("lock actor alive").expect("lock acquired");
}

pub(crate) async fn release(lock: &Addr<LockActor>) {
    lock.send(Release).await.expect("lock actor alive").expect("lock released");
}

/// Fails the benchmark when a workload's run broke a promise or did not finish: each of `checks`
/// names a count (violations, duplicates, lost items, runs that timed out, ...), and any count
/// above zero fails. Call it before the workload prints (to stdout or stderr) or returns any
/// rate: a broken run reports no rate. It panics, so the process exits non-zero, and `main`'s
/// server is still stopped as the panic unwinds.
pub(crate) fn fail_unless_sound(workload: &str, checks: &[(&str, usize)]) {
    let broken: Vec<String> = checks.iter().filter(|(_, n)| *n > 0).map(|(what, n)| format!("{what}: {n}")).collect();
    assert!(broken.is_empty(), "{workload} FAILED, no rate is reported: {}", broken.join(", "));
}

/// A `usize` from the environment variable `name`, or `default`.
pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(value) => value.trim().parse().unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
        Err(_) => default,
    }
}

/// `zk_packets_received` (requests from clients) summed over the `mntr` of every host of `connect`, if all answer.
pub(crate) fn packets_received(connect: &str) -> Option<u64> {
    // Every member of an ensemble: a session may be served by any of them.
    let hosts = connect.split('/').next()?.split(',');
    let mut sum = 0;
    for host in hosts {
        let mntr = testkit::mntr(host).ok()?;
        sum += mntr.lines().find_map(|line| line.strip_prefix("zk_packets_received")?.trim().parse::<u64>().ok())?;
    }
    Some(sum)
}

/// CPU time this process has used so far (user + system, all threads), in µs; the kernel counts
/// it in clock ticks (10 ms), so take it over a second or more.
pub(crate) fn cpu_us() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) closed by ')': utime is the 12th
    // of them, stime the 13th.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) + ticks(12)) * 10_000
}

/// This process's resident memory (`VmRSS`), in KiB.
pub(crate) fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
}

/// The median of `values` (by value) and its index.
pub(crate) fn median(values: &[f64]) -> (usize, f64) {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|a, b| values[*a].total_cmp(&values[*b]));
    let i = order[order.len() / 2];
    (i, values[i])
}

/// Rates as a JSON array.
pub(crate) fn rates(values: &[f64]) -> String {
    format!("[{}]", values.iter().map(|v| format!("{v:.1}")).collect::<Vec<_>>().join(","))
}

/// A bare client connected on `thread`, so that its connection's background task runs there.
pub(crate) async fn connect_on_arbiter(connect: &str, thread: &actix::ArbiterHandle) -> zookeeper_client::Client {
    let (tx, rx) = futures::channel::oneshot::channel();
    let connect = connect.to_owned();
    thread.spawn(async move {
        let _ = tx.send(zookeeper_client::Client::connect(&connect).await.expect("a bare client connects"));
    });
    rx.await.expect("the Arbiter connected")
}

/// The steps of round `round`, starting one step later than the round before: no contender
/// always runs first (on a cold server) or right after the same one.
pub(crate) fn rotated<T, const N: usize>(mut steps: [T; N], round: usize) -> [T; N] {
    steps.rotate_left(round % N);
    steps
}
