//! A mutual-exclusion check that needs no hold time: every holder logs when its grant arrived
//! and when it began to let go, and no two logged holds may overlap.
//!
//! This module owns [`HoldLog`]. It does not take part in locking; it only judges a run
//! afterwards. A counter of current holders (up at the grant, down before the release) sees a
//! wrong second grant only if it lands inside the first holder's short hold; a log of intervals
//! on one monotonic clock sees it whenever it lands inside *any* other hold, and also when the
//! order of grants disagrees with the order of their fencing tokens (a grant handed out after a
//! later one). Holds are timed by the holders themselves: a grant is logged as arrived when the
//! holder has it, and the release as begun before the request is sent, so a correct hand-off,
//! which the server allows only after the earlier node is deleted, can never look like an
//! overlap.

use std::sync::Mutex;
use std::time::Instant;

/// One holder's hold: from the grant's arrival to the start of its release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// The grant's fencing token (the lock node's czxid).
    pub token: i64,
    /// When the holder had the grant.
    pub granted: Instant,
    /// When the holder began to release (before sending the request).
    pub releasing: Instant,
}

/// Holds logged by every holder of one exclusive lock (or write lock) during a run; see the
/// module docs.
#[derive(Debug, Default)]
pub struct HoldLog {
    holds: Mutex<Vec<Hold>>,
}

impl HoldLog {
    /// An empty log.
    pub fn new() -> HoldLog {
        HoldLog::default()
    }

    /// Logs one hold.
    pub fn record(&self, token: i64, granted: Instant, releasing: Instant) {
        self.holds.lock().unwrap_or_else(|e| e.into_inner()).push(Hold { token, granted, releasing });
    }

    /// Holds logged so far.
    pub fn len(&self) -> usize {
        self.holds.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether nothing was logged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many holds began while an earlier one was still held, plus how many grants arrived
    /// out of their tokens' order: 0 for a lock that kept its promise.
    pub fn violations(&self) -> usize {
        let mut holds = self.holds.lock().unwrap_or_else(|e| e.into_inner()).clone();
        holds.sort_by_key(|h| (h.granted, h.token));
        // Each hold must begin after every earlier one has begun to release: tracking the
        // latest release seen so far catches a hold nested inside a long earlier one too.
        let mut overlaps = 0;
        let mut latest_release: Option<Instant> = None;
        for hold in &holds {
            if latest_release.is_some_and(|end| hold.granted < end) {
                overlaps += 1;
            }
            latest_release = Some(latest_release.map_or(hold.releasing, |end| end.max(hold.releasing)));
        }
        let out_of_order = holds.windows(2).filter(|w| w[1].token <= w[0].token).count();
        overlaps + out_of_order
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn back_to_back_holds_in_token_order_are_fine() {
        let (log, t) = (HoldLog::new(), Instant::now());
        log.record(10, at(t, 0), at(t, 5));
        log.record(11, at(t, 5), at(t, 6));
        log.record(12, at(t, 9), at(t, 9));
        assert_eq!(log.violations(), 0);
        assert_eq!(log.len(), 3);
    }

    #[test]
    fn a_grant_inside_another_hold_is_caught_even_when_short() {
        let (log, t) = (HoldLog::new(), Instant::now());
        log.record(10, at(t, 0), at(t, 100));
        // A wrong grant that arrived long after the first, while it was still held.
        log.record(11, at(t, 90), at(t, 91));
        assert_eq!(log.violations(), 1);
    }

    #[test]
    fn a_hold_nested_after_a_short_one_inside_a_long_one_is_caught() {
        let (log, t) = (HoldLog::new(), Instant::now());
        log.record(10, at(t, 0), at(t, 100));
        log.record(11, at(t, 100), at(t, 100));
        log.record(12, at(t, 50), at(t, 60));
        assert!(log.violations() >= 1);
    }

    #[test]
    fn grants_out_of_token_order_are_caught() {
        let (log, t) = (HoldLog::new(), Instant::now());
        log.record(12, at(t, 0), at(t, 1));
        log.record(11, at(t, 2), at(t, 3));
        assert_eq!(log.violations(), 1);
    }
}
