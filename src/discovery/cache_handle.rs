//! [`ServiceCacheHandle`]: async methods over a [`ServiceCache`], for programs that want answers
//! rather than messages.
//!
//! Owns: turning each request into one message and its reply into a `Result` (a stopped cache
//! is [`DiscoveryError::Cache`] holding [`CacheError::Stopped`]). Does not own any state: the actor does. A handle holds a strong
//! address: the cache lives while a handle (or another address) does.

use std::future::Future;
use std::time::Duration;

use actix::prelude::*;

use super::cache::ServiceCache;
use super::error::DiscoveryError;
use super::instance::ServiceInstance;
use super::messages::{Instances, ServiceCacheEvent, Stop, WaitInitialized};
use crate::cache::CacheError;
use crate::reply::ask;

/// A cloneable handle to the cache of one service (a [`ServiceCache`]); made by
/// [`ServiceDiscovery::cache`](super::ServiceDiscovery::cache).
#[derive(Clone, Debug)]
pub struct ServiceCacheHandle {
    addr: Addr<ServiceCache>,
    dir: String,
    health: crate::session::health::HealthTag,
}

impl ServiceCacheHandle {
    pub(super) fn new(
        addr: Addr<ServiceCache>,
        dir: String,
        health: crate::session::health::HealthTag,
    ) -> ServiceCacheHandle {
        ServiceCacheHandle { addr, dir, health }
    }

    fn stopped(&self) -> DiscoveryError {
        DiscoveryError::Cache(CacheError::Stopped { path: self.dir.clone() })
    }

    /// The service's instances now, answered from memory (empty before the first load: see
    /// [`wait_initialized`](Self::wait_initialized)).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read of memory.
    pub fn instances(&self) -> impl Future<Output = Result<Vec<ServiceInstance>, DiscoveryError>> + 'static {
        ask(&self.addr, Instances, self.stopped())
    }

    /// Resolves once the first load is complete, at most `timeout` if given.
    ///
    /// # Cancel safety
    /// Cancel-safe: a wait.
    pub fn wait_initialized(
        &self,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<(), DiscoveryError>> + 'static {
        let waited = ask(&self.addr, WaitInitialized { timeout }, self.stopped());
        async move { waited.await? }
    }

    crate::recipe::handle::handle_basics!(ServiceCache => ServiceCacheEvent, subscribed: ", what is held already first", health: "A service cache's entry is its view's (kind `cache`, at the service's path).");

    /// Stops the cache; resolves once it has stopped.
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        self.addr.do_send(Stop);
        crate::stop::stopped(&self.addr)
    }
}
