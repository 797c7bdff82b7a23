//! [`Lease`]: until when the live session is certainly alive on the server, as this process
//! can prove it, on a monotonic clock.
//!
//! Owns: the rule that turns the session's replies into a deadline, and the deadline's reads.
//! Does not own sending the requests (the session actor does, including the heartbeat that keeps
//! an idle lease fresh) or what a recipe's grant means (a [`Fence`](crate::recipe::Fence) asks its
//! lease, and adds whether the grant itself has ended).
//!
//! # The rule
//! The quorum's leader tracks sessions: it expires one a session timeout after the last renewal
//! it knows of (later, never earlier: it rounds expiries up to its tick). Only what the leader
//! handled proves it alive there, so only the answers to requests that go through the leader
//! renew the lease: writes (`create`, `delete`, `setData`, `multi`) and `sync`. A read can be
//! answered by a follower that has lost the leader for many ticks, so reads renew nothing. A
//! request arrived after it was *sent*, so the session lives at least until
//!
//! ```text
//! valid_until = (send time of the latest such request the server answered) + negotiated timeout - margin
//! ```
//!
//! measured on this process's monotonic clock ([`Instant`]), which keeps running while the
//! process is paused, so a process stopped past its deadline finds the deadline passed the
//! moment it runs again. The `margin` (default: three tenths of the negotiated timeout,
//! [`SessionConfig::with_lease_margin`](super::SessionConfig::with_lease_margin)) covers what
//! the leader learns late: a follower forwards a session's renewal with its next answer to the
//! leader's ping, up to half a tick later, and a tick is at most half the negotiated timeout by
//! ZooKeeper's defaults (a server whose `minSessionTimeout` allows less needs a larger margin);
//! it also covers the two machines' clock rates and the time from a check to the work it
//! guards. In figures: the leader pings its followers every half tick, and a tick is at most
//! half the negotiated timeout (`minSessionTimeout` is two ticks), so a renewal through a
//! follower reaches the leader up to a quarter of the timeout late; the default three tenths
//! leave a twentieth for the rest.
//!
//! The span is the timeout negotiated on the latest connect. A reconnect of the same session to
//! a server with a lower `maxSessionTimeout` renegotiates a shorter one, and the server counts
//! the session's life from that reconnect with it; every renewal the lease counts from was sent
//! before, so the new span applies at once (zookeeper-client 0.11.2 is patched to tell the
//! renegotiated value: `vendor/zookeeper-client/PATCHED.md`). What is left is the time between
//! the server's answer to the reconnect and the session reading it, one hop on this machine.
//! Replies that do not come from the server (a lost connection, a timeout) renew
//! nothing; a read-only server renews nothing (it is not in the quorum); the moment the
//! session is known to have ended the lease is gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::events::SessionId;

/// The live session's lease: until when it is certainly alive on the server. Cheap to clone
/// (every clone reads the same lease); get it from
/// [`SessionHandle::lease`](super::SessionHandle::lease). Every grant and term a recipe hands out
/// carries it ([`Fence::valid_until`](crate::recipe::Fence::valid_until)).
#[derive(Clone)]
pub struct Lease {
    cell: Arc<Cell>,
}

struct Cell {
    /// What every instant is stored relative to.
    base: Instant,
    /// The session the lease is for; 0 while none is live.
    session: AtomicI64,
    /// Nanoseconds since `base` at which the latest request the server answered was sent.
    heard: AtomicU64,
    /// The negotiated session timeout minus the margin, in nanoseconds.
    span: AtomicU64,
    /// Somebody has read the lease: the session keeps it fresh from then on (a heartbeat when
    /// no other request renews it), and only then, so that unread leases cost no requests.
    wanted: AtomicBool,
    /// Connected to a read-only server: nothing renews the lease.
    read_only: AtomicBool,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("session", &SessionId(self.cell.session.load(Ordering::SeqCst)))
            .field("remaining", &self.remaining())
            .finish()
    }
}

impl Lease {
    /// A lease for no session yet.
    pub(crate) fn new() -> Lease {
        Lease {
            cell: Arc::new(Cell {
                base: Instant::now(),
                session: AtomicI64::new(0),
                heard: AtomicU64::new(0),
                span: AtomicU64::new(0),
                wanted: AtomicBool::new(false),
                read_only: AtomicBool::new(false),
            }),
        }
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.cell.base).as_nanos()).unwrap_or(u64::MAX)
    }

    /// A new session `id` began; its connect request was sent at `sent`.
    pub(crate) fn began(&self, id: SessionId, sent: Instant, timeout: Duration, margin: Duration) {
        let span = timeout.saturating_sub(margin);
        // `session` last: a reader that sees the new id sees this session's numbers.
        self.cell.session.store(0, Ordering::SeqCst);
        self.cell.heard.store(self.nanos(sent), Ordering::SeqCst);
        self.cell.span.store(u64::try_from(span.as_nanos()).unwrap_or(u64::MAX), Ordering::SeqCst);
        self.cell.session.store(id.0, Ordering::SeqCst);
    }

    /// The session `id` reconnected and negotiated `timeout`: the same renewals, a new span.
    pub(crate) fn respan(&self, id: SessionId, timeout: Duration, margin: Duration) {
        if self.cell.session.load(Ordering::SeqCst) == id.0 {
            let span = timeout.saturating_sub(margin);
            self.cell.span.store(u64::try_from(span.as_nanos()).unwrap_or(u64::MAX), Ordering::SeqCst);
        }
    }

    /// The connection is to a read-only server (`true`), or to one in the quorum again.
    pub(crate) fn read_only(&self, read_only: bool) {
        self.cell.read_only.store(read_only, Ordering::SeqCst);
    }

    /// The leader handled a request of session `id` sent at `sent` (a write or a `sync` was
    /// answered).
    pub(crate) fn heard(&self, id: SessionId, sent: Instant) {
        if self.cell.read_only.load(Ordering::SeqCst) {
            return;
        }
        if self.cell.session.load(Ordering::SeqCst) == id.0 {
            self.cell.heard.fetch_max(self.nanos(sent), Ordering::SeqCst);
        }
    }

    /// The session `id` ended (expired or closed): its lease is gone.
    pub(crate) fn ended(&self, id: SessionId) {
        let _ = self.cell.session.compare_exchange(id.0, 0, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Every session ended (the session actor closed).
    pub(crate) fn closed(&self) {
        self.cell.session.store(0, Ordering::SeqCst);
    }

    /// True once somebody read the lease: the session keeps it fresh.
    /// A grant rests on this lease: keep it fresh from now on, as after a read, so that a
    /// holder idle for longer than the lease does not read `is_current() == false` first.
    pub(crate) fn want(&self) {
        self.cell.wanted.store(true, Ordering::Relaxed);
    }

    pub(crate) fn is_wanted(&self) -> bool {
        self.cell.wanted.load(Ordering::Relaxed)
    }

    /// When the server last certainly heard from the live session (the send time of the latest
    /// request it answered); `None` while no session is live.
    pub fn last_heard(&self) -> Option<Instant> {
        self.read(None, true).map(|(heard, _)| heard)
    }

    /// [`last_heard`](Self::last_heard) and [`valid_until`](Self::valid_until) for a report
    /// (health): read without asking the session to keep the lease fresh.
    pub(crate) fn peek(&self) -> Option<(Instant, Instant)> {
        self.read(None, false).map(|(heard, span)| (heard, heard + span))
    }

    /// Until when the session `id` is certainly alive on the server; `None` once it has ended
    /// (or before it began).
    pub fn valid_until_for(&self, id: SessionId) -> Option<Instant> {
        self.read(Some(id), true).map(|(heard, span)| heard + span)
    }

    /// Until when the live session is certainly alive on the server; `None` while no session
    /// is live.
    pub fn valid_until(&self) -> Option<Instant> {
        self.read(None, true).map(|(heard, span)| heard + span)
    }

    /// How long the live session is still certainly alive: zero once the deadline passed,
    /// `None` while no session is live.
    pub fn remaining(&self) -> Option<Duration> {
        self.valid_until().map(|until| until.saturating_duration_since(Instant::now()))
    }

    /// When the session (`id`, or whichever is live) was last heard from, and the span; both of
    /// one session, or `None` when no such session is live. `wanted`: from now on the session keeps
    /// the lease fresh (a read for a report leaves that as it is).
    fn read(&self, id: Option<SessionId>, wanted: bool) -> Option<(Instant, Duration)> {
        if wanted {
            self.cell.wanted.store(true, Ordering::Relaxed);
        }
        let before = self.cell.session.load(Ordering::SeqCst);
        if before == 0 || id.is_some_and(|id| id.0 != before) {
            return None;
        }
        let heard = self.cell.heard.load(Ordering::SeqCst);
        let span = self.cell.span.load(Ordering::SeqCst);
        // A new session stores 0 first: an unchanged id means the numbers are this session's.
        if self.cell.session.load(Ordering::SeqCst) != before {
            return None;
        }
        Some((self.cell.base + Duration::from_nanos(heard), Duration::from_nanos(span)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(10);
    const MARGIN: Duration = Duration::from_secs(1);

    /// A lease of session 7, begun now with `margin`, and when it began.
    fn begun(margin: Duration) -> (Lease, Instant) {
        let (lease, start) = (Lease::new(), Instant::now());
        lease.began(SessionId(7), start, TIMEOUT, margin);
        (lease, start)
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn the_deadline_is_the_latest_answered_send_plus_the_timeout_less_the_margin() {
        let lease = Lease::new();
        let start = Instant::now();
        assert_eq!(lease.valid_until(), None, "no session yet");
        lease.began(SessionId(7), start, TIMEOUT, MARGIN);
        assert_eq!(lease.valid_until(), Some(start + secs(9)));
        lease.heard(SessionId(7), start + secs(2));
        assert_eq!(lease.valid_until_for(SessionId(7)), Some(start + secs(11)));
        // An answer to an older request (answered late) never moves it back.
        lease.heard(SessionId(7), start + secs(1));
        assert_eq!(lease.valid_until(), Some(start + secs(11)));
    }

    #[test]
    fn another_sessions_replies_and_an_ended_session_renew_nothing() {
        let (lease, start) = begun(MARGIN);
        lease.heard(SessionId(8), start + secs(5));
        assert_eq!(lease.valid_until(), Some(start + secs(9)));
        lease.ended(SessionId(8));
        assert!(lease.valid_until().is_some(), "ending another session leaves this one");
        lease.ended(SessionId(7));
        assert_eq!(lease.valid_until(), None);
        assert_eq!(lease.valid_until_for(SessionId(7)), None);
        lease.heard(SessionId(7), start + secs(5));
        assert_eq!(lease.valid_until(), None, "a late reply does not bring an ended session back");
        lease.began(SessionId(9), start + secs(20), TIMEOUT, MARGIN);
        assert_eq!(lease.valid_until_for(SessionId(7)), None, "a new session is not the old one's");
        assert_eq!(lease.valid_until_for(SessionId(9)), Some(start + secs(29)));
        lease.closed();
        assert_eq!(lease.valid_until(), None);
    }

    #[test]
    fn a_read_only_server_renews_nothing() {
        let (lease, start) = begun(MARGIN);
        lease.read_only(true);
        lease.heard(SessionId(7), start + secs(3));
        assert_eq!(lease.valid_until(), Some(start + secs(9)));
        lease.read_only(false);
        lease.heard(SessionId(7), start + secs(3));
        assert_eq!(lease.valid_until(), Some(start + secs(12)));
    }

    #[test]
    fn a_margin_as_long_as_the_timeout_leaves_no_time() {
        let (lease, start) = begun(TIMEOUT * 2);
        assert_eq!(lease.valid_until(), Some(start));
        assert_eq!(lease.remaining(), Some(Duration::ZERO));
    }
}
