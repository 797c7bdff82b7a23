//! A producer queues 20 jobs; a consumer feeds them to three worker actors. One worker crashes
//! in the middle of a job, and that job is handed to another worker. Printed in plain words.
//!
//! Run with `cargo run --features testkit --example queue_workers` (starts a local ZooKeeper
//! unless `ZK_CONNECT` is set). Each job stays in the queue until a worker acks it: a job whose
//! worker stops without acking is delivered again (the consumer checks on its workers every
//! half second). It checks that every job was finished exactly once and the crashed job was
//! delivered again, and exits non-zero otherwise.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::{ConsumerConfig, Delivery, Queue, QueueConsumerHandle, Revoked, Worker};
use actix_zookeeper::testkit::TestZooKeeper;
use support::check;

const JOBS: usize = 20;
/// How long one job takes.
const WORK: Duration = Duration::from_millis(100);

/// Who did what, per job: the attempts that started, and who finished it.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<BTreeMap<usize, JobLog>>>);

#[derive(Default)]
struct JobLog {
    started: Vec<(&'static str, u32)>,
    finished_by: Vec<&'static str>,
}

impl Log {
    fn update<T>(&self, job: &str, f: impl FnOnce(&mut JobLog) -> T) -> T {
        let number = job.trim_start_matches("job-").parse().unwrap_or(0);
        f(self.0.lock().expect("log").entry(number).or_default())
    }

    fn finished(&self) -> usize {
        self.0.lock().expect("log").values().filter(|j| !j.finished_by.is_empty()).count()
    }
}

/// A worker actor: works on a job for a while, then acks it. `crash_on` makes it stop
/// (without acking) in the middle of its n-th job.
struct JobWorker {
    name: &'static str,
    crash_on: Option<usize>,
    jobs_taken: usize,
    log: Log,
}

impl Actor for JobWorker {
    type Context = Context<Self>;
}

impl Handler<Delivery> for JobWorker {
    type Result = ();

    fn handle(&mut self, delivery: Delivery, ctx: &mut Context<Self>) {
        let (name, attempt) = (self.name, delivery.attempt);
        let job = String::from_utf8_lossy(&delivery.data).into_owned();
        self.jobs_taken += 1;
        let before = self.log.update(&job, |j| {
            let before = j.started.last().map(|(who, _)| *who);
            j.started.push((name, attempt));
            before
        });
        match before {
            Some(before) => println!(
                "  {name} is working on {job} (attempt {attempt}) <- delivered again: {before} never finished it"
            ),
            None => println!("  {name} is working on {job} (attempt {attempt})"),
        }
        if self.crash_on == Some(self.jobs_taken) {
            ctx.run_later(WORK / 2, move |_, ctx| {
                println!("  {name} crashes while working on {job}!");
                ctx.stop(); // no ack: the job stays in the queue
            });
            return;
        }
        let log = self.log.clone();
        ctx.spawn(
            async move {
                actix_rt::time::sleep(WORK).await;
                match delivery.ack().await {
                    Ok(()) => {
                        log.update(&job, |j| j.finished_by.push(name));
                        println!("  {name} finished {job}");
                    }
                    Err(error) => println!("  {name} could not ack {job}: {error}"),
                }
            }
            .into_actor(self),
        );
    }
}

impl Handler<Revoked> for JobWorker {
    type Result = ();

    fn handle(&mut self, revoked: Revoked, _: &mut Context<Self>) {
        println!("  {}: {} was taken back (the consumer's session ended)", self.name, revoked.id);
    }
}

/// What happened to each job, in a few lines, and the checks of it.
fn summary(log: &Log, left: usize) -> Result<(), Box<dyn std::error::Error>> {
    println!("\nSummary:");
    let log = log.0.lock().expect("log");
    let once = log.values().filter(|j| j.finished_by.len() == 1).count();
    println!("  {once} of {JOBS} jobs were finished exactly once.");
    for (number, job) in log.iter().filter(|(_, j)| j.started.len() > 1) {
        let tries: Vec<String> = job.started.iter().map(|(who, n)| format!("attempt {n} by {who}")).collect();
        println!("  job-{number} was done again: {}; finished by {}.", tries.join(", "), job.finished_by.join(", "));
    }
    for (number, job) in log.iter().filter(|(_, j)| j.finished_by.len() != 1) {
        println!("  job-{number} was finished {} times!", job.finished_by.len());
    }
    println!("  Jobs left in the queue: {left}.");

    println!("\nChecks:");
    check(log.len() == JOBS && once == JOBS, "every job was finished exactly once")?;
    let redone = log.values().filter(|j| j.started.len() > 1).collect::<Vec<_>>();
    check(
        redone.len() == 1 && redone[0].started.iter().any(|(who, _)| *who == "worker-C"),
        "exactly one job was done again: the one worker-C crashed on",
    )?;
    check(redone[0].started.last().is_some_and(|(_, attempt)| *attempt == 2), "it came back as attempt 2")?;
    check(left == 0, "the queue is empty")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let zk = TestZooKeeper::from_env()?;
    let connect = zk.connect_string();
    println!("ZooKeeper is at {connect}.");
    actix::System::new().block_on(async move {
        let session = SessionHandle::start(SessionConfig::new(&connect).with_chroot("/actix-zookeeper-queue-demo"))?;
        session.delete_recursive("/jobs").await?;
        let queue = Queue::new(session.clone(), "/jobs");

        println!("\nThe producer puts {JOBS} jobs in the queue /jobs, all at once.");
        let jobs: Vec<Vec<u8>> = (1..=JOBS).map(|i| format!("job-{i}").into_bytes()).collect();
        queue.put_all(jobs).await?;
        println!("  {} jobs are waiting.", queue.len().await?);

        println!("\nThree workers start; worker-C will crash on its 2nd job.");
        let log = Log::default();
        let mut config = ConsumerConfig::new("/jobs").with_concurrency(3);
        for (name, crash_on) in [("worker-A", None), ("worker-B", None), ("worker-C", Some(2))] {
            let worker = JobWorker { name, crash_on, jobs_taken: 0, log: log.clone() }.start();
            config = config.with_worker(Worker::new(&worker));
        }
        let consumer = QueueConsumerHandle::start(session.clone(), config)?;

        let deadline = Instant::now() + Duration::from_secs(30);
        while log.finished() < JOBS && Instant::now() < deadline {
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }

        consumer.stop().await;
        let left = queue.len().await?;
        session.close().await;
        summary(&log, left)
    })
}
