//! [`SharedValueHandle`]: async methods over a [`SharedValue`], for programs that want answers
//! rather than messages.
//!
//! Owns: turning each request into one message and its reply into a `Result` (a stopped actor is
//! [`SharedValueError::Stopped`]), and which requests are carried out whatever the caller does
//! (every write). Does not own any state: the actor does. A handle holds a strong address: the
//! value's actor lives while a handle (or another address) does.

use std::future::Future;

use actix::prelude::*;

use super::config::SharedValueConfig;
use super::error::SharedValueError;
use super::messages::{GetValue, SetValue, Stop, TrySetValue, ValueChanged, VersionedValue};
use super::value::SharedValue;
use crate::recipe::shell::start_tagged;
use crate::reply::{ask, tell};
use crate::session::SessionHandle;
use crate::session::health::HealthTag;

/// A cloneable handle to one shared value (a [`SharedValue`] actor).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::shared::SharedValueError> {
/// use actix_zookeeper::shared::{SharedValueConfig, SharedValueHandle};
///
/// let mode = SharedValueHandle::start(session, SharedValueConfig::new("/config/mode").with_seed("normal"))?;
/// let now = mode.get().await?;
/// if !mode.try_set("maintenance", now).await? {
///     // somebody else wrote first
/// }
/// mode.stop().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SharedValueHandle {
    addr: Addr<SharedValue>,
    health: HealthTag,
}

impl SharedValueHandle {
    /// Starts a [`SharedValue`] for `config` on the current Arbiter; it creates the node with
    /// the seed if it is missing, and watches it.
    /// A path that is not valid is [`SharedValueError::ZooKeeper`] with
    /// [`Error::InvalidPath`](crate::Error::InvalidPath), and nothing starts.
    pub fn start(session: SessionHandle, config: SharedValueConfig) -> Result<SharedValueHandle, SharedValueError> {
        crate::path::validate(config.path(), false)?;
        let (addr, health) = start_tagged(SharedValue::new(session, config));
        Ok(SharedValueHandle { addr, health })
    }

    /// A handle to a running shared value (its `health()` answers `None`: the session's board
    /// has the entry).
    pub fn new(addr: Addr<SharedValue>) -> SharedValueHandle {
        SharedValueHandle { addr, health: HealthTag::default() }
    }

    /// The current value and its version ([`GetValue`]).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read; dropping it loses only the answer.
    pub fn get(&self) -> impl Future<Output = Result<VersionedValue, SharedValueError>> + 'static {
        let asked = ask(&self.addr, GetValue, SharedValueError::Stopped);
        async move { asked.await? }
    }

    /// Writes `value` only if the node still holds `expected` ([`TrySetValue`]): `Ok(false)`
    /// when someone wrote first.
    ///
    /// # Cancel safety
    /// The write is sent when this is called: dropping the future loses only its answer.
    pub fn try_set(
        &self,
        value: impl Into<Vec<u8>>,
        expected: VersionedValue,
    ) -> impl Future<Output = Result<bool, SharedValueError>> + 'static {
        let told = tell(&self.addr, TrySetValue { value: value.into(), expected }, SharedValueError::Stopped);
        async move { told.await? }
    }

    /// Writes `value` whatever the node holds ([`SetValue`]).
    ///
    /// # Cancel safety
    /// The write is sent when this is called: dropping the future loses only its answer.
    pub fn set(
        &self,
        value: impl Into<Vec<u8>>,
    ) -> impl Future<Output = Result<VersionedValue, SharedValueError>> + 'static {
        let told = tell(&self.addr, SetValue { value: value.into() }, SharedValueError::Stopped);
        async move { told.await? }
    }

    crate::recipe::handle::handle_basics!(SharedValue => ValueChanged, subscribed: ", the current value first if it is known");

    /// Stops the actor (the node stays). Resolves once it has stopped; every request it had not
    /// answered has been answered [`SharedValueError::Stopped`].
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        self.addr.do_send(Stop);
        crate::stop::stopped(&self.addr)
    }
}
