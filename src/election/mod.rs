//! Leader election: Curator's `LeaderLatch` / `LeaderSelector` as one actor per participant.
//!
//! Owns: [`ElectionActor`] (contend, lead, resign, re-enter), its messages and
//! [`ElectionEvent`]s, observing who leads ([`ElectionEvent::LeaderChanged`]), and the
//! leader-actor mode (start the user's actor while leading, stop it otherwise). Does not own
//! the node protocol: that is [`crate::recipe::Contender`], shared with the locks.
//!
//! Layout = Curator's `LeaderLatch`: `<path>/_c_<uuid>-latch-<seq>`, data = participant id.
//! See `docs/recipes/election.md`.

mod actor;
mod messages;

pub use actor::{ElectionActor, ElectionConfig};
pub use messages::{
    CurrentLeader, ElectionError, ElectionEvent, Join, LeaderTerm, Leadership, LeadershipLostReason, Participants,
    Resign, Stop, StopLeading, Subscribe,
};

pub use crate::recipe::{ConnectionPolicy, FencingToken};
