//! Every request type against a real ZooKeeper, including the errors each can return.
#![cfg(feature = "testkit")]

use crate::common;

use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::election::{ElectionActor, ElectionConfig, Resign};
use actix_zookeeper::lock::{Acquire, LockActor, LockConfig, Release};
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{ServerOptions, TestZooKeeper, ZkServer};
use actix_zookeeper::{Acl, Permission, path};
use common::*;

#[actix_rt::test]
async fn every_request_type_and_its_errors() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("a ZooKeeper server");
    let (s, _events) = connected(config(&zk.connect_string(), "requests")).await;

    // create: persistent, then the error for an existing node and for a missing parent.
    let created = s.create("/app", "v1", CreateMode::Persistent).await.expect("create /app");
    assert_eq!(created.path, "/app");
    assert_eq!(created.sequence, None);
    assert!(created.stat.czxid > 0, "create returns the stat with the creating zxid");
    let err = s.create("/app", "again", CreateMode::Persistent).await.unwrap_err();
    assert_eq!(err, Error::NodeExists { path: "/app".into() });
    let err = s.create("/missing/child", "", CreateMode::Persistent).await.unwrap_err();
    assert_eq!(err, Error::NoNode { path: "/missing/child".into() });

    // sequential variants: the returned path carries the 10-digit suffix, in creation order.
    let a = s.create("/app/seq-", "", CreateMode::PersistentSequential).await.expect("seq a");
    let b = s.create("/app/seq-", "", CreateMode::EphemeralSequential).await.expect("seq b");
    assert_eq!(path::sequence(&a.path), a.sequence);
    assert_eq!(a.path.len(), "/app/seq-".len() + 10);
    assert!(b.sequence > a.sequence);
    assert_eq!(b.stat.ephemeral_owner, s.session().await.expect("session").session_id.0);

    // ephemeral, container and TTL nodes.
    s.create("/app/eph", "", CreateMode::Ephemeral).await.expect("ephemeral");
    s.create("/app/box", "", CreateMode::Container).await.expect("container");
    let ttl = s.create("/app/ttl", "", CreateMode::PersistentWithTtl(Duration::from_secs(60))).await;
    assert!(ttl.is_ok(), "TTL nodes need extendedTypesEnabled on the server: {ttl:?}");
    let eph = s.exists("/app/eph").await.expect("exists").expect("ephemeral exists");
    assert_ne!(eph.ephemeral_owner, 0);

    // get / set data with versions.
    let node = s.get_data("/app").await.expect("get /app");
    assert_eq!(node.data, b"v1");
    assert_eq!(node.stat.version, 0);
    let stat = s.set_data("/app", "v2", Some(0)).await.expect("set at version 0");
    assert_eq!(stat.version, 1);
    let err = s.set_data("/app", "v3", Some(0)).await.unwrap_err();
    assert_eq!(err, Error::BadVersion { path: "/app".into() });
    assert_eq!(s.get_data("/app").await.expect("get").data, b"v2");
    let err = s.get_data("/nope").await.unwrap_err();
    assert_eq!(err, Error::NoNode { path: "/nope".into() });
    let err = s.set_data("/nope", "x", None).await.unwrap_err();
    assert_eq!(err, Error::NoNode { path: "/nope".into() });

    // exists.
    assert!(s.exists("/nope").await.expect("exists").is_none());

    // children, with the parent's stat.
    let children = s.children("/app").await.expect("children");
    let mut names = children.names.clone();
    names.sort();
    assert_eq!(names, ["box", "eph", "seq-0000000000", "seq-0000000001", "ttl"]);
    assert_eq!(children.stat.num_children, 5);
    assert!(names.contains(&"eph".to_string()));
    let err = s.children("/nope").await.unwrap_err();
    assert_eq!(err, Error::NoNode { path: "/nope".into() });

    // delete: version mismatch, not empty, missing, then success.
    let err = s.delete("/app", None).await.unwrap_err();
    assert_eq!(err, Error::NotEmpty { path: "/app".into() });
    let err = s.delete("/app/eph", Some(7)).await.unwrap_err();
    assert_eq!(err, Error::BadVersion { path: "/app/eph".into() });
    s.delete("/app/eph", Some(0)).await.expect("delete at version");
    let err = s.delete("/app/eph", None).await.unwrap_err();
    assert_eq!(err, Error::NoNode { path: "/app/eph".into() });

    // sync.
    s.sync("/app").await.expect("sync");

    // ensure path (mkdir -p), idempotent.
    s.ensure_path("/deep/a/b/c").await.expect("ensure path");
    s.ensure_path("/deep/a/b/c").await.expect("ensure path twice");
    assert!(s.exists("/deep/a/b/c").await.expect("exists").is_some());

    // delete recursive, and of a missing node.
    s.create("/deep/a/x", "", CreateMode::Persistent).await.expect("x");
    s.delete_recursive("/deep").await.expect("delete recursive");
    assert!(s.exists("/deep").await.expect("exists").is_none());
    s.delete_recursive("/deep").await.expect("deleting a missing tree is fine");

    s.close().await;
}

#[actix_rt::test]
async fn multi_is_atomic_and_names_the_failed_operation() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("a ZooKeeper server");
    let (s, _events) = connected(config(&zk.connect_string(), "multi")).await;
    s.create("/m", "0", CreateMode::Persistent).await.expect("create /m");

    let results = s
        .multi(vec![
            Op::Check { path: "/m".into(), version: 0 },
            Op::Create { path: "/m/a".into(), data: b"a".to_vec(), mode: CreateMode::Persistent },
            Op::Create { path: "/m/s-".into(), data: vec![], mode: CreateMode::PersistentSequential },
            Op::SetData { path: "/m".into(), data: b"1".to_vec(), version: Some(0) },
            Op::Delete { path: "/m/a".into(), version: None },
        ])
        .await
        .expect("multi");
    assert_eq!(results.len(), 5);
    assert_eq!(results[0], OpResult::Checked);
    assert!(matches!(&results[1], OpResult::Created { path, .. } if path == "/m/a"));
    assert!(matches!(&results[2], OpResult::Created { path, .. } if path.starts_with("/m/s-") && path.len() == 15));
    assert!(matches!(&results[3], OpResult::DataSet { stat } if stat.version == 1));
    assert_eq!(results[4], OpResult::Deleted);

    // A failing check at index 1 rolls back the create at index 0.
    let err = s
        .multi(vec![
            Op::Create { path: "/m/b".into(), data: vec![], mode: CreateMode::Persistent },
            Op::Check { path: "/m".into(), version: 0 },
        ])
        .await
        .unwrap_err();
    match &err {
        Error::Multi { index, source } => {
            assert_eq!(*index, 1);
            assert_eq!(**source, Error::BadVersion { path: "/m".into() });
        }
        other => panic!("expected a multi error, got {other:?}"),
    }
    assert!(s.exists("/m/b").await.expect("exists").is_none(), "nothing of a failed multi is applied");

    // The last operation failing: the server's index is the request's last one, and the error
    // names that operation's path (the translation checks the server's
    // index against the request; a real server's must still come through unchanged).
    let err = s
        .multi(vec![
            Op::Check { path: "/m".into(), version: 1 },
            Op::SetData { path: "/m".into(), data: b"2".to_vec(), version: Some(1) },
            Op::Delete { path: "/m/nothing".into(), version: None },
        ])
        .await
        .unwrap_err();
    assert_eq!(err, Error::Multi { index: 2, source: Box::new(Error::NoNode { path: "/m/nothing".into() }) });
    assert!(err.was_not_applied() && !err.outcome_unknown(), "a refused multi applied nothing");
    assert_eq!(s.get_data("/m").await.expect("/m").data, b"1", "the set at index 1 was rolled back");
    // An empty multi sends nothing and has no results.
    assert_eq!(s.multi(vec![]).await.expect("empty multi"), Vec::<OpResult>::new());

    // Bad input inside a multi is caught before sending, with the index.
    let err = s.multi(vec![Op::Delete { path: "bad".into(), version: None }]).await.unwrap_err();
    assert!(matches!(&err, Error::Multi { index: 0, source } if matches!(**source, Error::InvalidPath { .. })));
    s.close().await;
}

#[actix_rt::test]
async fn bad_input_gets_typed_errors_naming_the_path() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("a ZooKeeper server");
    let (s, _events) = connected(config(&zk.connect_string(), "badinput")).await;

    // Invalid paths never reach the server.
    for bad in ["relative", "/trailing/", "/double//slash", "/dot/./x", "/nul\0"] {
        let err = bounded("create with a bad path", s.create(bad, "", CreateMode::Persistent)).await.unwrap_err();
        assert!(matches!(&err, Error::InvalidPath { path, .. } if path == bad), "{bad:?}: {err:?}");
        let err = bounded("get with a bad path", s.get_data(bad)).await.unwrap_err();
        assert_eq!(err.path(), Some(bad));
    }

    // Data over the limit is refused before sending, and the session stays healthy.
    let big = vec![7u8; DEFAULT_LIMIT + 1];
    let err = bounded("oversized create", s.create("/big", big.clone(), CreateMode::Persistent)).await.unwrap_err();
    assert!(
        matches!(&err, Error::DataTooLarge { path, size, limit } if path == "/big" && *size > DEFAULT_LIMIT + 1 && *limit == DEFAULT_LIMIT),
        "{err:?}"
    );
    s.create("/big", "", CreateMode::Persistent).await.expect("create /big");
    let err = bounded("oversized set", s.set_data("/big", big, None)).await.unwrap_err();
    assert!(matches!(&err, Error::DataTooLarge { path, .. } if path == "/big"), "{err:?}");
    // Just under the limit is accepted by the server (nothing silently truncated).
    let fits = vec![1u8; DEFAULT_LIMIT - 1024];
    bounded("large set", s.set_data("/big", fits.clone(), None)).await.expect("a payload under the limit");
    assert_eq!(s.get_data("/big").await.expect("get").data.len(), fits.len());

    // A child under an ephemeral node.
    s.create("/eph", "", CreateMode::Ephemeral).await.expect("ephemeral");
    let err = bounded("child of ephemeral", s.create("/eph/child", "", CreateMode::Persistent)).await.unwrap_err();
    assert_eq!(err, Error::NoChildrenForEphemerals { path: "/eph/child".into() });
    s.close().await;
}

const DEFAULT_LIMIT: usize = actix_zookeeper::session::DEFAULT_MAX_REQUEST_SIZE;

#[actix_rt::test]
async fn digest_acl_denies_other_identities() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("a ZooKeeper server");
    let root = actix_zookeeper::testkit::unique_root("acl");
    let owner_config =
        SessionConfig::new(zk.connect_string()).with_chroot(root.clone()).with_digest_auth("alice", "s3cret");
    let (owner, _e1) = connected(owner_config).await;
    // "auth" ACL = whoever is authenticated as the creator (alice, digest scheme).
    let creator_only = vec![Acl::new_const(Permission::ALL, "auth", "")];
    owner
        .request(
            actix_zookeeper::session::requests::Create::new("/secret", "x", CreateMode::Persistent)
                .with_acl(creator_only),
        )
        .await
        .expect("create with digest ACL");
    assert_eq!(owner.get_data("/secret").await.expect("owner reads").data, b"x");

    let (anonymous, _e2) = connected(SessionConfig::new(zk.connect_string()).with_chroot(root.clone())).await;
    let err = bounded("anonymous read", anonymous.get_data("/secret")).await.unwrap_err();
    assert_eq!(err, Error::NoAuth { path: "/secret".into() });
    let err = bounded("anonymous write", anonymous.set_data("/secret", "y", None)).await.unwrap_err();
    assert_eq!(err, Error::NoAuth { path: "/secret".into() });

    let wrong = SessionConfig::new(zk.connect_string()).with_chroot(root).with_digest_auth("alice", "wrong");
    let (intruder, _e3) = connected(wrong).await;
    let err = bounded("wrong password", intruder.get_data("/secret")).await.unwrap_err();
    assert_eq!(err, Error::NoAuth { path: "/secret".into() });
    assert_eq!(owner.get_data("/secret").await.expect("still intact").data, b"x");

    owner.close().await;
    anonymous.close().await;
    intruder.close().await;
}

#[actix_rt::test]
async fn requests_from_one_sender_reach_the_server_in_order() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("a ZooKeeper server");
    let (s, _events) = connected(config(&zk.connect_string(), "order")).await;
    s.create("/q", "", CreateMode::Persistent).await.expect("create /q");
    // Send 200 sequential creates without awaiting in between, then a getChildren in the same
    // batch: it must see every one, and the sequence numbers must follow the send order.
    let creates: Vec<_> =
        (0..200).map(|i| s.create("/q/n-", format!("{i}"), CreateMode::PersistentSequential)).collect();
    let listing = s.children("/q");
    let mut previous = None;
    for (i, fut) in creates.into_iter().enumerate() {
        let created = fut.await.expect("pipelined create");
        let data = s.get_data(&created.path).await.expect("read back").data;
        assert_eq!(data, format!("{i}").as_bytes(), "node {} holds the data of request {i}", created.path);
        assert!(created.sequence > previous, "sequence numbers follow the send order");
        previous = created.sequence;
    }
    assert_eq!(listing.await.expect("children").names.len(), 200, "the listing was sent after all creates");
    s.close().await;
}

#[actix_rt::test]
async fn requests_wait_for_the_first_session_and_close_fails_them() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("a ZooKeeper server");
    // Sent before the session is up: queued and sent, in order, once it is.
    let s = SessionHandle::start(config(&zk.connect_string(), "early")).expect("config");
    let first = s.create("/early", "1", CreateMode::Persistent);
    let second = s.set_data("/early", "2", Some(0));
    first.await.expect("queued create");
    second.await.expect("queued set_data, after the create");
    assert_eq!(s.get_data("/early").await.expect("get").data, b"2");
    s.close().await;
    assert_eq!(s.get_data("/early").await.unwrap_err(), Error::Closed);

    // A bad config is refused at once.
    let err = SessionHandle::start(SessionConfig::new("127.0.0.1:1/bad//chroot")).unwrap_err();
    assert!(matches!(err, Error::InvalidPath { .. }));
}

/// Regression: the client's limit was 1 MiB of data, above the server's 0xfffff-byte
/// request limit, so a ~1 MiB write passed the check, the server closed the connection, and the
/// caller saw `ConnectionLoss` (and every recipe on the session a suspension). Whole requests are
/// now measured as the server measures them: the largest that fits is accepted, one byte more is
/// refused before sending, and a client allowed to send that one byte more loses its connection.
#[actix_rt::test]
async fn the_request_limit_is_the_servers() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("a ZooKeeper server");
    let root = actix_zookeeper::testkit::unique_root("request-limit");
    let (s, events) = connected(SessionConfig::new(zk.connect_string()).with_chroot(root.clone())).await;
    s.create("/big", "", CreateMode::Persistent).await.expect("create /big");
    // A setData is header (8) + path (4 + chroot + "/big") + data (4 + n) + version (4).
    let overhead = 8 + 4 + root.len() + "/big".len() + 4 + 4;
    let largest = DEFAULT_LIMIT - overhead;

    let near_a_mebibyte = vec![1u8; 1024 * 1024 - 10];
    let err = bounded("a write of 1 MiB - 10 bytes", s.set_data("/big", near_a_mebibyte, None)).await.unwrap_err();
    assert!(matches!(&err, Error::DataTooLarge { path, .. } if path == "/big"), "refused before sending: {err:?}");
    let err = bounded("one byte too many", s.set_data("/big", vec![1u8; largest + 1], None)).await.unwrap_err();
    assert!(matches!(err, Error::DataTooLarge { size, .. } if size == DEFAULT_LIMIT + 1), "{err:?}");
    bounded("the largest request that fits", s.set_data("/big", vec![1u8; largest], None)).await.expect("accepted");
    assert_eq!(s.get_data("/big").await.expect("read").data.len(), largest);
    assert!(
        !events.snapshot().iter().any(|e| matches!(e, SessionEvent::Suspended { .. })),
        "the connection never dropped: {:?}",
        events.snapshot()
    );
    s.close().await;

    // The control: a client that lets the byte more through is cut off by the server.
    let lax = SessionConfig::new(zk.connect_string()).with_chroot(root).with_max_request_size(DEFAULT_LIMIT + 100);
    let (lax, _) = connected(lax).await;
    let err = bounded("one byte too many, sent", lax.set_data("/big", vec![1u8; largest + 1], None)).await.unwrap_err();
    assert!(matches!(err, Error::ConnectionLoss { .. }), "the server refuses it: {err:?}");
    lax.close().await;
}

/// Container and TTL nodes are what they say (they were once only created, never seen to be
/// reaped; the server reports `ephemeralOwner` 0 for both, so only the server's reaping tells).
/// The recipes' directories are containers, as Curator makes them: empty, they go.
#[actix_rt::test]
async fn ttl_and_container_nodes_are_reaped_and_persistent_ones_are_not() {
    init_tracing();
    let server =
        ZkServer::start_with(ServerOptions::default().with_container_check_interval(Duration::from_millis(100)))
            .expect("a ZooKeeper server");
    let (s, _events) = connected(config(&server.connect_string(), "reaping")).await;

    s.create("/box", "", CreateMode::Container).await.expect("container");
    s.create("/box/item", "", CreateMode::Persistent).await.expect("child");
    s.create("/plain", "", CreateMode::Persistent).await.expect("persistent");
    s.create("/plain/item", "", CreateMode::Persistent).await.expect("child");
    s.create("/ttl", "", CreateMode::PersistentWithTtl(Duration::from_millis(300))).await.expect("TTL node");
    s.delete("/box/item", None).await.expect("empty the container");
    s.delete("/plain/item", None).await.expect("empty the persistent node");
    gone(&s, "/box").await;
    gone(&s, "/ttl").await;
    // The control: a persistent node, emptied at the same moment, outlives both.
    assert!(s.exists("/plain").await.expect("exists").is_some(), "a persistent node was reaped");

    // Recipe directories, parents included, are containers.
    let lock = LockActor::new(s.clone(), LockConfig::new("/locks/a/b")).start();
    lock.send(Acquire::default()).await.expect("actor").expect("acquire");
    lock.send(Release).await.expect("actor").expect("release");
    gone(&s, "/locks/a/b").await;
    gone(&s, "/locks").await;
    let election = ElectionActor::new(s.clone(), ElectionConfig::new("/elections/e")).start();
    election.send(Resign { requeue: false }).await.expect("actor").expect("leave");
    gone(&s, "/elections").await;
    s.close().await;
}

/// Waits (bounded) until `path` no longer exists.
async fn gone(s: &SessionHandle, path: &str) {
    wait_until_async(&format!("{path} reaped"), || async { s.exists(path).await.expect("exists").is_none() }).await;
}
