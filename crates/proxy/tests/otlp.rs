//! OpenTelemetry export (`[otlp]`) against a real OTLP receiver: the
//! OpenTelemetry Collector's own `otlpreceiver`, built from tests/otlp (Go) and
//! started on a loopback port. A request's span joins its caller's W3C trace, the
//! upstream gets the proxy's span as its parent, spans carry the WAF's decision,
//! log records carry the access lines, and what is queued while the receiver is
//! away arrives once it is back.

mod common;

use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The receiver, built once per test run from tests/otlp with Go.
fn receiver_binary() -> Option<PathBuf> {
    let go = go_tool("building the OTLP receiver (tests/otlp)")?;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = repo.join("target/test-artifacts/otlprecv");
    let status = Command::new(go)
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(repo.join("tests/otlp"))
        .status()
        .expect("go build runs");
    assert!(status.success(), "go build of tests/otlp failed");
    Some(out)
}

/// A running receiver and what it printed.
struct Receiver {
    child: Child,
}

impl Receiver {
    fn start(bin: &Path, addr: SocketAddr, lines: Arc<Mutex<Vec<String>>>) -> Receiver {
        let mut child = Command::new(bin)
            .arg(addr.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the receiver starts");
        let stdout = child.stdout.take().unwrap();
        let ready = Arc::new(Mutex::new(false));
        let (seen, r) = (lines.clone(), ready.clone());
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if l.trim() == "ready" {
                    *r.lock().unwrap() = true;
                } else {
                    seen.lock().unwrap().push(l);
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while !*ready.lock().unwrap() {
            assert!(Instant::now() < deadline, "the receiver never got ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        Receiver { child }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every span (and the log records' bodies) the receiver printed.
fn received(lines: &Mutex<Vec<String>>) -> (Vec<Value>, Vec<String>) {
    let mut spans = Vec::new();
    let mut bodies = Vec::new();
    for l in lines.lock().unwrap().iter() {
        if let Some(j) = l.strip_prefix("traces ") {
            let v: Value = serde_json::from_str(j).unwrap();
            for rs in v["resourceSpans"].as_array().unwrap() {
                assert_eq!(
                    rs["resource"]["attributes"][0]["value"]["stringValue"],
                    "palisade"
                );
                for ss in rs["scopeSpans"].as_array().unwrap() {
                    spans.extend(ss["spans"].as_array().unwrap().iter().cloned());
                }
            }
        } else if let Some(j) = l.strip_prefix("logs ") {
            let v: Value = serde_json::from_str(j).unwrap();
            for rl in v["resourceLogs"].as_array().unwrap() {
                for sl in rl["scopeLogs"].as_array().unwrap() {
                    for r in sl["logRecords"].as_array().unwrap() {
                        bodies.push(r["body"]["stringValue"].as_str().unwrap().to_owned());
                    }
                }
            }
        }
    }
    (spans, bodies)
}

/// A span's attribute, as its JSON value.
fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["key"] == key)
        .map_or(&Value::Null, |a| &a["value"])
}

fn span_for<'a>(spans: &'a [Value], path: &str) -> Option<&'a Value> {
    spans
        .iter()
        .find(|s| attr(s, "url.path")["stringValue"] == path)
}

/// Waits until `ok` holds for what the receiver printed.
fn wait_for(lines: &Mutex<Vec<String>>, what: &str, ok: impl Fn(&[Value], &[String]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (spans, bodies) = received(lines);
        if ok(&spans, &bodies) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not received; spans {spans:#?}, logs {bodies:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_logs_reach_an_otlp_receiver() {
    let Some(bin) = receiver_binary() else { return };
    let lines = Arc::new(Mutex::new(Vec::new()));
    let recv_addr = loopback(free_port());
    let mut receiver = Receiver::start(&bin, recv_addr, lines.clone());

    let backend = Backend::start().await;
    let dir = TempDir::new("otlp");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let extra = format!(
        "{}\n[admin]\naddress = \"{admin}\"\n\n[otlp]\nendpoint = \"http://{recv_addr}\"\nlogs = [\"access\"]\ninterval = \"100ms\"\n",
        rules_toml(r#"SecRule ARGS:q "@contains attack" "id:31,phase:1,deny,status:403""#)
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);

    let r = get(
        listen,
        "/traced?q=fine",
        &format!("traceparent: 00-{TRACE}-{PARENT}-01\r\n"),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(get(listen, "/blocked?q=attack", "").await.status, 403);

    // The upstream's traceparent: the caller's trace, the proxy's span as parent.
    let seen = backend.requests();
    let up = seen
        .iter()
        .find(|s| s.uri.starts_with("/traced"))
        .and_then(|s| s.header("traceparent"))
        .expect("traceparent upstream")
        .to_owned();
    let fields: Vec<&str> = up.split('-').collect();
    assert_eq!(
        (fields[0], fields[1], fields[3]),
        ("00", TRACE, "01"),
        "{up}"
    );
    assert_ne!(fields[2], PARENT, "{up}");

    wait_for(
        &lines,
        "both spans and the access records",
        |spans, bodies| {
            span_for(spans, "/traced").is_some()
                && span_for(spans, "/blocked").is_some()
                && bodies
                    .iter()
                    .any(|b| b.contains("\"uri\":\"/traced?q=fine\""))
                && bodies
                    .iter()
                    .any(|b| b.contains("\"uri\":\"/blocked?q=attack\""))
        },
    );
    let (spans, _) = received(&lines);
    let traced = span_for(&spans, "/traced").unwrap();
    assert_eq!(traced["traceId"], TRACE);
    assert_eq!(traced["parentSpanId"], PARENT);
    assert_eq!(traced["spanId"], fields[2]);
    assert_eq!(traced["kind"], 2, "a server span");
    assert_eq!(attr(traced, "http.request.method")["stringValue"], "GET");
    assert_eq!(attr(traced, "http.response.status_code")["intValue"], "200");
    assert_eq!(attr(traced, "palisade.action")["stringValue"], "pass");
    assert_eq!(attr(traced, "url.query")["stringValue"], "q=fine");
    assert!(attr(traced, "palisade.phase1.us")["intValue"].is_string());
    let blocked = span_for(&spans, "/blocked").unwrap();
    assert_ne!(blocked["traceId"], TRACE, "a new trace without traceparent");
    assert!(
        blocked.get("parentSpanId").is_none_or(|p| p == ""),
        "{blocked}"
    );
    assert_eq!(attr(blocked, "palisade.action")["stringValue"], "deny");
    assert_eq!(attr(blocked, "palisade.blocked")["boolValue"], true);
    assert_eq!(attr(blocked, "palisade.rule_id")["intValue"], "31");
    assert_eq!(
        attr(blocked, "palisade.rule_ids")["arrayValue"]["values"][0]["intValue"],
        "31"
    );

    // The receiver goes away: requests do not wait, spans stay queued.
    receiver.stop();
    for i in 0..5 {
        assert_eq!(get(listen, &format!("/outage-{i}"), "").await.status, 200);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(admin, "palisade_otlp_errors_total").await < 1.0 {
        assert!(Instant::now() < deadline, "no failed export was counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(metric(admin, "palisade_otlp_up").await, 0.0);
    assert!(metric(admin, "palisade_otlp_queued").await >= 5.0);

    // Back: the queued spans and records arrive.
    let _receiver = Receiver::start(&bin, recv_addr, lines.clone());
    wait_for(
        &lines,
        "the spans queued during the outage",
        |spans, bodies| {
            (0..5).all(|i| {
                span_for(spans, &format!("/outage-{i}")).is_some()
                    && bodies
                        .iter()
                        .any(|b| b.contains(&format!("\"uri\":\"/outage-{i}\"")))
            })
        },
    );
    assert_eq!(metric(admin, "palisade_otlp_dropped_total").await, 0.0);
    assert_eq!(metric(admin, "palisade_otlp_up").await, 1.0);
}

#[test]
fn check_refuses_otlp_settings_that_cannot_work() {
    assert_check_refuses(
        "[otlp]\nendpoint = \"https://collector:4318\"\n",
        "https is not supported",
    );
    assert_check_refuses(
        "[otlp]\nendpoint = \"collector:4318\"\n",
        "expected http://HOST:PORT",
    );
    assert_check_refuses(
        "[otlp]\nendpoint = \"http://127.0.0.1:4318\"\nlogs = [\"accesss\"]\n",
        "otlp.logs: \"accesss\"",
    );
}
