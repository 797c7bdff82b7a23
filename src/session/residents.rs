//! Who lives on a session's own thread besides the session actor: recipe actors started there
//! (`recipe::shell::start_beside_session`), so that the thread stops once the session and they
//! are all gone, not under their feet.
//!
//! Owns: counting those actors and stopping the session's Arbiter when the session and the last
//! of them have stopped. Does not own when any of them stops (each recipe's own lifetime rule).
//!
//! Why: an actor whose Arbiter stops is never polled again, and nobody is told: its handles'
//! requests would wait for ever, its subscribers would never hear its last events. A
//! participant outlives its session's close and answers `Closed`, as it does on any thread.

use std::sync::{Arc, Mutex, PoisonError};

use actix::prelude::ArbiterHandle;

/// The residents of one session's thread; cloned into every handle of the session.
#[derive(Debug, Clone)]
pub(crate) struct Residents(Arc<Mutex<Thread>>);

#[derive(Debug)]
struct Thread {
    arbiter: ArbiterHandle,
    residents: usize,
    session_stopped: bool,
}

impl Thread {
    fn stop_if_empty(&self) {
        if self.session_stopped && self.residents == 0 {
            self.arbiter.stop();
        }
    }
}

impl Residents {
    /// Nobody yet on `arbiter`, the session's thread.
    pub(crate) fn new(arbiter: ArbiterHandle) -> Self {
        Residents(Arc::new(Mutex::new(Thread { arbiter, residents: 0, session_stopped: false })))
    }

    /// One more actor lives on the thread until the returned [`Resident`] drops (keep it in the
    /// actor).
    pub(crate) fn enter(&self) -> Resident {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).residents += 1;
        Resident(self.clone())
    }

    /// The session actor has stopped: the thread stops now if nobody else lives there, else with
    /// the last resident.
    pub(crate) fn session_stopped(&self) {
        let mut thread = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        thread.session_stopped = true;
        thread.stop_if_empty();
    }
}

/// An actor's place on its session's thread; dropped with the actor.
#[derive(Debug)]
pub(crate) struct Resident(Residents);

impl Drop for Resident {
    fn drop(&mut self) {
        let mut thread = (self.0).0.lock().unwrap_or_else(PoisonError::into_inner);
        thread.residents -= 1;
        thread.stop_if_empty();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Residents;

    /// Whether `arbiter` still runs what it is given (within a bound: a stopped one never does).
    async fn runs(arbiter: &actix::ArbiterHandle) -> bool {
        let (ran, heard) = futures::channel::oneshot::channel();
        if !arbiter.spawn_fn(move || {
            let _ = ran.send(());
        }) {
            return false;
        }
        matches!(tokio::time::timeout(Duration::from_secs(5), heard).await, Ok(Ok(())))
    }

    /// The thread stops with the last of the session and its residents, whichever goes last, and
    /// not before.
    #[test]
    fn the_thread_stops_with_the_last_of_the_session_and_its_residents() {
        actix::System::new().block_on(async {
            let arbiter = actix::Arbiter::new();
            let residents = Residents::new(arbiter.handle());
            let (first, second) = (residents.enter(), residents.enter());
            residents.session_stopped();
            drop(first);
            // A stop sent now would be handled before this task: the thread must still run it.
            assert!(runs(&arbiter.handle()).await, "one resident left: the thread runs");
            drop(second);
            let joined = tokio::task::spawn_blocking(move || arbiter.join());
            let stopped = tokio::time::timeout(Duration::from_secs(5), joined).await;
            assert!(matches!(stopped, Ok(Ok(Ok(())))), "the thread stopped with its last resident");
        });
    }

    /// Residents that go before the session leave the thread to it.
    #[test]
    fn the_thread_outlives_residents_gone_before_the_session() {
        actix::System::new().block_on(async {
            let arbiter = actix::Arbiter::new();
            let residents = Residents::new(arbiter.handle());
            drop(residents.enter());
            assert!(runs(&arbiter.handle()).await, "the session still runs there");
            residents.session_stopped();
            let joined = tokio::task::spawn_blocking(move || arbiter.join());
            let stopped = tokio::time::timeout(Duration::from_secs(5), joined).await;
            assert!(matches!(stopped, Ok(Ok(Ok(())))), "the thread stopped with the session");
        });
    }
}
