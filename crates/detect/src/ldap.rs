//! LDAP filter injection.
//!
//! # Grammar
//!
//! An application builds a filter such as `(&(uid=INPUT)(userPassword=...))`. An
//! injection closes the application's item and opens items of its own:
//!
//! ```text
//! item      := "(" attr op value ")"
//! attr      := letter (letter | digit | "-" | "." | ";" | "_")*
//! op        := "=" | "~=" | ">=" | "<=" | [":dn"] [":" rule] ":="   (extensible match)
//! injection := ")" ws* "(" attr op           close, then open an item
//!            | ")" ws* "(" ws* ("|" | "&" | "!") ws* "("   close, then compose
//!            | "(" ws* ("|" | "&" | "!") ws* ["("] attr op  compose a new filter
//!            | "(" attr op "*)"              an item that matches any value
//!            | "(" ws* ("&" | "|" | "!") ws* ")"   the absolute filters
//! ```
//!
//! A value made only of filter metacharacters (`*()|&'`, four to 24 bytes with both
//! parentheses and a `*`, `|` or `&`) is the probe for unescaped filters, and is
//! reported too.
//!
//! `(see below)(and above)` is prose: an item needs its operator right after the
//! attribute. Linear: each parenthesis is looked at once, with a bounded look-ahead.

use crate::text::skip_space;
use crate::{Class, Finding};

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    memchr::memchr2(b'(', b')', input).is_some()
}

/// Scans `input` for an LDAP filter injection.
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    if metacharacter_probe(input) {
        return Some(Finding::new(
            Class::Ldap,
            "filter metacharacters only",
            0..input.len(),
        ));
    }
    let s = input;
    let mut from = 0;
    while let Some(rel) = memchr::memchr2(b'(', b')', &s[from..]) {
        let at = from + rel;
        from = at + 1;
        let found = |rule| Some(Finding::new(Class::Ldap, rule, at..(at + 32).min(s.len())));
        if s[at] == b')' {
            let k = skip_space(s, at + 1);
            if s.get(k) == Some(&b'(') {
                if item_start(s, k + 1) {
                    return found("closes the filter item and opens another");
                }
                let k2 = skip_space(s, k + 1);
                if matches!(s.get(k2), Some(b'|' | b'&' | b'!'))
                    && s.get(skip_space(s, k2 + 1)) == Some(&b'(')
                {
                    return found("closes the filter item and composes a new filter");
                }
            }
            continue;
        }
        // `(`
        let k = skip_space(s, at + 1);
        match s.get(k) {
            Some(b'|' | b'&' | b'!') => {
                let k2 = skip_space(s, k + 1);
                match s.get(k2) {
                    Some(b'(') if item_start(s, k2 + 1) => return found("composed filter"),
                    Some(b')') => return found("absolute filter"),
                    // `(|uid=*)`: loosely written, as parsers accept it.
                    _ if item_start(s, k2) => return found("composed filter"),
                    _ => {}
                }
            }
            _ => {
                if let Some(end) = attr_op(s, at + 1)
                    && s.get(end) == Some(&b'*')
                    && s.get(end + 1) == Some(&b')')
                {
                    return found("item that matches any value");
                }
            }
        }
    }
    None
}

/// A value made only of filter metacharacters (`*()|&'`, `*)(|`): the probe that
/// tells whether they reach a filter unescaped. Four to 24 bytes of `*`, `(`, `)`,
/// `|`, `&`, `!`, `=`, `\`, quotes and spaces, with both parentheses and a `*`,
/// `|` or `&`.
fn metacharacter_probe(input: &[u8]) -> bool {
    let t = input.trim_ascii();
    (4..=24).contains(&t.len())
        && t.iter().all(|c| {
            matches!(
                c,
                b'*' | b'(' | b')' | b'|' | b'&' | b'!' | b'=' | b'\\' | b'\'' | b'"' | b' '
            )
        })
        && t.contains(&b'(')
        && t.contains(&b')')
        && t.iter().any(|c| matches!(c, b'*' | b'|' | b'&'))
}

/// Whether an item (`attr op`) starts at `at`.
fn item_start(s: &[u8], at: usize) -> bool {
    attr_op(s, at).is_some()
}

/// `attr op` at `at`: where the value starts.
fn attr_op(s: &[u8], at: usize) -> Option<usize> {
    let first = *s.get(at)?;
    if !first.is_ascii_alphabetic() {
        return None;
    }
    let mut k = at + 1;
    while k < s.len()
        && k - at < 64
        && (s[k].is_ascii_alphanumeric() || matches!(s[k], b'-' | b'.' | b';' | b'_'))
    {
        k += 1;
    }
    // An extensible match (RFC 4515): `attr[:dn][:rule]:=`, as in
    // `userAccountControl:1.2.840.113556.1.4.803:=2`.
    let mut parts = 0;
    while s.get(k) == Some(&b':') && s.get(k + 1) != Some(&b'=') && parts < 2 {
        let len = s[k + 1..]
            .iter()
            .take(64)
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'.')
            .count();
        if len == 0 {
            return None;
        }
        k += 1 + len;
        parts += 1;
    }
    if parts > 0 {
        return (s.get(k) == Some(&b':') && s.get(k + 1) == Some(&b'=')).then_some(k + 2);
    }
    match s.get(k) {
        Some(b'=') => Some(k + 1),
        Some(b'~' | b'>' | b'<') if s.get(k + 1) == Some(&b'=') => Some(k + 2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(s: &str) -> bool {
        scan(s.as_bytes()).is_some()
    }

    #[test]
    fn injections() {
        for s in [
            "*)(uid=*))(|(uid=*",
            "admin*)((|userPassword=*)",
            "admin)(&)",
            "*)(|(objectClass=*))",
            "x)(cn=*)",
            "(|(mail=*))",
            "*(|(mail=*))",
            "jdoe)(|(password=*))",
            "(uid=*)",
            "admin) (| (cn=a)",
            "*)(&(objectclass=user)(description=*",
            "*()|&'",
            "*)(|",
            "*)(userAccountControl:1.2.840.113556.1.4.803:=2",
            ")(cn:dn:2.5.13.5:=admin",
        ] {
            assert!(hit(s), "missed: {s}");
        }
    }

    #[test]
    fn benign() {
        for s in [
            "(see below)(and above)",
            "f(x) = (x+1)(x-1)",
            "a smiley :) (really)",
            "(*)",
            "(!!!)",
            ":-) (*_*)",
            "john.doe@example.com",
            "O'Brien (CEO)",
            "(a) (b) (c)",
            "if (x == 1) { y(); }",
            "* bullet point",
            "meeting (time: 10:30) (room: 4)",
        ] {
            assert!(!hit(s), "false positive: {s}: {:?}", scan(s.as_bytes()));
        }
    }
}
