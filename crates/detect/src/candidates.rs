//! Which detectors a value needs: every detector's necessary condition, worked out in
//! one pass over the bytes and one pass of a single automaton, instead of twelve
//! conditions one after another.
//!
//! The answer is a superset of the classes whose `may_match` holds (and so of those
//! whose `scan` finds something): a test checks that on generated values. What is
//! looked for:
//!
//! - bytes, through a table: shell metacharacters (command injection), `%`, `\`,
//!   `:` and bytes past ASCII (path traversal), `$` and quotes (NoSQL), parentheses
//!   (LDAP), line breaks (CRLF), `:`, a line break, `!`, `[` or 0xAC (serialized objects),
//!   `<`, `:`, `(` and `[` (XSS), any punctuation (SQL);
//! - words, through one Aho-Corasick automaton: template delimiters and directives,
//!   `${`, `..`, `//` and sensitive file names, `<!` and XInclude, the URL
//!   beginnings and internal names that start SSRF's shapes (`//`, `http:`,
//!   `file:`, `jar:`, `localhost`, ...), U+560D and U+560A, `db.`, `this.` and
//!   `return`, serialization markers, gadget class names and YAML tags, the
//!   cmdlets, .NET calls and options of command injection, the words of script
//!   URLs and styles, SQL's words (whole words only);
//! - a first byte 0x80 (a pickle's protocol marker);
//! - and three checks run only when nothing else has set their class: a command
//!   word at the start of the value (command injection), a digit or `[` at the
//!   start (SSRF's bare address), and an `on…=` attribute (XSS, only with a `=` in
//!   the value).

use crate::{Class, ClassSet};
use aho_corasick::AhoCorasick;
use std::sync::LazyLock;

/// The class bits each byte sets.
static BYTES: LazyLock<[u16; 256]> = LazyLock::new(|| {
    let mut t = [0u16; 256];
    let bit = |c: Class| 1u16 << c as u16;
    for b in 0..=255u8 {
        let mut v = 0;
        if matches!(
            b,
            b';' | b'|'
                | b'&'
                | b'\n'
                | b'\r'
                | b'`'
                | b'$'
                | b'<'
                | b'>'
                | b'('
                | b')'
                | b'{'
                | b'}'
                | b'\''
                | b'"'
                | b'\\'
                | b'?'
                | b'*'
        ) {
            v |= bit(Class::Cmd);
        }
        if matches!(b, b'%' | b'\\' | b':') || b >= 0x80 {
            v |= bit(Class::Traversal);
        }
        if matches!(b, b'$' | b'\'' | b'"') {
            v |= bit(Class::NoSql);
        }
        if matches!(b, b'(' | b')') {
            v |= bit(Class::Ldap);
        }
        if matches!(b, b'\r' | b'\n') {
            v |= bit(Class::Crlf);
        }
        if matches!(b, b':' | b'\n' | 0xac | b'!' | b'[') {
            v |= bit(Class::Serialized);
        }
        if matches!(b, b'<' | b':' | b'(' | b'[' | b'`') {
            v |= bit(Class::Xss);
        }
        if !(b.is_ascii_alphanumeric() || b == b' ' || b == b'.' || b == b',' || b >= 0x80) {
            v |= bit(Class::Sql);
        }
        t[b as usize] = v;
    }
    t
});

/// Every word of every class, and the class each one sets.
struct WordTable {
    ac: AhoCorasick,
    classes: Vec<Class>,
    /// Words that count only whole (SQL's).
    whole: Vec<bool>,
}

static WORDS: LazyLock<WordTable> = LazyLock::new(|| {
    let mut words: Vec<&str> = Vec::new();
    let mut classes = Vec::new();
    let mut whole = Vec::new();
    let mut add = |list: &[&'static str], class: Class, is_whole: bool| {
        for w in list {
            words.push(w);
            classes.push(class);
            whole.push(is_whole);
        }
    };
    let opens: Vec<&'static str> = crate::ssti::OPENS.iter().map(|(o, _)| *o).collect();
    add(&opens, Class::Template, false);
    add(crate::ssti::DIRECTIVES, Class::Template, false);
    add(&["${"], Class::Jndi, false);
    add(&["..", "//"], Class::Traversal, false);
    add(crate::traversal::SENSITIVE, Class::Traversal, false);
    add(&["<!", "xinclude", ":include"], Class::Xxe, false);
    add(crate::ssrf::TRIGGERS, Class::Ssrf, false);
    add(&["\u{560d}", "\u{560a}"], Class::Crlf, false);
    add(&["db.", "this.", "return"], Class::NoSql, false);
    add(crate::serialized::MARKERS, Class::Serialized, false);
    let cmd_words: Vec<&'static str> = crate::cmdi::trigger_words().collect();
    add(&cmd_words, Class::Cmd, false);
    add(crate::serialized::GADGETS, Class::Serialized, false);
    add(crate::serialized::YAML_TAGS, Class::Serialized, false);
    add(crate::xss::XSS_WORDS, Class::Xss, false);
    add(&["document.", "xmlhttprequest"], Class::Xss, false);
    add(crate::sql::SQL_WORDS, Class::Sql, true);
    let ac = AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(&words)
        .expect("the detectors' word lists are small and valid");
    WordTable { ac, classes, whole }
});

/// The classes whose detectors might find something in `input`.
pub fn candidates(input: &[u8]) -> ClassSet {
    let table = &*BYTES;
    let mut bits = 0u16;
    let mut eq = false;
    for &b in input {
        bits |= table[b as usize];
        eq |= b == b'=';
    }
    let words = &*WORDS;
    for m in words.ac.find_overlapping_iter(input) {
        let w = m.pattern().as_usize();
        if words.whole[w] {
            let (s, e) = (m.start(), m.end());
            if (s > 0 && input[s - 1].is_ascii_alphanumeric())
                || input.get(e).is_some_and(u8::is_ascii_alphanumeric)
            {
                continue;
            }
        }
        bits |= 1 << words.classes[w] as u16;
    }
    let mut set = ClassSet(bits);
    // A pickle starts with its protocol byte.
    if input.first() == Some(&0x80) {
        set.insert(Class::Serialized);
    }
    // Shell punctuation and the cmd words were found above; what is left of
    // cmdi::may_match is a command word at the start.
    if !set.contains(Class::Cmd) && crate::cmdi::may_start_with_command(input) {
        set.insert(Class::Cmd);
    }
    if !set.contains(Class::Ssrf) && crate::ssrf::may_start_with_host(input) {
        set.insert(Class::Ssrf);
    }
    if !set.contains(Class::Xss) && eq && crate::xss::may_be_xss(input) {
        set.insert(Class::Xss);
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::XorShift;

    /// On generated values, every class whose `may_match` holds is a candidate.
    #[test]
    fn candidates_cover_every_necessary_condition() {
        let pieces: &[&[u8]] = &[
            b"a",
            b"7",
            b" ",
            b"'",
            b"\"",
            b";",
            b"|",
            b"&",
            b"\n",
            b"\r",
            b"`",
            b"$",
            b"{",
            b"}",
            b"(",
            b")",
            b"<",
            b">",
            b"%",
            b"\\",
            b":",
            b"/",
            b".",
            b"=",
            b"..",
            b"${",
            b"{{",
            b"<%",
            b"<!",
            b"//",
            b"db.",
            b"this.",
            b"on",
            b"onload",
            b"script:",
            b"data:",
            b"etc/passwd",
            b"cat",
            b"id",
            b"ls -la",
            b"union",
            b"select",
            b"or",
            b"rO0AB",
            b"@type",
            b"O:8:",
            b"!!python/",
            b"\x80\x04",
            b"\xac\xed",
            b"xinclude",
            b"jar:",
            b"expression(",
            b"sysobjects",
        ];
        let mut rng = XorShift(0xca7d_1da7);
        for _ in 0..20_000 {
            let v = rng.value_of(pieces, 12, 16);
            let got = candidates(&v);
            for class in Class::ALL {
                if class.may_match_for_tests(&v) {
                    assert!(
                        got.contains(class),
                        "{class:?} missing for {:?}",
                        String::from_utf8_lossy(&v)
                    );
                }
            }
        }
    }
}
