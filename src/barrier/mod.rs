//! Barriers: Curator's `DistributedBarrier` and `DistributedDoubleBarrier`.
//!
//! Owns: [`DistributedBarrier`] (one node; while it exists, waiters wait), the
//! [`DistributedDoubleBarrier`] (members enter together and leave together) and
//! [`BarrierError`]. Both are cheap handles, not actors: their methods return futures that must
//! run inside an actix `System` (waiting uses one-shot watches delivered to a small actor).
//! Does not own the session, its recovery, or any retry policy beyond "a request whose outcome
//! is unknown is sent again".
//!
//! Layout = Curator's, so Java services using Curator's barriers and Rust services using this
//! crate can share one barrier:
//!
//! ```text
//! <path>                 DistributedBarrier: exists = set, missing = open
//! <path>/<uuid>          DistributedDoubleBarrier: one ephemeral node per member
//! <path>/ready           DistributedDoubleBarrier: created by the member that completes the count
//! ```
//!
//! `docs/recipes/barrier.md`, in the repository and the published package and reproduced below,
//! gives the algorithms (the ZooKeeper operations step by step, and the races they guard against),
//! the failure table (what each fault does to a waiter or member, row by row, each row naming the
//! test that proves it) and the decisions taken where Curator is silent.
//!
//! Files: `single.rs` ([`DistributedBarrier`]), `double.rs` ([`DistributedDoubleBarrier`]),
//! `error.rs`; handles, not actors: a barrier holds no state between calls.
//!
#![doc = include_str!("../../docs/recipes/barrier.md")]

mod double;
mod error;
mod single;

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

pub use double::DistributedDoubleBarrier;
pub use error::BarrierError;
pub use single::DistributedBarrier;

use crate::path;

/// Name of the double barrier's "everybody is here" node (Curator's `READY_NODE`).
pub const READY_NODE: &str = "ready";

/// After a timeout (or an error), how long an operation waits for the removal of its member node
/// before returning; the removal goes on in the background if it takes longer.
const CLEANUP_GRACE: Duration = Duration::from_secs(1);

/// How long `set` and `remove` (which take no timeout) keep retrying through a connection
/// problem before they report it.
const OUTAGE_BUDGET: Duration = Duration::from_secs(30);

/// Checks a barrier path: ZooKeeper's rules, and not the root.
fn validate(barrier: &str) -> Result<(), BarrierError> {
    path::validate(barrier, false).map_err(|error| match error {
        crate::error::Error::InvalidPath { path, reason } => BarrierError::InvalidPath { path, reason },
        other => BarrierError::ZooKeeper(other),
    })?;
    if barrier == "/" {
        return Err(BarrierError::InvalidPath {
            path: barrier.to_owned(),
            reason: "the root node cannot be a barrier".to_owned(),
        });
    }
    Ok(())
}

/// Runs `fut` until `deadline` (forever without one); `None` when the deadline came first.
async fn within<F: Future>(deadline: Option<Instant>, fut: F) -> Option<F::Output> {
    match deadline {
        None => Some(fut.await),
        Some(at) => tokio::time::timeout_at(at, fut).await.ok(),
    }
}

/// What a failed step of `set` or `remove` comes to: passing trouble (an outcome unknown, a
/// connection down) is worth another attempt until `budget`; anything else, or later, ends it.
fn within_budget<T>(error: crate::error::Error, budget: Instant) -> crate::retry::Attempted<T> {
    if error.is_transient() && Instant::now() < budget {
        crate::retry::Attempted::Again(error)
    } else {
        crate::retry::Attempted::Failed(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn barrier_paths_are_validated() {
        assert!(validate("/a/b").is_ok());
        for bad in ["", "a", "/a/", "/a//b", "/"] {
            match validate(bad) {
                Err(BarrierError::InvalidPath { path, .. }) => assert_eq!(path, bad),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }
}
