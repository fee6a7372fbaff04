//! `application/x-www-form-urlencoded` bodies and query strings.
//!
//! ModSecurity v3 splits the input at the argument separator the way C++'s
//! `std::getline` does: an empty piece between two separators (`a=1&&b=2`) or at
//! the start (`&a=1`) is kept and becomes an argument with an empty name and an
//! empty value, while a single trailing separator (`a=1&`) adds nothing. Each piece
//! is split at its first `=`; a piece without `=` is a name with an empty value.
//! Names and values are then url-decoded leniently: `+` becomes a space, `%XX` with
//! two hex digits becomes that byte, and any other `%` is kept as it is and counted
//! as an invalid encoding (URLENCODED_ERROR). Names keep their case.

use super::{Arg, LimitHit};

/// The outcome of [`parse_bounded`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Urlencoded {
    /// The name/value pairs, in input order.
    pub args: Vec<Arg>,
    /// Whether an invalid %-encoding was seen in a name or value (URLENCODED_ERROR).
    pub invalid_encoding: bool,
    /// Set when the input held more pairs than `max_args`; the extra ones were dropped.
    pub limit_hit: Option<LimitHit>,
}

/// Splits `input` at `separator` and url-decodes names and values as ModSecurity does.
/// Returns the pairs and whether an invalid %-encoding was seen (URLENCODED_ERROR).
pub fn parse(input: &[u8], separator: u8, max_args: usize) -> (Vec<Arg>, bool) {
    let out = parse_bounded(input, separator, max_args);
    (out.args, out.invalid_encoding)
}

/// Like [`parse`], and also says whether pairs were dropped at `max_args`.
///
/// Only the pairs that are kept are decoded, so the work done is bounded by the
/// input length whatever the limit.
pub fn parse_bounded(input: &[u8], separator: u8, max_args: usize) -> Urlencoded {
    let mut out = Urlencoded::default();
    if input.is_empty() {
        return out;
    }
    // A trailing separator does not start a new (empty) piece.
    let body = match input.split_last() {
        Some((&last, rest)) if last == separator => rest,
        _ => input,
    };
    for piece in body.split(|&b| b == separator) {
        if out.args.len() >= max_args {
            out.limit_hit = Some(LimitHit::Arguments);
            break;
        }
        let (raw_name, raw_value) = match memchr::memchr(b'=', piece) {
            Some(eq) => (&piece[..eq], &piece[eq + 1..]),
            None => (piece, &piece[piece.len()..]),
        };
        let mut name = Vec::with_capacity(raw_name.len());
        let mut value = Vec::with_capacity(raw_value.len());
        let bad_name = decode_into(raw_name, &mut name);
        let bad_value = decode_into(raw_value, &mut value);
        out.invalid_encoding |= bad_name | bad_value;
        out.args.push((name, value));
    }
    out
}

/// Appends the lenient url-decoding of `src` to `out`; returns whether an invalid
/// %-encoding was met (such a `%` is copied unchanged).
///
/// Escapes often come one after another (an encoded address list is mostly `%XX`):
/// each is decoded through the transformations' hex table, the bytes after it are
/// looked at in line, and a search for the next `%` or `+` is started only when a run
/// of plain bytes is longer than a few bytes.
pub fn decode_into(src: &[u8], out: &mut Vec<u8>) -> bool {
    /// Plain bytes looked at in line before searching for the next `%` or `+`.
    const SHORT_RUN: usize = 8;
    out.reserve(src.len());
    let mut invalid = false;
    let mut i = 0;
    while i < src.len() {
        match src[i] {
            b'%' => {
                let pair = match (src.get(i + 1), src.get(i + 2)) {
                    (Some(&hi), Some(&lo)) => crate::transforms::hex_pair(hi, lo),
                    _ => None,
                };
                if let Some(byte) = pair {
                    out.push(byte);
                    i += 3;
                } else {
                    invalid = true;
                    out.push(b'%');
                    i += 1;
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                let rest = &src[i..];
                let near = rest.len().min(SHORT_RUN);
                let run = match rest[..near].iter().position(|&b| b == b'%' || b == b'+') {
                    Some(k) => k,
                    None => {
                        memchr::memchr2(b'%', b'+', &rest[near..]).map_or(rest.len(), |k| near + k)
                    }
                };
                out.extend_from_slice(&rest[..run]);
                i += run;
            }
        }
    }
    invalid
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(input: &str) -> Vec<(String, String)> {
        let (args, _) = parse(input.as_bytes(), b'&', 1000);
        args.into_iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(&n).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect()
    }

    fn p(n: &str, v: &str) -> (String, String) {
        (n.to_owned(), v.to_owned())
    }

    #[test]
    fn simple_pairs_in_order() {
        assert_eq!(
            pairs("a=1&b=2&a=3"),
            vec![p("a", "1"), p("b", "2"), p("a", "3")]
        );
    }

    #[test]
    fn empty_input_has_no_args() {
        assert!(pairs("").is_empty());
    }

    #[test]
    fn empty_pieces_follow_getline_rules() {
        assert_eq!(pairs("a=1&&b=2"), vec![p("a", "1"), p("", ""), p("b", "2")]);
        assert_eq!(pairs("&a=1"), vec![p("", ""), p("a", "1")]);
        assert_eq!(pairs("a=1&"), vec![p("a", "1")]);
        assert_eq!(pairs("a=1&&"), vec![p("a", "1"), p("", "")]);
        assert_eq!(pairs("&"), vec![p("", "")]);
    }

    #[test]
    fn piece_without_equals_is_a_name() {
        assert_eq!(pairs("flag&x=1"), vec![p("flag", ""), p("x", "1")]);
        assert_eq!(pairs("=v"), vec![p("", "v")]);
        assert_eq!(pairs("a=b=c"), vec![p("a", "b=c")]);
    }

    #[test]
    fn decoding_and_case() {
        assert_eq!(pairs("Na%6De=x+y%20z"), vec![p("Name", "x y z")]);
        assert_eq!(pairs("k=%3Cscript%3E"), vec![p("k", "<script>")]);
    }

    #[test]
    fn invalid_encoding_is_kept_and_flagged() {
        let (args, bad) = parse(b"a=%zz&b=%4", b'&', 10);
        assert!(bad);
        assert_eq!(args[0].1, b"%zz");
        assert_eq!(args[1].1, b"%4");
        let (_, bad) = parse(b"a=%41%", b'&', 10);
        assert!(bad);
        let (_, ok) = parse(b"a=%41", b'&', 10);
        assert!(!ok);
    }

    #[test]
    fn binary_bytes_survive() {
        let (args, _) = parse(b"a=%00%ff\xfe", b'&', 10);
        assert_eq!(args[0].1, vec![0, 0xff, 0xfe]);
    }

    #[test]
    fn custom_separator() {
        let (args, _) = parse(b"a=1;b=2&c", b';', 10);
        assert_eq!(
            args,
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"2&c".to_vec())
            ]
        );
    }

    #[test]
    fn stops_at_max_args() {
        let out = parse_bounded(b"a=1&b=2&c=3", b'&', 2);
        assert_eq!(out.args.len(), 2);
        assert_eq!(out.limit_hit, Some(LimitHit::Arguments));
        let out = parse_bounded(b"a=1&b=2", b'&', 2);
        assert_eq!(out.limit_hit, None);
        let (args, _) = parse(b"a=1", b'&', 0);
        assert!(args.is_empty());
    }

    #[test]
    fn fuzz_mutations_never_panic() {
        use crate::body::fuzz::{XorShift, mutate};
        const PIECES: &[&[u8]] = &[b"&", b"=", b"%", b"%4", b"%zz", b"+", b"%00", b"\xff"];
        let mut rng = XorShift(0x0123_4567_89AB_CDEF);
        for _ in 0..4000 {
            let input = mutate(&mut rng, b"a=1&b=%41%42+c&&d&=e", PIECES);
            let out = parse_bounded(&input, b'&', 4);
            assert!(out.args.len() <= 4);
            let decoded: usize = out.args.iter().map(|(n, v)| n.len() + v.len()).sum();
            assert!(decoded <= input.len());
        }
    }

    /// The decoder against a byte-by-byte reading of the same rules, on generated
    /// values dense with escapes, `+`, broken escapes and plain runs of every length
    /// around the in-line limit.
    #[test]
    fn decode_into_agrees_with_the_byte_walk() {
        fn reference(src: &[u8]) -> (Vec<u8>, bool) {
            let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16));
            let (mut out, mut invalid, mut i) = (Vec::new(), false, 0);
            while i < src.len() {
                match src[i] {
                    b'+' => out.push(b' '),
                    b'%' => match (hex(src.get(i + 1)), hex(src.get(i + 2))) {
                        (Some(h), Some(l)) => {
                            out.push((h * 16 + l) as u8);
                            i += 2;
                        }
                        _ => {
                            invalid = true;
                            out.push(b'%');
                        }
                    },
                    b => out.push(b),
                }
                i += 1;
            }
            (out, invalid)
        }
        let pieces: [&[u8]; 12] = [
            b"%",
            b"%2",
            b"%41",
            b"%fF",
            b"%g1",
            b"+",
            b"a",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefghijklmnopq",
            b"%%",
            b"\xff",
        ];
        let mut rng = crate::body::fuzz::XorShift(0x0dec_0de5);
        for _ in 0..30_000 {
            let v = rng.value_of(&pieces, 14, 0);
            let mut out = b"kept".to_vec();
            let invalid = decode_into(&v, &mut out);
            let (want, want_invalid) = reference(&v);
            assert_eq!((&out[4..], invalid), (&want[..], want_invalid), "{v:?}");
        }
    }

    #[test]
    fn crs_style_query() {
        // From REQUEST-942 tests: an injection in a urlencoded body.
        assert_eq!(
            pairs("var=%27%20or%201%3D1--&x=%22"),
            vec![p("var", "' or 1=1--"), p("x", "\"")]
        );
    }
}
