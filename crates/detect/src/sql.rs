//! SQL injection: libinjection's verdict, with context.
//!
//! # Grammar
//!
//! [`scan`] is libinjection's tokenizer and fingerprint list (as ModSecurity's
//! `@detectSQLi` runs it), with one condition added: in text that reads like prose
//! (several words, almost only letters and spaces), a fingerprint made only of
//! words, numbers and logical operators is not enough; it must hold a string
//! break, a comment, a statement separator, a `UNION`, or a function call. So
//! `1 UNION SELECT password FROM users` and `x' or '1'='1` are found, and a sentence
//! that happens to tokenize as SQL words passes. Then [`scan`] adds the shapes that
//! libinjection's fingerprints let through:
//!
//! ```text
//! union-select := "union" (ws | comment)+ ["all" | "distinct"] "select"
//! schema       := (see below)
//! probe        := (sleep | benchmark | pg_sleep | extractvalue | updatexml
//!                  | load_file | dbms_pipe.receive_message | randomblob) ws* "(" sql-args
//! sql-args     := number ws* (")" | "," | operator) | quote | "@" | "(" | ")" | name ws* "("
//! quote-logic  := quote [")"]* (ws | comment)+ (or | and | xor | union | select
//!                  | having | group | order) then, within 48 bytes, "=" | "<" | ">"
//!                  | "#" | "--" | "/*"
//! truncation   := alnum quote [")"]* (ws | comment)* ("#" | "--" | "/*") up to 8
//!                  bytes without letters or digits, then the end of the value
//! ```
//!
//! A quote inside a word (`O'Brien`) never starts a quote-logic, and a comment that
//! holds words (`-- really`, `#metoo`) is not a truncation.
//!
//! [`confirm`] answers a looser question, for the precision mode of the rule set:
//! does the value have SQL *syntax in an injection context* at all? Yes when
//! [`scan`] says so, or when it holds one of these:
//!
//! ```text
//! quote-break := quote [")"]* ws* (or | and | union | select | having | order by
//!                 | group by | ";" | "--" | "#" | "/*" | "||" | "&&" | "=" | "<" | ">")
//! union       := "union" ws+ ["all" | "distinct" ws+] "select"
//! call        := (sleep | benchmark | pg_sleep | extractvalue | updatexml
//!                 | load_file | char | concat | version | database | user
//!                 | convert | cast | ascii | substring | if) ws* "("
//! schema      := information_schema | sysobjects | syscolumns | @@version
//!              | xp_cmdshell | waitfor ws+ delay | sqlite_master | pg_catalog
//! ```
//!
//! A CRS rule that matched words in prose (`union was a great select`, `Sleep(8
//! hours)`) is not confirmed: there is no quote break, no `union select`, and
//! `Sleep(8 hours)` calls nothing with SQL arguments... except that it does look
//! like a call; [`confirm`] therefore wants a call's argument to be a number, a
//! quote or a nested call, not a word list.
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
        let strong = fp
            .as_bytes()
            .iter()
            .any(|c| matches!(c, b's' | b'c' | b';' | b'U' | b'f' | b'v' | b'E' | b'T'));
        if strong || !prose_like(input) {
            return Some(Finding::new(Class::Sql, "libinjection fingerprint", whole));
        }
    }
    // Shapes libinjection lets through: a UNION SELECT, a schema name, a time or
    // error probe, and a quote that closes a string and goes on with SQL logic and
    // an operator or a comment.
    let rule = if union_select(input) {
        "UNION SELECT"
    } else if schema(input) {
        "schema name"
    } else if probe_call(input) {
        "time or error probe"
    } else if strict_quote_break(input) {
        "quote, then SQL logic"
    } else {
        return None;
    };
    Some(Finding::new(Class::Sql, rule, whole))
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

fn probe_call(s: &[u8]) -> bool {
    static PROBE_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(PROBES));
    called_with_sql(s, &PROBE_WORDS)
}

/// A quote (not an apostrophe inside a word), optional `)`, white space, a word of
/// SQL logic (`or`, `and`, `union`, `having`, `group`, `order`, `select`, `xor`),
/// and within the next 48 bytes an operator or a comment (`=`, `<`, `>`, `--`,
/// `#`, `/*`).
fn strict_quote_break(s: &[u8]) -> bool {
    const LOGIC: &[&str] = &[
        "or", "and", "union", "having", "group", "order", "select", "xor",
    ];
    for (i, &c) in s.iter().enumerate() {
        if !matches!(c, b'\'' | b'"' | b'`') {
            continue;
        }
        if i > 0
            && s[i - 1].is_ascii_alphabetic()
            && s.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic())
        {
            continue;
        }
        let mut k = i + 1;
        while k < s.len() && s[k] == b')' {
            k += 1;
        }
        let k = skip_space_and_comments(s, k);
        if i > 0 && s[i - 1].is_ascii_alphanumeric() && ends_in_comment(&s[i + 1..]) {
            // `' #`, `')--`, `'/**/#`: the rest of the application's query is cut off.
            return true;
        }
        if k == i + 1 {
            continue;
        }
        let end = k + s[k..]
            .iter()
            .take(8)
            .take_while(|c| c.is_ascii_alphabetic())
            .count();
        if end == k || !crate::text::one_of(&s[k..end], LOGIC) {
            continue;
        }
        let tail = &s[end..(end + 48).min(s.len())];
        if tail.iter().any(|c| matches!(c, b'=' | b'<' | b'>' | b'#'))
            || memchr::memmem::find(tail, b"--").is_some()
            || memchr::memmem::find(tail, b"/*").is_some()
        {
            return true;
        }
    }
    false
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
    if !may_match(input) {
        return false;
    }
    scan(input).is_some()
        || quote_break(input)
        || union_select(input)
        || call(input)
        || schema(input)
}

fn quote_break(s: &[u8]) -> bool {
    for (i, &c) in s.iter().enumerate() {
        if !matches!(c, b'\'' | b'"' | b'`') {
            continue;
        }
        let mut k = i + 1;
        while k < s.len() && s[k] == b')' {
            k += 1;
        }
        let k = skip_space(s, k);
        let Some(&n) = s.get(k) else { continue };
        if matches!(n, b';' | b'#' | b'=' | b'<' | b'>') {
            return true;
        }
        if starts_with_ci(s, k, b"--")
            || starts_with_ci(s, k, b"/*")
            || starts_with_ci(s, k, b"||")
            || starts_with_ci(s, k, b"&&")
        {
            return true;
        }
        let word_end = k + s[k..]
            .iter()
            .take(16)
            .take_while(|c| c.is_ascii_alphabetic())
            .count();
        if word_end > k && crate::text::one_of(&s[k..word_end], AFTER_QUOTE) {
            // `'s or` in prose is an apostrophe: a quote break has no letter before
            // it, or a digit or closing bracket.
            let before_letter = i > 0
                && s[i - 1].is_ascii_alphabetic()
                && s.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic());
            if !before_letter && (word_end == s.len() || !s[word_end].is_ascii_alphanumeric()) {
                // And something after the keyword that is not prose: a quote, a digit,
                // an operator or a parenthesis within the next few bytes.
                let tail = &s[word_end..(word_end + 24).min(s.len())];
                if tail.iter().any(|c| {
                    matches!(
                        c,
                        b'\'' | b'"' | b'0'..=b'9' | b'=' | b'(' | b'@' | b'-' | b'#' | b'*'
                    )
                }) {
                    return true;
                }
            }
        }
    }
    false
}

fn union_select(s: &[u8]) -> bool {
    let mut from = 0;
    while let Some(at) = find_ci(s, from, b"union") {
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

fn call(s: &[u8]) -> bool {
    static CALL_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(CALLS));
    called_with_sql(s, &CALL_WORDS)
}

/// Whether one of `words` occurs as a function name called with SQL arguments.
fn called_with_sql(s: &[u8], words: &Words) -> bool {
    words.find_all(s).any(|(_, at, end)| {
        if at > 0 && (s[at - 1].is_ascii_alphanumeric() || s[at - 1] == b'_') {
            return false;
        }
        let k = skip_space(s, end);
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

fn schema(s: &[u8]) -> bool {
    static SCHEMA_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(SCHEMA));
    SCHEMA_WORDS.any(s)
        || find_ci(s, 0, b"waitfor").is_some_and(|at| {
            let k = skip_space(s, at + 7);
            starts_with_ci(s, k, b"delay") || starts_with_ci(s, k, b"time")
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
            "Sleep(8 hours) or a union select committee",
            "the reunion selected a new board",
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
