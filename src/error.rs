//! The crate's error type for ZooKeeper requests.
//!
//! Owns: [`Error`], the translation of `zookeeper_client::Error` into it (always with the path the
//! request concerned), and what an error says about the request: whether it was applied, not
//! applied, or may have been ([`Error::was_not_applied`], [`Error::outcome_unknown`]), and
//! whether trying again can help ([`Error::is_transient`], [`Error::is_final`]).
//! Does not own: recipe-specific errors (each recipe module has its own enum that wraps this one).

use std::time::Duration;

/// Result of a request to ZooKeeper.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a ZooKeeper request can fail with.
///
/// Every variant that concerns a znode names its path, so a log line or a test failure says
/// *which* node was wrong, not only what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path breaks ZooKeeper's path rules; nothing was sent.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The offending path, as given.
        path: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// The request is larger than the server accepts (its `jute.maxbuffer`); nothing was sent,
    /// and sending it again cannot help.
    #[error("the request for {path} is {size} bytes, over the limit of {limit} bytes")]
    DataTooLarge {
        /// The node the data was meant for (a `multi`'s first node).
        path: String,
        /// Size of the rejected request, as encoded on the wire.
        size: usize,
        /// The configured limit (`SessionConfig::max_request_size`).
        limit: usize,
    },
    /// The request was malformed in a way ZooKeeper's client library caught before sending.
    #[error("bad arguments for {path}: {reason}")]
    BadArguments {
        /// The node concerned.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// The node does not exist (or, for a create, its parent does not).
    #[error("no node at {path}")]
    NoNode {
        /// The node concerned.
        path: String,
    },
    /// A node already exists at that path.
    #[error("node already exists at {path}")]
    NodeExists {
        /// The node concerned.
        path: String,
    },
    /// The node's version is not the expected one.
    #[error("version mismatch at {path}")]
    BadVersion {
        /// The node concerned.
        path: String,
    },
    /// The node still has children.
    #[error("node {path} is not empty")]
    NotEmpty {
        /// The node concerned.
        path: String,
    },
    /// The parent is an ephemeral node, and ephemeral nodes cannot have children.
    #[error("cannot create {path}: its parent is an ephemeral node")]
    NoChildrenForEphemerals {
        /// The node that could not be created.
        path: String,
    },
    /// The node's ACL denies this session the operation.
    #[error("not authorized for {path}")]
    NoAuth {
        /// The node concerned.
        path: String,
    },
    /// The ACL given for a new node is empty or malformed.
    #[error("invalid ACL for {path}")]
    InvalidAcl {
        /// The node concerned.
        path: String,
    },
    /// The connection dropped while the request was in flight: it may or may not have been
    /// applied. The session may still be alive.
    #[error("connection lost during request on {path}")]
    ConnectionLoss {
        /// The node concerned.
        path: String,
    },
    /// The session the request was sent on has expired (a new one is being built, if the
    /// rebuild policy allows).
    #[error("session lost during request on {path}")]
    SessionLost {
        /// The node concerned.
        path: String,
    },
    /// The server rejected the session's credentials.
    #[error("authentication failed")]
    AuthFailed,
    /// No TLS connection to `host` (feature `tls`): a TLS setting does not parse (`host` is
    /// `(configuration)`), the server's certificate is not trusted or not for that host, or the
    /// server refused ours. Trying again cannot help; the session actor stops.
    #[error("TLS with {host}: {reason}")]
    Tls {
        /// The host as the connect string names it.
        host: String,
        /// What was wrong.
        reason: String,
    },
    /// Nothing was sent: no session came up within the request timeout, or a persistent watch
    /// could not be registered in that time (it is still registered once a session is up).
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was being waited for (a request and its path, or "a session").
        what: String,
        /// How long we waited.
        after: Duration,
    },
    /// The session actor is closed; no more requests are served. A request refused this way was
    /// never sent, but one in flight when the session closed may have been applied: the error
    /// does not say which, so it counts as [`outcome_unknown`](Error::outcome_unknown).
    #[error("session closed")]
    Closed,
    /// One operation of a `multi` failed, so none was applied.
    #[error("multi operation #{index} failed: {source}")]
    Multi {
        /// Position of the failed operation in the request.
        index: usize,
        /// Why it failed (names the operation's path).
        source: Box<Error>,
    },
    /// The server does not support what the request needs (an older or a ZooKeeper-compatible
    /// server: see `docs/compatibility.md`); it was refused and nothing of it applied. Where a
    /// fallback exists the crate takes it without this error; this is where none does.
    #[error("the server does not support {feature}, needed for {path}")]
    Unsupported {
        /// The node concerned.
        path: String,
        /// What the server lacks.
        feature: crate::feature::Feature,
    },
    /// The server's reply to a request does not fit the request (e.g. a `multi` reply naming an
    /// operation the request does not have). A real server does not send one; the outcome is
    /// unknown.
    #[error("unexpected reply to the request on {path}: {reason}")]
    UnexpectedReply {
        /// The node the request concerned (for a `multi`, its first operation's path).
        path: String,
        /// What did not fit.
        reason: String,
    },
    /// Any other ZooKeeper error, with the path it concerned.
    #[error("ZooKeeper error on {path}: {source}")]
    ZooKeeper {
        /// The node concerned.
        path: String,
        /// The client library's error.
        source: zookeeper_client::Error,
    },
}

impl Error {
    /// Translates a `zookeeper_client` error for a request on `path`.
    pub(crate) fn from_zk(path: &str, err: zookeeper_client::Error) -> Error {
        use zookeeper_client::Error as Zk;
        let path = path.to_string();
        match err {
            Zk::NoNode => Error::NoNode { path },
            Zk::NodeExists => Error::NodeExists { path },
            Zk::BadVersion => Error::BadVersion { path },
            Zk::NotEmpty => Error::NotEmpty { path },
            Zk::NoChildrenForEphemerals => Error::NoChildrenForEphemerals { path },
            Zk::NoAuth => Error::NoAuth { path },
            Zk::InvalidAcl => Error::InvalidAcl { path },
            Zk::ConnectionLoss => Error::ConnectionLoss { path },
            Zk::SessionExpired => Error::SessionLost { path },
            Zk::AuthFailed => Error::AuthFailed,
            Zk::ClientClosed => Error::Closed,
            Zk::BadArguments(reason) => Error::BadArguments { path, reason: reason.to_string() },
            // The client reports transport failures of a request (a reset connection, "no
            // response from connection in N ms") as custom errors rather than
            // `ConnectionLoss`; to a caller they are the same thing: the outcome is unknown and
            // the session may live on. Seen when a server stops right after a create was sent.
            Zk::Custom(_) => Error::ConnectionLoss { path },
            other => Error::ZooKeeper { path, source: other },
        }
    }

    /// `err`, the answer to a request on `path` that needs `feature`: `Unimplemented` becomes
    /// [`Error::Unsupported`], anything else as [`from_zk`](Self::from_zk) says.
    pub(crate) fn from_zk_needing(path: &str, feature: crate::feature::Feature, err: zookeeper_client::Error) -> Error {
        match err {
            zookeeper_client::Error::Unimplemented => Error::Unsupported { path: path.to_owned(), feature },
            err => Error::from_zk(path, err),
        }
    }

    /// The path this error concerns, when it concerns one.
    pub fn path(&self) -> Option<&str> {
        match self {
            Error::InvalidPath { path, .. }
            | Error::DataTooLarge { path, .. }
            | Error::BadArguments { path, .. }
            | Error::NoNode { path }
            | Error::NodeExists { path }
            | Error::BadVersion { path }
            | Error::NotEmpty { path }
            | Error::NoChildrenForEphemerals { path }
            | Error::NoAuth { path }
            | Error::InvalidAcl { path }
            | Error::ConnectionLoss { path }
            | Error::SessionLost { path }
            | Error::UnexpectedReply { path, .. }
            | Error::Unsupported { path, .. }
            | Error::ZooKeeper { path, .. } => Some(path),
            Error::Multi { source, .. } => source.path(),
            Error::AuthFailed | Error::Tls { .. } | Error::Timeout { .. } | Error::Closed => None,
        }
    }

    /// True when retrying cannot help: the request itself is wrong (path, size, ACL, parent) or
    /// not permitted, or the session actor is closed.
    pub fn is_final(&self) -> bool {
        self.refused_whatever_the_state()
            || matches!(
                self,
                Error::InvalidPath { .. }
                    | Error::DataTooLarge { .. }
                    | Error::BadArguments { .. }
                    | Error::InvalidAcl { .. }
                    | Error::AuthFailed
                    | Error::Tls { .. }
                    | Error::Closed
            )
    }

    /// The server's refusals that no change of its data can lift: the same request is refused
    /// again (an ephemeral parent, a missing permission, an operation it lacks).
    fn refused_whatever_the_state(&self) -> bool {
        matches!(self, Error::NoChildrenForEphemerals { .. } | Error::NoAuth { .. } | Error::Unsupported { .. })
    }

    /// True when nothing of the request reached the server: it broke a rule checked before
    /// sending (path, size, arguments) or no session came up in time ([`Error::Timeout`]).
    /// Sending it again cannot apply it twice.
    pub fn not_sent(&self) -> bool {
        matches!(
            self,
            Error::InvalidPath { .. } | Error::DataTooLarge { .. } | Error::BadArguments { .. } | Error::Timeout { .. }
        )
    }

    /// True when the server certainly applied nothing of the request: it was [not
    /// sent](Error::not_sent), or the server refused it (a failed `multi` applies none of its
    /// operations). Exactly one of this and [`outcome_unknown`](Error::outcome_unknown) holds.
    pub fn was_not_applied(&self) -> bool {
        self.not_sent()
            || self.refused_by_server()
            || matches!(self, Error::InvalidAcl { .. } | Error::AuthFailed | Error::Tls { .. } | Error::Multi { .. })
    }

    /// The server's own refusals of a request it received on a live session.
    fn refused_by_server(&self) -> bool {
        self.refused_whatever_the_state()
            || matches!(
                self,
                Error::NoNode { .. } | Error::NodeExists { .. } | Error::BadVersion { .. } | Error::NotEmpty { .. }
            )
    }

    /// True when the request may have been applied although it failed: the connection dropped
    /// ([`Error::ConnectionLoss`]) or the session expired ([`Error::SessionLost`]) after it was
    /// sent, the session closed with it in flight ([`Error::Closed`]), or the reply made no
    /// sense. Before sending a write again, read back what it would have changed (or make it
    /// idempotent); sending it blindly may apply it twice.
    ///
    /// Errors not classified otherwise count here: "may have applied" is the safe assumption.
    pub fn outcome_unknown(&self) -> bool {
        !self.was_not_applied()
    }

    /// True when the error is the server's answer to the request (so the server received it
    /// while the session was alive): what renews a [`Lease`](crate::session::Lease).
    /// `InvalidAcl` is not: the client library also says it, without sending, of an empty ACL.
    pub(crate) fn answered_by_server(&self) -> bool {
        match self {
            Error::Multi { source, .. } => source.answered_by_server(),
            // The connected server answers an operation it lacks by itself, leader or not.
            Error::Unsupported { .. } => false,
            error => error.refused_by_server(),
        }
    }

    /// True when the same request may succeed later without any change: the connection or the
    /// session is the problem ([`Error::ConnectionLoss`], [`Error::SessionLost`],
    /// [`Error::Timeout`]), not the request. Whether to read back first is a separate question:
    /// ask [`outcome_unknown`](Error::outcome_unknown).
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::ConnectionLoss { .. } | Error::SessionLost { .. } | Error::Timeout { .. })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Error;

    fn every_kind() -> Vec<Error> {
        let path = || "/a".to_string();
        vec![
            Error::InvalidPath { path: path(), reason: "r".into() },
            Error::DataTooLarge { path: path(), size: 2, limit: 1 },
            Error::BadArguments { path: path(), reason: "r".into() },
            Error::NoNode { path: path() },
            Error::NodeExists { path: path() },
            Error::BadVersion { path: path() },
            Error::NotEmpty { path: path() },
            Error::NoChildrenForEphemerals { path: path() },
            Error::NoAuth { path: path() },
            Error::InvalidAcl { path: path() },
            Error::ConnectionLoss { path: path() },
            Error::SessionLost { path: path() },
            Error::AuthFailed,
            Error::Tls { host: "zk1:2281".into(), reason: "r".into() },
            Error::Timeout { what: "a session".into(), after: Duration::from_secs(1) },
            Error::Closed,
            Error::Multi { index: 1, source: Box::new(Error::NoNode { path: path() }) },
            Error::UnexpectedReply { path: path(), reason: "r".into() },
            Error::Unsupported { path: path(), feature: crate::feature::Feature::Ttl },
            Error::ZooKeeper { path: path(), source: zookeeper_client::Error::SessionMoved },
        ]
    }

    #[test]
    fn a_request_that_waited_for_a_session_in_vain_was_not_sent() {
        let timeout = Error::Timeout { what: "a session".into(), after: Duration::from_secs(1) };
        assert!(timeout.not_sent() && timeout.was_not_applied() && !timeout.outcome_unknown());
        assert!(timeout.is_transient(), "a session may still come up");
    }

    #[test]
    fn a_lost_connection_or_session_leaves_the_outcome_unknown() {
        for err in [Error::ConnectionLoss { path: "/a".into() }, Error::SessionLost { path: "/a".into() }] {
            assert!(err.outcome_unknown() && !err.was_not_applied() && !err.not_sent(), "{err:?}");
            assert!(err.is_transient(), "{err:?}");
        }
    }

    #[test]
    fn a_refusal_by_the_server_applied_nothing_but_was_sent() {
        for err in [
            Error::NoNode { path: "/a".into() },
            Error::BadVersion { path: "/a".into() },
            Error::Multi { index: 0, source: Box::new(Error::NodeExists { path: "/a".into() }) },
        ] {
            assert!(err.was_not_applied() && !err.not_sent() && !err.outcome_unknown(), "{err:?}");
            assert!(!err.is_transient(), "{err:?}");
        }
    }

    #[test]
    fn an_operation_the_server_does_not_support_applied_nothing_and_is_final() {
        let err = Error::Unsupported { path: "/a".into(), feature: crate::feature::Feature::Ttl };
        assert!(err.was_not_applied() && !err.outcome_unknown() && err.is_final(), "{err:?}");
        assert!(!err.answered_by_server(), "no proof the leader saw it: no renewal");
    }

    #[test]
    fn a_closed_session_or_an_unexplained_error_may_have_applied() {
        for err in [
            Error::Closed,
            Error::UnexpectedReply { path: "/a".into(), reason: "r".into() },
            Error::ZooKeeper { path: "/a".into(), source: zookeeper_client::Error::SessionMoved },
        ] {
            assert!(err.outcome_unknown() && !err.was_not_applied(), "{err:?}");
        }
    }

    #[test]
    fn every_error_is_either_not_applied_or_of_unknown_outcome() {
        for err in every_kind() {
            assert_ne!(err.was_not_applied(), err.outcome_unknown(), "{err:?}");
            assert!(!err.not_sent() || err.was_not_applied(), "not sent implies not applied: {err:?}");
            assert!(!(err.is_final() && err.is_transient()), "{err:?}");
        }
    }
}
