//! [`GroupMemberHandle`]: async methods over a [`GroupMember`], for programs that want answers
//! rather than messages.
//!
//! Owns: turning each request into one message and its reply into a `Result` (a stopped actor
//! is [`GroupError::Stopped`]). Does not own any state: the actor does. A handle holds a strong
//! address: the member lives while a handle (or another address) does, and dropping the last
//! one stops it, which leaves the group.

use std::collections::BTreeMap;
use std::future::Future;

use actix::prelude::*;

use super::config::GroupConfig;
use super::error::GroupError;
use super::member::GroupMember;
use super::messages::{GroupEvent, Leave, Members};
use crate::recipe::shell::start_tagged;
use crate::reply::{ask, tell};
use crate::session::SessionHandle;
use crate::session::health::HealthTag;

/// A cloneable handle to our membership in one group (a [`GroupMember`] actor).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::group::GroupError> {
/// use actix_zookeeper::group::{GroupConfig, GroupMemberHandle};
///
/// let config = GroupConfig::new("/services/billing/members", "host-a:8080").with_data("v1.4");
/// let member = GroupMemberHandle::start(session, config)?;
/// for (id, data) in member.members().await? {
///     println!("{id}: {}", String::from_utf8_lossy(&data));
/// }
/// member.leave().await?; // our node is gone, and the member has stopped
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct GroupMemberHandle {
    addr: Addr<GroupMember>,
    group: String,
    health: HealthTag,
}

impl GroupMemberHandle {
    /// Starts a [`GroupMember`] for `config` on the current Arbiter; it joins at once and
    /// watches the group. [`GroupError::InvalidId`] (or an invalid path) before anything starts.
    pub fn start(session: SessionHandle, config: GroupConfig) -> Result<GroupMemberHandle, GroupError> {
        let group = config.group.clone();
        let (addr, health) = start_tagged(GroupMember::new(session, config)?);
        Ok(GroupMemberHandle { addr, group, health })
    }

    /// A handle to a running member of the group at `group`.
    pub fn new(addr: Addr<GroupMember>, group: impl Into<String>) -> GroupMemberHandle {
        GroupMemberHandle { addr, group: group.into(), health: HealthTag::default() }
    }

    fn stopped(&self) -> GroupError {
        GroupError::Stopped { group: self.group.clone() }
    }

    /// The members in the view, by id, with their data, answered from memory ([`Members`]).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read of memory.
    pub fn members(&self) -> impl Future<Output = Result<BTreeMap<String, Vec<u8>>, GroupError>> + 'static {
        ask(&self.addr, Members, self.stopped())
    }

    /// Leaves the group and stops the member ([`Leave`]): resolves once our member node is
    /// deleted (after a join in flight has landed).
    ///
    /// # Cancel safety
    /// Sent when this is called: dropping the future does not stop the leave.
    pub fn leave(&self) -> impl Future<Output = Result<(), GroupError>> + 'static {
        let told = tell(&self.addr, Leave, self.stopped());
        async move { told.await? }
    }

    crate::recipe::handle::handle_basics!(GroupMember => GroupEvent, subscribed: ", the view as it is first", health: "A member's entry is its view's (kind `cache`, at the group's path): whether it follows the group; whether it has joined, its events say.");

    /// Leaves the group and stops the member, as [`leave`](Self::leave) does, without an answer
    /// to read: resolves once the actor has stopped, which is after its node was deleted (or
    /// its delete failed for good).
    ///
    /// # Cancel safety
    /// The leave is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        let _left = tell(&self.addr, Leave, self.stopped());
        crate::stop::stopped(&self.addr)
    }
}
