//! The HTTP/2 front end (TLS with ALPN `h2`): hyper's server frames the streams, each
//! request goes through the same [`Exchange`] as HTTP/1 requests.

use super::h2order::{Lines, Order, Tee};
use crate::exchange::driver::{BodyPlan, BodyRead, BodySource, Head, Refusal, drive};
use crate::exchange::headers::forward_target;
use crate::exchange::{ConnInfo, ForwardParts, Reply, ReplyBody, Shared, Tunnel, upstream_headers};
use crate::forward::inspect::InspectedTunnel;
use crate::logs::now_unix_micros;
use crate::slots::{ConnectionSlot, SlotHandle, Wait};
use bytes::{Bytes, BytesMut};
use http::header::HOST;
use http::{HeaderValue, Method, Request, Response, Uri};
use http_body::Body as _;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

/// A rule's `drop`: hyper resets the stream when the service fails.
#[derive(Debug, thiserror::Error)]
#[error("request dropped by rule")]
pub struct Dropped;

/// Most streams a client may have open at once on one connection.
const MAX_STREAMS: u32 = 128;

/// Serves HTTP/2 on one connection; on shutdown, sends GOAWAY and lets the open
/// streams finish.
///
/// A connection without a request in progress is closed (GOAWAY, then close)
/// after `server.client_header_timeout` when it has carried no request yet, and
/// after `server.keepalive_timeout` otherwise, like an idle HTTP/1 connection: a
/// client that completes the handshake and then sends nothing, or only part of a
/// header block, cannot hold the connection. Streams still sending their
/// response get `server.send_timeout` to finish after the GOAWAY.
///
/// Without a request in progress the connection waits, and its slot may be
/// reclaimed (see [`crate::slots`]): it then closes the same way.
pub async fn serve<IO>(
    shared: Arc<Shared>,
    conn: ConnInfo,
    io: IO,
    slot: ConnectionSlot,
    shutdown: watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send,
{
    serve_with(shared, conn, io, &slot, shutdown, None).await;
}

/// [`serve`] with a borrowed slot, and the inspected tunnel whose decrypted
/// stream `io` is (`front/inspect.rs`, when the client negotiated `h2` with the
/// minted certificate), or `None`.
///
/// hyper runs each stream's request in a task of its own, spawned through the
/// executor (`execute_h2stream`), and a tokio task-local does not follow a
/// spawned task: the [`InspectedTunnel::scope`] this connection runs in would not
/// cover its streams. So the tunnel is carried here explicitly, and each
/// stream's exchange is run in its scope again ([`handle`]), where
/// [`crate::forward::inspect::choose`] finds it.
pub(super) async fn serve_with<IO>(
    shared: Arc<Shared>,
    conn: ConnInfo,
    io: IO,
    slot: &SlotHandle,
    mut shutdown: watch::Receiver<bool>,
    inspected: Option<Arc<InspectedTunnel>>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send,
{
    let header_limit = u32::try_from(shared.policy().limits.header_bytes).unwrap_or(u32::MAX);
    slot.wait(Wait::Head);
    let activity = Arc::new(Activity::new(slot.clone()));
    let order = Arc::new(Order::default());
    let svc = {
        let shared = shared.clone();
        let activity = activity.clone();
        let order = order.clone();
        let shutdown = shutdown.clone();
        service_fn(move |req: Request<Incoming>| {
            let stream = StreamCtx {
                guard: activity.begin(),
                slot: activity.slot.clone(),
                shutdown: shutdown.clone(),
            };
            let shared = shared.clone();
            let inspected = inspected.clone();
            // Called in the order the requests' header blocks arrived.
            let lines = order.take(req.headers());
            handle(shared, conn, req, lines, inspected, stream)
        })
    };
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_header_list_size(header_limit)
        .max_concurrent_streams(MAX_STREAMS)
        // Streams the client resets before the server answered (the "rapid
        // reset" flood): past this many pending, the connection is closed.
        .max_pending_accept_reset_streams(Some(64))
        // Streams the server had to reset for the client's errors.
        .max_local_error_reset_streams(Some(256));
    let io = Tee::new(io, order, shared.policy().limits.header_bytes);
    let c = builder.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(c);
    let server = &shared.server;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            r = c.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("h2 connection from {}: {e}", conn.source);
                }
                return;
            }
            () = crate::runtime::stopped(&mut shutdown) => break,
            () = activity.slot.reclaimed() => {
                tracing::debug!("h2 connection from {}: reclaimed (connection slots)", conn.source);
                break;
            }
            _ = tick.tick() => {
                let limit = if activity.served.load(Ordering::Relaxed) == 0 {
                    server.client_header_timeout
                } else {
                    server.keepalive_timeout
                };
                if activity.idle_for().is_some_and(|d| d >= limit) {
                    tracing::debug!("h2 connection from {} idle for {limit:?}: closing", conn.source);
                    break;
                }
            }
        }
    }
    c.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(server.send_timeout, c).await;
}

/// Requests in progress on one HTTP/2 connection, and since when it has had none;
/// the connection's slot waits while it has none.
#[derive(Debug)]
struct Activity {
    open: AtomicUsize,
    served: AtomicU64,
    /// When the connection last became idle.
    idle_since: std::sync::Mutex<Option<Instant>>,
    slot: SlotHandle,
}

impl Activity {
    fn new(slot: SlotHandle) -> Activity {
        Activity {
            open: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            idle_since: std::sync::Mutex::new(Some(Instant::now())),
            slot,
        }
    }

    fn begin(self: &Arc<Self>) -> ActiveRequest {
        self.open.fetch_add(1, Ordering::Relaxed);
        self.served.fetch_add(1, Ordering::Relaxed);
        *self.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = None;
        // Reclaimed just now: the connection closes gracefully (GOAWAY), and the
        // streams already open, this one included, still finish.
        let _ = self.slot.busy();
        ActiveRequest(self.clone())
    }

    /// How long the connection has had no request in progress (`None`: one is).
    fn idle_for(&self) -> Option<Duration> {
        self.idle_since
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map(|t| t.elapsed())
    }
}

/// A request in progress, until its handler has produced the response (or, for
/// a `CONNECT`, until its tunnel ends).
struct ActiveRequest(Arc<Activity>);

/// What a stream's request holds of its connection: its place among the
/// requests in progress, and what a `CONNECT`'s tunnel, which outlives the
/// handler, needs of the connection.
struct StreamCtx {
    guard: ActiveRequest,
    slot: SlotHandle,
    shutdown: watch::Receiver<bool>,
}

impl Drop for ActiveRequest {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, Ordering::Relaxed) == 1 {
            let mut idle = self.0.idle_since.lock().unwrap_or_else(|e| e.into_inner());
            if self.0.open.load(Ordering::Relaxed) == 0 {
                *idle = Some(Instant::now());
                self.0.slot.wait(Wait::Idle);
            }
        }
    }
}

/// Runs one request; `ordered` holds its header lines in the order sent, when
/// they are known (see [`super::h2order`]). Inside an inspected tunnel
/// (`inspected`), the exchange runs in the tunnel's scope, and the request's
/// `:authority` must name the tunnel's host and port as its Host header must.
///
/// On a forward listener, a `CONNECT` (RFC 9113 §8.5: `:authority` only) names
/// its destination as HTTP/1's authority-form does; once it is answered 200,
/// its stream is the tunnel ([`connect`]). A request with `:scheme` `http` is
/// the absolute-form request of HTTP/1 (`http://authority/path`); any other
/// is origin-form (the PAC file).
async fn handle(
    shared: Arc<Shared>,
    conn: ConnInfo,
    mut req: Request<Incoming>,
    ordered: Option<Lines>,
    inspected: Option<Arc<InspectedTunnel>>,
    stream: StreamCtx,
) -> Result<Response<ReplyBody>, Dropped> {
    let start = Instant::now();
    let start_us = now_unix_micros();
    let is_connect = conn.forward && req.method() == Method::CONNECT;
    // Taken before the request is: the stream, once the 200 has gone.
    let upgrade = is_connect.then(|| hyper::upgrade::on(&mut req));
    let (parts, body) = req.into_parts();
    let absolute = conn.forward && parts.uri.scheme() == Some(&http::uri::Scheme::HTTP);
    let target = match parts.uri.authority() {
        Some(a) if is_connect => Bytes::copy_from_slice(a.as_str().as_bytes()),
        Some(a) if absolute => Bytes::from(format!(
            "http://{a}{}",
            parts.uri.path_and_query().map_or("/", |p| p.as_str())
        )),
        _ => parts.uri.path_and_query().map_or_else(
            || Bytes::from_static(b"/"),
            |p| Bytes::copy_from_slice(p.as_str().as_bytes()),
        ),
    };
    // HTTP/2 carries the host in :authority; rules expect a Host header.
    let authority: Option<HeaderValue> = parts
        .uri
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok());
    let mut lines: Vec<(&[u8], &[u8])> = Vec::with_capacity(parts.headers.len() + 1);
    if !parts.headers.contains_key(HOST)
        && let Some(a) = &authority
    {
        lines.push((b"host", a.as_bytes()));
    }
    match &ordered {
        Some(o) => lines.extend(o.iter().map(|(n, v)| (n.as_slice(), v.as_slice()))),
        None => {
            for (n, v) in &parts.headers {
                lines.push((n.as_str().as_bytes(), v.as_bytes()));
            }
        }
    }
    let head_bytes: usize = lines
        .iter()
        .map(|(n, v)| n.len() + v.len() + 4)
        .sum::<usize>()
        + target.len();
    let plan = if body.is_end_stream() {
        BodyPlan::None
    } else {
        match body.size_hint().exact() {
            Some(n) => BodyPlan::Length(n),
            None => BodyPlan::Unknown,
        }
    };
    let head = Head {
        start,
        start_us,
        method: Bytes::copy_from_slice(parts.method.as_str().as_bytes()),
        uri: target.clone(),
        protocol: Bytes::from_static(b"HTTP/2.0"),
        host: lines
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"host"))
            .map(|(_, v)| Bytes::copy_from_slice(v)),
        headers: lines.iter().copied(),
        head_bytes,
        body: plan,
    };
    let forward = || {
        let owned: Vec<(Bytes, Bytes)> = lines
            .iter()
            .map(|(n, v)| (Bytes::copy_from_slice(n), Bytes::copy_from_slice(v)))
            .collect();
        if let (Some(tunnel), Some(authority)) = (&inspected, &authority) {
            // The Host header (or the :authority standing for it) is checked
            // when the destination is chosen; an :authority beside a Host
            // header must name the tunnel too (domain fronting after decryption).
            tunnel
                .check_authority(authority.as_bytes())
                .map_err(|r| Refusal {
                    status: r.status,
                    reason: r.reason.into_owned(),
                })?;
        }
        let mut headers = upstream_headers(
            &owned,
            &conn.source_text,
            conn.keeps_forwarded_for(),
            conn.tls,
        )
        .map_err(Refusal::bad_request)?;
        if conn.forward {
            // Meant for this proxy (checked before the rules ran), not for the
            // destination (as on HTTP/1).
            headers.remove(b"proxy-authorization");
        }
        // `*` is a target for OPTIONS only (RFC 9113 §8.3.1), as on HTTP/1.
        let uri = match parts.uri.path_and_query() {
            _ if is_connect || absolute => {
                forward_target(&parts.method, &target).map_err(Refusal::bad_request)?
            }
            Some(p) if p.as_str() == "*" => {
                forward_target(&parts.method, b"*").map_err(Refusal::bad_request)?
            }
            Some(p) => Uri::from(p.clone()),
            None => Uri::from_static("/"),
        };
        Ok(ForwardParts {
            method: parts.method.clone(),
            uri,
            headers,
        })
    };
    let mut source = Http2Body { body, wire: 0 };
    let driven = drive(&shared, conn, head, &mut source, &forward);
    let driven = match &inspected {
        Some(tunnel) => tunnel.scope(driven).await,
        None => driven.await,
    };
    match driven.reply {
        Some(mut reply) => match (reply.tunnel.take(), upgrade) {
            (Some(tunnel), Some(upgrade)) => {
                reply.body.error_lines_written().await;
                tokio::spawn(connect(shared, conn, reply, tunnel, upgrade, stream));
                let mut resp = Response::new(ReplyBody::empty());
                *resp.status_mut() = http::StatusCode::OK;
                Ok(resp)
            }
            (Some(_), None) => {
                // Not reached: only a forward listener's CONNECT opens a tunnel.
                reply.body.set_error("a tunnel without a CONNECT stream");
                reply.body.finish();
                Err(Dropped)
            }
            (None, _) => {
                let resp = to_response_logged(reply).await;
                drop(stream);
                resp
            }
        },
        None => Err(Dropped),
    }
}

/// The tunnel of a `CONNECT` answered 200 on an HTTP/2 stream (RFC 9113 §8.5):
/// once hyper has sent the answer, the stream's DATA frames are the tunnel's
/// bytes; the ClientHello is checked and the tunnel inspected or spliced as on
/// HTTP/1 ([`super::connect::serve`]). The request counts as in progress on its
/// connection until the tunnel ends, so an open tunnel keeps the connection
/// from being closed as idle.
async fn connect(
    shared: Arc<Shared>,
    conn: ConnInfo,
    mut reply: Reply,
    tunnel: Tunnel,
    upgrade: hyper::upgrade::OnUpgrade,
    stream: StreamCtx,
) {
    let StreamCtx {
        guard,
        slot,
        shutdown,
    } = stream;
    match upgrade.await {
        Ok(upgraded) => {
            let mut io = TokioIo::new(upgraded);
            let mut buf = BytesMut::new();
            // An inspected tunnel's requests wait for their heads like a
            // connection's: on a slot state of their own, so that they do not
            // mark the whole connection, with its other streams, as waiting.
            let slot = slot.detached();
            super::connect::serve(
                &mut io, &mut buf, reply, tunnel, &shared, conn, &slot, &shutdown,
            )
            .await;
        }
        Err(e) => {
            shared.metrics.forward_tunnel("client_gone");
            reply.body.set_error(&format!("the CONNECT stream: {e}"));
            reply.body.finish();
        }
    }
    drop(guard);
}

/// A request body read from an HTTP/2 stream.
struct Http2Body {
    body: Incoming,
    wire: u64,
}

impl BodySource for Http2Body {
    async fn start(&mut self) -> bool {
        true
    }

    async fn read(&mut self) -> BodyRead {
        loop {
            // Cancel-safe: a frame is either returned or still in the stream.
            match self.body.frame().await {
                None => return BodyRead::End,
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        self.wire += data.len() as u64;
                        return BodyRead::Data(data);
                    }
                    // Trailers are not forwarded.
                }
                Some(Err(e)) => return BodyRead::Gone(format!("reading the request body: {e}")),
            }
        }
    }

    fn wire_bytes(&self) -> u64 {
        self.wire
    }
}

/// Waits until the request's error-log lines are written when
/// `logs.error_log_before_response` asks for it, then builds the response.
async fn to_response_logged(mut reply: Reply) -> Result<Response<ReplyBody>, Dropped> {
    reply.body.error_lines_written().await;
    to_response(reply)
}

fn to_response(mut reply: Reply) -> Result<Response<ReplyBody>, Dropped> {
    if reply.drop {
        reply.body.finish();
        return Err(Dropped);
    }
    reply.body.finish_at_end();
    let mut resp = Response::new(reply.body);
    *resp.status_mut() = reply.status;
    *resp.headers_mut() = reply.headers;
    Ok(resp)
}
