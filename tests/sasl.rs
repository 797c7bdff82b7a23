//! SASL DIGEST-MD5 against a real ZooKeeper with a JAAS configuration: the right
//! credentials connect and `sasl:` ACLs guard recipe nodes; a wrong password is `AuthFailed`
//! and a typed error, once, never a silent retry loop.
#![cfg(all(feature = "testkit", feature = "sasl"))]

use crate::common;

use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{ServerOptions, ZkServer, unique_root};
use actix_zookeeper::{Acl, AuthId, Error, Permission};
use common::*;

fn sasl_server() -> ZkServer {
    let users = [("alice", "alice-secret"), ("bob", "bob-secret")];
    ZkServer::start_with(ServerOptions::default().with_sasl_digest_users(&users)).expect("a ZooKeeper server with SASL")
}

fn as_user(server: &ZkServer, user: &str, password: &str) -> SessionConfig {
    SessionConfig::new(server.connect_string())
        .with_session_timeout(Duration::from_secs(4))
        .with_sasl_digest(user, password)
}

#[actix_rt::test]
async fn the_right_credentials_connect_and_sasl_acls_guard_recipe_nodes() {
    init_tracing();
    let server = sasl_server();
    let root = unique_root("sasl-acl");
    let only_alice = vec![Acl::new(Permission::ALL, AuthId::new("sasl", "alice"))];
    let (alice, _) = connected(as_user(&server, "alice", "alice-secret").with_default_acl(only_alice)).await;
    let (bob, _) = connected(as_user(&server, "bob", "bob-secret")).await;

    let lock = LockActor::new(alice.clone(), LockConfig::new(format!("{root}/lock"))).start();
    let grant = lock.send(Acquire::default()).await.expect("actor").expect("alice holds the lock");
    alice.get_data(&grant.node).await.expect("alice reads her own lock node");
    assert!(matches!(bob.get_data(&grant.node).await, Err(Error::NoAuth { .. })), "bob reads alice's lock node");
    assert!(matches!(bob.delete(&grant.node, None).await, Err(Error::NoAuth { .. })), "bob deletes alice's lock node");
    // The control: under the world ACL the two reach each other's nodes, so the refusals above
    // are the ACL's.
    let open = format!("/open-{}", &root[1..]);
    bob.create(&open, "", CreateMode::Persistent).await.expect("bob creates a world-ACL node");
    alice.delete(&open, None).await.expect("alice may delete a world-ACL node");
    lock.send(Release).await.expect("actor").expect("release");
    alice.close().await;
    bob.close().await;
}

#[actix_rt::test]
async fn a_wrong_password_is_auth_failed_and_a_typed_error_not_a_retry_loop() {
    init_tracing();
    let server = sasl_server();
    let started = Instant::now();
    let session = SessionHandle::start(as_user(&server, "alice", "not-her-password")).expect("a valid configuration");
    let events = Recorded::<SessionEvent>::start();
    session.subscribe(events.recipient.clone());
    let outcome = bounded("the session's verdict", session.connected()).await;
    assert_eq!(outcome.map(|_| ()), Err(Error::AuthFailed));
    assert!(started.elapsed() < Duration::from_secs(4), "told in {:?}", started.elapsed());
    events.wait_for(0, Duration::from_secs(5), |e| matches!(e, SessionEvent::AuthFailed)).await;
    wait_until("the session actor stops", || !session.is_running()).await;
    assert!(!events.snapshot().iter().any(|e| matches!(e, SessionEvent::Connected { .. })));
}
