//! Who hears the session: subscribers of `SessionEvent`s (told where the session stands when
//! they subscribe), and the questions about it (`GetSession`, `WaitConnected`).

use super::*;

impl SessionActor {
    /// The event that says where the session stands now, for a new subscriber.
    fn now(&self) -> Option<SessionEvent> {
        match &self.state {
            // The damper's view, not the link's: a subscriber joining while it holds events back
            // must hear the `Suspended` the others heard, or the `Reconnected` to come is a lie.
            State::Live(live) if self.damper.as_ref().is_some_and(Damper::is_open) => {
                Some(SessionEvent::Suspended { session_id: live.session_id, generation: self.generation })
            }
            State::Live(live) => match live.link {
                Connection::Up => {
                    Some(SessionEvent::Connected { session_id: live.session_id, generation: self.generation })
                }
                Connection::Down { .. } | Connection::Moving { .. } => {
                    Some(SessionEvent::Suspended { session_id: live.session_id, generation: self.generation })
                }
            },
            State::Connecting { .. } => None,
            State::Closed => Some(SessionEvent::Closed),
        }
    }
}

/// The current state is sent at once (e.g. `Connected` when a session is up), so a late
/// subscriber does not miss it.
impl Handler<Subscribe<SessionEvent>> for SessionActor {
    type Result = ();

    fn handle(&mut self, msg: Subscribe<SessionEvent>, _: &mut Context<Self>) {
        if let Some(event) = self.now() {
            msg.recipient.do_send(event);
        }
        self.subscribers.add(msg.recipient);
    }
}

impl Handler<Listen<SessionEvent>> for SessionActor {
    type Result = ();

    fn handle(&mut self, mut msg: Listen<SessionEvent>, _: &mut Context<Self>) {
        if let Some(event) = self.now() {
            msg.listener.offer(event);
        }
        self.subscribers.listen(msg.listener);
    }
}

impl Handler<GetSession> for SessionActor {
    type Result = Option<SessionSnapshot>;

    fn handle(&mut self, _: GetSession, _: &mut Context<Self>) -> Self::Result {
        self.snapshot()
    }
}

impl Handler<WaitConnected> for SessionActor {
    type Result = crate::reply::Reply<Result<SessionSnapshot>>;

    fn handle(&mut self, _: WaitConnected, _: &mut Context<Self>) -> Self::Result {
        match self.snapshot() {
            Some(snapshot) if snapshot.connected => crate::reply::Reply::Now(Ok(snapshot)),
            _ if matches!(self.state, State::Closed) && self.generation > 0 => {
                crate::reply::Reply::Now(Err(Error::Closed))
            }
            _ => {
                let (pending, reply) = crate::reply::Reply::later(Err(Error::Closed));
                self.awaiting_connection.push(pending);
                reply
            }
        }
    }
}
