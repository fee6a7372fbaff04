//! The hop-by-hop policy (RFC 9110 §7.6.1): the headers that describe one
//! connection, not the message, and are never passed on, and the names a
//! `Connection` header may (and may not) make hop-by-hop.

use http::HeaderMap;
use http::header::{self, HeaderName};

/// Removes hop-by-hop headers (RFC 9110 §7.6.1): the fixed list and every header
/// the Connection header names.
pub fn strip_hop_by_hop(h: &mut HeaderMap) {
    // Most responses carry none: one pass over the names answers that, where a
    // removal per listed name would hash each of them.
    if !h.keys().any(|k| HOP_BY_HOP.contains(&k.as_str())) {
        return;
    }
    let named: Vec<HeaderName> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .filter(|n| !NEVER_HOP_BY_HOP.contains(&n.as_str()))
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in HOP_BY_HOP {
        h.remove(*n);
    }
}

/// Headers that `Connection` cannot make hop-by-hop: they describe the message
/// itself (its target host and framing), so dropping them because a client or
/// server listed them would make the upstream read a different request from the
/// one the rules inspected (with `Connection: host`, the upstream's own address as
/// Host), or a different response from the one the client is sent.
pub const NEVER_HOP_BY_HOP: &[&str] = &["host", "content-length", "transfer-encoding"];

/// The headers that are always hop-by-hop.
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The names the `Connection` lines among `lines` list, each a borrowed token, other
/// than those it cannot make hop-by-hop ([`NEVER_HOP_BY_HOP`]).
pub fn connection_named(lines: &[(bytes::Bytes, bytes::Bytes)]) -> Vec<&[u8]> {
    let mut named: Vec<&[u8]> = Vec::new();
    for (n, v) in lines {
        if n.eq_ignore_ascii_case(b"connection") {
            for t in v.split(|&b| b == b',') {
                let t = t.trim_ascii();
                if !t.is_empty()
                    && !NEVER_HOP_BY_HOP
                        .iter()
                        .any(|p| p.as_bytes().eq_ignore_ascii_case(t))
                {
                    named.push(t);
                }
            }
        }
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn response_hop_by_hop_headers_are_removed() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("close, x-drop"));
        h.insert("x-drop", HeaderValue::from_static("1"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("content-type", HeaderValue::from_static("text/html"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("content-type"));
    }
}
