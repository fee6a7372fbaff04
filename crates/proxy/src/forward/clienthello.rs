//! The server name (SNI) and ALPN protocols of a TLS ClientHello, read from the
//! first bytes a client sends inside a `CONNECT` tunnel, without consuming them.
//!
//! The forward proxy decides on a tunnel by the name the client asks for, then
//! forwards the very same bytes to the server (or hands them to TLS inspection).
//! [`peek_client_hello`] therefore only looks at a byte slice: the caller keeps
//! reading into its buffer while the answer is [`Peek::NeedMore`].
//!
//! What is accepted:
//! - TLS records of content type handshake (22) with a record version `3.x`; the
//!   ClientHello may be split over several records (each at most 2^14 bytes, none
//!   empty), as RFC 8446 section 5.1 allows;
//! - a ClientHello message of at most [`MAX_CLIENT_HELLO`] bytes: a larger one is
//!   [`ClientHelloError::TooLarge`] as soon as its length field is seen, before any
//!   more bytes are awaited;
//! - every length field is checked against the bytes around it: a hostile length
//!   is an error, never a panic or an out-of-bounds read.
//!
//! SSL 2.0 compatible hellos and anything that does not start like a TLS handshake
//! record are [`Peek::NotTls`].

use thiserror::Error;

/// The largest ClientHello handshake message (without record headers) that is
/// parsed: a larger length field is refused at once. Real ClientHellos are a few
/// hundred bytes; post-quantum key shares bring them to about 1.8 KiB.
pub const MAX_CLIENT_HELLO: usize = 16 * 1024;

/// The largest TLS plaintext record fragment (RFC 8446 section 5.1).
const MAX_RECORD: usize = 1 << 14;

/// The TLS record header: type, version, length.
const RECORD_HEADER: usize = 5;

/// Record content type of handshake messages.
const CONTENT_HANDSHAKE: u8 = 22;

/// Handshake message type of a ClientHello.
const HANDSHAKE_CLIENT_HELLO: u8 = 1;

/// Extension numbers read here (IANA TLS ExtensionType values).
const EXT_SERVER_NAME: u16 = 0;
const EXT_ALPN: u16 = 16;
const EXT_SUPPORTED_VERSIONS: u16 = 43;
const EXT_ENCRYPTED_CLIENT_HELLO: u16 = 0xfe0d;

/// The parts of a ClientHello the forward proxy decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// The `host_name` of the server_name extension, in ASCII lower case; `None`
    /// when the client sent no server_name extension (an IP address, say). With
    /// Encrypted Client Hello this is the outer, public name, not the real one
    /// (see [`ClientHello::encrypted_client_hello`]).
    pub sni: Option<String>,
    /// The ALPN protocol names offered, in the client's order (`h2`,
    /// `http/1.1`...); empty without the extension.
    pub alpn: Vec<Vec<u8>>,
    /// The ClientHello's `legacy_version` (0x0303 for TLS 1.2 and 1.3).
    pub legacy_version: u16,
    /// The versions of the supported_versions extension (0x0304 is TLS 1.3),
    /// GREASE values included; empty without the extension.
    pub supported_versions: Vec<u16>,
    /// Whether the encrypted_client_hello extension is present: the real server
    /// name is then encrypted, and a policy may refuse such tunnels.
    pub encrypted_client_hello: bool,
    /// How many bytes at the start of the buffer hold the records that carried
    /// the ClientHello (record headers included).
    pub record_bytes: usize,
}

/// What [`peek_client_hello`] found in the bytes received so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peek {
    /// The bytes so far are a valid beginning of a ClientHello: read more and ask
    /// again with the longer buffer.
    NeedMore,
    /// The bytes do not start a TLS handshake (plain HTTP, SSH, SSL 2.0...).
    NotTls,
    /// A complete ClientHello.
    Hello(ClientHello),
}

/// A buffer that started like TLS but whose ClientHello cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClientHelloError {
    /// The ClientHello's length field is over [`MAX_CLIENT_HELLO`].
    #[error("TLS ClientHello of {len} bytes is over the limit of {max} bytes")]
    TooLarge {
        /// The length the handshake header announced.
        len: usize,
        /// [`MAX_CLIENT_HELLO`].
        max: usize,
    },
    /// A record or field is inconsistent with the TLS syntax.
    #[error("malformed TLS ClientHello: {what} (at byte {offset} of the {within})")]
    Malformed {
        /// What is wrong.
        what: &'static str,
        /// Offset of the faulty field: in the buffer for record fields, otherwise
        /// in the reassembled ClientHello body (after its 4-byte handshake header).
        offset: usize,
        /// `"buffer"` or `"ClientHello message"`: what `offset` counts in.
        within: &'static str,
    },
}

fn record_error(what: &'static str, offset: usize) -> ClientHelloError {
    ClientHelloError::Malformed {
        what,
        offset,
        within: "buffer",
    }
}

/// Looks for a TLS ClientHello at the start of `buf`, without consuming anything.
///
/// Returns [`Peek::NeedMore`] while `buf` is a valid but incomplete beginning,
/// [`Peek::NotTls`] when it does not start a TLS handshake record, and the parsed
/// [`ClientHello`] once the whole message is there (it may span several records).
///
/// # Errors
///
/// [`ClientHelloError::TooLarge`] for a message over [`MAX_CLIENT_HELLO`] and
/// [`ClientHelloError::Malformed`] for a broken record or message.
pub fn peek_client_hello(buf: &[u8]) -> Result<Peek, ClientHelloError> {
    // The first record header decides whether this is TLS at all.
    match buf.first() {
        None => return Ok(Peek::NeedMore),
        Some(&CONTENT_HANDSHAKE) => {}
        Some(_) => return Ok(Peek::NotTls),
    }
    match buf.get(1) {
        None => return Ok(Peek::NeedMore),
        Some(3) => {}
        Some(_) => return Ok(Peek::NotTls),
    }
    match buf.get(2) {
        None => return Ok(Peek::NeedMore),
        // SSL 3.0 to TLS 1.3 record versions.
        Some(0..=4) => {}
        Some(_) => return Ok(Peek::NotTls),
    }

    // Common case: the whole message is in the first record; no copy.
    let mut message: Vec<u8> = Vec::new();
    let mut pos = 0;
    loop {
        if buf.len() < pos + RECORD_HEADER {
            return Ok(Peek::NeedMore);
        }
        if buf[pos] != CONTENT_HANDSHAKE {
            return Err(record_error(
                "a record of another type interrupts the ClientHello",
                pos,
            ));
        }
        if buf[pos + 1] != 3 || buf[pos + 2] > 4 {
            return Err(record_error("unknown record version", pos + 1));
        }
        let len = usize::from(u16::from_be_bytes([buf[pos + 3], buf[pos + 4]]));
        if len == 0 {
            return Err(record_error("empty handshake record", pos + 3));
        }
        if len > MAX_RECORD {
            return Err(record_error("record longer than 2^14 bytes", pos + 3));
        }
        let start = pos + RECORD_HEADER;
        let available = &buf[start..buf.len().min(start + len)];
        let complete_record = available.len() == len;

        // The handshake bytes so far: this record alone, or appended to earlier ones.
        let single = message.is_empty() && pos == 0;
        let so_far: &[u8] = if single {
            available
        } else {
            message.extend_from_slice(available);
            &message
        };
        if so_far.len() >= 4 {
            if so_far[0] != HANDSHAKE_CLIENT_HELLO {
                return Err(ClientHelloError::Malformed {
                    what: "first handshake message is not a ClientHello",
                    offset: 0,
                    within: "ClientHello message",
                });
            }
            let hello_len = (usize::from(so_far[1]) << 16)
                | (usize::from(so_far[2]) << 8)
                | usize::from(so_far[3]);
            if hello_len > MAX_CLIENT_HELLO {
                return Err(ClientHelloError::TooLarge {
                    len: hello_len,
                    max: MAX_CLIENT_HELLO,
                });
            }
            if so_far.len() >= 4 + hello_len {
                let mut hello = parse_client_hello(&so_far[4..4 + hello_len])?;
                hello.record_bytes = start + available.len();
                return Ok(Peek::Hello(hello));
            }
        } else if !so_far.is_empty() && so_far[0] != HANDSHAKE_CLIENT_HELLO {
            return Err(ClientHelloError::Malformed {
                what: "first handshake message is not a ClientHello",
                offset: 0,
                within: "ClientHello message",
            });
        }
        if !complete_record {
            return Ok(Peek::NeedMore);
        }
        if single {
            message.extend_from_slice(available);
        }
        pos = start + len;
    }
}

/// A bounds-checked reader over the ClientHello body.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

fn malformed(what: &'static str, offset: usize) -> ClientHelloError {
    ClientHelloError::Malformed {
        what,
        offset,
        within: "ClientHello message",
    }
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8], pos: usize) -> Self {
        Reader { data, pos }
    }

    fn remaining(&self) -> usize {
        self.data.len() - self.pos.min(self.data.len())
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ClientHelloError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.data.len())
            .ok_or_else(|| malformed(what, self.pos))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, ClientHelloError> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, ClientHelloError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A vector with a one-byte length prefix, as a sub-reader keeping offsets.
    fn vec8(&mut self, what: &'static str) -> Result<Reader<'a>, ClientHelloError> {
        let len = usize::from(self.u8(what)?);
        let start = self.pos;
        self.take(len, what)?;
        Ok(Reader::new(&self.data[..start + len], start))
    }

    /// A vector with a two-byte length prefix, as a sub-reader keeping offsets.
    fn vec16(&mut self, what: &'static str) -> Result<Reader<'a>, ClientHelloError> {
        let len = usize::from(self.u16(what)?);
        let start = self.pos;
        self.take(len, what)?;
        Ok(Reader::new(&self.data[..start + len], start))
    }
}

/// Parses the ClientHello body (after the four-byte handshake header).
fn parse_client_hello(body: &[u8]) -> Result<ClientHello, ClientHelloError> {
    let mut r = Reader::new(body, 0);
    let legacy_version = r.u16("legacy_version cut short")?;
    r.take(32, "random cut short")?;
    let session_id = r.vec8("legacy_session_id overruns the message")?;
    if session_id.remaining() > 32 {
        return Err(malformed(
            "legacy_session_id longer than 32 bytes",
            session_id.pos,
        ));
    }
    let suites = r.vec16("cipher_suites overrun the message")?;
    if suites.remaining() < 2 || suites.remaining() % 2 != 0 {
        return Err(malformed("cipher_suites of odd or zero length", suites.pos));
    }
    let compression = r.vec8("legacy_compression_methods overrun the message")?;
    if compression.remaining() == 0 {
        return Err(malformed("no compression method", compression.pos));
    }

    let mut hello = ClientHello {
        sni: None,
        alpn: Vec::new(),
        legacy_version,
        supported_versions: Vec::new(),
        encrypted_client_hello: false,
        record_bytes: 0,
    };
    if r.remaining() == 0 {
        // A ClientHello without extensions (TLS 1.0-1.2 allow it).
        return Ok(hello);
    }
    let mut extensions = r.vec16("extensions overrun the message")?;
    if r.remaining() != 0 {
        return Err(malformed("bytes after the extensions", r.pos));
    }
    let mut seen: Vec<u16> = Vec::new();
    while extensions.remaining() > 0 {
        let kind = extensions.u16("extension type cut short")?;
        let data = extensions.vec16("extension overruns the extension list")?;
        seen.push(kind);
        match kind {
            EXT_SERVER_NAME => hello.sni = parse_server_name(data)?,
            EXT_ALPN => hello.alpn = parse_alpn(data)?,
            EXT_SUPPORTED_VERSIONS => hello.supported_versions = parse_versions(data)?,
            EXT_ENCRYPTED_CLIENT_HELLO => hello.encrypted_client_hello = true,
            _ => {}
        }
    }
    seen.sort_unstable();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(malformed("an extension appears twice", 0));
    }
    Ok(hello)
}

/// RFC 6066 section 3: a list of (name_type, name); the `host_name` (type 0).
fn parse_server_name(mut data: Reader<'_>) -> Result<Option<String>, ClientHelloError> {
    let mut list = data.vec16("server_name_list overruns the extension")?;
    if data.remaining() != 0 {
        return Err(malformed("bytes after server_name_list", data.pos));
    }
    if list.remaining() == 0 {
        return Err(malformed("empty server_name_list", list.pos));
    }
    let mut host = None;
    while list.remaining() > 0 {
        let name_type = list.u8("server name type cut short")?;
        let name = list.vec16("server name overruns the list")?;
        if name_type != 0 {
            continue;
        }
        if host.is_some() {
            return Err(malformed("two host_name entries", name.pos));
        }
        let bytes = &name.data[name.pos..];
        host = Some(host_name(bytes).ok_or_else(|| malformed("invalid host_name", name.pos))?);
    }
    Ok(host)
}

/// A host name as RFC 6066 allows it: ASCII letters, digits, `-`, `.` (and `_`,
/// which real names carry), 1 to 253 bytes without a trailing dot; lower-cased.
fn host_name(bytes: &[u8]) -> Option<String> {
    if bytes.is_empty() || bytes.len() > 253 || bytes.ends_with(b".") || bytes.starts_with(b".") {
        return None;
    }
    if !bytes
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return None;
    }
    if bytes.windows(2).any(|w| w == b"..") {
        return None;
    }
    Some(
        bytes
            .iter()
            .map(|b| char::from(b.to_ascii_lowercase()))
            .collect(),
    )
}

/// RFC 7301: a list of non-empty protocol names, each with a one-byte length.
fn parse_alpn(mut data: Reader<'_>) -> Result<Vec<Vec<u8>>, ClientHelloError> {
    let mut list = data.vec16("ALPN protocol_name_list overruns the extension")?;
    if data.remaining() != 0 {
        return Err(malformed("bytes after the ALPN list", data.pos));
    }
    if list.remaining() == 0 {
        return Err(malformed("empty ALPN list", list.pos));
    }
    let mut protocols = Vec::new();
    while list.remaining() > 0 {
        let name = list.vec8("ALPN protocol name overruns the list")?;
        if name.remaining() == 0 {
            return Err(malformed("empty ALPN protocol name", name.pos));
        }
        protocols.push(name.data[name.pos..].to_vec());
    }
    Ok(protocols)
}

/// RFC 8446 section 4.2.1, the ClientHello form: a one-byte length and versions.
fn parse_versions(mut data: Reader<'_>) -> Result<Vec<u16>, ClientHelloError> {
    let mut list = data.vec8("supported_versions overruns the extension")?;
    if data.remaining() != 0 {
        return Err(malformed("bytes after supported_versions", data.pos));
    }
    if list.remaining() < 2 || list.remaining() % 2 != 0 {
        return Err(malformed(
            "supported_versions of odd or zero length",
            list.pos,
        ));
    }
    let mut versions = Vec::with_capacity(list.remaining() / 2);
    while list.remaining() > 0 {
        versions.push(list.u16("version cut short")?);
    }
    Ok(versions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A ClientHello as rustls writes it, for `server_name` and ALPN `alpn`.
    fn rustls_client_hello(server_name: &str, alpn: &[&[u8]]) -> Vec<u8> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let name =
            rustls::pki_types::ServerName::try_from(server_name.to_owned()).expect("server name");
        let mut conn = rustls::ClientConnection::new(Arc::new(config), name).expect("connection");
        let mut out = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut out).expect("write_tls");
        }
        out
    }

    /// The handshake message of a single-record ClientHello, re-framed into
    /// records of at most `size` bytes.
    fn reframe(hello: &[u8], size: usize) -> Vec<u8> {
        let len = usize::from(u16::from_be_bytes([hello[3], hello[4]]));
        let message = &hello[5..5 + len];
        let mut out = Vec::new();
        for chunk in message.chunks(size) {
            out.extend_from_slice(&[22, 3, 1]);
            out.extend_from_slice(&u16::try_from(chunk.len()).unwrap().to_be_bytes());
            out.extend_from_slice(chunk);
        }
        out
    }

    fn hello_of(buf: &[u8]) -> ClientHello {
        match peek_client_hello(buf) {
            Ok(Peek::Hello(h)) => h,
            other => panic!("expected a ClientHello, got {other:?}"),
        }
    }

    #[test]
    fn reads_sni_and_alpn_from_rustls_hello() {
        let bytes = rustls_client_hello("Example.COM", &[b"h2", b"http/1.1"]);
        let hello = hello_of(&bytes);
        assert_eq!(hello.sni.as_deref(), Some("example.com"));
        assert_eq!(hello.alpn, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert_eq!(hello.legacy_version, 0x0303);
        assert!(hello.supported_versions.contains(&0x0304));
        assert!(!hello.encrypted_client_hello);
        assert_eq!(hello.record_bytes, bytes.len());
    }

    #[test]
    fn ip_address_has_no_sni_and_no_alpn_when_none_offered() {
        let bytes = rustls_client_hello("192.0.2.7", &[]);
        let hello = hello_of(&bytes);
        assert_eq!(hello.sni, None);
        assert!(hello.alpn.is_empty());
    }

    #[test]
    fn trailing_bytes_after_the_hello_are_left_alone() {
        let mut bytes = rustls_client_hello("example.org", &[b"h2"]);
        let len = bytes.len();
        bytes.extend_from_slice(&[23, 3, 3, 0, 2, 9, 9]);
        let hello = hello_of(&bytes);
        assert_eq!(hello.record_bytes, len);
        assert_eq!(hello.sni.as_deref(), Some("example.org"));
    }

    #[test]
    fn hello_split_over_records() {
        let bytes = rustls_client_hello("split.example.net", &[b"h2", b"http/1.1"]);
        for size in [1, 2, 3, 7, 100, 255] {
            let framed = reframe(&bytes, size);
            let hello = hello_of(&framed);
            assert_eq!(
                hello.sni.as_deref(),
                Some("split.example.net"),
                "size {size}"
            );
            assert_eq!(hello.alpn.len(), 2);
            assert_eq!(hello.record_bytes, framed.len());
        }
    }

    #[test]
    fn every_truncation_needs_more() {
        let bytes = rustls_client_hello("truncate.example", &[b"h2"]);
        for framed in [bytes.clone(), reframe(&bytes, 50), reframe(&bytes, 1)] {
            for cut in 0..framed.len() {
                assert_eq!(
                    peek_client_hello(&framed[..cut]),
                    Ok(Peek::NeedMore),
                    "cut at {cut} of {}",
                    framed.len()
                );
            }
            assert!(matches!(peek_client_hello(&framed), Ok(Peek::Hello(_))));
        }
    }

    #[test]
    fn other_protocols_are_not_tls() {
        for bytes in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"SSH-2.0-OpenSSH_9.6\r\n",
            b"\x16\x02\x00",
            b"\x16\x03\x09",
            // An SSL 2.0 compatible ClientHello.
            b"\x80\x2e\x01\x03\x01",
            b"\x17\x03\x03\x00\x10",
        ] {
            assert_eq!(peek_client_hello(bytes), Ok(Peek::NotTls), "{bytes:?}");
        }
        assert_eq!(peek_client_hello(b""), Ok(Peek::NeedMore));
        assert_eq!(peek_client_hello(b"\x16"), Ok(Peek::NeedMore));
        assert_eq!(peek_client_hello(b"\x16\x03"), Ok(Peek::NeedMore));
    }

    #[test]
    fn hostile_lengths_are_errors() {
        // A handshake length of 16 MiB is refused at once.
        let err = peek_client_hello(&[22, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff]).unwrap_err();
        assert!(matches!(
            err,
            ClientHelloError::TooLarge { len: 0xff_ffff, .. }
        ));
        // Just over the limit, and just at it (which needs more).
        let over = u32::try_from(MAX_CLIENT_HELLO + 1).unwrap().to_be_bytes();
        assert!(matches!(
            peek_client_hello(&[22, 3, 1, 0, 4, 1, over[1], over[2], over[3]]),
            Err(ClientHelloError::TooLarge { .. })
        ));
        let at = u32::try_from(MAX_CLIENT_HELLO).unwrap().to_be_bytes();
        assert_eq!(
            peek_client_hello(&[22, 3, 1, 0, 4, 1, at[1], at[2], at[3]]),
            Ok(Peek::NeedMore)
        );
        // A record over 2^14 bytes, an empty record, another handshake type.
        assert!(peek_client_hello(&[22, 3, 1, 0x40, 0x01]).is_err());
        assert!(peek_client_hello(&[22, 3, 1, 0, 0]).is_err());
        assert!(peek_client_hello(&[22, 3, 1, 0, 4, 2, 0, 0, 0]).is_err());
        assert!(peek_client_hello(&[22, 3, 1, 0, 1, 2]).is_err());
        // A record of another type in the middle of the hello.
        let bytes = rustls_client_hello("example.com", &[]);
        let mut framed = reframe(&bytes, 10);
        framed[15] = 23;
        assert!(peek_client_hello(&framed).is_err());
    }

    /// Sets the 16-bit length at `at` of a one-record hello, fixing nothing else.
    fn with_u16(bytes: &[u8], at: usize, value: u16) -> Vec<u8> {
        let mut b = bytes.to_vec();
        b[at..at + 2].copy_from_slice(&value.to_be_bytes());
        b
    }

    /// Offset of the extension `kind`'s type field in a one-record hello.
    fn extension_offset(bytes: &[u8], kind: u16) -> usize {
        let body = 9;
        let mut pos = body + 2 + 32;
        pos += 1 + usize::from(bytes[pos]);
        pos += 2 + usize::from(u16::from_be_bytes([bytes[pos], bytes[pos + 1]]));
        pos += 1 + usize::from(bytes[pos]);
        pos += 2;
        loop {
            let k = u16::from_be_bytes([bytes[pos], bytes[pos + 1]]);
            if k == kind {
                return pos;
            }
            pos += 4 + usize::from(u16::from_be_bytes([bytes[pos + 2], bytes[pos + 3]]));
        }
    }

    #[test]
    fn hostile_inner_lengths_are_errors() {
        let bytes = rustls_client_hello("inner.example", &[b"h2"]);
        let sni = extension_offset(&bytes, EXT_SERVER_NAME);
        // The server name's own length, the list's length, the extension's length.
        for (at, value) in [
            (sni + 7, 0xffff),
            (sni + 7, 0),
            (sni + 4, 0xffff),
            (sni + 4, 1),
            (sni + 2, 0xffff),
            (sni + 2, 0),
        ] {
            let b = with_u16(&bytes, at, value);
            assert!(
                matches!(
                    peek_client_hello(&b),
                    Err(ClientHelloError::Malformed { .. })
                ),
                "length {value} at {at}: {:?}",
                peek_client_hello(&b)
            );
        }
        let alpn = extension_offset(&bytes, EXT_ALPN);
        let mut b = bytes.clone();
        b[alpn + 6] = 0;
        assert!(peek_client_hello(&b).is_err(), "empty ALPN name");
        b[alpn + 6] = 200;
        assert!(peek_client_hello(&b).is_err(), "ALPN name past the list");
        // A host_name with a byte outside the host name alphabet.
        let mut b = bytes.clone();
        b[sni + 9] = b'/';
        assert!(peek_client_hello(&b).is_err());
    }

    /// A one-record hello with the extension `kind` and `data` appended, every
    /// enclosing length fixed.
    fn with_extension(bytes: &[u8], kind: u16, data: &[u8]) -> Vec<u8> {
        let mut b = bytes.to_vec();
        b.extend_from_slice(&kind.to_be_bytes());
        b.extend_from_slice(&u16::try_from(data.len()).unwrap().to_be_bytes());
        b.extend_from_slice(data);
        let added = 4 + data.len();
        let grow16 = |b: &mut Vec<u8>, at: usize| {
            let v = u16::from_be_bytes([b[at], b[at + 1]]) + u16::try_from(added).unwrap();
            b[at..at + 2].copy_from_slice(&v.to_be_bytes());
        };
        grow16(&mut b, 3);
        let hs = u32::from_be_bytes([0, b[6], b[7], b[8]]) + u32::try_from(added).unwrap();
        b[6..9].copy_from_slice(&hs.to_be_bytes()[1..]);
        // The extensions' length: after version, random, session id, suites and
        // compression methods.
        let mut pos = 9 + 2 + 32;
        pos += 1 + usize::from(b[pos]);
        pos += 2 + usize::from(u16::from_be_bytes([b[pos], b[pos + 1]]));
        pos += 1 + usize::from(b[pos]);
        grow16(&mut b, pos);
        b
    }

    #[test]
    fn encrypted_client_hello_and_duplicate_extensions() {
        let bytes = rustls_client_hello("public.example", &[]);
        let ech = with_extension(&bytes, EXT_ENCRYPTED_CLIENT_HELLO, &[0, 0, 1, 0, 1, 7]);
        let hello = hello_of(&ech);
        assert!(hello.encrypted_client_hello);
        assert_eq!(hello.sni.as_deref(), Some("public.example"));
        // An unknown extension is skipped; the same one twice is refused.
        let unknown = with_extension(&bytes, 0x7777, b"x");
        assert!(!hello_of(&unknown).encrypted_client_hello);
        let twice = with_extension(&unknown, 0x7777, b"");
        assert!(matches!(
            peek_client_hello(&twice),
            Err(ClientHelloError::Malformed {
                what: "an extension appears twice",
                ..
            })
        ));
    }

    /// xorshift64*: deterministic bytes for the fuzz-style tests.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            usize::try_from(self.next() % u64::try_from(n).unwrap()).unwrap()
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let len = rng.below(600);
            let mut buf: Vec<u8> = (0..len).map(|_| rng.next().to_le_bytes()[0]).collect();
            // Half of them look like a handshake record, so the parser gets past
            // the first bytes.
            if len >= 6 && rng.next() & 1 == 0 {
                buf[..3].copy_from_slice(&[22, 3, 1]);
                buf[5] = 1;
            }
            let _ = peek_client_hello(&buf);
        }
    }

    #[test]
    fn mutated_real_hellos_never_panic() {
        let bytes = rustls_client_hello("mutate.example.com", &[b"h2", b"http/1.1"]);
        let framed = reframe(&bytes, 64);
        let mut rng = Rng(42);
        for round in 0..20_000 {
            let base = if round & 1 == 0 { &bytes } else { &framed };
            let mut b = base.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(b.len());
                b[at] = rng.next().to_le_bytes()[0];
            }
            let cut = rng.below(b.len() + 1);
            let _ = peek_client_hello(&b[..cut]);
            let _ = peek_client_hello(&b);
        }
    }
}
