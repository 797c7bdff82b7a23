//! W8: the distributed atomic long's increment against the raw protocol it makes (a read, then
//! a write at the version read), one at a time, and eight sessions incrementing one value.
//! One workload of the recipe benchmark (`main.rs`); the shared harness is `harness.rs`.

use actix_zookeeper::atomic::{AtomicLongConfig, DistributedAtomicLong, encode_long};
use actix_zookeeper::retry::RetryPolicy;
use zookeeper_client::{Acls, Client, CreateMode};

use super::harness::*;

pub(crate) const W8_INCREMENTS: usize = 1000;
pub(crate) const W8_WARMUP: usize = 200;
pub(crate) const W8_ROUNDS: usize = 5;
pub(crate) const W8_CLIENTS: usize = 8;

/// Tries enough for every contended increment to succeed.
fn patient() -> RetryPolicy {
    RetryPolicy::new(Duration::from_millis(1), Duration::from_millis(20)).with_max_attempts(100_000)
}

/// The raw increment: `getData`, then `setData` at the version read, again on a conflict.
async fn raw_increment(client: &Client, path: &str) {
    loop {
        let (data, stat) = client.get_data(path).await.expect("raw read");
        let value = i64::from_be_bytes(data.as_slice().try_into().expect("8 bytes"));
        match client.set_data(path, &encode_long(value + 1), Some(stat.version)).await {
            Ok(_) => return,
            Err(zookeeper_client::Error::BadVersion) => continue,
            Err(e) => panic!("raw write: {e}"),
        }
    }
}

/// Latencies of `n` sequential increments, ours (`value`) or raw (`client`).
async fn sequential(value: Option<&DistributedAtomicLong>, client: &Client, path: &str, n: usize) -> Vec<u128> {
    let mut latencies = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        match value {
            Some(value) => assert!(value.increment().await.expect("increment").succeeded),
            None => raw_increment(client, path).await,
        }
        latencies.push(micros(t));
    }
    latencies
}

/// Eight clients (ours or raw) increment one value `W8_INCREMENTS` times in all: increments/s.
async fn contended(connect: &str, root: &str, ours: bool) -> f64 {
    let path = "/contended";
    let tickets = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    let started = Instant::now();
    for _ in 0..W8_CLIENTS {
        let tickets = tickets.clone();
        if ours {
            let session = start_session(connect, root);
            let value = DistributedAtomicLong::new(session, AtomicLongConfig::new(path).with_retry(patient()));
            tasks.push(actix::spawn(async move {
                while tickets.fetch_add(1, Ordering::SeqCst) < W8_INCREMENTS {
                    assert!(value.increment().await.expect("increment").succeeded);
                }
            }));
        } else {
            let client = Client::connect(&format!("{connect}{root}")).await.expect("raw client");
            tasks.push(actix::spawn(async move {
                while tickets.fetch_add(1, Ordering::SeqCst) < W8_INCREMENTS {
                    raw_increment(&client, "/contended-raw").await;
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("increments");
    }
    per_second(W8_INCREMENTS, started.elapsed())
}

pub(crate) async fn w8(connect: &str) -> Vec<String> {
    let root = testkit::unique_root("bench-w8");
    eprintln!("W8: root {root}");
    let raw = raw_baseline(connect, &root).await;
    let client = Client::connect(&format!("{connect}{root}")).await.expect("raw client");
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    for path in ["/raw", "/contended-raw"] {
        client.create(path, &encode_long(0), &persistent).await.expect("raw value node");
    }
    let session = start_session(connect, &root);
    let value = DistributedAtomicLong::new(session, AtomicLongConfig::new("/ours"));
    sequential(Some(&value), &client, "/raw", W8_WARMUP).await;
    sequential(None, &client, "/raw", W8_WARMUP).await;

    let (mut ours, mut floor, mut ours_rates, mut floor_rates) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..W8_ROUNDS {
        eprintln!("W8: round {} of {W8_ROUNDS}", round + 1);
        // Alternate which goes first: the first of a pair has been seen to win.
        for first_ours in rotated([true, false], round) {
            let mut latencies = sequential(first_ours.then_some(&value), &client, "/raw", W8_INCREMENTS).await;
            let p50 = percentile(&mut latencies, 50.0) as f64;
            if first_ours {
                ours.push(p50)
            } else {
                floor.push(p50)
            }
            let rate = contended(connect, &root, first_ours).await;
            if first_ours { ours_rates.push(rate) } else { floor_rates.push(rate) }
        }
    }
    let ratios: Vec<f64> = ours.iter().zip(&floor).map(|(o, f)| o / f).collect();
    let rate_ratios: Vec<f64> = ours_rates.iter().zip(&floor_rates).map(|(o, f)| o / f).collect();
    let (_, ours_p50) = median(&ours);
    let (_, floor_p50) = median(&floor);
    let (_, ratio) = median(&ratios);
    let (_, rate_ratio) = median(&rate_ratios);
    let (_, ours_rate) = median(&ours_rates);
    let (_, floor_rate) = median(&floor_rates);
    vec![format!(
        "{{\"lib\":\"{LIB}\",\"workload\":\"W8\",\"increments\":{W8_INCREMENTS},\"rounds\":{W8_ROUNDS},\
         \"increment_p50_us\":{ours_p50:.0},\"raw_increment_p50_us\":{floor_p50:.0},\"zk_rtt_p50_us\":{},\
         \"ratio_to_raw\":{ratio:.2},\"ratio_rounds\":{},\"clients\":{W8_CLIENTS},\
         \"contended_per_s\":{ours_rate:.1},\"raw_contended_per_s\":{floor_rate:.1},\
         \"contended_ratio_to_raw\":{rate_ratio:.2},\"contended_ratio_rounds\":{}}}",
        raw.rtt_p50,
        rates(&ratios),
        rates(&rate_ratios),
    )]
}
