//! Group membership: join a group under an id, and see who else is in it (Curator's
//! `GroupMember`).
//!
//! Owns: [`GroupMember`] — our ephemeral member node `<group>/<id>` (made again on every new
//! session) and a live view of the members, built on a children
//! [`CacheActor`](crate::cache::CacheActor). Does not own the view's mechanics (loading,
//! ordering, re-sync): those are the cache's.
//!
//! See `docs/recipes/group.md`.

mod member;
mod messages;

pub use member::{GroupConfig, GroupMember};
pub use messages::{GroupError, GroupEvent, Leave, Members, Subscribe};
