//! Header policy between the client and the upstream: the header lines sent
//! upstream (hop-by-hop lines dropped by [`crate::http::hop`]'s policy, the
//! X-Forwarded-* headers added), and the request target sent upstream.

use crate::http::hop::connection_named;
use crate::http::{HeaderLines, valid_value};
use bytes::Bytes;
use http::{Method, Uri};

use super::IpText;

/// What becomes of a request header line on its way upstream.
#[derive(Debug, PartialEq, Eq)]
enum LineFate {
    /// Sent as it is.
    Keep,
    /// Not sent: hop-by-hop, or Content-Length and Expect (the proxy frames the
    /// buffered body itself).
    Drop,
    /// Joined into the X-Forwarded-For the proxy sends.
    ForwardedFor,
    /// Joined into the X-Forwarded-Proto the proxy sends.
    ForwardedProto,
}

/// The fate of a line by its name: one length test for most names, a
/// comparison only with the names of that length.
fn line_fate(n: &[u8]) -> LineFate {
    let is = |s: &str| n.eq_ignore_ascii_case(s.as_bytes());
    match n.len() {
        2 if is("te") => LineFate::Drop,
        6 if is("expect") => LineFate::Drop,
        7 if is("trailer") || is("upgrade") => LineFate::Drop,
        10 if is("connection") || is("keep-alive") => LineFate::Drop,
        14 if is("content-length") => LineFate::Drop,
        15 if is("x-forwarded-for") => LineFate::ForwardedFor,
        16 if is("proxy-connection") => LineFate::Drop,
        17 if is("transfer-encoding") => LineFate::Drop,
        17 if is("x-forwarded-proto") => LineFate::ForwardedProto,
        _ => LineFate::Keep,
    }
}

/// Builds the headers sent upstream from the client's header lines: hop-by-hop
/// headers, Content-Length and Expect removed (the proxy sets the length of the
/// buffered body), X-Forwarded-For and X-Forwarded-Proto appended. `client` is the
/// connection's client (the PROXY protocol header's source, or the TCP peer), the
/// hop X-Forwarded-For gets; with `keep_chain` false the X-Forwarded-For lines
/// received are dropped and `client` alone is sent (a sender that is not a trusted
/// proxy cannot have its list believed upstream). Fails on a header line that
/// cannot be sent as it is.
pub fn upstream_headers(
    lines: &[(Bytes, Bytes)],
    client: &IpText,
    keep_chain: bool,
    tls: bool,
) -> Result<HeaderLines, &'static str> {
    // The names the Connection lines list (rare): a borrowed token each.
    let named = connection_named(lines);
    let mut out = HeaderLines::with_capacity(lines.len() + 2);
    let mut xff: Option<Vec<u8>> = None;
    let mut xfp: Option<Vec<u8>> = None;
    for (n, v) in lines {
        if !crate::http::wire::is_token(n) {
            return Err("invalid header name");
        }
        let acc = match line_fate(n) {
            LineFate::Drop => continue,
            _ if named.iter().any(|x| n.eq_ignore_ascii_case(x)) => continue,
            LineFate::Keep => None,
            LineFate::ForwardedFor if !keep_chain => continue,
            LineFate::ForwardedFor => Some(&mut xff),
            LineFate::ForwardedProto => Some(&mut xfp),
        };
        if let Some(acc) = acc {
            let acc = acc.get_or_insert_with(Vec::new);
            if !acc.is_empty() {
                acc.extend_from_slice(b", ");
            }
            acc.extend_from_slice(v);
            continue;
        }
        if !valid_value(v) {
            return Err("invalid header value");
        }
        // Shares the client's buffer instead of copying the line.
        out.push(n.clone(), v.clone());
    }
    // Without earlier values, the client's address and the scheme alone: no
    // buffer to build (and a static value for the scheme).
    let scheme: &'static str = if tls { "https" } else { "http" };
    let xff = match xff {
        None => Bytes::copy_from_slice(client.as_bytes()),
        Some(acc) => list_with(acc, client.as_bytes()),
    };
    let xfp = match xfp {
        None => Bytes::from_static(scheme.as_bytes()),
        Some(acc) => list_with(acc, scheme.as_bytes()),
    };
    if !valid_value(&xff) {
        return Err("invalid X-Forwarded-For value");
    }
    if !valid_value(&xfp) {
        return Err("invalid X-Forwarded-Proto value");
    }
    out.push(Bytes::from_static(b"x-forwarded-for"), xff);
    out.push(Bytes::from_static(b"x-forwarded-proto"), xfp);
    Ok(out)
}

/// The comma-separated list `earlier` with `last` appended.
fn list_with(mut earlier: Vec<u8>, last: &[u8]) -> Bytes {
    if !earlier.is_empty() {
        earlier.extend_from_slice(b", ");
    }
    earlier.extend_from_slice(last);
    Bytes::from(earlier)
}

/// [`forward_target`] for a target held in a shared buffer: an origin-form target
/// that can travel as it is shares the buffer instead of being copied.
pub fn forward_target_shared(method: &Method, raw: &Bytes) -> Result<Uri, &'static str> {
    if raw.first() == Some(&b'/')
        && method != Method::CONNECT
        && let Ok(u) = Uri::from_maybe_shared(raw.clone())
    {
        return Ok(u);
    }
    forward_target(method, raw)
}

/// The target to send upstream for a raw request target: origin-form as it is (or
/// with bytes that cannot travel raw percent-encoded), the path of an absolute-form
/// target, `*` for OPTIONS, `host:port` for CONNECT.
pub fn forward_target(method: &Method, raw: &[u8]) -> Result<Uri, &'static str> {
    if method == Method::CONNECT {
        let ok = raw.first() != Some(&b'/')
            && memchr::memrchr(b':', raw).is_some_and(|c| {
                c > 0 && c + 1 < raw.len() && raw[c + 1..].iter().all(u8::is_ascii_digit)
            });
        if !ok {
            return Err("CONNECT target must be host:port");
        }
        return Uri::from_maybe_shared(Bytes::copy_from_slice(raw))
            .map_err(|_| "invalid CONNECT target");
    }
    if raw == b"*" {
        return if method == Method::OPTIONS {
            Ok(Uri::from_static("*"))
        } else {
            Err("'*' target is only valid for OPTIONS")
        };
    }
    let path: &[u8] = if raw.first() == Some(&b'/') {
        raw
    } else {
        // absolute-form: scheme "://" authority path
        let lower = raw
            .get(..8)
            .map(<[u8]>::to_ascii_lowercase)
            .unwrap_or_default();
        let skip = if lower.starts_with(b"http://") {
            7
        } else if lower.starts_with(b"https://") {
            8
        } else {
            return Err("request target is neither a path nor an absolute URI");
        };
        let rest = &raw[skip..];
        match memchr::memchr2(b'/', b'?', rest) {
            Some(p) if rest[p] == b'/' => &rest[p..],
            Some(p) => {
                // "http://host?q": the path is empty.
                return Uri::from_maybe_shared(Bytes::from([b"/", &rest[p..]].concat()))
                    .or_else(|_| {
                        Uri::from_maybe_shared(Bytes::from(percent_encode_odd(
                            &[b"/", &rest[p..]].concat(),
                        )))
                    })
                    .map_err(|_| "invalid request target");
            }
            None => b"/",
        }
    };
    Uri::from_maybe_shared(Bytes::copy_from_slice(path))
        .or_else(|_| Uri::from_maybe_shared(Bytes::from(percent_encode_odd(path))))
        .map_err(|_| "invalid request target")
}

/// Percent-encodes every byte that RFC 3986 does not allow in a URI, leaving the
/// rest (and existing `%XX` escapes) alone.
fn percent_encode_odd(raw: &[u8]) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(raw.len() + 16);
    for &b in raw {
        let ok = b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=%".contains(&b);
        if ok {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::hop::HOP_BY_HOP;
    use crate::http::strip_hop_by_hop;
    use http::{HeaderMap, HeaderValue};

    fn lines(raw: &[(&'static str, &'static str)]) -> Vec<(Bytes, Bytes)> {
        raw.iter()
            .map(|(n, v)| {
                (
                    Bytes::from_static(n.as_bytes()),
                    Bytes::from_static(v.as_bytes()),
                )
            })
            .collect()
    }

    /// The first value named `n`, as text.
    fn val<'a>(h: &'a HeaderLines, n: &str) -> &'a str {
        std::str::from_utf8(h.get(n.as_bytes()).expect(n)).unwrap()
    }

    #[test]
    fn hop_by_hop_headers_are_removed_and_forwarded_for_appended() {
        let l = lines(&[
            ("Host", "example.com"),
            ("Connection", "keep-alive, X-Secret"),
            ("X-Secret", "1"),
            ("Keep-Alive", "300"),
            ("Transfer-Encoding", "chunked"),
            ("Content-Length", "5"),
            ("TE", "trailers"),
            ("Upgrade", "websocket"),
            ("Proxy-Connection", "keep-alive"),
            ("Expect", "100-continue"),
            ("X-Forwarded-For", "10.0.0.1"),
            ("Accept", "a"),
            ("accept", "b"),
        ]);
        let h =
            upstream_headers(&l, &IpText::new("192.168.1.2".parse().unwrap()), true, true).unwrap();
        let names: Vec<String> = h
            .iter()
            .map(|(n, _)| String::from_utf8_lossy(n).to_ascii_lowercase())
            .collect();
        assert_eq!(
            names,
            vec![
                "host",
                "accept",
                "accept",
                "x-forwarded-for",
                "x-forwarded-proto"
            ]
        );
        assert_eq!(val(&h, "host"), "example.com");
        assert_eq!(h.get_all(b"accept").count(), 2);
        assert_eq!(val(&h, "x-forwarded-for"), "10.0.0.1, 192.168.1.2");
        assert_eq!(val(&h, "x-forwarded-proto"), "https");
    }

    #[test]
    fn every_hop_by_hop_name_is_dropped_whatever_its_case() {
        for n in HOP_BY_HOP.iter().chain(&["content-length", "expect"]) {
            assert_eq!(line_fate(n.as_bytes()), LineFate::Drop, "{n}");
            let upper = n.to_ascii_uppercase();
            assert_eq!(line_fate(upper.as_bytes()), LineFate::Drop, "{upper}");
        }
        assert_eq!(line_fate(b"X-Forwarded-For"), LineFate::ForwardedFor);
        assert_eq!(line_fate(b"x-forwarded-proto"), LineFate::ForwardedProto);
        assert_eq!(line_fate(b"accept"), LineFate::Keep);
        assert_eq!(line_fate(b"trailers"), LineFate::Keep);
    }

    #[test]
    fn forwarded_headers_without_earlier_values() {
        let l = lines(&[("Host", "a")]);
        let h = upstream_headers(
            &l,
            &IpText::new("::ffff:10.1.2.3".parse().unwrap()),
            true,
            false,
        )
        .unwrap();
        assert_eq!(val(&h, "x-forwarded-for"), "10.1.2.3");
        assert_eq!(val(&h, "x-forwarded-proto"), "http");
        let l = lines(&[("X-Forwarded-For", ""), ("X-Forwarded-Proto", "https")]);
        let h = upstream_headers(&l, &IpText::new("::1".parse().unwrap()), true, true).unwrap();
        assert_eq!(val(&h, "x-forwarded-for"), "::1");
        assert_eq!(val(&h, "x-forwarded-proto"), "https, https");
    }

    #[test]
    fn forwarded_for_from_a_sender_that_is_not_trusted_is_replaced() {
        let l = lines(&[
            ("Host", "a"),
            ("X-Forwarded-For", "203.0.113.66"),
            ("x-forwarded-for", "bad\u{1}value"),
            ("X-Forwarded-Proto", "https"),
        ]);
        let h =
            upstream_headers(&l, &IpText::new("192.0.2.7".parse().unwrap()), false, false).unwrap();
        assert_eq!(h.get_all(b"x-forwarded-for").count(), 1);
        assert_eq!(val(&h, "x-forwarded-for"), "192.0.2.7");
        // X-Forwarded-Proto is not an address list: kept as before.
        assert_eq!(val(&h, "x-forwarded-proto"), "https, http");
        // Kept (and checked) from a trusted sender.
        assert!(
            upstream_headers(&l, &IpText::new("10.0.0.1".parse().unwrap()), true, false).is_err()
        );
        let h = upstream_headers(
            &l[..2],
            &IpText::new("10.0.0.1".parse().unwrap()),
            true,
            false,
        )
        .unwrap();
        assert_eq!(val(&h, "x-forwarded-for"), "203.0.113.66, 10.0.0.1");
    }

    #[test]
    fn unforwardable_header_lines_are_refused() {
        let l = lines(&[("Bad Name", "x")]);
        assert!(upstream_headers(&l, &IpText::new("::1".parse().unwrap()), true, false).is_err());
        let l = lines(&[("X", "a\rb")]);
        assert!(upstream_headers(&l, &IpText::new("::1".parse().unwrap()), true, false).is_err());
    }

    #[test]
    fn connection_cannot_remove_host_or_framing() {
        let l = lines(&[
            ("Host", "site.example"),
            (
                "Connection",
                "Host, content-length, Transfer-Encoding, X-Drop",
            ),
            ("X-Drop", "1"),
        ]);
        let h = upstream_headers(&l, &IpText::new("::1".parse().unwrap()), true, false).unwrap();
        assert_eq!(val(&h, "host"), "site.example");
        assert!(!h.contains(b"x-drop"));

        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("content-length, host"),
        );
        h.insert("content-length", HeaderValue::from_static("5"));
        h.insert("host", HeaderValue::from_static("a"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h["content-length"], "5");
        assert_eq!(h["host"], "a");
    }

    #[test]
    fn targets() {
        let t = |m: Method, raw: &[u8]| forward_target(&m, raw).map(|u| u.to_string());
        assert_eq!(t(Method::GET, b"/a?b=c").unwrap(), "/a?b=c");
        assert_eq!(
            t(Method::GET, b"/?q=\"<script>\"&x=\xff").unwrap(),
            "/?q=%22%3Cscript%3E%22&x=%FF"
        );
        assert_eq!(t(Method::GET, b"http://example.com/x?y").unwrap(), "/x?y");
        assert_eq!(t(Method::GET, b"http://example.com").unwrap(), "/");
        assert_eq!(t(Method::OPTIONS, b"*").unwrap(), "*");
        assert!(t(Method::GET, b"*").is_err());
        assert_eq!(t(Method::CONNECT, b"1.2.3.4:80").unwrap(), "1.2.3.4:80");
        assert!(t(Method::CONNECT, b"www.coreruleset.org").is_err());
        assert!(t(Method::GET, b"index.html").is_err());
        for raw in [
            &b"/a?b=c"[..],
            b"/?q=\"<x>\"&y=\xff",
            b"http://example.com/x?y",
            b"*",
            b"1.2.3.4:80",
            b"/",
        ] {
            for m in [Method::GET, Method::OPTIONS, Method::CONNECT] {
                let shared = Bytes::copy_from_slice(raw);
                assert_eq!(
                    forward_target_shared(&m, &shared).map(|u| u.to_string()),
                    forward_target(&m, raw).map(|u| u.to_string()),
                    "{m} {raw:?}"
                );
            }
        }
    }
}
