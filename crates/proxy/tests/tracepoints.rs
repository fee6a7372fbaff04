//! The static tracepoints (USDT) of the real binary: every documented probe is in
//! its SystemTap SDT notes (read with `readelf`), and Debian's `bpftrace`, attached
//! to a running proxy, sees the phases and rule matches of requests with the
//! transaction ids the access log shows.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every tracepoint docs/diagnostics.md documents.
const PROBES: [&str; 10] = [
    "phase_start",
    "phase_end",
    "rule_match",
    "intervention",
    "upstream_connect",
    "upstream_first_byte",
    "store_read_start",
    "store_read_end",
    "store_commit",
    "sync_publish",
];

const READELF: &str = "/usr/bin/readelf";
const BPFTRACE: &str = "/usr/bin/bpftrace";

/// The (provider, name) of each SDT note of `binary`.
fn sdt_notes(binary: &str) -> Vec<(String, String)> {
    let out = Command::new(READELF)
        .args(["--notes", binary])
        .output()
        .expect("readelf runs");
    assert!(out.status.success(), "{}", output_text(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut notes = Vec::new();
    let mut provider = None;
    for line in text.lines().map(str::trim) {
        if let Some(p) = line.strip_prefix("Provider: ") {
            provider = Some(p.to_owned());
        } else if let (Some(n), Some(p)) = (line.strip_prefix("Name: "), provider.take()) {
            notes.push((p, n.to_owned()));
        }
    }
    notes
}

#[test]
fn every_tracepoint_is_in_the_binary() {
    if required(Path::new(READELF), "reading the probe notes (binutils)").is_none() {
        return;
    }
    let notes = sdt_notes(palisade_bin());
    for probe in PROBES {
        assert!(
            notes.iter().any(|(p, n)| p == "palisade" && n == probe),
            "palisade:{probe} missing from {notes:?}"
        );
    }
    assert!(
        notes.iter().all(|(p, _)| p == "palisade"),
        "only palisade probes: {notes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bpftrace_sees_phases_and_matches() {
    if required(Path::new(BPFTRACE), "attaching to the tracepoints").is_none() {
        return;
    }
    let backend = Backend::start().await;
    let dir = TempDir::new("tracepoints");
    let listen = loopback(free_port());
    let access = dir.path("access.log");
    let config = basic_config(
        listen,
        backend.addr,
        &format!(
            "{}\n[logs]\naccess_log = \"{}\"\n",
            rules_toml(r#"SecRule ARGS:q "@contains attack" "id:77,phase:1,deny,status:403""#),
            access.display()
        ),
    );
    let p = Palisade::start(&dir, &config, listen);
    let bin = std::fs::canonicalize(palisade_bin()).unwrap();
    // BEGIN runs once every probe is attached: its line says bpftrace is ready.
    let script = format!(
        "BEGIN {{ printf(\"ready\\n\"); }} \
         usdt:{b}:palisade:phase_end {{ printf(\"phase %s %d\\n\", str(arg0), arg1); }} \
         usdt:{b}:palisade:rule_match {{ printf(\"match %s %d %d\\n\", str(arg0), arg1, arg2); }} \
         usdt:{b}:palisade:intervention {{ printf(\"intervention %s %d %d\\n\", str(arg0), arg2, arg3); }}",
        b = bin.display()
    );
    let mut bt = Command::new(BPFTRACE)
        .args(["-p", &p.pid().to_string(), "-e", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bpftrace starts");
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let stdout = bt.stdout.take().unwrap();
    let seen = lines.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            seen.lock().unwrap().push(l);
        }
    });
    let stderr = bt.stderr.take().unwrap();
    let errors = Arc::new(Mutex::new(String::new()));
    let err_seen = errors.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut e = err_seen.lock().unwrap();
            e.push_str(&l);
            e.push('\n');
        }
    });
    // Wait until bpftrace has attached every probe (its BEGIN line).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let attached = lines.lock().unwrap().iter().any(|l| l == "ready");
        if attached {
            break;
        }
        if let Ok(Some(status)) = bt.try_wait() {
            panic!(
                "bpftrace exited before attaching ({status}): {}",
                errors.lock().unwrap()
            );
        }
        assert!(
            Instant::now() < deadline,
            "bpftrace never attached: {}",
            errors.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // And until a request's phases show: the probes are live in the process.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !lines
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.starts_with("phase "))
    {
        assert!(
            Instant::now() < deadline,
            "no phase seen: {:?}; stderr: {}",
            lines.lock().unwrap(),
            errors.lock().unwrap()
        );
        assert_eq!(get(listen, "/?q=warm-up", "").await.status, 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(get(listen, "/?q=attack", "").await.status, 403);
    assert_eq!(get(listen, "/?q=fine", "").await.status, 200);
    // The access log's unique ids are the tracepoints' transaction ids.
    let ids: Vec<String> = (0..2)
        .map(|i| {
            let line = wait_for_line(&access, Duration::from_secs(60), |l| {
                l.contains(if i == 0 {
                    "\"uri\":\"/?q=attack\""
                } else {
                    "\"uri\":\"/?q=fine\""
                })
            })
            .expect("access log line");
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            v["unique_id"].as_str().unwrap().to_owned()
        })
        .collect();
    let (blocked, passed) = (&ids[0], &ids[1]);
    let want = [
        format!("match {blocked} 77 1"),
        format!("intervention {blocked} 403 77"),
        format!("phase {blocked} 1"),
        format!("phase {passed} 1"),
        format!("phase {passed} 2"),
        format!("phase {passed} 4"),
    ];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = lines.lock().unwrap().clone();
        if want.iter().all(|w| got.contains(w)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "bpftrace output {got:?} lacks some of {want:?}; stderr: {}",
            errors.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = bt.kill();
    let _ = bt.wait();
}
