//! Recipe nodes carry the session's default ACL: with a digest ACL, another identity
//! can neither delete a lock node nor read a task's payload. The control: the same nodes made
//! under the default world ACL are open to that identity, so the refusals come from the ACL.
#![cfg(feature = "testkit")]

use crate::common;

use actix::prelude::*;
use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::tasks::TaskClient;
use actix_zookeeper::testkit::{TestZooKeeper, unique_root};
use actix_zookeeper::{Acl, Error, Permission};
use common::*;

/// Alice's lock node and task payload, made on a session whose default ACL is `acl`; what
/// Mallory (another digest identity) may do with them.
struct Reach {
    read_lock_node: Result<(), Error>,
    delete_lock_node: Result<(), Error>,
    read_payload: Result<(), Error>,
}

async fn mallory_on_alices_nodes(acl: Option<Vec<Acl>>, test: &str) -> Reach {
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root(test);
    let mut alice_config = SessionConfig::new(zk.connect_string()).with_digest_auth("alice", "alice-secret");
    if let Some(acl) = acl {
        alice_config = alice_config.with_default_acl(acl);
    }
    let (alice, _) = connected(alice_config).await;
    let (mallory, _) =
        connected(SessionConfig::new(zk.connect_string()).with_digest_auth("mallory", "mallory-secret")).await;

    let lock = LockActor::new(alice.clone(), LockConfig::new(format!("{root}/locks/ledger"))).start();
    let grant = lock.send(Acquire::default()).await.expect("actor").expect("alice holds the lock");
    let tasks = TaskClient::new(alice.clone(), &format!("{root}/jobs")).expect("a task client");
    let task = tasks.submit("alice's secret payload").await.expect("alice submits");
    let payload = format!("{root}/jobs/tasks/{task}");
    // Alice herself reaches both, whatever the ACL.
    assert_eq!(alice.get_data(&payload).await.expect("alice reads her payload").data, b"alice's secret payload");
    alice.get_data(&grant.node).await.expect("alice reads her lock node");

    let reach = Reach {
        read_lock_node: mallory.get_data(&grant.node).await.map(|_| ()),
        delete_lock_node: mallory.delete(&grant.node, None).await,
        read_payload: mallory.get_data(&payload).await.map(|_| ()),
    };
    lock.do_send(Release);
    alice.close().await;
    mallory.close().await;
    reach
}

#[actix_rt::test]
async fn under_a_digest_acl_another_identity_can_neither_delete_a_lock_node_nor_read_a_task_payload() {
    init_tracing();
    let creator_only = vec![Acl::new_const(Permission::ALL, "auth", "")];
    let reach = mallory_on_alices_nodes(Some(creator_only), "acl-digest").await;
    assert!(matches!(reach.read_lock_node, Err(Error::NoAuth { .. })), "read lock node: {:?}", reach.read_lock_node);
    assert!(
        matches!(reach.delete_lock_node, Err(Error::NoAuth { .. })),
        "delete lock node: {:?}",
        reach.delete_lock_node
    );
    assert!(matches!(reach.read_payload, Err(Error::NoAuth { .. })), "read payload: {:?}", reach.read_payload);
}

#[actix_rt::test]
async fn the_control_under_the_world_acl_another_identity_reaches_both() {
    init_tracing();
    let reach = mallory_on_alices_nodes(None, "acl-world").await;
    assert_eq!(reach.read_lock_node, Ok(()));
    assert_eq!(reach.read_payload, Ok(()));
    assert_eq!(reach.delete_lock_node, Ok(()), "the world ACL lets anyone delete the lock node");
}

/// Issue 39, item 13: `get_acl` and `set_acl` on the session handle. A node made open is closed
/// to the creator alone with `set_acl`: another identity can no longer read it, `get_acl` reads
/// the new ACL back with its version, a `set_acl` at a stale ACL version is refused, and an
/// empty ACL is refused typed before it is sent.
#[actix_rt::test]
async fn get_acl_and_set_acl_protect_an_open_node() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("acl-set");
    let (alice, _) = connected(SessionConfig::new(zk.connect_string()).with_digest_auth("alice", "alice-secret")).await;
    let (mallory, _) =
        connected(SessionConfig::new(zk.connect_string()).with_digest_auth("mallory", "mallory-secret")).await;
    let node = format!("{root}/secret");
    alice.ensure_path(&root).await.expect("root");
    alice.create(&node, b"s3cret".to_vec(), CreateMode::Persistent).await.expect("create");
    let (open, stat) = alice.get_acl(&node).await.expect("get_acl");
    assert_eq!((open.len(), open[0].scheme(), open[0].id()), (1, "world", "anyone"), "{open:?}");
    assert_eq!(stat.aversion, 0);
    mallory.get_data(&node).await.expect("the control: mallory reads the open node");

    let creator_only = vec![Acl::new_const(Permission::ALL, "auth", "")];
    let stat = alice.set_acl(&node, creator_only, Some(0)).await.expect("set_acl");
    assert_eq!(stat.aversion, 1);
    let (closed, _) = alice.get_acl(&node).await.expect("get_acl");
    assert_eq!((closed[0].scheme(), closed[0].permission()), ("digest", Permission::ALL), "{closed:?}");
    assert!(closed[0].id().starts_with("alice:"), "{closed:?}");
    let read = mallory.get_data(&node).await;
    assert!(matches!(read, Err(Error::NoAuth { .. })), "mallory after set_acl: {read:?}");
    let stale = alice.set_acl(&node, vec![Acl::new_const(Permission::ALL, "world", "anyone")], Some(0)).await;
    assert!(matches!(stale, Err(Error::BadVersion { .. })), "stale aversion: {stale:?}");
    let empty = alice.set_acl(&node, Vec::new(), None).await;
    assert!(matches!(empty, Err(Error::InvalidAcl { ref path }) if path == &node), "empty ACL: {empty:?}");
    let missing = alice.get_acl(&format!("{root}/none")).await;
    assert!(matches!(missing, Err(Error::NoNode { .. })), "{missing:?}");
    alice.delete(&node, None).await.expect("alice deletes her node");
    alice.close().await;
    mallory.close().await;
}
