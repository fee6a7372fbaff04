//! Certificates chosen by SNI on a TLS listener, against the real binary: a pair
//! in `cert`/`key` (the default), pairs in `certificates` (one a wildcard), and a
//! `certificate_dir` (`NAME.crt` with `NAME.key`, and a `NAME.pem` holding both);
//! clients without SNI or with an unknown name get the default. Certificates
//! replaced on disk are served after the periodic check without a reload, a broken
//! replacement keeps the certificate in force (and says why), and SIGHUP applies a
//! changed list of certificates. `palisade check` names a bad PEM file.
//!
//! The certificates are made in-process with rcgen.

mod common;

use common::*;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Accepts any certificate: the tests look at which one was served.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A new client (no session to resume) that accepts any certificate.
fn any_cert_client() -> tokio_rustls::TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
}

/// The leaf certificate served to a client asking for `sni` (`None`: no SNI is
/// sent, as for a client connecting by address); `None` when the handshake fails.
async fn served(addr: SocketAddr, sni: Option<&str>) -> Option<CertificateDer<'static>> {
    let tcp = TcpStream::connect(addr).await.ok()?;
    let name = match sni {
        Some(n) => ServerName::try_from(n.to_owned()).unwrap(),
        None => ServerName::IpAddress(addr.ip().into()),
    };
    let tls = tokio::time::timeout(
        Duration::from_secs(10),
        any_cert_client().connect(name, tcp),
    )
    .await
    .ok()?
    .ok()?;
    tls.get_ref().1.peer_certificates()?.first().cloned()
}

/// A self-signed certificate for `names`: (PEM chain, PEM key, DER).
fn make(names: &[&str]) -> (String, String, CertificateDer<'static>) {
    let c = rcgen::generate_simple_self_signed(
        names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
    )
    .unwrap();
    (
        c.cert.pem(),
        c.signing_key.serialize_pem(),
        c.cert.der().clone(),
    )
}

/// Writes a pair the way certificate tools do: temporary files renamed over the
/// old ones, the key first.
fn replace(cert_path: &Path, key_path: &Path, cert: &str, key: &str) {
    let tmp = cert_path.with_extension("tmp");
    std::fs::write(&tmp, key).unwrap();
    std::fs::rename(&tmp, key_path).unwrap();
    std::fs::write(&tmp, cert).unwrap();
    std::fs::rename(&tmp, cert_path).unwrap();
}

/// Polls until `sni` is served `want`, for up to `limit`.
async fn wait_served(
    addr: SocketAddr,
    sni: Option<&str>,
    want: &CertificateDer<'static>,
    limit: Duration,
) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if served(addr, sni).await.as_ref() == Some(want) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

struct Site {
    dir: TempDir,
    default: CertificateDer<'static>,
    a: CertificateDer<'static>,
    wild: CertificateDer<'static>,
    b: CertificateDer<'static>,
    c: CertificateDer<'static>,
}

/// The files of every test: `default.crt` (cert/key), `a.crt` and `wild.crt` in
/// `certificates`, `certs/b.crt`+`b.key` and `certs/c.pem` in `certificate_dir`.
fn site() -> Site {
    let dir = TempDir::new("tls-sni");
    std::fs::create_dir_all(dir.path("certs")).unwrap();
    let mut der = Vec::new();
    for (file, names) in [
        ("default", &["default.test"][..]),
        ("a", &["a.test", "www.a.test"][..]),
        ("wild", &["*.wild.test"][..]),
        ("certs/b", &["b.test"][..]),
    ] {
        let (c, k, d) = make(names);
        std::fs::write(dir.path(&format!("{file}.crt")), c).unwrap();
        std::fs::write(dir.path(&format!("{file}.key")), k).unwrap();
        der.push(d);
    }
    let (c, k, d) = make(&["c.test"]);
    std::fs::write(dir.path("certs/c.pem"), format!("{c}{k}")).unwrap();
    der.push(d);
    let mut der = der.into_iter();
    let mut next = || der.next().unwrap();
    Site {
        default: next(),
        a: next(),
        wild: next(),
        b: next(),
        c: next(),
        dir,
    }
}

fn config(listen: SocketAddr, backend: SocketAddr, watch: &str) -> String {
    format!(
        r#"[[listener]]
address = "{listen}"
[listener.tls]
cert = "default.crt"
key = "default.key"
certificates = [{{ cert = "a.crt", key = "a.key" }}, {{ cert = "wild.crt", key = "wild.key" }}]
certificate_dir = "certs"
watch_interval = "{watch}"

[[upstream]]
name = "app"
servers = ["{backend}"]
"#
    )
}

#[tokio::test]
async fn certificates_are_chosen_by_sni_with_a_wildcard_and_a_default() {
    let backend = Backend::start().await;
    let s = site();
    let listen = loopback(free_port());
    let _p = Palisade::start(&s.dir, &config(listen, backend.addr, "10s"), listen);
    let cases: [(Option<&str>, &CertificateDer<'static>); 10] = [
        (Some("a.test"), &s.a),
        (Some("www.a.test"), &s.a),
        (Some("WWW.A.Test"), &s.a),
        (Some("api.wild.test"), &s.wild),
        (Some("b.test"), &s.b),
        (Some("c.test"), &s.c),
        (Some("default.test"), &s.default),
        // A wildcard matches one label only; unknown names get the default.
        (Some("x.y.wild.test"), &s.default),
        (Some("unknown.test"), &s.default),
        // No SNI at all.
        (None, &s.default),
    ];
    for (sni, want) in cases {
        assert_eq!(served(listen, sni).await.as_ref(), Some(want), "{sni:?}");
    }
    // And it serves: a request through a SNI-chosen certificate reaches the backend.
    let tcp = TcpStream::connect(listen).await.unwrap();
    let mut tls = any_cert_client()
        .connect(ServerName::try_from("b.test").unwrap(), tcp)
        .await
        .unwrap();
    tls.write_all(b"GET / HTTP/1.1\r\nHost: b.test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out).await;
    assert!(out.starts_with(b"HTTP/1.1 200"), "{}", text(&out));
    assert!(text(&out).ends_with("hello from backend"));
}

#[tokio::test]
async fn replaced_files_are_served_without_a_reload_and_a_broken_one_keeps_the_old() {
    let backend = Backend::start().await;
    let s = site();
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let cfg = format!(
        "{}\n[admin]\naddress = \"{admin}\"\n",
        config(listen, backend.addr, "1s")
    );
    let p = Palisade::start(&s.dir, &cfg, listen);
    assert_eq!(served(listen, Some("a.test")).await, Some(s.a.clone()));

    // A renewed certificate for a.test, written over the old files.
    let (c, k, a2) = make(&["a.test", "www.a.test"]);
    replace(&s.dir.path("a.crt"), &s.dir.path("a.key"), &c, &k);
    assert!(
        wait_served(listen, Some("a.test"), &a2, Duration::from_secs(20)).await,
        "the replaced certificate was not served: {}",
        p.stderr_text()
    );
    // A new pair dropped into the directory, for a new name.
    let (c, k, d) = make(&["d.test"]);
    std::fs::write(s.dir.path("certs/.d.tmp"), &k).unwrap();
    std::fs::rename(s.dir.path("certs/.d.tmp"), s.dir.path("certs/d.key")).unwrap();
    std::fs::write(s.dir.path("certs/.d.tmp"), &c).unwrap();
    std::fs::rename(s.dir.path("certs/.d.tmp"), s.dir.path("certs/d.crt")).unwrap();
    assert!(
        wait_served(listen, Some("d.test"), &d, Duration::from_secs(20)).await,
        "the new certificate in the directory was not served"
    );

    // A broken replacement: the certificate in force stays, and the log says why,
    // naming the file.
    std::fs::write(
        s.dir.path("a.crt"),
        "-----BEGIN CERTIFICATE-----\nnot base64!\n",
    )
    .unwrap();
    let line = wait_for_line(&p.stderr, Duration::from_secs(20), |l| {
        l.contains("a.crt") && l.contains("the certificate in force for it stays")
    });
    assert!(line.is_some(), "no error line: {}", p.stderr_text());
    // A key that does not belong to the certificate: the same.
    let (_, other_key, _) = make(&["b.test"]);
    std::fs::write(s.dir.path("certs/b.key"), other_key).unwrap();
    let line = wait_for_line(&p.stderr, Duration::from_secs(20), |l| {
        l.contains("b.key do not fit together")
    });
    assert!(line.is_some(), "no mismatch line: {}", p.stderr_text());
    for (sni, want) in [
        (Some("a.test"), &a2),
        (Some("b.test"), &s.b),
        (Some("d.test"), &d),
        (None, &s.default),
    ] {
        assert_eq!(served(listen, sni).await.as_ref(), Some(want), "{sni:?}");
    }
    let m = send_raw(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap()
    .text();
    let failures = m
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!(
                "palisade_tls_certificate_load_failures_total{{listener=\"{listen}\"}} "
            ))
        })
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no failure count in {m}"));
    assert!(failures >= 2, "{m}");
    assert!(
        m.contains("palisade_tls_certificate_expiry_seconds{"),
        "{m}"
    );
    let status = send_raw(
        admin,
        b"GET /status HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap()
    .text();
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let tls = &status["tls"][0];
    assert_eq!(tls["address"], listen.to_string());
    assert!(
        tls["last_error"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("do not fit together")),
        "{tls}"
    );

    // SIGHUP: a changed list of certificates applies without a restart (the
    // broken files are no longer named, so the reload succeeds).
    let (c, k, e) = make(&["e.test"]);
    std::fs::write(s.dir.path("e.crt"), c).unwrap();
    std::fs::write(s.dir.path("e.key"), k).unwrap();
    std::fs::remove_file(s.dir.path("certs/b.crt")).unwrap();
    std::fs::remove_file(s.dir.path("certs/b.key")).unwrap();
    let new_cfg = cfg.replace(
        "cert = \"default.crt\"\nkey = \"default.key\"\ncertificates = [{ cert = \"a.crt\", key = \"a.key\" }, ",
        "cert = \"e.crt\"\nkey = \"e.key\"\ncertificates = [",
    );
    assert_ne!(new_cfg, cfg);
    std::fs::write(s.dir.path("palisade.toml"), &new_cfg).unwrap();
    p.sighup();
    assert!(
        wait_served(listen, None, &e, Duration::from_secs(20)).await,
        "the reloaded default was not served: {}",
        p.stderr_text()
    );
    assert_eq!(
        served(listen, Some("api.wild.test")).await,
        Some(s.wild.clone())
    );
    assert_eq!(
        served(listen, Some("a.test")).await,
        Some(e.clone()),
        "a.test is gone"
    );
    assert!(
        !p.stderr_text().contains("take effect on restart"),
        "certificates are applied by a reload: {}",
        p.stderr_text()
    );

    // A reload naming a broken file fails whole: everything in force stays.
    std::fs::write(s.dir.path("e.key"), "nothing").unwrap();
    p.sighup();
    let line = wait_for_line(&p.stderr, Duration::from_secs(20), |l| {
        l.contains("reload failed") && l.contains("e.key")
    });
    assert!(line.is_some(), "{}", p.stderr_text());
    assert_eq!(served(listen, None).await, Some(e));
}

#[test]
fn check_names_a_bad_certificate_file() {
    let dir = TempDir::new("tls-check");
    let (c, k, _) = make(&["a.test"]);
    std::fs::write(dir.path("good.crt"), &c).unwrap();
    std::fs::write(dir.path("good.key"), &k).unwrap();
    std::fs::write(dir.path("bad.crt"), "hello").unwrap();
    std::fs::create_dir_all(dir.path("empty")).unwrap();
    std::fs::create_dir_all(dir.path("nokey")).unwrap();
    std::fs::write(dir.path("nokey/x.crt"), &c).unwrap();
    for (tls, want) in [
        (
            "{ cert = \"bad.crt\", key = \"good.key\" }",
            "bad.crt: no certificate found",
        ),
        (
            "{ cert = \"good.crt\", key = \"missing.key\" }",
            "missing.key: No such file",
        ),
        (
            "{ certificates = [{ cert = \"good.crt\", key = \"bad.crt\" }] }",
            "bad.crt: no private key found",
        ),
        (
            "{ certificate_dir = \"empty\" }",
            "empty: no certificate in it",
        ),
        ("{ certificate_dir = \"nokey\" }", "x.key beside it"),
        ("{ certificate_dir = \"missing\" }", "certificate_dir"),
        (
            "{ cert = \"good.crt\" }",
            "tls.cert and tls.key go together",
        ),
        ("{ session_cache = 5 }", "tls needs a certificate"),
    ] {
        let cfg = dir.path("palisade.toml");
        std::fs::write(
            &cfg,
            format!(
                "[[listener]]\naddress = \"127.0.0.1:1\"\ntls = {tls}\n[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:2\"]\n"
            ),
        )
        .unwrap();
        let out = palisade_check("--config", &cfg);
        let t = output_text(&out);
        assert!(!out.status.success(), "{tls}: {t}");
        assert!(t.contains(want), "{tls}: want {want:?} in {t}");
    }
}
