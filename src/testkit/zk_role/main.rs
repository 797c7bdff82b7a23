//! `zk-role`: one participant of one recipe, run as its own OS process, reporting what happens
//! to it as one line per event on stdout. Fault tests start it through
//! `actix_zookeeper::testkit::RoleProcess`, then pause, resume or kill it for real.
//!
//! Owns: the command line, the six roles (`lock`, `election`, `queue-consumer`, `task-worker`,
//! `task-master`, `service`), the line format, and classifying each write's outcome. Does not own judging
//! a run: the tests read the lines and the server, and decide.
//!
//! Every line is `<unix_ms> <kind> <key>=<value> ...`, flushed at once; values never contain
//! whitespace (it is replaced by `_`). Nothing else goes to stdout; errors go to stderr. Once its
//! session is connected the role prints `ready`; it prints `done` when its workload is over (the
//! lock and election roles), then keeps its session open until its stdin reaches end-of-file,
//! closes the session and exits with status 0. Bad arguments: a message on stderr, status 2.
//!
//! A write's outcome is `ok` (it returned Ok), `failed` (the error proves nothing was applied:
//! the fence or a version check refused it, or the error is final) or `unknown` (connection
//! lost, session lost or timed out while it was under way, anything else).
//!
//! The lock and election roles' writes record themselves under a name of their own
//! (`<history>/w-<token>`, `<history>/e-<term>-<n>`), so that a write whose outcome is unknown
//! can be sent again the way a careful user would (up to 5 tries): `NodeExists` on the record
//! proves an earlier try applied. The printed outcome covers all tries. The history's commit
//! order is its nodes' czxid order.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::future::Future;
use std::io::Write as _;
use std::process::ExitCode;
use std::rc::Rc;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix::prelude::*;
use actix_zookeeper::discovery::{DiscoveryConfig, ServiceDiscovery, ServiceInstance};
use actix_zookeeper::election::{ElectionActor, ElectionConfig, ElectionEvent, LeaderTerm, Resign, StopLeading};
use actix_zookeeper::lock::{Acquire, LockActor, LockConfig, LockError, LockEvent, Release};
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::{ConsumerConfig, Delivery, QueueConsumerActor, QueueError, Revoked, Worker};
use actix_zookeeper::tasks::{
    MasterEvent, TaskAssigned, TaskMaster, TaskMasterConfig, TaskOutcome, TaskWorker, TaskWorkerConfig, WorkerEvent,
};
use actix_zookeeper::{SessionId, path};
use futures::StreamExt;
use futures::channel::{mpsc, oneshot};

#[macro_use]
mod line;
mod election_role;
mod lock_role;
mod queue_role;
mod service_role;
mod task_roles;

use election_role::*;
use line::*;
use lock_role::*;
use queue_role::*;
use service_role::*;
use task_roles::*;

const USAGE: &str = "\
usage: zk-role <role> --connect <host:port,...> --chroot <root> --id <participant id>
               [--session-timeout-ms <n, default 2000>] <role options>
roles and their options (defaults in brackets):
  lock            [--dir /lock] [--counter /counter] [--history /history] [--rounds 1]
                  [--hold-ms 100] [--unfenced]
  election        [--path /election] [--history /history] [--writes 10] [--interval-ms 100]
                  [--unfenced] [--guarded]   (guarded: each write only while the term is current)
  queue-consumer  [--queue /queue] [--concurrency 1] [--work-ms 50]
  task-worker     [--root /tasks] [--concurrency 1] [--work-ms 50]
  task-master     [--root /tasks]
  service         [--base /services] [--name service] [--port 8080]   (instance <id>, registered)
Events are printed on stdout as `<unix_ms> <kind> <key>=<value> ...`; close stdin to stop.";

/// How long one `Acquire` waits before it is reported and tried again.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause before trying a failed request again.
const RETRY: Duration = Duration::from_millis(100);

// ---------------------------------------------------------------------------------------------
// Arguments

struct Args {
    role: String,
    values: BTreeMap<String, String>,
    switches: Vec<String>,
}

/// Options without a value.
const SWITCHES: &[&str] = &["unfenced", "guarded"];

impl Args {
    fn parse(argv: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut argv = argv.into_iter();
        let role = argv.next().filter(|r| !r.starts_with("--")).ok_or("no role given")?;
        let (mut values, mut switches) = (BTreeMap::new(), Vec::new());
        while let Some(arg) = argv.next() {
            let key = arg.strip_prefix("--").ok_or_else(|| format!("unexpected argument {arg:?}"))?.to_owned();
            if SWITCHES.contains(&key.as_str()) {
                switches.push(key);
                continue;
            }
            let value = argv.next().ok_or_else(|| format!("--{key} needs a value"))?;
            if values.insert(key.clone(), value).is_some() {
                return Err(format!("--{key} given twice"));
            }
        }
        Ok(Args { role, values, switches })
    }

    fn text(&mut self, key: &str, default: Option<&str>) -> Result<String, String> {
        match (self.values.remove(key), default) {
            (Some(value), _) => Ok(value),
            (None, Some(default)) => Ok(default.to_owned()),
            (None, None) => Err(format!("--{key} is required")),
        }
    }

    fn number<T: FromStr>(&mut self, key: &str, default: T) -> Result<T, String> {
        match self.values.remove(key) {
            Some(value) => value.parse().map_err(|_| format!("--{key}: {value:?} is not a valid number")),
            None => Ok(default),
        }
    }

    fn switch(&mut self, key: &str) -> bool {
        let before = self.switches.len();
        self.switches.retain(|s| s != key);
        self.switches.len() != before
    }

    /// Fails on any option the role did not take.
    fn finish(self) -> Result<(), String> {
        let unknown: Vec<String> =
            self.values.keys().chain(self.switches.iter()).map(|key| format!("--{key}")).collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(format!("unknown option(s) for role {}: {}", self.role, unknown.join(" ")))
        }
    }
}

struct Common {
    connect: String,
    chroot: String,
    id: String,
    session_timeout: Duration,
}

enum Role {
    Lock(LockPlan),
    Election(ElectionPlan),
    QueueConsumer { queue: String, concurrency: usize, work: Duration },
    TaskWorker { root: String, concurrency: usize, work: Duration },
    TaskMaster { root: String },
    Service { base: String, name: String, port: u16 },
}

fn parse(argv: impl IntoIterator<Item = String>) -> Result<(Common, Role), String> {
    let mut args = Args::parse(argv)?;
    const ROLES: [&str; 6] = ["lock", "election", "queue-consumer", "task-worker", "task-master", "service"];
    if !ROLES.contains(&args.role.as_str()) {
        return Err(format!("unknown role {:?}", args.role));
    }
    let common = Common {
        connect: args.text("connect", None)?,
        chroot: args.text("chroot", None)?,
        id: args.text("id", None)?,
        session_timeout: Duration::from_millis(args.number("session-timeout-ms", 2000)?),
    };
    let ms = |args: &mut Args, key: &str, default: u64| args.number(key, default).map(Duration::from_millis);
    let role = match args.role.as_str() {
        "lock" => Role::Lock(LockPlan {
            dir: args.text("dir", Some("/lock"))?,
            counter: args.text("counter", Some("/counter"))?,
            history: args.text("history", Some("/history"))?,
            rounds: args.number("rounds", 1)?,
            hold: ms(&mut args, "hold-ms", 100)?,
            unfenced: args.switch("unfenced"),
        }),
        "election" => Role::Election(ElectionPlan {
            path: args.text("path", Some("/election"))?,
            history: args.text("history", Some("/history"))?,
            writes: args.number("writes", 10)?,
            interval: ms(&mut args, "interval-ms", 100)?,
            unfenced: args.switch("unfenced"),
            guarded: args.switch("guarded"),
        }),
        "queue-consumer" => Role::QueueConsumer {
            queue: args.text("queue", Some("/queue"))?,
            concurrency: args.number("concurrency", 1)?,
            work: ms(&mut args, "work-ms", 50)?,
        },
        "task-worker" => Role::TaskWorker {
            root: args.text("root", Some("/tasks"))?,
            concurrency: args.number("concurrency", 1)?,
            work: ms(&mut args, "work-ms", 50)?,
        },
        "task-master" => Role::TaskMaster { root: args.text("root", Some("/tasks"))? },
        "service" => Role::Service {
            base: args.text("base", Some("/services"))?,
            name: args.text("name", Some("service"))?,
            port: args.number("port", 8080)?,
        },
        other => unreachable!("role {other:?} is in ROLES"),
    };
    args.finish()?;
    Ok((common, role))
}

// ---------------------------------------------------------------------------------------------
// Main

fn main() -> ExitCode {
    let (common, role) = match parse(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("zk-role: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let config = SessionConfig::new(&common.connect)
        .with_chroot(common.chroot.clone())
        .with_session_timeout(common.session_timeout);
    if let Err(error) = config.validate() {
        eprintln!("zk-role: {error}\n{USAGE}");
        return ExitCode::from(2);
    }
    actix::System::new().block_on(run(config, common, role))
}

async fn run(config: SessionConfig, common: Common, role: Role) -> ExitCode {
    let mut stdin_closed = stdin_closed();
    let session = match SessionHandle::start(config) {
        Ok(session) => session,
        Err(error) => {
            eprintln!("zk-role: cannot start the session: {error}");
            return ExitCode::from(2);
        }
    };
    let (connected, first_connect) = oneshot::channel();
    // The session holds its subscribers weakly: this address keeps the printer alive.
    let printer = SessionPrinter { last: None, connected: Some(connected) }.start();
    session.subscribe(printer.clone().recipient());
    match futures::future::select(first_connect, &mut stdin_closed).await {
        futures::future::Either::Left((Ok(()), _)) => {}
        futures::future::Either::Left((Err(_), _)) => {
            eprintln!("zk-role {}: the session printer stopped before the session connected", common.id);
            return ExitCode::FAILURE;
        }
        futures::future::Either::Right(_) => {
            session.close().await;
            return ExitCode::SUCCESS;
        }
    }
    emit!("ready");
    let work = play(role, &common, &session);
    futures::pin_mut!(work);
    let failure = match futures::future::select(work, &mut stdin_closed).await {
        futures::future::Either::Left((Ok(()), _)) => {
            let _ = stdin_closed.await;
            None
        }
        futures::future::Either::Left((Err(error), _)) => Some(error),
        futures::future::Either::Right(_) => None,
    };
    session.close().await;
    // Its `session state=closed` line comes before the exit.
    let _ = printer.send(Flush).await;
    match failure {
        None => ExitCode::SUCCESS,
        Some(error) => {
            eprintln!("zk-role {}: {error}", common.id);
            ExitCode::FAILURE
        }
    }
}

/// Resolves when stdin reaches end-of-file (or cannot be read): the test's signal to finish.
fn stdin_closed() -> oneshot::Receiver<()> {
    let (tx, rx) = oneshot::channel();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = tx.send(());
    });
    rx
}

/// Runs the role's workload; resolves when it is done (the queue and task roles never are).
async fn play(role: Role, common: &Common, session: &SessionHandle) -> Result<(), String> {
    let id = common.id.clone();
    match role {
        Role::Lock(plan) => lock_role(session, &id, plan).await,
        Role::Election(plan) => election_role(session, &id, plan).await,
        Role::QueueConsumer { queue, concurrency, work } => {
            queue_consumer_role(session, &id, &queue, concurrency, work).await
        }
        Role::TaskWorker { root, concurrency, work } => task_worker_role(session, &id, &root, concurrency, work).await,
        Role::TaskMaster { root } => task_master_role(session, &id, &root).await,
        Role::Service { base, name, port } => service_role(session, &id, &base, &name, port).await,
    }
}

/// Prints every session event.
struct SessionPrinter {
    last: Option<(SessionId, u64)>,
    /// Told at the first connection.
    connected: Option<oneshot::Sender<()>>,
}

impl Actor for SessionPrinter {
    type Context = Context<Self>;
}

impl Handler<SessionEvent> for SessionPrinter {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, _: &mut Context<Self>) {
        let (state, session) = match event {
            SessionEvent::Connected { session_id, generation } => ("connected", Some((session_id, generation))),
            SessionEvent::Suspended { session_id, generation } => ("suspended", Some((session_id, generation))),
            SessionEvent::Reconnected { session_id, generation, .. } => ("reconnected", Some((session_id, generation))),
            SessionEvent::Expired { session_id, generation } => ("expired", Some((session_id, generation))),
            SessionEvent::Closed => ("closed", None),
            SessionEvent::AuthFailed => ("auth-failed", None),
            _ => ("other", None),
        };
        if session.is_some() {
            self.last = session;
        }
        match self.last {
            Some((id, generation)) => emit!("session", state = state, session = id, generation = generation),
            None => emit!("session", state = state),
        }
        if state == "connected" {
            if let Some(connected) = self.connected.take() {
                let _ = connected.send(());
            }
        }
    }
}

/// Tries `attempt` until it succeeds, on connection problems only.
async fn patiently<T, F, Fut>(what: &str, mut attempt: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    loop {
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(error) if error.is_transient() => {
                eprintln!("zk-role: {what}: {error}; trying again");
                tokio::time::sleep(RETRY).await;
            }
            Err(error) => return Err(format!("{what}: {error}")),
        }
    }
}

impl Handler<Flush> for SessionPrinter {
    type Result = ();

    fn handle(&mut self, _: Flush, _: &mut Context<Self>) {}
}
