//! A raw HTTP/2 client for attacks that no well-behaved client library would send:
//! frames written byte by byte (RFC 9113 §4.1), header blocks encoded with HPACK
//! literals and indices only (RFC 7541: no Huffman coding), over TLS with ALPN `h2`.
//! What the server sends back is read by a task that only classifies frames.

use crate::common::tls_connect;
use rustls::pki_types::CertificateDer;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// Frame types (RFC 9113 §6).
pub const DATA: u8 = 0x0;
/// HEADERS.
pub const HEADERS: u8 = 0x1;
/// RST_STREAM.
pub const RST_STREAM: u8 = 0x3;
/// SETTINGS.
pub const SETTINGS: u8 = 0x4;
/// PING.
pub const PING: u8 = 0x6;
/// GOAWAY.
pub const GOAWAY: u8 = 0x7;
/// CONTINUATION.
pub const CONTINUATION: u8 = 0x9;

/// END_STREAM flag (DATA, HEADERS).
pub const END_STREAM: u8 = 0x1;
/// END_HEADERS flag (HEADERS, CONTINUATION).
pub const END_HEADERS: u8 = 0x4;
/// ACK flag (SETTINGS, PING).
pub const ACK: u8 = 0x1;

/// SETTINGS_INITIAL_WINDOW_SIZE.
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;

/// The client connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// One frame: the 9-byte header and the payload.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("frame payload fits in 24 bits");
    assert!(len < 1 << 24, "frame payload fits in 24 bits");
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A SETTINGS frame with these (identifier, value) pairs.
pub fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::new();
    for (id, v) in pairs {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &p)
}

/// A HEADERS frame carrying `block`.
pub fn headers(stream: u32, block: &[u8], end_stream: bool, end_headers: bool) -> Vec<u8> {
    let flags = if end_stream { END_STREAM } else { 0 } | if end_headers { END_HEADERS } else { 0 };
    frame(HEADERS, flags, stream, block)
}

/// A CONTINUATION frame carrying `block`.
pub fn continuation(stream: u32, block: &[u8], end_headers: bool) -> Vec<u8> {
    frame(
        CONTINUATION,
        if end_headers { END_HEADERS } else { 0 },
        stream,
        block,
    )
}

/// A DATA frame.
pub fn data(stream: u32, bytes: &[u8], end_stream: bool) -> Vec<u8> {
    frame(DATA, if end_stream { END_STREAM } else { 0 }, stream, bytes)
}

/// RST_STREAM with an error code (0x8: CANCEL).
pub fn rst_stream(stream: u32, code: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &code.to_be_bytes())
}

/// A PING (not an acknowledgement).
pub fn ping(payload: u64) -> Vec<u8> {
    frame(PING, 0, 0, &payload.to_be_bytes())
}

/// HPACK integer with an `n`-bit prefix (RFC 7541 §5.1); `first` holds the bits
/// above the prefix.
pub fn hpack_int(out: &mut Vec<u8>, n: u8, first: u8, value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// A string literal without Huffman coding.
fn hpack_str(out: &mut Vec<u8>, s: &[u8]) {
    hpack_int(out, 7, 0, s.len());
    out.extend_from_slice(s);
}

/// An indexed field (RFC 7541 §6.1): static entries 1..=61, dynamic from 62.
pub fn indexed(out: &mut Vec<u8>, index: usize) {
    hpack_int(out, 7, 0x80, index);
}

/// A literal field without indexing, its name from the static table.
pub fn literal_named(out: &mut Vec<u8>, name_index: usize, value: &[u8]) {
    hpack_int(out, 4, 0x00, name_index);
    hpack_str(out, value);
}

/// A literal field without indexing, with a literal name.
pub fn literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    hpack_str(out, name);
    hpack_str(out, value);
}

/// A literal field with incremental indexing (it enters the dynamic table).
pub fn literal_indexed(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x40);
    hpack_str(out, name);
    hpack_str(out, value);
}

/// The header block of a request: `GET` or `POST`, `https`, `path`, authority
/// `localhost`.
pub fn request_block(post: bool, path: &str) -> Vec<u8> {
    request_block_with(post, path, "localhost", &[])
}

/// The header block of a request: the method, `https`, `path` and `authority`,
/// then the `extra` fields as literals, in order (so a pseudo-header may come late).
pub fn request_block_with(
    post: bool,
    path: &str,
    authority: &str,
    extra: &[(&[u8], &[u8])],
) -> Vec<u8> {
    let mut b = Vec::new();
    indexed(&mut b, if post { 3 } else { 2 }); // :method
    indexed(&mut b, 7); // :scheme https
    literal_named(&mut b, 4, path.as_bytes()); // :path
    literal_named(&mut b, 1, authority.as_bytes()); // :authority
    for (name, value) in extra {
        literal(&mut b, name, value);
    }
    b
}

/// What the server has sent so far.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// GOAWAY error codes received.
    pub goaway: Vec<u32>,
    /// (stream, error code) of each RST_STREAM.
    pub resets: Vec<(u32, u32)>,
    /// Streams on which a HEADERS frame (a response) arrived.
    pub responses: Vec<u32>,
    /// DATA bytes received.
    pub data_bytes: u64,
    /// The server closed the connection (or it failed).
    pub closed: bool,
    /// Frames received.
    pub frames: u64,
}

impl Seen {
    /// The server said it is done with the connection, or closed it.
    pub fn ended(&self) -> bool {
        self.closed || !self.goaway.is_empty()
    }

    /// A short description for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "{} frames, GOAWAY {:?}, {} resets (first {:?}), responses on {} streams, {} data bytes, connection {}",
            self.frames,
            self.goaway,
            self.resets.len(),
            self.resets.first(),
            self.responses.len(),
            self.data_bytes,
            if self.closed { "closed" } else { "open" }
        )
    }
}

type Tls = TlsStream<TcpStream>;

/// A raw HTTP/2 connection: the preface and settings exchanged, then frames as the
/// test writes them.
pub struct RawH2 {
    w: WriteHalf<Tls>,
    r: Option<ReadHalf<Tls>>,
    seen: Arc<Mutex<Seen>>,
}

impl RawH2 {
    /// Connects with ALPN `h2`, sends the preface and `client_settings`, reads the
    /// server's SETTINGS and acknowledges them. With `read`, a task then reads and
    /// classifies everything the server sends; without, nothing more is read until
    /// [`RawH2::start_reading`].
    pub async fn connect(
        addr: SocketAddr,
        cert: &CertificateDer<'static>,
        client_settings: &[(u16, u32)],
        read: bool,
    ) -> std::io::Result<RawH2> {
        let tls = tls_connect(addr, cert, &[b"h2"]).await?;
        if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err(std::io::Error::other("the server did not choose h2"));
        }
        let (mut r, mut w) = tokio::io::split(tls);
        w.write_all(PREFACE).await?;
        w.write_all(&settings(client_settings)).await?;
        w.flush().await?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        // The server's SETTINGS come first.
        loop {
            let (kind, flags, _, _) = read_frame(&mut r).await?;
            if kind == SETTINGS && flags & ACK == 0 {
                w.write_all(&frame(SETTINGS, ACK, 0, &[])).await?;
                w.flush().await?;
                break;
            }
        }
        let mut c = RawH2 {
            w,
            r: Some(r),
            seen,
        };
        if read {
            c.start_reading();
        }
        Ok(c)
    }

    /// Starts the task that reads and classifies the server's frames.
    pub fn start_reading(&mut self) {
        let Some(mut r) = self.r.take() else {
            return;
        };
        let seen = self.seen.clone();
        tokio::spawn(async move {
            loop {
                match read_frame(&mut r).await {
                    Ok((kind, _flags, stream, payload)) => {
                        let mut s = seen.lock().unwrap();
                        s.frames += 1;
                        match kind {
                            GOAWAY if payload.len() >= 8 => s
                                .goaway
                                .push(u32::from_be_bytes(payload[4..8].try_into().unwrap())),
                            RST_STREAM if payload.len() >= 4 => s.resets.push((
                                stream,
                                u32::from_be_bytes(payload[..4].try_into().unwrap()),
                            )),
                            HEADERS => s.responses.push(stream),
                            DATA => s.data_bytes += payload.len() as u64,
                            _ => {}
                        }
                    }
                    Err(_) => {
                        seen.lock().unwrap().closed = true;
                        return;
                    }
                }
            }
        });
    }

    /// Writes bytes (frames) and flushes.
    pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.w.write_all(bytes).await?;
        self.w.flush().await
    }

    /// What the server has sent so far.
    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until `pred` holds for what the server sent, or `limit` passes;
    /// returns the last state seen.
    pub async fn wait_for(&self, limit: Duration, pred: impl Fn(&Seen) -> bool) -> Seen {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let s = self.seen();
            if pred(&s) || tokio::time::Instant::now() >= deadline {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Reads one frame: (type, flags, stream, payload).
async fn read_frame(r: &mut ReadHalf<Tls>) -> std::io::Result<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    r.read_exact(&mut head).await?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let stream = u32::from_be_bytes(head[5..9].try_into().unwrap()) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).await?;
    Ok((head[3], head[4], stream, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpack_integers_follow_rfc_7541_examples() {
        // C.1.1: 10 with a 5-bit prefix.
        let mut v = Vec::new();
        hpack_int(&mut v, 5, 0, 10);
        assert_eq!(v, [0b0000_1010]);
        // C.1.2: 1337 with a 5-bit prefix.
        let mut v = Vec::new();
        hpack_int(&mut v, 5, 0, 1337);
        assert_eq!(v, [0b0001_1111, 0b1001_1010, 0b0000_1010]);
        // C.1.3: 42 at an octet boundary.
        let mut v = Vec::new();
        hpack_int(&mut v, 8, 0, 42);
        assert_eq!(v, [42]);
    }

    #[test]
    fn frame_header_layout() {
        let f = frame(HEADERS, END_HEADERS, 3, b"abc");
        assert_eq!(&f[..9], &[0, 0, 3, HEADERS, END_HEADERS, 0, 0, 0, 3]);
        assert_eq!(&f[9..], b"abc");
    }
}
