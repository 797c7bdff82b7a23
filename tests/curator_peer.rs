//! Self-test of the Curator peer harness (`tests/common/curator.rs`): real Curator 5.4 locks
//! contending with each other on a real ZooKeeper, so that the wire-compatibility tests built on
//! the harness can trust what it reports. Also pins the node layout Curator produces.
#![cfg(feature = "testkit")]

use crate::common::curator;

use std::time::{Duration, Instant};

use actix_zookeeper::testkit::ZkServer;
use curator::{CuratorPeer, compiled_peer, curator_classpath};

const REPLY: Duration = Duration::from_secs(20);
const STILL_BLOCKED: Duration = Duration::from_secs(1);

/// Whether `name` is `_c_<uuid>-<infix><10 digits>`: Curator's protected ephemeral-sequential
/// name (the `_c_<uuid>-` prefix lets a client find its node again after a lost create reply).
fn is_curator_node(name: &str, infix: &str) -> bool {
    let Some(rest) = name.strip_prefix("_c_") else { return false };
    let (uuid, rest) = rest.split_at(36.min(rest.len()));
    let uuid_ok = uuid.len() == 36
        && uuid.char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) { c == '-' } else { c.is_ascii_hexdigit() && !c.is_ascii_uppercase() }
        });
    let Some(seq) = rest.strip_prefix('-').and_then(|r| r.strip_prefix(infix)) else { return false };
    uuid_ok && seq.len() == 10 && seq.bytes().all(|b| b.is_ascii_digit())
}

/// Asserts `node` is `<parent>/<curator node name with infix>` and prints it.
fn check_node(label: &str, node: &str, parent: &str, infix: &str) {
    println!("{label:<22} {node}");
    let name = node.strip_prefix(parent).and_then(|r| r.strip_prefix('/'));
    assert!(
        name.is_some_and(|name| is_curator_node(name, infix)),
        "{label}: {node:?} is not {parent}/_c_<uuid>-{infix}<10 digits>"
    );
}

/// Starts peers concurrently (a JVM start is the slow part), in the order given.
fn start_peers<const N: usize>(connect: &str, specs: [(&str, &str); N]) -> [CuratorPeer; N] {
    let peers: Vec<CuratorPeer> = std::thread::scope(|s| {
        let handles: Vec<_> = specs
            .iter()
            .map(|&(path, kind)| {
                s.spawn(move || {
                    let started = Instant::now();
                    let peer = CuratorPeer::start(connect, path, kind).expect("start Curator peer");
                    println!("peer {kind:<12} on {path}: READY after {:?}", started.elapsed());
                    peer
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("peer start thread")).collect()
    });
    peers.try_into().unwrap_or_else(|_| unreachable!("one peer per spec"))
}

/// Lists `path` and everything below it with each node's ephemeral owner, via a plain client,
/// to show what Curator created beyond the node it reports.
fn dump_tree(connect: &str, path: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    rt.block_on(async {
        let client = zookeeper_client::Client::connect(connect).await.expect("connect inspector");
        let mut out = String::new();
        let mut stack = vec![path.to_string()];
        while let Some(p) = stack.pop() {
            let Ok((mut children, stat)) = client.get_children(&p).await else { continue };
            // ZooKeeper reports owner 0 for container nodes too, so the two look alike here.
            let owner = match stat.ephemeral_owner {
                0 => "persistent or container".to_string(),
                o => format!("ephemeral of {o:#x}"),
            };
            out.push_str(&format!("  {p}  [{owner}]\n"));
            children.sort();
            stack.extend(children.into_iter().rev().map(|c| format!("{p}/{c}")));
        }
        out
    })
}

#[test]
fn curator_locks_contend_as_curator_does() {
    let server = ZkServer::start().expect("start ZooKeeper");
    let connect = server.connect_string();
    println!("classpath: {}", curator_classpath().expect("Curator jars"));
    let started = Instant::now();
    let classes = compiled_peer().expect("compile CuratorPeer.java");
    println!(
        "compiled_peer: {} in {:?} (near 0 when reused from an earlier run)",
        classes.display(),
        started.elapsed()
    );

    // Mutex: B blocks while A holds, and gets the lock when A releases.
    let [mut a, mut b] = start_peers(&connect, [("/curator/mutex", "mutex"), ("/curator/mutex", "mutex")]);
    let node_a = a.acquire(REPLY).expect("A acquires");
    check_node("mutex A", &node_a, "/curator/mutex", "lock-");
    assert_eq!(b.try_acquire(Duration::from_millis(300), REPLY).expect("B try_acquire"), None, "B timed out");
    b.send("acquire").expect("send acquire");
    assert_eq!(b.try_line(STILL_BLOCKED).expect("B alive"), None, "B must wait while A holds the mutex");
    print!("{}", dump_tree(&connect, "/curator/mutex"));
    a.release(REPLY).expect("A releases");
    let node_b = b.expect_acquired(REPLY).expect("B acquires after A released");
    check_node("mutex B", &node_b, "/curator/mutex", "lock-");
    assert_ne!(node_a, node_b);
    // Dropping a peer blocked in acquire must end it via `quit` (not the kill fallback after 3 s)
    // and delete both peers' lock nodes at once (no session timeout wait).
    a.send("acquire").expect("send acquire");
    assert_eq!(a.try_line(STILL_BLOCKED).expect("A alive"), None, "A must wait while B holds the mutex");
    let dropping = Instant::now();
    drop((a, b));
    println!("dropped both peers (one blocked in acquire) in {:?}", dropping.elapsed());
    assert!(dropping.elapsed() < Duration::from_secs(3), "quit did not end the peers");
    let tree = dump_tree(&connect, "/curator/mutex");
    assert!(!tree.contains("/_c_"), "lock nodes left after the peers quit:\n{tree}");

    // Read/write: readers share, a writer waits for both; a reader then waits for the writer.
    let [mut r1, mut r2, mut w] =
        start_peers(&connect, [("/curator/rw", "read"), ("/curator/rw", "read"), ("/curator/rw", "write")]);
    let node_r1 = r1.acquire(REPLY).expect("R1 acquires");
    let node_r2 = r2.acquire(REPLY).expect("R2 acquires while R1 holds");
    check_node("read R1", &node_r1, "/curator/rw", "__READ__");
    check_node("read R2", &node_r2, "/curator/rw", "__READ__");
    w.send("acquire").expect("send acquire");
    assert_eq!(w.try_line(STILL_BLOCKED).expect("W alive"), None, "writer must wait for readers");
    print!("{}", dump_tree(&connect, "/curator/rw"));
    r1.release(REPLY).expect("R1 releases");
    assert_eq!(w.try_line(STILL_BLOCKED).expect("W alive"), None, "writer must wait for the last reader");
    r2.release(REPLY).expect("R2 releases");
    let node_w = w.expect_acquired(REPLY).expect("W acquires after readers released");
    check_node("write W", &node_w, "/curator/rw", "__WRIT__");
    r1.send("acquire").expect("send acquire");
    assert_eq!(r1.try_line(STILL_BLOCKED).expect("R1 alive"), None, "reader must wait for the writer");
    w.release(REPLY).expect("W releases");
    let node_r1 = r1.expect_acquired(REPLY).expect("R1 acquires after W released");
    check_node("read R1 again", &node_r1, "/curator/rw", "__READ__");
    drop((r1, r2, w));

    // Semaphore with 2 leases: the third peer waits, holding the semaphore's internal mutex.
    let sem = ("/curator/sem", "semaphore:2");
    let [mut s1, mut s2, mut s3] = start_peers(&connect, [sem, sem, sem]);
    let lease1 = s1.acquire(REPLY).expect("S1 acquires");
    let lease2 = s2.acquire(REPLY).expect("S2 acquires");
    check_node("semaphore lease S1", &lease1, "/curator/sem/leases", "lease-");
    check_node("semaphore lease S2", &lease2, "/curator/sem/leases", "lease-");
    s3.send("acquire").expect("send acquire");
    assert_eq!(s3.try_line(STILL_BLOCKED).expect("S3 alive"), None, "third lease must wait");
    let tree = dump_tree(&connect, "/curator/sem");
    print!("{tree}");
    let lock_nodes: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|p| p.starts_with("/curator/sem/locks/"))
        .collect();
    assert_eq!(lock_nodes.len(), 1, "the waiting S3 holds the semaphore's mutex:\n{tree}");
    check_node("semaphore mutex (S3)", lock_nodes[0], "/curator/sem/locks", "lock-");
    s1.release(REPLY).expect("S1 releases");
    let lease3 = s3.expect_acquired(REPLY).expect("S3 acquires after S1 released");
    check_node("semaphore lease S3", &lease3, "/curator/sem/leases", "lease-");
    print!("{}", dump_tree(&connect, "/curator/sem"));
}

/// Data of `path` read with a plain client.
fn node_data(connect: &str, path: &str) -> Vec<u8> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    rt.block_on(async {
        let client = zookeeper_client::Client::connect(connect).await.expect("connect inspector");
        client.get_data(path).await.unwrap_or_else(|e| panic!("get_data {path}: {e}")).0
    })
}

#[test]
fn curator_leader_latches_elect_one_leader() {
    const PATH: &str = "/curator/latch";
    const NO_EVENT: Duration = Duration::from_secs(1);
    let server = ZkServer::start().expect("start ZooKeeper");
    let connect = server.connect_string();
    let [mut a, mut b] = std::thread::scope(|s| {
        let start = |id: &'static str| {
            let connect = &connect;
            s.spawn(move || CuratorPeer::start_latch(connect, PATH, id).expect("start latch peer"))
        };
        let (a, b) = (start("java-a"), start("java-b"));
        [a.join().expect("peer start thread"), b.join().expect("peer start thread")]
    });

    // A alone: it becomes leader (LEADER may be printed before or after STARTED).
    let node_a = a.latch_start(REPLY).expect("A starts");
    check_node("latch A", &node_a, PATH, "latch-");
    assert_eq!(a.next_leadership_event(REPLY).expect("A alive"), Some(true), "A, alone, must lead");
    assert!(a.has_leadership(REPLY).expect("A hasLeadership"));
    assert_eq!(node_data(&connect, &node_a), b"java-a", "LeaderLatch stores the id as node data");

    // B joins behind A: no event, and it sees A as leader.
    let node_b = b.latch_start(REPLY).expect("B starts");
    check_node("latch B", &node_b, PATH, "latch-");
    assert_eq!(node_data(&connect, &node_b), b"java-b");
    // Paths start with a random UUID, so only the sequence suffix orders them.
    let seq = |node: &str| node[node.len() - 10..].parse::<u64>().expect("sequence number");
    assert!(seq(&node_a) < seq(&node_b), "B's sequence number follows A's");
    assert_eq!(b.next_leadership_event(NO_EVENT).expect("B alive"), None, "B must not lead (nor report NOT_LEADER)");
    assert_eq!(b.leader_id(REPLY).expect("B leader"), Some("java-a".to_string()));
    assert!(!b.has_leadership(REPLY).expect("B hasLeadership"));
    assert_eq!(a.leader_id(REPLY).expect("A leader"), Some("java-a".to_string()));
    print!("{}", dump_tree(&connect, PATH));

    // A closes (NOTIFY_LEADER): A reports NOT_LEADER, B takes over.
    a.latch_close(REPLY).expect("A closes");
    assert_eq!(a.next_leadership_event(REPLY).expect("A alive"), Some(false), "closing leader reports NOT_LEADER");
    assert_eq!(b.next_leadership_event(REPLY).expect("B alive"), Some(true), "B leads after A closed");
    assert!(b.has_leadership(REPLY).expect("B hasLeadership"));
    assert!(!a.has_leadership(REPLY).expect("A hasLeadership"));
    assert_eq!(b.leader_id(REPLY).expect("B leader"), Some("java-b".to_string()));
    assert_eq!(a.leader_id(REPLY).expect("A leader after close"), Some("java-b".to_string()));
    assert_eq!(a.next_leadership_event(NO_EVENT).expect("A alive"), None, "a closed latch stays quiet");

    // B closes too: nobody leads.
    b.latch_close(REPLY).expect("B closes");
    assert_eq!(b.next_leadership_event(REPLY).expect("B alive"), Some(false));
    let deadline = Instant::now() + REPLY;
    while a.leader_id(REPLY).expect("A leader").is_some() {
        assert!(Instant::now() < deadline, "latch nodes not deleted after close");
        std::thread::sleep(Duration::from_millis(50));
    }
    print!("{}", dump_tree(&connect, PATH));
}
