//! Locks: exclusive, read/write, and a counting semaphore — herd-free, fenced, Curator-compatible.
//!
//! Owns: [`LockActor`] (Curator's `InterProcessMutex`, and both sides of
//! `InterProcessReadWriteLock`), [`SemaphoreActor`] (`InterProcessSemaphoreV2`), their messages,
//! [`LockGrant`] with guarded writes, and [`LockError`]. Does not own the node protocol: that is
//! [`crate::recipe::Contender`], shared with the election recipe.
//!
//! Layout (shared with Curator, so Java and Rust services can share a lock):
//! - exclusive: `<dir>/_c_<uuid>-lock-<seq>`;
//! - read/write: `<dir>/_c_<uuid>-__READ__<seq>` and `<dir>/_c_<uuid>-__WRIT__<seq>`;
//! - semaphore: leases `<dir>/leases/_c_<uuid>-lease-<seq>`, guarded by a mutex at `<dir>/locks`.
//!
//! See `docs/recipes/lock.md` for the protocol and what happens on each failure.

mod actor;
mod config;
mod error;
mod grant;
mod holding;
mod messages;
mod semaphore;

pub use actor::LockActor;
pub use config::{LockConfig, LockKind, SemaphoreConfig};
pub use error::LockError;
pub use grant::LockGrant;
pub use messages::{Acquire, GiveBack, LockEvent, LockLostReason, Participants, Release, Subscribe, TryAcquire};
pub use semaphore::SemaphoreActor;

pub use crate::recipe::{ConnectionPolicy, FencingToken};
