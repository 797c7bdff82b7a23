//! An n-member ZooKeeper quorum on loopback.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::TestkitError;
use super::four_letter::{sessions_on, srvr};
use super::process::{QUORUM_MAIN, ServerProcess, common_config, free_ports, fresh_temp_dir_in, write_file};

/// Members elect a leader only once a quorum of JVMs is up, so this is much longer than a
/// standalone start, especially on a loaded CI machine.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const START_ATTEMPTS: usize = 3;
const POLL_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Debug)]
struct Member {
    client_port: u16,
    process: ServerProcess,
}

/// An ensemble of real ZooKeeper servers on loopback; each member has its own client, quorum and
/// election port and its own directory under one temporary directory.
///
/// Members are indexed `0..len()`; member `i` has `myid` `i + 1`. Dropping the ensemble kills
/// (SIGKILL) and reaps every member and deletes the directory.
#[derive(Debug)]
pub struct ZkEnsemble {
    dir: PathBuf,
    members: Vec<Member>,
}

impl ZkEnsemble {
    /// Starts `n` members and blocks until every one reports a `Mode:` (leader / follower) in
    /// `srvr`. [`TestkitError::EmptyEnsemble`] for `n == 0`.
    pub fn start(n: usize) -> Result<ZkEnsemble, TestkitError> {
        if n == 0 {
            return Err(TestkitError::EmptyEnsemble);
        }
        let dir = fresh_temp_dir_in(None)?;
        // Constructed before anything is spawned so that an early return drops (kills) whatever
        // was started.
        let mut ensemble = ZkEnsemble { dir: dir.clone(), members: Vec::with_capacity(n) };
        let ports = free_ports(3 * n)?;
        let mut servers = String::new();
        for i in 0..n {
            let _ = writeln!(servers, "server.{}=127.0.0.1:{}:{}", i + 1, ports[3 * i + 1], ports[3 * i + 2]);
        }
        for i in 0..n {
            let member_dir = dir.join(format!("member-{}", i + 1));
            let data_dir = member_dir.join("data");
            std::fs::create_dir_all(&data_dir)
                .map_err(|e| TestkitError::io(format!("create {}", data_dir.display()), e))?;
            write_file(&data_dir.join("myid"), &format!("{}\n", i + 1))?;
            let client_port = ports[3 * i];
            let cfg_path = member_dir.join("zoo.cfg");
            write_file(&cfg_path, &format!("{}{servers}", common_config(&data_dir, client_port)))?;
            ensemble.members.push(Member {
                client_port,
                process: ServerProcess::new(
                    QUORUM_MAIN,
                    cfg_path,
                    member_dir.join("zookeeper.log"),
                    format!("127.0.0.1:{client_port}"),
                ),
            });
        }
        let started = Instant::now();
        for member in &ensemble.members {
            member.process.spawn()?;
        }
        let deadline = started + READY_TIMEOUT;
        let mut ready = vec![false; n];
        let mut attempts = vec![1; n];
        while ready.iter().any(|r| !r) {
            for (i, member) in ensemble.members.iter().enumerate() {
                if ready[i] {
                    continue;
                }
                match member.process.poll_ready() {
                    Ok(r) => ready[i] = r,
                    Err(TestkitError::ExitedEarly { .. }) if attempts[i] < START_ATTEMPTS => {
                        tracing::warn!(member = i, "ensemble member exited during startup; retrying");
                        attempts[i] += 1;
                        member.process.spawn()?;
                    }
                    Err(e) => return Err(e),
                }
            }
            if ready.iter().all(|r| *r) {
                break;
            }
            if Instant::now() >= deadline {
                let i = ready.iter().position(|r| !r).unwrap_or(0);
                return Err(ensemble.members[i].process.not_ready(started.elapsed()));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        tracing::info!(
            connect = %ensemble.connect_string(),
            pids = ?ensemble.members.iter().map(|m| m.process.pid()).collect::<Vec<_>>(),
            elapsed = ?started.elapsed(),
            dir = %dir.display(),
            "started ZooKeeper ensemble"
        );
        Ok(ensemble)
    }

    /// `127.0.0.1:<p1>,127.0.0.1:<p2>,...` over all members, running or not.
    pub fn connect_string(&self) -> String {
        self.members.iter().map(|m| m.process.addr()).collect::<Vec<_>>().join(",")
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always false: an ensemble has at least one member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// `127.0.0.1:<client port>` of member `i`.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn member_address(&self, i: usize) -> String {
        self.members[i].process.addr().to_owned()
    }

    /// Client port of member `i`.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn member_port(&self, i: usize) -> u16 {
        self.members[i].client_port
    }

    /// Last lines of member `i`'s log, for diagnostics.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn member_log_tail(&self, i: usize) -> String {
        self.members[i].process.log_tail()
    }

    fn member(&self, i: usize) -> Result<&Member, TestkitError> {
        self.members.get(i).ok_or(TestkitError::NoSuchMember { index: i, len: self.members.len() })
    }

    /// Graceful stop of member `i` (SIGTERM, SIGKILL after 10 s).
    pub fn stop_member(&mut self, i: usize) -> Result<(), TestkitError> {
        let member = self.member(i)?;
        let pid = member.process.pid();
        member.process.terminate()?;
        tracing::info!(member = i, port = member.client_port, pid, "stopped ensemble member");
        Ok(())
    }

    /// Crash of member `i` (SIGKILL).
    pub fn kill_member(&mut self, i: usize) -> Result<(), TestkitError> {
        let member = self.member(i)?;
        let pid = member.process.pid();
        member.process.kill()?;
        tracing::info!(member = i, port = member.client_port, pid, "killed ensemble member");
        Ok(())
    }

    /// Starts member `i` again with its ports, data and configuration, and blocks until it
    /// reports a `Mode:` again. A running member is stopped gracefully first.
    pub fn restart_member(&mut self, i: usize) -> Result<(), TestkitError> {
        if self.member(i)?.process.is_running() {
            self.stop_member(i)?;
        }
        let member = self.member(i)?;
        let started = Instant::now();
        member.process.start(READY_TIMEOUT, START_ATTEMPTS)?;
        tracing::info!(member = i, port = member.client_port, pid = member.process.pid(), elapsed = ?started.elapsed(), "restarted ensemble member");
        Ok(())
    }

    /// Whether member `i`'s process is alive; false for an out-of-range `i`.
    pub fn is_member_running(&self, i: usize) -> bool {
        self.members.get(i).is_some_and(|m| m.process.is_running())
    }

    /// Index of the running member that currently holds a connection for `session_id`
    /// (according to its `cons`), `None` if no member does.
    pub fn member_serving(&self, session_id: i64) -> Option<usize> {
        self.members.iter().position(|m| {
            m.process.is_running() && sessions_on(m.process.addr()).is_ok_and(|ids| ids.contains(&session_id))
        })
    }

    /// Index of the running member whose `srvr` says `Mode: leader`, if any.
    pub fn leader(&self) -> Option<usize> {
        self.members.iter().position(|m| {
            m.process.is_running()
                && srvr(m.process.addr()).is_ok_and(|answer| answer.lines().any(|l| l.trim() == "Mode: leader"))
        })
    }
}

impl Drop for ZkEnsemble {
    fn drop(&mut self) {
        for member in &self.members {
            member.process.kill_quietly();
        }
        if let Err(error) = std::fs::remove_dir_all(&self.dir) {
            tracing::debug!(%error, dir = %self.dir.display(), "cannot remove ZooKeeper temp dir");
        }
    }
}
