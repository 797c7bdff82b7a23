//! What a shared value is asked, and what it tells its subscribers.

use actix::Message;

use super::error::SharedValueError;

/// A value and the version of the node it was read from (Curator's `VersionedValue<byte[]>`),
/// plus which node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VersionedValue {
    /// The value's bytes.
    pub value: Vec<u8>,
    /// The node's data version when it was read (or written).
    pub version: i32,
    /// Which node that version belongs to: its `czxid` (a node deleted and created again starts
    /// its versions at 0 again). 0 for a guess: then only the version is compared, as in Curator.
    pub czxid: i64,
}

impl VersionedValue {
    /// A value and version not read from the node: compared by version only.
    pub fn guess(value: impl Into<Vec<u8>>, version: i32) -> VersionedValue {
        VersionedValue { value: value.into(), version, czxid: 0 }
    }
}

/// The current value: from the watched copy while it is current, else read now.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<VersionedValue, SharedValueError>")]
pub struct GetValue;

/// Write `value` only if the node is still at `expected.version` and is still the node
/// `expected` was read from (Curator's `trySetValue(previous, newValue)`). `Ok(false)`: someone
/// wrote first; read again and retry.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<bool, SharedValueError>")]
pub struct TrySetValue {
    /// The new value.
    pub value: Vec<u8>,
    /// The value (and version) this write replaces.
    pub expected: VersionedValue,
}

/// Write `value` whatever the node holds (Curator's `setValue`); creates the node if missing.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<VersionedValue, SharedValueError>")]
pub struct SetValue {
    /// The new value.
    pub value: Vec<u8>,
}

pub use crate::events::Subscribe;

pub use crate::stop::Stop;

/// The value changed. Sent in version order, never twice for one version; when changes come
/// faster than a read, intermediate versions are skipped (the newest is always sent).
#[derive(Message, Debug, Clone, PartialEq, Eq, Hash)]
#[rtype(result = "()")]
pub struct ValueChanged {
    /// The new value.
    pub value: Vec<u8>,
    /// The node's version holding it.
    pub version: i32,
    /// The node's `czxid`.
    pub czxid: i64,
}

impl From<ValueChanged> for VersionedValue {
    fn from(changed: ValueChanged) -> Self {
        VersionedValue { value: changed.value, version: changed.version, czxid: changed.czxid }
    }
}
