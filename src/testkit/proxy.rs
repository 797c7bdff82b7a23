//! A TCP fault proxy: one listener in front of one server address, forwarding every connection
//! it accepts and injecting the faults a network produces (partition, reset, latency,
//! bandwidth) on command.
//!
//! This module owns [`FaultProxy`], [`ClientLinks`] (one proxy per server of a connect string)
//! and the one testkit thread whose tokio runtime runs every proxy. It does not know ZooKeeper,
//! except for [`ElectionHint`], which the ensemble uses to keep its election links proxied. It
//! does not fake anything at the server or client: both ends talk real TCP through it.
//!
//! The crate `noxious` (a Rust port of Toxiproxy) was considered: it runs as a server driven
//! over HTTP, its "down" closes connections instead of leaving them open and silent, and its
//! last release (2021) pins old dependencies, so a small proxy of our own is written here.
//!
//! The public API is synchronous and never blocks on the proxies' runtime, so it can be called
//! from any thread, including from inside an actix or tokio runtime.

use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpListener as StdTcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::time::Instant;

use super::TestkitError;
use super::older_server::{self, OlderServer};

/// Bytes read from one side in one go.
const CHUNK: usize = 16 * 1024;
/// Chunks read but not yet written, per direction; beyond that the proxy stops reading, so a
/// slow direction pushes back on the sender as a slow network would.
const CHUNKS_IN_FLIGHT: usize = 64;
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long dropping a proxy waits for its listener to be closed.
const STOP_TIMEOUT: Duration = Duration::from_secs(1);

/// Which way bytes travel through a [`FaultProxy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client (the side that connected to the proxy) to the server.
    Upstream,
    /// From the server to the client.
    Downstream,
    /// Both ways.
    Both,
}

impl Direction {
    /// Indexes into the per-direction arrays of [`Faults`]: 0 upstream, 1 downstream.
    fn ways(self) -> &'static [usize] {
        match self {
            Direction::Upstream => &[UP],
            Direction::Downstream => &[DOWN],
            Direction::Both => &[UP, DOWN],
        }
    }
}

const UP: usize = 0;
const DOWN: usize = 1;

/// The faults in force; every connection task watches it.
#[derive(Debug, Clone, Default)]
struct Faults {
    blackholed: bool,
    latency: [Duration; 2],
    bandwidth: [Option<u64>; 2],
    /// Bumped by `reset`: a connection closes when this differs from its value at accept.
    resets: u64,
    /// Bumped by `heal`: a connection held by a blackhole closes when this changes, even if a new
    /// blackhole began before it noticed the heal.
    heals: u64,
    stopped: bool,
}

/// The runtime of every proxy: one thread, created on first use, living as long as the process.
fn runtime() -> Result<Handle, TestkitError> {
    static RUNTIME: OnceLock<Result<Handle, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel();
            std::thread::Builder::new()
                .name("actix-zk-testkit-proxies".into())
                .spawn(move || match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => {
                        let _ = tx.send(Ok(rt.handle().clone()));
                        rt.block_on(std::future::pending::<()>());
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                    }
                })
                .map_err(|e| e.to_string())?;
            rx.recv().map_err(|e| e.to_string())?
        })
        .clone()
        .map_err(|e| TestkitError::io("start the fault-proxy thread", io::Error::other(e)))
}

/// A TCP proxy on a free `127.0.0.1` port in front of one server address, with faults that can
/// be switched on and off while connections are open.
///
/// ```no_run
/// # use std::time::Duration;
/// # use actix_zookeeper::testkit::{Direction, FaultProxy, ZkServer};
/// # fn main() -> Result<(), actix_zookeeper::testkit::TestkitError> {
/// let server = ZkServer::start()?;
/// let proxy = FaultProxy::start(&server.address())?;
/// // connect a session to proxy.address() ...
/// proxy.blackhole(); // the session is cut off, its sockets stay open
/// proxy.heal();
/// proxy.set_latency(Direction::Upstream, Duration::from_millis(200));
/// # Ok(()) }
/// ```
///
/// Faults:
/// * [`blackhole`](Self::blackhole): a partition. Nothing is read from either side of any
///   connection, so bytes stay in the kernel's buffers and a sender blocks once they are full,
///   as with TCP retransmitting into a cut link; the sockets stay open. New connections are
///   accepted (the kernel would complete the handshake anyway) but not connected upstream; they
///   are reset at [`heal`](Self::heal).
/// * [`reset`](Self::reset): every current connection is closed on both sides with a TCP RST.
/// * [`set_latency`](Self::set_latency): each chunk read is written `d` later, in order.
/// * [`set_bandwidth`](Self::set_bandwidth): at most that many bytes per second.
///
/// Dropping the proxy closes its listener and resets its connections.
pub struct FaultProxy {
    address: SocketAddr,
    target: SocketAddr,
    faults: watch::Sender<Faults>,
    open: Arc<AtomicUsize>,
    /// Disconnected once the listener task has ended.
    listener_done: Mutex<mpsc::Receiver<()>>,
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultProxy")
            .field("address", &self.address)
            .field("target", &self.target)
            .field("faults", &*self.faults.borrow())
            .field("connections", &self.connections())
            .finish()
    }
}

impl FaultProxy {
    /// Starts a proxy that forwards every connection it accepts to `target` (`host:port`). The
    /// target is connected per accepted connection, so it need not be up yet.
    pub fn start(target: &str) -> Result<FaultProxy, TestkitError> {
        Self::start_on(bind_loopback()?, target, None)
    }

    /// Starts a proxy to a ZooKeeper server at `target` that answers the operations `older`
    /// refuses as that server kind does (`Unimplemented`), and forwards the rest: a client
    /// connected through it sees "ZooKeeper 3.4", or "a server without persistent watches,
    /// containers or TTL" ([`OlderServer`]). Faults work as with [`start`](Self::start).
    pub fn start_as(target: &str, older: OlderServer) -> Result<FaultProxy, TestkitError> {
        Self::start_on(bind_loopback()?, target, Some(Rewrite::Older(older)))
    }

    /// Starts a proxy on an already bound listener; `rewrite` says what it rewrites (see
    /// [`ElectionHint`] and [`OlderServer`]).
    pub(crate) fn start_on(
        listener: StdTcpListener,
        target: &str,
        hint: Option<Rewrite>,
    ) -> Result<FaultProxy, TestkitError> {
        let target = resolve(target)?;
        let address = listener.local_addr().map_err(|e| TestkitError::io("read the proxy's address", e))?;
        listener.set_nonblocking(true).map_err(|e| TestkitError::io("make the proxy listener non-blocking", e))?;
        let (faults, watched) = watch::channel(Faults::default());
        let open = Arc::new(AtomicUsize::new(0));
        let (done_tx, done_rx) = mpsc::channel();
        let accepting = accept_loop(listener, target, watched, open.clone(), hint, done_tx);
        runtime()?.spawn(accepting);
        tracing::debug!(%address, %target, "started fault proxy");
        Ok(FaultProxy { address, target, faults, open, listener_done: Mutex::new(done_rx) })
    }

    /// `127.0.0.1:<port>`: where clients connect instead of the target.
    pub fn address(&self) -> String {
        self.address.to_string()
    }

    /// The port of [`address`](Self::address).
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// The address the proxy forwards to.
    pub fn target(&self) -> String {
        self.target.to_string()
    }

    /// Partition: stop forwarding both ways and hold new connections (see the type's docs).
    pub fn blackhole(&self) {
        self.faults.send_modify(|f| f.blackholed = true);
        tracing::debug!(address = %self.address, target = %self.target, "proxy blackholed");
    }

    /// Closes every current connection on both sides (RST). New connections work as before.
    pub fn reset(&self) {
        self.faults.send_modify(|f| f.resets += 1);
        tracing::debug!(address = %self.address, target = %self.target, "proxy reset");
    }

    /// Delays every chunk travelling in `direction` by `latency` (zero for none), keeping order.
    pub fn set_latency(&self, direction: Direction, latency: Duration) {
        self.faults.send_modify(|f| {
            for &way in direction.ways() {
                f.latency[way] = latency;
            }
        });
    }

    /// Limits the bytes per second travelling in `direction` (`None` for no limit).
    pub fn set_bandwidth(&self, direction: Direction, bytes_per_second: Option<u64>) {
        self.faults.send_modify(|f| {
            for &way in direction.ways() {
                f.bandwidth[way] = bytes_per_second.filter(|b| *b > 0);
            }
        });
    }

    /// Forward again: ends a blackhole (resetting the connections accepted during it) and
    /// removes latency and bandwidth limits.
    pub fn heal(&self) {
        self.faults.send_modify(|f| {
            f.blackholed = false;
            f.latency = [Duration::ZERO; 2];
            f.bandwidth = [None; 2];
            f.heals += 1;
        });
        tracing::debug!(address = %self.address, target = %self.target, "proxy healed");
    }

    /// Whether the proxy is blackholed.
    pub fn is_blackholed(&self) -> bool {
        self.faults.borrow().blackholed
    }

    /// Connections currently open through the proxy, including those held by a blackhole.
    pub fn connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.faults.send_modify(|f| f.stopped = true);
        // Waits (briefly: the proxy thread only has to drop a socket) so that the port is closed
        // when the drop returns.
        if let Ok(done) = self.listener_done.lock() {
            let _ = done.recv_timeout(STOP_TIMEOUT);
        }
    }
}

fn bind_loopback() -> Result<StdTcpListener, TestkitError> {
    StdTcpListener::bind("127.0.0.1:0").map_err(|e| TestkitError::io("bind a fault proxy on loopback", e))
}

/// A listener bound now and started as a proxy later, so that configurations can name every
/// proxy before any of them knows its target.
pub(crate) fn reserve_listener() -> Result<(StdTcpListener, String), TestkitError> {
    let listener = bind_loopback()?;
    let address = listener.local_addr().map_err(|e| TestkitError::io("read the proxy's address", e))?;
    Ok((listener, address.to_string()))
}

fn resolve(target: &str) -> Result<SocketAddr, TestkitError> {
    let what = format!("resolve proxy target {target}");
    target
        .to_socket_addrs()
        .map_err(|e| TestkitError::io(what.clone(), e))?
        .next()
        .ok_or_else(|| TestkitError::io(what, io::Error::new(io::ErrorKind::NotFound, "no address")))
}

async fn accept_loop(
    listener: StdTcpListener,
    target: SocketAddr,
    mut faults: watch::Receiver<Faults>,
    open: Arc<AtomicUsize>,
    hint: Option<Rewrite>,
    _done: mpsc::Sender<()>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::warn!(%error, %target, "fault proxy cannot listen");
            return;
        }
    };
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = faults.wait_for(|f| f.stopped) => return,
        };
        match accepted {
            Ok((client, _)) => {
                let _ = client.set_nodelay(true);
                let guard = OpenGuard::new(open.clone());
                tokio::spawn(serve(client, target, faults.clone(), hint.clone(), guard));
            }
            Err(error) => {
                tracing::debug!(%error, %target, "fault proxy accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Counts a connection as open for as long as it lives.
struct OpenGuard(Arc<AtomicUsize>);

impl OpenGuard {
    fn new(open: Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::SeqCst);
        OpenGuard(open)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Drops a stream with an RST instead of a FIN: what a reset looks like on the wire.
fn abort(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

async fn serve(
    mut client: TcpStream,
    target: SocketAddr,
    mut faults: watch::Receiver<Faults>,
    hint: Option<Rewrite>,
    _open: OpenGuard,
) {
    let start = faults.borrow_and_update().clone();
    if start.blackholed {
        // Nothing reaches the server during a partition, not even the connection.
        let _ =
            faults.wait_for(|f| !f.blackholed || f.heals != start.heals || f.resets != start.resets || f.stopped).await;
        abort(client);
        return;
    }
    let mut server = match tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(target)).await {
        Ok(Ok(server)) => server,
        Ok(Err(error)) => {
            tracing::debug!(%error, %target, "fault proxy cannot connect upstream");
            abort(client);
            return;
        }
        Err(_) => {
            tracing::debug!(%target, "fault proxy timed out connecting upstream");
            abort(client);
            return;
        }
    };
    let _ = server.set_nodelay(true);
    let closed_cleanly = {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        let (up_feed, down_feed) = match hint {
            Some(Rewrite::Election(hint)) => (Some(Feed::Election(hint)), None),
            Some(Rewrite::Older(older)) => {
                let (up, down) = older.sides();
                (Some(Feed::Older(up)), Some(Feed::Older(down)))
            }
            None => (None, None),
        };
        let up = pump(client_read, server_write, UP, faults.clone(), up_feed);
        let down = pump(server_read, client_write, DOWN, faults.clone(), down_feed);
        tokio::select! {
            forwarded = async { tokio::try_join!(up, down) } => forwarded.is_ok(),
            _ = faults.wait_for(|f| f.resets != start.resets || f.stopped) => false,
        }
    };
    if !closed_cleanly {
        abort(client);
        abort(server);
    }
}

/// Forwards one direction until its reader reaches end of stream, then half-closes the writer.
async fn pump(
    mut reader: ReadHalf<'_>,
    mut writer: WriteHalf<'_>,
    way: usize,
    faults: watch::Receiver<Faults>,
    mut hint: Option<Feed>,
) -> io::Result<()> {
    let (chunks_tx, mut chunks_rx) = tokio::sync::mpsc::channel::<(Instant, Vec<u8>)>(CHUNKS_IN_FLIGHT);
    let mut read_faults = faults.clone();
    let read = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            read_faults.wait_for(|f| !f.blackholed).await.map_err(proxy_stopped)?;
            let n = tokio::select! {
                n = reader.read(&mut buf) => n?,
                // Cancelling a read loses nothing, and a blackhole must stop it mid-wait.
                _ = read_faults.wait_for(|f| f.blackholed) => continue,
            };
            if n == 0 {
                return Ok::<(), io::Error>(());
            }
            let read_at = Instant::now();
            let bytes = match hint.as_mut() {
                Some(hint) => hint.feed(&buf[..n]),
                None => buf[..n].to_vec(),
            };
            if !bytes.is_empty() && chunks_tx.send((read_at, bytes)).await.is_err() {
                return Ok(());
            }
            if hint.as_ref().is_some_and(Feed::closing) {
                // As the server closes the connection: this direction ends (a FIN to the client)
                // once what was sent is written.
                return Ok(());
            }
        }
    };
    let mut write_faults = faults;
    let write = async move {
        let mut next_free = Instant::now();
        while let Some((read_at, bytes)) = chunks_rx.recv().await {
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                let now = write_faults.wait_for(|f| !f.blackholed).await.map_err(proxy_stopped)?.clone();
                tokio::time::sleep_until(read_at + now.latency[way]).await;
                let len = match now.bandwidth[way] {
                    None => rest.len(),
                    Some(bytes_per_second) => {
                        // Pieces of ~50 ms worth keep the rate smooth without a syscall per byte.
                        let len = rest.len().min((bytes_per_second / 20).max(1) as usize);
                        let start = next_free.max(Instant::now());
                        tokio::time::sleep_until(start).await;
                        next_free = start + Duration::from_secs_f64(len as f64 / bytes_per_second as f64);
                        len
                    }
                };
                writer.write_all(&rest[..len]).await?;
                rest = &rest[len..];
            }
        }
        writer.shutdown().await
    };
    tokio::try_join!(read, write).map(|_| ())
}

fn proxy_stopped(_: watch::error::RecvError) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "fault proxy stopped")
}

/// What a proxy rewrites in the bytes it forwards, if anything.
#[derive(Clone)]
pub(crate) enum Rewrite {
    /// The election handshake's address (upstream only).
    Election(ElectionHint),
    /// Operations an older server refuses (both ways).
    Older(OlderServer),
}

/// One direction's rewriter.
enum Feed {
    Election(ElectionHint),
    Older(older_server::Side),
}

impl Feed {
    fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        match self {
            Feed::Election(hint) => hint.feed(bytes),
            Feed::Older(side) => side.feed(bytes),
        }
    }

    /// The connection ends after what was fed so far.
    fn closing(&self) -> bool {
        matches!(self, Feed::Older(side) if side.closing())
    }
}

/// Rewrites the address in ZooKeeper's election handshake.
///
/// A member that connects to a member with a larger id only sends its id and its own election
/// address, and hangs up; the larger member then connects back to that address, which is the
/// real listener. Replacing it with the proxy of the opposite link keeps that connection
/// proxied too. The handshake (`QuorumCnxManager.InitialMessage`) is: protocol version (i64,
/// -65536 or -65535), member id (i64), address length (i32), address bytes; anything else passes
/// through untouched.
#[derive(Debug, Clone)]
pub(crate) struct ElectionHint {
    replacement: String,
    /// `None` once the handshake has been rewritten or found to be something else.
    pending: Option<Vec<u8>>,
}

const PROTOCOL_VERSION_V1: i64 = -65536;
const PROTOCOL_VERSION_V2: i64 = -65535;
const HEADER: usize = 8 + 8 + 4;

impl ElectionHint {
    /// Replaces the advertised election address with `replacement` (`host:port`).
    pub(crate) fn new(replacement: String) -> Self {
        ElectionHint { replacement, pending: Some(Vec::new()) }
    }

    /// Takes the next bytes of the stream, returns what to forward. The handshake is held back
    /// until complete and then sent in one piece, because the server reads the address with a
    /// single `read`.
    fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        let Some(pending) = self.pending.as_mut() else {
            return bytes.to_vec();
        };
        pending.extend_from_slice(bytes);
        if pending.len() < 8 {
            return Vec::new();
        }
        let version = i64::from_be_bytes(pending[..8].try_into().expect("8 bytes"));
        if version != PROTOCOL_VERSION_V1 && version != PROTOCOL_VERSION_V2 {
            return self.pending.take().unwrap_or_default();
        }
        if pending.len() < HEADER {
            return Vec::new();
        }
        let len = i32::from_be_bytes(pending[16..HEADER].try_into().expect("4 bytes"));
        let Ok(len) = usize::try_from(len) else {
            return self.pending.take().unwrap_or_default();
        };
        if pending.len() < HEADER + len {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(pending.len() + self.replacement.len());
        out.extend_from_slice(&pending[..16]);
        out.extend_from_slice(&(self.replacement.len() as i32).to_be_bytes());
        out.extend_from_slice(self.replacement.as_bytes());
        out.extend_from_slice(&pending[HEADER + len..]);
        self.pending = None;
        out
    }
}

/// One client's links to a set of servers: a [`FaultProxy`] per address, in order, so a test
/// can cut one client off an ensemble (or one server) while other clients keep their links.
///
/// ```no_run
/// # use actix_zookeeper::testkit::{ClientLinks, ZkEnsemble};
/// # fn main() -> Result<(), actix_zookeeper::testkit::TestkitError> {
/// let ensemble = ZkEnsemble::start(3)?;
/// let links = ClientLinks::to(ensemble.connect_string().split(','))?;
/// // connect the client under test to links.connect_string() ...
/// links.blackhole();
/// links.heal();
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ClientLinks {
    proxies: Vec<FaultProxy>,
}

impl ClientLinks {
    /// One proxy per address (`host:port`).
    pub fn to<I>(addresses: I) -> Result<ClientLinks, TestkitError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let proxies =
            addresses.into_iter().map(|address| FaultProxy::start(address.as_ref())).collect::<Result<Vec<_>, _>>()?;
        Ok(ClientLinks { proxies })
    }

    /// The proxies' addresses, comma-separated, in the order given to [`to`](Self::to).
    pub fn connect_string(&self) -> String {
        self.proxies.iter().map(FaultProxy::address).collect::<Vec<_>>().join(",")
    }

    /// Blackholes every link.
    pub fn blackhole(&self) {
        self.proxies.iter().for_each(FaultProxy::blackhole);
    }

    /// Heals every link.
    pub fn heal(&self) {
        self.proxies.iter().for_each(FaultProxy::heal);
    }

    /// Resets the connections of every link.
    pub fn reset(&self) {
        self.proxies.iter().for_each(FaultProxy::reset);
    }

    /// The link to the `i`-th address.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn proxy(&self, i: usize) -> &FaultProxy {
        &self.proxies[i]
    }

    /// Number of links.
    pub fn len(&self) -> usize {
        self.proxies.len()
    }

    /// Whether there are no links.
    pub fn is_empty(&self) -> bool {
        self.proxies.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handshake(version: i64, sid: i64, address: &str) -> Vec<u8> {
        let mut bytes = version.to_be_bytes().to_vec();
        bytes.extend_from_slice(&sid.to_be_bytes());
        bytes.extend_from_slice(&(address.len() as i32).to_be_bytes());
        bytes.extend_from_slice(address.as_bytes());
        bytes
    }

    #[test]
    fn rewrites_the_election_address_even_when_split() {
        let mut stream = handshake(PROTOCOL_VERSION_V1, 2, "127.0.0.1:4000");
        stream.extend_from_slice(b"rest");
        let mut hint = ElectionHint::new("127.0.0.1:55555".into());
        let mut out = Vec::new();
        for byte in &stream {
            out.extend(hint.feed(std::slice::from_ref(byte)));
        }
        let mut expected = handshake(PROTOCOL_VERSION_V1, 2, "127.0.0.1:55555");
        expected.extend_from_slice(b"rest");
        assert_eq!(out, expected);
        assert_eq!(hint.feed(b"more"), b"more");
    }

    #[test]
    fn passes_other_streams_through() {
        let stream = handshake(3, 2, "x");
        let mut hint = ElectionHint::new("127.0.0.1:1".into());
        assert_eq!(hint.feed(&stream), stream);
    }
}
