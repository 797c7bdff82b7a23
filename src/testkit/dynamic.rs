//! A ZooKeeper ensemble with dynamic reconfiguration enabled: members join and leave while it
//! serves, the way an operator grows, shrinks or replaces a production ensemble.
//!
//! Owns: the members' processes, their dynamic configuration files, and the `reconfig` requests
//! that add or remove them. Does not own fault injection between members: unlike
//! [`ZkEnsemble`](super::ZkEnsemble), whose per-pair proxies need one configuration per member,
//! a reconfigurable ensemble shares one configuration, so members talk to each other directly.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use zookeeper_client::{Client, EnsembleUpdate};

use super::TestkitError;
use super::four_letter::srvr;
use super::launch::{QUORUM_MAIN, common_config, free_ports, fresh_temp_dir_in, write_file};
use super::process::ServerProcess;

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const START_ATTEMPTS: usize = 3;
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How long a `reconfig` may take to be accepted (a new member must have synced first).
const RECONFIG_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug)]
struct Member {
    id: u32,
    client_port: u16,
    quorum_port: u16,
    election_port: u16,
    process: ServerProcess,
    /// Whether the ensemble's configuration names it (it was added and not removed).
    voting: bool,
}

impl Member {
    /// Its line in a dynamic configuration: `server.<id>=...:participant;<client address>`.
    fn server_line(&self) -> String {
        format!(
            "server.{}=127.0.0.1:{}:{}:participant;127.0.0.1:{}",
            self.id, self.quorum_port, self.election_port, self.client_port
        )
    }
}

/// An ensemble of real ZooKeeper servers started with `reconfigEnabled=true`, whose membership
/// tests change with [`join`](Self::join) and [`leave`](Self::leave) (ZooKeeper's incremental
/// `reconfig`). Members are indexed in the order they were started; member `i` has `myid`
/// `i + 1`, also after others left. ACLs are skipped (`zookeeper.skipACL`), so that any client
/// may reconfigure. Dropping it kills every member and deletes its directory.
#[derive(Debug)]
pub struct ZkDynamicEnsemble {
    dir: PathBuf,
    members: Vec<Member>,
}

impl ZkDynamicEnsemble {
    /// Starts `n` voting members and blocks until each reports a `Mode:` in `srvr`.
    pub fn start(n: usize) -> Result<ZkDynamicEnsemble, TestkitError> {
        if n == 0 {
            return Err(TestkitError::EmptyEnsemble);
        }
        let mut ensemble = ZkDynamicEnsemble { dir: fresh_temp_dir_in(None)?, members: Vec::with_capacity(n) };
        for _ in 0..n {
            ensemble.new_member(true)?;
        }
        let config = ensemble.voting_config(None);
        for i in 0..n {
            ensemble.write_config(i, &config)?;
            ensemble.members[i].process.spawn()?;
        }
        let started = Instant::now();
        for i in 0..n {
            ensemble.wait_ready(i, started)?;
        }
        tracing::info!(connect = %ensemble.connect_string(), elapsed = ?started.elapsed(), "started a reconfigurable ensemble");
        Ok(ensemble)
    }

    fn new_member(&mut self, voting: bool) -> Result<usize, TestkitError> {
        let ports = free_ports(3)?;
        let id = self.members.len() as u32 + 1;
        let member_dir = self.dir.join(format!("member-{id}"));
        let data_dir = member_dir.join("data");
        std::fs::create_dir_all(&data_dir)
            .map_err(|e| TestkitError::io(format!("create {}", data_dir.display()), e))?;
        write_file(&data_dir.join("myid"), &format!("{id}\n"))?;
        let process = ServerProcess::new(
            QUORUM_MAIN,
            member_dir.join("zoo.cfg"),
            member_dir.join("zookeeper.log"),
            format!("127.0.0.1:{}", ports[0]),
        )
        .with_property("zookeeper.skipACL", "yes")
        .with_property("zookeeper.fastleader.maxNotificationInterval", 1000)
        .with_property("zookeeper.cnxTimeout", 1000);
        self.members.push(Member {
            id,
            client_port: ports[0],
            quorum_port: ports[1],
            election_port: ports[2],
            process,
            voting,
        });
        Ok(self.members.len() - 1)
    }

    /// The voting members' lines, and `extra`'s.
    fn voting_config(&self, extra: Option<usize>) -> String {
        let mut lines = String::new();
        for (i, member) in self.members.iter().enumerate() {
            if member.voting || Some(i) == extra {
                let _ = writeln!(lines, "{}", member.server_line());
            }
        }
        lines
    }

    /// Member `i`'s static `zoo.cfg` (no client port: the dynamic file names it) and its
    /// dynamic configuration.
    fn write_config(&self, i: usize, dynamic: &str) -> Result<(), TestkitError> {
        let member = &self.members[i];
        let member_dir = self.dir.join(format!("member-{}", member.id));
        let dynamic_path = member_dir.join("zoo.cfg.dynamic");
        write_file(&dynamic_path, dynamic)?;
        let common: String = common_config(&member_dir.join("data"), member.client_port)
            .lines()
            .filter(|line| !line.starts_with("clientPort"))
            .map(|line| format!("{line}\n"))
            .collect();
        let config = format!(
            "{common}reconfigEnabled=true\nstandaloneEnabled=false\ndynamicConfigFile={}\n",
            dynamic_path.display()
        );
        write_file(&member_dir.join("zoo.cfg"), &config)
    }

    fn wait_ready(&self, i: usize, started: Instant) -> Result<(), TestkitError> {
        let member = &self.members[i];
        let mut attempts = 1;
        loop {
            match member.process.poll_ready() {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(TestkitError::ExitedEarly { .. }) if attempts < START_ATTEMPTS => {
                    attempts += 1;
                    member.process.spawn()?;
                }
                Err(e) => return Err(e),
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(member.process.not_ready(started.elapsed()));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Starts a new server that knows the current configuration and itself, and blocks until it
    /// has synced with the leader (it reports a `Mode:`). It does not vote and is not in the
    /// configuration until [`join`](Self::join). Returns its index.
    pub fn start_member(&mut self) -> Result<usize, TestkitError> {
        let i = self.new_member(false)?;
        let config = self.voting_config(Some(i));
        self.write_config(i, &config)?;
        self.members[i].process.spawn()?;
        self.wait_ready(i, Instant::now())?;
        tracing::info!(member = i, address = %self.member_address(i), "started a server to join the ensemble");
        Ok(i)
    }

    /// Adds started member `i` to the configuration (`reconfig -add`), through a client of the
    /// voting members.
    pub async fn join(&mut self, i: usize) -> Result<(), TestkitError> {
        let line = self.member(i)?.server_line();
        self.reconfig(&[line.as_str()], &[]).await?;
        self.members[i].voting = true;
        tracing::info!(member = i, "member joined the ensemble");
        Ok(())
    }

    /// Removes member `i` from the configuration (`reconfig -remove`), then stops its process.
    pub async fn leave(&mut self, i: usize) -> Result<(), TestkitError> {
        let id = self.member(i)?.id.to_string();
        self.reconfig(&[], &[id.as_str()]).await?;
        self.members[i].voting = false;
        self.members[i].process.terminate()?;
        tracing::info!(member = i, "member left the ensemble and stopped");
        Ok(())
    }

    async fn reconfig(&self, joinings: &[&str], leavings: &[&str]) -> Result<(), TestkitError> {
        let started = Instant::now();
        let client = tokio::time::timeout(RECONFIG_TIMEOUT, Client::connect(&self.connect_string()))
            .await
            .map_err(|_| TestkitError::Reconfig { reason: "no connection to the ensemble".into() })?
            .map_err(|e| TestkitError::Reconfig { reason: format!("connect: {e}") })?;
        loop {
            let update =
                EnsembleUpdate::Incremental { joinings: joinings.iter().copied(), leavings: leavings.iter().copied() };
            match client.update_ensemble(update, None).await {
                Ok(_) => return Ok(()),
                // A joining server that has not finished syncing is refused for a moment.
                Err(e) if started.elapsed() < RECONFIG_TIMEOUT => {
                    tracing::debug!(error = %e, "reconfig refused; trying again");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(TestkitError::Reconfig { reason: e.to_string() }),
            }
        }
    }

    fn member(&self, i: usize) -> Result<&Member, TestkitError> {
        self.members.get(i).ok_or(TestkitError::NoSuchMember { index: i, len: self.members.len() })
    }

    /// The voting members' client addresses, comma-separated.
    pub fn connect_string(&self) -> String {
        let voting = self.members.iter().filter(|m| m.voting);
        voting.map(|m| m.process.addr().to_owned()).collect::<Vec<_>>().join(",")
    }

    /// Member `i`'s client address, `127.0.0.1:<port>`.
    ///
    /// # Panics
    /// If `i` is not a member's index.
    pub fn member_address(&self, i: usize) -> String {
        self.members[i].process.addr().to_owned()
    }

    /// Number of servers started (voting or not, running or not).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always false: an ensemble has at least one member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Index of the running member whose `srvr` says `Mode: leader`, if any.
    pub fn leader(&self) -> Option<usize> {
        self.members.iter().position(|m| {
            m.process.is_running()
                && srvr(m.process.addr()).is_ok_and(|answer| answer.lines().any(|l| l.trim() == "Mode: leader"))
        })
    }

    /// Stops member `i`'s process where it is (SIGSTOP): its sockets stay open and nothing
    /// answers.
    pub fn pause_member(&self, i: usize) -> Result<(), TestkitError> {
        self.signal(i, libc::SIGSTOP)
    }

    /// Lets a paused member go on (SIGCONT).
    pub fn resume_member(&self, i: usize) -> Result<(), TestkitError> {
        self.signal(i, libc::SIGCONT)
    }

    fn signal(&self, i: usize, signal: libc::c_int) -> Result<(), TestkitError> {
        let member = self.member(i)?;
        let addr = member.process.addr().to_owned();
        let pid = member.process.pid().ok_or(TestkitError::NotRunning { addr: addr.clone() })?;
        let pid = libc::pid_t::try_from(pid).map_err(|_| TestkitError::NotRunning { addr: addr.clone() })?;
        // SAFETY: kill(2) with a pid this ensemble spawned and has not reaped.
        if unsafe { libc::kill(pid, signal) } != 0 {
            return Err(TestkitError::io(format!("signal {signal} to {addr}"), std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Last lines of member `i`'s log, for diagnostics.
    ///
    /// # Panics
    /// If `i` is not a member's index.
    pub fn member_log_tail(&self, i: usize) -> String {
        self.members[i].process.log_tail()
    }
}

impl Drop for ZkDynamicEnsemble {
    fn drop(&mut self) {
        for member in &self.members {
            member.process.kill_quietly();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
