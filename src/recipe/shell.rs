//! [`Shell`]: what every recipe actor has around its core, kept in one place: the session it
//! runs on, its tracing span, who hears its events, its entry on the session's health board and
//! the tag its handles read it through, its retry policy, the lifeline its handles' `stop()`
//! awaits, and the owner of its one-shot watches (which leave the server as it stops). [`on_the_shell!`] writes the handlers that only touch these (awaiting the end,
//! attaching a reader or a subscriber).
//!
//! Owns: the parts of a recipe actor that do not depend on the recipe, and attaching the actor
//! to its session (events, close, the stop at its last address). Does not own what a recipe
//! does (its core), what it tells (its events) or when its health changes (it says so).

use actix::prelude::*;

use crate::events::Subscribers;
use crate::retry::RetryPolicy;
use crate::session::health::{HealthSlot, HealthTag};
use crate::session::requests::Goodbye;
use crate::session::residents::Resident;
use crate::session::watch::{WatchOwner, Watcher};
use crate::session::{SessionHandle, WatchEvent};
use crate::stop::{AwaitStopped, Lifeline};

/// The recipe-independent half of a recipe actor; see the [module docs](self).
pub(crate) struct Shell<E: Message<Result = ()> + Clone + Send + 'static> {
    session: SessionHandle,
    span: tracing::Span,
    subscribers: Subscribers<E>,
    /// Its entry on the session's health board, once it has one.
    health: Option<HealthSlot>,
    /// Where the handles read `health` and keep a failed entry (see `HealthSlot::keep_failed`);
    /// `None` for an actor started by hand.
    health_tag: Option<HealthTag>,
    /// The recipe's own retry policy (its config's), if it has one.
    retry: Option<RetryPolicy>,
    /// Dropped with the actor: tells its pending one-shot watches to leave the server.
    watches: WatchOwner,
    /// Tells whoever awaits its end (a handle's `stop()`) once the rest is gone: shared with an
    /// item of the actor's context (see [`attach`](Self::attach)), which actix drops after the
    /// actor and its mailbox, so that a caller on another thread finds the address disconnected
    /// once told. Without the item (an actor never attached), it goes with the shell, which a
    /// recipe actor keeps last (fields drop in order).
    lifeline: std::sync::Arc<std::sync::Mutex<Lifeline>>,
    /// Its place on its session's thread, if it runs there (`start_beside_session`): that
    /// thread stops only once the actor is gone.
    resident: Option<Resident>,
}

impl<E: Message<Result = ()> + Clone + Send + 'static> Shell<E> {
    /// A shell on `session`, whose steps are traced in `span`, retrying as `retry` says (or as
    /// the session does, when `None`).
    pub(crate) fn new(session: SessionHandle, span: tracing::Span, retry: Option<RetryPolicy>) -> Self {
        Shell {
            session,
            span,
            subscribers: Subscribers::new(),
            health: None,
            health_tag: None,
            retry,
            lifeline: Default::default(),
            watches: WatchOwner::default(),
            resident: None,
        }
    }

    /// The actor lives on its session's thread, which runs until `resident` drops with it.
    pub(crate) fn reside(&mut self, resident: Option<Resident>) {
        self.resident = resident;
    }

    /// The session the recipe runs on.
    pub(crate) fn session(&self) -> &SessionHandle {
        &self.session
    }

    /// The recipe's span.
    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// How the recipe retries a failed request: its own policy, else its session's.
    pub(crate) fn retry(&self) -> RetryPolicy {
        self.session.retry_policy_or(self.retry)
    }

    /// Tells `event` to every reader and subscriber.
    pub(crate) fn tell(&mut self, event: E) {
        self.subscribers.tell(event);
    }

    /// Who hears the recipe's events.
    pub(crate) fn subscribers(&mut self) -> &mut Subscribers<E> {
        &mut self.subscribers
    }

    /// Shows the recipe's health entry to its handles through `tag` (from now on, and the entry
    /// it has already, if any).
    pub(crate) fn show_health_to(&mut self, tag: HealthTag) {
        if let Some(slot) = &self.health {
            tag.point_at(slot);
        }
        self.health_tag = Some(tag);
    }

    /// This shell with its recipe on the health board from the start, as a `kind` at `path`.
    pub(crate) fn on_board(mut self, kind: &'static str, path: &str) -> Self {
        self.health_slot(kind, path);
        self
    }

    /// The recipe's health entry, put on the board as a `kind` at `path` the first time.
    pub(crate) fn health_slot(&mut self, kind: &'static str, path: &str) -> &mut HealthSlot {
        let (board, tag) = (&self.session, &self.health_tag);
        self.health.get_or_insert_with(|| {
            let slot = board.health_board().slot(kind, path);
            if let Some(tag) = tag {
                tag.point_at(&slot);
            }
            slot
        })
    }

    /// True once the recipe has a health entry.
    pub(crate) fn has_health(&self) -> bool {
        self.health.is_some()
    }

    /// The recipe's health entry, if it has one.
    pub(crate) fn health(&mut self) -> Option<&mut HealthSlot> {
        self.health.as_mut()
    }

    /// Where the recipe's handles read its health entry, if a handle does: for a recipe whose
    /// entry is another actor's (a view it runs).
    pub(crate) fn health_tag(&self) -> Option<&HealthTag> {
        self.health_tag.as_ref()
    }

    /// The recipe failed for good and stops: its entry stays on the board as failed for
    /// `reason`, for as long as `HealthSlot::keep_failed` says (a handle showing it keeps it
    /// until the handle goes).
    pub(crate) fn fail_for_good(&mut self, reason: String) {
        if let Some(slot) = self.health.take() {
            slot.keep_failed(reason, self.health_tag.as_ref());
        }
    }

    /// The actor of `ctx` as the owner of one-shot watches (`SessionHandle::*_watched_by`):
    /// their events go to it, and they leave the server as soon as it stops.
    pub(crate) fn watcher<A>(&self, ctx: &Context<A>) -> Watcher
    where
        A: Actor<Context = Context<A>> + Handler<WatchEvent>,
    {
        self.watches.watcher(ctx.address().recipient())
    }

    /// Keeps `waiter` until the actor is gone.
    pub(crate) fn await_stopped(&mut self, waiter: AwaitStopped) {
        self.lifeline.lock().unwrap_or_else(std::sync::PoisonError::into_inner).keep(waiter);
    }

    /// Attaches the actor of `ctx` to its session: it hears the session's events and its close
    /// (a [`Goodbye`]), and stops once its last address is dropped, whatever timers it runs.
    pub(crate) fn attach<A>(&self, ctx: &mut Context<A>)
    where
        A: Actor<Context = Context<A>> + Handler<crate::session::SessionEvent> + Handler<Goodbye>,
    {
        self.hear_session(ctx);
        crate::stop::stop_when_unaddressed(ctx);
        crate::stop::keep_until_dropped(ctx, self.lifeline.clone());
    }

    /// The actor of `ctx` hears its session's events and its close (a [`Goodbye`]).
    pub(crate) fn hear_session<A>(&self, ctx: &mut Context<A>)
    where
        A: Actor<Context = Context<A>> + Handler<crate::session::SessionEvent> + Handler<Goodbye>,
    {
        self.session.subscribe(ctx.address().recipient());
        self.session.on_close(ctx.address().recipient());
    }
}

/// Starts the recipe actor `make` builds on its session's Arbiter: its contenders' replies,
/// watch events and session events then reach it without crossing a thread, and an uncontended
/// acquire costs one delivery to its mailbox. `make` gets the actor's place there, for its
/// shell ([`Shell::reside`]): the thread runs until the actor is gone, so the actor outlives its
/// session's close and answers `Closed`. A session already stopped gets it on the caller's
/// Arbiter (no place), where its first request fails and it says so. Nothing of the user's may
/// run there: an election's leader actors start back on the caller's Arbiter
/// (`election::launcher`).
pub(crate) fn start_beside_session<A>(
    session: &SessionHandle,
    make: impl FnOnce(Option<Resident>) -> A + Send + 'static,
) -> Addr<A>
where
    A: Actor<Context = Context<A>>,
{
    match session.arbiter() {
        Some(arbiter) => {
            let resident = session.resident();
            A::start_in_arbiter(arbiter, move |_| make(Some(resident)))
        }
        None => make(None).start(),
    }
}

/// A recipe actor built on a [`Shell`] (its `shell` field; [`on_the_shell!`] writes this): what
/// starting it and the shared machinery need of it.
pub(crate) trait OnShell: Actor<Context = Context<Self>> {
    /// The recipe's events.
    type Event: Message<Result = ()> + Clone + Send + 'static;
    /// The recipe's shell.
    fn shell(&self) -> &Shell<Self::Event>;
    /// The recipe's shell, to change.
    fn shell_mut(&mut self) -> &mut Shell<Self::Event>;

    /// Shows the recipe's health entry to its handles through `tag`.
    fn with_health_tag(mut self, tag: HealthTag) -> Self
    where
        Self: Sized,
    {
        self.shell_mut().show_health_to(tag);
        self
    }
}

/// Starts `actor` on the current Arbiter, its health entry shown to a new tag, which is returned
/// for its handle.
pub(crate) fn start_tagged<A: OnShell>(actor: A) -> (Addr<A>, HealthTag) {
    let health = HealthTag::default();
    (actor.with_health_tag(health.clone()).start(), health)
}

/// Starts `inner`, a recipe another one is built on (a master's election, a group's or a
/// service's cache), on the current Arbiter: it shows its health entry to the outer recipe's
/// handles (through `outer`'s tag, when it has one), and its events go to `to`.
pub(crate) fn start_inner<A, E>(outer: &Shell<E>, inner: A, to: Recipient<A::Event>) -> Addr<A>
where
    A: OnShell + Handler<crate::events::Subscribe<A::Event>>,
    E: Message<Result = ()> + Clone + Send + 'static,
{
    let inner = match outer.health_tag() {
        Some(tag) => inner.with_health_tag(tag.clone()),
        None => inner,
    };
    let addr = inner.start();
    addr.do_send(crate::events::Subscribe { recipient: to });
    addr
}

/// The handlers of a recipe actor whose `shell: Shell<E>` field does all the work:
/// `Handler<AwaitStopped>`; with `=> E` also `Handler<Listen<E>>` and [`OnShell`], and with
/// `, Subscribe` also `Handler<Subscribe<E>>` (an actor that tells a late reader or subscriber
/// something first writes its own).
macro_rules! on_the_shell {
    ($actor:ty) => {
        impl actix::Handler<$crate::stop::AwaitStopped> for $actor {
            type Result = ();

            fn handle(&mut self, waiter: $crate::stop::AwaitStopped, _: &mut Self::Context) {
                self.shell.await_stopped(waiter);
            }
        }
    };
    ($actor:ty => $event:ty) => {
        $crate::recipe::shell::on_the_shell!($actor);

        impl $crate::recipe::shell::OnShell for $actor {
            type Event = $event;

            fn shell(&self) -> &$crate::recipe::shell::Shell<$event> {
                &self.shell
            }

            fn shell_mut(&mut self) -> &mut $crate::recipe::shell::Shell<$event> {
                &mut self.shell
            }
        }

        impl actix::Handler<$crate::events::Listen<$event>> for $actor {
            type Result = ();

            fn handle(&mut self, msg: $crate::events::Listen<$event>, _: &mut Self::Context) {
                self.shell.subscribers().listen(msg.listener);
            }
        }
    };
    ($actor:ty => $event:ty, Subscribe) => {
        $crate::recipe::shell::on_the_shell!($actor => $event);

        impl actix::Handler<$crate::events::Subscribe<$event>> for $actor {
            type Result = ();

            fn handle(&mut self, msg: $crate::events::Subscribe<$event>, _: &mut Self::Context) {
                self.shell.subscribers().add(msg.recipient);
            }
        }
    };
}
pub(crate) use on_the_shell;
