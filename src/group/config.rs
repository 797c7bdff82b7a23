//! How a group member joins: [`GroupConfig`].

use super::error::GroupError;
use crate::path;
use crate::retry::RetryPolicy;

/// How a [`GroupMember`](super::GroupMember) joins.
#[derive(Debug, Clone)]
#[must_use]
pub struct GroupConfig {
    pub(super) group: String,
    pub(super) id: String,
    pub(super) data: Vec<u8>,
    pub(super) retry: Option<RetryPolicy>,
}

impl GroupConfig {
    /// Join the group at `group` as `id` (a node name), with empty data.
    pub fn new(group: impl Into<String>, id: impl Into<String>) -> Self {
        GroupConfig { group: group.into(), id: id.into(), data: Vec::new(), retry: None }
    }

    crate::builder::setters! {
        /// Our member node's data (what the others see in `MemberJoined`).
        with_data(data: impl Into<Vec<u8>>) => into;

        /// How this member retries a failed request; default: its session's policy
        /// ([`SessionConfig::with_retry`](crate::session::SessionConfig::with_retry)).
        with_retry(retry: RetryPolicy) => some;
    }

    pub(super) fn validate(&self) -> Result<(), GroupError> {
        path::validate(&self.group, false)?;
        path::validate_name(&self.id).map_err(|reason| GroupError::InvalidId { id: self.id.clone(), reason })?;
        path::validate(&path::join(&self.group, &self.id), false).map_err(GroupError::from)
    }
}
