//! An actix-web service coordinated through ZooKeeper, the way most actix programs would use the
//! crate: a leader-only periodic job, a queue consumer, and HTTP endpoints that say how the
//! coordination stands:
//!
//! - `GET /healthz`: the session's state; `503` while it is suspended (the connection is lost
//!   and the session may or may not live), so a load balancer stops sending work;
//! - `GET /leader`: who leads the job's election, whether we do, and our term (fencing token);
//!   `503` at once while the session is cut off (we do not act as leader then);
//! - `GET /locks/{name}`: who holds `/locks/{name}` and who waits, as the inspector reads it.
//!
//! Run with `cargo run --all-features --example web_service` (starts a local ZooKeeper unless
//! `ZK_CONNECT` is set). The example checks itself: it calls its own endpoints over real HTTP,
//! cuts its own connection to ZooKeeper (through a proxy) to see `/healthz` turn 503 and back,
//! and exits non-zero on a wrong answer.

mod support;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_web::{App, HttpResponse, HttpServer, web};
use actix_zookeeper::election::{ElectionConfig, ElectionEvent, ElectionHandle, FencingToken, LeaderTerm, StopLeading};
use actix_zookeeper::lock::{LockConfig, LockHandle};
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::{ConsumerConfig, Delivery, Queue, Revoked, Worker};
use actix_zookeeper::testkit::{ClientLinks, TestZooKeeper};
use futures::StreamExt;
use serde_json::json;
use support::check;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ROOT: &str = "/actix-zookeeper-web-demo";
const ID: &str = "web-1";

/// What the session's events say, for `/healthz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    Connecting,
    Connected,
    Suspended,
    /// The session expired; a new one is being built (its ephemerals, our lock and our
    /// leadership, are gone).
    Rebuilding,
    Closed,
}

/// What the handlers share (one clone per actix-web worker).
#[derive(Clone)]
struct State {
    session: SessionHandle,
    election: ElectionHandle,
    health: Arc<Mutex<Health>>,
    /// Our term while we lead.
    term: Arc<Mutex<Option<FencingToken>>>,
    job_runs: Arc<AtomicU64>,
}

async fn healthz(state: web::Data<State>) -> HttpResponse {
    let health = *state.health.lock().expect("health");
    let body = json!({ "session": format!("{health:?}").to_lowercase() });
    match health {
        Health::Connected => HttpResponse::Ok().json(body),
        _ => HttpResponse::ServiceUnavailable().json(body),
    }
}

async fn leader(state: web::Data<State>) -> HttpResponse {
    let term = *state.term.lock().expect("term");
    let runs = state.job_runs.load(Ordering::SeqCst);
    // Cut off, asking ZooKeeper who leads would wait for the session (up to its request
    // timeout): answer at once with what we know, that we do not act as leader.
    let health = *state.health.lock().expect("health");
    if health != Health::Connected {
        let session = format!("{health:?}").to_lowercase();
        let body = json!({ "leader": null, "we_lead": term.is_some(), "job_runs": runs, "session": session });
        return HttpResponse::ServiceUnavailable().json(body);
    }
    match state.election.leader().await {
        Ok(leader) => HttpResponse::Ok().json(json!({
            "leader": leader,
            "we_lead": term.is_some(),
            "our_term": term.map(|t| t.to_string()),
            "job_runs": runs,
        })),
        Err(error) => HttpResponse::ServiceUnavailable().json(json!({ "error": error.to_string() })),
    }
}

async fn locks(state: web::Data<State>, name: web::Path<String>) -> HttpResponse {
    let path = format!("/locks/{}", name.into_inner());
    if let Err(error) = actix_zookeeper::path::validate(&path, false) {
        return HttpResponse::BadRequest().json(json!({ "error": error.to_string() }));
    }
    // A lock nobody ever took is one nobody holds: an empty line, as the inspector reads it.
    match actix_zookeeper::inspect::locks(&state.session, &path).await {
        Ok(report) => HttpResponse::Ok().json(report),
        Err(error) => HttpResponse::ServiceUnavailable().json(json!({ "error": error.to_string() })),
    }
}

/// The leader-only job: runs while, and only while, our participant leads.
struct Job {
    term: LeaderTerm,
    runs: Arc<AtomicU64>,
}

impl Actor for Job {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        println!("  leader job started (term {})", self.term.token);
        ctx.run_interval(Duration::from_millis(100), |act, _| {
            act.runs.fetch_add(1, Ordering::SeqCst);
        });
    }
}

impl Handler<StopLeading> for Job {
    type Result = ();

    fn handle(&mut self, _: StopLeading, ctx: &mut Context<Self>) {
        println!("  leader job stopped");
        ctx.stop();
    }
}

/// The queue's worker: acknowledges every item once it has done it.
struct Orders {
    done: Arc<AtomicUsize>,
}

impl Actor for Orders {
    type Context = Context<Self>;
}

impl Handler<Delivery> for Orders {
    type Result = ();

    fn handle(&mut self, delivery: Delivery, ctx: &mut Context<Self>) {
        let done = self.done.clone();
        ctx.spawn(
            async move {
                if delivery.ack().await.is_ok() {
                    done.fetch_add(1, Ordering::SeqCst);
                }
            }
            .into_actor(self),
        );
    }
}

impl Handler<Revoked> for Orders {
    type Result = ();

    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {}
}

/// One HTTP/1.1 request over a fresh connection: the status code and the body.
async fn get(port: u16, path: &str) -> Result<(u16, serde_json::Value), Box<dyn std::error::Error>> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8(raw)?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no HTTP header")?;
    let status = head.split_whitespace().nth(1).ok_or("no status")?.parse()?;
    Ok((status, serde_json::from_str(body)?))
}

/// Asks `path` until `accept` holds (the service's state follows ZooKeeper's a moment later).
async fn until(
    port: u16,
    path: &str,
    what: &str,
    accept: impl Fn(u16, &serde_json::Value) -> bool,
) -> Result<(u16, serde_json::Value), Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = get(port, path).await?;
        if accept(status, &body) {
            println!("  GET {path} -> {status} {body}");
            return Ok((status, body));
        }
        if Instant::now() > deadline {
            return Err(format!("{what}: GET {path} still answers {status} {body}").into());
        }
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let zk = TestZooKeeper::from_env()?;
    println!("ZooKeeper is at {}.", zk.connect_string());
    // The service reaches ZooKeeper through a proxy, so that the example can cut it off.
    let links = ClientLinks::to(zk.connect_string().split(','))?;
    actix::System::new().block_on(async move {
        let session = SessionHandle::start(
            SessionConfig::new(links.connect_string()).with_chroot(ROOT).with_session_timeout(Duration::from_secs(4)),
        )?;
        let health = Arc::new(Mutex::new(Health::Connecting));
        let mut events = session.events();
        let watched = health.clone();
        actix_rt::spawn(async move {
            while let Some(event) = events.next().await {
                let now = match event {
                    Ok(SessionEvent::Connected { .. } | SessionEvent::Reconnected { .. }) => Health::Connected,
                    Ok(SessionEvent::Suspended { .. }) => Health::Suspended,
                    Ok(SessionEvent::Expired { .. }) => Health::Rebuilding,
                    Ok(SessionEvent::Closed | SessionEvent::AuthFailed) => Health::Closed,
                    _ => continue,
                };
                *watched.lock().expect("health") = now;
            }
        });
        // Connected before we subscribed: the stream starts after that.
        if session.session().await.is_some() {
            let mut health = health.lock().expect("health");
            if *health == Health::Connecting {
                *health = Health::Connected;
            }
        }

        println!("\nThe service joins the election for its periodic job, and consumes /orders.");
        let job_runs = Arc::new(AtomicU64::new(0));
        let runs = job_runs.clone();
        let election = ElectionHandle::start(
            session.clone(),
            ElectionConfig::new("/jobs/cleanup/leader")
                .with_participant_id(ID)
                .with_leader_actor(move |term| Job { term, runs: runs.clone() }),
        )?;
        let term = Arc::new(Mutex::new(None));
        let mut elected = election.events();
        let ours = term.clone();
        actix_rt::spawn(async move {
            while let Some(event) = elected.next().await {
                // Suspended (the connection is lost, the default policy stops the job) is not
                // leading; restored is again, with the same term.
                match event {
                    Ok(ElectionEvent::LeadershipAcquired { token } | ElectionEvent::LeadershipRestored { token }) => {
                        *ours.lock().expect("term") = Some(token)
                    }
                    Ok(ElectionEvent::LeadershipSuspended { .. } | ElectionEvent::LeadershipLost { .. }) => {
                        *ours.lock().expect("term") = None
                    }
                    _ => {}
                }
            }
        });
        let done = Arc::new(AtomicUsize::new(0));
        let orders = Orders { done: done.clone() }.start();
        let consumer = QueueConsumerHandle::start(
            session.clone(),
            ConsumerConfig::new("/orders").with_worker(Worker::new(&orders)),
        )?;
        let lock = LockHandle::start(session.clone(), LockConfig::new("/locks/report").with_participant_id(ID))?;

        let state = State { session: session.clone(), election: election.clone(), health, term, job_runs };
        let server = HttpServer::new(move || {
            App::new()
                .app_data(web::Data::new(state.clone()))
                .route("/healthz", web::get().to(healthz))
                .route("/leader", web::get().to(leader))
                .route("/locks/{name}", web::get().to(locks))
        })
        .workers(1)
        .bind(("127.0.0.1", 0))?;
        let port = server.addrs()[0].port();
        let server = server.run();
        let stop = server.handle();
        // The clean shutdown, in one line. actix-web keeps its own signal handling: on Ctrl-C or
        // SIGTERM it stops accepting, finishes what is in flight, and its server future ends.
        // `close_after` then closes the session, the recipes letting go first (the election
        // resigns, the lock releases), before `main` returns: the System's end would stop the
        // session's thread with it, and the election node would stay until the session expired.
        let shutdown = actix_rt::spawn(session.close_after(server));
        println!("  listening on http://127.0.0.1:{port}");

        println!("\nThe service is healthy once its session is up, and leads (it is alone).");
        until(port, "/healthz", "healthy", |status, _| status == 200).await?;
        let (_, led) =
            until(port, "/leader", "leading", |_, b| b["we_lead"] == true && b["job_runs"].as_u64() > Some(2)).await?;
        check(led["leader"] == ID, "/leader names us as the leader, with our term")?;
        check(led["our_term"].as_str().is_some_and(|t| t.starts_with("0x")), "our term is a fencing token")?;

        println!("\nWe take the report lock; /locks/report shows us holding it.");
        let grant = lock.acquire(Some(Duration::from_secs(10))).await?;
        let members = |b: &serde_json::Value| b["members"].as_array().cloned().unwrap_or_default();
        let (_, report) = until(port, "/locks/report", "holding", |s, b| s == 200 && !members(b).is_empty()).await?;
        let holder = &members(&report)[0];
        check(
            holder["holds"] == true && holder["participant"] == ID && holder["token"] == grant.token.0,
            "the lock's holder is us, with our grant's token",
        )?;
        lock.release().await?;
        until(port, "/locks/report", "released", |s, b| s == 200 && members(b).is_empty()).await?;
        let (status, body) = get(port, "/locks/never-taken").await?;
        check(status == 200 && members(&body).is_empty(), "a lock nobody took has nobody in line")?;

        println!("\nFive orders are queued; the consumer works them off.");
        let queue = Queue::new(session.clone(), "/orders");
        for i in 0..5 {
            queue.put(format!("order-{i}")).await?;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while done.load(Ordering::SeqCst) < 5 && Instant::now() < deadline {
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }
        check(done.load(Ordering::SeqCst) == 5, "every order was done and acknowledged")?;
        check(queue.len().await? == 0, "the queue is empty")?;

        println!("\nThe connection to ZooKeeper is cut: /healthz answers 503 until it is back.");
        links.blackhole();
        until(port, "/healthz", "suspended", |status, b| status == 503 && b["session"] == "suspended").await?;
        // The election hears of the cut a moment after the session does.
        let (status, cut) = until(port, "/leader", "not leading while cut off", |_, b| b["we_lead"] == false).await?;
        check(status == 503, "while cut off /leader answers 503 at once, and we do not claim to lead")?;
        let runs_before = cut["job_runs"].as_u64().unwrap_or(0);
        links.heal();
        until(port, "/healthz", "healthy again", |status, _| status == 200).await?;
        until(port, "/leader", "leading again, the job running", |_, b| {
            b["we_lead"] == true && b["job_runs"].as_u64().is_some_and(|runs| runs > runs_before + 2)
        })
        .await?;

        println!("\nShutting down as on Ctrl-C: the HTTP server stops, then the session lets go and closes.");
        drop(consumer);
        stop.stop(true).await;
        shutdown.await.map_err(|e| format!("the shutdown task: {e}"))??;
        let after = SessionHandle::start(SessionConfig::new(zk.connect_string()).with_chroot(ROOT))?;
        let left = after.children("/jobs/cleanup/leader").await.map(|c| c.names).unwrap_or_default();
        check(left.is_empty(), "the election node went with the goodbyes, not with a session expiry")?;
        after.close().await;
        drop(election);
        Ok(())
    })
}
