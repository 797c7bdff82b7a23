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

    /// A log of `holds`, each `(token, granted, releasing)` in milliseconds from one instant.
    fn log_of(holds: &[(i64, u64, u64)]) -> HoldLog {
        let (log, t) = (HoldLog::new(), Instant::now());
        for &(token, granted, releasing) in holds {
            log.record(token, t + Duration::from_millis(granted), t + Duration::from_millis(releasing));
        }
        log
    }

    #[test]
    fn back_to_back_holds_in_token_order_are_fine() {
        let log = log_of(&[(10, 0, 5), (11, 5, 6), (12, 9, 9)]);
        assert_eq!(log.violations(), 0);
        assert_eq!(log.len(), 3);
    }

    #[test]
    fn a_grant_inside_another_hold_is_caught_even_when_short() {
        // A wrong grant that arrived long after the first, while it was still held.
        assert_eq!(log_of(&[(10, 0, 100), (11, 90, 91)]).violations(), 1);
    }

    #[test]
    fn a_hold_nested_after_a_short_one_inside_a_long_one_is_caught() {
        assert!(log_of(&[(10, 0, 100), (11, 100, 100), (12, 50, 60)]).violations() >= 1);
    }

    #[test]
    fn grants_out_of_token_order_are_caught() {
        assert_eq!(log_of(&[(12, 0, 1), (11, 2, 3)]).violations(), 1);
    }
}
