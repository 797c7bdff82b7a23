//! The holder core: what a lock, a semaphore and an election share about holding a grant.
//!
//! Owns: the attempt (numbered, so reports of an attempt that was left are ignored), the callers
//! waiting for a grant, the link state of a held grant (`Up`, `Suspended`, `Verifying`), the
//! [`ConnectionPolicy`] and its deadline, what a session expiry does to a grant, releasing
//! (tell the contender to stand down, *then* delete), and what subscribers are told
//! ([`Happened`]). Does not own the node protocol (the contender), how many
//! contenders an attempt needs (one for a lock or an election, two for a semaphore), or the
//! event types of each recipe: a recipe is a [`HolderHost`] that maps [`Happened`] to its own
//! events and starts its own contenders.
//!
//! # Shape
//! [`Holder`] is a pure state machine: every input (a request, a contender's report, a session
//! event, a timer) is a method that changes the state and returns the `Effect`s to perform,
//! in order. [`run`] (in `host.rs`) performs them for a host actor. Races are therefore tested
//! without a server (the unit tests of `state.rs`), and forced against a real ZooKeeper in
//! `tests/holding.rs`.
//!
//! # Rules (each was once broken; each has a regression test)
//! - A grant is answered only to a caller that takes it; one nobody received is given back.
//! - A grant computed on a session known to have expired is never handed out: the
//!   attempt starts over.
//! - A session expiry ends a held grant at once, before the contender's own report arrives, so a
//!   `Release` that follows is answered `Lost`, not `Ok`.
//! - Releasing tells the contender to stand down before the delete is sent, so the contender never
//!   mistakes our own delete for somebody else's.
//! - `Released` means our delete removed the node; a node that was already gone is `Lost`.
//!
//! # Recovery
//! Suspended (connection lost, session maybe alive): subscribers hear `Suspended`; under the
//! conservative policy the grant is lost after one session timeout without the connection.
//! Reconnected: the node is read again before the grant is `Restored` (it may have been deleted
//! while we were away). Expired: the grant is lost; with re-acquire (lock) or re-queue (election)
//! a new attempt starts on the next session.

//!
//! Files: `state.rs` (the pure state machine: [`Holder`] and its inputs and `Effect`s),
//! `host.rs` (what a recipe actor provides, [`HolderHost`], and [`run`], which performs effects).

mod host;
mod state;

pub(crate) use host::{
    CallerGone, ContenderSlot, HolderHost, caller_gone, cancel_timeout, goodbye, host_parts, report, run,
    session_event, start_host, stopped, time_out,
};
pub use state::ConnectionPolicy;
pub(crate) use state::{Attempt, Grant, Happened, Holder, InLine, Loss, Refusal, ReleaseError, Waiter};
