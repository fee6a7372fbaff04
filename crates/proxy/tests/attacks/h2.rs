//! HTTP/2 over TLS (ALPN `h2`): floods and bombs against the frame layer (rapid
//! reset, CONTINUATION floods, an HPACK bomb, PING and SETTINGS floods, too many
//! streams), connections and streams that stall (no request after the handshake,
//! an unfinished header block, a body that never comes or drips, a reader that
//! opens no flow-control window), and requests that an HTTP/1 backend would read
//! differently (framing headers, line breaks in values and in `:path`).
//!
//! After each, besides the suite's three checks, a normal HTTP/2 request on a new
//! connection must be served.

use crate::h2wire::{self, RawH2, Seen};
use crate::harness::{DEADLINE, Setup, Target, report, tls_connect};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

/// A request body fed through a channel: it ends when the sender is dropped, and
/// waits (forever, if nothing is sent) in between.
struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
    length: Option<u64>,
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        self.rx
            .poll_recv(cx)
            .map(|d| d.map(|d| Ok(hyper::body::Frame::data(d))))
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self.length {
            Some(n) => hyper::body::SizeHint::with_exact(n),
            None => hyper::body::SizeHint::default(),
        }
    }
}

/// Sends one request with hyper's HTTP/2 client on a new connection and returns
/// the status (the body is read to its end).
async fn h2_send<B>(t: &Target, req: Request<B>) -> Result<u16, String>
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let tls = tls_connect(t.https.unwrap(), t.cert.as_ref().unwrap(), &[b"h2"])
        .await
        .map_err(|e| format!("TLS connection: {e}"))?;
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(conn);
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("request: {e}"))?;
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    Ok(status)
}

async fn h2_get(t: &Target, path: &str) -> Result<u16, String> {
    let req = Request::get(format!("https://localhost{path}"))
        .body(Empty::<Bytes>::new())
        .unwrap();
    h2_send(t, req).await
}

/// The suite's checks, plus a normal HTTP/2 request served on a new connection.
async fn check(t: &Target, attack: &str, n: &mut usize, failures: &mut Vec<String>) {
    if let Err(why) = t.check(attack).await {
        failures.push(why);
    }
    *n += 1;
    let path = format!("/control-h2/{n}");
    match tokio::time::timeout(DEADLINE, h2_get(t, &path)).await {
        Err(_) => failures.push(format!(
            "{attack}: a normal HTTP/2 request got no answer within {DEADLINE:?}"
        )),
        Ok(Err(e)) => failures.push(format!("{attack}: a normal HTTP/2 request failed: {e}")),
        Ok(Ok(200)) => {
            if t.records_for(&path).is_empty() {
                failures.push(format!(
                    "{attack}: the HTTP/2 control request never reached the backend"
                ));
            }
        }
        Ok(Ok(s)) => failures.push(format!(
            "{attack}: a normal HTTP/2 request was answered {s}"
        )),
    }
}

async fn raw(t: &Target, settings: &[(u16, u32)], read: bool) -> RawH2 {
    tokio::time::timeout(
        DEADLINE,
        RawH2::connect(t.https.unwrap(), t.cert.as_ref().unwrap(), settings, read),
    )
    .await
    .expect("HTTP/2 connection within the deadline")
    .expect("HTTP/2 connection")
}

/// Sends `chunks` one after another until the server ends the connection, a write
/// fails or blocks for 5 s; returns the bytes sent.
async fn flood(c: &mut RawH2, chunks: impl Iterator<Item = Vec<u8>>) -> u64 {
    let mut sent = 0u64;
    for chunk in chunks {
        if c.seen().ended() {
            break;
        }
        match tokio::time::timeout(Duration::from_secs(5), c.send(&chunk)).await {
            Ok(Ok(())) => sent += chunk.len() as u64,
            _ => break,
        }
    }
    sent
}

fn setup() -> Setup {
    let mut s = Setup::new("h2");
    s.tls = true;
    s.big = true;
    s.server = "client_header_timeout = \"2s\"\nkeepalive_timeout = \"2s\"\nclient_body_timeout = \"2s\"\nclient_body_min_rate = 1000\nclient_body_min_rate_grace = \"1s\"\nsend_timeout = \"2s\"\n".into();
    s.needles = vec!["x-bomb".into()];
    s
}

fn ended(s: &Seen) -> bool {
    s.ended()
}

/// Rapid reset, CONTINUATION floods, the HPACK bomb, PING and SETTINGS floods and
/// the stream limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_floods() {
    let t = Target::start(setup()).await;
    let mut failures = Vec::new();
    let mut n = 0;

    // Rapid reset: thousands of requests, each cancelled as soon as it is sent.
    let name = "h2 rapid reset (5,000 HEADERS each followed by RST_STREAM)";
    let mut c = raw(&t, &[], true).await;
    let block = h2wire::request_block(false, "/rapid-reset");
    let batches = (0..50u32).map(|b| {
        let mut out = Vec::new();
        for i in 0..100u32 {
            let id = 2 * (b * 100 + i) + 1;
            out.extend(h2wire::headers(id, &block, true, true));
            out.extend(h2wire::rst_stream(id, 0x8));
        }
        out
    });
    flood(&mut c, batches).await;
    let seen = c.wait_for(DEADLINE, ended).await;
    if seen.goaway.is_empty() && !seen.closed {
        failures.push(format!(
            "{name}: the connection was not closed for its resets; observed {}",
            seen.describe()
        ));
    }
    eprintln!(
        "[h2] {name}: {}; the backend received {} of the requests",
        seen.describe(),
        t.records_for("/rapid-reset").len()
    );
    drop(c);
    check(&t, name, &mut n, &mut failures).await;

    // CONTINUATION flood: a header block that never ends, in 1 KiB fields.
    let name = "h2 CONTINUATION flood (an endless header block of 1 KiB fields)";
    let mut c = raw(&t, &[], true).await;
    let mut first = h2wire::request_block(false, "/continuation");
    h2wire::literal(&mut first, b"x-attackmarker", b"1");
    c.send(&h2wire::headers(1, &first, true, false))
        .await
        .unwrap();
    let mut field = Vec::new();
    h2wire::literal(&mut field, b"x-c", &[b'c'; 1000]);
    let frames = (0..4096).map(|_| {
        let mut out = Vec::new();
        for _ in 0..16 {
            out.extend(h2wire::continuation(1, &field, false));
        }
        out
    });
    let sent = flood(&mut c, frames).await;
    let seen = c.wait_for(DEADLINE, ended).await;
    if !seen.ended() {
        failures.push(format!(
            "{name}: still open after {sent} bytes; observed {}",
            seen.describe()
        ));
    }
    eprintln!(
        "[h2] {name}: cut off after {sent} bytes; {}",
        seen.describe()
    );
    drop(c);
    check(&t, name, &mut n, &mut failures).await;

    // CONTINUATION flood of empty frames (no size ever grows).
    let name = "h2 CONTINUATION flood (empty frames)";
    let mut c = raw(&t, &[], true).await;
    c.send(&h2wire::headers(
        1,
        &h2wire::request_block(false, "/continuation-empty"),
        true,
        false,
    ))
    .await
    .unwrap();
    let empty = h2wire::continuation(1, &[], false);
    let frames = (0..200).map(|_| empty.repeat(5000));
    let sent = flood(&mut c, frames).await;
    let seen = c.wait_for(DEADLINE, ended).await;
    if !seen.ended() {
        failures.push(format!(
            "{name}: still open after {} frames; observed {}",
            sent / 9,
            seen.describe()
        ));
    }
    eprintln!(
        "[h2] {name}: cut off after {} frames; {}",
        sent / 9,
        seen.describe()
    );
    drop(c);
    check(&t, name, &mut n, &mut failures).await;

    // HPACK bomb: a 4,000-byte field enters the dynamic table, then one-byte
    // references to it decode to megabytes per header block.
    let name = "h2 HPACK bomb (a 4,000-byte table entry referenced 16,000 times per block)";
    let mut c = raw(&t, &[], true).await;
    let mut value = b"attackmarker".to_vec();
    value.resize(4000, b'b');
    let mut b1 = h2wire::request_block(false, "/bomb");
    h2wire::literal_indexed(&mut b1, b"x-bomb", &value);
    for _ in 0..10_000 {
        h2wire::indexed(&mut b1, 62);
    }
    let mut bombs = vec![h2wire::headers(1, &b1, true, true)];
    for s in 1..20u32 {
        let mut b = h2wire::request_block(false, "/bomb");
        for _ in 0..16_000 {
            h2wire::indexed(&mut b, 62);
        }
        bombs.push(h2wire::headers(2 * s + 1, &b, true, true));
    }
    flood(&mut c, bombs.into_iter()).await;
    let seen = c
        .wait_for(DEADLINE, |s| {
            s.ended() || s.resets.len() + s.responses.len() >= 20
        })
        .await;
    if !seen.ended() && seen.resets.is_empty() {
        failures.push(format!(
            "{name}: the oversized header blocks were neither refused nor the connection closed; observed {}",
            seen.describe()
        ));
    }
    eprintln!("[h2] {name}: {}", seen.describe());
    drop(c);
    check(&t, name, &mut n, &mut failures).await;

    // PING flood from a client that reads nothing: the answers must not pile up.
    let name = "h2 PING flood (200,000 PINGs, answers never read)";
    let mut c = raw(&t, &[], false).await;
    let pings = (0..100u64).map(|b| {
        let mut out = Vec::new();
        for i in 0..2000 {
            out.extend(h2wire::ping(b * 2000 + i));
        }
        out
    });
    let sent = flood(&mut c, pings).await;
    c.start_reading();
    let seen = c.wait_for(Duration::from_secs(3), ended).await;
    eprintln!(
        "[h2] {name}: {} PINGs written before the server stopped reading; {}",
        sent / 17,
        seen.describe()
    );
    drop(c);
    check(&t, name, &mut n, &mut failures).await;

    // SETTINGS flood from a client that reads nothing.
    let name = "h2 SETTINGS flood (100,000 SETTINGS, acknowledgements never read)";
    let mut c = raw(&t, &[], false).await;
    let one = h2wire::settings(&[(h2wire::SETTINGS_INITIAL_WINDOW_SIZE, 65535)]);
    let frames = (0..50).map(|_| one.repeat(2000));
    let sent = flood(&mut c, frames).await;
    c.start_reading();
    let seen = c.wait_for(Duration::from_secs(3), ended).await;
    eprintln!(
        "[h2] {name}: {} SETTINGS written before the server stopped reading; {}",
        sent / one.len() as u64,
        seen.describe()
    );
    drop(c);
    check(&t, name, &mut n, &mut failures).await;

    // More streams than allowed at once, each waiting for a body.
    let name = "h2 300 streams open at once (the limit is 128)";
    let mut c = raw(&t, &[], true).await;
    let mut out = Vec::new();
    for i in 0..300u32 {
        let mut b = h2wire::request_block(true, "/streams");
        h2wire::literal_named(&mut b, 28, b"10"); // content-length
        out.extend(h2wire::headers(2 * i + 1, &b, false, true));
    }
    flood(&mut c, std::iter::once(out)).await;
    let seen = c
        .wait_for(DEADLINE, |s| {
            s.ended() || s.resets.len() + s.responses.len() >= 300
        })
        .await;
    let refused = seen.resets.iter().filter(|(id, _)| *id > 2 * 128).count();
    if !seen.ended() && refused == 0 {
        failures.push(format!(
            "{name}: streams over the limit were not refused; observed {}",
            seen.describe()
        ));
    }
    if !t.records_for("/streams").is_empty() {
        failures.push(format!(
            "{name}: a stream without its body reached the backend"
        ));
    }
    eprintln!("[h2] {name}: {}", seen.describe());
    drop(c);
    check(&t, name, &mut n, &mut failures).await;

    report("HTTP/2 floods", &failures);
}

/// Connections and streams that stall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_stalls() {
    let t = Target::start(setup()).await;
    let mut failures = Vec::new();
    let mut n = 0;

    let name = "h2 connection that sends no request after the handshake";
    let c = raw(&t, &[], true).await;
    let seen = c.wait_for(DEADLINE, |s| s.closed).await;
    if !seen.closed || seen.goaway.is_empty() {
        failures.push(format!(
            "{name}: expected GOAWAY and a close; observed {}",
            seen.describe()
        ));
    }
    drop(c);
    check(&t, name, &mut n, &mut failures).await;

    let name = "TLS listener: a TCP connection that never starts the handshake";
    let mut tcp = tokio::net::TcpStream::connect(t.https.unwrap())
        .await
        .unwrap();
    let (_, closed) = crate::harness::read_until_close(&mut tcp, DEADLINE).await;
    if !closed {
        failures.push(format!("{name}: still open after {DEADLINE:?}"));
    }
    drop(tcp);
    check(&t, name, &mut n, &mut failures).await;

    let name = "TLS listener: a ClientHello dripped a byte every 100 ms";
    let mut tcp = tokio::net::TcpStream::connect(t.https.unwrap())
        .await
        .unwrap();
    // The start of a TLS 1.2 record carrying a ClientHello, then filler.
    let hello: Vec<u8> = [
        0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
    ]
    .into_iter()
    .chain(std::iter::repeat_n(0x41, 500))
    .collect();
    let started = std::time::Instant::now();
    let mut closed = false;
    for b in hello {
        use tokio::io::AsyncWriteExt;
        if tcp.write_all(&[b]).await.is_err() {
            closed = true;
            break;
        }
        let (_, c) = crate::harness::read_until_close(&mut tcp, Duration::from_millis(100)).await;
        if c {
            closed = true;
            break;
        }
        if started.elapsed() > DEADLINE {
            break;
        }
    }
    if !closed {
        failures.push(format!("{name}: still open after {DEADLINE:?}"));
    }
    drop(tcp);
    check(&t, name, &mut n, &mut failures).await;

    let name = "h2 TLS handshake with ALPN h2, then not even the preface";
    let mut tls = tls_connect(t.https.unwrap(), t.cert.as_ref().unwrap(), &[b"h2"])
        .await
        .unwrap();
    let mut sink = Vec::new();
    let closed = tokio::time::timeout(DEADLINE, tls.read_to_end(&mut sink)).await;
    if closed.is_err() {
        failures.push(format!("{name}: still open after {DEADLINE:?}"));
    }
    drop(tls);
    check(&t, name, &mut n, &mut failures).await;

    let name = "h2 header block left unfinished (no END_HEADERS), then silence";
    let mut c = raw(&t, &[], true).await;
    c.send(&h2wire::headers(
        1,
        &h2wire::request_block(false, "/unfinished"),
        true,
        false,
    ))
    .await
    .unwrap();
    let seen = c.wait_for(DEADLINE, |s| s.closed).await;
    if !seen.closed {
        failures.push(format!("{name}: still open; observed {}", seen.describe()));
    }
    drop(c);
    check(&t, name, &mut n, &mut failures).await;

    let name = "h2 stream that never sends its announced body";
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let req = Request::post("https://localhost/no-body")
        .header("content-length", "100")
        .body(ChannelBody {
            rx,
            length: Some(100),
        })
        .unwrap();
    match tokio::time::timeout(DEADLINE, h2_send(&t, req)).await {
        Ok(Ok(408)) => {}
        other => failures.push(format!("{name}: expected 408; observed {other:?}")),
    }
    drop(tx);
    if !t.records_for("/no-body").is_empty() {
        failures.push(format!("{name}: the request reached the backend"));
    }
    check(&t, name, &mut n, &mut failures).await;

    let name = "h2 body dripped a byte every 200 ms (minimum rate 1,000 B/s)";
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let drip = tokio::spawn(async move {
        for b in b"attackmarker".iter().cycle().take(1000) {
            if tx.send(Bytes::copy_from_slice(&[*b])).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let req = Request::post("https://localhost/drip")
        .body(ChannelBody { rx, length: None })
        .unwrap();
    match tokio::time::timeout(DEADLINE, h2_send(&t, req)).await {
        Ok(Ok(408)) => {}
        other => failures.push(format!("{name}: expected 408; observed {other:?}")),
    }
    drip.abort();
    check(&t, name, &mut n, &mut failures).await;

    let name = "h2 reader that opens no flow-control window for a 64 MiB response";
    let mut c = raw(&t, &[(h2wire::SETTINGS_INITIAL_WINDOW_SIZE, 0)], true).await;
    c.send(&h2wire::headers(
        1,
        &h2wire::request_block(false, "/big?n=67108864"),
        true,
        true,
    ))
    .await
    .unwrap();
    let seen = c.wait_for(DEADLINE * 2, |s| s.closed).await;
    if !seen.closed {
        failures.push(format!("{name}: still open; observed {}", seen.describe()));
    }
    eprintln!("[h2] {name}: {}", seen.describe());
    drop(c);
    check(&t, name, &mut n, &mut failures).await;

    report("HTTP/2 stalls", &failures);
}

/// A stream carrying something an HTTP/1 backend would read as framing: the stream
/// must be refused, or inspected as forwarded.
async fn framing_case(
    t: &Target,
    name: &str,
    block: Vec<u8>,
    body: Option<&[u8]>,
    n: &mut usize,
    failures: &mut Vec<String>,
) {
    let mut c = raw(t, &[], true).await;
    let mut out = h2wire::headers(1, &block, body.is_none(), true);
    if let Some(b) = body {
        out.extend(h2wire::data(1, b, true));
    }
    let _ = c.send(&out).await;
    let seen = c
        .wait_for(DEADLINE, |s| {
            s.ended() || s.resets.iter().any(|(id, _)| *id == 1) || s.responses.contains(&1)
        })
        .await;
    if !(seen.ended() || seen.resets.iter().any(|(id, _)| *id == 1) || seen.responses.contains(&1))
    {
        failures.push(format!("{name}: no answer; observed {}", seen.describe()));
    }
    eprintln!("[h2] {name}: {}", seen.describe());
    drop(c);
    check(t, name, n, failures).await;
}

/// (name, header block, request body)
type FramingCase = (&'static str, Vec<u8>, Option<&'static [u8]>);

/// Requests that an HTTP/1 backend would read differently than the rules did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_downgrade_smuggling() {
    let t = Target::start(setup()).await;
    let mut failures = Vec::new();
    let mut n = 0;
    let hidden: &[u8] = b"0\r\n\r\nGET /attackmarker HTTP/1.1\r\nHost: a\r\n\r\n";
    let cases: Vec<FramingCase> = vec![
        (
            "h2 request with transfer-encoding: chunked",
            h2wire::request_block_with(
                true,
                "/h2-te",
                "localhost",
                &[(b"transfer-encoding", b"chunked")],
            ),
            Some(hidden),
        ),
        (
            "h2 content-length shorter than the DATA sent",
            h2wire::request_block_with(true, "/h2-cl", "localhost", &[(b"content-length", b"5")]),
            Some(hidden),
        ),
        (
            "h2 header value with CR LF",
            h2wire::request_block_with(
                false,
                "/h2-crlf",
                "localhost",
                &[(b"x-a", b"a\r\nattackmarker: 1")],
            ),
            None,
        ),
        (
            "h2 :path with a space and CR LF",
            h2wire::request_block_with(
                false,
                "/h2-path HTTP/1.1\r\nHost: a\r\n\r\nGET /attackmarker",
                "localhost",
                &[],
            ),
            None,
        ),
        (
            "h2 upper-case header name",
            h2wire::request_block_with(
                false,
                "/h2-upper",
                "localhost",
                &[(b"X-Attackmarker", b"1")],
            ),
            None,
        ),
        (
            "h2 connection-specific header",
            h2wire::request_block_with(
                false,
                "/h2-conn",
                "localhost",
                &[(b"connection", b"keep-alive"), (b"x-attackmarker", b"1")],
            ),
            None,
        ),
        (
            "h2 host header other than :authority, with the payload",
            h2wire::request_block_with(
                false,
                "/h2-host",
                "localhost",
                &[(b"host", b"attackmarker.example")],
            ),
            None,
        ),
        (
            "h2 payload in :authority",
            h2wire::request_block_with(false, "/h2-authority", "attackmarker.example", &[]),
            None,
        ),
        (
            "h2 second :path after a regular header",
            h2wire::request_block_with(
                false,
                "/h2-pseudo-late",
                "localhost",
                &[(b"x-a", b"1"), (b":path", b"/attackmarker")],
            ),
            None,
        ),
    ];
    for (name, b, body) in cases {
        framing_case(&t, name, b, body, &mut n, &mut failures).await;
    }
    // `*` is a target for OPTIONS only (RFC 9113 §8.3.1): a GET to it must not go
    // upstream as `GET *`, which an HTTP/1 backend may read as something else.
    let name = "h2 GET with :path *";
    let before = t.records_for("*").len();
    framing_case(
        &t,
        name,
        h2wire::request_block_with(false, "*", "localhost", &[]),
        None,
        &mut n,
        &mut failures,
    )
    .await;
    let forwarded = t.records_for("*").len() - before;
    if forwarded != 0 {
        failures.push(format!(
            "{name}: forwarded to the backend {forwarded} time(s)"
        ));
    }

    report("HTTP/2 downgrade smuggling", &failures);
}
