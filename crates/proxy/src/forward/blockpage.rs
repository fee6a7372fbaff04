//! The answer to a request the forward proxy refuses: an HTML page for browsers,
//! a short plain-text body for everything else, both `403 Forbidden`.
//!
//! [`block_response`] picks the form from the request's `Accept` header: HTML
//! when it lists `text/html` with a non-zero quality (browsers do; `*/*` alone,
//! as curl and most libraries send, gets text). Every value put into the page is
//! HTML-escaped, and the text form replaces control characters, so a hostile
//! host name or rule name can neither inject markup nor forge lines.
//!
//! Serve the answer with `Cache-Control: no-store` ([`CACHE_CONTROL`]): a cached
//! block page would outlive a changed policy.

use std::fmt::Write as _;

use http::StatusCode;

/// The `Cache-Control` value to send with a block page.
pub const CACHE_CONTROL: &str = "no-store";

/// The `Content-Type` of the HTML form.
pub const HTML_CONTENT_TYPE: &str = "text/html; charset=utf-8";

/// The `Content-Type` of the plain-text form.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// What refused the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A category of the block lists (`"gambling"`, `"malware"`).
    Category(String),
    /// A named rule of the policy.
    Rule(String),
}

/// Why and where a request was refused, for the block page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockReason {
    /// The host the client asked for.
    pub host: String,
    /// The category or rule that refused it.
    pub refusal: Refusal,
    /// An id that the user can quote and that the proxy's log carries too
    /// ([`reference_id`] makes one).
    pub reference: String,
}

/// The status, content type and body of a block answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockResponse {
    /// Always `403 Forbidden`.
    pub status: StatusCode,
    /// [`HTML_CONTENT_TYPE`] or [`TEXT_CONTENT_TYPE`].
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

/// A random reference id: 16 lower-case hex digits from the operating system's
/// random source (from the clock and a counter if that fails).
pub fn reference_id() -> String {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        // The low 64 bits of the nanoseconds are the ones that vary.
        let mixed = (nanos as u64) ^ COUNTER.fetch_add(1, Ordering::Relaxed).rotate_left(40);
        bytes = mixed.to_be_bytes();
    }
    let mut out = String::with_capacity(16);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Whether an `Accept` value lists `text/html` (any case) with a quality above 0.
pub fn accepts_html(accept: &[u8]) -> bool {
    let Ok(accept) = std::str::from_utf8(accept) else {
        return false;
    };
    accept.split(',').any(|range| {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim();
        if !media.eq_ignore_ascii_case("text/html") {
            return false;
        }
        for param in parts {
            if let Some((name, value)) = param.split_once('=')
                && name.trim().eq_ignore_ascii_case("q")
            {
                return value.trim().parse::<f32>().is_ok_and(|q| q > 0.0);
            }
        }
        true
    })
}

/// `s` with `&`, `<`, `>`, `"` and `'` as character references.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// `s` with control characters (line breaks included) replaced by `?`.
fn text_clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The answer to a refused request: HTML for a client whose `Accept` (`None`
/// without the header) lists `text/html`, plain text otherwise.
pub fn block_response(accept: Option<&[u8]>, reason: &BlockReason) -> BlockResponse {
    let (what, name) = match &reason.refusal {
        Refusal::Category(c) => ("category", c.as_str()),
        Refusal::Rule(r) => ("rule", r.as_str()),
    };
    if accept.is_some_and(accepts_html) {
        let host = html_escape(&reason.host);
        let name = html_escape(name);
        let reference = html_escape(&reason.reference);
        let body = format!(
            "<!DOCTYPE html>\n\
<html lang=\"en\">\n\
<head>\n\
<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta name=\"robots\" content=\"noindex\">\n\
<title>Access refused</title>\n\
<style>\n\
body {{ font-family: system-ui, sans-serif; max-width: 40em; margin: 4em auto; padding: 0 1em; color: #222; }}\n\
h1 {{ font-size: 1.6em; }}\n\
code {{ background: #f3f3f3; padding: 0.1em 0.3em; word-break: break-all; }}\n\
.ref {{ color: #666; font-size: 0.9em; }}\n\
</style>\n\
</head>\n\
<body>\n\
<h1>Access refused</h1>\n\
<p>The proxy refused access to <code>{host}</code>.</p>\n\
<p>Refused by {what} <strong>{name}</strong>.</p>\n\
<p class=\"ref\">If you think this is a mistake, contact your administrator and quote the reference <code>{reference}</code>.</p>\n\
</body>\n\
</html>\n"
        );
        BlockResponse {
            status: StatusCode::FORBIDDEN,
            content_type: HTML_CONTENT_TYPE,
            body,
        }
    } else {
        let body = format!(
            "403 Forbidden: access to {} refused by {what} {} (reference {})\n",
            text_clean(&reason.host),
            text_clean(name),
            text_clean(&reason.reference)
        );
        BlockResponse {
            status: StatusCode::FORBIDDEN,
            content_type: TEXT_CONTENT_TYPE,
            body,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason() -> BlockReason {
        BlockReason {
            host: "casino.example".into(),
            refusal: Refusal::Category("gambling".into()),
            reference: "0123456789abcdef".into(),
        }
    }

    const FIREFOX: &[u8] =
        b"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8";

    #[test]
    fn accept_header() {
        assert!(accepts_html(FIREFOX));
        assert!(accepts_html(b"TEXT/HTML"));
        assert!(accepts_html(b"application/json, text/html ; q=0.5"));
        assert!(!accepts_html(b"*/*"));
        assert!(!accepts_html(b"text/html;q=0"));
        assert!(!accepts_html(b"text/html;q=0.000"));
        assert!(!accepts_html(b"text/html;q=abc"));
        assert!(!accepts_html(b"application/json"));
        assert!(!accepts_html(b"text/htmlx"));
        assert!(!accepts_html(b""));
        assert!(!accepts_html(b"\xfftext/html"));
    }

    #[test]
    fn browser_gets_html() {
        let r = block_response(Some(FIREFOX), &reason());
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        assert_eq!(r.content_type, "text/html; charset=utf-8");
        assert!(r.body.starts_with("<!DOCTYPE html>"));
        assert!(r.body.contains("<code>casino.example</code>"));
        assert!(
            r.body
                .contains("Refused by category <strong>gambling</strong>.")
        );
        assert!(r.body.contains("<code>0123456789abcdef</code>"));
    }

    #[test]
    fn other_clients_get_text() {
        for accept in [None, Some(&b"*/*"[..]), Some(b"application/json")] {
            let r = block_response(accept, &reason());
            assert_eq!(r.status, StatusCode::FORBIDDEN);
            assert_eq!(r.content_type, "text/plain; charset=utf-8");
            assert_eq!(
                r.body,
                "403 Forbidden: access to casino.example refused by category gambling \
                 (reference 0123456789abcdef)\n"
            );
        }
        let mut rule = reason();
        rule.refusal = Refusal::Rule("no-social\r\nX-Forged: 1".into());
        let r = block_response(None, &rule);
        assert!(r.body.contains("refused by rule no-social??X-Forged: 1 "));
        assert_eq!(r.body.lines().count(), 1);
    }

    #[test]
    fn interpolated_values_are_escaped() {
        let hostile = BlockReason {
            host: "<script>alert('x')</script>.example".into(),
            refusal: Refusal::Rule("a&b \"quoted\"".into()),
            reference: "<img src=x onerror=alert(1)>".into(),
        };
        let r = block_response(Some(b"text/html"), &hostile);
        assert!(!r.body.contains("<script>"));
        assert!(!r.body.contains("<img"));
        assert!(
            r.body
                .contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;.example")
        );
        assert!(
            r.body
                .contains("<strong>a&amp;b &quot;quoted&quot;</strong>")
        );
        assert!(r.body.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert_eq!(html_escape("a\u{0}b\nc"), "a\u{fffd}b\u{fffd}c");
    }

    #[test]
    fn reference_ids() {
        let a = reference_id();
        let b = reference_id();
        assert_eq!(a.len(), 16);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }
}
