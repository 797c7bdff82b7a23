//! A granted lock: its node, its fencing token, and writes guarded by it.

use std::future::Future;

use super::error::LockError;
use crate::recipe::FencingToken;
use crate::recipe::fencing::{GuardFailure, guarded_multi};
use crate::session::SessionHandle;
use crate::session::requests::{Op, OpResult};

/// Proof of holding a lock (or a semaphore lease) at the time it was granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockGrant {
    /// The lock node that won.
    pub node: String,
    /// Its `czxid`: larger for every later grant of the same lock.
    pub token: FencingToken,
    /// The lock node's version when granted (what guarded writes check).
    pub version: i32,
}

impl LockGrant {
    /// `ops`, preceded by a check that the lock node still exists at the granted version.
    pub fn guard(&self, ops: Vec<Op>) -> Vec<Op> {
        let mut guarded = Vec::with_capacity(ops.len() + 1);
        guarded.push(Op::Check { path: self.node.clone(), version: self.version });
        guarded.extend(ops);
        guarded
    }

    /// Applies `ops` atomically only while this grant's node still exists: a holder whose session
    /// expired (so its node is gone) gets [`LockError::NoLongerHeld`] and nothing is written.
    /// Results are those of `ops` (the check's own result is dropped).
    ///
    /// When the connection drops or the session expires with the write in flight, the answer is
    /// [`LockError::OutcomeUnknown`]: the write may have applied (see "Retrying a guarded write"
    /// in `docs/recipes/lock.md`). Every other error means nothing of it applied.
    ///
    /// # Cancel safety
    /// The transaction is sent when this is called: dropping the future does not withdraw
    /// it; it applies (all of it, if the grant still holds) or not at all, and only the answer is
    /// lost.
    pub fn guarded_write(
        &self,
        session: &SessionHandle,
        ops: Vec<Op>,
    ) -> impl Future<Output = Result<Vec<OpResult>, LockError>> + 'static {
        let node = self.node.clone();
        let write = guarded_multi(session, &self.node, self.version, ops);
        async move {
            match write.await {
                Ok(results) => Ok(results),
                Err(GuardFailure::Ended) => Err(LockError::NoLongerHeld { node }),
                Err(GuardFailure::Unknown(source)) => Err(LockError::OutcomeUnknown { node, source }),
                Err(GuardFailure::ZooKeeper(err)) => Err(LockError::ZooKeeper(err)),
            }
        }
    }
}
