//! `zk-inspect`: who holds, who waits, who leads and what is queued, read from ZooKeeper.
//!
//! ```text
//! zk-inspect --server zk1:2181 locks /locks/ledger
//! zk-inspect --server zk1:2181 election /services/billing/leader
//! zk-inspect --server zk1:2181 queue /jobs --dead-letter /jobs-dead
//! zk-inspect --server zk1:2181 tasks /render
//! zk-inspect --server zk1:2181 services /services
//! zk-inspect --server zk1:2181 node /services/billing/host-a
//! zk-inspect --server zk1:2181 --watch --json locks /locks/ledger
//! ```
//!
//! Plain words by default, one JSON object per report with `--json`; `--watch` reads again
//! every second until interrupted. Exit status 1 with a message on stderr when the server
//! cannot be reached or the path cannot be read. The reading is the library's
//! (`actix_zookeeper::inspect`); this file only parses arguments and prints.

use std::process::ExitCode;
use std::time::Duration;

use actix_zookeeper::inspect::{
    self, ElectionReport, LockReport, Member, NodeReport, QueueReport, ServicesReport, TasksReport,
};
use actix_zookeeper::{SessionConfig, SessionHandle};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "zk-inspect", version, about = "Shows the state of actix-zookeeper and Curator recipes")]
struct Args {
    /// ZooKeeper connect string (`host:port[,host:port...][/chroot]`).
    #[arg(long, short, default_value = "127.0.0.1:2181")]
    server: String,
    /// One JSON object per report instead of plain words.
    #[arg(long)]
    json: bool,
    /// Read again every second until interrupted.
    #[arg(long)]
    watch: bool,
    /// Give up when no session comes up within this many seconds.
    #[arg(long, default_value_t = 10)]
    timeout: u64,
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand, Debug, Clone)]
enum What {
    /// A lock, read/write lock or semaphore: holders and waiters in order.
    Locks {
        /// The lock's path.
        path: String,
    },
    /// An election: the leader and the participants in line.
    Election {
        /// The election's path.
        path: String,
    },
    /// A queue: depth, claimed items and by whom, the oldest item's age, dead letters.
    Queue {
        /// The queue's path.
        path: String,
        /// The dead-letter queue's path, to count its items.
        #[arg(long)]
        dead_letter: Option<String>,
    },
    /// A master–worker installation: the master, workers with capacity and load, task counts.
    Tasks {
        /// The installation's root.
        root: String,
    },
    /// Service discovery (curator-x-discovery's layout): each service's instances, their
    /// address, age and whether they are enabled.
    Services {
        /// The base path.
        path: String,
    },
    /// A kept node (a PersistentNode, or any node): its mode, owner, age and data; a protected
    /// name made for the path is found too.
    Node {
        /// The node's path.
        path: String,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    let system = actix::System::new();
    match system.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("zk-inspect: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let timeout = Duration::from_secs(args.timeout);
    let config = SessionConfig::new(&args.server).with_request_timeout(timeout);
    let session = SessionHandle::start(config).map_err(|e| e.to_string())?;
    match tokio::time::timeout(timeout, session.connected()).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => return Err(format!("{}: {error}", args.server)),
        Err(_) => return Err(format!("{}: no session within {} s", args.server, args.timeout)),
    }
    loop {
        let printed = report(&session, &args.what, args.json).await.map_err(|e| e.to_string())?;
        println!("{printed}");
        if !args.watch {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        if !args.json {
            println!();
        }
    }
    session.close().await;
    Ok(())
}

async fn report(session: &SessionHandle, what: &What, json: bool) -> Result<String, actix_zookeeper::Error> {
    Ok(match what {
        What::Locks { path } => shown(inspect::locks(session, path).await?, json, plain_locks),
        What::Election { path } => shown(inspect::election(session, path).await?, json, plain_election),
        What::Queue { path, dead_letter } => {
            shown(inspect::queue(session, path, dead_letter.as_deref()).await?, json, plain_queue)
        }
        What::Tasks { root } => shown(inspect::tasks(session, root).await?, json, plain_tasks),
        What::Services { path } => shown(inspect::services(session, path).await?, json, plain_services),
        What::Node { path } => shown(inspect::node(session, path).await?, json, |r| plain_node(path, r.as_ref())),
    })
}

/// `report` as JSON, or as `plain` words it.
fn shown<R: serde::Serialize>(report: R, json: bool, plain: impl FnOnce(&R) -> String) -> String {
    if json {
        serde_json::to_string(&report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    } else {
        plain(&report)
    }
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

fn member_line(m: &Member, role: &str) -> String {
    format!(
        "  {role:<8} {:<20} session {:<18} token 0x{:x}  for {}  ({})",
        if m.participant.is_empty() { "-" } else { &m.participant },
        m.session_id,
        m.token,
        seconds(m.age_ms),
        m.node
    )
}

fn plain_locks(r: &LockReport) -> String {
    let mut out = format!("{} {}: ", r.kind, r.path);
    let holders = r.members.iter().filter(|m| m.holds).count();
    out.push_str(&match (holders, r.members.len() - holders) {
        (0, _) => "free".to_string(),
        (h, w) => format!("{h} holding, {w} waiting"),
    });
    for m in &r.members {
        out.push('\n');
        out.push_str(&member_line(m, if m.holds { "holds" } else { "waits" }));
    }
    out
}

fn plain_election(r: &ElectionReport) -> String {
    let mut out = match r.participants.iter().find(|m| m.holds) {
        Some(leader) => format!("election {}: {} leads", r.path, leader.participant),
        None => format!("election {}: no leader", r.path),
    };
    for m in &r.participants {
        out.push('\n');
        out.push_str(&member_line(m, if m.holds { "leads" } else { "follows" }));
    }
    out
}

fn plain_queue(r: &QueueReport) -> String {
    let mut out = format!("queue {}: {} items, {} claimed", r.path, r.depth, r.claimed.len());
    if let Some(age) = r.oldest_age_ms {
        out.push_str(&format!(", oldest queued for {}", seconds(age)));
    }
    if let Some(dead) = r.dead_letters {
        out.push_str(&format!(", {dead} dead letters"));
    }
    for claim in &r.claimed {
        out.push_str(&format!("\n  claimed  {} by {}", claim.item, claim.consumer));
    }
    out
}

fn plain_tasks(r: &TasksReport) -> String {
    let master = r.master.as_deref().unwrap_or("none");
    let mut out = format!(
        "tasks {}: master {master}; {} pending, {} assigned, {} finished; {} workers",
        r.root,
        r.pending,
        r.assigned,
        r.finished,
        r.workers.len()
    );
    for w in &r.workers {
        let capacity = w.capacity.map_or("?".to_string(), |c| c.to_string());
        out.push_str(&format!("\n  worker   {:<20} load {}/{capacity}", w.id, w.load));
    }
    out
}

fn plain_services(r: &ServicesReport) -> String {
    let mut out = format!("services {}: {}", r.path, r.services.len());
    for service in &r.services {
        out.push_str(&format!("\n  {}: {} instances", service.name, service.instances.len()));
        for i in &service.instances {
            match &i.unreadable {
                None => out.push_str(&format!(
                    "\n    {:<20} {:<22} {:<18} {} for {}  session {}",
                    i.id,
                    i.address,
                    i.service_type,
                    if i.enabled { "enabled " } else { "disabled" },
                    seconds(i.age_ms),
                    i.session_id
                )),
                Some(reason) => out.push_str(&format!("\n    {:<20} unreadable: {reason}", i.node)),
            }
        }
    }
    out
}

fn plain_node(path: &str, r: Option<&NodeReport>) -> String {
    match r {
        None => format!("node {path}: missing"),
        Some(r) => format!(
            "node {}: {}{} for {}, version {}, data {:?}",
            r.path,
            r.kind,
            if r.kind == "ephemeral" { format!(" of session {}", r.session_id) } else { String::new() },
            seconds(r.age_ms),
            r.version,
            r.data
        ),
    }
}
