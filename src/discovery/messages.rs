//! Requests to a [`ServiceCache`](super::ServiceCache) (imperative) and what it tells its
//! subscribers (past tense).

use std::time::Duration;

use actix::Message;

use super::error::DiscoveryError;
use super::instance::ServiceInstance;
use crate::error::Error;

/// What changed among a service's instances. For each instance node, events come in the order
/// the server applied the changes.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
#[non_exhaustive]
pub enum ServiceCacheEvent {
    /// An instance is registered (seen at the first load, or registered later).
    InstanceAdded {
        /// The instance.
        instance: ServiceInstance,
    },
    /// An instance's registration changed (an update).
    InstanceUpdated {
        /// The instance as it is now.
        instance: ServiceInstance,
    },
    /// An instance is gone: unregistered, or its session ended (`Dynamic`), or its node now
    /// holds what is not an instance.
    InstanceRemoved {
        /// The instance as it was last seen.
        instance: ServiceInstance,
    },
    /// A node among the instances cannot be read as one (see
    /// [`DiscoveryError::Unreadable`]): it is left out, and the others are served.
    InstanceUnreadable {
        /// Why.
        error: DiscoveryError,
    },
    /// The first load is complete: every instance registered at the start was reported.
    CacheInitialized,
    /// After a reconnect or a new session, the instances were read again and exactly the
    /// differences were reported.
    CacheResynced,
    /// The cache cannot work (e.g. no permission to watch the service's path); it stops.
    CacheFailed {
        /// What went wrong.
        error: Error,
    },
}

/// The service's instances now, in the order of their node names, answered from memory.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Vec<ServiceInstance>")]
pub struct Instances;

/// Resolves once the first load is complete (at once if it is), or fails after `timeout`.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<(), DiscoveryError>")]
pub struct WaitInitialized {
    /// How long to wait; `None`: until loaded or the cache stops.
    pub timeout: Option<Duration>,
}

pub use crate::events::Subscribe;

pub use crate::stop::Stop;
