//! The ZooKeeper session: one connection, owned by one actor, shared by every recipe.
//!
//! Owns: connecting, surviving disconnects, rebuilding an expired session
//! ([`SessionActor`]), the typed requests it serves ([`requests`]), the events it sends
//! ([`SessionEvent`], [`WatchEvent`]), until when the session is certainly alive ([`Lease`]),
//! and a cloneable front door ([`SessionHandle`]).
//! Does not own any recipe logic.

mod actor;
mod client;
mod config;
mod damper;
mod ensemble;
mod events;
mod features;
mod handle;
pub mod health;
mod lease;
mod live;
mod pinned;
pub mod requests;
pub(crate) mod residents;
mod sizing;
#[cfg(feature = "tls")]
mod tls;
pub(crate) mod watch;

pub(crate) use actor::IntoActorFree;
pub use actor::SessionActor;
pub use config::{DEFAULT_MAX_REQUEST_SIZE, RebuildPolicy, SessionConfig};
pub use events::{SessionEvent, SessionId, WatchEvent, WatchEventKind, WatchId, WatchRefusal};
pub(crate) use features::Features;
pub use features::{Feature, ServerFeatures, Support};
pub use handle::SessionHandle;
pub use lease::Lease;
pub use pinned::PinnedSession;
#[cfg(feature = "tls")]
pub use tls::TlsConfig;
