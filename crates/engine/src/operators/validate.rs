//! `@validateByteRange`, `@validateUrlEncoding`, `@validateUtf8Encoding`. Each one
//! "matches" (returns true) when the input is NOT valid.

/// The bytes allowed by a `@validateByteRange` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByteRanges {
    allowed: [u64; 4],
    /// The bytes not allowed, when there are at most three (CRS's `1-255` forbids
    /// only NUL): found with `memchr`, many bytes at a time.
    few: Option<Vec<u8>>,
}

impl ByteRanges {
    /// Parses a comma-separated list of byte values and inclusive ranges, such as
    /// `1-255` or `32-126,9,10,13`. Values are decimal, 0 to 255; spaces around items
    /// are ignored. Anything else is an error naming the bad item.
    pub fn parse(argument: &str) -> Result<ByteRanges, String> {
        let mut allowed = [0u64; 4];
        for item in argument.split(',') {
            let item = item.trim();
            let (lo, hi) = match item.split_once('-') {
                Some((lo, hi)) => (byte_value(lo, item)?, byte_value(hi, item)?),
                None => {
                    let v = byte_value(item, item)?;
                    (v, v)
                }
            };
            if lo > hi {
                return Err(format!("invalid range `{item}`: start is after end"));
            }
            for b in lo..=hi {
                allowed[usize::from(b >> 6)] |= 1u64 << (b & 63);
            }
        }
        let forbidden: Vec<u8> = (0..=u8::MAX)
            .filter(|&b| allowed[usize::from(b >> 6)] & (1u64 << (b & 63)) == 0)
            .collect();
        let few = (forbidden.len() <= 3).then_some(forbidden);
        Ok(ByteRanges { allowed, few })
    }

    /// Whether `b` is allowed.
    pub fn allows(&self, b: u8) -> bool {
        self.allowed[usize::from(b >> 6)] & (1u64 << (b & 63)) != 0
    }

    /// True when `input` holds a byte outside the allowed ranges.
    pub fn violated_by(&self, input: &[u8]) -> bool {
        match self.few.as_deref() {
            Some([]) => false,
            Some([a]) => memchr::memchr(*a, input).is_some(),
            Some([a, b]) => memchr::memchr2(*a, *b, input).is_some(),
            Some([a, b, c]) => memchr::memchr3(*a, *b, *c, input).is_some(),
            _ => {
                // A block at a time without a branch per byte: the table reads of
                // one block do not wait on each other.
                input
                    .chunks(64)
                    .any(|block| block.iter().fold(false, |bad, &b| bad | !self.allows(b)))
            }
        }
    }
}

fn byte_value(s: &str, item: &str) -> Result<u8, String> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "invalid byte range item `{item}`: expected N or N-M with decimal numbers"
        ));
    }
    s.parse::<u8>()
        .map_err(|_| format!("invalid byte range item `{item}`: values go from 0 to 255"))
}

/// True when `input` holds a `%` not followed by two hexadecimal digits (a
/// non-hexadecimal digit, or the end of the input too soon).
pub fn invalid_url_encoding(input: &[u8]) -> bool {
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'%', &input[i..]) {
        let p = i + off;
        match (input.get(p + 1), input.get(p + 2)) {
            (Some(a), Some(b)) if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() => i = p + 3,
            _ => return true,
        }
    }
    false
}

/// True when `input` is not well-formed UTF-8: truncated sequences, bad continuation
/// bytes, overlong forms, surrogates (U+D800 to U+DFFF) and code points above
/// U+10FFFF are all invalid. (libmodsecurity lets the four-byte forms of U+110000 to
/// U+13FFFF through; they are refused here.)
pub fn invalid_utf8(input: &[u8]) -> bool {
    std::str::from_utf8(input).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_ranges() {
        // SecRule ARGS:text "@validateByteRange 1-255"
        let r = ByteRanges::parse("1-255").expect("parse");
        assert!(r.violated_by(b"a\0b"));
        assert!(!r.violated_by(b"abc\xFF\x01"));
        assert!(!r.violated_by(b""));
        let r = ByteRanges::parse("32-126,9,10,13").expect("parse");
        assert!(!r.violated_by(b"Hello, world!\r\n\t"));
        assert!(r.violated_by(b"caf\xC3\xA9"));
        assert!(r.violated_by(b"\x7F"));
        assert!(r.violated_by(b"\x0B"));
        let r = ByteRanges::parse(" 38, 44-46 ,48-58").expect("parse");
        assert!(!r.violated_by(b"&,-.019:"));
        assert!(r.violated_by(b"/"));
        let r = ByteRanges::parse("0-255").expect("parse");
        assert!(!r.violated_by(b"\0\xFF"));
        let r = ByteRanges::parse("0").expect("parse");
        assert!(r.violated_by(b"\x01"));
        assert!(!r.violated_by(b"\0"));
    }

    #[test]
    fn every_way_of_searching_finds_what_a_byte_by_byte_check_finds() {
        // Arguments that forbid 0, 1, 2, 3 and many bytes take each path.
        let arguments = [
            "0-255",
            "1-255",
            "1-9,11-255",
            "1-9,11-254",
            "1-9,11-12,14-254",
            "32-126,9,10,13",
            "38,44-46,48-58,61,65-90,95,97-122",
        ];
        let mut rng = crate::body::fuzz::XorShift(0x5eed_b17e);
        for argument in arguments {
            let r = ByteRanges::parse(argument).expect("parse");
            for _ in 0..400 {
                let len = rng.below(300);
                let mut input: Vec<u8> = (0..len).map(|_| b'a' + rng.below(26) as u8).collect();
                // A few bytes of any value, anywhere (also past the first block).
                for _ in 0..rng.below(3) {
                    if len > 0 {
                        let at = rng.below(len);
                        // Often one of the bytes the arguments above forbid.
                        const EDGES: [u8; 6] = [0, 10, 13, 255, 12, 127];
                        input[at] = match rng.below(2) {
                            0 => EDGES[rng.below(EDGES.len())],
                            _ => rng.below(256) as u8,
                        };
                    }
                }
                let expect = input.iter().any(|&b| !r.allows(b));
                assert_eq!(r.violated_by(&input), expect, "{argument}: {input:?}");
            }
        }
    }

    #[test]
    fn bad_byte_ranges() {
        for bad in [
            "", "1-", "-5", "a-z", "1-256", "300", "10-5", "1,,2", "1-2-3", "+5", "1 2",
        ] {
            assert!(ByteRanges::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn url_encoding() {
        assert!(!invalid_url_encoding(b"a%20b%2F%2f"));
        assert!(!invalid_url_encoding(b""));
        assert!(!invalid_url_encoding(b"no percent"));
        assert!(invalid_url_encoding(b"%"));
        assert!(invalid_url_encoding(b"abc%2"));
        assert!(invalid_url_encoding(b"%zz"));
        assert!(invalid_url_encoding(b"%2g"));
        assert!(invalid_url_encoding(b"ok%41 then %%"));
        assert!(invalid_url_encoding(b"%\0\0"));
        assert!(!invalid_url_encoding(b"\xFF%41\xFF"));
    }

    #[test]
    fn utf8() {
        assert!(!invalid_utf8(b""));
        assert!(!invalid_utf8(b"plain\0ascii"));
        assert!(!invalid_utf8("caf\u{e9} \u{20ac} \u{10ffff}".as_bytes()));
        assert!(invalid_utf8(b"\xC3")); // truncated
        assert!(invalid_utf8(b"\xE2\x82")); // truncated
        assert!(invalid_utf8(b"\xC3\x28")); // bad continuation
        assert!(invalid_utf8(b"\x80")); // lone continuation
        assert!(invalid_utf8(b"\xC0\xAF")); // overlong '/'
        assert!(invalid_utf8(b"\xE0\x80\xAF")); // overlong '/'
        assert!(invalid_utf8(b"\xF0\x80\x80\xAF")); // overlong '/'
        assert!(invalid_utf8(b"\xED\xA0\x80")); // surrogate U+D800
        assert!(invalid_utf8(b"\xF4\x90\x80\x80")); // U+110000
        assert!(invalid_utf8(b"\xF8\x88\x80\x80\x80")); // five-byte form
        assert!(invalid_utf8(b"\xFF"));
    }
}
