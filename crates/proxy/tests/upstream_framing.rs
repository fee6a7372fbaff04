//! How the proxy reads an upstream response's framing, through the real binary in
//! front of a raw TCP backend: Content-Length, chunked with trailers, the end at
//! the close, the bodiless answers (HEAD, 204, 304), interim 1xx answers, and the
//! responses that cannot be trusted (bad status line, conflicting lengths,
//! Content-Length with Transfer-Encoding, an oversized head, a broken chunk,
//! bytes past the end). After each, the next request must get its own answer, on
//! the same upstream connection only when the first response allowed it.

mod common;

use common::*;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Requests the backend received: (connection number, method, path).
type Log = Arc<Mutex<Vec<(usize, String, String)>>>;

/// What the backend answers to a path: the raw bytes, and whether it then closes.
fn script(path: &str) -> (Vec<u8>, bool) {
    let plain = |s: &str| (s.as_bytes().to_vec(), false);
    match path {
        "/cl" => plain("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"),
        "/chunked" => plain(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
        ),
        "/close" => (b"HTTP/1.1 200 OK\r\n\r\nuntil the close".to_vec(), true),
        "/head" => plain("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"),
        "/204" => plain("HTTP/1.1 204 No Content\r\n\r\n"),
        "/304" => plain("HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n"),
        "/interim" => plain(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        ),
        "/http10" => plain("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        "/http10-keep" => {
            plain("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok")
        }
        "/conn-close" => {
            plain("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
        }
        "/bad-status" => plain("HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nok"),
        "/conflict" => {
            plain("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nokX")
        }
        "/cl-te" => plain(
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        ),
        "/huge" => {
            let mut r = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
            r.extend(std::iter::repeat_n(b'a', 70 * 1024));
            r.extend_from_slice(b"\r\nContent-Length: 2\r\n\r\nok");
            (r, false)
        }
        "/bad-chunk" => {
            plain("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n")
        }
        "/extra" => plain(
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale",
        ),
        _ => plain("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext"),
    }
}

struct RawBackend {
    addr: SocketAddr,
    seen: Log,
}

impl RawBackend {
    async fn start() -> RawBackend {
        let seen: Log = Arc::default();
        let rec = seen.clone();
        let addr = raw_backend(move |s, n| serve(s, n, rec.clone())).await;
        RawBackend { addr, seen }
    }

    fn requests(&self) -> Vec<(usize, String, String)> {
        self.seen.lock().unwrap().clone()
    }
}

/// Answers requests (heads only: the test sends no bodies) by their path, and
/// keeps the connection open unless the script closes it.
async fn serve(mut s: TcpStream, conn: usize, seen: Log) {
    let mut buf = Vec::new();
    loop {
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
        let head: Vec<u8> = buf.drain(..end).collect();
        let line = String::from_utf8_lossy(&head);
        let mut parts = line.split(' ');
        let method = parts.next().unwrap_or_default().to_owned();
        let path = parts.next().unwrap_or_default().to_owned();
        seen.lock().unwrap().push((conn, method, path.clone()));
        if path == "/refuse-upload" {
            // Refuses the upload at once and never reads its body, keeping the
            // connection open (as a server that answers early may).
            let _ = s
                .write_all(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 7\r\n\r\nrefused")
                .await;
            tokio::time::sleep(Duration::from_secs(60)).await;
            return;
        }
        let (answer, close) = script(&path);
        if s.write_all(&answer).await.is_err() || close {
            return;
        }
    }
}

/// The upstream connection that carried the last request for `path`.
fn conn_of(backend: &RawBackend, path: &str) -> usize {
    backend
        .requests()
        .iter()
        .rev()
        .find(|r| r.2 == path)
        .unwrap_or_else(|| panic!("{path} never reached the backend"))
        .0
}

/// The status line and header lines of a response, and what follows them.
fn split_head(raw: &[u8]) -> (String, Vec<u8>) {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(raw.len(), |p| p + 4);
    (
        String::from_utf8_lossy(&raw[..end]).into_owned(),
        raw[end..].to_vec(),
    )
}

/// Sends `method path` on its own client connection and reads until the close.
async fn exchange(listen: SocketAddr, method: &str, path: &str) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect(listen).await.unwrap();
    s.write_all(
        format!("{method} {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let (raw, closed) = read_until_close(&mut s, Duration::from_secs(10)).await;
    assert!(closed, "{method} {path}: the connection did not end");
    split_head(&raw)
}

/// A GET whose answer must be the backend's plain `next`.
async fn next_is_correct(listen: SocketAddr, after: &str) {
    let r = send_raw(
        listen,
        b"GET /next HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "the request after {after}");
    assert_eq!(r.text(), "next", "the request after {after}");
}

/// One worker thread: the idle connections of one pool are followed from request
/// to request.
fn config(listen: SocketAddr, backend: SocketAddr) -> String {
    format!(
        "[server]\nworker_threads = 1\n\n[[listener]]\naddress = \"{listen}\"\n\n[[upstream]]\nname = \"app\"\nservers = [\"{backend}\"]\nread_timeout = \"5s\"\nretries = 0\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framed_and_close_delimited_bodies_and_reuse() {
    let backend = RawBackend::start().await;
    let dir = TempDir::new("framing-ok");
    let listen = loopback(free_port());
    let _p = Palisade::start(&dir, &config(listen, backend.addr), listen);

    // (path, method, body the client gets, the connection may be reused after it)
    let cases: &[(&str, &str, &[u8], bool)] = &[
        ("/cl", "GET", b"hello", true),
        ("/chunked", "GET", b"hello world", true),
        ("/close", "GET", b"until the close", false),
        ("/head", "HEAD", b"", true),
        ("/204", "GET", b"", true),
        ("/304", "GET", b"", true),
        ("/interim", "GET", b"ok", true),
        ("/http10", "GET", b"ok", false),
        ("/http10-keep", "GET", b"ok", true),
        ("/conn-close", "GET", b"ok", false),
        ("/extra", "GET", b"ok", false),
    ];
    for &(path, method, body, reused) in cases {
        // An answered request first: the case goes on the connection it left.
        next_is_correct(listen, "the start").await;
        if method == "HEAD" || path == "/204" || path == "/304" {
            let (head, rest) = exchange(listen, method, path).await;
            assert!(head.starts_with("HTTP/1.1 "), "{path}: {head}");
            assert!(rest.is_empty(), "{path}: a body after a bodiless answer");
        } else {
            let r = send_raw(
                listen,
                format!("{method} {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .unwrap();
            assert_eq!(r.status, 200, "{path}");
            assert_eq!(r.body, body, "{path}");
            assert!(r.header("x-trailer").is_none(), "{path}: a trailer field");
        }
        let case_conn = conn_of(&backend, path);
        next_is_correct(listen, path).await;
        let next_conn = conn_of(&backend, "/next");
        assert_eq!(
            next_conn == case_conn,
            reused,
            "{path}: reuse of upstream connection {case_conn} (next on {next_conn})"
        );
    }
    let statuses = [
        ("/204", "HTTP/1.1 204"),
        ("/304", "HTTP/1.1 304"),
        ("/head", "HTTP/1.1 200"),
    ];
    for (path, want) in statuses {
        let method = if path == "/head" { "HEAD" } else { "GET" };
        let (head, _) = exchange(listen, method, path).await;
        assert!(head.starts_with(want), "{path}: {head}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_responses_are_502_and_never_pooled() {
    let backend = RawBackend::start().await;
    let dir = TempDir::new("framing-bad");
    let listen = loopback(free_port());
    let p = Palisade::start(&dir, &config(listen, backend.addr), listen);
    let cases = [
        ("/bad-status", "bad response head"),
        ("/conflict", "conflicting Content-Length values"),
        ("/cl-te", "both Transfer-Encoding and Content-Length"),
        ("/huge", "response head larger than"),
    ];
    for (path, reason) in cases {
        next_is_correct(listen, "the start").await;
        let r = send_raw(
            listen,
            format!("GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 502, "{path}");
        let case_conn = conn_of(&backend, path);
        next_is_correct(listen, path).await;
        assert_ne!(conn_of(&backend, "/next"), case_conn, "{path}: pooled");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !p.stderr_text().contains(reason) {
            assert!(
                std::time::Instant::now() < deadline,
                "{path}: no {reason:?} in the log:\n{}",
                p.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    // A broken chunk after the head went out: the client's answer is cut short
    // (the connection closes without the body's end), and the connection is not
    // used again.
    next_is_correct(listen, "the start").await;
    let (head, rest) = exchange(listen, "GET", "/bad-chunk").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(!rest.ends_with(b"0\r\n\r\n"), "a complete body: {rest:?}");
    let case_conn = conn_of(&backend, "/bad-chunk");
    next_is_correct(listen, "/bad-chunk").await;
    assert_ne!(conn_of(&backend, "/next"), case_conn);
}

/// A server that answers before reading a large request body (and then reads no
/// more of it) gets its answer through at once, not after the read timeout, and
/// its connection is not used again (the body's rest never went out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_answer_to_a_large_body_is_passed_on() {
    let backend = RawBackend::start().await;
    let dir = TempDir::new("framing-early");
    let listen = loopback(free_port());
    // A body larger than the loopback socket buffers can hold, so the proxy's
    // writes stop while the server is not reading; read_timeout 5 s: waiting for
    // the whole body to go out would end in 504.
    let cfg = format!(
        "{}[limits]\nrequest_body_bytes = 33554432\n",
        config(listen, backend.addr)
    );
    let _p = Palisade::start(&dir, &cfg, listen);
    next_is_correct(listen, "the start").await;

    let body = vec![b'x'; 24 * 1024 * 1024];
    let mut req = format!(
        "POST /refuse-upload HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let r = send_raw(listen, &req).await.unwrap();
    assert_eq!(r.status, 413, "the server's early answer");
    assert_eq!(r.text(), "refused");
    let refused_on = conn_of(&backend, "/refuse-upload");
    next_is_correct(listen, "/refuse-upload").await;
    assert_ne!(
        conn_of(&backend, "/next"),
        refused_on,
        "a connection whose request body was cut short went back to the pool"
    );
}
