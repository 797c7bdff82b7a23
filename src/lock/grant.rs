//! [`LockGrant`]: what a lock or semaphore hands its holder, the crate's one [`Fence`] type.

use crate::recipe::Fence;

/// Proof of holding a lock (or a semaphore lease) at the time it was granted: the lock node that
/// won, its fencing token, and writes guarded by it ([`Fence::guarded_write`]).
pub type LockGrant = Fence;
