//! Stopping a recipe actor: the [`Stop`] message every recipe actor takes, the lifeline that
//! tells a handle's `stop()` the actor has gone (dropped with the actor; nothing polls), and the
//! stop once an actor's last address is gone, whatever timers it runs.
//!
//! Owns: the stop request, the "gone" signal and the end at the last address. Does not own what each recipe lets go of when it
//! stops (its node, its claims, its place in an election): each actor's `Handler<Stop>` says.

use std::future::Future;

use actix::Actor;

/// Stop the actor: it lets go of what its recipe holds, then stops (a lock releases, an election
/// participant resigns, a queue consumer gives its claims back, a worker finishes its running
/// tasks; a counter's, a value's or a cache's node stays). What each one does is on its
/// `Handler<Stop>`; a handle's `stop()` sends it and resolves once the actor is gone.
#[derive(actix::Message, Debug, Clone, Copy, Default)]
#[rtype(result = "()")]
pub struct Stop;

/// Asks to be told when the actor is gone: it keeps `stopped` in its [`Lifeline`] until it is
/// dropped. Sent to an actor that has stopped, the message (and `stopped`) is dropped at once.
#[derive(actix::Message, Debug)]
#[rtype(result = "()")]
pub(crate) struct AwaitStopped(pub(crate) futures::channel::oneshot::Sender<()>);

/// What an actor holds for the callers waiting for its end: dropped with the actor, which is
/// what tells them (no answer is ever sent). actix has no future for an actor's end.
#[derive(Debug, Default)]
pub(crate) struct Lifeline(Vec<futures::channel::oneshot::Sender<()>>);

impl Lifeline {
    /// Keeps `waiter` until the actor is dropped (dropping the senders of waiters who went).
    pub(crate) fn keep(&mut self, AwaitStopped(waiter): AwaitStopped) {
        self.0.retain(|kept| !kept.is_canceled());
        self.0.push(waiter);
    }
}

/// Resolves once the actor behind `addr` is gone (its [`Lifeline`] dropped with it), for a
/// handle's `stop()` that callers can await. Asked when called: a caller that sends the stop
/// first and then this still hears the end, since a message left in a stopped actor's mailbox
/// is dropped with it.
pub(crate) fn stopped<A>(addr: &actix::Addr<A>) -> impl Future<Output = ()> + 'static + use<A>
where
    A: Actor + actix::Handler<AwaitStopped>,
    A::Context: actix::dev::ToEnvelope<A, AwaitStopped>,
{
    let (waiter, gone) = futures::channel::oneshot::channel();
    addr.do_send(AwaitStopped(waiter));
    async move {
        let _ = gone.await;
    }
}

/// Keeps `kept` in the context of `ctx` until the context itself is dropped: actix drops a
/// context's items after the actor and its mailbox, so a [`Lifeline`] kept here tells its
/// waiters only once the actor's address is disconnected too (a waiter on another thread would
/// otherwise find it still connected for a moment). An item that is never ready and never wakes
/// anything: polled with the others when the actor wakes, it costs a call.
pub(crate) fn keep_until_dropped<A, T: Unpin + 'static>(ctx: &mut actix::Context<A>, kept: T) -> actix::SpawnHandle
where
    A: Actor<Context = actix::Context<A>>,
{
    actix::AsyncContext::spawn(ctx, Kept(kept))
}

/// The item of [`keep_until_dropped`].
struct Kept<T>(T);

impl<A: Actor, T: Unpin> actix::ActorFuture<A> for Kept<T> {
    type Output = ();

    fn poll(
        self: std::pin::Pin<&mut Self>,
        _: &mut A,
        _: &mut A::Context,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        std::task::Poll::Pending
    }
}

/// Stops the actor of `ctx` as soon as its last address is gone, whatever else it runs. actix
/// keeps an actor alive while anything it spawned (a timer, an interval, a stream) is pending,
/// so an actor with a timer that its user let go of would live on; this ends it. For the actors
/// whose user holds their address (a handle): dropping the last one is how a user stops them.
///
/// Not a timer, and nothing polls: actix wakes an actor when its last address is dropped (the
/// mailbox's waker) and then polls everything the actor spawned, this among it, which looks at
/// the address count and stops the actor.
pub(crate) fn stop_when_unaddressed<A>(ctx: &mut actix::Context<A>) -> actix::SpawnHandle
where
    A: Actor<Context = actix::Context<A>>,
{
    when_unaddressed(ctx, |_, ctx| actix::ActorContext::stop(ctx))
}

/// Runs `then` once the last address of the actor of `ctx` is gone (see
/// [`stop_when_unaddressed`]), for an actor that ends in a way of its own (the session closes).
pub(crate) fn when_unaddressed<A>(
    ctx: &mut actix::Context<A>,
    then: impl FnOnce(&mut A, &mut actix::Context<A>) + 'static,
) -> actix::SpawnHandle
where
    A: Actor<Context = actix::Context<A>>,
{
    actix::AsyncContext::spawn(ctx, Unaddressed { then: Some(Box::new(then)) })
}

/// What an actor does once its last address is gone.
type Then<A> = Box<dyn FnOnce(&mut A, &mut actix::Context<A>)>;

/// The future of [`when_unaddressed`].
struct Unaddressed<A: Actor<Context = actix::Context<A>>> {
    then: Option<Then<A>>,
}

impl<A: Actor<Context = actix::Context<A>>> actix::ActorFuture<A> for Unaddressed<A> {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        act: &mut A,
        ctx: &mut actix::Context<A>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        // Pending without a waker of its own on purpose: the actor's mailbox holds the waker that
        // the last address's drop wakes, and every wake polls this again.
        if ctx.connected() {
            return std::task::Poll::Pending;
        }
        if let Some(then) = self.then.take() {
            then(act, ctx);
        }
        std::task::Poll::Ready(())
    }
}
