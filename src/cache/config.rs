//! What a cache covers and what it keeps.

use crate::error::Error;
use crate::path;
use crate::retry::RetryPolicy;

/// Which nodes a cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheScope {
    /// The node at the path only (Curator's `NodeCache`).
    Node,
    /// The direct children of the path, not the path itself (Curator's `PathChildrenCache`).
    Children,
    /// The path and everything below it (Curator's `TreeCache` / `CuratorCache`), down to
    /// `max_depth` levels below the path when set (0: the path only).
    Tree {
        /// Deepest level kept, counted from the path (which is level 0).
        max_depth: Option<usize>,
    },
}

/// How a [`CacheActor`](super::CacheActor) is set up.
#[derive(Debug, Clone)]
pub struct CacheConfig {
    pub(crate) path: String,
    pub(crate) scope: CacheScope,
    pub(crate) keep_data: bool,
    pub(crate) retry: Option<RetryPolicy>,
}

impl CacheConfig {
    /// A cache of the subtree at `path` (scope [`CacheScope::Tree`] without a depth limit),
    /// keeping data and stats.
    pub fn new(path: impl Into<String>) -> Self {
        CacheConfig { path: path.into(), scope: CacheScope::Tree { max_depth: None }, keep_data: true, retry: None }
    }

    crate::builder::setters! {
        /// Which nodes to hold.
        with_scope(scope: CacheScope);

        /// Keep each node's data (default) or only its stat (cheaper for large payloads: the
        /// cache then reads with `exists`, not `getData`).
        with_data(keep_data: bool);

        /// How this cache retries a failed request; default: its session's policy
        /// ([`SessionConfig::with_retry`](crate::session::SessionConfig::with_retry)).
        with_retry(retry: RetryPolicy) => some;
    }

    /// The cached path.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        path::validate(&self.path, false)
    }

    /// The level of `node` below the cache's path (0 for the path itself), or `None` when it
    /// is not under the path.
    pub(crate) fn depth_of(&self, node: &str) -> Option<usize> {
        if node == self.path {
            return Some(0);
        }
        let rest =
            if self.path == "/" { node.strip_prefix('/') } else { node.strip_prefix(&self.path)?.strip_prefix('/') }?;
        if rest.is_empty() {
            return None;
        }
        Some(rest.split('/').count())
    }

    /// True when the cache holds `node` (given its depth).
    pub(crate) fn holds(&self, depth: usize) -> bool {
        match self.scope {
            CacheScope::Node => depth == 0,
            CacheScope::Children => depth == 1,
            CacheScope::Tree { max_depth } => max_depth.is_none_or(|max| depth <= max),
        }
    }

    /// True when the children of a node at `depth` may be held (so must be listed).
    pub(crate) fn lists_below(&self, depth: usize) -> bool {
        match self.scope {
            CacheScope::Node => false,
            CacheScope::Children => depth == 0,
            CacheScope::Tree { max_depth } => max_depth.is_none_or(|max| depth < max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_and_scope() {
        let tree = CacheConfig::new("/app");
        assert_eq!(tree.depth_of("/app"), Some(0));
        assert_eq!(tree.depth_of("/app/a/b"), Some(2));
        assert_eq!(tree.depth_of("/apple"), None);
        assert_eq!(tree.depth_of("/other"), None);
        let root = CacheConfig::new("/");
        assert_eq!(root.depth_of("/a"), Some(1));
        assert_eq!(root.depth_of("/"), Some(0));
        let children = CacheConfig::new("/app").with_scope(CacheScope::Children);
        assert!(!children.holds(0) && children.holds(1) && !children.holds(2));
        assert!(children.lists_below(0) && !children.lists_below(1));
        let shallow = CacheConfig::new("/app").with_scope(CacheScope::Tree { max_depth: Some(1) });
        assert!(shallow.holds(1) && !shallow.holds(2) && !shallow.lists_below(1));
    }
}
