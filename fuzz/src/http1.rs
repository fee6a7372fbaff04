//! The proxy's HTTP/1 wire format: the request head reader and the body decoder
//! (`proxy::http::wire`).
//!
//! - [`fuzz_http1_head`]: `find_head_end` and `parse_head` on raw bytes, read whole
//!   and in pieces (the answer cannot depend on how the bytes arrived); a head the
//!   proxy reads as clean (no problems) must be read the same way by httparse, the
//!   strict parser, once written out again: what the rules inspected is what a
//!   strict origin server reads.
//! - [`fuzz_http1_httparse_diff`]: differential against httparse on what httparse
//!   accepts: the same head end, method, target, version and header lines.
//! - [`fuzz_chunked`]: `BodyDecoder` on chunked (and Content-Length) bodies, fed in
//!   pieces chosen by the input, against a reference decoder written for the test.

use crate::input::Input;
use crate::url_decode::reference_decode;
use bytes::{Bytes, BytesMut};
use proxy::exchange::{IpText, forward_target, upstream_headers};
use proxy::http::wire::{
    BodyDecoder, BodyError, Decoded, Framing, HeadError, RequestHead, Version, find_head_end,
    parse_head,
};

/// Header lines httparse is given room for in the comparisons.
const MAX_HEADERS: usize = 64;

/// What reading a head from a buffer gives.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    Incomplete,
    Error(HeadError),
    Head { skip: usize, end: usize },
}

fn read(buf: &[u8], limit: usize) -> Read {
    match find_head_end(buf, limit) {
        Ok(None) => Read::Incomplete,
        Ok(Some(e)) => {
            assert!(
                e.skip < e.end && e.end <= buf.len(),
                "head end {e:?} outside the buffer"
            );
            Read::Head {
                skip: e.skip,
                end: e.end,
            }
        }
        Err(e) => Read::Error(e),
    }
}

/// The request head reader on raw bytes. Input: a control byte (head size limit,
/// where to cut the bytes for the piecewise reading), then the bytes.
pub fn fuzz_http1_head(data: &[u8]) {
    let mut input = Input::new(data);
    let control = input.byte();
    let cut = usize::from(input.byte());
    let buf = input.rest();
    let limit = 64 + 256 * usize::from(control & 0x3f);

    // Reading as bytes arrive: every prefix that ends before the head is
    // incomplete, and the first one that holds it gives the same answer as the
    // whole buffer. (Checked at up to three cut points.)
    let whole = read(buf, limit);
    for k in [cut, cut * 7, buf.len() / 2] {
        let k = k.min(buf.len());
        let part = read(&buf[..k], limit);
        match (&whole, &part) {
            (_, Read::Incomplete) => {
                if let Read::Head { end, .. } = whole {
                    assert!(
                        k < end,
                        "a complete head was not found in a {k}-byte prefix"
                    );
                }
            }
            (Read::Head { .. }, Read::Head { .. }) => {
                assert_eq!(part, whole, "the head end depends on how the bytes arrived");
            }
            (Read::Error(_), Read::Error(_)) => {}
            (Read::Head { end, .. }, Read::Error(HeadError::TooLarge(_))) => {
                panic!("a {k}-byte prefix is too large, but the head ends at {end}")
            }
            _ => panic!("prefix of {k} bytes: {part:?}, whole buffer: {whole:?}"),
        }
    }

    let Read::Head { skip, end } = whole else {
        return;
    };
    let head_bytes = Bytes::copy_from_slice(&buf[skip..end]);
    let max_headers = 1 + usize::from(control >> 6) * 40;
    let Ok(head) = parse_head(head_bytes.clone(), max_headers) else {
        return;
    };
    assert!(head.len <= head_bytes.len(), "head length past the head");
    assert!(
        head.headers.len() <= max_headers,
        "more headers than allowed"
    );
    let _ = head.framing();
    if head.problems.is_empty() {
        clean_head_forwards_what_was_inspected(&head);
    }
}

/// What the proxy sends upstream for a clean head is what the rules inspected: every
/// header it forwards (but X-Forwarded-*) is a header line of the request with the
/// same value; no hop-by-hop header, Content-Length or Expect goes through; the
/// Host header is forwarded as it was inspected, whatever Connection lists; and an
/// origin-form target is forwarded so that it decodes to the bytes the rules saw.
fn clean_head_forwards_what_was_inspected(head: &RequestHead) {
    let client = IpText::new([192, 0, 2, 7].into());
    if let Ok(sent) = upstream_headers(&head.headers, &client, true, false) {
        for (name, value) in sent.iter() {
            let name = String::from_utf8_lossy(name).to_ascii_lowercase();
            let name = name.as_str();
            if name == "x-forwarded-for" {
                assert!(value.ends_with(client.as_bytes()), "X-Forwarded-For");
                continue;
            }
            if name == "x-forwarded-proto" {
                assert!(value.ends_with(b"http"), "X-Forwarded-Proto");
                continue;
            }
            assert!(
                !NOT_FORWARDED.contains(&name),
                "{name} was forwarded upstream"
            );
            assert!(
                head.headers
                    .iter()
                    .any(|(n, v)| n.eq_ignore_ascii_case(name.as_bytes()) && v == value),
                "{name}: {value:?} was forwarded but is no header line of the request"
            );
        }
        let hosts: Vec<&Bytes> = head.values(b"host").collect();
        if let [host] = hosts[..] {
            assert_eq!(
                sent.get(b"host"),
                Some(host),
                "the Host header the rules saw is not the one forwarded"
            );
        }
    }
    let Ok(method) = http::Method::from_bytes(&head.method) else {
        return;
    };
    if head.uri.first() == Some(&b'/')
        && method != http::Method::CONNECT
        && let Ok(target) = forward_target(&method, &head.uri)
    {
        let sent = target.to_string();
        assert_eq!(
            reference_decode(sent.as_bytes(), false).bytes,
            reference_decode(&head.uri, false).bytes,
            "the forwarded target {sent:?} decodes to other bytes than the inspected one"
        );
    }
}

/// Headers that never go upstream as the client sent them.
const NOT_FORWARDED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "expect",
];

/// Differential against httparse: on a buffer httparse reads as a complete
/// request, the proxy must find the same head end and the same parts.
pub fn fuzz_http1_httparse_diff(data: &[u8]) {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let Ok(httparse::Status::Complete(n)) = req.parse(data) else {
        return;
    };
    let e = match find_head_end(data, data.len() + 1) {
        Ok(Some(e)) => e,
        other => panic!("httparse read a {n}-byte head, the proxy: {other:?}"),
    };
    assert_eq!(
        e.end, n,
        "httparse and the proxy end the head at different bytes"
    );
    let head = parse_head(Bytes::copy_from_slice(&data[e.skip..e.end]), MAX_HEADERS)
        .expect("the proxy refuses a head httparse reads");
    assert_eq!(
        req.method.map(str::as_bytes),
        Some(&head.method[..]),
        "method"
    );
    assert_eq!(req.path.map(str::as_bytes), Some(&head.uri[..]), "target");
    let minor = req.version.expect("a complete request has a version");
    assert_eq!(head.version, Version::Http(1, minor), "version");
    assert_eq!(
        &head.protocol[..],
        format!("HTTP/1.{minor}").as_bytes(),
        "protocol"
    );
    assert_eq!(head.len, n - e.skip, "head length");
    assert_eq!(req.headers.len(), head.headers.len(), "header count");
    for (h, (name, value)) in req.headers.iter().zip(&head.headers) {
        assert_eq!(h.name.as_bytes(), &name[..], "header name");
        assert_eq!(h.value, &value[..], "value of {}", h.name);
    }
}

/// How a body reading ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// The body is complete; `consumed` bytes of input were used.
    Done { consumed: usize },
    /// The input ended before the body did.
    Incomplete,
    /// The framing is broken.
    Error(BodyError),
}

/// Decodes `wire` with the proxy's decoder, giving it the bytes in pieces of the
/// sizes in `pieces` (cycled; 0 means everything left).
fn decode(
    framing: Framing,
    max_trailer: usize,
    wire: &[u8],
    pieces: &[usize],
) -> (Vec<u8>, Outcome) {
    let mut d = BodyDecoder::new(framing, max_trailer);
    let mut buf = BytesMut::new();
    let mut body = Vec::new();
    let mut fed = 0;
    let mut turn = 0;
    loop {
        match d.decode(&mut buf) {
            Ok(Decoded::Data(b)) => {
                assert!(!b.is_empty(), "an empty Data piece");
                body.extend_from_slice(&b);
            }
            Ok(Decoded::Done) => {
                let consumed = fed - buf.len();
                assert_eq!(d.raw_bytes, consumed as u64, "raw_bytes");
                return (body, Outcome::Done { consumed });
            }
            Ok(Decoded::NeedMore) => {
                if fed == wire.len() {
                    return (body, Outcome::Incomplete);
                }
                let size = pieces.get(turn % pieces.len().max(1)).copied().unwrap_or(0);
                turn += 1;
                let take = if size == 0 {
                    wire.len() - fed
                } else {
                    size.min(wire.len() - fed)
                };
                buf.extend_from_slice(&wire[fed..fed + take]);
                fed += take;
            }
            Err(e) => return (body, Outcome::Error(e)),
        }
    }
}

/// A chunked decoder written for the test, reading the whole input at once: size
/// lines of 1 to 15 hex digits (spaces and tabs around them, `;` extensions after),
/// at most 4096 bytes before their line feed; CR LF or LF line ends; data followed
/// by CR LF or LF; trailer lines up to an empty line, `max_trailer` bytes in all.
fn reference_chunked(wire: &[u8], max_trailer: usize) -> (Vec<u8>, Outcome) {
    let mut body = Vec::new();
    let mut pos = 0;
    let line_at = |pos: usize| {
        wire[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| pos + i)
    };
    loop {
        let Some(lf) = line_at(pos) else {
            return if wire.len() - pos > 4096 {
                (body, Outcome::Error(BodyError::BadChunkSize))
            } else {
                (body, Outcome::Incomplete)
            };
        };
        if lf - pos > 4096 {
            return (body, Outcome::Error(BodyError::BadChunkSize));
        }
        let mut line = &wire[pos..lf];
        line = line.strip_suffix(b"\r").unwrap_or(line);
        let size_text = line.split(|&b| b == b';').next().unwrap_or_default();
        let size_text = strip_spaces_tabs(size_text);
        if size_text.is_empty()
            || size_text.len() > 15
            || !size_text.iter().all(u8::is_ascii_hexdigit)
        {
            return (body, Outcome::Error(BodyError::BadChunkSize));
        }
        let size = u64::from_str_radix(std::str::from_utf8(size_text).unwrap_or("0"), 16)
            .unwrap_or(0) as usize;
        pos = lf + 1;
        if size == 0 {
            break;
        }
        let data_end = pos.saturating_add(size);
        if data_end > wire.len() {
            body.extend_from_slice(&wire[pos..]);
            return (body, Outcome::Incomplete);
        }
        body.extend_from_slice(&wire[pos..data_end]);
        pos = data_end;
        match &wire[pos..] {
            [] | [b'\r'] => return (body, Outcome::Incomplete),
            [b'\n', ..] => pos += 1,
            [b'\r', b'\n', ..] => pos += 2,
            _ => return (body, Outcome::Error(BodyError::BadChunkEnd)),
        }
    }
    let mut trailer = 0;
    loop {
        let Some(lf) = line_at(pos) else {
            return if trailer + (wire.len() - pos) > max_trailer {
                (body, Outcome::Error(BodyError::TrailersTooLarge))
            } else {
                (body, Outcome::Incomplete)
            };
        };
        trailer += lf + 1 - pos;
        if trailer > max_trailer {
            return (body, Outcome::Error(BodyError::TrailersTooLarge));
        }
        let line = &wire[pos..lf];
        pos = lf + 1;
        if line.is_empty() || line == b"\r" {
            return (body, Outcome::Done { consumed: pos });
        }
    }
}

fn strip_spaces_tabs(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |p| p + 1);
    &v[start..end]
}

/// Body decoding. Input: a control byte (bit 0: Content-Length framing instead of
/// chunked; the rest: the trailer limit or the length), three piece sizes, then the
/// body as it comes on the wire.
pub fn fuzz_chunked(data: &[u8]) {
    let mut input = Input::new(data);
    let control = input.byte();
    let pieces: Vec<usize> = (0..3).map(|_| usize::from(input.byte())).collect();
    let wire = input.rest();
    if control & 1 == 1 {
        let n = u64::from(control >> 1) * 37;
        let framing = if n == 0 {
            Framing::None
        } else {
            Framing::Length(n)
        };
        let (body, outcome) = decode(framing, 0, wire, &pieces);
        let want = wire.len().min(n as usize);
        assert_eq!(body, &wire[..want], "Content-Length body");
        let complete = want as u64 == n;
        assert_eq!(
            outcome,
            if complete {
                Outcome::Done { consumed: want }
            } else {
                Outcome::Incomplete
            },
            "Content-Length outcome"
        );
        return;
    }
    let max_trailer = usize::from(control >> 1) * 16;
    let whole = decode(Framing::Chunked, max_trailer, wire, &[0]);
    let pieced = decode(Framing::Chunked, max_trailer, wire, &pieces);
    let reference = reference_chunked(wire, max_trailer);
    assert_eq!(
        whole, reference,
        "chunked decoding differs from the reference"
    );
    assert_eq!(
        pieced, whole,
        "chunked decoding depends on how the bytes arrived"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_decodes_chunked_bodies() {
        let wire = b"4\r\nWiki\r\n5 ;ext\r\npedia\n0\r\nX: 1\r\n\r\nNEXT";
        assert_eq!(
            reference_chunked(wire, 100),
            (
                b"Wikipedia".to_vec(),
                Outcome::Done {
                    consumed: wire.len() - 4
                }
            )
        );
        assert_eq!(
            reference_chunked(b"4\r\nWi", 100),
            (b"Wi".to_vec(), Outcome::Incomplete)
        );
        assert_eq!(
            reference_chunked(b"x\r\n", 100),
            (Vec::new(), Outcome::Error(BodyError::BadChunkSize))
        );
        assert_eq!(
            reference_chunked(b"1\r\naXY", 100),
            (b"a".to_vec(), Outcome::Error(BodyError::BadChunkEnd))
        );
        assert_eq!(
            reference_chunked(b"0\r\nLong-Trailer: 1\r\n\r\n", 4),
            (Vec::new(), Outcome::Error(BodyError::TrailersTooLarge))
        );
    }
}
