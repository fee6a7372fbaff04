//! Sites (`[[site]]`) end to end: the real `palisade` binary with CRS v4 loaded once
//! and several sites on one listener, in front of a recording backend.
//!
//! - a DetectionOnly site passes an attack (200, logged with its site in the access,
//!   error and audit logs) that the blocking site refuses (403);
//! - an exclusion of one CRS rule for one path of one site;
//! - a raised upload limit on one route: a body over the global limit passes there
//!   and is refused elsewhere;
//! - a rate limit that counts one site's requests only;
//! - per-site metrics;
//! - a reload that changes the sites keeps working, and one that fails keeps them.
//!
//! And `palisade check` refusing bad sites with errors that name the site and key.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The recommended base settings and CRS v4, with the global request body limits
/// lowered to 64 KiB (the proxy's and the rules').
fn crs_rules() -> String {
    let crs = repo().join("../shared/crs");
    assert!(
        crs.join("rules").is_dir(),
        "CRS v4 must be at ../shared/crs"
    );
    let file = |p: &Path| format!("[[rules]]\nfile = \"{}\"\n", p.display());
    let mut out = file(&repo().join("examples/palisade-recommended.conf"));
    out += "[[rules]]\ninline = '''\nSecRequestBodyLimit 65536\nSecAuditEngine RelevantOnly\nSecAuditLogParts ABHZ\n'''\n";
    out += &file(&crs.join("crs-setup.conf.example"));
    out += &file(&crs.join("rules/*.conf"));
    out
}

/// The sites; `watch_mode` is the engine mode of site "watch", `shop_extra` more
/// SecLang for site "shop".
fn sites(watch_mode: &str, shop_extra: &str) -> String {
    format!(
        r#"
[[site]]
name = "watch"
hosts = ["watch.example"]
rule_engine = "{watch_mode}"

[[site]]
name = "files"
hosts = ["shop.example", "*.shop.example"]
path_prefix = "/upload/"
[site.limits]
request_body_bytes = 1048576
request_body_limit = 1048576

[[site]]
name = "shop"
hosts = ["shop.example", "*.shop.example"]
[[site.rules]]
inline = '''
SecRule REQUEST_FILENAME "@beginsWith /scan/" "id:9001,phase:1,pass,nolog,ctl:ruleRemoveById=913100"
{shop_extra}
'''

[[site]]
name = "api"
hosts = ["api.example"]

[[rate_limit]]
name = "api-only"
key = "client_ip"
rate = "1/min"
burst = 2
sites = ["api"]
"#
    )
}

fn config(
    dir: &TempDir,
    listen: std::net::SocketAddr,
    backend: std::net::SocketAddr,
    admin: std::net::SocketAddr,
    sites: &str,
) -> String {
    basic_config(
        listen,
        backend,
        &format!(
            "[limits]\nrequest_body_bytes = 65536\n\n[logs]\nerror_log = \"{}\"\naccess_log = \"{}\"\naudit_log = \"{}\"\n\n[admin]\naddress = \"{admin}\"\n\n{}\n{sites}",
            dir.path("error.log").display(),
            dir.path("access.log").display(),
            dir.path("audit.log").display(),
            crs_rules(),
        ),
    )
}

const BROWSER: &str = "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\nAccept: text/html,*/*;q=0.8\r\nAccept-Language: en-GB,en;q=0.5\r\n";
const SCANNER: &str = "User-Agent: Nikto/2.5.0\r\nAccept: */*\r\nAccept-Language: en\r\n";
const XSS: &str = "/search?q=%3Cscript%3Ealert(1)%3C/script%3E";

async fn request(
    listen: std::net::SocketAddr,
    host: &str,
    path: &str,
    headers: &str,
) -> RawResponse {
    send_raw(
        listen,
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{headers}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap()
}

/// A multipart upload of `n` bytes in one file part, as a browser sends it: its
/// status.
async fn upload(listen: std::net::SocketAddr, host: &str, path: &str, n: usize) -> u16 {
    multipart_upload(listen, host, path, n, BROWSER).await
}

/// The access log line of the request whose `uri` contains `needle`.
fn access_line(dir: &TempDir, needle: &str) -> serde_json::Value {
    let line = wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| {
        l.contains(needle)
    })
    .unwrap_or_else(|| panic!("no access log line for {needle}"));
    serde_json::from_str(&line).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sites_share_crs_on_one_listener() {
    let dir = TempDir::new("sites");
    let backend = Backend::start().await;
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let cfg = config(
        &dir,
        listen,
        backend.addr,
        admin,
        &sites("DetectionOnly", ""),
    );
    let p = Palisade::start(&dir, &cfg, listen);

    // DetectionOnly passes the attack; the blocking site refuses it.
    let watched = request(listen, "watch.example", &format!("{XSS}&w=1"), BROWSER).await;
    assert_eq!(watched.status, 200, "{}", watched.text());
    assert!(backend.requests().iter().any(|s| s.uri.contains("w=1")));
    let blocked = request(listen, "shop.example", &format!("{XSS}&s=1"), BROWSER).await;
    assert_eq!(blocked.status, 403);
    assert!(!backend.requests().iter().any(|s| s.uri.contains("s=1")));
    // No site: the global policy blocks too.
    let other = request(listen, "other.example", &format!("{XSS}&o=1"), BROWSER).await;
    assert_eq!(other.status, 403);

    // Each logged with its site.
    let a = access_line(&dir, "w=1");
    assert_eq!(a["site"], "watch");
    assert_eq!(a["status"], 200);
    assert!(
        a["rules"].as_array().unwrap().iter().any(|r| r == 941100),
        "{a}"
    );
    assert_eq!(access_line(&dir, "s=1")["site"], "shop");
    assert_eq!(access_line(&dir, "o=1")["site"], "default");
    let uid = format!("[unique_id \"{}\"]", a["unique_id"].as_str().unwrap());
    let err = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains(&uid) && l.contains("[id \"941100\"]")
    })
    .expect("the watch site's match line");
    assert!(err.ends_with("[site \"watch\"]"), "{err}");
    let audit = wait_for_line(&dir.path("audit.log"), Duration::from_secs(10), |l| {
        l.contains("w=1")
    })
    .expect("the watch site's audit record");
    let audit: serde_json::Value = serde_json::from_str(&audit).unwrap();
    assert_eq!(audit["transaction"]["site"], "watch");

    // An exclusion of one CRS rule (913100, scanners' User-Agents) for one path of
    // one site.
    for (host, path, want) in [
        ("shop.example", "/scan/report", 200),
        ("www.shop.example", "/scan/report", 200),
        ("shop.example", "/account", 403),
        ("other.example", "/scan/report", 403),
        ("watch.example", "/scan/report", 200),
    ] {
        let r = request(listen, host, path, SCANNER).await;
        assert_eq!(r.status, want, "{host}{path}");
    }

    // A raised upload limit on one route: 200 KiB over the global 64 KiB.
    assert_eq!(
        upload(listen, "shop.example", "/upload/report", 200 * 1024).await,
        200
    );
    assert_eq!(
        upload(listen, "shop.example", "/profile", 200 * 1024).await,
        413
    );
    assert_eq!(
        upload(listen, "other.example", "/upload/report", 200 * 1024).await,
        413
    );
    assert_eq!(upload(listen, "shop.example", "/profile", 1024).await, 200);
    let big = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("/profile") && l.contains("limits.request_body_bytes (65536)")
    });
    assert!(big.is_some_and(|l| l.ends_with("[site \"shop\"]")));

    // A rate limit that counts the requests of one site: three pass (the burst), the
    // fourth is refused; the same client is not limited elsewhere.
    let mut api = Vec::new();
    for i in 0..4 {
        api.push(
            request(listen, "api.example", &format!("/v1/items?i={i}"), BROWSER)
                .await
                .status,
        );
    }
    assert_eq!(api, [200, 200, 200, 429]);
    for i in 0..6 {
        let r = request(listen, "shop.example", &format!("/items?i={i}"), BROWSER).await;
        assert_eq!(r.status, 200);
    }

    // Per-site metrics.
    assert!(
        metric(
            admin,
            "palisade_site_requests_total{site=\"watch\",action=\"pass\",class=\"2xx\"}"
        )
        .await
            >= 2.0
    );
    assert!(
        metric(
            admin,
            "palisade_site_requests_total{site=\"shop\",action=\"deny\",class=\"4xx\"}"
        )
        .await
            >= 2.0
    );
    assert_eq!(
        metric(
            admin,
            "palisade_site_requests_total{site=\"api\",action=\"rate_limited\",class=\"4xx\"}"
        )
        .await,
        1.0
    );
    assert!(
        metric(
            admin,
            "palisade_site_request_seconds_count{site=\"default\"}"
        )
        .await
            >= 2.0
    );

    // A reload that changes the sites: "watch" blocks now, "shop" gets one more
    // exclusion; the rest keeps working.
    let cfg2 = config(
        &dir,
        listen,
        backend.addr,
        admin,
        &sites("On", "SecRuleRemoveById 941100 941110 941160"),
    );
    std::fs::write(dir.path("palisade.toml"), &cfg2).unwrap();
    p.sighup();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let r = request(listen, "watch.example", XSS, BROWSER).await;
        if r.status == 403 {
            break;
        }
        assert!(Instant::now() < deadline, "the reload did not take effect");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        request(listen, "shop.example", "/scan/x", SCANNER)
            .await
            .status,
        200
    );
    assert_eq!(
        request(listen, "other.example", "/scan/x", SCANNER)
            .await
            .status,
        403
    );
    assert_eq!(
        upload(listen, "shop.example", "/upload/again", 200 * 1024).await,
        200
    );
    // The counters go on across the reload.
    assert!(
        metric(
            admin,
            "palisade_site_requests_total{site=\"watch\",action=\"deny\",class=\"4xx\"}"
        )
        .await
            >= 1.0
    );
    assert!(
        metric(
            admin,
            "palisade_site_requests_total{site=\"watch\",action=\"pass\",class=\"2xx\"}"
        )
        .await
            >= 2.0
    );

    // A reload whose site names a rule CRS does not have fails, naming it, and
    // what is in force stays.
    let bad = config(
        &dir,
        listen,
        backend.addr,
        admin,
        &sites("DetectionOnly", "SecRuleRemoveById 941999"),
    );
    std::fs::write(dir.path("palisade.toml"), &bad).unwrap();
    p.sighup();
    let failed = wait_for_line(&dir.path("error.log"), Duration::from_secs(120), |l| {
        l.contains("reload failed")
    })
    .expect("the failed reload is logged");
    assert!(
        failed.contains("site \"shop\"") && failed.contains("no rule with id 941999"),
        "{failed}"
    );
    assert_eq!(
        request(listen, "watch.example", XSS, BROWSER).await.status,
        403
    );
    assert_eq!(
        request(listen, "shop.example", "/scan/x", SCANNER)
            .await
            .status,
        200
    );
}

#[test]
fn check_refuses_bad_sites_naming_the_site_and_key() {
    let rule = "[[rules]]\ninline = 'SecRule ARGS \"@rx a\" \"id:1,phase:1,deny\"'\n";
    for (extra, want) in [
        (
            "[[site]]\nname = \"default\"\nhosts = [\"a.example\"]\n",
            "site.name \"default\" is reserved",
        ),
        (
            "[[site]]\nname = \"a b\"\nhosts = [\"a.example\"]\n",
            "site.name \"a b\": expected 1 to 64 letters",
        ),
        (
            "[[site]]\nname = \"a\"\nhosts = [\"a.example\"]\n[[site]]\nname = \"a\"\nhosts = [\"b.example\"]\n",
            "site.name \"a\" is used twice",
        ),
        (
            "[[site]]\nname = \"a\"\n",
            "site \"a\": hosts is empty and there is no path_prefix",
        ),
        (
            "[[site]]\nname = \"a\"\nhosts = [\"a.example:8080\"]\n",
            "site \"a\": hosts entry \"a.example:8080\"",
        ),
        (
            "[[site]]\nname = \"a\"\npath_prefix = \"up\"\n",
            "site \"a\": path_prefix \"up\" must start with '/'",
        ),
        (
            "[[site]]\nname = \"a\"\nhosts = [\"a.example\"]\nrule_engine = \"Maybe\"\n",
            "site \"a\": rule_engine \"Maybe\": expected \"On\", \"DetectionOnly\" or \"Off\"",
        ),
        (
            "[[site]]\nname = \"a\"\nhosts = [\"a.example\"]\nparanoia_level = 5\n",
            "site \"a\": paranoia_level 5: expected 1 to 4",
        ),
        (
            "[[site]]\nname = \"a\"\nhosts = [\"a.example\"]\nparanoia_level = 3\ndetection_paranoia_level = 2\n",
            "site \"a\": detection_paranoia_level 2 is below paranoia_level 3",
        ),
        (
            "[[site]]\nname = \"a\"\nhosts = [\"a.example\"]\n[site.limits]\nrequest_body_bytes = 0\n",
            "site \"a\": limits.request_body_bytes must be at least 1",
        ),
        (
            "[[site]]\nname = \"a\"\nhosts = [\"a.example\"]\n[site.limits]\nbody = 1\n",
            "unknown field `body`",
        ),
        (
            "[[rate_limit]]\nname = \"r\"\nkey = \"client_ip\"\nrate = \"1/s\"\nsites = [\"nope\"]\n",
            "rate_limit \"r\": sites names \"nope\", which is no [[site]]",
        ),
        (
            &format!(
                "{rule}[[site]]\nname = \"a\"\nhosts = [\"a.example\"]\n[[site.rules]]\ninline = 'SecRuleRemoveById 2'\n"
            ),
            "site \"a\": ",
        ),
        (
            &format!(
                "{rule}[[site]]\nname = \"a\"\nhosts = [\"a.example\"]\n[[site.rules]]\ninline = 'SecRuleRemoveById 2'\n"
            ),
            "palisade.toml#site.a.rules1:1:1: SecRuleRemoveById: no rule with id 2 is loaded",
        ),
        (
            &format!(
                "{rule}[[site]]\nname = \"a\"\nhosts = [\"a.example\"]\n[[site.rules]]\ninline = 'SecRuleEngine Off'\n"
            ),
            "SecRuleEngine is an engine setting",
        ),
        (
            &format!(
                "{rule}[[site]]\nname = \"a\"\nhosts = [\"a.example\"]\n[[site.rules]]\ninline = 'SecAction \"id:1,phase:1,pass\"'\n"
            ),
            "duplicate rule id",
        ),
    ] {
        assert_check_refuses(extra, want);
    }
}

#[test]
fn check_prints_the_sites() {
    let dir = TempDir::new("sites-check");
    let cfg = dir.path("palisade.toml");
    let rules = "[[rules]]\ninline = '''\nSecRequestBodyAccess On\nSecRule ARGS \"@rx a\" \"id:1,phase:2,deny\"\n'''\n";
    std::fs::write(
        &cfg,
        basic_config(
            loopback(1),
            loopback(2),
            &format!(
                "{rules}[[site]]\nname = \"shop\"\nhosts = [\"shop.example\"]\nrule_engine = \"DetectionOnly\"\n[[site.rules]]\ninline = 'SecRuleRemoveById 1'\n[site.limits]\nrequest_body_bytes = 99999999\n"
            ),
        ),
    )
    .unwrap();
    let out = palisade_check("--config", &cfg);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("site \"shop\": SecRuleEngine DetectionOnly, 0 rule(s) of its own"),
        "{text}"
    );
    assert!(
        text.contains("site \"default\": SecRuleEngine On"),
        "{text}"
    );
    assert!(
        text.contains("warning: site \"shop\": limits.request_body_bytes (99999999) is above the rules' request body limit (13107200"),
        "{text}"
    );
}
