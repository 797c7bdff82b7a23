//! Who hears a recipe's events: one list, one rule, for every recipe actor.
//!
//! Owns: holding subscribers and telling them. A subscriber is held as a strong [`Recipient`]
//! (the recipe keeps it alive) and forgotten once it has stopped. Does not own what is said.

use actix::{Message, Recipient};

/// The subscribers of one recipe actor.
pub(crate) struct Subscribers<E: Message<Result = ()> + Send> {
    list: Vec<Recipient<E>>,
}

impl<E: Message<Result = ()> + Clone + Send + 'static> Subscribers<E> {
    /// Nobody yet.
    pub(crate) fn new() -> Self {
        Subscribers { list: Vec::new() }
    }

    /// Adds `recipient`; it hears every later event.
    pub(crate) fn add(&mut self, recipient: Recipient<E>) {
        self.list.push(recipient);
    }

    /// Tells every live subscriber, forgetting those that stopped.
    pub(crate) fn tell(&mut self, event: E) {
        self.list.retain(|s| s.connected());
        for subscriber in &self.list {
            subscriber.do_send(event.clone());
        }
    }
}
