//! The decode stage: each value is also offered in every form a chain of standard
//! decodings yields, so that what an application decodes before use is inspected
//! too.
//!
//! | step | when | result |
//! |---|---|---|
//! | `url` | `%XX` or `%uXXXX` escapes | the value percent-decoded (again: parsed arguments are decoded once already) |
//! | `base64` | the value (or what follows one leading word, as in `Basic ...`) is base64 or base64url, at least 4 characters, not letters of one case alone or digits alone | the decoded bytes, kept only when they are mostly text, a serialized object (Java stream, pickle, .NET ObjectStateFormatter as in a ViewState) or a gzip or zlib stream |
//! | `datauri` | `data:...;base64,...` | the decoded payload, when text or a serialized object |
//! | `jwt` | three base64url parts, the first starting `eyJ` | the header and the claims, as JSON |
//! | `gzip` | a gzip or zlib stream (as base64 of a compressed object yields) | the inflated bytes, at most [`MAX_INFLATED`], kept when worth keeping as for `base64` |
//! | `hex` | at least 8 hex digits (even, not all decimal), after an optional `0x` | the decoded bytes, when mostly text or a serialized object |
//! | `jsescape` | `\uXXXX`, `\u{X}`, `\xXX`, `\n`-style escapes | the unescaped string |
//! | `html` | `&#...;`, `&#x...;` or a named character reference | the text with references decoded |
//! | `utf16` | every other byte NUL | the text decoded from UTF-16 (LE or BE) |
//! | `utf8` | overlong UTF-8 encodings of ASCII | the ASCII they stand for |
//! | `json` | `{...}` or `[...]` that parses | each leaf, named by its path (`\|json:user.name`) |
//! | `xml` | `<...>` that parses | each text and attribute value |
//! | `graphql` | a GraphQL document (`query`, `mutation`, `{ field(arg: ...) }`) | each argument value, named by the argument (`\|graphql:id`) |
//!
//! Steps chain up to [`MAX_DEPTH`] deep (`base64` of `url` of `json`...). A result
//! equal to its parent, or empty, is not kept. The whole stage adds at most
//! [`MAX_DECODED_BYTES`] bytes per transaction; past that a value is not decoded
//! further (and the table counts it as dropped). Each step is linear in its input.

use super::{Inputs, Source};
use crate::body;
use base64::Engine as _;

/// How many decoding steps may chain.
pub const MAX_DEPTH: u8 = 3;

/// The most bytes of decoded values per transaction.
pub const MAX_DECODED_BYTES: usize = 1 << 20;

/// The most bytes one `gzip` step inflates (a compressed serialized object or
/// document is far smaller; a bomb stops here).
pub const MAX_INFLATED: usize = 256 << 10;

/// The shortest value tried as hex.
const MIN_ENCODED: usize = 8;

/// The shortest value tried as base64 (`fCBpZA` is `| id`): short random
/// identifiers decode to bytes that are rarely all text, and only text is kept.
const MIN_BASE64: usize = 4;

/// Decodes entry `id` and, breadth first, what its decodings yield.
pub(super) fn expand(inputs: &mut Inputs, id: u32) {
    let mut work = vec![id];
    while let Some(id) = work.pop() {
        let entry = &inputs.entries[id as usize];
        if entry.depth >= MAX_DEPTH || entry.value.is_empty() {
            continue;
        }
        let value = entry.value.clone();
        let name = entry.name.clone();
        let depth = entry.depth;
        for (step, child) in decodings(&value, &name) {
            if child.is_empty() || child == value {
                continue;
            }
            if inputs.decoded_bytes + child.len() > MAX_DECODED_BYTES {
                inputs.dropped += 1;
                continue;
            }
            inputs.decoded_bytes += child.len();
            let mut child_name = name.clone();
            child_name.push(b'|');
            child_name.extend_from_slice(&step);
            if let Some(c) = inputs.push(
                Source::Decoded,
                child_name,
                child,
                Some(id),
                depth + 1,
                None,
            ) {
                work.push(c);
            }
        }
    }
}

/// Every decoding of `value` (its step name and result).
/// What one pass over a value's bytes says about which steps can apply.
#[derive(Default)]
struct Shape {
    percent: bool,
    backslash: bool,
    ampersand: bool,
    nul: bool,
    high: bool,
    /// Only base64 (or base64url) bytes, `=` and spaces: base64, hex, a JWT.
    encoded: bool,
    colon: bool,
}

fn shape(v: &[u8]) -> Shape {
    let mut s = Shape {
        encoded: true,
        ..Shape::default()
    };
    for &c in v {
        match c {
            b'%' => s.percent = true,
            b'\\' => s.backslash = true,
            b'&' => s.ampersand = true,
            0 => s.nul = true,
            b':' => s.colon = true,
            0x80.. => s.high = true,
            _ => {}
        }
        s.encoded &= c.is_ascii_alphanumeric()
            || matches!(c, b'+' | b'/' | b'-' | b'_' | b'=' | b' ' | b'.');
    }
    s
}

fn decodings(value: &[u8], name: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut add = |step: &str, v: Vec<u8>| out.push((step.as_bytes().to_vec(), v));
    // Each step's trigger, from one pass: most values need no step at all.
    let sh = shape(value);
    if sh.percent
        && let Some(v) = url(value)
    {
        add("url", v);
    }
    if sh.colon
        && let Some(v) = data_uri(value)
    {
        add("datauri", v);
    } else if sh.encoded {
        if let Some(parts) = jwt(value) {
            for p in parts {
                add("jwt", p);
            }
        } else if let Some(v) = base64(value) {
            add("base64", v);
        }
        if let Some(v) = hex(value) {
            add("hex", v);
        }
    }
    if compressed(value)
        && let Some(v) = inflate(value)
    {
        add("gzip", v);
    }
    if sh.backslash
        && let Some(v) = js_escapes(value)
    {
        add("jsescape", v);
    }
    if sh.ampersand
        && let Some(v) = html(value)
    {
        add("html", v);
    }
    if sh.nul
        && let Some(v) = utf16(value)
    {
        add("utf16", v);
    }
    if sh.high
        && let Some(v) = overlong_utf8(value)
    {
        add("utf8", v);
    }
    let t = value.trim_ascii();
    if t.len() >= 2 && matches!((t[0], t[t.len() - 1]), (b'{', b'}') | (b'[', b']')) {
        for (k, v) in json(t) {
            let mut step = b"json:".to_vec();
            step.extend_from_slice(&k);
            out.push((step, v));
        }
    }
    if t.first() == Some(&b'<')
        && (memchr::memmem::find(t, b"</").is_some() || t.ends_with(b"/>"))
        && !rich_text(t)
    {
        for v in xml(t) {
            out.push((b"xml".to_vec(), v));
        }
    }
    let graphql_name = name.ends_with(b"query") || name.ends_with(b"mutation");
    if graphql_name || super::graphql::looks_like_document(t) {
        for (k, v) in super::graphql::arguments(t) {
            let mut step = b"graphql:".to_vec();
            step.extend_from_slice(&k);
            out.push((step, v));
        }
    }
    out
}

/// The value with its percent escapes decoded (itself when it has none).
pub(super) fn percent_decoded(v: &[u8]) -> Vec<u8> {
    url(v).unwrap_or_else(|| v.to_vec())
}

/// Percent escapes decoded, when there are any.
fn url(v: &[u8]) -> Option<Vec<u8>> {
    let has_escape = v
        .windows(3)
        .any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit())
        || v.windows(2)
            .any(|w| w[0] == b'%' && matches!(w[1], b'u' | b'U'));
    if !has_escape {
        return None;
    }
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'%' {
            if let Some(b) = v
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok())
            {
                out.push(b);
                i += 3;
                continue;
            }
            if matches!(v.get(i + 1), Some(b'u' | b'U'))
                && let Some(c) = v
                    .get(i + 2..i + 6)
                    .and_then(|h| u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok())
                    .and_then(char::from_u32)
            {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                i += 6;
                continue;
            }
        }
        out.push(v[i]);
        i += 1;
    }
    Some(out)
}

/// Whether decoded bytes are worth inspecting: mostly text, a container, or a
/// serialized object.
fn worth_keeping(d: &[u8]) -> bool {
    if d.len() < 4 {
        return false;
    }
    if d.starts_with(b"\xac\xed\x00\x05")
        || (d.len() > 2 && d[0] == 0x80 && (2..=5).contains(&d[1]))
        || compressed(d)
        || d.starts_with(&[0xff, 0x01])
    {
        return true;
    }
    match std::str::from_utf8(d) {
        Ok(s) => {
            s.chars()
                .filter(|c| !c.is_control() || c.is_whitespace())
                .count()
                * 100
                >= s.chars().count() * 90
        }
        Err(_) => {
            let printable = d
                .iter()
                .filter(|&&b| (0x20..0x7f).contains(&b) || matches!(b, b'\t' | b'\n' | b'\r'))
                .count();
            printable * 100 >= d.len() * 95
        }
    }
}

/// Whether `d` starts as a gzip stream (magic and deflate method) or a zlib stream
/// (deflate, a 32 KiB window, and the header's check bits right).
fn compressed(d: &[u8]) -> bool {
    match d {
        [0x1f, 0x8b, 0x08, ..] => true,
        [0x78, flg, ..] => (u16::from(0x78u8) << 8 | u16::from(*flg)) % 31 == 0 && flg & 0x20 == 0,
        _ => false,
    }
}

/// The stream inflated (up to [`MAX_INFLATED`] bytes), when what comes out is worth
/// keeping; a corrupt stream yields what inflated before the damage.
fn inflate(d: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut out = Vec::new();
    let limit = MAX_INFLATED as u64;
    // A read error past some output (a truncated or damaged stream) keeps that
    // output: an attacker gains nothing by breaking the stream's tail.
    let _ = if d[0] == 0x1f {
        flate2::read::GzDecoder::new(d)
            .take(limit)
            .read_to_end(&mut out)
    } else {
        flate2::read::ZlibDecoder::new(d)
            .take(limit)
            .read_to_end(&mut out)
    };
    worth_keeping(&out).then_some(out)
}

fn is_b64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'-' | b'_')
}

/// A base64 or base64url value (padded or not) decoded, when worth keeping. The
/// value may be preceded by one word and a space (`Basic dXNlcjpw...`).
fn base64(v: &[u8]) -> Option<Vec<u8>> {
    let t = v.trim_ascii();
    let t = match t.iter().rposition(|&c| c == b' ') {
        Some(p) if p <= 16 && t[..p].iter().all(|c| c.is_ascii_alphabetic()) => &t[p + 1..],
        _ => t,
    };
    let body = t
        .strip_suffix(b"==")
        .or_else(|| t.strip_suffix(b"="))
        .unwrap_or(t);
    if body.len() < MIN_BASE64 || !body.iter().all(|&c| is_b64(c)) || body.len() % 4 == 1 {
        return None;
    }
    // Words and identifiers of letters only, and plain numbers, are not encodings.
    let digits = body.iter().filter(|c| c.is_ascii_digit()).count();
    let upper = body.iter().filter(|c| c.is_ascii_uppercase()).count();
    let lower = body.iter().filter(|c| c.is_ascii_lowercase()).count();
    if digits == body.len()
        || (upper == 0 && digits == 0)
        || (lower == 0 && digits == 0 && !body.contains(&b'+'))
    {
        return None;
    }
    let url_safe = body.iter().any(|&c| c == b'-' || c == b'_');
    let engine = if url_safe {
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
    } else {
        &base64::engine::general_purpose::STANDARD_NO_PAD
    };
    let decoded = engine.decode(body).ok()?;
    worth_keeping(&decoded).then_some(decoded)
}

/// The payload of a `data:` URI with `;base64,`, when text.
fn data_uri(v: &[u8]) -> Option<Vec<u8>> {
    let t = v.trim_ascii();
    if !t.get(..5).is_some_and(|p| p.eq_ignore_ascii_case(b"data:")) {
        return None;
    }
    let comma = memchr::memchr(b',', t)?;
    let meta = &t[..comma];
    if !meta.to_ascii_lowercase().ends_with(b";base64") {
        return None;
    }
    let payload = &t[comma + 1..];
    let payload = payload
        .strip_suffix(b"==")
        .or_else(|| payload.strip_suffix(b"="))
        .unwrap_or(payload);
    let decoded = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(payload)
        .ok()?;
    worth_keeping(&decoded).then_some(decoded)
}

/// A JSON Web Token's header and claims.
fn jwt(v: &[u8]) -> Option<Vec<Vec<u8>>> {
    let t = v.trim_ascii();
    let t = match t.iter().rposition(|&c| c == b' ') {
        Some(p) => &t[p + 1..],
        None => t,
    };
    if !t.starts_with(b"eyJ") {
        return None;
    }
    let parts: Vec<&[u8]> = t.split(|&c| c == b'.').collect();
    if parts.len() != 3 {
        return None;
    }
    let mut out = Vec::new();
    for p in &parts[..2] {
        let d = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(p)
            .ok()?;
        out.push(d);
    }
    Some(out)
}

/// Hex digits (at least [`MIN_ENCODED`], an even number, or after `0x`) decoded,
/// when worth keeping.
fn hex(v: &[u8]) -> Option<Vec<u8>> {
    let t = v.trim_ascii();
    let t = t
        .strip_prefix(b"0x")
        .or_else(|| t.strip_prefix(b"0X"))
        .unwrap_or(t);
    if t.len() < MIN_ENCODED
        || !t.len().is_multiple_of(2)
        || !t.iter().all(u8::is_ascii_hexdigit)
        || t.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    let decoded: Vec<u8> = t
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap_or("00"), 16).unwrap_or(0))
        .collect();
    worth_keeping(&decoded).then_some(decoded)
}

/// JavaScript and JSON string escapes decoded, when there are any.
fn js_escapes(v: &[u8]) -> Option<Vec<u8>> {
    let has = v
        .windows(2)
        .any(|w| w[0] == b'\\' && matches!(w[1], b'u' | b'x' | b'U' | b'X'));
    if !has {
        return None;
    }
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    let hexval = |s: &[u8]| u32::from_str_radix(std::str::from_utf8(s).ok()?, 16).ok();
    while i < v.len() {
        if v[i] == b'\\' && i + 1 < v.len() {
            let n = v[i + 1];
            match n {
                b'u' | b'U' if v.get(i + 2) == Some(&b'{') => {
                    if let Some(close) = v[i + 3..].iter().take(8).position(|&c| c == b'}')
                        && let Some(c) = hexval(&v[i + 3..i + 3 + close])
                        && push_char(&mut out, c)
                    {
                        i += close + 4;
                        continue;
                    }
                }
                b'u' | b'U' => {
                    if let Some(c) = v.get(i + 2..i + 6).and_then(hexval) {
                        // A surrogate pair.
                        if (0xd800..0xdc00).contains(&c)
                            && v.get(i + 6) == Some(&b'\\')
                            && matches!(v.get(i + 7), Some(b'u' | b'U'))
                            && let Some(lo) = v.get(i + 8..i + 12).and_then(hexval)
                            && (0xdc00..0xe000).contains(&lo)
                        {
                            let c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
                            if push_char(&mut out, c) {
                                i += 12;
                                continue;
                            }
                        }
                        if push_char(&mut out, c) {
                            i += 6;
                            continue;
                        }
                    }
                }
                b'x' | b'X' => {
                    if let Some(c) = v.get(i + 2..i + 4).and_then(hexval) {
                        out.push(c as u8);
                        i += 4;
                        continue;
                    }
                }
                b'n' => {
                    out.push(b'\n');
                    i += 2;
                    continue;
                }
                b'r' => {
                    out.push(b'\r');
                    i += 2;
                    continue;
                }
                b't' => {
                    out.push(b'\t');
                    i += 2;
                    continue;
                }
                b'/' | b'\\' | b'"' | b'\'' => {
                    out.push(n);
                    i += 2;
                    continue;
                }
                _ => {}
            }
        }
        out.push(v[i]);
        i += 1;
    }
    Some(out)
}

/// Appends the UTF-8 encoding of code point `c`; false when it is not one.
fn push_char(out: &mut Vec<u8>, c: u32) -> bool {
    match char::from_u32(c) {
        Some(ch) => {
            let mut buf = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            true
        }
        None => false,
    }
}

/// Character references decoded, when there are any.
fn html(v: &[u8]) -> Option<Vec<u8>> {
    memchr::memchr(b'&', v)?;
    let named: [(&[u8], &[u8]); 16] = [
        (b"lt;", b"<"),
        (b"gt;", b">"),
        (b"quot;", b"\""),
        (b"apos;", b"'"),
        (b"amp;", b"&"),
        (b"nbsp;", b" "),
        (b"colon;", b":"),
        (b"lpar;", b"("),
        (b"rpar;", b")"),
        (b"sol;", b"/"),
        (b"bsol;", b"\\"),
        (b"tab;", b"\t"),
        (b"newline;", b"\n"),
        (b"semi;", b";"),
        (b"equals;", b"="),
        (b"num;", b"#"),
    ];
    let mut out = Vec::with_capacity(v.len());
    let mut changed = false;
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'&' {
            if v.get(i + 1) == Some(&b'#') {
                let (radix, start) = if matches!(v.get(i + 2), Some(b'x' | b'X')) {
                    (16, i + 3)
                } else {
                    (10, i + 2)
                };
                let digits = v[start..]
                    .iter()
                    .take(8)
                    .take_while(|c| (**c as char).is_digit(radix))
                    .count();
                if digits > 0
                    && let Some(c) = std::str::from_utf8(&v[start..start + digits])
                        .ok()
                        .and_then(|s| u32::from_str_radix(s, radix).ok())
                        .and_then(char::from_u32)
                {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    i = start + digits;
                    if v.get(i) == Some(&b';') {
                        i += 1;
                    }
                    changed = true;
                    continue;
                }
            }
            if let Some((name, rep)) = named.iter().find(|(n, _)| {
                v.get(i + 1..)
                    .is_some_and(|r| r.len() >= n.len() && r[..n.len()].eq_ignore_ascii_case(n))
            }) {
                out.extend_from_slice(rep);
                i += 1 + name.len();
                changed = true;
                continue;
            }
        }
        out.push(v[i]);
        i += 1;
    }
    changed.then_some(out)
}

/// UTF-16 text (little or big endian) decoded, when every other byte is NUL.
fn utf16(v: &[u8]) -> Option<Vec<u8>> {
    if v.len() < 4 || !v.len().is_multiple_of(2) {
        return None;
    }
    let even_nul = v.iter().step_by(2).filter(|&&b| b == 0).count();
    let odd_nul = v.iter().skip(1).step_by(2).filter(|&&b| b == 0).count();
    let half = v.len() / 2;
    let le = odd_nul * 10 >= half * 8;
    let be = even_nul * 10 >= half * 8;
    if !(le || be) {
        return None;
    }
    let units: Vec<u16> = v
        .chunks(2)
        .map(|p| {
            if le {
                u16::from_le_bytes([p[0], p[1]])
            } else {
                u16::from_be_bytes([p[0], p[1]])
            }
        })
        .collect();
    let s = String::from_utf16_lossy(&units);
    Some(s.into_bytes())
}

/// Elements that rich text (a comment box's or an editor's HTML) starts with.
const HTML_ELEMENTS: &[&str] = &[
    "p",
    "div",
    "span",
    "a",
    "b",
    "i",
    "u",
    "s",
    "em",
    "strong",
    "small",
    "code",
    "pre",
    "ul",
    "ol",
    "li",
    "br",
    "hr",
    "img",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "td",
    "th",
    "blockquote",
    "figure",
    "figcaption",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "main",
    "aside",
    "label",
    "sub",
    "sup",
    "mark",
    "del",
    "ins",
    "font",
    "center",
    "html",
    "body",
    "head",
    "dl",
    "dt",
    "dd",
    "q",
    "cite",
    "abbr",
    "video",
    "audio",
    "picture",
    "source",
    "iframe",
    "details",
    "summary",
];

/// Whether a value that starts with `<` is HTML rather than an XML document: its
/// first element is one of HTML's, or it starts with a comment. Its markup is then
/// read by the XSS detector as a whole, not split into text nodes (which would take
/// a `<code>` element's text for a value of its own).
fn rich_text(t: &[u8]) -> bool {
    if t.starts_with(b"<!--") {
        return true;
    }
    let name_end = 1 + t[1..]
        .iter()
        .take(16)
        .take_while(|c| c.is_ascii_alphanumeric())
        .count();
    let boundary = t
        .get(name_end)
        .is_none_or(|c| matches!(c, b'>' | b'/' | b' ' | b'\t' | b'\n' | b'\r'));
    boundary
        && HTML_ELEMENTS
            .iter()
            .any(|e| t[1..name_end].eq_ignore_ascii_case(e.as_bytes()))
}

/// Overlong UTF-8 encodings of ASCII (`C0 AF` for `/`) read as the ASCII byte.
fn overlong_utf8(v: &[u8]) -> Option<Vec<u8>> {
    let has = v
        .windows(2)
        .any(|w| matches!(w[0], 0xc0 | 0xc1) && (0x80..0xc0).contains(&w[1]))
        || v.windows(3)
            .any(|w| w[0] == 0xe0 && (0x80..0xa0).contains(&w[1]) && (0x80..0xc0).contains(&w[2]));
    if !has {
        return None;
    }
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        let b = v[i];
        if matches!(b, 0xc0 | 0xc1) && v.get(i + 1).is_some_and(|n| (0x80..0xc0).contains(n)) {
            out.push(((b & 0x1f) << 6) | (v[i + 1] & 0x3f));
            i += 2;
            continue;
        }
        if b == 0xe0
            && v.get(i + 1).is_some_and(|n| (0x80..0xa0).contains(n))
            && v.get(i + 2).is_some_and(|n| (0x80..0xc0).contains(n))
        {
            let cp = ((v[i + 1] as u32 & 0x3f) << 6) | (v[i + 2] as u32 & 0x3f);
            out.push(u8::try_from(cp).unwrap_or(b'?'));
            i += 3;
            continue;
        }
        out.push(b);
        i += 1;
    }
    // Binary data (an upload) holds such pairs by chance: only text is kept.
    mostly_text(&out).then_some(out)
}

/// The leaves of a JSON document, named by their path (without the `json.` the
/// body processor puts first).
fn json(t: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let limits = body::Limits {
        max_args: 256,
        json_depth: 32,
        multipart_parts: 0,
        max_files: 0,
    };
    match body::json::parse(t, &limits) {
        Ok(args) => args
            .into_iter()
            .map(|(k, v)| (k.strip_prefix(b"json.").map(<[u8]>::to_vec).unwrap_or(k), v))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The texts and attribute values of an XML document.
fn xml(t: &[u8]) -> Vec<Vec<u8>> {
    match body::xml::parse_partial(t) {
        Ok(doc) | Err((_, Some(doc))) => doc
            .texts
            .into_iter()
            .chain(doc.attributes)
            .filter(|v| !v.iter().all(u8::is_ascii_whitespace))
            .take(256)
            .collect(),
        Err((_, None)) => Vec::new(),
    }
}

/// Whether at least 90% of the first 4 KiB of `v` are text: characters of valid
/// UTF-8 other than control characters (tab, line feed and carriage return count as
/// text), by bytes. Binary data (an image, an archive) is not.
pub(super) fn mostly_text(v: &[u8]) -> bool {
    let head = &v[..v.len().min(4096)];
    let mut text = 0;
    for chunk in head.utf8_chunks() {
        text += chunk
            .valid()
            .chars()
            .filter(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r'))
            .map(char::len_utf8)
            .sum::<usize>();
    }
    text * 10 >= head.len() * 9
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(v: &str) -> Vec<(String, String)> {
        decodings(v.as_bytes(), b"ARGS:x")
            .into_iter()
            .map(|(s, v)| {
                (
                    String::from_utf8_lossy(&s).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn each_step() {
        // gzip of `' OR 1=1 --`, base64: inflated after the base64 step.
        let gz = {
            use std::io::Write as _;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(b"' OR 1=1 --").unwrap();
            e.finish().unwrap()
        };
        let b64 = base64::engine::general_purpose::STANDARD.encode(&gz);
        let (_, unpacked) = decodings(b64.as_bytes(), b"ARGS:x")
            .into_iter()
            .find(|(step, _)| step == b"base64")
            .expect("a gzip stream is kept by the base64 step");
        let inflated = decodings(&unpacked, b"ARGS:x|base64");
        assert_eq!(inflated, vec![(b"gzip".to_vec(), b"' OR 1=1 --".to_vec())]);
        // A bomb stops at the bound; a stream cut short yields what came before.
        let bomb = {
            use std::io::Write as _;
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
            e.write_all(&vec![b'a'; 4 * MAX_INFLATED]).unwrap();
            e.finish().unwrap()
        };
        assert_eq!(inflate(&bomb).map(|v| v.len()), Some(MAX_INFLATED));
        assert_eq!(
            inflate(&gz[..gz.len() - 6]).as_deref(),
            Some(&b"' OR 1=1 --"[..])
        );
        // A .NET ObjectStateFormatter stream (a ViewState) is kept, binary as it is.
        let state = base64::engine::general_purpose::STANDARD
            .encode(b"\xff\x01\x32\x05\x00\x01\x9e\x01TextFormattingRunProperties");
        assert!(
            decodings(state.as_bytes(), b"ARGS:__VIEWSTATE")
                .iter()
                .any(|(step, v)| step == b"base64" && v.starts_with(b"\xff\x01"))
        );
        assert!(steps("%27%20OR%201%3D1").contains(&("url".into(), "' OR 1=1".into())));
        assert!(steps("JyBPUiAxPTEgLS0=").contains(&("base64".into(), "' OR 1=1 --".into())));
        assert!(
            steps("Basic YWRtaW46c2VjcmV0").contains(&("base64".into(), "admin:secret".into()))
        );
        assert!(steps("27204f5220313d31").contains(&("hex".into(), "' OR 1=1".into())));
        assert!(steps("\\u003cscript\\u003e").contains(&("jsescape".into(), "<script>".into())));
        assert!(steps("&#x3c;script&#62;").contains(&("html".into(), "<script>".into())));
        assert!(steps("&lt;b&gt;").contains(&("html".into(), "<b>".into())));
        assert!(
            steps("data:text/plain;base64,PHNjcmlwdD4=")
                .contains(&("datauri".into(), "<script>".into()))
        );
        assert!(
            steps(r#"{"user":{"name":"x' or 1=1"}}"#)
                .contains(&("json:user.name".into(), "x' or 1=1".into()))
        );
        assert!(steps("<order><id>hi</id></order>").contains(&("xml".into(), "hi".into())));
        assert!(
            !steps("<p>Use <code>ls -la</code></p>")
                .iter()
                .any(|(s, _)| s == "xml")
        );
        let u16le: Vec<u8> = "<script>".bytes().flat_map(|b| [b, 0]).collect();
        let got = decodings(&u16le, b"x");
        assert!(got.iter().any(|(s, v)| s == b"utf16" && v == b"<script>"));
        let overlong = b"..\xc0\xaf..\xc0\xafetc";
        assert!(
            decodings(overlong, b"x")
                .iter()
                .any(|(s, v)| s == b"utf8" && v == b"../../etc")
        );
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxJyBvciAnMSc9JzEifQ.sig";
        assert!(
            steps(jwt)
                .iter()
                .any(|(s, v)| s == "jwt" && v.contains("or '1'='1"))
        );
    }

    #[test]
    fn plain_values_are_not_decoded() {
        for v in [
            "hello",
            "administrator",
            "12345678",
            "Passw0rd",
            "session",
            "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
            "550e8400-e29b-41d4-a716-446655440000",
            "The quick brown fox",
            "deadbeefcafe",
        ] {
            let got = steps(v);
            assert!(got.is_empty(), "{v}: {got:?}");
        }
    }
}
