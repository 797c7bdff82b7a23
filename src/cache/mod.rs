//! Caches of ZooKeeper data kept in memory and in sync: one node (Curator's `NodeCache`), its
//! direct children (`PathChildrenCache`), or a whole subtree (`TreeCache` / `CuratorCache`).
//!
//! Owns: [`CacheActor`] — one persistent watch per cache (recursive for children and tree
//! scopes), an initial load, events per node in the order the server applied them, queries
//! answered from memory, and a re-sync (re-read and emit exactly the differences) after every
//! reconnect or new session. Does not own what the data means: see the `group` module for a
//! membership view built on a children cache.
//!
//! `docs/recipes/cache.md`, in the repository and the published package and reproduced below, gives
//! the protocol (load, watch and re-sync, step by step, and the races they guard against) and the
//! failure table: what each fault does to a cache, row by row, each row naming the test that proves
//! it.
//!
//! Files: `config.rs`, `messages.rs`, `error.rs`, `actor.rs`.
//!
#![doc = include_str!("../../docs/recipes/cache.md")]

mod actor;
mod config;
mod error;
mod handle;
mod messages;
mod view;

pub use actor::CacheActor;
pub use config::{CacheConfig, CacheScope};
pub use error::CacheError;
pub use handle::CacheHandle;
pub use messages::{CacheEvent, CachedNode, Get, Snapshot, Stop, Subscribe};
pub(crate) use view::ChildrenView;
