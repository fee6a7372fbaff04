//! Content-Type sniffing for reflected bodies that name no Content-Type.
//!
//! albedo is written in Go, whose HTTP server labels a body without a Content-Type header by
//! sniffing its first 512 bytes (the WHATWG MIME sniffing algorithm). A WAF's response-body
//! rules only look at configured MIME types, so the label matters to the CRS tests. This is
//! the subset of that algorithm that tells text, HTML, XML and common binary formats apart.

/// How many leading bytes the sniffer looks at.
const SNIFF_LEN: usize = 512;

/// Tags whose presence (after leading whitespace, case-insensitively, followed by a space or
/// `>`) marks a body as HTML.
const HTML_TAGS: &[&[u8]] = &[
    b"<!DOCTYPE HTML",
    b"<HTML",
    b"<HEAD",
    b"<SCRIPT",
    b"<IFRAME",
    b"<H1",
    b"<DIV",
    b"<FONT",
    b"<TABLE",
    b"<A",
    b"<STYLE",
    b"<TITLE",
    b"<B",
    b"<BODY",
    b"<BR",
    b"<P",
    b"<!--",
];

/// Exact prefixes (no whitespace skipping) and the type they mean.
const PREFIXES: &[(&[u8], &str)] = &[
    (b"%PDF-", "application/pdf"),
    (b"%!PS-Adobe-", "application/postscript"),
    (b"\xFE\xFF", "text/plain; charset=utf-16be"),
    (b"\xFF\xFE", "text/plain; charset=utf-16le"),
    (b"\xEF\xBB\xBF", "text/plain; charset=utf-8"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"\x89PNG\x0D\x0A\x1A\x0A", "image/png"),
    (b"\xFF\xD8\xFF", "image/jpeg"),
    (b"BM", "image/bmp"),
    (b"\x1F\x8B\x08", "application/x-gzip"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x00asm", "application/wasm"),
];

/// Returns the Content-Type Go's `http.DetectContentType` would give `body` for the formats
/// this sniffer knows: HTML, XML, PDF, PostScript, byte-order marks, GIF, PNG, JPEG, BMP,
/// gzip, zip, WebAssembly, else plain text or `application/octet-stream`.
pub fn sniff_content_type(body: &[u8]) -> &'static str {
    let data = &body[..body.len().min(SNIFF_LEN)];
    let trimmed = {
        let start = data
            .iter()
            .position(|b| !matches!(b, b'\t' | b'\n' | 0x0C | b'\r' | b' '))
            .unwrap_or(data.len());
        &data[start..]
    };
    for tag in HTML_TAGS {
        if trimmed.len() > tag.len()
            && trimmed[..tag.len()].eq_ignore_ascii_case(tag)
            && matches!(trimmed[tag.len()], b' ' | b'>')
        {
            return "text/html; charset=utf-8";
        }
    }
    if trimmed.starts_with(b"<?xml") {
        return "text/xml; charset=utf-8";
    }
    for (prefix, mime) in PREFIXES {
        if data.starts_with(prefix) {
            return mime;
        }
    }
    let binary = data
        .iter()
        .any(|&b| matches!(b, 0x00..=0x08 | 0x0B | 0x0E..=0x1A | 0x1C..=0x1F));
    if binary {
        "application/octet-stream"
    } else {
        "text/plain; charset=utf-8"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text() {
        assert_eq!(sniff_content_type(b"hello"), "text/plain; charset=utf-8");
        assert_eq!(
            sniff_content_type(br#"{"a": "json is text"}"#),
            "text/plain; charset=utf-8"
        );
        assert_eq!(sniff_content_type(b""), "text/plain; charset=utf-8");
    }

    #[test]
    fn html() {
        assert_eq!(
            sniff_content_type(b"  \n<html><body>x</body></html>"),
            "text/html; charset=utf-8"
        );
        assert_eq!(
            sniff_content_type(b"<!doctype html>"),
            "text/html; charset=utf-8"
        );
        assert_eq!(sniff_content_type(b"<p>x</p>"), "text/html; charset=utf-8");
        // A tag name that merely starts like a known one is not HTML.
        assert_eq!(
            sniff_content_type(b"<pre>x</pre>"),
            "text/plain; charset=utf-8"
        );
        assert_eq!(sniff_content_type(b"<html"), "text/plain; charset=utf-8");
    }

    #[test]
    fn xml_and_binary() {
        assert_eq!(
            sniff_content_type(b"<?xml version=\"1.0\"?><a/>"),
            "text/xml; charset=utf-8"
        );
        assert_eq!(sniff_content_type(b"%PDF-1.7"), "application/pdf");
        assert_eq!(
            sniff_content_type(b"\x1F\x8B\x08\x00"),
            "application/x-gzip"
        );
        assert_eq!(sniff_content_type(b"ab\x00cd"), "application/octet-stream");
        assert_eq!(
            sniff_content_type(b"\xFF\xFEa\x00"),
            "text/plain; charset=utf-16le"
        );
    }

    #[test]
    fn only_the_first_512_bytes_count() {
        let mut body = vec![b'a'; 600];
        body[550] = 0;
        assert_eq!(sniff_content_type(&body), "text/plain; charset=utf-8");
        body[100] = 0;
        assert_eq!(sniff_content_type(&body), "application/octet-stream");
    }
}
