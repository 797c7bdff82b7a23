//! [`Participation`]: how one participant of a lock, a semaphore or an election takes part: the
//! id its node carries, what it assumes when the connection drops, and how it retries.
//!
//! Owns: those three settings, their defaults and their setters ([`participation_setters!`]),
//! written once for every such config. Does not own what a recipe does with them (the holder
//! core's, `holder`).

use super::holder::ConnectionPolicy;
use super::naming;
use crate::retry::RetryPolicy;

/// A participant's settings shared by every recipe built on the holder core.
#[derive(Debug, Clone)]
pub(crate) struct Participation {
    /// Stored as the participant's node's data.
    pub(crate) id: String,
    /// What a holder assumes when the connection drops.
    pub(crate) policy: ConnectionPolicy,
    /// The recipe's own retry policy; `None`: its session's.
    pub(crate) retry: Option<RetryPolicy>,
}

impl Default for Participation {
    fn default() -> Self {
        Participation { id: naming::default_participant_id(), policy: ConnectionPolicy::default(), retry: None }
    }
}

/// Writes `with_participant_id`, `with_policy` and `with_retry` for a config whose field
/// `participation` is a [`Participation`]. `id` finishes the participant id's doc (what sees it),
/// `holder` names who assumes what the policy says.
macro_rules! participation_setters {
    (id: $id:literal, holder: $holder:literal) => {
        #[doc = concat!("Stored as this participant's node's data", $id, ".")]
        #[doc = "Default: `<host>/<pid>/<n>`, different for every participant."]
        pub fn with_participant_id(mut self, participant_id: impl Into<String>) -> Self {
            self.participation.id = participant_id.into();
            self
        }

        #[doc = concat!("What ", $holder, " assumes when the connection drops (default: conservative).")]
        pub fn with_policy(mut self, policy: $crate::recipe::ConnectionPolicy) -> Self {
            self.participation.policy = policy;
            self
        }

        /// How this participant retries a failed request; default: its session's policy
        /// ([`SessionConfig::with_retry`](crate::session::SessionConfig::with_retry)).
        pub fn with_retry(mut self, retry: $crate::retry::RetryPolicy) -> Self {
            self.participation.retry = Some(retry);
            self
        }
    };
}
pub(crate) use participation_setters;
