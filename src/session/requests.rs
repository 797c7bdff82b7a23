//! The requests a session serves, as typed actix messages, and what they return.
//!
//! Owns: one message type per ZooKeeper operation (named for what it asks: `Create`, `Delete`,
//! `GetData`, ...), the node kinds ([`CreateMode`]), and the operations of a `multi` ([`Op`]).
//! Does not own how they are executed: see [`SessionActor`](super::SessionActor).
//!
//! Each request is sent to ZooKeeper *inside* the actor's handler, so requests that one actor
//! sends reach the server in the order they were sent. That is what lets a recipe pipeline
//! `create` and `getChildren` into one round trip.

use std::time::Duration;

use actix::{Message, Recipient};
/// An access control entry: who (`AuthId`) may do what (`Permission`) on a node.
pub use zookeeper_client::Acl;
/// An identity in an ACL: a scheme (`world`, `digest`, `sasl`, `x509`, `ip`) and an id.
pub use zookeeper_client::AuthId;
/// What an ACL entry permits (read, write, create, delete, admin).
pub use zookeeper_client::Permission;
/// A session's id and password, as the server knows it (what reconnecting to it takes).
pub use zookeeper_client::SessionInfo;
/// A node's metadata as the server reports it: `czxid` (the create's transaction id: a fencing
/// token), `mzxid`, `version` (data changes since creation: what a conditional `set_data` or
/// `delete` checks), `cversion` (children changes), `ephemeral_owner` (the session owning an
/// ephemeral node, 0 otherwise), `data_length`, `num_children` and the times in milliseconds.
pub use zookeeper_client::Stat;

use super::events::{SessionId, WatchEvent, WatchId};
use crate::error::Result;

/// The kind of node to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateMode {
    /// Stays until deleted.
    Persistent,
    /// Persistent, with a 10-digit sequence number appended to the name.
    PersistentSequential,
    /// Deleted when the session that created it ends.
    Ephemeral,
    /// Ephemeral, with a sequence number appended.
    EphemeralSequential,
    /// Deleted by the server some time after its last child is gone.
    Container,
    /// Persistent, deleted by the server once it has had no children and no modification
    /// for this long. Needs the server flag `zookeeper.extendedTypesEnabled=true`.
    PersistentWithTtl(Duration),
    /// Like [`CreateMode::PersistentWithTtl`], with a sequence number appended.
    PersistentSequentialWithTtl(Duration),
}

impl CreateMode {
    /// True when the server appends a sequence number.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl(_)
        )
    }

    /// The server feature this mode needs beyond ZooKeeper 3.4's (besides `create2`).
    pub(crate) fn needs(self) -> Option<super::Feature> {
        match self {
            CreateMode::Container => Some(super::Feature::Containers),
            CreateMode::PersistentWithTtl(_) | CreateMode::PersistentSequentialWithTtl(_) => Some(super::Feature::Ttl),
            _ => None,
        }
    }

    pub(crate) fn options<'a>(self, acls: &'a [Acl]) -> zookeeper_client::CreateOptions<'a> {
        use zookeeper_client::CreateMode as Zk;
        let acls = zookeeper_client::Acls::new(acls);
        match self {
            CreateMode::Persistent => Zk::Persistent.with_acls(acls),
            CreateMode::PersistentSequential => Zk::PersistentSequential.with_acls(acls),
            CreateMode::Ephemeral => Zk::Ephemeral.with_acls(acls),
            CreateMode::EphemeralSequential => Zk::EphemeralSequential.with_acls(acls),
            CreateMode::Container => Zk::Container.with_acls(acls),
            CreateMode::PersistentWithTtl(ttl) => Zk::Persistent.with_acls(acls).with_ttl(ttl),
            CreateMode::PersistentSequentialWithTtl(ttl) => Zk::PersistentSequential.with_acls(acls).with_ttl(ttl),
        }
    }
}

/// Create a node. Returns the actual path (with the sequence number, if sequential).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Created>")]
pub struct Create {
    /// Where to create it; for sequential nodes, the prefix the number is appended to.
    pub path: String,
    /// Initial data.
    pub data: Vec<u8>,
    /// Node kind.
    pub mode: CreateMode,
    /// ACL; `None` uses the session's default ACL.
    pub acl: Option<Vec<Acl>>,
}

impl Create {
    /// A create request with the session's default ACL.
    pub fn new(path: impl Into<String>, data: impl Into<Vec<u8>>, mode: CreateMode) -> Self {
        Create { path: path.into(), data: data.into(), mode, acl: None }
    }

    crate::builder::setters! {
        /// Use this ACL instead of the session's default.
        with_acl(acl: Vec<Acl>) => some;
    }
}

/// A node that was created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// Its full path (including the sequence suffix).
    pub path: String,
    /// Its stat; `czxid` is the creating transaction (what fencing tokens are made of).
    pub stat: Stat,
    /// The sequence number, for sequential nodes.
    pub sequence: Option<u64>,
}

/// Delete a node, optionally only at a given version.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<()>")]
pub struct Delete {
    /// The node.
    pub path: String,
    /// Delete only if the node's version is this one.
    pub version: Option<i32>,
}

/// Read a node's data and stat, optionally leaving a one-shot watch (data change or deletion).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<NodeData>")]
pub struct GetData {
    /// The node.
    pub path: String,
    /// Who gets the watch event, if a watch is wanted.
    pub watch: Option<Recipient<WatchEvent>>,
}

/// A node's data and stat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeData {
    /// The payload.
    pub data: Vec<u8>,
    /// The stat.
    pub stat: Stat,
}

/// Replace a node's data, optionally only at a given version. Returns the new stat.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Stat>")]
pub struct SetData {
    /// The node.
    pub path: String,
    /// The new payload.
    pub data: Vec<u8>,
    /// Write only if the node's version is this one.
    pub version: Option<i32>,
}

/// Read a node's ACL, with its stat (`aversion` is the ACL's version).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(Vec<Acl>, Stat)>")]
pub struct GetAcl {
    /// The node.
    pub path: String,
}

/// Replace a node's ACL, optionally only at a given ACL version (the stat's `aversion`).
/// Returns the new stat.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Stat>")]
pub struct SetAcl {
    /// The node.
    pub path: String,
    /// The new ACL (not empty: the server refuses an empty one, `InvalidAcl`).
    pub acl: Vec<Acl>,
    /// Write only if the ACL's version (`aversion`) is this one.
    pub version: Option<i32>,
}

/// Read a node's stat (`None` if it does not exist), optionally leaving a one-shot watch
/// (creation, data change or deletion).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Option<Stat>>")]
pub struct Exists {
    /// The node.
    pub path: String,
    /// Who gets the watch event, if a watch is wanted.
    pub watch: Option<Recipient<WatchEvent>>,
}

/// List a node's children with the parent's stat, optionally leaving a one-shot watch (a child
/// added or removed, or the node deleted).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Children>")]
pub struct GetChildren {
    /// The parent node.
    pub path: String,
    /// Who gets the watch event, if a watch is wanted.
    pub watch: Option<Recipient<WatchEvent>>,
}

/// A node's children (names, not paths, in the server's order) and its stat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Children {
    /// Child names.
    pub names: Vec<String>,
    /// The parent's stat.
    pub stat: Stat,
}

/// One operation of a [`Multi`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Fails the transaction unless the node exists at this version (`-1`: any version).
    Check {
        /// The node.
        path: String,
        /// Expected version.
        version: i32,
    },
    /// Create a node (default ACL).
    Create {
        /// The node (prefix, if sequential).
        path: String,
        /// Initial data.
        data: Vec<u8>,
        /// Node kind.
        mode: CreateMode,
    },
    /// Replace data.
    SetData {
        /// The node.
        path: String,
        /// New payload.
        data: Vec<u8>,
        /// Expected version.
        version: Option<i32>,
    },
    /// Delete a node.
    Delete {
        /// The node.
        path: String,
        /// Expected version.
        version: Option<i32>,
    },
}

impl Op {
    /// The path this operation concerns.
    pub fn path(&self) -> &str {
        match self {
            Op::Check { path, .. } | Op::Create { path, .. } | Op::SetData { path, .. } | Op::Delete { path, .. } => {
                path
            }
        }
    }
}

/// Apply several operations atomically: all or none. A failure is reported as
/// [`Error::Multi`](crate::error::Error::Multi) with the index and path of the operation that failed.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Vec<OpResult>>")]
pub struct Multi {
    /// The operations, applied in order.
    pub ops: Vec<Op>,
}

/// The outcome of one operation of a successful [`Multi`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpResult {
    /// The check passed.
    Checked,
    /// The node was created at this path.
    Created {
        /// Actual path.
        path: String,
        /// Its stat. ZooKeeper 3.8 answers a create inside a multi with an invalid stat (every
        /// field -1, ZOOKEEPER-4026): read the node when its stat matters.
        stat: Stat,
    },
    /// The data was replaced.
    DataSet {
        /// The new stat.
        stat: Stat,
    },
    /// The node was deleted.
    Deleted,
}

/// Make the server this session talks to catch up with the leader on `path`.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<()>")]
pub struct Sync {
    /// The path to sync.
    pub path: String,
}

/// Create `path` and any missing ancestors (`mkdir -p`). Existing nodes are fine.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<()>")]
pub struct EnsurePath {
    /// The path to create.
    pub path: String,
    /// Create the missing nodes as containers (the server deletes them once empty), as Curator's
    /// `creatingParentContainersIfNeeded` does for recipe directories; otherwise persistent.
    pub containers: bool,
}

/// Delete a node and everything under it. A missing node is fine.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<()>")]
pub struct DeleteRecursive {
    /// The subtree's root.
    pub path: String,
}

/// Which persistent watch to add.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PersistentWatchMode {
    /// Data changes, creation, deletion and child changes of one node.
    Node,
    /// Creation, deletion and data changes of a node and all its descendants.
    Recursive,
}

/// Add a persistent watch (ZooKeeper 3.6+ `addWatch`). It stays until removed, survives
/// reconnects, and is re-registered on every new session. It ends when its recipient stops.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<WatchId>")]
pub struct AddWatch {
    /// The watched node (it need not exist).
    pub path: String,
    /// Node or recursive.
    pub mode: PersistentWatchMode,
    /// Who gets the events.
    pub recipient: Recipient<WatchEvent>,
}

/// [`AddWatch`] answered on a channel its caller owns, so that the session sees the caller go:
/// what [`SessionHandle::add_watch`](super::SessionHandle::add_watch) sends.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct AddWatchAnswering {
    pub(crate) add: AddWatch,
    pub(crate) reply: tokio::sync::oneshot::Sender<Result<WatchId>>,
}

/// Remove a persistent watch.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct RemoveWatch {
    /// The watch to remove.
    pub id: WatchId,
}

pub use crate::events::Subscribe;

/// Asked of every recipe actor registered with [`OnClose`] when the session is closed: let go of
/// what it holds (release, resign, give back, deregister) and answer once that is done. The
/// session waits for the answers (at most [`GOODBYE_BOUND`]) before it closes, so the recipes'
/// deletes still have a session to run on and their subscribers hear `Released`, not `Lost`.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub(crate) struct Goodbye;

/// How long a close waits for the recipes' goodbyes.
pub(crate) const GOODBYE_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

/// Register `recipient` to be told [`Goodbye`] before the session closes (held weakly).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub(crate) struct OnClose {
    /// Who says goodbye.
    pub(crate) recipient: Recipient<Goodbye>,
}

/// Ask for the current session, if one is up.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Option<SessionSnapshot>")]
pub struct GetSession;

/// Wait until the session is connected (Curator's `blockUntilConnected`): answered at once
/// when it is, else when it next connects (or reconnects); [`Error::Closed`](crate::error::Error::Closed) once the session
/// is closed.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<SessionSnapshot>")]
pub struct WaitConnected;

/// The session as it is now.
#[derive(Debug, Clone)]
pub struct SessionSnapshot {
    /// Server-assigned id.
    pub session_id: SessionId,
    /// Which session this is, counting from 1.
    pub generation: u64,
    /// Negotiated timeout.
    pub timeout: Duration,
    /// False while suspended (disconnected).
    pub connected: bool,
    /// Id and password; with these a second client can take over (or end) the session, which
    /// is how the testkit expires a session on the server.
    pub info: SessionInfo,
}

/// Close the session: first every recipe actor on it lets go of what it holds (release, resign,
/// give back, deregister; at most 5 s in all), then the session is closed: its ephemerals are
/// deleted at once, subscribers get `Closed`, the actor stops.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct Close;

/// Run `request` only on the session of `generation`: if that session has ended (or a newer one
/// is up), fail with [`Error::SessionLost`](crate::error::Error::SessionLost) and send nothing.
///
/// A write made for one session (a claim's settlement, a worker's result, a registration's
/// delete) must never be re-sent on a later one, where the nodes it was meant for may belong
/// to somebody else. See [`PinnedSession`](super::PinnedSession).
#[derive(Debug)]
pub struct OnSession<M> {
    /// The session the request belongs to.
    pub generation: u64,
    /// The node concerned, for the error.
    pub path: String,
    /// The request.
    pub request: M,
}

impl<M: Message> Message for OnSession<M> {
    type Result = M::Result;
}

/// `GetData` with a one-shot watch for plain async code: the event goes to `tx`, and dropping
/// its receiver withdraws the watch (nothing is left behind by a caller that gave up).
#[derive(Message, Debug)]
#[rtype(result = "Result<NodeData>")]
pub(crate) struct GetDataUntilDropped {
    pub(crate) path: String,
    pub(crate) tx: futures::channel::oneshot::Sender<WatchEvent>,
}

/// `Exists` with a one-shot watch for plain async code (see [`GetDataUntilDropped`]).
#[derive(Message, Debug)]
#[rtype(result = "Result<Option<Stat>>")]
pub(crate) struct ExistsUntilDropped {
    pub(crate) path: String,
    pub(crate) tx: futures::channel::oneshot::Sender<WatchEvent>,
}

/// `GetChildren` with a one-shot watch for plain async code (see [`GetDataUntilDropped`]).
#[derive(Message, Debug)]
#[rtype(result = "Result<Children>")]
pub(crate) struct GetChildrenUntilDropped {
    pub(crate) path: String,
    pub(crate) tx: futures::channel::oneshot::Sender<WatchEvent>,
}
