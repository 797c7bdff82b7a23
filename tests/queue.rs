//! The distributed queue against a real ZooKeeper: nothing lost, nothing done twice in normal
//! operation, redelivery after a consumer's session ends, dead letters, backpressure, faults.
#![cfg(feature = "testkit")]

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::*;
use actix_zookeeper::testkit::{ClientLinks, Direction, TestZooKeeper, ZkServer, expire_session, unique_root};
use common::*;

const WAIT: Duration = Duration::from_secs(30);

/// What the workers saw, shared by a test's workers.
#[derive(Clone, Default)]
struct Ledger {
    /// Deliveries per item data.
    seen: Arc<Mutex<HashMap<Vec<u8>, Vec<u32>>>>,
    acked: Arc<AtomicUsize>,
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    revoked: Arc<Mutex<Vec<String>>>,
    held: Arc<Mutex<Vec<Delivery>>>,
    /// Settlements that failed, with why (a test that expects none says so).
    settle_errors: Arc<Mutex<Vec<QueueError>>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    Ack,
    AckAfter(Duration),
    Nack,
    /// Keeps the first `n` deliveries unsettled (to be acked later by the test), acks the rest.
    Hold(usize),
}

struct TestWorker {
    ledger: Ledger,
    behaviour: Behaviour,
}

impl Actor for TestWorker {
    type Context = Context<Self>;
}

impl Handler<Delivery> for TestWorker {
    type Result = ();

    fn handle(&mut self, delivery: Delivery, ctx: &mut Context<Self>) {
        self.ledger.seen.lock().expect("ledger").entry(delivery.data.clone()).or_default().push(delivery.attempt);
        let now = self.ledger.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.ledger.most.fetch_max(now, Ordering::SeqCst);
        let ledger = self.ledger.clone();
        let delay = match self.behaviour {
            Behaviour::Hold(n) => {
                let mut held = ledger.held.lock().expect("held");
                if held.len() < n {
                    held.push(delivery);
                    return;
                }
                Duration::ZERO
            }
            Behaviour::AckAfter(d) => d,
            _ => Duration::ZERO,
        };
        let nack = self.behaviour == Behaviour::Nack;
        ctx.spawn(
            async move {
                if !delay.is_zero() {
                    actix_rt::time::sleep(delay).await;
                }
                let settled = if nack { delivery.nack().await } else { delivery.ack().await };
                // In flight until its settlement is answered, not merely asked for: the consumer
                // must not hand out the next delivery on a slot whose ack is still on its way.
                ledger.running.fetch_sub(1, Ordering::SeqCst);
                match settled {
                    Ok(()) if !nack => {
                        ledger.acked.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(()) => {}
                    Err(error) => ledger.settle_errors.lock().expect("errors").push(error),
                }
            }
            .into_actor(self),
        );
    }
}

impl Handler<Revoked> for TestWorker {
    type Result = ();
    fn handle(&mut self, msg: Revoked, _: &mut Context<Self>) {
        self.ledger.revoked.lock().expect("revoked").push(msg.id);
    }
}

fn workers(config: ConsumerConfig, n: usize, ledger: &Ledger, behaviour: Behaviour) -> ConsumerConfig {
    let ledger = ledger.clone();
    config.with_workers(n, move |_| TestWorker { ledger: ledger.clone(), behaviour })
}

async fn items_left(s: &SessionHandle) -> Vec<String> {
    children(s, "/q").await.into_iter().filter(|n| n.starts_with(ITEM_PREFIX)).collect()
}

#[actix_rt::test]
async fn four_consumers_two_producers_every_item_exactly_once() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue");
    let ledger = Ledger::default();
    let mut sessions = Vec::new();
    let mut consumers = Vec::new();
    for i in 0..4 {
        let s = session_at(&zk.connect_string(), &root).await;
        let config = workers(ConsumerConfig::new("/q").with_consumer_id(format!("c{i}")), 2, &ledger, Behaviour::Ack)
            .with_concurrency(8);
        consumers.push(QueueConsumerActor::new(s.clone(), config).start());
        sessions.push(s);
    }
    let mut producers = Vec::new();
    for (p, session) in sessions.iter().take(2).enumerate() {
        let queue = Queue::new(session.clone(), "/q");
        producers.push(actix_rt::spawn(async move {
            for batch in 0..20 {
                let items = (0..50).map(|n| format!("p{p}-{}", batch * 50 + n).into_bytes()).collect();
                queue.put_all(items).await.expect("put_all");
            }
        }));
    }
    for p in producers {
        p.await.expect("producer");
    }
    wait_until("2000 acks", || ledger.acked.load(Ordering::SeqCst) >= 2000).await;
    // A late duplicate would be delivered after the last ack: give it time to show.
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let errors = ledger.settle_errors.lock().expect("errors").clone();
    assert!(errors.is_empty(), "no settlement failed in normal operation: {errors:?}");
    assert_eq!(ledger.acked.load(Ordering::SeqCst), 2000, "every item acked once");
    let seen = ledger.seen.lock().expect("ledger").clone();
    assert_eq!(seen.len(), 2000, "every item was delivered");
    let twice: Vec<_> = seen.iter().filter(|(_, attempts)| attempts.len() != 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    for p in 0..2 {
        for n in 0..1000 {
            assert!(seen.contains_key(format!("p{p}-{n}").as_bytes()), "p{p}-{n} lost");
        }
    }
    assert!(items_left(&sessions[0]).await.is_empty(), "no item left");
    // A claim made on an item another consumer just finished is given back right after the read
    // that finds the item gone: give those a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !children(&sessions[0], "/q/claims").await.is_empty() {
        assert!(Instant::now() < deadline, "no claim left: {:?}", children(&sessions[0], "/q/claims").await);
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    drop(consumers);
    for s in sessions {
        s.close().await;
    }
}

#[actix_rt::test]
async fn an_expired_consumers_items_go_to_another_and_its_late_ack_fails() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-expiry");
    let (a, b) = (session_at(&zk.connect_string(), &root).await, session_at(&zk.connect_string(), &root).await);
    let (holding, acking) = (Ledger::default(), Ledger::default());
    let queue = Queue::new(a.clone(), "/q");
    queue.put_all((0..20).map(|n| format!("item-{n}").into_bytes()).collect()).await.expect("put");
    let _holder = QueueConsumerActor::new(
        a.clone(),
        workers(ConsumerConfig::new("/q").with_consumer_id("a"), 1, &holding, Behaviour::Hold(3)).with_concurrency(3),
    )
    .start();
    wait_until("a holds 3 items", || holding.held.lock().expect("held").len() == 3).await;
    let _other = QueueConsumerActor::new(
        b.clone(),
        workers(ConsumerConfig::new("/q").with_consumer_id("b"), 2, &acking, Behaviour::Ack),
    )
    .start();

    let info = a.session().await.expect("session").info;
    expire_session(&zk.connect_string(), &info).await.expect("expire");
    wait_until("a's deliveries revoked", || holding.revoked.lock().expect("revoked").len() == 3).await;
    wait_until("everything done", || holding.acked.load(Ordering::SeqCst) + acking.acked.load(Ordering::SeqCst) >= 20)
        .await;
    let held: Vec<Delivery> = holding.held.lock().expect("held").clone();
    for delivery in &held {
        let seen_by_b = acking.seen.lock().expect("ledger").contains_key(&delivery.data);
        let seen_again_by_a = holding.seen.lock().expect("ledger").get(&delivery.data).is_some_and(|v| v.len() > 1);
        assert!(seen_by_b || seen_again_by_a, "{} was delivered again", delivery.id);
        let err = delivery.ack().await.unwrap_err();
        assert!(matches!(err, QueueError::Revoked { .. } | QueueError::ClaimLost { .. }), "{err:?}");
    }
    assert!(items_left(&b).await.is_empty(), "nothing lost, nothing left");
    a.close().await;
    b.close().await;
}

/// Regression (issue 39, item 1): a settlement belongs to its delivery, not to its item. A
/// worker held delivery D1 when its consumer's session expired; the consumer (concurrency 1)
/// delivered the same item again as D2 on the new session. D1's late ack answered `Ok` and
/// deleted D2's claim and the item under D2's worker; D1's late nack bumped the item and a third
/// delivery went out while D2 was being worked on. Now both answer `Revoked`, and D2 stays valid.
async fn a_late_settle_of_a_revoked_delivery_spares_its_redelivery(outcome: Outcome) {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-late-settle");
    let s = session_at(&zk.connect_string(), &root).await;
    let id = Queue::new(s.clone(), "/q").put(b"x".to_vec()).await.expect("put");
    let ledger = Ledger::default();
    let _consumer = QueueConsumerActor::new(
        s.clone(),
        workers(ConsumerConfig::new("/q"), 1, &ledger, Behaviour::Hold(3)).with_concurrency(1),
    )
    .start();
    wait_until("D1 is held", || ledger.held.lock().expect("held").len() == 1).await;
    let version_before = s.exists(&format!("/q/{id}")).await.expect("exists").expect("item").version;
    let info = s.session().await.expect("session").info;
    expire_session(&zk.connect_string(), &info).await.expect("expire");
    wait_until("D1 revoked", || ledger.revoked.lock().expect("revoked").len() == 1).await;
    wait_until("D2 is held", || ledger.held.lock().expect("held").len() == 2).await;
    let (d1, d2) = {
        let held = ledger.held.lock().expect("held");
        (held[0].clone(), held[1].clone())
    };
    assert_eq!((d1.id.as_str(), d2.id.as_str()), (id.as_str(), id.as_str()), "the same item, delivered twice");
    assert!(d2.token > d1.token, "D2 is a later claim: {:?} then {:?}", d1.token, d2.token);

    let late = match &outcome {
        Outcome::Ack => d1.ack().await,
        Outcome::Nack => d1.nack().await,
        Outcome::DeadLetter { reason } => d1.dead_letter(reason.clone()).await,
    };
    assert!(matches!(late, Err(QueueError::Revoked { .. })), "D1's late {outcome:?}: {late:?}");
    let item = s.exists(&format!("/q/{id}")).await.expect("exists");
    assert_eq!(item.map(|stat| stat.version), Some(version_before), "the item is untouched (no attempt counted)");
    assert_eq!(children(&s, "/q/claims").await, vec![id.clone()], "D2's claim is intact");
    assert_eq!(ledger.seen.lock().expect("ledger")[&b"x".to_vec()].len(), 2, "no third delivery");

    assert_eq!(d2.ack().await, Ok(()), "D2's own ack");
    assert!(items_left(&s).await.is_empty(), "acked by D2");
    assert_eq!(ledger.seen.lock().expect("ledger")[&b"x".to_vec()].len(), 2, "two deliveries in all");
    s.close().await;
}

#[actix_rt::test]
async fn a_late_ack_of_a_revoked_delivery_spares_its_redelivery() {
    a_late_settle_of_a_revoked_delivery_spares_its_redelivery(Outcome::Ack).await;
}

#[actix_rt::test]
async fn a_late_nack_of_a_revoked_delivery_spares_its_redelivery() {
    a_late_settle_of_a_revoked_delivery_spares_its_redelivery(Outcome::Nack).await;
}

#[actix_rt::test]
async fn a_late_dead_letter_of_a_revoked_delivery_spares_its_redelivery() {
    a_late_settle_of_a_revoked_delivery_spares_its_redelivery(Outcome::DeadLetter { reason: "late".into() }).await;
}

#[actix_rt::test]
async fn nacked_items_are_retried_then_dead_lettered() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-dlq");
    let s = session_at(&zk.connect_string(), &root).await;
    let ledger = Ledger::default();
    Queue::new(s.clone(), "/q").put_all(vec![b"poison-1".to_vec(), b"poison-2".to_vec()]).await.expect("put");
    let _consumer = QueueConsumerActor::new(
        s.clone(),
        workers(ConsumerConfig::new("/q"), 1, &ledger, Behaviour::Nack).with_max_attempts(3).with_dead_letter("/dlq"),
    )
    .start();
    let deadline = Instant::now() + WAIT;
    while children(&s, "/dlq").await.len() < 2 {
        assert!(Instant::now() < deadline, "items never reached the dead-letter path");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = ledger.seen.lock().expect("ledger").clone();
    for item in [b"poison-1".to_vec(), b"poison-2".to_vec()] {
        assert_eq!(seen[&item], vec![1, 2, 3], "three attempts, numbered");
    }
    let dead = children(&s, "/dlq").await;
    let data = s.get_data(&format!("/dlq/{}", dead[0])).await.expect("dead letter").data;
    assert!(data.starts_with(b"poison-"), "the dead letter keeps the item's data");
    assert!(items_left(&s).await.is_empty());
    s.close().await;
}

/// Issue 39, item 8: a worker sets one poison item aside at once (`Delivery::dead_letter`),
/// while another item's failure is retried under the attempt limit. Without a dead-letter path
/// the call is refused typed and changes nothing.
#[actix_rt::test]
async fn a_worker_dead_letters_one_poison_item_at_once_and_others_are_retried() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-dead-letter-now");
    let s = session_at(&zk.connect_string(), &root).await;
    Queue::new(s.clone(), "/q").put_all(vec![b"poison".to_vec(), b"flaky".to_vec()]).await.expect("put");
    let ledger = Ledger::default();
    let _consumer = QueueConsumerActor::new(
        s.clone(),
        workers(ConsumerConfig::new("/q"), 1, &ledger, Behaviour::Hold(2))
            .with_concurrency(2)
            .with_max_attempts(5)
            .with_dead_letter("/dlq"),
    )
    .start();
    wait_until("both items held", || ledger.held.lock().expect("held").len() == 2).await;
    let held = ledger.held.lock().expect("held").clone();
    let poison = held.iter().find(|d| d.data == b"poison").expect("poison").clone();
    let flaky = held.iter().find(|d| d.data == b"flaky").expect("flaky").clone();
    assert_eq!((poison.attempt, flaky.attempt), (1, 1));
    assert_eq!(poison.dead_letter("cannot parse").await, Ok(()), "set aside at once");
    assert_eq!(flaky.nack().await, Ok(()), "retried");
    wait_until("flaky delivered again and acked", || ledger.acked.load(Ordering::SeqCst) == 1).await;

    let dead = children(&s, "/dlq").await;
    assert_eq!(dead.len(), 1, "one dead letter: {dead:?}");
    let data = s.get_data(&format!("/dlq/{}", dead[0])).await.expect("dead letter").data;
    assert_eq!(data, b"poison", "the dead letter keeps the item's data");
    let seen = ledger.seen.lock().expect("ledger").clone();
    assert_eq!(seen[&b"poison".to_vec()], vec![1], "the poison item was delivered once, on its first attempt");
    assert_eq!(seen[&b"flaky".to_vec()], vec![1, 2], "the other failure was retried");
    assert!(items_left(&s).await.is_empty());
    assert!(children(&s, "/q/claims").await.is_empty());
    assert!(matches!(poison.ack().await, Err(QueueError::UnknownDelivery { .. })), "settled once");
    s.close().await;
}

#[actix_rt::test]
async fn dead_letter_without_a_dead_letter_path_is_refused_and_changes_nothing() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-dead-letter-nowhere");
    let s = session_at(&zk.connect_string(), &root).await;
    let id = Queue::new(s.clone(), "/q").put(b"poison".to_vec()).await.expect("put");
    let ledger = Ledger::default();
    let _consumer =
        QueueConsumerActor::new(s.clone(), workers(ConsumerConfig::new("/q"), 1, &ledger, Behaviour::Hold(1))).start();
    wait_until("the item is held", || ledger.held.lock().expect("held").len() == 1).await;
    let delivery = ledger.held.lock().expect("held")[0].clone();
    let refused = delivery.dead_letter("cannot parse").await;
    assert!(matches!(refused, Err(QueueError::DeadLetterUnavailable { .. })), "{refused:?}");
    assert_eq!(items_left(&s).await, vec![id.clone()], "the item is still queued");
    assert_eq!(children(&s, "/q/claims").await, vec![id], "and still claimed by its delivery");
    assert_eq!(delivery.ack().await, Ok(()), "the delivery is still held and can be settled");
    assert!(items_left(&s).await.is_empty());
    s.close().await;
}

#[actix_rt::test]
async fn never_more_deliveries_in_flight_than_the_concurrency() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-concurrency");
    let s = session_at(&zk.connect_string(), &root).await;
    let ledger = Ledger::default();
    Queue::new(s.clone(), "/q").put_all((0..30).map(|n| vec![n]).collect()).await.expect("put");
    let _consumer = QueueConsumerActor::new(
        s.clone(),
        workers(ConsumerConfig::new("/q"), 5, &ledger, Behaviour::AckAfter(Duration::from_millis(30)))
            .with_concurrency(3),
    )
    .start();
    // The server's view: a claim is made before its delivery and deleted by the settlement, so a
    // slot freed before its settlement was answered would let a fourth claim be made. Sampled
    // from another session (a snapshot is one moment of the server: it cannot overcount).
    let observer = session_at(&zk.connect_string(), &root).await;
    let mut most_claims = 0;
    while ledger.acked.load(Ordering::SeqCst) < 30 {
        if let Ok(claims) = observer.children("/q/claims").await {
            most_claims = most_claims.max(claims.names.len());
        }
    }
    // Exactly 3: never more, and the sampling does see the limit used (so it would see more).
    assert_eq!(most_claims, 3, "claims at once: more in flight than the concurrency, or a blind sampler");
    // The workers' view shows the limit is used. It counts a delivery until its `ack()` future
    // returned (see `TestWorker`), which can be a moment after the consumer freed the slot and
    // delivered the next item to another worker: it may see a fourth, so it only bounds from below.
    assert!(ledger.most.load(Ordering::SeqCst) >= 3, "the limit of 3 is used");
    assert_eq!(ledger.running.load(Ordering::SeqCst), 0, "every settlement was answered");
    let errors = ledger.settle_errors.lock().expect("errors").clone();
    assert!(errors.is_empty(), "no settlement failed: {errors:?}");
    observer.close().await;
    s.close().await;
}

#[actix_rt::test]
async fn a_server_restart_mid_run_loses_nothing_and_leaves_no_claim() {
    init_tracing();
    let mut server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root("queue-restart");
    let cfg =
        SessionConfig::new(server.connect_string()).with_chroot(root).with_session_timeout(Duration::from_secs(10));
    let (s, _) = connected(cfg).await;
    let ledger = Ledger::default();
    let queue = Queue::new(s.clone(), "/q");
    queue.put_all((0..300u32).map(|n| n.to_be_bytes().to_vec()).collect()).await.expect("put");
    let _consumer = QueueConsumerActor::new(
        s.clone(),
        workers(ConsumerConfig::new("/q"), 4, &ledger, Behaviour::AckAfter(Duration::from_millis(2))),
    )
    .start();
    wait_until("some progress", || ledger.acked.load(Ordering::SeqCst) >= 50).await;
    server.stop().expect("stop");
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    server.restart().expect("restart");
    let deadline = Instant::now() + WAIT;
    while !items_left(&s).await.is_empty() {
        assert!(Instant::now() < deadline, "items left after the restart");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = ledger.seen.lock().expect("ledger").clone();
    for n in 0..300u32 {
        assert!(seen.contains_key(n.to_be_bytes().as_slice()), "item {n} lost");
    }
    let deadline = Instant::now() + WAIT;
    while !children(&s, "/q/claims").await.is_empty() {
        assert!(Instant::now() < deadline, "orphan claims left");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    s.close().await;
}

#[actix_rt::test]
async fn oversize_and_foreign_items_are_reported_not_fatal() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-bad");
    let s = session_at(&zk.connect_string(), &root).await;
    let queue = Queue::new(s.clone(), "/q");
    let err = queue.put(vec![0u8; 2 * 1024 * 1024]).await.unwrap_err();
    assert!(matches!(&err, QueueError::ZooKeeper(Error::DataTooLarge { path, .. }) if path == "/q/qn-"), "{err:?}");
    assert_eq!(queue.len().await.expect("len"), 0, "nothing written");
    let err = queue.put_all(vec![b"ok".to_vec(), vec![0u8; 2 * 1024 * 1024]]).await.unwrap_err();
    // Refused whole, before sending: the request is too large, whichever item makes it so.
    assert!(matches!(&err, QueueError::ZooKeeper(Error::DataTooLarge { path, .. }) if path == "/q/qn-"), "{err:?}");
    assert_eq!(queue.len().await.expect("len"), 0, "put_all is all or nothing");

    // Nodes a foreign client left in the queue directory are skipped, and work goes on.
    s.ensure_path("/q").await.expect("queue");
    s.create("/q/foreign", "?", CreateMode::Persistent).await.expect("foreign node");
    s.create("/q/qn-garbage", "?", CreateMode::Persistent).await.expect("malformed name");
    // Names that look almost like items: non-ASCII before the number (such a name once panicked
    // the consumer), a due time too large for 64 bits, a due time that is not hex.
    let hostile = ["qn-\u{fc}0000000001", "qn-|FFFFFFFFFFFFFFFFFFFFF|0000000002", "qn-|zz|0000000003", "qn-\u{4E2D}-"];
    for name in hostile {
        s.create(&format!("/q/{name}"), "?", CreateMode::Persistent).await.expect("hostile name");
    }
    queue.put("real").await.expect("put");
    let ledger = Ledger::default();
    let _consumer =
        QueueConsumerActor::new(s.clone(), workers(ConsumerConfig::new("/q"), 1, &ledger, Behaviour::Ack)).start();
    wait_until("the real item", || ledger.acked.load(Ordering::SeqCst) == 1).await;
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ledger.seen.lock().expect("ledger").len(), 1, "foreign nodes are not delivered");
    let mut left = children(&s, "/q").await;
    left.sort();
    let mut expected = vec!["claims", "foreign", "qn-garbage"];
    expected.extend(hostile);
    expected.sort();
    assert_eq!(left, expected);
    s.close().await;
}

#[actix_rt::test]
async fn the_official_recipe_api() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-api");
    let s = session_at(&zk.connect_string(), &root).await;
    let queue = Queue::new(s.clone(), "/q");
    assert_eq!(queue.peek().await.expect("peek"), None);
    assert!(matches!(queue.element().await, Err(QueueError::Empty { .. })));
    assert!(matches!(queue.remove().await, Err(QueueError::Empty { .. })));
    for item in ["a", "b", "c"] {
        let name = queue.put(item).await.expect("put");
        assert!(name.starts_with(ITEM_PREFIX) && name.len() == 13, "{name}");
    }
    assert_eq!(queue.peek().await.expect("peek").as_deref(), Some(&b"a"[..]));
    assert_eq!(queue.element().await.expect("element"), b"a");
    assert_eq!(queue.poll().await.expect("poll").as_deref(), Some(&b"a"[..]));
    assert_eq!(queue.remove().await.expect("remove"), b"b");
    assert_eq!(queue.len().await.expect("len"), 1);
    assert_eq!(queue.take(None).await.expect("take"), b"c");
    assert!(matches!(queue.take(Some(Duration::from_millis(200))).await, Err(QueueError::Empty { .. })));

    // A blocked take wakes up on a watch when an item arrives.
    let waiting = {
        let queue = queue.clone();
        actix_rt::spawn(async move { queue.take(Some(WAIT)).await })
    };
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished());
    queue.put("d").await.expect("put");
    assert_eq!(bounded("take", waiting).await.expect("task").expect("take"), b"d");
    s.close().await;
}

#[actix_rt::test]
async fn at_most_once_consumers_never_deliver_twice() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-amo");
    let ledger = Ledger::default();
    let mut sessions = Vec::new();
    let mut consumers = Vec::new();
    for _ in 0..2 {
        let s = session_at(&zk.connect_string(), &root).await;
        let config = workers(ConsumerConfig::new("/q").with_mode(DeliveryMode::AtMostOnce), 2, &ledger, Behaviour::Ack);
        consumers.push(QueueConsumerActor::new(s.clone(), config).start());
        sessions.push(s);
    }
    Queue::new(sessions[0].clone(), "/q")
        .put_all((0..200u32).map(|n| n.to_be_bytes().to_vec()).collect())
        .await
        .expect("put");
    wait_until("200 deliveries", || ledger.acked.load(Ordering::SeqCst) >= 200).await;
    let seen = ledger.seen.lock().expect("ledger").clone();
    assert_eq!(seen.len(), 200);
    assert!(seen.values().all(|attempts| attempts.len() == 1), "delivered twice");
    assert!(items_left(&sessions[0]).await.is_empty());
    assert!(children(&sessions[0], "/q/claims").await.is_empty(), "at-most-once needs no claims");
    drop(consumers);
    for s in sessions {
        s.close().await;
    }
}

#[actix_rt::test]
async fn a_stopped_consumer_gives_its_items_back_at_once() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-stop");
    let s = session_at(&zk.connect_string(), &root).await;
    let (holding, acking) = (Ledger::default(), Ledger::default());
    Queue::new(s.clone(), "/q").put_all((0..5u8).map(|n| vec![n]).collect()).await.expect("put");
    let holder = QueueConsumerActor::new(
        s.clone(),
        workers(ConsumerConfig::new("/q"), 1, &holding, Behaviour::Hold(2)).with_concurrency(2),
    )
    .start();
    wait_until("two items held", || holding.held.lock().expect("held").len() == 2).await;
    holder.do_send(Stop);
    wait_until("revoked", || holding.revoked.lock().expect("revoked").len() == 2).await;
    let _other =
        QueueConsumerActor::new(s.clone(), workers(ConsumerConfig::new("/q"), 2, &acking, Behaviour::Ack)).start();
    wait_until("all five done by the other consumer", || acking.acked.load(Ordering::SeqCst) == 5).await;
    assert!(items_left(&s).await.is_empty());
    s.close().await;
}

#[actix_rt::test]
async fn killing_a_consumers_ensemble_member_loses_nothing() {
    init_tracing();
    let mut ensemble = actix_zookeeper::testkit::ZkEnsemble::start(3).expect("ensemble");
    let root = unique_root("queue-ensemble");
    let cfg = || {
        SessionConfig::new(ensemble.connect_string())
            .with_chroot(root.clone())
            .with_session_timeout(Duration::from_secs(10))
    };
    let (a, _) = connected(cfg()).await;
    let (b, _) = connected(cfg()).await;
    let ledger = Ledger::default();
    let _consumers: Vec<_> = [&a, &b]
        .into_iter()
        .map(|s| {
            let config = workers(ConsumerConfig::new("/q"), 2, &ledger, Behaviour::AckAfter(Duration::from_millis(2)));
            QueueConsumerActor::new(s.clone(), config).start()
        })
        .collect();
    Queue::new(a.clone(), "/q").put_all((0..200u32).map(|n| n.to_be_bytes().to_vec()).collect()).await.expect("put");
    wait_until("some progress", || ledger.acked.load(Ordering::SeqCst) >= 30).await;
    kill_the_serving_member(&mut ensemble, &a).await;
    let deadline = Instant::now() + WAIT;
    while !items_left(&b).await.is_empty() {
        assert!(Instant::now() < deadline, "items left after the member was killed");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = ledger.seen.lock().expect("ledger").clone();
    for n in 0..200u32 {
        assert!(seen.contains_key(n.to_be_bytes().as_slice()), "item {n} lost");
    }
    a.close().await;
    b.close().await;
}

/// The lifetime rule every recipe follows: a consumer whose last address is dropped stops (its
/// own sweep timer and its watches no longer keep it alive), so it takes no more items.
#[actix_rt::test]
async fn a_consumer_whose_last_address_is_dropped_stops_consuming() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("consumer-dropped");
    let s = session_at(&zk.connect_string(), &root).await;
    let queue = Queue::new(s.clone(), "/q");
    let ledger = Ledger::default();
    let consumer =
        QueueConsumerActor::new(s.clone(), workers(ConsumerConfig::new("/q"), 1, &ledger, Behaviour::Ack)).start();
    queue.put("first").await.expect("put");
    wait_until("the first item", || ledger.acked.load(Ordering::SeqCst) == 1).await;
    drop(consumer);
    // The consumer notices at its next sweep (every 500 ms).
    actix_rt::time::sleep(Duration::from_millis(1500)).await;
    queue.put("second").await.expect("put");
    actix_rt::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(ledger.acked.load(Ordering::SeqCst), 1, "a dropped consumer took another item");
    assert_eq!(items_left(&s).await.len(), 1, "the second item waits in the queue");
    s.close().await;
}

/// Regression: a final error was retried forever (the listing, every 200 ms). A consumer
/// that may not read its queue now stops (its workers hear nothing more) and asks nothing more.
#[actix_rt::test]
async fn a_consumer_that_may_not_read_its_queue_stops_asking() {
    init_tracing();
    let server = actix_zookeeper::testkit::ZkServer::start().expect("ZooKeeper");
    let root = unique_root("queue-no-read");
    let s = session_at(&server.connect_string(), &root).await;
    unreadable_dir(&s, "/q").await;
    let ledger = Ledger::default();
    let consumer =
        QueueConsumerActor::new(s.clone(), workers(ConsumerConfig::new("/q"), 1, &ledger, Behaviour::Ack)).start();
    wait_until("the consumer gives up", || !consumer.connected()).await;
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let before = packets_received(&server.connect_string());
    actix_rt::time::sleep(Duration::from_secs(2)).await;
    let sent = packets_received(&server.connect_string()) - before;
    assert!(sent <= 6, "the consumer kept asking after a final error: {sent} packets in 2 s");
    s.close().await;
}

/// Regression: an ack whose reply was lost with its session was settled on the
/// next session: the old claim was gone there (so the ack said `Ok` though it changed nothing),
/// or the claim there was another consumer's (and the re-sent ack deleted it, and the item with
/// it). A settlement now belongs to its claim's session: afterwards it is `Revoked`, and the
/// consumer that holds the item now keeps its claim and acks it itself.
#[actix_rt::test]
async fn an_ack_that_meets_an_expiry_is_revoked_and_spares_the_next_claim() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("queue-ack-expiry");
    let short =
        SessionConfig::new(links.connect_string()).with_chroot(&root).with_session_timeout(Duration::from_secs(2));
    let a = connected(short).await.0;
    let b = session_at(&zk.connect_string(), &root).await;
    let id = Queue::new(b.clone(), "/q").put(b"x".to_vec()).await.expect("put");
    let (at_a, at_b) = (Ledger::default(), Ledger::default());
    let _a = QueueConsumerActor::new(
        a.clone(),
        workers(ConsumerConfig::new("/q").with_consumer_id("a"), 1, &at_a, Behaviour::Hold(1)),
    )
    .start();
    wait_until("a holds the item", || at_a.held.lock().expect("held").len() == 1).await;
    let _b = QueueConsumerActor::new(
        b.clone(),
        workers(ConsumerConfig::new("/q").with_consumer_id("b"), 1, &at_b, Behaviour::Hold(1)),
    )
    .start();

    let info = a.session().await.expect("session").info;
    links.blackhole();
    let delivery = at_a.held.lock().expect("held")[0].clone();
    let ack = actix_rt::spawn(async move { delivery.ack().await });
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    expire_session(&zk.connect_string(), &info).await.expect("expire a's session on the server");
    wait_until("b holds the item", || at_b.held.lock().expect("held").len() == 1).await;
    // Long enough for a's client to give up on the connection (its ack then fails with
    // connection loss, not expiry) before it learns on reconnecting that its session is gone.
    actix_rt::time::sleep(Duration::from_secs(2)).await;
    links.heal();

    let acked = bounded("a's ack is answered", ack).await.expect("ack task");
    assert!(matches!(acked, Err(QueueError::Revoked { .. })), "a's ack after its session ended: {acked:?}");
    assert_eq!(children(&b, "/q/claims").await, vec![id.clone()], "b's claim is intact");
    assert_eq!(items_left(&b).await, vec![id], "the item is still there");
    let delivered_to_b = at_b.held.lock().expect("held")[0].clone();
    assert_eq!(delivered_to_b.ack().await, Ok(()), "b acks the item it holds");
    assert!(items_left(&b).await.is_empty());
    a.close().await;
    b.close().await;
}

/// Regression: a second settlement of one delivery (a stopped worker's nack was sent
/// again every 500 ms while the first was in flight) went out again, and could delete a claim
/// made after the first one applied. Now only one settlement per delivery is ever sent.
#[actix_rt::test]
async fn a_delivery_is_settled_once() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-settle-once");
    let s = session_at(&zk.connect_string(), &root).await;
    Queue::new(s.clone(), "/q").put(b"x".to_vec()).await.expect("put");
    let held = Ledger::default();
    let _consumer =
        QueueConsumerActor::new(s.clone(), workers(ConsumerConfig::new("/q"), 1, &held, Behaviour::Hold(1))).start();
    wait_until("the item is held", || held.held.lock().expect("held").len() == 1).await;
    let delivery = held.held.lock().expect("held")[0].clone();
    let (first, second) = (delivery.ack(), delivery.nack());
    let (first, second) = (first.await, second.await);
    assert_eq!(first, Ok(()));
    assert!(matches!(second, Err(QueueError::AlreadySettling { .. })), "second settlement: {second:?}");
    assert!(items_left(&s).await.is_empty());
    s.close().await;
}

/// Regression: a poison item whose move to the dead-letter path failed was delivered
/// again at once, at the same attempt, forever; here because the path had been deleted
/// (`NoNode`). A missing path is now made again.
#[actix_rt::test]
async fn a_poison_item_reaches_a_deleted_dead_letter_path_once() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-poison");
    let s = session_at(&zk.connect_string(), &root).await;
    let ledger = Ledger::default();
    Queue::new(s.clone(), "/q1").put(b"poison-1".to_vec()).await.expect("put");
    let consumer = |queue: &str| {
        QueueConsumerActor::new(
            s.clone(),
            workers(ConsumerConfig::new(queue), 1, &ledger, Behaviour::Nack)
                .with_max_attempts(1)
                .with_dead_letter("/dlq"),
        )
        .start()
    };
    let (_c1, _c2) = (consumer("/q1"), consumer("/q2"));
    let deadline = Instant::now() + WAIT;
    while children(&s, "/dlq").await.is_empty() {
        assert!(Instant::now() < deadline, "the first item never reached the dead-letter path");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    // Then the dead-letter path is deleted under the running consumers, and a poison item comes.
    s.delete_recursive("/dlq").await.expect("delete the dead-letter path");
    Queue::new(s.clone(), "/q2").put(b"poison-2".to_vec()).await.expect("put");
    let deadline = Instant::now() + WAIT;
    while children(&s, "/dlq").await.is_empty() {
        assert!(Instant::now() < deadline, "the second item never reached the re-made dead-letter path");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let seen = ledger.seen.lock().expect("ledger").clone();
    for item in [b"poison-1".to_vec(), b"poison-2".to_vec()] {
        assert_eq!(seen[&item], vec![1], "delivered once, then dead-lettered");
    }
    assert!(children(&s, "/q1").await.iter().all(|n| !n.starts_with(ITEM_PREFIX)));
    assert!(children(&s, "/q2").await.iter().all(|n| !n.starts_with(ITEM_PREFIX)));
    s.close().await;
}

/// The dead-letter move on a shared path: two queues' poison items both reach one dead-letter
/// path, each once.
#[actix_rt::test]
async fn two_queues_share_a_dead_letter_path() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-shared-dlq");
    let s = session_at(&zk.connect_string(), &root).await;
    let ledger = Ledger::default();
    Queue::new(s.clone(), "/q1").put(b"poison-1".to_vec()).await.expect("put");
    Queue::new(s.clone(), "/q2").put(b"poison-2".to_vec()).await.expect("put");
    let _consumers: Vec<_> = ["/q1", "/q2"]
        .into_iter()
        .map(|queue| {
            QueueConsumerActor::new(
                s.clone(),
                workers(ConsumerConfig::new(queue), 1, &ledger, Behaviour::Nack)
                    .with_max_attempts(1)
                    .with_dead_letter("/dlq"),
            )
            .start()
        })
        .collect();
    let deadline = Instant::now() + WAIT;
    while children(&s, "/dlq").await.len() < 2 {
        assert!(Instant::now() < deadline, "both items should reach the shared dead-letter path");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let seen = ledger.seen.lock().expect("ledger").clone();
    for item in [b"poison-1".to_vec(), b"poison-2".to_vec()] {
        assert_eq!(seen[&item], vec![1], "delivered once, then dead-lettered");
    }
    s.close().await;
}

/// Puts an item nobody may read in the queue at `queue` (made if missing): anyone may delete it
/// (delete is the parent's permission). Its node name.
async fn unreadable_item(s: &SessionHandle, queue: &str) -> String {
    s.ensure_path(queue).await.expect("queue");
    let unreadable = vec![actix_zookeeper::Acl::new_const(
        actix_zookeeper::Permission::WRITE | actix_zookeeper::Permission::DELETE,
        "world",
        "anyone",
    )];
    let create = actix_zookeeper::session::requests::Create::new(
        format!("{queue}/qn-"),
        "secret",
        CreateMode::PersistentSequential,
    );
    let created = s.request(create.with_acl(unreadable)).await.expect("an unreadable item");
    created.path.rsplit('/').next().expect("name").to_owned()
}

/// Regression: at-most-once read and deleted an item back to back; when the read failed
/// (an item the consumer may not read) and the delete did not, the item was gone without a
/// delivery or a log line. Now an item is deleted only after it was read, and an unreadable one
/// is left in the queue and skipped.
#[actix_rt::test]
async fn at_most_once_never_takes_an_item_it_cannot_read() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-amo-unreadable");
    let s = session_at(&zk.connect_string(), &root).await;
    let name = unreadable_item(&s, "/q").await;
    Queue::new(s.clone(), "/q").put(b"readable".to_vec()).await.expect("put");
    let ledger = Ledger::default();
    let _consumer = QueueConsumerActor::new(
        s.clone(),
        workers(ConsumerConfig::new("/q").with_mode(DeliveryMode::AtMostOnce), 1, &ledger, Behaviour::Ack),
    )
    .start();
    wait_until("the readable item is delivered", || ledger.acked.load(Ordering::SeqCst) == 1).await;
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(items_left(&s).await, vec![name], "the unreadable item is still in the queue");
    assert_eq!(ledger.seen.lock().expect("ledger").len(), 1, "only the readable item was delivered");
    s.close().await;
}

/// A consumer's events (`QueueConsumerHandle::events`) tell an item it set aside, once, and
/// its failure for good; a failed consumer has stopped.
#[actix_rt::test]
async fn a_consumers_events_tell_an_item_set_aside_and_its_failure() {
    use actix_zookeeper::queue::{ConsumerEvent, QueueConsumerHandle};
    use futures::StreamExt;
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-events");
    let s = session_at(&zk.connect_string(), &root).await;
    let name = unreadable_item(&s, "/q").await;
    let ledger = Ledger::default();
    let consumer =
        QueueConsumerHandle::start(s.clone(), workers(ConsumerConfig::new("/q"), 1, &ledger, Behaviour::Ack))
            .expect("consumer");
    let mut events = consumer.events();
    match bounded("an item set aside", events.next()).await {
        Some(Ok(ConsumerEvent::ItemSetAside { id, error })) => {
            assert_eq!(id, name);
            assert!(matches!(error, actix_zookeeper::Error::NoAuth { .. }), "{error:?}");
        }
        other => panic!("expected the unreadable item set aside, got {other:?}"),
    }
    // Work goes on, and the item is told once.
    Queue::new(s.clone(), "/q").put(b"readable".to_vec()).await.expect("put");
    wait_until("the readable item is acked", || ledger.acked.load(Ordering::SeqCst) == 1).await;
    assert!(futures::FutureExt::now_or_never(events.next()).is_none(), "nothing more to tell while the consumer works");
    consumer.stop().await;

    unreadable_dir(&s, "/closed").await;
    let failing =
        QueueConsumerHandle::start(s.clone(), workers(ConsumerConfig::new("/closed"), 1, &ledger, Behaviour::Ack))
            .expect("consumer");
    let mut events = failing.events();
    match bounded("the failure", events.next()).await {
        Some(Ok(ConsumerEvent::Failed { error })) => {
            assert!(matches!(error, actix_zookeeper::Error::NoAuth { .. }), "{error:?}")
        }
        other => panic!("expected the consumer's failure, got {other:?}"),
    }
    assert!(bounded("the stream's end", events.next()).await.is_none(), "a failed consumer has stopped");
    s.close().await;
}

/// A dead-letter move that cannot succeed: a poison item whose dead-letter path refuses
/// it (`NoAuth`) is kept claimed and reported, not handed out again and again.
#[actix_rt::test]
async fn a_poison_item_that_cannot_be_moved_is_set_aside() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-poison-no-auth");
    let s = session_at(&zk.connect_string(), &root).await;
    read_only_dir(&s, "/dlq").await;
    let ledger = Ledger::default();
    let id = Queue::new(s.clone(), "/q").put(b"poison".to_vec()).await.expect("put");
    Queue::new(s.clone(), "/q").put(b"fine".to_vec()).await.expect("put");
    let behaviour = Behaviour::Nack;
    let _consumer = QueueConsumerActor::new(
        s.clone(),
        workers(ConsumerConfig::new("/q"), 1, &ledger, behaviour).with_max_attempts(1).with_dead_letter("/dlq"),
    )
    .start();
    wait_until("both items delivered", || ledger.seen.lock().expect("ledger").len() == 2).await;
    actix_rt::time::sleep(Duration::from_secs(1)).await;
    let seen = ledger.seen.lock().expect("ledger").clone();
    assert_eq!(seen[b"poison".as_slice()], vec![1], "delivered once, then set aside");
    assert!(items_left(&s).await.contains(&id), "the poison item is still in the queue");
    assert!(children(&s, "/q/claims").await.contains(&id), "and claimed, so nobody is handed it again");
    s.close().await;
}

/// Regression: settlements batched into one `multi` were measured op by op, never as a
/// whole: four nacks of 300 kB items made a 1.2 MB request, the server closed the connection,
/// the batch was sent again after every reconnect, and the items stayed claimed. And a nack of
/// an item near the size limit could never fit at all. Batches are now measured whole and split,
/// and a nack too large for one request goes in two steps.
#[actix_rt::test]
async fn large_nacks_never_cost_the_connection() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-large-nacks");
    let (s, events) = connected(
        SessionConfig::new(zk.connect_string()).with_chroot(&root).with_session_timeout(Duration::from_secs(4)),
    )
    .await;
    let queue = Queue::new(s.clone(), "/q");
    for i in 0..4u8 {
        queue.put(vec![i; 300_000]).await.expect("a 300 kB item");
    }
    // The largest item a create can carry: its nack (the item's data again, plus the claim's
    // delete, in one multi) cannot fit.
    let create_overhead = 8 + 4 + root.len() + "/q/qn-".len() + 4 + 27 + 4;
    queue
        .put(vec![9u8; actix_zookeeper::session::DEFAULT_MAX_REQUEST_SIZE - create_overhead])
        .await
        .expect("the largest item");
    let ledger = Ledger::default();
    let _consumer = QueueConsumerActor::new(
        s.clone(),
        workers(ConsumerConfig::new("/q"), 5, &ledger, Behaviour::Nack).with_concurrency(5).with_max_attempts(2),
    )
    .start();
    let deadline = Instant::now() + WAIT;
    while !items_left(&s).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "items still queued: {:?}",
            ledger.seen.lock().expect("ledger").values().collect::<Vec<_>>()
        );
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = ledger.seen.lock().expect("ledger").clone();
    assert_eq!(seen.len(), 5);
    for attempts in seen.values() {
        assert_eq!(attempts, &vec![1, 2], "each item nacked once, then dropped after its second attempt");
    }
    assert!(
        !events.snapshot().iter().any(|e| matches!(e, SessionEvent::Suspended { .. })),
        "the connection never dropped: {:?}",
        events.snapshot()
    );
    assert!(children(&s, "/q/claims").await.is_empty(), "no claim left");
    s.close().await;
}

/// A consumer of concurrency 1 alone on a queue delivers in strict FIFO order (consumers with
/// more in flight start at a random place among the oldest items; this one starts at the head).
#[actix_rt::test]
async fn a_sequential_consumer_delivers_in_queue_order() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-fifo");
    let s = session_at(&zk.connect_string(), &root).await;
    let items: Vec<Vec<u8>> = (0..50u8).map(|n| vec![n]).collect();
    Queue::new(s.clone(), "/q").put_all(items.clone()).await.expect("put");
    let order = Arc::new(Mutex::new(Vec::new()));
    struct InOrder(Arc<Mutex<Vec<Vec<u8>>>>);
    impl Actor for InOrder {
        type Context = Context<Self>;
    }
    impl Handler<Delivery> for InOrder {
        type Result = ();
        fn handle(&mut self, delivery: Delivery, ctx: &mut Context<Self>) {
            self.0.lock().expect("order").push(delivery.data.clone());
            ctx.wait(
                async move {
                    delivery.ack().await.expect("ack");
                }
                .into_actor(self),
            );
        }
    }
    impl Handler<Revoked> for InOrder {
        type Result = ();
        fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {}
    }
    let seen = order.clone();
    let _consumer = QueueConsumerActor::new(
        s.clone(),
        ConsumerConfig::new("/q").with_workers(1, move |_| InOrder(seen.clone())).with_concurrency(1),
    )
    .start();
    wait_until("all delivered", || order.lock().expect("order").len() == items.len()).await;
    assert_eq!(*order.lock().expect("order"), items);
    s.close().await;
}

/// `take` and `poll` on a queue that a consumer consumes at the same time (review 3, C): an
/// item a consumer claimed is out with a worker, so a taker must leave it alone. Slow workers
/// keep items claimed while the taker sweeps the queue from its head; every item must be
/// processed exactly once, by a worker or by the taker, and every ack must apply.
#[actix_rt::test]
async fn take_and_poll_leave_the_items_a_consumer_holds_alone() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-take-vs-consumer");
    let s = session_at(&zk.connect_string(), &root).await;
    let t = session_at(&zk.connect_string(), &root).await;
    let ledger = Ledger::default();
    let config = workers(ConsumerConfig::new("/q"), 4, &ledger, Behaviour::AckAfter(Duration::from_millis(30)))
        .with_concurrency(16);
    let consumer = QueueConsumerActor::new(s.clone(), config).start();
    const N: usize = 400;
    Queue::new(s.clone(), "/q").put_all((0..N).map(|n| format!("i{n}").into_bytes()).collect()).await.expect("put");
    let taken = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let taker = {
        let (queue, taken) = (Queue::new(t.clone(), "/q"), taken.clone());
        actix_rt::spawn(async move {
            for round in 0u64.. {
                let got = if round % 2 == 0 {
                    match queue.take(Some(Duration::from_millis(200))).await {
                        Ok(data) => Some(data),
                        Err(QueueError::Empty { .. }) => None,
                        Err(error) => panic!("take: {error}"),
                    }
                } else {
                    queue.poll().await.expect("poll")
                };
                match got {
                    Some(data) => taken.lock().expect("taken").push(data),
                    None if queue.is_empty().await.expect("len") => return,
                    None => actix_rt::time::sleep(Duration::from_millis(5)).await,
                }
            }
        })
    };
    let done = || ledger.acked.load(Ordering::SeqCst) + taken.lock().expect("taken").len() >= N;
    wait_until("every item acked or taken", done).await;
    bounded("the taker sees an empty queue", taker).await.expect("taker");
    // A late duplicate would come after the last ack: give it time to show.
    actix_rt::time::sleep(Duration::from_millis(500)).await;

    let errors = ledger.settle_errors.lock().expect("errors").clone();
    assert!(errors.is_empty(), "an ack failed (its item was taken under its claim): {errors:?}");
    let seen = ledger.seen.lock().expect("ledger").clone();
    let taken = taken.lock().expect("taken").clone();
    assert!(
        !taken.is_empty() && !seen.is_empty(),
        "both sides got items: taken {}, delivered {}",
        taken.len(),
        seen.len()
    );
    let twice: Vec<_> =
        taken.iter().filter(|data| seen.contains_key(*data)).map(|d| String::from_utf8_lossy(d)).collect();
    assert!(twice.is_empty(), "taken and also delivered to a worker: {twice:?}");
    let delivered_twice: Vec<_> = seen.iter().filter(|(_, attempts)| attempts.len() != 1).collect();
    assert!(delivered_twice.is_empty(), "delivered more than once: {delivered_twice:?}");
    let mut all: Vec<Vec<u8>> = taken.iter().cloned().chain(seen.keys().cloned()).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), N, "every item processed");
    assert_eq!(taken.len() + seen.len(), N, "every item processed once");
    assert!(items_left(&s).await.is_empty(), "no item left");
    assert!(children(&s, "/q/claims").await.is_empty(), "no claim left (a taker's claim never outlives its multi)");
    consumer.do_send(Stop);
    s.close().await;
    t.close().await;
}

/// Regression: every `take(timeout)` that timed out left its watch behind (a watcher
/// actor, the client's one-shot watcher, and so the server's watch) until the queue changed. A
/// `take` that gives up now withdraws its watch.
#[actix_rt::test]
async fn a_take_that_times_out_leaves_no_watch_behind() {
    init_tracing();
    let server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root("queue-take-timeout");
    let s = session_at(&server.connect_string(), &root).await;
    let queue = Queue::new(s.clone(), "/q");
    for _ in 0..50 {
        let err = queue.take(Some(Duration::from_millis(20))).await.unwrap_err();
        assert!(matches!(err, QueueError::Empty { .. }), "{err:?}");
    }
    // The server's count of watches (`wchp` shows data watches only; a take's is a children
    // watch). Nothing else watches on this server.
    let watches = || {
        let mntr = actix_zookeeper::testkit::mntr(&server.connect_string()).expect("mntr");
        mntr.lines().find_map(|l| l.strip_prefix("zk_watch_count")?.trim().parse::<u64>().ok()).expect("zk_watch_count")
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while watches() > 0 {
        assert!(Instant::now() < deadline, "the queue is still watched after every take gave up");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    // And a take that waits still gets the next item.
    let waiting = actix_rt::spawn({
        let queue = queue.clone();
        async move { queue.take(Some(WAIT)).await }
    });
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    queue.put(b"next".to_vec()).await.expect("put");
    assert_eq!(waiting.await.expect("take task"), Ok(b"next".to_vec()));
    s.close().await;
}

/// A claim whose create reply is lost, recovered through a follower that has not applied it yet
/// (review 3, D; see `LaggingFollower`): the consumer must find its claim and give it back.
/// Without a `sync` before its look, it misses the claim, which then holds the item for as long
/// as the consumer's session lives: the item is never delivered.
#[actix_rt::test]
async fn a_lost_claim_recovered_through_a_lagging_follower_leaves_no_claim() {
    init_tracing();
    let mut setup = LaggingFollower::start();
    let root = unique_root("lagging-follower-queue");
    let observer = session_at(&setup.ensemble.member_address(setup.leader), &root).await;
    Queue::new(observer.clone(), "/q").put("x").await.expect("put");
    observer.ensure_path("/q/claims").await.expect("claims");
    let s = setup.connect_on_leader(&root).await;
    setup.lag().await;
    let ledger = Ledger::default();
    let consumer =
        QueueConsumerActor::new(s.clone(), workers(ConsumerConfig::new("/q"), 1, &ledger, Behaviour::Ack)).start();
    // Its claim is at the leader now; it commits once the follower acks it, LAG from now.
    actix_rt::time::sleep(Duration::from_millis(100)).await;
    setup.cut_leader();
    wait_until("the item acked", || ledger.acked.load(Ordering::SeqCst) == 1).await;
    assert_eq!(setup.serving(&s).await, Some(setup.follower), "recovered through the lagging follower");
    assert!(ledger.settle_errors.lock().expect("errors").is_empty());
    assert!(items_left(&observer).await.is_empty(), "the item is gone");
    assert!(children(&observer, "/q/claims").await.is_empty(), "no claim left");
    consumer.do_send(Stop);
    s.close().await;
    observer.close().await;
}

/// Idempotent production: a put whose reply is lost (the item applied, the answer
/// never came) is retried by `put_with_id` without queueing the item twice.
#[actix_rt::test]
async fn a_put_with_an_id_whose_reply_is_lost_queues_the_item_once() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-put-with-id");
    let Proxied { proxy, session: s, observer: direct } =
        proxied(&zk.connect_string(), &root, Duration::from_secs(4)).await;
    let queue = Queue::new(s.clone(), "/q");
    queue.put(b"first".to_vec()).await.expect("an ordinary item first");

    // `put_with_id` looks the id up first, then creates. Requests take 500 ms to reach the
    // server: once the lookup is answered (~500 ms) and the create is on its way (it lands at
    // ~1000 ms), replies are held; the create applies, and its reply is lost with the connection.
    proxy.set_latency(Direction::Upstream, Duration::from_millis(500));
    let put = actix_rt::spawn({
        let queue = queue.clone();
        async move { queue.put_with_id("order-17", b"second".to_vec()).await }
    });
    actix_rt::time::sleep(Duration::from_millis(750)).await;
    proxy.set_latency(Direction::Downstream, Duration::from_secs(60));
    let deadline = Instant::now() + WAIT;
    while items_left(&direct).await.len() < 2 {
        assert!(Instant::now() < deadline, "the put never reached the server");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.reset();
    proxy.heal();
    let name = bounded("the put is answered", put).await.expect("put task").expect("put_with_id");
    assert!(name.starts_with("qn-order-17-"), "{name}");
    assert_eq!(items_left(&direct).await.len(), 2, "the item was queued once: {:?}", items_left(&direct).await);
    assert_eq!(queue.find("order-17").await, Ok(Some(name)));
    assert!(matches!(queue.put_with_id("a/b", b"x".to_vec()).await, Err(QueueError::InvalidItemId { .. })));
    s.close().await;
    direct.close().await;
}

/// Sets up a `poll` whose removal reaches the server and whose answer is held by the proxy:
/// returns the poll's task once the removal has applied. Requests take 500 ms to reach the
/// server: the listing is answered at ~500 ms, the read at ~1000 ms, and the removal lands at
/// ~1500 ms, after replies are held (from ~1250 ms).
async fn poll_with_its_answer_held(
    proxy: &actix_zookeeper::testkit::FaultProxy,
    queue: &Queue,
    direct: &SessionHandle,
) -> actix_rt::task::JoinHandle<Result<Option<Vec<u8>>, QueueError>> {
    // The claims directory exists (a consumer made it), so the removal is the poll's fourth step.
    direct.ensure_path(&format!("{}/claims", queue.path())).await.expect("claims directory");
    proxy.set_latency(Direction::Upstream, Duration::from_millis(500));
    let poll = actix_rt::spawn({
        let queue = queue.clone();
        async move { queue.poll().await }
    });
    actix_rt::time::sleep(Duration::from_millis(1250)).await;
    proxy.set_latency(Direction::Downstream, Duration::from_secs(60));
    let deadline = Instant::now() + WAIT;
    while !items_left(direct).await.is_empty() {
        assert!(Instant::now() < deadline, "the removal never reached the server");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    poll
}

/// Row "a `poll`/`take` removal whose answer is lost": the removal applied, its answer went
/// with the connection; the session lives on, so the taker reads its receipt back and gets the
/// item (it was a `ConnectionLoss`, the item gone with nobody holding it).
#[actix_rt::test]
async fn a_take_whose_removal_answer_is_lost_still_gets_the_item() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-take-lost-answer");
    let Proxied { proxy, session: s, observer: direct } =
        proxied(&zk.connect_string(), &root, Duration::from_secs(10)).await;
    let queue = Queue::new(s.clone(), "/q");
    queue.put(b"only".to_vec()).await.expect("put");
    let poll = poll_with_its_answer_held(&proxy, &queue, &direct).await;
    proxy.reset();
    proxy.heal();
    let taken = bounded("the poll is answered", poll).await.expect("poll task");
    assert_eq!(taken, Ok(Some(b"only".to_vec())), "the removal applied: the item is the taker's");
    assert_eq!(s.session().await.expect("session").generation, 1, "the same session throughout");
    wait_until_async("the receipt deleted", || async {
        direct.children("/q/claims").await.map(|c| c.names.is_empty()).unwrap_or(false)
    })
    .await;
    assert_eq!(queue.poll().await, Ok(None), "taken once");
    s.close().await;
    direct.close().await;
}

/// The same row, when the removal never reached the server (dropped with the connection on its
/// way): the item is still queued at the read-back, so the poll tries again and gets it.
#[actix_rt::test]
async fn a_take_whose_removal_was_lost_on_its_way_tries_again() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-take-lost-request");
    let Proxied { proxy, session: s, observer: direct } =
        proxied(&zk.connect_string(), &root, Duration::from_secs(10)).await;
    let queue = Queue::new(s.clone(), "/q");
    queue.put(b"only".to_vec()).await.expect("put");
    direct.ensure_path("/q/claims").await.expect("claims directory");
    // As in `poll_with_its_answer_held`, but the connection goes while the removal is still on
    // its way (it would land at ~1500 ms).
    proxy.set_latency(Direction::Upstream, Duration::from_millis(500));
    let poll = actix_rt::spawn({
        let queue = queue.clone();
        async move { queue.poll().await }
    });
    actix_rt::time::sleep(Duration::from_millis(1250)).await;
    proxy.reset();
    proxy.heal();
    let taken = bounded("the poll is answered", poll).await.expect("poll task");
    assert_eq!(taken, Ok(Some(b"only".to_vec())));
    assert!(items_left(&direct).await.is_empty(), "taken once");
    s.close().await;
    direct.close().await;
}

/// Row "... and its session ends before it is read back": nobody can tell whether this removal
/// or another taker's took the item, so the answer says so and carries the item's data.
#[actix_rt::test]
async fn a_take_whose_answer_and_session_are_lost_returns_the_data_as_unknown() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-take-lost-session");
    let Proxied { proxy, session: s, observer: direct } =
        proxied(&zk.connect_string(), &root, Duration::from_secs(10)).await;
    let queue = Queue::new(s.clone(), "/q");
    queue.put(b"only".to_vec()).await.expect("put");
    let info = s.session().await.expect("session").info;
    let poll = poll_with_its_answer_held(&proxy, &queue, &direct).await;
    expire_session(&zk.connect_string(), &info).await.expect("expired on the server");
    proxy.reset();
    proxy.heal();
    let taken = bounded("the poll is answered", poll).await.expect("poll task");
    match taken {
        Err(QueueError::TakeOutcomeUnknown { id, data, .. }) => {
            assert!(id.starts_with("qn-"), "{id}");
            assert_eq!(data, b"only".to_vec(), "the data is handed over: nothing lost");
        }
        other => panic!("expected TakeOutcomeUnknown, got {other:?}"),
    }
    assert_eq!(queue.poll().await, Ok(None), "the item was removed once");
    s.close().await;
    direct.close().await;
}

// ---- Failure-table rows (docs/recipes/queue.md), one test each ---------------------------------

/// A worker that stops (crashes) on its first delivery without settling it.
struct Crasher {
    seen: Arc<Mutex<Vec<u32>>>,
}

impl Actor for Crasher {
    type Context = Context<Self>;
}

impl Handler<Delivery> for Crasher {
    type Result = ();
    fn handle(&mut self, delivery: Delivery, ctx: &mut Context<Self>) {
        self.seen.lock().expect("seen").push(delivery.attempt);
        ctx.stop();
    }
}

impl Handler<Revoked> for Crasher {
    type Result = ();
    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {}
}

/// Row "worker actor stops without settling": noticed, and the item comes back as a nack would
/// (redelivered with its attempt counted), to a worker that acks it.
#[actix_rt::test]
async fn a_worker_that_stops_without_settling_counts_as_a_nack() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-crashed-worker");
    let s = session_at(&zk.connect_string(), &root).await;
    let crashed = Arc::new(Mutex::new(Vec::new()));
    let crasher = Crasher { seen: crashed.clone() }.start();
    Queue::new(s.clone(), "/q").put(b"x".to_vec()).await.expect("put");
    let ledger = Ledger::default();
    let config = ConsumerConfig::new("/q").with_concurrency(1).with_worker(Worker::new(&crasher));
    let _consumer = QueueConsumerActor::new(s.clone(), config).start();
    wait_until("the crashing worker had it", || crashed.lock().expect("seen").len() == 1).await;
    drop(crasher);
    // A second consumer's worker gets it again, attempt counted.
    let _other =
        QueueConsumerActor::new(s.clone(), workers(ConsumerConfig::new("/q"), 1, &ledger, Behaviour::Ack)).start();
    wait_until("acked by the other", || ledger.acked.load(Ordering::SeqCst) == 1).await;
    assert_eq!(crashed.lock().expect("seen").clone(), vec![1]);
    assert_eq!(ledger.seen.lock().expect("seen").get(b"x".as_slice()).cloned(), Some(vec![2]), "attempt 2");
    assert!(items_left(&s).await.is_empty());
}

/// A worker that stays up and drops its first delivery of an item without settling it, then
/// acks the next.
struct Dropper {
    seen: Arc<Mutex<Vec<u32>>>,
}

impl Actor for Dropper {
    type Context = Context<Self>;
}

impl Handler<Delivery> for Dropper {
    type Result = ();
    fn handle(&mut self, delivery: Delivery, ctx: &mut Context<Self>) {
        self.seen.lock().expect("seen").push(delivery.attempt);
        if delivery.attempt > 1 {
            ctx.spawn(actix::fut::wrap_future(async move {
                delivery.ack().await.expect("ack");
            }));
        }
    }
}

impl Handler<Revoked> for Dropper {
    type Result = ();
    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {}
}

/// Row "worker drops a delivery unsettled" (regression: a worker that stayed up kept the item's
/// claim and the consumer's only slot until the consumer stopped, as only stopped workers were
/// looked for): the item comes back as a nack would, attempt counted, to the same worker.
#[actix_rt::test]
async fn a_delivery_dropped_unsettled_by_a_live_worker_counts_as_a_nack() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-dropped-delivery");
    let s = session_at(&zk.connect_string(), &root).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let dropper = Dropper { seen: seen.clone() }.start();
    Queue::new(s.clone(), "/q").put(b"x".to_vec()).await.expect("put");
    let config = ConsumerConfig::new("/q").with_concurrency(1).with_worker(Worker::new(&dropper));
    let consumer = QueueConsumerHandle::start(s.clone(), config).expect("consumer");
    wait_until("delivered again after the drop, and acked", || seen.lock().expect("seen").len() == 2).await;
    bounded("idle", consumer.idle()).await.expect("idle");
    assert_eq!(seen.lock().expect("seen").clone(), vec![1, 2], "attempt 2 after the unsettled drop");
    assert!(items_left(&s).await.is_empty());
    consumer.stop().await;
    s.close().await;
}

/// Row "consumer's connection drops, session lives": an ack that meets the outage is retried on
/// its claim's session until its outcome is known, and answered `Ok` exactly when it removed
/// the item. Once with its reply lost (it applied), once with the request lost (it did not).
#[actix_rt::test]
async fn an_ack_that_meets_a_connection_loss_is_settled_once_and_answered_ok() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("queue-ack-outage");
    let cut =
        SessionConfig::new(links.connect_string()).with_chroot(&root).with_session_timeout(Duration::from_secs(10));
    let (s, _) = connected(cut).await;
    let observer = session_at(&zk.connect_string(), &root).await;
    let queue = Queue::new(observer.clone(), "/q");
    queue.put_all(vec![b"a".to_vec(), b"b".to_vec()]).await.expect("put");
    let ledger = Ledger::default();
    let _consumer =
        QueueConsumerActor::new(s.clone(), workers(ConsumerConfig::new("/q"), 2, &ledger, Behaviour::Hold(2))).start();
    wait_until("both held", || ledger.held.lock().expect("held").len() == 2).await;
    let held = ledger.held.lock().expect("held").clone();

    for (delivery, reply_lost) in held.into_iter().zip([true, false]) {
        let before = items_left(&observer).await.len();
        let acking = if reply_lost {
            links.proxy(0).set_latency(Direction::Downstream, Duration::from_secs(60));
            let acking = actix_rt::spawn(async move { delivery.ack().await });
            // The fault happened: the item is gone on the server, its reply held by the proxy.
            wait_until_async("the ack applied", || async { items_left(&observer).await.len() == before - 1 }).await;
            acking
        } else {
            links.blackhole();
            let acking = actix_rt::spawn(async move { delivery.ack().await });
            actix_rt::time::sleep(Duration::from_millis(300)).await;
            // The fault happened: the request never reached the server.
            assert_eq!(items_left(&observer).await.len(), before, "the ack must not have applied yet");
            acking
        };
        links.reset();
        links.heal();
        let acked = bounded("the ack is answered", acking).await.expect("task");
        assert_eq!(acked, Ok(()), "reply lost: {reply_lost}");
        assert_eq!(items_left(&observer).await.len(), before - 1, "removed once (reply lost: {reply_lost})");
    }
    assert!(children(&observer, "/q/claims").await.is_empty(), "no claim left behind");
    assert_eq!(s.session().await.expect("session").generation, 1, "the same session throughout");
}

/// Regression: claim creates in flight when the consumer stops (by `Stop` or by its
/// last address going) are given back, whenever their replies come; they stayed for the whole
/// session, and a new consumer on the same session met its own `NodeExists`.
async fn claims_in_flight_at_a_stop_are_given_back(by_drop: bool) {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("queue-stop-in-flight");
    let Proxied { proxy, session: s, observer } = proxied(&zk.connect_string(), &root, Duration::from_secs(10)).await;
    observer.ensure_path("/q/claims").await.expect("claims dir");
    Queue::new(observer.clone(), "/q").put_all((0..20u8).map(|n| vec![n]).collect()).await.expect("put");
    proxy.set_latency(Direction::Downstream, Duration::from_secs(2));
    let (first, second) = (Ledger::default(), Ledger::default());
    let config = workers(ConsumerConfig::new("/q"), 2, &first, Behaviour::Ack).with_concurrency(8);
    let consumer = QueueConsumerActor::new(s.clone(), config).start();
    // The fault happened: all eight creates applied; their replies are held by the proxy.
    wait_until_async("8 claims", || async { children(&observer, "/q/claims").await.len() == 8 }).await;
    if by_drop {
        drop(consumer)
    } else {
        consumer.do_send(Stop)
    } // a dropped one stops within 0.5 s
    // Not healed yet: a heal could release the held replies before the stop is handled.
    wait_until_async("claims are gone", || async { children(&observer, "/q/claims").await.is_empty() }).await;
    assert!(first.seen.lock().expect("seen").is_empty(), "stopped before any claim's reply came");
    proxy.heal();
    // A new consumer on the same session gets every item (at HEAD: NodeExists / held elsewhere).
    let _next =
        QueueConsumerActor::new(s.clone(), workers(ConsumerConfig::new("/q"), 2, &second, Behaviour::Ack)).start();
    wait_until("all 20 acked", || second.acked.load(Ordering::SeqCst) == 20).await;
    assert!(items_left(&observer).await.is_empty());
    assert_eq!(s.session().await.expect("session").generation, 1, "no expiry did the cleanup");
    s.close().await;
    observer.close().await;
}

#[actix_rt::test]
async fn claims_in_flight_when_a_consumer_is_stopped_are_given_back() {
    claims_in_flight_at_a_stop_are_given_back(false).await;
}

#[actix_rt::test]
async fn claims_in_flight_when_a_consumers_last_address_is_dropped_are_given_back() {
    claims_in_flight_at_a_stop_are_given_back(true).await;
}

/// Started while its session is suspended, the consumer hears `Suspended` then
/// `Reconnected`, never `Connected`; it must start at the `Reconnected`.
#[actix_rt::test]
async fn a_consumer_started_while_its_session_is_suspended_consumes_once_reconnected() {
    init_tracing();
    let mut server = ZkServer::start().expect("ZooKeeper");
    let root = unique_root("queue-suspended-start");
    let cfg =
        SessionConfig::new(server.connect_string()).with_chroot(&root).with_session_timeout(Duration::from_secs(10));
    let (s, events) = connected(cfg).await;
    Queue::new(s.clone(), "/q").put_all((0..3u8).map(|n| vec![n]).collect()).await.expect("put");
    server.stop().expect("stop");
    let (i, _) = events.wait_for(0, WAIT, |e| matches!(e, SessionEvent::Suspended { .. })).await;
    let ledger = Ledger::default();
    let _c = QueueConsumerActor::new(s.clone(), workers(ConsumerConfig::new("/q"), 1, &ledger, Behaviour::Ack)).start();
    actix_rt::time::sleep(Duration::from_millis(200)).await; // let it start: restart() blocks this thread
    // The fault happened: its Subscribe went before this request, and the link was down then.
    assert!(!s.session().await.expect("session").connected, "suspended when the consumer subscribed");
    server.restart().expect("restart");
    events.wait_for(i, WAIT, |e| matches!(e, SessionEvent::Reconnected { generation: 1, .. })).await;
    wait_until("all three acked", || ledger.acked.load(Ordering::SeqCst) == 3).await;
    assert_eq!(s.session().await.expect("session").generation, 1, "on the same session");
    assert!(items_left(&s).await.is_empty());
    s.close().await;
}

/// Regression: two consumers on one session. One stopped while its claim create for an
/// item is in flight, an item another consumer of the same session claimed meanwhile (the
/// create then fails with `NodeExists`), must not delete the other's claim. The stop deleted
/// every in-flight claim its session owned; the session alone does not say whose a claim is,
/// its data (the consumer id) does. Every request of the shared session is slowed to 300 ms
/// each way so that the stop lands while the create is out.
#[actix_rt::test]
async fn a_consumer_stopped_mid_claim_leaves_another_consumers_claim_on_its_session() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let root = unique_root("claim-shared-session");
    let s = connected(
        SessionConfig::new(links.connect_string())
            .with_chroot(root.clone())
            .with_session_timeout(Duration::from_secs(10)),
    )
    .await
    .0;
    let observer = session_at(&zk.connect_string(), &root).await;
    let item = Queue::new(observer.clone(), "/q").put(b"x".to_vec()).await.expect("put");
    observer.ensure_path("/q/claims").await.expect("claims dir");
    let claim = format!("/q/claims/{item}");
    links.proxy(0).set_latency(Direction::Both, Duration::from_millis(300));
    let ledger = Ledger::default();
    let consumer =
        QueueConsumerActor::new(s.clone(), workers(ConsumerConfig::new("/q"), 1, &ledger, Behaviour::Hold(1))).start();
    // After the consumer's listing (sent as it starts), before its claim: another consumer of
    // this session claims the item.
    actix_rt::time::sleep(Duration::from_millis(100)).await;
    let other = s.create(&claim, "another-consumer", CreateMode::Ephemeral);
    // The consumer's create goes out when its listing is answered (~600 ms) and is answered at
    // ~1200 ms: stop it in between.
    actix_rt::time::sleep(Duration::from_millis(900)).await;
    consumer.do_send(Stop);
    bounded("the other consumer's claim", other).await.expect("the other claims first");
    links.proxy(0).set_latency(Direction::Both, Duration::ZERO);
    actix_rt::time::sleep(Duration::from_secs(2)).await;
    let held = observer.get_data(&claim).await.expect("the other consumer's claim was deleted by the stop");
    assert_eq!(held.data, b"another-consumer");
    assert!(ledger.seen.lock().expect("seen").is_empty(), "the stopped consumer never had the item");
    s.close().await;
    observer.close().await;
}
