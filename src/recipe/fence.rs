//! [`Fence`]: a node we won (a lock grant, a leader's term, a master's term) and its fencing
//! token, with the writes it guards and the moment it may no longer be held; [`FenceError`],
//! why a guarded write did not apply; [`NotCurrent`], why guarded work did not run.
//!
//! Owns: the one type every recipe hands out for "ours while this node stands" (`LockGrant`,
//! `LeaderTerm` and `MasterFence` are names for it), the guarded write, and "safe until"
//! ([`Fence::valid_until`], [`Fence::is_current`], [`Fence::while_current`]). Does not own how
//! the node was won (the contender), what a recipe does when it is lost, or how long the session
//! is alive (the session's [`Lease`]).
//!
//! # Safe until
//! A write guarded by the node is refused by the server once the grant has ended. Work that is
//! not a ZooKeeper write (a file, a payment, a message to another system) has no such guard:
//! for it, a grant also carries the moment after which it may no longer be held, computed on
//! this process's monotonic clock from the session's [`Lease`] (the last request the server
//! answered, plus the session timeout, less a margin). Until that moment the server cannot have
//! expired the session, so no other participant can have been granted what our node holds
//! (short of somebody deleting it by hand). A process paused past it finds it passed as soon as
//! it runs again, before it hears anything.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::FencingToken;
use super::guarded::{GuardFailure, checked, guarded_multi};
use crate::error::Error;
use crate::session::requests::{Op, OpResult};
use crate::session::{Lease, SessionHandle, SessionId};

/// Proof of holding something (a lock, a semaphore lease, leadership, a master's office) at the
/// time it was won: the node that won, its version then, its fencing token, and until when it is
/// certainly still held ([`valid_until`](Self::valid_until)).
///
/// Two fences are equal when they name the same node, token and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The node that won.
    pub node: String,
    /// Its `czxid`: larger for every later win of the same lock, election or office.
    pub token: FencingToken,
    /// The node's version when won. Guarded writes do not check it: a revocation request
    /// (Curator's `Revoker`) writes into a lock node without ending the grant.
    pub version: i32,
    validity: Validity,
}

/// Until when a grant is certainly held: its session's lease, while the grant has not ended.
#[derive(Clone)]
struct Validity {
    lease: Lease,
    /// The session that owns the node.
    session: SessionId,
    /// Set once the recipe knows the grant ended (released, lost, resigned): shared by every
    /// clone of the fence.
    ended: Arc<Ended>,
}

/// That a grant ended, and who waits to hear it.
#[derive(Default)]
struct Ended {
    flag: AtomicBool,
    /// Wakes every `while_current` under way.
    news: tokio::sync::Notify,
}

impl std::fmt::Debug for Validity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validity")
            .field("session", &self.session)
            .field("ended", &self.ended.flag.load(Ordering::SeqCst))
            .finish()
    }
}

/// What a fence is: node, token and version; its validity is how long, not which.
impl PartialEq for Validity {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Validity {}

impl Fence {
    /// The fence of `node`, won by session `session` with `token` at `version`.
    pub(crate) fn won(node: &str, token: FencingToken, version: i32, session: SessionId, lease: Lease) -> Fence {
        // Kept fresh while anything is held on it: a holder idle past the lease would otherwise
        // read "not current" first, though its node exists.
        lease.want();
        Fence {
            node: node.to_owned(),
            token,
            version,
            validity: Validity { lease, session, ended: Arc::new(Ended::default()) },
        }
    }

    /// The recipe knows the grant ended: from now on no clone of this fence is current.
    pub(crate) fn end(&self) {
        self.validity.ended.flag.store(true, Ordering::SeqCst);
        self.validity.ended.news.notify_waiters();
    }

    /// The moment after which the grant may no longer be held, on this process's monotonic
    /// clock: its session's lease ([`Lease::valid_until`]), renewed by every write or `sync`
    /// the server answers. `None` once the grant is known to have ended (released, lost, resigned) or its
    /// session to have ended. Later calls may return a later moment (the lease was renewed),
    /// never an earlier one for the same session, except `None`.
    pub fn valid_until(&self) -> Option<Instant> {
        if self.validity.ended.flag.load(Ordering::SeqCst) {
            return None;
        }
        self.validity.lease.valid_until_for(self.validity.session)
    }

    /// True while the grant is certainly held: before [`valid_until`](Self::valid_until). Check
    /// it before starting work that only the holder may do; better, let
    /// [`while_current`](Self::while_current) start the work and cut it off.
    pub fn is_current(&self) -> bool {
        self.valid_until().is_some_and(|until| Instant::now() < until)
    }

    /// How much longer the grant is certainly held; `None` once it is not current.
    pub fn remaining(&self) -> Option<Duration> {
        let until = self.valid_until()?;
        let now = Instant::now();
        (now < until).then(|| until - now)
    }

    /// Runs `work` only while the grant is certainly held: refused (and `work` never polled)
    /// when it is not current now, cut off (dropped where it stands) the moment it stops being
    /// current: its deadline passes, or the recipe ends the grant (a release, a loss, a
    /// resignation, in any task). The deadline is read again each time it arrives, so a lease
    /// renewed meanwhile lets the work go on; `work` is never polled past it.
    ///
    /// Cutting off protects what `work` does from its next `.await` on; a step between two
    /// awaits runs to its end. Keep steps short, or check [`is_current`](Self::is_current)
    /// inside them.
    ///
    /// # Cancel safety
    /// Dropping the returned future drops `work` (as cutting it off does); nothing else is held.
    pub async fn while_current<F: Future>(&self, work: F) -> Result<F::Output, NotCurrent> {
        let cut = || NotCurrent { node: self.node.clone(), started: true };
        let mut work = std::pin::pin!(work);
        let mut started = false;
        loop {
            // Listening before looking: an end between the look and the wait still wakes us.
            let ended = self.validity.ended.news.notified();
            let mut ended = std::pin::pin!(ended);
            ended.as_mut().enable();
            let Some(until) = self.valid_until().filter(|until| Instant::now() < *until) else {
                return Err(NotCurrent { node: self.node.clone(), started });
            };
            started = true;
            tokio::select! {
                biased;
                () = ended => return Err(cut()),
                // Read again when it arrives: a renewed lease lets the work go on.
                () = tokio::time::sleep_until(until.into()) => continue,
                // A step only while the deadline has not passed (the timer may fire late).
                output = std::future::poll_fn(|cx| {
                    if Instant::now() >= until {
                        return std::task::Poll::Ready(None);
                    }
                    work.as_mut().poll(cx).map(Some)
                }) => match output {
                    Some(output) => return Ok(output),
                    None => continue,
                },
            }
        }
    }

    /// Fails with [`NotCurrent`] unless the grant is certainly held now; `Ok` carries how much
    /// longer it is. For a step that cannot be cut off: check, then do only what fits.
    pub fn check_current(&self) -> Result<Duration, NotCurrent> {
        self.remaining().ok_or_else(|| NotCurrent { node: self.node.clone(), started: false })
    }

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

/// Why guarded work ([`Fence::while_current`], [`Fence::check_current`]) did not run, or did
/// not run to its end: the grant was no longer certainly held.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the grant of node {node} is no longer certainly held{}", if *.started { "; the work was cut off" } else { "; the work was not started" })]
pub struct NotCurrent {
    /// The node the grant was won with.
    pub node: String,
    /// True when the work had started and was cut off; false when it was refused before.
    pub started: bool,
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

/// Writes `From<FenceError>` for a recipe's error: the fencing node gone is its `$ended { node }`
/// (what the node stood for has ended: a lock no longer held, a master deposed), and the other
/// two are its `OutcomeUnknown { node, source }` and `ZooKeeper(error)`.
macro_rules! error_from_fence {
    ($error:ident, $ended:ident) => {
        impl From<$crate::recipe::FenceError> for $error {
            #[doc = concat!("A fenced write's failure: its fencing node gone is [`", stringify!($error), "::", stringify!($ended), "`].")]
            fn from(error: $crate::recipe::FenceError) -> Self {
                use $crate::recipe::FenceError;
                match error {
                    FenceError::Ended { node } => $error::$ended { node },
                    FenceError::OutcomeUnknown { node, source } => $error::OutcomeUnknown { node, source },
                    FenceError::ZooKeeper(error) => $error::ZooKeeper(error),
                }
            }
        }
    };
}
pub(crate) use error_from_fence;
