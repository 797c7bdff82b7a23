//! The same-run yardstick of W1 and W2: `zookeeper-client`'s own lock
//! (`Client::lock` with Curator's prefix), released by an awaited delete. Owns only the
//! measurement; which workload reports it, and how, is the workload's business.

use zookeeper_client::{Acls, Client, CreateMode, LockOptions, LockPrefix};

use super::harness::*;

/// A measured run of the bare lock.
pub(crate) struct BareRun {
    pub(crate) acq_per_s: f64,
    /// This process's CPU time per acquisition while the measured acquisitions ran.
    pub(crate) cpu_us_per_acq: f64,
}

/// The bare lock's rate: `clients` clients (one session each) take turns on one lock,
/// `acquisitions` in all, after `warmup` acquisitions that are not counted. Each acquisition is
/// `Client::lock` (protected create, then wait for the predecessor), then the node's delete,
/// awaited (the `LockClient` is forgotten so that its drop does not delete a second time in the
/// background).
pub(crate) async fn run(
    connect: &str,
    dir: &str,
    clients: usize,
    warmup: usize,
    acquisitions: usize,
    thread: ClientThread,
) -> BareRun {
    let mut sessions = Vec::with_capacity(clients);
    for _ in 0..clients {
        sessions.push(Arc::new(connect_on(connect, thread).await));
    }
    for _ in 0..warmup {
        cycle(&sessions[0], dir).await;
    }
    let tickets = Arc::new(AtomicUsize::new(0));
    let cpu = cpu_us();
    let started = Instant::now();
    let loops: Vec<_> = sessions
        .iter()
        .cloned()
        .map(|client| {
            let (tickets, dir) = (tickets.clone(), dir.to_owned());
            actix::spawn(async move {
                while tickets.fetch_add(1, Ordering::SeqCst) < acquisitions {
                    cycle(&client, &dir).await;
                }
            })
        })
        .collect();
    for handle in loops {
        handle.await.expect("bare lock loop");
    }
    let elapsed = started.elapsed();
    BareRun {
        acq_per_s: per_second(acquisitions, elapsed),
        cpu_us_per_acq: (cpu_us() - cpu) as f64 / acquisitions as f64,
    }
}

/// Where a bare client's connection (its background task) runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ClientThread {
    /// On the caller's thread, as a program using the bare client does.
    Caller,
    /// On an Arbiter of its own, as this crate's sessions do: every request and reply then
    /// crosses threads, as ours do (an explanation of W1, not a yardstick to beat).
    OwnArbiter,
}

async fn connect_on(connect: &str, thread: ClientThread) -> Client {
    match thread {
        ClientThread::Caller => Client::connect(connect).await.expect("bare client connects"),
        // The Arbiter's thread lives on after its handle is dropped, with the client's task.
        ClientThread::OwnArbiter => connect_on_arbiter(connect, &actix::Arbiter::new().handle()).await,
    }
}

async fn cycle(client: &Client, dir: &str) {
    let prefix = LockPrefix::new_curator(dir, "lock-").expect("a Curator prefix");
    let parents = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let options = LockOptions::new(Acls::anyone_all()).with_ancestor_options(parents).expect("ancestor options");
    let lock = client.lock(prefix, b"", options).await.expect("bare lock acquired");
    client.delete(lock.lock_path(), None).await.expect("bare lock released");
    std::mem::forget(lock);
}
