//! [`LockHandle`] and [`SemaphoreHandle`]: async methods over a lock or semaphore actor, for
//! programs that want answers rather than messages.
//!
//! Owns: turning each request into one message and its reply into a `Result` (a stopped actor
//! is [`LockError::Stopped`], never a mailbox error to unwrap), and cancel safety: a request the
//! handle sends carries a reply channel the handle's future owns (`recipe::reply::Asked`), so a
//! dropped future is seen by the actor at once (its attempt leaves the line), and a grant that
//! reached a future dropped before it returned it is given back ([`GiveBack`]). Does not own any
//! state: the actor does.
//!
//! A handle holds a strong address: the actor lives while a handle (or another address) does,
//! and dropping the last one stops it, which releases what it held.
//!
//! Tasks that share a handle (one `LockHandle` in an actix-web app's state, used by every
//! request) exclude each other ([`Turn`]): a second `acquire` waits until the first caller
//! releases, as with a `tokio::sync::Mutex` around the distributed lock. Re-entrancy is asked
//! for explicitly (`acquire_reentrant`).

use std::future::Future;
use std::time::Duration;

use actix::prelude::*;

use super::actor::LockActor;
use super::config::{LockConfig, SemaphoreConfig};
use super::error::LockError;
use super::grant::LockGrant;
use super::messages::{Acquire, GiveBack, LockEvent, Participants, Release, ReleaseAndStop, TryAcquire};
use super::semaphore::SemaphoreActor;
use super::turn::Turn;
use crate::recipe::FencingToken;
use crate::recipe::holder::CallerGone;
use crate::recipe::holder::start_host;
use crate::reply::{Asked, Told};
use crate::session::SessionHandle;
use crate::session::health::HealthTag;

/// A cloneable handle to one participant of a lock (a [`LockActor`]).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::lock::LockError> {
/// use std::time::Duration;
/// use actix_zookeeper::lock::{LockConfig, LockHandle};
///
/// let lock = LockHandle::start(session.clone(), LockConfig::new("/locks/report"))?;
/// let grant = lock.acquire(Some(Duration::from_secs(10))).await?;
/// println!("holding {} with token {}", grant.node, grant.token);
/// lock.release().await?;
///
/// // Or with a guard, which releases when dropped:
/// let guard = lock.lock(Some(Duration::from_secs(10))).await?;
/// println!("token {}", guard.token);
/// guard.release().await?; // or just drop it
/// # Ok(()) }
/// ```
///
/// Clones share one participant, and the tasks that use them exclude each other: while one
/// caller holds the lock, another's `acquire` waits for its `release` (or its guard's drop).
#[derive(Clone, Debug)]
pub struct LockHandle {
    addr: Addr<LockActor>,
    dir: String,
    turn: Turn,
    health: HealthTag,
}

impl LockHandle {
    /// Starts a [`LockActor`] for `config` on the session's Arbiter (it answers your tasks
    /// wherever they run; its node's replies and events then cross no thread). A directory that is not a
    /// valid path is [`LockError::ZooKeeper`] with [`Error::InvalidPath`](crate::Error::InvalidPath),
    /// and nothing starts.
    pub fn start(session: SessionHandle, config: LockConfig) -> Result<LockHandle, LockError> {
        crate::path::validate(config.dir(), false)?;
        let dir = config.dir().to_owned();
        let (addr, health) = start_host(&session.clone(), move || LockActor::new(session, config));
        Ok(LockHandle { addr, dir, turn: Turn::new(), health })
    }

    /// A handle to a running actor of the lock at `dir`. Its callers exclude each other, and
    /// its clones', not those of another handle made from the same address.
    pub fn new(addr: Addr<LockActor>, dir: impl Into<String>) -> LockHandle {
        LockHandle { addr, dir: dir.into(), turn: Turn::new(), health: HealthTag::default() }
    }

    /// The lock directory.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// Waits for the lock, at most `timeout` if given (our node is deleted when it passes).
    /// Another task holding it through this handle (or a clone): waits for its release first,
    /// as for any other holder. Pair every `acquire` with a [`release`](Self::release), or use
    /// [`lock`](Self::lock), whose guard releases when dropped.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropped while waiting (a `tokio::time::timeout`, a `select!`), its node leaves
    /// the line and the next `acquire` on this handle starts at once; dropped with the grant in
    /// hand, the grant is given back.
    pub fn acquire(&self, timeout: Option<Duration>) -> impl Future<Output = Result<LockGrant, LockError>> + 'static {
        acquire_in_turn(&self.addr, &self.dir, &self.turn, timeout, Reentry::Wait)
    }

    /// [`acquire`](Self::acquire), as a guard that releases the lock when dropped (the release
    /// is sent at the drop; [`LockGuard::release`] awaits it).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub fn lock(&self, timeout: Option<Duration>) -> impl Future<Output = Result<LockGuard, LockError>> + 'static {
        let (acquired, handle) = (self.acquire(timeout), self.clone());
        async move { Ok(LockGuard { grant: acquired.await?, handle: Some(handle) }) }
    }

    /// Re-entrant: the grant this participant holds now, at once, whichever task took it (code
    /// that already holds the lock and calls a function that locks it again); when no task of
    /// this handle holds or waits for it, as [`acquire`](Self::acquire). One
    /// [`release`](Self::release) ends the grant, however many times it was taken.
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire); a grant that was held when this call was made stays held
    /// when its future is dropped.
    pub fn acquire_reentrant(
        &self,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<LockGrant, LockError>> + 'static {
        acquire_in_turn(&self.addr, &self.dir, &self.turn, timeout, Reentry::Share)
    }

    /// Takes the lock only if it is free now: `Ok(None)` when someone else holds it (our node is
    /// deleted by then), or another task holds it (or waits for it) through this handle.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropped before it resolved, its node is withdrawn and a grant it was about to
    /// return is given back.
    pub fn try_acquire(&self) -> impl Future<Output = Result<Option<LockGrant>, LockError>> + 'static {
        let Some(permit) = self.turn.try_take() else {
            return futures::future::Either::Left(futures::future::ready(Ok(None)));
        };
        let (asked, turn) = (
            ask(&self.addr, &self.dir, TryAcquire, |grant: &Option<LockGrant>| grant.as_ref().map(|grant| grant.token)),
            self.turn.clone(),
        );
        futures::future::Either::Right(async move {
            let taken = asked.await?;
            if taken.is_some() {
                turn.keep(permit);
            }
            Ok(taken)
        })
    }

    /// Gives the lock up (or stops waiting for it); resolves once our node is deleted.
    /// [`LockError::Lost`] when the lock had been lost before. The next task waiting on this
    /// handle goes on at once (its request reaches the actor after this release).
    ///
    /// # Cancel safety
    /// Dropping the future does not stop the release: the node is deleted all the same.
    pub fn release(&self) -> impl Future<Output = Result<(), LockError>> + 'static {
        let released = release(&self.addr, &self.dir);
        self.turn.give_back();
        released
    }

    /// The participant id of the holder (for a read/write lock: of the first node in line),
    /// read from ZooKeeper now; `None` when nobody holds or waits.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read; dropping the future loses only the answer.
    pub fn holder(&self) -> impl Future<Output = Result<Option<String>, LockError>> + 'static {
        let ids = participants(&self.addr, &self.dir);
        async move { Ok(ids.await?.into_iter().next()) }
    }

    /// Every participant id in line order, the holder first, read from ZooKeeper now.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read; dropping the future loses only the answer.
    pub fn participants(&self) -> impl Future<Output = Result<Vec<String>, LockError>> + 'static {
        participants(&self.addr, &self.dir)
    }

    crate::recipe::handle::handle_basics!(LockActor => LockEvent);

    /// Gives back what it holds (or leaves the line) and stops the actor. Sent when called; the
    /// future resolves once our node is deleted and the actor has stopped. While ZooKeeper
    /// cannot be reached, the delete is retried and the stop waits with it.
    ///
    /// # Cancel safety
    /// The stop is sent when this is called: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        stop(&self.addr, &self.turn)
    }
}

/// The lock (or a semaphore's lease), held by the task that has this guard: dropping it releases
/// (the release is sent at the drop, not awaited); [`release`](Self::release) awaits it.
/// Derefs to its [`LockGrant`] (the node and the fencing token).
#[must_use = "dropping the guard releases the lock at once"]
#[derive(Debug)]
pub struct LockGuard {
    grant: LockGrant,
    /// `None` once released through [`release`](Self::release).
    handle: Option<LockHandle>,
}

impl LockGuard {
    /// The grant: the node and its fencing token.
    pub fn grant(&self) -> &LockGrant {
        &self.grant
    }

    /// Releases the lock and waits until our node is deleted (see [`LockHandle::release`]).
    pub async fn release(mut self) -> Result<(), LockError> {
        match self.handle.take() {
            Some(handle) => handle.release().await,
            None => Ok(()),
        }
    }
}

impl std::ops::Deref for LockGuard {
    type Target = LockGrant;

    fn deref(&self) -> &LockGrant {
        &self.grant
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            // Sent now (the release is a `Told`): it applies whether or not anyone awaits it.
            drop(handle.release());
        }
    }
}

/// A cloneable handle to one participant of a counting semaphore (a [`SemaphoreActor`]).
///
/// ```no_run
/// # async fn demo(session: actix_zookeeper::SessionHandle) -> Result<(), actix_zookeeper::lock::LockError> {
/// use actix_zookeeper::lock::{SemaphoreConfig, SemaphoreHandle};
///
/// let pool = SemaphoreHandle::start(session, SemaphoreConfig::new("/pools/db", 3))?;
/// let lease = pool.acquire(None).await?;
/// println!("one of 3 leases: {}", lease.node);
/// pool.release().await?;
/// # Ok(()) }
/// ```
///
/// A participant holds one lease: tasks that share a handle (or its clones) take it in turn, as
/// with [`LockHandle`]. Start one participant per lease a process wants to hold at once.
#[derive(Clone, Debug)]
pub struct SemaphoreHandle {
    addr: Addr<SemaphoreActor>,
    dir: String,
    turn: Turn,
    health: HealthTag,
}

impl SemaphoreHandle {
    /// Starts a [`SemaphoreActor`] for `config` on the session's Arbiter (as a lock's). A directory that is
    /// not a valid path is [`LockError::ZooKeeper`] with
    /// [`Error::InvalidPath`](crate::Error::InvalidPath), no lease at all is
    /// [`LockError::InvalidConfig`], and nothing starts.
    pub fn start(session: SessionHandle, config: SemaphoreConfig) -> Result<SemaphoreHandle, LockError> {
        crate::path::validate(config.dir(), false)?;
        if config.max_leases() == 0 {
            return Err(LockError::InvalidConfig {
                dir: config.dir().to_owned(),
                reason: "a semaphore needs at least one lease".into(),
            });
        }
        let dir = config.dir().to_owned();
        let (addr, health) = start_host(&session.clone(), move || SemaphoreActor::new(session, config));
        Ok(SemaphoreHandle { addr, dir, turn: Turn::new(), health })
    }

    /// A handle to a running actor of the semaphore at `dir`.
    pub fn new(addr: Addr<SemaphoreActor>, dir: impl Into<String>) -> SemaphoreHandle {
        SemaphoreHandle { addr, dir: dir.into(), turn: Turn::new(), health: HealthTag::default() }
    }

    /// Waits for a lease, at most `timeout` if given; another task holding this participant's
    /// lease: waits for its release first. Dropping the future gives back a lease it received
    /// but did not return.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`LockHandle::acquire`]: dropped while waiting, its attempt leaves
    /// the line (its nodes are deleted); dropped with the lease in hand, the lease is given back.
    pub fn acquire(&self, timeout: Option<Duration>) -> impl Future<Output = Result<LockGrant, LockError>> + 'static {
        acquire_in_turn(&self.addr, &self.dir, &self.turn, timeout, Reentry::Wait)
    }

    /// Re-entrant: the lease this participant holds now, at once (see
    /// [`LockHandle::acquire_reentrant`]).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire); a lease held when this call was made stays held.
    pub fn acquire_reentrant(
        &self,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<LockGrant, LockError>> + 'static {
        acquire_in_turn(&self.addr, &self.dir, &self.turn, timeout, Reentry::Share)
    }

    /// Gives the lease back (or stops waiting for one); resolves once its node is deleted.
    ///
    /// # Cancel safety
    /// Dropping the future does not stop the release: the lease node is deleted all the
    /// same.
    pub fn release(&self) -> impl Future<Output = Result<(), LockError>> + 'static {
        let released = release(&self.addr, &self.dir);
        self.turn.give_back();
        released
    }

    crate::recipe::handle::handle_basics!(SemaphoreActor => LockEvent);

    /// The participant ids of the lease nodes in line order (holders first), read now.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read; dropping the future loses only the answer.
    pub fn participants(&self) -> impl Future<Output = Result<Vec<String>, LockError>> + 'static {
        participants(&self.addr, &self.dir)
    }

    /// Gives back its lease (or leaves the line) and stops the actor, as [`LockHandle::stop`]:
    /// resolves once its nodes are deleted and the actor has stopped.
    ///
    /// # Cancel safety
    /// As [`LockHandle::stop`]: dropping the future loses only the wait.
    pub fn stop(&self) -> impl Future<Output = ()> + 'static {
        stop(&self.addr, &self.turn)
    }
}

/// An actor that answers a handle's `acquire` (the lock's, the semaphore's).
trait Acquires: Actor<Context = Context<Self>> + Handler<Asked<Acquire>> + Handler<GiveBack> + Handler<CallerGone> {}

impl<A> Acquires for A where
    A: Actor<Context = Context<A>> + Handler<Asked<Acquire>> + Handler<GiveBack> + Handler<CallerGone>
{
}

/// `stop`: sent at the call; the turn is given back with what the participant held.
fn stop<A>(addr: &Addr<A>, turn: &Turn) -> impl Future<Output = ()> + 'static + use<A>
where
    A: Actor<Context = Context<A>> + Handler<ReleaseAndStop> + Handler<crate::stop::AwaitStopped>,
{
    addr.do_send(ReleaseAndStop);
    turn.give_back();
    crate::stop::stopped(addr)
}

/// What an acquire does while another task of the same handle has the turn.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reentry {
    /// Waits for the turn (`acquire`).
    Wait,
    /// Takes the grant this participant holds, at once (`acquire_reentrant`).
    Share,
}

/// `acquire` in this handle's turn: waits for the turn (at most `timeout`), then for the grant
/// (at most what is left of `timeout`), and keeps the turn until the release; while a task of
/// this handle has the turn, `reentry` says whether to wait for it or share the held grant.
fn acquire_in_turn<A: Acquires>(
    addr: &Addr<A>,
    dir: &str,
    turn: &Turn,
    timeout: Option<Duration>,
    reentry: Reentry,
) -> impl Future<Output = Result<LockGrant, LockError>> + 'static + use<A> {
    use futures::future::Either::{Left, Right};
    // The turn free now: sent at the call, as every request of a handle is (a caller that
    // polls later still stands in line from now).
    if let Some(permit) = turn.try_take() {
        let (asked, turn) = (acquire(addr, dir, timeout), turn.clone());
        return Left(Left(async move {
            let grant = asked.await?;
            turn.keep(permit);
            Ok(grant)
        }));
    }
    if reentry == Reentry::Share {
        return Left(Right(acquire(addr, dir, timeout)));
    }
    let (addr, dir, turn) = (addr.clone(), dir.to_owned(), turn.clone());
    Right(async move {
        let asked_at = std::time::Instant::now();
        let Some(permit) = turn.wait(timeout).await else {
            return Err(LockError::Timeout { dir, after: timeout.unwrap_or_default() });
        };
        let left = timeout.map(|timeout| timeout.saturating_sub(asked_at.elapsed()));
        // Our turn: a grant this participant holds now was released by the task before us (its
        // release is ahead of this request in the actor's mailbox), so this waits for a new one.
        let grant = acquire(&addr, &dir, left).await?;
        turn.keep(permit);
        Ok(grant)
    })
}

/// A lock-shaped request sent through the handle's own reply channel: dropped before it resolved,
/// whatever grant it finds there is given back, and without one the actor is told its caller went
/// (so the attempt leaves the line now, not at the actor's next check).
fn ask<A, M, T>(
    addr: &Addr<A>,
    dir: &str,
    request: M,
    grant_of: fn(&T) -> Option<FencingToken>,
) -> impl Future<Output = Result<T, LockError>> + 'static + use<A, M, T>
where
    A: Actor<Context = Context<A>> + Handler<Asked<M>> + Handler<GiveBack> + Handler<CallerGone>,
    M: Message<Result = Result<T, LockError>> + Send + 'static,
    T: Send + 'static,
{
    let giver = addr.clone();
    let (asked, answer) = Asked::new(request, move |unread: Option<Result<T, LockError>>| {
        match unread.as_ref().and_then(|outcome| outcome.as_ref().ok()).and_then(grant_of) {
            Some(token) => giver.do_send(GiveBack { token }),
            None => giver.do_send(CallerGone),
        }
    });
    addr.do_send(asked);
    let dir = dir.to_owned();
    async move { answer.await.unwrap_or(Err(LockError::Stopped { dir })) }
}

fn acquire<A: Acquires>(
    addr: &Addr<A>,
    dir: &str,
    timeout: Option<Duration>,
) -> impl Future<Output = Result<LockGrant, LockError>> + 'static + use<A> {
    ask(addr, dir, Acquire { timeout }, |grant: &LockGrant| Some(grant.token))
}

/// Sent as [`Told`]: a release dropped before the actor took it still releases.
fn release<A>(addr: &Addr<A>, dir: &str) -> impl Future<Output = Result<(), LockError>> + 'static
where
    A: Actor<Context = Context<A>> + Handler<Told<Release>>,
{
    let (told, reply) = Told::new(Release);
    addr.do_send(told);
    let dir = dir.to_owned();
    async move { reply.await.map_err(|_| LockError::Stopped { dir })? }
}

fn participants<A>(addr: &Addr<A>, dir: &str) -> impl Future<Output = Result<Vec<String>, LockError>> + 'static
where
    A: Actor<Context = Context<A>> + Handler<Participants>,
{
    let reply = addr.send(Participants);
    let dir = dir.to_owned();
    async move { reply.await.map_err(|_| LockError::Stopped { dir })? }
}
