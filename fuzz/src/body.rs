//! The request body processors: URL-encoded, multipart, JSON and XML.
//!
//! Each target runs its body twice: through the processor directly, with small
//! limits so that they are reached, checking what the processor promises (no more
//! arguments, parts or nesting than allowed; file contents inside the body), and
//! through a [`Transaction`] with body access on and the matching processor, whose
//! rules read every variable the processor fills (so the collection code runs too).

use crate::input::Input;
use engine::internals::body::{self, LimitHit, Limits};
use engine::{Ruleset, RulesetBuilder, Transaction, TxContext};
use seclang::MemorySource;
use std::sync::{Arc, OnceLock};

/// The rules every body transaction runs: ModSecurity's recommended switches for the
/// JSON and XML processors and its body error checks, then rules that read every
/// variable a body processor fills, through a typical decoding pipeline.
const RULES: &str = r#"
SecRuleEngine On
SecRequestBodyAccess On
SecRequestBodyLimit 65536
SecRequestBodyLimitAction ProcessPartial
SecArgumentsLimit 64
SecRequestBodyJsonDepthLimit 32
SecRule REQUEST_HEADERS:Content-Type "@rx (?i)^(?:application(?:/soap\+|/)|text/)xml" \
    "id:200000,phase:1,pass,nolog,t:none,t:lowercase,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "@rx (?i)^application/json" \
    "id:200001,phase:1,pass,nolog,t:none,t:lowercase,ctl:requestBodyProcessor=JSON"
SecRule REQBODY_ERROR "!@eq 0" \
    "id:200002,phase:2,pass,nolog,msg:'%{REQBODY_ERROR_MSG}',logdata:'%{REQBODY_PROCESSOR_ERROR_MSG}'"
SecRule MULTIPART_STRICT_ERROR "!@eq 0" \
    "id:200003,phase:2,pass,nolog,msg:'strict %{MULTIPART_BOUNDARY_QUOTED}%{MULTIPART_DATA_BEFORE}%{MULTIPART_DATA_AFTER}%{MULTIPART_HEADER_FOLDING}%{MULTIPART_LF_LINE}%{MULTIPART_MISSING_SEMICOLON}%{MULTIPART_INVALID_QUOTING}%{MULTIPART_INVALID_PART}%{MULTIPART_INVALID_HEADER_FOLDING}%{MULTIPART_FILE_LIMIT_EXCEEDED}'"
SecRule MULTIPART_UNMATCHED_BOUNDARY "@eq 1" "id:200004,phase:2,pass,nolog"
SecRule TX:/^MSC_/ "!@streq 0" "id:200005,phase:2,pass,nolog"
SecRule &ARGS "@gt 0" "id:200007,phase:2,pass,nolog,setvar:tx.args=%{ARGS_COMBINED_SIZE}"
SecRule ARGS|ARGS_NAMES|REQUEST_BODY|XML:/*|XML://@*|FILES|FILES_NAMES|MULTIPART_NAME|MULTIPART_FILENAME|MULTIPART_PART_HEADERS \
    "@rx (?i)(?:union\s+select|<script|'\s*or\s)" \
    "id:1001,phase:2,pass,nolog,t:none,t:urlDecodeUni,t:htmlEntityDecode,t:removeNulls,t:lowercase,capture,setvar:tx.hits=+1,logdata:'%{TX.0} %{MATCHED_VAR_NAME}'"
SecRule ARGS|XML:/* "@detectSQLi" "id:1002,phase:2,pass,nolog,t:none,t:utf8toUnicode,t:urlDecodeUni,t:removeNulls,setvar:tx.hits=+1"
SecRule ARGS_POST|ARGS_POST_NAMES "@detectXSS" "id:1003,phase:2,pass,nolog,t:none,t:htmlEntityDecode,t:jsDecode,t:cssDecode,setvar:tx.hits=+1"
SecRule FILES_SIZES|FILES_COMBINED_SIZE|REQUEST_BODY_LENGTH "@gt 1000" "id:1004,phase:2,pass,nolog"
SecRule FILES_TMPNAMES "@rx ." "id:1005,phase:2,pass,nolog"
SecRule MULTIPART_PART_HEADERS:/(?i)_charset_/ "@rx ." "id:1006,phase:2,pass,nolog"
SecRule REQBODY_PROCESSOR "@streq JSON" "id:1007,phase:2,pass,nolog,chain"
    SecRule ARGS_POST_NAMES "@beginsWith json." "setvar:tx.json=1"
"#;

/// The ruleset above, compiled once per process.
fn ruleset() -> Arc<Ruleset> {
    static RULESET: OnceLock<Arc<Ruleset>> = OnceLock::new();
    RULESET
        .get_or_init(|| {
            let mut b = RulesetBuilder::new(Arc::new(MemorySource::new()));
            b.add_text(RULES, "fuzz-body.conf")
                .expect("the body fuzz rules load");
            Arc::new(b.build().expect("the body fuzz rules compile"))
        })
        .clone()
}

/// Runs one POST request with `content_type` and `body` through all phases. The
/// body arrives in two chunks, split at `split` (modulo its length).
fn transaction(content_type: &[u8], body: &[u8], split: usize) {
    let mut tx = Transaction::new(ruleset(), TxContext::default());
    tx.set_request_line(b"POST", b"/fuzz?q=1&a[]=2", b"HTTP/1.1");
    tx.add_request_header(b"Host", b"fuzz.example");
    tx.add_request_header(b"Content-Type", content_type);
    tx.add_request_header(b"Content-Length", body.len().to_string().as_bytes());
    if tx.process_request_headers().is_some() {
        return;
    }
    if tx.request_body_wanted() {
        let at = split % (body.len() + 1);
        tx.append_request_body(&body[..at]);
        tx.append_request_body(&body[at..]);
    }
    tx.process_request_body();
    tx.set_response_status(200, b"HTTP/1.1");
    tx.add_response_header(b"Content-Type", b"text/plain");
    tx.process_response_headers();
    tx.process_response_body();
    tx.process_logging();
    let _ = tx.audit_record();
    let _ = tx
        .events()
        .filter_map(engine::Event::into_log_line)
        .collect::<Vec<_>>();
}

/// Limits small enough for the fuzzer to reach, chosen by one input byte.
fn small_limits(byte: u8) -> Limits {
    Limits {
        max_args: 1 + usize::from(byte & 0x0f),
        json_depth: 1 + usize::from(byte >> 4),
        multipart_parts: 2 + usize::from(byte & 0x07),
        max_files: usize::from(byte >> 6),
    }
}

/// URL-encoded bodies. Input: a control byte (limits, split point), then the body.
pub fn fuzz_urlencoded(data: &[u8]) {
    let mut input = Input::new(data);
    let control = input.byte();
    let body = input.rest();
    let limits = small_limits(control);
    let out = body::urlencoded::parse_bounded(body, b'&', limits.max_args);
    assert!(out.args.len() <= limits.max_args, "argument limit");
    if out.limit_hit.is_some() {
        assert_eq!(
            out.args.len(),
            limits.max_args,
            "limit hit before the limit"
        );
    }
    transaction(
        b"application/x-www-form-urlencoded",
        body,
        usize::from(control),
    );
}

/// Multipart bodies. Input: a control byte, the Content-Type value up to the first
/// newline (`multipart/form-data; boundary=...`), then the body.
pub fn fuzz_multipart(data: &[u8]) {
    let mut input = Input::new(data);
    let control = input.byte();
    let content_type = input.until(b'\n');
    let body = input.rest();
    let limits = small_limits(control);
    let out = body::multipart::parse(body, content_type, &limits);
    assert!(out.args.len() <= limits.max_args, "argument limit");
    assert!(
        out.args.len() + out.files.len() <= limits.multipart_parts,
        "part limit"
    );
    // Files over the limit are still listed (and inspected); the limit shows in
    // MULTIPART_FILE_LIMIT_EXCEEDED and an error.
    let with_content = out.files.iter().filter(|f| f.size > 0).count();
    if limits.max_files > 0 && with_content > limits.max_files {
        assert!(out.flags.file_limit_exceeded, "file limit passed silently");
        // (`limit_hit` names one limit: another one met later may replace it.)
        assert!(out.limit_hit.is_some(), "file limit not reported");
    }
    for file in &out.files {
        let content = body.get(file.content.clone());
        assert!(content.is_some(), "file content outside the body");
        assert_eq!(file.size, file.content.len(), "file size");
    }
    assert_eq!(out.flags.error, out.error.is_some(), "error flag");
    let mut ct = b"multipart/form-data".to_vec();
    if !content_type.is_empty() {
        ct = content_type.to_vec();
    }
    transaction(&ct, body, usize::from(control));
}

/// JSON bodies. Input: a control byte, then the document.
pub fn fuzz_json(data: &[u8]) {
    let mut input = Input::new(data);
    let control = input.byte();
    let doc = input.rest();
    let limits = small_limits(control);
    let partial = body::json::parse_partial(doc, &limits);
    assert!(partial.args.len() <= limits.max_args, "argument limit");
    match partial.limit_hit {
        Some(LimitHit::Arguments | LimitHit::JsonDepth) => {
            assert!(
                partial.error.is_some(),
                "a limit stops the parse with an error"
            );
        }
        Some(other) => panic!("JSON reported a limit it does not have: {other:?}"),
        None => {}
    }
    match body::json::parse(doc, &limits) {
        Ok(args) => {
            assert!(partial.error.is_none(), "parse and parse_partial disagree");
            assert_eq!(args, partial.args, "parse and parse_partial disagree");
        }
        Err(e) => assert_eq!(Some(e), partial.error, "parse and parse_partial disagree"),
    }
    transaction(b"application/json", doc, usize::from(control));
}

/// XML bodies. Input: a control byte, then the document.
pub fn fuzz_xml(data: &[u8]) {
    let mut input = Input::new(data);
    let control = input.byte();
    let doc = input.rest();
    if let Ok(parsed) = body::xml::parse(doc) {
        let texts: usize = parsed.texts.iter().map(Vec::len).sum();
        let attributes: usize = parsed.attributes.iter().map(Vec::len).sum();
        // Without entity expansion, what the processor extracts is text of the
        // document; a bound keeps an expansion from growing without limit.
        assert!(
            texts + attributes + parsed.content.len() <= 64 * doc.len() + (1 << 20),
            "XML output out of proportion to the document"
        );
    }
    let content_type: &[u8] = if control & 1 == 0 {
        b"application/xml"
    } else {
        b"text/xml; charset=utf-8"
    };
    transaction(content_type, doc, usize::from(control >> 1));
}
