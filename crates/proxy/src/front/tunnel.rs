//! An upgraded connection (WebSocket and other `Upgrade` protocols): once the
//! upstream has answered `101 Switching Protocols`, bytes are copied both ways
//! between the client and the upstream, uninspected, until either side closes or
//! no byte has moved for the idle timeout.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

/// How a tunnel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelEnd {
    /// One side closed; bytes copied client to upstream and upstream to client.
    Closed(u64, u64),
    /// Nothing moved either way for the idle timeout.
    Idle,
}

/// Joins `client` to the upgraded upstream connection. `early` holds bytes the
/// client sent after its request head, before the switch; they go upstream first.
pub async fn splice<C>(
    client: &mut C,
    early: &[u8],
    mut upstream: crate::upstream::Upgraded,
    idle: Duration,
) -> io::Result<TunnelEnd>
where
    C: AsyncRead + AsyncWrite + Unpin + Send,
{
    if !early.is_empty() {
        upstream.write_all(early).await?;
    }
    let start = Instant::now();
    let last = AtomicU64::new(0);
    let mut a = Watched {
        inner: client,
        last: &last,
        start,
    };
    let mut b = Watched {
        inner: &mut upstream,
        last: &last,
        start,
    };
    let mut copy = std::pin::pin!(tokio::io::copy_bidirectional(&mut a, &mut b));
    loop {
        let quiet_since = start + Duration::from_millis(last.load(Ordering::Relaxed));
        tokio::select! {
            r = &mut copy => {
                let (up, down) = r?;
                return Ok(TunnelEnd::Closed(up, down));
            }
            () = tokio::time::sleep_until((quiet_since + idle).into()) => {
                // Something may have moved since the deadline was set.
                let quiet = Duration::from_millis(last.load(Ordering::Relaxed));
                if start.elapsed().saturating_sub(quiet) >= idle {
                    return Ok(TunnelEnd::Idle);
                }
            }
        }
    }
}

/// A stream that notes when it last read something (milliseconds after `start`).
struct Watched<'a, T> {
    inner: &'a mut T,
    last: &'a AtomicU64,
    start: Instant,
}

impl<T> Watched<'_, T> {
    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.fetch_max(ms, Ordering::Relaxed);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<'_, T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut *self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<'_, T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.inner).poll_shutdown(cx)
    }
}
