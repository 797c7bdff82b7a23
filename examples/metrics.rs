//! Serves this crate's metrics in Prometheus's text format while a lock and a queue work.
//!
//! Run with `cargo run --features testkit,metrics --example metrics` (starts a local ZooKeeper
//! unless `ZK_CONNECT` is set). The recorder is `metrics-exporter-prometheus` with its HTTP
//! listener; the example scrapes its own endpoint once, like Prometheus would, prints the
//! series this crate recorded, and exits non-zero if the ones it caused are missing. Every name
//! is explained in `docs/metrics.md`.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

use actix::prelude::*;
use actix_zookeeper::lock::{LockConfig, LockHandle};
use actix_zookeeper::prelude::*;
use actix_zookeeper::queue::{ConsumerConfig, Delivery, Queue, QueueConsumerHandle, Revoked, Worker};
use actix_zookeeper::testkit::TestZooKeeper;
use metrics_exporter_prometheus::PrometheusBuilder;
use support::check;

/// Acks every item it is given.
struct Acker;

impl Actor for Acker {
    type Context = Context<Self>;
}

impl Handler<Delivery> for Acker {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, delivery: Delivery, _: &mut Context<Self>) -> Self::Result {
        Box::pin(async move {
            let _ = delivery.ack().await;
        })
    }
}

impl Handler<Revoked> for Acker {
    type Result = ();

    fn handle(&mut self, _: Revoked, _: &mut Context<Self>) {}
}

/// What Prometheus would get from `addr`.
fn scrape(addr: SocketAddr) -> Result<String, Box<dyn std::error::Error>> {
    let mut stream = TcpStream::connect(addr)?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let zk = TestZooKeeper::from_env()?;
    let connect = zk.connect_string();
    // A free port for the endpoint.
    let addr = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    PrometheusBuilder::new().with_http_listener(addr).install()?;
    println!("ZooKeeper is at {connect}; metrics at http://{addr}/metrics");

    actix::System::new().block_on(async move {
        let session = SessionHandle::start(SessionConfig::new(&connect).with_chroot("/actix-zookeeper-metrics-demo"))?;
        session.connected().await?;

        let lock = LockHandle::start(session.clone(), LockConfig::new("/locks/report"))?;
        for _ in 0..3 {
            let _grant = lock.acquire(None).await?;
            lock.release().await?;
        }

        let acker = Acker.start();
        let _consumer =
            QueueConsumerHandle::start(session.clone(), ConsumerConfig::new("/jobs").with_worker(Worker::new(&acker)))?;
        let queue = Queue::new(session.clone(), "/jobs");
        for i in 0..5 {
            queue.put(format!("job {i}")).await?;
        }
        // Give the consumer a moment to work through them.
        for _ in 0..100 {
            if scrape(addr)?.contains("zk_queue_items_total{path=\"/jobs\",event=\"acked\"} 5") {
                break;
            }
            actix_rt::time::sleep(std::time::Duration::from_millis(50)).await;
        }

        let body = scrape(addr)?;
        println!("\nWhat this crate recorded (the zk_ lines of the scrape):");
        for line in body.lines().filter(|l| l.starts_with("zk_") && !l.contains("quantile")) {
            println!("  {line}");
        }
        session.close().await;

        println!("\nChecks:");
        check(body.contains("zk_grants_total{recipe=\"lock\",path=\"/locks/report\"} 3"), "three lock grants counted")?;
        check(
            body.contains("zk_grant_ends_total{recipe=\"lock\",path=\"/locks/report\",how=\"released\"} 3"),
            "three releases counted",
        )?;
        check(body.contains("zk_grant_hold_seconds"), "hold times recorded")?;
        check(body.contains("zk_queue_items_total{path=\"/jobs\",event=\"delivered\"} 5"), "five deliveries counted")?;
        check(body.contains("zk_queue_items_total{path=\"/jobs\",event=\"acked\"} 5"), "five acks counted")?;
        check(body.contains("zk_request_duration_seconds"), "request latencies recorded")?;
        Ok(())
    })
}
