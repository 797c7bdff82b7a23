//! Which items a consumer tries next: the plan it makes from one listing of the queue.
//!
//! Owns: choosing, from one listing, the items a consumer will try to claim and the order it
//! tries them in, and how many of them it remembers. Does not own listing or claiming (that is
//! the consumer's), nor what an item's name says (`item.rs`: its priority and due time).
//!
//! A consumer lists the queue once and works through the plan; it lists again only when the
//! plan is used up, so its cost per item does not grow with the backlog (a listing per item
//! did). Consumers start at different places near the head, so that they do not all
//! race for the same first items; a claim another consumer won shows as `NodeExists` and
//! costs one round trip, never a new listing.

use std::collections::{HashSet, VecDeque};

use super::item;

/// What one listing says to try next.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Items to try, in order.
    pub(crate) candidates: VecDeque<String>,
    /// Some items are claimed by other consumers: they come back if those claims go.
    pub(crate) held_elsewhere: bool,
    /// When the first item not yet due is due (Unix ms): list again then.
    pub(crate) next_due_ms: Option<u64>,
}

/// How a plan is made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Remember at most this many candidates (the oldest items): a consumer's memory does not
    /// grow with the backlog.
    pub(crate) keep: usize,
    /// Start somewhere among the first `spread` items, not always at the head.
    pub(crate) spread: usize,
    /// Where in that window to start (any number; taken modulo the window).
    pub(crate) offset: u64,
    /// Now, in Unix ms: items due later are not in line yet.
    pub(crate) now_ms: u64,
}

/// The plan for a listing of `names`: items due at `shape.now_ms` that are not `claimed` and not
/// to be `skipped`, in line order (priority, then sequence), at most `shape.keep` of them, the
/// first `shape.spread` rotated to start at `shape.offset`.
pub(crate) fn plan(
    names: Vec<String>,
    claimed: &HashSet<String>,
    skipped: impl Fn(&str) -> bool,
    shape: Shape,
) -> Plan {
    let mut held_elsewhere = false;
    let mut next_due_ms: Option<u64> = None;
    let mut items: Vec<((i32, u64), String)> = names
        .into_iter()
        .filter_map(|name| item::parse(&name).map(|item| (item, name)))
        .filter(|(item, _)| {
            let due = item.is_due(shape.now_ms);
            if !due {
                next_due_ms = next_due_ms.into_iter().chain(item.due_ms).min();
            }
            due
        })
        .map(|(item, name)| (item.key(), name))
        .filter(|(_, name)| {
            let taken = claimed.contains(name);
            held_elsewhere |= taken;
            !taken && !skipped(name)
        })
        .collect();
    let keep = shape.keep.max(1);
    if items.len() > keep {
        // The first `keep` in line, without sorting the whole backlog.
        items.select_nth_unstable(keep - 1);
        items.truncate(keep);
    }
    items.sort_unstable();
    // Only among the first items of the head's priority: a rotation must not put an item of a
    // later priority before one of an earlier.
    let head_priority = items.first().map(|((priority, _), _)| *priority);
    let same_priority = items.iter().take_while(|((priority, _), _)| Some(*priority) == head_priority).count();
    let window = same_priority.min(shape.spread.max(1));
    if window > 1 {
        let start = usize::try_from(shape.offset % window as u64).unwrap_or(0);
        items[..window].rotate_left(start);
    }
    Plan { candidates: items.into_iter().map(|(_, name)| name).collect(), held_elsewhere, next_due_ms }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(n: u64) -> String {
        format!("qn-{n:010}")
    }

    fn shape(keep: usize, spread: usize, offset: u64) -> Shape {
        Shape { keep, spread, offset, now_ms: 1_000 }
    }

    #[test]
    fn the_start_is_spread_only_among_items_of_the_head_priority() {
        let urgent = format!("{}0000000100", item::prefix(None, None, -5));
        let names: Vec<String> = (0..10).map(item).chain([urgent.clone()]).collect();
        for offset in 0..10 {
            let plan = plan(names.clone(), &HashSet::new(), |_| false, shape(20, 20, offset));
            assert_eq!(plan.candidates[0], urgent, "offset {offset}");
        }
        let two_urgent = format!("{}0000000101", item::prefix(None, None, -5));
        let plan =
            plan(vec![item(1), urgent.clone(), two_urgent.clone()], &HashSet::new(), |_| false, shape(20, 20, 1));
        assert_eq!(plan.candidates, [two_urgent, urgent, item(1)], "rotated among the two urgent ones");
    }

    #[test]
    fn items_not_yet_due_wait_and_say_when_and_priorities_go_first() {
        let later = format!("{}0000000001", item::prefix(None, Some(5_000), 0));
        let sooner = format!("{}0000000002", item::prefix(None, Some(3_000), 0));
        let ready = format!("{}0000000003", item::prefix(None, Some(500), 0));
        let urgent = format!("{}0000000009", item::prefix(None, None, -1));
        let plan = plan(
            vec![later, sooner, item(4), ready.clone(), urgent.clone()],
            &HashSet::new(),
            |_| false,
            shape(10, 1, 0),
        );
        assert_eq!(plan.candidates, [urgent, ready, item(4)]);
        assert_eq!(plan.next_due_ms, Some(3_000));
    }

    #[test]
    fn oldest_first_by_sequence_number_only() {
        let names = vec![item(3), "claims".into(), item(1), "foreign".into(), item(2)];
        let plan = plan(names, &HashSet::new(), |_| false, shape(10, 1, 0));
        assert_eq!(plan.candidates, [item(1), item(2), item(3)]);
        assert!(!plan.held_elsewhere);
    }

    #[test]
    fn claimed_and_skipped_items_are_left_out() {
        let claimed: HashSet<String> = [item(1)].into();
        let plan = plan(vec![item(1), item(2), item(3)], &claimed, |n| n == item(3), shape(10, 1, 0));
        assert_eq!(plan.candidates, [item(2)]);
        assert!(plan.held_elsewhere, "item 1 comes back when its claim goes");
    }

    #[test]
    fn only_the_oldest_are_kept() {
        let names: Vec<String> = (0..1000).rev().map(item).collect();
        let plan = plan(names, &HashSet::new(), |_| false, shape(5, 1, 0));
        assert_eq!(plan.candidates, (0..5).map(item).collect::<Vec<_>>());
    }

    #[test]
    fn consumers_start_at_different_places_near_the_head() {
        let names: Vec<String> = (0..10).map(item).collect();
        let plan = plan(names, &HashSet::new(), |_| false, shape(10, 4, 6));
        // The first four, rotated by 6 mod 4 = 2; the rest in order.
        let expected: Vec<String> = [2, 3, 0, 1, 4, 5, 6, 7, 8, 9].into_iter().map(item).collect();
        assert_eq!(plan.candidates, expected);
    }

    #[test]
    fn an_empty_listing_makes_an_empty_plan() {
        assert_eq!(plan(Vec::new(), &HashSet::new(), |_| false, shape(10, 4, 3)), Plan::default());
    }
}
