//! Palisade's fuzz targets as plain functions.
//!
//! Each target is a `fn(&[u8])` that feeds the bytes to one part of Palisade and
//! panics only when that part misbehaves: a panic inside the code under test, a
//! broken invariant (an argument count over its limit, a file range outside the
//! body), or a difference from an independent reference. The thin binaries in
//! `fuzz_targets/` hand these functions to libFuzzer (`cargo fuzz run NAME`); the
//! test in `tests/replay.rs` runs every seed and reproducer of `seeds/NAME/` through
//! the same functions on stable Rust, so a target cannot rot unnoticed.
//!
//! [`TARGETS`] lists them all, by the name of their binary and seed directory.

pub mod body;
pub mod client_address;
pub mod conn;
pub mod detectors;
pub mod http1;
pub mod injection;
pub mod input;
pub mod rules;
pub mod rx;
pub mod transforms;
pub mod url_decode;

/// One fuzz target: its name (binary, seed directory) and its body.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The name of the `cargo fuzz` target and of its directory under `seeds/`.
    pub name: &'static str,
    /// The body: runs one input, panics on a finding.
    pub run: fn(&[u8]),
    /// What the target covers, for `scripts/fuzz --list` and the README.
    pub about: &'static str,
}

/// Every target, in the order `scripts/fuzz` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "seclang",
        run: rules::fuzz_seclang,
        about: "SecLang text to syntax tree, then a compiled ruleset (errors, never panics)",
    },
    Target {
        name: "transforms",
        run: transforms::fuzz_transforms,
        about: "a pipeline of up to four transformations chosen by the input, with invariants",
    },
    Target {
        name: "url_decode_diff",
        run: url_decode::fuzz_url_decode_diff,
        about: "urlDecode, urlDecodeUni and the urlencoded splitter against a reference",
    },
    Target {
        name: "body_urlencoded",
        run: body::fuzz_urlencoded,
        about: "urlencoded bodies: the processor and a transaction with body access",
    },
    Target {
        name: "body_multipart",
        run: body::fuzz_multipart,
        about: "multipart bodies (Content-Type line, then body): processor and transaction",
    },
    Target {
        name: "body_json",
        run: body::fuzz_json,
        about: "JSON bodies: the processor and a transaction with the JSON processor",
    },
    Target {
        name: "body_xml",
        run: body::fuzz_xml,
        about: "XML bodies: the processor and a transaction with the XML processor",
    },
    Target {
        name: "injection",
        run: injection::fuzz_injection,
        about: "@detectSQLi and @detectXSS (libinjection)",
    },
    Target {
        name: "detectors",
        run: detectors::fuzz_detectors,
        about: "every semantic detector (detect crate) and SQL's confirm: evidence inside the value, nothing found outside the candidates pass",
    },
    Target {
        name: "inputs",
        run: detectors::fuzz_inputs,
        about: "the input stage: INPUTS, INPUTS_DECODED and DETECTIONS over a request's query, header, cookie and body (JSON, form, XML, multipart, text)",
    },
    Target {
        name: "rx",
        run: rx::fuzz_rx,
        about: "@rx: PCRE patterns (with lookarounds, possessive, atomic) compiled and run",
    },
    Target {
        name: "http1_head",
        run: http1::fuzz_http1_head,
        about: "proxy: HTTP/1 head end and parse, whole and in pieces; clean heads read alike by httparse",
    },
    Target {
        name: "http1_httparse_diff",
        run: http1::fuzz_http1_httparse_diff,
        about: "proxy: the HTTP/1 head reader against httparse on what httparse accepts",
    },
    Target {
        name: "chunked",
        run: http1::fuzz_chunked,
        about: "proxy: chunked and Content-Length bodies, in pieces, against a reference decoder",
    },
    Target {
        name: "client_address",
        run: client_address::fuzz_client_address,
        about: "proxy: PROXY protocol v1/v2 headers (prefixes, bounds, bytes after) and the X-Forwarded-For / Forwarded walk",
    },
    Target {
        name: "h1_conn",
        run: conn::fuzz_h1_conn,
        about: "proxy: a whole HTTP/1 connection through the front end and the rules",
    },
    Target {
        name: "h2_conn",
        run: conn::fuzz_h2_conn,
        about: "proxy: an HTTP/2 connection (HPACK header path, frames) through the front end",
    },
];

/// The target called `name`, if there is one.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
