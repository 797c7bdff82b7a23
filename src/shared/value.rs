//! [`SharedValue`]: the shared-node core with bytes for values, and its messages' handlers.

use super::error::SharedValueError;
use super::messages::*;
use super::node::{Failure, SharedFormat, SharedNode};

/// Bytes as they are: every node holds a value.
#[derive(Debug, Clone, Copy)]
pub struct BytesFormat;

impl SharedFormat for BytesFormat {
    const KIND: &'static str = "value";

    type Value = Vec<u8>;
    type Versioned = VersionedValue;
    type Error = SharedValueError;
    type Event = ValueChanged;

    fn encode(value: &Vec<u8>) -> Vec<u8> {
        value.clone()
    }

    fn decode(data: &[u8]) -> Option<Vec<u8>> {
        Some(data.to_vec())
    }

    crate::shared::versioned_fields!(Vec<u8>, VersionedValue, ValueChanged);

    fn failure(path: &str, failure: Failure) -> SharedValueError {
        let path = path.to_owned();
        match failure {
            Failure::OutcomeUnknown(source) => SharedValueError::OutcomeUnknown { path, source },
            Failure::Recreated => SharedValueError::Recreated { path },
            // Every node's data is a value of this format.
            Failure::Stopped | Failure::NotOfFormat { .. } => SharedValueError::Stopped,
            Failure::ZooKeeper(error) => SharedValueError::ZooKeeper(error),
        }
    }
}

/// One shared value (Curator's `SharedValue`); see `docs/recipes/shared-value.md`.
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), Box<dyn std::error::Error>> {
/// use actix::Actor;
/// use actix_zookeeper::shared::{GetValue, SharedValue, SharedValueConfig, TrySetValue};
///
/// let config = SharedValue::new(session, SharedValueConfig::new("/config/mode").with_seed("normal")).start();
/// let now = config.send(GetValue).await??;
/// if !config.send(TrySetValue { value: b"maintenance".to_vec(), expected: now }).await?? {
///     // somebody else wrote first: read again and decide again
/// }
/// # Ok(()) }
/// ```
pub type SharedValue = SharedNode<BytesFormat>;

crate::shared::answers_node_requests!(SharedValue: GetValue, TrySetValue, SetValue => VersionedValue, SharedValueError);
