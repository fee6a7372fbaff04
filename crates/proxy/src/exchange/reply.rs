//! The answer to a request: status, headers, and a body that finishes the
//! transaction's record once it has been sent or dropped.

use super::record::{Record, micros_since};
use crate::upstream::UpstreamBody;
use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, StatusCode};
use http_body::{Body, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::time::Sleep;

/// What a reply body is made of.
pub(super) enum BodyKind {
    Full(Option<Bytes>),
    Stream {
        prefix: Option<Bytes>,
        rest: UpstreamBody,
    },
}

/// The answer to a request: status, headers, and a body that finishes the
/// transaction's record when it has been sent or dropped.
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Headers (no hop-by-hop headers; Content-Length when the length is known).
    pub headers: HeaderMap,
    /// The body.
    pub body: ReplyBody,
    /// The connection must close after this reply.
    pub close: bool,
    /// Close the connection without answering.
    pub drop: bool,
    /// For a `101 Switching Protocols` from the upstream: the protocol it switched
    /// to and its side of the connection, for the front end to join to the client.
    pub upgrade: Option<Upgrade>,
    /// For a forward-proxy `CONNECT`: the connection to the destination, for the
    /// front end to answer `200 Connection Established` and join to the client.
    pub tunnel: Option<Tunnel>,
}

/// A forward-proxy tunnel's destination side.
pub struct Tunnel {
    /// The connection to the destination; `None` while it is deferred: a
    /// tunnel that TLS inspection may decrypt connects only once its
    /// ClientHello shows that it will not be (a decrypted tunnel's requests go
    /// through pools of their own).
    pub stream: Option<tokio::net::TcpStream>,
    /// Where it goes, and what its ClientHello is checked against.
    pub target: crate::forward::TunnelTarget,
}

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel")
            .field("target", &self.target)
            .finish()
    }
}

/// The upstream's side of an upgraded connection.
pub struct Upgrade {
    /// The `Upgrade` header the upstream answered with.
    pub protocol: HeaderValue,
    /// The upstream connection, switched to that protocol.
    pub upstream: crate::upstream::Upgraded,
}

impl std::fmt::Debug for Upgrade {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upgrade")
            .field("protocol", &self.protocol)
            .finish()
    }
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reply")
            .field("status", &self.status)
            .field("close", &self.close)
            .field("drop", &self.drop)
            .finish()
    }
}

impl Reply {
    pub(super) fn new(rec: Box<Record>, status: StatusCode, body: Bytes) -> Reply {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        Reply {
            status,
            headers,
            body: ReplyBody {
                kind: BodyKind::Full(Some(body)),
                rec: Some(rec),
                pace: None,
                done_at_end: false,
            },
            close: false,
            drop: false,
            upgrade: None,
            tunnel: None,
        }
    }
}

/// A reply body: a buffer, or a buffered prefix and the rest of an upstream body.
/// Counts the bytes it yields; finishing or dropping it runs phase 5 and logs.
pub struct ReplyBody {
    pub(super) kind: BodyKind,
    pub(super) rec: Option<Box<Record>>,
    /// With a `[[shape]]` class: the body goes out in paced pieces.
    pub(super) pace: Option<Box<Pace>>,
    /// Phase 5 runs when the last frame is taken ([`ReplyBody::finish_at_end`]),
    /// not when the front end says the body was written.
    pub(super) done_at_end: bool,
}

/// A shaped body's pacing: the key's bucket, the rest of the frame being cut into
/// pieces, and the piece waiting for its time.
pub(super) struct Pace {
    pacer: crate::shaping::Pacer,
    rest: Bytes,
    due: Option<Bytes>,
    timer: Pin<Box<Sleep>>,
}

impl Pace {
    /// The next piece of the body, when its time has come.
    fn poll_piece(
        &mut self,
        kind: &mut BodyKind,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ReplyBodyError>>> {
        loop {
            if self.due.is_some() {
                ready!(self.timer.as_mut().poll(cx));
                return Poll::Ready(self.due.take().map(|d| Ok(Frame::data(d))));
            }
            if !self.rest.is_empty() {
                let piece = self
                    .rest
                    .split_to(self.rest.len().min(crate::shaping::PIECE));
                let wait = self.pacer.reserve(piece.len());
                if wait.is_zero() {
                    return Poll::Ready(Some(Ok(Frame::data(piece))));
                }
                self.timer
                    .as_mut()
                    .reset(tokio::time::Instant::now() + wait);
                self.due = Some(piece);
                continue;
            }
            match ready!(poll_kind(kind, cx)) {
                Some(Ok(f)) => match f.into_data() {
                    Ok(d) => self.rest = d,
                    Err(f) => return Poll::Ready(Some(Ok(f))),
                },
                other => return Poll::Ready(other),
            }
        }
    }

    fn is_idle(&self) -> bool {
        self.rest.is_empty() && self.due.is_none()
    }
}

/// The next frame of a reply body, unpaced.
fn poll_kind(
    kind: &mut BodyKind,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<Bytes>, ReplyBodyError>>> {
    Poll::Ready(match kind {
        BodyKind::Full(b) => match b.take() {
            Some(data) if !data.is_empty() => Some(Ok(Frame::data(data))),
            _ => None,
        },
        BodyKind::Stream { prefix, rest } => {
            if let Some(p) = prefix.take() {
                Some(Ok(Frame::data(p)))
            } else {
                match ready!(Pin::new(rest).poll_frame(cx)) {
                    None => None,
                    Some(Ok(f)) => match f.into_data() {
                        Ok(d) => Some(Ok(Frame::data(d))),
                        // Trailers are not forwarded.
                        Err(_) => None,
                    },
                    Some(Err(e)) => Some(Err(ReplyBodyError(e.to_string()))),
                }
            }
        }
    })
}

impl std::fmt::Debug for ReplyBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReplyBody")
    }
}

/// A reply body failed part-way (the upstream broke off or timed out).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReplyBodyError(String);

impl ReplyBody {
    /// A body with nothing to send and no record: the answer to an HTTP/2
    /// `CONNECT`, whose record stays with its tunnel and is finished when the
    /// tunnel ends.
    pub fn empty() -> ReplyBody {
        ReplyBody {
            kind: BodyKind::Full(None),
            rec: None,
            pace: None,
            done_at_end: false,
        }
    }

    /// Adds bytes written outside the body (the HTTP/1 head) to the record.
    pub fn add_bytes_out(&mut self, n: u64) {
        if let Some(r) = &mut self.rec {
            r.bytes_out += n;
        }
    }

    /// With `logs.error_log_before_response`, waits until the error-log lines this
    /// request has queued so far are in the file; call it before sending the
    /// response. Returns at once otherwise.
    pub async fn error_lines_written(&mut self) {
        if let Some(w) = self.rec.as_mut().and_then(|r| r.logged.take()) {
            w.wait().await;
        }
    }

    /// Adds bytes read from the client outside the request (a tunnel's) to the
    /// record.
    pub fn add_bytes_in(&mut self, n: u64) {
        if let Some(r) = &mut self.rec {
            r.bytes_in += n;
        }
    }

    /// Notes that the proxy itself refused what followed the answer (a tunnel
    /// closed for its ClientHello): logged and counted as a denial, with why.
    pub fn set_denied(&mut self, why: &str) {
        if let Some(r) = &mut self.rec {
            r.action = crate::metrics::Action::Deny;
            r.error = Some(why.to_owned());
        }
    }

    /// Notes that the client went away or the write failed.
    pub fn set_error(&mut self, e: &str) {
        if let Some(r) = &mut self.rec
            && r.error.is_none()
        {
            r.error = Some(e.to_owned());
        }
    }

    /// The body is done: the upstream transfer's time is taken, then phase 5.
    fn done(&mut self) {
        if let Some(r) = &mut self.rec
            && let Some(t) = r.transfer_start.take()
        {
            r.transfer_us = Some(r.transfer_acc + micros_since(t));
        }
        self.finish();
    }

    /// For a front end that stops polling once [`Body::is_end_stream`] says the
    /// body is over (HTTP/2): phase 5 runs when the last frame is taken, or now
    /// for a body with nothing to send.
    pub fn finish_at_end(&mut self) {
        self.done_at_end = true;
        if Body::is_end_stream(self) {
            self.finish();
        }
    }

    /// Phase 5 and the request's summary, now (the body will not be polled
    /// further). Runs once.
    pub fn finish(&mut self) {
        if let Some(mut r) = self.rec.take() {
            r.finish();
        }
    }

    /// Sends the body paced by `pacer` (a `[[shape]]` class's bucket of this
    /// request's key).
    pub fn shape(&mut self, pacer: crate::shaping::Pacer) {
        self.pace = Some(Box::new(Pace {
            pacer,
            rest: Bytes::new(),
            due: None,
            timer: Box::pin(tokio::time::sleep(std::time::Duration::ZERO)),
        }));
    }

    /// True when the body is sent paced by a `[[shape]]` class.
    pub fn is_paced(&self) -> bool {
        self.pace.is_some()
    }

    /// True when the body carries an upstream's response (not an answer of the
    /// proxy's own: a refusal, an error): the bodies `[[shape]]` applies to.
    pub fn is_forwarded(&self) -> bool {
        self.rec
            .as_ref()
            .is_some_and(|r| r.action == crate::metrics::Action::Pass && r.upstream.is_some())
    }

    /// A TX variable of the request's transaction (none without one).
    pub fn tx_var(&mut self, name: &str) -> Option<Vec<u8>> {
        self.rec
            .as_mut()
            .and_then(|r| r.tx.as_mut())
            .and_then(|t| t.tx_var(name))
    }

    /// Length of the body when it is fully known.
    pub fn known_len(&self) -> Option<u64> {
        match &self.kind {
            BodyKind::Full(b) => Some(b.as_ref().map_or(0, |b| b.len() as u64)),
            BodyKind::Stream { .. } => None,
        }
    }
}

impl Drop for ReplyBody {
    /// Phase 5 and the summary are a step of the exchange, taken when the body is
    /// done ([`ReplyBody::finish`]); this catches a body dropped before it was
    /// done (the client went away, the connection was cut) and says so.
    fn drop(&mut self) {
        if let Some(r) = &mut self.rec
            && !r.finished
        {
            if matches!(self.kind, BodyKind::Stream { .. }) && r.error.is_none() {
                r.error = Some("response not completed".into());
            }
            tracing::debug!(
                client = %r.conn.client,
                "response body dropped before it was done: phase 5 and the logs run now"
            );
            r.finish();
        }
    }
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = ReplyBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ReplyBodyError>>> {
        let this = &mut *self;
        let out = match &mut this.pace {
            Some(pace) => ready!(pace.poll_piece(&mut this.kind, cx)),
            None => ready!(poll_kind(&mut this.kind, cx)),
        };
        match &out {
            Some(Ok(f)) => {
                if let (Some(d), Some(r)) = (f.data_ref(), &mut this.rec) {
                    r.bytes_out += d.len() as u64;
                }
                // The last frame of a body whose end is known, when the front end
                // polls no further (HTTP/2 sends it with END_STREAM): done.
                if this.done_at_end && this.rec.is_some() && this.is_end_stream() {
                    this.done();
                }
            }
            Some(Err(e)) => {
                let msg = e.0.clone();
                if let Some(r) = &mut this.rec {
                    r.error_line(&msg);
                    r.error = Some(msg);
                }
                this.finish();
            }
            None => this.done(),
        }
        Poll::Ready(out)
    }

    fn is_end_stream(&self) -> bool {
        if self.pace.as_ref().is_some_and(|p| !p.is_idle()) {
            return false;
        }
        match &self.kind {
            BodyKind::Full(b) => b.as_ref().is_none_or(Bytes::is_empty),
            BodyKind::Stream { prefix, rest } => prefix.is_none() && rest.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        let held = self.pace.as_ref().map_or(0, |p| {
            (p.rest.len() + p.due.as_ref().map_or(0, Bytes::len)) as u64
        });
        let mut s = self.kind_size_hint();
        s.set_lower(s.lower() + held);
        if let Some(u) = s.upper() {
            s.set_upper(u + held);
        }
        s
    }
}

impl ReplyBody {
    fn kind_size_hint(&self) -> SizeHint {
        match &self.kind {
            BodyKind::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            BodyKind::Stream { prefix, rest } => {
                let p = prefix.as_ref().map_or(0, |b| b.len() as u64);
                let h = rest.size_hint();
                let mut s = SizeHint::new();
                s.set_lower(h.lower() + p);
                if let Some(u) = h.upper() {
                    s.set_upper(u + p);
                }
                s
            }
        }
    }
}
