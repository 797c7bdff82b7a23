//! [`DistributedBarrier`]: one node; while it exists, waiters wait.
//!
//! Owns: setting the barrier (create the node, and its missing parents as persistent nodes, like
//! Curator's `creatingParentsIfNeeded`), removing it, and waiting with an `exists` watch until it
//! is gone. Not an actor: a cheap handle, cloned freely.

use std::future::Future;
use std::time::Duration;

use futures::channel::oneshot;
use tokio::time::Instant;
use tracing::{Instrument, debug, debug_span};

use super::{BarrierError, OUTAGE_BUDGET, validate, within, within_budget};
use crate::error::Error;
use crate::path;
use crate::retry::{Attempted, retried};
use crate::session::SessionHandle;
use crate::session::requests::{CreateMode, Stat};
use crate::session::{WatchEvent, WatchEventKind};

/// Curator's `DistributedBarrier`: processes wait until the node at the barrier's path is gone.
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::barrier::BarrierError> {
/// use std::time::Duration;
/// use actix_zookeeper::barrier::DistributedBarrier;
///
/// let barrier = DistributedBarrier::new(session, "/deploy/hold")?;
/// barrier.set().await?;
/// // elsewhere: processes block here until someone calls `remove`
/// barrier.wait(Some(Duration::from_secs(30))).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DistributedBarrier {
    session: SessionHandle,
    path: String,
}

impl DistributedBarrier {
    /// A barrier at `path` (relative to the session's chroot). Fails with
    /// [`BarrierError::InvalidPath`] for a path ZooKeeper would refuse, and for the root.
    pub fn new(session: SessionHandle, path: &str) -> Result<DistributedBarrier, BarrierError> {
        validate(path)?;
        Ok(DistributedBarrier { session, path: path.to_owned() })
    }

    /// The barrier's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Sets the barrier: creates its node (and missing parents). Setting a barrier that is
    /// already set is fine. A request whose outcome was lost is sent again (for up to 30 s of
    /// connection trouble), which is safe because creating an existing node changes nothing.
    ///
    /// # Cancel safety
    /// Nothing is sent before the first poll. Dropped after that, the barrier may or may not
    /// be set (its parents may have been created); calling `set` again is safe.
    pub fn set(&self) -> impl Future<Output = Result<(), BarrierError>> + 'static {
        self.write_within_budget(debug_span!("barrier.set", path = %self.path), |session, barrier, budget| async move {
            let created = match session.create(&barrier, Vec::new(), CreateMode::Persistent).await {
                Err(Error::NoNode { .. }) => {
                    if let Some(parent) = path::parent(&barrier).filter(|p| *p != "/")
                        && let Err(error) = session.ensure_path(parent).await
                    {
                        return within_budget(error, budget);
                    }
                    session.create(&barrier, Vec::new(), CreateMode::Persistent).await
                }
                created => created,
            };
            match created {
                Ok(_) | Err(Error::NodeExists { .. }) => Attempted::Done(()),
                Err(error) => {
                    debug!(%error, "set failed; sending again if the outcome is unknown");
                    within_budget(error, budget)
                }
            }
        })
    }

    /// Removes the barrier: deletes its node, which releases every waiter. Removing a barrier
    /// that is not set is fine. Fails with `NotEmpty` (in [`BarrierError::ZooKeeper`]) if
    /// someone created nodes under it. Retried through connection trouble like [`set`](Self::set).
    ///
    /// # Cancel safety
    /// Nothing is sent before the first poll. Dropped after that, the barrier may or may not
    /// be removed; calling `remove` again is safe.
    pub fn remove(&self) -> impl Future<Output = Result<(), BarrierError>> + 'static {
        self.write_within_budget(
            debug_span!("barrier.remove", path = %self.path),
            |session, barrier, budget| async move {
                match session.delete(&barrier, None).await {
                    Ok(()) | Err(Error::NoNode { .. }) => Attempted::Done(()),
                    Err(error) => {
                        debug!(%error, "remove failed; sending again if the outcome is unknown");
                        within_budget(error, budget)
                    }
                }
            },
        )
    }

    /// A write to the barrier's node, `attempt` (given the session, the node and the deadline
    /// of its [`OUTAGE_BUDGET`]), made again as the session's policy says while it lasts; traced
    /// in `span`.
    fn write_within_budget<F, Fut>(
        &self,
        span: tracing::Span,
        mut attempt: F,
    ) -> impl Future<Output = Result<(), BarrierError>> + 'static + use<F, Fut>
    where
        F: FnMut(SessionHandle, String, Instant) -> Fut + 'static,
        Fut: Future<Output = Attempted<()>>,
    {
        let (session, barrier) = (self.session.clone(), self.path.clone());
        async move {
            let budget = Instant::now() + OUTAGE_BUDGET;
            let written =
                retried(session.retry_policy().backoff(), || attempt(session.clone(), barrier.clone(), budget));
            Ok(written.await?)
        }
        .instrument(span)
    }

    /// Waits until the barrier is gone: at once if it is not set, otherwise until its node is
    /// deleted (an `exists` watch, no polling). With `timeout`, fails with
    /// [`BarrierError::Timeout`] if the barrier is still set when it elapses; without, waits as
    /// long as it takes. Connection trouble and a new session are waited out (the watch is set
    /// again), so a removal while disconnected is still seen.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads; dropped (a `select!`, an outer timeout), its watch is
    /// withdrawn, so it leaves nothing behind.
    pub fn wait(&self, timeout: Option<Duration>) -> impl Future<Output = Result<(), BarrierError>> + 'static {
        let session = self.session.clone();
        let barrier = self.path.clone();
        let span = debug_span!("barrier.wait", path = %barrier);
        let deadline = timeout.map(|t| Instant::now() + t);
        let waiting = async move {
            loop {
                match look(&session, &barrier).await? {
                    (None, _) => return Ok(()),
                    (Some(_), fired) => match fired.await {
                        Ok(event) if event.kind == WatchEventKind::NodeDeleted => return Ok(()),
                        // Created again, changed, or the session ended: look again.
                        Ok(event) => debug!(kind = ?event.kind, "barrier watch fired; checking again"),
                        Err(_) => debug!("barrier watch dropped; checking again"),
                    },
                }
            }
        };
        let barrier = self.path.clone();
        let health = self.session.health_board().waiting("barrier", &self.path);
        async move {
            // On the board while it waits, gone with the call.
            let _health = health;
            match within(deadline, waiting).await {
                Some(outcome) => outcome,
                None => {
                    debug!("barrier still set at the deadline");
                    Err(BarrierError::Timeout { path: barrier, waited: timeout.unwrap_or_default() })
                }
            }
        }
        .instrument(span)
    }
}

/// The barrier's stat, and the event of the one-shot watch left on it (withdrawn if the caller
/// is dropped: a caller that gives up leaves no watch), retried through connection trouble as
/// the session's policy says.
async fn look(session: &SessionHandle, barrier: &str) -> Result<(Option<Stat>, oneshot::Receiver<WatchEvent>), Error> {
    retried(session.retry_policy().backoff(), || {
        let (stat, fired) = session.exists_until_dropped(barrier);
        async move {
            match stat.await {
                Ok(stat) => Attempted::Done((stat, fired)),
                Err(error) => Attempted::judged(Err(error)),
            }
        }
    })
    .await
}
