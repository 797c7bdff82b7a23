//! What an election actor is asked, and what it tells its subscribers and its leader actor.

use actix::Message;

use super::error::ElectionError;
use crate::error::Error;
use crate::recipe::FencingToken;

/// Leave the election, or (with `requeue`) go to the back of the line. A leader that resigns
/// gets `LeadershipLost { reason: Resigned }`.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<(), ElectionError>")]
pub struct Resign {
    /// Stand in line again at once (at the back).
    pub requeue: bool,
}

pub use crate::stop::Stop;

/// Enter the election (after a `Resign` without requeue). Entering while already in it is fine.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "()")]
pub struct Join;

/// The participants' ids in line order (the leader first), read from ZooKeeper now.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<Vec<String>, ElectionError>")]
pub struct Participants;

/// The leader's participant id, read from ZooKeeper now; `None` when nobody takes part.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<Option<String>, ElectionError>")]
pub struct CurrentLeader;

/// Wait until this participant leads (Curator's `LeaderLatch.await()`): answered at once with
/// the current term when leading, else when leadership is next acquired or restored.
/// [`ElectionError::NotParticipating`] when this participant is not in line (it resigned
/// without requeue, or it failed).
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<LeaderTerm, ElectionError>")]
pub struct Leadership;

/// Publish `value` as this participant's value for its current term (etcd's `Proclaim`):
/// answered `Ok` once written, [`ElectionError::NotLeader`] when this participant does not lead
/// (nothing is written), [`ElectionError::OutcomeUnknown`] when the connection dropped with the
/// write in flight. Observers see it as a [`ProclamationChanged`].
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<(), ElectionError>")]
pub struct Proclaim {
    /// The value.
    pub value: Vec<u8>,
}

/// Who leads an election, in which term, and what it proclaimed in that term (`None` until it
/// proclaims).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proclamation {
    /// The leader's participant id (its node's data).
    pub leader_id: String,
    /// The term's fencing token: the leader node's czxid, larger for every later term.
    pub term: FencingToken,
    /// The value the leader proclaimed in this term, if it did.
    pub value: Option<Vec<u8>>,
}

/// The election's leader, its term or its proclaimed value changed (or this is the first
/// reading of an observer): what it is now, `None` when nobody leads. Changes come in order:
/// never a term older than one told before, and a value only with the term that proclaimed it.
/// Some changes between two readings may be skipped (the latest wins).
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
pub struct ProclamationChanged {
    /// Who leads, in which term, with which value.
    pub current: Option<Proclamation>,
}

/// The observer's latest reading of the election (waits for the first).
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<Option<Proclamation>, ElectionError>")]
pub struct CurrentProclamation;

pub use crate::events::Subscribe;

/// Why leadership ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeadershipLostReason {
    /// We resigned.
    Resigned,
    /// The session expired: the server deleted our node.
    SessionExpired,
    /// Someone else deleted our node.
    NodeDeleted,
    /// The session was closed.
    SessionClosed,
    /// Conservative policy: disconnected for a whole session timeout.
    DisconnectedTooLong,
}

/// What happened in the election, told in the past tense.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
#[non_exhaustive]
pub enum ElectionEvent {
    /// We lead. `token` (the czxid of our node) grows with every new term.
    LeadershipAcquired {
        /// This term's fencing token.
        token: FencingToken,
    },
    /// The connection dropped while leading: stop acting as leader until `LeadershipRestored`
    /// (under `ConnectionPolicy::ExpiryOnly` this is informational).
    LeadershipSuspended {
        /// The term's token.
        token: FencingToken,
    },
    /// Reconnected with the same session, and our node is still first: we lead again, same term.
    LeadershipRestored {
        /// The term's token.
        token: FencingToken,
    },
    /// We no longer lead.
    LeadershipLost {
        /// The term's token.
        token: FencingToken,
        /// Why.
        reason: LeadershipLostReason,
    },
    /// Somebody (perhaps us) now leads; sent to every participant. `None`: nobody is in line.
    LeaderChanged {
        /// The leader's participant id.
        leader_id: Option<String>,
    },
    /// This participant cannot take part (bad path, no permission, parent is ephemeral, ...).
    ElectionFailed {
        /// What went wrong.
        error: Error,
    },
}

/// Sent to the leader actor (leader-actor mode) when leadership is suspended or lost: stop.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct StopLeading;

/// Resign, then stop once our node is deleted: what
/// [`ElectionHandle::stop`](super::ElectionHandle::stop) sends.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "()")]
pub(crate) struct ResignAndStop;

/// What a leader actor is told when it is started: our leader node, its version when
/// leadership was won, and the term's fencing token. A write guarded by it
/// ([`Fence::guarded_write`](crate::recipe::Fence::guarded_write)) fails once this term has
/// ended. The crate's one fence type.
pub type LeaderTerm = crate::recipe::Fence;
