//! How a queue consumer consumes: [`ConsumerConfig`], its [`Worker`]s and [`DeliveryMode`].

use actix::prelude::*;

use super::messages::{Delivery, Revoked};
use crate::builder::Opaque;
use crate::path;
use crate::recipe::naming::default_participant_id;
use crate::retry::RetryPolicy;

/// When an item leaves the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeliveryMode {
    /// Claimed, delivered, removed on `Ack` (the default). A consumer that dies mid-work loses
    /// its claims with its session, and the items are delivered again.
    #[default]
    AtLeastOnce,
    /// Removed first, then delivered (Curator's default): never twice, but lost if the worker
    /// fails.
    AtMostOnce,
}

/// A worker: where deliveries go, and where their revocation is announced.
#[derive(Clone, Debug)]
pub struct Worker {
    pub(super) deliver: Recipient<Delivery>,
    pub(super) revoke: Recipient<Revoked>,
}

impl Worker {
    /// A worker actor that handles [`Delivery`] and [`Revoked`].
    pub fn new<A>(addr: &Addr<A>) -> Self
    where
        A: Actor<Context = Context<A>> + Handler<Delivery> + Handler<Revoked>,
    {
        Worker { deliver: addr.clone().recipient(), revoke: addr.clone().recipient() }
    }
}

/// Makes worker `i` of a pool; called when the consumer starts.
type MakeWorker = std::sync::Arc<dyn Fn(usize) -> Worker + Send + Sync>;

/// `n` workers to start with the consumer ([`ConsumerConfig::with_workers`]).
#[derive(Clone, Debug)]
struct WorkerPool {
    n: usize,
    make: Opaque<MakeWorker>,
}

/// How a [`QueueConsumerActor`](super::QueueConsumerActor) consumes. It only describes: nothing
/// starts until the consumer does.
#[derive(Debug, Clone)]
#[must_use]
pub struct ConsumerConfig {
    pub(super) queue: String,
    pub(super) workers: Vec<Worker>,
    pools: Vec<WorkerPool>,
    pub(super) concurrency: usize,
    pub(super) mode: DeliveryMode,
    pub(super) max_attempts: Option<u32>,
    pub(super) dead_letter: Option<String>,
    pub(super) consumer_id: String,
    pub(super) retry: Option<RetryPolicy>,
}

impl ConsumerConfig {
    /// Consume the queue at `queue`.
    pub fn new(queue: impl Into<String>) -> Self {
        ConsumerConfig {
            queue: queue.into(),
            workers: Vec::new(),
            pools: Vec::new(),
            concurrency: 0,
            mode: DeliveryMode::default(),
            max_attempts: None,
            dead_letter: None,
            consumer_id: default_participant_id(),
            retry: None,
        }
    }

    crate::builder::setters! {
        /// How this consumer retries a failed request; default: its session's policy
        /// ([`SessionConfig::with_retry`](crate::session::SessionConfig::with_retry)).
        with_retry(retry: RetryPolicy) => some;
    }

    /// Add a worker (deliveries go round-robin).
    pub fn with_worker(mut self, worker: Worker) -> Self {
        self.workers.push(worker);
        self
    }

    /// `n` workers built by `factory` (called with 0 to `n - 1`), started when the consumer
    /// starts, on its Arbiter. They stop with it unless something else holds their addresses.
    pub fn with_workers<A, F>(mut self, n: usize, factory: F) -> Self
    where
        A: Actor<Context = Context<A>> + Handler<Delivery> + Handler<Revoked>,
        F: Fn(usize) -> A + Send + Sync + 'static,
    {
        let make: MakeWorker = std::sync::Arc::new(move |i| Worker::new(&factory(i).start()));
        self.pools.push(WorkerPool { n, make: Opaque(make) });
        self
    }

    /// Starts the workers of [`with_workers`](Self::with_workers); the consumer calls it once,
    /// when it starts.
    pub(super) fn start_workers(&mut self) {
        for pool in std::mem::take(&mut self.pools) {
            self.workers.extend((0..pool.n).map(|i| (pool.make.0)(i)));
        }
    }

    crate::builder::setters! {
        /// Never more than that many deliveries in flight (default: one per worker).
        with_concurrency(concurrency: usize);

        /// At-least-once (default) or at-most-once.
        with_mode(mode: DeliveryMode);
    }

    /// After this many delivery attempts ended in a `Nack` (or a stopped worker), the item goes
    /// to the dead-letter path, or is dropped when there is none. Default: retry forever.
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = Some(attempts.max(1));
        self
    }

    crate::builder::setters! {
        /// Where items that used up their attempts go (as `<path>/qn-<seq>`, same name and data).
        with_dead_letter(dead_letter: impl Into<String>) => some into;

        /// Stored in claim nodes (default: `<host>/<pid>/<n>`), so operators see who holds what.
        with_consumer_id(consumer_id: impl Into<String>) => into;
    }

    /// The queue's path.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The paths' syntax, checked before anything starts.
    pub(super) fn validate(&self) -> Result<(), crate::error::Error> {
        path::validate(&self.queue, false)?;
        if let Some(dead_letter) = &self.dead_letter {
            path::validate(dead_letter, false)?;
        }
        Ok(())
    }

    pub(super) fn claims(&self) -> String {
        path::join(&self.queue, "claims")
    }

    pub(super) fn limit(&self) -> usize {
        let workers = self.workers.len() + self.pools.iter().map(|pool| pool.n).sum::<usize>();
        if self.concurrency > 0 { self.concurrency } else { workers.max(1) }
    }
}
