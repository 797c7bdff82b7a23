//! Writes and deletes guarded by a node: a `multi` that checks the guarding nodes first
//! ([`guarded_multi`]), and deletes of our own nodes that touch only the node we made
//! ([`delete_fenced`], [`delete_own_ephemeral`]).
//!
//! Owns: the guard and what its failure means ([`GuardFailure`]). Does not own the token's type
//! (`token.rs`) or the grant that hands guarded writes out (`fence.rs`).

use std::future::Future;

use crate::error::Error;
use crate::retry::{Attempted, Backoff, retried};
use crate::session::requests::Stat;

/// Why a guarded write failed, and whether it may have applied all the same.
#[derive(Debug)]
pub(crate) enum GuardFailure {
    /// The guarding node at this index of the nodes checked is gone: the grant it stood for has
    /// ended, and the server refused the write, so nothing of it applied.
    Ended(usize),
    /// The write may or may not have applied ([`crate::error::Error::outcome_unknown`]): the connection
    /// dropped or the session expired while it was in flight. An expired session means the grant
    /// has ended too, but not that the write arrived after it did.
    Unknown(crate::error::Error),
    /// The write failed for another reason; nothing of it applied.
    ZooKeeper(crate::error::Error),
}

/// What a check op compares a node's version with to check only that the node exists.
pub(crate) const ANY_VERSION: i32 = -1;

/// `ops`, preceded by a check that each of `nodes` exists (at any version).
pub(crate) fn checked(nodes: &[&str], ops: Vec<crate::session::requests::Op>) -> Vec<crate::session::requests::Op> {
    let mut guarded: Vec<crate::session::requests::Op> = nodes
        .iter()
        .map(|node| crate::session::requests::Op::Check { path: (*node).to_owned(), version: ANY_VERSION })
        .collect();
    guarded.extend(ops);
    guarded
}

/// Applies `ops` atomically only while every one of `nodes` exists: the multi starts with a
/// check of each, so a holder whose grant ended (its node deleted with its session) writes
/// nothing. The checks' own results are dropped from the results, and a failing op's index
/// counts the caller's ops only.
pub(crate) fn guarded_multi(
    session: &crate::session::SessionHandle,
    nodes: &[&str],
    ops: Vec<crate::session::requests::Op>,
) -> impl std::future::Future<Output = Result<Vec<crate::session::requests::OpResult>, GuardFailure>> + 'static + use<>
{
    use crate::error::Error;
    let total = ops.len();
    let guarded = checked(nodes, ops);
    let checks = guarded.len() - total;
    let reply = session.multi(guarded);
    async move {
        match reply.await {
            Ok(results) => Ok(results.into_iter().skip(checks).collect()),
            Err(Error::Multi { index, source })
                if index < checks && matches!(*source, Error::NoNode { .. } | Error::BadVersion { .. }) =>
            {
                Err(GuardFailure::Ended(index))
            }
            // Index the caller's ops, not the checks we put in front of them.
            Err(Error::Multi { index, source }) => {
                Err(GuardFailure::ZooKeeper(Error::Multi { index: index.saturating_sub(checks), source }))
            }
            // Not `Ended` even for `SessionLost`: the server may have applied the multi just
            // before it expired the session, and saying "nothing was written" would be a lie.
            Err(err) if err.outcome_unknown() => Err(GuardFailure::Unknown(err)),
            Err(err) => Err(GuardFailure::ZooKeeper(err)),
        }
    }
}

/// What [`delete_fenced`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FencedDelete {
    /// Our node was there and this call deleted it.
    Deleted,
    /// No node of ours is there (none at all, or another one with the same name): nothing was
    /// deleted.
    NotOurs,
    /// The session the node belonged to has ended, and the node with it: nothing was sent on a
    /// later session.
    SessionEnded,
}

/// Deletes `path` only if it is the node created at `czxid`, and only on `session`'s session.
///
/// Fixed names come back: a claim, a registration or a member node deleted by its session's end
/// is soon re-created by somebody else, at version 0 like ours, so neither a version check nor
/// a plain retry can tell them apart. The creating zxid can, and a pinned session makes sure
/// the read and the delete happen while the node is still ours to delete: in our own session
/// nobody else deletes our node (everyone's deletes are fenced like this one), so the version
/// read is the version deleted. Retries through connection loss with backoff; a final error
/// ends it.
pub(crate) async fn delete_fenced(
    session: crate::session::PinnedSession,
    path: String,
    czxid: i64,
) -> Result<FencedDelete, crate::error::Error> {
    // Without the attempt limit: giving up would leave our node in the others' way until our
    // session ends.
    let backoff = session.handle().retry_policy().without_attempt_limit().backoff();
    let stat_of = |path: &str| session.exists(path);
    let delete_at = |path: &str, version| session.delete(path, Some(version));
    delete_created_at(path, czxid, backoff, Sessions::One, stat_of, delete_at).await
}

/// Which sessions a fenced delete's requests go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sessions {
    /// One session (a [`PinnedSession`](crate::session::PinnedSession)): its end ends the delete.
    One,
    /// Whichever is current (a [`SessionHandle`](crate::session::SessionHandle)), for a node no
    /// session owns: an expiry is one more interruption.
    Current,
}

/// Deletes `path` only while it is the node created at `czxid`: reads its stat and deletes
/// that version (`stat_of`, `delete_at`: on one session or on whichever is current), reading
/// again when the delete finds it changed (gone, it is no node of ours). Retries through
/// connection loss as `backoff` says; a final error ends it, and so does, when the requests go
/// to [`Sessions::One`], that session's end ([`FencedDelete::SessionEnded`]).
pub(crate) async fn delete_created_at<R, D>(
    path: String,
    czxid: i64,
    backoff: Backoff,
    sessions: Sessions,
    stat_of: impl Fn(&str) -> R,
    delete_at: impl Fn(&str, i32) -> D,
) -> Result<FencedDelete, Error>
where
    R: Future<Output = Result<Option<Stat>, Error>>,
    D: Future<Output = Result<(), Error>>,
{
    retried(backoff, || async {
        loop {
            let deleted = match stat_of(&path).await {
                Ok(Some(stat)) if stat.czxid == czxid => delete_at(&path, stat.version).await,
                Ok(_) => return Attempted::Done(FencedDelete::NotOurs),
                Err(err) => Err(err),
            };
            return match deleted {
                Ok(()) => Attempted::Done(FencedDelete::Deleted),
                Err(Error::SessionLost { .. }) if sessions == Sessions::One => {
                    Attempted::Done(FencedDelete::SessionEnded)
                }
                // Gone between the read and the delete (our own earlier delete whose reply was
                // lost): what a read would find now. A read could still fail, and report a node
                // that is gone as not deleted.
                Err(Error::NoNode { .. }) => Attempted::Done(FencedDelete::NotOurs),
                // Changed between the read and the delete: read again, at once.
                Err(Error::BadVersion { .. }) => continue,
                Err(err) if err.is_final() => Attempted::Failed(err),
                Err(err) => {
                    tracing::debug!(%path, error = %err, "fenced delete interrupted; retrying");
                    Attempted::Again(err)
                }
            };
        }
    })
    .await
}

/// [`delete_own_ephemeral`] on a task of its own, for an actor that stops or gives up: it
/// outlives the actor (a stopping actor's futures are dropped, and a request nobody awaits is
/// never sent).
pub(crate) fn delete_own_ephemeral_detached(session: crate::session::PinnedSession, path: String) {
    actix::spawn(async move {
        let _ = delete_own_ephemeral(session, path).await;
    });
}

/// Deletes the ephemeral node at `path` if the pinned session owns it, and nothing else.
///
/// For a node of a fixed name (a registration, a member node, a queue claim) whose create may
/// or may not have applied, or whose session may have ended meanwhile: once our session has
/// ended, our node went with it and the name may be another process's by now, so nothing is
/// sent; on our session, only a node it owns is deleted ([`delete_fenced`] by its czxid).
/// The read is synced with the leader first. Retries reading through connection loss; a final
/// error ends it.
pub(crate) async fn delete_own_ephemeral(
    session: crate::session::PinnedSession,
    path: String,
) -> Result<(), crate::error::Error> {
    delete_own_ephemeral_holding(session, path, None).await
}

/// [`delete_own_ephemeral`] that also requires the node to hold `data`: for a node that two
/// users of one session may race to create (two queue consumers claiming one item), where the
/// session alone does not say whose it is.
pub(crate) async fn delete_own_ephemeral_holding(
    session: crate::session::PinnedSession,
    path: String,
    data: Option<Vec<u8>>,
) -> Result<(), crate::error::Error> {
    use crate::error::Error;
    // Without the attempt limit: giving up would leave our node in the others' way until our
    // session ends.
    let backoff = session.handle().retry_policy().without_attempt_limit().backoff();
    let (reader, read_path) = (session.clone(), path.clone());
    // The czxid of the node to delete, if it is ours.
    let ours = retried(backoff, move || {
        let (session, path, data) = (reader.clone(), read_path.clone(), data.clone());
        async move {
            let current = session.handle().session().await;
            let Some(current) = current.filter(|c| c.generation == session.generation()) else {
                return Attempted::Done(None);
            };
            // The create we clean up after may have been applied by the leader and not yet by
            // the member serving us now (we never saw its reply, so nothing made the member we
            // reconnected to catch up): `sync` the parent first; the read is served behind it.
            let synced = session.sync(crate::path::parent(&path).unwrap_or("/"));
            let read = session.get_data(&path);
            let read = async move {
                match read.await {
                    Ok(node) => Ok(Some(node)),
                    Err(Error::NoNode { .. }) => Ok(None),
                    Err(error) => Err(error),
                }
            };
            match synced.await.and(read.await) {
                Ok(Some(node))
                    if node.stat.ephemeral_owner == current.session_id.0
                        && data.as_ref().is_none_or(|data| *data == node.data) =>
                {
                    Attempted::Done(Some(node.stat.czxid))
                }
                Ok(_) | Err(Error::SessionLost { .. }) => Attempted::Done(None),
                Err(error) if error.is_final() => Attempted::Failed(error),
                Err(error) => Attempted::Again(error),
            }
        }
    })
    .await?;
    match ours {
        Some(czxid) => delete_fenced(session, path, czxid).await.map(|_| ()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod token_format_tests {
    use crate::token::FencingToken;

    #[test]
    fn display_and_debug_print_the_same_number() {
        let token = FencingToken(309);
        assert_eq!(format!("{token}"), "0x135");
        assert_eq!(format!("{token:?}"), "FencingToken(0x135)");
    }
}
