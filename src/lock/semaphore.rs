//! [`SemaphoreActor`]: one participant of a counting semaphore (Curator's
//! `InterProcessSemaphoreV2`).
//!
//! Owns: the two contenders of an attempt (the guard mutex, then the lease) and wording what
//! the holder core decides as lock requests and [`LockEvent`]s. Does not own the node protocol
//! (the contenders') or any decision about holding (the holder core's, `recipe::holder`).
//!
//! Protocol (Curator's): take the guard mutex at `<dir>/locks`; create a protected lease node
//! `<dir>/leases/_c_<uuid>-lease-<seq>`; the lease is held while fewer than `max_leases` lease
//! nodes sort before it; otherwise wait, still holding the guard, for the lease directory's
//! children to change. Once the lease is held, give the guard back. Only the guard's holder
//! watches the lease directory, so a returned lease wakes one waiter, not all. The guard matters
//! only until the lease is held: what happens to it afterwards (a loss in the same expiry that
//! ends the lease, say) is not the lease's business.

use actix::prelude::*;

use super::config::SemaphoreConfig;
use super::error::LockError;
use super::grant::LockGrant;
use super::holding::{self, LockWaiter};
use super::messages::{Acquire, LockEvent, Participants};
use crate::path;
use crate::recipe::holder::{self, Attempt, ContenderSlot, Happened, Holder, HolderHost};
use crate::recipe::naming::{LEASE_NAME, LOCK_NAME, Rule};
use crate::recipe::shell::Shell;
use crate::recipe::{ContenderEvent, ContenderReport, Reply};
use crate::session::SessionHandle;

// Where `SemaphoreActor::slots` keeps the guard's contender and the lease's.
const GUARD: usize = 0;
const LEASE: usize = 1;

/// One participant of a counting semaphore; answers [`Acquire`] with a [`LockGrant`] for its
/// lease node, and [`Release`](super::Release) by deleting it. The protocol is
/// Curator's; see the [lock module](super) docs.
pub struct SemaphoreActor {
    config: SemaphoreConfig,
    holder: Holder<LockGrant, LockWaiter>,
    /// The attempt whose contenders these are.
    attempt: Attempt,
    /// The guard's contender (`slots[GUARD]`), then the lease's (`slots[LEASE]`).
    slots: [ContenderSlot; 2],
    /// Kept last: its lifeline must drop after everything else the actor holds.
    shell: Shell<LockEvent>,
}

impl SemaphoreActor {
    /// A semaphore participant; start it with `.start()`.
    pub fn new(session: SessionHandle, config: SemaphoreConfig) -> Self {
        let span = tracing::info_span!("zk.semaphore", dir = %config.dir, max = config.max_leases);
        let holder = Holder::new(config.participation.policy, true, false);
        SemaphoreActor {
            shell: Shell::new(session, span, config.participation.retry),
            config,
            holder,
            attempt: 0,
            slots: [ContenderSlot::new(), ContenderSlot::new()],
        }
    }

    // Guard and lease contenders of attempt `n` carry tags 2n and 2n+1.
    fn on_guard(&mut self, event: ContenderEvent, ctx: &mut Context<Self>) {
        // Once the lease is held (or given up) the guard is being given back: nothing it says
        // concerns the lease.
        if !self.holder.is_acquiring(self.attempt) {
            return;
        }
        let effects = match event {
            ContenderEvent::Granted { .. } => {
                if !self.slots[LEASE].holds(self.attempt) {
                    let leases = path::join(&self.config.dir, "leases");
                    let rule = Rule::Leases(self.config.max_leases);
                    let spec = self.spec(2 * self.attempt + 1, leases, LEASE_NAME, rule);
                    self.slots[LEASE].start(self.attempt, self.shell.session(), spec, ctx);
                }
                Vec::new()
            }
            ContenderEvent::Waiting { .. } => Vec::new(),
            // The guard went away before a lease was granted (session expired while waiting):
            // start over, keeping the caller.
            ContenderEvent::Lost { .. } => self.holder.restart(self.attempt),
            ContenderEvent::Failed { error } => self.holder.failed(self.attempt, error),
            // Not revocable (Curator's semaphore is not either).
            ContenderEvent::RevocationRequested { .. } => Vec::new(),
        };
        holder::run(self, effects, ctx);
    }

    fn on_lease(&mut self, event: ContenderEvent, ctx: &mut Context<Self>) {
        if let ContenderEvent::Granted { .. } | ContenderEvent::Failed { .. } = event {
            // The guard has done its work (or cannot do it any more): give it back now,
            // whatever the lease's fate.
            self.slots[GUARD].let_go(self.attempt, ctx);
        }
        let attempt = self.attempt;
        holder::report(self, attempt, event, ctx);
    }
}

impl HolderHost for SemaphoreActor {
    crate::recipe::holder::host_parts!(LockGrant, LockWaiter, Semaphore at dir);

    fn begin(&mut self, attempt: Attempt, ctx: &mut Context<Self>) {
        self.attempt = attempt;
        let guards = path::join(&self.config.dir, "locks");
        let spec = self.spec(2 * attempt, guards, LOCK_NAME, Rule::Exclusive);
        self.slots[GUARD].start(attempt, self.shell.session(), spec, ctx);
    }

    fn slots(&mut self) -> &mut [ContenderSlot] {
        &mut self.slots
    }

    fn stand_down(&mut self, attempt: Attempt, ctx: &mut Context<Self>) {
        // The core deletes the lease; the guard, if still held, is given back here.
        self.slots[LEASE].stand_down(attempt, ctx);
        self.slots[GUARD].let_go(attempt, ctx);
    }

    fn tell(&mut self, happened: Happened<LockGrant>, _: &mut Context<Self>) {
        if let Some(event) = holding::event(&self.config.participation.id, happened) {
            self.shell.tell(event);
        }
    }
}

holding::answers_lock_requests!(SemaphoreActor);

impl Handler<Acquire> for SemaphoreActor {
    type Result = Reply<Result<LockGrant, LockError>>;

    fn handle(&mut self, msg: Acquire, ctx: &mut Context<Self>) -> Self::Result {
        let dir = self.config.dir.clone();
        if self.config.max_leases == 0 {
            return Reply::Now(Err(LockError::InvalidConfig {
                dir,
                reason: "a semaphore needs at least one lease".into(),
            }));
        }
        holding::acquire(self, &dir, msg.timeout, ctx)
    }
}

impl Handler<Participants> for SemaphoreActor {
    type Result = ResponseFuture<Result<Vec<String>, LockError>>;

    fn handle(&mut self, _: Participants, _: &mut Context<Self>) -> Self::Result {
        holding::participants(self.shell.session(), path::join(&self.config.dir, "leases"))
    }
}

impl Handler<ContenderReport> for SemaphoreActor {
    type Result = ();

    fn handle(&mut self, report: ContenderReport, ctx: &mut Context<Self>) {
        if report.tag / 2 != self.attempt {
            return;
        }
        if report.tag % 2 == 0 { self.on_guard(report.event, ctx) } else { self.on_lease(report.event, ctx) }
    }
}

crate::recipe::shell::on_the_shell!(SemaphoreActor => LockEvent, Subscribe);
