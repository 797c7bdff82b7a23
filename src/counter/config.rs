//! Where a shared count lives: [`SharedCountConfig`].

use crate::retry::RetryPolicy;

/// Where a [`SharedCount`](super::SharedCount) keeps its count, and what it starts with.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct SharedCountConfig {
    pub(super) path: String,
    pub(super) seed: i32,
    pub(super) retry: Option<RetryPolicy>,
}

impl SharedCountConfig {
    /// A count at `path` (relative to the session's chroot), seeded with 0.
    pub fn new(path: impl Into<String>) -> Self {
        SharedCountConfig { path: path.into(), seed: 0, retry: None }
    }

    crate::builder::setters! {
        /// The count the node is created with when it does not exist (Curator's `seedValue`). An
        /// existing node keeps its count.
        with_seed(seed: i32);

        /// How this count retries a failed request; default: its session's policy
        /// ([`SessionConfig::with_retry`](crate::session::SessionConfig::with_retry)).
        with_retry(retry: RetryPolicy) => some;
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The seed.
    pub fn seed(&self) -> i32 {
        self.seed
    }
}

/// Every field named: a setting added to the config must be passed on to the node.
impl From<SharedCountConfig> for crate::shared::NodeConfig<i32> {
    fn from(config: SharedCountConfig) -> Self {
        let SharedCountConfig { path, seed, retry } = config;
        crate::shared::NodeConfig { path, seed, retry }
    }
}
