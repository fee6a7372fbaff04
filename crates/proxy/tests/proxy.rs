//! End-to-end tests: the real `palisade` binary on 127.0.0.1 in front of a
//! recording backend.

mod common;

use common::*;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

const SQLI_RULES: &str = r#"
[[rules]]
inline = """
SecRuleEngine On
SecRequestBodyAccess On
SecRule ARGS "@rx (?i)' or '" "id:1,phase:2,deny,status:403,log,msg:'SQL injection'"
SecRule REQUEST_HEADERS:User-Agent "@rx test-agent" "id:10,phase:1,pass,log,msg:'test agent seen'"
"""
"#;

fn access_log_extra(dir: &TempDir) -> String {
    format!(
        "[logs]\nerror_log = \"{}\"\naccess_log = \"{}\"\n",
        dir.path("error.log").display(),
        dir.path("access.log").display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn benign_request_is_proxied_with_headers_and_body_intact() {
    let backend = Backend::start().await;
    let dir = TempDir::new("benign");
    let listen = loopback(free_port());
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, ""), listen);

    let body = "name=alice&comment=hello+world";
    let req = format!(
        "POST /submit?x=1&y=%41 HTTP/1.1\r\nHost: app.example\r\nUser-Agent: curl/8\r\nAccept: text/html\r\nAccept: application/json\r\nX-Custom: keep me\r\nX-Forwarded-For: 203.0.113.9\r\nConnection: close, X-Hop\r\nX-Hop: secret\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let resp = send_raw(listen, req.as_bytes()).await.unwrap();
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.text(), "hello from backend");
    assert_eq!(resp.header("x-backend"), Some("1"));

    let seen = backend.requests();
    assert_eq!(seen.len(), 1);
    let s = &seen[0];
    assert_eq!(s.method, "POST");
    assert_eq!(s.uri, "/submit?x=1&y=%41");
    assert_eq!(s.body, body.as_bytes());
    assert_eq!(s.header("host"), Some("app.example"));
    assert_eq!(s.header("user-agent"), Some("curl/8"));
    assert_eq!(s.all("accept"), vec!["text/html", "application/json"]);
    assert_eq!(s.header("x-custom"), Some("keep me"));
    assert_eq!(
        s.header("content-length"),
        Some(body.len().to_string().as_str())
    );
    assert_eq!(s.header("x-forwarded-for"), Some("203.0.113.9, 127.0.0.1"));
    assert_eq!(s.header("x-forwarded-proto"), Some("http"));
    // Hop-by-hop headers, including those named in Connection, stay behind.
    assert_eq!(s.header("x-hop"), None);
    assert_eq!(s.header("connection"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_body_expect_continue_and_keepalive() {
    let backend = Backend::start().await;
    let dir = TempDir::new("chunked");
    let listen = loopback(free_port());
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, ""), listen);

    let mut s = tokio::net::TcpStream::connect(listen).await.unwrap();
    // Expect: 100-continue: the proxy must invite the body before it is sent.
    s.write_all(b"POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n")
        .await
        .unwrap();
    let mut first = [0u8; 25];
    tokio::time::timeout(
        Duration::from_secs(5),
        tokio::io::AsyncReadExt::read_exact(&mut s, &mut first),
    )
    .await
    .expect("100 Continue in time")
    .unwrap();
    assert_eq!(&first, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n")
        .await
        .unwrap();
    let r1 = read_response(&mut s).await.unwrap();
    assert_eq!(r1.status, 200);
    // Same connection, second request.
    s.write_all(b"GET /json HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let r2 = read_response(&mut s).await.unwrap();
    assert_eq!(r2.status, 200);
    assert_eq!(r2.text(), "{\"ok\":true}");
    // Pipelined requests in one write.
    s.write_all(b"GET /one HTTP/1.1\r\nHost: a\r\n\r\nGET /two HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_response(&mut s).await.unwrap().status, 200);
    assert_eq!(read_response(&mut s).await.unwrap().status, 200);

    let seen = backend.requests();
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[0].body, b"hello, world");
    assert_eq!(seen[0].header("content-length"), Some("12"));
    assert_eq!(seen[0].header("transfer-encoding"), None);
    assert_eq!(seen[0].header("expect"), None);
    assert_eq!(seen[2].uri, "/one");
    assert_eq!(seen[1].header("host"), Some("a"));
    assert_eq!(seen[3].uri, "/two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqli_is_blocked_before_the_upstream_sees_it() {
    let backend = Backend::start().await;
    let dir = TempDir::new("sqli");
    let listen = loopback(free_port());
    let extra = format!("{SQLI_RULES}\n{}", access_log_extra(&dir));
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);

    let body = "user=admin' or '1'='1&pass=x";
    let req = format!(
        "POST /login HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let resp = send_raw(listen, req.as_bytes()).await.unwrap();
    assert_eq!(resp.status, 403, "{}", resp.text());
    assert!(
        backend.requests().is_empty(),
        "the upstream saw a blocked request"
    );
    let id_line = resp.text();
    let uid = id_line
        .lines()
        .find_map(|l| l.strip_prefix("Request id: "))
        .expect("unique id in the body")
        .to_owned();
    // The match line reaches the error log promptly, verbatim, with the same id.
    let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| {
        l.contains("[id \"1\"]")
    })
    .expect("match line in the error log");
    assert!(
        line.contains("ModSecurity: Access denied with code 403"),
        "{line}"
    );
    assert!(line.contains(&format!("[unique_id \"{uid}\"]")), "{line}");

    // A benign request still passes.
    let resp = send_raw(
        listen,
        b"GET /?user=alice HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(backend.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_log_fields_are_present_and_consistent() {
    let backend = Backend::start().await;
    let dir = TempDir::new("access");
    let listen = loopback(free_port());
    let extra = format!("{SQLI_RULES}\n{}", access_log_extra(&dir));
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);

    let before = now_us();
    let resp = send_raw(
        listen,
        b"POST /slow?ms=30 HTTP/1.1\r\nHost: a\r\nUser-Agent: test-agent\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
    )
    .await
    .unwrap();
    let after = now_us();
    assert_eq!(resp.status, 200);
    let line = wait_for_line(&dir.path("access.log"), Duration::from_secs(5), |l| {
        l.contains("/slow")
    })
    .expect("access log line");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    let num = |k: &str| {
        v[k].as_u64()
            .unwrap_or_else(|| panic!("{k} missing in {line}"))
    };
    let ts = v["ts_us"].as_i64().unwrap();
    assert!(
        ts >= before && ts <= after,
        "start timestamp {ts} not within [{before}, {after}]"
    );
    assert_eq!(
        v["client"].as_str().unwrap().split(':').next(),
        Some("127.0.0.1")
    );
    assert_eq!(v["method"], "POST");
    assert_eq!(v["uri"], "/slow?ms=30");
    assert_eq!(num("status"), 200);
    assert!(num("bytes_in") > 3);
    assert!(num("bytes_out") >= "slow done".len() as u64);
    let total = num("total_us");
    let phases: u64 = (1..=5).map(|i| num(&format!("phase{i}_us"))).sum();
    assert_eq!(num("waf_us"), phases);
    let connect = num("upstream_connect_us");
    let first_byte = num("upstream_first_byte_us");
    let transfer = num("upstream_transfer_us");
    assert!(
        first_byte >= 30_000,
        "backend slept 30 ms, first byte after {first_byte} µs"
    );
    assert!(
        phases + connect + first_byte + transfer <= total,
        "phases {phases} + connect {connect} + first byte {first_byte} + transfer {transfer} > total {total}"
    );
    assert_eq!(v["upstream"], "app");
    assert_eq!(v["upstream_addr"], backend.addr.to_string());
    assert_eq!(v["rules"], serde_json::json!([10]));
    assert_eq!(v["anomaly_inbound"], 0);
    assert_eq!(v["anomaly_outbound"], 0);
    assert_eq!(v["action"], "pass");
    assert!(v["unique_id"].as_str().is_some_and(|s| s.len() == 20));
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

#[test]
fn check_rejects_a_broken_rule_file_with_its_line() {
    let dir = TempDir::new("check-bad");
    std::fs::write(
        dir.path("rules.conf"),
        "# a comment\nSecRuleEngine On\nSecNoSuchDirective foo\n",
    )
    .unwrap();
    let cfg = dir.path("palisade.toml");
    std::fs::write(
        &cfg,
        format!(
            "{}\n[[rules]]\nfile = \"rules.conf\"\n",
            basic_config(loopback(1), loopback(2), "")
        ),
    )
    .unwrap();
    let out = palisade_check("--config", &cfg);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!("{}:3:", dir.path("rules.conf").display());
    assert!(err.contains(&want), "stderr {err:?} does not name {want}");
    assert!(err.contains("SecNoSuchDirective"), "{err}");
}

#[test]
fn check_summarises_a_good_config() {
    let dir = TempDir::new("check-good");
    std::fs::write(dir.path("a.conf"), "SecRuleEngine DetectionOnly\n").unwrap();
    std::fs::write(dir.path("b.conf"), "SecRequestBodyAccess On\n").unwrap();
    let cfg = dir.path("palisade.toml");
    std::fs::write(
        &cfg,
        format!(
            "{}\n[[rules]]\nfile = \"*.conf\"\n[[rules]]\ninline = \"SecResponseBodyAccess Off\"\n",
            basic_config(loopback(1), loopback(2), "")
        ),
    )
    .unwrap();
    let out = palisade_check("-c", &cfg);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("is ok"), "{stdout}");
    assert!(stdout.contains("phase 1: 0"), "{stdout}");
    assert!(stdout.contains("DetectionOnly"), "{stdout}");
    let a = stdout.find("a.conf").expect("a.conf listed");
    let b = stdout.find("b.conf").expect("b.conf listed");
    assert!(a < b, "files listed in load order");
}

#[test]
fn unknown_config_keys_are_refused_by_name() {
    let dir = TempDir::new("check-key");
    let cfg = dir.path("palisade.toml");
    std::fs::write(
        &cfg,
        basic_config(loopback(1), loopback(2), "[limits]\nheader_bytez = 10\n"),
    )
    .unwrap();
    let out = palisade_check("--config", &cfg);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("header_bytez"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_finishes_requests_in_flight() {
    let backend = Backend::start().await;
    let dir = TempDir::new("graceful");
    let listen = loopback(free_port());
    // A grace period far longer than the requests: the proxy must exit when they
    // are done, not when it runs out (the bound below leaves room for a busy machine).
    let extra = "[server]\ngrace_period = \"120s\"\n";
    let mut p = Palisade::start(&dir, &basic_config(listen, backend.addr, extra), listen);

    const N: usize = 24;
    let mut tasks = Vec::new();
    for i in 0..N {
        tasks.push(tokio::spawn(async move {
            let req =
                format!("GET /slow?ms=600&i={i} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
            send_raw(listen, req.as_bytes()).await
        }));
    }
    // Wait until every request has reached the backend, then ask palisade to stop.
    let deadline = Instant::now() + Duration::from_secs(10);
    while backend.requests().len() < N {
        assert!(
            Instant::now() < deadline,
            "requests did not reach the backend"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stop_at = Instant::now();
    p.terminate();
    // New connections are refused soon after.
    let mut refused = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if tokio::net::TcpStream::connect(listen).await.is_err() {
            refused = true;
            break;
        }
    }
    assert!(refused, "listener still accepting after SIGTERM");
    for t in tasks {
        let r = t.await.unwrap().expect("in-flight request completed");
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), "slow done");
    }
    let status = tokio::task::spawn_blocking(move || {
        let s = p.wait_exit(Duration::from_secs(60));
        (s, p)
    })
    .await
    .unwrap();
    assert!(
        status.0.success(),
        "exit status {:?}: {}",
        status.0,
        status.1.stderr_text()
    );
    assert!(
        stop_at.elapsed() < Duration::from_secs(60),
        "the proxy waited out its grace period instead of exiting when the requests were done"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_failures_map_to_502_and_504() {
    let backend = Backend::start().await;
    let dir = TempDir::new("upstream-err");
    let listen = loopback(free_port());
    let dead = loopback(free_port());
    let config = format!(
        "[[listener]]\naddress = \"{listen}\"\n\
         [[upstream]]\nname = \"dead\"\nservers = [\"{dead}\"]\n\
         [[upstream]]\nname = \"slow\"\nservers = [\"{}\"]\nread_timeout = \"200ms\"\n\
         [[upstream]]\nname = \"failover\"\nservers = [\"{dead}\"]\nbackup = [\"{}\"]\n\
         [[route]]\npath_prefix = \"/dead\"\nupstream = \"dead\"\n\
         [[route]]\npath_prefix = \"/slow\"\nupstream = \"slow\"\n\
         [[route]]\nupstream = \"failover\"\n\
         [logs]\nerror_log = \"{}\"\n",
        backend.addr,
        backend.addr,
        dir.path("error.log").display()
    );
    let _p = Palisade::start(&dir, &config, listen);
    let r = send_raw(
        listen,
        b"GET /dead HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 502);
    assert!(
        wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| l
            .contains("cannot connect to upstream dead"))
        .is_some()
    );
    let r = send_raw(
        listen,
        b"GET /slow?ms=2000 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 504);
    let r = send_raw(
        listen,
        b"GET /other HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "backup server used when the primary is down");
    // HTTP/1.0 without Host: the upstream gets the server's address as Host.
    let r = send_raw(listen, b"GET /ten HTTP/1.0\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let seen = backend.requests();
    let last = seen.last().unwrap();
    assert_eq!(last.uri, "/ten");
    assert_eq!(last.header("host"), Some(backend.addr.to_string().as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_and_unforwardable_requests_get_400() {
    let backend = Backend::start().await;
    let dir = TempDir::new("bad");
    let listen = loopback(free_port());
    let extra = access_log_extra(&dir);
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);

    // A header line without a colon cannot be read at all.
    let r = send_raw(
        listen,
        b"GET / HTTP/1.1\r\nHost: a\r\nthis is not a header\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400);
    assert!(
        wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| l
            .contains("header line without a colon"))
        .is_some()
    );
    // A bare CR is invalid HTTP (RFC 9112 §2.2): refused before the engine.
    let r = send_raw(
        listen,
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rInjected: b\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400);
    assert!(
        wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| l
            .contains("bare CR in a header line"))
        .is_some()
    );
    // Readable but not forwardable: non-numeric Content-Length, control byte, empty Host.
    for raw in [
        &b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: NotDigits\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost:\r\n\r\n",
        b"GET / JUNK/1.0\r\nHost: a\r\n\r\n",
        b"GET /#frag HTTP/1.1\r\nHost: a\r\n\r\n",
    ] {
        let r = send_raw(listen, raw).await.unwrap();
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(raw));
    }
    // Oversized head.
    let mut big = b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 40_000));
    big.extend_from_slice(b"\r\n\r\n");
    let r = send_raw(listen, &big).await.unwrap();
    assert_eq!(r.status, 431);
    assert!(backend.requests().is_empty());
    // Odd but forwardable: raw quotes and high bytes in the query get through.
    let r = send_raw(
        listen,
        b"GET /?q=\"<x>\"&h=\xff HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(backend.requests()[0].uri, "/?q=%22%3Cx%3E%22&h=%FF");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_sees_odd_requests_as_sent() {
    let backend = Backend::start().await;
    let dir = TempDir::new("odd");
    let listen = loopback(free_port());
    let extra = format!(
        r#"{}
[[rules]]
inline = """
SecRuleEngine On
SecRule REQUEST_PROTOCOL "@streq HTTP/3.0" "id:101,phase:1,deny,status:403,log"
SecRule REQUEST_URI_RAW "@rx #frag$" "id:102,phase:1,deny,status:403,log"
SecRule &REQUEST_HEADERS:Content-Length "@eq 2" "id:103,phase:1,deny,status:403,log"
SecRule REQUEST_HEADERS:X-Evil "@rx \x01" "id:104,phase:1,deny,status:403,log"
"""
"#,
        access_log_extra(&dir)
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    for (raw, id) in [
        (&b"GET / HTTP/3.0\r\nHost: a\r\n\r\n"[..], 101),
        (b"GET /page#frag HTTP/1.1\r\nHost: a\r\n\r\n", 102),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
            103,
        ),
        (b"GET / HTTP/1.1\r\nHost: a\r\nX-Evil: a\x01b\r\n\r\n", 104),
    ] {
        let r = send_raw(listen, raw).await.unwrap();
        assert_eq!(r.status, 403, "rule {id}: {}", String::from_utf8_lossy(raw));
        let want = format!("[id \"{id}\"]");
        assert!(
            wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| l
                .contains(&want))
            .is_some(),
            "rule {id} not logged"
        );
    }
    assert!(backend.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_bodies_are_inspected_for_configured_types() {
    let backend = Backend::start().await;
    let dir = TempDir::new("resp");
    let listen = loopback(free_port());
    let extra = r#"
[[rules]]
inline = """
SecRuleEngine On
SecResponseBodyAccess On
SecResponseBodyMimeType text/html text/plain
SecRule RESPONSE_BODY "@rx AKIA-" "id:201,phase:4,deny,status:403,log,msg:'key leak'"
SecRule RESPONSE_HEADERS:X-Backend "@streq 2" "id:202,phase:3,deny,status:403"
"""
"#;
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, extra), listen);
    let r = send_raw(
        listen,
        b"GET /leak HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 403);
    assert!(!r.text().contains("AKIA"));
    // Not an inspected type: streamed through, with its length.
    let r = send_raw(
        listen,
        b"GET /big?n=3000000 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 3_000_000);
    let r = send_raw(
        listen,
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello from backend");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_api_serves_metrics_and_status() {
    let backend = Backend::start().await;
    let dir = TempDir::new("admin");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let extra = format!("[admin]\naddress = \"{admin}\"\n");
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    for _ in 0..3 {
        let r = send_raw(
            listen,
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap();
        assert_eq!(r.status, 200);
    }
    let _ = send_raw(listen, b"GET / HTTP/1.1\r\nnot a header\r\n\r\n")
        .await
        .unwrap();
    // Metrics are recorded when the response is finished; give the last one a moment.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let m = send_raw(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(m.status, 200);
    let text = m.text();
    assert!(
        text.contains("palisade_requests_total{status=\"200\",action=\"pass\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("palisade_requests_total{status=\"400\",action=\"bad_request\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("palisade_waf_phase_seconds_count{phase=\"1\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("palisade_upstream_seconds_bucket{stage=\"first_byte\",le=\"+Inf\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("palisade_log_lines_dropped_total{log=\"access\"} 0"),
        "{text}"
    );
    let s = send_raw(
        admin,
        b"GET /status HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(s.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        v["git_revision"]
            .as_str()
            .is_some_and(|r| r == "unknown" || r.len() == 40)
    );
    assert!(v["build_profile"].is_string());
    assert!(v["kernel_version"].is_string());
    assert!(v["host_uptime_seconds"].as_f64().is_some_and(|u| u > 0.0));
    assert!(v["process_uptime_seconds"].as_f64().is_some());
    assert_eq!(v["rules"]["count"], 0);
    assert_eq!(v["rules"]["sha256"].as_str().map(str::len), Some(64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_listener_speaks_http1_and_http2() {
    if required(
        Path::new("/usr/bin/openssl"),
        "the TLS listener test (openssl)",
    )
    .is_none()
        || required(Path::new("/usr/bin/curl"), "the TLS listener test (curl)").is_none()
    {
        return;
    }
    let backend = Backend::start().await;
    let dir = TempDir::new("tls");
    let ok = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
        ])
        .arg(dir.path("key.pem"))
        .arg("-out")
        .arg(dir.path("cert.pem"))
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let listen = loopback(free_port());
    let config = format!(
        "[[listener]]\naddress = \"{listen}\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n",
        backend.addr
    );
    let _p = Palisade::start(&dir, &config, listen);
    for (flag, version) in [("--http2", "2"), ("--http1.1", "1.1")] {
        let out = tokio::process::Command::new("curl")
            .args([
                "-sk",
                flag,
                "-o",
                "-",
                "-w",
                "\n%{http_version} %{http_code}",
                "-H",
                "X-T: 1",
                "--data",
                "a=1",
            ])
            .arg("--resolve")
            .arg(format!("localhost:{}:127.0.0.1", listen.port()))
            .arg(format!("https://localhost:{}/post", listen.port()))
            .output()
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.ends_with(&format!("{version} 200")),
            "{flag}: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.starts_with("hello from backend"), "{text}");
    }
    let seen = backend.requests();
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(s.body, b"a=1");
        assert_eq!(s.header("x-forwarded-proto"), Some("https"));
        assert_eq!(
            s.header("host").map(|h| h.starts_with("localhost:")),
            Some(true)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crs_v4_blocks_sqli_in_blocking_mode() {
    let crs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/crs");
    if required(&crs.join("rules"), "CRS v4 (../shared/crs)").is_none() {
        return;
    }
    let backend = Backend::start().await;
    let dir = TempDir::new("crs");
    let listen = loopback(free_port());
    let extra = format!(
        r#"{}
[[rules]]
inline = """
SecRuleEngine On
SecRequestBodyAccess On
"""
[[rules]]
file = "{crs}/crs-setup.conf.example"
[[rules]]
file = "{crs}/rules/*.conf"
"#,
        access_log_extra(&dir),
        crs = crs.display()
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    let r = send_raw(
        listen,
        b"GET /?id=1%27%20OR%20%271%27%3D%271 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Mozilla/5.0\r\nAccept: text/html\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(backend.requests().is_empty());
    let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| {
        l.contains("[id \"949110\"]")
    })
    .expect("949110 (inbound anomaly score exceeded) logged");
    assert!(line.contains("Access denied"), "{line}");
    let r = send_raw(
        listen,
        b"GET /index.html?q=hello HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Mozilla/5.0\r\nAccept: text/html\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_rules_and_keeps_them_when_the_new_set_is_broken() {
    let backend = Backend::start().await;
    let dir = TempDir::new("reload");
    let listen = loopback(free_port());
    let rules = |word: &str| {
        format!(
            "{}\n[[rules]]\nfile = \"rules.conf\"\n",
            basic_config(listen, backend.addr, &access_log_extra(&dir))
        )
        .replace("__WORD__", word)
    };
    let write_rules = |word: &str| {
        std::fs::write(
            dir.path("rules.conf"),
            format!("SecRuleEngine On\nSecRule ARGS \"@streq {word}\" \"id:7,phase:1,deny,status:403,log\"\n"),
        )
        .unwrap();
    };
    write_rules("foo");
    let mut p = Palisade::start(&dir, &rules("foo"), listen);
    let get = |q: &'static str| async move {
        let req = format!("GET /?q={q} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        send_raw(listen, req.as_bytes()).await.unwrap().status
    };
    assert_eq!(get("foo").await, 403);
    assert_eq!(get("bar").await, 200);

    let hup = |pid: u32| {
        assert!(
            std::process::Command::new("kill")
                .args(["-HUP", &pid.to_string()])
                .status()
                .unwrap()
                .success()
        );
    };
    // Rotate the error log and reload new rules.
    std::fs::rename(dir.path("error.log"), dir.path("error.log.1")).unwrap();
    write_rules("bar");
    hup(p.pid());
    let deadline = Instant::now() + Duration::from_secs(10);
    while get("bar").await != 403 {
        assert!(Instant::now() < deadline, "new rules not in force");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(get("foo").await, 200);
    assert!(
        wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| l
            .contains("[id \"7\"]"))
        .is_some(),
        "reopened error log receives new lines"
    );

    // A broken rule file: the rules in force stay.
    std::fs::write(dir.path("rules.conf"), "SecRule ARGS\n").unwrap();
    hup(p.pid());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(get("bar").await, 403);
    assert!(
        p.stderr_text().contains("reload failed"),
        "{}",
        p.stderr_text()
    );
    p.terminate();
    let s = tokio::task::spawn_blocking(move || p.wait_exit(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(s.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_get_413_before_the_upstream() {
    let backend = Backend::start().await;
    let dir = TempDir::new("413");
    let listen = loopback(free_port());
    let extra = "[limits]\nrequest_body_bytes = 1000\n";
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, extra), listen);
    // Announced too large: refused without reading it.
    let r = send_raw(
        listen,
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 413);
    // Chunked, found too large while reading.
    let mut req = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        req.extend_from_slice(b"200\r\n");
        req.extend(std::iter::repeat_n(b'a', 0x200));
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let r = send_raw(listen, &req).await.unwrap();
    assert_eq!(r.status, 413);
    assert!(backend.requests().is_empty());
    // Within the limit: forwarded.
    let r = send_raw(
        listen,
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123456789",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(backend.requests()[0].body, b"0123456789");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_redirect_and_drop_verdicts() {
    let backend = Backend::start().await;
    let dir = TempDir::new("verdicts");
    let listen = loopback(free_port());
    let extra = r#"
[[rules]]
inline = """
SecRuleEngine On
SecRule ARGS:go "@streq away" "id:301,phase:1,redirect:http://example.com/blocked,log"
SecRule ARGS:x "@streq drop" "id:302,phase:1,drop,log"
SecRule ARGS:x "@streq teapot" "id:303,phase:1,deny,status:418,log"
"""
"#;
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, extra), listen);
    let r = send_raw(listen, b"GET /?go=away HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("http://example.com/blocked"));
    let r = send_raw(listen, b"GET /?x=teapot HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(r.status, 418);
    let r = send_raw(listen, b"GET /?x=drop HTTP/1.1\r\nHost: a\r\n\r\n").await;
    assert!(r.is_err(), "a dropped request gets no answer: {r:?}");
    assert!(backend.requests().is_empty());
}

/// Sends `count` marker requests, go-ftw style (one connection each), and reads the
/// error log right after each response, without waiting. Returns the markers whose
/// match line was not in the file yet.
async fn markers_missing_right_after_the_response(
    listen: std::net::SocketAddr,
    error_log: &std::path::Path,
    count: usize,
) -> Vec<String> {
    let mut missing = Vec::new();
    for i in 0..count {
        let marker = format!("marker-{i}-{}", std::process::id());
        let req = format!(
            "GET /status/200 HTTP/1.1\r\nHost: localhost\r\nX-CRS-Test: {marker}\r\nConnection: close\r\n\r\n"
        );
        let r = send_raw(listen, req.as_bytes()).await.unwrap();
        assert_eq!(r.status, 200);
        let text = std::fs::read_to_string(error_log).unwrap_or_default();
        if !text
            .lines()
            .any(|l| l.contains("[id \"999999\"]") && l.contains(&marker))
        {
            missing.push(marker);
        }
    }
    missing
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_log_lines_are_written_before_the_response_when_asked() {
    let backend = Backend::start().await;
    let dir = TempDir::new("logsync");
    let listen = loopback(free_port());
    let error_log = dir.path("error.log");
    // A phase-1 rule that logs (go-ftw's marker rule), and one that denies.
    let extra = format!(
        r#"
[[rules]]
inline = """
SecRuleEngine On
SecRule REQUEST_HEADERS:X-CRS-Test "@rx ^.*$" "id:999999,phase:1,pass,log,msg:'X-CRS-Test %{{MATCHED_VAR}}'"
SecRule ARGS:block "@streq yes" "id:2,phase:1,deny,status:403,log,msg:'blocked'"
"""

[logs]
error_log = "{}"
error_log_before_response = true
"#,
        error_log.display()
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);

    let missing = markers_missing_right_after_the_response(listen, &error_log, 200).await;
    assert!(
        missing.is_empty(),
        "match lines not yet in the error log when the response arrived: {missing:?}"
    );

    // A denied request, on a kept-alive connection: its line is there with the 403.
    let mut s = tokio::net::TcpStream::connect(listen).await.unwrap();
    for i in 0..20 {
        s.write_all(format!("GET /?block=yes&n={i} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let r = read_response(&mut s).await.unwrap();
        assert_eq!(r.status, 403);
        let uid = r
            .text()
            .lines()
            .find_map(|l| l.strip_prefix("Request id: "))
            .expect("unique id in the body")
            .to_owned();
        let text = std::fs::read_to_string(&error_log).unwrap();
        assert!(
            text.lines()
                .any(|l| l.contains("[id \"2\"]") && l.contains(&uid)),
            "deny line of {uid} not in the error log with the response"
        );
        // The deny closes the connection.
        s = tokio::net::TcpStream::connect(listen).await.unwrap();
    }

    // A proxy error (unreadable head) is logged before the 400 as well.
    let r = send_raw(listen, b"GET / HTTP/1.1\r\nHost: a\r\nno colon\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(r.status, 400);
    let text = std::fs::read_to_string(&error_log).unwrap();
    assert!(
        text.lines()
            .last()
            .is_some_and(|l| l.contains("header line without a colon")),
        "{text}"
    );
}

/// The base configuration ModSecurity users start from (Debian ships it with
/// libnginx-mod-http-modsecurity, which CI installs for the benchmark) loads
/// unchanged, including `SecAuditLogRelevantStatus "^(?:5|4(?!04))"` and its
/// lookahead.
#[test]
fn debian_stock_modsecurity_conf_loads() {
    let stock = std::path::Path::new("/etc/nginx/modsecurity.conf");
    assert!(
        stock.exists(),
        "{} is missing: install libnginx-mod-http-modsecurity (.ci/run does)",
        stock.display()
    );
    let dir = TempDir::new("check-debian");
    let cfg = dir.path("palisade.toml");
    std::fs::write(
        &cfg,
        format!(
            "{}\n[[rules]]\nfile = \"{}\"\n",
            basic_config(loopback(1), loopback(2), ""),
            stock.display()
        ),
    )
    .unwrap();
    let out = palisade_check("-c", &cfg);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("is ok"), "{stdout}");
}
