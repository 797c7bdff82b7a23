//! W4 and W4-backlog: the distributed queue at-least-once and at-most-once, a 100,000-item
//! backlog, and Curator's `DistributedQueue` in the same run.
//! One workload of the recipe benchmark (`main.rs`); the shared harness is `harness.rs`.

use super::harness::*;

pub(crate) const W4_ITEMS: usize = 5000;
/// W4-backlog: items queued before the consumers start (`W4_BACKLOG` overrides; 0 skips it).
pub(crate) const W4_BACKLOG: usize = 100_000;
pub(crate) const W4_ITEM_BYTES: usize = 100;
pub(crate) const W4_BATCH: usize = 100;
pub(crate) const W4_CONSUMERS: usize = 4;
pub(crate) const W4_WORKERS: usize = 4;
/// In flight per consumer: the best at-least-once setting of 8, 16, 32, 64, 128 and 256 tried
/// (see `docs/performance.md`).
pub(crate) const W4_CONCURRENCY: usize = 128;
/// Pause after starting the consumers, so that they have listed the empty queue and wait on
/// its watch when the clock starts.
pub(crate) const W4_SETTLE: Duration = Duration::from_millis(300);
/// After the last item is done: time for a late duplicate to show up.
pub(crate) const W4_LINGER: Duration = Duration::from_millis(500);
/// A run that takes longer than this is a bug, not a slow run.
pub(crate) const W4_TIMEOUT: Duration = Duration::from_secs(120);

/// What the W4 workers saw, shared by all workers of one run.
pub(crate) struct W4Ledger {
    mode: DeliveryMode,
    items: usize,
    /// Deliveries per item index.
    deliveries: Mutex<Vec<u32>>,
    /// Per item index: acked (at-least-once) or delivered (at-most-once).
    done: Mutex<Vec<bool>>,
    done_count: AtomicUsize,
    /// When the last item was done.
    finished: Mutex<Option<Instant>>,
    all_done: tokio::sync::Notify,
    ack_errors: AtomicUsize,
    revoked: AtomicUsize,
    malformed: AtomicUsize,
}

impl W4Ledger {
    fn new(mode: DeliveryMode, items: usize) -> Self {
        W4Ledger {
            mode,
            items,
            deliveries: Mutex::new(vec![0; items]),
            done: Mutex::new(vec![false; items]),
            done_count: AtomicUsize::new(0),
            finished: Mutex::new(None),
            all_done: tokio::sync::Notify::new(),
            ack_errors: AtomicUsize::new(0),
            revoked: AtomicUsize::new(0),
            malformed: AtomicUsize::new(0),
        }
    }

    fn delivered(&self, index: usize) {
        self.deliveries.lock().expect("ledger")[index] += 1;
    }

    fn complete(&self, index: usize) {
        let first = !std::mem::replace(&mut self.done.lock().expect("ledger")[index], true);
        if first && self.done_count.fetch_add(1, Ordering::SeqCst) + 1 == self.items {
            *self.finished.lock().expect("ledger") = Some(Instant::now());
            self.all_done.notify_one();
        }
    }

    /// (duplicates, lost): deliveries beyond the first of an index; indices never delivered.
    fn tally(&self) -> (usize, usize) {
        let deliveries = self.deliveries.lock().expect("ledger");
        let duplicates = deliveries.iter().map(|&n| n.saturating_sub(1) as usize).sum();
        let lost = deliveries.iter().filter(|&&n| n == 0).count();
        (duplicates, lost)
    }
}

/// Item `index` of W4: its index (big-endian `u32`), then filler up to `W4_ITEM_BYTES`.
pub(crate) fn w4_item(index: usize) -> Vec<u8> {
    let mut item = vec![b'.'; W4_ITEM_BYTES];
    item[..4].copy_from_slice(&u32::try_from(index).expect("index fits u32").to_be_bytes());
    item
}

pub(crate) fn w4_index(data: &[u8], items: usize) -> Option<usize> {
    let bytes: [u8; 4] = data.get(..4)?.try_into().ok()?;
    let index = u32::from_be_bytes(bytes) as usize;
    (index < items && data.len() == W4_ITEM_BYTES).then_some(index)
}

/// Records each delivery and acks it at once. In at-most-once mode the item counts as done on
/// delivery (the ack only frees the in-flight slot); in at-least-once mode when the ack succeeds.
pub(crate) struct W4Worker {
    ledger: Arc<W4Ledger>,
}

impl Actor for W4Worker {
    type Context = Context<Self>;
}

impl Handler<Delivery> for W4Worker {
    type Result = ();

    fn handle(&mut self, delivery: Delivery, ctx: &mut Context<Self>) {
        let ledger = self.ledger.clone();
        let Some(index) = w4_index(&delivery.data, ledger.items) else {
            ledger.malformed.fetch_add(1, Ordering::SeqCst);
            ctx.spawn(
                async move {
                    let _ = delivery.ack().await;
                }
                .into_actor(self),
            );
            return;
        };
        ledger.delivered(index);
        if ledger.mode == DeliveryMode::AtMostOnce {
            ledger.complete(index);
        }
        ctx.spawn(
            async move {
                match delivery.ack().await {
                    Ok(()) => {
                        if ledger.mode == DeliveryMode::AtLeastOnce {
                            ledger.complete(index);
                        }
                    }
                    Err(_) => {
                        ledger.ack_errors.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            .into_actor(self),
        );
    }
}

impl Handler<Revoked> for W4Worker {
    type Result = ();

    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {
        self.ledger.revoked.fetch_add(1, Ordering::SeqCst);
    }
}

pub(crate) fn mode_name(mode: DeliveryMode) -> &'static str {
    match mode {
        DeliveryMode::AtLeastOnce => "at_least_once",
        DeliveryMode::AtMostOnce => "at_most_once",
    }
}

pub(crate) async fn w4(connect: &str) -> Vec<String> {
    let root = testkit::unique_root("bench-w4");
    eprintln!("W4: root {root}");
    let raw = raw_baseline(connect, &root).await;
    let mut lines = Vec::new();
    let mut streaming_rate = None;
    for mode in [DeliveryMode::AtLeastOnce, DeliveryMode::AtMostOnce] {
        let (line, rate) = w4_run(connect, &root, &raw, mode, W4_ITEMS, false, None).await;
        if mode == DeliveryMode::AtLeastOnce {
            streaming_rate = Some(rate);
        }
        lines.push(line);
    }
    let backlog = env_usize("W4_BACKLOG", W4_BACKLOG);
    let mut backlog_rate = None;
    if backlog > 0 {
        let (line, rate) = w4_run(connect, &root, &raw, DeliveryMode::AtLeastOnce, backlog, true, streaming_rate).await;
        backlog_rate = Some(rate);
        lines.push(line);
    }
    // The yardstick: Curator's DistributedQueue, same server, same run.
    if std::env::var("W4_CURATOR").map_or(true, |v| v != "0") {
        for mode in ["lock-safe", "plain"] {
            match curator_queue(connect, &format!("{root}/bench/curator-{mode}"), W4_ITEMS, W4_CONSUMERS, mode) {
                Ok((line, rate)) => {
                    eprintln!("W4 Curator ({mode}): {rate:.1} items/s");
                    lines.push(line);
                    let ours = if mode == "lock-safe" { streaming_rate } else { None };
                    if let (Some(ours), Some(backlog)) = (ours, backlog_rate) {
                        lines.push(format!(
                            "{{\"lib\":\"{LIB}\",\"workload\":\"W4-vs-curator\",\"curator_lock_safe_items_per_s\":{rate:.1},\
                             \"w4_at_least_once_items_per_s\":{ours:.1},\"w4_backlog_items_per_s\":{backlog:.1},\
                             \"ratio_w4_to_curator\":{:.2},\"ratio_backlog_to_curator\":{:.2}}}",
                            ours / rate,
                            backlog / rate
                        ));
                    }
                }
                Err(why) => eprintln!("W4 Curator ({mode}) skipped: {why}"),
            }
        }
    }
    lines
}

/// Runs `benches/java/CuratorQueueBench.java` (Curator 5.4's `DistributedQueue`): `items`
/// queued first, then drained by `consumers` Curator clients; returns its JSON line and rate.
pub(crate) fn curator_queue(
    connect: &str,
    path: &str,
    items: usize,
    consumers: usize,
    mode: &str,
) -> Result<(String, f64), String> {
    let classpath = crate::curator::curator_classpath()?;
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/java/CuratorQueueBench.java");
    let classes = std::env::temp_dir().join(format!("actix-zookeeper-curator-queue-bench-{}", std::process::id()));
    std::fs::create_dir_all(&classes).map_err(|e| e.to_string())?;
    let javac = std::process::Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .arg("-cp")
        .arg(&classpath)
        .arg(&source)
        .output()
        .map_err(|e| format!("javac: {e}"))?;
    if !javac.status.success() {
        return Err(format!("javac failed: {}", String::from_utf8_lossy(&javac.stderr)));
    }
    // A connect string without the chroot: the Java side names the full path.
    let host = connect.split('/').next().unwrap_or(connect);
    let run = std::process::Command::new("java")
        .arg("-cp")
        .arg(format!("{}:{classpath}", classes.display()))
        .arg("CuratorQueueBench")
        .args([host, path, &items.to_string(), &consumers.to_string(), mode])
        .output()
        .map_err(|e| format!("java: {e}"))?;
    let _ = std::fs::remove_dir_all(&classes);
    let out = String::from_utf8_lossy(&run.stdout);
    let line = out.lines().find(|l| l.starts_with('{')).ok_or_else(|| {
        format!("no result from the Curator run: {}", String::from_utf8_lossy(&run.stderr).lines().last().unwrap_or(""))
    })?;
    let rate = line
        .split("\"items_per_s\":")
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .and_then(|n| n.parse::<f64>().ok())
        .ok_or_else(|| format!("no rate in {line}"))?;
    Ok((line.to_owned(), rate))
}

/// One W4 run on a fresh queue: `items` items, put while the consumers run, or all `queued`
/// before they start (W4-backlog; timed from the consumers' start). `yardstick` is the
/// streaming at-least-once rate of the same run, for the backlog's ratio.
pub(crate) async fn w4_run(
    connect: &str,
    root: &str,
    raw: &RawBaseline,
    mode: DeliveryMode,
    items: usize,
    queued: bool,
    yardstick: Option<f64>,
) -> (String, f64) {
    let workers = env_usize("W4_WORKERS", W4_WORKERS);
    let concurrency = env_usize("W4_CONCURRENCY", W4_CONCURRENCY);
    let batch = env_usize("W4_BATCH", W4_BATCH).max(1);
    let name = mode_name(mode);
    let workload = if queued { "W4-backlog" } else { "W4" };
    let queue_path = format!("/bench/q-{name}-{items}");
    let producer = start_session(connect, root);
    producer.ensure_path(&format!("{queue_path}/claims")).await.expect("ensure the queue");
    let queue = Queue::new(producer.clone(), queue_path.clone());
    let put_all = move |queue: Queue| async move {
        let started = Instant::now();
        let indices: Vec<usize> = (0..items).collect();
        // A few batches in flight at once: filling a large backlog one batch at a time would
        // take longer than draining it.
        for chunks in indices.chunks(batch * 8) {
            let puts: Vec<_> = chunks
                .chunks(batch)
                .map(|chunk| {
                    let queue = queue.clone();
                    let data: Vec<Vec<u8>> = chunk.iter().map(|&i| w4_item(i)).collect();
                    async move { queue.put_all(data).await.expect("put_all") }
                })
                .collect();
            futures::future::join_all(puts).await;
        }
        started.elapsed()
    };
    if queued {
        eprintln!("{workload} ({name}): queueing {items} items first");
        let took = put_all(queue.clone()).await;
        eprintln!("{workload} ({name}): queued in {:.1} s", took.as_secs_f64());
    }
    let sessions: Vec<SessionHandle> = (0..W4_CONSUMERS).map(|_| start_session(connect, root)).collect();
    for session in &sessions {
        session.exists(&queue_path).await.expect("session up");
    }
    let ledger = Arc::new(W4Ledger::new(mode, items));
    let rss_before = rss_kib();
    let packets_before = packets_received(connect);
    let started = Instant::now();
    let consumers: Vec<Addr<QueueConsumerActor>> = sessions
        .iter()
        .enumerate()
        .map(|(c, session)| {
            let ledger = ledger.clone();
            let config = ConsumerConfig::new(queue_path.clone())
                .with_consumer_id(format!("c{c}"))
                .with_workers(workers, move |_| W4Worker { ledger: ledger.clone() })
                .with_concurrency(concurrency)
                .with_mode(mode);
            QueueConsumerActor::new(session.clone(), config).start()
        })
        .collect();
    let (started, put) = if queued {
        (started, None)
    } else {
        // Let every consumer list the (empty) queue and set its watch before the clock starts.
        tokio::time::sleep(W4_SETTLE).await;
        (Instant::now(), Some(actix::spawn(put_all(queue))))
    };
    eprintln!(
        "{workload} ({name}): {items} items of {W4_ITEM_BYTES} bytes in batches of {batch}, {W4_CONSUMERS} consumers \
         x {workers} workers, concurrency {concurrency}"
    );
    let timeout = W4_TIMEOUT.max(Duration::from_millis(items as u64 * 2));
    let completed = tokio::time::timeout(timeout, ledger.all_done.notified()).await.is_ok();
    let put_elapsed = match put {
        Some(put) => put.await.expect("producer finished"),
        None => Duration::ZERO,
    };
    let elapsed = ledger.finished.lock().expect("ledger").map_or_else(|| started.elapsed(), |t| t - started);
    let packets = packets_before.zip(packets_received(connect)).map(|(before, after)| after - before);
    let rss_after = rss_kib();
    if !completed {
        eprintln!("{workload} ({name}): only {} of {items} items done after {timeout:?}", {
            ledger.done_count.load(Ordering::SeqCst)
        });
    }
    // Late duplicates would show up now.
    tokio::time::sleep(W4_LINGER).await;
    let (duplicates, lost) = ledger.tally();
    let left = producer
        .children(&queue_path)
        .await
        .map(|c| c.names.iter().filter(|n| n.starts_with(ITEM_PREFIX)).count())
        .unwrap_or(usize::MAX);
    let not_done = items.saturating_sub(ledger.done_count.load(Ordering::SeqCst));
    let malformed = ledger.malformed.load(Ordering::SeqCst);
    fail_unless_sound(
        &format!("{workload} ({name})"),
        &[
            ("items not done within the timeout", if completed { 0 } else { not_done.max(1) }),
            ("duplicate deliveries", duplicates),
            ("items never delivered", lost),
            ("items left in the queue (usize::MAX: not listed)", left),
            ("deliveries that were no item of ours", malformed),
        ],
    );
    let items_per_s = per_second(items, elapsed);
    let packets_per_item = packets.map_or(-1.0, |p| p as f64 / items as f64);
    let rss_growth_kib = rss_after.zip(rss_before).map_or(-1, |(after, before)| after as i64 - before as i64);
    eprintln!(
        "{workload} ({name}): {items_per_s:.1} items/s ({:.0} ms; producer done after {:.0} ms); duplicates {duplicates}, \
         lost {lost}, left {left}, ack errors {}, revoked {}, malformed {}; {packets_per_item:.2} requests \
         received by the server per item; resident memory grew {rss_growth_kib} KiB while consuming",
        elapsed.as_secs_f64() * 1e3,
        put_elapsed.as_secs_f64() * 1e3,
        ledger.ack_errors.load(Ordering::SeqCst),
        ledger.revoked.load(Ordering::SeqCst),
        ledger.malformed.load(Ordering::SeqCst),
    );

    drop(consumers);
    for session in &sessions {
        session.close().await;
    }
    producer.close().await;

    let ratio = yardstick.map_or(String::new(), |y| format!(",\"ratio_to_w4\":{:.3}", items_per_s / y));
    let line = format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"{workload}\",\"items\":{items},\"consumers\":{W4_CONSUMERS},\
         \"mode\":\"{name}\",\"items_per_s\":{items_per_s:.1},\"duplicates\":{duplicates},\"lost\":{lost},\
         \"zk_rtt_p50_us\":{},\"workers_per_consumer\":{workers},\"concurrency\":{concurrency},\"batch\":{batch},\
         \"elapsed_ms\":{:.1},\"put_ms\":{:.1},\"left\":{left},\"ack_errors\":{},\"zk_requests_per_item\":{packets_per_item:.2},\
         \"rss_growth_kib\":{rss_growth_kib}{ratio}}}",
        raw.rtt_p50,
        elapsed.as_secs_f64() * 1e3,
        put_elapsed.as_secs_f64() * 1e3,
        ledger.ack_errors.load(Ordering::SeqCst),
    );
    (line, items_per_s)
}
