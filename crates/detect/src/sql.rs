//! SQL injection: libinjection's verdict, with context.
//!
//! # Grammar
//!
//! [`scan`] is libinjection's tokenizer and fingerprint list (as ModSecurity's
//! `@detectSQLi` runs it), with two conditions added. In text that reads like prose
//! (several words, almost only letters and spaces), a fingerprint made only of
//! words, numbers and logical operators is not enough; it must hold a string, a
//! comment, a statement separator, a `UNION`, a function call, a variable or a
//! T-SQL or expression keyword (and in a value over 128 bytes whose first 64 read
//! like prose, a string or a variable is not enough either). And a fingerprint
//! read as if after a quote (starting `s`) stands only when the value's first quote
//! can close a string (`closes`), unless the value starts with one. So
//! `1 UNION SELECT password FROM users` and `x' or '1'='1` are found, and a sentence
//! that happens to tokenize as SQL words passes. Then [`scan`] adds the shapes that
//! libinjection's fingerprints let through, looked for only at the injection points
//! (`injection_points`: the value's start when it starts like SQL, and right after
//! the first `'` and the first `"` when they close a string):
//!
//! ```text
//! union-select := "union" ((ws | comment)+ | "(") ["all" | "distinct"] ["("]
//!                  "select" select-list     (a literal, "*", "@", "(", or a name
//!                  followed by "," "(" "." ";" a comment, "from" or "into")
//! schema       := (see below)
//! probe        := (sleep | benchmark | pg_sleep | extractvalue | updatexml
//!                  | load_file | dbms_pipe.receive_message | randomblob) ws* "(" sql-args
//! sql-args     := number ws* (")" | "," | operator) | quote | "@" | "(" | ")" | name ws* "("
//! quote-logic  := quote [")"]* (ws | comment)* (or | and | xor | union | select
//!                  | having | group | order) then, within 48 bytes, "=" | "<" | ">"
//!                  | "#" | "--" | "/*"   (at least one byte before the word)
//! stacked      := [number | name] [")"]* ";" (select | insert | update | delete
//!                  | drop | create | alter | copy | exec | declare | waitfor | ...)
//!                  then "(" | "*" | from | into | table | program | role | ...
//!                  within 64 bytes
//! truncation   := alnum quote [")"]* (ws | comment)* ("#" | "--" | "/*") up to 8
//!                  bytes without letters or digits, then the end of the value
//! ```
//!
//! A quote inside a word (`O'Brien`) never starts a quote-logic, and a comment that
//! holds words (`-- really`, `#metoo`) is not a truncation.
//!
//! [`confirm`] answers a looser question, for the precision mode of the rule set:
//! does the value have SQL *syntax in an injection context* at all? Yes when
//! [`scan`] says so, or when an injection point holds a truncation, a union-select,
//! a schema name, or one of these:
//!
//! ```text
//! quote-break := quote [")"]* ws* ( ";" | "--" | "/*" | "||" | "&&"
//!                 | "#" (ws | end) | ("=" | "<" | ">") operand
//!                 | ws-or-")" AFTER_QUOTE-word operand )   -- "'select * from'" is
//!                                                          -- a phrase in quotes
//! call        := (sleep | benchmark | char | concat | version | user | cast
//!                 | substring | if | ... : CALLS) ws* "(" sql-args
//! schema      := information_schema | sysobjects | syscolumns | @@version
//!              | xp_cmdshell | waitfor ws* (delay | time) | sqlite_master | ...
//! ```
//!
//! A CRS rule that matched words in prose (`union was a great select`, `Sleep(8
//! hours)`) is not confirmed: there is no quote break, no `union select`, and
//! `Sleep(8 hours)` looks like a call but its argument is a word list, while
//! [`confirm`] wants a call's argument to be a number, a quote or a nested call.
//!
//! Linear: libinjection is linear, and each pattern is one scan.

use crate::libinjection::detect_sqli;
use crate::text::{Words, find_ci, is_space, prose_like, skip_space, starts_with_ci};
use crate::{Class, Finding};
use std::sync::LazyLock;

/// Words of SQL's logic and statements, and schema names: without SQL punctuation,
/// a value needs one of these (whole) to be SQL.
pub(crate) const SQL_WORDS: &[&str] = &[
    "or",
    "and",
    "xor",
    "union",
    "select",
    "sleep",
    "benchmark",
    "having",
    "exec",
    "drop",
    "insert",
    "delete",
    "update",
    "where",
    "like",
    "not",
    "null",
    "order",
    "group",
    "into",
    "waitfor",
    "procedure",
    "case",
    "when",
    "div",
    "mod",
    "between",
    "regexp",
    "rlike",
    "is",
    "sysobjects",
    "syscolumns",
    "information_schema",
    "xp_cmdshell",
    "sqlite_master",
    "pg_catalog",
    "all_tables",
    "user_tables",
];

const CALLS: &[&str] = &[
    "sleep",
    "benchmark",
    "pg_sleep",
    "extractvalue",
    "updatexml",
    "load_file",
    "char",
    "concat",
    "version",
    "database",
    "user",
    "convert",
    "cast",
    "ascii",
    "substring",
    "substr",
    "if",
    "ord",
    "mid",
    "hex",
    "unhex",
    "group_concat",
    "count",
    "length",
    "current_user",
    "system_user",
    "dbms_pipe.receive_message",
    "randomblob",
    "elt",
    "exp",
    "floor",
    "rand",
];

const SCHEMA: &[&str] = &[
    "information_schema",
    "sysobjects",
    "syscolumns",
    "@@version",
    "xp_cmdshell",
    "sqlite_master",
    "pg_catalog",
    "mysql.user",
    "all_tables",
    "user_tables",
];

const AFTER_QUOTE: &[&str] = &[
    "or",
    "and",
    "union",
    "select",
    "having",
    "order",
    "group",
    "like",
    "rlike",
    "regexp",
    "xor",
    "div",
    "procedure",
    "into",
    "waitfor",
    "limit",
    "sounds",
    "is",
    "not",
    "exec",
];

/// Scans `input` for SQL injection (libinjection with the prose condition).
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    let whole = 0..input.len();
    if let Some(fp) = detect_sqli(input) {
        // A fingerprint read in a string context (starting with `s`) stands only
        // when the value's first quote can close the application's string: in a
        // code snippet or a JSON document the first quote opens a literal
        // (`'paid'`, `{"event_id"`).
        let string_context = fp.as_bytes().first() == Some(&b's')
            && !input.first().is_some_and(|c| matches!(c, b'\'' | b'"'));
        let closing =
            memchr::memchr2(b'\'', b'"', input).is_some_and(|i| closes(input, i + 1, input[i]));
        // A long value that starts as prose (a forum post quoting code) needs a
        // fingerprint with a comment, a statement break, a UNION or a function:
        // strings and operators alone are the quoted code's.
        let prose_head = input.len() > 128 && prose_like(&input[..64]);
        let has = |kinds: &[u8]| fp.as_bytes().iter().any(|c| kinds.contains(c));
        let strong = if prose_head {
            has(b"c;UfET")
        } else {
            has(b"sc;UfvET")
        };
        if (strong || !(prose_head || prose_like(input))) && (!string_context || closing) {
            return Some(Finding::new(Class::Sql, "libinjection fingerprint", whole));
        }
    }
    // Shapes libinjection lets through, where an injection can start.
    let rule = anchored(input, Strictness::Scan)?;
    Some(Finding::new(Class::Sql, rule, whole))
}

/// How much a shape needs: [`scan`] reports attacks, [`confirm`] answers whether
/// there is SQL syntax in an injection context at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strictness {
    Scan,
    Confirm,
}

/// How many tokens after an injection point a UNION, a probe call or a schema name
/// may start.
const WINDOW_TOKENS: usize = 16;

/// The shapes of SQL injection that libinjection's fingerprints let through, looked
/// for only where an injection can start ([`injection_points`]): a UNION SELECT, a
/// schema name, a time or error probe (for [`confirm`]: any SQL function called with
/// SQL arguments) within [`WINDOW_TOKENS`] tokens; and right after a closing quote,
/// SQL logic with an operator or a comment, or a comment that cuts the query short.
fn anchored(s: &[u8], how: Strictness) -> Option<&'static str> {
    for (p, end) in injection_points(s) {
        if p > 0 {
            if truncation_at(s, p) {
                return Some("quote, then a comment");
            }
            let logic = match how {
                Strictness::Scan => strict_quote_break_at(s, p),
                Strictness::Confirm => quote_break_at(s, p),
            };
            if logic {
                return Some("quote, then SQL logic");
            }
        }
        if stacked_at(s, p) {
            return Some("stacked statement");
        }
        if union_select_in(s, p, end) {
            return Some("UNION SELECT");
        }
        if schema_in(s, p, end) {
            return Some("schema name");
        }
        let calls = match how {
            Strictness::Scan => &*PROBE_WORDS,
            Strictness::Confirm => &*CALL_WORDS,
        };
        if called_with_sql(s, p, end, calls) {
            return Some("time or error probe");
        }
    }
    None
}

/// Where an injected value can leave the application's literal, each with the end
/// of its window ([`WINDOW_TOKENS`] tokens on): the start of the value, when it
/// begins the way SQL after a number or a name goes on; and right after the first
/// `'` and the first `"`, when it [`closes`] a string. Only the first quote of each kind counts: the
/// application's string ends there, so SQL in a later quoted literal (a code
/// snippet's `WHERE status = 'paid' AND ...`) was never outside it.
fn injection_points(s: &[u8]) -> Vec<(usize, usize)> {
    let mut points = Vec::with_capacity(4);
    if starts_like_sql(s) {
        points.push((0, window_end(s, 0)));
    }
    for q in [b'\'', b'"'] {
        if let Some(i) = memchr::memchr(q, s)
            && closes(s, i + 1, q)
        {
            points.push((i + 1, window_end(s, i + 1)));
        }
    }
    points
}

/// Whether a quote `q` whose next byte is at `k` can be the one that closes the
/// application's string: not followed by the same quote (a doubled quote is an
/// escaped one, and three backticks open a Markdown code block), nor by a letter or
/// digit unless they start a word of SQL logic (`'or'1'='1`).
fn closes(s: &[u8], k: usize, q: u8) -> bool {
    // One character in quotes after a word and a space (`Unexpected token '<'`,
    // `the '=' sign`) is text that names a character.
    if k >= 2
        && is_space(s[k - 2])
        && s.get(k + 1) == Some(&q)
        && s.get(k)
            .is_some_and(|c| !c.is_ascii_alphanumeric() && *c != q)
        && s.get(k + 2).is_none_or(|c| !c.is_ascii_alphanumeric())
    {
        return false;
    }
    match s.get(k) {
        None => true,
        Some(&c) if c == q => false,
        Some(c) if c.is_ascii_alphanumeric() => {
            let w = k + s[k..]
                .iter()
                .take(16)
                .take_while(|c| c.is_ascii_alphabetic())
                .count();
            crate::text::one_of(&s[k..w], AFTER_QUOTE)
        }
        Some(_) => true,
    }
}

/// Statements a value may start with when it is SQL from its first byte.
const STATEMENTS: &[&str] = &[
    "select", "union", "insert", "update", "delete", "drop", "exec", "execute", "declare",
    "waitfor", "create", "alter", "truncate", "shutdown", "call", "load", "replace",
];

/// Whether the value starts the way SQL after a number or a name goes on: a number,
/// `(`, `)`, `@`, `;`, a statement keyword, a call of a SQL function, or a name
/// followed by `)`, `;`, `,`, an operator, a comment or a word of SQL logic.
fn starts_like_sql(s: &[u8]) -> bool {
    let k = skip_space_and_comments(s, 0);
    let Some(&c) = s.get(k) else {
        return false;
    };
    if c.is_ascii_digit() || matches!(c, b'(' | b')' | b'@' | b';') {
        return true;
    }
    if matches!(c, b'-' | b'+') {
        return s.get(k + 1).is_some_and(|d| d.is_ascii_digit());
    }
    if !(c.is_ascii_alphabetic() || c == b'_') {
        return false;
    }
    let end = k + s[k..]
        .iter()
        .take(64)
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'$'))
        .count();
    let word = &s[k..end];
    if crate::text::one_of(word, STATEMENTS) {
        return true;
    }
    let n = skip_space_and_comments(s, end);
    match s.get(n) {
        None => false,
        Some(b')' | b';' | b',' | b'=' | b'<' | b'>' | b'#' | b'(' | b'|' | b'&') => true,
        Some(b'-') => s.get(n + 1) == Some(&b'-'),
        Some(b'/') => s.get(n + 1) == Some(&b'*'),
        Some(_) => {
            let w = n + s[n..]
                .iter()
                .take(16)
                .take_while(|c| c.is_ascii_alphabetic())
                .count();
            crate::text::one_of(&s[n..w], AFTER_QUOTE)
        }
    }
}

/// Where the token [`WINDOW_TOKENS`] tokens after `p` starts (or the end of the
/// value). A token is a run of letters, digits, `_`, `.`, `@` or `$`, or one other
/// byte; white space and `/* ... */` comments between tokens are skipped.
fn window_end(s: &[u8], p: usize) -> usize {
    let mut k = p;
    for _ in 0..WINDOW_TOKENS {
        k = skip_space_and_comments_unbounded(s, k);
        if k >= s.len() {
            return s.len();
        }
        let run = s[k..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'@' | b'$'))
            .count();
        k += run.max(1);
    }
    skip_space_and_comments_unbounded(s, k)
}

/// Skips white space and whole `/* ... */` comments from `at`, however long.
fn skip_space_and_comments_unbounded(s: &[u8], mut at: usize) -> usize {
    loop {
        at = skip_space(s, at);
        if !s[at.min(s.len())..].starts_with(b"/*") {
            return at;
        }
        match memchr::memmem::find(&s[at + 2..], b"*/") {
            Some(e) => at += 2 + e + 2,
            None => return s.len(),
        }
    }
}

/// Statements an injection stacks after `;`.
const STACKED: &[&str] = &[
    "select", "insert", "update", "delete", "drop", "create", "alter", "copy", "exec", "execute",
    "declare", "waitfor", "shutdown", "grant", "truncate", "set",
];

/// Words that show a stacked statement's object: what follows `DROP`, `COPY`,
/// `ALTER` and the rest in SQL, not in prose.
const STATEMENT_OBJECTS: &[&str] = &[
    "from",
    "into",
    "table",
    "program",
    "role",
    "user",
    "login",
    "database",
    "values",
    "where",
    "procedure",
    "function",
    "trigger",
    "superuser",
    "password",
    "delay",
];

/// At injection point `p`: (at the value's start, a number or a name first) `)`s,
/// `;`, then a statement ([`STACKED`]) whose object shows within 64 bytes (`(`,
/// `*`, or a word of [`STATEMENT_OBJECTS`]): `1; DROP TABLE users`, `'; COPY (SELECT
/// '') TO PROGRAM 'id'`. `3; update the docs` names no object.
fn stacked_at(s: &[u8], p: usize) -> bool {
    let mut k = p;
    if p == 0 {
        k = skip_space(s, k);
        k += s[k..]
            .iter()
            .take(64)
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'%'))
            .count();
    }
    while k < s.len() && s[k] == b')' {
        k += 1;
    }
    let k = skip_space_and_comments(s, k);
    if s.get(k) != Some(&b';') {
        return false;
    }
    let w = skip_space_and_comments(s, k + 1);
    let word_end = w + s[w..]
        .iter()
        .take(16)
        .take_while(|c| c.is_ascii_alphabetic())
        .count();
    if word_end == w || !crate::text::one_of(&s[w..word_end], STACKED) {
        return false;
    }
    if s.get(word_end)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
    {
        return false;
    }
    static OBJECTS: LazyLock<Words> = LazyLock::new(|| Words::new(STATEMENT_OBJECTS));
    let rest = &s[word_end..(word_end + 64).min(s.len())];
    rest.iter().any(|c| matches!(c, b'(' | b'*'))
        || OBJECTS.find_all(rest).any(|(_, a, e)| {
            (a == 0 || !rest[a - 1].is_ascii_alphanumeric())
                && rest.get(e).is_none_or(|c| !c.is_ascii_alphanumeric())
        })
}

/// The calls that only serve to probe a database: they wait or raise an error.
const PROBES: &[&str] = &[
    "sleep",
    "benchmark",
    "pg_sleep",
    "extractvalue",
    "updatexml",
    "load_file",
    "dbms_pipe.receive_message",
    "randomblob",
];

static PROBE_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(PROBES));
static CALL_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(CALLS));

/// At `p` (right after a closing quote): optional `)`, white space or comments, a
/// word of SQL logic (`or`, `and`, `union`, `having`, `group`, `order`, `select`,
/// `xor`), and within the next 48 bytes an operator or a comment (`=`, `<`, `>`,
/// `--`, `#`, `/*`).
fn strict_quote_break_at(s: &[u8], p: usize) -> bool {
    const LOGIC: &[&str] = &[
        "or", "and", "union", "having", "group", "order", "select", "xor",
    ];
    let mut k = p;
    while k < s.len() && s[k] == b')' {
        k += 1;
    }
    let k = skip_space_and_comments(s, k);
    if k == p {
        return false;
    }
    let end = k + s[k..]
        .iter()
        .take(8)
        .take_while(|c| c.is_ascii_alphabetic())
        .count();
    if end == k || !crate::text::one_of(&s[k..end], LOGIC) {
        return false;
    }
    let tail = &s[end..(end + 48).min(s.len())];
    tail.iter().any(|c| matches!(c, b'=' | b'<' | b'>' | b'#'))
        || memchr::memmem::find(tail, b"--").is_some()
        || memchr::memmem::find(tail, b"/*").is_some()
}

/// At `p` (right after a closing quote that follows a letter or digit): only `)`,
/// white space and comments to the end of the value, the last one a line comment
/// (`#`, `--`) or an unclosed `/*` that holds no words (`acct' #`, `x')-- `): the
/// rest of the application's query is cut off.
fn truncation_at(s: &[u8], p: usize) -> bool {
    p >= 2 && s[p - 2].is_ascii_alphanumeric() && ends_in_comment(&s[p..])
}

/// Skips white space and `/* ... */` comments (up to 64 bytes each) from `at`.
fn skip_space_and_comments(s: &[u8], mut at: usize) -> usize {
    loop {
        at = skip_space(s, at);
        if !s[at..].starts_with(b"/*") {
            return at;
        }
        let window = &s[at + 2..(at + 66).min(s.len())];
        match memchr::memmem::find(window, b"*/") {
            Some(e) => at += 2 + e + 2,
            None => return at,
        }
    }
}

/// Whether `rest` (what follows a quote) is only `)`, white space and comments,
/// with a line comment (`#`, `--`) or an unclosed `/*` last that holds no words:
/// the quote ends the value's string and the comment drops the rest of the query.
fn ends_in_comment(rest: &[u8]) -> bool {
    let mut k = 0;
    while k < rest.len() && rest[k] == b')' {
        k += 1;
    }
    let k = skip_space_and_comments(rest, k);
    let tail = &rest[k..];
    let body = if tail.starts_with(b"#") {
        &tail[1..]
    } else if tail.starts_with(b"--") || tail.starts_with(b"/*") {
        &tail[2..]
    } else {
        return false;
    };
    // The comment holds no words: `-- really` and `#metoo` are prose.
    body.len() <= 8
        && !body
            .iter()
            .any(|c| c.is_ascii_alphanumeric() || *c == b'\n')
}

/// A necessary condition for a libinjection verdict worth reporting: SQL punctuation
/// (a quote, a comment, an operator, a parenthesis, `;`), or a word of SQL's
/// logic or statements. A value of letters, digits and spaces without such a word
/// cannot break out of a query.
///
/// It is also necessary for [`confirm`] (which checks it first): every pattern there
/// needs punctuation, or one of these words, or a schema name.
pub(crate) fn may_match(input: &[u8]) -> bool {
    static WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(SQL_WORDS));
    input.iter().any(|c| {
        !(c.is_ascii_alphanumeric() || *c == b' ' || *c == b'.' || *c == b',' || *c >= 0x80)
    }) || WORDS.any_whole(input)
}

/// Whether the value has SQL syntax in an injection context (see the module
/// documentation).
pub fn confirm(input: &[u8]) -> bool {
    scan(input).is_some() || confirm_beyond_scan(input)
}

/// The part of [`confirm`] that [`scan`] does not answer: `confirm(v)` is
/// `scan(v).is_some() || confirm_beyond_scan(v)`, for a caller that has `scan`'s
/// answer already (libinjection then runs once per value).
pub fn confirm_beyond_scan(input: &[u8]) -> bool {
    may_match(input) && anchored(input, Strictness::Confirm).is_some()
}

/// At `p` (right after a closing quote): optional `)` and white space, then `;`,
/// `#` (before white space or the end), `=`, `<`, `>` (with an operand), `--`,
/// `/*`, `||`, `&&`, or, after at least one `)` or white space byte, a word that
/// goes on SQL after a value ([`AFTER_QUOTE`]) whose operand (a quote, a digit,
/// `=`, `(`, `@`, `-`, `#`, `*`) follows at once.
fn quote_break_at(s: &[u8], p: usize) -> bool {
    let mut k = p;
    while k < s.len() && s[k] == b')' {
        k += 1;
    }
    let k = skip_space(s, k);
    let Some(&n) = s.get(k) else {
        return false;
    };
    if n == b';' {
        return true;
    }
    // A comparison needs an operand (`'='x`, `' > 0`), a comment ends the line
    // (`"<br>` and `"#{i}` are a string's text).
    if matches!(n, b'=' | b'<' | b'>') {
        let o = skip_space(
            s,
            k + 1 + usize::from(matches!(s.get(k + 1), Some(b'=' | b'>'))),
        );
        return s
            .get(o)
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, b'\'' | b'"' | b'(' | b'@'));
    }
    if n == b'#' {
        return s.get(k + 1).is_none_or(|c| is_space(*c));
    }
    if starts_with_ci(s, k, b"--")
        || starts_with_ci(s, k, b"/*")
        || starts_with_ci(s, k, b"||")
        || starts_with_ci(s, k, b"&&")
    {
        return true;
    }
    // The word needs white space or `)` before it: `"select * from"` is a phrase
    // in quotes (a quote glued to SQL logic, `'or'1'='1`, is libinjection's).
    if k == p {
        return false;
    }
    let word_end = k + s[k..]
        .iter()
        .take(16)
        .take_while(|c| c.is_ascii_alphabetic())
        .count();
    if word_end == k
        || !crate::text::one_of(&s[k..word_end], AFTER_QUOTE)
        || s.get(word_end).is_some_and(|c| c.is_ascii_alphanumeric())
    {
        return false;
    }
    // The keyword's operand starts right after it: `' or 1=1`, `' and (select`,
    // `" or ""="` (`"not slow"` and `"union station"` are phrases).
    let o = skip_space(s, word_end);
    s.get(o).is_some_and(|c| {
        matches!(
            c,
            b'\'' | b'"' | b'0'..=b'9' | b'=' | b'(' | b'@' | b'-' | b'#' | b'*'
        )
    })
}

/// A UNION SELECT with a select list, its UNION starting in `from..end`.
fn union_select_in(s: &[u8], mut from: usize, end: usize) -> bool {
    while let Some(at) = find_ci(s, from, b"union") {
        if at >= end {
            return false;
        }
        from = at + 1;
        if at > 0 && (s[at - 1].is_ascii_alphanumeric() || s[at - 1] == b'_') {
            continue;
        }
        // White space and comments between (bounded: see skip_space_and_comments).
        let mut k = skip_space_and_comments(s, at + 5);
        if k == at + 5 && s.get(k) != Some(&b'(') {
            continue;
        }
        for w in [&b"all"[..], b"distinct"] {
            if starts_with_ci(s, k, w)
                && s.get(k + w.len())
                    .is_some_and(|c| is_space(*c) || *c == b'/')
            {
                k = skip_space_and_comments(s, k + w.len());
            }
        }
        if s.get(k) == Some(&b'(') {
            k = skip_space(s, k + 1);
        }
        if !starts_with_ci(s, k, b"select") {
            continue;
        }
        let after = k + 6;
        if s.get(after)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            continue;
        }
        if select_list(s, skip_space_and_comments(s, after)) {
            return true;
        }
    }
    false
}

/// Whether a SELECT's list starts at `k`: a literal (number, quote, `null`), `*`,
/// `@@var`, `(`, or a name followed by `,`, `(`, `.`, `FROM`, `INTO`, `;` or a
/// comment. A name alone at the end, or followed by more words, is prose (`a union
/// select committee`).
fn select_list(s: &[u8], k: usize) -> bool {
    let Some(&c) = s.get(k) else {
        return false;
    };
    if c.is_ascii_digit() || matches!(c, b'*' | b'@' | b'(' | b'\'' | b'"' | b'`' | b'-') {
        return true;
    }
    if !(c.is_ascii_alphabetic() || c == b'_') {
        return false;
    }
    let end = k + s[k..]
        .iter()
        .take(64)
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_' || **c == b'$')
        .count();
    if s[k..end].eq_ignore_ascii_case(b"null") {
        return true;
    }
    let n = skip_space_and_comments(s, end);
    if n > end && s[end..n].starts_with(b"/*") {
        return true;
    }
    match s.get(n) {
        Some(b',' | b'(' | b'.' | b';' | b'#') => true,
        Some(b'-') => s.get(n + 1) == Some(&b'-'),
        Some(_) => starts_with_ci(s, n, b"from") || starts_with_ci(s, n, b"into"),
        None => false,
    }
}

/// Whether one of `words` occurs as a function name, starting in `from..end`,
/// called with SQL arguments.
fn called_with_sql(s: &[u8], from: usize, end: usize, words: &Words) -> bool {
    words
        .find_all(&s[from..])
        .take_while(|(_, at, _)| from + at < end)
        .any(|(_, at, e)| {
            let (at, e) = (from + at, from + e);
            if at > 0 && (s[at - 1].is_ascii_alphanumeric() || s[at - 1] == b'_') {
                return false;
            }
            let k = skip_space(s, e);
            s.get(k) == Some(&b'(') && sql_arguments(s, skip_space(s, k + 1))
        })
}

/// Whether what starts at `a` (after a call's `(`) reads as SQL arguments: a number
/// followed by `)`, `,` or an operator, a quote, `@@var`, `)`, `(`, or a nested call.
/// A word list (`Sleep(8 hours)`) is prose.
fn sql_arguments(s: &[u8], a: usize) -> bool {
    let Some(&arg) = s.get(a) else {
        return false;
    };
    if arg.is_ascii_digit() {
        let end = a + s[a..]
            .iter()
            .take_while(|c| c.is_ascii_digit() || **c == b'.')
            .count();
        return matches!(
            s.get(skip_space(s, end)),
            Some(b')' | b',' | b'*' | b'+' | b'-' | b'=')
        );
    }
    if matches!(arg, b'\'' | b'"' | b'@' | b')' | b'(') {
        return true;
    }
    arg.is_ascii_alphabetic() && {
        let w = a + s[a..]
            .iter()
            .take(32)
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
            .count();
        s.get(skip_space(s, w)) == Some(&b'(')
    }
}

/// A schema name (`information_schema`, `@@version`, ...) or `WAITFOR DELAY`
/// starting in `from..end`.
fn schema_in(s: &[u8], from: usize, end: usize) -> bool {
    static SCHEMA_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(SCHEMA));
    SCHEMA_WORDS
        .find_all(&s[from..])
        .next()
        .is_some_and(|(_, at, _)| from + at < end)
        || find_ci(s, from, b"waitfor").is_some_and(|at| {
            let k = skip_space(s, at + 7);
            at < end && (starts_with_ci(s, k, b"delay") || starts_with_ci(s, k, b"time"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_and_confirmed() {
        for s in [
            "1' OR '1'='1",
            "1 UNION SELECT password FROM users--",
            "admin'--",
            "1; DROP TABLE users",
            "1 AND SLEEP(5)",
            "' UNION ALL SELECT NULL,NULL--",
        ] {
            assert!(scan(s.as_bytes()).is_some(), "scan missed: {s}");
            assert!(confirm(s.as_bytes()), "confirm missed: {s}");
        }
        for s in [
            "1 union/**/select 1",
            "x' having 1=1",
            "benchmark(1000000,md5(1))",
            "select * from information_schema.tables",
            "1;waitfor delay '0:0:5'",
            "\") or (\"1\"=\"1",
        ] {
            assert!(confirm(s.as_bytes()), "confirm missed: {s}");
        }
    }

    #[test]
    fn shapes_libinjection_lets_through() {
        for s in [
            "18 AND 1=(SELECT COUNT(*) FROM information_schema.tables)",
            "687')\tGrOUP\tBY\tsSN\thAVIng\t1=1--",
            "1 AND SLEEP(5)",
            "x UNION/**/SELECT 1",
            "1 union select password from users",
            "x' UNION ALL SELECT NULL,NULL--",
            "0 union(select username,password from admin)",
            "-1 UNION SELECT @@version",
            "1 union select version()#",
            "583\"/**/or/**/2=2--/**/-",
            "acct' #",
            "TeSt'/**/#",
            "admin')-- ",
            "460; ALTER ROLE tr WITH SUPERUSER--x",
            "'; COPY(select '')TO PROGRAM 'id'-- -",
            "80';\nCREATE table w(o teXT);",
            "0;\tSELECT\ndblink_connect('host=x')--",
        ] {
            assert!(scan(s.as_bytes()).is_some(), "missed: {s}");
        }
    }

    #[test]
    fn prose_is_not_confirmed() {
        for s in [
            "union was a great select",
            "Sleep(8 hours)",
            "john+or@var.es",
            "Select the best option from the list, or not",
            "It's a nice day and I'm happy",
            "O'Brien or O'Neil",
            "Please update my order by friday",
            "I'd like to join the union; select me",
            "3; update the docs when you can",
            "Sleep(8 hours) or a union select committee",
            "the reunion selected a new board",
            "> SyntaxError: Unexpected token '<'\n\nAny ideas?",
            "Use the '=' sign, not the ';' one",
        ] {
            assert!(!confirm(s.as_bytes()), "confirmed prose: {s}");
            assert!(scan(s.as_bytes()).is_none(), "found in prose: {s}");
        }
        for s in [
            "she said \"#metoo\"",
            "the \"#1\" fan",
            "tag: '#rust'",
            "it's 'ok' -- really",
        ] {
            assert!(scan(s.as_bytes()).is_none(), "found in prose: {s}");
        }
    }
}
