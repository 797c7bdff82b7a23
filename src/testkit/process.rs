//! One ZooKeeper JVM as a child process: spawning, readiness, graceful and forced termination.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::four_letter::{has_mode, srvr};
use super::launch::{FAST_STARTUP_FLAG, JVM_FLAGS, log_tail, spawn_command};
use super::{TestkitError, classpath};

const POLL_INTERVAL: Duration = Duration::from_millis(100);
const GRACEFUL_STOP_TIMEOUT: Duration = Duration::from_secs(10);

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
