//! Differential target: URL decoding against a reference written for this test.
//!
//! The reference follows ModSecurity v3's lenient decoders as their behaviour is
//! described (not Palisade's code): it walks the value one position at a time with
//! explicit index arithmetic, where Palisade's decoders jump from one `%` or `+` to
//! the next. Compared, on the same value:
//!
//! - `t:urlDecode` and the body processor's decoder (with its invalid-encoding flag,
//!   URLENCODED_ERROR) against [`reference_decode`] without `%u`;
//! - `t:urlDecodeUni` against [`reference_decode`] with `%u`;
//! - the urlencoded splitter (`a=1&b=2`, with `&` or `;` and an argument limit)
//!   against [`reference_split`], which reads pieces the way C++'s `std::getline`
//!   does.

use crate::input::Input;
use engine::internals::body::LimitHit;
use engine::internals::body::urlencoded;
use engine::internals::transforms::Transform;

/// What a lenient decode gives: the bytes, and whether a `%` that starts no valid
/// `%HH` escape was met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The decoded bytes.
    pub bytes: Vec<u8>,
    /// A `%` not followed by two hex digits (and, with `%u`, not by `u` and four).
    pub invalid: bool,
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// ModSecurity's lenient URL decoding, as described: `+` is a space; `%` with two hex
/// digits is that byte; any other `%` is kept (and flagged). With `uni`, `%u` or `%U`
/// followed by four hex digits is one byte: the low byte of the code point, plus
/// 0x20 for the full-width forms U+FF01..U+FF5E (which gives their ASCII twins);
/// `%u` without four hex digits is kept as the two bytes `%u`.
pub fn reference_decode(v: &[u8], uni: bool) -> Decoded {
    let mut bytes = Vec::with_capacity(v.len());
    let mut invalid = false;
    let mut i = 0;
    while i < v.len() {
        let c = v[i];
        if c == b'+' {
            bytes.push(b' ');
            i += 1;
        } else if c != b'%' {
            bytes.push(c);
            i += 1;
        } else if uni && i + 1 < v.len() && (v[i + 1] == b'u' || v[i + 1] == b'U') {
            let digits: Option<Vec<u8>> = if i + 5 < v.len() {
                v[i + 2..i + 6].iter().map(|&b| hex(b)).collect()
            } else {
                None
            };
            match digits {
                Some(d) => {
                    let mut low = d[2] * 16 + d[3];
                    let full_width = d[0] == 15 && d[1] == 15;
                    if full_width && low > 0 && low < 0x5f {
                        low += 0x20;
                    }
                    bytes.push(low);
                    i += 6;
                }
                None => {
                    bytes.extend_from_slice(&v[i..i + 2]);
                    invalid = true;
                    i += 2;
                }
            }
        } else if i + 2 < v.len()
            && let (Some(h), Some(l)) = (hex(v[i + 1]), hex(v[i + 2]))
        {
            bytes.push(h * 16 + l);
            i += 3;
        } else {
            bytes.push(b'%');
            invalid = true;
            i += 1;
        }
    }
    Decoded { bytes, invalid }
}

/// Splits `input` into pieces at `sep` as repeated `std::getline` calls do: every
/// separator ends a piece (so `a&&b` has an empty middle piece and `&a` an empty
/// first one), and the text after the last separator is a piece only if it is not
/// empty. Each piece is `name=value` at its first `=`, or a name alone. Only the
/// first `max_args` pieces are kept; the flag says whether any were dropped.
pub fn reference_split(input: &[u8], sep: u8, max_args: usize) -> (Vec<(Decoded, Decoded)>, bool) {
    let mut pieces: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    for (i, &b) in input.iter().enumerate() {
        if b == sep {
            pieces.push(&input[start..i]);
            start = i + 1;
        }
    }
    if start < input.len() {
        pieces.push(&input[start..]);
    }
    let dropped = pieces.len() > max_args;
    let pairs = pieces
        .into_iter()
        .take(max_args)
        .map(|piece| {
            let (name, value) = match piece.iter().position(|&b| b == b'=') {
                Some(eq) => (&piece[..eq], &piece[eq + 1..]),
                None => (piece, &[][..]),
            };
            (
                reference_decode(name, false),
                reference_decode(value, false),
            )
        })
        .collect();
    (pairs, dropped)
}

/// Compares Palisade's decoders and splitter with the references on one value.
///
/// Input: a control byte (bit 0: `;` instead of `&` as separator; the rest: the
/// argument limit, 1 to 128), then the value.
pub fn fuzz_url_decode_diff(data: &[u8]) {
    let mut input = Input::new(data);
    let control = input.byte();
    let value = input.rest();

    let plain = reference_decode(value, false);
    let uni = reference_decode(value, true);
    assert_eq!(
        Transform::UrlDecode.apply(value).as_ref(),
        plain.bytes.as_slice(),
        "urlDecode differs from the reference"
    );
    assert_eq!(
        Transform::UrlDecodeUni.apply(value).as_ref(),
        uni.bytes.as_slice(),
        "urlDecodeUni differs from the reference"
    );
    let mut out = Vec::new();
    let invalid = urlencoded::decode_into(value, &mut out);
    assert_eq!(
        Decoded {
            bytes: out,
            invalid
        },
        plain,
        "the body processor's decoder differs from the reference"
    );

    let sep = if control & 1 == 0 { b'&' } else { b';' };
    let max_args = 1 + usize::from(control >> 1);
    let (want, dropped) = reference_split(value, sep, max_args);
    let got = urlencoded::parse_bounded(value, sep, max_args);
    let want_args: Vec<(Vec<u8>, Vec<u8>)> = want
        .iter()
        .map(|(n, v)| (n.bytes.clone(), v.bytes.clone()))
        .collect();
    assert_eq!(
        got.args, want_args,
        "urlencoded pairs differ from the reference"
    );
    assert_eq!(
        got.invalid_encoding,
        want.iter().any(|(n, v)| n.invalid || v.invalid),
        "URLENCODED_ERROR differs from the reference"
    );
    assert_eq!(
        got.limit_hit == Some(LimitHit::Arguments),
        dropped,
        "the argument limit differs from the reference"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_decodes_as_described() {
        let d = reference_decode(b"a+b%41%4%zz%", false);
        assert_eq!(d.bytes, b"a bA%4%zz%");
        assert!(d.invalid);
        let d = reference_decode(b"%u0041%uFF21%u12%U00e9", true);
        assert_eq!(d.bytes, b"AA%u12\xe9");
        assert!(d.invalid);
        assert_eq!(reference_decode(b"%uFF00", true).bytes, b"\0");
    }

    #[test]
    fn reference_splits_like_getline() {
        let names = |input: &[u8]| -> Vec<Vec<u8>> {
            reference_split(input, b'&', 100)
                .0
                .into_iter()
                .map(|(n, _)| n.bytes)
                .collect()
        };
        assert_eq!(names(b"a=1&&b"), [&b"a"[..], b"", b"b"]);
        assert_eq!(names(b"&a"), [&b""[..], b"a"]);
        assert_eq!(names(b"a&"), [&b"a"[..]]);
        assert_eq!(names(b"&"), [&b""[..]]);
        assert!(names(b"").is_empty());
        let (pairs, dropped) = reference_split(b"a&b&c", b'&', 2);
        assert_eq!(pairs.len(), 2);
        assert!(dropped);
    }
}
