//! Compressed request bodies through the real binary (`limits.request_content_encoding
//! = "decode"`, the default): gzip, deflate (zlib and raw) and br bodies are decoded
//! for the rules, and the upstream gets the bytes the client sent; a coding Palisade
//! does not decode is refused (415) before the body is read; a body that does not
//! decode, or decodes beyond `request_decompression_ratio`, is refused (400); past
//! `SecRequestBodyLimit` the engine's limit action applies; with `"refuse"` every
//! encoded body is answered 415.

mod common;

use common::*;
use std::net::SocketAddr;
use std::time::Duration;

/// An SQL injection rule on arguments, as CRS inspects them, and the engine's
/// body limit at 64 KiB (Reject).
const RULES: &str = r#"
[[rules]]
inline = '''
SecRuleEngine On
SecRequestBodyAccess On
SecRequestBodyLimit 65536
SecRequestBodyLimitAction Reject
SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule ARGS "@rx (?i)union\s+select" "id:10,phase:2,deny,status:403,log,msg:'SQL injection'"
'''
"#;

const ATTACK: &[u8] = b"id=1' UNION SELECT password FROM users--&x=1";
const BENIGN: &[u8] = b"id=42&name=Anne&comment=Great+product";

fn post(coding: &str, ctype: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST /submit HTTP/1.1\r\nHost: app.example\r\nContent-Type: {ctype}\r\nContent-Encoding: {coding}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

fn form(coding: &str, body: &[u8]) -> Vec<u8> {
    post(coding, "application/x-www-form-urlencoded", body)
}

/// Palisade with `limits` (a TOML section or nothing), [`RULES`], then `more`
/// SecLang.
async fn start(limits: &str, more: &str) -> (Backend, TempDir, SocketAddr, Palisade) {
    let backend = Backend::start().await;
    let dir = TempDir::new("request-decompression");
    let listen = loopback(free_port());
    let config = basic_config(
        listen,
        backend.addr,
        &format!(
            "{limits}\n[logs]\nerror_log = \"{}\"\n{RULES}\n[[rules]]\ninline = \"{more}\"\n",
            dir.path("error.log").display()
        ),
    );
    let p = Palisade::start(&dir, &config, listen);
    (backend, dir, listen, p)
}

async fn status(listen: SocketAddr, req: &[u8]) -> u16 {
    send_raw(listen, req).await.unwrap().status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_bodies_are_inspected_decoded_and_forwarded_as_sent() {
    let (backend, _dir, listen, _p) = start("", "").await;
    for (kind, coding) in [
        ("gzip", "gzip"),
        ("gzip", "x-gzip"),
        ("zlib", "deflate"),
        ("raw", "deflate"),
        ("br", "br"),
    ] {
        assert_eq!(
            status(listen, &form(coding, &compress(kind, ATTACK))).await,
            403,
            "{kind} as {coding}"
        );
        let sent = compress(kind, BENIGN);
        assert_eq!(
            status(listen, &form(coding, &sent)).await,
            200,
            "{kind} as {coding}"
        );
        let seen = backend.requests();
        let last = seen.last().expect("the benign request reached the backend");
        assert_eq!(last.body, sent, "{kind}: the body is forwarded as sent");
        assert_eq!(last.header("content-encoding"), Some(coding));
    }
    // A JSON body, through its processor.
    let json = br#"{"id":"1' UNION SELECT password FROM users--"}"#;
    let req = post("gzip", "application/json", &compress("gzip", json));
    assert_eq!(status(listen, &req).await, 403);
    // `identity` is no coding.
    assert_eq!(status(listen, &form("identity", ATTACK)).await, 403);
    assert_eq!(status(listen, &form("identity", BENIGN)).await, 200);
    assert_eq!(backend.requests().len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_cannot_be_read_are_refused() {
    let (backend, dir, listen, _p) = start("", "").await;
    // A coding Palisade does not decode, and two codings.
    assert_eq!(status(listen, &form("compress", ATTACK)).await, 415);
    let twice = compress("gzip", &compress("gzip", ATTACK));
    assert_eq!(status(listen, &form("gzip, gzip", &twice)).await, 415);
    // Not gzip at all, and a stream cut short.
    assert_eq!(status(listen, &form("gzip", ATTACK)).await, 400);
    let mut cut = compress("gzip", ATTACK);
    cut.truncate(cut.len() / 2);
    assert_eq!(status(listen, &form("gzip", &cut)).await, 400);
    // Past SecRequestBodyLimit (64 KiB) once decoded: the engine's Reject.
    let mut big = b"x=".to_vec();
    big.extend(std::iter::repeat_n(b'a', 200_000));
    assert_eq!(
        status(listen, &form("gzip", &compress("gzip", &big))).await,
        413
    );
    assert!(backend.requests().is_empty(), "{:?}", backend.requests());
    // The log writer runs beside the request: wait for its line.
    let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("cannot be decoded")
    });
    assert!(
        line.is_some(),
        "no log line says the body cannot be decoded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ratio_limit_stops_a_bomb() {
    // A ratio of 10 to 1, and a body limit high enough that the ratio decides.
    let (backend, dir, listen, _p) = start(
        "[limits]\nrequest_decompression_ratio = 10\n",
        "SecRequestBodyLimit 100000000",
    )
    .await;
    let mut bomb = b"x=".to_vec();
    bomb.extend(std::iter::repeat_n(b'a', 8 << 20));
    let sent = compress("gzip", &bomb);
    assert!(sent.len() < 64 << 10, "{}", sent.len());
    assert_eq!(status(listen, &form("gzip", &sent)).await, 400);
    assert!(backend.requests().is_empty());
    let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("request_decompression_ratio (10 to 1)")
    });
    assert!(line.is_some(), "no log line names the ratio limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuse_policy_answers_415() {
    let (backend, _dir, listen, _p) =
        start("[limits]\nrequest_content_encoding = \"refuse\"\n", "").await;
    let r = send_raw(listen, &form("gzip", &compress("gzip", BENIGN)))
        .await
        .unwrap();
    assert_eq!(r.status, 415);
    assert_eq!(r.header("accept-encoding"), Some("identity"));
    assert!(backend.requests().is_empty());
}
