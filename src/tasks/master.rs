//! [`TaskMaster`]: a candidate for master of one master–worker installation.
//!
//! Owns: the candidate's election (an [`ElectionActor`] at `<root>/master`, Curator
//! `LeaderLatch` layout) and relaying what happens to subscribers. Does not own the master's
//! work: each term of office is a fresh [`MasterTerm`] that the election starts and stops.

use std::rc::Rc;

use actix::prelude::*;
use tracing::{debug, info, warn};

use super::error::TaskError;
use super::layout::Layout;
use super::master_fence::MasterFence;
use super::messages::*;
use super::strategy::{AssignStrategy, LeastLoaded};
use super::term::MasterTerm;
use crate::builder::Opaque;
use crate::election::{self, ElectionActor, ElectionConfig, ElectionEvent};
use crate::recipe::ConnectionPolicy;
use crate::recipe::naming::default_participant_id;
use crate::recipe::shell::{Shell, start_inner};
use crate::retry::{Backoff, RetryPolicy, again_later};
use crate::session::SessionHandle;

type StrategyFactory = Rc<dyn Fn() -> Box<dyn AssignStrategy>>;

/// How a [`TaskMaster`] candidate takes part.
#[derive(Clone, Debug)]
pub struct TaskMasterConfig {
    root: String,
    master_id: String,
    policy: ConnectionPolicy,
    strategy: Opaque<StrategyFactory>,
    retry: Option<RetryPolicy>,
}

impl TaskMasterConfig {
    /// The installation's root.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// A candidate for the installation at `root`, assigning least-loaded first.
    pub fn new(root: impl Into<String>) -> Self {
        TaskMasterConfig {
            root: root.into(),
            master_id: default_participant_id(),
            policy: ConnectionPolicy::default(),
            strategy: Opaque(Rc::new(|| Box::new(LeastLoaded))),
            retry: None,
        }
    }

    crate::builder::setters! {
        /// How this master candidate retries a failed request; default: its session's policy
        /// ([`SessionConfig::with_retry`](crate::session::SessionConfig::with_retry)).
        with_retry(retry: RetryPolicy) => some;

        /// Stored in the election node; what others see in `MasterChanged`.
        with_master_id(master_id: impl Into<String>) => into;

        /// What a master assumes when its connection drops (default: conservative, so a master
        /// stops assigning while disconnected).
        with_policy(policy: ConnectionPolicy);
    }

    /// How tasks are spread: `factory` makes a fresh strategy for every term, e.g.
    /// `|| RoundRobin::default()`.
    pub fn with_strategy<S: AssignStrategy, F: Fn() -> S + 'static>(mut self, factory: F) -> Self {
        self.strategy = Opaque(Rc::new(move || Box::new(factory())));
        self
    }
}

/// A master candidate; see `docs/recipes/master-worker.md`.
///
/// ```no_run
/// # fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::tasks::TaskError> {
/// use actix::Actor;
/// use actix_zookeeper::tasks::{RoundRobin, TaskMaster, TaskMasterConfig};
///
/// let config = TaskMasterConfig::new("/jobs").with_master_id("master-1").with_strategy(RoundRobin::default);
/// let master = TaskMaster::new(session, config)?.start();
/// # Ok(()) }
/// ```
pub struct TaskMaster {
    layout: Layout,
    config: TaskMasterConfig,
    /// Its health entry is the master's own.
    election: Option<Addr<ElectionActor>>,
    term: Option<MasterFence>,
    /// Delay before trying to create the directories again.
    backoff: Backoff,
    master_id: Option<String>,
    /// Kept last: its lifeline must drop after everything else the actor holds.
    shell: Shell<MasterEvent>,
}

impl TaskMaster {
    /// A candidate; start it with `.start()`. It enters the election at once.
    pub fn new(session: SessionHandle, config: TaskMasterConfig) -> Result<TaskMaster, TaskError> {
        let layout = Layout::new(&config.root)?;
        let span = tracing::info_span!("zk.tasks.master", root = %config.root, id = %config.master_id);
        let shell = Shell::new(session, span, config.retry);
        let backoff = shell.retry().backoff();
        Ok(TaskMaster { shell, layout, config, election: None, term: None, backoff, master_id: None })
    }

    fn broadcast(&mut self, event: MasterEvent) {
        self.shell.tell(event);
    }

    /// Creates the directories (a term watches them), then joins the election.
    fn prepare(&mut self, ctx: &mut Context<Self>) {
        let ensured = self.layout.ensure(self.shell.session());
        ctx.wait(ensured.into_actor(self).map(|ensured, act, ctx| match ensured {
            Ok(()) => act.join_election(ctx),
            Err(error) => {
                debug!(parent: act.shell.span(), %error, "cannot create the directories yet");
                if let Err(error) = again_later(&mut act.backoff, error, ctx, |act: &mut Self, ctx| act.prepare(ctx)) {
                    warn!(parent: act.shell.span(), %error, "cannot create the master-worker directories");
                    act.broadcast(MasterEvent::MasterFailed { error });
                }
            }
        }));
    }

    fn join_election(&mut self, ctx: &mut Context<Self>) {
        let session = self.shell.session().clone();
        let layout = self.layout.clone();
        let strategy = self.config.strategy.0.clone();
        let report = ctx.address().downgrade().recipient::<MasterEvent>();
        let retry = self.shell.retry();
        let config = ElectionConfig::new(self.layout.master())
            .with_participant_id(self.config.master_id.clone())
            .with_policy(self.config.policy)
            .with_retry(retry)
            .with_leader_actor(move |term| {
                let fence: MasterFence = term;
                MasterTerm::new(session.clone(), layout.clone(), fence, strategy(), report.clone(), retry)
            });
        let election = ElectionActor::new(self.shell.session().clone(), config);
        self.election = Some(start_inner(&self.shell, election, ctx.address().recipient()));
    }
}

impl Actor for TaskMaster {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        info!(parent: self.shell.span(), "standing for master");
        self.prepare(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        if let Some(election) = self.election.take() {
            election.do_send(election::Stop);
        }
    }
}

impl Handler<ElectionEvent> for TaskMaster {
    type Result = ();

    fn handle(&mut self, event: ElectionEvent, _: &mut Context<Self>) {
        match event {
            ElectionEvent::LeaderChanged { leader_id } => {
                self.master_id = leader_id.clone();
                self.broadcast(MasterEvent::MasterChanged { master_id: leader_id });
            }
            ElectionEvent::ElectionFailed { error } => self.broadcast(MasterEvent::MasterFailed { error }),
            // The term actor tells when a term starts and ends.
            _ => {}
        }
    }
}

/// Events from the current term, relayed to subscribers.
impl Handler<MasterEvent> for TaskMaster {
    type Result = ();

    fn handle(&mut self, event: MasterEvent, _: &mut Context<Self>) {
        match &event {
            MasterEvent::BecameMaster { fence } => self.term = Some(fence.clone()),
            MasterEvent::MastershipEnded { token } if self.term.as_ref().is_some_and(|f| f.token == *token) => {
                self.term = None
            }
            _ => {}
        }
        self.broadcast(event);
    }
}

impl Handler<Subscribe<MasterEvent>> for TaskMaster {
    type Result = ();

    fn handle(&mut self, msg: Subscribe<MasterEvent>, _: &mut Context<Self>) {
        // A late subscriber learns the current state at once.
        if let Some(id) = &self.master_id {
            msg.recipient.do_send(MasterEvent::MasterChanged { master_id: Some(id.clone()) });
        }
        if let Some(fence) = &self.term {
            msg.recipient.do_send(MasterEvent::BecameMaster { fence: fence.clone() });
        }
        self.shell.subscribers().add(msg.recipient);
    }
}

impl Handler<CurrentTerm> for TaskMaster {
    type Result = Option<MasterFence>;

    fn handle(&mut self, _: CurrentTerm, _: &mut Context<Self>) -> Option<MasterFence> {
        self.term.clone()
    }
}

/// Leaves the election (a master hands over at once) and stops the candidate, once its
/// election node is deleted.
impl Handler<Stop> for TaskMaster {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        info!(parent: self.shell.span(), "leaving the election");
        let Some(election) = self.election.clone() else {
            ctx.stop();
            return;
        };
        // Resign first (the term ends, then our node goes), so that the candidate stops only
        // once it has left: stopping at once would leave the delete to a detached task.
        let resigned = crate::reply::tell(&election, election::Resign { requeue: false }, ());
        ctx.wait(actix::fut::wrap_future::<_, Self>(resigned).map(|_, _, ctx| ctx.stop()));
    }
}

crate::recipe::shell::on_the_shell!(TaskMaster => MasterEvent);
