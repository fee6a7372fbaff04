//! `htmlEntityDecode`.

use std::borrow::Cow;

use super::hex::HEX_VALUE;
use super::out::Dense;
#[cfg(test)]
use super::out::Out;
use super::swar;

/// (The reference's.) Value of a run of digits in `radix` the way C's `strtol` reports it: saturating at
/// `i64::MAX` on overflow. Only the low byte is used, so overflow gives 0xFF.
#[cfg(test)]
fn strtol_low_byte(digits: &[u8], radix: u32) -> u8 {
    let mut acc: u64 = 0;
    for &b in digits {
        let d = u64::from(char::from(b).to_digit(radix).unwrap_or(0));
        match acc
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(d))
        {
            Some(v) if v <= i64::MAX as u64 => acc = v,
            _ => return 0xff,
        }
    }
    (acc & 0xff) as u8
}

/// The byte for a named entity ModSecurity knows (case-insensitive).
fn named(name: &[u8]) -> Option<u8> {
    const NAMES: [(&[u8], u8); 5] = [
        (b"quot", b'"'),
        (b"amp", b'&'),
        (b"lt", b'<'),
        (b"gt", b'>'),
        (b"nbsp", 0xa0),
    ];
    NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|&(_, b)| b)
}

/// `t:htmlEntityDecode`: `&#DDD;`, `&#xHH;` / `&#XHH;` and the named entities `&quot;`
/// `&amp;` `&lt;` `&gt;` `&nbsp;` (names in any case; `&nbsp;` is byte 0xA0). The `;` is
/// optional. A numeric value yields its low byte (values too big for a C `long` give 0xFF),
/// as in ModSecurity. Anything else, including unknown names, is left alone.
///
/// Up to the first entity that decodes, the value is its own output; from there, the
/// bytes between entities are copied a word at a time.
pub(super) fn html_entity_decode(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let mut i = 0;
    // The first entity that decodes, and what it decodes to.
    let (first, mut next) = loop {
        let Some(off) = memchr::memchr(b'&', &input[i..]) else {
            return Cow::Borrowed(input);
        };
        let p = i + off;
        if let Some(e) = entity_fast(input, p) {
            break (p, Some(e));
        }
        i = p + 1;
    };
    // Each entity is at least two bytes long and decodes to one: the output is never
    // ahead of the input.
    let mut out = Dense::new(input, first, n);
    let (buf, w) = out.parts();
    i = first;
    loop {
        // `input[i]` is a `&`; `next` what it starts, if anything.
        match next {
            Some((byte, end)) => {
                buf[*w] = byte;
                *w += 1;
                // Skip the optional terminating semicolon.
                i = if input.get(end) == Some(&b';') {
                    end + 1
                } else {
                    end
                };
            }
            None => {
                buf[*w] = b'&';
                *w += 1;
                i += 1;
            }
        }
        // The bytes up to the next `&`, a word at a time while there are eight.
        loop {
            if i + 8 > n {
                let end = input[i..]
                    .iter()
                    .position(|&b| b == b'&')
                    .map_or(n, |k| i + k);
                buf[*w..*w + end - i].copy_from_slice(&input[i..end]);
                *w += end - i;
                i = end;
                break;
            }
            let v = swar::load(input, i);
            buf[*w..*w + 8].copy_from_slice(&v.to_le_bytes());
            let k = swar::first(swar::eq(v, b'&'));
            i += k;
            *w += k;
            if k < 8 {
                break;
            }
        }
        if i >= n {
            break;
        }
        next = entity_fast(input, i);
    }
    out.finish()
}

/// [`entity`] without iterators and with a table for hex digits: the byte and the
/// index just past the entity's name or digits, or None.
#[inline]
fn entity_fast(input: &[u8], amp: usize) -> Option<(u8, usize)> {
    let n = input.len();
    let mut j = amp + 1;
    if *input.get(j)? != b'#' {
        let start = j;
        while j < n && input[j].is_ascii_alphanumeric() {
            j += 1;
        }
        return if (2..=4).contains(&(j - start)) {
            named(&input[start..j]).map(|b| (b, j))
        } else {
            None
        };
    }
    j += 1;
    let hex = matches!(input.get(j)?, b'x' | b'X');
    if hex {
        j += 1;
        input.get(j)?;
    }
    let start = j;
    // `strtol`'s value, saturated: below 2^59 one more digit cannot pass `i64::MAX`.
    let mut acc: u64 = 0;
    let mut over = false;
    let radix: u64 = if hex { 16 } else { 10 };
    while j < n {
        let b = input[j];
        let d = if hex {
            HEX_VALUE[usize::from(b)]
        } else {
            b.wrapping_sub(b'0')
        };
        if d >= radix as u8 {
            break;
        }
        if acc < 1 << 59 {
            acc = acc * radix + u64::from(d);
        } else {
            match acc
                .checked_mul(radix)
                .and_then(|v| v.checked_add(u64::from(d)))
            {
                Some(v) if v <= i64::MAX as u64 => acc = v,
                _ => over = true,
            }
        }
        j += 1;
    }
    if j == start {
        return None;
    }
    Some((if over { 0xff } else { (acc & 0xff) as u8 }, j))
}

/// `t:htmlEntityDecode` through [`Out`] and [`entity`]: the reference the decoder
/// above is tested against.
#[cfg(test)]
/// `t:htmlEntityDecode`: `&#DDD;`, `&#xHH;` / `&#XHH;` and the named entities `&quot;`
/// `&amp;` `&lt;` `&gt;` `&nbsp;` (names in any case; `&nbsp;` is byte 0xA0). The `;` is
/// optional. A numeric value yields its low byte (values too big for a C `long` give 0xFF),
/// as in ModSecurity. Anything else, including unknown names, is left alone.
fn html_entity_decode_reference(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let mut out = Out::new(input);
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'&', &input[i..]) {
        let p = i + off;
        out.copy_input(i, p);
        match entity(input, p) {
            Some((byte, end)) => {
                out.push(byte);
                // Skip the optional terminating semicolon.
                i = if input.get(end) == Some(&b';') {
                    end + 1
                } else {
                    end
                };
            }
            None => {
                out.push(b'&');
                i = p + 1;
            }
        }
    }
    out.copy_input(i, n);
    out.finish()
}

/// Decodes the entity whose `&` is at `amp`: the byte and the index just past its name or
/// digits (before any `;`), or None when it is not one ModSecurity decodes.
#[cfg(test)]
fn entity(input: &[u8], amp: usize) -> Option<(u8, usize)> {
    let run = |start: usize, pred: fn(&u8) -> bool| -> usize {
        start + input[start..].iter().take_while(|b| pred(b)).count()
    };
    let mut j = amp + 1;
    if *input.get(j)? == b'#' {
        j += 1;
        if matches!(input.get(j)?, b'x' | b'X') {
            j += 1;
            input.get(j)?;
            let end = run(j, u8::is_ascii_hexdigit);
            (end > j).then(|| (strtol_low_byte(&input[j..end], 16), end))
        } else {
            let end = run(j, u8::is_ascii_digit);
            (end > j).then(|| (strtol_low_byte(&input[j..end], 10), end))
        }
    } else {
        let end = run(j, u8::is_ascii_alphanumeric);
        if end == j {
            return None;
        }
        named(&input[j..end]).map(|b| (b, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_agrees_with_the_reference() {
        let pieces: &[&[u8]] = &[
            b"&",
            b"&#",
            b"&#x",
            b"&#X",
            b"&#x3c;",
            b"&#60;",
            b"&lt;",
            b"&LT",
            b"&quot;",
            b"&amp;",
            b"&nbsp",
            b"&gt;",
            b"&foo;",
            b"&#0000060;",
            b"&#x00003C;",
            b";",
            b"#",
            b"x",
            b"3",
            b"c",
            b"a",
            b"99999999999999999999",
            b"fffffffffffffffff",
            b"7",
            b"&#x7fffffffffffff",
            b"&#922337203685477580",
            b"q",
        ];
        super::super::check_against_reference(
            pieces,
            0x0e0e_0e0e_0000_0001,
            &html_entity_decode_reference,
            &html_entity_decode,
        );
    }

    #[test]
    fn numeric() {
        assert_eq!(&*html_entity_decode(b"&#65;&#x41;&#X41&#0065"), b"AAAA");
        assert_eq!(&*html_entity_decode(b"&#999;"), b"\xe7");
        assert_eq!(&*html_entity_decode(b"&#99999999999999999999999;"), b"\xff");
        assert_eq!(&*html_entity_decode(b"&#xfffffffffffffffffff;"), b"\xff");
        assert_eq!(&*html_entity_decode(b"&#x7fffffffffffff41;"), b"\x41");
        assert_eq!(&*html_entity_decode(b"&#0;"), b"\x00");
        assert_eq!(&*html_entity_decode(b"&#x;"), b"&#x;");
        assert_eq!(&*html_entity_decode(b"&#-1;"), b"&#-1;");
        assert_eq!(&*html_entity_decode(b"&#x&#65;"), b"&#xA");
    }

    #[test]
    fn named_entities() {
        assert_eq!(
            &*html_entity_decode(b"&quot;&AMP;&lt&gt;&nbsp;"),
            b"\"&<>\xa0"
        );
        assert_eq!(&*html_entity_decode(b"&foo;"), b"&foo;");
        assert_eq!(&*html_entity_decode(b"&amp9;"), b"&amp9;");
        assert_eq!(&*html_entity_decode(b"&amp;lt;"), b"&lt;");
        assert_eq!(&*html_entity_decode(b"&lt;script&gt;"), b"<script>");
    }

    #[test]
    fn edges() {
        assert_eq!(&*html_entity_decode(b""), b"");
        assert_eq!(&*html_entity_decode(b"&"), b"&");
        assert_eq!(&*html_entity_decode(b"&#"), b"&#");
        assert_eq!(&*html_entity_decode(b"&#x"), b"&#x");
        assert_eq!(&*html_entity_decode(b"a&\xff;"), b"a&\xff;");
        assert!(matches!(
            html_entity_decode(b"a & b &foo; &#;"),
            Cow::Borrowed(_)
        ));
    }
}
