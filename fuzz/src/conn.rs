//! Whole client connections through the proxy's front ends (`proxy::front`), over
//! an in-memory stream: the bytes a client sends go through the HTTP/1 reader or
//! hyper's HTTP/2 server, the header path into the rule engine, the body, and the
//! reply. The rules read every part of the request and then refuse it at the end
//! of phase 2, so nothing is ever sent upstream; a request that reached the
//! upstream pool anyway would be one that skipped the rules, and fails the target,
//! as does any engine failure the proxy's panic-safe wrapper would otherwise hide.
//!
//! Time is tokio's paused clock: a client that stops sending meets the proxy's
//! timeouts at once instead of after seconds.

use crate::input::Input;
use proxy::config::Config;
use proxy::exchange::{ConnInfo, Shared};
use proxy::inspect::Inspector;
use proxy::logs::{LogTargets, LogWriter};
use proxy::metrics::Metrics;
use proxy::slots::Wait;
use proxy::upstream::Upstreams;
use proxy::waf::Waf;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The proxy configuration of the connection targets. The upstream is a closed
/// port: it is never reached, because every request is refused in phase 2.
const CONFIG: &str = r#"
[server]
client_header_timeout = "5ms"
keepalive_timeout = "5ms"
client_body_timeout = "1s"
send_timeout = "1s"
inspection_threads = 1
inspect_inline_bytes = 1048576

[[listener]]
address = "127.0.0.1:9"

[[upstream]]
name = "app"
servers = ["127.0.0.1:9"]

[limits]
header_bytes = 8192
max_headers = 64
request_body_bytes = 65536

[logs]
error_log = "/dev/null"

[[rules]]
inline = '''
SecRuleEngine On
SecRequestBodyAccess On
SecRequestBodyLimit 65536
SecRequestBodyLimitAction Reject
SecRule REQUEST_HEADERS:Content-Type "@rx (?i)^application/json" "id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQUEST_HEADERS:Content-Type "@rx (?i)^(?:application|text)/xml" "id:2,phase:1,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:x-block "@streq 1" "id:3,phase:1,deny,status:403,log"
SecRule REQUEST_HEADERS:x-drop "@streq 1" "id:4,phase:1,drop,log"
SecRule REQUEST_HEADERS:x-redirect "@streq 1" "id:5,phase:1,redirect:http://example.com/,log"
SecRule REQUEST_LINE|REQUEST_HEADERS|REQUEST_HEADERS_NAMES|REQUEST_COOKIES|REQUEST_COOKIES_NAMES|ARGS|ARGS_NAMES|FILES|XML:/* "@rx (?i)(?:union\s+select|<script)" "id:6,phase:2,pass,log,t:none,t:urlDecodeUni,t:lowercase"
SecRule REQUEST_URI|ARGS "@detectSQLi" "id:7,phase:2,pass,log"
SecRule REQBODY_ERROR "!@eq 0" "id:8,phase:2,deny,status:400,log"
SecAction "id:9,phase:2,deny,status:418,nolog"
'''
"#;

/// The shared state of the proxy, made once per process.
fn shared() -> &'static Arc<Shared> {
    static SHARED: OnceLock<Arc<Shared>> = OnceLock::new();
    SHARED.get_or_init(|| {
        let cfg = Config::parse(CONFIG, Path::new("/fuzz/palisade.toml"))
            .expect("the fuzz configuration is valid");
        let waf = Waf::load(&cfg.rules, &cfg.path, &cfg.server, None).expect("the fuzz rules load");
        let targets = LogTargets {
            error: cfg.logs.error_log.clone(),
            ..LogTargets::default()
        };
        let (logs, writer) =
            LogWriter::start(&targets, cfg.logs.channel_capacity, Vec::new()).expect("log writer");
        // The writer thread lives as long as the process.
        std::mem::forget(writer);
        let metrics = Arc::new(Metrics::new());
        let upstreams = Upstreams::new(&cfg, &metrics, None).expect("the fuzz upstreams are valid");
        let inspector = Inspector::new(
            cfg.server.inspection_threads,
            cfg.server.inspect_inline_bytes,
        )
        .expect("inspection pool");
        Arc::new(Shared::new(
            Arc::new(waf),
            upstreams,
            logs,
            metrics,
            cfg.limits.clone(),
            cfg.server.clone(),
            inspector,
        ))
    })
}

fn conn_info() -> ConnInfo {
    let peer: SocketAddr = ([192, 0, 2, 7], 40000).into();
    ConnInfo::direct(
        peer,
        ([127, 0, 0, 1], 8080).into(),
        false,
        proxy::client_address::SourceTrust::Unconfigured,
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a tokio runtime")
}

/// Nothing reached the upstream pool, and the engine never failed.
fn check_nothing_forwarded(shared: &Shared) {
    let m = &shared.metrics;
    assert_eq!(
        m.upstream_connects.load(Ordering::Relaxed)
            + m.upstream_connect_errors.load(Ordering::Relaxed),
        0,
        "a request reached the upstream pool without passing phase 2"
    );
    assert_eq!(
        m.engine_errors.load(Ordering::Relaxed),
        0,
        "the rule engine failed on a request (the proxy's wrapper caught it)"
    );
}

/// One HTTP/1 connection: the input is what the client sends, then it closes its
/// side and reads the replies.
pub fn fuzz_h1_conn(data: &[u8]) {
    let shared = shared();
    let (client, server) = tokio::io::duplex(1 << 16);
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let out = runtime().block_on(async {
        let slot = shared
            .slots
            .take(Wait::Head)
            .await
            .expect("a connection slot");
        let serve = proxy::front::h1::serve(shared.clone(), conn_info(), server, slot, stop_rx);
        let talk = async {
            let mut client = client;
            let _ = client.write_all(data).await;
            let _ = client.shutdown().await;
            let mut out = Vec::new();
            let _ = client.read_to_end(&mut out).await;
            out
        };
        tokio::join!(serve, talk).1
    });
    for line in out.split(|&b| b == b'\n') {
        assert!(
            !(line.starts_with(b"HTTP/1.1 502 ") || line.starts_with(b"HTTP/1.1 504 ")),
            "a request was forwarded"
        );
    }
    check_nothing_forwarded(shared);
}

/// The client connection preface of HTTP/2.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const GOAWAY: u8 = 7;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len().min(0xff_ffff);
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(&payload[..len]);
}

/// An HPACK integer with an `n`-bit prefix whose high bits are `first`.
fn hpack_int(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// A header field as an HPACK literal without indexing, new name, no Huffman:
/// any bytes can be sent this way, so hyper's own checks are what stands between
/// them and the proxy.
fn hpack_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    hpack_int(out, 0, 7, name.len());
    out.extend_from_slice(name);
    hpack_int(out, 0, 7, value.len());
    out.extend_from_slice(value);
}

/// The frames of one request described by the input: header lines `name NUL
/// value` up to an empty line, then the body. The control byte decides where the
/// header block is cut into HEADERS and CONTINUATION, and whether the body is sent
/// as one or two DATA frames.
fn request_frames(control: u8, mut input: Input<'_>) -> Vec<u8> {
    let mut block = Vec::new();
    loop {
        let line = input.until(b'\n');
        if line.is_empty() {
            break;
        }
        let (name, value) = match line.iter().position(|&b| b == 0) {
            Some(p) => (&line[..p], &line[p + 1..]),
            None => (line, &b""[..]),
        };
        hpack_literal(&mut block, name, value);
    }
    let body = input.rest();
    let mut out = Vec::new();
    let end_stream = if body.is_empty() { END_STREAM } else { 0 };
    let cut = if control & 2 != 0 {
        usize::from(control >> 2) % (block.len() + 1)
    } else {
        block.len()
    };
    if cut == block.len() {
        frame(&mut out, HEADERS, END_HEADERS | end_stream, 1, &block);
    } else {
        frame(&mut out, HEADERS, end_stream, 1, &block[..cut]);
        frame(&mut out, CONTINUATION, END_HEADERS, 1, &block[cut..]);
    }
    if !body.is_empty() {
        if control & 0x80 != 0 && body.len() > 1 {
            let half = body.len() / 2;
            frame(&mut out, DATA, 0, 1, &body[..half]);
            frame(&mut out, DATA, END_STREAM, 1, &body[half..]);
        } else {
            frame(&mut out, DATA, END_STREAM, 1, body);
        }
    }
    out
}

/// Raw frames described by the input: per frame a type, flags, a stream id byte
/// and a length byte, then that many payload bytes.
fn raw_frames(mut input: Input<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    while !input.is_empty() {
        let kind = input.byte() % 10;
        let flags = input.byte();
        let stream = u32::from(input.byte());
        let len = usize::from(input.byte());
        let payload: Vec<u8> = (0..len)
            .map_while(|_| (!input.is_empty()).then(|| input.byte()))
            .collect();
        frame(&mut out, kind, flags, stream, &payload);
    }
    out
}

/// Reads the server's frames until stream 1 ends (or is reset), the server sends
/// GOAWAY, or the connection closes; acknowledges the server's SETTINGS.
async fn read_replies(client: &mut tokio::io::DuplexStream) {
    let mut head = [0u8; 9];
    loop {
        if client.read_exact(&mut head).await.is_err() {
            return;
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        if client.read_exact(&mut payload).await.is_err() {
            return;
        }
        match kind {
            SETTINGS if flags & ACK == 0 => {
                let mut ack = Vec::new();
                frame(&mut ack, SETTINGS, ACK, 0, &[]);
                if client.write_all(&ack).await.is_err() {
                    return;
                }
            }
            GOAWAY => return,
            RST_STREAM if stream == 1 => return,
            DATA | HEADERS | CONTINUATION if stream == 1 && flags & END_STREAM != 0 => return,
            _ => {}
        }
    }
}

/// One HTTP/2 connection (prior knowledge, no TLS). Input: a control byte; with
/// bit 0 clear, one request described by the rest (see `request_frames`: header
/// lines, including pseudo-headers such as `:method`, then the body), with bit 0
/// set, raw frames (see `raw_frames`).
pub fn fuzz_h2_conn(data: &[u8]) {
    let shared = shared();
    let mut input = Input::new(data);
    let control = input.byte();
    let mut wire = PREFACE.to_vec();
    frame(&mut wire, SETTINGS, 0, 0, &[]);
    if control & 1 == 0 {
        wire.extend(request_frames(control, input));
    } else {
        wire.extend(raw_frames(input));
    }
    let (client, server) = tokio::io::duplex(1 << 16);
    let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    runtime().block_on(async {
        let slot = shared
            .slots
            .take(Wait::Head)
            .await
            .expect("a connection slot");
        let serve = proxy::front::h2::serve(shared.clone(), conn_info(), server, slot, stop_rx);
        let talk = async {
            let mut client = client;
            if client.write_all(&wire).await.is_ok() {
                read_replies(&mut client).await;
            }
        };
        tokio::join!(serve, talk);
    });
    check_nothing_forwarded(shared);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests answered with `status` so far (from the proxy's metrics).
    fn answered(status: u16) -> u64 {
        let text = shared().metrics.render(&[]);
        let key = format!("palisade_requests_total{{status=\"{status}\",");
        text.lines()
            .filter(|l| l.starts_with(&key))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    #[test]
    fn hpack_integers_use_their_prefix() {
        let mut out = Vec::new();
        hpack_int(&mut out, 0, 7, 10);
        hpack_int(&mut out, 0, 5, 1337);
        assert_eq!(out, [10, 31, 154, 10]);
    }

    /// One test, so that no other test's requests run in between the counts.
    #[test]
    fn requests_reach_the_rules() {
        let before = answered(418);
        fuzz_h1_conn(b"POST /a?b=c HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nd=e");
        assert_eq!(
            answered(418),
            before + 1,
            "phase 2 refused the HTTP/1 request"
        );
        let before = answered(418);
        fuzz_h2_conn(
            b"\x00:method\0POST\n:scheme\0http\n:path\0/a?b=c\n:authority\0x\n\
              content-type\0application/x-www-form-urlencoded\n\nd=e",
        );
        assert_eq!(
            answered(418),
            before + 1,
            "phase 2 refused the HTTP/2 request"
        );
        let before = answered(403);
        fuzz_h2_conn(b"\x00:method\0GET\n:scheme\0http\n:path\0/\n:authority\0x\nx-block\x001\n\n");
        assert_eq!(answered(403), before + 1, "phase 1 refused the request");
    }
}
