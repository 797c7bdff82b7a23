//! How a [`ServiceDiscovery`](super::ServiceDiscovery) and its providers behave.

use std::time::Duration;

use super::down::DownInstancePolicy;
use super::strategy::ProviderStrategy;

/// Where services live and how long a registration or a provider's first load may take.
#[derive(Debug, Clone)]
#[must_use]
pub struct DiscoveryConfig {
    pub(super) base_path: String,
    pub(super) timeout: Duration,
}

impl DiscoveryConfig {
    /// Services under `base_path` (Curator's `basePath`): instance `id` of service `name` is
    /// `<base_path>/<name>/<id>`. Registrations and first loads wait up to 30 s.
    pub fn new(base_path: impl Into<String>) -> Self {
        DiscoveryConfig { base_path: base_path.into(), timeout: Duration::from_secs(30) }
    }

    crate::builder::setters! {
        /// How long [`register`](super::ServiceDiscovery::register) waits for the instance's node,
        /// and [`provider`](super::ServiceDiscovery::provider) for its cache's first load.
        with_timeout(timeout: Duration);
    }

    /// The base path given.
    pub fn base_path(&self) -> &str {
        &self.base_path
    }
}

/// How a [`ServiceProvider`](super::ServiceProvider) picks an instance.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct ProviderConfig {
    pub(super) strategy: ProviderStrategy,
    pub(super) down: DownInstancePolicy,
}

impl ProviderConfig {
    /// Round robin, with Curator's default down-instance policy.
    pub fn new() -> Self {
        ProviderConfig::default()
    }

    crate::builder::setters! {
        /// The strategy (default: [`ProviderStrategy::RoundRobin`], as Curator's).
        with_strategy(strategy: ProviderStrategy);

        /// When an instance reported with [`note_error`](super::ServiceProvider::note_error) is
        /// skipped (default: Curator's, 2 errors within 30 s).
        with_down_instance_policy(down: DownInstancePolicy);
    }
}
