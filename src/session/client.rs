//! One `zookeeper_client::Client` and the thread it runs on: connecting it there, and retiring
//! it when the session moves to another client (a new ensemble configuration).
//!
//! Owns: the thread (an actix Arbiter) that runs the client library's background task, the
//! retirement signal ([`ClientThread::retire`], [`Retired`]) that tells the requests and
//! watches sent through a client that their answers will never come, and stopping the thread
//! without closing the session. Does not own when a session moves (`actor/reconfig.rs`) nor
//! what the new servers are (`ensemble.rs`).
//!
//! # Why a thread per client
//! The client library never lets go of its servers: a client keeps trying the hosts it was
//! built with, and one whose last handle is dropped sends `CloseSession` as soon as it reaches
//! one. A session that moves to a new client must therefore stop the old one *without* a drop:
//! stopping the thread its background task runs on ends that task where it stands (its socket
//! closes; the server keeps the session). The price is a thread hop each way per request
//! (`docs/performance.md`), so a session that does not follow the ensemble's reconfiguration
//! never moves and keeps its client on its own thread (the session actor's).

use std::future::Future;
use std::time::Instant;

use actix::Arbiter;
use futures::channel::oneshot;
use zookeeper_client::Client;

use crate::error::{Error, Result};

/// The thread one client runs on, and the client's retirement signal.
pub(crate) struct ClientThread {
    /// `None`: the client runs on the session actor's thread, and is never retired.
    arbiter: Option<actix::ArbiterHandle>,
    retire: tokio::sync::watch::Sender<bool>,
    /// Resolves once the thread's runtime dropped the client's task.
    stopped: Option<oneshot::Receiver<()>>,
}

/// Sends when dropped: with the runtime that owns it, when the thread stops.
struct OnDrop(Option<oneshot::Sender<()>>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

impl ClientThread {
    /// Runs `connect` on a new thread (`own_thread`) or on the current one; the client it makes
    /// runs its background task there. A thread of its own stops by itself once the client's
    /// session ends (closed or expired), or when the connection fails.
    pub(crate) fn open(
        connect: impl Future<Output = Result<(Client, Instant)>> + Send + 'static,
        own_thread: bool,
    ) -> (ClientThread, impl Future<Output = Result<(Client, Instant)>>) {
        let handle = if own_thread { Arbiter::new().handle() } else { Arbiter::current() };
        let (tx, rx) = oneshot::channel();
        let (stopping, stopped) = oneshot::channel();
        let spawned = handle.spawn(async move {
            let _stopping = OnDrop(Some(stopping));
            let outcome = connect.await;
            let watcher = outcome.as_ref().ok().map(|(client, _)| client.state_watcher());
            // Nobody waits any more (the session actor closed meanwhile): dropping the client
            // here closes its session.
            let _ = tx.send(outcome);
            if !own_thread {
                return;
            }
            if let Some(mut watcher) = watcher {
                while !watcher.peek_state().is_terminated() && !watcher.changed().await.is_terminated() {}
            }
            Arbiter::current().stop();
        });
        if !spawned {
            tracing::warn!("could not start a client thread");
        }
        let (retire, _) = tokio::sync::watch::channel(false);
        let thread = ClientThread { arbiter: own_thread.then_some(handle), retire, stopped: Some(stopped) };
        (thread, async move { rx.await.unwrap_or(Err(Error::Closed)) })
    }

    /// The signal a request or watch sent through this client holds.
    pub(crate) fn retired(&self) -> Retired {
        Retired(self.retire.subscribe())
    }

    /// Retires the client: everything holding its [`Retired`] is told, then its thread is told
    /// to stop, which ends the client's task where it stands (within moments: the thread's
    /// loop takes the stop between two steps of the task): no `CloseSession`, so the session
    /// lives on for whoever takes it over, and no reconnect to the old servers after that.
    ///
    /// The client library panics in a watcher polled after its task ended, so whatever polls
    /// a future of this client polls its [`Retired`] first: told before the thread stops, it
    /// is ready at every poll from then on.
    ///
    /// `client` (a handle of this thread's client) is kept until the thread has stopped: were
    /// the last handle dropped before, the client would send `CloseSession` in that moment.
    pub(crate) fn retire(&mut self, client: Client) {
        if self.retire.send_replace(true) {
            return;
        }
        let Some(arbiter) = &self.arbiter else {
            debug_assert!(false, "a client on the session's thread is never retired");
            return;
        };
        arbiter.stop();
        if let Some(stopped) = self.stopped.take() {
            actix::spawn(async move {
                let _ = stopped.await;
                drop(client);
            });
        }
    }
}

/// Resolves when the client a request or watch went through was retired, because the session
/// moved to a new client: its reply or event will never come. Never resolves when the client
/// ends otherwise (its session's expiry and close are told the usual way).
#[derive(Clone)]
pub(crate) struct Retired(tokio::sync::watch::Receiver<bool>);

impl Retired {
    /// Resolves once retired; pending forever otherwise. Outside tokio's cooperative budget:
    /// a budget used up must not make it answer `Pending` while retired, or the future polled
    /// after it would be the retired client's (see [`ClientThread::retire`]).
    pub(crate) async fn wait(mut self) {
        let retired = tokio::task::coop::unconstrained(self.0.wait_for(|retired| *retired)).await;
        if retired.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
