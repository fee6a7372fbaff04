//! Decoding a compressed body (`Content-Encoding: gzip`, `deflate`, `br`) for the
//! rules: a response body for phase 4, a request body for phase 2 (with
//! `limits.request_content_encoding = "decode"`). Within bounds: at most the bytes
//! the engine still takes (plus one, so that the engine sees its limit reached), and
//! at most `ratio` decoded bytes per compressed byte once past [`RATIO_FLOOR`]. The
//! decoded bytes go to the engine only; the other side is sent the bytes as they
//! came.
//!
//! The decoders are the `Write` forms of flate2 and brotli-decompressor writing
//! into a [`Sink`] with a hard capacity: when a piece of input would decode past
//! it, the sink refuses and decoding stops for good, so a decompression bomb never
//! takes more memory than the capacity, whatever its ratio.

use http::HeaderMap;
use std::io::{self, Write};

/// Decoded output up to this size is not held to the ratio limit: small bodies of
/// repetitive text legitimately compress far beyond it.
pub const RATIO_FLOOR: u64 = 64 * 1024;

/// A content coding the proxy decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// `gzip` (and `x-gzip`); several members are decoded one after another.
    Gzip,
    /// `deflate`: zlib-wrapped as the RFC says, or raw deflate as some servers send.
    Deflate,
    /// `br`.
    Brotli,
}

impl Coding {
    /// The coding of a response: `Some` when its `Content-Encoding` is one coding
    /// this module decodes. No header, `identity`, several codings or an unknown
    /// one give `None` (the body is inspected as it is).
    pub fn of(headers: &HeaderMap) -> Option<Coding> {
        Coding::of_values(
            headers
                .get_all(http::header::CONTENT_ENCODING)
                .iter()
                .map(http::HeaderValue::as_bytes),
        )
    }

    /// [`Coding::of`] over the values of the `Content-Encoding` header lines.
    pub fn of_values<'v>(values: impl Iterator<Item = &'v [u8]>) -> Option<Coding> {
        let mut codings = values
            .flat_map(|v| v.split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case(b"identity"));
        let first = codings.next()?;
        if codings.next().is_some() {
            return None;
        }
        if first.eq_ignore_ascii_case(b"gzip") || first.eq_ignore_ascii_case(b"x-gzip") {
            Some(Coding::Gzip)
        } else if first.eq_ignore_ascii_case(b"deflate") {
            Some(Coding::Deflate)
        } else if first.eq_ignore_ascii_case(b"br") {
            Some(Coding::Brotli)
        } else {
            None
        }
    }

    /// The coding's name as the header writes it.
    pub fn name(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
            Coding::Brotli => "br",
        }
    }
}

/// Why decoding stopped before the end of the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The decoded body reached the room the engine had left (the engine was given
    /// one byte more than its room, so it has seen its limit reached).
    Size,
    /// More than `ratio` decoded bytes per compressed byte.
    Ratio,
    /// The compressed data is not valid.
    Corrupt(String),
}

/// Output with a hard capacity: a write past it is refused.
struct Sink {
    buf: Vec<u8>,
    room: usize,
    full: bool,
}

impl Write for Sink {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        if self.room == 0 {
            self.full = true;
            return Err(io::Error::other("decoded size limit"));
        }
        let n = data.len().min(self.room);
        self.buf.extend_from_slice(&data[..n]);
        self.room -= n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Sink {
    fn new() -> Sink {
        Sink {
            buf: Vec::new(),
            room: 0,
            full: false,
        }
    }
}

enum Inner {
    Gzip(flate2::write::MultiGzDecoder<Sink>),
    Zlib(flate2::write::ZlibDecoder<Sink>),
    Raw(flate2::write::DeflateDecoder<Sink>),
    Brotli(Box<brotli_decompressor::DecompressorWriter<Sink>>),
    /// `deflate` before its first two bytes have arrived (they tell zlib from raw).
    Undecided(Vec<u8>),
}

impl Inner {
    fn sink(&mut self) -> Option<&mut Sink> {
        match self {
            Inner::Gzip(d) => Some(d.get_mut()),
            Inner::Zlib(d) => Some(d.get_mut()),
            Inner::Raw(d) => Some(d.get_mut()),
            Inner::Brotli(d) => Some(d.get_mut()),
            Inner::Undecided(_) => None,
        }
    }

    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        match self {
            Inner::Gzip(d) => d.write(data),
            Inner::Zlib(d) => d.write(data),
            Inner::Raw(d) => d.write(data),
            Inner::Brotli(d) => d.write(data),
            Inner::Undecided(_) => Ok(0),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Inner::Gzip(d) => d.flush(),
            Inner::Zlib(d) => d.flush(),
            Inner::Raw(d) => d.flush(),
            Inner::Brotli(d) => d.flush(),
            Inner::Undecided(_) => Ok(()),
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        match self {
            Inner::Gzip(d) => d.try_finish(),
            Inner::Zlib(d) => d.try_finish(),
            Inner::Raw(d) => d.try_finish(),
            Inner::Brotli(d) => d.close(),
            Inner::Undecided(b) if b.is_empty() => Ok(()),
            Inner::Undecided(_) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "deflate data ends after one byte",
            )),
        }
    }
}

/// Whether two bytes open a zlib stream (RFC 1950: method 8, a header checksum
/// that divides by 31).
fn zlib_header(b0: u8, b1: u8) -> bool {
    b0 & 0x0f == 8 && (u16::from(b0) << 8 | u16::from(b1)) % 31 == 0
}

/// A body decoder with its bounds.
pub struct Decoder {
    coding: Coding,
    inner: Inner,
    ratio: u64,
    compressed: u64,
    decoded: u64,
    stopped: bool,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("coding", &self.coding)
            .field("compressed", &self.compressed)
            .field("decoded", &self.decoded)
            .finish()
    }
}

impl Decoder {
    /// A decoder for `coding` allowing `ratio` decoded bytes per compressed byte
    /// (0: no ratio limit).
    pub fn new(coding: Coding, ratio: u64) -> Decoder {
        let inner = match coding {
            Coding::Gzip => Inner::Gzip(flate2::write::MultiGzDecoder::new(Sink::new())),
            Coding::Deflate => Inner::Undecided(Vec::new()),
            Coding::Brotli => Inner::Brotli(Box::new(
                brotli_decompressor::DecompressorWriter::new(Sink::new(), 8 * 1024),
            )),
        };
        Decoder {
            coding,
            inner,
            ratio,
            compressed: 0,
            decoded: 0,
            stopped: false,
        }
    }

    /// The coding decoded.
    pub fn coding(&self) -> Coding {
        self.coding
    }

    /// Compressed bytes taken and decoded bytes given out so far.
    pub fn totals(&self) -> (u64, u64) {
        (self.compressed, self.decoded)
    }

    /// The most decoded bytes the ratio allows now.
    fn ratio_room(&self) -> u64 {
        if self.ratio == 0 {
            return u64::MAX;
        }
        self.compressed
            .saturating_mul(self.ratio)
            .max(RATIO_FLOOR)
            .saturating_sub(self.decoded)
    }

    /// Decodes `input`, handing each decoded piece to `out`. `engine_room` is how
    /// many more decoded bytes the engine takes before its limit. After an `Err`
    /// the decoder stops: further calls do nothing.
    pub fn push(
        &mut self,
        input: &[u8],
        engine_room: usize,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), Stop> {
        if self.stopped {
            return Ok(());
        }
        self.compressed += input.len() as u64;
        let budget_end = self.decoded.saturating_add(engine_room as u64);
        let r = self.run(input, budget_end, out);
        if r.is_err() {
            self.stopped = true;
        }
        r
    }

    /// Ends decoding at the end of the body: the last decoded bytes, or `Corrupt`
    /// when the compressed data stops short.
    pub fn finish(&mut self, engine_room: usize, out: &mut dyn FnMut(&[u8])) -> Result<(), Stop> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        let (size_cap, cap) = self.caps(engine_room);
        if let Some(s) = self.inner.sink() {
            s.room = cap;
        }
        let r = self.inner.finish();
        self.drain(out);
        self.judge(r.map(|()| 0), size_cap)?;
        Ok(())
    }

    /// The sink's capacity for the next write, and whether it is the engine's
    /// room (rather than the ratio) that sets it.
    fn caps(&self, engine_room: usize) -> (bool, usize) {
        let size = engine_room.saturating_add(1);
        let ratio = usize::try_from(self.ratio_room().saturating_add(1)).unwrap_or(usize::MAX);
        (size <= ratio, size.min(ratio))
    }

    fn drain(&mut self, out: &mut dyn FnMut(&[u8])) {
        if let Some(s) = self.inner.sink()
            && !s.buf.is_empty()
        {
            let data = std::mem::take(&mut s.buf);
            self.decoded += data.len() as u64;
            out(&data);
        }
    }

    /// Turns a write's outcome into the reason to stop, if there is one.
    fn judge(&mut self, r: io::Result<usize>, size_cap: bool) -> Result<usize, Stop> {
        let full = self.inner.sink().is_some_and(|s| s.full);
        match r {
            Ok(n) => Ok(n),
            Err(_) if full && size_cap => Err(Stop::Size),
            Err(_) if full => Err(Stop::Ratio),
            Err(e) => Err(Stop::Corrupt(e.to_string())),
        }
    }

    /// Decodes `input`; the engine takes decoded bytes until `self.decoded`
    /// reaches `budget_end`.
    fn run(
        &mut self,
        mut input: &[u8],
        budget_end: u64,
        out: &mut dyn FnMut(&[u8]),
    ) -> Result<(), Stop> {
        if let Inner::Undecided(head) = &mut self.inner {
            head.extend_from_slice(input);
            if head.len() < 2 {
                return Ok(());
            }
            let head = std::mem::take(head);
            self.inner = if zlib_header(head[0], head[1]) {
                Inner::Zlib(flate2::write::ZlibDecoder::new(Sink::new()))
            } else {
                Inner::Raw(flate2::write::DeflateDecoder::new(Sink::new()))
            };
            // The bytes held back go through now, with this input.
            return self.run(&head, budget_end, out);
        }
        while !input.is_empty() {
            let room =
                usize::try_from(budget_end.saturating_sub(self.decoded)).unwrap_or(usize::MAX);
            let (size_cap, cap) = self.caps(room);
            if let Some(s) = self.inner.sink() {
                s.room = cap;
            }
            // Flushed at once, so each write's output reaches the sink (and the
            // engine) before the next piece of input.
            let r = self.inner.write(input).and_then(|n| {
                if n > 0 {
                    self.inner.flush()?;
                }
                Ok(n)
            });
            self.drain(out);
            let n = self.judge(r, size_cap)?;
            if n == 0 {
                return Err(Stop::Corrupt(
                    "data after the end of the compressed stream".into(),
                ));
            }
            input = &input[n..];
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn raw_deflate(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn brotli(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
            w.write_all(data).unwrap();
        }
        out
    }

    /// Decodes `body` fed in pieces of `step` bytes with an engine room of `room`.
    fn decode(
        coding: Coding,
        body: &[u8],
        step: usize,
        room: usize,
        ratio: u64,
    ) -> (Vec<u8>, Result<(), Stop>) {
        let mut d = Decoder::new(coding, ratio);
        let mut out = Vec::new();
        for piece in body.chunks(step) {
            let left = room.saturating_sub(out.len());
            if let Err(e) = d.push(piece, left, &mut |p| out.extend_from_slice(p)) {
                return (out, Err(e));
            }
        }
        let left = room.saturating_sub(out.len());
        let r = d.finish(left, &mut |p| out.extend_from_slice(p));
        (out, r)
    }

    fn text() -> Vec<u8> {
        (0..5000)
            .flat_map(|i| format!("<p>line {i} of the page</p>\n").into_bytes())
            .collect()
    }

    #[test]
    fn codings_are_read_from_the_header() {
        let of = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(http::header::CONTENT_ENCODING, v.parse().unwrap());
            Coding::of(&h)
        };
        assert_eq!(of("gzip"), Some(Coding::Gzip));
        assert_eq!(of("X-GZIP"), Some(Coding::Gzip));
        assert_eq!(of("identity, br"), Some(Coding::Brotli));
        assert_eq!(of("deflate"), Some(Coding::Deflate));
        assert_eq!(of("gzip, br"), None);
        assert_eq!(of("zstd"), None);
        assert_eq!(of("identity"), None);
        assert_eq!(Coding::of(&HeaderMap::new()), None);
    }

    #[test]
    fn every_coding_decodes_in_any_pieces() {
        let t = text();
        for (coding, body) in [
            (Coding::Gzip, gzip(&t)),
            (Coding::Deflate, zlib(&t)),
            (Coding::Deflate, raw_deflate(&t)),
            (Coding::Brotli, brotli(&t)),
        ] {
            for step in [1, 7, 4096, body.len()] {
                let (out, r) = decode(coding, &body, step, usize::MAX / 2, 100);
                assert_eq!(r, Ok(()), "{coding:?} step {step}");
                assert!(out == t, "{coding:?} step {step}: {} bytes", out.len());
            }
        }
    }

    #[test]
    fn several_gzip_members_decode_one_after_another() {
        let mut body = gzip(b"first ");
        body.extend(gzip(b"second"));
        let (out, r) = decode(Coding::Gzip, &body, 5, 1 << 20, 100);
        assert_eq!(r, Ok(()));
        assert_eq!(out, b"first second");
    }

    /// A gzip body of `members` x 1 MiB of zeros, made from one compressed member.
    fn zero_bomb(members: usize) -> Vec<u8> {
        gzip(&vec![0u8; 1 << 20]).repeat(members)
    }

    #[test]
    fn decoding_stops_one_byte_past_the_engine_room() {
        let bomb = zero_bomb(64);
        let (out, r) = decode(Coding::Gzip, &bomb, 16 * 1024, 100_000, 0);
        assert_eq!(r, Err(Stop::Size));
        assert_eq!(out.len(), 100_001);
        let br = brotli(&vec![0u8; 8 << 20]);
        let (out, r) = decode(Coding::Brotli, &br, br.len(), 100_000, 0);
        assert_eq!(r, Err(Stop::Size));
        assert_eq!(out.len(), 100_001);
    }

    #[test]
    fn ratio_limit_applies_past_the_floor() {
        // Zeros compress about 1000 to 1: over a ratio of 100 once past 64 KiB.
        let bomb = zero_bomb(4);
        let (out, r) = decode(Coding::Gzip, &bomb, 1024, usize::MAX / 2, 100);
        assert_eq!(r, Err(Stop::Ratio));
        assert!(out.len() <= 100 * bomb.len() + RATIO_FLOOR as usize + 1);
        // Ordinary text stays under it, and a small repetitive body is under the floor.
        let t = text();
        assert_eq!(
            decode(Coding::Gzip, &gzip(&t), 512, usize::MAX / 2, 100).1,
            Ok(())
        );
        let small = vec![b'a'; 60_000];
        assert_eq!(
            decode(Coding::Gzip, &gzip(&small), 512, usize::MAX / 2, 100).1,
            Ok(())
        );
        // 0: no ratio limit.
        assert_eq!(
            decode(Coding::Gzip, &bomb, 4096, usize::MAX / 2, 0).1,
            Ok(())
        );
    }

    #[test]
    fn corrupt_and_truncated_data_stop_decoding() {
        let t = text();
        let mut bad = gzip(&t);
        let mid = bad.len() / 2;
        for b in &mut bad[mid..mid + 16] {
            *b ^= 0x5a;
        }
        let (_, r) = decode(Coding::Gzip, &bad, 1024, usize::MAX / 2, 0);
        assert!(matches!(r, Err(Stop::Corrupt(_))), "{r:?}");
        let (_, r) = decode(Coding::Gzip, b"this is not gzip", 4, 1 << 20, 0);
        assert!(matches!(r, Err(Stop::Corrupt(_))), "{r:?}");
        let br = brotli(&t);
        let (_, r) = decode(Coding::Brotli, &br[..br.len() / 2], 64, usize::MAX / 2, 0);
        assert!(matches!(r, Err(Stop::Corrupt(_))), "{r:?}");
        let z = zlib(&t);
        let (_, r) = decode(Coding::Deflate, &z[..z.len() / 2], 64, usize::MAX / 2, 0);
        assert!(matches!(r, Err(Stop::Corrupt(_))), "{r:?}");
    }
}
