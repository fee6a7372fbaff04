//! `base64Decode`, `base64DecodeExt`, `base64Encode`.

use std::borrow::Cow;

use base64::Engine as _;

/// Value of a standard-alphabet base64 character, or None.
#[inline]
const fn b64_value(b: u8) -> Option<u32> {
    Some(match b {
        b'A'..=b'Z' => b - b'A',
        b'a'..=b'z' => b - b'a' + 26,
        b'0'..=b'9' => b - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    } as u32)
}

/// `t:base64Encode`: standard alphabet, with `=` padding.
pub(super) fn base64_encode(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Owned(
        base64::engine::general_purpose::STANDARD
            .encode(input)
            .into_bytes(),
    )
}

/// `t:base64Decode`, with ModSecurity v3's strict decoder (the one of its bundled mbed TLS
/// 2.x): the value is read up to its first NUL byte, and if that text is not valid base64
/// the result is empty. Valid means: standard alphabet; line breaks (`\n`, `\r\n`) anywhere;
/// spaces only just before a line break or at the end; at most two `=`, with nothing but
/// line breaks and spaces after them. Only complete groups of four characters produce
/// output (a final partial group is ignored).
///
/// The usual valid value, alphabet characters and padding only, is recognised by one
/// table read a byte and decoded in place by the `base64` crate; values with line breaks
/// or spaces are checked by [`strict_is_valid`] and decoded without them.
pub(super) fn base64_decode(input: &[u8]) -> Cow<'_, [u8]> {
    let text = match memchr::memchr(0, input) {
        Some(nul) => &input[..nul],
        None => input,
    };
    let alphabet = text
        .iter()
        .position(|&b| !IN_ALPHABET[usize::from(b)])
        .unwrap_or(text.len());
    let tail = &text[alphabet..];
    if tail.len() <= 2 && tail.iter().all(|&b| b == b'=') {
        return Cow::Owned(decode_groups(text));
    }
    if !strict_is_valid(text) {
        return Cow::Owned(Vec::new());
    }
    let significant: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| !matches!(b, b'\r' | b'\n' | b' '))
        .collect();
    Cow::Owned(decode_groups(&significant))
}

/// Which bytes are in the standard base64 alphabet ([`b64_value`] as a table).
static IN_ALPHABET: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = b64_value(b as u8).is_some();
        b += 1;
    }
    t
};

/// The strict decoder's reading of valid text without line breaks or spaces: its
/// complete groups of four decoded, padding (only ever in the last complete group, which
/// the validity rules ensure) shortening the last group, and bits after the last whole
/// byte ignored.
fn decode_groups(significant: &[u8]) -> Vec<u8> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let whole = &significant[..significant.len() / 4 * 4];
    // Valid text always decodes; an error would be a bug of the validity rules, and
    // the strict decoder's answer to invalid text is the empty value.
    LENIENT.decode(whole).unwrap_or_default()
}

/// The validity pass of the strict decoder (see [`base64_decode`]).
fn strict_is_valid(text: &[u8]) -> bool {
    let n = text.len();
    let mut i = 0;
    let mut equals = 0;
    while i < n {
        let mut spaces = 0;
        while i < n && text[i] == b' ' {
            i += 1;
            spaces += 1;
        }
        if i == n {
            break;
        }
        if text[i] == b'\r' && text.get(i + 1) == Some(&b'\n') {
            // The "\n" is skipped on the next round.
            i += 1;
            continue;
        }
        if text[i] == b'\n' {
            i += 1;
            continue;
        }
        if spaces != 0 {
            return false;
        }
        if text[i] == b'=' {
            equals += 1;
            if equals > 2 {
                return false;
            }
        } else if b64_value(text[i]).is_none() || equals != 0 {
            return false;
        }
        i += 1;
    }
    true
}

/// `t:base64DecodeExt`, ModSecurity v3's forgiving decoder: bytes outside the alphabet are
/// skipped, and complete bytes are output (a final partial one is dropped). Two quirks are
/// kept: an `=` that follows a single character of a group (and is not itself followed by
/// `=`) empties the result, as does ending, after a single character of a group, on `=` or
/// on `9` (whose value, 61, is also the code of `=`).
pub(super) fn base64_decode_ext(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out = Vec::with_capacity(input.len() / 4 * 3 + 2);
    let mut acc: u32 = 0;
    let mut count: usize = 0;
    let mut last_is_pad_code = false;
    for (idx, &b) in input.iter().enumerate() {
        if b == b'=' {
            last_is_pad_code = true;
            if input.get(idx + 1) != Some(&b'=') && count % 4 == 1 {
                return Cow::Owned(Vec::new());
            }
            continue;
        }
        let Some(v) = b64_value(b) else {
            last_is_pad_code = false;
            continue;
        };
        last_is_pad_code = v == u32::from(b'=');
        acc = (acc << 6) | v;
        count += 1;
        match count % 4 {
            2 => out.push((acc >> 4) as u8),
            3 => out.push((acc >> 2) as u8),
            0 => {
                out.push(acc as u8);
                acc = 0;
            }
            _ => {}
        }
    }
    if last_is_pad_code && count % 4 == 1 {
        return Cow::Owned(Vec::new());
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &[u8]) -> Vec<u8> {
        base64_decode(s).into_owned()
    }

    fn ext(s: &[u8]) -> Vec<u8> {
        base64_decode_ext(s).into_owned()
    }

    #[test]
    fn encode() {
        assert_eq!(&*base64_encode(b"ab"), b"YWI=");
        assert_eq!(&*base64_encode(b""), b"");
        assert_eq!(&*base64_encode(b"\x00\xff\xfe"), b"AP/+");
    }

    /// The byte-wise decoder this module had before the crate decoded for it: the
    /// reference the fast path is held to.
    fn reference(input: &[u8]) -> Vec<u8> {
        let text = match memchr::memchr(0, input) {
            Some(nul) => &input[..nul],
            None => input,
        };
        if !strict_is_valid(text) {
            return Vec::new();
        }
        let mut out = Vec::new();
        let (mut acc, mut count, mut keep) = (0u32, 0, 3u32);
        for &b in text {
            if matches!(b, b'\r' | b'\n' | b' ') {
                continue;
            }
            let v = if b == b'=' {
                keep = keep.saturating_sub(1);
                0
            } else {
                b64_value(b).unwrap_or(0)
            };
            acc = (acc << 6) | v;
            count += 1;
            if count == 4 {
                count = 0;
                let bytes = [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8];
                out.extend_from_slice(&bytes[..keep as usize]);
                acc = 0;
            }
        }
        out
    }

    /// The fast decoder gives the reference's bytes on generated values: mostly valid
    /// ones (alphabet runs, padding, line breaks, trailing spaces), some with one
    /// byte that makes them invalid.
    #[test]
    fn strict_matches_the_reference() {
        let pieces: &[&[u8]] = &[
            b"QUJD", b"Zm9v", b"a+/9", b"Q", b"QQ", b"QUI", b"=", b"==", b"\n", b"\r\n", b" \n",
            b"  ", b"\r", b"!", b"\x00", b"\xff", b"-_",
        ];
        let mut rng = crate::body::fuzz::XorShift(0x6261_7365_3634);
        let (mut decoded, mut empty) = (0, 0);
        for round in 0..200_000 {
            let mut v = rng.value_of(&pieces[..4], 40, 0);
            match round % 4 {
                // Valid: padding at the end, maybe line breaks and spaces.
                0 => v.extend_from_slice(pieces[4 + rng.below(2)]),
                1 => v = rng.value_of(pieces, 30, 0),
                2 => v = rng.value_of(&pieces[..12], 30, 40),
                _ => {}
            }
            let want = reference(&v);
            assert_eq!(dec(&v), want, "{v:?}");
            if want.is_empty() {
                empty += 1;
            } else {
                decoded += 1;
            }
        }
        assert!(
            decoded > 50_000 && empty > 20_000,
            "{decoded} decoded, {empty} empty"
        );
    }

    #[test]
    fn strict() {
        assert_eq!(dec(b"QUJD"), b"ABC");
        assert_eq!(dec(b"QUI="), b"AB");
        assert_eq!(dec(b"QQ=="), b"A");
        assert_eq!(dec(b"QUJDQQ=="), b"ABCA");
        assert_eq!(dec(b"QUJDQQ="), b"ABC");
        assert_eq!(dec(b"QUI"), b"");
        assert_eq!(dec(b"QQ"), b"");
        assert_eq!(dec(b"QUJD!QUJD"), b"");
        assert_eq!(dec(b"QU JD"), b"");
        assert_eq!(dec(b"QUJD  "), b"ABC");
        assert_eq!(dec(b"QUJD \nQUJD"), b"ABCABC");
        assert_eq!(dec(b"QUJD\nQUJD"), b"ABCABC");
        assert_eq!(dec(b"QU\r\nJD"), b"ABC");
        assert_eq!(dec(b"QU\rJD"), b"");
        assert_eq!(dec(b"QUJD\x00QUJD"), b"ABC");
        assert_eq!(dec(b"=QUJD"), b"");
        assert_eq!(dec(b"QQ==QUJD"), b"");
        assert_eq!(dec(b"QQ==="), b"");
        assert_eq!(dec(b"\xffQUJD"), b"");
        assert_eq!(dec(b""), b"");
        // The reference manual's style of use: a whole encoded value.
        assert_eq!(dec(b"VGhpcyBpcyBhIHRlc3Q="), b"This is a test");
    }

    #[test]
    fn forgiving() {
        assert_eq!(ext(b"QUJD"), b"ABC");
        assert_eq!(ext(b"QUI="), b"AB");
        assert_eq!(ext(b"QUI"), b"AB");
        assert_eq!(ext(b"QQ"), b"A");
        assert_eq!(ext(b"QUJD!QUJD"), b"ABCABC");
        assert_eq!(ext(b"QU JD"), b"ABC");
        assert_eq!(ext(b"QUJD\x00QUJD"), b"ABCABC");
        assert_eq!(ext(b"QUJDQQ"), b"ABCA");
        assert_eq!(ext(b"QUJDQUJ"), b"ABCAB");
        assert_eq!(ext(b"\xffQ\x80Q"), b"A");
        // Quirks of v3.
        assert_eq!(ext(b"Q=="), b"");
        assert_eq!(ext(b"QUJD9"), b"");
        assert_eq!(ext(b"QUJDQ=QUJD"), b"");
        assert_eq!(ext(b""), b"");
    }
}
