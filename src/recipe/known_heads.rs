//! Nodes this process has seen first in line, so that a waiter behind one of them in the same
//! process takes the grant when it goes without listing the line again.
//!
//! Owns: a bounded, process-wide record of contender node paths that held an exclusive grant
//! (protocol step 3 of [`contender`](super::contender), the hand-off without a read). Does not
//! own any I/O, and is never the only way to a grant: a miss (another process held the node, or
//! the record has moved on) means the waiter lists the line as Curator does.
//!
//! # Why a record is proof
//! A node that held an exclusive grant was first of every sequential node in its directory, and
//! stays first until it is deleted: the server numbers new nodes above every existing one. A
//! waiter watches the nearest node ahead of it that blocks it; if that node was first, nothing
//! that could block the waiter is left once it is deleted, whatever the waiter's rule. The
//! waiter learns of the deletion through its own session's watch, so its view of the data
//! already includes everything the holder wrote.
//!
//! # Why paths suffice as keys
//! Every contender node carries a fresh GUID in its name (a protected name), so a path is never
//! reused for another node, on this ensemble or any other.

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, OnceLock};

/// How many paths are kept. A record is needed from a grant until its holder's successor is
/// woken, so only the most recent grants matter; a forgotten one costs one listing.
pub(crate) const CAPACITY: usize = 4096;

/// The record itself: most recent last, at most `capacity` paths.
#[derive(Debug)]
pub(crate) struct KnownHeads {
    capacity: usize,
    order: VecDeque<String>,
    paths: HashSet<String>,
}

impl KnownHeads {
    pub(crate) fn new(capacity: usize) -> Self {
        KnownHeads { capacity, order: VecDeque::with_capacity(capacity), paths: HashSet::with_capacity(capacity) }
    }

    /// Records that the node at `path` held an exclusive grant.
    pub(crate) fn record(&mut self, path: &str) {
        if self.capacity == 0 || self.paths.contains(path) {
            return;
        }
        if self.order.len() == self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.paths.remove(&oldest);
            }
        }
        self.order.push_back(path.to_owned());
        self.paths.insert(path.to_owned());
    }

    /// Whether the node at `path` is known to have been first in line.
    pub(crate) fn was_first(&self, path: &str) -> bool {
        self.paths.contains(path)
    }
}

fn process() -> &'static Mutex<KnownHeads> {
    static HEADS: OnceLock<Mutex<KnownHeads>> = OnceLock::new();
    HEADS.get_or_init(|| Mutex::new(KnownHeads::new(CAPACITY)))
}

/// Records, for this process, that the node at `path` held an exclusive grant.
pub(crate) fn record(path: &str) {
    // A poisoned lock only means another thread panicked mid-record; the set is still sound.
    process().lock().unwrap_or_else(|poisoned| poisoned.into_inner()).record(path);
}

/// Whether this process knows the node at `path` to have been first in line.
pub(crate) fn was_first(path: &str) -> bool {
    process().lock().unwrap_or_else(|poisoned| poisoned.into_inner()).was_first(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_path_is_known_and_others_are_not() {
        let mut heads = KnownHeads::new(4);
        heads.record("/l/_c_a-lock-0000000001");
        assert!(heads.was_first("/l/_c_a-lock-0000000001"));
        assert!(!heads.was_first("/l/_c_b-lock-0000000002"));
    }

    #[test]
    fn the_oldest_record_goes_first_when_full() {
        let mut heads = KnownHeads::new(3);
        for i in 0..5 {
            heads.record(&format!("/l/n-{i}"));
        }
        let known: Vec<bool> = (0..5).map(|i| heads.was_first(&format!("/l/n-{i}"))).collect();
        assert_eq!(known, [false, false, true, true, true]);
        // Recording a known path again neither duplicates it nor evicts another.
        heads.record("/l/n-4");
        assert!(heads.was_first("/l/n-2"));
        assert_eq!(heads.order.len(), 3);
    }

    #[test]
    fn a_record_of_no_capacity_knows_nothing() {
        let mut heads = KnownHeads::new(0);
        heads.record("/l/n-1");
        assert!(!heads.was_first("/l/n-1"));
    }
}
