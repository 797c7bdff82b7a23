//! The protocol's floor for W1 and W2: the fewest requests and round trips a Curator-compatible
//! lock can make, by a bare client with its connection on the caller's thread — no actor, no
//! thread of its own, no own-node watch, no fault handling. Not a lock anyone should use; it
//! answers "how fast could any design on this client and server be?", so that a target above it
//! shows as unreachable in the same run rather than as a defect of ours.
//!
//! A cycle: the protected create and the listing sent together (one round trip); first in line
//! is granted; otherwise an `exists` watch on the node ahead, and when that goes, granted at once
//! if it was first in line at the last listing (nothing can be created ahead of it) or held the
//! lock in this process (as `recipe/known_heads.rs` does), else listed again. The release is an
//! awaited delete.
//!
//! [`Floor::Safe`] adds the one request a lock needs to stay exclusive when someone else deletes
//! a waiter's node: a data watch on the waiter's own node, sent with its first watch on the node
//! ahead (as `recipe/contender.rs` step 4 does). Without it, a waiter whose node was deleted
//! meanwhile would take the grant beside the waiter behind it. Curator pays for the same case
//! with a listing after every wake. An uncontended cycle never waits, so W1 has one floor.
//!
//! [`Placement::ThreadEach`] runs each client, its connection and its loop, on a thread of its
//! own, as W2's eight contenders would run in eight processes, and as our sessions run. It asks
//! whether one thread serving every client is what makes the floor fast: it is not (session 14
//! in `docs/performance.md`).
//!
//! [`Placement::ActorEach`] adds an actix actor on each of those threads, running the protocol
//! for its loop's acquire and release messages, as our lock actor and its caller run on the
//! session's thread: the bound of any lock with an actor per client, with none of our session,
//! contender or watch delivery in it.

use std::collections::HashSet;

use actix::{Actor, ActorFutureExt, Context, Handler, Message, ResponseActFuture, ResponseFuture, WrapFuture};
use zookeeper_client::{Acls, Client, CreateMode, OneshotWatcher};

use super::harness::*;

/// Which floor: the fewest requests, or the fewest with which a waiter also hears its own node go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Floor {
    /// 4 requests per contended acquisition: create, listing, watch ahead, delete.
    Fewest,
    /// 5: a waiter also watches its own node.
    Safe,
}

/// Where the clients run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// All of them, connections and loops, on the caller's thread.
    Caller,
    /// Each with its connection and its loop on an Arbiter of its own.
    ThreadEach,
    /// As `ThreadEach`, with an actix actor on each thread that runs the protocol for the loop's
    /// `acquire` and `release` messages, as our lock actor runs on its session's thread: what an
    /// actor per client costs, without anything of ours.
    ActorEach,
}

/// `clients` clients (one session each, placed by `placement`) take turns on one lock,
/// `acquisitions` in all, after `warmup` uncounted acquisitions; returns acquisitions per second.
pub(crate) async fn run(
    connect: &str,
    dir: &str,
    clients: usize,
    warmup: usize,
    acquisitions: usize,
    floor: Floor,
    placement: Placement,
) -> f64 {
    let threads: Vec<actix::Arbiter> = match placement {
        Placement::Caller => Vec::new(),
        Placement::ThreadEach | Placement::ActorEach => (0..clients).map(|_| actix::Arbiter::new()).collect(),
    };
    let mut sessions = Vec::with_capacity(clients);
    for i in 0..clients {
        let client = match threads.get(i) {
            None => Client::connect(connect).await.expect("floor client connects"),
            Some(thread) => connect_on_arbiter(connect, &thread.handle()).await,
        };
        sessions.push(Arc::new(client));
    }
    ensure_dir(&sessions[0], dir).await;
    // Nodes that held the lock in this process.
    let heads = Arc::new(Mutex::new(HashSet::new()));
    for _ in 0..warmup {
        cycle(&sessions[0], dir, 0, &heads, floor).await;
    }
    let tickets = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let loops: Vec<_> = sessions
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, client)| {
            let (tickets, dir, heads) = (tickets.clone(), dir.to_owned(), heads.clone());
            let (done, finished) = futures::channel::oneshot::channel();
            let run = async move {
                if placement == Placement::ActorEach {
                    let actor = FloorActor { client, dir, id: i, heads, floor, held: None }.start();
                    while tickets.fetch_add(1, Ordering::SeqCst) < acquisitions {
                        actor.send(FloorAcquire).await.expect("floor actor alive");
                        actor.send(FloorRelease).await.expect("floor actor alive");
                    }
                } else {
                    while tickets.fetch_add(1, Ordering::SeqCst) < acquisitions {
                        cycle(&client, &dir, i, &heads, floor).await;
                    }
                }
                let _ = done.send(());
            };
            match threads.get(i) {
                None => drop(actix::spawn(run)),
                Some(thread) => {
                    thread.spawn(run);
                }
            }
            finished
        })
        .collect();
    for finished in loops {
        finished.await.expect("floor lock loop");
    }
    let rate = per_second(acquisitions, started.elapsed());
    drop(sessions);
    for thread in threads {
        thread.stop();
    }
    rate
}

async fn ensure_dir(client: &Client, dir: &str) {
    let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let mut path = String::new();
    for part in dir.split('/').filter(|p| !p.is_empty()) {
        path.push('/');
        path.push_str(part);
        match client.create(&path, b"", &options).await {
            Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
            Err(e) => panic!("floor lock: create {path}: {e}"),
        }
    }
}

/// The sequence number of a lock node's name (its last ten digits).
fn sequence(name: &str) -> u64 {
    name[name.len() - 10..].parse().expect("a sequential name")
}

/// [`Placement::ActorEach`]'s actor: one client's floor lock behind `acquire`/`release` messages.
struct FloorActor {
    client: Arc<Client>,
    dir: String,
    id: usize,
    heads: Arc<Mutex<HashSet<String>>>,
    floor: Floor,
    /// The node held, with the waiter's own-node watch kept until the release.
    held: Option<(String, Option<OneshotWatcher>)>,
}

impl Actor for FloorActor {
    type Context = Context<Self>;
}

#[derive(Message)]
#[rtype(result = "()")]
struct FloorAcquire;

#[derive(Message)]
#[rtype(result = "()")]
struct FloorRelease;

impl Handler<FloorAcquire> for FloorActor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, _: FloorAcquire, _: &mut Context<Self>) -> Self::Result {
        let (client, dir, heads) = (self.client.clone(), self.dir.clone(), self.heads.clone());
        let (id, floor) = (self.id, self.floor);
        let acquired = async move { acquire(&client, &dir, id, &heads, floor).await };
        Box::pin(acquired.into_actor(self).map(|held, act, _| act.held = Some(held)))
    }
}

impl Handler<FloorRelease> for FloorActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: FloorRelease, _: &mut Context<Self>) -> Self::Result {
        let (node, own_watch) = self.held.take().expect("released after an acquire");
        let client = self.client.clone();
        Box::pin(async move {
            client.delete(&node, None).await.expect("floor release");
            drop(own_watch);
        })
    }
}

async fn cycle(client: &Client, dir: &str, id: usize, heads: &Mutex<HashSet<String>>, floor: Floor) {
    let (node, own_watch) = acquire(client, dir, id, heads, floor).await;
    client.delete(&node, None).await.expect("floor release");
    drop(own_watch);
}

/// Takes the lock; returns the node held and the waiter's own-node watch, if it made one.
async fn acquire(
    client: &Client,
    dir: &str,
    id: usize,
    heads: &Mutex<HashSet<String>>,
    floor: Floor,
) -> (String, Option<OneshotWatcher>) {
    // Curator's protected prefix, with a name as long as a real UUID's.
    let prefix = format!("{dir}/_c_{id:08}-0000-0000-0000-000000000000-lock-");
    let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    // Both requests are sent here, before either is awaited.
    let create = client.create(&prefix, b"", &options);
    let list = client.list_children(dir);
    let (created, listed) = futures::join!(create, list);
    let ours = sequence(&created.expect("floor create").1.to_string());
    let node = format!("{prefix}{:010}", ours);
    let mut line = listed.expect("floor list");
    // Kept until the release: dropping a watcher may make the client send a request to remove it.
    let mut own_watch = None;
    loop {
        let mut ahead: Vec<(u64, String)> =
            line.iter().map(|n| (sequence(n), n.clone())).filter(|(s, _)| *s < ours).collect();
        if ahead.is_empty() {
            break;
        }
        ahead.sort_unstable();
        let was_first = ahead.len() == 1;
        let predecessor = format!("{dir}/{}", ahead.pop().expect("one ahead").1);
        // Sent before the watch ahead (a request leaves when the method is called) and awaited
        // after it: one round trip for both.
        let own = (floor == Floor::Safe && own_watch.is_none()).then(|| client.get_and_watch_data(&node));
        let (stat, watcher) = client.check_and_watch_stat(&predecessor).await.expect("floor exists");
        if let Some(own) = own {
            own_watch = Some(own.await.expect("floor own-node watch").2);
        }
        if stat.is_some() {
            watcher.changed().await;
            if was_first || heads.lock().expect("heads").contains(&predecessor) {
                break;
            }
        }
        line = client.list_children(dir).await.expect("floor relist");
    }
    heads.lock().expect("heads").insert(node.clone());
    (node, own_watch)
}
