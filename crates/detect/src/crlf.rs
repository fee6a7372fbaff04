//! CRLF injection into HTTP or mail headers, and protocol commands (SMTP, IMAP,
//! POP3, FTP, Redis, memcached) or log lines smuggled after a line break.
//!
//! # Grammar
//!
//! ```text
//! attack := eol header-line | eol protocol-line | eol log-line
//!         | eol eol http-start | eol "HTTP/1."
//! eol    := "\r\n" | "\n" | "\r"
//! header-line := http-header ":"                      Set-Cookie, Location, X-..., ...
//!              | mail-header ":" ws* text-with-"@"     To, Cc, Bcc, From, Reply-To, ...
//!              | mail-header ":" ...  Subject, ...: when all before it is one line
//!                                     of at most 128 bytes
//! protocol-line := smtp-command | tag ws imap-command | pop3-command
//! http-start := "HTTP/1." | "<html" | "<script"
//! ```
//!
//! Also after a line break: an FTP command that changes files (`STOR `, `SITE `,
//! `RNFR `, ...), a Redis or memcached command that wipes or takes over the store
//! (`FLUSHALL`, `flush_all`, `SLAVEOF `, `CONFIG SET `, ..., case ignored; a storage
//! command `set key 0 0 4`, and with `\r\n` line breaks `delete key` or `get key`
//! alone on its line), and a forged log line (a date with a time, `[15/Jan/2024:`,
//! or an address and ` - `). U+560D and U+560A, which some servers truncate to `\r`
//! and `\n`, count as line breaks.
//!
//! A line break in a text area is ordinary; what counts is what starts the next
//! line. Mail address headers need an address (`Bcc: x@y`): a letter that says
//! `To: Bob` on a line of its own is not an injection. Mail and FTP commands must be
//! written as servers expect them (upper case, with their arguments' shape):
//! `RCPT TO:<`, `MAIL FROM:<`, `A1 LOGIN`, `V100 CAPABILITY`, `STOR x`.
//!
//! Linear: each line break is looked at once, with a bounded look-ahead.

use crate::text::starts_with_ci;
use crate::{Class, Finding};

/// Response headers an attacker adds by splitting a response.
const HTTP_HEADERS: &[&str] = &[
    "set-cookie",
    "location",
    "content-length",
    "content-type",
    "content-disposition",
    "refresh",
    "access-control-allow-origin",
    "access-control-allow-credentials",
    "x-xss-protection",
    "content-security-policy",
    "cache-control",
    "transfer-encoding",
    "host",
    "cookie",
    "x-forwarded-for",
    "x-forwarded-host",
    "authorization",
    "www-authenticate",
    "referer",
    "origin",
    "user-agent",
    "content-encoding",
    "connection",
    "upgrade",
    "link",
    "strict-transport-security",
];

/// Mail headers that add recipients or senders.
const MAIL_ADDRESS_HEADERS: &[&str] = &[
    "to",
    "cc",
    "bcc",
    "from",
    "reply-to",
    "sender",
    "return-path",
];

/// Mail headers that change the message itself.
const MAIL_HEADERS: &[&str] = &[
    "subject",
    "mime-version",
    "content-transfer-encoding",
    "x-mailer",
    "x-priority",
    "message-id",
];

const SMTP: &[&str] = &[
    "MAIL FROM:",
    "RCPT TO:",
    "HELO ",
    "EHLO ",
    "DATA",
    "QUIT",
    "RSET",
    "AUTH ",
    "VRFY ",
    "EXPN ",
    "STARTTLS",
];

const IMAP: &[&str] = &[
    "LOGIN",
    "CAPABILITY",
    "SELECT",
    "EXAMINE",
    "FETCH",
    "STORE",
    "SEARCH",
    "LIST",
    "LSUB",
    "CREATE",
    "DELETE",
    "RENAME",
    "LOGOUT",
    "NOOP",
    "AUTHENTICATE",
    "APPEND",
    "COPY",
    "EXPUNGE",
    "UID",
    "STATUS",
    "CLOSE",
    "SUBSCRIBE",
];

const POP3: &[&str] = &[
    "USER ", "PASS ", "RETR ", "DELE ", "STAT", "LIST ", "TOP ", "APOP ",
];

/// FTP commands that change files (written as servers expect them, upper case, with
/// an argument).
const FTP: &[&str] = &[
    "STOR ", "STOU ", "APPE ", "SITE ", "RNFR ", "RNTO ", "MKD ", "RMD ", "CWD ", "PORT ",
];

/// Redis and memcached commands that wipe, reconfigure or take over the store.
const STORE_COMMANDS: &[&str] = &[
    "flushall",
    "flushdb",
    "flush_all",
    "slaveof ",
    "replicaof ",
    "config set ",
    "module load ",
    "debug ",
    "shutdown",
];

/// Unicode characters that some servers truncate to their low byte, `\r` and `\n`
/// (U+560D and U+560A), as UTF-8.
const WIDE_CR: &[u8] = "\u{560d}".as_bytes();
const WIDE_LF: &[u8] = "\u{560a}".as_bytes();

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    memchr::memchr2(b'\r', b'\n', input).is_some()
        || memchr::memmem::find(input, WIDE_CR).is_some()
        || memchr::memmem::find(input, WIDE_LF).is_some()
}

/// The value with U+560D and U+560A read as `\r` and `\n` (none: no such character).
fn narrowed(input: &[u8]) -> Option<Vec<u8>> {
    if memchr::memmem::find(input, WIDE_CR).is_none()
        && memchr::memmem::find(input, WIDE_LF).is_none()
    {
        return None;
    }
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i..].starts_with(WIDE_CR) {
            out.push(b'\r');
            i += WIDE_CR.len();
        } else if input[i..].starts_with(WIDE_LF) {
            out.push(b'\n');
            i += WIDE_LF.len();
        } else {
            out.push(input[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Scans `input` for CRLF injection.
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    let wide = narrowed(input);
    let s = wide.as_deref().unwrap_or(input);
    let mut from = 0;
    while let Some(rel) = memchr::memchr2(b'\r', b'\n', &s[from..]) {
        let at = from + rel;
        let mut k = at + 1;
        if s[at] == b'\r' && s.get(k) == Some(&b'\n') {
            k += 1;
        }
        from = k;
        let found = |rule| Some(Finding::new(Class::Crlf, rule, at..(k + 32).min(s.len())));
        // A second line break right away: the end of the headers.
        let mut j = k;
        if matches!(s.get(j), Some(b'\r')) {
            j += 1;
        }
        if matches!(s.get(j), Some(b'\n')) && j > k - 1 {
            let body = j + 1;
            if starts_with_ci(s, body, b"http/1.")
                || starts_with_ci(s, body, b"<html")
                || starts_with_ci(s, body, b"<script")
            {
                return found("response split into a second response");
            }
        }
        if starts_with_ci(s, k, b"http/1.") {
            return found("response split into a second response");
        }
        let name_end = k + s[k..]
            .iter()
            .take(64)
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'-')
            .count();
        let name = &s[k..name_end];
        if !name.is_empty() && s.get(name_end) == Some(&b':') {
            if crate::text::one_of(name, HTTP_HEADERS)
                || (name.len() > 2 && starts_with_ci(name, 0, b"x-"))
            {
                return found("line break, then a header");
            }
            let line_end = s[name_end..]
                .iter()
                .take(512)
                .position(|&c| c == b'\r' || c == b'\n')
                .map_or(s.len().min(name_end + 512), |e| name_end + e);
            let value = &s[name_end + 1..line_end];
            if crate::text::one_of(name, MAIL_ADDRESS_HEADERS) && value.contains(&b'@') {
                return found("line break, then a mail address header");
            }
            // Mail headers right after a short single line (a subject or an address
            // field), not inside a long text.
            if crate::text::one_of(name, MAIL_HEADERS) && at <= 128 && !s[..at].contains(&b'\n') {
                return found("line break, then a mail header");
            }
        }
        if let Some(rule) = protocol_line(s, k, k - at == 2) {
            return found(rule);
        }
        if forged_log_line(&s[k..]) {
            return found("line break, then a forged log line");
        }
    }
    None
}

/// A log line's start: a date (`2024-01-15 09:05:31`, `[15/Jan/2024:09:05:31`) or
/// an IPv4 address followed by ` - ` (the common log format).
fn forged_log_line(line: &[u8]) -> bool {
    let digits = |from: usize, n: usize| {
        line.get(from..from + n)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    // A date with a time (`2024-03-09: shipped` is a note).
    let iso = digits(0, 4)
        && line.get(4) == Some(&b'-')
        && digits(5, 2)
        && line.get(7) == Some(&b'-')
        && digits(8, 2)
        && matches!(line.get(10), Some(b' ' | b'T'))
        && digits(11, 2)
        && line.get(13) == Some(&b':');
    let clf = line.first() == Some(&b'[') && digits(1, 2) && line.get(3) == Some(&b'/');
    let ip_end = line
        .iter()
        .take(15)
        .take_while(|c| c.is_ascii_digit() || **c == b'.')
        .count();
    let ip = ip_end >= 7
        && line[..ip_end].iter().filter(|&&c| c == b'.').count() == 3
        && line[ip_end..].starts_with(b" - ");
    iso || clf || ip
}

/// A mail, FTP or key-value store protocol command at the start of a line.
/// `crlf` says the line break was `\r\n`, as protocol lines end.
fn protocol_line(s: &[u8], k: usize, crlf: bool) -> Option<&'static str> {
    let line = &s[k..];
    for c in FTP {
        if line.starts_with(c.as_bytes())
            && line
                .get(c.len())
                .is_some_and(|n| !crate::text::is_space(*n))
        {
            return Some("line break, then an FTP command");
        }
    }
    for c in STORE_COMMANDS {
        if starts_with_ci(line, 0, c.as_bytes())
            && (c.ends_with(' ')
                || line
                    .get(c.len())
                    .is_none_or(|n| matches!(n, b'\r' | b'\n' | b' ')))
        {
            return Some("line break, then a Redis or memcached command");
        }
    }
    // memcached's storage commands: `set key flags exptime bytes`; and with a
    // protocol line break, `delete key` / `get key` alone on their line.
    let words: Vec<&[u8]> = line
        .iter()
        .take(128)
        .position(|&c| c == b'\r' || c == b'\n')
        .map_or(&line[..line.len().min(128)], |e| &line[..e])
        .split(|&c| c == b' ')
        .collect();
    if let [cmd, key, rest @ ..] = &words[..] {
        let numbers = rest.len() >= 3
            && rest[..3]
                .iter()
                .all(|w| !w.is_empty() && w.iter().all(u8::is_ascii_digit));
        if crate::text::one_of(cmd, &["set", "add", "replace", "append", "prepend", "cas"])
            && !key.is_empty()
            && numbers
        {
            return Some("line break, then a memcached command");
        }
        if crlf
            && rest.is_empty()
            && !key.is_empty()
            && crate::text::one_of(cmd, &["delete", "get", "gets", "incr", "decr", "touch"])
        {
            return Some("line break, then a memcached command");
        }
    }
    for c in SMTP {
        if line.starts_with(c.as_bytes()) {
            let rest = &line[c.len()..];
            let shaped = match *c {
                // An address on the same line (read up to its end, at most 256 bytes).
                "MAIL FROM:" | "RCPT TO:" => {
                    let end = rest
                        .iter()
                        .take(256)
                        .position(|c| matches!(c, b'\r' | b'\n'))
                        .unwrap_or(rest.len().min(256));
                    let addr = &rest[..end];
                    addr.trim_ascii_start().first() == Some(&b'<') || addr.contains(&b'@')
                }
                "DATA" | "QUIT" | "RSET" | "STARTTLS" => {
                    rest.is_empty() || matches!(rest[0], b'\r' | b'\n')
                }
                _ => rest.first().is_some_and(|c| c.is_ascii_alphanumeric()),
            };
            if shaped {
                return Some("line break, then an SMTP command");
            }
        }
    }
    // IMAP: a tag, then a command.
    let tag_end = line
        .iter()
        .take(16)
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'.')
        .count();
    if tag_end > 0
        && line[..tag_end].iter().any(u8::is_ascii_digit)
        && line.get(tag_end) == Some(&b' ')
    {
        let cmd = &line[tag_end + 1..];
        if IMAP.iter().any(|c| {
            cmd.starts_with(c.as_bytes())
                && cmd.get(c.len()).is_none_or(|n| !n.is_ascii_alphabetic())
        }) {
            return Some("line break, then an IMAP command");
        }
    }
    for c in POP3 {
        if line.starts_with(c.as_bytes())
            && (c.ends_with(' ') || line.get(c.len()).is_none_or(|n| matches!(n, b'\r' | b'\n')))
        {
            // `USER ` / `PASS ` followed by one word on the line.
            let rest = &line[c.len()..];
            let word_end = rest
                .iter()
                .position(|&c| c == b'\r' || c == b'\n')
                .unwrap_or(rest.len());
            if !rest[..word_end].contains(&b' ') {
                return Some("line break, then a POP3 command");
            }
        }
    }
    None
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
            "value\r\nSet-Cookie: session=evil",
            "/\r\nLocation: http://evil.example",
            "x\r\n\r\nHTTP/1.1 200 OK",
            "x\r\n\r\n<html>owned</html>",
            "bob@example.com\nBcc: victim@example.com",
            "subject\r\nCc: a@example.com",
            "Hello\r\nContent-Type: text/html",
            "x\r\nRCPT TO:<victim@example.com>",
            "x\r\nMAIL FROM:<a@b.example>\r\nDATA\r\n",
            "jdoe@example.org\u{560d}\u{560a}Cc: x@corp.example",
            "a.txt\nSTOR ru.php",
            "a.txt\r\nSITE CHMOD 777 .",
            "x\nflush_all",
            "x\r\nSLAVEOF evil.example 1337",
            "x\r\nCONFIG SET dir /var/www/html",
            "k\r\nset key 0 0 4\r\nabcd",
            "k\r\ndelete session",
            "alice\n2024-03-09 13:14:16 INFO User root logged in successfully",
            "admin%0a127.0.0.1 - admin [2024-10-01 02:21:38] \"GET /admin\""
                .replace("%0a", "\n")
                .as_str(),
            "sa\r\nAuthorization: Basic d2ViOnhlYmVqbw==",
            "INBOX\r\nV100 CAPABILITY\r\nV101 FETCH 4791",
            "x\r\nA1 LOGIN admin secret",
            "name\r\nX-Injected: 1",
            "a\nUSER admin\nPASS secret",
        ] {
            assert!(hit(s), "missed: {s:?}");
        }
    }

    #[test]
    fn benign() {
        for s in [
            "Dear Bob,\nthanks for the note.\nTo: everyone in the team\nBest",
            "line one\r\nline two\r\n",
            "Shopping list:\n- milk\n- eggs",
            "Note:\nTodo: buy milk",
            "He said\nquit it\nand left",
            "Select the option\nthen press data",
            "Subject of the essay\n\nA long text follows here with many words in it",
            "Changelog\n2024-03-09: shipped the new search\n2024-03-10: fixed a typo",
            "Please\ndelete it later",
            "Notes\nset the table for 4 people",
        ] {
            assert!(!hit(s), "false positive: {s:?}: {:?}", scan(s.as_bytes()));
        }
    }
}
