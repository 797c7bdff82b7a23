//! [`Reply`]: a deferred answer to a request that notices when its caller stops waiting.
//!
//! Owns: the one thing actix's `ResponseFuture` cannot do — tell the actor that the caller
//! dropped its request, so a recipe can leave a queue nobody waits on (a cancelled `Acquire`
//! must not keep a node in line). Does not own what the answer is.

use actix::dev::{MessageResponse, OneshotSender};
use actix::{Actor, Message};
use futures::channel::oneshot;
use futures::future::{Either, select};

/// The answer to a request: now, or later through a channel the actor holds the sender of.
///
/// When the caller drops its request future, the sender reports
/// [`is_canceled`](oneshot::Sender::is_canceled), so the actor can give up the work.
/// A request sent with `do_send` has no caller: the work goes on and its answer is dropped.
pub enum Reply<T> {
    /// Answered at once.
    Now(T),
    /// Answered when the actor sends on the channel; `if_dropped` if it drops the sender.
    Later {
        /// Receives the answer.
        answer: oneshot::Receiver<T>,
        /// The answer when the sender is dropped without sending (e.g. the actor stopped).
        if_dropped: T,
    },
}

impl<T> Reply<T> {
    /// A deferred reply and the sender that answers it.
    pub fn later(if_dropped: T) -> (oneshot::Sender<T>, Reply<T>) {
        let (tx, rx) = oneshot::channel();
        (tx, Reply::Later { answer: rx, if_dropped })
    }
}

impl<A, M, T> MessageResponse<A, M> for Reply<T>
where
    A: Actor,
    M: Message<Result = T>,
    T: Send + 'static,
{
    fn handle(self, _: &mut A::Context, caller: Option<OneshotSender<T>>) {
        let (answer, if_dropped) = match self {
            Reply::Now(value) => {
                if let Some(caller) = caller {
                    let _ = caller.send(value);
                }
                return;
            }
            Reply::Later { answer, if_dropped } => (answer, if_dropped),
        };
        actix::spawn(async move {
            let Some(mut caller) = caller else {
                // `do_send`: keep the receiver alive so the work is not taken as cancelled.
                let _ = answer.await;
                return;
            };
            let outcome = {
                let gone = caller.closed();
                futures::pin_mut!(gone);
                match select(answer, gone).await {
                    Either::Left((value, _)) => Some(value.unwrap_or(if_dropped)),
                    // The caller dropped its request: dropping `answer` tells the actor.
                    Either::Right(_) => None,
                }
            };
            if let Some(value) = outcome {
                let _ = caller.send(value);
            }
        });
    }
}
