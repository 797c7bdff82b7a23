//! Health for readiness and liveness probes: one [`Health`] snapshot per session, with a
//! [`RecipeHealth`] per running recipe, and a stream of its changes.
//!
//! Owns: the snapshot types, the board each session keeps ([`HealthBoard`]: the session's state
//! and one slot per recipe, a `HealthSlot` that a recipe actor holds and that leaves the board
//! when dropped), and the change stream. Does not own deciding any state: the session actor
//! writes its own, each recipe writes its slot, and the holder core writes the slot of every
//! lock, semaphore and election.
//!
//! `docs/recipes/health.md`, reproduced below, is the probe recipe: what readiness and liveness
//! should check, and what the health says in each fault.
//!
//! # Cost
//! A snapshot is built when asked ([`SessionHandle::health`](crate::session::SessionHandle::health)) and
//! when a state changes (not on every reply: the last server contact is read from the lease at
//! snapshot time). The board holds one small entry per recipe.
//!
#![doc = include_str!("../../docs/recipes/health.md")]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::Stream;
use tokio::sync::watch;

use super::{Lease, SessionId};
use crate::token::FencingToken;

/// Where the session stands. Its `Debug` prints ages in milliseconds (`Connected { for_ms: 1200,
/// .. }`), not raw `Instant`s, so that a health endpoint can print it as is.
#[derive(Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionState {
    /// No session yet (the first connection, or a rebuild after an expiry), since then.
    Connecting {
        /// Since when.
        since: Instant,
    },
    /// Connected, since then.
    Connected {
        /// Since when (the session began, or the connection came back).
        since: Instant,
        /// Connected to a read-only server.
        read_only: bool,
    },
    /// The connection is down and the session may live on, since then.
    Suspended {
        /// Since when.
        since: Instant,
    },
    /// Closed for good (by request, an authentication failure, or the rebuild policy).
    Closed,
}

/// How long ago `at` was, in whole milliseconds: what `Debug` prints instead of an `Instant`.
fn ms_ago(at: Instant) -> u128 {
    at.elapsed().as_millis()
}

/// How long until `at`, in milliseconds (negative once past).
fn ms_left(at: Instant) -> i128 {
    let now = Instant::now();
    match at.checked_duration_since(now) {
        Some(left) => left.as_millis() as i128,
        None => -(now.duration_since(at).as_millis() as i128),
    }
}

impl std::fmt::Debug for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            SessionState::Connecting { since } => f.debug_struct("Connecting").field("for_ms", &ms_ago(since)).finish(),
            SessionState::Connected { since, read_only } => {
                f.debug_struct("Connected").field("for_ms", &ms_ago(since)).field("read_only", &read_only).finish()
            }
            SessionState::Suspended { since } => f.debug_struct("Suspended").field("for_ms", &ms_ago(since)).finish(),
            SessionState::Closed => f.write_str("Closed"),
        }
    }
}

/// The session part of a [`Health`] snapshot. Its `Debug` prints ages in milliseconds
/// (`last_contact_ms_ago`, `valid_for_ms`, negative once the lease is past).
#[derive(Clone, PartialEq, Eq)]
pub struct SessionHealth {
    /// Where the session stands.
    pub state: SessionState,
    /// The live session's id (`None` while none is live).
    pub session_id: Option<SessionId>,
    /// The session generation: 1 for the first session, one more for every session rebuilt
    /// after an expiry.
    pub generation: u64,
    /// The send time of the latest request the server answered (the last server contact we can
    /// prove), on the monotonic clock.
    pub last_contact: Option<Instant>,
    /// Until when the session is certainly alive on the server (its [`Lease`]).
    pub valid_until: Option<Instant>,
}

/// What one recipe is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecipeState {
    /// Started, not contending or consuming (yet).
    Idle,
    /// In line for a grant (a lock, a lease, leadership).
    Waiting,
    /// Holding the grant (leading, for an election) in this term.
    Holding {
        /// The grant's fencing token (the term). Until when it is certainly held is the
        /// session's `valid_until`.
        token: FencingToken,
    },
    /// Holding, but the connection is down (or being checked after it came back).
    Suspended {
        /// The grant's fencing token.
        token: FencingToken,
    },
    /// A cache (or a recipe built on one), a shared value or count, or an election observer:
    /// loaded, and following changes. It is `Idle` while it loads, and while it loads again
    /// after the connection came back.
    Watching,
    /// A persistent node, TTL node or service registration: its node exists and is kept. It is
    /// `Idle` while it is being made (again), and `Waiting` while another session's node holds
    /// its path.
    Kept,
    /// Consuming a queue, with this many items claimed and not yet finished (a queue consumer),
    /// or running this many tasks (a master–worker task worker).
    Consuming {
        /// Items in flight.
        in_flight: usize,
    },
    /// Failed for good; the recipe does nothing more.
    Failed {
        /// Why, as text.
        reason: String,
    },
}

impl std::fmt::Debug for SessionHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHealth")
            .field("state", &self.state)
            .field("session_id", &self.session_id)
            .field("generation", &self.generation)
            .field("last_contact_ms_ago", &self.last_contact.map(ms_ago))
            .field("valid_for_ms", &self.valid_until.map(ms_left))
            .finish()
    }
}

/// One recipe in a [`Health`] snapshot. Its `Debug` prints `for_ms`, the age of its state.
#[derive(Clone, PartialEq, Eq)]
pub struct RecipeHealth {
    /// What it is: `lock`, `read-lock`, `write-lock`, `semaphore`, `election`, `queue-consumer`.
    pub kind: &'static str,
    /// Its path (the lock's directory, the election's, the queue's).
    pub path: String,
    /// What it is doing.
    pub state: RecipeState,
    /// Since when it is in this state.
    pub since: Instant,
}

impl std::fmt::Debug for RecipeHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecipeHealth")
            .field("kind", &self.kind)
            .field("path", &self.path)
            .field("state", &self.state)
            .field("for_ms", &ms_ago(self.since))
            .finish()
    }
}

/// A session's health: the session, and every recipe running on it (in the order started).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// The session.
    pub session: SessionHealth,
    /// Every recipe with a slot on this session's board.
    pub recipes: Vec<RecipeHealth>,
}

impl Health {
    /// What a readiness probe asks: connected, and no recipe failed.
    pub fn is_ready(&self) -> bool {
        matches!(self.session.state, SessionState::Connected { .. })
            && !self.recipes.iter().any(|r| matches!(r.state, RecipeState::Failed { .. }))
    }

    /// What a liveness probe asks: the session is not closed for good, and has not been
    /// without a session (connecting) or suspended for longer than `patience`.
    pub fn is_alive(&self, patience: Duration) -> bool {
        match self.session.state {
            SessionState::Closed => false,
            SessionState::Connected { .. } => true,
            SessionState::Connecting { since } | SessionState::Suspended { since } => since.elapsed() <= patience,
        }
    }
}

struct Board {
    session: SessionHealth,
    recipes: BTreeMap<u64, RecipeHealth>,
    /// The entries kept as `Failed` after their recipe stopped.
    kept: std::collections::BTreeSet<u64>,
    next: u64,
}

struct Inner {
    board: Mutex<Board>,
    /// Counts changes; a reader builds the snapshot when it wakes, so a change costs nothing
    /// more than this (however many recipes the board holds).
    changes: watch::Sender<u64>,
    lease: Lease,
}

/// A session's health board: its state and one slot per recipe. Cheap to clone; kept by the
/// session actor and every handle.
#[derive(Clone)]
pub struct HealthBoard {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for HealthBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthBoard").finish_non_exhaustive()
    }
}

impl HealthBoard {
    /// A board for a session that is connecting, whose lease is `lease`.
    pub(crate) fn new(lease: Lease) -> HealthBoard {
        let session = SessionHealth {
            state: SessionState::Connecting { since: Instant::now() },
            session_id: None,
            generation: 0,
            last_contact: None,
            valid_until: None,
        };
        let (changes, _) = watch::channel(0);
        HealthBoard {
            inner: Arc::new(Inner {
                board: Mutex::new(Board { session, recipes: BTreeMap::new(), kept: Default::default(), next: 0 }),
                changes,
                lease,
            }),
        }
    }

    fn board(&self) -> std::sync::MutexGuard<'_, Board> {
        // A panic while holding the lock leaves a board that is still whole: go on with it.
        self.inner.board.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn snapshot_of(&self, board: &Board) -> Health {
        let mut session = board.session.clone();
        let lease = self.inner.lease.peek();
        session.last_contact = lease.map(|(heard, _)| heard);
        session.valid_until = lease.map(|(_, until)| until);
        Health { session, recipes: board.recipes.values().cloned().collect() }
    }

    /// The health now.
    pub fn snapshot(&self) -> Health {
        let board = self.board();
        self.snapshot_of(&board)
    }

    /// Every change of the health from now on (each item the whole snapshot after the change;
    /// changes in quick succession may be folded into the latest). Ends when the session
    /// actor and every handle are gone.
    pub fn changes(&self) -> impl Stream<Item = Health> + Send + 'static + use<> {
        let mut receiver = self.inner.changes.subscribe();
        receiver.mark_unchanged();
        // Weak: a stream must not keep the board (and its lease) alive.
        let board = Arc::downgrade(&self.inner);
        futures::stream::unfold((receiver, board), |(mut receiver, board)| async move {
            receiver.changed().await.ok()?;
            receiver.mark_unchanged();
            let health = HealthBoard { inner: board.upgrade()? }.snapshot();
            Some((health, (receiver, board)))
        })
    }

    /// Tells the change streams (called with the board's lock held, after the change).
    fn publish(&self) {
        self.inner.changes.send_modify(|changes| *changes += 1);
    }

    /// The session's state changed.
    pub(crate) fn session(&self, state: SessionState, session_id: Option<SessionId>, generation: u64) {
        let mut board = self.board();
        board.session.state = state;
        board.session.session_id = session_id;
        board.session.generation = generation;
        self.publish();
    }

    /// A slot for a call that waits (a barrier's wait, enter or leave), `Waiting` until the
    /// call ends and drops it.
    pub(crate) fn waiting(&self, kind: &'static str, path: &str) -> HealthSlot {
        let mut slot = self.slot(kind, path);
        slot.set(RecipeState::Waiting);
        slot
    }

    /// A slot for a recipe of `kind` at `path`, idle; it leaves the board when dropped.
    ///
    /// A recipe of the same kind on the same path replaces one that failed: its kept entry
    /// leaves the board.
    pub(crate) fn slot(&self, kind: &'static str, path: &str) -> HealthSlot {
        let mut board = self.board();
        let replaced: Vec<u64> = board
            .recipes
            .iter()
            .filter(|(id, r)| board.kept.contains(id) && r.kind == kind && r.path == path)
            .map(|(id, _)| *id)
            .collect();
        for id in replaced {
            board.kept.remove(&id);
            board.recipes.remove(&id);
        }
        let id = board.next;
        board.next += 1;
        board
            .recipes
            .insert(id, RecipeHealth { kind, path: path.to_owned(), state: RecipeState::Idle, since: Instant::now() });
        self.publish();
        HealthSlot { board: self.clone(), id, last: RecipeState::Idle }
    }
}

/// One recipe's entry on its session's [`HealthBoard`]; leaves the board when dropped.
pub(crate) struct HealthSlot {
    board: HealthBoard,
    id: u64,
    last: RecipeState,
}

impl std::fmt::Debug for HealthSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthSlot").field("state", &self.last).finish()
    }
}

impl HealthSlot {
    /// What the slot says now.
    pub(crate) fn state(&self) -> &RecipeState {
        &self.last
    }

    /// The recipe is now in `state` (nothing happens when it already was).
    pub(crate) fn set(&mut self, state: RecipeState) {
        if self.last == state {
            return;
        }
        self.last = state.clone();
        let mut board = self.board.board();
        if let Some(entry) = board.recipes.get_mut(&self.id) {
            entry.state = state;
            entry.since = Instant::now();
        }
        self.board.publish();
    }
}

impl HealthSlot {
    /// The recipe failed for good and its actor stops: the entry stays on the board as
    /// `Failed`, so that a readiness probe sees it (a recipe that vanished would look healthy),
    /// until a recipe of the same kind starts on the same path (a restart replaces it), or,
    /// when the recipe was started through a handle (`keeper`), until the last of its
    /// handles is dropped or one of them stops it.
    pub(crate) fn keep_failed(mut self, reason: String, keeper: Option<&HealthTag>) {
        self.set(RecipeState::Failed { reason });
        self.board.board().kept.insert(self.id);
        if let Some(keeper) = keeper {
            keeper.hold(KeptEntry { board: self.board.clone(), id: self.id });
        }
    }
}

/// A failed recipe's entry kept on the board; it leaves when this is dropped (unless a
/// replacement took it off first).
#[derive(Debug)]
struct KeptEntry {
    board: HealthBoard,
    id: u64,
}

impl Drop for KeptEntry {
    fn drop(&mut self) {
        let mut board = self.board.board();
        if board.kept.remove(&self.id) {
            board.recipes.remove(&self.id);
            self.board.publish();
        }
    }
}

/// A recipe's place on its session's board, shared by its handle's clones and its actor (until
/// it stops): what a handle's `health()` reads, and where a recipe that failed for good leaves
/// its failed entry, so that the entry lives as long as somebody can still ask the recipe, and
/// leaves with the last handle or at a `stop()`. A recipe the user no longer holds is not
/// failing anything the user runs.
#[derive(Clone, Debug, Default)]
pub(crate) struct HealthTag(Arc<Mutex<Keeping>>);

#[derive(Debug, Default)]
struct Keeping {
    /// The recipe's entry, once its actor put one on the board (the latest, if it made more).
    entry_at: Option<(HealthBoard, u64)>,
    /// A handle stopped the recipe: nothing is kept from then on (a failure between the stop
    /// and the actor's end is no reason for the board to say `Failed` later).
    released: bool,
    entry: Option<KeptEntry>,
}

impl HealthTag {
    fn keeping(&self) -> std::sync::MutexGuard<'_, Keeping> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn hold(&self, entry: KeptEntry) {
        let mut keeping = self.keeping();
        if keeping.released {
            drop(keeping);
            drop(entry);
        } else {
            keeping.entry = Some(entry);
        }
    }

    /// `slot` is this recipe's entry now.
    pub(crate) fn point_at(&self, slot: &HealthSlot) {
        self.keeping().entry_at = Some((slot.board.clone(), slot.id));
    }

    /// The recipe's entry on the board as it stands, or `None` while it has none (its actor has
    /// not reported yet, or it has stopped and its entry left the board).
    pub(crate) fn current(&self) -> Option<RecipeHealth> {
        let (board, id) = self.keeping().entry_at.clone()?;
        board.board().recipes.get(&id).cloned()
    }

    /// The recipe was stopped: its failed entry (if any, now or later) leaves the board.
    pub(crate) fn release(&self) {
        let entry = {
            let mut keeping = self.keeping();
            keeping.released = true;
            keeping.entry.take()
        };
        drop(entry);
    }
}

impl Drop for HealthSlot {
    fn drop(&mut self) {
        let mut board = self.board.board();
        // A recipe that failed for good stays on the board (see `keep_failed`).
        if board.kept.contains(&self.id) {
            return;
        }
        board.recipes.remove(&self.id);
        self.board.publish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[test]
    fn debug_prints_ages_in_milliseconds_not_instants() {
        let since = Instant::now() - Duration::from_millis(1500);
        let state = format!("{:?}", SessionState::Connected { since, read_only: false });
        assert!(state.starts_with("Connected { for_ms: 15"), "{state}");
        let health = SessionHealth {
            state: SessionState::Suspended { since },
            session_id: None,
            generation: 1,
            last_contact: Some(since),
            valid_until: Some(Instant::now() - Duration::from_millis(200)),
        };
        let text = format!("{health:?}");
        assert!(!text.contains("Instant"), "{text}");
        assert!(text.contains("last_contact_ms_ago: Some(15"), "{text}");
        assert!(text.contains("valid_for_ms: Some(-2"), "{text}");
        let recipe = RecipeHealth { kind: "lock", path: "/l".into(), state: RecipeState::Waiting, since };
        assert!(format!("{recipe:?}").contains("for_ms: 15"), "{recipe:?}");
    }

    #[test]
    fn slots_come_and_go_and_each_change_is_published() {
        let board = HealthBoard::new(Lease::new());
        let mut changes = Box::pin(board.changes());
        let mut lock = board.slot("lock", "/l");
        let mut queue = board.slot("queue-consumer", "/q");
        lock.set(RecipeState::Waiting);
        queue.set(RecipeState::Consuming { in_flight: 2 });
        let now = board.snapshot();
        let states: Vec<_> = now.recipes.iter().map(|r| (r.kind, r.state.clone())).collect();
        assert_eq!(
            states,
            [("lock", RecipeState::Waiting), ("queue-consumer", RecipeState::Consuming { in_flight: 2 })]
        );
        let latest = futures::executor::block_on(changes.next()).expect("a change");
        assert_eq!(latest, now, "changes fold into the latest snapshot");
        drop(lock);
        assert_eq!(board.snapshot().recipes.len(), 1, "a dropped slot leaves the board");
        assert!(!board.snapshot().is_ready(), "connecting is not ready");
        board.session(SessionState::Connected { since: Instant::now(), read_only: false }, Some(SessionId(5)), 1);
        assert!(board.snapshot().is_ready());
        queue.set(RecipeState::Failed { reason: "no permission".into() });
        assert!(!board.snapshot().is_ready(), "a failed recipe is not ready");
        board.session(
            SessionState::Suspended { since: Instant::now() - Duration::from_secs(30) },
            Some(SessionId(5)),
            1,
        );
        assert!(!board.snapshot().is_alive(Duration::from_secs(20)));
        assert!(board.snapshot().is_alive(Duration::from_secs(60)));
        board.session(SessionState::Closed, None, 1);
        assert!(!board.snapshot().is_alive(Duration::MAX));
    }

    #[test]
    fn a_failed_entry_leaves_with_its_last_handle_or_a_stop_or_a_replacement() {
        let board = HealthBoard::new(Lease::new());
        let failed = |board: &HealthBoard| {
            board.snapshot().recipes.iter().filter(|r| matches!(r.state, RecipeState::Failed { .. })).count()
        };
        // Kept by two handles: it stays while one is left.
        let keeper = HealthTag::default();
        let other_handle = keeper.clone();
        board.slot("cache", "/c").keep_failed("no permission".into(), Some(&keeper));
        assert_eq!(failed(&board), 1);
        drop(keeper);
        assert_eq!(failed(&board), 1, "one handle is left");
        drop(other_handle);
        assert_eq!(failed(&board), 0, "the last handle went");
        // Stopped through a handle that is kept.
        let keeper = HealthTag::default();
        board.slot("cache", "/c").keep_failed("no permission".into(), Some(&keeper));
        keeper.release();
        assert_eq!(failed(&board), 0, "stopped");
        // Failed after the stop was sent, before the actor took it: not kept either.
        let keeper = HealthTag::default();
        keeper.release();
        board.slot("cache", "/c").keep_failed("no permission".into(), Some(&keeper));
        assert_eq!(failed(&board), 0, "failed while stopping");
        // Replaced while its handle is kept; the handle's later drop takes nothing else along.
        let keeper = HealthTag::default();
        board.slot("cache", "/c").keep_failed("no permission".into(), Some(&keeper));
        let replacement = board.slot("cache", "/c");
        assert_eq!(failed(&board), 0, "replaced");
        drop(keeper);
        assert_eq!(board.snapshot().recipes.len(), 1, "the replacement stays");
        drop(replacement);
        // Without a handle (an actor started by hand): kept until replaced.
        board.slot("cache", "/c").keep_failed("no permission".into(), None);
        assert_eq!(failed(&board), 1);
        let _replacement = board.slot("cache", "/c");
        assert_eq!(failed(&board), 0);
    }
}
