//! The audit and debug logs a ModSecurity configuration asks for, written by the
//! proxy: `SecAuditLogType Concurrent` (one file per record under
//! `SecAuditLogStorageDir`, an index line in `SecAuditLog`) in the native format,
//! and `SecDebugLog` at `SecDebugLogLevel` 9; a configuration that cannot work is
//! refused at start.

mod common;

use common::*;
use std::time::Duration;

fn rules(dir: &TempDir) -> String {
    format!(
        r#"SecRuleEngine On
SecAuditEngine RelevantOnly
SecAuditLogParts ABFHZ
SecAuditLogType Concurrent
SecAuditLogFormat Native
SecAuditLogStorageDir {}
SecAuditLog {}
SecDebugLog {}
SecDebugLogLevel 9
SecRule ARGS:q "@contains attack" "id:10,phase:1,deny,status:403,log,msg:'attack seen'""#,
        dir.path("audit").display(),
        dir.path("audit-index.log").display(),
        dir.path("debug.log").display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_native_audit_and_debug_log() {
    let backend = Backend::start().await;
    let dir = TempDir::new("audit-concurrent");
    let listen = loopback(free_port());
    let config = basic_config(listen, backend.addr, &rules_toml(&rules(&dir)));
    let _p = Palisade::start(&dir, &config, listen);
    let r = send_raw(
        listen,
        b"GET /p?q=attack HTTP/1.1\r\nHost: example.com\r\nUser-Agent: audit-test\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 403);
    let r = send_raw(
        listen,
        b"GET /p?q=fine HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);

    // One index line, for the relevant (blocked) request only, naming a record file
    // whose size and MD5 it gives.
    let index = wait_for_line(&dir.path("audit-index.log"), Duration::from_secs(10), |l| {
        l.contains("/p?q=attack")
    })
    .expect("an index line");
    let fields: Vec<&str> = index.split(' ').collect();
    let md5 = fields
        .last()
        .unwrap()
        .strip_prefix("md5:")
        .expect("md5 field");
    let size: usize = fields[fields.len() - 2].parse().unwrap();
    let path = fields[fields.len() - 4];
    assert!(
        path.starts_with(&dir.path("audit").display().to_string()),
        "{index}"
    );
    let record = std::fs::read_to_string(path).unwrap();
    let text = record.strip_suffix('\n').unwrap();
    assert_eq!(text.len(), size);
    let digest = {
        use md5::Digest as _;
        md5::Md5::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    assert_eq!(digest, md5);
    assert!(text.contains("-A--\n") && text.contains("-H--\n"), "{text}");
    assert!(text.contains("GET /p?q=attack HTTP/1.1"), "{text}");
    assert!(text.contains("attack seen"), "{text}");
    // The record's directories: STORAGE/YYYYMMDD/YYYYMMDD-HHMM/.
    let rel = path
        .strip_prefix(&dir.path("audit").display().to_string())
        .unwrap();
    let parts: Vec<&str> = rel.trim_start_matches('/').split('/').collect();
    assert_eq!(parts.len(), 3, "{rel}");
    assert_eq!(parts[0].len(), 8);
    assert!(
        parts[1].starts_with(parts[0]) && parts[2].starts_with(parts[1]),
        "{rel}"
    );
    let lines = std::fs::read_to_string(dir.path("audit-index.log")).unwrap();
    assert_eq!(lines.lines().count(), 1, "{lines}");

    // The debug log: both requests, phase by phase, rule by rule.
    let debug = wait_for_line(&dir.path("debug.log"), Duration::from_secs(10), |l| {
        l.contains("[/p?q=fine]") && l.contains("Starting phase 5.")
    });
    assert!(debug.is_some(), "no debug lines for the second request");
    let debug = std::fs::read_to_string(dir.path("debug.log")).unwrap();
    assert!(
        debug.lines().any(|l| l.contains("[/p?q=attack] [4]")
            && l.contains("(Rule 10,")
            && l.contains("returned 1.")),
        "{debug}"
    );
    assert!(
        debug
            .lines()
            .any(|l| l.contains("[/p?q=fine] [9]") && l.contains("returned 0.")),
        "{debug}"
    );
}

/// `SecAuditLogType Concurrent` without a storage directory cannot work: the
/// proxy refuses the configuration and names the directive.
#[test]
fn concurrent_without_storage_dir_is_refused() {
    let dir = TempDir::new("audit-no-storage");
    let cfg = dir.path("palisade.toml");
    std::fs::write(
        &cfg,
        basic_config(
            loopback(1),
            loopback(2),
            &rules_toml("SecAuditEngine On\nSecAuditLogType Concurrent\nSecAuditLog audit.log"),
        ),
    )
    .unwrap();
    let out = palisade_check("--config", &cfg);
    let text = output_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("SecAuditLogStorageDir"), "{text}");
}

/// Error and access logs on a full disk (`/dev/full`): every lost line is counted
/// as dropped, each failed write counts per log, `/status` shows the logs as
/// failing, and the operator log says so once (not once per line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_write_errors_are_counted_and_reported() {
    let backend = Backend::start().await;
    let dir = TempDir::new("log-full");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let extra = format!(
        "[logs]\nerror_log = \"/dev/full\"\naccess_log = \"/dev/full\"\n[admin]\naddress = \"{admin}\"\n[[rules]]\ninline = '''\nSecRuleEngine On\nSecRule ARGS:q \"@contains attack\" \"id:10,phase:1,deny,status:403,log\"\n'''\n"
    );
    let p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    const BLOCKED: u64 = 50;
    for i in 0..BLOCKED {
        let r = get(listen, &format!("/x{i}?q=attack"), "").await;
        assert_eq!(r.status, 403);
    }
    // Every blocked request wrote an error line and an access line; the check
    // requests of Palisade::start wrote access lines too. All of them are lost, and
    // each is counted (the writer works through its queue: wait for it).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let error = metric(admin, "palisade_log_lines_dropped_total{log=\"error\"}").await;
        let access = metric(admin, "palisade_log_lines_dropped_total{log=\"access\"}").await;
        if error >= BLOCKED as f64 && access >= BLOCKED as f64 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "lost lines not counted: error {error}, access {access} of at least {BLOCKED}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for log in ["error", "access"] {
        let errors = metric(
            admin,
            &format!("palisade_log_write_errors_total{{log=\"{log}\"}}"),
        )
        .await;
        assert!(errors >= 1.0, "{log}: {errors} write errors");
    }
    let status = send_raw(
        admin,
        b"GET /status HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap()
    .text();
    let body = status.as_str();
    let doc: serde_json::Value = serde_json::from_str(body).unwrap();
    for log in ["error", "access"] {
        assert_eq!(doc["logs"][log]["state"], "failing", "{body}");
        assert!(
            doc["logs"][log]["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("No space left")),
            "{body}"
        );
    }
    let stderr = p.stderr_text();
    assert_eq!(
        stderr.matches("cannot write access log /dev/full").count(),
        1,
        "one operator line per failure, not one per lost line: {stderr}"
    );
}
