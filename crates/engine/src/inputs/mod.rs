//! The input stage: every value a request carries, with where it came from and how
//! it was decoded, in one table per transaction.
//!
//! Fixed stages fill it, in order:
//!
//! 1. **parse**, when phase 1 starts: every query argument (name and value), the
//!    decoded path and each of its segments, every request header but `Cookie`, and
//!    every cookie (name and value);
//! 2. **parse**, when phase 2 starts: every body argument (name and value, from the
//!    URL-encoded, multipart or JSON processor), every file name, the text and
//!    attribute values of an XML body, and the raw body when no processor read it
//!    (none for its type, or a parse error); when one did, the raw body is still an
//!    input for what the arguments do not show, and only for the detectors of that:
//!    an XML document's type (XXE, serialized objects) and the query operators of a
//!    JSON or form body (NoSQL);
//! 3. **decode**, after each parse stage: each value is also offered in every form a
//!    chain of standard decodings yields ([`decode`]), to a depth of
//!    [`decode::MAX_DEPTH`], bounded in size; a decoded value records its parent
//!    and the step (`ARGS:data|base64|json:user.name`).
//!
//! Rules read the table through two variables: `INPUTS` (the values as parsed) and
//! `INPUTS_DECODED` (what the decode stage found in them). A key is the value's
//! lineage, which is also its `MATCHED_VAR_NAME` (`INPUTS_DECODED:ARGS:q|base64`).
//! Detectors run as operators over these variables (stage 4, **detect**), and the
//! rules after them (stage 5).
//!
//! The table is built only when a loaded rule reads one of the two variables, so a
//! rule set without them pays nothing. Building is linear in the request and
//! bounded: at most [`MAX_ENTRIES`] entries and [`decode::MAX_DECODED_BYTES`] bytes of
//! decoded values per transaction.

pub mod decode;
mod graphql;
mod memo;

use crate::transaction::RequestData;

/// The most entries a transaction's table holds; values past it are not added
/// (and counted in [`Inputs::dropped`]).
pub const MAX_ENTRIES: usize = 4096;

/// Where a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A query string argument's value.
    Query,
    /// A query string argument's name.
    QueryName,
    /// The decoded path (REQUEST_FILENAME).
    Path,
    /// One segment of the decoded path.
    PathSegment,
    /// A request header's value.
    Header,
    /// A cookie's value.
    Cookie,
    /// A cookie's name.
    CookieName,
    /// A body argument's value (URL-encoded, multipart or JSON).
    Body,
    /// A body argument's name.
    BodyName,
    /// An uploaded file's name.
    FileName,
    /// Text or an attribute value of an XML body.
    Xml,
    /// The raw body, when no processor read it.
    RawBody,
    /// Found by the decode stage in another value.
    Decoded,
}

/// One value of the table.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Where it came from.
    pub source: Source,
    /// Its lineage: the variable it came from and the decoding steps that led to it
    /// (`ARGS:q`, `REQUEST_HEADERS:X-Data|base64|json:user`).
    pub name: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// The entry it was decoded from (`None` for a parsed value).
    pub parent: Option<u32>,
    /// How many decoding steps lie between it and a parsed value.
    pub depth: u8,
    /// Stage 4, detect: the classes whose detectors might find something here
    /// ([`detect::candidates`]), worked out once when the entry is added.
    pub candidates: detect::ClassSet,
    /// The classes DETECTIONS reports for this value: every class, except where a
    /// value's own grammar leaves no room for an attack or a finding would mislead
    /// (see [`scope`]).
    pub scope: detect::ClassSet,
    /// Detections already run on this value (a bit per class, and [`SQL_SYNTAX`]
    /// for `@confirmSqlSyntax`), and which of them found something: each detector
    /// runs at most once per value, however many rules ask.
    checked: std::cell::Cell<u16>,
    found: std::cell::Cell<u16>,
    /// A header value whose detect-stage results go to the per-thread memo
    /// ([`memo`]) when the transaction ends, and whether it decodes to anything.
    memo: bool,
    decodes: bool,
}

/// The keys of DETECTIONS and the checks they stand for: a class's name for its
/// detector, and `sql_syntax` for SQL syntax in an injection context.
pub const CHECKS: &[(&str, Check)] = &[
    ("sql", Check::Class(detect::Class::Sql)),
    ("xss", Check::Class(detect::Class::Xss)),
    ("cmd", Check::Class(detect::Class::Cmd)),
    ("traversal", Check::Class(detect::Class::Traversal)),
    ("template", Check::Class(detect::Class::Template)),
    ("nosql", Check::Class(detect::Class::NoSql)),
    ("ldap", Check::Class(detect::Class::Ldap)),
    ("xxe", Check::Class(detect::Class::Xxe)),
    ("ssrf", Check::Class(detect::Class::Ssrf)),
    ("jndi", Check::Class(detect::Class::Jndi)),
    ("crlf", Check::Class(detect::Class::Crlf)),
    ("serialized", Check::Class(detect::Class::Serialized)),
    ("sql_syntax", Check::SqlSyntax),
];

/// Request headers whose values browsers and HTTP clients write to a fixed grammar
/// (media ranges, language tags, codings, dates, entity tags, fetch metadata):
/// DETECTIONS looks there only for what any header can carry, a JNDI lookup (the
/// Log4Shell vector) and line breaks.
const STRUCTURED_HEADERS: &[&str] = &[
    "accept",
    "accept-encoding",
    "accept-language",
    "accept-charset",
    "connection",
    "host",
    "content-length",
    "cache-control",
    "pragma",
    "upgrade-insecure-requests",
    "dnt",
    "te",
    "priority",
    "if-modified-since",
    "if-unmodified-since",
    "if-none-match",
    "if-match",
    "sec-fetch-site",
    "sec-fetch-mode",
    "sec-fetch-dest",
    "sec-fetch-user",
    "sec-ch-ua",
    "sec-ch-ua-mobile",
    "sec-ch-ua-platform",
    "keep-alive",
    "upgrade",
    "sec-gpc",
    "save-data",
];

/// Headers that name where the browser is: a URL to an internal address there is
/// not a request to fetch one (no SSRF finding).
const BROWSER_URL_HEADERS: &[&str] = &["referer", "origin", "host"];

/// The classes DETECTIONS reports for a value named `name` (its lineage; decoded
/// values inherit their origin's scope).
fn scope(name: &[u8]) -> detect::ClassSet {
    let mut all = detect::ClassSet::default();
    for c in detect::Class::ALL {
        all.insert(c);
    }
    let Some(rest) = name.strip_prefix(b"REQUEST_HEADERS:") else {
        return all;
    };
    let header_end = rest.iter().position(|&c| c == b'|').unwrap_or(rest.len());
    let header = &rest[..header_end];
    let one_of = |list: &[&str]| {
        list.iter()
            .any(|h| header.eq_ignore_ascii_case(h.as_bytes()))
    };
    if one_of(STRUCTURED_HEADERS) {
        let mut s = detect::ClassSet::default();
        s.insert(detect::Class::Jndi);
        s.insert(detect::Class::Crlf);
        return s;
    }
    if one_of(BROWSER_URL_HEADERS) {
        all.remove(detect::Class::Ssrf);
    }
    all
}

/// The cache bit of `@confirmSqlSyntax` (the classes use bits 0 to 11).
const SQL_SYNTAX: u16 = 1 << 15;

/// A check the detect stage answers for a table value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// A detector's `scan`.
    Class(detect::Class),
    /// `@confirmSqlSyntax` ([`detect::sql::confirm`]).
    SqlSyntax,
}

/// A transaction's table of inputs.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    entries: Vec<Entry>,
    /// Entries filled by the head stage (those before it came from the body).
    head_done: bool,
    body_done: bool,
    /// Values not added because the table was full, or decodings cut short.
    dropped: usize,
    decoded_bytes: usize,
}

impl Inputs {
    /// Every entry, parsed and decoded, in the order they were added.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Values left out because a bound was reached.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    fn push(
        &mut self,
        source: Source,
        name: Vec<u8>,
        value: Vec<u8>,
        parent: Option<u32>,
        depth: u8,
        known: Option<detect::ClassSet>,
    ) -> Option<u32> {
        if self.entries.len() >= MAX_ENTRIES {
            self.dropped += 1;
            return None;
        }
        let id = self.entries.len() as u32;
        let candidates = known.unwrap_or_else(|| detect::candidates(&value));
        // A decoded value is judged as its parent is (`REQUEST_HEADERS:Accept|url`
        // is still a structured header).
        let scope = match parent {
            Some(p) => self.entries[p as usize].scope,
            None => scope(&name),
        };
        self.entries.push(Entry {
            source,
            name,
            value,
            parent,
            depth,
            candidates,
            scope,
            checked: std::cell::Cell::new(0),
            found: std::cell::Cell::new(0),
            memo: false,
            decodes: false,
        });
        Some(id)
    }

    /// Whether DETECTIONS reports `check` for entry `index`: the check is in the
    /// entry's scope ([`Entry::scope`]) and finds something.
    pub(crate) fn detects(&self, index: usize, check: Check) -> bool {
        let class = match check {
            Check::Class(c) => c,
            Check::SqlSyntax => detect::Class::Sql,
        };
        self.entries[index].scope.contains(class) && self.check(index, check)
    }

    /// Whether `check` finds something in entry `index`: from its candidates, or
    /// from a detection already run, else by running it now (and keeping the
    /// answer).
    pub(crate) fn check(&self, index: usize, check: Check) -> bool {
        let e = &self.entries[index];
        let (class, bit) = match check {
            Check::Class(c) => (c, 1u16 << c as u16),
            Check::SqlSyntax => (detect::Class::Sql, SQL_SYNTAX),
        };
        if !e.candidates.contains(class) {
            return false;
        }
        if e.checked.get() & bit != 0 {
            return e.found.get() & bit != 0;
        }
        let hit = match check {
            Check::Class(c) => c.scan(&e.value).is_some(),
            // The SQL detector's answer (cached for its own rules) and then only
            // the shapes it does not cover: libinjection runs once per value.
            Check::SqlSyntax => {
                self.check(index, Check::Class(detect::Class::Sql))
                    || detect::sql::confirm_beyond_scan(&e.value)
            }
        };
        e.checked.set(e.checked.get() | bit);
        if hit {
            e.found.set(e.found.get() | bit);
        }
        hit
    }

    fn parsed(&mut self, source: Source, prefix: &str, key: &[u8], value: &[u8]) {
        self.parsed_within(source, prefix, key, value, None);
    }

    /// [`Inputs::parsed`], with the detectors that judge the value (and what its
    /// decodings yield) narrowed to `only` when given.
    fn parsed_within(
        &mut self,
        source: Source,
        prefix: &str,
        key: &[u8],
        value: &[u8],
        only: Option<detect::ClassSet>,
    ) {
        let mut name = Vec::with_capacity(prefix.len() + 1 + key.len());
        name.extend_from_slice(prefix.as_bytes());
        if !key.is_empty() {
            name.push(b':');
            name.extend_from_slice(key);
        }
        // A header value seen lately on this thread: its candidates, detections and
        // whether it decodes are known already.
        let memo = source == Source::Header && value.len() <= memo::MAX_VALUE;
        let known = if memo { memo::get(value) } else { None };
        let Some(id) = self.push(
            source,
            name,
            value.to_vec(),
            None,
            0,
            known.map(|k| k.candidates),
        ) else {
            return;
        };
        let before = self.entries.len();
        let e = &mut self.entries[id as usize];
        if let Some(only) = only {
            e.scope = only;
        }
        e.memo = memo;
        if let Some(k) = known {
            e.checked.set(k.checked);
            e.found.set(k.found);
            e.decodes = k.decodes;
            if !k.decodes {
                return;
            }
        }
        decode::expand(self, id);
        self.entries[id as usize].decodes = self.entries.len() > before;
    }

    /// Stage 1: the request line and headers (once; later calls do nothing).
    pub(crate) fn fill_head(&mut self, req: &RequestData) {
        if self.head_done {
            return;
        }
        self.head_done = true;
        for (k, v) in &req.args_get {
            self.parsed(Source::Query, "ARGS", k, v);
            self.parsed(Source::QueryName, "ARGS_NAMES", k, k);
        }
        // Bracketed query operators (`user[$ne]=x`) read with their operands.
        if memchr::memmem::find(&req.query, b"[$").is_some()
            || memchr::memmem::find(&req.query, b"%5B%24").is_some()
        {
            let query = decode::percent_decoded(&req.query);
            self.parsed(Source::Query, "QUERY_STRING", b"", &query);
        }
        if !req.filename.is_empty() {
            self.parsed(Source::Path, "REQUEST_FILENAME", b"", &req.filename);
            // Segments are split on the raw path's slashes, then decoded, as a
            // router reads them: an encoded slash (`%2F`) stays inside its segment,
            // so a value that carries slashes (base64, a URL) is one input.
            let segments: Vec<Vec<u8>> = raw_path(&req.uri_raw)
                .split(|&b| b == b'/')
                .filter(|s| !s.is_empty())
                .map(decode::percent_decoded)
                .collect();
            // One segment without an encoded slash is the whole path: nothing new.
            if segments.len() > 1 || segments.first().is_some_and(|s| s.contains(&b'/')) {
                for (i, seg) in segments.iter().enumerate() {
                    self.parsed(
                        Source::PathSegment,
                        "REQUEST_FILENAME",
                        (i + 1).to_string().as_bytes(),
                        seg,
                    );
                }
            }
        }
        for (k, v) in &req.headers {
            if k.eq_ignore_ascii_case(b"cookie") {
                continue;
            }
            self.parsed(Source::Header, "REQUEST_HEADERS", k, v);
        }
        for (k, v) in &req.cookies {
            self.parsed(Source::Cookie, "REQUEST_COOKIES", k, v);
            self.parsed(Source::CookieName, "REQUEST_COOKIES_NAMES", k, k);
        }
    }

    /// Stage 2: the body as its processor read it (once; later calls do nothing).
    pub(crate) fn fill_body(&mut self, req: &RequestData) {
        if self.body_done {
            return;
        }
        self.body_done = true;
        for (k, v) in &req.args_post {
            self.parsed(Source::Body, "ARGS", k, v);
            self.parsed(Source::BodyName, "ARGS_NAMES", k, k);
        }
        if let Some(mp) = &req.multipart {
            for f in &mp.files {
                self.parsed(Source::FileName, "FILES", &f.name, &f.filename);
            }
        }
        if let Some(doc) = &req.xml {
            for t in &doc.texts {
                if !t.iter().all(u8::is_ascii_whitespace) {
                    self.parsed(Source::Xml, "XML", b"/*", t);
                }
            }
            for a in &doc.attributes {
                self.parsed(Source::Xml, "XML", b"//@*", a);
            }
        }
        // A JSON body with `$` keys, or a form with bracketed `[$` names: the raw body
        // shows each query operator with its operand, which the arguments (named
        // `json.a.$ne`, valued apart) do not.
        let operators = matches!(
            req.processor,
            Some(crate::actions::BodyProcessor::Json | crate::actions::BodyProcessor::UrlEncoded)
        ) && (memchr::memmem::find(&req.body, b"\"$").is_some()
            || memchr::memmem::find(&req.body, b"\\u0024").is_some()
            || memchr::memmem::find(&req.body, b"[$").is_some());
        // The raw body is an input when no processor read it (none for its type, or
        // a parse error): then it is all the rules have. When one did, its arguments
        // are the inputs, and the raw body is looked at only for what they do not
        // show: an XML document's type (external entities; its text and attributes
        // are inputs of their own, and markup is XML's, not a page's), and the query
        // operators of a JSON or form body.
        let parsed = req.processor.is_some() && req.processor_error.is_none();
        let xml = req.processor == Some(crate::actions::BodyProcessor::Xml);
        let only = |classes: &[detect::Class]| {
            let mut set = detect::ClassSet::default();
            for c in classes {
                set.insert(*c);
            }
            set
        };
        let within = if !parsed {
            // Binary data (an upload under application/octet-stream) is looked at
            // only for serialized objects, which are binary themselves.
            (!decode::mostly_text(&req.body)).then(|| only(&[detect::Class::Serialized]))
        } else if xml {
            Some(only(&[detect::Class::Xxe, detect::Class::Serialized]))
        } else if operators {
            Some(only(&[detect::Class::NoSql]))
        } else {
            return;
        };
        if !req.body.is_empty() {
            self.parsed_within(Source::RawBody, "REQUEST_BODY", b"", &req.body, within);
        }
    }
}

impl Drop for Inputs {
    /// Leaves what the detect stage learned of header values to the per-thread memo.
    fn drop(&mut self) {
        for e in self.entries.iter().filter(|e| e.memo) {
            memo::put(
                &e.value,
                memo::Known {
                    candidates: e.candidates,
                    checked: e.checked.get(),
                    found: e.found.get(),
                    decodes: e.decodes,
                },
            );
        }
    }
}

/// The path of a request target as sent: before `?` or `#`, without the scheme and
/// authority of an absolute-form target (`http://host/a/b` gives `/a/b`).
fn raw_path(uri_raw: &[u8]) -> &[u8] {
    let end = uri_raw
        .iter()
        .position(|&b| b == b'?' || b == b'#')
        .unwrap_or(uri_raw.len());
    let target = &uri_raw[..end];
    match memchr::memmem::find(target, b"://") {
        Some(sep) if !target.starts_with(b"/") => {
            let after = sep + 3;
            target[after..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(&b""[..], |p| &target[after + p..])
        }
        _ => target,
    }
}

#[cfg(test)]
mod tests;
