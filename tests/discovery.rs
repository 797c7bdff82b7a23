//! Service discovery against a real ZooKeeper: registrations kept through deletion, expiry and a
//! cut-off, a taken id refused, caches and providers, bad input, and what a dropped or stopped
//! registration leaves. The Curator interop tests are in `discovery_curator.rs`.
#![cfg(feature = "testkit")]

use crate::common;

use std::time::{Duration, Instant};

use actix_zookeeper::discovery::*;
use actix_zookeeper::persistent::{PersistentNodeError, PersistentNodeEvent};
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{ClientLinks, TestZooKeeper, expire_session, unique_root};
use actix_zookeeper::{Acl, Permission};
use common::*;
use futures::StreamExt;

const WAIT: Duration = Duration::from_secs(20);

fn discovery(session: &SessionHandle) -> ServiceDiscovery {
    ServiceDiscovery::new(session.clone(), DiscoveryConfig::new("/services").with_timeout(WAIT)).expect("valid base")
}

fn instance(id: &str, port: u16) -> ServiceInstance {
    ServiceInstance::new("billing", id).with_address("10.0.0.1").with_port(port)
}

fn cache_of(d: &ServiceDiscovery) -> (ServiceCacheHandle, Recorded<ServiceCacheEvent>) {
    let cache = d.cache("billing").expect("a valid name");
    let events = Recorded::<ServiceCacheEvent>::start();
    cache.subscribe(events.recipient.clone());
    (cache, events)
}

fn added(id: &'static str) -> impl Fn(&ServiceCacheEvent) -> bool {
    move |e| matches!(e, ServiceCacheEvent::InstanceAdded { instance } if instance.id == id)
}

fn removed(id: &'static str) -> impl Fn(&ServiceCacheEvent) -> bool {
    move |e| matches!(e, ServiceCacheEvent::InstanceRemoved { instance } if instance.id == id)
}

/// Waits until `path` is an ephemeral of `owner` (0: persistent) on `observer`.
async fn wait_owned(observer: &SessionHandle, path: &str, owner: i64) {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(Some(stat)) = observer.exists(path).await {
            if stat.ephemeral_owner == owner {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{path} never owned by {owner:#x}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn session_id(s: &SessionHandle) -> i64 {
    s.session().await.expect("a session").session_id.0
}

/// A registration is the instance's node, ephemeral, owned by our session, in Curator's JSON;
/// every query reads it back as it was registered.
#[actix_rt::test]
async fn an_instance_is_registered_and_read_back_by_every_query() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("discovery-register")).await;
    let d = discovery(&s);
    let mut fields = serde_json::Map::new();
    fields.insert("zone".into(), "eu-1".into());
    let me = instance("a1", 8080)
        .with_ssl_port(8443)
        .with_payload(Payload::map(fields))
        .with_uri_spec(UriSpec::parse("{scheme}://{address}:{ssl-port}").expect("a spec"));
    let registration = d.register(me.clone()).await.expect("registered");
    assert_eq!(registration.path(), "/services/billing/a1");
    wait_owned(&s, registration.path(), session_id(&s).await).await;
    assert_eq!(d.query_for_instance("billing", "a1").await.expect("read"), Some(me.clone()));
    assert_eq!(d.query_for_instances("billing").await.expect("read"), vec![me.clone()]);
    assert_eq!(d.query_for_names().await.expect("names"), vec!["billing".to_owned()]);
    assert_eq!(d.query_for_instance("billing", "nobody").await.expect("read"), None);
    assert_eq!(d.query_for_instances("nothing").await.expect("read"), vec![]);
    assert_eq!(me.uri().as_deref(), Some("https://10.0.0.1:8443"));

    // Static instances are persistent nodes; sequential ones carry their sequence number.
    let fixed = d.register(instance("s1", 1).with_service_type(ServiceType::Static)).await.expect("static");
    wait_owned(&s, fixed.path(), 0).await;
    let numbered = d.register(instance("q", 2).with_service_type(ServiceType::DynamicSequential)).await.expect("seq");
    let name = numbered.path().rsplit('/').next().expect("a name").to_owned();
    assert!(name.starts_with("_c_") && name.contains("-q") && name.ends_with(|c: char| c.is_ascii_digit()), "{name}");
    let ids: Vec<_> = d.query_for_instances("billing").await.expect("read").into_iter().map(|i| i.id).collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    for r in [&registration, &fixed, &numbered] {
        r.unregister().await.expect("unregistered");
    }
    assert_eq!(d.query_for_instances("billing").await.expect("read"), vec![]);
    s.close().await;
}

/// Row "the id is taken by another live session": `IdTaken`, and the other's node is left as it
/// was (Curator would delete it); once the other goes, the id registers.
#[actix_rt::test]
async fn a_taken_id_is_refused_and_the_other_sessions_instance_is_left_alone() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-taken");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let first = discovery(&a).register(instance("a1", 1)).await.expect("registered");
    let taken = discovery(&b).register(instance("a1", 2)).await;
    assert!(
        matches!(&taken, Err(DiscoveryError::IdTaken { name, id }) if name == "billing" && id == "a1"),
        "{taken:?}"
    );
    wait_owned(&b, first.path(), session_id(&a).await).await;
    let still = discovery(&b).query_for_instance("billing", "a1").await.expect("read").expect("there");
    assert_eq!(still.port, Some(1));

    first.unregister().await.expect("unregistered");
    let second = discovery(&b).register(instance("a1", 2)).await.expect("free now");
    wait_owned(&b, second.path(), session_id(&b).await).await;
    a.close().await;
    b.close().await;
}

/// Rows "someone deletes the instance's node", "our session expires", "a persistent node at a
/// dynamic id": registered again after each (the cache sees it go and come back); a persistent
/// leftover is replaced by our ephemeral node, not taken over.
#[actix_rt::test]
async fn an_instance_is_registered_again_after_a_deletion_and_after_expiry() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-again");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &root).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    s.ensure_path("/services/billing").await.expect("dir");
    observer.create("/services/billing/a1", b"left over".to_vec(), CreateMode::Persistent).await.expect("leftover");

    let registration = discovery(&s).register(instance("a1", 1)).await.expect("registered");
    wait_owned(&observer, registration.path(), session_id(&s).await).await;
    let (_cache, seen) = cache_of(&discovery(&observer));
    let (i, _) = seen.wait_for(0, WAIT, added("a1")).await;
    let mut events = registration.events();

    observer.delete(registration.path(), None).await.expect("someone deletes it");
    let (i, _) = seen.wait_for(i + 1, WAIT, removed("a1")).await;
    let (i, _) = seen.wait_for(i + 1, WAIT, added("a1")).await;
    wait_owned(&observer, registration.path(), session_id(&s).await).await;
    let recreated = bounded("registered again", async {
        loop {
            if let Some(Ok(PersistentNodeEvent::Created { path })) = events.next().await {
                return path;
            }
        }
    })
    .await;
    assert_eq!(recreated, registration.path());

    let info = s.session().await.expect("session").info;
    links.blackhole();
    expire_session(&zk.connect_string(), &info).await.expect("expired");
    links.heal();
    let (i, _) = seen.wait_for(i + 1, WAIT, removed("a1")).await;
    seen.wait_for(i + 1, WAIT, added("a1")).await;
    let deadline = Instant::now() + WAIT;
    while s.session().await.map(|now| now.generation) != Some(2) {
        assert!(Instant::now() < deadline, "no new session");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    wait_owned(&observer, registration.path(), session_id(&s).await).await;
    registration.unregister().await.expect("unregistered");
    assert_eq!(observer.exists(registration.path()).await.expect("exists"), None);
    s.close().await;
    observer.close().await;
}

/// Rows "an update", "unregister", "the last handle dropped": a cache sees the instance
/// added, updated and removed; an update for another instance is refused.
#[actix_rt::test]
async fn caches_see_updates_and_unregistering_or_dropping_removes_the_instance() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-update");
    let s = session_at(&zk.connect_string(), &root).await;
    let d = discovery(&s);
    let (cache, seen) = cache_of(&d);
    cache.wait_initialized(Some(WAIT)).await.expect("loaded");
    let registration = d.register(instance("a1", 1)).await.expect("registered");
    let (i, _) = seen.wait_for(0, WAIT, added("a1")).await;
    registration.update(instance("a1", 2)).await.expect("updated");
    let (i, updated) = seen.wait_for(i + 1, WAIT, |e| matches!(e, ServiceCacheEvent::InstanceUpdated { .. })).await;
    assert!(matches!(updated, ServiceCacheEvent::InstanceUpdated { instance } if instance.port == Some(2)));
    assert_eq!(registration.instance().port, Some(2), "the registration exposes its current instance");
    // An update from the current instance keeps what it does not change, the registration time
    // included (a freshly built instance resets it).
    let registered_at = registration.instance().registration_time_utc;
    let mut drained = registration.instance();
    drained.enabled = false;
    registration.update(drained).await.expect("updated");
    let (i, updated) = seen.wait_for(i + 1, WAIT, |e| matches!(e, ServiceCacheEvent::InstanceUpdated { .. })).await;
    assert!(
        matches!(&updated, ServiceCacheEvent::InstanceUpdated { instance }
            if !instance.enabled && instance.port == Some(2) && instance.registration_time_utc == registered_at),
        "{updated:?}"
    );
    let wrong = registration.update(instance("b2", 2)).await;
    assert!(matches!(wrong, Err(DiscoveryError::NotThisInstance { .. })), "{wrong:?}");
    let held = cache.instances().await.expect("held");
    assert_eq!(held.iter().map(|i| (i.id.as_str(), i.port)).collect::<Vec<_>>(), [("a1", Some(2))]);
    assert!(!registration.instance().enabled, "a refused update leaves the current instance as it was");

    registration.unregister().await.expect("unregistered");
    let (i, _) = seen.wait_for(i + 1, WAIT, removed("a1")).await;
    assert_eq!(cache.instances().await.expect("held"), vec![]);

    let dropped = d.register(instance("b2", 3)).await.expect("registered");
    let (i, _) = seen.wait_for(i + 1, WAIT, added("b2")).await;
    drop(dropped);
    seen.wait_for(i + 1, WAIT, removed("b2")).await;
    cache.stop().await;
    assert!(matches!(cache.instances().await, Err(DiscoveryError::Cache(_))));
    s.close().await;
}

/// Row "a node that is not an instance": a cache and a query skip it and serve the others; a
/// query by its id says why it cannot be read; once it holds an instance, it is one.
#[actix_rt::test]
async fn a_node_that_is_not_an_instance_is_skipped_and_the_others_are_served() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("discovery-unreadable")).await;
    let d = discovery(&s);
    let good = d.register(instance("good", 1)).await.expect("registered");
    s.create("/services/billing/junk", b"not json".to_vec(), CreateMode::Persistent).await.expect("junk");
    let (cache, seen) = cache_of(&d);
    cache.wait_initialized(Some(WAIT)).await.expect("loaded");
    let (_, unreadable) = seen.wait_for(0, WAIT, |e| matches!(e, ServiceCacheEvent::InstanceUnreadable { .. })).await;
    assert!(
        matches!(&unreadable, ServiceCacheEvent::InstanceUnreadable { error: DiscoveryError::Unreadable { path, .. } } if path == "/services/billing/junk"),
        "{unreadable:?}"
    );
    let ids = |v: Vec<ServiceInstance>| v.into_iter().map(|i| i.id).collect::<Vec<_>>();
    assert_eq!(ids(cache.instances().await.expect("held")), ["good"]);
    assert_eq!(ids(d.query_for_instances("billing").await.expect("read")), ["good"]);
    let queried = d.query_for_instances_and_skipped("billing").await.expect("read");
    assert_eq!(ids(queried.instances), ["good"]);
    assert_eq!(queried.skipped.len(), 1, "{:?}", queried.skipped);
    assert_eq!(queried.skipped[0].path, "/services/billing/junk", "the query says which node it skipped");
    assert!(!queried.skipped[0].reason.is_empty());
    let why = d.query_for_instance("billing", "junk").await;
    assert!(matches!(why, Err(DiscoveryError::Unreadable { .. })), "{why:?}");

    let fixed =
        String::from_utf8(serde_json::to_vec(&serde_json::json!({"name": "billing", "id": "junk"})).expect("json"))
            .expect("utf-8");
    s.set_data("/services/billing/junk", fixed.into_bytes(), None).await.expect("fixed");
    seen.wait_for(0, WAIT, added("junk")).await;
    good.unregister().await.expect("unregistered");
    s.close().await;
}

/// A provider picks round robin among enabled instances, skips one noted down (after the
/// policy's threshold) until its timeout, sticks with `Sticky`, and says `None` with nothing left.
#[actix_rt::test]
async fn a_provider_round_robins_over_enabled_instances_and_skips_those_noted_down() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("discovery-provider")).await;
    let d = discovery(&s);
    let mut kept = Vec::new();
    for (id, port) in [("a", 1), ("b", 2), ("c", 3)] {
        kept.push(d.register(instance(id, port)).await.expect("registered"));
    }
    kept.push(d.register(instance("off", 4).with_enabled(false)).await.expect("registered"));
    // A long window: the test must not depend on when it ends (the unit test in `down.rs` does).
    let policy = DownInstancePolicy::new(Duration::from_secs(60), 2);
    let provider =
        d.provider("billing", ProviderConfig::new().with_down_instance_policy(policy)).await.expect("loaded");
    let mut picks = Vec::new();
    for _ in 0..6 {
        picks.push(provider.get_instance().await.expect("picked").expect("one").id);
    }
    assert_eq!(picks, ["a", "b", "c", "a", "b", "c"]);

    let b = d.query_for_instance("billing", "b").await.expect("read").expect("b");
    provider.note_error(&b);
    assert_eq!(provider.all_instances().await.expect("all").len(), 3, "one error is below the threshold");
    provider.note_error(&b);
    let ids = |v: Vec<ServiceInstance>| v.into_iter().map(|i| i.id).collect::<Vec<_>>();
    assert_eq!(ids(provider.all_instances().await.expect("all")), ["a", "c"]);
    for _ in 0..4 {
        assert_ne!(provider.get_instance().await.expect("picked").expect("one").id, "b");
    }

    let sticky = ProviderConfig::new().with_strategy(ProviderStrategy::Sticky(Box::new(ProviderStrategy::Random)));
    let sticky = d.provider("billing", sticky).await.expect("loaded");
    let first = sticky.get_instance().await.expect("picked").expect("one").id;
    for _ in 0..5 {
        assert_eq!(sticky.get_instance().await.expect("picked").expect("one").id, first);
    }
    let stuck = kept.iter().find(|r| r.id() == first).expect("registered").clone();
    stuck.unregister().await.expect("unregistered");
    wait_until_async("the sticky provider moves on", || {
        let (sticky, first) = (sticky.clone(), first.clone());
        async move { sticky.get_instance().await.ok().flatten().is_some_and(|i| i.id != first) }
    })
    .await;

    for r in &kept {
        r.unregister().await.expect("unregistered");
    }
    wait_until_async("nothing to pick", || {
        let provider = provider.clone();
        async move { matches!(provider.get_instance().await, Ok(None)) }
    })
    .await;
    let nothing = d.provider("nothing", ProviderConfig::new()).await.expect("an empty service loads");
    assert_eq!(nothing.get_instance().await.expect("answered"), None);
    s.close().await;
}

/// Rows "our connection drops and comes back", "the cache's connection drops": the
/// registration stays (same session); a cache cut off meanwhile re-syncs and reports exactly
/// what changed.
#[actix_rt::test]
async fn a_cut_off_registration_stays_and_a_cut_off_cache_resyncs() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-cut");
    let registrant = proxied(&zk.connect_string(), &root, Duration::from_secs(6)).await;
    let watcher = proxied(&zk.connect_string(), &root, Duration::from_secs(6)).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    let stays = discovery(&registrant.session).register(instance("stays", 1)).await.expect("registered");
    let goes = discovery(&observer).register(instance("goes", 2)).await.expect("registered");
    let (cache, seen) = cache_of(&discovery(&watcher.session));
    cache.wait_initialized(Some(WAIT)).await.expect("loaded");
    let owner = session_id(&registrant.session).await;

    registrant.proxy.blackhole();
    watcher.proxy.blackhole();
    goes.unregister().await.expect("unregistered");
    let comes = discovery(&observer).register(instance("comes", 3)).await.expect("registered");
    // Past the 8/20 of the session timeout (2.4 s) after which the client gives a silent
    // connection up, well within the timeout itself (6 s): the same sessions, events missed.
    actix_rt::time::sleep(Duration::from_millis(3800)).await;
    let from = seen.snapshot().len();
    registrant.proxy.heal();
    watcher.proxy.heal();
    seen.wait_for(from, WAIT, |e| *e == ServiceCacheEvent::CacheResynced).await;
    let after: Vec<_> = seen.snapshot()[from..].to_vec();
    assert!(after.iter().any(removed("goes")) && after.iter().any(added("comes")), "{after:?}");
    assert!(!after.iter().any(|e| removed("stays")(e) || added("stays")(e)), "{after:?}");
    wait_owned(&observer, stays.path(), owner).await;
    assert_eq!(session_id(&registrant.session).await, owner, "the same session");
    for r in [stays, comes] {
        r.unregister().await.expect("unregistered");
    }
    observer.close().await;
}

/// Rows "bad input", "register future dropped", "actor stopped", "session closed": typed errors
/// and nothing written; a registration dropped at any moment leaves no node; after the session
/// closed, every call says so.
#[actix_rt::test]
async fn bad_input_dropped_registrations_and_a_closed_session() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-bad");
    let s = session_at(&zk.connect_string(), &root).await;
    assert!(matches!(
        ServiceDiscovery::new(s.clone(), DiscoveryConfig::new("services")),
        Err(DiscoveryError::ZooKeeper(_))
    ));
    let d = discovery(&s);
    let mut typed = serde_json::Map::new();
    typed.insert("@class".into(), "x.Y".into());
    for (bad, field) in [
        (ServiceInstance::new("a/b", "i"), "name"),
        (ServiceInstance::new("billing", ""), "id"),
        (ServiceInstance::new("billing", ".."), "id"),
        (ServiceInstance::new("billing", "i").with_payload(Payload::map(typed)), "payload"),
        (
            ServiceInstance::new("billing", "i").with_payload(Payload::object("not a class", Default::default())),
            "payload",
        ),
        (ServiceInstance::new("billing", "i").with_payload(Payload::Other(serde_json::json!(3))), "payload"),
    ] {
        let refused = d.register(bad.clone()).await;
        assert!(
            matches!(&refused, Err(DiscoveryError::InvalidInstance { field: f, .. }) if *f == field),
            "{bad:?}: {refused:?}"
        );
    }
    assert!(UriSpec::parse("{open").is_err());
    assert!(matches!(d.cache("a/b"), Err(DiscoveryError::InvalidInstance { field: "name", .. })));
    assert!(matches!(
        d.query_for_instance("billing", "a/b").await,
        Err(DiscoveryError::InvalidInstance { field: "id", .. })
    ));
    assert_eq!(s.exists("/services/billing").await.expect("exists"), None, "nothing was written");

    // Dropped at a moment within the first few round trips: nothing stays.
    for round in 0..20u64 {
        let register = d.register(instance("dropped", 1));
        let _ = actix_rt::time::timeout(Duration::from_micros(round * 300), register).await;
    }
    wait_until_async("no dropped registration stays", || {
        let s = s.clone();
        async move { matches!(s.exists("/services/billing/dropped").await, Ok(None)) }
    })
    .await;
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.exists("/services/billing/dropped").await.expect("exists"), None);

    let kept = d.register(instance("kept", 1)).await.expect("registered");
    let (cache, _seen) = cache_of(&d);
    cache.wait_initialized(Some(WAIT)).await.expect("loaded");
    s.close().await;
    let after = bounded("register on a closed session", d.register(instance("late", 1))).await;
    assert!(matches!(after, Err(DiscoveryError::ZooKeeper(Error::Closed))), "{after:?}");
    assert!(d.query_for_names().await.is_err());
    let observer = session_at(&zk.connect_string(), "/").await;
    let path = format!("{root}{}", kept.path());
    assert_eq!(observer.exists(&path).await.expect("exists"), None, "gone with the session");
    observer.close().await;
}

/// Row "a registrant's process is killed": its instance goes when the server expires its
/// session, and a cache says so.
#[actix_rt::test]
async fn an_instance_goes_when_its_process_is_killed() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-killed");
    let s = session_at(&zk.connect_string(), &root).await;
    let connect = zk.connect_string();
    let args =
        ["service", "--connect", &connect, "--chroot", &root, "--id", "victim", "--name", "billing", "--port", "9000"];
    let process = actix_zookeeper::testkit::RoleProcess::spawn(env!("CARGO_BIN_EXE_zk-role"), args).expect("zk-role");
    let (cache, seen) = cache_of(&discovery(&s));
    wait_until("the victim registered", || process.lines().iter().any(|l| l.kind == "registered")).await;
    seen.wait_for(0, WAIT, added("victim")).await;
    process.kill().expect("killed");
    seen.wait_for(0, WAIT, removed("victim")).await;
    assert_eq!(cache.instances().await.expect("held"), vec![]);
    s.close().await;
}

/// Row "a create whose reply was lost, then the registration stopped": a regression test (the
/// node was left, owned by our live session: a ghost instance, and the id taken). The create
/// applies while its reply is held; the register is dropped; the reply is lost with the
/// connection: our node is found and deleted.
#[actix_rt::test]
async fn a_registration_stopped_after_its_create_reply_was_lost_leaves_no_instance() {
    use actix_zookeeper::testkit::Direction;
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-lost-reply");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &root).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    observer.ensure_path("/services/billing").await.expect("dir");
    links.proxy(0).set_latency(Direction::Downstream, Duration::from_secs(60));
    let registering = actix_rt::spawn(discovery(&s).register(instance("ghost", 1)));
    wait_until_async("the create applied", || {
        let observer = observer.clone();
        async move { matches!(observer.exists("/services/billing/ghost").await, Ok(Some(_))) }
    })
    .await;
    registering.abort();
    let _ = registering.await;
    links.reset();
    links.heal();
    wait_until_async("the ghost instance is deleted", || {
        let observer = observer.clone();
        async move { matches!(observer.exists("/services/billing/ghost").await, Ok(None)) }
    })
    .await;
    let again = discovery(&observer).register(instance("ghost", 2)).await.expect("the id is free");
    again.unregister().await.expect("unregistered");
    s.close().await;
    observer.close().await;
}

/// Row "a node no session owns at a dynamic id": a container is replaced by our ephemeral; one
/// with children cannot be, and the registration fails with `NotEmpty` (it would never go with
/// our session).
#[actix_rt::test]
async fn a_dynamic_registration_never_takes_over_a_node_that_would_outlive_it() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("discovery-outlive")).await;
    s.ensure_path("/services/billing").await.expect("dir");
    s.create("/services/billing/box", Vec::new(), CreateMode::Container).await.expect("container");
    s.create("/services/billing/box/keep", Vec::new(), CreateMode::Persistent).await.expect("child");
    let refused = discovery(&s).register(instance("box", 1)).await;
    assert!(
        matches!(
            &refused,
            Err(DiscoveryError::Registration(PersistentNodeError::Failed { source: Error::NotEmpty { .. }, .. }))
        ),
        "{refused:?}"
    );
    s.delete("/services/billing/box/keep", None).await.expect("emptied");
    let registration = discovery(&s).register(instance("box", 1)).await.expect("replaced");
    wait_owned(&s, registration.path(), session_id(&s).await).await;
    registration.unregister().await.expect("unregistered");
    s.close().await;
}

/// Row "a `Static` registration unregistered after someone else registered the id there": a
/// regression test (the delete was unconditional, and took the other's node). Our node is
/// deleted by another process, which registers its own at the id; our unregister, sent before
/// we hear of it, leaves theirs.
#[actix_rt::test]
async fn unregistering_a_static_instance_never_deletes_the_registration_that_replaced_it() {
    use actix_zookeeper::testkit::Direction;
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-static-fence");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &root).await;
    let other = session_at(&zk.connect_string(), &root).await;
    let ours = discovery(&s).register(instance("fixed", 1).with_service_type(ServiceType::Static)).await.expect("ours");
    // We hear nothing for a while: the other's delete and create reach us only after our stop.
    links.proxy(0).set_latency(Direction::Downstream, Duration::from_millis(1500));
    other.delete(ours.path(), None).await.expect("the other deletes ours");
    let theirs = other.create(ours.path(), b"theirs".to_vec(), CreateMode::Persistent).await.expect("theirs");
    bounded("unregister", ours.unregister()).await.expect("nothing of ours stays (theirs is not ours)");
    links.reset();
    let left = other.get_data(&theirs.path).await.expect("their registration stays");
    assert_eq!((left.data.as_slice(), left.stat.czxid), (&b"theirs"[..], theirs.stat.czxid));
    s.close().await;
    other.close().await;
}

/// Regression (issue 39, item 3): a `Static`/`Permanent` registration survived
/// `SessionHandle::close()` (a close lets recipes let go first, but a persistent node did not
/// take part), so the instance stayed registered for good after its service shut down. A close
/// now unregisters it, as Curator's `ServiceDiscovery.close()` does; a persistent node of the
/// session's own (not a registration) goes the same way, and a TTL node is left to its TTL.
#[actix_rt::test]
async fn a_close_unregisters_persistent_registrations_first() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-close-static");
    let s = session_at(&zk.connect_string(), &root).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    let d = discovery(&s);
    let fixed = d.register(instance("s1", 1).with_service_type(ServiceType::Static)).await.expect("static");
    let permanent = d.register(instance("p1", 2).with_service_type(ServiceType::Permanent)).await.expect("permanent");
    let kept = PersistentNodeHandle::start(s.clone(), PersistentNodeConfig::new("/kept", CreateMode::Persistent))
        .expect("node");
    kept.wait_for_initial_create(Some(WAIT)).await.expect("made");
    for path in [fixed.path(), permanent.path(), "/kept"] {
        assert_eq!(observer.exists(path).await.expect("exists").map(|stat| stat.ephemeral_owner), Some(0), "{path}");
    }
    bounded("the close", s.close()).await;
    for path in [fixed.path(), permanent.path(), "/kept"] {
        assert!(observer.exists(path).await.expect("exists").is_none(), "{path} outlived the close");
    }
    observer.close().await;
}

/// Issue 39, item 3: an unregister that did not delete says so, naming the node. Another
/// identity takes DELETE on the service's directory away, so our delete is refused for good:
/// `unregister` answers `NotDeleted` with the node's path (the node stays, read back); for a
/// registration on another session, that session's close tried the delete first, and the
/// `unregister` after the close tells the same. (Before, `unregister` answered `()` in both.) The control: with DELETE given back, a third unregisters `Ok` and
/// its node is gone.
#[actix_rt::test]
async fn an_unregister_that_did_not_delete_names_the_node_that_stays() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-not-deleted");
    let s = session_at(&zk.connect_string(), &root).await;
    let (admin, _) =
        connected(SessionConfig::new(zk.connect_string()).with_chroot(&root).with_digest_auth("admin", "admin-secret"))
            .await;
    let d = discovery(&s);
    let fixed = |id: &str| instance(id, 1).with_service_type(ServiceType::Static);
    let (first, third) =
        (d.register(fixed("first")).await.expect("first"), d.register(fixed("third")).await.expect("third"));
    let no_delete = Permission::READ | Permission::WRITE | Permission::CREATE | Permission::ADMIN;
    let dir = "/services/billing";
    admin.set_acl(dir, vec![Acl::new_const(no_delete, "world", "anyone")], None).await.expect("no DELETE");

    let refused = first.unregister().await;
    assert!(
        matches!(&refused, Err(DiscoveryError::Registration(PersistentNodeError::NotDeleted { path, source: actix_zookeeper::Error::NoAuth { .. } })) if path == first.path()),
        "{refused:?}"
    );
    assert!(admin.exists(first.path()).await.expect("exists").is_some(), "the node stays, as the error says");

    // Closed first: the close's goodbye met the same refusal.
    let other = session_at(&zk.connect_string(), &root).await;
    let late = discovery(&other).register(fixed("late")).await.expect("late");
    other.close().await;
    let after_close = late.unregister().await;
    assert!(
        matches!(&after_close, Err(DiscoveryError::Registration(PersistentNodeError::NotDeleted { path, .. })) if path == late.path()),
        "{after_close:?}"
    );
    assert!(admin.exists(late.path()).await.expect("exists").is_some());

    // The control: DELETE given back.
    admin.set_acl(dir, vec![Acl::new_const(Permission::ALL, "world", "anyone")], None).await.expect("DELETE again");
    third.unregister().await.expect("unregistered");
    assert_eq!(admin.exists(third.path()).await.expect("exists"), None);
    s.close().await;
    admin.close().await;
}

/// The dangerous window of a dropped `register`, hit on purpose: the replies are held back, the
/// create is seen applied by another session, and only then is the future dropped, before its
/// reply could arrive. The node that the dropped registration made still goes, and the id
/// registers elsewhere at once. The same for a `register` that timed out after its create
/// applied (issue 39, item 3).
#[actix_rt::test]
async fn a_register_dropped_after_its_create_applied_leaves_no_node() {
    use actix_zookeeper::testkit::Direction;
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-drop-window");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &root).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    let d = discovery(&s);
    // The service's directory first, so that the instance's create is one request.
    d.register(instance("warm-up", 1)).await.expect("registered").unregister().await.expect("unregistered");
    links.proxy(0).set_latency(Direction::Downstream, Duration::from_millis(800));
    let register = actix_rt::spawn(d.register(instance("window", 1)));
    wait_until_async("the create applied", || {
        let observer = observer.clone();
        async move { matches!(observer.exists("/services/billing/window").await, Ok(Some(_))) }
    })
    .await;
    assert!(!register.is_finished(), "dropped before its reply arrived");
    register.abort();
    links.proxy(0).set_latency(Direction::Downstream, Duration::ZERO);
    wait_until_async("the dropped registration's node goes", || {
        let observer = observer.clone();
        async move { matches!(observer.exists("/services/billing/window").await, Ok(None)) }
    })
    .await;
    let elsewhere = discovery(&observer).register(instance("window", 2)).await.expect("the id is free");
    elsewhere.unregister().await.expect("unregistered");

    // A `register` that times out while its create's reply is held back (the create applied):
    // `Timeout`, and the node it made goes too.
    let impatient =
        ServiceDiscovery::new(s.clone(), DiscoveryConfig::new("/services").with_timeout(Duration::from_millis(300)))
            .expect("valid base");
    links.proxy(0).set_latency(Direction::Downstream, Duration::from_millis(800));
    let timed_out = impatient.register(instance("late", 1)).await;
    assert!(matches!(timed_out, Err(DiscoveryError::Timeout { .. })), "{timed_out:?}");
    assert!(observer.exists("/services/billing/late").await.expect("exists").is_some(), "the create had applied");
    links.proxy(0).set_latency(Direction::Downstream, Duration::ZERO);
    wait_until_async("the timed-out registration's node goes", || {
        let observer = observer.clone();
        async move { matches!(observer.exists("/services/billing/late").await, Ok(None)) }
    })
    .await;
    s.close().await;
    observer.close().await;
}
