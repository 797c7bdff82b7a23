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
use super::messages::{CacheEvent, CachedNode, Get, Snapshot, Stop, Subscribe};
use crate::events::EventStream;
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
    tag: crate::session::health::HealthTag,
}

impl CacheHandle {
    /// Starts a [`CacheActor`] for `config` on the current Arbiter; it sets its watch, then
    /// loads. [`CacheError::ZooKeeper`] for an invalid path.
    pub fn start(session: SessionHandle, config: CacheConfig) -> Result<CacheHandle, CacheError> {
        let path = config.path().to_owned();
        let tag = crate::session::health::HealthTag::default();
        let addr = CacheActor::new(session, config)?.with_health_tag(tag.clone()).start();
        Ok(CacheHandle { addr, path, tag })
    }

    /// A handle to a running cache of `path`.
    pub fn new(addr: Addr<CacheActor>, path: impl Into<String>) -> CacheHandle {
        CacheHandle { addr, path: path.into(), tag: Default::default() }
    }

    /// The actor, for sending messages.
    pub fn addr(&self) -> &Addr<CacheActor> {
        &self.addr
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

    /// Every [`CacheEvent`] from now on, as a stream this caller owns; dropping it
    /// unsubscribes ([`crate::events`]).
    pub fn events(&self) -> EventStream<CacheEvent> {
        crate::events::events(&self.addr)
    }

    /// Sends every [`CacheEvent`] to `recipient`, what is held already first (held weakly: keep
    /// your subscriber's address, or use [`events`](Self::events)).
    pub fn subscribe(&self, recipient: Recipient<CacheEvent>) {
        self.addr.do_send(Subscribe { recipient });
    }

    /// This recipe's entry on its session's health board (as in
    /// [`SessionHandle::health`](crate::session::SessionHandle::health)): its kind, path and
    /// state; `None` while it has none (before its actor first reports, and once it has
    /// stopped). A recipe that failed for good keeps its `Failed` entry until it is stopped or
    /// its last handle is dropped.
    pub fn health(&self) -> Option<crate::session::health::RecipeHealth> {
        self.tag.current()
    }

    /// Stops the cache. Sent when called; the future resolves once the actor has stopped, with
    /// the removal of its watch sent to the session.
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        self.addr.do_send(Stop);
        self.tag.release();
        crate::stop::stopped(&self.addr)
    }
}
