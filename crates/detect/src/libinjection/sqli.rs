//! Palisade's own libinjection SQLi detector.
//!
//! It computes what C libinjection's `libinjection_sqli` computes, in the version
//! ModSecurity 3.0.9 bundles (libinjection commit `bfba51f`, "3.9.2" by its version
//! string; ModSecurity up to 3.0.15 bundles SQLi code that behaves the same): the
//! value is tokenized ([`lexer`]), the first tokens are folded into a fingerprint of at
//! most five type letters, the fingerprint is looked up among libinjection's known
//! SQLi fingerprints, and a few rules clear fingerprints that are too often benign.
//! This is done for up to five readings of the value: as it is (ANSI comments, then
//! MySQL comments if the first reading met `#` or `--x`), as if it followed a `'`
//! (the same two), and as if it followed a `"` (MySQL comments).
//!
//! The keyword and fingerprint table and the character classes are the ones the
//! `libinjectionrs` crate publishes (equal to C's `libinjection_sqli_data.h`; the
//! lexer's tests check the table's order). The algorithm is written here because the
//! crate's differs from C's (it does not merge multi-word keywords such as
//! `IS DISTINCT FROM`, treats NUL bytes and dollar quotes differently, and is quadratic
//! on long words full of dots).
//!
//! Every reading is linear in the length of the value: the lexer reads each byte a
//! bounded number of times (see [`lexer`]), and the fold keeps at most eight tokens.

mod lexer;

use lexer::{Lexer, Quote, Token};

/// The token type letters (C's `sqli_token_types`).
pub(super) mod kind {
    /// A keyword (`k`).
    pub const KEYWORD: u8 = b'k';
    /// `UNION` and friends (`U`).
    pub const UNION: u8 = b'U';
    /// `GROUP BY`, `ORDER BY`, ... (`B`).
    pub const GROUP: u8 = b'B';
    /// `SELECT`, `CASE`, ... (`E`).
    pub const EXPRESSION: u8 = b'E';
    /// A type name or cast (`t`).
    pub const SQLTYPE: u8 = b't';
    /// A function (`f`).
    pub const FUNCTION: u8 = b'f';
    /// A bare word (`n`).
    pub const BAREWORD: u8 = b'n';
    /// A number (`1`).
    pub const NUMBER: u8 = b'1';
    /// A `@variable` (`v`).
    pub const VARIABLE: u8 = b'v';
    /// A string (`s`).
    pub const STRING: u8 = b's';
    /// An operator (`o`).
    pub const OPERATOR: u8 = b'o';
    /// `AND`, `OR`, `&&`, `||` (`&`).
    pub const LOGIC_OPERATOR: u8 = b'&';
    /// A comment (`c`).
    pub const COMMENT: u8 = b'c';
    /// `COLLATE` (`A`).
    pub const COLLATE: u8 = b'A';
    /// `(`.
    pub const LEFTPARENS: u8 = b'(';
    /// `)`.
    pub const RIGHTPARENS: u8 = b')';
    /// `{`.
    pub const LEFTBRACE: u8 = b'{';
    /// `}`.
    pub const RIGHTBRACE: u8 = b'}';
    /// `.`.
    pub const DOT: u8 = b'.';
    /// `,`.
    pub const COMMA: u8 = b',';
    /// `:`.
    pub const COLON: u8 = b':';
    /// `;`.
    pub const SEMICOLON: u8 = b';';
    /// A Transact-SQL statement start (`T`).
    pub const TSQL: u8 = b'T';
    /// Any other byte (`?`).
    pub const UNKNOWN: u8 = b'?';
    /// Cannot be parsed reliably: always suspicious (`X`).
    pub const EVIL: u8 = b'X';
    /// A fingerprint entry of the keyword table (`F`), never a token.
    pub const FINGERPRINT: u8 = b'F';
    /// `\`.
    pub const BACKSLASH: u8 = b'\\';
}

use kind::*;

/// At most this many tokens make a fingerprint.
const MAX_TOKENS: usize = 5;

/// Runs the detection; `Some(fingerprint)` (1 to 5 type letters, NUL-padded) when the
/// value looks like SQL injection.
pub fn detect(s: &[u8]) -> Option<[u8; 8]> {
    if s.is_empty() {
        return None;
    }
    // As is, then as if after `'` (when the value holds one): ANSI comments, then
    // MySQL comments when the ANSI reading met `#` or `--x`.
    let single = memchr::memchr(b'\'', s).is_some().then_some(Quote::Single);
    for quote in [Some(Quote::None), single].into_iter().flatten() {
        let reading = Reading::new(s, quote, false);
        if reading.is_sqli() {
            return Some(reading.fingerprint);
        }
        if reading.wants_mysql {
            let reading = Reading::new(s, quote, true);
            if reading.is_sqli() {
                return Some(reading.fingerprint);
            }
        }
    }
    if memchr::memchr(b'"', s).is_some() {
        let reading = Reading::new(s, Quote::Double, true);
        if reading.is_sqli() {
            return Some(reading.fingerprint);
        }
    }
    None
}

/// One reading of the value: its folded tokens and fingerprint.
struct Reading<'a> {
    s: &'a [u8],
    tokens: [Token; 8],
    /// The fingerprint, NUL-padded.
    fingerprint: [u8; 8],
    /// Its length.
    len: usize,
    /// How many tokens the fold took from the lexer.
    stats_tokens: usize,
    /// The reading met `#` or an ANSI `--x` comment: try MySQL comments too.
    wants_mysql: bool,
}

impl<'a> Reading<'a> {
    /// Tokenizes and folds `s` as the reading `quote`/`mysql` sees it.
    fn new(s: &'a [u8], quote: Quote, mysql: bool) -> Self {
        let mut lexer = Lexer::new(s, quote, mysql);
        let mut tokens = [Token::EMPTY; 8];
        let mut len = fold(&mut lexer, &mut tokens);
        // PHP's backtick comment: an empty, unclosed `` ` `` word at the end.
        if len > 2 {
            let last = &mut tokens[len - 1];
            if last.kind == BAREWORD
                && last.str_open == b'`'
                && last.len == 0
                && last.str_close == 0
            {
                last.kind = COMMENT;
            }
        }
        let mut fingerprint = [0u8; 8];
        for (f, t) in fingerprint.iter_mut().zip(&tokens[..len]) {
            *f = t.kind;
        }
        if fingerprint[..len].contains(&EVIL) {
            fingerprint = [0; 8];
            fingerprint[0] = EVIL;
            tokens[0] = Token::EMPTY;
            tokens[0].assign(EVIL, 0, b"X");
            tokens[1].kind = 0;
            len = 1;
        }
        Reading {
            s,
            tokens,
            fingerprint,
            len,
            stats_tokens: lexer.stats_tokens,
            wants_mysql: lexer.stats_comment_ddx > 0 || lexer.stats_comment_hash > 0,
        }
    }

    /// The fingerprint's letters.
    fn letters(&self) -> &[u8] {
        &self.fingerprint[..self.len]
    }

    /// A known SQLi fingerprint, and not one of the benign shapes.
    fn is_sqli(&self) -> bool {
        self.blacklisted() && self.not_whitelisted()
    }

    /// The fingerprint is in libinjection's table (as `0` + its letters in upper case).
    fn blacklisted(&self) -> bool {
        if self.len == 0 {
            return false;
        }
        let mut key = [0u8; 8];
        key[0] = b'0';
        for (k, &f) in key[1..].iter_mut().zip(self.letters()) {
            *k = f.to_ascii_uppercase();
        }
        lexer::lookup(&key[..=self.len]) == FINGERPRINT
    }

    /// C's `libinjection_sqli_not_whitelist`: false for the fingerprints that are
    /// usually benign in their context.
    fn not_whitelisted(&self) -> bool {
        let t = &self.tokens;
        let fp = self.letters();
        if fp.len() > 1
            && fp[fp.len() - 1] == COMMENT
            && memchr::memmem::find(self.s, b"sp_password").is_some()
        {
            return true;
        }
        match fp.len() {
            2 => {
                if fp[1] == UNION {
                    // `1 union` alone is common; with folding or comments it is not.
                    return self.stats_tokens != 2;
                }
                if t[1].val[0] == b'#' {
                    return false;
                }
                if t[0].kind == BAREWORD && t[1].kind == COMMENT && t[1].val[0] != b'/' {
                    return false;
                }
                if t[0].kind == NUMBER && t[1].kind == COMMENT {
                    if t[1].val[0] == b'/' || self.stats_tokens > 2 {
                        return true;
                    }
                    // A real number before the comment: the byte after the first
                    // token's length (C reads the value's terminating NUL past its
                    // end) is white space or a control or high byte (signed char),
                    // or starts `/*` or `--`.
                    let at = |i: usize| self.s.get(i).copied().unwrap_or(0);
                    let next = at(t[0].len);
                    return i8::from_ne_bytes([next]) <= 32
                        || next == b'/' && at(t[0].len + 1) == b'*'
                        || next == b'-' && at(t[0].len + 1) == b'-';
                }
                // `1--` ending the value is a scan; `--` in prose is not.
                !(t[1].len > 2 && t[1].val[0] == b'-')
            }
            3 => {
                if fp == b"sos" || fp == b"s&s" {
                    // `…foo' + 'bar…`: no opening quote, no closing quote.
                    t[0].str_open == 0 && t[2].str_close == 0 && t[0].str_close == t[2].str_open
                } else if matches!(fp, b"s&n" | b"n&1" | b"1&1" | b"1&v" | b"1&s") {
                    // `sexy and 17` alone is benign.
                    self.stats_tokens != 3
                } else if t[1].kind == KEYWORD {
                    // Only `INTO OUTFILE`/`INTO DUMPFILE` keep a keyword in the middle.
                    t[1].len >= 5 && t[1].val[..4].eq_ignore_ascii_case(b"INTO")
                } else {
                    true
                }
            }
            _ => true,
        }
    }
}

/// The tokens that may open a value without counting: comments, `(`, type names and
/// unary operators.
fn skipped_at_start(t: &Token) -> bool {
    matches!(t.kind, COMMENT | LEFTPARENS | SQLTYPE) || t.is_unary_op()
}

/// The five-token shapes after which the fold starts over from the first token
/// (`1,(1)`, `a-(b)`, `1),(1`, `a)-(b`).
fn restart_shape(t: &[Token; 8]) -> bool {
    let k = |i: usize| t[i].kind;
    (k(0) == NUMBER
        && matches!(k(1), OPERATOR | COMMA)
        && k(2) == LEFTPARENS
        && k(3) == NUMBER
        && k(4) == RIGHTPARENS)
        || (k(0) == BAREWORD
            && k(1) == OPERATOR
            && k(2) == LEFTPARENS
            && matches!(k(3), BAREWORD | NUMBER)
            && k(4) == RIGHTPARENS)
        || (k(0) == NUMBER
            && k(1) == RIGHTPARENS
            && k(2) == COMMA
            && k(3) == LEFTPARENS
            && k(4) == NUMBER)
        || (k(0) == BAREWORD
            && k(1) == RIGHTPARENS
            && k(2) == OPERATOR
            && k(3) == LEFTPARENS
            && k(4) == BAREWORD)
}

/// Merges two word-like tokens into one multi-word keyword (`UNION ALL`,
/// `IS NOT DISTINCT FROM`, `AT TIME ZONE`, ...) when the table has the pair.
/// The tokens are `t[i]` and `t[i + 1]`; the merged one replaces `t[i]`.
fn merge_words(t: &mut [Token; 8], i: usize) -> bool {
    let (head, tail) = t.split_at_mut(i + 1);
    let (a, b) = (&mut head[i], &tail[0]);
    let first = matches!(
        a.kind,
        KEYWORD | BAREWORD | OPERATOR | UNION | FUNCTION | EXPRESSION | TSQL | SQLTYPE
    );
    let second = matches!(
        b.kind,
        KEYWORD
            | BAREWORD
            | OPERATOR
            | UNION
            | FUNCTION
            | EXPRESSION
            | TSQL
            | SQLTYPE
            | LOGIC_OPERATOR
    );
    let merged_len = a.len + b.len + 1;
    if !first || !second || merged_len >= lexer::TOKEN_SIZE {
        return false;
    }
    // Most pairs (`% u0027`) have no entry of their shape: ruled out before the
    // pair is built and hashed.
    let (head, tail) = (a.text(), b.text());
    let first_byte = head.first().copied().unwrap_or(b' ');
    let last_byte = tail.last().copied().unwrap_or(b' ');
    if !lexer::may_be_keyword(merged_len, first_byte, last_byte) {
        return false;
    }
    let mut merged = [0u8; lexer::TOKEN_SIZE];
    merged[..a.len].copy_from_slice(a.text());
    merged[a.len] = b' ';
    merged[a.len + 1..merged_len].copy_from_slice(b.text());
    let k = lexer::lookup(&merged[..merged_len]);
    if k == 0 {
        return false;
    }
    a.assign(k, a.pos, &merged[..merged_len]);
    true
}

/// Words that are column names as often as functions: before `(` they are functions.
const FUNCTION_LIKE_WORDS: [&[u8]; 11] = [
    b"USER_ID",
    b"USER_NAME",
    b"DATABASE",
    b"PASSWORD",
    b"USER",
    b"CURRENT_USER",
    b"CURRENT_DATE",
    b"CURRENT_TIME",
    b"CURRENT_TIMESTAMP",
    b"LOCALTIME",
    b"LOCALTIMESTAMP",
];

/// Reads tokens from the lexer into `t` and folds them (C's `libinjection_sqli_fold`);
/// returns how many tokens make the fingerprint.
///
/// `pos` is where the next token goes, `left` how many tokens are final. Each step
/// looks at the two (then three) tokens from `left` and either folds them (fewer
/// tokens, often starting over from the first) or makes the leftmost final.
fn fold(lexer: &mut Lexer<'_>, t: &mut [Token; 8]) -> usize {
    let mut last_comment = Token::EMPTY;
    let mut more;
    loop {
        more = lexer.next_token(&mut t[0]);
        if !skipped_at_start(&t[0]) {
            break;
        }
    }
    if !more {
        return 0;
    }
    let mut pos = 1;
    let mut left = 0;

    // Reads tokens into `t[pos..]` until `want` tokens follow `left` (comments are
    // held aside; only the last one, if it ends the value, comes back).
    let mut fetch = |t: &mut [Token; 8], more: &mut bool, pos: &mut usize, left: usize, want| {
        while *more && *pos <= MAX_TOKENS && *pos - left < want {
            *more = lexer.next_token(&mut t[*pos]);
            if *more {
                if t[*pos].kind == COMMENT {
                    last_comment = t[*pos];
                } else {
                    last_comment.kind = 0;
                    *pos += 1;
                }
            }
        }
    };

    loop {
        if pos >= MAX_TOKENS && restart_shape(t) {
            if pos > MAX_TOKENS {
                t[1] = t[MAX_TOKENS];
                pos = 2;
            } else {
                pos = 1;
            }
            left = 0;
        }
        if !more || left >= MAX_TOKENS {
            left = pos;
            break;
        }

        fetch(t, &mut more, &mut pos, left, 2);
        if pos - left < 2 {
            left = pos;
            continue;
        }

        // Two-token rules.
        let (a, b) = (t[left].kind, t[left + 1].kind);
        if a == STRING && b == STRING || a == SEMICOLON && b == SEMICOLON {
            // "foo" "bar" is one string; repeated semicolons are one.
            pos -= 1;
            continue;
        } else if matches!(a, OPERATOR | LOGIC_OPERATOR)
            && (t[left + 1].is_unary_op() || b == SQLTYPE)
        {
            pos -= 1;
            left = 0;
            continue;
        } else if a == LEFTPARENS && t[left + 1].is_unary_op() || merge_words(t, left) {
            // `(` then a unary operator; or two words that make one keyword.
            pos -= 1;
            left = left.saturating_sub(1);
            continue;
        } else if a == SEMICOLON
            && b == FUNCTION
            && t[left + 1].val[0].eq_ignore_ascii_case(&b'I')
            && t[left + 1].val[1].eq_ignore_ascii_case(&b'F')
        {
            // `; IF` starts a Transact-SQL statement.
            t[left + 1].kind = TSQL;
            continue;
        } else if matches!(a, BAREWORD | VARIABLE)
            && b == LEFTPARENS
            && FUNCTION_LIKE_WORDS.iter().any(|w| t[left].is(w))
        {
            t[left].kind = FUNCTION;
            continue;
        } else if a == KEYWORD && (t[left].is(b"IN") || t[left].is(b"NOT IN")) {
            // `IN (` is an operator; `IN` alone may start `IN BOOLEAN MODE`.
            t[left].kind = if b == LEFTPARENS { OPERATOR } else { BAREWORD };
            continue;
        } else if a == OPERATOR && (t[left].is(b"LIKE") || t[left].is(b"NOT LIKE")) {
            if b == LEFTPARENS {
                t[left].kind = FUNCTION;
            }
        } else if a == SQLTYPE
            && matches!(
                b,
                BAREWORD | NUMBER | SQLTYPE | LEFTPARENS | FUNCTION | VARIABLE | STRING
            )
        {
            t[left] = t[left + 1];
            pos -= 1;
            left = 0;
            continue;
        } else if a == COLLATE && b == BAREWORD {
            // Collation names with `_` are types.
            if t[left + 1].c_text().contains(&b'_') {
                t[left + 1].kind = SQLTYPE;
                left = 0;
            }
        } else if a == BACKSLASH {
            if t[left + 1].is_arithmetic_op() {
                t[left].kind = NUMBER;
            } else {
                t[left] = t[left + 1];
                pos -= 1;
            }
            left = 0;
            continue;
        } else if a == LEFTPARENS && b == LEFTPARENS || a == RIGHTPARENS && b == RIGHTPARENS {
            pos -= 1;
            left = 0;
            continue;
        } else if a == LEFTBRACE && b == BAREWORD {
            // MySQL's `{ ``.``.id }`: an empty word after `{` is evil; otherwise
            // `{foo expr}` is `expr`.
            if t[left + 1].len == 0 {
                t[left + 1].kind = EVIL;
                return left + 2;
            }
            left = 0;
            pos -= 2;
            continue;
        } else if b == RIGHTBRACE {
            pos -= 1;
            left = 0;
            continue;
        }

        fetch(t, &mut more, &mut pos, left, 3);
        if pos - left < 3 {
            left = pos;
            continue;
        }

        // Three-token rules.
        let (a, b, c) = (t[left].kind, t[left + 1].kind, t[left + 2].kind);
        let unary = t[left + 1].is_unary_op();
        if a == NUMBER && b == OPERATOR && c == NUMBER
            || a == OPERATOR && b != LEFTPARENS && c == OPERATOR
            || a == LOGIC_OPERATOR && c == LOGIC_OPERATOR
            || a == VARIABLE && b == OPERATOR && matches!(c, VARIABLE | NUMBER | BAREWORD)
            || matches!(a, BAREWORD | NUMBER) && b == OPERATOR && matches!(c, NUMBER | BAREWORD)
            || matches!(a, BAREWORD | NUMBER | VARIABLE | STRING)
                && b == OPERATOR
                && t[left + 1].c_text() == b"::"
                && c == SQLTYPE
            || matches!(a, BAREWORD | NUMBER | STRING | VARIABLE)
                && b == COMMA
                && matches!(c, NUMBER | BAREWORD | STRING | VARIABLE)
            || a == BAREWORD && b == DOT && c == BAREWORD
        {
            // An expression, a cast, a list or a qualified name: keep the first.
            pos -= 2;
            left = 0;
            continue;
        } else if matches!(a, EXPRESSION | GROUP | COMMA) && unary && c == LEFTPARENS
            || matches!(a, KEYWORD | EXPRESSION | GROUP)
                && unary
                && matches!(c, NUMBER | BAREWORD | VARIABLE | STRING | FUNCTION)
            || a == COMMA && unary && c == FUNCTION
            || a == EXPRESSION && b == DOT && c == BAREWORD
        {
            // Drop the unary operator (or the dot) in the middle.
            t[left + 1] = t[left + 2];
            pos -= 1;
            left = 0;
            continue;
        } else if a == COMMA && unary && matches!(c, NUMBER | BAREWORD | VARIABLE | STRING) {
            // `1,-1` is `1`: drop the operator and go back over the comma.
            t[left + 1] = t[left + 2];
            left = 0;
            pos -= 3;
            continue;
        } else if a == FUNCTION && b == LEFTPARENS && c != RIGHTPARENS && t[left].is(b"USER") {
            // `USER(x)` is no call of the argument-less USER().
            t[left].kind = BAREWORD;
        }

        left += 1;
    }

    if left < MAX_TOKENS && last_comment.kind == COMMENT {
        t[left] = last_comment;
        left += 1;
    }
    left.min(MAX_TOKENS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(input: &[u8]) -> Option<String> {
        detect(input).map(|f| {
            let len = f.iter().position(|&b| b == 0).unwrap_or(8);
            String::from_utf8_lossy(&f[..len]).into_owned()
        })
    }

    /// Every expected answer below is the one of the libinjection inside Debian's
    /// libmodsecurity 3.0.9 (called through `fuzz/differential/libinjection_diff.py`'s
    /// ctypes bindings).
    #[test]
    fn multi_word_keywords() {
        assert_eq!(fp(b"1' is distinct from '1").as_deref(), Some("sos"));
        assert_eq!(fp(b"1' is not distinct from '1").as_deref(), Some("sos"));
        assert_eq!(fp(b"1' or 1 is distinct from 2--").as_deref(), Some("s&1c"));
        assert_eq!(
            fp(b"1;create or replace view v as select 1").as_deref(),
            Some("1;Tnn")
        );
        assert_eq!(
            fp(b"1 at time zone 1 union select 1").as_deref(),
            Some("1k1UE")
        );
        assert_eq!(
            fp(b"match(a) against(1 in boolean mode) union select 1").as_deref(),
            Some("k(n)k")
        );
        assert_eq!(
            fp(b"1 lock in share mode union select 1").as_deref(),
            Some("1kUE1")
        );
        assert_eq!(fp(b"next value for x union select 1"), None);
    }

    #[test]
    fn nul_bytes_are_white_space() {
        assert_eq!(fp(b"1\0or 1=1").as_deref(), Some("1&1"));
        assert_eq!(fp(b"1'\0or\x001=1--").as_deref(), Some("s&1c"));
        assert_eq!(fp(b"1 or\xA01=1").as_deref(), Some("1&1"));
    }

    #[test]
    fn dollar_quotes() {
        // The closing tag is searched after the opening one (PyPI's
        // libinjection-python 1.1.6 searches from the wrong offset and says `vos`).
        assert_eq!(fp(b"@!$Y$x$Y$s"), None);
        assert_eq!(fp(b"$$x$$ or 1=1").as_deref(), Some("s&1"));
        assert_eq!(fp(b"$a$ $a$ or 1=1--").as_deref(), Some("s&1c"));
    }

    #[test]
    fn common_shapes() {
        assert_eq!(fp(b"1 union select 1,2").as_deref(), Some("1UE1"));
        assert_eq!(fp(b"x' or 'a'='a").as_deref(), Some("s&sos"));
        assert_eq!(fp(b"1' and sleep(5)#").as_deref(), Some("s&f(1"));
        assert_eq!(fp(b"select.1"), None);
        assert_eq!(fp(b"1 union"), None);
        assert_eq!(fp(b"/*!union*/ select"), Some("X".to_string()));
    }

    /// A long word full of dots costs one pass: the lexer remembers the word's end.
    #[test]
    fn long_dotted_words_give_one_token_each() {
        let value: Vec<u8> = b"select.".repeat(1 << 14);
        let mut lexer = Lexer::new(&value, Quote::None, false);
        let mut t = Token::EMPTY;
        let mut count = 0;
        while lexer.next_token(&mut t) {
            count += 1;
        }
        // `select` `.` for every repetition (the word is cut at each keyword
        // prefix); each cut reuses the measured end of the run of word bytes.
        assert_eq!(count, 2 * (1 << 14));
        assert_eq!(detect(&value), None);
    }
}
