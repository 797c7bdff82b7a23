//! A short tour of the session: connect, write, watch, survive a server restart and a
//! server-side session expiry.
//!
//! Run with `cargo run --features testkit --example demo`. With `ZK_CONNECT` unset it starts a
//! local ZooKeeper of its own (the testkit's embedded server); with `ZK_CONNECT=host:port` it
//! uses yours and skips the fault demonstrations, which need a server it may restart. Every
//! claim it prints is checked; it exits non-zero if one does not hold.

mod support;

use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{TestZooKeeper, expire_session};
use support::check;

/// Prints what the session and the watches report, in words.
struct Narrator;

impl Actor for Narrator {
    type Context = Context<Self>;
}

impl Handler<SessionEvent> for Narrator {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, _: &mut Context<Self>) {
        match event {
            SessionEvent::Connected { session_id, generation } => {
                println!("  [session] connected: session {session_id}, generation {generation}")
            }
            SessionEvent::Suspended { session_id, .. } => {
                println!("  [session] connection lost; session {session_id} may still be alive (suspended)")
            }
            SessionEvent::Reconnected { session_id, .. } => {
                println!("  [session] reconnected: same session {session_id}, ephemerals and watches intact")
            }
            SessionEvent::Expired { session_id, .. } => {
                println!("  [session] session {session_id} expired: its ephemeral nodes are gone; building a new one")
            }
            SessionEvent::AuthFailed => println!("  [session] the server rejected our credentials"),
            SessionEvent::Closed => println!("  [session] closed"),
            other => println!("  [session] {other:?}"),
        }
    }
}

impl Handler<WatchEvent> for Narrator {
    type Result = ();

    fn handle(&mut self, event: WatchEvent, _: &mut Context<Self>) {
        let what = match event.kind {
            WatchEventKind::NodeCreated => "was created",
            WatchEventKind::NodeDeleted => "was deleted",
            WatchEventKind::DataChanged => "changed its data",
            WatchEventKind::ChildrenChanged => "gained or lost a child",
            WatchEventKind::SessionEnded => "is no longer watched (session ended)",
            _ => "changed",
        };
        println!("  [watch]   {} {what}", event.path);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::var("ZK_CONNECT") {
        Ok(_) => println!("Using the ZooKeeper at $ZK_CONNECT."),
        Err(_) => println!("Starting a local ZooKeeper (set ZK_CONNECT to use your own)..."),
    }
    let mut zk = TestZooKeeper::from_env()?;
    let connect = zk.connect_string();
    println!("ZooKeeper is at {connect}.");

    actix::System::new().block_on(async move {
        let narrator = Narrator.start();
        let config = SessionConfig::new(&connect)
            .with_chroot("/actix-zookeeper-demo")
            .with_session_timeout(Duration::from_secs(6));
        let session = SessionHandle::start(config)?;
        session.subscribe(narrator.clone().recipient());
        let pause = || actix_rt::time::sleep(Duration::from_millis(300));

        println!("\n1. Writing a little configuration tree and watching it.");
        session.delete_recursive("/app").await?;
        session.add_watch("/app", PersistentWatchMode::Recursive, narrator.clone().recipient()).await?;
        session.ensure_path("/app/config").await?;
        session.set_data("/app/config", "color=blue", None).await?;
        let member = session.create("/app/member-", "me", CreateMode::EphemeralSequential).await?;
        println!("  registered as {} (an ephemeral node: it lives as long as the session)", member.path);
        pause().await;

        println!("\n2. An atomic multi-operation: bump the config only if nobody else did.");
        let current = session.get_data("/app/config").await?;
        session
            .multi(vec![
                Op::Check { path: "/app/config".into(), version: current.stat.version },
                Op::SetData { path: "/app/config".into(), data: b"color=green".to_vec(), version: None },
            ])
            .await?;
        let stale = session.set_data("/app/config", "color=red", Some(current.stat.version)).await;
        check(matches!(stale, Err(Error::BadVersion { .. })), "a write at the old version is refused")?;
        check(session.get_data("/app/config").await?.data == b"color=green", "the multi's write landed")?;
        pause().await;

        if let TestZooKeeper::Embedded(server) = &mut zk {
            println!("\n3. Restarting the ZooKeeper server (shorter than the session timeout).");
            server.stop()?;
            pause().await;
            server.restart()?;
            actix_rt::time::sleep(Duration::from_secs(1)).await;
            let still = session.exists(&member.path).await?.is_some();
            check(still, "our ephemeral node survived the restart")?;

            println!("\n4. Expiring our session on the server (as a long network partition would).");
            println!("  (a second client takes over our session id and closes it; until it does, the two");
            println!("   connections push each other off the server, so expect a few suspensions first)");
            let info = session.session().await.ok_or("no session")?.info;
            expire_session(&connect, &info).await?;
            for _ in 0..50 {
                match session.session().await {
                    Some(s) if s.generation == 2 => break,
                    _ => actix_rt::time::sleep(Duration::from_millis(100)).await,
                }
            }
            let rebuilt = session.session().await.is_some_and(|s| s.generation == 2);
            check(rebuilt, "a new session (generation 2) was built on its own")?;
            let gone = session.exists(&member.path).await?.is_none();
            check(gone, "the old session's ephemeral node is gone")?;
            session.create("/app/after-expiry", "", CreateMode::Ephemeral).await?;
            pause().await;
        }

        println!("\nDone; closing the session.");
        session.delete_recursive("/app").await?;
        session.close().await;
        pause().await;
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
