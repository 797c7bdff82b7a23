//! The lock under the faults of production, across processes: three `zk-role lock` processes
//! update a counter read-modify-write under the lock, with a fenced write; one of them meets a
//! fault while it holds the lock, between its read and its write. The history checker then
//! judges every acknowledged and unknown write against what the server recorded.
//!
//! The control runs the same workload without fencing under the pause fault and must show a lost
//! update: proof that the fault bites and that the checker can see it.
#![cfg(feature = "testkit")]

use crate::common;

use common::history::{AcceptedWrite, LockWrite, ViolationKind, WriteOutcome, check_lock};
use common::scenario::{Fault, Scenario, judge, rounds, within_limit};

const PARTICIPANTS: usize = 3;
/// Time between the read and the write: the window a fault is injected into.
const HOLD_MS: &str = "300";

/// Runs the workload, injects `fault` into participant 0 while it holds the lock (after its
/// read, before its write), and returns the checker's verdict.
async fn run(name: &str, fault: Fault, fenced: bool) -> Vec<common::history::Violation> {
    let mut s = Scenario::start(name, fault).await;
    let rounds = rounds(6).to_string();
    let mut args = vec![
        "--dir",
        "/lock",
        "--counter",
        "/counter",
        "--history",
        "/history",
        "--rounds",
        &rounds,
        "--hold-ms",
        HOLD_MS,
    ];
    if !fenced {
        args.push("--unfenced");
    }
    for i in 0..PARTICIPANTS {
        s.spawn("lock", &format!("p{i}"), &args).await;
    }
    // The victim holds the lock and has read the counter: the fault lands inside the critical
    // section. Its second read, so that the others are queued behind it.
    let (at, _) = s.wait_line(0, 0, "a read in round 1", |l| l.kind == "read" && l.get("round") == Some("1")).await;
    let others_writes_before = writes_by_others(&s);
    s.inject(fault, 0).await;
    prove_the_fault_happened(&mut s, fault, at, others_writes_before).await;

    s.wait_all("done", |l| l.kind == "done").await;
    // Every participant alive has released: no contender node may be left, whoever made it.
    let mut violations = s.leftovers("/lock").await;
    s.finish_all();

    let attempts = attempts(&s);
    let mut accepted: Vec<_> = s.listing("/history").await;
    accepted.sort_by_key(|(_, stat, _)| stat.czxid);
    let accepted: Vec<AcceptedWrite> = accepted
        .iter()
        .map(|(name, _, data)| {
            AcceptedWrite::parse(&String::from_utf8_lossy(data))
                .unwrap_or_else(|| panic!("history node {name}: {data:?}"))
        })
        .collect();
    let counter = s.read("/counter").await.expect("/counter");
    let counter: u64 = String::from_utf8_lossy(&counter.data).trim().parse().expect("counter value");
    let unknown = attempts.iter().filter(|a| a.outcome == WriteOutcome::Unknown).count();
    let failed = attempts.iter().filter(|a| a.outcome == WriteOutcome::Failed).count();
    eprintln!(
        "{name}: {} writes accepted, {} attempts ({unknown} unknown, {failed} failed), counter {counter}",
        accepted.len(),
        attempts.len()
    );
    violations.extend(check_lock(&attempts, &accepted, counter));
    if !violations.is_empty() {
        eprintln!("{name}: what the participants printed:\n{}", s.transcript());
    }
    violations
}

/// Writes acknowledged to participants other than the victim so far.
fn writes_by_others(s: &Scenario) -> usize {
    (1..s.participants.len()).map(|i| s.lines(i).iter().filter(|l| l.kind == "write").count()).sum()
}

/// A fault test first proves that its fault happened: the victim's session met it, or, for an
/// ensemble fault, some participant's did (see `prove_session_fault`, which also marks whom it
/// reached), and, unless the victim kept its session, someone else wrote after it.
async fn prove_the_fault_happened(s: &mut Scenario, fault: Fault, from: usize, others_before: usize) {
    s.prove_session_fault(fault, 0, from).await;
    let s: &Scenario = s;
    if fault == Fault::ShortPartition {
        return;
    }
    common::wait_until(&format!("a write by another after {fault:?}"), || writes_by_others(s) > others_before).await;
}

/// Every write a participant attempted, from its lines. A `read` with no `write` after it (the
/// process was killed in between) is a write whose outcome is unknown: it may have been sent.
fn attempts(s: &Scenario) -> Vec<LockWrite> {
    let mut out = Vec::new();
    for p in &s.participants {
        let (mut token, mut pending) = (0_i64, None::<(i64, u64)>);
        for l in p.process.lines() {
            match l.kind.as_str() {
                "acquired" => token = l.num("token").expect("acquired token"),
                "read" => pending = Some((token, l.num::<u64>("value").expect("read value") + 1)),
                "write" => {
                    pending = None;
                    out.push(LockWrite {
                        writer: p.id.clone(),
                        token: l.num("token").expect("write token"),
                        value: l.num("value").expect("write value"),
                        outcome: WriteOutcome::parse(l.get("outcome").expect("outcome")).expect("outcome"),
                    });
                }
                _ => {}
            }
        }
        if let Some((token, value)) = pending {
            out.push(LockWrite { writer: p.id.clone(), token, value, outcome: WriteOutcome::Unknown });
        }
    }
    out
}

#[actix_rt::test]
async fn lock_holder_paused_past_its_session_timeout() {
    judge("pause", &within_limit(run("lock-pause", Fault::Pause, true)).await, &[]);
}

#[actix_rt::test]
async fn lock_holder_partitioned_within_its_session_timeout() {
    judge("short partition", &within_limit(run("lock-short-partition", Fault::ShortPartition, true)).await, &[]);
}

#[actix_rt::test]
async fn lock_holder_partitioned_past_its_session_timeout() {
    judge("long partition", &within_limit(run("lock-long-partition", Fault::LongPartition, true)).await, &[]);
}

#[actix_rt::test]
async fn lock_holder_killed_between_read_and_write() {
    judge("kill -9", &within_limit(run("lock-kill", Fault::KillClient, true)).await, &[]);
}

#[actix_rt::test]
async fn lock_ensemble_leader_killed() {
    judge("leader kill", &within_limit(run("lock-leader-kill", Fault::KillLeader, true)).await, &[]);
}

#[actix_rt::test]
async fn lock_ensemble_leader_isolated_from_its_followers() {
    judge("leader isolation", &within_limit(run("lock-leader-isolation", Fault::IsolateLeader, true)).await, &[]);
}

/// The control: without fencing, the paused holder's write lands after its session expired
/// and another holder wrote; the checker must see the lost update. If this passes without a
/// violation, the pause fault does not bite and the scenarios above prove nothing.
#[actix_rt::test]
async fn control_without_fencing_the_pause_loses_an_update() {
    let violations = within_limit(run("lock-control", Fault::Pause, false)).await;
    assert!(
        violations.iter().any(|v| v.kind == ViolationKind::LostUpdate),
        "the unfenced workload must lose an update under the pause; violations: {violations:#?}"
    );
}
