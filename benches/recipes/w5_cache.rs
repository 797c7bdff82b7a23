//! W5: the tree cache's initial load of 10,001 nodes and its update latency, with a raw
//! pipelined walk and the raw set → notify → read floor of the same run.
//! One workload of the recipe benchmark (`main.rs`); the shared harness is `harness.rs`.

use super::harness::*;

/// W5's tree: directories × leaves per directory (plus the directories and the root).
pub(crate) const W5_DIRS: usize = 100;
pub(crate) const W5_LEAVES: usize = 99;
/// Initial loads, each by a new cache; the median is reported.
pub(crate) const W5_LOADS: usize = 3;
pub(crate) const W5_WARMUP: usize = 100;
pub(crate) const W5_UPDATES: usize = 1000;
pub(crate) const W5_RAW_WARMUP: usize = 50;
pub(crate) const W5_RAW_UPDATES: usize = 300;
/// A load or an update that takes longer than this is a bug, not a slow run.
/// An update slower than this counts as slow (in the stderr summary).
pub(crate) const W5_SLOW_US: u128 = 2000;
pub(crate) const W5_TIMEOUT: Duration = Duration::from_secs(60);

/// W5's tree below the session's chroot.
pub(crate) const W5_TREE: &str = "/tree";

pub(crate) fn w5_dir(d: usize) -> String {
    format!("{W5_TREE}/d{d:02}")
}

pub(crate) fn w5_leaf(d: usize, n: usize) -> String {
    format!("{W5_TREE}/d{d:02}/n{n:02}")
}

/// What the W5 subscriber saw (sent on with its arrival stamp).
pub(crate) enum W5Seen {
    Added,
    Initialized,
    Updated { path: String, data: Vec<u8> },
    Other(String),
}

/// Subscribes to the cache and forwards its events, stamped on arrival.
pub(crate) struct W5Subscriber {
    tx: tokio::sync::mpsc::UnboundedSender<(Instant, W5Seen)>,
}

impl Actor for W5Subscriber {
    type Context = Context<Self>;
}

impl Handler<CacheEvent> for W5Subscriber {
    type Result = ();

    fn handle(&mut self, event: CacheEvent, _: &mut Context<Self>) {
        let at = Instant::now();
        let seen = match event {
            CacheEvent::NodeAdded { .. } => W5Seen::Added,
            CacheEvent::CacheInitialized => W5Seen::Initialized,
            CacheEvent::NodeUpdated { path, data, .. } => W5Seen::Updated { path, data: data.unwrap_or_default() },
            other => W5Seen::Other(format!("{other:?}")),
        };
        let _ = self.tx.send((at, seen));
    }
}

/// The next event from the W5 subscriber; panics after `W5_TIMEOUT` (a bug, not a slow run).
pub(crate) async fn w5_next(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(Instant, W5Seen)>,
    waiting_for: &str,
) -> (Instant, W5Seen) {
    tokio::time::timeout(W5_TIMEOUT, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("W5: no {waiting_for} within {W5_TIMEOUT:?}"))
        .expect("W5: subscriber alive")
}

/// A small xorshift generator: the leaves to update, the same in every run.
pub(crate) struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn leaf(&mut self) -> (usize, usize) {
        (self.below(W5_DIRS), self.below(W5_LEAVES))
    }
}

/// The raw floor of a load: a bare client reads the whole tree at `tree` (full path) level by
/// level, every request of a level sent before any reply is awaited: getData of every node,
/// getChildren of every node with children. Returns (nodes read, elapsed).
pub(crate) async fn raw_walk(client: &zookeeper_client::Client, tree: &str) -> (usize, Duration) {
    let started = Instant::now();
    let mut nodes = 0;
    let mut level = vec![tree.to_owned()];
    while !level.is_empty() {
        let reads: Vec<_> = level.iter().map(|path| client.get_data(path)).collect();
        let mut parents = Vec::new();
        for (path, read) in level.iter().zip(futures::future::join_all(reads).await) {
            let (_, stat) = read.expect("raw getData");
            nodes += 1;
            if stat.num_children > 0 {
                parents.push(path.clone());
            }
        }
        let lists: Vec<_> = parents.iter().map(|path| client.list_children(path)).collect();
        let mut next = Vec::new();
        for (path, names) in parents.iter().zip(futures::future::join_all(lists).await) {
            next.extend(names.expect("raw getChildren").into_iter().map(|name| format!("{path}/{name}")));
        }
        level = next;
    }
    (nodes, started.elapsed())
}

/// The raw floor of a cache update: client A sets a leaf's data; client B, with a recursive
/// persistent watch on the tree, receives `NodeDataChanged` and reads the node. In µs: the
/// median of set → notification, and the median and p99 of set → B's getData reply.
pub(crate) async fn raw_update_floor(connect: &str, tree: &str) -> (u128, u128, u128) {
    use zookeeper_client::{AddWatchMode, Client, EventType};

    let a = Client::connect(connect).await.expect("raw client A connects");
    let b = Client::connect(connect).await.expect("raw client B connects");
    let mut watcher = b.watch(tree, AddWatchMode::PersistentRecursive).await.expect("raw persistent watch");
    let mut random = XorShift(0x5eed_0001);
    let mut notified = Vec::with_capacity(W5_RAW_UPDATES);
    let mut read = Vec::with_capacity(W5_RAW_UPDATES);
    for i in 0..W5_RAW_WARMUP + W5_RAW_UPDATES {
        let (d, n) = random.leaf();
        let path = format!("{tree}/d{d:02}/n{n:02}");
        let data = format!("raw-{i}");
        let t = Instant::now();
        let (set, (at_event, at_read)) = tokio::join!(a.set_data(&path, data.as_bytes(), None), async {
            let event = watcher.changed().await;
            let at_event = micros(t);
            assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeDataChanged, path.as_str()));
            let (got, _) = b.get_data(&event.path).await.expect("raw getData");
            assert_eq!(got, data.as_bytes());
            (at_event, micros(t))
        });
        set.expect("raw setData");
        if i >= W5_RAW_WARMUP {
            notified.push(at_event);
            read.push(at_read);
        }
    }
    (percentile(&mut notified, 50.0), percentile(&mut read, 50.0), percentile(&mut read, 99.0))
}

/// A cache, its subscriber, and the subscriber's events.
pub(crate) type W5Cache =
    (Addr<CacheActor>, Addr<W5Subscriber>, tokio::sync::mpsc::UnboundedReceiver<(Instant, W5Seen)>);

/// Starts a cache of the tree with a new subscriber; returns when it was started, and them.
pub(crate) fn w5_start_cache(session: &SessionHandle) -> (Instant, W5Cache) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let t0 = Instant::now();
    let cache = CacheActor::new(session.clone(), CacheConfig::new(W5_TREE)).expect("a valid cache path").start();
    let subscriber = W5Subscriber { tx }.start();
    cache.do_send(cache::Subscribe { recipient: subscriber.clone().recipient() });
    (t0, (cache, subscriber, rx))
}

pub(crate) async fn w5(connect: &str) -> String {
    let root = testkit::unique_root("bench-w5");
    eprintln!("W5: root {root}");
    let raw = raw_baseline(connect, &root).await;

    // The tree, written by its own session: one multi per directory (the directory and its
    // leaves), all sent before any reply is awaited.
    let writer = start_session(connect, &root);
    writer.ensure_path(W5_TREE).await.expect("ensure the tree's root");
    let batches: Vec<_> = (0..W5_DIRS)
        .map(|d| {
            let dir = Op::Create { path: w5_dir(d), data: Vec::new(), mode: CreateMode::Persistent };
            let leaves = (0..W5_LEAVES).map(move |n| Op::Create {
                path: w5_leaf(d, n),
                data: format!("v{d}-{n}").into_bytes(),
                mode: CreateMode::Persistent,
            });
            writer.multi(std::iter::once(dir).chain(leaves).collect())
        })
        .collect();
    let created = Instant::now();
    for batch in batches {
        batch.await.expect("create a directory and its leaves");
    }
    let total = 1 + W5_DIRS * (1 + W5_LEAVES);
    eprintln!("W5: created {total} nodes in {:.0} ms", created.elapsed().as_secs_f64() * 1e3);

    let raw_client = zookeeper_client::Client::connect(connect).await.expect("raw client connects");
    let full_tree = format!("{root}{W5_TREE}");
    let (walked, _) = raw_walk(&raw_client, &full_tree).await;
    assert_eq!(walked, total, "the raw walk reads every node");
    let mut walks: Vec<u128> = Vec::new();
    for _ in 0..W5_LOADS {
        walks.push(raw_walk(&raw_client, &full_tree).await.1.as_micros());
    }
    let raw_walk_us = percentile(&mut walks, 50.0);
    drop(raw_client);
    let (raw_notify_p50, raw_notify_get_p50, raw_notify_get_p99) = raw_update_floor(connect, &full_tree).await;
    eprintln!(
        "raw zookeeper-client: pipelined walk of {total} nodes p50 {:.1} ms (after one warm-up walk); set -> \
         NodeDataChanged at another client p50 {raw_notify_p50} us, -> its getData reply p50 {raw_notify_get_p50} \
         us, p99 {raw_notify_get_p99} us",
        raw_walk_us as f64 / 1e3
    );

    // The cache's own session, up before any clock starts.
    let reader = start_session(connect, &root);
    reader.exists(W5_TREE).await.expect("session up");

    let mut loads = Vec::with_capacity(W5_LOADS);
    let mut live = None;
    for load in 0..W5_LOADS {
        let (t0, (cache, subscriber, mut rx)) = w5_start_cache(&reader);
        let mut added = 0;
        let initialized = loop {
            match w5_next(&mut rx, "CacheInitialized").await {
                (_, W5Seen::Added) => added += 1,
                (at, W5Seen::Initialized) => break at,
                (_, W5Seen::Updated { path, .. }) => panic!("W5: NodeUpdated for {path} during the load"),
                (_, W5Seen::Other(event)) => panic!("W5: unexpected event during the load: {event}"),
            }
        };
        let load_us = initialized.duration_since(t0).as_micros();
        assert_eq!(added, total, "W5: one NodeAdded per node before CacheInitialized");
        eprintln!("W5: load {} of {W5_LOADS}: {added} nodes in {:.1} ms", load + 1, load_us as f64 / 1e3);
        loads.push(load_us);
        if load + 1 < W5_LOADS {
            cache.send(cache::Stop).await.expect("cache alive");
            drop(subscriber);
        } else {
            live = Some((cache, subscriber, rx));
        }
    }
    let (load_min, load_max) = (*loads.iter().min().expect("loads"), *loads.iter().max().expect("loads"));
    let load_us = percentile(&mut loads, 50.0);
    let (cache, _subscriber, mut rx) = live.expect("the last cache");

    eprintln!("W5: {W5_WARMUP} warm-up and {W5_UPDATES} measured updates of random leaves");
    let mut random = XorShift(0x5eed_0005);
    let mut updates = Vec::with_capacity(W5_UPDATES);
    // The writer's own set_data round trip, per update: a tail shared with it is not the cache's.
    let mut sets = Vec::with_capacity(W5_UPDATES);
    let mut expected = std::collections::BTreeMap::new();
    let mut stray = 0;
    for i in 0..W5_WARMUP + W5_UPDATES {
        let (d, n) = random.leaf();
        let path = w5_leaf(d, n);
        let data = format!("u{i}").into_bytes();
        let t0 = Instant::now();
        let set = writer.set_data(&path, data.clone(), None);
        // Stamped when the writer's reply arrives (this thread also runs the subscriber).
        let set = actix::spawn(async move { (set.await, Instant::now()) });
        let arrived = loop {
            match w5_next(&mut rx, &format!("NodeUpdated for {path}")).await {
                (at, W5Seen::Updated { path: p, data: got }) if p == path && got == data => break at,
                (_, seen) => {
                    stray += 1;
                    let what = match seen {
                        W5Seen::Updated { path, .. } => format!("NodeUpdated for {path}"),
                        W5Seen::Other(event) => event,
                        W5Seen::Added => "NodeAdded".to_owned(),
                        W5Seen::Initialized => "CacheInitialized".to_owned(),
                    };
                    eprintln!("W5: unexpected event while waiting for {path}: {what}");
                }
            }
        };
        let (set_result, set_at) = set.await.expect("set_data task");
        set_result.expect("set_data");
        if i >= W5_WARMUP {
            updates.push(arrived.duration_since(t0).as_micros());
            sets.push(set_at.duration_since(t0).as_micros());
        }
        expected.insert(path, data);
    }
    // The cache holds what was written.
    let held = cache.send(cache::Snapshot).await.expect("cache alive");
    assert_eq!(held.len(), total, "W5: the cache holds every node");
    let wrong = expected.iter().filter(|(p, d)| held.get(*p).and_then(|n| n.data.as_ref()) != Some(*d)).count();
    assert_eq!(wrong, 0, "W5: the cache holds the last data of every updated leaf");

    // An event other than the one update awaited is a duplicate or out of order.
    fail_unless_sound("W5", &[("unexpected cache events", stray)]);
    let slow = |us: &u128| *us > W5_SLOW_US;
    let slow_updates = updates.iter().filter(|us| slow(us)).count();
    let slow_both = updates.iter().zip(&sets).filter(|(u, s)| slow(u) && slow(s)).count();
    let (p50, p99) = (percentile(&mut updates, 50.0), percentile(&mut updates, 99.0));
    let (set_p50, set_p99) = (percentile(&mut sets, 50.0), percentile(&mut sets, 99.0));
    eprintln!(
        "W5: load p50 {:.1} ms (min {:.1}, max {:.1}); update p50 {p50} us, p99 {p99} us, min {} us, max {} us; \
         {stray} unexpected events; the writer's set_data reply p50 {set_p50} us, p99 {set_p99} us; {slow_updates} \
         updates took over {} us, in {slow_both} of them the set_data reply did too",
        load_us as f64 / 1e3,
        load_min as f64 / 1e3,
        load_max as f64 / 1e3,
        updates[0],
        updates[updates.len() - 1],
        W5_SLOW_US,
    );

    cache.send(cache::Stop).await.expect("cache alive");
    reader.close().await;
    writer.close().await;

    format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W5\",\"nodes\":{},\"load_ms\":{:.1},\"update_p50_us\":{p50},\
         \"update_p99_us\":{p99},\"held\":{total},\"loads\":{W5_LOADS},\"load_min_ms\":{:.1},\"load_max_ms\":{:.1},\
         \"updates\":{W5_UPDATES},\"stray_events\":{stray},\"zk_rtt_p50_us\":{},\"zk_walk_ms\":{:.1},\
         \"zk_set_notify_p50_us\":{raw_notify_p50},\"zk_set_notify_get_p50_us\":{raw_notify_get_p50},\
         \"zk_set_notify_get_p99_us\":{raw_notify_get_p99},\"set_p50_us\":{set_p50},\"set_p99_us\":{set_p99},\
         \"ratio_load_to_walk\":{:.2},\"ratio_update_to_rtt\":{:.2},\"ratio_update_to_set_notify_get\":{:.2}}}",
        W5_DIRS * (W5_LEAVES + 1),
        load_us as f64 / 1e3,
        load_min as f64 / 1e3,
        load_max as f64 / 1e3,
        raw.rtt_p50,
        raw_walk_us as f64 / 1e3,
        load_us as f64 / raw_walk_us.max(1) as f64,
        p50 as f64 / raw.rtt_p50.max(1) as f64,
        p50 as f64 / raw_notify_get_p50.max(1) as f64,
    )
}
