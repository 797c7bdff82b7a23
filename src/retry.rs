//! When to try a failed request again: one policy, one decision, for every recipe.
//!
//! Owns: [`RetryPolicy`] (exponential backoff with jitter, a cap and an optional attempt limit),
//! [`Backoff`] (the running state of one retried step) and its [`Backoff::verdict`], the one
//! place that decides about a failed attempt: a final error (`NoAuth`, a bad path, data over the
//! limit, a closed session, ...) or the last attempt the policy allows ends the step with that
//! error; anything else is tried again after the next delay. And the one retry loop for steps
//! written as futures, `retried`: a step says what each attempt came to (`Attempted`), the
//! loop asks the `Backoff`. Does not own which errors a step expects (a `NoNode` that means
//! "already gone" is an answer, not a failure): the step's own judgement says so.
//!
//! The policy is the user's: [`SessionConfig::with_retry`](crate::session::SessionConfig::with_retry)
//! sets it for every recipe on a session, and each recipe config's `with_retry` for that recipe
//! alone, as Curator's client-wide `RetryPolicy` and kazoo's `command_retry` do. Curator's
//! `ExponentialBackoffRetry` and kazoo's `KazooRetry` are the models: a base delay that doubles
//! per attempt, randomised so that many clients that failed together do not come back together,
//! and capped so a long outage is polled at a bounded rate. Unlike theirs, the default has no
//! attempt limit: a recipe retries connection problems for as long as its session may come back,
//! because the session (not the retry) decides when it is gone.

use std::time::Duration;

use crate::error::Error;

/// Exponential backoff with jitter, a cap and an optional attempt limit.
///
/// The `n`-th retry (counting from 0) waits `min(initial × 2ⁿ, max)`, scaled by a random factor
/// in `[1 − jitter, 1]`. With an attempt limit of `n`, a step that failed `n` times in a row
/// gives up with its last error (each recipe says in its docs how it reports that); a success
/// starts the count again.
///
/// ```
/// use std::time::Duration;
/// use actix_zookeeper::retry::RetryPolicy;
/// // Twice at most, 100 ms apart at first, never more than 1 s apart.
/// let policy = RetryPolicy::new(Duration::from_millis(100), Duration::from_secs(1)).with_max_attempts(2);
/// assert_eq!(policy.max_attempts(), Some(2));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use]
pub struct RetryPolicy {
    initial: Duration,
    max: Duration,
    jitter: f64,
    max_attempts: Option<u32>,
}

impl Default for RetryPolicy {
    /// 50 ms, doubling up to 2 s, with up to half of each delay taken off at random; no attempt
    /// limit.
    fn default() -> Self {
        RetryPolicy::new(Duration::from_millis(50), Duration::from_secs(2))
    }
}

impl RetryPolicy {
    /// A policy starting at `initial` and doubling up to `max`, without an attempt limit.
    pub fn new(initial: Duration, max: Duration) -> Self {
        RetryPolicy { initial, max: max.max(initial), jitter: 0.5, max_attempts: None }
    }

    /// Gives up after `attempts` failed attempts in a row (the first try counts; 0 is taken as 1,
    /// no retry at all).
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = Some(attempts.max(1));
        self
    }

    /// The same delays without the attempt limit: for the steps that must not give up while
    /// their session lives (deleting our own nodes, recording a task's result), since giving
    /// up would leave something in the others' way until the session ends.
    pub(crate) fn without_attempt_limit(mut self) -> Self {
        self.max_attempts = None;
        self
    }

    /// The attempt limit, `None` for none.
    pub fn max_attempts(&self) -> Option<u32> {
        self.max_attempts
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
    /// What to do after an attempt failed with `error`: give up on a final error or when the
    /// policy allows no further attempt, else wait the next delay (counted as one retry).
    pub fn verdict(&mut self, error: &Error) -> Verdict {
        let attempts_made = self.retries.saturating_add(1);
        if error.is_final() || self.policy.max_attempts.is_some_and(|max| attempts_made >= max) {
            return Verdict::GiveUp;
        }
        Verdict::RetryAfter(self.next_delay())
    }

    /// Sleeps before the next attempt and returns `Ok`, or returns `error` when the
    /// [verdict](Self::verdict) is to give up: the wait of [`retried`], the one loop.
    async fn retry_after(&mut self, error: Error) -> Result<(), Error> {
        match self.verdict(&error) {
            Verdict::RetryAfter(delay) => {
                tokio::time::sleep(delay).await;
                Ok(())
            }
            Verdict::GiveUp => Err(error),
        }
    }

    /// The next delay, without a verdict: only for a loop that must never give up and has no
    /// error to judge (a master's term, which holds its office until it ends).
    pub(crate) fn next_delay(&mut self) -> Duration {
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

/// What one attempt of a retried step came to, as the step judges it.
#[derive(Debug)]
pub(crate) enum Attempted<T> {
    /// The step is done, with this outcome.
    Done(T),
    /// The step failed for good with this error (retrying cannot help, as the step knows).
    Failed(Error),
    /// The attempt failed in a way another attempt may mend: the backoff decides.
    Again(Error),
}

impl<T> Attempted<T> {
    /// The usual judgement of a request's answer: done with its value; a transient error (see
    /// [`Error::is_transient`]) is worth another attempt; any other ends the step.
    pub(crate) fn judged(answer: Result<T, Error>) -> Attempted<T> {
        match answer {
            Ok(value) => Attempted::Done(value),
            Err(error) if error.is_transient() => Attempted::Again(error),
            Err(error) => Attempted::Failed(error),
        }
    }
}

/// The one retry loop for a step written as futures: makes the first attempt *now* (a request
/// is sent when it is made, so whatever the caller sends next reaches the server after it), then
/// after each [`Attempted::Again`] waits as `backoff` says and makes the next, until an attempt
/// is done or failed, or the backoff gives up (with the last attempt's error).
pub(crate) fn retried<T, F, Fut>(
    mut backoff: Backoff,
    mut attempt: F,
) -> impl std::future::Future<Output = Result<T, Error>> + use<T, F, Fut>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Attempted<T>>,
{
    let first = attempt();
    async move {
        let mut current = first;
        loop {
            match current.await {
                Attempted::Done(outcome) => return Ok(outcome),
                Attempted::Failed(error) => return Err(error),
                Attempted::Again(error) => {
                    backoff.retry_after(error).await?;
                    current = attempt();
                }
            }
        }
    }
}

/// The one loop for an optimistic step (read, then a write at the version read): after a try
/// that lost the race to another writer (`won` says which did not), waits as `policy` paces
/// and tries again, at most `limit` tries in all (counted in `tries`, which outlives the call:
/// an atomic reports them). The last try's outcome stands, won or lost; an error ends the loop at
/// once (each try rides out connection loss through [`retried`] on its own).
pub(crate) async fn optimistic<T, E, F, Fut>(
    policy: &RetryPolicy,
    limit: u32,
    tries: &mut u32,
    won: impl Fn(&T) -> bool,
    mut attempt: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut backoff = policy.backoff();
    loop {
        *tries += 1;
        let outcome = attempt().await?;
        if won(&outcome) || *tries >= limit.max(1) {
            return Ok(outcome);
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// The one retry machinery, on an actor's side: a step that failed with `error` is made again
/// by `again` after the backoff's delay (on the actor's context, so only while the actor lives),
/// or the backoff gives up and `error` comes back for the actor to report.
pub(crate) fn again_later<A>(
    backoff: &mut Backoff,
    error: Error,
    ctx: &mut A::Context,
    again: impl FnOnce(&mut A, &mut A::Context) + 'static,
) -> Result<(), Error>
where
    A: actix::Actor,
    A::Context: actix::AsyncContext<A>,
{
    match backoff.verdict(&error) {
        Verdict::RetryAfter(delay) => {
            actix::AsyncContext::run_later(ctx, delay, again);
            Ok(())
        }
        Verdict::GiveUp => Err(error),
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

    /// An actor whose step always fails for a passing reason, made again by [`again_later`].
    struct Stepper {
        backoff: Backoff,
        attempts: u32,
        gave_up: Option<tokio::sync::oneshot::Sender<(u32, Error)>>,
    }

    impl actix::Actor for Stepper {
        type Context = actix::Context<Self>;

        fn started(&mut self, ctx: &mut Self::Context) {
            self.step(ctx);
        }
    }

    impl Stepper {
        fn step(&mut self, ctx: &mut actix::Context<Self>) {
            self.attempts += 1;
            let error = Error::ConnectionLoss { path: format!("/attempt-{}", self.attempts) };
            if let Err(error) = again_later(&mut self.backoff, error, ctx, |act: &mut Self, ctx| act.step(ctx))
                && let Some(gave_up) = self.gave_up.take()
            {
                let _ = gave_up.send((self.attempts, error));
            }
        }
    }

    #[actix_rt::test]
    async fn an_actors_step_is_made_again_until_the_backoff_gives_up_with_the_last_error() {
        let backoff =
            RetryPolicy::new(Duration::from_millis(1), Duration::from_millis(1)).with_max_attempts(3).backoff();
        let (gave_up, told) = tokio::sync::oneshot::channel();
        let _stepper = actix::Actor::start(Stepper { backoff, attempts: 0, gave_up: Some(gave_up) });
        let (attempts, error) = told.await.expect("the backoff gave up");
        assert_eq!(attempts, 3);
        assert!(matches!(error, Error::ConnectionLoss { path } if path == "/attempt-3"));
    }

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
        let mut backoff = RetryPolicy::default().backoff();
        assert_eq!(backoff.verdict(&Error::NoAuth { path: "/a".into() }), Verdict::GiveUp);
        assert!(matches!(backoff.verdict(&Error::ConnectionLoss { path: "/a".into() }), Verdict::RetryAfter(_)));
        assert_eq!(backoff.retries(), 1);
    }

    #[test]
    fn a_limit_of_two_gives_up_at_the_second_failure_until_a_success_resets_it() {
        let lost = Error::ConnectionLoss { path: "/a".into() };
        let mut backoff = RetryPolicy::default().with_max_attempts(2).backoff();
        assert!(matches!(backoff.verdict(&lost), Verdict::RetryAfter(_)), "the first failure is retried");
        assert_eq!(backoff.verdict(&lost), Verdict::GiveUp, "the second is the last");
        backoff.reset();
        assert!(matches!(backoff.verdict(&lost), Verdict::RetryAfter(_)), "a success starts the count again");
        let mut once = RetryPolicy::default().with_max_attempts(0).backoff();
        assert_eq!(once.verdict(&lost), Verdict::GiveUp, "0 attempts is taken as 1");
    }

    fn lost() -> Error {
        Error::ConnectionLoss { path: "/a".into() }
    }

    /// Attempts that answer `answers` in turn, counting how many were made.
    fn scripted(
        answers: Vec<Attempted<u32>>,
    ) -> (std::rc::Rc<std::cell::Cell<usize>>, impl FnMut() -> std::future::Ready<Attempted<u32>>) {
        let made = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut answers = answers.into_iter();
        let counter = made.clone();
        (made, move || {
            counter.set(counter.get() + 1);
            std::future::ready(answers.next().expect("no attempt beyond the script"))
        })
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_attempt_is_made_when_called_and_again_after_each_retryable_failure() {
        let (made, attempt) = scripted(vec![Attempted::Again(lost()), Attempted::Again(lost()), Attempted::Done(7)]);
        let policy = RetryPolicy::new(Duration::from_millis(100), Duration::from_secs(1)).with_jitter(0.0);
        let step = retried(policy.backoff(), attempt);
        assert_eq!(made.get(), 1, "sent when made, before anybody polls");
        let started = tokio::time::Instant::now();
        assert_eq!(step.await.expect("done"), 7);
        assert_eq!(made.get(), 3);
        assert_eq!(started.elapsed(), Duration::from_millis(300), "100 ms, then 200 ms");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_attempt_ends_the_step_and_the_policy_limit_gives_up_with_the_last_error() {
        let (made, attempt) = scripted(vec![Attempted::Again(lost()), Attempted::Failed(Error::Closed)]);
        assert!(matches!(retried(RetryPolicy::default().backoff(), attempt).await, Err(Error::Closed)));
        assert_eq!(made.get(), 2);
        let (made, attempt) = scripted(vec![Attempted::Again(lost()), Attempted::Again(lost()), Attempted::Done(1)]);
        let limited = RetryPolicy::default().with_max_attempts(2).backoff();
        assert!(matches!(retried(limited, attempt).await, Err(Error::ConnectionLoss { .. })));
        assert_eq!(made.get(), 2, "two attempts, as the policy allows");
        let (made, attempt) = scripted(vec![Attempted::Again(Error::NoAuth { path: "/a".into() })]);
        assert!(matches!(retried(RetryPolicy::default().backoff(), attempt).await, Err(Error::NoAuth { .. })));
        assert_eq!(made.get(), 1, "a final error is never retried");
    }

    #[test]
    fn random_units_stay_in_range_and_vary() {
        let draws: Vec<f64> = (0..100).map(|_| random_unit()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        assert!(draws.windows(2).any(|w| w[0] != w[1]));
    }
}
