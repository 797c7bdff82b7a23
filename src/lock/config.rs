//! How a lock or a semaphore participant behaves: [`LockConfig`], [`LockKind`],
//! [`SemaphoreConfig`].

use crate::recipe::Participation;
use crate::recipe::naming::{LOCK_NAME, READ_NAME, Rule, WRITE_NAME};

/// Which lock of a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LockKind {
    /// Curator's `InterProcessMutex`: nodes `_c_<uuid>-lock-<seq>`.
    #[default]
    Exclusive,
    /// The read side of Curator's `InterProcessReadWriteLock`: nodes `_c_<uuid>-__READ__<seq>`;
    /// held by many readers at once while no writer is ahead.
    Read,
    /// The write side: nodes `_c_<uuid>-__WRIT__<seq>`; excludes readers and writers.
    Write,
}

impl LockKind {
    pub(super) fn node_name(self) -> &'static str {
        match self {
            LockKind::Exclusive => LOCK_NAME,
            LockKind::Read => READ_NAME,
            LockKind::Write => WRITE_NAME,
        }
    }

    pub(super) fn rule(self) -> Rule {
        match self {
            LockKind::Exclusive | LockKind::Write => Rule::Exclusive,
            LockKind::Read => Rule::Shared,
        }
    }
}

/// How a [`LockActor`](super::LockActor) behaves.
#[derive(Debug, Clone)]
#[must_use]
pub struct LockConfig {
    pub(super) dir: String,
    pub(super) kind: LockKind,
    pub(super) participation: Participation,
    pub(super) reacquire_after_loss: bool,
    pub(super) revocable: bool,
}

impl LockConfig {
    /// An exclusive lock at `dir` (the directory holding the contenders' nodes).
    pub fn new(dir: impl Into<String>) -> Self {
        LockConfig {
            dir: dir.into(),
            kind: LockKind::Exclusive,
            participation: Participation::default(),
            reacquire_after_loss: false,
            revocable: false,
        }
    }

    crate::builder::setters! {
        /// Exclusive, read or write.
        with_kind(kind: LockKind);

        /// After losing a held lock (session expired, node deleted), stand in line again on our own.
        /// Off by default: a holder that lost its lock must decide what it was doing first.
        with_reacquire_after_loss(reacquire_after_loss: bool);
    }

    crate::recipe::participation_setters!(
        id: ", so that operators (and [`Participants`](super::Participants)) can see who holds or waits",
        holder: "a holder"
    );

    /// Hear revocation requests (Curator's `makeRevocable`): when someone asks this
    /// participant's node to let go ([`revoke`](super::revoke), or Curator's
    /// `Revoker.attemptRevoke`), subscribers get [`LockEvent::RevocationRequested`](super::LockEvent::RevocationRequested),
    /// whether it holds the lock or waits for it. Nothing is released by it: what to do is the
    /// subscriber's choice. Costs a watch on the participant's own node from the grant on
    /// (otherwise set only once a grant has been held 100 ms). Default: off.
    pub fn revocable(mut self) -> Self {
        self.revocable = true;
        self
    }

    /// The lock directory.
    pub fn dir(&self) -> &str {
        &self.dir
    }
}

/// How a [`SemaphoreActor`](super::SemaphoreActor) behaves.
#[derive(Debug, Clone)]
#[must_use]
pub struct SemaphoreConfig {
    pub(super) dir: String,
    pub(super) max_leases: usize,
    pub(super) participation: Participation,
}

impl SemaphoreConfig {
    /// A semaphore at `dir` with `max_leases` leases. Every participant must use the same number
    /// (as with Curator, nothing checks it). With 0 leases every `Acquire` fails with
    /// [`LockError::InvalidConfig`](super::LockError::InvalidConfig).
    pub fn new(dir: impl Into<String>, max_leases: usize) -> Self {
        SemaphoreConfig { dir: dir.into(), max_leases, participation: Participation::default() }
    }

    crate::recipe::participation_setters!(id: " (a lease node)", holder: "a lease holder");

    /// The semaphore directory.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// How many leases it has.
    pub fn max_leases(&self) -> usize {
        self.max_leases
    }
}
