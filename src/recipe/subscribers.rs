//! Who hears a recipe's events: one list, one rule, for every recipe actor (and the rule the
//! session follows for its own subscribers).
//!
//! Owns: holding subscribers and telling them. **Subscribing never keeps an actor alive**: a
//! subscriber is held as a [`WeakRecipient`], so an actor that subscribes to a recipe it owns
//! (the usual shape) makes no cycle, and dropping its last address stops it as usual. Keep an
//! address of your subscriber for as long as it should hear events. A subscriber that has
//! stopped is forgotten at the next event. Does not own what is said.

use actix::{Message, Recipient, WeakRecipient};

/// The subscribers of one recipe actor.
pub(crate) struct Subscribers<E: Message<Result = ()> + Send> {
    list: Vec<WeakRecipient<E>>,
}

impl<E: Message<Result = ()> + Clone + Send + 'static> Subscribers<E> {
    /// Nobody yet.
    pub(crate) fn new() -> Self {
        Subscribers { list: Vec::new() }
    }

    /// Adds `recipient`; it hears every later event while it lives.
    pub(crate) fn add(&mut self, recipient: Recipient<E>) {
        self.list.push(recipient.downgrade());
    }

    /// Tells every live subscriber, forgetting those that stopped.
    pub(crate) fn tell(&mut self, event: E) {
        self.list.retain(|weak| match weak.upgrade() {
            Some(subscriber) if subscriber.connected() => {
                subscriber.do_send(event.clone());
                true
            }
            _ => false,
        });
    }
}
