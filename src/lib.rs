//! # actix-zookeeper
//!
//! ZooKeeper coordination for actix: what Apache Curator is to Java and kazoo to Python, with
//! every recipe an actor and every outcome a typed message.
//!
//! Recipes, each an actor (or a cheap handle) with a document in `docs/recipes/`:
//! - [`lock`]: exclusive, read/write and semaphore locks (Curator's layout), fencing tokens,
//!   guarded writes;
//! - [`election`]: leader election (Curator's `LeaderLatch` layout), leader-actor mode;
//! - [`queue`]: a distributed queue with at-least-once consumers feeding worker actors;
//! - [`tasks`]: master–worker task assignment — an elected, fenced master assigns submitted
//!   tasks to registered workers and re-assigns those of workers that leave;
//! - [`cache`]: node, children and tree caches kept in sync (re-synced after every reconnect);
//! - [`group`]: group membership; [`counter`]: a shared counter (Curator's format);
//!   [`barrier`]: Curator's barrier and double barrier.
//!
//! They stand on the foundation:
//! - [`SessionActor`] / [`SessionHandle`]: one ZooKeeper session on its own Arbiter, typed
//!   requests that reach the server in the order sent, one-shot and persistent watches delivered
//!   as [`WatchEvent`] messages, explicit [`SessionEvent`]s (`Connected`, `Suspended`,
//!   `Reconnected`, `Expired`, `Closed`, `AuthFailed`) and a new session built on its own after
//!   expiry (the *generation* counts sessions);
//! - [`path`]: ZooKeeper's path rules and ordering of sequential nodes by sequence number only;
//! - `testkit` (feature `testkit`): real ZooKeeper servers and ensembles for tests and examples.
//!
//! ```
//! # #[cfg(feature = "testkit")] {
//! use actix_zookeeper::prelude::*;
//! use actix_zookeeper::testkit::ZkServer;
//!
//! let server = ZkServer::start().expect("ZooKeeper (apt-get install zookeeper)");
//! actix::System::new().block_on(async {
//!     let session = SessionHandle::start(SessionConfig::new(server.connect_string()).with_chroot("/doc"))?;
//!     session.create("/greeting", "hello", CreateMode::Persistent).await?;
//!     let node = session.get_data("/greeting").await?;
//!     assert_eq!(node.data, b"hello");
//!     session.close().await;
//!     Ok::<_, actix_zookeeper::Error>(())
//! })
//! .expect("the example runs");
//! # }
//! ```
//!
//! See `docs/architecture.md` for the actors, the data flow and the message catalogue.
#![deny(missing_docs)]

pub mod barrier;
pub mod cache;
pub mod counter;
pub mod election;
pub mod error;
pub mod events;
pub mod group;
#[cfg(feature = "cli")]
pub mod inspect;
pub mod lock;
pub(crate) mod metrics;
pub mod path;
pub mod queue;
pub mod recipe;
pub mod reply;
pub mod retry;
pub mod session;
pub mod tasks;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use error::{Error, Result};
#[cfg(feature = "tls")]
pub use session::TlsConfig;
pub use session::requests::{
    Acl, AuthId, Children, CreateMode, Created, NodeData, Op, OpResult, Permission, PersistentWatchMode, SessionInfo,
    SessionSnapshot, Stat,
};
pub use session::{
    RebuildPolicy, SessionActor, SessionConfig, SessionEvent, SessionHandle, SessionId, WatchEvent, WatchEventKind,
    WatchId,
};

/// The names most programs need.
pub mod prelude {
    pub use crate::error::{Error, Result};
    pub use crate::session::requests::{CreateMode, Op, OpResult, PersistentWatchMode};
    pub use crate::session::{RebuildPolicy, SessionConfig, SessionEvent, SessionHandle, WatchEvent, WatchEventKind};
}

/// The README's example, compiled as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
