//! Serialized objects of Java, PHP, .NET and Python, and YAML tags that build
//! objects: how deserialization attacks arrive.
//!
//! # Grammar
//!
//! ```text
//! java   := 0xAC 0xED 0x00 0x05 | "aced0005" (hex) | "rO0AB" (base64)
//!         | gadget class name (InvokerTransformer, TemplatesImpl, JdbcRowSetImpl, ...)
//!         | '"@type"' ':' '"' class     (fastjson autoType)
//! php    := ("O" | "C") ":" ["+"] digits ":" '"' class '"' ":" digits ":" "{"
//! dotnet := "AAEAAAD/////" (BinaryFormatter, base64)
//!         | ('"$type"' | '"__type"') ':' '"' ... "System."   (Json.NET, DataContract)
//!         | ObjectDataProvider | TypeConfuseDelegate | System.Diagnostics.Process
//! python := 0x80 (2..=5) ... module (os, posix, nt, subprocess, builtins, ...)
//!                                      within the first 256 bytes      (pickle)
//!         | "c" module "\n"   at the start or after "\n" "(" "." "0"   (pickle, text)
//!         | ("gASV" | "gAN" | "gAJ") at the start, whose first 192 decoded
//!           bytes name a module                                        (pickle, base64)
//! yaml   := "!!python/" | "!!javax." | "!!java." | "!!com.sun" | "!ruby/object"
//!         | "!!" java-class                            (SnakeYAML global tag)
//! typed  := "[" '"' java-class '"' "," ("{" | "[" | '"' url)  (Jackson default typing)
//! java-class := package-part ("." package-part)+ "." Class  (lower-case packages)
//!         | "!ruby/hash" | "!!ruby/"
//! ```
//!
//! A PHP serialized *array* of strings (`a:1:{s:1:"x";}`) is data and passes; an
//! object is what runs magic methods. Linear: a bounded number of searches.

use crate::text::{Words, find_ci, starts_with_ci};
use crate::{Class, Finding};
use std::sync::LazyLock;

/// Markers of serialized streams and type names, found without regard to case.
pub(crate) const MARKERS: &[&str] = &[
    "aced0005",
    "ro0ab",
    "aaeaaad/////",
    "@type",
    "$type",
    "__type",
    "gasv",
    "gan",
    "gaj",
];

pub(crate) const GADGETS: &[&str] = &[
    "invokertransformer",
    "chainedtransformer",
    "constanttransformer",
    "instantiatetransformer",
    "templatesimpl",
    "jdbcrowsetimpl",
    "badattributevalueexpexception",
    "annotationinvocationhandler",
    "ysoserial",
    "objectdataprovider",
    "typeconfusedelegate",
    "system.diagnostics.process",
    "system.windows.data",
    "windowsidentity",
    "java.lang.runtime",
    "java.lang.processbuilder",
    "javax.script.scriptenginemanager",
    "com.sun.org.apache",
    "org.apache.commons.collections",
    "org.springframework.beans.factory",
    "bsh.interpreter",
    "groovy.util.expando",
    "textformattingrunproperties",
    "windowsclaimsidentity",
    "sessionsecuritytoken",
    "activitysurrogateselector",
];

pub(crate) const YAML_TAGS: &[&str] = &[
    "!!python/",
    "!!javax.",
    "!!java.",
    "!!com.sun",
    "!ruby/object",
    "!ruby/hash",
    "!!ruby/",
];

const PICKLE_MODULES: &[&str] = &[
    "os",
    "posix",
    "nt",
    "subprocess",
    "builtins",
    "__builtin__",
    "commands",
    "pty",
    "socket",
];

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    static WORDS: LazyLock<Words> = LazyLock::new(|| {
        let mut w: Vec<&str> = MARKERS.to_vec();
        w.extend_from_slice(GADGETS);
        w.extend_from_slice(YAML_TAGS);
        Words::new(&w)
    });
    input.first() == Some(&0x80)
        || input.contains(&0xac)
        || memchr::memchr3(b':', b'\n', b'!', input).is_some()
        || input.contains(&b'[')
        || WORDS.any(input)
}

/// Scans `input` for a serialized object.
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    let s = input;
    let found = |rule, at: usize| Some(Finding::new(Class::Serialized, rule, at..s.len()));
    if let Some(at) = memchr::memmem::find(s, b"\xac\xed\x00\x05") {
        return found("Java serialization stream", at);
    }
    if let Some(at) = find_ci(s, 0, b"aced0005") {
        return found("Java serialization stream (hex)", at);
    }
    if let Some(at) = memchr::memmem::find(s, b"rO0AB")
        && (at == 0 || !s[at - 1].is_ascii_alphanumeric())
    {
        return found("Java serialization stream (base64)", at);
    }
    if let Some(at) = memchr::memmem::find(s, b"AAEAAAD/////") {
        return found(".NET BinaryFormatter stream (base64)", at);
    }
    static GADGET_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(GADGETS));
    if let Some((_, at, _)) = GADGET_WORDS.find_all(s).next() {
        return found("deserialization gadget class", at);
    }
    for key in [&b"\"@type\""[..], b"\"$type\"", b"\"__type\""] {
        if let Some(at) = find_ci(s, 0, key) {
            let rest = &s[at + key.len()..(at + key.len() + 128).min(s.len())];
            let value_start = rest.iter().position(|&c| c == b'"');
            if let Some(v) = value_start {
                let value = &rest[v + 1..];
                // A class name: dotted words (Java) or `System.` (.NET).
                let dotted = value
                    .iter()
                    .take_while(|&&c| c != b'"')
                    .filter(|&&c| c == b'.')
                    .count()
                    >= 2;
                if dotted || starts_with_ci(value, 0, b"system.") {
                    return found("type name that drives deserialization", at);
                }
            }
        }
    }
    if let Some(at) = php_object(s) {
        return found("PHP serialized object", at);
    }
    static YAML_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(YAML_TAGS));
    if let Some((_, at, _)) = YAML_WORDS.find_all(s).next() {
        return found("YAML tag that builds an object", at);
    }
    if let Some(at) = yaml_class_tag(s) {
        return found("YAML tag that builds an object", at);
    }
    if let Some(at) = typed_array(s) {
        return found("type name that drives deserialization", at);
    }
    if let Some(at) = pickle(s) {
        return found("Python pickle that imports a module", at);
    }
    None
}

/// Whether `s` starts with a Java class name: three or more dotted parts, the
/// package's lower case, the class's first letter upper case
/// (`org.springframework.context.support.FileSystemXmlApplicationContext`). Returns
/// its length.
fn java_class(s: &[u8]) -> Option<usize> {
    let len = s
        .iter()
        .take(256)
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'$'))
        .count();
    let name = &s[..len];
    let parts: Vec<&[u8]> = name.split(|&c| c == b'.').collect();
    let (class, package) = parts.split_last()?;
    (package.len() >= 2
        && package
            .iter()
            .all(|p| p.first().is_some_and(u8::is_ascii_lowercase))
        && class.first().is_some_and(u8::is_ascii_uppercase))
    .then_some(len)
}

/// `!!` then a Java class name: SnakeYAML's global tag, which constructs that class
/// (`!!org.springframework...Context ["http://..."]`).
fn yaml_class_tag(s: &[u8]) -> Option<usize> {
    memchr::memmem::find_iter(s, b"!!").find(|&at| java_class(&s[at + 2..]).is_some())
}

/// A JSON array whose first element is a Java class name, then the object's value:
/// Jackson's default typing (`["ch.qos.logback.core.db.DriverManagerConnectionSource",
/// {"url": ...}]`), which instantiates the class named.
fn typed_array(s: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(rel) = memchr::memchr(b'[', &s[from..]) {
        let at = from + rel;
        from = at + 1;
        let k = crate::text::skip_space(s, at + 1);
        if s.get(k) != Some(&b'"') {
            continue;
        }
        let Some(len) = java_class(&s[k + 1..]) else {
            continue;
        };
        let m = crate::text::skip_space(s, k + 1 + len + 1);
        if s.get(k + 1 + len) == Some(&b'"') && s.get(m) == Some(&b',') {
            let v = crate::text::skip_space(s, m + 1);
            // The object's properties, or a constructor argument that points
            // elsewhere (a URL); a list of class names is data.
            let url_arg = s.get(v) == Some(&b'"')
                && memchr::memmem::find(&s[v..(v + 64).min(s.len())], b"://").is_some();
            if matches!(s.get(v), Some(b'{' | b'[')) || url_arg {
                return Some(at);
            }
        }
    }
    None
}

/// `O:<len>:"<class>":<count>:{` (or `C:`), anywhere.
fn php_object(s: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(rel) = memchr::memchr(b':', &s[from..]) {
        let colon = from + rel;
        from = colon + 1;
        if colon == 0 || !matches!(s[colon - 1], b'O' | b'C') {
            continue;
        }
        if colon >= 2 && s[colon - 2].is_ascii_alphanumeric() {
            continue;
        }
        // PHP's reader takes a sign before the length (`O:+8:`), which filters that
        // look for `O:` and a digit miss.
        let mut k = colon + 1 + usize::from(s.get(colon + 1) == Some(&b'+'));
        let digits = s[k..]
            .iter()
            .take(6)
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits == 0 {
            continue;
        }
        k += digits;
        if s.get(k) != Some(&b':') || s.get(k + 1) != Some(&b'"') {
            continue;
        }
        let name_start = k + 2;
        let name_len = s[name_start..]
            .iter()
            .take(256)
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'\\'))
            .count();
        let m = name_start + name_len;
        if name_len == 0 || s.get(m) != Some(&b'"') || s.get(m + 1) != Some(&b':') {
            continue;
        }
        let count = s[m + 2..]
            .iter()
            .take(6)
            .take_while(|c| c.is_ascii_digit())
            .count();
        if count > 0
            && matches!(s.get(m + 2 + count), Some(b':'))
            && s.get(m + 3 + count) == Some(&b'{')
        {
            return Some(colon - 1);
        }
    }
    None
}

/// The first bytes (up to 192) that the base64 (or base64url) text at the start of
/// `s` decodes to; `None` when it is not base64 there.
fn base64_head(s: &[u8]) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    };
    let text: Vec<u8> = s
        .iter()
        .take(256)
        .copied()
        .take_while(|&c| c != b'=')
        .collect();
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text {
        acc = (acc << 6) | u32::from(value(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// A pickle that imports one of the modules that run commands.
fn pickle(s: &[u8]) -> Option<usize> {
    if s.len() > 2 && s[0] == 0x80 && (2..=5).contains(&s[1]) {
        let head = &s[..s.len().min(256)];
        if PICKLE_MODULES
            .iter()
            .any(|m| memchr::memmem::find(head, m.as_bytes()).is_some())
        {
            return Some(0);
        }
    }
    // A base64 pickle: its protocol header in base64, and, decoded, one of those
    // modules in its first bytes (a random token such as an OAuth code can start
    // with `gAN` too).
    if (s.starts_with(b"gASV") || s.starts_with(b"gAN") || s.starts_with(b"gAJ"))
        && let Some(head) = base64_head(s)
        && head.len() > 2
        && PICKLE_MODULES
            .iter()
            .any(|m| memchr::memmem::find(&head, m.as_bytes()).is_some())
    {
        return Some(0);
    }
    // Text protocol: `c` module newline name newline.
    let mut from = 0;
    while let Some(rel) = memchr::memchr(b'c', &s[from..]) {
        let at = from + rel;
        from = at + 1;
        if at > 0 && !matches!(s[at - 1], b'\n' | b'(' | b'.' | b'0') {
            continue;
        }
        for m in PICKLE_MODULES {
            if s[at + 1..].starts_with(m.as_bytes()) && s.get(at + 1 + m.len()) == Some(&b'\n') {
                return Some(at);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(s: &[u8]) -> bool {
        scan(s).is_some()
    }

    #[test]
    fn attacks() {
        for s in [
            &b"\xac\xed\x00\x05sr\x00\x11java.util.HashMap"[..],
            b"aced00057372",
            b"rO0ABXNyABdqYXZhLnV0aWwuUHJpb3JpdHlRdWV1ZQ==",
            b"AAEAAAD/////AQAAAAAAAAAMAgAAAF9TeXN0ZW0u",
            br#"O:8:"stdClass":1:{s:4:"name";s:5:"alice";}"#,
            br#"a:1:{i:0;O:7:"Example":1:{s:3:"cmd";s:2:"id";}}"#,
            br#"{"@type":"com.sun.rowset.JdbcRowSetImpl","dataSourceName":"ldap://x/a"}"#,
            br#"{"$type":"System.Windows.Data.ObjectDataProvider, PresentationFramework"}"#,
            b"cos\nsystem\n(S'id'\ntR.",
            b"\x80\x04\x95\x1e\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system\x94",
            b"!!python/object/apply:os.system ['id']",
            b"!!javax.script.ScriptEngineManager [!!java.net.URLClassLoader [[!!java.net.URL [\"http://x/\"]]]]",
            b"gASVJgAAAAAAAACMBXBvc2l4lIwGc3lzdGVtlJOUjAJpZJSFlFKULg==",
            br#"O:+8:"stdClass":1:{s:1:"a";i:1;}"#,
            b"!!org.example.beans.RemoteLoader [\"http://x/a.xml\"]",
            br#"["org.example.pool.ConnectionSource", {"url": "jdbc:h2:mem:"}]"#,
            br#"{"handler": [ "com.example.util.Loader" , "http://x/"]}"#,
            b"\xff\x01\x32\xd8\x05\x00\x01Microsoft.VisualStudio.Text.Formatting.TextFormattingRunProperties",
        ] {
            assert!(hit(s), "missed: {}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn benign() {
        for s in [
            &b"a:1:{s:1:\"x\";s:1:\"y\";}"[..],
            b"Object: the thing",
            br#"{"type":"user","name":"alice"}"#,
            b"I love Java and Python",
            b"rO0 is not base64 of anything",
            b"gANT9DPezxt7B8oArUjHU6S4sg653nykM6jL6eml",
            b"CO:2 levels are rising",
            br#"["com.example.app", "org.acme.tools"]"#,
            br#"["java.util.List", "java.util.Map"]"#,
            b"tags: !!str 2024",
            b"Wow!! org.example.Foo is great",
            br#"{"types": ["java.util.List", "java.util.Map"]}"#,
        ] {
            assert!(!hit(s), "false positive: {}", String::from_utf8_lossy(s));
        }
    }
}
