//! Path traversal, local file inclusion and remote file inclusion.
//!
//! # Grammar
//!
//! The value is normalised as a file API would see it: percent-escapes decoded
//! (twice, for double encoding), overlong UTF-8 slashes and dots (`%c0%af`,
//! `%c0%ae`, `%e0%80%af`) and `%u2215`/`%u002e`-style escapes read as `/` and `.`,
//! backslashes read as `/`, NUL and what follows dropped (the C string ends there).
//! Then a value is an attack when:
//!
//! - **escaping the root**: walking its path segments, `..` takes the depth below
//!   the start (`../`, `foo/../../`), with at least two `..` segments, or one `..`
//!   followed by a sensitive name;
//! - **naming a sensitive file**: a path (absolute, `file:`, or after `..`) that ends
//!   in a known sensitive file or directory: `/etc/passwd`, `/etc/shadow`,
//!   `/proc/self/environ`, `boot.ini`, `win.ini`, `web.config`, `WEB-INF/web.xml`,
//!   `.htaccess`, `.env`, `id_rsa`, `.git/config`, ... (a bare name like `.env` alone
//!   counts only with a path separator before it);
//! - **a stream wrapper**: `php://filter`, `php://input`, `expect://`, `phar://`,
//!   `zip://`, `data://text/plain;base64`, `file://`, `glob://`, `jar:`;
//! - **a remote include**: an `http(s)`/`ftp` URL whose path ends in a script or
//!   text file followed by `?` (the include trick `http://x/shell.txt?`), at the
//!   start of the value or after `/`, `=`, `?`, `&`, `(` or a quote inside it.
//!
//! Linear: the normalisation is two passes, and the segment walk is one.

use crate::text::{Words, find_ci, starts_with_ci};
use crate::{Class, Finding};
use std::sync::LazyLock;

/// Files and directories an attacker reads.
pub(crate) const SENSITIVE: &[&str] = &[
    "etc/passwd",
    "etc/shadow",
    "etc/group",
    "etc/hosts",
    "etc/issue",
    "etc/motd",
    "etc/crontab",
    "etc/sudoers",
    "etc/hostname",
    "etc/fstab",
    "proc/self/",
    "proc/version",
    "proc/cpuinfo",
    "var/log/",
    "boot.ini",
    "win.ini",
    "system.ini",
    "windows/system32",
    "winnt/system32",
    "web.config",
    "web-inf/",
    "meta-inf/",
    ".htaccess",
    ".htpasswd",
    ".env",
    ".ssh/",
    "id_rsa",
    "id_dsa",
    ".git/",
    ".svn/",
    ".bash_history",
    "wp-config.php",
    "config.php",
    "localsettings.php",
    "applicationhost.config",
    "sam",
];

/// Stream wrappers that read local files or run code.
const WRAPPERS: &[&str] = &[
    "php://",
    "expect://",
    "phar://",
    "zip://",
    "data://",
    "file://",
    "glob://",
    "jar:file:",
    "jar:http",
    "compress.zlib://",
    "zlib:",
    "ogg://",
    "ssh2.",
];

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    static SENSITIVE_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(SENSITIVE));
    input
        .iter()
        .any(|&c| matches!(c, b'%' | b'\\' | b':') || c >= 0x80)
        || memchr::memmem::find(input, b"..").is_some()
        || SENSITIVE_WORDS.any(input)
}

/// Scans `input` for path traversal or file inclusion.
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    let path = normalise(input);
    let p = &path[..];
    let whole = 0..input.len();
    static WRAPPER_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(WRAPPERS));
    for (w, at, _) in WRAPPER_WORDS.find_all(p) {
        // `data://` only with a type right after it (`data://text/plain;base64,`),
        // read within 40 bytes; `file://` anywhere.
        let ok = match WRAPPERS[w] {
            "data://" => {
                let head = &p[at..(at + 40).min(p.len())];
                find_ci(head, 0, b"base64").is_some() || find_ci(head, 0, b"text/").is_some()
            }
            _ => true,
        };
        if ok && (at == 0 || !p[at - 1].is_ascii_alphanumeric()) {
            return Some(Finding::new(Class::Traversal, "stream wrapper", whole));
        }
    }
    if remote_include(p) {
        return Some(Finding::new(Class::Traversal, "remote include", whole));
    }
    // Walk the segments.
    let mut depth: i64 = 0;
    let mut ups = 0;
    let mut escaped = false;
    let mut seg_start = 0;
    let mut saw_up_at: Option<usize> = None;
    for i in 0..=p.len() {
        if i < p.len() && p[i] != b'/' {
            continue;
        }
        let seg = &p[seg_start..i];
        match seg {
            b".." => {
                ups += 1;
                depth -= 1;
                if depth < 0 {
                    escaped = true;
                }
                saw_up_at.get_or_insert(seg_start);
            }
            b"." | b"" => {}
            _ => {
                // `...` and longer runs of dots are `..` to some file APIs (Windows).
                if seg.len() > 2 && seg.iter().all(|&c| c == b'.') {
                    ups += 1;
                    depth -= 1;
                    escaped |= depth < 0;
                    saw_up_at.get_or_insert(seg_start);
                } else {
                    depth += 1;
                }
            }
        }
        seg_start = i + 1;
    }
    let sensitive = sensitive_at(p);
    if escaped && (ups >= 2 || sensitive.is_some()) {
        return Some(Finding::new(
            Class::Traversal,
            "path escapes its root",
            whole,
        ));
    }
    if let Some(at) = sensitive {
        // A sensitive name counts as a path, not a word: after a slash, `..`, a
        // drive letter or `file:`.
        let absolute = at > 0 && p[at - 1] == b'/';
        let after_up = saw_up_at.is_some_and(|u| u < at);
        if absolute || after_up {
            return Some(Finding::new(Class::Traversal, "sensitive file", whole));
        }
    }
    None
}

/// Where a sensitive file or directory name starts in the path, if one does.
fn sensitive_at(p: &[u8]) -> Option<usize> {
    static SENSITIVE_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(SENSITIVE));
    for (w, at, end) in SENSITIVE_WORDS.find_all(p) {
        let name = SENSITIVE[w];
        {
            // The name must end the path or a segment (`/etc/passwd`, not
            // `/etc/passwords`), except directories ending in `/`.
            let ends = name.ends_with('/')
                || end == p.len()
                || matches!(
                    p[end],
                    b'/' | b'?' | b'#' | b'&' | b' ' | b'%' | b'"' | b'\''
                );
            // `sam` and `.env` only as whole segments.
            let starts = at == 0
                || matches!(p[at - 1], b'/' | b'.' | b'\\' | b':')
                || !name.starts_with(|c: char| c.is_ascii_alphabetic());
            let whole_segment = name.len() > 4 || (at > 0 && p[at - 1] == b'/');
            if ends && starts && whole_segment {
                return Some(at);
            }
        }
    }
    None
}

/// An `http(s)`/`ftp` URL whose last path segment is a script or text file and which
/// ends with `?` or holds a query of its own: the shape of a remote include. The URL
/// starts the value, or follows `/`, `=`, `?`, `&`, `(` or a quote inside it (a path
/// or parameter list that carries it, `/api/items/http://x/shell.txt?`).
fn remote_include(p: &[u8]) -> bool {
    let t = p.trim_ascii();
    let ends_with_q = t.ends_with(b"?") || t.ends_with(b"%00") || t.ends_with(b"#");
    if !ends_with_q {
        return false;
    }
    let script = [
        ".txt", ".php", ".jsp", ".asp", ".sh", ".pl", ".py", ".cgi", ".inc",
    ]
    .iter()
    .any(|ext| find_ci(t, 0, ext.as_bytes()).is_some());
    if !script {
        return false;
    }
    if starts_with_ci(t, 0, b"\\\\") {
        return true;
    }
    static SCHEMES: LazyLock<Words> =
        LazyLock::new(|| Words::new(&["http://", "https://", "ftp://"]));
    SCHEMES.find_all(t).any(|(_, at, _)| {
        at == 0 || matches!(t[at - 1], b'/' | b'=' | b'?' | b'&' | b'(' | b'"' | b'\'')
    })
}

/// Decodes percent escapes (twice), overlong UTF-8 slashes and dots, `%u` escapes
/// of `/`, `\` and `.`, turns backslashes into slashes, and stops at a NUL byte.
fn normalise(input: &[u8]) -> Vec<u8> {
    let once = percent_decode(input);
    let twice = percent_decode(&once);
    let mut out = Vec::with_capacity(twice.len());
    let mut i = 0;
    while i < twice.len() {
        let b = twice[i];
        // Overlong encodings of `/` (2F), `.` (2E) and `\` (5C).
        if b == 0xc0 || b == 0xc1 {
            if let Some(&n) = twice.get(i + 1) {
                let cp = ((b as u32 & 0x1f) << 6) | (n as u32 & 0x3f);
                if matches!(cp, 0x2f | 0x2e | 0x5c) {
                    out.push(if cp == 0x2e { b'.' } else { b'/' });
                    i += 2;
                    continue;
                }
            }
        }
        if b == 0xe0
            && twice.get(i + 1) == Some(&0x80)
            && let Some(&n) = twice.get(i + 2)
            && matches!(n & 0x3f, 0x2f | 0x2e | 0x5c)
        {
            out.push(if n & 0x3f == 0x2e { b'.' } else { b'/' });
            i += 3;
            continue;
        }
        // Unicode full-width and division slashes (U+FF0F, U+2215, U+2044).
        if twice[i..].starts_with("\u{ff0f}".as_bytes())
            || twice[i..].starts_with("\u{2215}".as_bytes())
            || twice[i..].starts_with("\u{2044}".as_bytes())
        {
            out.push(b'/');
            i += 3;
            continue;
        }
        match b {
            0 => break,
            b'\\' => out.push(b'/'),
            _ => out.push(b),
        }
        i += 1;
    }
    out
}

/// `%XX` and `%uXXXX` (for `/`, `\` and `.`: others stay as they are) decoded.
fn percent_decode(s: &[u8]) -> Vec<u8> {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            if let (Some(h), Some(l)) = (
                s.get(i + 1).and_then(|&c| hex(c)),
                s.get(i + 2).and_then(|&c| hex(c)),
            ) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
            if matches!(s.get(i + 1), Some(b'u' | b'U')) && s.len() >= i + 6 {
                let code = std::str::from_utf8(&s[i + 2..i + 6])
                    .ok()
                    .and_then(|h| u32::from_str_radix(h, 16).ok());
                match code {
                    Some(0x2f | 0x2215 | 0xff0f) => {
                        out.push(b'/');
                        i += 6;
                        continue;
                    }
                    Some(0x5c) => {
                        out.push(b'\\');
                        i += 6;
                        continue;
                    }
                    Some(0x2e | 0xff0e) => {
                        out.push(b'.');
                        i += 6;
                        continue;
                    }
                    _ => {}
                }
            }
        }
        out.push(s[i]);
        i += 1;
    }
    out
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
            "../../../../etc/passwd",
            "..\\..\\..\\windows\\win.ini",
            "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
            "%252e%252e%252fetc%252fpasswd",
            "..%c0%af..%c0%afetc/passwd",
            "....//....//etc/passwd",
            "/etc/passwd",
            "/etc/shadow%00.png",
            "file:///etc/passwd",
            "php://filter/convert.base64-encode/resource=index.php",
            "expect://id",
            "data://text/plain;base64,PD9waHAgc3lzdGVtKCk7Pz4=",
            "http://evil.example/shell.txt?",
            "/api/items/http://evil.example/shell.txt?",
            "../../WEB-INF/web.xml",
            "/proc/self/environ",
            "C:\\boot.ini",
            "..%u2215..%u2215etc%u2215passwd",
            "foo/../../../../etc/hosts",
            "../.env",
        ] {
            assert!(hit(s), "missed: {s}");
        }
    }

    #[test]
    fn benign() {
        for s in [
            "images/logo.png",
            "../styles/main.css",
            "docs/guide/../intro.html",
            "Wait... what? I said so.. ok",
            "The file /etc/passwords.txt is a note",
            "https://example.com/a/b?c=d",
            "passwd",
            "my .env file is safe",
            "samples/sam.txt",
            "http://example.com/readme.txt",
            "2024-01-01",
            "C'est la vie...",
        ] {
            assert!(!hit(s), "false positive: {s}: {:?}", scan(s.as_bytes()));
        }
    }
}
