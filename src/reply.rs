//! Answers that know whether their caller still waits, and requests carried out whatever the
//! caller does: the reply plumbing the session and the recipes share (it sits below both).
//!
//! Owns:
//! - [`Reply`]/[`Pending`]: a deferred answer handed the caller's own reply channel, so that the
//!   actor learns as it answers whether anybody took the answer ([`Pending::send`] gives the
//!   value back when the caller has gone) and can see a caller that stopped waiting
//!   ([`Pending::is_canceled`]). A grant nobody received must be given back, and a cancelled
//!   `Acquire` must not keep a node in line.
//! - `Asked`/`Answer`: a request a handle sends with a reply channel of its own; the handle's
//!   future owns the channel, so dropping it is seen by the actor at once, and an answer found
//!   unread in the channel is handed back (a grant to give back). Awaiting the actor's reply in
//!   a relay task instead would keep the request alive after its caller went.
//! - `Told`: a request carried out even if its caller went before the actor took it (actix
//!   skips such a request): every write that is "sent when made".
//!
//! Does not own what the answers are.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use actix::dev::{MessageResponse, OneshotSender};
use actix::{Actor, Message};
use tokio::sync::oneshot;

/// The answer to a request: now, or later through a [`Pending`] the actor keeps.
pub enum Reply<T> {
    /// Answered at once.
    Now(T),
    /// Answered when the actor calls [`Pending::send`] (or with the `if_dropped` value when it
    /// drops the [`Pending`] unanswered, e.g. because it stopped).
    Later(Pending<T>),
}

impl<T> Reply<T> {
    /// A deferred reply and the [`Pending`] that answers it.
    pub fn later(if_dropped: T) -> (Pending<T>, Reply<T>) {
        let slot = Arc::new(Mutex::new(Slot::Unattached));
        let pending = Pending { slot, if_dropped: Some(if_dropped) };
        let reply = Reply::Later(Pending { slot: pending.slot.clone(), if_dropped: None });
        (pending, reply)
    }
}

enum Slot<T> {
    /// The request's handler has not returned yet.
    Unattached,
    /// Answered before the handler returned: delivered when the caller attaches.
    Early(T),
    /// The caller's channel.
    Caller(OneshotSender<T>),
    /// Sent with `do_send`: nobody waits, and the work goes on.
    NoCaller,
    /// Answered.
    Done,
}

/// The actor's side of a deferred [`Reply`].
pub struct Pending<T> {
    slot: Arc<Mutex<Slot<T>>>,
    /// `None` on the copy inside [`Reply::Later`], which only attaches the caller.
    if_dropped: Option<T>,
}

impl<T> std::fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pending")
    }
}

impl<T> Pending<T> {
    /// Answers the caller. `Err(value)` when the caller has gone: nobody received the answer, so
    /// whatever it grants is still the actor's to give back. A request sent with `do_send` has no
    /// caller and counts as answered.
    pub fn send(mut self, value: T) -> Result<(), T> {
        self.if_dropped = None;
        let mut slot = self.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match std::mem::replace(&mut *slot, Slot::Done) {
            Slot::Caller(caller) => caller.send(value),
            Slot::NoCaller => Ok(()),
            Slot::Unattached => {
                *slot = Slot::Early(value);
                Ok(())
            }
            Slot::Early(_) | Slot::Done => Err(value),
        }
    }

    /// True once the caller has stopped waiting (dropped its request); otherwise `cx` is woken
    /// when it does (a caller sent with `do_send` never does).
    pub fn poll_canceled(&self, cx: &mut Context<'_>) -> bool {
        let mut slot = self.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match &mut *slot {
            Slot::Caller(caller) => caller.poll_closed(cx).is_ready(),
            Slot::Done => true,
            Slot::Unattached | Slot::Early(_) | Slot::NoCaller => false,
        }
    }

    /// True once the caller has stopped waiting (dropped its request).
    pub fn is_canceled(&self) -> bool {
        let slot = self.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match &*slot {
            Slot::Caller(caller) => caller.is_closed(),
            Slot::Done => true,
            Slot::Unattached | Slot::Early(_) | Slot::NoCaller => false,
        }
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        if let Some(value) = self.if_dropped.take() {
            let mut slot = self.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            match std::mem::replace(&mut *slot, Slot::Done) {
                Slot::Caller(caller) => {
                    let _ = caller.send(value);
                }
                Slot::Unattached => *slot = Slot::Early(value),
                other => *slot = other,
            }
        }
    }
}

impl<A, M, T> MessageResponse<A, M> for Reply<T>
where
    A: Actor,
    M: Message<Result = T>,
    T: Send + 'static,
{
    fn handle(self, _: &mut A::Context, caller: Option<OneshotSender<T>>) {
        let pending = match self {
            Reply::Now(value) => {
                if let Some(caller) = caller {
                    let _ = caller.send(value);
                }
                return;
            }
            Reply::Later(pending) => pending,
        };
        let mut slot = pending.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match (std::mem::replace(&mut *slot, Slot::Done), caller) {
            (Slot::Unattached, Some(caller)) => *slot = Slot::Caller(caller),
            (Slot::Unattached, None) => *slot = Slot::NoCaller,
            (Slot::Early(value), Some(caller)) => {
                let _ = caller.send(value);
            }
            (other, _) => *slot = other,
        }
    }
}

/// A request `M` with a reply channel its sender owns; `K` says what becomes of it when the
/// sender stops waiting before the actor takes it: [`Asked`] (dropped) or [`Told`] (carried out).
pub(crate) struct Carried<M: Message, K> {
    request: M,
    reply: OneshotSender<M::Result>,
    kind: PhantomData<fn() -> K>,
}

impl<M, K> Message for Carried<M, K>
where
    M: Message,
    M::Result: Send,
{
    type Result = ();
}

/// What becomes of a [`Carried`] request whose caller went before the actor took it.
pub(crate) trait CallerGoneRule {
    /// True: it is not carried out.
    const DROPPED: bool;
}

/// The [`Asked`] kind: dropped with its caller.
#[derive(Debug)]
pub(crate) enum AskedKind {}

/// The [`Told`] kind: carried out all the same.
#[derive(Debug)]
pub(crate) enum ToldKind {}

impl CallerGoneRule for AskedKind {
    const DROPPED: bool = true;
}

impl CallerGoneRule for ToldKind {
    const DROPPED: bool = false;
}

impl<M: Message, K: CallerGoneRule> Carried<M, K> {
    /// Answers with `respond`, the actor's own handling of the request: exactly what a caller of
    /// `Addr::send(request)` would get, through the sender's channel.
    pub(crate) fn answer<A, R>(self, ctx: &mut A::Context, respond: impl FnOnce(M, &mut A::Context) -> R)
    where
        A: Actor,
        R: MessageResponse<A, M>,
    {
        // An asked request whose caller went before it was handled gets nothing done: handled
        // anyway, an answer given during the handler (before the channel is attached) would
        // count as received, a re-entrant grant as handed to a caller who never has it.
        if K::DROPPED && self.reply.is_closed() {
            return;
        }
        let response = respond(self.request, ctx);
        response.handle(ctx, Some(self.reply));
    }
}

/// A request `M` sent by a handle with a reply channel the handle owns: the actor answers it as it
/// answers `M` ([`Carried::answer`]), and the handle awaits the [`Answer`]. A caller gone before
/// the actor took it gets nothing done.
pub(crate) type Asked<M> = Carried<M, AskedKind>;

impl<M: Message> Asked<M> {
    /// The request to send, and the answer to await. `on_drop` runs if the answer is dropped
    /// before it resolved, with what was in its channel at that moment (`Some`: the actor's
    /// answer, which nobody will read).
    pub(crate) fn new<F>(request: M, on_drop: F) -> (Asked<M>, Answer<M::Result, F>)
    where
        F: FnOnce(Option<M::Result>),
    {
        let (reply, answer) = Answer::channel(on_drop);
        (Carried { request, reply, kind: PhantomData }, answer)
    }
}

/// A request `M` that is carried out whether or not its caller still waits: a write (a release, a
/// resign, a join) is sent when it is made, as a ZooKeeper write is. `Addr::send` cannot promise
/// that: actix skips a request whose caller went before the actor took it. The caller awaits the
/// receiver [`Told::new`] returns; the actor answers through [`Carried::answer`].
pub(crate) type Told<M> = Carried<M, ToldKind>;

impl<M: Message> Told<M> {
    /// The request to send (with `do_send`), and the answer to await (`Err` when the actor
    /// stopped without answering).
    pub(crate) fn new(request: M) -> (Told<M>, oneshot::Receiver<M::Result>) {
        let (reply, answer) = oneshot::channel();
        (Carried { request, reply, kind: PhantomData }, answer)
    }
}

/// The answer to an [`Asked`] request: `Err(())` when the actor dropped the request unanswered
/// (it stopped). Dropped before it resolved, it closes its channel first, so the actor either
/// sees the caller gone (and keeps what it would have handed out) or has answered already, and
/// that answer is passed to `on_drop`.
pub(crate) struct Answer<T, F: FnOnce(Option<T>)> {
    answer: oneshot::Receiver<T>,
    on_drop: Option<F>,
}

impl<T, F: FnOnce(Option<T>)> Answer<T, F> {
    /// A channel whose receiving end is an [`Answer`]: for work that runs on (detached, it
    /// finishes whatever the caller does) and must know whether its caller took the result.
    pub(crate) fn channel(on_drop: F) -> (OneshotSender<T>, Answer<T, F>) {
        let (reply, answer) = oneshot::channel();
        (reply, Answer { answer, on_drop: Some(on_drop) })
    }
}

impl<T, F: FnOnce(Option<T>) + Unpin> Future for Answer<T, F> {
    type Output = Result<T, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let outcome = std::task::ready!(Pin::new(&mut this.answer).poll(cx));
        this.on_drop = None;
        Poll::Ready(outcome.map_err(|_| ()))
    }
}

impl<T, F: FnOnce(Option<T>)> Drop for Answer<T, F> {
    fn drop(&mut self) {
        if let Some(on_drop) = self.on_drop.take() {
            // Closed first: an answer sent after this fails on the actor's side (it learns the
            // caller went), one sent before is found here.
            self.answer.close();
            on_drop(self.answer.try_recv().ok());
        }
    }
}

/// Sends `request` to `addr` and maps a stopped actor to `stopped`: the `ask` of every recipe
/// handle. actix skips a request whose caller went before the actor took it, so this is for
/// reads and waits, whose caller going means nothing is wanted any more.
pub(crate) fn ask<A, M, E>(
    addr: &actix::Addr<A>,
    request: M,
    stopped: E,
) -> impl Future<Output = Result<M::Result, E>> + 'static + use<A, M, E>
where
    A: Actor + actix::Handler<M>,
    A::Context: actix::dev::ToEnvelope<A, M>,
    M: Message + Send + 'static,
    M::Result: Send,
    E: 'static,
{
    let reply = addr.send(request);
    async move { reply.await.map_err(|_| stopped) }
}

/// Sends `request` to `addr` as a [`Told`] (carried out whether or not the caller still waits)
/// and maps a stopped actor to `stopped`: the `tell` of every recipe handle, for writes that are
/// "sent when called".
pub(crate) fn tell<A, M, E>(
    addr: &actix::Addr<A>,
    request: M,
    stopped: E,
) -> impl Future<Output = Result<M::Result, E>> + 'static + use<A, M, E>
where
    A: Actor + actix::Handler<Told<M>>,
    A::Context: actix::dev::ToEnvelope<A, Told<M>>,
    M: Message + Send + 'static,
    M::Result: Send,
    E: 'static,
{
    let (told, reply) = Told::new(request);
    addr.do_send(told);
    async move { reply.await.map_err(|_| stopped) }
}

/// `impl Handler<Told<M>>` for each `M` listed, by the actor's own `Handler<M>`: what an actor
/// writes to take requests a handle sends with [`tell`].
macro_rules! handle_told {
    ($actor:ty: $($message:ty),+ $(,)?) => {$(
        impl actix::Handler<$crate::reply::Told<$message>> for $actor {
            type Result = ();

            fn handle(&mut self, told: $crate::reply::Told<$message>, ctx: &mut actix::Context<Self>) {
                told.answer::<Self, _>(ctx, |request, ctx| <Self as actix::Handler<$message>>::handle(self, request, ctx));
            }
        }
    )+};
}
pub(crate) use handle_told;
