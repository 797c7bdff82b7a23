//! [`revoke`]: asking a lock participant to let go, as Curator's `Revoker` does.
//!
//! Owns: the request (`setData <node> "__REVOKE__"`, the bytes Curator's lock recipes look
//! for) and what it answers. Does not own hearing it: a [revocable](super::LockConfig::revocable)
//! participant's contender watches its own node and reports
//! [`LockEvent::RevocationRequested`](super::LockEvent::RevocationRequested); what to do about
//! it is its subscriber's choice.

use tracing::{debug, instrument};

use super::error::LockError;
use crate::error::Error;
use crate::recipe::REVOKE_MESSAGE;
use crate::session::SessionHandle;

/// What [`revoke`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Revocation {
    /// The request was written into the node: its participant hears it if it is revocable (a
    /// participant that is not never does).
    Requested,
    /// No such node: its participant released, left the line or lost its session already.
    NoSuchNode,
}

/// Asks the participant whose lock node is `node` (a full path, as in
/// [`LockGrant::node`](super::LockGrant) or a listing of the lock's directory) to let go, by
/// writing Curator's revocation message into it. Works on Curator's `InterProcessMutex` and
/// read/write lock nodes made revocable, and on this crate's [revocable](super::LockConfig::revocable)
/// locks. Whether the participant releases is up to it.
///
/// # Cancel safety
/// The write is sent when this is called: dropping the future does not withdraw it; only its
/// answer is lost.
#[instrument(name = "zk.lock.revoke", skip(session))]
pub fn revoke(
    session: &SessionHandle,
    node: &str,
) -> impl std::future::Future<Output = Result<Revocation, LockError>> + 'static + use<> {
    let written = session.set_data(node, REVOKE_MESSAGE, None);
    let node = node.to_owned();
    async move {
        match written.await {
            Ok(_) => Ok(Revocation::Requested),
            Err(Error::NoNode { .. }) => {
                debug!(%node, "nothing to revoke: the node is gone");
                Ok(Revocation::NoSuchNode)
            }
            Err(err) => Err(err.into()),
        }
    }
}
