//! A master's proof of office: writes that apply only while its term lasts.
//!
//! Owns: [`MasterFence`]. Every write a master makes goes through it, so a master that lost its
//! session (or was deposed while paused) cannot change anything.

use std::future::Future;

use super::error::TaskError;
use crate::recipe::FencingToken;
use crate::recipe::fencing::{GuardFailure, guarded_multi};
use crate::session::SessionHandle;
use crate::{Op, OpResult};

/// One master term: its election node, that node's version, and the term's fencing token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterFence {
    /// The election node that won.
    pub node: String,
    /// Its version when the term started.
    pub version: i32,
    /// Its `czxid`: larger for every later term.
    pub token: FencingToken,
}

impl MasterFence {
    /// Applies `ops` atomically, but only while this term's election node still exists at its
    /// version: a deposed master gets [`TaskError::Deposed`] and nothing is written. Results are
    /// those of `ops`. A write whose connection dropped or whose session expired in flight gets
    /// [`TaskError::OutcomeUnknown`]: it may have applied.
    ///
    /// # Cancel safety
    /// The transaction is sent when this is called: dropping the future does not withdraw
    /// it; it applies (all of it, if the term still holds) or not at all, and only the answer is
    /// lost.
    pub fn write(
        &self,
        session: &SessionHandle,
        ops: Vec<Op>,
    ) -> impl Future<Output = Result<Vec<OpResult>, TaskError>> + 'static + use<> {
        let node = self.node.clone();
        let write = guarded_multi(session, &self.node, self.version, ops);
        async move {
            match write.await {
                Ok(results) => Ok(results),
                Err(GuardFailure::Ended) => Err(TaskError::Deposed { node }),
                Err(GuardFailure::Unknown(source)) => Err(TaskError::OutcomeUnknown { node, source }),
                Err(GuardFailure::ZooKeeper(err)) => Err(TaskError::ZooKeeper(err)),
            }
        }
    }
}
