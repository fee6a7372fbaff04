//! Log output: ModSecurity-style error-log lines, audit records (JSON or ModSecurity's
//! native multi-part text, serial or one file per record) and debug-log lines.

use crate::civil::UtcTime;
use crate::transaction::Transaction;
use serde_json::{Map, Value, json};
use std::fmt::Write;

/// What is known of one rule match, for the error log and the audit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchRecord {
    /// The rule id (chain starter's).
    pub rule_id: Option<i64>,
    /// The phase it matched in.
    pub phase: u8,
    /// The rule's file.
    pub file: String,
    /// The rule's line.
    pub line: u32,
    /// Expanded `msg`.
    pub msg: Option<String>,
    /// Expanded `logdata`, as the logs show it: its first [`SHOWN_LOGDATA`] bytes of
    /// text.
    pub data: Option<String>,
    /// `severity`.
    pub severity: Option<u8>,
    /// `tag`s.
    pub tags: Vec<String>,
    /// `ver`.
    pub ver: Option<String>,
    /// `rev`.
    pub rev: Option<String>,
    /// `maturity`.
    pub maturity: Option<u8>,
    /// `accuracy`.
    pub accuracy: Option<u8>,
    /// Operator name and argument as written.
    pub operator: (String, String),
    /// Whether the operator was negated.
    pub negated: bool,
    /// MATCHED_VAR_NAME at the time of the match.
    pub var_name: String,
    /// MATCHED_VAR at the time of the match, as the logs show it: its first
    /// [`SHOWN_VALUE`] bytes of text (see [`shown_value`]).
    pub var_value: String,
    /// `log`/`nolog`.
    pub log: bool,
    /// `auditlog`/`noauditlog`.
    pub auditlog: bool,
    /// The status, when this match denied the transaction.
    pub denied_with: Option<u16>,
}

/// The operator name of the built-in limit check's matches (see
/// `SecPalisadeLimitAction`); their parameter says which limit was exceeded.
pub const LIMIT_CHECK: &str = "palisadeLimitCheck";

/// Escapes a value for a `[key "value"]` field: quotes and backslashes are escaped and
/// control bytes are written as `\xHH`, so a record stays on one line.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// How many bytes of a matched value the logs show (ModSecurity v3 shows as many).
pub const SHOWN_VALUE: usize = 200;

/// How many bytes of a rule's expanded `logdata` a match record keeps, and so the
/// error and audit logs show (the error log line always cut it there; ModSecurity v3
/// cuts it to 200 bytes in its error log but writes all of it to its JSON audit log,
/// which for a rule that logs `%{MATCHED_VAR}` of a 1 MiB body is a 1 MiB entry per
/// match).
pub const SHOWN_LOGDATA: usize = 512;

/// The part of a matched value the logs show: [`shown_text`] of [`SHOWN_VALUE`] bytes.
pub fn shown_value(bytes: &[u8]) -> String {
    shown_text(bytes, SHOWN_VALUE)
}

/// `bytes` as text (invalid UTF-8 replaced as [`String::from_utf8_lossy`] does) cut
/// to `max` bytes on a character boundary. Only the first `max + 3` bytes are read
/// (and need be given), so a huge value costs no more than a short one. That is
/// exact: a replaced byte grows the text, so the shown text comes from input bytes
/// before `max`, and a sequence starting there is decided by at most 3 more bytes.
pub fn shown_text(bytes: &[u8], max: usize) -> String {
    let head = &bytes[..bytes.len().min(max + 3)];
    let mut s = crate::macros::utf8_lossy(std::borrow::Cow::Borrowed(head));
    let keep = cut(&s, max).len();
    s.truncate(keep);
    s
}

/// Cuts a string to at most `max` bytes on a character boundary.
pub(crate) fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn operator_display(name: &str) -> String {
    let mut c = name.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// Formats one error-log line in ModSecurity v3's layout:
/// `ModSecurity: Warning. Matched "Operator `Rx' with parameter `...' against variable
/// `ARGS:x' (Value: `...' ) [file "..."] [line "..."] [id "..."] ...`.
pub fn error_log_line(m: &MatchRecord, tx: &Transaction) -> String {
    let mut s = String::with_capacity(512);
    match m.denied_with {
        Some(code) => {
            let _ = write!(
                s,
                "ModSecurity: Access denied with code {code} (phase {}). ",
                m.phase
            );
        }
        None => s.push_str("ModSecurity: Warning. "),
    }
    if m.operator.0 == LIMIT_CHECK {
        let _ = write!(
            s,
            "Palisade limit check: {}; part of the request was not inspected (`{}' is set).",
            escape(&m.operator.1),
            escape(&m.var_name),
        );
    } else if m.operator.0.eq_ignore_ascii_case("unconditionalMatch") && m.var_name.is_empty() {
        s.push_str("Unconditional match in SecAction.");
    } else {
        let _ = write!(
            s,
            "Matched \"Operator `{}' with parameter `{}' against variable `{}' (Value: `{}' )",
            operator_display(&m.operator.0),
            escape(cut(&m.operator.1, 200)),
            escape(&m.var_name),
            escape(&m.var_value),
        );
    }
    let _ = write!(s, " [file \"{}\"] [line \"{}\"]", escape(&m.file), m.line);
    let _ = write!(
        s,
        " [id \"{}\"]",
        m.rule_id.map(|i| i.to_string()).unwrap_or_default()
    );
    let _ = write!(s, " [rev \"{}\"]", escape(m.rev.as_deref().unwrap_or("")));
    let _ = write!(s, " [msg \"{}\"]", escape(m.msg.as_deref().unwrap_or("")));
    let _ = write!(s, " [data \"{}\"]", escape(m.data.as_deref().unwrap_or("")));
    let _ = write!(
        s,
        " [severity \"{}\"]",
        m.severity.map(|v| v.to_string()).unwrap_or_default()
    );
    let _ = write!(s, " [ver \"{}\"]", escape(m.ver.as_deref().unwrap_or("")));
    let _ = write!(s, " [maturity \"{}\"]", m.maturity.unwrap_or(0));
    let _ = write!(s, " [accuracy \"{}\"]", m.accuracy.unwrap_or(0));
    for t in &m.tags {
        let _ = write!(s, " [tag \"{}\"]", escape(t));
    }
    let host = String::from_utf8_lossy(&tx.req.server_name);
    let _ = write!(s, " [hostname \"{}\"]", escape(&host));
    let _ = write!(
        s,
        " [uri \"{}\"]",
        escape(&String::from_utf8_lossy(&tx.req.filename))
    );
    let _ = write!(s, " [unique_id \"{}\"]", escape(tx.unique_id()));
    let _ = write!(s, " [ref \"\"]");
    s
}

fn pairs_json(pairs: &[(Vec<u8>, Vec<u8>)]) -> Value {
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert(
            String::from_utf8_lossy(k).into_owned(),
            Value::String(String::from_utf8_lossy(v).into_owned()),
        );
    }
    Value::Object(m)
}

/// Builds the JSON audit record of a transaction, in ModSecurity v3's JSON audit log
/// layout (`{"transaction": {...}}`), honouring the transaction's audit log parts.
pub fn audit_record(tx: &Transaction) -> String {
    let parts = &tx.state.audit_parts;
    let ctx = tx.ctx();
    let secs = ctx.now_unix_micros.div_euclid(1_000_000);
    let mut t = Map::new();
    t.insert("client_ip".into(), json!(ctx.client_ip.to_string()));
    t.insert("time_stamp".into(), json!(secs.to_string()));
    t.insert("server_id".into(), json!(""));
    t.insert("client_port".into(), json!(ctx.client_port));
    t.insert("host_ip".into(), json!(ctx.server_ip.to_string()));
    if let Some(peer) = ctx.peer {
        // Palisade's own: the TCP peer, when the client's address came from a PROXY
        // protocol header or a trusted proxy's header.
        t.insert("peer_ip".into(), json!(peer.ip().to_string()));
        t.insert("peer_port".into(), json!(peer.port()));
    }
    t.insert("host_port".into(), json!(ctx.server_port));
    t.insert("unique_id".into(), json!(ctx.unique_id));
    if let Some(p) = tx.policy() {
        // Palisade's own: the site whose policy the transaction ran under.
        t.insert("site".into(), json!(p.name()));
    }
    let mut request = Map::new();
    request.insert(
        "method".into(),
        json!(String::from_utf8_lossy(&tx.req.method)),
    );
    let version = String::from_utf8_lossy(&tx.req.protocol);
    request.insert(
        "http_version".into(),
        json!(version.strip_prefix("HTTP/").unwrap_or(&version)),
    );
    request.insert(
        "uri".into(),
        json!(String::from_utf8_lossy(&tx.req.uri_raw)),
    );
    if parts.contains('B') {
        request.insert("headers".into(), pairs_json(&tx.req.headers));
    }
    if parts.contains('C') || parts.contains('I') {
        request.insert("body".into(), json!(String::from_utf8_lossy(&tx.req.body)));
    }
    t.insert("request".into(), Value::Object(request));
    let mut response = Map::new();
    response.insert("http_code".into(), json!(tx.resp.status));
    if parts.contains('F') {
        response.insert("headers".into(), pairs_json(&tx.resp.headers));
    }
    if parts.contains('E') {
        response.insert("body".into(), json!(String::from_utf8_lossy(&tx.resp.body)));
    }
    t.insert("response".into(), Value::Object(response));
    if parts.contains('H') {
        let messages: Vec<Value> = tx
            .matches()
            .iter()
            .filter(|m| m.log || m.auditlog)
            .map(|m| {
                json!({
                    "message": m.msg.clone().unwrap_or_default(),
                    "details": {
                        "match": if m.operator.0 == LIMIT_CHECK {
                            format!("Palisade limit check: {} (`{}' is set)", m.operator.1, m.var_name)
                        } else {
                            format!("Matched \"Operator `{}' with parameter `{}' against variable `{}' (Value: `{}' )",
                                operator_display(&m.operator.0), cut(&m.operator.1, 200), m.var_name, m.var_value)
                        },
                        "reference": "",
                        "ruleId": m.rule_id.map(|i| i.to_string()).unwrap_or_default(),
                        "file": m.file,
                        "lineNumber": m.line.to_string(),
                        "data": m.data.clone().unwrap_or_default(),
                        "severity": m.severity.map(|s| s.to_string()).unwrap_or_default(),
                        "ver": m.ver.clone().unwrap_or_default(),
                        "rev": m.rev.clone().unwrap_or_default(),
                        "tags": m.tags,
                        "maturity": m.maturity.unwrap_or(0).to_string(),
                        "accuracy": m.accuracy.unwrap_or(0).to_string(),
                    }
                })
            })
            .collect();
        let producer = json!({
            "modsecurity": concat!("Palisade/", env!("CARGO_PKG_VERSION")),
            "connector": "palisade",
            "secrules_engine": match tx.state.mode {
                crate::config::RuleEngineMode::On => "Enabled",
                crate::config::RuleEngineMode::Off => "Disabled",
                crate::config::RuleEngineMode::DetectionOnly => "DetectionOnly",
            },
            "components": tx.ruleset().config().component_signatures,
        });
        t.insert("producer".into(), producer);
        t.insert("messages".into(), Value::Array(messages));
    }
    json!({ "transaction": Value::Object(t) }).to_string()
}

/// A transaction's audit record, as the server is to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// The record: one JSON object (`SecAuditLogFormat JSON`) or ModSecurity's native
    /// multi-part text (`Native`, several lines), without a final newline.
    pub text: String,
    /// With `SecAuditLogType Concurrent`: the record goes to a file of its own and
    /// only an index line to the `SecAuditLog` file.
    pub concurrent: Option<ConcurrentRecord>,
}

/// Where a `Concurrent` audit record goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConcurrentRecord {
    /// The record's file: `SecAuditLogStorageDir` then
    /// `/YYYYMMDD/YYYYMMDD-HHMM/YYYYMMDD-HHMMSS-UNIQUE_ID` (UTC). The server creates
    /// the two directories.
    pub path: String,
    /// The line for the `SecAuditLog` file (without its newline): host, client,
    /// user, time, request line, status, response size, referer, user agent, unique
    /// id, the record's path, its size and MD5.
    pub index_line: String,
}

/// Builds the audit record of `tx` in the configured format and type.
pub fn build_audit_record(tx: &Transaction) -> AuditRecord {
    let audit = &tx.ruleset().config().audit;
    let text = if audit.format.eq_ignore_ascii_case("native") {
        native_audit_record(tx)
    } else {
        audit_record(tx)
    };
    let concurrent = audit.log_type.eq_ignore_ascii_case("concurrent").then(|| {
        let dir = audit.storage_dir.as_deref().unwrap_or("");
        let t = UtcTime::from_unix(tx.ctx().now_unix_micros.div_euclid(1_000_000));
        let path = format!(
            "{}/{:04}{:02}{:02}/{:04}{:02}{:02}-{:02}{:02}/{:04}{:02}{:02}-{:02}{:02}{:02}-{}",
            dir.trim_end_matches('/'),
            t.year,
            t.month,
            t.day,
            t.year,
            t.month,
            t.day,
            t.hour,
            t.minute,
            t.year,
            t.month,
            t.day,
            t.hour,
            t.minute,
            t.second,
            file_safe(&tx.ctx().unique_id)
        );
        let index_line = index_line(tx, &path, &text);
        ConcurrentRecord { path, index_line }
    });
    AuditRecord { text, concurrent }
}

/// A unique id as a file-name part: only characters safe in a path component.
fn file_safe(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `[dd/Mon/yyyy:hh:mm:ss +0000]`, the time stamp of native records and index lines.
fn bracket_time(tx: &Transaction) -> String {
    let t = UtcTime::from_unix(tx.ctx().now_unix_micros.div_euclid(1_000_000));
    format!(
        "[{:02}/{}/{:04}:{:02}:{:02}:{:02} +0000]",
        t.day,
        t.month_abbrev(),
        t.year,
        t.hour,
        t.minute,
        t.second
    )
}

fn header<'a>(headers: &'a [(Vec<u8>, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, v)| &v[..])
}

fn dash_if_empty(v: Option<&[u8]>) -> String {
    match v {
        Some(v) if !v.is_empty() => String::from_utf8_lossy(v).into_owned(),
        _ => "-".to_string(),
    }
}

/// The `Concurrent` index line of a record written to `path`.
fn index_line(tx: &Transaction, path: &str, record: &str) -> String {
    use md5::Digest as _;
    let req = &tx.req;
    let referer = dash_if_empty(header(&req.headers, "Referer"));
    format!(
        "{} {} - {} \"{} {} {}\" {} {} {} \"{}\" {} {} {} 0 {} md5:{}",
        dash_if_empty(header(&req.headers, "Host")),
        tx.ctx().client_ip,
        bracket_time(tx),
        dash_if_empty(Some(&req.method)),
        String::from_utf8_lossy(&req.uri_raw),
        String::from_utf8_lossy(&req.protocol),
        tx.resp.status,
        tx.resp.body.len(),
        referer,
        dash_if_empty(header(&req.headers, "User-Agent")),
        tx.ctx().unique_id,
        referer,
        path,
        record.len(),
        hex(&md5::Md5::digest(record.as_bytes())),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Bytes as text, with bytes that are not printable ASCII (other than tab and line
/// breaks) written `\xHH`, as ModSecurity writes a response body in a native record.
fn printable(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if b == b'\t' || b == b'\n' || b == b'\r' || (0x20..0x7f).contains(&b) {
            s.push(b as char);
        } else {
            let _ = write!(s, "\\x{b:02x}");
        }
    }
    s
}

/// Builds the native (multi-part text) audit record of a transaction: sections
/// `--BOUNDARY-X--` for A (time, id, addresses), B (request line and headers), C
/// (request body), E (response body), F (response status line and headers), H (the
/// rule messages) and Z (end), honouring the transaction's audit log parts. D, G, I,
/// J and K are written empty when asked for, as ModSecurity v3 does.
pub fn native_audit_record(tx: &Transaction) -> String {
    use md5::Digest as _;
    let parts = &tx.state.audit_parts;
    let ctx = tx.ctx();
    let boundary = hex(&md5::Md5::digest(ctx.unique_id.as_bytes())[..4]);
    let sep = |s: &mut String, part: char| {
        let _ = writeln!(s, "--{boundary}-{part}--");
    };
    let mut s = String::with_capacity(1024);
    let version = String::from_utf8_lossy(&tx.req.protocol).into_owned();
    sep(&mut s, 'A');
    let _ = writeln!(
        s,
        "{} {} {} {} {} {}",
        bracket_time(tx),
        ctx.unique_id,
        ctx.client_ip,
        ctx.client_port,
        ctx.server_ip,
        ctx.server_port
    );
    if parts.contains('B') {
        sep(&mut s, 'B');
        let _ = writeln!(
            s,
            "{} {} {}",
            String::from_utf8_lossy(&tx.req.method),
            String::from_utf8_lossy(&tx.req.uri_raw),
            version
        );
        for (k, v) in &tx.req.headers {
            let _ = writeln!(
                s,
                "{}: {}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            );
        }
        s.push('\n');
    }
    if parts.contains('C') && !tx.req.body.is_empty() {
        sep(&mut s, 'C');
        s.push_str(&String::from_utf8_lossy(&tx.req.body));
        s.push_str("\n\n");
    }
    if parts.contains('D') {
        sep(&mut s, 'D');
        s.push('\n');
    }
    if parts.contains('E') && !tx.resp.body.is_empty() {
        sep(&mut s, 'E');
        s.push_str(&printable(&tx.resp.body));
        s.push_str("\n\n");
    }
    if parts.contains('F') {
        sep(&mut s, 'F');
        let _ = writeln!(s, "{version} {}", tx.resp.status);
        for (k, v) in &tx.resp.headers {
            let _ = writeln!(
                s,
                "{}: {}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            );
        }
        s.push('\n');
    }
    for part in ['G', 'H', 'I', 'J', 'K'] {
        if !parts.contains(part) {
            continue;
        }
        sep(&mut s, part);
        if part == 'H' {
            for m in tx.matches().iter().filter(|m| m.log || m.auditlog) {
                s.push_str(&error_log_line(m, tx));
                s.push('\n');
            }
            if let Some(p) = tx.policy() {
                // Palisade's own: the site whose policy the transaction ran under.
                let _ = writeln!(s, "Palisade-Site: {}", p.name());
            }
        }
        s.push('\n');
    }
    sep(&mut s, 'Z');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_to_one_line() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\x0ad");
        assert_eq!(cut("héllo", 2), "h");
    }

    /// The shown value, converted from the first bytes only, is the whole value's
    /// lossy text cut to `SHOWN_VALUE` bytes, whatever sits at the cut.
    #[test]
    fn shown_value_is_the_cut_of_the_whole_text() {
        let mut rng = crate::body::fuzz::XorShift(0x5107_a11e);
        for _ in 0..20_000 {
            // Long enough that the cut falls anywhere in the last pieces.
            let mut v = b"abcdefgh".repeat(SHOWN_VALUE / 8 - 2);
            v.extend(rng.value_of(&crate::body::fuzz::UTF8_PIECES, 24, 0));
            let whole = String::from_utf8_lossy(&v);
            assert_eq!(shown_value(&v), cut(&whole, SHOWN_VALUE), "{v:?}");
        }
        assert_eq!(shown_value(b"short \xff"), "short \u{fffd}");
    }
}
