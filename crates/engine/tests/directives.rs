//! Configuration directives an existing ModSecurity set-up uses: every
//! `SecRuleRemoveBy*` and `SecRuleUpdate*By*` form, the audit log's formats and
//! types (`SecAuditLogFormat`, `SecAuditLogType Concurrent` with
//! `SecAuditLogStorageDir`) and the debug log (`SecDebugLog`, `SecDebugLogLevel`).

use engine::{Intervention, RulesetBuilder, Transaction, TxContext};
use std::sync::Arc;

fn ruleset(text: &str) -> Arc<engine::Ruleset> {
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    b.add_text(text, "test.conf")
        .unwrap_or_else(|e| panic!("{e}"));
    Arc::new(b.build().unwrap_or_else(|e| panic!("{e}")))
}

fn ctx() -> TxContext {
    TxContext {
        unique_id: "tx-1".into(),
        // 2026-11-18 11:06:40 UTC.
        now_unix_micros: 1_795_000_000_000_000,
        ..TxContext::default()
    }
}

fn get(rs: &Arc<engine::Ruleset>, uri: &str) -> (Option<Intervention>, Transaction) {
    let mut tx = Transaction::new(rs.clone(), ctx());
    tx.set_request_line(b"GET", uri.as_bytes(), b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    tx.add_request_header(b"User-Agent", b"directive-test");
    let mut i = tx.process_request_headers();
    if i.is_none() {
        i = tx.process_request_body();
    }
    if let Some(i) = &i {
        // What the server does with an intervention: answer with its status.
        tx.set_response_status(i.status, b"HTTP/1.1");
    } else {
        tx.set_response_status(200, b"HTTP/1.1");
        tx.add_response_header(b"Content-Type", b"text/plain");
        tx.process_response_headers();
    }
    tx.process_logging();
    (i, tx)
}

fn status(rs: &Arc<engine::Ruleset>, uri: &str) -> Option<u16> {
    get(rs, uri).0.map(|i| i.status)
}

const SEVEN_RULES: &str = r#"
SecRule ARGS "@contains a" "id:1,phase:1,deny,status:401,tag:'t-one',msg:'one'"
SecRule ARGS "@contains b" "id:2,phase:1,deny,status:402,tag:'t-two',msg:'two'"
SecRule ARGS "@contains c" "id:3,phase:1,deny,status:403,tag:'t-three',msg:'three'"
SecRule ARGS "@contains d" "id:4,phase:1,deny,status:404,tag:'t-four',msg:'four'"
SecRule ARGS "@contains e" "id:5,phase:1,deny,status:405,tag:'t-five',msg:'five'"
SecRule ARGS "@contains f" "id:6,phase:1,deny,status:406,tag:'t-six',msg:'six'"
SecRule ARGS "@contains g" "id:7,phase:1,deny,status:407,tag:'t-seven',msg:'seven'"
SecRule ARGS:q "@contains h" "id:8,phase:1,deny,status:408,msg:'eight'"
"#;

#[test]
fn every_remove_and_update_form() {
    let plain = ruleset(SEVEN_RULES);
    for (q, want) in [("a", 401), ("b", 402), ("c", 403), ("d", 404), ("g", 407)] {
        assert_eq!(status(&plain, &format!("/?q={q}")), Some(want), "{q}");
    }
    let rs = ruleset(&format!(
        "{SEVEN_RULES}
SecRuleRemoveById 1
SecRuleRemoveByTag t-two
SecRuleRemoveByMsg three
SecRuleUpdateTargetById 4 \"!ARGS:x\"
SecRuleUpdateTargetByTag t-five \"!ARGS:x\"
SecRuleUpdateTargetByMsg six \"!ARGS:x\"
SecRuleUpdateActionById 7 \"status:417\"
SecRuleUpdateTargetById 8 ARGS:y ARGS:q
"
    ));
    // Removed by id, tag and message.
    for q in ["a", "b", "c"] {
        assert_eq!(status(&rs, &format!("/?q={q}")), None, "{q}");
    }
    // Targets updated by id, tag and message: ARGS:x is no longer inspected.
    for (v, want) in [("d", 404), ("e", 405), ("f", 406)] {
        assert_eq!(status(&rs, &format!("/?q={v}")), Some(want), "{v}");
        assert_eq!(status(&rs, &format!("/?x={v}")), None, "{v}");
    }
    // Actions updated by id.
    assert_eq!(status(&rs, "/?q=g"), Some(417));
    // A target replaced: rule 8 reads ARGS:y instead of ARGS:q.
    assert_eq!(status(&plain, "/?q=h"), Some(408));
    assert_eq!(status(&rs, "/?q=h"), None);
    assert_eq!(status(&rs, "/?y=h"), Some(408));
}

const AUDITED: &str = r#"
SecAuditEngine On
SecAuditLogParts ABFHZ
SecRule ARGS:q "@contains attack" "id:10,phase:1,deny,status:403,log,msg:'attack seen'"
"#;

#[test]
fn native_audit_record() {
    let rs = ruleset(&format!("{AUDITED}SecAuditLogFormat Native\n"));
    let (i, tx) = get(&rs, "/p?q=attack");
    assert_eq!(i.map(|i| i.status), Some(403));
    let rec = tx.audit_record().expect("audited");
    assert!(rec.concurrent.is_none(), "Serial by default");
    let text = rec.text;
    let first = text.lines().next().unwrap();
    assert!(first.starts_with("--") && first.ends_with("-A--"), "{text}");
    let boundary = &first[2..first.len() - 4];
    for part in ['A', 'B', 'F', 'H', 'Z'] {
        assert!(
            text.contains(&format!("--{boundary}-{part}--\n")),
            "part {part}: {text}"
        );
    }
    assert!(
        !text.contains(&format!("--{boundary}-C--")),
        "C not asked for"
    );
    assert!(
        text.contains("[18/Nov/2026:11:06:40 +0000] tx-1 127.0.0.1"),
        "{text}"
    );
    assert!(
        text.contains("GET /p?q=attack HTTP/1.1\nHost: example.com\n"),
        "{text}"
    );
    assert!(
        text.contains("[id \"10\"]") && text.contains("attack seen"),
        "{text}"
    );
    assert!(
        text.trim_end().ends_with(&format!("--{boundary}-Z--")),
        "{text}"
    );
    // JSON stays the default.
    let rs = ruleset(AUDITED);
    let (_, tx) = get(&rs, "/p?q=attack");
    let json: serde_json::Value = serde_json::from_str(&tx.audit_record().unwrap().text).unwrap();
    assert_eq!(json["transaction"]["unique_id"], "tx-1");
}

#[test]
fn concurrent_audit_record_and_index_line() {
    let rs = ruleset(&format!(
        "{AUDITED}SecAuditLogType Concurrent\nSecAuditLogStorageDir /var/log/audit/\n"
    ));
    let (_, tx) = get(&rs, "/p?q=attack");
    let rec = tx.audit_record().expect("audited");
    let c = rec.concurrent.expect("concurrent");
    assert_eq!(
        c.path,
        "/var/log/audit/20261118/20261118-1106/20261118-110640-tx-1"
    );
    let md5 = {
        use md5::Digest as _;
        md5::Md5::digest(rec.text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    assert_eq!(
        c.index_line,
        format!(
            "example.com 127.0.0.1 - [18/Nov/2026:11:06:40 +0000] \"GET /p?q=attack HTTP/1.1\" 403 0 - \"directive-test\" tx-1 - {} 0 {} md5:{md5}",
            c.path,
            rec.text.len()
        )
    );
}

#[test]
fn debug_log_levels() {
    let rules = r#"
SecRule ARGS:q "@contains other" "id:11,phase:1,deny,status:403"
SecRule ARGS:q "@contains attack" "id:10,phase:1,deny,status:403,msg:'attack seen'"
"#;
    let lines = |level: u8, with_file: bool| {
        let file = if with_file {
            "SecDebugLog /tmp/debug.log\n"
        } else {
            ""
        };
        let rs = ruleset(&format!("{file}SecDebugLogLevel {level}\n{rules}"));
        let (_, mut tx) = get(&rs, "/p?q=attack");
        tx.events()
            .filter_map(engine::Event::into_debug_line)
            .collect::<Vec<_>>()
    };
    assert!(lines(9, false).is_empty(), "no SecDebugLog: nothing");
    assert!(lines(0, true).is_empty(), "level 0: nothing");
    let l4 = lines(4, true);
    assert!(
        l4.iter()
            .any(|l| l == "[tx-1] [/p?q=attack] [4] Starting phase 1."),
        "{l4:#?}"
    );
    assert!(
        l4.iter()
            .any(|l| l.contains("(Rule 10, test.conf:5) returned 1.")),
        "{l4:#?}"
    );
    assert!(
        l4.iter().any(|l| l.contains("disruptive action Deny")),
        "{l4:#?}"
    );
    assert!(
        !l4.iter().any(|l| l.contains("returned 0")),
        "level 4 keeps only matches"
    );
    let l9 = lines(9, true);
    assert!(l9.len() > l4.len());
    assert!(
        l9.iter()
            .any(|l| l.contains("(Rule 11, test.conf:4) returned 0.")),
        "{l9:#?}"
    );
    assert!(
        l9.iter()
            .any(|l| l.contains("operator @contains attack matched ARGS:q: `attack'")),
        "{l9:#?}"
    );
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    let err = b
        .add_text("SecDebugLogLevel 10\n", "levels.conf")
        .err()
        .map(|e| e.to_string())
        .or_else(|| b.build().err().map(|e| e.to_string()))
        .expect("level 10 is refused");
    assert!(
        err.contains("SecDebugLogLevel") && err.contains("levels.conf"),
        "{err}"
    );
}
