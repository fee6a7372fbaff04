//! TLS to upstream servers through the real binary: a trusted certificate (from
//! `tls_ca_file`) is accepted, SNI carries the configured or the server's name, a
//! certificate the proxy cannot verify gives 502 with an error-log line naming the
//! pool and the server, `tls_verify = false` accepts it, and bad TLS settings are
//! configuration errors naming the key and the file.

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;

/// A TLS backend on 127.0.0.1 with a self-signed certificate for `names`. It
/// answers `tls ok PATH` and records the SNI of each handshake it completes.
struct TlsBackend {
    addr: SocketAddr,
    /// PEM of the certificate (it is its own authority).
    cert_pem: String,
    sni: Arc<Mutex<Vec<Option<String>>>>,
}

impl TlsBackend {
    async fn start(names: &[&str]) -> TlsBackend {
        let made = rcgen::generate_simple_self_signed(
            names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
        )
        .unwrap();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(made.signing_key.serialize_der().into());
        let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![made.cert.der().clone()], key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let sni: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
        let seen = sni.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    seen.lock()
                        .unwrap()
                        .push(tls.get_ref().1.server_name().map(str::to_owned));
                    let svc = service_fn(|req: Request<Incoming>| async move {
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(format!(
                            "tls ok {}",
                            req.uri().path()
                        )))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        TlsBackend {
            addr,
            cert_pem: made.cert.pem(),
            sni,
        }
    }

    fn sni(&self) -> Vec<Option<String>> {
        self.sni.lock().unwrap().clone()
    }
}

/// Starts palisade in front of `backend` with `upstream` as the pool's extra keys, with
/// one worker thread (idle upstream connections are kept per worker, and a test
/// checks that a second request reuses the first one's connection).
fn proxy(dir: &TempDir, backend: &TlsBackend, server: &str, upstream: &str) -> Palisade {
    std::fs::write(dir.path("ca.pem"), &backend.cert_pem).unwrap();
    let listen = loopback(free_port());
    let cfg = format!(
        "[server]\nworker_threads = 1\n\n[[listener]]\naddress = \"{listen}\"\n\n[[upstream]]\nname = \"secure\"\nservers = [\"{server}\"]\nconnect_timeout = \"2s\"\nread_timeout = \"5s\"\n{upstream}\n\n[logs]\nerror_log = \"error.log\"\n"
    );
    Palisade::start(dir, &cfg, listen)
}

async fn get(p: &Palisade, path: &str) -> RawResponse {
    send_raw(
        p.addr,
        format!("GET {path} HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn trusted_upstream_certificate_with_configured_sni() {
    let backend = TlsBackend::start(&["backend.test"]).await;
    let dir = TempDir::new("tls-sni");
    let p = proxy(
        &dir,
        &backend,
        &backend.addr.to_string(),
        "tls = true\ntls_ca_file = \"ca.pem\"\ntls_sni = \"backend.test\"",
    );
    let r = get(&p, "/a").await;
    assert_eq!(r.status, 200, "{}", p.stderr_text());
    assert_eq!(r.text(), "tls ok /a");
    // A second request reuses the pooled TLS connection.
    let r = get(&p, "/b").await;
    assert_eq!(r.text(), "tls ok /b");
    assert_eq!(backend.sni(), vec![Some("backend.test".to_owned())]);
}

#[tokio::test]
async fn https_server_entry_checks_the_ip_address() {
    // Written `https://127.0.0.1:PORT`: TLS without `tls = true`, and the
    // certificate must carry the IP address (no SNI is sent for an address).
    let backend = TlsBackend::start(&["127.0.0.1"]).await;
    let dir = TempDir::new("tls-ip");
    let p = proxy(
        &dir,
        &backend,
        &format!("https://{}", backend.addr),
        "tls_ca_file = \"ca.pem\"",
    );
    let r = get(&p, "/ip").await;
    assert_eq!(r.status, 200, "{}", p.stderr_text());
    assert_eq!(r.text(), "tls ok /ip");
    assert_eq!(backend.sni(), vec![None]);
}

#[tokio::test]
async fn unverifiable_certificate_is_a_502_naming_the_upstream() {
    let backend = TlsBackend::start(&["backend.test"]).await;
    let dir = TempDir::new("tls-untrusted");
    // The system roots do not know this self-signed certificate.
    let p = proxy(
        &dir,
        &backend,
        &backend.addr.to_string(),
        "tls = true\ntls_sni = \"backend.test\"",
    );
    let r = get(&p, "/never").await;
    assert_eq!(r.status, 502);
    let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| {
        l.contains("palisade:") && l.contains("TLS")
    })
    .expect("an error-log line about the TLS failure");
    assert!(line.contains("upstream secure"), "{line}");
    assert!(line.contains(&backend.addr.to_string()), "{line}");
    assert!(
        line.contains("certificate") && line.contains("UnknownIssuer"),
        "{line}"
    );
    assert!(backend.sni().is_empty(), "no handshake may complete");
}

#[tokio::test]
async fn certificate_for_another_name_is_a_502() {
    let backend = TlsBackend::start(&["backend.test"]).await;
    let dir = TempDir::new("tls-name");
    let p = proxy(
        &dir,
        &backend,
        &backend.addr.to_string(),
        "tls = true\ntls_ca_file = \"ca.pem\"\ntls_sni = \"other.test\"",
    );
    let r = get(&p, "/x").await;
    assert_eq!(r.status, 502);
    let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| {
        l.contains("TLS handshake failed")
    })
    .expect("an error-log line about the TLS failure");
    assert!(line.contains("not valid for name \"other.test\""), "{line}");
}

#[tokio::test]
async fn verification_can_be_switched_off() {
    let backend = TlsBackend::start(&["backend.test"]).await;
    let dir = TempDir::new("tls-noverify");
    let p = proxy(
        &dir,
        &backend,
        &backend.addr.to_string(),
        "tls = true\ntls_verify = false",
    );
    let r = get(&p, "/any").await;
    assert_eq!(r.status, 200, "{}", p.stderr_text());
    assert_eq!(r.text(), "tls ok /any");
}

fn check(dir: &TempDir, upstream: &str) -> (bool, String) {
    let cfg = format!(
        "[[listener]]\naddress = \"127.0.0.1:{}\"\n\n[[upstream]]\nname = \"secure\"\nservers = [\"127.0.0.1:9\"]\n{upstream}\n",
        free_port()
    );
    let path = dir.path("palisade.toml");
    std::fs::write(&path, cfg).unwrap();
    let out = std::process::Command::new(palisade_bin())
        .arg("check")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    (out.status.success(), text(&out.stderr))
}

#[test]
fn bad_tls_settings_name_the_key_and_the_file() {
    let dir = TempDir::new("tls-check");
    let file = dir.path("palisade.toml").display().to_string();

    let (ok, err) = check(&dir, "tls = true\ntls_ca_file = \"missing.pem\"");
    assert!(!ok);
    assert!(
        err.contains("tls_ca_file") && err.contains("missing.pem") && err.contains(&file),
        "{err}"
    );

    std::fs::write(dir.path("empty.pem"), "not a certificate\n").unwrap();
    let (ok, err) = check(&dir, "tls = true\ntls_ca_file = \"empty.pem\"");
    assert!(!ok);
    assert!(err.contains("no certificate found"), "{err}");

    let (ok, err) = check(&dir, "tls_sni = \"a.test\"");
    assert!(!ok);
    assert!(err.contains("tls_sni") && err.contains(&file), "{err}");

    let (ok, err) = check(&dir, "tls = true\ntls_sni = \"not a name\"");
    assert!(!ok);
    assert!(err.contains("tls_sni"), "{err}");

    let (ok, err) = check(&dir, "tls = true\ntls_verfy = false");
    assert!(!ok);
    assert!(err.contains("tls_verfy"), "{err}");

    let (ok, err) = check(&dir, "tls = true");
    assert!(ok, "system roots: {err}");
}
