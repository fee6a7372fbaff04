//! The order of HTTP/2 header lines as the client sent them.
//!
//! hyper (through the `h2` crate) hands a request over with its headers in a
//! `HeaderMap`, which groups the values of a name together: `a: 1`, `b: 2`, `a: 3`
//! come out as `a: 1`, `a: 3`, `b: 2`, and neither crate keeps the order of the
//! header block. The engine must see the lines as sent (ModSecurity gets them one
//! by one from its server), so this module reads the same bytes a second time:
//! [`Tee`] sits under hyper on the client's connection and passes every byte it
//! reads to a frame reader, which collects the HEADERS and CONTINUATION frames of
//! each header block and decodes the block with its own HPACK decoder. Both
//! decoders see the same bytes in the same order, so their dynamic tables stay
//! equal. Each request's regular header lines, in order, wait in a queue until
//! the request's handler takes them: hyper starts handlers in the order the
//! requests' header blocks arrived, and the handler takes the oldest block whose
//! lines are exactly the request's header lines (older blocks, for streams the
//! HTTP/2 layer refused, are dropped on the way).
//!
//! Whatever this reader cannot follow (a frame or block over its bounds, a block
//! its decoder refuses) turns it off for the rest of the connection, and the
//! requests that follow fall back to the `HeaderMap`'s order: the order is then
//! wrong, never a header.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const FLAG_END_HEADERS: u8 = 0x4;
const FLAG_PADDED: u8 = 0x8;
const FLAG_PRIORITY: u8 = 0x20;
/// HPACK dynamic table size the server allows (the HTTP/2 layer's default, which
/// it does not raise).
const TABLE_SIZE: usize = 4096;
/// Blocks kept waiting for their handler at most.
const MAX_WAITING: usize = 256;

/// One request's regular header lines, in the order sent.
pub type Lines = Vec<(Vec<u8>, Vec<u8>)>;

/// The header blocks read on one connection, waiting for their requests.
#[derive(Debug, Default)]
pub struct Order {
    waiting: Mutex<Waiting>,
}

#[derive(Debug, Default)]
struct Waiting {
    blocks: VecDeque<Lines>,
    /// The reader has stopped following the connection.
    off: bool,
}

impl Order {
    /// The header lines of the request whose `HeaderMap` is `headers`, in the
    /// order sent; `None` when they are not known (the caller then uses the map's
    /// order).
    pub fn take(&self, headers: &http::HeaderMap) -> Option<Lines> {
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let mut want: Vec<(&[u8], &[u8])> = headers
            .iter()
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
            .collect();
        want.sort_unstable();
        while let Some(block) = w.blocks.pop_front() {
            if block.len() == want.len() {
                let mut got: Vec<(&[u8], &[u8])> = block
                    .iter()
                    .map(|(n, v)| (n.as_slice(), v.as_slice()))
                    .collect();
                got.sort_unstable();
                if got == want {
                    return Some(block);
                }
            }
        }
        None
    }

    fn push(&self, lines: Lines) {
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        if w.off {
            return;
        }
        if w.blocks.len() >= MAX_WAITING {
            w.blocks.pop_front();
        }
        w.blocks.push_back(lines);
    }

    fn turn_off(&self, why: &str) {
        tracing::debug!("HTTP/2 header order not followed from here on: {why}");
        let mut w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        w.off = true;
        w.blocks.clear();
    }
}

/// Where the frame reader is in the byte stream.
enum State {
    /// Matching the connection preface; the count of bytes matched.
    Preface(usize),
    /// Reading a frame header.
    Head,
    /// Reading the payload of a HEADERS or CONTINUATION frame.
    Payload { kind: u8, flags: u8, left: usize },
    /// Skipping the payload of any other frame.
    Skip(usize),
    /// Not following the connection any more.
    Off,
}

/// Reads HTTP/2 frames from the client's bytes and decodes header blocks.
struct Reader {
    state: State,
    head: Vec<u8>,
    frame: Vec<u8>,
    block: Vec<u8>,
    decoder: loona_hpack::Decoder<'static>,
    /// Most bytes of one frame payload or one compressed header block.
    max_block: usize,
    /// Most decoded bytes of one header block (names and values).
    max_decoded: usize,
    order: Arc<Order>,
}

impl Reader {
    fn new(order: Arc<Order>, header_limit: usize) -> Reader {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(TABLE_SIZE);
        Reader {
            state: State::Preface(0),
            head: Vec::with_capacity(9),
            frame: Vec::new(),
            block: Vec::new(),
            decoder,
            max_block: header_limit.saturating_mul(2).saturating_add(64 * 1024),
            max_decoded: header_limit,
            order,
        }
    }

    fn off(&mut self, why: &str) {
        self.state = State::Off;
        self.frame = Vec::new();
        self.block = Vec::new();
        self.order.turn_off(why);
    }

    /// Takes bytes the connection read.
    fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            match &mut self.state {
                State::Off => return,
                State::Preface(matched) => {
                    let n = data.len().min(PREFACE.len() - *matched);
                    if data[..n] != PREFACE[*matched..*matched + n] {
                        self.off("no connection preface");
                        return;
                    }
                    *matched += n;
                    data = &data[n..];
                    if *matched == PREFACE.len() {
                        self.state = State::Head;
                    }
                }
                State::Head => {
                    let n = data.len().min(9 - self.head.len());
                    self.head.extend_from_slice(&data[..n]);
                    data = &data[n..];
                    if self.head.len() == 9 {
                        let h = std::mem::take(&mut self.head);
                        let len =
                            usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                        let (kind, flags) = (h[3], h[4]);
                        self.state = if kind == HEADERS || kind == CONTINUATION {
                            if len > self.max_block {
                                self.off("header frame over the reader's bound");
                                return;
                            }
                            State::Payload {
                                kind,
                                flags,
                                left: len,
                            }
                        } else {
                            State::Skip(len)
                        };
                        self.after_payload_bytes();
                    }
                }
                State::Skip(left) => {
                    let n = data.len().min(*left);
                    *left -= n;
                    data = &data[n..];
                    if *left == 0 {
                        self.state = State::Head;
                    }
                }
                State::Payload { left, .. } => {
                    let n = data.len().min(*left);
                    self.frame.extend_from_slice(&data[..n]);
                    *left -= n;
                    data = &data[n..];
                    self.after_payload_bytes();
                }
            }
        }
    }

    /// Completes a header frame whose payload has all arrived (also one with an
    /// empty payload, or a skipped frame of length 0).
    fn after_payload_bytes(&mut self) {
        match self.state {
            State::Skip(0) => self.state = State::Head,
            State::Payload {
                kind,
                flags,
                left: 0,
            } => {
                self.state = State::Head;
                let frame = std::mem::take(&mut self.frame);
                let Some(fragment) = fragment(kind, flags, &frame) else {
                    self.off("malformed HEADERS frame");
                    return;
                };
                if self.block.len() + fragment.len() > self.max_block {
                    self.off("header block over the reader's bound");
                    return;
                }
                self.block.extend_from_slice(fragment);
                if flags & FLAG_END_HEADERS != 0 {
                    let block = std::mem::take(&mut self.block);
                    self.decode(&block);
                }
                // Keep the frame buffer's allocation for the next frame.
                self.frame = frame;
                self.frame.clear();
            }
            _ => {}
        }
    }

    fn decode(&mut self, block: &[u8]) {
        let mut lines: Lines = Vec::new();
        let mut request = false;
        let mut size = 0usize;
        let max = self.max_decoded;
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.decoder.decode_with_cb(block, |name, value| {
                if name.first() == Some(&b':') {
                    request |= &name[..] == b":method";
                    return;
                }
                // Past the size the HTTP/2 layer accepts, the request is
                // refused there: keep decoding (for the table) but not storing.
                size = size.saturating_add(name.len() + value.len() + 32);
                if size <= max {
                    lines.push((name.into_owned(), value.into_owned()));
                }
            })
        }));
        match decoded {
            Ok(Ok(())) => {
                if request && size <= max {
                    self.order.push(lines);
                }
            }
            Ok(Err(e)) => self.off(&format!("HPACK: {e:?}")),
            Err(_) => self.off("HPACK decoder failed"),
        }
    }
}

/// The header block fragment of a HEADERS (padding and priority removed) or
/// CONTINUATION frame payload.
fn fragment(kind: u8, flags: u8, payload: &[u8]) -> Option<&[u8]> {
    if kind == CONTINUATION {
        return Some(payload);
    }
    let mut p = payload;
    let mut pad = 0usize;
    if flags & FLAG_PADDED != 0 {
        pad = usize::from(*p.first()?);
        p = &p[1..];
    }
    if flags & FLAG_PRIORITY != 0 {
        p = p.get(5..)?;
    }
    p.get(..p.len().checked_sub(pad)?)
}

/// A client connection whose incoming bytes also go to a header-order reader.
pub struct Tee<IO> {
    inner: IO,
    reader: Reader,
}

impl<IO> Tee<IO> {
    /// Wraps `inner`; header blocks read on it go to `order`. `header_limit` is
    /// the most decoded header bytes a request may have.
    pub fn new(inner: IO, order: Arc<Order>, header_limit: usize) -> Tee<IO> {
        Tee {
            inner,
            reader: Reader::new(order, header_limit),
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Tee<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let this = &mut *self;
            this.reader.feed(&buf.filled()[before..]);
        }
        r
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Tee<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// A literal field without indexing (new name), or with incremental indexing.
    fn literal(out: &mut Vec<u8>, indexed: bool, name: &[u8], value: &[u8]) {
        out.push(if indexed { 0x40 } else { 0x00 });
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        out.push(value.len() as u8);
        out.extend_from_slice(value);
    }

    fn request(fields: &[(bool, &[u8], &[u8])]) -> Vec<u8> {
        // :method GET, :scheme https, :path /
        let mut b = vec![0x82, 0x87, 0x84];
        for (indexed, n, v) in fields {
            literal(&mut b, *indexed, n, v);
        }
        b
    }

    fn map(lines: &[(&str, &str)]) -> http::HeaderMap {
        let mut m = http::HeaderMap::new();
        for (n, v) in lines {
            m.append(
                http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        m
    }

    fn owned(lines: &[(&str, &str)]) -> Lines {
        lines
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn blocks_come_out_in_the_order_sent_in_any_split() {
        let sent = [("a", "1"), ("b", "2"), ("a", "3")];
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frame(0x4, 0, 0, &[])); // SETTINGS
        bytes.extend(frame(0x0, 0, 1, b"some data")); // skipped
        let block = request(&[(true, b"a", b"1"), (false, b"b", b"2"), (false, b"a", b"3")]);
        // Split over HEADERS (padded, with priority) and a CONTINUATION.
        let mut first = vec![3u8];
        first.extend_from_slice(&[0, 0, 0, 0, 16]);
        first.extend_from_slice(&block[..5]);
        first.extend_from_slice(&[0, 0, 0]);
        bytes.extend(frame(HEADERS, FLAG_PADDED | FLAG_PRIORITY, 1, &first));
        bytes.extend(frame(CONTINUATION, FLAG_END_HEADERS, 1, &block[5..]));
        // A second request using the dynamic table entry `a: 1` (index 62).
        let mut second = vec![0x82, 0x87, 0x84];
        literal(&mut second, false, b"b", b"2");
        second.push(0x80 | 62);
        bytes.extend(frame(HEADERS, FLAG_END_HEADERS | 0x1, 3, &second));
        for step in [1, 2, 9, 10, bytes.len()] {
            let order = Arc::new(Order::default());
            let mut r = Reader::new(order.clone(), 8192);
            for piece in bytes.chunks(step) {
                r.feed(piece);
            }
            assert_eq!(order.take(&map(&sent)), Some(owned(&sent)), "step {step}");
            let second = [("b", "2"), ("a", "1")];
            assert_eq!(
                order.take(&map(&second)),
                Some(owned(&second)),
                "step {step}"
            );
            assert_eq!(order.take(&map(&sent)), None);
        }
    }

    #[test]
    fn refused_blocks_are_skipped_and_trailers_ignored() {
        let order = Arc::new(Order::default());
        let mut r = Reader::new(order.clone(), 8192);
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frame(
            HEADERS,
            FLAG_END_HEADERS,
            1,
            &request(&[(false, b"x", b"refused")]),
        ));
        bytes.extend(frame(
            HEADERS,
            FLAG_END_HEADERS,
            3,
            &request(&[(false, b"x", b"ok")]),
        ));
        let mut trailer = Vec::new();
        literal(&mut trailer, false, b"t", b"1");
        bytes.extend(frame(HEADERS, FLAG_END_HEADERS | 0x1, 3, &trailer));
        r.feed(&bytes);
        assert_eq!(
            order.take(&map(&[("x", "ok")])),
            Some(owned(&[("x", "ok")]))
        );
        assert!(order.waiting.lock().unwrap().blocks.is_empty());
    }

    #[test]
    fn what_the_reader_cannot_follow_turns_it_off() {
        // A block over the decoded bound is not kept (its request is refused by
        // the HTTP/2 layer); a bad HPACK block turns the reader off.
        let order = Arc::new(Order::default());
        let mut r = Reader::new(order.clone(), 64);
        let mut bytes = PREFACE.to_vec();
        let big = vec![b'v'; 100];
        bytes.extend(frame(
            HEADERS,
            FLAG_END_HEADERS,
            1,
            &request(&[(false, b"x", &big)]),
        ));
        bytes.extend(frame(
            HEADERS,
            FLAG_END_HEADERS,
            3,
            &request(&[(false, b"y", b"1")]),
        ));
        r.feed(&bytes);
        assert_eq!(order.take(&map(&[("y", "1")])), Some(owned(&[("y", "1")])));
        assert!(order.take(&map(&[("x", "v")])).is_none());
        let order = Arc::new(Order::default());
        let mut r = Reader::new(order.clone(), 8192);
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frame(
            HEADERS,
            FLAG_END_HEADERS,
            1,
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ));
        bytes.extend(frame(
            HEADERS,
            FLAG_END_HEADERS,
            3,
            &request(&[(false, b"y", b"1")]),
        ));
        r.feed(&bytes);
        assert!(order.take(&map(&[("y", "1")])).is_none());
        assert!(order.waiting.lock().unwrap().off);
        // Bytes that are not HTTP/2 at all.
        let order = Arc::new(Order::default());
        let mut r = Reader::new(order.clone(), 8192);
        r.feed(b"GET / HTTP/1.1\r\n\r\n");
        assert!(order.waiting.lock().unwrap().off);
    }
}
