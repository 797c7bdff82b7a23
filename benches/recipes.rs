//! Lock, leader election, queue, cache and master–worker benchmark against a real ZooKeeper server
//! (see `docs/performance.md`).
//!
//! ```text
//! cargo bench --features testkit --bench recipes -- [W1|W2|W3|W4|W5|W6|all]
//! ```
//!
//! - **W1**: one session, one [`LockActor`], 500 warm-up then 2000 × (acquire; release), once with
//!   the release awaited and once pipelined (`do_send(Release)` followed at once by the next
//!   `Acquire`, both queued in order on the one session).
//! - **W2**: 8 sessions, 8 lock actors on one lock, 2000 acquisitions in total.
//! - **W3**: leader election hand-off: 3 [`ElectionActor`]s on 3 sessions; the leader resigns
//!   (`Resign { requeue: true }`) 5 warm-up then 50 measured times, each timed from just before
//!   the `Resign` is sent to the next leader's `LeadershipAcquired` reaching its subscriber.
//! - **W4**: distributed queue: one producer session puts 5000 items of 100 bytes (`put_all`,
//!   100 per call) while 4 [`QueueConsumerActor`]s on 4 sessions consume them (4 workers each,
//!   128 in flight per consumer; `W4_WORKERS`, `W4_CONCURRENCY`, `W4_BATCH` override these), once
//!   at-least-once and once at-most-once, each on a fresh queue. Timed from the first put to the
//!   last item acked (at-least-once) or delivered (at-most-once); every item carries its index,
//!   so duplicates and losses are counted. Then **W4-backlog**: 100,000 items (`W4_BACKLOG`)
//!   queued first, then the same 4 consumers, at-least-once, timed from the consumers' start;
//!   its line carries `ratio_to_w4` (its rate over W4's at-least-once rate in the same run) and
//!   `rss_growth_kib` (how much this process's resident memory grew while consuming).
//! - **W5**: tree cache: 10,001 nodes (`/tree`, 100 directories × 99 leaves, created beforehand
//!   by another session with pipelined `multi`s). The initial load of a [`CacheActor`] is timed
//!   from its start to `CacheInitialized` reaching a subscriber actor (3 loads, one after the
//!   other, each by a new cache; the median is reported). Then 100 warm-up and 1000 measured
//!   sequential `set_data`s by the other session on random leaves, each timed from just before
//!   the `set_data` to the subscriber receiving the matching `NodeUpdated`. The raw yardsticks
//!   from the same run: a pipelined walk of the tree (getData of every node, getChildren of every
//!   directory, level by level) and set → `NodeDataChanged` at another client's recursive
//!   persistent watch → its `getData` reply.
//! - **W6**: master–worker throughput: one [`TaskMaster`], 4 [`TaskWorker`]s (concurrency 8
//!   each, the runner answers at once with a 2-byte result) and one [`TaskClient`], each on its
//!   own session. 100 warm-up then 2000 measured tasks, all submissions sent before any is
//!   awaited; each task's `result` is awaited as soon as its submission is stored. Timed from the
//!   first submit to the last result; per task from its submit to its result; then 50 tasks one
//!   at a time (each result awaited before the next submit). `W6_WORKERS` and `W6_CONCURRENCY`
//!   override 4 and 8. The raw yardstick from the same run: the protocol's 3 writes per task
//!   (submit, assign and finish `multi`s) made by a bare client, each wave of 2000 pipelined.
//!
//! Each workload also measures raw `zookeeper_client` round trips (ephemeral create, delete,
//! `exists`) in the same run, as the yardstick; W3 also measures the raw floor of a hand-off (one
//! client deletes a node, another receives the `NodeDeleted` of its `exists` watch). One JSON line
//! per result goes to stdout; progress goes to stderr. With `ZK=host:port` set, that server is
//! used instead of starting one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::{Actor, Addr, AsyncContext, Context, Handler, WrapFuture};
use actix_zookeeper::cache::{self, CacheActor, CacheConfig, CacheEvent};
use actix_zookeeper::election::{ElectionActor, ElectionConfig, ElectionEvent, FencingToken, Resign, Subscribe};
use actix_zookeeper::lock::{Acquire, LockActor, LockConfig, Release};
use actix_zookeeper::queue::{ConsumerConfig, Delivery, DeliveryMode, ITEM_PREFIX, Queue, QueueConsumerActor, Revoked};
use actix_zookeeper::tasks::{
    MasterEvent, StopMaster, StopWorker, SubscribeMaster, SubscribeWorker, TaskAssigned, TaskClient, TaskId,
    TaskMaster, TaskMasterConfig, TaskOutcome, TaskWorker, TaskWorkerConfig, WorkerEvent,
};
use actix_zookeeper::testkit::{self, HoldLog, ServerOptions, ZkServer};
use actix_zookeeper::{CreateMode, Op, SessionConfig, SessionHandle};

const LIB: &str = "actix-zookeeper";
const W1_WARMUP: usize = 500;
const W1_ITERATIONS: usize = 2000;
const W2_CLIENTS: usize = 8;
const W2_ACQUISITIONS: usize = 2000;
const W3_PARTICIPANTS: usize = 3;
const W3_WARMUP: usize = 5;
const W3_ROUNDS: usize = 50;
/// Pause before each resign, so that the previous hand-off's follow-up traffic (the resigned
/// participant's new node, every participant's re-read of who leads) is over.
const W3_SETTLE: Duration = Duration::from_millis(20);
/// A hand-off that takes longer than this is a bug, not a slow run.
const W3_TIMEOUT: Duration = Duration::from_secs(10);
// Only its Curator classpath is used here (the file allows its own dead code).
#[path = "../tests/common/curator.rs"]
mod curator;

const W4_ITEMS: usize = 5000;
/// W4-backlog: items queued before the consumers start (`W4_BACKLOG` overrides; 0 skips it).
const W4_BACKLOG: usize = 100_000;
const W4_ITEM_BYTES: usize = 100;
const W4_BATCH: usize = 100;
const W4_CONSUMERS: usize = 4;
const W4_WORKERS: usize = 4;
/// In flight per consumer: the best at-least-once setting of 8, 16, 32, 64, 128 and 256 tried
/// (see `docs/performance.md`).
const W4_CONCURRENCY: usize = 128;
/// Pause after starting the consumers, so that they have listed the empty queue and wait on
/// its watch when the clock starts.
const W4_SETTLE: Duration = Duration::from_millis(300);
/// After the last item is done: time for a late duplicate to show up.
const W4_LINGER: Duration = Duration::from_millis(500);
/// A run that takes longer than this is a bug, not a slow run.
const W4_TIMEOUT: Duration = Duration::from_secs(120);
/// W5's tree: directories × leaves per directory (plus the directories and the root).
const W5_DIRS: usize = 100;
const W5_LEAVES: usize = 99;
/// Initial loads, each by a new cache; the median is reported.
const W5_LOADS: usize = 3;
const W5_WARMUP: usize = 100;
const W5_UPDATES: usize = 1000;
const W5_RAW_WARMUP: usize = 50;
const W5_RAW_UPDATES: usize = 300;
/// A load or an update that takes longer than this is a bug, not a slow run.
/// An update slower than this counts as slow (in the stderr summary).
const W5_SLOW_US: u128 = 2000;
const W5_TIMEOUT: Duration = Duration::from_secs(60);
const W6_ROOT: &str = "/jobs";
const W6_WARMUP: usize = 100;
const W6_TASKS: usize = 2000;
const W6_WORKERS: usize = 4;
const W6_CONCURRENCY: usize = 8;
/// What every W6 runner answers.
const W6_RESULT: &[u8] = b"ok";
/// Tasks submitted one at a time after the measured batch, each awaited before the next.
const W6_SINGLES: usize = 50;
/// Set-up that takes longer than this, or a result that does not come within it, is a bug.
const W6_TIMEOUT: Duration = Duration::from_secs(120);
/// After the last result: time for the master's and the workers' events to arrive.
const W6_LINGER: Duration = Duration::from_millis(200);
/// `Assigned` events further apart than this count as two bursts (two master passes).
const W6_BURST_GAP: Duration = Duration::from_micros(500);
/// The stderr timeline's bucket.
const W6_BUCKET_MS: usize = 50;
const RAW_HANDOFF_WARMUP: usize = 50;
const RAW_HANDOFF_OPS: usize = 300;
const RAW_WARMUP: usize = 200;
const RAW_OPS: usize = 1000;
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Workload {
    W1,
    W2,
    W3,
    W4,
    W5,
    W6,
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
        if workload.runs(Workload::W3) {
            println!("{}", w3(&connect).await);
        }
        if workload.runs(Workload::W4) {
            for line in w4(&connect).await {
                println!("{line}");
            }
        }
        if workload.runs(Workload::W5) {
            println!("{}", w5(&connect).await);
        }
        if workload.runs(Workload::W6) {
            println!("{}", w6(&connect).await);
            println!("{}", w6_backlog(&connect).await);
        }
    });

    drop(server);
}

/// `W1`, `W2`, `W3`, `W4`, `W5`, `W6` or `all` (default); cargo's own flags (`--bench`, ...) are ignored.
fn parse_workload() -> Workload {
    let mut workload = Workload::All;
    for arg in std::env::args().skip(1) {
        if arg.starts_with("--") {
            continue;
        }
        workload = match arg.to_ascii_lowercase().as_str() {
            "w1" => Workload::W1,
            "w2" => Workload::W2,
            "w3" => Workload::W3,
            "w4" => Workload::W4,
            "w5" => Workload::W5,
            "w6" => Workload::W6,
            "all" => Workload::All,
            other => {
                eprintln!("unknown workload {other:?}; expected W1, W2, W3, W4, W5, W6 or all");
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
    let holds = Arc::new(HoldLog::new());
    eprintln!("W2: {W2_CLIENTS} clients, {W2_ACQUISITIONS} acquisitions");

    let started = Instant::now();
    let loops: Vec<_> = locks
        .iter()
        .cloned()
        .map(|lock| {
            let (tickets, holds) = (tickets.clone(), holds.clone());
            actix::spawn(async move {
                let mut waits = Vec::new();
                while tickets.fetch_add(1, Ordering::SeqCst) < W2_ACQUISITIONS {
                    let t = Instant::now();
                    let grant = lock.send(Acquire::default()).await.expect("lock actor alive").expect("acquired");
                    let granted = Instant::now();
                    waits.push(micros(t));
                    // Every hold is logged on one clock and judged after the run: a wrong
                    // second grant shows as an overlap however late it arrives (issue 15: a
                    // holders counter saw it only inside a one-yield hold).
                    tokio::task::yield_now().await;
                    holds.record(grant.token.0, granted, Instant::now());
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
    assert_eq!(holds.len(), W2_ACQUISITIONS, "every hold logged");

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
        holds.violations(),
        raw.rtt_p50,
    )
}

// ---- W3 -----------------------------------------------------------------------------------------

/// An election event, which participant got it, and when its subscriber got it.
type Observed = (usize, Instant, ElectionEvent);

/// Subscribes to one participant and forwards its events, stamped on arrival.
struct Observer {
    index: usize,
    tx: tokio::sync::mpsc::UnboundedSender<Observed>,
}

impl Actor for Observer {
    type Context = Context<Self>;
}

impl Handler<ElectionEvent> for Observer {
    type Result = ();

    fn handle(&mut self, event: ElectionEvent, _: &mut Context<Self>) {
        let _ = self.tx.send((self.index, Instant::now(), event));
    }
}

/// Who leads, as the events tell it; counts overlapping terms.
struct Terms {
    /// Per participant: the token of its current term (between `Acquired` and `Lost`).
    leading: Vec<Option<FencingToken>>,
    violations: usize,
}

impl Terms {
    fn record(&mut self, index: usize, event: &ElectionEvent) {
        match event {
            ElectionEvent::LeadershipAcquired { token } => {
                if self.leading.iter().enumerate().any(|(i, t)| i != index && t.is_some()) {
                    eprintln!("W3: participant {index} acquired {token} while another one leads");
                    self.violations += 1;
                }
                self.leading[index] = Some(*token);
            }
            ElectionEvent::LeadershipLost { .. } => self.leading[index] = None,
            ElectionEvent::ElectionFailed { error } => panic!("W3: participant {index} failed: {error}"),
            _ => {}
        }
    }
}

/// Waits for a `LeadershipAcquired` with a token above `after`; returns (participant, arrival,
/// token), and the arrival of the `LeadershipLost` of participant `resigned` if it came first.
async fn next_leader(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Observed>,
    terms: &mut Terms,
    after: Option<FencingToken>,
    resigned: Option<usize>,
) -> (usize, Instant, FencingToken, Option<Instant>) {
    let mut lost_at = None;
    loop {
        let (index, at, event) = tokio::time::timeout(W3_TIMEOUT, rx.recv())
            .await
            .expect("W3: no new leader within the timeout")
            .expect("W3: observers alive");
        terms.record(index, &event);
        match event {
            ElectionEvent::LeadershipAcquired { token } if after.is_none_or(|after| token > after) => {
                return (index, at, token, lost_at);
            }
            ElectionEvent::LeadershipLost { .. } if Some(index) == resigned => lost_at = Some(at),
            _ => {}
        }
    }
}

/// The raw floor of a hand-off: client A deletes a node that client B watches with `exists`;
/// the time from just before the delete is sent to B receiving `NodeDeleted`. Median in µs.
async fn raw_handoff(connect: &str, root: &str) -> u128 {
    use zookeeper_client::{Acls, Client, CreateMode};

    let a = Client::connect(connect).await.expect("raw client A connects");
    let b = Client::connect(connect).await.expect("raw client B connects");
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let mut samples = Vec::with_capacity(RAW_HANDOFF_OPS);
    for i in 0..RAW_HANDOFF_WARMUP + RAW_HANDOFF_OPS {
        let path = format!("{root}/handoff-{i}");
        a.create(&path, b"", &ephemeral).await.expect("raw create");
        let (stat, watcher) = b.check_and_watch_stat(&path).await.expect("raw exists watch");
        assert!(stat.is_some());
        let t = Instant::now();
        let (deleted, notified) = tokio::join!(a.delete(&path, None), async {
            watcher.changed().await;
            micros(t)
        });
        deleted.expect("raw delete");
        if i >= RAW_HANDOFF_WARMUP {
            samples.push(notified);
        }
    }
    percentile(&mut samples, 50.0)
}

async fn w3(connect: &str) -> String {
    let root = testkit::unique_root("bench-w3");
    eprintln!("W3: root {root}");
    let raw = raw_baseline(connect, &root).await;
    let raw_handoff_p50 = raw_handoff(connect, &root).await;
    eprintln!("raw zookeeper-client: delete -> NodeDeleted at another client p50 {raw_handoff_p50} us");

    let sessions: Vec<SessionHandle> = (0..W3_PARTICIPANTS).map(|_| start_session(connect, &root)).collect();
    sessions[0].ensure_path("/bench").await.expect("ensure /bench");
    for session in &sessions {
        session.exists("/bench").await.expect("session up");
    }

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let elections: Vec<Addr<ElectionActor>> = sessions
        .iter()
        .enumerate()
        .map(|(index, session)| {
            let config = ElectionConfig::new("/bench/leader").with_participant_id(format!("p{index}"));
            let election = ElectionActor::new(session.clone(), config).start();
            let observer = Observer { index, tx: tx.clone() }.start();
            election.do_send(Subscribe { recipient: observer.recipient() });
            election
        })
        .collect();
    drop(tx);

    let mut terms = Terms { leading: vec![None; W3_PARTICIPANTS], violations: 0 };
    let (mut leader, _, mut token, _) = next_leader(&mut rx, &mut terms, None, None).await;
    eprintln!("W3: p{leader} leads first; {W3_WARMUP} warm-up and {W3_ROUNDS} measured hand-offs");

    let mut handoffs = Vec::with_capacity(W3_ROUNDS);
    let mut resigns = Vec::with_capacity(W3_ROUNDS);
    let mut same_leader = 0;
    for round in 0..W3_WARMUP + W3_ROUNDS {
        tokio::time::sleep(W3_SETTLE).await;
        while let Ok((index, _, event)) = rx.try_recv() {
            terms.record(index, &event);
        }
        let t0 = Instant::now();
        elections[leader].send(Resign { requeue: true }).await.expect("election actor alive").expect("resigned");
        let (next, t1, next_token, lost_at) = next_leader(&mut rx, &mut terms, Some(token), Some(leader)).await;
        if next == leader {
            eprintln!("W3: p{leader} led again after resigning");
            same_leader += 1;
        }
        if round >= W3_WARMUP {
            handoffs.push(t1.duration_since(t0).as_micros());
            if let Some(lost_at) = lost_at {
                resigns.push(lost_at.duration_since(t0).as_micros());
            }
        }
        (leader, token) = (next, next_token);
    }
    assert_eq!(handoffs.len(), W3_ROUNDS);

    let ms = |us: u128| us as f64 / 1000.0;
    let (p50, p99) = (percentile(&mut handoffs, 50.0), percentile(&mut handoffs, 99.0));
    eprintln!(
        "W3: hand-off p50 {p50} us, p99 {p99} us, min {} us, max {} us; old leader's LeadershipLost after \
         p50 {} us; raw delete -> notification p50 {raw_handoff_p50} us",
        handoffs[0],
        handoffs[handoffs.len() - 1],
        if resigns.is_empty() { 0 } else { percentile(&mut resigns, 50.0) },
    );

    drop(rx);
    drop(elections);
    for session in &sessions {
        session.close().await;
    }

    format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W3\",\"rounds\":{W3_ROUNDS},\"handoff_p50_ms\":{:.2},\
         \"handoff_p99_ms\":{:.2},\"violations\":{},\"same_leader\":{same_leader},\"zk_rtt_p50_us\":{},\
         \"zk_delete_notify_p50_us\":{raw_handoff_p50}}}",
        ms(p50),
        ms(p99),
        terms.violations,
        raw.rtt_p50,
    )
}

// ---- W4 -----------------------------------------------------------------------------------------

/// What the W4 workers saw, shared by all workers of one run.
struct W4Ledger {
    mode: DeliveryMode,
    items: usize,
    /// Deliveries per item index.
    deliveries: Mutex<Vec<u32>>,
    /// Per item index: acked (at-least-once) or delivered (at-most-once).
    done: Mutex<Vec<bool>>,
    done_count: AtomicUsize,
    /// When the last item was done.
    finished: Mutex<Option<Instant>>,
    all_done: tokio::sync::Notify,
    ack_errors: AtomicUsize,
    revoked: AtomicUsize,
    malformed: AtomicUsize,
}

impl W4Ledger {
    fn new(mode: DeliveryMode, items: usize) -> Self {
        W4Ledger {
            mode,
            items,
            deliveries: Mutex::new(vec![0; items]),
            done: Mutex::new(vec![false; items]),
            done_count: AtomicUsize::new(0),
            finished: Mutex::new(None),
            all_done: tokio::sync::Notify::new(),
            ack_errors: AtomicUsize::new(0),
            revoked: AtomicUsize::new(0),
            malformed: AtomicUsize::new(0),
        }
    }

    fn delivered(&self, index: usize) {
        self.deliveries.lock().expect("ledger")[index] += 1;
    }

    fn complete(&self, index: usize) {
        let first = !std::mem::replace(&mut self.done.lock().expect("ledger")[index], true);
        if first && self.done_count.fetch_add(1, Ordering::SeqCst) + 1 == self.items {
            *self.finished.lock().expect("ledger") = Some(Instant::now());
            self.all_done.notify_one();
        }
    }

    /// (duplicates, lost): deliveries beyond the first of an index; indices never delivered.
    fn tally(&self) -> (usize, usize) {
        let deliveries = self.deliveries.lock().expect("ledger");
        let duplicates = deliveries.iter().map(|&n| n.saturating_sub(1) as usize).sum();
        let lost = deliveries.iter().filter(|&&n| n == 0).count();
        (duplicates, lost)
    }
}

/// Item `index` of W4: its index (big-endian `u32`), then filler up to `W4_ITEM_BYTES`.
fn w4_item(index: usize) -> Vec<u8> {
    let mut item = vec![b'.'; W4_ITEM_BYTES];
    item[..4].copy_from_slice(&u32::try_from(index).expect("index fits u32").to_be_bytes());
    item
}

fn w4_index(data: &[u8], items: usize) -> Option<usize> {
    let bytes: [u8; 4] = data.get(..4)?.try_into().ok()?;
    let index = u32::from_be_bytes(bytes) as usize;
    (index < items && data.len() == W4_ITEM_BYTES).then_some(index)
}

/// Records each delivery and acks it at once. In at-most-once mode the item counts as done on
/// delivery (the ack only frees the in-flight slot); in at-least-once mode when the ack succeeds.
struct W4Worker {
    ledger: Arc<W4Ledger>,
}

impl Actor for W4Worker {
    type Context = Context<Self>;
}

impl Handler<Delivery> for W4Worker {
    type Result = ();

    fn handle(&mut self, delivery: Delivery, ctx: &mut Context<Self>) {
        let ledger = self.ledger.clone();
        let Some(index) = w4_index(&delivery.data, ledger.items) else {
            ledger.malformed.fetch_add(1, Ordering::SeqCst);
            ctx.spawn(
                async move {
                    let _ = delivery.ack().await;
                }
                .into_actor(self),
            );
            return;
        };
        ledger.delivered(index);
        if ledger.mode == DeliveryMode::AtMostOnce {
            ledger.complete(index);
        }
        ctx.spawn(
            async move {
                match delivery.ack().await {
                    Ok(()) => {
                        if ledger.mode == DeliveryMode::AtLeastOnce {
                            ledger.complete(index);
                        }
                    }
                    Err(_) => {
                        ledger.ack_errors.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            .into_actor(self),
        );
    }
}

impl Handler<Revoked> for W4Worker {
    type Result = ();

    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {
        self.ledger.revoked.fetch_add(1, Ordering::SeqCst);
    }
}

/// A `usize` from the environment variable `name`, or `default`.
fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(value) => value.trim().parse().unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
        Err(_) => default,
    }
}

/// `zk_packets_received` from the server's `mntr` (the first host of `connect`), if it answers.
fn packets_received(connect: &str) -> Option<u64> {
    let host = connect.split(',').next()?.split('/').next()?;
    let mntr = testkit::mntr(host).ok()?;
    mntr.lines().find_map(|line| line.strip_prefix("zk_packets_received")?.trim().parse().ok())
}

fn mode_name(mode: DeliveryMode) -> &'static str {
    match mode {
        DeliveryMode::AtLeastOnce => "at_least_once",
        DeliveryMode::AtMostOnce => "at_most_once",
    }
}

async fn w4(connect: &str) -> Vec<String> {
    let root = testkit::unique_root("bench-w4");
    eprintln!("W4: root {root}");
    let raw = raw_baseline(connect, &root).await;
    let mut lines = Vec::new();
    let mut streaming_rate = None;
    for mode in [DeliveryMode::AtLeastOnce, DeliveryMode::AtMostOnce] {
        let (line, rate) = w4_run(connect, &root, &raw, mode, W4_ITEMS, false, None).await;
        if mode == DeliveryMode::AtLeastOnce {
            streaming_rate = Some(rate);
        }
        lines.push(line);
    }
    let backlog = env_usize("W4_BACKLOG", W4_BACKLOG);
    let mut backlog_rate = None;
    if backlog > 0 {
        let (line, rate) = w4_run(connect, &root, &raw, DeliveryMode::AtLeastOnce, backlog, true, streaming_rate).await;
        backlog_rate = Some(rate);
        lines.push(line);
    }
    // The yardstick: Curator's DistributedQueue, same server, same run.
    if std::env::var("W4_CURATOR").map_or(true, |v| v != "0") {
        for mode in ["lock-safe", "plain"] {
            match curator_queue(connect, &format!("{root}/bench/curator-{mode}"), W4_ITEMS, W4_CONSUMERS, mode) {
                Ok((line, rate)) => {
                    eprintln!("W4 Curator ({mode}): {rate:.1} items/s");
                    lines.push(line);
                    let ours = if mode == "lock-safe" { streaming_rate } else { None };
                    if let (Some(ours), Some(backlog)) = (ours, backlog_rate) {
                        lines.push(format!(
                            "{{\"lib\":\"{LIB}\",\"workload\":\"W4-vs-curator\",\"curator_lock_safe_items_per_s\":{rate:.1},\
                             \"w4_at_least_once_items_per_s\":{ours:.1},\"w4_backlog_items_per_s\":{backlog:.1},\
                             \"ratio_w4_to_curator\":{:.2},\"ratio_backlog_to_curator\":{:.2}}}",
                            ours / rate,
                            backlog / rate
                        ));
                    }
                }
                Err(why) => eprintln!("W4 Curator ({mode}) skipped: {why}"),
            }
        }
    }
    lines
}

/// Runs `benches/java/CuratorQueueBench.java` (Curator 5.4's `DistributedQueue`): `items`
/// queued first, then drained by `consumers` Curator clients; returns its JSON line and rate.
fn curator_queue(
    connect: &str,
    path: &str,
    items: usize,
    consumers: usize,
    mode: &str,
) -> Result<(String, f64), String> {
    let classpath = curator::curator_classpath()?;
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/java/CuratorQueueBench.java");
    let classes = std::env::temp_dir().join(format!("actix-zookeeper-curator-queue-bench-{}", std::process::id()));
    std::fs::create_dir_all(&classes).map_err(|e| e.to_string())?;
    let javac = std::process::Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .arg("-cp")
        .arg(&classpath)
        .arg(&source)
        .output()
        .map_err(|e| format!("javac: {e}"))?;
    if !javac.status.success() {
        return Err(format!("javac failed: {}", String::from_utf8_lossy(&javac.stderr)));
    }
    // A connect string without the chroot: the Java side names the full path.
    let host = connect.split('/').next().unwrap_or(connect);
    let run = std::process::Command::new("java")
        .arg("-cp")
        .arg(format!("{}:{classpath}", classes.display()))
        .arg("CuratorQueueBench")
        .args([host, path, &items.to_string(), &consumers.to_string(), mode])
        .output()
        .map_err(|e| format!("java: {e}"))?;
    let _ = std::fs::remove_dir_all(&classes);
    let out = String::from_utf8_lossy(&run.stdout);
    let line = out.lines().find(|l| l.starts_with('{')).ok_or_else(|| {
        format!("no result from the Curator run: {}", String::from_utf8_lossy(&run.stderr).lines().last().unwrap_or(""))
    })?;
    let rate = line
        .split("\"items_per_s\":")
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .and_then(|n| n.parse::<f64>().ok())
        .ok_or_else(|| format!("no rate in {line}"))?;
    Ok((line.to_owned(), rate))
}

/// One W4 run on a fresh queue: `items` items, put while the consumers run, or all `queued`
/// before they start (W4-backlog; timed from the consumers' start). `yardstick` is the
/// streaming at-least-once rate of the same run, for the backlog's ratio.
async fn w4_run(
    connect: &str,
    root: &str,
    raw: &RawBaseline,
    mode: DeliveryMode,
    items: usize,
    queued: bool,
    yardstick: Option<f64>,
) -> (String, f64) {
    let workers = env_usize("W4_WORKERS", W4_WORKERS);
    let concurrency = env_usize("W4_CONCURRENCY", W4_CONCURRENCY);
    let batch = env_usize("W4_BATCH", W4_BATCH).max(1);
    let name = mode_name(mode);
    let workload = if queued { "W4-backlog" } else { "W4" };
    let queue_path = format!("/bench/q-{name}-{items}");
    let producer = start_session(connect, root);
    producer.ensure_path(&format!("{queue_path}/claims")).await.expect("ensure the queue");
    let queue = Queue::new(producer.clone(), queue_path.clone());
    let put_all = move |queue: Queue| async move {
        let started = Instant::now();
        let indices: Vec<usize> = (0..items).collect();
        // A few batches in flight at once: filling a large backlog one batch at a time would
        // take longer than draining it.
        for chunks in indices.chunks(batch * 8) {
            let puts: Vec<_> = chunks
                .chunks(batch)
                .map(|chunk| {
                    let queue = queue.clone();
                    let data: Vec<Vec<u8>> = chunk.iter().map(|&i| w4_item(i)).collect();
                    async move { queue.put_all(data).await.expect("put_all") }
                })
                .collect();
            futures::future::join_all(puts).await;
        }
        started.elapsed()
    };
    if queued {
        eprintln!("{workload} ({name}): queueing {items} items first");
        let took = put_all(queue.clone()).await;
        eprintln!("{workload} ({name}): queued in {:.1} s", took.as_secs_f64());
    }
    let sessions: Vec<SessionHandle> = (0..W4_CONSUMERS).map(|_| start_session(connect, root)).collect();
    for session in &sessions {
        session.exists(&queue_path).await.expect("session up");
    }
    let ledger = Arc::new(W4Ledger::new(mode, items));
    let rss_before = rss_kib();
    let packets_before = packets_received(connect);
    let started = Instant::now();
    let consumers: Vec<Addr<QueueConsumerActor>> = sessions
        .iter()
        .enumerate()
        .map(|(c, session)| {
            let ledger = ledger.clone();
            let config = ConsumerConfig::new(queue_path.clone())
                .with_consumer_id(format!("c{c}"))
                .with_workers(workers, move |_| W4Worker { ledger: ledger.clone() })
                .with_concurrency(concurrency)
                .with_mode(mode);
            QueueConsumerActor::new(session.clone(), config).start()
        })
        .collect();
    let (started, put) = if queued {
        (started, None)
    } else {
        // Let every consumer list the (empty) queue and set its watch before the clock starts.
        tokio::time::sleep(W4_SETTLE).await;
        (Instant::now(), Some(actix::spawn(put_all(queue))))
    };
    eprintln!(
        "{workload} ({name}): {items} items of {W4_ITEM_BYTES} bytes in batches of {batch}, {W4_CONSUMERS} consumers \
         x {workers} workers, concurrency {concurrency}"
    );
    let timeout = W4_TIMEOUT.max(Duration::from_millis(items as u64 * 2));
    let completed = tokio::time::timeout(timeout, ledger.all_done.notified()).await.is_ok();
    let put_elapsed = match put {
        Some(put) => put.await.expect("producer finished"),
        None => Duration::ZERO,
    };
    let elapsed = ledger.finished.lock().expect("ledger").map_or_else(|| started.elapsed(), |t| t - started);
    let packets = packets_before.zip(packets_received(connect)).map(|(before, after)| after - before);
    let rss_after = rss_kib();
    if !completed {
        eprintln!("{workload} ({name}): only {} of {items} items done after {timeout:?}", {
            ledger.done_count.load(Ordering::SeqCst)
        });
    }
    // Late duplicates would show up now.
    tokio::time::sleep(W4_LINGER).await;
    let (duplicates, lost) = ledger.tally();
    let left = producer
        .children(&queue_path)
        .await
        .map(|c| c.names.iter().filter(|n| n.starts_with(ITEM_PREFIX)).count())
        .unwrap_or(usize::MAX);
    let items_per_s = per_second(items, elapsed);
    let packets_per_item = packets.map_or(-1.0, |p| p as f64 / items as f64);
    let rss_growth_kib = rss_after.zip(rss_before).map_or(-1, |(after, before)| after as i64 - before as i64);
    eprintln!(
        "{workload} ({name}): {items_per_s:.1} items/s ({:.0} ms; producer done after {:.0} ms); duplicates {duplicates}, \
         lost {lost}, left {left}, ack errors {}, revoked {}, malformed {}; {packets_per_item:.2} requests \
         received by the server per item; resident memory grew {rss_growth_kib} KiB while consuming",
        elapsed.as_secs_f64() * 1e3,
        put_elapsed.as_secs_f64() * 1e3,
        ledger.ack_errors.load(Ordering::SeqCst),
        ledger.revoked.load(Ordering::SeqCst),
        ledger.malformed.load(Ordering::SeqCst),
    );

    drop(consumers);
    for session in &sessions {
        session.close().await;
    }
    producer.close().await;

    let ratio = yardstick.map_or(String::new(), |y| format!(",\"ratio_to_w4\":{:.3}", items_per_s / y));
    let line = format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"{workload}\",\"items\":{items},\"consumers\":{W4_CONSUMERS},\
         \"mode\":\"{name}\",\"items_per_s\":{items_per_s:.1},\"duplicates\":{duplicates},\"lost\":{lost},\
         \"zk_rtt_p50_us\":{},\"workers_per_consumer\":{workers},\"concurrency\":{concurrency},\"batch\":{batch},\
         \"elapsed_ms\":{:.1},\"put_ms\":{:.1},\"left\":{left},\"ack_errors\":{},\"zk_requests_per_item\":{packets_per_item:.2},\
         \"rss_growth_kib\":{rss_growth_kib}{ratio}}}",
        raw.rtt_p50,
        elapsed.as_secs_f64() * 1e3,
        put_elapsed.as_secs_f64() * 1e3,
        ledger.ack_errors.load(Ordering::SeqCst),
    );
    (line, items_per_s)
}

/// This process's resident memory (`VmRSS`), in KiB.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
}

// ---- W5 -----------------------------------------------------------------------------------------

/// W5's tree below the session's chroot.
const W5_TREE: &str = "/tree";

fn w5_dir(d: usize) -> String {
    format!("{W5_TREE}/d{d:02}")
}

fn w5_leaf(d: usize, n: usize) -> String {
    format!("{W5_TREE}/d{d:02}/n{n:02}")
}

/// What the W5 subscriber saw (sent on with its arrival stamp).
enum W5Seen {
    Added,
    Initialized,
    Updated { path: String, data: Vec<u8> },
    Other(String),
}

/// Subscribes to the cache and forwards its events, stamped on arrival.
struct W5Subscriber {
    tx: tokio::sync::mpsc::UnboundedSender<(Instant, W5Seen)>,
}

impl Actor for W5Subscriber {
    type Context = Context<Self>;
}

impl Handler<CacheEvent> for W5Subscriber {
    type Result = ();

    fn handle(&mut self, event: CacheEvent, _: &mut Context<Self>) {
        let at = Instant::now();
        let seen = match event {
            CacheEvent::NodeAdded { .. } => W5Seen::Added,
            CacheEvent::CacheInitialized => W5Seen::Initialized,
            CacheEvent::NodeUpdated { path, data, .. } => W5Seen::Updated { path, data: data.unwrap_or_default() },
            other => W5Seen::Other(format!("{other:?}")),
        };
        let _ = self.tx.send((at, seen));
    }
}

/// The next event from the W5 subscriber; panics after `W5_TIMEOUT` (a bug, not a slow run).
async fn w5_next(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(Instant, W5Seen)>,
    waiting_for: &str,
) -> (Instant, W5Seen) {
    tokio::time::timeout(W5_TIMEOUT, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("W5: no {waiting_for} within {W5_TIMEOUT:?}"))
        .expect("W5: subscriber alive")
}

/// A small xorshift generator: the leaves to update, the same in every run.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn leaf(&mut self) -> (usize, usize) {
        (self.below(W5_DIRS), self.below(W5_LEAVES))
    }
}

/// The raw floor of a load: a bare client reads the whole tree at `tree` (full path) level by
/// level, every request of a level sent before any reply is awaited: getData of every node,
/// getChildren of every node with children. Returns (nodes read, elapsed).
async fn raw_walk(client: &zookeeper_client::Client, tree: &str) -> (usize, Duration) {
    let started = Instant::now();
    let mut nodes = 0;
    let mut level = vec![tree.to_owned()];
    while !level.is_empty() {
        let reads: Vec<_> = level.iter().map(|path| client.get_data(path)).collect();
        let mut parents = Vec::new();
        for (path, read) in level.iter().zip(futures::future::join_all(reads).await) {
            let (_, stat) = read.expect("raw getData");
            nodes += 1;
            if stat.num_children > 0 {
                parents.push(path.clone());
            }
        }
        let lists: Vec<_> = parents.iter().map(|path| client.list_children(path)).collect();
        let mut next = Vec::new();
        for (path, names) in parents.iter().zip(futures::future::join_all(lists).await) {
            next.extend(names.expect("raw getChildren").into_iter().map(|name| format!("{path}/{name}")));
        }
        level = next;
    }
    (nodes, started.elapsed())
}

/// The raw floor of a cache update: client A sets a leaf's data; client B, with a recursive
/// persistent watch on the tree, receives `NodeDataChanged` and reads the node. In µs: the
/// median of set → notification, and the median and p99 of set → B's getData reply.
async fn raw_update_floor(connect: &str, tree: &str) -> (u128, u128, u128) {
    use zookeeper_client::{AddWatchMode, Client, EventType};

    let a = Client::connect(connect).await.expect("raw client A connects");
    let b = Client::connect(connect).await.expect("raw client B connects");
    let mut watcher = b.watch(tree, AddWatchMode::PersistentRecursive).await.expect("raw persistent watch");
    let mut random = XorShift(0x5eed_0001);
    let mut notified = Vec::with_capacity(W5_RAW_UPDATES);
    let mut read = Vec::with_capacity(W5_RAW_UPDATES);
    for i in 0..W5_RAW_WARMUP + W5_RAW_UPDATES {
        let (d, n) = random.leaf();
        let path = format!("{tree}/d{d:02}/n{n:02}");
        let data = format!("raw-{i}");
        let t = Instant::now();
        let (set, (at_event, at_read)) = tokio::join!(a.set_data(&path, data.as_bytes(), None), async {
            let event = watcher.changed().await;
            let at_event = micros(t);
            assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeDataChanged, path.as_str()));
            let (got, _) = b.get_data(&event.path).await.expect("raw getData");
            assert_eq!(got, data.as_bytes());
            (at_event, micros(t))
        });
        set.expect("raw setData");
        if i >= W5_RAW_WARMUP {
            notified.push(at_event);
            read.push(at_read);
        }
    }
    (percentile(&mut notified, 50.0), percentile(&mut read, 50.0), percentile(&mut read, 99.0))
}

/// A cache, its subscriber, and the subscriber's events.
type W5Cache = (Addr<CacheActor>, Addr<W5Subscriber>, tokio::sync::mpsc::UnboundedReceiver<(Instant, W5Seen)>);

/// Starts a cache of the tree with a new subscriber; returns when it was started, and them.
fn w5_start_cache(session: &SessionHandle) -> (Instant, W5Cache) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let t0 = Instant::now();
    let cache = CacheActor::new(session.clone(), CacheConfig::new(W5_TREE)).expect("a valid cache path").start();
    let subscriber = W5Subscriber { tx }.start();
    cache.do_send(cache::Subscribe { recipient: subscriber.clone().recipient() });
    (t0, (cache, subscriber, rx))
}

async fn w5(connect: &str) -> String {
    let root = testkit::unique_root("bench-w5");
    eprintln!("W5: root {root}");
    let raw = raw_baseline(connect, &root).await;

    // The tree, written by its own session: one multi per directory (the directory and its
    // leaves), all sent before any reply is awaited.
    let writer = start_session(connect, &root);
    writer.ensure_path(W5_TREE).await.expect("ensure the tree's root");
    let batches: Vec<_> = (0..W5_DIRS)
        .map(|d| {
            let dir = Op::Create { path: w5_dir(d), data: Vec::new(), mode: CreateMode::Persistent };
            let leaves = (0..W5_LEAVES).map(move |n| Op::Create {
                path: w5_leaf(d, n),
                data: format!("v{d}-{n}").into_bytes(),
                mode: CreateMode::Persistent,
            });
            writer.multi(std::iter::once(dir).chain(leaves).collect())
        })
        .collect();
    let created = Instant::now();
    for batch in batches {
        batch.await.expect("create a directory and its leaves");
    }
    let total = 1 + W5_DIRS * (1 + W5_LEAVES);
    eprintln!("W5: created {total} nodes in {:.0} ms", created.elapsed().as_secs_f64() * 1e3);

    let raw_client = zookeeper_client::Client::connect(connect).await.expect("raw client connects");
    let full_tree = format!("{root}{W5_TREE}");
    let (walked, _) = raw_walk(&raw_client, &full_tree).await;
    assert_eq!(walked, total, "the raw walk reads every node");
    let mut walks: Vec<u128> = Vec::new();
    for _ in 0..W5_LOADS {
        walks.push(raw_walk(&raw_client, &full_tree).await.1.as_micros());
    }
    let raw_walk_us = percentile(&mut walks, 50.0);
    drop(raw_client);
    let (raw_notify_p50, raw_notify_get_p50, raw_notify_get_p99) = raw_update_floor(connect, &full_tree).await;
    eprintln!(
        "raw zookeeper-client: pipelined walk of {total} nodes p50 {:.1} ms (after one warm-up walk); set -> \
         NodeDataChanged at another client p50 {raw_notify_p50} us, -> its getData reply p50 {raw_notify_get_p50} \
         us, p99 {raw_notify_get_p99} us",
        raw_walk_us as f64 / 1e3
    );

    // The cache's own session, up before any clock starts.
    let reader = start_session(connect, &root);
    reader.exists(W5_TREE).await.expect("session up");

    let mut loads = Vec::with_capacity(W5_LOADS);
    let mut live = None;
    for load in 0..W5_LOADS {
        let (t0, (cache, subscriber, mut rx)) = w5_start_cache(&reader);
        let mut added = 0;
        let initialized = loop {
            match w5_next(&mut rx, "CacheInitialized").await {
                (_, W5Seen::Added) => added += 1,
                (at, W5Seen::Initialized) => break at,
                (_, W5Seen::Updated { path, .. }) => panic!("W5: NodeUpdated for {path} during the load"),
                (_, W5Seen::Other(event)) => panic!("W5: unexpected event during the load: {event}"),
            }
        };
        let load_us = initialized.duration_since(t0).as_micros();
        assert_eq!(added, total, "W5: one NodeAdded per node before CacheInitialized");
        eprintln!("W5: load {} of {W5_LOADS}: {added} nodes in {:.1} ms", load + 1, load_us as f64 / 1e3);
        loads.push(load_us);
        if load + 1 < W5_LOADS {
            cache.send(cache::Stop).await.expect("cache alive");
            drop(subscriber);
        } else {
            live = Some((cache, subscriber, rx));
        }
    }
    let (load_min, load_max) = (*loads.iter().min().expect("loads"), *loads.iter().max().expect("loads"));
    let load_us = percentile(&mut loads, 50.0);
    let (cache, _subscriber, mut rx) = live.expect("the last cache");

    eprintln!("W5: {W5_WARMUP} warm-up and {W5_UPDATES} measured updates of random leaves");
    let mut random = XorShift(0x5eed_0005);
    let mut updates = Vec::with_capacity(W5_UPDATES);
    // The writer's own set_data round trip, per update: a tail shared with it is not the cache's.
    let mut sets = Vec::with_capacity(W5_UPDATES);
    let mut expected = std::collections::BTreeMap::new();
    let mut stray = 0;
    for i in 0..W5_WARMUP + W5_UPDATES {
        let (d, n) = random.leaf();
        let path = w5_leaf(d, n);
        let data = format!("u{i}").into_bytes();
        let t0 = Instant::now();
        let set = writer.set_data(&path, data.clone(), None);
        // Stamped when the writer's reply arrives (this thread also runs the subscriber).
        let set = actix::spawn(async move { (set.await, Instant::now()) });
        let arrived = loop {
            match w5_next(&mut rx, &format!("NodeUpdated for {path}")).await {
                (at, W5Seen::Updated { path: p, data: got }) if p == path && got == data => break at,
                (_, seen) => {
                    stray += 1;
                    let what = match seen {
                        W5Seen::Updated { path, .. } => format!("NodeUpdated for {path}"),
                        W5Seen::Other(event) => event,
                        W5Seen::Added => "NodeAdded".to_owned(),
                        W5Seen::Initialized => "CacheInitialized".to_owned(),
                    };
                    eprintln!("W5: unexpected event while waiting for {path}: {what}");
                }
            }
        };
        let (set_result, set_at) = set.await.expect("set_data task");
        set_result.expect("set_data");
        if i >= W5_WARMUP {
            updates.push(arrived.duration_since(t0).as_micros());
            sets.push(set_at.duration_since(t0).as_micros());
        }
        expected.insert(path, data);
    }
    // The cache holds what was written.
    let held = cache.send(cache::Snapshot).await.expect("cache alive");
    assert_eq!(held.len(), total, "W5: the cache holds every node");
    let wrong = expected.iter().filter(|(p, d)| held.get(*p).and_then(|n| n.data.as_ref()) != Some(*d)).count();
    assert_eq!(wrong, 0, "W5: the cache holds the last data of every updated leaf");

    let slow = |us: &u128| *us > W5_SLOW_US;
    let slow_updates = updates.iter().filter(|us| slow(us)).count();
    let slow_both = updates.iter().zip(&sets).filter(|(u, s)| slow(u) && slow(s)).count();
    let (p50, p99) = (percentile(&mut updates, 50.0), percentile(&mut updates, 99.0));
    let (set_p50, set_p99) = (percentile(&mut sets, 50.0), percentile(&mut sets, 99.0));
    eprintln!(
        "W5: load p50 {:.1} ms (min {:.1}, max {:.1}); update p50 {p50} us, p99 {p99} us, min {} us, max {} us; \
         {stray} unexpected events; the writer's set_data reply p50 {set_p50} us, p99 {set_p99} us; {slow_updates} \
         updates took over {} us, in {slow_both} of them the set_data reply did too",
        load_us as f64 / 1e3,
        load_min as f64 / 1e3,
        load_max as f64 / 1e3,
        updates[0],
        updates[updates.len() - 1],
        W5_SLOW_US,
    );

    cache.send(cache::Stop).await.expect("cache alive");
    reader.close().await;
    writer.close().await;

    format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W5\",\"nodes\":{},\"load_ms\":{:.1},\"update_p50_us\":{p50},\
         \"update_p99_us\":{p99},\"held\":{total},\"loads\":{W5_LOADS},\"load_min_ms\":{:.1},\"load_max_ms\":{:.1},\
         \"updates\":{W5_UPDATES},\"stray_events\":{stray},\"zk_rtt_p50_us\":{},\"zk_walk_ms\":{:.1},\
         \"zk_set_notify_p50_us\":{raw_notify_p50},\"zk_set_notify_get_p50_us\":{raw_notify_get_p50},\
         \"zk_set_notify_get_p99_us\":{raw_notify_get_p99},\"set_p50_us\":{set_p50},\"set_p99_us\":{set_p99},\
         \"ratio_load_to_walk\":{:.2},\"ratio_update_to_rtt\":{:.2},\"ratio_update_to_set_notify_get\":{:.2}}}",
        W5_DIRS * (W5_LEAVES + 1),
        load_us as f64 / 1e3,
        load_min as f64 / 1e3,
        load_max as f64 / 1e3,
        raw.rtt_p50,
        raw_walk_us as f64 / 1e3,
        load_us as f64 / raw_walk_us.max(1) as f64,
        p50 as f64 / raw.rtt_p50.max(1) as f64,
        p50 as f64 / raw_notify_get_p50.max(1) as f64,
    )
}

// ---- W6 -----------------------------------------------------------------------------------------

/// Answers every task at once with [`W6_RESULT`].
struct W6Runner;

impl Actor for W6Runner {
    type Context = Context<Self>;
}

impl Handler<TaskAssigned> for W6Runner {
    type Result = TaskOutcome;

    fn handle(&mut self, _: TaskAssigned, _: &mut Context<Self>) -> TaskOutcome {
        W6_RESULT.to_vec().into()
    }
}

/// A step of one task, as the master's and the workers' events tell it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum W6Step {
    /// `MasterEvent::Assigned` (sent once every write of the master's pass has its reply).
    Assigned,
    /// `WorkerEvent::TaskStarted` (the assignment's payload was read; handed to the runner).
    Started,
    /// `WorkerEvent::TaskFinished` (the finishing `multi`'s reply came).
    Finished,
}

/// What the W6 subscriber saw (sent on with its arrival stamp).
enum W6Seen {
    Task(W6Step, TaskId),
    Rebuilt,
    WorkerJoined,
    /// Put back, discarded, failed, left, ended...: none should happen.
    Unexpected(String),
    Other,
}

/// Subscribes to the master and to every worker and forwards their events, stamped on arrival.
struct W6Subscriber {
    tx: tokio::sync::mpsc::UnboundedSender<(Instant, W6Seen)>,
}

impl Actor for W6Subscriber {
    type Context = Context<Self>;
}

impl Handler<MasterEvent> for W6Subscriber {
    type Result = ();

    fn handle(&mut self, event: MasterEvent, _: &mut Context<Self>) {
        let at = Instant::now();
        let seen = match event {
            MasterEvent::Assigned { task_id, .. } => W6Seen::Task(W6Step::Assigned, task_id),
            MasterEvent::Rebuilt { .. } => W6Seen::Rebuilt,
            MasterEvent::WorkerJoined { .. } => W6Seen::WorkerJoined,
            MasterEvent::MasterChanged { .. } | MasterEvent::BecameMaster { .. } => W6Seen::Other,
            other => W6Seen::Unexpected(format!("{other:?}")),
        };
        let _ = self.tx.send((at, seen));
    }
}

impl Handler<WorkerEvent> for W6Subscriber {
    type Result = ();

    fn handle(&mut self, event: WorkerEvent, _: &mut Context<Self>) {
        let at = Instant::now();
        let seen = match event {
            WorkerEvent::TaskStarted { task_id } => W6Seen::Task(W6Step::Started, task_id),
            WorkerEvent::TaskFinished { task_id } => W6Seen::Task(W6Step::Finished, task_id),
            WorkerEvent::Registered { .. } => W6Seen::Other,
            other => W6Seen::Unexpected(format!("{other:?}")),
        };
        let _ = self.tx.send((at, seen));
    }
}

/// One task of a W6 batch: when it was submitted, stored, and its result came.
struct W6Task {
    id: TaskId,
    submitted: Instant,
    stored: Instant,
    done: Instant,
    ok: bool,
}

/// Submits `n` tasks (every submission sent before any reply is awaited) and waits for each
/// result as soon as its submission is stored. Returns when they were started, and the tasks.
async fn w6_batch(client: &TaskClient, tag: &str, n: usize) -> (Instant, Vec<W6Task>) {
    let started = Instant::now();
    let runs: Vec<_> = (0..n)
        .map(|i| {
            let submitted = Instant::now();
            let submit = client.submit(format!("{tag}-{i}"));
            let client = client.clone();
            async move {
                let id = submit.await.expect("submitted");
                let stored = Instant::now();
                let result = client.result(&id, W6_TIMEOUT).await;
                let done = Instant::now();
                let ok = match result {
                    Ok(result) => result == W6_RESULT,
                    Err(error) => {
                        eprintln!("W6: no result for {id}: {error}");
                        false
                    }
                };
                W6Task { id, submitted, stored, done, ok }
            }
        })
        .collect();
    (started, futures::future::join_all(runs).await)
}

/// The raw floor of W6's writes: a bare client makes the protocol's 3 writes per task for `n`
/// tasks (multi(create task, create status); multi(delete task, create assignment);
/// multi(set status at version 0, delete assignment)), one wave after the other, every request
/// of a wave sent before any reply is awaited. Returns the elapsed time of the three waves.
async fn raw_task_writes(client: &zookeeper_client::Client, dir: &str, n: usize) -> Duration {
    use zookeeper_client::{Acls, CreateMode};

    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let (tasks, assign, status) = (format!("{dir}/tasks"), format!("{dir}/assign"), format!("{dir}/status"));
    for parent in [dir, tasks.as_str(), assign.as_str(), status.as_str()] {
        client.create(parent, b"", &persistent).await.expect("raw create a directory");
    }
    let started = Instant::now();
    let submits: Vec<_> = (0..n)
        .map(|i| {
            let mut multi = client.new_multi_writer();
            multi.add_create(&format!("{tasks}/t{i}"), b"payload", &persistent).expect("raw op");
            multi.add_create(&format!("{status}/t{i}"), b"", &persistent).expect("raw op");
            multi.commit()
        })
        .collect();
    for submit in futures::future::join_all(submits).await {
        submit.expect("raw submit multi");
    }
    let assigns: Vec<_> = (0..n)
        .map(|i| {
            let mut multi = client.new_multi_writer();
            multi.add_delete(&format!("{tasks}/t{i}"), None).expect("raw op");
            multi.add_create(&format!("{assign}/t{i}"), b"payload", &persistent).expect("raw op");
            multi.commit()
        })
        .collect();
    for assigned in futures::future::join_all(assigns).await {
        assigned.expect("raw assign multi");
    }
    let finishes: Vec<_> = (0..n)
        .map(|i| {
            let mut multi = client.new_multi_writer();
            multi.add_set_data(&format!("{status}/t{i}"), W6_RESULT, Some(0)).expect("raw op");
            multi.add_delete(&format!("{assign}/t{i}"), None).expect("raw op");
            multi.commit()
        })
        .collect();
    for finished in futures::future::join_all(finishes).await {
        finished.expect("raw finish multi");
    }
    started.elapsed()
}

/// Counters from the server's `mntr` (the first host of `connect`), if it answers and has them
/// all (ZooKeeper 3.6+): requests received, writes and reads processed, response bytes sent.
fn w6_counters(connect: &str) -> Option<[u64; 4]> {
    let host = connect.split(',').next()?.split('/').next()?;
    let mntr = testkit::mntr(host).ok()?;
    let value = |key: &str| {
        mntr.lines().find_map(|line| {
            let mut fields = line.split_whitespace();
            (fields.next()? == key).then_some(())?;
            fields.next()?.parse::<f64>().ok().map(|v| v as u64)
        })
    };
    Some([
        value("zk_packets_received")?,
        value("zk_cnt_updatelatency")?,
        value("zk_cnt_readlatency")?,
        value("zk_response_bytes")?,
    ])
}

/// Waits for the next W6 event; panics after `W6_TIMEOUT` (a bug, not a slow run).
async fn w6_next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<(Instant, W6Seen)>, waiting_for: &str) -> W6Seen {
    tokio::time::timeout(W6_TIMEOUT, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("W6: no {waiting_for} within {W6_TIMEOUT:?}"))
        .expect("W6: subscriber alive")
        .1
}

/// Per task, the arrival of each [`W6Step`] (indexed by the step).
type W6Steps = std::collections::HashMap<TaskId, [Option<Instant>; 3]>;

/// The events that arrived so far: per task, the arrival of each step; and the unexpected ones.
fn w6_drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<(Instant, W6Seen)>) -> (W6Steps, Vec<String>) {
    let mut steps = W6Steps::new();
    let mut unexpected = Vec::new();
    while let Ok((at, seen)) = rx.try_recv() {
        match seen {
            W6Seen::Task(step, id) => {
                let slot = &mut steps.entry(id).or_default()[step as usize];
                if slot.is_some() {
                    unexpected.push(format!("{step:?} twice"));
                }
                *slot = Some(at);
            }
            W6Seen::Unexpected(event) => unexpected.push(event),
            W6Seen::Rebuilt | W6Seen::WorkerJoined | W6Seen::Other => {}
        }
    }
    (steps, unexpected)
}

/// The longest pause between consecutive instants of `stamps`, in µs.
fn longest_gap(stamps: &mut [Instant]) -> u128 {
    stamps.sort_unstable();
    stamps.windows(2).map(|w| w[1].duration_since(w[0]).as_micros()).max().unwrap_or(0)
}

/// W6-backlog: what a master costs over a large backlog. 2,000 tasks of 10 KB (20 MB of
/// payloads) are queued with no master; then a master starts and rebuilds its view. Reports
/// what the server sent while it rebuilt (`zk_response_bytes`) and how much this process's
/// resident memory grew, next to the payloads' total: a master holds no payload.
async fn w6_backlog(connect: &str) -> String {
    const TASKS: usize = 2000;
    const PAYLOAD: usize = 10 * 1024;
    let root = testkit::unique_root("bench-w6-backlog");
    let session = start_session(connect, &root);
    let client = TaskClient::new(session.clone(), W6_ROOT).expect("client");
    for chunk in (0..TASKS).collect::<Vec<_>>().chunks(200) {
        let submits: Vec<_> = chunk.iter().map(|&i| client.submit(vec![(i % 251) as u8; PAYLOAD])).collect();
        for submitted in futures::future::join_all(submits).await {
            submitted.expect("submitted");
        }
    }
    let host = connect.split(',').next().unwrap_or(connect);
    let response_bytes = || {
        testkit::mntr(host)
            .ok()
            .and_then(|m| m.lines().find_map(|l| l.strip_prefix("zk_response_bytes")?.trim().parse::<u64>().ok()))
            .unwrap_or(0)
    };
    let master_session = start_session(connect, &root);
    master_session.exists("/").await.expect("session up");
    let (rss_before, bytes_before) = (rss_kib(), response_bytes());
    let (tx, rx) = futures::channel::oneshot::channel();
    let waiter = RebuiltWaiter(Some(tx)).start();
    let master = TaskMaster::new(master_session.clone(), TaskMasterConfig::new(W6_ROOT).with_master_id("m"))
        .expect("master")
        .start();
    master.do_send(SubscribeMaster { recipient: waiter.clone().recipient() });
    let pending = tokio::time::timeout(W6_TIMEOUT, rx).await.expect("rebuilt in time").expect("waiter alive");
    let (rss_after, bytes_after) = (rss_kib(), response_bytes());
    let growth = rss_after.zip(rss_before).map_or(-1, |(a, b)| a as i64 - b as i64);
    let sent = bytes_after.saturating_sub(bytes_before);
    eprintln!(
        "W6-backlog: a master rebuilt over {pending} waiting tasks ({} KB of payloads): the server sent {} KB, \
         resident memory grew {growth} KiB",
        TASKS * PAYLOAD / 1024,
        sent / 1024
    );
    drop(master);
    master_session.close().await;
    session.close().await;
    format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W6-backlog\",\"tasks\":{TASKS},\"payload_bytes\":{},\"pending_seen\":{pending},\
         \"rebuild_response_bytes\":{sent},\"rss_growth_kib\":{growth}}}",
        TASKS * PAYLOAD
    )
}

/// Tells once how many tasks a master's rebuilt view holds.
struct RebuiltWaiter(Option<futures::channel::oneshot::Sender<usize>>);

impl Actor for RebuiltWaiter {
    type Context = Context<Self>;
}

impl Handler<MasterEvent> for RebuiltWaiter {
    type Result = ();

    fn handle(&mut self, event: MasterEvent, _: &mut Context<Self>) {
        if let MasterEvent::Rebuilt { pending, .. } = event {
            if let Some(tx) = self.0.take() {
                let _ = tx.send(pending);
            }
        }
    }
}

async fn w6(connect: &str) -> String {
    let root = testkit::unique_root("bench-w6");
    eprintln!("W6: root {root}");
    let raw = raw_baseline(connect, &root).await;
    let n_workers = env_usize("W6_WORKERS", W6_WORKERS).max(1);
    let concurrency = env_usize("W6_CONCURRENCY", W6_CONCURRENCY).max(1);

    let raw_client = zookeeper_client::Client::connect(connect).await.expect("raw client connects");
    raw_task_writes(&raw_client, &format!("{root}/floor-warm-up"), W6_WARMUP).await;
    let floor = raw_task_writes(&raw_client, &format!("{root}/floor"), W6_TASKS).await;
    drop(raw_client);
    let floor_per_s = per_second(W6_TASKS, floor);
    eprintln!(
        "raw zookeeper-client: the 3 writes of {W6_TASKS} tasks in 3 pipelined waves: {:.1} ms ({floor_per_s:.1} \
         tasks/s, {:.1} multis/s)",
        floor.as_secs_f64() * 1e3,
        3.0 * floor_per_s,
    );

    // Every role on its own session, up before anything starts.
    let master_session = start_session(connect, &root);
    let worker_sessions: Vec<SessionHandle> = (0..n_workers).map(|_| start_session(connect, &root)).collect();
    let client_session = start_session(connect, &root);
    for session in std::iter::once(&master_session).chain(&worker_sessions).chain([&client_session]) {
        session.exists("/").await.expect("session up");
    }

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let subscriber = W6Subscriber { tx }.start();
    let master = TaskMaster::new(master_session.clone(), TaskMasterConfig::new(W6_ROOT).with_master_id("m"))
        .expect("a valid master config")
        .start();
    master.do_send(SubscribeMaster { recipient: subscriber.clone().recipient() });
    let workers: Vec<Addr<TaskWorker>> = worker_sessions
        .iter()
        .enumerate()
        .map(|(w, session)| {
            let config = TaskWorkerConfig::new(W6_ROOT, format!("w{w}")).with_concurrency(concurrency);
            let worker =
                TaskWorker::new(session.clone(), config, W6Runner.start().recipient()).expect("a valid worker config");
            let worker = worker.start();
            worker.do_send(SubscribeWorker { recipient: subscriber.clone().recipient() });
            worker
        })
        .collect();
    // The master's view holds every worker before any task is submitted.
    let (mut rebuilt, mut joined) = (false, 0);
    while !rebuilt || joined < n_workers {
        match w6_next(&mut rx, "rebuilt view with every worker").await {
            W6Seen::Rebuilt => rebuilt = true,
            W6Seen::WorkerJoined => joined += 1,
            W6Seen::Unexpected(event) => panic!("W6: unexpected event while starting: {event}"),
            W6Seen::Task(..) | W6Seen::Other => {}
        }
    }
    let client = TaskClient::new(client_session.clone(), W6_ROOT).expect("a valid client");

    eprintln!(
        "W6: {n_workers} workers x concurrency {concurrency}; {W6_WARMUP} warm-up then {W6_TASKS} measured tasks"
    );
    let (_, warm_up) = w6_batch(&client, "warm-up", W6_WARMUP).await;
    assert!(warm_up.iter().all(|t| t.ok), "W6: every warm-up task has its result");
    tokio::time::sleep(W6_LINGER).await;
    let (_, unexpected) = w6_drain(&mut rx);
    assert!(unexpected.is_empty(), "W6: unexpected events during the warm-up: {unexpected:?}");

    let counters_before = w6_counters(connect);
    let (started, tasks) = w6_batch(&client, "task", W6_TASKS).await;
    // Per task: requests received, writes, reads, response bytes (-1: not known).
    let [requests, writes, reads, response_bytes] = match counters_before.zip(w6_counters(connect)) {
        Some((before, after)) => std::array::from_fn(|i| (after[i] - before[i]) as f64 / W6_TASKS as f64),
        None => [-1.0; 4],
    };
    tokio::time::sleep(W6_LINGER).await;
    let (steps, unexpected) = w6_drain(&mut rx);

    let failed = tasks.iter().filter(|t| !t.ok).count();
    let last_stored = tasks.iter().map(|t| t.stored).max().expect("tasks");
    let last_done = tasks.iter().map(|t| t.done).max().expect("tasks");
    let (submit_elapsed, elapsed) = (last_stored - started, last_done - started);
    let tasks_per_s = per_second(W6_TASKS, elapsed);
    let submit_per_s = per_second(W6_TASKS, submit_elapsed);
    let since_submit = |t: &W6Task, at: Instant| at.duration_since(t.submitted).as_micros();
    let mut latencies: Vec<u128> = tasks.iter().map(|t| since_submit(t, t.done)).collect();
    let mut stores: Vec<u128> = tasks.iter().map(|t| since_submit(t, t.stored)).collect();
    // Per step, the time from each task's submit to its event, and from its `TaskStarted` to its
    // result (tasks whose event is missing are left out and counted).
    let mut missing = 0;
    let mut by_step: [Vec<u128>; 3] = Default::default();
    let mut step_stamps: [Vec<Instant>; 3] = Default::default();
    let mut runs = Vec::with_capacity(W6_TASKS);
    for task in &tasks {
        let stamps = steps.get(&task.id).copied().unwrap_or_default();
        for (step, stamp) in stamps.iter().enumerate() {
            match stamp {
                Some(at) => {
                    by_step[step].push(since_submit(task, *at));
                    step_stamps[step].push(*at);
                }
                None => missing += 1,
            }
        }
        if let Some(at) = stamps[W6Step::Started as usize] {
            runs.push(task.done.saturating_duration_since(at).as_micros());
        }
    }
    let p_of = |samples: &mut Vec<u128>, p: f64| if samples.is_empty() { 0 } else { percentile(samples, p) };
    let [assigned_p50, started_p50, finished_p50] = by_step.each_mut().map(|samples| p_of(samples, 50.0));
    let (run_p50, run_p99) = (p_of(&mut runs, 50.0), p_of(&mut runs, 99.0));
    let stored_p50 = percentile(&mut stores, 50.0);
    let (p50, p99) = (percentile(&mut latencies, 50.0), percentile(&mut latencies, 99.0));
    // The drain once every submission is stored: results from then on, per second.
    let drained = tasks.iter().filter(|t| t.done > last_stored).count();
    let drain_per_s = per_second(drained, last_done - last_stored);
    let mut results_at: Vec<Instant> = tasks.iter().map(|t| t.done).collect();
    let result_gap = longest_gap(&mut results_at);
    let assign_gap = longest_gap(&mut step_stamps[W6Step::Assigned as usize]);
    // Bursts of `Assigned` events: a master pass tells its assignments together, once every write
    // of the pass has its reply, so this approximates the passes that assigned something.
    let assigned_at = &step_stamps[W6Step::Assigned as usize];
    let bursts = assigned_at.windows(2).filter(|w| w[1].duration_since(w[0]) > W6_BURST_GAP).count()
        + usize::from(!assigned_at.is_empty());
    let ms = |us: u128| us as f64 / 1e3;
    eprintln!(
        "W6: {tasks_per_s:.1} tasks/s ({:.0} ms; every submission stored after {:.0} ms, {submit_per_s:.1}/s; \
         {drained} results after that at {drain_per_s:.1}/s); per task p50 {:.2} ms, p99 {:.2} ms; from submit, \
         p50: stored {:.2} ms, assigned (event) {:.2} ms, started {:.2} ms, finished {:.2} ms, result {:.2} ms; \
         started -> result p50 {:.2} ms, p99 {:.2} ms; longest pause between results {:.1} ms, between \
         assignments {:.1} ms; assignments came in {bursts} bursts ({:.1} per burst); {failed} failed, {missing} \
         events missing, {} unexpected events; per task the server received {requests:.2} requests, made {writes:.2} \
         writes and {reads:.2} reads and sent {response_bytes:.0} bytes of responses",
        elapsed.as_secs_f64() * 1e3,
        submit_elapsed.as_secs_f64() * 1e3,
        ms(p50),
        ms(p99),
        ms(stored_p50),
        ms(assigned_p50),
        ms(started_p50),
        ms(finished_p50),
        ms(p50),
        ms(run_p50),
        ms(run_p99),
        ms(result_gap),
        ms(assign_gap),
        assigned_at.len() as f64 / bursts.max(1) as f64,
        unexpected.len(),
    );
    for event in unexpected.iter().take(10) {
        eprintln!("W6: unexpected event: {event}");
    }
    let per_bucket = |stamps: &[Instant]| {
        let mut counts = vec![0usize; elapsed.as_millis() as usize / W6_BUCKET_MS + 1];
        for at in stamps {
            let bucket = at.saturating_duration_since(started).as_millis() as usize / W6_BUCKET_MS;
            let last = counts.len() - 1;
            counts[bucket.min(last)] += 1;
        }
        counts.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" ")
    };
    let stored_at: Vec<Instant> = tasks.iter().map(|t| t.stored).collect();
    eprintln!(
        "W6: per {W6_BUCKET_MS} ms from the first submit: stored [{}], assigned [{}], finished [{}], results [{}]",
        per_bucket(&stored_at),
        per_bucket(&step_stamps[W6Step::Assigned as usize]),
        per_bucket(&step_stamps[W6Step::Finished as usize]),
        per_bucket(&results_at),
    );
    if failed > 0 {
        eprintln!("W6: overview after the run: {:?}", client.overview().await);
    }

    // One task at a time: the latency of a task that does not queue.
    let mut singles = Vec::with_capacity(W6_SINGLES);
    for i in 0..W6_SINGLES {
        let (_, single) = w6_batch(&client, &format!("single-{i}"), 1).await;
        assert!(single[0].ok, "W6: the single task has its result");
        singles.push(single[0].done.duration_since(single[0].submitted).as_micros());
    }
    let (single_p50, single_p99) = (percentile(&mut singles, 50.0), percentile(&mut singles, 99.0));
    eprintln!(
        "W6: {W6_SINGLES} tasks one at a time: submit -> result p50 {:.2} ms, p99 {:.2} ms",
        ms(single_p50),
        ms(single_p99)
    );

    for worker in &workers {
        worker.send(StopWorker).await.expect("worker alive");
    }
    master.send(StopMaster).await.expect("master alive");
    drop(subscriber);
    for session in std::iter::once(&master_session).chain(&worker_sessions).chain([&client_session]) {
        session.close().await;
    }

    let task_us = 1e6 / tasks_per_s;
    format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W6\",\"tasks\":{W6_TASKS},\"workers\":{n_workers},\
         \"concurrency\":{concurrency},\"tasks_per_s\":{tasks_per_s:.1},\"submit_per_s\":{submit_per_s:.1},\
         \"p50_ms\":{:.2},\"p99_ms\":{:.2},\"elapsed_ms\":{:.1},\"submit_ms\":{:.1},\
         \"drain_per_s\":{drain_per_s:.1},\"failed\":{failed},\"unexpected_events\":{},\"stored_p50_ms\":{:.2},\
         \"assigned_p50_ms\":{:.2},\"started_p50_ms\":{:.2},\"finished_p50_ms\":{:.2},\"run_p50_ms\":{:.2},\
         \"run_p99_ms\":{:.2},\"result_gap_max_ms\":{:.1},\"assign_bursts\":{bursts},\
         \"zk_requests_per_task\":{requests:.2},\"zk_writes_per_task\":{writes:.2},\
         \"zk_reads_per_task\":{reads:.2},\"zk_response_bytes_per_task\":{response_bytes:.0},\
         \"zk_rtt_p50_us\":{},\"zk_create_p50_us\":{},\"zk_floor_ms\":{:.1},\
         \"zk_floor_tasks_per_s\":{floor_per_s:.1},\"ratio_task_to_rtt\":{:.2},\"ratio_p50_to_rtt\":{:.2},\
         \"ratio_run_p50_to_rtt\":{:.2},\"ratio_elapsed_to_floor\":{:.2},\"single_p50_ms\":{:.2},\
         \"single_p99_ms\":{:.2},\"ratio_single_p50_to_rtt\":{:.2}}}",
        ms(p50),
        ms(p99),
        elapsed.as_secs_f64() * 1e3,
        submit_elapsed.as_secs_f64() * 1e3,
        unexpected.len(),
        ms(stored_p50),
        ms(assigned_p50),
        ms(started_p50),
        ms(finished_p50),
        ms(run_p50),
        ms(run_p99),
        ms(result_gap),
        raw.rtt_p50,
        raw.create_p50,
        floor.as_secs_f64() * 1e3,
        task_us / raw.rtt_p50.max(1) as f64,
        p50 as f64 / raw.rtt_p50.max(1) as f64,
        run_p50 as f64 / raw.rtt_p50.max(1) as f64,
        elapsed.as_secs_f64() / floor.as_secs_f64(),
        ms(single_p50),
        ms(single_p99),
        single_p50 as f64 / raw.rtt_p50.max(1) as f64,
    )
}
