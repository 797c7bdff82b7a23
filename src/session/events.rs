//! What the session tells its subscribers and watchers.
//!
//! Owns: [`SessionEvent`] (connection state, one message per transition) and [`WatchEvent`]
//! (a change to a watched node). Does not own the decision of what a recipe does about them.

use actix::Message;
pub use zookeeper_client::SessionId;

/// A change of the session's connection state, sent to every subscriber.
///
/// The *generation* counts sessions: it is 1 for the first session and grows by one every time
/// a new session replaces an expired one. Ephemeral nodes, one-shot watches and ownership
/// created under generation `g` are gone once an event with a higher generation arrives.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
#[non_exhaustive]
pub enum SessionEvent {
    /// A new session is established (the first one, or one built after expiry).
    Connected {
        /// The server-assigned session id.
        session_id: SessionId,
        /// Which session this is, counting from 1.
        generation: u64,
    },
    /// The connection dropped; the session may still be alive on the server. Recipes that
    /// hold something should assume they might no longer hold it.
    Suspended {
        /// The session that is suspended.
        session_id: SessionId,
        /// Its generation.
        generation: u64,
    },
    /// The connection is back and the session survived: ephemerals and watches are intact.
    Reconnected {
        /// The same session id as before the suspension.
        session_id: SessionId,
        /// Its generation (unchanged).
        generation: u64,
        /// Connected to a server without quorum: reads only.
        read_only: bool,
    },
    /// The server ended the session: its ephemeral nodes are gone. A new session is being
    /// built (if the rebuild policy allows); `Connected` with the next generation follows.
    Expired {
        /// The session that expired.
        session_id: SessionId,
        /// Its generation.
        generation: u64,
    },
    /// The server rejected the credentials; the session actor stops.
    AuthFailed,
    /// The session actor is closed (by request, or because the rebuild policy gave up).
    Closed,
}

impl SessionEvent {
    /// True when this event shows a live session (`Connected` or `Reconnected`) of a generation
    /// newer than `seen`, which it then moves to: the first sight of a new session, whichever
    /// event brings it (a recipe started while its session is suspended first hears
    /// `Reconnected`). Everything of the sessions before it (ephemerals, watches) is gone.
    pub(crate) fn moves_to_new_session(&self, seen: &mut u64) -> bool {
        match *self {
            SessionEvent::Connected { generation, .. } | SessionEvent::Reconnected { generation, .. }
                if generation > *seen =>
            {
                *seen = generation;
                true
            }
            _ => false,
        }
    }
}

/// Identifies a persistent watch, to remove it later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WatchId(pub(crate) u64);

/// What happened to a watched node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WatchEventKind {
    /// The node was created.
    NodeCreated,
    /// The node was deleted.
    NodeDeleted,
    /// The node's data changed. Also told to a one-shot data or `exists` watch that could not go
    /// with its session when the session moved to the servers of a new ensemble configuration
    /// (see `SessionConfig::with_ensemble_tracking`): the node may have changed; read again.
    DataChanged,
    /// A child was added or removed. Also told to a one-shot children watch that could not go
    /// with its session when the session moved (as for `DataChanged`): read again.
    ChildrenChanged,
    /// A one-shot watch ended without a node event because its session ended (expired or
    /// closed). Re-read and re-watch under the new session.
    SessionEnded,
    /// A persistent watch was refused for good when the session added it again (after a
    /// reconnect, possibly to another member, or on a new session): no event will come from it,
    /// and it is removed. The owner decides what now: read with one-shot watches, or fail
    /// visibly. Told once, with the watch's id in [`WatchEvent::watch`].
    WatchRefused(WatchRefusal),
}

/// Why the server refused to add a persistent watch again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WatchRefusal {
    /// The server has no persistent watches (`Unimplemented`: an older member of a mixed
    /// ensemble, during a rolling upgrade).
    Unsupported,
    /// The session may not watch the path (`NoAuth`).
    NoAuth,
    /// Another final error; the session's log says which.
    Other,
}

impl WatchRefusal {
    pub(crate) fn of(error: &crate::error::Error) -> WatchRefusal {
        use crate::error::Error;
        match error {
            Error::Unsupported { .. } => WatchRefusal::Unsupported,
            Error::NoAuth { .. } => WatchRefusal::NoAuth,
            _ => WatchRefusal::Other,
        }
    }
}

impl WatchEventKind {
    pub(crate) fn from_zk(event: zookeeper_client::EventType) -> Option<Self> {
        use zookeeper_client::EventType as E;
        match event {
            E::NodeCreated => Some(Self::NodeCreated),
            E::NodeDeleted => Some(Self::NodeDeleted),
            E::NodeDataChanged => Some(Self::DataChanged),
            E::NodeChildrenChanged => Some(Self::ChildrenChanged),
            E::Session => None,
        }
    }
}

/// A change to a watched node, sent to the recipient that asked for the watch.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
pub struct WatchEvent {
    /// The node that changed (relative to the session's chroot).
    pub path: String,
    /// What happened.
    pub kind: WatchEventKind,
    /// The session generation the watch was set under.
    pub generation: u64,
    /// The persistent watch that produced it; `None` for a one-shot watch.
    pub watch: Option<WatchId>,
}
