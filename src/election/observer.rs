//! [`ElectionObserver`]: watches one election from outside (or beside) the line and tells who
//! leads, in which term, with which proclaimed value, as [`ProclamationChanged`] events.
//!
//! Owns: reading the election (the election node's data and children, then the leader node),
//! keeping one-shot watches armed on it, reading again after every watch event, reconnect and
//! new session (a `sync` first, so a new session's server is not behind what was told), and
//! telling subscribers what [`Observed`] says is news. Does not own the stored format or the
//! ordering rule (`proclamation.rs`), or taking part in the election (an observer never does).
//!
//! # Recovery
//! - *Suspended*: nothing is told (the last reading stands); reads wait for the connection.
//! - *Reconnected*: read again: ZooKeeper does not replay what changed while we were away.
//! - *New session*: every watch is gone; `sync`, read again, and tell what changed.
//! - The election node deleted (every participant gone): `current: None`, and an `exists` watch
//!   waits for it to be made again.

use actix::prelude::*;
use tracing::{debug, info, warn};

use super::config::ElectionObserverConfig;
use super::error::ElectionError;
use super::messages::{CurrentProclamation, Proclamation, ProclamationChanged, Stop, Subscribe};
use super::proclamation::{Observed, Reading, Step};
use crate::error::Error;
use crate::events::Listen;
use crate::path;
use crate::recipe::FencingToken;
use crate::recipe::shell::Shell;
use crate::reply::{Pending, Reply};
use crate::retry::again_later;
use crate::session::health::RecipeState;
use crate::session::{SessionEvent, SessionHandle, WatchEvent, WatchEventKind};

/// Why a reading did not produce a [`Reading`].
enum Unread {
    /// The election node does not exist.
    Missing,
    /// The leader read in the listing was gone by the time its node was read: read again.
    Moved,
    /// A request failed.
    Failed(Error),
}

/// Which one-shot watches are set on the server (so that a reading does not set another).
#[derive(Debug, Default, Clone, Copy)]
struct Armed {
    data: bool,
    children: bool,
    /// An `exists` watch on the missing election node (it stays until the node is made).
    creation: bool,
}

/// Watches one election and tells [`ProclamationChanged`] to its subscribers. Start it with
/// [`ElectionObserverHandle::start`](super::ElectionObserverHandle::start).
pub struct ElectionObserver {
    path: String,
    observed: Observed,
    /// Callers of `CurrentProclamation` before the first reading.
    waiting: Vec<Pending<Result<Option<Proclamation>, ElectionError>>>,
    armed: Armed,
    /// A reading is under way; `again`: another is due once it is done.
    reading: bool,
    again: bool,
    /// The session generation the watches belong to.
    generation: u64,
    /// A new session began: its first reading is preceded by a `sync`, so that a server behind
    /// what was told cannot answer it.
    needs_sync: bool,
    /// A reading failed for good (no permission, a bad path): told to every caller.
    failed: Option<Error>,
    /// Kept last: its lifeline must drop after everything else the actor holds.
    shell: Shell<ProclamationChanged>,
}

impl crate::recipe::shell::OnShell for ElectionObserver {
    type Event = ProclamationChanged;

    fn shell(&self) -> &Shell<ProclamationChanged> {
        &self.shell
    }

    fn shell_mut(&mut self) -> &mut Shell<ProclamationChanged> {
        &mut self.shell
    }
}

impl ElectionObserver {
    /// An observer for `config` (a path will do); start it with `.start()`.
    pub fn new(session: SessionHandle, config: impl Into<ElectionObserverConfig>) -> Self {
        let path = config.into().path;
        let span = tracing::info_span!("zk.election.observer", path = %path);
        ElectionObserver {
            shell: Shell::new(session, span, None),
            path,
            observed: Observed::default(),
            waiting: Vec::new(),
            armed: Armed::default(),
            reading: false,
            again: false,
            generation: 0,
            needs_sync: false,
            failed: None,
        }
    }

    /// Its entry on the session's health board: `Watching` once a reading is in and the
    /// connection has not dropped since, `Idle` before and after; failed for good stays so.
    fn report(&mut self, state: RecipeState) {
        if let Some(health) = self.shell.health().filter(|_| self.failed.is_none()) {
            health.set(state);
        }
    }

    /// Reads the election (again, once the reading under way is done).
    fn refresh(&mut self, ctx: &mut Context<Self>) {
        if self.failed.is_some() {
            return;
        }
        if self.reading {
            self.again = true;
            return;
        }
        self.reading = true;
        self.again = false;
        let me = self.shell.watcher(ctx);
        // Marked before the replies: an event can overtake the reply of the read that set it.
        let (watch_data, watch_children) = (!self.armed.data, !self.armed.children);
        self.armed.data = true;
        self.armed.children = true;
        let session = self.shell.session().clone();
        let path = self.path.clone();
        if std::mem::take(&mut self.needs_sync) {
            drop(session.sync(&path));
        }
        // Both sent now, in this order: the stored value is read no later than the line.
        let stored: futures::future::LocalBoxFuture<'static, _> = if watch_data {
            Box::pin(session.get_data_watched_by(&path, &me))
        } else {
            Box::pin(session.get_data(&path))
        };
        let listed: futures::future::LocalBoxFuture<'static, _> = if watch_children {
            Box::pin(session.children_watched_by(&path, &me))
        } else {
            Box::pin(session.children(&path))
        };
        let read = async move {
            let (stored, listed) = (stored.await, listed.await);
            let (stored, listed) = match (stored, listed) {
                (Err(Error::NoNode { .. }), _) | (_, Err(Error::NoNode { .. })) => return Err(Unread::Missing),
                (Err(error), _) | (_, Err(error)) => return Err(Unread::Failed(error)),
                (Ok(stored), Ok(listed)) => (stored, listed),
            };
            let Some(first) = path::sequential_in_order(listed.names).into_iter().next() else {
                return Ok(Reading::Vacant);
            };
            match session.get_data(&path::join(&path, &first)).await {
                Ok(leader) => Ok(Reading::Led {
                    leader_id: String::from_utf8_lossy(&leader.data).into_owned(),
                    term: FencingToken(leader.stat.czxid),
                    stored: stored.data,
                }),
                Err(Error::NoNode { .. }) => Err(Unread::Moved),
                Err(error) => Err(Unread::Failed(error)),
            }
        };
        let generation = self.generation;
        ctx.spawn(read.into_actor(self).map(move |outcome, act, ctx| act.on_read(generation, outcome, ctx)));
    }

    /// Reads the stored value again, for a leader known to lead in `term`: a value of a later
    /// term means the leader moved on, and the whole election is read (see `Observed::step`).
    fn reread_value(&mut self, leader_id: String, term: FencingToken, ctx: &mut Context<Self>) {
        self.reading = true;
        self.again = false;
        self.armed.data = true;
        let stored = self.shell.session().get_data_watched_by(&self.path, &self.shell.watcher(ctx));
        let read = async move {
            match stored.await {
                Ok(node) => Ok(Reading::Led { leader_id, term, stored: node.data }),
                Err(Error::NoNode { .. }) => Err(Unread::Missing),
                Err(error) => Err(Unread::Failed(error)),
            }
        };
        let generation = self.generation;
        ctx.spawn(read.into_actor(self).map(move |outcome, act, ctx| act.on_read(generation, outcome, ctx)));
    }

    fn on_read(&mut self, generation: u64, outcome: Result<Reading, Unread>, ctx: &mut Context<Self>) {
        self.reading = false;
        let _entered = self.shell.span().clone().entered();
        if generation != self.generation {
            // Read on a session that has ended since (or sent before the new session's sync):
            // neither its answer nor its watches count; read again.
            self.armed = Armed::default();
            self.refresh(ctx);
            return;
        }
        match outcome {
            Ok(reading) => self.take(reading),
            Err(Unread::Moved) => self.again = true,
            Err(Unread::Missing) => {
                // No watch was set on a missing node: wait for it to be made.
                self.armed.data = false;
                self.armed.children = false;
                self.take(Reading::Vacant);
                self.await_creation(ctx);
            }
            Err(Unread::Failed(error)) => {
                // The watches a failed reading meant to set may not be set.
                self.armed = Armed { creation: self.armed.creation, ..Armed::default() };
                if error.is_final() {
                    warn!(%error, "cannot read the election; the observer gives up");
                    for waiter in self.waiting.drain(..) {
                        let _ = waiter.send(Err(ElectionError::ZooKeeper(error.clone())));
                    }
                    self.report(RecipeState::Failed { reason: error.to_string() });
                    self.failed = Some(error);
                    return;
                }
                // The reconnect (or the new session) reads again after these.
                if !matches!(error, Error::ConnectionLoss { .. } | Error::SessionLost { .. }) {
                    debug!(%error, "cannot read the election; will read again unless final");
                    let mut backoff = self.shell.retry().backoff();
                    if let Err(error) = again_later(&mut backoff, error, ctx, |act: &mut Self, ctx| act.refresh(ctx)) {
                        debug!(%error, "cannot read the election; waiting for the connection");
                    }
                }
            }
        }
        if self.again {
            self.refresh(ctx);
        }
    }

    /// A reading is in: tell it when it is news.
    fn take(&mut self, reading: Reading) {
        self.report(RecipeState::Watching);
        match self.observed.step(reading) {
            Step::Tell(current) => {
                debug!(?current, "the election changed");
                self.shell.tell(ProclamationChanged { current });
            }
            Step::Quiet => {}
            Step::ReadAgain => self.again = true,
        }
        if let Some(current) = self.observed.current() {
            for waiter in self.waiting.drain(..) {
                let _ = waiter.send(Ok(current.clone()));
            }
        }
    }

    fn await_creation(&mut self, ctx: &mut Context<Self>) {
        if self.armed.creation {
            return;
        }
        self.armed.creation = true;
        let exists = self.shell.session().exists_watched_by(&self.path, &self.shell.watcher(ctx));
        ctx.spawn(exists.into_actor(self).map(|exists, act, ctx| match exists {
            // Made meanwhile: its creation fired no event for us, and the watch set is a data
            // watch now, which the reading's own watches stand for.
            Ok(Some(_)) => {
                act.armed.creation = false;
                act.refresh(ctx);
            }
            Ok(None) => {}
            Err(_) => act.armed.creation = false,
        }));
    }
}

crate::recipe::shell::on_the_shell!(ElectionObserver);

impl Actor for ElectionObserver {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.shell.health_slot("election-observer", &self.path);
        if let Err(error) = path::validate(&self.path, false) {
            warn!(parent: self.shell.span(), %error, "unusable election path");
            self.report(RecipeState::Failed { reason: error.to_string() });
            self.failed = Some(error);
            return;
        }
        self.shell.session().subscribe(ctx.address().recipient());
        self.refresh(ctx);
    }
}

impl Handler<WatchEvent> for ElectionObserver {
    type Result = ();

    fn handle(&mut self, event: WatchEvent, ctx: &mut Context<Self>) {
        debug!(parent: self.shell.span(), kind = ?event.kind, "watch event");
        if event.generation < self.generation {
            return;
        }
        match event.kind {
            // A data event may be the `exists` watch's too (set on a node made meanwhile).
            WatchEventKind::DataChanged => {
                self.armed.data = false;
                self.armed.creation = false;
                // Only the value changed (a new leader comes with a children event): one read.
                if let Some(Some(now)) = self.observed.current().filter(|_| !self.reading && self.failed.is_none()) {
                    let (leader_id, term) = (now.leader_id.clone(), now.term);
                    self.reread_value(leader_id, term, ctx);
                    return;
                }
            }
            WatchEventKind::ChildrenChanged => self.armed.children = false,
            WatchEventKind::NodeCreated => self.armed.creation = false,
            WatchEventKind::NodeDeleted => self.armed = Armed::default(),
            // The next session's `Connected` reads again.
            WatchEventKind::SessionEnded => {
                self.armed = Armed::default();
                return;
            }
            // Only persistent watches are refused so; the observer sets one-shot ones.
            WatchEventKind::WatchRefused(_) => return,
        }
        self.refresh(ctx);
    }
}

impl Handler<SessionEvent> for ElectionObserver {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        match event {
            // Every new session (the first one included: the observer may have started before
            // it, and its first reading failed or waited) is read afresh, after a `sync`.
            SessionEvent::Connected { generation, .. } if generation > self.generation => {
                info!(parent: self.shell.span(), generation, "new session; reading the election again");
                self.generation = generation;
                self.armed = Armed::default();
                self.needs_sync = true;
                self.report(RecipeState::Idle);
                self.refresh(ctx);
            }
            SessionEvent::Reconnected { .. } => {
                self.report(RecipeState::Idle);
                self.refresh(ctx);
            }
            SessionEvent::Suspended { generation, .. } => {
                self.generation = self.generation.max(generation);
                self.report(RecipeState::Idle);
            }
            SessionEvent::Expired { generation, .. } => {
                self.generation = self.generation.max(generation);
                self.armed = Armed::default();
            }
            _ => {}
        }
    }
}

impl Handler<CurrentProclamation> for ElectionObserver {
    type Result = Reply<Result<Option<Proclamation>, ElectionError>>;

    fn handle(&mut self, _: CurrentProclamation, _: &mut Context<Self>) -> Self::Result {
        if let Some(error) = &self.failed {
            return Reply::Now(Err(ElectionError::ZooKeeper(error.clone())));
        }
        if let Some(current) = self.observed.current() {
            return Reply::Now(Ok(current.clone()));
        }
        let (pending, reply) = Reply::later(Err(ElectionError::Stopped { path: self.path.clone() }));
        self.waiting.push(pending);
        reply
    }
}

impl Handler<Listen<ProclamationChanged>> for ElectionObserver {
    type Result = ();

    fn handle(&mut self, mut msg: Listen<ProclamationChanged>, _: &mut Context<Self>) {
        // A stream starts with the current reading, as a late subscriber does.
        if let Some(current) = self.observed.current() {
            msg.listener.offer(ProclamationChanged { current: current.clone() });
        }
        self.shell.subscribers().listen(msg.listener);
    }
}

/// A late subscriber hears the current reading at once.
impl Handler<Subscribe<ProclamationChanged>> for ElectionObserver {
    type Result = ();

    fn handle(&mut self, msg: Subscribe<ProclamationChanged>, _: &mut Context<Self>) {
        if let Some(current) = self.observed.current() {
            msg.recipient.do_send(ProclamationChanged { current: current.clone() });
        }
        self.shell.subscribers().add(msg.recipient);
    }
}

impl Handler<Stop> for ElectionObserver {
    type Result = ();

    /// An observer takes no part in the election: stopping it only stops watching.
    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        info!(path = %self.path, "observer stopping");
        ctx.stop();
    }
}
