//! Where a shared count lives: [`SharedCountConfig`].

/// Where a [`SharedCount`](super::SharedCount) keeps its count, and what it starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct SharedCountConfig {
    pub(super) path: String,
    pub(super) seed: i32,
}

impl SharedCountConfig {
    /// A count at `path` (relative to the session's chroot), seeded with 0.
    pub fn new(path: impl Into<String>) -> Self {
        SharedCountConfig { path: path.into(), seed: 0 }
    }

    /// The count the node is created with when it does not exist (Curator's `seedValue`). An
    /// existing node keeps its count.
    pub fn with_seed(mut self, seed: i32) -> Self {
        self.seed = seed;
        self
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
