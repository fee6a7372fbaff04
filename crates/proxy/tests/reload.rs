//! SIGUSR1 reopens the log files and reloads nothing; `POST /reload` on the admin
//! listener runs the reload SIGHUP runs and answers with its outcome; `/metrics` and
//! `/status` say whether the last reload failed, and why.

mod common;

use common::*;
use serde_json::Value;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const TOKEN: &str = "reload-test-token";

/// A proxy in front of `backend` with the rules of `dir/rules.conf`, both logs in
/// `dir`, and an admin listener with a token.
fn config(dir: &TempDir, listen: SocketAddr, backend: SocketAddr, admin: SocketAddr) -> String {
    std::fs::write(dir.path("token"), TOKEN).unwrap();
    let extra = format!(
        "[logs]\nerror_log = \"{}\"\naccess_log = \"{}\"\n\n[admin]\naddress = \"{admin}\"\ntoken_file = \"{}\"\n\n[[rules]]\nfile = \"rules.conf\"\n",
        dir.path("error.log").display(),
        dir.path("access.log").display(),
        dir.path("token").display(),
    );
    basic_config(listen, backend, &extra)
}

/// Rules that deny requests whose argument is `word` (rule 7).
fn write_rules(dir: &TempDir, word: &str) {
    std::fs::write(
        dir.path("rules.conf"),
        format!(
            "SecRuleEngine On\nSecRule ARGS \"@streq {word}\" \"id:7,phase:1,deny,status:403,log,msg:'word {word}'\"\n"
        ),
    )
    .unwrap();
}

async fn status_of(listen: SocketAddr, q: &str) -> u16 {
    get(listen, &format!("/?q={q}"), "").await.status
}

async fn admin_request(
    admin: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> RawResponse {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    send_raw(
        admin,
        format!("{method} {path} HTTP/1.1\r\nHost: a\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap()
}

async fn status_doc(admin: SocketAddr) -> Value {
    let r = admin_request(admin, "GET", "/status", None).await;
    assert_eq!(r.status, 200);
    serde_json::from_slice(&r.body).unwrap()
}

fn kill(signal: &str, pid: u32) {
    let ok = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {signal} failed");
}

fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigusr1_reopens_the_log_files_and_reloads_nothing() {
    let backend = Backend::start().await;
    let dir = TempDir::new("sigusr1");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    write_rules(&dir, "foo");
    let p = Palisade::start(&dir, &config(&dir, listen, backend.addr, admin), listen);
    assert_eq!(status_of(listen, "foo").await, 403);
    assert_eq!(status_of(listen, "bar").await, 200);
    assert!(
        wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| l
            .contains("[id \"7\"]"))
        .is_some()
    );
    assert!(
        wait_for_line(&dir.path("access.log"), Duration::from_secs(5), |l| l
            .contains("q=bar"))
        .is_some()
    );
    let sha = status_doc(admin).await["rules"]["sha256"].clone();

    // logrotate renames the files away; the rule file changes meanwhile, which a
    // reload would pick up.
    std::fs::rename(dir.path("error.log"), dir.path("error.log.1")).unwrap();
    std::fs::rename(dir.path("access.log"), dir.path("access.log.1")).unwrap();
    let rotated = (
        lines(&dir.path("error.log.1")),
        lines(&dir.path("access.log.1")),
    );
    write_rules(&dir, "bar");
    kill("-USR1", p.pid());
    assert!(
        wait_for_line(&p.stderr, Duration::from_secs(10), |l| l
            .contains("reopened 2 log file(s)"))
        .is_some(),
        "{}",
        p.stderr_text()
    );
    assert!(p.stderr_text().contains("SIGUSR1 received"));

    // New lines go to new files at the old paths; the rules in force are the old ones.
    assert_eq!(status_of(listen, "foo").await, 403);
    assert_eq!(status_of(listen, "bar").await, 200);
    assert!(
        wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| l
            .contains("[id \"7\"]")
            && l.contains("word foo"))
        .is_some(),
        "the new error log gets the new match lines"
    );
    let access = wait_for_line(&dir.path("access.log"), Duration::from_secs(5), |l| {
        l.contains("q=bar")
    });
    assert!(access.is_some(), "the new access log gets the new requests");
    // A request's line is written just after its response: the first one's may
    // come after the second one's on a busy machine.
    assert!(
        wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| l
            .contains("q=foo"))
        .is_some(),
        "the new access log gets both requests"
    );
    assert_eq!(lines(&dir.path("access.log")), 2);
    assert_eq!(
        (
            lines(&dir.path("error.log.1")),
            lines(&dir.path("access.log.1"))
        ),
        rotated,
        "nothing more goes to the rotated files"
    );
    // Nothing was reloaded.
    let doc = status_doc(admin).await;
    assert_eq!(doc["rules"]["sha256"], sha);
    assert!(doc["reload"]["last"].is_null(), "{doc}");
    assert_eq!(doc["reload"]["succeeded"], 0);
    assert_eq!(
        metric(admin, "palisade_config_reloads_total{result=\"success\"}").await,
        0.0
    );
    let stderr = p.stderr_text();
    assert!(!stderr.contains("reloaded"), "{stderr}");
    assert!(!stderr.contains("SIGHUP"), "{stderr}");

    // SIGHUP, by contrast, reloads (and reopens).
    kill("-HUP", p.pid());
    let deadline = Instant::now() + Duration::from_secs(20);
    while status_of(listen, "bar").await != 403 {
        assert!(Instant::now() < deadline, "SIGHUP did not reload");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status_of(listen, "foo").await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reload_endpoint_answers_with_the_outcome_and_metrics_follow() {
    let backend = Backend::start().await;
    let dir = TempDir::new("reload-endpoint");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    write_rules(&dir, "foo");
    let p = Palisade::start(&dir, &config(&dir, listen, backend.addr, admin), listen);
    let first = status_doc(admin).await;
    assert!(first["reload"]["last"].is_null());
    assert_eq!(
        metric(admin, "palisade_config_last_reload_success").await,
        1.0
    );
    assert_eq!(
        metric(admin, "palisade_config_last_reload_timestamp_seconds").await,
        0.0
    );
    let loaded_at = metric(
        admin,
        "palisade_config_last_reload_success_timestamp_seconds",
    )
    .await;
    assert!(loaded_at > 1e9);

    // Behind the token, POST only.
    let r = admin_request(admin, "POST", "/reload", None).await;
    assert_eq!(r.status, 401);
    let r = admin_request(admin, "POST", "/reload", Some("wrong")).await;
    assert_eq!(r.status, 401);
    let r = admin_request(admin, "GET", "/reload", Some(TOKEN)).await;
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("POST"));
    assert_eq!(status_of(listen, "bar").await, 200);

    // A good change: in force when the answer comes.
    write_rules(&dir, "bar");
    let r = admin_request(admin, "POST", "/reload", Some(TOKEN)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let ok: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(ok["ok"], true, "{ok}");
    assert_eq!(ok["trigger"], "admin API");
    assert!(ok["error"].is_null());
    assert_eq!(ok["rules"]["count"], first["rules"]["count"]);
    assert_ne!(ok["rules"]["sha256"], first["rules"]["sha256"]);
    assert_eq!(status_of(listen, "bar").await, 403);
    assert_eq!(status_of(listen, "foo").await, 200);
    assert_eq!(
        metric(admin, "palisade_config_last_reload_success").await,
        1.0
    );
    let ok_at = metric(admin, "palisade_config_last_reload_timestamp_seconds").await;
    assert!(ok_at >= loaded_at, "{ok_at} {loaded_at}");

    // A broken rule file: the answer names the error, the rules in force stay.
    std::fs::write(dir.path("rules.conf"), "SecRule ARGS\n").unwrap();
    let r = admin_request(admin, "POST", "/reload", Some(TOKEN)).await;
    assert_eq!(r.status, 422, "{}", r.text());
    let failed: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(failed["ok"], false, "{failed}");
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains("rules.conf"), "{error}");
    assert_eq!(failed["kept"], "the configuration in force stays");
    assert_eq!(status_of(listen, "bar").await, 403);
    assert_eq!(status_of(listen, "foo").await, 200);
    assert_eq!(
        metric(admin, "palisade_config_last_reload_success").await,
        0.0
    );
    assert!(metric(admin, "palisade_config_last_reload_timestamp_seconds").await >= ok_at);
    assert_eq!(
        metric(admin, "palisade_config_reloads_total{result=\"failure\"}").await,
        1.0
    );
    let doc = status_doc(admin).await;
    assert_eq!(doc["reload"]["last"]["ok"], false, "{doc}");
    assert_eq!(doc["reload"]["last"]["error"], error);
    assert_eq!(doc["reload"]["failed"], 1);
    assert_eq!(doc["rules"]["sha256"], ok["rules"]["sha256"]);
    assert!(p.stderr_text().contains("reload failed"));

    // The same failure through SIGHUP shows the same way, with its trigger.
    kill("-HUP", p.pid());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let doc = status_doc(admin).await;
        if doc["reload"]["failed"] == 2 {
            assert_eq!(doc["reload"]["last"]["trigger"], "SIGHUP");
            assert_eq!(doc["reload"]["last"]["ok"], false);
            break;
        }
        assert!(Instant::now() < deadline, "no SIGHUP reload in {doc}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        metric(admin, "palisade_config_last_reload_success").await,
        0.0
    );

    // Fixed: success again.
    write_rules(&dir, "baz");
    let r = admin_request(admin, "POST", "/reload", Some(TOKEN)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(status_of(listen, "baz").await, 403);
    assert_eq!(status_of(listen, "bar").await, 200);
    assert_eq!(
        metric(admin, "palisade_config_last_reload_success").await,
        1.0
    );
    assert_eq!(
        metric(admin, "palisade_config_reloads_total{result=\"success\"}").await,
        2.0
    );
    assert_eq!(
        metric(admin, "palisade_config_reloads_total{result=\"failure\"}").await,
        2.0
    );
    let doc = status_doc(admin).await;
    assert_eq!(doc["reload"]["last"]["ok"], true);
    assert!(doc["reload"]["last"]["error"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reload_endpoint_is_off_without_a_token() {
    let backend = Backend::start().await;
    let dir = TempDir::new("reload-no-token");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let extra = format!("[admin]\naddress = \"{admin}\"\n");
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    let r = admin_request(admin, "POST", "/reload", Some("anything")).await;
    assert_eq!(r.status, 403);
    assert!(r.text().contains("/reload"), "{}", r.text());
    assert!(status_doc(admin).await["reload"]["last"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reload_endpoint_answers_a_reload_longer_than_the_admin_timeout() {
    let crs = std::path::Path::new("/usr/share/modsecurity-crs/rules");
    if required(
        crs,
        "a reload that takes a while (Debian's modsecurity-crs)",
    )
    .is_none()
    {
        return;
    }
    let backend = Backend::start().await;
    let dir = TempDir::new("reload-slow");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    std::fs::write(dir.path("token"), TOKEN).unwrap();
    let extra = format!(
        "[admin]\naddress = \"{admin}\"\ntoken_file = \"{}\"\ntimeout = \"1s\"\n\n[[rules]]\nfile = \"/etc/modsecurity/crs/crs-setup.conf\"\n\n[[rules]]\nfile = \"{}/*.conf\"\n",
        dir.path("token").display(),
        crs.display()
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    let r = admin_request(admin, "POST", "/reload", Some(TOKEN)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let doc: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(doc["ok"], true, "{doc}");
    let took = doc["duration_seconds"].as_f64().unwrap();
    assert!(
        took > 1.0,
        "CRS reloaded in {took} s, within the 1 s admin timeout: this test shows nothing here"
    );
    // Other requests still have the timeout: a head that never ends is cut off.
    let mut s = tokio::net::TcpStream::connect(admin).await.unwrap();
    use tokio::io::AsyncWriteExt as _;
    s.write_all(b"GET /status HTTP/1.1\r\n").await.unwrap();
    let (_, closed) = read_until_close(&mut s, Duration::from_secs(5)).await;
    assert!(closed, "the admin timeout no longer applies");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_and_sigusr1_while_starting_do_not_end_it() {
    let crs = std::path::Path::new("/usr/share/modsecurity-crs/rules");
    if required(crs, "a start that takes a while (Debian's modsecurity-crs)").is_none() {
        return;
    }
    let backend = Backend::start().await;
    let dir = TempDir::new("signals-at-start");
    let listen = loopback(free_port());
    let extra = format!(
        "[logs]\nerror_log = \"{}\"\n\n[[rules]]\nfile = \"/etc/modsecurity/crs/crs-setup.conf\"\n\n[[rules]]\nfile = \"{}/*.conf\"\n",
        dir.path("error.log").display(),
        crs.display()
    );
    let cfg = dir.path("palisade.toml");
    std::fs::write(&cfg, basic_config(listen, backend.addr, &extra)).unwrap();
    let stderr = dir.path("stderr.log");
    let child = std::process::Command::new(palisade_bin())
        .env("PALISADE_STORE", dir.path("store"))
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let mut p = Palisade {
        child,
        addr: listen,
        stderr,
    };
    // While CRS compiles (seconds in a debug build): logrotate's SIGUSR1 and a
    // reload's SIGHUP, whose default action would end the process.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !p.stderr_text().contains("loaded "),
        "the rules loaded within 300 ms: this test shows nothing here"
    );
    kill("-USR1", p.pid());
    kill("-HUP", p.pid());
    let deadline = Instant::now() + Duration::from_secs(120);
    while std::net::TcpStream::connect(listen).is_err() {
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!("palisade ended ({status}): {}", p.stderr_text());
        }
        assert!(Instant::now() < deadline, "palisade did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Both were carried out once it served.
    assert!(
        wait_for_line(&p.stderr, Duration::from_secs(120), |l| l
            .contains("reloaded "))
        .is_some(),
        "{}",
        p.stderr_text()
    );
    // The two are handled in either order (one select over both signals).
    assert!(
        wait_for_line(&p.stderr, Duration::from_secs(120), |l| l
            .contains("SIGUSR1 received"))
        .is_some(),
        "{}",
        p.stderr_text()
    );
    let text = p.stderr_text();
    assert!(text.contains("reopened 1 log file(s)"), "{text}");
    assert_eq!(status_of(listen, "hello").await, 200);
    assert!(p.child.try_wait().unwrap().is_none());
}
