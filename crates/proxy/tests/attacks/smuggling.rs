//! Request smuggling and framing tricks over HTTP/1: conflicting Content-Length and
//! Transfer-Encoding, malformed lengths and chunk sizes, odd line ends and header
//! syntax, requests hidden in bodies, pipelining, absolute-form targets,
//! `Connection` naming end-to-end headers, `Expect: 100-continue` and upgrades.
//!
//! Most hostile requests hide a second request (`GET /attackmarker`) where a
//! parser that disagrees with Palisade's would find it. Whatever Palisade decides,
//! the backend must never receive the marker: a request is either refused, or
//! inspected as the backend receives it (and then blocked by the marker rules).
//! Each case also states the statuses a correct proxy may answer, and whether it
//! must close the connection after its answer (RFC 9112 requires it where the
//! framing cannot be trusted).

use crate::harness::{DEADLINE, Exchange, Setup, Target, exchange, exchange_on, report};
use albedo::Record;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The request hidden in bodies: blocked wherever the engine sees it.
const HIDDEN: &str = "GET /attackmarker HTTP/1.1\r\nHost: a\r\n\r\n";

/// How long to collect answers on one connection. Every case ends well before it:
/// the proxy closes the connection (after an error, or after one second of
/// keep-alive idleness, or after the two-second body timeout).
const WAIT: Duration = Duration::from_secs(15);

/// What a correct proxy may answer.
enum Expect {
    /// One final response, with one of these statuses; then the connection closes
    /// without another answer (the framing could not be trusted).
    Closes(&'static [u16]),
    /// Exactly these final responses, in order, each with one of the statuses
    /// listed for it.
    Seq(Vec<&'static [u16]>),
    /// Anything (or nothing) may come back; only the three checks apply.
    Any,
}

/// A check of the backend's record made after the case.
type After = Box<dyn Fn(&Target) -> Result<(), String> + Send + Sync>;

struct Case {
    name: String,
    request: Vec<u8>,
    expect: Expect,
    after: Option<After>,
}

fn case(name: impl Into<String>, request: impl Into<Vec<u8>>, expect: Expect) -> Case {
    Case {
        name: name.into(),
        request: request.into(),
        expect,
        after: None,
    }
}

fn with_after(mut c: Case, after: After) -> Case {
    c.after = Some(after);
    c
}

/// The one record of a request to `path`, as the backend received it.
fn one_record(t: &Target, path: &str) -> Result<Record, String> {
    let mut r = t.records_for(path);
    match r.len() {
        1 => Ok(r.remove(0)),
        n => Err(format!(
            "the backend received {n} requests for {path}, expected 1"
        )),
    }
}

fn target_setup(name: &'static str) -> Setup {
    let mut s = Setup::new(name);
    s.server = "client_header_timeout = \"2s\"\nclient_body_timeout = \"2s\"\nkeepalive_timeout = \"1s\"\n".into();
    s.limits = "request_body_bytes = 1048576\n".into();
    s
}

/// Runs the cases one after another against `t`; returns the failures.
async fn run(t: &Target, cases: Vec<Case>) -> Vec<String> {
    let mut failures = Vec::new();
    for c in cases {
        let got = tokio::time::timeout(DEADLINE * 2, exchange(t.http, &c.request, WAIT)).await;
        let Ok(got) = got else {
            failures.push(format!("{}: no outcome within {:?}", c.name, DEADLINE * 2));
            continue;
        };
        eprintln!("[{}] {}: observed {}", t.name(), c.name, got.describe());
        if let Some(why) = judge(&c.expect, &got) {
            failures.push(format!("{}: {why}; observed {}", c.name, got.describe()));
        }
        if let Some(after) = &c.after
            && let Err(why) = after(t)
        {
            failures.push(format!("{}: {why}", c.name));
        }
        if let Err(why) = t.check(&c.name).await {
            failures.push(why);
        }
    }
    failures
}

/// Why `got` is not what `expect` allows (`None`: it is).
fn judge(expect: &Expect, got: &Exchange) -> Option<String> {
    let finals = got.finals();
    match expect {
        Expect::Any => None,
        Expect::Closes(allowed) => {
            if finals.len() != 1 || !allowed.contains(&finals[0]) {
                Some(format!(
                    "expected one answer in {allowed:?} and then a close"
                ))
            } else if !got.closed {
                Some("the connection stayed open after an untrustworthy request".into())
            } else {
                None
            }
        }
        Expect::Seq(seq) => {
            let ok = finals.len() == seq.len()
                && finals.iter().zip(seq.iter()).all(|(s, a)| a.contains(s));
            (!ok).then(|| format!("expected answers {seq:?}"))
        }
    }
}

fn post(path: &str, headers: &str, body: &str) -> String {
    format!("POST {path} HTTP/1.1\r\nHost: a\r\n{headers}\r\n{body}")
}

/// A chunked body carrying `data` in one chunk.
fn chunked(data: &str) -> String {
    format!("{:x}\r\n{data}\r\n0\r\n\r\n", data.len())
}

fn framing_cases() -> Vec<Case> {
    let h = HIDDEN;
    let n = h.len();
    let ended = format!("0\r\n\r\n{h}");
    let ended_len = ended.len();
    let ch = chunked(h);
    vec![
        // Content-Length and Transfer-Encoding together (RFC 9112 §6.3: the
        // chunked framing wins, and the connection must close after the answer).
        case(
            "CL.TE: Content-Length covers a request after the last chunk",
            post(
                "/cl-te",
                &format!("Content-Length: {ended_len}\r\nTransfer-Encoding: chunked\r\n"),
                &ended,
            ),
            Expect::Closes(&[200, 400]),
        ),
        case(
            "TE.CL: Transfer-Encoding first, then Content-Length",
            post(
                "/te-cl",
                &format!("Transfer-Encoding: chunked\r\nContent-Length: {ended_len}\r\n"),
                &ended,
            ),
            Expect::Closes(&[200, 400]),
        ),
        case(
            "TE.CL: the chunk hides a request, Content-Length stops before it",
            post(
                "/te-cl-2",
                "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
                &ch,
            ),
            Expect::Closes(&[400, 403]),
        ),
        case(
            "TE.CL: chunked in a second Transfer-Encoding line",
            post(
                "/te-cl-3",
                &format!(
                    "Transfer-Encoding: identity\r\nContent-Length: {ended_len}\r\nTransfer-Encoding: chunked\r\n"
                ),
                &ended,
            ),
            Expect::Closes(&[200, 400, 501]),
        ),
        // Content-Length variants: a reader that takes a shorter length finds the
        // hidden request.
        case(
            "two different Content-Length lines",
            post(
                "/cl2",
                &format!("Content-Length: 0\r\nContent-Length: {n}\r\n"),
                h,
            ),
            Expect::Closes(&[400]),
        ),
        case(
            "Content-Length list with two values",
            post("/cl-list", &format!("Content-Length: 0, {n}\r\n"), h),
            Expect::Closes(&[400]),
        ),
        case(
            "Content-Length with a plus sign",
            post("/cl-plus", &format!("Content-Length: +{n}\r\n"), h),
            Expect::Closes(&[400]),
        ),
        case(
            "negative Content-Length",
            post("/cl-neg", "Content-Length: -1\r\n", h),
            Expect::Closes(&[400]),
        ),
        case(
            "hexadecimal Content-Length",
            post("/cl-hex", &format!("Content-Length: 0x{n:x}\r\n"), h),
            Expect::Closes(&[400]),
        ),
        case(
            "Content-Length with a space inside",
            post("/cl-space", "Content-Length: 1 0\r\n", h),
            Expect::Closes(&[400]),
        ),
        case(
            "Content-Length with a fraction",
            post("/cl-frac", &format!("Content-Length: {n}.0\r\n"), h),
            Expect::Closes(&[400]),
        ),
        case(
            "Content-Length of twenty digits",
            post("/cl-long", "Content-Length: 18446744073709551617\r\n", h),
            Expect::Closes(&[400, 413]),
        ),
        case(
            "Content-Length with leading zeros (a valid length: the body is inspected)",
            post("/cl-zeros", &format!("Content-Length: 000{n}\r\n"), h),
            Expect::Seq(vec![&[403]]),
        ),
        case(
            "Content-Length: 0 followed by a request (pipelined, inspected on its own)",
            post("/cl-zero", "Content-Length: 0\r\n", h),
            Expect::Seq(vec![&[200], &[403]]),
        ),
        // Transfer-Encoding variants.
        case(
            "Transfer-Encoding: chunked, identity",
            post("/te-ci", "Transfer-Encoding: chunked, identity\r\n", &ch),
            Expect::Closes(&[400, 501]),
        ),
        case(
            "Transfer-Encoding: xchunked",
            post(
                "/te-x",
                &format!(
                    "Transfer-Encoding: xchunked\r\nContent-Length: {}\r\n",
                    ch.len()
                ),
                &ch,
            ),
            Expect::Closes(&[400, 501]),
        ),
        case(
            "Transfer-Encoding: chunked, then a second line with another coding",
            post(
                "/te-two",
                "Transfer-Encoding: chunked\r\nTransfer-Encoding: cow\r\n",
                &ch,
            ),
            Expect::Closes(&[400, 501]),
        ),
        case(
            "Transfer-Encoding folded onto a continuation line (obs-fold)",
            post("/te-fold", "Transfer-Encoding:\r\n chunked\r\n", &ch),
            Expect::Closes(&[400, 403]),
        ),
        case(
            "Transfer-Encoding with a vertical tab",
            post(
                "/te-vt",
                &format!(
                    "Transfer-Encoding: \x0bchunked\r\nContent-Length: {}\r\n",
                    ch.len()
                ),
                &ch,
            ),
            Expect::Closes(&[400, 403]),
        ),
        case(
            "Transfer-Encoding with a space before the colon",
            post(
                "/te-sp",
                "Transfer-Encoding : chunked\r\nContent-Length: 5\r\n",
                &ended,
            ),
            Expect::Closes(&[400]),
        ),
        case(
            "Transfer-Encoding with a tab as whitespace (valid: inspected)",
            post("/te-tab", "Transfer-Encoding:\tchunked\r\n", &ch),
            Expect::Seq(vec![&[403]]),
        ),
        case(
            "Transfer-Encoding in an HTTP/1.0 keep-alive request, another request after it",
            format!(
                "POST /te10 HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n{}GET /attackmarker HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n",
                chunked("hello")
            ),
            Expect::Closes(&[200, 400]),
        ),
        // Chunk sizes and chunk framing.
        case(
            "chunk size that is not hexadecimal",
            post(
                "/cs-bad",
                "Transfer-Encoding: chunked\r\n",
                &format!("zz\r\n{h}\r\n0\r\n\r\n"),
            ),
            Expect::Closes(&[400]),
        ),
        case(
            "negative chunk size",
            post(
                "/cs-neg",
                "Transfer-Encoding: chunked\r\n",
                &format!("-1\r\n{h}\r\n0\r\n\r\n"),
            ),
            Expect::Closes(&[400]),
        ),
        case(
            "chunk size with a 0x prefix",
            post(
                "/cs-0x",
                "Transfer-Encoding: chunked\r\n",
                &format!("0x{n:x}\r\n{h}\r\n0\r\n\r\n"),
            ),
            Expect::Closes(&[400]),
        ),
        case(
            "chunk size of seventeen digits (overflow)",
            post(
                "/cs-long",
                "Transfer-Encoding: chunked\r\n",
                &format!("1{:016x}\r\n{h}\r\n0\r\n\r\n", n),
            ),
            Expect::Closes(&[400]),
        ),
        case(
            "chunk size far over the body limit, then silence",
            post(
                "/cs-huge",
                "Transfer-Encoding: chunked\r\n",
                &format!("fffffffffffffff\r\n{h}"),
            ),
            Expect::Closes(&[400, 408, 413]),
        ),
        case(
            "chunk extension carrying the payload (extensions are not forwarded)",
            post(
                "/cs-ext",
                "Transfer-Encoding: chunked\r\n",
                "5;attackmarker=attackmarker\r\nhello\r\n0\r\n\r\n",
            ),
            Expect::Any,
        ),
        case(
            "chunk extension of 8 KiB",
            post(
                "/cs-ext-long",
                "Transfer-Encoding: chunked\r\n",
                &format!("5;x={}\r\nhello\r\n0\r\n\r\n", "e".repeat(8192)),
            ),
            Expect::Seq(vec![&[200, 400]]),
        ),
        case(
            "chunk extension with a quoted line break hiding a request",
            post(
                "/cs-ext-q",
                "Transfer-Encoding: chunked\r\n",
                &format!("5;x=\"a\r\n0\r\n\r\n{h}\"\r\nhello\r\n0\r\n\r\n"),
            ),
            Expect::Any,
        ),
        case(
            "chunked body with bare LF line ends, hiding a request",
            post(
                "/cs-lf",
                "Transfer-Encoding: chunked\r\n",
                &format!("{n:x}\n{h}\n0\n\n"),
            ),
            Expect::Seq(vec![&[400, 403]]),
        ),
        case(
            "chunk data longer than its size",
            post(
                "/cs-over",
                "Transfer-Encoding: chunked\r\n",
                &format!("3\r\n{h}\r\n0\r\n\r\n"),
            ),
            Expect::Closes(&[400]),
        ),
        case(
            "chunk data without its CRLF",
            post(
                "/cs-nocrlf",
                "Transfer-Encoding: chunked\r\n",
                &format!("5\r\nhello{n:x}\r\n{h}\r\n0\r\n\r\n"),
            ),
            Expect::Closes(&[400]),
        ),
        case(
            "no last chunk, then silence",
            post(
                "/cs-nolast",
                "Transfer-Encoding: chunked\r\n",
                "5\r\nhello\r\n",
            ),
            Expect::Closes(&[408]),
        ),
        case(
            "last chunk without the final CRLF, then silence",
            post("/cs-noend", "Transfer-Encoding: chunked\r\n", "0\r\n"),
            Expect::Closes(&[408]),
        ),
        case(
            "trailer field carrying the payload (trailers are not forwarded)",
            post(
                "/cs-trailer",
                "Transfer-Encoding: chunked\r\nTrailer: X-Attackmarker\r\n",
                "5\r\nhello\r\n0\r\nX-Attackmarker: attackmarker\r\n\r\n",
            ),
            Expect::Any,
        ),
        case(
            "trailer section over the head limit",
            post(
                "/cs-bigtrailer",
                "Transfer-Encoding: chunked\r\n",
                &format!(
                    "5\r\nhello\r\n0\r\n{}\r\n",
                    "X-T: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".repeat(1000)
                ),
            ),
            Expect::Closes(&[400, 431]),
        ),
    ]
}

fn head_cases() -> Vec<Case> {
    let h = HIDDEN;
    let n = h.len();
    vec![
        case(
            "bare LF line ends, payload in a header",
            "GET /lf HTTP/1.1\nHost: a\nX-P: attackmarker\n\n",
            Expect::Seq(vec![&[400, 403]]),
        ),
        case(
            "bare LF line ends, request hidden in the body",
            format!("POST /lf2 HTTP/1.1\nHost: a\nContent-Length: {n}\n\n{h}"),
            Expect::Seq(vec![&[400, 403]]),
        ),
        case(
            "mixed CRLF and bare LF",
            format!("POST /lf3 HTTP/1.1\r\nHost: a\nContent-Length: {n}\r\n\n{h}"),
            Expect::Seq(vec![&[400, 403]]),
        ),
        case(
            "NUL in a header value before the payload",
            "GET /nul HTTP/1.1\r\nHost: a\r\nX-A: x\0attackmarker\r\n\r\n",
            Expect::Closes(&[400, 403]),
        ),
        case(
            "NUL in a header name",
            format!(
                "POST /nul2 HTTP/1.1\r\nHost: a\r\nContent\0-Length: 5\r\nContent-Length: {n}\r\n\r\n{h}"
            ),
            Expect::Closes(&[400, 403]),
        ),
        case(
            "bare CR inside a header line hiding Transfer-Encoding",
            format!(
                "POST /cr HTTP/1.1\r\nHost: a\r\nX-A: a\rTransfer-Encoding: chunked\r\nContent-Length: {}\r\n\r\n{}",
                n + 5,
                format_args!("0\r\n\r\n{h}")
            ),
            Expect::Closes(&[400]),
        ),
        case(
            "space before the colon of Content-Length",
            post("/cl-sp", &format!("Content-Length : {n}\r\n"), h),
            Expect::Closes(&[400]),
        ),
        case(
            "space inside a header name",
            post("/name-sp", &format!("Content Length: {n}\r\n"), h),
            Expect::Closes(&[400]),
        ),
        case(
            "folded header line carrying the payload",
            "GET /fold HTTP/1.1\r\nHost: a\r\nX-A: harmless\r\n attackmarker\r\n\r\n",
            Expect::Closes(&[400, 403]),
        ),
        case(
            "header line without a colon",
            format!("GET /nocolon HTTP/1.1\r\nHost: a\r\nattackmarker\r\n\r\n{h}"),
            Expect::Closes(&[400]),
        ),
        case(
            "payload as the method",
            "ATTACKMARKER /m HTTP/1.1\r\nHost: a\r\n\r\n",
            Expect::Seq(vec![&[400, 403]]),
        ),
        case(
            "space inside the request target",
            "GET /a attackmarker HTTP/1.1\r\nHost: a\r\n\r\n",
            Expect::Closes(&[400, 403]),
        ),
        case(
            "HTTP/0.9 request line",
            "GET /attackmarker\r\n\r\n",
            Expect::Any,
        ),
        case(
            "unknown protocol version",
            "GET /attackmarker HTTP/1.7\r\nHost: a\r\n\r\n",
            Expect::Any,
        ),
        case(
            "two Host headers",
            "GET /hosts HTTP/1.1\r\nHost: a\r\nHost: attackmarker.example\r\n\r\n",
            Expect::Closes(&[400, 403]),
        ),
        case(
            "payload in Host",
            "GET /h HTTP/1.1\r\nHost: attackmarker.example\r\n\r\n",
            Expect::Seq(vec![&[400, 403]]),
        ),
        with_after(
            case(
                "absolute-form target naming another host than Host",
                "GET http://other.example/abs-form HTTP/1.1\r\nHost: site.example\r\nConnection: close\r\n\r\n",
                Expect::Seq(vec![&[200, 400]]),
            ),
            Box::new(|t| {
                // If forwarded, the backend reads the host the rules saw.
                let r = t.records_for("/abs-form");
                if let Some(r) = r.first() {
                    let host: Vec<&str> = r.header_values("host").collect();
                    if host != ["site.example"] || r.uri != "/abs-form" {
                        return Err(format!(
                            "the backend received target {} with Host {host:?}; the rules saw Host site.example",
                            r.uri
                        ));
                    }
                }
                Ok(())
            }),
        ),
        case(
            "absolute-form target with the payload in its authority",
            "GET http://attackmarker.example/abs HTTP/1.1\r\nHost: site.example\r\n\r\n",
            Expect::Seq(vec![&[400, 403]]),
        ),
        case(
            "percent-encoded CRLF in the target",
            "GET /x%0d%0aX-Injected:%20attackmarker HTTP/1.1\r\nHost: a\r\n\r\n",
            Expect::Seq(vec![&[400, 403]]),
        ),
        case(
            "bytes over 0x7F and a quote in the target",
            b"GET /\xff\"attackmarker HTTP/1.1\r\nHost: a\r\n\r\n".to_vec(),
            Expect::Seq(vec![&[400, 403]]),
        ),
        case(
            "head of 40,000 header lines",
            format!(
                "GET /many HTTP/1.1\r\nHost: a\r\n{}\r\n",
                "A: b\r\n".repeat(40_000)
            ),
            Expect::Closes(&[431]),
        ),
    ]
}

fn pipeline_cases() -> Vec<Case> {
    let h = HIDDEN;
    let n = h.len();
    let mut hundred = String::new();
    for i in 0..100 {
        hundred.push_str(&format!("GET /pipe/{i} HTTP/1.1\r\nHost: a\r\n\r\n"));
    }
    hundred.push_str("GET /attackmarker HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let mut hundred_expect: Vec<&'static [u16]> = vec![&[200]; 100];
    hundred_expect.push(&[403]);
    vec![
        case(
            "request hidden in a Content-Length body",
            post("/hidden", &format!("Content-Length: {n}\r\n"), h),
            Expect::Seq(vec![&[403]]),
        ),
        case(
            "request hidden in the body of a GET",
            format!("GET /getbody HTTP/1.1\r\nHost: a\r\nContent-Length: {n}\r\n\r\n{h}"),
            Expect::Seq(vec![&[403]]),
        ),
        with_after(
            case(
                "pipelined request after a body",
                format!(
                    "{}GET /attackmarker HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
                    post("/p1", "Content-Length: 5\r\n", "hello")
                ),
                Expect::Seq(vec![&[200], &[403]]),
            ),
            Box::new(|t| {
                let r = one_record(t, "/p1")?;
                if r.body().as_deref() != Some(b"hello") {
                    return Err(format!("the backend read the body {:?}", r.body()));
                }
                Ok(())
            }),
        ),
        with_after(
            case(
                "100 pipelined requests in one write, the payload last",
                hundred,
                Expect::Seq(hundred_expect),
            ),
            Box::new(|t| {
                let got = t
                    .records()
                    .iter()
                    .filter(|r| r.path.starts_with("/pipe/"))
                    .count();
                if got != 100 {
                    return Err(format!(
                        "the backend received {got} of the 100 pipelined requests"
                    ));
                }
                Ok(())
            }),
        ),
        with_after(
            case(
                "Connection: host",
                "GET /conn-host HTTP/1.1\r\nHost: site.example\r\nConnection: host, close\r\n\r\n",
                Expect::Seq(vec![&[200]]),
            ),
            Box::new(|t| {
                let r = one_record(t, "/conn-host")?;
                let host: Vec<&str> = r.header_values("host").collect();
                if host != ["site.example"] {
                    return Err(format!(
                        "the backend received Host {host:?}, the rules saw site.example"
                    ));
                }
                Ok(())
            }),
        ),
        with_after(
            case(
                "Connection: content-length on a request with a body",
                post(
                    "/conn-cl",
                    "Content-Length: 5\r\nConnection: content-length, close\r\n",
                    "hello",
                ),
                Expect::Seq(vec![&[200]]),
            ),
            Box::new(|t| {
                let r = one_record(t, "/conn-cl")?;
                if r.body().as_deref() != Some(b"hello") {
                    return Err(format!("the backend read the body {:?}", r.body()));
                }
                Ok(())
            }),
        ),
        with_after(
            case(
                "Connection: transfer-encoding on a chunked request",
                post(
                    "/conn-te",
                    "Transfer-Encoding: chunked\r\nConnection: transfer-encoding, close\r\n",
                    &chunked("hello"),
                ),
                Expect::Seq(vec![&[200]]),
            ),
            Box::new(|t| {
                let r = one_record(t, "/conn-te")?;
                if r.body().as_deref() != Some(b"hello") {
                    return Err(format!("the backend read the body {:?}", r.body()));
                }
                Ok(())
            }),
        ),
        with_after(
            case(
                "h2c upgrade request, then a pipelined request",
                "GET /upgrade HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\nGET /attackmarker HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
                Expect::Any,
            ),
            Box::new(|t| {
                for r in t.records_for("/upgrade") {
                    if r.header_values("upgrade").next().is_some() {
                        return Err("the backend received an Upgrade header".into());
                    }
                }
                Ok(())
            }),
        ),
        case(
            "WebSocket upgrade, then frames carrying a request",
            "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\nGET /attackmarker HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            Expect::Any,
        ),
        case(
            "CONNECT, then a request in the would-be tunnel",
            format!("CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n{h}"),
            Expect::Any,
        ),
        // Expect: 100-continue.
        case(
            "Expect: 100-continue on a blocked head, the body hiding a request",
            format!(
                "POST /attackmarker HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: {n}\r\n\r\n{h}"
            ),
            Expect::Closes(&[403]),
        ),
        case(
            "Expect: 100-continue, the body sent at once with the payload",
            post(
                "/expect-now",
                &format!("Expect: 100-continue\r\nContent-Length: {n}\r\n"),
                h,
            ),
            Expect::Seq(vec![&[403]]),
        ),
        case(
            "Expect: 100-continue in HTTP/1.0, the body with the payload",
            format!(
                "POST /expect10 HTTP/1.0\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: {n}\r\n\r\n{h}"
            ),
            Expect::Seq(vec![&[403]]),
        ),
        case(
            "Expect: 100-continue with a length over the body limit",
            post(
                "/expect-big",
                "Expect: 100-continue\r\nContent-Length: 99999999\r\n",
                "",
            ),
            Expect::Closes(&[413]),
        ),
        case(
            "Expect: 100-continue on a GET without a body, then a pipelined request",
            "GET /expect-get HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\nGET /attackmarker HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            Expect::Seq(vec![&[200], &[403]]),
        ),
        case(
            "unknown Expect value",
            post(
                "/expect-odd",
                &format!("Expect: 100-continuex\r\nContent-Length: {n}\r\n"),
                h,
            ),
            Expect::Seq(vec![&[403, 417]]),
        ),
    ]
}

/// Framing: Content-Length, Transfer-Encoding, chunk sizes and chunk framing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smuggling_framing() {
    let t = Target::start(target_setup("smuggling-framing")).await;
    let failures = run(&t, framing_cases()).await;
    report("smuggling (framing)", &failures);
}

/// Head syntax: line ends, control bytes, header names, targets, Host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smuggling_head() {
    let t = Target::start(target_setup("smuggling-head")).await;
    let failures = run(&t, head_cases()).await;
    report("smuggling (head)", &failures);
}

/// Hidden and pipelined requests, Connection, upgrades and Expect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smuggling_pipelining_and_expect() {
    let t = Target::start(target_setup("smuggling-pipeline")).await;
    let mut failures = run(&t, pipeline_cases()).await;

    // Expect: 100-continue, waiting for the interim answer before sending a body
    // that carries the payload: it is read and inspected like any other.
    let name = "Expect: 100-continue, body with the payload sent after 100 Continue";
    let mut s = TcpStream::connect(t.http).await.unwrap();
    let head = format!(
        "POST /expect-wait HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        HIDDEN.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // Read exactly the interim answer (the body timeout is 2 s: no waiting for
    // more than it).
    let mut interim = Vec::new();
    let read = tokio::time::timeout(DEADLINE, async {
        while !interim.ends_with(b"\r\n\r\n") {
            match s.read_u8().await {
                Ok(b) => interim.push(b),
                Err(_) => return,
            }
        }
    })
    .await;
    if read.is_err() || !interim.starts_with(b"HTTP/1.1 100 ") {
        failures.push(format!(
            "{name}: expected 100 Continue first; observed {:?}",
            String::from_utf8_lossy(&interim)
        ));
    }
    let rest = exchange_on(&mut s, HIDDEN.as_bytes(), WAIT).await;
    if rest.finals() != [403] {
        failures.push(format!(
            "{name}: expected 403; observed {}",
            rest.describe()
        ));
    }
    if let Err(why) = t.check(name).await {
        failures.push(why);
    }
    report("smuggling (pipelining, Connection, Expect)", &failures);
}
