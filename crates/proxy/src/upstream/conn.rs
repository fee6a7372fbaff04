//! One HTTP/1.1 connection to an upstream server, spoken by the proxy itself.
//!
//! The request head is written straight from the [`UpstreamRequest`] (with its
//! body, which the exchange has buffered whole); the response head is read with
//! httparse, as the front end reads request heads, and the body is delimited by
//! the front end's own decoder ([`BodyDecoder`]: Content-Length or chunked,
//! trailers discarded) or by the close of the connection. Nothing runs on a task
//! of its own: the request's task drives the connection, and an idle connection
//! is probed for a close by the server when it is taken from the pool.
//!
//! A connection goes back to the pool only when its response was read to the end
//! of its framing, nothing followed it, and the server did not ask to close;
//! a response whose framing cannot be trusted (conflicting or invalid
//! Content-Length, Content-Length with Transfer-Encoding, a bad status line, an
//! oversized head) is an error and its connection is dropped.

use super::UpstreamRequest;
use crate::http::wire::{BodyDecoder, Framing, body_framing};
use bytes::{Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, StatusCode};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// Longest response head accepted (status line, header lines, empty line).
pub(super) const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Most header lines accepted in a response head.
const MAX_HEADERS: usize = 100;

/// Room kept free in the read buffer before each read.
const READ_ROOM: usize = 8 * 1024;

/// Request bodies up to this size go out in the same write as the head.
const COALESCE: usize = 16 * 1024;

/// The byte stream under a connection: plain TCP or TLS over TCP.
pub(super) enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS (boxed: the session state is large).
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Why an exchange on a connection failed before the response head was read.
#[derive(Debug, thiserror::Error)]
pub(super) enum ExchangeError {
    /// Writing the request failed: the server had closed the connection, and the
    /// request was not taken.
    #[error("sending the request failed: {0}")]
    Write(io::Error),
    /// The connection closed (or was reset) before any byte of a response.
    #[error("connection closed before the response")]
    Closed,
    /// Reading failed after part of the response had arrived.
    #[error("reading the response head: {0}")]
    Read(io::Error),
    /// The response cannot be read as HTTP/1.1, or its framing cannot be trusted.
    #[error("malformed response: {0}")]
    Malformed(String),
}

impl ExchangeError {
    /// Whether the failure says only that a reused connection had been closed by
    /// the server (its fault or not, a new connection may carry the request).
    pub(super) fn stale(&self) -> bool {
        matches!(self, ExchangeError::Write(_) | ExchangeError::Closed)
    }
}

/// How a response body ends.
#[derive(Debug)]
pub(super) enum BodyEnd {
    /// No body (HEAD, 1xx, 204, 304, or a length of 0).
    Empty,
    /// Content-Length or chunked, read through the decoder.
    Framed(BodyDecoder),
    /// At the close of the connection.
    Close,
}

/// A response head and what follows from it.
#[derive(Debug)]
pub(super) struct ResponseHead {
    /// Status.
    pub status: StatusCode,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor: u8,
    /// Header lines, in order, names lower-cased.
    pub headers: HeaderMap,
    /// How its body is delimited.
    pub body: BodyEnd,
    /// Whether the connection may carry another request once the body is read.
    pub keepalive: bool,
}

/// One HTTP/1.1 connection to an upstream server and its read buffer.
pub(super) struct Conn {
    io: Stream,
    buf: BytesMut,
    /// The server answered before it had read the whole request body, so the rest
    /// was never sent: the connection cannot carry another request.
    cut_short: bool,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("buffered", &self.buf.len())
            .finish()
    }
}

impl Conn {
    /// A connection over a connected stream.
    pub(super) fn new(io: Stream) -> Conn {
        Conn {
            io,
            buf: BytesMut::new(),
            cut_short: false,
        }
    }

    /// Whether an idle connection can carry a request: the server has neither
    /// closed it nor sent anything unasked (one non-blocking read, no waiting).
    pub(super) fn usable(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        self.reserve();
        let mut cx = Context::from_waker(Waker::noop());
        let read = std::pin::pin!(self.io.read_buf(&mut self.buf));
        matches!(read.poll(&mut cx), Poll::Pending)
    }

    /// Whether it may go back to the pool: the whole request went out and nothing
    /// was read beyond the last response.
    pub(super) fn clean(&self) -> bool {
        self.buf.is_empty() && !self.cut_short
    }

    fn reserve(&mut self) {
        if self.buf.capacity() - self.buf.len() < READ_ROOM / 2 {
            self.buf.reserve(READ_ROOM);
        }
    }

    /// Reads more bytes into the buffer; `Ok(0)` at the end of the stream.
    async fn fill(&mut self) -> io::Result<usize> {
        self.reserve();
        self.io.read_buf(&mut self.buf).await
    }

    /// [`Conn::fill`] as a poll, for a body read outside an `async` block.
    pub(super) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        self.reserve();
        let read = std::pin::pin!(self.io.read_buf(&mut self.buf));
        read.poll(cx)
    }

    /// The buffer, for the body decoder.
    pub(super) fn buf(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Sends `req` (with `host` as its Host header when given) and reads the
    /// response head, skipping interim 1xx responses other than 101.
    pub(super) async fn exchange(
        &mut self,
        req: &UpstreamRequest,
        host: Option<&str>,
    ) -> Result<ResponseHead, ExchangeError> {
        self.write_request(req, host)
            .await
            .map_err(ExchangeError::Write)?;
        let is_head = req.method == http::Method::HEAD;
        let mut any = false;
        loop {
            if !self.buf.is_empty() {
                any = true;
                if let Some(head) = self.parse_head(is_head)? {
                    if head.status.is_informational()
                        && head.status != StatusCode::SWITCHING_PROTOCOLS
                    {
                        // 100 Continue, 103 Early Hints...: the final answer follows.
                        continue;
                    }
                    return Ok(head);
                }
                if self.buf.len() >= MAX_HEAD_BYTES {
                    return Err(too_large());
                }
            }
            match self.fill().await {
                Ok(0) if !any => return Err(ExchangeError::Closed),
                Ok(0) => {
                    return Err(ExchangeError::Malformed(
                        "connection closed in the middle of the response head".into(),
                    ));
                }
                Ok(_) => {}
                Err(e) if !any && is_reset(&e) => return Err(ExchangeError::Closed),
                Err(e) => return Err(ExchangeError::Read(e)),
            }
        }
    }

    /// Writes the request head and body.
    async fn write_request(&mut self, req: &UpstreamRequest, host: Option<&str>) -> io::Result<()> {
        let mut out = Vec::with_capacity(
            128 + req.headers.len() * 48
                + if req.body.len() <= COALESCE {
                    req.body.len()
                } else {
                    0
                },
        );
        out.extend_from_slice(req.method.as_str().as_bytes());
        out.push(b' ');
        match (req.uri.path_and_query(), req.uri.authority()) {
            (Some(pq), _) if !pq.as_str().is_empty() => {
                out.extend_from_slice(pq.as_str().as_bytes())
            }
            (_, Some(a)) => out.extend_from_slice(a.as_str().as_bytes()),
            _ => out.push(b'/'),
        }
        out.extend_from_slice(b" HTTP/1.1\r\n");
        for (name, value) in req.headers.iter() {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        if let Some(h) = host {
            out.extend_from_slice(b"host: ");
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if req.body.len() <= COALESCE {
            out.extend_from_slice(&req.body);
            self.io.write_all(&out).await?;
        } else {
            self.io.write_all(&out).await?;
            self.write_body_watching(&req.body).await?;
            if self.cut_short {
                // The server answered and stopped reading: nothing more goes out
                // (a flush could wait on it for good).
                return Ok(());
            }
        }
        self.io.flush().await
    }

    /// Writes a large request body while watching for an early answer: when the
    /// server stops reading (the write would wait) and bytes of a response have
    /// arrived, the rest of the body is not sent and the response is read as usual
    /// (a server may refuse an upload, say with 413, before reading it). The
    /// connection is then not reused.
    async fn write_body_watching(&mut self, body: &[u8]) -> io::Result<()> {
        let mut sent = 0;
        std::future::poll_fn(|cx| {
            while sent < body.len() {
                match Pin::new(&mut self.io).poll_write(cx, &body[sent..]) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => sent += n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => {
                        // The server is not taking the body now: has it answered?
                        match self.poll_fill(cx) {
                            Poll::Ready(Ok(0)) => {
                                return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
                            }
                            Poll::Ready(Ok(_)) => {
                                self.cut_short = true;
                                return Poll::Ready(Ok(()));
                            }
                            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                            Poll::Pending => return Poll::Pending,
                        }
                    }
                }
            }
            Poll::Ready(Ok(()))
        })
        .await
    }

    /// Reads one response head from the front of the buffer (`Ok(None)`: more
    /// bytes needed), taking it off the buffer.
    fn parse_head(&mut self, is_head: bool) -> Result<Option<ResponseHead>, ExchangeError> {
        // Uninitialised slots: httparse writes the ones it fills, and zeroing 100 of
        // them for every response cost more than parsing a short head.
        let mut slots = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default()
            .parse_response_with_uninit_headers(&mut resp, &self.buf, &mut slots);
        let len = match parsed {
            Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD_BYTES => n,
            Ok(httparse::Status::Complete(_)) => return Err(too_large()),
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(ExchangeError::Malformed(format!(
                    "more than {MAX_HEADERS} header lines"
                )));
            }
            Err(e) => return Err(ExchangeError::Malformed(format!("bad response head: {e}"))),
        };
        let (Some(code), Some(minor)) = (resp.code, resp.version) else {
            return Err(ExchangeError::Malformed("bad status line".into()));
        };
        let status = StatusCode::from_u16(code)
            .map_err(|_| ExchangeError::Malformed(format!("bad status code {code}")))?;
        // Names now; values once the head is a shared buffer (no copy of them).
        let base = self.buf.as_ptr() as usize;
        let mut names: smallvec::SmallVec<[(HeaderName, usize, usize); 24]> =
            smallvec::SmallVec::with_capacity(resp.headers.len());
        for h in resp.headers.iter() {
            let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| {
                ExchangeError::Malformed(format!("invalid header name {:?}", h.name))
            })?;
            names.push((name, h.value.as_ptr() as usize - base, h.value.len()));
        }
        let framing = body_framing(resp.headers.iter().map(|h| (h.name.as_bytes(), h.value)));
        let te = resp
            .headers
            .iter()
            .any(|h| h.name.eq_ignore_ascii_case("transfer-encoding"));
        let cl = resp
            .headers
            .iter()
            .any(|h| h.name.eq_ignore_ascii_case("content-length"));
        let (close, keep_alive) = connection_tokens(
            resp.headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case("connection"))
                .map(|h| h.value),
        );
        let head = self.buf.split_to(len).freeze();
        let mut headers = HeaderMap::with_capacity(names.len());
        for (name, start, n) in names {
            let value = HeaderValue::from_maybe_shared(head.slice(start..start + n))
                .map_err(|_| ExchangeError::Malformed(format!("invalid value of {name}")))?;
            headers.append(name, value);
        }
        let bodiless = is_head
            || status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED;
        let body = if bodiless {
            BodyEnd::Empty
        } else if te && cl {
            // RFC 9112 §6.3: such a message may be an attempt at request smuggling
            // or response splitting; its end cannot be known.
            return Err(ExchangeError::Malformed(
                "both Transfer-Encoding and Content-Length".into(),
            ));
        } else {
            match framing {
                Framing::None if te || cl => BodyEnd::Empty,
                Framing::None => BodyEnd::Close,
                Framing::Length(_) | Framing::Chunked => {
                    BodyEnd::Framed(BodyDecoder::new(framing, MAX_HEAD_BYTES))
                }
                // Chunked after another coding: the chunks are read (as before this
                // variant existed; only requests are refused for it).
                Framing::Unsupported(_) => {
                    BodyEnd::Framed(BodyDecoder::new(Framing::Chunked, MAX_HEAD_BYTES))
                }
                // A transfer coding other than chunked last: the body ends at the close.
                Framing::Invalid(_) if te => BodyEnd::Close,
                Framing::Invalid(why) => return Err(ExchangeError::Malformed(why.into())),
            }
        };
        let keepalive = !matches!(body, BodyEnd::Close)
            && !close
            && (minor >= 1 || keep_alive)
            && status != StatusCode::SWITCHING_PROTOCOLS;
        Ok(Some(ResponseHead {
            status,
            minor,
            headers,
            body,
            keepalive,
        }))
    }

    /// The connection after a `101 Switching Protocols`, with the bytes that
    /// followed the response head.
    pub(super) fn upgraded(self) -> Upgraded {
        Upgraded {
            io: self.io,
            early: self.buf.freeze(),
        }
    }
}

fn too_large() -> ExchangeError {
    ExchangeError::Malformed(format!("response head larger than {MAX_HEAD_BYTES} bytes"))
}

/// Whether `Connection` values hold `close`, and `keep-alive`.
fn connection_tokens<'a>(values: impl Iterator<Item = &'a [u8]>) -> (bool, bool) {
    let (mut close, mut keep) = (false, false);
    for v in values {
        for t in v.split(|&b| b == b',') {
            let t = t.trim_ascii();
            close |= t.eq_ignore_ascii_case(b"close");
            keep |= t.eq_ignore_ascii_case(b"keep-alive");
        }
    }
    (close, keep)
}

/// A reset or broken pipe: what a server that closed an idle connection gives.
fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

/// The upstream's side of a connection switched to another protocol (101): the
/// bytes it sent after its response head, then the stream.
pub struct Upgraded {
    io: Stream,
    early: Bytes,
}

impl std::fmt::Debug for Upgraded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upgraded")
            .field("early", &self.early.len())
            .finish()
    }
}

impl AsyncRead for Upgraded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.early.is_empty() {
            let n = this.early.len().min(buf.remaining());
            buf.put_slice(&this.early.split_to(n));
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Upgraded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_tokens_are_read_from_lists() {
        assert_eq!(
            connection_tokens([&b"Keep-Alive, foo"[..]].into_iter()),
            (false, true)
        );
        assert_eq!(
            connection_tokens([&b"x"[..], &b" close "[..]].into_iter()),
            (true, false)
        );
    }
}
