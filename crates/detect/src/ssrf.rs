//! Server-side request forgery: a URL that makes the server fetch from itself, its
//! network or its cloud's metadata service.
//!
//! # Grammar
//!
//! The value (white space and quotes trimmed) must *be* a URL: `scheme "://"
//! [userinfo "@"] host [":" port] [path]`, or `"//" host ...`. Prose that mentions a
//! URL is not a request to fetch it. Then it is an attack when:
//!
//! - the scheme is one that reaches raw services: `gopher`, `dict`, `ldap`, `tftp`,
//!   `sftp`, `netdoc`, `jar`;
//! - the host is internal in any spelling an IP parser accepts: dotted decimal,
//!   one to four parts (`127.1`), decimal (`2130706433`), octal (`0177.0.0.1`), hex
//!   (`0x7f.0x0.0x0.0x1`, `0x7f000001`), IPv6 (`[::1]`, `[::]`, `[::ffff:127.0.0.1]`,
//!   `[fe80::1]`, `[fc00::]`), in the ranges 0/8, 10/8, 100.64/10, 127/8,
//!   169.254/16 (cloud metadata), 172.16/12, 192.168/16;
//! - the host is written with look-alike characters that Unicode normalisation
//!   turns into one of the above (`①②⑦.⓪.⓪.①`, full-width digits and dots);
//! - the host is a name for such an address: `localhost` (and `*.localhost`),
//!   `metadata.google.internal`, `metadata`, `instance-data`, or a wildcard DNS
//!   name that embeds one (`127.0.0.1.nip.io`, `10.0.0.1.sslip.io`, `localtest.me`,
//!   `lvh.me`).
//!
//! Linear: the URL's authority is read once, at most 256 bytes.

use crate::text::starts_with_ci;
use crate::{Class, Finding};

const RAW_SCHEMES: &[&str] = &[
    "gopher", "dict", "ldap", "ldaps", "tftp", "sftp", "netdoc", "jar",
];

const INTERNAL_NAMES: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "ip6-localhost",
    "ip6-loopback",
    "metadata.google.internal",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
    "localtest.me",
    "lvh.me",
    "vcap.me",
];

/// Wildcard DNS services that resolve a name to the address written in it.
const WILDCARD_DNS: &[&str] = &["nip.io", "xip.io", "sslip.io", "nip.direct", "traefik.me"];

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    memchr::memmem::find(input, b"//").is_some()
        || memchr::memmem::find(input, b"\\\\").is_some()
        || crate::text::find_ci(input, 0, b"jar:").is_some()
}

/// Scans `input` for a URL to an internal address.
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    if let Some(f) = url_at(input, input.trim_ascii_start()) {
        return Some(f);
    }
    // A URL inside a path or a parameter list (`/fetch/http://127.0.0.1/`,
    // `a=1&u=http://...`): after `/`, `=`, `?`, `&`, `(` or a quote, never after a
    // space (prose that mentions a URL).
    let mut from = 0;
    while let Some(rel) = memchr::memmem::find(&input[from..], b"://") {
        let sep = from + rel;
        from = sep + 3;
        let start = input[..sep]
            .iter()
            .rposition(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')))
            .map_or(0, |p| p + 1);
        if start == 0
            || start == sep
            || !matches!(
                input[start - 1],
                b'/' | b'=' | b'?' | b'&' | b'(' | b'"' | b'\''
            )
        {
            continue;
        }
        if let Some(f) = url_at(input, &input[start..]) {
            return Some(f);
        }
    }
    None
}

/// The finding for a URL at the start of `t` (a part of `input`), if it is one to
/// an internal address or a raw service.
fn url_at(input: &[u8], t: &[u8]) -> Option<Finding> {
    let t = t.trim_ascii_end();
    let t = t.strip_prefix(b"\"").unwrap_or(t);
    let t = t.strip_prefix(b"'").unwrap_or(t);
    let (scheme, rest) = split_scheme(t)?;
    let whole = 0..input.len();
    if let Some(s) = scheme
        && RAW_SCHEMES
            .iter()
            .any(|r| s.eq_ignore_ascii_case(r.as_bytes()))
    {
        return Some(Finding::new(
            Class::Ssrf,
            "URL with a raw-service scheme",
            whole,
        ));
    }
    let authority_end = rest
        .iter()
        .take(256)
        .position(|&c| matches!(c, b'/' | b'?' | b'#' | b'\\' | b' ' | b'"' | b'\''))
        .unwrap_or(rest.len().min(256));
    let authority = &rest[..authority_end];
    // Userinfo: everything before the last `@`.
    let host_port = match authority.iter().rposition(|&c| c == b'@') {
        Some(p) => &authority[p + 1..],
        None => authority,
    };
    let host = if host_port.first() == Some(&b'[') {
        let close = host_port.iter().position(|&c| c == b']')?;
        &host_port[..=close]
    } else {
        match host_port.iter().rposition(|&c| c == b':') {
            Some(p) if host_port[p + 1..].iter().all(u8::is_ascii_digit) => &host_port[..p],
            _ => host_port,
        }
    };
    let host = host.strip_suffix(b".").unwrap_or(host);
    let folded = fold_host(host);
    let host = folded.as_deref().unwrap_or(host);
    if internal_host(host) {
        return Some(Finding::new(
            Class::Ssrf,
            "URL to an internal address",
            whole,
        ));
    }
    None
}

/// The scheme (none for `//host`) and what follows `://`.
fn split_scheme(t: &[u8]) -> Option<(Option<&[u8]>, &[u8])> {
    if let Some(rest) = t.strip_prefix(b"//") {
        return Some((None, rest));
    }
    let colon = t.iter().take(16).position(|&c| c == b':')?;
    let scheme = &t[..colon];
    if scheme.is_empty()
        || !scheme[0].is_ascii_alphabetic()
        || !scheme
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
    {
        return None;
    }
    let rest = &t[colon + 1..];
    // `jar:http://...`, and `scheme:/\host` sloppiness: slashes and backslashes.
    if scheme.eq_ignore_ascii_case(b"jar") {
        return Some((Some(scheme), rest));
    }
    let slashes = rest
        .iter()
        .take_while(|&&c| c == b'/' || c == b'\\')
        .count();
    if slashes < 2 {
        return None;
    }
    Some((Some(scheme), &rest[slashes..]))
}

/// A host written with look-alike characters (circled and full-width digits and
/// letters, full-width and ideographic full stops), as the URL parsers that apply
/// Unicode normalisation (NFKC) read it; `None` when it has none.
fn fold_host(host: &[u8]) -> Option<Vec<u8>> {
    if host.is_ascii() {
        return None;
    }
    let s = std::str::from_utf8(host).ok()?;
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        let u = c as u32;
        let mapped = match u {
            0x2460..=0x2468 => char::from_u32(u - 0x2460 + '1' as u32),
            0x24ea | 0x24ff => Some('0'),
            0xff10..=0xff19 => char::from_u32(u - 0xff10 + '0' as u32),
            0x24b6..=0x24cf => char::from_u32(u - 0x24b6 + 'a' as u32),
            0x24d0..=0x24e9 => char::from_u32(u - 0x24d0 + 'a' as u32),
            0xff21..=0xff3a => char::from_u32(u - 0xff21 + 'a' as u32),
            0xff41..=0xff5a => char::from_u32(u - 0xff41 + 'a' as u32),
            0xff0e | 0x3002 | 0xff61 => Some('.'),
            _ if c.is_ascii() => Some(c),
            _ => None,
        };
        out.push(u8::try_from(mapped? as u32).ok()?);
    }
    Some(out)
}

fn internal_host(host: &[u8]) -> bool {
    if host.is_empty() {
        return false;
    }
    if host.first() == Some(&b'[') {
        return internal_v6(&host[1..host.len().saturating_sub(1)]);
    }
    let lower = host.to_ascii_lowercase();
    if INTERNAL_NAMES.iter().any(|n| lower == n.as_bytes()) || lower.ends_with(b".localhost") {
        return true;
    }
    for w in WILDCARD_DNS {
        // A subdomain of the service (`snip.io` is another name).
        if lower.ends_with(w.as_bytes())
            && lower.len() > w.len()
            && lower[lower.len() - w.len() - 1] == b'.'
        {
            let prefix = &lower[..lower.len() - w.len() - 1];
            // The address written in the name: `127.0.0.1.nip.io`, `a-127-0-0-1.nip.io`.
            let dotted: Vec<u8> = prefix
                .iter()
                .map(|&c| if c == b'-' { b'.' } else { c })
                .collect();
            let tail_start = dotted
                .iter()
                .rposition(|&c| !(c.is_ascii_digit() || c == b'.'))
                .map_or(0, |p| p + 1);
            if let Some(ip) = parse_v4(
                dotted[tail_start..]
                    .strip_prefix(b".")
                    .unwrap_or(&dotted[tail_start..]),
            ) {
                return internal_v4(ip);
            }
            // No address in the name: it resolves to none that matters here.
            return false;
        }
    }
    parse_v4(&lower).is_some_and(internal_v4)
}

fn internal_v4(ip: u32) -> bool {
    let [a, b, _, _] = ip.to_be_bytes();
    a == 0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b))
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
}

/// An IPv4 address as `inet_aton` reads it: one to four parts, each decimal, octal
/// (leading 0) or hex (0x); the last part fills the remaining bytes.
fn parse_v4(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 64 {
        return None;
    }
    let parts: Vec<&[u8]> = s.split(|&c| c == b'.').collect();
    if parts.len() > 4 || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let mut values = Vec::with_capacity(4);
    for p in &parts {
        let v = if p.len() > 2 && (p.starts_with(b"0x") || p.starts_with(b"0X")) {
            u64::from_str_radix(std::str::from_utf8(&p[2..]).ok()?, 16).ok()?
        } else if p.len() > 1 && p[0] == b'0' {
            u64::from_str_radix(std::str::from_utf8(&p[1..]).ok()?, 8).ok()?
        } else {
            if !p.iter().all(u8::is_ascii_digit) {
                return None;
            }
            std::str::from_utf8(p).ok()?.parse::<u64>().ok()?
        };
        values.push(v);
    }
    let n = values.len();
    let mut ip: u64 = 0;
    for (i, v) in values.iter().enumerate() {
        if i + 1 < n {
            if *v > 255 {
                return None;
            }
            ip |= v << (8 * (3 - i));
        } else {
            let room = 8 * (4 - i) as u32;
            if room < 64 && *v >= 1u64 << room {
                return None;
            }
            ip |= v;
        }
    }
    u32::try_from(ip).ok()
}

fn internal_v6(s: &[u8]) -> bool {
    let lower = s.to_ascii_lowercase();
    let l = &lower[..];
    if matches!(l, b"::1" | b"::" | b"0:0:0:0:0:0:0:1" | b"0:0:0:0:0:0:0:0") {
        return true;
    }
    if starts_with_ci(l, 0, b"fe80:") || l.starts_with(b"fc") || l.starts_with(b"fd") {
        return true;
    }
    // IPv4-mapped or -compatible: the address after the last colon.
    if let Some(p) = l.iter().rposition(|&c| c == b':') {
        let tail = &l[p + 1..];
        if tail.contains(&b'.')
            && let Some(ip) = parse_v4(tail)
        {
            return internal_v4(ip);
        }
        // `::ffff:7f00:1`
        if l.starts_with(b"::ffff:") {
            let hex: Vec<u8> = l[7..].iter().copied().filter(|&c| c != b':').collect();
            if let Ok(v) = u32::from_str_radix(std::str::from_utf8(&hex).unwrap_or(""), 16) {
                return internal_v4(v);
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(s: &str) -> bool {
        scan(s.as_bytes()).is_some()
    }

    #[test]
    fn attacks() {
        for s in [
            "http://127.0.0.1/admin",
            "http://localhost:8080/",
            "http://169.254.169.254/latest/meta-data/",
            "http://metadata.google.internal/computeMetadata/v1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::]:80/",
            "http://evil.example@127.0.0.1/",
            "http://10.0.0.5:8080/internal",
            "https://192.168.1.1/",
            "http://172.16.0.1/",
            "gopher://127.0.0.1:6379/_INFO",
            "dict://localhost:11211/stats",
            "http://127.0.0.1.nip.io/",
            "//127.0.0.1/",
            "http://0/",
            "http:\\\\127.0.0.1\\",
            "/api/items/https://0x7f000001:8080/",
            "u=1&next=http://169.254.169.254/",
            "http://localtest.me/",
            "  \"http://127.0.0.1\" ",
            "/api/items/https://0x7f000001:8080/",
            "u=1&next=http://169.254.169.254/",
            "http://①②⑦.⓪.⓪.①/",
            "http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/",
            "http://１２７。０。０。１/",
        ] {
            assert!(hit(s), "missed: {s}");
        }
    }

    #[test]
    fn benign() {
        for s in [
            "https://example.com/",
            "http://8.8.8.8/",
            "https://www.google.com/search?q=localhost",
            "See http://localhost:3000 for the dev server",
            "http://172.32.0.1/",
            "http://1.2.3.4.nip.io.example.com/",
            "mailto:alice@example.com",
            "localhost",
            "127.0.0.1",
            "https://api.example.com/v1/items?id=10",
        ] {
            assert!(!hit(s), "false positive: {s}: {:?}", scan(s.as_bytes()));
        }
    }
}
