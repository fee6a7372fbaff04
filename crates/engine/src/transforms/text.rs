//! Byte-level text transformations: case, whitespace, NUL bytes, trimming, `cmdLine`,
//! parity and `length`.

use std::borrow::Cow;

use super::out::{Dense, Out};
use super::swar;

/// Whitespace as C's `isspace` sees it in the "C" locale: space, `\t`, `\n`, `\v`, `\f`, `\r`.
#[inline]
pub(super) fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The non-breaking space byte, which `removeWhitespace` removes too.
const NBSP: u8 = 0xa0;

/// The lead byte of NBSP in UTF-8 (`C2 A0`). ModSecurity v3's `removeWhitespace` removes
/// this byte wherever it appears, so this does too.
const NBSP_UTF8_LEAD: u8 = 0xc2;

/// `t:lowercase`: ASCII letters only; other bytes are kept.
pub(super) fn lowercase(input: &[u8]) -> Cow<'_, [u8]> {
    match input.iter().position(u8::is_ascii_uppercase) {
        None => Cow::Borrowed(input),
        Some(first) => {
            let mut v = input.to_vec();
            v[first..].make_ascii_lowercase();
            Cow::Owned(v)
        }
    }
}

/// `t:uppercase`: ASCII letters only; other bytes are kept.
pub(super) fn uppercase(input: &[u8]) -> Cow<'_, [u8]> {
    match input.iter().position(u8::is_ascii_lowercase) {
        None => Cow::Borrowed(input),
        Some(first) => {
            let mut v = input.to_vec();
            v[first..].make_ascii_uppercase();
            Cow::Owned(v)
        }
    }
}

/// The input without leading C whitespace.
fn strip_left(input: &[u8]) -> &[u8] {
    let start = input
        .iter()
        .position(|&b| !is_c_space(b))
        .unwrap_or(input.len());
    &input[start..]
}

/// The input without trailing C whitespace.
fn strip_right(input: &[u8]) -> &[u8] {
    let end = input
        .iter()
        .rposition(|&b| !is_c_space(b))
        .map_or(0, |p| p + 1);
    &input[..end]
}

/// `t:trimLeft`: drops leading whitespace (C `isspace`). Borrows a suffix of the input.
pub(super) fn trim_left(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Borrowed(strip_left(input))
}

/// `t:trimRight`: drops trailing whitespace (C `isspace`). Borrows a prefix of the input.
pub(super) fn trim_right(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Borrowed(strip_right(input))
}

/// `t:trim`: both ends. Borrows a sub-slice of the input.
pub(super) fn trim(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Borrowed(strip_left(strip_right(input)))
}

/// `t:compressWhitespace`: every run of C whitespace becomes one space. (ModSecurity v3 does
/// not count the non-breaking space 0xA0 here, unlike v2.)
pub(super) fn compress_whitespace(input: &[u8]) -> Cow<'_, [u8]> {
    if input.len() >= super::SCAN_MIN_LEN && !has_other_space(input) {
        return Cow::Borrowed(input);
    }
    compress_whitespace_walk(input)
}

/// [`compress_whitespace`] byte by byte.
fn compress_whitespace_walk(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out = Out::new(input);
    let mut in_space = false;
    let mut run_start = 0;
    for (i, &b) in input.iter().enumerate() {
        if is_c_space(b) {
            if !in_space {
                out.copy_input(run_start, i);
                out.push(b' ');
                in_space = true;
            }
            run_start = i + 1;
        } else {
            in_space = false;
        }
    }
    out.copy_input(run_start, input.len());
    out.finish()
}

/// Whether `compressWhitespace` changes `input`: it holds C whitespace other than a
/// space, or two spaces in a row. Searched with the vector searches of `memchr`: a
/// long value that only holds single spaces costs a fraction of the byte walk.
fn has_other_space(input: &[u8]) -> bool {
    memchr::memchr3(b'\t', b'\n', b'\r', input).is_some()
        || memchr::memchr2(0x0b, 0x0c, input).is_some()
        || memchr::memmem::find(input, b"  ").is_some()
}

/// `t:removeWhitespace`: removes C whitespace, the non-breaking space 0xA0 and, as
/// ModSecurity v3 does (to catch UTF-8 `C2 A0`), every 0xC2 byte.
///
/// Eight bytes at a time: up to the first byte removed the value is its own output;
/// from there a word without any is copied whole, and a word with some is compacted
/// byte by byte without branches.
pub(super) fn remove_whitespace(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let Some(first) = first_removed(input) else {
        return Cow::Borrowed(input);
    };
    let mut out = Dense::new(input, first, n);
    let (buf, w) = out.parts();
    let mut i = first;
    while i + 8 <= n {
        let v = swar::load(input, i);
        let m = removed_mask(v);
        if m == 0 {
            buf[*w..*w + 8].copy_from_slice(&v.to_le_bytes());
            *w += 8;
        } else {
            // The output is never ahead of the input: every store is in bounds.
            for (k, &b) in input[i..i + 8].iter().enumerate() {
                buf[*w] = b;
                *w += usize::from(m >> (8 * k + 7) & 1 == 0);
            }
        }
        i += 8;
    }
    for &b in &input[i..] {
        buf[*w] = b;
        *w += usize::from(!is_removed(b));
    }
    out.finish()
}

/// The bytes `removeWhitespace` removes.
#[inline(always)]
pub(super) fn is_removed(b: u8) -> bool {
    is_c_space(b) || b == NBSP || b == NBSP_UTF8_LEAD
}

/// [`is_removed`] on the eight bytes of a word (see [`swar`]).
#[inline(always)]
fn removed_mask(v: u64) -> u64 {
    swar::eq(v, b' ')
        | swar::within(v, b'\t', b'\r')
        | swar::eq(v, NBSP)
        | swar::eq(v, NBSP_UTF8_LEAD)
}

/// The index of the first byte `removeWhitespace` removes.
fn first_removed(input: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i + 8 <= input.len() {
        let m = removed_mask(swar::load(input, i));
        if m != 0 {
            return Some(i + swar::first(m));
        }
        i += 8;
    }
    input[i..]
        .iter()
        .position(|&b| is_removed(b))
        .map(|k| i + k)
}

/// `t:removeWhitespace` byte by byte: the reference [`remove_whitespace`] is tested
/// against.
#[cfg(test)]
fn remove_whitespace_bytewise(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out = Out::new(input);
    let mut run_start = 0;
    for (i, &b) in input.iter().enumerate() {
        if is_c_space(b) || b == NBSP || b == NBSP_UTF8_LEAD {
            out.copy_input(run_start, i);
            run_start = i + 1;
        }
    }
    out.copy_input(run_start, input.len());
    out.finish()
}

/// `t:removeNulls`: removes every NUL byte.
pub(super) fn remove_nulls(input: &[u8]) -> Cow<'_, [u8]> {
    if memchr::memchr(0, input).is_none() {
        return Cow::Borrowed(input);
    }
    Cow::Owned(input.iter().copied().filter(|&b| b != 0).collect())
}

/// `t:replaceNulls`: every NUL byte becomes a space.
pub(super) fn replace_nulls(input: &[u8]) -> Cow<'_, [u8]> {
    let Some(first) = memchr::memchr(0, input) else {
        return Cow::Borrowed(input);
    };
    let mut v = input.to_vec();
    for b in &mut v[first..] {
        if *b == 0 {
            *b = b' ';
        }
    }
    Cow::Owned(v)
}

/// A byte table: 1 for each byte in `bytes` (and each upper-case letter with
/// `upper`), 0 for the others.
const fn byte_set(bytes: &[u8], upper: bool) -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < bytes.len() {
        t[bytes[i] as usize] = 1;
        i += 1;
    }
    if upper {
        let mut b = b'A';
        while b <= b'Z' {
            t[b as usize] = 1;
            b += 1;
        }
    }
    t
}

/// The bytes `t:cmdLine` drops or turns into a separator. Other bytes are copied,
/// lowercased (`/` and `(` too, except right after a separator).
const CMD_LINE_SPECIAL_BYTES: &[u8] = b"\"'\\^ ,;\t\r\n";

/// [`CMD_LINE_SPECIAL_BYTES`] as a table.
static CMD_LINE_SPECIAL: [u8; 256] = byte_set(CMD_LINE_SPECIAL_BYTES, false);

/// [`CMD_LINE_SPECIAL_BYTES`] and the upper-case letters: the bytes `t:cmdLine` may
/// write otherwise than they are.
static CMD_LINE_CHANGED: [u8; 256] = byte_set(CMD_LINE_SPECIAL_BYTES, true);

/// Whether any of the eight bytes at `input[at..]` is in `table`.
#[inline(always)]
fn word_has(table: &[u8; 256], input: &[u8], at: usize) -> bool {
    let c: &[u8; 8] = input[at..at + 8].try_into().expect("eight bytes");
    (table[usize::from(c[0])]
        | table[usize::from(c[1])]
        | table[usize::from(c[2])]
        | table[usize::from(c[3])]
        | table[usize::from(c[4])]
        | table[usize::from(c[5])]
        | table[usize::from(c[6])]
        | table[usize::from(c[7])])
        != 0
}

/// The index from which `t:cmdLine`'s output may differ from its input: the first
/// upper-case letter or special byte, except a space followed by a byte that is
/// copied as it is (not special, not upper case, not `/` or `(`).
fn cmd_line_first_change(input: &[u8]) -> Option<usize> {
    let n = input.len();
    let mut i = 0;
    loop {
        while i + 8 <= n && !word_has(&CMD_LINE_CHANGED, input, i) {
            i += 8;
        }
        let p = i + input[i..]
            .iter()
            .position(|&b| CMD_LINE_CHANGED[usize::from(b)] != 0)?;
        if input[p] != b' ' {
            return Some(p);
        }
        match input.get(p + 1) {
            None => return None,
            Some(&b) if CMD_LINE_CHANGED[usize::from(b)] == 0 && b != b'/' && b != b'(' => {
                i = p + 2;
            }
            Some(_) => return Some(p),
        }
    }
}

/// `t:cmdLine`, as ModSecurity v3 does it: drops `\ " ' ^`; turns each run of space, `,`,
/// `;`, `\t`, `\r`, `\n` into one space; drops a space that precedes `/` or `(`; lowercases
/// ASCII letters. (`\v` and `\f` are not separators in v3.)
///
/// Up to the first byte that may change, the value is its own output; from there, words
/// of eight bytes without a special byte are copied lowercased at once, and the bytes up
/// to and including the next special one go one by one.
pub(super) fn cmd_line(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let Some(first) = cmd_line_first_change(input) else {
        return Cow::Borrowed(input);
    };
    // The output is never longer than the input.
    let mut out = Dense::new(input, first, n);
    let (buf, w) = out.parts();
    // True when the last byte written is a separator space.
    let mut space = false;
    let mut i = first;
    while i < n {
        if !space {
            while i + 8 <= n && !word_has(&CMD_LINE_SPECIAL, input, i) {
                let v = swar::load(input, i);
                let lower = v | (swar::within(v, b'A', b'Z') >> 2);
                buf[*w..*w + 8].copy_from_slice(&lower.to_le_bytes());
                *w += 8;
                i += 8;
            }
        }
        // One by one, until a special byte has been dealt with and the last byte
        // written is not a separator.
        let mut special = false;
        while i < n {
            let b = input[i];
            i += 1;
            match b {
                b'"' | b'\'' | b'\\' | b'^' => special = true,
                b' ' | b',' | b';' | b'\t' | b'\r' | b'\n' => {
                    if !space {
                        buf[*w] = b' ';
                        *w += 1;
                        space = true;
                    }
                    special = true;
                }
                b'/' | b'(' => {
                    if space {
                        *w -= 1;
                    }
                    space = false;
                    buf[*w] = b;
                    *w += 1;
                }
                _ => {
                    buf[*w] = b.to_ascii_lowercase();
                    *w += 1;
                    space = false;
                }
            }
            if special && !space {
                break;
            }
        }
    }
    out.finish()
}

/// `t:cmdLine` one byte at a time: the reference [`cmd_line`] is tested against.
#[cfg(test)]
fn cmd_line_bytewise(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out = Out::new(input);
    let mut space = false;
    for &b in input {
        match b {
            b'"' | b'\'' | b'\\' | b'^' => {}
            b' ' | b',' | b';' | b'\t' | b'\r' | b'\n' => {
                if !space {
                    out.push(b' ');
                    space = true;
                }
            }
            b'/' | b'(' => {
                if space {
                    out.pop();
                }
                space = false;
                out.push(b);
            }
            _ => {
                out.push(b.to_ascii_lowercase());
                space = false;
            }
        }
    }
    out.finish()
}

/// Parity of all eight bits of `b`: true when the number of set bits is odd.
#[inline]
fn odd_parity(b: u8) -> bool {
    b.count_ones() % 2 == 1
}

/// `t:parityEven7bit`: sets the top bit when the byte (all eight bits) has odd parity,
/// clears it otherwise.
pub(super) fn parity_even_7bit(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out = Out::new(input);
    for &b in input {
        out.push(if odd_parity(b) { b | 0x80 } else { b & 0x7f });
    }
    out.finish()
}

/// `t:parityOdd7bit`: clears the top bit when the byte (all eight bits) has odd parity,
/// sets it otherwise.
pub(super) fn parity_odd_7bit(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out = Out::new(input);
    for &b in input {
        out.push(if odd_parity(b) { b & 0x7f } else { b | 0x80 });
    }
    out.finish()
}

/// `t:parityZero7bit`: clears the top bit of every byte.
pub(super) fn parity_zero_7bit(input: &[u8]) -> Cow<'_, [u8]> {
    match input.iter().position(|&b| b & 0x80 != 0) {
        None => Cow::Borrowed(input),
        Some(first) => {
            let mut v = input.to_vec();
            for b in &mut v[first..] {
                *b &= 0x7f;
            }
            Cow::Owned(v)
        }
    }
}

/// `t:length`: the input's length in bytes, as a decimal string.
pub(super) fn length(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Owned(input.len().to_string().into_bytes())
}

#[cfg(test)]
mod tests {
    /// The walk leaves a value unchanged exactly when `has_other_space` finds
    /// nothing, so long values it clears can be returned as they are.
    #[test]
    fn compress_whitespace_fast_path_is_exact() {
        // The first three pieces never make two spaces in a row.
        let pieces: &[&[u8]] = &[
            b"a", b" b", b"cd", b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c",
        ];
        super::super::check_fast_path_is_exact(
            pieces,
            3,
            0x5ace_5ace_0000_0001,
            compress_whitespace_walk,
            has_other_space,
            compress_whitespace,
        );
    }

    /// The run-wise `cmdLine` gives the byte-wise one's result, borrowed exactly
    /// when that one is.
    #[test]
    fn cmd_line_by_runs_agrees_with_the_bytewise_walk() {
        let pieces: &[&[u8]] = &[
            b"a", b"Z", b"cat", b"/ETC", b" ", b"  ", b",", b";", b"\t", b"\r\n", b"/", b"(",
            b"\"", b"'", b"\\", b"^", b"\x0b", b"\xc3", b"x y", b" /", b" (",
        ];
        let mut rng = crate::body::fuzz::XorShift(0x00c0_ffee_cafe_0001);
        for _ in 0..50_000 {
            let mut v = Vec::new();
            for _ in 0..rng.below(16) {
                v.extend_from_slice(pieces[rng.below(pieces.len())]);
            }
            let (got, want) = (cmd_line(&v), cmd_line_bytewise(&v));
            assert_eq!(got, want, "{v:?}");
            assert_eq!(
                matches!(got, Cow::Borrowed(_)),
                matches!(want, Cow::Borrowed(_)),
                "{v:?}"
            );
        }
    }

    use super::*;

    #[test]
    fn cmd_line_agrees_with_the_bytewise_walk_on_all_lengths() {
        let pieces: &[&[u8]] = &[
            b"a", b"Z", b"cat", b"/ETC", b" ", b"  ", b",", b";", b"\t", b"\r\n", b"/", b"(",
            b"\"", b"'", b"\\", b"^", b"\x0b", b"\xc3", b"x y", b" /", b" (", b"..", b"%2f",
        ];
        crate::transforms::check_against_reference(
            pieces,
            0x00c0_ffee_cafe_0002,
            &cmd_line_bytewise,
            &cmd_line,
        );
    }

    #[test]
    fn remove_whitespace_agrees_with_the_bytewise_walk() {
        let pieces: &[&[u8]] = &[
            b"a",
            b"bc",
            b" ",
            b"\t",
            b"\n",
            b"\r",
            b"\x0b",
            b"\x0c",
            b"\xa0",
            b"\xc2",
            b"\xc2\xa0",
            b"\x08",
            b"\x0e",
            b"\x1f",
            b"!",
            b"\xa1",
            b"\xc3",
            b"\x00",
        ];
        crate::transforms::check_against_reference(
            pieces,
            0x0123_4567_89ab_cdef,
            &remove_whitespace_bytewise,
            &remove_whitespace,
        );
    }

    fn owned(c: Cow<'_, [u8]>) -> bool {
        matches!(c, Cow::Owned(_))
    }

    #[test]
    fn case() {
        assert_eq!(&*lowercase(b"AbC\xc4Z"), b"abc\xc4z");
        assert_eq!(&*uppercase(b"aBc\xe4z"), b"ABC\xe4Z");
        assert!(!owned(lowercase(b"abc\xc4\x00")));
        assert!(!owned(uppercase(b"ABC\xe4\x00")));
        assert_eq!(&*lowercase(b""), b"");
        assert_eq!(&*lowercase(b"SELECT\x00FROM"), b"select\x00from");
    }

    #[test]
    fn trims() {
        assert_eq!(&*trim(b" \x0b\x0ca\xa0 b \t\r\n"), b"a\xa0 b");
        assert_eq!(&*trim_left(b" \x0b a "), b"a ");
        assert_eq!(&*trim_right(b" a \x0c"), b" a");
        assert_eq!(&*trim(b"   "), b"");
        assert_eq!(&*trim_left(b""), b"");
        assert_eq!(&*trim_right(b"\x00 "), b"\x00");
        // Never copies.
        assert!(!owned(trim(b"  x  ")));
    }

    #[test]
    fn compress() {
        assert_eq!(&*compress_whitespace(b"a  \t\n b"), b"a b");
        assert_eq!(&*compress_whitespace(b"a\x0b\x0cb"), b"a b");
        assert_eq!(&*compress_whitespace(b"  a  "), b" a ");
        assert_eq!(&*compress_whitespace(b"a\tb"), b"a b");
        // v3 leaves NBSP alone here.
        assert_eq!(&*compress_whitespace(b"a \xa0 b"), b"a \xa0 b");
        assert!(!owned(compress_whitespace(b"a b c")));
        assert_eq!(&*compress_whitespace(b""), b"");
    }

    #[test]
    fn remove_ws() {
        assert_eq!(&*remove_whitespace(b" a \xa0\x0b b\r\n"), b"ab");
        assert_eq!(
            &*remove_whitespace(b"a\xc2\xa0b\xc2\xa3\xc3\xa9"),
            b"ab\xa3\xc3\xa9"
        );
        assert!(!owned(remove_whitespace(b"abc")));
        // Trailing whitespace only: a borrowed prefix.
        assert!(!owned(remove_whitespace(b"abc  ")));
        assert_eq!(&*remove_whitespace(b""), b"");
    }

    #[test]
    fn nulls() {
        assert_eq!(&*remove_nulls(b"a\x00b\x00"), b"ab");
        assert_eq!(&*replace_nulls(b"a\x00b\x00"), b"a b ");
        assert!(!owned(remove_nulls(b"ab")));
        assert!(!owned(replace_nulls(b"ab")));
        assert_eq!(&*remove_nulls(b"\x00\x00"), b"");
    }

    #[test]
    fn cmdline() {
        assert_eq!(
            &*cmd_line(br#"C:\> c^ommand /c "dir""#),
            b"c:> command/c dir"
        );
        assert_eq!(&*cmd_line(b"a , ;b"), b"a b");
        assert_eq!(&*cmd_line(b"a /b (c"), b"a/b(c");
        assert_eq!(&*cmd_line(b"A\x0bB\x0cC"), b"a\x0bb\x0cc");
        assert_eq!(&*cmd_line(b"a ^\"b"), b"a b");
        assert_eq!(&*cmd_line(b"a ^ b"), b"a b");
        assert_eq!(&*cmd_line(b"a  /"), b"a/");
        assert_eq!(&*cmd_line(b"A\tB\n\rC"), b"a b c");
        assert_eq!(&*cmd_line(b" /a"), b"/a");
        assert_eq!(&*cmd_line(b"\xc4X"), b"\xc4x");
        assert_eq!(&*cmd_line(b""), b"");
        assert!(!owned(cmd_line(b"cat etc/passwd")));
        assert_eq!(&*cmd_line(b"cat /etc/passwd"), b"cat/etc/passwd");
    }

    #[test]
    fn parity() {
        assert_eq!(&*parity_even_7bit(b"abc\xff"), b"\xe1\xe2c\x7f");
        assert_eq!(&*parity_odd_7bit(b"abc\xff"), b"ab\xe3\xff");
        assert_eq!(&*parity_zero_7bit(b"abc\xff\x80"), b"abc\x7f\x00");
        assert!(!owned(parity_zero_7bit(b"abc")));
        assert!(!owned(parity_even_7bit(b"c")));
    }

    #[test]
    fn len() {
        assert_eq!(&*length(b"abc"), b"3");
        assert_eq!(&*length(b""), b"0");
        assert_eq!(&*length(&[0u8; 1000]), b"1000");
    }
}
