//! [`MultiLock`]: several locks taken all or nothing, as Curator's `InterProcessMultiLock`.
//!
//! Owns: the order the locks are taken in (by directory: two multi-locks over the same locks
//! take them in the same order, so neither can hold one the other waits for), giving back what
//! was taken when a later lock fails, times out or the call is dropped, and [`MultiGrant`], whose
//! guarded write checks every grant in one transaction. Does not own any single lock: each is a
//! [`LockHandle`] (one [`LockActor`](super::LockActor) per lock).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::Recipient;
use tracing::{debug, instrument};

use super::config::LockConfig;
use super::error::LockError;
use super::grant::LockGrant;
use super::handle::LockHandle;
use super::messages::LockEvent;
use crate::recipe::FenceError;
use crate::recipe::guarded::{GuardFailure, guarded_multi};
use crate::session::SessionHandle;
use crate::session::requests::{Op, OpResult};

/// Several locks (exclusive locks, or halves of read/write locks), taken all or nothing. One
/// owner at a time, as one lock actor has one holder: clones share the locks, and an `acquire`
/// on a clone while another is under way may give back what the other took.
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::lock::LockError> {
/// use std::time::Duration;
/// use actix_zookeeper::lock::{LockConfig, MultiLock};
///
/// let both = MultiLock::start(session.clone(), vec![LockConfig::new("/locks/a"), LockConfig::new("/locks/b")])?;
/// let grant = both.acquire(Some(Duration::from_secs(10))).await?;
/// grant.guarded_write(&session, vec![]).await?; // applies only while every lock is held
/// both.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    /// In the order they are taken.
    locks: Vec<LockHandle>,
    /// The grants of the last `acquire` that took every lock, until `release`: what a
    /// re-entrant `acquire` must not give back when it fails or is dropped.
    held: Arc<Mutex<Option<MultiGrant>>>,
}

/// Proof of holding every lock of a [`MultiLock`]: their grants, in the order taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiGrant {
    /// One grant per lock, in the order taken (by directory).
    pub grants: Vec<LockGrant>,
}

impl MultiLock {
    /// Starts one lock actor per config on the current Arbiter. Fails with
    /// [`LockError::InvalidConfig`] for no config, or two of one directory (the halves of one
    /// read/write lock would wait for each other), and [`LockError::ZooKeeper`] with
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a directory that is not a valid
    /// path; nothing starts then.
    pub fn start(session: SessionHandle, configs: Vec<LockConfig>) -> Result<MultiLock, LockError> {
        let mut configs = configs;
        configs.sort_by(|a, b| a.dir().cmp(b.dir()));
        if configs.is_empty() {
            let reason = "a multi-lock needs at least one lock".to_owned();
            return Err(LockError::InvalidConfig { dir: String::new(), reason });
        }
        if let Some(twice) = configs.windows(2).find(|pair| pair[0].dir() == pair[1].dir()) {
            let reason = "the same lock directory twice in one multi-lock".to_owned();
            return Err(LockError::InvalidConfig { dir: twice[0].dir().to_owned(), reason });
        }
        for config in &configs {
            crate::path::validate(config.dir(), false)?;
        }
        let locks =
            configs.into_iter().map(|config| LockHandle::start(session.clone(), config)).collect::<Result<_, _>>()?;
        Ok(MultiLock { locks, held: Arc::new(Mutex::new(None)) })
    }

    /// The locks, in the order they are taken.
    pub fn locks(&self) -> &[LockHandle] {
        &self.locks
    }

    /// Takes every lock, in order, within `timeout` overall if given. When one fails or the time
    /// runs out, the ones taken are released before the error is answered (a timeout names the
    /// lock it was waiting for). Holding them already: the same grants at once (a lock lost
    /// meanwhile is taken again); the grants of an earlier `acquire` of this multi-lock are never
    /// released by it (locks taken through [`locks`](Self::locks) directly are not known here).
    ///
    /// # Cancel safety
    /// Cancel-safe: dropped (a `timeout`, a `select!`), the lock being waited for leaves the line
    /// and those this call took are released (sent when dropped).
    #[instrument(name = "zk.multi_lock.acquire", skip(self), fields(locks = self.locks.len()))]
    pub async fn acquire(&self, timeout: Option<Duration>) -> Result<MultiGrant, LockError> {
        // No deadline when it is too far to count (`Duration::MAX`).
        let deadline = timeout.and_then(|timeout| Instant::now().checked_add(timeout));
        let before = self.held.lock().expect("multi-lock state").clone();
        let mut taken = Taken { locks: &self.locks, before, grants: Vec::with_capacity(self.locks.len()) };
        for lock in &self.locks {
            let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
            match lock.acquire_reentrant(left).await {
                Ok(grant) => taken.grants.push(grant),
                Err(err) => {
                    debug!(dir = lock.dir(), error = %err, taken = taken.grants.len(), "giving back the locks taken");
                    taken.release().await;
                    return Err(match err {
                        LockError::Timeout { dir, .. } => {
                            LockError::Timeout { dir, after: timeout.unwrap_or_default() }
                        }
                        other => other,
                    });
                }
            }
        }
        let grant = MultiGrant { grants: taken.keep() };
        *self.held.lock().expect("multi-lock state") = Some(grant.clone());
        Ok(grant)
    }

    /// Releases every lock, the last taken first; all are released even when one fails, whose
    /// error is answered (the first, in release order).
    ///
    /// # Cancel safety
    /// Every release is sent when this is called: dropping the future does not stop them.
    #[instrument(name = "zk.multi_lock.release", skip(self), fields(locks = self.locks.len()))]
    pub async fn release(&self) -> Result<(), LockError> {
        self.held.lock().expect("multi-lock state").take();
        let releases: Vec<_> = self.locks.iter().rev().map(LockHandle::release).collect();
        let mut first_error = None;
        for released in releases {
            if let Err(err) = released.await {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Sends every lock's [`LockEvent`]s to `recipient` (each names its participant and lock
    /// node; a `Lost` of any one means the multi-grant is gone).
    pub fn subscribe(&self, recipient: Recipient<LockEvent>) {
        for lock in &self.locks {
            lock.subscribe(recipient.clone());
        }
    }

    /// Releases every lock and stops their actors; resolves once all have stopped.
    ///
    /// # Cancel safety
    /// The stops are sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl std::future::Future<Output = ()> + 'static {
        self.held.lock().expect("multi-lock state").take();
        let stopped: Vec<_> = self.locks.iter().map(LockHandle::stop).collect();
        async move {
            futures::future::join_all(stopped).await;
        }
    }
}

impl MultiGrant {
    /// Applies `ops` atomically only while every lock is still held: the transaction starts with
    /// a check of each grant's node. [`FenceError::Ended`] names the first node found gone;
    /// otherwise as [`Fence::guarded_write`](crate::recipe::Fence::guarded_write).
    ///
    /// # Cancel safety
    /// The transaction is sent when this is called: dropping the future does not withdraw it.
    pub fn guarded_write(
        &self,
        session: &SessionHandle,
        ops: Vec<Op>,
    ) -> impl std::future::Future<Output = Result<Vec<OpResult>, FenceError>> + 'static + use<> {
        let nodes: Vec<String> = self.grants.iter().map(|grant| grant.node.clone()).collect();
        let checked: Vec<&str> = nodes.iter().map(String::as_str).collect();
        let write = guarded_multi(session, &checked, ops);
        async move {
            write.await.map_err(|failure| match failure {
                GuardFailure::Ended(index) => FenceError::Ended { node: nodes[index].clone() },
                GuardFailure::Unknown(source) => FenceError::OutcomeUnknown { node: nodes.join(","), source },
                GuardFailure::ZooKeeper(error) => FenceError::ZooKeeper(error),
            })
        }
    }
}

/// The locks one `acquire` has taken so far: released if it ends without them (an error, or the
/// caller dropping it), except those held before it began.
struct Taken<'a> {
    locks: &'a [LockHandle],
    /// The grants held before this call (a re-entrant `acquire`).
    before: Option<MultiGrant>,
    grants: Vec<LockGrant>,
}

impl Taken<'_> {
    /// The locks this call took, the last first: not those whose grant was held before it.
    fn taken_here(&self) -> Vec<&LockHandle> {
        let held_before = |i: usize, grant: &LockGrant| {
            self.before.as_ref().and_then(|before| before.grants.get(i)).is_some_and(|old| old.token == grant.token)
        };
        let new = self.grants.iter().enumerate().filter(|(i, grant)| !held_before(*i, grant));
        let mut taken: Vec<&LockHandle> = new.map(|(i, _)| &self.locks[i]).collect();
        taken.reverse();
        taken
    }

    /// Releases what this call took, the last first, and waits for it.
    async fn release(&mut self) {
        let releases: Vec<_> = self.taken_here().into_iter().map(LockHandle::release).collect();
        self.grants.clear();
        for released in releases {
            let _ = released.await;
        }
    }

    /// All were taken: the caller holds them now.
    fn keep(mut self) -> Vec<LockGrant> {
        std::mem::take(&mut self.grants)
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        // The caller dropped the acquire: releases are sent when made, so these still happen.
        for lock in self.taken_here() {
            drop(lock.release());
        }
    }
}
