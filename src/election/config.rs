//! How an election participant takes part ([`ElectionConfig`]) and what an observer watches
//! ([`ElectionObserverConfig`]).

use std::time::Duration;

use actix::prelude::*;
use futures::channel::oneshot;

use super::messages::{LeaderTerm, StopLeading};
use crate::builder::Opaque;
use crate::recipe::Participation;

/// A leader actor started for one term: where to send [`StopLeading`], and what resolves once
/// it has stopped (its `stopped()` ran; `Canceled` if its Arbiter went away first).
pub(super) struct LeaderRun {
    pub(super) stop: Recipient<StopLeading>,
    pub(super) stopped: oneshot::Receiver<()>,
}

pub(super) type LeaderFactory = Box<dyn Fn(LeaderTerm) -> LeaderRun>;

/// A [`LeaderFactory`] that may cross to the session's thread (`launcher::launched_here`).
pub(super) type SendLeaderFactory = Box<dyn Fn(LeaderTerm) -> LeaderRun + Send>;

/// How long a leader actor told [`StopLeading`] may take to stop before the election goes on
/// without it (deletes its node, or starts the next term's actor).
pub const DEFAULT_LEADER_STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// How an [`ElectionActor`](super::ElectionActor) takes part.
#[derive(Debug)]
#[must_use]
pub struct ElectionConfig {
    pub(super) path: String,
    pub(super) participation: Participation,
    pub(super) requeue_after_loss: bool,
    pub(super) leader: Option<Opaque<LeaderFactory>>,
    pub(super) leader_stop_timeout: Duration,
}

impl ElectionConfig {
    /// An election at `path` (the directory of the participants' nodes).
    pub fn new(path: impl Into<String>) -> Self {
        ElectionConfig {
            path: path.into(),
            participation: Participation::default(),
            requeue_after_loss: true,
            leader: None,
            leader_stop_timeout: DEFAULT_LEADER_STOP_TIMEOUT,
        }
    }

    crate::recipe::participation_setters!(id: ": what other participants see in `LeaderChanged`", holder: "a leader");

    crate::builder::setters! {
        /// After losing leadership, stand in line again (default: yes, like Curator's
        /// `autoRequeue`).
        with_requeue_after_loss(requeue_after_loss: bool);
    }

    /// The election directory.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Leader-actor mode: `factory` builds the actor that does the leader's work. It is started
    /// on the Arbiter that started the participant (yours: with
    /// [`ElectionHandle::start`](super::ElectionHandle::start) the participant runs on its
    /// session's thread, its leader actors on yours) when leadership is acquired or restored,
    /// and sent [`StopLeading`] when leadership is suspended, lost or given up. Should that
    /// Arbiter stop while the participant lives on (a handle kept elsewhere), no leader actor can
    /// start any more: a warning is logged, and the term goes on without one.
    ///
    /// Like Curator's `LeaderSelector`, which deletes its node only once `takeLeadership`
    /// returned: a resigning (or stopping) participant deletes its node only once its leader
    /// actor has *stopped* (its `stopped()` ran), and a participant never runs two leader
    /// actors at once — the next term's actor starts only once the last one has stopped. Both
    /// waits are bounded by [`with_leader_stop_timeout`](Self::with_leader_stop_timeout).
    pub fn with_leader_actor<A, F>(mut self, factory: F) -> Self
    where
        A: Actor<Context = Context<A>> + Handler<StopLeading>,
        F: Fn(LeaderTerm) -> A + 'static,
    {
        self.leader = Some(Opaque(Box::new(move |term| {
            // What `start()` does, keeping the actor's future so that we learn when it ends.
            let running = Context::new().into_future(factory(term));
            let stop = running.address().recipient();
            let (done, stopped) = oneshot::channel();
            actix::spawn(async move {
                running.await;
                let _ = done.send(());
            });
            LeaderRun { stop, stopped }
        })));
        self
    }

    crate::builder::setters! {
        /// How long a leader actor may take to stop after [`StopLeading`] before this participant
        /// goes on without it (default [`DEFAULT_LEADER_STOP_TIMEOUT`]); a warning is logged then.
        with_leader_stop_timeout(leader_stop_timeout: Duration);
    }
}

/// What an [`ElectionObserver`](super::ElectionObserver) watches: the election at a path. A
/// path converts into one, so `ElectionObserverHandle::start(session, "/path")` reads as the
/// other recipes' `start(session, config)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct ElectionObserverConfig {
    pub(super) path: String,
}

impl ElectionObserverConfig {
    /// An observer of the election at `path`.
    pub fn new(path: impl Into<String>) -> Self {
        ElectionObserverConfig { path: path.into() }
    }

    /// The election directory.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl From<&str> for ElectionObserverConfig {
    fn from(path: &str) -> Self {
        ElectionObserverConfig::new(path)
    }
}

impl From<String> for ElectionObserverConfig {
    fn from(path: String) -> Self {
        ElectionObserverConfig::new(path)
    }
}

impl From<&String> for ElectionObserverConfig {
    fn from(path: &String) -> Self {
        ElectionObserverConfig::new(path.as_str())
    }
}
