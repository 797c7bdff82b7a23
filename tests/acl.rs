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
    let zk = TestZooKeeper::from_env().expect("ZooKeeper");
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
