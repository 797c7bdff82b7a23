//! History checkers: pure functions that judge a history recorded by a fault scenario, one per
//! recipe. Owns the record types, the checkers, and the parsers of the data the roles write into
//! their history nodes. Not owned here: recording (a scenario builds the records from the roles'
//! lines and from reads of the server), and any I/O, async code or ZooKeeper access.
//!
//! Every checker returns the [`Violation`]s it found, empty when the history keeps every promise
//! the checker judges. A checker only reports what the recorded facts prove: where a fault leaves
//! an outcome unknown, both possible outcomes pass, so a failing check is a broken promise and
//! never bad luck.
//!
//! # What each checker proves
//!
//! **Lock** ([`check_lock`]). Holders increment a counter kept outside the lock protocol,
//! read-modify-write under the lock, and record each increment in the same `multi` as a history
//! node naming the value written, the holder's fencing token and the holder. In commit order:
//! - each accepted write's value is the previous one's plus one, starting at 1. A value not above
//!   its predecessor ([`LostUpdate`](ViolationKind::LostUpdate)) was computed from a counter that
//!   another holder had already changed: two holders acted in the critical section at once (one
//!   wrote after its grant had passed on), and an increment that was acknowledged is gone. A value above it plus one
//!   ([`CounterGap`](ViolationKind::CounterGap)) was computed from a counter value that no
//!   recorded write produced: a write changed the counter without its history node (`multi` is
//!   atomic, so the history lost a node or something else wrote the counter);
//! - the counter's final value is the last accepted write's
//!   ([`FinalCounterMismatch`](ViolationKind::FinalCounterMismatch)): otherwise the counter was
//!   written outside the recorded history. With the value chain above this means the counter
//!   ends at exactly the number of accepted writes;
//! - fencing tokens grow strictly along the accepted writes
//!   ([`TokenNotIncreasing`](ViolationKind::TokenNotIncreasing)): a write under an older grant
//!   landed after one under a newer grant, which is exactly what fencing forbids;
//! - accepted writes match attempts (see *Write outcomes* below).
//!
//! **Election** ([`check_election`]). While leading, a leader writes history nodes naming its
//! term (the fencing token of its leadership), itself and a sequence number, guarded by a check
//! of its leader node. In commit order:
//! - every term's accepted writes come from one writer
//!   ([`TwoLeadersInTerm`](ViolationKind::TwoLeadersInTerm)): a term is one leader's tenure;
//! - terms never go back: once a write of a later term is accepted, no write of an earlier term
//!   is ([`TermWentBack`](ViolationKind::TermWentBack)); otherwise a deposed leader's write landed
//!   after its successor's, which is what the guarded write promises to prevent;
//! - accepted writes match attempts (see *Write outcomes* below).
//!
//! **Write outcomes** (lock and election). Each accepted write is matched to one attempt with the
//! same writer, token/term and value/number, preferring attempts that returned `Ok`, then those
//! whose outcome was unknown, then those that failed; an attempt matches at most one write.
//! - an attempt that returned `Ok` and matched nothing
//!   ([`AckedWriteMissing`](ViolationKind::AckedWriteMissing)): `Ok` promises the effect happened;
//! - an attempt that failed and had to be matched
//!   ([`FailedWriteApplied`](ViolationKind::FailedWriteApplied)): a failure promises nothing was
//!   applied;
//! - an accepted write that no attempt explains ([`PhantomWrite`](ViolationKind::PhantomWrite)):
//!   nobody asked for it;
//! - an accepted write whose attempts are all matched already
//!   ([`WriteAppliedTwice`](ViolationKind::WriteAppliedTwice)): one request took effect twice.
//!
//! An attempt whose outcome is unknown may be present once or absent: both are honest.
//!
//! **Queue, at-least-once** ([`check_queue`]). Consumers report deliveries and the outcomes of
//! their acks; the scenario names the consumers that met a fault (paused, partitioned, killed, or
//! stopped early) and lists what is left in the queue and its claims. The roles never nack and
//! nothing is dead-lettered, so an item leaves the queue only through an ack, and a claim is given
//! up for redelivery only when its holder's session ends, which only a fault does. So:
//! - every item put that is no longer in the queue or its claims was delivered, and if no ack of
//!   it returned `Ok`, it went to at least one consumer that met a fault, whose ack may have
//!   applied unseen ([`ItemLost`](ViolationKind::ItemLost)): otherwise the item vanished (an item
//!   still there is a leftover, not a loss);
//! - no item is acked `Ok` twice ([`DoubleAck`](ViolationKind::DoubleAck)): `Ok` means this ack
//!   removed the item, and an item is removed once;
//! - an item delivered more than once went to at most one consumer that met no fault, and if
//!   that consumer exists while some ack returned `Ok`, it is among the consumers whose ack
//!   returned `Ok` ([`UnexplainedDuplicate`](ViolationKind::UnexplainedDuplicate)): a healthy
//!   consumer keeps its claim until its own ack removes the item, so a second healthy delivery, or
//!   another consumer's `Ok` while a healthy one held the item, means a claim was taken over
//!   without a fault. This is judged without the order of the lines: a paused process may print a
//!   delivery after other processes' later lines;
//! - no item is delivered that was never put ([`UnknownItem`](ViolationKind::UnknownItem));
//! - nothing is left in the queue or its claims ([`Leftover`](ViolationKind::Leftover)).
//!
//! **Master–worker** ([`check_tasks`]). The scenario reads each task's result (the layout keeps
//! one per task, in `status/<task>`) and names its writer with [`result_writer`].
//! - every submitted task has a recorded result, and no result exists for a task that was not
//!   submitted ([`TaskResultCount`](ViolationKind::TaskResultCount)): a task without one was
//!   dropped, a result without a task was made up;
//! - `TaskFinished` is reported only by the worker whose result was recorded
//!   ([`WrongFinisher`](ViolationKind::WrongFinisher)): `TaskFinished` tells a worker that its
//!   result is the recorded one, so any other worker receiving it was told a lie;
//! - no task is reported finished twice ([`FinishedTwice`](ViolationKind::FinishedTwice)): one
//!   task, one result, one `TaskFinished`;
//! - nothing is left under `tasks/` or `assign/` ([`Leftover`](ViolationKind::Leftover)).
//!
//! **Cache** ([`check_cache`]). After the faults heal and the cache has caught up, its snapshot
//! equals a fresh walk of the server, path by path and byte by byte
//! ([`CacheMismatch`](ViolationKind::CacheMismatch)): a cache that missed an event and never
//! repaired it serves stale data for good.
//!
//! **Leftovers** ([`check_leftovers`]). In directories that should hold only ephemeral contender
//! or registration nodes: no node is owned by a session that is gone
//! ([`Leftover`](ViolationKind::Leftover)), and no node is persistent
//! ([`PersistentContender`](ViolationKind::PersistentContender)). Either would outlive its owner
//! and block or mislead every later participant.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// What a write's caller was told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteOutcome {
    /// `Ok` returned: the effect happened.
    Ok,
    /// An error that proves nothing was applied.
    Failed,
    /// The outcome is unknown (connection loss, session lost, timeout while sent, ...).
    Unknown,
}

impl WriteOutcome {
    /// Parses a role's `outcome=` value: `ok`, `failed` or `unknown`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "ok" => Some(Self::Ok),
            "failed" => Some(Self::Failed),
            "unknown" => Some(Self::Unknown),
            _ => None,
        }
    }
}

/// Which promise a history breaks; the module documentation says what each one proves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ViolationKind {
    /// Lock: an accepted value not above its predecessor: an acknowledged increment was erased.
    LostUpdate,
    /// Lock: an accepted value above its predecessor plus one: the counter changed unrecorded.
    CounterGap,
    /// Lock: the counter's final value is not the last accepted write's.
    FinalCounterMismatch,
    /// Lock: an accepted write's token is not above every earlier accepted token.
    TokenNotIncreasing,
    /// A write that returned `Ok` is not in the history.
    AckedWriteMissing,
    /// A write that failed is in the history.
    FailedWriteApplied,
    /// The history holds a write that no attempt explains.
    PhantomWrite,
    /// The history holds one attempt's write twice.
    WriteAppliedTwice,
    /// Election: one term has accepted writes by two writers.
    TwoLeadersInTerm,
    /// Election: a write of an earlier term accepted after one of a later term.
    TermWentBack,
    /// Queue: an item never delivered, or gone without an `Ok` ack or a faulted consumer.
    ItemLost,
    /// Queue: an item acked `Ok` more than once.
    DoubleAck,
    /// Queue: a redelivery that no consumer's fault explains.
    UnexplainedDuplicate,
    /// Queue: a delivery or ack of an item that was never put.
    UnknownItem,
    /// Something left behind: a queue item or claim, a task or assignment, a node of a gone session.
    Leftover,
    /// Tasks: a submitted task without a recorded result, or a result without a task.
    TaskResultCount,
    /// Tasks: `TaskFinished` reported by a worker whose result is not the recorded one.
    WrongFinisher,
    /// Tasks: one task reported finished more than once.
    FinishedTwice,
    /// Cache: the snapshot differs from a walk of the server.
    CacheMismatch,
    /// Leftovers: a persistent node where only ephemeral nodes belong.
    PersistentContender,
}

/// One broken promise, with what it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which promise.
    pub kind: ViolationKind,
    /// The item, task, value or path concerned, and what was seen.
    pub detail: String,
}

impl Violation {
    fn new(kind: ViolationKind, detail: impl Into<String>) -> Self {
        Violation { kind, detail: detail.into() }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.detail)
    }
}

/// The kinds among `violations`, each once.
pub fn kinds(violations: &[Violation]) -> BTreeSet<ViolationKind> {
    violations.iter().map(|v| v.kind).collect()
}

/// Fails the test with every violation, one a line, unless there is none.
pub fn assert_clean(what: &str, violations: &[Violation]) {
    if !violations.is_empty() {
        let lines: Vec<String> = violations.iter().map(|v| format!("  {v}")).collect();
        panic!("{what}: {} violation(s):\n{}", violations.len(), lines.join("\n"));
    }
}

// ---------------------------------------------------------------------------------------------
// Lock

/// A lock holder's attempt to write the counter, as its role reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockWrite {
    /// The holder's participant id.
    pub writer: String,
    /// The fencing token of the grant it wrote under.
    pub token: i64,
    /// The counter value it wrote.
    pub value: u64,
    /// What the write returned.
    pub outcome: WriteOutcome,
}

/// A lock write found in the server's history, in commit order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptedWrite {
    /// The counter value written.
    pub value: u64,
    /// The writer's fencing token.
    pub token: i64,
    /// The writer's participant id.
    pub writer: String,
}

impl AcceptedWrite {
    /// Parses the lock role's history node data, `value=<v> token=<t> writer=<id>`.
    pub fn parse(data: &str) -> Option<Self> {
        let f = fields(data);
        Some(AcceptedWrite {
            value: f.get("value")?.parse().ok()?,
            token: f.get("token")?.parse().ok()?,
            writer: non_empty(f.get("writer")?)?,
        })
    }

    fn describe(&self) -> String {
        format!("value {} (token {}, writer {})", self.value, self.token, self.writer)
    }
}

/// Judges a lock scenario: `attempts` as the holders reported them, `accepted` the history nodes
/// in commit order, `final_counter` the counter's value read at the end.
pub fn check_lock(attempts: &[LockWrite], accepted: &[AcceptedWrite], final_counter: u64) -> Vec<Violation> {
    let mut out = counter_chain(accepted);
    let last = accepted.last().map_or(0, |w| w.value);
    if final_counter != last {
        out.push(Violation::new(
            ViolationKind::FinalCounterMismatch,
            format!("the counter ends at {final_counter}, the last accepted write set {last}"),
        ));
    }
    out.extend(tokens_increasing(accepted));
    let attempts: Vec<_> = attempts.iter().map(|a| ((a.writer.clone(), a.token, a.value), a.outcome)).collect();
    let accepted: Vec<_> = accepted.iter().map(|w| (w.writer.clone(), w.token, w.value)).collect();
    out.extend(match_writes(&attempts, &accepted, |(writer, token, value)| {
        format!("write of value {value} by {writer} (token {token})")
    }));
    out
}

/// The counter before each accepted write is the previous write's value: under mutual exclusion
/// each write adds exactly one to it.
fn counter_chain(accepted: &[AcceptedWrite]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut counter = 0;
    for w in accepted {
        if w.value <= counter {
            let lost = counter - w.value + 1;
            out.push(Violation::new(
                ViolationKind::LostUpdate,
                format!("{} committed when the counter was {counter}: it erased {lost} increment(s)", w.describe()),
            ));
        } else if w.value > counter + 1 {
            out.push(Violation::new(
                ViolationKind::CounterGap,
                format!(
                    "{} committed when the counter was {counter}: no accepted write set {}",
                    w.describe(),
                    w.value - 1
                ),
            ));
        }
        counter = w.value;
    }
    out
}

fn tokens_increasing(accepted: &[AcceptedWrite]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut highest: Option<i64> = None;
    for w in accepted {
        if let Some(h) = highest.filter(|&h| w.token <= h) {
            out.push(Violation::new(
                ViolationKind::TokenNotIncreasing,
                format!("{} committed after a write with token {h}", w.describe()),
            ));
        }
        highest = highest.max(Some(w.token));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Election

/// A leader's attempt to write in its term, as its role reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TermWrite {
    /// The leader's participant id.
    pub writer: String,
    /// The term: the fencing token of its leadership.
    pub term: i64,
    /// The writer's sequence number of this write.
    pub n: u64,
    /// What the write returned.
    pub outcome: WriteOutcome,
}

/// An election write found in the server's history, in commit order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptedTermWrite {
    /// The writer's term.
    pub term: i64,
    /// The writer's participant id.
    pub writer: String,
    /// The writer's sequence number of this write.
    pub n: u64,
}

impl AcceptedTermWrite {
    /// Parses the election role's history node data, `term=<t> writer=<id> n=<k>`.
    pub fn parse(data: &str) -> Option<Self> {
        let f = fields(data);
        Some(AcceptedTermWrite {
            term: f.get("term")?.parse().ok()?,
            writer: non_empty(f.get("writer")?)?,
            n: f.get("n")?.parse().ok()?,
        })
    }
}

/// Judges an election scenario: `attempts` as the leaders reported them, `accepted` the history
/// nodes in commit order.
pub fn check_election(attempts: &[TermWrite], accepted: &[AcceptedTermWrite]) -> Vec<Violation> {
    let mut writers: BTreeMap<i64, BTreeSet<&str>> = BTreeMap::new();
    for w in accepted {
        writers.entry(w.term).or_default().insert(&w.writer);
    }
    let mut out: Vec<Violation> = writers
        .iter()
        .filter(|(_, w)| w.len() > 1)
        .map(|(term, w)| {
            let names: Vec<&str> = w.iter().copied().collect();
            Violation::new(
                ViolationKind::TwoLeadersInTerm,
                format!("term {term} has accepted writes by {}", names.join(", ")),
            )
        })
        .collect();
    let mut latest: Option<i64> = None;
    for w in accepted {
        if let Some(l) = latest.filter(|&l| w.term < l) {
            out.push(Violation::new(
                ViolationKind::TermWentBack,
                format!("write n={} by {} in term {} committed after a write in term {l}", w.n, w.writer, w.term),
            ));
        }
        latest = latest.max(Some(w.term));
    }
    let attempts: Vec<_> = attempts.iter().map(|a| ((a.writer.clone(), a.term, a.n), a.outcome)).collect();
    let accepted: Vec<_> = accepted.iter().map(|w| (w.writer.clone(), w.term, w.n)).collect();
    out.extend(match_writes(&attempts, &accepted, |(writer, term, n)| {
        format!("write n={n} by {writer} in term {term}")
    }));
    out
}

// ---------------------------------------------------------------------------------------------
// Write outcomes

#[derive(Default)]
struct Tally {
    ok: usize,
    unknown: usize,
    failed: usize,
    accepted: usize,
}

/// Matches accepted writes to attempts with the same key. Attempts that returned `Ok` are used
/// first and failed ones last, so a failed attempt is blamed only when nothing else explains the
/// write.
fn match_writes<K: Ord + Clone>(
    attempts: &[(K, WriteOutcome)],
    accepted: &[K],
    describe: impl Fn(&K) -> String,
) -> Vec<Violation> {
    let mut tallies: BTreeMap<K, Tally> = BTreeMap::new();
    for (key, outcome) in attempts {
        let t = tallies.entry(key.clone()).or_default();
        match outcome {
            WriteOutcome::Ok => t.ok += 1,
            WriteOutcome::Unknown => t.unknown += 1,
            WriteOutcome::Failed => t.failed += 1,
        }
    }
    for key in accepted {
        tallies.entry(key.clone()).or_default().accepted += 1;
    }
    let mut out = Vec::new();
    for (key, t) in &tallies {
        let by_ok = t.accepted.min(t.ok);
        let by_unknown = (t.accepted - by_ok).min(t.unknown);
        let by_failed = (t.accepted - by_ok - by_unknown).min(t.failed);
        let unmatched = t.accepted - by_ok - by_unknown - by_failed;
        let what = describe(key);
        if t.ok > by_ok {
            out.push(Violation::new(
                ViolationKind::AckedWriteMissing,
                format!("{what} returned Ok {} time(s) but is in the history {} time(s)", t.ok, t.accepted),
            ));
        }
        if by_failed > 0 {
            out.push(Violation::new(ViolationKind::FailedWriteApplied, format!("{what} failed but is in the history")));
        }
        if unmatched > 0 && t.ok + t.unknown + t.failed == 0 {
            out.push(Violation::new(
                ViolationKind::PhantomWrite,
                format!("{what} is in the history, nobody attempted it"),
            ));
        } else if unmatched > 0 {
            out.push(Violation::new(
                ViolationKind::WriteAppliedTwice,
                format!(
                    "{what} is in the history {} time(s), attempted {} time(s)",
                    t.accepted,
                    t.ok + t.unknown + t.failed
                ),
            ));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Queue

/// What happened to one item at one consumer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueEventKind {
    /// The item was delivered (claimed).
    Delivered {
        /// The item's data.
        item: String,
        /// The delivery's attempt number.
        attempt: u32,
    },
    /// The consumer acked the item.
    Acked {
        /// The item's data.
        item: String,
        /// What the ack returned.
        outcome: WriteOutcome,
    },
}

/// One consumer's report about one item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueEvent {
    /// The consumer's participant id.
    pub consumer: String,
    /// What happened.
    pub kind: QueueEventKind,
}

impl QueueEvent {
    /// `item` delivered to `consumer` on attempt `attempt`.
    pub fn delivered(consumer: &str, item: &str, attempt: u32) -> Self {
        QueueEvent { consumer: consumer.into(), kind: QueueEventKind::Delivered { item: item.into(), attempt } }
    }

    /// `consumer` acked `item`, told `outcome`.
    pub fn acked(consumer: &str, item: &str, outcome: WriteOutcome) -> Self {
        QueueEvent { consumer: consumer.into(), kind: QueueEventKind::Acked { item: item.into(), outcome } }
    }

    fn item(&self) -> &str {
        match &self.kind {
            QueueEventKind::Delivered { item, .. } | QueueEventKind::Acked { item, .. } => item,
        }
    }
}

/// One item's deliveries and `Ok` acks, by consumer.
#[derive(Default)]
struct ItemHistory<'a> {
    delivered_to: Vec<&'a str>,
    acked_ok_by: Vec<&'a str>,
}

/// Judges an at-least-once queue scenario: `items` all put, `events` every consumer's reports,
/// `faulted` the consumers that met a fault, and what is left in the queue and its claims. The
/// order of `events` does not matter.
pub fn check_queue(
    items: &[String],
    events: &[QueueEvent],
    faulted: &BTreeSet<String>,
    left_in_queue: &[String],
    left_claims: &[String],
) -> Vec<Violation> {
    let put: BTreeSet<&str> = items.iter().map(String::as_str).collect();
    let left: BTreeSet<&str> = left_in_queue.iter().chain(left_claims).map(String::as_str).collect();
    let mut histories: BTreeMap<&str, ItemHistory> = BTreeMap::new();
    let mut out = Vec::new();
    for e in events {
        if !put.contains(e.item()) && !histories.contains_key(e.item()) {
            out.push(Violation::new(
                ViolationKind::UnknownItem,
                format!("item {} reported by {} was never put", e.item(), e.consumer),
            ));
        }
        let h = histories.entry(e.item()).or_default();
        match &e.kind {
            QueueEventKind::Delivered { .. } => h.delivered_to.push(&e.consumer),
            QueueEventKind::Acked { outcome: WriteOutcome::Ok, .. } => h.acked_ok_by.push(&e.consumer),
            QueueEventKind::Acked { .. } => {}
        }
    }
    let none = ItemHistory::default();
    for item in items {
        let h = histories.get(item.as_str()).unwrap_or(&none);
        if !left.contains(item.as_str()) {
            out.extend(item_lost(item, h, faulted));
        }
        if h.acked_ok_by.len() > 1 {
            out.push(Violation::new(
                ViolationKind::DoubleAck,
                format!("item {item} acked Ok by {}", h.acked_ok_by.join(", ")),
            ));
        }
        out.extend(unexplained_duplicate(item, h, faulted));
    }
    for item in left_in_queue {
        out.push(Violation::new(ViolationKind::Leftover, format!("item {item} left in the queue")));
    }
    for claim in left_claims {
        out.push(Violation::new(ViolationKind::Leftover, format!("claim {claim} left in the queue's claims")));
    }
    out
}

/// An item that is no longer in the queue was removed by an ack; only a consumer that met a
/// fault can have missed its ack's success.
fn item_lost(item: &str, h: &ItemHistory, faulted: &BTreeSet<String>) -> Option<Violation> {
    if h.delivered_to.is_empty() {
        return Some(Violation::new(ViolationKind::ItemLost, format!("item {item} was never delivered and is gone")));
    }
    let any_faulted = h.delivered_to.iter().any(|c| faulted.contains(*c));
    (h.acked_ok_by.is_empty() && !any_faulted).then(|| {
        Violation::new(
            ViolationKind::ItemLost,
            format!(
                "item {item} is gone, no ack of it returned Ok, and it went only to consumers that met no fault ({})",
                h.delivered_to.join(", ")
            ),
        )
    })
}

/// A healthy consumer keeps its claim until its own ack removes the item, so of an item's
/// deliveries at most one went to a healthy consumer, and that one is the `Ok` ack's.
fn unexplained_duplicate(item: &str, h: &ItemHistory, faulted: &BTreeSet<String>) -> Option<Violation> {
    if h.delivered_to.len() < 2 {
        return None;
    }
    let healthy: Vec<&str> = h.delivered_to.iter().copied().filter(|c| !faulted.contains(*c)).collect();
    let all = h.delivered_to.join(", ");
    match healthy[..] {
        [] => None,
        [one] if h.acked_ok_by.is_empty() || h.acked_ok_by.contains(&one) => None,
        [one] => Some(Violation::new(
            ViolationKind::UnexplainedDuplicate,
            format!(
                "item {item} delivered to {all}; {one} met no fault, yet only {} acked it Ok",
                h.acked_ok_by.join(", ")
            ),
        )),
        _ => Some(Violation::new(
            ViolationKind::UnexplainedDuplicate,
            format!(
                "item {item} delivered to {all}; {} of these deliveries went to consumers that met no fault",
                healthy.len()
            ),
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Master–worker

/// Parses the writer out of a task result, `<data>|by=<id>`.
pub fn result_writer(result: &str) -> Option<String> {
    non_empty(result.rsplit_once("|by=")?.1)
}

/// Judges a master–worker scenario: `submitted` tasks, `results` each task's recorded result's
/// writer (None if no result), `finished` every `(worker, task)` TaskFinished report, and what is
/// left under `tasks/` and `assign/`.
pub fn check_tasks(
    submitted: &[String],
    results: &BTreeMap<String, Option<String>>,
    finished: &[(String, String)],
    left_tasks: &[String],
    left_assigned: &[String],
) -> Vec<Violation> {
    let mut out = Vec::new();
    for task in submitted {
        if !matches!(results.get(task), Some(Some(_))) {
            out.push(Violation::new(ViolationKind::TaskResultCount, format!("task {task} has no recorded result")));
        }
    }
    let known: BTreeSet<&String> = submitted.iter().collect();
    for (task, writer) in results.iter().filter(|(t, w)| w.is_some() && !known.contains(t)) {
        let by = writer.as_deref().unwrap_or_default();
        out.push(Violation::new(
            ViolationKind::TaskResultCount,
            format!("task {task} has a result (by {by}) but was never submitted"),
        ));
    }
    let mut finishers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (worker, task) in finished {
        finishers.entry(task).or_default().push(worker);
        let recorded = results.get(task).cloned().flatten();
        if recorded.as_deref() != Some(worker.as_str()) {
            let by = recorded.map_or("no recorded result".to_string(), |w| format!("the recorded result is by {w}"));
            out.push(Violation::new(
                ViolationKind::WrongFinisher,
                format!("{worker} reported task {task} finished, but {by}"),
            ));
        }
    }
    for (task, workers) in finishers.iter().filter(|(_, w)| w.len() > 1) {
        out.push(Violation::new(
            ViolationKind::FinishedTwice,
            format!("task {task} reported finished {} times, by {}", workers.len(), workers.join(", ")),
        ));
    }
    for task in left_tasks {
        out.push(Violation::new(ViolationKind::Leftover, format!("task {task} left under tasks/")));
    }
    for assigned in left_assigned {
        out.push(Violation::new(ViolationKind::Leftover, format!("assignment {assigned} left under assign/")));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Cache

/// Judges a cache after the faults healed: `snapshot` its view (path to data), `walk` a fresh
/// walk of the server's subtree.
pub fn check_cache(snapshot: &BTreeMap<String, Vec<u8>>, walk: &BTreeMap<String, Vec<u8>>) -> Vec<Violation> {
    let mut out = Vec::new();
    for (path, data) in walk {
        match snapshot.get(path) {
            None => out.push(Violation::new(
                ViolationKind::CacheMismatch,
                format!("{path} is on the server ({}) but not in the cache", show(data)),
            )),
            Some(cached) if cached != data => out.push(Violation::new(
                ViolationKind::CacheMismatch,
                format!("{path}: the cache has {}, the server {}", show(cached), show(data)),
            )),
            Some(_) => {}
        }
    }
    for (path, cached) in snapshot.iter().filter(|(p, _)| !walk.contains_key(*p)) {
        out.push(Violation::new(
            ViolationKind::CacheMismatch,
            format!("{path} is in the cache ({}) but not on the server", show(cached)),
        ));
    }
    out
}

/// Node data for a message: text if it is, shortened.
fn show(data: &[u8]) -> String {
    const MAX: usize = 40;
    let text = String::from_utf8_lossy(data);
    if text.chars().count() <= MAX {
        format!("{text:?}")
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{head:?}... ({} bytes)", data.len())
    }
}

// ---------------------------------------------------------------------------------------------
// Leftovers

/// A node listed under a directory of contender or registration nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedNode {
    /// The node's path.
    pub path: String,
    /// The session that owns it; 0 for a persistent node.
    pub ephemeral_owner: i64,
}

/// Judges the listing of directories that should hold only ephemeral nodes of live sessions;
/// `gone_sessions` are the sessions known to have ended.
pub fn check_leftovers(nodes: &[ListedNode], gone_sessions: &BTreeSet<i64>) -> Vec<Violation> {
    nodes
        .iter()
        .filter_map(|n| {
            if n.ephemeral_owner == 0 {
                Some(Violation::new(
                    ViolationKind::PersistentContender,
                    format!("{} is persistent where only ephemeral nodes belong", n.path),
                ))
            } else if gone_sessions.contains(&n.ephemeral_owner) {
                Some(Violation::new(
                    ViolationKind::Leftover,
                    format!("{} is owned by session {:#x}, which is gone", n.path, n.ephemeral_owner),
                ))
            } else {
                None
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Parsing

/// `key=value` pairs separated by spaces; other words are ignored.
fn fields(data: &str) -> BTreeMap<&str, &str> {
    data.split_whitespace().filter_map(|w| w.split_once('=')).collect()
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}
