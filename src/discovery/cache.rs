//! [`ServiceCache`]: a live view of one service's instances (Curator's `ServiceCache`).
//!
//! Built on a children [`CacheActor`] of `<base>/<name>`: the cache owns loading, watching and
//! re-syncing; this actor owns reading each node as an instance (skipping, and saying so, any
//! node that is not one) and telling subscribers what changed in instance terms.

use std::collections::BTreeMap;

use actix::prelude::*;
use futures::channel::oneshot;
use tracing::{debug, warn};

use super::error::DiscoveryError;
use super::format;
use super::instance::ServiceInstance;
use super::messages::*;
use crate::cache::{CacheEvent, ChildrenView};
use crate::error::Error;
use crate::path;
use crate::recipe::shell::Shell;
use crate::session::SessionHandle;

/// The instances of one service, kept in memory and in sync; see `docs/recipes/discovery.md`.
pub struct ServiceCache {
    name: String,
    dir: String,
    /// Stopped with this actor (dropped with it).
    view: Option<ChildrenView>,
    /// Readable instances by node name.
    instances: BTreeMap<String, ServiceInstance>,
    /// Nodes that are not instances, by node name, with why (told to late subscribers too).
    unreadable: BTreeMap<String, DiscoveryError>,
    initialized: bool,
    failed: Option<Error>,
    waiters: Vec<oneshot::Sender<Result<(), DiscoveryError>>>,
    /// Kept last: its lifeline must drop after everything else the actor holds.
    shell: Shell<ServiceCacheEvent>,
}

impl ServiceCache {
    /// A cache of service `name` under `base_path`; start it with `.start()`.
    pub fn new(session: SessionHandle, base_path: &str, name: &str) -> Result<ServiceCache, DiscoveryError> {
        path::validate(base_path, false)?;
        path::validate_name(name).map_err(|reason| DiscoveryError::InvalidInstance { field: "name", reason })?;
        let dir = path::join(base_path, name);
        let span = tracing::info_span!("zk.service_cache", service = %dir);
        Ok(ServiceCache {
            shell: Shell::new(session, span, None),
            name: name.to_owned(),
            dir,
            view: None,
            instances: BTreeMap::new(),
            unreadable: BTreeMap::new(),
            initialized: false,
            failed: None,
            waiters: Vec::new(),
        })
    }

    fn instance_node<'a>(&self, node: &'a str) -> Option<&'a str> {
        (path::parent(node) == Some(self.dir.as_str())).then(|| path::name(node))
    }

    /// A node's data changed (or the node appeared): told as the instance it now holds.
    fn read(&mut self, node: &str, data: Option<Vec<u8>>) {
        let Some(name) = self.instance_node(node) else { return };
        let decoded = format::decode(&data.unwrap_or_default());
        let _span = self.shell.span().clone().entered();
        match decoded {
            Ok(instance) => {
                self.unreadable.remove(name);
                let event = match self.instances.insert(name.to_owned(), instance.clone()) {
                    None => ServiceCacheEvent::InstanceAdded { instance },
                    Some(old) if old == instance => return,
                    Some(_) => ServiceCacheEvent::InstanceUpdated { instance },
                };
                debug!(node, "instance seen");
                self.shell.tell(event);
            }
            Err(reason) => {
                warn!(node, %reason, "not a service instance; skipped");
                if let Some(instance) = self.instances.remove(name) {
                    self.shell.tell(ServiceCacheEvent::InstanceRemoved { instance });
                }
                let error = DiscoveryError::Unreadable { path: node.to_owned(), reason };
                self.unreadable.insert(name.to_owned(), error.clone());
                self.shell.tell(ServiceCacheEvent::InstanceUnreadable { error });
            }
        }
    }

    fn answer_waiters(&mut self) {
        let outcome = match &self.failed {
            Some(source) => Err(DiscoveryError::CacheFailed { name: self.name.clone(), source: source.clone() }),
            None => Ok(()),
        };
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(outcome.clone());
        }
    }
}

impl Actor for ServiceCache {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        match ChildrenView::start(&self.shell, self.dir.clone(), ctx.address().recipient()) {
            Ok(view) => self.view = Some(view),
            // The path was validated in `new`.
            Err(error) => warn!(parent: self.shell.span(), %error, "cannot watch the service"),
        }
    }
}

impl Handler<CacheEvent> for ServiceCache {
    type Result = ();

    fn handle(&mut self, event: CacheEvent, ctx: &mut Context<Self>) {
        match event {
            CacheEvent::NodeAdded { path, data, .. } | CacheEvent::NodeUpdated { path, data, .. } => {
                self.read(&path, data)
            }
            CacheEvent::NodeRemoved { path } => {
                let Some(name) = self.instance_node(&path) else { return };
                self.unreadable.remove(name);
                if let Some(instance) = self.instances.remove(name) {
                    self.shell.tell(ServiceCacheEvent::InstanceRemoved { instance });
                }
            }
            CacheEvent::NodeSkipped { path, error } => {
                if let Some(name) = self.instance_node(&path).map(str::to_owned) {
                    let error = DiscoveryError::Unreadable { path, reason: error.to_string() };
                    self.unreadable.insert(name, error.clone());
                    self.shell.tell(ServiceCacheEvent::InstanceUnreadable { error });
                }
            }
            CacheEvent::CacheInitialized => {
                self.initialized = true;
                self.answer_waiters();
                self.shell.tell(ServiceCacheEvent::CacheInitialized);
            }
            CacheEvent::CacheResynced => self.shell.tell(ServiceCacheEvent::CacheResynced),
            CacheEvent::CacheFailed { error } => {
                warn!(parent: self.shell.span(), %error, "the service cache failed");
                self.failed = Some(error.clone());
                self.answer_waiters();
                self.shell.tell(ServiceCacheEvent::CacheFailed { error });
                ctx.stop();
            }
        }
    }
}

impl Handler<Instances> for ServiceCache {
    type Result = MessageResult<Instances>;

    fn handle(&mut self, _: Instances, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.instances.values().cloned().collect())
    }
}

impl Handler<WaitInitialized> for ServiceCache {
    type Result = ResponseFuture<Result<(), DiscoveryError>>;

    fn handle(&mut self, msg: WaitInitialized, _: &mut Context<Self>) -> Self::Result {
        if self.initialized {
            return Box::pin(async { Ok(()) });
        }
        let (answer, answered) = oneshot::channel();
        self.waiters.retain(|waiter| !waiter.is_canceled());
        self.waiters.push(answer);
        let (name, dir) = (self.name.clone(), self.dir.clone());
        Box::pin(async move {
            let stopped = || DiscoveryError::Cache(crate::cache::CacheError::Stopped { path: dir });
            match msg.timeout {
                None => answered.await.unwrap_or_else(|_| Err(stopped())),
                Some(after) => match tokio::time::timeout(after, answered).await {
                    Ok(answer) => answer.unwrap_or_else(|_| Err(stopped())),
                    Err(_) => Err(DiscoveryError::Timeout { what: format!("loading service {name}"), after }),
                },
            }
        })
    }
}

/// A subscriber that comes after the first load first gets `InstanceAdded` for every instance
/// held, `InstanceUnreadable` for every node that is not one, and `CacheInitialized`.
impl Handler<Subscribe<ServiceCacheEvent>> for ServiceCache {
    type Result = ();

    fn handle(&mut self, msg: Subscribe<ServiceCacheEvent>, _: &mut Context<Self>) {
        // What is held now, then live events: the same story a first subscriber heard.
        for instance in self.instances.values() {
            msg.recipient.do_send(ServiceCacheEvent::InstanceAdded { instance: instance.clone() });
        }
        for error in self.unreadable.values() {
            msg.recipient.do_send(ServiceCacheEvent::InstanceUnreadable { error: error.clone() });
        }
        if self.initialized {
            msg.recipient.do_send(ServiceCacheEvent::CacheInitialized);
        }
        self.shell.subscribers().add(msg.recipient);
    }
}

crate::recipe::shell::on_the_shell!(ServiceCache => ServiceCacheEvent);

/// Stops the cache; its watch is removed.
impl Handler<Stop> for ServiceCache {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
