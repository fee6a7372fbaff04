//! Test harness: a recording backend, the real `palisade` binary on loopback, and a
//! raw HTTP/1 client.

#![allow(dead_code)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the backend received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub uri: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// A backend on 127.0.0.1 that records every request. Paths:
/// `/slow?ms=N` answers after N ms; `/json` answers JSON; `/big?n=N` answers N bytes;
/// anything else answers `hello from backend`.
pub struct Backend {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Backend {
    pub async fn start() -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let rec = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let rec = rec.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let rec = rec.clone();
                        async move { Ok::<_, Infallible>(answer(rec, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Backend { addr, seen }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn query_num(uri: &hyper::Uri, key: &str) -> Option<u64> {
    uri.query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

async fn answer(rec: Arc<Mutex<Vec<Seen>>>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    rec.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.to_vec(),
    });
    let path = parts.uri.path();
    let (ctype, out): (&str, Bytes) = if path == "/slow" {
        let ms = query_num(&parts.uri, "ms").unwrap_or(200);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        ("text/plain", Bytes::from_static(b"slow done"))
    } else if path == "/json" {
        ("application/json", Bytes::from_static(b"{\"ok\":true}"))
    } else if path == "/big" {
        let n = query_num(&parts.uri, "n").unwrap_or(1_000_000) as usize;
        ("application/octet-stream", Bytes::from(vec![b'x'; n]))
    } else if path == "/leak" {
        (
            "text/html",
            Bytes::from_static(b"<html>secret: AKIA-LEAKED-KEY</html>"),
        )
    } else {
        ("text/plain", Bytes::from_static(b"hello from backend"))
    };
    let mut r = Response::new(Full::new(out));
    r.headers_mut()
        .insert("content-type", ctype.parse().unwrap());
    r.headers_mut().insert("x-backend", "1".parse().unwrap());
    r
}

/// A port that was free a moment ago.
///
/// The port is below the kernel's range of ephemeral ports, from which every bind to
/// port 0 (the tests' backends and clients) draws: between this call and the proxy's
/// own bind, no other test can be given it that way (a port from the ephemeral range
/// was once taken by another test's backend in that gap, and the proxy could not
/// listen). Each port is handed out once per process, from an offset per process.
pub fn free_port() -> u16 {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<usize>().ok())
        .unwrap_or(32768)
        .clamp(2048, 65535);
    let span = low - 1024;
    let offset = std::process::id() as usize * 7919;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 1024 + (offset + n) % span;
        if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return port as u16;
        }
    }
    panic!("no free port below {low}");
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A scratch directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "palisade-it-{name}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `palisade` binary the tests start: the one cargo built with them, or the one
/// `PALISADE_TEST_BIN` names (scripts/test-all runs the load run against the release
/// build that way).
pub fn palisade_bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("PALISADE_TEST_BIN")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_palisade").to_string())
    })
}

/// The real binary, running `run --config` in the background.
pub struct Palisade {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: PathBuf,
}

impl Palisade {
    /// Writes `config` to `dir/palisade.toml`, starts the binary and waits until
    /// `addr` accepts connections. The collection store defaults to `dir/store`
    /// (`PALISADE_STORE`), so tests never share one.
    pub fn start(dir: &TempDir, config: &str, addr: SocketAddr) -> Palisade {
        Self::start_with_env(dir, config, addr, &[])
    }

    /// [`Palisade::start`] with extra environment variables.
    pub fn start_with_env(
        dir: &TempDir,
        config: &str,
        addr: SocketAddr,
        env: &[(&str, &str)],
    ) -> Palisade {
        let cfg = dir.path("palisade.toml");
        std::fs::write(&cfg, config).unwrap();
        let stderr = dir.path("stderr.log");
        let mut cmd = Command::new(palisade_bin());
        cmd.env("PALISADE_STORE", dir.path("store"))
            .env_remove("PALISADE_ADMIN_TOKEN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .arg("run")
            .arg("--config")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut p = Palisade {
            child,
            addr,
            stderr,
        };
        // A bound, not a timing check: a debug build compiling CRS v4 on a busy
        // machine (CI runs builds and fuzzers side by side) can take a minute.
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if std::net::TcpStream::connect(addr).is_ok() {
                break;
            }
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!(
                    "palisade exited early ({status}): {}",
                    std::fs::read_to_string(&p.stderr).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "palisade did not start listening"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        p
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGHUP (reload rules, access lists, admin token; reopen logs).
    pub fn sighup(&self) {
        let ok = Command::new("kill")
            .args(["-HUP", &self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -HUP failed");
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let ok = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -TERM failed");
    }

    /// Waits for the process to exit, up to `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "palisade did not exit in {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Palisade {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- palisade stderr ---\n{}", self.stderr_text());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A parsed HTTP/1 response.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A raw TCP backend on a free loopback port: every accepted connection is handed
/// to `serve` with its number (1, 2, ...) in a task of its own. Returns the address.
pub async fn raw_backend<F, Fut>(serve: F) -> SocketAddr
where
    F: Fn(TcpStream, usize) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut n = 0;
        while let Ok((s, _)) = listener.accept().await {
            n += 1;
            tokio::spawn(serve(s, n));
        }
    });
    addr
}

/// Sends raw bytes on a new connection and reads one response.
pub async fn send_raw(addr: SocketAddr, request: &[u8]) -> std::io::Result<RawResponse> {
    let mut s = TcpStream::connect(addr).await?;
    s.write_all(request).await?;
    read_response(&mut s).await
}

/// A GET of `path` for `example.com` on its own connection, with `headers` (each line
/// ending in CRLF) added; panics when the exchange fails.
pub async fn get(listen: SocketAddr, path: &str, headers: &str) -> RawResponse {
    send_raw(
        listen,
        format!("GET {path} HTTP/1.1\r\nHost: example.com\r\n{headers}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap()
}

/// The value of one metric series (`name` with its labels, as `/metrics` prints it)
/// on the admin listener; panics when it is missing.
pub async fn metric(admin: SocketAddr, series: &str) -> f64 {
    let m = send_raw(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap()
    .text();
    m.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in {m}"))
}

/// Waits (up to 20 s) for the metric series to read `want`, for counters
/// that a connection's end updates after its client has seen the end; the
/// last value read.
pub async fn metric_reaches(admin: SocketAddr, series: &str, want: f64) -> f64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let v = metric(admin, series).await;
        if v == want || std::time::Instant::now() > deadline {
            return v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Reads one response from a connection (Content-Length, chunked, or until close).
///
/// It reads exactly the bytes of that response and no further, so the next
/// response on the connection (pipelined requests) stays in the socket for the next
/// call; interim 100 responses are skipped.
pub async fn read_response(s: &mut TcpStream) -> std::io::Result<RawResponse> {
    loop {
        let head = read_until_blank_line(s).await?;
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(&head) {
            Ok(httparse::Status::Complete(_)) => {}
            _ => return Err(std::io::ErrorKind::InvalidData.into()),
        }
        let status = resp.code.unwrap_or(0);
        if status == 100 {
            continue;
        }
        let hs: Vec<(String, String)> = resp
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_string(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect();
        let get = |k: &str| {
            hs.iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if let Some(cl) = get("content-length") {
            let cl: usize = cl
                .trim()
                .parse()
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidData))?;
            body.resize(cl, 0);
            s.read_exact(&mut body).await?;
        } else if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            loop {
                let line = read_line(s).await?;
                let size = std::str::from_utf8(&line)
                    .ok()
                    .and_then(|l| l.split(';').next())
                    .and_then(|l| usize::from_str_radix(l.trim(), 16).ok())
                    .ok_or(std::io::ErrorKind::InvalidData)?;
                if size == 0 {
                    // Trailer fields, then the blank line that ends the message.
                    while !read_line(s).await?.is_empty() {}
                    break;
                }
                let at = body.len();
                body.resize(at + size + 2, 0);
                s.read_exact(&mut body[at..]).await?;
                body.truncate(at + size);
            }
        } else {
            s.read_to_end(&mut body).await?;
        }
        return Ok(RawResponse {
            status,
            headers: hs,
            body,
        });
    }
}

/// Reads a response head up to and including its blank line, one byte at a time so
/// that nothing after it is consumed.
async fn read_until_blank_line(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(s.read_u8().await?);
    }
    Ok(head)
}

/// Reads one CRLF-terminated line and returns it without the line end.
async fn read_line(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    while !line.ends_with(b"\r\n") {
        line.push(s.read_u8().await?);
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

/// Reads until the peer closes the connection (or resets it) or `limit` passes;
/// returns what was read and whether the connection ended.
pub async fn read_until_close(s: &mut TcpStream, limit: Duration) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (out, true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, false),
        }
    }
}

/// Polls a file until a line satisfies `pred`, returning that line.
pub fn wait_for_line(path: &Path, limit: Duration, pred: impl Fn(&str) -> bool) -> Option<String> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Some(l) = text.lines().find(|l| pred(l))
        {
            return Some(l.to_owned());
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `None` (and a note) when `path` is missing and `PALISADE_ALLOW_SKIP=1`; panics
/// when it is missing otherwise: a test that needs an outside tool or data set
/// (Debian's CRS, haproxy, ...) fails without it unless skipping is asked for.
pub fn required(path: &Path, what: &str) -> Option<()> {
    if path.exists() {
        return Some(());
    }
    if std::env::var("PALISADE_ALLOW_SKIP").as_deref() == Ok("1") {
        eprintln!("SKIPPED: {what} ({} is missing)", path.display());
        return None;
    }
    panic!(
        "{what} needs {}; install it (see .ci/run) or set PALISADE_ALLOW_SKIP=1",
        path.display()
    );
}

/// A config with one HTTP listener in front of `backend`, plus `extra` TOML.
pub fn basic_config(listen: SocketAddr, backend: SocketAddr, extra: &str) -> String {
    format!(
        "[[listener]]\naddress = \"{listen}\"\n\n[[upstream]]\nname = \"app\"\nservers = [\"{backend}\"]\nconnect_timeout = \"2s\"\nread_timeout = \"5s\"\n\n{extra}\n"
    )
}

pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

// --- Persistent collections: `palisade ctx` on the store of a proxy started in a
// TempDir (its store is `dir/store`, see `Palisade::start`).

use serde_json::Value;
use std::process::Output;

/// `palisade ctx ARGS` on the store of the proxy configured in `dir`.
pub fn ctx(dir: &TempDir, args: &[&str]) -> Output {
    ctx_stdin(dir, args, None)
}

pub fn ctx_stdin(dir: &TempDir, args: &[&str], input: Option<&[u8]>) -> Output {
    use std::io::Write as _;
    let mut cmd = Command::new(palisade_bin());
    cmd.env("PALISADE_STORE", dir.path("store"))
        .arg("ctx")
        .arg("--config")
        .arg(dir.path("palisade.toml"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        if let Some(i) = input {
            stdin.write_all(i).unwrap();
        }
    }
    child.wait_with_output().unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The record `COLLECTION KEY` as `ctx get` prints it, if there is one.
pub fn record(dir: &TempDir, collection: &str, key: &str) -> Option<Value> {
    let out = ctx(dir, &["get", collection, key]);
    if !out.status.success() {
        assert!(
            text(&out.stderr).contains("no record"),
            "ctx get failed: {}",
            text(&out.stderr)
        );
        return None;
    }
    Some(serde_json::from_slice(&out.stdout).expect("one JSON line"))
}

pub fn var(rec: &Value, name: &str) -> Option<String> {
    rec["record"]["vars"][name]["value"]
        .as_str()
        .map(str::to_owned)
}

/// Waits until the record has been written by `n` transactions (or more).
pub fn wait_update_counter(dir: &TempDir, collection: &str, key: &str, n: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(r) = record(dir, collection, key)
            && r["record"]["update_counter"].as_u64().unwrap_or(0) >= n
        {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "{collection}:{key} never reached {n} writes"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn rules_toml(rules: &str) -> String {
    format!("[[rules]]\ninline = '''\n{rules}\n'''\n")
}

// --- TLS clients for the HTTPS and HTTP/2 listeners.

use rustls::pki_types::{CertificateDer, ServerName};

/// A TLS client configuration that trusts `cert` and offers `alpn`.
pub fn tls_client(cert: &CertificateDer<'static>, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).expect("the test certificate");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
}

/// Opens a TLS connection to `addr` for `localhost`, offering `alpn`.
pub async fn tls_connect(
    addr: SocketAddr,
    cert: &CertificateDer<'static>,
    alpn: &[&[u8]],
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    tls_client(cert, alpn)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// Runs `palisade check FLAG CFG` (`FLAG`: `-c` or `--config`) and returns its
/// output.
pub fn palisade_check(flag: &str, cfg: &Path) -> Output {
    Command::new(palisade_bin())
        .args(["check", flag])
        .arg(cfg)
        .output()
        .unwrap()
}

/// Standard output and standard error of a command, together.
pub fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts that `palisade check` refuses a configuration with `extra` TOML after a
/// listener and an upstream, with an error that contains `want`.
pub fn assert_check_refuses(extra: &str, want: &str) {
    let dir = TempDir::new("check-refuses");
    let cfg = dir.path("palisade.toml");
    std::fs::write(&cfg, basic_config(loopback(1), loopback(2), extra)).unwrap();
    let out = palisade_check("--config", &cfg);
    let text = output_text(&out);
    assert!(!out.status.success(), "{extra}: {text}");
    assert!(text.contains(want), "{extra}: {text}");
}

/// Starts Debian's dnsmasq (package dnsmasq-base, which CI installs; a missing one
/// is a failure) in the foreground on a free loopback port, with no configuration
/// file, no upstream name server and no /etc/hosts, plus `args`; waits until it
/// accepts connections and returns it (to kill by PID) and its address.
pub fn start_dnsmasq(args: &[String]) -> (Child, SocketAddr) {
    let port = free_port();
    let bin = ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("dnsmasq");
    let child = Command::new(bin)
        .args([
            "--no-daemon",
            "--conf-file=/dev/null",
            "--no-resolv",
            "--no-hosts",
            "--pid-file",
            "--listen-address=127.0.0.1",
            "--bind-interfaces",
        ])
        .args(args)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run dnsmasq ({e}): apt-get install dnsmasq-base (.ci/run does)")
        });
    let addr = loopback(port);
    let deadline = Instant::now() + Duration::from_secs(20);
    // dnsmasq serves TCP on the same port: accepting means it is up.
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "dnsmasq did not start on {addr}");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, addr)
}

/// `data` compressed as `kind` says: `gzip`, `zlib` (HTTP's `deflate`), `raw`
/// (raw deflate, as some servers send for `deflate`) or `br`.
pub fn compress(kind: &str, data: &[u8]) -> Vec<u8> {
    use flate2::{Compression, write};
    use std::io::Write as _;
    let mut out = Vec::new();
    let w: &mut dyn std::io::Write = &mut out;
    let mut enc: Box<dyn std::io::Write + '_> = match kind {
        "gzip" => Box::new(write::GzEncoder::new(w, Compression::default())),
        "zlib" => Box::new(write::ZlibEncoder::new(w, Compression::default())),
        "raw" => Box::new(write::DeflateEncoder::new(w, Compression::default())),
        "br" => Box::new(brotli::CompressorWriter::new(w, 4096, 5, 22)),
        _ => unreachable!("no such coding in these tests: {kind}"),
    };
    enc.write_all(data).unwrap();
    // Dropping an encoder writes the rest of its stream.
    drop(enc);
    out
}

/// A multipart upload of `n` bytes in one file part to `host` and `path`, with the
/// header lines `headers` (each ending in CRLF): its status. The head goes first; a
/// refusal of the announced length comes before the body is read (and the connection
/// is closed), so the body is sent only when no answer came within two seconds.
/// (`Expect: 100-continue` would do it without waiting, but CRS refuses that header:
/// 920450.)
pub async fn multipart_upload(
    listen: SocketAddr,
    host: &str,
    path: &str,
    n: usize,
    headers: &str,
) -> u16 {
    let boundary = "----palisade-upload-test";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"report.txt\"\r\nContent-Type: text/plain\r\n\r\n"
    )
    .into_bytes();
    body.extend(std::iter::repeat_n(b'a', n));
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\n{headers}Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut s = TcpStream::connect(listen).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let mut first = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_secs(2), s.peek(&mut first)).await;
    if early.is_err() {
        s.write_all(&body).await.unwrap();
    }
    read_response(&mut s).await.unwrap().status
}

/// Go's toolchain, for `what`: on the PATH, or where Go's tarball puts it
/// (`/usr/local/go/bin/go`); missing, a failure unless `PALISADE_ALLOW_SKIP=1`.
pub fn go_tool(what: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("go"))
            .find(|g| g.is_file())
    });
    let found = on_path.unwrap_or_else(|| PathBuf::from("/usr/local/go/bin/go"));
    required(&found, what).map(|()| found)
}

/// A CA made with rcgen: its certificate and key as PEM, and its issuer.
pub fn test_ca(name: &str) -> (String, String, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let cert = params.self_signed(&key).unwrap();
    let pem = cert.pem();
    let key_pem = key.serialize_pem();
    (pem, key_pem, rcgen::Issuer::new(params, key))
}

/// A leaf certificate for `names` signed by a CA named `ca` made here: the CA's
/// PEM, the leaf and its key.
pub fn leaf_from_new_ca(
    ca: &str,
    names: &[&str],
) -> (
    String,
    rustls::pki_types::CertificateDer<'static>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    let (ca_pem, _, issuer) = test_ca(ca);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf =
        rcgen::CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
    (
        ca_pem,
        leaf.der().clone(),
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
}

/// TLS inspection's files in `dir`: `inspect-ca.pem` and `inspect-ca.key` (a CA
/// made here) and `origin-ca.pem` (`origin_ca_pem`, the origins' CA); returns the
/// inspection CA's PEM.
pub fn inspection_files(dir: &TempDir, origin_ca_pem: &str) -> String {
    let (ca_pem, key_pem, _) = test_ca("Palisade Inspection CA");
    std::fs::write(dir.path("inspect-ca.pem"), &ca_pem).unwrap();
    std::fs::write(dir.path("inspect-ca.key"), &key_pem).unwrap();
    std::fs::write(dir.path("origin-ca.pem"), origin_ca_pem).unwrap();
    ca_pem
}
