//! [`ElectionHandle`]: async methods over an election participant, for programs that want
//! answers rather than messages.
//!
//! Owns: turning each request into one message and its reply into a `Result` (a stopped actor
//! is [`ElectionError::Stopped`], never a mailbox error to unwrap). Does not own any state: the
//! actor does. A handle holds a strong address: the participant lives while a handle (or another
//! address) does, and dropping the last one stops it, which leaves the election.

use std::future::Future;

use actix::prelude::*;

use super::actor::ElectionActor;
use super::config::{ElectionConfig, LeaderFactory};
use super::error::ElectionError;
use super::launcher::launched_here;
use super::messages::{
    CurrentLeader, ElectionEvent, Join, LeaderTerm, Leadership, Participants, Proclaim, Resign, ResignAndStop,
};
use crate::builder::Opaque;
use crate::recipe::holder::start_host;
use crate::reply::Told;
use crate::session::SessionHandle;
use crate::session::health::HealthTag;

/// A cloneable handle to one election participant (an [`ElectionActor`]).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::election::ElectionError> {
/// use actix_zookeeper::election::{ElectionConfig, ElectionHandle};
///
/// let election = ElectionHandle::start(session, ElectionConfig::new("/services/billing/leader"))?;
/// let term = election.leadership().await?; // like Curator's LeaderLatch.await()
/// println!("leading with token {}", term.token);
/// election.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ElectionHandle {
    addr: Addr<ElectionActor>,
    path: String,
    health: HealthTag,
}

impl ElectionHandle {
    /// Starts an [`ElectionActor`] for `config` on the session's Arbiter (its node's replies
    /// and events then cross no thread); it enters the election at once. Its leader actors
    /// ([`ElectionConfig::with_leader_actor`]) start on the current Arbiter, where the factory
    /// was made. A path that is not valid is [`ElectionError::ZooKeeper`] with
    /// [`Error::InvalidPath`](crate::Error::InvalidPath), and nothing starts.
    pub fn start(session: SessionHandle, config: ElectionConfig) -> Result<ElectionHandle, ElectionError> {
        crate::path::validate(config.path(), false)?;
        let path = config.path().to_owned();
        // Everything but the factory crosses as it is; the factory stays here, behind a launcher.
        let ElectionConfig { path: dir, participation, requeue_after_loss, leader, leader_stop_timeout } = config;
        let leader = leader.map(|Opaque(factory)| launched_here(factory));
        let (addr, health) = start_host(&session.clone(), move || {
            let leader = leader.map(|factory| Opaque(factory as LeaderFactory));
            let config = ElectionConfig { path: dir, participation, requeue_after_loss, leader, leader_stop_timeout };
            ElectionActor::new(session, config)
        });
        Ok(ElectionHandle { addr, path, health })
    }

    /// A handle to a running participant of the election at `path`.
    pub fn new(addr: Addr<ElectionActor>, path: impl Into<String>) -> ElectionHandle {
        ElectionHandle { addr, path: path.into(), health: HealthTag::default() }
    }

    fn ask<M>(&self, msg: M) -> impl Future<Output = Result<M::Result, ElectionError>> + 'static + use<M>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        ElectionActor: Handler<M>,
    {
        crate::reply::ask(&self.addr, msg, ElectionError::Stopped { path: self.path.clone() })
    }

    /// Sent as a `Told`: carried out whether or not the caller still waits.
    fn tell<M>(&self, msg: M) -> impl Future<Output = Result<M::Result, ElectionError>> + 'static + use<M>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        ElectionActor: Handler<Told<M>>,
    {
        crate::reply::tell(&self.addr, msg, ElectionError::Stopped { path: self.path.clone() })
    }

    /// Resolves with the term once this participant leads (at once when it does).
    /// [`ElectionError::NotParticipating`] when it has left the line.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping it only stops the wait; the participant stays in line as it was.
    pub fn leadership(&self) -> impl Future<Output = Result<LeaderTerm, ElectionError>> + 'static {
        let asked = self.ask(Leadership);
        async move { asked.await? }
    }

    /// Leaves the election (a leader hears `LeadershipLost { Resigned }` first); resolves once
    /// our node is deleted. [`join`](Self::join) enters again.
    ///
    /// # Cancel safety
    /// The resign is sent when this is called: dropping the future does not stop it.
    pub fn resign(&self) -> impl Future<Output = Result<(), ElectionError>> + 'static {
        let asked = self.tell(Resign { requeue: false });
        async move { asked.await? }
    }

    /// Gives leadership up and stands in line again at the back (a graceful hand-off).
    ///
    /// # Cancel safety
    /// Sent when this is called: dropping the future does not stop the resign or the requeue.
    pub fn resign_and_requeue(&self) -> impl Future<Output = Result<(), ElectionError>> + 'static {
        let asked = self.tell(Resign { requeue: true });
        async move { asked.await? }
    }

    /// Enters the election again after a [`resign`](Self::resign) (or a failure).
    ///
    /// # Cancel safety
    /// Sent when this is called: dropping the future does not stop the join.
    pub fn join(&self) -> impl Future<Output = Result<(), ElectionError>> + 'static {
        self.tell(Join)
    }

    /// Publishes `value` for this participant's current term (etcd's `Proclaim`): every
    /// [`ElectionObserver`](super::ElectionObserver) then tells `(leader id, term, value)`.
    /// Fenced by the term: [`ElectionError::NotLeader`] when this participant does not lead (or
    /// was deposed; nothing is written), [`ElectionError::OutcomeUnknown`] when the connection
    /// dropped with the write in flight. Changing the value needs no new election.
    ///
    /// # Cancel safety
    /// Sent when this is called: dropping the future does not withdraw the write.
    pub fn proclaim(&self, value: impl Into<Vec<u8>>) -> impl Future<Output = Result<(), ElectionError>> + 'static {
        let asked = self.tell(Proclaim { value: value.into() });
        async move { asked.await? }
    }

    /// The leader's participant id, read from ZooKeeper now; `None` when nobody is in line.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read; dropping it leaves nothing behind.
    pub fn leader(&self) -> impl Future<Output = Result<Option<String>, ElectionError>> + 'static {
        let asked = self.ask(CurrentLeader);
        async move { asked.await? }
    }

    /// Every participant id in line order (the leader first), read from ZooKeeper now.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read; dropping the future loses only the answer.
    pub fn participants(&self) -> impl Future<Output = Result<Vec<String>, ElectionError>> + 'static {
        let asked = self.ask(Participants);
        async move { asked.await? }
    }

    crate::recipe::handle::handle_basics!(ElectionActor => ElectionEvent, subscribed: ", who leads first if that is known");

    /// Leaves the election and stops the participant. Sent when called; the future resolves
    /// once our node is deleted (after the leader actor has stopped, at most the config's
    /// `leader_stop_timeout`) and the participant has stopped. A leader hears
    /// `LeadershipLost { Resigned }` first. While ZooKeeper cannot be reached, the delete is
    /// retried and the stop waits with it (stopping without it would leave the node to the
    /// session's expiry); bound the wait with a timeout if you must.
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future stops the participant all the
    /// same, and only the wait is lost.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        self.addr.do_send(ResignAndStop);
        crate::stop::stopped(&self.addr)
    }
}
