//! Service discovery in curator-x-discovery's format: instances register, clients find them.
//!
//! Owns: [`ServiceDiscovery`] (the entry point), [`ServiceInstance`] and its JSON (Curator's,
//! byte for byte), [`Registration`] (an instance kept registered), [`ServiceCache`] (a live view
//! of a service's instances) and [`ServiceProvider`] (one instance per call, by a
//! [`ProviderStrategy`], skipping instances reported down). Does not own the upkeep of a node
//! (the [`persistent`](crate::persistent) module's) or the mechanics of a children cache (the
//! [`cache`](crate::cache) module's).
//!
//! ```text
//! <base>/<name>/<id>                       one instance: Curator's JSON; ephemeral for Dynamic
//! <base>/<name>/_c_<guid>-<id>NNNNNNNNNN   a DynamicSequential instance
//! ```
//!
//! `docs/recipes/discovery.md`, in the repository and the published package and reproduced
//! below, gives the protocol, the JSON, and the failure table, each row naming its test.
//!
//! Files: `instance.rs` (the instance), `format.rs` (its JSON), `config.rs`, `error.rs`,
//! `discovery.rs` (the entry point), `registration.rs`, `cache.rs` and `cache_handle.rs`
//! (the view), `messages.rs` (the view's requests and events), `provider.rs`, `strategy.rs`,
//! `down.rs`.
//!
#![doc = include_str!("../../docs/recipes/discovery.md")]

mod cache;
mod cache_handle;
mod config;
#[allow(clippy::module_inception)]
mod discovery;
mod down;
mod error;
mod format;
mod instance;
mod messages;
mod provider;
mod registration;
mod strategy;

pub use cache::ServiceCache;
pub use cache_handle::ServiceCacheHandle;
pub use config::{DiscoveryConfig, ProviderConfig};
pub use discovery::{QueriedInstances, ServiceDiscovery, SkippedNode};
pub use down::DownInstancePolicy;
pub use error::DiscoveryError;
#[cfg(feature = "cli")]
pub(crate) use format::decode;
pub use instance::{DEFAULT_PAYLOAD_CLASS, Payload, ServiceInstance, ServiceType, UriPart, UriSpec};
pub use messages::{Instances, ServiceCacheEvent, Stop, Subscribe, WaitInitialized};
pub use provider::ServiceProvider;
pub use registration::Registration;
pub use strategy::ProviderStrategy;
