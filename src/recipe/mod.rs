//! What every recipe shares: the contender protocol, protected node names, fencing tokens.
//!
//! Owns: the contender (`contender`, crate-private, run inside its recipe actor: one ephemeral-sequential node from
//! protected create to deletion, waiting on its predecessor only), the rules that decide who holds what
//! ([`naming`]), the nodes this process saw first in line (`known_heads`), [`FencingToken`], and the holder core (`holder`: attempts, waiting callers,
//! link state, [`ConnectionPolicy`], expiry, release, what subscribers hear) that the lock, the
//! semaphore and the election are built on. Does not own the words each recipe uses for its
//! requests and events: those live in the recipe modules.

pub(crate) mod contender;
pub mod fence;
pub(crate) mod guarded;
pub(crate) mod handle;
pub(crate) mod holder;
pub(crate) mod known_heads;
pub mod naming;
pub(crate) mod participants;
pub(crate) mod participation;
pub(crate) mod registration;
pub(crate) mod shell;

/// Moved below the session ([`crate::reply`]); kept here so that `recipe::reply` paths still work.
pub use crate::reply;
pub use crate::reply::Reply;
pub use crate::token::FencingToken;
pub(crate) use contender::delete_until_gone;
pub(crate) use contender::{ContenderEvent, ContenderReport, ContenderSpec, REVOKE_MESSAGE};
pub(crate) use fence::error_from_fence;
pub use fence::{Fence, FenceError, NotCurrent};
pub use holder::ConnectionPolicy;
pub use naming::Rule;
pub(crate) use participation::{Participation, participation_setters};
