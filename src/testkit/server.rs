//! A standalone ZooKeeper server.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::TestkitError;
use super::launch::{STANDALONE_MAIN, common_config, free_ports, fresh_temp_dir_in, write_file};
use super::process::ServerProcess;

const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts per (re)start; a start only repeats when the JVM exits during startup.
const START_ATTEMPTS: usize = 3;

/// A standalone ZooKeeper server on a free loopback port, with its data, config and log in a
/// fresh temporary directory.
///
/// Dropping it kills the server (SIGKILL), reaps it and deletes the directory.
#[derive(Debug)]
pub struct ZkServer {
    dir: PathBuf,
    port: u16,
    /// The TLS client port, when started with [`ServerOptions::with_tls`].
    secure_port: Option<u16>,
    process: ServerProcess,
}

impl ZkServer {
    /// Starts a server and blocks until it serves (`srvr` reports `Mode: standalone`).
    ///
    /// If the JVM exits during startup, e.g. because another process grabbed the chosen port in
    /// the meantime, it is retried on a new port.
    pub fn start() -> Result<ZkServer, TestkitError> {
        Self::start_with(ServerOptions::default())
    }

    /// Like [`start`](Self::start), with [`ServerOptions`] (e.g. for a benchmark).
    pub fn start_with(options: ServerOptions) -> Result<ZkServer, TestkitError> {
        let dir = fresh_temp_dir_in(options.parent_dir())?;
        let mut attempt = 1;
        loop {
            match Self::start_in(dir.clone(), &options) {
                Err(TestkitError::ExitedEarly { .. }) if attempt < START_ATTEMPTS => {
                    tracing::warn!(attempt, "ZooKeeper exited during startup; retrying on a new port");
                    attempt += 1;
                }
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(e);
                }
                Ok(server) => return Ok(server),
            }
        }
    }

    fn start_in(dir: PathBuf, options: &ServerOptions) -> Result<ZkServer, TestkitError> {
        let ports = free_ports(2)?;
        let (port, secure_port) = (ports[0], options.tls.as_ref().map(|_| ports[1]));
        let data_dir = dir.join("data");
        std::fs::create_dir_all(&data_dir)
            .map_err(|e| TestkitError::io(format!("create {}", data_dir.display()), e))?;
        let cfg_path = dir.join("zoo.cfg");
        let mut config = common_config(&data_dir, port);
        if let (Some(tls), Some(secure_port)) = (&options.tls, secure_port) {
            config.push_str(&tls.config(&dir, secure_port)?);
        }
        if !options.sasl_users.is_empty() {
            config.push_str("authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n");
        }
        write_file(&cfg_path, &config)?;
        let mut process =
            ServerProcess::new(STANDALONE_MAIN, cfg_path, dir.join("zookeeper.log"), format!("127.0.0.1:{port}"));
        process = options.apply(process);
        if !options.sasl_users.is_empty() {
            let jaas = dir.join("jaas.conf");
            let users: String =
                options.sasl_users.iter().map(|(user, password)| format!("\n    user_{user}=\"{password}\"")).collect();
            write_file(
                &jaas,
                &format!("Server {{\n    org.apache.zookeeper.server.auth.DigestLoginModule required{users};\n}};\n"),
            )?;
            process = process.with_property("java.security.auth.login.config", jaas.display());
        }
        let started = Instant::now();
        // One attempt here: a port conflict on a fresh start is better solved with a new port.
        process.start(READY_TIMEOUT, 1)?;
        tracing::info!(port, pid = process.pid(), elapsed = ?started.elapsed(), dir = %dir.display(), "started ZooKeeper server");
        Ok(ZkServer { dir, port, secure_port, process })
    }

    /// The connect string of the TLS client port (`localhost:<port>`: the name its certificate
    /// must carry), when started with [`ServerOptions::with_tls`].
    pub fn secure_connect_string(&self) -> Option<String> {
        self.secure_port.map(|port| format!("localhost:{port}"))
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`.
    pub fn address(&self) -> String {
        self.process.addr().to_owned()
    }

    /// The connect string for clients; the same as [`address`](Self::address).
    pub fn connect_string(&self) -> String {
        self.address()
    }

    /// The temporary directory holding `zoo.cfg`, `data/` and `zookeeper.log`.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Last lines of the server's log, for diagnostics.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }

    /// Whether the server process is alive (it may still be starting up).
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Graceful stop: SIGTERM and wait for the exit, SIGKILL after 10 s.
    /// [`TestkitError::NotRunning`] if already stopped.
    pub fn stop(&mut self) -> Result<(), TestkitError> {
        let pid = self.process.pid();
        self.process.terminate()?;
        tracing::info!(port = self.port, pid, "stopped ZooKeeper server");
        Ok(())
    }

    /// Crash: SIGKILL and wait for the exit. [`TestkitError::NotRunning`] if already stopped.
    pub fn kill(&mut self) -> Result<(), TestkitError> {
        let pid = self.process.pid();
        self.process.kill()?;
        tracing::info!(port = self.port, pid, "killed ZooKeeper server");
        Ok(())
    }

    /// Starts the server again with the same port and data, allowing sessions at most `max`
    /// (`maxSessionTimeout`; 60 s otherwise): a session that reconnects to it renegotiates its
    /// timeout down to `max`. A running server is stopped gracefully first.
    pub fn restart_with_max_session_timeout(&mut self, max: std::time::Duration) -> Result<(), TestkitError> {
        if self.process.is_running() {
            self.stop()?;
        }
        let cfg_path = self.dir.join("zoo.cfg");
        let config = std::fs::read_to_string(&cfg_path)
            .map_err(|e| TestkitError::io(format!("read {}", cfg_path.display()), e))?;
        let config: String = config
            .lines()
            .map(|line| {
                if line.starts_with("maxSessionTimeout=") {
                    format!("maxSessionTimeout={}\n", max.as_millis())
                } else {
                    format!("{line}\n")
                }
            })
            .collect();
        write_file(&cfg_path, &config)?;
        self.restart()
    }

    /// Starts the server again with the same port, data and configuration, and blocks until it
    /// serves. A running server is stopped gracefully first.
    pub fn restart(&mut self) -> Result<(), TestkitError> {
        if self.process.is_running() {
            self.stop()?;
        }
        let started = Instant::now();
        self.process.start(READY_TIMEOUT, START_ATTEMPTS)?;
        tracing::info!(port = self.port, pid = self.process.pid(), elapsed = ?started.elapsed(), "restarted ZooKeeper server");
        Ok(())
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        self.process.kill_quietly();
        if let Err(error) = std::fs::remove_dir_all(&self.dir) {
            tracing::debug!(%error, dir = %self.dir.display(), "cannot remove ZooKeeper temp dir");
        }
    }
}

/// How to start a [`ZkServer`].
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    parent_dir: Option<PathBuf>,
    full_jit: bool,
    container_check_interval: Option<std::time::Duration>,
    tls: Option<ServerTls>,
    sasl_users: Vec<(String, String)>,
}

/// A TLS client port for a [`ZkServer`] (beside its plain one, which the testkit's own checks
/// use): the server's certificate and key, and the CA it trusts for client certificates. All
/// PEM; the key in PKCS#8 (`BEGIN PRIVATE KEY`), as the server's PEM loader wants it.
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// The server's certificate (chain), PEM.
    pub certificate_pem: String,
    /// The server's private key, PKCS#8 PEM.
    pub private_key_pem: String,
    /// The CA whose client certificates the server accepts, PEM.
    pub ca_pem: String,
    /// Whether a client must present a certificate (mutual TLS).
    pub client_auth: bool,
}

impl ServerTls {
    /// The `zoo.cfg` lines of this TLS port, after writing its PEM files into `dir`.
    fn config(&self, dir: &std::path::Path, secure_port: u16) -> Result<String, TestkitError> {
        let key_store = dir.join("server.pem");
        let trust_store = dir.join("ca.pem");
        write_file(&key_store, &format!("{}\n{}", self.private_key_pem, self.certificate_pem))?;
        write_file(&trust_store, &self.ca_pem)?;
        Ok(format!(
            "secureClientPort={secure_port}\n\
             secureClientPortAddress=127.0.0.1\n\
             serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
             ssl.keyStore.location={}\n\
             ssl.keyStore.type=PEM\n\
             ssl.trustStore.location={}\n\
             ssl.trustStore.type=PEM\n\
             ssl.clientAuth={}\n",
            key_store.display(),
            trust_store.display(),
            if self.client_auth { "need" } else { "none" },
        ))
    }
}

impl ServerOptions {
    /// For benchmarks: data on tmpfs (`/dev/shm`, when present) and the JVM's optimizing
    /// compiler on, so that the server is as fast as a production one on this machine.
    pub fn benchmark() -> Self {
        let shm = PathBuf::from("/dev/shm");
        ServerOptions {
            parent_dir: shm.is_dir().then_some(shm),
            full_jit: true,
            container_check_interval: None,
            tls: None,
            sasl_users: Vec::new(),
        }
    }

    /// SASL DIGEST-MD5 with these `(user, password)` pairs (a JAAS `Server` section with
    /// `DigestLoginModule`); clients that do not use SASL are still served.
    pub fn with_sasl_digest_users(mut self, users: &[(&str, &str)]) -> Self {
        self.sasl_users = users.iter().map(|(u, p)| (u.to_string(), p.to_string())).collect();
        self
    }

    /// A TLS client port as well (see [`ZkServer::secure_connect_string`]).
    pub fn with_tls(mut self, tls: ServerTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// How often the server deletes empty container nodes and expired TTL nodes
    /// (`znode.container.checkIntervalMs`; the server's default is a minute), so a test can see
    /// a node reaped as a container or a TTL node is.
    pub fn with_container_check_interval(mut self, interval: std::time::Duration) -> Self {
        self.container_check_interval = Some(interval);
        self
    }

    /// The JVM settings of these options, on `process`.
    pub(crate) fn apply(&self, mut process: ServerProcess) -> ServerProcess {
        if self.full_jit {
            process = process.with_full_jit();
        }
        if let Some(interval) = self.container_check_interval {
            process = process.with_property("znode.container.checkIntervalMs", interval.as_millis());
        }
        process
    }

    /// Where the server's directory goes (the system temp dir when `None`).
    pub(crate) fn parent_dir(&self) -> Option<&std::path::Path> {
        self.parent_dir.as_deref()
    }

    /// Put the server's directory (config, data, log) under `parent`.
    pub fn with_parent_dir(mut self, parent: impl Into<PathBuf>) -> Self {
        self.parent_dir = Some(parent.into());
        self
    }
}
