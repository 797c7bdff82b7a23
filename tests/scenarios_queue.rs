//! The at-least-once queue under the faults of production, across processes: the test enqueues
//! items, three `zk-role queue-consumer` processes work on them and ack; one consumer meets the
//! fault while it has deliveries in flight. The checker judges the deliveries and acks: no item
//! lost, an `Ok` ack means that ack removed the item (never two), duplicates only for items a
//! faulted consumer had, and nothing left in the queue or its claims.
#![cfg(feature = "testkit")]

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use actix_zookeeper::queue::Queue;
use actix_zookeeper::testkit::RoleLine;
use common::history::{QueueEvent, QueueEventKind, Violation, WriteOutcome, check_queue};
use common::scenario::{Fault, Scenario, WAIT, judge, rounds, within_limit};

const CONSUMERS: usize = 3;

async fn run(name: &str, fault: Fault) -> Vec<Violation> {
    let mut s = Scenario::start(name, fault).await;
    let items: Vec<String> = (0..rounds(600)).map(|i| format!("item-{i:05}")).collect();
    let queue = Queue::new(s.observer.clone(), "/queue");
    for chunk in items.chunks(100) {
        queue.put_all(chunk.iter().map(|i| i.as_bytes().to_vec()).collect()).await.expect("enqueue");
    }
    // Slow enough work that every consumer has deliveries in flight when the fault lands. A
    // killed victim works 2 s per item: the kill lands once its first delivery is read from its
    // output, and on a loaded machine that read came more than 100 ms late, after the victim had
    // acked everything it held (the kill then met nothing to redeliver).
    let victim_work = if fault == Fault::KillClient { "2000" } else { "100" };
    for i in 0..CONSUMERS {
        let work = if i == 0 { victim_work } else { "100" };
        let args = ["--queue", "/queue", "--concurrency", "4", "--work-ms", work];
        s.spawn("queue-consumer", &format!("c{i}"), &args).await;
    }
    let (at, _) = s.wait_line(0, 0, "a delivery", |l| l.kind == "delivered").await;
    s.inject(fault, 0).await;
    // A kill is judged once the queue is drained (`victims_items_were_redelivered`). An ensemble
    // fault is proved to have reached consumers, and marks only those as faulted: the checker
    // excuses duplicates and losses for them, not for a consumer the fault never reached.
    s.prove_session_fault(fault, 0, at).await;

    wait_until_drained(&s).await;
    // Late acks still in flight are part of the history: give them a moment to be printed.
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let left_in_queue: Vec<String> =
        s.listing("/queue").await.into_iter().map(|(n, _, _)| n).filter(|n| n != "claims").collect();
    let left_claims: Vec<String> = s.listing("/queue/claims").await.into_iter().map(|(n, _, _)| n).collect();
    s.finish_all();

    if fault == Fault::KillClient {
        victims_items_were_redelivered(&s);
    }
    let faulted: BTreeSet<String> = s.participants.iter().filter(|p| p.faulted()).map(|p| p.id.clone()).collect();
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

/// Waits until the queue and its claims are empty, or a minute has passed (then the caller's
/// checks say what is left).
async fn wait_until_drained(s: &Scenario) {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        let items_left = s.listing("/queue").await.iter().any(|(n, _, _)| n != "claims");
        if !items_left && s.listing("/queue/claims").await.is_empty() {
            return;
        }
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
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
    judge("pause", &within_limit(run("queue-pause", Fault::Pause)).await, &[]);
}

#[actix_rt::test]
async fn consumer_partitioned_within_its_session_timeout() {
    judge("short partition", &within_limit(run("queue-short-partition", Fault::ShortPartition)).await, &[]);
}

#[actix_rt::test]
async fn consumer_partitioned_past_its_session_timeout() {
    judge("long partition", &within_limit(run("queue-long-partition", Fault::LongPartition)).await, &[]);
}

#[actix_rt::test]
async fn consumer_killed_with_deliveries_in_flight() {
    judge("kill -9", &within_limit(run("queue-kill", Fault::KillClient)).await, &[]);
}

#[actix_rt::test]
async fn queue_ensemble_leader_killed() {
    judge("leader kill", &within_limit(run("queue-leader-kill", Fault::KillLeader)).await, &[]);
}

#[actix_rt::test]
async fn queue_ensemble_leader_isolated_from_its_followers() {
    judge("leader isolation", &within_limit(run("queue-leader-isolation", Fault::IsolateLeader)).await, &[]);
}

/// Regression (found by `consumer_paused_past_its_session_timeout`): a consumer paused while its
/// claim creates were still queued in the process found them executed on its *next* session once
/// it woke (requests queued across an expiry run on the new session), and ignored their replies
/// as stale: claims of the live session, on items another consumer had finished meanwhile — or on
/// items still queued, which nobody could then claim for as long as that session lived. With fast
/// work and many claims in flight, a few pauses make it likely that some claims are queued at the
/// moment of the pause; the queue must still drain, with no claim left.
#[actix_rt::test]
async fn a_consumer_paused_while_claiming_leaves_no_claim_behind() {
    within_limit(async {
        let mut s = Scenario::start("queue-pause-claiming", Fault::Pause).await;
        let queue = Queue::new(s.observer.clone(), "/queue");
        let args = ["--queue", "/queue", "--concurrency", "16", "--work-ms", "1"];
        for i in 0..2 {
            s.spawn("queue-consumer", &format!("c{i}"), &args).await;
        }
        for cycle in 0..rounds(3) {
            let batch: Vec<Vec<u8>> = (0..1000).map(|i| format!("item-{cycle}-{i:04}").into_bytes()).collect();
            for chunk in batch.chunks(100) {
                queue.put_all(chunk.to_vec()).await.expect("enqueue");
            }
            let from = s.lines(0).len();
            let (at, _) = s.wait_line(0, from, "a delivery", |l| l.kind == "delivered").await;
            s.inject(Fault::Pause, 0).await;
            s.prove_session_fault(Fault::Pause, 0, at).await;
            s.wait_line(0, at, "a new session", |l| l.kind == "session" && l.get("state") == Some("connected")).await;
        }
        wait_until_drained(&s).await;
        let left_in_queue: Vec<String> =
            s.listing("/queue").await.into_iter().map(|(n, _, _)| n).filter(|n| n != "claims").collect();
        let left_claims: Vec<(String, i64)> =
            s.listing("/queue/claims").await.into_iter().map(|(n, stat, _)| (n, stat.ephemeral_owner)).collect();
        assert!(
            left_in_queue.is_empty() && left_claims.is_empty(),
            "the queue did not drain: {} items left, claims left (name, owner): {left_claims:?}",
            left_in_queue.len()
        );
        s.finish_all();
    })
    .await;
}
