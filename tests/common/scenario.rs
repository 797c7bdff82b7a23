//! Fault scenarios across processes: a cluster (a standalone server, or a 3-node
//! ensemble whose member links run through fault proxies), role processes (`zk-role`) that each
//! reach the cluster through fault proxies of their own, the faults a production client meets,
//! and an observer session, connected directly, that reads what the server holds.
//!
//! This module owns the *mechanics* of a scenario: starting, injecting a fault, collecting lines.
//! What a history must satisfy is judged by the pure checkers in [`super::history`]; what each
//! recipe's workload is lives in its own `tests/scenarios_<recipe>.rs`.
//!
//! Every scenario runs once in CI's short profile; `ZK_SOAK=<n>` multiplies its rounds by `n`
//! for soak runs (see `docs/testing.md`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{ClientLinks, RoleLine, RoleProcess, ZkEnsemble, ZkServer, unique_root};
use actix_zookeeper::{NodeData, Stat};

use super::history::{ListedNode, Violation, ViolationKind, assert_clean, check_leftovers};
use super::{config, connected};

/// The session timeout of every role process: short, so that a pause or a partition past it
/// costs seconds, not minutes.
pub const SESSION_TIMEOUT: Duration = Duration::from_millis(2000);

/// Long enough that the server has expired the session, and the client has noticed (it declares
/// expiry only at 7/5 of the timeout, after the server): 2.5 timeouts.
pub const PAST_TIMEOUT: Duration = Duration::from_millis(5000);

/// Inside the session timeout, so the session must survive it, yet long enough that the client
/// notices: zookeeper-client gives a silent connection up after 8/20 of the session timeout
/// (800 ms here), and the server expires the session only a whole timeout after the last ping
/// it heard (≤ 300 ms before the cut).
pub const WITHIN_TIMEOUT: Duration = Duration::from_millis(1200);

/// How long an isolated leader's followers get to elect a new one.
pub const ISOLATION_WAIT: Duration = Duration::from_secs(20);

/// How long a scenario waits for any one thing before it fails.
pub const WAIT: Duration = Duration::from_secs(60);

/// Once an ensemble fault shows in one participant's lines, how long the others' lines get to
/// show it too: a client prints its suspension when it notices the lost connection, which may
/// be after the fault was healed, and the lines then cross a pipe.
pub const REACH_GRACE: Duration = Duration::from_secs(2);

/// How long one scenario may take in the short profile (times `ZK_SOAK` in a soak run).
pub const SCENARIO_LIMIT: Duration = Duration::from_secs(120);

/// Runs a scenario, failing it if it takes longer than [`SCENARIO_LIMIT`] (times `ZK_SOAK`).
pub async fn within_limit<T>(scenario: impl std::future::Future<Output = T>) -> T {
    let limit = SCENARIO_LIMIT * rounds(1) as u32;
    match actix_rt::time::timeout(limit, scenario).await {
        Ok(out) => out,
        Err(_) => panic!("the scenario took longer than {limit:?}"),
    }
}

/// The rounds of a workload: `short` in CI, `short × ZK_SOAK` in a soak run.
pub fn rounds(short: usize) -> usize {
    let soak = std::env::var("ZK_SOAK").ok().and_then(|s| s.parse::<usize>().ok()).unwrap_or(1).max(1);
    short * soak
}

/// A defect a scenario exposes today that a later issue fixes: its violations are reported
/// loudly instead of failing the run, so that the scenario keeps guarding everything else in CI.
/// The issue that fixes the defect removes the entry, and the scenario becomes its regression
/// test.
#[derive(Debug, Clone, Copy)]
pub struct KnownDefect {
    /// The violation it shows as.
    pub kind: ViolationKind,
    /// Where it is tracked and what it is.
    pub tracked_by: &'static str,
}

/// Fails the scenario for any violation that is not of a [`KnownDefect`]'s kind.
pub fn judge(name: &str, violations: &[Violation], known: &[KnownDefect]) {
    let (tolerated, failing): (Vec<&Violation>, Vec<&Violation>) =
        violations.iter().partition(|v| known.iter().any(|k| k.kind == v.kind));
    for defect in known {
        let shown = tolerated.iter().filter(|v| v.kind == defect.kind).count();
        if shown > 0 {
            eprintln!("{name}: KNOWN DEFECT ({}) showed {shown} time(s):", defect.tracked_by);
            tolerated.iter().filter(|v| v.kind == defect.kind).for_each(|v| eprintln!("  {v}"));
        }
    }
    let failing: Vec<Violation> = failing.into_iter().cloned().collect();
    assert_clean(name, &failing);
}

/// The faults a scenario injects, each into one victim participant at a moment the workload
/// chooses (e.g. while it holds a lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGSTOP past the session timeout, then SIGCONT.
    Pause,
    /// The victim's links blackholed for less than the session timeout, then healed.
    ShortPartition,
    /// The victim's links blackholed past the session timeout, then healed.
    LongPartition,
    /// SIGKILL of the victim process; it is not restarted.
    KillClient,
    /// SIGKILL of the ensemble's leader; restarted after a while.
    KillLeader,
    /// The ensemble's leader cut off from its followers, then healed.
    IsolateLeader,
}

impl Fault {
    /// Whether the fault needs a 3-node ensemble.
    pub fn needs_ensemble(self) -> bool {
        matches!(self, Fault::KillLeader | Fault::IsolateLeader)
    }

    /// Whether the victim's session may end because of this fault (so duplicates, unknown
    /// outcomes and lost grants are allowed for it).
    pub fn may_end_session(self) -> bool {
        !matches!(self, Fault::ShortPartition)
    }

    /// Whether the victim process keeps running after the fault.
    pub fn victim_survives(self) -> bool {
        self != Fault::KillClient
    }
}

/// The servers of a scenario.
pub enum Servers {
    /// One standalone server.
    Standalone(ZkServer),
    /// A 3-node ensemble with proxied member links.
    Ensemble(ZkEnsemble),
}

impl Servers {
    /// The client address of every server.
    pub fn addresses(&self) -> Vec<String> {
        match self {
            Servers::Standalone(server) => vec![server.address()],
            Servers::Ensemble(ensemble) => (0..ensemble.len()).map(|i| ensemble.member_address(i)).collect(),
        }
    }

    /// A direct connect string (no proxies), for the observer.
    pub fn connect_string(&self) -> String {
        self.addresses().join(",")
    }

    /// The ensemble; panics for a standalone server (a scenario bug).
    pub fn ensemble(&mut self) -> &mut ZkEnsemble {
        match self {
            Servers::Ensemble(ensemble) => ensemble,
            Servers::Standalone(_) => panic!("this fault needs an ensemble"),
        }
    }
}

/// One role process and the fault proxies that are its only way to the servers.
pub struct Participant {
    /// The participant id (`--id`).
    pub id: String,
    /// The process.
    pub process: RoleProcess,
    /// Its links to every server.
    pub links: ClientLinks,
    /// What the faults did to it.
    pub fate: Fate,
}

/// What the faults of a scenario did to a participant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Nothing that could have ended its session.
    Untouched,
    /// A fault that could have ended its session; the process lives on.
    Faulted,
    /// Its process was killed.
    Killed,
}

impl Participant {
    /// Whether it met a fault that could have ended its session or its process.
    pub fn faulted(&self) -> bool {
        self.fate != Fate::Untouched
    }

    /// Whether its process was killed.
    pub fn killed(&self) -> bool {
        self.fate == Fate::Killed
    }
}

/// Where the participants stood when an ensemble fault began. An ensemble fault is aimed at no
/// participant in particular: whom it reached is told by what changed for each since then.
struct FaultStart {
    /// Each participant's line count: its lines from there on may show the fault.
    lines: Vec<usize>,
    /// The links each participant had a connection open through: the server it talked to.
    links: Vec<BTreeSet<usize>>,
}

/// A running scenario.
pub struct Scenario {
    /// What runs the servers.
    pub servers: Servers,
    /// The chroot every participant and the observer share.
    pub chroot: String,
    /// The role processes, in the order they were spawned.
    pub participants: Vec<Participant>,
    /// A session of the test itself, connected directly (never through a proxy), under `chroot`.
    pub observer: SessionHandle,
    /// Set by [`inject`](Self::inject) for an ensemble fault, until
    /// [`prove_session_fault`](Self::prove_session_fault) has judged whom it reached.
    ensemble_fault: Option<FaultStart>,
}

impl Scenario {
    /// Starts the servers the fault needs and an observer session under a fresh chroot.
    pub async fn start(name: &str, fault: Fault) -> Scenario {
        super::init_tracing();
        let servers = if fault.needs_ensemble() {
            Servers::Ensemble(ZkEnsemble::start(3).expect("3-node ensemble"))
        } else {
            Servers::Standalone(ZkServer::start().expect("ZooKeeper"))
        };
        let chroot = unique_root(name);
        let cfg = config(&servers.connect_string(), name).with_chroot(chroot.clone());
        let (observer, _) = connected(cfg).await;
        Scenario { servers, chroot, participants: Vec::new(), observer, ensemble_fault: None }
    }

    /// Spawns `zk-role <role> --id <id> ... <extra>` connected through proxies of its own;
    /// returns its index once it has printed `ready`.
    pub async fn spawn(&mut self, role: &str, id: &str, extra: &[&str]) -> usize {
        let addresses = self.servers.addresses();
        let addresses: Vec<&str> = addresses.iter().map(String::as_str).collect();
        let links = ClientLinks::to(&addresses).expect("fault proxies");
        let timeout_ms = SESSION_TIMEOUT.as_millis().to_string();
        let connect = links.connect_string();
        let mut args = vec![
            role,
            "--connect",
            connect.as_str(),
            "--chroot",
            self.chroot.as_str(),
            "--id",
            id,
            "--session-timeout-ms",
            timeout_ms.as_str(),
        ];
        args.extend_from_slice(extra);
        let process = RoleProcess::spawn(env!("CARGO_BIN_EXE_zk-role"), &args).expect("spawn zk-role");
        self.participants.push(Participant { id: id.to_owned(), process, links, fate: Fate::Untouched });
        let index = self.participants.len() - 1;
        self.wait_line(index, 0, "ready", |l| l.kind == "ready").await;
        index
    }

    /// Waits (without blocking the actix thread) for a line of participant `index`, at line
    /// `from` or later; returns its position and the line.
    pub async fn wait_line(
        &self,
        index: usize,
        from: usize,
        what: &str,
        pred: impl Fn(&RoleLine) -> bool,
    ) -> (usize, RoleLine) {
        let deadline = Instant::now() + WAIT;
        loop {
            let lines = self.participants[index].process.lines();
            if let Some((i, l)) = lines.iter().enumerate().skip(from).find(|(_, l)| pred(l)) {
                return (i, l.clone());
            }
            if Instant::now() > deadline {
                panic!(
                    "participant {} printed no {what} within {WAIT:?}; its lines:\n{}",
                    self.participants[index].id,
                    lines.iter().map(|l| l.raw.as_str()).collect::<Vec<_>>().join("\n")
                );
            }
            actix_rt::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until every participant that was not killed has printed a line matching `pred`.
    pub async fn wait_all(&self, what: &str, pred: impl Fn(&RoleLine) -> bool) {
        for (i, p) in self.participants.iter().enumerate() {
            if !p.killed() {
                self.wait_line(i, 0, what, &pred).await;
            }
        }
    }

    /// Injects `fault` into participant `victim` (or, for the ensemble faults, into the servers
    /// while `victim` is in the middle of its work) and heals it, except a killed client.
    /// Returns once the fault is over. An ensemble fault's reach is judged afterwards, by
    /// [`prove_session_fault`](Self::prove_session_fault), which every scenario must call.
    pub async fn inject(&mut self, fault: Fault, victim: usize) {
        tracing::warn!(?fault, victim = %self.participants[victim].id, "injecting fault");
        if fault.needs_ensemble() {
            self.ensemble_fault = Some(self.where_participants_stand());
        }
        match fault {
            Fault::Pause => {
                let p = &self.participants[victim].process;
                p.pause().expect("SIGSTOP");
                actix_rt::time::sleep(PAST_TIMEOUT).await;
                p.resume().expect("SIGCONT");
            }
            Fault::ShortPartition => {
                self.participants[victim].links.blackhole();
                actix_rt::time::sleep(WITHIN_TIMEOUT).await;
                self.participants[victim].links.heal();
            }
            Fault::LongPartition => {
                self.participants[victim].links.blackhole();
                actix_rt::time::sleep(PAST_TIMEOUT).await;
                self.participants[victim].links.heal();
            }
            Fault::KillClient => {
                self.participants[victim].process.kill().expect("SIGKILL");
                self.participants[victim].fate = Fate::Killed;
            }
            Fault::KillLeader => {
                let ensemble = self.servers.ensemble();
                let leader = ensemble.leader().expect("an ensemble leader");
                ensemble.kill_member(leader).expect("kill -9 the leader");
                actix_rt::time::sleep(PAST_TIMEOUT).await;
                ensemble.restart_member(leader).expect("restart the old leader");
            }
            Fault::IsolateLeader => {
                let ensemble = self.servers.ensemble();
                // The old leader steps down once it misses its quorum (syncLimit ticks, 1 s) and
                // the others elect one of them within seconds. Once in a few dozen runs no new
                // leader came within 20 s (cause not found yet; the members' logs are printed):
                // then the ensemble is healed and the isolation tried once more, so that the
                // scenario judges the recipe, not the election.
                let mut isolated = false;
                for attempt in 1..=2 {
                    let leader = ensemble.leader().expect("an ensemble leader");
                    ensemble.isolate(leader);
                    let deadline = Instant::now() + ISOLATION_WAIT;
                    while Instant::now() < deadline {
                        if ensemble.wait_for_leader(Duration::ZERO).is_ok_and(|new| new != leader) {
                            isolated = true;
                            break;
                        }
                        actix_rt::time::sleep(Duration::from_millis(50)).await;
                    }
                    if isolated {
                        break;
                    }
                    let logs: Vec<String> =
                        (0..ensemble.len()).map(|i| format!("member {i}:\n{}", ensemble.member_log_tail(i))).collect();
                    eprintln!(
                        "attempt {attempt}: no new leader {ISOLATION_WAIT:?} after isolating member {leader}; healing\n{}",
                        logs.join("\n")
                    );
                    ensemble.heal();
                    ensemble.wait_for_leader(WAIT).expect("a leader after healing");
                }
                assert!(isolated, "no new leader after isolating the leader, twice");
                actix_rt::time::sleep(WITHIN_TIMEOUT).await;
                ensemble.heal();
            }
        }
        // A client fault may cost the victim its session. An ensemble fault may cost any
        // participant its session, but marking all of them would let the checkers excuse
        // everyone; whom it reached shows in each one's own lines, some printed after the fault
        // is over, so `prove_session_fault` marks them.
        if fault.may_end_session() && !fault.needs_ensemble() {
            let p = &mut self.participants[victim];
            if p.fate == Fate::Untouched {
                p.fate = Fate::Faulted;
            }
        }
    }

    /// Proves that a fault bit as it should.
    ///
    /// A fault aimed at the victim's session: past the session timeout (pause, long partition)
    /// its session expired; within it (short partition) it was suspended and came back on the
    /// same session, never expired. `from` is the victim's first line that may show it.
    ///
    /// An ensemble fault (leader killed or isolated): that it was not only followed by a write,
    /// but reached participants, and which (see `prove_ensemble_fault`); those, and only those,
    /// are marked [`Fate::Faulted`]. Every participant's lines are judged from the moment the
    /// fault began, not from `from`.
    ///
    /// A killed client: nothing here (each scenario proves that another took its work over).
    pub async fn prove_session_fault(&mut self, fault: Fault, victim: usize, from: usize) {
        let state_is = |state: &'static str| move |l: &RoleLine| l.kind == "session" && l.get("state") == Some(state);
        match fault {
            Fault::Pause | Fault::LongPartition => {
                self.wait_line(victim, from, "its session's expiry", state_is("expired")).await;
            }
            Fault::ShortPartition => {
                let (i, _) = self.wait_line(victim, from, "suspended", state_is("suspended")).await;
                self.wait_line(victim, i, "reconnected", state_is("reconnected")).await;
                assert!(
                    !self.lines(victim)[from..].iter().any(state_is("expired")),
                    "a partition within the session timeout must not cost the session"
                );
            }
            Fault::KillLeader | Fault::IsolateLeader => self.prove_ensemble_fault(fault).await,
            Fault::KillClient => {}
        }
    }

    /// Waits (at most [`WAIT`]) until the ensemble fault [`inject`](Self::inject) began shows for
    /// some participant, then [`REACH_GRACE`] more for the others, and marks those it reached
    /// [`Fate::Faulted`]. The others stay [`Fate::Untouched`]: the checkers judge them as strictly
    /// as in a run without faults, so that the fault excuses nobody it did not reach.
    ///
    /// Both faults should reach every participant: a follower that loses its leader, and a
    /// leader that loses its quorum, close all their client connections while they look for a
    /// new leader, and the killed leader's connections die with it. A participant the fault did
    /// not reach is reported, not failed: this proves the fault happened to the recipe, and the
    /// checkers judge what it did about it.
    async fn prove_ensemble_fault(&mut self, fault: Fault) {
        let start = self
            .ensemble_fault
            .take()
            .unwrap_or_else(|| panic!("prove_session_fault({fault:?}) without inject({fault:?}) before it"));
        let live = self.participants.iter().filter(|p| !p.killed()).count();
        let deadline = Instant::now() + WAIT;
        let mut reached = self.reached(&start);
        while reached.is_empty() {
            if Instant::now() > deadline {
                panic!(
                    "the ensemble fault reached no participant: within {WAIT:?} of {fault:?} none printed a \
                     suspended or expired session, and none moved to another server; what they printed:\n{}",
                    self.transcript()
                );
            }
            actix_rt::time::sleep(Duration::from_millis(50)).await;
            reached = self.reached(&start);
        }
        let grace = Instant::now() + REACH_GRACE;
        while reached.len() < live && Instant::now() < grace {
            actix_rt::time::sleep(Duration::from_millis(50)).await;
            reached = self.reached(&start);
        }
        // Excused (judged as faulted) is only a participant whose session may have ended: one
        // that printed `expired`, or was suspended and never came back. One suspended that
        // reconnected on its session kept its ephemerals and claims, as in a short partition,
        // and is judged strictly.
        for (i, evidence) in &reached {
            let ended = self.session_outcome(*i, start.lines[*i]).await;
            let p = &mut self.participants[*i];
            eprintln!(
                "{fault:?} reached {}: {evidence}; its session {}",
                p.id,
                if ended { "may have ended" } else { "lived on" }
            );
            if ended && p.fate == Fate::Untouched {
                p.fate = Fate::Faulted;
            }
        }
        for (i, p) in self.participants.iter().enumerate() {
            if !p.killed() && !reached.iter().any(|(r, _)| *r == i) {
                eprintln!("{fault:?} did not reach {}: it is judged as untouched", p.id);
            }
        }
    }

    /// Waits (up to [`WAIT`]) until participant `index`'s session, suspended since line `from`,
    /// either came back (`reconnected` after its last suspension: false) or ended (`expired`, or
    /// still not back at the bound: true).
    async fn session_outcome(&self, index: usize, from: usize) -> bool {
        let deadline = Instant::now() + WAIT;
        loop {
            let lines = self.lines(index);
            let states: Vec<&str> =
                lines.iter().skip(from).filter(|l| l.kind == "session").filter_map(|l| l.get("state")).collect();
            if states.contains(&"expired") {
                return true;
            }
            let last_suspension = states.iter().rposition(|s| *s == "suspended");
            let back = match last_suspension {
                Some(at) => states[at..].contains(&"reconnected"),
                None => true,
            };
            if back {
                return false;
            }
            if Instant::now() > deadline {
                return true;
            }
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Where every participant stands now: its line count and the links it has a connection
    /// open through.
    fn where_participants_stand(&self) -> FaultStart {
        FaultStart {
            lines: self.participants.iter().map(|p| p.process.line_count()).collect(),
            links: (0..self.participants.len()).map(|i| self.links_in_use(i)).collect(),
        }
    }

    /// The links participant `index` has a connection open through (one link per server).
    fn links_in_use(&self, index: usize) -> BTreeSet<usize> {
        let links = &self.participants[index].links;
        (0..links.len()).filter(|&k| links.proxy(k).connections() > 0).collect()
    }

    /// The live participants the ensemble fault that began at `start` has reached so far, each
    /// with what shows it: a `suspended` or `expired` session line since, or connections through
    /// other links than then (it lost its server, or moved to another). The lines are what the
    /// recipe itself heard; the links are looked at too because the client library reports
    /// only its latest state, so a connection lost and at once made to another server might
    /// print no suspension, yet requests in flight on it were cut off all the same.
    fn reached(&self, start: &FaultStart) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for (i, p) in self.participants.iter().enumerate() {
            if p.killed() {
                continue;
            }
            let lines = p.process.lines();
            let shown = lines
                .iter()
                .skip(start.lines[i])
                .find(|l| l.kind == "session" && matches!(l.get("state"), Some("suspended" | "expired")));
            if let Some(l) = shown {
                out.push((i, format!("printed `{}`", l.raw)));
                continue;
            }
            let now = self.links_in_use(i);
            if now != start.links[i] {
                out.push((i, format!("its connections went from links {:?} to {:?}", start.links[i], now)));
            }
        }
        out
    }

    /// Closes every live participant's stdin and waits for it to exit 0.
    pub fn finish_all(&mut self) {
        for p in self.participants.iter_mut().filter(|p| !p.killed()) {
            let status = p.process.finish(WAIT).expect("role exits");
            assert!(status.success(), "{} exited with {status}", p.id);
        }
    }

    /// The lines of participant `index`.
    pub fn lines(&self, index: usize) -> Vec<RoleLine> {
        self.participants[index].process.lines()
    }

    /// `(participant id, line)` for every line of every participant, participant by participant.
    pub fn all_lines(&self) -> Vec<(String, RoleLine)> {
        self.participants.iter().flat_map(|p| p.process.lines().into_iter().map(move |l| (p.id.clone(), l))).collect()
    }

    /// The children of `dir` and the stat of each (empty if `dir` does not exist), read by the
    /// observer; connection problems are retried (an ensemble fault may be moving it).
    pub async fn listing(&self, dir: &str) -> Vec<(String, Stat, Vec<u8>)> {
        let mut out = Vec::new();
        for name in super::children(&self.observer, dir).await {
            let path = format!("{}/{name}", dir.trim_end_matches('/'));
            if let Some(node) = self.read(&path).await {
                out.push((name, node.stat, node.data));
            }
        }
        out
    }

    /// Every line of every participant, labelled, in time order: the post-mortem of a run whose
    /// history broke a promise.
    pub fn transcript(&self) -> String {
        let mut lines = self.all_lines();
        lines.sort_by_key(|(_, l)| l.at_ms);
        lines.iter().map(|(id, l)| format!("{id}: {}", l.raw)).collect::<Vec<_>>().join("\n")
    }

    /// Every session id any participant printed as `session state=connected session=<hex>`.
    pub fn participant_sessions(&self) -> BTreeSet<i64> {
        self.all_lines()
            .iter()
            .filter(|(_, l)| l.kind == "session" && l.get("state") == Some("connected"))
            .filter_map(|(_, l)| l.get("session"))
            .filter_map(|hex| i64::from_str_radix(hex.trim_start_matches("0x"), 16).ok())
            .collect()
    }

    /// The checker's verdict on the nodes left under `dir` once the participants are done with
    /// it. A node of a live session must go as soon as its owner is done (a resign's delete may
    /// still be on its way when the resign returns), and a node of a session its client gave up
    /// must go when the server expires that session: so whatever is still there after two
    /// session timeouts is judged, and every node a participant's session made is a leftover,
    /// as is any persistent node.
    pub async fn leftovers(&self, dir: &str) -> Vec<Violation> {
        let deadline = Instant::now() + 2 * SESSION_TIMEOUT;
        let mut left = self.listing(dir).await;
        while !left.is_empty() && Instant::now() < deadline {
            actix_rt::time::sleep(Duration::from_millis(100)).await;
            left = self.listing(dir).await;
        }
        let listed: Vec<ListedNode> = left
            .into_iter()
            .map(|(name, stat, _)| ListedNode { path: format!("{dir}/{name}"), ephemeral_owner: stat.ephemeral_owner })
            .collect();
        check_leftovers(&listed, &self.participant_sessions())
    }

    /// A node's data and stat, `None` if missing; connection problems are retried.
    pub async fn read(&self, path: &str) -> Option<NodeData> {
        let deadline = Instant::now() + WAIT;
        loop {
            match self.observer.get_data(path).await {
                Ok(node) => return Some(node),
                Err(Error::NoNode { .. }) => return None,
                Err(e) if e.is_transient() && Instant::now() < deadline => {
                    actix_rt::time::sleep(Duration::from_millis(50)).await
                }
                Err(e) => panic!("{path}: {e}"),
            }
        }
    }
}
