//! Locks: exclusive, read/write, and a counting semaphore — herd-free, fenced, Curator-compatible.
//!
//! Owns: [`LockActor`] (Curator's `InterProcessMutex`, and both sides of
//! `InterProcessReadWriteLock`), [`SemaphoreActor`] (`InterProcessSemaphoreV2`), their
//! configuration, messages and events, [`LockGrant`] with guarded writes, and [`LockError`].
//! Does not own the node protocol (the crate's contender, shared with the election) or what
//! holding means under faults (the holder core, shared with the semaphore and the election):
//! this module only words them as lock requests and events.
//!
//! `docs/recipes/lock.md`, in the repository and the published package and reproduced below, gives
//! the protocol (the ZooKeeper operations step by step, and the races they guard against) and the
//! failure table: what each fault does to a waiter and a holder, semaphore included, row by row,
//! each row naming the test that proves it.
//!
//! Files: `config.rs` (how a participant behaves), `messages.rs` (requests and events),
//! `error.rs`, `grant.rs` (a grant and its guarded writes), `holding.rs` (the holder core's
//! decisions in the lock's words), `actor.rs` (the mutex and the read/write lock),
//! `multi.rs` ([`MultiLock`]: several locks, all or nothing), `revoke.rs` (asking a participant
//! to let go), `semaphore.rs`, `handle.rs` ([`LockHandle`], [`SemaphoreHandle`]: async methods over the
//! actors).
//!
#![doc = include_str!("../../docs/recipes/lock.md")]

mod actor;
mod config;
mod error;
mod grant;
mod handle;
mod holding;
mod messages;
mod multi;
mod revoke;
mod semaphore;
mod turn;

pub use actor::LockActor;
pub use config::{LockConfig, LockKind, SemaphoreConfig};
pub use error::LockError;
pub use grant::LockGrant;
pub use handle::{LockGuard, LockHandle, SemaphoreHandle};
pub use messages::{Acquire, GiveBack, LockEvent, LockLostReason, Participants, Release, Subscribe, TryAcquire};
pub use multi::{MultiGrant, MultiLock};
pub use revoke::{Revocation, revoke};
pub use semaphore::SemaphoreActor;

pub use crate::recipe::{ConnectionPolicy, FencingToken};
