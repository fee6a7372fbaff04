//! `@detectSQLi` and `@detectXSS`: libinjection, as libmodsecurity runs it.
//!
//! # Which libinjection
//!
//! Palisade follows the libinjection that ModSecurity 3.0.9 bundles (its
//! `others/libinjection` submodule at the v3.0.9 tag: libinjection commit `bfba51f`,
//! version string "3.9.2"; also in 3.0.10 to 3.0.12), which is what Debian 12's
//! libmodsecurity3 runs. ModSecurity 3.0.13 and later bundle a libinjection whose SQLi
//! code behaves the same and whose XSS code flags only `on*` attribute names that
//! start with a known event name. PyPI's `libinjection-python` 1.1.6 has the same
//! version string but older SQLi code (its `$tag$…$tag$` search starts at the wrong
//! offset) and an XSS patched to an 87-name event list; it is not the reference.
//!
//! `fuzz/differential/libinjection_diff.py` compares both detectors with the C library
//! inside Debian's `libmodsecurity.so.3` (3.0.9, which exports libinjection's
//! functions) on a million generated values: 0 differences on SQLi verdicts and
//! fingerprints, and only the XSS differences listed below.
//!
//! - **SQLi** is Palisade's own implementation of C's algorithm ([`sqli`]), with the
//!   keyword table and character classes of the `libinjectionrs` crate (equal to C's).
//!   It is linear in the length of the value.
//! - **XSS** is the `libinjectionrs` crate's detector, plus the one rule where the crate
//!   is narrower than C 3.0.9: C treats every attribute name of five bytes or more that
//!   starts with `on` as an event handler (`<a onfoo=x>`, `x online=1`); the crate
//!   only listed event names. When the crate says "no XSS", [`detect_xss`] walks the
//!   crate's HTML5 tokens again, in C's five contexts, and reports such an attribute
//!   name followed by a value, or an `attributeName` attribute whose value is such a
//!   name.
//!
//! # Known differences from C (bugs)
//!
//! - **XSS, NUL bytes.** C's HTML5 tokenizer treats a NUL byte as white space where it
//!   tests for white space (its test is `strchr(" \t\n\v\f\r", c)`, which also finds
//!   the string's terminating NUL): a NUL ends a tag name, an attribute name or an
//!   unquoted attribute value. The crate's tokenizer does not. For attribute names
//!   [`detect_xss`] makes up for it (of a name holding NULs, the last piece gets the
//!   value, as in C), but the crate's own answers stay: `<a oner\0ror=1>` is XSS to
//!   the crate (it compares event names ignoring NULs) and not to C. The differential
//!   run finds 42 such values per million generated ones (every one holds a NUL byte).
//!   CRS is not affected: every CRS rule that calls `@detectXSS` applies
//!   `t:removeNulls` first. Fixing it means an own HTML5 tokenizer, like [`sqli`].

mod sqli;

use libinjectionrs::xss::{Html5Flags, Html5State, TokenType};

/// Runs libinjection's SQLi detection. `Some(fingerprint)` when the input looks like
/// SQL injection; the fingerprint is at most 8 bytes (for instance `s&1c`).
///
/// The answer is C libinjection's `libinjection_sqli` (see [`sqli`]); the fingerprint
/// is the one of the reading that matched.
pub fn detect_sqli(input: &[u8]) -> Option<Fingerprint> {
    sqli::detect(input).map(Fingerprint)
}

/// A libinjection SQLi fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint([u8; 8]);

impl Fingerprint {
    /// The fingerprint bytes (up to the first NUL).
    pub fn as_bytes(&self) -> &[u8] {
        let len = self.0.iter().position(|&b| b == 0).unwrap_or(self.0.len());
        &self.0[..len]
    }
}

/// The HTML contexts libinjection tries, in its order.
const CONTEXTS: [Html5Flags; 5] = [
    Html5Flags::DataState,
    Html5Flags::ValueNoQuote,
    Html5Flags::ValueSingleQuote,
    Html5Flags::ValueDoubleQuote,
    Html5Flags::ValueBackQuote,
];

/// Runs libinjection's XSS detection, with the `on*` prefix rule of C libinjection
/// restored (see the module documentation).
pub fn detect_xss(input: &[u8]) -> bool {
    may_be_xss(input)
        && (libinjectionrs::detect_xss(input).is_injection() || event_prefix_xss(input))
}

/// A necessary condition for [`detect_xss`], checked before the five HTML contexts
/// are tokenized: a `<` that may open a dangerous markup token (see
/// [`may_open_xss_markup`]), or a `=` after a run of bytes that may end in a
/// suspicious attribute name.
///
/// Why: libinjection reports XSS only on a doctype, a tag name, a comment, or an
/// attribute value that directly follows a suspicious attribute name (the `on*` rule
/// above included). Its HTML5 tokenizer reaches the first three only from the state it
/// enters on `<`, and reaches an attribute value after a name only through `=` (the
/// quoted contexts start inside a value, but no name precedes that one). A name ends
/// at white space (`\t \n \v \f \r` and space, the tokenizer's set), `/`, `=` or
/// `>`, and only white space may stand between it and its `=`; so the name before a
/// `=` is a suffix of the bytes between the last white space or `=` before it and the
/// white space (and NULs) in front of it. (A name may start with `=`, but no such
/// name is suspicious.) Names are compared ASCII case-insensitively with NULs
/// skipped, so each such run, NULs removed, is checked for every suspicious name
/// ending it, and for `on`, `xmlns` and `xlink` anywhere in it (the prefix rules).
/// Each byte is looked at in at most one run: linear in the value's length.
fn may_be_xss(input: &[u8]) -> bool {
    if may_open_xss_markup(input) {
        return true;
    }
    let white = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut start = 0;
    for eq in memchr::memchr_iter(b'=', input) {
        let mut end = eq;
        while end > start && (white(input[end - 1]) || input[end - 1] == 0) {
            end -= 1;
        }
        let mut begin = end;
        while begin > start && !white(input[begin - 1]) && input[begin - 1] != b'=' {
            begin -= 1;
        }
        if may_end_in_suspicious_name(&input[begin..end]) {
            return true;
        }
        start = eq + 1;
    }
    false
}

/// Tag names libinjection reports as XSS (upper case; compared ignoring NULs).
const BLACK_TAG_NAMES: [&[u8]; 20] = [
    b"APPLET",
    b"BASE",
    b"COMMENT",
    b"EMBED",
    b"FRAME",
    b"FRAMESET",
    b"HANDLER",
    b"IFRAME",
    b"IMPORT",
    b"ISINDEX",
    b"LINK",
    b"LISTENER",
    b"META",
    b"NOSCRIPT",
    b"OBJECT",
    b"SCRIPT",
    b"STYLE",
    b"VMLFRAME",
    b"XML",
    b"XSS",
];

/// Whether some `<` of `input` may start one of the markup tokens libinjection reports
/// whatever follows them: a doctype, a tag name on its list (or starting with `svg` or
/// `xsl`), or a comment that holds a backtick or starts with `[if`, `xml`, `import` or
/// `entity`.
///
/// Why it is a necessary condition: the crate's HTML5 tokenizer makes those tokens only
/// in the states it enters from the data state on `<`, and each token's bytes are fixed
/// by where that `<` is: a tag name runs from the byte after `<` (or after `</`) to
/// white space, `/` or `>`; a comment starts 2 bytes after `<` (4 after `<!--`); a
/// doctype is `<!` and `DOCTYPE`. So every `<` is checked as if the tokenizer stood in
/// the data state there, which covers the `<`s it really reads that way, in all five
/// contexts. Each check reads a bounded number of bytes past its `<` (a tag name is cut
/// after 9 bytes that are not NUL: no listed name is that long), so the pass is linear.
fn may_open_xss_markup(input: &[u8]) -> bool {
    let mut lts = memchr::memchr_iter(b'<', input).peekable();
    if lts.peek().is_none() {
        return false;
    }
    let backtick = memchr::memchr(b'`', input).is_some();
    let letter = |b: u8| b.is_ascii_alphabetic();
    for lt in lts {
        let at = |k: usize| input.get(lt + k).copied();
        let comment_at = |k: &[usize]| {
            k.iter()
                .any(|&k| may_be_xss_comment(&input[(lt + k).min(input.len())..]))
        };
        let suspicious = match at(1) {
            Some(b'!') => {
                backtick
                    || input
                        .get(lt + 2..lt + 9)
                        .is_some_and(|w| w.eq_ignore_ascii_case(b"DOCTYPE"))
                    || comment_at(&[2, 4])
            }
            Some(b'?' | b'%') => backtick || comment_at(&[2]),
            Some(b'/') => match at(2) {
                Some(c) if letter(c) => may_be_black_tag(&input[lt + 2..]),
                None | Some(b'>') => false,
                Some(_) => backtick || comment_at(&[2]),
            },
            Some(c) if letter(c) || c == 0 => may_be_black_tag(&input[lt + 1..]),
            _ => false,
        };
        if suspicious {
            return true;
        }
    }
    false
}

/// Whether the tag name at the start of `rest` (up to white space, `/` or `>`) may be
/// one libinjection reports: starting with `svg` or `xsl`, or, NULs dropped and ASCII
/// case ignored, one of [`BLACK_TAG_NAMES`].
fn may_be_black_tag(rest: &[u8]) -> bool {
    let ends = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b'/' | b'>');
    if rest.len() >= 3
        && !rest[..3].iter().any(|&b| ends(b))
        && (rest[..3].eq_ignore_ascii_case(b"svg") || rest[..3].eq_ignore_ascii_case(b"xsl"))
    {
        return true;
    }
    let mut name = [0u8; 9];
    let mut len = 0;
    for &b in rest {
        if ends(b) {
            break;
        }
        if b == 0 {
            continue;
        }
        if len == name.len() {
            return false;
        }
        name[len] = b.to_ascii_uppercase();
        len += 1;
    }
    BLACK_TAG_NAMES.contains(&&name[..len])
}

/// Whether a comment token whose bytes start `rest` may be one libinjection reports
/// by its start: `[if` or `xml` (any case), or `import` or `entity` in its first 6
/// bytes, NULs dropped (any NUL there counts as a possible match). The backtick rule
/// is checked by the caller, over the whole value.
fn may_be_xss_comment(rest: &[u8]) -> bool {
    let three = rest.get(..3);
    if three.is_some_and(|w| w.eq_ignore_ascii_case(b"[if") || w.eq_ignore_ascii_case(b"xml")) {
        return true;
    }
    rest.get(..6).is_some_and(|w| {
        w.contains(&0) || w.eq_ignore_ascii_case(b"import") || w.eq_ignore_ascii_case(b"entity")
    })
}

/// Attribute names libinjection treats as suspicious by their whole name (upper case).
const SUSPICIOUS_NAMES: [&[u8]; 20] = [
    b"ACTION",
    b"ATTRIBUTENAME",
    b"BY",
    b"BACKGROUND",
    b"DATAFORMATAS",
    b"DATASRC",
    b"DYNSRC",
    b"FILTER",
    b"FORMACTION",
    b"FOLDER",
    b"FROM",
    b"HANDLER",
    b"HREF",
    b"LOWSRC",
    b"POSTER",
    b"SRC",
    b"STYLE",
    b"TO",
    b"VALUES",
    b"XLINK:HREF",
];

/// Whether some suffix of `run` (NULs removed, ASCII case ignored) may be a suspicious
/// attribute name: one of [`SUSPICIOUS_NAMES`], or a name starting with `on`, `xmlns`
/// or `xlink` (tested as: the run holds one of them anywhere).
fn may_end_in_suspicious_name(run: &[u8]) -> bool {
    let name: Vec<u8> = run
        .iter()
        .filter(|&&b| b != 0)
        .map(u8::to_ascii_uppercase)
        .collect();
    let holds = |p: &[u8]| name.windows(p.len()).any(|w| w == p);
    holds(b"ON")
        || holds(b"XMLNS")
        || holds(b"XLINK")
        || SUSPICIOUS_NAMES.iter().any(|n| name.ends_with(n))
}

/// What the last attribute name makes of the next attribute value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pending {
    None,
    /// The name is an `on*` event handler (by prefix): any value is XSS.
    Event,
    /// The name is `attributeName`: the value names an attribute.
    Indirect,
}

/// The conditions under which C libinjection reports XSS and the crate does not:
/// an attribute (or an `attributeName` value) that is an event handler only by the
/// prefix rule.
fn event_prefix_xss(input: &[u8]) -> bool {
    may_hold_event_attribute(input) && event_attribute_in_tokens(input)
}

/// The token walk behind [`event_prefix_xss`], without the cheap pre-check.
fn event_attribute_in_tokens(input: &[u8]) -> bool {
    for context in CONTEXTS {
        let mut h5 = Html5State::new(input, context);
        let mut pending = Pending::None;
        while h5.next() {
            let token = h5.token_start.get(..h5.token_len).unwrap_or(h5.token_start);
            match h5.token_type {
                TokenType::AttrName => {
                    // C ends an attribute name at a NUL byte (white space to its
                    // HTML5 tokenizer), the crate does not: of a name with NULs, C
                    // gives the value to the last piece.
                    let name = token.rsplit(|&b| b == 0).find(|p| !p.is_empty());
                    let token = name.unwrap_or(token);
                    pending = if is_on_attribute(token) {
                        Pending::Event
                    } else if eq_ignoring_nuls(b"ATTRIBUTENAME", token) {
                        Pending::Indirect
                    } else {
                        Pending::None
                    };
                }
                TokenType::AttrValue => {
                    match pending {
                        Pending::Event => return true,
                        Pending::Indirect if is_on_attribute(token) => return true,
                        _ => {}
                    }
                    pending = Pending::None;
                }
                _ => pending = Pending::None,
            }
        }
    }
    false
}

/// A cheap necessary condition for [`event_prefix_xss`]: `on` where the HTML5
/// tokenizer can start an attribute name (at the start, or after whitespace, NUL,
/// `/` or a closing quote), or an `attributeName` attribute anywhere.
fn may_hold_event_attribute(input: &[u8]) -> bool {
    let name_start = |pos: usize| {
        pos == 0
            || matches!(
                input[pos - 1],
                0 | b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b'/' | b'"' | b'\'' | b'`'
            )
    };
    memchr::memchr2_iter(b'o', b'O', input)
        .any(|pos| name_start(pos) && input.get(pos + 1).is_some_and(|c| c | 0x20 == b'n'))
        || contains_ignoring_nuls(b"ATTRIBUTENAME", input)
}

/// Whether `b`, NUL bytes dropped, contains the upper-case `needle`, ignoring ASCII
/// case, in one pass over `b`. `needle` must have no proper prefix that is also a
/// suffix of it (as `ATTRIBUTENAME`): then a mismatch after a partial match can only
/// restart a match at the mismatching byte itself.
fn contains_ignoring_nuls(needle: &[u8], b: &[u8]) -> bool {
    let Some(&first) = needle.first() else {
        return true;
    };
    // Only the last byte of the needle can complete a match: skip to its next copy
    // when the input has no NUL (the usual case), else walk byte by byte.
    let last = needle[needle.len() - 1];
    if memchr::memchr(0, b).is_none() {
        return memchr::memchr2_iter(last, last.to_ascii_lowercase(), b).any(|end| {
            end + 1 >= needle.len() && b[end + 1 - needle.len()..=end].eq_ignore_ascii_case(needle)
        });
    }
    let mut k = 0;
    for &c in b.iter().filter(|&&c| c != 0) {
        let c = c.to_ascii_uppercase();
        if c == needle[k] {
            k += 1;
            if k == needle.len() {
                return true;
            }
        } else {
            k = usize::from(c == first);
        }
    }
    false
}

/// Whether `b`, NUL bytes dropped, starts with the upper-case `prefix`, ignoring
/// ASCII case (the tests' reference for [`contains_ignoring_nuls`]).
#[cfg(test)]
fn starts_ignoring_nuls(prefix: &[u8], b: &[u8]) -> bool {
    let mut rest = b.iter().filter(|&&c| c != 0);
    prefix
        .iter()
        .all(|&p| rest.next().is_some_and(|c| c.to_ascii_uppercase() == p))
}

/// C's rule (libinjection as ModSecurity 3.0.9 bundles it): an attribute name of
/// five bytes or more that starts with `on` (any case) is an event handler.
fn is_on_attribute(name: &[u8]) -> bool {
    name.len() >= 5 && name[..2].eq_ignore_ascii_case(b"on")
}

/// C's `cstrcasecmp_with_null`: `b` with its NUL bytes dropped equals the upper-case
/// `a`, ignoring ASCII case.
fn eq_ignoring_nuls(a: &[u8], b: &[u8]) -> bool {
    let mut expected = a.iter();
    for &c in b.iter().filter(|&&c| c != 0) {
        if expected.next() != Some(&c.to_ascii_uppercase()) {
            return false;
        }
    }
    expected.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(input: &[u8]) -> Option<String> {
        detect_sqli(input).map(|f| String::from_utf8_lossy(f.as_bytes()).into_owned())
    }

    /// CRS 942101 tests (REQUEST-942-APPLICATION-ATTACK-SQLI/942101.yaml; the CRS
    /// v4.28 copy has no 942100.yaml). The rule runs `t:utf8toUnicode,
    /// t:urlDecodeUni,t:removeNulls` on REQUEST_BASENAME and REQUEST_FILENAME; the
    /// values below are the URI paths after that decoding (`+` becomes a space and
    /// `%xx` its byte). The first value of each pair is REQUEST_FILENAME, the
    /// second REQUEST_BASENAME; the rule matches if either does.
    #[test]
    fn crs_942101_values() {
        let positive: [(&[u8], &[u8]); 9] = [
            (b"/post/1234 OR 1=1", b"1234 OR 1=1"),
            (
                b"/post/2010-01-01' sleep(20.to_i) '",
                b"2010-01-01' sleep(20.to_i) '",
            ),
            (b"/post/EmptyValue' and 526=527", b"EmptyValue' and 526=527"),
            (
                b"/post/foo')waitfor delay'5:0:20'--",
                b"foo')waitfor delay'5:0:20'--",
            ),
            (b"/post/sleep(20)", b"sleep(20)"),
            (
                b"/post/unittests@coreruleset.org\" sleep(10.to_i) \"",
                b"unittests@coreruleset.org\" sleep(10.to_i) \"",
            ),
            (
                b"/post/foo/24'union all select 1,2,3 from aa",
                b"24'union all select 1,2,3 from aa",
            ),
            (b"/post/foo/24'union all select 1,2,3 from aa/bar", b"bar"),
            (b"/post/*/*/2 union all/bar", b"bar"),
        ];
        for (filename, basename) in positive {
            assert!(
                detect_sqli(filename).is_some() || detect_sqli(basename).is_some(),
                "{}",
                String::from_utf8_lossy(filename)
            );
        }
        let negative: [&[u8]; 4] = [
            b"/post/foo/9'union all/bar",
            b"bar",
            b"/post/foo/24 union all select 1,2,3 from aa/bar",
            b"bar",
        ];
        for value in negative {
            assert_eq!(fp(value), None, "{}", String::from_utf8_lossy(value));
        }
    }

    #[test]
    fn sqli_fingerprints() {
        // Fingerprints checked against C libinjection 3.9.2 (libinjection-python).
        assert_eq!(fp(b"1' or 1=1--").as_deref(), Some("s&1c"));
        assert_eq!(fp(b"1234 OR 1=1").as_deref(), Some("1&1"));
        assert_eq!(fp(b"sleep(20)").as_deref(), Some("f(1)"));
        assert_eq!(fp(b"1 union select 1,2").as_deref(), Some("1UE1"));
        assert_eq!(fp(b"hello world"), None);
        assert_eq!(fp(b""), None);
        assert_eq!(fp(b"O'Reilly"), None);
        assert_eq!(fp(b"\xFF\xFE\0"), None);
    }

    /// CRS 941100 tests (REQUEST-941-APPLICATION-ATTACK-XSS/941100.yaml). The rule
    /// runs `t:utf8toUnicode,t:urlDecodeUni,t:htmlEntityDecode,t:jsDecode,
    /// t:cssDecode,t:removeNulls`; the values are after those transformations.
    #[test]
    fn crs_941100_values() {
        let positive: [&[u8]; 4] = [
            // Test 1, ARGS:input (query string, `+` decoded to space).
            br#"<script xmlns="http://www.w3.org/1999/xhtml">setTimeout("top.frame2.location="javascript:(function () {var x = document.createElement(\"script\");x.src = \"//sdl.me/popup.js?//\";document.childNodes\[0\].appendChild(x);}());"",1000)</script>"#,
            // Test 2, ARGS:body.
            br#"<x:script xmlns:x="http://www.w3.org/1999/xhtml" src="data:,alert(1)" />"#,
            // Test 3, the User-Agent header (the same payload after decoding).
            br#"/char_test?mime=text/xml&body=<x:script xmlns:x="http://www.w3.org/1999/xhtml" src="data:,alert(1)" />"#,
            // Test 6, ARGS:foo (`%3D` and `%77` decoded).
            b"<xss onbeforehellfreezes=alerw(1)>",
        ];
        for value in positive {
            assert!(detect_xss(value), "{}", String::from_utf8_lossy(value));
        }
        // Test 4: a benign Referer (941100 does not even look at Referer, but the
        // value must not be XSS either).
        assert!(!detect_xss(b"http://www.coreruleset.org"));
    }

    /// [`may_be_xss`] only skips values the full detection clears: values built from
    /// every byte but `<` and `=`, weighted towards the ones HTML and libinjection
    /// care about (quotes, `>`, `/`, `!`, `?`, `%`, white space, NUL, `on*` names,
    /// `style`, `javascript:`), are never XSS to the crate or to the `on*` walk.
    #[test]
    fn values_without_lt_or_equals_are_never_xss() {
        let pieces: [&[u8]; 16] = [
            b"\"",
            b"'",
            b"`",
            b">",
            b"/",
            b"!",
            b"?",
            b"%",
            b" ",
            b"\t",
            b"\0",
            b"onload",
            b"style",
            b"javascript:alert(1)",
            b"attributeName",
            b"x",
        ];
        // A small linear congruential generator: the same values on every run.
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize
        };
        for _ in 0..20_000 {
            let mut value = Vec::new();
            for _ in 0..next() % 12 {
                if next() % 4 == 0 {
                    let b = (next() % 256) as u8;
                    if b != b'<' && b != b'=' {
                        value.push(b);
                    }
                } else {
                    value.extend_from_slice(pieces[next() % pieces.len()]);
                }
            }
            assert!(!may_be_xss(&value));
            assert!(
                !libinjectionrs::detect_xss(&value).is_injection() && !event_prefix_xss(&value),
                "{:?}",
                String::from_utf8_lossy(&value)
            );
        }
        assert!(may_be_xss(b"\" onload=x"));
        assert!(may_be_xss(b"<svg"));
    }

    /// [`may_be_xss`] against the full detection on values with `=` (and no `<`):
    /// every value the crate or the `on*` walk reports as XSS passes the pre-check.
    /// Values mix suspicious names (in both cases, cut by NULs, with white space before
    /// the `=`), ordinary names, quotes, slashes and URLs, so that both answers occur.
    #[test]
    fn values_with_equals_that_are_xss_pass_the_pre_check() {
        let pieces: [&[u8]; 28] = [
            b"=",
            b"=",
            b" ",
            b"\t",
            b"\x0b",
            b"\0",
            b"\"",
            b"'",
            b"`",
            b"/",
            b">",
            b"on",
            b"ONload",
            b"onmouseover8",
            b"oN\0error",
            b"style",
            b"sTyLe",
            b"s\0rc",
            b"href",
            b"xmlns:x",
            b"xlink:href",
            b"attributeName",
            b"values",
            b"javascript:alert(1)",
            b"vbscript:x",
            b"x",
            b"1",
            b"a",
        ];
        let mut rng = crate::testkit::XorShift(0x7a11_5eed);
        let (mut flagged, mut passed) = (0, 0);
        for _ in 0..60_000 {
            let mut value = Vec::new();
            for _ in 0..rng.below(10) {
                if rng.below(6) == 0 {
                    let b = rng.next() as u8;
                    if b != b'<' {
                        value.push(b);
                    }
                } else {
                    value.extend_from_slice(pieces[rng.below(pieces.len())]);
                }
            }
            let xss = libinjectionrs::detect_xss(&value).is_injection() || event_prefix_xss(&value);
            if xss {
                flagged += 1;
                assert!(may_be_xss(&value), "{:?}", String::from_utf8_lossy(&value));
            } else if !may_be_xss(&value) {
                passed += 1;
            }
        }
        // Both kinds occur: the pre-check is tested on XSS and rules values out.
        assert!(flagged > 1_000 && passed > 1_000, "{flagged} {passed}");
        assert!(!may_be_xss(
            b"' or 1=1 union select 1 from dual where 'a' like '"
        ));
        assert!(may_be_xss(b"x onclick=1"));
        assert!(may_be_xss(b"x STY\0LE = 1"));
    }

    /// [`may_be_xss`] against the full detection on values with `<`: markup of every
    /// kind libinjection reports (listed tags in both cases and cut by NULs, close
    /// tags, `svg`/`xsl` prefixes, doctypes, comments of the four openings with the
    /// reported starts and backticks) mixed with harmless tags, mail addresses and the
    /// bytes that end names. Every value reported as XSS passes the pre-check, and
    /// values with `<` are also ruled out.
    #[test]
    fn values_with_lt_that_are_xss_pass_the_pre_check() {
        let pieces: [&[u8]; 40] = [
            b"<",
            b"<",
            b"<",
            b"</",
            b"<!",
            b"<!--",
            b"<?",
            b"<%",
            b"%>",
            b"-->",
            b">",
            b">",
            b" ",
            b"/",
            b"\0",
            b"`",
            b"=",
            b"\"",
            b"script",
            b"ScRiPt",
            b"scr\0ipt",
            b"iframe",
            b"style",
            b"xml",
            b"XSS",
            b"svgx",
            b"xSlt",
            b"frameset",
            b"noscripts",
            b"DOCTYPE",
            b"doctype html",
            b"[if",
            b"import",
            b"ENTITY",
            b"b",
            b"a",
            b"joe@example.com",
            b"\"Joe\" ",
            b", ",
            b"x",
        ];
        let mut rng = crate::testkit::XorShift(0x0017_5eed);
        let (mut flagged, mut passed) = (0, 0);
        for _ in 0..100_000 {
            let value = rng.value_of(&pieces, 9, 8);
            let xss = libinjectionrs::detect_xss(&value).is_injection() || event_prefix_xss(&value);
            if xss {
                flagged += 1;
                assert!(may_be_xss(&value), "{:?}", String::from_utf8_lossy(&value));
            } else if !may_be_xss(&value) && memchr::memchr(b'<', &value).is_some() {
                passed += 1;
            }
        }
        assert!(flagged > 5_000 && passed > 5_000, "{flagged} {passed}");
        let list = b"\"Joe\" <joe@example.com>, \"Ann B\" <ann.b@example.org>, <x@y.z>";
        assert!(!may_be_xss(list));
        for v in [
            &b"<script>"[..],
            b"</script x>",
            b"<sc\0ript",
            b"<svg/onload=1>",
            b"<!DOCTYPE html>",
            b"<!--[if IE]>",
            b"<?import x>",
            b"<!x`>",
        ] {
            assert!(may_be_xss(v), "{}", String::from_utf8_lossy(v));
        }
    }

    #[test]
    fn xss_basics() {
        assert!(detect_xss(b"<script>alert(1)</script>"));
        assert!(detect_xss(b"<img src=x onerror=alert(1)>"));
        assert!(detect_xss(b"\" onload=\"alert(1)"));
        assert!(detect_xss(b"<a href=\"javascript:alert(1)\">"));
        assert!(detect_xss(b"<!DOCTYPE html>"));
        assert!(!detect_xss(b""));
        assert!(!detect_xss(b"hello world"));
        assert!(!detect_xss(b"a < b and c > d"));
        assert!(!detect_xss(b"<b>bold</b>"));
        assert!(!detect_xss(b"one=two&online=yes"));
        assert!(!detect_xss(b"\xFF\xFE<\x80>"));
    }

    #[test]
    fn on_attribute_rule() {
        // Answers of the libinjection in Debian's libmodsecurity 3.0.9: an attribute
        // name of five bytes or more starting with `on`, with a value, is XSS; the
        // crate alone flags only listed event names.
        for v in [
            &b"<a onmouseover8=alert(1)>"[..],
            b"<a onerror+=alert(1)>",
            b"<a onabortx=1>",
            b"<p ONCLICKME=1>",
            b"x onmouseoverfoo=alert(1)",
            b"<a onfoo=x>",
            b"<a online=yes>",
            b"x online=yes",
        ] {
            assert!(detect_xss(v), "{}", String::from_utf8_lossy(v));
        }
        assert!(!libinjectionrs::detect_xss(b"<a onfoo=x>").is_injection());
        assert!(!detect_xss(b"<a onxx=1>"));
        assert!(!detect_xss(b"<a on=1>"));
        // A name alone, without a value, is not enough.
        assert!(!detect_xss(b"<a onmouseover8>"));
        // A NUL ends the name: `onabc` has no value, `x` is no event.
        assert!(!detect_xss(b"<a onabc\0x=1>"));
        assert!(detect_xss(b"<a x\0onfoo=1>"));
        // attributeName with an `on*` value.
        assert!(detect_xss(b"<set attributeName=onmouseover8 to=alert(1)>"));
        assert!(detect_xss(b"<set attributeName=onxyz to=x>"));
        assert!(!detect_xss(b"<set attributeName=class to=x>"));
    }

    /// The pre-check must never hide a case the token walk reports.
    #[test]
    fn pre_check_is_a_necessary_condition() {
        let alphabet: &[u8] = b"<>=/ \t\0\"'`aonONerrmouseclickATTRIBUTEname1x;&";
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut found = 0;
        for _ in 0..60_000 {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let len = (seed >> 58) as usize;
            let mut value = Vec::with_capacity(len + 8);
            let mut s = seed;
            for _ in 0..len {
                s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                value.push(alphabet[(s >> 33) as usize % alphabet.len()]);
            }
            if seed.is_multiple_of(3) {
                value.splice(0..0, b"<a onclickx=".iter().copied());
            }
            if event_attribute_in_tokens(&value) {
                found += 1;
                assert!(may_hold_event_attribute(&value), "{value:?}");
            }
        }
        assert!(found > 300, "only {found} positive samples");
    }

    #[test]
    fn helpers() {
        assert!(eq_ignoring_nuls(b"ATTRIBUTENAME", b"attribute\0Name"));
        assert!(!eq_ignoring_nuls(b"ATTRIBUTENAME", b"attributeNam"));
        assert!(!eq_ignoring_nuls(b"ATTRIBUTENAME", b"attributeNames"));
        assert!(starts_ignoring_nuls(b"ATTR", b"a\0tTrx"));
        assert!(!starts_ignoring_nuls(b"ATTR", b"att"));
        assert!(may_hold_event_attribute(b"onx"));
        assert!(may_hold_event_attribute(b"a\"onx"));
        assert!(may_hold_event_attribute(b"x attribute\0name=y"));
        assert!(!may_hold_event_attribute(b"action=session&json=1"));
        assert!(is_on_attribute(b"onerr"));
        assert!(!is_on_attribute(b"onxx"));
        assert!(!is_on_attribute(b"xonerror"));
    }

    #[test]
    fn contains_ignoring_nuls_agrees_with_the_prefix_walk() {
        let alphabet: &[u8] = b"aAtTrRiIbBuUeEnNmM\0x";
        let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
        let mut found = 0;
        for i in 0..40_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 40) as usize;
            let mut value: Vec<u8> = (0..len)
                .map(|j| alphabet[((seed >> (j % 50)) as usize + j * 7) % alphabet.len()])
                .collect();
            if i % 4 == 0 {
                let at = (seed as usize >> 8) % (value.len() + 1);
                let word: &[u8] = if i % 8 == 0 {
                    b"attri\0buteName"
                } else {
                    b"ATTRIBUTEname"
                };
                value.splice(at..at, word.iter().copied());
            }
            let expect =
                (0..value.len()).any(|pos| starts_ignoring_nuls(b"ATTRIBUTENAME", &value[pos..]));
            found += usize::from(expect);
            assert_eq!(
                contains_ignoring_nuls(b"ATTRIBUTENAME", &value),
                expect,
                "{value:?}"
            );
        }
        assert!(found > 5_000, "only {found} positive samples");
    }
}
