//! Leader election: Curator's `LeaderLatch` / `LeaderSelector` as one actor per participant.
//!
//! Owns: [`ElectionActor`] and its [`ElectionHandle`] (contend, lead, resign, re-enter), its
//! configuration, messages and [`ElectionEvent`]s, observing who leads
//! ([`ElectionEvent::LeaderChanged`]), the leader's published value ([`proclaim`],
//! [`ElectionObserver`] and its [`ElectionObserverHandle`], [`ProclamationChanged`]), and the
//! leader-actor mode (start the user's actor while
//! leading, stop it otherwise). Does not own the node protocol (the crate's contender, shared
//! with the locks) or what holding leadership means under faults (the holder core, shared with
//! the locks).
//!
//! `docs/recipes/election.md`, in the repository and the published package and reproduced below,
//! gives the protocol (the ZooKeeper operations step by step, and the races they guard against) and
//! the failure table: what each fault does to the leader and the others, row by row, each row
//! naming the test that proves it. The node protocol beneath is in `docs/recipes/lock.md`.
//!
//! Files: `config.rs`, `messages.rs`, `error.rs`, `actor.rs`, `handle.rs` ([`ElectionHandle`],
//! async methods over the actor), `proclamation.rs` (the leader's value: stored format, fenced
//! write, ordering rule), `observer.rs` and `observer_handle.rs` (watching an election from
//! outside the line).
//!
#![doc = include_str!("../../docs/recipes/election.md")]

mod actor;
mod config;
mod error;
mod handle;
mod launcher;
mod messages;
mod observer;
mod observer_handle;
mod proclamation;

pub use actor::ElectionActor;
pub use config::{DEFAULT_LEADER_STOP_TIMEOUT, ElectionConfig, ElectionObserverConfig};
pub use error::ElectionError;
pub use handle::ElectionHandle;
pub use messages::{
    CurrentLeader, CurrentProclamation, ElectionEvent, Join, LeaderTerm, Leadership, LeadershipLostReason,
    Participants, Proclaim, Proclamation, ProclamationChanged, Resign, Stop, StopLeading, Subscribe,
};
pub use observer::ElectionObserver;
pub use observer_handle::ElectionObserverHandle;
pub use proclamation::proclaim;

pub use crate::recipe::{ConnectionPolicy, FencingToken};
