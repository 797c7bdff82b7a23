//! W2: eight lock actors on eight sessions contending for one lock; mutual exclusion judged
//! from the logged holds (`testkit::HoldLog`).
//! One workload of the recipe benchmark (`main.rs`); the shared harness is `harness.rs`.

use super::bare_lock::{self, ClientThread};
use super::floor_lock::{self, Floor, Placement};
use super::harness::*;

pub(crate) const W2_CLIENTS: usize = 8;
pub(crate) const W2_ACQUISITIONS: usize = 2000;
/// Interleaved rounds of the yardstick and the lock actors; medians are reported.
pub(crate) const W2_ROUNDS: usize = 5;

/// One step of a W2 round.
#[derive(Clone, Copy)]
enum Step {
    Bare,
    Floor,
    SafeFloor,
    ThreadEachFloor,
    ActorEachFloor,
    Ours,
    OursSt,
}

/// One measured pass of the lock actors: (acquisitions per second, waits, violations,
/// requests per acquisition). With `threads`, each lock's caller runs on that thread (the lock's
/// session's, where its actor runs too), otherwise on this one.
async fn pass(
    connect: &str,
    locks: &[Addr<LockActor>],
    threads: Option<&[actix::ArbiterHandle]>,
) -> (f64, Vec<u128>, usize, f64) {
    let tickets = Arc::new(AtomicUsize::new(0));
    let holds = Arc::new(HoldLog::new());
    let packets = packets_received(connect).unwrap_or(0);
    let started = Instant::now();
    let loops: Vec<_> = locks
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, lock)| {
            let (tickets, holds) = (tickets.clone(), holds.clone());
            let caller = async move {
                let mut waits = Vec::new();
                while tickets.fetch_add(1, Ordering::SeqCst) < W2_ACQUISITIONS {
                    let t = Instant::now();
                    let grant = lock.send(Acquire::default()).await.expect("lock actor alive").expect("acquired");
                    let granted = Instant::now();
                    waits.push(micros(t));
                    // Every hold is logged on one clock and judged after the run: a wrong
                    // second grant shows as an overlap however late it arrives (a
                    // holders counter saw it only inside a one-yield hold).
                    tokio::task::yield_now().await;
                    holds.record(grant.token.0, granted, Instant::now());
                    release(&lock).await;
                }
                waits
            };
            let (done, finished) = futures::channel::oneshot::channel();
            let report = async move {
                let _ = done.send(caller.await);
            };
            match threads {
                Some(threads) => {
                    threads[i].spawn(report);
                }
                None => {
                    actix::spawn(report);
                }
            }
            finished
        })
        .collect();
    let mut waits = Vec::with_capacity(W2_ACQUISITIONS);
    for finished in loops {
        waits.extend(finished.await.expect("W2 loop finished"));
    }
    let elapsed = started.elapsed();
    let requests = packets_received(connect).unwrap_or(0).saturating_sub(packets) as f64 / W2_ACQUISITIONS as f64;
    assert_eq!(waits.len(), W2_ACQUISITIONS);
    assert_eq!(holds.len(), W2_ACQUISITIONS, "every hold logged");
    (per_second(W2_ACQUISITIONS, elapsed), waits, holds.violations(), requests)
}

pub(crate) async fn w2(connect: &str) -> Vec<String> {
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
    // The opt-in: each lock actor and its caller on its session's thread (`SessionHandle::arbiter`).
    let threads: Vec<actix::ArbiterHandle> =
        sessions.iter().map(|s| s.arbiter().expect("the session runs").clone()).collect();
    let session_thread_locks: Vec<Addr<LockActor>> = sessions
        .iter()
        .zip(&threads)
        .map(|(session, thread)| {
            let session = session.clone();
            LockActor::start_in_arbiter(thread, move |_| {
                LockActor::new(session, LockConfig::new("/bench/lock-session-thread"))
            })
        })
        .collect();

    // Interleaved rounds (the yardsticks and the lock actors), rotated so that the server's
    // warm-up and the step before favour nobody; medians are reported, with every round's rate.
    let (mut bare, mut floor, mut ours, mut passes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut ours_st, mut passes_st) = (Vec::new(), Vec::new());
    let (mut safe_floor, mut thread_each_floor, mut actor_each_floor) = (Vec::new(), Vec::new(), Vec::new());
    // This process's CPU per acquisition (the server's is not in it): [floor, ours, ours_st,
    // actor_each_floor].
    let mut cpu: [Vec<f64>; 4] = Default::default();
    let cpu_per_acquisition = |since: u64| (cpu_us() - since) as f64 / W2_ACQUISITIONS as f64;
    for round in 0..W2_ROUNDS {
        eprintln!("W2: round {} of {W2_ROUNDS}: {W2_CLIENTS} clients, {W2_ACQUISITIONS} acquisitions", round + 1);
        let steps = [
            Step::Bare,
            Step::Floor,
            Step::SafeFloor,
            Step::ThreadEachFloor,
            Step::ActorEachFloor,
            Step::Ours,
            Step::OursSt,
        ];
        for step in rotated(steps, round) {
            let since = cpu_us();
            let floor_run = |name: &str, kind: Floor, placement: Placement| {
                let dir = format!("{root}/{name}-{round}");
                async move { floor_lock::run(connect, &dir, W2_CLIENTS, 0, W2_ACQUISITIONS, kind, placement).await }
            };
            match step {
                Step::Bare => {
                    let (dir, thread) = (format!("{root}/bare-{round}"), ClientThread::Caller);
                    bare.push(bare_lock::run(connect, &dir, W2_CLIENTS, 0, W2_ACQUISITIONS, thread).await.acq_per_s);
                }
                Step::Floor => {
                    floor.push(floor_run("floor", Floor::Fewest, Placement::Caller).await);
                    cpu[0].push(cpu_per_acquisition(since));
                }
                Step::SafeFloor => safe_floor.push(floor_run("safe-floor", Floor::Safe, Placement::Caller).await),
                Step::ThreadEachFloor => {
                    thread_each_floor.push(floor_run("thread-each-floor", Floor::Safe, Placement::ThreadEach).await)
                }
                Step::ActorEachFloor => {
                    actor_each_floor.push(floor_run("actor-each-floor", Floor::Safe, Placement::ActorEach).await);
                    cpu[3].push(cpu_per_acquisition(since));
                }
                Step::Ours => {
                    let measured = pass(connect, &locks, None).await;
                    cpu[1].push(cpu_per_acquisition(since));
                    ours.push(measured.0);
                    passes.push(measured);
                }
                Step::OursSt => {
                    let measured = pass(connect, &session_thread_locks, Some(&threads)).await;
                    cpu[2].push(cpu_per_acquisition(since));
                    ours_st.push(measured.0);
                    passes_st.push(measured);
                }
            }
        }
    }
    drop(locks);
    drop(session_thread_locks);
    for session in &sessions {
        session.close().await;
    }
    let violations: usize = passes.iter().chain(&passes_st).map(|p| p.2).sum();
    fail_unless_sound("W2", &[("overlapping or out-of-order holds", violations)]);
    let (_, bare_median) = median(&bare);
    let (_, floor_median) = median(&floor);
    let (_, safe_floor_median) = median(&safe_floor);
    let (_, thread_each_median) = median(&thread_each_floor);
    let (_, actor_each_median) = median(&actor_each_floor);
    let [floor_cpu, ours_cpu, ours_st_cpu, actor_each_cpu] = cpu.map(|c| median(&c).1);
    [("default", ours, passes, ours_cpu), ("session-thread", ours_st, passes_st, ours_st_cpu)]
        .into_iter()
        .map(|(placement, ours, mut passes, cpu_us)| {
            let (i, acq_per_s) = median(&ours);
            let violations: usize = passes.iter().map(|p| p.2).sum();
            let (_, waits, _, requests) = &mut passes[i];
            format!(
                "{{\"lib\":\"{LIB}\",\"workload\":\"W2\",\"placement\":\"{placement}\",\"clients\":{W2_CLIENTS},\
                 \"acquisitions\":{W2_ACQUISITIONS},\"rounds\":{W2_ROUNDS},\"acq_per_s\":{acq_per_s:.1},\
                 \"acq_per_s_rounds\":{},\"wait_p50_us\":{},\"wait_p99_us\":{},\"violations\":{violations},\
                 \"zk_rtt_p50_us\":{},\"bare_lock_acq_per_s\":{bare_median:.1},\"bare_lock_rounds\":{},\
                 \"ratio_to_bare_lock\":{:.2},\"zk_requests_per_acquisition\":{requests:.2},\
                 \"floor_acq_per_s\":{floor_median:.1},\"floor_rounds\":{},\"floor_ratio_to_bare_lock\":{:.2},\
                 \"ratio_to_floor\":{:.2},\"safe_floor_acq_per_s\":{safe_floor_median:.1},\
                 \"safe_floor_rounds\":{},\"ratio_to_safe_floor\":{:.2},\
                 \"thread_each_floor_acq_per_s\":{thread_each_median:.1},\"thread_each_floor_rounds\":{},\
                 \"ratio_to_thread_each_floor\":{:.2},\"actor_each_floor_acq_per_s\":{actor_each_median:.1},\
                 \"actor_each_floor_rounds\":{},\"ratio_to_actor_each_floor\":{:.2},\
                 \"cpu_us_per_acquisition\":{cpu_us:.0},\"floor_cpu_us_per_acquisition\":{floor_cpu:.0},\
                 \"actor_each_floor_cpu_us_per_acquisition\":{actor_each_cpu:.0}}}",
                rates(&ours),
                percentile(waits, 50.0),
                percentile(waits, 99.0),
                raw.rtt_p50,
                rates(&bare),
                acq_per_s / bare_median,
                rates(&floor),
                floor_median / bare_median,
                acq_per_s / floor_median,
                rates(&safe_floor),
                acq_per_s / safe_floor_median,
                rates(&thread_each_floor),
                acq_per_s / thread_each_median,
                rates(&actor_each_floor),
                acq_per_s / actor_each_median,
            )
        })
        .collect()
}
