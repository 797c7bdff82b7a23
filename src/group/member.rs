//! [`GroupMember`]: our membership in one group, and the view of the others.
//!
//! Membership state machine: `Joining{generation} → Joined{generation}`, again on every new
//! session (the server deleted our ephemeral node with the old one), `→ Left` after [`Leave`].

use actix::prelude::*;
use futures::channel::oneshot;
use tracing::{debug, info, warn};

use super::config::GroupConfig;
use super::error::GroupError;
use super::messages::*;
use crate::cache::{self, CacheEvent, ChildrenView};
use crate::path;
use crate::recipe::guarded::{delete_own_ephemeral, delete_own_ephemeral_detached};
use crate::recipe::registration::{NextStep, again_after, next_step, register_ephemeral};
use crate::recipe::shell::Shell;
use crate::retry::Backoff;
use crate::session::IntoActorFree;
use crate::session::requests::Goodbye;
use crate::session::{SessionEvent, SessionHandle};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Membership {
    Joining { generation: u64 },
    Joined { generation: u64 },
    Left,
}

/// A member of one group; see `docs/recipes/group.md`.
///
/// ```no_run
/// # fn demo(session: actix_zookeeper::SessionHandle, me: actix::Recipient<actix_zookeeper::group::GroupEvent>)
/// # -> Result<(), actix_zookeeper::group::GroupError> {
/// use actix::Actor;
/// use actix_zookeeper::group::{GroupConfig, GroupMember, Subscribe};
///
/// let config = GroupConfig::new("/services/billing/members", "host-a:8080").with_data("v1.4");
/// let member = GroupMember::new(session, config)?.start();
/// member.do_send(Subscribe { recipient: me }); // MemberJoined, MemberLeft, ...
/// # Ok(()) }
/// ```
pub struct GroupMember {
    config: GroupConfig,
    node: String,
    membership: Membership,
    generation: u64,
    /// Stopped with this actor (dropped with it).
    view: Option<ChildrenView>,
    ready: bool,
    /// Delay before the next try to join; reset once joined.
    backoff: Backoff,
    /// Why joining ended for good (a final error), told to every subscriber, late ones too.
    failed: Option<GroupError>,
    /// Joins whose requests are in flight: a create may still be sent, or applied unanswered
    /// (two, when a new session begins one while the old session's is out).
    joins_in_flight: u32,
    /// Callers of `Leave`, answered once our node is gone (after an in-flight join has landed).
    leaving: Vec<oneshot::Sender<Result<(), GroupError>>>,
    /// Kept last: its lifeline must drop after everything else the actor holds.
    shell: Shell<GroupEvent>,
}

impl GroupMember {
    /// A member; start it with `.start()`. It joins at once, and watches the group.
    pub fn new(session: SessionHandle, config: GroupConfig) -> Result<GroupMember, GroupError> {
        config.validate()?;
        let node = path::join(&config.group, &config.id);
        let span = tracing::info_span!("zk.group", group = %config.group, id = %config.id);
        let shell = Shell::new(session, span, config.retry);
        let backoff = shell.retry().backoff();
        Ok(GroupMember {
            shell,
            config,
            node,
            membership: Membership::Joining { generation: 0 },
            generation: 0,
            view: None,
            ready: false,
            backoff,
            failed: None,
            joins_in_flight: 0,
            leaving: Vec::new(),
        })
    }

    fn tell(&mut self, event: GroupEvent) {
        self.shell.tell(event);
    }

    fn id_of(&self, node: &str) -> Option<String> {
        path::parent(node).filter(|p| *p == self.config.group).map(|_| path::name(node).to_owned())
    }

    /// Creates our ephemeral member node (and the group's node if missing). A node left by our
    /// own lost create is ours; one of another live session means the id is taken.
    fn join(&mut self, ctx: &mut Context<Self>) {
        if self.membership == Membership::Left {
            return;
        }
        let generation = self.generation;
        self.membership = Membership::Joining { generation };
        let parents = vec![self.config.group.clone()];
        let joined = register_ephemeral(
            &self.shell.session().pinned(generation),
            parents,
            self.node.clone(),
            self.config.data.clone(),
        );
        self.joins_in_flight += 1;
        ctx.spawn(joined.into_actor_free().map(move |joined, act: &mut Self, ctx| {
            act.joins_in_flight -= 1;
            if !act.leaving.is_empty() {
                // `Leave` came while a join was in flight: once the last has landed, whatever
                // they created goes.
                if act.joins_in_flight == 0 {
                    act.finish_leave(ctx);
                }
                return;
            }
            if act.membership != (Membership::Joining { generation }) {
                return;
            }
            match next_step(joined, &mut act.backoff, &act.node) {
                NextStep::Registered(_) => {
                    info!(parent: act.shell.span(), generation, "joined the group");
                    act.membership = Membership::Joined { generation };
                    act.tell(GroupEvent::Joined { generation });
                }
                NextStep::AwaitSession => {
                    debug!(parent: act.shell.span(), generation, "the session ended before the join; joining on the next")
                }
                NextStep::GiveUp(error) => {
                    // The actor stays, so that late subscribers hear it too.
                    warn!(parent: act.shell.span(), %error, "cannot join; giving up");
                    if error.outcome_unknown() {
                        // The last create may have applied: a member whose join failed must not
                        // stay visible to the others. Detached, it outlives a stop.
                        delete_own_ephemeral_detached(act.shell.session().pinned(generation), act.node.clone());
                    }
                    let error = GroupError::ZooKeeper(error);
                    act.membership = Membership::Left;
                    act.failed = Some(error.clone());
                    act.tell(GroupEvent::JoinFailed { error });
                }
                NextStep::RetryAfter { delay, taken } => {
                    if taken {
                        act.id_taken();
                    }
                    again_after(ctx, delay, move |act: &Self| act.membership == Membership::Joining { generation }, Self::join);
                }
            }
        }));
    }

    /// Our id is another live session's member node: told, and tried again later.
    fn id_taken(&mut self) {
        let error = GroupError::IdTaken { id: self.config.id.clone() };
        warn!(parent: self.shell.span(), %error, "cannot join; trying again");
        self.tell(GroupEvent::JoinFailed { error });
    }

    /// Deletes our node (only if our session owns it, by its czxid) and answers every `Leave`.
    fn finish_leave(&mut self, ctx: &mut Context<Self>) {
        let deleted = delete_own_ephemeral(self.shell.session().pinned(self.generation), self.node.clone());
        ctx.spawn(deleted.into_actor(self).map(|deleted, act, ctx| {
            let outcome = deleted.map_err(GroupError::from);
            for answer in act.leaving.drain(..) {
                let _ = answer.send(outcome.clone());
            }
            ctx.stop();
        }));
    }
}

impl Actor for GroupMember {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.shell.hear_session(ctx);
        match ChildrenView::start(&self.shell, self.config.group.clone(), ctx.address().recipient()) {
            Ok(view) => self.view = Some(view),
            // The group path was validated in `new`.
            Err(error) => warn!(parent: self.shell.span(), %error, "cannot watch the group"),
        }
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        // The view stops as it drops, with this actor.
        // Left, but not yet deleted (a `Leave` still waits): delete here too.
        if self.membership != Membership::Left || !self.leaving.is_empty() {
            delete_own_ephemeral_detached(self.shell.session().pinned(self.generation), self.node.clone());
        }
    }
}

impl Handler<SessionEvent> for GroupMember {
    type Result = ();

    fn handle(&mut self, event: SessionEvent, ctx: &mut Context<Self>) {
        // The first sight of a new session is when to join.
        if event.moves_to_new_session(&mut self.generation) {
            self.join(ctx);
        }
    }
}

impl Handler<CacheEvent> for GroupMember {
    type Result = ();

    fn handle(&mut self, event: CacheEvent, ctx: &mut Context<Self>) {
        let told = match event {
            CacheEvent::NodeAdded { path, data, .. } => {
                self.id_of(&path).map(|id| GroupEvent::MemberJoined { id, data: data.unwrap_or_default() })
            }
            CacheEvent::NodeUpdated { path, data, .. } => {
                self.id_of(&path).map(|id| GroupEvent::MemberUpdated { id, data: data.unwrap_or_default() })
            }
            CacheEvent::NodeRemoved { path } => {
                let id = self.id_of(&path);
                // Our own node went while we think we are in: the server ended our session
                // (a new one follows and we join again), or someone deleted it: join again.
                if id.as_deref() == Some(self.config.id.as_str()) {
                    if let Membership::Joined { generation } = self.membership {
                        if generation == self.generation {
                            debug!(parent: self.shell.span(), "our member node is gone; joining again");
                            self.join(ctx);
                        }
                    }
                }
                id.map(|id| GroupEvent::MemberLeft { id })
            }
            CacheEvent::CacheInitialized => {
                self.ready = true;
                Some(GroupEvent::ViewReady)
            }
            CacheEvent::CacheResynced => Some(GroupEvent::ViewResynced),
            // A member node we may not read: the view goes on without it.
            CacheEvent::NodeSkipped { .. } => None,
            CacheEvent::CacheFailed { error } => Some(GroupEvent::JoinFailed { error: error.into() }),
        };
        if let Some(event) = told {
            self.tell(event);
        }
    }
}

/// A late subscriber first gets `MemberJoined` for every member in the view (and `ViewReady`
/// once it is ready).
impl Handler<Subscribe<GroupEvent>> for GroupMember {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, msg: Subscribe<GroupEvent>, _: &mut Context<Self>) -> Self::Result {
        // The view as it is now, then live events: the same story a first subscriber heard.
        let snapshot = self.view.as_ref().map(|view| view.addr().send(cache::Snapshot));
        Box::pin(
            async move {
                match snapshot {
                    Some(snapshot) => snapshot.await.unwrap_or_default(),
                    None => Default::default(),
                }
            }
            .into_actor(self)
            .map(move |held, act, _| {
                for (path, node) in held {
                    if let Some(id) = act.id_of(&path) {
                        msg.recipient.do_send(GroupEvent::MemberJoined { id, data: node.data.unwrap_or_default() });
                    }
                }
                if act.ready {
                    msg.recipient.do_send(GroupEvent::ViewReady);
                }
                if let Membership::Joined { generation } = act.membership {
                    msg.recipient.do_send(GroupEvent::Joined { generation });
                }
                if let Some(error) = &act.failed {
                    msg.recipient.do_send(GroupEvent::JoinFailed { error: error.clone() });
                }
                act.shell.subscribers().add(msg.recipient);
            }),
        )
    }
}

impl Handler<Members> for GroupMember {
    type Result = ResponseFuture<std::collections::BTreeMap<String, Vec<u8>>>;

    fn handle(&mut self, _: Members, _: &mut Context<Self>) -> Self::Result {
        let snapshot = self.view.as_ref().map(|view| view.addr().send(cache::Snapshot));
        let group = self.config.group.clone();
        Box::pin(async move {
            let Some(snapshot) = snapshot else { return Default::default() };
            snapshot
                .await
                .unwrap_or_default()
                .into_iter()
                .filter(|(p, _)| path::parent(p) == Some(group.as_str()))
                .map(|(p, node)| (path::name(&p).to_owned(), node.data.unwrap_or_default()))
                .collect()
        })
    }
}

impl Handler<Leave> for GroupMember {
    type Result = ResponseFuture<Result<(), GroupError>>;

    fn handle(&mut self, _: Leave, ctx: &mut Context<Self>) -> Self::Result {
        self.membership = Membership::Left;
        info!(parent: self.shell.span(), "leaving the group");
        let (answer, answered) = oneshot::channel();
        self.leaving.push(answer);
        // A join in flight may create our node after a delete sent now has looked for it: its
        // landing deletes instead. A second `Leave` joins the first.
        if self.joins_in_flight == 0 && self.leaving.len() == 1 {
            self.finish_leave(ctx);
        }
        Box::pin(async move { answered.await.unwrap_or(Err(GroupError::from(crate::error::Error::Closed))) })
    }
}

crate::reply::handle_told!(GroupMember: Leave);

crate::recipe::shell::on_the_shell!(GroupMember => GroupEvent);

impl Handler<Goodbye> for GroupMember {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: Goodbye, ctx: &mut Context<Self>) -> Self::Result {
        // The session is closing: leave as `Leave` does (our node deleted, the member stops).
        let left = <Self as Handler<Leave>>::handle(self, Leave, ctx);
        Box::pin(async move {
            let _ = left.await;
        })
    }
}
