//! How to reach ZooKeeper and how to behave when the session is lost.
//!
//! Owns: [`SessionConfig`] (a by-value builder) and [`RebuildPolicy`] (backoff for building a new
//! session after expiry, and for the first connection). Does not own the connection itself; the
//! [`SessionActor`](super::SessionActor) reads this once when it starts.

use std::time::Duration;

use zookeeper_client::{Acl, Permission};

use crate::error::Error;
use crate::path;
use crate::retry::RetryPolicy;

/// ZooKeeper's default `jute.maxbuffer` (0xfffff bytes): the server closes the connection on
/// any request longer than this, a `multi` counted whole, so every request is measured before
/// it is sent.
pub const DEFAULT_MAX_REQUEST_SIZE: usize = 0xfffff;

/// Everything the session needs to connect, authenticate and recover.
///
/// ```
/// use std::time::Duration;
/// use actix_zookeeper::{RebuildPolicy, SessionConfig};
///
/// let config = SessionConfig::new("zk1:2181,zk2:2181,zk3:2181/my-service")
///     .with_session_timeout(Duration::from_secs(10))
///     .with_digest_auth("svc", "secret")
///     .with_rebuild_policy(RebuildPolicy::forever().with_backoff(
///         Duration::from_millis(100),
///         Duration::from_secs(5),
///     ));
/// assert_eq!(config.hosts(), "zk1:2181,zk2:2181,zk3:2181");
/// assert_eq!(config.chroot(), Some("/my-service"));
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct SessionConfig {
    hosts: String,
    chroot: Option<String>,
    session_timeout: Duration,
    connection_timeout: Option<Duration>,
    request_timeout: Duration,
    read_only: bool,
    auth: Vec<(String, Vec<u8>)>,
    default_acl: Vec<Acl>,
    rebuild: RebuildPolicy,
    retry: RetryPolicy,
    max_request_size: usize,
    lease_margin: Option<Duration>,
    server_version: Option<(u32, u32, u32)>,
    flap_damper: Option<Duration>,
    ensemble_tracking: bool,
    #[cfg(feature = "tls")]
    tls: Option<super::TlsConfig>,
    #[cfg(feature = "sasl")]
    sasl: Option<SaslDigest>,
}

/// SASL DIGEST-MD5 credentials; `Debug` never shows the password.
#[cfg(feature = "sasl")]
#[derive(Clone)]
struct SaslDigest {
    user: String,
    password: String,
}

#[cfg(feature = "sasl")]
impl std::fmt::Debug for SaslDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslDigest").field("user", &self.user).finish_non_exhaustive()
    }
}

impl SessionConfig {
    /// A configuration for a connect string `host:port[,host:port...][/chroot]`, the same syntax
    /// as the Java client's. Defaults: 10 s session timeout, requests wait up to 15 s for a
    /// session, world-readable-and-writable ACL, rebuild forever with backoff 100 ms → 10 s.
    pub fn new(connect_string: impl AsRef<str>) -> Self {
        let connect_string = connect_string.as_ref();
        let (hosts, chroot) = match connect_string.find('/') {
            Some(i) => (&connect_string[..i], Some(connect_string[i..].to_string())),
            None => (connect_string, None),
        };
        SessionConfig {
            hosts: hosts.to_string(),
            chroot: chroot.filter(|c| c != "/"),
            session_timeout: Duration::from_secs(10),
            connection_timeout: None,
            request_timeout: Duration::from_secs(15),
            read_only: false,
            auth: Vec::new(),
            default_acl: vec![Acl::new_const(zookeeper_client::Permission::ALL, "world", "anyone")],
            rebuild: RebuildPolicy::forever(),
            retry: RetryPolicy::default(),
            max_request_size: DEFAULT_MAX_REQUEST_SIZE,
            lease_margin: None,
            server_version: None,
            flap_damper: None,
            ensemble_tracking: false,
            #[cfg(feature = "tls")]
            tls: None,
            #[cfg(feature = "sasl")]
            sasl: None,
        }
    }

    /// Authenticate with SASL DIGEST-MD5 as `user` (feature `sasl`), on every session: the
    /// identity `sasl:<user>` of ACLs. Wrong credentials end the session actor with
    /// `SessionEvent::AuthFailed`, and [`Error::AuthFailed`] for whoever waits for a session.
    #[cfg(feature = "sasl")]
    pub fn with_sasl_digest(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.sasl = Some(SaslDigest { user: user.into(), password: password.into() });
        self
    }

    crate::builder::setters! {
        /// Dial every host over TLS (feature `tls`), trusting the CA of `tls` and presenting its
        /// client certificate, if any. A server's certificate must name the host as the connect
        /// string spells it. A certificate problem ends the session actor with [`Error::Tls`]
        /// rather than retrying: see [`TlsConfig`](super::TlsConfig).
        #[cfg(feature = "tls")]
        with_tls(tls: super::TlsConfig) => some;
    }

    /// The TLS settings, if the session dials over TLS.
    #[cfg(feature = "tls")]
    pub fn tls(&self) -> Option<&super::TlsConfig> {
        self.tls.as_ref()
    }

    /// Every path of this session is relative to `chroot` (Curator's "namespace"); the session
    /// creates it on connect when it is missing.
    pub fn with_chroot(mut self, chroot: impl Into<String>) -> Self {
        let chroot = chroot.into();
        self.chroot = if chroot == "/" || chroot.is_empty() { None } else { Some(chroot) };
        self
    }

    crate::builder::setters! {
        /// Session timeout to negotiate (the server clamps it to its min/max).
        with_session_timeout(session_timeout: Duration);

        /// How long a silent connection is trusted before it is declared lost (default: 2/5 of the
        /// session timeout, as the client library does).
        with_connection_timeout(connection_timeout: Duration) => some;

        /// How long a request issued while no session exists (first connect, or a rebuild after
        /// expiry) waits for one before it fails with [`Error::Timeout`].
        with_request_timeout(request_timeout: Duration);

        /// Allow connecting to a server that has lost its quorum (reads only).
        with_read_only(read_only: bool);
    }

    /// Authenticate with the `digest` scheme as `user:password`, on every session.
    pub fn with_digest_auth(self, user: &str, password: &str) -> Self {
        self.with_auth("digest", format!("{user}:{password}").into_bytes())
    }

    /// Authenticate with any scheme the server knows, on every session.
    pub fn with_auth(mut self, scheme: impl Into<String>, credentials: impl Into<Vec<u8>>) -> Self {
        self.auth.push((scheme.into(), credentials.into()));
        self
    }

    crate::builder::setters! {
        /// ACL for nodes this session creates when a request gives none.
        with_default_acl(default_acl: Vec<Acl>);

        /// How to retry the first connection and rebuild a session after expiry.
        with_rebuild_policy(rebuild: RebuildPolicy);

        /// How the recipes on this session retry a failed request (unless a recipe's own config says
        /// otherwise): by default 50 ms doubling to 2 s, with jitter, for as long as the session may
        /// come back. With an attempt limit, a recipe step that fails that many times in a row ends
        /// with its typed error; see [`RetryPolicy`].
        with_retry(retry: RetryPolicy);
    }

    /// The recipes' retry policy on this session.
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }

    crate::builder::setters! {
        /// Largest request sent, as encoded on the wire (path, data, ACL, a `multi`'s every op):
        /// set it to the server's `jute.maxbuffer` (default 0xfffff bytes, ZooKeeper's default). A
        /// larger request fails with [`Error::DataTooLarge`] before it is sent.
        with_max_request_size(max_request_size: usize);

        /// How much earlier than the server could expire the session its [`Lease`](super::Lease)
        /// (and with it every grant's and term's `valid_until`) ends: the allowance for the two
        /// machines' clocks running at different rates and for the time between a check and the
        /// work it guards, and the time a follower takes to forward a renewal to the leader (up to
        /// half a tick; see `session/lease.rs`). Default: three tenths of the negotiated session
        /// timeout. A margin as long as
        /// the timeout leaves no time at all (every `is_current` is false); longer is refused by
        /// [`validate`](Self::validate).
        with_lease_margin(lease_margin: Duration) => some;
    }

    /// The version of the servers (as Curator's `ZKClientConfig` and zookeeper-client's
    /// `Connector::with_server_version` take it): the session then uses only what that
    /// version has (a plain `create` instead of `create2` below 3.5, no persistent watches
    /// below 3.6, no containers below 3.5.1) and takes the fallbacks of
    /// `docs/compatibility.md` from the start. Without it, what the server lacks is learned from
    /// its answers; a server older than 3.5 must be declared, or every create fails with
    /// [`Error::Unsupported`].
    pub fn with_server_version(mut self, major: u32, minor: u32, patch: u32) -> Self {
        self.server_version = Some((major, minor, patch));
        self
    }

    crate::builder::setters! {
        /// Damp a flapping connection (Curator's `CircuitBreakingConnectionStateListener`): the
        /// first `Suspended` reaches subscribers (the recipes) at once; every `Suspended` and
        /// `Reconnected` after it within the window is held back, and the latest `Reconnected` is told
        /// when a window ends with the connection up. Many drops become one `Suspended` ...
        /// `Reconnected` pair; a new session, an expiry and a close are never held back. Keep it
        /// well below the session timeout: a conservative recipe counts the time suspended from
        /// the first `Suspended` (longer than half the timeout is refused by
        /// [`validate`](Self::validate)). Off by default.
        with_flap_damper(flap_damper: Duration) => some;

        /// Whether the session follows the ensemble's dynamic reconfiguration, as Curator's
        /// `ensembleTracker` does (off by default, see below). The session reads `/zookeeper/config`
        /// when it connects and watches it when it names servers. The first reading is taken as
        /// what the connect string stands for: nothing changes until a *later* configuration is
        /// published. From then on a new session connects to the servers that configuration names,
        /// and a live session whose connection drops moves to them (the recipes hear `Suspended`,
        /// then `Reconnected`: no loss).
        ///
        /// Off by default, unlike Curator: ZooKeeper itself disables reconfiguration by default
        /// (`reconfigEnabled=false` since 3.5.3), and a session that can move runs its client on a
        /// thread of its own, a thread hop each way per request (W1: 0.82 against 0.94 × the bare
        /// lock, `docs/performance.md`). Turn it on where operators reconfigure the ensemble. Leave
        /// it off when the servers' published client addresses are not the ones to use (behind a
        /// proxy, a load balancer or address translation). A TLS session never follows: the
        /// configuration names plaintext client ports only. See `docs/recipes/ensemble.md`.
        with_ensemble_tracking(ensemble_tracking: bool);
    }

    /// Whether the session follows the ensemble's reconfiguration (see
    /// [`with_ensemble_tracking`](Self::with_ensemble_tracking)).
    pub fn ensemble_tracking(&self) -> bool {
        #[cfg(feature = "tls")]
        if self.tls.is_some() {
            return false;
        }
        self.ensemble_tracking
    }

    /// The flap damper's window, if any.
    pub fn flap_damper(&self) -> Option<Duration> {
        self.flap_damper
    }

    /// The declared server version, if any.
    pub fn server_version(&self) -> Option<(u32, u32, u32)> {
        self.server_version
    }

    /// The lease margin for a session whose negotiated timeout is `negotiated`.
    pub(crate) fn lease_margin(&self, negotiated: Duration) -> Duration {
        self.lease_margin.unwrap_or(negotiated * 3 / 10)
    }

    /// The host list, without the chroot.
    pub fn hosts(&self) -> &str {
        &self.hosts
    }

    /// The chroot, if any.
    pub fn chroot(&self) -> Option<&str> {
        self.chroot.as_deref()
    }

    /// Requested session timeout.
    pub fn session_timeout(&self) -> Duration {
        self.session_timeout
    }

    /// How long requests wait for a session.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Default ACL for created nodes.
    pub fn default_acl(&self) -> &[Acl] {
        &self.default_acl
    }

    /// Authentication is configured while some entry of the default ACL lets the whole world
    /// write, delete or administer (`world:anyone` with more than `READ`): the session warns.
    pub(crate) fn world_open_with_auth(&self) -> bool {
        !self.auth.is_empty()
            && self.default_acl.iter().any(|acl| {
                acl.scheme() == "world"
                    && acl.id() == "anyone"
                    && [Permission::WRITE, Permission::DELETE, Permission::ADMIN]
                        .into_iter()
                        .any(|permission| acl.permission().has(permission))
            })
    }

    /// The rebuild policy.
    pub fn rebuild_policy(&self) -> &RebuildPolicy {
        &self.rebuild
    }

    /// Largest request sent, as encoded on the wire.
    pub fn max_request_size(&self) -> usize {
        self.max_request_size
    }

    /// Checks what can be checked without a server.
    pub fn validate(&self) -> Result<(), Error> {
        if self.hosts.trim().is_empty() {
            return Err(Error::InvalidPath { path: self.hosts.clone(), reason: "connect string names no host".into() });
        }
        if let Some(chroot) = &self.chroot {
            path::validate(chroot, false)?;
        }
        if let Some(window) = self.flap_damper.filter(|window| window.is_zero() || *window > self.session_timeout / 2) {
            return Err(Error::BadArguments {
                path: "SessionConfig::with_flap_damper".into(),
                reason: format!(
                    "the damper's window ({window:?}) must be above zero and at most half the session timeout ({:?})",
                    self.session_timeout
                ),
            });
        }
        if let Some(margin) = self.lease_margin.filter(|margin| *margin > self.session_timeout) {
            return Err(Error::BadArguments {
                path: "SessionConfig::with_lease_margin".into(),
                reason: format!(
                    "the lease margin ({margin:?}) is longer than the session timeout ({:?})",
                    self.session_timeout
                ),
            });
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            tls.validate()?;
        }
        Ok(())
    }

    pub(crate) fn connector(&self) -> Result<zookeeper_client::Connector, Error> {
        let mut connector = zookeeper_client::Client::connector()
            .with_session_timeout(self.session_timeout)
            .with_readonly(self.read_only);
        if let Some(timeout) = self.connection_timeout {
            connector = connector.with_connection_timeout(timeout);
        }
        if let Some((major, minor, patch)) = self.server_version {
            connector = connector.with_server_version(major, minor, patch);
        }
        for (scheme, credentials) in &self.auth {
            connector = connector.with_auth(scheme, credentials);
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            connector = connector.with_tls(tls.options()?);
        }
        #[cfg(feature = "sasl")]
        if let Some(SaslDigest { user, password }) = &self.sasl {
            connector = connector.with_sasl(zookeeper_client::SaslOptions::digest_md5(user.clone(), password.clone()));
        }
        Ok(connector)
    }
}

/// How often, and how patiently, to (re)build a session.
///
/// Applies to the first connection and to building a new session after the old one expired.
/// The delay before attempt `n` (counting from 0) is `initial * 2^n`, capped at `max`; attempt 0
/// starts at once.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct RebuildPolicy {
    initial_backoff: Duration,
    max_backoff: Duration,
    max_attempts: Option<u32>,
    /// Build a new session after an expiry (false only for [`RebuildPolicy::never`]).
    after_expiry: bool,
}

impl RebuildPolicy {
    /// Keep trying forever (Curator's and kazoo's behaviour for a long-lived service).
    pub fn forever() -> Self {
        RebuildPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            max_attempts: None,
            after_expiry: true,
        }
    }

    /// Give up after `attempts` failed attempts; the session then reports `Closed`.
    pub fn attempts(attempts: u32) -> Self {
        RebuildPolicy { max_attempts: Some(attempts), ..Self::forever() }
    }

    /// Never rebuild: an expired session ends the actor (the first connection is still tried
    /// once).
    pub fn never() -> Self {
        RebuildPolicy { after_expiry: false, ..Self::attempts(1) }
    }

    /// Whether a new session is built after the current one expires.
    pub fn rebuilds_after_expiry(&self) -> bool {
        self.after_expiry
    }

    /// Exponential backoff from `initial`, capped at `max`.
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max.max(initial);
        self
    }

    /// Delay before attempt `attempt` (0-based), or `None` when the policy gives up.
    pub fn delay(&self, attempt: u32) -> Option<Duration> {
        if self.max_attempts.is_some_and(|max| attempt >= max) {
            return None;
        }
        if attempt == 0 {
            return Some(Duration::ZERO);
        }
        let factor = 1u32.checked_shl(attempt - 1).unwrap_or(u32::MAX);
        Some(self.initial_backoff.saturating_mul(factor).min(self.max_backoff))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_with_a_world_open_default_acl_is_flagged() {
        let plain = SessionConfig::new("a:1");
        assert!(!plain.world_open_with_auth(), "no auth: nothing to warn about");
        let auth = SessionConfig::new("a:1").with_digest_auth("svc", "secret");
        assert!(auth.world_open_with_auth(), "auth with the default (world, ALL) ACL");
        let creator_only = auth.clone().with_default_acl(vec![Acl::new_const(Permission::ALL, "auth", "")]);
        assert!(!creator_only.world_open_with_auth());
        let world_read = auth.with_default_acl(vec![
            Acl::new_const(Permission::ALL, "auth", ""),
            Acl::new_const(Permission::READ, "world", "anyone"),
        ]);
        assert!(!world_read.world_open_with_auth(), "readable by all is a choice, not an accident");
    }

    #[test]
    fn connect_string_splits_chroot() {
        let c = SessionConfig::new("a:1,b:2/app/x");
        assert_eq!(c.hosts(), "a:1,b:2");
        assert_eq!(c.chroot(), Some("/app/x"));
        assert_eq!(SessionConfig::new("a:1/").chroot(), None);
        assert!(SessionConfig::new("a:1/bad//root").validate().is_err());
        assert!(SessionConfig::new("").validate().is_err());
    }

    #[test]
    fn backoff_grows_and_caps() {
        let p = RebuildPolicy::attempts(5).with_backoff(Duration::from_millis(100), Duration::from_millis(350));
        let delays: Vec<_> = (0..6).map(|n| p.delay(n)).collect();
        assert_eq!(
            delays,
            [
                Some(Duration::ZERO),
                Some(Duration::from_millis(100)),
                Some(Duration::from_millis(200)),
                Some(Duration::from_millis(350)),
                Some(Duration::from_millis(350)),
                None
            ]
        );
        assert_eq!(RebuildPolicy::forever().delay(1000), Some(Duration::from_secs(10)));
    }
}
