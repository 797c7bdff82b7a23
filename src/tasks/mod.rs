//! Master–worker task assignment: an elected master assigns submitted tasks to registered
//! workers, puts back the tasks of workers that leave, and clients wait for results.
//!
//! Owns: [`TaskMaster`] (a candidate; while elected, a fresh term assigns and re-assigns),
//! [`TaskWorker`] (registration, running assigned tasks through the user's actor, recording
//! results), [`TaskClient`] (submit, wait for a result, forget), the assignment strategies and
//! [`MasterFence`]. Does not own the election itself ([`crate::election`]) or the session.
//!
//! Layout under a root (the classic design of "ZooKeeper: Distributed Process Coordination"):
//!
//! ```text
//! <root>/master/_c_<uuid>-latch-<seq>   election (Curator LeaderLatch layout), data = master id
//! <root>/workers/<worker>               ephemeral registration, data = capacity (decimal)
//! <root>/tasks/task-<uuid>              waiting for a worker, data = payload
//! <root>/assign/<worker>/task-<uuid>    assigned, data = payload
//! <root>/status/task-<uuid>             empty (version 0) until the result is written (version 1)
//! ```
//!
//! Every move is one transaction: `tasks → assign` (master, fenced), `assign → tasks` (master,
//! fenced, when the worker left), `assign → status` (worker). A task is therefore always in
//! exactly one place, and its result is written once.
//!
//! `docs/recipes/master-worker.md`, in the repository and the published package and reproduced
//! below, gives the protocol (how the master assigns and re-assigns, step by step, and the races it
//! guards against) and the failure table: what each fault does to master, workers and clients, row
//! by row, each row naming the test that proves it.
//!
//! Files: `layout.rs` (where everything lives), `messages.rs`, `error.rs`, `master.rs` and
//! `term.rs` (the master and its term), `backlog.rs` (the waiting tasks, oldest first),
//! `worker.rs`, `client.rs`, `master_fence.rs`, `strategy.rs`. Master and worker take the
//! `Subscribe` and `Stop` every recipe actor takes; the events they send differ
//! ([`MasterEvent`], [`WorkerEvent`]).
//!
#![doc = include_str!("../../docs/recipes/master-worker.md")]

mod backlog;
mod client;
mod error;
mod handle;
mod layout;
mod master;
mod master_fence;
mod messages;
mod strategy;
mod term;
mod worker;

pub use client::{Overview, TaskClient, TaskState};
pub use error::TaskError;
pub use handle::{TaskMasterHandle, TaskWorkerHandle};
pub use layout::TaskId;
pub use master::{TaskMaster, TaskMasterConfig};
pub use master_fence::MasterFence;
pub use messages::{CurrentTerm, DiscardReason, MasterEvent, Stop, Subscribe, TaskAssigned, TaskOutcome, WorkerEvent};
pub use strategy::{AssignStrategy, LeastLoaded, Random, RoundRobin, WorkerLoad};
pub use worker::{TaskWorker, TaskWorkerConfig};

pub use crate::recipe::{ConnectionPolicy, FencingToken};
