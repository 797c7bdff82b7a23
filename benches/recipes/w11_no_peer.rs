//! W11: what no peer has (issue 28). A leader's proclaimed value reaching an observer against
//! the raw setData → NodeDataChanged (one-shot watch) → getData floor; the older-server
//! fallback of a tree cache (one-shot watches, through a proxy answering as a server without
//! persistent watches) against the persistent-watch path through the same kind of proxy; and
//! what a health snapshot costs (bytes per recipe, time to build) against one `exists` round
//! trip. One workload of the recipe benchmark (`main.rs`); the harness is `harness.rs`.

use actix_zookeeper::election::{ElectionConfig, ElectionHandle, ElectionObserverHandle, ProclamationChanged};
use actix_zookeeper::lock::LockHandle;
use actix_zookeeper::testkit::{FaultProxy, OlderServer};
use futures::StreamExt;
use zookeeper_client::{Acls, Client, EventType};

use super::harness::*;

const W11_WARMUP: usize = 50;
const W11_PROCLAIMS: usize = 300;
const W11_DIRS: usize = 20;
const W11_LEAVES: usize = 49;
const W11_UPDATES: usize = 300;
const W11_RECIPES: usize = 1000;

/// Raw floor: a set by one client, the one-shot data watch of another firing, its getData (which
/// sets the next watch).
async fn raw_proclaim_floor(connect: &str) -> Vec<u128> {
    let (a, b) = (Client::connect(connect).await.expect("raw a"), Client::connect(connect).await.expect("raw b"));
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(Acls::anyone_all());
    a.create("/floor", b"", &persistent).await.expect("floor node");
    let (_, _, mut watcher) = b.get_and_watch_data("/floor").await.expect("watch");
    let mut floor = Vec::with_capacity(W11_PROCLAIMS);
    for i in 0..W11_WARMUP + W11_PROCLAIMS {
        let t = Instant::now();
        let (set, (at, next)) = tokio::join!(a.set_data("/floor", format!("v{i}").as_bytes(), None), async {
            let event = watcher.changed().await;
            assert_eq!(event.event_type, EventType::NodeDataChanged);
            let (_, _, next) = b.get_and_watch_data("/floor").await.expect("raw getData");
            (micros(t), next)
        });
        set.expect("raw setData");
        watcher = next;
        if i >= W11_WARMUP {
            floor.push(at);
        }
    }
    floor
}

/// Proclaims `W11_WARMUP + W11_PROCLAIMS` values one after the other, each timed to the
/// observer's event carrying it.
async fn proclaims(leader: &ElectionHandle, observer: &ElectionObserverHandle) -> Vec<u128> {
    let mut events = observer.events();
    let mut latencies = Vec::with_capacity(W11_PROCLAIMS);
    for i in 0..W11_WARMUP + W11_PROCLAIMS {
        let value = format!("v{i}").into_bytes();
        let t = Instant::now();
        leader.proclaim(value.clone()).await.expect("proclaim");
        loop {
            match events.next().await.expect("observer events") {
                Ok(ProclamationChanged { current: Some(now) }) if now.value.as_ref() == Some(&value) => break,
                _ => {}
            }
        }
        if i >= W11_WARMUP {
            latencies.push(micros(t));
        }
    }
    latencies
}

/// A tree cache through `proxy`: its load, then `W11_UPDATES` sets each timed to its
/// `NodeUpdated`.
async fn cache_through(proxy: &FaultProxy, root: &str, writer: &Client) -> (u128, u128) {
    let session = start_session(&proxy.address(), root);
    session.sync("/").await.expect("connected");
    let t = Instant::now();
    let cache = cache::CacheHandle::start(
        session.clone(),
        CacheConfig::new("/tree").with_scope(cache::CacheScope::Tree { max_depth: None }),
    )
    .expect("cache");
    let mut events = cache.events();
    loop {
        if let Ok(CacheEvent::CacheInitialized) = events.next().await.expect("cache events") {
            break;
        }
    }
    let load = micros(t);
    let mut updates = Vec::with_capacity(W11_UPDATES);
    for i in 0..W11_WARMUP + W11_UPDATES {
        let path = format!("/tree/d{}/l{}", i % W11_DIRS, i % W11_LEAVES);
        let data = format!("u{i}").into_bytes();
        let t = Instant::now();
        writer.set_data(&path, &data, None).await.expect("set");
        loop {
            match events.next().await.expect("cache events") {
                Ok(CacheEvent::NodeUpdated { path: at, data: Some(now), .. }) if at == path && now == data => break,
                _ => {}
            }
        }
        if i >= W11_WARMUP {
            updates.push(micros(t));
        }
    }
    session.close().await;
    (load, percentile(&mut updates, 50.0))
}

pub(crate) async fn w11(connect: &str) -> Vec<String> {
    let root = testkit::unique_root("bench-w11");
    eprintln!("W11: root {root}");
    let raw = raw_baseline(connect, &root).await;
    let rooted = format!("{connect}{root}");

    // Proclaim → observer, against the raw floor.
    let (leading, watching) = (start_session(connect, &root), start_session(connect, &root));
    let leader = ElectionHandle::start(leading.clone(), ElectionConfig::new("/leader").with_participant_id("l"))
        .expect("election");
    leader.leadership().await.expect("leads");
    let observer = ElectionObserverHandle::start(watching.clone(), "/leader").expect("observer");
    let mut ours = proclaims(&leader, &observer).await;
    let mut floor = raw_proclaim_floor(&rooted).await;
    let (proclaim_p50, floor_p50) = (percentile(&mut ours, 50.0), percentile(&mut floor, 50.0));
    leader.stop().await;

    // The cache's fallback against its persistent-watch path, each through a proxy.
    let writer = Client::connect(&rooted).await.expect("writer");
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(Acls::anyone_all());
    writer.create("/tree", b"", &persistent).await.expect("tree");
    for d in 0..W11_DIRS {
        writer.create(&format!("/tree/d{d}"), b"", &persistent).await.expect("dir");
        for l in 0..W11_LEAVES {
            writer.create(&format!("/tree/d{d}/l{l}"), b"x", &persistent).await.expect("leaf");
        }
    }
    let plain = FaultProxy::start(connect).expect("proxy");
    let older = FaultProxy::start_as(connect, OlderServer::without_extras()).expect("older proxy");
    let (mut persistent_loads, mut persistent_updates, mut fallback_loads, mut fallback_updates) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..3 {
        for fallback in rotated([false, true], round) {
            let (load, update) = cache_through(if fallback { &older } else { &plain }, &root, &writer).await;
            if fallback {
                fallback_loads.push(load);
                fallback_updates.push(update);
            } else {
                persistent_loads.push(load);
                persistent_updates.push(update);
            }
        }
    }
    let p = |v: &mut Vec<u128>| percentile(v, 50.0);
    let (pl, pu, fl, fu) =
        (p(&mut persistent_loads), p(&mut persistent_updates), p(&mut fallback_loads), p(&mut fallback_updates));

    // Health: the snapshot of a session with 1,000 recipes on it.
    let session = start_session(connect, &root);
    let before = rss_kib();
    let locks: Vec<LockHandle> = (0..W11_RECIPES)
        .map(|i| LockHandle::start(session.clone(), LockConfig::new(format!("/locks/l{i}"))).expect("lock"))
        .collect();
    for lock in &locks {
        lock.acquire(None).await.expect("acquire");
    }
    let mut builds = Vec::with_capacity(100);
    let mut held = Vec::with_capacity(100);
    let mid = rss_kib();
    for _ in 0..100 {
        let t = Instant::now();
        held.push(session.health());
        builds.push(micros(t));
    }
    let after = rss_kib();
    assert_eq!(held[0].recipes.len(), W11_RECIPES);
    let snapshot_bytes_per_recipe = match (mid, after) {
        (Some(mid), Some(after)) => (after.saturating_sub(mid) * 1024) as f64 / (100 * W11_RECIPES) as f64,
        _ => f64::NAN,
    };
    let recipes_kib = match (before, mid) {
        (Some(before), Some(mid)) => mid.saturating_sub(before),
        _ => 0,
    };
    let build_p50 = percentile(&mut builds, 50.0);
    drop(held);
    for lock in &locks {
        lock.release().await.expect("release");
    }
    session.close().await;
    leading.close().await;
    watching.close().await;
    let ratio = |ours: u128, floor: u128| ours as f64 / floor.max(1) as f64;
    vec![format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W11\",\"proclaims\":{W11_PROCLAIMS},\"proclaim_event_p50_us\":{proclaim_p50},\
         \"raw_set_notify_get_p50_us\":{floor_p50},\"proclaim_ratio_to_raw\":{:.2},\"tree_nodes\":{},\
         \"cache_load_persistent_us\":{pl},\"cache_load_fallback_us\":{fl},\"fallback_load_ratio\":{:.2},\
         \"cache_update_persistent_p50_us\":{pu},\"cache_update_fallback_p50_us\":{fu},\"fallback_update_ratio\":{:.2},\
         \"recipes\":{W11_RECIPES},\"recipes_rss_kib\":{recipes_kib},\"health_snapshot_bytes_per_recipe\":{snapshot_bytes_per_recipe:.0},\
         \"health_snapshot_p50_us\":{build_p50},\"zk_rtt_p50_us\":{},\"snapshot_ratio_to_rtt\":{:.2}}}",
        ratio(proclaim_p50, floor_p50),
        1 + W11_DIRS * (1 + W11_LEAVES),
        ratio(fl, pl),
        ratio(fu, pu),
        raw.rtt_p50,
        ratio(build_p50, raw.rtt_p50),
    )]
}
