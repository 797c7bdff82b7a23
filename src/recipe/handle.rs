//! [`handle_basics!`]: the methods every recipe handle has and that only touch its actor's
//! address (`addr`) and its health tag (`health`): `addr()`, `events()`, `subscribe()` and
//! `health()`, written once with one wording, so that every handle reads the same; and
//! [`delegated_basics!`], the same three for a handle that wraps another recipe's handle.
//!
//! Owns: those four methods and their docs. Does not own a handle's `start`, its requests or
//! its `stop()` (what a stop lets go of is each recipe's).

/// Writes `addr()`, `events()`, `subscribe()` and `health()` inside a handle's `impl` block,
/// for a handle with fields `addr: Addr<$actor>` and `health: HealthTag`. The optional
/// literals finish sentences of the docs: `subscribed` says what a subscriber hears first
/// (", the current value first"), `streamed` the same for a stream, `health` what the entry
/// is when it is another actor's.
macro_rules! handle_basics {
    ($actor:ident => $event:ident
        $(, subscribed: $subscribed:literal)?
        $(, streamed: $streamed:literal)?
        $(, health: $health:literal)? $(,)?) => {
        #[doc = concat!("The [`", stringify!($actor), "`], for sending messages.")]
        pub fn addr(&self) -> &actix::Addr<$actor> {
            &self.addr
        }

        #[doc = concat!(
            "Every [`", stringify!($event), "`] from now on", $($streamed,)?
            ", as a stream this caller owns (`ctx.add_stream` in an actor, or `.next().await`); ",
            "dropping it unsubscribes ([`crate::events`])."
        )]
        pub fn events(&self) -> $crate::events::EventStream<$event> {
            $crate::events::events(&self.addr)
        }

        #[doc = concat!(
            "Sends every [`", stringify!($event), "`] to `recipient`", $($subscribed,)?
            " (held weakly: keep your subscriber's address, or use [`events`](Self::events), ",
            "which cannot go silent)."
        )]
        pub fn subscribe(&self, recipient: actix::Recipient<$event>) {
            self.addr.do_send($crate::events::Subscribe { recipient });
        }

        #[doc = concat!(
            "This recipe's entry on its session's health board (as in ",
            "[`SessionHandle::health`](crate::session::SessionHandle::health)): its kind, path and ",
            "state; `None` while it has none (before its actor first reports, once it has stopped, ",
            "and for a handle made from an address with `new`: ask the session then). A recipe that ",
            "failed for good keeps its `Failed` entry until it is stopped or its last handle is dropped.",
            $(" ", $health,)?
        )]
        pub fn health(&self) -> Option<$crate::session::health::RecipeHealth> {
            self.health.current()
        }
    };
}
pub(crate) use handle_basics;

/// Writes `events()`, `subscribe()` and `health()` for a handle that wraps another recipe's
/// handle in its field `$inner` (a registration or a TTL node over a persistent node's handle):
/// each asks the inner handle. `$what` names what the handle stands for in the docs.
macro_rules! delegated_basics {
    ($inner:ident => $event:ident, $what:literal) => {
        #[doc = concat!("The ", $what, "'s events, as a stream this caller owns (see [`", stringify!($event), "`]).")]
        pub fn events(&self) -> $crate::events::EventStream<$event> {
            self.$inner.events()
        }

        #[doc = concat!("Sends every [`", stringify!($event), "`] to `recipient` (held weakly).")]
        pub fn subscribe(&self, recipient: actix::Recipient<$event>) {
            self.$inner.subscribe(recipient);
        }

        #[doc = concat!("The ", $what, "'s entry on its session's health board (as in")]
        #[doc = "[`SessionHandle::health`](crate::session::SessionHandle::health)); `None` while it has"]
        #[doc = "none (before its actor first reports, and once it has stopped)."]
        pub fn health(&self) -> Option<$crate::session::health::RecipeHealth> {
            self.$inner.health()
        }
    };
}
pub(crate) use delegated_basics;
