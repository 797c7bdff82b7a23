//! [`Fence`]: a node we won (a lock grant, a leader's term, a master's term) and its fencing
//! token, with the writes it guards; [`FenceError`], why a guarded write did not apply.
//!
//! Owns: the one type every recipe hands out for "ours while this node stands" (`LockGrant`,
//! `LeaderTerm` and `MasterFence` are names for it) and the guarded write. Does not own how the
//! node was won (the contender) or what a recipe does when it is lost.

use std::future::Future;

use super::FencingToken;
use super::fencing::{GuardFailure, checked, guarded_multi};
use crate::error::Error;
use crate::session::SessionHandle;
use crate::session::requests::{Op, OpResult};

/// Proof of holding something (a lock, a semaphore lease, leadership, a master's office) at the
/// time it was won: the node that won, its version then, and its fencing token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The node that won.
    pub node: String,
    /// Its `czxid`: larger for every later win of the same lock, election or office.
    pub token: FencingToken,
    /// The node's version when won. Guarded writes do not check it: a revocation request
    /// (Curator's `Revoker`) writes into a lock node without ending the grant.
    pub version: i32,
}

impl Fence {
    /// `ops`, preceded by a check that the node still exists. The node is ephemeral and
    /// sequential: once deleted (released, or gone with its session) its name never comes back,
    /// so its existence is the grant.
    pub fn guard(&self, ops: Vec<Op>) -> Vec<Op> {
        checked(&[&self.node], ops)
    }

    /// Applies `ops` atomically only while the node still exists: a holder whose
    /// session expired (so its node is gone), or a leader deposed while paused, gets
    /// [`FenceError::Ended`] and nothing is written. Results are those of `ops` (the check's own
    /// result is dropped).
    ///
    /// When the connection drops or the session expires with the write in flight, the answer is
    /// [`FenceError::OutcomeUnknown`]: the write may have applied (see "Retrying a guarded
    /// write" in `docs/recipes/lock.md`). Every other error means nothing of it applied. The
    /// recipes' errors convert from it (`?` into a `LockError` or a `TaskError`).
    ///
    /// # Cancel safety
    /// The transaction is sent when this is called: dropping the future does not withdraw it;
    /// it applies (all of it, if the fence still holds) or not at all, and only the answer is
    /// lost.
    pub fn guarded_write(
        &self,
        session: &SessionHandle,
        ops: Vec<Op>,
    ) -> impl Future<Output = Result<Vec<OpResult>, FenceError>> + 'static + use<> {
        let node = self.node.clone();
        let write = guarded_multi(session, &[&self.node], ops);
        async move {
            write.await.map_err(|failure| match failure {
                GuardFailure::Ended(_) => FenceError::Ended { node },
                GuardFailure::Unknown(source) => FenceError::OutcomeUnknown { node, source },
                GuardFailure::ZooKeeper(error) => FenceError::ZooKeeper(error),
            })
        }
    }
}

/// Why a guarded write did not apply, or may not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FenceError {
    /// The fencing node is gone: the grant or term it stood for has ended, and the server
    /// refused the write, so nothing of it applied.
    #[error("node {node} is gone: what it fenced has ended, and the write was not applied")]
    Ended {
        /// The node that was checked.
        node: String,
    },
    /// The write failed without an answer saying whether it applied: the connection dropped, or
    /// the session expired, while it was in flight (`source` says which). It may have applied:
    /// a write that reached the server before the expiry did. Read back what it would have
    /// changed before sending it again, or make it idempotent.
    #[error("the outcome of the write fenced by node {node} is unknown (it may have applied): {source}")]
    OutcomeUnknown {
        /// The node that fenced the write.
        node: String,
        /// Why the outcome is unknown ([`Error::outcome_unknown`] holds for it).
        source: Error,
    },
    /// The write failed for another reason (a bad path, no permission, ...); nothing of it
    /// applied.
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
