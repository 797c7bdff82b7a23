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
use actix_zookeeper::testkit::RoleLine;
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
    let items: Vec<String> = (0..rounds(600)).map(|i| format!("item-{i:05}")).collect();
    let queue = Queue::new(s.observer.clone(), "/queue");
    for chunk in items.chunks(100) {
        queue.put_all(chunk.iter().map(|i| i.as_bytes().to_vec()).collect()).await.expect("enqueue");
    }
    // Slow enough work that every consumer has deliveries in flight when the fault lands.
    let args = ["--queue", "/queue", "--concurrency", "4", "--work-ms", "100"];
    for i in 0..CONSUMERS {
        s.spawn("queue-consumer", &format!("c{i}"), &args).await;
    }
    let (at, _) = s.wait_line(0, 0, "a delivery", |l| l.kind == "delivered").await;
    s.inject(fault, 0).await;
    // A kill is judged once the queue is drained (`victims_items_were_redelivered`).
    s.prove_session_fault(fault, 0, at).await;

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

    if fault == Fault::KillClient {
        victims_items_were_redelivered(&s);
    }
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

/// The kill bit: an item the killed consumer had claimed and not acked was delivered to another.
fn victims_items_were_redelivered(s: &Scenario) {
    let lines = s.lines(0);
    let items_of = |pred: &dyn Fn(&RoleLine) -> bool| -> BTreeSet<String> {
        lines.iter().filter(|l| pred(l)).filter_map(|l| l.get("item").map(str::to_owned)).collect()
    };
    let delivered = items_of(&|l| l.kind == "delivered");
    let acked = items_of(&|l| l.kind == "ack" && l.get("outcome") == Some("ok"));
    let unfinished: BTreeSet<&String> = delivered.difference(&acked).collect();
    let redelivered = (1..s.participants.len()).any(|i| {
        s.lines(i).iter().any(|l| {
            l.kind == "delivered" && l.get("item").is_some_and(|item| unfinished.iter().any(|u| u.as_str() == item))
        })
    });
    assert!(
        redelivered,
        "no item the killed consumer had in flight ({unfinished:?}) was delivered again; what the participants printed:\n{}",
        s.transcript()
    );
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
