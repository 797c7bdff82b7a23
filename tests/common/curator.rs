//! Drives Apache Curator 5.4 lock and leader-latch recipes from tests, to prove wire
//! compatibility with them.
//!
//! A [`CuratorPeer`] is a JVM running `tests/java/CuratorPeer.java`, which holds one Curator
//! lock (`mutex`, `read`, `write` or `semaphore:<N>`) and is told over stdin to `acquire` or
//! `release` it; it answers on stdout with the path of the lock node it got. With kind
//! `latch:<id>` it is instead a `LeaderLatch` participant (see [`CuratorPeer::start_latch`]):
//! besides replying to commands it prints `LEADER` / `NOT_LEADER` whenever Curator's listener
//! fires, at any time; those lines are queued here and read with
//! [`CuratorPeer::next_leadership_event`], never returned as replies. All calls here block, so
//! from async tests call them via `spawn_blocking` (a peer is `Send`).
//!
//! With kind `count:<seed>` it holds a started `SharedCount` (see [`CuratorPeer::start_count`]).
//!
//! Requirements: a JDK (`java`, `javac` on `PATH`) and Debian's Curator jars
//! (`apt-get install libcurator-recipes-java`), or a full classpath in `CURATOR_CLASSPATH`.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::fs::File;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

const JAR_DIR: &str = "/usr/share/java";

/// Jars the peer cannot run without, each with the Debian package that ships it.
const REQUIRED_JARS: &[(&str, &str)] = &[
    ("curator-recipes.jar", "libcurator-recipes-java"),
    ("curator-framework.jar", "libcurator-recipes-java"),
    ("curator-client.jar", "libcurator-recipes-java"),
    ("curator-x-discovery.jar", "libcurator-discovery-java"),
    ("guava.jar", "libguava-java"),
    ("zookeeper.jar", "zookeeper"),
    ("zookeeper-jute.jar", "zookeeper"),
    ("slf4j-api.jar", "libslf4j-java"),
];

/// Jars used when present: a logger (else slf4j falls back to no logging), Guava's
/// `failureaccess` (bundled into Debian's guava.jar, separate upstream), and Jackson, which
/// curator-framework declares as a dependency.
const OPTIONAL_JARS: &[&str] =
    &["slf4j-simple.jar", "failureaccess.jar", "jackson-databind.jar", "jackson-core.jar", "jackson-annotations.jar"];

/// How long a peer may take from `java` to `READY` (JVM start plus ZooKeeper connect).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Classpath for Curator 5.4 + ZooKeeper from Debian's jars in `/usr/share/java`.
///
/// `CURATOR_CLASSPATH`, when set and non-empty, is used verbatim instead. The error names the
/// missing jar and the apt package that provides it.
pub fn curator_classpath() -> Result<String, String> {
    if let Some(cp) = std::env::var_os("CURATOR_CLASSPATH") {
        let cp = cp.to_string_lossy().into_owned();
        if !cp.trim().is_empty() {
            return Ok(cp);
        }
    }
    let dir = Path::new(JAR_DIR);
    let mut jars = Vec::new();
    for (jar, package) in REQUIRED_JARS {
        let path = dir.join(jar);
        if !path.is_file() {
            return Err(format!(
                "{} not found: install it with `apt-get install {package}` (Curator 5.4 needs \
                 libcurator-recipes-java), or set CURATOR_CLASSPATH to a classpath with Curator and ZooKeeper",
                path.display()
            ));
        }
        jars.push(path);
    }
    jars.extend(OPTIONAL_JARS.iter().map(|jar| dir.join(jar)).filter(|path| path.is_file()));
    Ok(jars.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(":"))
}

fn peer_source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/CuratorPeer.java")
}

/// Compiles `tests/java/CuratorPeer.java` and returns the directory holding `CuratorPeer.class`.
///
/// Runs `javac` at most once per test process, however many tests ask concurrently. The
/// directory (under the system temp dir) is named after a hash of the source and classpath, so
/// later test runs reuse it as long as neither changed, and stale classes are never picked up.
pub fn compiled_peer() -> Result<PathBuf, String> {
    static COMPILED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    COMPILED.get_or_init(compile_peer).clone()
}

fn compile_peer() -> Result<PathBuf, String> {
    let classpath = curator_classpath()?;
    let source = peer_source();
    let text = std::fs::read(&source).map_err(|e| format!("reading {}: {e}", source.display()))?;
    let mut hasher = DefaultHasher::new();
    (&text, &classpath).hash(&mut hasher);
    let dir = std::env::temp_dir().join(format!("actix-zookeeper-curator-peer-{:016x}", hasher.finish()));
    if dir.join("CuratorPeer.class").is_file() {
        return Ok(dir);
    }

    // Compile beside the final directory and rename it into place, so that another test
    // process never sees a half-written class directory.
    let staging = PathBuf::from(format!("{}.{}.tmp", dir.display(), std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| format!("creating {}: {e}", staging.display()))?;
    let mut javac = Command::new("javac");
    javac.arg("-d").arg(&staging).arg("-cp").arg(&classpath).arg(&source);
    let output = javac.output().map_err(|e| format!("running javac (is a JDK installed?): {e}"))?;
    if !output.status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(format!(
            "javac {} failed ({}):\n{}{}",
            source.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    if let Err(e) = std::fs::rename(&staging, &dir) {
        let _ = std::fs::remove_dir_all(&staging);
        // Losing the race to a concurrent test process is fine: its classes are identical.
        if !dir.join("CuratorPeer.class").is_file() {
            return Err(format!("moving {} to {}: {e}", staging.display(), dir.display()));
        }
    }
    Ok(dir)
}

// Tests move peers into `spawn_blocking`; keep that possible.
const _: fn() = || {
    fn assert_send<T: Send>() {}
    assert_send::<CuratorPeer>();
};

static PEER_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A running `CuratorPeer` JVM holding (or waiting for) one Curator lock.
///
/// Dropping it sends `quit`, which closes the Curator client (so ZooKeeper deletes its lock
/// nodes at once), and kills the JVM if it does not exit promptly. The JVM also exits when its
/// stdin closes, so it does not outlive a test process that dies.
pub struct CuratorPeer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    /// `LEADER` (true) / `NOT_LEADER` (false) lines seen while waiting for something else.
    leadership: VecDeque<bool>,
    /// `REVOCATION_REQUESTED` lines seen while waiting for something else.
    revocations: usize,
    /// `EVENT <what>` lines (a discovery peer's cache changes), without `EVENT `.
    events: VecDeque<String>,
    stderr_path: PathBuf,
    description: String,
}

impl CuratorPeer {
    /// Starts `java CuratorPeer <connect> <lock_path> <kind>` and waits up to 30 s for `READY`.
    ///
    /// `kind` is `mutex`, `read`, `write`, `semaphore:<N>` or `latch:<participant id>`.
    /// `connect` may carry a chroot; node paths reported by the peer are then relative to it.
    pub fn start(connect: &str, lock_path: &str, kind: &str) -> Result<CuratorPeer, String> {
        let classes = compiled_peer()?;
        let classpath = format!("{}:{}", classes.display(), curator_classpath()?);
        let stderr_path = std::env::temp_dir().join(format!(
            "actix-zookeeper-curator-peer-{}-{}.stderr",
            std::process::id(),
            PEER_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let stderr = File::create(&stderr_path).map_err(|e| format!("creating {}: {e}", stderr_path.display()))?;
        let description = format!("Curator peer {kind} on {lock_path}");

        let mut child = Command::new("java")
            .args(["-XX:TieredStopAtLevel=1", "-Xmx128m", "-XX:+UseSerialGC", "-Xshare:auto"])
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .arg("-cp")
            .arg(&classpath)
            .arg("CuratorPeer")
            .args([connect, lock_path, kind])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // A file, not a pipe: nobody drains stderr, and a full pipe would block the JVM.
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("starting java for {description}: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{description}: stdin/stdout not captured"));
        };

        // recv_timeout on a channel gives next_line its deadline, which a blocking read cannot.
        let (tx, lines) = mpsc::channel();
        std::thread::Builder::new()
            .name("curator-peer-stdout".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| {
                let _ = child.kill();
                let _ = child.wait();
                format!("spawning stdout reader for {description}: {e}")
            })?;

        let mut peer = CuratorPeer {
            child,
            stdin,
            lines,
            leadership: VecDeque::new(),
            revocations: 0,
            events: VecDeque::new(),
            stderr_path,
            description,
        };
        match peer.next_line(START_TIMEOUT)? {
            line if line == "READY" => Ok(peer),
            line => Err(peer.failure(&format!("expected READY, got {line:?}"))),
        }
    }

    /// Starts a `LeaderLatch` peer (`latch:<id>`) on `latch_path`; the latch itself is not
    /// started until [`latch_start`](Self::latch_start). `id` must be non-empty, not `-`, and
    /// free of whitespace, so that [`leader_id`](Self::leader_id) can report it.
    pub fn start_latch(connect: &str, latch_path: &str, id: &str) -> Result<CuratorPeer, String> {
        CuratorPeer::start(connect, latch_path, &format!("latch:{id}"))
    }

    /// Starts a `SharedCount` peer (`count:<seed>`) on `count_path`: Curator creates the node
    /// with `seed` if it is missing, then reads and watches it, before `READY`.
    pub fn start_count(connect: &str, count_path: &str, seed: i32) -> Result<CuratorPeer, String> {
        CuratorPeer::start(connect, count_path, &format!("count:{seed}"))
    }

    /// Starts a `discovery` peer: Curator's `ServiceDiscovery` at base path `base`, started.
    pub fn start_discovery(connect: &str, base: &str) -> Result<CuratorPeer, String> {
        CuratorPeer::start(connect, base, "discovery")
    }

    /// Sends a discovery command and expects the one-word reply `expected`.
    pub fn discovery_command(&mut self, command: &str, expected: &str, within: Duration) -> Result<(), String> {
        self.send(command)?;
        match self.next_line(within)? {
            line if line == expected => Ok(()),
            line => Err(self.failure(&format!("{command}: expected {expected}, got {line:?}"))),
        }
    }

    /// Registers an instance with Curator's `registerService` (`payload`: a JSON object, or `-`).
    pub fn register_instance(
        &mut self,
        name: &str,
        id: &str,
        address: &str,
        port: u16,
        service_type: &str,
        payload: &str,
    ) -> Result<(), String> {
        let command = format!("register {name} {id} {address} {port} {service_type} {payload}");
        self.discovery_command(&command, "REGISTERED", Duration::from_secs(20))
    }

    /// What Curator's `queryForInstances(name)` returns, described as a JSON array sorted by id;
    /// `Err` with Curator's error when it cannot read the service.
    pub fn query_instances(&mut self, name: &str) -> Result<serde_json::Value, String> {
        self.query_instances_as(name, "")
    }

    /// [`query_instances`](Self::query_instances) by a reader built for `payload_class` (a Java
    /// class name; empty: `Object`), as a Java service that knows its payload type reads.
    pub fn query_instances_as(&mut self, name: &str, payload_class: &str) -> Result<serde_json::Value, String> {
        self.send(format!("query {name} {payload_class}").trim_end())?;
        let line = self.next_line(Duration::from_secs(20))?;
        match line.strip_prefix("INSTANCES ") {
            Some(json) => serde_json::from_str(json).map_err(|e| format!("{e}: {json}")),
            None => Err(line),
        }
    }

    /// The bytes Curator wrote at `<base>/<name>/<id>`.
    pub fn raw_instance(&mut self, name: &str, id: &str) -> Result<String, String> {
        self.send(&format!("raw {name} {id}"))?;
        let line = self.next_line(Duration::from_secs(20))?;
        line.strip_prefix("RAW ").map(str::to_owned).ok_or_else(|| self.failure(&format!("raw: got {line:?}")))
    }

    /// Waits up to `within` for an `EVENT` line satisfying `pred` (earlier ones are dropped);
    /// returns it without `EVENT `.
    pub fn wait_event(&mut self, within: Duration, pred: impl Fn(&str) -> bool) -> Result<String, String> {
        let deadline = Instant::now() + within;
        loop {
            while let Some(event) = self.events.pop_front() {
                if pred(&event) {
                    return Ok(event);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.failure("no such event in time"));
            }
            if let Some(line) = self.try_line(left.min(Duration::from_millis(200)))? {
                return Err(self.failure(&format!("unexpected reply {line:?} while waiting for an event")));
            }
        }
    }

    /// Kills the JVM at once (SIGKILL): its session ends only when the server expires it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Count `get`: Curator's own (watched, local) view of the count, as `(value, version)`.
    /// Starts an `atomic` peer: Curator's `DistributedAtomicLong` at `path`, with no retries of
    /// its own (`count_increment` repeats each increment until it succeeds).
    pub fn start_atomic(connect: &str, path: &str) -> Result<CuratorPeer, String> {
        CuratorPeer::start(connect, path, "atomic")
    }

    /// An atomic peer's `get`: Curator's reading of the value.
    pub fn atomic_get(&mut self, within: Duration) -> Result<i64, String> {
        self.send("get")?;
        let line = self.next_line(within)?;
        let parsed = line.strip_prefix("ATOMIC ").and_then(|value| value.parse().ok());
        parsed.ok_or_else(|| self.failure(&format!("get: expected ATOMIC <value>, got {line:?}")))
    }

    pub fn count_get(&mut self, within: Duration) -> Result<(i32, i32), String> {
        self.send("get")?;
        let line = self.next_line(within)?;
        let parsed = line.strip_prefix("COUNT ").and_then(|rest| {
            let (value, version) = rest.split_once(' ')?;
            Some((value.parse().ok()?, version.parse().ok()?))
        });
        parsed.ok_or_else(|| self.failure(&format!("get: expected COUNT <value> <version>, got {line:?}")))
    }

    /// Count `set <value>`: Curator's unconditional `setCount`.
    pub fn count_set(&mut self, value: i32, within: Duration) -> Result<(), String> {
        self.send(&format!("set {value}"))?;
        match self.next_line(within)? {
            line if line == "SET" => Ok(()),
            line => Err(self.failure(&format!("set: expected SET, got {line:?}"))),
        }
    }

    /// Count `increment <n> <threads>`: `n` increments by Curator's `trySetCount`, retried until
    /// each applies, spread over `threads` threads. Returns `(successes, failed attempts)`.
    pub fn count_increment(&mut self, n: u32, threads: u32, within: Duration) -> Result<(u64, u64), String> {
        self.send(&format!("increment {n} {threads}"))?;
        let line = self.next_line(within)?;
        let parsed = line.strip_prefix("INCREMENTED ").and_then(|rest| {
            let (successes, failures) = rest.split_once(' ')?;
            Some((successes.parse().ok()?, failures.parse().ok()?))
        });
        parsed.ok_or_else(|| self.failure(&format!("increment: expected INCREMENTED <n> <n>, got {line:?}")))
    }

    /// Sends one command line (`acquire`, `acquire <ms>`, `release`, `start`, `close`,
    /// `leader`, `hasLeadership`, `quit`).
    pub fn send(&mut self, command: &str) -> Result<(), String> {
        let sent = writeln!(self.stdin, "{command}").and_then(|()| self.stdin.flush());
        sent.map_err(|e| self.failure(&format!("sending {command:?}: {e}")))
    }

    /// Waits up to `within` for the next non-blank stdout line that is not a `LEADER` /
    /// `NOT_LEADER` event (those are queued for
    /// [`next_leadership_event`](Self::next_leadership_event)). Err on timeout or when the peer
    /// exited, with the tail of its stderr.
    pub fn next_line(&mut self, within: Duration) -> Result<String, String> {
        match self.try_line(within)? {
            Some(line) => Ok(line),
            None => Err(self.failure(&format!("no reply within {within:?}"))),
        }
    }

    /// Like [`next_line`](Self::next_line), but `Ok(None)` when no reply arrives within
    /// `within`: use it to assert that an `acquire` is still blocked. Leadership events
    /// arriving meanwhile are queued, not returned.
    pub fn try_line(&mut self, within: Duration) -> Result<Option<String>, String> {
        let deadline = Instant::now() + within;
        loop {
            match self.raw_line(deadline)? {
                Some(line) if line == REVOCATION_REQUESTED => self.revocations += 1,
                Some(line) if line.starts_with("EVENT ") => self.events.push_back(line["EVENT ".len()..].to_owned()),
                Some(line) => match leadership_event(&line) {
                    Some(leader) => self.leadership.push_back(leader),
                    None => return Ok(Some(line)),
                },
                None => return Ok(None),
            }
        }
    }

    /// The next non-blank stdout line, trimmed, whatever it is; `Ok(None)` at `deadline`.
    fn raw_line(&mut self, deadline: Instant) -> Result<Option<String>, String> {
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(remaining) {
                Ok(line) if line.trim().is_empty() => continue,
                Ok(line) => return Ok(Some(line.trim().to_string())),
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                Err(RecvTimeoutError::Disconnected) => return Err(self.failure("stdout closed")),
            }
        }
    }

    /// `acquire`: waits up to `within` for `ACQUIRED <node>` and returns the lock node's path.
    pub fn acquire(&mut self, within: Duration) -> Result<String, String> {
        self.send("acquire")?;
        self.expect_acquired(within)
    }

    /// `acquire <ms>`: Curator's acquire with a timeout. `Ok(None)` when Curator reports
    /// `TIMEOUT`; `within` bounds how long we wait for either reply.
    pub fn try_acquire(&mut self, wait: Duration, within: Duration) -> Result<Option<String>, String> {
        self.send(&format!("acquire {}", wait.as_millis()))?;
        let line = self.next_line(within)?;
        if line == "TIMEOUT" { Ok(None) } else { self.parse_acquired(line).map(Some) }
    }

    /// Waits for the `ACQUIRED <node>` reply to an `acquire` sent earlier (e.g. one that
    /// [`try_line`](Self::try_line) showed to be blocked).
    pub fn expect_acquired(&mut self, within: Duration) -> Result<String, String> {
        let line = self.next_line(within)?;
        self.parse_acquired(line)
    }

    /// `release`: waits up to `within` for `RELEASED`.
    pub fn release(&mut self, within: Duration) -> Result<(), String> {
        self.send("release")?;
        match self.next_line(within)? {
            line if line == "RELEASED" => Ok(()),
            line => Err(self.failure(&format!("release: expected RELEASED, got {line:?}"))),
        }
    }

    /// Latch `start`: waits up to `within` for `STARTED <node>` and returns the latch node's
    /// path (`<latch path>/_c_<uuid>-latch-<seq>`). A `LEADER` event may come before or after
    /// the reply; either way it is queued for [`next_leadership_event`](Self::next_leadership_event).
    pub fn latch_start(&mut self, within: Duration) -> Result<String, String> {
        self.send("start")?;
        let line = self.next_line(within)?;
        match line.strip_prefix("STARTED ") {
            Some(node) => Ok(node.to_string()),
            None => Err(self.failure(&format!("start: expected STARTED <node>, got {line:?}"))),
        }
    }

    /// Latch `close` (Curator's `CloseMode.NOTIFY_LEADER`, so a leader also reports
    /// `NOT_LEADER`): waits up to `within` for `CLOSED`. Curator deletes the node in the
    /// background, so it may still exist briefly after this returns. A closed latch cannot be
    /// started again.
    pub fn latch_close(&mut self, within: Duration) -> Result<(), String> {
        self.send("close")?;
        match self.next_line(within)? {
            line if line == "CLOSED" => Ok(()),
            line => Err(self.failure(&format!("close: expected CLOSED, got {line:?}"))),
        }
    }

    /// Latch `leader`: the participant id of the current leader as Curator sees it (data of the
    /// lowest-sequence latch node, read from ZooKeeper now), `None` when there are no
    /// participants.
    pub fn leader_id(&mut self, within: Duration) -> Result<Option<String>, String> {
        self.send("leader")?;
        let line = self.next_line(within)?;
        match line.strip_prefix("LEADER_ID ") {
            Some("-") => Ok(None),
            Some(id) => Ok(Some(id.to_string())),
            None => Err(self.failure(&format!("leader: expected LEADER_ID <id>, got {line:?}"))),
        }
    }

    /// Latch `hasLeadership`: Curator's local view of whether this latch is the leader.
    pub fn has_leadership(&mut self, within: Duration) -> Result<bool, String> {
        self.send("hasLeadership")?;
        let line = self.next_line(within)?;
        match line.as_str() {
            "HAS_LEADERSHIP true" => Ok(true),
            "HAS_LEADERSHIP false" => Ok(false),
            _ => Err(self.failure(&format!("hasLeadership: expected HAS_LEADERSHIP <bool>, got {line:?}"))),
        }
    }

    /// The next leadership event of a latch peer: `Some(true)` for `LEADER` (Curator's
    /// `isLeader()`), `Some(false)` for `NOT_LEADER` (`notLeader()`), `None` if none arrives
    /// within `within`. Events queued while waiting for replies come first, in order. Any other
    /// line arriving meanwhile is an error: no command is expected to be outstanding.
    pub fn next_leadership_event(&mut self, within: Duration) -> Result<Option<bool>, String> {
        if let Some(leader) = self.leadership.pop_front() {
            return Ok(Some(leader));
        }
        match self.raw_line(Instant::now() + within)? {
            Some(line) => match leadership_event(&line) {
                Some(leader) => Ok(Some(leader)),
                None => Err(self.failure(&format!("expected LEADER or NOT_LEADER, got {line:?}"))),
            },
            None => Ok(None),
        }
    }

    /// `revocable` (a lock peer, before its first `acquire`): Curator's `makeRevocable`, whose
    /// listener prints `REVOCATION_REQUESTED`. Waits up to `within` for `REVOCABLE`.
    pub fn make_revocable(&mut self, within: Duration) -> Result<(), String> {
        self.send("revocable")?;
        match self.next_line(within)?.as_str() {
            "REVOCABLE" => Ok(()),
            line => Err(self.failure(&format!("revocable: expected REVOCABLE, got {line:?}"))),
        }
    }

    /// `revoke <node>`: Curator's `Revoker.attemptRevoke` on `node` (relative to the peer's
    /// chroot). Waits up to `within` for `REVOKE_SENT`.
    pub fn revoke(&mut self, node: &str, within: Duration) -> Result<(), String> {
        self.send(&format!("revoke {node}"))?;
        match self.next_line(within)?.as_str() {
            "REVOKE_SENT" => Ok(()),
            line => Err(self.failure(&format!("revoke: expected REVOKE_SENT, got {line:?}"))),
        }
    }

    /// Whether Curator's revocation listener fired (a `REVOCATION_REQUESTED` line, counted
    /// also while waiting for replies) within `within`; each call consumes one.
    pub fn revocation_requested(&mut self, within: Duration) -> Result<bool, String> {
        if self.revocations > 0 {
            self.revocations -= 1;
            return Ok(true);
        }
        match self.raw_line(Instant::now() + within)? {
            Some(line) if line == REVOCATION_REQUESTED => Ok(true),
            Some(line) => Err(self.failure(&format!("expected REVOCATION_REQUESTED, got {line:?}"))),
            None => Ok(false),
        }
    }

    fn parse_acquired(&mut self, line: String) -> Result<String, String> {
        match line.strip_prefix("ACQUIRED ") {
            Some(node) => Ok(node.to_string()),
            None => Err(self.failure(&format!("acquire: expected ACQUIRED <node>, got {line:?}"))),
        }
    }

    /// An error message with the peer's exit status (if it exited) and the tail of its stderr.
    fn failure(&mut self, what: &str) -> String {
        // The stdout reader sees EOF slightly before the process is reaped.
        let mut status = None;
        for _ in 0..20 {
            match self.child.try_wait() {
                Ok(Some(s)) => {
                    status = Some(s);
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(25)),
                Err(_) => break,
            }
        }
        let state = match status {
            Some(s) => format!("exited ({s})"),
            None => "still running".to_string(),
        };
        format!(
            "{}: {what}; peer {state}; last lines of {}:\n{}",
            self.description,
            self.stderr_path.display(),
            self.stderr_tail(30)
        )
    }

    fn stderr_tail(&self, lines: usize) -> String {
        match std::fs::read_to_string(&self.stderr_path) {
            Ok(text) => {
                let all: Vec<&str> = text.lines().collect();
                all[all.len().saturating_sub(lines)..].join("\n")
            }
            Err(e) => format!("(unreadable: {e})"),
        }
    }
}

/// The line a revocable lock peer prints whenever Curator's revocation listener fires.
const REVOCATION_REQUESTED: &str = "REVOCATION_REQUESTED";

/// `Some(true)` for a `LEADER` line, `Some(false)` for `NOT_LEADER`, else `None`.
fn leadership_event(line: &str) -> Option<bool> {
    match line {
        "LEADER" => Some(true),
        "NOT_LEADER" => Some(false),
        _ => None,
    }
}

impl Drop for CuratorPeer {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit").and_then(|()| self.stdin.flush());
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
            }
        }
        // Keep the JVM's log when a test fails, it is the first thing to look at.
        if std::thread::panicking() {
            eprintln!("{} log kept at {}", self.description, self.stderr_path.display());
        } else {
            let _ = std::fs::remove_file(&self.stderr_path);
        }
    }
}

/// Runs a blocking peer call off the calling thread (in the tests, actors live on that thread
/// and must keep running while Curator blocks), handing the peer back with the result.
pub async fn off_thread<T: Send + 'static>(
    mut peer: CuratorPeer,
    call: impl FnOnce(&mut CuratorPeer) -> T + Send + 'static,
) -> (CuratorPeer, T) {
    actix_rt::task::spawn_blocking(move || {
        let out = call(&mut peer);
        (peer, out)
    })
    .await
    .expect("peer call")
}
