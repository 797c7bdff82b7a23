//! Sessions over TLS (feature `tls`).
//!
//! Owns: [`TlsConfig`] (the CA to trust, and a client certificate for mutual TLS), turning it
//! into zookeeper-client's TLS options, and the handshake check that tells a certificate problem
//! from a network one before a session is built. Does not own the connection: zookeeper-client
//! makes it, and retries a failed handshake exactly as it retries a refused connection, until
//! the session timeout, and then again for ever under a rebuild policy. A wrong CA, a server
//! certificate for another name or a client certificate the server refuses would so look like
//! a server that is down; the check makes them an [`Error::Tls`] instead, once, and the session
//! actor stops.
//!
//! Hostname verification uses the host of the connect string, as the Java client does: a
//! server's certificate must name the host the client dials (`localhost`, `zk1.example`, ...).

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::AsyncReadExt;

use crate::error::Error;

/// How long the check waits for the server's verdict on our certificate after the handshake:
/// with TLS 1.3 a server that refuses a client certificate says so only then.
const VERDICT_WAIT: Duration = Duration::from_millis(200);
/// How long the check gives one host to accept the connection and finish the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// TLS settings of a session: every host of the connect string is dialled over TLS.
///
/// ```
/// # #[cfg(feature = "tls")] {
/// use actix_zookeeper::{SessionConfig, TlsConfig};
/// # let (ca_pem, cert_pem, key_pem) = (String::new(), String::new(), String::new());
/// let config = SessionConfig::new("zk1.example:2281")
///     .with_tls(TlsConfig::new(ca_pem).with_identity(cert_pem, key_pem));
/// # }
/// ```
#[derive(Clone)]
#[must_use]
pub struct TlsConfig {
    ca_pem: String,
    identity: Option<(String, String)>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("TlsConfig").field("client_certificate", &self.identity.is_some()).finish()
    }
}

impl TlsConfig {
    /// Trust the CA certificate(s) in `ca_pem` (PEM) for the servers' certificates.
    pub fn new(ca_pem: impl Into<String>) -> Self {
        TlsConfig { ca_pem: ca_pem.into(), identity: None }
    }

    /// Present this client certificate (PEM chain) and its private key (PEM, PKCS#8, PKCS#1 or
    /// SEC1) to servers that ask for one (mutual TLS).
    pub fn with_identity(mut self, certificate_pem: impl Into<String>, private_key_pem: impl Into<String>) -> Self {
        self.identity = Some((certificate_pem.into(), private_key_pem.into()));
        self
    }

    /// Checks that the PEM parts parse; [`Error::Tls`] names the part that does not.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        self.client_config().map(|_| ())
    }

    /// zookeeper-client's options for these settings.
    pub(crate) fn options(&self) -> Result<zookeeper_client::TlsOptions, Error> {
        let invalid = |part: &str, e: zookeeper_client::Error| config_error(format!("{part}: {e}"));
        let options = zookeeper_client::TlsOptions::new().with_pem_ca(&self.ca_pem).map_err(|e| invalid("CA", e))?;
        match &self.identity {
            None => Ok(options),
            Some((cert, key)) => options.with_pem_identity(cert, key).map_err(|e| invalid("client certificate", e)),
        }
    }

    fn client_config(&self) -> Result<rustls::ClientConfig, Error> {
        let mut roots = rustls::RootCertStore::empty();
        let mut found = 0;
        for cert in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| config_error(format!("CA: {e}")))?;
            roots.add(cert).map_err(|e| config_error(format!("CA: {e}")))?;
            found += 1;
        }
        if found == 0 {
            return Err(config_error("CA: no certificate in the PEM".into()));
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| config_error(e.to_string()))?
            .with_root_certificates(roots);
        match &self.identity {
            None => Ok(builder.with_no_client_auth()),
            Some((cert, key)) => {
                let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<_, _>>()
                    .map_err(|e| config_error(format!("client certificate: {e}")))?;
                if chain.is_empty() {
                    return Err(config_error("client certificate: no certificate in the PEM".into()));
                }
                let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
                    .map_err(|e| config_error(format!("client key: {e}")))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| config_error(format!("client key: {e}")))
            }
        }
    }

    /// Shakes hands with each host of `hosts` (`host:port,...`) as the session will. A
    /// certificate problem (ours or theirs) is [`Error::Tls`]; a host that cannot be reached is
    /// left to the client's retries, as is everything when one host shakes hands cleanly.
    pub(crate) async fn check(&self, hosts: &str) -> Result<(), Error> {
        let connector = tokio_rustls::TlsConnector::from(Arc::new(self.client_config()?));
        let mut refused = None;
        for host in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
            match handshake(&connector, host).await {
                Handshake::Done => return Ok(()),
                Handshake::Unreachable => {}
                Handshake::Refused(reason) => refused = refused.or(Some(Error::Tls { host: host.to_owned(), reason })),
            }
        }
        refused.map_or(Ok(()), Err)
    }
}

fn config_error(reason: String) -> Error {
    Error::Tls { host: "(configuration)".into(), reason }
}

enum Handshake {
    Done,
    Unreachable,
    Refused(String),
}

async fn handshake(connector: &tokio_rustls::TlsConnector, host: &str) -> Handshake {
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name).trim_matches(['[', ']']);
    let Ok(server_name) = ServerName::try_from(name.to_owned()) else {
        return Handshake::Refused(format!("{name:?} is not a host name TLS can verify"));
    };
    let Ok(Ok(tcp)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, tokio::net::TcpStream::connect(host)).await else {
        return Handshake::Unreachable;
    };
    let mut stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(server_name, tcp)).await {
        Err(_) => return Handshake::Unreachable,
        Ok(Err(error)) => return tls_failure(&error).map_or(Handshake::Unreachable, Handshake::Refused),
        Ok(Ok(stream)) => stream,
    };
    // The server speaks only after our connect request: anything but silence is its verdict.
    let mut byte = [0u8; 1];
    match tokio::time::timeout(VERDICT_WAIT, stream.read(&mut byte)).await {
        Ok(Err(error)) => tls_failure(&error).map_or(Handshake::Done, Handshake::Refused),
        _ => Handshake::Done,
    }
}

/// The TLS reason inside an I/O error, if it is one (not a reset or a timeout).
fn tls_failure(error: &std::io::Error) -> Option<String> {
    let tls = error.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(match tls {
        rustls::Error::AlertReceived(alert) => format!("the server refused the handshake ({alert:?})"),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pem_that_does_not_parse_is_named() {
        let err = TlsConfig::new("not a certificate").validate().expect_err("no CA");
        assert!(matches!(&err, Error::Tls { reason, .. } if reason.starts_with("CA")), "{err}");
    }
}
