//! URL-style codecs: `urlDecode`, `urlDecodeUni`, `urlEncode`, `utf8toUnicode`.

use std::borrow::Cow;

use super::hex::{HEX_LOWER, hex_pair};
#[cfg(test)]
use super::hex::{is_hex, pair};
use super::out::{Dense, Out};
use super::swar;
use super::unicode_map::UnicodeMap;

/// Byte for a `%uHHHH`, `\uHHHH` or CSS escape when no Unicode map is configured, as
/// ModSecurity v3 does it: the low byte of the code point; full-width ASCII (U+FF01 to
/// U+FF5E, i.e. high byte 0xFF and low byte 0x01..=0x5E) gets 0x20 added to land on the
/// ASCII character it mirrors.
#[inline]
pub(super) fn wide_to_byte(high: u8, low: u8) -> u8 {
    if high == 0xff && low > 0x00 && low < 0x5f {
        low + 0x20
    } else {
        low
    }
}

/// `t:urlDecode`: `%HH` (either case) becomes the byte, `+` becomes a space; a `%` not
/// followed by two hex digits is kept as is.
pub(super) fn url_decode(input: &[u8]) -> Cow<'_, [u8]> {
    decode(input, false, None)
}

/// `t:urlDecodeUni`: as `urlDecode`, plus IIS-style `%uHHHH` (the `u` in either case),
/// mapped to one byte through the `SecUnicodeMapFile` table when one is loaded and
/// lists the code point, else by [`wide_to_byte`]. An invalid `%u` is kept as is.
pub(super) fn url_decode_uni<'a>(input: &'a [u8], map: Option<&UnicodeMap>) -> Cow<'a, [u8]> {
    decode(input, true, map)
}

fn decode<'a>(input: &'a [u8], uni: bool, map: Option<&UnicodeMap>) -> Cow<'a, [u8]> {
    // Up to the first `+` or escape that decodes, the output is the input.
    let Some(first) = first_decoded(input, uni) else {
        return Cow::Borrowed(input);
    };
    let n = input.len();
    // Every step writes at most as many bytes as it reads.
    let mut out = Dense::new(input, first, n);
    let (buf, w) = out.parts();
    let mut i = first;
    while i < n {
        let b = input[i];
        if b == b'%' {
            if let Some(byte) = (i + 2 < n)
                .then(|| hex_pair(input[i + 1], input[i + 2]))
                .flatten()
            {
                buf[*w] = byte;
                *w += 1;
                i += 3;
            } else if uni && i + 1 < n && (input[i + 1] | 0x20) == b'u' {
                // (`u` is not a hex digit: the order of the two tests does not matter.)
                if let Some((high, low)) = wide_escape(input, i) {
                    let mapped = map.and_then(|m| m.get(u16::from_be_bytes([high, low])));
                    buf[*w] = mapped.unwrap_or_else(|| wide_to_byte(high, low));
                    *w += 1;
                    i += 6;
                } else {
                    // Keep "%u" and go on after it.
                    buf[*w] = b'%';
                    buf[*w + 1] = input[i + 1];
                    *w += 2;
                    i += 2;
                }
            } else {
                buf[*w] = b'%';
                *w += 1;
                i += 1;
            }
        } else if b == b'+' {
            buf[*w] = b' ';
            *w += 1;
            i += 1;
        } else {
            // A run of plain bytes, a word at a time: the word is copied whole (the
            // output is never ahead of the input, so there is room), then both indices
            // move to its first `%` or `+`, or past it. After four whole words, the
            // rest of a long run goes by a vector search.
            let mut words = 0;
            while i + 8 <= n {
                let v = swar::load(input, i);
                buf[*w..*w + 8].copy_from_slice(&v.to_le_bytes());
                let k = swar::first(swar::eq(v, b'%') | swar::eq(v, b'+'));
                i += k;
                *w += k;
                if k < 8 {
                    break;
                }
                words += 1;
                if words == 4 {
                    break;
                }
            }
            let end = if words == 4 {
                memchr::memchr2(b'%', b'+', &input[i..]).map_or(n, |k| i + k)
            } else if i + 8 > n {
                input[i..]
                    .iter()
                    .position(|&b| matches!(b, b'%' | b'+'))
                    .map_or(n, |k| i + k)
            } else {
                i
            };
            buf[*w..*w + end - i].copy_from_slice(&input[i..end]);
            *w += end - i;
            i = end;
        }
    }
    out.finish()
}

/// The high and low bytes of a valid `%uHHHH` at `input[p..]`.
#[inline]
fn wide_escape(input: &[u8], p: usize) -> Option<(u8, u8)> {
    let d = input.get(p + 2..p + 6)?;
    Some((hex_pair(d[0], d[1])?, hex_pair(d[2], d[3])?))
}

/// Where the first `+` or escape that decodes is: before it, decoding leaves the
/// input as it is.
fn first_decoded(input: &[u8], uni: bool) -> Option<usize> {
    let n = input.len();
    let mut i = 0;
    loop {
        let p = i + memchr::memchr2(b'%', b'+', &input[i..])?;
        if input[p] == b'+' {
            return Some(p);
        }
        if uni && p + 1 < n && (input[p + 1] | 0x20) == b'u' {
            if wide_escape(input, p).is_some() {
                return Some(p);
            }
        } else if p + 2 < n && hex_pair(input[p + 1], input[p + 2]).is_some() {
            return Some(p);
        }
        i = p + 1;
    }
}

/// `urlDecode` and `urlDecodeUni` through [`Out`], escape by escape: the reference the
/// decoder above is tested against.
#[cfg(test)]
fn decode_reference<'a>(input: &'a [u8], uni: bool, map: Option<&UnicodeMap>) -> Cow<'a, [u8]> {
    let n = input.len();
    let mut out = Out::new(input);
    let mut i = 0;
    loop {
        // Escapes often follow one another (`%25%32…`): look at the next byte before
        // paying for a vector search.
        let p = match input.get(i) {
            Some(b'%' | b'+') => i,
            Some(_) => match memchr::memchr2(b'%', b'+', &input[i..]) {
                Some(off) => i + off,
                None => break,
            },
            None => break,
        };
        out.copy_input(i, p);
        if input[p] == b'+' {
            out.push(b' ');
            i = p + 1;
            continue;
        }
        if uni && p + 1 < n && (input[p + 1] | 0x20) == b'u' {
            if p + 5 < n && input[p + 2..p + 6].iter().all(|&b| is_hex(b)) {
                let high = pair(input[p + 2], input[p + 3]);
                let low = pair(input[p + 4], input[p + 5]);
                let mapped = map.and_then(|m| m.get(u16::from_be_bytes([high, low])));
                out.push(mapped.unwrap_or_else(|| wide_to_byte(high, low)));
                i = p + 6;
            } else {
                // Keep "%u" and go on after it.
                out.copy_input(p, p + 2);
                i = p + 2;
            }
        } else if p + 2 < n && is_hex(input[p + 1]) && is_hex(input[p + 2]) {
            out.push(pair(input[p + 1], input[p + 2]));
            i = p + 3;
        } else {
            out.push(b'%');
            i = p + 1;
        }
    }
    out.copy_input(i, n);
    out.finish()
}

/// `t:urlEncode`: ASCII letters, digits and `*` are kept, space becomes `+`, every other
/// byte becomes `%hh` (lower-case hex), as ModSecurity v3 does it.
pub(super) fn url_encode(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out = Out::new(input);
    for &b in input {
        if b.is_ascii_alphanumeric() || b == b'*' {
            out.push(b);
        } else if b == b' ' {
            out.push(b'+');
        } else {
            out.extend(&[
                b'%',
                HEX_LOWER[usize::from(b >> 4)],
                HEX_LOWER[usize::from(b & 0x0f)],
            ]);
        }
    }
    out.finish()
}

/// Appends `%u` and the code point in lower-case hex, at least four digits.
fn push_code_point(out: &mut Out<'_>, cp: u32) {
    out.extend(b"%u");
    let digits = (32 - cp.leading_zeros()).div_ceil(4).max(4);
    for k in (0..digits).rev() {
        out.push(HEX_LOWER[((cp >> (4 * k)) & 0xf) as usize]);
    }
}

/// `t:utf8toUnicode`: each UTF-8 multi-byte sequence becomes `%uHHHH` (lower-case hex, at
/// least four digits); ASCII is kept.
///
/// Follows libmodsecurity 3.0.x byte for byte, since rules are tuned against it:
/// - NUL bytes are dropped;
/// - a lead byte (0xC0..=0xF7) whose continuation bytes are missing or not 10xxxxxx is
///   dropped (scanning resumes at the next byte);
/// - stray continuation bytes and 0xF8..=0xFF are kept as they are;
/// - a lead byte 0xF5..=0xF7 is kept before its (converted) sequence;
/// - after a converted overlong sequence, or one encoding a surrogate (U+D800..U+DFFF), the
///   lead byte is appended once for each of those two faults.
pub(super) fn utf8_to_unicode(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let cont = |i: usize| -> Option<u32> {
        match input.get(i) {
            Some(&b) if b & 0xc0 == 0x80 => Some(u32::from(b & 0x3f)),
            _ => None,
        }
    };
    let mut out = Out::new(input);
    let mut i = 0;
    while i < n {
        let c = input[i];
        if c < 0x80 {
            // Copy the whole ASCII run (minus NULs) at once.
            let end = input[i..]
                .iter()
                .position(|&b| b == 0 || b >= 0x80)
                .map_or(n, |k| i + k);
            out.copy_input(i, end);
            i = end;
            if i < n && input[i] == 0 {
                i += 1;
            }
            continue;
        }
        let (len, min, cp) = if c & 0xe0 == 0xc0 {
            let cp = cont(i + 1).map(|b1| (u32::from(c & 0x1f) << 6) | b1);
            (2, 0x80, cp)
        } else if c & 0xf0 == 0xe0 {
            let cp = match (cont(i + 1), cont(i + 2)) {
                (Some(b1), Some(b2)) => Some((u32::from(c & 0x0f) << 12) | (b1 << 6) | b2),
                _ => None,
            };
            (3, 0x800, cp)
        } else if c & 0xf8 == 0xf0 {
            if c >= 0xf5 {
                out.push(c);
            }
            let cp = match (cont(i + 1), cont(i + 2), cont(i + 3)) {
                (Some(b1), Some(b2), Some(b3)) => {
                    Some((u32::from(c & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3)
                }
                _ => None,
            };
            (4, 0x10000, cp)
        } else {
            // Continuation byte out of place, or 0xF8..=0xFF.
            out.push(c);
            i += 1;
            continue;
        };
        match cp {
            None => i += 1,
            Some(cp) => {
                push_code_point(&mut out, cp);
                if (0xd800..=0xdfff).contains(&cp) {
                    out.push(c);
                }
                if cp < min {
                    out.push(c);
                }
                i += len;
            }
        }
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn borrowed(c: Cow<'_, [u8]>) -> bool {
        matches!(c, Cow::Borrowed(_))
    }

    #[test]
    fn urldecode() {
        assert_eq!(&*url_decode(b"%41%4g%4+%"), b"A%4g%4 %");
        assert_eq!(&*url_decode(b"%%41"), b"%A");
        assert_eq!(&*url_decode(b"a%2fb%2F"), b"a/b/");
        assert_eq!(&*url_decode(b"%u0041"), b"%u0041");
        assert_eq!(&*url_decode(b"%00%ff%C3%A9"), b"\x00\xff\xc3\xa9");
        assert_eq!(&*url_decode(b"a+b"), b"a b");
        // Invalid or incomplete at the end.
        assert_eq!(&*url_decode(b"abc%"), b"abc%");
        assert_eq!(&*url_decode(b"abc%4"), b"abc%4");
        assert_eq!(&*url_decode(b"%zz"), b"%zz");
        assert_eq!(&*url_decode(b""), b"");
        assert!(borrowed(url_decode(b"plain text%zz\xff\x00")));
    }

    #[test]
    fn urldecodeuni_through_a_unicode_map() {
        let map = UnicodeMap::parse("20127 (US-ASCII)\n2019:27 ff01:3f\n", 20127).unwrap();
        let m = Some(&map);
        // Listed: the table's byte, also over the full-width rule (ff01 is `!` without).
        assert_eq!(&*url_decode_uni(b"%u2019x%uFF01", m), b"'x?");
        // RFC 3490 full stops, with any map.
        assert_eq!(&*url_decode_uni(b"a%u3002b", m), b"a.b");
        // Not listed: the low byte, full-width ASCII shifted, as without a map.
        assert_eq!(&*url_decode_uni(b"%u20ac%uff21", m), b"\xacA");
        assert_eq!(&*url_decode_uni(b"%u2019", None), b"\x19");
        // Plain %HH never goes through the table.
        assert_eq!(&*url_decode_uni(b"%19", m), b"\x19");
    }

    #[test]
    fn urldecodeuni() {
        assert_eq!(&*url_decode_uni(b"%u0041%uff21+x", None), b"AA x");
        assert_eq!(&*url_decode_uni(b"%U0041", None), b"A");
        assert_eq!(&*url_decode_uni(b"%u004", None), b"%u004");
        assert_eq!(&*url_decode_uni(b"%uzz41", None), b"%uzz41");
        assert_eq!(&*url_decode_uni(b"%u%41", None), b"%uA");
        assert_eq!(&*url_decode_uni(b"%uff5e%uff5f%uff00", None), b"~_\x00");
        assert_eq!(&*url_decode_uni(b"%u", None), b"%u");
        assert_eq!(&*url_decode_uni(b"%", None), b"%");
        assert_eq!(&*url_decode_uni(b"%u20ac", None), b"\xac");
        assert_eq!(&*url_decode_uni(b"%41%42", None), b"AB");
        assert!(borrowed(url_decode_uni(b"%u12", None)));
    }

    #[test]
    fn decoding_agrees_with_the_reference() {
        let pieces: &[&[u8]] = &[
            b"%", b"%2", b"%25", b"%2f", b"%2F", b"%c0%af", b"%zz", b"+", b"%u", b"%U", b"%u0041",
            b"%uff1c", b"%uFF1", b"%u004g", b"a", b"xyz", b"/", b"..", b"\\", b"%%", b"%+", b"2",
            b"f",
        ];
        let map = UnicodeMap::parse("20127 (US-ASCII)\n2019:27 ff1c:3f\n", 20127).unwrap();
        super::super::check_against_reference(
            pieces,
            0x0dec_0de0_0000_0001,
            &|v| decode_reference(v, false, None),
            &url_decode,
        );
        super::super::check_against_reference(
            pieces,
            0x0dec_0de0_0000_0002,
            &|v| decode_reference(v, true, None),
            &|v| url_decode_uni(v, None),
        );
        super::super::check_against_reference(
            pieces,
            0x0dec_0de0_0000_0003,
            &|v| decode_reference(v, true, Some(&map)),
            &|v| url_decode_uni(v, Some(&map)),
        );
    }

    #[test]
    fn urlencode() {
        assert_eq!(
            &*url_encode(b"a b+c/~-_.*!@\x00\xff%"),
            b"a+b%2bc%2f%7e%2d%5f%2e*%21%40%00%ff%25"
        );
        assert!(borrowed(url_encode(b"abc123")));
    }

    #[test]
    fn utf8() {
        assert_eq!(&*utf8_to_unicode(b"a\xc3\xa9b"), b"a%u00e9b");
        assert_eq!(&*utf8_to_unicode(b"\xe2\x82\xac"), b"%u20ac");
        assert_eq!(&*utf8_to_unicode(b"\xf0\x9f\x98\x80"), b"%u1f600");
        assert_eq!(&*utf8_to_unicode(b"a\x00b"), b"ab");
        assert_eq!(&*utf8_to_unicode(b"\xc3"), b"");
        assert_eq!(&*utf8_to_unicode(b"\xc3x"), b"x");
        assert_eq!(&*utf8_to_unicode(b"\x80\xff"), b"\x80\xff");
        assert_eq!(&*utf8_to_unicode(b"\xc0\x80"), b"%u0000\xc0");
        assert_eq!(&*utf8_to_unicode(b"\xed\xa0\x80"), b"%ud800\xed");
        assert_eq!(&*utf8_to_unicode(b"\xf5\x80\x80\x80"), b"\xf5%u140000");
        assert_eq!(&*utf8_to_unicode(b"\xf0\x8d\xa0\x80"), b"%ud800\xf0\xf0");
        assert_eq!(&*utf8_to_unicode(b""), b"");
        assert!(borrowed(utf8_to_unicode(b"plain ascii")));
    }
}
