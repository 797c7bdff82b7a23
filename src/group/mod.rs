//! Group membership: join a group under an id, and see who else is in it (Curator's
//! `GroupMember`).
//!
//! Owns: [`GroupMember`] — our ephemeral member node `<group>/<id>` (made again on every new
//! session) and a live view of the members, built on a children
//! [`CacheActor`](crate::cache::CacheActor). Does not own the view's mechanics (loading,
//! ordering, re-sync): those are the cache's.
//!
//! `docs/recipes/group.md`, in the repository and the published package and reproduced below, gives
//! the layout, the messages and the failure table: what each fault does to a member and its view,
//! row by row, each row naming the test that proves it. The view's protocol is the cache's
//! (`docs/recipes/cache.md`).
//!
//! Files: `config.rs`, `messages.rs`, `error.rs`, `member.rs` (the member actor).
//!
#![doc = include_str!("../../docs/recipes/group.md")]

mod config;
mod error;
mod handle;
mod member;
mod messages;

pub use config::GroupConfig;
pub use error::GroupError;
pub use handle::GroupMemberHandle;
pub use member::GroupMember;
pub use messages::{GroupEvent, Leave, Members, Subscribe};
