//! What the lock and the semaphore say about holding, in the lock module's words: their waiting
//! callers and how the holder core's [`Happened`] reads as a [`LockEvent`].
//!
//! Owns: [`LockWaiter`], the translations from the core's terms to [`LockError`] and
//! [`LockEvent`], and the request handling the lock and the semaphore share (`acquire`,
//! `release`, `give_back`, `participants`, and the actor lifecycle and handlers that only call
//! them: `answers_lock_requests!`). Does not own any decision: those are the core's
//! (`recipe::holder`).

use super::error::LockError;
use super::grant::LockGrant;
use super::messages::LockEvent;
use crate::error::Error;
use std::time::Duration;

use actix::prelude::*;
use futures::channel::oneshot;

use crate::recipe::FencingToken;
use crate::recipe::holder::{self, Happened, HolderHost, InLine, Refusal, ReleaseError, Waiter};
use crate::recipe::participants::read_participants;
use crate::reply::Pending;
use crate::reply::Reply;
use crate::session::SessionHandle;

/// A caller of `Acquire` or `TryAcquire`.
pub(crate) struct LockWaiter {
    dir: String,
    reply: WaiterReply,
}

enum WaiterReply {
    Acquire(Pending<Result<LockGrant, LockError>>),
    Try(Pending<Result<Option<LockGrant>, LockError>>),
}

impl LockWaiter {
    pub(super) fn acquire(dir: &str, reply: Pending<Result<LockGrant, LockError>>) -> Self {
        LockWaiter { dir: dir.to_owned(), reply: WaiterReply::Acquire(reply) }
    }

    pub(super) fn try_acquire(dir: &str, reply: Pending<Result<Option<LockGrant>, LockError>>) -> Self {
        LockWaiter { dir: dir.to_owned(), reply: WaiterReply::Try(reply) }
    }
}

impl Waiter<LockGrant> for LockWaiter {
    fn grant(self, grant: &LockGrant) -> bool {
        match self.reply {
            WaiterReply::Acquire(reply) => reply.send(Ok(grant.clone())).is_ok(),
            WaiterReply::Try(reply) => reply.send(Ok(Some(grant.clone()))).is_ok(),
        }
    }

    fn in_line(self) -> InLine<Self> {
        match self.reply {
            WaiterReply::Try(reply) => {
                // "Busy" promises our node is gone: answered once the withdraw has deleted it.
                let (answer, gone) = oneshot::channel();
                actix::spawn(async move {
                    let busy = match gone.await {
                        Ok(Err(ReleaseError::ZooKeeper(error))) => Err(LockError::ZooKeeper(error)),
                        _ => Ok(None),
                    };
                    let _ = reply.send(busy);
                });
                InLine::Leaves(answer)
            }
            reply @ WaiterReply::Acquire(_) => InLine::Waits(LockWaiter { dir: self.dir, reply }),
        }
    }

    fn refuse(self, why: Refusal) {
        let error = refusal(&self.dir, why);
        match self.reply {
            WaiterReply::Acquire(reply) => {
                let _ = reply.send(Err(error));
            }
            WaiterReply::Try(reply) => {
                let _ = reply.send(Err(error));
            }
        }
    }

    fn is_gone(&self) -> bool {
        match &self.reply {
            WaiterReply::Acquire(reply) => reply.is_canceled(),
            WaiterReply::Try(reply) => reply.is_canceled(),
        }
    }

    fn poll_gone(&self, cx: &mut std::task::Context<'_>) -> bool {
        match &self.reply {
            WaiterReply::Acquire(reply) => reply.poll_canceled(cx),
            WaiterReply::Try(reply) => reply.poll_canceled(cx),
        }
    }
}

fn refusal(dir: &str, why: Refusal) -> LockError {
    let dir = dir.to_owned();
    match why {
        Refusal::Timeout(after) => LockError::Timeout { dir, after },
        Refusal::Cancelled => LockError::Cancelled { dir },
        Refusal::InProgress => LockError::AcquireInProgress { dir },
        Refusal::Failed(error) => LockError::ZooKeeper(error),
        Refusal::Closed => LockError::ZooKeeper(Error::Closed),
    }
}

/// The answer to a `Release`.
pub(super) fn release_error(dir: &str, error: ReleaseError) -> LockError {
    let dir = dir.to_owned();
    match error {
        ReleaseError::NotHeld => LockError::NotHeld { dir },
        ReleaseError::Lost(reason) => LockError::Lost { dir, reason },
        ReleaseError::ZooKeeper(error) => LockError::ZooKeeper(error),
    }
}

/// What subscribers hear about `participant`; `None` for what the lock has no event for (a
/// re-acquire nobody waited on failed: it is logged).
pub(super) fn event(participant: &str, happened: Happened<LockGrant>) -> Option<LockEvent> {
    let participant = participant.to_owned();
    Some(match happened {
        Happened::Acquired(held) => LockEvent::Acquired { participant, grant: held.grant },
        Happened::Suspended(held) => LockEvent::Suspended { participant, token: held.token },
        Happened::Restored(held) => LockEvent::Reconnected { participant, token: held.token },
        Happened::Lost(held, reason) => LockEvent::Lost { participant, token: held.token, reason },
        Happened::Released(held) => LockEvent::Released { participant, node: held.node },
        Happened::Failed(_) => return None,
    })
}

/// `Acquire` for a lock-shaped host: wait for the grant, at most `timeout`.
pub(super) fn acquire<H>(host: &mut H, dir: &str, timeout: Option<Duration>, ctx: &mut Context<H>) -> LockReply
where
    H: HolderHost<Grant = LockGrant, Waiter = LockWaiter>,
{
    let (pending, reply) = Reply::later(Err(LockError::Cancelled { dir: dir.to_owned() }));
    // Only a caller that waits gets a timer: one refused (another acquire waits) or answered at
    // once must not end somebody else's attempt. A caller taking over the place of one that
    // went away waits too.
    host.holder().forget_gone();
    let waits = host.holder().held().is_none() && !host.holder().has_waiters();
    let effects = host.holder().acquire(LockWaiter::acquire(dir, pending));
    holder::run(host, effects, ctx);
    match (timeout, host.holder().attempt(), waits) {
        (Some(after), Some(attempt), true) => holder::time_out(host, attempt, after, ctx),
        // A caller without a timeout taking over from one that went: not the old caller's timer.
        (None, Some(_), true) => holder::cancel_timeout(host, ctx),
        _ => {}
    }
    reply
}

/// What an `Acquire` is answered with.
pub(super) type LockReply = Reply<Result<LockGrant, LockError>>;

/// `Release` for a lock-shaped host.
pub(super) fn release<H>(host: &mut H, dir: &str, ctx: &mut Context<H>) -> ResponseFuture<Result<(), LockError>>
where
    H: HolderHost<Grant = LockGrant, Waiter = LockWaiter>,
{
    let (answer, answered) = oneshot::channel();
    let effects = host.holder().release(answer);
    holder::run(host, effects, ctx);
    let dir = dir.to_owned();
    Box::pin(async move {
        match answered.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(release_error(&dir, error)),
            Err(_) => Err(LockError::Stopped { dir }),
        }
    })
}

/// `ReleaseAndStop` for a lock-shaped host: give the grant back (or leave the line), then stop
/// once its node is deleted, so that a stop can be awaited past the delete.
pub(super) fn release_and_stop<H>(host: &mut H, dir: &str, ctx: &mut Context<H>)
where
    H: HolderHost<Grant = LockGrant, Waiter = LockWaiter>,
{
    let released = release(host, dir, ctx);
    ctx.spawn(actix::fut::wrap_future::<_, H>(released).map(|_, _, ctx| ctx.stop()));
}

/// `GiveBack` for a lock-shaped host: a caller handed the grant with `token` did not take it; the
/// grant is released once no caller it was handed to has it.
pub(super) fn give_back<H>(host: &mut H, token: FencingToken, ctx: &mut Context<H>)
where
    H: HolderHost<Grant = LockGrant, Waiter = LockWaiter>,
{
    let effects = host.holder().give_back(token);
    holder::run(host, effects, ctx);
}

/// `Participants` of the nodes in `dir`.
pub(super) fn participants(session: &SessionHandle, dir: String) -> ResponseFuture<Result<Vec<String>, LockError>> {
    let read = read_participants(session.clone(), dir);
    Box::pin(async move { read.await.map_err(LockError::ZooKeeper) })
}

/// What a lock-shaped actor (the lock, the semaphore) shares, for a holder host with a
/// `config.dir`, a `shell` and its own `Handler<Acquire>`: its `Actor` impl (attached to its
/// session at the start; a stop releases, its contenders deleting their nodes after it) and the
/// handlers of `Release` (asked and told), `ReleaseAndStop`, `Asked<Acquire>`, `CallerGone`,
/// `GiveBack` and the session's events and `Goodbye`.
macro_rules! answers_lock_requests {
    ($actor:ty) => {
        impl actix::Actor for $actor {
            type Context = actix::Context<Self>;

            fn started(&mut self, ctx: &mut Self::Context) {
                // Dropping the last address is how a user stops it, whatever timer is pending.
                self.shell.attach(ctx);
            }

            fn stopped(&mut self, ctx: &mut Self::Context) {
                $crate::recipe::holder::stopped(self, ctx);
            }
        }

        impl actix::Handler<super::messages::Release> for $actor {
            type Result = actix::ResponseFuture<Result<(), super::error::LockError>>;

            fn handle(&mut self, _: super::messages::Release, ctx: &mut Self::Context) -> Self::Result {
                let dir = self.config.dir.clone();
                super::holding::release(self, &dir, ctx)
            }
        }

        $crate::reply::handle_told!($actor: super::messages::Release);

        impl actix::Handler<super::messages::ReleaseAndStop> for $actor {
            type Result = ();

            fn handle(&mut self, _: super::messages::ReleaseAndStop, ctx: &mut Self::Context) {
                let dir = self.config.dir.clone();
                super::holding::release_and_stop(self, &dir, ctx);
            }
        }

        impl actix::Handler<$crate::reply::Asked<super::messages::Acquire>> for $actor {
            type Result = ();

            fn handle(&mut self, asked: $crate::reply::Asked<super::messages::Acquire>, ctx: &mut Self::Context) {
                asked.answer::<Self, _>(ctx, |request, ctx| {
                    <Self as actix::Handler<super::messages::Acquire>>::handle(self, request, ctx)
                });
            }
        }

        impl actix::Handler<$crate::recipe::holder::CallerGone> for $actor {
            type Result = ();

            fn handle(&mut self, _: $crate::recipe::holder::CallerGone, ctx: &mut Self::Context) {
                $crate::recipe::holder::caller_gone(self, ctx);
            }
        }

        impl actix::Handler<super::messages::GiveBack> for $actor {
            type Result = ();

            fn handle(&mut self, msg: super::messages::GiveBack, ctx: &mut Self::Context) {
                super::holding::give_back(self, msg.token, ctx);
            }
        }

        impl actix::Handler<$crate::session::SessionEvent> for $actor {
            type Result = ();

            fn handle(&mut self, event: $crate::session::SessionEvent, ctx: &mut Self::Context) {
                $crate::recipe::holder::session_event(self, &event, ctx);
            }
        }

        impl actix::Handler<$crate::session::requests::Goodbye> for $actor {
            type Result = actix::ResponseFuture<()>;

            fn handle(&mut self, _: $crate::session::requests::Goodbye, ctx: &mut Self::Context) -> Self::Result {
                $crate::recipe::holder::goodbye(self, ctx)
            }
        }
    };
}
pub(super) use answers_lock_requests;
