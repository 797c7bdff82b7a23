//! The crate's main demo: master–worker task assignment. Two masters, three workers and a client,
//! each with a ZooKeeper session of its own (as if each were a separate process). A worker crashes
//! in the middle of its tasks, later the master dies (its session expires on the server), and
//! still every task finishes exactly once. Printed in plain words.
//!
//! Run with `cargo run --features testkit --example master_worker`. With `ZK_CONNECT` unset it
//! starts a local ZooKeeper of its own (the testkit's embedded server); with
//! `ZK_CONNECT=host:port` it uses yours, under a fresh root node that it removes at the end (the
//! expiry works against any server: `testkit::expire_session` only needs a connection).
//!
//! The worker's crash closes its session and stops its actors at the same moment: ZooKeeper
//! deletes its ephemeral nodes at once, as it does for a crashed process once its session times
//! out. The master's death is a genuine server-side session expiry, after which its actors are
//! stopped so that it does not come back.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::tasks::{
    MasterEvent, TaskAssigned, TaskClient, TaskError, TaskId, TaskMasterConfig, TaskMasterHandle, TaskOutcome,
    TaskWorkerConfig, TaskWorkerHandle, WorkerEvent,
};
use actix_zookeeper::testkit::{TestZooKeeper, expire_session, unique_root};
use futures::future::join_all;

/// How many tasks the client submits.
const TASKS: usize = 40;
/// The installation's root (below the run's own chroot).
const ROOT: &str = "/jobs";
const MASTERS: [&str; 2] = ["master-A", "master-B"];
const WORKERS: [&str; 3] = ["worker-1", "worker-2", "worker-3"];
/// Tasks a worker runs at once.
const CONCURRENCY: usize = 2;
/// The worker that crashes, and how many results are in when it does.
const DOOMED_WORKER: &str = "worker-2";
const CRASH_WORKER_AT: usize = 6;
/// How many results are in when the master dies.
const CRASH_MASTER_AT: usize = 20;
/// Every participant's session timeout.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);
/// How long to wait for any one step before giving up.
const STEP: Duration = Duration::from_secs(20);
/// How long the client waits for each result.
const RESULT_WAIT: Duration = Duration::from_secs(60);

/// What the demo has seen so far, shared by the narrators, the runners and the main flow.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Story>>);

#[derive(Default)]
struct Story {
    /// Short names for the task ids ("#07").
    labels: HashMap<TaskId, String>,
    /// Every run a runner started, per task label: who ran it and how it ended.
    runs: BTreeMap<String, Vec<(&'static str, Run)>>,
    /// Participants that died: what they would still report is not narrated.
    crashed: HashSet<&'static str>,
    /// The demo is over: nothing more is narrated.
    quiet: bool,
    /// The master last announced.
    announced: Option<String>,
    /// Terms that rebuilt their view: (master, workers, pending, assigned).
    rebuilt: Vec<(&'static str, usize, usize, usize)>,
    /// Workers the current master saw join, and leave.
    joined: HashSet<String>,
    left: HashSet<String>,
    /// Assignments made, per master.
    assigned_by: BTreeMap<&'static str, usize>,
    /// Tasks put back in the queue.
    requeued: usize,
    /// Results recorded, per worker.
    finished_by: BTreeMap<&'static str, usize>,
    /// Results the client has received.
    done: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    Running,
    /// The runner answered (the worker then records the result).
    Answered,
    /// The worker crashed during the run.
    Killed,
}

impl Shared {
    fn with<T>(&self, f: impl FnOnce(&mut Story) -> T) -> T {
        f(&mut self.0.lock().expect("the demo's state"))
    }

    fn label(&self, task: &TaskId) -> String {
        self.with(|s| s.labels.get(task).cloned()).unwrap_or_else(|| task.to_string())
    }

    fn crashed(&self, who: &str) -> bool {
        self.with(|s| s.crashed.contains(who))
    }

    /// Whether `who`'s events are told.
    fn tells(&self, who: &str) -> bool {
        self.with(|s| !s.quiet && !s.crashed.contains(who))
    }

    /// The tasks `worker` is running right now.
    fn running_on(&self, worker: &'static str) -> Vec<String> {
        self.with(|s| {
            let running = s.runs.iter().filter(|(_, runs)| runs.contains(&(worker, Run::Running)));
            running.map(|(label, _)| label.clone()).collect()
        })
    }
}

/// "#03", "#03 and #04", "#03, #04 and #05".
fn and_list(items: &[String]) -> String {
    match items {
        [] => "nothing".to_owned(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// A worker's own code: "works" on a task for 150–300 ms and answers with the payload in upper
/// case. Its runs live in its context, so when it crashes they die with it.
struct Runner {
    worker: &'static str,
    shared: Shared,
}

impl Actor for Runner {
    type Context = Context<Self>;
}

/// Makes a runner stop at once, in the middle of whatever it is doing.
#[derive(Message)]
#[rtype(result = "()")]
struct Crash;

impl Handler<TaskAssigned> for Runner {
    type Result = ResponseActFuture<Self, TaskOutcome>;

    fn handle(&mut self, task: TaskAssigned, _: &mut Context<Self>) -> Self::Result {
        let (label, worker) = (self.shared.label(&task.task_id), self.worker);
        self.shared.with(|s| s.runs.entry(label.clone()).or_default().push((worker, Run::Running)));
        // 150–300 ms, different for every task.
        let mut hasher = std::hash::DefaultHasher::new();
        task.task_id.hash(&mut hasher);
        let work = Duration::from_millis(150 + hasher.finish() % 151);
        Box::pin(actix_rt::time::sleep(work).into_actor(self).map(move |(), act, _| {
            act.shared.with(|s| {
                if let Some(run) = s.runs.get_mut(&label).and_then(|runs| runs.iter_mut().rfind(|r| r.0 == worker)) {
                    run.1 = Run::Answered;
                }
            });
            task.data.to_ascii_uppercase().into()
        }))
    }
}

impl Handler<Crash> for Runner {
    type Result = ();

    fn handle(&mut self, _: Crash, ctx: &mut Context<Self>) {
        let worker = self.worker;
        self.shared.with(|s| {
            for runs in s.runs.values_mut() {
                for run in runs.iter_mut().filter(|r| **r == (worker, Run::Running)) {
                    run.1 = Run::Killed;
                }
            }
        });
        ctx.stop();
    }
}

/// Tells what one master candidate reports.
struct MasterNarrator {
    name: &'static str,
    shared: Shared,
    /// Within a term, before its view is rebuilt: the workers it found registered.
    rebuilding: Option<Vec<String>>,
}

impl Actor for MasterNarrator {
    type Context = Context<Self>;
}

impl Handler<MasterEvent> for MasterNarrator {
    type Result = ();

    fn handle(&mut self, event: MasterEvent, _: &mut Context<Self>) {
        let me = self.name;
        // Counted whoever made them: they happened in ZooKeeper.
        match event {
            MasterEvent::Assigned { .. } => self.shared.with(|s| *s.assigned_by.entry(me).or_default() += 1),
            MasterEvent::Requeued { .. } => self.shared.with(|s| s.requeued += 1),
            _ => {}
        }
        if !self.shared.tells(me) {
            return; // a dead process says nothing
        }
        match event {
            // Every candidate hears this; say it once.
            MasterEvent::MasterChanged { master_id } => {
                let news = self.shared.with(|s| {
                    let news = s.announced != master_id;
                    s.announced.clone_from(&master_id);
                    news
                });
                match master_id {
                    Some(id) if news => println!("  [election] {id} is the master now"),
                    None if news => println!("  [election] nobody is the master at the moment"),
                    _ => {}
                }
            }
            MasterEvent::BecameMaster { fence } => {
                println!(
                    "  [{me}] won the election (fencing token {}); reading ZooKeeper before assigning",
                    fence.token
                );
                self.rebuilding = Some(Vec::new());
                self.shared.with(|s| s.joined.clear());
            }
            MasterEvent::Rebuilt { workers, pending, assigned } => {
                let found = self.rebuilding.take().unwrap_or_default();
                let names = if found.is_empty() { String::new() } else { format!(" ({})", found.join(", ")) };
                println!(
                    "  [{me}] rebuilt its view from ZooKeeper: {workers} workers{names}, {pending} pending, {assigned} \
                     assigned"
                );
                self.shared.with(|s| s.rebuilt.push((me, workers, pending, assigned)));
            }
            MasterEvent::WorkerJoined { worker_id } => {
                self.shared.with(|s| s.joined.insert(worker_id.clone()));
                match &mut self.rebuilding {
                    Some(found) => found.push(worker_id),
                    None => println!("  [{me}] {worker_id} joined (workers/{worker_id} appeared)"),
                }
            }
            MasterEvent::WorkerLeft { worker_id } => {
                println!("  [{me}] {worker_id} left: its registration, an ephemeral node, is gone");
                self.shared.with(|s| s.left.insert(worker_id));
            }
            MasterEvent::Assigned { .. } => {}
            MasterEvent::Requeued { task_id, from_worker } => {
                let label = self.shared.label(&task_id);
                println!("  [{me}] put {label} back in the queue: {from_worker} left without finishing it");
            }
            MasterEvent::MastershipEnded { token } => println!("  [{me}] its term (fencing token {token}) ended"),
            MasterEvent::MasterFailed { error } => println!("  [{me}] cannot take part: {error}"),
            _ => {}
        }
    }
}

/// Tells what one worker reports, when it is out of the ordinary, and counts its results.
struct WorkerNarrator {
    name: &'static str,
    shared: Shared,
}

impl Actor for WorkerNarrator {
    type Context = Context<Self>;
}

impl Handler<WorkerEvent> for WorkerNarrator {
    type Result = ();

    fn handle(&mut self, event: WorkerEvent, _: &mut Context<Self>) {
        let me = self.name;
        if let WorkerEvent::TaskFinished { .. } = event {
            self.shared.with(|s| *s.finished_by.entry(me).or_default() += 1);
        }
        if !self.shared.tells(me) {
            return; // a dead process says nothing
        }
        match event {
            WorkerEvent::TaskFinished { .. } => {}
            WorkerEvent::RegistrationLost => println!("  [{me}] lost its registration with its session"),
            WorkerEvent::RegistrationFailed { error } => println!("  [{me}] cannot register yet: {error}"),
            WorkerEvent::Failed { error } => println!("  [{me}] gave up: {error}"),
            WorkerEvent::TaskDiscarded { task_id, reason } => {
                println!("  [{me}] ran {} but its result was not recorded: {reason:?}", self.shared.label(&task_id))
            }
            WorkerEvent::TaskAbandoned { task_id, reason } => {
                println!("  [{me}] gave up on {}: {reason}", self.shared.label(&task_id))
            }
            WorkerEvent::TaskReturned { task_id } => {
                println!("  [{me}] put {} back to run later", self.shared.label(&task_id))
            }
            WorkerEvent::TaskOutcomeUnknown { task_id } => {
                println!(
                    "  [{me}] ran {} but its session ended before the result was confirmed",
                    self.shared.label(&task_id)
                )
            }
            WorkerEvent::TaskFailed { task_id, error } => {
                println!("  [{me}] cannot record the result of {}: {error}", self.shared.label(&task_id))
            }
            WorkerEvent::Registered { .. } | WorkerEvent::TaskStarted { .. } | WorkerEvent::Stopped => {}
            _ => {}
        }
    }
}

/// One master candidate's "process".
struct Master {
    name: &'static str,
    session: SessionHandle,
    handle: TaskMasterHandle,
    /// Subscribing does not keep an actor alive: this address keeps the narrator.
    _narrator: Addr<MasterNarrator>,
}

/// One worker's "process".
struct Worker {
    name: &'static str,
    session: SessionHandle,
    handle: TaskWorkerHandle,
    runner: Addr<Runner>,
    /// Subscribing does not keep an actor alive: this address keeps the narrator.
    _narrator: Addr<WorkerNarrator>,
}

/// Where every participant connects: the same server, the run's own chroot.
struct Place {
    connect: String,
    chroot: String,
}

impl Place {
    fn session(&self, who: &str) -> Result<SessionHandle, String> {
        let config =
            SessionConfig::new(&self.connect).with_chroot(self.chroot.clone()).with_session_timeout(SESSION_TIMEOUT);
        SessionHandle::start(config).map_err(|e| format!("cannot start {who}'s session: {e}"))
    }

    fn master(&self, name: &'static str, shared: &Shared) -> Result<Master, String> {
        let session = self.session(name)?;
        let config = TaskMasterConfig::new(ROOT).with_master_id(name);
        let handle = TaskMasterHandle::start(session.clone(), config).map_err(|e| format!("{name}: {e}"))?;
        let narrator = MasterNarrator { name, shared: shared.clone(), rebuilding: None }.start();
        handle.subscribe(narrator.clone().recipient());
        Ok(Master { name, session, handle, _narrator: narrator })
    }

    fn worker(&self, name: &'static str, shared: &Shared) -> Result<Worker, String> {
        let session = self.session(name)?;
        let runner = Runner { worker: name, shared: shared.clone() }.start();
        let config = TaskWorkerConfig::new(ROOT, name, runner.clone().recipient()).with_concurrency(CONCURRENCY);
        let handle = TaskWorkerHandle::start(session.clone(), config).map_err(|e| format!("{name}: {e}"))?;
        let narrator = WorkerNarrator { name, shared: shared.clone() }.start();
        handle.subscribe(narrator.clone().recipient());
        Ok(Worker { name, session, handle, runner, _narrator: narrator })
    }
}

/// Waits until `done()` holds, checking every 20 ms, for at most [`STEP`].
async fn wait_until(what: &str, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + STEP;
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("gave up waiting for {what} after {STEP:?}"));
        }
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Which of `masters` is the master now (asks each for its current term).
async fn current_master(masters: &[Master]) -> Result<usize, String> {
    let deadline = Instant::now() + STEP;
    loop {
        for (i, master) in masters.iter().enumerate() {
            if let Ok(Some(_)) = master.handle.term().await {
                return Ok(i);
            }
        }
        if Instant::now() > deadline {
            return Err(format!("nobody became master within {STEP:?}"));
        }
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One status line, read from ZooKeeper (plus the results the client has received).
async fn print_status(client: &TaskClient, shared: &Shared) {
    match client.overview().await {
        Ok(now) => println!(
            "  [status] leader={} workers=[{}] pending={} assigned={} done={}/{TASKS}",
            now.master.as_deref().unwrap_or("none"),
            now.workers.join(", "),
            now.pending,
            now.assigned,
            shared.with(|s| s.done),
        ),
        Err(error) => println!("  [status] cannot read the overview right now: {error}"),
    }
}

fn main() -> ExitCode {
    println!("Master–worker demo: two masters, three workers and a client, each with a ZooKeeper");
    println!("session of its own, as if each were a separate process.");
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
    let external = matches!(zk, TestZooKeeper::External(_));
    let place = Place { connect: zk.connect_string(), chroot: unique_root("master-worker-demo") };
    println!("ZooKeeper is at {}. This run keeps its nodes under {}.", place.connect, place.chroot);

    let started = Instant::now();
    match actix::System::new().block_on(run(place, external)) {
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

async fn run(place: Place, external: bool) -> Result<(), String> {
    let shared = Shared::default();

    println!("\n1. Two masters stand for election: one is the master, the other waits to take over.");
    let mut masters = vec![place.master(MASTERS[0], &shared)?];
    current_master(&masters).await?;
    wait_until("the first master to rebuild its view", || shared.with(|s| !s.rebuilt.is_empty())).await?;
    masters.push(place.master(MASTERS[1], &shared)?);
    // Its election node joins the master's under master/.
    let candidates = masters[1].session.clone();
    let mut in_line = false;
    let deadline = Instant::now() + STEP;
    while !in_line && Instant::now() < deadline {
        actix_rt::time::sleep(Duration::from_millis(20)).await;
        in_line = candidates.children(&format!("{ROOT}/master")).await.is_ok_and(|c| c.names.len() == MASTERS.len());
    }
    if !in_line {
        return Err(format!("{} did not join the election within {STEP:?}", MASTERS[1]));
    }
    println!("  [{}] is in line behind it, waiting", MASTERS[1]);

    println!("\n2. Three workers register, each as an ephemeral node under workers/ that says it takes up to");
    println!("   {CONCURRENCY} tasks at a time.");
    let mut workers = Vec::new();
    for name in WORKERS {
        workers.push(place.worker(name, &shared)?);
    }
    wait_until("the master to see all three workers", || shared.with(|s| s.joined.len() == WORKERS.len())).await?;

    let client_session = place.session("the client")?;
    let client = TaskClient::new(client_session.clone(), ROOT).map_err(|e| format!("the client: {e}"))?;
    println!(
        "\n3. The client submits {TASKS} tasks, \"hello #01\" to \"hello #{TASKS:02}\"; a worker spends 150-300 ms"
    );
    println!("   on each and answers with the text in upper case. Every move is one transaction: the master");
    println!("   moves a task from tasks/ to assign/<worker>/, the worker writes the result to status/<task>");
    println!("   and removes the assignment.");
    let payloads: Vec<String> = (1..=TASKS).map(|i| format!("hello #{i:02}")).collect();
    // Every submission is sent before any reply is awaited.
    let submitted = join_all(payloads.iter().map(|p| client.submit(p.clone()))).await;
    let mut tasks = Vec::with_capacity(TASKS);
    for (payload, id) in payloads.into_iter().zip(submitted) {
        let id = id.map_err(|e| format!("cannot submit \"{payload}\": {e}"))?;
        let label = payload.trim_start_matches("hello ").to_owned();
        shared.with(|s| s.labels.insert(id.clone(), label));
        tasks.push((id, payload));
    }
    // The client waits for every result (a watch on each status node), counting them as they come.
    let waits: Vec<_> = tasks
        .iter()
        .map(|(id, _)| {
            let result = client.result(id, RESULT_WAIT);
            let shared = shared.clone();
            async move {
                let result = result.await;
                if result.is_ok() {
                    shared.with(|s| s.done += 1);
                }
                result
            }
        })
        .collect();
    let results = actix::spawn(join_all(waits));
    // A status line every second until the end.
    let ticker = {
        let (client, shared) = (client.clone(), shared.clone());
        actix::spawn(async move {
            loop {
                print_status(&client, &shared).await;
                actix_rt::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };

    let cast = Cast { masters: &masters, workers: &workers, client: &client, observer: &client_session, tasks: &tasks };
    let outcome = story(&place.connect, &shared, cast, results).await;
    ticker.abort();
    if let Err(problem) = outcome {
        if external {
            println!("\nThe nodes of this run are left under {} for inspection.", place.chroot);
        }
        return Err(problem);
    }

    println!("\nEveryone still standing stops; the run's nodes are removed.");
    shared.with(|s| s.quiet = true);
    for worker in workers.iter().filter(|w| !shared.crashed(w.name)) {
        let _ = actix_rt::time::timeout(STEP, worker.handle.stop()).await;
    }
    for master in masters.iter().filter(|m| !shared.crashed(m.name)) {
        let _ = actix_rt::time::timeout(STEP, master.handle.stop()).await;
    }
    // Sessions are closed only once the masters have left the election (and so ended their terms).
    let deadline = Instant::now() + STEP;
    while Instant::now() < deadline {
        match client_session.children(&format!("{ROOT}/master")).await {
            Ok(candidates) if !candidates.names.is_empty() => actix_rt::time::sleep(Duration::from_millis(20)).await,
            _ => break,
        }
    }
    for session in masters.iter().map(|m| &m.session).chain(workers.iter().map(|w| &w.session)) {
        session.close().await;
    }
    client_session.close().await;
    match SessionHandle::start(SessionConfig::new(&place.connect)) {
        Ok(admin) => {
            if let Err(error) = admin.delete_recursive(&place.chroot).await {
                println!("  (could not remove {}: {error})", place.chroot);
            }
            admin.close().await;
        }
        Err(error) => println!("  (could not remove {}: {error})", place.chroot),
    }
    println!("\nall {TASKS} tasks finished exactly once; results checked");
    Ok(())
}

/// Everyone taking part, and what was submitted.
struct Cast<'a> {
    masters: &'a [Master],
    workers: &'a [Worker],
    client: &'a TaskClient,
    /// The client's session, for reading the nodes directly.
    observer: &'a SessionHandle,
    /// Each task's id and payload.
    tasks: &'a [(TaskId, String)],
}

/// Steps 4 to 6: the worker's crash, the master's death, then every result checked.
async fn story(
    connect: &str,
    shared: &Shared,
    cast: Cast<'_>,
    results: actix_rt::task::JoinHandle<Vec<Result<Vec<u8>, TaskError>>>,
) -> Result<(), String> {
    let Cast { masters, workers, client, observer, tasks } = cast;
    wait_until(&format!("{CRASH_WORKER_AT} results"), || shared.with(|s| s.done >= CRASH_WORKER_AT)).await?;
    let doomed = workers.iter().find(|w| w.name == DOOMED_WORKER).ok_or("no such worker")?;
    let running = shared.running_on(DOOMED_WORKER);
    // What is assigned to it but not started yet (read from its assignment directory).
    let assigned = observer.children(&format!("{ROOT}/assign/{DOOMED_WORKER}")).await.map(|c| c.names);
    let mut waiting: Vec<String> = assigned
        .unwrap_or_default()
        .into_iter()
        .filter_map(|name| TaskId::parse(name).ok())
        .map(|id| shared.label(&id))
        .filter(|label| !running.contains(label))
        .collect();
    waiting.sort();
    let also = match waiting.as_slice() {
        [] => String::new(),
        [one] => format!(" ({one} is assigned to it too, not started yet)"),
        more => format!(" ({} are assigned to it too, not started yet)", and_list(more)),
    };
    match running.as_slice() {
        [] => println!("\n4. {DOOMED_WORKER} crashes between two tasks{also}."),
        running => println!("\n4. {DOOMED_WORKER} crashes in the middle of {}{also}.", and_list(running)),
    }
    println!("   Its ZooKeeper session ends with it (here it is closed; after a real crash the server ends it");
    println!(
        "   once {} s pass without a heartbeat), so ZooKeeper deletes workers/{DOOMED_WORKER}. The master",
        SESSION_TIMEOUT.as_secs()
    );
    println!("   sees that and puts the worker's unfinished tasks back in the queue for the others.");
    shared.with(|s| s.crashed.insert(DOOMED_WORKER));
    let closed = doomed.session.close();
    doomed.runner.do_send(Crash);
    closed.await;
    wait_until(&format!("the master to see {DOOMED_WORKER} leave"), || shared.with(|s| s.left.contains(DOOMED_WORKER)))
        .await?;
    actix_rt::time::sleep(Duration::from_millis(100)).await;
    print_status(client, shared).await;

    wait_until(&format!("{CRASH_MASTER_AT} results"), || shared.with(|s| s.done >= CRASH_MASTER_AT)).await?;
    let current = current_master(masters).await?;
    let (old, new) = (masters[current].name, masters[1 - current].name);
    println!("\n5. The master, {old}, dies another way: its session expires on the server, as ZooKeeper");
    println!("   does when a process stops answering (crash, long GC pause, network partition) for longer");
    println!("   than its session timeout. (The testkit expires it at once, then stops {old}'s actors so");
    println!("   that it does not come back.) Its election node goes with the session and {new}, next in");
    println!("   line, takes over. A new master trusts nobody's memory: it reads workers/, tasks/ and");
    println!("   assign/ before it assigns anything, and each of its writes is fenced by its election node.");
    let terms_before = shared.with(|s| s.rebuilt.len());
    let dying = &masters[current];
    let info = dying.session.session().await.ok_or_else(|| format!("{old} has no session to expire"))?.info;
    // From now on it is silent, as a dead process would be. (While the testkit takes the session
    // over, the two connections push each other off the server for a moment.)
    shared.with(|s| s.crashed.insert(old));
    expire_session(connect, &info).await.map_err(|e| format!("cannot expire {old}'s session: {e}"))?;
    // Otherwise it would build a new session and stand for election again.
    drop(dying.handle.stop()); // sent now; its end is not waited for
    let rebuilt = || shared.with(|s| s.rebuilt.iter().skip(terms_before).find(|r| r.0 == new).copied());
    wait_until(&format!("{new} to take over"), || rebuilt().is_some()).await?;
    let (who, w, p, a) = rebuilt().ok_or("no view rebuilt")?;
    println!("   {who} took over; it rebuilt its view from ZooKeeper: {w} workers, {p} pending, {a} assigned.");
    print_status(client, shared).await;

    println!("\n6. The client waits for every result and checks it.");
    let results = results.await.map_err(|e| format!("waiting for the results failed: {e}"))?;
    print_status(client, shared).await;
    let mut problems = Vec::new();
    for ((id, payload), result) in tasks.iter().zip(results) {
        let label = shared.label(id);
        match result {
            Ok(result) if result == payload.to_ascii_uppercase().into_bytes() => {}
            Ok(result) => problems.push(format!("{label} ({id}): wrong result {:?}", String::from_utf8_lossy(&result))),
            Err(error) => problems.push(format!("{label} ({id}): no result: {error}")),
        }
    }
    // Exactly once: each status node was written once (version 1); nothing waits or is assigned.
    for (id, _) in tasks {
        match observer.get_data(&format!("{ROOT}/status/{id}")).await {
            Ok(node) if node.stat.version == 1 => {}
            Ok(node) => problems.push(format!("{id}: its status was written {} times", node.stat.version)),
            Err(error) => problems.push(format!("{id}: cannot read its status: {error}")),
        }
    }
    let left = observer.children(&format!("{ROOT}/tasks")).await.map_err(|e| format!("cannot list tasks/: {e}"))?;
    if !left.names.is_empty() {
        problems.push(format!("{} tasks are still waiting in tasks/", left.names.len()));
    }
    let dirs = observer.children(&format!("{ROOT}/assign")).await.map_err(|e| format!("cannot list assign/: {e}"))?;
    for dir in dirs.names {
        match observer.children(&format!("{ROOT}/assign/{dir}")).await {
            Ok(assigned) if !assigned.names.is_empty() => {
                problems.push(format!("{} tasks are still assigned to {dir}", assigned.names.len()))
            }
            _ => {}
        }
    }
    if !problems.is_empty() {
        return Err(format!("{} problems:\n  {}", problems.len(), problems.join("\n  ")));
    }

    println!("  Every result is the payload in upper case, e.g. \"hello #01\" -> \"HELLO #01\".");
    println!("  Every status node is at version 1 (its result written once); tasks/ and assign/ are empty.");
    let (again, by_master, by_worker) = shared.with(|s| {
        let again: Vec<(String, Vec<(&'static str, Run)>)> =
            s.runs.iter().filter(|(_, runs)| runs.len() > 1).map(|(l, r)| (l.clone(), r.clone())).collect();
        (again, s.assigned_by.clone(), s.finished_by.clone())
    });
    for (label, runs) in &again {
        let told: Vec<String> = runs
            .iter()
            .map(|(who, run)| match run {
                Run::Killed => format!("{who} crashed during it"),
                Run::Answered => format!("{who} ran it"),
                Run::Running => format!("{who} is still running it"),
            })
            .collect();
        let times = if runs.len() == 2 { "twice".to_owned() } else { format!("{} times", runs.len()) };
        println!("  {label} was started {times}: {}; one result was recorded.", told.join(", then "));
    }
    let said = |counts: &BTreeMap<&str, usize>| {
        counts.iter().map(|(who, n)| format!("{who} {n}")).collect::<Vec<_>>().join(", ")
    };
    let requeued = shared.with(|s| s.requeued);
    println!("  Assignments made: {} ({TASKS} tasks + {requeued} put back).", said(&by_master));
    println!("  Results recorded: {}.", said(&by_worker));
    Ok(())
}
