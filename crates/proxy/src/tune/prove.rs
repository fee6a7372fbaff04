//! The proof of exclusions: requests replayed through the rule set, in process and
//! without I/O, with and without the exclusions.
//!
//! The rule set is built from the configuration as `palisade run` builds it (the
//! `[[rules]]` in order and the `[[site]]` overlays), with the exclusion text in
//! the places the written files take ([`Extra`]). A request replays through phases
//! 1 and 2 (request line, headers, body) of the site `palisade run` would choose
//! for it; it is blocked when the rules decide an intervention (deny, drop,
//! redirect, or a refusal by a body limit). Response phases are not replayed.

use super::audit::Recorded;
use crate::config::{Config, RuleSource};
use crate::waf::{BodyFeed, Waf};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// A request to replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// What the report calls it (a record's unique id, an attack's label).
    pub label: String,
    /// The client's address.
    pub client: IpAddr,
    /// The method.
    pub method: String,
    /// The request target.
    pub uri: String,
    /// `HTTP/1.1` and the like.
    pub protocol: String,
    /// The headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl From<&Recorded> for Request {
    fn from(r: &Recorded) -> Request {
        Request {
            label: r.id.clone(),
            client: r
                .client_ip
                .parse()
                .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            method: r.method.clone(),
            uri: r.uri.clone(),
            protocol: r.protocol.clone(),
            headers: r.headers.clone(),
            body: r.body.clone(),
        }
    }
}

/// What the rules made of one replayed request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// Refused.
    pub blocked: bool,
    /// The status of the refusal (0 when passed or dropped).
    pub status: u16,
    /// The rule that decided, if one did.
    pub rule_id: Option<i64>,
    /// The matches: rule and variable ([`super::group::finding_var`]).
    pub hits: Vec<(i64, String)>,
    /// The same matches with their values, severities and messages (for a next
    /// pass of proposals over what still blocks a request).
    #[serde(skip)]
    pub details: Vec<super::audit::Hit>,
}

/// Exclusion text to load beside the configured rules: where the tune files go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extra {
    /// Loaded before the rules (or in place of the `tune-before.conf` entry).
    pub before: String,
    /// Loaded after the rules (or in place of the `tune-after.conf` entry).
    pub after: String,
    /// Per site: added to its `[[site.rules]]` (or in place of its
    /// `tune-site-NAME.conf` entry).
    pub sites: BTreeMap<String, String>,
}

/// Why a rule set for the proof could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The rules did not load.
    #[error("the rules with the exclusions did not load: {0}")]
    Rules(String),
    /// An exclusion is for a site the configuration does not have.
    #[error("site {0:?} is not in the configuration")]
    NoSite(String),
}

/// Whether a rule source is the file named `name`.
pub fn is_file(src: &RuleSource, name: &str) -> bool {
    src.file
        .as_deref()
        .and_then(Path::file_name)
        .is_some_and(|f| f == name)
}

/// The rule sources of `cfg` with the exclusion text put in place: an entry for
/// the tune file is replaced by the text; without one, the text goes first (before)
/// or last (after).
fn with_extra(sources: &[RuleSource], name: &str, text: &str, first: bool) -> Vec<RuleSource> {
    let inline = RuleSource {
        file: None,
        inline: Some(text.to_owned()),
    };
    let mut out: Vec<RuleSource> = Vec::with_capacity(sources.len() + 1);
    let mut placed = false;
    for s in sources {
        if is_file(s, name) {
            if !placed {
                out.push(inline.clone());
                placed = true;
            }
        } else {
            out.push(s.clone());
        }
    }
    if !placed && !text.trim().is_empty() {
        if first {
            out.insert(0, inline);
        } else {
            out.push(inline);
        }
    }
    out
}

/// Builds the rule set of `cfg` as `palisade run` does, with `extra` (`None`: as
/// configured).
pub fn build(cfg: &Config, extra: Option<&Extra>) -> Result<Waf, BuildError> {
    let mut cfg = cfg.clone();
    if let Some(x) = extra {
        cfg.rules = with_extra(&cfg.rules, super::BEFORE_FILE, &x.before, true);
        cfg.rules = with_extra(&cfg.rules, super::AFTER_FILE, &x.after, false);
        for (name, text) in &x.sites {
            let site = cfg
                .sites
                .iter_mut()
                .find(|s| &s.name == name)
                .ok_or_else(|| BuildError::NoSite(name.clone()))?;
            let file = format!("tune-site-{name}.conf");
            site.rules = with_extra(&site.rules, &file, text, false);
        }
    }
    crate::app::load_waf(&cfg, None).map_err(|e| BuildError::Rules(e.to_string()))
}

/// Replays one request (`n` makes its unique id).
pub fn replay(waf: &Waf, r: &Request, n: usize) -> Outcome {
    let host = r
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.as_bytes());
    let site = waf.sites().select(host, r.uri.as_bytes());
    let mut tx = waf.site_transaction(
        site,
        SocketAddr::new(r.client, 40000),
        None,
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 80),
        format!("tune-replay-{n}"),
        crate::logs::now_unix_micros(),
        None,
        None,
    );
    tx.request_line(r.method.as_bytes(), r.uri.as_bytes(), r.protocol.as_bytes());
    for (k, v) in &r.headers {
        tx.request_header(k.as_bytes(), v.as_bytes());
    }
    let mut verdict = tx.request_headers_done();
    let mut refused_body = false;
    if verdict.is_none() {
        if tx.wants_request_body() && !r.body.is_empty() {
            refused_body = tx.request_body(&r.body) == BodyFeed::LimitReject;
        }
        if !refused_body {
            verdict = tx.request_body_done();
        }
    }
    let mut hits = Vec::new();
    let mut details = Vec::new();
    while let Some(e) = tx.poll_event() {
        if let engine::Event::RuleMatched(m) = e {
            let data = m.log_line.as_deref().map_or("", super::group::logged_data);
            let rule = m.rule_id.unwrap_or(0);
            let var = super::group::finding_var(&m.var_name, data);
            let var = super::group::resolve_tx(var, rule, &|id| waf.rule_targets(id));
            hits.push((rule, var.clone()));
            details.push(super::audit::Hit {
                rule_id: rule,
                var,
                value: m.value,
                severity: m.severity,
                message: m.msg.unwrap_or_default(),
                data: String::new(),
            });
        }
    }
    tx.close();
    match verdict {
        Some(v) => Outcome {
            blocked: true,
            status: v.status,
            rule_id: v.rule_id,
            hits,
            details,
        },
        None if refused_body => Outcome {
            blocked: true,
            status: 413,
            rule_id: None,
            hits,
            details,
        },
        None => Outcome {
            blocked: false,
            status: 0,
            rule_id: None,
            hits,
            details,
        },
    }
}

/// Replays every request, in parallel.
pub fn replay_all(waf: &Waf, requests: &[Request]) -> Vec<Outcome> {
    requests
        .par_iter()
        .enumerate()
        .map(|(n, r)| replay(waf, r, n))
        .collect()
}

/// Why an attack corpus could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AttackError {
    /// The file could not be read.
    #[error("attack corpus {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The reason.
        reason: std::io::Error,
    },
    /// A line is not an attack request.
    #[error(
        "attack corpus {path}:{line}: {why} (each line: a JSON object with method, uri, headers as [[name, value], ...] and body or body_base64)"
    )]
    Bad {
        /// The file.
        path: PathBuf,
        /// The line (from 1).
        line: usize,
        /// What is wrong.
        why: String,
    },
}

/// Reads an attack corpus: JSON lines, each `{"method", "uri", "headers":
/// [[name, value], ...] or {name: value}, "body" (text) or "body_base64", "label"
/// (optional)}`.
pub fn read_attacks(path: &Path) -> Result<Vec<Request>, AttackError> {
    let text = std::fs::read_to_string(path).map_err(|reason| AttackError::Read {
        path: path.to_owned(),
        reason,
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: String| AttackError::Bad {
            path: path.to_owned(),
            line: line_no,
            why,
        };
        out.push(parse_attack(line, line_no).map_err(bad)?);
    }
    Ok(out)
}

/// Parses one line of an attack corpus.
fn parse_attack(line: &str, line_no: usize) -> Result<Request, String> {
    use base64::Engine as _;
    use serde_json::Value;
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let field = |k: &str| -> Result<String, String> {
        v.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| format!("no {k:?}"))
    };
    let method = field("method")?;
    let uri = field("uri")?;
    if !uri.starts_with('/') {
        return Err(format!("uri {uri:?} does not start with /"));
    }
    let headers = match v.get("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|h| match h.as_array().map(Vec::as_slice) {
                Some([Value::String(k), Value::String(v)]) => Ok((k.clone(), v.clone())),
                _ => Err("a header is not [name, value]".to_owned()),
            })
            .collect::<Result<_, _>>()?,
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
            .collect(),
        Some(_) => return Err("headers is neither a list nor an object".to_owned()),
    };
    let body = match (
        v.get("body").and_then(Value::as_str),
        v.get("body_base64").and_then(Value::as_str),
    ) {
        (_, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| format!("body_base64: {e}"))?,
        (Some(t), None) => t.as_bytes().to_vec(),
        (None, None) => Vec::new(),
    };
    let label = v
        .get("label")
        .and_then(Value::as_str)
        .map_or_else(|| format!("attack line {line_no}"), str::to_owned);
    Ok(Request {
        label,
        client: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 66)),
        method,
        uri,
        protocol: "HTTP/1.1".to_owned(),
        headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attack_lines() {
        let r = parse_attack(
            r#"{"method":"POST","uri":"/c","headers":[["Content-Type","text/plain"]],"body_base64":"aGk=","label":"sql 1"}"#,
            1,
        )
        .unwrap();
        assert_eq!(r.body, b"hi");
        assert_eq!(r.label, "sql 1");
        assert_eq!(
            r.headers,
            [("Content-Type".to_owned(), "text/plain".to_owned())]
        );
        let r = parse_attack(
            r#"{"method":"GET","uri":"/?q=1","headers":{"Host":"a"}}"#,
            7,
        )
        .unwrap();
        assert_eq!(r.label, "attack line 7");
        for (bad, want) in [
            ("nope", "not JSON"),
            (r#"{"uri":"/"}"#, "no \"method\""),
            (r#"{"method":"GET","uri":"x"}"#, "does not start with /"),
            (
                r#"{"method":"GET","uri":"/","headers":[1]}"#,
                "[name, value]",
            ),
            (
                r#"{"method":"GET","uri":"/","body_base64":"%%"}"#,
                "body_base64",
            ),
        ] {
            let e = parse_attack(bad, 1).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn attack_files_name_the_line() {
        let dir = std::env::temp_dir().join(format!("tune-attacks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.jsonl");
        std::fs::write(
            &f,
            "{\"method\":\"GET\",\"uri\":\"/\"}\n\n{\"method\":\"GET\"}\n",
        )
        .unwrap();
        let e = read_attacks(&f).unwrap_err();
        assert!(e.to_string().contains("a.jsonl:3"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn extra_text_takes_the_tune_files_place() {
        let file = |p: &str| RuleSource {
            file: Some(PathBuf::from(p)),
            inline: None,
        };
        let sources = vec![
            file("/etc/a.conf"),
            file("/etc/tune/tune-before.conf"),
            file("/crs/*.conf"),
        ];
        let out = with_extra(&sources, "tune-before.conf", "X", true);
        assert_eq!(out.len(), 3);
        assert_eq!(out[1].inline.as_deref(), Some("X"));
        let out = with_extra(&sources, "tune-after.conf", "Y", false);
        assert_eq!(out.len(), 4);
        assert_eq!(out[3].inline.as_deref(), Some("Y"));
        let out = with_extra(&sources, "tune-after.conf", "", false);
        assert_eq!(out.len(), 3);
    }
}
