//! Backslash escapes: `jsDecode`, `cssDecode`, `escapeSeqDecode`.

use std::borrow::Cow;

use super::hex::{digit, is_hex, pair};
use super::out::Out;
use super::text::is_c_space;
use super::url::wide_to_byte;

#[inline]
fn is_octal(b: u8) -> bool {
    (b'0'..=b'7').contains(&b)
}

/// The byte for a one-letter C escape (`\a \b \f \n \r \t \v`), if `b` is one.
#[inline]
fn c_escape(b: u8) -> Option<u8> {
    Some(match b {
        b'a' => 0x07,
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'v' => 0x0b,
        _ => return None,
    })
}

/// Number of octal digits (at most 3) starting at `input[start]`.
#[inline]
fn octal_run(input: &[u8], start: usize) -> usize {
    input[start.min(input.len())..]
        .iter()
        .take(3)
        .take_while(|&&b| is_octal(b))
        .count()
}

/// Value of the octal digits `input[start..start + len]`.
#[inline]
fn octal_value(input: &[u8], start: usize, len: usize) -> u32 {
    input[start..start + len]
        .iter()
        .fold(0, |acc, &b| acc * 8 + u32::from(b - b'0'))
}

/// `t:jsDecode`: JavaScript escapes. `\uHHHH` (lower-case `u`) becomes one byte as in
/// `urlDecodeUni`; `\xHH` (lower-case `x`) the byte; `\OOO` up to three octal digits, only
/// as many as keep the value within a byte; `\a \b \f \n \r \t \v` the control characters;
/// `\` before any other byte is dropped. A lone trailing backslash is kept.
pub(super) fn js_decode(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let mut out = Out::new(input);
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'\\', &input[i..]) {
        let p = i + off;
        out.copy_input(i, p);
        if p + 5 < n && input[p + 1] == b'u' && input[p + 2..p + 6].iter().all(|&b| is_hex(b)) {
            let high = pair(input[p + 2], input[p + 3]);
            let low = pair(input[p + 4], input[p + 5]);
            out.push(wide_to_byte(high, low));
            i = p + 6;
        } else if p + 3 < n && input[p + 1] == b'x' && is_hex(input[p + 2]) && is_hex(input[p + 3])
        {
            out.push(pair(input[p + 2], input[p + 3]));
            i = p + 4;
        } else if p + 1 < n && is_octal(input[p + 1]) {
            let mut len = octal_run(input, p + 1);
            // Three digits only when the first is 0..=3 (the value then fits a byte).
            if len == 3 && input[p + 1] > b'3' {
                len = 2;
            }
            // At most 0o377 here, so the cast is exact.
            out.push(octal_value(input, p + 1, len) as u8);
            i = p + 1 + len;
        } else if p + 1 < n {
            let c = input[p + 1];
            out.push(c_escape(c).unwrap_or(c));
            i = p + 2;
        } else {
            // Trailing backslash.
            out.push(b'\\');
            i = p + 1;
        }
    }
    out.copy_input(i, n);
    out.finish()
}

/// `t:cssDecode`: CSS 2 escapes. A backslash and 1 to 6 hex digits become one byte (the
/// value's low byte, with the full-width ASCII adjustment when the digits say U+FFxx) and
/// swallow one following whitespace byte; backslash-newline disappears; a backslash before
/// any other byte is dropped; a trailing backslash disappears.
///
/// NUL bytes, raw or decoded, are kept, as in current libmodsecurity; releases before
/// 3.0.13 (Debian's 3.0.9 among them) cut the result at the first NUL, an evasion aid this
/// does not reproduce.
pub(super) fn css_decode(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let mut out = Out::new(input);
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'\\', &input[i..]) {
        let p = i + off;
        out.copy_input(i, p);
        let s = p + 1; // first byte after the backslash
        if s >= n {
            // Trailing backslash: dropped.
            i = s;
            break;
        }
        let j = input[s..]
            .iter()
            .take(6)
            .take_while(|&&b| is_hex(b))
            .count();
        if j > 0 {
            let h = &input[s..s + j];
            let byte = match j {
                1 => digit(h[0]),
                2 | 3 => pair(h[j - 2], h[j - 1]),
                _ => {
                    let low = pair(h[j - 2], h[j - 1]);
                    // The full-width check applies when the digits spell 0xFFxx with any
                    // leading zeros: 4 digits, 5 starting with 0, 6 starting with 00.
                    let wide = match j {
                        4 => true,
                        5 => h[0] == b'0',
                        _ => h[0] == b'0' && h[1] == b'0',
                    };
                    if wide
                        && h[j - 4].eq_ignore_ascii_case(&b'f')
                        && h[j - 3].eq_ignore_ascii_case(&b'f')
                    {
                        wide_to_byte(0xff, low)
                    } else {
                        low
                    }
                }
            };
            out.push(byte);
            let mut next = s + j;
            if next < n && is_c_space(input[next]) {
                next += 1;
            }
            i = next;
        } else if input[s] == b'\n' {
            i = s + 1;
        } else {
            out.push(input[s]);
            i = s + 1;
        }
    }
    out.copy_input(i, n);
    out.finish()
}

/// `t:escapeSeqDecode`: ANSI C escapes `\a \b \f \n \r \t \v \\ \? \' \"`, `\xHH` (`x` in
/// either case) and `\OOO` (1 to 3 octal digits; the value's low byte). As in ModSecurity,
/// an unrecognised or incomplete escape drops the backslash and keeps the next byte; a
/// trailing backslash is kept.
pub(super) fn escape_seq_decode(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let mut out = Out::new(input);
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'\\', &input[i..]) {
        let p = i + off;
        out.copy_input(i, p);
        if p + 1 >= n {
            out.push(b'\\');
            i = p + 1;
            break;
        }
        let c = input[p + 1];
        if let Some(b) = c_escape(c) {
            out.push(b);
            i = p + 2;
        } else if matches!(c, b'\\' | b'?' | b'\'' | b'"') {
            out.push(c);
            i = p + 2;
        } else if (c == b'x' || c == b'X')
            && p + 3 < n
            && is_hex(input[p + 2])
            && is_hex(input[p + 3])
        {
            out.push(pair(input[p + 2], input[p + 3]));
            i = p + 4;
        } else if is_octal(c) {
            let len = octal_run(input, p + 1);
            // Up to 0o777: keep the low byte, as the C code's char store does.
            out.push((octal_value(input, p + 1, len) & 0xff) as u8);
            i = p + 1 + len;
        } else {
            out.push(c);
            i = p + 2;
        }
    }
    out.copy_input(i, n);
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn borrowed(c: Cow<'_, [u8]>) -> bool {
        matches!(c, Cow::Borrowed(_))
    }

    #[test]
    fn js() {
        assert_eq!(
            &*js_decode(br"\x41\u0041\uff21\101\7\477\n\z\"),
            b"AAAA\x07'7\nz\\"
        );
        assert_eq!(&*js_decode(br"\U0041\X41\u004"), b"U0041X41u004");
        assert_eq!(&*js_decode(br"\8"), b"8");
        assert_eq!(&*js_decode(br"\377\400"), b"\xff\x200");
        assert_eq!(&*js_decode(br#"\\\'\"\?"#), br#"\'"?"#);
        assert_eq!(&*js_decode(br"\a\b\f\r\t\v"), b"\x07\x08\x0c\r\t\x0b");
        assert_eq!(&*js_decode(br"\x4"), b"x4");
        assert_eq!(&*js_decode(b"\\"), b"\\");
        assert_eq!(&*js_decode(b"\\\xff\\\x00"), b"\xff\x00");
        assert_eq!(&*js_decode(b""), b"");
        assert!(borrowed(js_decode(b"alert(1)")));
    }

    #[test]
    fn css() {
        assert_eq!(
            &*css_decode(b"\\41 x\\041\\0041\\00041\\000041\\ff21\\0ff21\\00ff21\\\nq\\"),
            b"AxAAAAAAAq"
        );
        assert_eq!(&*css_decode(br"\g\4142434445464748"), b"gC4445464748");
        assert_eq!(&*css_decode(b"\\41\t"), b"A");
        assert_eq!(&*css_decode(b"\\41  "), b"A ");
        assert_eq!(&*css_decode(br"\a"), b"\x0a");
        assert_eq!(&*css_decode(br"\1ff21"), b"\x21");
        assert_eq!(&*css_decode(br"\ff5f"), b"\x5f");
        // The reference manual's example: ja\vascript -> javascript.
        assert_eq!(&*css_decode(br"ja\vascript"), b"javascript");
        assert_eq!(&*css_decode(b"\\"), b"");
        assert_eq!(&*css_decode(b"a\\0b\x00c"), b"a\x0b\x00c");
        assert_eq!(&*css_decode(b"a\\0 b"), b"a\x00b");
        assert_eq!(&*css_decode(b""), b"");
        assert!(borrowed(css_decode(b"color: red")));
    }

    #[test]
    fn escape_seq() {
        assert_eq!(
            &*escape_seq_decode(br"\x41\X41\101\777\n\z\"),
            b"AAA\xff\nz\\"
        );
        assert_eq!(&*escape_seq_decode(br"\x4"), b"x4");
        assert_eq!(&*escape_seq_decode(br"\8\9"), b"89");
        assert_eq!(&*escape_seq_decode(br#"\\\?\'\""#), br#"\?'""#);
        assert_eq!(
            &*escape_seq_decode(br"\a\b\f\r\t\v"),
            b"\x07\x08\x0c\r\t\x0b"
        );
        assert_eq!(&*escape_seq_decode(br"\0"), b"\x00");
        assert_eq!(&*escape_seq_decode(b"\\\xff"), b"\xff");
        assert_eq!(&*escape_seq_decode(b""), b"");
        assert!(borrowed(escape_seq_decode(b"no escapes")));
    }
}
