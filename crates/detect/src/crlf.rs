//! CRLF injection into HTTP or mail headers, and mail protocol commands (SMTP,
//! IMAP, POP3) smuggled after a line break.
//!
//! # Grammar
//!
//! ```text
//! attack := eol header-line | eol protocol-line | eol eol http-start
//! eol    := "\r\n" | "\n" | "\r"
//! header-line := http-header ":"                      Set-Cookie, Location, ...
//!              | mail-header ":" ws* text-with-"@"     To, Cc, Bcc, From, Reply-To, ...
//!              | mail-header ":" ws* ...  when the line before is one line of text
//! protocol-line := smtp-command | tag ws imap-command | pop3-command
//! http-start := "HTTP/1." | "<html" | "<script"
//! ```
//!
//! A line break in a text area is ordinary; what counts is what starts the next
//! line. Mail address headers need an address (`Bcc: x@y`): a letter that says
//! `To: Bob` on a line of its own is not an injection. Protocol commands must be
//! written as servers expect them (upper case, with their arguments' shape):
//! `RCPT TO:<`, `MAIL FROM:<`, `A1 LOGIN`, `V100 CAPABILITY`.
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

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    memchr::memchr2(b'\r', b'\n', input).is_some()
}

/// Scans `input` for CRLF injection.
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    let s = input;
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
        if let Some(rule) = protocol_line(s, k) {
            return found(rule);
        }
    }
    None
}

/// A mail protocol command at the start of a line.
fn protocol_line(s: &[u8], k: usize) -> Option<&'static str> {
    let line = &s[k..];
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
        ] {
            assert!(!hit(s), "false positive: {s:?}: {:?}", scan(s.as_bytes()));
        }
    }
}
