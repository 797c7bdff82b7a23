//! One `zookeeper_client::Client` and the thread it runs on: connecting it there, and retiring
//! it when the session moves to another client (a new ensemble configuration).
//!
//! Owns: the thread (an actix Arbiter) that runs the client library's background task, the
//! retirement signal ([`ClientThread::retire`], [`Retired`]) that tells the requests and watches sent through
//! a client that their answers will never come, and stopping the thread without closing the
//! session. Does not own when a session moves (`actor/reconfig.rs`) nor what the new servers
//! are (`ensemble.rs`).
//!
//! # Why a thread per client
//! The client library never lets go of its servers: a client keeps trying the hosts it was
//! built with, and one whose last handle is dropped sends `CloseSession` as soon as it reaches
//! one. A session that moves to a new client must therefore stop the old one *without* a drop:
//! stopping the thread its background task runs on ends that task where it stands (its socket
//! closes; the server keeps the session). The thread also keeps the client's heartbeat off the
//! session actor's thread.

use std::future::Future;
use std::time::Instant;

use actix::Arbiter;
use futures::channel::oneshot;
use zookeeper_client::Client;

use crate::error::{Error, Result};

/// The thread one client runs on, and the client's retirement signal.
pub(crate) struct ClientThread {
    arbiter: actix::ArbiterHandle,
    retire: tokio::sync::watch::Sender<bool>,
}

impl ClientThread {
    /// Runs `connect` on a new thread; the client it makes runs its background task there. The
    /// thread stops by itself once the client's session ends (closed or expired), or when
    /// the connection fails.
    pub(crate) fn open(
        connect: impl Future<Output = Result<(Client, Instant)>> + Send + 'static,
    ) -> (ClientThread, impl Future<Output = Result<(Client, Instant)>>) {
        let arbiter = Arbiter::new();
        let handle = arbiter.handle();
        let (tx, rx) = oneshot::channel();
        let spawned = arbiter.spawn(async move {
            let outcome = connect.await;
            let watcher = outcome.as_ref().ok().map(|(client, _)| client.state_watcher());
            // Nobody waits any more (the session actor closed meanwhile): dropping the client
            // here closes its session.
            let _ = tx.send(outcome);
            if let Some(mut watcher) = watcher {
                while !watcher.peek_state().is_terminated() && !watcher.changed().await.is_terminated() {}
            }
            Arbiter::current().stop();
        });
        if !spawned {
            tracing::warn!("could not start a client thread");
        }
        let (retire, _) = tokio::sync::watch::channel(false);
        let thread = ClientThread { arbiter: handle, retire };
        (thread, async move { rx.await.unwrap_or(Err(Error::Closed)) })
    }

    /// The signal a request or watch sent through this client holds.
    pub(crate) fn retired(&self) -> Retired {
        Retired(self.retire.subscribe())
    }

    /// Retires the client: everything holding its [`Retired`] is told, then its thread stops
    /// at once, ending the client's task where it stands: no `CloseSession`, so the session
    /// lives on for whoever takes it over, and no reconnect to the old servers either.
    ///
    /// The client library panics in a watcher polled after its task ended, so whatever polls
    /// a future of this client polls its [`Retired`] first: told before the thread stops, it
    /// is ready at every poll from then on.
    pub(crate) fn retire(&self) {
        if !self.retire.send_replace(true) {
            self.arbiter.stop();
        }
    }
}

/// Resolves when the client a request or watch went through was retired, because the session
/// moved to a new client: its reply or event will never come. Never resolves when the client
/// ends otherwise (its session's expiry and close are told the usual way).
#[derive(Clone)]
pub(crate) struct Retired(tokio::sync::watch::Receiver<bool>);

impl Retired {
    /// Resolves once retired; pending forever otherwise.
    pub(crate) async fn wait(mut self) {
        if self.0.wait_for(|retired| *retired).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
