//! [`MasterFence`]: a master's proof of office, the crate's one [`Fence`] type. Every write a
//! master makes goes through [`Fence::guarded_write`], so a master that lost its session (or was
//! deposed while paused) cannot change anything.

use crate::recipe::Fence;

/// One master term: its election node, that node's version, and the term's fencing token.
pub type MasterFence = Fence;
