//! Limits never drop or truncate request data silently: each one sets the variables
//! that say so, and the built-in check (`SecPalisadeLimitAction`, default Block)
//! refuses the transaction even when no loaded rule looks at them.

use engine::{BodyAppend, Intervention, Ruleset, RulesetBuilder, Transaction, TxContext};
use std::sync::Arc;

/// A rule that blocks a tautology in any argument, the attack the limits must not hide.
const SQLI: &str = r#"SecRule ARGS "@rx (?i)' or '" "id:1,phase:2,deny,status:403,log,msg:'SQLi'""#;

/// Records the limit variables in TX at the end of phase 2 (and in phase 1 for the
/// query string flag), for the tests to read.
const RECORD: &str = r#"
SecAction "id:91,phase:1,pass,nolog,setvar:tx.q=%{tx.msc_arguments_limit_exceeded}"
SecAction "id:92,phase:2,pass,nolog,setvar:tx.e=%{REQBODY_ERROR},setvar:tx.m=%{REQBODY_ERROR_MSG},setvar:tx.p=%{REQBODY_PROCESSOR_ERROR},setvar:tx.i=%{INBOUND_DATA_ERROR},setvar:tx.n=%{tx.msc_arguments_limit_exceeded}"
"#;

const JSON_ON: &str = r#"SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:2,phase:1,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON""#;
const XML_ON: &str = r#"SecRule REQUEST_HEADERS:Content-Type "@rx ^(?:application|text)/xml" "id:3,phase:1,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML""#;

fn ruleset(settings: &str) -> Arc<Ruleset> {
    let text = format!(
        "SecRuleEngine On\nSecRequestBodyAccess On\n{settings}\n{JSON_ON}\n{XML_ON}\n{SQLI}\n{RECORD}"
    );
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    b.add_text(&text, "limits.conf")
        .unwrap_or_else(|e| panic!("{e}"));
    Arc::new(b.build().unwrap_or_else(|e| panic!("{e}")))
}

/// What a request came to.
struct Outcome {
    /// The result of each append, in order.
    appends: Vec<BodyAppend>,
    /// The intervention, if any (from phase 1, the body, or phase 2).
    intervention: Option<Intervention>,
    tx: Transaction,
    lines: Vec<String>,
}

impl Outcome {
    fn tx(&self, name: &str) -> String {
        String::from_utf8_lossy(self.tx.tx_var(name).unwrap_or(b"")).into_owned()
    }
    fn status(&self) -> Option<u16> {
        self.intervention.as_ref().map(|i| i.status)
    }
    fn line_with(&self, needle: &str) -> &str {
        self.lines
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no log line with {needle:?} in {:#?}", self.lines))
    }
}

/// Runs a request through phases 1, 2 and 5 as the server does: the body is given
/// in chunks of `chunk` bytes while the engine wants it, and a rejecting append
/// ends the transaction.
fn send(rs: &Arc<Ruleset>, method: &str, uri: &str, ctype: &str, body: &[u8]) -> Outcome {
    let mut tx = Transaction::new(rs.clone(), TxContext::default());
    tx.set_request_line(method.as_bytes(), uri.as_bytes(), b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    if !ctype.is_empty() {
        tx.add_request_header(b"Content-Type", ctype.as_bytes());
    }
    let mut appends = Vec::new();
    let mut intervention = tx.process_request_headers();
    if intervention.is_none() {
        let mut rejected = false;
        for chunk in body.chunks(16 * 1024) {
            let r = tx.append_request_body(chunk);
            appends.push(r);
            match r {
                BodyAppend::Ok => {}
                BodyAppend::LimitReached { reject: true } => {
                    rejected = true;
                    break;
                }
                BodyAppend::LimitReached { reject: false } => break,
            }
        }
        if rejected {
            intervention = tx.intervention().cloned();
        } else {
            intervention = tx.process_request_body();
        }
    }
    tx.process_logging();
    let lines = tx
        .events()
        .filter_map(engine::Event::into_log_line)
        .collect::<Vec<_>>();
    Outcome {
        appends,
        intervention,
        tx,
        lines,
    }
}

fn many_args(n: usize) -> String {
    (0..n).map(|i| format!("a{i}=1&")).collect()
}

const ATTACK: &str = "id=1'%20OR%20'1'='1";

#[test]
fn query_arguments_over_the_limit_are_blocked_in_phase_1() {
    let rs = ruleset("SecArgumentsLimit 1000");
    // The attack as argument 1,001: before, it was dropped and the request passed.
    let uri = format!("/?{}{ATTACK}", many_args(1000));
    let out = send(&rs, "GET", &uri, "", b"");
    let i = out.intervention.as_ref().expect("blocked");
    assert_eq!(i.status, 400);
    assert_eq!(i.rule_id, None);
    assert!(
        i.message
            .as_deref()
            .unwrap()
            .contains("SecArgumentsLimit (1000)"),
        "{i:?}"
    );
    let line = out.line_with("Palisade limit check");
    assert!(
        line.starts_with("ModSecurity: Access denied with code 400 (phase 1). "),
        "{line}"
    );
    assert!(line.contains("more arguments than SecArgumentsLimit (1000) in the query string"));
    assert!(line.contains("TX:MSC_ARGUMENTS_LIMIT_EXCEEDED"), "{line}");
    // Phase 1 rules saw the flag.
    assert_eq!(out.tx("q"), "1");
    // At the limit nothing is dropped, nothing is flagged.
    let uri = format!("/?{}", many_args(1000));
    let out = send(&rs, "GET", &uri, "", b"");
    assert_eq!(out.status(), None, "{:?}", out.lines);
    assert_eq!(out.tx("q"), "");
}

#[test]
fn log_mode_flags_and_logs_without_blocking() {
    let rs = ruleset("SecArgumentsLimit 3\nSecPalisadeLimitAction Log");
    let out = send(&rs, "GET", "/?a=1&b=2&c=3&d=4", "", b"");
    assert_eq!(out.status(), None);
    let line = out.line_with("Palisade limit check");
    assert!(line.starts_with("ModSecurity: Warning. "), "{line}");
    assert_eq!(out.tx("n"), "1");
    // DetectionOnly also only logs, whatever the action.
    let rs = ruleset("SecRuleEngine DetectionOnly\nSecArgumentsLimit 3");
    let out = send(&rs, "GET", "/?a=1&b=2&c=3&d=4", "", b"");
    assert_eq!(out.status(), None);
    assert!(out.line_with("Palisade limit check").contains("Warning"));
}

#[test]
fn the_check_respects_allow_and_the_engine_switch() {
    let rs = ruleset(
        "SecArgumentsLimit 3\nSecRule REQUEST_FILENAME \"@streq /bulk\" \"id:50,phase:1,allow,nolog\"",
    );
    assert_eq!(send(&rs, "GET", "/bulk?a&b&c&d", "", b"").status(), None);
    assert_eq!(
        send(&rs, "GET", "/other?a&b&c&d", "", b"").status(),
        Some(400)
    );
    let rs = ruleset(
        "SecArgumentsLimit 3\nSecRule REQUEST_FILENAME \"@streq /off\" \"id:50,phase:1,pass,nolog,ctl:ruleEngine=Off\"",
    );
    assert_eq!(send(&rs, "GET", "/off?a&b&c&d", "", b"").status(), None);
}

#[test]
fn urlencoded_body_arguments_over_the_limit_set_reqbody_error() {
    let rs = ruleset("SecArgumentsLimit 1000\nSecPalisadeLimitAction Log");
    let body = format!("{}{ATTACK}", many_args(1000));
    let out = send(
        &rs,
        "POST",
        "/",
        "application/x-www-form-urlencoded",
        body.as_bytes(),
    );
    assert_eq!(out.status(), None);
    assert_eq!(out.tx("e"), "1");
    assert_eq!(out.tx("p"), "0", "not a processor error");
    assert!(
        out.tx("m").contains("SecArgumentsLimit (1000)"),
        "{}",
        out.tx("m")
    );
    assert_eq!(out.tx("n"), "1");
    // Blocked by default.
    let rs = ruleset("SecArgumentsLimit 1000");
    let out = send(
        &rs,
        "POST",
        "/",
        "application/x-www-form-urlencoded",
        body.as_bytes(),
    );
    assert_eq!(out.status(), Some(400));
    let line = out.line_with("Palisade limit check");
    assert!(
        line.contains("(phase 2)") && line.contains("REQBODY_ERROR"),
        "{line}"
    );
    // The query string and the body share the budget.
    let rs = ruleset("SecArgumentsLimit 4");
    let out = send(
        &rs,
        "POST",
        "/?a=1&b=2",
        "application/x-www-form-urlencoded",
        b"c=3&d=4&e=5",
    );
    assert_eq!(out.status(), Some(400));
    let out = send(
        &rs,
        "POST",
        "/?a=1&b=2",
        "application/x-www-form-urlencoded",
        b"c=3&d=4",
    );
    assert_eq!(out.status(), None);
}

#[test]
fn a_rule_that_checks_reqbody_error_decides_first_with_its_own_id() {
    let rs = ruleset(
        "SecArgumentsLimit 2\nSecRule REQBODY_ERROR \"!@eq 0\" \"id:200002,phase:2,t:none,log,deny,status:400,msg:'Failed to parse request body.',logdata:'%{reqbody_error_msg}'\"",
    );
    let out = send(
        &rs,
        "POST",
        "/",
        "application/x-www-form-urlencoded",
        b"a=1&b=2&c=3",
    );
    let i = out.intervention.expect("blocked");
    assert_eq!((i.status, i.rule_id), (400, Some(200002)));
    assert!(!out.lines.iter().any(|l| l.contains("Palisade limit check")));
}

#[test]
fn a_logging_rule_on_the_condition_makes_the_check_quiet_when_nothing_is_blocked() {
    let rule_200002 = "SecRule REQBODY_ERROR \"!@eq 0\" \"id:200002,phase:2,t:none,log,deny,status:400,msg:'Failed to parse request body.'\"";
    let body: &[u8] = b"a=1&b=2&c=3";
    let ctype = "application/x-www-form-urlencoded";
    // DetectionOnly: the rule's warning reports the condition; no second line.
    let rs = ruleset(&format!(
        "SecRuleEngine DetectionOnly\nSecArgumentsLimit 2\n{rule_200002}"
    ));
    let out = send(&rs, "POST", "/", ctype, body);
    assert_eq!(out.status(), None);
    assert!(out.line_with("200002").contains("Warning"));
    assert!(
        !out.lines.iter().any(|l| l.contains("Palisade limit check")),
        "{:#?}",
        out.lines
    );
    // A rule that matches without logging reports nothing: the check still logs.
    let quiet = rule_200002.replace(",log,", ",nolog,");
    let rs = ruleset(&format!(
        "SecRuleEngine DetectionOnly\nSecArgumentsLimit 2\n{quiet}"
    ));
    let out = send(&rs, "POST", "/", ctype, body);
    assert!(out.line_with("Palisade limit check").contains("Warning"));
    // Engine On: a rule that only logs and passes does not stop the built-in block.
    let passing = rule_200002.replace(",deny,status:400,", ",pass,");
    let rs = ruleset(&format!("SecArgumentsLimit 2\n{passing}"));
    let out = send(&rs, "POST", "/", ctype, body);
    assert_eq!(out.status(), Some(400));
    assert!(
        out.line_with("Palisade limit check")
            .contains("Access denied")
    );
}

#[test]
fn json_over_the_argument_or_depth_limit_is_blocked() {
    let rs = ruleset("SecArgumentsLimit 3\nSecRequestBodyJsonDepthLimit 4");
    let out = send(
        &rs,
        "POST",
        "/",
        "application/json",
        br#"{"a":1,"b":2,"c":3,"id":"1' OR '1'='1"}"#,
    );
    assert_eq!(out.status(), Some(400));
    assert_eq!(out.tx("p"), "1");
    assert_eq!(out.tx("n"), "1");
    assert!(
        out.line_with("Palisade limit check")
            .contains("more arguments than SecArgumentsLimit (3)")
    );
    let out = send(
        &rs,
        "POST",
        "/",
        "application/json",
        br#"[[[[["1' OR '1'='1"]]]]]"#,
    );
    assert_eq!(out.status(), Some(400));
    assert!(
        out.line_with("Palisade limit check")
            .contains("SecRequestBodyJsonDepthLimit (4)")
    );
    assert!(
        out.tx("m").contains("depth limit exceeded"),
        "{}",
        out.tx("m")
    );
}

#[test]
fn unparsable_bodies_are_blocked_without_a_rule_for_them() {
    let rs = ruleset("");
    let attack = br#"{"id":"1' OR '1'='1"}"#;
    // Parsed: the rule sees the payload.
    let out = send(&rs, "POST", "/", "application/json", attack);
    assert_eq!(out.intervention.unwrap().rule_id, Some(1));
    // A byte-order mark, invalid UTF-8 or bad syntax in front of it: the body is not
    // parsed, and the built-in check refuses it.
    for prefix in [&b"\xEF\xBB\xBF"[..], b"\xff", b"garbage"] {
        let mut body = prefix.to_vec();
        body.extend_from_slice(attack);
        let out = send(&rs, "POST", "/", "application/json", &body);
        assert_eq!(out.status(), Some(400), "prefix {prefix:?}");
        assert_eq!(out.tx("e"), "1");
        assert!(
            out.line_with("Palisade limit check")
                .contains("the request body could not be parsed")
        );
    }
    let out = send(&rs, "POST", "/", "application/xml", b"<r>unclosed");
    assert_eq!(out.status(), Some(400));
}

fn multipart(fields: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, file, value) in fields {
        body.extend_from_slice(b"--XyZ\r\n");
        match file {
            Some(f) => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{f}\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        body.extend_from_slice(value);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"--XyZ--\r\n");
    body
}

const MP: &str = "multipart/form-data; boundary=XyZ";

#[test]
fn multipart_arguments_and_parts_over_the_limits_are_blocked() {
    let rs = ruleset("SecArgumentsLimit 3");
    let body = multipart(&[
        ("a", None, b"1"),
        ("b", None, b"2"),
        ("c", None, b"3"),
        ("id", None, b"1' OR '1'='1"),
    ]);
    let out = send(&rs, "POST", "/", MP, &body);
    assert_eq!(out.status(), Some(400));
    assert_eq!(out.tx("n"), "1");
    // More parts than the part limit (the larger of the argument and file limits).
    let fields: Vec<(String, Option<&str>, &[u8])> = (0..5)
        .map(|i| (format!("f{i}"), Some("x.bin"), &b"data"[..]))
        .collect();
    let fields: Vec<_> = fields
        .iter()
        .map(|(n, f, v)| (n.as_str(), *f, *v))
        .collect();
    let rs = ruleset("SecArgumentsLimit 3\nSecUploadFileLimit 4");
    let out = send(&rs, "POST", "/", MP, &multipart(&fields));
    assert_eq!(out.status(), Some(400));
    assert!(out.tx("m").contains("Too many parts"), "{}", out.tx("m"));
    assert!(
        out.line_with("Palisade limit check")
            .contains("part limit (4")
    );
}

#[test]
fn no_files_limit_rejects_a_large_urlencoded_body_with_413() {
    let rs = ruleset("SecRequestBodyNoFilesLimit 131072");
    // 200 KB of arguments with the attack at the end: before, it was accepted.
    let mut body = "x=".to_owned() + &"a".repeat(200_000);
    body.push('&');
    body.push_str(ATTACK);
    let out = send(
        &rs,
        "POST",
        "/",
        "application/x-www-form-urlencoded",
        body.as_bytes(),
    );
    assert_eq!(
        out.appends.last(),
        Some(&BodyAppend::LimitReached { reject: true })
    );
    assert_eq!(out.status(), Some(413));
    let line = out.line_with("Palisade limit check");
    assert!(line.contains("Access denied with code 413"), "{line}");
    assert!(
        line.contains("SecRequestBodyNoFilesLimit (131072 bytes)"),
        "{line}"
    );
    // The buffered body stopped at the limit.
    assert_eq!(out.tx.intervention().map(|i| i.status), Some(413));
    // Within the limit it passes.
    let out = send(
        &rs,
        "POST",
        "/",
        "application/x-www-form-urlencoded",
        &body.as_bytes()[..100_000],
    );
    assert_eq!(out.status(), None);
}

#[test]
fn body_limits_refuse_only_when_the_engine_is_on() {
    let body = vec![b'a'; 3000];
    for (mode, reject) in [("On", true), ("DetectionOnly", false)] {
        let rs = ruleset(&format!("SecRuleEngine {mode}\nSecRequestBodyLimit 1000"));
        let out = send(&rs, "POST", "/", "text/plain", &body);
        assert_eq!(
            out.appends.last(),
            Some(&BodyAppend::LimitReached { reject }),
            "{mode}"
        );
    }
}

#[test]
fn the_audit_record_carries_the_check() {
    let rs = ruleset("SecArgumentsLimit 2\nSecAuditEngine RelevantOnly");
    let out = send(&rs, "GET", "/?a&b&c", "", b"");
    let record = out.tx.audit_record().expect("recorded").text;
    assert!(
        record.contains("Palisade limit check: more arguments than SecArgumentsLimit (2)"),
        "{record}"
    );
    assert!(record.contains("palisade/limit"), "{record}");
}

#[test]
fn no_files_limit_under_process_partial_sets_the_variables() {
    let settings = "SecRequestBodyNoFilesLimit 1000\nSecRequestBodyLimitAction ProcessPartial";
    let body = format!("x={}&{ATTACK}", "a".repeat(2000));
    let rs = ruleset(&format!("{settings}\nSecPalisadeLimitAction Log"));
    let out = send(&rs, "POST", "/", "application/json", body.as_bytes());
    assert_eq!(
        out.appends.last(),
        Some(&BodyAppend::LimitReached { reject: false })
    );
    assert_eq!(out.tx("e"), "1");
    assert_eq!(out.tx("i"), "1");
    // A processor's error (this JSON was cut short) comes first in the message.
    assert!(
        out.tx("m").starts_with("JSON parsing error"),
        "{}",
        out.tx("m")
    );
    // Otherwise ModSecurity v3's message.
    let out = send(
        &rs,
        "POST",
        "/",
        "application/x-www-form-urlencoded",
        body.as_bytes(),
    );
    assert_eq!(
        out.tx("m"),
        "Request body excluding files is bigger than the maximum expected."
    );
    assert_eq!(out.status(), None);
    // The built-in check refuses what was cut, by default.
    let rs = ruleset(settings);
    let out = send(
        &rs,
        "POST",
        "/",
        "application/x-www-form-urlencoded",
        body.as_bytes(),
    );
    assert_eq!(out.status(), Some(400));
    assert!(
        out.line_with("Palisade limit check")
            .contains("SecRequestBodyNoFilesLimit (1000 bytes)")
    );
}

#[test]
fn no_files_limit_counts_multipart_fields_but_not_files() {
    let rs = ruleset("SecRequestBodyNoFilesLimit 1000");
    let file = vec![b'f'; 50_000];
    let ok = multipart(&[("name", None, b"alice"), ("upload", Some("a.bin"), &file)]);
    let out = send(&rs, "POST", "/", MP, &ok);
    assert_eq!(out.status(), None, "{:?}", out.lines);
    let big = vec![b'v'; 2000];
    let out = send(&rs, "POST", "/", MP, &multipart(&[("name", None, &big)]));
    assert_eq!(out.status(), Some(413));
    // Refused before the rules of phase 2 ran.
    assert_eq!(out.tx("i"), "");
    assert!(
        out.line_with("Palisade limit check")
            .contains("SecRequestBodyNoFilesLimit")
    );
    // Under DetectionOnly nothing is refused.
    let rs = ruleset("SecRuleEngine DetectionOnly\nSecRequestBodyNoFilesLimit 1000");
    let out = send(&rs, "POST", "/", MP, &multipart(&[("name", None, &big)]));
    assert_eq!(out.status(), None);
    assert_eq!(out.tx("e"), "1");
    assert_eq!(out.tx("i"), "1");
}

#[test]
fn xml_internal_entities_are_inspected_expanded() {
    let rs = ruleset("");
    let xml_rule =
        format!("{XML_ON}\nSecRule XML:/* \"@rx (?i)' or '\" \"id:4,phase:2,deny,status:403,log\"");
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    b.add_text(
        &format!("SecRuleEngine On\nSecRequestBodyAccess On\n{xml_rule}"),
        "x.conf",
    )
    .unwrap();
    let xml_rs = Arc::new(b.build().unwrap());
    let doc = br#"<!DOCTYPE r [<!ENTITY q "1' OR '1'='1">]><r>&q;</r>"#;
    let out = send(&xml_rs, "POST", "/", "application/xml", doc);
    assert_eq!(
        out.intervention.map(|i| (i.status, i.rule_id)),
        Some((403, Some(4)))
    );
    // An expansion bomb is a body error, refused by the built-in check.
    let mut dtd = String::from("<!ENTITY l0 \"lol\">");
    for n in 1..10 {
        dtd.push_str(&format!(
            "<!ENTITY l{n} \"{}\">",
            format!("&l{};", n - 1).repeat(10)
        ));
    }
    let bomb = format!("<!DOCTYPE r [{dtd}]><r>&l9;</r>");
    let out = send(&rs, "POST", "/", "application/xml", bomb.as_bytes());
    assert_eq!(out.status(), Some(400));
    assert!(
        out.tx("m").contains("entity expansion over"),
        "{}",
        out.tx("m")
    );
}

#[test]
fn the_directive_is_checked() {
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    let added = b
        .add_text("SecPalisadeLimitAction Maybe", "bad.conf")
        .map(|_| ());
    let e = match added {
        Err(e) => e.to_string(),
        Ok(()) => b.build().map(|_| ()).unwrap_err().to_string(),
    };
    assert!(
        e.contains("SecPalisadeLimitAction: expected Block or Log"),
        "{e}"
    );
}
