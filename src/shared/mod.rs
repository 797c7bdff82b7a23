//! A shared value: Curator's `SharedValue` as an actor — bytes in one node, a watched copy,
//! versioned compare-and-set, change events — and the core it shares with the counter.
//!
//! Owns: [`SharedNode`] (the core: the node created with a seed, read, watched and written, for
//! any [`SharedFormat`]), and the bytes front: [`SharedValue`], its messages, [`ValueChanged`],
//! [`SharedValueError`] and [`SharedValueHandle`]. Does not own a value's meaning: the counter
//! module's `SharedCount` is the same core in Curator's 4-byte count format.
//!
//! ```text
//! <path>    persistent node, data = the value's bytes (missing parents made as containers)
//! ```
//!
//! `docs/recipes/shared-value.md`, in the repository and the published package and reproduced
//! below, gives the protocol and the failure table, each row naming its test.
//!
//! Files: `node.rs` (the core), `value.rs` (the bytes front), `config.rs`, `messages.rs`,
//! `error.rs`, `handle.rs`.
//!
#![doc = include_str!("../../docs/recipes/shared-value.md")]

mod config;
mod error;
mod handle;
mod messages;
mod node;
mod value;

pub use config::SharedValueConfig;
pub use error::SharedValueError;
pub use handle::SharedValueHandle;
pub use messages::{GetValue, SetValue, Stop, Subscribe, TrySetValue, ValueChanged, VersionedValue};
pub use node::{Failure, NodeConfig, SharedFormat, SharedNode};
pub(crate) use node::{answers_node_requests, versioned_fields};
pub use value::{BytesFormat, SharedValue};
