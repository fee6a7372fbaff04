//! TLS session resumption on the listener: with the defaults a returning client
//! resumes (TLS 1.3 and 1.2: tickets, and TLS 1.2 session IDs when tickets are
//! off); with `session_tickets = false` and `session_cache = 0` every handshake is a
//! full one.

mod common;

use common::*;
use rustls::HandshakeKind;
use rustls::pki_types::{CertificateDer, ServerName};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One client configuration (so one client session store) for `version`.
fn client(
    cert: &CertificateDer<'static>,
    version: &'static rustls::SupportedProtocolVersion,
) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[version])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
}

/// Connects, sends one request and reads the whole answer (which also reads the
/// tickets a TLS 1.3 server sends after the handshake); returns how the handshake
/// went.
async fn exchange(addr: std::net::SocketAddr, c: &tokio_rustls::TlsConnector) -> HandshakeKind {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tls = c
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let kind = tls.get_ref().1.handshake_kind().unwrap();
    tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out).await;
    assert!(out.starts_with(b"HTTP/1.1 200"), "{}", text(&out));
    kind
}

async fn kinds(tls_extra: &str) -> Vec<(&'static str, HandshakeKind, HandshakeKind)> {
    let backend = Backend::start().await;
    let dir = TempDir::new("tls-resumption");
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(dir.path("cert.pem"), made.cert.pem()).unwrap();
    std::fs::write(dir.path("key.pem"), made.signing_key.serialize_pem()).unwrap();
    let cert = made.cert.der().clone();
    let listen = loopback(free_port());
    let cfg = format!(
        "[[listener]]\naddress = \"{listen}\"\nhttp2 = false\ntls = {{ cert = \"cert.pem\", key = \"key.pem\"{tls_extra} }}\n\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n",
        backend.addr
    );
    let p = Palisade::start(&dir, &cfg, listen);
    let mut out = Vec::new();
    for (name, version) in [
        ("TLS 1.3", &rustls::version::TLS13),
        ("TLS 1.2", &rustls::version::TLS12),
    ] {
        let c = client(&cert, version);
        let first = exchange(p.addr, &c).await;
        let second = exchange(p.addr, &c).await;
        out.push((name, first, second));
    }
    out
}

#[tokio::test]
async fn returning_clients_resume_by_default() {
    for (name, first, second) in kinds("").await {
        assert_eq!(first, HandshakeKind::Full, "{name}");
        assert_eq!(second, HandshakeKind::Resumed, "{name}");
    }
}

#[tokio::test]
async fn the_session_cache_alone_resumes() {
    for (name, first, second) in kinds(", session_tickets = false").await {
        assert_eq!(first, HandshakeKind::Full, "{name}");
        // Without tickets a TLS 1.3 server resumes from its cache as well (the
        // "ticket" is then only the cache key).
        assert_eq!(second, HandshakeKind::Resumed, "{name}");
    }
}

#[tokio::test]
async fn nothing_resumes_with_both_off() {
    for (name, first, second) in kinds(", session_tickets = false, session_cache = 0").await {
        assert_eq!(first, HandshakeKind::Full, "{name}");
        assert_eq!(second, HandshakeKind::Full, "{name}");
    }
}
