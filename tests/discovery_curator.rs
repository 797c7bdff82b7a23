//! Service discovery shared with Curator 5.4's `curator-x-discovery`, a real `ServiceDiscovery`
//! in a JVM (`tests/java/CuratorPeer.java`, kind `discovery`): each side registers, the other
//! discovers, sees updates, and sees the instance go when its process is killed; every payload
//! shape our API writes is read by Curator; ids Curator holds are left alone.
#![cfg(feature = "testkit")]

use crate::common;

use std::time::Duration;

use actix_zookeeper::discovery::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{RoleProcess, TestZooKeeper, unique_root};
use common::curator::{CuratorPeer, off_thread as peer};
use common::*;
use futures::StreamExt;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

async fn start_peer(connect: String) -> CuratorPeer {
    actix_rt::task::spawn_blocking(move || CuratorPeer::start_discovery(&connect, "/services"))
        .await
        .expect("peer start")
        .expect("Curator peer (apt-get install libcurator-discovery-java)")
}

fn discovery(session: &SessionHandle) -> ServiceDiscovery {
    ServiceDiscovery::new(session.clone(), DiscoveryConfig::new("/services").with_timeout(WAIT)).expect("valid base")
}

fn object(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(fields) => fields,
        other => panic!("not an object: {other}"),
    }
}

/// Every payload shape the API writes (none, a map with every kind of JSON value, a map typed
/// with a class the user chose, a string), with every optional field, each service type and a
/// disabled instance: Curator's `queryForInstances` reads them all (one unreadable node would
/// fail it for the whole service) and sees each field as written.
#[actix_rt::test]
async fn curator_reads_every_instance_shape_we_write() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-shapes");
    let s = session_at(&zk.connect_string(), &root).await;
    let d = discovery(&s);
    let nested = json!({
        "text": "héllo \"quoted\" \\ / \u{1F600}", "int": -42, "long": 9_007_199_254_740_993_i64,
        "float": 1.5, "yes": true, "nothing": null, "list": [1, "two", [3], {"four": 4}],
        "inner": {"deep": {"deeper": []}}, "": "empty key"
    });
    let shapes = [
        ServiceInstance::new("shapes", "none"),
        ServiceInstance::new("shapes", "map").with_payload(Payload::map(object(nested.clone()))),
        ServiceInstance::new("shapes", "tree")
            .with_payload(Payload::object("java.util.TreeMap", object(json!({"b": 1, "a": 2})))),
        ServiceInstance::new("shapes", "empty").with_payload(Payload::map(Default::default())),
        ServiceInstance::new("shapes", "text").with_payload(Payload::text("plain text")),
        ServiceInstance::new("shapes", "full")
            .with_address("host.example")
            .with_port(65535)
            .with_ssl_port(443)
            .with_enabled(false)
            .with_service_type(ServiceType::Static)
            .with_uri_spec(
                UriSpec::parse("{scheme}://{address}:{ssl-port}/{name}/{id}?t={service-type}{[}{]}").expect("spec"),
            ),
        ServiceInstance::new("shapes", "permanent").with_service_type(ServiceType::Permanent).with_port(0),
        ServiceInstance::new("shapes", "seq").with_service_type(ServiceType::DynamicSequential),
    ];
    let mut kept = Vec::new();
    for shape in &shapes {
        kept.push(d.register(shape.clone()).await.expect("registered"));
    }
    // The control: a node Curator cannot read fails its query for the whole service, so the
    // check below would catch one of ours.
    let unreadable = r#"{"name":"control","id":"x","payload":{"@class":"no.such.Class"}}"#;
    s.ensure_path("/services/control").await.expect("dir");
    s.create("/services/control/x", unreadable.as_bytes().to_vec(), CreateMode::Persistent).await.expect("control");
    let java = start_peer(format!("{}{root}", zk.connect_string())).await;
    let (java, control) = peer(java, |p| p.query_instances("control")).await;
    assert!(control.is_err(), "Curator read a node it cannot read: {control:?}");
    let (java, read) = peer(java, |p| p.query_instances("shapes")).await;
    let read = read.expect("Curator reads every instance of the service");
    let by_id = |id: &str| read.as_array().expect("a list").iter().find(|i| i["id"] == id).cloned().expect(id);
    assert_eq!(read.as_array().expect("a list").len(), shapes.len(), "{read}");
    assert_eq!(by_id("none")["payload"], Value::Null);
    assert_eq!(by_id("map")["payloadClass"], "java.util.LinkedHashMap");
    assert_eq!(by_id("map")["payload"], nested, "every value as written");
    assert_eq!(by_id("tree")["payloadClass"], "java.util.TreeMap");
    assert_eq!(by_id("tree")["payload"], json!({"a": 2, "b": 1}));
    assert_eq!(by_id("empty")["payload"], json!({}));
    assert_eq!(
        (by_id("text")["payloadClass"].clone(), by_id("text")["payload"].clone()),
        (json!("java.lang.String"), json!("plain text"))
    );
    let full = by_id("full");
    assert_eq!(
        (&full["address"], &full["port"], &full["sslPort"], &full["serviceType"], &full["enabled"]),
        (&json!("host.example"), &json!(65535), &json!(443), &json!("STATIC"), &json!(false))
    );
    assert_eq!(full["uri"], "https://host.example:443/shapes/full?t=static{}", "Curator builds the same URI");
    assert_eq!(full["uri"], shapes[5].uri().expect("a spec").as_str());
    assert_eq!((&by_id("permanent")["serviceType"], &by_id("permanent")["port"]), (&json!("PERMANENT"), &json!(0)));
    assert_eq!((&by_id("seq")["serviceType"], &by_id("seq")["enabled"]), (&json!("DYNAMIC_SEQUENTIAL"), &json!(true)));

    // Read as a Java service that knows its payload type reads: by a reader for that class.
    // Every map-shaped payload (and none) under one service, the text under another.
    let maps = ["none", "map", "tree", "empty"].map(|id| shapes.iter().find(|i| i.id == id).expect("a shape").clone());
    let mut typed = Vec::new();
    for mut shape in maps {
        shape.name = "maps".into();
        typed.push(d.register(shape).await.expect("registered"));
    }
    let mut text = shapes[4].clone();
    text.name = "texts".into();
    typed.push(d.register(text).await.expect("registered"));
    let (java, as_map) = peer(java, |p| p.query_instances_as("maps", "java.util.Map")).await;
    assert_eq!(as_map.expect("a Map reader reads every map payload").as_array().map(Vec::len), Some(4));
    let (java, as_text) = peer(java, |p| p.query_instances_as("texts", "java.lang.String")).await;
    assert_eq!(as_text.expect("a String reader reads the text payload")[0]["payload"], "plain text");
    // The control: a Map reader fails on the text payload (for the whole service).
    let (_java, mismatch) = peer(java, |p| p.query_instances_as("texts", "java.util.Map")).await;
    assert!(mismatch.is_err(), "a Map reader read a text payload: {mismatch:?}");
    for r in kept.iter().chain(&typed) {
        r.unregister().await.expect("unregistered");
    }
    s.close().await;
}

/// Curator registers, we discover: what it wrote reads back, byte for byte, as what we write
/// for the same instance; our cache sees its update, its unregistration, and its instance go
/// when its JVM is killed; our provider picks its instances.
#[actix_rt::test]
async fn we_discover_curators_instances_and_see_them_change_and_go() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-from-curator");
    let s = session_at(&zk.connect_string(), &root).await;
    let d = discovery(&s);
    let java = start_peer(format!("{}{root}", zk.connect_string())).await;
    let (java, registered) = peer(java, |p| {
        p.register_instance("billing", "j1", "10.1.0.1", 8001, "DYNAMIC", r#"{"zone":"eu","weight":3,"tags":["a"]}"#)?;
        p.register_instance("billing", "j2", "10.1.0.2", 8002, "STATIC", "-")?;
        p.raw_instance("billing", "j1")
    })
    .await;
    let raw = registered.expect("Curator registers");
    let j1 = d.query_for_instance("billing", "j1").await.expect("read").expect("there");
    assert_eq!(
        (j1.address.as_deref(), j1.port, j1.service_type, j1.enabled),
        (Some("10.1.0.1"), Some(8001), ServiceType::Dynamic, true)
    );
    assert_eq!(j1.payload, Payload::map(object(json!({"zone": "eu", "weight": 3, "tags": ["a"]}))));
    let ours = String::from_utf8(s.get_data("/services/billing/j1").await.expect("bytes").data).expect("utf-8");
    assert_eq!(ours, raw, "the peer read what we read");
    let registration = d.register(j1.clone().with_port(9)).await;
    assert!(matches!(registration, Err(DiscoveryError::IdTaken { .. })), "Curator's live instance is left alone");

    // Byte for byte: our encoding of what Curator wrote is what Curator wrote.
    let mut r1 = j1.clone();
    r1.id = "r1".into();
    let mine = d.register(r1).await.expect("registered");
    let mine_bytes = String::from_utf8(s.get_data(mine.path()).await.expect("bytes").data).expect("utf-8");
    assert_eq!(mine_bytes, raw.replace(r#""id":"j1""#, r#""id":"r1""#));
    mine.unregister().await.expect("unregistered");

    let cache = d.cache("billing").expect("cache");
    let seen = Recorded::<ServiceCacheEvent>::start();
    cache.subscribe(seen.recipient.clone());
    cache.wait_initialized(Some(WAIT)).await.expect("loaded");
    let provider = d.provider("billing", ProviderConfig::new()).await.expect("provider");
    let mut picks: Vec<String> = Vec::new();
    for _ in 0..4 {
        picks.push(provider.get_instance().await.expect("picked").expect("one").id);
    }
    picks.sort();
    assert_eq!(picks, ["j1", "j1", "j2", "j2"]);

    let (java, updated) = peer(java, |p| p.discovery_command("update billing j1 10.1.0.9 8009", "UPDATED", WAIT)).await;
    updated.expect("Curator updates");
    let (i, _) = seen
        .wait_for(0, WAIT, |e| {
            matches!(e, ServiceCacheEvent::InstanceUpdated { instance } if instance.id == "j1" && instance.port == Some(8009))
        })
        .await;
    let (mut java, gone) = peer(java, |p| p.discovery_command("unregister billing j2", "UNREGISTERED", WAIT)).await;
    gone.expect("Curator unregisters");
    let (i, _) = seen
        .wait_for(i + 1, WAIT, |e| matches!(e, ServiceCacheEvent::InstanceRemoved { instance } if instance.id == "j2"))
        .await;
    java.kill();
    // The JVM's session (10 s) expires on the server.
    seen.wait_for(
        i + 1,
        WAIT * 2,
        |e| matches!(e, ServiceCacheEvent::InstanceRemoved { instance } if instance.id == "j1"),
    )
    .await;
    wait_until_async("the provider's own cache sees it go", || {
        let provider = provider.clone();
        async move { matches!(provider.get_instance().await, Ok(None)) }
    })
    .await;
    s.close().await;
}

/// We register, Curator discovers: its `ServiceCache` sees our instance, our update, and our
/// instance go when our process (a `zk-role service`) is killed.
#[actix_rt::test]
async fn curator_caches_see_ours_register_update_and_go_when_our_process_is_killed() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-to-curator");
    let s = session_at(&zk.connect_string(), &root).await;
    let java = start_peer(format!("{}{root}", zk.connect_string())).await;
    let (java, caching) = peer(java, |p| p.discovery_command("cache billing", "CACHING", WAIT)).await;
    caching.expect("Curator caches");

    let registration = discovery(&s)
        .register(ServiceInstance::new("billing", "r1").with_address("10.2.0.1").with_port(7001))
        .await
        .expect("registered");
    let (java, seen) = peer(java, |p| p.wait_event(WAIT, |e| e == "CACHE r1:7001")).await;
    seen.expect("Curator's cache sees ours");
    registration
        .update(ServiceInstance::new("billing", "r1").with_address("10.2.0.1").with_port(7002))
        .await
        .expect("updated");
    let (java, seen) = peer(java, |p| p.wait_event(WAIT, |e| e == "CACHE r1:7002")).await;
    seen.expect("Curator's cache sees our update");

    let connect = zk.connect_string();
    let args =
        ["service", "--connect", &connect, "--chroot", &root, "--id", "r2", "--name", "billing", "--port", "7003"];
    let process = RoleProcess::spawn(env!("CARGO_BIN_EXE_zk-role"), args).expect("zk-role");
    let (java, seen) = peer(java, |p| p.wait_event(WAIT, |e| e == "CACHE r1:7002,r2:7003")).await;
    seen.expect("Curator's cache sees our second process");
    process.kill().expect("killed");
    let (java, seen) = peer(java, |p| p.wait_event(WAIT, |e| e == "CACHE r1:7002")).await;
    seen.expect("Curator's cache sees the killed process's instance go");
    registration.unregister().await.expect("unregistered");
    let (_java, seen) = peer(java, |p| p.wait_event(WAIT, |e| e == "CACHE -")).await;
    seen.expect("Curator's cache sees our unregistration");
    s.close().await;
}

/// Issue 39, item 9 (row "Curator registers an id a live registration of ours holds"): Curator's
/// `registerService` meets our node, deletes it and creates its own, twice at most. Our
/// registration hears each deletion (`Deleted`) and registers again at once, so in most runs
/// Curator's second create meets our node again, it deletes it once more and returns OK with no
/// node of its own; in the others its create wins and ours waits (`Blocked`) until that node
/// goes. Either way exactly one node holds the id, it is the one a `Blocked` or `Created` of
/// ours says, and Curator's OK does not mean its instance is registered.
#[actix_rt::test]
async fn curator_registering_an_id_we_hold_deletes_our_node_and_one_of_us_ends_up_holding_it() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("discovery-curator-collision");
    let s = session_at(&zk.connect_string(), &root).await;
    let d = discovery(&s);
    let ours = ServiceInstance::new("billing", "x").with_address("10.0.0.1").with_port(1);
    let registration = d.register(ours).await.expect("registered");
    let told = Recorded::<PersistentNodeEvent>::start();
    let mut events = registration.events();
    let recipient = told.recipient.clone();
    actix_rt::spawn(async move {
        while let Some(Ok(event)) = events.next().await {
            recipient.do_send(event);
        }
    });
    let java = start_peer(format!("{}{root}", zk.connect_string())).await;
    let (mut java, registered) =
        peer(java, |p| p.register_instance("billing", "x", "10.0.0.2", 2, "DYNAMIC", "-")).await;
    registered.expect("Curator's registerService returns OK");

    // Curator deleted our node at least once, and we heard it. Its `registerService` has
    // returned, so its deletions are over: we settle once the node exists and our last event
    // is a registration again or a wait behind Curator's node.
    told.wait_for(0, WAIT, |e| matches!(e, PersistentNodeEvent::Deleted { .. })).await;
    wait_until_async("one side holds the id and we have heard the last of it", || {
        let (s, told) = (s.clone(), told.snapshot());
        async move {
            let settled =
                matches!(told.last(), Some(PersistentNodeEvent::Created { .. } | PersistentNodeEvent::Blocked { .. }));
            settled && matches!(s.exists("/services/billing/x").await, Ok(Some(_)))
        }
    })
    .await;
    let settled = told.snapshot().last().cloned().expect("an event");
    let j = told.snapshot().len() - 1;
    let holder = d.query_for_instance("billing", "x").await.expect("read").expect("exactly one node holds the id");
    let owner = s.exists("/services/billing/x").await.expect("exists").expect("the node").ephemeral_owner;
    let our_session = s.session().await.expect("session").info.id().0;
    let deletions = told.snapshot().iter().filter(|e| matches!(e, PersistentNodeEvent::Deleted { .. })).count();
    match settled {
        PersistentNodeEvent::Created { .. } => {
            assert_eq!((holder.address.as_deref(), owner), (Some("10.0.0.1"), our_session), "ours holds it");
            tracing::info!(deletions, "Curator's registerService returned OK with no node of its own");
        }
        _ => {
            assert_eq!(holder.address.as_deref(), Some("10.0.0.2"), "Curator's holds it and ours waits");
            assert_ne!(owner, our_session);
            // Ours takes the id once Curator's node goes (its process ends).
            java.kill();
            told.wait_for(j + 1, WAIT * 2, |e| matches!(e, PersistentNodeEvent::Created { .. })).await;
        }
    }
    assert!((1..=2).contains(&deletions), "Curator deletes at most twice: {deletions}");
    java.kill();
    registration.unregister().await.expect("unregistered");
    s.close().await;
}
