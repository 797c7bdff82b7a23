//! Lock, leader election, queue, cache and master–worker benchmark against a real ZooKeeper server
//! (see `docs/performance.md`).
//!
//! ```text
//! cargo bench --features testkit --bench recipes -- [W1|W2|W3|W4|W5|W6|W7|W8|W9|W10|W11|all]...
//! ```
//!
//! This file only selects and runs workloads; each workload is a file of its own under
//! `benches/recipes/` (`w1_lock_cycle.rs`, ...), the server, sessions, raw yardsticks and
//! percentiles are in `harness.rs`, and the bare client's lock in `bare_lock.rs`. A new workload
//! is a new file and one line in [`WORKLOADS`]; it prints one JSON line per result with the
//! yardsticks of its own run.
//!
//! - **W1**: one session, one [`LockActor`], 500 warm-up then 2000 × (acquire; release), once with
//!   the release awaited and once pipelined (`do_send(Release)` followed at once by the next
//!   `Acquire`, both queued in order on the one session).
//! - **W2**: 8 sessions, 8 lock actors on one lock, 2000 acquisitions in total; mutual exclusion
//!   judged from the logged holds (`testkit::HoldLog`).
//! - **W7**: 1,000 lock actors over 10 sessions in line on one lock, each acquiring and
//!   releasing once: grants per second once everyone is in line, watchers woken per release and
//!   requests per grant (the server's `mntr` counters), and the resident memory of 1,000 waiting
//!   `LockActor`s and of 1,000 idle `ElectionActor`s (`W7-memory`).
//! - W1 and W2 also run the same-run yardstick of the bare client's own lock (`Client::lock`
//!   with Curator's prefix, released by an awaited delete): one client for W1, 8 for W2, the
//!   same numbers of acquisitions (`bare_lock_acq_per_s`, `ratio_to_bare_lock`), and the
//!   protocol's floor (`floor_lock.rs`: the fewest round trips any Curator-compatible lock can
//!   make, on the caller's thread; `floor_acq_per_s`, `floor_ratio_to_bare_lock`). W2 also runs
//!   the safe floor (`safe_floor_acq_per_s`, `ratio_to_safe_floor`): the same with a waiter's
//!   own-node watch, the fewest requests of a lock that stays exclusive when a waiter's node is
//!   deleted by someone else; and that safe floor with each client, its connection and its loop
//!   on a thread of its own, as eight processes would run (`thread_each_floor_acq_per_s`,
//!   `ratio_to_thread_each_floor`); and that again with an actix actor per client, on the
//!   client's thread, running the protocol for its loop's acquire and release messages: what any
//!   lock with an actor per client costs, with nothing of ours (`actor_each_floor_acq_per_s`,
//!   `ratio_to_actor_each_floor`). W1 runs that actor floor with one client, as our lock actor
//!   and its caller run on the session's thread (`actor_floor_acq_per_s`, `ratio_to_actor_floor`).
//! - **W3**: leader election hand-off: 3 [`ElectionActor`]s on 3 sessions; the leader resigns
//!   (`Resign { requeue: true }`) 5 warm-up then 50 measured times, each timed from just before
//!   the `Resign` is sent to the next leader's `LeadershipAcquired` reaching its subscriber,
//!   each after 20 ms of quiet. `ratio_to_floor` is over the raw delete → notification p50
//!   sampled after the same quiet (`zk_delete_notify_p50_us`); `ratio_to_warm_floor` over the
//!   same floor sampled back to back (`zk_delete_notify_warm_p50_us`, the floor before session 13).
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
//! - **W8**: the distributed atomic long: 1,000 sequential increments (each a read and a write
//!   at the version read) against the same protocol made by a bare client, in 5 alternated
//!   rounds (`increment_p50_us`, `raw_increment_p50_us`, `ratio_to_raw`); and 8 clients
//!   incrementing one value 1,000 times in all, ours against bare (`contended_ratio_to_raw`).
//!
//! - **W9**: service discovery: 300 × 3 alternated rounds of register then unregister against a
//!   raw ephemeral create then delete of the same JSON (`register_ratio_to_raw`,
//!   `unregister_ratio_to_raw`); a service of 1,000 instances: a cache's first load against the
//!   raw listing (getChildren, every getData pipelined; `load_ratio_to_listing`), the resident
//!   memory 5 such caches add per instance (`cache_bytes_per_instance`), and 200 updates timed to
//!   the cache's `InstanceUpdated` against the raw setData → notification → getData floor
//!   (`update_ratio_to_raw`).
//!
//! - **W10**: delayed queue items: 200 items due 300–1,500 ms after they are put, one consumer
//!   (concurrency 8): lateness after the due time (p50, p99) against a bare client that sleeps
//!   until each due time, then lists and reads (`ratio_to_bare_p50`, `ratio_to_bare_p99`).
//!
//! - **W11**: what no peer has: 300 proclaims each timed to an observer's event against the raw
//!   setData → one-shot NodeDataChanged → getData floor (`proclaim_ratio_to_raw`); a tree cache
//!   of 1,001 nodes through a proxy answering as a server without persistent watches (the
//!   one-shot fallback) against the same cache through a plain proxy, load and set →
//!   `NodeUpdated` (`fallback_load_ratio`, `fallback_update_ratio`); and a health snapshot of a
//!   session with 1,000 held locks: bytes per recipe and the time to build one against an
//!   `exists` round trip (`snapshot_ratio_to_rtt`).
//!
//! `ZK_ENSEMBLE=3` runs the workloads on a 3-member testkit ensemble (every member with the
//! benchmark's server options) instead of a standalone server; a first JSON line names the
//! server (`"workload":"server"`). On an ensemble the raw create/delete are quorum writes (the
//! yardstick), and the `mntr` counters some workloads report are the first member's only.
//!
//! Each workload also measures raw `zookeeper_client` round trips (ephemeral create, delete,
//! `exists`) in the same run, as the yardstick; W3 also measures the raw floor of a hand-off (one
//! client deletes a node, another receives the `NodeDeleted` of its `exists` watch). One JSON line
//! per result goes to stdout; progress goes to stderr. With `ZK=host:port` set, that server is
//! used instead of starting one.

mod bare_lock;
mod floor_lock;
mod harness;
mod w10_delayed;
mod w11_no_peer;
mod w1_lock_cycle;
mod w2_lock_contention;
mod w3_election_handoff;
mod w4_queue;
mod w5_cache;
mod w6_master_worker;
mod w7_many_waiters;
mod w8_atomic;
mod w9_discovery;

// Only its Curator classpath is used (by W4; the file allows its own dead code).
#[path = "../../tests/common/curator.rs"]
mod curator;

use actix_zookeeper::testkit::ZkEnsemble;
use futures::future::LocalBoxFuture;
use harness::{ServerOptions, ZkServer};

/// Runs one workload against the server at the connect string; answers its JSON lines.
type Run = fn(String) -> LocalBoxFuture<'static, Vec<String>>;

/// Every workload, in the order `all` runs them: the name on the command line and what runs it.
/// A new workload is a new file and one line here.
const WORKLOADS: &[(&str, Run)] = &[
    ("W1", |c| Box::pin(async move { w1_lock_cycle::w1(&c).await })),
    ("W2", |c| Box::pin(async move { w2_lock_contention::w2(&c).await })),
    // Participants started by hand on this thread, then on their sessions' threads with their
    // observers, then as `ElectionHandle` places them (participant there, observer here).
    ("W3", |c| {
        use w3_election_handoff::{Placement, w3};
        Box::pin(async move {
            vec![
                w3(&c, Placement::Default).await,
                w3(&c, Placement::SessionThread).await,
                w3(&c, Placement::Handle).await,
            ]
        })
    }),
    ("W4", |c| Box::pin(async move { w4_queue::w4(&c).await })),
    ("W5", |c| Box::pin(async move { vec![w5_cache::w5(&c).await] })),
    ("W6", |c| Box::pin(async move { vec![w6_master_worker::w6(&c).await, w6_master_worker::w6_backlog(&c).await] })),
    ("W7", |c| Box::pin(async move { w7_many_waiters::w7(&c).await })),
    ("W8", |c| Box::pin(async move { w8_atomic::w8(&c).await })),
    ("W9", |c| Box::pin(async move { w9_discovery::w9(&c).await })),
    ("W10", |c| Box::pin(async move { w10_delayed::w10(&c).await })),
    ("W11", |c| Box::pin(async move { w11_no_peer::w11(&c).await })),
];

/// The server the workloads run against, kept (and stopped) by `main`.
enum Server {
    External,
    Standalone(#[allow(dead_code)] ZkServer),
    Ensemble(#[allow(dead_code)] ZkEnsemble),
}

fn main() {
    let selected = parse_workloads();
    // Diagnostics only: `RUST_LOG=actix_zookeeper=debug` prints every recipe step with its time.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .with_thread_names(true)
            .with_timer(tracing_subscriber::fmt::time::uptime())
            .init();
    }

    let external = std::env::var("ZK").ok().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let members = std::env::var("ZK_ENSEMBLE").ok().and_then(|n| n.trim().parse::<usize>().ok()).filter(|n| *n > 1);
    let (server, connect, kind) = match (external, members) {
        (Some(connect), _) => {
            eprintln!("using the ZooKeeper server at {connect} (from $ZK)");
            (Server::External, connect, "external".to_owned())
        }
        (None, Some(members)) => {
            let ensemble = ZkEnsemble::start_with(members, ServerOptions::benchmark())
                .expect("start a ZooKeeper ensemble (apt-get install zookeeper)");
            let connect = ensemble.connect_string();
            eprintln!("started a {members}-member ZooKeeper ensemble at {connect}");
            (Server::Ensemble(ensemble), connect, format!("ensemble-{members}"))
        }
        (None, None) => {
            let server = ZkServer::start_with(ServerOptions::benchmark())
                .expect("start ZooKeeper (apt-get install zookeeper, or set ZK=host:port)");
            eprintln!("started ZooKeeper at {} (dir {})", server.connect_string(), server.dir().display());
            let connect = server.connect_string();
            (Server::Standalone(server), connect, "standalone".to_owned())
        }
    };
    // Which server the lines that follow were measured on.
    println!("{{\"lib\":\"{}\",\"workload\":\"server\",\"server\":\"{kind}\"}}", harness::LIB);

    actix::System::new().block_on(async move {
        for (_, run) in selected {
            for line in run(connect.clone()).await {
                println!("{line}");
            }
        }
    });

    drop(server);
}

/// The workloads named on the command line (`W1` … or `all`, the default); cargo's own flags
/// (`--bench`, ...) are ignored.
fn parse_workloads() -> Vec<(&'static str, Run)> {
    let mut selected = Vec::new();
    for arg in std::env::args().skip(1).filter(|a| !a.starts_with("--")) {
        if arg.eq_ignore_ascii_case("all") {
            selected.extend_from_slice(WORKLOADS);
            continue;
        }
        match WORKLOADS.iter().find(|(name, _)| name.eq_ignore_ascii_case(&arg)) {
            Some(workload) => selected.push(*workload),
            None => {
                let names: Vec<&str> = WORKLOADS.iter().map(|(name, _)| *name).collect();
                eprintln!("unknown workload {arg:?}; expected one of {names:?} or all");
                std::process::exit(2);
            }
        }
    }
    if selected.is_empty() {
        selected.extend_from_slice(WORKLOADS);
    }
    selected
}
