//! [`ServiceDiscovery`]: the entry point — register instances, query services, and make caches
//! and providers (Curator's `ServiceDiscovery`).
//!
//! Owns: the base path and what each call needs from it. Does not own any state: every
//! registration, cache and provider it makes is its own actor or handle.

use std::future::Future;

use super::cache::ServiceCache;
use super::cache_handle::ServiceCacheHandle;
use super::config::{DiscoveryConfig, ProviderConfig};
use super::error::DiscoveryError;
use super::format;
use super::instance::ServiceInstance;
use super::provider::ServiceProvider;
use super::registration::Registration;
use crate::error::Error;
use crate::path;
use crate::recipe::shell::start_tagged;
use crate::session::SessionHandle;

/// Services under one base path, on one session.
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::discovery::DiscoveryError> {
/// use actix_zookeeper::discovery::{DiscoveryConfig, ProviderConfig, ServiceDiscovery, ServiceInstance};
///
/// let discovery = ServiceDiscovery::new(session, DiscoveryConfig::new("/services"))?;
/// let me = ServiceInstance::new("billing", "host-a").with_address("10.0.0.7").with_port(8080);
/// let registration = discovery.register(me).await?; // kept while `registration` lives
///
/// let provider = discovery.provider("billing", ProviderConfig::new()).await?;
/// if let Some(instance) = provider.get_instance().await? {
///     println!("calling {:?}:{:?}", instance.address, instance.port);
/// }
/// registration.unregister().await?; // Err names a node that stays
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ServiceDiscovery {
    session: SessionHandle,
    config: DiscoveryConfig,
}

impl ServiceDiscovery {
    /// Services under `config`'s base path. [`DiscoveryError::ZooKeeper`] for an invalid path.
    pub fn new(session: SessionHandle, config: DiscoveryConfig) -> Result<ServiceDiscovery, DiscoveryError> {
        path::validate(&config.base_path, false)?;
        Ok(ServiceDiscovery { session, config })
    }

    fn service_dir(&self, name: &str) -> Result<String, DiscoveryError> {
        path::validate_name(name).map_err(|reason| DiscoveryError::InvalidInstance { field: "name", reason })?;
        Ok(path::join(&self.config.base_path, name))
    }

    /// Registers `instance` at `<base>/<name>/<id>` in its service type's mode, and keeps it
    /// registered (again after a new session, or after someone deletes it) while the returned
    /// [`Registration`] lives. Resolves once its node exists.
    ///
    /// Errors: [`DiscoveryError::InvalidInstance`] (nothing is written),
    /// [`DiscoveryError::IdTaken`] (another live session holds the id: left alone),
    /// [`DiscoveryError::Timeout`], and the node's [`DiscoveryError::Registration`] failures.
    ///
    /// # Cancel safety
    /// Dropping the future unregisters: a node already made is deleted.
    pub fn register(
        &self,
        instance: ServiceInstance,
    ) -> impl Future<Output = Result<Registration, DiscoveryError>> + 'static {
        let (session, base, timeout) = (self.session.clone(), self.config.base_path.clone(), self.config.timeout);
        async move { Registration::register(session, &base, instance, timeout).await }
    }

    /// The names of the services registered (the children of the base path).
    pub async fn query_for_names(&self) -> Result<Vec<String>, DiscoveryError> {
        match self.session.children(&self.config.base_path).await {
            Ok(children) => Ok(children.names),
            Err(Error::NoNode { .. }) => Ok(Vec::new()),
            Err(error) => Err(error.into()),
        }
    }

    /// The instances of service `name` now, read from the server; a node that is not an
    /// instance is left out (unlike Curator, which fails the whole query) and logged at `warn`
    /// with why: [`query_for_instances_and_skipped`](Self::query_for_instances_and_skipped) says
    /// which nodes were skipped.
    pub async fn query_for_instances(&self, name: &str) -> Result<Vec<ServiceInstance>, DiscoveryError> {
        let queried = self.query_for_instances_and_skipped(name).await?;
        for skipped in &queried.skipped {
            tracing::warn!(path = %skipped.path, reason = %skipped.reason, "not a service instance; skipped");
        }
        Ok(queried.instances)
    }

    /// The instances of service `name` now, and the nodes under it that are not instances
    /// (each with why). A node deleted between the listing and its read is neither.
    pub async fn query_for_instances_and_skipped(&self, name: &str) -> Result<QueriedInstances, DiscoveryError> {
        let dir = self.service_dir(name)?;
        let ids = match self.session.children(&dir).await {
            Ok(children) => children.names,
            Err(Error::NoNode { .. }) => return Ok(QueriedInstances::default()),
            Err(error) => return Err(error.into()),
        };
        // Every read is sent before the first is awaited: one round trip, not one per instance.
        let reads: Vec<_> = ids.iter().map(|id| self.read(&path::join(&dir, id))).collect();
        let mut queried = QueriedInstances { instances: Vec::with_capacity(ids.len()), skipped: Vec::new() };
        for read in reads {
            match read.await {
                Ok(Some(instance)) => queried.instances.push(instance),
                Ok(None) => {}
                Err(DiscoveryError::Unreadable { path, reason }) => queried.skipped.push(SkippedNode { path, reason }),
                Err(error) => return Err(error),
            }
        }
        Ok(queried)
    }

    /// Instance `id` of service `name`, `None` if it is not registered;
    /// [`DiscoveryError::Unreadable`] for a node that is not an instance.
    pub async fn query_for_instance(&self, name: &str, id: &str) -> Result<Option<ServiceInstance>, DiscoveryError> {
        let dir = self.service_dir(name)?;
        path::validate_name(id).map_err(|reason| DiscoveryError::InvalidInstance { field: "id", reason })?;
        self.read(&path::join(&dir, id)).await
    }

    /// Reads `node` as an instance; the request is sent when this is called.
    fn read(
        &self,
        node: &str,
    ) -> impl Future<Output = Result<Option<ServiceInstance>, DiscoveryError>> + 'static + use<> {
        let (sent, node) = (self.session.get_data(node), node.to_owned());
        async move {
            match sent.await {
                Ok(read) => format::decode(&read.data)
                    .map(Some)
                    .map_err(|reason| DiscoveryError::Unreadable { path: node, reason }),
                Err(Error::NoNode { .. }) => Ok(None),
                Err(error) => Err(error.into()),
            }
        }
    }

    /// A live cache of service `name`'s instances, started on the current Arbiter.
    pub fn cache(&self, name: &str) -> Result<ServiceCacheHandle, DiscoveryError> {
        let dir = self.service_dir(name)?;
        let (cache, health) = start_tagged(ServiceCache::new(self.session.clone(), &self.config.base_path, name)?);
        Ok(ServiceCacheHandle::new(cache, dir, health))
    }

    /// A provider of service `name`'s instances, once its cache has loaded (at most the
    /// configured timeout: [`DiscoveryError::Timeout`], and the cache is stopped).
    ///
    /// # Cancel safety
    /// Dropping the future stops the provider's cache.
    pub fn provider(
        &self,
        name: &str,
        config: ProviderConfig,
    ) -> impl Future<Output = Result<ServiceProvider, DiscoveryError>> + 'static {
        let cache = self.cache(name);
        let timeout = self.config.timeout;
        async move {
            let cache = cache?;
            if let Err(error) = cache.wait_initialized(Some(timeout)).await {
                cache.stop().await;
                return Err(error);
            }
            Ok(ServiceProvider::new(cache, config))
        }
    }
}

/// What [`ServiceDiscovery::query_for_instances_and_skipped`] read.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct QueriedInstances {
    /// The instances, in the listing's order.
    pub instances: Vec<ServiceInstance>,
    /// The nodes that are not instances.
    pub skipped: Vec<SkippedNode>,
}

/// A node under a service that is not an instance (not JSON, or not Curator's instance
/// format).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedNode {
    /// The node's path.
    pub path: String,
    /// Why, in a few words.
    pub reason: String,
}
