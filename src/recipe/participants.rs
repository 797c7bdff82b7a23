//! Who stands in a contender directory: participant ids in line order, read from ZooKeeper.
//!
//! Owns: reading a queue-shaped recipe's directory (lock, semaphore leases, election) as the list
//! of participant ids its nodes carry, first in line first. Does not own what "first" means for
//! a recipe (holder, leader) or any caching: every call reads the server.

use crate::error::Error;
use crate::path;
use crate::session::SessionHandle;

/// The participant ids stored in the nodes of `dir`, in sequence order; empty when the directory
/// does not exist. Nodes that leave while being read are skipped.
pub(crate) async fn read_participants(session: SessionHandle, dir: String) -> Result<Vec<String>, Error> {
    let names = match session.children(&dir).await {
        Ok(children) => path::sequential_in_order(children.names),
        Err(Error::NoNode { .. }) => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    // All reads are sent before any is awaited: one round trip for all of them.
    let reads: Vec<_> = names.iter().map(|n| session.get_data(&path::join(&dir, n))).collect();
    let mut ids = Vec::with_capacity(reads.len());
    for read in reads {
        match read.await {
            Ok(node) => ids.push(String::from_utf8_lossy(&node.data).into_owned()),
            Err(Error::NoNode { .. }) => {} // left meanwhile
            Err(err) => return Err(err),
        }
    }
    Ok(ids)
}

/// The id in the first node of `dir` (the holder, the leader); `None` when nobody stands in line.
/// Looks again when the first node leaves between the listing and its read.
pub(crate) async fn read_first(session: SessionHandle, dir: String) -> Result<Option<String>, Error> {
    loop {
        let names = match session.children(&dir).await {
            Ok(children) => path::sequential_in_order(children.names),
            Err(Error::NoNode { .. }) => return Ok(None),
            Err(err) => return Err(err),
        };
        let Some(first) = names.first() else { return Ok(None) };
        match session.get_data(&path::join(&dir, first)).await {
            Ok(node) => return Ok(Some(String::from_utf8_lossy(&node.data).into_owned())),
            Err(Error::NoNode { .. }) => continue,
            Err(err) => return Err(err),
        }
    }
}
