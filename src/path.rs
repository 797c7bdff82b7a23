//! ZooKeeper paths: validation, joining, parents, and sequence numbers.
//!
//! Owns: the rules of what a valid znode path is (ZooKeeper's `PathUtils.validatePath`), and the
//! parsing and ordering of sequential node names by their sequence suffix only.
//! Does not own: chroot handling (the session applies its chroot) or any I/O.
//!
//! Ordering matters for every recipe: the official `WriteLock` recipe's `ZNodeName` compared the
//! prefix before the sequence number, so two contenders with different prefixes could both think
//! they were first. Here, [`sort_by_sequence`] compares the 10-digit suffix and nothing else.

use crate::error::Error;

/// Checks a path against ZooKeeper's rules. `sequential` allows a trailing `/`, because the
/// server appends the sequence number to the name given.
pub fn validate(path: &str, sequential: bool) -> Result<(), Error> {
    let invalid = |reason: &str| Error::InvalidPath { path: path.to_string(), reason: reason.to_string() };
    if path.is_empty() {
        return Err(invalid("path is empty"));
    }
    if !path.starts_with('/') {
        return Err(invalid("path must start with '/'"));
    }
    if path.len() == 1 {
        return Ok(());
    }
    if path.ends_with('/') && !sequential {
        return Err(invalid("path must not end with '/'"));
    }
    let body = if sequential { path.strip_suffix('/').unwrap_or(path) } else { path };
    for (i, segment) in body.split('/').enumerate().skip(1) {
        match segment {
            "" => return Err(invalid(&format!("empty segment at position {i}"))),
            "." | ".." => return Err(invalid(&format!("relative segment {segment:?} is not allowed"))),
            _ => {}
        }
    }
    if let Some(c) = path.chars().find(|&c| forbidden_char(c)) {
        return Err(invalid(&format!("character U+{:04X} is not allowed", c as u32)));
    }
    Ok(())
}

// The same ranges as ZooKeeper's PathUtils: NUL, control characters, and code points that
// Java strings cannot round-trip safely. PathUtils sees a Java string, where a code point above
// U+FFFF is a surrogate pair (U+D800..U+DFFF), so the server refuses those too.
fn forbidden_char(c: char) -> bool {
    matches!(c as u32, 0x0000..=0x001F | 0x007F..=0x009F | 0xD800..=0xF8FF | 0xFFF0..)
}

/// Checks that `name` can be one node's name (a group member's id, a service's name or an
/// instance's id): `Err` says why not in a few words.
pub fn validate_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("it is empty");
    }
    if name.contains('/') {
        return Err("it contains '/'");
    }
    if name == "." || name == ".." {
        return Err("it is a relative name");
    }
    if name.chars().any(forbidden_char) {
        return Err("it contains a character ZooKeeper does not allow");
    }
    Ok(())
}

/// Joins a parent path and a child name: `join("/a", "b") == "/a/b"`, `join("/", "b") == "/b"`.
pub fn join(parent: &str, child: &str) -> String {
    let child = child.trim_start_matches('/');
    if parent.ends_with('/') { format!("{parent}{child}") } else { format!("{parent}/{child}") }
}

/// The parent of a path, `None` for the root.
pub fn parent(path: &str) -> Option<&str> {
    if path == "/" || path.is_empty() {
        return None;
    }
    match path.trim_end_matches('/').rfind('/') {
        Some(0) => Some("/"),
        Some(i) => Some(&path[..i]),
        None => None,
    }
}

/// The last segment of a path: `name("/a/b") == "b"`.
pub fn name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Width of the suffix ZooKeeper appends to sequential nodes (`%010d`).
pub const SEQUENCE_WIDTH: usize = 10;

/// The sequence number of a sequential node name (or path): its trailing 10 digits.
///
/// Names from ZooKeeper 3.x end in exactly 10 digits while the counter fits in an `i32`; a
/// longer run of trailing digits (the 19-digit form of 64-bit counters) is read whole.
pub fn sequence(name: &str) -> Option<u64> {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits < SEQUENCE_WIDTH {
        return None;
    }
    name[name.len() - digits..].parse().ok()
}

/// Sorts sequential node names by their sequence number only; names without a sequence number
/// go last, in name order, so that a stray node never sorts ahead of a contender.
pub fn sort_by_sequence<S: AsRef<str>>(names: &mut [S]) {
    // Each name's number is read once, not once per comparison: with a line of 1,000 contenders
    // the comparisons parsed 20,000 numbers per listing, on the path of every hand-off.
    let key = |name: &S| sequence(name.as_ref()).map_or((1u8, 0u64), |number| (0, number));
    names.sort_by_cached_key(key);
    // Names sharing a key (those without a number; equal numbers cannot come from one parent)
    // in name order.
    let mut start = 0;
    while start < names.len() {
        let first = key(&names[start]);
        let end = start + names[start..].iter().take_while(|name| key(name) == first).count();
        if end - start > 1 {
            names[start..end].sort_by(|a, b| a.as_ref().cmp(b.as_ref()));
        }
        start = end;
    }
}

/// The sequential names among `names` (those ending in a sequence number), in sequence order.
pub fn sequential_in_order(names: Vec<String>) -> Vec<String> {
    let mut sequential: Vec<String> = names.into_iter().filter(|n| sequence(n).is_some()).collect();
    sort_by_sequence(&mut sequential);
    sequential
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_follows_zookeeper_rules() {
        for ok in ["/", "/a", "/a/b", "/a-b_c.d", "/zookeeper", "/a/..b", "/über"] {
            assert!(validate(ok, false).is_ok(), "{ok} should be valid");
        }
        let bad = ["", "a", "/a/", "//", "/a//b", "/a/./b", "/a/..", "/a\0b", "/a\u{1}", "/\u{FFF5}", "/\u{1F600}"];
        for bad in bad {
            assert!(matches!(validate(bad, false), Err(Error::InvalidPath { .. })), "{bad:?} should be invalid");
        }
        assert!(validate("/locks/lock-", true).is_ok());
        assert!(validate("/locks/", true).is_ok());
        assert!(validate("/locks//", true).is_err());
    }

    #[test]
    fn invalid_path_error_names_the_path() {
        let err = validate("/a//b", false).unwrap_err();
        assert_eq!(err.path(), Some("/a//b"));
        assert!(err.to_string().contains("/a//b"));
    }

    #[test]
    fn join_parent_name() {
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
        assert_eq!(join("/a/", "/b"), "/a/b");
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("/a"), Some("/"));
        assert_eq!(parent("/"), None);
        assert_eq!(name("/a/b"), "b");
    }

    #[test]
    fn sequence_parsing() {
        assert_eq!(sequence("_c_4f1e-lock-0000000042"), Some(42));
        assert_eq!(sequence("/dir/x-0000000007"), Some(7));
        assert_eq!(sequence("lock-42"), None);
        assert_eq!(sequence("plain"), None);
        assert_eq!(sequence("x-0000000000000000123"), Some(123));
    }

    #[test]
    fn ordering_uses_the_sequence_only() {
        // The official recipe's bug: "z-...01" must sort before "a-...02" although "a" < "z".
        let mut names = vec!["a-0000000002", "z-0000000001", "stray", "m-0000000010"];
        sort_by_sequence(&mut names);
        assert_eq!(names, ["z-0000000001", "a-0000000002", "m-0000000010", "stray"]);
        let owned = names.iter().map(|n| n.to_string()).collect();
        assert_eq!(sequential_in_order(owned), ["z-0000000001", "a-0000000002", "m-0000000010"]);
    }

    #[test]
    fn names_without_a_number_go_last_in_name_order_and_a_long_line_sorts_by_number() {
        let mut names = vec!["zeta", "b-0000000003", "alpha", "a-0000000001", "mid", "x-0000000002"];
        sort_by_sequence(&mut names);
        assert_eq!(names, ["a-0000000001", "x-0000000002", "b-0000000003", "alpha", "mid", "zeta"]);
        // 1,000 names listed in no particular order (the server's listing is a hash set).
        let mut line: Vec<String> =
            (0..1000u64).map(|i| format!("_c_{:x}-lock-{:010}", i * 7919 % 1000, (i * 7919) % 1000)).collect();
        sort_by_sequence(&mut line);
        let numbers: Vec<u64> = line.iter().map(|n| sequence(n).expect("numbered")).collect();
        assert_eq!(numbers, (0..1000).collect::<Vec<_>>());
    }
}

/// Names another process wrote, read without a panic (issue 39, item 12).
#[cfg(test)]
mod bad_input {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_name_has_a_number_or_none_and_sorting_keeps_every_name(
            names in prop::collection::vec(".{0,40}", 0..30),
        ) {
            for name in &names {
                if let Some(number) = sequence(name) {
                    prop_assert!(name.ends_with(&number.to_string()));
                }
            }
            let mut sorted = names.clone();
            sort_by_sequence(&mut sorted);
            let (mut a, mut b) = (names.clone(), sorted.clone());
            a.sort();
            b.sort();
            prop_assert_eq!(a, b, "sorting neither loses nor invents a name");
            let numbers: Vec<Option<u64>> = sorted.iter().map(|n| sequence(n)).collect();
            let numbered = numbers.iter().take_while(|n| n.is_some()).count();
            prop_assert!(numbers[numbered..].iter().all(Option::is_none), "numbered names first");
            prop_assert!(numbers[..numbered].windows(2).all(|w| w[0] <= w[1]), "in number order");
            prop_assert_eq!(sequential_in_order(names).len(), numbered);
        }

        #[test]
        fn any_path_is_checked_without_a_panic(path in ".{0,60}", sequential: bool) {
            if validate(&path, sequential).is_ok() {
                prop_assert!(path.starts_with('/'));
            }
            let _ = (validate_name(&path), parent(&path), name(&path));
        }
    }
}
