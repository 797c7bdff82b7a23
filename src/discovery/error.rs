//! Why a service-discovery request failed.

use std::time::Duration;

use crate::cache::CacheError;
use crate::error::Error;
use crate::persistent::PersistentNodeError;

/// Why a [`ServiceDiscovery`](super::ServiceDiscovery) request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// The instance cannot be written: a Curator reader would fail on it (and on its whole
    /// service), or its name or id is not a node name. Nothing was written.
    #[error("the instance's {field} is invalid: {reason}")]
    InvalidInstance {
        /// The field at fault (`name`, `id`, `payload`, `uri_spec`).
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An update names another instance than the registration's (its `name` or `id` differ).
    #[error("the update is for {name}/{id}, not for the registered {registered}")]
    NotThisInstance {
        /// The update's service name.
        name: String,
        /// The update's id.
        id: String,
        /// `<name>/<id>` of the registration.
        registered: String,
    },
    /// Another live session holds this instance's node (another process registered the same
    /// id, or an earlier process of ours whose session has not expired yet). Unlike Curator,
    /// which deletes it, we leave it: nothing was written, and no registration is kept.
    #[error("instance {id} of {name} is registered by another live session")]
    IdTaken {
        /// The service.
        name: String,
        /// The instance id.
        id: String,
    },
    /// A registration did not complete, or a provider's cache did not load, within the time
    /// given ([`DiscoveryConfig::with_timeout`](super::DiscoveryConfig::with_timeout)); nothing
    /// stays registered or running.
    #[error("{what} did not complete within {after:?}")]
    Timeout {
        /// What did not complete (`registering <name>/<id>`, `loading <name>`).
        what: String,
        /// The time given.
        after: Duration,
    },
    /// An instance node cannot be read as an instance (not Curator's JSON, or a value out of
    /// range). Caches and providers skip it; a query by id returns this.
    #[error("{path} is not a readable service instance: {reason}")]
    Unreadable {
        /// The node's path.
        path: String,
        /// Why, in a few words.
        reason: String,
    },
    /// The registration's node could not be kept (see [`PersistentNodeError`]).
    #[error(transparent)]
    Registration(#[from] PersistentNodeError),
    /// The service cache failed or has stopped.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The service cache cannot work (e.g. no permission to watch the service's path).
    #[error("the cache of service {name} failed: {source}")]
    CacheFailed {
        /// The service.
        name: String,
        /// Why.
        source: Error,
    },
    /// A ZooKeeper request failed.
    #[error(transparent)]
    ZooKeeper(#[from] Error),
}
