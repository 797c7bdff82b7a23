//! An n-member ZooKeeper quorum on loopback whose members reach each other through fault
//! proxies, so that tests can partition it.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::TestkitError;
use super::four_letter::{sessions_on, srvr};
use super::launch::{QUORUM_MAIN, common_config, free_ports, fresh_temp_dir_in, write_file};
use super::process::ServerProcess;
use super::proxy::{ElectionHint, FaultProxy, Rewrite, reserve_listener};
use super::server::ServerOptions;

/// The longest a member waits between two election rounds, and to open a peer connection (ms).
const ELECTION_RETRY_CAP_MS: u32 = 1000;

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

/// How member `from` reaches member `to`: one proxy in front of `to`'s quorum port (followers
/// connect to the leader there) and one in front of its election port.
#[derive(Debug)]
struct PeerLink {
    from: usize,
    to: usize,
    quorum: FaultProxy,
    election: FaultProxy,
}

/// An ensemble of real ZooKeeper servers on loopback; each member has its own client, quorum and
/// election port and its own directory under one temporary directory.
///
/// Members are indexed `0..len()`; member `i` has `myid` `i + 1`. Dropping the ensemble kills
/// (SIGKILL) and reaps every member, stops its proxies and deletes the directory.
///
/// # How the members are wired
/// Every member has a `zoo.cfg` of its own. Its own `server.<myid>` line names its real quorum
/// and election ports (it listens there); the line of every other member `j` names two
/// [`FaultProxy`]s that belong to the ordered pair (this member → `j`): one forwarding to `j`'s
/// quorum port, one to `j`'s election port. An ensemble of `n` has `2·n·(n−1)` such proxies, and
/// all traffic between two members passes through the proxies of their pair, in both
/// directions, so [`partition`](Self::partition) and [`isolate`](Self::isolate) cut exactly the
/// links between the groups named. Client ports are not proxied: put [`ClientLinks`] in front
/// of them to cut a client off.
///
/// One detail keeps the election links proxied: a member that connects to a member with a
/// larger id only announces its own election address and hangs up, and the larger one connects
/// back to that address. The election proxy of the pair rewrites the announced address to the
/// election proxy of the opposite pair, so the connection back goes through a proxy as well.
///
/// [`ClientLinks`]: super::ClientLinks
#[derive(Debug)]
pub struct ZkEnsemble {
    dir: PathBuf,
    members: Vec<Member>,
    links: Vec<PeerLink>,
}

impl ZkEnsemble {
    /// Starts `n` members and blocks until every one reports a `Mode:` (leader / follower) in
    /// `srvr`. [`TestkitError::EmptyEnsemble`] for `n == 0`.
    pub fn start(n: usize) -> Result<ZkEnsemble, TestkitError> {
        Self::start_with(n, ServerOptions::default())
    }

    /// Like [`start`](Self::start), every member with `options` (e.g.
    /// [`ServerOptions::benchmark`]: data on tmpfs, the JVM's optimizing compiler).
    pub fn start_with(n: usize, options: ServerOptions) -> Result<ZkEnsemble, TestkitError> {
        if n == 0 {
            return Err(TestkitError::EmptyEnsemble);
        }
        let dir = fresh_temp_dir_in(options.parent_dir())?;
        // Constructed before anything is spawned so that an early return drops (kills) whatever
        // was started.
        let mut ensemble = ZkEnsemble { dir: dir.clone(), members: Vec::with_capacity(n), links: Vec::new() };
        // The proxies' ports are taken before the members' ports are chosen, so that no member
        // can be handed a port a proxy holds.
        let mut reserved = Vec::with_capacity(n * n.saturating_sub(1));
        for from in 0..n {
            for to in (0..n).filter(|&to| to != from) {
                reserved.push((from, to, reserve_listener()?, reserve_listener()?));
            }
        }
        let election_proxy = |from: usize, to: usize| {
            reserved.iter().find(|r| r.0 == from && r.1 == to).map(|r| r.3.1.clone()).unwrap_or_default()
        };
        let hints: Vec<String> = reserved.iter().map(|&(from, to, ..)| election_proxy(to, from)).collect();
        let ports = free_ports(3 * n)?;
        let (quorum_port, election_port) = (|i: usize| ports[3 * i + 1], |i: usize| ports[3 * i + 2]);
        for ((from, to, (quorum_listener, quorum_address), (election_listener, election_address)), hint) in
            reserved.into_iter().zip(hints)
        {
            let quorum = FaultProxy::start_on(quorum_listener, &format!("127.0.0.1:{}", quorum_port(to)), None)?;
            debug_assert_eq!(quorum.address(), quorum_address);
            let election = FaultProxy::start_on(
                election_listener,
                &format!("127.0.0.1:{}", election_port(to)),
                Some(Rewrite::Election(ElectionHint::new(hint))),
            )?;
            debug_assert_eq!(election.address(), election_address);
            ensemble.links.push(PeerLink { from, to, quorum, election });
        }
        for i in 0..n {
            let mut servers = String::new();
            for j in 0..n {
                // A server line has one host for both ports; every proxy is on 127.0.0.1 too.
                let (quorum, election) = match ensemble.link(i, j) {
                    None => (quorum_port(j), election_port(j)),
                    Some(link) => (link.quorum.port(), link.election.port()),
                };
                let _ = writeln!(servers, "server.{}=127.0.0.1:{quorum}:{election}", j + 1);
            }
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
                process: options.apply(
                    ServerProcess::new(
                        QUORUM_MAIN,
                        cfg_path,
                        member_dir.join("zookeeper.log"),
                        format!("127.0.0.1:{client_port}"),
                    )
                    // A member that could not reach its peers doubles its wait between election
                    // rounds up to 60 s by default, so after a partition heals it may sit out
                    // tens of seconds before it tries again (a CI run saw 40 s without a
                    // leader). Tests heal partitions within seconds: cap the wait, and the
                    // time a peer connection may take to open, at one second.
                    .with_property("zookeeper.fastleader.maxNotificationInterval", ELECTION_RETRY_CAP_MS)
                    .with_property("zookeeper.cnxTimeout", ELECTION_RETRY_CAP_MS),
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
        self.end_member(i, false)
    }

    /// Crash of member `i` (SIGKILL).
    pub fn kill_member(&mut self, i: usize) -> Result<(), TestkitError> {
        self.end_member(i, true)
    }

    fn end_member(&mut self, i: usize, crash: bool) -> Result<(), TestkitError> {
        let member = self.member(i)?;
        let pid = member.process.pid();
        if crash {
            member.process.kill()?
        } else {
            member.process.terminate()?
        }
        let (port, how) = (member.client_port, if crash { "killed" } else { "stopped" });
        tracing::info!(member = i, port, pid, "{how} ensemble member");
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

    /// Process id of member `i` while it runs, e.g. to pause it with SIGSTOP.
    pub fn member_pid(&self, i: usize) -> Option<u32> {
        self.members.get(i).and_then(|m| m.process.pid())
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
    fn link(&self, from: usize, to: usize) -> Option<&PeerLink> {
        self.links.iter().find(|link| link.from == from && link.to == to)
    }

    /// Cuts every link between a member of `a` and a member of `b`, both ways, quorum and
    /// election alike (see [`FaultProxy::blackhole`]): a network partition between the two
    /// groups. Links within a group, and client connections, are untouched. Out-of-range
    /// indices are ignored.
    pub fn partition(&self, a: &[usize], b: &[usize]) {
        for link in &self.links {
            let across =
                (a.contains(&link.from) && b.contains(&link.to)) || (b.contains(&link.from) && a.contains(&link.to));
            if across {
                link.quorum.blackhole();
                link.election.blackhole();
            }
        }
        tracing::info!(?a, ?b, "partitioned ensemble");
    }

    /// Cuts member `i` off every other member: `partition(&[i], &<all others>)`.
    pub fn isolate(&self, i: usize) {
        let others: Vec<usize> = (0..self.len()).filter(|&j| j != i).collect();
        self.partition(&[i], &others);
    }

    /// Heals every link between members (see [`FaultProxy::heal`]).
    pub fn heal(&self) {
        for link in &self.links {
            link.quorum.heal();
            link.election.heal();
        }
        tracing::info!("healed ensemble links");
    }

    /// The proxies member `from` reaches member `to` through: `(quorum, election)`, for faults
    /// other than a partition (a one-way cut, latency, ...). `None` for `from == to` or an
    /// out-of-range index.
    pub fn member_link(&self, from: usize, to: usize) -> Option<(&FaultProxy, &FaultProxy)> {
        self.link(from, to).map(|link| (&link.quorum, &link.election))
    }

    /// Waits until exactly one running member says `Mode: leader` and returns its index. While
    /// a leader is being replaced, the old one may still say so for a moment next to the new
    /// one; such a moment does not count. [`TestkitError::NoLeader`] after `timeout`.
    pub fn wait_for_leader(&self, timeout: Duration) -> Result<usize, TestkitError> {
        let started = Instant::now();
        loop {
            let modes = self.modes();
            let leaders: Vec<usize> =
                modes.iter().enumerate().filter(|(_, mode)| mode.as_str() == "leader").map(|(i, _)| i).collect();
            if let [leader] = leaders[..] {
                return Ok(leader);
            }
            if started.elapsed() >= timeout {
                let modes = modes.iter().enumerate().map(|(i, mode)| format!("{i}: {mode}")).collect::<Vec<_>>();
                return Err(TestkitError::NoLeader {
                    waited: started.elapsed(),
                    modes: format!("[{}]", modes.join(", ")),
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Each member's mode from `srvr`: `leader`, `follower`, ..., `not serving` or `down`.
    fn modes(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| {
                if !m.process.is_running() {
                    return "down".to_owned();
                }
                match srvr(m.process.addr()) {
                    Ok(answer) => answer
                        .lines()
                        .find_map(|l| l.trim().strip_prefix("Mode:"))
                        .map_or_else(|| "not serving".to_owned(), |mode| mode.trim().to_owned()),
                    Err(_) => "unreachable".to_owned(),
                }
            })
            .collect()
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
