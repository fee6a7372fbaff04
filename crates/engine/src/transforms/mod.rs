//! Transformations (`t:` actions): pure functions from bytes to bytes.
//!
//! Each transformation reproduces libmodsecurity v3 (the engine CRS is tuned against),
//! including its odd corner cases where they change results; the doc comment of each
//! function says what it does. The results were checked byte for byte against
//! libmodsecurity 3.0.9 on millions of generated inputs. Two deliberate exceptions follow
//! the fixes made upstream in 3.0.13: `cssDecode` keeps NUL bytes (3.0.9 cut the result at
//! the first one) and `sqlHexDecode` keeps the value's last byte and reads past NUL bytes.
//!
//! All transformations run in time linear in the input, and none allocates when it leaves
//! the value unchanged.

use std::borrow::Cow;

mod base64;
mod comments;
mod escapes;
mod hash;
mod hex;
mod html;
mod out;
mod path;
mod swar;
mod text;
pub mod unicode_map;
mod url;

pub(crate) use hex::hex_pair;

pub use unicode_map::UnicodeMap;

/// One transformation, resolved from its name at load time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transform {
    /// `t:lowercase`: ASCII letters to lower case; other bytes unchanged.
    Lowercase,
    /// `t:uppercase`: ASCII letters to upper case; other bytes unchanged.
    Uppercase,
    /// `t:urlDecode`: `%HH` to the byte, `+` to space; invalid `%` sequences kept.
    UrlDecode,
    /// `t:urlDecodeUni`: `urlDecode` plus `%uHHHH` (low byte of the code point; full-width
    /// ASCII U+FF01..U+FF5E to its ASCII twin).
    UrlDecodeUni,
    /// `t:urlEncode`: letters, digits and `*` kept, space to `+`, all else `%hh`.
    UrlEncode,
    /// `t:htmlEntityDecode`: `&#D;`, `&#xH;` (low byte) and `&quot; &amp; &lt; &gt; &nbsp;`,
    /// `;` optional.
    HtmlEntityDecode,
    /// `t:jsDecode`: JavaScript backslash escapes (`\uHHHH`, `\xHH`, octal, C letters).
    JsDecode,
    /// `t:cssDecode`: CSS 2 backslash escapes.
    CssDecode,
    /// `t:escapeSeqDecode`: ANSI C backslash escapes.
    EscapeSeqDecode,
    /// `t:base64Decode`: strict decoding; invalid input gives an empty result.
    Base64Decode,
    /// `t:base64DecodeExt`: forgiving decoding that skips characters outside the alphabet.
    Base64DecodeExt,
    /// `t:base64Encode`: standard alphabet with padding.
    Base64Encode,
    /// `t:hexDecode`: pairs of hex digits to bytes.
    HexDecode,
    /// `t:hexEncode`: each byte to two lower-case hex digits.
    HexEncode,
    /// `t:sqlHexDecode`: SQL `0xHHHH` literals inside the value to bytes.
    SqlHexDecode,
    /// `t:utf8toUnicode`: UTF-8 multi-byte sequences to `%uHHHH`.
    Utf8ToUnicode,
    /// `t:md5`: raw 16-byte MD5 digest.
    Md5,
    /// `t:sha1`: raw 20-byte SHA-1 digest.
    Sha1,
    /// `t:length`: the byte length as a decimal string.
    Length,
    /// `t:cmdLine`: command-line evasion normalisation.
    CmdLine,
    /// `t:compressWhitespace`: whitespace runs to one space.
    CompressWhitespace,
    /// `t:removeWhitespace`: removes whitespace (and 0xA0).
    RemoveWhitespace,
    /// `t:removeNulls`: removes NUL bytes.
    RemoveNulls,
    /// `t:replaceNulls`: NUL bytes to spaces.
    ReplaceNulls,
    /// `t:removeComments`: removes C, SQL, shell and HTML comments.
    RemoveComments,
    /// `t:removeCommentsChar`: removes comment markers only.
    RemoveCommentsChar,
    /// `t:replaceComments`: C comments to one space each.
    ReplaceComments,
    /// `t:normalisePath` (also spelled `normalizePath`): resolves `.`, `..` and `//`.
    NormalisePath,
    /// `t:normalisePathWin` (also `normalizePathWin`): `normalisePath` with `\` as `/`.
    NormalisePathWin,
    /// `t:trim`: strips whitespace at both ends.
    Trim,
    /// `t:trimLeft`: strips leading whitespace.
    TrimLeft,
    /// `t:trimRight`: strips trailing whitespace.
    TrimRight,
    /// `t:parityEven7bit`: top bit set so that each byte has even parity.
    ParityEven7bit,
    /// `t:parityOdd7bit`: top bit set so that each byte has odd parity.
    ParityOdd7bit,
    /// `t:parityZero7bit`: top bit cleared.
    ParityZero7bit,
}

/// Byte classes for the identity test: each byte of a value belongs to one class, a value's
/// class set is the union over its bytes ([`byte_classes`]), and a transformation whose
/// [`Transform::triggers`] do not meet that set leaves the value unchanged, so it need not
/// run at all. Most request values are plain words, and most CRS pipelines are decoders
/// that only act on `%`, `&` or `\`: this is what makes the common case free.
mod class {
    pub const UPPER: u32 = 1 << 0;
    pub const LOWER: u32 = 1 << 1;
    pub const DIGIT_ZERO: u32 = 1 << 2;
    pub const DIGIT_OTHER: u32 = 1 << 3;
    pub const PERCENT: u32 = 1 << 4;
    pub const PLUS: u32 = 1 << 5;
    pub const AMP: u32 = 1 << 6;
    pub const BACKSLASH: u32 = 1 << 7;
    pub const SPACE: u32 = 1 << 8;
    pub const WS_OTHER: u32 = 1 << 9;
    pub const NUL: u32 = 1 << 10;
    pub const HIGH: u32 = 1 << 11;
    pub const SLASH: u32 = 1 << 12;
    pub const DOT: u32 = 1 << 13;
    pub const QUOTE: u32 = 1 << 14;
    pub const CMD_SEP: u32 = 1 << 15;
    pub const STAR: u32 = 1 << 16;
    pub const DASH: u32 = 1 << 17;
    pub const HASH: u32 = 1 << 18;
    pub const LT: u32 = 1 << 19;
    pub const OTHER: u32 = 1 << 20;
    /// Every class: the transformation may change any value.
    pub const ANY: u32 = u32::MAX;

    const fn of(b: u8) -> u32 {
        match b {
            b'A'..=b'Z' => UPPER,
            b'a'..=b'z' => LOWER,
            b'0' => DIGIT_ZERO,
            b'1'..=b'9' => DIGIT_OTHER,
            b'%' => PERCENT,
            b'+' => PLUS,
            b'&' => AMP,
            b'\\' => BACKSLASH,
            b' ' => SPACE,
            b'\t' | b'\n' | 0x0b | 0x0c | b'\r' => WS_OTHER,
            0 => NUL,
            0x80..=0xff => HIGH,
            b'/' => SLASH,
            b'.' => DOT,
            b'"' | b'\'' => QUOTE,
            b',' | b';' | b'^' => CMD_SEP,
            b'*' => STAR,
            b'-' => DASH,
            b'#' => HASH,
            b'<' => LT,
            _ => OTHER,
        }
    }

    /// The class of every byte.
    pub static TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = of(i as u8);
            i += 1;
        }
        t
    };
}

/// What a transformation does to a value, for a pattern that takes it on (see
/// [`Transform::effect`]): plain data the matcher's preimages read.
pub(crate) use rxlinear::Effect;

/// The set of byte classes present in `input`, for [`Transform::triggers`].
#[inline]
pub(crate) fn byte_classes(input: &[u8]) -> u32 {
    input
        .iter()
        .fold(0, |m, &b| m | class::TABLE[usize::from(b)])
}

/// Values at least this long are first searched (with `memchr`'s vector searches)
/// for what would make `compressWhitespace` or `removeCommentsChar` change them; a
/// value without it is returned at once. Shorter values take the byte walk, which
/// costs less than starting several searches.
const SCAN_MIN_LEN: usize = 64;

/// Checks a transformation's fast path on long values built from `pieces` (the first
/// `safe` of which never make a change, whatever their order): `walk` leaves a value
/// unchanged (borrowed, same length) exactly when `changes` finds nothing, and the
/// transformation `full` gives what `walk` gives. Both kinds of value must occur.
#[cfg(test)]
pub(crate) fn check_fast_path_is_exact(
    pieces: &[&[u8]],
    safe: usize,
    seed: u64,
    walk: fn(&[u8]) -> Cow<'_, [u8]>,
    changes: fn(&[u8]) -> bool,
    full: fn(&[u8]) -> Cow<'_, [u8]>,
) {
    let mut rng = crate::body::fuzz::XorShift(seed);
    let (mut same, mut changed) = (0, 0);
    for _ in 0..4_000 {
        let kinds = if rng.below(2) == 0 {
            safe
        } else {
            pieces.len()
        };
        let mut v = Vec::new();
        while v.len() < SCAN_MIN_LEN + rng.below(64) {
            v.extend_from_slice(pieces[rng.below(kinds)]);
        }
        let walked = walk(&v);
        let did = !matches!(&walked, Cow::Borrowed(b) if b.len() == v.len());
        assert_eq!(did, changes(&v), "{v:?}");
        assert_eq!(full(&v), walked);
        if did {
            changed += 1;
        } else {
            same += 1;
        }
    }
    assert!(
        same > 200 && changed > 200,
        "{same} same, {changed} changed"
    );
}

/// Checks a fast transformation against the byte-wise walk kept as its reference, on
/// values built from `pieces` (the syntax that matters to it), on random bytes and on
/// both mixed: every length from 0 to 300, then some of several KiB. The results must be
/// the same bytes, and borrowed exactly when the reference's are.
#[cfg(test)]
pub(crate) fn check_against_reference(
    pieces: &[&[u8]],
    seed: u64,
    reference: &dyn Fn(&[u8]) -> Cow<'_, [u8]>,
    fast: &dyn Fn(&[u8]) -> Cow<'_, [u8]>,
) {
    let mut rng = crate::body::fuzz::XorShift(seed);
    let value = |rng: &mut crate::body::fuzz::XorShift, len: usize| {
        let kind = rng.below(4);
        let mut v = Vec::with_capacity(len + 16);
        while v.len() < len {
            match kind {
                0 => v.extend_from_slice(pieces[rng.below(pieces.len())]),
                1 => v.push(rng.next() as u8),
                // Mostly plain letters, some pieces: long runs between them.
                2 if rng.below(8) != 0 => v.push(b'a' + rng.below(26) as u8),
                _ => {
                    if rng.below(3) == 0 {
                        v.push(rng.next() as u8);
                    } else {
                        v.extend_from_slice(pieces[rng.below(pieces.len())]);
                    }
                }
            }
        }
        v.truncate(len);
        v
    };
    let lengths = (0..=300)
        .flat_map(|l| [l; 40])
        .chain([1000, 4096, 5000, 20_000].repeat(8));
    for len in lengths {
        let v = value(&mut rng, len);
        let (want, got) = (reference(&v), fast(&v));
        assert_eq!(got, want, "{v:?}");
        assert_eq!(
            matches!(got, Cow::Borrowed(_)),
            matches!(want, Cow::Borrowed(_)),
            "borrowed? {v:?}"
        );
    }
}

/// Every name `from_name` accepts (compared case-insensitively), with its transformation.
/// The first entry for a variant is its canonical name.
const NAMES: &[(&str, Transform)] = &[
    ("lowercase", Transform::Lowercase),
    ("uppercase", Transform::Uppercase),
    ("urlDecode", Transform::UrlDecode),
    ("urlDecodeUni", Transform::UrlDecodeUni),
    ("urlEncode", Transform::UrlEncode),
    ("htmlEntityDecode", Transform::HtmlEntityDecode),
    ("jsDecode", Transform::JsDecode),
    ("cssDecode", Transform::CssDecode),
    ("escapeSeqDecode", Transform::EscapeSeqDecode),
    ("base64Decode", Transform::Base64Decode),
    ("base64DecodeExt", Transform::Base64DecodeExt),
    ("base64Encode", Transform::Base64Encode),
    ("hexDecode", Transform::HexDecode),
    ("hexEncode", Transform::HexEncode),
    ("sqlHexDecode", Transform::SqlHexDecode),
    ("utf8toUnicode", Transform::Utf8ToUnicode),
    ("md5", Transform::Md5),
    ("sha1", Transform::Sha1),
    ("length", Transform::Length),
    ("cmdLine", Transform::CmdLine),
    ("compressWhitespace", Transform::CompressWhitespace),
    ("removeWhitespace", Transform::RemoveWhitespace),
    ("removeNulls", Transform::RemoveNulls),
    ("replaceNulls", Transform::ReplaceNulls),
    ("removeComments", Transform::RemoveComments),
    ("removeCommentsChar", Transform::RemoveCommentsChar),
    ("replaceComments", Transform::ReplaceComments),
    ("normalisePath", Transform::NormalisePath),
    ("normalizePath", Transform::NormalisePath),
    ("normalisePathWin", Transform::NormalisePathWin),
    ("normalizePathWin", Transform::NormalisePathWin),
    ("trim", Transform::Trim),
    ("trimLeft", Transform::TrimLeft),
    ("trimRight", Transform::TrimRight),
    ("parityEven7bit", Transform::ParityEven7bit),
    ("parityOdd7bit", Transform::ParityOdd7bit),
    ("parityZero7bit", Transform::ParityZero7bit),
];

impl Transform {
    /// Every transformation, in declaration order.
    pub const ALL: &'static [Transform] = &[
        Transform::Lowercase,
        Transform::Uppercase,
        Transform::UrlDecode,
        Transform::UrlDecodeUni,
        Transform::UrlEncode,
        Transform::HtmlEntityDecode,
        Transform::JsDecode,
        Transform::CssDecode,
        Transform::EscapeSeqDecode,
        Transform::Base64Decode,
        Transform::Base64DecodeExt,
        Transform::Base64Encode,
        Transform::HexDecode,
        Transform::HexEncode,
        Transform::SqlHexDecode,
        Transform::Utf8ToUnicode,
        Transform::Md5,
        Transform::Sha1,
        Transform::Length,
        Transform::CmdLine,
        Transform::CompressWhitespace,
        Transform::RemoveWhitespace,
        Transform::RemoveNulls,
        Transform::ReplaceNulls,
        Transform::RemoveComments,
        Transform::RemoveCommentsChar,
        Transform::ReplaceComments,
        Transform::NormalisePath,
        Transform::NormalisePathWin,
        Transform::Trim,
        Transform::TrimLeft,
        Transform::TrimRight,
        Transform::ParityEven7bit,
        Transform::ParityOdd7bit,
        Transform::ParityZero7bit,
    ];

    /// Looks up a transformation by its SecLang name (case-insensitive). `none` is not a
    /// transformation: the engine handles it (it clears the list) before calling this.
    /// Both spellings `normalisePath`/`normalizePath` (and the `Win` forms) are accepted.
    pub fn from_name(name: &str) -> Option<Transform> {
        NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, t)| t)
    }

    /// The SecLang name, as ModSecurity's manual spells it.
    pub fn name(self) -> &'static str {
        match self {
            Transform::Lowercase => "lowercase",
            Transform::Uppercase => "uppercase",
            Transform::UrlDecode => "urlDecode",
            Transform::UrlDecodeUni => "urlDecodeUni",
            Transform::UrlEncode => "urlEncode",
            Transform::HtmlEntityDecode => "htmlEntityDecode",
            Transform::JsDecode => "jsDecode",
            Transform::CssDecode => "cssDecode",
            Transform::EscapeSeqDecode => "escapeSeqDecode",
            Transform::Base64Decode => "base64Decode",
            Transform::Base64DecodeExt => "base64DecodeExt",
            Transform::Base64Encode => "base64Encode",
            Transform::HexDecode => "hexDecode",
            Transform::HexEncode => "hexEncode",
            Transform::SqlHexDecode => "sqlHexDecode",
            Transform::Utf8ToUnicode => "utf8toUnicode",
            Transform::Md5 => "md5",
            Transform::Sha1 => "sha1",
            Transform::Length => "length",
            Transform::CmdLine => "cmdLine",
            Transform::CompressWhitespace => "compressWhitespace",
            Transform::RemoveWhitespace => "removeWhitespace",
            Transform::RemoveNulls => "removeNulls",
            Transform::ReplaceNulls => "replaceNulls",
            Transform::RemoveComments => "removeComments",
            Transform::RemoveCommentsChar => "removeCommentsChar",
            Transform::ReplaceComments => "replaceComments",
            Transform::NormalisePath => "normalisePath",
            Transform::NormalisePathWin => "normalisePathWin",
            Transform::Trim => "trim",
            Transform::TrimLeft => "trimLeft",
            Transform::TrimRight => "trimRight",
            Transform::ParityEven7bit => "parityEven7bit",
            Transform::ParityOdd7bit => "parityOdd7bit",
            Transform::ParityZero7bit => "parityZero7bit",
        }
    }

    /// The byte classes that can make this transformation change a value: when a value's
    /// [`byte_classes`] do not meet them, [`Transform::apply`] returns it unchanged.
    pub(crate) fn triggers(self) -> u32 {
        use class::*;
        match self {
            Transform::Lowercase => UPPER,
            Transform::Uppercase => LOWER,
            Transform::UrlDecode | Transform::UrlDecodeUni => PERCENT | PLUS,
            Transform::HtmlEntityDecode => AMP,
            Transform::JsDecode | Transform::CssDecode | Transform::EscapeSeqDecode => BACKSLASH,
            Transform::SqlHexDecode => DIGIT_ZERO,
            // utf8toUnicode also drops NUL bytes, as ModSecurity v3 does.
            Transform::Utf8ToUnicode => HIGH | NUL,
            Transform::ParityZero7bit => HIGH,
            Transform::CmdLine => UPPER | QUOTE | BACKSLASH | CMD_SEP | SPACE | WS_OTHER,
            Transform::CompressWhitespace
            | Transform::Trim
            | Transform::TrimLeft
            | Transform::TrimRight => SPACE | WS_OTHER,
            Transform::RemoveWhitespace => SPACE | WS_OTHER | HIGH,
            Transform::RemoveNulls | Transform::ReplaceNulls => NUL,
            // Every comment marker holds one of `*`, `-`, `#`, or `<`.
            Transform::RemoveComments | Transform::RemoveCommentsChar => STAR | DASH | HASH | LT,
            Transform::ReplaceComments => STAR,
            // A value with neither `/` nor `.` has no segment to resolve.
            Transform::NormalisePath => SLASH | DOT,
            Transform::NormalisePathWin => SLASH | DOT | BACKSLASH,
            Transform::UrlEncode
            | Transform::Base64Decode
            | Transform::Base64DecodeExt
            | Transform::Base64Encode
            | Transform::HexDecode
            | Transform::HexEncode
            | Transform::Md5
            | Transform::Sha1
            | Transform::Length
            | Transform::ParityEven7bit
            | Transform::ParityOdd7bit => ANY,
        }
    }

    /// What this transformation does when a rule's pattern can take it on instead
    /// (see `Rx::preimage`): `t:lowercase` and `t:removeWhitespace`, which change most
    /// values they meet, so that the form without them is often one other rules read.
    /// `None` for the others (`t:removeNulls` only deletes bytes too, but its form is
    /// nearly always its input's already, and NUL bytes between every two bytes of a
    /// pattern would cost its literals in the prefilter).
    pub(crate) fn effect(self) -> Option<Effect> {
        match self {
            Transform::Lowercase => Some(Effect::Lowercase),
            Transform::RemoveWhitespace => Some(Effect::Delete(text::is_removed)),
            _ => None,
        }
    }

    /// Whether applying `effect` after this transformation gives what applying it
    /// before gives, for every value. A chain `..., E, T` (`E` the transformation
    /// with that effect) is then the chain `..., T, E`.
    pub(crate) fn commutes_with(self, effect: Effect) -> bool {
        match effect {
            Effect::Lowercase => self.commutes_with_lowercase(),
            // Deleting bytes that are neither letters nor touched by the other
            // deletion.
            Effect::Delete(_) => matches!(
                self,
                Transform::Lowercase | Transform::RemoveWhitespace | Transform::RemoveNulls
            ),
        }
    }

    /// Whether lowercasing after this transformation gives what lowercasing before it
    /// gives, for every value: it neither reads nor writes the case of letters (or,
    /// as `t:cmdLine`, lowercases itself). A chain `..., t:lowercase, T` with such a
    /// `T` is then the chain `..., T, t:lowercase`.
    pub(crate) fn commutes_with_lowercase(self) -> bool {
        matches!(
            self,
            Transform::Lowercase
                | Transform::CmdLine
                | Transform::CompressWhitespace
                | Transform::RemoveWhitespace
                | Transform::RemoveNulls
                | Transform::ReplaceNulls
                | Transform::RemoveComments
                | Transform::RemoveCommentsChar
                | Transform::ReplaceComments
                | Transform::NormalisePath
                | Transform::NormalisePathWin
                | Transform::Trim
                | Transform::TrimLeft
                | Transform::TrimRight
        )
    }

    /// A transformation that gives the same result as this one on every value whose
    /// [`byte_classes`] are `classes` (itself, mostly): `normalisePathWin` reads
    /// backslashes as slashes and is otherwise `normalisePath`, so on a value without
    /// `\` it is `normalisePath`. The engine keys its cache of results by the step this
    /// returns, so that pipelines that differ only there share one result.
    pub(crate) fn same_on(self, classes: u32) -> Transform {
        match self {
            Transform::NormalisePathWin if classes & class::BACKSLASH == 0 => {
                Transform::NormalisePath
            }
            t => t,
        }
    }

    /// Applies the transformation. Returns `Cow::Borrowed` when the input is unchanged.
    ///
    /// `Cow::Borrowed` may also hold a strict sub-slice of the input when the result is one
    /// (for example `trim`, or a decoder that only dropped trailing bytes), so "unchanged"
    /// is `Borrowed` with the input's length, not `Borrowed` alone.
    pub fn apply(self, input: &[u8]) -> Cow<'_, [u8]> {
        self.apply_with(input, None)
    }

    /// As [`Transform::apply`], with the `SecUnicodeMapFile` table `t:urlDecodeUni`
    /// maps `%uHHHH` through (the only transformation that reads it, as in
    /// ModSecurity v3).
    pub fn apply_with<'a>(self, input: &'a [u8], map: Option<&UnicodeMap>) -> Cow<'a, [u8]> {
        match self {
            Transform::Lowercase => text::lowercase(input),
            Transform::Uppercase => text::uppercase(input),
            Transform::UrlDecode => url::url_decode(input),
            Transform::UrlDecodeUni => url::url_decode_uni(input, map),
            Transform::UrlEncode => url::url_encode(input),
            Transform::HtmlEntityDecode => html::html_entity_decode(input),
            Transform::JsDecode => escapes::js_decode(input),
            Transform::CssDecode => escapes::css_decode(input),
            Transform::EscapeSeqDecode => escapes::escape_seq_decode(input),
            Transform::Base64Decode => base64::base64_decode(input),
            Transform::Base64DecodeExt => base64::base64_decode_ext(input),
            Transform::Base64Encode => base64::base64_encode(input),
            Transform::HexDecode => hex::hex_decode(input),
            Transform::HexEncode => hex::hex_encode(input),
            Transform::SqlHexDecode => hex::sql_hex_decode(input),
            Transform::Utf8ToUnicode => url::utf8_to_unicode(input),
            Transform::Md5 => hash::md5(input),
            Transform::Sha1 => hash::sha1(input),
            Transform::Length => text::length(input),
            Transform::CmdLine => text::cmd_line(input),
            Transform::CompressWhitespace => text::compress_whitespace(input),
            Transform::RemoveWhitespace => text::remove_whitespace(input),
            Transform::RemoveNulls => text::remove_nulls(input),
            Transform::ReplaceNulls => text::replace_nulls(input),
            Transform::RemoveComments => comments::remove_comments(input),
            Transform::RemoveCommentsChar => comments::remove_comments_char(input),
            Transform::ReplaceComments => comments::replace_comments(input),
            Transform::NormalisePath => path::normalise_path(input),
            Transform::NormalisePathWin => path::normalise_path_win(input),
            Transform::Trim => text::trim(input),
            Transform::TrimLeft => text::trim_left(input),
            Transform::TrimRight => text::trim_right(input),
            Transform::ParityEven7bit => text::parity_even_7bit(input),
            Transform::ParityOdd7bit => text::parity_odd_7bit(input),
            Transform::ParityZero7bit => text::parity_zero_7bit(input),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A transformation must leave alone every value made only of bytes outside its
    /// triggers: the engine skips it on such values.
    #[test]
    fn untriggered_values_are_unchanged() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for &t in Transform::ALL {
            let trig = t.triggers();
            if trig == class::ANY {
                continue;
            }
            let allowed: Vec<u8> = (0..=255u8)
                .filter(|&b| class::TABLE[usize::from(b)] & trig == 0)
                .collect();
            assert!(!allowed.is_empty(), "{t:?}");
            for _ in 0..20_000 {
                let len = (next() % 24) as usize;
                let v: Vec<u8> = (0..len)
                    .map(|_| allowed[(next() % allowed.len() as u64) as usize])
                    .collect();
                assert_eq!(byte_classes(&v) & trig, 0);
                assert_eq!(&*t.apply(&v), &v[..], "{t:?} changed {v:?}");
            }
        }
    }

    /// `same_on` names a transformation that gives the same result on values of
    /// those classes.
    #[test]
    fn same_on_gives_the_same_results() {
        let mut rng = crate::body::fuzz::XorShift(0x51ab_1e5e_ed00_0001);
        let alphabet: &[u8] = b"/.\\ab%2e";
        for &t in Transform::ALL {
            for _ in 0..20_000 {
                let len = rng.below(24);
                let v: Vec<u8> = (0..len)
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect();
                let same = t.same_on(byte_classes(&v));
                if same != t {
                    assert_eq!(same.apply(&v), t.apply(&v), "{t:?} and {same:?} on {v:?}");
                }
            }
        }
        assert_eq!(
            Transform::NormalisePathWin.same_on(byte_classes(b"/a/../b")),
            Transform::NormalisePath
        );
        assert_eq!(
            Transform::NormalisePathWin.same_on(byte_classes(b"\\a\\..")),
            Transform::NormalisePathWin
        );
    }

    /// A transformation said to commute with `t:lowercase` gives, lowercased, what it
    /// gives on the lowercased value, on values full of what transformations react
    /// to; and one that does not (a sample of them) is caught.
    #[test]
    fn lowercase_commutes_with_what_says_so() {
        let mut rng = crate::body::fuzz::XorShift(0x10c0_11e5);
        let pieces: &[&[u8]] = &[
            b"a", b"A", b"Z", b"q", b" ", b"\t", b"\n", b"\0", b"\xa0", b"/", b"\\", b".", b"..",
            b"/*", b"*/", b"--", b"#", b"<!--", b"-->", b"'", b"\"", b"^", b",", b";", b"(",
            b"%4A", b"&#65;", b"\\x41", b"0x4A", b"\xc1", b"\xe9",
        ];
        let mut differs: Vec<Transform> = Vec::new();
        for &t in Transform::ALL {
            for _ in 0..5_000 {
                let n = rng.below(10);
                let v: Vec<u8> = (0..n)
                    .flat_map(|_| pieces[rng.below(pieces.len())].iter().copied())
                    .collect();
                let after = t.apply(&v).to_ascii_lowercase();
                let before = t.apply(&v.to_ascii_lowercase()).into_owned();
                if after != before {
                    assert!(
                        !t.commutes_with_lowercase(),
                        "{t:?} on {v:?}: {after:?} against {before:?}"
                    );
                    if !differs.contains(&t) {
                        differs.push(t);
                    }
                }
            }
        }
        for t in [
            Transform::UrlDecode,
            Transform::HtmlEntityDecode,
            Transform::JsDecode,
            Transform::SqlHexDecode,
            Transform::Uppercase,
        ] {
            assert!(differs.contains(&t), "{t:?} was not caught");
        }
    }

    /// A transformation's [`Effect`] is what it does, and every transformation said to
    /// commute with a deletion does (one not said to may or may not: those that do
    /// not are caught).
    #[test]
    fn effects_are_what_the_transformations_do_and_commute_where_said() {
        let mut rng = crate::body::fuzz::XorShift(0xeff_ec7);
        let pieces: &[&[u8]] = &[
            b"a", b"A", b"Z", b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c", b"\0", b"\xa0", b"\xc2",
            b"/", b"\\", b".", b"/*", b"*/", b"--", b"#", b"'", b"\"", b",", b";", b"(", b"%20",
            b"%4A", b"&#32;", b"\\x20", b"+",
        ];
        let value = |rng: &mut crate::body::fuzz::XorShift| -> Vec<u8> {
            let n = rng.below(10);
            (0..n)
                .flat_map(|_| pieces[rng.below(pieces.len())].iter().copied())
                .collect()
        };
        let apply = |e: Effect, v: &[u8]| -> Vec<u8> {
            match e {
                Effect::Lowercase => v.to_ascii_lowercase(),
                Effect::Delete(f) => v.iter().copied().filter(|&b| !f(b)).collect(),
            }
        };
        let with_effect: Vec<(Transform, Effect)> = Transform::ALL
            .iter()
            .filter_map(|&t| Some((t, t.effect()?)))
            .collect();
        assert_eq!(with_effect.len(), 2);
        let mut differs: Vec<Transform> = Vec::new();
        for &(t, e) in &with_effect {
            for _ in 0..2_000 {
                let v = value(&mut rng);
                assert_eq!(t.apply(&v).into_owned(), apply(e, &v), "{t:?} on {v:?}");
            }
            if matches!(e, Effect::Lowercase) {
                continue;
            }
            for &other in Transform::ALL {
                for _ in 0..2_000 {
                    let v = value(&mut rng);
                    let after = apply(e, &other.apply(&v));
                    let before = other.apply(&apply(e, &v)).into_owned();
                    if after != before {
                        assert!(
                            !other.commutes_with(e),
                            "{other:?} after {t:?} on {v:?}: {after:?} against {before:?}"
                        );
                        if !differs.contains(&other) {
                            differs.push(other);
                        }
                    }
                }
            }
        }
        for t in [
            Transform::UrlDecode,
            Transform::HtmlEntityDecode,
            Transform::JsDecode,
            Transform::CmdLine,
        ] {
            assert!(differs.contains(&t), "{t:?} was not caught");
        }
    }

    #[test]
    fn names_round_trip() {
        for &t in Transform::ALL {
            assert_eq!(Transform::from_name(t.name()), Some(t), "{t:?}");
            assert_eq!(
                Transform::from_name(&t.name().to_ascii_uppercase()),
                Some(t)
            );
            assert_eq!(
                Transform::from_name(&t.name().to_ascii_lowercase()),
                Some(t)
            );
        }
        // Every table entry names a variant in ALL, and every variant is in the table.
        for (n, t) in NAMES {
            assert!(Transform::ALL.contains(t), "{n}");
        }
        assert_eq!(Transform::ALL.len(), 35);
        let mut names: Vec<_> = Transform::ALL.iter().map(|t| t.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Transform::ALL.len(), "names are distinct");
    }

    #[test]
    fn aliases_and_unknown() {
        assert_eq!(
            Transform::from_name("normalizePath"),
            Some(Transform::NormalisePath)
        );
        assert_eq!(
            Transform::from_name("NORMALIZEPATHWIN"),
            Some(Transform::NormalisePathWin)
        );
        assert_eq!(
            Transform::from_name("urldecodeuni"),
            Some(Transform::UrlDecodeUni)
        );
        assert_eq!(Transform::from_name("none"), None);
        assert_eq!(Transform::from_name("None"), None);
        assert_eq!(Transform::from_name(""), None);
        assert_eq!(Transform::from_name("lowercas"), None);
        assert_eq!(Transform::from_name("t:lowercase"), None);
        assert_eq!(Transform::from_name("lowercase "), None);
        assert_eq!(Transform::from_name("sha256"), None);
    }

    #[test]
    fn dispatch_reaches_each_function() {
        let cases: &[(Transform, &[u8], &[u8])] = &[
            (Transform::Lowercase, b"AbC", b"abc"),
            (Transform::Uppercase, b"aBc", b"ABC"),
            (Transform::UrlDecode, b"a%20b+c", b"a b c"),
            (Transform::UrlDecodeUni, b"%u0041%uFF21", b"AA"),
            (Transform::UrlEncode, b"a b", b"a+b"),
            (Transform::HtmlEntityDecode, b"&lt;&#65;", b"<A"),
            (Transform::JsDecode, b"\\x41\\u0042", b"AB"),
            (Transform::CssDecode, b"\\41\\42", b"AB"),
            (Transform::EscapeSeqDecode, b"\\x41\\n", b"A\n"),
            (Transform::Base64Decode, b"QUJD", b"ABC"),
            (Transform::Base64DecodeExt, b"Q.U.J.D", b"ABC"),
            (Transform::Base64Encode, b"ABC", b"QUJD"),
            (Transform::HexDecode, b"414243", b"ABC"),
            (Transform::HexEncode, b"ABC", b"414243"),
            (Transform::SqlHexDecode, b"0x414243", b"ABC"),
            (Transform::Utf8ToUnicode, b"\xc3\xa9", b"%u00e9"),
            (
                Transform::Md5,
                b"",
                b"\xd4\x1d\x8c\xd9\x8f\x00\xb2\x04\xe9\x80\x09\x98\xec\xf8\x42\x7e",
            ),
            (
                Transform::Sha1,
                b"",
                b"\xda\x39\xa3\xee\x5e\x6b\x4b\x0d\x32\x55\xbf\xef\x95\x60\x18\x90\xaf\xd8\x07\x09",
            ),
            (Transform::Length, b"abcd", b"4"),
            (Transform::CmdLine, b"C,A\"T", b"c at"),
            (Transform::CompressWhitespace, b"a \t b", b"a b"),
            (Transform::RemoveWhitespace, b"a \t b", b"ab"),
            (Transform::RemoveNulls, b"a\x00b", b"ab"),
            (Transform::ReplaceNulls, b"a\x00b", b"a b"),
            (Transform::RemoveComments, b"a/*x*/b", b"ab"),
            (Transform::RemoveCommentsChar, b"a/*x*/b", b"axb"),
            (Transform::ReplaceComments, b"a/*x*/b", b"a b"),
            (Transform::NormalisePath, b"/a/../b", b"/b"),
            (Transform::NormalisePathWin, b"\\a\\..\\b", b"/b"),
            (Transform::Trim, b" a ", b"a"),
            (Transform::TrimLeft, b" a ", b"a "),
            (Transform::TrimRight, b" a ", b" a"),
            (Transform::ParityEven7bit, b"a", b"\xe1"),
            (Transform::ParityOdd7bit, b"c", b"\xe3"),
            (Transform::ParityZero7bit, b"\xe1", b"a"),
        ];
        assert_eq!(cases.len(), Transform::ALL.len());
        for &(t, input, want) in cases {
            assert_eq!(&*t.apply(input), want, "{}", t.name());
        }
    }

    /// Transformations whose output is never the input itself.
    fn always_rewrites(t: Transform) -> bool {
        matches!(
            t,
            Transform::Base64Decode
                | Transform::Base64DecodeExt
                | Transform::Base64Encode
                | Transform::HexDecode
                | Transform::HexEncode
                | Transform::Md5
                | Transform::Sha1
                | Transform::Length
        )
    }

    #[test]
    fn empty_input() {
        for &t in Transform::ALL {
            let r = t.apply(b"");
            match t {
                Transform::Length => assert_eq!(&*r, b"0"),
                Transform::Md5 => assert_eq!(r.len(), 16),
                Transform::Sha1 => assert_eq!(r.len(), 20),
                _ => assert!(r.is_empty(), "{}", t.name()),
            }
            if !always_rewrites(t) {
                assert!(matches!(r, Cow::Borrowed(_)), "{}", t.name());
            }
        }
    }

    #[test]
    fn plain_values_are_borrowed_unchanged() {
        // A value none of the rewriting transformations touches.
        let plain = b"hello world 42";
        for &t in Transform::ALL {
            if always_rewrites(t)
                || matches!(
                    t,
                    Transform::Uppercase
                        | Transform::UrlEncode
                        | Transform::ParityEven7bit
                        | Transform::ParityOdd7bit
                        | Transform::CompressWhitespace
                        | Transform::RemoveWhitespace
                        | Transform::CmdLine
                )
            {
                continue;
            }
            let r = t.apply(plain);
            assert!(
                matches!(r, Cow::Borrowed(s) if s.len() == plain.len()),
                "{}",
                t.name()
            );
        }
        for t in [Transform::CompressWhitespace, Transform::CmdLine] {
            assert!(matches!(t.apply(plain), Cow::Borrowed(s) if s == plain));
        }
    }

    #[test]
    fn every_byte_value_is_safe() {
        // All 256 byte values, singly, in pairs and as a run, through every transformation:
        // no panic, and the results are deterministic.
        let all: Vec<u8> = (0..=255).collect();
        for &t in Transform::ALL {
            for b in 0..=255u8 {
                let _ = t.apply(&[b]);
                let _ = t.apply(&[b'\\', b]);
                let _ = t.apply(&[b'%', b'u', b]);
                let _ = t.apply(&[b'&', b'#', b]);
                let _ = t.apply(&[b, b'/', b'.', b'.']);
            }
            assert_eq!(t.apply(&all), t.apply(&all));
        }
    }

    #[test]
    fn truncated_escapes_at_end() {
        let cases: &[(Transform, &[u8], &[u8])] = &[
            (Transform::UrlDecode, b"a%", b"a%"),
            (Transform::UrlDecode, b"a%4", b"a%4"),
            (Transform::UrlDecodeUni, b"a%u12", b"a%u12"),
            (Transform::HtmlEntityDecode, b"a&#x", b"a&#x"),
            (Transform::HtmlEntityDecode, b"a&#65", b"aA"),
            (Transform::JsDecode, b"a\\u12", b"au12"),
            (Transform::JsDecode, b"a\\x1", b"ax1"),
            (Transform::JsDecode, b"a\\", b"a\\"),
            (Transform::CssDecode, b"a\\", b"a"),
            (Transform::EscapeSeqDecode, b"a\\", b"a\\"),
            (Transform::EscapeSeqDecode, b"a\\x1", b"ax1"),
            (Transform::Base64Decode, b"QUJDQ", b"ABC"),
            (Transform::RemoveComments, b"a/*", b"a "),
            (Transform::ReplaceComments, b"a/*", b"a "),
        ];
        for &(t, input, want) in cases {
            assert_eq!(&*t.apply(input), want, "{} {:?}", t.name(), input);
        }
    }

    /// Inputs of 1 MiB built to hit each transformation's slow paths.
    fn big_inputs() -> Vec<Vec<u8>> {
        const MIB: usize = 1 << 20;
        let rep = |pat: &[u8]| -> Vec<u8> { pat.iter().copied().cycle().take(MIB).collect() };
        vec![
            rep(b" "),
            rep(b"\x00\xff"),
            rep(b"%"),
            rep(b"%u%41+"),
            rep(b"&#"),
            rep(b"&#x41;&amp;&ampx"),
            rep(b"\\"),
            rep(b"\\u00411\\x4\\777"),
            rep(b"/*"),
            rep(b"/*x*/<!--x-->-"),
            rep(b"../"),
            rep(b"a/./..//\\"),
            rep(b"0x4"),
            rep(b"\xc3\xa9\xe2\x82"),
            rep(b"QUJD \n"),
            rep(b"=Q"),
            rep(b" /,;\"^"),
        ]
    }

    #[test]
    fn one_mebibyte_inputs_run_in_linear_time() {
        // A quadratic algorithm needs on the order of 10^12 steps on these; a linear one
        // takes milliseconds even unoptimised. The bound is generous to stay reliable on a
        // busy machine.
        let limit = Duration::from_secs(20);
        let inputs = big_inputs();
        for &t in Transform::ALL {
            let start = Instant::now();
            for input in &inputs {
                let r = t.apply(input);
                assert!(r.len() <= input.len() * 8 + 64, "{}", t.name());
            }
            let took = start.elapsed();
            assert!(took < limit, "{} took {took:?}", t.name());
        }
    }
}
