//! The compiled plan against the interpreter it replaced: every request of three
//! corpora runs through two transactions, one walking the plan (the engine's
//! default) and one the interpreter (`Transaction::use_interpreter`), and both
//! must reach the same outcome:
//! - the intervention of every phase (status, kind, rule id) and whether it paused;
//! - the matched rule ids, in order;
//! - every error-log line (the rule, its message, its data and the value it
//!   matched, so MATCHED_VAR and MATCHED_VAR_NAME as the rule saw them);
//! - every TX variable at the end (anomaly scores, captures, anything `setvar`
//!   wrote from MATCHED_VARS).
//!
//! The corpora: the CRS regression tests' requests, the benchmark's varying
//! benign traffic (`bench/gen_varying.py`, from a seed), and the fuzz seeds
//! (`fuzz/seeds/`: request heads, bodies of every processor, injection values).
//! They run under CRS v4 blocking at paranoia level 1, under CRS v4 at level 4,
//! and under a site whose walk is its overlay then the base (its own rules,
//! `skipAfter` into the base, removals, a seeded paranoia level: its own fold
//! table).

mod common;

use common::regression::{Request, build_request, parse_raw, response, yaml_files};
use engine::{Policy, PolicyBuilder, Ruleset, RulesetBuilder, Transaction, TxContext};
use serde_norway::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// What one transaction did, in the terms the two walks are compared in.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    phases: Vec<String>,
    ids: Vec<i64>,
    lines: Vec<String>,
    tx: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A log line without what differs between any two transactions (the unique id).
fn stable(line: String) -> String {
    match line.find("[unique_id \"") {
        Some(start) => {
            let end = line[start + 12..]
                .find('"')
                .map_or(line.len(), |e| start + 12 + e + 1);
            format!("{}{}", &line[..start], &line[end..])
        }
        None => line,
    }
}

fn phase(tx: &Transaction, i: Option<engine::Intervention>) -> String {
    format!(
        "{:?} paused={}",
        i.map(|i| (i.status, i.kind, i.rule_id)),
        tx.paused()
    )
}

/// Runs `req` through every phase of `tx`, as the proxy does (the response is
/// the test backend's).
fn drive(mut tx: Transaction, req: &Request) -> Outcome {
    let mut phases = Vec::new();
    tx.set_request_line(&req.method, &req.uri, &req.version);
    for (k, v) in &req.headers {
        tx.add_request_header(k, v);
    }
    let i = tx.process_request_headers();
    let mut blocked = i.is_some();
    phases.push(phase(&tx, i));
    if !blocked {
        tx.append_request_body(&req.body);
        let i = tx.process_request_body();
        blocked = i.is_some();
        phases.push(phase(&tx, i));
    }
    if !blocked {
        let (status, headers, body) = response(req);
        tx.set_response_status(status, b"HTTP/1.1");
        for (k, v) in &headers {
            tx.add_response_header(k, v);
        }
        let i = tx.process_response_headers();
        let blocked = i.is_some();
        phases.push(phase(&tx, i));
        if !blocked {
            if tx.response_body_wanted() {
                tx.append_response_body(&body);
            }
            let i = tx.process_response_body();
            phases.push(phase(&tx, i));
        }
    }
    tx.process_logging();
    let ids = tx.matched_rule_ids();
    let tx_vars = tx.tx_snapshot();
    let lines = tx
        .events()
        .filter_map(engine::Event::into_log_line)
        .map(stable)
        .collect();
    Outcome {
        phases,
        ids,
        lines,
        tx: tx_vars,
    }
}

/// Where the walks run: a rule set alone, or a site over one.
#[derive(Clone)]
enum Walk {
    Base(Arc<Ruleset>),
    Site(Arc<Policy>),
}

impl Walk {
    fn transaction(&self) -> Transaction {
        match self {
            Walk::Base(rs) => Transaction::new(rs.clone(), TxContext::default()),
            Walk::Site(p) => Transaction::with_policy(p.clone(), TxContext::default()),
        }
    }
}

/// Runs every request through both walks; panics naming the first requests
/// whose outcomes differ. Returns how many requests ran and how many of them
/// matched at least one rule (so a corpus that exercises nothing is seen).
fn compare(walk: &Walk, corpus: &str, requests: &[(String, Request)]) -> (usize, usize) {
    let mut differences = Vec::new();
    let mut matched = 0;
    for (name, req) in requests {
        let plan = drive(walk.transaction(), req);
        let mut oracle = walk.transaction();
        oracle.use_interpreter();
        let oracle = drive(oracle, req);
        if !plan.ids.is_empty() {
            matched += 1;
        }
        if plan != oracle {
            differences.push(format!(
                "{corpus}: {name}:\n  plan:        {plan:?}\n  interpreter: {oracle:?}"
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} requests differ between the plan and the interpreter; the first:\n{}",
        differences.len(),
        requests.len(),
        differences
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    println!(
        "{corpus}: {} requests, the same outcome from both walks; {matched} matched a rule",
        requests.len()
    );
    (requests.len(), matched)
}

fn crs_dir() -> PathBuf {
    common::shared().join("crs")
}

/// CRS v4 blocking (the tests' preamble), at paranoia level `pl`.
fn crs_at(pl: u8) -> Arc<Ruleset> {
    let crs = crs_dir();
    let mut b = RulesetBuilder::new(Arc::new(seclang::FsSource));
    b.add_text(common::PREAMBLE, "preamble.conf")
        .expect("preamble");
    b.add_text(
        &format!(
            "SecAction \"id:900000,phase:1,pass,nolog,t:none,\
             setvar:tx.blocking_paranoia_level={pl}\"\n\
             SecAction \"id:900001,phase:1,pass,nolog,t:none,\
             setvar:tx.detection_paranoia_level={pl}\""
        ),
        "paranoia.conf",
    )
    .expect("paranoia");
    b.add_file(&crs.join("crs-setup.conf.example"))
        .expect("crs-setup");
    b.add_file(&crs.join("rules/*.conf")).expect("rules");
    Arc::new(b.build().expect("CRS v4 builds"))
}

/// CRS v4 blocking at its default paranoia level (1), which a site may raise.
fn pl1() -> &'static Arc<Ruleset> {
    static RS: OnceLock<Arc<Ruleset>> = OnceLock::new();
    RS.get_or_init(common::crs_v4)
}

/// A site over CRS v4 at level 1 whose walk differs from the base's: its own
/// rules run first (one `skipAfter`s into the base's rules, one blocks with
/// the site's default action, one removes a rule per request), a
/// configure-time removal, a target exclusion, and a seeded level 2.
fn site() -> Walk {
    let mut b = PolicyBuilder::new(pl1(), "oracle-site", Arc::new(seclang::FsSource));
    b.add_text(
        r#"
SecDefaultAction "phase:1,log,auditlog,deny,status:406"
SecDefaultAction "phase:2,log,auditlog,deny,status:406"
SecRule REQUEST_HEADERS:X-Skip "@streq yes" "id:10001,phase:1,pass,log,skipAfter:END-REQUEST-910-IP-REPUTATION"
SecRule ARGS:site_block "@contains zzz" "id:10002,phase:2,block,msg:'site block'"
SecRule REQUEST_FILENAME "@beginsWith /api/" "id:10003,phase:1,pass,nolog,ctl:ruleRemoveById=920350"
SecRule ARGS "@rx ^site-(\d+)$" "id:10004,phase:2,pass,log,capture,setvar:tx.site_hits=+1,setvar:tx.site_last=%{TX.1},chain"
    SecRule MATCHED_VARS_NAMES "@rx ^ARGS:" "t:none"
SecRuleRemoveById 920280
SecRuleUpdateTargetById 942100 "!ARGS:q"
"#,
        "oracle-site.conf",
    )
    .expect("site rules");
    b.paranoia_level(2, None).expect("level");
    let p = b.build().expect("the site builds");
    Walk::Site(Arc::new(p))
}

/// Every stage's request of the CRS regression tests.
fn regression_requests() -> Vec<(String, Request)> {
    let mut files = Vec::new();
    yaml_files(&crs_dir().join("tests/regression/tests"), &mut files);
    let mut out = Vec::new();
    for f in files {
        let content = std::fs::read_to_string(&f).expect("readable test file");
        let doc: Value = serde_norway::from_str(&content).expect("YAML");
        let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
        let Some(Value::Sequence(tests)) = doc.get("tests") else {
            continue;
        };
        for t in tests {
            let tid = t
                .get("test_id")
                .and_then(common::regression::text)
                .unwrap_or_default();
            let Some(Value::Sequence(stages)) = t.get("stages") else {
                continue;
            };
            for (n, st) in stages.iter().enumerate() {
                if let Some(input) = st.get("input") {
                    out.push((format!("{stem}-{tid} stage {n}"), build_request(input)));
                }
            }
        }
    }
    assert!(out.len() > 3000, "CRS regression requests: {}", out.len());
    out
}

/// The benchmark's varying benign requests, generated from a seed.
fn varying_requests(count: usize) -> Vec<(String, Request)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plan-oracle-varying");
    let _ = std::fs::remove_dir_all(&dir);
    let status = std::process::Command::new("python3")
        .arg(root.join("bench/gen_varying.py"))
        .args(["--seed", "20261129", "--count", &count.to_string(), "--out"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("python3 runs bench/gen_varying.py");
    assert!(status.success(), "bench/gen_varying.py failed");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the corpus folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "http"))
        .collect();
    files.sort();
    assert_eq!(files.len(), count, "generated requests");
    files
        .into_iter()
        .map(|p| {
            let raw = std::fs::read(&p).unwrap();
            (p.display().to_string(), parse_raw(&raw))
        })
        .collect()
}

fn post(uri: &str, content_type: &[u8], body: &[u8]) -> Request {
    Request {
        method: b"POST".to_vec(),
        uri: uri.as_bytes().to_vec(),
        version: b"HTTP/1.1".to_vec(),
        headers: vec![
            (b"Host".to_vec(), b"localhost".to_vec()),
            (b"User-Agent".to_vec(), b"oracle".to_vec()),
            (b"Accept".to_vec(), b"*/*".to_vec()),
            (b"Content-Type".to_vec(), content_type.to_vec()),
            (
                b"Content-Length".to_vec(),
                body.len().to_string().into_bytes(),
            ),
        ],
        body: body.to_vec(),
    }
}

fn percent(value: &[u8]) -> String {
    let mut s = String::new();
    for &b in value {
        if b.is_ascii_alphanumeric() {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// The fuzz targets' committed seeds, as requests: heads as they are; bodies
/// under their processor's content type (each seed's first byte is the target's
/// control byte); injection values as a query argument and as a form field.
fn fuzz_requests() -> Vec<(String, Request)> {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let files = |target: &str| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(seeds.join(target))
            .unwrap_or_else(|e| panic!("fuzz/seeds/{target}: {e}"))
            .flatten()
            .map(|e| e.path())
            .collect();
        v.sort();
        v.into_iter()
            .map(|p| {
                let name = format!("{target}/{}", p.file_name().unwrap().to_string_lossy());
                (name, std::fs::read(&p).unwrap())
            })
            .collect()
    };
    let mut out = Vec::new();
    for (name, data) in files("http1_head") {
        let start = data
            .iter()
            .position(u8::is_ascii_uppercase)
            .unwrap_or(data.len());
        let req = parse_raw(&data[start..]);
        if !req.method.is_empty() {
            out.push((name, req));
        }
    }
    for (target, content_type) in [
        ("body_urlencoded", &b"application/x-www-form-urlencoded"[..]),
        ("body_json", b"application/json"),
        ("body_xml", b"text/xml"),
    ] {
        for (name, data) in files(target) {
            let body = data.get(1..).unwrap_or_default();
            out.push((name, post("/submit", content_type, body)));
        }
    }
    for (name, data) in files("body_multipart") {
        let rest = data.get(1..).unwrap_or_default();
        let cut = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let body = rest.get(cut + 1..).unwrap_or_default();
        out.push((name, post("/upload", &rest[..cut], body)));
    }
    for (name, data) in files("injection") {
        let mut get = post("/search", b"text/plain", b"");
        get.method = b"GET".to_vec();
        get.headers.truncate(3);
        get.uri = format!("/search?q={}", percent(&data)).into_bytes();
        out.push((format!("{name} (query)"), get));
        let form = format!("comment={}", percent(&data));
        out.push((
            format!("{name} (form)"),
            post(
                "/comment",
                b"application/x-www-form-urlencoded",
                form.as_bytes(),
            ),
        ));
    }
    assert!(out.len() > 1500, "fuzz seed requests: {}", out.len());
    out
}

#[test]
fn crs_regression_corpus_at_paranoia_level_1() {
    let (n, matched) = compare(
        &Walk::Base(pl1().clone()),
        "CRS regression, PL1",
        &regression_requests(),
    );
    assert!(matched * 2 > n, "most regression requests match a rule");
}

#[test]
fn crs_regression_corpus_under_a_site() {
    let (n, matched) = compare(&site(), "CRS regression, site", &regression_requests());
    assert!(matched * 2 > n);
}

#[test]
fn varying_benign_traffic() {
    let requests = varying_requests(1500);
    compare(&Walk::Base(pl1().clone()), "varying, PL1", &requests);
    compare(&Walk::Base(crs_at(4)), "varying, PL4", &requests);
}

#[test]
fn fuzz_seeds() {
    let requests = fuzz_requests();
    let (_, matched) = compare(&Walk::Base(crs_at(4)), "fuzz seeds, PL4", &requests);
    assert!(matched > 500, "the seeds reach rules: {matched}");
    compare(&site(), "fuzz seeds, site", &requests);
}

/// Answers every block-list name as not listed.
#[derive(Debug)]
struct NotListed;

impl engine::RblResolver for NotListed {
    fn lookup(&self, _name: &str) -> engine::RblAnswer {
        engine::RblAnswer::NotListed
    }
}

/// A walk that pauses for a DNS lookup resumes from the step it paused before,
/// with the same outcome as the interpreter's, which resumes from the entry.
#[test]
fn paused_walks_resume_alike() {
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    b.rbl_resolver(true);
    b.add_text(
        r#"
SecRuleEngine On
SecRule ARGS "@rx a" "id:1,phase:1,pass,log,setvar:tx.before=1"
SecMarker ONE
SecRule ARGS:site "@rbl uribl.test" "id:2,phase:1,deny,status:401"
SecRule ARGS "@rx b" "id:3,phase:1,deny,status:402,skipAfter:ONE"
"#,
        "pause.conf",
    )
    .unwrap();
    let rs = Arc::new(b.build().unwrap());
    let run = |interpreter: bool| {
        let ctx = TxContext {
            client_ip: "192.0.2.7".parse().unwrap(),
            rbl: Some(Arc::new(NotListed) as Arc<dyn engine::RblResolver>),
            ..Default::default()
        };
        let mut tx = Transaction::new(rs.clone(), ctx);
        if interpreter {
            tx.use_interpreter();
        }
        tx.set_pause_for_lookups(true);
        tx.set_request_line(b"GET", b"/?x=ab&site=a.example", b"HTTP/1.1");
        tx.add_request_header(b"Host", b"localhost");
        let first = tx.process_request_headers();
        let paused = tx.paused();
        let resumed = tx.resume_phase();
        (
            first.map(|i| i.status),
            paused,
            resumed.map(|i| (i.status, i.rule_id)),
            tx.tx_snapshot(),
        )
    };
    let plan = run(false);
    assert_eq!(plan, run(true));
    assert!(plan.1, "the walk paused before the @rbl rule");
    assert_eq!(plan.2, Some((402, Some(3))));
}
