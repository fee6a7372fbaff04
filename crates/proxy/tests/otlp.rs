//! OpenTelemetry export (`[otlp]`) against a real OTLP receiver: the
//! OpenTelemetry Collector's own `otlpreceiver`, built from tests/otlp (Go) and
//! started on a loopback port. A request's span joins its caller's W3C trace, the
//! upstream gets the proxy's span as its parent, spans carry the WAF's decision,
//! log records carry the access lines, and what is queued while the receiver is
//! away arrives once it is back. Over https (the receiver's TLS, a CA made here
//! with rcgen), spans and records arrive on one kept connection, and a receiver
//! whose certificate the CA did not sign gets nothing.

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
        Self::start_with(bin, addr, lines, &[])
    }

    /// The receiver serving https with the PEM files `cert` and `key`.
    fn start_tls(
        bin: &Path,
        addr: SocketAddr,
        lines: Arc<Mutex<Vec<String>>>,
        cert: &Path,
        key: &Path,
    ) -> Receiver {
        Self::start_with(bin, addr, lines, &[cert, key])
    }

    fn start_with(
        bin: &Path,
        addr: SocketAddr,
        lines: Arc<Mutex<Vec<String>>>,
        args: &[&Path],
    ) -> Receiver {
        let mut child = Command::new(bin)
            .arg(addr.to_string())
            .args(args)
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

/// A CA, and a certificate for `localhost` (and 127.0.0.1) it signed, written to
/// `dir` as ca.pem, cert.pem and key.pem; and a self-signed certificate for the same
/// names, as other-cert.pem and other-key.pem.
fn write_certificates(dir: &TempDir) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "palisade test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(names.clone())
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    std::fs::write(dir.path("ca.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.path("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.path("key.pem"), key.serialize_pem()).unwrap();
    let other = rcgen::generate_simple_self_signed(names).unwrap();
    std::fs::write(dir.path("other-cert.pem"), other.cert.pem()).unwrap();
    std::fs::write(dir.path("other-key.pem"), other.signing_key.serialize_pem()).unwrap();
}

/// The `[otlp]` section exporting to `https://localhost:PORT` of `recv_addr`,
/// checked against the test's CA.
fn https_otlp(admin: SocketAddr, recv_addr: SocketAddr) -> String {
    format!(
        "[admin]\naddress = \"{admin}\"\n\n[otlp]\nendpoint = \"https://localhost:{}\"\ntls_ca_file = \"ca.pem\"\nlogs = [\"access\"]\ninterval = \"100ms\"\n",
        recv_addr.port()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_and_logs_reach_an_otlp_receiver_over_https_on_one_connection() {
    let Some(bin) = receiver_binary() else { return };
    let dir = TempDir::new("otlps");
    write_certificates(&dir);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let recv_addr = loopback(free_port());
    let _receiver = Receiver::start_tls(
        &bin,
        recv_addr,
        lines.clone(),
        &dir.path("cert.pem"),
        &dir.path("key.pem"),
    );

    let backend = Backend::start().await;
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let _p = Palisade::start(
        &dir,
        &basic_config(listen, backend.addr, &https_otlp(admin, recv_addr)),
        listen,
    );

    // Three rounds, each waited for: at least three exports of spans and records.
    for round in 0..3 {
        let path = format!("/tls-{round}");
        assert_eq!(get(listen, &path, "").await.status, 200);
        wait_for(&lines, &path, |spans, bodies| {
            span_for(spans, &path).is_some()
                && bodies
                    .iter()
                    .any(|b| b.contains(&format!("\"uri\":\"{path}\"")))
        });
    }
    let (spans, _) = received(&lines);
    let span = span_for(&spans, "/tls-0").unwrap();
    assert_eq!(attr(span, "http.response.status_code")["intValue"], "200");
    assert_eq!(metric(admin, "palisade_otlp_up").await, 1.0);
    assert!(metric(admin, "palisade_otlp_spans_exported_total").await >= 3.0);
    assert!(metric(admin, "palisade_otlp_logs_exported_total").await >= 3.0);
    assert_eq!(metric(admin, "palisade_otlp_errors_total").await, 0.0);
    // Every export went over the one connection made first.
    assert_eq!(
        metric(admin, "palisade_otlp_connections_total").await,
        1.0,
        "the connection is kept between exports"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_certificate_the_ca_did_not_sign_is_refused() {
    let Some(bin) = receiver_binary() else { return };
    let dir = TempDir::new("otlps-refused");
    write_certificates(&dir);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let recv_addr = loopback(free_port());
    // Same names, but self-signed: not the CA's.
    let _receiver = Receiver::start_tls(
        &bin,
        recv_addr,
        lines.clone(),
        &dir.path("other-cert.pem"),
        &dir.path("other-key.pem"),
    );

    let backend = Backend::start().await;
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let _p = Palisade::start(
        &dir,
        &basic_config(listen, backend.addr, &https_otlp(admin, recv_addr)),
        listen,
    );
    assert_eq!(get(listen, "/refused", "").await.status, 200);
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(admin, "palisade_otlp_errors_total").await < 1.0 {
        assert!(Instant::now() < deadline, "no failed export was counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(metric(admin, "palisade_otlp_up").await, 0.0);
    assert_eq!(
        metric(admin, "palisade_otlp_spans_exported_total").await,
        0.0
    );
    assert_eq!(metric(admin, "palisade_otlp_connections_total").await, 0.0);
    assert!(metric(admin, "palisade_otlp_queued").await >= 1.0);
    // The receiver never accepted an export.
    std::thread::sleep(Duration::from_millis(300));
    let (spans, bodies) = received(&lines);
    assert!(
        spans.is_empty() && bodies.is_empty(),
        "{spans:?} {bodies:?}"
    );
    let log = std::fs::read_to_string(dir.path("stderr.log")).unwrap();
    assert!(
        log.contains("[otlp]") && log.contains("certificate"),
        "the refusal is logged: {log}"
    );
}

#[test]
fn check_refuses_otlp_settings_that_cannot_work() {
    assert_check_refuses(
        "[otlp]\nendpoint = \"ftp://collector:4318\"\n",
        "expected http://HOST:PORT or https://HOST:PORT",
    );
    assert_check_refuses(
        "[otlp]\nendpoint = \"collector:4318\"\n",
        "expected http://HOST:PORT",
    );
    assert_check_refuses("[otlp]\nendpoint = \"https:///v1\"\n", "otlp.endpoint");
    assert_check_refuses(
        "[otlp]\nendpoint = \"https://collector:4318\"\ntls_ca_file = \"/nonexistent/ca.pem\"\n",
        "otlp.tls_ca_file /nonexistent/ca.pem",
    );
    let dir = TempDir::new("otlp-empty-ca");
    let empty = dir.path("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    assert_check_refuses(
        &format!(
            "[otlp]\nendpoint = \"https://collector:4318\"\ntls_ca_file = \"{}\"\n",
            empty.display()
        ),
        &format!("otlp.tls_ca_file {}: no certificate", empty.display()),
    );
    assert_check_refuses(
        "[otlp]\nendpoint = \"http://collector:4318\"\ntls_ca_file = \"/etc/ssl/ca.pem\"\n",
        "otlp.tls_ca_file is for https:// endpoints",
    );
    assert_check_refuses(
        "[otlp]\nendpoint = \"http://127.0.0.1:4318\"\nlogs = [\"accesss\"]\n",
        "otlp.logs: \"accesss\"",
    );
}
