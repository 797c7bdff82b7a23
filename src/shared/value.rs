//! [`SharedValue`]: the shared-node core with bytes for values, and its messages' handlers.

use actix::prelude::*;

use super::config::SharedValueConfig;
use super::error::SharedValueError;
use super::messages::*;
use super::node::{Failure, NodeConfig, SharedFormat, SharedNode};
use crate::reply::Reply;
use crate::session::SessionHandle;

/// Bytes as they are: every node holds a value.
#[derive(Debug, Clone, Copy)]
pub struct BytesFormat;

impl SharedFormat for BytesFormat {
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

    fn versioned(value: Vec<u8>, version: i32, czxid: i64) -> VersionedValue {
        VersionedValue { value, version, czxid }
    }

    fn parts(versioned: &VersionedValue) -> (&Vec<u8>, i32, i64) {
        (&versioned.value, versioned.version, versioned.czxid)
    }

    fn changed(value: Vec<u8>, version: i32, czxid: i64) -> ValueChanged {
        ValueChanged { value, version, czxid }
    }

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

impl SharedNode<BytesFormat> {
    /// A shared value; start it with `.start()`.
    pub fn new(session: SessionHandle, config: SharedValueConfig) -> SharedValue {
        let SharedValueConfig { path, seed, retry } = config;
        SharedNode::with_config(session, NodeConfig { path, seed, retry }, "value")
    }
}

impl Handler<GetValue> for SharedValue {
    type Result = Reply<Result<VersionedValue, SharedValueError>>;

    fn handle(&mut self, _: GetValue, ctx: &mut Context<Self>) -> Self::Result {
        self.get(ctx)
    }
}

impl Handler<TrySetValue> for SharedValue {
    type Result = Reply<Result<bool, SharedValueError>>;

    fn handle(&mut self, msg: TrySetValue, ctx: &mut Context<Self>) -> Self::Result {
        self.try_set(msg.value, msg.expected, ctx)
    }
}

impl Handler<SetValue> for SharedValue {
    type Result = Reply<Result<VersionedValue, SharedValueError>>;

    fn handle(&mut self, msg: SetValue, ctx: &mut Context<Self>) -> Self::Result {
        self.set(msg.value, ctx)
    }
}

/// Starts with the current value if it is known.
impl Handler<Subscribe<ValueChanged>> for SharedValue {
    type Result = ();

    fn handle(&mut self, msg: Subscribe<ValueChanged>, _: &mut Context<Self>) {
        self.subscribe(msg.recipient);
    }
}

/// Stops the actor. The node stays.
impl Handler<Stop> for SharedValue {
    type Result = ();

    fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

crate::reply::handle_told!(SharedValue: SetValue, TrySetValue);
