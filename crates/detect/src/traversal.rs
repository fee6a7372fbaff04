//! Path traversal, local file inclusion and remote file inclusion.
//!
//! # Grammar
//!
//! The value is normalised as a file API would see it: percent-escapes decoded
//! (twice, for double encoding), overlong UTF-8 slashes and dots (`%c0%af`,
//! `%c0%ae`, `%e0%80%af`) and `%u2215`/`%u002e`-style escapes read as `/` and `.`,
//! backslashes read as `/`, repeated slashes read as one (a leading `//` stays),
//! NUL and what follows dropped (the C string ends there), and a trailing `::$DATA`
//! and trailing dots and spaces that Windows ignores dropped (a final `..` stays).
//! Then a value is an attack when:
//!
//! - **escaping the root**: walking its path segments (a segment of three or more
//!   dots counts as `..`), `..` takes the depth below the start (`../`,
//!   `foo/../../`), with at least two `..` segments or a sensitive name anywhere in
//!   the path; or two `..` segments and a sensitive name anywhere
//!   (`/var/www/uploads/../../../../config/database.yml`);
//! - **a path parameter or alias trick**: a `..;x` segment (Tomcat reads it as `..`)
//!   or a `name..` segment before a `/` (it climbs out of an nginx alias that lacks
//!   its slash);
//! - **naming a sensitive file**: a path (after a `/`, which takes in `C:\` and
//!   `file:`, or after a `..`) that ends in a known sensitive file or directory;
//!   in text that reads like prose, only when no white space comes before it (the
//!   value is the path, not a sentence naming one): `/etc/passwd`, `/etc/shadow`,
//!   `/proc/self/environ`, `/etc/ssh/`, `boot.ini`, `win.ini`, `web.config`,
//!   `WEB-INF/web.xml`, `.htaccess`, `.env`, `id_rsa`, `.git/config`, framework
//!   secrets (`config/database.yml`, `secrets.yml`, `appsettings.json`,
//!   `settings.py`), `/var/run/secrets/`, `actuator/env`, ... ([`SENSITIVE`]; a bare
//!   name like `.env` alone counts only with a path separator before it);
//! - **a stream wrapper**, not after a letter or digit: `php://`, `expect://`,
//!   `phar://`, `zip://`, `data://` (with `base64` or `text/` in the next 40
//!   bytes), `file://`, `glob://`, `jar:file:`, `jar:http`, `compress.zlib://`,
//!   `zlib:`, `ogg://`, `ssh2.`;
//! - **a remote include**: a URL (`http`, `https` or `ftp`, at the start of the
//!   value or after `/`, `=`, `?`, `&`, `(` or a quote inside it; or, at the start
//!   only, a scheme-relative `//host/` or a UNC `\\host\share\`) whose path ends in
//!   a script (`.php`, `.jsp`, `.asp`, `.cgi`, `.pl`, `.sh`, ...) with no query, or
//!   a script or text file followed by a final `?` or `#` or cut by a NUL (the
//!   application's own suffix becomes a query: `http://x/shell.txt?`), or a `.txt`
//!   over FTP; or a value that starts with a scheme written in mixed case
//!   (`hTTp://`, a filter evasion).
//!
//! Linear: the normalisation is three passes, and the segment walk is one.

use crate::text::{Words, find_ci};
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
    "etc/ssh/sshd_config",
    "etc/ssh/ssh_host_",
    "nginx.conf",
    "httpd.conf",
    "php.ini",
    "my.cnf",
    "unattend.xml",
    "config/database.yml",
    "config/secrets.yml",
    "config/master.key",
    "database.yml",
    "secrets.yml",
    "appsettings.json",
    "settings.py",
    "application.properties",
    "application.yml",
    "var/run/secrets/",
    "storage/logs/",
    "laravel.log",
    ".aws/",
    ".docker/",
    ".kube/",
    "actuator/env",
    "actuator/heapdump",
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
        || memchr::memmem::find(input, b"//").is_some()
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
    let nul_cut = memchr::memchr(0, input).is_some()
        || find_ci(input, 0, b"%00").is_some()
        || find_ci(input, 0, b"%2500").is_some();
    if remote_include(p, nul_cut) {
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
        // `..;x` is `..` to Tomcat (a path parameter), and `assets..` climbs out of
        // an nginx alias that lacks its slash: no file is named either way.
        if i < p.len()
            && seg.len() > 2
            && (seg.starts_with(b"..;")
                || (seg.ends_with(b"..")
                    && seg[..seg.len() - 2]
                        .iter()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))))
        {
            return Some(Finding::new(
                Class::Traversal,
                "path parameter or alias traversal",
                whole,
            ));
        }
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
    if (escaped && (ups >= 2 || sensitive.is_some())) || (ups >= 2 && sensitive.is_some()) {
        return Some(Finding::new(
            Class::Traversal,
            "path escapes its root",
            whole,
        ));
    }
    if let Some(at) = sensitive {
        // A sensitive name counts as a path, not a word: after a slash, `..`, a
        // drive letter or `file:`.
        // In prose (a forum post about a server's configuration) a path named in
        // passing is a mention; the value must be the path.
        let absolute = at > 0
            && p[at - 1] == b'/'
            && (!crate::text::prose_like(input)
                || p[..at - 1].iter().all(|c| !c.is_ascii_whitespace()));
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

/// Extensions of files a remote include runs or reads.
const SCRIPT_EXTENSIONS: &[&str] = &[
    ".php", ".php3", ".php4", ".php5", ".php7", ".phtml", ".phar", ".inc", ".txt", ".jsp", ".jspx",
    ".asp", ".aspx", ".cgi", ".pl", ".py", ".sh", ".shtml",
];

/// A remote include: a URL to any host (`http`, `https`, `ftp`, a
/// scheme-relative `//host/...`, or a UNC `\\host\share\...`, which normalisation
/// turns into one) whose last path segment is a script with no query of its own, or
/// a script or text file that ends the URL with `?` or `#` or a NUL (so that the
/// application's own suffix becomes a query), or a text file over FTP; or a value
/// that starts with a scheme mixing upper and lower case (`hTTp://`, a filter
/// evasion). The URL starts the value, or (with a scheme) follows `/`, `=`, `?`,
/// `&`, `(` or a quote inside it (`/api/items/http://x/shell.txt?`). `nul_cut`
/// says the raw value had a NUL byte where normalisation stopped (`shell.txt%00`).
fn remote_include(p: &[u8], nul_cut: bool) -> bool {
    let t = p.trim_ascii();
    let starts =
        |at: usize| at == 0 || matches!(t[at - 1], b'/' | b'=' | b'?' | b'&' | b'(' | b'"' | b'\'');
    static SCHEMES: LazyLock<Words> =
        LazyLock::new(|| Words::new(&["http://", "https://", "ftp://"]));
    let mut urls: Vec<(usize, usize)> = SCHEMES
        .find_all(t)
        .filter(|&(_, at, _)| starts(at))
        .map(|(_, at, end)| (at, end))
        .take(8)
        .collect();
    if t.starts_with(b"//") && t.get(2).is_some_and(u8::is_ascii_alphanumeric) {
        urls.push((0, 2));
    }
    urls.into_iter().any(|(at, host_from)| {
        let scheme = &t[at..host_from];
        let mixed =
            scheme.iter().any(u8::is_ascii_uppercase) && scheme.iter().any(u8::is_ascii_lowercase);
        let rest = &t[host_from..];
        let Some(slash) = rest.iter().position(|&c| c == b'/') else {
            return mixed && at == 0;
        };
        let path_end = rest
            .iter()
            .position(|&c| matches!(c, b'?' | b'#'))
            .unwrap_or(rest.len());
        if slash >= path_end {
            return mixed && at == 0;
        }
        let path = &rest[slash..path_end];
        let ext = SCRIPT_EXTENSIONS.iter().find(|e| {
            path.len() > e.len() && path[path.len() - e.len()..].eq_ignore_ascii_case(e.as_bytes())
        });
        let cut = path_end + 1 == rest.len() || nul_cut;
        let no_query = path_end == rest.len();
        // A text file is read, not run: only with the application's suffix cut off
        // (or over FTP, which no page links to); a script runs as it is.
        let ftp = scheme.eq_ignore_ascii_case(b"ftp://");
        let remote = match ext {
            Some(&".txt") => cut || (ftp && no_query),
            Some(_) => cut || no_query,
            None => false,
        };
        (mixed && at == 0) || remote
    })
}

/// Decodes percent escapes (twice), overlong UTF-8 slashes and dots, `%u` escapes
/// of `/`, `\` and `.`, turns backslashes into slashes, folds repeated slashes
/// (a leading `//` and `://` stay), stops at a NUL byte, and drops a trailing
/// `::$DATA` and trailing dots and spaces.
fn normalise(input: &[u8]) -> Vec<u8> {
    let once = percent_decode(input);
    let twice = percent_decode(&once);
    let mut out = Vec::with_capacity(twice.len());
    let mut i = 0;
    while i < twice.len() {
        let b = twice[i];
        // Overlong encodings of `/` (2F), `.` (2E) and `\` (5C).
        if (b == 0xc0 || b == 0xc1)
            && let Some(&n) = twice.get(i + 1)
        {
            let cp = ((b as u32 & 0x1f) << 6) | (n as u32 & 0x3f);
            if matches!(cp, 0x2f | 0x2e | 0x5c) {
                out.push(if cp == 0x2e { b'.' } else { b'/' });
                i += 2;
                continue;
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
            // `//etc//passwd` is `/etc/passwd` to a file API (a leading `//` stays:
            // it starts a host or a share).
            b'\\' | b'/'
                if out.len() > 1 && out.last() == Some(&b'/') && out[out.len() - 2] != b':' => {}
            b'\\' => out.push(b'/'),
            _ => out.push(b),
        }
        i += 1;
    }
    // Windows drops trailing dots and spaces, and `::$DATA` names the file itself.
    if out.len() > 7 && out[out.len() - 7..].eq_ignore_ascii_case(b"::$data") {
        out.truncate(out.len() - 7);
    }
    while out.len() > 1 && matches!(out.last(), Some(b'.' | b' ')) && out[out.len() - 2] != b'.' {
        out.pop();
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
            "ftp://files.attacker.example/ru.txt",
            "https://c2.example.net/shell.php",
            "//evil.example/x/shell.php",
            "\\\\evil.example\\share\\shell.php",
            "hTTp://evil.example/payload",
            "http://evil.example/shell.txt%00",
            "C:\\wIndowS\\WiN.InI.",
            "C:\\inetpub\\wwwroot\\web.config::$DATA",
            "/assets../config/secrets.yml",
            "//var//run//secrets//kubernetes.io//serviceaccount//token",
            "/app/..;/actuator/env",
            "./../config/database.yml#",
            "/var/www/html/uploads/.%2e/../%2e%2e%2f.././config/database.yml",
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
            "https://example.com/index.php?page=2",
            "//cdn.example.com/app.js",
            "see https://example.com/docs/setup.txt for more",
            "2024-01-01",
            "C'est la vie...",
        ] {
            assert!(!hit(s), "false positive: {s}: {:?}", scan(s.as_bytes()));
        }
    }
}
