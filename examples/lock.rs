//! Two actors share a lock and write to a shared ledger with guarded writes.
//!
//! Run with `cargo run --features testkit --example lock` (starts a local ZooKeeper unless
//! `ZK_CONNECT` is set). Each worker takes the lock, appends a line to `/ledger` with a write
//! that only lands while its lock node still exists, and releases. At the end, the session of
//! a holder is expired on the server to show that its late write is refused. It checks the
//! ledger at the end and exits non-zero if anything is off.

mod support;

use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::lock::{LockConfig, LockEvent, LockHandle};
use actix_zookeeper::prelude::*;
use actix_zookeeper::recipe::FenceError;
use actix_zookeeper::testkit::{TestZooKeeper, expire_session};
use support::check;

/// Prints what a lock tells its subscribers.
struct Narrator(&'static str);

impl Actor for Narrator {
    type Context = Context<Self>;
}

impl Handler<LockEvent> for Narrator {
    type Result = ();

    fn handle(&mut self, event: LockEvent, _: &mut Context<Self>) {
        let who = self.0;
        match event {
            LockEvent::Acquired { grant, .. } => println!("  [{who}] got the lock (fencing token {})", grant.token),
            LockEvent::Released { .. } => println!("  [{who}] released the lock"),
            LockEvent::Suspended { .. } => println!("  [{who}] connection lost: may no longer hold the lock"),
            LockEvent::Reconnected { .. } => println!("  [{who}] reconnected: still holds the lock"),
            LockEvent::Lost { reason, .. } => println!("  [{who}] LOST the lock: {reason:?}"),
            _ => {}
        }
    }
}

async fn append(session: &SessionHandle, line: &str) -> Vec<Op> {
    let mut ledger = session.get_data("/ledger").await.map(|n| n.data).unwrap_or_default();
    ledger.extend_from_slice(line.as_bytes());
    ledger.push(b'\n');
    vec![Op::SetData { path: "/ledger".into(), data: ledger, version: None }]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let zk = TestZooKeeper::from_env()?;
    let connect = zk.connect_string();
    println!("ZooKeeper is at {connect}.");
    actix::System::new().block_on(async move {
        let config = || SessionConfig::new(&connect).with_chroot("/actix-zookeeper-lock-demo");
        let (alice_session, bob_session) = (SessionHandle::start(config())?, SessionHandle::start(config())?);
        alice_session.delete_recursive("/ledger").await?;
        alice_session.create("/ledger", "", CreateMode::Persistent).await?;

        let alice =
            LockHandle::start(alice_session.clone(), LockConfig::new("/locks/ledger").with_participant_id("alice"))?;
        let bob = LockHandle::start(bob_session.clone(), LockConfig::new("/locks/ledger").with_participant_id("bob"))?;
        // A lock holds its subscribers weakly: these addresses keep the narrators alive.
        let narrators = (Narrator("alice").start(), Narrator("bob").start());
        alice.subscribe(narrators.0.clone().recipient());
        bob.subscribe(narrators.1.clone().recipient());

        println!("\nBoth ask for the lock; one waits for the other.");
        for round in 0..2 {
            for (name, lock, session) in [("alice", &alice, &alice_session), ("bob", &bob, &bob_session)] {
                let grant = lock.acquire(Some(Duration::from_secs(10))).await?;
                let ops = append(session, &format!("{name} round {round} (token {})", grant.token)).await;
                grant.guarded_write(session, ops).await?;
                lock.release().await?;
            }
        }

        println!("\nAlice takes the lock, then her session expires on the server (a long pause, say).");
        let grant = alice.acquire(None).await?;
        let bob_waits = bob.acquire(None);
        let expired = alice_session.session().await.ok_or("no session")?;
        expire_session(&connect, &expired.info).await?;
        let bob_grant = bob_waits.await?;
        println!("  bob's token {} is larger than alice's {}", bob_grant.token, grant.token);
        // Alice resumes once her process has caught up with the expiry (it has a new session):
        // a write sent while her client still took the old session for live could have reached
        // the server before the expiry, and is reported as `OutcomeUnknown`, not as refused.
        while alice_session.session().await.is_none_or(|now| now.generation == expired.generation) {
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
        let late = grant.guarded_write(&alice_session, append(&alice_session, "alice, too late").await).await;
        match &late {
            Err(FenceError::Ended { node }) => println!("  alice's late write is refused: {node} is gone"),
            other => println!("  unexpected: {other:?}"),
        }
        bob.release().await?;

        let ledger = String::from_utf8(bob_session.get_data("/ledger").await?.data)?;
        println!("\nThe ledger:\n{ledger}");
        alice_session.close().await;
        bob_session.close().await;

        println!("Checks:");
        check(bob_grant.token > grant.token, "the later holder's fencing token is larger")?;
        check(matches!(late, Err(FenceError::Ended { .. })), "the expired holder's write was refused")?;
        let lines: Vec<&str> = ledger.lines().collect();
        let expected = ["alice round 0", "bob round 0", "alice round 1", "bob round 1"];
        check(
            lines.len() == expected.len() && lines.iter().zip(expected).all(|(line, who)| line.starts_with(who)),
            "the ledger has the four guarded lines, in turn, and nothing else",
        )?;
        let tokens: Vec<i64> = lines
            .iter()
            .filter_map(|l| i64::from_str_radix(l.rsplit("token 0x").next()?.trim_end_matches(')'), 16).ok())
            .collect();
        check(tokens.len() == 4 && tokens.windows(2).all(|w| w[0] < w[1]), "every hold had a larger token")?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
