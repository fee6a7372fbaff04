//! Runs the CRS regression tests (../shared/crs/tests/regression/tests) directly
//! against the engine, without HTTP: each stage's request goes into a transaction with
//! the CRS test setup, and the rule ids it logs are compared with `expect_ids` and
//! `no_expect_ids`. Status expectations belong to the HTTP front end and are checked by
//! `scripts/crs-conformance`, not here.
//!
//! The pass rate must stay at or above the floor in `tests/crs/engine-floor`.

mod common;

use base64::Engine as _;
use engine::{RulesetBuilder, Transaction, TxContext};
use serde_norway::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

struct Request {
    method: Vec<u8>,
    uri: Vec<u8>,
    version: Vec<u8>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn parse_raw(raw: &[u8]) -> Request {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, p + 4));
    let head_end = head_end.or_else(|| {
        raw.windows(2)
            .position(|w| w == b"\n\n")
            .map(|p| (p, p + 2))
    });
    let (head, body) = match head_end {
        Some((h, b)) => (&raw[..h], &raw[b..]),
        None => (raw, &b""[..]),
    };
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let line = lines.next().unwrap_or(b"");
    let parts: Vec<&[u8]> = line
        .split(|&b| b == b' ')
        .filter(|p| !p.is_empty())
        .collect();
    let mut headers = Vec::new();
    for l in lines {
        if let Some(p) = l.iter().position(|&b| b == b':') {
            let v = &l[p + 1..];
            let v = v.strip_prefix(b" ").unwrap_or(v);
            headers.push((l[..p].to_vec(), v.to_vec()));
        }
    }
    Request {
        method: parts.first().map(|p| p.to_vec()).unwrap_or_default(),
        uri: parts.get(1).map(|p| p.to_vec()).unwrap_or_default(),
        version: parts.get(2).map(|p| p.to_vec()).unwrap_or_default(),
        headers,
        body: body.to_vec(),
    }
}

fn build_request(input: &Value) -> Request {
    if let Some(enc) = input.get("encoded_request").and_then(text) {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(enc.trim())
            .unwrap_or_default();
        return parse_raw(&raw);
    }
    let get = |k: &str| input.get(k).and_then(text);
    let mut headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    if let Some(Value::Mapping(m)) = input.get("headers") {
        for (k, v) in m {
            if let (Some(k), Some(v)) = (text(k), text(v)) {
                headers.push((k.into_bytes(), v.into_bytes()));
            }
        }
    }
    let mut body = get("data").unwrap_or_default().into_bytes();
    let method = get("method").unwrap_or_else(|| "GET".into());
    let autocomplete = input
        .get("autocomplete_headers")
        .and_then(Value::as_bool)
        .or_else(|| input.get("stop_magic").and_then(Value::as_bool).map(|b| !b))
        .unwrap_or(true);
    let has = |n: &[u8], h: &[(Vec<u8>, Vec<u8>)]| h.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    // What go-ftw does to a request before sending it.
    if !body.is_empty() && autocomplete {
        if !has(b"content-type", &headers) {
            headers.push((
                b"Content-Type".to_vec(),
                b"application/x-www-form-urlencoded".to_vec(),
            ));
        }
        let urlencoded = headers.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case(b"content-type") && v == b"application/x-www-form-urlencoded"
        });
        if urlencoded && let Some(encoded) = go_form_encode(&body) {
            body = encoded;
        }
    }
    if headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case(b"content-type")
            && v.windows(20).any(|w| w == b"multipart/form-data;")
    }) {
        let mut crlf = Vec::with_capacity(body.len());
        for &b in &body {
            if b == b'\n' {
                crlf.extend_from_slice(b"\r\n");
            } else {
                crlf.push(b);
            }
        }
        body = crlf;
    }
    if autocomplete {
        if !has(b"connection", &headers) {
            headers.push((b"Connection".to_vec(), b"close".to_vec()));
        }
        let body_method = method.starts_with("POST")
            || method.contains("PUT")
            || method.contains("PATCH")
            || method.ends_with("DELETE");
        if !has(b"content-length", &headers) && (!body.is_empty() || body_method) {
            headers.push((
                b"Content-Length".to_vec(),
                body.len().to_string().into_bytes(),
            ));
        }
    }
    Request {
        method: method.into_bytes(),
        uri: get("uri").unwrap_or_else(|| "/".into()).into_bytes(),
        version: get("version")
            .unwrap_or_else(|| "HTTP/1.1".into())
            .into_bytes(),
        headers,
        body,
    }
}

/// go-ftw url-encodes `key=value` pairs of a form body that is not encoded yet (when
/// decoding it would change nothing); `None` leaves the body as it is.
fn go_form_encode(data: &[u8]) -> Option<Vec<u8>> {
    // Would Go's QueryUnescape change it, or fail on it?
    // Go's QueryUnescape changes any `+` or `%XX` and fails on a bad `%`; either way
    // the body is left alone.
    if data.iter().any(|&b| b == b'+' || b == b'%') {
        return None;
    }
    let escape = |s: &[u8], out: &mut Vec<u8>| {
        for &b in s {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b),
                b' ' => out.push(b'+'),
                _ => out.extend_from_slice(format!("%{b:02X}").as_bytes()),
            }
        }
    };
    let mut out = Vec::with_capacity(data.len() * 2);
    for (n, token) in data.split(|&b| b == b'&').enumerate() {
        if n > 0 {
            out.push(b'&');
        }
        match token.iter().position(|&b| b == b'=') {
            Some(p) => {
                escape(&token[..p], &mut out);
                out.push(b'=');
                escape(&token[p + 1..], &mut out);
            }
            None => escape(token, &mut out),
        }
    }
    Some(out)
}

/// Header name/value pairs.
type Headers = Vec<(Vec<u8>, Vec<u8>)>;

/// The albedo backend's answer to a request: 200, or what `/reflect` asks for.
fn response(req: &Request) -> (u16, Headers, Vec<u8>) {
    if req.uri.starts_with(b"/reflect")
        && let Ok(spec) = serde_json::from_slice::<serde_json::Value>(&req.body)
    {
        let status = spec
            .get("status")
            .and_then(|s| s.as_u64())
            .filter(|&s| s > 0)
            .unwrap_or(200) as u16;
        let mut headers = Vec::new();
        if let Some(h) = spec.get("headers").and_then(|h| h.as_object()) {
            for (k, v) in h {
                headers.push((
                    k.as_bytes().to_vec(),
                    v.as_str().unwrap_or("").as_bytes().to_vec(),
                ));
            }
        }
        let mut body = spec
            .get("body")
            .and_then(|b| b.as_str())
            .unwrap_or("")
            .as_bytes()
            .to_vec();
        if body.is_empty()
            && let Some(e) = spec.get("encodedBody").and_then(|b| b.as_str())
        {
            body = base64::engine::general_purpose::STANDARD
                .decode(e)
                .unwrap_or_default();
        }
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(b"content-type"))
        {
            headers.push((
                b"Content-Type".to_vec(),
                b"text/plain; charset=utf-8".to_vec(),
            ));
        }
        return (status, headers, body);
    }
    (
        200,
        vec![(b"Content-Type".to_vec(), b"text/plain".to_vec())],
        Vec::new(),
    )
}

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
