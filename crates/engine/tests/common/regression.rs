//! The CRS regression tests' requests (../shared/crs/tests/regression/tests) as
//! go-ftw sends them, and the backend's answers, for tests that run them through
//! the engine without HTTP.

use base64::Engine as _;
use serde_norway::Value;
use std::path::{Path, PathBuf};

/// Every YAML file under `dir`, sorted, recursively.
pub fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

/// A request of a CRS regression test, as go-ftw would send it.
pub struct Request {
    /// The method.
    pub method: Vec<u8>,
    /// The request target.
    pub uri: Vec<u8>,
    /// The protocol.
    pub version: Vec<u8>,
    /// The headers, in order.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

/// A YAML scalar as text.
pub fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A raw HTTP/1 request split into its parts (head up to the first empty line).
pub fn parse_raw(raw: &[u8]) -> Request {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, p + 4));
    let head_end = head_end.or_else(|| {
        raw.windows(2)
            .position(|w| w == b"\n\n")
            .map(|p| (p, p + 2))
    });
    let (head, body) = match head_end {
        Some((h, b)) => (&raw[..h], &raw[b..]),
        None => (raw, &b""[..]),
    };
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let line = lines.next().unwrap_or(b"");
    let parts: Vec<&[u8]> = line
        .split(|&b| b == b' ')
        .filter(|p| !p.is_empty())
        .collect();
    let mut headers = Vec::new();
    for l in lines {
        if let Some(p) = l.iter().position(|&b| b == b':') {
            let v = &l[p + 1..];
            let v = v.strip_prefix(b" ").unwrap_or(v);
            headers.push((l[..p].to_vec(), v.to_vec()));
        }
    }
    Request {
        method: parts.first().map(|p| p.to_vec()).unwrap_or_default(),
        uri: parts.get(1).map(|p| p.to_vec()).unwrap_or_default(),
        version: parts.get(2).map(|p| p.to_vec()).unwrap_or_default(),
        headers,
        body: body.to_vec(),
    }
}

/// A stage's `input` as the request go-ftw sends.
pub fn build_request(input: &Value) -> Request {
    if let Some(enc) = input.get("encoded_request").and_then(text) {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(enc.trim())
            .unwrap_or_default();
        return parse_raw(&raw);
    }
    let get = |k: &str| input.get(k).and_then(text);
    let mut headers: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    if let Some(Value::Mapping(m)) = input.get("headers") {
        for (k, v) in m {
            if let (Some(k), Some(v)) = (text(k), text(v)) {
                headers.push((k.into_bytes(), v.into_bytes()));
            }
        }
    }
    let mut body = get("data").unwrap_or_default().into_bytes();
    let method = get("method").unwrap_or_else(|| "GET".into());
    let autocomplete = input
        .get("autocomplete_headers")
        .and_then(Value::as_bool)
        .or_else(|| input.get("stop_magic").and_then(Value::as_bool).map(|b| !b))
        .unwrap_or(true);
    let has = |n: &[u8], h: &[(Vec<u8>, Vec<u8>)]| h.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    // What go-ftw does to a request before sending it.
    if !body.is_empty() && autocomplete {
        if !has(b"content-type", &headers) {
            headers.push((
                b"Content-Type".to_vec(),
                b"application/x-www-form-urlencoded".to_vec(),
            ));
        }
        let urlencoded = headers.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case(b"content-type") && v == b"application/x-www-form-urlencoded"
        });
        if urlencoded && let Some(encoded) = go_form_encode(&body) {
            body = encoded;
        }
    }
    if headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case(b"content-type")
            && v.windows(20).any(|w| w == b"multipart/form-data;")
    }) {
        let mut crlf = Vec::with_capacity(body.len());
        for &b in &body {
            if b == b'\n' {
                crlf.extend_from_slice(b"\r\n");
            } else {
                crlf.push(b);
            }
        }
        body = crlf;
    }
    if autocomplete {
        if !has(b"connection", &headers) {
            headers.push((b"Connection".to_vec(), b"close".to_vec()));
        }
        let body_method = method.starts_with("POST")
            || method.contains("PUT")
            || method.contains("PATCH")
            || method.ends_with("DELETE");
        if !has(b"content-length", &headers) && (!body.is_empty() || body_method) {
            headers.push((
                b"Content-Length".to_vec(),
                body.len().to_string().into_bytes(),
            ));
        }
    }
    Request {
        method: method.into_bytes(),
        uri: get("uri").unwrap_or_else(|| "/".into()).into_bytes(),
        version: get("version")
            .unwrap_or_else(|| "HTTP/1.1".into())
            .into_bytes(),
        headers,
        body,
    }
}

/// go-ftw url-encodes `key=value` pairs of a form body that is not encoded yet (when
/// decoding it would change nothing); `None` leaves the body as it is.
fn go_form_encode(data: &[u8]) -> Option<Vec<u8>> {
    // Would Go's QueryUnescape change it, or fail on it?
    // Go's QueryUnescape changes any `+` or `%XX` and fails on a bad `%`; either way
    // the body is left alone.
    if data.iter().any(|&b| b == b'+' || b == b'%') {
        return None;
    }
    let escape = |s: &[u8], out: &mut Vec<u8>| {
        for &b in s {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b),
                b' ' => out.push(b'+'),
                _ => out.extend_from_slice(format!("%{b:02X}").as_bytes()),
            }
        }
    };
    let mut out = Vec::with_capacity(data.len() * 2);
    for (n, token) in data.split(|&b| b == b'&').enumerate() {
        if n > 0 {
            out.push(b'&');
        }
        match token.iter().position(|&b| b == b'=') {
            Some(p) => {
                escape(&token[..p], &mut out);
                out.push(b'=');
                escape(&token[p + 1..], &mut out);
            }
            None => escape(token, &mut out),
        }
    }
    Some(out)
}

/// Header name/value pairs.
pub type Headers = Vec<(Vec<u8>, Vec<u8>)>;

/// The albedo backend's answer to a request: 200, or what `/reflect` asks for.
pub fn response(req: &Request) -> (u16, Headers, Vec<u8>) {
    if req.uri.starts_with(b"/reflect")
        && let Ok(spec) = serde_json::from_slice::<serde_json::Value>(&req.body)
    {
        let status = spec
            .get("status")
            .and_then(|s| s.as_u64())
            .filter(|&s| s > 0)
            .unwrap_or(200) as u16;
        let mut headers = Vec::new();
        if let Some(h) = spec.get("headers").and_then(|h| h.as_object()) {
            for (k, v) in h {
                headers.push((
                    k.as_bytes().to_vec(),
                    v.as_str().unwrap_or("").as_bytes().to_vec(),
                ));
            }
        }
        let mut body = spec
            .get("body")
            .and_then(|b| b.as_str())
            .unwrap_or("")
            .as_bytes()
            .to_vec();
        if body.is_empty()
            && let Some(e) = spec.get("encodedBody").and_then(|b| b.as_str())
        {
            body = base64::engine::general_purpose::STANDARD
                .decode(e)
                .unwrap_or_default();
        }
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(b"content-type"))
        {
            headers.push((
                b"Content-Type".to_vec(),
                b"text/plain; charset=utf-8".to_vec(),
            ));
        }
        return (status, headers, body);
    }
    (
        200,
        vec![(b"Content-Type".to_vec(), b"text/plain".to_vec())],
        Vec::new(),
    )
}
