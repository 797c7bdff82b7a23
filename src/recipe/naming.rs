//! Node names and who holds what: Curator's layout, protected names, and the grant rules.
//!
//! Owns: protected names (`_c_<uuid>-<name><seq>`, Curator's `withProtection()`), the per-attempt
//! GUID, participant id defaults, and [`standing`]: given a directory listing, does this node hold
//! the grant, and if not, which single node must it watch. Does not do any I/O.
//!
//! Ordering is by the sequence suffix only ([`crate::path::sort_by_sequence`]), which is what
//! Curator's `fixForSorting` amounts to (the text after the last `lock-` / `__READ__` /
//! `__WRIT__` / `latch-`).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::path;

/// Marker of Curator's protected names.
pub const PROTECTED_PREFIX: &str = "_c_";
/// Name of an exclusive lock's nodes (`InterProcessMutex`).
pub const LOCK_NAME: &str = "lock-";
/// Name of a read lock's nodes (`InterProcessReadWriteLock`).
pub const READ_NAME: &str = "__READ__";
/// Name of a write lock's nodes (`InterProcessReadWriteLock`).
pub const WRITE_NAME: &str = "__WRIT__";
/// Name of a semaphore's lease nodes (`InterProcessSemaphoreV2`).
pub const LEASE_NAME: &str = "lease-";
/// Name of a leader latch's nodes (`LeaderLatch`).
pub const LATCH_NAME: &str = "latch-";

/// Which nodes stand in the way of a contender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Holds when first of all participants (mutex, write lock, latch).
    Exclusive,
    /// Holds when no write-lock node sorts before it (read lock).
    Shared,
    /// Holds when fewer than this many nodes sort before it (semaphore leases).
    Leases(usize),
}

/// Where a node stands in its directory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Standing {
    /// It holds the grant.
    Holds,
    /// It waits. `watch` is the one node whose deletion may change that; `blockers` counts the
    /// nodes in the way, so `blockers == 1` means the watched node's deletion is the grant.
    Waits {
        /// Name of the node to watch.
        watch: String,
        /// How many nodes stand in the way (including `watch`).
        blockers: usize,
    },
    /// It waits for any node before it to go (leases): watch the directory's children.
    WaitsForAny,
    /// The node is not in the listing (deleted, or its session ended).
    Missing,
}

/// Where `ours` stands among `children` under `rule`.
///
/// Exclusive: every earlier participant blocks, the watch is the immediate predecessor (no herd).
/// Shared: only earlier write-lock nodes block, the watch is the *last* of them, so a reader
/// wakes when the writer directly ahead of it goes, and never for earlier churn.
/// Leases(n): the first `n` hold; a later one waits for any of them to go.
pub fn standing(children: &[String], ours: &str, rule: Rule) -> Standing {
    // One pass, one number read per name, no sort: a waiter reads this after every deletion
    // ahead of it, and a line can hold thousands of nodes. Order is by sequence
    // number, then name, as `path::sort_by_sequence` sorts.
    let Some(our_number) = path::sequence(ours) else { return Standing::Missing };
    let us = (our_number, ours);
    let (mut found, mut ahead, mut blockers) = (false, 0usize, 0usize);
    let mut last_blocking: Option<(u64, &str)> = None;
    for child in children {
        let Some(number) = path::sequence(child) else { continue };
        let them = (number, child.as_str());
        if them == us {
            found = true;
        } else if them < us {
            ahead += 1;
            let blocks = match rule {
                Rule::Exclusive => true,
                Rule::Shared => child.contains(WRITE_NAME),
                Rule::Leases(_) => false,
            };
            if blocks {
                blockers += 1;
                if last_blocking.is_none_or(|last| them > last) {
                    last_blocking = Some(them);
                }
            }
        }
    }
    if !found {
        return Standing::Missing;
    }
    match (rule, last_blocking) {
        (Rule::Leases(max), _) if ahead < max => Standing::Holds,
        (Rule::Leases(_), _) => Standing::WaitsForAny,
        (_, None) => Standing::Holds,
        (_, Some((_, watch))) => Standing::Waits { watch: watch.to_string(), blockers },
    }
}

/// The first node in line among `children` (by sequence number, then name), if any.
pub fn first_in_line(children: &[String]) -> Option<&str> {
    children
        .iter()
        .filter_map(|child| path::sequence(child).map(|number| (number, child.as_str())))
        .min()
        .map(|(_, child)| child)
}

/// A fresh per-attempt GUID in the UUID text form Curator uses (36 characters, version 4 bits).
pub fn new_guid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // RandomState is seeded from the OS per process; mixing in a counter, the time and the pid
    // makes every call distinct without a dependency on a random-number crate.
    let mut words = [0u64; 2];
    for (i, word) in words.iter_mut().enumerate() {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
        hasher.write_u32(std::process::id());
        hasher.write_usize(i);
        *word = hasher.finish();
    }
    let hi = (words[0] & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000;
    let lo = (words[1] & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    )
}

/// The name prefix of a protected node: `_c_<guid>-<name>` (the server appends the sequence).
pub fn protected_name(guid: &str, name: &str) -> String {
    format!("{PROTECTED_PREFIX}{guid}-{name}")
}

/// The name after a protected node's `_c_<guid>-`, `None` for a name that is not protected.
pub fn strip_protection(child: &str) -> Option<&str> {
    let rest = child.strip_prefix(PROTECTED_PREFIX)?;
    // The GUID's text form is 36 characters, then `-`.
    rest.get(36..).and_then(|rest| rest.strip_prefix('-'))
}

/// True when `child` was created by the attempt with this GUID.
pub fn belongs_to(child: &str, guid: &str) -> bool {
    child.strip_prefix(PROTECTED_PREFIX).is_some_and(|rest| rest.starts_with(guid))
}

/// The default participant id: `<host>/<pid>/<n>`, where `n` counts the ids this process handed
/// out. Two participants never share one, even in one process (an id is what `Participants` and
/// `LeaderChanged` report, so it must tell them apart); the host name alone did not.
pub fn default_participant_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_string());
    format!("{host}/{}/{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protected_name_is_stripped_back_to_the_name_given() {
        let guid = new_guid();
        assert_eq!(
            strip_protection(&format!("{}0000000007", protected_name(&guid, "host-a"))),
            Some("host-a0000000007")
        );
        assert_eq!(strip_protection("host-a"), None);
        assert_eq!(strip_protection("_c_short-x"), None);
    }

    /// The definition `standing` must agree with: sort the line, find ours, look ahead.
    fn standing_by_sorting(children: &[String], ours: &str, rule: Rule) -> Standing {
        let mut line: Vec<&str> = children.iter().map(String::as_str).filter(|c| path::sequence(c).is_some()).collect();
        path::sort_by_sequence(&mut line);
        let Some(index) = line.iter().position(|c| *c == ours) else { return Standing::Missing };
        let ahead = &line[..index];
        let blocking: Vec<&str> = match rule {
            Rule::Exclusive => ahead.to_vec(),
            Rule::Shared => ahead.iter().copied().filter(|c| c.contains(WRITE_NAME)).collect(),
            Rule::Leases(max) if index < max => Vec::new(),
            Rule::Leases(_) => return Standing::WaitsForAny,
        };
        match blocking.last() {
            None => Standing::Holds,
            Some(watch) => Standing::Waits { watch: watch.to_string(), blockers: blocking.len() },
        }
    }

    #[test]
    fn the_first_in_line_is_the_lowest_number_whatever_the_name() {
        let children: Vec<String> =
            ["stray", "a-0000000007", "z-0000000003", "m-0000000005"].iter().map(|c| c.to_string()).collect();
        assert_eq!(first_in_line(&children), Some("z-0000000003"));
        assert_eq!(first_in_line(&["stray".to_string()]), None);
    }

    #[test]
    fn standing_agrees_with_sorting_the_line_on_random_lines() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..500 {
            let len = (next() % 40) as usize;
            let mut children: Vec<String> = (0..len)
                .map(|_| {
                    let kind = if next() % 3 == 0 { WRITE_NAME } else { READ_NAME };
                    format!("_c_{:x}-{kind}{:010}", next() % 1000, next() % 60)
                })
                .collect();
            if next() % 5 == 0 {
                children.push("stray".to_string());
            }
            let ours = if !children.is_empty() && next() % 8 != 0 {
                children[(next() % children.len() as u64) as usize].clone()
            } else {
                "_c_gone-lock-0000000007".to_string()
            };
            for rule in [Rule::Exclusive, Rule::Shared, Rule::Leases(1), Rule::Leases(3)] {
                assert_eq!(
                    standing(&children, &ours, rule),
                    standing_by_sorting(&children, &ours, rule),
                    "{rule:?} {ours} in {children:?}"
                );
            }
        }
    }

    #[test]
    fn default_participant_ids_tell_two_participants_of_one_process_apart() {
        let (a, b) = (default_participant_id(), default_participant_id());
        assert_ne!(a, b);
        assert!(a.contains(&format!("/{}/", std::process::id())), "{a}");
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn exclusive_watches_the_predecessor_only() {
        let children = names(&["_c_b-lock-0000000003", "_c_a-lock-0000000001", "_c_c-lock-0000000002"]);
        assert_eq!(standing(&children, "_c_a-lock-0000000001", Rule::Exclusive), Standing::Holds);
        assert_eq!(
            standing(&children, "_c_b-lock-0000000003", Rule::Exclusive),
            Standing::Waits { watch: "_c_c-lock-0000000002".into(), blockers: 2 }
        );
        assert_eq!(standing(&children, "_c_z-lock-0000000009", Rule::Exclusive), Standing::Missing);
    }

    #[test]
    fn readers_wait_only_on_the_last_earlier_writer() {
        let children = names(&[
            "_c_1-__READ__0000000001",
            "_c_2-__WRIT__0000000002",
            "_c_3-__READ__0000000003",
            "_c_4-__WRIT__0000000004",
            "_c_5-__READ__0000000005",
            "_c_6-__READ__0000000006",
        ]);
        assert_eq!(standing(&children, "_c_1-__READ__0000000001", Rule::Shared), Standing::Holds);
        assert_eq!(
            standing(&children, "_c_3-__READ__0000000003", Rule::Shared),
            Standing::Waits { watch: "_c_2-__WRIT__0000000002".into(), blockers: 1 }
        );
        assert_eq!(
            standing(&children, "_c_6-__READ__0000000006", Rule::Shared),
            Standing::Waits { watch: "_c_4-__WRIT__0000000004".into(), blockers: 2 }
        );
        // A writer waits on its predecessor, reader or not.
        assert_eq!(
            standing(&children, "_c_4-__WRIT__0000000004", Rule::Exclusive),
            Standing::Waits { watch: "_c_3-__READ__0000000003".into(), blockers: 3 }
        );
    }

    #[test]
    fn leases_hold_for_the_first_n() {
        let children = names(&["_c_a-lease-0000000001", "_c_b-lease-0000000002", "_c_c-lease-0000000003"]);
        assert_eq!(standing(&children, "_c_b-lease-0000000002", Rule::Leases(2)), Standing::Holds);
        assert_eq!(standing(&children, "_c_c-lease-0000000003", Rule::Leases(2)), Standing::WaitsForAny);
        assert_eq!(standing(&children, "_c_c-lease-0000000003", Rule::Leases(3)), Standing::Holds);
    }

    #[test]
    fn guids_are_uuid_shaped_and_distinct() {
        let a = new_guid();
        let b = new_guid();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.matches('-').count(), 4);
        let name = protected_name(&a, LOCK_NAME);
        assert!(belongs_to(&format!("{name}0000000001"), &a));
        assert!(!belongs_to(&format!("{name}0000000001"), &b));
    }
}

/// Listings another process wrote into, read without a panic (issue 39, item 12).
#[cfg(test)]
mod bad_input {
    use proptest::prelude::*;

    use super::*;

    /// A name of any characters, or one ending in a sequence number after any prefix.
    fn child() -> impl Strategy<Value = String> {
        prop_oneof![".{0,30}", (".{0,20}", 0u64..20_000_000_000).prop_map(|(prefix, n)| format!("{prefix}{n:010}"))]
    }

    proptest! {
        #[test]
        fn any_listing_gives_a_standing_that_names_a_listed_node(
            children in prop::collection::vec(child(), 0..20),
            pick in any::<prop::sample::Index>(),
            leases in 1usize..4,
        ) {
            let ours = if children.is_empty() { "lock-0000000001".to_owned() } else { pick.get(&children).clone() };
            for rule in [Rule::Exclusive, Rule::Shared, Rule::Leases(leases)] {
                match standing(&children, &ours, rule) {
                    Standing::Waits { watch, blockers } => {
                        prop_assert!(children.contains(&watch) && watch != ours && blockers >= 1);
                    }
                    Standing::Holds | Standing::WaitsForAny => prop_assert!(children.contains(&ours)),
                    Standing::Missing => prop_assert!(!children.contains(&ours) || path::sequence(&ours).is_none()),
                }
            }
            if let Some(first) = first_in_line(&children) {
                prop_assert!(children.iter().any(|c| c == first));
            }
            if let Some(name) = strip_protection(&ours) {
                prop_assert!(ours.ends_with(name));
            }
            prop_assert!(!belongs_to(&ours, "") || ours.starts_with(PROTECTED_PREFIX));
        }
    }
}
