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
use actix_zookeeper::election::{self, ElectionActor, ElectionConfig, ElectionEvent, LeaderTerm, Resign, StopLeading};
use actix_zookeeper::lock::{self, Acquire, LockActor, LockConfig, LockError, LockEvent, Release};
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::{ConsumerConfig, Delivery, QueueConsumerActor, QueueError, Revoked, Worker};
use actix_zookeeper::tasks::{
    MasterEvent, Subscribe, TaskAssigned, TaskMaster, TaskMasterConfig, TaskOutcome, TaskWorker, TaskWorkerConfig,
    WorkerEvent,
};
use actix_zookeeper::{SessionId, path};
use futures::StreamExt;
use futures::channel::{mpsc, oneshot};

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
// Lines

/// Prints one line: `emit!("write", value = v, outcome = "ok")`.
macro_rules! emit {
    ($kind:expr $(, $key:ident = $value:expr)* $(,)?) => {
        print_line($kind, &[$((stringify!($key), ($value).to_string())),*])
    };
}

fn print_line(kind: &str, fields: &[(&str, String)]) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    let mut line = format!("{now} {kind}");
    for (key, value) in fields {
        let value: String = value.chars().map(|c| if c.is_whitespace() { '_' } else { c }).collect();
        let _ = write!(line, " {key}={value}");
    }
    line.push('\n');
    // One write per line under the lock, flushed: whole lines, seen by the test as they happen.
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

/// A `Debug` rendering without any whitespace, for `what=` fields.
fn compact(value: &impl std::fmt::Debug) -> String {
    format!("{value:?}").chars().filter(|c| !c.is_whitespace()).collect()
}

/// What a failed request proves about its effect.
fn outcome(error: &Error) -> &'static str {
    match error {
        // The server refused the transaction as a whole, or it was never sent.
        error if error.was_not_applied() => "failed",
        _ => "unknown",
    }
}

fn lock_outcome(error: &LockError) -> &'static str {
    match error {
        LockError::NoLongerHeld { .. } => "failed",
        LockError::ZooKeeper(error) => outcome(error),
        _ => "unknown",
    }
}

fn ack_outcome(error: &QueueError) -> &'static str {
    match error {
        // Documented as "nothing was changed" by the consumer.
        QueueError::Revoked { .. } | QueueError::ClaimLost { .. } | QueueError::UnknownDelivery { .. } => "failed",
        QueueError::ZooKeeper(error) => outcome(error),
        _ => "unknown",
    }
}

/// How often a write whose outcome is unknown is sent again, and how far apart.
const WRITE_TRIES: usize = 5;
const WRITE_RETRY: Duration = Duration::from_millis(200);

/// What one try of a self-recording write proved.
enum Tried {
    /// It returned Ok.
    Applied,
    /// Its record already exists: an earlier try applied.
    RecordExists,
    /// Nothing of it applied.
    Failed(String),
    /// It may or may not have applied.
    Unknown(String),
}

impl Tried {
    /// Classifies a ZooKeeper error of a write whose only `create` is its own record.
    fn from_error(error: &Error) -> Tried {
        match error {
            Error::Multi { source, .. } if matches!(**source, Error::NodeExists { .. }) => Tried::RecordExists,
            Error::NodeExists { .. } => Tried::RecordExists,
            error if outcome(error) == "failed" => Tried::Failed(error.to_string()),
            error => Tried::Unknown(error.to_string()),
        }
    }
}

/// Sends a write that records itself under a name of its own, again while its outcome is
/// unknown, as a careful user would: the record makes the retry idempotent (`NodeExists` on it
/// proves an earlier try applied). Returns the outcome over all tries (`ok`, or `unknown` when
/// any try may have applied, else `failed`) and the last error.
async fn write_until_known<F, Fut>(mut attempt: F) -> (&'static str, Option<String>)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Tried>,
{
    let mut unsure: Option<String> = None;
    for _ in 0..WRITE_TRIES {
        match attempt().await {
            Tried::Applied => return ("ok", None),
            Tried::RecordExists if unsure.is_some() => return ("ok", None),
            // Nobody else writes our record: without an earlier try this is a broken premise.
            Tried::RecordExists => return ("failed", Some("the write's record exists already".into())),
            Tried::Failed(error) => return (if unsure.is_some() { "unknown" } else { "failed" }, Some(error)),
            Tried::Unknown(error) => unsure = Some(error),
        }
        tokio::time::sleep(WRITE_RETRY).await;
    }
    ("unknown", unsure)
}

/// Answers once every message sent to an actor before it has been handled (mailboxes are
/// FIFO), so that a line printed by that actor comes before the next line of the caller.
#[derive(Message)]
#[rtype(result = "()")]
struct Flush;

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

// ---------------------------------------------------------------------------------------------
// lock

struct LockPlan {
    dir: String,
    counter: String,
    history: String,
    rounds: u64,
    hold: Duration,
    unfenced: bool,
}

/// Rounds of read-modify-write on a counter outside the lock protocol, under the lock; each
/// write also records itself under the history directory, in the same transaction.
async fn lock_role(session: &SessionHandle, id: &str, plan: LockPlan) -> Result<(), String> {
    ensure_counter(session, &plan.counter).await?;
    patiently("create the history directory", || session.ensure_path(&plan.history)).await?;
    let lock = LockActor::new(session.clone(), LockConfig::new(&plan.dir).with_participant_id(id)).start();
    // Subscribing does not keep the printer alive: this address does, for the whole role.
    let printer = LockPrinter.start();
    lock.do_send(lock::Subscribe { recipient: printer.clone().recipient() });
    for round in 1..=plan.rounds {
        let grant = loop {
            match lock.send(Acquire { timeout: Some(ACQUIRE_TIMEOUT) }).await {
                Ok(Ok(grant)) => break grant,
                Ok(Err(error)) => emit!("acquire-error", error = error),
                Err(_) => return Err("the lock actor stopped".into()),
            }
            tokio::time::sleep(RETRY).await;
        };
        let token = grant.token.0;
        emit!("acquired", token = token, node = grant.node, round = round);
        let value = read_counter(session, &plan.counter).await?;
        emit!("read", value = value, round = round);
        tokio::time::sleep(plan.hold).await;
        let next = value + 1;
        let ops = vec![
            Op::SetData { path: plan.counter.clone(), data: next.to_string().into_bytes(), version: None },
            Op::Create {
                path: path::join(&plan.history, &format!("w-{token}")),
                data: format!("value={next} token={token} writer={id}").into_bytes(),
                mode: CreateMode::Persistent,
            },
        ];
        let (outcome, error) = write_until_known(|| {
            let written = if plan.unfenced {
                let sent = session.multi(ops.clone());
                futures::future::Either::Left(async move { sent.await.map_err(LockError::ZooKeeper) })
            } else {
                let sent = grant.guarded_write(session, ops.clone());
                futures::future::Either::Right(async move { sent.await.map_err(LockError::from) })
            };
            async move {
                match written.await {
                    Ok(_) => Tried::Applied,
                    Err(LockError::ZooKeeper(error)) => Tried::from_error(&error),
                    Err(error) if lock_outcome(&error) == "failed" => Tried::Failed(error.to_string()),
                    Err(error) => Tried::Unknown(error.to_string()),
                }
            }
        })
        .await;
        match error {
            None => emit!("write", value = next, token = token, outcome = outcome),
            Some(error) => emit!("write", value = next, token = token, outcome = outcome, error = error),
        }
        match lock.send(Release).await {
            Ok(Ok(())) => emit!("released", token = token),
            Ok(Err(error)) => emit!("release-error", error = error),
            Err(_) => return Err("the lock actor stopped".into()),
        }
    }
    emit!("done");
    Ok(())
}

/// Creates the counter with "0" unless it exists.
async fn ensure_counter(session: &SessionHandle, counter: &str) -> Result<(), String> {
    if let Some(parent) = path::parent(counter) {
        patiently("create the counter's parent", || session.ensure_path(parent)).await?;
    }
    let created = patiently("create the counter", || async {
        match session.create(counter, "0", CreateMode::Persistent).await {
            Ok(_) | Err(Error::NodeExists { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    });
    created.await
}

async fn read_counter(session: &SessionHandle, counter: &str) -> Result<u64, String> {
    let node = patiently("read the counter", || session.get_data(counter)).await?;
    let text = String::from_utf8_lossy(&node.data);
    text.trim().parse().map_err(|_| format!("the counter {counter} holds {text:?}, not a number"))
}

/// Prints what the lock tells besides grants and releases (which the rounds print).
struct LockPrinter;

impl Actor for LockPrinter {
    type Context = Context<Self>;
}

impl Handler<LockEvent> for LockPrinter {
    type Result = ();

    fn handle(&mut self, event: LockEvent, _: &mut Context<Self>) {
        match event {
            LockEvent::Lost { token, reason, .. } => emit!("lost", token = token.0, reason = format!("{reason:?}")),
            LockEvent::Suspended { token, .. } => emit!("suspended", token = token.0),
            LockEvent::Reconnected { token, .. } => emit!("reconnected", token = token.0),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// election

struct ElectionPlan {
    path: String,
    history: String,
    writes: u64,
    interval: Duration,
    unfenced: bool,
    /// Start each write only while the term is certainly held (`Fence::check_current`), and
    /// print `current term=<t> until=<unix ms>` before it, or `refused term=<t>` instead of it.
    guarded: bool,
}

/// Counts shared by every term's leader actor (all on this thread).
#[derive(Default)]
struct Tally {
    /// Writes attempted so far; the next one's `n`.
    attempts: Cell<u64>,
    /// Writes that returned Ok.
    ok: Cell<u64>,
    /// A write is under way (from this term or an earlier one): one at a time.
    busy: Cell<bool>,
}

/// Leads in leader-actor mode, writes while leading, and resigns for good after enough writes.
async fn election_role(session: &SessionHandle, id: &str, plan: ElectionPlan) -> Result<(), String> {
    patiently("create the history directory", || session.ensure_path(&plan.history)).await?;
    let tally = Rc::new(Tally::default());
    let (enough, mut enough_rx) = mpsc::unbounded();
    let leader = {
        let (session, id, history) = (session.clone(), id.to_owned(), plan.history.clone());
        let (writes, interval, unfenced, guarded) = (plan.writes, plan.interval, plan.unfenced, plan.guarded);
        move |term: LeaderTerm| TermWriter {
            session: session.clone(),
            id: id.clone(),
            history: history.clone(),
            term,
            writes,
            interval,
            unfenced,
            guarded,
            tally: Rc::clone(&tally),
            enough: enough.clone(),
        }
    };
    let config = ElectionConfig::new(&plan.path).with_participant_id(id).with_leader_actor(leader);
    let election = ElectionActor::new(session.clone(), config).start();
    let printer = ElectionPrinter.start();
    election.do_send(election::Subscribe { recipient: printer.clone().recipient() });
    if plan.writes > 0 {
        enough_rx.next().await;
    }
    match election.send(Resign { requeue: false }).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(format!("resign: {error}")),
        Err(_) => return Err("the election actor stopped".into()),
    }
    // Its `lost ... reason=Resigned` comes before our `done`.
    let _ = printer.send(Flush).await;
    emit!("done");
    Ok(())
}

/// The leader's work during one term: a fenced write every `interval`.
struct TermWriter {
    session: SessionHandle,
    id: String,
    history: String,
    term: LeaderTerm,
    writes: u64,
    interval: Duration,
    unfenced: bool,
    guarded: bool,
    tally: Rc<Tally>,
    enough: mpsc::UnboundedSender<()>,
}

impl Actor for TermWriter {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(self.interval, |act, _| act.write());
    }
}

impl TermWriter {
    fn write(&mut self) {
        let tally = Rc::clone(&self.tally);
        if tally.busy.get() || tally.ok.get() >= self.writes {
            return;
        }
        let term = self.term.token.0;
        if self.guarded {
            match self.term.check_current() {
                Ok(left) => {
                    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
                    emit!("current", term = term, until = (now + left).as_millis());
                }
                Err(_) => {
                    emit!("refused", term = term);
                    return;
                }
            }
        }
        tally.busy.set(true);
        let n = tally.attempts.get() + 1;
        tally.attempts.set(n);
        let create = Op::Create {
            path: path::join(&self.history, &format!("e-{term}-{n}")),
            data: format!("term={term} writer={} n={n}", self.id).into_bytes(),
            mode: CreateMode::Persistent,
        };
        let ops = if self.unfenced { vec![create] } else { self.term.guard(vec![create]) };
        let session = self.session.clone();
        let (writes, enough) = (self.writes, self.enough.clone());
        // Detached: the outcome is printed even when the term ends (and this actor stops)
        // while the write is under way.
        actix::spawn(async move {
            let (outcome, error) = write_until_known(|| {
                let sent = session.multi(ops.clone());
                async move {
                    match sent.await {
                        Ok(_) => Tried::Applied,
                        Err(error) => Tried::from_error(&error),
                    }
                }
            })
            .await;
            tally.busy.set(false);
            match error {
                None => {
                    tally.ok.set(tally.ok.get() + 1);
                    emit!("write", term = term, n = n, outcome = outcome);
                    if tally.ok.get() == writes {
                        let _ = enough.unbounded_send(());
                    }
                }
                Some(error) => emit!("write", term = term, n = n, outcome = outcome, error = error),
            }
        });
    }
}

impl Handler<StopLeading> for TermWriter {
    type Result = ();

    fn handle(&mut self, _: StopLeading, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

struct ElectionPrinter;

impl Actor for ElectionPrinter {
    type Context = Context<Self>;
}

impl Handler<ElectionEvent> for ElectionPrinter {
    type Result = ();

    fn handle(&mut self, event: ElectionEvent, _: &mut Context<Self>) {
        match event {
            ElectionEvent::LeadershipAcquired { token } => emit!("leader", token = token.0),
            ElectionEvent::LeadershipSuspended { token } => emit!("suspended", token = token.0),
            ElectionEvent::LeadershipRestored { token } => emit!("restored", token = token.0),
            ElectionEvent::LeadershipLost { token, reason } => {
                emit!("lost", token = token.0, reason = format!("{reason:?}"))
            }
            ElectionEvent::LeaderChanged { leader_id } => {
                emit!("leader-changed", leader = leader_id.as_deref().unwrap_or("none"))
            }
            ElectionEvent::ElectionFailed { error } => emit!("election-failed", error = error),
            _ => {}
        }
    }
}

impl Handler<Flush> for SessionPrinter {
    type Result = ();

    fn handle(&mut self, _: Flush, _: &mut Context<Self>) {}
}

impl Handler<Flush> for ElectionPrinter {
    type Result = ();

    fn handle(&mut self, _: Flush, _: &mut Context<Self>) {}
}

// ---------------------------------------------------------------------------------------------
// queue-consumer

/// An at-least-once consumer with one worker actor that works `work` on each item, then acks.
async fn queue_consumer_role(
    session: &SessionHandle,
    id: &str,
    queue: &str,
    concurrency: usize,
    work: Duration,
) -> Result<(), String> {
    let worker = ItemWorker { work, items: Rc::default() }.start();
    let config =
        ConsumerConfig::new(queue).with_consumer_id(id).with_concurrency(concurrency).with_worker(Worker::new(&worker));
    let _consumer = QueueConsumerActor::new(session.clone(), config).start();
    futures::future::pending().await
}

struct ItemWorker {
    work: Duration,
    /// Items in hand, by node name, so that a revocation can name the item.
    items: Rc<RefCell<HashMap<String, String>>>,
}

impl Actor for ItemWorker {
    type Context = Context<Self>;
}

impl Handler<Delivery> for ItemWorker {
    type Result = ();

    fn handle(&mut self, delivery: Delivery, _: &mut Context<Self>) {
        let item = String::from_utf8_lossy(&delivery.data).into_owned();
        let token = delivery.token.0;
        emit!("delivered", item = item, attempt = delivery.attempt, token = token);
        self.items.borrow_mut().insert(delivery.id.clone(), item.clone());
        let (items, work) = (Rc::clone(&self.items), self.work);
        actix::spawn(async move {
            tokio::time::sleep(work).await;
            match delivery.ack().await {
                Ok(()) => emit!("ack", item = item, token = token, outcome = "ok"),
                Err(error) => emit!("ack", item = item, token = token, outcome = ack_outcome(&error), error = error),
            }
            items.borrow_mut().remove(&delivery.id);
        });
    }
}

impl Handler<Revoked> for ItemWorker {
    type Result = ();

    fn handle(&mut self, revoked: Revoked, _: &mut Context<Self>) {
        let item = self.items.borrow().get(&revoked.id).cloned().unwrap_or(revoked.id);
        emit!("revoked", item = item);
    }
}

// ---------------------------------------------------------------------------------------------
// task-worker

async fn task_worker_role(
    session: &SessionHandle,
    id: &str,
    root: &str,
    concurrency: usize,
    work: Duration,
) -> Result<(), String> {
    let runner = Runner { id: id.to_owned(), work }.start();
    let config = TaskWorkerConfig::new(root, id, runner.recipient()).with_concurrency(concurrency);
    let worker = TaskWorker::new(session.clone(), config).map_err(|e| e.to_string())?.start();
    let printer = WorkerPrinter.start();
    worker.do_send(Subscribe { recipient: printer.clone().recipient() });
    // Dropping the worker's (or the printer's) last address would stop it.
    futures::future::pending::<()>().await;
    drop((worker, printer));
    Ok(())
}

/// The user's side of a worker: "runs" a task by sleeping, answers `<data>|by=<id>`.
struct Runner {
    id: String,
    work: Duration,
}

impl Actor for Runner {
    type Context = Context<Self>;
}

impl Handler<TaskAssigned> for Runner {
    type Result = ResponseFuture<TaskOutcome>;

    fn handle(&mut self, task: TaskAssigned, _: &mut Context<Self>) -> Self::Result {
        emit!("assigned", task = task.task_id);
        let result = format!("{}|by={}", String::from_utf8_lossy(&task.data), self.id).into_bytes();
        let work = self.work;
        Box::pin(async move {
            tokio::time::sleep(work).await;
            result.into()
        })
    }
}

struct WorkerPrinter;

impl Actor for WorkerPrinter {
    type Context = Context<Self>;
}

impl Handler<WorkerEvent> for WorkerPrinter {
    type Result = ();

    fn handle(&mut self, event: WorkerEvent, _: &mut Context<Self>) {
        match event {
            WorkerEvent::TaskFinished { task_id } => emit!("finished", task = task_id),
            WorkerEvent::TaskDiscarded { task_id, reason } => {
                emit!("discarded", task = task_id, reason = compact(&reason))
            }
            other => emit!("worker-event", what = compact(&other)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// task-master

async fn task_master_role(session: &SessionHandle, id: &str, root: &str) -> Result<(), String> {
    let config = TaskMasterConfig::new(root).with_master_id(id);
    let master = TaskMaster::new(session.clone(), config).map_err(|e| e.to_string())?.start();
    let printer = MasterPrinter.start();
    master.do_send(Subscribe { recipient: printer.clone().recipient() });
    futures::future::pending::<()>().await;
    drop((master, printer));
    Ok(())
}

struct MasterPrinter;

impl Actor for MasterPrinter {
    type Context = Context<Self>;
}

impl Handler<MasterEvent> for MasterPrinter {
    type Result = ();

    fn handle(&mut self, event: MasterEvent, _: &mut Context<Self>) {
        emit!("master-event", what = compact(&event));
        if let MasterEvent::BecameMaster { fence } = event {
            emit!("term", token = fence.token.0);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Service

/// Registers instance `id` of service `name` at `127.0.0.1:<port>` and keeps it registered;
/// prints `registered path=<node>`, and `registration what=<event>` for every later event.
async fn service_role(session: &SessionHandle, id: &str, base: &str, name: &str, port: u16) -> Result<(), String> {
    let discovery = ServiceDiscovery::new(session.clone(), DiscoveryConfig::new(base)).map_err(|e| e.to_string())?;
    let instance = ServiceInstance::new(name, id).with_address("127.0.0.1").with_port(port);
    let registration = discovery.register(instance).await.map_err(|e| e.to_string())?;
    emit!("registered", path = registration.path());
    let mut events = registration.events();
    while let Some(event) = events.next().await {
        emit!("registration", what = compact(&event));
    }
    drop(registration);
    Ok(())
}
