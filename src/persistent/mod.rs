//! A node that stays: Curator's `PersistentNode` as an actor.
//!
//! Owns: [`PersistentNode`] (one node of any create mode, created at start, created again after
//! someone deletes it and after a new session, its data kept and updatable, deleted at stop),
//! [`PersistentTtlNode`] (a TTL node kept alive by a touched child, left to its TTL at stop),
//! its messages and [`PersistentNodeEvent`]s, and [`PersistentNodeError`]. Does not own the
//! session, or the registration of a name that must be unique among live sessions (the group
//! member's and the task worker's, `recipe/registration.rs`): a persistent node waits for
//! another session's ephemeral at its path to go rather than failing.
//!
//! ```text
//! <path>                      its node, in its create mode, data = the data given
//! <parent>/_c_<guid>-<name>N  a protected sequential node (the GUID finds it after a lost reply)
//! ```
//!
//! `docs/recipes/persistent-node.md`, in the repository and the published package and
//! reproduced below, gives the protocol and the failure table, each row naming its test.
//!
//! Files: `config.rs`, `messages.rs` (requests and events), `error.rs`, `actor.rs`, `handle.rs`,
//! `ttl.rs`.
//!
#![doc = include_str!("../../docs/recipes/persistent-node.md")]

mod actor;
mod config;
mod error;
mod handle;
mod messages;
mod ttl;

pub use actor::PersistentNode;
pub use config::PersistentNodeConfig;
pub use error::PersistentNodeError;
pub use handle::PersistentNodeHandle;
pub use messages::{ActualPath, PersistentNodeEvent, SetData, Subscribe, WaitForInitialCreate};
pub use ttl::{MAX_TTL, PersistentTtlNode, PersistentTtlNodeConfig};
