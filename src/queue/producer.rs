//! [`Queue`]: put items, and the official recipe's `peek` / `element` / `remove` / `take`.
//!
//! Owns: putting items (`<queue>/qn-<seq>`, persistent sequential, data = the item; their names
//! with an id, a priority or a due time are `item.rs`'s) and the plain-async producer API. Does not own consuming with claims and workers: see
//! [`QueueConsumerActor`](super::QueueConsumerActor).

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::QueueError;
use super::item::{self, ITEM_PREFIX};
use crate::error::Error;
use crate::path;
use crate::recipe::guarded::delete_own_ephemeral_holding;
use crate::recipe::naming::new_guid;
use crate::reply::Answer;
use crate::retry::{Attempted, RetryPolicy, retried};
use crate::session::requests::{CreateMode, Op, OpResult};
use crate::session::{PinnedSession, SessionHandle, SessionId};
use tracing::{debug, warn};

/// The child of a queue under which consumers claim items (`<queue>/claims/<item>`).
const CLAIMS: &str = "claims";

/// A caller's item id must make one node name with the prefix and the sequence number.
fn check_item_id(id: &str) -> Result<(), QueueError> {
    let reason = if id.is_empty() {
        Some("it is empty")
    } else if id.contains('/') {
        Some("it contains '/'")
    } else if id.len() > 200 {
        Some("it is longer than 200 bytes")
    } else if id.starts_with('|') {
        Some("it starts with '|', which marks an item's due time")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(QueueError::InvalidItemId { id: id.to_owned(), reason }),
        None => Ok(()),
    }
}

/// Items of `names` in line order (priority, then sequence; due or not), skipping names that
/// are not items.
pub(crate) fn items_in_order(names: Vec<String>) -> Vec<String> {
    item::in_order(names).into_iter().map(|(name, _)| name).collect()
}

/// When an item goes and in which order: not before a time, and before or after others.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use]
pub struct ItemOptions {
    not_before: Option<SystemTime>,
    priority: i32,
}

impl ItemOptions {
    /// A plain item: due now, priority 0.
    pub fn new() -> Self {
        ItemOptions::default()
    }

    crate::builder::setters! {
        /// Delivered (and taken) not before that time, by this machine's clock and the consumer's
        /// (Curator's `DistributedDelayQueue`). A time in the past is due at once.
        not_before(not_before: SystemTime) => some;

        /// Lower priorities go first among due items, then the order they were put in (Curator's
        /// `DistributedPriorityQueue`: "lower numbers come out of the queue first"). Default 0.
        with_priority(priority: i32);
    }

    fn due_ms(&self) -> Option<u64> {
        self.not_before.map(|when| when.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64))
    }
}

/// A distributed FIFO queue at one path; cheap to clone.
#[derive(Clone, Debug)]
pub struct Queue {
    session: SessionHandle,
    path: String,
}

impl Queue {
    /// The queue at `path` (created on the first `put`).
    pub fn new(session: SessionHandle, path: impl Into<String>) -> Self {
        Queue { session, path: path.into() }
    }

    /// The queue's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn item_prefix(&self) -> String {
        path::join(&self.path, ITEM_PREFIX)
    }

    /// Appends an item that goes not before a time, or before or after others
    /// ([`ItemOptions`]); returns its node name, which says both (`docs/recipes/queue.md`, "Item
    /// names"). Consumers sleep until the earliest due item or a new one; they never poll.
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    pub async fn put_with(&self, data: impl Into<Vec<u8>>, options: ItemOptions) -> Result<String, QueueError> {
        let prefix = path::join(&self.path, &item::prefix(None, options.due_ms(), options.priority));
        self.create_item(prefix, data.into()).await
    }

    /// Appends an item delivered not before `when` ([`put_with`](Self::put_with)).
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    pub async fn put_at(&self, data: impl Into<Vec<u8>>, when: SystemTime) -> Result<String, QueueError> {
        self.put_with(data, ItemOptions::new().not_before(when)).await
    }

    /// Appends an item with a priority: lower goes first ([`put_with`](Self::put_with)).
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    pub async fn put_with_priority(&self, data: impl Into<Vec<u8>>, priority: i32) -> Result<String, QueueError> {
        self.put_with(data, ItemOptions::new().with_priority(priority)).await
    }

    async fn create_item(&self, prefix: String, data: Vec<u8>) -> Result<String, QueueError> {
        Ok(self.create_in_queue(&prefix, &data).await?)
    }

    /// Appends an item; returns its node name (`qn-<seq>`). Over the size limit: a typed error,
    /// nothing written.
    ///
    /// # Cancel safety
    /// Nothing is sent before the first poll. Dropped after that, the item may or may not have
    /// been queued (never in part), and calling `put` again may queue it twice: use
    /// [`put_with_id`](Self::put_with_id) to retry without queuing twice.
    pub async fn put(&self, data: impl Into<Vec<u8>>) -> Result<String, QueueError> {
        self.create_item(self.item_prefix(), data.into()).await
    }

    /// Appends an item under an id of the caller's (a request id, a message key), as
    /// `qn-<id>-<seq>`: a producer that retries after an unknown outcome (a lost reply, a
    /// timeout of its own) does not queue the item twice while the first one is still queued.
    /// Every call looks the id up first ([`find`](Self::find), after a `sync`) and returns the
    /// item queued under it instead of making another: a retry cannot tell whether an earlier
    /// call (its future dropped, say) had sent its create. So it costs a listing of the queue.
    /// Once an item is consumed, its id can be queued again. Consumers see an ordinary item (its
    /// place is its sequence number).
    ///
    /// The id must be a node name of its own: not empty, no `/`, at most 200 bytes.
    ///
    /// # Cancel safety
    /// Dropped, the item may or may not have been queued; calling again with the same id
    /// queues it once.
    pub async fn put_with_id(&self, id: &str, data: impl Into<Vec<u8>>) -> Result<String, QueueError> {
        check_item_id(id)?;
        let data = data.into();
        let prefix = path::join(&self.path, &item::prefix(Some(id), None, 0));
        // Every attempt looks again: a create whose reply was lost may have applied.
        let attempt = || self.put_once_with_id(id, &prefix, &data);
        Ok(retried(self.session.retry_policy().backoff(), attempt).await?)
    }

    /// One attempt of [`put_with_id`](Self::put_with_id): the item queued under `id` if there is
    /// one, else a new one made.
    async fn put_once_with_id(&self, id: &str, prefix: &str, data: &[u8]) -> Attempted<String> {
        // Synced first: the member serving us may not have applied a create whose reply was
        // lost (ours, or that of a call whose future was dropped), and a listing without it
        // would queue the item twice. Both sent now: one round trip.
        let synced = self.session.sync(&self.path);
        let listed = self.session.children(&self.path);
        let names = match (synced.await, listed.await) {
            (Ok(()) | Err(Error::NoNode { .. }), Ok(children)) => items_in_order(children.names),
            (Ok(()) | Err(Error::NoNode { .. }), Err(Error::NoNode { .. })) => Vec::new(),
            (Err(err), _) | (_, Err(err)) => return Attempted::judged(Err(err)),
        };
        if let Some(existing) = names.into_iter().find(|name| is_item_of(name, id)) {
            return Attempted::Done(existing);
        }
        Attempted::judged(self.create_in_queue(prefix, data).await)
    }

    /// Creates a sequential item node at `prefix`, making the queue's directory whenever it is
    /// missing (a container directory may be reaped between its making and the create). Its
    /// node name.
    async fn create_in_queue(&self, prefix: &str, data: &[u8]) -> Result<String, Error> {
        loop {
            match self.session.create(prefix, data.to_vec(), CreateMode::PersistentSequential).await {
                Ok(created) => return Ok(path::name(&created.path).to_string()),
                Err(Error::NoNode { .. }) => self.session.ensure_path(&self.path).await?,
                Err(err) => return Err(err),
            }
        }
    }

    /// The queued item put with `id` ([`put_with_id`](Self::put_with_id)), if it is still
    /// queued: its node name. Lists the queue.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read; dropping the future loses only the answer.
    pub async fn find(&self, id: &str) -> Result<Option<String>, QueueError> {
        check_item_id(id)?;
        Ok(self.items().await?.into_iter().find(|name| is_item_of(name, id)))
    }

    /// Appends all `items` atomically (one `multi`): all are enqueued, in order, or none.
    ///
    /// # Cancel safety
    /// Nothing is sent before the first poll. The items go in one `multi`, so a call dropped
    /// after that has queued all of them or none, and calling again may queue them twice.
    pub async fn put_all(&self, items: Vec<Vec<u8>>) -> Result<Vec<String>, QueueError> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let ops: Vec<Op> = items
            .into_iter()
            .map(|data| Op::Create { path: self.item_prefix(), data, mode: CreateMode::PersistentSequential })
            .collect();
        loop {
            match self.session.multi(ops.clone()).await {
                Ok(results) => {
                    return Ok(results
                        .into_iter()
                        .filter_map(|r| match r {
                            OpResult::Created { path: p, .. } => Some(path::name(&p).to_string()),
                            _ => None,
                        })
                        .collect());
                }
                Err(Error::Multi { source, .. }) if matches!(*source, Error::NoNode { .. }) => {
                    self.session.ensure_path(&self.path).await?
                }
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// The head item's data without removing it; `None` when empty (the recipe's `peek`). The
    /// head is the first due item in line: by priority, then in the order put.
    ///
    /// # Cancel safety
    /// Cancel-safe: reads only; dropping the future loses only the answer.
    pub async fn peek(&self) -> Result<Option<Vec<u8>>, QueueError> {
        loop {
            let Some(head) = self.due_items().await?.into_iter().next() else { return Ok(None) };
            match self.session.get_data(&path::join(&self.path, &head)).await {
                Ok(node) => return Ok(Some(node.data)),
                Err(Error::NoNode { .. }) => continue, // taken meanwhile: look again
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Like [`peek`](Self::peek), but an empty queue is an error (the recipe's `element`).
    ///
    /// # Cancel safety
    /// Cancel-safe: reads only; dropping the future loses only the answer.
    pub async fn element(&self) -> Result<Vec<u8>, QueueError> {
        self.peek().await?.ok_or_else(|| QueueError::Empty { queue: self.path.clone() })
    }

    /// Removes and returns the head item; `None` when empty (the recipe's `poll`). Items a
    /// [`QueueConsumerActor`](super::QueueConsumerActor) holds (claimed, out with a worker) are
    /// not free: they are skipped, and a queue whose every item is held answers `None`.
    ///
    /// # Lost answers
    /// A removal whose answer is lost with the connection is read back on its session: the
    /// item is returned if it applied, and the search goes on if not. Only when that session
    /// ends first is the answer [`QueueError::TakeOutcomeUnknown`], with the item's data.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropped after its removal applied (or may have), the item is put back under
    /// its own name (its place in line kept); no item is lost.
    pub async fn poll(&self) -> Result<Option<Vec<u8>>, QueueError> {
        loop {
            let (items, claimed) = futures::future::join(self.due_items(), self.claimed()).await;
            let (items, claimed) = (items?, claimed?);
            let mut raced = false;
            for name in items.into_iter().filter(|name| !claimed.contains(name)) {
                match self.try_take(&name).await? {
                    Taken::Item(data) => return Ok(Some(data)),
                    Taken::Claimed => {}
                    Taken::Gone => raced = true,
                }
            }
            // Only a race with another taker (the listing is stale) is worth another listing.
            if !raced {
                return Ok(None);
            }
        }
    }

    /// Like [`poll`](Self::poll), but an empty queue is an error (the recipe's `remove`).
    ///
    /// Lost answers are read back as in [`poll`](Self::poll).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`poll`](Self::poll): dropped after its removal applied, the item is
    /// put back under its own name; no item is lost.
    pub async fn remove(&self) -> Result<Vec<u8>, QueueError> {
        self.poll().await?.ok_or_else(|| QueueError::Empty { queue: self.path.clone() })
    }

    /// Removes and returns the head item, waiting (with a watch, not polling) until there is one,
    /// at most `timeout` (the recipe's blocking `take`). Items a consumer holds are skipped, as
    /// in [`poll`](Self::poll); one comes back when its claim goes (a nack, a consumer that
    /// stops or dies), so while items are held the claims are watched too.
    ///
    /// Lost answers are read back as in [`poll`](Self::poll).
    ///
    /// # Cancel safety
    /// Cancel-safe: dropped (a `timeout`, a `select!`), its watches go with it, and an item its
    /// removal took is put back under its own name; no item is lost.
    pub async fn take(&self, timeout: Option<Duration>) -> Result<Vec<u8>, QueueError> {
        let wait = async {
            loop {
                // Dropped with this future when the caller gives up (a timeout): the watches are
                // withdrawn with it, so a timed-out `take` leaves nothing behind.
                let (listing, changed) = self.session.children_until_dropped(&self.path);
                let (claims, released) = self.session.children_until_dropped(&self.claims());
                let (listing, claims) = futures::future::join(listing, claims).await;
                let (names, next_due_ms) = match listing {
                    Ok(children) => item::due(children.names, item::now_ms()),
                    Err(Error::NoNode { .. }) => {
                        self.session.ensure_path(&self.path).await?;
                        continue;
                    }
                    Err(err) => return Err(err.into()),
                };
                let claimed: HashSet<String> = match claims {
                    Ok(children) => children.names.into_iter().collect(),
                    Err(Error::NoNode { .. }) => HashSet::new(),
                    Err(err) => return Err(err.into()),
                };
                let mut held = false;
                for name in names {
                    if claimed.contains(&name) {
                        held = true;
                        continue;
                    }
                    match self.try_take(&name).await? {
                        Taken::Item(data) => return Ok(data),
                        Taken::Claimed => held = true,
                        Taken::Gone => {}
                    }
                }
                // An item not yet due wakes us when it is (no listing in between).
                let due = async move {
                    match next_due_ms {
                        Some(due) => {
                            tokio::time::sleep(Duration::from_millis(due.saturating_sub(item::now_ms()))).await
                        }
                        None => futures::future::pending().await,
                    }
                };
                futures::pin_mut!(due);
                if held {
                    let _ = futures::future::select(futures::future::select(changed, released), due).await;
                } else {
                    drop(released);
                    let _ = futures::future::select(changed, due).await;
                }
            }
        };
        match timeout {
            None => wait.await,
            Some(after) => tokio::time::timeout(after, wait)
                .await
                .unwrap_or_else(|_| Err(QueueError::Empty { queue: self.path.clone() })),
        }
    }

    /// Resolves once the queue holds no item: every item taken, or acked by its consumer (an
    /// item claimed but not yet acked is still in the queue). At once when it is empty now, or
    /// does not exist. Watches the queue's children, so it costs nothing while it waits.
    ///
    /// The queue may fill again at any moment after; this says it was empty at one point.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropped (a `timeout`, a `select!`), its watch goes with it.
    pub async fn drained(&self) -> Result<(), QueueError> {
        loop {
            let (listing, changed) = self.session.children_until_dropped(&self.path);
            match listing.await {
                Ok(children) => {
                    if items_in_order(children.names).is_empty() {
                        return Ok(());
                    }
                }
                Err(Error::NoNode { .. }) => return Ok(()),
                Err(err) => return Err(err.into()),
            }
            // Fired by a change, or when the session the watch was on ends: list again.
            let _ = changed.await;
        }
    }

    /// Number of items now.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read; dropping the future loses only the answer.
    pub async fn len(&self) -> Result<usize, QueueError> {
        Ok(self.items().await?.len())
    }

    /// True when no item is queued now.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read; dropping the future loses only the answer.
    pub async fn is_empty(&self) -> Result<bool, QueueError> {
        Ok(self.len().await? == 0)
    }

    /// The items due now, in line order.
    async fn due_items(&self) -> Result<Vec<String>, QueueError> {
        match self.session.children(&self.path).await {
            Ok(children) => Ok(item::due(children.names, item::now_ms()).0),
            Err(Error::NoNode { .. }) => Ok(Vec::new()),
            Err(err) => Err(err.into()),
        }
    }

    async fn items(&self) -> Result<Vec<String>, QueueError> {
        match self.session.children(&self.path).await {
            Ok(children) => Ok(items_in_order(children.names)),
            Err(Error::NoNode { .. }) => Ok(Vec::new()),
            Err(err) => Err(err.into()),
        }
    }

    /// `<queue>/claims`, where a consumer's claims live (see `QueueConsumerActor`).
    fn claims(&self) -> String {
        path::join(&self.path, CLAIMS)
    }

    /// Names of the items consumers hold now (none when no consumer has ever claimed).
    async fn claimed(&self) -> Result<HashSet<String>, QueueError> {
        match self.session.children(&self.claims()).await {
            Ok(children) => Ok(children.names.into_iter().collect()),
            Err(Error::NoNode { .. }) => Ok(HashSet::new()),
            Err(err) => Err(err.into()),
        }
    }

    /// Reads one item and removes it at its read version, unless a consumer holds it.
    ///
    /// The removal claims the item the way a consumer does, in the same `multi` that deletes
    /// it: `multi(create <queue>/claims/<item> (ephemeral, data = a receipt unique to this
    /// removal), delete <item> @version)`, on the session of the read. While a consumer's claim
    /// stands, the create fails (`NodeExists`) and nothing changes; once the `multi` applied, a
    /// consumer's claim on the item finds it gone. The claim is deleted right after: it is the
    /// removal's receipt, which tells, when the `multi`'s answer is lost with the connection,
    /// whether the removal applied ([`removal_outcome`]).
    async fn try_take(&self, name: &str) -> Result<Taken, QueueError> {
        let item = path::join(&self.path, name);
        let claim = path::join(&self.claims(), name);
        let node = match self.session.get_data(&item).await {
            Ok(node) => node,
            Err(Error::NoNode { .. }) => return Ok(Taken::Gone),
            Err(err) => return Err(err.into()),
        };
        loop {
            // Between sessions: nothing sent, nothing changed.
            let Some(current) = self.session.session().await else {
                return Err(Error::ConnectionLoss { path: item }.into());
            };
            let removal = Removal {
                session: self.session.pinned(current.generation),
                owner: current.session_id,
                item: item.clone(),
                version: node.stat.version,
                claim: claim.clone(),
                receipt: new_guid().into_bytes(),
                policy: self.session.retry_policy(),
            };
            match self.remove_or_restore(removal, &node.data).await {
                Ok(Removed::Yes) => return Ok(Taken::Item(node.data)),
                Ok(Removed::No) => continue,
                Ok(Removed::Unknown(source)) => {
                    let id = name.to_owned();
                    return Err(QueueError::TakeOutcomeUnknown { id, data: node.data, source });
                }
                Err(Error::Multi { index: 0, source }) => match *source {
                    Error::NodeExists { .. } => return Ok(Taken::Claimed),
                    // No consumer has claimed anything yet: no claims directory.
                    Error::NoNode { .. } => self.session.ensure_path(&self.claims()).await?,
                    other => return Err(other.into()),
                },
                // Taken by someone else, or changed (a nack) since we read it.
                Err(Error::Multi { index: 1, source })
                    if matches!(*source, Error::NoNode { .. } | Error::BadVersion { .. }) =>
                {
                    return Ok(Taken::Gone);
                }
                Err(Error::Multi { source, .. }) => return Err((*source).into()),
                Err(err) => return Err(err.into()),
            }
        }
    }
}

impl Queue {
    /// Runs `removal` detached and awaits it so that a caller who gives up cannot lose the item
    /// (holding `data`): if the removal applied, or may have, but nobody took its answer (the
    /// `take` or `poll` future was dropped: a timeout, a `select!`), the item is put back under
    /// its own name, so it keeps its place in line.
    fn remove_or_restore(
        &self,
        removal: Removal,
        data: &[u8],
    ) -> impl std::future::Future<Output = Result<Removed, Error>> + 'static {
        let removal = std::rc::Rc::new(removal);
        // The receipt goes first: a put-back item under a receipt left behind would stay claimed.
        let put_back = {
            let (session, removal, data) = (self.session.clone(), removal.clone(), data.to_vec());
            move || {
                let (session, removal, data) = (session.clone(), removal.clone(), data.clone());
                debug!(item = %removal.item, "a take was dropped after it removed the item: putting it back");
                actix::spawn(async move {
                    removal.delete_receipt().await;
                    if let Err(error) = session.create(&removal.item, data, CreateMode::Persistent).await {
                        warn!(item = %removal.item, %error, "could not put back an item whose take was dropped");
                    }
                });
            }
        };
        let again = put_back.clone();
        let took = |outcome: &Result<Removed, Error>| matches!(outcome, Ok(Removed::Yes | Removed::Unknown(_)));
        // Dropped with the answer in its channel: put back by the answer's drop; dropped before
        // the answer came: put back by the task that finds nobody to answer.
        let (answer, answered) = Answer::channel(move |unread: Option<Result<Removed, Error>>| {
            if unread.as_ref().is_some_and(took) {
                put_back();
            }
        });
        // Sent here, before the caller's future is first polled.
        let applied = removal.session.multi(removal.ops());
        actix::spawn(async move {
            let outcome = removal.settle(applied.await).await;
            let receipt_left = took(&outcome);
            match answer.send(outcome) {
                // Answered: the receipt is deleted after, off the caller's way (a put-back by the
                // answer's drop deletes it first itself).
                Ok(()) if receipt_left => removal.delete_receipt().await,
                Ok(()) => {}
                Err(unread) => {
                    if took(&unread) {
                        again();
                    }
                }
            }
        });
        async move { answered.await.unwrap_or(Err(Error::Closed)) }
    }
}

/// One removal of an item by [`Queue::try_take`], on the session pinned when it was made.
struct Removal {
    session: PinnedSession,
    /// That session's id: the owner of the claim its `multi` creates.
    owner: SessionId,
    item: String,
    version: i32,
    claim: String,
    /// The claim's data: tells this removal's claim from another taker's on the same session.
    receipt: Vec<u8>,
    policy: RetryPolicy,
}

/// Whether a removal took the item.
enum Removed {
    /// It did: the item is the taker's.
    Yes,
    /// It did not: after the answer was lost, no receipt of ours and the item still there; try
    /// again.
    No,
    /// Nobody can tell: the answer was lost and the session the receipt was on has ended (or
    /// the read-back kept failing). The item is gone from the queue; this removal or another
    /// taker's took it.
    Unknown(Error),
}

impl Removal {
    fn ops(&self) -> Vec<Op> {
        vec![
            Op::Create { path: self.claim.clone(), data: self.receipt.clone(), mode: CreateMode::Ephemeral },
            Op::Delete { path: self.item.clone(), version: Some(self.version) },
        ]
    }

    /// What the `multi`'s `answer` means, learnt by reading back when the answer was lost.
    async fn settle(&self, answer: Result<Vec<OpResult>, Error>) -> Result<Removed, Error> {
        match answer {
            Ok(_) => Ok(Removed::Yes),
            Err(err) if err.outcome_unknown() && !matches!(err, Error::Multi { .. }) => self.removal_outcome(err).await,
            Err(err) => Err(err),
        }
    }

    /// Deletes our receipt, if it is there: only ours (its data), only on its session (once that
    /// has ended the receipt went with it), retried until gone.
    async fn delete_receipt(&self) {
        let deleted =
            delete_own_ephemeral_holding(self.session.clone(), self.claim.clone(), Some(self.receipt.clone()));
        if let Err(error) = deleted.await {
            debug!(claim = %self.claim, %error, "the receipt of a take stays until its session ends");
        }
    }

    /// Reads back whether the `multi` applied, after its answer was lost (`lost`). Our receipt
    /// there (its data is unique to this removal, and only our session could have made it): it
    /// did, whatever happened to the item since. No receipt of ours and the item still there:
    /// it did not. Neither: another taker took the item. The receipt is read on the removal's
    /// own session; once that has ended the receipt went with it, and the outcome is
    /// [`Removed::Unknown`] (an item there may have been put back after ours removed it).
    /// Retried until one of these is known: the session's end bounds it.
    async fn removal_outcome(&self, lost: Error) -> Result<Removed, Error> {
        debug!(item = %self.item, error = %lost, "a take's removal has an unknown outcome; reading back");
        let backoff = self.policy.without_attempt_limit().backoff();
        match retried(backoff, || self.read_removal(&lost)).await {
            Ok(outcome) => outcome,
            // Only a final error ends the reading: nothing more can be learnt.
            Err(_) => Ok(Removed::Unknown(lost)),
        }
    }

    /// One reading back of whether the removal applied (see
    /// [`removal_outcome`](Self::removal_outcome)).
    async fn read_removal(&self, lost: &Error) -> Attempted<Result<Removed, Error>> {
        let handle = self.session.handle();
        // Synced first: a server behind the leader may not show the removal yet.
        let synced = handle.sync(&self.item);
        let receipt = self.session.get_data(&self.claim);
        let item = handle.exists(&self.item);
        let read = async {
            synced.await?;
            Ok::<_, Error>((receipt.await, item.await?))
        }
        .await;
        match read {
            Ok((Ok(claim), _)) if claim.data == self.receipt && claim.stat.ephemeral_owner == self.owner.0 => {
                Attempted::Done(Ok(Removed::Yes))
            }
            Ok((Ok(_) | Err(Error::NoNode { .. }), Some(_))) => Attempted::Done(Ok(Removed::No)),
            Ok((Ok(_) | Err(Error::NoNode { .. }), None)) => Attempted::Done(Err(multi_failed_on_item(&self.item))),
            // The receipt went with its session: the item there may be one put back by
            // another taker after ours removed it, so nothing tells.
            Ok((Err(Error::SessionLost { .. }), _)) => Attempted::Done(Ok(Removed::Unknown(lost.clone()))),
            Ok((Err(err), _)) | Err(err) => Attempted::Again(err),
        }
    }
}

/// The answer of a removal that another taker beat: as the server gives it when the item is
/// gone before the `multi`.
fn multi_failed_on_item(item: &str) -> Error {
    Error::Multi { index: 1, source: Box::new(Error::NoNode { path: item.to_owned() }) }
}

/// What [`Queue::try_take`] found.
enum Taken {
    /// Ours now: removed from the queue.
    Item(Vec<u8>),
    /// A consumer holds it: left alone.
    Claimed,
    /// Gone or changed since the listing.
    Gone,
}

/// Whether `name` is the node of an item put with `id` (`qn-<id>-<seq>`).
fn is_item_of(name: &str, id: &str) -> bool {
    name.strip_prefix(ITEM_PREFIX)
        .and_then(|rest| rest.strip_prefix(id))
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|seq| !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()))
}
