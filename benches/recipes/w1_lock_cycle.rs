//! W1: one lock actor's acquire/release cycle, the release awaited or pipelined.
//! One workload of the recipe benchmark (`main.rs`); the shared harness is `harness.rs`.

use super::bare_lock::{self, ClientThread};
use super::harness::*;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ReleaseMode {
    /// `lock.send(Release).await`, then the next acquire.
    Awaited,
    /// `lock.do_send(Release)`, then at once the next acquire.
    Pipelined,
}

impl ReleaseMode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ReleaseMode::Awaited => "awaited",
            ReleaseMode::Pipelined => "pipelined",
        }
    }
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

pub(crate) const W1_WARMUP: usize = 500;
pub(crate) const W1_ITERATIONS: usize = 2000;

pub(crate) async fn w1(connect: &str) -> Vec<String> {
    let root = testkit::unique_root("bench-w1");
    eprintln!("W1: root {root}");
    let raw = raw_baseline(connect, &root).await;

    let session = start_session(connect, &root);
    session.ensure_path("/bench").await.expect("ensure /bench");
    let lock = LockActor::new(session.clone(), LockConfig::new("/bench/lock")).start();

    // The yardstick first, on the same server, before the lock actor's cycles.
    eprintln!("W1: the bare client's lock, {W1_WARMUP} warm-up then {W1_ITERATIONS} cycles");
    let bare = bare_lock::acquisitions_per_second(
        connect,
        &format!("{root}/bare"),
        1,
        W1_WARMUP,
        W1_ITERATIONS,
        ClientThread::Caller,
    )
    .await;
    // The same with the bare client's connection on its own thread, as our sessions run.
    let bare_hop = bare_lock::acquisitions_per_second(
        connect,
        &format!("{root}/bare-hop"),
        1,
        W1_WARMUP,
        W1_ITERATIONS,
        ClientThread::OwnArbiter,
    )
    .await;
    let mut lines = Vec::new();
    for mode in [ReleaseMode::Awaited, ReleaseMode::Pipelined] {
        eprintln!("W1 ({}): {W1_WARMUP} warm-up cycles", mode.name());
        for _ in 0..W1_WARMUP {
            cycle(&lock, mode).await;
        }
        eprintln!("W1 ({}): {W1_ITERATIONS} measured cycles", mode.name());
        let mut acquires = Vec::with_capacity(W1_ITERATIONS);
        let mut releases = Vec::with_capacity(W1_ITERATIONS);
        let packets = packets_received(connect).unwrap_or(0);
        let started = Instant::now();
        for _ in 0..W1_ITERATIONS {
            let (a, r) = cycle(&lock, mode).await;
            acquires.push(a);
            releases.push(r);
        }
        let elapsed = started.elapsed();
        // Every request of the session (pings included) per cycle, from the server's counter.
        let requests = packets_received(connect).unwrap_or(0).saturating_sub(packets) as f64 / W1_ITERATIONS as f64;
        let acq_per_s = per_second(W1_ITERATIONS, elapsed);
        let cycle_us = 1e6 / acq_per_s;
        lines.push(format!(
            "{{\"lib\":\"{LIB}\",\"workload\":\"W1\",\"release\":\"{}\",\"iterations\":{W1_ITERATIONS},\
             \"acq_per_s\":{acq_per_s:.1},\"acquire_p50_us\":{},\"acquire_p99_us\":{},\
             \"release_p50_us\":{},\"release_p99_us\":{},\"zk_create_p50_us\":{},\"zk_delete_p50_us\":{},\
             \"zk_rtt_p50_us\":{},\"ratio_cycle_to_rtt\":{:.2},\"bare_lock_acq_per_s\":{bare:.1},\
             \"ratio_to_bare_lock\":{:.2},\"bare_lock_own_thread_acq_per_s\":{bare_hop:.1},\
             \"zk_requests_per_cycle\":{requests:.2}}}",
            mode.name(),
            percentile(&mut acquires, 50.0),
            percentile(&mut acquires, 99.0),
            percentile(&mut releases, 50.0),
            percentile(&mut releases, 99.0),
            raw.create_p50,
            raw.delete_p50,
            raw.rtt_p50,
            cycle_us / raw.rtt_p50.max(1) as f64,
            acq_per_s / bare,
        ));
    }

    drop(lock);
    session.close().await;
    lines
}
