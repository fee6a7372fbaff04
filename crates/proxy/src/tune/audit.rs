//! Reading the JSON audit log (`SecAuditLogFormat JSON`, `SecAuditLogType Serial`):
//! one record per line, in ModSecurity v3's layout as the engine writes it
//! (`engine::log::audit_record`). Replaying a record needs its request line, its
//! headers (part B), its body (part C) and the rules' messages (part H); a record
//! without them is refused with its line and the parts to set.

use serde_json::Value;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

/// The `SecAuditLogParts` a record must have been written with.
pub const NEEDED_PARTS: &str = "ABCFHZ";

/// The largest audit log line read, in bytes (a longer line is an error).
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// Why an audit log could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file could not be opened or read.
    #[error("audit log {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The reason.
        reason: std::io::Error,
    },
    /// A line is not a JSON audit record.
    #[error(
        "audit log {path}:{line}: not a JSON audit record ({why}); tune reads `SecAuditLogFormat JSON` with `SecAuditLogType Serial`"
    )]
    NotJson {
        /// The file.
        path: PathBuf,
        /// The line (from 1).
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// A record lacks a part replay needs.
    #[error(
        "audit log {path}:{line}: record {id:?} has no {what}: tune replays requests and needs `SecAuditLogParts {NEEDED_PARTS}` (B: request headers, C: request body, H: rule messages)"
    )]
    MissingPart {
        /// The file.
        path: PathBuf,
        /// The line (from 1).
        line: usize,
        /// The record's unique id.
        id: String,
        /// What is missing (`request headers (part B)`, ...).
        what: &'static str,
    },
    /// A line is longer than [`MAX_LINE`].
    #[error("audit log {path}:{line}: record longer than {MAX_LINE} bytes")]
    TooLong {
        /// The file.
        path: PathBuf,
        /// The line (from 1).
        line: usize,
    },
}

/// One rule match of a record (part H).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The rule id (0 when the record gave none).
    pub rule_id: i64,
    /// The variable matched, as the engine named it (`ARGS:comment`,
    /// `REQUEST_HEADERS:User-Agent`); empty for an unconditional match.
    pub var: String,
    /// The matched value as the log shows it (its first 200 bytes).
    pub value: String,
    /// The rule's `severity` (0 emergency to 7 debug), if any.
    pub severity: Option<u8>,
    /// The rule's message.
    pub message: String,
    /// The rule's expanded `logdata` (CRS: `Matched Data: X found within VAR: ...`).
    pub data: String,
}

/// One request as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The record's unique id.
    pub id: String,
    /// The line of the audit log (from 1).
    pub line: usize,
    /// The client's address as recorded.
    pub client_ip: String,
    /// The site named in the record (`None`: the default site).
    pub site: Option<String>,
    /// The method.
    pub method: String,
    /// The request target as sent.
    pub uri: String,
    /// `HTTP/` and the version.
    pub protocol: String,
    /// The request headers (one value per name, as the JSON record keeps them).
    pub headers: Vec<(String, String)>,
    /// The request body.
    pub body: Vec<u8>,
    /// The response status recorded.
    pub status: u16,
    /// The rules' matches.
    pub hits: Vec<Hit>,
}

impl Recorded {
    /// The request's path, without query or fragment, percent-decoded as
    /// REQUEST_FILENAME is.
    pub fn path(&self) -> String {
        request_path(&self.uri)
    }

    /// Whether the rules refused the request, or would have in blocking mode: a
    /// match and an answer of 4xx (not 404) or 5xx, or no answer recorded (a rule
    /// that denies answers before the response the record keeps), or CRS's inbound
    /// anomaly evaluation (949110, 949111) among the matches.
    pub fn refused(&self) -> bool {
        !self.hits.is_empty()
            && (self.status == 0
                || (self.status >= 400 && self.status != 404)
                || self
                    .hits
                    .iter()
                    .any(|h| matches!(h.rule_id, 949110 | 949111)))
    }
}

/// A request target's path as REQUEST_FILENAME holds it: the part before `?` or
/// `#`, without the scheme and authority of an absolute URI, percent-decoded.
pub fn request_path(uri: &str) -> String {
    let end = uri.find(['?', '#']).unwrap_or(uri.len());
    let mut path = &uri[..end];
    if let Some(rest) = path
        .strip_prefix("http://")
        .or_else(|| path.strip_prefix("https://"))
    {
        path = rest.find('/').map_or("/", |p| &rest[p..]);
    }
    percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned()
}

/// Reads every record of the audit log at `path`.
pub fn read(path: &Path) -> Result<Vec<Recorded>, AuditError> {
    let file = std::fs::File::open(path).map_err(|reason| AuditError::Read {
        path: path.to_owned(),
        reason,
    })?;
    let mut reader = std::io::BufReader::new(file);
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut line = 0;
    loop {
        buf.clear();
        line += 1;
        let n = Read::by_ref(&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|reason| AuditError::Read {
                path: path.to_owned(),
                reason,
            })?;
        if n == 0 {
            break;
        }
        if buf.len() > MAX_LINE {
            return Err(AuditError::TooLong {
                path: path.to_owned(),
                line,
            });
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        out.push(parse_record(text, path, line)?);
    }
    Ok(out)
}

/// Parses one JSON audit record (`line` and `path` name it in errors).
pub fn parse_record(text: &str, path: &Path, line: usize) -> Result<Recorded, AuditError> {
    let not_json = |why: String| AuditError::NotJson {
        path: path.to_owned(),
        line,
        why,
    };
    let doc: Value = serde_json::from_str(text).map_err(|e| not_json(e.to_string()))?;
    let t = doc
        .get("transaction")
        .and_then(Value::as_object)
        .ok_or_else(|| not_json("no \"transaction\" object".to_owned()))?;
    let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
    let id = s(t.get("unique_id"));
    let missing = |what: &'static str| AuditError::MissingPart {
        path: path.to_owned(),
        line,
        id: id.clone(),
        what,
    };
    let req = t
        .get("request")
        .and_then(Value::as_object)
        .ok_or_else(|| not_json("no \"request\" object".to_owned()))?;
    let method = s(req.get("method"));
    let uri = s(req.get("uri"));
    if method.is_empty() || uri.is_empty() {
        return Err(not_json("no request method or uri".to_owned()));
    }
    let headers: Vec<(String, String)> = req
        .get("headers")
        .and_then(Value::as_object)
        .ok_or_else(|| missing("request headers (part B)"))?
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
        .collect();
    let declared = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().contains("chunked")
    });
    let body = match req.get("body").and_then(Value::as_str) {
        Some(b) => b.as_bytes().to_vec(),
        None if declared > 0 || chunked => return Err(missing("request body (part C)")),
        None => Vec::new(),
    };
    let messages = t
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| missing("rule messages (part H)"))?;
    let hits = messages.iter().map(hit).collect();
    let version = s(req.get("http_version"));
    Ok(Recorded {
        id: id.clone(),
        line,
        client_ip: s(t.get("client_ip")),
        site: t
            .get("site")
            .and_then(Value::as_str)
            .filter(|s| *s != "default")
            .map(str::to_owned),
        method,
        uri,
        protocol: if version.is_empty() {
            "HTTP/1.1".to_owned()
        } else {
            format!("HTTP/{version}")
        },
        headers,
        body,
        status: t
            .get("response")
            .and_then(|r| r.get("http_code"))
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(0),
        hits,
    })
}

/// One message of part H.
fn hit(m: &Value) -> Hit {
    let d = m.get("details");
    let field = |k: &str| {
        d.and_then(|d| d.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let (var, value) = split_match(field("match"));
    Hit {
        rule_id: field("ruleId").parse().unwrap_or(0),
        var,
        value,
        severity: field("severity").parse().ok(),
        message: m
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        data: field("data").to_owned(),
    }
}

/// The variable and value of a `details.match` text: `Matched "Operator `X' with
/// parameter `P' against variable `VAR' (Value: `V' )`. Searched from the end: the
/// parameter may hold anything, the value is last.
pub fn split_match(text: &str) -> (String, String) {
    const VAR: &str = "' against variable `";
    const VALUE: &str = "' (Value: `";
    let Some(v) = text.rfind(VALUE) else {
        return (String::new(), String::new());
    };
    let before = &text[..v];
    let Some(a) = before.rfind(VAR) else {
        return (String::new(), String::new());
    };
    let var = before[a + VAR.len()..].to_owned();
    let rest = &text[v + VALUE.len()..];
    let value = rest.strip_suffix("' )").unwrap_or(rest).to_owned();
    (var, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = r#"{"transaction":{"client_ip":"10.0.0.7","time_stamp":"1","server_id":"","client_port":5555,"host_ip":"127.0.0.1","host_port":80,"unique_id":"abc","request":{"method":"POST","http_version":"1.1","uri":"/blog/post%201?x=1","headers":{"Host":"example.com","Content-Length":"11"},"body":"comment=hey"},"response":{"http_code":403},"producer":{},"messages":[{"message":"SQL","details":{"match":"Matched \"Operator `Rx' with parameter `' against variable `x' (Value: `y' )' against variable `ARGS:comment' (Value: `it's a `test' )","ruleId":"942100","severity":"2"}}]}}"#;

    #[test]
    fn reads_a_record() {
        let r = parse_record(RECORD, Path::new("a.log"), 3).unwrap();
        assert_eq!(r.id, "abc");
        assert_eq!(r.client_ip, "10.0.0.7");
        assert_eq!(r.method, "POST");
        assert_eq!(r.protocol, "HTTP/1.1");
        assert_eq!(r.path(), "/blog/post 1");
        assert_eq!(r.body, b"comment=hey");
        assert_eq!(r.status, 403);
        assert!(r.refused());
        assert_eq!(r.hits.len(), 1);
        assert_eq!(r.hits[0].rule_id, 942100);
        assert_eq!(r.hits[0].var, "ARGS:comment");
        assert_eq!(r.hits[0].value, "it's a `test");
        assert_eq!(r.hits[0].severity, Some(2));
    }

    #[test]
    fn refuses_records_without_the_parts_replay_needs() {
        let no_headers = RECORD.replace(
            r#""headers":{"Host":"example.com","Content-Length":"11"},"#,
            "",
        );
        let e = parse_record(&no_headers, Path::new("a.log"), 3).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("a.log:3"), "{text}");
        assert!(text.contains("part B"), "{text}");
        assert!(text.contains(NEEDED_PARTS), "{text}");
        let no_body = RECORD.replace(r#","body":"comment=hey""#, "");
        let e = parse_record(&no_body, Path::new("a.log"), 4).unwrap_err();
        assert!(e.to_string().contains("part C"), "{e}");
        let no_messages = RECORD
            .replace(r#","producer""#, r#","x""#)
            .replace(r#""messages":"#, r#""other":"#);
        let e = parse_record(&no_messages, Path::new("a.log"), 5).unwrap_err();
        assert!(e.to_string().contains("part H"), "{e}");
    }

    #[test]
    fn refuses_what_is_not_a_json_record() {
        for bad in [
            "--1a2b-A--",
            "{}",
            "[1]",
            r#"{"transaction":{"request":{}}}"#,
        ] {
            let e = parse_record(bad, Path::new("b.log"), 9).unwrap_err();
            assert!(
                matches!(e, AuditError::NotJson { line: 9, .. }),
                "{bad}: {e}"
            );
            assert!(e.to_string().contains("SecAuditLogFormat JSON"), "{e}");
        }
    }

    #[test]
    fn reads_a_file_and_names_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("tune-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("audit.log");
        std::fs::write(&f, format!("{RECORD}\n\n{RECORD}\nnot json\n")).unwrap();
        let e = read(&f).unwrap_err();
        assert!(matches!(e, AuditError::NotJson { line: 4, .. }), "{e}");
        std::fs::write(&f, format!("{RECORD}\n{RECORD}\n")).unwrap();
        assert_eq!(read(&f).unwrap().len(), 2);
        let e = read(&dir.join("none.log")).unwrap_err();
        assert!(e.to_string().contains("none.log"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn paths_as_request_filename_holds_them() {
        assert_eq!(request_path("/a/b?c=d#e"), "/a/b");
        assert_eq!(request_path("http://h:80/x%2Fy?q"), "/x/y");
        assert_eq!(request_path("http://h"), "/");
        assert_eq!(split_match("no match text"), (String::new(), String::new()));
    }
}
