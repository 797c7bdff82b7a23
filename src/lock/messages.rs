//! What a lock actor is asked, and what it tells its subscribers.

use std::time::Duration;

use actix::Message;

use super::error::LockError;
use super::grant::LockGrant;
use crate::recipe::FencingToken;

/// Wait for the lock (at most `timeout`, if given). Resolves to the grant; holding the lock
/// already resolves at once with the same grant.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<LockGrant, LockError>")]
pub struct Acquire {
    /// Give up (and delete our node) after this long.
    pub timeout: Option<Duration>,
}

/// Take the lock only if it is free now: `Ok(None)` when someone else holds it (our node is
/// deleted again before the reply).
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<Option<LockGrant>, LockError>")]
pub struct TryAcquire;

/// Give the lock up (or stop waiting for it). Resolves once our node is deleted.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<(), LockError>")]
pub struct Release;

/// The participant ids of this lock's nodes in line order, read from ZooKeeper now: the holder
/// first (for a read/write lock: every node of the directory, readers and writers alike; for a
/// semaphore: the lease holders first, then the waiting). Empty when nobody takes part.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<Vec<String>, LockError>")]
pub struct Participants;

/// Give back the grant with this token if it is still held (a [`Release`] that answers nobody).
/// Sent by a [`LockHandle`](super::LockHandle) whose `acquire` future was dropped after the grant
/// reached it but before it was returned, so that a grant nobody received is never kept.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct GiveBack {
    /// The token of the grant to give back; a later grant is not touched.
    pub token: FencingToken,
}

/// Give the grant back (or leave the line), then stop once our node is deleted: what
/// [`LockHandle::stop`](super::LockHandle::stop) and
/// [`SemaphoreHandle::stop`](super::SemaphoreHandle::stop) send.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "()")]
pub(crate) struct ReleaseAndStop;

pub use crate::events::Subscribe;

/// Why a held lock was lost: the holder core's reason, as it is.
pub use crate::recipe::contender::Loss as LockLostReason;

/// What happened to the lock, told to subscribers in the past tense. Every event names the
/// participant it is about (its config's `participant_id`), so one subscriber of several lock
/// actors can tell them apart.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
#[non_exhaustive]
pub enum LockEvent {
    /// The lock was granted.
    Acquired {
        /// Whose grant.
        participant: String,
        /// The grant (node, fencing token).
        grant: LockGrant,
    },
    /// The lock was released (our node is deleted).
    Released {
        /// Who released it.
        participant: String,
        /// The node that was deleted.
        node: String,
    },
    /// The connection dropped while holding: under the conservative policy, act as if you no
    /// longer hold the lock until `Reconnected`.
    Suspended {
        /// The holder.
        participant: String,
        /// The grant's token.
        token: FencingToken,
    },
    /// The connection came back within the session: the lock is still held, same token.
    Reconnected {
        /// The holder.
        participant: String,
        /// The grant's token.
        token: FencingToken,
    },
    /// The lock is no longer held.
    Lost {
        /// Who held it.
        participant: String,
        /// The grant's token.
        token: FencingToken,
        /// Why.
        reason: LockLostReason,
    },
    /// Someone asks this participant to let go ([`revoke`](super::revoke), or Curator's
    /// `Revoker`): told to a [revocable](super::LockConfig::revocable) lock's subscribers, once
    /// per request, whether it holds the lock or waits in line. Nothing was released: release
    /// (or stop waiting) if you agree. The grant still stands, and its guarded writes still apply.
    RevocationRequested {
        /// Who is asked.
        participant: String,
        /// Its node, the one written to.
        node: String,
    },
}

impl LockEvent {
    /// The participant this event is about.
    pub fn participant(&self) -> &str {
        match self {
            LockEvent::Acquired { participant, .. }
            | LockEvent::Released { participant, .. }
            | LockEvent::Suspended { participant, .. }
            | LockEvent::Reconnected { participant, .. }
            | LockEvent::Lost { participant, .. }
            | LockEvent::RevocationRequested { participant, .. } => participant,
        }
    }
}
