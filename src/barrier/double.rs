//! [`DistributedDoubleBarrier`]: members enter together and leave together.
//!
//! Owns: this member's node (`<path>/<uuid>`, ephemeral) from `enter` to `leave`, the `ready`
//! node's creation (when the count is complete) and deletion (after leaving), and the removal of
//! the member node after a timeout, an error or a dropped future. Not an actor: a handle whose
//! operations are serialized (one `enter` or `leave` at a time per member, like Curator's
//! `synchronized` methods).
//!
//! The algorithms are Curator's (`DistributedDoubleBarrier` 5.x, after GH-1290):
//! - **enter**: `exists(ready)` with a watch, create our ephemeral node (parents as containers);
//!   if `ready` existed we are through; otherwise count the members, and if there are enough,
//!   create `ready`; else wait for the watch on `ready`.
//! - **leave** (`internalLeave`): list the members (sorted by name, `ready` left out); none left:
//!   done; only we are left: delete our node, done; we are the lowest: watch the highest and
//!   wait; otherwise watch the lowest, delete our node, and wait. Finally delete `ready`.
//!
//! Where this differs from Curator, it is to keep a promise Curator's code can break (see
//! `docs/recipes/barrier.md`): a `ready` creation seen by the watch opens the barrier without a
//! second count; after our own node is gone, `leave` waits only for members whose nodes existed
//! when we began leaving (a member already in the next round is not waited for), and waits for
//! the last remaining member rather than returning; a new session re-enters on its own; a timeout
//! removes our node.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{Instrument, debug, debug_span, info};

use super::{BarrierError, CLEANUP_GRACE, READY_NODE, validate, within};
use crate::error::Error;
use crate::path;
use crate::recipe::delete_until_gone;
use crate::recipe::naming::new_guid;
use crate::retry::{Attempted, retried};
use crate::session::SessionHandle;
use crate::session::WatchEventKind;
use crate::session::requests::CreateMode;
use crate::session::requests::{Delete, EnsurePath};

/// Curator's `DistributedDoubleBarrier`: `member_count` members [`enter`](Self::enter) and wait
/// until all of them are there, do their work, then [`leave`](Self::leave) and wait until all of
/// them have left.
///
/// Each instance is one member, with a fresh id (a UUID: the name of its node). `member_count`
/// is a threshold, not a limit: more members may enter. Reuse an instance for round after round
/// (`enter`, `leave`, `enter`, ...), as with Curator.
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::barrier::BarrierError> {
/// use std::time::Duration;
/// use actix_zookeeper::barrier::DistributedDoubleBarrier;
///
/// let barrier = DistributedDoubleBarrier::new(session, "/jobs/phase", 5)?;
/// barrier.enter(Some(Duration::from_secs(60))).await?; // all 5 are here
/// // ... the work of this phase ...
/// barrier.leave(Some(Duration::from_secs(60))).await?; // all 5 are done
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DistributedDoubleBarrier {
    member: Arc<Member>,
}

/// A member's two steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Enter,
    Leave,
}

/// One member: what its operations need, shared with the futures they return.
#[derive(Debug)]
struct Member {
    session: SessionHandle,
    path: String,
    member_count: usize,
    id: String,
    our_path: String,
    ready_path: String,
    /// Held for the whole of an `enter` or `leave`: true between a successful `enter` and the
    /// end of the next `leave`.
    entered: tokio::sync::Mutex<bool>,
}

impl DistributedDoubleBarrier {
    /// Member of the double barrier at `path` (relative to the session's chroot) that opens
    /// when `member_count` members have entered. Fails with [`BarrierError::InvalidPath`] for a
    /// path ZooKeeper would refuse (and for the root), and with
    /// [`BarrierError::InvalidMemberCount`] for a count of 0.
    pub fn new(
        session: SessionHandle,
        path: &str,
        member_count: usize,
    ) -> Result<DistributedDoubleBarrier, BarrierError> {
        validate(path)?;
        if member_count == 0 {
            return Err(BarrierError::InvalidMemberCount { path: path.to_owned(), member_count });
        }
        let id = new_guid();
        let member = Member {
            session,
            path: path.to_owned(),
            member_count,
            our_path: path::join(path, &id),
            ready_path: path::join(path, READY_NODE),
            id,
            entered: tokio::sync::Mutex::new(false),
        };
        Ok(DistributedDoubleBarrier { member: Arc::new(member) })
    }

    /// The barrier's path.
    pub fn path(&self) -> &str {
        &self.member.path
    }

    /// This member's id: the name of its node under the barrier's path.
    pub fn member_id(&self) -> &str {
        &self.member.id
    }

    /// How many members open the barrier.
    pub fn member_count(&self) -> usize {
        self.member.member_count
    }

    /// Enters the barrier and waits until `member_count` members have entered (or the barrier
    /// is already open). With `timeout`, fails with [`BarrierError::Timeout`] when it elapses
    /// first, after removing our member node, so that nobody counts us. Connection trouble is
    /// waited out; after a session expiry our (ephemeral) node is created again on the new
    /// session and the wait goes on. Dropping the future also removes our node.
    ///
    /// # Cancel safety
    /// Dropped before it resolves, our member node is removed (the drop sends its delete) and
    /// the watch on `ready` is withdrawn, so members that count after that do not count us. A
    /// call dropped while it still waited for another `enter` or `leave` of this member has done
    /// nothing.
    pub fn enter(&self, timeout: Option<Duration>) -> impl Future<Output = Result<(), BarrierError>> + 'static {
        self.member.clone().step(Step::Enter, timeout)
    }

    /// Leaves the barrier and waits until every member has left. With `timeout`, fails with
    /// [`BarrierError::Timeout`] when it elapses first; our node is removed then too (Curator
    /// leaves it in place when we were the lowest member). Fails with
    /// [`BarrierError::NotEntered`] without a successful [`enter`](Self::enter) before it. If our
    /// node vanished meanwhile (our session expired), we count as having left and still wait for
    /// the others. Dropping the future also removes our node.
    ///
    /// # Cancel safety
    /// Dropped before it resolves, our member node is removed (the drop sends its delete) and
    /// the watches are withdrawn: the others count us as gone, and we stop waiting for them
    /// (`leave` may be called again to wait). A call dropped while it still waited for another
    /// `enter` or `leave` of this member has done nothing.
    pub fn leave(&self, timeout: Option<Duration>) -> impl Future<Output = Result<(), BarrierError>> + 'static {
        self.member.clone().step(Step::Leave, timeout)
    }
}

impl Member {
    /// [`DistributedDoubleBarrier::enter`] or [`leave`](DistributedDoubleBarrier::leave): one
    /// step at a time per member, within `timeout`.
    fn step(
        self: Arc<Self>,
        step: Step,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<(), BarrierError>> + 'static {
        let span = debug_span!("barrier.step", ?step, path = %self.path, member = %self.id, count = self.member_count);
        let deadline = timeout.map(|t| Instant::now() + t);
        let health = self.session.health_board().waiting("double-barrier", &self.path);
        async move {
            // On the board while it waits, gone with the call.
            let _health = health;
            let Some(mut entered) = within(deadline, self.entered.lock()).await else {
                return Err(self.timeout(timeout));
            };
            if step == Step::Leave && !*entered {
                return Err(BarrierError::NotEntered { path: self.path.clone(), member: self.id.clone() });
            }
            let mut guard = DropGuard::arm(&self);
            let outcome = within(deadline, async {
                match step {
                    Step::Enter => self.enter().await,
                    Step::Leave => self.leave().await,
                }
            })
            .await;
            guard.disarm();
            *entered = step == Step::Enter && matches!(outcome, Some(Ok(())));
            self.settle(step, outcome, timeout).await
        }
        .instrument(span)
    }

    fn timeout(&self, waited: Option<Duration>) -> BarrierError {
        BarrierError::Timeout { path: self.path.clone(), waited: waited.unwrap_or_default() }
    }

    /// The answer to a `step` (enter or leave) that ran for at most `waited` (`None`: it ran
    /// out of time). Unless it succeeded, our node is removed first, so that nobody counts us.
    async fn settle(
        &self,
        step: Step,
        outcome: Option<Result<(), BarrierError>>,
        waited: Option<Duration>,
    ) -> Result<(), BarrierError> {
        let failed = match outcome {
            Some(Ok(())) => {
                debug!(?step, "done");
                return Ok(());
            }
            Some(Err(error)) => {
                debug!(?step, %error, "failed; removing our node");
                error
            }
            None => {
                info!(?step, "the other members did not arrive in time; removing our node");
                self.timeout(waited)
            }
        };
        self.clean_up(step == Step::Leave).await;
        Err(failed)
    }

    /// Curator's `enter` and `internalEnter`, restarted from the top whenever the outcome of a
    /// request is unknown or the session ended (every step is safe to repeat).
    async fn enter(&self) -> Result<(), BarrierError> {
        Ok(retried(self.session.retry_policy().backoff(), || self.enter_pass()).await?)
    }

    /// One pass of [`enter`](Self::enter): restarted at once where the algorithm starts again
    /// (our node had to be replaced, the directory was made or went, the session ended), and
    /// after the backoff's delay where a request failed for a passing reason.
    async fn enter_pass(&self) -> Attempted<()> {
        let session = &self.session;
        'top: loop {
            // Sent in this order, in one round trip: the watch on `ready` is in place before our
            // node can complete anybody's count.
            let (ready, fired) = session.exists_until_dropped(&self.ready_path);
            let created = session.create(&self.our_path, Vec::new(), CreateMode::Ephemeral);
            let (ready, created) = futures::join!(ready, created);
            let ready = match ready {
                Ok(stat) => stat.is_some(),
                Err(error) => {
                    debug!(%error, "reading `ready` failed; starting again");
                    return Attempted::judged(Err(error));
                }
            };
            match created {
                Ok(_) => debug!("member node created"),
                Err(Error::NodeExists { .. }) => match self.adopt().await {
                    Attempted::Done(true) => {}
                    Attempted::Done(false) => continue 'top,
                    Attempted::Again(error) => return Attempted::Again(error),
                    Attempted::Failed(error) => return Attempted::Failed(error),
                },
                Err(Error::NoNode { .. }) => {
                    // First use of this path: create it and its parents as containers, as
                    // Curator's `creatingParentContainersIfNeeded` does.
                    match session.request(EnsurePath { path: self.path.clone(), containers: true }).await {
                        Ok(()) => continue 'top,
                        Err(error) => return Attempted::judged(Err(error)),
                    }
                }
                Err(error) => {
                    debug!(%error, "creating our node failed; starting again if the outcome is unknown");
                    return Attempted::judged(Err(error));
                }
            }
            if ready {
                debug!("`ready` exists: the barrier is open");
                return Attempted::Done(());
            }
            let mut fired = fired;
            loop {
                let members = match session.children(&self.path).await {
                    Ok(children) => children.names.iter().filter(|name| *name != READY_NODE).count(),
                    // The directory went, and our node with it (a new session came meanwhile).
                    Err(Error::NoNode { .. }) => continue 'top,
                    Err(error) => return Attempted::judged(Err(error)),
                };
                if members >= self.member_count {
                    return match session.create(&self.ready_path, Vec::new(), CreateMode::Persistent).await {
                        Ok(_) => {
                            debug!(members, "count complete: created `ready`");
                            Attempted::Done(())
                        }
                        Err(Error::NodeExists { .. }) => Attempted::Done(()),
                        Err(error) => Attempted::judged(Err(error)),
                    };
                }
                debug!(members, "waiting for `ready`");
                match fired.await {
                    // Only a creation proves it: a session that moved to a reconfigured ensemble
                    // tells a watch it could not carry `DataChanged` ("read again"), below.
                    Ok(event) if event.kind == WatchEventKind::NodeCreated => {
                        debug!("`ready` created: the barrier is open");
                        return Attempted::Done(());
                    }
                    Ok(event) if event.kind == WatchEventKind::SessionEnded => {
                        info!("session ended while waiting to enter; entering again on the new session");
                        continue 'top;
                    }
                    Ok(event) => debug!(kind = ?event.kind, "`ready` watch fired; checking again"),
                    Err(_) => continue 'top,
                }
                // Watch again; `ready` existing now means the barrier is open.
                let (ready, again) = session.exists_until_dropped(&self.ready_path);
                match ready.await {
                    Ok(Some(_)) => return Attempted::Done(()),
                    Ok(None) => fired = again,
                    Err(error) => return Attempted::judged(Err(error)),
                }
            }
        }
    }

    /// Our node already exists: keep it if the current session owns it (a create whose reply
    /// was lost, or a second `enter`), otherwise delete it (a node of an ended session of
    /// ours) so that it can be created again. `Done(true)`: adopted; `Done(false)`: start again.
    async fn adopt(&self) -> Attempted<bool> {
        let (stat, current) = futures::join!(self.session.exists(&self.our_path), self.session.session());
        match (stat, current) {
            (Ok(Some(stat)), Some(current)) if stat.ephemeral_owner == current.session_id.0 => {
                debug!("our node exists under the current session: adopted");
                Attempted::Done(true)
            }
            (Ok(Some(stat)), Some(_)) => {
                debug!(owner = stat.ephemeral_owner, "our node belongs to an ended session: replacing it");
                match self.session.delete(&self.our_path, Some(stat.version)).await {
                    Ok(()) | Err(Error::NoNode { .. }) | Err(Error::BadVersion { .. }) => Attempted::Done(false),
                    Err(error) => Attempted::judged(Err(error)),
                }
            }
            (Ok(None), _) => Attempted::Done(false),
            (Err(error), _) => Attempted::judged(Err(error)),
            // No live session to compare owners with (it is being rebuilt): as a lost connection.
            (Ok(Some(_)), None) => Attempted::Again(Error::ConnectionLoss { path: self.our_path.clone() }),
        }
    }

    /// Curator's `internalLeave`, then the deletion of `ready`.
    async fn leave(&self) -> Result<(), BarrierError> {
        // The barrier's pzxid at our first listing: every member node that existed when we
        // began leaving has a czxid at most this. Kept across passes.
        let began = std::cell::Cell::new(None);
        retried(self.session.retry_policy().backoff(), || self.leave_pass(&began)).await?;
        // As Curator does: the round is over, so `ready` goes (every member tries; the first wins).
        let deleted = retried(self.session.retry_policy().backoff(), || {
            let deleted = self.session.delete(&self.ready_path, None);
            async move {
                match deleted.await {
                    Ok(()) | Err(Error::NoNode { .. }) => Attempted::Done(()),
                    Err(error) => Attempted::judged(Err(error)),
                }
            }
        });
        Ok(deleted.await?)
    }

    /// One pass of [`leave`](Self::leave)'s wait for the others: started again after the
    /// backoff's delay where a request failed for a passing reason.
    async fn leave_pass(&self, began: &std::cell::Cell<Option<i64>>) -> Attempted<()> {
        let session = &self.session;
        loop {
            let listing = match session.children(&self.path).await {
                Ok(children) => children,
                Err(Error::NoNode { .. }) => return Attempted::Done(()),
                Err(error) => return Attempted::judged(Err(error)),
            };
            let began = match began.get() {
                Some(zxid) => zxid,
                None => {
                    began.set(Some(listing.stat.pzxid));
                    listing.stat.pzxid
                }
            };
            let mut members: Vec<String> = listing.names.into_iter().filter(|name| name != READY_NODE).collect();
            members.sort();
            let present = members.contains(&self.id);
            if !present {
                // We have left (deleted our node, or the session that owned it ended). Wait only
                // for those who were members when we began: a node created since belongs to a
                // member that already finished leaving and entered the next round.
                members = match self.created_by(members, began).await {
                    Ok(members) => members,
                    Err(error) => return Attempted::judged(Err(error)),
                };
            }
            if members.is_empty() {
                return Attempted::Done(());
            }
            if present && members.len() == 1 {
                debug!("we are the last member: deleting our node");
                return match session.delete(&self.our_path, None).await {
                    Ok(()) | Err(Error::NoNode { .. }) => Attempted::Done(()),
                    Err(error) => Attempted::judged(Err(error)),
                };
            }
            let lowest = present && members[0] == self.id;
            let watched = if lowest { &members[members.len() - 1] } else { &members[0] };
            let (stat, fired) = session.exists_until_dropped(&path::join(&self.path, watched));
            let deleted = (present && !lowest).then(|| session.delete(&self.our_path, None));
            let stat = stat.await;
            if let Some(deleted) = deleted {
                match deleted.await {
                    Ok(()) | Err(Error::NoNode { .. }) => debug!("our node deleted"),
                    // Do not wait while our node may still be there (someone may be waiting for
                    // it): list again, and delete again if it is still there.
                    Err(error) => {
                        debug!(%error, "deleting our node failed; listing again if the outcome is unknown");
                        return Attempted::judged(Err(error));
                    }
                }
            }
            match stat {
                Ok(Some(_)) => {
                    debug!(node = %watched, lowest, members = members.len(), "waiting for a member to leave");
                    // Whatever fired (deletion, session change), list again.
                    let _ = fired.await;
                }
                Ok(None) => {}
                Err(error) => return Attempted::judged(Err(error)),
            }
        }
    }

    /// The names among `members` whose nodes still exist and were created no later than
    /// `zxid` (one round trip: the reads are pipelined).
    async fn created_by(&self, members: Vec<String>, zxid: i64) -> Result<Vec<String>, Error> {
        if members.is_empty() {
            return Ok(members);
        }
        let reads: Vec<_> = members.iter().map(|name| self.session.exists(&path::join(&self.path, name))).collect();
        let mut kept = Vec::new();
        for (name, read) in members.into_iter().zip(reads) {
            match read.await? {
                Some(stat) if stat.czxid <= zxid => kept.push(name),
                Some(_) => debug!(node = %name, "a member of the next round: not waited for"),
                None => {}
            }
        }
        Ok(kept)
    }

    /// After a timeout or an error: remove our node (and, after `leave`, `ready`, as Curator
    /// does). Waits up to [`CLEANUP_GRACE`]; what is not done by then goes on in the background.
    async fn clean_up(&self, after_leave: bool) {
        let session = self.session.clone();
        let ours = self.our_path.clone();
        let ready = after_leave.then(|| self.ready_path.clone());
        // Our node is an ephemeral of the live session, if any: with none live it went with its
        // session (or was never made).
        let pinned = session.live_generation().map(|generation| session.pinned(generation));
        let cleanup = async move {
            if let Some(pinned) = pinned {
                if let Err(error) = delete_until_gone(pinned, ours).await {
                    debug!(%error, "could not remove our node");
                }
            }
            if let Some(ready) = ready {
                match session.delete(&ready, None).await {
                    Ok(()) | Err(Error::NoNode { .. }) => {}
                    Err(error) => debug!(%error, "could not delete `ready`"),
                }
            }
        };
        let running = actix::spawn(cleanup.in_current_span());
        if tokio::time::timeout(CLEANUP_GRACE, running).await.is_err() {
            info!("cleanup still running; it goes on in the background");
        }
    }
}

/// Removes our node if an `enter` or `leave` future is dropped before it ends. `do_send`, so
/// that it works from `Drop` (no runtime needed) and is not skipped because nobody waits for it.
struct DropGuard {
    session: SessionHandle,
    our_path: String,
    armed: bool,
}

impl DropGuard {
    fn arm(member: &Member) -> DropGuard {
        DropGuard { session: member.session.clone(), our_path: member.our_path.clone(), armed: true }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if self.armed {
            debug!(node = %self.our_path, "barrier operation dropped: removing our node");
            self.session.addr().do_send(Delete { path: self.our_path.clone(), version: None });
        }
    }
}
