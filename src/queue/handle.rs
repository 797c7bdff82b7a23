//! [`QueueConsumerHandle`]: async methods over a [`QueueConsumerActor`], for programs that want
//! answers rather than messages. (Putting and taking items one at a time is
//! [`Queue`](super::Queue)'s, which needs no actor.)
//!
//! Owns: turning each request into one message and its reply into a `Result` (a stopped actor
//! is [`QueueError::Stopped`]). Does not own any state: the actor does. A handle holds a strong
//! address: the consumer lives while a handle (or another address) does, and dropping the last
//! one stops it, which gives its claimed items back.

use std::future::Future;

use actix::prelude::*;

use super::config::ConsumerConfig;
use super::consumer::QueueConsumerActor;
use super::error::QueueError;
use super::messages::{ConsumerEvent, Released, Stop, WaitIdle};
use crate::recipe::shell::start_tagged;
use crate::reply::ask;
use crate::session::SessionHandle;

/// A cloneable handle to one queue consumer (a [`QueueConsumerActor`]).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle, worker: actix_zookeeper::queue::Worker)
/// # -> Result<(), actix_zookeeper::queue::QueueError> {
/// use actix_zookeeper::queue::{ConsumerConfig, QueueConsumerHandle};
///
/// let consumer = QueueConsumerHandle::start(session, ConsumerConfig::new("/jobs").with_worker(worker))?;
/// consumer.idle().await?; // everything it could take is done
/// consumer.stop().await; // stopped, its claims given back
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct QueueConsumerHandle {
    addr: Addr<QueueConsumerActor>,
    queue: String,
    /// Turns `true` once the consumer has stopped and given its claims back (known from the
    /// start for a handle that started the consumer).
    released: Option<tokio::sync::watch::Receiver<bool>>,
    /// Keeps the consumer's entry on the health board if it fails for good, until the last
    /// handle is dropped or one stops it.
    health: crate::session::health::HealthTag,
}

impl QueueConsumerHandle {
    /// Starts a [`QueueConsumerActor`] for `config` on the current Arbiter, with the workers its
    /// config describes; it begins once the session is up. A queue or dead-letter path that is
    /// not valid is [`QueueError::ZooKeeper`] with [`Error::InvalidPath`](crate::Error::InvalidPath),
    /// and nothing starts (no worker either).
    pub fn start(session: SessionHandle, config: ConsumerConfig) -> Result<QueueConsumerHandle, QueueError> {
        config.validate()?;
        let queue = config.queue().to_owned();
        let consumer = QueueConsumerActor::new(session, config);
        let released = consumer.released();
        let (addr, health) = start_tagged(consumer);
        Ok(QueueConsumerHandle { addr, queue, released, health })
    }

    /// A handle to a running consumer of the queue at `queue`.
    pub fn new(addr: Addr<QueueConsumerActor>, queue: impl Into<String>) -> QueueConsumerHandle {
        QueueConsumerHandle { addr, queue: queue.into(), released: None, health: Default::default() }
    }

    /// Resolves once the consumer is idle ([`WaitIdle`]): nothing delivered, claimed or being
    /// settled, and its latest listing found nothing it could claim. With one consumer, that is
    /// a queue drained of what it can read; with several, use
    /// [`Queue::drained`](super::Queue::drained) for the queue itself.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping it only stops the wait.
    pub fn idle(&self) -> impl Future<Output = Result<(), QueueError>> + 'static {
        let asked = ask(&self.addr, WaitIdle, QueueError::Stopped { queue: self.queue.clone() });
        async move { asked.await? }
    }

    crate::recipe::handle::handle_basics!(QueueConsumerActor => ConsumerEvent);

    /// Stops consuming: workers hear [`Revoked`](super::Revoked) for what they hold, and claimed
    /// items go back to the queue. Sent when called; the future resolves once the consumer has
    /// stopped and its claims are deleted (their deletes answered), so another consumer can take
    /// those items at once.
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        // Asked before the stop, so that it is answered first (a handle made from an address
        // does not know the signal yet).
        let asked = match &self.released {
            Some(released) => futures::future::Either::Left(std::future::ready(Ok(Some(released.clone())))),
            None => futures::future::Either::Right(self.addr.send(Released)),
        };
        self.addr.do_send(Stop);
        self.health.release();
        let stopped = crate::stop::stopped(&self.addr);
        async move {
            // `None` or an error: the consumer had stopped already and nothing says when its
            // releases ended; they were sent when it stopped.
            if let Ok(Some(mut released)) = asked.await {
                let _ = released.wait_for(|given_back| *given_back).await;
            }
            stopped.await;
        }
    }
}
