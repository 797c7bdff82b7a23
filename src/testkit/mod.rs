//! Real Apache ZooKeeper servers for tests and examples, in the spirit of Curator's
//! `TestingServer` / `TestingCluster`.
//!
//! This module owns:
//! * starting, stopping (SIGTERM), killing (SIGKILL) and restarting real ZooKeeper 3.8 server
//!   processes, either standalone ([`ZkServer`]) or as an n-member quorum ([`ZkEnsemble`]), or
//!   as a quorum whose membership changes ([`ZkDynamicEnsemble`]);
//! * four-letter-word helpers ([`four_letter_word`], [`srvr`], [`cons`], [`sessions_on`], ...)
//!   to observe what the servers really see;
//! * genuine server-side session expiry ([`expire_session`]);
//! * network faults between a client and a server or between ensemble members: TCP proxies that
//!   blackhole, reset, delay or throttle a link ([`FaultProxy`], [`ClientLinks`],
//!   [`ZkEnsemble::partition`]);
//! * recipe participants as processes of their own ([`RoleProcess`]), to pause, resume and kill
//!   for real, with the events they report as [`RoleLine`]s (the crate's own participant program,
//!   the `zk-role` binary, has its source beside this module, in `zk_role/`: a binary of its own,
//!   not a module of the library);
//! * choosing where a test connects ([`TestZooKeeper`]: a server of its own, or one the process's
//!   tests share) and isolating tests that share a server ([`unique_root`]).
//!
//! It deliberately does **not** provide mocks, fake servers or client-side simulations of
//! failures: every fault it injects is one a production client could observe from a real server.
//!
//! # Requirements
//! A Java runtime (`java` on `PATH`) and the ZooKeeper jars: either the Debian/Ubuntu package
//! (`apt-get install zookeeper`, jars in `/usr/share/java`) or an explicit classpath in the
//! `ZOOKEEPER_CLASSPATH` environment variable (see [`classpath`]).
//!
//! # Process hygiene
//! Servers are child processes owned by their handle: dropping a [`ZkServer`] or [`ZkEnsemble`]
//! kills and reaps its processes and removes its temporary directory, also while a test is
//! unwinding from a panic; the same holds for a [`RoleProcess`]. So that a test binary killed
//! with SIGKILL does not orphan JVMs or role processes, each is started with
//! `PR_SET_PDEATHSIG = SIGKILL`. Linux delivers that signal when the *thread* that forked the
//! child exits, so all of them are forked by one dedicated testkit thread that lives as long as
//! the process; it is therefore safe to start them from any thread, including
//! `spawn_blocking` workers that come and go.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod class_archive;
mod dynamic;
mod ensemble;
mod expire;
mod four_letter;
mod holds;
mod launch;
mod older_server;
mod process;
mod proxy;
mod role;
mod server;

pub use dynamic::ZkDynamicEnsemble;
pub use ensemble::ZkEnsemble;
pub use expire::expire_session;
pub use four_letter::{cons, four_letter_word, mntr, ruok, sessions_on, srvr, wchc, wchp};
pub use holds::{Hold, HoldLog};
pub use older_server::OlderServer;
pub use proxy::{ClientLinks, Direction, FaultProxy};
pub use role::{RoleLine, RoleProcess};
pub use server::{ServerOptions, ServerTls, ZkServer};

/// Errors of the testkit.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// The ZooKeeper jars could not be found.
    #[error(
        "ZooKeeper jars not found (searched {searched}); install them with `apt-get install zookeeper` \
         or set ZOOKEEPER_CLASSPATH to a Java classpath containing the ZooKeeper server"
    )]
    JarsNotFound {
        /// What was looked at.
        searched: String,
    },
    /// An I/O operation failed.
    #[error("{what}: {source}")]
    Io {
        /// The operation that failed.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A server did not report a `Mode:` in `srvr` in time.
    #[error("ZooKeeper at {addr} not ready after {waited:?}; last lines of its log:\n{log_tail}")]
    NotReady {
        /// Client address of the server.
        addr: String,
        /// How long we waited.
        waited: Duration,
        /// Last lines of the server's log.
        log_tail: String,
    },
    /// A server process exited while it was expected to come up.
    #[error("ZooKeeper at {addr} exited during startup ({status}); last lines of its log:\n{log_tail}")]
    ExitedEarly {
        /// Client address of the server.
        addr: String,
        /// Exit status as reported by the OS.
        status: String,
        /// Last lines of the server's log.
        log_tail: String,
    },
    /// The operation needs a running server, but it is stopped.
    #[error("ZooKeeper at {addr} is not running")]
    NotRunning {
        /// Client address of the server.
        addr: String,
    },
    /// An ensemble member index was out of range.
    #[error("no ensemble member {index} (ensemble has {len} members)")]
    NoSuchMember {
        /// The requested index.
        index: usize,
        /// Number of members.
        len: usize,
    },
    /// No single ensemble member reported `Mode: leader` in time.
    #[error("no single leader after {waited:?}; modes: {modes}")]
    NoLeader {
        /// How long we waited.
        waited: Duration,
        /// What each member's `srvr` said last, e.g. `[0: follower, 1: not serving, 2: down]`.
        modes: String,
    },
    /// An ensemble needs at least one member.
    #[error("an ensemble needs at least one member")]
    EmptyEnsemble,
    /// A `reconfig` of a [`ZkDynamicEnsemble`] was not accepted.
    #[error("reconfiguring the ensemble failed: {reason}")]
    Reconfig {
        /// What went wrong.
        reason: String,
    },
    /// Expiring a session failed with a client error.
    #[error("expiring session failed: {source}")]
    Expire {
        /// The client error.
        #[source]
        source: zookeeper_client::Error,
    },
    /// The session was closed but the server never confirmed it as expired.
    #[error("session {session_id:#x} not confirmed expired after {waited:?} (last outcome: {last})")]
    ExpireNotConfirmed {
        /// The session id.
        session_id: i64,
        /// How long we waited.
        waited: Duration,
        /// Description of the last reconnect attempt.
        last: String,
    },
    /// No line of a role process matched within the time allowed.
    #[error(
        "role {name}: no matching line within {waited:?}; its last lines:\n{last_lines}\nits stderr:\n{stderr_tail}"
    )]
    RoleTimeout {
        /// The role's name.
        name: String,
        /// How long we waited.
        waited: Duration,
        /// The last lines it printed on stdout.
        last_lines: String,
        /// The last lines of its stderr.
        stderr_tail: String,
    },
    /// A role process's output ended (it exited) without a matching line.
    #[error(
        "role {name} ended ({status}) without a matching line; its last lines:\n{last_lines}\nits stderr:\n{stderr_tail}"
    )]
    RoleOutputEnded {
        /// The role's name.
        name: String,
        /// Its exit status, as far as known.
        status: String,
        /// The last lines it printed on stdout.
        last_lines: String,
        /// The last lines of its stderr.
        stderr_tail: String,
    },
    /// A role process was to be signalled (paused, resumed) but has exited.
    #[error("role {name} is not running (exited: {status})")]
    RoleNotRunning {
        /// The role's name.
        name: String,
        /// Its exit status.
        status: String,
    },
    /// A role process did not exit in time after its stdin was closed; it was killed.
    #[error(
        "role {name} did not exit within {waited:?} of its stdin closing (killed); its last lines:\n{last_lines}\nits stderr:\n{stderr_tail}"
    )]
    RoleDidNotExit {
        /// The role's name.
        name: String,
        /// How long we waited.
        waited: Duration,
        /// The last lines it printed on stdout.
        last_lines: String,
        /// The last lines of its stderr.
        stderr_tail: String,
    },
}

impl TestkitError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        TestkitError::Io { what: what.into(), source }
    }
}

const DEBIAN_JAR_DIR: &str = "/usr/share/java";
const DEBIAN_JARS: &[&str] = &[
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
    "metrics-core.jar",
    "snappy-java.jar",
    // The Netty connection factory (TLS client ports); Debian's `netty-all.jar` holds none of
    // these classes.
    "netty-buffer.jar",
    "netty-codec.jar",
    "netty-common.jar",
    "netty-handler.jar",
    "netty-resolver.jar",
    "netty-transport.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
];

/// The Java classpath used to run ZooKeeper servers.
///
/// `ZOOKEEPER_CLASSPATH`, when set and non-empty, is used verbatim. Otherwise the jars of the
/// Debian `zookeeper` package in `/usr/share/java` are used; [`TestkitError::JarsNotFound`] if
/// `zookeeper.jar` is not there.
pub fn classpath() -> Result<String, TestkitError> {
    if let Some(cp) = std::env::var_os("ZOOKEEPER_CLASSPATH") {
        let cp = cp.to_string_lossy().into_owned();
        if !cp.trim().is_empty() {
            return Ok(cp);
        }
    }
    let main_jar = PathBuf::from(DEBIAN_JAR_DIR).join(DEBIAN_JARS[0]);
    if !main_jar.is_file() {
        return Err(TestkitError::JarsNotFound {
            searched: format!("$ZOOKEEPER_CLASSPATH (unset), {}", main_jar.display()),
        });
    }
    // Optional jars (e.g. snappy) are left out when absent rather than failing: the server only
    // needs them for features the testkit does not enable.
    let jars: Vec<String> = DEBIAN_JARS
        .iter()
        .map(|jar| PathBuf::from(DEBIAN_JAR_DIR).join(jar))
        .filter(|path| path.is_file())
        .map(|path| path.display().to_string())
        .collect();
    Ok(jars.join(":"))
}

static UNIQUE_COUNTER: AtomicU64 = AtomicU64::new(0);

/// `<pid>-<counter>-<nanos>`: unique within the process by the counter, across processes by the
/// pid, and across pid reuse by the clock.
pub(crate) fn unique_suffix() -> String {
    let counter = UNIQUE_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{}-{}-{}", std::process::id(), counter, nanos)
}

/// A unique root path for one test, `/t-<prefix>-<pid>-<counter>-<nanos>`, so that tests can
/// share one server without seeing each other's nodes.
///
/// Characters of `prefix` other than ASCII letters, digits, `-` and `_` are replaced by `-`.
/// The path is not created.
pub fn unique_root(prefix: &str) -> String {
    let mut root = String::from("/t-");
    for c in prefix.chars() {
        root.push(if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' });
    }
    let _ = write!(root, "-{}", unique_suffix());
    root
}

/// Where tests should connect.
///
/// With the environment variable `ZK_CONNECT` set (and non-empty), tests run against that
/// external ensemble, where the testkit cannot inject faults. Otherwise [`from_env`](Self::from_env)
/// starts an embedded [`ZkServer`] of the test's own, and [`shared`](Self::shared) hands out one
/// server per process.
#[derive(Debug)]
pub enum TestZooKeeper {
    /// A server started by the testkit; faults (stop, kill, restart) can be injected.
    Embedded(ZkServer),
    /// A server this value does not own: from `ZK_CONNECT`, or the process's shared one
    /// ([`TestZooKeeper::shared`]).
    External(String),
}

/// The server [`TestZooKeeper::shared`] hands out, started on first use.
static SHARED: std::sync::Mutex<Option<ZkServer>> = std::sync::Mutex::new(None);

/// Stops the shared server when the process exits (statics are never dropped; without this the
/// JVM would live until the forking thread's death signal, and its directory would stay).
extern "C" fn stop_shared_server() {
    // Never waits: a thread still holding the lock at exit would hang the process. A lock
    // poisoned by a panicking test still holds the server.
    let shared = match SHARED.try_lock() {
        Ok(shared) => Some(shared),
        Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    };
    if let Some(mut shared) = shared {
        drop(shared.take());
    }
}

impl TestZooKeeper {
    /// `External` from `ZK_CONNECT`, otherwise a freshly started embedded server.
    pub fn from_env() -> Result<TestZooKeeper, TestkitError> {
        match std::env::var("ZK_CONNECT") {
            Ok(connect) if !connect.trim().is_empty() => Ok(TestZooKeeper::External(connect.trim().to_owned())),
            _ => ZkServer::start().map(TestZooKeeper::Embedded),
        }
    }

    /// `External` from `ZK_CONNECT`; otherwise one embedded server shared by every caller in
    /// this process, started on first use (again if it has died) and stopped when the process
    /// exits.
    ///
    /// For tests that work under a root of their own ([`unique_root`]) and never stop, restart
    /// or read the counters of their server: a process's tests then pay for one server start
    /// instead of one each. A test that needs the server to itself uses [`from_env`](Self::from_env)
    /// or [`ZkServer::start`].
    pub fn shared() -> Result<TestZooKeeper, TestkitError> {
        if let Ok(connect) = std::env::var("ZK_CONNECT") {
            if !connect.trim().is_empty() {
                return Ok(TestZooKeeper::External(connect.trim().to_owned()));
            }
        }
        let mut shared = SHARED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !shared.as_ref().is_some_and(ZkServer::is_running) {
            let first = shared.is_none();
            *shared = Some(ZkServer::start()?);
            if first {
                // SAFETY: registers a plain `extern "C" fn` with no arguments, as `atexit` asks.
                unsafe {
                    libc::atexit(stop_shared_server);
                }
            }
        }
        Ok(TestZooKeeper::External(shared.as_ref().map(ZkServer::connect_string).unwrap_or_default()))
    }

    /// The connect string for clients.
    pub fn connect_string(&self) -> String {
        match self {
            TestZooKeeper::Embedded(server) => server.connect_string(),
            TestZooKeeper::External(connect) => connect.clone(),
        }
    }

    /// The embedded server, if any, for fault injection.
    pub fn embedded_mut(&mut self) -> Option<&mut ZkServer> {
        match self {
            TestZooKeeper::Embedded(server) => Some(server),
            TestZooKeeper::External(_) => None,
        }
    }
}
