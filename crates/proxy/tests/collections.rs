//! Persistent collections through the real `palisade` binary: counters that
//! outlive requests, restarts and rule reloads in the embedded store at its default
//! path; `palisade ctx` and the admin API's `/ctx` working on the store of a
//! running proxy; CRS 3.3.4's DoS protection.
//!
//! Writes reach the store asynchronously (the writer commits every
//! `store.batch_interval`), so a test that needs request N's write before request
//! N+1 waits until the record's UPDATE_COUNTER says it was committed, read through
//! `palisade ctx get`; it never sleeps for a guessed time.

mod common;

use common::*;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const GET: &[u8] = b"GET /page HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

const COUNTER_RULES: &str = r#"SecRuleEngine On
SecAction "id:1,phase:1,nolog,pass,initcol:ip=%{REMOTE_ADDR},setvar:ip.hits=+1"
SecRule IP:HITS "@gt 3" "id:2,phase:1,deny,status:429,log,msg:'too many requests'"
SecRule IP:BLOCKED "@eq 1" "id:3,phase:1,deny,status:403,log,msg:'blocked from outside'""#;

async fn status(listen: SocketAddr) -> u16 {
    send_raw(listen, GET).await.unwrap().status
}

/// Out of the box (no `[store]` section): a per-IP counter counts across requests
/// and across a restart of the proxy, and blocks over its threshold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_counts_across_requests_and_restarts() {
    let backend = Backend::start().await;
    let dir = TempDir::new("ctx-restart");
    let listen = loopback(free_port());
    let config = basic_config(listen, backend.addr, &rules_toml(COUNTER_RULES));
    let mut p = Palisade::start(&dir, &config, listen);
    for n in 1..=3u64 {
        assert_eq!(status(listen).await, 200, "request {n}");
        wait_update_counter(&dir, "IP", "127.0.0.1", n);
    }
    assert_eq!(status(listen).await, 429);
    let r = wait_update_counter(&dir, "IP", "127.0.0.1", 4);
    assert_eq!(var(&r, "hits").as_deref(), Some("4"));
    // The store is where the documented default says (PALISADE_STORE here).
    assert!(dir.path("store").is_dir());

    p.terminate();
    assert!(p.wait_exit(Duration::from_secs(20)).success());
    let _p = Palisade::start(&dir, &config, listen);
    assert_eq!(status(listen).await, 429, "the count survived the restart");
    let r = wait_update_counter(&dir, "IP", "127.0.0.1", 5);
    assert_eq!(var(&r, "hits").as_deref(), Some("5"));
    assert_eq!(backend.requests().len(), 3);
}

/// A SIGHUP reload swaps the rules and keeps the store with its data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_reload_keeps_the_store() {
    let backend = Backend::start().await;
    let dir = TempDir::new("ctx-sighup");
    let listen = loopback(free_port());
    let config = basic_config(listen, backend.addr, &rules_toml(COUNTER_RULES));
    let p = Palisade::start(&dir, &config, listen);
    for n in 1..=2u64 {
        assert_eq!(status(listen).await, 200);
        wait_update_counter(&dir, "IP", "127.0.0.1", n);
    }
    // The new rules block from the third hit on; they see the two counted before.
    let stricter = COUNTER_RULES.replace("@gt 3", "@gt 2");
    std::fs::write(
        dir.path("palisade.toml"),
        basic_config(listen, backend.addr, &rules_toml(&stricter)),
    )
    .unwrap();
    p.sighup();
    assert!(
        wait_for_line(&p.stderr, Duration::from_secs(20), |l| l
            .contains("reloaded"))
        .is_some(),
        "no reload: {}",
        p.stderr_text()
    );
    assert_eq!(status(listen).await, 429);
    let r = wait_update_counter(&dir, "IP", "127.0.0.1", 3);
    assert_eq!(var(&r, "hits").as_deref(), Some("3"));
}

/// A SIGHUP reload rereads `admin.token_file`: the old token is refused from then
/// on and the new one accepted; a token file that cannot be read keeps the token
/// in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_rereads_the_admin_token() {
    let backend = Backend::start().await;
    let dir = TempDir::new("ctx-token-reload");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    std::fs::write(dir.path("token"), "first-token\n").unwrap();
    let config = admin_config(listen, backend.addr, admin, "token_file = \"token\"");
    let p = Palisade::start(&dir, &config, listen);
    let get = "/ctx/IP";
    assert_eq!(
        admin_req(admin, "GET", get, Some("first-token"), b"")
            .await
            .status,
        200
    );

    let reload = |n: usize| {
        p.sighup();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while p.stderr_text().matches("reloaded").count() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "no reload: {}",
                p.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    std::fs::write(dir.path("token"), "second-token\n").unwrap();
    reload(1);
    assert_eq!(
        admin_req(admin, "GET", get, Some("first-token"), b"")
            .await
            .status,
        401
    );
    assert_eq!(
        admin_req(admin, "GET", get, Some("second-token"), b"")
            .await
            .status,
        200
    );

    std::fs::remove_file(dir.path("token")).unwrap();
    reload(2);
    assert!(
        p.stderr_text().contains("the admin token in force stays"),
        "{}",
        p.stderr_text()
    );
    assert_eq!(
        admin_req(admin, "GET", get, Some("second-token"), b"")
            .await
            .status,
        200
    );
}

/// `palisade ctx set` on the store of a running proxy: the next request is
/// blocked (the command returns once the write is committed, and every request
/// reads the newest committed state). `del` lifts the block the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctx_set_blocks_a_running_proxy() {
    let backend = Backend::start().await;
    let dir = TempDir::new("ctx-set");
    let listen = loopback(free_port());
    let config = basic_config(listen, backend.addr, &rules_toml(COUNTER_RULES));
    let _p = Palisade::start(&dir, &config, listen);
    assert_eq!(status(listen).await, 200);

    let started = Instant::now();
    let out = ctx(
        &dir,
        &["set", "ip", "127.0.0.1", "Blocked", "1", "--ttl", "600"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(status(listen).await, 403);
    eprintln!(
        "ctx set to the first blocked request: {:?}",
        started.elapsed()
    );

    let r = record(&dir, "IP", "127.0.0.1").unwrap();
    assert_eq!(var(&r, "blocked").as_deref(), Some("1"));
    assert!(
        r["record"]["vars"]["blocked"]["expires_at"]
            .as_i64()
            .is_some()
    );

    let out = ctx(&dir, &["del", "IP", "127.0.0.1", "blocked"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(status(listen).await, 200);

    // Whole-record delete, once the three requests' counter writes are in the store
    // (the proxy commits them after answering: a write still queued would bring the
    // record back after the delete); then nothing is left to delete.
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    while record(&dir, "IP", "127.0.0.1")
        .and_then(|r| var(&r, "hits"))
        .as_deref()
        != Some("3")
    {
        assert!(
            Instant::now() < deadline,
            "the three hits never reached the store"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = ctx(&dir, &["del", "IP", "127.0.0.1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(record(&dir, "IP", "127.0.0.1").is_none());
    let out = ctx(&dir, &["del", "IP", "127.0.0.1"]);
    assert_eq!(out.status.code(), Some(3), "nothing to delete exits 3");
    assert!(text(&out.stderr).contains("nothing to delete"));
}

/// `ctx import --follow`: a line written to a feed that stays open reaches a running
/// proxy within the batch time, without the feed ending; closing the feed commits the
/// rest and reports the totals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_feed_blocks_a_running_proxy_while_it_stays_open() {
    use std::io::Write as _;
    let backend = Backend::start().await;
    let dir = TempDir::new("ctx-follow");
    let listen = loopback(free_port());
    let config = basic_config(listen, backend.addr, &rules_toml(COUNTER_RULES));
    let _p = Palisade::start(&dir, &config, listen);
    assert_eq!(status(listen).await, 200);

    let mut feed = Command::new(palisade_bin())
        .env("PALISADE_STORE", dir.path("store"))
        .args(["ctx", "--config"])
        .arg(dir.path("palisade.toml"))
        .args(["import", "--follow", "--batch-ms", "50", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = feed.stdin.take().unwrap();
    let line = |var: &str, value: &str| {
        format!(
            "{{\"app\":\"default\",\"collection\":\"IP\",\"key\":\"127.0.0.1\",\"write\":{{\"at\":{},\"timeout\":3600,\"ops\":[{{\"name\":\"{var}\",\"op\":{{\"set\":\"{value}\"}}}}]}}}}\n",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        )
    };
    stdin.write_all(line("blocked", "1").as_bytes()).unwrap();
    stdin.flush().unwrap();
    // Polled in the store, not with requests: each request counts a hit, and the
    // hit limit of COUNTER_RULES would answer first.
    let started = Instant::now();
    while record(&dir, "IP", "127.0.0.1")
        .and_then(|r| var(&r, "blocked"))
        .as_deref()
        != Some("1")
    {
        if started.elapsed() > std::time::Duration::from_secs(10) {
            let _ = feed.kill();
            let out = feed.wait_with_output().unwrap();
            panic!(
                "the fed line never reached the store; feed: {}",
                text(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    eprintln!("fed line to the store: {:?}", started.elapsed());
    assert_eq!(status(listen).await, 403);
    assert!(feed.try_wait().unwrap().is_none(), "the feed ended early");

    stdin.write_all(line("blocked", "0").as_bytes()).unwrap();
    drop(stdin);
    let out = feed.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("imported 2 line(s) in 2 commit(s)"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(status(listen).await, 200);
}

/// Bad input to `palisade ctx` is refused with an error naming what and where.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctx_bad_input_is_named() {
    let backend = Backend::start().await;
    let dir = TempDir::new("ctx-bad");
    let listen = loopback(free_port());
    let config = basic_config(listen, backend.addr, &rules_toml(COUNTER_RULES));
    let _p = Palisade::start(&dir, &config, listen);

    let out = ctx(&dir, &["set", "IPS", "k", "v", "1"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("unknown collection \"IPS\""),
        "{}",
        text(&out.stderr)
    );

    let out = ctx(&dir, &["set", "IP", "k", "update_counter", "1"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("built-in"),
        "{}",
        text(&out.stderr)
    );

    // A corrupt line: nothing is imported, and the line is named.
    let good = r#"{"app":"default","collection":"IP","key":"198.51.100.7","record":{"vars":{"blocked":{"value":"1"}},"create_time":1700000000,"last_update_time":4102444800,"update_counter":1,"timeout":3600}}"#;
    let input = format!("{good}\n{{\"app\":\"default\",\"collection\":\"IP\",\n{good}\n");
    let out = ctx_stdin(&dir, &["import"], Some(input.as_bytes()));
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains("nothing was imported"), "{err}");
    assert!(record(&dir, "IP", "198.51.100.7").is_none());

    // A long key is kept under its digest, and found again by the same key.
    let long = "k".repeat(700);
    let out = ctx(&dir, &["set", "SESSION", &long, "seen", "1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("#sha256:"),
        "{}",
        text(&out.stderr)
    );
    let r = record(&dir, "SESSION", &long).expect("found by the long key");
    assert_eq!(var(&r, "seen").as_deref(), Some("1"));
}

/// Import and export through the CLI: what is exported imports into another store
/// unchanged, and an imported record acts on the running proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctx_import_export_round_trip() {
    let backend = Backend::start().await;
    let dir = TempDir::new("ctx-io");
    let listen = loopback(free_port());
    let config = basic_config(listen, backend.addr, &rules_toml(COUNTER_RULES));
    let _p = Palisade::start(&dir, &config, listen);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let line = format!(
        r#"{{"app":"default","collection":"IP","key":"127.0.0.1","record":{{"vars":{{"blocked":{{"value":"1"}}}},"create_time":{now},"last_update_time":{now},"update_counter":1,"timeout":3600}}}}"#
    );
    let file = dir.path("in.jsonl");
    std::fs::write(&file, format!("{line}\n")).unwrap();
    let out = ctx(&dir, &["import", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(status(listen).await, 403);

    let out = ctx(&dir, &["export"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let exported = text(&out.stdout);
    assert!(exported.contains("\"127.0.0.1\""), "{exported}");

    let other = TempDir::new("ctx-io-other");
    let out = Command::new(palisade_bin())
        .args(["ctx", "--store"])
        .arg(other.path("store"))
        .arg("import")
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin.take().unwrap().write_all(exported.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = Command::new(palisade_bin())
        .args(["ctx", "--store"])
        .arg(other.path("store"))
        .arg("export")
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), exported);
}

fn admin_config(listen: SocketAddr, backend: SocketAddr, admin: SocketAddr, extra: &str) -> String {
    basic_config(
        listen,
        backend,
        &format!(
            "{}\n[admin]\naddress = \"{admin}\"\n{extra}\n",
            rules_toml(COUNTER_RULES)
        ),
    )
}

async fn admin_req(
    admin: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &[u8],
) -> RawResponse {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: admin\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    send_raw(admin, &req).await.unwrap()
}

/// The admin API's `/ctx`: refused with 401 (and nothing changed) without the
/// token, working with it; `/metrics` and `/status` stay open and `/metrics`
/// shows the store's counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_ctx_needs_the_token() {
    let backend = Backend::start().await;
    let dir = TempDir::new("ctx-admin");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    std::fs::write(dir.path("token"), "s3cret-token\n").unwrap();
    let config = admin_config(listen, backend.addr, admin, "token_file = \"token\"");
    let _p = Palisade::start(&dir, &config, listen);
    let put = "/ctx/IP/127.0.0.1/blocked?ttl=600";

    for token in [None, Some("wrong"), Some("s3cret-token2")] {
        let r = admin_req(admin, "PUT", put, token, b"1").await;
        assert_eq!(r.status, 401, "{token:?}: {}", r.text());
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    }
    let r = admin_req(admin, "GET", "/ctx/IP/127.0.0.1", None, b"").await;
    assert_eq!(r.status, 401);
    let r = admin_req(admin, "POST", "/ctx/import", None, b"not json").await;
    assert_eq!(r.status, 401);
    assert_eq!(status(listen).await, 200, "nothing was changed");

    let tok = Some("s3cret-token");
    let r = admin_req(admin, "PUT", put, tok, b"1").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(status(listen).await, 403);
    let r = admin_req(admin, "GET", "/ctx/ip/127.0.0.1", tok, b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let rec: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(var(&rec, "blocked").as_deref(), Some("1"));
    let r = admin_req(admin, "GET", "/ctx/IP", tok, b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text().lines().count(), 1, "{}", r.text());
    let r = admin_req(admin, "DELETE", "/ctx/IP/127.0.0.1/blocked", tok, b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(status(listen).await, 200);
    let r = admin_req(admin, "GET", "/ctx/export", tok, b"").await;
    assert_eq!(r.status, 200);
    let exported = r.text();
    assert!(exported.contains("127.0.0.1"), "{exported}");

    // Import: a corrupt line names the line and imports nothing.
    let good = r#"{"app":"default","collection":"GLOBAL","key":"global","record":{"vars":{"mode":{"value":"strict"}},"create_time":1,"last_update_time":4102444800,"update_counter":1,"timeout":3600}}"#;
    let r = admin_req(
        admin,
        "POST",
        "/ctx/import",
        tok,
        format!("{good}\n{{oops\n").as_bytes(),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("line 2"), "{}", r.text());
    let r = admin_req(admin, "GET", "/ctx/GLOBAL/global", tok, b"").await;
    assert_eq!(r.status, 404);
    let r = admin_req(
        admin,
        "POST",
        "/ctx/import",
        tok,
        format!("{good}\n").as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = admin_req(admin, "GET", "/ctx/GLOBAL/global", tok, b"").await;
    assert_eq!(r.status, 200);
    let r = admin_req(admin, "GET", "/ctx/NOPE/x", tok, b"").await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("NOPE"), "{}", r.text());

    // The read-only endpoints need no token.
    let r = admin_req(admin, "GET", "/status", None, b"").await;
    assert_eq!(r.status, 200);
    let r = admin_req(admin, "GET", "/metrics", None, b"").await;
    assert_eq!(r.status, 200);
    let m = r.text();
    assert!(m.contains("palisade_store_reads_total "), "{m}");
    assert!(
        m.contains("palisade_store_write_lock_waits_on_request_path_total 0\n"),
        "{m}"
    );
}

/// Without a token configured, `/ctx` is refused whole (never open); the token can
/// come from the environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_ctx_is_off_without_a_token() {
    let backend = Backend::start().await;
    let dir = TempDir::new("ctx-admin-off");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let config = admin_config(listen, backend.addr, admin, "");
    let p = Palisade::start(&dir, &config, listen);
    for (m, path) in [
        ("PUT", "/ctx/IP/127.0.0.1/blocked"),
        ("GET", "/ctx/IP/127.0.0.1"),
    ] {
        let r = admin_req(admin, m, path, Some(""), b"1").await;
        assert_eq!(r.status, 403, "{}", r.text());
        assert!(r.text().contains("admin.token_file"), "{}", r.text());
    }
    assert_eq!(status(listen).await, 200);
    drop(p);

    let dir = TempDir::new("ctx-admin-env");
    let _p = Palisade::start_with_env(
        &dir,
        &config,
        listen,
        &[("PALISADE_ADMIN_TOKEN", "from-env")],
    );
    let r = admin_req(
        admin,
        "PUT",
        "/ctx/IP/127.0.0.1/blocked",
        Some("from-env"),
        b"1",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(status(listen).await, 403);
}

/// `kill -9` while requests keep writing: after a restart the store opens cleanly
/// and holds at least every write seen committed before the kill; counting goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_keeps_committed_writes() {
    let backend = Backend::start().await;
    let dir = TempDir::new("ctx-kill9");
    let listen = loopback(free_port());
    let rules = r#"SecRuleEngine On
SecAction "id:1,phase:1,nolog,pass,initcol:ip=%{REMOTE_ADDR},setvar:ip.hits=+1""#;
    let config = basic_config(listen, backend.addr, &rules_toml(rules));
    let mut p = Palisade::start(&dir, &config, listen);
    let writer = tokio::spawn(async move {
        let mut sent = 0u64;
        // Until the proxy is gone (bounded by count).
        while sent < 100_000 {
            if send_raw(listen, GET).await.is_err() {
                break;
            }
            sent += 1;
        }
        sent
    });
    let seen = wait_update_counter(&dir, "IP", "127.0.0.1", 50);
    let committed: u64 = var(&seen, "hits").unwrap().parse().unwrap();
    p.child.kill().unwrap();
    let _ = p.child.wait();
    let sent = writer.await.unwrap();
    assert!(sent >= committed);

    let _p = Palisade::start(&dir, &config, listen);
    let after = record(&dir, "IP", "127.0.0.1").expect("the record survived");
    let hits: u64 = var(&after, "hits").unwrap().parse().unwrap();
    assert!(hits >= committed, "{hits} < {committed}");
    assert!(hits <= sent, "{hits} > {sent}");
    assert_eq!(status(listen).await, 200);
    let again = wait_update_counter(
        &dir,
        "IP",
        "127.0.0.1",
        after["record"]["update_counter"].as_u64().unwrap() + 1,
    );
    assert_eq!(var(&again, "hits"), Some((hits + 1).to_string()));
}

/// CRS 3.3.4's DoS protection (REQUEST-912) with its settings on: a burst of
/// requests to a dynamic page from one client is dropped as ModSecurity does, and
/// the IP collection it keeps outlives the requests. With a threshold of T per
/// time slice, request T starts a first burst (the counter is reset), request 2T
/// a second, which sets ip.dos_block; request 2T+1 is dropped in phase 1. Static
/// files are not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crs3_dos_protection_blocks_a_burst() {
    let setup = Path::new("/etc/modsecurity/crs/crs-setup.conf");
    let rules = Path::new("/usr/share/modsecurity-crs/rules");
    assert!(
        setup.exists() && rules.exists(),
        "Debian's modsecurity-crs (CRS 3.3.4) is missing: install it (.ci/run does)"
    );
    let backend = Backend::start().await;
    let dir = TempDir::new("ctx-crs3-dos");
    let listen = loopback(free_port());
    const T: u64 = 4;
    let mut crs_setup = std::fs::read_to_string(setup).unwrap();
    crs_setup.push_str(&format!(
        "\nSecAction \"id:900700,phase:1,nolog,pass,t:none,setvar:'tx.dos_burst_time_slice=60',setvar:'tx.dos_counter_threshold={T}',setvar:'tx.dos_block_timeout=600'\"\n"
    ));
    std::fs::write(dir.path("crs-setup.conf"), crs_setup).unwrap();
    let base =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/palisade-recommended.conf");
    let extra = format!(
        "[[rules]]\nfile = \"{}\"\n[[rules]]\nfile = \"crs-setup.conf\"\n[[rules]]\nfile = \"{}/*.conf\"\n",
        base.display(),
        rules.display()
    );
    let config = basic_config(listen, backend.addr, &extra);
    let _p = Palisade::start(&dir, &config, listen);
    let req = b"GET /index.php HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Mozilla/5.0 burst\r\nAccept: text/html\r\nConnection: close\r\n\r\n";
    let stat = b"GET /logo.png HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Mozilla/5.0 burst\r\nAccept: text/html\r\nConnection: close\r\n\r\n";

    // CRS keys the IP collection by address and a hash of the User-Agent.
    let ip_key = || {
        let out = ctx(&dir, &["list", "IP"]);
        let t = text(&out.stdout);
        t.lines().next().map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["key"]
                .as_str()
                .unwrap()
                .to_owned()
        })
    };
    // Each request to the dynamic page writes the IP record once (phase 5); each
    // is committed before the next is sent. Static files in between write nothing.
    let mut key = None;
    for i in 1..=2 * T {
        for _ in 0..2 {
            let r = send_raw(listen, stat).await.unwrap();
            assert_eq!(r.status, 200, "static request: {}", r.text());
        }
        let r = send_raw(listen, req).await.unwrap();
        assert_eq!(r.status, 200, "request {i} of the burst: {}", r.text());
        if key.is_none() {
            let deadline = Instant::now() + Duration::from_secs(20);
            while key.is_none() {
                key = ip_key();
                assert!(Instant::now() < deadline, "no IP record");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let r = wait_update_counter(&dir, "IP", key.as_deref().unwrap(), i);
        if i == T - 1 {
            assert_eq!(
                var(&r, "dos_counter"),
                Some((T - 1).to_string()),
                "only the dynamic requests count: {r}"
            );
        }
    }
    let key = key.unwrap();
    let r = record(&dir, "IP", &key).unwrap();
    assert_eq!(var(&r, "dos_block").as_deref(), Some("1"), "{r}");
    assert_eq!(var(&r, "dos_burst_counter").as_deref(), Some("2"), "{r}");
    // Dropped: the connection closes without an answer.
    let mut s = tokio::net::TcpStream::connect(listen).await.unwrap();
    use tokio::io::AsyncWriteExt as _;
    s.write_all(req).await.unwrap();
    let (got, closed) = read_until_close(&mut s, Duration::from_secs(10)).await;
    assert!(closed && got.is_empty(), "{}", text(&got));
    // The record outlives the requests, with the block's expiry.
    let r = record(&dir, "IP", &key).unwrap();
    assert!(
        r["record"]["vars"]["dos_block"]["expires_at"]
            .as_i64()
            .is_some(),
        "{r}"
    );
    assert_eq!(backend.requests().len() as u64, 3 * 2 * T);
}

/// A full store (`store.map_size` reached): `ctx import` says so and imports
/// nothing; the proxy keeps serving, and the writes it cannot commit are counted
/// in `palisade_store_map_full_errors_total`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_store_is_reported_and_counted() {
    let backend = Backend::start().await;
    let dir = TempDir::new("ctx-full");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let rules = r#"SecRuleEngine On
SecAction "id:1,phase:1,nolog,pass,initcol:ip=%{REQUEST_HEADERS.X-Client},setvar:ip.hits=+1""#;
    let config = basic_config(
        listen,
        backend.addr,
        &format!(
            "{}\n[store]\nmap_size = 1048576\n[admin]\naddress = \"{admin}\"\n",
            rules_toml(rules)
        ),
    );
    let _p = Palisade::start(&dir, &config, listen);
    // Fill the store with imports of 64 KiB of records each until one is refused.
    let filler = "x".repeat(1000);
    let mut refused = None;
    for chunk in 0..64 {
        let mut input = String::new();
        for i in 0..64 {
            input.push_str(&format!(
                r#"{{"app":"default","collection":"RESOURCE","key":"r{chunk}-{i}","record":{{"vars":{{"blob":{{"value":"{filler}"}}}},"create_time":1,"last_update_time":4102444800,"update_counter":1,"timeout":3600}}}}"#
            ));
            input.push('\n');
        }
        let out = ctx_stdin(&dir, &["import"], Some(input.as_bytes()));
        if !out.status.success() {
            refused = Some((chunk, text(&out.stderr)));
            break;
        }
    }
    let (chunk, err) = refused.expect("a 1 MiB store filled up");
    assert!(err.contains("full"), "{err}");
    assert!(err.contains("nothing was imported"), "{err}");
    assert!(record(&dir, "RESOURCE", &format!("r{chunk}-0")).is_none());
    assert!(record(&dir, "RESOURCE", "r0-0").is_some());

    // Requests still pass; their writes fail to commit and are counted.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut n = 0;
    loop {
        let req = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX-Client: {}\r\nConnection: close\r\n\r\n",
            "c".repeat(400) + &n.to_string()
        );
        n += 1;
        assert_eq!(send_raw(listen, req.as_bytes()).await.unwrap().status, 200);
        let m = admin_req(admin, "GET", "/metrics", None, b"").await.text();
        let full = m
            .lines()
            .find_map(|l| l.strip_prefix("palisade_store_map_full_errors_total "))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        if full >= 1.0 {
            break;
        }
        assert!(Instant::now() < deadline, "no full-map error counted: {m}");
    }
}
