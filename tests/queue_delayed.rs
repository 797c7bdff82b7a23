//! Delayed and prioritised queue items against a real ZooKeeper: delivered not before their
//! time, without polling (a consumer sleeps until the earliest due item or a new item), due items
//! by priority before the order they were put in; `take`/`poll`/`peek` agree; a consumer stopped
//! or expired while an item waits leaves it to the next, on time.
#![cfg(feature = "testkit")]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use actix::prelude::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::*;
use actix_zookeeper::testkit::{ClientLinks, TestZooKeeper, expire_session, unique_root};
use common::*;

const WAIT: Duration = Duration::from_secs(30);

/// Every delivery's data and when it came, in order.
type Seen = Arc<Mutex<Vec<(Vec<u8>, SystemTime)>>>;

/// Acks every delivery at once, noting it.
struct Noter(Seen);

impl Actor for Noter {
    type Context = Context<Self>;
}

impl Handler<Delivery> for Noter {
    type Result = ();
    fn handle(&mut self, delivery: Delivery, ctx: &mut Context<Self>) {
        self.0.lock().expect("seen").push((delivery.data.clone(), SystemTime::now()));
        ctx.wait(
            async move {
                delivery.ack().await.expect("ack");
            }
            .into_actor(self),
        );
    }
}

impl Handler<Revoked> for Noter {
    type Result = ();
    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {}
}

/// A consumer of `/q` with one worker, one item at a time (strict line order).
fn consumer(s: &SessionHandle, seen: &Seen) -> Addr<QueueConsumerActor> {
    let seen = seen.clone();
    let config = ConsumerConfig::new("/q").with_workers(1, move |_| Noter(seen.clone())).with_concurrency(1);
    QueueConsumerActor::new(s.clone(), config).start()
}

fn data(seen: &Seen) -> Vec<Vec<u8>> {
    seen.lock().expect("seen").iter().map(|(d, _)| d.clone()).collect()
}

/// A delayed item is delivered not before its time, items put after it but due now go first, and
/// while it waits the consumer lists the queue a bounded number of times, whatever the wait (a
/// consumer woken by a timer of 100 ms would list 15 times in 1.5 s: 30 `getChildren`).
#[actix_rt::test]
async fn a_delayed_item_waits_for_its_time_without_polling() {
    init_tracing();
    let Some(zk) = server_of_our_own() else { return };
    let root = unique_root("queue-delayed");
    let s = session_at(&zk.connect_string(), &root).await;
    let queue = Queue::new(s.clone(), "/q");
    let seen: Seen = Default::default();
    let _consumer = consumer(&s, &seen);
    actix_rt::time::sleep(Duration::from_millis(300)).await;

    let due = SystemTime::now() + Duration::from_millis(1500);
    let name = queue.put_at("later", due).await.expect("put");
    assert!(name.starts_with("qn-|"), "Curator's delay layout: {name}");
    queue.put("now").await.expect("put");
    wait_until("the due item", || data(&seen) == [b"now".to_vec()]).await;
    let listings_before = listings(&zk);
    wait_until("the delayed item", || data(&seen).len() == 2).await;
    let listed = listings(&zk) - listings_before;
    let (_, delivered_at) = seen.lock().expect("seen")[1].clone();
    assert!(delivered_at >= due, "delivered {:?} early", due.duration_since(delivered_at).unwrap_or_default());
    assert!(
        delivered_at.duration_since(due).unwrap_or_default() < Duration::from_secs(2),
        "delivered late: {:?}",
        delivered_at.duration_since(due)
    );
    // Each listing of an at-least-once consumer is two `getChildren` (the items, the claims):
    // one after the first item's ack, one when the delayed item is due, one after its ack.
    assert!(listed <= 8, "{listed} getChildren while one item waited: polling");
    s.close().await;
}

/// Due items go by priority (lower first), then in the order put; a plain item is priority 0.
#[actix_rt::test]
async fn due_items_are_delivered_by_priority_then_in_the_order_put() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-priority");
    let s = session_at(&zk.connect_string(), &root).await;
    let queue = Queue::new(s.clone(), "/q");
    for (item, priority) in [("p5-a", 5), ("p0-a", 0), ("p-3", -3), ("p5-b", 5), ("p10", 10), ("pmin", i32::MIN)] {
        queue.put_with_priority(item, priority).await.expect("put");
    }
    queue.put("plain").await.expect("put");
    assert_eq!(queue.peek().await.expect("peek"), Some(b"pmin".to_vec()));
    let seen: Seen = Default::default();
    let _consumer = consumer(&s, &seen);
    wait_until("all delivered", || data(&seen).len() == 7).await;
    let order: Vec<String> = data(&seen).into_iter().map(|d| String::from_utf8(d).expect("utf-8")).collect();
    assert_eq!(order, ["pmin", "p-3", "p0-a", "plain", "p5-a", "p5-b", "p10"]);
    s.close().await;
}

/// A consumer sleeping until a far item wakes for a nearer one put later; `poll` and `peek`
/// leave an item that is not due alone; `take` waits for it; a delayed item with a priority is
/// both.
#[actix_rt::test]
async fn a_nearer_item_wakes_a_sleeping_consumer_and_take_waits_for_due_items() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-wake");
    let s = session_at(&zk.connect_string(), &root).await;
    let queue = Queue::new(s.clone(), "/q");
    queue.put_at("far", SystemTime::now() + Duration::from_secs(60)).await.expect("put");
    assert_eq!(queue.poll().await.expect("poll"), None, "not due");
    assert_eq!(queue.peek().await.expect("peek"), None, "not due");
    assert_eq!(queue.len().await.expect("len"), 1, "but queued");

    let near = SystemTime::now() + Duration::from_millis(800);
    let both = ItemOptions::new().not_before(near).with_priority(-1);
    queue.put_with("near", both).await.expect("put");
    let started = Instant::now();
    let taken = bounded("take", queue.take(Some(WAIT))).await.expect("take");
    assert_eq!(taken, b"near");
    assert!(SystemTime::now() >= near && started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());

    let seen: Seen = Default::default();
    let _consumer = consumer(&s, &seen);
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    let nearer = SystemTime::now() + Duration::from_millis(700);
    queue.put_at("nearer", nearer).await.expect("put");
    wait_until("the nearer item", || data(&seen) == [b"nearer".to_vec()]).await;
    assert!(seen.lock().expect("seen")[0].1 >= nearer);
    assert_eq!(queue.len().await.expect("len"), 1, "the far item still waits");
    s.close().await;
}

/// Rows "a consumer stops / its session expires while an item waits": the item stays queued and
/// the next consumer (or the same one on its new session) delivers it on time.
#[actix_rt::test]
async fn a_waiting_item_outlives_a_stopped_consumer_and_an_expired_session() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-delayed-faults");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let s = session_at(&links.connect_string(), &root).await;
    let queue = Queue::new(s.clone(), "/q");
    let seen: Seen = Default::default();
    let first = consumer(&s, &seen);
    let due = SystemTime::now() + Duration::from_millis(2500);
    queue.put_at("waits", due).await.expect("put");
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    first.send(Stop).await.expect("stopped");
    let _second = consumer(&s, &seen);

    let info = s.session().await.expect("session").info;
    links.blackhole();
    expire_session(&zk.connect_string(), &info).await.expect("expired");
    links.heal();
    wait_until("delivered after the expiry", || data(&seen) == [b"waits".to_vec()]).await;
    assert!(seen.lock().expect("seen")[0].1 >= due, "not before its time");
    s.close().await;
}

/// Bad input: an id that would read as a due time is refused with a typed error.
#[actix_rt::test]
async fn an_item_id_that_reads_as_a_due_time_is_refused() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let s = session_at(&zk.connect_string(), &unique_root("queue-delayed-bad")).await;
    let refused = Queue::new(s.clone(), "/q").put_with_id("|FF|", "x").await;
    assert!(matches!(refused, Err(QueueError::InvalidItemId { .. })), "{refused:?}");
    s.close().await;
}

/// Row "the consumer is cut off at the item's due time": once back (same session), its timer's
/// listing (failed while cut off, retried) or the watch delivers the item, once.
#[actix_rt::test]
async fn a_consumer_cut_off_at_an_items_due_time_delivers_it_once_back() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-delayed-cut");
    let consumer_side = proxied(&zk.connect_string(), &root, Duration::from_secs(6)).await;
    let producer = session_at(&zk.connect_string(), &root).await;
    let seen: Seen = Default::default();
    let _consumer = consumer(&consumer_side.session, &seen);
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    let due = SystemTime::now() + Duration::from_millis(800);
    Queue::new(producer.clone(), "/q").put_at("cut", due).await.expect("put");
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    let before = consumer_side.session.session().await.expect("session").session_id;
    consumer_side.proxy.blackhole();
    actix_rt::time::sleep(Duration::from_millis(2500)).await;
    assert!(data(&seen).is_empty(), "delivered while cut off");
    consumer_side.proxy.heal();
    wait_until("delivered once back", || data(&seen) == [b"cut".to_vec()]).await;
    assert_eq!(consumer_side.session.session().await.expect("session").session_id, before, "the same session");
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(data(&seen).len(), 1, "once");
    producer.close().await;
}
