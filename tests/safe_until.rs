//! "Safe until": every grant and term carries the moment after which it may no longer be held
//! (`Fence::valid_until`, `is_current`, `while_current`), from the session's lease. Tested with a
//! partition and with a paused process: the holder's `is_current()` turns false before anybody
//! else is granted, where the session's own events come too late (the controls).

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actix_zookeeper::election::{ElectionConfig, ElectionEvent, ElectionHandle, LeaderTerm};
use actix_zookeeper::lock::{LockConfig, LockHandle};
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{ClientLinks, FaultProxy, RoleLine, RoleProcess, TestZooKeeper, ZkServer, unique_root};
use common::*;
use futures::StreamExt;

const ZK_ROLE: &str = env!("CARGO_BIN_EXE_zk-role");
const WAIT: Duration = Duration::from_secs(30);

#[actix_rt::test]
async fn a_grant_is_current_until_it_is_released_and_its_deadline_follows_the_replies() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("safe-until-grant");
    let timeout = Duration::from_secs(4);
    let session = session_with_timeout(&zk.connect_string(), &root, timeout).await;
    let lock = LockHandle::start(session.clone(), LockConfig::new("/lock")).expect("lock");
    let grant = bounded("acquire", lock.acquire(None)).await.expect("acquired");
    let after = Instant::now();
    let until = grant.valid_until().expect("a held grant has a deadline");
    assert!(grant.is_current());
    // Counted from a request sent before the grant was answered, less the default margin.
    assert!(until > after && until <= after + timeout - timeout * 3 / 10, "{until:?}");

    // A read renews nothing (a follower may answer it alone); a write, or a sync, does.
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    session.exists("/lock").await.expect("a read");
    assert_eq!(grant.valid_until(), Some(until), "a read is no renewal");
    session.sync("/lock").await.expect("a sync");
    let renewed = grant.valid_until().expect("still held");
    assert!(renewed >= until + Duration::from_millis(250), "renewed by the sync: {until:?} -> {renewed:?}");
    assert_eq!(session.lease().valid_until(), Some(renewed), "the session's lease is the grant's");

    // Work under way is cut off when the grant ends in another task, not only at its deadline.
    let running = actix_rt::spawn({
        let grant = grant.clone();
        async move { grant.while_current(futures::future::pending::<()>()).await }
    });
    actix_rt::time::sleep(Duration::from_millis(50)).await;
    let copy = grant.clone();
    bounded("release", lock.release()).await.expect("released");
    let cut = bounded("the cut", running).await.expect("task").expect_err("cut off by the release");
    assert!(cut.started, "{cut}");
    assert_eq!(copy.valid_until(), None, "a released grant has no deadline, in every copy");
    assert!(!grant.is_current());
    let refused = grant.while_current(async { panic!("never started") }).await.expect_err("refused");
    assert!(!refused.started, "{refused}");
    assert!(grant.check_current().is_err());
    session.close().await;
}

#[actix_rt::test]
async fn an_idle_sessions_lease_is_kept_fresh_once_it_is_read() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("safe-until-idle");
    let timeout = Duration::from_secs(2);
    let session = session_with_timeout(&zk.connect_string(), &root, timeout).await;
    let first = session.lease().last_heard().expect("a live session was heard from");
    // Nothing is sent for twice the session timeout; the heartbeat renews the lease.
    actix_rt::time::sleep(timeout * 2).await;
    let later = session.lease().last_heard().expect("still live");
    assert!(later > first + timeout, "renewed while idle: {first:?} -> {later:?}");
    assert!(session.lease().remaining().is_some_and(|left| left > Duration::ZERO));
    session.close().await;
    assert_eq!(session.lease().valid_until(), None, "a closed session has no lease");
}

/// When each event of a participant arrived.
#[derive(Clone, Default)]
struct Timeline(Arc<Mutex<Vec<(Instant, ElectionEvent)>>>);

impl Timeline {
    fn follow(election: &ElectionHandle) -> Timeline {
        let timeline = Timeline::default();
        let mut events = election.events();
        let kept = timeline.clone();
        actix_rt::spawn(async move {
            while let Some(event) = events.next().await {
                let event = event.expect("no event missed");
                kept.0.lock().expect("timeline").push((Instant::now(), event));
            }
        });
        timeline
    }

    async fn first(&self, what: &str, pred: impl Fn(&ElectionEvent) -> bool) -> (Instant, ElectionEvent) {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(found) = self.0.lock().expect("timeline").iter().find(|(_, e)| pred(e)).cloned() {
                return found;
            }
            assert!(Instant::now() < deadline, "no {what} within {WAIT:?}");
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Polls `is_current` every millisecond; resolves with the moment it first read false.
async fn turned_false(term: &LeaderTerm) -> Instant {
    loop {
        if !term.is_current() {
            return Instant::now();
        }
        actix_rt::time::sleep(Duration::from_millis(1)).await;
    }
}

#[actix_rt::test]
async fn a_partitioned_leader_stops_being_current_before_anybody_else_leads() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let timeout = Duration::from_secs(3);
    for round in 0..3 {
        let root = unique_root(&format!("safe-until-partition-{round}"));
        let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
        let cut_off = session_with_timeout(&links.connect_string(), &root, timeout).await;
        let other = session_with_timeout(&zk.connect_string(), &root, timeout).await;
        let leader = ElectionHandle::start(cut_off.clone(), ElectionConfig::new("/leader").with_participant_id("a"))
            .expect("election");
        let leader_events = Timeline::follow(&leader);
        let term = bounded("first leadership", leader.leadership()).await.expect("leads");
        let next = ElectionHandle::start(other.clone(), ElectionConfig::new("/leader").with_participant_id("b"))
            .expect("election");
        let next_events = Timeline::follow(&next);
        wait_until_async("b stands in line", || {
            let next = next.clone();
            async move { next.participants().await.is_ok_and(|ids| ids.len() == 2) }
        })
        .await;
        assert!(term.is_current());

        // Work guarded by the term, running when the link is cut: it must be cut off too.
        let guarded = actix_rt::spawn({
            let term = term.clone();
            async move {
                let outcome = term.while_current(futures::future::pending::<()>()).await;
                (Instant::now(), outcome)
            }
        });
        let watching = actix_rt::spawn({
            let term = term.clone();
            async move { turned_false(&term).await }
        });
        links.blackhole();
        let (granted_seen, _) =
            next_events.first("b's leadership", |e| matches!(e, ElectionEvent::LeadershipAcquired { .. })).await;
        let false_at = bounded("is_current turning false", watching).await.expect("watcher");
        let (cut_at, outcome) = bounded("the guarded work's end", guarded).await.expect("guarded work");
        let refused = outcome.expect_err("the guarded work was cut off");
        assert!(refused.started, "{refused}");
        assert!(
            false_at < granted_seen && cut_at < granted_seen,
            "round {round}: the cut-off leader was current until {:?} after the next was granted",
            false_at.saturating_duration_since(granted_seen)
        );
        // The control: the cut-off leader's own news of its loss comes only after the next
        // leader's grant, so believing the events instead of the deadline overlaps two leaders,
        // and the comparison above would catch it.
        let (lost_at, _) = leader_events.first("a's loss", |e| matches!(e, ElectionEvent::LeadershipLost { .. })).await;
        assert!(lost_at > granted_seen, "round {round}: the control: the old leader heard of its loss in time");
        eprintln!(
            "round {round}: not current {:?} before the next grant was seen; the loss was heard {:?} after it",
            granted_seen - false_at,
            lost_at - granted_seen
        );
        links.heal();
        next.stop().await;
        leader.stop().await;
        other.close().await;
        cut_off.close().await;
    }
}

/// The same for a lock: the holder cut off from the server reads `is_current() == false`, and
/// its guarded work is cut off, before the waiter on another session is granted the lock. The
/// control: the holder hears of its loss only after that grant.
#[actix_rt::test]
async fn a_partitioned_lock_holder_stops_being_current_before_the_next_holder_is_granted() {
    use actix_zookeeper::lock::LockEvent;
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let timeout = Duration::from_secs(3);
    for round in 0..2 {
        let root = unique_root(&format!("safe-until-lock-{round}"));
        let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
        let cut_off = session_with_timeout(&links.connect_string(), &root, timeout).await;
        let other = session_with_timeout(&zk.connect_string(), &root, timeout).await;
        let (holder, waiter) = (
            LockHandle::start(cut_off.clone(), LockConfig::new("/l")).expect("lock"),
            LockHandle::start(other.clone(), LockConfig::new("/l")).expect("lock"),
        );
        let mut holder_events = holder.events();
        let grant = bounded("the first grant", holder.acquire(None)).await.expect("held");
        let next = actix_rt::spawn({
            let waiter = waiter.clone();
            async move {
                let granted = waiter.acquire(None).await;
                (Instant::now(), granted)
            }
        });
        wait_until_async("the waiter in line", || async { children(&other, "/l").await.len() == 2 }).await;
        assert!(grant.is_current());
        let guarded = actix_rt::spawn({
            let grant = grant.clone();
            async move {
                let outcome = grant.while_current(futures::future::pending::<()>()).await;
                (Instant::now(), outcome)
            }
        });
        let watching = actix_rt::spawn({
            let grant = grant.clone();
            async move {
                while grant.is_current() {
                    actix_rt::time::sleep(Duration::from_millis(1)).await;
                }
                Instant::now()
            }
        });
        links.blackhole();
        let (granted_at, granted) = bounded("the waiter's grant", next).await.expect("task");
        granted.expect("the waiter holds");
        let false_at = bounded("is_current turning false", watching).await.expect("watcher");
        let (cut_at, outcome) = bounded("the guarded work's end", guarded).await.expect("guarded work");
        assert!(outcome.is_err(), "round {round}: the guarded work was cut off");
        assert!(
            false_at < granted_at && cut_at < granted_at,
            "round {round}: the cut-off holder was current until {:?} after the next grant",
            false_at.saturating_duration_since(granted_at)
        );
        // The control: events alone would have overlapped two holders.
        let lost = bounded("the holder's loss", async {
            while let Some(event) = holder_events.next().await {
                if matches!(event, Ok(LockEvent::Lost { .. })) {
                    return Instant::now();
                }
            }
            panic!("no loss heard")
        })
        .await;
        assert!(lost > granted_at, "round {round}: the control: the holder heard of its loss in time");
        links.heal();
        waiter.release().await.expect("released");
        holder.stop().await;
        waiter.stop().await;
        other.close().await;
        cut_off.close().await;
    }
}

fn wall_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis()
}

fn lines(p: &RoleProcess, kind: &str) -> Vec<RoleLine> {
    p.lines().into_iter().filter(|l| l.kind == kind).collect()
}

/// Every round checks safety; a round in which the woken leader heard of the expiry before it
/// tried to work (seen under CI load: 2 ms after the resume) judges nothing, so up to three
/// rounds are run until one shows a refused write between the resume and the expiry.
#[actix_rt::test]
async fn a_leader_paused_past_its_deadline_starts_no_work_once_another_leads() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let mut windows = Vec::new();
    for round in 0..3 {
        match paused_leader_round(&zk.connect_string(), round).await {
            None => return,
            Some(missed) => windows.push(missed),
        }
    }
    panic!("in no round was a write refused between the resume and the expiry: {windows:#?}");
}

/// One round of the paused-leader scenario; `None` when the fault bit (a refused write between
/// the resume and the expiry), else what was seen instead.
async fn paused_leader_round(connect: &str, round: usize) -> Option<String> {
    let root = unique_root(&format!("safe-until-pause-{round}"));
    let connect = connect.to_owned();
    let holder = RoleProcess::spawn(
        ZK_ROLE,
        [
            "election",
            "--connect",
            &connect,
            "--chroot",
            &root,
            "--id",
            "paused",
            "--session-timeout-ms",
            "2000",
            "--writes",
            "1000000",
            "--interval-ms",
            "20",
            "--guarded",
        ],
    )
    .expect("spawn zk-role");
    let leads = holder.wait_for(|l| l.kind == "leader", WAIT).unwrap_or_else(|e| panic!("{e}"));
    let term: i64 = leads.num("token").expect("a token");
    holder.wait_for(|l| l.kind == "current", WAIT).unwrap_or_else(|e| panic!("{e}"));
    let session = session_with_timeout(&connect, &root, Duration::from_secs(4)).await;
    let next = ElectionHandle::start(session.clone(), ElectionConfig::new("/election").with_participant_id("next"))
        .expect("election");
    wait_until_async("next stands in line", || {
        let next = next.clone();
        async move { next.participants().await.is_ok_and(|ids| ids.len() == 2) }
    })
    .await;

    holder.pause().expect("SIGSTOP");
    let paused_at = wall_ms();
    bounded("next leads", next.leadership()).await.expect("next leads");
    let granted_seen = wall_ms();
    // Paused a moment longer, then let go: what it does on waking is what is judged.
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let resumed_from = holder.line_count();
    let resumed_at = wall_ms();
    holder.resume().expect("SIGCONT");
    holder
        .wait_for_from(resumed_from, |l| l.kind == "session" && l.get("state") == Some("expired"), WAIT)
        .unwrap_or_else(|e| panic!("{e}"));

    let current = lines(&holder, "current");
    assert!(!current.is_empty(), "the holder said when its term was current");
    for line in &current {
        let until: u128 = line.num("until").expect("until");
        assert_eq!(line.num::<i64>("term"), Some(term));
        assert!(until < granted_seen, "its term was promised until after the next leader: {line}");
        assert!(u128::from(line.at_ms) < granted_seen, "work started after the next leader was granted: {line}");
    }
    assert!(
        current.iter().all(|l| u128::from(l.at_ms) <= paused_at + 100),
        "no work was started after the pause: {current:#?}"
    );
    // The control: the holder's session learned of the expiry only after the next leader was
    // granted, so a holder guided by its events would have started work then.
    let expired = lines(&holder, "session").into_iter().find(|l| l.get("state") == Some("expired")).expect("expired");
    assert!(u128::from(expired.at_ms) > granted_seen, "the control: the expiry was heard before the next grant");
    // And the fault bit: between waking and hearing of the expiry, the holder tried to work and
    // its guard refused (a holder that never tried again would pass the checks above unjudged).
    let refused = lines(&holder, "refused");
    let bit = refused.iter().any(|l| {
        let at = u128::from(l.at_ms);
        at >= resumed_at && at <= u128::from(expired.at_ms) && l.num::<i64>("term") == Some(term)
    });
    let missed = format!(
        "round {round}: no write was refused between the resume ({resumed_at}) and the expiry ({}): {refused:?}",
        expired.at_ms
    );
    drop(holder);
    next.stop().await;
    session.close().await;
    (!bit).then_some(missed)
}

/// Regression (issue 39, item 2): a healthy holder idle for longer than its lease read
/// `is_current() == false` on its first read while its node existed (the lease was renewed only
/// after someone had read it). A won grant now wants its lease kept fresh: after an idle
/// stretch of twice the lease, the first read says current, and the deadline is in the future.
#[actix_rt::test]
async fn an_idle_holders_first_read_after_a_long_hold_is_current() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("idle-holder");
    let timeout = Duration::from_secs(2);
    let s = connected(
        actix_zookeeper::SessionConfig::new(zk.connect_string()).with_chroot(&root).with_session_timeout(timeout),
    )
    .await
    .0;
    let lock = LockHandle::start(s.clone(), LockConfig::new("/l")).expect("lock");
    let grant = lock.acquire(Some(WAIT)).await.expect("held");
    // Idle: nothing of ours reads the lease or writes; the lease span is 0.7 of the timeout.
    actix_rt::time::sleep(timeout * 2).await;
    assert!(s.exists(&grant.node).await.expect("exists").is_some(), "the node is there: the holder is healthy");
    assert!(
        grant.is_current(),
        "first read after an idle hold: {:?}",
        grant.valid_until().map(|t| t.checked_duration_since(Instant::now()))
    );
    lock.release().await.expect("released");
    s.close().await;
}

/// Issue 39, item 2: a reconnect to a server restarted with a lower `maxSessionTimeout`
/// renegotiates a shorter timeout, and the server counts the session's life with it. The lease
/// follows: its span shrinks at the reconnect, and when the session is then cut off, the
/// deadline it gave is never later than the moment the server expires the session (seen from
/// another session: its ephemeral node goes). The control: the server does expire it after the
/// lower timeout, far sooner than after the first.
#[actix_rt::test]
async fn a_lease_shrinks_with_a_timeout_renegotiated_on_a_reconnect() {
    init_tracing();
    let mut server = ZkServer::start().expect("ZooKeeper");
    let proxy = FaultProxy::start(&server.address()).expect("proxy");
    let root = unique_root("safe-until-renegotiated");
    let (first, lower) = (Duration::from_secs(20), Duration::from_secs(4));
    let config = SessionConfig::new(proxy.address()).with_chroot(&root).with_session_timeout(first);
    let (session, events) = connected(config).await;
    session.ensure_path("/").await.expect("root");
    session.create("/alive", "", CreateMode::Ephemeral).await.expect("ephemeral");
    assert!(session.lease().remaining().expect("lease") > lower, "the first span is the first timeout's");

    let seen = events.snapshot().len();
    server.restart_with_max_session_timeout(lower).expect("restarted with a lower maximum");
    events.wait_for(seen, WAIT, |e| matches!(e, SessionEvent::Reconnected { .. })).await;
    let snapshot = session.session().await.expect("live");
    assert_eq!(snapshot.timeout, lower, "the renegotiated timeout is told");
    let left = session.lease().remaining().expect("lease");
    assert!(left <= lower, "the span shrank with the timeout: {left:?} left");

    // Cut off: the lease's deadline against the server's own expiry.
    let watcher = session_at(&server.connect_string(), &root).await;
    let cut = Instant::now();
    let until = session.lease().valid_until().expect("lease");
    proxy.blackhole();
    let deadline = cut + WAIT;
    while watcher.exists("/alive").await.expect("exists").is_some() {
        assert!(Instant::now() < deadline, "the server never expired the session");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    let expired = Instant::now();
    assert!(expired - cut < first / 2, "the server expired it after the lower timeout: {:?}", expired - cut);
    assert!(until <= expired, "the lease ran {:?} past the server's expiry", until - expired);
    proxy.heal();
    watcher.close().await;
    session.close().await;
}
