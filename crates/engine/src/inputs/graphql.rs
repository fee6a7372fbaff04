//! GraphQL argument values, read out of a query document.
//!
//! A bounded tokenizer of GraphQL's lexical grammar, not a full parser: it walks the
//! document once, skipping comments (`# ...`), and inside every argument list
//! (`field(name: value, ...)`) and directive argument list it takes each argument's
//! name and its value: a string (`"..."` with escapes, or a `"""block"""`), a
//! number, an enum value or a variable, and the strings inside list and object
//! values (named by the argument). Strings elsewhere (default values, aliases) are
//! values too, under the name `string`. That is what an application passes on to
//! its resolvers, and where injections ride.
//!
//! Linear: one pass; at most 256 values per document.

/// The most values taken from one document.
const MAX_VALUES: usize = 256;

/// Whether `t` looks like a GraphQL document: `query`, `mutation`, `subscription`
/// or `fragment` followed by a name or `{`, or `{` followed by a field with
/// arguments.
pub(super) fn looks_like_document(t: &[u8]) -> bool {
    let starts = |w: &[u8]| {
        t.len() > w.len()
            && t[..w.len()].eq_ignore_ascii_case(w)
            && matches!(t[w.len()], b' ' | b'{' | b'(' | b'\n' | b'\t' | b'\r')
    };
    let keyword =
        starts(b"query") || starts(b"mutation") || starts(b"subscription") || starts(b"fragment");
    if keyword {
        return t.contains(&b'{');
    }
    // `{ user(id: "1") { name } }`
    t.first() == Some(&b'{') && {
        let k = t[1..]
            .iter()
            .position(|c| !c.is_ascii_whitespace())
            .map(|p| p + 1);
        k.is_some_and(|k| {
            let end = k + t[k..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
            end > k
                && t[end..]
                    .iter()
                    .find(|c| !c.is_ascii_whitespace())
                    .is_some_and(|&c| c == b'(' || c == b'{')
        })
    }
}

/// The argument values of a document, with the argument names.
pub(super) fn arguments(t: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut i = 0;
    // Depth of argument lists, and the name of the argument being read.
    let mut in_args = 0usize;
    let mut last_name: Vec<u8> = Vec::new();
    while i < t.len() && out.len() < MAX_VALUES {
        let c = t[i];
        match c {
            b'#' => {
                while i < t.len() && t[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' => {
                in_args += 1;
                i += 1;
            }
            b')' => {
                in_args = in_args.saturating_sub(1);
                i += 1;
            }
            b'"' => {
                let (value, end) = string(t, i);
                let name = if in_args > 0 {
                    last_name.clone()
                } else {
                    b"string".to_vec()
                };
                out.push((name, value));
                i = end;
            }
            b':' => {
                i += 1;
                if in_args > 0 {
                    // A bare value: number, enum or variable.
                    let k = i + t[i..]
                        .iter()
                        .take_while(|c| c.is_ascii_whitespace())
                        .count();
                    let end = k + t[k..]
                        .iter()
                        .take(256)
                        .take_while(|c| {
                            c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'$')
                        })
                        .count();
                    if end > k && t[k] != b'$' {
                        out.push((last_name.clone(), t[k..end].to_vec()));
                        i = end;
                    }
                }
            }
            _ if c.is_ascii_alphabetic() || c == b'_' => {
                let end = i + t[i..]
                    .iter()
                    .take(256)
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                    .count();
                let word = t[i..end].to_vec();
                // A name followed by `:` inside arguments names the next value.
                let next = t[end..].iter().find(|c| !c.is_ascii_whitespace()).copied();
                if in_args > 0 && next == Some(b':') {
                    last_name = word;
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    out
}

/// A string literal starting at `at` (a `"`): its value with escapes resolved, and
/// where it ends.
fn string(t: &[u8], at: usize) -> (Vec<u8>, usize) {
    if t[at..].starts_with(b"\"\"\"") {
        let start = at + 3;
        let end = memchr::memmem::find(&t[start..], b"\"\"\"").map_or(t.len(), |e| start + e);
        return (t[start..end].to_vec(), (end + 3).min(t.len()));
    }
    let mut out = Vec::new();
    let mut i = at + 1;
    while i < t.len() {
        match t[i] {
            b'"' => return (out, i + 1),
            b'\\' if i + 1 < t.len() => {
                let n = t[i + 1];
                match n {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'u' => {
                        if let Some(c) = t
                            .get(i + 2..i + 6)
                            .and_then(|h| {
                                u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
                            })
                            .and_then(char::from_u32)
                        {
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                            i += 6;
                            continue;
                        }
                        out.push(n);
                    }
                    _ => out.push(n),
                }
                i += 2;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    (out, t.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<(String, String)> {
        arguments(s.as_bytes())
            .into_iter()
            .map(|(k, v)| {
                (
                    String::from_utf8_lossy(&k).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn arguments_and_strings() {
        let doc = r#"query Q($v: ID) { user(id: "1' OR '1'='1", limit: 10) { posts(filter: {title: "<script>"}) { id } } }"#;
        let got = args(doc);
        assert!(
            got.contains(&("id".into(), "1' OR '1'='1".into())),
            "{got:?}"
        );
        assert!(got.contains(&("limit".into(), "10".into())), "{got:?}");
        assert!(
            got.contains(&("title".into(), "<script>".into())),
            "{got:?}"
        );
        let got = args("mutation { login(user: \"a\\u0027b\", pass: \"\"\"x\ny\"\"\") { token } }");
        assert!(got.contains(&("user".into(), "a'b".into())), "{got:?}");
        assert!(got.contains(&("pass".into(), "x\ny".into())), "{got:?}");
        assert!(looks_like_document(b"{ user(id: 1) { name } }"));
        assert!(looks_like_document(b"query { me { name } }"));
        assert!(!looks_like_document(b"{\"a\": 1}"));
        assert!(!looks_like_document(b"query string"));
    }
}
