//! [`Feature`]: the server features newer than ZooKeeper 3.4, by name: what an
//! [`Error::Unsupported`](crate::error::Error::Unsupported) says is missing.
//!
//! Owns: the names and how they print. Does not own knowing or learning whether a server has
//! one (the session's `features.rs`).

use std::fmt;

/// A server feature newer than ZooKeeper 3.4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Feature {
    /// `addWatch`: persistent and persistent-recursive watches (ZooKeeper 3.6).
    PersistentWatches,
    /// `create2`: a create answered with the new node's stat (ZooKeeper 3.5).
    Create2,
    /// Container nodes (ZooKeeper 3.5.1).
    Containers,
    /// TTL nodes (ZooKeeper 3.5.3, and only with `zookeeper.extendedTypesEnabled=true`).
    Ttl,
}

impl Feature {
    pub(crate) const ALL: [Feature; 4] =
        [Feature::PersistentWatches, Feature::Create2, Feature::Containers, Feature::Ttl];

    pub(crate) fn index(self) -> usize {
        match self {
            Feature::PersistentWatches => 0,
            Feature::Create2 => 1,
            Feature::Containers => 2,
            Feature::Ttl => 3,
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Feature::PersistentWatches => "persistent watches (addWatch, ZooKeeper 3.6)",
            Feature::Create2 => {
                "create2 (ZooKeeper 3.5; for an older server declare its version with SessionConfig::with_server_version)"
            }
            Feature::Containers => "container nodes (ZooKeeper 3.5.1)",
            Feature::Ttl => "TTL nodes (ZooKeeper 3.5.3 with zookeeper.extendedTypesEnabled=true)",
        })
    }
}
