//! [`Registration`]: one instance registered, kept registered, updated and unregistered.
//!
//! Owns: the instance's node as a [`PersistentNode`](crate::persistent::PersistentNode) in the
//! service type's create mode (created again after a new session and after someone deletes it),
//! waiting for its first create, and refusing an id another live session holds. Does not own
//! the node's upkeep (the persistent node's) or the bytes (`format.rs`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tracing::{Instrument, info};

use super::error::DiscoveryError;
use super::format;
use super::instance::ServiceInstance;
use crate::events::EventStream;
use crate::path;
use crate::persistent::{PersistentNodeConfig, PersistentNodeError, PersistentNodeEvent, PersistentNodeHandle};
use crate::session::SessionHandle;

/// A registered instance. Its node is kept while a clone of the handle lives: dropping the last
/// one unregisters it, as [`unregister`](Self::unregister) does.
///
/// Its events are the node's ([`PersistentNodeEvent`]): `Created` when it is registered again
/// (after a new session, or after someone deleted it), `Deleted` when it was found gone,
/// `Blocked` while another live session's node holds its id, `Failed` when it cannot be made.
#[derive(Clone, Debug)]
pub struct Registration {
    node: PersistentNodeHandle,
    name: String,
    id: String,
    path: String,
    /// The instance as last written (registered, then each successful update), shared by the
    /// clones.
    current: Arc<Mutex<ServiceInstance>>,
}

impl Registration {
    /// Registers `instance` under `base_path`: waits up to `timeout` for its node.
    pub(super) async fn register(
        session: SessionHandle,
        base_path: &str,
        instance: ServiceInstance,
        timeout: Duration,
    ) -> Result<Registration, DiscoveryError> {
        let data = format::encode(&instance)?;
        let current = Arc::new(Mutex::new(instance.clone()));
        let target = path::join(&path::join(base_path, &instance.name), &instance.id);
        let mode = instance.service_type.create_mode();
        let config = PersistentNodeConfig::new(target, mode).with_data(data).replacing_persistent();
        let (name, id) = (instance.name.clone(), instance.id.clone());
        let span = tracing::info_span!("zk.discovery.register", service = %name, %id);
        // A closed session never connects again: say so, not at the timeout. (The node's actor
        // may never hear it: a closing session drops new subscribers.)
        let closed = session.connected();
        let node = PersistentNodeHandle::start(session, config)?;
        let events = node.events();
        let created = first_create(&node, events, &name, &id);
        let refused = async move {
            match closed.await {
                Err(error) => DiscoveryError::ZooKeeper(error),
                Ok(_) => futures::future::pending().await,
            }
        };
        let either = async move {
            futures::pin_mut!(created, refused);
            match futures::future::select(created, refused).await {
                futures::future::Either::Left((created, _)) => created,
                futures::future::Either::Right((refused, _)) => Err(refused),
            }
        };
        let made = tokio::time::timeout(timeout, either).instrument(span.clone()).await;
        let path = match made {
            Ok(Ok(path)) => path,
            // The stop is sent, not awaited (its delete may wait for a connection): whatever was
            // made meanwhile goes with it.
            Ok(Err(error)) => {
                drop(node.stop());
                return Err(error);
            }
            Err(_) => {
                drop(node.stop());
                return Err(DiscoveryError::Timeout { what: format!("registering {name}/{id}"), after: timeout });
            }
        };
        info!(parent: &span, %path, "registered");
        crate::metrics::discovery("registered", &name);
        let registration = Registration { node, name, id, path, current };
        registration.count_registrations_again();
        Ok(registration)
    }

    /// Counts the registrations made again (after a new session or a deletion) in the metrics.
    fn count_registrations_again(&self) {
        let mut events = self.node.events();
        let name = self.name.clone();
        actix::spawn(async move {
            while let Some(event) = events.next().await {
                if let Ok(PersistentNodeEvent::Created { .. }) = event {
                    crate::metrics::discovery("reregistered", &name);
                }
            }
        });
    }

    /// The service's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instance's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The instance node's path, as first created (with its sequence number for
    /// `DynamicSequential`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Replaces the registered instance (Curator's `updateService`); it keeps its name and id
    /// ([`DiscoveryError::NotThisInstance`] otherwise). Written now, and on every later create.
    /// While the node does not exist (being registered again)
    /// [`PersistentNodeError::NotCreated`]: the update is written by that create.
    ///
    /// # Cancel safety
    /// The write is sent once the node's actor takes it: dropping the future after that does
    /// not withdraw it.
    pub async fn update(&self, instance: ServiceInstance) -> Result<(), DiscoveryError> {
        if instance.name != self.name || instance.id != self.id {
            return Err(DiscoveryError::NotThisInstance {
                name: instance.name,
                id: instance.id,
                registered: format!("{}/{}", self.name, self.id),
            });
        }
        let data = format::encode(&instance)?;
        self.node.set_data(data).await?;
        *self.current.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = instance;
        Ok(())
    }

    /// The instance as registered, or as last updated through this registration: the base for
    /// an update that changes one field and keeps the rest (its `registration_time_utc`
    /// included, which a freshly built instance would reset).
    ///
    /// ```no_run
    /// # async fn demo(registration: actix_zookeeper::discovery::Registration) -> Result<(), actix_zookeeper::discovery::DiscoveryError> {
    /// let mut instance = registration.instance();
    /// instance.enabled = false; // drain this instance
    /// registration.update(instance).await?;
    /// # Ok(()) }
    /// ```
    pub fn instance(&self) -> ServiceInstance {
        self.current.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    crate::recipe::handle::delegated_basics!(node => PersistentNodeEvent, "registration");

    /// Unregisters: deletes the node (a `Dynamic` one only if our session made it; fenced by
    /// its owner, so another process's registration of the same id is never deleted) and stops;
    /// resolves once done. Every clone stops with it. `Ok` means no node of ours stays;
    /// [`DiscoveryError::Registration`] with [`PersistentNodeError::NotDeleted`] names the node
    /// that does (its delete refused for good, or the session closed before it could be sent,
    /// also when that close came first).
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the answer.
    pub fn unregister(&self) -> impl std::future::Future<Output = Result<(), DiscoveryError>> + 'static {
        crate::metrics::discovery("unregistered", &self.name);
        let deleted = self.node.delete();
        async move { deleted.await.map_err(DiscoveryError::from) }
    }
}

/// The node's path once created; [`DiscoveryError::IdTaken`] when another live session's node
/// holds it; the node's failure.
async fn first_create(
    node: &PersistentNodeHandle,
    mut events: EventStream<PersistentNodeEvent>,
    name: &str,
    id: &str,
) -> Result<String, DiscoveryError> {
    let created = node.wait_for_initial_create(None);
    let refused = async {
        while let Some(event) = events.next().await {
            match event {
                Ok(PersistentNodeEvent::Blocked { .. }) => {
                    return DiscoveryError::IdTaken { name: name.to_owned(), id: id.to_owned() };
                }
                Ok(PersistentNodeEvent::Failed { error }) => return error.into(),
                _ => {}
            }
        }
        DiscoveryError::Registration(PersistentNodeError::Stopped { path: node_path(name, id) })
    };
    futures::pin_mut!(created, refused);
    match futures::future::select(created, refused).await {
        futures::future::Either::Left((created, _)) => Ok(created?),
        futures::future::Either::Right((refused, _)) => Err(refused),
    }
}

fn node_path(name: &str, id: &str) -> String {
    format!("{name}/{id}")
}
