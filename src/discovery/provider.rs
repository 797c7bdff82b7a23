//! [`ServiceProvider`]: picks one instance of a service for each call (Curator's
//! `ServiceProvider`).
//!
//! Owns: choosing among the cache's instances those a caller may use (enabled, not down) and
//! handing them to the strategy. Does not own the instances (the [`ServiceCache`](super::ServiceCache)),
//! the strategies (`strategy.rs`) or the down-instance rule (`down.rs`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::debug;

use super::cache_handle::ServiceCacheHandle;
use super::config::ProviderConfig;
use super::down::DownInstances;
use super::error::DiscoveryError;
use super::instance::ServiceInstance;
use super::strategy::Picker;

/// Picks instances of one service; made by
/// [`ServiceDiscovery::provider`](super::ServiceDiscovery::provider), once its cache has loaded.
/// Clones share the strategy's state and the errors noted.
#[derive(Clone, Debug)]
pub struct ServiceProvider {
    cache: ServiceCacheHandle,
    state: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct State {
    picker: Picker,
    down: DownInstances,
}

impl ServiceProvider {
    pub(super) fn new(cache: ServiceCacheHandle, config: ProviderConfig) -> ServiceProvider {
        let state = State { picker: Picker::new(config.strategy), down: DownInstances::new(config.down) };
        ServiceProvider { cache, state: Arc::new(Mutex::new(state)) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is consistent after any panic that could poison it (plain assignments).
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// One instance to use now, picked by the strategy among the enabled instances not down;
    /// `None` when there is none. Answered from the cache's memory.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read of memory (a round-robin turn is taken only when answered).
    pub async fn get_instance(&self) -> Result<Option<ServiceInstance>, DiscoveryError> {
        let candidates = self.all_instances().await?;
        let picked = self.state().picker.pick(&candidates);
        debug!(service = ?picked.as_ref().map(|i| &i.name), id = ?picked.as_ref().map(|i| &i.id), "picked");
        Ok(picked)
    }

    /// Every instance a caller may use now: enabled and not down, in node-name order.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read of memory.
    pub async fn all_instances(&self) -> Result<Vec<ServiceInstance>, DiscoveryError> {
        let mut instances = self.cache.instances().await?;
        let now = Instant::now();
        let mut state = self.state();
        instances.retain(|instance| instance.enabled && !state.down.is_down(instance, now));
        Ok(instances)
    }

    /// `instance` failed a caller: after the policy's threshold of errors it is skipped until the
    /// policy's timeout after its first error (an instance is known by all its fields, as in
    /// Curator: an update makes it another).
    pub fn note_error(&self, instance: &ServiceInstance) {
        self.state().down.note_error(instance, Instant::now());
    }

    /// The cache the provider picks from.
    pub fn cache(&self) -> &ServiceCacheHandle {
        &self.cache
    }

    /// Stops the provider's cache; resolves once it has stopped. Clones stop with it.
    pub fn stop(&self) -> impl std::future::Future<Output = ()> + 'static {
        self.cache.stop()
    }
}
