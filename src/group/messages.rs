//! What a group member is asked, and what it tells its subscribers.

use std::collections::BTreeMap;

use actix::Message;

use super::error::GroupError;

/// What happened in the group, told in the past tense.
#[derive(Message, Debug, Clone, PartialEq, Eq)]
#[rtype(result = "()")]
#[non_exhaustive]
pub enum GroupEvent {
    /// We are in the group: our member node exists for session `generation`.
    Joined {
        /// The session generation we joined in.
        generation: u64,
    },
    /// We could not join (e.g. the id is taken by another live session); retried.
    JoinFailed {
        /// What went wrong.
        error: GroupError,
    },
    /// A member (perhaps us) is in the group: during the first load, or joined later.
    MemberJoined {
        /// Its id.
        id: String,
        /// Its data.
        data: Vec<u8>,
    },
    /// A member changed its data.
    MemberUpdated {
        /// Its id.
        id: String,
        /// Its new data.
        data: Vec<u8>,
    },
    /// A member left (it left, stopped, or its session ended).
    MemberLeft {
        /// Its id.
        id: String,
    },
    /// The first view of the group is complete (every member present then was reported).
    ViewReady,
    /// After a reconnect or a new session the view was re-read; what changed meanwhile was
    /// reported as joins and leaves.
    ViewResynced,
}

pub use crate::events::Subscribe;

/// The members in the view, by id, with their data (answered from memory).
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "BTreeMap<String, Vec<u8>>")]
pub struct Members;

/// Leave the group (our member node is deleted) and stop. Resolves when the node is gone.
#[derive(Message, Debug, Clone, Copy, Default)]
#[rtype(result = "Result<(), GroupError>")]
pub struct Leave;
