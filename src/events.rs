//! [`EventStream`]: the events of a recipe actor (or of the session) as a `Stream` its reader
//! owns, the way to hear them that cannot go silent.
//!
//! Owns: who hears an actor's events (one list, one rule, for every recipe actor and the
//! session), the bounded buffer between an actor and one reader, the rule for a reader that falls
//! behind, and the two messages that attach a hearer: [`Listen`] (a reader) and [`Subscribe`]
//! (a recipient). Does not own what the events are (each recipe's).
//!
//! # Reading
//! Inside an actor: `ctx.add_stream(lock.events())` and a `StreamHandler<Result<LockEvent,
//! Missed>>`: the actor hears every event while it lives. Anywhere else:
//! `while let Some(event) = events.next().await`. Dropping the stream unsubscribes.
//!
//! An actor reading a stream is alive while the stream is (actix keeps an actor with a running
//! stream): it ends when the recipe actor stops. So an actor that *owns* the recipe it reads (holds
//! its handle) would not stop when its last address is dropped: the two would keep each other.
//! Such an actor reads with [`EventStream::read_while_addressed`] instead of `ctx.add_stream`: it
//! stops once its last address is gone, and the recipe with it.
//!
//! # A reader that falls behind
//! Each stream buffers up to [`EVENT_BUFFER`] events. The actor never waits for a reader: an
//! event that finds the buffer full is dropped for that reader and counted, and the reader's next
//! item is `Err(Missed { count })` before any later event. Events are never reordered; memory per
//! reader is bounded. A reader told it missed events resyncs by asking for the state (a lock's
//! `holder()`, an election's `leader()`, a cache's `Snapshot`, a counter's `GetCount`).

use std::pin::Pin;
use std::task::{Context, Poll};

use actix::dev::ToEnvelope;
use actix::{Actor, Addr, Handler, Message, Recipient, WeakRecipient};
use futures::Stream;
use tokio::sync::mpsc;

/// How many events a reader may fall behind before it misses some.
pub const EVENT_BUFFER: usize = 256;

/// Events were dropped because this reader fell [`EVENT_BUFFER`] events behind; `count` says how
/// many. The events after it are current again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Missed {
    /// How many events this reader did not get.
    pub count: u64,
}

impl std::fmt::Display for Missed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "missed {} events (fell behind by more than {EVENT_BUFFER})", self.count)
    }
}

impl std::error::Error for Missed {}

/// The events of one actor, in the order it told them; see the [module docs](self).
#[must_use = "events are heard only while the stream is read; dropping it unsubscribes"]
pub struct EventStream<E> {
    events: mpsc::Receiver<Result<E, Missed>>,
}

impl<E> std::fmt::Debug for EventStream<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").field("buffered", &self.events.len()).finish()
    }
}

impl<E> Stream for EventStream<E> {
    type Item = Result<E, Missed>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events.poll_recv(cx)
    }
}

impl<E: 'static> EventStream<E> {
    /// Reads the stream in `ctx`'s actor as `ctx.add_stream` does, for an actor that *owns* the
    /// recipe it reads (holds its handle): once the actor's last address is dropped, it stops
    /// (at that drop), dropping the stream and the handle, so the recipe actor stops too. With
    /// `ctx.add_stream` the two keep each other alive (actix keeps an actor whose stream runs, and
    /// the stream runs while the recipe does). An actor nobody keeps an address of (a logger
    /// started and let go) uses `ctx.add_stream`: this would stop it at once.
    pub fn read_while_addressed<A>(self, ctx: &mut actix::Context<A>) -> actix::SpawnHandle
    where
        A: Actor<Context = actix::Context<A>> + actix::StreamHandler<Result<E, Missed>>,
    {
        use actix::AsyncContext;
        crate::stop::stop_when_unaddressed(ctx);
        ctx.add_stream(self)
    }
}

/// Attaches a reader to an actor's events (what [`events`] sends).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Listen<E: Send + 'static> {
    pub(crate) listener: Listener<E>,
}

impl<E: Send + 'static> std::fmt::Debug for Listen<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Listen")
    }
}

/// Sends every event `E` of an actor to `recipient`, held weakly (subscribing does not keep the
/// subscriber alive). The one subscription message of every recipe actor and of the session:
/// each module re-exports it (`lock::Subscribe`, `group::Subscribe`, ...), and what a late
/// subscriber is told first (the current value, the members in view, ...) is said by the
/// actor's docs.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Subscribe<E: Message<Result = ()> + Send> {
    /// Who gets the events.
    pub recipient: Recipient<E>,
}

impl<E: Message<Result = ()> + Send> Clone for Subscribe<E> {
    fn clone(&self) -> Self {
        Subscribe { recipient: self.recipient.clone() }
    }
}

impl<E: Message<Result = ()> + Send> std::fmt::Debug for Subscribe<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscribe").field("event", &std::any::type_name::<E>()).finish()
    }
}

/// The stream of `addr`'s events from the moment it handles the request (sent now): for actors
/// without a handle of their own (`CacheActor`, `SharedCount`, `GroupMember`, `TaskMaster`,
/// `TaskWorker`); the handles have an `events()` method.
pub fn events<A, E>(addr: &Addr<A>) -> EventStream<E>
where
    A: Actor + Handler<Listen<E>>,
    A::Context: ToEnvelope<A, Listen<E>>,
    E: Send + 'static,
{
    let (listener, stream) = channel();
    addr.do_send(Listen { listener });
    stream
}

/// A reader's end and the actor's end of one stream.
pub(crate) fn channel<E>() -> (Listener<E>, EventStream<E>) {
    let (sender, events) = mpsc::channel(EVENT_BUFFER);
    (Listener { sender, missed: 0 }, EventStream { events })
}

/// The actor's end of one reader's stream.
pub(crate) struct Listener<E> {
    sender: mpsc::Sender<Result<E, Missed>>,
    /// Events dropped since the reader last had room, told before the next event that fits.
    missed: u64,
}

impl<E> Listener<E> {
    /// Offers `event`; `false` once the reader has dropped its stream.
    pub(crate) fn offer(&mut self, event: E) -> bool {
        if self.missed > 0 {
            match self.sender.try_send(Err(Missed { count: self.missed })) {
                Ok(()) => self.missed = 0,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    self.missed += 1;
                    return true;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return false,
            }
        }
        match self.sender.try_send(Ok(event)) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.missed += 1;
                true
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// True once the reader has dropped its stream.
    pub(crate) fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}

/// Who hears one actor's events: readers of [`EventStream`]s, and recipients from the older
/// `subscribe(Recipient)`.
///
/// A recipient is held weakly (as it always was: an actor that subscribes to a recipe it owns
/// makes no cycle), so one whose last address is gone stops hearing. That can no longer happen
/// without a word: a recipient found gone before it heard a single event is reported with a
/// warning naming the stream to use instead.
pub(crate) struct Subscribers<E: Message<Result = ()> + Send> {
    recipients: Vec<(WeakRecipient<E>, bool)>,
    listeners: Vec<Listener<E>>,
    /// Warn about a recipient that stopped unheard (not for the session's subscribers: every
    /// recipe actor subscribes to its session, and many stop before the session has news).
    warn_unheard: bool,
}

impl<E: Message<Result = ()> + Clone + Send + 'static> Subscribers<E> {
    /// Nobody yet.
    pub(crate) fn new() -> Self {
        Subscribers { recipients: Vec::new(), listeners: Vec::new(), warn_unheard: true }
    }

    /// Nobody yet, and no warning about recipients that stop unheard (the session's list).
    pub(crate) fn quiet() -> Self {
        Subscribers { warn_unheard: false, ..Subscribers::new() }
    }

    /// Adds `recipient`; it hears every later event while it lives.
    pub(crate) fn add(&mut self, recipient: Recipient<E>) {
        self.recipients.push((recipient.downgrade(), false));
    }

    /// Adds a stream's reader; it hears every later event until it drops the stream.
    pub(crate) fn listen(&mut self, listener: Listener<E>) {
        // An actor with no events to tell would otherwise keep every dropped stream's channel.
        self.listeners.retain(|listener| !listener.is_closed());
        self.listeners.push(listener);
    }

    /// Tells every live subscriber and reader, forgetting those that went.
    pub(crate) fn tell(&mut self, event: E) {
        self.listeners.retain_mut(|listener| listener.offer(event.clone()));
        self.recipients.retain_mut(|(weak, heard)| match weak.upgrade() {
            Some(subscriber) if subscriber.connected() => {
                subscriber.do_send(event.clone());
                *heard = true;
                true
            }
            _ => {
                if !*heard && self.warn_unheard {
                    tracing::warn!(
                        event = std::any::type_name::<E>(),
                        "a subscriber stopped before it heard any event: subscribe() holds it weakly, so \
                         keep its address, or read events() instead"
                    );
                }
                false
            }
        });
    }

    /// Forgets readers that dropped their streams and recipients that stopped (without telling).
    pub(crate) fn sweep(&mut self) {
        self.listeners.retain(|listener| !listener.is_closed());
        self.recipients.retain(|(weak, _)| weak.upgrade().is_some_and(|s| s.connected()));
    }

    /// Forgets everybody.
    pub(crate) fn clear(&mut self) {
        self.listeners.clear();
        self.recipients.clear();
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    #[test]
    fn a_reader_that_falls_behind_is_told_how_many_it_missed_then_hears_the_rest_in_order() {
        let (mut listener, mut stream) = channel::<usize>();
        for n in 0..EVENT_BUFFER + 10 {
            assert!(listener.offer(n));
        }
        let mut read = Vec::new();
        while let Some(Some(item)) = stream.next().now_or_never() {
            read.push(item);
        }
        assert_eq!(read.len(), EVENT_BUFFER);
        assert_eq!(read.last(), Some(&Ok(EVENT_BUFFER - 1)));
        // Room again: the next item says what was missed, then events go on.
        assert!(listener.offer(1000));
        assert_eq!(stream.next().now_or_never(), Some(Some(Err(Missed { count: 10 }))));
        assert_eq!(stream.next().now_or_never(), Some(Some(Ok(1000))));
        drop(stream);
        assert!(!listener.offer(1001), "a dropped stream unsubscribes");
        assert!(listener.is_closed());
    }

    #[test]
    fn a_missed_notice_that_finds_no_room_counts_the_event_too() {
        let (mut listener, mut stream) = channel::<usize>();
        for n in 0..EVENT_BUFFER + 1 {
            listener.offer(n);
        }
        // Still full: the notice cannot go in, so this event is missed too.
        listener.offer(7);
        for _ in 0..EVENT_BUFFER {
            assert!(matches!(stream.next().now_or_never(), Some(Some(Ok(_)))));
        }
        listener.offer(8);
        assert_eq!(stream.next().now_or_never(), Some(Some(Err(Missed { count: 2 }))));
        assert_eq!(stream.next().now_or_never(), Some(Some(Ok(8))));
    }

    /// What every recipe's events go through: a dropped `events()` stream is let go of by the
    /// next event (or the next reader that attaches), and the other readers go on hearing.
    #[derive(actix::Message, Clone, Debug, PartialEq)]
    #[rtype(result = "()")]
    struct Ev(usize);

    #[test]
    fn a_dropped_stream_leaves_the_subscribers_and_the_others_go_on() {
        let mut subscribers = Subscribers::<Ev>::new();
        let (first, dropped) = channel();
        let (second, mut kept) = channel();
        subscribers.listen(first);
        subscribers.listen(second);
        subscribers.tell(Ev(1));
        assert_eq!(subscribers.listeners.len(), 2);
        drop(dropped);
        subscribers.tell(Ev(2));
        assert_eq!(subscribers.listeners.len(), 1, "the dropped stream's listener is gone");
        assert_eq!(kept.next().now_or_never(), Some(Some(Ok(Ev(1)))));
        assert_eq!(kept.next().now_or_never(), Some(Some(Ok(Ev(2)))));
        // A reader that attaches lets go of a dropped one too, even with no event between.
        let (third, gone) = channel();
        subscribers.listen(third);
        drop(gone);
        let (fourth, _alive) = channel();
        subscribers.listen(fourth);
        assert_eq!(subscribers.listeners.len(), 2);
    }

    use futures::FutureExt;
}
