//! The at-least-once queue under the faults of production, across processes: the test enqueues
//! items, three `zk-role queue-consumer` processes work on them and ack; one consumer meets the
//! fault while it has deliveries in flight. The checker judges the deliveries and acks: no item
//! lost, an `Ok` ack means that ack removed the item (never two), duplicates only for items a
//! faulted consumer had, and nothing left in the queue or its claims.
#![cfg(feature = "testkit")]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use actix_zookeeper::queue::Queue;
use common::history::{QueueEvent, QueueEventKind, Violation, ViolationKind, WriteOutcome, check_queue};
use common::scenario::{Fault, KnownDefect, Scenario, WAIT, judge, rounds};

const CONSUMERS: usize = 3;

/// Shown when a consumer's session ends under it (pause, long partition, ensemble faults):
/// fixed by issue 14, which then removes this allowance.
const DOUBLE_ACK: &[KnownDefect] = &[KnownDefect {
    kind: ViolationKind::DoubleAck,
    tracked_by: "issue 14, defect 1: an ack settled on a new session returns Ok although it changed nothing",
}];

async fn run(name: &str, fault: Fault) -> Vec<Violation> {
    let mut s = Scenario::start(name, fault).await;
    let items: Vec<String> = (0..rounds(300)).map(|i| format!("item-{i:05}")).collect();
    let queue = Queue::new(s.observer.clone(), "/queue");
    for chunk in items.chunks(100) {
        queue.put_all(chunk.iter().map(|i| i.as_bytes().to_vec()).collect()).await.expect("enqueue");
    }
    // Slow enough work that every consumer has deliveries in flight when the fault lands.
    let args = ["--queue", "/queue", "--concurrency", "4", "--work-ms", "40"];
    for i in 0..CONSUMERS {
        s.spawn("queue-consumer", &format!("c{i}"), &args).await;
    }
    let (at, _) = s.wait_line(0, 0, "a delivery", |l| l.kind == "delivered").await;
    s.inject(fault, 0).await;
    prove_the_fault_happened(&s, fault, at).await;

    // Done when the queue and its claims are empty (or a minute has passed: the checker says why).
    let deadline = Instant::now() + WAIT;
    while !(s.listing("/queue").await.iter().all(|(n, _, _)| n == "claims")
        && s.listing("/queue/claims").await.is_empty())
        && Instant::now() < deadline
    {
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    // Late acks still in flight are part of the history: give them a moment to be printed.
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let left_in_queue: Vec<String> =
        s.listing("/queue").await.into_iter().map(|(n, _, _)| n).filter(|n| n != "claims").collect();
    let left_claims: Vec<String> = s.listing("/queue/claims").await.into_iter().map(|(n, _, _)| n).collect();
    s.finish_all();

    let faulted: BTreeSet<String> = s.participants.iter().filter(|p| p.faulted).map(|p| p.id.clone()).collect();
    let events = events(&s);
    let mut deliveries = std::collections::BTreeMap::<&str, usize>::new();
    for e in &events {
        if let QueueEventKind::Delivered { item, .. } = &e.kind {
            *deliveries.entry(item.as_str()).or_default() += 1;
        }
    }
    let redelivered = deliveries.values().filter(|n| **n > 1).count();
    eprintln!(
        "{name}: {} items, {} events, {redelivered} delivered more than once, faulted {faulted:?}",
        items.len(),
        events.len()
    );
    let violations = check_queue(&items, &events, &faulted, &left_in_queue, &left_claims);
    if !violations.is_empty() {
        eprintln!("{name}: what the participants printed:\n{}", s.transcript());
    }
    violations
}

async fn prove_the_fault_happened(s: &Scenario, fault: Fault, from: usize) {
    match fault {
        Fault::Pause | Fault::LongPartition => {
            s.wait_line(0, from, "its session's expiry", |l| l.kind == "session" && l.get("state") == Some("expired"))
                .await;
        }
        Fault::ShortPartition => {
            let (i, _) =
                s.wait_line(0, from, "suspended", |l| l.kind == "session" && l.get("state") == Some("suspended")).await;
            s.wait_line(0, i, "reconnected", |l| l.kind == "session" && l.get("state") == Some("reconnected")).await;
        }
        // The killed consumer's claims went back to the queue: someone else got one of its items.
        Fault::KillClient => {
            let victims: BTreeSet<String> = s
                .lines(0)
                .iter()
                .filter(|l| l.kind == "delivered")
                .filter_map(|l| l.get("item").map(str::to_owned))
                .collect();
            let acked: BTreeSet<String> = s
                .lines(0)
                .iter()
                .filter(|l| l.kind == "ack" && l.get("outcome") == Some("ok"))
                .filter_map(|l| l.get("item").map(str::to_owned))
                .collect();
            let unfinished: Vec<&String> = victims.difference(&acked).collect();
            assert!(!unfinished.is_empty(), "the victim had nothing in flight when it was killed");
            let deadline = Instant::now() + WAIT;
            while !(1..s.participants.len()).any(|i| {
                s.lines(i).iter().any(|l| {
                    l.kind == "delivered" && l.get("item").is_some_and(|i| unfinished.iter().any(|u| u.as_str() == i))
                })
            }) {
                assert!(
                    Instant::now() < deadline,
                    "the killed consumer's items {unfinished:?} were never delivered again; what the participants printed:\n{}",
                    s.transcript()
                );
                actix_rt::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Fault::KillLeader | Fault::IsolateLeader => {}
    }
}

/// Deliveries and acks of every consumer, in each consumer's order.
fn events(s: &Scenario) -> Vec<QueueEvent> {
    let mut out = Vec::new();
    for (consumer, l) in s.all_lines() {
        let item = || l.get("item").expect("item").to_owned();
        let kind = match l.kind.as_str() {
            "delivered" => QueueEventKind::Delivered { item: item(), attempt: l.num("attempt").expect("attempt") },
            "ack" => QueueEventKind::Acked {
                item: item(),
                outcome: WriteOutcome::parse(l.get("outcome").expect("outcome")).expect("outcome"),
            },
            _ => continue,
        };
        out.push(QueueEvent { consumer, kind });
    }
    out
}

#[actix_rt::test]
async fn consumer_paused_past_its_session_timeout() {
    judge("pause", &run("queue-pause", Fault::Pause).await, DOUBLE_ACK);
}

#[actix_rt::test]
async fn consumer_partitioned_within_its_session_timeout() {
    judge("short partition", &run("queue-short-partition", Fault::ShortPartition).await, &[]);
}

#[actix_rt::test]
async fn consumer_partitioned_past_its_session_timeout() {
    judge("long partition", &run("queue-long-partition", Fault::LongPartition).await, DOUBLE_ACK);
}

#[actix_rt::test]
async fn consumer_killed_with_deliveries_in_flight() {
    judge("kill -9", &run("queue-kill", Fault::KillClient).await, &[]);
}

#[actix_rt::test]
async fn queue_ensemble_leader_killed() {
    judge("leader kill", &run("queue-leader-kill", Fault::KillLeader).await, DOUBLE_ACK);
}

#[actix_rt::test]
async fn queue_ensemble_leader_isolated_from_its_followers() {
    judge("leader isolation", &run("queue-leader-isolation", Fault::IsolateLeader).await, DOUBLE_ACK);
}
