//! Who leads, for `LeaderChanged`: every participant reads the first node in line and watches
//! it, so that it hears when leadership moves.
//!
//! Owns: the reading of the leader's node and its watch. Does not own this participant's own
//! place in line (its contender's) or its leadership (the holder core's).

use actix::prelude::*;
use tracing::debug;

use super::super::messages::ElectionEvent;
use super::ElectionActor;
use crate::error::Error;
use crate::path;
use crate::recipe::contender;
use crate::recipe::holder::HolderHost;
use crate::retry::again_later;
use crate::session::{WatchEvent, WatchEventKind};

impl ElectionActor {
    pub(super) fn report_leader(&mut self, id: Option<String>) {
        if self.leader_id != id {
            debug!(parent: self.shell.span(), leader = ?id, "leader changed");
            self.leader_id = id.clone();
            self.shell.tell(ElectionEvent::LeaderChanged { leader_id: id });
        }
    }

    /// Reads who leads now and watches that node, to report `LeaderChanged`. Every participant
    /// watches the leader's node: learning of a new leader is the point, so this one event
    /// reaches everybody by design (the contenders themselves still watch only their
    /// predecessor).
    pub(super) fn observe(&mut self, ctx: &mut Context<Self>) {
        let list = self.shell.session().children(&self.config.path);
        ctx.spawn(list.into_actor(self).map(|listed, act, ctx| {
            let names = match listed {
                Ok(children) => children.names,
                Err(Error::NoNode { .. }) => Vec::new(),
                Err(error) if error.is_final() => {
                    // Retrying cannot help; the contender reports the same error as
                    // `ElectionFailed` when it meets it.
                    debug!(parent: act.shell.span(), %error, "cannot read the election");
                    return;
                }
                Err(error) => {
                    // A fresh backoff each time: this only keeps `LeaderChanged` current, and a
                    // reconnect or the contender reads again too.
                    debug!(parent: act.shell.span(), %error, "cannot read the election; will retry unless final");
                    let _ = again_later(&mut act.retry().backoff(), error, ctx, |act: &mut Self, ctx| act.observe(ctx));
                    return;
                }
            };
            // Our contender may learn from this listing that fewer nodes stand ahead of it, so
            // that its hand-off needs no read of its own.
            if let Some(attempt) = act.holder.attempt().filter(|a| act.holder.is_acquiring(*a)) {
                if act.contender.holds(attempt) {
                    let names = names.clone();
                    contender::step(act, attempt, ctx, |contender, ctx| contender.relisted(names, ctx));
                }
            }
            let names = path::sequential_in_order(names);
            let Some(first) = names.first() else {
                act.watched_leader = None;
                act.report_leader(None);
                return;
            };
            let node = path::join(&act.config.path, first);
            act.follow(node, ctx);
        }));
    }

    /// Watches `node`, the first in line, to report who leads (unless we lead, or watch it
    /// already).
    pub(super) fn follow(&mut self, node: String, ctx: &mut Context<Self>) {
        if self.holder.held().is_some_and(|held| held.node == node) {
            return; // we lead; our own node is watched by our contender
        }
        if self.watched_leader.as_deref() == Some(node.as_str()) {
            return; // its watch is set (or being set)
        }
        self.watched_leader = Some(node.clone());
        self.watch_leader(node, ctx);
    }

    /// Reads the leader's node `node` (its data is the leader's id) and watches it.
    fn watch_leader(&mut self, node: String, ctx: &mut Context<Self>) {
        // Held weakly: a participant whose last address is dropped stops (and leaves the line)
        // even while the leader it watches lives on.
        let read = self.shell.session().get_data_watched_by(&node, &self.shell.watcher(ctx));
        ctx.spawn(read.into_actor(self).map(move |read, act, ctx| {
            if act.watched_leader.as_deref() != Some(node.as_str()) {
                return; // it went (its deletion was seen first) and we moved on
            }
            match read {
                Ok(data) => act.report_leader(Some(String::from_utf8_lossy(&data.data).into_owned())),
                Err(_) => {
                    act.watched_leader = None; // gone meanwhile: read again
                    act.observe(ctx);
                }
            }
        }));
    }
}

impl Handler<WatchEvent> for ElectionActor {
    type Result = ();

    fn handle(&mut self, event: WatchEvent, ctx: &mut Context<Self>) {
        debug!(parent: self.shell.span(), path = %event.path, kind = ?event.kind, "watch event");
        if self.watched_leader.as_deref() != Some(event.path.as_str()) {
            return;
        }
        match event.kind {
            // The term goes on, but the change consumed the one-shot watch: without a new one,
            // the next change of leader would never be heard.
            WatchEventKind::DataChanged => self.watch_leader(event.path, ctx),
            _ => {
                self.watched_leader = None;
                self.observe(ctx);
            }
        }
    }
}
