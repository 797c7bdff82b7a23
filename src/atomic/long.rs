//! [`DistributedAtomicLong`]: Curator's `DistributedAtomicLong` operations over one node.
//!
//! Owns: one operation's tries (read, then a write at the version read; a conflict tries again
//! under the policy, then, if configured, under the promoted lock) and reading back a write
//! whose reply was lost. Does not own the lock (a [`LockHandle`] started per promotion).

use std::time::Instant;

use tracing::{debug, instrument};

use super::config::{AtomicLongConfig, DEFAULT_TRIES, PromotedToLock};
use super::error::AtomicError;
use super::format::{decode_long, encode_long};
use super::value::{AtomicStats, AtomicValue};
use crate::error::Error;
use crate::lock::{LockConfig, LockError, LockHandle};
use crate::retry::{Attempted, RetryPolicy, optimistic, retried};
use crate::session::SessionHandle;
use crate::session::requests::CreateMode;

/// A 64-bit value shared through one ZooKeeper node, changed only by versioned writes, in
/// Curator's format and protocol; cheap to clone.
///
/// Every operation answers an [`AtomicValue`]: `succeeded` with the value before and after, or
/// not (every try met a concurrent write). Errors are for what retrying cannot fix, and for a
/// write whose outcome is unknown ([`AtomicError::OutcomeUnknown`]).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::atomic::AtomicError> {
/// use actix_zookeeper::atomic::{AtomicLongConfig, DistributedAtomicLong, PromotedToLock};
///
/// let config = AtomicLongConfig::new("/counters/orders").promoted_to_lock(PromotedToLock::new("/counters/orders-lock"));
/// let orders = DistributedAtomicLong::new(session, config);
/// let added = orders.increment().await?;
/// if added.succeeded {
///     println!("{} -> {}", added.pre, added.post);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DistributedAtomicLong {
    session: SessionHandle,
    config: AtomicLongConfig,
}

/// One try's outcome.
enum Try {
    /// Written: the value went from `pre` to `post`.
    Written { pre: i64, post: i64 },
    /// Not written: someone else wrote first (the value read was `pre`), or the write was lost
    /// before it reached the server. Worth another try.
    Again { pre: i64 },
}

/// What a try writes, from the value read.
type Make<'a> = &'a dyn Fn(i64) -> Result<i64, AtomicError>;

impl DistributedAtomicLong {
    /// The value `config` describes, on `session`. Nothing is sent until an operation is called.
    pub fn new(session: SessionHandle, config: AtomicLongConfig) -> Self {
        DistributedAtomicLong { session, config }
    }

    /// The value's node.
    pub fn path(&self) -> &str {
        &self.config.path
    }

    /// The current value (0 while the node does not exist): always `succeeded`, `pre == post`.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read.
    #[instrument(name = "zk.atomic.get", skip(self), fields(path = %self.config.path))]
    pub async fn get(&self) -> Result<AtomicValue, AtomicError> {
        let (value, _) = self.read(&self.policy(), false).await?;
        let stats = AtomicStats { optimistic_tries: 1, ..AtomicStats::default() };
        Ok(AtomicValue { succeeded: true, pre: value, post: value, stats })
    }

    /// Adds `delta` (Curator's `add`): succeeded with the value before and after, or not when
    /// every try met a concurrent write. Past `i64::MAX` / `i64::MIN` is
    /// [`AtomicError::Overflow`], nothing written (Curator wraps around).
    ///
    /// # Cancel safety
    /// Each try's write is sent when it is made: dropped after that, the addition may have
    /// applied (once); only the answer is lost.
    #[instrument(name = "zk.atomic.add", skip(self), fields(path = %self.config.path))]
    pub async fn add(&self, delta: i64) -> Result<AtomicValue, AtomicError> {
        let path = self.config.path.clone();
        self.apply(&move |value| {
            value.checked_add(delta).ok_or(AtomicError::Overflow { path: path.clone(), value, by: delta })
        })
        .await
    }

    /// Subtracts `delta`, as [`add`](Self::add) of its negation.
    pub async fn subtract(&self, delta: i64) -> Result<AtomicValue, AtomicError> {
        match delta.checked_neg() {
            Some(negated) => self.add(negated).await,
            None => {
                let (value, _) = self.read(&self.policy(), false).await?;
                Err(AtomicError::Overflow { path: self.config.path.clone(), value, by: delta })
            }
        }
    }

    /// Adds 1, as [`add`](Self::add).
    pub async fn increment(&self) -> Result<AtomicValue, AtomicError> {
        self.add(1).await
    }

    /// Subtracts 1, as [`add`](Self::add).
    pub async fn decrement(&self) -> Result<AtomicValue, AtomicError> {
        self.add(-1).await
    }

    /// Sets `value` whatever the value is, with the same tries as [`add`](Self::add) (Curator's
    /// `trySet`): not succeeded only when every try met a concurrent write.
    #[instrument(name = "zk.atomic.try_set", skip(self), fields(path = %self.config.path))]
    pub async fn try_set(&self, value: i64) -> Result<AtomicValue, AtomicError> {
        self.apply(&move |_| Ok(value)).await
    }

    /// Sets `new` if the value is `expected`, in one versioned write: not succeeded when another
    /// value was found (`pre` is that value) or someone wrote between the read and the write. As
    /// in Curator, a node that does not exist yet is not `expected`, even for 0: use
    /// [`initialize`](Self::initialize).
    #[instrument(name = "zk.atomic.compare_and_set", skip(self), fields(path = %self.config.path))]
    pub async fn compare_and_set(&self, expected: i64, new: i64) -> Result<AtomicValue, AtomicError> {
        let policy = self.policy();
        let (pre, version) = self.read(&policy, false).await?;
        let stats = AtomicStats { optimistic_tries: 1, ..AtomicStats::default() };
        let unchanged = AtomicValue { succeeded: false, pre, post: pre, stats };
        let Some(version) = version.filter(|_| pre == expected) else { return Ok(unchanged) };
        match self.write(pre, Some(version), new, &policy).await? {
            Try::Written { pre, post } => Ok(AtomicValue { succeeded: true, pre, post, stats }),
            Try::Again { .. } => Ok(unchanged),
        }
    }

    /// Creates the node holding `value` if it does not exist: `true` if this call created it
    /// (Curator's `initialize`).
    ///
    /// # Cancel safety
    /// The create is sent when this is called: dropped, it may still apply.
    #[instrument(name = "zk.atomic.initialize", skip(self), fields(path = %self.config.path))]
    pub async fn initialize(&self, value: i64) -> Result<bool, AtomicError> {
        let policy = self.policy();
        loop {
            if let Try::Written { .. } = self.write(0, None, value, &policy).await? {
                return Ok(true);
            }
            // Not created: someone else's node, or ours was lost on its way (none there yet).
            if self.read(&policy, false).await?.1.is_some() {
                return Ok(false);
            }
        }
    }

    /// Writes `value` whatever the value and its version (Curator's `forceSet`), creating the
    /// node if missing. A write whose reply is lost is sent again: writing the same value twice
    /// is the same as once.
    ///
    /// # Cancel safety
    /// The write is sent when this is called: dropped, it may still apply.
    #[instrument(name = "zk.atomic.force_set", skip(self), fields(path = %self.config.path))]
    pub async fn force_set(&self, value: i64) -> Result<(), AtomicError> {
        let path = &self.config.path;
        let written = retried(self.policy().backoff(), || async move {
            loop {
                return match self.session.set_data(path, encode_long(value), None).await {
                    Ok(_) => Attempted::Done(()),
                    Err(Error::NoNode { .. }) => match self.create(value).await {
                        Ok(()) => Attempted::Done(()),
                        // Made by somebody else meanwhile: write over it, at once.
                        Err(Error::NodeExists { .. }) => continue,
                        Err(err) => Attempted::Again(err),
                    },
                    Err(err) => Attempted::Again(err),
                };
            }
        });
        Ok(written.await?)
    }

    /// The optimistic tries, then the promoted ones if those gave up.
    async fn apply(&self, make: Make<'_>) -> Result<AtomicValue, AtomicError> {
        // An atomic holds nothing between calls: it is on the board while a write contends.
        let _health = self.session.health_board().waiting("atomic-long", self.path());
        let mut stats = AtomicStats::default();
        let started = Instant::now();
        let policy = self.policy();
        let mut outcome = self.tries(make, &policy, &mut stats.optimistic_tries).await?;
        stats.optimistic_time = started.elapsed();
        if let (Try::Again { .. }, Some(promoted)) = (&outcome, &self.config.promoted) {
            let started = Instant::now();
            if let Some(promoted) = self.promoted(make, promoted, &mut stats.promoted_tries).await? {
                outcome = promoted;
            }
            stats.promoted_time = started.elapsed();
        }
        Ok(match outcome {
            Try::Written { pre, post } => AtomicValue { succeeded: true, pre, post, stats },
            Try::Again { pre } => AtomicValue { succeeded: false, pre, post: pre, stats },
        })
    }

    /// Tries under `policy` until one writes or the policy allows no more tries (counted in
    /// `tries`).
    async fn tries(&self, make: Make<'_>, policy: &RetryPolicy, tries: &mut u32) -> Result<Try, AtomicError> {
        let limit = policy.max_attempts().unwrap_or(DEFAULT_TRIES);
        let written = |outcome: &Try| matches!(outcome, Try::Written { .. });
        optimistic(policy, limit, tries, written, || async {
            let (pre, version) = self.read(policy, false).await?;
            let outcome = self.write(pre, version, make(pre)?, policy).await?;
            if !written(&outcome) {
                debug!(path = %self.config.path, "a concurrent write came first");
            }
            Ok(outcome)
        })
        .await
    }

    /// Curator's `tryWithMutex`: the lock, then tries under the promoted policy; `None` when the
    /// lock was not granted within its time.
    async fn promoted(
        &self,
        make: Make<'_>,
        promoted: &PromotedToLock,
        tries: &mut u32,
    ) -> Result<Option<Try>, AtomicError> {
        let lock = LockHandle::start(self.session.clone(), LockConfig::new(promoted.lock_path.clone()))
            .map_err(AtomicError::Lock)?;
        let outcome = match lock.acquire(promoted.max_lock_time).await {
            Ok(_) => {
                let policy = promoted.retry.unwrap_or_else(|| self.policy());
                let outcome = self.tries(make, &policy, tries).await;
                // What the tries did stands whatever the release answers (the stop below
                // deletes the lock's node all the same): an error here would hide a write.
                if let Err(error) = lock.release().await {
                    debug!(%error, "the promoted lock's release failed; its stop deletes the node");
                }
                outcome.map(Some)
            }
            Err(LockError::Timeout { .. }) => Ok(None),
            Err(err) => Err(AtomicError::Lock(err)),
        };
        lock.stop().await;
        outcome
    }

    /// The value and the node's version (`None`: no node, the value 0), riding out connection
    /// loss under `policy`.
    /// With `synced`, a `sync` goes first: after a lost reply, the member serving us may not have
    /// applied the write yet.
    async fn read(&self, policy: &RetryPolicy, synced: bool) -> Result<(i64, Option<i32>), AtomicError> {
        let path = &self.config.path;
        let read = retried(policy.backoff(), || async move {
            if synced {
                if let Err(err) = self.session.sync(path).await {
                    return Attempted::Again(err);
                }
            }
            match self.session.get_data(path).await {
                Ok(node) => Attempted::Done(Some(node)),
                Err(Error::NoNode { .. }) => Attempted::Done(None),
                Err(err) => Attempted::Again(err),
            }
        });
        match read.await? {
            Some(node) => Ok((decode_long(path, &node.data)?, Some(node.stat.version))),
            None => Ok((0, None)),
        }
    }

    /// Writes `post` over `pre`, read at `version` (`None`: create the node).
    async fn write(&self, pre: i64, version: Option<i32>, post: i64, policy: &RetryPolicy) -> Result<Try, AtomicError> {
        let written = match version {
            Some(version) => self.session.set_data(&self.config.path, encode_long(post), Some(version)).await.map(drop),
            None => self.create(post).await,
        };
        match written {
            Ok(()) => Ok(Try::Written { pre, post }),
            Err(Error::BadVersion { .. } | Error::NoNode { .. } | Error::NodeExists { .. }) => Ok(Try::Again { pre }),
            Err(lost) if lost.outcome_unknown() => self.read_back(pre, version, post, lost, policy).await,
            Err(err) => Err(err.into()),
        }
    }

    /// Whether a write whose reply was `lost` applied: the node still at the version the write
    /// expected (or still missing, for a create) means it did not, and is worth another try;
    /// anything else cannot tell this write from another writer's.
    async fn read_back(
        &self,
        pre: i64,
        version: Option<i32>,
        attempted: i64,
        lost: Error,
        policy: &RetryPolicy,
    ) -> Result<Try, AtomicError> {
        debug!(path = %self.config.path, error = %lost, "a write's reply was lost; reading back");
        let unknown = |source| AtomicError::OutcomeUnknown { path: self.config.path.clone(), pre, attempted, source };
        let now = match self.read(policy, true).await {
            Ok((_, now)) => now,
            Err(AtomicError::ZooKeeper(_)) => return Err(unknown(lost)),
            Err(err) => return Err(err),
        };
        if now == version { Ok(Try::Again { pre }) } else { Err(unknown(lost)) }
    }

    /// Creates the node holding `value`, its missing parents as containers.
    async fn create(&self, value: i64) -> Result<(), Error> {
        let path = &self.config.path;
        match self.session.create(path, encode_long(value), CreateMode::Persistent).await {
            Err(Error::NoNode { .. }) => {
                self.session.ensure_parent_containers(path).await?;
                self.session.create(path, encode_long(value), CreateMode::Persistent).await.map(drop)
            }
            other => other.map(drop),
        }
    }

    /// The config's policy, else the session's.
    fn policy(&self) -> RetryPolicy {
        self.session.retry_policy_or(self.config.retry)
    }
}
