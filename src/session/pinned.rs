//! [`PinnedSession`]: requests that run on one session or not at all.
//!
//! Owns: binding requests to the session (generation) they were made for. A recipe that
//! created an ephemeral node (a claim, a registration, a status it fenced by its session) uses
//! it for every later write that relies on owning that node: re-sent after a connection loss,
//! such a write still goes to the same session, and once that session has ended it fails with
//! [`Error::SessionLost`] instead of landing on a new session, where the same path may now be
//! another process's node. Does not own retrying: callers decide what an unknown outcome means.

use std::future::Future;

use super::handle::SessionHandle;
use super::requests::*;
use crate::error::Result;

/// A [`SessionHandle`] whose requests run only on the session of one generation.
#[derive(Clone, Debug)]
pub struct PinnedSession {
    session: SessionHandle,
    generation: u64,
}

impl PinnedSession {
    pub(crate) fn new(session: SessionHandle, generation: u64) -> Self {
        PinnedSession { session, generation }
    }

    /// The session's generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The handle this was made from (requests on it are not pinned).
    pub fn handle(&self) -> &SessionHandle {
        &self.session
    }

    fn on<M>(&self, path: &str, request: M) -> OnSession<M> {
        OnSession { generation: self.generation, path: path.to_owned(), request }
    }

    /// Creates a node on this session.
    ///
    /// # Cancel safety
    /// The create is sent when this is called: dropping the future does not withdraw it. The
    /// node is created (or not, and only on this session) all the same; only the answer is lost.
    pub fn create<D: Into<Vec<u8>>>(
        &self,
        path: &str,
        data: D,
        mode: CreateMode,
    ) -> impl Future<Output = Result<Created>> + 'static + use<D> {
        self.session.request(self.on(path, Create::new(path, data, mode)))
    }

    /// Deletes a node on this session, optionally only at `version`.
    ///
    /// # Cancel safety
    /// The delete is sent when this is called: dropping the future does not withdraw it
    /// (it still runs only on this session); only its answer is lost.
    pub fn delete(&self, path: &str, version: Option<i32>) -> impl Future<Output = Result<()>> + 'static + use<> {
        self.session.request(self.on(path, Delete { path: path.into(), version }))
    }

    /// Reads a node's stat on this session.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read, sent when this is called; dropping the future loses only the
    /// answer.
    pub fn exists(&self, path: &str) -> impl Future<Output = Result<Option<Stat>>> + 'static + use<> {
        self.session.request(self.on(path, Exists { path: path.into(), watch: None }))
    }

    /// Reads a node on this session.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read, sent when this is called; dropping the future loses only the
    /// answer.
    pub fn get_data(&self, path: &str) -> impl Future<Output = Result<NodeData>> + 'static + use<> {
        self.session.request(self.on(path, GetData { path: path.into(), watch: None }))
    }

    /// Creates `path` and its missing ancestors (persistent nodes) on this session.
    ///
    /// # Cancel safety
    /// Sent when this is called and carried out to the end whether or not the future is
    /// awaited: dropping it loses only the answer. Calling it again is harmless.
    pub fn ensure_path(&self, path: &str) -> impl Future<Output = Result<()>> + 'static + use<> {
        self.session.request(self.on(path, EnsurePath { path: path.into(), containers: false }))
    }

    /// Lists a node's children on this session.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read, sent when this is called; dropping the future loses only the
    /// answer.
    pub fn children(&self, path: &str) -> impl Future<Output = Result<Children>> + 'static + use<> {
        self.session.request(self.on(path, GetChildren { path: path.into(), watch: None }))
    }

    /// Replaces a node's data on this session, optionally only at `version`.
    ///
    /// # Cancel safety
    /// The write is sent when this is called: dropping the future does not withdraw it
    /// (it still runs only on this session); only its answer is lost.
    pub fn set_data<D: Into<Vec<u8>>>(
        &self,
        path: &str,
        data: D,
        version: Option<i32>,
    ) -> impl Future<Output = Result<Stat>> + 'static + use<D> {
        self.session.request(self.on(path, SetData { path: path.into(), data: data.into(), version }))
    }

    /// Makes the server this session talks to catch up with the leader on `path`, on this
    /// session: a read sent after it sees every write the leader had applied (or proposed) when
    /// the sync reached it, also a write whose reply this session never saw.
    ///
    /// # Cancel safety
    /// Cancel-safe: sent when this is called; dropping the future loses only the answer (a
    /// sync changes no data).
    pub fn sync(&self, path: &str) -> impl Future<Output = Result<()>> + 'static + use<> {
        self.session.request(self.on(path, Sync { path: path.into() }))
    }

    /// Applies `ops` atomically on this session.
    ///
    /// # Cancel safety
    /// The transaction is sent when this is called: dropping the future does not withdraw
    /// it; it applies (all of it, only on this session) or fails (none of it) all the same, and
    /// only the answer is lost.
    pub fn multi(&self, ops: Vec<Op>) -> impl Future<Output = Result<Vec<OpResult>>> + 'static + use<> {
        let first = ops.first().map(|op| op.path().to_owned()).unwrap_or_else(|| "/".into());
        self.session.request(OnSession { generation: self.generation, path: first, request: Multi { ops } })
    }
}
