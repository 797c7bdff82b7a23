//! The master's backlog: which tasks wait in `tasks/`, oldest first, without their payloads.
//!
//! Owns: the set of waiting tasks with the `czxid` that orders them, kept in order as tasks
//! come and go, so that a pass takes the oldest few without sorting the whole backlog. Does not
//! own payloads: a payload is read when its task is assigned, so the master's memory grows with
//! the number of waiting tasks (a name and a number each), never with their size (1M tasks
//! of 10 KB used to cost 10 GB).

use std::collections::{BTreeSet, HashMap};

/// Waiting tasks, by name and in submission order.
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    by_name: HashMap<String, i64>,
    order: BTreeSet<(i64, String)>,
}

impl Backlog {
    /// A waiting task, created at `czxid`.
    pub(crate) fn insert(&mut self, task: String, czxid: i64) {
        if let Some(before) = self.by_name.insert(task.clone(), czxid) {
            self.order.remove(&(before, task.clone()));
        }
        self.order.insert((czxid, task));
    }

    /// The task no longer waits; true if it did.
    pub(crate) fn remove(&mut self, task: &str) -> bool {
        match self.by_name.remove(task) {
            Some(czxid) => self.order.remove(&(czxid, task.to_owned())),
            None => false,
        }
    }

    /// Keeps only the tasks for which `keep` says so.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        let gone: Vec<String> = self.by_name.keys().filter(|t| !keep(t)).cloned().collect();
        for task in gone {
            self.remove(&task);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.by_name.len()
    }

    /// The `n` oldest waiting tasks.
    pub(crate) fn oldest(&self, n: usize) -> Vec<String> {
        self.order.iter().take(n).map(|(_, task)| task.clone()).collect()
    }

    /// Every waiting task's name.
    pub(crate) fn names(&self) -> impl Iterator<Item = &String> {
        self.by_name.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::Backlog;

    #[test]
    fn the_oldest_come_first_whatever_the_names() {
        let mut backlog = Backlog::default();
        backlog.insert("task-c".into(), 30);
        backlog.insert("task-a".into(), 20);
        backlog.insert("task-b".into(), 10);
        assert_eq!(backlog.oldest(2), ["task-b", "task-a"]);
        assert!(backlog.remove("task-b"));
        assert!(!backlog.remove("task-b"));
        assert_eq!(backlog.oldest(5), ["task-a", "task-c"]);
    }

    #[test]
    fn retain_and_reinsert_keep_the_order_consistent() {
        let mut backlog = Backlog::default();
        for (i, name) in ["x", "y", "z"].into_iter().enumerate() {
            backlog.insert(name.into(), i as i64);
        }
        backlog.retain(|t| t != "y");
        backlog.insert("x".into(), 9);
        assert_eq!(backlog.oldest(5), ["z", "x"]);
        assert_eq!(backlog.len(), 2);
        assert!(!backlog.remove("y"), "y was dropped by retain");
    }
}
