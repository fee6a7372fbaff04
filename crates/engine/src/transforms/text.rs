//! Byte-level text transformations: case, whitespace, NUL bytes, trimming, `cmdLine`,
//! parity and `length`.

use std::borrow::Cow;

use super::out::Out;

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
pub(super) fn remove_whitespace(input: &[u8]) -> Cow<'_, [u8]> {
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

/// The bytes `t:cmdLine` does more with than lowercase: the ones it drops and the
/// separators; with `/` and `(` (which drop a separator right before them) when
/// `slash` is set.
const fn cmd_line_special(slash: bool) -> [bool; 256] {
    let mut t = [false; 256];
    let special = b"\"'\\^ ,;\t\r\n";
    let mut i = 0;
    while i < special.len() {
        t[special[i] as usize] = true;
        i += 1;
    }
    t[b'/' as usize] = slash;
    t[b'(' as usize] = slash;
    t
}

/// [`cmd_line_special`] after a separator, and elsewhere (where `/` and `(` are
/// copied as they are).
static CMD_LINE_SPECIAL: [[bool; 256]; 2] = [cmd_line_special(false), cmd_line_special(true)];

/// `t:cmdLine`, as ModSecurity v3 does it: drops `\ " ' ^`; turns each run of space, `,`,
/// `;`, `\t`, `\r`, `\n` into one space; drops a space that precedes `/` or `(`; lowercases
/// ASCII letters. (`\v` and `\f` are not separators in v3.) The bytes between two special
/// ones are copied (lowercased) as one run; `/` and `(` are special only while the
/// last byte written is a separator.
pub(super) fn cmd_line(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let mut out = Out::new(input);
    // True when the last byte written is a separator space.
    let mut space = false;
    let mut i = 0;
    while i < n {
        let special = &CMD_LINE_SPECIAL[usize::from(space)];
        let end = input[i..]
            .iter()
            .position(|&b| special[usize::from(b)])
            .map_or(n, |k| i + k);
        if end > i {
            out.copy_input_lowercase(i, end);
            space = false;
            if end == n {
                break;
            }
        }
        let b = input[end];
        match b {
            b'"' | b'\'' | b'\\' | b'^' => {}
            b'/' | b'(' => {
                // Looked for only after a separator (a run may have come between).
                if space {
                    out.pop();
                }
                space = false;
                out.push(b);
            }
            _ => {
                if !space {
                    out.push(b' ');
                    space = true;
                }
            }
        }
        i = end + 1;
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
