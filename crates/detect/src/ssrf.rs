//! Server-side request forgery: a URL that makes the server fetch from itself, its
//! network or its cloud's metadata service.
//!
//! # Grammar
//!
//! The value (white space and quotes trimmed) must *be* a URL: `scheme "://"
//! [userinfo "@"] host [":" port] [path]`, `"//" host ...`, or for `http`, `https`,
//! `ftp`, `ws` and `wss` also `scheme ":" host` and `scheme ":/" host` (WHATWG
//! parsers accept them), and for the raw schemes below `scheme ":/" path`
//! (`file:/etc/hosts`); or a URL with `://` that follows `/`, `=`, `?`, `&`, `(` or
//! a quote inside the value (`/fetch/http://127.0.0.1/`, `a=1&u=http://...`).
//! Prose that mentions a URL after a space is not a request to fetch it. Then it
//! is an attack when:
//!
//! - the scheme is one that reaches raw services or files: `gopher`, `dict`, `ldap`,
//!   `ldaps`, `tftp`, `sftp`, `netdoc`, `jar`, `file`, `svn`, `svn+ssh`, `git`,
//!   `git+ssh`, `ssh`, `smb`, `telnet`;
//! - the host (after the last `@` of the userinfo) is internal in any spelling an IP
//!   parser accepts: dotted decimal, one to four parts (`127.1`, `168.4161808`),
//!   decimal (`2130706433`), octal (`0177.0.0.1`, `025017700420`), hex
//!   (`0x7f.0x0.0x0.0x1`, `0x7f000001`), IPv6 in any form std's parser reads (`[::1]`,
//!   `[::]`, `[0:0:0:0:0:0:0:1]`, `[::ffff:127.0.0.1]`, `[::ffff:a9fe:a9fe]`,
//!   link-local `fe80::/10`, unique local `fc00::/7`), in the ranges 0/8, 10/8,
//!   100.64/10, 127/8, 169.254/16 (cloud metadata), 172.16/12, 192.168/16, and
//!   Azure's platform address 168.63.129.16;
//! - the host is written with look-alike characters that Unicode normalisation
//!   turns into one of the above (`①②⑦.⓪.⓪.①`, full-width digits and dots);
//! - the host is a name for such an address: `localhost`, `metadata`,
//!   `instance-data`, `kubernetes.default(.svc)`, names under `.localhost`,
//!   `.internal`, `.cluster.local`, `.svc`, `localtest.me`, `lvh.me`, `vcap.me`, or a
//!   wildcard DNS name with four dotted numbers among its labels
//!   (`127.0.0.1.nip.io`, `x.10.0.0.1.sslip.io`);
//! - there is no scheme, and the value starts with an internal IPv6 literal in
//!   brackets (`[::1]`, `[::ffff:a9fe:a9fe]/metadata`), or with an internal address
//!   of four dotted numbers followed by a port or a `/` path (`127.0.0.1:6379`) or
//!   with a part in hex or octal (`0177.0.0.1`), or with one hex number of six
//!   digits or more (`0xa9fea9fe`), or with a name under `.internal` or
//!   `.cluster.local` (`instance-data.ec2.internal`; `bare_internal` takes `.svc`
//!   too, but `may_match` lets no bare `.svc` name through): the application
//!   makes the URL.
//!
//! Linear: the URL's authority is read once, at most 256 bytes.

use crate::{Class, Finding};

const RAW_SCHEMES: &[&str] = &[
    "gopher", "dict", "ldap", "ldaps", "tftp", "sftp", "netdoc", "jar", "file", "svn", "svn+ssh",
    "git", "git+ssh", "ssh", "smb", "telnet",
];

/// Schemes whose URLs parsers accept with one slash or none (`http:host`,
/// `http:/host`), as WHATWG URL parsing does for special schemes.
const SPECIAL_SCHEMES: &[&str] = &["http", "https", "ftp", "ws", "wss"];

/// Name suffixes that only internal resolvers answer (or that resolve to loopback).
const INTERNAL_SUFFIXES: &[&str] = &[
    ".localhost",
    ".internal",
    ".cluster.local",
    ".svc",
    ".localtest.me",
    ".lvh.me",
    ".vcap.me",
];

/// Words that start the shapes [`scan`] reads, for the candidates pass.
pub(crate) const TRIGGERS: &[&str] = &[
    "//",
    "\\\\",
    "jar:",
    "http:",
    "https:",
    "ftp:",
    "file:",
    "ws:",
    ".internal",
    "cluster.local",
    "kubernetes",
    "localhost",
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
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
];

/// Wildcard DNS services that resolve a name to the address written in it.
const WILDCARD_DNS: &[&str] = &["nip.io", "xip.io", "sslip.io", "nip.direct", "traefik.me"];

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    static WORDS: std::sync::LazyLock<crate::text::Words> =
        std::sync::LazyLock::new(|| crate::text::Words::new(TRIGGERS));
    WORDS.any(input) || may_start_with_host(input)
}

/// Whether the value starts the way a bare address does: a digit or `[`.
pub(crate) fn may_start_with_host(input: &[u8]) -> bool {
    let t = input.trim_ascii_start();
    t.first().is_some_and(|c| c.is_ascii_digit() || *c == b'[')
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
    let whole = 0..input.len();
    let Some((scheme, rest)) = split_scheme(t) else {
        // No scheme: the value is an address the application makes a URL of
        // (`127.0.0.1:6379`, `[::ffff:a9fe:a9fe]/metadata`, `0xa9fea9fe/latest`).
        return (std::ptr::eq(t.as_ptr(), input.trim_ascii_start().as_ptr()) && bare_internal(t))
            .then(|| Finding::new(Class::Ssrf, "address of an internal host", whole));
    };
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
    let raw = RAW_SCHEMES
        .iter()
        .any(|r| scheme.eq_ignore_ascii_case(r.as_bytes()));
    let special = SPECIAL_SCHEMES
        .iter()
        .any(|r| scheme.eq_ignore_ascii_case(r.as_bytes()));
    // `http:host` and `http:/host` are URLs to parsers that follow WHATWG; `file:/x`
    // is a file.
    if slashes < 2
        && !((special
            && rest
                .get(slashes)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'['))
            || (raw && slashes == 1))
    {
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
    if INTERNAL_NAMES.iter().any(|n| lower == n.as_bytes())
        || INTERNAL_SUFFIXES
            .iter()
            .any(|x| lower.ends_with(x.as_bytes()))
    {
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
            // Any four dotted numbers among the labels (`x.127.0.0.1.nip.io`,
            // `127.0.0.1.example.com.nip.io`).
            let labels: Vec<&[u8]> = dotted.split(|&c| c == b'.').collect();
            if labels.len() >= 4 {
                for w in labels.windows(4) {
                    if w.iter()
                        .all(|l| !l.is_empty() && l.len() <= 3 && l.iter().all(u8::is_ascii_digit))
                    {
                        let quad = w.join(&b'.');
                        if let Some(ip) = parse_v4(&quad) {
                            return internal_v4(ip);
                        }
                    }
                }
            }
            // No address in the name: it resolves to none that matters here.
            return false;
        }
    }
    parse_v4(&lower).is_some_and(internal_v4)
}

fn internal_v4(ip: u32) -> bool {
    let [a, b, _, _] = ip.to_be_bytes();
    // Azure's platform endpoint (metadata and the wire server) is a public address.
    ip == u32::from_be_bytes([168, 63, 129, 16])
        || a == 0
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
    let Some(addr) = std::str::from_utf8(s)
        .ok()
        .and_then(|t| t.split('%').next())
        .and_then(|t| t.parse::<std::net::Ipv6Addr>().ok())
    else {
        return false;
    };
    let seg = addr.segments();
    if addr.is_loopback() || addr.is_unspecified() {
        return true;
    }
    // Unique local (fc00::/7) and link-local (fe80::/10).
    if seg[0] & 0xfe00 == 0xfc00 || seg[0] & 0xffc0 == 0xfe80 {
        return true;
    }
    // IPv4-mapped (`::ffff:a.b.c.d`) and IPv4-compatible (`::a.b.c.d`).
    if seg[..5] == [0; 5] && (seg[5] == 0xffff || seg[5] == 0) {
        let v4 = (u32::from(seg[6]) << 16) | u32::from(seg[7]);
        return internal_v4(v4);
    }
    false
}

/// An address with no scheme at the start of the value: a bracketed IPv6 literal
/// that is internal; four dotted numbers that make an internal address, followed by
/// a port or a path, or written in hex or octal (no one writes a public address
/// that way); one hex number of at least six digits (`0xa9fea9fe`); or a name that
/// only internal resolvers answer (`instance-data.ec2.internal`). Decimals, zip
/// codes and phone numbers (`0.87`, `01234`) are none of these.
fn bare_internal(t: &[u8]) -> bool {
    let end = t
        .iter()
        .take(256)
        .position(|&c| matches!(c, b'/' | b'?' | b'#' | b' ' | b'"' | b'\''))
        .unwrap_or(t.len().min(256));
    let hostport = &t[..end];
    let followed = end < t.len() && t[end] == b'/';
    if let Some(inner) = hostport.strip_prefix(b"[") {
        let Some(close) = inner.iter().position(|&c| c == b']') else {
            return false;
        };
        return internal_v6(&inner[..close]);
    }
    let (host, port) = match hostport.iter().rposition(|&c| c == b':') {
        Some(p) if p + 1 < hostport.len() && hostport[p + 1..].iter().all(u8::is_ascii_digit) => {
            (&hostport[..p], true)
        }
        _ => (hostport, false),
    };
    let lower = host.to_ascii_lowercase();
    if lower.ends_with(b".internal")
        || lower.ends_with(b".cluster.local")
        || lower.ends_with(b".svc")
    {
        return true;
    }
    let Some(ip) = parse_v4(host) else {
        return false;
    };
    if !internal_v4(ip) {
        return false;
    }
    let parts: Vec<&[u8]> = host.split(|&c| c == b'.').collect();
    let hex = |p: &[u8]| p.len() > 2 && (p.starts_with(b"0x") || p.starts_with(b"0X"));
    let octal = |p: &[u8]| p.len() > 2 && p[0] == b'0' && p.iter().all(u8::is_ascii_digit);
    match parts.len() {
        4 => port || followed || parts.iter().any(|p| hex(p) || octal(p)),
        1 => hex(host) && host.len() >= 8,
        _ => false,
    }
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
            "0.0.0.0:22",
            "127.0.0.1:6379",
            "192.168.197.237/api/internal/users",
            "0xa9fea9fe/latest/api/token",
            "0X646464c8",
            "[::ffff:a9fe:a9fe]/metadata/v1.json",
            "[0:0:0:0:0:ffff:127.0.0.1]:8080",
            "http://u:p@[0000:0000:0000:0000:0000:ffff:a83f:8110]/machine",
            "http:www.shop.example.localtest.me/latest/user-data",
            "http:/example.com@169.254.170.2/v3/task",
            "//www.shop.example@kubernetes.default.svc/_cat/indices",
            "https://x.example/out?url=http://168.63.129.16./?comp=versions",
            "instance-data.ec2.internal",
            "http://kubernetes.default/admin",
            "svn+ssh://exfil.invalid/tr",
            "file:/etc/mysql/my.cnf",
            "hTtPs://025017700420:80/",
            "http:/0251.0376.0251.0376/latest/meta-data/",
            "http://trusted.example@168.4161808:80/machine",
            "http:\\\\127.0.0.1.example.com.nip.io/admin",
            "http:2852039170/v3/task",
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
            "12345/reviews",
            "10.5:30",
            "2024-05-01",
            "[1, 2, 3]",
            "3.14159",
            "http:// is the scheme",
            "example.nip.io",
            "https://snip.io/x",
            "0.87",
            "0.50010",
            "01234",
            "0123456789",
            "04",
            "4.5",
            "0042",
        ] {
            assert!(!hit(s), "false positive: {s}: {:?}", scan(s.as_bytes()));
        }
    }
}
