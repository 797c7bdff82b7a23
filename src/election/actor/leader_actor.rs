//! The leader actor's life (leader-actor mode, `ElectionConfig::with_leader_actor`): started
//! when a term is acquired or restored, told to stop when it is suspended, lost or given up,
//! and never two at once.
//!
//! Owns: when the user's leader actor starts and stops, and what waits for it to have stopped
//! (a resign's delete, the next term's actor). Does not own leadership (the holder core's).

use actix::prelude::*;
use futures::FutureExt;
use futures::channel::oneshot;
use futures::future::Shared;
use tracing::warn;

use super::super::messages::{LeaderTerm, StopLeading};
use super::ElectionActor;

/// Resolves once a leader actor has stopped.
pub(super) type LeaderStopped = Shared<oneshot::Receiver<()>>;

/// What waits for a leader actor to stop.
pub(super) type AfterStop = Box<dyn FnOnce(&mut ElectionActor, &mut Context<ElectionActor>)>;

impl ElectionActor {
    /// Starts the leader actor of `term` (leader-actor mode) once the last one has stopped, if
    /// `term` still leads by then.
    pub(super) fn start_leader(&mut self, term: LeaderTerm, ctx: &mut Context<Self>) {
        self.leading = Some(term.token);
        if self.leader.is_some() || self.config.leader.is_none() {
            return;
        }
        self.after_leader_stopped(ctx, move |act, _| {
            if act.leader.is_some() || act.leading != Some(term.token) {
                return; // started meanwhile, or the term was suspended or ended meanwhile
            }
            if let Some(factory) = &act.config.leader {
                let run = (factory.0)(term);
                act.leader = Some((run.stop, run.stopped.shared()));
            }
        });
    }

    /// Tells the leader actor to stop; [`after_leader_stopped`](Self::after_leader_stopped)
    /// waits for it.
    pub(super) fn stop_leader(&mut self) {
        self.leading = None;
        if let Some((leader, stopped)) = self.leader.take() {
            leader.do_send(StopLeading);
            self.leader_stopping = Some(stopped);
        }
    }

    /// Runs `then` once the leader actor told to stop has stopped: at once when none is
    /// stopping (no leader-actor mode, or it stopped already), else after it stopped or after
    /// `leader_stop_timeout`. Several wait in the order asked.
    pub(super) fn after_leader_stopped(
        &mut self,
        ctx: &mut Context<Self>,
        then: impl FnOnce(&mut Self, &mut Context<Self>) + 'static,
    ) {
        let Some(stopped) = self.leader_stopping.clone() else {
            return then(self, ctx);
        };
        if stopped.peek().is_some() && self.after_stop.is_empty() {
            self.leader_stopping = None;
            return then(self, ctx);
        }
        self.after_stop.push(Box::new(then));
        if self.after_stop.len() > 1 {
            return; // the wait is armed
        }
        let limit = self.config.leader_stop_timeout;
        ctx.spawn(tokio::time::timeout(limit, stopped).into_actor(self).map(move |waited, act, ctx| {
            if waited.is_err() {
                warn!(parent: act.shell.span(), ?limit, "the leader actor did not stop in time; going on without it");
            }
            act.leader_stopping = None;
            for then in std::mem::take(&mut act.after_stop) {
                then(act, ctx);
            }
        }));
    }
}
