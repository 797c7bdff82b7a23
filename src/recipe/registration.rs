//! Registering under a fixed name: an ephemeral node that is ours, or a clear "taken".
//!
//! Owns: creating `<node>` as an ephemeral of the current session, adopting a node our own
//! session made (a create whose reply was lost), refusing one of another live session, and
//! removing ours again without ever removing another session's node of the same name.
//! Used by the task worker's registration and the group member's membership.

use std::future::Future;

use crate::CreateMode;
use crate::error::Error;
use crate::recipe::fencing::delete_fenced;
use crate::session::{PinnedSession, SessionHandle};

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

/// Deletes `node` if it is the registration of the pinned session, and nothing else.
///
/// The name is fixed, so once our session has ended the node there may be another process's
/// registration under the same id (issue 14, defect 8): the delete runs only on our own session,
/// and only for a node that session owns (`delete_fenced` by its czxid). Once our session has
/// ended, our node went with it and nothing is sent.
pub(crate) async fn deregister(session: PinnedSession, node: String) -> Result<(), Error> {
    let mut backoff = crate::retry::RetryPolicy::default().backoff();
    loop {
        let current = session.handle().session().await;
        let Some(current) = current.filter(|c| c.generation == session.generation()) else {
            return Ok(());
        };
        match session.exists(&node).await {
            Ok(Some(stat)) if stat.ephemeral_owner == current.session_id.0 => {
                return delete_fenced(session, node, stat.czxid).await.map(|_| ());
            }
            Ok(_) | Err(Error::SessionLost { .. }) => return Ok(()),
            Err(error) if error.is_final() => return Err(error),
            Err(_) => tokio::time::sleep(backoff.next_delay()).await,
        }
    }
}
