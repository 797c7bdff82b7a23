//! What every recipe shares: the contender protocol, protected node names, fencing tokens.
//!
//! Owns: the [`Contender`] actor (one ephemeral-sequential node from protected create to
//! deletion, waiting on its predecessor only), the rules that decide who holds what
//! ([`naming`]), and [`FencingToken`]. Does not own request/reply handling, subscriber
//! notification or connection-state policy: those belong to each recipe (locks, elections).

pub mod contender;
pub mod fencing;
pub mod naming;
pub(crate) mod participants;
pub(crate) mod registration;
pub mod reply;

pub(crate) use contender::delete_until_gone;
pub use contender::{
    Abandon, Contender, ContenderEvent, ContenderReport, ContenderSpec, LostReason, Relisted, Withdraw,
};
pub use fencing::FencingToken;
pub use naming::Rule;
pub use reply::Reply;

/// What a holder (of a lock, a lease, a leadership) assumes when the connection drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConnectionPolicy {
    /// `Suspended` means "you may no longer hold it"; if the connection is not back within the
    /// session timeout the grant is reported lost (Curator's standard policy). The default.
    #[default]
    Conservative,
    /// Only a session expiry (or the node's deletion) ends a grant; `Suspended` is informational
    /// (Curator's `SessionConnectionStateErrorPolicy`).
    ExpiryOnly,
}

/// Under [`ConnectionPolicy::Conservative`], a holder whose connection dropped stops claiming its
/// grant after one session timeout: by then the server has most likely expired the session.
/// Runs `give_up` after the session's negotiated timeout; cancel the returned handle when the
/// connection comes back.
pub(crate) fn disconnect_deadline<A>(
    session: &crate::session::SessionHandle,
    ctx: &mut actix::Context<A>,
    give_up: impl FnOnce(&mut A, &mut actix::Context<A>) + 'static,
) -> actix::SpawnHandle
where
    A: actix::Actor<Context = actix::Context<A>>,
{
    use actix::{ActorFutureExt, AsyncContext};

    use crate::session::IntoActorFree;
    let snapshot = session.session();
    let wait = async move {
        let timeout = snapshot.await.map(|s| s.timeout).unwrap_or_default();
        tokio::time::sleep(timeout).await;
    };
    ctx.spawn(wait.into_actor_free().map(move |(), act, ctx| give_up(act, ctx)))
}
