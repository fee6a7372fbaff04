//! The semantic detectors (`detect` crate) and the input stage that feeds them.
//!
//! `detectors`: every detector's `scan`, and SQL's `confirm`, on one value. A
//! detector must answer every input, report evidence inside the value, and find
//! nothing in a class its value is not a candidate for (the candidates pass is the
//! guard that lets the engine skip detectors, so a miss there is a missed attack).
//!
//! `inputs`: a transaction whose rules read `INPUTS`, `INPUTS_DECODED` and every
//! `DETECTIONS` class, on a request whose query, one header, cookie and body come
//! from the input (JSON, form, XML, multipart or text, by a control byte). The input
//! stage's table stays within its bounds, and every decoded value names its lineage.

use crate::input::Input;
use detect::Class;
use engine::{Ruleset, RulesetBuilder, Transaction, TxContext};
use seclang::MemorySource;
use std::sync::{Arc, OnceLock};

/// Runs every detector on one value.
pub fn fuzz_detectors(data: &[u8]) {
    let candidates = detect::candidates(data);
    for class in Class::ALL {
        if let Some(f) = class.scan(data) {
            assert_eq!(f.class, class, "a finding of another class");
            assert!(
                f.at.start <= f.at.end && f.at.end <= data.len(),
                "{}: evidence {:?} outside a value of {} bytes",
                class.name(),
                f.at,
                data.len()
            );
            assert!(
                candidates.contains(class),
                "{}: found ({}) in a value the candidates pass left out",
                class.name(),
                f.rule
            );
        }
    }
    if detect::sql::confirm(data) {
        assert!(
            candidates.contains(Class::Sql),
            "sql: confirmed outside the candidates"
        );
    }
}

const INPUT_RULES: &str = r#"
SecRuleEngine On
SecRequestBodyAccess On
SecRule REQUEST_HEADERS:Content-Type "@rx (?i)^application/json" "id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQUEST_HEADERS:Content-Type "@rx (?i)^text/xml" "id:2,phase:1,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule INPUTS|INPUTS_DECODED "@detectSqlContext" "id:10,phase:2,pass,nolog,setvar:tx.sql=+1"
SecRule INPUTS_DECODED "@rx ." "id:11,phase:2,pass,nolog,setvar:tx.decoded=+1"
SecRule &INPUTS_DECODED "@gt 4096" "id:12,phase:2,pass,nolog,setvar:tx.too_many=1"
SecRule DETECTIONS "@unconditionalMatch" "id:13,phase:2,pass,nolog,setvar:tx.detections=+1"
SecRule INPUTS|INPUTS_DECODED "@detectXssContext" "id:14,phase:2,pass,nolog"
SecRule INPUTS|INPUTS_DECODED "@confirmSqlSyntax" "id:15,phase:2,pass,nolog"
SecRule TX:too_many "@eq 1" "id:16,phase:2,deny,status:500,msg:'input table past its bound'"
"#;

fn input_ruleset() -> Arc<Ruleset> {
    static RULESET: OnceLock<Arc<Ruleset>> = OnceLock::new();
    RULESET
        .get_or_init(|| {
            let mut b = RulesetBuilder::new(Arc::new(MemorySource::new()));
            b.add_text(INPUT_RULES, "fuzz-inputs.conf")
                .expect("the input fuzz rules load");
            Arc::new(b.build().expect("the input fuzz rules compile"))
        })
        .clone()
}

const CONTENT_TYPES: &[&[u8]] = &[
    b"application/json",
    b"application/x-www-form-urlencoded",
    b"text/xml",
    b"multipart/form-data; boundary=B",
    b"text/plain",
];

/// Runs one request through the input stage. Input: a control byte (the body's
/// type), then the query string, a header value, a cookie value and the body,
/// separated by NUL bytes.
pub fn fuzz_inputs(data: &[u8]) {
    let mut input = Input::new(data);
    let content_type = CONTENT_TYPES[input.below(CONTENT_TYPES.len())];
    let query = input.until(0);
    let header = input.until(0);
    let cookie = input.until(0);
    let body = input.rest();
    let mut uri = b"/fuzz/segment?".to_vec();
    uri.extend(
        query
            .iter()
            .filter(|b| !matches!(b, b' ' | b'#' | b'\r' | b'\n')),
    );
    let mut tx = Transaction::new(input_ruleset(), TxContext::default());
    tx.set_request_line(b"POST", &uri, b"HTTP/1.1");
    tx.add_request_header(b"Host", b"fuzz.example");
    tx.add_request_header(b"X-Fuzz", header);
    let mut c = b"a=".to_vec();
    c.extend_from_slice(cookie);
    tx.add_request_header(b"Cookie", &c);
    tx.add_request_header(b"Content-Type", content_type);
    tx.add_request_header(b"Content-Length", body.len().to_string().as_bytes());
    if tx.process_request_headers().is_none() {
        if tx.request_body_wanted() {
            tx.append_request_body(body);
        }
        let verdict = tx.process_request_body();
        assert!(
            verdict.is_none_or(|i| i.status != 500),
            "the input table went past its bound"
        );
    }
    tx.process_logging();
    for line in tx
        .events()
        .filter_map(engine::Event::into_log_line)
        .collect::<Vec<_>>()
    {
        assert!(!line.contains("input table past its bound"), "{line}");
    }
}
