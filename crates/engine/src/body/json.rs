//! JSON request bodies, flattened to ARGS the way ModSecurity v3 names them.
//!
//! Naming (libmodsecurity's JSON processor over yajl):
//! - the outermost container is named `json`; object members append `.key`
//!   (`{"a":{"b":1}}` gives `json.a.b`), array elements append `.array_N`
//!   (`{"a":[1,2]}` gives `json.a.array_0` and `json.a.array_1`, and a nested array
//!   `[[1]]` gives `json.array_0.array_0`);
//! - an empty object key is named `empty-key`;
//! - a top-level scalar is named `json`; empty objects and arrays produce nothing;
//! - values: strings with their escapes decoded (`\uXXXX` to UTF-8), numbers as their
//!   source text, `true`/`false`, and `null` as the empty string.
//!
//! The document must be one JSON value with only whitespace around it, and strings
//! must be valid UTF-8 (yajl's defaults). Going deeper than `json_depth` containers,
//! or producing more than `max_args` arguments, stops the parse with an error, as
//! ModSecurity does: the arguments found so far are kept (see [`parse_partial`]).
//!
//! The parser is a single forward pass with an explicit stack (no recursion), so its
//! time is linear in the input and its memory is bounded by the input and the limits.

use super::{Arg, LimitHit, Limits};

/// Why a JSON body was refused (sets REQBODY_ERROR).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("JSON parsing error: {0}")]
pub struct JsonError(pub String);

/// Everything a JSON parse yields, including what was found before an error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonParse {
    /// The arguments, in document order (kept even when `error` is set, as
    /// ModSecurity keeps the arguments it added before the parse stopped).
    pub args: Vec<Arg>,
    /// Why the parse stopped early, if it did.
    pub error: Option<JsonError>,
    /// Which limit stopped the parse, if one did.
    pub limit_hit: Option<LimitHit>,
}

/// Parses a JSON document into ARGS pairs.
pub fn parse(input: &[u8], limits: &Limits) -> Result<Vec<Arg>, JsonError> {
    let out = parse_partial(input, limits);
    match out.error {
        Some(e) => Err(e),
        None => Ok(out.args),
    }
}

/// Parses a JSON document, keeping the arguments found before any error.
///
/// An empty body yields nothing and no error (ModSecurity does not report an
/// error for an empty JSON body); a body of only whitespace is an error.
pub fn parse_partial(input: &[u8], limits: &Limits) -> JsonParse {
    let mut p = Parser::new(input, limits);
    let error = if input.is_empty() {
        None
    } else {
        p.run().err()
    };
    JsonParse {
        args: p.args,
        error,
        limit_hit: p.limit_hit,
    }
}

/// What yajl says when a callback cancels the parse.
const CANCELLED: &str = "parse error: client cancelled parse via callback return value";

/// Bytes of argument names and values a parse may produce beyond 16 per input byte.
/// Names repeat their whole path, so a long key above a large array could otherwise
/// turn a small body into a very large argument list.
const OUTPUT_BUDGET_BASE: usize = 4 << 20;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Object,
    Array,
}

/// One open container. Its path segment occupies `prefix[base..]`: the container
/// name up to `name_end`, then `.` (object) or `.array_N` (array).
struct Frame {
    kind: Kind,
    base: usize,
    name_end: usize,
    count: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value is expected (document start, after `:` or after `,` in an array).
    Value,
    /// Just after `[`: a value or `]`.
    ArrayFirst,
    /// After an array element: `,` or `]`.
    ArrayNext,
    /// Just after `{`: a key or `}`.
    ObjectFirst,
    /// After `,` in an object: a key.
    ObjectKey,
    /// After a key: `:`.
    Colon,
    /// After a member value: `,` or `}`.
    ObjectNext,
    /// The top-level value is complete.
    Done,
}

/// The bytes that end a run of plain string text: the closing quote, an escape and
/// the control characters JSON forbids inside a string.
static STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = true;
        b += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    limits: &'a Limits,
    stack: Vec<Frame>,
    prefix: Vec<u8>,
    key: Vec<u8>,
    scratch: Vec<u8>,
    args: Vec<Arg>,
    produced: usize,
    budget: usize,
    limit_hit: Option<LimitHit>,
}

impl<'a> Parser<'a> {
    fn new(s: &'a [u8], limits: &'a Limits) -> Self {
        Parser {
            s,
            i: 0,
            limits,
            stack: Vec::new(),
            prefix: Vec::new(),
            key: Vec::new(),
            scratch: Vec::new(),
            args: Vec::new(),
            produced: 0,
            budget: OUTPUT_BUDGET_BASE.saturating_add(s.len().saturating_mul(16)),
            limit_hit: None,
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, JsonError> {
        Err(JsonError(format!("{what} (at byte {})", self.i)))
    }

    fn run(&mut self) -> Result<(), JsonError> {
        let mut state = State::Value;
        loop {
            self.skip_ws();
            let Some(&c) = self.s.get(self.i) else {
                return if state == State::Done {
                    Ok(())
                } else {
                    self.err("parse error: premature EOF")
                };
            };
            state = match state {
                State::Done => return self.err("parse error: trailing garbage"),
                State::Value => self.value(c)?,
                State::ArrayFirst if c == b']' => {
                    self.i += 1;
                    self.close()
                }
                State::ArrayFirst => self.value(c)?,
                State::ArrayNext => match c {
                    b',' => {
                        self.i += 1;
                        State::Value
                    }
                    b']' => {
                        self.i += 1;
                        self.close()
                    }
                    _ => return self.err("parse error: after array element, I expect ',' or ']'"),
                },
                State::ObjectFirst if c == b'}' => {
                    self.i += 1;
                    self.close()
                }
                State::ObjectFirst | State::ObjectKey => {
                    if c != b'"' {
                        return self.err("parse error: invalid object key (must be a string)");
                    }
                    self.i += 1;
                    let mut key = std::mem::take(&mut self.key);
                    key.clear();
                    let r = self.string(&mut key);
                    self.key = key;
                    r?;
                    State::Colon
                }
                State::Colon => {
                    if c != b':' {
                        return self.err(
                            "parse error: object key and value must be separated by a colon (':')",
                        );
                    }
                    self.i += 1;
                    State::Value
                }
                State::ObjectNext => match c {
                    b',' => {
                        self.i += 1;
                        State::ObjectKey
                    }
                    b'}' => {
                        self.i += 1;
                        self.close()
                    }
                    _ => {
                        return self.err(
                            "parse error: after key and value, inside map, I expect ',' or '}'",
                        );
                    }
                },
            };
        }
    }

    fn skip_ws(&mut self) {
        // yajl also accepts vertical tab and form feed between tokens.
        while let Some(b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) = self.s.get(self.i) {
            self.i += 1;
        }
    }

    /// Parses the value starting with `c` and returns the state after it.
    fn value(&mut self, c: u8) -> Result<State, JsonError> {
        match c {
            b'{' => {
                self.i += 1;
                self.open(Kind::Object)?;
                Ok(State::ObjectFirst)
            }
            b'[' => {
                self.i += 1;
                self.open(Kind::Array)?;
                Ok(State::ArrayFirst)
            }
            b'"' => {
                self.i += 1;
                let mut v = std::mem::take(&mut self.scratch);
                v.clear();
                let r = self.string(&mut v);
                let out = r.and_then(|()| self.emit(&v));
                self.scratch = v;
                out?;
                Ok(self.after_value())
            }
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                self.number()?;
                let s = self.s;
                self.emit(&s[start..self.i])?;
                Ok(self.after_value())
            }
            b't' | b'f' | b'n' => {
                let (word, value): (&[u8], &[u8]) = match c {
                    b't' => (b"true", b"true"),
                    b'f' => (b"false", b"false"),
                    _ => (b"null", b""),
                };
                if !self.s[self.i..].starts_with(word)
                    || self
                        .s
                        .get(self.i + word.len())
                        .is_some_and(u8::is_ascii_alphanumeric)
                {
                    return self.err("lexical error: invalid string in json text");
                }
                self.i += word.len();
                self.emit(value)?;
                Ok(self.after_value())
            }
            _ => self.err("lexical error: invalid char in json text"),
        }
    }

    /// The name a new container or scalar gets under the current parent.
    fn current_name(&self) -> &[u8] {
        match self.stack.last() {
            None => b"json",
            Some(f) if f.kind == Kind::Array => b"",
            Some(_) if self.key.is_empty() => b"empty-key",
            Some(_) => &self.key,
        }
    }

    fn open(&mut self, kind: Kind) -> Result<(), JsonError> {
        if self.stack.len() >= self.limits.json_depth {
            self.limit_hit = Some(LimitHit::JsonDepth);
            return Err(JsonError(format!(
                "{CANCELLED}. Parsing depth limit exceeded"
            )));
        }
        let base = self.prefix.len();
        let name_len = self.current_name().len();
        self.budget_check(name_len + 16)?;
        match self.stack.last() {
            None => self.prefix.extend_from_slice(b"json"),
            Some(f) if f.kind == Kind::Array => {}
            Some(_) if self.key.is_empty() => self.prefix.extend_from_slice(b"empty-key"),
            Some(_) => self.prefix.extend_from_slice(&self.key),
        }
        let name_end = self.prefix.len();
        match kind {
            Kind::Object => self.prefix.push(b'.'),
            Kind::Array => self.prefix.extend_from_slice(b".array_0"),
        }
        self.stack.push(Frame {
            kind,
            base,
            name_end,
            count: 0,
        });
        Ok(())
    }

    /// Closes the innermost container and returns the state after it.
    fn close(&mut self) -> State {
        if let Some(f) = self.stack.pop() {
            self.prefix.truncate(f.base);
        }
        self.after_value()
    }

    /// Moves past a complete value: arrays count it, objects wait for `,` or `}`.
    fn after_value(&mut self) -> State {
        match self.stack.last_mut() {
            None => State::Done,
            Some(f) if f.kind == Kind::Object => State::ObjectNext,
            Some(f) => {
                f.count += 1;
                let (name_end, count) = (f.name_end, f.count);
                self.prefix.truncate(name_end);
                self.prefix.extend_from_slice(b".array_");
                self.prefix
                    .extend_from_slice(itoa::Buffer::new().format(count).as_bytes());
                State::ArrayNext
            }
        }
    }

    fn budget_check(&mut self, more: usize) -> Result<(), JsonError> {
        self.produced = self.produced.saturating_add(more);
        if self.produced > self.budget {
            self.limit_hit = Some(LimitHit::Arguments);
            return Err(JsonError(format!("{CANCELLED}. Argument names too long")));
        }
        Ok(())
    }

    fn emit(&mut self, value: &[u8]) -> Result<(), JsonError> {
        if self.args.len() >= self.limits.max_args {
            self.limit_hit = Some(LimitHit::Arguments);
            return Err(JsonError(CANCELLED.to_owned()));
        }
        let tail = match self.stack.last() {
            Some(f) if f.kind == Kind::Object => self.current_name(),
            Some(_) => b"",
            None => b"json",
        };
        let mut name = Vec::with_capacity(self.prefix.len() + tail.len());
        name.extend_from_slice(&self.prefix);
        name.extend_from_slice(tail);
        self.budget_check(name.len() + value.len())?;
        self.args.push((name, value.to_vec()));
        Ok(())
    }

    /// Parses a string body (the opening quote is consumed) into `out`.
    fn string(&mut self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        loop {
            let rest = &self.s[self.i..];
            let run = rest.iter().position(|&b| STRING_STOP[usize::from(b)]);
            let Some(run) = run else {
                self.i = self.s.len();
                return self.err("parse error: premature EOF");
            };
            let chunk = &rest[..run];
            // Text between escapes is mostly ASCII, checked a word at a time; only a
            // run with other bytes needs the full UTF-8 check.
            if !chunk.is_ascii() && std::str::from_utf8(chunk).is_err() {
                return self.err("lexical error: invalid bytes in UTF8 string");
            }
            out.extend_from_slice(chunk);
            self.i += run;
            match self.s[self.i] {
                b'"' => {
                    self.i += 1;
                    return Ok(());
                }
                b'\\' => self.escape(out)?,
                _ => return self.err("lexical error: invalid character inside string"),
            }
        }
    }

    /// Decodes the escape at `self.i` (a backslash) into `out`.
    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        let Some(&e) = self.s.get(self.i + 1) else {
            self.i = self.s.len();
            return self.err("parse error: premature EOF");
        };
        let simple = match e {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            b'/' => Some(b'/'),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'u' => None,
            _ => return self.err("lexical error: inside a JSON string, a backslash must be followed by one of \"\\/bfnrtu"),
        };
        if let Some(b) = simple {
            out.push(b);
            self.i += 2;
            return Ok(());
        }
        let Some(hi) = self.hex4(self.i + 2) else {
            return self.err(
                "lexical error: invalid (non-hex) character occurs after '\\u' inside string",
            );
        };
        self.i += 6;
        let mut code = hi;
        if hi & 0xFC00 == 0xD800 {
            if self.s.get(self.i) == Some(&b'\\') && self.s.get(self.i + 1) == Some(&b'u') {
                let Some(lo) = self.hex4(self.i + 2) else {
                    return self.err("lexical error: invalid (non-hex) character occurs after '\\u' inside string");
                };
                self.i += 6;
                // yajl joins the pair this way whatever the second escape holds.
                code = ((hi & 0x3F) << 10) | ((((hi >> 6) & 0xF) + 1) << 16) | (lo & 0x3FF);
            } else {
                // A lone high surrogate: yajl substitutes a question mark.
                out.push(b'?');
                return Ok(());
            }
        }
        push_utf8(code, out);
        Ok(())
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.s.get(at..at + 4)?;
        let mut v = 0u32;
        for &d in digits {
            v = v << 4 | char::from(d).to_digit(16)?;
        }
        Some(v)
    }

    /// Validates a number at `self.i` and moves past it.
    fn number(&mut self) -> Result<(), JsonError> {
        let s = self.s;
        let digits = |mut i: usize| {
            while s.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        let mut i = self.i;
        if s.get(i) == Some(&b'-') {
            i += 1;
        }
        match s.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digits(i),
            _ => {
                self.i = i;
                return self.err(
                    "lexical error: malformed number, a digit is required after the minus sign",
                );
            }
        }
        if s.get(i) == Some(&b'.') {
            let after = digits(i + 1);
            if after == i + 1 {
                self.i = i;
                return self.err(
                    "lexical error: malformed number, a digit is required after the decimal point",
                );
            }
            i = after;
        }
        if let Some(b'e' | b'E') = s.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = s.get(i) {
                i += 1;
            }
            let after = digits(i);
            if after == i {
                self.i = i;
                return self.err(
                    "lexical error: malformed number, a digit is required after the exponent",
                );
            }
            i = after;
        }
        self.i = i;
        Ok(())
    }
}

/// Encodes a code point as UTF-8 the way yajl does, including surrogate code points
/// (which Rust's `char` refuses) and values past U+10FFFF (as a question mark).
fn push_utf8(code: u32, out: &mut Vec<u8>) {
    match code {
        0..=0x7F => out.push(code as u8),
        0x80..=0x7FF => {
            out.extend_from_slice(&[0xC0 | (code >> 6) as u8, 0x80 | (code & 0x3F) as u8])
        }
        0x800..=0xFFFF => out.extend_from_slice(&[
            0xE0 | (code >> 12) as u8,
            0x80 | ((code >> 6) & 0x3F) as u8,
            0x80 | (code & 0x3F) as u8,
        ]),
        0x1_0000..=0x10_FFFF => out.extend_from_slice(&[
            0xF0 | (code >> 18) as u8,
            0x80 | ((code >> 12) & 0x3F) as u8,
            0x80 | ((code >> 6) & 0x3F) as u8,
            0x80 | (code & 0x3F) as u8,
        ]),
        _ => out.push(b'?'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(input: &str) -> Vec<(String, String)> {
        parse(input.as_bytes(), &Limits::default())
            .unwrap_or_else(|e| panic!("{input}: {e}"))
            .into_iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(&n).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect()
    }

    fn p(n: &str, v: &str) -> (String, String) {
        (n.to_owned(), v.to_owned())
    }

    #[test]
    fn nested_objects() {
        assert_eq!(flat(r#"{"a":{"b":1}}"#), vec![p("json.a.b", "1")]);
        assert_eq!(
            flat(r#"{"a":"x","b":{"c":"y","d":{"e":"z"}},"f":"w"}"#),
            vec![
                p("json.a", "x"),
                p("json.b.c", "y"),
                p("json.b.d.e", "z"),
                p("json.f", "w")
            ]
        );
    }

    #[test]
    fn arrays_use_array_n() {
        assert_eq!(
            flat(r#"{"arr":[1,2]}"#),
            vec![p("json.arr.array_0", "1"), p("json.arr.array_1", "2")]
        );
        assert_eq!(
            flat("[1,[2,3],4]"),
            vec![
                p("json.array_0", "1"),
                p("json.array_1.array_0", "2"),
                p("json.array_1.array_1", "3"),
                p("json.array_2", "4")
            ]
        );
        assert_eq!(
            flat(r#"{"a":[{"b":1},{"b":2}]}"#),
            vec![p("json.a.array_0.b", "1"), p("json.a.array_1.b", "2")]
        );
        assert_eq!(flat(r#"{"a":[[],{},5]}"#), vec![p("json.a.array_2", "5")]);
    }

    #[test]
    fn scalars_and_literals() {
        assert_eq!(
            flat(r#"{"t":true,"f":false,"n":null,"x":-1.5e+3}"#),
            vec![
                p("json.t", "true"),
                p("json.f", "false"),
                p("json.n", ""),
                p("json.x", "-1.5e+3")
            ]
        );
        assert_eq!(flat(r#""top""#), vec![p("json", "top")]);
        assert_eq!(flat(" 42 "), vec![p("json", "42")]);
        assert_eq!(flat("null"), vec![p("json", "")]);
    }

    #[test]
    fn empty_containers_and_keys() {
        assert!(flat("{}").is_empty());
        assert!(flat("[]").is_empty());
        assert_eq!(
            flat(r#"{"":1,"a":{"":{"b":2}}}"#),
            vec![p("json.empty-key", "1"), p("json.a.empty-key.b", "2")]
        );
        let empty = parse(b"", &Limits::default());
        assert_eq!(empty, Ok(Vec::new()));
    }

    #[test]
    fn escapes_are_decoded() {
        assert_eq!(
            flat(r#"{"k\u0041":"a\"b\\c\/d\n\t\u00e9\u20ac"}"#),
            vec![p("json.kA", "a\"b\\c/d\n\té€")]
        );
        assert_eq!(flat(r#"["\ud83d\ude00"]"#), vec![p("json.array_0", "😀")]);
        assert_eq!(flat(r#"["\ud83dx"]"#), vec![p("json.array_0", "?x")]);
        let args = parse(br#"["\u0000"]"#, &Limits::default()).unwrap();
        assert_eq!(args[0].1, vec![0]);
    }

    #[test]
    fn crs_cases() {
        // 942362 test 33: the key carries the payload, the name gets the json. prefix.
        assert_eq!(
            flat("{ \"; select\": \"foo\" }\n"),
            vec![p("json.; select", "foo")]
        );
        // 944120 test 12.
        assert_eq!(
            flat(r#"{"test": "ProcessBuilder.evil.clonetransformer"}"#),
            vec![p("json.test", "ProcessBuilder.evil.clonetransformer")]
        );
    }

    #[test]
    fn keys_keep_case_and_order() {
        assert_eq!(
            flat(r#"{"B":1,"a":2,"B":3}"#),
            vec![p("json.B", "1"), p("json.a", "2"), p("json.B", "3")]
        );
    }

    #[test]
    fn malformed_input_is_an_error() {
        for bad in [
            "{",
            "[1,",
            "{\"a\"}",
            "{\"a\":}",
            "{a:1}",
            "[1 2]",
            "[1,]",
            "{\"a\":1,}",
            "tru",
            "nul",
            "01",
            "-",
            "1.",
            "1e",
            "\"abc",
            "\"a\u{1}b\"",
            "\"\\x\"",
            "\"\\u12\"",
            "[1]]",
            "{} {}",
            "   ",
            "'a'",
            "[+1]",
            "[.5]",
            "truex",
            "\u{feff}{}",
        ] {
            assert!(
                parse(bad.as_bytes(), &Limits::default()).is_err(),
                "accepted {bad:?}"
            );
        }
        assert!(parse(b"[\"\xff\"]", &Limits::default()).is_err());
        let e = parse(b"{\"a\":1} x", &Limits::default()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("JSON parsing error: parse error: trailing garbage"),
            "{e}"
        );
    }

    #[test]
    fn depth_limit() {
        let limits = Limits {
            json_depth: 3,
            ..Limits::default()
        };
        assert!(parse(br#"{"a":{"b":[1]}}"#, &limits).is_ok());
        let out = parse_partial(br#"{"x":0,"a":{"b":[[1]]}}"#, &limits);
        let e = out.error.unwrap();
        assert!(e.0.contains("depth limit exceeded"), "{e}");
        assert_eq!(out.limit_hit, Some(LimitHit::JsonDepth));
        assert_eq!(out.args, vec![(b"json.x".to_vec(), b"0".to_vec())]);
        let zero = Limits {
            json_depth: 0,
            ..Limits::default()
        };
        assert!(parse(b"[]", &zero).is_err());
        assert!(parse(b"1", &zero).is_ok());
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        let depth = 200_000;
        let mut doc = "[".repeat(depth);
        doc.push('1');
        doc.push_str(&"]".repeat(depth));
        let limits = Limits {
            json_depth: usize::MAX,
            ..Limits::default()
        };
        let out = parse_partial(doc.as_bytes(), &limits);
        // Either the output budget stops it or it completes; it never overflows the stack.
        assert!(out.error.is_none() || out.limit_hit.is_some());
        assert!(parse(doc.as_bytes(), &Limits::default()).is_err());
    }

    #[test]
    fn args_limit_keeps_the_first_ones() {
        let limits = Limits {
            max_args: 2,
            ..Limits::default()
        };
        let out = parse_partial(b"[1,2,3,4]", &limits);
        assert_eq!(out.args.len(), 2);
        assert_eq!(out.limit_hit, Some(LimitHit::Arguments));
        assert!(out.error.unwrap().0.contains("client cancelled parse"));
        assert!(parse(b"[1,2]", &limits).is_ok());
    }

    #[test]
    fn long_arrays_count_up() {
        let doc = format!("[{}0]", "0,".repeat(1234));
        let args = parse(
            doc.as_bytes(),
            &Limits {
                max_args: 5000,
                ..Limits::default()
            },
        )
        .unwrap();
        assert_eq!(args.len(), 1235);
        assert_eq!(args[1234].0, b"json.array_1234");
        assert_eq!(args[10].0, b"json.array_10");
    }

    #[test]
    fn fuzz_mutations_never_panic() {
        use crate::body::fuzz::{XorShift, mutate};
        const PIECES: &[&[u8]] = &[
            b"{",
            b"}",
            b"[",
            b"]",
            b"\"",
            b"\\",
            b"\\u",
            b"\\ud83d",
            b":",
            b",",
            b"-",
            b"0",
            b"e",
            b"true",
            b"null",
            b"\xff",
            b"\xe2\x82",
            b" ",
        ];
        let seeds: [&[u8]; 3] = [
            br#"{"a":{"b":[1,2.5e3,{"c":"x\u00e9y"}]},"d":[[true,false],null],"":"e"}"#,
            br#"[{"k":"v"},[],{},"s\n\"t\"",-0.1]"#,
            br#""top""#,
        ];
        let mut rng = XorShift(0xD1B5_4A32_D192_ED03);
        let limits = Limits {
            max_args: 8,
            json_depth: 6,
            ..Limits::default()
        };
        for round in 0..4000 {
            let doc = mutate(&mut rng, seeds[round % seeds.len()], PIECES);
            let out = parse_partial(&doc, &limits);
            assert!(out.args.len() <= limits.max_args);
            assert!(out.args.iter().all(|(n, _)| n.starts_with(b"json")));
            if out.limit_hit.is_some() {
                assert!(out.error.is_some());
            }
        }
    }

    #[test]
    fn output_budget_bounds_name_amplification() {
        let key = "k".repeat(100_000);
        let doc = format!("{{\"{key}\":[{}1]}}", "1,".repeat(999));
        let out = parse_partial(doc.as_bytes(), &Limits::default());
        assert_eq!(out.limit_hit, Some(LimitHit::Arguments));
        let total: usize = out.args.iter().map(|(n, v)| n.len() + v.len()).sum();
        assert!(total <= OUTPUT_BUDGET_BASE + doc.len() * 16);
    }
}
