//! A shared counter: Curator's `SharedCount` as an actor.
//!
//! Owns: [`SharedCount`] (one counter node: created with a seed when missing, a watched copy of
//! the count, versioned compare-and-set, unconditional set, add-with-retry, change
//! notifications), its messages, [`CountChanged`], the stored format ([`encode_count`],
//! [`decode_count`], [`CountFormat`]) and [`CounterError`]. Does not own the watching, reading
//! and writing: that is the shared-node core ([`crate::shared::SharedNode`]), the same under
//! [`SharedValue`](crate::shared::SharedValue). Does not own the session.
//!
//! Layout and format = Curator's `SharedCount` and kazoo's `Counter(support_curator=True)`:
//!
//! ```text
//! <path>    persistent node, data = the count as 4 bytes, big-endian two's complement
//!           (missing parents are created as containers, as Curator does)
//! ```
//!
//! So Java, Python and Rust services can count together.
//!
//! `docs/recipes/counter.md`, in the repository and the published package and reproduced below,
//! gives the protocol (the ZooKeeper operations step by step, and the races they guard against) and
//! the failure table: what each fault does to a counter, row by row, each row naming the test that
//! proves it.
//!
//! Files: `config.rs`, `messages.rs`, `error.rs`, `format.rs` (Curator's 4-byte count), `actor.rs`.
//!
#![doc = include_str!("../../docs/recipes/counter.md")]

mod actor;
mod config;
mod error;
mod format;
mod handle;
mod messages;

pub use actor::{CountFormat, SharedCount, add};
pub use config::SharedCountConfig;
pub use error::CounterError;
pub use format::{COUNT_LEN, decode_count, encode_count};
pub use handle::SharedCountHandle;
pub use messages::{AddCount, CountChanged, GetCount, SetCount, Stop, Subscribe, TrySetCount, VersionedCount};
