//! What every test JVM is started with: the main classes and flags, a server's shared
//! `zoo.cfg` settings, fresh directories and free ports, and the one thread that forks children
//! (so that they die with the test process).
//!
//! Owns: preparing and spawning a child process. Does not own a server's life once spawned
//! (`process.rs`) or the class-data archive (`class_archive.rs`).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::sync::mpsc;

use super::TestkitError;

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
