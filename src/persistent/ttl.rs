//! [`PersistentTtlNode`]: a node that stays while its owner runs and goes a TTL after it stops or
//! dies, without an ephemeral's tie to one session (Curator's `PersistentTtlNode`).
//!
//! Owns: the TTL node's configuration ([`PersistentTtlNodeConfig`]) and handle. The upkeep is the persistent node's (its actor
//! creates the node as `PersistentWithTtl`, makes it again when deleted, touches its child every
//! half TTL, and leaves the node at stop). Does not own the expiry: the server's container
//! manager deletes a TTL node without children once its TTL has passed since its last change.

use std::future::Future;
use std::time::Duration;

use super::actor::TOUCHED_CHILD;
use super::config::PersistentNodeConfig;
use super::error::PersistentNodeError;
use super::handle::PersistentNodeHandle;
use super::messages::PersistentNodeEvent;
use crate::error::Error;
use crate::path;
use crate::session::SessionHandle;
use crate::session::requests::CreateMode;

/// The largest TTL ZooKeeper takes (`EphemeralType.TTL`'s 40-bit limit, in milliseconds).
pub const MAX_TTL: Duration = Duration::from_millis(0xFF_FFFF_FFFF);

/// What a [`PersistentTtlNode`] keeps: where, with which TTL and data.
#[derive(Debug, Clone)]
#[must_use]
pub struct PersistentTtlNodeConfig {
    node: PersistentNodeConfig,
    ttl: Duration,
}

impl PersistentTtlNodeConfig {
    /// The node at `path`, left to expire `ttl` after its child's last touch once its owner is
    /// gone; no data.
    pub fn new(path: impl Into<String>, ttl: Duration) -> Self {
        let mut node = PersistentNodeConfig::new(path, CreateMode::PersistentWithTtl(ttl));
        node.touched = Some(ttl);
        PersistentTtlNodeConfig { node, ttl }
    }

    /// The node's data (default: none).
    pub fn with_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.node = self.node.with_data(data);
        self
    }

    /// How the node's upkeep retries a failed request; default: its session's policy
    /// ([`SessionConfig::with_retry`](crate::session::SessionConfig::with_retry)).
    pub fn with_retry(mut self, policy: crate::retry::RetryPolicy) -> Self {
        self.node = self.node.with_retry(policy);
        self
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        self.node.path()
    }
}

/// A node kept alive by a touched child, and left to its TTL once we stop (Curator's layout):
///
/// ```text
/// <path>          PersistentWithTtl(ttl), data = the data given
/// <path>/touch    PersistentWithTtl(ttl), written every ttl / 2 while we run
/// ```
///
/// While we run, the child is touched within its TTL, so it stays, and a TTL node with a child
/// is never expired. Once we stop (or die), the child expires a TTL after its last touch, then
/// the node a TTL after that. The server must have TTL nodes enabled
/// (`zookeeper.extendedTypesEnabled=true`): otherwise [`PersistentNodeEvent::Failed`].
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::persistent::PersistentNodeError> {
/// use std::time::Duration;
/// use actix_zookeeper::persistent::PersistentTtlNode;
///
/// use actix_zookeeper::persistent::PersistentTtlNodeConfig;
///
/// let config = PersistentTtlNodeConfig::new("/workers/host-a", Duration::from_secs(30)).with_data("busy");
/// let node = PersistentTtlNode::start(session, config)?;
/// node.wait_for_initial_create(Some(Duration::from_secs(10))).await?;
/// node.stop().await; // the node stays, and goes about two TTLs later
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PersistentTtlNode {
    node: PersistentNodeHandle,
    path: String,
    ttl: Duration,
}

impl PersistentTtlNode {
    /// Keeps the node `config` describes on the current Arbiter. A TTL of zero or above
    /// [`MAX_TTL`] is [`PersistentNodeError::Failed`] with `BadArguments`; an invalid path is
    /// `Failed` too, and nothing starts.
    pub fn start(
        session: SessionHandle,
        config: PersistentTtlNodeConfig,
    ) -> Result<PersistentTtlNode, PersistentNodeError> {
        let PersistentTtlNodeConfig { node: config, ttl } = config;
        let path = config.path().to_owned();
        if ttl.as_millis() == 0 || ttl > MAX_TTL {
            let reason = format!("a TTL must be between 1 ms and {} ms, not {ttl:?}", MAX_TTL.as_millis());
            return Err(PersistentNodeError::Failed {
                source: Error::BadArguments { path: path.clone(), reason },
                path,
            });
        }
        Ok(PersistentTtlNode { node: PersistentNodeHandle::start(session, config)?, path, ttl })
    }

    /// The node's TTL.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The touched child's path (`<path>/touch`).
    pub fn child_path(&self) -> String {
        path::join(&self.path, TOUCHED_CHILD)
    }

    /// The node's path once it exists, at most `timeout` if given.
    ///
    /// # Cancel safety
    /// Cancel-safe: a wait.
    pub fn wait_for_initial_create(
        &self,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<String, PersistentNodeError>> + 'static {
        self.node.wait_for_initial_create(timeout)
    }

    /// Replaces the node's data (see [`PersistentNodeHandle::set_data`]).
    ///
    /// # Cancel safety
    /// The write is sent once the actor takes it.
    pub fn set_data(
        &self,
        data: impl Into<Vec<u8>>,
    ) -> impl Future<Output = Result<(), PersistentNodeError>> + 'static {
        self.node.set_data(data)
    }

    crate::recipe::handle::delegated_basics!(node => PersistentNodeEvent, "node");

    /// Stops touching and keeping the node; it stays until its TTL ends it. Resolves once the
    /// actor has stopped. Dropping the last handle does the same.
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        self.node.stop()
    }
}
