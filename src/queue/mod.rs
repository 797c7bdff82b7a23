//! Distributed queues: a producer API and a consumer actor that feeds a pool of workers.
//!
//! Owns: the queue layout (`<queue>/qn-<seq>` items, with a priority or a due time in their
//! names, `<queue>/claims/qn-<seq>` ephemeral claims), [`Queue`] (plain async `put`, `put_all`, and the official recipe's `peek`,
//! `element`, `poll`, `remove`, `take`), and [`QueueConsumerActor`] (claims, deliveries, acks,
//! redelivery, dead letters).
//!
//! `docs/recipes/queue.md`, in the repository and the published package and reproduced below, gives
//! the protocol (the ZooKeeper operations per item, step by step, and the races they guard against)
//! and the failure table: what each fault does to producers and consumers, row by row, each row
//! naming the test that proves it.
//!
//! Files: `config.rs` (how a consumer consumes), `messages.rs` (deliveries, settlements, `Stop`),
//! `error.rs`, `consumer.rs` (the consumer actor: the in-flight set, deliveries, stopping),
//! `consumer/claiming.rs` (listing the queue and claiming or taking items) and
//! `consumer/settlement.rs` (acks, nacks and dead letters, batched), `plan.rs` (which items a consumer tries next),
//! `item.rs` (what an item's name says: its priority and due time),
//! `producer.rs` ([`Queue`]).
//!
#![doc = include_str!("../../docs/recipes/queue.md")]

mod config;
mod consumer;
mod error;
mod handle;
mod item;
mod messages;
mod plan;
mod producer;

pub use config::{ConsumerConfig, DeliveryMode, Worker};
pub use consumer::QueueConsumerActor;
pub use error::QueueError;
pub use handle::QueueConsumerHandle;
pub use item::ITEM_PREFIX;
pub use messages::{ConsumerEvent, Delivery, Outcome, Revoked, Settle, Stop, Subscribe, WaitIdle};
pub use producer::{ItemOptions, Queue};
