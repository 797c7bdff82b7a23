//! A service that reloads its configuration whenever it changes in ZooKeeper, told in plain words.
//!
//! The configuration is a directory, `/config/app`, with one child node per key (`greeting`,
//! `max_connections`, ...). The service keeps a [`CacheActor`] of that directory's children and
//! applies what the cache tells it: the whole configuration once loaded, then every change. An
//! operator, with a ZooKeeper session of its own, changes values, adds a key and removes one.
//!
//! Then the service is cut off from ZooKeeper (its connection goes through a little relay in this
//! program, which the demo cuts, like a network partition), and its session expires on the server
//! while the operator changes a value. The service cannot see that change when it happens: it has
//! no connection, and its session and watch are gone. Once the network is back it gets a new
//! session, the cache re-reads everything, reports exactly what changed meanwhile, and says it is
//! back in sync (`CacheResynced`). At the end the service's view is compared with ZooKeeper's.
//!
//! Run with `cargo run --features testkit --example config_watch`. With `ZK_CONNECT` unset it
//! starts a local ZooKeeper of its own (the testkit's embedded server); with
//! `ZK_CONNECT=host:port` it uses yours, under a fresh root node that it removes at the end.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::cache::{CacheConfig, CacheEvent, CacheHandle, CacheScope};
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{TestZooKeeper, expire_session, unique_root};
use tokio::net::{TcpListener, TcpStream};

/// The configuration directory (below the run's own chroot): one child node per key.
const CONFIG: &str = "/config/app";
/// The service's session timeout.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);
/// How long to wait for any one step before giving up.
const STEP: Duration = Duration::from_secs(10);

/// What happened to the service, in order, for the checks at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Happened {
    Loaded,
    Changed(String),
    SessionExpired,
    Resynced,
}

/// The service's configuration as it applied it, and its history; shared with the main flow.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<View>>);

#[derive(Default)]
struct View {
    config: BTreeMap<String, String>,
    history: Vec<Happened>,
}

impl Shared {
    fn with<T>(&self, f: impl FnOnce(&mut View) -> T) -> T {
        f(&mut self.0.lock().expect("the service's view"))
    }

    fn value(&self, key: &str) -> Option<String> {
        self.with(|v| v.config.get(key).cloned())
    }

    fn happened(&self, what: &Happened) -> bool {
        self.with(|v| v.history.contains(what))
    }
}

/// "greeting=hello, max_connections=10".
fn describe(config: &BTreeMap<String, String>) -> String {
    if config.is_empty() {
        return "(empty)".to_owned();
    }
    config.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
}

/// The service: applies the configuration the cache reports, and says what it did.
struct Service {
    shared: Shared,
    /// Until the cache says it is loaded, keys are collected silently.
    loaded: bool,
}

impl Actor for Service {
    type Context = Context<Self>;
}

impl Service {
    fn changed(&mut self, what: String) {
        println!("  [service] configuration changed: {what}");
        self.shared.with(|v| v.history.push(Happened::Changed(what)));
    }
}

/// The key of a node under the configuration directory.
fn key_of(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_owned()
}

fn text(data: Option<Vec<u8>>) -> String {
    String::from_utf8_lossy(&data.unwrap_or_default()).into_owned()
}

impl Handler<CacheEvent> for Service {
    type Result = ();

    fn handle(&mut self, event: CacheEvent, _: &mut Context<Self>) {
        match event {
            CacheEvent::NodeAdded { path, data, .. } => {
                let (key, value) = (key_of(&path), text(data));
                self.shared.with(|v| v.config.insert(key.clone(), value.clone()));
                if self.loaded {
                    self.changed(format!("new key {key} = {value}"));
                }
            }
            CacheEvent::NodeUpdated { path, data, .. } => {
                let (key, value) = (key_of(&path), text(data));
                let old = self.shared.with(|v| v.config.insert(key.clone(), value.clone())).unwrap_or_default();
                self.changed(format!("{key} {old} → {value}"));
            }
            CacheEvent::NodeRemoved { path } => {
                let key = key_of(&path);
                let old = self.shared.with(|v| v.config.remove(&key)).unwrap_or_default();
                self.changed(format!("key {key} removed (it was {old})"));
            }
            CacheEvent::NodeSkipped { path, error } => println!("  cannot read {path} ({error}); leaving it out"),
            CacheEvent::CacheInitialized => {
                self.loaded = true;
                let now = self.shared.with(|v| {
                    v.history.push(Happened::Loaded);
                    describe(&v.config)
                });
                println!("  [service] loaded configuration: {now}");
            }
            CacheEvent::CacheResynced => {
                let now = self.shared.with(|v| {
                    v.history.push(Happened::Resynced);
                    describe(&v.config)
                });
                println!("  [service] back in sync with ZooKeeper (everything re-read); configuration: {now}");
            }
            CacheEvent::CacheFailed { error } => println!("  [service] the configuration cache failed: {error}"),
            // The event enums are `#[non_exhaustive]`: later versions may tell more.
            other => println!("  [service] {other:?}"),
        }
    }
}

impl Handler<SessionEvent> for Service {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, _: &mut Context<Self>) {
        match event {
            SessionEvent::Suspended { .. } => {
                println!("  [service] lost its connection to ZooKeeper; it keeps the configuration it has")
            }
            SessionEvent::Reconnected { .. } => println!("  [service] reconnected with the same session"),
            SessionEvent::Expired { .. } => {
                println!("  [service] its ZooKeeper session has expired: it missed whatever changed meanwhile");
                self.shared.with(|v| v.history.push(Happened::SessionExpired));
            }
            SessionEvent::Connected { generation, .. } if generation > 1 => {
                println!("  [service] has a new session; its cache re-reads the configuration")
            }
            _ => {}
        }
    }
}

/// A TCP relay between the service and ZooKeeper that the demo can cut, as a network partition
/// would: while cut, its connections are closed and new ones are dropped at once.
struct Relay {
    address: String,
    cut: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<actix_rt::task::JoinHandle<()>>>>,
}

impl Relay {
    async fn start(upstream: String) -> std::io::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        let (cut, links) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
        let relay = Relay { address, cut: cut.clone(), links: links.clone() };
        actix_rt::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if cut.load(Ordering::SeqCst) {
                    continue; // dropped: the client sees the connection fail
                }
                let upstream = upstream.clone();
                let link = actix_rt::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                links.lock().expect("relay").push(link);
            }
        });
        Ok(relay)
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for link in self.links.lock().expect("relay").drain(..) {
            link.abort();
        }
    }

    fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn main() -> ExitCode {
    println!("Configuration watch demo: a service reloads its configuration when it changes in ZooKeeper.");
    match std::env::var("ZK_CONNECT") {
        Ok(connect) if !connect.trim().is_empty() => println!("Using the ZooKeeper at $ZK_CONNECT."),
        _ => println!("Starting a local ZooKeeper (set ZK_CONNECT=host:port to use your own)..."),
    }
    let zk = match TestZooKeeper::from_env() {
        Ok(zk) => zk,
        Err(error) => {
            eprintln!("Cannot start ZooKeeper: {error}");
            eprintln!("(Install it with .ci/install-zookeeper, or set ZK_CONNECT=host:port.)");
            return ExitCode::FAILURE;
        }
    };
    let connect = zk.connect_string();
    let chroot = unique_root("config-watch-demo");
    println!("ZooKeeper is at {connect}. This run keeps its nodes under {chroot}.");

    let started = Instant::now();
    let outcome = actix::System::new().block_on(async {
        let outcome = run(&connect, &chroot).await;
        // The run's nodes go, whatever happened.
        if let Ok(admin) = SessionHandle::start(SessionConfig::new(&connect)) {
            if let Err(error) = admin.delete_recursive(&chroot).await {
                println!("  (could not remove {chroot}: {error})");
            }
            admin.close().await;
        }
        outcome
    });
    drop(zk);
    match outcome {
        Ok(()) => {
            println!("(The whole run took {:.1} s.)", started.elapsed().as_secs_f64());
            ExitCode::SUCCESS
        }
        Err(problem) => {
            eprintln!("\nFAILED: {problem}");
            ExitCode::FAILURE
        }
    }
}

/// Polls `done` every 10 ms, for up to [`STEP`].
async fn wait_until(what: &str, done: impl Fn() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + STEP;
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("gave up waiting for {what} after {STEP:?}"));
        }
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// The configuration as ZooKeeper has it now: every key under [`CONFIG`] and its value.
async fn read_config(session: &SessionHandle) -> Result<BTreeMap<String, String>, String> {
    let keys = session.children(CONFIG).await.map_err(|e| format!("cannot list {CONFIG}: {e}"))?;
    let mut config = BTreeMap::new();
    for key in keys.names {
        let path = format!("{CONFIG}/{key}");
        let node = session.get_data(&path).await.map_err(|e| format!("cannot read {path}: {e}"))?;
        config.insert(key, String::from_utf8_lossy(&node.data).into_owned());
    }
    Ok(config)
}

/// The operator's changes: each one printed, made, and then awaited in the service's view.
struct Operator<'a> {
    session: &'a SessionHandle,
    view: &'a Shared,
}

impl Operator<'_> {
    async fn set(&self, key: &str, value: &str) -> Result<(), String> {
        println!("  [operator] sets {key} to {value}");
        let path = format!("{CONFIG}/{key}");
        self.session.set_data(&path, value, None).await.map_err(|e| format!("cannot set {path}: {e}"))?;
        Ok(())
    }

    async fn add(&self, key: &str, value: &str) -> Result<(), String> {
        println!("  [operator] adds the key {key} = {value}");
        let path = format!("{CONFIG}/{key}");
        self.session
            .create(&path, value, CreateMode::Persistent)
            .await
            .map_err(|e| format!("cannot create {path}: {e}"))?;
        Ok(())
    }

    async fn remove(&self, key: &str) -> Result<(), String> {
        println!("  [operator] removes the key {key}");
        let path = format!("{CONFIG}/{key}");
        self.session.delete(&path, None).await.map_err(|e| format!("cannot delete {path}: {e}"))
    }

    async fn seen(&self, key: &str, value: Option<&str>) -> Result<(), String> {
        let what = match value {
            Some(value) => format!("the service to see {key}={value}"),
            None => format!("the service to see {key} removed"),
        };
        wait_until(&what, || self.view.value(key).as_deref() == value).await
    }
}

async fn run(connect: &str, chroot: &str) -> Result<(), String> {
    let session = |address: &str| {
        let config = SessionConfig::new(address).with_chroot(chroot).with_session_timeout(SESSION_TIMEOUT);
        SessionHandle::start(config).map_err(|e| format!("cannot start a session: {e}"))
    };
    let operator_session = session(connect)?;
    // The service reaches ZooKeeper through a relay that the demo can cut (first server only).
    let upstream = connect.split(',').next().unwrap_or(connect).split('/').next().unwrap_or(connect).to_owned();
    let relay = Relay::start(upstream).await.map_err(|e| format!("cannot start the relay: {e}"))?;
    let view = Shared::default();
    let operator = Operator { session: &operator_session, view: &view };

    println!("\n1. The operator writes the configuration: one node per key under {CONFIG}.");
    operator_session.ensure_path(CONFIG).await.map_err(|e| format!("cannot create {CONFIG}: {e}"))?;
    for (key, value) in [("greeting", "hello"), ("max_connections", "10")] {
        let path = format!("{CONFIG}/{key}");
        operator_session
            .create(&path, value, CreateMode::Persistent)
            .await
            .map_err(|e| format!("cannot create {path}: {e}"))?;
        println!("  [operator] {key} = {value}");
    }

    println!("\n2. The service starts. It caches the children of {CONFIG} and applies what the cache tells it.");
    let service_session = session(&relay.address)?;
    let service = Service { shared: view.clone(), loaded: false }.start();
    service_session.subscribe(service.clone().recipient());
    let cache_config = CacheConfig::new(CONFIG).with_scope(CacheScope::Children);
    let cache =
        CacheHandle::start(service_session.clone(), cache_config).map_err(|e| format!("cannot make the cache: {e}"))?;
    cache.subscribe(service.clone().recipient());
    wait_until("the configuration to load", || view.happened(&Happened::Loaded)).await?;

    println!("\n3. The operator changes a value, adds a key and removes one; the service reloads each time.");
    operator.set("max_connections", "20").await?;
    operator.seen("max_connections", Some("20")).await?;
    operator.add("timeout_ms", "500").await?;
    operator.seen("timeout_ms", Some("500")).await?;
    operator.remove("greeting").await?;
    operator.seen("greeting", None).await?;

    println!("\n4. The service's network is cut, and its session expires on the server (as it would after a");
    println!(
        "   partition longer than its {} s session timeout; the testkit expires it at once).",
        SESSION_TIMEOUT.as_secs()
    );
    println!("   Meanwhile the operator changes a value and adds a key back: the service cannot see either");
    println!("   when it happens.");
    let info = service_session.session().await.ok_or("the service has no session to expire")?.info;
    relay.cut();
    expire_session(connect, &info).await.map_err(|e| format!("cannot expire the service's session: {e}"))?;
    println!("  [zookeeper] the service's session has expired: its watch is gone with it");
    let before = view.with(|v| v.history.len());
    operator.set("max_connections", "30").await?;
    operator.add("greeting", "hi").await?;
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    if view.value("max_connections").as_deref() != Some("20") {
        return Err("the service saw a change while it was cut off".to_owned());
    }
    println!("  (300 ms later the service still has max_connections=20: it did not see the change)");
    println!("  The network is back.");
    relay.restore();
    wait_until("the service to be back in sync", || view.with(|v| v.history[before..].contains(&Happened::Resynced)))
        .await?;
    // What the service reported since the cut, in order: the expiry, then both changes, found
    // by the re-read (before it said it was back in sync).
    let since: Vec<Happened> = view.with(|v| v.history[before..].to_vec());
    let at = |what: &Happened| since.iter().position(|h| h == what);
    let expired = at(&Happened::SessionExpired).ok_or("the service was not told that its session expired")?;
    let resynced = at(&Happened::Resynced).ok_or("the cache did not say it was back in sync")?;
    for change in ["max_connections 20 → 30", "new key greeting = hi"] {
        match at(&Happened::Changed(change.to_owned())) {
            Some(i) if expired < i && i < resynced => {}
            Some(_) => return Err(format!("\"{change}\" was reported out of order: {since:?}")),
            None => return Err(format!("the change \"{change}\" made during the outage was not reported: {since:?}")),
        }
    }

    println!("\n5. The service's view is compared with ZooKeeper's.");
    let server = read_config(&operator_session).await?;
    let service_view = view.with(|v| v.config.clone());
    println!("  ZooKeeper has:   {}", describe(&server));
    println!("  the service has: {}", describe(&service_view));
    if server != service_view {
        return Err("the service's configuration differs from ZooKeeper's".to_owned());
    }
    cache.stop().await;
    service_session.close().await;
    operator_session.close().await;
    println!("\nThe service's configuration matches ZooKeeper's, including the change made while it was cut off.");
    Ok(())
}
