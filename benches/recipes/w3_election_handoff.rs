//! W3: the graceful leader hand-off of three election participants, with the raw
//! delete → notification floor of the same run.
//! One workload of the recipe benchmark (`main.rs`); the shared harness is `harness.rs`.

use super::harness::*;

pub(crate) const W3_PARTICIPANTS: usize = 3;
pub(crate) const W3_WARMUP: usize = 5;
pub(crate) const W3_ROUNDS: usize = 50;
/// Pause before each resign, so that the previous hand-off's follow-up traffic (the resigned
/// participant's new node, every participant's re-read of who leads) is over.
pub(crate) const W3_SETTLE: Duration = Duration::from_millis(20);
/// A hand-off that takes longer than this is a bug, not a slow run.
pub(crate) const W3_TIMEOUT: Duration = Duration::from_secs(10);

/// An election event, which participant got it, and when its subscriber got it.
pub(crate) type Observed = (usize, Instant, ElectionEvent);

/// Subscribes to one participant and forwards its events, stamped on arrival.
pub(crate) struct Observer {
    index: usize,
    tx: tokio::sync::mpsc::UnboundedSender<Observed>,
}

impl Actor for Observer {
    type Context = Context<Self>;
}

impl Handler<ElectionEvent> for Observer {
    type Result = ();

    fn handle(&mut self, event: ElectionEvent, _: &mut Context<Self>) {
        let _ = self.tx.send((self.index, Instant::now(), event));
    }
}

/// Who leads, as the events tell it; counts overlapping terms.
pub(crate) struct Terms {
    /// Per participant: the token of its current term (between `Acquired` and `Lost`).
    leading: Vec<Option<FencingToken>>,
    violations: usize,
}

impl Terms {
    fn record(&mut self, index: usize, event: &ElectionEvent) {
        match event {
            ElectionEvent::LeadershipAcquired { token } => {
                if self.leading.iter().enumerate().any(|(i, t)| i != index && t.is_some()) {
                    eprintln!("W3: participant {index} acquired {token} while another one leads");
                    self.violations += 1;
                }
                self.leading[index] = Some(*token);
            }
            ElectionEvent::LeadershipLost { .. } => self.leading[index] = None,
            ElectionEvent::ElectionFailed { error } => panic!("W3: participant {index} failed: {error}"),
            _ => {}
        }
    }
}

/// Waits for a `LeadershipAcquired` with a token above `after`; returns (participant, arrival,
/// token), and the arrival of the `LeadershipLost` of participant `resigned` if it came first.
pub(crate) async fn next_leader(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Observed>,
    terms: &mut Terms,
    after: Option<FencingToken>,
    resigned: Option<usize>,
) -> (usize, Instant, FencingToken, Option<Instant>) {
    let mut lost_at = None;
    loop {
        let (index, at, event) = tokio::time::timeout(W3_TIMEOUT, rx.recv())
            .await
            .expect("W3: no new leader within the timeout")
            .expect("W3: observers alive");
        terms.record(index, &event);
        match event {
            ElectionEvent::LeadershipAcquired { token } if after.is_none_or(|after| token > after) => {
                return (index, at, token, lost_at);
            }
            ElectionEvent::LeadershipLost { .. } if Some(index) == resigned => lost_at = Some(at),
            _ => {}
        }
    }
}

/// The raw floor of a hand-off: client A deletes a node that client B watches with `exists`;
/// the time from just before the delete is sent to B receiving `NodeDeleted`, in µs. Sampled in
/// blocks between the hand-off rounds, so that the floor and the hand-offs see the same server.
///
/// Each sample may wait `settle` first, as every hand-off does (`W3_SETTLE`): on these virtual
/// machines a request sent after 20 ms of quiet takes 3-4 times as long as one sent right behind
/// another (the raw floor measured 0.24-0.32 ms back to back and 0.77-0.96 ms after a 20 ms
/// pause, same runs), so only a floor sampled after the same pause measures what the hand-off
/// adds. The back-to-back floor is kept as well (`warm`).
pub(crate) struct RawHandoff {
    a: zookeeper_client::Client,
    b: zookeeper_client::Client,
    root: String,
    next: usize,
    /// Samples taken after `W3_SETTLE` of quiet, as the hand-offs are.
    samples: Vec<u128>,
    /// Samples taken back to back.
    warm: Vec<u128>,
}

impl RawHandoff {
    pub(crate) async fn connect(connect: &str, root: &str) -> RawHandoff {
        use zookeeper_client::Client;
        let a = Client::connect(connect).await.expect("raw client A connects");
        let b = Client::connect(connect).await.expect("raw client B connects");
        RawHandoff { a, b, root: root.to_owned(), next: 0, samples: Vec::new(), warm: Vec::new() }
    }

    /// `warmup` rounds not kept, then `rounds` kept; each after `settle` of quiet (kept in
    /// `samples`) or back to back (`Duration::ZERO`, kept in `warm`).
    pub(crate) async fn sample(&mut self, warmup: usize, rounds: usize, settle: Duration) {
        use zookeeper_client::{Acls, CreateMode};
        let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
        for i in 0..warmup + rounds {
            let path = format!("{}/handoff-{}", self.root, self.next);
            self.next += 1;
            self.a.create(&path, b"", &ephemeral).await.expect("raw create");
            // On an ensemble B may be served by a member that has not applied the create yet.
            let watcher = loop {
                let (stat, watcher) = self.b.check_and_watch_stat(&path).await.expect("raw exists watch");
                if stat.is_some() {
                    break watcher;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            };
            if !settle.is_zero() {
                tokio::time::sleep(settle).await;
            }
            let t = Instant::now();
            let (deleted, notified) = tokio::join!(self.a.delete(&path, None), async {
                watcher.changed().await;
                micros(t)
            });
            deleted.expect("raw delete");
            if i >= warmup {
                if settle.is_zero() { &mut self.warm } else { &mut self.samples }.push(notified);
            }
        }
    }

    /// The p50 of the samples taken after a pause, as the hand-offs are.
    pub(crate) fn p50(&mut self) -> u128 {
        percentile(&mut self.samples, 50.0)
    }

    /// The p50 of the samples taken back to back.
    pub(crate) fn warm_p50(&mut self) -> u128 {
        percentile(&mut self.warm, 50.0)
    }
}

/// Hand-off rounds between two blocks of the raw floor.
const W3_BLOCK: usize = 10;

/// Where W3's participants and their observers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Both on this thread: election actors started by hand.
    Default,
    /// Each participant's election actor and its observer on the participant's session thread
    /// (`SessionHandle::arbiter`).
    SessionThread,
    /// As `ElectionHandle::start` places them: the participant on its session's thread, the
    /// observer (the user's actor) on this one.
    Handle,
}

pub(crate) async fn w3(connect: &str, placement: Placement) -> String {
    let root = testkit::unique_root("bench-w3");
    let placement_name = match placement {
        Placement::Default => "default",
        Placement::SessionThread => "session-thread",
        Placement::Handle => "handle",
    };
    eprintln!("W3 ({placement_name}): root {root}");
    let raw = raw_baseline(connect, &root).await;
    let mut floor = RawHandoff::connect(connect, &root).await;
    floor.sample(RAW_HANDOFF_WARMUP, 0, Duration::ZERO).await;

    let sessions: Vec<SessionHandle> = (0..W3_PARTICIPANTS).map(|_| start_session(connect, &root)).collect();
    sessions[0].ensure_path("/bench").await.expect("ensure /bench");
    for session in &sessions {
        session.exists("/bench").await.expect("session up");
    }

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // An election holds its subscribers weakly: the observers' addresses are kept until the end.
    // The handles are kept too: dropping the last one would stop its participant.
    let mut handles = Vec::new();
    let (elections, _observers): (Vec<Addr<ElectionActor>>, Vec<Addr<Observer>>) = sessions
        .iter()
        .enumerate()
        .map(|(index, session)| {
            let config = move || ElectionConfig::new("/bench/leader").with_participant_id(format!("p{index}"));
            let (election, observer) = match placement {
                Placement::SessionThread => {
                    let arbiter = session.arbiter().expect("the session runs").clone();
                    let (session, tx) = (session.clone(), tx.clone());
                    (
                        ElectionActor::start_in_arbiter(&arbiter, move |_| ElectionActor::new(session, config())),
                        Observer::start_in_arbiter(&arbiter, move |_| Observer { index, tx }),
                    )
                }
                Placement::Handle => {
                    let handle = ElectionHandle::start(session.clone(), config()).expect("a valid path");
                    let election = handle.addr().clone();
                    handles.push(handle);
                    (election, Observer { index, tx: tx.clone() }.start())
                }
                Placement::Default => {
                    (ElectionActor::new(session.clone(), config()).start(), Observer { index, tx: tx.clone() }.start())
                }
            };
            election.do_send(Subscribe { recipient: observer.clone().recipient() });
            (election, observer)
        })
        .unzip();
    drop(tx);

    let mut terms = Terms { leading: vec![None; W3_PARTICIPANTS], violations: 0 };
    let (mut leader, _, mut token, _) = next_leader(&mut rx, &mut terms, None, None).await;
    eprintln!("W3: p{leader} leads first; {W3_WARMUP} warm-up and {W3_ROUNDS} measured hand-offs");

    let mut handoffs = Vec::with_capacity(W3_ROUNDS);
    let mut resigns = Vec::with_capacity(W3_ROUNDS);
    let mut same_leader = 0;
    for round in 0..W3_WARMUP + W3_ROUNDS {
        if round >= W3_WARMUP && (round - W3_WARMUP) % W3_BLOCK == 0 {
            // Interleaved: the floor's samples are spread over the same minutes as the hand-offs.
            // Both floors, the one after a pause like the hand-offs' and the back-to-back one.
            floor.sample(0, RAW_HANDOFF_OPS * W3_BLOCK / W3_ROUNDS, W3_SETTLE).await;
            floor.sample(0, RAW_HANDOFF_OPS * W3_BLOCK / W3_ROUNDS, Duration::ZERO).await;
        }
        tokio::time::sleep(W3_SETTLE).await;
        while let Ok((index, _, event)) = rx.try_recv() {
            terms.record(index, &event);
        }
        let t0 = Instant::now();
        elections[leader].send(Resign { requeue: true }).await.expect("election actor alive").expect("resigned");
        let (next, t1, next_token, lost_at) = next_leader(&mut rx, &mut terms, Some(token), Some(leader)).await;
        if next == leader {
            eprintln!("W3: p{leader} led again after resigning");
            same_leader += 1;
        }
        if round >= W3_WARMUP {
            handoffs.push(t1.duration_since(t0).as_micros());
            if let Some(lost_at) = lost_at {
                resigns.push(lost_at.duration_since(t0).as_micros());
            }
        }
        (leader, token) = (next, next_token);
    }
    assert_eq!(handoffs.len(), W3_ROUNDS);
    fail_unless_sound("W3", &[("leadership terms that overlapped", terms.violations)]);

    let ms = |us: u128| us as f64 / 1000.0;
    let (p50, p99) = (percentile(&mut handoffs, 50.0), percentile(&mut handoffs, 99.0));
    let raw_handoff_p50 = floor.p50();
    let warm_handoff_p50 = floor.warm_p50();
    eprintln!(
        "W3: hand-off p50 {p50} us, p99 {p99} us, min {} us, max {} us; old leader's LeadershipLost after \
         p50 {} us; raw delete -> notification p50 {raw_handoff_p50} us after a pause, {warm_handoff_p50} us back to back",
        handoffs[0],
        handoffs[handoffs.len() - 1],
        if resigns.is_empty() { 0 } else { percentile(&mut resigns, 50.0) },
    );

    drop(rx);
    drop(elections);
    for session in &sessions {
        session.close().await;
    }

    format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W3\",\"placement\":\"{placement_name}\",\"rounds\":{W3_ROUNDS},\"handoff_p50_ms\":{:.2},\
         \"handoff_p99_ms\":{:.2},\"violations\":{},\"same_leader\":{same_leader},\"zk_rtt_p50_us\":{},\
         \"zk_delete_notify_p50_us\":{raw_handoff_p50},\"zk_delete_notify_samples\":{},\"ratio_to_floor\":{:.2},\
         \"zk_delete_notify_warm_p50_us\":{warm_handoff_p50},\"ratio_to_warm_floor\":{:.2}}}",
        ms(p50),
        ms(p99),
        terms.violations,
        raw.rtt_p50,
        floor.samples.len(),
        p50 as f64 / raw_handoff_p50.max(1) as f64,
        p50 as f64 / warm_handoff_p50.max(1) as f64,
    )
}
