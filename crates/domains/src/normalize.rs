//! Host normalisation: from what a client sends to the one name a list is checked against.
//!
//! A client names the host it wants in several places: the `Host` header, the authority
//! of an absolute URI (`GET http://host/ HTTP/1.1` to a forward proxy), the authority of
//! a `CONNECT`, and the TLS SNI. Each can spell one host many ways, and a filter that
//! compares strings is evaded by any spelling it did not think of. The functions here
//! turn every spelling into one canonical form, or into an error that the caller should
//! refuse (never pass through unchecked):
//!
//! * the port and the IPv6 brackets are removed (`example.com:8080`, `[::1]:443`);
//! * userinfo is removed from a URI authority (`http://allowed.com@blocked.com/` names
//!   `blocked.com`);
//! * percent-encoding is decoded once (`%62locked.com`), and whatever the decoding
//!   produced is validated like the rest: a `%` left over, a `:` or a `/` is an error;
//! * the name goes through UTS 46 (IDNA) processing with the WHATWG URL Standard's
//!   options, as a browser does: upper case is lowered, full-width letters and dots
//!   (`ｅｘａｍｐｌｅ．com`, `example。com`) are mapped, Unicode labels become punycode
//!   A-labels (`bücher.example` → `xn--bcher-kva.example`), and a name that fails
//!   (invalid punycode in an `xn--` label, a disallowed code point, a forbidden ASCII
//!   character such as `@`, `\`, `%`, a space or a control character) is an error;
//! * one trailing dot is removed (`example.com.`); any other empty label (`a..b`,
//!   `.a`, `a..`) is an error;
//! * a name whose last label is a number is an IPv4 address in any form that browsers
//!   and curl accept (`127.1`, `0x7f.0.0.1`, `2130706433`, `0177.0.0.1`), and one that
//!   ends in a number but is not a valid address (`1.2.3.4.5`, `a.1`, `256.1.1.1`) is an
//!   error, as in the URL Standard;
//! * a bracketed IPv6 literal is parsed, and an IPv4-mapped one (`[::ffff:127.0.0.1]`)
//!   becomes its IPv4 address, so that one list entry covers both;
//! * a name over 253 bytes or with a label over 63 bytes is an error (it cannot be
//!   resolved, so refusing it loses nothing).
//!
//! The result is [`Host::Name`] (lower-case ASCII, no trailing dot, no empty label, never
//! ending in a numeric label) or [`Host::Ip`] (an [`IpAddr`], whose `Display` is the
//! canonical text).

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use idna::uts46::{AsciiDenyList, DnsLength, Hyphens, Uts46};

/// The longest name accepted, in bytes, without the trailing dot (RFC 1035).
pub const MAX_NAME_LEN: usize = 253;
/// The longest label accepted, in bytes (RFC 1035).
pub const MAX_LABEL_LEN: usize = 63;

/// A normalised host: a canonical domain name, or an IP literal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// A domain name: lower-case ASCII (Unicode labels as punycode A-labels), no
    /// trailing dot, no empty label, at most 253 bytes; its last label is never numeric.
    Name(String),
    /// An IP literal, in any of its spellings; IPv4-mapped IPv6 addresses are given as
    /// IPv4.
    Ip(IpAddr),
}

impl Host {
    /// The domain name, or `None` for an IP literal.
    pub fn as_name(&self) -> Option<&str> {
        match self {
            Host::Name(n) => Some(n),
            Host::Ip(_) => None,
        }
    }

    /// The IP address, or `None` for a domain name.
    pub fn as_ip(&self) -> Option<IpAddr> {
        match self {
            Host::Name(_) => None,
            Host::Ip(ip) => Some(*ip),
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
        }
    }
}

/// Why a host was refused. Each is a reason to refuse the request, not to let it through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The host is empty (also `:80`, `.`, `[]`).
    #[error("empty host")]
    Empty,
    /// A control character, a space or a byte that is not visible ASCII or UTF-8 text.
    #[error("control character or space in host")]
    ControlOrSpace,
    /// The port is not a number from 0 to 65535, or something follows the host that is
    /// not a port.
    #[error("invalid port")]
    BadPort,
    /// A `%` not followed by two hexadecimal digits.
    #[error("invalid percent-encoding in host")]
    BadPercentEncoding,
    /// A label is empty (`a..b`, `.a`, or two trailing dots).
    #[error("empty label in host name")]
    EmptyLabel,
    /// The name is longer than 253 bytes or has a label longer than 63.
    #[error("host name too long")]
    TooLong,
    /// The name fails UTS 46 (IDNA) processing: invalid punycode, a disallowed code
    /// point, invalid UTF-8, or a forbidden ASCII character such as `@`, `:`, `/`, `%`.
    #[error("host name fails IDNA processing (invalid or forbidden characters)")]
    Idna,
    /// The name ends in a number but is not a valid IPv4 address.
    #[error("invalid IPv4 address")]
    InvalidIpv4,
    /// A bracketed literal that is not a valid IPv6 address (zone ids are refused), or
    /// an IPv6 address without brackets where a port could follow.
    #[error("invalid IPv6 address")]
    InvalidIpv6,
}

/// Normalises a `Host` header value or a `CONNECT` authority: `host`, `host:port`,
/// `[v6]` or `[v6]:port`. The port, if any, is checked and dropped.
pub fn normalize_host(raw: impl AsRef<[u8]>) -> Result<Host, HostError> {
    normalize_host_port(raw).map(|(h, _)| h)
}

/// Like [`normalize_host`], also returning the port if one was given (`host:` gives
/// `None`, as an empty port means the scheme's default).
pub fn normalize_host_port(raw: impl AsRef<[u8]>) -> Result<(Host, Option<u16>), HostError> {
    let raw = raw.as_ref();
    check_visible(raw)?;
    let (host, port, bracketed) = split_port(raw)?;
    let host = if bracketed {
        parse_ipv6(host)?
    } else {
        normalize_decoded(host)?
    };
    Ok((host, port))
}

/// Normalises the authority of an absolute URI (`user:pass@host:port`): the userinfo,
/// up to the last `@`, is dropped, the rest is read as by [`normalize_host`].
pub fn normalize_authority(raw: impl AsRef<[u8]>) -> Result<Host, HostError> {
    let raw = raw.as_ref();
    check_visible(raw)?;
    let after_userinfo = match memchr::memrchr(b'@', raw) {
        Some(at) => &raw[at + 1..],
        None => raw,
    };
    normalize_host(after_userinfo)
}

/// Normalises a bare name with no port: a TLS SNI value or a list entry. A bare IPv6
/// address (no brackets, as an SNI would carry one if a client sent it) is accepted
/// here, and so is a bracketed one.
pub fn normalize_name(raw: impl AsRef<[u8]>) -> Result<Host, HostError> {
    let raw = raw.as_ref();
    check_visible(raw)?;
    if raw.first() == Some(&b'[') {
        return match raw.strip_suffix(b"]") {
            Some(inner) => parse_ipv6(&inner[1..]),
            None => Err(HostError::InvalidIpv6),
        };
    }
    if raw.contains(&b':') {
        return parse_ipv6(raw);
    }
    normalize_decoded(raw)
}

/// Refuses ASCII control characters (including tab, CR, LF, NUL and DEL) and spaces
/// anywhere in the raw value.
fn check_visible(raw: &[u8]) -> Result<(), HostError> {
    if raw.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return Err(HostError::ControlOrSpace);
    }
    Ok(())
}

/// Splits `host[:port]` or `[v6][:port]`; returns the host (without brackets), the port
/// and whether it was bracketed.
fn split_port(raw: &[u8]) -> Result<(&[u8], Option<u16>, bool), HostError> {
    if raw.is_empty() {
        return Err(HostError::Empty);
    }
    let (host, rest, bracketed) = if raw[0] == b'[' {
        let close = memchr::memchr(b']', raw).ok_or(HostError::InvalidIpv6)?;
        (&raw[1..close], &raw[close + 1..], true)
    } else {
        match memchr::memchr(b':', raw) {
            Some(colon) => (&raw[..colon], &raw[colon..], false),
            None => (raw, &raw[raw.len()..], false),
        }
    };
    let port = match rest {
        [] => None,
        [b':', digits @ ..] => parse_port(digits)?,
        _ => return Err(HostError::BadPort),
    };
    if host.is_empty() {
        return Err(HostError::Empty);
    }
    Ok((host, port, bracketed))
}

fn parse_port(digits: &[u8]) -> Result<Option<u16>, HostError> {
    if digits.is_empty() {
        return Ok(None);
    }
    if digits.len() > 5 || !digits.iter().all(u8::is_ascii_digit) {
        // A second colon (a bare IPv6 address) lands here too.
        return Err(HostError::BadPort);
    }
    let n = digits
        .iter()
        .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
    u16::try_from(n).map(Some).map_err(|_| HostError::BadPort)
}

fn parse_ipv6(inner: &[u8]) -> Result<Host, HostError> {
    if inner.is_empty() {
        return Err(HostError::Empty);
    }
    let text = std::str::from_utf8(inner).map_err(|_| HostError::InvalidIpv6)?;
    let ip: Ipv6Addr = text.parse().map_err(|_| HostError::InvalidIpv6)?;
    Ok(Host::Ip(canonical_ip(IpAddr::V6(ip))))
}

/// The canonical form of an address: IPv4-mapped IPv6 (`::ffff:a.b.c.d`) as IPv4.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Percent-decodes once, then runs the domain through UTS 46 and the IPv4 parser.
fn normalize_decoded(host: &[u8]) -> Result<Host, HostError> {
    let decoded = percent_decode(host)?;
    // Decoding may have produced control characters or spaces (`%00`, `%20`).
    check_visible(&decoded)?;
    if let Some(lower) = ascii_fast_path(&decoded) {
        return finish_ascii(lower);
    }
    let ascii = Uts46::new()
        .to_ascii(
            &decoded,
            AsciiDenyList::URL,
            Hyphens::Allow,
            DnsLength::Ignore,
        )
        .map_err(|_| HostError::Idna)?;
    finish_ascii(ascii.into_owned())
}

/// The output of UTS 46 for the common case, without running it: a name of ASCII
/// letters, digits, `-`, `_` and `.` with no `xn--` label maps to itself lower-cased
/// (each of these characters is valid or, for upper case, mapped to lower case, and
/// none is on the URL deny list). Anything else goes through [`Uts46`].
fn ascii_fast_path(name: &[u8]) -> Option<String> {
    if !name
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return None;
    }
    let has_ace = name
        .split(|&b| b == b'.')
        .any(|label| label.len() >= 4 && label[..4].eq_ignore_ascii_case(b"xn--"));
    if has_ace {
        return None;
    }
    let mut out = name.to_vec();
    out.make_ascii_lowercase();
    String::from_utf8(out).ok()
}

/// Takes the output of UTS 46 (lower-case ASCII) to a [`Host`].
fn finish_ascii(mut name: String) -> Result<Host, HostError> {
    if name.ends_with('.') {
        name.pop();
    }
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if ends_in_number(&name) {
        return parse_ipv4(&name)
            .map(|v4| Host::Ip(IpAddr::V4(v4)))
            .ok_or(HostError::InvalidIpv4);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(HostError::TooLong);
    }
    for label in name.as_bytes().split(|&b| b == b'.') {
        if label.is_empty() {
            return Err(HostError::EmptyLabel);
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(HostError::TooLong);
        }
    }
    Ok(Host::Name(name))
}

fn percent_decode(host: &[u8]) -> Result<Cow<'_, [u8]>, HostError> {
    if !host.contains(&b'%') {
        return Ok(Cow::Borrowed(host));
    }
    let mut out = Vec::with_capacity(host.len());
    let mut i = 0;
    while i < host.len() {
        if host[i] == b'%' {
            let hi = host.get(i + 1).and_then(|&b| hex_val(b));
            let lo = host.get(i + 2).and_then(|&b| hex_val(b));
            match (hi, lo) {
                (Some(hi), Some(lo)) => out.push(hi << 4 | lo),
                _ => return Err(HostError::BadPercentEncoding),
            }
            i += 3;
        } else {
            out.push(host[i]);
            i += 1;
        }
    }
    Ok(Cow::Owned(out))
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The URL Standard's "ends in a number": the last label is all decimal digits, or `0x`
/// followed by hexadecimal digits (or nothing).
fn ends_in_number(name: &str) -> bool {
    let last = match name.as_bytes().iter().rposition(|&b| b == b'.') {
        Some(dot) => &name[dot + 1..],
        None => name,
    };
    if !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    match last.strip_prefix("0x").or_else(|| last.strip_prefix("0X")) {
        Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => false,
    }
}

/// One part of an IPv4 address: decimal, `0x` hexadecimal or `0`-prefixed octal, as the
/// URL Standard (and `inet_aton`, which curl follows) reads it.
fn parse_ipv4_number(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) =
        if let Some(h) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (h, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    if digits.is_empty() {
        return Some(0);
    }
    // Leading zeros cannot overflow; anything with more significant digits than fit
    // in 32 bits is invalid anyway.
    let digits = digits.trim_start_matches('0');
    if digits.len() > 32 {
        return None;
    }
    if digits.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(digits, radix).ok()
}

/// The URL Standard's IPv4 parser: one to four parts, the last filling the remaining
/// bytes (`127.1` is 127.0.0.1, `2130706433` is 127.0.0.1).
fn parse_ipv4(name: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut numbers = Vec::with_capacity(4);
    for part in &parts {
        numbers.push(parse_ipv4_number(part)?);
    }
    let (last, init) = numbers.split_last()?;
    if init.iter().any(|&n| n > 255) {
        return None;
    }
    let remaining_bits = 8 * (5 - numbers.len() as u32);
    if *last >= 1u64 << remaining_bits {
        return None;
    }
    let mut addr = *last;
    for (i, &n) in init.iter().enumerate() {
        addr += n << (8 * (3 - i as u32));
    }
    u32::try_from(addr).ok().map(Ipv4Addr::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Host {
        Host::Name(s.to_owned())
    }
    fn v4(a: u8, b: u8, c: u8, d: u8) -> Host {
        Host::Ip(IpAddr::V4(Ipv4Addr::new(a, b, c, d)))
    }

    #[test]
    fn plain_names() {
        assert_eq!(normalize_host("example.com"), Ok(name("example.com")));
        assert_eq!(normalize_host("EXAMPLE.Com"), Ok(name("example.com")));
        assert_eq!(normalize_host("example.com."), Ok(name("example.com")));
        assert_eq!(normalize_host("example.com:8080"), Ok(name("example.com")));
        assert_eq!(normalize_host("Example.COM.:443"), Ok(name("example.com")));
        assert_eq!(normalize_host("example.com:"), Ok(name("example.com")));
        assert_eq!(
            normalize_host_port("example.com:8080"),
            Ok((name("example.com"), Some(8080)))
        );
        assert_eq!(
            normalize_name("under_score.example"),
            Ok(name("under_score.example"))
        );
    }

    #[test]
    fn empty_labels_and_dots() {
        assert_eq!(normalize_host("a..b"), Err(HostError::EmptyLabel));
        assert_eq!(normalize_host(".example.com"), Err(HostError::EmptyLabel));
        assert_eq!(normalize_host("example.com.."), Err(HostError::EmptyLabel));
        assert_eq!(normalize_host("."), Err(HostError::Empty));
        assert_eq!(normalize_host(""), Err(HostError::Empty));
        assert_eq!(normalize_host(":80"), Err(HostError::Empty));
        assert_eq!(normalize_host("[]"), Err(HostError::Empty));
        // Ideographic full stops are dots after UTS 46 mapping.
        assert_eq!(
            normalize_host("example\u{3002}com"),
            Ok(name("example.com"))
        );
        assert_eq!(
            normalize_host("a\u{3002}\u{3002}b"),
            Err(HostError::EmptyLabel)
        );
    }

    #[test]
    fn ports() {
        assert_eq!(normalize_host("example.com:65536"), Err(HostError::BadPort));
        assert_eq!(normalize_host("example.com:80x"), Err(HostError::BadPort));
        assert_eq!(normalize_host("example.com:-1"), Err(HostError::BadPort));
        assert_eq!(normalize_host("example.com:80:80"), Err(HostError::BadPort));
        assert_eq!(normalize_host("[::1]x"), Err(HostError::BadPort));
        assert_eq!(
            normalize_host("[::1]:0443"),
            Ok(Host::Ip("::1".parse().unwrap()))
        );
    }

    #[test]
    fn unicode_and_punycode_agree() {
        let want = name("xn--bcher-kva.example");
        assert_eq!(normalize_host("bücher.example"), Ok(want.clone()));
        assert_eq!(normalize_host("BÜCHER.example"), Ok(want.clone()));
        assert_eq!(normalize_host("xn--bcher-kva.example"), Ok(want.clone()));
        assert_eq!(normalize_host("XN--BCHER-KVA.EXAMPLE."), Ok(want.clone()));
        // Decomposed ü (u + combining diaeresis) is NFC-normalised.
        assert_eq!(normalize_host("bu\u{308}cher.example"), Ok(want.clone()));
        // A soft hyphen is mapped to nothing, as browsers do.
        assert_eq!(normalize_host("b\u{ad}ücher.example"), Ok(want.clone()));
        // Percent-encoded UTF-8.
        assert_eq!(normalize_host("b%C3%BCcher.example"), Ok(want));
        // Full-width ASCII.
        assert_eq!(
            normalize_host("\u{ff45}\u{ff58}ample\u{ff0e}com"),
            Ok(name("example.com"))
        );
    }

    #[test]
    fn idna_failures_are_errors() {
        // Invalid punycode.
        assert_eq!(normalize_host("xn--a.example"), Err(HostError::Idna));
        assert_eq!(normalize_host("xn--zz-.example"), Err(HostError::Idna));
        // Forbidden code points.
        for bad in [
            "a@b.com",
            "a\\b.com",
            "a<b.com",
            "a|b",
            "a^b",
            "%25.com",
            "a%2fb.com",
        ] {
            assert!(normalize_host(bad).is_err(), "{bad}");
        }
        // Invalid UTF-8 after decoding.
        assert_eq!(normalize_host("a%ff.com"), Err(HostError::Idna));
        assert_eq!(normalize_host(b"a\xff.com"), Err(HostError::Idna));
        // Disallowed code point (U+FFFD).
        assert!(normalize_host("a\u{fffd}.com").is_err());
    }

    #[test]
    fn percent_encoding() {
        assert_eq!(normalize_host("%65xample.com"), Ok(name("example.com")));
        assert_eq!(normalize_host("%45XAMPLE.com"), Ok(name("example.com")));
        assert_eq!(normalize_host("example%2ecom"), Ok(name("example.com")));
        assert_eq!(normalize_host("%31%32%37.0.0.1"), Ok(v4(127, 0, 0, 1)));
        // Decoded once only: the `%` left over is refused, not decoded again.
        assert_eq!(normalize_host("%2565xample.com"), Err(HostError::Idna));
        assert_eq!(
            normalize_host("ex%zzample.com"),
            Err(HostError::BadPercentEncoding)
        );
        assert_eq!(
            normalize_host("example.com%"),
            Err(HostError::BadPercentEncoding)
        );
        // Decoding into a control character, a space, a colon or a bracket.
        assert_eq!(normalize_host("a%00b.com"), Err(HostError::ControlOrSpace));
        assert_eq!(normalize_host("a%20b.com"), Err(HostError::ControlOrSpace));
        assert!(normalize_host("example.com%3a80").is_err());
        assert!(normalize_host("%5b::1%5d").is_err());
    }

    #[test]
    fn control_characters_and_spaces() {
        for bad in [
            "exa mple.com",
            "example.com\t",
            "example.com\r\nX: y",
            "example.com\0",
            "\x7fexample.com",
            " example.com",
        ] {
            assert_eq!(
                normalize_host(bad),
                Err(HostError::ControlOrSpace),
                "{bad:?}"
            );
            assert_eq!(
                normalize_name(bad),
                Err(HostError::ControlOrSpace),
                "{bad:?}"
            );
        }
        // Unicode spaces are refused by UTS 46.
        assert!(normalize_host("exa\u{a0}mple.com").is_err());
        assert!(normalize_host("exa\u{3000}mple.com").is_err());
    }

    #[test]
    fn ipv4_in_every_spelling() {
        let lo = v4(127, 0, 0, 1);
        for s in [
            "127.0.0.1",
            "127.1",
            "127.0.1",
            "0x7f.0.0.1",
            "0X7F.0.0.1",
            "0x7f.1",
            "2130706433",
            "0x7f000001",
            "017700000001",
            "0177.0.0.1",
            "0177.0.0.01",
            "0000177.0.0.1",
            "127.0.0.1.",
            "127.0.0.1:80",
            "%31%32%37.1",
            "\u{ff11}\u{ff12}\u{ff17}.0.0.1",
            "127\u{3002}0.0.1",
            "0x0000007f.1",
        ] {
            assert_eq!(normalize_host(s), Ok(lo.clone()), "{s}");
        }
        // Leading zeros make octal: 0127 is 87.
        assert_eq!(normalize_host("00000127.0.0.1"), Ok(v4(87, 0, 0, 1)));
        assert_eq!(normalize_host("0"), Ok(v4(0, 0, 0, 0)));
        assert_eq!(normalize_host("0x"), Ok(v4(0, 0, 0, 0)));
        assert_eq!(normalize_host("4294967295"), Ok(v4(255, 255, 255, 255)));
        assert_eq!(normalize_host("1.2.3.4"), Ok(v4(1, 2, 3, 4)));
        assert_eq!(normalize_host("10.0.65535"), Ok(v4(10, 0, 255, 255)));
        for bad in [
            "4294967296",
            "256.0.0.1",
            "1.2.3.256",
            "1.2.3.4.5",
            "1.2.65536",
            "a.1",
            "example.123",
            "08.0.0.1",
            "0x1g.1",
            "1..1",
            "99999999999999999999999999999999999999999",
        ] {
            assert!(normalize_host(bad).is_err(), "{bad}");
        }
        // Not ending in a number: a name.
        assert_eq!(normalize_host("1.2.3.com"), Ok(name("1.2.3.com")));
        assert_eq!(normalize_host("0x7f.0.0.1x"), Ok(name("0x7f.0.0.1x")));
    }

    #[test]
    fn ipv6_literals() {
        assert_eq!(
            normalize_host("[::1]"),
            Ok(Host::Ip("::1".parse().unwrap()))
        );
        assert_eq!(
            normalize_host("[0:0:0:0:0:0:0:1]:8443"),
            Ok(Host::Ip("::1".parse().unwrap()))
        );
        assert_eq!(
            normalize_host("[2001:DB8::0:1]"),
            Ok(Host::Ip("2001:db8::1".parse().unwrap()))
        );
        // v4-mapped in both spellings.
        assert_eq!(normalize_host("[::ffff:127.0.0.1]"), Ok(v4(127, 0, 0, 1)));
        assert_eq!(normalize_host("[::FFFF:7f00:1]:80"), Ok(v4(127, 0, 0, 1)));
        assert_eq!(normalize_name("::ffff:127.0.0.1"), Ok(v4(127, 0, 0, 1)));
        assert_eq!(
            normalize_name("[::1]"),
            Ok(Host::Ip("::1".parse().unwrap()))
        );
        // Zone ids, garbage, unbracketed in a Host header.
        assert_eq!(
            normalize_host("[fe80::1%25eth0]"),
            Err(HostError::InvalidIpv6)
        );
        assert_eq!(normalize_host("[::1"), Err(HostError::InvalidIpv6));
        assert_eq!(normalize_host("[example.com]"), Err(HostError::InvalidIpv6));
        assert!(normalize_host("::1").is_err());
        assert!(normalize_name("[::1").is_err());
        assert_eq!(Host::Ip("::1".parse().unwrap()).to_string(), "[::1]");
    }

    #[test]
    fn authority_userinfo() {
        assert_eq!(
            normalize_authority("allowed.com@blocked.com"),
            Ok(name("blocked.com"))
        );
        assert_eq!(
            normalize_authority("u:p@a@BLOCKED.com:80"),
            Ok(name("blocked.com"))
        );
        assert_eq!(
            normalize_authority("user@[::ffff:7f00:1]"),
            Ok(v4(127, 0, 0, 1))
        );
        assert_eq!(normalize_authority("blocked.com"), Ok(name("blocked.com")));
        // In a Host header, '@' is refused.
        assert!(normalize_host("allowed.com@blocked.com").is_err());
    }

    #[test]
    fn ascii_fast_path_agrees_with_uts46() {
        let alphabet = b"aZ09-_.xn";
        let mut x = 7u64;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = 1 + (x >> 59) as usize;
            let mut name: Vec<u8> = (0..len)
                .map(|i| alphabet[((x >> (i * 3 % 56)) % alphabet.len() as u64) as usize])
                .collect();
            if x & 1 == 0 {
                name.splice(0..0, b"xN--".iter().copied());
            }
            let slow = Uts46::new()
                .to_ascii(&name, AsciiDenyList::URL, Hyphens::Allow, DnsLength::Ignore)
                .ok()
                .map(|c| c.into_owned());
            if let Some(fast) = ascii_fast_path(&name) {
                assert_eq!(Some(fast), slow, "{:?}", String::from_utf8_lossy(&name));
            }
        }
    }

    #[test]
    fn lengths() {
        let label = "a".repeat(63);
        assert!(normalize_host(format!("{label}.com")).is_ok());
        assert_eq!(
            normalize_host(format!("a{label}.com")),
            Err(HostError::TooLong)
        );
        let long = vec!["abcdefghi"; 26].join(".");
        assert_eq!(normalize_host(&long), Err(HostError::TooLong));
    }
}
