//! The client's address from what a load balancer sends (`proxy::client_address`).
//!
//! The first byte chooses the part:
//! - even: `proxy_protocol::parse` on the rest, a PROXY protocol header (v1 or v2)
//!   and what follows it. The answer must not depend on the bytes after a complete
//!   header (the reader takes exactly the header off the socket); every prefix of a
//!   complete header is incomplete (so the reader waits for more rather than
//!   refusing a header that arrives in pieces), and an incomplete one never says a
//!   length it exceeds or one over the bounds; once a prefix is refused, every
//!   longer one is too.
//! - odd: the forwarding-header walk (`ClientAddress::client_of`) over header lines
//!   taken from the rest (one per `\n`), for X-Forwarded-For and for `Forwarded`,
//!   from a trusted and from an untrusted source. An untrusted source is always the
//!   client; the client found is the source or an address in the lines, never an
//!   IPv4-mapped IPv6 address; and X-Forwarded-For lines read as one list give the
//!   same client as those lines joined with commas.

use crate::input::Input;
use proxy::client_address::proxy_protocol::{MAX_V1_LEN, MAX_V2_LEN, Parsed, parse};
use proxy::client_address::{ClientAddress, SourceTrust};
use proxy::config::ClientAddressSection;
use std::net::SocketAddr;

/// The body of the `client_address` target.
pub fn fuzz_client_address(data: &[u8]) {
    let mut input = Input::new(data);
    if input.byte().is_multiple_of(2) {
        proxy_header(input.rest());
    } else {
        walk(input.rest());
    }
}

fn proxy_header(data: &[u8]) {
    let whole = parse(data);
    if let Ok(Parsed::Complete(h)) = &whole {
        assert!(h.len <= data.len(), "a header longer than its input");
        let bound = if h.version == 1 {
            MAX_V1_LEN
        } else {
            MAX_V2_LEN
        };
        assert!(h.len <= bound, "a header over its bound");
        assert!(matches!(h.version, 1 | 2));
        assert_eq!(
            parse(&data[..h.len]).ok(),
            Some(Parsed::Complete(*h)),
            "the bytes after the header changed it"
        );
        if let Some(s) = h.source {
            assert!(
                !matches!(s.ip(), std::net::IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some()),
                "an IPv4-mapped source"
            );
        }
    }
    let complete_at = match &whole {
        Ok(Parsed::Complete(h)) => Some(h.len),
        _ => None,
    };
    let mut refused = false;
    for k in 0..data.len() {
        let prefix = &data[..k];
        match parse(prefix) {
            Ok(Parsed::Incomplete { total }) => {
                assert!(!refused, "a longer prefix of a refused header was accepted");
                if let Some(t) = total {
                    assert!(t > k && t <= MAX_V2_LEN, "incomplete with total {t} at {k}");
                    if let Some(len) = complete_at {
                        assert_eq!(t, len, "the announced length is not the header's");
                    }
                }
            }
            Ok(Parsed::Complete(h)) => {
                assert!(!refused, "a longer prefix of a refused header was accepted");
                // The first complete prefix is the header: the whole input holds it.
                assert_eq!(complete_at, Some(h.len), "complete at {k} but not whole");
                assert_eq!(h.len, k, "complete before its own end");
                break;
            }
            Err(_) => {
                assert!(
                    complete_at.is_none_or(|len| k > len),
                    "a prefix of a complete header was refused"
                );
                refused = true;
            }
        }
    }
    if refused {
        assert!(whole.is_err(), "refused prefix, accepted whole");
    }
}

fn walk(data: &[u8]) {
    let section = |header: &str| ClientAddressSection {
        trusted_proxies: vec!["10.0.0.0/8".into(), "127.0.0.1".into(), "::1".into()],
        header: Some(header.into()),
    };
    let xff = ClientAddress::new(&section("X-Forwarded-For")).expect("a valid section");
    let fwd = ClientAddress::new(&section("Forwarded")).expect("a valid section");
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let source: SocketAddr = "10.0.0.1:4000".parse().unwrap();
    for (ca, name) in [(&xff, &b"x-forwarded-for"[..]), (&fwd, b"Forwarded")] {
        let headers = || lines.iter().map(|v| (name, *v));
        let client = ca.client_of(source, SourceTrust::Trusted, headers());
        assert!(
            !matches!(client.ip(), std::net::IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some()),
            "an IPv4-mapped client"
        );
        if client != source {
            // The client's address is written in the lines (in some form).
            assert!(
                client.port() == 0 || contains(data, client.port().to_string().as_bytes()),
                "port {} appears nowhere",
                client.port()
            );
        }
        let untrusted: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        assert_eq!(
            ca.client_of(untrusted, SourceTrust::Untrusted, headers()),
            untrusted,
            "an untrusted source's header was read"
        );
        // Other header names are not read.
        let other = lines.iter().map(|v| (&b"x-other"[..], *v));
        assert_eq!(ca.client_of(source, SourceTrust::Trusted, other), source);
    }
    let joined = lines.join(&b","[..]);
    let one = [(&b"X-Forwarded-For"[..], joined.as_slice())];
    let many = lines.iter().map(|v| (&b"x-forwarded-for"[..], *v));
    assert_eq!(
        xff.client_of(source, SourceTrust::Trusted, one.iter().copied()),
        xff.client_of(source, SourceTrust::Trusted, many),
        "lines read as one list differ from the lines joined"
    );
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
