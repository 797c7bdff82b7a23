//! The metrics a lock cycle, a queue delivery and a service registration record (see `docs/metrics.md`), read
//! from a recorder installed for this test binary. One test: the recorder is process-wide.
#![cfg(all(feature = "testkit", feature = "metrics"))]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::{ConsumerConfig, Delivery, Queue, QueueConsumerActor, Revoked, Worker};
use actix_zookeeper::testkit::{TestZooKeeper, unique_root};
use common::*;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// Everything recorded so far. The debugging recorder hands out what was recorded since its
/// last snapshot (counters and histograms drain), so every snapshot is added up here.
struct Seen {
    snapshotter: Snapshotter,
    counters: HashMap<String, u64>,
    histograms: HashMap<String, usize>,
    gauges: HashMap<String, f64>,
}

impl Seen {
    fn new(snapshotter: Snapshotter) -> Self {
        Seen { snapshotter, counters: HashMap::new(), histograms: HashMap::new(), gauges: HashMap::new() }
    }

    fn refresh(&mut self) {
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let key = key.key();
            let mut labels: Vec<String> = key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
            labels.sort();
            let id = format!("{}{{{}}}", key.name(), labels.join(","));
            match value {
                DebugValue::Counter(n) => *self.counters.entry(id).or_default() += n,
                DebugValue::Histogram(values) => *self.histograms.entry(id).or_default() += values.len(),
                DebugValue::Gauge(value) => {
                    self.gauges.insert(id, value.into_inner());
                }
            }
        }
    }

    /// The series of `name` whose labels include every `(key, value)` of `labels`.
    fn find<T: Copy>(map: &HashMap<String, T>, name: &str, labels: &[(&str, &str)]) -> Option<T> {
        map.iter()
            .find(|(id, _)| {
                id.starts_with(&format!("{name}{{")) && labels.iter().all(|(k, v)| id.contains(&format!("{k}={v}")))
            })
            .map(|(_, value)| *value)
    }

    fn count(&mut self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.refresh();
        Self::find(&self.counters, name, labels).unwrap_or(0)
    }

    fn samples(&mut self, name: &str, labels: &[(&str, &str)]) -> usize {
        self.refresh();
        Self::find(&self.histograms, name, labels).unwrap_or(0)
    }

    fn gauge(&mut self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.refresh();
        Self::find(&self.gauges, name, labels)
    }
}

/// Acks every delivery.
struct Acker;

impl Actor for Acker {
    type Context = Context<Self>;
}

impl Handler<Delivery> for Acker {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, delivery: Delivery, _: &mut Context<Self>) -> Self::Result {
        Box::pin(async move {
            delivery.ack().await.expect("ack");
        })
    }
}

impl Handler<Revoked> for Acker {
    type Result = ();

    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {}
}

#[actix_rt::test]
async fn a_lock_cycle_and_a_queue_delivery_move_their_series() {
    init_tracing();
    let recorder = DebuggingRecorder::new();
    let mut seen = Seen::new(recorder.snapshotter());
    recorder.install().expect("the only recorder of this test binary");

    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("metrics");
    let (session, _) = connected(SessionConfig::new(zk.connect_string()).with_chroot(&root)).await;
    assert!(seen.count("zk_session_state_changes_total", &[("state", "connected")]) >= 1);

    // A lock cycle.
    let lock_labels = [("recipe", "lock"), ("path", "/lock")];
    assert_eq!(seen.count("zk_grants_total", &lock_labels), 0, "nothing before the cycle");
    let lock = LockActor::new(session.clone(), LockConfig::new("/lock")).start();
    lock.send(Acquire::default()).await.expect("actor").expect("acquired");
    wait_until("the grant is counted", || seen.count("zk_grants_total", &lock_labels) == 1).await;
    assert_eq!(seen.samples("zk_grant_wait_seconds", &lock_labels), 1);
    assert_eq!(seen.samples("zk_grant_hold_seconds", &lock_labels), 0, "held, not yet ended");
    lock.send(Release).await.expect("actor").expect("released");
    wait_until("the release is counted", || {
        seen.count("zk_grant_ends_total", &[("recipe", "lock"), ("path", "/lock"), ("how", "released")]) == 1
    })
    .await;
    assert_eq!(seen.samples("zk_grant_hold_seconds", &lock_labels), 1);
    assert!(seen.samples("zk_request_duration_seconds", &[("op", "create"), ("outcome", "ok")]) >= 1);
    assert!(seen.samples("zk_request_duration_seconds", &[("op", "delete"), ("outcome", "ok")]) >= 1);

    // A queue delivery, acked.
    let queue_labels = |event| [("path", "/q"), ("event", event)];
    let acker = Acker.start();
    let _consumer =
        QueueConsumerActor::new(session.clone(), ConsumerConfig::new("/q").with_worker(Worker::new(&acker))).start();
    Queue::new(session.clone(), "/q").put("one item").await.expect("put");
    wait_until("the item is delivered and acked", || seen.count("zk_queue_items_total", &queue_labels("acked")) == 1)
        .await;
    assert_eq!(seen.count("zk_queue_items_total", &queue_labels("delivered")), 1);
    assert_eq!(seen.count("zk_queue_items_total", &queue_labels("redelivered")), 0);
    assert_eq!(seen.count("zk_queue_items_total", &queue_labels("nacked")), 0);
    assert_eq!(seen.gauge("zk_queue_in_flight", &[("path", "/q")]), Some(0.0));

    // A service registration, registered again after someone deletes it, then unregistered.
    use actix_zookeeper::discovery::{DiscoveryConfig, ServiceDiscovery, ServiceInstance};
    let registrations = |event| [("service", "billing"), ("event", event)];
    let discovery = ServiceDiscovery::new(session.clone(), DiscoveryConfig::new("/services")).expect("discovery");
    let registration = discovery.register(ServiceInstance::new("billing", "a1")).await.expect("registered");
    assert_eq!(seen.count("zk_discovery_registrations_total", &registrations("registered")), 1);
    session.delete(registration.path(), None).await.expect("someone deletes it");
    wait_until("the registration is made again", || {
        seen.count("zk_discovery_registrations_total", &registrations("reregistered")) == 1
    })
    .await;
    registration.unregister().await.expect("unregistered");
    assert_eq!(seen.count("zk_discovery_registrations_total", &registrations("unregistered")), 1);
    actix_rt::time::sleep(Duration::from_millis(100)).await;
    session.close().await;
}
