//! ACME (RFC 8555) against a real ACME server: Debian's `pebble`, started by the
//! test on free loopback ports with a generated configuration (its HTTPS
//! certificate made here with rcgen, `PEBBLE_VA_NOSLEEP=1`, short-lived
//! certificates), resolving the test names to 127.0.0.1 through a dnsmasq the test
//! starts (`pebble -dnsserver`). Pebble's validation ports are Palisade's
//! listeners: `httpPort` the plain listener (HTTP-01), `tlsPort` the TLS listener
//! (TLS-ALPN-01).
//!
//! For each challenge: a certificate from pebble is served within 30 s of start
//! (the time is printed), it is renewed before it expires without a reload (the
//! served serial changes), the state directory keeps the account and the
//! certificate, and a restarted Palisade serves the certificate from disk at once
//! and reuses the account.
//!
//! pebble and dnsmasq missing is a failure, unless `PALISADE_ALLOW_SKIP=1`.

mod common;

use common::*;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

const PEBBLE: &str = "/usr/bin/pebble";
/// The validity pebble gives its certificates, in seconds.
const VALIDITY: u64 = 60;
/// Renewal is due this long before expiry: 15 s after issuance.
const RENEW_BEFORE: &str = "45s";

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

/// What a served certificate says.
#[derive(Debug, Clone, PartialEq)]
struct Served {
    serial: String,
    issuer: String,
    names: Vec<String>,
    not_before: i64,
    not_after: i64,
}

/// The leaf served for `sni` (a new client each time: nothing is resumed), or
/// `None` when the handshake fails (no certificate yet).
async fn served(addr: SocketAddr, sni: &str) -> Option<Served> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await.ok()?;
    let tls = tokio::time::timeout(
        Duration::from_secs(10),
        tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect(ServerName::try_from(sni.to_owned()).unwrap(), tcp),
    )
    .await
    .ok()?
    .ok()?;
    let der = tls.get_ref().1.peer_certificates()?.first()?.clone();
    let (_, x) = x509_parser::parse_x509_certificate(&der).unwrap();
    let names = x
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|g| match g {
                    x509_parser::extensions::GeneralName::DNSName(d) => Some((*d).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Some(Served {
        serial: x.raw_serial_as_string(),
        issuer: x.issuer().to_string(),
        names,
        not_before: x.validity().not_before.timestamp(),
        not_after: x.validity().not_after.timestamp(),
    })
}

/// A GET over TLS for `sni` (any certificate accepted); the body.
async fn https_get(addr: SocketAddr, sni: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from(sni.to_owned()).unwrap(), tcp)
        .await
        .unwrap();
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out).await;
    let out = text(&out);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

/// Polls until `pred` holds for the certificate served for `sni`, for up to
/// `limit`.
async fn wait_for_cert(
    addr: SocketAddr,
    sni: &str,
    limit: Duration,
    pred: impl Fn(&Served) -> bool,
) -> Option<Served> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = served(addr, sni).await
            && pred(&s)
        {
            return Some(s);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A pebble process on loopback, killed on drop.
struct Pebble {
    child: Child,
    directory: String,
    log: std::path::PathBuf,
}

impl Drop for Pebble {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- pebble log ---\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts pebble with its HTTPS on a free port (certificate `ca.pem`, which the
/// test's Palisade trusts through `acme.ca_file`), validating on `http_port` and
/// `tls_port` of 127.0.0.1 and resolving names through `dns`.
fn start_pebble(dir: &TempDir, http_port: u16, tls_port: u16, dns: SocketAddr) -> Pebble {
    start_pebble_on(dir, free_port(), http_port, tls_port, dns)
}

/// [`start_pebble`] on `port`; the HTTPS certificate is made once per directory.
fn start_pebble_on(
    dir: &TempDir,
    port: u16,
    http_port: u16,
    tls_port: u16,
    dns: SocketAddr,
) -> Pebble {
    if !dir.path("ca.pem").exists() {
        let made = rcgen::generate_simple_self_signed(vec![
            "127.0.0.1".to_owned(),
            "localhost".to_owned(),
        ])
        .unwrap();
        std::fs::write(dir.path("ca.pem"), made.cert.pem()).unwrap();
        std::fs::write(dir.path("ca.key"), made.signing_key.serialize_pem()).unwrap();
    }
    let cfg = serde_json::json!({
        "pebble": {
            "listenAddress": format!("127.0.0.1:{port}"),
            "managementListenAddress": "",
            "certificate": dir.path("ca.pem"),
            "privateKey": dir.path("ca.key"),
            "httpPort": http_port,
            "tlsPort": tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
            "certificateValidityPeriod": VALIDITY,
        }
    });
    std::fs::write(dir.path("pebble.json"), cfg.to_string()).unwrap();
    let log = dir.path("pebble.log");
    let child = Command::new(PEBBLE)
        .arg("-config")
        .arg(dir.path("pebble.json"))
        .arg("-dnsserver")
        .arg(dns.to_string())
        .arg("-strict=false")
        .env("PEBBLE_VA_NOSLEEP", "1")
        .env("PEBBLE_WFE_NONCEREJECT", "0")
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting pebble");
    let mut p = Pebble {
        child,
        directory: format!("https://127.0.0.1:{port}/dir"),
        log,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(s)) = p.child.try_wait() {
            panic!(
                "pebble exited ({s}): {}",
                std::fs::read_to_string(&p.log).unwrap_or_default()
            );
        }
        assert!(Instant::now() < deadline, "pebble did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    p
}

/// dnsmasq answering every name under `acme.test` with 127.0.0.1 (and no IPv6
/// address), killed on drop.
struct Dns(Child, SocketAddr);

impl Drop for Dns {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_dns() -> Dns {
    // An IPv4 address only: AAAA queries get an empty answer, so pebble
    // connects to 127.0.0.1, where Palisade listens.
    let (child, addr) = start_dnsmasq(&["--address=/acme.test/127.0.0.1".to_owned()]);
    Dns(child, addr)
}

/// Whether pebble and dnsmasq are here; a failure without them unless
/// `PALISADE_ALLOW_SKIP=1`.
fn tools_present() -> bool {
    let dnsmasq = ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("/usr/sbin/dnsmasq");
    required(
        Path::new(PEBBLE),
        "the ACME tests (pebble, the ACME test server)",
    )
    .is_some()
        && required(
            Path::new(dnsmasq),
            "the ACME tests (dnsmasq resolves the test names)",
        )
        .is_some()
}

fn palisade_config(
    http: SocketAddr,
    tls: SocketAddr,
    admin: SocketAddr,
    backend: SocketAddr,
    pebble: &Pebble,
    challenge: &str,
    name: &str,
) -> String {
    let plain = if challenge == "http-01" {
        format!("[[listener]]\naddress = \"{http}\"\n\n")
    } else {
        String::new()
    };
    format!(
        r#"{plain}[[listener]]
address = "{tls}"
tls = {{ acme = true }}

[[upstream]]
name = "app"
servers = ["{backend}"]

[admin]
address = "{admin}"

[acme]
directory = "{}"
contact = ["ops@acme.test"]
names = ["{name}"]
state_dir = "acme-state"
challenge = "{challenge}"
renew_before = "{RENEW_BEFORE}"
ca_file = "ca.pem"
retry_interval = "2s"
order_timeout = "60s"
"#,
        pebble.directory
    )
}

async fn obtains_and_renews(challenge: &str) {
    if !tools_present() {
        return;
    }
    let name = format!("{}.acme.test", challenge.replace('-', ""));
    let backend = Backend::start().await;
    let dir = TempDir::new(&format!("acme-{challenge}"));
    let dns = start_dns();
    let (http, tls, admin) = (
        loopback(free_port()),
        loopback(free_port()),
        loopback(free_port()),
    );
    let pebble = start_pebble(&dir, http.port(), tls.port(), dns.1);
    let cfg = palisade_config(http, tls, admin, backend.addr, &pebble, challenge, &name);
    let started = Instant::now();
    let p = Palisade::start(&dir, &cfg, tls);

    // A certificate from pebble within 30 s of start.
    let first = wait_for_cert(tls, &name, Duration::from_secs(30), |_| true).await;
    let elapsed = started.elapsed();
    let Some(first) = first else {
        panic!(
            "no certificate served within 30 s ({challenge}): {}",
            p.stderr_text()
        );
    };
    eprintln!(
        "{challenge}: pebble certificate served {:.2} s after start (serial {})",
        elapsed.as_secs_f64(),
        first.serial
    );
    assert!(first.issuer.contains("Pebble"), "{first:?}");
    assert_eq!(first.names, std::slice::from_ref(&name));
    assert!(
        first.not_after - first.not_before <= VALIDITY as i64 + 1,
        "pebble was asked for {VALIDITY} s certificates: {first:?}"
    );
    // The listener serves requests with it.
    assert_eq!(https_get(tls, &name, "/").await, "hello from backend");
    if challenge == "http-01" {
        assert!(
            p.stderr_text()
                .contains("acme: answered the HTTP-01 challenge /.well-known/acme-challenge/"),
            "{}",
            p.stderr_text()
        );
        // Only pending tokens are answered: any other path under the prefix goes
        // to the rules and the routes like any request.
        let r = get(http, "/.well-known/acme-challenge/not-a-token", "").await;
        assert_eq!((r.status, r.text().as_str()), (200, "hello from backend"));
        assert!(
            backend
                .requests()
                .iter()
                .any(|s| s.uri == "/.well-known/acme-challenge/not-a-token")
        );
        assert!(
            !backend
                .requests()
                .iter()
                .any(|s| s.uri.starts_with("/.well-known/acme-challenge/")
                    && s.uri != "/.well-known/acme-challenge/not-a-token"),
            "a validation request reached the backend"
        );
    }
    assert!(
        p.stderr_text().contains("certificate issued"),
        "{}",
        p.stderr_text()
    );

    // Renewed before it expires (renew_before is 45 s of 60), without a reload.
    let renewed = wait_for_cert(tls, &name, Duration::from_secs(60), |s| {
        s.serial != first.serial
    })
    .await
    .unwrap_or_else(|| panic!("not renewed ({challenge}): {}", p.stderr_text()));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(now < first.not_after, "renewed only after expiry");
    assert!(renewed.not_after > first.not_after, "{renewed:?} {first:?}");
    assert!(
        p.stderr_text().contains("certificate renewed"),
        "{}",
        p.stderr_text()
    );
    assert!(!p.stderr_text().contains("SIGHUP"));

    // Metrics and status say so.
    let m = send_raw(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap()
    .text();
    let expiry = m
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!(
                "palisade_acme_certificate_expiry_seconds{{name=\"{name}\"}} "
            ))
        })
        .unwrap_or_else(|| panic!("no expiry in {m}"));
    assert!(expiry.parse::<i64>().unwrap() >= renewed.not_after, "{m}");
    assert!(
        m.contains(&format!(
            "palisade_acme_orders_total{{name=\"{name}\",result=\"ok\"}} "
        )),
        "{m}"
    );
    let status: serde_json::Value = serde_json::from_str(
        &send_raw(
            admin,
            b"GET /status HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap()
        .text(),
    )
    .unwrap();
    assert_eq!(status["acme"]["names"][0]["name"], name.as_str());
    assert_eq!(status["acme"]["challenge"], challenge);

    // The state directory keeps the account and the certificate; a restart serves
    // the certificate on disk at once and reuses the account.
    let state = dir.path("acme-state");
    assert!(state.join("account.json").is_file());
    assert!(state.join(format!("certs/{name}.crt")).is_file());
    let key = state.join(format!("certs/{name}.key"));
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    drop(p);
    let p = Palisade::start(&dir, &cfg, tls);
    let again = served(tls, &name).await;
    assert!(
        again.as_ref().is_some_and(|s| s.issuer.contains("Pebble")),
        "the certificate on disk is served at once: {again:?} {}",
        p.stderr_text()
    );
    assert!(
        wait_for_line(&p.stderr, Duration::from_secs(5), |l| l
            .contains(&format!("acme: {name}: certificate from")))
        .is_some(),
        "{}",
        p.stderr_text()
    );
    // The next renewal uses the saved account: no new one is created.
    let renewed_again = wait_for_cert(tls, &name, Duration::from_secs(60), |s| {
        s.serial != renewed.serial && s.serial != first.serial
    })
    .await;
    assert!(renewed_again.is_some(), "{}", p.stderr_text());
    assert!(
        !p.stderr_text().contains("created at"),
        "the account on disk is reused: {}",
        p.stderr_text()
    );
    drop(pebble);
}

#[tokio::test]
async fn http01_certificate_served_within_30s_and_renewed() {
    obtains_and_renews("http-01").await;
}

#[tokio::test]
async fn tls_alpn01_certificate_served_within_30s_and_renewed() {
    obtains_and_renews("tls-alpn-01").await;
}

/// Without a reachable ACME server: the listeners serve (the plain one, and the
/// TLS one with its own certificate as the default), the failures are retried with
/// a doubling wait and reported in `/status` and `/metrics`. Needs no pebble.
#[tokio::test]
async fn an_unreachable_ca_is_retried_with_backoff_and_reported() {
    let backend = Backend::start().await;
    let dir = TempDir::new("acme-down");
    let own = rcgen::generate_simple_self_signed(vec!["own.test".to_owned()]).unwrap();
    std::fs::write(dir.path("own.crt"), own.cert.pem()).unwrap();
    std::fs::write(dir.path("own.key"), own.signing_key.serialize_pem()).unwrap();
    std::fs::write(dir.path("ca.pem"), own.cert.pem()).unwrap();
    let (http, tls, admin, closed) = (
        loopback(free_port()),
        loopback(free_port()),
        loopback(free_port()),
        free_port(),
    );
    let cfg = format!(
        r#"[[listener]]
address = "{http}"

[[listener]]
address = "{tls}"
tls = {{ cert = "own.crt", key = "own.key" }}

[[upstream]]
name = "app"
servers = ["{}"]

[admin]
address = "{admin}"

[acme]
directory = "https://127.0.0.1:{closed}/dir"
names = ["down.acme.test"]
state_dir = "state"
ca_file = "ca.pem"
retry_interval = "1s"
"#,
        backend.addr
    );
    let p = Palisade::start(&dir, &cfg, http);
    let r = get(http, "/", "").await;
    assert_eq!(r.status, 200);
    // No ACME certificate: the listener's own is the default for every name.
    let s = served(tls, "down.acme.test")
        .await
        .expect("the listener's own certificate");
    assert_eq!(s.names, ["own.test"]);
    // Failures in a row: 1 s, then 2 s, then 4 s apart.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let st: serde_json::Value = serde_json::from_str(
            &send_raw(
                admin,
                b"GET /status HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            )
            .await
            .unwrap()
            .text(),
        )
        .unwrap();
        if st["acme"]["names"][0]["consecutive_failures"].as_u64() >= Some(3) {
            break st;
        }
        assert!(Instant::now() < deadline, "{st} {}", p.stderr_text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let n = &status["acme"]["names"][0];
    assert_eq!(n["name"], "down.acme.test");
    assert!(n["serial"].is_null());
    assert!(n["last_error"]["error"].as_str().is_some(), "{n}");
    let log = p.stderr_text();
    for wait in [
        "next attempt in 1s",
        "next attempt in 2s",
        "next attempt in 4s",
    ] {
        assert!(log.contains(wait), "{wait}: {log}");
    }
    assert!(
        log.contains("acme: down.acme.test: order failed (1 in a row)"),
        "{log}"
    );
    let failed = metric(
        admin,
        "palisade_acme_orders_total{name=\"down.acme.test\",result=\"error\"}",
    )
    .await;
    assert!(failed >= 3.0);
    assert_eq!(get(http, "/", "").await.status, 200);
}

/// A CA that lost the account (pebble keeps nothing across a restart): the failed
/// renewal sets the saved account aside, the next attempt creates a new one, and the
/// certificate is renewed.
#[tokio::test]
async fn a_ca_that_forgot_the_account_gets_a_new_one() {
    if !tools_present() {
        return;
    }
    let name = "forgot.acme.test";
    let backend = Backend::start().await;
    let dir = TempDir::new("acme-forgot");
    let dns = start_dns();
    let (http, tls, admin, port) = (
        loopback(free_port()),
        loopback(free_port()),
        loopback(free_port()),
        free_port(),
    );
    let pebble = start_pebble_on(&dir, port, http.port(), tls.port(), dns.1);
    let cfg = palisade_config(http, tls, admin, backend.addr, &pebble, "http-01", name);
    let p = Palisade::start(&dir, &cfg, tls);
    let first = wait_for_cert(tls, name, Duration::from_secs(30), |_| true)
        .await
        .unwrap_or_else(|| panic!("no certificate: {}", p.stderr_text()));
    drop(pebble);
    let _pebble = start_pebble_on(&dir, port, http.port(), tls.port(), dns.1);
    let renewed = wait_for_cert(tls, name, Duration::from_secs(60), |s| {
        s.serial != first.serial
    })
    .await;
    let log = p.stderr_text();
    assert!(renewed.is_some(), "{log}");
    assert!(log.contains("does not know the account"), "{log}");
    assert_eq!(log.matches("created at").count(), 2, "{log}");
    assert!(dir.path("acme-state/account.json.unknown").is_file());
}
