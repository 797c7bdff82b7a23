//! [`SharedCountHandle`]: async methods over a [`SharedCount`], for programs that want answers
//! rather than messages.
//!
//! Owns: turning each request into one message and its reply into a `Result` (a stopped actor is
//! [`CounterError::Stopped`]), and which requests are carried out whatever the caller does
//! (every write). Does not own any state: the actor does. A handle holds a strong address: the
//! counter lives while a handle (or another address) does.

use std::future::Future;

use actix::prelude::*;

use super::actor::SharedCount;
use super::config::SharedCountConfig;
use super::error::CounterError;
use super::messages::{CountChanged, GetCount, SetCount, Stop, TrySetCount, VersionedCount};
use crate::recipe::shell::start_tagged;
use crate::reply::{ask, tell};
use crate::session::SessionHandle;
use crate::session::health::HealthTag;

/// A cloneable handle to one shared count (a [`SharedCount`] actor).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::counter::CounterError> {
/// use actix_zookeeper::counter::{SharedCountConfig, SharedCountHandle};
///
/// let visits = SharedCountHandle::start(session, SharedCountConfig::new("/stats/visits"))?;
/// let now = visits.get().await?;
/// if !visits.try_set(now.value + 1, now).await? {
///     // somebody else wrote first: read again and retry, or let `add` do that
/// }
/// let after = visits.add(10).await?;
/// println!("{} visits (version {})", after.value, after.version);
/// visits.stop().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SharedCountHandle {
    addr: Addr<SharedCount>,
    health: HealthTag,
}

impl SharedCountHandle {
    /// Starts a [`SharedCount`] for `config` on the current Arbiter; it creates the node with
    /// the seed if it is missing, and watches it.
    /// A path that is not valid is [`CounterError::ZooKeeper`] with
    /// [`Error::InvalidPath`](crate::Error::InvalidPath), and nothing starts.
    pub fn start(session: SessionHandle, config: SharedCountConfig) -> Result<SharedCountHandle, CounterError> {
        crate::path::validate(config.path(), false)?;
        let (addr, health) = start_tagged(SharedCount::new(session, config));
        Ok(SharedCountHandle { addr, health })
    }

    /// A handle to a running counter.
    pub fn new(addr: Addr<SharedCount>) -> SharedCountHandle {
        SharedCountHandle { addr, health: HealthTag::default() }
    }

    /// The current count and its version ([`GetCount`]).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read; dropping it loses only the answer.
    pub fn get(&self) -> impl Future<Output = Result<VersionedCount, CounterError>> + 'static {
        let asked = ask(&self.addr, GetCount, CounterError::Stopped);
        async move { asked.await? }
    }

    /// Writes `value` only if the count is still `expected` ([`TrySetCount`]): `Ok(false)` when
    /// someone wrote first.
    ///
    /// # Cancel safety
    /// The write is sent when this is called: dropping the future loses only its answer.
    pub fn try_set(
        &self,
        value: i32,
        expected: VersionedCount,
    ) -> impl Future<Output = Result<bool, CounterError>> + 'static {
        let told = tell(&self.addr, TrySetCount { value, expected }, CounterError::Stopped);
        async move { told.await? }
    }

    /// Writes `value` whatever the count is now ([`SetCount`]).
    ///
    /// # Cancel safety
    /// The write is sent when this is called: dropping the future loses only its answer.
    pub fn set(&self, value: i32) -> impl Future<Output = Result<VersionedCount, CounterError>> + 'static {
        let told = tell(&self.addr, SetCount { value }, CounterError::Stopped);
        async move { told.await? }
    }

    /// Adds `by` to the count, reading and writing again until a write applies ([`AddCount`](super::AddCount));
    /// returns the count written.
    ///
    /// # Cancel safety
    /// The add is sent when this is called: dropping the future does not withdraw it, and it
    /// applies once (unless the counter is stopped meanwhile: then at most once).
    pub fn add(&self, by: i32) -> impl Future<Output = Result<VersionedCount, CounterError>> + 'static {
        super::actor::add(&self.addr, by)
    }

    crate::recipe::handle::handle_basics!(SharedCount => CountChanged, subscribed: ", the current count first if it is known");

    /// Stops the counter (its node stays: a count outlives its users). Sent when called; the
    /// future resolves once the actor has stopped, and every request it had not answered has
    /// been answered [`CounterError::Stopped`]. A write among them may have been sent before the
    /// stop and applied: read the count before writing again.
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        self.addr.do_send(Stop);
        crate::stop::stopped(&self.addr)
    }
}
