//! W6 and W6-backlog: master–worker throughput and latency, the raw three-writes-per-task
//! floor of the same run, and a master rebuilding over a large backlog.
//! One workload of the recipe benchmark (`main.rs`); the shared harness is `harness.rs`.

use super::harness::*;

pub(crate) const W6_ROOT: &str = "/jobs";
pub(crate) const W6_WARMUP: usize = 100;
pub(crate) const W6_TASKS: usize = 2000;
pub(crate) const W6_WORKERS: usize = 4;
pub(crate) const W6_CONCURRENCY: usize = 8;
/// What every W6 runner answers.
pub(crate) const W6_RESULT: &[u8] = b"ok";
/// Tasks submitted one at a time after the measured batch, each awaited before the next.
pub(crate) const W6_SINGLES: usize = 50;
/// Set-up that takes longer than this, or a result that does not come within it, is a bug.
pub(crate) const W6_TIMEOUT: Duration = Duration::from_secs(120);
/// After the last result: time for the master's and the workers' events to arrive.
pub(crate) const W6_LINGER: Duration = Duration::from_millis(200);
/// `Assigned` events further apart than this count as two bursts (two master passes).
pub(crate) const W6_BURST_GAP: Duration = Duration::from_micros(500);
/// The stderr timeline's bucket.
pub(crate) const W6_BUCKET_MS: usize = 50;

/// Answers every task at once with [`W6_RESULT`].
pub(crate) struct W6Runner;

impl Actor for W6Runner {
    type Context = Context<Self>;
}

impl Handler<TaskAssigned> for W6Runner {
    type Result = TaskOutcome;

    fn handle(&mut self, _: TaskAssigned, _: &mut Context<Self>) -> TaskOutcome {
        W6_RESULT.to_vec().into()
    }
}

/// A step of one task, as the master's and the workers' events tell it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum W6Step {
    /// `MasterEvent::Assigned` (sent once every write of the master's pass has its reply).
    Assigned,
    /// `WorkerEvent::TaskStarted` (the assignment's payload was read; handed to the runner).
    Started,
    /// `WorkerEvent::TaskFinished` (the finishing `multi`'s reply came).
    Finished,
}

/// What the W6 subscriber saw (sent on with its arrival stamp).
pub(crate) enum W6Seen {
    Task(W6Step, TaskId),
    Rebuilt,
    WorkerJoined,
    /// Put back, discarded, failed, left, ended...: none should happen.
    Unexpected(String),
    Other,
}

/// Subscribes to the master and to every worker and forwards their events, stamped on arrival.
pub(crate) struct W6Subscriber {
    tx: tokio::sync::mpsc::UnboundedSender<(Instant, W6Seen)>,
}

impl Actor for W6Subscriber {
    type Context = Context<Self>;
}

impl Handler<MasterEvent> for W6Subscriber {
    type Result = ();

    fn handle(&mut self, event: MasterEvent, _: &mut Context<Self>) {
        let at = Instant::now();
        let seen = match event {
            MasterEvent::Assigned { task_id, .. } => W6Seen::Task(W6Step::Assigned, task_id),
            MasterEvent::Rebuilt { .. } => W6Seen::Rebuilt,
            MasterEvent::WorkerJoined { .. } => W6Seen::WorkerJoined,
            MasterEvent::MasterChanged { .. } | MasterEvent::BecameMaster { .. } => W6Seen::Other,
            other => W6Seen::Unexpected(format!("{other:?}")),
        };
        let _ = self.tx.send((at, seen));
    }
}

impl Handler<WorkerEvent> for W6Subscriber {
    type Result = ();

    fn handle(&mut self, event: WorkerEvent, _: &mut Context<Self>) {
        let at = Instant::now();
        let seen = match event {
            WorkerEvent::TaskStarted { task_id } => W6Seen::Task(W6Step::Started, task_id),
            WorkerEvent::TaskFinished { task_id } => W6Seen::Task(W6Step::Finished, task_id),
            WorkerEvent::Registered { .. } => W6Seen::Other,
            other => W6Seen::Unexpected(format!("{other:?}")),
        };
        let _ = self.tx.send((at, seen));
    }
}

/// One task of a W6 batch: when it was submitted, stored, and its result came.
pub(crate) struct W6Task {
    id: TaskId,
    submitted: Instant,
    stored: Instant,
    done: Instant,
    ok: bool,
}

/// Submits `n` tasks (every submission sent before any reply is awaited) and waits for each
/// result as soon as its submission is stored. Returns when they were started, and the tasks.
pub(crate) async fn w6_batch(client: &TaskClient, tag: &str, n: usize) -> (Instant, Vec<W6Task>) {
    let started = Instant::now();
    let runs: Vec<_> = (0..n)
        .map(|i| {
            let submitted = Instant::now();
            let submit = client.submit(format!("{tag}-{i}"));
            let client = client.clone();
            async move {
                let id = submit.await.expect("submitted");
                let stored = Instant::now();
                let result = client.result(&id, W6_TIMEOUT).await;
                let done = Instant::now();
                let ok = match result {
                    Ok(result) => result == W6_RESULT,
                    Err(error) => {
                        eprintln!("W6: no result for {id}: {error}");
                        false
                    }
                };
                W6Task { id, submitted, stored, done, ok }
            }
        })
        .collect();
    (started, futures::future::join_all(runs).await)
}

/// The raw floor of W6's writes: a bare client makes the protocol's 3 writes per task for `n`
/// tasks (multi(create task, create status); multi(delete task, create assignment);
/// multi(set status at version 0, delete assignment)), one wave after the other, every request
/// of a wave sent before any reply is awaited. Returns the elapsed time of the three waves.
pub(crate) async fn raw_task_writes(client: &zookeeper_client::Client, dir: &str, n: usize) -> Duration {
    use zookeeper_client::{Acls, CreateMode};

    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let (tasks, assign, status) = (format!("{dir}/tasks"), format!("{dir}/assign"), format!("{dir}/status"));
    for parent in [dir, tasks.as_str(), assign.as_str(), status.as_str()] {
        client.create(parent, b"", &persistent).await.expect("raw create a directory");
    }
    let started = Instant::now();
    let submits: Vec<_> = (0..n)
        .map(|i| {
            let mut multi = client.new_multi_writer();
            multi.add_create(&format!("{tasks}/t{i}"), b"payload", &persistent).expect("raw op");
            multi.add_create(&format!("{status}/t{i}"), b"", &persistent).expect("raw op");
            multi.commit()
        })
        .collect();
    for submit in futures::future::join_all(submits).await {
        submit.expect("raw submit multi");
    }
    let assigns: Vec<_> = (0..n)
        .map(|i| {
            let mut multi = client.new_multi_writer();
            multi.add_delete(&format!("{tasks}/t{i}"), None).expect("raw op");
            multi.add_create(&format!("{assign}/t{i}"), b"payload", &persistent).expect("raw op");
            multi.commit()
        })
        .collect();
    for assigned in futures::future::join_all(assigns).await {
        assigned.expect("raw assign multi");
    }
    let finishes: Vec<_> = (0..n)
        .map(|i| {
            let mut multi = client.new_multi_writer();
            multi.add_set_data(&format!("{status}/t{i}"), W6_RESULT, Some(0)).expect("raw op");
            multi.add_delete(&format!("{assign}/t{i}"), None).expect("raw op");
            multi.commit()
        })
        .collect();
    for finished in futures::future::join_all(finishes).await {
        finished.expect("raw finish multi");
    }
    started.elapsed()
}

/// Counters from the server's `mntr` (the first host of `connect`), if it answers and has them
/// all (ZooKeeper 3.6+): requests received, writes and reads processed, response bytes sent.
pub(crate) fn w6_counters(connect: &str) -> Option<[u64; 4]> {
    let host = connect.split(',').next()?.split('/').next()?;
    let mntr = testkit::mntr(host).ok()?;
    let value = |key: &str| {
        mntr.lines().find_map(|line| {
            let mut fields = line.split_whitespace();
            (fields.next()? == key).then_some(())?;
            fields.next()?.parse::<f64>().ok().map(|v| v as u64)
        })
    };
    Some([
        value("zk_packets_received")?,
        value("zk_cnt_updatelatency")?,
        value("zk_cnt_readlatency")?,
        value("zk_response_bytes")?,
    ])
}

/// Waits for the next W6 event; panics after `W6_TIMEOUT` (a bug, not a slow run).
pub(crate) async fn w6_next(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(Instant, W6Seen)>,
    waiting_for: &str,
) -> W6Seen {
    tokio::time::timeout(W6_TIMEOUT, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("W6: no {waiting_for} within {W6_TIMEOUT:?}"))
        .expect("W6: subscriber alive")
        .1
}

/// Per task, the arrival of each [`W6Step`] (indexed by the step).
pub(crate) type W6Steps = std::collections::HashMap<TaskId, [Option<Instant>; 3]>;

/// The events that arrived so far: per task, the arrival of each step; and the unexpected ones.
pub(crate) fn w6_drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<(Instant, W6Seen)>) -> (W6Steps, Vec<String>) {
    let mut steps = W6Steps::new();
    let mut unexpected = Vec::new();
    while let Ok((at, seen)) = rx.try_recv() {
        match seen {
            W6Seen::Task(step, id) => {
                let slot = &mut steps.entry(id).or_default()[step as usize];
                if slot.is_some() {
                    unexpected.push(format!("{step:?} twice"));
                }
                *slot = Some(at);
            }
            W6Seen::Unexpected(event) => unexpected.push(event),
            W6Seen::Rebuilt | W6Seen::WorkerJoined | W6Seen::Other => {}
        }
    }
    (steps, unexpected)
}

/// The longest pause between consecutive instants of `stamps`, in µs.
pub(crate) fn longest_gap(stamps: &mut [Instant]) -> u128 {
    stamps.sort_unstable();
    stamps.windows(2).map(|w| w[1].duration_since(w[0]).as_micros()).max().unwrap_or(0)
}

/// W6-backlog: what a master costs over a large backlog. 2,000 tasks of 10 KB (20 MB of
/// payloads) are queued with no master; then a master starts and rebuilds its view. Reports
/// what the server sent while it rebuilt (`zk_response_bytes`) and how much this process's
/// resident memory grew, next to the payloads' total: a master holds no payload.
pub(crate) async fn w6_backlog(connect: &str) -> String {
    const TASKS: usize = 2000;
    const PAYLOAD: usize = 10 * 1024;
    let root = testkit::unique_root("bench-w6-backlog");
    let session = start_session(connect, &root);
    let client = TaskClient::new(session.clone(), W6_ROOT).expect("client");
    for chunk in (0..TASKS).collect::<Vec<_>>().chunks(200) {
        let submits: Vec<_> = chunk.iter().map(|&i| client.submit(vec![(i % 251) as u8; PAYLOAD])).collect();
        for submitted in futures::future::join_all(submits).await {
            submitted.expect("submitted");
        }
    }
    let host = connect.split(',').next().unwrap_or(connect);
    let response_bytes = || {
        testkit::mntr(host)
            .ok()
            .and_then(|m| m.lines().find_map(|l| l.strip_prefix("zk_response_bytes")?.trim().parse::<u64>().ok()))
            .unwrap_or(0)
    };
    let master_session = start_session(connect, &root);
    master_session.exists("/").await.expect("session up");
    let (rss_before, bytes_before) = (rss_kib(), response_bytes());
    let (tx, rx) = futures::channel::oneshot::channel();
    let waiter = RebuiltWaiter(Some(tx)).start();
    let master = TaskMaster::new(master_session.clone(), TaskMasterConfig::new(W6_ROOT).with_master_id("m"))
        .expect("master")
        .start();
    master.do_send(Subscribe { recipient: waiter.clone().recipient() });
    let pending = tokio::time::timeout(W6_TIMEOUT, rx).await.expect("rebuilt in time").expect("waiter alive");
    let (rss_after, bytes_after) = (rss_kib(), response_bytes());
    let growth = rss_after.zip(rss_before).map_or(-1, |(a, b)| a as i64 - b as i64);
    fail_unless_sound("W6-backlog", &[("tasks missing from (or extra in) the rebuilt view", TASKS.abs_diff(pending))]);
    let sent = bytes_after.saturating_sub(bytes_before);
    eprintln!(
        "W6-backlog: a master rebuilt over {pending} waiting tasks ({} KB of payloads): the server sent {} KB, \
         resident memory grew {growth} KiB",
        TASKS * PAYLOAD / 1024,
        sent / 1024
    );
    drop(master);
    master_session.close().await;
    session.close().await;
    format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W6-backlog\",\"tasks\":{TASKS},\"payload_bytes\":{},\"pending_seen\":{pending},\
         \"rebuild_response_bytes\":{sent},\"rss_growth_kib\":{growth}}}",
        TASKS * PAYLOAD
    )
}

/// Tells once how many tasks a master's rebuilt view holds.
pub(crate) struct RebuiltWaiter(Option<futures::channel::oneshot::Sender<usize>>);

impl Actor for RebuiltWaiter {
    type Context = Context<Self>;
}

impl Handler<MasterEvent> for RebuiltWaiter {
    type Result = ();

    fn handle(&mut self, event: MasterEvent, _: &mut Context<Self>) {
        if let MasterEvent::Rebuilt { pending, .. } = event {
            if let Some(tx) = self.0.take() {
                let _ = tx.send(pending);
            }
        }
    }
}

pub(crate) async fn w6(connect: &str) -> String {
    let root = testkit::unique_root("bench-w6");
    eprintln!("W6: root {root}");
    let raw = raw_baseline(connect, &root).await;
    let n_workers = env_usize("W6_WORKERS", W6_WORKERS).max(1);
    let concurrency = env_usize("W6_CONCURRENCY", W6_CONCURRENCY).max(1);

    let raw_client = zookeeper_client::Client::connect(connect).await.expect("raw client connects");
    raw_task_writes(&raw_client, &format!("{root}/floor-warm-up"), W6_WARMUP).await;
    let floor = raw_task_writes(&raw_client, &format!("{root}/floor"), W6_TASKS).await;
    drop(raw_client);
    let floor_per_s = per_second(W6_TASKS, floor);
    eprintln!(
        "raw zookeeper-client: the 3 writes of {W6_TASKS} tasks in 3 pipelined waves: {:.1} ms ({floor_per_s:.1} \
         tasks/s, {:.1} multis/s)",
        floor.as_secs_f64() * 1e3,
        3.0 * floor_per_s,
    );

    // Every role on its own session, up before anything starts.
    let master_session = start_session(connect, &root);
    let worker_sessions: Vec<SessionHandle> = (0..n_workers).map(|_| start_session(connect, &root)).collect();
    let client_session = start_session(connect, &root);
    for session in std::iter::once(&master_session).chain(&worker_sessions).chain([&client_session]) {
        session.exists("/").await.expect("session up");
    }

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let subscriber = W6Subscriber { tx }.start();
    let master = TaskMaster::new(master_session.clone(), TaskMasterConfig::new(W6_ROOT).with_master_id("m"))
        .expect("a valid master config")
        .start();
    master.do_send(Subscribe { recipient: subscriber.clone().recipient() });
    let workers: Vec<Addr<TaskWorker>> = worker_sessions
        .iter()
        .enumerate()
        .map(|(w, session)| {
            let runner = W6Runner.start().recipient();
            let config = TaskWorkerConfig::new(W6_ROOT, format!("w{w}"), runner).with_concurrency(concurrency);
            let worker = TaskWorker::new(session.clone(), config).expect("a valid worker config");
            let worker = worker.start();
            worker.do_send(Subscribe { recipient: subscriber.clone().recipient() });
            worker
        })
        .collect();
    // The master's view holds every worker before any task is submitted.
    let (mut rebuilt, mut joined) = (false, 0);
    while !rebuilt || joined < n_workers {
        match w6_next(&mut rx, "rebuilt view with every worker").await {
            W6Seen::Rebuilt => rebuilt = true,
            W6Seen::WorkerJoined => joined += 1,
            W6Seen::Unexpected(event) => panic!("W6: unexpected event while starting: {event}"),
            W6Seen::Task(..) | W6Seen::Other => {}
        }
    }
    let client = TaskClient::new(client_session.clone(), W6_ROOT).expect("a valid client");

    eprintln!(
        "W6: {n_workers} workers x concurrency {concurrency}; {W6_WARMUP} warm-up then {W6_TASKS} measured tasks"
    );
    let (_, warm_up) = w6_batch(&client, "warm-up", W6_WARMUP).await;
    assert!(warm_up.iter().all(|t| t.ok), "W6: every warm-up task has its result");
    tokio::time::sleep(W6_LINGER).await;
    let (_, unexpected) = w6_drain(&mut rx);
    assert!(unexpected.is_empty(), "W6: unexpected events during the warm-up: {unexpected:?}");

    let counters_before = w6_counters(connect);
    let (started, tasks) = w6_batch(&client, "task", W6_TASKS).await;
    // Per task: requests received, writes, reads, response bytes (-1: not known).
    let [requests, writes, reads, response_bytes] = match counters_before.zip(w6_counters(connect)) {
        Some((before, after)) => std::array::from_fn(|i| (after[i] - before[i]) as f64 / W6_TASKS as f64),
        None => [-1.0; 4],
    };
    tokio::time::sleep(W6_LINGER).await;
    let (steps, unexpected) = w6_drain(&mut rx);

    let failed = tasks.iter().filter(|t| !t.ok).count();
    // Before any rate is printed; the unexpected events themselves first, to tell what broke.
    for event in unexpected.iter().take(10) {
        eprintln!("W6: unexpected event: {event}");
    }
    if failed > 0 {
        eprintln!("W6: overview after the run: {:?}", client.overview().await);
    }
    fail_unless_sound(
        "W6",
        &[
            ("tasks without their result (lost or timed out)", failed),
            ("unexpected events (duplicates, put back, discarded, failed)", unexpected.len()),
        ],
    );
    let last_stored = tasks.iter().map(|t| t.stored).max().expect("tasks");
    let last_done = tasks.iter().map(|t| t.done).max().expect("tasks");
    let (submit_elapsed, elapsed) = (last_stored - started, last_done - started);
    let tasks_per_s = per_second(W6_TASKS, elapsed);
    let submit_per_s = per_second(W6_TASKS, submit_elapsed);
    let since_submit = |t: &W6Task, at: Instant| at.duration_since(t.submitted).as_micros();
    let mut latencies: Vec<u128> = tasks.iter().map(|t| since_submit(t, t.done)).collect();
    let mut stores: Vec<u128> = tasks.iter().map(|t| since_submit(t, t.stored)).collect();
    // Per step, the time from each task's submit to its event, and from its `TaskStarted` to its
    // result (tasks whose event is missing are left out and counted).
    let mut missing = 0;
    let mut by_step: [Vec<u128>; 3] = Default::default();
    let mut step_stamps: [Vec<Instant>; 3] = Default::default();
    let mut runs = Vec::with_capacity(W6_TASKS);
    for task in &tasks {
        let stamps = steps.get(&task.id).copied().unwrap_or_default();
        for (step, stamp) in stamps.iter().enumerate() {
            match stamp {
                Some(at) => {
                    by_step[step].push(since_submit(task, *at));
                    step_stamps[step].push(*at);
                }
                None => missing += 1,
            }
        }
        if let Some(at) = stamps[W6Step::Started as usize] {
            runs.push(task.done.saturating_duration_since(at).as_micros());
        }
    }
    let p_of = |samples: &mut Vec<u128>, p: f64| if samples.is_empty() { 0 } else { percentile(samples, p) };
    let [assigned_p50, started_p50, finished_p50] = by_step.each_mut().map(|samples| p_of(samples, 50.0));
    let (run_p50, run_p99) = (p_of(&mut runs, 50.0), p_of(&mut runs, 99.0));
    let stored_p50 = percentile(&mut stores, 50.0);
    let (p50, p99) = (percentile(&mut latencies, 50.0), percentile(&mut latencies, 99.0));
    // The drain once every submission is stored: results from then on, per second.
    let drained = tasks.iter().filter(|t| t.done > last_stored).count();
    let drain_per_s = per_second(drained, last_done - last_stored);
    let mut results_at: Vec<Instant> = tasks.iter().map(|t| t.done).collect();
    let result_gap = longest_gap(&mut results_at);
    let assign_gap = longest_gap(&mut step_stamps[W6Step::Assigned as usize]);
    // Bursts of `Assigned` events: a master pass tells its assignments together, once every write
    // of the pass has its reply, so this approximates the passes that assigned something.
    let assigned_at = &step_stamps[W6Step::Assigned as usize];
    let bursts = assigned_at.windows(2).filter(|w| w[1].duration_since(w[0]) > W6_BURST_GAP).count()
        + usize::from(!assigned_at.is_empty());
    let ms = |us: u128| us as f64 / 1e3;
    eprintln!(
        "W6: {tasks_per_s:.1} tasks/s ({:.0} ms; every submission stored after {:.0} ms, {submit_per_s:.1}/s; \
         {drained} results after that at {drain_per_s:.1}/s); per task p50 {:.2} ms, p99 {:.2} ms; from submit, \
         p50: stored {:.2} ms, assigned (event) {:.2} ms, started {:.2} ms, finished {:.2} ms, result {:.2} ms; \
         started -> result p50 {:.2} ms, p99 {:.2} ms; longest pause between results {:.1} ms, between \
         assignments {:.1} ms; assignments came in {bursts} bursts ({:.1} per burst); {failed} failed, {missing} \
         events missing, {} unexpected events; per task the server received {requests:.2} requests, made {writes:.2} \
         writes and {reads:.2} reads and sent {response_bytes:.0} bytes of responses",
        elapsed.as_secs_f64() * 1e3,
        submit_elapsed.as_secs_f64() * 1e3,
        ms(p50),
        ms(p99),
        ms(stored_p50),
        ms(assigned_p50),
        ms(started_p50),
        ms(finished_p50),
        ms(p50),
        ms(run_p50),
        ms(run_p99),
        ms(result_gap),
        ms(assign_gap),
        assigned_at.len() as f64 / bursts.max(1) as f64,
        unexpected.len(),
    );
    let per_bucket = |stamps: &[Instant]| {
        let mut counts = vec![0usize; elapsed.as_millis() as usize / W6_BUCKET_MS + 1];
        for at in stamps {
            let bucket = at.saturating_duration_since(started).as_millis() as usize / W6_BUCKET_MS;
            let last = counts.len() - 1;
            counts[bucket.min(last)] += 1;
        }
        counts.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" ")
    };
    let stored_at: Vec<Instant> = tasks.iter().map(|t| t.stored).collect();
    eprintln!(
        "W6: per {W6_BUCKET_MS} ms from the first submit: stored [{}], assigned [{}], finished [{}], results [{}]",
        per_bucket(&stored_at),
        per_bucket(&step_stamps[W6Step::Assigned as usize]),
        per_bucket(&step_stamps[W6Step::Finished as usize]),
        per_bucket(&results_at),
    );

    // One task at a time: the latency of a task that does not queue.
    let mut singles = Vec::with_capacity(W6_SINGLES);
    for i in 0..W6_SINGLES {
        let (_, single) = w6_batch(&client, &format!("single-{i}"), 1).await;
        assert!(single[0].ok, "W6: the single task has its result");
        singles.push(single[0].done.duration_since(single[0].submitted).as_micros());
    }
    let (single_p50, single_p99) = (percentile(&mut singles, 50.0), percentile(&mut singles, 99.0));
    eprintln!(
        "W6: {W6_SINGLES} tasks one at a time: submit -> result p50 {:.2} ms, p99 {:.2} ms",
        ms(single_p50),
        ms(single_p99)
    );

    for worker in &workers {
        worker.send(Stop).await.expect("worker alive");
    }
    master.send(Stop).await.expect("master alive");
    drop(subscriber);
    for session in std::iter::once(&master_session).chain(&worker_sessions).chain([&client_session]) {
        session.close().await;
    }

    let task_us = 1e6 / tasks_per_s;
    format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W6\",\"tasks\":{W6_TASKS},\"workers\":{n_workers},\
         \"concurrency\":{concurrency},\"tasks_per_s\":{tasks_per_s:.1},\"submit_per_s\":{submit_per_s:.1},\
         \"p50_ms\":{:.2},\"p99_ms\":{:.2},\"elapsed_ms\":{:.1},\"submit_ms\":{:.1},\
         \"drain_per_s\":{drain_per_s:.1},\"failed\":{failed},\"unexpected_events\":{},\"stored_p50_ms\":{:.2},\
         \"assigned_p50_ms\":{:.2},\"started_p50_ms\":{:.2},\"finished_p50_ms\":{:.2},\"run_p50_ms\":{:.2},\
         \"run_p99_ms\":{:.2},\"result_gap_max_ms\":{:.1},\"assign_bursts\":{bursts},\
         \"zk_requests_per_task\":{requests:.2},\"zk_writes_per_task\":{writes:.2},\
         \"zk_reads_per_task\":{reads:.2},\"zk_response_bytes_per_task\":{response_bytes:.0},\
         \"zk_rtt_p50_us\":{},\"zk_create_p50_us\":{},\"zk_floor_ms\":{:.1},\
         \"zk_floor_tasks_per_s\":{floor_per_s:.1},\"ratio_task_to_rtt\":{:.2},\"ratio_p50_to_rtt\":{:.2},\
         \"ratio_run_p50_to_rtt\":{:.2},\"ratio_elapsed_to_floor\":{:.2},\"single_p50_ms\":{:.2},\
         \"single_p99_ms\":{:.2},\"ratio_single_p50_to_rtt\":{:.2}}}",
        ms(p50),
        ms(p99),
        elapsed.as_secs_f64() * 1e3,
        submit_elapsed.as_secs_f64() * 1e3,
        unexpected.len(),
        ms(stored_p50),
        ms(assigned_p50),
        ms(started_p50),
        ms(finished_p50),
        ms(run_p50),
        ms(run_p99),
        ms(result_gap),
        raw.rtt_p50,
        raw.create_p50,
        floor.as_secs_f64() * 1e3,
        task_us / raw.rtt_p50.max(1) as f64,
        p50 as f64 / raw.rtt_p50.max(1) as f64,
        run_p50 as f64 / raw.rtt_p50.max(1) as f64,
        elapsed.as_secs_f64() / floor.as_secs_f64(),
        ms(single_p50),
        ms(single_p99),
        single_p50 as f64 / raw.rtt_p50.max(1) as f64,
    )
}
