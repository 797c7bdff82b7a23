//! Registering under a fixed name: an ephemeral node that is ours, or a clear "taken".
//!
//! Owns: creating `<node>` as an ephemeral of the current session, adopting a node our own
//! session made (a create whose reply was lost), and refusing one of another live session.
//! Removing ours again is [`delete_own_ephemeral`](super::guarded::delete_own_ephemeral). And
//! what to do with an attempt's outcome ([`next_step`]): both users retry the same way.
//! Used by the task worker's registration and the group member's membership.

use std::future::Future;

use std::time::Duration;

use actix::{Actor, AsyncContext, Context};

use crate::error::Error;
use crate::retry::{Backoff, Verdict};
use crate::session::PinnedSession;
use crate::session::requests::CreateMode;

/// Why a registration was not made.
#[derive(Debug)]
pub(crate) enum RegisterError {
    /// Another live session holds the name.
    Taken,
    /// A ZooKeeper request failed.
    ZooKeeper(Error),
}

impl From<Error> for RegisterError {
    fn from(error: Error) -> Self {
        RegisterError::ZooKeeper(error)
    }
}

/// Creates the directories `parents` if missing, then `node` as an ephemeral node of `session`
/// with `data`; resolves to the node's `czxid`.
///
/// Every request is pinned to that session: a registration meant for it never lands on the next
/// one (where its owner would not know to delete it), and once it has ended the attempt answers
/// [`Error::SessionLost`] at once instead of waiting for the next session ([`NextStep::AwaitSession`]).
pub(crate) fn register_ephemeral(
    session: &PinnedSession,
    parents: Vec<String>,
    node: String,
    data: Vec<u8>,
) -> impl Future<Output = Result<i64, RegisterError>> + 'static + use<> {
    let session = session.clone();
    async move {
        let ensured: Vec<_> = parents.iter().map(|p| session.ensure_path(p)).collect();
        for done in ensured {
            done.await?;
        }
        let generation = session.generation();
        let owner = session.handle().session().await.filter(|s| s.generation == generation).map(|s| s.session_id);
        match session.create(&node, data, CreateMode::Ephemeral).await {
            Ok(created) => Ok(created.stat.czxid),
            Err(Error::NodeExists { .. }) => match (session.exists(&node).await?, owner) {
                (Some(stat), Some(owner)) if stat.ephemeral_owner == owner.0 => Ok(stat.czxid),
                _ => Err(RegisterError::Taken),
            },
            Err(error) => Err(error.into()),
        }
    }
}

/// What a registering actor does after one attempt.
#[derive(Debug)]
pub(crate) enum NextStep {
    /// Registered; the node's `czxid`. The backoff starts over.
    Registered(i64),
    /// Retrying cannot help (no permission, a bad path), or the retry policy's attempts are
    /// used up (a name still taken is then `NodeExists` at `node`): stop trying, with this error.
    GiveUp(Error),
    /// Try again after the delay ([`again_after`]). `taken` when another live session holds the
    /// name (it frees up when that session ends), which the actor tells its subscribers;
    /// otherwise the connection or the session is not there yet, not worth telling (it is
    /// logged here).
    RetryAfter { delay: Duration, taken: bool },
    /// The session the attempt was pinned to has ended: nothing of it remains, and the next
    /// session's `Connected` starts the next attempt (not counted against the policy).
    AwaitSession,
}

/// The decision after a registration attempt at `node`, the same for every registering actor.
pub(crate) fn next_step(outcome: Result<i64, RegisterError>, backoff: &mut Backoff, node: &str) -> NextStep {
    let because = match outcome {
        Ok(czxid) => {
            backoff.reset();
            return NextStep::Registered(czxid);
        }
        Err(RegisterError::ZooKeeper(Error::SessionLost { .. })) => return NextStep::AwaitSession,
        Err(because) => because,
    };
    let error = match &because {
        RegisterError::ZooKeeper(error) => error.clone(),
        RegisterError::Taken => Error::NodeExists { path: node.to_owned() },
    };
    match backoff.verdict(&error) {
        Verdict::RetryAfter(delay) => {
            let taken = matches!(because, RegisterError::Taken);
            if !taken {
                tracing::debug!(node, %error, "cannot register yet; trying again");
            }
            NextStep::RetryAfter { delay, taken }
        }
        Verdict::GiveUp => NextStep::GiveUp(error),
    }
}

/// Runs `again` on the actor after `delay` if `still` holds then: the attempt it retries was not
/// overtaken meanwhile (by a stop, a leave, a newer session).
pub(crate) fn again_after<A>(
    ctx: &mut Context<A>,
    delay: Duration,
    still: impl Fn(&A) -> bool + 'static,
    again: fn(&mut A, &mut Context<A>),
) where
    A: Actor<Context = Context<A>>,
{
    ctx.run_later(delay, move |act, ctx| {
        if still(act) {
            again(act, ctx);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::RetryPolicy;

    #[test]
    fn final_errors_give_up_others_retry_and_success_starts_the_backoff_over() {
        let mut backoff =
            RetryPolicy::new(Duration::from_millis(100), Duration::from_secs(1)).with_jitter(0.0).backoff();
        let no_auth = Error::NoAuth { path: "/g".into() };
        assert!(matches!(next_step(Err(no_auth.into()), &mut backoff, "/g/m"), NextStep::GiveUp(Error::NoAuth { .. })));
        let lost = Error::ConnectionLoss { path: "/g".into() };
        assert!(matches!(
            next_step(Err(lost.into()), &mut backoff, "/g/m"),
            NextStep::RetryAfter { taken: false, delay } if delay == Duration::from_millis(100)
        ));
        assert!(matches!(
            next_step(Err(RegisterError::Taken), &mut backoff, "/g/m"),
            NextStep::RetryAfter { taken: true, delay } if delay == Duration::from_millis(200)
        ));
        assert!(matches!(next_step(Ok(7), &mut backoff, "/g/m"), NextStep::Registered(7)));
        // An ended session is waited out, not retried: the backoff does not move.
        let lost = Error::SessionLost { path: "/g/m".into() };
        assert!(matches!(next_step(Err(lost.into()), &mut backoff, "/g/m"), NextStep::AwaitSession));
        assert!(matches!(
            next_step(Err(RegisterError::Taken), &mut backoff, "/g/m"),
            NextStep::RetryAfter { delay, .. } if delay == Duration::from_millis(100)
        ));
    }

    #[test]
    fn a_limit_of_two_gives_up_at_the_second_failure_naming_a_taken_node() {
        let mut backoff = RetryPolicy::default().with_max_attempts(2).backoff();
        assert!(matches!(next_step(Err(RegisterError::Taken), &mut backoff, "/g/m"), NextStep::RetryAfter { .. }));
        assert!(matches!(
            next_step(Err(RegisterError::Taken), &mut backoff, "/g/m"),
            NextStep::GiveUp(Error::NodeExists { path }) if path == "/g/m"
        ));
    }
}
