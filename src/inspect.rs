//! What the recipes' nodes say, read once (feature `cli`): who holds a lock and who waits, who
//! leads an election, what a queue holds and who claimed it, how a master–worker installation
//! stands, which instances each service has, what a kept (persistent) node is. The `zk-inspect` binary prints these; they work on layouts written by Curator too.
//!
//! Owns: reading a recipe's directory into a report ([`locks`], [`election`], [`queue`],
//! [`tasks`], [`services`], [`node`]), in the recipes' own order. Does not own any recipe's rules beyond what the
//! layouts say (the grant rules are [`crate::recipe::naming`]'s), nor printing (the binary's).
//!
//! A report is a snapshot made of several reads: a line that moves while it is read may show a
//! node that has just gone. Ages are measured against this machine's clock from each node's
//! creation time on the server, so a skewed clock skews them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::error::Error;
use crate::path;
use crate::recipe::naming::{self, Rule, Standing};
use crate::session::SessionHandle;

/// One node in a lock's or an election's line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Member {
    /// The node's name.
    pub node: String,
    /// The participant id its data holds (Curator stores it there), if it is text.
    pub participant: String,
    /// The session that owns the node (hex, as ZooKeeper's tools print it).
    pub session_id: String,
    /// The node's `czxid`: the fencing token of its grant.
    pub token: i64,
    /// How long the node has existed (waiting, then holding), in milliseconds.
    pub age_ms: u64,
    /// Whether it holds the grant.
    pub holds: bool,
}

/// Who holds a lock (a mutex, a read/write lock, or a semaphore's leases) and who waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockReport {
    /// The lock's path.
    pub path: String,
    /// `lock`, `read-write lock` or `semaphore`.
    pub kind: String,
    /// Every node in line, in order: the holders first (`holds`), then the waiters.
    pub members: Vec<Member>,
}

/// Who leads an election, and who stands behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ElectionReport {
    /// The election's path.
    pub path: String,
    /// The participants in line; the first leads (`holds`).
    pub participants: Vec<Member>,
}

/// A queue's items and claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueReport {
    /// The queue's path.
    pub path: String,
    /// Items in the queue, claimed or not.
    pub depth: usize,
    /// Claimed items and the consumer that claimed each, in queue order.
    pub claimed: Vec<Claim>,
    /// How long the oldest item has been queued, in milliseconds.
    pub oldest_age_ms: Option<u64>,
    /// Items in the dead-letter queue, when one was named.
    pub dead_letters: Option<usize>,
}

/// An item a consumer has claimed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claim {
    /// The item.
    pub item: String,
    /// The consumer's id (the claim's data).
    pub consumer: String,
}

/// How a master–worker installation stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TasksReport {
    /// The installation's root.
    pub root: String,
    /// The master's id, if one leads.
    pub master: Option<String>,
    /// The registered workers.
    pub workers: Vec<WorkerLoad>,
    /// Tasks waiting for a worker.
    pub pending: usize,
    /// Tasks given to a worker and not finished.
    pub assigned: usize,
    /// Tasks with a result (or given up).
    pub finished: usize,
}

/// A registered worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerLoad {
    /// Its id.
    pub id: String,
    /// How many tasks it takes at once (its registration's data).
    pub capacity: Option<u32>,
    /// How many it has now.
    pub load: usize,
}

/// The services under a discovery base path, and their instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServicesReport {
    /// The base path.
    pub path: String,
    /// Each service, by name.
    pub services: Vec<ServiceReport>,
}

/// One service and its instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceReport {
    /// The service's name.
    pub name: String,
    /// Its instances, by node name.
    pub instances: Vec<InstanceReport>,
}

/// One registered instance (or a node that cannot be read as one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstanceReport {
    /// The node's name.
    pub node: String,
    /// The instance's id (empty when unreadable).
    pub id: String,
    /// `address:port` (or `address:-`), `-` without an address.
    pub address: String,
    /// Its TLS port.
    pub ssl_port: Option<u16>,
    /// `DYNAMIC`, `STATIC`, `PERMANENT` or `DYNAMIC_SEQUENTIAL`.
    pub service_type: String,
    /// Whether providers may pick it.
    pub enabled: bool,
    /// How long ago it was registered (its `registrationTimeUTC`), in milliseconds.
    pub age_ms: u64,
    /// The session owning its node (hex); `0x0` for a persistent node.
    pub session_id: String,
    /// Why the node cannot be read as an instance, if it cannot.
    pub unreadable: Option<String>,
}

/// One node, as a kept (persistent) node is checked: whether it is there, in which mode, whose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeReport {
    /// Its path: the one given, or the protected sequential name found for it.
    pub path: String,
    /// `ephemeral`, `persistent`, `container` or `ttl` (as far as the server shows it).
    pub kind: String,
    /// The session owning it (hex) for an ephemeral.
    pub session_id: String,
    /// How long it has existed (since it was last created), in milliseconds.
    pub age_ms: u64,
    /// Its data version: how often it was written since.
    pub version: i32,
    /// Its data, as text (lossy), at most 200 bytes of it.
    pub data: String,
}

/// The children of `dir`; a missing directory is empty.
async fn children(session: &SessionHandle, dir: &str) -> Result<Vec<String>, Error> {
    match session.children(dir).await {
        Ok(children) => Ok(children.names),
        Err(Error::NoNode { .. }) => Ok(Vec::new()),
        Err(error) => Err(error),
    }
}

fn age_ms(ctime: i64) -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis() as i64;
    now.saturating_sub(ctime).max(0) as u64
}

/// The sequential nodes of `dir` in line order, each read (a node gone meanwhile is left out).
async fn line(
    session: &SessionHandle,
    dir: &str,
    holds: impl Fn(&[String], &str) -> bool,
) -> Result<Vec<Member>, Error> {
    let names = path::sequential_in_order(children(session, dir).await?);
    let reads: Vec<_> = names.iter().map(|name| session.get_data(&path::join(dir, name))).collect();
    let mut members = Vec::with_capacity(names.len());
    for (name, read) in names.iter().zip(reads) {
        let node = match read.await {
            Ok(node) => node,
            Err(Error::NoNode { .. }) => continue,
            Err(error) => return Err(error),
        };
        members.push(Member {
            node: name.clone(),
            participant: String::from_utf8_lossy(&node.data).into_owned(),
            session_id: format!("0x{:x}", node.stat.ephemeral_owner),
            token: node.stat.czxid,
            age_ms: age_ms(node.stat.ctime),
            holds: holds(&names, name),
        });
    }
    Ok(members)
}

/// Reads the lock at `path`: a mutex (`lock-` nodes), a read/write lock (`__READ__` and
/// `__WRIT__` nodes) or a semaphore (`leases/` and `locks/` below it).
///
/// # Cancel safety
/// Cancel-safe: it only reads; dropping the future loses nothing but the report.
pub async fn locks(session: &SessionHandle, path: &str) -> Result<LockReport, Error> {
    let names = children(session, path).await?;
    if names.iter().any(|n| n == "leases") {
        let leases = path::join(path, "leases");
        let members = line(session, &leases, |_, _| true).await?;
        return Ok(LockReport { path: path.to_owned(), kind: "semaphore".into(), members });
    }
    let read_write = names.iter().any(|n| n.contains(naming::READ_NAME) || n.contains(naming::WRITE_NAME));
    let members = line(session, path, |line, name| {
        let rule = if name.contains(naming::READ_NAME) { Rule::Shared } else { Rule::Exclusive };
        naming::standing(line, name, rule) == Standing::Holds
    })
    .await?;
    let kind = if read_write { "read-write lock" } else { "lock" };
    Ok(LockReport { path: path.to_owned(), kind: kind.into(), members })
}

/// Reads the election at `path` (Curator's `LeaderLatch` layout).
///
/// # Cancel safety
/// Cancel-safe: it only reads; dropping the future loses nothing but the report.
pub async fn election(session: &SessionHandle, path: &str) -> Result<ElectionReport, Error> {
    let participants =
        line(session, path, |line, name| naming::first_in_line(line).is_some_and(|first| first == name)).await?;
    Ok(ElectionReport { path: path.to_owned(), participants })
}

/// Reads the queue at `path`, and the dead-letter queue at `dead_letter` if given.
///
/// # Cancel safety
/// Cancel-safe: it only reads; dropping the future loses nothing but the report.
pub async fn queue(session: &SessionHandle, path: &str, dead_letter: Option<&str>) -> Result<QueueReport, Error> {
    let items = path::sequential_in_order(children(session, path).await?);
    let oldest_age_ms = match items.first() {
        Some(first) => session.exists(&path::join(path, first)).await?.map(|stat| age_ms(stat.ctime)),
        None => None,
    };
    let claims_dir = path::join(path, "claims");
    let claimed_ids = path::sequential_in_order(children(session, &claims_dir).await?);
    let reads: Vec<_> = claimed_ids.iter().map(|id| session.get_data(&path::join(&claims_dir, id))).collect();
    let mut claimed = Vec::new();
    for (id, read) in claimed_ids.iter().zip(reads) {
        match read.await {
            Ok(node) => claimed.push(Claim { item: id.clone(), consumer: String::from_utf8_lossy(&node.data).into() }),
            Err(Error::NoNode { .. }) => {}
            Err(error) => return Err(error),
        }
    }
    let dead_letters = match dead_letter {
        Some(dead) => Some(path::sequential_in_order(children(session, dead).await?).len()),
        None => None,
    };
    Ok(QueueReport { path: path.to_owned(), depth: items.len(), claimed, oldest_age_ms, dead_letters })
}

/// Reads the master–worker installation at `root`.
///
/// # Cancel safety
/// Cancel-safe: it only reads; dropping the future loses nothing but the report.
pub async fn tasks(session: &SessionHandle, root: &str) -> Result<TasksReport, Error> {
    let under = |name: &str| path::join(root, name);
    let master = election(session, &under("master")).await?.participants.into_iter().find(|m| m.holds);
    // Every read of a kind is sent before the first is awaited: one round trip each, not one
    // per worker.
    let ids = children(session, &under("workers")).await?;
    let reads: Vec<_> = ids.iter().map(|id| session.get_data(&path::join(&under("workers"), id))).collect();
    let mut workers = Vec::with_capacity(ids.len());
    for (id, read) in ids.into_iter().zip(reads) {
        let capacity = match read.await {
            Ok(node) => String::from_utf8_lossy(&node.data).trim().parse().ok(),
            Err(Error::NoNode { .. }) => continue,
            Err(error) => return Err(error),
        };
        workers.push(WorkerLoad { id, capacity, load: 0 });
    }
    let dirs = children(session, &under("assign")).await?;
    let listings: Vec<_> = dirs.iter().map(|dir| session.children(&path::join(&under("assign"), dir))).collect();
    let mut assigned = 0;
    for (dir, listing) in dirs.iter().zip(listings) {
        let load = match listing.await {
            Ok(listing) => listing.names.len(),
            Err(Error::NoNode { .. }) => 0,
            Err(error) => return Err(error),
        };
        assigned += load;
        if let Some(worker) = workers.iter_mut().find(|w| w.id == *dir) {
            worker.load = load;
        }
    }
    workers.sort_by(|a, b| a.id.cmp(&b.id));
    let pending = children(session, &under("tasks")).await?.len();
    let mut finished = 0;
    let statuses = children(session, &under("status")).await?;
    let reads: Vec<_> = statuses.iter().map(|task| session.exists(&path::join(&under("status"), task))).collect();
    for read in reads {
        if read.await?.is_some_and(|stat| stat.version > 0) {
            finished += 1;
        }
    }
    Ok(TasksReport {
        root: root.to_owned(),
        master: master.map(|m| m.participant),
        workers,
        pending,
        assigned,
        finished,
    })
}

/// Reads the services under `base` (curator-x-discovery's layout): each service's instances,
/// each read as an instance (a node that cannot be is reported, not skipped).
///
/// # Cancel safety
/// Cancel-safe: it only reads; dropping the future loses nothing but the report.
pub async fn services(session: &SessionHandle, base: &str) -> Result<ServicesReport, Error> {
    let mut names = children(session, base).await?;
    names.sort();
    let mut services = Vec::with_capacity(names.len());
    for name in names {
        let dir = path::join(base, &name);
        let mut nodes = children(session, &dir).await?;
        nodes.sort();
        let reads: Vec<_> = nodes.iter().map(|node| session.get_data(&path::join(&dir, node))).collect();
        let mut instances = Vec::with_capacity(nodes.len());
        for (node, read) in nodes.into_iter().zip(reads) {
            let read = match read.await {
                Ok(read) => read,
                Err(Error::NoNode { .. }) => continue,
                Err(error) => return Err(error),
            };
            let session_id = format!("0x{:x}", read.stat.ephemeral_owner.max(0));
            instances.push(match crate::discovery::decode(&read.data) {
                Ok(i) => InstanceReport {
                    node,
                    id: i.id,
                    address: match (i.address, i.port) {
                        (Some(address), Some(port)) => format!("{address}:{port}"),
                        (Some(address), None) => format!("{address}:-"),
                        (None, _) => "-".into(),
                    },
                    ssl_port: i.ssl_port,
                    service_type: i.service_type.as_str().into(),
                    enabled: i.enabled,
                    age_ms: age_ms(i.registration_time_utc),
                    session_id,
                    unreadable: None,
                },
                Err(reason) => InstanceReport {
                    node,
                    id: String::new(),
                    address: "-".into(),
                    ssl_port: None,
                    service_type: String::new(),
                    enabled: false,
                    age_ms: age_ms(read.stat.ctime),
                    session_id,
                    unreadable: Some(reason),
                },
            });
        }
        services.push(ServiceReport { name, instances });
    }
    Ok(ServicesReport { path: base.to_owned(), services })
}

/// Reads the node at `path`, as a [`PersistentNode`](crate::persistent::PersistentNode) keeps
/// it: the node itself, or, when it is not there, the protected node made for it
/// (`_c_<guid>-<name>...` beside it). `None` when neither exists.
///
/// # Cancel safety
/// Cancel-safe: it only reads; dropping the future loses nothing but the report.
pub async fn node(session: &SessionHandle, path: &str) -> Result<Option<NodeReport>, Error> {
    let mut found = path.to_owned();
    let mut read = match session.get_data(path).await {
        Ok(read) => Some(read),
        Err(Error::NoNode { .. }) => None,
        Err(error) => return Err(error),
    };
    if read.is_none() {
        let (parent, name) = (path::parent(path).unwrap_or("/"), path::name(path));
        let mut protected: Vec<_> = children(session, parent)
            .await?
            .into_iter()
            .filter(|child| naming::strip_protection(child).is_some_and(|rest| rest.starts_with(name)))
            .collect();
        protected.sort();
        for child in protected {
            let candidate = path::join(parent, &child);
            match session.get_data(&candidate).await {
                Ok(data) => {
                    (found, read) = (candidate, Some(data));
                    break;
                }
                Err(Error::NoNode { .. }) => {}
                Err(error) => return Err(error),
            }
        }
    }
    let Some(read) = read else { return Ok(None) };
    let owner = read.stat.ephemeral_owner;
    let kind = match owner {
        0 => "persistent",
        i64::MIN => "container",
        owner if owner >> 56 == -1 => "ttl",
        _ => "ephemeral",
    };
    let shown = &read.data[..read.data.len().min(200)];
    Ok(Some(NodeReport {
        path: found,
        kind: kind.into(),
        session_id: if kind == "ephemeral" { format!("0x{owner:x}") } else { "-".into() },
        age_ms: age_ms(read.stat.ctime),
        version: read.stat.version,
        data: String::from_utf8_lossy(shown).into_owned(),
    }))
}
