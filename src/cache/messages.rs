//! What a cache is asked, and what it tells its subscribers.

use std::collections::BTreeMap;

use actix::Message;

use crate::error::Error;
use crate::session::requests::Stat;

/// A node as the cache holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedNode {
    /// Its data; `None` when the cache keeps stats only.
    pub data: Option<Vec<u8>>,
    /// Its stat as of its last read (after its last data change).
    pub stat: Stat,
}

/// What changed in the cache, told in the past tense. For each node, events come in the order
/// the server applied the changes (a quick series of changes may be seen as fewer updates, the
/// last one carrying the latest data).
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
#[non_exhaustive]
pub enum CacheEvent {
    /// A node appeared in the cache (during the initial load, or created later).
    NodeAdded {
        /// Its full path (as the session sees it, i.e. under its chroot).
        path: String,
        /// Its data (`None`: stats only).
        data: Option<Vec<u8>>,
        /// Its stat.
        stat: Stat,
    },
    /// A node's data changed.
    NodeUpdated {
        /// Its full path.
        path: String,
        /// The new data (`None`: stats only).
        data: Option<Vec<u8>>,
        /// The new stat.
        stat: Stat,
    },
    /// A node left the cache (deleted).
    NodeRemoved {
        /// Its full path.
        path: String,
    },
    /// A node in the cache's scope cannot be read for good (a final error such as `NoAuth`:
    /// another client's ACL denies READ). It is left out of the cache (or kept as last seen, if
    /// it was readable before), told once until it can be read again, and the load or re-sync
    /// completes on the rest.
    NodeSkipped {
        /// Its full path.
        path: String,
        /// Why it cannot be read.
        error: Error,
    },
    /// The initial load is complete: every node present at the start was reported.
    CacheInitialized,
    /// After a reconnect or a new session, the cache re-read everything and reported exactly
    /// the differences (what changed while events could have been missed).
    CacheResynced,
    /// The cache cannot work (e.g. no permission to watch its path); it stops.
    CacheFailed {
        /// What went wrong.
        error: Error,
    },
}

/// The cached node at `path`, answered from memory.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Option<CachedNode>")]
pub struct Get {
    /// The node's full path.
    pub path: String,
}

/// Everything the cache holds, by path, answered from memory.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "BTreeMap<String, CachedNode>")]
pub struct Snapshot;

pub use crate::events::Subscribe;

pub use crate::stop::Stop;
