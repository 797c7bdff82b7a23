//! W9: service discovery. A registration's `register` and `unregister` against a raw ephemeral
//! create and delete of the same JSON; a cache of 1,000 instances: its first load against the raw
//! listing (getChildren, then every getData pipelined), the memory it holds per instance, and an
//! update's latency to the cache's `InstanceUpdated` against the raw setData → NodeDataChanged →
//! getData floor. One workload of the recipe benchmark (`main.rs`); the harness is `harness.rs`.

use actix_zookeeper::discovery::{DiscoveryConfig, ServiceCacheEvent, ServiceDiscovery, ServiceInstance};
use futures::StreamExt;
use zookeeper_client::{Acls, AddWatchMode, Client, EventType};

use super::harness::*;

pub(crate) const W9_REGISTRATIONS: usize = 300;
pub(crate) const W9_WARMUP: usize = 50;
pub(crate) const W9_ROUNDS: usize = 3;
pub(crate) const W9_INSTANCES: usize = 1000;
pub(crate) const W9_CACHES: usize = 5;
pub(crate) const W9_UPDATES: usize = 200;

/// Curator's JSON for instance `id` at `port`, as our registrations write it.
fn json(id: &str, port: u16) -> Vec<u8> {
    format!(
        "{{\"name\":\"big\",\"id\":\"{id}\",\"address\":\"10.0.0.1\",\"port\":{port},\"sslPort\":null,\"payload\":null,\
         \"registrationTimeUTC\":1,\"serviceType\":\"DYNAMIC\",\"uriSpec\":null}}"
    )
    .into_bytes()
}

/// `n` registrations and unregistrations, one after the other, ours (`d`) or raw: the latencies
/// of each step.
async fn cycles(d: Option<&ServiceDiscovery>, client: &Client, n: usize) -> (Vec<u128>, Vec<u128>) {
    let (mut register, mut unregister) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let ephemeral = zookeeper_client::CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    for i in 0..n {
        let id = format!("i{i}");
        let t = Instant::now();
        match d {
            Some(d) => {
                let instance = ServiceInstance::new("cycle", &id).with_address("10.0.0.1").with_port(80);
                let registration = d.register(instance).await.expect("register");
                register.push(micros(t));
                let t = Instant::now();
                registration.unregister().await.expect("unregistered");
                unregister.push(micros(t));
            }
            None => {
                let path = format!("/services/raw/{id}");
                client.create(&path, &json(&id, 80), &ephemeral).await.expect("raw create");
                register.push(micros(t));
                let t = Instant::now();
                client.delete(&path, None).await.expect("raw delete");
                unregister.push(micros(t));
            }
        }
    }
    (register, unregister)
}

/// The raw listing of the big service: its children, then every node's data, pipelined.
async fn raw_listing(client: &Client) -> u128 {
    let t = Instant::now();
    let names = client.list_children("/services/big").await.expect("raw list");
    let reads: Vec<_> = names.iter().map(|name| client.get_data(&format!("/services/big/{name}"))).collect();
    for read in futures::future::join_all(reads).await {
        read.expect("raw read");
    }
    assert_eq!(names.len(), W9_INSTANCES);
    micros(t)
}

/// The raw floor of an update: setData by one client → NodeDataChanged at another's recursive
/// persistent watch → its getData reply.
async fn raw_update_floor(connect: &str) -> Vec<u128> {
    let (a, b) = (Client::connect(connect).await.expect("raw a"), Client::connect(connect).await.expect("raw b"));
    let mut watcher = b.watch("/services/big", AddWatchMode::PersistentRecursive).await.expect("raw watch");
    let mut floor = Vec::with_capacity(W9_UPDATES);
    for i in 0..W9_WARMUP + W9_UPDATES {
        let data = json("i0000", 20_000 + i as u16);
        let t = Instant::now();
        let (set, at) = tokio::join!(a.set_data("/services/big/i0000", &data, None), async {
            let event = watcher.changed().await;
            assert_eq!(event.event_type, EventType::NodeDataChanged);
            b.get_data(&event.path).await.expect("raw getData");
            micros(t)
        });
        set.expect("raw setData");
        if i >= W9_WARMUP {
            floor.push(at);
        }
    }
    floor
}

pub(crate) async fn w9(connect: &str) -> Vec<String> {
    let root = testkit::unique_root("bench-w9");
    eprintln!("W9: root {root}");
    let raw = raw_baseline(connect, &root).await;
    let rooted = format!("{connect}{root}");
    let client = Client::connect(&rooted).await.expect("raw client");
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(Acls::anyone_all());
    for path in ["/services", "/services/raw", "/services/big"] {
        client.create(path, b"", &persistent).await.expect("raw dirs");
    }
    let session = start_session(connect, &root);
    let d = ServiceDiscovery::new(session.clone(), DiscoveryConfig::new("/services")).expect("discovery");

    // Register and unregister, alternated rounds.
    cycles(Some(&d), &client, W9_WARMUP).await;
    cycles(None, &client, W9_WARMUP).await;
    let (mut ours, mut floor) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    for round in 0..W9_ROUNDS {
        eprintln!("W9: registration round {} of {W9_ROUNDS}", round + 1);
        for first_ours in rotated([true, false], round) {
            let (register, unregister) = cycles(first_ours.then_some(&d), &client, W9_REGISTRATIONS).await;
            let into = if first_ours { &mut ours } else { &mut floor };
            into.0.extend(register);
            into.1.extend(unregister);
        }
    }
    let (register_p50, unregister_p50) = (percentile(&mut ours.0, 50.0), percentile(&mut ours.1, 50.0));
    let (create_p50, delete_p50) = (percentile(&mut floor.0, 50.0), percentile(&mut floor.1, 50.0));

    // A service of 1,000 instances, written raw, pipelined.
    let creates: Vec<_> = (0..W9_INSTANCES)
        .map(|i| {
            let id = format!("i{i:04}");
            let data = json(&id, 10_000 + i as u16);
            let path = format!("/services/big/{id}");
            let client = &client;
            let persistent = &persistent;
            async move { client.create(&path, &data, persistent).await }
        })
        .collect();
    for created in futures::future::join_all(creates).await {
        created.expect("instance node");
    }
    let (mut loads, mut walks) = (Vec::new(), Vec::new());
    for round in 0..W9_ROUNDS {
        for first_ours in rotated([true, false], round) {
            if first_ours {
                let t = Instant::now();
                let cache = d.cache("big").expect("cache");
                cache.wait_initialized(None).await.expect("loaded");
                loads.push(micros(t));
                assert_eq!(cache.instances().await.expect("held").len(), W9_INSTANCES);
                cache.stop().await;
            } else {
                walks.push(raw_listing(&client).await);
            }
        }
    }
    let (load_p50, walk_p50) = (percentile(&mut loads, 50.0), percentile(&mut walks, 50.0));

    let before = rss_kib();
    let mut caches = Vec::new();
    for _ in 0..W9_CACHES {
        let cache = d.cache("big").expect("cache");
        cache.wait_initialized(None).await.expect("loaded");
        caches.push(cache);
    }
    let after = rss_kib();
    let bytes_per_instance = match (before, after) {
        (Some(before), Some(after)) => (after.saturating_sub(before) * 1024) as f64 / (W9_CACHES * W9_INSTANCES) as f64,
        _ => f64::NAN,
    };

    // Update → the cache's event, against the raw floor.
    let mut events = caches[0].events();
    let mut updates = Vec::with_capacity(W9_UPDATES);
    for i in 0..W9_WARMUP + W9_UPDATES {
        let port = 30_000 + i as u16;
        let t = Instant::now();
        client.set_data("/services/big/i0000", &json("i0000", port), None).await.expect("update");
        loop {
            match events.next().await.expect("cache events") {
                Ok(ServiceCacheEvent::InstanceUpdated { instance }) if instance.port == Some(port) => break,
                _ => {}
            }
        }
        if i >= W9_WARMUP {
            updates.push(micros(t));
        }
    }
    let update_p50 = percentile(&mut updates, 50.0);
    let mut floor_updates = raw_update_floor(&rooted).await;
    let floor_update_p50 = percentile(&mut floor_updates, 50.0);
    for cache in caches {
        cache.stop().await;
    }
    session.close().await;
    let ratio = |ours: u128, floor: u128| ours as f64 / floor.max(1) as f64;
    vec![format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W9\",\"registrations\":{},\"register_p50_us\":{register_p50},\
         \"raw_create_p50_us\":{create_p50},\"register_ratio_to_raw\":{:.2},\"unregister_p50_us\":{unregister_p50},\
         \"raw_delete_p50_us\":{delete_p50},\"unregister_ratio_to_raw\":{:.2},\"instances\":{W9_INSTANCES},\
         \"cache_load_p50_us\":{load_p50},\"raw_listing_p50_us\":{walk_p50},\"load_ratio_to_listing\":{:.2},\
         \"cache_bytes_per_instance\":{bytes_per_instance:.0},\"update_event_p50_us\":{update_p50},\
         \"raw_set_notify_get_p50_us\":{floor_update_p50},\"update_ratio_to_raw\":{:.2},\"zk_rtt_p50_us\":{}}}",
        W9_REGISTRATIONS * W9_ROUNDS,
        ratio(register_p50, create_p50),
        ratio(unregister_p50, delete_p50),
        ratio(load_p50, walk_p50),
        ratio(update_p50, floor_update_p50),
        raw.rtt_p50,
    )]
}
