//! Distributed queues: a producer API and a consumer actor that feeds a pool of workers.
//!
//! Owns: the queue layout (`<queue>/qn-<seq>` items, `<queue>/claims/qn-<seq>` ephemeral
//! claims), [`Queue`] (plain async `put`, `put_all`, and the official recipe's `peek`,
//! `element`, `poll`, `remove`, `take`), and [`QueueConsumerActor`] (claims, deliveries, acks,
//! redelivery, dead letters). See `docs/recipes/queue.md`.
//!
//! Files: `config.rs` (how a consumer consumes), `messages.rs` (deliveries, settlements, `Stop`), `error.rs`, `consumer.rs` (the consumer actor), `plan.rs` (which items a consumer tries next), `producer.rs` ([`Queue`]).
//!
#![doc = include_str!("../../docs/recipes/queue.md")]

mod config;
mod consumer;
mod error;
mod messages;
mod plan;
mod producer;

pub use config::{ConsumerConfig, DeliveryMode, Worker};
pub use consumer::QueueConsumerActor;
pub use error::QueueError;
pub use messages::{Delivery, Outcome, Revoked, Settle, Stop};
pub use producer::{ITEM_PREFIX, Queue};
