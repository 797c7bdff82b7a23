//! W1: one lock actor's acquire/release cycle, the release awaited or pipelined.
//! One workload of the recipe benchmark (`main.rs`); the shared harness is `harness.rs`.

use super::bare_lock::{self, ClientThread};
use super::floor_lock::{self, Floor, Placement};
use super::harness::*;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ReleaseMode {
    /// `lock.send(Release).await`, then the next acquire.
    Awaited,
    /// `lock.do_send(Release)`, then at once the next acquire.
    Pipelined,
}

/// One W1 cycle; returns (acquire, release) in microseconds.
pub(crate) async fn cycle(lock: &Addr<LockActor>, mode: ReleaseMode) -> (u128, u128) {
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

/// One step of a W1 round.
#[derive(Clone, Copy)]
enum Step {
    Bare,
    BareHop,
    Floor,
    ActorFloor,
    Awaited,
    Pipelined,
    SessionThread,
}

pub(crate) const W1_WARMUP: usize = 500;
pub(crate) const W1_ITERATIONS: usize = 2000;
/// Interleaved rounds of the yardstick and the lock actor; medians are reported.
pub(crate) const W1_ROUNDS: usize = 5;

/// One measured pass of the lock actor in one release mode.
#[derive(Clone)]
struct Pass {
    acq_per_s: f64,
    acquires: Vec<u128>,
    releases: Vec<u128>,
    requests_per_cycle: f64,
    cpu_us_per_cycle: f64,
}

async fn pass(connect: &str, lock: &Addr<LockActor>, mode: ReleaseMode) -> Pass {
    for _ in 0..W1_WARMUP {
        cycle(lock, mode).await;
    }
    let mut acquires = Vec::with_capacity(W1_ITERATIONS);
    let mut releases = Vec::with_capacity(W1_ITERATIONS);
    let packets = packets_received(connect).unwrap_or(0);
    let cpu = cpu_us();
    let started = Instant::now();
    for _ in 0..W1_ITERATIONS {
        let (a, r) = cycle(lock, mode).await;
        acquires.push(a);
        releases.push(r);
    }
    let elapsed = started.elapsed();
    let cpu_us_per_cycle = (cpu_us() - cpu) as f64 / W1_ITERATIONS as f64;
    // Every request of the session (pings included) per cycle, from the server's counter.
    let requests = packets_received(connect).unwrap_or(0).saturating_sub(packets);
    Pass {
        acq_per_s: per_second(W1_ITERATIONS, elapsed),
        acquires,
        releases,
        requests_per_cycle: requests as f64 / W1_ITERATIONS as f64,
        cpu_us_per_cycle,
    }
}

pub(crate) async fn w1(connect: &str) -> Vec<String> {
    let root = testkit::unique_root("bench-w1");
    eprintln!("W1: root {root}");
    let raw = raw_baseline(connect, &root).await;

    let session = start_session(connect, &root);
    session.ensure_path("/bench").await.expect("ensure /bench");
    let lock = LockActor::new(session.clone(), LockConfig::new("/bench/lock")).start();
    // The opt-in: the lock actor and its caller on the session's own thread
    // (`SessionHandle::arbiter`), so that no reply crosses threads.
    let session_thread = session.arbiter().expect("the session runs").clone();
    let on_session_thread = {
        let session = session.clone();
        LockActor::start_in_arbiter(&session_thread, move |_| {
            LockActor::new(session, LockConfig::new("/bench/lock-session-thread"))
        })
    };
    // What one request costs through our session (its Arbiter, the request message, the reply),
    // beside the raw `exists` of the same run.
    for _ in 0..RAW_WARMUP {
        session.exists("/bench").await.expect("session exists");
    }
    let mut session_rtts = Vec::with_capacity(RAW_OPS);
    for _ in 0..RAW_OPS {
        let t = Instant::now();
        session.exists("/bench").await.expect("session exists");
        session_rtts.push(micros(t));
    }
    let session_rtt_p50 = percentile(&mut session_rtts, 50.0);

    // Interleaved rounds, so that the server's warm-up (its JIT) favours nobody: in each round
    // the bare client's lock (on the caller's thread, then with its connection on an Arbiter of
    // its own, as our sessions run), then the lock actor awaited, then pipelined. Medians are
    // reported, with every round's rate.
    let (mut bare, mut bare_hop, mut bare_cpu, mut floor) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut actor_floor = Vec::new();
    let mut passes: [Vec<Pass>; 2] = [Vec::new(), Vec::new()];
    let mut session_thread_passes: Vec<Pass> = Vec::new();
    for round in 0..W1_ROUNDS {
        eprintln!("W1: round {} of {W1_ROUNDS}", round + 1);
        let dir = |what: &str| format!("{root}/{what}-{round}");
        let steps = [
            Step::Bare,
            Step::BareHop,
            Step::Floor,
            Step::ActorFloor,
            Step::Awaited,
            Step::Pipelined,
            Step::SessionThread,
        ];
        for step in rotated(steps, round) {
            match step {
                Step::Bare => {
                    let thread = ClientThread::Caller;
                    let run = bare_lock::run(connect, &dir("bare"), 1, W1_WARMUP, W1_ITERATIONS, thread).await;
                    bare.push(run.acq_per_s);
                    bare_cpu.push(run.cpu_us_per_acq);
                }
                Step::BareHop => {
                    let thread = ClientThread::OwnArbiter;
                    let run = bare_lock::run(connect, &dir("bare-hop"), 1, W1_WARMUP, W1_ITERATIONS, thread).await;
                    bare_hop.push(run.acq_per_s);
                }
                Step::Floor => {
                    let (kind, placement) = (Floor::Fewest, Placement::Caller);
                    let dir = dir("floor");
                    floor.push(floor_lock::run(connect, &dir, 1, W1_WARMUP, W1_ITERATIONS, kind, placement).await);
                }
                Step::ActorFloor => {
                    // The client, an actor running the floor's protocol and the loop on a thread
                    // of their own, as our lock actor and caller run on the session's thread.
                    let (kind, placement) = (Floor::Fewest, Placement::ActorEach);
                    let dir = dir("actor-floor");
                    let run = floor_lock::run(connect, &dir, 1, W1_WARMUP, W1_ITERATIONS, kind, placement);
                    actor_floor.push(run.await);
                }
                Step::Awaited => passes[0].push(pass(connect, &lock, ReleaseMode::Awaited).await),
                Step::Pipelined => passes[1].push(pass(connect, &lock, ReleaseMode::Pipelined).await),
                Step::SessionThread => {
                    let (done, measured) = futures::channel::oneshot::channel();
                    let (connect, lock) = (connect.to_owned(), on_session_thread.clone());
                    session_thread.spawn(async move {
                        let _ = done.send(pass(&connect, &lock, ReleaseMode::Awaited).await);
                    });
                    session_thread_passes.push(measured.await.expect("a pass on the session's thread"));
                }
            }
        }
    }
    let (_, bare_median) = median(&bare);
    let (_, bare_hop_median) = median(&bare_hop);
    let (_, bare_cpu_median) = median(&bare_cpu);
    let (_, floor_median) = median(&floor);
    let (_, actor_floor_median) = median(&actor_floor);

    let mut lines = Vec::new();
    let [awaited, pipelined] = passes;
    let runs = [("awaited", awaited), ("pipelined", pipelined), ("awaited-on-session-thread", session_thread_passes)];
    for (mode, mut passes) in runs {
        let all: Vec<f64> = passes.iter().map(|p| p.acq_per_s).collect();
        let (i, acq_per_s) = median(&all);
        let cpu: Vec<f64> = passes.iter().map(|p| p.cpu_us_per_cycle).collect();
        let (_, cpu_median) = median(&cpu);
        let chosen = &mut passes[i];
        let cycle_us = 1e6 / acq_per_s;
        lines.push(format!(
            "{{\"lib\":\"{LIB}\",\"workload\":\"W1\",\"release\":\"{}\",\"iterations\":{W1_ITERATIONS},\
             \"rounds\":{W1_ROUNDS},\"acq_per_s\":{acq_per_s:.1},\"acq_per_s_rounds\":{},\
             \"acquire_p50_us\":{},\"acquire_p99_us\":{},\"release_p50_us\":{},\"release_p99_us\":{},\
             \"zk_create_p50_us\":{},\"zk_delete_p50_us\":{},\"zk_rtt_p50_us\":{},\"ratio_cycle_to_rtt\":{:.2},\
             \"bare_lock_acq_per_s\":{bare_median:.1},\"bare_lock_rounds\":{},\"ratio_to_bare_lock\":{:.2},\
             \"bare_lock_own_thread_acq_per_s\":{bare_hop_median:.1},\"bare_lock_own_thread_rounds\":{},\
             \"zk_requests_per_cycle\":{:.2},\"session_rtt_p50_us\":{session_rtt_p50},\
             \"cpu_us_per_cycle\":{:.0},\"bare_lock_cpu_us_per_cycle\":{bare_cpu_median:.0},\
             \"floor_acq_per_s\":{floor_median:.1},\"floor_rounds\":{},\"floor_ratio_to_bare_lock\":{:.2},\
             \"ratio_to_floor\":{:.2},\"actor_floor_acq_per_s\":{actor_floor_median:.1},\"actor_floor_rounds\":{},\
             \"ratio_to_actor_floor\":{:.2}}}",
            mode,
            rates(&all),
            percentile(&mut chosen.acquires, 50.0),
            percentile(&mut chosen.acquires, 99.0),
            percentile(&mut chosen.releases, 50.0),
            percentile(&mut chosen.releases, 99.0),
            raw.create_p50,
            raw.delete_p50,
            raw.rtt_p50,
            cycle_us / raw.rtt_p50.max(1) as f64,
            rates(&bare),
            acq_per_s / bare_median,
            rates(&bare_hop),
            chosen.requests_per_cycle,
            cpu_median,
            rates(&floor),
            floor_median / bare_median,
            acq_per_s / floor_median,
            rates(&actor_floor),
            acq_per_s / actor_floor_median,
        ));
    }

    drop(lock);
    drop(on_session_thread);
    session.close().await;
    lines
}
