//! The client's real address behind load balancers and proxies
//! (`[client_address]`, and `proxy_protocol` on a listener).
//!
//! Without `client_address.trusted_proxies` the TCP peer is the client, as it
//! always was. With it, the client is found in two steps:
//!
//! 1. **Per connection** ([`proxy_protocol`]): on a listener with
//!    `proxy_protocol = true`, a peer in the trusted set sends a PROXY protocol
//!    header first, and its source address replaces the peer (a connection from
//!    any other peer is closed before anything is read). This is the connection's
//!    *source*; `limits.connections_per_ip` and the connection-time `[access]`
//!    verdict use it.
//! 2. **Per request** ([`forwarded`]): when the source is itself a trusted proxy and
//!    `client_address.header` names a header, that header's addresses are walked
//!    right to left past the trusted ones; the first other address is the client.
//!
//! A client outside the trusted set therefore cannot choose its own address: its
//! PROXY header is refused with its connection, and its forwarding headers are
//! never read. Every client-keyed feature (REMOTE_ADDR and what rules build on it,
//! rate limits, shaping, `[access]`, `/top`, `@rbl`, the logs) uses the result;
//! the TCP peer stays available as `PEER_ADDR`/`PEER_PORT` and in the logs.

pub mod forwarded;
pub mod proxy_protocol;

use crate::config::ClientAddressSection;
use engine::{IpSet, IpSetBuilder};
pub use forwarded::Syntax;
use std::net::{IpAddr, SocketAddr};

/// Why `[client_address]` cannot be used; each names its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientAddressError {
    /// An entry of `trusted_proxies` is not an address or a network.
    #[error("client_address.trusted_proxies[{index}] {entry:?}: {reason}")]
    TrustedProxy {
        /// Its position in the list, from 0.
        index: usize,
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `header` is not a header name.
    #[error(
        "client_address.header {0:?} is not a header name (X-Forwarded-For, Forwarded, X-Real-IP or another)"
    )]
    HeaderName(String),
    /// `header` without `trusted_proxies`: it would never be read.
    #[error(
        "client_address.header is set but client_address.trusted_proxies is empty: the header is read only from the trusted proxies listed there"
    )]
    HeaderWithoutTrust,
}

/// What a connection's source is to the forwarding header and the X-Forwarded-For
/// sent upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceTrust {
    /// No `trusted_proxies`: the header is never read, and the X-Forwarded-For
    /// received goes upstream with the source appended (Palisade's behaviour
    /// without `[client_address]`).
    Unconfigured,
    /// The source is not a trusted proxy: it is the client; the header is not
    /// read, and the X-Forwarded-For received is replaced by the source alone.
    Untrusted,
    /// The source is a trusted proxy: the header is walked for the client, the
    /// X-Forwarded-For received is kept (the source appended), and the `[access]`
    /// lists are asked per request, about the client found.
    Trusted,
}

/// The header that names the client, as configured.
#[derive(Debug, Clone)]
struct ForwardingHeader {
    /// Lower case.
    name: String,
    syntax: Syntax,
}

/// Whether the header name `n` is `lower` (lower case ASCII) whatever the case of
/// `n`: eight bytes at a time, each word of `n` lower-cased by bit operations (the
/// name is compared on every header line of a trusted proxy's requests).
fn same_name(n: &[u8], lower: &[u8]) -> bool {
    if n.len() != lower.len() {
        return false;
    }
    let (mut a, mut b) = (n, lower);
    while let (Some((x, rest_a)), Some((y, rest_b))) =
        (a.split_first_chunk(), b.split_first_chunk())
    {
        if lower_word(u64::from_le_bytes(*x)) != u64::from_le_bytes(*y) {
            return false;
        }
        (a, b) = (rest_a, rest_b);
    }
    a.iter().zip(b).all(|(x, y)| x.to_ascii_lowercase() == *y)
}

/// `x` with every byte from `A` to `Z` made lower case (other bytes unchanged).
fn lower_word(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let seven = x & (ONES * 0x7f);
    // The high bit of each byte: set when the byte is at least 'A', or above 'Z'.
    let at_least_a = seven + ONES * (0x80 - u64::from(b'A'));
    let above_z = seven + ONES * (0x80 - u64::from(b'Z') - 1);
    let upper = at_least_a & !above_z & !x & (ONES * 0x80);
    x | (upper >> 2)
}

/// The trusted proxies and the forwarding header (`[client_address]`), built once
/// at start.
#[derive(Debug, Clone, Default)]
pub struct ClientAddress {
    trusted: IpSet,
    header: Option<ForwardingHeader>,
}

impl ClientAddress {
    /// Builds the set and the header of `section`, or says which key is wrong.
    pub fn new(section: &ClientAddressSection) -> Result<ClientAddress, ClientAddressError> {
        let mut b = IpSetBuilder::default();
        for (index, entry) in section.trusted_proxies.iter().enumerate() {
            b.insert(entry.trim())
                .map_err(|reason| ClientAddressError::TrustedProxy {
                    index,
                    entry: entry.clone(),
                    reason,
                })?;
        }
        let trusted = b.build();
        let header = match &section.header {
            None => None,
            Some(name) => {
                if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    return Err(ClientAddressError::HeaderName(name.clone()));
                }
                if trusted.is_empty() {
                    return Err(ClientAddressError::HeaderWithoutTrust);
                }
                let name = name.to_ascii_lowercase();
                let syntax = if name == "forwarded" {
                    Syntax::Forwarded
                } else {
                    Syntax::List
                };
                Some(ForwardingHeader { name, syntax })
            }
        };
        Ok(ClientAddress { trusted, header })
    }

    /// Whether any proxy is trusted (without one, nothing changes: the TCP peer is
    /// the client).
    pub fn is_configured(&self) -> bool {
        !self.trusted.is_empty()
    }

    /// Whether `ip` is in `trusted_proxies` (IPv4-mapped IPv6 looked up as IPv4).
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.trusted.contains_ip(ip.to_canonical())
    }

    /// What a connection whose source is `ip` may say about its client.
    pub fn trust(&self, ip: IpAddr) -> SourceTrust {
        if !self.is_configured() {
            SourceTrust::Unconfigured
        } else if self.trusts(ip) {
            SourceTrust::Trusted
        } else {
            SourceTrust::Untrusted
        }
    }

    /// The forwarding header's name, lower case, if one is configured.
    pub fn header_name(&self) -> Option<&str> {
        self.header.as_ref().map(|h| h.name.as_str())
    }

    /// The client of a request that arrived from `source`, whose trust is `trust`,
    /// with these header lines: `source` itself unless it is a trusted proxy and a
    /// forwarding header is configured, in which case the header's lines (all of
    /// them, in order) are walked as [`forwarded::walk`] says.
    pub fn client_of<'h>(
        &self,
        source: SocketAddr,
        trust: SourceTrust,
        headers: impl Iterator<Item = (&'h [u8], &'h [u8])>,
    ) -> SocketAddr {
        let (SourceTrust::Trusted, Some(h)) = (trust, &self.header) else {
            return source;
        };
        let name = h.name.as_bytes();
        // The header's lines, in order: up to 4 in place, more (rare) on the heap.
        let mut first: [&[u8]; 4] = [&[]; 4];
        let mut n = 0;
        let mut all: Vec<&[u8]> = Vec::new();
        for (k, v) in headers {
            if !same_name(k, name) {
                continue;
            }
            if n < first.len() {
                first[n] = v;
            } else {
                if all.is_empty() {
                    all.extend_from_slice(&first);
                }
                all.push(v);
            }
            n += 1;
        }
        let values = if all.is_empty() {
            &first[..n]
        } else {
            &all[..]
        };
        if values.is_empty() {
            return source;
        }
        forwarded::walk(h.syntax, values, source, |ip| self.trusts(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(trusted: &[&str], header: Option<&str>) -> ClientAddressSection {
        ClientAddressSection {
            trusted_proxies: trusted.iter().map(|s| (*s).to_owned()).collect(),
            header: header.map(str::to_owned),
        }
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn header_names_compare_without_case() {
        for (n, lower, same) in [
            ("X-Forwarded-For", "x-forwarded-for", true),
            ("x-forwarded-for", "x-forwarded-for", true),
            ("X-FORWARDED-FOR", "x-forwarded-for", true),
            ("X-Forwarded-Fox", "x-forwarded-for", false),
            ("X-Forwarded-Fo", "x-forwarded-for", false),
            ("Forwarded", "forwarded", true),
            ("forwarded", "forwarded", true),
            ("F\u{ef}rwarded", "forwarded", false),
            ("X-Real-IP", "x-real-ip", true),
            ("X_Real-IP", "x-real-ip", false),
            ("@[`{", "@[`{", true),
            ("@[`{", "`{@[", false),
            ("", "", true),
        ] {
            assert_eq!(
                same_name(n.as_bytes(), lower.as_bytes()),
                same,
                "{n} {lower}"
            );
        }
        // Every byte value against its lower case form.
        for b in 0..=255u8 {
            let want = b.to_ascii_lowercase();
            assert_eq!(lower_word(u64::from(b)) as u8, want, "{b:#x}");
            assert_eq!(
                lower_word(u64::from_le_bytes([b; 8])),
                u64::from_le_bytes([want; 8]),
                "{b:#x}"
            );
        }
    }

    #[test]
    fn configuration_errors_name_the_key() {
        let e = ClientAddress::new(&section(&["10.0.0.0/8", "10.0.0.0/33"], None)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "client_address.trusted_proxies[1] \"10.0.0.0/33\": an IPv4 prefix length is at most 32"
        );
        let e = ClientAddress::new(&section(&["lb.example"], None)).unwrap_err();
        assert!(e.to_string().contains("trusted_proxies[0]"), "{e}");
        let e = ClientAddress::new(&section(&["::1"], Some("X Forwarded"))).unwrap_err();
        assert!(e.to_string().contains("client_address.header"), "{e}");
        let e = ClientAddress::new(&section(&[], Some("X-Forwarded-For"))).unwrap_err();
        assert_eq!(e, ClientAddressError::HeaderWithoutTrust);
        let c = ClientAddress::new(&section(&[], None)).unwrap();
        assert!(!c.is_configured());
    }

    #[test]
    fn trust_of_a_source() {
        let c = ClientAddress::new(&section(&["10.0.0.0/8", "127.0.0.1", "::1"], None)).unwrap();
        assert_eq!(c.trust("10.1.2.3".parse().unwrap()), SourceTrust::Trusted);
        assert_eq!(
            c.trust("::ffff:10.1.2.3".parse().unwrap()),
            SourceTrust::Trusted
        );
        assert_eq!(c.trust("::1".parse().unwrap()), SourceTrust::Trusted);
        assert_eq!(
            c.trust("127.0.0.2".parse().unwrap()),
            SourceTrust::Untrusted
        );
        assert_eq!(
            ClientAddress::default().trust("10.1.2.3".parse().unwrap()),
            SourceTrust::Unconfigured
        );
    }

    #[test]
    fn client_of_a_request() {
        let c = ClientAddress::new(&section(&["10.0.0.0/8"], Some("X-Forwarded-For"))).unwrap();
        let lb = sa("10.0.0.1:4000");
        let h: &[(&[u8], &[u8])] = &[
            (b"Host", b"a"),
            (b"x-forwarded-for", b"203.0.113.66, 192.0.2.7"),
            (b"X-Forwarded-For", b"10.0.0.9"),
            (b"X-Real-IP", b"198.51.100.1"),
        ];
        assert_eq!(
            c.client_of(lb, SourceTrust::Trusted, h.iter().copied()),
            sa("192.0.2.7:0")
        );
        // More lines than fit in place: still one list, in order.
        let many: Vec<(&[u8], &[u8])> = (1..=6)
            .map(|i| {
                let v: &[u8] = match i {
                    1 => b"192.0.2.1",
                    2 => b"192.0.2.2",
                    _ => b"10.0.0.9",
                };
                (&b"X-Forwarded-For"[..], v)
            })
            .collect();
        assert_eq!(
            c.client_of(lb, SourceTrust::Trusted, many.iter().copied()),
            sa("192.0.2.2:0")
        );
        // Never read from a source that is not trusted.
        let peer = sa("192.0.2.99:1234");
        assert_eq!(
            c.client_of(peer, SourceTrust::Untrusted, h.iter().copied()),
            peer
        );
        // No such header: the trusted source itself.
        assert_eq!(
            c.client_of(lb, SourceTrust::Trusted, h[..1].iter().copied()),
            lb
        );
        let real = ClientAddress::new(&section(&["10.0.0.0/8"], Some("x-real-ip"))).unwrap();
        assert_eq!(
            real.client_of(lb, SourceTrust::Trusted, h.iter().copied()),
            sa("198.51.100.1:0")
        );
        let fwd = ClientAddress::new(&section(&["10.0.0.0/8"], Some("Forwarded"))).unwrap();
        let h: &[(&[u8], &[u8])] = &[(b"Forwarded", b"for=192.0.2.60;proto=https, for=10.0.0.3")];
        assert_eq!(
            fwd.client_of(lb, SourceTrust::Trusted, h.iter().copied()),
            sa("192.0.2.60:0")
        );
        // Without a header configured, the trusted source is the client.
        let bare = ClientAddress::new(&section(&["10.0.0.0/8"], None)).unwrap();
        assert_eq!(
            bare.client_of(lb, SourceTrust::Trusted, h.iter().copied()),
            lb
        );
    }
}
