//! How many bytes a request takes on the wire, so that one the server would refuse is never sent.
//!
//! Owns: the jute encoding sizes of the write requests and of a whole `multi`. The server
//! closes the connection on any request longer than its `jute.maxbuffer` (0xfffff bytes by
//! default), a `multi` counted whole: every recipe on the session would be suspended, and a
//! request retried after the reconnect would close it again. Does not own the limit (that is
//! [`SessionConfig::max_request_size`](super::SessionConfig::max_request_size)).

use super::requests::{Acl, Op};

/// Request header: xid and op type.
const HEADER: usize = 8;
/// A `multi`'s header before each op and after the last: type, done flag, error.
const MULTI_HEADER: usize = 4 + 1 + 4;

fn string(s: &str, chroot: usize) -> usize {
    4 + chroot + s.len()
}

fn buffer(data: &[u8]) -> usize {
    4 + data.len()
}

fn acls(acl: &[Acl]) -> usize {
    4 + acl.iter().map(|a| 4 + 4 + a.scheme().len() + 4 + a.id().len()).sum::<usize>()
}

/// The body of a create (path, data, ACL, flags).
pub(crate) fn create(path: &str, data: &[u8], acl: &[Acl], chroot: usize) -> usize {
    HEADER + string(path, chroot) + buffer(data) + acls(acl) + 4
}

/// A `setData` (path, data, version).
pub(crate) fn set_data(path: &str, data: &[u8], chroot: usize) -> usize {
    HEADER + string(path, chroot) + buffer(data) + 4
}

/// A whole `multi` of `ops`, each created node with `acl`.
pub(crate) fn multi(ops: &[Op], acl: &[Acl], chroot: usize) -> usize {
    let body: usize = ops
        .iter()
        .map(|op| {
            MULTI_HEADER
                + match op {
                    Op::Create { path, data, .. } => create(path, data, acl, chroot) - HEADER,
                    Op::SetData { path, data, .. } => set_data(path, data, chroot) - HEADER,
                    Op::Delete { path, .. } | Op::Check { path, .. } => string(path, chroot) + 4,
                }
        })
        .sum();
    HEADER + body + MULTI_HEADER
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::requests::CreateMode;

    #[test]
    fn a_multi_costs_more_than_its_payloads() {
        let data = vec![0u8; 1000];
        let ops = vec![
            Op::Delete { path: "/q/claims/qn-0000000001".into(), version: None },
            Op::SetData { path: "/q/qn-0000000001".into(), data: data.clone(), version: Some(0) },
            Op::Create { path: "/dlq/qn-".into(), data, mode: CreateMode::PersistentSequential },
        ];
        let acl = vec![Acl::new_const(zookeeper_client::Permission::ALL, "world", "anyone")];
        let size = multi(&ops, &acl, 0);
        assert!(size > 2000 + 3 * MULTI_HEADER, "{size}");
        assert_eq!(multi(&ops, &acl, 5), size + 3 * 5, "the chroot is sent with every path");
    }

    #[test]
    fn a_create_counts_path_data_acl_and_flags() {
        let acl = vec![Acl::new_const(zookeeper_client::Permission::ALL, "world", "anyone")];
        // header 8, path 4+2, data 4+3, acl 4+(4+4+5+4+6), flags 4
        assert_eq!(create("/a", b"abc", &acl, 0), 8 + 6 + 7 + 27 + 4);
    }
}
