//! Reading HTTP/1.x requests from raw bytes, the way the client sent them.
//!
//! The rule engine must see what the client sent, so the request head is read here
//! rather than by hyper: [`find_head_end`] finds where a head ends in the connection
//! buffer, [`parse_head`] splits it into a request line and header lines (httparse
//! first, a tolerant hand-written parser for what httparse refuses), and
//! [`BodyDecoder`] reads a body framed by Content-Length or chunked encoding.
//! Nothing here is judged: [`RequestHead::problems`] lists what would make the
//! request unsafe to forward, and the caller decides after the engine has seen it.

use bytes::{Bytes, BytesMut};

/// HTTP version of a request line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// No version on the request line (`GET /`): HTTP/0.9.
    Http09,
    /// `HTTP/MAJOR.MINOR` with single digits.
    Http(u8, u8),
    /// Anything else (`HTTP/2`, `JUNK/1.0`, `1.1`).
    Invalid,
}

impl Version {
    /// Reads the protocol token of a request line.
    pub fn parse(protocol: &[u8]) -> Version {
        match protocol {
            [] => Version::Http09,
            [b'H', b'T', b'T', b'P', b'/', maj, b'.', min]
                if maj.is_ascii_digit() && min.is_ascii_digit() =>
            {
                Version::Http(maj - b'0', min - b'0')
            }
            _ => Version::Invalid,
        }
    }

    /// True for HTTP/1.1 and later 1.x/2.x+ versions spoken over HTTP/1 framing,
    /// where persistent connections are the default.
    pub fn keepalive_default(self) -> bool {
        matches!(self, Version::Http(1, m) if m >= 1)
            || matches!(self, Version::Http(maj, _) if maj >= 2)
    }
}

/// A request head as the client sent it. The parts are slices of the received
/// bytes (or, for folded header lines, of a joined copy).
#[derive(Debug, Clone)]
pub struct RequestHead {
    /// The method, without any leading whitespace.
    pub method: Bytes,
    /// The request target exactly as sent, fragment included.
    pub uri: Bytes,
    /// The protocol token as sent (empty for HTTP/0.9).
    pub protocol: Bytes,
    /// The parsed version.
    pub version: Version,
    /// Every header line in order, duplicates kept: the name as sent, the value
    /// without surrounding spaces and tabs.
    pub headers: Vec<(Bytes, Bytes)>,
    /// Bytes of the head, from the request line to the empty line, inclusive.
    pub len: usize,
    /// What makes this request unsafe to forward (empty for a clean request).
    pub problems: Vec<&'static str>,
}

/// Why a head could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// The head is longer than the configured limit.
    #[error("request head larger than {0} bytes")]
    TooLarge(usize),
    /// More header lines than the configured limit.
    #[error("more than {0} header lines")]
    TooManyHeaders(usize),
    /// The request line or a header line cannot be split into its parts.
    #[error("malformed request: {0}")]
    Malformed(&'static str),
}

/// Where a request head ends in `buf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadEnd {
    /// Empty lines before the request line (ignored, as RFC 9112 §2.2 allows).
    pub skip: usize,
    /// Index just past the head's final line feed.
    pub end: usize,
}

/// Finds the end of the request head at the start of `buf`: the first empty line, or
/// the end of the request line itself when it carries no version (HTTP/0.9).
/// Returns `Ok(None)` when more bytes are needed. `limit` bounds the head size.
pub fn find_head_end(buf: &[u8], limit: usize) -> Result<Option<HeadEnd>, HeadError> {
    // Leading empty lines.
    let mut skip = 0;
    loop {
        match &buf[skip..] {
            [b'\r', b'\n', ..] => skip += 2,
            [b'\n', ..] => skip += 1,
            [b'\r'] | [] => return Ok(None),
            _ => break,
        }
        if skip > limit {
            return Err(HeadError::TooLarge(limit));
        }
    }
    let data = &buf[skip..];
    let window = &data[..data.len().min(limit)];
    let Some(first_lf) = memchr::memchr(b'\n', window) else {
        return if data.len() >= limit {
            Err(HeadError::TooLarge(limit))
        } else {
            Ok(None)
        };
    };
    if request_line_tokens(&window[..first_lf]) < 3 {
        return Ok(Some(HeadEnd {
            skip,
            end: skip + first_lf + 1,
        }));
    }
    let base = first_lf + 1;
    let mut line_start = base;
    for lf in memchr::memchr_iter(b'\n', &window[base..]) {
        let pos = base + lf;
        let line = &window[line_start..pos];
        if line.is_empty() || line == b"\r" {
            return Ok(Some(HeadEnd {
                skip,
                end: skip + pos + 1,
            }));
        }
        line_start = pos + 1;
    }
    if data.len() >= limit {
        Err(HeadError::TooLarge(limit))
    } else {
        Ok(None)
    }
}

fn is_ws(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Number of whitespace-separated tokens on a request line (capped at 3).
fn request_line_tokens(line: &[u8]) -> usize {
    trim_cr(line)
        .split(|&b| is_ws(b))
        .filter(|t| !t.is_empty())
        .take(3)
        .count()
}

/// Splits a complete head (`head` starts at the request line and ends after the
/// empty line, as found by [`find_head_end`]) into its parts.
pub fn parse_head(head: Bytes, max_headers: usize) -> Result<RequestHead, HeadError> {
    match parse_strict(&head, max_headers) {
        Ok(Some(parsed)) => Ok(parsed),
        Ok(None) => parse_lenient(&head, max_headers),
        Err(e) => Err(e),
    }
}

/// httparse's reading of a well-formed head. `Ok(None)` when httparse refuses it.
fn parse_strict(head: &Bytes, max_headers: usize) -> Result<Option<RequestHead>, HeadError> {
    // Uninitialised slots: httparse writes the ones it fills (zeroing 64 of them
    // for every request cost about as much as parsing a short head).
    let mut small = [const { std::mem::MaybeUninit::uninit() }; 64];
    let mut large;
    let headers: &mut [std::mem::MaybeUninit<httparse::Header<'_>>] = if max_headers <= small.len()
    {
        &mut small[..max_headers]
    } else {
        &mut small
    };
    let mut req = httparse::Request::new(&mut []);
    let status = match req.parse_with_uninit_headers(head, headers) {
        Ok(s) => s,
        Err(httparse::Error::TooManyHeaders) if max_headers > 64 => {
            large = vec![httparse::EMPTY_HEADER; max_headers];
            req = httparse::Request::new(&mut large);
            match req.parse(head) {
                Ok(s) => s,
                Err(httparse::Error::TooManyHeaders) => {
                    return Err(HeadError::TooManyHeaders(max_headers));
                }
                Err(_) => return Ok(None),
            }
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HeadError::TooManyHeaders(max_headers));
        }
        Err(_) => return Ok(None),
    };
    let httparse::Status::Complete(len) = status else {
        return Ok(None);
    };
    let (Some(method), Some(path), Some(minor)) = (req.method, req.path, req.version) else {
        return Ok(None);
    };
    let base = head.as_ptr() as usize;
    let slice = |s: &[u8]| {
        let start = s.as_ptr() as usize - base;
        head.slice(start..start + s.len())
    };
    // The protocol token sits between the target and the line end.
    let line_end = memchr::memchr(b'\n', head).unwrap_or(head.len());
    let line = trim_cr(&head[..line_end]);
    let proto_start = line
        .iter()
        .rposition(|&b| is_ws(b))
        .map_or(line.len(), |p| p + 1);
    let protocol = head.slice(proto_start..line.len());
    let mut out = RequestHead {
        method: slice(method.as_bytes()),
        uri: slice(path.as_bytes()),
        protocol,
        version: Version::Http(1, minor),
        headers: req
            .headers
            .iter()
            .map(|h| (slice(h.name.as_bytes()), slice(h.value)))
            .collect(),
        len,
        problems: Vec::new(),
    };
    out.problems = find_problems(&out, false);
    Ok(Some(out))
}

/// A tolerant reading for what httparse refuses: whitespace before the method, odd
/// versions, no version, bare CR or control bytes in values, folded lines, odd names.
fn parse_lenient(head: &Bytes, max_headers: usize) -> Result<RequestHead, HeadError> {
    let mut lines = LineIter { buf: head, pos: 0 };
    let (ls, le) = lines.next().ok_or(HeadError::Malformed("empty request"))?;
    let line = &head[ls..le];
    if line.contains(&b'\r') {
        return Err(HeadError::Malformed("bare CR in the request line"));
    }
    let lead = line.iter().take_while(|&&b| is_ws(b)).count();
    let mut tokens = Vec::with_capacity(3);
    let mut i = lead;
    while i < line.len() {
        let start = i;
        while i < line.len() && !is_ws(line[i]) {
            i += 1;
        }
        tokens.push((ls + start, ls + i));
        while i < line.len() && is_ws(line[i]) {
            i += 1;
        }
    }
    let (method, uri, protocol) = match tokens.as_slice() {
        [] | [_] => return Err(HeadError::Malformed("request line has no target")),
        [m, u] => (*m, *u, (le, le)),
        [m, u, p] => (*m, *u, *p),
        [m, rest @ ..] => {
            // Spaces inside the target: keep everything between the method and the
            // last token as the target, as the client wrote it.
            let p = rest[rest.len() - 1];
            let u = (rest[0].0, rest[rest.len() - 2].1);
            (*m, u, p)
        }
    };
    let protocol_bytes = head.slice(protocol.0..protocol.1);
    let version = Version::parse(&protocol_bytes);
    let mut headers: Vec<(Bytes, Bytes)> = Vec::new();
    let mut problems = Vec::new();
    if lead > 0 {
        problems.push("whitespace before the method");
    }
    if tokens.len() > 3 {
        problems.push("whitespace inside the request target");
    }
    if version != Version::Http09 {
        for (s, e) in lines {
            let l = &head[s..e];
            if l.is_empty() {
                break;
            }
            if l.contains(&b'\r') {
                // RFC 9112 §2.2: a bare CR makes the element invalid; a server may not
                // process it as it is (Apache answers 400 too).
                return Err(HeadError::Malformed("bare CR in a header line"));
            }
            if is_ws(l[0]) {
                // obs-fold: a continuation of the previous header value.
                let Some(last) = headers.last_mut() else {
                    return Err(HeadError::Malformed("continuation line before any header"));
                };
                let cont = trim_ws(l);
                let mut joined = Vec::with_capacity(last.1.len() + 1 + cont.len());
                joined.extend_from_slice(&last.1);
                if !cont.is_empty() {
                    joined.push(b' ');
                    joined.extend_from_slice(cont);
                }
                last.1 = Bytes::from(joined);
                if !problems.contains(&"folded header line") {
                    problems.push("folded header line");
                }
                continue;
            }
            let Some(colon) = memchr::memchr(b':', l) else {
                return Err(HeadError::Malformed("header line without a colon"));
            };
            if headers.len() >= max_headers {
                return Err(HeadError::TooManyHeaders(max_headers));
            }
            let value = trim_ws(&l[colon + 1..]);
            let vstart =
                s + colon + 1 + (value.as_ptr() as usize - l[colon + 1..].as_ptr() as usize);
            headers.push((
                head.slice(s..s + colon),
                head.slice(vstart..vstart + value.len()),
            ));
        }
    }
    let mut out = RequestHead {
        method: head.slice(method.0..method.1),
        uri: head.slice(uri.0..uri.1),
        protocol: protocol_bytes,
        version,
        headers,
        len: head.len(),
        problems,
    };
    let mut more = find_problems(&out, true);
    out.problems.append(&mut more);
    Ok(out)
}

fn trim_ws(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|&b| !is_ws(b)).unwrap_or(v.len());
    let end = v.iter().rposition(|&b| !is_ws(b)).map_or(start, |p| p + 1);
    &v[start..end]
}

/// Lines of a head, without their CR LF; yields (start, end) offsets.
struct LineIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Iterator for LineIter<'_> {
    type Item = (usize, usize);
    fn next(&mut self) -> Option<(usize, usize)> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let (len, adv) = match memchr::memchr(b'\n', rest) {
            Some(p) => (p, p + 1),
            None => (rest.len(), rest.len()),
        };
        let start = self.pos;
        let mut end = start + len;
        if end > start && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        self.pos += adv;
        Some((start, end))
    }
}

/// RFC 9110 token characters.
pub fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| TOKEN[usize::from(b)])
}

/// Which bytes are RFC 9110 token characters (a look-up per byte).
static TOKEN: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        i += 1;
    }
    t
};

/// Checks made on every head, whichever parser read it: what an origin server
/// such as Apache would answer with 400.
fn find_problems(h: &RequestHead, lenient: bool) -> Vec<&'static str> {
    let mut p = Vec::new();
    if !is_token(&h.method) {
        p.push("method is not a token");
    }
    match h.version {
        Version::Http09 => p.push("HTTP/0.9 request"),
        Version::Invalid => p.push("invalid protocol version"),
        Version::Http(0, _) => p.push("unsupported protocol version"),
        Version::Http(..) => {}
    }
    if h.uri.contains(&b'#') {
        p.push("fragment in the request target");
    }
    if h.uri.iter().any(|&b| b <= b' ' || b == 0x7f) {
        p.push("control character or space in the request target");
    }
    if lenient {
        if h.headers.iter().any(|(name, _)| !is_token(name)) {
            p.push("invalid header name");
        }
        if h.headers
            .iter()
            .any(|(_, value)| value.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7f))
        {
            p.push("control character in a header value");
        }
    }
    let mut hosts = h
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"host"))
        .map(|(_, v)| v);
    match (hosts.next(), hosts.next()) {
        (None, _) if matches!(h.version, Version::Http(1, m) if m >= 1) => {
            p.push("missing Host header");
        }
        (None, _) => {}
        (Some(one), None) => {
            if !valid_host(one) && (!one.is_empty() || h.version != Version::Http(1, 0)) {
                p.push("invalid Host header");
            }
        }
        (Some(_), Some(_)) => p.push("more than one Host header"),
    }
    p
}

/// A Host value an origin server accepts: a name of letters, digits, `-`, `.` and
/// `_`, or a bracketed IPv6 literal, with an optional numeric port.
pub fn valid_host(v: &[u8]) -> bool {
    if v.is_empty() {
        return false;
    }
    let (host, port) = if v[0] == b'[' {
        let Some(close) = memchr::memchr(b']', v) else {
            return false;
        };
        let inner = &v[1..close];
        if inner.is_empty()
            || !inner
                .iter()
                .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return false;
        }
        match &v[close + 1..] {
            [] => return true,
            [b':', port @ ..] => (&v[..=close], port),
            _ => return false,
        }
    } else {
        match memchr::memrchr(b':', v) {
            Some(c) => (&v[..c], &v[c + 1..]),
            None => (v, &b""[..]),
        }
    };
    let host_ok = host.first() == Some(&b'[')
        || (!host.is_empty()
            && host
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_'));
    let port_ok = port.iter().all(u8::is_ascii_digit) && port.len() <= 5;
    host_ok && port_ok
}

impl RequestHead {
    /// Values of every header with this name (case-insensitive), in order.
    pub fn values<'a>(&'a self, name: &'a [u8]) -> impl Iterator<Item = &'a Bytes> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// True when a comma-separated header (such as Connection) has this token.
    pub fn has_token(&self, name: &[u8], token: &[u8]) -> bool {
        self.values(name).any(|v| {
            v.split(|&b| b == b',')
                .any(|t| trim_ws(t).eq_ignore_ascii_case(token))
        })
    }

    /// How the body is framed.
    pub fn framing(&self) -> Framing {
        body_framing(self.headers.iter().map(|(n, v)| (&n[..], &v[..])))
    }
}

/// How a message with these header lines frames its body, from its
/// Transfer-Encoding and Content-Length lines (RFC 9112 §6.3): chunked when the
/// last transfer coding is chunked; `Invalid` for another last coding, a length
/// that is not a number, or lengths that disagree.
pub fn body_framing<'a>(headers: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone) -> Framing {
    let values = |name: &'static [u8]| {
        headers
            .clone()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    };
    let mut te_seen = false;
    let mut chunked_last = false;
    let mut other_coding = false;
    for v in values(b"transfer-encoding") {
        te_seen = true;
        for coding in v.split(|&b| b == b',') {
            let c = trim_ws(coding);
            if c.is_empty() {
                continue;
            }
            other_coding |= chunked_last;
            chunked_last = c.eq_ignore_ascii_case(b"chunked");
            other_coding |= !chunked_last;
        }
    }
    if te_seen {
        return match (chunked_last, other_coding) {
            (true, false) => Framing::Chunked,
            (true, true) => {
                Framing::Unsupported("Transfer-Encoding has a coding other than chunked")
            }
            (false, _) => Framing::Invalid("Transfer-Encoding does not end in chunked"),
        };
    }
    let mut length: Option<u64> = None;
    for v in values(b"content-length") {
        for part in v.split(|&b| b == b',') {
            let part = trim_ws(part);
            if part.is_empty() || part.len() > 18 || !part.iter().all(u8::is_ascii_digit) {
                return Framing::Invalid("Content-Length is not a number");
            }
            let n = part
                .iter()
                .fold(0u64, |acc, &d| acc * 10 + u64::from(d - b'0'));
            match length {
                Some(prev) if prev != n => {
                    return Framing::Invalid("conflicting Content-Length values");
                }
                _ => length = Some(n),
            }
        }
    }
    match length {
        Some(0) | None => Framing::None,
        Some(n) => Framing::Length(n),
    }
}

/// How a request body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// The framing headers cannot be trusted; the body cannot be read.
    Invalid(&'static str),
    /// Chunked, after a transfer coding the proxy does not implement (`gzip,
    /// chunked`): a request gets 501 (RFC 9112 §6.1), since dropping the coding
    /// would hand the rules and the upstream other bytes than the client meant.
    Unsupported(&'static str),
}

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// A chunk-size line is not hexadecimal, or is too long.
    #[error("bad chunk size line")]
    BadChunkSize,
    /// A chunk's data is not followed by CR LF.
    #[error("chunk data not followed by CRLF")]
    BadChunkEnd,
    /// The trailer section is too large.
    #[error("trailer section too large")]
    TrailersTooLarge,
}

/// One step of body decoding.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Body bytes (never empty).
    Data(Bytes),
    /// The buffer holds no complete unit; read more.
    NeedMore,
    /// The body is complete.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    Size,
    Data(u64),
    DataEnd,
    Trailers,
    Done,
}

/// Longest chunk-size line (size and extensions, before the line feed).
const MAX_CHUNK_LINE: usize = 4096;

/// Reads a request body from the connection buffer, without I/O: call
/// [`BodyDecoder::decode`] with the buffer, read more when it says so.
#[derive(Debug)]
pub struct BodyDecoder {
    remaining: u64,
    chunked: bool,
    state: ChunkState,
    trailer_bytes: usize,
    max_trailer_bytes: usize,
    /// Raw bytes consumed from the buffer (framing included).
    pub raw_bytes: u64,
}

impl BodyDecoder {
    /// A decoder for this framing (`None` and `Invalid` give an empty body).
    pub fn new(framing: Framing, max_trailer_bytes: usize) -> Self {
        let (remaining, chunked) = match framing {
            Framing::Length(n) => (n, false),
            Framing::Chunked => (0, true),
            Framing::None | Framing::Invalid(_) | Framing::Unsupported(_) => (0, false),
        };
        Self {
            remaining,
            chunked,
            state: if chunked {
                ChunkState::Size
            } else {
                ChunkState::Done
            },
            trailer_bytes: 0,
            max_trailer_bytes,
            raw_bytes: 0,
        }
    }

    /// Whether the body has been read to its end (trailers included).
    pub fn is_done(&self) -> bool {
        if self.chunked {
            self.state == ChunkState::Done
        } else {
            self.remaining == 0
        }
    }

    /// Bytes still to come of a body framed by Content-Length (`None` when
    /// chunked).
    pub fn remaining(&self) -> Option<u64> {
        (!self.chunked).then_some(self.remaining)
    }

    /// Takes the next piece of body from the front of `buf`.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, BodyError> {
        if !self.chunked {
            if self.remaining == 0 {
                return Ok(Decoded::Done);
            }
            if buf.is_empty() {
                return Ok(Decoded::NeedMore);
            }
            let n = usize::try_from(self.remaining)
                .unwrap_or(usize::MAX)
                .min(buf.len());
            self.remaining -= n as u64;
            self.raw_bytes += n as u64;
            return Ok(Decoded::Data(buf.split_to(n).freeze()));
        }
        loop {
            match self.state {
                ChunkState::Done => return Ok(Decoded::Done),
                ChunkState::Size => {
                    // The line feed is looked for within the longest line allowed
                    // only, so that a longer line is refused however the bytes
                    // arrived (in one read or in several).
                    let window = &buf[..buf.len().min(MAX_CHUNK_LINE + 1)];
                    let Some(lf) = memchr::memchr(b'\n', window) else {
                        if buf.len() > MAX_CHUNK_LINE {
                            return Err(BodyError::BadChunkSize);
                        }
                        return Ok(Decoded::NeedMore);
                    };
                    let line = trim_cr(&buf[..lf]);
                    let size_part = match memchr::memchr(b';', line) {
                        Some(p) => &line[..p],
                        None => line,
                    };
                    let size_part = trim_ws(size_part);
                    if size_part.is_empty()
                        || size_part.len() > 15
                        || !size_part.iter().all(u8::is_ascii_hexdigit)
                    {
                        return Err(BodyError::BadChunkSize);
                    }
                    let size = size_part.iter().fold(0u64, |acc, &d| {
                        acc * 16 + u64::from((d as char).to_digit(16).unwrap_or(0))
                    });
                    let _ = buf.split_to(lf + 1);
                    self.raw_bytes += (lf + 1) as u64;
                    self.state = if size == 0 {
                        ChunkState::Trailers
                    } else {
                        ChunkState::Data(size)
                    };
                }
                ChunkState::Data(left) => {
                    if buf.is_empty() {
                        return Ok(Decoded::NeedMore);
                    }
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left)
                    };
                    self.raw_bytes += n as u64;
                    return Ok(Decoded::Data(buf.split_to(n).freeze()));
                }
                ChunkState::DataEnd => match buf.first() {
                    None => return Ok(Decoded::NeedMore),
                    Some(b'\n') => {
                        let _ = buf.split_to(1);
                        self.raw_bytes += 1;
                        self.state = ChunkState::Size;
                    }
                    Some(b'\r') => {
                        if buf.len() < 2 {
                            return Ok(Decoded::NeedMore);
                        }
                        if buf[1] != b'\n' {
                            return Err(BodyError::BadChunkEnd);
                        }
                        let _ = buf.split_to(2);
                        self.raw_bytes += 2;
                        self.state = ChunkState::Size;
                    }
                    Some(_) => return Err(BodyError::BadChunkEnd),
                },
                ChunkState::Trailers => {
                    let Some(lf) = memchr::memchr(b'\n', buf) else {
                        if self.trailer_bytes + buf.len() > self.max_trailer_bytes {
                            return Err(BodyError::TrailersTooLarge);
                        }
                        return Ok(Decoded::NeedMore);
                    };
                    let empty = trim_cr(&buf[..lf]).is_empty();
                    self.trailer_bytes += lf + 1;
                    if self.trailer_bytes > self.max_trailer_bytes {
                        return Err(BodyError::TrailersTooLarge);
                    }
                    let _ = buf.split_to(lf + 1);
                    self.raw_bytes += (lf + 1) as u64;
                    if empty {
                        self.state = ChunkState::Done;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &[u8]) -> RequestHead {
        let end = find_head_end(raw, 8192).unwrap().expect("complete head");
        parse_head(Bytes::copy_from_slice(&raw[end.skip..end.end]), 100).unwrap()
    }

    fn names(h: &RequestHead) -> Vec<(String, String)> {
        h.headers
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn finds_head_end() {
        assert_eq!(
            find_head_end(b"GET / HTTP/1.1\r\nHost: a\r\n", 100),
            Ok(None)
        );
        let e = find_head_end(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nBODY", 100)
            .unwrap()
            .unwrap();
        assert_eq!(e, HeadEnd { skip: 0, end: 27 });
        let e = find_head_end(b"\r\n\r\nGET / HTTP/1.1\n\nX", 100)
            .unwrap()
            .unwrap();
        assert_eq!(e, HeadEnd { skip: 4, end: 20 });
        // HTTP/0.9: the request line alone.
        let e = find_head_end(b"GET /\r\nHost: x\r\n", 100)
            .unwrap()
            .unwrap();
        assert_eq!(e.end, 7);
        assert_eq!(
            find_head_end(&[b'a'; 200], 100),
            Err(HeadError::TooLarge(100))
        );
        let mut long = b"GET / HTTP/1.1\r\n".to_vec();
        long.extend(std::iter::repeat_n(b'x', 200));
        assert_eq!(find_head_end(&long, 100), Err(HeadError::TooLarge(100)));
    }

    #[test]
    fn clean_request_keeps_everything_in_order() {
        let h = head(
            b"POST /a/b?x=1#frag HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3\r\nX-A:  1 \r\ncontent-length: 3\r\n\r\n",
        );
        assert_eq!(&h.method[..], b"POST");
        assert_eq!(&h.uri[..], b"/a/b?x=1#frag");
        assert_eq!(&h.protocol[..], b"HTTP/1.1");
        assert_eq!(h.version, Version::Http(1, 1));
        assert_eq!(
            names(&h),
            vec![
                ("Host".into(), "example.com".into()),
                ("Content-Length".into(), "3".into()),
                ("X-A".into(), "1".into()),
                ("content-length".into(), "3".into()),
            ]
        );
        assert_eq!(h.framing(), Framing::Length(3));
        assert_eq!(h.problems, vec!["fragment in the request target"]);
    }

    #[test]
    fn uri_with_raw_quotes_and_high_bytes_is_read() {
        let h = head(b"GET /?q=\"<script>\"&x=\xff` HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(&h.uri[..], b"/?q=\"<script>\"&x=\xff`");
        assert!(h.problems.is_empty(), "{:?}", h.problems);
    }

    #[test]
    fn leading_whitespace_and_odd_versions() {
        let h = head(b"     GET /get HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assert_eq!(&h.method[..], b"GET");
        assert_eq!(&h.uri[..], b"/get");
        assert!(h.problems.contains(&"whitespace before the method"));

        let h = head(b"GET / HTTP/3.0\r\nHost: localhost\r\n\r\n");
        assert_eq!(&h.protocol[..], b"HTTP/3.0");
        assert_eq!(h.version, Version::Http(3, 0));
        assert!(h.problems.is_empty(), "{:?}", h.problems);

        let h = head(b"GET / JUNK/1.0\r\nHost: localhost\r\n\r\n");
        assert_eq!(h.version, Version::Invalid);
        assert!(h.problems.contains(&"invalid protocol version"));
        assert_eq!(names(&h), vec![("Host".into(), "localhost".into())]);

        let h = head(b"GET / HTTP/2\r\nHost: localhost\r\n\r\n");
        assert_eq!(&h.protocol[..], b"HTTP/2");
        assert_eq!(h.version, Version::Invalid);

        let h = head(b"GET /\r\nHost: localhost\r\n\r\n");
        assert_eq!(h.version, Version::Http09);
        assert!(h.headers.is_empty());
        assert!(h.problems.contains(&"HTTP/0.9 request"));
    }

    #[test]
    fn control_bytes_and_odd_names_reach_the_caller() {
        let h = head(
            b"GET / HTTP/1.1\r\nHost: a\r\nSome: Head\x01er\r\nMy_Header: 1\r\nBad Name: 2\r\n\r\n",
        );
        assert_eq!(
            names(&h),
            vec![
                ("Host".into(), "a".into()),
                ("Some".into(), "Head\x01er".into()),
                ("My_Header".into(), "1".into()),
                ("Bad Name".into(), "2".into()),
            ]
        );
        assert!(h.problems.contains(&"invalid header name"));
    }

    #[test]
    fn bare_cr_is_refused() {
        for raw in [
            &b"GET / HTTP/1.1\r\nHost: a\r\nSome: Head\rInjected: x\r\n\r\n"[..],
            b"GET /\r HTTP/1.1\r\nHost: a\r\n\r\n",
        ] {
            let end = find_head_end(raw, 8192).unwrap().unwrap();
            let err = parse_head(Bytes::copy_from_slice(&raw[..end.end]), 100).unwrap_err();
            assert!(
                matches!(err, HeadError::Malformed(m) if m.contains("bare CR")),
                "{err:?}"
            );
        }
    }

    #[test]
    fn folded_lines_are_joined() {
        let h = head(b"GET / HTTP/1.1\r\nHost: a\r\nX: one\r\n  two\r\n\r\n");
        assert_eq!(names(&h)[1], ("X".into(), "one two".into()));
        assert!(h.problems.contains(&"folded header line"));
    }

    #[test]
    fn unreadable_heads() {
        let e = find_head_end(b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 100)
            .unwrap()
            .unwrap();
        let raw = Bytes::from_static(b"GET / HTTP/1.1\r\nno colon here\r\n\r\n");
        assert!(matches!(
            parse_head(raw.slice(..e.end), 100),
            Err(HeadError::Malformed(_))
        ));
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..10 {
            many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(
            parse_head(Bytes::from(many), 5).unwrap_err(),
            HeadError::TooManyHeaders(5)
        );
    }

    #[test]
    fn host_rules() {
        assert!(valid_host(b"localhost"));
        assert!(valid_host(b"example.com:8080"));
        assert!(valid_host(b"[::1]:80"));
        assert!(valid_host(b"10.0.0.1"));
        assert!(!valid_host(b""));
        assert!(!valid_host(b"localhost%00"));
        assert!(!valid_host(b"a b"));
        assert!(!valid_host(b"x:port"));
        let h = head(b"GET / HTTP/1.1\r\nHost:\r\n\r\n");
        assert!(h.problems.contains(&"invalid Host header"));
        let h = head(b"GET / HTTP/1.0\r\nHost:\r\n\r\n");
        assert!(h.problems.is_empty(), "{:?}", h.problems);
        let h = head(b"GET / HTTP/1.1\r\n\r\n");
        assert!(h.problems.contains(&"missing Host header"));
    }

    #[test]
    fn framing_rules() {
        let f = |raw: &[u8]| head(raw).framing();
        assert_eq!(f(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), Framing::None);
        assert_eq!(
            f(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: NotDigits\r\n\r\n"),
            Framing::Invalid("Content-Length is not a number")
        );
        assert_eq!(
            f(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3;\r\n\r\n"),
            Framing::Invalid("Content-Length is not a number")
        );
        assert_eq!(
            f(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"),
            Framing::Invalid("conflicting Content-Length values")
        );
        assert_eq!(
            f(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Framing::Chunked
        );
        assert_eq!(
            f(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"),
            Framing::Invalid("Transfer-Encoding does not end in chunked")
        );
        // Another coding before chunked is not implemented: refused with 501, never
        // dropped (the rules would see other bytes than the application).
        let unsupported = Framing::Unsupported("Transfer-Encoding has a coding other than chunked");
        for te in ["gzip, chunked", "deflate,chunked", "chunked, chunked"] {
            let raw = format!("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: {te}\r\n\r\n");
            assert_eq!(f(raw.as_bytes()), unsupported, "{te}");
        }
        assert_eq!(
            f(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"),
            unsupported
        );
        assert_eq!(
            f(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: , chunked\r\n\r\n"),
            Framing::Chunked
        );
    }

    fn decode_all(framing: Framing, input: &[u8], step: usize) -> Result<Vec<u8>, BodyError> {
        let mut d = BodyDecoder::new(framing, 1024);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut fed = 0;
        loop {
            match d.decode(&mut buf)? {
                Decoded::Data(b) => out.extend_from_slice(&b),
                Decoded::Done => return Ok(out),
                Decoded::NeedMore => {
                    assert!(fed < input.len(), "decoder wants more than the input");
                    let n = step.min(input.len() - fed);
                    buf.extend_from_slice(&input[fed..fed + n]);
                    fed += n;
                }
            }
        }
    }

    #[test]
    fn chunked_bodies_decode_in_any_split() {
        let body = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Trailer: 1\r\n\r\n";
        for step in [1, 2, 3, 7, 100] {
            assert_eq!(
                decode_all(Framing::Chunked, body, step).unwrap(),
                b"Wikipedia in\r\n\r\nchunks."
            );
        }
        assert_eq!(
            decode_all(Framing::Chunked, b"zz\r\n", 10),
            Err(BodyError::BadChunkSize)
        );
        assert_eq!(
            decode_all(Framing::Chunked, b"2\r\nabXY", 10),
            Err(BodyError::BadChunkEnd)
        );
        assert_eq!(decode_all(Framing::Length(3), b"abc", 1).unwrap(), b"abc");
    }

    /// Found by the `chunked` fuzz target: a chunk-size line over the limit was
    /// refused when it came in pieces but accepted when it came in one read.
    #[test]
    fn a_long_chunk_size_line_is_refused_however_it_arrives() {
        let mut body = b"3;".to_vec();
        body.extend(std::iter::repeat_n(b'a', MAX_CHUNK_LINE));
        body.extend_from_slice(b"\r\nabc\r\n0\r\n\r\n");
        for step in [1, 100, 4096, body.len()] {
            assert_eq!(
                decode_all(Framing::Chunked, &body, step),
                Err(BodyError::BadChunkSize),
                "read {step} bytes at a time"
            );
        }
        // The longest line allowed still passes, in one read or byte by byte.
        let mut body = b"3;".to_vec();
        body.extend(std::iter::repeat_n(b'a', MAX_CHUNK_LINE - 3));
        body.extend_from_slice(b"\r\nabc\r\n0\r\n\r\n");
        for step in [1, body.len()] {
            assert_eq!(decode_all(Framing::Chunked, &body, step).unwrap(), b"abc");
        }
    }

    #[test]
    fn length_decoder_leaves_the_next_request_alone() {
        let mut d = BodyDecoder::new(Framing::Length(3), 1024);
        let mut buf = BytesMut::from(&b"abcGET / HTTP/1.1\r\n"[..]);
        assert_eq!(
            d.decode(&mut buf),
            Ok(Decoded::Data(Bytes::from_static(b"abc")))
        );
        assert_eq!(d.decode(&mut buf), Ok(Decoded::Done));
        assert_eq!(&buf[..], b"GET / HTTP/1.1\r\n");
        assert_eq!(d.raw_bytes, 3);
    }
}
