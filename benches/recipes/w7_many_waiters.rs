//! W7: 1,000 waiters on one lock over 10 sessions, each acquiring and releasing once: the rate of
//! grants once everyone is in line, how many watchers each release wakes, requests and directory
//! listings per grant (all from the server's own `mntr` counters), and the resident memory of 1,000 waiting `LockActor`s and of
//! 1,000 idle `ElectionActor`s. One workload of the recipe benchmark (`main.rs`).

use actix_zookeeper::election::Participants;

use super::harness::*;

const W7_SESSIONS: usize = 10;
const W7_WAITERS: usize = 1000;
const W7_TIMEOUT: Duration = Duration::from_secs(300);

/// One of the server's `mntr` counters (0 when missing).
fn counter(connect: &str, key: &str) -> u64 {
    let host = connect.split(',').next().unwrap_or(connect);
    let mntr = testkit::mntr(host).unwrap_or_default();
    mntr.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(char::is_whitespace)?;
            (name == key).then(|| value.trim().parse().ok()).flatten()
        })
        .unwrap_or(0)
}

/// Waits until `dir` has `n` children.
async fn lined_up(session: &SessionHandle, dir: &str, n: usize) {
    let deadline = Instant::now() + W7_TIMEOUT;
    loop {
        let have = session.children(dir).await.map(|c| c.names.len()).unwrap_or(0);
        if have >= n {
            return;
        }
        assert!(Instant::now() < deadline, "W7: only {have} of {n} in line");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) async fn w7(connect: &str) -> Vec<String> {
    let root = testkit::unique_root("bench-w7");
    eprintln!("W7: root {root}");
    let raw = raw_baseline(connect, &root).await;
    let sessions: Vec<SessionHandle> = (0..W7_SESSIONS).map(|_| start_session(connect, &root)).collect();
    sessions[0].ensure_path("/bench/lock").await.expect("ensure /bench/lock");
    for session in &sessions {
        session.exists("/bench").await.expect("session up");
    }

    // Everyone in line behind one holder; the memory of the waiting actors is measured then.
    let rss_before = rss_kib().unwrap_or(0);
    let locks: Vec<Addr<LockActor>> = (0..W7_WAITERS)
        .map(|i| LockActor::new(sessions[i % W7_SESSIONS].clone(), LockConfig::new("/bench/lock")).start())
        .collect();
    // Started, not yet contending: what an actor costs before its contender, watches and the
    // caller's pending request.
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    let rss_idle = rss_kib().unwrap_or(0);
    let first = locks[0].send(Acquire::default()).await.expect("lock actor alive").expect("the first holds");
    let holds = Arc::new(HoldLog::new());
    let done = Arc::new(AtomicUsize::new(0));
    let waiting: Vec<_> = locks[1..]
        .iter()
        .cloned()
        .map(|lock| {
            let (holds, done) = (holds.clone(), done.clone());
            actix::spawn(async move {
                let grant = lock.send(Acquire::default()).await.expect("lock actor alive").expect("acquired");
                let granted = Instant::now();
                holds.record(grant.token.0, granted, Instant::now());
                release(&lock).await;
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    lined_up(&sessions[0], "/bench/lock", W7_WAITERS).await;
    // Settle: every waiter's watch is set once its node is in line and its read is answered.
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let rss_waiting = rss_kib().unwrap_or(0);
    eprintln!("W7: {W7_WAITERS} in line; releasing the first");

    let listings = || {
        counter(connect, "zk_response_packet_get_children_cache_hits")
            + counter(connect, "zk_response_packet_get_children_cache_misses")
    };
    let listed = listings();
    let packets = counter(connect, "zk_packets_received");
    let woken = counter(connect, "zk_sum_node_deleted_watch_count");
    let deletions = counter(connect, "zk_cnt_node_deleted_watch_count");
    let started = Instant::now();
    holds.record(first.token.0, started, started);
    release(&locks[0]).await;
    for handle in waiting {
        handle.await.expect("W7 waiter finished");
    }
    let elapsed = started.elapsed();
    let grants = W7_WAITERS - 1;
    let packets = counter(connect, "zk_packets_received").saturating_sub(packets);
    let listed = listings().saturating_sub(listed);
    let woken = counter(connect, "zk_sum_node_deleted_watch_count").saturating_sub(woken);
    let deletions = counter(connect, "zk_cnt_node_deleted_watch_count").saturating_sub(deletions);
    assert_eq!(done.load(Ordering::SeqCst), grants);
    assert_eq!(holds.len(), W7_WAITERS, "W7: every hold logged");
    fail_unless_sound("W7", &[("overlapping or out-of-order holds", holds.violations())]);
    drop(locks);

    // 1,000 idle election participants (one leads, the others wait).
    let rss_before_election = rss_kib().unwrap_or(0);
    let elections: Vec<Addr<ElectionActor>> = (0..W7_WAITERS)
        .map(|i| ElectionActor::new(sessions[i % W7_SESSIONS].clone(), ElectionConfig::new("/bench/leader")).start())
        .collect();
    let deadline = Instant::now() + W7_TIMEOUT;
    while elections[0].send(Participants).await.expect("actor").map(|p| p.len()).unwrap_or(0) < W7_WAITERS {
        assert!(Instant::now() < deadline, "W7: the election never had everyone in line");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let rss_election = rss_kib().unwrap_or(0);
    drop(elections);
    for session in &sessions {
        session.close().await;
    }

    let per_second = per_second(grants, elapsed);
    vec![
        format!(
            "{{\"lib\":\"{LIB}\",\"workload\":\"W7\",\"sessions\":{W7_SESSIONS},\"waiters\":{W7_WAITERS},\
             \"grants_per_s\":{per_second:.1},\"elapsed_ms\":{:.1},\"violations\":{},\
             \"watchers_woken_per_release\":{:.2},\"deletions_with_watchers\":{deletions},\
             \"requests_per_grant\":{:.2},\"listings_per_grant\":{:.2},\"zk_rtt_p50_us\":{}}}",
            elapsed.as_secs_f64() * 1000.0,
            holds.violations(),
            woken as f64 / grants.max(1) as f64,
            packets as f64 / grants.max(1) as f64,
            listed as f64 / grants.max(1) as f64,
            raw.rtt_p50,
        ),
        format!(
            "{{\"lib\":\"{LIB}\",\"workload\":\"W7-memory\",\"actors\":{W7_WAITERS},\
             \"lock_idle_kib\":{},\"lock_waiting_kib\":{},\"election_idle_kib\":{}}}",
            rss_idle.saturating_sub(rss_before),
            rss_waiting.saturating_sub(rss_before),
            rss_election.saturating_sub(rss_before_election),
        ),
    ]
}
