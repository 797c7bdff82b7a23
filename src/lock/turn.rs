//! [`Turn`]: which task of this process holds a handle's grant.
//!
//! Owns: the exclusion between the tasks (or actors) that share one [`LockHandle`] or
//! [`SemaphoreHandle`] (clones included). A participant holds at most one grant, so two tasks
//! that both `acquire` through one handle would otherwise share it; the turn makes the second
//! wait until the first releases, as a `tokio::sync::Mutex` over the distributed lock would.
//! Does not own the grant (the actor does) or re-entrancy (asked for explicitly, with
//! `acquire_reentrant`).
//!
//! [`LockHandle`]: super::LockHandle
//! [`SemaphoreHandle`]: super::SemaphoreHandle

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// One turn, shared by a handle's clones: taken by `acquire` until the grant is released.
#[derive(Clone, Debug)]
pub(super) struct Turn {
    free: Arc<Semaphore>,
    /// A task holds the turn (its permit was kept): `release` gives it back once.
    taken: Arc<AtomicBool>,
}

impl Turn {
    pub(super) fn new() -> Turn {
        Turn { free: Arc::new(Semaphore::new(1)), taken: Arc::new(AtomicBool::new(false)) }
    }

    /// Waits for the turn, at most `timeout`; `None` when it passed first. Fair: callers get
    /// it in the order they asked.
    pub(super) async fn wait(&self, timeout: Option<Duration>) -> Option<OwnedSemaphorePermit> {
        let asked = self.free.clone().acquire_owned();
        let permit = match timeout {
            Some(timeout) => tokio::time::timeout(timeout, asked).await.ok()?,
            None => asked.await,
        };
        // Never closed: the semaphore lives as long as the turn.
        permit.ok()
    }

    /// The turn if it is free now.
    pub(super) fn try_take(&self) -> Option<OwnedSemaphorePermit> {
        self.free.clone().try_acquire_owned().ok()
    }

    /// The grant was obtained with `permit`: the turn stays taken until [`give_back`](Self::give_back).
    pub(super) fn keep(&self, permit: OwnedSemaphorePermit) {
        permit.forget();
        self.taken.store(true, Ordering::SeqCst);
    }

    /// The grant is being released (its `Release` is in the actor's mailbox): the next caller
    /// may go. Its `Acquire` reaches the actor after that `Release`, so it stands in line anew.
    pub(super) fn give_back(&self) {
        if self.taken.swap(false, Ordering::SeqCst) {
            self.free.add_permits(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_task_at_a_time_and_a_release_lets_the_next_go() {
        let turn = Turn::new();
        let first = turn.wait(None).await.expect("free");
        assert!(turn.try_take().is_none(), "taken while the first holds its permit");
        turn.keep(first);
        assert!(turn.try_take().is_none(), "still taken once kept");
        assert!(turn.wait(Some(Duration::from_millis(20))).await.is_none(), "a waiter times out");
        turn.give_back();
        let second = turn.try_take().expect("free after the release");
        drop(second);
        turn.give_back(); // nothing kept: no second permit appears
        let a = turn.try_take().expect("one permit");
        assert!(turn.try_take().is_none(), "never two permits");
        drop(a);
    }
}
