//! Diagnostics from the real binary: a CPU profile on demand
//! (`GET /debug/profile` on the admin listener), as a flame graph and as a pprof
//! profile that Go's `go tool pprof` reads, behind the admin token, one at a time.

mod common;

use common::*;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TOKEN: &str = "profile-token";

/// `GET path` on the admin listener, with the token when `auth`.
async fn admin_get(admin: SocketAddr, path: &str, auth: bool) -> RawResponse {
    let auth = if auth {
        format!("Authorization: Bearer {TOKEN}\r\n")
    } else {
        String::new()
    };
    send_raw(
        admin,
        format!("GET {path} HTTP/1.1\r\nHost: admin\r\n{auth}Connection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap()
}

/// Sends requests to `listen` until `until`, so that the workers use the CPU.
async fn load(listen: SocketAddr, until: Instant) -> usize {
    let mut n = 0;
    while Instant::now() < until && n < 100_000 {
        let r = get(listen, "/load?q=some+words+to+inspect", "").await;
        assert_eq!(r.status, 200);
        n += 1;
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_profile_on_demand() {
    let Some(go) = go_tool("reading the pprof profile with go tool pprof") else {
        return;
    };
    let backend = Backend::start().await;
    let dir = TempDir::new("diagnostics-profile");
    std::fs::write(dir.path("token"), format!("{TOKEN}\n")).unwrap();
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let rules = rules_toml(
        r#"SecRule ARGS "@rx (?:union|select|insert)\s+\w+" "id:1,phase:2,deny,status:403,t:lowercase,t:urlDecodeUni""#,
    );
    let config = basic_config(
        listen,
        backend.addr,
        &format!(
            "{rules}\n[admin]\naddress = \"{admin}\"\ntoken_file = \"token\"\ntimeout = \"1s\"\n"
        ),
    );
    let _p = Palisade::start(&dir, &config, listen);

    // The token, the method and the query are checked before anything is sampled.
    assert_eq!(admin_get(admin, "/debug/profile", false).await.status, 401);
    for bad in ["seconds=0", "seconds=301", "format=png", "every=2"] {
        let r = admin_get(admin, &format!("/debug/profile?{bad}"), true).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }

    // A flame graph of two seconds under load. The admin timeout (1 s) does not cut
    // the answer: the connection waits for its profile.
    let until = Instant::now() + Duration::from_secs(4);
    let loader = tokio::spawn(load(listen, until));
    let r = admin_get(admin, "/debug/profile?seconds=2&format=svg", true).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("image/svg+xml"));
    let svg = String::from_utf8_lossy(&r.body).into_owned();
    assert!(svg.contains("<svg"), "{svg}");
    // The workers served the load, and their frames carry their thread names.
    assert!(svg.contains("palisade-w"), "no worker samples in {svg}");
    assert!(loader.await.unwrap() > 0);

    // One profile at a time: a second one while the first runs is refused.
    let until = Instant::now() + Duration::from_secs(4);
    let loader = tokio::spawn(load(listen, until));
    let first = tokio::spawn(async move {
        admin_get(admin, "/debug/profile?seconds=3&format=pprof", true).await
    });
    // Wait until the first profile runs (the status says so), then ask again.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = admin_get(admin, "/status", false).await;
        let v: serde_json::Value = serde_json::from_slice(&status.body).unwrap();
        if v["profile_running"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "the profile never started: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = admin_get(admin, "/debug/profile?seconds=1", true).await;
    assert_eq!(second.status, 409, "{}", second.text());
    let r = first.await.unwrap();
    assert!(loader.await.unwrap() > 0);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));

    // The pprof profile is one that Go's reader understands, with the workers' samples.
    let pb = dir.path("palisade.pb");
    std::fs::write(&pb, &r.body).unwrap();
    let out = std::process::Command::new(&go)
        .args(["tool", "pprof", "-traces"])
        .arg(&pb)
        .env("PPROF_TMPDIR", dir.path("pprof-tmp"))
        .output()
        .expect("go tool pprof runs");
    let text = output_text(&out);
    assert!(out.status.success(), "go tool pprof: {text}");
    assert!(text.contains("palisade-w"), "{text}");
    assert!(Path::new(&pb).metadata().unwrap().len() > 0);
}

/// The files of a `.tar.gz` bundle, by name inside its one folder.
fn bundle_files(path: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    use std::io::Read;
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap());
    let mut archive = tar::Archive::new(gz);
    let mut out = std::collections::BTreeMap::new();
    let mut folders = std::collections::BTreeSet::new();
    for e in archive.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().to_string_lossy().into_owned();
        let (folder, file) = name.split_once('/').expect("one folder");
        folders.insert(folder.to_owned());
        let mut body = Vec::new();
        e.read_to_end(&mut body).unwrap();
        out.insert(file.to_owned(), body);
    }
    assert_eq!(folders.len(), 1, "{folders:?}");
    assert!(folders.iter().all(|f| f.starts_with("palisade-diag-")));
    out
}

fn diag(args: &[&str]) -> std::process::Output {
    std::process::Command::new(palisade_bin())
        .arg("diag")
        .args(args)
        .env_remove("PALISADE_ADMIN_TOKEN")
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diag_writes_an_incident_bundle() {
    let backend = Backend::start().await;
    let dir = TempDir::new("diagnostics-bundle");
    std::fs::write(dir.path("token"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(
        dir.path("rules.conf"),
        "SecRuleEngine On\nSecRule ARGS \"@contains attack\" \"id:7,phase:2,deny,status:403\"\n",
    )
    .unwrap();
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let config = basic_config(
        listen,
        backend.addr,
        &format!(
            "[[rules]]\nfile = \"rules.conf\"\n\n[admin]\naddress = \"{admin}\"\ntoken_file = \"token\"\n"
        ),
    );
    let p = Palisade::start(&dir, &config, listen);
    for q in ["a", "b", "attack"] {
        let r = get(listen, &format!("/slow-path?q={q}"), "").await;
        assert_eq!(r.status, if q == "attack" { 403 } else { 200 });
    }
    let cfg = dir.path("palisade.toml");
    let out_dir = dir.path("bundles");
    std::fs::create_dir(&out_dir).unwrap();
    // Requests are recorded just after their answers: wait until the three are.
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(admin, "palisade_summaries_published_total").await < 3.0 {
        assert!(
            Instant::now() < deadline,
            "the requests were never recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = diag(&[
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--profile-seconds",
        "1",
    ]);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(path.starts_with(&out_dir), "{text}");
    let files = bundle_files(&path);
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    for want in [
        "MANIFEST.txt",
        "config.toml",
        "hashes.txt",
        "metrics.txt",
        "profile.pb",
        "slow.json",
        "status.json",
        "system.txt",
        "top.json",
        "version.txt",
    ] {
        assert!(names.contains(&want), "{want} missing: {names:?}");
    }
    let file = |n: &str| String::from_utf8_lossy(&files[n]).into_owned();
    assert!(
        !file("MANIFEST.txt").contains("not collected"),
        "{}",
        file("MANIFEST.txt")
    );
    assert!(file("version.txt").contains("revision: "));
    assert!(
        file("system.txt").contains("kernel: Linux "),
        "{}",
        file("system.txt")
    );
    assert!(file("config.toml").contains(&listen.to_string()));
    assert!(
        file("hashes.txt").contains("rules.conf"),
        "{}",
        file("hashes.txt")
    );
    let status: serde_json::Value = serde_json::from_slice(&files["status.json"]).unwrap();
    assert_eq!(status["rules"]["count"], 1, "{status}");
    assert!(file("metrics.txt").contains("palisade_requests_total{status=\"403\""));
    let slow: serde_json::Value = serde_json::from_slice(&files["slow.json"]).unwrap();
    let slow = slow["requests"].as_array().unwrap();
    assert_eq!(slow.len(), 3, "{slow:?}");
    assert!(
        slow.iter()
            .all(|r| r["uri"].as_str().unwrap().starts_with("/slow-path"))
    );
    assert!(slow.iter().any(|r| r["rules"] == serde_json::json!([7])));
    assert!(slow.iter().all(|r| r["phase_us"][0].is_u64()), "{slow:?}");
    assert!(!files["profile.pb"].is_empty());

    // With the proxy gone, the bundle still has what the files give, and says what
    // is missing.
    drop(p);
    let out = diag(&[
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("not collected: status.json"), "{text}");
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let files = bundle_files(&path);
    assert!(files.contains_key("config.toml") && !files.contains_key("status.json"));
    assert!(String::from_utf8_lossy(&files["MANIFEST.txt"]).contains("status.json: GET /status"));

    // A configuration that cannot be loaded is an error that names it.
    std::fs::write(dir.path("bad.toml"), "[[listener]\n").unwrap();
    let out = diag(&["--config", dir.path("bad.toml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        output_text(&out).contains("bad.toml"),
        "{}",
        output_text(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incident_is_captured_when_a_condition_holds() {
    let backend = Backend::start().await;
    let dir = TempDir::new("diagnostics-incident");
    std::fs::write(dir.path("token"), format!("{TOKEN}\n")).unwrap();
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    // Any request makes phase 1's p99 "above 0 ms": the condition holds as soon as
    // requests flow for the one-second window.
    let config = basic_config(
        listen,
        backend.addr,
        &format!(
            "{}\n[admin]\naddress = \"{admin}\"\ntoken_file = \"token\"\n\n[incidents]\ndir = \"incidents\"\nhold = \"1s\"\ncooldown = \"1h\"\nprofile_seconds = 1\nphase_p99_ms = 0\n",
            rules_toml(r#"SecRule ARGS "@contains attack" "id:1,phase:1,deny,status:403""#)
        ),
    );
    let _p = Palisade::start(&dir, &config, listen);
    let incidents = dir.path("incidents");
    let deadline = Instant::now() + Duration::from_secs(90);
    let captured = loop {
        assert_eq!(get(listen, "/?q=load", "").await.status, 200);
        if metric(admin, "palisade_incidents_captured_total").await >= 1.0 {
            break std::fs::read_dir(&incidents)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect::<Vec<_>>();
        }
        assert!(Instant::now() < deadline, "no incident was captured");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(captured.len(), 1, "{captured:?}");
    let one = &captured[0];
    let name = one.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("incident-") && name.ends_with("-phase1-p99"),
        "{name}"
    );
    let reason = std::fs::read_to_string(one.join("reason.txt")).unwrap();
    assert!(reason.contains("phase 1 p99"), "{reason}");
    for f in ["status.json", "metrics.txt", "slow.json", "profile.pb"] {
        assert!(
            one.join(f).metadata().is_ok_and(|m| m.len() > 0),
            "{f} in {name}"
        );
    }
    // The cool-down holds: more load, still one incident.
    for _ in 0..50 {
        assert_eq!(get(listen, "/?q=more", "").await.status, 200);
    }
    assert_eq!(
        metric(admin, "palisade_incidents_captured_total").await,
        1.0
    );

    // The bundle carries it.
    let out = diag(&[
        "--config",
        dir.path("palisade.toml").to_str().unwrap(),
        "--out",
        dir.path("").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", output_text(&out));
    let files = bundle_files(Path::new(String::from_utf8_lossy(&out.stdout).trim()));
    assert!(
        files.contains_key(&format!("incidents/{name}/profile.pb")),
        "{:?}",
        files.keys()
    );
    assert!(files.contains_key(&format!("incidents/{name}/reason.txt")));
}

#[test]
fn check_refuses_incident_settings_that_cannot_work() {
    assert_check_refuses(
        "[incidents]\ndir = \"/proc/version/incidents\"\ncpu_cores = 1.5\n",
        "is not a directory",
    );
    assert_check_refuses("[incidents]\ndir = \"x\"\n", "sets no condition");
    assert_check_refuses(
        "[incidents]\ndir = \"x\"\nkernel_share = 1.5\n",
        "incidents.kernel_share",
    );
    assert_check_refuses(
        "[incidents]\ndir = \"x\"\ncpu_cores = 1\nprofile_seconds = 0\n",
        "incidents.profile_seconds",
    );
}
