//! The `service` role: one registered service-discovery instance.

use super::*;

/// Registers instance `id` of service `name` at `127.0.0.1:<port>` and keeps it registered;
/// prints `registered path=<node>`, and `registration what=<event>` for every later event.
pub(crate) async fn service_role(
    session: &SessionHandle,
    id: &str,
    base: &str,
    name: &str,
    port: u16,
) -> Result<(), String> {
    let discovery = ServiceDiscovery::new(session.clone(), DiscoveryConfig::new(base)).map_err(|e| e.to_string())?;
    let instance = ServiceInstance::new(name, id).with_address("127.0.0.1").with_port(port);
    let registration = discovery.register(instance).await.map_err(|e| e.to_string())?;
    emit!("registered", path = registration.path());
    let mut events = registration.events();
    while let Some(event) = events.next().await {
        emit!("registration", what = compact(&event));
    }
    drop(registration);
    Ok(())
}
