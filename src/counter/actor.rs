//! [`SharedCount`]: one shared counter node, as an actor — the shared-node core
//! ([`SharedNode`](crate::shared::SharedNode), also under [`SharedValue`](crate::shared::SharedValue))
//! in Curator's 4-byte count format, with the count's messages.
//!
//! Owns: the count's format as a [`SharedFormat`] ([`CountFormat`]), its requests' handlers, and
//! `AddCount` (read, then compare-and-set, until one applies). Does not own watching, reading,
//! writing or telling subscribers: the core does, once for both kinds of shared node.

use std::future::Future;

use actix::prelude::*;

use super::error::CounterError;
use super::format::{COUNT_LEN, encode_count};
use super::messages::*;
use crate::shared::{Failure, SharedFormat, SharedNode};

/// Curator's `SharedCount` format: a 4-byte big-endian count (see [`encode_count`]).
#[derive(Debug, Clone, Copy)]
pub struct CountFormat;

impl SharedFormat for CountFormat {
    const KIND: &'static str = "count";

    type Value = i32;
    type Versioned = VersionedCount;
    type Error = CounterError;
    type Event = CountChanged;

    fn encode(value: &i32) -> Vec<u8> {
        encode_count(*value).to_vec()
    }

    fn decode(data: &[u8]) -> Option<i32> {
        <[u8; COUNT_LEN]>::try_from(data).ok().map(i32::from_be_bytes)
    }

    crate::shared::versioned_fields!(i32, VersionedCount, CountChanged);

    fn failure(path: &str, failure: Failure) -> CounterError {
        let path = path.to_owned();
        match failure {
            Failure::NotOfFormat { len } => CounterError::NotACount { path, len },
            Failure::OutcomeUnknown(source) => CounterError::OutcomeUnknown { path, source },
            Failure::Recreated => CounterError::Recreated { path },
            Failure::Stopped => CounterError::Stopped,
            Failure::ZooKeeper(error) => CounterError::ZooKeeper(error),
        }
    }
}

/// One shared counter (Curator's `SharedCount`); see `docs/recipes/counter.md`.
///
/// On start it creates the node with the seed if it is missing, reads it and watches it. It
/// answers [`GetCount`] from that watched copy while the copy is current, and writes with
/// [`TrySetCount`] (compare-and-set on the node's version), [`SetCount`] and [`AddCount`].
/// Subscribers ([`Subscribe`]) get [`CountChanged`] for every change it learns of, in
/// version order, including changes made while it was disconnected or between two sessions.
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), Box<dyn std::error::Error>> {
/// use actix::Actor;
/// use actix_zookeeper::counter::{GetCount, SharedCount, SharedCountConfig, TrySetCount, add};
///
/// let count = SharedCount::new(session, SharedCountConfig::new("/stats/visits").with_seed(0)).start();
/// let now = count.send(GetCount).await??;
/// if !count.send(TrySetCount { value: now.value + 1, expected: now }).await?? {
///     // somebody else wrote first: read again and retry, or let `add` do that
/// }
/// let after = add(&count, 10).await?;
/// # Ok(()) }
/// ```
///
/// Stop it with [`Stop`] or by dropping every address of it.
pub type SharedCount = SharedNode<CountFormat>;

crate::shared::answers_node_requests!(SharedCount: GetCount, TrySetCount, SetCount => VersionedCount, CounterError);

impl Handler<AddCount> for SharedCount {
    type Result = ResponseFuture<Result<VersionedCount, CounterError>>;

    fn handle(&mut self, msg: AddCount, ctx: &mut Context<Self>) -> Self::Result {
        let me = ctx.address();
        let path = self.path().to_owned();
        Box::pin(async move {
            loop {
                let current = me.send(GetCount).await.map_err(|_| CounterError::Stopped)??;
                let value = current.value.checked_add(msg.by).ok_or_else(|| CounterError::Overflow {
                    path: path.clone(),
                    value: current.value,
                    by: msg.by,
                })?;
                let set = TrySetCount { value, expected: current };
                if me.send(set).await.map_err(|_| CounterError::Stopped)?? {
                    // A versioned write that applies moves the version by exactly one.
                    return Ok(VersionedCount {
                        value,
                        version: current.version.wrapping_add(1),
                        czxid: current.czxid,
                    });
                }
            }
        })
    }
}

/// Adds `by` to the count of `counter` ([`AddCount`]); a stopped actor is
/// [`CounterError::Stopped`].
///
/// # Cancel safety
/// The add is sent when this is called: dropping the future does not withdraw it, and it applies
/// once. (A raw `counter.send(AddCount { .. })` dropped before the actor took it is skipped by
/// actix.)
pub fn add(
    counter: &Addr<SharedCount>,
    by: i32,
) -> impl Future<Output = Result<VersionedCount, CounterError>> + 'static + use<> {
    let told = crate::reply::tell(counter, AddCount { by }, CounterError::Stopped);
    async move { told.await? }
}

crate::reply::handle_told!(SharedCount: AddCount);
