//! [`ElectionObserverHandle`]: async methods over an [`ElectionObserver`], for programs that want
//! answers rather than messages.
//!
//! Owns: turning each request into one message and its reply into a `Result`. Does not own any
//! state: the observer does. A handle holds a strong address: the observer lives while a handle
//! does, and dropping the last one stops it.

use std::future::Future;

use actix::prelude::*;

use super::config::ElectionObserverConfig;
use super::error::ElectionError;
use super::messages::{CurrentProclamation, Proclamation, ProclamationChanged, Stop};
use super::observer::ElectionObserver;
use crate::recipe::shell::start_tagged;
use crate::session::SessionHandle;
use crate::session::health::HealthTag;

/// A cloneable handle to an [`ElectionObserver`]: who leads an election, in which term, with
/// which proclaimed value, for anyone (participants and programs that never run).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::election::ElectionError> {
/// use actix_zookeeper::election::ElectionObserverHandle;
/// use futures::StreamExt;
///
/// let observer = ElectionObserverHandle::start(session, "/services/billing/leader")?;
/// let mut changes = observer.events(); // starts with the current reading
/// while let Some(Ok(change)) = changes.next().await {
///     if let Some(now) = change.current {
///         println!("{} leads (term {}) with {:?}", now.leader_id, now.term, now.value);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ElectionObserverHandle {
    addr: Addr<ElectionObserver>,
    path: String,
    health: HealthTag,
}

impl ElectionObserverHandle {
    /// Starts an [`ElectionObserver`] for `config` (a path will do) on the current Arbiter. A
    /// path that is not valid is [`ElectionError::ZooKeeper`] with
    /// [`Error::InvalidPath`](crate::Error::InvalidPath), and nothing starts.
    pub fn start(
        session: SessionHandle,
        config: impl Into<ElectionObserverConfig>,
    ) -> Result<ElectionObserverHandle, ElectionError> {
        let config = config.into();
        crate::path::validate(config.path(), false)?;
        let path = config.path().to_owned();
        let (addr, health) = start_tagged(ElectionObserver::new(session, config));
        Ok(ElectionObserverHandle { addr, path, health })
    }

    /// A handle to a running observer of the election at `path` (its `health()` answers
    /// `None`: the session's board has the entry).
    pub fn new(addr: Addr<ElectionObserver>, path: impl Into<String>) -> ElectionObserverHandle {
        ElectionObserverHandle { addr, path: path.into(), health: HealthTag::default() }
    }

    /// Who leads now, in which term, with which value (`None` when nobody leads), as last read;
    /// waits for the first reading.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read of the observer's state.
    pub fn current(&self) -> impl Future<Output = Result<Option<Proclamation>, ElectionError>> + 'static {
        let asked =
            crate::reply::ask(&self.addr, CurrentProclamation, ElectionError::Stopped { path: self.path.clone() });
        async move { asked.await? }
    }

    crate::recipe::handle::handle_basics!(ElectionObserver => ProclamationChanged, subscribed: ", the current reading first", streamed: ", the current reading first");

    /// Stops the observer (an observer holds no node: there is nothing to delete). Sent when
    /// called; the future resolves once the actor has stopped.
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        self.addr.do_send(Stop);
        crate::stop::stopped(&self.addr)
    }
}
