//! Where a shared value lives: [`SharedValueConfig`].

use crate::retry::RetryPolicy;

/// The node of a [`SharedValue`](super::SharedValue), the value it is created with when
/// missing, and how failed reads are retried.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct SharedValueConfig {
    pub(super) path: String,
    pub(super) seed: Vec<u8>,
    pub(super) retry: Option<RetryPolicy>,
}

impl SharedValueConfig {
    /// The value at `path`, created empty when missing (Curator's `SharedValue(client, path,
    /// seedValue)`).
    pub fn new(path: impl Into<String>) -> Self {
        SharedValueConfig { path: path.into(), seed: Vec::new(), retry: None }
    }

    crate::builder::setters! {
        /// The bytes the node is created with when it is missing (at start, and after a deletion).
        with_seed(seed: impl Into<Vec<u8>>) => into;

        /// How failed reads are retried; default: the session's policy.
        with_retry(retry: RetryPolicy) => some;
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// Every field named: a setting added to the config must be passed on to the node.
impl From<SharedValueConfig> for crate::shared::NodeConfig<Vec<u8>> {
    fn from(config: SharedValueConfig) -> Self {
        let SharedValueConfig { path, seed, retry } = config;
        crate::shared::NodeConfig { path, seed, retry }
    }
}
