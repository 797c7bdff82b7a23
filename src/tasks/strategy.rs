//! Which worker gets the next task: the pluggable choice a master makes.
//!
//! Owns: [`AssignStrategy`] and the three built in strategies. Does not own capacity: the
//! master only offers workers that have room (assigned < capacity), and a strategy picks one of
//! them.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// A live worker as the master sees it when it assigns a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerLoad {
    /// The worker's id.
    pub worker_id: String,
    /// Tasks assigned to it and not finished.
    pub assigned: usize,
    /// How many tasks it runs at once (from its registration).
    pub capacity: usize,
}

/// Chooses a worker for a task among workers with room. A new master builds a fresh strategy
/// for each term (see `TaskMasterConfig::with_strategy`), so a strategy keeps no state that
/// must survive a change of master.
pub trait AssignStrategy: 'static {
    /// Returns an index into `candidates` (never empty; every candidate has room).
    fn pick(&mut self, task_id: &str, candidates: &[WorkerLoad]) -> usize;
}

/// Each worker in turn, by worker id.
#[derive(Debug, Default, Clone)]
pub struct RoundRobin {
    last: Option<String>,
}

impl AssignStrategy for RoundRobin {
    fn pick(&mut self, _task_id: &str, candidates: &[WorkerLoad]) -> usize {
        // The next id after the last one chosen (candidates come sorted by id), wrapping round;
        // following ids rather than indexes keeps the turn fair while workers come and go.
        let next = match &self.last {
            Some(last) => candidates.iter().position(|w| w.worker_id > *last).unwrap_or(0),
            None => 0,
        };
        self.last = Some(candidates[next].worker_id.clone());
        next
    }
}

/// The worker with the fewest unfinished tasks relative to its capacity (the default).
#[derive(Debug, Default, Clone, Copy)]
pub struct LeastLoaded;

impl AssignStrategy for LeastLoaded {
    fn pick(&mut self, _task_id: &str, candidates: &[WorkerLoad]) -> usize {
        // Compare assigned/capacity as a cross-product, without floating point.
        let mut best = 0;
        for (i, w) in candidates.iter().enumerate().skip(1) {
            let b = &candidates[best];
            if (w.assigned as u128) * (b.capacity as u128) < (b.assigned as u128) * (w.capacity as u128) {
                best = i;
            }
        }
        best
    }
}

/// A worker chosen at random.
#[derive(Debug, Clone)]
pub struct Random {
    state: u64,
}

impl Default for Random {
    fn default() -> Self {
        Random { state: RandomState::new().build_hasher().finish() | 1 }
    }
}

impl AssignStrategy for Random {
    fn pick(&mut self, _task_id: &str, candidates: &[WorkerLoad]) -> usize {
        // xorshift64: good enough to spread tasks, no dependency.
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state % candidates.len() as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(id: &str, assigned: usize, capacity: usize) -> WorkerLoad {
        WorkerLoad { worker_id: id.into(), assigned, capacity }
    }

    #[test]
    fn round_robin_takes_turns_by_id() {
        let mut rr = RoundRobin::default();
        let all = [load("a", 0, 1), load("b", 0, 1), load("c", 0, 1)];
        let picks: Vec<_> = (0..4).map(|_| all[rr.pick("t", &all)].worker_id.clone()).collect();
        assert_eq!(picks, ["a", "b", "c", "a"]);
        // "b" is full: after "a" comes "c".
        let some = [load("a", 0, 1), load("c", 0, 1)];
        assert_eq!(some[rr.pick("t", &some)].worker_id, "c");
    }

    #[test]
    fn least_loaded_weighs_capacity() {
        let all = [load("a", 2, 4), load("b", 1, 1), load("c", 1, 4)];
        assert_eq!(LeastLoaded.pick("t", &all), 2);
    }

    #[test]
    fn random_stays_in_range() {
        let mut r = Random::default();
        let all = [load("a", 0, 1), load("b", 0, 1)];
        let mut seen = [0; 2];
        for _ in 0..200 {
            seen[r.pick("t", &all)] += 1;
        }
        assert!(seen[0] > 0 && seen[1] > 0, "both picked: {seen:?}");
    }
}
