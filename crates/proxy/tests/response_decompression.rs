//! Compressed response bodies through the real binary: gzip, deflate (zlib and
//! raw) and br bodies are decoded for phase 4 while the client gets the bytes the
//! upstream sent; a decompression bomb meets `SecResponseBodyLimit` or the ratio
//! limit and gets `SecResponseBodyLimitAction` (Reject: 500; ProcessPartial: the
//! part decoded is inspected) without the proxy's memory growing with it; corrupt
//! data is logged and handled the same way.

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

const LEAK: &[u8] = b"<html><body>key: AKIA-LEAKED-KEY</body></html>";
const CLEAN: &[u8] = b"<html><body>nothing to see here</body></html>";

fn gzip(data: &[u8]) -> Vec<u8> {
    compress("gzip", data)
}

/// 1 GiB of zeros as 1024 gzip members of 1 MiB each (about 1 MiB compressed),
/// after a first member holding `lead`.
fn gzip_bomb(lead: &[u8]) -> Vec<u8> {
    let mut body = gzip(lead);
    body.extend(gzip(&vec![0u8; 1 << 20]).repeat(1024));
    body
}

/// A backend answering each path with a fixed `Content-Encoding` and body
/// (`text/html`).
async fn backend(bodies: Vec<(&'static str, &'static str, Vec<u8>)>) -> SocketAddr {
    let map: Arc<HashMap<String, (&'static str, Bytes)>> = Arc::new(
        bodies
            .into_iter()
            .map(|(p, enc, b)| (p.to_owned(), (enc, Bytes::from(b))))
            .collect(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            let map = map.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let map = map.clone();
                    async move {
                        let (enc, body) = map
                            .get(req.uri().path())
                            .cloned()
                            .unwrap_or(("identity", Bytes::from_static(b"none")));
                        let mut r = Response::new(Full::new(body));
                        r.headers_mut()
                            .insert("content-type", "text/html".parse().unwrap());
                        r.headers_mut()
                            .insert("content-encoding", enc.parse().unwrap());
                        Ok::<_, Infallible>(r)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

fn rules(limit: usize, action: &str) -> String {
    rules_toml(&format!(
        "SecRuleEngine On\nSecResponseBodyAccess On\nSecResponseBodyMimeType text/html\nSecResponseBodyLimit {limit}\nSecResponseBodyLimitAction {action}\nSecRule RESPONSE_BODY \"@contains AKIA-LEAKED-KEY\" \"id:2001,phase:4,deny,status:403,log\""
    ))
}

/// Palisade in front of `backend` with the rules above; `ratio`: the
/// decompression ratio limit; `admin`: with an admin listener.
fn start(
    dir: &TempDir,
    backend: SocketAddr,
    (limit, action): (usize, &str),
    ratio: u64,
    admin: bool,
) -> Palisade {
    let listen = loopback(free_port());
    let admin = if admin {
        format!("[admin]\naddress = \"{}\"\n", loopback(free_port()))
    } else {
        String::new()
    };
    let cfg = basic_config(
        listen,
        backend,
        &format!(
            "{}\n[limits]\nresponse_decompression_ratio = {ratio}\n[logs]\nerror_log = \"error.log\"\n{admin}",
            rules(limit, action)
        ),
    );
    Palisade::start(dir, &cfg, listen)
}

async fn get(p: &Palisade, path: &str) -> RawResponse {
    send_raw(
        p.addr,
        format!("GET {path} HTTP/1.1\r\nHost: app.test\r\nAccept-Encoding: gzip, deflate, br\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap()
}

/// The peak resident memory of a process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

#[tokio::test]
async fn compressed_bodies_are_inspected_decoded_and_sent_as_they_came() {
    let cases = [
        ("gzip", "gzip"),
        ("br", "br"),
        ("zlib", "deflate"),
        ("raw", "deflate"),
    ];
    let leak_paths = ["/leak/gzip", "/leak/br", "/leak/zlib", "/leak/raw"];
    let clean_paths = ["/clean/gzip", "/clean/br", "/clean/zlib", "/clean/raw"];
    let mut bodies = Vec::new();
    for (i, (kind, enc)) in cases.iter().enumerate() {
        bodies.push((leak_paths[i], *enc, compress(kind, LEAK)));
        bodies.push((clean_paths[i], *enc, compress(kind, CLEAN)));
    }
    let expected: HashMap<&str, Vec<u8>> = bodies.iter().map(|(p, _, b)| (*p, b.clone())).collect();
    let addr = backend(bodies).await;
    let dir = TempDir::new("decode-basic");
    let p = start(&dir, addr, (1 << 20, "Reject"), 100, false);
    for (i, (name, enc)) in cases.iter().enumerate() {
        let r = get(&p, leak_paths[i]).await;
        assert_eq!(
            r.status, 403,
            "{name}: the phase-4 rule must see the decoded body"
        );
        let r = get(&p, clean_paths[i]).await;
        assert_eq!(r.status, 200, "{name}");
        assert_eq!(r.header("content-encoding"), Some(*enc), "{name}");
        assert_eq!(
            r.body, expected[clean_paths[i]],
            "{name}: bytes as the upstream sent them"
        );
    }
    // Without response body access the compressed text would not have matched:
    // the key is not in the compressed bytes.
    let gz = gzip(LEAK);
    assert!(!gz.windows(15).any(|w| w == b"AKIA-LEAKED-KEY"));
}

#[tokio::test]
async fn decompression_bomb_over_the_body_limit_follows_the_limit_action() {
    let bomb = gzip_bomb(CLEAN);
    let addr = backend(vec![("/bomb", "gzip", bomb.clone())]).await;

    // No ratio limit here: the body limit alone stops the bomb.
    let dir = TempDir::new("decode-bomb-reject");
    let p = start(&dir, addr, (1 << 20, "Reject"), 0, false);
    let r = get(&p, "/bomb").await;
    assert_eq!(r.status, 500);
    let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| {
        l.contains("SecResponseBodyLimit once decoded (gzip)")
    });
    assert!(
        line.is_some(),
        "the refusal is logged: {}",
        std::fs::read_to_string(dir.path("error.log")).unwrap_or_default()
    );
    drop(p);

    let dir = TempDir::new("decode-bomb-partial");
    let p = start(&dir, addr, (1 << 20, "ProcessPartial"), 0, false);
    for _ in 0..3 {
        let r = get(&p, "/bomb").await;
        assert_eq!(r.status, 200);
        assert!(
            r.body == bomb,
            "the client gets the compressed bytes unchanged"
        );
    }
    // 3 GiB were offered in all; the proxy never held more than a few MiB of it.
    let peak = peak_rss_kib(p.pid());
    eprintln!("palisade peak RSS after the bombs: {peak} KiB");
    assert!(peak < 256 * 1024, "peak RSS {peak} KiB");
}

#[tokio::test]
async fn excessive_ratio_is_a_limit_breach() {
    // With a large SecResponseBodyLimit, the ratio limit stops the bomb.
    let leak_bomb = gzip_bomb(LEAK);
    let clean_bomb = gzip_bomb(CLEAN);
    let addr = backend(vec![
        ("/leak", "gzip", leak_bomb),
        ("/clean", "gzip", clean_bomb.clone()),
    ])
    .await;

    let dir = TempDir::new("decode-ratio-partial");
    let p = start(&dir, addr, (512 << 20, "ProcessPartial"), 100, true);
    // ProcessPartial: what was decoded before the breach is inspected...
    let r = get(&p, "/leak").await;
    assert_eq!(r.status, 403);
    // ... and a clean one passes, unchanged, with the breach logged and counted.
    let r = get(&p, "/clean").await;
    assert_eq!(r.status, 200);
    assert!(r.body == clean_bomb);
    let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| {
        l.contains("limits.response_decompression_ratio (100 to 1)")
            && l.contains("inspecting the part decoded")
    });
    assert!(line.is_some(), "the breach is logged");
    let cfg = std::fs::read_to_string(dir.path("palisade.toml")).unwrap();
    let admin: SocketAddr = cfg
        .split("[admin]\naddress = \"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .parse()
        .unwrap();
    let m = send_raw(admin, b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap()
        .text();
    assert!(
        m.contains("palisade_response_decode_stopped_total{reason=\"ratio\"} 2"),
        "{m}"
    );
    let peak = peak_rss_kib(p.pid());
    eprintln!("palisade peak RSS after the bombs: {peak} KiB");
    assert!(peak < 256 * 1024, "peak RSS {peak} KiB");
    drop(p);

    let dir = TempDir::new("decode-ratio-reject");
    let p = start(&dir, addr, (512 << 20, "Reject"), 100, false);
    let r = get(&p, "/clean").await;
    assert_eq!(r.status, 500);
}

#[tokio::test]
async fn corrupt_compressed_data_follows_the_limit_action() {
    let mut corrupt = gzip(&CLEAN.repeat(200));
    let mid = corrupt.len() / 2;
    for b in &mut corrupt[mid..mid + 16] {
        *b ^= 0x5a;
    }
    let addr = backend(vec![("/corrupt", "gzip", corrupt.clone())]).await;

    let dir = TempDir::new("decode-corrupt-reject");
    let p = start(&dir, addr, (1 << 20, "Reject"), 100, false);
    let r = get(&p, "/corrupt").await;
    assert_eq!(r.status, 500);
    let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| {
        l.contains("gzip response body cannot be decoded")
    });
    assert!(line.is_some(), "logged");
    drop(p);

    let dir = TempDir::new("decode-corrupt-partial");
    let p = start(&dir, addr, (1 << 20, "ProcessPartial"), 100, false);
    let r = get(&p, "/corrupt").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body, corrupt,
        "the client gets the bytes as the upstream sent them"
    );
}
