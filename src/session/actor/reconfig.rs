//! Following the ensemble's dynamic reconfiguration: reading and watching `/zookeeper/config`,
//! and moving a live session whose connection dropped to the servers a newer configuration
//! names. Does not own what a configuration says nor when a session must move
//! (`session/ensemble.rs`), nor the client's thread (`session/client.rs`).
//!
//! # A move
//! The client library cannot change a client's servers, so a move takes the session over with a
//! new client (`Connector::with_session`) on the new servers, and retires the old one without
//! closing the session (its thread stops; see `client.rs`). It happens only while the
//! connection is down, so the recipes have already heard `Suspended`:
//! 1. the old client is retired: its requests in flight answer `ConnectionLoss` (outcome
//!    unknown), its one-shot watches tell their owners "read again", its persistent watches
//!    are dropped; new requests wait for the new client;
//! 2. the new client connects with the session's id and password. The session is alive: the
//!    new client sends a `sync` before anything else (its server may lag behind the one the
//!    session left: the client library does not tell it the last zxid seen), then the
//!    requests that waited, and the persistent watches are added again; the recipes hear
//!    `Reconnected`;
//! 3. if the server says the session expired (or no new server answers within the session
//!    timeout), the session expired: the recipes hear `Expired`, and a new session is built on
//!    the new servers.

use super::*;
use crate::session::ensemble::Ensemble;

/// How long a move waits before trying again after a failure that is not the session's end.
const MOVE_RETRY: Duration = Duration::from_millis(200);
/// How long before the configuration is read again after a read that failed on a connection
/// that is up again.
const CONFIG_RETRY: Duration = Duration::from_secs(1);

impl SessionActor {
    /// Reads and watches the ensemble's configuration on the live client. One that names no
    /// server (a standalone server's) leaves nothing to follow: its watch is dropped, which
    /// removes it.
    pub(super) fn track_ensemble(&mut self, ctx: &mut Context<Self>) {
        if !self.config.ensemble_tracking() {
            return;
        }
        self.unwatch_config(ctx);
        let State::Live(live) = &self.state else { return };
        let (client, retired, generation) = (live.client.clone(), live.thread.retired(), self.generation);
        let read = async move {
            let (data, stat, watcher) = client.get_and_watch_config().await?;
            Ok(Ensemble::parse(&data, stat.mzxid).map(|ensemble| (ensemble, watcher)))
        };
        let read = send_now(read.instrument(tracing::debug_span!("zk.ensemble.read", generation)));
        let task = ctx.spawn(read.into_actor_free().map(
            move |outcome: std::result::Result<_, zookeeper_client::Error>, act: &mut Self, ctx| {
                if generation != act.generation {
                    return;
                }
                act.config_watch = ConfigWatch::Unset;
                match outcome {
                    Ok(None) => {
                        debug!("the server publishes no ensemble configuration; nothing to follow");
                        act.config_watch = ConfigWatch::Untracked;
                    }
                    Ok(Some((ensemble, watcher))) => act.on_configuration(ensemble, watcher, retired, ctx),
                    // Read again when the connection is back (`link_up`), or soon if it already
                    // is (its news may have come before this answer).
                    Err(error) if Error::from_zk("/zookeeper/config", error.clone()).is_transient() => {
                        debug!(%error, "could not read the ensemble configuration yet");
                        if matches!(&act.state, State::Live(Live { link: Connection::Up, .. })) {
                            ctx.run_later(CONFIG_RETRY, |act, ctx| {
                                if matches!(act.config_watch, ConfigWatch::Unset) {
                                    act.track_ensemble(ctx);
                                }
                            });
                        }
                    }
                    Err(error) => {
                        warn!(%error, "cannot read the ensemble configuration; not following it on this session");
                        act.config_watch = ConfigWatch::Untracked;
                    }
                }
            },
        ));
        self.config_watch = ConfigWatch::Set(task);
    }

    /// Cancels the watch on the configuration (a new one is read after a move or a new session).
    pub(super) fn unwatch_config(&mut self, ctx: &mut Context<Self>) {
        if let ConfigWatch::Set(task) = std::mem::replace(&mut self.config_watch, ConfigWatch::Unset) {
            ctx.cancel_future(task);
        }
    }

    fn on_configuration(
        &mut self,
        ensemble: Ensemble,
        watcher: zookeeper_client::OneshotWatcher,
        retired: Retired,
        ctx: &mut Context<Self>,
    ) {
        let generation = self.generation;
        let (hosts, version) = (ensemble.connect_string(), ensemble.version);
        if self.ensemble.read(ensemble) {
            info!(%hosts, version, "the ensemble was reconfigured; following it");
            self.consider_moving(ctx);
        }
        if matches!(&self.state, State::Live(Live { link: Connection::Moving { .. }, .. })) {
            // The client of `watcher` is retired and must not be polled; the move reads the
            // configuration again on the new client.
            return;
        }
        // The next change. A retired client's watcher must not be polled once its thread is
        // gone: the retirement ends the wait first (and the move reads the configuration again).
        let next = async move {
            let (retired, changed) = (Box::pin(retired.wait()), Box::pin(watcher.changed()));
            match futures::future::select(retired, changed).await {
                futures::future::Either::Left(_) => None,
                futures::future::Either::Right((event, _)) => Some(event),
            }
        };
        let task = ctx.spawn(next.into_actor_free().map(move |event, act: &mut Self, ctx| {
            if generation != act.generation {
                return;
            }
            act.config_watch = ConfigWatch::Unset;
            if event.is_some_and(|event| !event.session_state.is_terminated()) {
                act.track_ensemble(ctx);
            }
        }));
        self.config_watch = ConfigWatch::Set(task);
    }

    /// Moves the live session when its connection is down and a newer configuration names
    /// other servers than its client's.
    pub(super) fn consider_moving(&mut self, ctx: &mut Context<Self>) {
        let State::Live(live) = &mut self.state else { return };
        let Connection::Down { since } = live.link else { return };
        if !self.ensemble.must_move(&live.hosts) {
            return;
        }
        let hosts = self.ensemble.connect_string(self.config.hosts());
        info!(from = %live.hosts, to = %hosts, "moving the session to the reconfigured ensemble");
        // From here the old client is no more: were it to reconnect to one of its servers, the
        // session would bounce between the two clients.
        ctx.cancel_future(live.state_task);
        live.thread.retire(live.client.clone());
        for id in self.watches.ids() {
            if let Some(task) = self.watches.get_mut(id).and_then(|watch| watch.task.take()) {
                ctx.cancel_future(task);
            }
        }
        self.unwatch_config(ctx);
        let task = self.move_session(hosts, since, ctx);
        if let State::Live(live) = &mut self.state {
            live.link = Connection::Moving { since, task };
        }
    }

    fn move_session(&mut self, hosts: String, since: Instant, ctx: &mut Context<Self>) -> SpawnHandle {
        let State::Live(live) = &self.state else { unreachable!("moving needs a live session") };
        let session = live.client.session().clone();
        let timeout = live.client.session_timeout();
        let open = self.open_client(hosts.clone(), Some(session));
        let fut = async move {
            let (thread, opened) = ClientThread::open(open, true);
            opened.await.map(|(client, sent)| (client, sent, thread))
        };
        let span = tracing::info_span!("zk.move", to = %hosts);
        ctx.spawn(fut.instrument(span).into_actor(self).map(move |outcome, act, ctx| {
            let State::Live(live) = &mut act.state else { return };
            if !matches!(live.link, Connection::Moving { .. }) {
                return;
            }
            match outcome {
                Ok((client, sent, thread)) => act.moved(client, sent, thread, hosts, ctx),
                Err(Error::SessionLost { .. }) => act.expired(ctx),
                Err(Error::AuthFailed) => act.auth_failed(ctx),
                Err(error) if since.elapsed() < timeout => {
                    warn!(%error, "could not move the session yet; trying again");
                    let task = ctx.run_later(MOVE_RETRY, move |act, ctx| {
                        let State::Live(live) = &act.state else { return };
                        if matches!(live.link, Connection::Moving { .. }) {
                            let task = act.move_session(hosts, since, ctx);
                            if let State::Live(live) = &mut act.state {
                                live.link = Connection::Moving { since, task };
                            }
                        }
                    });
                    live.link = Connection::Moving { since, task };
                }
                Err(error) => {
                    warn!(%error, "no server of the new configuration took the session in time");
                    act.expired(ctx);
                }
            }
        }))
    }

    /// The new client took the session over.
    fn moved(&mut self, client: Client, sent: Instant, thread: ClientThread, hosts: String, ctx: &mut Context<Self>) {
        let generation = self.generation;
        let State::Live(live) = &mut self.state else { return };
        let session_id = live.session_id;
        info!(session = %session_id, %hosts, "the session moved to the reconfigured ensemble");
        let (before, timeout) = (live.client.session_timeout(), client.session_timeout());
        // The old client's thread is stopping (it was retired when the move began).
        live.thread = thread;
        live.client = client.clone();
        live.hosts = hosts;
        live.negotiated = timeout;
        live.state_task = Self::watch_state(client.state_watcher(), generation, ctx);
        let retired = live.thread.retired();
        let read_only = client.session().is_readonly();
        if timeout != before {
            // The new servers negotiated another timeout; the server the client reattached to
            // revalidated the session with the leader when asked, so the lease counts from there.
            info!(?before, ?timeout, "the session's timeout changed with the move");
            self.lease.began(session_id, sent, timeout, self.config.lease_margin(timeout));
            self.arm_heartbeat(timeout, ctx);
        }
        // The new server may lag behind the old one: a sync first, so that whatever follows
        // (the requests that waited, the recipes' reads after `Reconnected`) sees at least
        // what the session saw before.
        let sync = {
            let client = client.clone();
            send_now(async move { client.sync("/").await })
        };
        ctx.spawn(sync.into_actor_free().map(|outcome, _: &mut Self, _| {
            if let Err(error) = outcome {
                debug!(%error, "the sync after a move failed");
            }
        }));
        // Watches, then the requests that waited, then the news (as for a new session).
        for id in self.watches.ids() {
            if self.watches.get_mut(id).is_some_and(|w| w.task.is_none()) {
                self.register_watch(id, None, ctx);
            }
        }
        for pending in self.pending.drain(..) {
            pending(Ok((client.clone(), generation, retired.clone())));
        }
        // `link_up` reads the configuration again (the move left it unwatched).
        self.link_up(read_only, ctx);
    }
}
