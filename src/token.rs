//! [`FencingToken`]: the number a grant is fenced by.
//!
//! Owns: the token type and how it prints. Does not own making or checking tokens (the recipes'
//! `guarded.rs` and `fence.rs`).

use std::fmt;

/// The fencing token of a grant: the `czxid` (creating transaction id) of the node that won.
///
/// A zxid grows across ZooKeeper leader changes and across re-created parents, unlike a node's
/// sequence number, so a later grant always carries a larger token. Hand it to the resource you
/// protect and have it reject writes that carry a smaller token than one it has seen.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(pub i64);

/// The same number as `Display` (the zxid in hex, as ZooKeeper's logs and `zk-inspect` print
/// it), so that a token in a `{:?}` of an event reads like the one in a log line.
impl fmt::Debug for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FencingToken({:#x})", self.0)
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
