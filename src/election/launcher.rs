//! Starting a participant's leader actors where its user runs, when the participant itself runs
//! on its session's thread ([`ElectionHandle::start`](super::ElectionHandle::start)).
//!
//! Owns: a [`LeaderLauncher`] actor on the Arbiter that started the participant, which keeps the
//! user's leader-actor factory (it need not be `Send`), starts each term's actor when asked and
//! passes `StopLeading` on to it. Does not own when a leader actor starts or stops, or what waits
//! for it (the participant's, `actor/leader_actor.rs`).

use actix::prelude::*;
use futures::channel::oneshot;

use super::config::{LeaderFactory, LeaderRun, SendLeaderFactory};
use super::messages::{LeaderTerm, StopLeading};

/// `factory`, callable from another thread: each call asks a launcher started here (on the
/// current Arbiter) to start that term's leader actor. What the call returns at once stands for
/// the actor: `StopLeading` sent to it reaches the actor (messages from one sender keep their
/// order, so a stop sent right after the start finds the actor started), and `stopped` resolves
/// once the actor has stopped.
pub(super) fn launched_here(factory: LeaderFactory) -> SendLeaderFactory {
    let launcher = LeaderLauncher { factory, running: None }.start();
    Box::new(move |term| {
        let (done, stopped) = oneshot::channel();
        if !launcher.connected() {
            // Its `done` drops with the message: the participant sees the actor as stopped.
            tracing::warn!(token = %term.token, "the Arbiter that started this election participant has stopped; its leader actor cannot start");
        }
        launcher.do_send(Launch { term, done });
        LeaderRun { stop: launcher.clone().recipient(), stopped }
    })
}

/// Keeps a participant's leader-actor factory on the thread it was made on.
struct LeaderLauncher {
    factory: LeaderFactory,
    /// The actor of the current term, until it is told to stop. The participant never runs two
    /// at once: it starts the next only once this one has stopped.
    running: Option<Recipient<StopLeading>>,
}

impl Actor for LeaderLauncher {
    type Context = Context<Self>;

    /// The participant is gone (its last address to us with it). A `StopLeading` it sent just
    /// before may never have been handled: an actor on another thread whose senders all went
    /// while it was between its look at the mailbox and its look at its senders stops with that
    /// message unread (found in review of actix 0.13's context loop; no test forces the window).
    /// Whatever still runs is told here.
    fn stopped(&mut self, _: &mut Context<Self>) {
        if let Some(leader) = self.running.take() {
            leader.do_send(StopLeading);
        }
    }
}

/// Start the leader actor of `term`; `done` once it has stopped.
#[derive(Message)]
#[rtype(result = "()")]
struct Launch {
    term: LeaderTerm,
    done: oneshot::Sender<()>,
}

impl Handler<Launch> for LeaderLauncher {
    type Result = ();

    fn handle(&mut self, launch: Launch, _: &mut Context<Self>) {
        let run = (self.factory)(launch.term);
        self.running = Some(run.stop);
        // Detached, not in this context: the launcher may stop (its participant gone) while the
        // leader actor still finishes, and whoever waits must still hear of its end.
        actix::spawn(async move {
            let _ = run.stopped.await;
            let _ = launch.done.send(());
        });
    }
}

impl Handler<StopLeading> for LeaderLauncher {
    type Result = ();

    fn handle(&mut self, stop: StopLeading, _: &mut Context<Self>) {
        if let Some(leader) = self.running.take() {
            leader.do_send(stop);
        }
    }
}
