//! What an item's node name says: its place in line, its priority and when it is due.
//!
//! Owns: the item name layout and its order, so that a listing alone orders a consumer's plan
//! (no item is read to learn when or in which order it goes). Does not own choosing among the
//! items (`plan.rs`) or putting them (`producer.rs`).
//!
//! ```text
//! qn-<seq>                         a plain item (ZooKeeper's and Curator's simple queue layout)
//! qn-<id>-<seq>                    an item put with an id of the caller's
//! qn-<p><PPPPPPPP><seq>            priority: Curator's DistributedPriorityQueue layout, p = 0 for a
//!                                  negative priority and 1 for the others, then the priority's
//!                                  32 bits in 8 upper-case hex digits (lower first)
//! qn-|<HEX ms>|<seq>               due at that Unix time in ms: Curator's DistributedDelayQueue layout
//! qn-|<HEX ms>|<p><PPPPPPPP><seq>  both
//! ```
//!
//! `<seq>` is the 10 digits the server appends. A plain or id item has priority 0. Due items go
//! first by priority (lower first), then by sequence; an item not yet due is not in line.

/// The name prefix of items: the same as ZooKeeper's own `DistributedQueue` recipe and Curator's
/// `SimpleDistributedQueue`, so either can read (and write) this queue.
pub const ITEM_PREFIX: &str = "qn-";

/// Width of the server's sequence suffix.
const SEQUENCE_DIGITS: usize = 10;
/// The delay marker (Curator's `DistributedDelayQueue` separator).
const DUE_MARK: char = '|';

/// What an item's name says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ItemName {
    /// When it is due (Unix ms), if it was put with a time.
    pub(crate) due_ms: Option<u64>,
    /// Lower goes first.
    pub(crate) priority: i32,
    /// The server's sequence number.
    pub(crate) seq: u64,
}

impl ItemName {
    /// The order of due items: priority, then sequence.
    pub(crate) fn key(&self) -> (i32, u64) {
        (self.priority, self.seq)
    }

    /// Whether it is in line at `now_ms`.
    pub(crate) fn is_due(&self, now_ms: u64) -> bool {
        self.due_ms.is_none_or(|due| due <= now_ms)
    }
}

/// The prefix to create an item at (the server appends its sequence number): with an `id`
/// (plain otherwise), or with a due time and a priority. An id is never combined with them.
pub(crate) fn prefix(id: Option<&str>, due_ms: Option<u64>, priority: i32) -> String {
    let mut name = ITEM_PREFIX.to_owned();
    if let Some(id) = id {
        name.push_str(id);
        name.push('-');
        return name;
    }
    if let Some(due) = due_ms {
        name.push_str(&format!("{DUE_MARK}{due:X}{DUE_MARK}"));
    }
    if priority != 0 {
        // Curator's `priorityToString`: sorts as text in priority order.
        let sign = if priority >= 0 { '1' } else { '0' };
        name.push_str(&format!("{sign}{:08X}", priority as u32));
    }
    name
}

/// What `name` says, `None` when it is not an item's name.
pub(crate) fn parse(name: &str) -> Option<ItemName> {
    let rest = name.strip_prefix(ITEM_PREFIX)?;
    // An id item of an older version may have an id that starts with the due mark: read as an
    // id item whatever else does not parse.
    parse_laid_out(rest).or_else(|| id_item(rest))
}

/// `<id>-<seq>`: an id item (no due time, priority 0).
fn id_item(rest: &str) -> Option<ItemName> {
    let (head, seq) = split_sequence(rest)?;
    (head.len() > 1 && head.ends_with('-')).then_some(ItemName { due_ms: None, priority: 0, seq })
}

/// The name without its sequence number, and the number.
fn split_sequence(rest: &str) -> Option<(&str, u64)> {
    if rest.len() < SEQUENCE_DIGITS || !rest.is_char_boundary(rest.len() - SEQUENCE_DIGITS) {
        return None;
    }
    let (head, digits) = rest.split_at(rest.len() - SEQUENCE_DIGITS);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((head, digits.parse().ok()?))
}

fn parse_laid_out(mut rest: &str) -> Option<ItemName> {
    let mut due_ms = None;
    if let Some(after) = rest.strip_prefix(DUE_MARK) {
        let (hex, tail) = after.split_once(DUE_MARK)?;
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        due_ms = Some(u64::from_str_radix(hex, 16).ok()?);
        rest = tail;
    }
    let (head, seq) = split_sequence(rest)?;
    let priority = match head.as_bytes() {
        [] => 0,
        // An id item (never delayed): `<id>-`.
        [.., b'-'] if due_ms.is_none() && head.len() > 1 => 0,
        // Curator's layout: the sign digit, then 8 upper-case hex digits; the sign digit must
        // agree with the value.
        [sign @ (b'0' | b'1'), bits @ ..]
            if bits.len() == 8 && bits.iter().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b)) =>
        {
            let value = u32::from_str_radix(&head[1..], 16).ok()? as i32;
            if (*sign == b'1') != (value >= 0) {
                return None;
            }
            value
        }
        _ => return None,
    };
    Some(ItemName { due_ms, priority, seq })
}

/// The items among `names`, in line order (due or not: by priority, then sequence), each with
/// what its name says.
pub(crate) fn in_order(names: Vec<String>) -> Vec<(String, ItemName)> {
    let mut items: Vec<(String, ItemName)> =
        names.into_iter().filter_map(|name| parse(&name).map(|item| (name, item))).collect();
    items.sort_unstable_by_key(|(_, item)| item.key());
    items
}

/// The items due at `now_ms`, in line order, and when the first of the others is due.
pub(crate) fn due(names: Vec<String>, now_ms: u64) -> (Vec<String>, Option<u64>) {
    let mut next_due: Option<u64> = None;
    let due = in_order(names)
        .into_iter()
        .filter(|(_, item)| {
            let ready = item.is_due(now_ms);
            if !ready {
                next_due = next_due.into_iter().chain(item.due_ms).min();
            }
            ready
        })
        .map(|(name, _)| name)
        .collect();
    (due, next_due)
}

/// Now, in Unix milliseconds (the clock due times are in).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(prefix: &str, seq: u64) -> String {
        format!("{prefix}{seq:010}")
    }

    #[test]
    fn names_say_what_was_put_and_curators_layouts_are_kept() {
        assert_eq!(prefix(None, None, 0), "qn-");
        assert_eq!(prefix(Some("req-1"), None, 0), "qn-req-1-");
        assert_eq!(prefix(None, Some(0x18C_0000_0000), 0), "qn-|18C00000000|");
        assert_eq!(prefix(None, None, 5), "qn-100000005");
        assert_eq!(prefix(None, None, -1), "qn-0FFFFFFFF");
        assert_eq!(prefix(None, Some(255), -3), "qn-|FF|0FFFFFFFD");
        for (due, priority, id) in
            [(None, 0, None), (None, 7, None), (Some(99), 0, None), (Some(99), i32::MIN, None), (None, 0, Some("a-b"))]
        {
            let name = named(&prefix(id, due, priority), 42);
            assert_eq!(parse(&name), Some(ItemName { due_ms: due, priority, seq: 42 }), "{name}");
        }
        // A priority made only of digits is not read as a longer sequence number.
        assert_eq!(parse("qn-1000000050000000012").map(|i| (i.priority, i.seq)), Some((5, 12)));
        for bad in [
            "qn-",
            "qn-12",
            "qn-|zz|0000000001",
            "qn-||0000000001",
            "qn-2000000050000000012",
            "foo-0000000001",
            "qn-|FF0000000001",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn due_items_go_by_priority_then_sequence_and_the_next_due_time_is_told() {
        let names = vec![
            named(&prefix(None, None, 0), 4),
            named(&prefix(None, None, 5), 1),
            named(&prefix(None, None, -2), 6),
            named(&prefix(None, Some(1_000), 0), 2),
            named(&prefix(None, Some(5_000), -9), 3),
            named(&prefix(None, Some(3_000), 0), 5),
            "claims".to_owned(),
        ];
        let (due, next) = due(names.clone(), 2_000);
        let seqs: Vec<u64> = due.iter().map(|n| parse(n).expect("an item").seq).collect();
        assert_eq!(seqs, [6, 2, 4, 1], "-2 first; then priority 0 by sequence; then 5");
        assert_eq!(next, Some(3_000));
        let (due, next) = super::due(names, 10_000);
        assert_eq!(due.len(), 6);
        assert_eq!(next, None);
        assert_eq!(parse(&due[0]).map(|i| i.priority), Some(-9));
    }
}

/// Item names another process wrote, read without a panic (issue 39, item 12): a non-ASCII
/// name once panicked the consumer.
#[cfg(test)]
mod bad_input {
    use proptest::prelude::*;

    use super::*;

    /// Any text, or what looks like an item name around any text.
    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            ".{0,40}",
            (".{0,20}", 0u64..10_000_000_000).prop_map(|(mid, seq)| format!("{ITEM_PREFIX}{mid}{seq:010}")),
            ("[|0-9A-Fa-f]{0,20}", "[01]?[0-9A-F]{0,9}", 0u64..10_000_000_000)
                .prop_map(|(due, p, seq)| format!("{ITEM_PREFIX}{due}{p}{seq:010}")),
        ]
    }

    proptest! {
        #[test]
        fn any_listing_orders_its_items_and_skips_the_rest(names in prop::collection::vec(name(), 0..30), now: u64) {
            for name in &names {
                if let Some(item) = parse(name) {
                    prop_assert!(name.starts_with(ITEM_PREFIX));
                    let digits = format!("{:010}", item.seq);
                    prop_assert!(name.ends_with(&digits));
                }
            }
            let ordered = in_order(names.clone());
            prop_assert!(ordered.windows(2).all(|w| w[0].1.key() <= w[1].1.key()));
            prop_assert_eq!(ordered.len(), names.iter().filter(|n| parse(n).is_some()).count());
            let (due, next) = due(names, now);
            prop_assert!(due.len() <= ordered.len());
            prop_assert!(next.is_none_or(|next| next > now));
        }

        #[test]
        fn every_name_we_lay_out_reads_back(due_ms in prop::option::of(any::<u64>()), priority: i32, seq in 0u64..10_000_000_000) {
            let name = format!("{}{seq:010}", prefix(None, due_ms, priority));
            prop_assert_eq!(parse(&name), Some(ItemName { due_ms, priority, seq }));
        }
    }
}
