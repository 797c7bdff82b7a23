//! Fencing tokens: a number that grows with every grant, so a resource can refuse a stale holder.

use std::fmt;

/// The fencing token of a grant: the `czxid` (creating transaction id) of the node that won.
///
/// A zxid grows across ZooKeeper leader changes and across re-created parents, unlike a node's
/// sequence number, so a later grant always carries a larger token. Hand it to the resource you
/// protect and have it reject writes that carry a smaller token than one it has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(pub i64);

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
