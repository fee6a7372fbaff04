//! Reload everything, restart nothing: reloads apply listeners, `[limits]`, rate
//! limits (keeping the state of those that stay), log files and certificates; a
//! binary upgrade (SIGUSR2) hands the sockets to a new process; under continuous
//! HTTP/1.1 and HTTP/2 load, none of it fails a request.

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const TOKEN: &str = "zero-downtime-token";

async fn admin_post_reload(admin: SocketAddr) -> serde_json::Value {
    let r = send_raw(
        admin,
        format!("POST /reload HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    assert!(r.status == 200 || r.status == 422, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

fn signal(sig: &str, pid: u32) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid} failed");
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_rate_limit_state_and_applies_listeners_limits_and_logs() {
    let backend = Backend::start().await;
    let dir = TempDir::new("zd-quick");
    std::fs::write(dir.path("token"), TOKEN).unwrap();
    let listen = loopback(free_port());
    let added = loopback(free_port());
    let admin = loopback(free_port());
    let cfg = |status: u16, extra_listener: bool, log: &str| {
        let extra = format!(
            "{}[admin]\naddress = \"{admin}\"\ntoken_file = \"{}\"\n\n[logs]\naccess_log = \"{}\"\n\n[[rate_limit]]\nname = \"per-ip\"\nkey = \"client_ip\"\nrate = \"1/min\"\nstatus = {status}\n",
            if extra_listener {
                format!("[[listener]]\naddress = \"{added}\"\n\n")
            } else {
                String::new()
            },
            dir.path("token").display(),
            dir.path(log).display(),
        );
        basic_config(listen, backend.addr, &extra)
    };
    let p = Palisade::start(&dir, &cfg(429, false, "a.log"), listen);
    assert_eq!(get(listen, "/", "").await.status, 200);
    assert_eq!(get(listen, "/", "").await.status, 429);
    assert!(TcpStream::connect(added).await.is_err());

    // Same limit (name and key), another status; a listener added; the access log
    // moved.
    std::fs::write(dir.path("palisade.toml"), cfg(503, true, "b.log")).unwrap();
    let o = admin_post_reload(admin).await;
    assert_eq!(o["ok"], true, "{o}");
    assert_eq!(o["restart_needed"], serde_json::json!([]), "{o}");
    // The client's bucket was kept: still over, now answered with the new status.
    assert_eq!(get(listen, "/", "").await.status, 503);
    assert_eq!(get(added, "/", "").await.status, 503);
    assert!(
        wait_for_line(&dir.path("b.log"), Duration::from_secs(10), |_| true).is_some(),
        "the new access log got no line"
    );

    // The listener removed: it stops accepting; the other one keeps its socket.
    std::fs::write(dir.path("palisade.toml"), cfg(503, false, "b.log")).unwrap();
    assert_eq!(admin_post_reload(admin).await["ok"], true);
    // Its accept loops stop as each worker sees the change (a bound, not a timing
    // check).
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(added).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "the removed listener still accepts"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(get(listen, "/", "").await.status, 503);

    // A limit of another identity starts afresh.
    let fresh = cfg(503, false, "b.log").replace("name = \"per-ip\"", "name = \"other\"");
    std::fs::write(dir.path("palisade.toml"), fresh).unwrap();
    assert_eq!(admin_post_reload(admin).await["ok"], true);
    assert_eq!(get(listen, "/", "").await.status, 200);

    // A log file that cannot be opened fails the reload; nothing changes.
    let bad = cfg(429, true, "no/such/dir.log");
    std::fs::write(dir.path("palisade.toml"), bad).unwrap();
    let o = admin_post_reload(admin).await;
    assert_eq!(o["ok"], false, "{o}");
    assert!(o["error"].as_str().unwrap().contains("dir.log"), "{o}");
    assert!(
        TcpStream::connect(added).await.is_err(),
        "a failed reload bound a listener"
    );
    assert_eq!(get(listen, "/", "").await.status, 503);
    drop(p);
}

/// The load's counters, shared by the clients.
#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    failed: AtomicU64,
    /// Requests sent again on a new connection because the server closed an idle
    /// keep-alive connection (or refused an HTTP/2 stream it never processed).
    retried: AtomicU64,
}

/// One HTTP/1.1 keep-alive client on `addr` (TLS when `tls` is given) until `stop`.
async fn h1_client(
    addr: SocketAddr,
    tls: Option<rustls::pki_types::CertificateDer<'static>>,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
) {
    type Stream = Box<dyn AsyncStream>;
    trait AsyncStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
    impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> AsyncStream for T {}
    async fn connect(
        addr: SocketAddr,
        tls: &Option<rustls::pki_types::CertificateDer<'static>>,
    ) -> std::io::Result<Stream> {
        Ok(match tls {
            Some(c) => Box::new(tls_connect(addr, c, &[b"http/1.1"]).await?),
            None => Box::new(TcpStream::connect(addr).await?),
        })
    }
    let mut conn: Option<Stream> = None;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let req = format!("GET /?q=hello{n} HTTP/1.1\r\nHost: localhost\r\n\r\n");
        let mut attempt = 0;
        loop {
            attempt += 1;
            let fresh = conn.is_none();
            if fresh {
                match connect(addr, &tls).await {
                    Ok(s) => conn = Some(s),
                    Err(e) => {
                        eprintln!("FAILED: connect {addr}: {e}");
                        counts.failed.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
            let s = conn.as_mut().unwrap();
            let sent = s.write_all(req.as_bytes()).await;
            let got = match sent {
                Ok(()) => read_h1(s).await,
                Err(e) => Err((e.to_string(), true)),
            };
            match got {
                Ok((200, close)) => {
                    counts.ok.fetch_add(1, Ordering::Relaxed);
                    if close {
                        conn = None;
                    }
                    break;
                }
                Ok((status, _)) => {
                    eprintln!("FAILED: {addr}: status {status}");
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                    conn = None;
                    break;
                }
                // Closed before any byte of a response on a reused connection:
                // the server closed it while idle; HTTP lets the client send again.
                Err((_, true)) if !fresh && attempt == 1 => {
                    counts.retried.fetch_add(1, Ordering::Relaxed);
                    conn = None;
                }
                Err((e, _)) => {
                    eprintln!("FAILED: {addr}: {e}");
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                    conn = None;
                    break;
                }
            }
        }
    }
}

/// Reads one response: its status and whether the server closes the connection;
/// `Err((why, nothing_read))`.
async fn read_h1<S: tokio::io::AsyncRead + Unpin>(
    s: &mut S,
) -> Result<(u16, bool), (String, bool)> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = match tokio::time::timeout(Duration::from_secs(60), s.read(&mut chunk)).await {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => return Err((e.to_string(), buf.is_empty())),
            Err(_) => return Err(("no response within 60 s".into(), false)),
        };
        if n == 0 {
            return Err(("connection closed".into(), buf.is_empty()));
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut r = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(head)) = r.parse(&buf) else {
            continue;
        };
        let status = r.code.unwrap_or(0);
        let mut len = 0usize;
        let mut close = false;
        for h in r.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                len = std::str::from_utf8(h.value)
                    .unwrap_or("0")
                    .trim()
                    .parse()
                    .unwrap_or(0);
            }
            if h.name.eq_ignore_ascii_case("connection") && h.value.eq_ignore_ascii_case(b"close") {
                close = true;
            }
        }
        while buf.len() < head + len {
            let n = s
                .read(&mut chunk)
                .await
                .map_err(|e| (e.to_string(), false))?;
            if n == 0 {
                return Err(("closed in the body".into(), false));
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        return Ok((status, close));
    }
}

/// One HTTP/2 client on `addr` until `stop`: a few streams at once on one
/// connection, a new connection when the server ends it (GOAWAY).
async fn h2_client(
    addr: SocketAddr,
    ca: rustls::pki_types::CertificateDer<'static>,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
) {
    let mut sender: Option<hyper::client::conn::http2::SendRequest<Empty<Bytes>>> = None;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let fresh = sender.as_ref().is_none_or(|s| s.is_closed());
            if fresh {
                let made = async {
                    let tls = tls_connect(addr, &ca, &[b"h2"]).await?;
                    let (s, c) = hyper::client::conn::http2::handshake(
                        TokioExecutor::new(),
                        TokioIo::new(tls),
                    )
                    .await
                    .map_err(std::io::Error::other)?;
                    tokio::spawn(c);
                    Ok::<_, std::io::Error>(s)
                };
                match made.await {
                    Ok(s) => sender = Some(s),
                    Err(e) => {
                        eprintln!("FAILED: h2 connect {addr}: {e}");
                        counts.failed.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
            let s = sender.as_mut().unwrap();
            let req = hyper::Request::get(format!("https://localhost/?q=h2-{n}"))
                .body(Empty::<Bytes>::new())
                .unwrap();
            let r = async {
                s.ready().await?;
                s.send_request(req).await
            }
            .await;
            match r {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let body = resp.into_body().collect().await;
                    if status == 200 && body.is_ok() {
                        counts.ok.fetch_add(1, Ordering::Relaxed);
                    } else {
                        eprintln!("FAILED: h2 {addr}: status {status}, body {:?}", body.err());
                        counts.failed.fetch_add(1, Ordering::Relaxed);
                    }
                    break;
                }
                // No response head: a stream the server refused or a connection it
                // ended (GOAWAY) before processing it; sent again on a new connection.
                Err(e) if attempt == 1 && !fresh => {
                    let _ = e;
                    counts.retried.fetch_add(1, Ordering::Relaxed);
                    sender = None;
                }
                Err(e) => {
                    eprintln!("FAILED: h2 {addr}: {e}");
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                    sender = None;
                    break;
                }
            }
        }
    }
}

/// A CA and a leaf certificate for `localhost` signed by it, written to `dir`.
fn write_leaf(dir: &TempDir, issuer: &rcgen::Issuer<'_, rcgen::KeyPair>, serial: u64) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.serial_number = Some(serial.into());
    let cert = params.signed_by(&key, issuer).unwrap();
    // The key first, then the certificate: each rename is atomic.
    std::fs::write(dir.path("key.tmp"), key.serialize_pem()).unwrap();
    std::fs::write(dir.path("cert.tmp"), cert.pem()).unwrap();
    std::fs::rename(dir.path("key.tmp"), dir.path("key.pem")).unwrap();
    std::fs::rename(dir.path("cert.tmp"), dir.path("cert.pem")).unwrap();
}

// Each of its 20 reloads compiles CRS again, which takes seconds in a debug build on
// a busy machine: scripts/test-all runs it (stage zero-downtime) against the release
// build, with `PALISADE_TEST_BIN=target/release/palisade ... -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the load run: scripts/test-all runs it against the release build"]
async fn reloads_and_a_binary_upgrade_under_load_fail_no_request() {
    let crs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/crs");
    if required(&crs.join("rules"), "CRS v4 (../shared/crs)").is_none() {
        return;
    }
    let seconds: u64 = std::env::var("PALISADE_LOAD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let backend = Backend::start().await;
    let dir = TempDir::new("zd-load");
    std::fs::write(dir.path("token"), TOKEN).unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let ca = ca_cert.der().clone();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    write_leaf(&dir, &issuer, 1);
    let plain = loopback(free_port());
    let tls = loopback(free_port());
    let extra_listener = loopback(free_port());
    let admin = loopback(free_port());
    let cfg = |i: usize| {
        format!(
            "[[listener]]\naddress = \"{plain}\"\n\n[[listener]]\naddress = \"{tls}\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n\n{}[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\n[admin]\naddress = \"{admin}\"\ntoken_file = \"{}\"\n\n[logs]\naccess_log = \"{}\"\n\n[limits]\nheader_bytes = {}\n\n[[rate_limit]]\nname = \"generous\"\nkey = \"client_ip\"\nrate = \"{}/s\"\nburst = 100000\n\n[[rules]]\nfile = \"{crs}/crs-setup.conf.example\"\n\n[[rules]]\nfile = \"{crs}/rules/*.conf\"\n",
            if (5..15).contains(&i) {
                format!(
                    "[[listener]]\naddress = \"{extra_listener}\"\nhttp2 = {}\n\n",
                    i.is_multiple_of(2)
                )
            } else {
                String::new()
            },
            backend.addr,
            dir.path("token").display(),
            dir.path(&format!("access-{}.log", i / 3)).display(),
            32768 + i * 16,
            100000 + i,
            crs = crs.display(),
        )
    };
    let p = Palisade::start(&dir, &cfg(0), plain);
    let first_pid = p.pid();
    let mut p = p;

    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for _ in 0..2 {
        clients.push(tokio::spawn(h1_client(
            plain,
            None,
            counts.clone(),
            stop.clone(),
        )));
        clients.push(tokio::spawn(h2_client(
            tls,
            ca.clone(),
            counts.clone(),
            stop.clone(),
        )));
    }
    clients.push(tokio::spawn(h1_client(
        tls,
        Some(ca.clone()),
        counts.clone(),
        stop.clone(),
    )));

    let start = Instant::now();
    let total = Duration::from_secs(seconds);
    let reloads = 20usize;
    let step = total / (reloads as u32 + 4);
    let mut pid = first_pid;
    let mut reloaded = 0;
    let mut upgraded_to = None;
    for i in 1..=reloads {
        tokio::time::sleep(step).await;
        if i % 4 == 3 {
            write_leaf(&dir, &issuer, i as u64 + 1);
        }
        std::fs::write(dir.path("palisade.toml"), cfg(i)).unwrap();
        let o = admin_post_reload(admin).await;
        assert_eq!(o["ok"], true, "reload {i}: {o}");
        reloaded += 1;
        if (5..15).contains(&i) {
            assert_eq!(get(extra_listener, "/", "").await.status, 200);
        }
        if i == 10 {
            signal("-USR1", pid);
        }
        if i == 12 {
            // The binary upgrade: the same binary, started by the running one.
            signal("-USR2", pid);
            let line = wait_for_line(&p.stderr, Duration::from_secs(180), |l| {
                l.contains("binary upgrade: process") && l.contains("serves;")
            })
            .expect("the new process did not serve");
            let new: u32 = line
                .split("binary upgrade: process ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .expect("the new pid");
            assert_ne!(new, first_pid);
            p.wait_exit(Duration::from_secs(60));
            assert!(alive(new), "the new process is not running");
            pid = new;
            upgraded_to = Some(new);
        }
    }
    let left = total.saturating_sub(start.elapsed());
    tokio::time::sleep(left).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let new = upgraded_to.expect("an upgrade");
    // The new process serves: the old one is gone and requests still succeed.
    assert!(!alive(first_pid));
    assert_eq!(get(plain, "/", "").await.status, 200);
    signal("-TERM", new);
    let deadline = Instant::now() + Duration::from_secs(60);
    while alive(new) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ok = counts.ok.load(Ordering::Relaxed);
    let failed = counts.failed.load(Ordering::Relaxed);
    let retried = counts.retried.load(Ordering::Relaxed);
    let ran = start.elapsed().as_secs();
    println!(
        "LOAD RUN: {ran} s of load (at least {seconds} s; each CRS reload takes its time), {ok} requests answered as expected, {failed} failed, {retried} retried on a new connection after an idle close, {reloaded} reloads (4 with certificate rotations, a listener added and removed), 1 SIGUSR1, 1 binary upgrade (pid {first_pid} -> {new})"
    );
    assert_eq!(
        failed,
        0,
        "{}",
        std::fs::read_to_string(&p.stderr).unwrap_or_default()
    );
    assert!(ok > 0);
    assert!(!alive(new), "the new process did not stop on SIGTERM");
}
