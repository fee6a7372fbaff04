//! Behaviours matched to libmodsecurity v3 where the differential harness
//! (`scripts/differential`, docs/modsecurity-differences.md) found Palisade apart:
//! REQUEST_BODY for every body processor (a setting), `noauditlog` and the error log,
//! `SecUnicodeMapFile` in `t:urlDecodeUni`, and body processor failures.

use engine::{RulesetBuilder, Transaction, TxContext};
use std::sync::Arc;

fn ruleset(text: &str) -> Arc<engine::Ruleset> {
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    b.add_text(text, "test.conf")
        .unwrap_or_else(|e| panic!("{e}"));
    Arc::new(b.build().unwrap_or_else(|e| panic!("{e}")))
}

/// Runs a request through phases 1, 2 and 5; returns the transaction.
fn request(
    rs: &Arc<engine::Ruleset>,
    method: &str,
    uri: &str,
    ct: Option<&str>,
    body: &[u8],
) -> Transaction {
    let mut tx = Transaction::new(rs.clone(), TxContext::default());
    tx.set_request_line(method.as_bytes(), uri.as_bytes(), b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    if let Some(ct) = ct {
        tx.add_request_header(b"Content-Type", ct.as_bytes());
    }
    tx.add_request_header(b"Content-Length", body.len().to_string().as_bytes());
    let mut i = tx.process_request_headers();
    if i.is_none() && tx.request_body_wanted() {
        let _ = tx.append_request_body(body);
    }
    if i.is_none() {
        i = tx.process_request_body();
    }
    let _ = i;
    tx.process_logging();
    tx
}

/// The rule ids of the transaction's error-log lines.
fn logged_ids(tx: &mut Transaction) -> Vec<u32> {
    tx.events()
        .filter_map(engine::Event::into_log_line)
        .collect::<Vec<_>>()
        .iter()
        .filter_map(|l| {
            let at = l.find("[id \"")? + 5;
            let end = l[at..].find('"')? + at;
            l[at..end].parse().ok()
        })
        .collect()
}

const MULTIPART: &[u8] =
    b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello\r\n--XyZ--\r\n";

fn body_rules(setting: &str) -> Arc<engine::Ruleset> {
    ruleset(&format!(
        "SecRuleEngine DetectionOnly\nSecRequestBodyAccess On\n{setting}\n\
         SecRule REQUEST_HEADERS:Content-Type \"@contains xml\" \
         \"id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=XML\"\n\
         SecRule REQUEST_BODY \"@rx .\" \"id:10,phase:2,pass,log\"\n\
         SecRule &REQUEST_BODY \"@eq 0\" \"id:11,phase:2,pass,log\""
    ))
}

#[test]
fn request_body_all_fills_it_for_every_processor() {
    let rs = body_rules("SecPalisadeRequestBodyVariable All");
    let cases: [(Option<&str>, &[u8]); 6] = [
        (Some("multipart/form-data; boundary=XyZ"), MULTIPART),
        (Some("text/xml"), b"<a>x</a>"),
        (Some("application/x-www-form-urlencoded"), b"a=b"),
        (Some("text/plain"), b"just text"),
        (Some("application/x-unknown"), b"\x01\x02"),
        (None, b"no type"),
    ];
    for (ct, body) in cases {
        let mut tx = request(&rs, "POST", "/", ct, body);
        assert_eq!(logged_ids(&mut tx), [10], "{ct:?}");
    }
    // An empty body leaves REQUEST_BODY unset, as in v3.
    let mut tx = request(&rs, "POST", "/", Some("text/plain"), b"");
    assert_eq!(logged_ids(&mut tx), [11]);
}

#[test]
fn request_body_default_follows_the_processor() {
    let rs = body_rules("");
    let cases: [(Option<&str>, &[u8], bool); 4] = [
        (Some("multipart/form-data; boundary=XyZ"), MULTIPART, false),
        (Some("text/xml"), b"<a>x</a>", false),
        (Some("application/x-www-form-urlencoded"), b"a=b", true),
        (Some("text/plain"), b"just text", false),
    ];
    for (ct, body, seen) in cases {
        let mut tx = request(&rs, "POST", "/", ct, body);
        let want: &[u32] = if seen { &[10] } else { &[11] };
        assert_eq!(logged_ids(&mut tx), want, "{ct:?}");
    }
    // ctl:forceRequestBodyVariable still exposes any body.
    let rs = body_rules(
        "SecRule REQUEST_METHOD \"@streq POST\" \"id:2,phase:1,pass,nolog,ctl:forceRequestBodyVariable=On\"",
    );
    let mut tx = request(&rs, "POST", "/", Some("text/plain"), b"just text");
    assert_eq!(logged_ids(&mut tx), [10]);
}

#[test]
fn settings_reject_unknown_values() {
    for (text, want) in [
        (
            "SecPalisadeRequestBodyVariable Sometimes",
            "SecPalisadeRequestBodyVariable: expected Urlencoded or All",
        ),
        (
            "SecPalisadeNoAuditLog Never",
            "SecPalisadeNoAuditLog: expected AuditLog or AllLogs",
        ),
    ] {
        let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
        let added = b.add_text(text, "bad.conf").map(|_| ());
        let e = match added {
            Err(e) => e.to_string(),
            Ok(()) => b.build().map(|_| ()).unwrap_err().to_string(),
        };
        assert!(e.contains(want), "{e}");
    }
}

/// Whether the transaction's audit record (RelevantOnly) exists, and its H part's rule
/// ids.
fn audit_ids(tx: &Transaction) -> Option<Vec<String>> {
    let rec = tx.audit_record()?.text;
    let v: serde_json::Value = serde_json::from_str(&rec).expect("JSON audit record");
    let msgs = v["transaction"]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Some(
        msgs.iter()
            .map(|m| m["details"]["ruleId"].as_str().unwrap_or("").to_string())
            .collect(),
    )
}

fn log_flag_rules(setting: &str, actions: &str) -> Arc<engine::Ruleset> {
    ruleset(&format!(
        "{setting}\nSecRuleEngine DetectionOnly\nSecAuditEngine RelevantOnly\nSecAuditLogFormat JSON\n\
         SecAuditLogParts ABHZ\n\
         SecRule ARGS \"@rx x\" \"id:1,phase:1,pass,{actions},chain\"\n\
         SecRule MATCHED_VARS_NAMES \"@streq ARGS:a\" \"setvar:tx.seen=%{{MATCHED_VAR}}\""
    ))
}

#[test]
fn noauditlog_concerns_the_audit_log_only_by_default() {
    // ModSecurity v2's reading, which CRS v4's tests expect (980170 has log,noauditlog).
    let cases: [(&str, bool, bool); 5] = [
        ("log,noauditlog", true, false),
        ("noauditlog,log", true, false),
        ("log,auditlog", true, true),
        ("nolog,auditlog", false, true),
        ("auditlog,nolog", false, false),
    ];
    for (actions, line, relevant) in cases {
        let rs = log_flag_rules("", actions);
        let mut tx = request(&rs, "GET", "/?a=x", None, b"");
        assert_eq!(logged_ids(&mut tx).contains(&1), line, "{actions}");
        assert_eq!(audit_ids(&tx).is_some(), relevant, "{actions}");
    }
}

#[test]
fn noauditlog_writes_no_error_log_line_as_in_v3() {
    // The last of log, nolog, auditlog and noauditlog decides, as in v3: noauditlog
    // drops the line and the audit message; the match stays visible to rules.
    let cases: [(&str, bool, bool); 6] = [
        ("log,noauditlog", false, false),
        ("noauditlog", false, false),
        ("noauditlog,log", true, false),
        ("log,auditlog", true, true),
        ("nolog,auditlog", true, true),
        ("auditlog,nolog", false, false),
    ];
    for (actions, line, relevant) in cases {
        let rs = log_flag_rules("SecPalisadeNoAuditLog AllLogs", actions);
        let mut tx = request(&rs, "GET", "/?a=x", None, b"");
        let ids = logged_ids(&mut tx);
        assert_eq!(ids.contains(&1), line, "{actions}: {ids:?}");
        // The match stays in MATCHED_VARS for the chain, and its actions run.
        assert_eq!(tx.tx_var("seen"), Some(&b"ARGS:a"[..]), "{actions}");
        let audit = audit_ids(&tx);
        assert_eq!(audit.is_some(), relevant, "{actions}: {audit:?}");
    }
    // With a line but no audit relevance of its own, the message is in the record of a
    // transaction made relevant by another rule.
    let rs = ruleset(
        "SecPalisadeNoAuditLog AllLogs\nSecRuleEngine DetectionOnly\nSecAuditEngine RelevantOnly\n\
         SecAuditLogFormat JSON\nSecAuditLogParts ABHZ\n\
         SecRule ARGS \"@rx x\" \"id:1,phase:1,pass,noauditlog,log\"\n\
         SecRule ARGS \"@rx x\" \"id:4,phase:1,pass,log\"\n\
         SecRule ARGS \"@rx x\" \"id:5,phase:1,pass,log,noauditlog\"",
    );
    let mut tx = request(&rs, "GET", "/?a=x", None, b"");
    assert_eq!(logged_ids(&mut tx), [1, 4]);
    assert_eq!(audit_ids(&tx), Some(vec!["1".to_string(), "4".to_string()]));
}

/// A directory of its own under the system's temporary directory.
fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("palisade-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

const MAPPING: &str = "(MAC - Roman)\n\n\n1252  (ANSI - Latin I)\n2019:22\n\n\
                       20127 (US-ASCII)\n00a0:20 2018:27 2019:27 ff07:27\n\n20261 (T.61)\n";

#[test]
fn unicode_map_file_maps_url_decode_uni() {
    let dir = scratch_dir("unicodemap");
    std::fs::write(dir.join("unicode.mapping"), MAPPING).unwrap();
    // Debian's modsecurity.conf names the file relative to itself.
    let conf = dir.join("modsecurity.conf");
    std::fs::write(
        &conf,
        "SecRuleEngine DetectionOnly\nSecUnicodeMapFile unicode.mapping 20127\n\
         SecRule ARGS:a \"@rx '\" \"id:2,phase:1,pass,log,t:none,t:urlDecodeUni\"\n",
    )
    .unwrap();
    let load = |path: &std::path::Path| {
        let mut b = RulesetBuilder::new(Arc::new(seclang::FsSource));
        b.add_file(path)
            .map(|_| ())
            .and_then(|()| b.build())
            .map(Arc::new)
    };
    let rs = load(&conf).unwrap_or_else(|e| panic!("{e}"));
    // The query string decodes %25 to `%`; urlDecodeUni then maps U+2019 to `'`.
    for (uri, hit) in [
        ("/?a=%25u2019x", true),
        ("/?a=%25uFF07", true),
        ("/?a=%25u2020", false),
    ] {
        let mut tx = request(&rs, "GET", uri, None, b"");
        assert_eq!(logged_ids(&mut tx) == [2], hit, "{uri}");
    }
    // Without the map the low byte (0x19) is no quote.
    let plain = ruleset("SecRule ARGS:a \"@rx '\" \"id:2,phase:1,pass,log,t:none,t:urlDecodeUni\"");
    let mut tx = request(&plain, "GET", "/?a=%25u2019x", None, b"");
    assert!(logged_ids(&mut tx).is_empty());

    // Load errors name the directive's place and the file, and the line in the file.
    std::fs::write(dir.join("bad.mapping"), "20127\n00a0:20\n2019:'\n").unwrap();
    let cases = [
        (
            "SecUnicodeMapFile bad.mapping 20127",
            "bad.mapping: line 3: \"2019:'\" is not a mapping",
        ),
        (
            "SecUnicodeMapFile unicode.mapping 850",
            "unicode.mapping: no section for code page 850",
        ),
        (
            "SecUnicodeMapFile missing.mapping 20127",
            "cannot read missing.mapping",
        ),
        (
            "SecUnicodeMapFile unicode.mapping",
            "expected a file and a code page",
        ),
        (
            "SecUnicodeMapFile unicode.mapping US",
            "the code page must be a number",
        ),
    ];
    for (line, want) in cases {
        let bad = dir.join("bad.conf");
        std::fs::write(&bad, format!("\n{line}\n")).unwrap();
        let e = load(&bad).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("bad.conf:2") && e.contains(want), "{line}: {e}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn body_probe_rules() -> Arc<engine::Ruleset> {
    ruleset(
        "SecRuleEngine DetectionOnly\nSecRequestBodyAccess On\n\
         SecRule REQUEST_HEADERS:Content-Type \"@rx xml\" \"id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=XML\"\n\
         SecRule ARGS \"@rx .\" \"id:10,phase:2,pass,log\"\n\
         SecRule XML:/* \"@rx .\" \"id:11,phase:2,pass,log,setvar:tx.xml=%{MATCHED_VAR}\"\n\
         SecRule FILES \"@rx .\" \"id:12,phase:2,pass,log\"\n\
         SecRule REQBODY_ERROR \"!@eq 0\" \"id:13,phase:2,pass,log\"\n\
         SecRule REQBODY_PROCESSOR \"@rx .\" \"id:14,phase:2,pass,log,setvar:tx.proc=%{MATCHED_VAR}\"",
    )
}

#[test]
fn multipart_parse_error_keeps_no_arguments_or_files() {
    let rs = body_probe_rules();
    let ct = Some("multipart/form-data; boundary=XyZ");
    // A NUL in a filename, and a missing final boundary: v3 sets REQBODY_ERROR and
    // adds none of the parts to ARGS or FILES.
    let bad: [&[u8]; 2] = [
        b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello\r\n--XyZ\r\n\
          Content-Disposition: form-data; name=\"f\"; filename=\"x\x00y\"\r\n\r\ndata\r\n--XyZ--\r\n",
        b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello\r\n--XyZ\r\n\
          Content-Disposition: form-data; name=\"b\"\r\n\r\nworld\r\n",
    ];
    for body in bad {
        let mut tx = request(&rs, "POST", "/", ct, body);
        assert_eq!(logged_ids(&mut tx), [13, 14]);
    }
    // A control byte in a part header is an error that does not stop the parse (CRS
    // 922130 test 1): REQBODY_ERROR, and the parts are kept, as in v3.
    let header_error =
        b"--XyZ\r\n\x0eContent-Disposition: form-data; name=\"file\"; filename=\"1.php\"\r\n\
          Content-Disposition: form-data; name=\"post\"\r\n\r\n<?php echo 1;\r\n--XyZ--";
    let mut tx = request(&rs, "POST", "/", ct, header_error);
    assert_eq!(logged_ids(&mut tx), [10, 13, 14]);
    let good = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello\r\n--XyZ\r\n\
          Content-Disposition: form-data; name=\"f\"; filename=\"x.txt\"\r\n\r\ndata\r\n--XyZ--\r\n";
    let mut tx = request(&rs, "POST", "/", ct, good);
    assert_eq!(logged_ids(&mut tx), [10, 12, 14]);
}

#[test]
fn empty_bodies_as_v3() {
    let rs = body_probe_rules();
    // Multipart: no data, no error (the processor still runs).
    let mut tx = request(
        &rs,
        "POST",
        "/",
        Some("multipart/form-data; boundary=XyZ"),
        b"",
    );
    assert_eq!(logged_ids(&mut tx), [14]);
    assert_eq!(tx.tx_var("proc"), Some(&b"MULTIPART"[..]));
    // XML: an empty document is a parse error.
    let mut tx = request(&rs, "GET", "/", Some("application/soap+xml"), b"");
    assert_eq!(logged_ids(&mut tx), [13, 14]);
    // The media type must start the value: no processor for these.
    for ct in [
        "text/plain; multipart/form-data; boundary=XyZ",
        "x-multipart/form-data; boundary=XyZ",
    ] {
        let body =
            b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello\r\n--XyZ--\r\n";
        let mut tx = request(&rs, "POST", "/", Some(ct), body);
        assert_eq!(logged_ids(&mut tx), Vec::<u32>::new(), "{ct}");
    }
}

#[test]
fn xml_parse_error_keeps_the_text_before_it() {
    let rs = body_probe_rules();
    // What libmodsecurity 3.0.15 gives in XML:/* for each (measured).
    let cases: [(&[u8], Option<&[u8]>); 5] = [
        (b"<a><b>first</b><c>sec\x00ond</c></a>", Some(b"firstsec")),
        (b"<a><b>first</b><c>second</d></a>", Some(b"firstsecond")),
        (b"<a>one<b>two</b>three", Some(b"onetwothree")),
        (b"<a>one &bad; two</a>", Some(b"one ")),
        (b"not xml", None),
    ];
    for (body, text) in cases {
        let mut tx = request(&rs, "POST", "/", Some("text/xml"), body);
        let want: &[u32] = if text.is_some() {
            &[11, 13, 14]
        } else {
            &[13, 14]
        };
        let body_text = String::from_utf8_lossy(body);
        assert_eq!(logged_ids(&mut tx), want, "{body_text}");
        assert_eq!(tx.tx_var("xml"), text, "{body_text}");
    }
}

/// A `logdata` that expands a long matched value keeps its first 512 bytes, in the
/// match record and in the error log line (v3's error log keeps 200, its JSON audit
/// log all of it; docs/modsecurity-differences.md, "Logs").
#[test]
fn long_logdata_is_kept_to_512_bytes() {
    let rs = ruleset(
        "SecRuleEngine On\nSecRequestBodyAccess On\n\
         SecRule ARGS \"@contains zz\" \"id:10,phase:2,log,pass,logdata:'v=%{MATCHED_VAR}!'\"",
    );
    let value = format!("zz{}", "é".repeat(2000));
    let body = format!("a={value}");
    let mut tx = request(
        &rs,
        "POST",
        "/",
        Some("application/x-www-form-urlencoded"),
        body.as_bytes(),
    );
    let data = tx.matches()[0].data.clone().expect("logdata");
    let whole = format!("v={value}!");
    // Cut on a character boundary at or below 512 bytes.
    assert!(data.len() <= 512 && data.len() >= 510, "{}", data.len());
    assert!(whole.starts_with(&data));
    let line = tx
        .events()
        .filter_map(engine::Event::into_log_line)
        .collect::<Vec<_>>()
        .remove(0);
    assert!(line.contains(&format!("[data \"{data}\"]")), "{line}");
}
