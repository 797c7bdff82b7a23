//! Where the master–worker recipe keeps things in ZooKeeper, and what a task id is.
//!
//! Owns: the paths under a root (`master/`, `workers/`, `tasks/`, `assign/`, `status/`) and the
//! rules for task and worker ids. Does not own any I/O beyond creating the directories.
//!
//! ```text
//! <root>/master/_c_<uuid>-latch-<seq>   election (Curator LeaderLatch layout), data = master id
//! <root>/workers/<worker>               ephemeral registration, data = capacity (decimal)
//! <root>/tasks/<task>                   a task waiting for a worker, data = payload
//! <root>/assign/<worker>/<task>         a task assigned to a worker, data = payload
//! <root>/status/<task>                  created empty (version 0) with the task; the result
//!                                       is written into it once (version 1), or the reason
//!                                       a runner gave up, twice (version 2)
//! ```

use std::fmt;
use std::future::Future;

use super::error::TaskError;
use crate::path;
use crate::session::SessionHandle;

/// The id of a submitted task: `task-<uuid>`, chosen by the client before the submission so
/// that a submission retried after a lost reply finds its own first attempt.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(String);

impl TaskId {
    /// A new id, unique to this call: choose a task's id before submitting it (with
    /// [`TaskClient::submit_as`](super::TaskClient::submit_as)), so that a submission whose
    /// outcome is unknown can still be looked up.
    pub fn random() -> TaskId {
        TaskId(format!("task-{}", crate::recipe::naming::new_guid()))
    }

    /// Checks an id received from elsewhere (a message, a log): `task-` followed by a valid node
    /// name.
    pub fn parse(id: impl Into<String>) -> Result<TaskId, TaskError> {
        let id = id.into();
        if !id.starts_with("task-") || id.len() == "task-".len() {
            return Err(TaskError::InvalidTaskId { id, reason: "a task id is \"task-\" followed by a name" });
        }
        path::validate_name(&id).map_err(|reason| TaskError::InvalidTaskId { id: id.clone(), reason })?;
        Ok(TaskId(id))
    }

    /// The id as text (also the node name under `tasks/`, `assign/<worker>/` and `status/`).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks a worker id (it becomes a node name under `workers/` and `assign/`).
pub(crate) fn check_worker_id(id: &str) -> Result<(), TaskError> {
    path::validate_name(id).map_err(|reason| TaskError::InvalidWorkerId { id: id.to_owned(), reason })
}

/// The paths of one master–worker installation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    root: String,
}

impl Layout {
    pub(crate) fn new(root: &str) -> Result<Layout, TaskError> {
        path::validate(root, false)?;
        Ok(Layout { root: root.trim_end_matches('/').to_owned() })
    }

    fn under(&self, name: &str) -> String {
        if self.root.is_empty() { format!("/{name}") } else { path::join(&self.root, name) }
    }

    /// The installation's root (the `root` label of its metrics).
    pub(crate) fn root(&self) -> &str {
        &self.root
    }

    pub(crate) fn master(&self) -> String {
        self.under("master")
    }

    pub(crate) fn workers(&self) -> String {
        self.under("workers")
    }

    pub(crate) fn worker(&self, worker: &str) -> String {
        path::join(&self.workers(), worker)
    }

    pub(crate) fn tasks(&self) -> String {
        self.under("tasks")
    }

    pub(crate) fn task(&self, task: &str) -> String {
        path::join(&self.tasks(), task)
    }

    pub(crate) fn assign(&self) -> String {
        self.under("assign")
    }

    pub(crate) fn assign_dir(&self, worker: &str) -> String {
        path::join(&self.assign(), worker)
    }

    pub(crate) fn assignment(&self, worker: &str, task: &str) -> String {
        path::join(&self.assign_dir(worker), task)
    }

    pub(crate) fn status(&self) -> String {
        self.under("status")
    }

    pub(crate) fn status_of(&self, task: &str) -> String {
        path::join(&self.status(), task)
    }

    /// Creates the directories that are missing (all requests sent at once).
    pub(crate) fn ensure(
        &self,
        session: &SessionHandle,
    ) -> impl Future<Output = Result<(), crate::error::Error>> + 'static {
        let created: Vec<_> = [self.master(), self.workers(), self.tasks(), self.assign(), self.status()]
            .iter()
            .map(|dir| session.ensure_path(dir))
            .collect();
        async move {
            for done in created {
                done.await?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_checked() {
        assert!(TaskId::parse("task-1").is_ok());
        assert!(matches!(TaskId::parse("job-1"), Err(TaskError::InvalidTaskId { .. })));
        assert!(matches!(TaskId::parse("task-"), Err(TaskError::InvalidTaskId { .. })));
        assert!(matches!(TaskId::parse("task-a/b"), Err(TaskError::InvalidTaskId { .. })));
        assert!(TaskId::random().as_str().starts_with("task-"));
        assert_ne!(TaskId::random(), TaskId::random());
    }

    #[test]
    fn layout_paths() {
        let layout = Layout::new("/jobs").expect("valid root");
        assert_eq!(layout.assignment("w1", "task-1"), "/jobs/assign/w1/task-1");
        assert_eq!(layout.status_of("task-1"), "/jobs/status/task-1");
        let at_root = Layout::new("/").expect("valid root");
        assert_eq!(at_root.worker("w1"), "/workers/w1");
        assert!(Layout::new("jobs").is_err());
        assert!(check_worker_id("w/1").is_err());
        assert!(check_worker_id("").is_err());
    }
}

/// Task names another process wrote, read without a panic (issue 39, item 12).
#[cfg(test)]
mod bad_input {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_name_is_a_task_id_or_a_typed_error(name in prop_oneof![".{0,20}", ".{0,20}".prop_map(|n| format!("task-{n}"))]) {
            match TaskId::parse(name.clone()) {
                Ok(id) => {
                    prop_assert_eq!(id.as_str(), name.as_str());
                    prop_assert!(path::validate(&Layout::new("/t").expect("root").task(id.as_str()), false).is_ok());
                }
                Err(e) => {
                    let named = matches!(e, TaskError::InvalidTaskId { ref id, .. } if *id == name);
                    prop_assert!(named);
                }
            }
        }

        #[test]
        fn any_capacity_node_is_a_capacity_of_at_least_one(data in prop::collection::vec(any::<u8>(), 0..12)) {
            prop_assert!(crate::tasks::term::parse_capacity(&data) >= 1);
        }
    }
}
