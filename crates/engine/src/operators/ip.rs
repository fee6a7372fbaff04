//! `@ipMatch`, `@ipMatchFromFile` / `@ipMatchF`: is the input address in a set of
//! IPv4/IPv6 addresses and CIDR networks?
//!
//! Entries are `1.2.3.4`, `10.0.0.0/8`, `::1`, `2001:db8::/32`; bits after the prefix
//! are ignored (`192.168.1.7/24` is `192.168.1.0/24`). The input must be exactly an
//! address (no port, no brackets, no spaces); anything else does not match. As in
//! ModSecurity, IPv4 and IPv6 are separate families: `::ffff:10.0.0.1` is only
//! compared with IPv6 entries.

use std::net::{Ipv4Addr, Ipv6Addr};

/// A set of networks, kept as sorted, disjoint address ranges per family: a lookup is
/// one binary search (about 21 steps for a million ranges), whatever the mix of
/// prefix lengths, and memory is two addresses per range (networks that overlap or
/// touch share one).
#[derive(Debug, Clone, Default)]
pub struct IpSet {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
    networks: usize,
}

/// Collects networks for an [`IpSet`].
#[derive(Debug, Default)]
pub struct IpSetBuilder {
    v4: Vec<(u32, u32)>,
    v6: Vec<(u128, u128)>,
}

impl IpSetBuilder {
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
            let mask = mask128(len);
            let start = u128::from(ip) & mask;
            self.v6.push((start, start | !mask));
        } else {
            let ip: Ipv4Addr = addr.parse().map_err(|_| "not an IPv4 address")?;
            let len = prefix.unwrap_or(32);
            if len > 32 {
                return Err("an IPv4 prefix length is at most 32".to_string());
            }
            let mask = mask32(len);
            let start = u32::from(ip) & mask;
            self.v4.push((start, start | !mask));
        }
        Ok(())
    }

    /// Adds the entries of a list file: one address or network per line; blank
    /// lines and lines starting with `#` are skipped. An error names `origin` and the
    /// line.
    pub fn add_list(&mut self, content: &[u8], origin: &str) -> Result<(), String> {
        for (line_no, line) in super::pm::numbered_data_file_lines(content) {
            let entry = std::str::from_utf8(line)
                .map_err(|_| format!("{origin}:{line_no}: not valid UTF-8"))?
                .trim();
            self.insert(entry)
                .map_err(|e| format!("{origin}:{line_no}: `{entry}`: {e}"))?;
        }
        Ok(())
    }

    /// The set: ranges sorted, duplicates counted once, overlapping and adjacent
    /// ranges merged.
    pub fn build(mut self) -> IpSet {
        self.v4.sort_unstable();
        self.v4.dedup();
        self.v6.sort_unstable();
        self.v6.dedup();
        let networks = self.v4.len() + self.v6.len();
        IpSet {
            v4: merge(self.v4),
            v6: merge(self.v6),
            networks,
        }
    }
}

/// Merges sorted ranges that overlap or touch.
fn merge<T: Copy + Ord + num_step::Step>(ranges: Vec<(T, T)>) -> Vec<(T, T)> {
    let mut out: Vec<(T, T)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match out.last_mut() {
            Some(last) if last.1 >= start || last.1.next() == Some(start) => {
                if end > last.1 {
                    last.1 = end;
                }
            }
            _ => out.push((start, end)),
        }
    }
    out.shrink_to_fit();
    out
}

/// The next integer, for merging touching ranges.
mod num_step {
    /// An unsigned integer with a successor.
    pub trait Step: Sized {
        /// `self + 1`, or `None` at the maximum.
        fn next(self) -> Option<Self>;
    }
    impl Step for u32 {
        fn next(self) -> Option<u32> {
            self.checked_add(1)
        }
    }
    impl Step for u128 {
        fn next(self) -> Option<u128> {
            self.checked_add(1)
        }
    }
}

/// Whether `ip` lies in one of the sorted, disjoint `ranges`.
fn in_ranges<T: Copy + Ord>(ranges: &[(T, T)], ip: T) -> bool {
    let i = ranges.partition_point(|r| r.0 <= ip);
    i > 0 && ip <= ranges[i - 1].1
}

impl IpSet {
    /// Builds the set from entries (each trimmed; empty entries are skipped). `what`
    /// names where the entries come from, for error messages.
    pub fn parse<'a>(
        entries: impl IntoIterator<Item = &'a str>,
        what: &str,
    ) -> Result<IpSet, String> {
        let mut b = IpSetBuilder::default();
        for entry in entries {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            b.insert(entry)
                .map_err(|e| format!("{what}: `{entry}`: {e}"))?;
        }
        Ok(b.build())
    }

    /// Number of distinct networks given.
    pub fn len(&self) -> usize {
        self.networks
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.networks == 0
    }

    /// Bytes of memory the ranges take.
    pub fn heap_bytes(&self) -> usize {
        self.v4.capacity() * std::mem::size_of::<(u32, u32)>()
            + self.v6.capacity() * std::mem::size_of::<(u128, u128)>()
    }

    /// Whether `input` is an address inside one of the networks.
    pub fn contains(&self, input: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(input) else {
            return false;
        };
        if text.contains(':') {
            text.parse::<Ipv6Addr>()
                .is_ok_and(|ip| self.contains_v6(ip))
        } else {
            text.parse::<Ipv4Addr>()
                .is_ok_and(|ip| self.contains_v4(ip))
        }
    }

    /// Whether the IPv4 address is inside one of the networks.
    pub fn contains_v4(&self, ip: Ipv4Addr) -> bool {
        in_ranges(&self.v4, u32::from(ip))
    }

    /// Whether the IPv6 address is inside one of the networks (IPv4-mapped
    /// addresses are compared with IPv6 entries only, as ModSecurity does).
    pub fn contains_v6(&self, ip: Ipv6Addr) -> bool {
        in_ranges(&self.v6, u128::from(ip))
    }

    /// Whether the address is inside one of the networks.
    pub fn contains_ip(&self, ip: std::net::IpAddr) -> bool {
        match ip {
            std::net::IpAddr::V4(v4) => self.contains_v4(v4),
            std::net::IpAddr::V6(v6) => self.contains_v6(v6),
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
    fn overlapping_and_touching_networks_merge() {
        let s = set("10.0.0.0/24,10.0.1.0/24,10.0.0.128/25,10.0.3.0/24,10.0.0.5");
        assert_eq!(s.len(), 5);
        assert_eq!(
            s.v4,
            vec![(0x0a00_0000, 0x0a00_01ff), (0x0a00_0300, 0x0a00_03ff)]
        );
        for (ip, want) in [
            ("9.255.255.255", false),
            ("10.0.0.0", true),
            ("10.0.1.255", true),
            ("10.0.2.0", false),
            ("10.0.3.7", true),
            ("10.0.4.0", false),
            ("255.255.255.255", false),
        ] {
            assert_eq!(s.contains(ip.as_bytes()), want, "{ip}");
        }
        let all = set("0.0.0.0/1,128.0.0.0/1");
        assert_eq!(all.v4, vec![(0, u32::MAX)]);
        assert!(all.contains(b"255.255.255.255"));
    }

    /// The ranges answer as a check of every network one by one would, on random
    /// sets and addresses.
    #[test]
    fn ranges_agree_with_a_linear_scan() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..50 {
            let nets: Vec<(u32, u32)> = (0..200)
                .map(|_| ((rnd() as u32) & 0x0fff_ffff, 4 + (rnd() % 29) as u32))
                .collect();
            let text: Vec<String> = nets
                .iter()
                .map(|(a, l)| format!("{}/{l}", Ipv4Addr::from(*a)))
                .collect();
            let s = IpSet::parse(text.iter().map(String::as_str), "test").unwrap();
            for _ in 0..500 {
                let ip = (rnd() as u32) & 0x0fff_ffff;
                let want = nets.iter().any(|(a, l)| ip & mask32(*l) == a & mask32(*l));
                assert_eq!(s.contains_v4(Ipv4Addr::from(ip)), want);
            }
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
