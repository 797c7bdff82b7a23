//! When to try a failed request again: one policy for every recipe.
//!
//! Owns: [`RetryPolicy`] (exponential backoff with jitter and a cap) and [`Backoff`], the
//! running state of one retried step, and [`Verdict`], the decision for one error: final errors
//! (`NoAuth`, a bad path, data over the limit, a closed session, ...) end the attempt with that
//! error; everything else is retried after the next delay. Does not own the retry loops: each
//! recipe keeps its own step and asks its `Backoff` how long to wait.
//!
//! Curator's `ExponentialBackoffRetry` and kazoo's `KazooRetry` are the models: a base delay that
//! doubles per attempt, randomised so that many clients that failed together do not come back
//! together, and capped so a long outage is polled at a bounded rate. Unlike theirs, the policy
//! here has no attempt limit by default: a recipe retries connection problems for as long as its
//! session may come back, because the session (not the retry) decides when it is gone.

use std::time::Duration;

use crate::error::Error;

/// Exponential backoff with jitter and a cap.
///
/// The `n`-th retry (counting from 0) waits `min(initial × 2ⁿ, max)`, scaled by a random factor
/// in `[1 − jitter, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use]
pub struct RetryPolicy {
    initial: Duration,
    max: Duration,
    jitter: f64,
}

impl Default for RetryPolicy {
    /// 50 ms, doubling up to 2 s, with up to half of each delay taken off at random.
    fn default() -> Self {
        RetryPolicy { initial: Duration::from_millis(50), max: Duration::from_secs(2), jitter: 0.5 }
    }
}

impl RetryPolicy {
    /// A policy starting at `initial` and doubling up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        RetryPolicy { initial, max: max.max(initial), jitter: 0.5 }
    }

    /// How much of each delay may be taken off at random (0: none, 1: all of it).
    pub fn with_jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter.clamp(0.0, 1.0);
        self
    }

    /// The longest delay.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The delay before retry number `retry` (0 for the first), before jitter.
    pub fn base_delay(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// The delay before retry number `retry`, with jitter drawn from `random` (in `[0, 1)`).
    pub fn delay_with(&self, retry: u32, random: f64) -> Duration {
        self.base_delay(retry).mul_f64(1.0 - self.jitter * random.clamp(0.0, 1.0))
    }

    /// The running state of one retried step under this policy.
    pub fn backoff(&self) -> Backoff {
        Backoff { policy: *self, retries: 0 }
    }

    /// What to do about `error`: give up on a final one, else wait.
    pub fn verdict(&self, error: &Error, backoff: &mut Backoff) -> Verdict {
        if error.is_final() { Verdict::GiveUp } else { Verdict::RetryAfter(backoff.next_delay()) }
    }
}

/// The decision about one failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Retrying cannot help: end the attempt with the error.
    GiveUp,
    /// Try again after this long.
    RetryAfter(Duration),
}

/// How often one step has been retried: the next delay grows until a success resets it.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: RetryPolicy,
    retries: u32,
}

impl Backoff {
    /// The delay before the next retry; each call counts one retry.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.policy.delay_with(self.retries, random_unit());
        self.retries = self.retries.saturating_add(1);
        delay
    }

    /// How many retries so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// After a success: the next failure starts from the initial delay again.
    pub fn reset(&mut self) {
        self.retries = 0;
    }
}

/// A number in `[0, 1)`, different on every call and in every process (jitter needs no more).
fn random_unit() -> f64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap() {
        let policy = RetryPolicy::new(Duration::from_millis(50), Duration::from_millis(300));
        let delays: Vec<_> = (0..6).map(|n| policy.base_delay(n).as_millis()).collect();
        assert_eq!(delays, [50, 100, 200, 300, 300, 300]);
        assert_eq!(policy.base_delay(u32::MAX), Duration::from_millis(300));
    }

    #[test]
    fn jitter_only_shortens_a_delay_and_by_at_most_its_share() {
        let policy = RetryPolicy::new(Duration::from_millis(100), Duration::from_secs(1)).with_jitter(0.5);
        assert_eq!(policy.delay_with(0, 0.0), Duration::from_millis(100));
        assert_eq!(policy.delay_with(0, 1.0), Duration::from_millis(50));
        let mut backoff = policy.backoff();
        for retry in 0..10 {
            let delay = backoff.next_delay();
            let base = policy.base_delay(retry);
            assert!(delay <= base && delay >= base / 2, "retry {retry}: {delay:?} outside [{:?}, {base:?}]", base / 2);
        }
    }

    #[test]
    fn a_success_starts_the_next_failure_from_the_first_delay() {
        let policy = RetryPolicy::new(Duration::from_millis(10), Duration::from_secs(1)).with_jitter(0.0);
        let mut backoff = policy.backoff();
        backoff.next_delay();
        backoff.next_delay();
        assert_eq!(backoff.next_delay(), Duration::from_millis(40));
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_millis(10));
    }

    #[test]
    fn final_errors_end_the_attempt_and_others_wait() {
        let policy = RetryPolicy::default();
        let mut backoff = policy.backoff();
        assert_eq!(policy.verdict(&Error::NoAuth { path: "/a".into() }, &mut backoff), Verdict::GiveUp);
        assert!(matches!(
            policy.verdict(&Error::ConnectionLoss { path: "/a".into() }, &mut backoff),
            Verdict::RetryAfter(_)
        ));
        assert_eq!(backoff.retries(), 1);
    }

    #[test]
    fn random_units_stay_in_range_and_vary() {
        let draws: Vec<f64> = (0..100).map(|_| random_unit()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        assert!(draws.windows(2).any(|w| w[0] != w[1]));
    }
}
