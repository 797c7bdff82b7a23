//! An ensemble that changes (`SessionConfig::with_ensemble_tracking`): while a lock is held and
//! waited for, an election runs and a queue is consumed, the ensemble is replaced member by
//! member through dynamic reconfiguration (`ZkDynamicEnsemble`). The sessions follow it to the
//! new servers with nothing lost and no false loss. The control turns tracking off: the same
//! replacement strands its sessions, and the checks catch it.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::election::{ElectionConfig, ElectionEvent, ElectionHandle};
use actix_zookeeper::lock::{LockConfig, LockEvent, LockHandle};
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::{ConsumerConfig, Delivery, Queue, QueueConsumerActor, Revoked, Worker};
use actix_zookeeper::testkit::{ClientLinks, ZkDynamicEnsemble, sessions_on, unique_root};
use common::*;

const ITEMS_PER_ROUND: usize = 10;

/// Acks every delivery, and keeps what it acked (and which acks failed).
struct Acker {
    acked: Arc<Mutex<Vec<Vec<u8>>>>,
    failed_acks: Arc<Mutex<usize>>,
}

impl Actor for Acker {
    type Context = Context<Self>;
}

impl Handler<Delivery> for Acker {
    type Result = ();

    fn handle(&mut self, delivery: Delivery, ctx: &mut Context<Self>) {
        let (acked, failed) = (self.acked.clone(), self.failed_acks.clone());
        let ack = delivery.ack();
        ctx.spawn(actix::fut::wrap_future(async move {
            match ack.await {
                Ok(()) => acked.lock().expect("acked").push(delivery.data.clone()),
                Err(_) => *failed.lock().expect("failed") += 1,
            }
        }));
    }
}

impl Handler<Revoked> for Acker {
    type Result = ();

    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {}
}

/// Puts a few items named `prefix<i>`, keeping those whose put succeeded; a stranded producer
/// (the control's) gives up at its first failure instead of waiting out every request.
async fn put_some(queue: &Queue, prefix: &str, put: &mut Vec<Vec<u8>>) {
    for i in 0..ITEMS_PER_ROUND / 2 {
        let item = format!("{prefix}{i}").into_bytes();
        match actix_rt::time::timeout(Duration::from_secs(3), queue.put(item.clone())).await {
            Ok(Ok(_)) => put.push(item),
            _ => return,
        }
    }
}

/// What one run saw.
struct Run {
    expired: Vec<String>,
    lock_lost: bool,
    leadership_lost: bool,
    waiter_acquired_early: bool,
    missing_items: usize,
    acked_twice: usize,
    on_new_members: bool,
}

/// Two sessions on the first three members: the first holds a lock, leads an election and
/// consumes a queue; the second waits for the lock, stands in the election and produces.
/// Then three rounds: a new server joins, the oldest member leaves (and stops).
async fn replace_every_member(tracking: bool) -> Run {
    let mut ensemble = ZkDynamicEnsemble::start(3).expect("a reconfigurable ensemble");
    let root = unique_root("reconfig");
    let config = || {
        SessionConfig::new(ensemble.connect_string())
            .with_chroot(root.clone())
            .with_session_timeout(Duration::from_secs(6))
            .with_ensemble_tracking(tracking)
    };
    let (holder, holder_events) = connected(config()).await;
    let (other, other_events) = connected(config()).await;

    let lock = LockHandle::start(holder.clone(), LockConfig::new("/lock")).expect("lock");
    let lock_events = Recorded::<LockEvent>::start();
    lock.subscribe(lock_events.recipient.clone());
    bounded("the holder's acquire", lock.acquire(None)).await.expect("held");
    let waiter = LockHandle::start(other.clone(), LockConfig::new("/lock")).expect("lock");
    let waiting = actix_rt::spawn(waiter.acquire(None));

    let leader = ElectionHandle::start(holder.clone(), ElectionConfig::new("/leader").with_participant_id("holder"))
        .expect("election");
    let leader_events = Recorded::<ElectionEvent>::start();
    leader.subscribe(leader_events.recipient.clone());
    bounded("leadership", leader.leadership()).await.expect("leads");
    let second = ElectionHandle::start(other.clone(), ElectionConfig::new("/leader").with_participant_id("other"))
        .expect("election");
    let second_events = Recorded::<ElectionEvent>::start();
    second.subscribe(second_events.recipient.clone());
    bounded("the second joins", second.join()).await.expect("in line");

    let acked = Arc::new(Mutex::new(Vec::new()));
    let failed_acks = Arc::new(Mutex::new(0));
    let worker = Acker { acked: acked.clone(), failed_acks: failed_acks.clone() }.start();
    let consumer = QueueConsumerActor::new(holder.clone(), ConsumerConfig::new("/q").with_worker(Worker::new(&worker)));
    let _consumer = consumer.start();
    let queue = Queue::new(other.clone(), "/q");

    let ids =
        (holder.session().await.expect("a session").session_id, other.session().await.expect("a session").session_id);
    let mut put = Vec::new();
    for round in 0..3 {
        let joining = ensemble.start_member().expect("a new server");
        ensemble.join(joining).await.expect("joined");
        put_some(&queue, &format!("{round}-a"), &mut put).await;
        ensemble.leave(round).await.expect("left");
        put_some(&queue, &format!("{round}-b"), &mut put).await;
    }
    // Time for whatever was going to fail to fail: past the session timeout's 7/5.
    actix_rt::time::sleep(Duration::from_secs(10)).await;
    let waiter_acquired_early = waiting.is_finished();

    let mut counts = BTreeMap::new();
    for item in acked.lock().expect("acked").iter() {
        *counts.entry(item.clone()).or_insert(0) += 1;
    }
    let missing_items = put.iter().filter(|item| !counts.contains_key(*item)).count();
    let acked_twice = counts.values().filter(|n| **n > 1).count();

    let expired = [&holder_events, &other_events]
        .iter()
        .flat_map(|events| events.snapshot())
        .filter(|e| matches!(e, SessionEvent::Expired { .. } | SessionEvent::Closed))
        .map(|e| format!("{e:?}"))
        .collect();
    let lock_lost = lock_events.snapshot().iter().any(|e| matches!(e, LockEvent::Lost { .. }));
    let leadership_lost = leader_events.snapshot().iter().any(|e| matches!(e, ElectionEvent::LeadershipLost { .. }))
        || second_events.snapshot().iter().any(|e| matches!(e, ElectionEvent::LeadershipAcquired { .. }));
    let new_members: Vec<String> = (3..6).map(|i| ensemble.member_address(i)).collect();
    let served = |id: actix_zookeeper::session::SessionId| {
        new_members.iter().any(|m| sessions_on(m).is_ok_and(|ids| ids.contains(&id.0)))
    };
    let on_new_members = served(ids.0) && served(ids.1);

    if tracking {
        // The chain of watches survived the moves: the release reaches the waiter.
        lock.release().await.expect("released");
        bounded("the waiter's grant", waiting).await.expect("joined").expect("the waiter holds it");
        assert_eq!(*failed_acks.lock().expect("failed"), 0, "an ack failed");
        // Every put landed (the producer gives up at its first failure: a short count is one).
        assert_eq!(put.len(), 3 * ITEMS_PER_ROUND, "a put failed during the moves");
        waiter.release().await.expect("the waiter releases");
    }
    holder.close().await;
    other.close().await;
    if tracking {
        // The closes let go of everything: read on the new members alone.
        let checker = session_at(&new_members.join(","), &root).await;
        for dir in ["/lock", "/leader"] {
            assert!(children(&checker, dir).await.is_empty(), "{dir} is empty after the closes");
        }
        checker.close().await;
    }
    Run { expired, lock_lost, leadership_lost, waiter_acquired_early, missing_items, acked_twice, on_new_members }
}

#[actix_rt::test]
async fn sessions_follow_an_ensemble_replaced_member_by_member_with_nothing_lost() {
    init_tracing();
    let run = replace_every_member(true).await;
    assert!(run.expired.is_empty(), "a session ended: {:?}", run.expired);
    assert!(!run.lock_lost, "the lock holder heard Lost");
    assert!(!run.waiter_acquired_early, "the waiter was granted while the holder held");
    assert!(!run.leadership_lost, "the leader lost its term, or the other took one");
    assert_eq!((run.missing_items, run.acked_twice), (0, 0), "items lost or acked twice");
    assert!(run.on_new_members, "both sessions are served by the new members");
}

#[actix_rt::test]
async fn control_without_tracking_the_same_replacement_strands_the_sessions() {
    init_tracing();
    let run = replace_every_member(false).await;
    assert!(!run.on_new_members, "without tracking, no session can reach the new members");
    assert!(
        !run.expired.is_empty() && run.lock_lost && run.leadership_lost,
        "the checks catch the stranded sessions: expired {:?}, lock lost {}, leadership lost {}",
        run.expired,
        run.lock_lost,
        run.leadership_lost
    );
}

/// Two sessions reach member 0 through proxies. A new member joins (the configuration changes),
/// then every member is paused and both links are cut: the sessions start moving and cannot
/// finish. One keeps its writes (one whose future was dropped, one awaited) and delivers them
/// once the members answer again; the other is closed while it moves, and the close ends it at
/// once.
#[actix_rt::test]
async fn a_session_held_in_a_move_keeps_its_writes_and_a_close_ends_it_at_once() {
    init_tracing();
    let mut ensemble = ZkDynamicEnsemble::start(3).expect("a reconfigurable ensemble");
    let root = unique_root("reconfig-held");
    let links = ClientLinks::to([ensemble.member_address(0), ensemble.member_address(0)]).expect("proxies");
    let config = |i: usize| {
        SessionConfig::new(links.proxy(i).address())
            .with_chroot(root.clone())
            .with_session_timeout(Duration::from_secs(8))
            .with_ensemble_tracking(true)
    };
    let (kept, kept_events) = connected(config(0)).await;
    let (closed, closed_events) = connected(config(1)).await;
    let kept_id = kept.session().await.expect("a session").session_id;
    let joining = ensemble.start_member().expect("a new server");
    ensemble.join(joining).await.expect("joined");
    // Both sessions read the new configuration (a watch event and a read: milliseconds).
    actix_rt::time::sleep(Duration::from_secs(1)).await;

    let members = ensemble.len();
    for i in 0..members {
        ensemble.pause_member(i).expect("paused");
    }
    links.proxy(0).reset();
    links.proxy(1).reset();
    for events in [&kept_events, &closed_events] {
        events.wait_for(0, Duration::from_secs(10), |e| matches!(e, SessionEvent::Suspended { .. })).await;
    }
    drop(kept.create("/dropped-during-the-move", b"d".to_vec(), CreateMode::Persistent));
    let awaited = actix_rt::spawn(kept.create("/awaited-during-the-move", b"a".to_vec(), CreateMode::Persistent));
    let waiting = actix_rt::spawn(closed.get_data("/"));
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert!(!awaited.is_finished() && !waiting.is_finished(), "requests wait for the move");

    let started = std::time::Instant::now();
    bounded("the close of a moving session", closed.close()).await;
    assert!(started.elapsed() < Duration::from_secs(3), "the close took {:?}", started.elapsed());
    let answer = bounded("the waiting read", waiting).await.expect("joined");
    assert!(matches!(answer, Err(Error::Closed)), "{answer:?}");
    closed_events.wait_for(0, Duration::from_secs(5), |e| matches!(e, SessionEvent::Closed)).await;

    for i in 0..members {
        ensemble.resume_member(i).expect("resumed");
    }
    kept_events.wait_for(0, Duration::from_secs(30), |e| matches!(e, SessionEvent::Reconnected { .. })).await;
    // Sent once the move ends. A member that was just resumed may still drop the new connection
    // while it catches up with the leader (seen under CI load): the writes then answer
    // `ConnectionLoss`, outcome unknown, which is the honest answer, not a lost promise.
    match bounded("the awaited create", awaited).await.expect("joined") {
        Ok(_) => {
            // Sent after the dropped one, on the same connection: that one applied first.
            let dropped = bounded("a read", kept.exists("/dropped-during-the-move")).await.expect("read");
            assert!(dropped.is_some(), "a write whose future was dropped applies all the same");
        }
        Err(error) if error.outcome_unknown() => {
            eprintln!("the connection after the move dropped with the writes in flight: {error}");
            // That drop is told as `Suspended`, then `Reconnected`, perhaps still on their way
            // (flaked in CI: the `Reconnected` landed after the proxy check began). Wait until
            // no suspension is open and the events stay quiet for a moment.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            loop {
                let before = kept_events.snapshot();
                actix_rt::time::sleep(Duration::from_millis(500)).await;
                let after = kept_events.snapshot();
                let open = matches!(after.last(), Some(SessionEvent::Suspended { .. }));
                if after.len() == before.len() && !open {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "the session never settled: {after:#?}");
            }
        }
        Err(error) => panic!("the awaited create failed: {error:?}"),
    }
    let seen = kept_events.snapshot();
    assert!(!seen.iter().any(|e| matches!(e, SessionEvent::Expired { .. })), "{seen:#?}");
    assert_eq!(kept.session().await.expect("a session").session_id, kept_id, "the same session");
    // It moved off the proxy: cutting the proxy changes nothing.
    let from = kept_events.snapshot().len();
    links.proxy(0).blackhole();
    bounded("a write after the proxy is cut", kept.create("/after", b"z".to_vec(), CreateMode::Persistent))
        .await
        .expect("the session does not go through the proxy any more");
    let later = kept_events.snapshot()[from..].to_vec();
    assert!(later.is_empty(), "{later:#?}");
    kept.close().await;
}
