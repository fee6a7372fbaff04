//! Limits that keep one client from holding the proxy or slipping a request past
//! the rules: header policy, request body deadlines and rate, connections per
//! address, and the admin listener's timeouts. The real `palisade` binary on
//! 127.0.0.1 in front of a recording backend.

mod common;

use common::*;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_header_cannot_remove_host() {
    let backend = Backend::start().await;
    let dir = TempDir::new("conn-host");
    let listen = loopback(free_port());
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, ""), listen);
    let resp = send_raw(
        listen,
        b"GET /x HTTP/1.1\r\nHost: site.example\r\nConnection: host, x-gone\r\nX-Gone: 1\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(resp.status, 200, "{}", resp.text());
    let seen = backend.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].header("host"), Some("site.example"));
    assert_eq!(seen[0].header("x-gone"), None);
}

/// Transfer-Encoding in an HTTP/1.0 request: its framing cannot be trusted (RFC
/// 9112 §6.1), so even with `Connection: keep-alive` the connection closes after
/// the answer and what follows the body is never read as a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_encoding_in_http10_closes_the_connection() {
    let backend = Backend::start().await;
    let dir = TempDir::new("te-http10");
    let listen = loopback(free_port());
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, ""), listen);
    let mut s = TcpStream::connect(listen).await.unwrap();
    s.write_all(
        b"POST /first HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /second HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n",
    )
    .await
    .unwrap();
    let (got, closed) = read_until_close(&mut s, Duration::from_secs(10)).await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    assert_eq!(text.matches("HTTP/1.1 ").count(), 1, "{text}");
    assert!(text.contains("Connection: close"), "{text}");
    assert!(closed, "the connection stayed open");
    let seen = backend.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].uri, "/first");
    assert_eq!(seen[0].body, b"hello");
}

/// A client that sends its body a byte at a time, each within the pause limit,
/// is cut off by the minimum rate; the backend sees nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dripped_body_is_cut_off_by_the_minimum_rate() {
    let backend = Backend::start().await;
    let dir = TempDir::new("drip-rate");
    let listen = loopback(free_port());
    let extra = format!(
        "[server]\nclient_body_timeout = \"30s\"\nclient_body_min_rate = 1000\nclient_body_min_rate_grace = \"1s\"\n{}",
        error_log(&dir)
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    let mut s = TcpStream::connect(listen).await.unwrap();
    s.write_all(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    // Drip for at most 30 s (the pause limit would never fire).
    while started.elapsed() < Duration::from_secs(30) {
        if s.write_all(b"a").await.is_err() {
            break;
        }
        let (got, closed) = read_until_close(&mut s, Duration::from_millis(200)).await;
        answer.extend_from_slice(&got);
        if closed || !answer.is_empty() {
            break;
        }
    }
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(backend.requests().is_empty());
    assert!(
        wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| l
            .contains("client_body_min_rate"))
        .is_some()
    );
}

/// A body that keeps coming, fast enough for the pause and rate limits, is cut off
/// by the whole-body deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_body_is_cut_off_by_the_deadline() {
    let backend = Backend::start().await;
    let dir = TempDir::new("body-deadline");
    let listen = loopback(free_port());
    let extra = format!(
        "[server]\nclient_body_deadline = \"1s\"\nclient_body_min_rate = 0\n{}",
        error_log(&dir)
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    let mut s = TcpStream::connect(listen).await.unwrap();
    s.write_all(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    while started.elapsed() < Duration::from_secs(30) {
        if s.write_all(&[b'a'; 100]).await.is_err() {
            break;
        }
        let (got, closed) = read_until_close(&mut s, Duration::from_millis(100)).await;
        answer.extend_from_slice(&got);
        if closed || !answer.is_empty() {
            break;
        }
    }
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(backend.requests().is_empty());
    assert!(
        wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| l
            .contains("client_body_deadline"))
        .is_some()
    );
}

fn error_log(dir: &TempDir) -> String {
    format!(
        "[logs]\nerror_log = \"{}\"\n",
        dir.path("error.log").display()
    )
}

/// Connections over `limits.connections_per_ip` are closed at once; the others
/// are served, and a freed slot can be used again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_per_address_are_capped() {
    let backend = Backend::start().await;
    let dir = TempDir::new("per-ip");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let extra = format!("[limits]\nconnections_per_ip = 3\n[admin]\naddress = \"{admin}\"\n");
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    // Palisade::start itself connected once to see the listener up: wait until
    // that connection is gone from the count, then until the proxy holds the three
    // opened here (no guess at how long either takes on a busy machine).
    let open_now = || metric(admin, "palisade_connection_slots_in_use");
    let deadline = Instant::now() + Duration::from_secs(30);
    while open_now().await != 0.0 {
        assert!(
            Instant::now() < deadline,
            "the probe connection never closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(TcpStream::connect(listen).await.unwrap());
    }
    while open_now().await != 3.0 {
        assert!(
            Instant::now() < deadline,
            "the proxy never held 3 connections"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut extra_conn = TcpStream::connect(listen).await.unwrap();
    let (_, closed) = read_until_close(&mut extra_conn, Duration::from_secs(5)).await;
    assert!(
        closed,
        "a fourth connection from the same address stays open"
    );

    // The held connections are served.
    let mut first = held.remove(0);
    first
        .write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let resp = read_response(&mut first).await.unwrap();
    assert_eq!(resp.status, 200);
    drop(first);
    // Its slot is free again once the proxy has seen it close.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut s = TcpStream::connect(listen).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        if let Ok(r) = read_response(&mut s).await {
            assert_eq!(r.status, 200);
            break;
        }
        assert!(Instant::now() < deadline, "the freed slot was never usable");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let metrics = send_raw(admin, b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap()
        .text();
    let refused = metrics
        .lines()
        .find_map(|l| l.strip_prefix("palisade_connections_refused_per_ip_total "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap();
    assert!(refused >= 1, "{metrics}");
}

/// An admin client that sends part of a head, or keeps its connection open, is cut
/// off after `admin.timeout`; the admin API keeps answering others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_connections_time_out() {
    let backend = Backend::start().await;
    let dir = TempDir::new("admin-timeout");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let extra = format!("[admin]\naddress = \"{admin}\"\ntimeout = \"1s\"\nconnections = 4\n");
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    let mut partial = Vec::new();
    for _ in 0..4 {
        let mut s = TcpStream::connect(admin).await.unwrap();
        s.write_all(b"GET /metr").await.unwrap();
        partial.push(s);
    }
    // All four slots are taken by clients that never finish their head; each is
    // closed by the timeout, and a complete request is then answered.
    for s in &mut partial {
        let (_, closed) = read_until_close(s, Duration::from_secs(20)).await;
        assert!(closed, "a stalled admin connection stayed open");
    }
    let resp = send_raw(admin, b"GET /status HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(resp.status, 200);
}

/// Rule evaluation over `server.waf_cpu_budget` stops: the request is refused with
/// the configured status (or passes, with `waf_cpu_budget_action = "pass"`), the
/// error log says so, and the metrics count it. The backend sees no refused request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_budget_stops_rule_evaluation() {
    let rules = r#"
[[rules]]
inline = """
SecRuleEngine On
SecRequestBodyAccess On
SecRequestBodyNoFilesLimit 4194304
SecRule ARGS "@rx (?:a|b)+c[0-9]{2,}" "id:1,phase:2,t:lowercase,t:urlDecodeUni,pass"
SecRule ARGS "@rx x{3}y" "id:2,phase:2,t:removeWhitespace,t:htmlEntityDecode,pass"
SecRule ARGS "@rx z{3}q" "id:3,phase:2,t:compressWhitespace,t:jsDecode,pass"
"""
"#;
    let body = format!("q={}", "ab".repeat(1_000_000));
    let req = format!(
        "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    for (action, status) in [("block", 429), ("pass", 200)] {
        let backend = Backend::start().await;
        let dir = TempDir::new(&format!("budget-{action}"));
        let listen = loopback(free_port());
        let admin = loopback(free_port());
        let extra = format!(
            "[server]\nwaf_cpu_budget = \"1ms\"\nwaf_cpu_budget_action = \"{action}\"\nwaf_cpu_budget_status = 429\n[limits]\nrequest_body_bytes = 4194304\n[admin]\naddress = \"{admin}\"\n{}{rules}",
            error_log(&dir)
        );
        let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
        let resp = send_raw(listen, req.as_bytes()).await.unwrap();
        assert_eq!(resp.status, status, "{action}: {}", resp.text());
        assert_eq!(backend.requests().len(), usize::from(action == "pass"));
        let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| {
            l.contains("over its CPU budget in phase 2")
        });
        assert!(line.is_some(), "{action}: no error-log line");
        let metrics = send_raw(admin, b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .unwrap()
            .text();
        let counted = format!("palisade_waf_budget_exceeded_total{{action=\"{action}\"}} 1");
        assert!(metrics.contains(&counted), "{metrics}");
    }
}
