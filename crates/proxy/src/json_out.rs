//! JSON written straight into a `String`, for the encoders that run once per
//! request (the OTLP span and log records).
//!
//! `serde_json` serves everywhere else. Here its derive-driven serializer cost
//! more than the request's logging itself: a span of twenty attributes went
//! through a nested map serializer per attribute, and its string escaping walks
//! byte by byte. These writers append fixed keys as they are and escape values
//! eight bytes at a time, copying the runs that need no escape whole.

/// Appends `s` as a JSON string, quotes included.
pub fn push_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    push_escaped(out, s);
    out.push('"');
}

/// Whether any of the eight bytes of `w` needs an escape in a JSON string: a
/// control character (below 0x20), `"` or `\`.
fn needs_escape(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte below 0x20; then a byte equal to '"' or '\' (a zero byte after the
    // XOR). Both tests are exact for "some byte", not per byte.
    let below = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    below | zero(w ^ (ONES * u64::from(b'"'))) | zero(w ^ (ONES * u64::from(b'\\'))) != 0
}

/// What each byte becomes inside a JSON string: 0 for itself, else the letter
/// after the backslash (`u` for `\u00XX`).
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = b'u';
        c += 1;
    }
    t[b'\n' as usize] = b'n';
    t[b'\r' as usize] = b'r';
    t[b'\t' as usize] = b't';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Appends `s` escaped for the inside of a JSON string.
pub fn push_escaped(out: &mut String, s: &str) {
    let b = s.as_bytes();
    let mut start = 0; // the first byte not yet copied
    let mut i = 0;
    while i < b.len() {
        // Whole words with nothing to escape are skipped eight bytes at a time.
        while let Some(chunk) = b.get(i..i + 8) {
            if needs_escape(u64::from_le_bytes(chunk.try_into().expect("eight bytes"))) {
                break;
            }
            i += 8;
        }
        // Then the bytes of one word (or the tail) one by one, through the table.
        let end = (i + 8).min(b.len());
        while i < end {
            let c = b[i];
            let e = ESCAPE[usize::from(c)];
            if e == 0 {
                i += 1;
                continue;
            }
            // `i` is at an ASCII byte: `start..i` is whole characters.
            out.push_str(&s[start..i]);
            if e == b'u' {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(c >> 4)]));
                out.push(char::from(HEX[usize::from(c & 15)]));
            } else {
                out.push('\\');
                out.push(char::from(e));
            }
            i += 1;
            start = i;
        }
    }
    out.push_str(&s[start..]);
}

/// Appends a 64-bit integer as a JSON string (OTLP's JSON encoding writes them
/// so).
pub fn push_int_str(out: &mut String, v: i64) {
    out.push('"');
    out.push_str(itoa::Buffer::new().format(v));
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(s: &str) -> String {
        let mut out = String::new();
        push_str(&mut out, s);
        out
    }

    #[test]
    fn strings_are_escaped_as_serde_json_reads_them() {
        let cases = [
            "",
            "plain ascii, longer than eight bytes",
            "\"",
            "a\"b\\c",
            "line\nbreak\r\ttab",
            "\u{0}\u{1}\u{1f}\u{7f}",
            "é€😀 unicode next to \" quotes \\ and \u{8} a backspace",
            "{\"time\":\"2026\",\"uri\":\"/a?b=\\\"c\\\"\"}",
        ];
        for s in cases {
            let q = quoted(s);
            let back: String = serde_json::from_str(&q).unwrap_or_else(|e| panic!("{q}: {e}"));
            assert_eq!(back, s, "{q}");
        }
        // Every position of an escape relative to the eight-byte words.
        for len in 0..20 {
            for at in 0..len {
                for special in ['"', '\\', '\n', '\u{1}', 'é'] {
                    let mut s: String = "x".repeat(len);
                    s.replace_range(at..at + 1, &special.to_string());
                    let back: String = serde_json::from_str(&quoted(&s)).unwrap();
                    assert_eq!(back, s);
                }
            }
        }
        assert_eq!(quoted("a\"b"), "\"a\\\"b\"");
        assert_eq!(quoted("\u{1}"), "\"\\u0001\"");
    }

    #[test]
    fn the_word_test_finds_every_byte_that_needs_an_escape() {
        for b in 0..=255u8 {
            let needs = b < 0x20 || b == b'"' || b == b'\\';
            for at in 0..8 {
                let mut w = [b'a'; 8];
                w[at] = b;
                assert_eq!(needs_escape(u64::from_le_bytes(w)), needs, "{b:#x} at {at}");
            }
        }
    }

    #[test]
    fn integers_are_strings() {
        let mut out = String::new();
        push_int_str(&mut out, -12);
        assert_eq!(out, "\"-12\"");
    }
}
