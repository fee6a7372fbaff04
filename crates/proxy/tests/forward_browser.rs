//! The forward proxy with a real browser: Debian's `chromium`, headless, set to
//! use the proxy (`--proxy-server`, loopback not bypassed), loads a page from a
//! local backend through it, and a page of a blocked category shows the block
//! page. Over `CONNECT`, it loads an HTTPS page from a local TLS origin through
//! an uninspected tunnel, and, trusting the inspection CA from an NSS database
//! made with `certutil` (as an operator would install it), through an inspected
//! one, where the rules refuse an attack in the query string. Without chromium
//! (or, for inspection, `certutil` from libnss3-tools) the tests fail unless
//! PALISADE_ALLOW_SKIP=1.

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;

const CHROMIUM: &str = "/usr/bin/chromium";
const CERTUTIL: &str = "/usr/bin/certutil";

/// Whether chromium is there; panics without it unless PALISADE_ALLOW_SKIP=1.
fn have_chromium() -> bool {
    if Path::new(CHROMIUM).exists() {
        return true;
    }
    if std::env::var("PALISADE_ALLOW_SKIP").as_deref() == Ok("1") {
        eprintln!("SKIPPED: the forward browser test needs {CHROMIUM}");
        return false;
    }
    panic!(
        "the forward browser test needs Debian's chromium (apt-get install chromium), or PALISADE_ALLOW_SKIP=1"
    );
}

/// The DOM chromium shows for `url` through the proxy at `proxy`, with `extra`
/// flags and, when given, `home` as its HOME (where it finds `.pki/nssdb`).
fn browse_with(proxy: SocketAddr, url: &str, extra: &[String], home: Option<&Path>) -> String {
    let dir = TempDir::new("forward-chromium");
    let mut cmd = Command::new("timeout");
    if let Some(home) = home {
        cmd.env("HOME", home);
    }
    let out = cmd
        .args(["-k", "10", "120", CHROMIUM])
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
        ])
        .arg(format!("--proxy-server=http://{proxy}"))
        // Chromium sends loopback addresses direct unless told otherwise.
        .arg("--proxy-bypass-list=<-loopback>")
        .arg(format!("--user-data-dir={}", dir.0.display()))
        .args(extra)
        .args(["--dump-dom", url])
        .output()
        .expect("run chromium");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The DOM chromium shows for `url` through the proxy at `proxy`.
fn browse(proxy: SocketAddr, url: &str) -> String {
    browse_with(proxy, url, &[], None)
}

/// Waits (generously) for an access-log line satisfying `pred`.
fn access_line(dir: &TempDir, what: &str, pred: impl Fn(&str) -> bool) -> serde_json::Value {
    let log = dir.path("access.log");
    let Some(line) = wait_for_line(&log, Duration::from_secs(60), pred) else {
        panic!(
            "no access-log line for {what}: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    };
    serde_json::from_str(&line).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_loads_pages_through_the_proxy_and_shows_the_block_page() {
    if !have_chromium() {
        return;
    }
    let backend = Backend::start().await;
    let port = backend.addr.port();
    let dir = TempDir::new("forward-browser");
    std::fs::create_dir_all(dir.path("categories")).unwrap();
    std::fs::write(
        dir.path("categories/games.txt"),
        "# the backend's /games/ pages\n127.0.0.1/games/\n",
    )
    .unwrap();
    let listen = loopback(free_port());
    let cfg = format!(
        "[[listener]]\naddress = \"{listen}\"\nmode = \"forward\"\n\n[forward]\ncategories = \"categories\"\nblock_categories = [\"games\"]\n\n[logs]\naccess_log = \"{}\"\n",
        dir.path("access.log").display()
    );
    let _p = Palisade::start(&dir, &cfg, listen);

    // A page through the proxy: the backend's answer is what the browser shows.
    let page = tokio::task::spawn_blocking(move || {
        browse(listen, &format!("http://127.0.0.1:{port}/welcome"))
    })
    .await
    .unwrap();
    assert!(page.contains("hello from backend"), "{page}");
    assert!(
        backend.requests().iter().any(|r| r.uri == "/welcome"),
        "the backend never saw the page's request"
    );
    // The proxy carried it (the access log names it), not a direct connection.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(dir.path("access.log")).unwrap_or_default();
        if log.contains("/welcome") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no access-log line for /welcome: {log}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A blocked category: the browser shows the block page, and the backend
    // never sees the request.
    let page = tokio::task::spawn_blocking(move || {
        browse(listen, &format!("http://127.0.0.1:{port}/games/arcade"))
    })
    .await
    .unwrap();
    assert!(page.contains("Access refused"), "the block page: {page}");
    assert!(
        page.contains("games"),
        "the block page names the category: {page}"
    );
    assert!(!page.contains("hello from backend"), "{page}");
    assert!(
        !backend
            .requests()
            .iter()
            .any(|r| r.uri.starts_with("/games/")),
        "a blocked page reached the backend"
    );
}

/// A TLS origin on 127.0.0.1 with the certificate `cert` (key `key`): answers
/// every request with an HTML page naming its path, and records the paths.
async fn tls_origin(
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let record = Arc::clone(&record);
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = service_fn(move |req: Request<Incoming>| {
                    let record = Arc::clone(&record);
                    async move {
                        let uri = req.uri().to_string();
                        record.lock().unwrap().push(uri.clone());
                        let page = format!(
                            "<!DOCTYPE html><html><head><title>origin</title></head><body><p>the TLS origin served {}</p></body></html>",
                            req.uri().path()
                        );
                        let mut r = Response::new(Full::new(Bytes::from(page)));
                        r.headers_mut()
                            .insert("content-type", "text/html; charset=utf-8".parse().unwrap());
                        Ok::<_, Infallible>(r)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (addr, seen)
}

/// `--ignore-certificate-errors-spki-list`'s value for `key`: the base64 of the
/// SHA-256 of its SubjectPublicKeyInfo.
fn spki_pin(key: &rcgen::KeyPair) -> String {
    use base64::Engine as _;
    use rcgen::PublicKeyData as _;
    use sha2::Digest as _;
    base64::engine::general_purpose::STANDARD
        .encode(sha2::Sha256::digest(key.subject_public_key_info()))
}

/// A forward proxy on a free port allowing `CONNECT` to `port`, with `forward`
/// added to `[forward]` and `extra` after it; access and error logs in `dir`.
/// Returns it, its address and its admin listener's.
fn connect_proxy(
    dir: &TempDir,
    port: u16,
    forward: &str,
    extra: &str,
) -> (Palisade, SocketAddr, SocketAddr) {
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let cfg = format!(
        "[[listener]]\naddress = \"{listen}\"\nmode = \"forward\"\n\n[forward]\nconnect_ports = [{port}]\n{forward}\n\n[admin]\naddress = \"{admin}\"\n\n[logs]\nerror_log = \"{}\"\naccess_log = \"{}\"\n\n{extra}",
        dir.path("error.log").display(),
        dir.path("access.log").display()
    );
    (Palisade::start(dir, &cfg, listen), listen, admin)
}

/// The tunnel counter of `outcome`, waiting (generously) until it is at least
/// `want`.
async fn tunnels_counted(admin: SocketAddr, outcome: &str, want: f64) -> f64 {
    let series = format!("palisade_forward_tunnels_total{{outcome=\"{outcome}\"}}");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let n = metric(admin, &series).await;
        if n >= want || std::time::Instant::now() >= deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_loads_https_pages_through_a_connect_tunnel() {
    if !have_chromium() {
        return;
    }
    // The origin's certificate is self-signed: chromium is told to accept its
    // key (and no other) by its SPKI hash.
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let pin = spki_pin(&made.signing_key);
    let (origin, seen) = tls_origin(
        made.cert.der().clone(),
        PrivateKeyDer::Pkcs8(made.signing_key.serialize_der().into()),
    )
    .await;
    let port = origin.port();
    let dir = TempDir::new("forward-browser-connect");
    let (_p, listen, admin) = connect_proxy(&dir, port, "", "");

    let url = format!("https://localhost:{port}/tunnelled");
    let flags = vec![format!("--ignore-certificate-errors-spki-list={pin}")];
    let page = tokio::task::spawn_blocking(move || browse_with(listen, &url, &flags, None))
        .await
        .unwrap();
    // Text only the origin's page has: the browser got it over TLS.
    assert!(
        page.contains("the TLS origin served /tunnelled"),
        "the origin's page: {page}"
    );
    assert!(
        seen.lock().unwrap().iter().any(|u| u == "/tunnelled"),
        "the origin never saw the page's request"
    );
    // Through the proxy's tunnel: its CONNECT line (written when the tunnel
    // ends, which chromium's exit brings about) names the origin, and bytes
    // went both ways.
    let v = access_line(&dir, "the CONNECT", |l| {
        l.contains("\"method\":\"CONNECT\"") && l.contains(&format!("localhost:{port}"))
    });
    assert_eq!(v["uri"], format!("localhost:{port}"), "{v}");
    assert_eq!(v["status"], 200, "{v}");
    assert!(v["bytes_in"].as_u64().unwrap_or(0) > 300, "{v}");
    assert!(v["bytes_out"].as_u64().unwrap_or(0) > 300, "{v}");
    // Uninspected: the proxy logged no request of the tunnel's own.
    let log = std::fs::read_to_string(dir.path("access.log")).unwrap();
    assert!(!log.contains("\"uri\":\"/tunnelled\""), "{log}");
    assert!(tunnels_counted(admin, "spliced", 1.0).await >= 1.0);
    assert_eq!(
        metric(
            admin,
            "palisade_forward_tunnels_total{outcome=\"inspected\"}"
        )
        .await,
        0.0
    );
}

/// The rules of tests/forward.rs: a `<script` in an argument is refused.
const RULES: &str = r#"[[rules]]
inline = """
SecRuleEngine On
SecRule ARGS "@rx (?i)<script" "id:1,phase:2,deny,status:403,log,msg:'script tag'"
"""
"#;

/// Makes an NSS database in `home/.pki/nssdb` (where chromium on Linux looks)
/// trusting the CA in `ca` for TLS servers, as docs/forward.md tells operators.
fn trust_in_nssdb(home: &Path, ca: &Path) {
    let db = home.join(".pki/nssdb");
    std::fs::create_dir_all(&db).unwrap();
    let db = format!("sql:{}", db.display());
    let run = |args: &[&str]| {
        let out = Command::new(CERTUTIL)
            .args(args)
            .output()
            .expect("run certutil");
        assert!(
            out.status.success(),
            "certutil {args:?}: {}",
            output_text(&out)
        );
    };
    run(&["-N", "-d", &db, "--empty-password"]);
    run(&[
        "-A",
        "-d",
        &db,
        "-n",
        "Palisade inspection CA",
        "-t",
        "C,,",
        "-i",
        ca.to_str().unwrap(),
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_trusts_the_inspection_ca_and_the_rules_see_inside_the_tunnel() {
    if !have_chromium()
        || required(
            Path::new(CERTUTIL),
            "the inspection browser test (libnss3-tools)",
        )
        .is_none()
    {
        return;
    }
    // The origin: a certificate for localhost from a CA chromium does not
    // trust, only the proxy does (upstream_ca_file). A page chromium shows
    // was therefore served to it with the inspection CA's certificate.
    let (origin_ca_pem, leaf, key) = leaf_from_new_ca("Origin CA", &["localhost"]);
    let (origin, seen) = tls_origin(leaf, key).await;
    let port = origin.port();

    let dir = TempDir::new("forward-browser-inspect");
    inspection_files(&dir, &origin_ca_pem);
    std::fs::write(dir.path("inspect.txt"), "localhost\n").unwrap();
    std::fs::create_dir_all(dir.path("cats")).unwrap();
    std::fs::write(dir.path("cats/games.txt"), "localhost/games/\n").unwrap();
    let (_p, listen, admin) = connect_proxy(
        &dir,
        port,
        "inspect_ca_cert = \"inspect-ca.pem\"\ninspect_ca_key = \"inspect-ca.key\"\ninspect = [\"inspect.txt\"]\nupstream_ca_file = \"origin-ca.pem\"\ncategories = \"cats\"\nblock_categories = [\"games\"]",
        RULES,
    );
    let home = TempDir::new("forward-browser-home");
    trust_in_nssdb(&home.0, &dir.path("inspect-ca.pem"));

    // A page in the inspected tunnel: chromium accepts the minted certificate
    // and shows the origin's page; the proxy logged the decrypted GET.
    let url = format!("https://localhost:{port}/inspected");
    let home_dir = home.0.clone();
    let page = tokio::task::spawn_blocking(move || browse_with(listen, &url, &[], Some(&home_dir)))
        .await
        .unwrap();
    assert!(
        page.contains("the TLS origin served /inspected"),
        "the origin's page through the inspected tunnel: {page}"
    );
    let v = access_line(&dir, "the decrypted GET", |l| {
        l.contains("\"uri\":\"/inspected\"")
    });
    assert_eq!(v["method"], "GET", "{v}");
    assert_eq!(v["scheme"], "https", "{v}");
    assert_eq!(v["status"], 200, "{v}");
    assert!(v.to_string().contains(&format!("localhost:{port}")), "{v}");
    assert!(seen.lock().unwrap().iter().any(|u| u == "/inspected"));

    // An attack in the query string inside the tunnel: the rules refuse it
    // (they saw the decrypted request), chromium shows the 403, and the origin
    // never sees it.
    let url = format!("https://localhost:{port}/search?q=%3Cscript%3Ealert(1)%3C/script%3E");
    let home_dir = home.0.clone();
    let page = tokio::task::spawn_blocking(move || browse_with(listen, &url, &[], Some(&home_dir)))
        .await
        .unwrap();
    assert!(!page.contains("the TLS origin served"), "{page}");
    assert!(
        page.contains("403 Forbidden"),
        "the refusal in the browser: {page}"
    );
    let v = access_line(&dir, "the refused GET", |l| l.contains("\"uri\":\"/search"));
    assert_eq!(v["scheme"], "https", "{v}");
    assert_eq!(v["status"], 403, "{v}");
    assert!(
        !seen
            .lock()
            .unwrap()
            .iter()
            .any(|u| u.starts_with("/search")),
        "the attack reached the origin"
    );

    // A category by path, seen only once decrypted: the block page, in the
    // browser, inside the tunnel.
    let url = format!("https://localhost:{port}/games/chess");
    let home_dir = home.0.clone();
    let page = tokio::task::spawn_blocking(move || browse_with(listen, &url, &[], Some(&home_dir)))
        .await
        .unwrap();
    assert!(!page.contains("the TLS origin served"), "{page}");
    assert!(
        page.contains("<strong>games</strong>"),
        "the block page in the browser: {page}"
    );

    // Inspected tunnels, whose CONNECT lines (written when they ended) name
    // the origin.
    assert!(tunnels_counted(admin, "inspected", 3.0).await >= 3.0);
    let v = access_line(&dir, "the CONNECT", |l| {
        l.contains("\"method\":\"CONNECT\"") && l.contains(&format!("localhost:{port}"))
    });
    assert_eq!(v["status"], 200, "{v}");

    // Without the NSS database, chromium refuses the minted certificate: the
    // trust the test installed is what let it in.
    let url = format!("https://localhost:{port}/untrusted");
    let bare = TempDir::new("forward-browser-bare-home");
    let bare_dir = bare.0.clone();
    let page = tokio::task::spawn_blocking(move || browse_with(listen, &url, &[], Some(&bare_dir)))
        .await
        .unwrap();
    assert!(!page.contains("the TLS origin served"), "{page}");
    assert!(
        !seen.lock().unwrap().iter().any(|u| u == "/untrusted"),
        "a browser that does not trust the inspection CA got through"
    );
    assert!(
        tunnels_counted(admin, "inspect_failed", 1.0).await >= 1.0,
        "chromium's refused handshake was not counted"
    );
}
