//! The addresses a forwarding header lists, and the walk that finds the client
//! among them.
//!
//! Three syntaxes name the hops a request went through:
//! - `X-Forwarded-For: client, proxy1, proxy2` (and `X-Real-IP: client`, and any
//!   other header configured as a list): comma-separated nodes;
//! - RFC 7239 `Forwarded: for=client;proto=https, for="[2001:db8::1]:4711"`: one
//!   element per hop, whose `for` parameter is the node.
//!
//! A node is `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`, `[2001:db8::1]` or
//! `[2001:db8::1]:80` (RFC 7239 also allows an obfuscated port, `_abc`, read as
//! port 0). Anything else (`unknown`, an obfuscated identifier, a name, an empty
//! entry) is not an address.
//!
//! The walk ([`walk`]) reads the nodes right to left, as nginx's
//! `real_ip_recursive on` does: each hop appends the address of the peer it
//! received the request from, so the rightmost entries were written by the proxies
//! nearest to Palisade, and the first address that is not a trusted proxy is the
//! client. Entries further left were written by that client or on its behalf and are
//! never believed.

use smallvec::SmallVec;
use std::net::{IpAddr, SocketAddr};

/// How a forwarding header lists its addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// Comma-separated nodes: `X-Forwarded-For`, `X-Real-IP` and any other
    /// header configured by name.
    List,
    /// RFC 7239 `Forwarded`: comma-separated elements, each with a `for=` node.
    Forwarded,
}

/// The node `text` names, if it is an IP address with an optional port: `1.2.3.4`,
/// `1.2.3.4:80`, `::1`, `[::1]`, `[::1]:80`; an obfuscated port (`_x`) reads as 0.
/// IPv4-mapped IPv6 addresses are returned as IPv4.
pub fn parse_node(text: &[u8]) -> Option<SocketAddr> {
    let text = text.trim_ascii();
    // IPv4 with an optional port, the common case, read from the bytes.
    if let Some((ip, rest)) = parse_v4(text) {
        let port = match rest {
            [] => 0,
            [b':', port @ ..] => parse_port(port)?,
            _ => return None,
        };
        return Some(SocketAddr::new(IpAddr::V4(ip), port));
    }
    let text = std::str::from_utf8(text).ok()?;
    let (ip, port) = if let Some(rest) = text.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        let ip: IpAddr = ip.parse().ok()?;
        if !ip.is_ipv6() {
            return None;
        }
        let port = match after {
            "" => 0,
            p => parse_port(p.strip_prefix(':')?.as_bytes())?,
        };
        (ip, port)
    } else if let Ok(ip) = text.parse::<IpAddr>() {
        (ip, 0)
    } else {
        // IPv4 with a port; IPv6 with a port must be bracketed.
        let (ip, port) = text.rsplit_once(':')?;
        let ip: std::net::Ipv4Addr = ip.parse().ok()?;
        (IpAddr::V4(ip), parse_port(port.as_bytes())?)
    };
    Some(SocketAddr::new(ip.to_canonical(), port))
}

/// An IPv4 address at the start of `b`, as the standard library reads one (four
/// decimal octets of at most 3 digits, no leading zero, each at most 255), without
/// making a `str`; with the bytes after it (from the first byte that is neither a
/// digit nor a dot).
fn parse_v4(b: &[u8]) -> Option<(std::net::Ipv4Addr, &[u8])> {
    let mut octets = [0u8; 4];
    let mut at = 0;
    let mut value: u16 = 0;
    let mut digits = 0;
    let mut end = b.len();
    for (i, &c) in b.iter().enumerate() {
        if c.is_ascii_digit() {
            if digits > 0 && value == 0 {
                return None;
            }
            value = value * 10 + u16::from(c - b'0');
            digits += 1;
            if value > 255 {
                return None;
            }
        } else if c == b'.' {
            if digits == 0 || at == 3 {
                return None;
            }
            octets[at] = value as u8;
            at += 1;
            value = 0;
            digits = 0;
        } else {
            end = i;
            break;
        }
    }
    if digits == 0 || at != 3 {
        return None;
    }
    octets[3] = value as u8;
    Some((std::net::Ipv4Addr::from(octets), &b[end..]))
}

/// A port: 1 to 5 digits within `u16`, or an RFC 7239 obfuscated port (`_` and
/// token characters), which reads as 0.
fn parse_port(p: &[u8]) -> Option<u16> {
    if let Some(obf) = p.strip_prefix(b"_") {
        let ok = !obf.is_empty()
            && obf
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
        return ok.then_some(0);
    }
    if p.is_empty() || p.len() > 5 {
        return None;
    }
    let mut n: u32 = 0;
    for &b in p {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u32::from(b - b'0');
    }
    u16::try_from(n).ok()
}

/// Splits `value` at the commas that are not inside a quoted string (RFC 9110
/// §5.6.4, with backslash escapes), calling `each` with every element in order.
fn split_elements<'a>(value: &'a [u8], mut each: impl FnMut(&'a [u8])) {
    let mut start = 0;
    let mut quoted = false;
    let mut escaped = false;
    for (i, &b) in value.iter().enumerate() {
        if escaped {
            escaped = false;
        } else if quoted && b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            quoted = !quoted;
        } else if b == b',' && !quoted {
            each(&value[start..i]);
            start = i + 1;
        }
    }
    each(&value[start..]);
}

/// The node of an RFC 7239 element's `for` parameter (`for=1.2.3.4`,
/// `For="[::1]:80"`), if it has one that is an address.
fn forwarded_for(element: &[u8]) -> Option<SocketAddr> {
    // Pairs are separated by ';' outside quoted strings; a quoted string is the
    // only place a ';' or '=' may appear inside a value.
    let mut rest = element;
    while !rest.is_empty() {
        let pair_end = pair_end(rest);
        let pair = &rest[..pair_end];
        rest = rest.get(pair_end + 1..).unwrap_or_default();
        let Some(eq) = memchr::memchr(b'=', pair) else {
            continue;
        };
        if !pair[..eq].trim_ascii().eq_ignore_ascii_case(b"for") {
            continue;
        }
        let value = pair[eq + 1..].trim_ascii();
        return match value.strip_prefix(b"\"") {
            Some(q) => {
                let inner = q.strip_suffix(b"\"")?;
                if inner.contains(&b'\\') {
                    let unescaped: Vec<u8> = unescape(inner);
                    parse_node(&unescaped)
                } else {
                    parse_node(inner)
                }
            }
            None => parse_node(value),
        };
    }
    None
}

/// Where the pair starting `s` ends: the first ';' outside a quoted string.
fn pair_end(s: &[u8]) -> usize {
    let mut quoted = false;
    let mut escaped = false;
    for (i, &b) in s.iter().enumerate() {
        if escaped {
            escaped = false;
        } else if quoted && b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            quoted = !quoted;
        } else if b == b';' && !quoted {
            return i;
        }
    }
    s.len()
}

/// A quoted string's content with its backslash escapes removed.
fn unescape(inner: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(inner.len());
    let mut escaped = false;
    for &b in inner {
        if !escaped && b == b'\\' {
            escaped = true;
            continue;
        }
        escaped = false;
        out.push(b);
    }
    out
}

/// The client a forwarding header names, walked right to left from the
/// connection's client `source` (itself a trusted proxy):
///
/// - `values` are the header's lines in the order received, read as one list;
/// - each entry that is a trusted address (`trusted`) is a hop to step over;
/// - the first entry that is not trusted is the client;
/// - when every entry is trusted, the leftmost is the client;
/// - an entry that is not an address stops the walk: the last address read (or
///   `source`, if it was the rightmost entry) is the client;
/// - no entry at all: `source` is the client.
pub fn walk(
    syntax: Syntax,
    values: &[&[u8]],
    source: SocketAddr,
    trusted: impl Fn(IpAddr) -> bool,
) -> SocketAddr {
    let mut last = source;
    for value in values.iter().rev() {
        match syntax {
            Syntax::List => {
                // No quoting in a list of addresses: split from the right.
                for entry in value.rsplit(|&b| b == b',') {
                    match parse_node(entry) {
                        None => return last,
                        Some(a) if !trusted(a.ip()) => return a,
                        Some(a) => last = a,
                    }
                }
            }
            Syntax::Forwarded => {
                let mut elements: SmallVec<[&[u8]; 8]> = SmallVec::new();
                split_elements(value, |e| elements.push(e));
                for element in elements.iter().rev() {
                    match forwarded_for(element) {
                        None => return last,
                        Some(a) if !trusted(a.ip()) => return a,
                        Some(a) => last = a,
                    }
                }
            }
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn trusted(ip: IpAddr) -> bool {
        // 10.0.0.0/8, 127.0.0.1 and ::1, as a test set.
        match ip {
            IpAddr::V4(v4) => v4.octets()[0] == 10 || v4 == std::net::Ipv4Addr::LOCALHOST,
            IpAddr::V6(v6) => v6 == std::net::Ipv6Addr::LOCALHOST,
        }
    }

    const SOURCE: &str = "10.0.0.1:40000";

    fn xff(values: &[&str]) -> SocketAddr {
        let v: Vec<&[u8]> = values.iter().map(|s| s.as_bytes()).collect();
        walk(Syntax::List, &v, sa(SOURCE), trusted)
    }

    fn fwd(values: &[&str]) -> SocketAddr {
        let v: Vec<&[u8]> = values.iter().map(|s| s.as_bytes()).collect();
        walk(Syntax::Forwarded, &v, sa(SOURCE), trusted)
    }

    #[test]
    fn nodes() {
        for (text, want) in [
            ("192.0.2.7", Some("192.0.2.7:0")),
            (" 192.0.2.7 ", Some("192.0.2.7:0")),
            ("192.0.2.7:5678", Some("192.0.2.7:5678")),
            ("2001:db8::1", Some("[2001:db8::1]:0")),
            ("[2001:db8::1]", Some("[2001:db8::1]:0")),
            ("[2001:db8::1]:80", Some("[2001:db8::1]:80")),
            ("[::1]:_hidden", Some("[::1]:0")),
            ("::ffff:192.0.2.7", Some("192.0.2.7:0")),
            ("[::ffff:192.0.2.7]:9", Some("192.0.2.7:9")),
            ("", None),
            ("unknown", None),
            ("_hidden", None),
            ("example.com", None),
            ("192.0.2.7:", None),
            ("192.0.2.7:65536", None),
            ("192.0.2.7:080000", None),
            ("192.0.2.7:+80", None),
            ("[192.0.2.7]:80", None),
            ("[2001:db8::1", None),
            ("[2001:db8::1]80", None),
            ("2001:db8::1:80:x", None),
            ("192.0.2.256", None),
            ("1.2.3.4 5.6.7.8", None),
            ("\u{0}1.2.3.4", None),
        ] {
            assert_eq!(
                parse_node(text.as_bytes()),
                want.map(sa),
                "{text:?} parsed wrongly"
            );
        }
        assert_eq!(parse_node(b"\xff\xfe"), None);
    }

    #[test]
    fn ipv4_reads_as_the_standard_library_reads_it() {
        for text in [
            "0.0.0.0",
            "255.255.255.255",
            "1.2.3.4",
            "01.2.3.4",
            "1.2.3.04",
            "00.0.0.0",
            "256.1.1.1",
            "1.2.3",
            "1.2.3.4.5",
            "1..3.4",
            "1.2.3.",
            ".1.2.3",
            "1.2.3.4a",
            "1234.1.1.1",
            "",
            "1.2.3.-4",
        ] {
            assert_eq!(
                parse_v4(text.as_bytes())
                    .filter(|(_, rest)| rest.is_empty())
                    .map(|(ip, _)| ip),
                text.parse::<std::net::Ipv4Addr>().ok(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn list_walk_takes_the_first_untrusted_from_the_right() {
        // A client behind two trusted proxies.
        assert_eq!(xff(&["192.0.2.7, 10.0.0.2"]), sa("192.0.2.7:0"));
        // A forged leftmost entry is never reached.
        assert_eq!(
            xff(&["203.0.113.66, 192.0.2.7, 10.0.0.2"]),
            sa("192.0.2.7:0")
        );
        // Ports are kept.
        assert_eq!(xff(&["192.0.2.7:5678"]), sa("192.0.2.7:5678"));
        assert_eq!(xff(&["[2001:db8::7]:443, ::1"]), sa("[2001:db8::7]:443"));
        // Several lines read as one list, in order.
        assert_eq!(
            xff(&["203.0.113.66", "192.0.2.7", "10.0.0.2, 127.0.0.1"]),
            sa("192.0.2.7:0")
        );
        assert_eq!(xff(&["192.0.2.7", "10.0.0.2"]), sa("192.0.2.7:0"));
    }

    #[test]
    fn list_walk_edge_cases() {
        // Every entry trusted: the leftmost.
        assert_eq!(xff(&["10.0.0.3, 10.0.0.2"]), sa("10.0.0.3:0"));
        // No entry: the connection's client.
        assert_eq!(xff(&[]), sa(SOURCE));
        // Garbage stops the walk at the last good address.
        assert_eq!(xff(&["192.0.2.7, garbage, 10.0.0.2"]), sa("10.0.0.2:0"));
        assert_eq!(xff(&["192.0.2.7, garbage"]), sa(SOURCE));
        assert_eq!(xff(&["192.0.2.7, "]), sa(SOURCE));
        assert_eq!(xff(&["192.0.2.7,,10.0.0.2"]), sa("10.0.0.2:0"));
        assert_eq!(xff(&[""]), sa(SOURCE));
        assert_eq!(xff(&["unknown, 10.0.0.2"]), sa("10.0.0.2:0"));
        // Garbage left of the client does not matter.
        assert_eq!(xff(&["<script>, 192.0.2.7"]), sa("192.0.2.7:0"));
        // Garbage in a later line stops the walk before the earlier lines.
        assert_eq!(xff(&["192.0.2.7", "nope"]), sa(SOURCE));
    }

    #[test]
    fn forwarded_walk() {
        assert_eq!(
            fwd(&["for=192.0.2.60;proto=http;by=203.0.113.43"]),
            sa("192.0.2.60:0")
        );
        assert_eq!(
            fwd(&[r#"for="[2001:db8:cafe::17]:4711""#]),
            sa("[2001:db8:cafe::17]:4711")
        );
        assert_eq!(
            fwd(&["for=203.0.113.66, For=192.0.2.60, for=10.0.0.2;proto=https"]),
            sa("192.0.2.60:0")
        );
        // Parameters in any order, case-insensitive names, spaces around.
        assert_eq!(
            fwd(&[" proto=https ; FOR = \"192.0.2.60:8080\" ; host=a"]),
            sa("192.0.2.60:8080")
        );
        // A quoted string may hold commas and semicolons: they do not split.
        assert_eq!(
            fwd(&[r#"for=192.0.2.60;ext="a,b;c", for=10.0.0.2"#]),
            sa("192.0.2.60:0")
        );
        assert_eq!(
            fwd(&[r#"for=192.0.2.60, for="10.0.0.9;x", for=10.0.0.2"#]),
            sa("10.0.0.2:0"),
            "a quoted value that is not an address stops the walk"
        );
        // Escapes inside a quoted string.
        assert_eq!(fwd(&[r#"for="\192.0.2.60""#]), sa("192.0.2.60:0"));
        // Elements without `for`, `unknown` and obfuscated nodes stop the walk.
        assert_eq!(fwd(&["for=192.0.2.60, proto=https"]), sa(SOURCE));
        assert_eq!(fwd(&["for=192.0.2.60, for=unknown"]), sa(SOURCE));
        assert_eq!(fwd(&["for=192.0.2.60, for=_gazonk"]), sa(SOURCE));
        assert_eq!(
            fwd(&["for=192.0.2.60", "for=10.0.0.3, for=10.0.0.2"]),
            sa("192.0.2.60:0")
        );
        assert_eq!(fwd(&["for=10.0.0.3, for=10.0.0.2"]), sa("10.0.0.3:0"));
        // An unterminated quote: no address.
        assert_eq!(fwd(&[r#"for="192.0.2.60"#]), sa(SOURCE));
    }
}
