//! Runs the CRS regression tests (../shared/crs/tests/regression/tests) directly
//! against the engine, without HTTP: each stage's request goes into a transaction with
//! the CRS test setup, and the rule ids it logs are compared with `expect_ids` and
//! `no_expect_ids`. Status expectations belong to the HTTP front end and are checked by
//! `scripts/crs-conformance`, not here.
//!
//! The pass rate must stay at or above the floor in `tests/crs/engine-floor`.

mod common;

use common::regression::{Request, build_request, response, text, yaml_files};

use engine::{RulesetBuilder, Transaction, TxContext};
use serde_norway::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn logged_ids(lines: &[String]) -> BTreeSet<i64> {
    lines
        .iter()
        .filter_map(|l| {
            let start = l.find("[id \"")? + 5;
            let end = l[start..].find('"')? + start;
            l[start..end].parse().ok()
        })
        .collect()
}

fn run(rs: &Arc<engine::Ruleset>, req: &Request) -> (BTreeSet<i64>, Vec<String>) {
    let mut tx = Transaction::new(rs.clone(), TxContext::default());
    tx.set_request_line(&req.method, &req.uri, &req.version);
    for (k, v) in &req.headers {
        tx.add_request_header(k, v);
    }
    let mut blocked = tx.process_request_headers().is_some();
    if !blocked {
        tx.append_request_body(&req.body);
        blocked = tx.process_request_body().is_some();
    }
    if !blocked {
        let (status, headers, body) = response(req);
        tx.set_response_status(status, b"HTTP/1.1");
        for (k, v) in &headers {
            tx.add_response_header(k, v);
        }
        if tx.process_response_headers().is_none() {
            if tx.response_body_wanted() {
                tx.append_response_body(&body);
            }
            tx.process_response_body();
        }
    }
    tx.process_logging();
    let lines = tx
        .events()
        .filter_map(engine::Event::into_log_line)
        .collect::<Vec<_>>();
    (logged_ids(&lines), lines)
}

fn ids(v: Option<&Value>) -> Vec<i64> {
    match v {
        Some(Value::Sequence(s)) => s.iter().filter_map(|x| x.as_i64()).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn crs_regression_suite_through_the_engine() {
    let shared = common::shared();
    let crs = shared.join("crs");
    let tests_dir = std::env::var("CRS_TESTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| crs.join("tests/regression/tests"));
    let setup = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/crs/crs-test-setup.conf");
    let mut b = RulesetBuilder::new(Arc::new(seclang::FsSource));
    b.add_file(&setup).expect("test setup");
    b.add_file(&crs.join("crs-setup.conf.example"))
        .expect("crs-setup");
    b.add_file(&crs.join("rules/*.conf")).expect("rules");
    let rs = Arc::new(b.build().expect("build"));

    let only = std::env::var("CRS_ONLY").ok();
    let mut files = Vec::new();
    yaml_files(&tests_dir, &mut files);
    let (mut passed, mut failed) = (0usize, 0usize);
    let mut failures = Vec::new();
    for f in files {
        let Ok(content) = std::fs::read_to_string(&f) else {
            continue;
        };
        let Ok(doc) = serde_norway::from_str::<Value>(&content) else {
            failures.push(format!("{}: unreadable YAML", f.display()));
            failed += 1;
            continue;
        };
        let rule = f
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(Value::Sequence(tests)) = doc.get("tests") else {
            continue;
        };
        for t in tests {
            let tid = t.get("test_id").and_then(text).unwrap_or_default();
            let name = format!("{rule}-{tid}");
            if only.as_deref().is_some_and(|o| !name.starts_with(o)) {
                continue;
            }
            let mut ok = true;
            let mut why = String::new();
            if let Some(Value::Sequence(stages)) = t.get("stages") {
                for st in stages {
                    let (Some(input), Some(output)) = (st.get("input"), st.get("output")) else {
                        continue;
                    };
                    let req = build_request(input);
                    let (got, lines) = run(&rs, &req);
                    let log = output.get("log");
                    let expect = ids(log.and_then(|l| l.get("expect_ids")));
                    let forbid = ids(log.and_then(|l| l.get("no_expect_ids")));
                    let missing: Vec<_> = expect.iter().filter(|i| !got.contains(i)).collect();
                    let unwanted: Vec<_> = forbid.iter().filter(|i| got.contains(i)).collect();
                    let mut regex_fail = false;
                    if let Some(re) = log.and_then(|l| l.get("match_regex")).and_then(text)
                        && let Ok(re) = regex::Regex::new(&re)
                    {
                        regex_fail |= !lines.iter().any(|l| re.is_match(l));
                    }
                    if !missing.is_empty() || !unwanted.is_empty() || regex_fail {
                        ok = false;
                        why = format!(
                            "missing {missing:?}, unwanted {unwanted:?}, regex {regex_fail}; logged {got:?}"
                        );
                    }
                }
            }
            if ok {
                passed += 1;
            } else {
                failed += 1;
                failures.push(format!("{name}: {why}"));
            }
        }
    }
    for f in &failures {
        println!("FAIL {f}");
    }
    let rate = 100.0 * passed as f64 / (passed + failed).max(1) as f64;
    println!("engine-level CRS regression: {passed} passed, {failed} failed ({rate:.2}%)");
    let floor: f64 = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/crs/engine-floor"),
    )
    .ok()
    .and_then(|s| s.trim().parse().ok())
    .unwrap_or(0.0);
    assert!(
        rate >= floor,
        "pass rate {rate:.2}% fell below the floor {floor}%"
    );
}
