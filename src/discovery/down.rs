//! Which instances a provider skips for a while: Curator's `DownInstancePolicy`.
//!
//! Owns: the policy and the errors noted per instance, as pure steps given the time. Does not
//! own picking (`strategy.rs`) or asking the cache (`provider.rs`).

use std::time::{Duration, Instant};

use super::instance::ServiceInstance;

/// After `error_threshold` errors noted within `timeout` of the first, an instance is skipped
/// until `timeout` after that first error (Curator's `DownInstancePolicy`; default 2 errors,
/// 30 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct DownInstancePolicy {
    timeout: Duration,
    error_threshold: u32,
}

impl Default for DownInstancePolicy {
    fn default() -> Self {
        DownInstancePolicy { timeout: Duration::from_secs(30), error_threshold: 2 }
    }
}

impl DownInstancePolicy {
    /// Skipped after `error_threshold` errors (at least 1) within `timeout`.
    pub fn new(timeout: Duration, error_threshold: u32) -> Self {
        DownInstancePolicy { timeout, error_threshold: error_threshold.max(1) }
    }

    /// The window of errors.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How many errors make an instance down.
    pub fn error_threshold(&self) -> u32 {
        self.error_threshold
    }
}

/// Errors noted per instance (the whole instance, as Curator keys them: instances of one id, as
/// `DynamicSequential` ones may be, are told apart, and an updated instance starts afresh), each
/// entry forgotten `timeout` after its first error.
#[derive(Debug)]
pub(crate) struct DownInstances {
    policy: DownInstancePolicy,
    noted: Vec<(ServiceInstance, Instant, u32)>,
}

impl DownInstances {
    pub(crate) fn new(policy: DownInstancePolicy) -> DownInstances {
        DownInstances { policy, noted: Vec::new() }
    }

    fn forget_old(&mut self, now: Instant) {
        let timeout = self.policy.timeout;
        self.noted.retain(|(_, first, _)| now.saturating_duration_since(*first) < timeout);
    }

    pub(crate) fn note_error(&mut self, instance: &ServiceInstance, now: Instant) {
        self.forget_old(now);
        match self.noted.iter_mut().find(|(noted, _, _)| noted == instance) {
            Some((_, _, errors)) => *errors += 1,
            None => self.noted.push((instance.clone(), now, 1)),
        }
    }

    pub(crate) fn is_down(&mut self, instance: &ServiceInstance, now: Instant) -> bool {
        self.forget_old(now);
        let threshold = self.policy.error_threshold;
        self.noted.iter().any(|(noted, _, errors)| noted == instance && *errors >= threshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_is_down_from_the_threshold_until_the_timeout_after_its_first_error() {
        let mut down = DownInstances::new(DownInstancePolicy::new(Duration::from_secs(10), 2));
        let (a, b) = (ServiceInstance::new("s", "a").with_port(1), ServiceInstance::new("s", "b"));
        let a_again = a.clone().with_port(2); // another instance of the same id
        let t0 = Instant::now();
        down.note_error(&a, t0);
        assert!(!down.is_down(&a, t0));
        down.note_error(&a, t0 + Duration::from_secs(4));
        assert!(down.is_down(&a, t0 + Duration::from_secs(4)));
        assert!(!down.is_down(&b, t0 + Duration::from_secs(4)));
        assert!(!down.is_down(&a_again, t0 + Duration::from_secs(4)), "told apart from its namesake");
        assert!(down.is_down(&a, t0 + Duration::from_millis(9_999)));
        assert!(!down.is_down(&a, t0 + Duration::from_secs(10)));
        // Forgotten: one new error is not enough again.
        down.note_error(&a, t0 + Duration::from_secs(11));
        assert!(!down.is_down(&a, t0 + Duration::from_secs(11)));
    }
}
