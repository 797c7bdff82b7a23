//! [`ChildrenView`]: the cache of a directory's children that another recipe keeps (a group
//! member's view of the members, a service cache's of the instances).
//!
//! Owns: starting that cache beside its recipe (its health entry shown to the recipe's handles,
//! its events sent to the recipe) and stopping it with the recipe. Does not own what the recipe
//! makes of the events.

use actix::prelude::*;

use super::actor::CacheActor;
use super::config::{CacheConfig, CacheScope};
use super::error::CacheError;
use super::messages::{CacheEvent, Stop};
use crate::recipe::shell::{Shell, start_inner};

/// A cache of one directory's children, kept by another recipe; stopped when dropped (with the
/// recipe that keeps it).
#[derive(Debug)]
pub(crate) struct ChildrenView(Addr<CacheActor>);

impl ChildrenView {
    /// Starts the cache of `dir`'s children on the current Arbiter, beside the recipe of
    /// `outer`, its events going to `to`. Fails only for an invalid path.
    pub(crate) fn start<E>(outer: &Shell<E>, dir: String, to: Recipient<CacheEvent>) -> Result<ChildrenView, CacheError>
    where
        E: Message<Result = ()> + Clone + Send + 'static,
    {
        let config = CacheConfig::new(dir).with_scope(CacheScope::Children);
        let cache = CacheActor::new(outer.session().clone(), config)?;
        Ok(ChildrenView(start_inner(outer, cache, to)))
    }

    /// The cache's address, for its requests.
    pub(crate) fn addr(&self) -> &Addr<CacheActor> {
        &self.0
    }
}

impl Drop for ChildrenView {
    fn drop(&mut self) {
        self.0.do_send(Stop);
    }
}
