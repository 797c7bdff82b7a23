//! [`CacheHandle`]: async methods over a [`CacheActor`], for programs that want answers rather
//! than messages.
//!
//! Owns: turning each request into one message and its reply into a `Result` (a stopped actor
//! is [`CacheError::Stopped`]). Does not own any state: the actor does. A handle holds a strong
//! address: the cache lives while a handle (or another address) does.

use std::collections::BTreeMap;
use std::future::Future;

use actix::prelude::*;

use super::actor::CacheActor;
use super::config::CacheConfig;
use super::error::CacheError;
use super::messages::{CacheEvent, CachedNode, Get, Snapshot, Stop};
use crate::recipe::shell::start_tagged;
use crate::reply::ask;
use crate::session::SessionHandle;

/// A cloneable handle to one cache (a [`CacheActor`]).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::cache::CacheError> {
/// use actix_zookeeper::cache::{CacheConfig, CacheHandle, CacheScope};
///
/// let config = CacheConfig::new("/services/billing").with_scope(CacheScope::Children);
/// let cache = CacheHandle::start(session, config)?;
/// for (path, node) in cache.snapshot().await? {
///     println!("{path}: {} bytes", node.data.map_or(0, |data| data.len()));
/// }
/// cache.stop().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct CacheHandle {
    addr: Addr<CacheActor>,
    path: String,
    /// Keeps the cache's entry on the health board if it fails for good, until the last
    /// handle is dropped or one stops it.
    health: crate::session::health::HealthTag,
}

impl CacheHandle {
    /// Starts a [`CacheActor`] for `config` on the current Arbiter; it sets its watch, then
    /// loads. [`CacheError::ZooKeeper`] for an invalid path.
    pub fn start(session: SessionHandle, config: CacheConfig) -> Result<CacheHandle, CacheError> {
        let path = config.path().to_owned();
        let (addr, health) = start_tagged(CacheActor::new(session, config)?);
        Ok(CacheHandle { addr, path, health })
    }

    /// A handle to a running cache of `path`.
    pub fn new(addr: Addr<CacheActor>, path: impl Into<String>) -> CacheHandle {
        CacheHandle { addr, path: path.into(), health: Default::default() }
    }

    fn stopped(&self) -> CacheError {
        CacheError::Stopped { path: self.path.clone() }
    }

    /// The cached node at `path` (its full path), answered from memory ([`Get`]).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read of memory.
    pub fn get(
        &self,
        path: impl Into<String>,
    ) -> impl Future<Output = Result<Option<CachedNode>, CacheError>> + 'static {
        ask(&self.addr, Get { path: path.into() }, self.stopped())
    }

    /// Everything the cache holds, by path, answered from memory ([`Snapshot`]).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read of memory.
    pub fn snapshot(&self) -> impl Future<Output = Result<BTreeMap<String, CachedNode>, CacheError>> + 'static {
        ask(&self.addr, Snapshot, self.stopped())
    }

    crate::recipe::handle::handle_basics!(CacheActor => CacheEvent, subscribed: ", what is held already first");

    /// Stops the cache. Sent when called; the future resolves once the actor has stopped, with
    /// the removal of its watch sent to the session.
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        self.addr.do_send(Stop);
        self.health.release();
        crate::stop::stopped(&self.addr)
    }
}
