//! WebSocket and other `Upgrade` requests through the real binary: the handshake
//! goes through phase 1 like any request and then to the upstream; a `101` joins
//! the client to the upstream both ways (frames are not inspected); a blocked
//! handshake gets the rule's status and no tunnel; an upstream that declines the
//! upgrade is answered as usual; an idle tunnel is closed.

mod common;

use base64::Engine as _;
use common::*;
use sha1::Digest as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The `Sec-WebSocket-Accept` value for a key (RFC 6455 §4.2.2).
fn accept_for(key: &str) -> String {
    let mut h = sha1::Sha1::new();
    h.update(key.as_bytes());
    h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

/// A WebSocket echo backend on 127.0.0.1: it answers a handshake (`Upgrade:
/// websocket` with a `Sec-WebSocket-Key`) with 101 and then echoes every byte;
/// anything else gets 426.
/// It records each request head it reads.
struct EchoBackend {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

impl EchoBackend {
    async fn start() -> EchoBackend {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let heads: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = heads.clone();
        tokio::spawn(async move {
            loop {
                let Ok((s, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(echo_conn(s, seen.clone()));
            }
        });
        EchoBackend { addr, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

async fn echo_conn(mut s: TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        match s.read_u8().await {
            Ok(b) => head.push(b),
            Err(_) => return,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    seen.lock().unwrap().push(text.clone());
    let key = text.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case("sec-websocket-key")
            .then(|| v.trim().to_owned())
    });
    let websocket = text
        .to_ascii_lowercase()
        .contains("\r\nupgrade: websocket\r\n");
    let Some(key) = key.filter(|_| websocket) else {
        let _ = s
            .write_all(b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno")
            .await;
        return;
    };
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        accept_for(&key)
    );
    if s.write_all(answer.as_bytes()).await.is_err() {
        return;
    }
    let (mut r, mut w) = s.split();
    let _ = tokio::io::copy(&mut r, &mut w).await;
}

/// A masked WebSocket text frame (client to server, RFC 6455 §5.2).
fn text_frame(payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mask = [0x12u8, 0x34, 0x56, 0x78];
    let mut f = vec![0x81, 0x80 | payload.len() as u8];
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

fn handshake(path: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: app.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

const RULES: &str = "SecRuleEngine On\nSecRule ARGS:token \"@streq evil\" \"id:1001,phase:1,deny,status:403,log\"\nSecRule REQUEST_HEADERS:Upgrade \"@streq smuggle\" \"id:1002,phase:1,deny,status:400,log\"";

fn proxy(dir: &TempDir, backend: SocketAddr, server: &str) -> Palisade {
    let listen = loopback(free_port());
    let cfg = basic_config(
        listen,
        backend,
        &format!(
            "[server]\n{server}\n{}\n[logs]\nerror_log = \"error.log\"\n",
            rules_toml(RULES)
        ),
    );
    Palisade::start(dir, &cfg, listen)
}

/// Reads a response head (through its blank line) from `s`.
async fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(s.read_u8().await.expect("a response head"));
    }
    String::from_utf8(head).unwrap()
}

#[tokio::test]
async fn websocket_handshake_is_inspected_then_tunnelled() {
    let backend = EchoBackend::start().await;
    let dir = TempDir::new("ws-ok");
    let p = proxy(&dir, backend.addr, "");
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    s.write_all(handshake("/chat?token=fine", "").as_bytes())
        .await
        .unwrap();
    let head = read_head(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("\r\nupgrade: websocket\r\n"), "{head}");
    assert!(lower.contains("\r\nconnection: upgrade\r\n"), "{head}");
    assert!(
        head.contains(&format!("Sec-Websocket-Accept: {}", accept_for(KEY))),
        "{head}"
    );

    // Frames go both ways, uninspected: a payload the phase-1 rule would block
    // in the query string passes inside a frame.
    for msg in [&b"hello"[..], b"token=evil", b"third message"] {
        let frame = text_frame(msg);
        s.write_all(&frame).await.unwrap();
        let mut back = vec![0u8; frame.len()];
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut back))
            .await
            .expect("echo in time")
            .unwrap();
        assert_eq!(back, frame);
    }

    let seen = backend.heads();
    assert_eq!(seen.len(), 1);
    let up = seen[0].to_ascii_lowercase();
    assert!(up.contains("\r\nupgrade: websocket\r\n"), "{up}");
    assert!(up.contains("\r\nconnection: upgrade\r\n"), "{up}");
    assert!(up.contains(&format!("sec-websocket-key: {}", KEY.to_ascii_lowercase())));
    assert!(up.contains("\r\nx-forwarded-for: 127.0.0.1\r\n"), "{up}");

    // The client closing ends the tunnel and the proxy closes its side.
    s.shutdown().await.unwrap();
    let (_, closed) = read_until_close(&mut s, Duration::from_secs(5)).await;
    assert!(closed);
}

#[tokio::test]
async fn bytes_sent_with_the_handshake_reach_the_upstream() {
    let backend = EchoBackend::start().await;
    let dir = TempDir::new("ws-early");
    let p = proxy(&dir, backend.addr, "");
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    let frame = text_frame(b"early");
    let mut first = handshake("/chat", "").into_bytes();
    first.extend_from_slice(&frame);
    s.write_all(&first).await.unwrap();
    let head = read_head(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    let mut back = vec![0u8; frame.len()];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut back))
        .await
        .expect("echo in time")
        .unwrap();
    assert_eq!(back, frame);
}

#[tokio::test]
async fn blocked_handshake_gets_the_deny_status_and_no_tunnel() {
    let backend = EchoBackend::start().await;
    let dir = TempDir::new("ws-deny");
    let p = proxy(&dir, backend.addr, "");
    for (req, status) in [
        (handshake("/chat?token=evil", ""), 403),
        (
            handshake("/chat", "").replace("Upgrade: websocket", "Upgrade: smuggle"),
            400,
        ),
    ] {
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        let r = read_response(&mut s).await.unwrap();
        assert_eq!(r.status, status);
        assert_eq!(r.header("connection"), Some("close"));
        assert!(r.header("upgrade").is_none());
        // Nothing more: the connection closes rather than becoming a tunnel.
        let _ = s.write_all(&text_frame(b"after")).await;
        let (rest, closed) = read_until_close(&mut s, Duration::from_secs(5)).await;
        assert!(closed && rest.is_empty(), "{rest:?}");
    }
    assert!(
        backend.heads().is_empty(),
        "a blocked handshake reached the backend"
    );
}

#[tokio::test]
async fn declined_upgrade_is_an_ordinary_answer() {
    let backend = EchoBackend::start().await;
    let dir = TempDir::new("ws-declined");
    let p = proxy(&dir, backend.addr, "");
    let req =
        "GET /chat HTTP/1.1\r\nHost: app.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    let r = send_raw(p.addr, req.as_bytes()).await.unwrap();
    assert_eq!(r.status, 426);
    assert_eq!(r.text(), "no");
    assert!(r.header("upgrade").is_none());
}

#[tokio::test]
async fn cleartext_http2_upgrade_is_not_forwarded() {
    // An `h2c` tunnel would carry HTTP/2 requests past the rules: the request goes
    // upstream without its Upgrade, as a plain request.
    let backend = EchoBackend::start().await;
    let dir = TempDir::new("ws-h2c");
    let p = proxy(&dir, backend.addr, "");
    let req = handshake("/h2c", "HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n")
        .replace("Upgrade: websocket", "Upgrade: h2c")
        .replace("Connection: Upgrade", "Connection: Upgrade, HTTP2-Settings");
    let r = send_raw(p.addr, req.as_bytes()).await.unwrap();
    assert_eq!(r.status, 426);
    let seen = backend.heads();
    assert_eq!(seen.len(), 1);
    let up = seen[0].to_ascii_lowercase();
    assert!(!up.contains("\r\nupgrade:"), "{up}");
    assert!(!up.contains("http2-settings"), "{up}");
}

#[tokio::test]
async fn idle_tunnel_is_closed() {
    let backend = EchoBackend::start().await;
    let dir = TempDir::new("ws-idle");
    let p = proxy(&dir, backend.addr, "tunnel_idle_timeout = \"1s\"");
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    s.write_all(handshake("/chat", "").as_bytes())
        .await
        .unwrap();
    let head = read_head(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    // Nothing is sent: the proxy closes the tunnel on its own.
    let (rest, closed) = read_until_close(&mut s, Duration::from_secs(20)).await;
    assert!(closed, "the idle tunnel stayed open");
    assert!(rest.is_empty());
}
