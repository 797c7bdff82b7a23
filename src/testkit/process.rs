//! One ZooKeeper JVM as a child process: spawning, readiness, graceful and forced termination.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::four_letter::{has_mode, srvr};
use super::{TestkitError, classpath};

/// Main class of a standalone server.
pub(crate) const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";
/// Main class of an ensemble member.
pub(crate) const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// Short-lived test servers gain nothing from C2 and start noticeably faster without it; a
/// benchmark server needs it (without it a round trip is 1.3–2× slower, measured).
pub(crate) const FAST_STARTUP_FLAG: &str = "-XX:TieredStopAtLevel=1";

pub(crate) const JVM_FLAGS: &[&str] = &[
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-Dzookeeper.extendedTypesEnabled=true",
    "-Dzookeeper.admin.enableServer=false",
    "-Dzookeeper.4lw.commands.whitelist=*",
    "-Djava.net.preferIPv4Stack=true",
];

const POLL_INTERVAL: Duration = Duration::from_millis(100);
const GRACEFUL_STOP_TIMEOUT: Duration = Duration::from_secs(10);
const LOG_TAIL_LINES: usize = 20;

/// Settings shared by every server the testkit writes a `zoo.cfg` for.
pub(crate) fn common_config(data_dir: &Path, client_port: u16) -> String {
    format!(
        "tickTime=200\n\
         initLimit=10\n\
         syncLimit=5\n\
         dataDir={}\n\
         clientPort={client_port}\n\
         clientPortAddress=127.0.0.1\n\
         minSessionTimeout=400\n\
         maxSessionTimeout=60000\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=*\n\
         maxClientCnxns=0\n\
         forceSync=no\n\
         preAllocSize=4096\n",
        data_dir.display()
    )
}

/// Writes `contents` to `path`.
pub(crate) fn write_file(path: &Path, contents: &str) -> Result<(), TestkitError> {
    std::fs::write(path, contents).map_err(|e| TestkitError::io(format!("write {}", path.display()), e))
}

/// Creates a fresh, uniquely named directory under `parent` (default: the system temp dir).
pub(crate) fn fresh_temp_dir_in(parent: Option<&Path>) -> Result<PathBuf, TestkitError> {
    let parent = parent.map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
    let dir = parent.join(format!("actix-zk-{}", super::unique_suffix()));
    std::fs::create_dir_all(&dir).map_err(|e| TestkitError::io(format!("create {}", dir.display()), e))?;
    Ok(dir)
}

/// `n` distinct free loopback ports. All listeners are held until every port is chosen so the
/// OS cannot hand out the same port twice.
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>, TestkitError> {
    use std::sync::atomic::{AtomicU32, Ordering};
    // Below the kernel's ephemeral range: a port the kernel hands out on its own (to a proxy's
    // listener, or as the source port of any outgoing connection) can never be one chosen here
    // and released before the server binds it. Seeded by the process id, so that test processes
    // running side by side start apart.
    const FLOOR: u32 = 10_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let ceiling = ephemeral_floor().max(FLOOR + 1000);
    let span = ceiling - FLOOR;
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7919) % span,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    let mut listeners = Vec::with_capacity(n);
    let mut ports = Vec::with_capacity(n);
    let mut tries = 0;
    while ports.len() < n {
        tries += 1;
        if tries > span {
            return Err(TestkitError::io(
                "find a free loopback port",
                io::Error::other("every candidate port is taken"),
            ));
        }
        let port = u16::try_from(FLOOR + NEXT.fetch_add(1, Ordering::SeqCst) % span).unwrap_or(u16::MAX);
        // Held until all are chosen, so that one call never returns a port twice.
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            ports.push(port);
            listeners.push(listener);
        }
    }
    Ok(ports)
}

/// The lowest port of the kernel's ephemeral range (`ip_local_port_range`), 32768 if unknown.
fn ephemeral_floor() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// PR_SET_PDEATHSIG fires when the forking *thread* exits, not the process. Forking from one
/// thread that never exits makes the signal mean "the test process died", whichever thread
/// (test thread, `spawn_blocking` worker, ...) asked for the server.
fn spawner() -> Option<&'static mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Option<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<SpawnRequest>();
            let spawned = std::thread::Builder::new()
                .name("actix-zk-testkit-spawner".into())
                .spawn(move || {
                    for (mut command, reply) in rx {
                        let _ = reply.send(command.spawn());
                    }
                });
            match spawned {
                Ok(_) => Some(tx),
                Err(error) => {
                    tracing::warn!(%error, "cannot start the testkit spawner thread; servers will die with the thread that starts them");
                    None
                }
            }
        })
        .as_ref()
}

pub(crate) fn spawn_command(mut command: Command) -> io::Result<Child> {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // functions may be called. prctl and getppid are plain system calls, and the errors are
    // built from raw errno values without allocating.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl; then no signal will ever come.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // A process group of its own: a terminal's Ctrl-C goes to the foreground group, and
            // a server killed by it before the program's goodbyes would leave them undone (the
            // program's session closes first; the server still dies with us, by the signal above).
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    match spawner() {
        Some(spawner) => {
            let (reply_tx, reply_rx) = mpsc::channel();
            spawner.send((command, reply_tx)).map_err(|_| io::Error::other("testkit spawner thread is gone"))?;
            reply_rx.recv().map_err(|_| io::Error::other("testkit spawner thread is gone"))?
        }
        None => command.spawn(),
    }
}

/// The last [`LOG_TAIL_LINES`] lines of a log file (or why it cannot be read).
pub(crate) fn log_tail(path: &Path) -> String {
    let read = || -> io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        // Stack traces make lines long; 64 KiB is plenty for 20 of them.
        file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
        }
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

/// One ZooKeeper server process, restartable with the same configuration.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    main_class: &'static str,
    cfg_path: PathBuf,
    log_path: PathBuf,
    addr: String,
    /// Behind a mutex so `is_running(&self)` can reap an exited child.
    child: Mutex<Option<Child>>,
    fast_startup: bool,
    /// Extra `-D` system properties, as `name=value`.
    properties: Vec<String>,
}

impl ServerProcess {
    pub(crate) fn new(main_class: &'static str, cfg_path: PathBuf, log_path: PathBuf, addr: String) -> Self {
        ServerProcess {
            main_class,
            cfg_path,
            log_path,
            addr,
            child: Mutex::new(None),
            fast_startup: true,
            properties: Vec::new(),
        }
    }

    /// Run with the JVM's optimizing compiler (slower start, faster server).
    pub(crate) fn with_full_jit(mut self) -> Self {
        self.fast_startup = false;
        self
    }

    /// Adds a JVM system property (`-Dname=value`).
    pub(crate) fn with_property(mut self, name: &str, value: impl std::fmt::Display) -> Self {
        self.properties.push(format!("-D{name}={value}"));
        self
    }

    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    fn child(&self) -> MutexGuard<'_, Option<Child>> {
        // A panic while holding the lock cannot leave the Option inconsistent.
        self.child.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.child().as_ref().map(Child::id)
    }

    pub(crate) fn is_running(&self) -> bool {
        let mut guard = self.child();
        match guard.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(Ok(Some(status))) => {
                tracing::info!(addr = %self.addr, %status, "ZooKeeper server exited on its own");
                *guard = None;
                false
            }
            Some(Err(_)) | None => false,
        }
    }

    pub(crate) fn log_tail(&self) -> String {
        log_tail(&self.log_path)
    }

    /// Spawns the JVM; does not wait for readiness.
    pub(crate) fn spawn(&self) -> Result<(), TestkitError> {
        let cp = classpath()?;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(|e| TestkitError::io(format!("open {}", self.log_path.display()), e))?;
        // Restarts append to the same log; a marker keeps the runs apart.
        let _ = writeln!(log, "===== actix-zookeeper testkit: starting {} =====", self.main_class);
        let log_err = log.try_clone().map_err(|e| TestkitError::io(format!("clone {}", self.log_path.display()), e))?;
        let mut command = Command::new("java");
        if self.fast_startup {
            command.arg(FAST_STARTUP_FLAG);
            // Benchmark servers (full JIT) start without it, as they were measured.
            if let Some(archive) = super::class_archive::jvm_flag() {
                command.arg(archive);
            }
        }
        command
            .args(JVM_FLAGS)
            .args(&self.properties)
            .arg("-cp")
            .arg(cp)
            .arg(self.main_class)
            .arg(&self.cfg_path)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        let child =
            spawn_command(command).map_err(|e| TestkitError::io(format!("spawn java {}", self.main_class), e))?;
        tracing::debug!(addr = %self.addr, pid = child.id(), "spawned ZooKeeper JVM");
        *self.child() = Some(child);
        Ok(())
    }

    /// One readiness probe: `Ok(true)` once `srvr` reports a mode, an error if the process died.
    pub(crate) fn poll_ready(&self) -> Result<bool, TestkitError> {
        {
            let mut guard = self.child();
            let Some(child) = guard.as_mut() else {
                return Err(TestkitError::NotRunning { addr: self.addr.clone() });
            };
            match child.try_wait() {
                Ok(None) => {}
                Ok(Some(status)) => {
                    *guard = None;
                    return Err(TestkitError::ExitedEarly {
                        addr: self.addr.clone(),
                        status: status.to_string(),
                        log_tail: self.log_tail(),
                    });
                }
                Err(e) => return Err(TestkitError::io(format!("wait for {}", self.addr), e)),
            }
        }
        // Connection refused etc. just means "not yet".
        Ok(srvr(&self.addr).is_ok_and(|answer| has_mode(&answer)))
    }

    pub(crate) fn not_ready(&self, waited: Duration) -> TestkitError {
        TestkitError::NotReady { addr: self.addr.clone(), waited, log_tail: self.log_tail() }
    }

    /// Spawns and waits until serving. A server that exits during startup (typically: its port
    /// is still taken, e.g. by a previous incarnation) is retried; a server that stays up but
    /// never serves within `timeout` is killed and reported.
    pub(crate) fn start(&self, timeout: Duration, attempts: usize) -> Result<(), TestkitError> {
        // The first server of a process may make the class archive (up to its own timeout):
        // before this server's clock starts, not on it.
        if self.fast_startup {
            super::class_archive::jvm_flag();
        }
        let started = Instant::now();
        let mut attempt = 1;
        loop {
            self.spawn()?;
            match self.wait_ready(started, started + timeout) {
                Ok(()) => return Ok(()),
                Err(TestkitError::ExitedEarly { .. }) if attempt < attempts => {
                    tracing::warn!(addr = %self.addr, attempt, "ZooKeeper exited during startup; retrying");
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => {
                    self.kill_quietly();
                    return Err(e);
                }
            }
        }
    }

    fn wait_ready(&self, started: Instant, deadline: Instant) -> Result<(), TestkitError> {
        loop {
            if self.poll_ready()? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.not_ready(started.elapsed()));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// SIGTERM, then SIGKILL if the JVM has not exited after [`GRACEFUL_STOP_TIMEOUT`].
    pub(crate) fn terminate(&self) -> Result<(), TestkitError> {
        let mut guard = self.child();
        let Some(child) = guard.as_mut() else {
            return Err(TestkitError::NotRunning { addr: self.addr.clone() });
        };
        let pid = child.id();
        // SAFETY: kill(2) has no memory-safety preconditions. The child is not reaped yet, so
        // its pid cannot have been reused by an unrelated process.
        let rc = unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            return Err(TestkitError::io(format!("SIGTERM pid {pid}"), e));
        }
        let deadline = Instant::now() + GRACEFUL_STOP_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    tracing::debug!(addr = %self.addr, pid, %status, "ZooKeeper exited after SIGTERM");
                    break;
                }
                Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL_INTERVAL),
                Ok(None) => {
                    tracing::warn!(addr = %self.addr, pid, "ZooKeeper ignored SIGTERM; sending SIGKILL");
                    let _ = child.kill();
                    child.wait().map_err(|e| TestkitError::io(format!("reap pid {pid}"), e))?;
                    break;
                }
                Err(e) => return Err(TestkitError::io(format!("wait for pid {pid}"), e)),
            }
        }
        *guard = None;
        Ok(())
    }

    /// SIGKILL and reap.
    pub(crate) fn kill(&self) -> Result<(), TestkitError> {
        let mut guard = self.child();
        let Some(child) = guard.as_mut() else {
            return Err(TestkitError::NotRunning { addr: self.addr.clone() });
        };
        let pid = child.id();
        // Fails only if the child already exited, which is what we want anyway.
        let _ = child.kill();
        child.wait().map_err(|e| TestkitError::io(format!("reap pid {pid}"), e))?;
        *guard = None;
        Ok(())
    }

    /// For `Drop`: kill and reap if running, never fail.
    pub(crate) fn kill_quietly(&self) {
        let mut guard = self.child();
        if let Some(mut child) = guard.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
