//! `@ipMatch`, `@ipMatchFromFile` / `@ipMatchF`: is the input address in a set of
//! IPv4/IPv6 addresses and CIDR networks?
//!
//! Entries are `1.2.3.4`, `10.0.0.0/8`, `::1`, `2001:db8::/32`; bits after the prefix
//! are ignored (`192.168.1.7/24` is `192.168.1.0/24`). The input must be exactly an
//! address (no port, no brackets, no spaces); anything else does not match. As in
//! ModSecurity, IPv4 and IPv6 are separate families: `::ffff:10.0.0.1` is only
//! compared with IPv6 entries.

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A set of networks, grouped by prefix length so that a lookup costs one hash probe
/// per distinct prefix length.
#[derive(Debug, Clone, Default)]
pub struct IpSet {
    v4: Vec<(u32, HashSet<u32>)>,
    v6: Vec<(u32, HashSet<u128>)>,
}

impl IpSet {
    /// Builds the set from entries (each trimmed; empty entries are skipped). `what`
    /// names where the entries come from, for error messages.
    pub fn parse<'a>(
        entries: impl IntoIterator<Item = &'a str>,
        what: &str,
    ) -> Result<IpSet, String> {
        let mut set = IpSet::default();
        for entry in entries {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            set.insert(entry)
                .map_err(|e| format!("{what}: `{entry}`: {e}"))?;
        }
        Ok(set)
    }

    /// Number of distinct networks.
    pub fn len(&self) -> usize {
        self.v4.iter().map(|(_, s)| s.len()).sum::<usize>()
            + self.v6.iter().map(|(_, s)| s.len()).sum::<usize>()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds one entry (an address or a CIDR network, already trimmed).
    pub fn insert(&mut self, entry: &str) -> Result<(), String> {
        let (addr, prefix) = match entry.split_once('/') {
            Some((a, p)) => {
                if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                    return Err("the prefix length is not a number".to_string());
                }
                (
                    a,
                    Some(
                        p.parse::<u32>()
                            .map_err(|_| "the prefix length is too large")?,
                    ),
                )
            }
            None => (entry, None),
        };
        if addr.contains(':') {
            let ip: Ipv6Addr = addr.parse().map_err(|_| "not an IPv6 address")?;
            let len = prefix.unwrap_or(128);
            if len > 128 {
                return Err("an IPv6 prefix length is at most 128".to_string());
            }
            let bits = u128::from(ip) & mask128(len);
            insert(&mut self.v6, len, bits);
        } else {
            let ip: Ipv4Addr = addr.parse().map_err(|_| "not an IPv4 address")?;
            let len = prefix.unwrap_or(32);
            if len > 32 {
                return Err("an IPv4 prefix length is at most 32".to_string());
            }
            let bits = u32::from(ip) & mask32(len);
            insert(&mut self.v4, len, bits);
        }
        Ok(())
    }

    /// Whether `input` is an address inside one of the networks.
    pub fn contains(&self, input: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(input) else {
            return false;
        };
        if text.contains(':') {
            let Ok(ip) = text.parse::<Ipv6Addr>() else {
                return false;
            };
            let bits = u128::from(ip);
            self.v6
                .iter()
                .any(|(len, nets)| nets.contains(&(bits & mask128(*len))))
        } else {
            let Ok(ip) = text.parse::<Ipv4Addr>() else {
                return false;
            };
            let bits = u32::from(ip);
            self.v4
                .iter()
                .any(|(len, nets)| nets.contains(&(bits & mask32(*len))))
        }
    }
}

fn insert<T: std::hash::Hash + Eq>(groups: &mut Vec<(u32, HashSet<T>)>, len: u32, bits: T) {
    match groups.iter_mut().find(|(l, _)| *l == len) {
        Some((_, set)) => {
            set.insert(bits);
        }
        None => {
            groups.push((len, HashSet::from([bits])));
            // Most specific first: the order does not change the answer, but exact
            // addresses are the common case in lists.
            groups.sort_by_key(|g| std::cmp::Reverse(g.0));
        }
    }
}

fn mask32(len: u32) -> u32 {
    u32::MAX.checked_shl(32 - len).unwrap_or(0)
}

fn mask128(len: u32) -> u128 {
    u128::MAX.checked_shl(128 - len).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(arg: &str) -> IpSet {
        IpSet::parse(arg.split(','), "@ipMatch").expect("parse")
    }

    #[test]
    fn reference_manual_examples() {
        // SecRule REMOTE_ADDR "@ipMatch 192.168.1.100,192.168.1.50,10.10.50.0/24"
        let s = set("192.168.1.100,192.168.1.50,10.10.50.0/24");
        assert!(s.contains(b"192.168.1.100"));
        assert!(s.contains(b"10.10.50.77"));
        assert!(!s.contains(b"10.10.51.1"));
        assert!(!s.contains(b"192.168.1.101"));
        // CRS: "@ipMatch 127.0.0.1,::1"
        let s = set("127.0.0.1,::1");
        assert!(s.contains(b"127.0.0.1"));
        assert!(s.contains(b"::1"));
        assert!(s.contains(b"0:0:0:0:0:0:0:1"));
        assert!(!s.contains(b"127.0.0.2"));
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn ipv6_cidr() {
        let s = set(" 2001:db8::/32 , fe80::/10, 2001:db8:1::5/128");
        assert!(s.contains(b"2001:db8:ffff::1"));
        assert!(s.contains(b"2001:DB8::"));
        assert!(s.contains(b"fe80::1234"));
        assert!(s.contains(b"febf::1"));
        assert!(!s.contains(b"fec0::1"));
        assert!(!s.contains(b"2001:db9::1"));
        assert!(!s.contains(b"10.0.0.1"));
        let all = set("::/0,0.0.0.0/0");
        assert!(all.contains(b"1.2.3.4"));
        assert!(all.contains(b"abcd::1"));
    }

    #[test]
    fn families_are_separate_and_bits_are_masked() {
        let s = set("192.168.1.7/24");
        assert!(s.contains(b"192.168.1.200"));
        assert!(!s.contains(b"::ffff:192.168.1.1"));
        let s = set("::ffff:10.0.0.0/104");
        assert!(s.contains(b"::ffff:10.1.2.3"));
        assert!(!s.contains(b"10.1.2.3"));
    }

    #[test]
    fn bad_inputs_do_not_match() {
        let s = set("0.0.0.0/0,::/0");
        for input in [
            &b""[..],
            b"localhost",
            b"1.2.3",
            b"1.2.3.4 ",
            b" 1.2.3.4",
            b"1.2.3.4:80",
            b"[::1]",
            b"1.2.3.4\0",
            b"\xFF",
            b"256.1.1.1",
            b"01.2.3.4",
        ] {
            assert!(!s.contains(input), "{input:?}");
        }
    }

    #[test]
    fn bad_entries_are_errors() {
        for bad in [
            "1.2.3.4/33",
            "::1/129",
            "1.2.3.4/",
            "1.2.3.4/x",
            "1.2.3",
            "example.com",
            "1.2.3.4/-1",
            "gggg::1",
            "1.2.3.4/99999999999",
        ] {
            assert!(IpSet::parse([bad], "@ipMatch").is_err(), "{bad}");
        }
        // Empty items (for instance a trailing comma) are skipped.
        assert_eq!(set("1.2.3.4,,").len(), 1);
    }
}
