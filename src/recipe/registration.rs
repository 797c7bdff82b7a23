//! Registering under a fixed name: an ephemeral node that is ours, or a clear "taken".
//!
//! Owns: creating `<node>` as an ephemeral of the current session, adopting a node our own
//! session made (a create whose reply was lost), and refusing one of another live session.
//! Removing ours again is [`delete_own_ephemeral`](super::fencing::delete_own_ephemeral).
//! Used by the task worker's registration and the group member's membership.

use std::future::Future;

use crate::CreateMode;
use crate::error::Error;
use crate::session::SessionHandle;

/// Why a registration was not made.
#[derive(Debug)]
pub(crate) enum RegisterError {
    /// Another live session holds the name.
    Taken,
    /// A ZooKeeper request failed.
    ZooKeeper(Error),
}

impl From<Error> for RegisterError {
    fn from(error: Error) -> Self {
        RegisterError::ZooKeeper(error)
    }
}

/// Creates the directories `parents` if missing, then `node` as an ephemeral node of the current
/// session with `data`; resolves to the node's `czxid`.
pub(crate) fn register_ephemeral(
    session: &SessionHandle,
    parents: Vec<String>,
    node: String,
    data: Vec<u8>,
) -> impl Future<Output = Result<i64, RegisterError>> + 'static + use<> {
    let session = session.clone();
    async move {
        let ensured: Vec<_> = parents.iter().map(|p| session.ensure_path(p)).collect();
        for done in ensured {
            done.await?;
        }
        let owner = session.session().await.map(|s| s.session_id);
        match session.create(&node, data, CreateMode::Ephemeral).await {
            Ok(created) => Ok(created.stat.czxid),
            Err(Error::NodeExists { .. }) => match (session.exists(&node).await?, owner) {
                (Some(stat), Some(owner)) if stat.ephemeral_owner == owner.0 => Ok(stat.czxid),
                _ => Err(RegisterError::Taken),
            },
            Err(error) => Err(error.into()),
        }
    }
}
