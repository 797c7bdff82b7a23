//! Group membership: join a group under an id, and see who else is in it (Curator's
//! `GroupMember`).
//!
//! Owns: [`GroupMember`] — our ephemeral member node `<group>/<id>` (made again on every new
//! session) and a live view of the members, built on a children
//! [`CacheActor`](crate::cache::CacheActor). Does not own the view's mechanics (loading,
//! ordering, re-sync): those are the cache's.
//!
//! See `docs/recipes/group.md`.
//!
//! Files: `config.rs`, `messages.rs`, `error.rs`, `member.rs` (the member actor).
//!
#![doc = include_str!("../../docs/recipes/group.md")]

mod config;
mod error;
mod member;
mod messages;

pub use config::GroupConfig;
pub use error::GroupError;
pub use member::GroupMember;
pub use messages::{GroupEvent, Leave, Members, Subscribe};
