//! What a shared count is asked, and what it tells its subscribers.

use actix::Message;

use super::error::CounterError;

/// A count and the version of the node it was read from (ZooKeeper's data version: it grows by
/// one with every write to the node). Curator's `VersionedValue<Integer>`, plus which node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VersionedCount {
    /// The count.
    pub value: i32,
    /// The node's data version when the count was read (or written).
    pub version: i32,
    /// Which node that version belongs to: its `czxid`. A node deleted and created again starts
    /// its versions at 0 again, so a version alone could pass a compare-and-set on the new node.
    /// 0 for a guess ([`VersionedCount::guess`]): then only the version
    /// is compared, as in Curator.
    pub czxid: i64,
}

impl VersionedCount {
    /// A count and version not read from the node (say, "I expect a fresh node: 0 at version
    /// 0"): compared by version only.
    pub fn guess(value: i32, version: i32) -> VersionedCount {
        VersionedCount { value, version, czxid: 0 }
    }
}

/// The current count: from the actor's watched copy while that is known to be current (a
/// connected session, a watch armed, no change announced since the last read), else read from
/// ZooKeeper now.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<VersionedCount, CounterError>")]
pub struct GetCount;

/// Write `value` only if the node is still at `expected.version` (Curator's
/// `trySetCount(previous, newCount)`), and still the node `expected` was read from.
/// `Ok(false)`: someone wrote first (or the node was created again); read again and retry.
///
/// ZooKeeper cannot refuse a write by the node's `czxid`, only by its version: a node deleted
/// and created again *and* written up to the expected version while this request is on its way
/// would take the write. That is reported as [`CounterError::Recreated`], never `Ok(true)`.
///
/// `Ok(false)` may also come without a request to ZooKeeper, when the answer is already known:
/// `expected` is older than a version this actor has seen, its value disagrees with the value
/// seen at that version, or another `TrySetCount` at the same version is in flight from this
/// actor (one of them can win, and that one is already on its way).
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<bool, CounterError>")]
pub struct TrySetCount {
    /// The new count.
    pub value: i32,
    /// The count (and version) this write replaces.
    pub expected: VersionedCount,
}

/// Write `value` whatever the count is now (Curator's `setCount`). Returns what was written and
/// the version it got. Also repairs a node that does not hold a count.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<VersionedCount, CounterError>")]
pub struct SetCount {
    /// The new count.
    pub value: i32,
}

/// Add `by` to the count: [`GetCount`] and [`TrySetCount`], again until a write applies.
/// Returns the count written. Stops at the first error; after
/// [`CounterError::OutcomeUnknown`] the addition may have been applied.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<VersionedCount, CounterError>")]
pub struct AddCount {
    /// What to add (may be negative).
    pub by: i32,
}

pub use crate::events::Subscribe;

pub use crate::stop::Stop;

/// The count changed. Sent in version order, never twice for one version; when changes come
/// faster than a read, intermediate versions are skipped (the newest is always sent).
#[derive(Message, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[rtype(result = "()")]
pub struct CountChanged {
    /// The new count.
    pub value: i32,
    /// The node's version holding it.
    pub version: i32,
    /// The node's `czxid` (see [`VersionedCount::czxid`]).
    pub czxid: i64,
}

impl From<CountChanged> for VersionedCount {
    fn from(changed: CountChanged) -> Self {
        VersionedCount { value: changed.value, version: changed.version, czxid: changed.czxid }
    }
}
