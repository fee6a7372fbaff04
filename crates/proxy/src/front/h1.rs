//! The HTTP/1.x front end: one task per client connection, reading raw request heads
//! itself (see [`crate::http::wire`]) so the engine sees each request as it was sent.

use super::tunnel;
use crate::exchange::driver::{BodyPlan, BodyRead, BodySource, Driven, Head, Refusal, drive};
use crate::exchange::{
    ConnInfo, ForwardParts, Reply, Shared, forward_target_shared, upstream_headers,
};
use crate::http::valid_value;
use crate::http::wire::{
    BodyDecoder, Decoded, Framing, HeadError, RequestHead, Version, find_head_end, parse_head,
};
use crate::logs::{LogKind, Written, now_unix_micros, one_line, rfc3339_micros};
use crate::metrics::Action;
use crate::slots::{ConnectionSlot, SlotHandle, Wait};
use bytes::{Buf, Bytes, BytesMut};
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::timeout;

const READ_CHUNK: usize = 16 * 1024;

/// Buffer space for a connection's first read (most request heads fit; a larger
/// head grows the buffer by [`READ_CHUNK`]).
const FIRST_READ: usize = 1024;

/// Serves HTTP/1.x requests on one connection until it closes, a request asks for
/// the connection to close, shutdown begins (the request in progress finishes
/// first), or its slot is reclaimed while it waits for a head (see
/// [`crate::slots`]).
pub async fn serve<IO>(
    shared: Arc<Shared>,
    conn: ConnInfo,
    io: IO,
    slot: ConnectionSlot,
    shutdown: watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send,
{
    serve_with(shared, conn, io, &slot, shutdown).await;
}

/// [`serve`] with a borrowed slot: also the decrypted side of an inspected
/// `CONNECT` tunnel (`front/inspect.rs`), which holds its connection's slot.
pub(super) async fn serve_with<IO>(
    shared: Arc<Shared>,
    conn: ConnInfo,
    mut io: IO,
    slot: &SlotHandle,
    shutdown: watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send,
{
    // Nothing is allocated for reading until the client sends something, and only
    // a little for a first read: a connection that sends nothing, or a few bytes,
    // costs little memory.
    let mut buf = BytesMut::new();
    let mut first = true;
    // One wait for shutdown for the whole connection: made (and registered with the
    // channel) once, not again for every request.
    let mut stop_rx = shutdown.clone();
    let mut stop = std::pin::pin!(crate::runtime::stopped(&mut stop_rx));
    // Likewise one timer for the waits, moved to each wait's deadline: moving it
    // later does not take it out of the timer wheel and put it back.
    let mut timer = std::pin::pin!(tokio::time::sleep_until(
        (Instant::now() + shared.server.client_header_timeout).into()
    ));
    let mut armed: Option<Instant> = None;
    loop {
        // Wait for a request: the keep-alive timeout until its first byte, then the
        // header timeout for the whole head.
        let mut arrived: Option<(Instant, i64)> = None;
        if !buf.is_empty() {
            arrived = Some((Instant::now(), now_unix_micros()));
        }
        let idle = if first {
            shared.server.client_header_timeout
        } else {
            shared.server.keepalive_timeout
        };
        slot.wait(if first || !buf.is_empty() {
            Wait::Head
        } else {
            Wait::Idle
        });
        let wait_start = Instant::now();
        let end = loop {
            match find_head_end(&buf, shared.policy().limits.header_bytes) {
                Ok(Some(end)) => break end,
                Ok(None) => {}
                Err(e) => {
                    let (start, start_us) = arrived.unwrap_or((Instant::now(), now_unix_micros()));
                    Box::pin(bad_head(
                        &shared,
                        conn,
                        &mut io,
                        e,
                        start,
                        start_us,
                        buf.len(),
                    ))
                    .await;
                    linger(&mut io).await;
                    return;
                }
            }
            let deadline = match arrived {
                Some((t, _)) => t + shared.server.client_header_timeout,
                None => wait_start + idle,
            };
            let waiting_idle = arrived.is_none() && buf.iter().all(|b| *b == b'\r' || *b == b'\n');
            if waiting_idle && *shutdown.borrow() {
                return;
            }
            if buf.capacity() - buf.len() < FIRST_READ {
                buf.reserve(if buf.is_empty() && arrived.is_none() {
                    FIRST_READ
                } else {
                    READ_CHUNK
                });
            }
            if armed != Some(deadline) {
                timer.as_mut().reset(deadline.into());
                armed = Some(deadline);
            }
            tokio::select! {
                r = io.read_buf(&mut buf) => match r {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if arrived.is_none() {
                            arrived = Some((Instant::now(), now_unix_micros()));
                        }
                    }
                },
                () = &mut timer => {
                    if arrived.is_some() {
                        let msg = "request head not received within server.client_header_timeout";
                        if let Some(w) = error_line(&shared, conn, msg) {
                            w.wait().await;
                        }
                        shared.metrics.malformed_requests.fetch_add(1, Ordering::Relaxed);
                        let _ = write_simple(&mut io, StatusCode::REQUEST_TIMEOUT, &shared).await;
                    }
                    return;
                }
                () = &mut stop, if waiting_idle => return,
                () = slot.reclaimed() => {
                    tracing::debug!("{}: connection reclaimed while waiting for a request head", conn.source);
                    return;
                }
            }
        };
        first = false;
        if !slot.busy() {
            // Reclaimed just as the head completed: the slot is someone else's.
            return;
        }
        let (start, start_us) = arrived.unwrap_or((Instant::now(), now_unix_micros()));
        let raw = buf.split_to(end.end).freeze().slice(end.skip..);
        let head = match parse_head(raw, shared.policy().limits.max_headers) {
            Ok(h) => h,
            Err(e) => {
                Box::pin(bad_head(
                    &shared, conn, &mut io, e, start, start_us, end.end,
                ))
                .await;
                linger(&mut io).await;
                return;
            }
        };
        if !conn.tls
            && let Some(answer) = shared
                .acme()
                .and_then(|a| a.http01(&head.method, &head.uri))
        {
            // An ACME HTTP-01 validation for a pending token: answered before the
            // rules and the routes (which never see it), then closed.
            Box::pin(answer_http01(&mut io, &head, &answer, &shared)).await;
            linger(&mut io).await;
            return;
        }
        // Boxed: the request's state machine is large (the phases, the upstream
        // exchange), and a connection waiting for its next head should not carry
        // room for it (10,000 waiting connections would hold 100 MiB).
        let keep = Box::pin(handle_request(
            &shared, conn, &mut io, &mut buf, head, start, start_us, slot, &shutdown,
        ))
        .await;
        if !keep || *shutdown.borrow() {
            linger(&mut io).await;
            return;
        }
    }
}

/// Answers an ACME HTTP-01 validation request with the key authorization.
async fn answer_http01<IO: AsyncWrite + Unpin>(
    io: &mut IO,
    head: &RequestHead,
    key_authorization: &str,
    shared: &Shared,
) {
    tracing::info!(
        "acme: answered the HTTP-01 challenge {}",
        String::from_utf8_lossy(&head.uri)
    );
    let mut msg = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        key_authorization.len()
    );
    if &head.method[..] != b"HEAD" {
        msg.push_str(key_authorization);
    }
    let _ = timeout(shared.server.send_timeout, io.write_all(msg.as_bytes())).await;
    let _ = io.flush().await;
}

/// Closes a connection politely: sends FIN (or TLS close_notify), then reads and
/// discards what the client may still be sending, for a short while, so that the
/// kernel does not answer unread data with a reset that could destroy the response
/// before the client reads it.
async fn linger<IO: AsyncRead + AsyncWrite + Unpin>(io: &mut IO) {
    const LINGER: Duration = Duration::from_secs(2);
    const LINGER_BYTES: usize = 1 << 20;
    let _ = timeout(LINGER, io.shutdown()).await;
    // On the heap: this future is part of every connection's task, and a buffer
    // in it would be held by every waiting connection.
    let mut sink = vec![0u8; 4096];
    let mut total = 0;
    let _ = timeout(LINGER, async {
        while total < LINGER_BYTES {
            match io.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    })
    .await;
}

/// Answers a head that cannot be read at all: 431 or 400, and an error-log line.
async fn bad_head<IO: AsyncWrite + Unpin>(
    shared: &Arc<Shared>,
    conn: ConnInfo,
    io: &mut IO,
    e: HeadError,
    start: Instant,
    start_us: i64,
    bytes_in: usize,
) {
    shared
        .metrics
        .malformed_requests
        .fetch_add(1, Ordering::Relaxed);
    let status = match e {
        HeadError::TooLarge(_) | HeadError::TooManyHeaders(_) => {
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
        }
        HeadError::Malformed(_) => StatusCode::BAD_REQUEST,
    };
    if let Some(w) = error_line(shared, conn, &format!("unreadable request: {e}")) {
        w.wait().await;
    }
    let written = write_simple(io, status, shared).await.unwrap_or(0);
    shared.metrics.request(status.as_u16(), Action::BadRequest);
    if shared.logs.enabled(LogKind::Access) {
        let line = serde_json::json!({
            "ts_us": start_us,
            "time": rfc3339_micros(start_us),
            "client": conn.client.to_string(),
            "peer": conn.peer.to_string(),
            "server": conn.local.to_string(),
            "scheme": if conn.tls { "https" } else { "http" },
            "status": status.as_u16(),
            "bytes_in": bytes_in,
            "bytes_out": written,
            "total_us": u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
            "action": Action::BadRequest.label(),
            "error": e.to_string(),
        });
        shared.logs.send(LogKind::Access, line.to_string());
    }
}

/// Queues a proxy error line; with `logs.error_log_before_response`, returns what to
/// await before answering.
pub(super) fn error_line(shared: &Shared, conn: ConnInfo, msg: &str) -> Option<Written> {
    shared.logs.send_error(
        format!(
            "{} [error] [client {}] palisade: {}",
            rfc3339_micros(now_unix_micros()),
            conn.client.ip(),
            one_line(msg)
        ),
        true,
    )
}

async fn write_simple<IO: AsyncWrite + Unpin>(
    io: &mut IO,
    status: StatusCode,
    shared: &Shared,
) -> std::io::Result<usize> {
    let body = format!(
        "{} {}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    let msg = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    timeout(shared.server.send_timeout, io.write_all(msg.as_bytes()))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let _ = io.flush().await;
    Ok(msg.len())
}

/// Handles one request whose head has been read. Returns whether the connection
/// can carry another request.
#[allow(clippy::too_many_arguments)]
async fn handle_request<IO>(
    shared: &Arc<Shared>,
    conn: ConnInfo,
    io: &mut IO,
    buf: &mut BytesMut,
    head: RequestHead,
    start: Instant,
    start_us: i64,
    slot: &SlotHandle,
    shutdown: &watch::Receiver<bool>,
) -> bool
where
    IO: AsyncRead + AsyncWrite + Unpin + Send,
{
    let framing = head.framing();
    let version = head.version;
    let mut keepalive = match version {
        Version::Http(1, 0) => head.has_token(b"connection", b"keep-alive"),
        v => v.keepalive_default() && !head.has_token(b"connection", b"close"),
    };
    if !head.problems.is_empty() || matches!(framing, Framing::Invalid(_) | Framing::Unsupported(_))
    {
        keepalive = false;
    }
    let te_and_cl = head.values(b"transfer-encoding").next().is_some()
        && head.values(b"content-length").next().is_some();
    if te_and_cl {
        // RFC 9112 §6.3: a request with both may be a smuggling attempt.
        keepalive = false;
    }
    if version == Version::Http(1, 0) && head.values(b"transfer-encoding").next().is_some() {
        // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 request means its framing
        // cannot be trusted (an HTTP/1.0 hop in front may have read the body
        // differently): the connection closes after this request.
        keepalive = false;
    }
    let out = WriteCtx {
        version,
        is_head: &head.method[..] == b"HEAD",
        keepalive,
    };
    let plan = match framing {
        Framing::Length(n) => BodyPlan::Length(n),
        Framing::Chunked => BodyPlan::Unknown,
        _ => BodyPlan::None,
    };
    let driver_head = Head {
        start,
        start_us,
        method: head.method.clone(),
        uri: head.uri.clone(),
        protocol: head.protocol.clone(),
        host: head
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"host"))
            .map(|(_, v)| v.clone()),
        headers: head.headers.iter().map(|(n, v)| (&n[..], &v[..])),
        head_bytes: head.len,
        body: plan,
    };
    let wants_continue =
        version == Version::Http(1, 1) && head.has_token(b"expect", b"100-continue");
    // An HTTP/1.1 request to switch protocols (WebSocket): its Upgrade goes
    // upstream, and a 101 answer turns the connection into a tunnel. Never to
    // cleartext HTTP/2 (`h2c`): its requests would pass through the tunnel
    // uninspected, so such a request goes upstream as a plain one.
    let upgrade = version == Version::Http(1, 1)
        && head.has_token(b"connection", b"upgrade")
        && head.values(b"upgrade").next().is_some()
        && !head.has_token(b"upgrade", b"h2c");
    let mut body = Http1Body {
        io: &mut *io,
        buf,
        dec: BodyDecoder::new(framing, shared.policy().limits.header_bytes),
        wants_continue,
    };
    // After phase 2: what only HTTP/1 can get wrong, then the request for the
    // upstream (built again from the head if it must be sent a second time).
    let forward = || {
        if version == Version::Http09 {
            return Err(Refusal::bad_request("HTTP/0.9 request"));
        }
        match framing {
            Framing::Invalid(why) => return Err(Refusal::bad_request(why)),
            Framing::Unsupported(why) => return Err(Refusal::not_implemented(why)),
            _ => {}
        }
        if !head.problems.is_empty() {
            return Err(Refusal::bad_request(head.problems.join("; ")));
        }
        forward_parts(&head, conn, upgrade).map_err(Refusal::bad_request)
    };
    let driven = drive(shared, conn, driver_head, &mut body, &forward).await;
    let Driven {
        reply,
        body_read,
        refused,
    } = driven;
    let Some(reply) = reply else {
        return false;
    };
    if refused && version == Version::Http09 {
        // HTTP/0.9 has no status line and no headers; the answer is a bare body.
        return write_http09(io, reply, shared).await;
    }
    if reply.upgrade.is_some() {
        return write_upgrade(io, buf, reply, shared, conn).await;
    }
    if reply.tunnel.is_some() {
        Box::pin(run_tunnel(io, buf, reply, shared, conn, slot, shutdown)).await;
        return false;
    }
    let out = WriteCtx {
        keepalive: out.keepalive && body_read && !*shutdown.borrow(),
        ..out
    };
    write_reply(io, reply, out, shared).await
}

/// Answers `101 Switching Protocols` and joins the client to the upstream until
/// either closes or the tunnel has been idle for `server.tunnel_idle_timeout`.
/// The connection carries no further HTTP request.
async fn write_upgrade<IO>(
    io: &mut IO,
    buf: &mut BytesMut,
    mut reply: Reply,
    shared: &Shared,
    conn: ConnInfo,
) -> bool
where
    IO: AsyncRead + AsyncWrite + Unpin + Send,
{
    let Some(upgrade) = reply.upgrade.take() else {
        return false;
    };
    reply.body.error_lines_written().await;
    let mut head = Vec::with_capacity(256 + reply.headers.len() * 48);
    head.extend_from_slice(b"HTTP/1.1 101 Switching Protocols\r\n");
    for (name, value) in &reply.headers {
        if name == http::header::CONTENT_LENGTH {
            continue;
        }
        push_title_case(&mut head, name.as_str());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: upgrade\r\nUpgrade: ");
    head.extend_from_slice(upgrade.protocol.as_bytes());
    head.extend_from_slice(b"\r\n\r\n");
    reply.body.add_bytes_out(head.len() as u64);
    if let Err(e) = write_all(io, &head, shared.server.send_timeout).await {
        reply.body.set_error(&format!("writing to the client: {e}"));
        reply.body.finish();
        return false;
    }
    // The exchange is logged as it stands at the switch; what the tunnel carries
    // is not inspected.
    reply.body.finish();
    let upstream = upgrade.upstream;
    let early = buf.split().freeze();
    match tunnel::splice(io, &early, upstream, shared.server.tunnel_idle_timeout).await {
        Ok(end) => tracing::debug!("tunnel for {} ended: {end:?}", conn.client),
        Err(e) => tracing::debug!("tunnel for {} failed: {e}", conn.client),
    }
    false
}

/// A forward proxy's `CONNECT` whose destination is connected: answers `200
/// Connection Established`, then runs the tunnel on the connection
/// ([`super::connect::serve`]: the ClientHello's SNI checked, then inspection
/// or the splice). The connection carries no further HTTP request.
async fn run_tunnel<IO>(
    io: &mut IO,
    buf: &mut BytesMut,
    mut reply: Reply,
    shared: &Arc<Shared>,
    conn: ConnInfo,
    slot: &SlotHandle,
    shutdown: &watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send,
{
    let Some(tunnel) = reply.tunnel.take() else {
        return;
    };
    reply.body.error_lines_written().await;
    let head = b"HTTP/1.1 200 Connection Established\r\n\r\n";
    reply.body.add_bytes_out(head.len() as u64);
    if let Err(e) = write_all(io, head, shared.server.send_timeout).await {
        shared.metrics.forward_tunnel("client_gone");
        reply.body.set_error(&format!("writing to the client: {e}"));
        reply.body.finish();
        return;
    }
    let _ = io.flush().await;
    super::connect::serve(io, buf, reply, tunnel, shared, conn, slot, shutdown).await;
}

/// A request body read from an HTTP/1 connection through its framing.
struct Http1Body<'a, IO> {
    io: &'a mut IO,
    buf: &'a mut BytesMut,
    dec: BodyDecoder,
    wants_continue: bool,
}

impl<IO: AsyncRead + AsyncWrite + Unpin + Send> BodySource for Http1Body<'_, IO> {
    async fn start(&mut self) -> bool {
        // Invite the body only when none of it has arrived yet.
        if self.wants_continue && self.buf.is_empty() {
            return self
                .io
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await
                .is_ok();
        }
        true
    }

    async fn read(&mut self) -> BodyRead {
        loop {
            match self.dec.decode(self.buf) {
                Ok(Decoded::Data(chunk)) => return BodyRead::Data(chunk),
                Ok(Decoded::Done) => return BodyRead::End,
                Ok(Decoded::NeedMore) => {
                    if self.buf.capacity() - self.buf.len() < 1024 {
                        self.buf.reserve(READ_CHUNK);
                    }
                    // Cancel-safe: a cancelled read_buf has read nothing.
                    match self.io.read_buf(self.buf).await {
                        Ok(0) | Err(_) => {
                            return BodyRead::Gone(
                                "client closed the connection during the request body".into(),
                            );
                        }
                        Ok(_) => {}
                    }
                }
                Err(e) => return BodyRead::Malformed(e.to_string()),
            }
        }
    }

    fn wire_bytes(&self) -> u64 {
        self.dec.raw_bytes
    }
}

fn forward_parts(
    head: &RequestHead,
    conn: ConnInfo,
    upgrade: bool,
) -> Result<ForwardParts, &'static str> {
    let method = Method::from_bytes(&head.method).map_err(|_| "method cannot be forwarded")?;
    let uri = forward_target_shared(&method, &head.uri)?;
    let mut headers = upstream_headers(
        &head.headers,
        &conn.source_text,
        conn.keeps_forwarded_for(),
        conn.tls,
    )?;
    if conn.forward {
        // Meant for this proxy (checked before the rules ran), not for the
        // destination.
        headers.remove(b"proxy-authorization");
    }
    if upgrade {
        // The one hop-by-hop exchange that must reach the upstream.
        for v in head.values(b"upgrade") {
            if !valid_value(v) {
                return Err("invalid Upgrade header value");
            }
            headers.push(Bytes::from_static(b"upgrade"), v.clone());
        }
        headers.push(
            Bytes::from_static(b"connection"),
            Bytes::from_static(b"upgrade"),
        );
    }
    Ok(ForwardParts {
        method,
        uri,
        headers,
    })
}

#[derive(Debug, Clone, Copy)]
struct WriteCtx {
    version: Version,
    is_head: bool,
    keepalive: bool,
}

/// Writes a reply. Returns whether the connection may carry another request.
async fn write_reply<IO>(io: &mut IO, mut reply: Reply, ctx: WriteCtx, shared: &Shared) -> bool
where
    IO: AsyncWrite + Unpin,
{
    reply.body.error_lines_written().await;
    if reply.drop {
        reply.body.finish();
        return false;
    }
    let status = reply.status;
    let no_body = ctx.is_head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let mut keepalive = ctx.keepalive && !reply.close;
    let chunked;
    // The Content-Length the head carries in place of the headers' own (written
    // where an insert into the map would put it, without making a header value).
    let mut length = None;
    match reply.body.known_len() {
        Some(n) if !no_body => {
            length = Some(n);
            chunked = false;
        }
        Some(_) => chunked = false,
        None => {
            if no_body || reply.headers.contains_key(http::header::CONTENT_LENGTH) {
                chunked = false;
            } else if ctx.version == Version::Http(1, 1)
                || matches!(ctx.version, Version::Http(maj, _) if maj >= 2)
            {
                chunked = true;
            } else {
                // HTTP/1.0 client, unknown length: the end of the body is the close.
                chunked = false;
                keepalive = false;
            }
        }
    }
    let mut head = Vec::with_capacity(256 + reply.headers.len() * 48);
    head.extend_from_slice(b"HTTP/1.1 ");
    head.extend_from_slice(status.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    head.extend_from_slice(b"\r\n");
    let mut length_due = length;
    for (name, value) in &reply.headers {
        if length.is_some() && name == http::header::CONTENT_LENGTH {
            if let Some(n) = length_due.take() {
                push_content_length(&mut head, n);
            }
            continue;
        }
        push_title_case(&mut head, name.as_str());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    if let Some(n) = length_due {
        push_content_length(&mut head, n);
    }
    if chunked {
        head.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    }
    if !keepalive {
        head.extend_from_slice(b"Connection: close\r\n");
    } else if ctx.version == Version::Http(1, 0) {
        head.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    head.extend_from_slice(b"\r\n");
    reply.body.add_bytes_out(head.len() as u64);
    let send_timeout = shared.server.send_timeout;

    if no_body {
        reply.body.finish();
        return write_all(io, &head, send_timeout).await.is_ok() && keepalive;
    }
    // Small complete bodies go out with the head in one write; a shaped body's head
    // goes at once, not when its first piece's turn comes.
    let mut pending_head = Some(head);
    if reply.body.is_paced()
        && let Some(h) = pending_head.take()
        && let Err(e) = write_all(io, &h, send_timeout).await
    {
        reply.body.set_error(&format!("writing to the client: {e}"));
        reply.body.finish();
        return false;
    }
    loop {
        let frame = match reply.body.frame().await {
            None => break,
            Some(Ok(f)) => f,
            Some(Err(_)) => {
                // The upstream broke off: the client cannot be told in-band.
                if let Some(h) = pending_head.take() {
                    let _ = write_all(io, &h, send_timeout).await;
                }
                return false;
            }
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let mut out: Vec<u8>;
        let res = if chunked {
            out = pending_head.take().unwrap_or_default();
            out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
            if data.len() <= 8192 {
                out.extend_from_slice(&data);
                out.extend_from_slice(b"\r\n");
                write_all(io, &out, send_timeout).await
            } else {
                let mut chain = Bytes::from(out).chain(data).chain(&b"\r\n"[..]);
                write_buf(io, &mut chain, send_timeout).await
            }
        } else if let Some(h) = pending_head.take() {
            if data.len() <= 16 * 1024 {
                out = h;
                out.extend_from_slice(&data);
                write_all(io, &out, send_timeout).await
            } else {
                let mut chain = Bytes::from(h).chain(data);
                write_buf(io, &mut chain, send_timeout).await
            }
        } else {
            write_all(io, &data, send_timeout).await
        };
        if let Err(e) = res {
            reply.body.set_error(&format!("writing to the client: {e}"));
            reply.body.finish();
            return false;
        }
    }
    let mut tail = pending_head.take().unwrap_or_default();
    if chunked {
        tail.extend_from_slice(b"0\r\n\r\n");
    }
    if !tail.is_empty() && write_all(io, &tail, send_timeout).await.is_err() {
        reply.body.set_error("writing to the client failed");
        reply.body.finish();
        return false;
    }
    reply.body.add_bytes_out(if chunked { 5 } else { 0 });
    let _ = io.flush().await;
    reply.body.finish();
    keepalive
}

async fn write_http09<IO: AsyncWrite + Unpin>(
    io: &mut IO,
    mut reply: Reply,
    shared: &Shared,
) -> bool {
    reply.body.error_lines_written().await;
    while let Some(Ok(frame)) = reply.body.frame().await {
        if let Ok(d) = frame.into_data()
            && write_all(io, &d, shared.server.send_timeout).await.is_err()
        {
            break;
        }
    }
    reply.body.finish();
    false
}

async fn write_all<IO: AsyncWrite + Unpin>(
    io: &mut IO,
    data: &[u8],
    t: Duration,
) -> std::io::Result<()> {
    // Most writes complete at once: the timeout (a clock read and a timer) is set
    // up only for one that has to wait.
    let mut write = std::pin::pin!(io.write_all(data));
    if let Poll::Ready(r) = std::future::poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx))).await {
        return r;
    }
    timeout(t, write)
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

async fn write_buf<IO: AsyncWrite + Unpin, B: Buf>(
    io: &mut IO,
    data: &mut B,
    t: Duration,
) -> std::io::Result<()> {
    timeout(t, io.write_all_buf(data))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

/// Writes a `Content-Length` header line.
fn push_content_length(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Writes a lower-case header name as `Title-Case`.
fn push_title_case(out: &mut Vec<u8>, name: &str) {
    let mut up = true;
    for b in name.bytes() {
        out.push(if up { b.to_ascii_uppercase() } else { b });
        up = b == b'-';
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_lines() {
        for n in [0u64, 7, 10, 12345, u64::MAX] {
            let mut v = Vec::new();
            push_content_length(&mut v, n);
            assert_eq!(v, format!("Content-Length: {n}\r\n").into_bytes());
        }
    }

    #[test]
    fn title_case() {
        let mut v = Vec::new();
        push_title_case(&mut v, "x-forwarded-for");
        assert_eq!(v, b"X-Forwarded-For");
    }
}
