//! Three participants elect a leader; the leader is killed (its session expires on the
//! server) and another takes over. Printed in plain words.
//!
//! Run with `cargo run --features testkit --example leader` (starts a local ZooKeeper unless
//! `ZK_CONNECT` is set). It checks who led, in which order and with which terms, and exits
//! non-zero if that is not what the election promises.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use actix_zookeeper::election::{ElectionConfig, ElectionEvent, ElectionHandle, LeaderTerm, StopLeading};
use actix_zookeeper::election::{FencingToken, LeadershipLostReason};
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{TestZooKeeper, expire_session};
use support::check;

/// Every participant's leadership changes, in the order their subscribers heard them.
type History = Arc<Mutex<Vec<(&'static str, ElectionEvent)>>>;

/// What each participant's subscriber prints (and notes in the shared history).
struct Narrator(&'static str, History);

impl Actor for Narrator {
    type Context = Context<Self>;
}

impl Handler<ElectionEvent> for Narrator {
    type Result = ();

    fn handle(&mut self, event: ElectionEvent, _: &mut Context<Self>) {
        let who = self.0;
        self.1.lock().expect("history").push((who, event.clone()));
        match event {
            ElectionEvent::LeadershipAcquired { token } => println!("  {who}: I am the leader now (term {token})"),
            ElectionEvent::LeadershipSuspended { .. } => println!("  {who}: connection lost, pausing my leader work"),
            ElectionEvent::LeadershipRestored { .. } => println!("  {who}: reconnected, still the leader"),
            ElectionEvent::LeadershipLost { reason, .. } => println!("  {who}: I am no longer the leader ({reason:?})"),
            ElectionEvent::LeaderChanged { leader_id: Some(id) } if id != who => println!("  {who}: {id} leads"),
            ElectionEvent::LeaderChanged { .. } => {}
            ElectionEvent::ElectionFailed { error } => println!("  {who}: cannot take part: {error}"),
            _ => {}
        }
    }
}

/// The leader's work: runs only while its participant leads.
struct Ticker {
    name: &'static str,
    term: LeaderTerm,
}

impl Actor for Ticker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        println!("  {}: starting the leader's work (term {})", self.name, self.term.token);
        ctx.run_interval(Duration::from_millis(400), |act, _| println!("  {}: ...working as leader", act.name));
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        println!("  {}: leader's work stopped", self.name);
    }
}

impl Handler<StopLeading> for Ticker {
    type Result = ();

    fn handle(&mut self, _: StopLeading, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let zk = TestZooKeeper::from_env()?;
    let connect = zk.connect_string();
    println!("ZooKeeper is at {connect}.");
    actix::System::new().block_on(async move {
        let history = History::default();
        let mut participants = Vec::new();
        println!("\nThree services join the election for /services/report/leader.");
        for name in ["alpha", "bravo", "charlie"] {
            let session = SessionHandle::start(
                SessionConfig::new(&connect)
                    .with_chroot("/actix-zookeeper-leader-demo")
                    .with_session_timeout(Duration::from_secs(4)),
            )?;
            let config = ElectionConfig::new("/services/report/leader")
                .with_participant_id(name)
                .with_leader_actor(move |term| Ticker { name, term });
            let election = ElectionHandle::start(session.clone(), config)?;
            // An election holds its subscribers weakly: keeping the narrator's address keeps it alive.
            let narrator = Narrator(name, history.clone()).start();
            election.subscribe(narrator.clone().recipient());
            participants.push((name, session, election, narrator));
            actix_rt::time::sleep(Duration::from_millis(200)).await;
        }
        actix_rt::time::sleep(Duration::from_secs(1)).await;

        let (leader_name, leader_session, _, _) = &participants[0];
        println!("\nThe leader, {leader_name}, is killed: its session expires on the server.");
        let info = leader_session.session().await.ok_or("no session")?.info;
        expire_session(&connect, &info).await?;
        actix_rt::time::sleep(Duration::from_secs(2)).await;

        println!("\nThe new leader hands over gracefully (resigns and rejoins at the back).");
        let leader = participants[1].2.leader().await?.ok_or("nobody leads")?;
        if let Some((_, _, election, _)) = participants.iter().find(|(name, _, _, _)| *name == leader) {
            election.resign_and_requeue().await?;
        }
        actix_rt::time::sleep(Duration::from_secs(1)).await;

        println!("\nEveryone leaves.");
        for (_, session, election, _) in &participants {
            let _ = election.resign().await;
            session.close().await;
        }
        actix_rt::time::sleep(Duration::from_millis(300)).await;

        println!("\nChecks:");
        let history = history.lock().expect("history").clone();
        let terms: Vec<(&str, FencingToken)> = history
            .iter()
            .filter_map(|(who, e)| match e {
                ElectionEvent::LeadershipAcquired { token } => Some((*who, *token)),
                _ => None,
            })
            .collect();
        let leaders: Vec<&str> = terms.iter().map(|(who, _)| *who).collect();
        check(leaders == ["alpha", "bravo", "charlie"], "alpha led, then bravo (next in line), then charlie")?;
        check(terms.windows(2).all(|w| w[0].1 < w[1].1), "every new term has a larger fencing token")?;
        let alpha_lost = history.iter().any(|(who, e)| {
            *who == "alpha"
                && matches!(
                    e,
                    ElectionEvent::LeadershipLost {
                        reason: LeadershipLostReason::SessionExpired | LeadershipLostReason::NodeDeleted,
                        ..
                    }
                )
        });
        check(alpha_lost, "alpha was told it lost the lead when its session expired")?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
