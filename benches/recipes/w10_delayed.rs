//! W10: delayed queue items. 200 items, each due 300–1,500 ms after it is put, consumed by one
//! consumer (concurrency 8): how late each is delivered after its due time (p50, p99), against a
//! bare client that, for the same due times, sleeps until each and then lists the queue and
//! reads the item (the fewest round trips any consumer needs after waking). One workload of the
//! recipe benchmark (`main.rs`); the harness is `harness.rs`.

use std::time::{SystemTime, UNIX_EPOCH};

use actix_zookeeper::queue::ItemOptions;
use zookeeper_client::{Acls, Client};

use super::harness::*;

pub(crate) const W10_ITEMS: usize = 200;
pub(crate) const W10_CONCURRENCY: usize = 8;

/// Notes how late each delivery came after the due time its data carries, and acks it.
pub(crate) struct Lateness(tokio::sync::mpsc::UnboundedSender<u128>);

impl Actor for Lateness {
    type Context = Context<Self>;
}

impl Handler<Delivery> for Lateness {
    type Result = ();
    fn handle(&mut self, delivery: Delivery, ctx: &mut Context<Self>) {
        let due: u128 = String::from_utf8_lossy(&delivery.data).parse().expect("a due time");
        let _ = self.0.send(unix_us().saturating_sub(due * 1000));
        ctx.spawn(
            async move {
                delivery.ack().await.expect("ack");
            }
            .into_actor(self),
        );
    }
}

impl Handler<Revoked> for Lateness {
    type Result = ();
    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {}
}

fn unix_us() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros())
}

/// The due times: spread over 300–1,500 ms from now, in a fixed shuffled order.
fn schedule() -> Vec<Duration> {
    (0..W10_ITEMS).map(|i| Duration::from_millis(300 + ((i * 7919) % W10_ITEMS) as u64 * 6)).collect()
}

/// The floor: for each due time, sleep until it, then list the queue and read the item.
async fn bare(client: &Client, path: &str) -> Vec<u128> {
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(Acls::anyone_all());
    let start = Instant::now();
    let mut waits = Vec::new();
    for (i, after) in schedule().into_iter().enumerate() {
        let node = format!("{path}/item-{i}");
        client.create(&node, b"x", &persistent).await.expect("raw item");
        waits.push(async move {
            let due = start + after;
            tokio::time::sleep_until(due.into()).await;
            client.list_children(path).await.expect("raw list");
            client.get_data(&node).await.expect("raw read");
            Instant::now().saturating_duration_since(due).as_micros()
        });
    }
    futures::future::join_all(waits).await
}

pub(crate) async fn w10(connect: &str) -> Vec<String> {
    let root = testkit::unique_root("bench-w10");
    eprintln!("W10: root {root}");
    let raw = raw_baseline(connect, &root).await;
    let session = start_session(connect, &root);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let config = ConsumerConfig::new("/q")
        .with_concurrency(W10_CONCURRENCY)
        .with_workers(W10_CONCURRENCY, move |_| Lateness(tx.clone()));
    let _consumer = QueueConsumerActor::new(session.clone(), config).start();
    let queue = Queue::new(session.clone(), "/q");
    let now = SystemTime::now();
    for after in schedule() {
        let due = now + after;
        let due_ms = due.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        queue.put_with(due_ms.to_string(), ItemOptions::new().not_before(due)).await.expect("put");
    }
    let mut late = Vec::with_capacity(W10_ITEMS);
    while late.len() < W10_ITEMS {
        late.push(rx.recv().await.expect("a delivery"));
    }

    let client = Client::connect(&format!("{connect}{root}")).await.expect("raw client");
    let persistent = zookeeper_client::CreateMode::Persistent.with_acls(Acls::anyone_all());
    client.create("/bare", b"", &persistent).await.expect("raw queue");
    let mut floor = bare(&client, "/bare").await;
    let (p50, p99) = (percentile(&mut late, 50.0), percentile(&mut late, 99.0));
    let (floor_p50, floor_p99) = (percentile(&mut floor, 50.0), percentile(&mut floor, 99.0));
    session.close().await;
    vec![format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W10\",\"items\":{W10_ITEMS},\"concurrency\":{W10_CONCURRENCY},\
         \"late_p50_us\":{p50},\"late_p99_us\":{p99},\"bare_late_p50_us\":{floor_p50},\"bare_late_p99_us\":{floor_p99},\
         \"ratio_to_bare_p50\":{:.2},\"ratio_to_bare_p99\":{:.2},\"zk_rtt_p50_us\":{}}}",
        p50 as f64 / floor_p50.max(1) as f64,
        p99 as f64 / floor_p99.max(1) as f64,
        raw.rtt_p50,
    )]
}
