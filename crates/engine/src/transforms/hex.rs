//! Hexadecimal helpers and `hexDecode`, `sqlHexDecode`, `hexEncode`.

use std::borrow::Cow;

use super::out::Out;

/// True for an ASCII hexadecimal digit.
#[inline]
pub(super) fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// Value of one hex digit the way ModSecurity computes it: exact for real hex digits, and
/// for any other byte the same wrapped arithmetic (letters fold to upper case and count from
/// `A` = 10, everything below `A` counts from `0`). Only `hexDecode` feeds it non-hex bytes.
#[inline]
pub(super) const fn digit(b: u8) -> u8 {
    if b >= b'A' {
        (b & 0xdf).wrapping_sub(b'A').wrapping_add(10)
    } else {
        b.wrapping_sub(b'0')
    }
}

/// Two hex digits to a byte (wrapping, see [`digit`]).
#[inline]
pub(super) fn pair(hi: u8, lo: u8) -> u8 {
    digit(hi).wrapping_mul(16).wrapping_add(digit(lo))
}

/// The value of each byte as a hex digit (either case), 0xFF for a byte that is not one.
pub(super) static HEX_VALUE: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        if b.is_ascii_hexdigit() {
            t[i] = digit(b);
        }
        i += 1;
    }
    t
};

/// The byte two hex digits spell, through [`HEX_VALUE`]; None unless both are hex digits.
/// (Also the body parsers' `%XX` decoding.)
#[inline(always)]
pub(crate) fn hex_pair(hi: u8, lo: u8) -> Option<u8> {
    let (h, l) = (HEX_VALUE[usize::from(hi)], HEX_VALUE[usize::from(lo)]);
    ((h | l) < 16).then_some((h << 4) | l)
}

/// Lower-case hex digits.
pub(super) const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

/// `t:hexDecode`: each pair of bytes is read as two hex digits. As in ModSecurity v3 there
/// is no validation: a trailing odd byte is dropped and non-hex bytes decode to whatever the
/// digit arithmetic gives.
pub(super) fn hex_decode(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Owned(
        input
            .chunks_exact(2)
            .map(|p| pair(p[0], p[1]))
            .collect::<Vec<u8>>(),
    )
}

/// `t:hexEncode`: every byte as two lower-case hex digits.
pub(super) fn hex_encode(input: &[u8]) -> Cow<'_, [u8]> {
    let mut v = Vec::with_capacity(input.len() * 2);
    for &b in input {
        v.push(HEX_LOWER[usize::from(b >> 4)]);
        v.push(HEX_LOWER[usize::from(b & 0x0f)]);
    }
    Cow::Owned(v)
}

/// `t:sqlHexDecode`: decodes SQL hex literals inside the value: `0x` or `0X` followed by
/// at least one pair of hex digits becomes the bytes those pairs spell (an odd trailing digit
/// is left as text); other text is kept.
///
/// This is the behaviour of current libmodsecurity (3.0.13 on). Earlier 3.0.x releases,
/// such as Debian's 3.0.9, also dropped the value's last byte and stopped at the first NUL;
/// those defects are not reproduced.
pub(super) fn sql_hex_decode(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let mut out = Out::new(input);
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'0', &input[i..]) {
        let p = i + off;
        out.copy_input(i, p);
        if p + 3 < n
            && (input[p + 1] | 0x20) == b'x'
            && is_hex(input[p + 2])
            && is_hex(input[p + 3])
        {
            let mut j = p + 2;
            while j + 1 < n && is_hex(input[j]) && is_hex(input[j + 1]) {
                out.push(pair(input[j], input[j + 1]));
                j += 2;
            }
            i = j;
        } else {
            out.push(b'0');
            i = p + 1;
        }
    }
    out.copy_input(i, n);
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits() {
        assert_eq!(pair(b'4', b'1'), 0x41);
        assert_eq!(pair(b'f', b'F'), 0xff);
        assert_eq!(pair(b'a', b'0'), 0xa0);
        // Non-hex bytes: ModSecurity's arithmetic.
        assert_eq!(pair(b'z', b'z'), b'S');
        assert_eq!(pair(b'G', b'G'), 0x10);
    }

    #[test]
    fn hex_pair_agrees_with_is_hex_and_pair() {
        for hi in 0..=255u8 {
            for lo in 0..=255u8 {
                let want = (is_hex(hi) && is_hex(lo)).then(|| pair(hi, lo));
                assert_eq!(hex_pair(hi, lo), want);
            }
        }
    }

    #[test]
    fn hexdecode() {
        assert_eq!(&*hex_decode(b"414243"), b"ABC");
        assert_eq!(&*hex_decode(b"41424"), b"AB");
        assert_eq!(&*hex_decode(b"4"), b"");
        assert_eq!(&*hex_decode(b""), b"");
        assert_eq!(&*hex_decode(b"00ff"), b"\x00\xff");
        assert_eq!(&*hex_decode(b"zz"), b"S");
    }

    #[test]
    fn hexencode() {
        assert_eq!(&*hex_encode(b"a\xff\x00"), b"61ff00");
        assert_eq!(&*hex_encode(b""), b"");
    }

    #[test]
    fn sqlhex() {
        // The reference manual's example: 0x414243 is ABC.
        assert_eq!(&*sql_hex_decode(b"0x414243"), b"ABC");
        assert_eq!(&*sql_hex_decode(b"x0x41"), b"xA");
        assert_eq!(&*sql_hex_decode(b"0X41g"), b"Ag");
        assert_eq!(&*sql_hex_decode(b"0x41 0x4243 x"), b"A BC x");
        assert_eq!(&*sql_hex_decode(b"00x41"), b"0A");
        assert_eq!(&*sql_hex_decode(b"0x414"), b"A4");
        assert_eq!(&*sql_hex_decode(b"0x410x42"), b"AB");
        assert_eq!(&*sql_hex_decode(b"0x4"), b"0x4");
        assert_eq!(&*sql_hex_decode(b"0x"), b"0x");
        assert_eq!(&*sql_hex_decode(b"0"), b"0");
        assert_eq!(&*sql_hex_decode(b"0xzz"), b"0xzz");
        assert_eq!(&*sql_hex_decode(b"ab\x00c0x41"), b"ab\x00cA");
        assert_eq!(&*sql_hex_decode(b"0x0041"), b"\x00A");
        assert_eq!(&*sql_hex_decode(b"0x41\xff"), b"A\xff");
        assert_eq!(&*sql_hex_decode(b"select 0x61646d696e"), b"select admin");
        assert_eq!(&*sql_hex_decode(b""), b"");
        // Nothing decoded: borrowed, no copy.
        assert!(matches!(sql_hex_decode(b"select 10, 0x"), Cow::Borrowed(s) if s.len() == 13));
    }
}
