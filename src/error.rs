//! The crate's error type for ZooKeeper requests.
//!
//! Owns: [`Error`], the translation of `zookeeper_client::Error` into it (always with the path the
//! request concerned), and the distinction between errors worth retrying and final ones.
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
    /// The payload is larger than the server accepts; nothing was sent.
    #[error("data for {path} is {size} bytes, over the limit of {limit} bytes")]
    DataTooLarge {
        /// The node the data was meant for.
        path: String,
        /// Size of the rejected payload.
        size: usize,
        /// The configured limit (`SessionConfig::max_data_size`).
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
    /// No answer within the time allowed (request timeout, or no session came up in time).
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was being waited for (a request and its path, or "a session").
        what: String,
        /// How long we waited.
        after: Duration,
    },
    /// The session actor is closed; no more requests are served.
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
            | Error::ZooKeeper { path, .. } => Some(path),
            Error::Multi { source, .. } => source.path(),
            Error::AuthFailed | Error::Timeout { .. } | Error::Closed => None,
        }
    }

    /// True when retrying cannot help: the request itself is wrong (path, size, ACL, parent) or
    /// not permitted, or the session actor is closed.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Error::InvalidPath { .. }
                | Error::DataTooLarge { .. }
                | Error::BadArguments { .. }
                | Error::NoChildrenForEphemerals { .. }
                | Error::NoAuth { .. }
                | Error::InvalidAcl { .. }
                | Error::AuthFailed
                | Error::Closed
        )
    }

    /// True when the outcome of the request is unknown or the session is gone, so that a
    /// recipe should re-read state rather than trust its last view.
    pub fn is_connection_problem(&self) -> bool {
        matches!(self, Error::ConnectionLoss { .. } | Error::SessionLost { .. } | Error::Timeout { .. })
    }
}
