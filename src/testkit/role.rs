//! [`RoleProcess`]: one participant of a coordination recipe running as its own OS process, so
//! that a test can pause it (SIGSTOP), resume it (SIGCONT) and kill it (SIGKILL) for real, and
//! read what it reports as [`RoleLine`]s.
//!
//! This module owns starting such a process (through the testkit's spawner thread, with
//! `PR_SET_PDEATHSIG`, so that a test binary killed with SIGKILL orphans nothing), collecting
//! its stdout line by line, keeping its stderr in a log file, the signals, and reaping it (also
//! on drop). It does not own what the process does: the crate's `zk-role` binary
//! (`src/testkit/zk_role/main.rs`, feature `testkit`) runs the crate's recipes, but any program that
//! follows the line protocol of [`RoleProcess`] works, and nothing here knows about ZooKeeper.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::str::FromStr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::TestkitError;
use super::launch::{fresh_temp_dir_in, log_tail, spawn_command};

/// How often [`RoleProcess::finish`] looks whether the process has exited.
const EXIT_POLL: Duration = Duration::from_millis(10);
/// After the process is gone, how long its last lines may take to be read from the pipe.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// How many of the last stdout lines an error quotes.
const QUOTED_LINES: usize = 20;

/// One line a role process printed on stdout: `<unix_ms> <kind> <key>=<value> ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleLine {
    /// Position among the process's stdout lines (0 for the first, counting every line), for
    /// [`RoleProcess::wait_for_from`].
    pub index: usize,
    /// When the process says it printed the line (unix time in ms); for a line that does not
    /// follow the format, when it was read.
    pub at_ms: u64,
    /// What happened (`"acquired"`, `"write"`, ...); `"?"` for a line that does not follow the
    /// format.
    pub kind: String,
    /// The `key=value` pairs (empty for a line that does not follow the format).
    pub fields: BTreeMap<String, String>,
    /// The line as printed, without its line break.
    pub raw: String,
}

impl RoleLine {
    /// Parses one line. A line that does not follow the format (first word a number, a kind,
    /// then only `key=value` words) is kept whole with kind `"?"`, no fields, and the current
    /// time. The index is 0; [`RoleProcess`] numbers the lines it reads.
    pub fn parse(raw: &str) -> RoleLine {
        let raw = raw.trim_end_matches(['\n', '\r']);
        Self::parse_fields(raw).unwrap_or_else(|| RoleLine {
            index: 0,
            at_ms: unix_ms(),
            kind: "?".to_owned(),
            fields: BTreeMap::new(),
            raw: raw.to_owned(),
        })
    }

    fn parse_fields(raw: &str) -> Option<RoleLine> {
        let mut words = raw.split_whitespace();
        let at_ms = words.next()?.parse().ok()?;
        let kind = words.next()?.to_owned();
        let mut fields = BTreeMap::new();
        for word in words {
            let (key, value) = word.split_once('=')?;
            fields.insert(key.to_owned(), value.to_owned());
        }
        Some(RoleLine { index: 0, at_ms, kind, fields, raw: raw.to_owned() })
    }

    /// The value of field `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    /// The value of field `key` parsed as a `T` (`None` if absent or not a `T`).
    pub fn num<T: FromStr>(&self, key: &str) -> Option<T> {
        self.get(key)?.parse().ok()
    }
}

impl fmt::Display for RoleLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// What the stdout reader has collected.
#[derive(Default)]
struct Output {
    lines: Vec<RoleLine>,
    /// Stdout reached end-of-file: the process exited (or closed its stdout).
    closed: bool,
}

#[derive(Default)]
struct Collected {
    output: Mutex<Output>,
    changed: Condvar,
}

impl Collected {
    fn lock(&self) -> MutexGuard<'_, Output> {
        // The reader only pushes whole lines: a panic elsewhere cannot leave them inconsistent.
        self.output.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads `stdout` line by line until end-of-file.
    fn read(&self, stdout: ChildStdout) {
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let mut line = RoleLine::parse(&String::from_utf8_lossy(&buf));
                    let mut output = self.lock();
                    line.index = output.lines.len();
                    output.lines.push(line);
                    self.changed.notify_all();
                }
            }
        }
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// Waits until stdout is closed, at most until `deadline`.
    fn wait_closed(&self, deadline: Instant) -> bool {
        let mut output = self.lock();
        while !output.closed {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            output = self.changed.wait_timeout(output, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
        true
    }
}

/// A program running as a child process of the test, reporting events as [`RoleLine`]s on its
/// stdout.
///
/// Every method takes `&self`, so that a process can be shared between threads (e.g. in an
/// `Arc`). Dropping it kills (SIGKILL) and reaps the process and deletes its directory; while
/// the thread is panicking (a failed test), the directory is kept, and the process's last lines
/// and the path of its stderr are printed, for the post-mortem.
///
/// A paused process keeps its TCP connections open and answers nothing, exactly like a process
/// stuck in a long GC pause or on an overloaded machine: its ZooKeeper session expires on the
/// server once the session timeout passes.
///
/// # Example
/// ```no_run
/// use std::time::Duration;
/// use actix_zookeeper::testkit::RoleProcess;
///
/// // In an integration test of this crate: env!("CARGO_BIN_EXE_zk-role").
/// let holder = RoleProcess::spawn(
///     "target/debug/zk-role",
///     ["lock", "--connect", "127.0.0.1:2181", "--chroot", "/t", "--id", "a", "--rounds", "1", "--hold-ms", "5000"],
/// )?;
/// let read = holder.wait_for(|l| l.kind == "read", Duration::from_secs(20))?;
/// holder.pause()?; // frozen between its read and its write
/// # let _ = read;
/// holder.resume()?;
/// let status = holder.finish(Duration::from_secs(20))?;
/// assert!(status.success());
/// # Ok::<(), actix_zookeeper::testkit::TestkitError>(())
/// ```
///
/// # Writing a role program of your own
/// A role program prints one line per event on stdout, and nothing else there:
///
/// ```text
/// <unix time in ms> <kind> <key>=<value> <key>=<value> ...
/// ```
///
/// Values contain no whitespace (replace it, e.g. by `_`). Flush after every line: the test
/// waits for lines as they come, and a paused or killed process must not hold finished lines in
/// a buffer. Logs and diagnostics go to stderr, which is appended to a file of the process's
/// own ([`stderr_path`](Self::stderr_path); its tail is quoted in errors). When its stdin
/// reaches end-of-file ([`finish`](Self::finish) closes it), the program should end cleanly
/// (for a ZooKeeper client: close its session, so that its ephemeral nodes go at once) and exit
/// with status 0. Lines that do not follow the format are kept, with kind `"?"`. The crate's own
/// `zk-role` binary (`src/testkit/zk_role/main.rs`) is an example, for its five recipe roles.
pub struct RoleProcess {
    name: String,
    pid: u32,
    dir: PathBuf,
    stderr_path: PathBuf,
    /// Behind a mutex so that signals are never sent to a reaped (and perhaps reused) pid: a
    /// child is only reaped while this is held.
    child: Mutex<Child>,
    /// Its write end; dropping it is the process's signal to finish.
    stdin: Mutex<Option<ChildStdin>>,
    collected: Arc<Collected>,
}

impl fmt::Debug for RoleProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RoleProcess").field("name", &self.name).field("pid", &self.pid).finish_non_exhaustive()
    }
}

impl RoleProcess {
    /// Starts `program` with `args`, stdin and stdout piped to the test, stderr appended to a
    /// log file in a fresh temporary directory. Its [name](Self::name) is the value following
    /// `--id` in `args` if there is one, otherwise the program's file name.
    pub fn spawn<P, I, S>(program: P, args: I) -> Result<RoleProcess, TestkitError>
    where
        P: AsRef<OsStr>,
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let program = program.as_ref();
        let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let name = role_name(program, &args);
        let dir = fresh_temp_dir_in(None)?;
        let stderr_path = dir.join(format!("{}.stderr", file_safe(&name)));
        let stderr =
            File::create(&stderr_path).map_err(|e| TestkitError::io(format!("create {}", stderr_path.display()), e))?;
        let mut command = Command::new(program);
        command.args(&args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::from(stderr));
        let spawned = spawn_command(command)
            .map_err(|e| TestkitError::io(format!("spawn {} (role {name})", Path::new(program).display()), e));
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let pid = child.id();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let collected = Arc::new(Collected::default());
        let reader = Arc::clone(&collected);
        let started = std::thread::Builder::new()
            .name(format!("role-{name}-stdout"))
            .spawn(move || reader.read(stdout))
            .map_err(|e| TestkitError::io(format!("start the stdout reader of role {name}"), e));
        if let Err(e) = started {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        tracing::debug!(%name, pid, "spawned role process");
        Ok(RoleProcess { name, pid, dir, stderr_path, child: Mutex::new(child), stdin: Mutex::new(stdin), collected })
    }

    /// The `--id` it was given (or the program's file name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The file its stderr is appended to.
    pub fn stderr_path(&self) -> &Path {
        &self.stderr_path
    }

    /// Every line printed on stdout so far, in order.
    pub fn lines(&self) -> Vec<RoleLine> {
        self.collected.lock().lines.clone()
    }

    /// How many lines were printed so far: the index the next line will have, to pass to
    /// [`wait_for_from`](Self::wait_for_from) before making something happen.
    pub fn line_count(&self) -> usize {
        self.collected.lock().lines.len()
    }

    /// Blocks until a line (printed at any time, also before this call) matches `pred`, at most
    /// `timeout`; returns the first such line.
    pub fn wait_for(&self, pred: impl FnMut(&RoleLine) -> bool, timeout: Duration) -> Result<RoleLine, TestkitError> {
        self.wait_for_from(0, pred, timeout)
    }

    /// Like [`wait_for`](Self::wait_for), looking only at lines at `index` or later. Fails at
    /// once with [`TestkitError::RoleOutputEnded`] when the process's output has ended (it
    /// exited) without such a line, and with [`TestkitError::RoleTimeout`] after `timeout`.
    pub fn wait_for_from(
        &self,
        index: usize,
        mut pred: impl FnMut(&RoleLine) -> bool,
        timeout: Duration,
    ) -> Result<RoleLine, TestkitError> {
        let deadline = Instant::now() + timeout;
        let mut next = index;
        loop {
            // The predicate runs without the lock: it may look at this process itself.
            let (fresh, closed) = {
                let output = self.collected.lock();
                (output.lines.get(next..).unwrap_or_default().to_vec(), output.closed)
            };
            for line in fresh {
                next = line.index + 1;
                if pred(&line) {
                    return Ok(line);
                }
            }
            if closed {
                return Err(TestkitError::RoleOutputEnded {
                    name: self.name.clone(),
                    status: self.status_text(),
                    last_lines: self.last_lines(),
                    stderr_tail: log_tail(&self.stderr_path),
                });
            }
            let mut output = self.collected.lock();
            while output.lines.len() <= next && !output.closed {
                let now = Instant::now();
                if now >= deadline {
                    drop(output);
                    return Err(TestkitError::RoleTimeout {
                        name: self.name.clone(),
                        waited: timeout,
                        last_lines: self.last_lines(),
                        stderr_tail: log_tail(&self.stderr_path),
                    });
                }
                output =
                    self.collected.changed.wait_timeout(output, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
            }
        }
    }

    /// Stops the process (SIGSTOP) where it is: its sockets stay open and nothing answers.
    pub fn pause(&self) -> Result<(), TestkitError> {
        self.signal(libc::SIGSTOP)
    }

    /// Lets a paused process go on (SIGCONT).
    pub fn resume(&self) -> Result<(), TestkitError> {
        self.signal(libc::SIGCONT)
    }

    /// Kills the process (SIGKILL, also when paused) and reaps it; then waits briefly for the
    /// last lines it printed to be read. Killing a process that has already exited is fine.
    pub fn kill(&self) -> Result<(), TestkitError> {
        {
            let mut child = self.child();
            // Fails only when it has exited already, which is what we want anyway.
            let _ = child.kill();
            child.wait().map_err(|e| TestkitError::io(format!("reap role {} (pid {})", self.name, self.pid), e))?;
        }
        self.stdin().take();
        self.collected.wait_closed(Instant::now() + DRAIN_TIMEOUT);
        Ok(())
    }

    /// Asks the process to finish by closing its stdin (a paused process is resumed first: it
    /// could not exit otherwise), and waits up to `timeout` for it to exit and for its last
    /// lines to be read. Returns its exit status, whatever it is. If it does not exit in time it
    /// is killed, and [`TestkitError::RoleDidNotExit`] is returned.
    pub fn finish(&self, timeout: Duration) -> Result<ExitStatus, TestkitError> {
        let deadline = Instant::now() + timeout;
        self.stdin().take();
        let _ = self.signal(libc::SIGCONT);
        loop {
            let exited = {
                let mut child = self.child();
                child.try_wait().map_err(|e| TestkitError::io(format!("wait for role {}", self.name), e))?
            };
            if let Some(status) = exited {
                self.collected.wait_closed(deadline.max(Instant::now() + DRAIN_TIMEOUT));
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = self.kill();
                return Err(TestkitError::RoleDidNotExit {
                    name: self.name.clone(),
                    waited: timeout,
                    last_lines: self.last_lines(),
                    stderr_tail: log_tail(&self.stderr_path),
                });
            }
            std::thread::sleep(EXIT_POLL);
        }
    }

    /// True until the process has exited (a paused process is running).
    pub fn is_running(&self) -> bool {
        matches!(self.child().try_wait(), Ok(None))
    }

    fn child(&self) -> MutexGuard<'_, Child> {
        self.child.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn stdin(&self) -> MutexGuard<'_, Option<ChildStdin>> {
        self.stdin.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn signal(&self, signal: libc::c_int) -> Result<(), TestkitError> {
        let mut child = self.child();
        match child.try_wait() {
            Ok(None) => {}
            Ok(Some(status)) => {
                return Err(TestkitError::RoleNotRunning { name: self.name.clone(), status: status.to_string() });
            }
            Err(e) => return Err(TestkitError::io(format!("wait for role {}", self.name), e)),
        }
        // SAFETY: kill(2) has no memory-safety preconditions. The child is not reaped (checked
        // above, and reaping needs the lock we hold), so its pid is still ours.
        if unsafe { libc::kill(self.pid as libc::pid_t, signal) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(TestkitError::io(format!("signal {signal} to role {} (pid {})", self.name, self.pid), e));
        }
        Ok(())
    }

    fn status_text(&self) -> String {
        match self.child().try_wait() {
            Ok(Some(status)) => status.to_string(),
            Ok(None) => "still running, stdout closed".to_owned(),
            Err(e) => format!("unknown ({e})"),
        }
    }

    fn last_lines(&self) -> String {
        let output = self.collected.lock();
        let from = output.lines.len().saturating_sub(QUOTED_LINES);
        output.lines[from..].iter().map(|l| l.raw.as_str()).collect::<Vec<_>>().join("\n")
    }
}

impl Drop for RoleProcess {
    fn drop(&mut self) {
        self.stdin().take();
        {
            let mut child = self.child();
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            // What every process of a failed test said is usually what explains the failure.
            eprintln!(
                "role {} (pid {}), its last lines:\n{}\nits stderr is kept in {}",
                self.name,
                self.pid,
                self.last_lines(),
                self.stderr_path.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn role_name(program: &OsStr, args: &[OsString]) -> String {
    let id = args.windows(2).find(|pair| pair[0] == "--id").map(|pair| pair[1].to_string_lossy().into_owned());
    id.unwrap_or_else(|| Path::new(program).file_name().unwrap_or(program).to_string_lossy().into_owned())
}

/// `name` with everything but ASCII letters, digits, `-`, `_` and `.` replaced by `-`.
fn file_safe(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_into_kind_and_fields() {
        let line = RoleLine::parse("1700000000123 write value=3 token=42 outcome=ok\n");
        assert_eq!((line.at_ms, line.kind.as_str()), (1_700_000_000_123, "write"));
        assert_eq!(line.get("outcome"), Some("ok"));
        assert_eq!(line.num::<u64>("value"), Some(3));
        assert_eq!(line.num::<i64>("token"), Some(42));
        assert_eq!(line.num::<u64>("outcome"), None);
        assert_eq!(line.raw, "1700000000123 write value=3 token=42 outcome=ok");
        // A value may contain '='.
        assert_eq!(RoleLine::parse("1 x a=b=c").get("a"), Some("b=c"));
    }

    #[test]
    fn other_lines_are_kept_whole() {
        for raw in ["thread 'main' panicked at src/main.rs", "12 kind not-a-pair", "", "notanumber kind a=b"] {
            let line = RoleLine::parse(raw);
            assert_eq!(line.kind, "?", "{raw:?}");
            assert!(line.fields.is_empty());
            assert_eq!(line.raw, raw);
        }
        assert_eq!(RoleLine::parse("5 ready").kind, "ready");
    }

    #[test]
    fn the_name_is_the_id() {
        let args: Vec<OsString> = ["lock", "--id", "a1", "--rounds", "2"].iter().map(OsString::from).collect();
        assert_eq!(role_name(OsStr::new("/x/zk-role"), &args), "a1");
        assert_eq!(role_name(OsStr::new("/x/zk-role"), &args[..1]), "zk-role");
        assert_eq!(file_safe("a/b c"), "a-b-c");
    }
}
