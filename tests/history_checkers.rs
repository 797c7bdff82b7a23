//! The history checkers (`tests/common/history.rs`) judged on hand-made histories: for every
//! checker a clean history passes, and each violation it can report is caught in a minimal
//! history that has just that defect. No ZooKeeper here: the checkers are pure functions.
#![cfg(feature = "testkit")]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::history::ViolationKind::*;
use common::history::*;

/// Fails unless `violations` are of exactly the `expected` kinds (each at least once).
fn assert_kinds(violations: &[Violation], expected: &[ViolationKind]) {
    let expected: BTreeSet<ViolationKind> = expected.iter().copied().collect();
    assert_eq!(kinds(violations), expected, "violations: {violations:#?}");
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// Parsing

#[test]
fn write_outcomes_parse_from_the_roles_words() {
    assert_eq!(WriteOutcome::parse("ok"), Some(WriteOutcome::Ok));
    assert_eq!(WriteOutcome::parse("failed"), Some(WriteOutcome::Failed));
    assert_eq!(WriteOutcome::parse("unknown"), Some(WriteOutcome::Unknown));
    assert_eq!(WriteOutcome::parse("Ok"), None);
    assert_eq!(WriteOutcome::parse(""), None);
}

#[test]
fn lock_history_data_parses() {
    assert_eq!(
        AcceptedWrite::parse("value=12 token=4294967301 writer=p-1"),
        Some(AcceptedWrite { value: 12, token: 4294967301, writer: "p-1".into() })
    );
    assert_eq!(AcceptedWrite::parse("value=12 token=7"), None, "no writer");
    assert_eq!(AcceptedWrite::parse("value=x token=7 writer=a"), None);
    assert_eq!(AcceptedWrite::parse("value=1 token=7 writer="), None);
}

#[test]
fn election_history_data_parses() {
    assert_eq!(
        AcceptedTermWrite::parse("term=-3 writer=e2 n=5"),
        Some(AcceptedTermWrite { term: -3, writer: "e2".into(), n: 5 })
    );
    assert_eq!(AcceptedTermWrite::parse("term=3 writer=e2"), None, "no n");
    assert_eq!(AcceptedTermWrite::parse(""), None);
}

#[test]
fn task_result_names_its_writer() {
    assert_eq!(result_writer("task-7|by=w2"), Some("w2".into()));
    assert_eq!(result_writer("a|by=x|by=w3"), Some("w3".into()), "the last marker is the role's");
    assert_eq!(result_writer("task-7"), None);
    assert_eq!(result_writer("task-7|by="), None);
}

#[test]
fn violations_print_their_kind_and_detail() {
    let v = check_lock(&[], &[], 3);
    assert_eq!(v[0].to_string(), "FinalCounterMismatch: the counter ends at 3, the last accepted write set 0");
}

#[test]
#[should_panic(expected = "lock: 1 violation(s):\n  FinalCounterMismatch")]
fn assert_clean_names_every_violation() {
    assert_clean("lock", &check_lock(&[], &[], 3));
}

// ---------------------------------------------------------------------------------------------
// Lock

fn attempt(writer: &str, token: i64, value: u64, outcome: WriteOutcome) -> LockWrite {
    LockWrite { writer: writer.into(), token, value, outcome }
}

fn accepted(value: u64, token: i64, writer: &str) -> AcceptedWrite {
    AcceptedWrite { value, token, writer: writer.into() }
}

#[test]
fn lock_clean_history_passes() {
    use WriteOutcome::*;
    let attempts = [
        attempt("a", 10, 1, Ok),
        // Fenced out: its grant was gone, nothing applied.
        attempt("b", 15, 1, Failed),
        attempt("b", 20, 2, Ok),
        attempt("a", 30, 3, Ok),
    ];
    let history = [accepted(1, 10, "a"), accepted(2, 20, "b"), accepted(3, 30, "a")];
    assert_clean("lock", &check_lock(&attempts, &history, 3));
    assert_clean("no writes", &check_lock(&[], &[], 0));
}

#[test]
fn lock_unknown_write_may_have_landed_or_not() {
    use WriteOutcome::*;
    let attempts = [attempt("a", 10, 1, Ok), attempt("b", 20, 2, Unknown), attempt("a", 30, 2, Ok)];
    // The unknown write did not land: the next holder read 1.
    assert_clean("absent", &check_lock(&attempts, &[accepted(1, 10, "a"), accepted(2, 30, "a")], 2));
    let attempts = [attempt("a", 10, 1, Ok), attempt("b", 20, 2, Unknown), attempt("a", 30, 3, Ok)];
    // It did land: the next holder read 2.
    let history = [accepted(1, 10, "a"), accepted(2, 20, "b"), accepted(3, 30, "a")];
    assert_clean("present", &check_lock(&attempts, &history, 3));
}

#[test]
fn lock_unknown_write_landing_twice_is_caught() {
    let attempts = [attempt("a", 10, 1, WriteOutcome::Unknown)];
    let history = [accepted(1, 10, "a"), accepted(1, 10, "a")];
    // Landing twice also repeats its value and its token.
    assert_kinds(&check_lock(&attempts, &history, 1), &[WriteAppliedTwice, LostUpdate, TokenNotIncreasing]);
}

#[test]
fn lock_two_accepted_writes_of_one_value_are_a_lost_update() {
    use WriteOutcome::*;
    let attempts = [attempt("a", 10, 1, Ok), attempt("b", 20, 1, Ok)];
    let v = check_lock(&attempts, &[accepted(1, 10, "a"), accepted(1, 20, "b")], 1);
    assert_kinds(&v, &[LostUpdate]);
    assert!(v[0].detail.contains("value 1 (token 20, writer b)"), "{}", v[0]);
}

#[test]
fn lock_control_paused_holders_unfenced_write_after_the_next_holders_is_caught() {
    use WriteOutcome::*;
    // a holds token 20 and read 1, then is paused past its session timeout; b is granted token
    // 30, reads 1, writes 2; a resumes and its unfenced write of 2 lands too.
    let attempts = [attempt("a", 10, 1, Ok), attempt("b", 30, 2, Ok), attempt("a", 20, 2, Ok)];
    let history = [accepted(1, 10, "a"), accepted(2, 30, "b"), accepted(2, 20, "a")];
    assert_kinds(&check_lock(&attempts, &history, 2), &[LostUpdate, TokenNotIncreasing]);
}

#[test]
fn lock_fenced_paused_holders_write_fails_and_passes() {
    use WriteOutcome::*;
    let attempts = [attempt("a", 10, 1, Ok), attempt("b", 30, 2, Ok), attempt("a", 20, 2, Failed)];
    let history = [accepted(1, 10, "a"), accepted(2, 30, "b")];
    assert_clean("fenced", &check_lock(&attempts, &history, 2));
}

#[test]
fn lock_value_skipping_one_is_a_counter_gap() {
    use WriteOutcome::*;
    let attempts = [attempt("a", 10, 1, Ok), attempt("b", 20, 3, Ok)];
    assert_kinds(&check_lock(&attempts, &[accepted(1, 10, "a"), accepted(3, 20, "b")], 3), &[CounterGap]);
}

#[test]
fn lock_counter_not_at_the_last_accepted_value_is_caught() {
    let attempts = [attempt("a", 10, 1, WriteOutcome::Ok)];
    assert_kinds(&check_lock(&attempts, &[accepted(1, 10, "a")], 2), &[FinalCounterMismatch]);
}

#[test]
fn lock_token_going_back_is_caught() {
    use WriteOutcome::*;
    let attempts = [attempt("a", 20, 1, Ok), attempt("b", 10, 2, Ok)];
    let v = check_lock(&attempts, &[accepted(1, 20, "a"), accepted(2, 10, "b")], 2);
    assert_kinds(&v, &[TokenNotIncreasing]);
    assert!(v[0].detail.contains("token 10"), "{}", v[0]);
}

#[test]
fn lock_acknowledged_write_missing_is_caught() {
    use WriteOutcome::*;
    let attempts = [attempt("a", 10, 1, Ok), attempt("b", 20, 2, Ok)];
    let v = check_lock(&attempts, &[accepted(1, 10, "a")], 1);
    assert_kinds(&v, &[AckedWriteMissing]);
    assert!(v[0].detail.contains("value 2 by b (token 20)"), "{}", v[0]);
}

#[test]
fn lock_failed_write_present_is_caught() {
    use WriteOutcome::*;
    let attempts = [attempt("a", 10, 1, Ok), attempt("b", 20, 2, Failed)];
    assert_kinds(&check_lock(&attempts, &[accepted(1, 10, "a"), accepted(2, 20, "b")], 2), &[FailedWriteApplied]);
}

#[test]
fn lock_write_nobody_attempted_is_a_phantom() {
    let attempts = [attempt("a", 10, 1, WriteOutcome::Ok)];
    assert_kinds(&check_lock(&attempts, &[accepted(1, 10, "a"), accepted(2, 20, "c")], 2), &[PhantomWrite]);
}

// ---------------------------------------------------------------------------------------------
// Election

fn term_write(writer: &str, term: i64, n: u64, outcome: WriteOutcome) -> TermWrite {
    TermWrite { writer: writer.into(), term, n, outcome }
}

fn term_accepted(term: i64, writer: &str, n: u64) -> AcceptedTermWrite {
    AcceptedTermWrite { term, writer: writer.into(), n }
}

#[test]
fn election_clean_history_passes() {
    use WriteOutcome::*;
    let attempts = [
        term_write("a", 10, 1, Ok),
        term_write("a", 10, 2, Ok),
        // Deposed: its leader node was gone, nothing applied.
        term_write("a", 10, 3, Failed),
        term_write("b", 20, 1, Unknown),
        term_write("b", 20, 2, Ok),
        term_write("c", 30, 1, Unknown),
    ];
    // b's unknown write landed, c's did not.
    let history =
        [term_accepted(10, "a", 1), term_accepted(10, "a", 2), term_accepted(20, "b", 1), term_accepted(20, "b", 2)];
    assert_clean("election", &check_election(&attempts, &history));
    assert_clean("no writes", &check_election(&[], &[]));
}

#[test]
fn election_two_writers_in_one_term_are_caught() {
    use WriteOutcome::*;
    let attempts = [term_write("a", 10, 1, Ok), term_write("b", 10, 1, Ok)];
    let v = check_election(&attempts, &[term_accepted(10, "a", 1), term_accepted(10, "b", 1)]);
    assert_kinds(&v, &[TwoLeadersInTerm]);
    assert!(v[0].detail.contains("term 10") && v[0].detail.contains("a, b"), "{}", v[0]);
}

#[test]
fn election_control_deposed_leaders_unfenced_write_after_the_successors_is_caught() {
    use WriteOutcome::*;
    let attempts = [term_write("a", 10, 1, Ok), term_write("b", 20, 1, Ok), term_write("a", 10, 2, Ok)];
    let history = [term_accepted(10, "a", 1), term_accepted(20, "b", 1), term_accepted(10, "a", 2)];
    let v = check_election(&attempts, &history);
    assert_kinds(&v, &[TermWentBack]);
    assert!(v[0].detail.contains("n=2 by a in term 10"), "{}", v[0]);
}

#[test]
fn election_acknowledged_write_missing_is_caught() {
    use WriteOutcome::*;
    let attempts = [term_write("a", 10, 1, Ok), term_write("a", 10, 2, Ok)];
    assert_kinds(&check_election(&attempts, &[term_accepted(10, "a", 1)]), &[AckedWriteMissing]);
}

#[test]
fn election_failed_write_present_is_caught() {
    let attempts = [term_write("a", 10, 1, WriteOutcome::Failed)];
    assert_kinds(&check_election(&attempts, &[term_accepted(10, "a", 1)]), &[FailedWriteApplied]);
}

#[test]
fn election_write_nobody_attempted_is_a_phantom() {
    let attempts = [term_write("a", 10, 1, WriteOutcome::Ok)];
    let history = [term_accepted(10, "a", 1), term_accepted(20, "b", 1)];
    assert_kinds(&check_election(&attempts, &history), &[PhantomWrite]);
}

#[test]
fn election_unknown_write_landing_twice_is_caught() {
    let attempts = [term_write("a", 10, 1, WriteOutcome::Unknown)];
    let history = [term_accepted(10, "a", 1), term_accepted(10, "a", 1)];
    assert_kinds(&check_election(&attempts, &history), &[WriteAppliedTwice]);
}

// ---------------------------------------------------------------------------------------------
// Queue

fn delivered(consumer: &str, item: &str, attempt: u32) -> QueueEvent {
    QueueEvent::delivered(consumer, item, attempt)
}

fn acked(consumer: &str, item: &str, outcome: WriteOutcome) -> QueueEvent {
    QueueEvent::acked(consumer, item, outcome)
}

#[test]
fn queue_clean_history_passes() {
    use WriteOutcome::*;
    let items = strings(&["i1", "i2", "i3"]);
    let events = [
        delivered("c1", "i1", 1),
        delivered("c2", "i2", 1),
        acked("c1", "i1", Ok),
        delivered("c1", "i3", 1),
        acked("c2", "i2", Ok),
        acked("c1", "i3", Ok),
    ];
    assert_clean("queue", &check_queue(&items, &events, &set(&[]), &[], &[]));
}

#[test]
fn queue_redeliveries_and_unseen_acks_after_a_partition_pass() {
    use WriteOutcome::*;
    let items = strings(&["i1", "i2", "i3"]);
    // c1 is partitioned past its session timeout while holding i1 and i2: i1's ack comes back
    // unknown and had not applied (i1 goes to c2); i2's ack applied unseen (no redelivery).
    // c1 prints its delivery of i3 late, after c2's: only the fault explains the duplicate, and
    // the check does not depend on line order.
    let events = [
        delivered("c1", "i1", 1),
        delivered("c1", "i2", 1),
        delivered("c2", "i3", 2),
        delivered("c1", "i3", 1),
        acked("c1", "i1", Unknown),
        acked("c1", "i2", Unknown),
        delivered("c2", "i1", 2),
        acked("c2", "i1", Ok),
        acked("c1", "i3", Failed),
        acked("c2", "i3", Ok),
    ];
    assert_clean("partition", &check_queue(&items, &events, &set(&["c1"]), &[], &[]));
}

#[test]
fn queue_item_acked_ok_by_two_consumers_after_a_partition_is_caught() {
    use WriteOutcome::*;
    let items = strings(&["i1", "i2"]);
    // c1 claims i1 and is partitioned; its session expires, i1 goes to c2, which acks it. Once
    // healed, c1's late ack of i1 reports Ok too, though its claim went with its session.
    let events = [
        delivered("c1", "i1", 1),
        delivered("c2", "i2", 1),
        acked("c2", "i2", Ok),
        delivered("c2", "i1", 2),
        acked("c2", "i1", Ok),
        acked("c1", "i1", Ok),
    ];
    let v = check_queue(&items, &events, &set(&["c1"]), &[], &[]);
    assert_kinds(&v, &[DoubleAck]);
    assert!(v[0].detail.contains("item i1 acked Ok by c2, c1"), "{}", v[0]);
}

#[test]
fn queue_item_never_delivered_is_lost() {
    let items = strings(&["i1", "i2"]);
    let events = [delivered("c1", "i1", 1), acked("c1", "i1", WriteOutcome::Ok)];
    let v = check_queue(&items, &events, &set(&[]), &[], &[]);
    assert_kinds(&v, &[ItemLost]);
    assert!(v[0].detail.contains("item i2"), "{}", v[0]);
}

#[test]
fn queue_item_gone_without_an_ok_ack_or_a_fault_is_lost() {
    let items = strings(&["i1"]);
    let events = [delivered("c1", "i1", 1), acked("c1", "i1", WriteOutcome::Unknown)];
    assert_kinds(&check_queue(&items, &events, &set(&[]), &[], &[]), &[ItemLost]);
    // The same history from a consumer that met a fault: its ack may have applied unseen.
    assert_clean("faulted", &check_queue(&items, &events, &set(&["c1"]), &[], &[]));
}

#[test]
fn queue_one_ack_reported_ok_twice_is_a_double_ack() {
    use WriteOutcome::*;
    let items = strings(&["i1"]);
    let events = [delivered("c1", "i1", 1), acked("c1", "i1", Ok), acked("c1", "i1", Ok)];
    assert_kinds(&check_queue(&items, &events, &set(&[]), &[], &[]), &[DoubleAck]);
}

#[test]
fn queue_item_delivered_to_two_healthy_consumers_is_an_unexplained_duplicate() {
    use WriteOutcome::*;
    let items = strings(&["i1"]);
    let events = [delivered("c1", "i1", 1), delivered("c2", "i1", 2), acked("c2", "i1", Ok), acked("c1", "i1", Failed)];
    let v = check_queue(&items, &events, &set(&[]), &[], &[]);
    assert_kinds(&v, &[UnexplainedDuplicate]);
    assert!(v[0].detail.contains("item i1 delivered to c1, c2"), "{}", v[0]);
}

#[test]
fn queue_item_held_by_a_healthy_consumer_but_acked_by_another_is_an_unexplained_duplicate() {
    use WriteOutcome::*;
    let items = strings(&["i1"]);
    // c1 met a fault and acked i1 Ok, yet i1 was also delivered to c2, which met none: either
    // c2 got an item already removed, or c1's ack removed an item c2 held.
    let events = [delivered("c1", "i1", 1), acked("c1", "i1", Ok), delivered("c2", "i1", 2), acked("c2", "i1", Failed)];
    assert_kinds(&check_queue(&items, &events, &set(&["c1"]), &[], &[]), &[UnexplainedDuplicate]);
}

#[test]
fn queue_item_never_put_is_caught() {
    use WriteOutcome::*;
    let items = strings(&["i1"]);
    let events = [delivered("c1", "i1", 1), acked("c1", "i1", Ok), delivered("c1", "zz", 1), acked("c1", "zz", Ok)];
    let v = check_queue(&items, &events, &set(&[]), &[], &[]);
    assert_kinds(&v, &[UnknownItem]);
    assert_eq!(v.len(), 1, "one violation per item: {v:#?}");
    assert!(v[0].detail.contains("item zz"), "{}", v[0]);
}

#[test]
fn queue_items_and_claims_left_are_caught() {
    use WriteOutcome::*;
    let items = strings(&["i1", "i2", "i3"]);
    let events = [delivered("c1", "i1", 1), acked("c1", "i1", Ok), delivered("c1", "i3", 1)];
    // i2 was never delivered and i3 never acked: both are still there, so nothing is lost.
    let v = check_queue(&items, &events, &set(&[]), &strings(&["i2"]), &strings(&["i3"]));
    assert_kinds(&v, &[Leftover]);
    assert_eq!(v.len(), 2, "{v:#?}");
}

// ---------------------------------------------------------------------------------------------
// Master–worker

fn results(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
    pairs.iter().map(|(t, w)| (t.to_string(), w.map(str::to_string))).collect()
}

fn finished(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(w, t)| (w.to_string(), t.to_string())).collect()
}

#[test]
fn tasks_clean_history_passes() {
    let submitted = strings(&["t1", "t2", "t3"]);
    let recorded = results(&[("t1", Some("w1")), ("t2", Some("w2")), ("t3", Some("w1"))]);
    // w1 was killed after writing t3's result, before reporting it finished.
    let reports = finished(&[("w1", "t1"), ("w2", "t2")]);
    assert_clean("tasks", &check_tasks(&submitted, &recorded, &reports, &[], &[]));
}

#[test]
fn tasks_without_a_result_or_results_without_a_task_are_caught() {
    let submitted = strings(&["t1", "t2", "t3"]);
    let recorded = results(&[("t1", Some("w1")), ("t2", None), ("t9", Some("w2"))]);
    let v = check_tasks(&submitted, &recorded, &finished(&[("w1", "t1")]), &[], &[]);
    assert_kinds(&v, &[TaskResultCount]);
    let details: Vec<&str> = v.iter().map(|v| v.detail.as_str()).collect();
    assert_eq!(
        details,
        [
            "task t2 has no recorded result",
            "task t3 has no recorded result",
            "task t9 has a result (by w2) but was never submitted"
        ]
    );
}

#[test]
fn tasks_finished_reported_by_a_worker_whose_result_was_not_kept_is_caught() {
    let submitted = strings(&["t1"]);
    let v = check_tasks(&submitted, &results(&[("t1", Some("w1"))]), &finished(&[("w2", "t1")]), &[], &[]);
    assert_kinds(&v, &[WrongFinisher]);
    assert_eq!(v[0].detail, "w2 reported task t1 finished, but the recorded result is by w1");
}

#[test]
fn tasks_finished_twice_by_one_worker_is_caught() {
    let submitted = strings(&["t1"]);
    let reports = finished(&[("w1", "t1"), ("w1", "t1")]);
    assert_kinds(&check_tasks(&submitted, &results(&[("t1", Some("w1"))]), &reports, &[], &[]), &[FinishedTwice]);
}

#[test]
fn tasks_finished_by_two_workers_is_caught() {
    let submitted = strings(&["t1"]);
    let reports = finished(&[("w1", "t1"), ("w2", "t1")]);
    let v = check_tasks(&submitted, &results(&[("t1", Some("w1"))]), &reports, &[], &[]);
    assert_kinds(&v, &[WrongFinisher, FinishedTwice]);
}

#[test]
fn tasks_and_assignments_left_are_caught() {
    let submitted = strings(&["t1"]);
    let v = check_tasks(&submitted, &results(&[("t1", Some("w1"))]), &[], &strings(&["t1"]), &strings(&["w1/t1"]));
    assert_kinds(&v, &[Leftover]);
    assert_eq!(v.len(), 2, "{v:#?}");
}

// ---------------------------------------------------------------------------------------------
// Cache

fn tree(nodes: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    nodes.iter().map(|(p, d)| (p.to_string(), d.as_bytes().to_vec())).collect()
}

#[test]
fn cache_equal_to_the_walk_passes() {
    let walk = tree(&[("/c", ""), ("/c/a", "1"), ("/c/a/b", "2")]);
    assert_clean("cache", &check_cache(&walk.clone(), &walk));
}

#[test]
fn cache_missing_a_node_is_caught() {
    let walk = tree(&[("/c", ""), ("/c/a", "1")]);
    let v = check_cache(&tree(&[("/c", "")]), &walk);
    assert_kinds(&v, &[CacheMismatch]);
    assert_eq!(v[0].detail, "/c/a is on the server (\"1\") but not in the cache");
}

#[test]
fn cache_keeping_a_deleted_node_is_caught() {
    let v = check_cache(&tree(&[("/c", ""), ("/c/a", "1")]), &tree(&[("/c", "")]));
    assert_kinds(&v, &[CacheMismatch]);
    assert!(v[0].detail.starts_with("/c/a is in the cache"), "{}", v[0]);
}

#[test]
fn cache_with_stale_data_is_caught() {
    let long = "x".repeat(100);
    let v = check_cache(&tree(&[("/c", "old")]), &tree(&[("/c", &long)]));
    assert_kinds(&v, &[CacheMismatch]);
    assert!(v[0].detail.starts_with("/c: the cache has \"old\", the server \"xxx"), "{}", v[0]);
    assert!(v[0].detail.ends_with("... (100 bytes)"), "long data is shortened: {}", v[0]);
}

// ---------------------------------------------------------------------------------------------
// Leftovers

fn node(path: &str, ephemeral_owner: i64) -> ListedNode {
    ListedNode { path: path.into(), ephemeral_owner }
}

#[test]
fn leftovers_of_live_sessions_pass() {
    let nodes = [node("/lock/_c_1-lock-0000000001", 0x101), node("/lock/_c_2-lock-0000000002", 0x102)];
    assert_clean("leftovers", &check_leftovers(&nodes, &BTreeSet::from([0x103])));
}

#[test]
fn node_of_a_gone_session_is_caught() {
    let nodes = [node("/lock/_c_1-lock-0000000001", 0x101), node("/lock/_c_2-lock-0000000002", 0x102)];
    let v = check_leftovers(&nodes, &BTreeSet::from([0x102]));
    assert_kinds(&v, &[Leftover]);
    assert_eq!(v[0].detail, "/lock/_c_2-lock-0000000002 is owned by session 0x102, which is gone");
}

#[test]
fn persistent_contender_node_is_caught() {
    let v = check_leftovers(&[node("/election/_c_1-latch-0000000001", 0)], &BTreeSet::new());
    assert_kinds(&v, &[PersistentContender]);
}
