//! Sessions over TLS against a real ZooKeeper with a TLS client port: a session and a
//! lock, mutual TLS, and the certificate problems that must end in `Error::Tls` rather than in
//! retries without end. Certificates are made here, for each test.
#![cfg(all(feature = "testkit", feature = "tls"))]

use crate::common;

use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_zookeeper::lock::*;
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{ServerOptions, ServerTls, ZkServer, expire_session};
use actix_zookeeper::{Error, TlsConfig};
use common::*;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

/// A CA, and certificates it signed.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, PEM.
struct Leaf {
    cert_pem: String,
    key_pem: String,
}

impl Ca {
    fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key")).expect("CA");
        Ca { issuer }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `names` (DNS names or IP addresses).
    fn issue(&self, names: &[&str]) -> Leaf {
        let key = KeyPair::generate().expect("key");
        let params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).expect("params");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        Leaf { cert_pem: cert.pem(), key_pem: key.serialize_pem() }
    }
}

/// A server whose TLS port presents a certificate for `names`, signed by `ca`, and that trusts
/// `ca` for client certificates (required when `client_auth`).
fn tls_server(ca: &Ca, names: &[&str], client_auth: bool) -> ZkServer {
    let leaf = ca.issue(names);
    let tls =
        ServerTls { certificate_pem: leaf.cert_pem, private_key_pem: leaf.key_pem, ca_pem: ca.pem(), client_auth };
    ZkServer::start_with(ServerOptions::default().with_tls(tls)).expect("a ZooKeeper server with a TLS port")
}

fn tls_config(server: &ZkServer, tls: TlsConfig) -> SessionConfig {
    let connect = server.secure_connect_string().expect("a TLS port");
    SessionConfig::new(connect).with_session_timeout(Duration::from_secs(4)).with_tls(tls)
}

/// What a session that cannot be built over TLS says, and how long it took to say it.
async fn refused(config: SessionConfig) -> (Error, Duration) {
    let started = Instant::now();
    let session = SessionHandle::start(config).expect("a valid configuration");
    let outcome = bounded("the session's verdict", session.connected()).await;
    let error = outcome.map(|_| ()).expect_err("no session may come up");
    (error, started.elapsed())
}

#[actix_rt::test]
async fn a_session_and_a_lock_over_tls() {
    init_tracing();
    let ca = Ca::new();
    let server = tls_server(&ca, &["localhost"], false);
    let (session, _) = connected(tls_config(&server, TlsConfig::new(ca.pem()))).await;
    session.create("/over-tls", "hello", CreateMode::Persistent).await.expect("create over TLS");
    let lock = LockActor::new(session.clone(), LockConfig::new("/lock")).start();
    let grant = lock.send(Acquire::default()).await.expect("actor").expect("lock over TLS");
    assert_eq!(children(&session, "/lock").await.len(), 1, "the lock's node is there");
    lock.send(Release).await.expect("actor").expect("release");
    assert!(grant.token.0 > 0);
    let data = session.get_data("/over-tls").await.expect("read over TLS");
    assert_eq!(data.data, b"hello");
    session.close().await;
}

#[actix_rt::test]
async fn mutual_tls_admits_a_client_certificate_of_the_ca_and_refuses_a_client_without_one() {
    init_tracing();
    let ca = Ca::new();
    let server = tls_server(&ca, &["localhost"], true);
    let client = ca.issue(&["client"]);
    let identity = TlsConfig::new(ca.pem()).with_identity(client.cert_pem, client.key_pem);
    let (session, _) = connected(tls_config(&server, identity)).await;
    session.create("/mutual", "", CreateMode::Persistent).await.expect("create over mutual TLS");
    session.close().await;

    let (error, took) = refused(tls_config(&server, TlsConfig::new(ca.pem()))).await;
    assert!(matches!(&error, Error::Tls { reason, .. } if reason.contains("refused")), "{error}");
    assert!(took < Duration::from_secs(4), "told in {took:?}, not after a session timeout of retries");
}

#[actix_rt::test]
async fn a_server_certificate_from_another_ca_is_a_tls_error_not_a_retry_loop() {
    init_tracing();
    let server = tls_server(&Ca::new(), &["localhost"], false);
    let stranger = Ca::new();
    let config = tls_config(&server, TlsConfig::new(stranger.pem()));
    let session = SessionHandle::start(config.clone()).expect("a valid configuration");
    let events = Recorded::<SessionEvent>::start();
    session.subscribe(events.recipient.clone());
    let outcome = bounded("the session's verdict", session.connected()).await;
    let error = outcome.map(|_| ()).expect_err("no session may come up");
    assert!(
        matches!(&error, Error::Tls { host, reason } if host.starts_with("localhost:") && reason.contains("invalid peer certificate")),
        "{error}"
    );
    events.wait_for(0, Duration::from_secs(5), |e| matches!(e, SessionEvent::Closed)).await;
    assert!(!events.snapshot().iter().any(|e| matches!(e, SessionEvent::Connected { .. })));
    // A request made meanwhile hears the same, not a timeout.
    let (error, took) = refused(config).await;
    assert!(matches!(error, Error::Tls { .. }), "{error}");
    assert!(took < Duration::from_secs(4), "told in {took:?}");
}

#[actix_rt::test]
async fn a_server_certificate_for_another_name_is_a_tls_error() {
    init_tracing();
    let ca = Ca::new();
    let server = tls_server(&ca, &["zk.example"], false);
    let (error, took) = refused(tls_config(&server, TlsConfig::new(ca.pem()))).await;
    assert!(matches!(&error, Error::Tls { reason, .. } if reason.contains("not valid for name")), "{error}");
    assert!(took < Duration::from_secs(4), "told in {took:?}");
}

#[actix_rt::test]
async fn a_tls_setting_that_does_not_parse_is_refused_before_anything_starts() {
    init_tracing();
    let config = SessionConfig::new("localhost:1").with_tls(TlsConfig::new("-----BEGIN CERTIFICATE-----\nnope\n"));
    let error = SessionHandle::start(config).map(|_| ()).expect_err("a CA that does not parse");
    assert!(
        matches!(&error, Error::Tls { host, reason } if host == "(configuration)" && reason.starts_with("CA")),
        "{error}"
    );
    let key_only = TlsConfig::new(Ca::new().pem()).with_identity("", "");
    let error = SessionHandle::start(SessionConfig::new("localhost:1").with_tls(key_only))
        .map(|_| ())
        .expect_err("no client certificate");
    assert!(matches!(&error, Error::Tls { reason, .. } if reason.starts_with("client certificate")), "{error}");
}

/// The fault case: a mutual-TLS session expired on the server is rebuilt over TLS (the
/// handshake check runs again and passes), its lock says `Lost { SessionExpired }`, and the
/// lock is taken again on the new session with a larger token.
#[actix_rt::test]
async fn a_tls_session_expired_on_the_server_is_rebuilt_over_tls_and_its_lock_is_lost() {
    init_tracing();
    let ca = Ca::new();
    let server = tls_server(&ca, &["localhost"], true);
    let client = ca.issue(&["client"]);
    let identity = TlsConfig::new(ca.pem()).with_identity(client.cert_pem, client.key_pem);
    let (session, events) = connected(tls_config(&server, identity)).await;
    let lock = LockActor::new(session.clone(), LockConfig::new("/lock")).start();
    let lock_events = Recorded::<LockEvent>::start();
    lock.do_send(Subscribe { recipient: lock_events.recipient.clone() });
    let grant = lock.send(Acquire::default()).await.expect("actor").expect("held over TLS");

    let info = session.session().await.expect("a session").info;
    expire_session(&server.connect_string(), &info).await.expect("expired on the server");
    events.wait_for(0, Duration::from_secs(20), |e| matches!(e, SessionEvent::Connected { generation: 2, .. })).await;
    let (_, lost) = lock_events.wait_for(0, Duration::from_secs(20), |e| matches!(e, LockEvent::Lost { .. })).await;
    assert!(
        matches!(&lost, LockEvent::Lost { token, reason: LockLostReason::SessionExpired, .. } if *token == grant.token),
        "{lost:?}"
    );
    let again = lock.send(Acquire::default()).await.expect("actor").expect("held again over TLS");
    assert!(again.token > grant.token);
    lock.send(Release).await.expect("actor").expect("release");
    session.close().await;
}
