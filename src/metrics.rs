//! The numbers an operator puts on a dashboard (feature `metrics`), recorded through the
//! [`metrics`](https://docs.rs/metrics) facade: the application installs whatever recorder or
//! exporter it likes (Prometheus, StatsD, ...), and without one every call here costs nothing.
//!
//! Owns: every metric's name, kind and labels (listed with their meaning in `docs/metrics.md`),
//! each recorded by one function named for the event. Does not own an exporter, nor when an
//! event happens: the session and the recipes call these where it does. Without the feature
//! the functions are empty.
//!
//! Paths are labels: a lock, an election, a queue or a cache is one series each, as an operator
//! wants them; do not make a recipe per request.

use std::time::Duration;

/// Which holder recipe a grant belongs to (the `recipe` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GrantKind {
    /// A lock or a read/write lock.
    Lock,
    /// A semaphore lease.
    Semaphore,
    /// An election's leadership.
    Election,
}

impl GrantKind {
    /// Its name in metrics and health reports.
    pub(crate) fn label(self) -> &'static str {
        match self {
            GrantKind::Lock => "lock",
            GrantKind::Semaphore => "semaphore",
            GrantKind::Election => "election",
        }
    }
}

#[cfg(feature = "metrics")]
mod record {
    use super::*;
    use metrics::{counter, gauge, histogram};

    pub(crate) fn session_state(state: &'static str) {
        counter!("zk_session_state_changes_total", "state" => state).increment(1);
    }
    pub(crate) fn session_suspended(took: Duration) {
        histogram!("zk_session_suspended_seconds").record(took.as_secs_f64());
    }
    pub(crate) fn request(op: &'static str, ok: bool, took: Duration) {
        let outcome = if ok { "ok" } else { "error" };
        histogram!("zk_request_duration_seconds", "op" => op, "outcome" => outcome).record(took.as_secs_f64());
    }
    pub(crate) fn granted(kind: GrantKind, path: &str, waited: Duration) {
        counter!("zk_grants_total", "recipe" => kind.label(), "path" => path.to_owned()).increment(1);
        histogram!("zk_grant_wait_seconds", "recipe" => kind.label(), "path" => path.to_owned())
            .record(waited.as_secs_f64());
    }
    pub(crate) fn grant_ended(kind: GrantKind, path: &str, held: Duration, how: &'static str) {
        histogram!("zk_grant_hold_seconds", "recipe" => kind.label(), "path" => path.to_owned())
            .record(held.as_secs_f64());
        counter!("zk_grant_ends_total", "recipe" => kind.label(), "path" => path.to_owned(), "how" => how).increment(1);
    }
    pub(crate) fn hand_off(dir: &str, read: &'static str) {
        counter!("zk_handoffs_total", "path" => dir.to_owned(), "read" => read).increment(1);
    }
    pub(crate) fn queue(event: &'static str, path: &str, n: u64) {
        counter!("zk_queue_items_total", "path" => path.to_owned(), "event" => event).increment(n);
    }
    pub(crate) fn queue_in_flight(path: &str, n: usize) {
        gauge!("zk_queue_in_flight", "path" => path.to_owned()).set(n as f64);
    }
    pub(crate) fn task(event: &'static str, root: &str) {
        counter!("zk_tasks_total", "root" => root.to_owned(), "event" => event).increment(1);
    }
    pub(crate) fn cache(event: &'static str, path: &str) {
        counter!("zk_cache_events_total", "path" => path.to_owned(), "event" => event).increment(1);
    }
    pub(crate) fn discovery(event: &'static str, service: &str) {
        counter!("zk_discovery_registrations_total", "service" => service.to_owned(), "event" => event).increment(1);
    }
}

#[cfg(not(feature = "metrics"))]
#[allow(unused_variables)]
mod record {
    use super::*;

    pub(crate) fn session_state(state: &'static str) {}
    pub(crate) fn session_suspended(took: Duration) {}
    pub(crate) fn request(op: &'static str, ok: bool, took: Duration) {}
    pub(crate) fn granted(kind: GrantKind, path: &str, waited: Duration) {}
    pub(crate) fn grant_ended(kind: GrantKind, path: &str, held: Duration, how: &'static str) {}
    pub(crate) fn hand_off(dir: &str, read: &'static str) {}
    pub(crate) fn queue(event: &'static str, path: &str, n: u64) {}
    pub(crate) fn queue_in_flight(path: &str, n: usize) {}
    pub(crate) fn task(event: &'static str, root: &str) {}
    pub(crate) fn cache(event: &'static str, path: &str) {}
    pub(crate) fn discovery(event: &'static str, service: &str) {}
}

pub(crate) use record::*;
