//! The upstream connection pool through the real binary: keep-alive reuse, the
//! pool size, the idle timeout, and requests sent again when a reused connection
//! fails after taking them.

mod common;

use common::*;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Requests a backend received: (connection number, request head and body).
type Log = Arc<Mutex<Vec<(usize, Vec<u8>)>>>;

/// What a backend connection does with its second request.
#[derive(Clone, Copy, PartialEq)]
enum Second {
    /// Answers it like the first.
    Answer,
    /// Closes without answering.
    Close,
    /// Answers it after three seconds.
    Stall,
}

/// A raw backend that records every request head (with its connection number) and
/// answers `ok` with keep-alive; `second` says what a connection that has answered
/// one request does with the next.
struct RawBackend {
    addr: SocketAddr,
    seen: Log,
}

impl RawBackend {
    async fn start(second: Second) -> RawBackend {
        let seen: Log = Arc::default();
        let rec = seen.clone();
        let addr = raw_backend(move |s, n| serve_raw(s, n, rec.clone(), second)).await;
        RawBackend { addr, seen }
    }

    fn requests(&self) -> Vec<(usize, Vec<u8>)> {
        self.seen.lock().unwrap().clone()
    }

    fn connections(&self) -> usize {
        self.requests().iter().map(|r| r.0).max().unwrap_or(0)
    }
}

async fn serve_raw(mut s: TcpStream, conn: usize, seen: Log, second: Second) {
    let mut buf = Vec::new();
    let mut answered = 0;
    loop {
        // One request: the head, then a Content-Length body if any.
        let end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(k) => buf.extend_from_slice(&chunk[..k]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let body_len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        while buf.len() < end + body_len {
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(k) => buf.extend_from_slice(&chunk[..k]),
            }
        }
        let request: Vec<u8> = buf.drain(..end + body_len).collect();
        seen.lock().unwrap().push((conn, request));
        if answered == 1 {
            match second {
                Second::Answer => {}
                // Closed as the request arrived: the proxy cannot know whether it
                // was handled.
                Second::Close => return,
                Second::Stall => tokio::time::sleep(Duration::from_secs(3)).await,
            }
        }
        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .await
            .is_err()
        {
            return;
        }
        answered += 1;
    }
}

/// One worker thread: idle upstream connections are kept per worker, and these tests
/// follow one pool from request to request.
fn config(listen: SocketAddr, backend: SocketAddr, upstream_extra: &str) -> String {
    format!(
        "[server]\nworker_threads = 1\n\n[[listener]]\naddress = \"{listen}\"\n\n[[upstream]]\nname = \"app\"\nservers = [\"{backend}\"]\n{upstream_extra}\n"
    )
}

fn uri_of(request: &[u8]) -> String {
    let line = request.split(|&b| b == b'\r').next().unwrap();
    String::from_utf8_lossy(line)
        .split(' ')
        .nth(1)
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reused_connection_failing_after_taking_a_request() {
    let backend = RawBackend::start(Second::Close).await;
    let dir = TempDir::new("pool-retry");
    let listen = loopback(free_port());
    let _p = Palisade::start(&dir, &config(listen, backend.addr, ""), listen);
    let get = |path: &str| {
        format!(
            "GET {path} HTTP/1.1\r\nHost: app.example\r\nUser-Agent: t/1\r\nX-Trace: 7\r\nConnection: close\r\n\r\n"
        )
    };
    let r = send_raw(listen, get("/a").as_bytes()).await.unwrap();
    assert_eq!(r.status, 200);
    // The pooled connection takes /b and closes: a GET is safe to send again, on a
    // new connection, exactly as it was sent the first time.
    let r = send_raw(listen, get("/b").as_bytes()).await.unwrap();
    assert_eq!(r.status, 200, "GET retried on a new connection");
    let seen = backend.requests();
    let b: Vec<&(usize, Vec<u8>)> = seen.iter().filter(|r| uri_of(&r.1) == "/b").collect();
    assert_eq!(b.len(), 2, "{seen:?}");
    assert_ne!(b[0].0, b[1].0, "the retry used another connection");
    assert_eq!(b[0].1, b[1].1, "the retry sent the same bytes");
    // Header names go upstream as the client wrote them.
    assert!(
        String::from_utf8_lossy(&b[1].1).contains("X-Trace: 7"),
        "{:?}",
        String::from_utf8_lossy(&b[1].1)
    );
    // A POST that a reused connection took is not sent again: 502.
    let r = send_raw(
        listen,
        b"POST /c HTTP/1.1\r\nHost: app.example\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 502);
    let c = backend
        .requests()
        .iter()
        .filter(|r| uri_of(&r.1) == "/c")
        .count();
    assert_eq!(c, 1, "a POST is sent once");
    // A PUT is idempotent: sent again, body included.
    let r = send_raw(
        listen,
        b"GET /d HTTP/1.1\r\nHost: app.example\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    let r = send_raw(
        listen,
        b"PUT /e HTTP/1.1\r\nHost: app.example\r\nContent-Length: 3\r\nConnection: close\r\n\r\nxyz",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    let seen = backend.requests();
    let e: Vec<&(usize, Vec<u8>)> = seen.iter().filter(|r| uri_of(&r.1) == "/e").collect();
    assert_eq!(e.len(), 2, "{seen:?}");
    assert_eq!(e[0].1, e[1].1);
    assert!(e[1].1.ends_with(b"\r\n\r\nxyz"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_reused_up_to_the_pool_size_and_the_idle_timeout() {
    // Reused: sequential requests share one upstream connection.
    let backend = RawBackend::start(Second::Answer).await;
    let dir = TempDir::new("pool-reuse");
    let listen = loopback(free_port());
    let _p = Palisade::start(&dir, &config(listen, backend.addr, ""), listen);
    let mut client = TcpStream::connect(listen).await.unwrap();
    for i in 0..5 {
        let req = format!("GET /k{i} HTTP/1.1\r\nHost: a\r\n\r\n");
        client.write_all(req.as_bytes()).await.unwrap();
        let r = read_response(&mut client).await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"ok");
    }
    assert_eq!(backend.requests().len(), 5);
    assert_eq!(backend.connections(), 1, "one pooled connection");
    drop(client);

    // No pool: a connection per request.
    let backend = RawBackend::start(Second::Answer).await;
    let dir = TempDir::new("pool-none");
    let listen = loopback(free_port());
    let _p = Palisade::start(&dir, &config(listen, backend.addr, "keepalive = 0"), listen);
    for i in 0..3 {
        let req = format!("GET /n{i} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        let r = send_raw(listen, req.as_bytes()).await.unwrap();
        assert_eq!(r.status, 200);
    }
    assert_eq!(backend.connections(), 3);

    // Idle timeout: a connection idle for longer is not used again.
    let backend = RawBackend::start(Second::Answer).await;
    let dir = TempDir::new("pool-idle");
    let listen = loopback(free_port());
    let _p = Palisade::start(
        &dir,
        &config(listen, backend.addr, "idle_timeout = \"300ms\""),
        listen,
    );
    let get = b"GET /i HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    assert_eq!(send_raw(listen, get).await.unwrap().status, 200);
    assert_eq!(send_raw(listen, get).await.unwrap().status, 200);
    assert_eq!(backend.connections(), 1, "reused within the idle timeout");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(send_raw(listen, get).await.unwrap().status, 200);
    assert_eq!(
        backend.connections(),
        2,
        "a new connection after the idle timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_timeout_applies_on_reused_connections() {
    let backend = RawBackend::start(Second::Stall).await;
    let dir = TempDir::new("pool-stall");
    let listen = loopback(free_port());
    let _p = Palisade::start(
        &dir,
        &config(listen, backend.addr, "read_timeout = \"500ms\""),
        listen,
    );
    let get = b"GET /s HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    assert_eq!(send_raw(listen, get).await.unwrap().status, 200);
    // The pooled connection takes the request and stalls for 3 s: 504 (had the
    // timeout not fired, the backend's late 200 would have come through).
    let r = send_raw(listen, get).await.unwrap();
    assert_eq!(r.status, 504);
    assert_eq!(
        backend.connections(),
        1,
        "the stalled request used the pooled connection"
    );
}
