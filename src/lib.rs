//! # actix-zookeeper
//!
//! ZooKeeper coordination for actix: what Apache Curator is to Java and kazoo to Python. Each
//! recipe is an actor or a cheap handle, and each outcome a typed message.
//!
//! One [`SessionActor`] owns the connection, and every recipe shares it through a cloneable
//! [`SessionHandle`]. The session survives disconnects, builds a new one on its own after expiry
//! ([`RebuildPolicy`]), and reports each change as a [`SessionEvent`]. The recipes:
//! - [`lock`] – [`LockHandle`], [`SemaphoreHandle`]: exclusive, read/write and counting locks;
//! - [`election`] – [`ElectionHandle`]: leader election, optionally running a leader actor;
//! - [`queue`] – [`Queue`](queue::Queue) and [`QueueConsumerHandle`], which feeds worker actors;
//! - [`tasks`] (master–worker) – [`TaskMasterHandle`], [`TaskWorkerHandle`], [`TaskClient`];
//! - [`cache`] – [`CacheHandle`]: one node, its children or a subtree, kept in memory;
//! - [`group`] – [`GroupMemberHandle`]: join a group and see who else is in it;
//! - [`counter`] – [`SharedCountHandle`]: a shared counter in Curator's format;
//! - [`atomic`] – [`DistributedAtomicLong`]: Curator's atomic long, optionally promoted to a lock;
//! - [`barrier`] – [`DistributedBarrier`], [`DistributedDoubleBarrier`];
//! - [`persistent`] – [`PersistentNodeHandle`]: a node kept in existence, any create mode;
//! - `inspect` (feature `cli`) – who holds, waits, leads and is queued, as `zk-inspect` prints;
//! - `testkit` (feature `testkit`) – real ZooKeeper servers, ensembles and faults for tests.
//!
//! Next: the README says how to add the crate and which features to turn on. Each recipe's
//! protocol and failure table are in `docs/recipes/` (in the repository and the published
//! package), and each recipe module's docs reproduce its file in full.
//!
//! ## Recipes in more detail
//!
//! - [`lock`]: Curator's layout, so Java and Rust services can share a lock; each grant carries
//!   a fencing token and offers guarded writes; revocation as Curator's `Revoker`;
//! - [`election`]: Curator's `LeaderLatch` layout; the leader-actor mode runs your actor only
//!   while you lead;
//! - [`queue`]: the `qn-` layout of ZooKeeper's and Curator's queues, with at-least-once
//!   consumers (claims, acks, redelivery, dead letters);
//! - [`tasks`]: an elected, fenced master assigns submitted tasks to registered workers and
//!   re-assigns those of workers that leave;
//! - [`cache`]: Curator's node, children and tree caches, re-synced after every reconnect;
//! - [`group`], [`counter`], [`barrier`]: Curator's `GroupMember`, `SharedCount` and barriers.
//!
//! ## The foundation
//!
//! - [`SessionActor`] / [`SessionHandle`]: one ZooKeeper session on its own Arbiter, typed
//!   requests that reach the server in the order sent, one-shot and persistent watches delivered
//!   as [`WatchEvent`] messages, explicit [`SessionEvent`]s (`Connected`, `Suspended`,
//!   `Reconnected`, `Expired`, `Closed`, `AuthFailed`) and a new session built on its own after
//!   expiry (the *generation* counts sessions);
//! - [`path`]: ZooKeeper's path rules and ordering of sequential nodes by sequence number only.
//!
//! ```
//! # #[cfg(feature = "testkit")] {
//! use actix_zookeeper::prelude::*;
//! use actix_zookeeper::testkit::ZkServer;
//!
//! let server = ZkServer::start().expect("ZooKeeper (apt-get install zookeeper)");
//! actix::System::new().block_on(async {
//!     let config = SessionConfig::new(server.connect_string()).with_chroot("/doc");
//!     let session = SessionHandle::start(config)?;
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
//!
//! [`LockHandle`]: lock::LockHandle
//! [`SemaphoreHandle`]: lock::SemaphoreHandle
//! [`ElectionHandle`]: election::ElectionHandle
//! [`QueueConsumerHandle`]: queue::QueueConsumerHandle
//! [`TaskMasterHandle`]: tasks::TaskMasterHandle
//! [`TaskWorkerHandle`]: tasks::TaskWorkerHandle
//! [`TaskClient`]: tasks::TaskClient
//! [`CacheHandle`]: cache::CacheHandle
//! [`GroupMemberHandle`]: group::GroupMemberHandle
//! [`SharedCountHandle`]: counter::SharedCountHandle
//! [`DistributedAtomicLong`]: atomic::DistributedAtomicLong
//! [`PersistentNodeHandle`]: persistent::PersistentNodeHandle
//! [`DistributedBarrier`]: barrier::DistributedBarrier
//! [`DistributedDoubleBarrier`]: barrier::DistributedDoubleBarrier
#![deny(missing_docs)]

pub mod atomic;
pub mod barrier;
mod builder;
pub mod cache;
pub mod counter;
pub mod discovery;
pub mod election;
pub mod error;
pub mod events;
mod feature;
pub mod group;
pub use session::health;
#[cfg(feature = "cli")]
pub mod inspect;
pub mod lock;
pub(crate) mod metrics;
pub mod path;
pub mod persistent;
pub mod queue;
pub mod recipe;
pub mod reply;
pub mod retry;
pub mod session;
pub mod shared;
pub mod stop;
pub mod tasks;
#[cfg(feature = "testkit")]
pub mod testkit;
mod token;

pub use error::{Error, Result};
#[cfg(feature = "tls")]
pub use session::TlsConfig;
pub use session::requests::{
    Acl, AuthId, Children, CreateMode, Created, NodeData, Op, OpResult, Permission, PersistentWatchMode, SessionInfo,
    SessionSnapshot, Stat,
};
pub use session::{
    RebuildPolicy, SessionActor, SessionConfig, SessionEvent, SessionHandle, SessionId, WatchEvent, WatchEventKind,
    WatchId, WatchRefusal,
};

/// The names most programs need: the session, each recipe's handle or actor with its config,
/// events and error, fencing tokens and the retry policy.
///
/// Messages are not here: their short names repeat from recipe to recipe (`queue::Stop` and
/// `election::Stop`, `lock::Subscribe` and the session's `Subscribe`, each recipe's
/// `Participants`), so they are used with their module's name, as `lock::Release`.
pub mod prelude {
    pub use crate::atomic::{AtomicError, AtomicLongConfig, DistributedAtomicLong};
    pub use crate::cache::{CacheActor, CacheConfig, CacheError, CacheEvent, CacheHandle};
    pub use crate::counter::{CountChanged, CounterError, SharedCount, SharedCountConfig, SharedCountHandle};
    pub use crate::election::{ElectionConfig, ElectionError, ElectionEvent, ElectionHandle, LeaderTerm};
    pub use crate::error::{Error, Result};
    pub use crate::events::EventStream;
    pub use crate::group::{GroupConfig, GroupError, GroupEvent, GroupMember, GroupMemberHandle};
    pub use crate::lock::{LockConfig, LockError, LockEvent, LockGrant, LockHandle, SemaphoreConfig, SemaphoreHandle};
    pub use crate::persistent::{PersistentNodeConfig, PersistentNodeError, PersistentNodeEvent, PersistentNodeHandle};
    pub use crate::queue::{ConsumerConfig, Delivery, Queue, QueueConsumerActor, QueueConsumerHandle, QueueError};
    pub use crate::recipe::{ConnectionPolicy, Fence, FenceError, FencingToken};
    pub use crate::retry::RetryPolicy;
    pub use crate::session::requests::{CreateMode, Op, OpResult, PersistentWatchMode};
    pub use crate::session::{
        RebuildPolicy, SessionConfig, SessionEvent, SessionHandle, WatchEvent, WatchEventKind, WatchRefusal,
    };
    pub use crate::tasks::{
        MasterEvent, TaskClient, TaskError, TaskMaster, TaskMasterConfig, TaskMasterHandle, TaskWorker,
        TaskWorkerConfig, TaskWorkerHandle, WorkerEvent,
    };
}

/// The README's example, compiled as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
