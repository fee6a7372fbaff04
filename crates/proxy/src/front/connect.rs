//! The client's side of a forward proxy's `CONNECT` tunnel once it has been
//! answered `200`, the same for HTTP/1 (the connection itself becomes the
//! tunnel, `front/h1.rs`) and HTTP/2 (the request's stream does, RFC 9113
//! §8.5, `front/h2.rs`): the client's first bytes are read and, when they are a
//! TLS ClientHello, its SNI checked ([`first_message`]); then the tunnel is
//! inspected (`front/inspect.rs`) or spliced to the destination.

use super::tunnel;
use crate::exchange::{ConnInfo, Reply, Shared, Tunnel};
use crate::forward::TunnelTarget;
use crate::forward::clienthello::{Peek, peek_client_hello};
use crate::slots::SlotHandle;
use bytes::BytesMut;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::watch;

/// Room kept free in the buffer for each read of the first message.
const READ_CHUNK: usize = 16 * 1024;

/// What the client's first bytes in a tunnel came to.
#[derive(Debug)]
pub(super) enum First {
    /// A ClientHello whose SNI (if any) passed the checks; `Some` holds the SNI.
    Hello(Option<String>),
    /// Not TLS, or nothing within `server.client_header_timeout` (a protocol
    /// whose server speaks first): let through uninspected.
    Other,
    /// The tunnel must be closed: the metrics' outcome and why.
    Refused(&'static str, String),
    /// The client closed the tunnel before its first message was complete.
    Gone,
}

/// Reads the client's first bytes into `buf` (nothing consumed: they go on
/// as they are) until a TLS ClientHello is complete, they cannot be one, or
/// `server.client_header_timeout` ends; checks a ClientHello's SNI against
/// `target` ([`TunnelTarget::check_sni`]: the lists, domain fronting).
pub(super) async fn first_message<IO>(
    io: &mut IO,
    buf: &mut BytesMut,
    target: &TunnelTarget,
    shared: &Shared,
) -> First
where
    IO: AsyncRead + Unpin,
{
    // A TLS client speaks first. A client that sends nothing within the header
    // timeout may be waiting for the server to speak.
    let deadline = Instant::now() + shared.server.client_header_timeout;
    loop {
        match peek_client_hello(buf) {
            Ok(Peek::Hello(h)) => {
                return match target.check_sni(h.sni.as_deref().map(str::as_bytes)) {
                    Ok(()) => First::Hello(h.sni.clone()),
                    Err(r) => First::Refused(r.outcome(), r.to_string()),
                };
            }
            Ok(Peek::NotTls) => return First::Other,
            Ok(Peek::NeedMore) => {}
            // What the proxy cannot read, the destination may read otherwise.
            Err(e) => return First::Refused("sni_refused", e.to_string()),
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(READ_CHUNK);
        }
        match tokio::time::timeout_at(deadline.into(), io.read_buf(buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return First::Gone,
            Ok(Ok(_)) => {}
            // Nothing at all within the timeout: a protocol whose server speaks
            // first. Part of a ClientHello, though, is never let through
            // unchecked (its rest could name another host).
            Err(_) if buf.is_empty() => return First::Other,
            Err(_) => {
                return First::Refused(
                    "sni_refused",
                    "ClientHello incomplete within server.client_header_timeout".to_owned(),
                );
            }
        }
    }
}

/// Runs a tunnel whose `200` has been sent to the client (`io`; `buf` holds
/// what was read after the `CONNECT`, if anything): its first message checked
/// ([`first_message`]), then, for a ClientHello the `[forward] inspect` lists
/// name, TLS inspection; otherwise the client joined to the destination until
/// either closes or the tunnel has been idle for `server.tunnel_idle_timeout`.
/// The `CONNECT`'s access-log line (in `reply`) is written when the tunnel
/// ends, with the bytes of both ways.
#[allow(clippy::too_many_arguments)]
pub(super) async fn serve<IO>(
    io: &mut IO,
    buf: &mut BytesMut,
    mut reply: Reply,
    tunnel: Tunnel,
    shared: &Arc<Shared>,
    conn: ConnInfo,
    slot: &SlotHandle,
    shutdown: &watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send,
{
    let sni = match first_message(io, buf, &tunnel.target, shared).await {
        First::Hello(sni) => Some(sni),
        First::Other => None,
        First::Gone => {
            shared.metrics.forward_tunnel("client_gone");
            reply.body.add_bytes_in(buf.len() as u64);
            reply
                .body
                .set_error("client closed the tunnel before its first message was complete");
            reply.body.finish();
            return;
        }
        First::Refused(outcome, why) => {
            shared.metrics.forward_tunnel(outcome);
            let msg = format!("CONNECT {} closed: {why}", tunnel.target.authority());
            if let Some(w) = super::h1::error_line(shared, conn, &msg) {
                w.wait().await;
            }
            reply.body.add_bytes_in(buf.len() as u64);
            reply.body.set_denied(&msg);
            reply.body.finish();
            return;
        }
    };
    if let Some(sni) = sni
        && let Some(inspector) = shared.forward_inspector()
        && inspector.wants(&tunnel.target.host, sni.as_deref())
    {
        // Decrypted here, its requests sent on through pools of their own.
        let early = buf.split().freeze();
        super::inspect::run(
            io,
            early,
            reply,
            shared,
            conn,
            slot,
            shutdown,
            &inspector,
            &tunnel.target,
            sni,
        )
        .await;
        return;
    }
    let stream = match tunnel.stream {
        Some(stream) => stream,
        // Deferred while inspection might have decrypted the tunnel; the 200
        // is sent, so a failure now closes the tunnel.
        None => match tunnel.target.connect().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                shared.metrics.forward_tunnel("connect_failed");
                reply.body.add_bytes_in(buf.len() as u64);
                reply
                    .body
                    .set_error(&format!("CONNECT {}: {e}", tunnel.target.authority()));
                reply.body.finish();
                return;
            }
        },
    };
    let early = buf.split().freeze();
    let end = tunnel::splice(io, &early, stream, shared.server.tunnel_idle_timeout).await;
    shared.metrics.forward_tunnel("spliced");
    match end {
        Ok(end) => {
            let (up, down) = end.bytes();
            reply.body.add_bytes_in(early.len() as u64 + up);
            reply.body.add_bytes_out(down);
            tracing::debug!("tunnel for {} ended: {end:?}", conn.client);
        }
        Err(e) => {
            reply.body.set_error(&format!("tunnel: {e}"));
            tracing::debug!("tunnel for {} failed: {e}", conn.client);
        }
    }
    reply.body.finish();
}
