//! [`Damper`]: a flapping connection told to the recipes as one `Suspended` ... `Reconnected`
//! pair (Curator's `CircuitBreakingConnectionStateListener`), when
//! [`SessionConfig::with_flap_damper`](super::SessionConfig::with_flap_damper) asks for it.
//!
//! Owns: the pure rule deciding which `Suspended` and `Reconnected` reach subscribers. Does not
//! own timers (the session actor arms one when told to) or any other event: a new session, an
//! expiry, a close, always pass at once, because they change what a recipe holds.
//!
//! # The rule
//! The first `Suspended` passes and opens the damper for one window. While it is open, every
//! `Suspended` and `Reconnected` is held back (only the latest state is kept). When the window
//! ends: if the connection is up, the latest `Reconnected` passes and the damper closes; if it is
//! down, the damper stays open for another window. So any number of drops within a window reach
//! the recipes as one pair, and the `Reconnected` comes at most one window after the link
//! settled.

use super::events::SessionEvent;

/// Where the damper stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Events pass.
    Closed,
    /// A `Suspended` passed; holding back the rest until the window `window` ends. `latest`: the
    /// `Reconnected` to pass if the link is up then; `None` while it is down.
    Open { window: u64, latest: Option<SessionEvent> },
}

/// What the actor does after a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Damped {
    /// Tell subscribers these events (none, one, or a held `Reconnected`).
    Tell(Vec<SessionEvent>),
    /// Tell these, and end window `window` after the configured span (a timer).
    TellAndArm(Vec<SessionEvent>, u64),
}

/// The damper's state machine.
#[derive(Debug)]
pub(crate) struct Damper {
    state: State,
    windows: u64,
}

impl Damper {
    /// A closed damper.
    pub(crate) fn new() -> Damper {
        Damper { state: State::Closed, windows: 0 }
    }

    fn open(&mut self, latest: Option<SessionEvent>) -> u64 {
        self.windows += 1;
        self.state = State::Open { window: self.windows, latest };
        self.windows
    }

    /// True while events are held back: subscribers believe the connection is down.
    pub(crate) fn is_open(&self) -> bool {
        matches!(self.state, State::Open { .. })
    }

    /// An event of the session.
    pub(crate) fn event(&mut self, event: SessionEvent) -> Damped {
        match (&mut self.state, event) {
            (State::Closed, event @ SessionEvent::Suspended { .. }) => {
                let window = self.open(None);
                Damped::TellAndArm(vec![event], window)
            }
            (State::Open { latest, .. }, SessionEvent::Suspended { .. }) => {
                *latest = None;
                Damped::Tell(Vec::new())
            }
            (State::Open { latest, .. }, event @ SessionEvent::Reconnected { .. }) => {
                *latest = Some(event);
                Damped::Tell(Vec::new())
            }
            // A new session, an expiry, a close: at once, and the damper starts afresh.
            (_, event) => {
                self.state = State::Closed;
                Damped::Tell(vec![event])
            }
        }
    }

    /// The window `window` ended.
    pub(crate) fn window_ended(&mut self, window: u64) -> Damped {
        match &mut self.state {
            State::Open { window: open, latest } if *open == window => match latest.take() {
                Some(reconnected) => {
                    self.state = State::Closed;
                    Damped::Tell(vec![reconnected])
                }
                None => {
                    let window = self.open(None);
                    Damped::TellAndArm(Vec::new(), window)
                }
            },
            _ => Damped::Tell(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionId;

    fn suspended() -> SessionEvent {
        SessionEvent::Suspended { session_id: SessionId(1), generation: 1 }
    }

    fn reconnected() -> SessionEvent {
        SessionEvent::Reconnected { session_id: SessionId(1), generation: 1, read_only: false }
    }

    #[test]
    fn flaps_within_a_window_become_one_pair() {
        let mut damper = Damper::new();
        assert_eq!(damper.event(suspended()), Damped::TellAndArm(vec![suspended()], 1));
        for _ in 0..10 {
            assert_eq!(damper.event(reconnected()), Damped::Tell(Vec::new()));
            assert_eq!(damper.event(suspended()), Damped::Tell(Vec::new()));
        }
        assert_eq!(damper.event(reconnected()), Damped::Tell(Vec::new()));
        assert_eq!(damper.window_ended(1), Damped::Tell(vec![reconnected()]));
        // Closed again: the next drop passes.
        assert_eq!(damper.event(suspended()), Damped::TellAndArm(vec![suspended()], 2));
    }

    #[test]
    fn a_link_still_down_when_the_window_ends_keeps_it_open() {
        let mut damper = Damper::new();
        damper.event(suspended());
        damper.event(reconnected());
        damper.event(suspended());
        assert_eq!(damper.window_ended(1), Damped::TellAndArm(Vec::new(), 2));
        assert_eq!(damper.window_ended(1), Damped::Tell(Vec::new()), "an old window's timer does nothing");
        damper.event(reconnected());
        assert_eq!(damper.window_ended(2), Damped::Tell(vec![reconnected()]));
    }

    #[test]
    fn an_expiry_passes_at_once_and_closes_the_damper() {
        let mut damper = Damper::new();
        damper.event(suspended());
        let expired = SessionEvent::Expired { session_id: SessionId(1), generation: 1 };
        assert_eq!(damper.event(expired.clone()), Damped::Tell(vec![expired]));
        assert_eq!(damper.window_ended(1), Damped::Tell(Vec::new()));
        let connected = SessionEvent::Connected { session_id: SessionId(2), generation: 2 };
        assert_eq!(damper.event(connected.clone()), Damped::Tell(vec![connected]));
    }
}
