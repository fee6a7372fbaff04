//! The messages exchanged with a pool: the request sent ([`UpstreamRequest`]), the
//! response head received ([`UpstreamResponse`]), and its body read off the
//! connection ([`UpstreamBody`]), which gives the connection back to its server's
//! idle stack once read to the end of its framing.

use super::conn::{BodyEnd, Conn};
use super::pool::{InFlight, Server};
use super::{Pool, Upgraded};
use crate::http::HeaderLines;
use crate::http::wire::Decoded;
use bytes::Bytes;
use http::{Method, Uri};
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::time::Sleep;

/// A request ready to go upstream (hop-by-hop headers already removed).
#[derive(Debug, Clone)]
pub struct UpstreamRequest {
    /// Method.
    pub method: Method,
    /// Origin-form target (path and query).
    pub uri: Uri,
    /// Headers to send, Host included.
    pub headers: HeaderLines,
    /// The whole body.
    pub body: Bytes,
    /// The client's address, what `hash_key = "client_ip"` hashes; `None` (health
    /// checks): the last X-Forwarded-For entry.
    pub client: Option<std::net::IpAddr>,
}

/// A response head from the upstream, and its body still to be read.
#[derive(Debug)]
pub struct UpstreamResponse {
    /// Status, version and headers.
    pub parts: http::response::Parts,
    /// The body; reading it to the end returns the connection to the pool.
    pub body: UpstreamBody,
    /// The server that answered.
    pub server: Arc<str>,
    /// After a `101 Switching Protocols`: the connection, now the upgraded
    /// protocol's.
    pub upgraded: Option<Upgraded>,
}

/// Why reading an upstream body failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamBodyError {
    /// No data arrived within the read timeout.
    #[error("upstream body read timed out")]
    Timeout,
    /// Reading from the connection failed (reset, TLS error).
    #[error("upstream body: {0}")]
    Io(#[from] std::io::Error),
    /// The server closed the connection before the end of the body.
    #[error("upstream closed the connection before the end of the body")]
    Short,
    /// The chunked framing is broken.
    #[error("upstream body: {0}")]
    Framing(#[from] crate::http::wire::BodyError),
}

/// A response body from the upstream. Reading it to the end returns its connection
/// to the pool (when the server let it stay open); dropping it early closes the
/// connection.
pub struct UpstreamBody {
    /// The connection the body is read from (`None` once over).
    pub(super) conn: Option<Box<Conn>>,
    pub(super) end: BodyEnd,
    /// A piece decoded ahead, to learn whether the body ended with the last one.
    pub(super) pending: Option<Bytes>,
    /// Where the connection goes back once the body is over, when it may.
    pub(super) home: Option<(Arc<Server>, Arc<Pool>, u64)>,
    /// Counts the request in flight on its server until the body is over.
    pub(super) in_flight: Option<InFlight>,
    pub(super) read_timeout: Duration,
    pub(super) sleep: Option<Pin<Box<Sleep>>>,
    pub(super) done: bool,
}

impl std::fmt::Debug for UpstreamBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamBody")
            .field("done", &self.done)
            .finish()
    }
}

type BodyPoll = Poll<Option<Result<Frame<Bytes>, UpstreamBodyError>>>;

impl UpstreamBody {
    pub(super) fn finish(&mut self) {
        self.done = true;
        self.in_flight = None;
        if let (Some(conn), Some((server, pool, generation))) = (self.conn.take(), self.home.take())
        {
            pool.put_idle(&server, conn, generation);
        }
    }

    /// Ends the body on an error: the connection is dropped.
    pub(super) fn fail(&mut self, e: UpstreamBodyError) -> BodyPoll {
        self.done = true;
        self.conn = None;
        self.home = None;
        self.in_flight = None;
        Poll::Ready(Some(Err(e)))
    }

    /// A decoded piece going out: decodes ahead so that the end of the body is
    /// known with its last piece (the connection then goes back at once).
    pub(super) fn deliver(&mut self, data: Bytes) -> BodyPoll {
        self.sleep = None;
        if let (BodyEnd::Framed(dec), Some(conn)) = (&mut self.end, self.conn.as_mut()) {
            match dec.decode(conn.buf()) {
                Ok(Decoded::Done) => self.finish(),
                Ok(Decoded::Data(more)) => self.pending = Some(more),
                // An error is met again (and reported) on the next poll.
                Ok(Decoded::NeedMore) | Err(_) => {}
            }
        }
        Poll::Ready(Some(Ok(Frame::data(data))))
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = UpstreamBodyError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> BodyPoll {
        let this = &mut *self;
        if let Some(p) = this.pending.take() {
            return this.deliver(p);
        }
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let Some(conn) = this.conn.as_mut() else {
                this.done = true;
                return Poll::Ready(None);
            };
            match &mut this.end {
                BodyEnd::Empty => {
                    this.finish();
                    return Poll::Ready(None);
                }
                BodyEnd::Framed(dec) => match dec.decode(conn.buf()) {
                    Ok(Decoded::Data(d)) => return this.deliver(d),
                    Ok(Decoded::Done) => {
                        this.finish();
                        return Poll::Ready(None);
                    }
                    Ok(Decoded::NeedMore) => {}
                    Err(e) => return this.fail(e.into()),
                },
                BodyEnd::Close => {
                    if !conn.buf().is_empty() {
                        let d = conn.buf().split().freeze();
                        return this.deliver(d);
                    }
                }
            }
            match conn.poll_fill(cx) {
                Poll::Ready(Ok(0)) => {
                    if matches!(this.end, BodyEnd::Close) {
                        this.home = None;
                        this.finish();
                        return Poll::Ready(None);
                    }
                    return this.fail(UpstreamBodyError::Short);
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return this.fail(e.into()),
                Poll::Pending => {
                    let timeout = this.read_timeout;
                    let sleep = this
                        .sleep
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                    ready!(sleep.as_mut().poll(cx));
                    return this.fail(UpstreamBodyError::Timeout);
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.pending.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        let pending = self.pending.as_ref().map_or(0, |p| p.len() as u64);
        match &self.end {
            BodyEnd::Framed(dec) if !self.done => match dec.remaining() {
                Some(n) => SizeHint::with_exact(n + pending),
                None => {
                    let mut h = SizeHint::new();
                    h.set_lower(pending);
                    h
                }
            },
            BodyEnd::Close if !self.done => {
                let mut h = SizeHint::new();
                h.set_lower(pending);
                h
            }
            _ => SizeHint::with_exact(pending),
        }
    }
}
