//! The shadow rule set (`[shadow]`, docs/shadow.md) with the real binary: small
//! SecLang rule sets of the test's own (the primary blocks `xattack` and a header,
//! the shadow blocks `xattack` and `yprobe`), every request sampled. Checked: the
//! outcome counters in `/metrics` (waited for by polling with a generous bound),
//! the disagreements and per-rule counts in `/dashboard/api/snapshot`, that a
//! request only the shadow would block is answered 200, that a reload swaps the
//! shadow's rules, that `sample = 0` runs nothing, and that `palisade check`
//! refuses a bad `[shadow]`. Then CRS v4 at paranoia level 1 with a shadow at
//! level 2 over the same rules.

mod common;

use common::*;
use serde_json::Value;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const TOKEN: &str = "shadow-test-token-81d3";

const PRIMARY: &str = r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule ARGS "@contains xattack" "id:100,phase:2,deny,status:403,log"
SecRule REQUEST_HEADERS:X-Primary-Only "@streq 1" "id:300,phase:1,deny,status:403,log"
"#;

/// The shadow's own rules. Its engine mode says DetectionOnly: the shadow reports
/// what it would do all the same.
fn shadow_rules(word: &str, id: u32) -> String {
    format!(
        "SecRuleEngine DetectionOnly\nSecRequestBodyAccess On\n\
         SecRule ARGS \"@contains xattack\" \"id:100,phase:2,deny,status:403,log\"\n\
         SecRule ARGS \"@contains {word}\" \"id:{id},phase:2,deny,status:403,log\"\n"
    )
}

fn config(
    listen: SocketAddr,
    backend: SocketAddr,
    admin: SocketAddr,
    dir: &TempDir,
    shadow: &str,
    sample: f64,
) -> String {
    std::fs::write(dir.path("shadow.conf"), shadow).unwrap();
    basic_config(
        listen,
        backend,
        &format!(
            "[admin]\naddress = \"{admin}\"\ntoken_file = \"{}\"\n\n[logs]\nerror_log = \"{}\"\n\n{}\n[shadow]\nrules = [{{ file = \"shadow.conf\" }}]\nsample = {sample:?}\ncpu_budget = 4.0\ncpu_share = 4.0\n",
            dir.path("token").display(),
            dir.path("error.log").display(),
            rules_toml(PRIMARY)
        ),
    )
}

async fn outcome(admin: SocketAddr, o: &str) -> f64 {
    metric(
        admin,
        &format!("palisade_shadow_requests_total{{outcome=\"{o}\"}}"),
    )
    .await
}

/// The outcomes of compared requests.
const COMPARED: [&str; 4] = ["agree_pass", "agree_block", "shadow_only", "primary_only"];

/// The sum of the counts of `outcomes`.
async fn total(admin: SocketAddr, outcomes: &[&str]) -> f64 {
    let mut sum = 0.0;
    for o in outcomes {
        sum += outcome(admin, o).await;
    }
    sum
}

/// Waits (polling, with a bound for a busy machine) until the compared outcomes
/// add up to `n`.
async fn wait_compared(admin: SocketAddr, n: f64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let sum = total(admin, &COMPARED).await;
        if sum >= n {
            assert_eq!(sum, n, "more requests compared than sent");
            return;
        }
        assert!(Instant::now() < deadline, "only {sum} of {n} compared");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn snapshot(admin: SocketAddr) -> Value {
    let r = send_raw(
        admin,
        format!(
            "GET /dashboard/api/snapshot HTTP/1.1\r\nHost: {admin}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

async fn post(listen: SocketAddr, path: &str, body: &str) -> RawResponse {
    send_raw(
        listen,
        format!(
            "POST {path} HTTP/1.1\r\nHost: example.com\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap()
}

/// Puts `cfg` in force: written, SIGHUP, and waited for until `n` reloads have
/// succeeded.
async fn reload(p: &Palisade, dir: &TempDir, cfg: &str, admin: SocketAddr, n: f64) {
    std::fs::write(dir.path("palisade.toml"), cfg).unwrap();
    p.sighup();
    let deadline = Instant::now() + Duration::from_secs(120);
    while metric(admin, "palisade_config_reloads_total{result=\"success\"}").await < n {
        assert!(Instant::now() < deadline, "the reload did not take effect");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_compares_without_acting() {
    let backend = Backend::start().await;
    let dir = TempDir::new("shadow");
    std::fs::write(dir.path("token"), TOKEN).unwrap();
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let p = Palisade::start(
        &dir,
        &config(
            listen,
            backend.addr,
            admin,
            &dir,
            &shadow_rules("yprobe", 200),
            1.0,
        ),
        listen,
    );

    assert_eq!(get(listen, "/a?q=hello", "").await.status, 200);
    assert_eq!(get(listen, "/a?q=xattack", "").await.status, 403);
    // Only the shadow would block these: they pass.
    assert_eq!(get(listen, "/a?q=yprobe", "").await.status, 200);
    assert_eq!(post(listen, "/form", "name=yprobe").await.status, 200);
    // Only the primary blocks this one, in phase 1: the shadow sees the head only.
    assert_eq!(get(listen, "/h", "X-Primary-Only: 1\r\n").await.status, 403);
    wait_compared(admin, 5.0).await;
    assert_eq!(outcome(admin, "agree_pass").await, 1.0);
    assert_eq!(outcome(admin, "agree_block").await, 1.0);
    assert_eq!(outcome(admin, "shadow_only").await, 2.0);
    assert_eq!(outcome(admin, "primary_only").await, 1.0);
    assert_eq!(outcome(admin, "skipped_budget").await, 0.0);
    assert_eq!(outcome(admin, "skipped_queue").await, 0.0);
    assert_eq!(metric(admin, "palisade_shadow_head_only_total").await, 1.0);
    assert!(metric(admin, "palisade_shadow_cpu_seconds_total").await > 0.0);
    // The backend saw every request the primary let through, and only those.
    assert_eq!(backend.requests().len(), 3);

    let status: Value = serde_json::from_slice(&get(admin, "/status", "").await.body).unwrap();
    let st = &status["rules"]["shadow"];
    assert_eq!(st["sample"], 1.0, "{status}");
    assert_eq!(st["sha256"].as_str().map(str::len), Some(64), "{status}");
    let doc = snapshot(admin).await;
    let sh = &doc["shadow"];
    assert_eq!(sh["enabled"], true, "{sh}");
    assert_eq!(sh["sample"], 1.0);
    let list = sh["disagreements"].as_array().unwrap();
    assert_eq!(list.len(), 3, "{sh}");
    // Newest first.
    assert_eq!(list[0]["outcome"], "primary_only");
    assert_eq!(list[0]["head_only"], true);
    assert_eq!(list[0]["primary"]["rules"], serde_json::json!([300]));
    assert_eq!(list[0]["shadow"]["blocked"], false);
    assert_eq!(list[1]["outcome"], "shadow_only");
    assert_eq!(list[1]["method"], "POST");
    assert_eq!(list[1]["target"], "/form");
    assert_eq!(list[1]["head_only"], false);
    assert_eq!(list[1]["shadow"]["rules"], serde_json::json!([200]));
    assert_eq!(list[1]["shadow"]["status"], 403);
    assert_eq!(list[2]["target"], "/a?q=yprobe");
    assert_eq!(list[2]["site"], "default");
    assert_eq!(list[2]["primary"]["blocked"], false);
    assert_eq!(list[2]["id"].as_str().map(str::len), Some(20));
    let rules = sh["rules"].as_array().unwrap();
    assert_eq!(rules[0]["rule"], 200, "{sh}");
    assert_eq!(rules[0]["shadow_only"], 2);
    assert!(
        rules
            .iter()
            .any(|r| r["rule"] == 300 && r["primary_only"] == 1),
        "{sh}"
    );

    // A reload swaps the shadow's rules: `yprobe` is fine now, `zprobe` is not.
    let zprobe = |sample: f64| {
        config(
            listen,
            backend.addr,
            admin,
            &dir,
            &shadow_rules("zprobe", 201),
            sample,
        )
    };
    reload(&p, &dir, &zprobe(1.0), admin, 1.0).await;
    assert_eq!(get(listen, "/a?q=yprobe", "").await.status, 200);
    assert_eq!(get(listen, "/a?q=zprobe", "").await.status, 200);
    wait_compared(admin, 7.0).await;
    assert_eq!(outcome(admin, "agree_pass").await, 2.0);
    assert_eq!(outcome(admin, "shadow_only").await, 3.0);
    let doc = snapshot(admin).await;
    let newest = &doc["shadow"]["disagreements"][0];
    assert_eq!(newest["target"], "/a?q=zprobe", "{newest}");
    assert_eq!(newest["shadow"]["rules"], serde_json::json!([201]));

    // Sample 0: nothing is shadowed (decided on the request's path, before its
    // answer: the counters are final once the answers are in).
    reload(&p, &dir, &zprobe(0.0), admin, 2.0).await;
    for path in ["/a?q=zprobe", "/a?q=fine", "/a?q=xattack"] {
        get(listen, path, "").await;
    }
    let all =
        total(admin, &COMPARED).await + total(admin, &["skipped_budget", "skipped_queue"]).await;
    assert_eq!(all, 7.0, "sample 0 shadowed something");
    assert_eq!(snapshot(admin).await["shadow"]["sample"], 0.0);
}

#[test]
fn check_refuses_a_bad_shadow() {
    let primary = rules_toml(PRIMARY);
    assert_check_refuses(
        &format!("{primary}[shadow]\nsample = 1.5\n"),
        "shadow.sample 1.5: expected a fraction from 0.0 to 1.0",
    );
    assert_check_refuses(
        &format!("{primary}[shadow]\nsample = 0.1\ncpu_budget = 0\n"),
        "shadow.cpu_budget 0",
    );
    assert_check_refuses(
        &format!("{primary}[shadow]\nsample = 0.1\ncpu_share = -1\n"),
        "shadow.cpu_share -1",
    );
    assert_check_refuses(
        &format!("{primary}[shadow]\nsample = 0.1\nqueue = 0\n"),
        "shadow.queue 0",
    );
    assert_check_refuses(&format!("{primary}[shadow]\nrules = []\n"), "sample");
    assert_check_refuses(
        &format!(
            "{primary}[shadow]\nsample = 0.1\nrules = [{{ file = \"/nonexistent/shadow-missing.conf\" }}]\n"
        ),
        "[shadow]",
    );
    assert_check_refuses(
        &format!(
            "{primary}[shadow]\nsample = 0.1\nrules = [{{ file = \"/nonexistent/shadow-missing.conf\" }}]\n"
        ),
        "shadow-missing.conf",
    );
    assert_check_refuses(
        &format!("{primary}[shadow]\nsample = 0.1\nparanoia_level = 5\n"),
        "shadow.paranoia_level 5",
    );
    assert_check_refuses(
        &format!("{primary}[shadow]\nsample = 0.1\nsampel = 0.2\n"),
        "sampel",
    );
    // A good one passes, and check says what it is.
    let dir = TempDir::new("shadow-check");
    let cfg = dir.path("palisade.toml");
    std::fs::write(
        &cfg,
        basic_config(
            loopback(1),
            loopback(2),
            &format!("{primary}[shadow]\nsample = 0.25\nparanoia_level = 2\noverlay = [{{ inline = 'SecRuleRemoveById 100' }}]\n"),
        ),
    )
    .unwrap();
    let out = palisade_check("--config", &cfg);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("shadow: the [[rules]], compiled again to reach its paranoia level")
            && text.contains("paranoia level 2")
            && text.contains("sample 0.25"),
        "{text}"
    );
}

/// CRS v4 (../shared/crs) at paranoia level 1, blocking, with a shadow at level 2
/// over the same rules (compiled again, reaching level 2): a SQL phrase only level
/// 2 scores (942260) passes, and shows as the shadow's disagreement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crs_level_two_in_the_shadow() {
    let crs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/crs");
    if required(
        &crs.join("rules"),
        "the CRS shadow test (CRS v4 at ../shared/crs)",
    )
    .is_none()
    {
        return;
    }
    let backend = Backend::start().await;
    let dir = TempDir::new("shadow-crs");
    std::fs::write(dir.path("token"), TOKEN).unwrap();
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let file = |p: &std::path::Path| format!("[[rules]]\nfile = \"{}\"\n", p.display());
    let extra = format!(
        "[admin]\naddress = \"{admin}\"\ntoken_file = \"{}\"\n\n{}{}{}\n[shadow]\nsample = 1.0\nparanoia_level = 2\ncpu_budget = 4.0\ncpu_share = 10.0\n",
        dir.path("token").display(),
        file(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples/palisade-recommended.conf")
        ),
        file(&crs.join("crs-setup.conf.example")),
        file(&crs.join("rules/*.conf")),
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    assert_eq!(get(listen, "/s?q=hello", "").await.status, 200);
    assert_eq!(get(listen, "/s?q=1%20OR%201%3D1", "").await.status, 403);
    assert_eq!(
        get(listen, "/s?q=select%20name%20from%20users", "")
            .await
            .status,
        200
    );
    wait_compared(admin, 3.0).await;
    assert_eq!(outcome(admin, "agree_pass").await, 1.0);
    assert_eq!(outcome(admin, "agree_block").await, 1.0);
    assert_eq!(outcome(admin, "shadow_only").await, 1.0);
    let doc = snapshot(admin).await;
    let d = &doc["shadow"]["disagreements"][0];
    assert_eq!(d["target"], "/s?q=select%20name%20from%20users", "{d}");
    let rules = d["shadow"]["rules"].as_array().unwrap();
    assert!(
        rules.contains(&serde_json::json!(942260)) && rules.contains(&serde_json::json!(949110)),
        "{d}"
    );
    assert!(d["shadow"]["score"].as_i64().unwrap() >= 5, "{d}");
    assert_eq!(d["primary"]["blocked"], false);
}
