//! How an election participant takes part: [`ElectionConfig`].

use actix::prelude::*;

use super::messages::{LeaderTerm, StopLeading};
use crate::recipe::ConnectionPolicy;
use crate::recipe::naming;

pub(super) type LeaderFactory = Box<dyn Fn(LeaderTerm) -> Recipient<StopLeading>>;

/// How an [`ElectionActor`](super::ElectionActor) takes part.
#[must_use]
pub struct ElectionConfig {
    pub(super) path: String,
    pub(super) participant_id: String,
    pub(super) policy: ConnectionPolicy,
    pub(super) requeue_after_loss: bool,
    pub(super) leader: Option<LeaderFactory>,
}

impl std::fmt::Debug for ElectionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElectionConfig")
            .field("path", &self.path)
            .field("participant_id", &self.participant_id)
            .field("policy", &self.policy)
            .field("requeue_after_loss", &self.requeue_after_loss)
            .field("leader_actor", &self.leader.is_some())
            .finish()
    }
}

impl ElectionConfig {
    /// An election at `path` (the directory of the participants' nodes).
    pub fn new(path: impl Into<String>) -> Self {
        ElectionConfig {
            path: path.into(),
            participant_id: naming::default_participant_id(),
            policy: ConnectionPolicy::default(),
            requeue_after_loss: true,
            leader: None,
        }
    }

    /// Stored as our node's data; what other participants see in `LeaderChanged`.
    pub fn with_participant_id(mut self, id: impl Into<String>) -> Self {
        self.participant_id = id.into();
        self
    }

    /// What a leader assumes when the connection drops (default: conservative).
    pub fn with_policy(mut self, policy: ConnectionPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// After losing leadership, stand in line again (default: yes, like Curator's
    /// `autoRequeue`).
    pub fn with_requeue_after_loss(mut self, requeue: bool) -> Self {
        self.requeue_after_loss = requeue;
        self
    }

    /// The election directory.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Leader-actor mode: `factory` builds the actor that does the leader's work. It is started
    /// (on this actor's Arbiter) when leadership is acquired or restored, and sent
    /// [`StopLeading`] when leadership is suspended, lost or given up.
    pub fn with_leader_actor<A, F>(mut self, factory: F) -> Self
    where
        A: Actor<Context = Context<A>> + Handler<StopLeading>,
        F: Fn(LeaderTerm) -> A + 'static,
    {
        self.leader = Some(Box::new(move |term| factory(term).start().recipient()));
        self
    }
}
