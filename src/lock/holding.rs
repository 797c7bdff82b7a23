//! What the lock and the semaphore say about holding, in the lock module's words: their waiting
//! callers and how the holder core's [`Happened`] reads as a [`LockEvent`].
//!
//! Owns: [`LockWaiter`] and the translations from the core's terms to [`LockError`] and
//! [`LockEvent`]. Does not own any decision: those are the core's (`recipe::holder`).

use super::error::LockError;
use super::grant::LockGrant;
use super::messages::{LockEvent, LockLostReason};
use crate::error::Error;
use crate::recipe::holder::{Happened, Loss, Refusal, ReleaseError, Waiter};
use crate::recipe::reply::Pending;

/// A caller of `Acquire` or `TryAcquire`.
pub(crate) struct LockWaiter {
    dir: String,
    reply: Answer,
}

enum Answer {
    Acquire(Pending<Result<LockGrant, LockError>>),
    Try(Pending<Result<Option<LockGrant>, LockError>>),
}

impl LockWaiter {
    pub(super) fn acquire(dir: &str, reply: Pending<Result<LockGrant, LockError>>) -> Self {
        LockWaiter { dir: dir.to_owned(), reply: Answer::Acquire(reply) }
    }

    pub(super) fn try_acquire(dir: &str, reply: Pending<Result<Option<LockGrant>, LockError>>) -> Self {
        LockWaiter { dir: dir.to_owned(), reply: Answer::Try(reply) }
    }
}

impl Waiter<LockGrant> for LockWaiter {
    fn grant(self, grant: &LockGrant) -> bool {
        match self.reply {
            Answer::Acquire(reply) => reply.send(Ok(grant.clone())).is_ok(),
            Answer::Try(reply) => reply.send(Ok(Some(grant.clone()))).is_ok(),
        }
    }

    fn in_line(self) -> Option<Self> {
        match self.reply {
            Answer::Try(reply) => {
                let _ = reply.send(Ok(None));
                None
            }
            reply @ Answer::Acquire(_) => Some(LockWaiter { dir: self.dir, reply }),
        }
    }

    fn refuse(self, why: Refusal) {
        let error = refusal(&self.dir, why);
        match self.reply {
            Answer::Acquire(reply) => {
                let _ = reply.send(Err(error));
            }
            Answer::Try(reply) => {
                let _ = reply.send(Err(error));
            }
        }
    }

    fn is_gone(&self) -> bool {
        match &self.reply {
            Answer::Acquire(reply) => reply.is_canceled(),
            Answer::Try(reply) => reply.is_canceled(),
        }
    }
}

fn refusal(dir: &str, why: Refusal) -> LockError {
    let dir = dir.to_owned();
    match why {
        Refusal::Timeout(after) => LockError::Timeout { dir, after },
        Refusal::Cancelled => LockError::Cancelled { dir },
        Refusal::InProgress => LockError::AcquireInProgress { dir },
        Refusal::Failed(error) => LockError::ZooKeeper(error),
        Refusal::Closed => LockError::ZooKeeper(Error::Closed),
    }
}

/// The lock's words for a loss.
pub(super) fn lost_reason(loss: Loss) -> LockLostReason {
    match loss {
        Loss::SessionExpired => LockLostReason::SessionExpired,
        Loss::NodeDeleted => LockLostReason::NodeDeleted,
        Loss::SessionClosed => LockLostReason::SessionClosed,
        Loss::DisconnectedTooLong => LockLostReason::DisconnectedTooLong,
    }
}

/// The answer to a `Release`.
pub(super) fn release_error(dir: &str, error: ReleaseError) -> LockError {
    let dir = dir.to_owned();
    match error {
        ReleaseError::NotHeld => LockError::NotHeld { dir },
        ReleaseError::Lost(loss) => LockError::Lost { dir, reason: lost_reason(loss) },
        ReleaseError::ZooKeeper(error) => LockError::ZooKeeper(error),
    }
}

/// What subscribers hear; `None` for what the lock has no event for (a re-acquire nobody
/// waited on failed: it is logged).
pub(super) fn event(happened: Happened<LockGrant>) -> Option<LockEvent> {
    Some(match happened {
        Happened::Acquired(held) => LockEvent::Acquired { grant: held.grant },
        Happened::Suspended(held) => LockEvent::Suspended { token: held.token },
        Happened::Restored(held) => LockEvent::Reconnected { token: held.token },
        Happened::Lost(held, loss) => LockEvent::Lost { token: held.token, reason: lost_reason(loss) },
        Happened::Released(held) => LockEvent::Released { node: held.node },
        Happened::Failed(_) => return None,
    })
}
