//! `htmlEntityDecode`.

use std::borrow::Cow;

use super::out::Out;

/// Value of a run of digits in `radix` the way C's `strtol` reports it: saturating at
/// `i64::MAX` on overflow. Only the low byte is used, so overflow gives 0xFF.
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
pub(super) fn html_entity_decode(input: &[u8]) -> Cow<'_, [u8]> {
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
