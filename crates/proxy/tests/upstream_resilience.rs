//! Upstreams that survive, through the real binary: a server name served by a real
//! name server (Debian's dnsmasq on a loopback port, reading a hosts file the test
//! rewrites), backends killed and revived under a bounded load, least_conn and
//! hash balancing, and active health checks.

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A backend that can be killed (listener and every connection dropped, requests
/// in flight included) and started again on the same address. It answers its
/// name in `X-Served-By`; `/slow?ms=N` answers after N ms; `/health` answers the
/// status set with [`Killable::set_health`].
struct Killable {
    name: &'static str,
    addr: SocketAddr,
    served: Arc<AtomicUsize>,
    received: Arc<AtomicUsize>,
    health: Arc<AtomicU16>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Killable {
    async fn start(name: &'static str, addr: SocketAddr) -> Killable {
        let k = Killable {
            name,
            addr,
            served: Arc::default(),
            received: Arc::default(),
            health: Arc::new(AtomicU16::new(200)),
            tasks: Arc::default(),
        };
        k.revive().await;
        k
    }

    async fn revive(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) => {
                    assert!(Instant::now() < deadline, "cannot bind {}: {e}", self.addr);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        let (name, tasks) = (self.name, self.tasks.clone());
        let counts = Counts {
            served: self.served.clone(),
            received: self.received.clone(),
            health: self.health.clone(),
        };
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let counts = counts.clone();
                let conn = tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let counts = counts.clone();
                        async move { Ok::<_, Infallible>(answer(name, counts, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
                tasks.lock().unwrap().push(conn);
            }
        });
        self.tasks.lock().unwrap().push(accept);
    }

    fn kill(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }

    fn received(&self) -> usize {
        self.received.load(Ordering::SeqCst)
    }

    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }

    fn set_health(&self, status: u16) {
        self.health.store(status, Ordering::SeqCst);
    }
}

impl Drop for Killable {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What a backend counts: requests received and answered (health checks aside),
/// and the status its /health answers.
#[derive(Clone)]
struct Counts {
    served: Arc<AtomicUsize>,
    received: Arc<AtomicUsize>,
    health: Arc<AtomicU16>,
}

async fn answer(
    name: &'static str,
    counts: Counts,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let _ = body.collect().await;
    let mut status = 200;
    if parts.uri.path() == "/health" {
        status = counts.health.load(Ordering::SeqCst);
    } else {
        counts.received.fetch_add(1, Ordering::SeqCst);
        if parts.uri.path() == "/slow" {
            let ms: u64 = parts
                .uri
                .query()
                .and_then(|q| q.strip_prefix("ms="))
                .and_then(|v| v.parse().ok())
                .unwrap_or(100);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        counts.served.fetch_add(1, Ordering::SeqCst);
    }
    let mut r = Response::new(Full::new(Bytes::from(name)));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r.headers_mut().insert("x-served-by", name.parse().unwrap());
    r
}

/// dnsmasq on a free loopback port, answering the names of a hosts file (TTL 1 s)
/// and nothing else.
struct Dnsmasq {
    child: Child,
    addr: SocketAddr,
}

impl Dnsmasq {
    fn start(hosts: &std::path::Path) -> Dnsmasq {
        let (child, addr) = start_dnsmasq(&[
            "--local-ttl=1".into(),
            "--local=/test/".into(),
            format!("--addn-hosts={}", hosts.display()),
        ]);
        Dnsmasq { child, addr }
    }

    /// Makes dnsmasq read its hosts file again (and forget its cache).
    fn reload(&self) {
        let ok = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -HUP dnsmasq");
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Who served a request: status and `X-Served-By`.
async fn served_by(listen: SocketAddr, path: &str, extra: &str) -> (u16, String) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: app\r\n{extra}Connection: close\r\n\r\n");
    match send_raw(listen, req.as_bytes()).await {
        Ok(r) => (r.status, r.header("x-served-by").unwrap_or("").to_owned()),
        Err(e) => (0, e.to_string()),
    }
}

fn pool(listen: SocketAddr, admin: SocketAddr, servers: &[String], extra: &str) -> String {
    let list: Vec<String> = servers.iter().map(|s| format!("\"{s}\"")).collect();
    format!(
        "[[listener]]\naddress = \"{listen}\"\n[admin]\naddress = \"{admin}\"\n[logs]\nerror_log = \"error.log\"\n\n[[upstream]]\nname = \"app\"\nservers = [{}]\nconnect_timeout = \"2s\"\nread_timeout = \"5s\"\n{extra}\n",
        list.join(", ")
    )
}

/// A port free on 127.0.0.2 and 127.0.0.3 alike.
fn port_on_two_addresses() -> u16 {
    loop {
        let a = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
        let port = a.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.3", port)).is_ok() {
            return port;
        }
    }
}

/// The name of the pool's server moves from 127.0.0.2 to 127.0.0.3 in the hosts
/// file dnsmasq serves (TTL 1 s): traffic follows within the TTL (pooled
/// connections to the old address are not reused). The first name server listed
/// is dead: lookups pass over it. Then dnsmasq dies: the last good answer is used,
/// and that is logged and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_follows_dns_and_survives_a_dead_resolver() {
    let dir = TempDir::new("up-dns");
    let port = port_on_two_addresses();
    let old = Killable::start("old", SocketAddr::from(([127, 0, 0, 2], port))).await;
    let new = Killable::start("new", SocketAddr::from(([127, 0, 0, 3], port))).await;
    let hosts = dir.path("hosts");
    std::fs::write(&hosts, "127.0.0.2 app.test\n").unwrap();
    let mut dns = Dnsmasq::start(&hosts);
    let dead = loopback(free_port());
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let cfg = format!(
        "{}\n[dns]\nresolvers = [\"{dead}\", \"{}\"]\ntimeout = \"2s\"\nfailure_ttl = \"1s\"\n",
        pool(listen, admin, &[format!("app.test:{port}")], ""),
        dns.addr
    );
    let p = Palisade::start(&dir, &cfg, listen);
    for _ in 0..5 {
        assert_eq!(
            served_by(listen, "/", "").await,
            (200, "old".into()),
            "{}",
            p.stderr_text()
        );
    }

    std::fs::write(&hosts, "127.0.0.3 app.test\n").unwrap();
    dns.reload();
    let changed = Instant::now();
    let mut sent = 0;
    loop {
        let (status, by) = served_by(listen, "/", "").await;
        assert_eq!(status, 200);
        sent += 1;
        if by == "new" {
            break;
        }
        assert!(
            changed.elapsed() < Duration::from_secs(20),
            "traffic never moved: {}",
            p.stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "traffic moved {:?} after the hosts file changed ({sent} requests)",
        changed.elapsed()
    );
    let old_count = old.served();
    for _ in 0..5 {
        assert_eq!(served_by(listen, "/", "").await, (200, "new".into()));
    }
    assert_eq!(old.served(), old_count, "nothing goes to the old address");
    assert!(metric(admin, "palisade_upstream_dns_changes_total").await >= 1.0);
    assert_eq!(
        metric(admin, "palisade_upstream_dns_stale_total").await,
        0.0
    );

    // Every name server dead: the last good answer stays in use.
    dns.stop();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for _ in 0..5 {
        assert_eq!(served_by(listen, "/", "").await, (200, "new".into()));
    }
    assert!(metric(admin, "palisade_upstream_dns_stale_total").await >= 1.0);
    assert!(metric(admin, "palisade_upstream_dns_failures_total").await >= 1.0);
    let log = p.stderr_text();
    assert!(
        log.lines()
            .any(|l| l.contains("resolving app.test failed") && l.contains("127.0.0.3 (stale)")),
        "{log}"
    );
    assert!(
        log.contains("app.test now resolves to 127.0.0.3 (was 127.0.0.2)"),
        "{log}"
    );
    assert_eq!(new.served(), 5 + 5 + 1);
}

/// A bounded load run (1,000 requests at most, 4 clients, 60 s at most) of
/// idempotent requests, slow enough that each server has requests in flight,
/// while one server and then the other is killed (requests in flight included)
/// and started again: no request fails. Run with pooled connections, then with a
/// new connection per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_and_revived_upstreams_fail_no_idempotent_request() {
    kill_and_revive_under_load("up-kill-pooled", "").await;
    kill_and_revive_under_load("up-kill-fresh", "keepalive = 0").await;
}

async fn kill_and_revive_under_load(name: &str, extra: &str) {
    const TOTAL: usize = 1000;
    let dir = TempDir::new(name);
    let a = Killable::start("a", loopback(free_port())).await;
    let b = Killable::start("b", loopback(free_port())).await;
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let cfg = pool(
        listen,
        admin,
        &[a.addr.to_string(), b.addr.to_string()],
        &format!("fail_timeout = \"1s\"\nretries = 2\n{extra}"),
    );
    let p = Palisade::start(&dir, &cfg, listen);
    let done = Arc::new(AtomicUsize::new(0));
    let failed: Arc<Mutex<Vec<String>>> = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut clients = Vec::new();
    for c in 0..4 {
        let (done, failed) = (done.clone(), failed.clone());
        clients.push(tokio::spawn(async move {
            let mut i = c;
            while done.load(Ordering::SeqCst) < TOTAL && Instant::now() < deadline {
                let req = match i % 4 {
                    0 => "GET /slow?ms=20 HTTP/1.1\r\nHost: app\r\nConnection: close\r\n\r\n"
                        .to_owned(),
                    1 => "PUT /slow?ms=20 HTTP/1.1\r\nHost: app\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
                        .to_owned(),
                    2 => "DELETE /slow?ms=20 HTTP/1.1\r\nHost: app\r\nConnection: close\r\n\r\n"
                        .to_owned(),
                    _ => "HEAD /slow?ms=20 HTTP/1.1\r\nHost: app\r\nConnection: close\r\n\r\n"
                        .to_owned(),
                };
                i += 1;
                let head = req.starts_with("HEAD");
                let r = if head {
                    // No body follows a HEAD answer: read the head only.
                    head_status(listen, req.as_bytes()).await
                } else {
                    send_raw(listen, req.as_bytes())
                        .await
                        .map(|r| r.status)
                        .map_err(|e| e.to_string())
                };
                match r {
                    Ok(200) => {}
                    other => failed.lock().unwrap().push(format!("{req:?}: {other:?}")),
                }
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    let at = |n: usize| {
        let done = done.clone();
        async move {
            while done.load(Ordering::SeqCst) < n && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    at(150).await;
    a.kill();
    at(350).await;
    a.revive().await;
    at(550).await;
    b.kill();
    at(750).await;
    b.revive().await;
    for c in clients {
        c.await.unwrap();
    }
    let done = done.load(Ordering::SeqCst);
    let failed = failed.lock().unwrap().clone();
    let retries = metric(admin, "palisade_upstream_retries_total").await;
    let failures = metric(admin, "palisade_upstream_server_failures_total").await;
    eprintln!(
        "{extra:?}: {done} requests, {} failed; served: a {}, b {}; retries {retries}, server failures {failures}",
        failed.len(),
        a.served(),
        b.served()
    );
    assert!(done >= TOTAL, "the run ended early: {done}");
    assert!(failed.is_empty(), "{failed:?}\n{}", p.stderr_text());
    assert!(failures >= 2.0, "both kills were seen");
    assert!(metric(admin, "palisade_upstream_servers_out_total").await >= 2.0);
    assert!(a.served() > 0 && b.served() > 0);
}

/// A server that takes every request and closes without answering: idempotent
/// requests go to the next server (each retry paid from the budget: with
/// `retry_budget = 0` only the 10 it starts with), a POST is answered 502.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_failed_after_sending_are_retried_within_the_budget() {
    let dir = TempDir::new("up-retry");
    let closer = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closer_addr = closer.local_addr().unwrap();
    let taken = Arc::new(AtomicUsize::new(0));
    let count = taken.clone();
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        loop {
            let Ok((mut s, _)) = closer.accept().await else {
                return;
            };
            let count = count.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                count.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    let good = Killable::start("good", loopback(free_port())).await;
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let cfg = pool(
        listen,
        admin,
        &[closer_addr.to_string(), good.addr.to_string()],
        "max_fails = 0\nretry_budget = 0\nkeepalive = 0",
    );
    let p = Palisade::start(&dir, &cfg, listen);
    // A POST that the closing server took is not sent again.
    let mut post_502 = 0;
    for _ in 0..2 {
        let r = send_raw(
            listen,
            b"POST / HTTP/1.1\r\nHost: app\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
        )
        .await
        .unwrap();
        if r.status == 502 {
            post_502 += 1;
        }
    }
    assert_eq!(
        post_502, 1,
        "one of two POSTs went to the closing server first"
    );
    let mut statuses = Vec::new();
    for _ in 0..24 {
        statuses.push(served_by(listen, "/", "").await);
    }
    let ok = statuses
        .iter()
        .filter(|s| **s == (200, "good".into()))
        .count();
    // 12 GETs went to the closing server first: 10 retried, then the budget is
    // spent and the last 2 fail.
    assert_eq!(ok, 22, "{statuses:?}\n{}", p.stderr_text());
    assert_eq!(metric(admin, "palisade_upstream_retries_total").await, 10.0);
    assert_eq!(
        metric(admin, "palisade_upstream_retries_over_budget_total").await,
        2.0
    );
    assert_eq!(taken.load(Ordering::SeqCst), 1 + 12);
}

/// Sends a request whose answer has no body (HEAD) and returns its status.
async fn head_status(addr: SocketAddr, request: &[u8]) -> Result<u16, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    s.write_all(request).await.map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(format!("closed: {:?}", String::from_utf8_lossy(&buf)));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&buf);
    line.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {line:?}"))
}

/// least_conn: while one server holds a slow request, the others take the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_conn_sends_to_the_least_busy_server() {
    let dir = TempDir::new("up-leastconn");
    let a = Killable::start("a", loopback(free_port())).await;
    let b = Killable::start("b", loopback(free_port())).await;
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let cfg = pool(
        listen,
        admin,
        &[a.addr.to_string(), b.addr.to_string()],
        "balance = \"least_conn\"",
    );
    let _p = Palisade::start(&dir, &cfg, listen);
    let slow = tokio::spawn(served_by(listen, "/slow?ms=3000", ""));
    // Wait until a backend has the slow request in hand.
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.received() + b.received() == 0 {
        assert!(Instant::now() < deadline, "the slow request never arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let busy = if a.received() == 1 { "a" } else { "b" };
    let mut others = 0;
    for _ in 0..10 {
        let (status, by) = served_by(listen, "/", "").await;
        assert_eq!(status, 200);
        assert_ne!(by, busy, "a request went to the busy server");
        others += 1;
    }
    assert_eq!(others, 10);
    assert_eq!(slow.await.unwrap().0, 200);
    // Idle again: ties go in turn.
    let mut by_a = 0;
    for _ in 0..10 {
        if served_by(listen, "/", "").await.1 == "a" {
            by_a += 1;
        }
    }
    assert!((3..=7).contains(&by_a), "{by_a} of 10 on a");
}

/// hash on a header: a key always goes to the same server, the keys spread over
/// all servers, and when a server dies only its keys move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_keeps_keys_on_their_server() {
    let dir = TempDir::new("up-hash");
    let servers = [
        Killable::start("a", loopback(free_port())).await,
        Killable::start("b", loopback(free_port())).await,
        Killable::start("c", loopback(free_port())).await,
    ];
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let addrs: Vec<String> = servers.iter().map(|s| s.addr.to_string()).collect();
    let cfg = pool(
        listen,
        admin,
        &addrs,
        "balance = \"hash\"\nhash_key = \"header:X-User\"",
    );
    let _p = Palisade::start(&dir, &cfg, listen);
    let mut first = std::collections::HashMap::new();
    for u in 0..60 {
        let user = format!("X-User: user-{u}\r\n");
        let (status, by) = served_by(listen, "/", &user).await;
        assert_eq!(status, 200);
        for _ in 0..2 {
            assert_eq!(served_by(listen, "/", &user).await, (200, by.clone()));
        }
        first.insert(u, by);
    }
    for s in &servers {
        let n = first.values().filter(|b| *b == s.name).count();
        assert!(n >= 5, "{} has {n} of 60 keys", s.name);
    }
    servers[2].kill();
    let mut moved = 0;
    for u in 0..60 {
        let user = format!("X-User: user-{u}\r\n");
        let (status, by) = served_by(listen, "/", &user).await;
        assert_eq!(status, 200);
        if first[&u] == "c" {
            assert_ne!(by, "c");
            moved += 1;
        } else {
            assert_eq!(by, first[&u], "user-{u} moved though its server lives");
        }
    }
    assert_eq!(moved, first.values().filter(|b| *b == "c").count());
}

/// Active HTTP checks take a server whose /health answers 503 out (after `fall`
/// failed checks) and bring it back (after `rise` passed ones); TCP checks do the
/// same for a server that stops accepting connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_take_servers_out_and_back() {
    for kind in ["http", "tcp"] {
        let dir = TempDir::new(&format!("up-health-{kind}"));
        let a = Killable::start("a", loopback(free_port())).await;
        let b = Killable::start("b", loopback(free_port())).await;
        let listen = loopback(free_port());
        let admin = loopback(free_port());
        let cfg = pool(
            listen,
            admin,
            &[a.addr.to_string(), b.addr.to_string()],
            &format!(
                "max_fails = 0\n[upstream.health_check]\ntype = \"{kind}\"\npath = \"/health\"\nexpect_status = [200]\ninterval = \"100ms\"\ntimeout = \"1s\"\nrise = 2\nfall = 2\n"
            ),
        );
        let p = Palisade::start(&dir, &cfg, listen);
        let wait_metric = |name: &'static str, at_least: f64| async move {
            let deadline = Instant::now() + Duration::from_secs(20);
            while metric(admin, name).await < at_least {
                assert!(Instant::now() < deadline, "{name} never reached {at_least}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        if kind == "http" {
            a.set_health(503);
        } else {
            a.kill();
        }
        wait_metric("palisade_upstream_servers_out_total", 1.0).await;
        let page = send_raw(
            admin,
            b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap()
        .text();
        for (server, up) in [(a.addr, 0), (b.addr, 1)] {
            let line =
                format!("palisade_upstream_server_up{{pool=\"app\",server=\"{server}\"}} {up}");
            assert!(page.contains(&line), "{kind}: no {line} in {page}");
        }
        for _ in 0..10 {
            assert_eq!(served_by(listen, "/", "").await, (200, "b".into()));
        }
        if kind == "http" {
            a.set_health(200);
        } else {
            a.revive().await;
        }
        wait_metric("palisade_upstream_servers_back_total", 1.0).await;
        let mut by_a = 0;
        for _ in 0..10 {
            let (status, by) = served_by(listen, "/", "").await;
            assert_eq!(status, 200);
            if by == "a" {
                by_a += 1;
            }
        }
        assert!(by_a >= 3, "{kind}: {by_a} of 10 on a after it came back");
        let log = p.stderr_text();
        assert!(
            log.contains(&format!(
                "server {} is out after 2 failed health check(s)",
                a.addr
            )) && log.contains(&format!(
                "server {} is back after 2 passed health check(s)",
                a.addr
            )),
            "{kind}: {log}"
        );
    }
}
