//! How a [`PersistentNode`](super::PersistentNode) behaves.

use crate::retry::RetryPolicy;
use crate::session::requests::CreateMode;

/// The node a [`PersistentNode`](super::PersistentNode) keeps: its path, create mode and data.
#[derive(Debug, Clone)]
#[must_use]
pub struct PersistentNodeConfig {
    pub(super) path: String,
    pub(super) mode: CreateMode,
    pub(super) data: Vec<u8>,
    pub(super) protected: bool,
    pub(super) retry: Option<RetryPolicy>,
    /// Whether a persistent node in the way of an ephemeral one is deleted and made again in
    /// our mode (service discovery, as Curator's registration) rather than taken over.
    pub(super) replace_persistent: bool,
    /// A TTL node's upkeep (`PersistentTtlNode`): its TTL, for the child touched every half of it;
    /// the node is kept at stop, left to its TTL.
    pub(super) touched: Option<std::time::Duration>,
}

impl PersistentNodeConfig {
    /// The node at `path` (for a sequential mode: the prefix the number is appended to) in
    /// `mode`, with no data. Sequential modes are protected (see
    /// [`with_protection`](Self::with_protection)).
    pub fn new(path: impl Into<String>, mode: CreateMode) -> Self {
        PersistentNodeConfig {
            path: path.into(),
            mode,
            data: Vec::new(),
            protected: mode.is_sequential(),
            retry: None,
            replace_persistent: false,
            touched: None,
        }
    }

    crate::builder::setters! {
        /// The node's data.
        with_data(data: impl Into<Vec<u8>>) => into;
    }

    /// Curator's protection: the node's name starts with `_c_<guid>-`, so that a create whose
    /// reply was lost is found by its GUID and not made twice. Always on for sequential modes
    /// (a second create would make a second node); optional for the others.
    pub fn with_protection(mut self, protected: bool) -> Self {
        self.protected = protected || self.mode.is_sequential();
        self
    }

    crate::builder::setters! {
        /// How failed requests are retried; default: the session's policy. Creating the node again
        /// after it is lost is never given up while the actor runs.
        with_retry(retry: RetryPolicy) => some;
    }

    /// An ephemeral node that finds a node no session owns (persistent, container, TTL) at its
    /// path deletes it (by its version) and is created in its own mode, as Curator's service
    /// registration does: taken over, it would stay after our session. One with children
    /// cannot be deleted: the node fails (`NotEmpty`).
    pub(crate) fn replacing_persistent(mut self) -> Self {
        self.replace_persistent = true;
        self
    }

    /// The path (or prefix) given.
    pub fn path(&self) -> &str {
        &self.path
    }
}
