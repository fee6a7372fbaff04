//! `@detectSQLi` and `@detectXSS`, on top of `libinjectionrs` (a Rust port of
//! libinjection, the library libmodsecurity calls).
//!
//! # Known gaps of `libinjectionrs` 0.1.1 against C libinjection
//!
//! Measured against C libinjection built from the same source (see the project's
//! field notes): the verdicts agree on every CRS test value, but not everywhere.
//!
//! - **SQLi, multi-word keywords are never merged.** C folds `AT TIME`, `CREATE OR`,
//!   `IN BOOLEAN`, `IS DISTINCT`, `IS NOT DISTINCT`, `LOCK IN`, `LOCK IN SHARE`,
//!   `NEXT VALUE` and `PREVIOUS VALUE` into one keyword token before fingerprinting;
//!   the crate does not, so it misses for instance `1' is distinct from '1`,
//!   `1' or 1 is distinct from 2--` and `1;create or replace view v as select 1`,
//!   which C reports. This lives inside the tokenizer and cannot be fixed from
//!   outside the crate. *Not fixed here.*
//! - **SQLi/XSS, NUL bytes.** C treats a NUL byte as whitespace and as a token end;
//!   the crate does not, so values with embedded NULs can fingerprint differently.
//!   CRS applies `t:removeNulls` before both operators, so CRS is not affected.
//!   *Not fixed here* (replacing NULs by spaces in a wrapper is not equivalent inside
//!   strings and comments).
//! - **XSS, `on*` attribute names.** C (libinjection 4, which libmodsecurity bundles
//!   today) flags an attribute whose name, after `on`, *starts with* a known event
//!   name, such as `onmouseover8=`, `onerror+=` or `onscrollend=` (`scroll` is an
//!   event); the crate only flags exact event names. **Fixed here**: when the crate
//!   says "no XSS", [`detect_xss`] walks the crate's own HTML5 tokens again, in the
//!   same five contexts, and reports an `on*` attribute name (five bytes or more)
//!   followed by a value when a proper prefix of the name is an event in the crate's
//!   own table; the same for an `attributeName` attribute whose value is such a
//!   name. Those are exactly the extra conditions under which C answers "XSS", so
//!   the result is C's. (The table itself is queried through the crate's public
//!   detector, so it cannot drift from the crate.) Older libinjection (3.9.2, in
//!   libmodsecurity up to 3.0.12) flagged every attribute name of five bytes or more
//!   starting with `on`; Palisade follows the current library.

mod sqli;

use libinjectionrs::XssDetector;
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
    libinjectionrs::detect_xss(input).is_injection() || event_prefix_xss(input)
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
                    pending = if is_event_by_prefix(token) {
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
                        Pending::Indirect if is_event_by_prefix(token) => return true,
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
        || memchr::memchr2_iter(b'a', b'A', input)
            .any(|pos| starts_ignoring_nuls(b"ATTRIBUTENAME", &input[pos..]))
}

/// Whether `b`, NUL bytes dropped, starts with the upper-case `prefix`, ignoring
/// ASCII case.
fn starts_ignoring_nuls(prefix: &[u8], b: &[u8]) -> bool {
    let mut rest = b.iter().filter(|&&c| c != 0);
    prefix
        .iter()
        .all(|&p| rest.next().is_some_and(|c| c.to_ascii_uppercase() == p))
}

/// C's rule: a name of five bytes or more, `on` (any case), then something that
/// starts with a known event name. Only prefixes before the first NUL byte can
/// match (C compares the event name with that many raw bytes, NULs dropped).
fn is_event_by_prefix(name: &[u8]) -> bool {
    if name.len() < 5 || !name[..2].eq_ignore_ascii_case(b"on") {
        return false;
    }
    let rest = &name[2..];
    let usable = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    // Prefixes of at least three bytes are asked of the crate's table (no event
    // name is shorter; the names checked are at least three bytes long anyway), and
    // of at most `LONGEST_EVENT` bytes: longer ones name no event, and probing every
    // prefix of a long name would take time quadratic in its length.
    let usable = usable.min(LONGEST_EVENT);
    let mut probe = Vec::with_capacity(usable + 8);
    (3..=usable).any(|k| crate_knows_event(&rest[..k], &mut probe))
}

/// The length of the longest event name in the crate's table
/// (`webkitcurrentplaybacktargetiswirelesschanged`, in libinjectionrs 0.1.1's
/// `xss/blacklists.rs`; the table is private, a test checks this name is known).
const LONGEST_EVENT: usize = 44;

/// Whether `on{event}` is an exact event handler name in the crate's table: the
/// crate's detector flags `<a on{event}=1>` in the data state exactly then (the tag
/// `a` is harmless, `1` is not a URL, and no other listed attribute starts with
/// `on`). `event` holds no NUL and no byte that ends an attribute name.
fn crate_knows_event(event: &[u8], probe: &mut Vec<u8>) -> bool {
    probe.clear();
    probe.extend_from_slice(b"<a on");
    probe.extend_from_slice(event);
    probe.extend_from_slice(b"=1>");
    XssDetector::is_xss(probe, Html5Flags::DataState)
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
    fn event_prefix_rule() {
        // Names that start with a known event: C libinjection (and libinjection-
        // python) report these, the crate alone does not.
        for v in [
            &b"<a onmouseover8=alert(1)>"[..],
            b"<a onerror+=alert(1)>",
            b"<a onabortx=1>",
            b"<p ONCLICKME=1>",
            b"x onmouseoverfoo=alert(1)",
        ] {
            assert!(!libinjectionrs::detect_xss(v).is_injection() || v.starts_with(b"<p"));
            assert!(detect_xss(v), "{}", String::from_utf8_lossy(v));
        }
        // Not an event by prefix: C says no too.
        assert!(!detect_xss(b"<a onfoo=x>"));
        assert!(!detect_xss(b"<a onxx=1>"));
        assert!(!detect_xss(b"<a on=1>"));
        // A name alone, without a value, is not enough.
        assert!(!detect_xss(b"<a onmouseover8>"));
        // A NUL before the event name ends is not dropped for the prefix rule.
        assert!(!detect_xss(b"<a onmouse\0over8=1>"));
        // attributeName with an event-by-prefix value.
        assert!(detect_xss(b"<set attributeName=onmouseover8 to=alert(1)>"));
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
            if seed % 3 == 0 {
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
    fn longest_event_name() {
        let mut probe = Vec::new();
        let longest = b"webkitcurrentplaybacktargetiswirelesschanged";
        assert_eq!(longest.len(), LONGEST_EVENT);
        assert!(crate_knows_event(longest, &mut probe));
        // The prefix rule finds it at the end of the probed range.
        let mut name = b"on".to_vec();
        name.extend_from_slice(longest);
        name.extend_from_slice(&[b'x'; 1000]);
        assert!(is_event_by_prefix(&name));
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
        assert!(is_event_by_prefix(b"onerrorX"));
        assert!(!is_event_by_prefix(b"onerr"));
        assert!(!is_event_by_prefix(b"xonerror"));
    }
}
