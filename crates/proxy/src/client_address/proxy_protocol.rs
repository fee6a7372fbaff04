//! The PROXY protocol header (HAProxy's `proxy-protocol.txt`, versions 1 and 2)
//! that a load balancer sends first on each connection to a listener with
//! `proxy_protocol = true`, naming the client it accepted the connection from.
//!
//! The header's fields are parsed by the `ppp` crate; this module decides when a
//! header is complete, bounds its size, and reads it off the socket without taking
//! one byte more: what follows it (a TLS ClientHello, an HTTP request) belongs to
//! the next layer. The socket is first *peeked*: when the peeked bytes hold the
//! whole header, exactly that many bytes are read; otherwise the peeked bytes, all
//! of them part of the header, are read and the socket is peeked again (which then
//! waits for new bytes). A version 2 header says its length in its first 16 bytes,
//! which are then enough to read the rest exactly.

use std::net::SocketAddr;
use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;

/// The longest version 1 header, `\r\n` included (the specification's bound).
pub const MAX_V1_LEN: usize = 107;

/// The longest version 2 header accepted, its 16-byte fixed part included. The
/// specification allows 65,551 bytes; the addresses take at most 216 and the TLVs
/// that load balancers add (ALPN, SNI, TLS details, a cloud's endpoint id) a few
/// hundred more, so 4 KiB leaves room without letting one connection make the
/// proxy buffer 64 KiB.
pub const MAX_V2_LEN: usize = 4096;

/// The 12-byte signature that starts a version 2 header.
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// The fixed part of a version 2 header: signature, version and command, family
/// and transport, length.
const V2_FIXED: usize = 16;

/// Why a connection's PROXY protocol header was refused.
#[derive(Debug, thiserror::Error)]
pub enum ProxyHeaderError {
    /// The first bytes are not a PROXY protocol header at all (a client that
    /// speaks HTTP or TLS straight away).
    #[error("no PROXY protocol header")]
    Missing,
    /// The header is malformed.
    #[error("invalid PROXY protocol header: {0}")]
    Invalid(String),
    /// The header is longer than [`MAX_V1_LEN`] or [`MAX_V2_LEN`].
    #[error("PROXY protocol header longer than {0} bytes")]
    TooLong(usize),
    /// The connection ended before the header did.
    #[error("connection closed inside the PROXY protocol header")]
    Truncated,
    /// Reading the socket failed.
    #[error("reading the PROXY protocol header: {0}")]
    Io(#[from] std::io::Error),
}

impl ProxyHeaderError {
    /// The label of the refusal in `palisade_proxy_protocol_refused_total{reason}`.
    pub fn label(&self) -> &'static str {
        match self {
            ProxyHeaderError::Missing | ProxyHeaderError::Invalid(_) => "invalid",
            ProxyHeaderError::TooLong(_) => "too_long",
            ProxyHeaderError::Truncated | ProxyHeaderError::Io(_) => "truncated",
        }
    }
}

/// A complete PROXY protocol header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyHeader {
    /// 1 (text) or 2 (binary).
    pub version: u8,
    /// The client the sender accepted the connection from; `None` when the header
    /// names none: a version 2 `LOCAL` command (the sender's own health check), a
    /// version 1 `UNKNOWN`, or a version 2 address family other than IPv4 and IPv6.
    /// The TCP peer is then the client.
    pub source: Option<SocketAddr>,
    /// The header's length in bytes.
    pub len: usize,
}

/// What the first bytes of a connection say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A whole header: the bytes after [`ProxyHeader::len`] are not part of it.
    Complete(ProxyHeader),
    /// The start of a header. `total` is its whole length when already known (a
    /// version 2 header with its fixed part in).
    Incomplete {
        /// The header's length, when the bytes so far say it.
        total: Option<usize>,
    },
}

/// Parses the start of a connection: a whole header, the start of one, or an error
/// when the bytes cannot begin a header (or one within the size bounds).
pub fn parse(bytes: &[u8]) -> Result<Parsed, ProxyHeaderError> {
    match bytes.first() {
        None => Ok(Parsed::Incomplete { total: None }),
        Some(b'P') => parse_v1(bytes),
        Some(b'\r') => parse_v2(bytes),
        Some(_) => Err(ProxyHeaderError::Missing),
    }
}

/// A version 1 header: `PROXY TCP4|TCP6|UNKNOWN ... \r\n`, at most 107 bytes.
fn parse_v1(bytes: &[u8]) -> Result<Parsed, ProxyHeaderError> {
    const PREFIX: &[u8] = b"PROXY ";
    let n = bytes.len().min(PREFIX.len());
    if bytes[..n] != PREFIX[..n] {
        return Err(ProxyHeaderError::Missing);
    }
    let window = &bytes[..bytes.len().min(MAX_V1_LEN)];
    let Some(nl) = memchr::memchr(b'\n', window) else {
        // Complete only with its line end: until then, every byte so far is part
        // of the header.
        if bytes.len() >= MAX_V1_LEN {
            return Err(ProxyHeaderError::TooLong(MAX_V1_LEN));
        }
        return Ok(Parsed::Incomplete { total: None });
    };
    let line = &bytes[..=nl];
    let header = ppp::v1::Header::try_from(line)
        .map_err(|e| ProxyHeaderError::Invalid(format!("version 1: {e}")))?;
    if header.header.len() != line.len() {
        return Err(ProxyHeaderError::Invalid(
            "version 1: the line does not end in CRLF".into(),
        ));
    }
    let source = match header.addresses {
        ppp::v1::Addresses::Tcp4(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
        ppp::v1::Addresses::Tcp6(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
        ppp::v1::Addresses::Unknown => None,
    };
    Ok(Parsed::Complete(ProxyHeader {
        version: 1,
        source,
        len: line.len(),
    }))
}

/// A version 2 header: the 12-byte signature, version and command, family and
/// transport, a big-endian length, then that many bytes of addresses and TLVs.
fn parse_v2(bytes: &[u8]) -> Result<Parsed, ProxyHeaderError> {
    let n = bytes.len().min(V2_SIGNATURE.len());
    if bytes[..n] != V2_SIGNATURE[..n] {
        return Err(ProxyHeaderError::Missing);
    }
    if bytes.len() < V2_FIXED {
        return Ok(Parsed::Incomplete { total: None });
    }
    let total = V2_FIXED + usize::from(u16::from_be_bytes([bytes[14], bytes[15]]));
    if total > MAX_V2_LEN {
        return Err(ProxyHeaderError::TooLong(MAX_V2_LEN));
    }
    let header = match ppp::v2::Header::try_from(bytes) {
        Ok(h) => h,
        // The fixed part checked out and the rest has not all arrived.
        Err(ppp::v2::ParseError::Partial(..)) => {
            return Ok(Parsed::Incomplete { total: Some(total) });
        }
        Err(e) => return Err(ProxyHeaderError::Invalid(format!("version 2: {e}"))),
    };
    debug_assert_eq!(header.len(), total);
    let source = match (header.command, header.addresses) {
        (ppp::v2::Command::Local, _) => None,
        (_, ppp::v2::Addresses::IPv4(a)) => {
            Some(SocketAddr::from((a.source_address, a.source_port)))
        }
        (_, ppp::v2::Addresses::IPv6(a)) => {
            Some(SocketAddr::from((a.source_address, a.source_port)))
        }
        (_, ppp::v2::Addresses::Unspecified | ppp::v2::Addresses::Unix(_)) => None,
    };
    // The TLVs must fill the rest of the header exactly (with no address family,
    // whatever follows is "address information" to ignore).
    if header.address_family() != ppp::v2::AddressFamily::Unspecified
        && let Some(Err(e)) = header.tlvs().find(Result::is_err)
    {
        return Err(ProxyHeaderError::Invalid(format!("version 2: {e}")));
    }
    Ok(Parsed::Complete(ProxyHeader {
        version: 2,
        source: source.map(|s| SocketAddr::new(s.ip().to_canonical(), s.port())),
        len: total,
    }))
}

/// Reads a PROXY protocol header off `stream`, and nothing after it. The caller
/// bounds the time it may take (`server.client_header_timeout`).
pub async fn read_header(stream: &mut TcpStream) -> Result<ProxyHeader, ProxyHeaderError> {
    // The header's bytes read so far (only when it arrived in pieces).
    let mut consumed: Vec<u8> = Vec::new();
    // Room for any address-only header (version 2 with a UNIX address: 232 bytes).
    let mut window = [0u8; 256];
    loop {
        let bound = match consumed.first() {
            Some(b'P') => MAX_V1_LEN,
            _ => MAX_V2_LEN,
        };
        let room = (bound - consumed.len()).min(window.len());
        let n = stream.peek(&mut window[..room]).await?;
        if n == 0 {
            return Err(ProxyHeaderError::Truncated);
        }
        let parsed = if consumed.is_empty() {
            parse(&window[..n])?
        } else {
            let mut so_far = consumed.clone();
            so_far.extend_from_slice(&window[..n]);
            parse(&so_far)?
        };
        match parsed {
            Parsed::Complete(h) => {
                // Exactly the header's remaining bytes: they are in the socket, and
                // they were peeked into `window` (which holds no less), so reading
                // them there costs no allocation.
                let rest = h.len - consumed.len();
                stream.read_exact(&mut window[..rest]).await?;
                return Ok(h);
            }
            Parsed::Incomplete { total: Some(total) } => {
                // A version 2 header of known length: read exactly the rest.
                let start = consumed.len();
                consumed.resize(total, 0);
                read_exact(stream, &mut consumed[start..]).await?;
                return match parse(&consumed)? {
                    Parsed::Complete(h) => Ok(h),
                    Parsed::Incomplete { .. } => Err(ProxyHeaderError::Truncated),
                };
            }
            Parsed::Incomplete { total: None } => {
                // Every byte peeked belongs to the header: take them and wait for
                // more.
                let start = consumed.len();
                consumed.resize(start + n, 0);
                read_exact(stream, &mut consumed[start..]).await?;
            }
        }
    }
}

/// `read_exact`, with an early end of the connection reported as
/// [`ProxyHeaderError::Truncated`].
async fn read_exact(stream: &mut TcpStream, buf: &mut [u8]) -> Result<(), ProxyHeaderError> {
    match stream.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(ProxyHeaderError::Truncated),
        Err(e) => Err(ProxyHeaderError::Io(e)),
    }
}

/// Builders of headers, for tests here and in the integration tests' spirit.
#[cfg(test)]
pub(crate) mod build {
    use std::net::SocketAddr;

    /// A version 2 header: `command` 0 (LOCAL) or 1 (PROXY), `family` the family
    /// and transport byte, `addresses` and `tlvs` as they go on the wire.
    pub fn v2(command: u8, family: u8, addresses: &[u8], tlvs: &[u8]) -> Vec<u8> {
        let mut out = super::V2_SIGNATURE.to_vec();
        out.push(0x20 | command);
        out.push(family);
        let len = u16::try_from(addresses.len() + tlvs.len()).unwrap();
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(addresses);
        out.extend_from_slice(tlvs);
        out
    }

    /// The address block of a TCP connection from `src` to `dst` (same family).
    pub fn addresses(src: SocketAddr, dst: SocketAddr) -> (u8, Vec<u8>) {
        let mut out = Vec::new();
        let family = match (src, dst) {
            (SocketAddr::V4(s), SocketAddr::V4(d)) => {
                out.extend_from_slice(&s.ip().octets());
                out.extend_from_slice(&d.ip().octets());
                0x11
            }
            (SocketAddr::V6(s), SocketAddr::V6(d)) => {
                out.extend_from_slice(&s.ip().octets());
                out.extend_from_slice(&d.ip().octets());
                0x21
            }
            _ => panic!("mixed families"),
        };
        out.extend_from_slice(&src.port().to_be_bytes());
        out.extend_from_slice(&dst.port().to_be_bytes());
        (family, out)
    }

    /// A PROXY command for a TCP connection from `src` to `dst`, with `tlvs`.
    pub fn v2_proxy(src: &str, dst: &str, tlvs: &[u8]) -> Vec<u8> {
        let (family, a) = addresses(src.parse().unwrap(), dst.parse().unwrap());
        v2(1, family, &a, tlvs)
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    fn complete(bytes: &[u8]) -> ProxyHeader {
        match parse(bytes) {
            Ok(Parsed::Complete(h)) => h,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(bytes)),
        }
    }

    fn sa(s: &str) -> Option<SocketAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn version_1() {
        let h = complete(b"PROXY TCP4 192.0.2.7 10.0.0.1 56324 443\r\nGET / HTTP/1.1\r\n");
        assert_eq!(h.version, 1);
        assert_eq!(h.source, sa("192.0.2.7:56324"));
        assert_eq!(h.len, 41);
        let h = complete(b"PROXY TCP6 2001:db8::7 2001:db8::1 4711 80\r\n");
        assert_eq!(h.source, sa("[2001:db8::7]:4711"));
        let h = complete(b"PROXY UNKNOWN\r\n");
        assert_eq!((h.source, h.len), (None, 15));
        let h = complete(b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\nrest");
        assert_eq!((h.source, h.len), (None, 35));
        // The longest header there can be: 107 bytes.
        let longest = b"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
        assert_eq!(longest.len(), 104);
        assert_eq!(complete(longest).len, 104);
    }

    #[test]
    fn version_1_errors() {
        for bad in [
            &b"PROXY TCP4 192.0.2.7 10.0.0.1 56324\r\n"[..],
            b"PROXY TCP4 2001:db8::7 10.0.0.1 1 2\r\n",
            b"PROXY TCP6 192.0.2.7 10.0.0.1 1 2\r\n",
            b"PROXY TCP4 192.0.2.7 10.0.0.1 056324 443\r\n",
            b"PROXY TCP4 192.0.2.7 10.0.0.1 65536 443\r\n",
            b"PROXY TCP4 192.0.2.7 10.0.0.1 1 2\n",
            b"PROXY TCP4 192.0.2.7 10.0.0.1 1 2\rX\n",
            b"PROXY UDP4 192.0.2.7 10.0.0.1 1 2\r\n",
            b"PROXY  TCP4 192.0.2.7 10.0.0.1 1 2\r\n",
            b"PROXY TCP4 192.0.2.7 10.0.0.1 1 2 3\r\n",
        ] {
            assert!(
                matches!(parse(bad), Err(ProxyHeaderError::Invalid(_))),
                "{:?}: {:?}",
                String::from_utf8_lossy(bad),
                parse(bad)
            );
        }
        // Not a header at all.
        for bad in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"\x16\x03\x01",
            b"PROXI",
            b"PROXYTCP4",
        ] {
            assert!(
                matches!(parse(bad), Err(ProxyHeaderError::Missing)),
                "{bad:?}"
            );
        }
        // No line end within 107 bytes.
        let long = [b"PROXY TCP4 ".as_slice(), &[b'1'; 100]].concat();
        assert!(matches!(parse(&long), Err(ProxyHeaderError::TooLong(107))));
    }

    #[test]
    fn every_prefix_of_a_header_is_incomplete() {
        let v1 = b"PROXY TCP4 192.0.2.7 10.0.0.1 56324 443\r\n".to_vec();
        let v2 = v2_proxy("192.0.2.7:56324", "10.0.0.1:443", &[0x04, 0, 1, 42]);
        let v6 = v2_proxy("[2001:db8::7]:1", "[2001:db8::1]:2", &[]);
        for header in [v1, v2, v6] {
            for cut in 0..header.len() {
                assert!(
                    matches!(parse(&header[..cut]), Ok(Parsed::Incomplete { .. })),
                    "{cut} bytes of {header:?}: {:?}",
                    parse(&header[..cut])
                );
            }
            assert_eq!(complete(&header).len, header.len());
        }
    }

    #[test]
    fn version_2() {
        let h = complete(&v2_proxy("192.0.2.7:56324", "10.0.0.1:443", &[]));
        assert_eq!((h.version, h.source, h.len), (2, sa("192.0.2.7:56324"), 28));
        let h = complete(&v2_proxy("[2001:db8::7]:4711", "[2001:db8::1]:80", &[]));
        assert_eq!((h.source, h.len), (sa("[2001:db8::7]:4711"), 52));
        // An IPv4-mapped source is the IPv4 client.
        let h = complete(&v2_proxy("[::ffff:192.0.2.7]:1", "[2001:db8::1]:80", &[]));
        assert_eq!(h.source, sa("192.0.2.7:1"));
        // TLVs (ALPN "h2", a NOOP, an authority) are skipped over.
        let tlvs = [
            &[0x01, 0, 2, b'h', b'2'][..],
            &[0x04, 0, 0],
            &[0x02, 0, 11],
            b"example.com",
        ]
        .concat();
        let mut bytes = v2_proxy("192.0.2.7:1", "10.0.0.1:2", &tlvs);
        let len = bytes.len();
        bytes.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let h = complete(&bytes);
        assert_eq!((h.source, h.len), (sa("192.0.2.7:1"), len));
        // LOCAL: the sender's own connection (health check); addresses ignored.
        let h = complete(&v2(0, 0x00, &[], &[]));
        assert_eq!((h.source, h.len), (None, 16));
        let (_, a) = addresses(
            "192.0.2.7:1".parse().unwrap(),
            "10.0.0.1:2".parse().unwrap(),
        );
        assert_eq!(complete(&v2(0, 0x11, &a, &[])).source, None);
        // UNSPEC family under PROXY, and UNIX addresses: no address to use.
        assert_eq!(complete(&v2(1, 0x00, &[1, 2, 3], &[])).source, None);
        assert_eq!(complete(&v2(1, 0x31, &[0; 216], &[])).source, None);
        // The same addresses over UDP are still the client's.
        assert_eq!(complete(&v2(1, 0x12, &a, &[])).source, sa("192.0.2.7:1"));
    }

    #[test]
    fn version_2_errors() {
        let (_, a) = addresses(
            "192.0.2.7:1".parse().unwrap(),
            "10.0.0.1:2".parse().unwrap(),
        );
        let mut bad_version = v2(1, 0x11, &a, &[]);
        bad_version[12] = 0x11;
        let mut bad_command = v2(1, 0x11, &a, &[]);
        bad_command[12] = 0x22;
        for (what, bytes) in [
            ("version 1 in a binary header", bad_version),
            ("command 2", bad_command),
            ("family 4", v2(1, 0x41, &a, &[])),
            ("transport 3", v2(1, 0x13, &a, &[])),
            ("addresses cut short", v2(1, 0x11, &a[..8], &[])),
            ("IPv6 family with IPv4 addresses", v2(1, 0x21, &a, &[])),
            (
                "a TLV longer than the header",
                v2(1, 0x11, &a, &[0x04, 0, 9, 1]),
            ),
            ("a byte after the TLVs", v2(1, 0x11, &a, &[0x04, 0, 0, 7])),
        ] {
            assert!(
                matches!(parse(&bytes), Err(ProxyHeaderError::Invalid(_))),
                "{what}: {:?}",
                parse(&bytes)
            );
        }
        let mut bad_signature = v2(1, 0x11, &a, &[]);
        bad_signature[8] = b'q';
        assert!(matches!(
            parse(&bad_signature),
            Err(ProxyHeaderError::Missing)
        ));
        // Over 4 KiB: refused from its fixed part, before the rest is read.
        let huge = v2(1, 0x11, &a, &vec![0u8; MAX_V2_LEN]);
        assert!(matches!(
            parse(&huge[..16]),
            Err(ProxyHeaderError::TooLong(MAX_V2_LEN))
        ));
        let tlv_len = MAX_V2_LEN - 16 - 12 - 3;
        let mut tlv = vec![0x04];
        tlv.extend_from_slice(&u16::try_from(tlv_len).unwrap().to_be_bytes());
        tlv.resize(3 + tlv_len, 0);
        let biggest = v2(1, 0x11, &a, &tlv);
        assert_eq!(biggest.len(), MAX_V2_LEN);
        assert_eq!(complete(&biggest).len, MAX_V2_LEN);
    }

    /// A connected pair of loopback sockets: (client, server side).
    async fn pair() -> (TcpStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (server, _) = l.accept().await.unwrap();
        (client, server)
    }

    /// Sends `pieces` one write at a time (a short pause between them, so that
    /// they usually arrive apart), then reads the header on the server side and returns it with
    /// the bytes left in the socket.
    async fn read_after(pieces: Vec<Vec<u8>>) -> (Result<ProxyHeader, ProxyHeaderError>, Vec<u8>) {
        use tokio::io::AsyncWriteExt as _;
        let (mut client, mut server) = pair().await;
        let writer = tokio::spawn(async move {
            for p in pieces {
                client.write_all(&p).await.unwrap();
                client.flush().await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            client.shutdown().await.unwrap();
            client
        });
        let header = read_header(&mut server).await;
        let _client = writer.await.unwrap();
        let mut rest = Vec::new();
        if header.is_ok() {
            server.read_to_end(&mut rest).await.unwrap();
        }
        (header, rest)
    }

    #[tokio::test]
    async fn reads_exactly_the_header() {
        let v1 = b"PROXY TCP4 192.0.2.7 10.0.0.1 56324 443\r\n".to_vec();
        let v2h = v2_proxy(
            "[2001:db8::7]:4711",
            "[2001:db8::1]:80",
            &[0x04, 0, 2, 0, 0],
        );
        let big_tlv = {
            let mut t = vec![0x04, 0x03, 0x00];
            t.resize(3 + 0x300, 7);
            v2_proxy("192.0.2.7:9", "10.0.0.1:2", &t)
        };
        let next = b"\x16\x03\x01\x00\x05hello GET / HTTP/1.1\r\n\r\n".to_vec();
        for header in [v1, v2h, big_tlv] {
            let whole = [header.clone(), next.clone()].concat();
            // In one piece, with the next protocol's bytes right behind it.
            let (h, rest) = read_after(vec![whole.clone()]).await;
            assert_eq!(h.unwrap().len, header.len());
            assert_eq!(rest, next);
            // The first 40 bytes one at a time, then the rest.
            let mut pieces: Vec<Vec<u8>> = whole[..40].iter().map(|b| vec![*b]).collect();
            pieces.push(whole[40..].to_vec());
            let (h, rest) = read_after(pieces).await;
            assert_eq!(h.unwrap().len, header.len());
            assert_eq!(rest, next);
            // Cut in the middle of the fixed part, and just after the header.
            let (h, rest) = read_after(vec![
                whole[..7].to_vec(),
                whole[7..header.len()].to_vec(),
                whole[header.len()..].to_vec(),
            ])
            .await;
            assert_eq!(h.unwrap().len, header.len());
            assert_eq!(rest, next);
        }
    }

    #[tokio::test]
    async fn refuses_bad_and_short_headers() {
        let (h, _) = read_after(vec![b"GET / HTTP/1.1\r\nHost: a\r\n\r\n".to_vec()]).await;
        assert!(matches!(h, Err(ProxyHeaderError::Missing)), "{h:?}");
        let (h, _) = read_after(vec![b"PROXY TCP4 192.0.2.7".to_vec()]).await;
        assert!(matches!(h, Err(ProxyHeaderError::Truncated)), "{h:?}");
        let v2h = v2_proxy("192.0.2.7:1", "10.0.0.1:2", &[]);
        let (h, _) = read_after(vec![v2h[..20].to_vec()]).await;
        assert!(matches!(h, Err(ProxyHeaderError::Truncated)), "{h:?}");
        let (h, _) = read_after(vec![]).await;
        assert!(matches!(h, Err(ProxyHeaderError::Truncated)), "{h:?}");
        let (h, _) = read_after(vec![vec![b'P'; 200]]).await;
        assert!(matches!(h, Err(ProxyHeaderError::Missing)), "{h:?}");
        let long = [b"PROXY TCP4 ".as_slice(), &[b'1'; 150]].concat();
        let (h, _) = read_after(vec![long[..50].to_vec(), long[50..].to_vec()]).await;
        assert!(matches!(h, Err(ProxyHeaderError::TooLong(_))), "{h:?}");
        let huge = v2(1, 0x11, &[0; 12], &vec![0u8; 5000]);
        let (h, _) = read_after(vec![huge]).await;
        assert!(matches!(h, Err(ProxyHeaderError::TooLong(_))), "{h:?}");
    }
}
