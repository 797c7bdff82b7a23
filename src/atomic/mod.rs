//! A distributed atomic long: Curator's `DistributedAtomicLong`, as an async handle.
//!
//! Owns: [`DistributedAtomicLong`] (get, compare-and-set, set, add; optimistic versioned writes
//! retried under the user's [`RetryPolicy`](crate::retry::RetryPolicy), optionally promoted to a
//! lock after the optimistic tries), [`AtomicValue`] (whether it succeeded, with the value before
//! and after), the stored format ([`encode_long`], [`decode_long`]) and [`AtomicError`]. Does not
//! own the lock it is promoted to ([`lock`](crate::lock)) or change notifications (a
//! [`SharedCount`](crate::counter::SharedCount) watches; this reads when asked).
//!
//! Layout and format = Curator's `DistributedAtomicLong`, so Java and Rust services can count
//! together:
//!
//! ```text
//! <path>          persistent node, data = the value as 8 bytes, big-endian two's complement
//!                 (missing or empty: 0; missing parents created as containers, as Curator does)
//! <lock path>     with promotion only: an InterProcessMutex's directory (`LockActor`)
//! ```
//!
//! `docs/recipes/atomic.md`, in the repository and the published package and reproduced below,
//! gives the protocol and the failure table, each row naming the test that proves it.
//!
//! Files: `config.rs` (path, retry, promotion), `error.rs`, `format.rs` (Curator's 8 bytes),
//! `value.rs` (what an operation answers), `long.rs` (the operations).
//!
#![doc = include_str!("../../docs/recipes/atomic.md")]

mod config;
mod error;
mod format;
mod long;
mod value;

pub use config::{AtomicLongConfig, PromotedToLock};
pub use error::AtomicError;
pub use format::{LONG_LEN, decode_long, encode_long};
pub use long::DistributedAtomicLong;
pub use value::{AtomicStats, AtomicValue};
