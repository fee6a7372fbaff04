//! The decrypted side of an inspected `CONNECT` tunnel (`[forward] inspect`):
//! the client's TLS ended with a leaf minted for the SNI (or the `CONNECT`
//! host), offering ALPN `h2` and `http/1.1`; then, as the client chose, the
//! HTTP/2 front end ([`super::h2::serve_with`]) or the HTTP/1 front end's own
//! loop ([`super::h1::serve_with`]) on the decrypted stream, so that every
//! request passes the same phases as any other; each goes to the tunnel's origin
//! over TLS ([`crate::forward::inspect::InspectedTunnel`]).

use crate::exchange::{ConnInfo, Reply, Shared};
use crate::forward::TunnelTarget;
use crate::forward::inspect::Inspector;
use crate::slots::SlotHandle;
use bytes::{Buf, Bytes};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

/// A client connection, whatever carries it.
pub(super) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + ?Sized> Io for T {}

/// The client's stream with the bytes already read (the ClientHello peeked at)
/// given back first; counts the bytes of both ways for the `CONNECT`'s line.
struct Replay<'a> {
    early: Bytes,
    io: &'a mut (dyn Io + 'a),
    /// Bytes read from the client (after `early`) and written to it.
    counts: Arc<[AtomicU64; 2]>,
}

impl AsyncRead for Replay<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if !this.early.is_empty() {
            let n = this.early.len().min(buf.remaining());
            buf.put_slice(&this.early[..n]);
            this.early.advance(n);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut *this.io).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        this.counts[0].fetch_add(n as u64, Ordering::Relaxed);
        r
    }
}

impl AsyncWrite for Replay<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut *this.io).poll_write(cx, data);
        if let Poll::Ready(Ok(n)) = &r {
            this.counts[1].fetch_add(*n as u64, Ordering::Relaxed);
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.get_mut().io).poll_shutdown(cx)
    }
}

/// Runs an inspected tunnel whose `200 Connection Established` has been sent
/// and whose ClientHello (`early`, naming `sni`) has been checked: the TLS
/// handshake with a minted leaf, then the decrypted requests; the `CONNECT`'s
/// access-log line (in `reply`) is finished when the tunnel ends.
///
/// Not an `async fn`: the HTTP/1 loop it runs may come back here (for a nested
/// `CONNECT`, which is refused), and a boxed future breaks that cycle of types.
#[allow(clippy::too_many_arguments)]
pub(super) fn run<'a>(
    io: &'a mut (dyn Io + 'a),
    early: Bytes,
    mut reply: Reply,
    shared: &'a Arc<Shared>,
    conn: ConnInfo,
    slot: &'a SlotHandle,
    shutdown: &'a watch::Receiver<bool>,
    inspector: &'a Inspector,
    target: &'a TunnelTarget,
    sni: Option<String>,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        let early_len = early.len() as u64;
        let fail = |reply: &mut Reply, why: String| {
            shared.metrics.forward_tunnel("inspect_failed");
            tracing::debug!(
                "inspected tunnel {} for {}: {why}",
                target.authority(),
                conn.client
            );
            reply.body.set_error(&why);
        };
        let sni_host = sni.as_deref().and_then(|s| domains::normalize_name(s).ok());
        let prepared = inspector
            .server_config(sni.as_deref(), &target.host.to_string())
            .and_then(|cfg| inspector.tunnel(target, sni_host).map(|t| (cfg, t)));
        let (config, inspected) = match prepared {
            Ok(p) => p,
            Err(why) => {
                fail(&mut reply, format!("TLS inspection: {why}"));
                reply.body.add_bytes_in(early_len);
                reply.body.finish();
                return;
            }
        };
        let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let replay = Replay {
            early,
            io,
            counts: Arc::clone(&counts),
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let handshake =
            tokio::time::timeout(shared.server.client_header_timeout, acceptor.accept(replay))
                .await;
        let bytes = |reply: &mut Reply| {
            reply
                .body
                .add_bytes_in(early_len + counts[0].load(Ordering::Relaxed));
            reply.body.add_bytes_out(counts[1].load(Ordering::Relaxed));
        };
        let tls = match handshake {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                fail(&mut reply, format!("TLS inspection: client handshake: {e}"));
                bytes(&mut reply);
                reply.body.finish();
                return;
            }
            Err(_) => {
                fail(
                    &mut reply,
                    "TLS inspection: client handshake not done within server.client_header_timeout"
                        .to_owned(),
                );
                bytes(&mut reply);
                reply.body.finish();
                return;
            }
        };
        shared.metrics.forward_tunnel("inspected");
        let inner = ConnInfo { tls: true, ..conn };
        let inspected = Arc::new(inspected);
        if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
            // The streams run in tasks of their own, outside any scope entered
            // here: the HTTP/2 front end enters the tunnel's for each of them.
            super::h2::serve_with(
                Arc::clone(shared),
                inner,
                tls,
                slot,
                shutdown.clone(),
                Some(inspected),
            )
            .await;
        } else {
            inspected
                .scope(super::h1::serve_with(
                    Arc::clone(shared),
                    inner,
                    tls,
                    slot,
                    shutdown.clone(),
                ))
                .await;
        }
        bytes(&mut reply);
        reply.body.finish();
    })
}
