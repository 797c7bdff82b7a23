//! [`PersistentNodeHandle`]: async methods over a [`PersistentNode`], for programs that want
//! answers rather than messages.
//!
//! Owns: turning each request into one message and its reply into a `Result` (a stopped actor
//! is [`PersistentNodeError::Stopped`]). Does not own any state: the actor does. A handle holds a
//! strong address: the node is kept while a handle (or another address) lives, and dropping the
//! last one stops the actor, which deletes the node.

use std::future::Future;
use std::time::Duration;

use actix::prelude::*;

use super::actor::{DeleteAndStop, Left, PersistentNode};
use super::config::PersistentNodeConfig;
use super::error::PersistentNodeError;
use super::messages::{ActualPath, PersistentNodeEvent, SetData, WaitForInitialCreate};
use crate::recipe::shell::start_tagged;
use crate::reply::ask;
use crate::session::SessionHandle;
use crate::session::health::HealthTag;

/// A cloneable handle to one kept node (a [`PersistentNode`] actor).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::persistent::PersistentNodeError> {
/// use std::time::Duration;
/// use actix_zookeeper::CreateMode;
/// use actix_zookeeper::persistent::{PersistentNodeConfig, PersistentNodeHandle};
///
/// let config = PersistentNodeConfig::new("/services/billing/host-a", CreateMode::Ephemeral).with_data("10.0.0.7:8080");
/// let node = PersistentNodeHandle::start(session, config)?;
/// let path = node.wait_for_initial_create(Some(Duration::from_secs(10))).await?;
/// node.set_data("10.0.0.7:8081").await?;
/// node.stop().await; // the node is deleted
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PersistentNodeHandle {
    addr: Addr<PersistentNode>,
    path: String,
    left: Left,
    health: HealthTag,
}

impl PersistentNodeHandle {
    /// Starts a [`PersistentNode`] for `config` on the current Arbiter; it creates the node at
    /// once. [`PersistentNodeError::Failed`] for a path that can never be created.
    pub fn start(
        session: SessionHandle,
        config: PersistentNodeConfig,
    ) -> Result<PersistentNodeHandle, PersistentNodeError> {
        let path = config.path().to_owned();
        let node = PersistentNode::new(session, config)?;
        let left = node.left();
        let (addr, health) = start_tagged(node);
        Ok(PersistentNodeHandle { addr, path, left, health })
    }

    fn stopped(&self) -> PersistentNodeError {
        PersistentNodeError::Stopped { path: self.path.clone() }
    }

    /// The node's path once it exists (at once if it does), at most `timeout` if given.
    ///
    /// # Cancel safety
    /// Cancel-safe: a wait; dropping the future changes nothing.
    pub fn wait_for_initial_create(
        &self,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<String, PersistentNodeError>> + 'static {
        let waited = ask(&self.addr, WaitForInitialCreate { timeout }, self.stopped());
        async move { waited.await? }
    }

    /// Replaces the node's data now (and for every later create). [`PersistentNodeError::NotCreated`]
    /// while the node does not exist (the data is kept for its create all the same).
    ///
    /// # Cancel safety
    /// The write is sent once the actor takes the request: dropping the future after that does
    /// not withdraw it.
    pub fn set_data(
        &self,
        data: impl Into<Vec<u8>>,
    ) -> impl Future<Output = Result<(), PersistentNodeError>> + 'static {
        let set = ask(&self.addr, SetData { data: data.into() }, self.stopped());
        async move { set.await? }
    }

    /// The node's full path now, or `None` while it does not exist.
    pub fn actual_path(&self) -> impl Future<Output = Result<Option<String>, PersistentNodeError>> + 'static {
        ask(&self.addr, ActualPath, self.stopped())
    }

    crate::recipe::handle::handle_basics!(PersistentNode => PersistentNodeEvent);

    /// Deletes the node (retried until it is gone or its session is) and stops the actor;
    /// resolves once it has stopped.
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        let (stopped, dropped) = futures::channel::oneshot::channel();
        // Sent to a stopped actor, the message and its sender are dropped at once.
        self.addr.do_send(DeleteAndStop { stopped });
        async move {
            let _ = dropped.await;
        }
    }

    /// Deletes the node and stops, as [`stop`](Self::stop) does, and says whether the node went:
    /// [`PersistentNodeError::NotDeleted`] names a node that stays (its delete refused for good,
    /// or the session closed first), also when an earlier stop or the session's close left it.
    /// A TTL node is left to its TTL by design: `Ok`.
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the answer.
    pub fn delete(&self) -> impl Future<Output = Result<(), PersistentNodeError>> + 'static {
        let (stopped, left) = (self.stop(), self.left.clone());
        async move {
            stopped.await;
            match left.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone() {
                Some(error) => Err(error),
                None => Ok(()),
            }
        }
    }
}
