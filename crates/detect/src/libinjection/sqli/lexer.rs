//! The SQLi tokenizer: cuts a value into libinjection's tokens, one at a time.
//!
//! Each byte selects a parser through the character classes of the `libinjectionrs`
//! crate ([`CHAR_MAP`], the same table as C libinjection's); the parsers follow C
//! libinjection (the copy ModSecurity 3.0.9 bundles) byte for byte, including its
//! quirks (see the comments on [`span`], [`cspan`], [`Lexer::parse_money`]).
//!
//! Cost: every parser reads the bytes of the token it makes plus a bounded look-ahead,
//! with one exception in C: a word (see [`Lexer::parse_word`]) is measured to the end of
//! its run of word bytes even when it is then cut short at a keyword prefix (`select.`),
//! and the rest of the run is measured again by the next word. The lexer remembers the
//! last run it measured, so every byte is measured once and a reading is linear in the
//! length of the value.

use super::kind;
use libinjectionrs::sqli::sqli_data::{CHAR_MAP, CharType, SQL_KEYWORDS};
use memchr::memmem;
use rustc_hash::FxHashMap;
use std::sync::LazyLock;

/// The size of a token's value buffer: a token keeps at most `TOKEN_SIZE - 1` bytes.
pub(super) const TOKEN_SIZE: usize = 32;

/// One token: its type letter (the fingerprint byte), where it starts, and up to
/// 31 bytes of its text.
#[derive(Clone, Copy, Debug)]
pub(super) struct Token {
    /// The type letter (`kind::*`), 0 for "no token".
    pub kind: u8,
    /// Offset of the token's text in the value.
    pub pos: usize,
    /// Bytes kept in `val` (at most 31).
    pub len: usize,
    /// The text, NUL-terminated after `len` bytes.
    pub val: [u8; TOKEN_SIZE],
    /// For strings: the opening quote (0 when the quote was only assumed).
    pub str_open: u8,
    /// For strings: the closing quote (0 when the value ended first).
    pub str_close: u8,
}

impl Token {
    /// No token.
    pub const EMPTY: Token = Token {
        kind: 0,
        pos: 0,
        len: 0,
        val: [0; TOKEN_SIZE],
        str_open: 0,
        str_close: 0,
    };

    /// Sets type, position and text (cut to 31 bytes).
    pub fn assign(&mut self, kind: u8, pos: usize, text: &[u8]) {
        let len = text.len().min(TOKEN_SIZE - 1);
        self.kind = kind;
        self.pos = pos;
        self.len = len;
        self.val[..len].copy_from_slice(&text[..len]);
        self.val[len] = 0;
    }

    /// Sets a one-byte token.
    fn assign_byte(&mut self, kind: u8, pos: usize, byte: u8) {
        self.assign(kind, pos, &[byte]);
    }

    /// The kept text.
    pub fn text(&self) -> &[u8] {
        &self.val[..self.len]
    }

    /// The kept text up to its first NUL byte (what C's string functions see).
    pub fn c_text(&self) -> &[u8] {
        let text = self.text();
        let end = memchr::memchr(0, text).unwrap_or(text.len());
        &text[..end]
    }

    /// The kept text equals the upper-case ASCII `word`, ignoring the case of a-z.
    pub fn is(&self, word: &[u8]) -> bool {
        self.text().eq_ignore_ascii_case(word)
    }

    /// An operator that can be unary: `+ - ! ~ !! NOT`.
    pub fn is_unary_op(&self) -> bool {
        self.kind == kind::OPERATOR
            && match self.len {
                1 => matches!(self.val[0], b'+' | b'-' | b'!' | b'~'),
                2 => self.val[..2] == *b"!!",
                3 => self.is(b"NOT"),
                _ => false,
            }
    }

    /// A one-byte arithmetic operator: `* / - + %`.
    pub fn is_arithmetic_op(&self) -> bool {
        self.kind == kind::OPERATOR
            && self.len == 1
            && matches!(self.val[0], b'*' | b'/' | b'-' | b'+' | b'%')
    }
}

/// The type of `word` in libinjection's keyword table (keywords, functions,
/// operators, multi-word phrases and fingerprints), ignoring the case of a-z; 0 when
/// it is not there. Keys longer than a token can hold are never looked up.
///
/// The table is strictly sorted and upper case (a test checks it), so C's binary
/// search finds exactly the entry equal to the upper-cased word; a hash map finds the
/// same one without the dozen comparisons of a search, which mattered: the fold looks
/// up every pair of adjacent words, and on long attack values the lookups were most of
/// the detector's time.
pub(super) fn lookup(word: &[u8]) -> u8 {
    if word.is_empty() || word.len() >= TOKEN_SIZE {
        return 0;
    }
    let mut key = [0u8; TOKEN_SIZE];
    for (k, &b) in key.iter_mut().zip(word) {
        *k = b.to_ascii_uppercase();
    }
    let key = &key[..word.len()];
    let (shape, bit) = keyword_shape(key);
    if KEYWORDS.shapes[shape] & bit == 0 {
        return 0;
    }
    KEYWORDS.words.get(key).copied().unwrap_or(0)
}

/// False when no word of the table has the shape (length, first and last byte, in any
/// case) of a word `len` bytes long that starts with `first` and ends with `last`:
/// [`lookup`] of such a word answers 0. Lets a caller rule a word out before it
/// builds it (the fold's pairs of adjacent words).
pub(super) fn may_be_keyword(len: usize, first: u8, last: u8) -> bool {
    if len == 0 || len >= TOKEN_SIZE {
        return false;
    }
    let first = usize::from(first.to_ascii_uppercase() & 0x3f);
    let bit = 1u64 << (last.to_ascii_uppercase() & 0x3f);
    KEYWORDS.shapes[len * 64 + first] & bit != 0
}

/// [`SQL_KEYWORDS`] as a map from word to type, and the shapes of its words.
struct Keywords {
    /// Word to type.
    words: FxHashMap<&'static [u8], u8>,
    /// A bit per (length, first byte, last byte) shape of the words, as
    /// [`keyword_shape`] places it: a word whose bit is clear is not in the table, so
    /// most words of a long value (`u0027`, `c0`) are ruled out without hashing.
    shapes: Vec<u64>,
}

/// Where the shape of the (upper-case, non-empty, shorter than [`TOKEN_SIZE`]) `key`
/// sits in [`Keywords::shapes`]: the word index from its length and the low 6 bits of
/// its first byte, the bit from the low 6 bits of its last byte.
fn keyword_shape(key: &[u8]) -> (usize, u64) {
    let first = usize::from(key[0] & 0x3f);
    let last = key[key.len() - 1] & 0x3f;
    (key.len() * 64 + first, 1 << last)
}

static KEYWORDS: LazyLock<Keywords> = LazyLock::new(|| {
    let mut shapes = vec![0u64; TOKEN_SIZE * 64];
    let mut words = FxHashMap::default();
    for k in SQL_KEYWORDS {
        let word = k.word.as_bytes();
        words.insert(word, k.token_type);
        if !word.is_empty() && word.len() < TOKEN_SIZE {
            let (shape, bit) = keyword_shape(word);
            shapes[shape] |= bit;
        }
    }
    Keywords { words, shapes }
});

/// C's `char_is_white`: the bytes that end a `--` comment opener or a number suffix.
fn is_white(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | 0xA0 | 0)
}

/// A 256-entry byte set.
type ByteSet = [bool; 256];

/// Builds a [`ByteSet`] from its members.
const fn byte_set(members: &[u8]) -> ByteSet {
    let mut set = [false; 256];
    let mut i = 0;
    while i < members.len() {
        set[members[i] as usize] = true;
        i += 1;
    }
    set
}

/// The bytes that end a word (NUL included).
const WORD_END: ByteSet = byte_set(b" []{}<>:\\?=@!#~+-*/&|^%(),';\t\n\x0B\x0C\r\"\xA0\0");
/// The bytes that end a `@variable` name (NUL included).
const VAR_END: ByteSet = byte_set(b" <>:\\?=@!#~+-*/&|^%(),';\t\n\x0B\x0C\r'`\"\0");
/// Digits and separators of a `$1,000.00` amount.
const MONEY: ByteSet = byte_set(b"0123456789.,");
/// ASCII letters (a `$tag$` name).
const LETTERS: ByteSet = byte_set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ");
/// Hexadecimal digits.
const HEX: ByteSet = byte_set(b"0123456789ABCDEFabcdef");
/// Binary digits.
const BINARY: ByteSet = byte_set(b"01");

/// The length of the prefix of `s` made of `accept` bytes. As in C (which asks
/// `strchr(accept, byte)`), a NUL byte is always accepted.
fn span(s: &[u8], accept: &ByteSet) -> usize {
    s.iter()
        .position(|&b| b != 0 && !accept[usize::from(b)])
        .unwrap_or(s.len())
}

/// The length of the prefix of `s` made of bytes not in `stop`; the sets passed hold
/// NUL, as C's `strchr` always finds it.
fn cspan(s: &[u8], stop: &ByteSet) -> usize {
    s.iter()
        .position(|&b| stop[usize::from(b)])
        .unwrap_or(s.len())
}

/// C's comparisons on `char`, which is signed: bytes 0x80-0xFF are negative.
fn signed(b: u8) -> i8 {
    i8::from_ne_bytes([b])
}

/// Which quote a reading assumes before the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Quote {
    /// The value as it is.
    None,
    /// As if after a `'`.
    Single,
    /// As if after a `"`.
    Double,
}

/// The tokenizer's state over one value, for one reading.
pub(super) struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
    quote: Quote,
    /// MySQL comments (`#` starts a comment, `--x` is two minus signs) rather than ANSI.
    mysql: bool,
    /// Tokens made so far.
    pub stats_tokens: usize,
    /// `--x` comments seen in the ANSI reading (they favour a MySQL re-reading).
    pub stats_comment_ddx: usize,
    /// `#` seen (counted twice in the MySQL reading, as C does).
    pub stats_comment_hash: usize,
    /// The last run of word bytes measured: `(start, end)`; any word that starts
    /// inside it ends at `end`.
    word_run: (usize, usize),
}

impl<'a> Lexer<'a> {
    /// A lexer at the start of `s`.
    pub fn new(s: &'a [u8], quote: Quote, mysql: bool) -> Self {
        Lexer {
            s,
            pos: 0,
            quote,
            mysql,
            stats_tokens: 0,
            stats_comment_ddx: 0,
            stats_comment_hash: 0,
            word_run: (0, 0),
        }
    }

    /// Makes the next token in `t`; false at the end of the value (then `t` is empty).
    pub fn next_token(&mut self, t: &mut Token) -> bool {
        if self.s.is_empty() {
            return false;
        }
        *t = Token::EMPTY;
        if self.pos == 0 && self.quote != Quote::None {
            let delim = if self.quote == Quote::Single {
                b'\''
            } else {
                b'"'
            };
            self.pos = self.string_core(t, 0, delim, 0);
            self.stats_tokens += 1;
            return true;
        }
        while self.pos < self.s.len() {
            self.pos = self.dispatch(t, self.pos);
            if t.kind != 0 {
                self.stats_tokens += 1;
                return true;
            }
        }
        false
    }

    /// Runs the parser of the byte at `at`; returns the position after what it read.
    fn dispatch(&mut self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        match CHAR_MAP[usize::from(s[at])] {
            CharType::White => at + 1,
            CharType::Bang | CharType::Op2 => self.parse_operator2(t, at),
            CharType::String => self.string_core(t, at, s[at], 1),
            CharType::Hash => self.parse_hash(t, at),
            CharType::Money => self.parse_money(t, at),
            CharType::Op1 | CharType::Unary => operator1(t, s, at),
            CharType::LeftParens
            | CharType::RightParens
            | CharType::Comma
            | CharType::Semicolon
            | CharType::LeftBrace
            | CharType::RightBrace => {
                t.assign_byte(s[at], at, s[at]);
                at + 1
            }
            CharType::Dash => self.parse_dash(t, at),
            CharType::Number => self.parse_number(t, at),
            CharType::Slash => self.parse_slash(t, at),
            CharType::Variable => self.parse_var(t, at),
            CharType::Word => self.parse_word(t, at),
            CharType::BString => self.parse_bin_or_hex(t, at, &BINARY),
            CharType::XString => self.parse_bin_or_hex(t, at, &HEX),
            CharType::EString => self.parse_estring(t, at),
            CharType::NQString => self.parse_nqstring(t, at),
            CharType::QString => self.parse_qstring(t, at, 0),
            CharType::UString => self.parse_ustring(t, at),
            CharType::BWord => self.parse_bword(t, at),
            CharType::Backslash => self.parse_backslash(t, at),
            CharType::Tick => self.parse_tick(t, at),
            CharType::Other => {
                t.assign_byte(kind::UNKNOWN, at, s[at]);
                at + 1
            }
        }
    }

    /// A comment to the end of the line.
    fn eol_comment(&self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        match memchr::memchr(b'\n', &s[at..]) {
            None => {
                t.assign(kind::COMMENT, at, &s[at..]);
                s.len()
            }
            Some(n) => {
                t.assign(kind::COMMENT, at, &s[at..at + n]);
                at + n + 1
            }
        }
    }

    /// `#`: an operator in ANSI, a comment in MySQL.
    fn parse_hash(&mut self, t: &mut Token, at: usize) -> usize {
        self.stats_comment_hash += 1;
        if self.mysql {
            self.stats_comment_hash += 1;
            self.eol_comment(t, at)
        } else {
            t.assign_byte(kind::OPERATOR, at, b'#');
            at + 1
        }
    }

    /// `-`: a minus, or a `--` comment (always before white space or at the end,
    /// otherwise only in ANSI).
    fn parse_dash(&mut self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        let dash2 = s.get(at + 1) == Some(&b'-');
        if dash2 && at + 2 < s.len() && is_white(s[at + 2]) || dash2 && at + 2 == s.len() {
            self.eol_comment(t, at)
        } else if dash2 && !self.mysql {
            self.stats_comment_ddx += 1;
            self.eol_comment(t, at)
        } else {
            t.assign_byte(kind::OPERATOR, at, b'-');
            at + 1
        }
    }

    /// `/`: an operator, or a `/* */` comment, which is "evil" when it holds another
    /// `/*` (PostgreSQL nests them) or is a MySQL `/*!` comment.
    fn parse_slash(&mut self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        if s.get(at + 1) != Some(&b'*') {
            return operator1(t, s, at);
        }
        let close = memmem::find(&s[at + 2..], b"*/").map(|n| at + 2 + n);
        let clen = close.map_or(s.len() - at, |c| c + 2 - at);
        // C looks for `/*` from the third byte up to and including the `*` of `*/`.
        let nested = close.is_some_and(|c| memmem::find(&s[at + 2..=c], b"/*").is_some());
        let mysql_comment = s.get(at + 2) == Some(&b'!');
        let k = if nested || mysql_comment {
            kind::EVIL
        } else {
            kind::COMMENT
        };
        t.assign(k, at, &s[at..at + clen]);
        at + clen
    }

    /// `\`: MySQL's `\N` (NULL) is a number; otherwise a backslash token.
    fn parse_backslash(&self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        if s.get(at + 1) == Some(&b'N') {
            t.assign(kind::NUMBER, at, &s[at..at + 2]);
            at + 2
        } else {
            t.assign_byte(kind::BACKSLASH, at, b'\\');
            at + 1
        }
    }

    /// A byte that may start a two-byte operator (`!= <= || :=` ...), `<=>`, or `:`.
    fn parse_operator2(&self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        if at + 1 >= s.len() {
            return operator1(t, s, at);
        }
        if s[at..].starts_with(b"<=>") {
            t.assign(kind::OPERATOR, at, &s[at..at + 3]);
            return at + 3;
        }
        let k = lookup(&s[at..at + 2]);
        if k != 0 {
            t.assign(k, at, &s[at..at + 2]);
            at + 2
        } else if s[at] == b':' {
            t.assign(kind::COLON, at, &s[at..at + 1]);
            at + 1
        } else {
            operator1(t, s, at)
        }
    }

    /// A string that starts `offset` bytes after `at` (0: the quote is assumed),
    /// closed by `delim` that is neither backslash-escaped nor doubled.
    fn string_core(&self, t: &mut Token, at: usize, delim: u8, offset: usize) -> usize {
        let s = self.s;
        let start = at + offset;
        t.str_open = if offset > 0 { delim } else { 0 };
        let mut from = start;
        loop {
            let Some(q) = memchr::memchr(delim, &s[from..]).map(|n| from + n) else {
                t.assign(kind::STRING, start, &s[start..]);
                t.str_close = 0;
                return s.len();
            };
            let backslashes = s[start..q].iter().rev().take_while(|&&b| b == b'\\');
            if backslashes.count() % 2 == 1 {
                from = q + 1;
            } else if s.get(q + 1) == Some(&delim) {
                from = q + 2;
            } else {
                t.assign(kind::STRING, start, &s[start..q]);
                t.str_close = delim;
                return q + 1;
            }
        }
    }

    /// `E'…'` (PostgreSQL) and `N'…'`: a string, else a word.
    fn parse_estring(&mut self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        if at + 2 >= s.len() || s[at + 1] != b'\'' {
            return self.parse_word(t, at);
        }
        self.string_core(t, at, b'\'', 2)
    }

    /// `U&'…'` (a Unicode string), else a word.
    fn parse_ustring(&mut self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        if at + 2 < s.len() && s[at + 1] == b'&' && s[at + 2] == b'\'' {
            let next = self.string_core(t, at + 2, b'\'', 1);
            t.str_open = b'u';
            if t.str_close == b'\'' {
                t.str_close = b'u';
            }
            next
        } else {
            self.parse_word(t, at)
        }
    }

    /// `N'…'` (MySQL), `nq'…'` (Oracle), else a word.
    fn parse_nqstring(&mut self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        if at + 2 < s.len() && s[at + 1] == b'\'' {
            return self.parse_estring(t, at);
        }
        self.parse_qstring(t, at, 1)
    }

    /// Oracle's `q'X…X'` (`X` any byte above space; brackets close with their pair),
    /// `offset` bytes after `at`; else a word from `at`.
    fn parse_qstring(&mut self, t: &mut Token, at: usize, offset: usize) -> usize {
        let s = self.s;
        let p = at + offset;
        if p >= s.len() || !matches!(s[p], b'q' | b'Q') || p + 2 >= s.len() || s[p + 1] != b'\'' {
            return self.parse_word(t, at);
        }
        let close = match s[p + 2] {
            c if signed(c) < 33 => return self.parse_word(t, at),
            b'(' => b')',
            b'[' => b']',
            b'{' => b'}',
            b'<' => b'>',
            c => c,
        };
        let body = p + 3;
        t.str_open = b'q';
        match memmem::find(&s[body..], &[close, b'\'']) {
            None => {
                t.assign(kind::STRING, body, &s[body..]);
                t.str_close = 0;
                s.len()
            }
            Some(n) => {
                t.assign(kind::STRING, body, &s[body..body + n]);
                t.str_close = b'q';
                body + n + 2
            }
        }
    }

    /// `b'0101'` and `x'4F'`: a number, else a word.
    fn parse_bin_or_hex(&mut self, t: &mut Token, at: usize, digits: &ByteSet) -> usize {
        let s = self.s;
        if at + 2 >= s.len() || s[at + 1] != b'\'' {
            return self.parse_word(t, at);
        }
        let n = span(&s[at + 2..], digits);
        if at + 2 + n >= s.len() || s[at + 2 + n] != b'\'' {
            return self.parse_word(t, at);
        }
        t.assign(kind::NUMBER, at, &s[at..at + n + 3]);
        at + n + 3
    }

    /// SQL Server's `[name]`: a bare word up to `]` (or the end).
    fn parse_bword(&self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        match memchr::memchr(b']', &s[at..]) {
            None => {
                t.assign(kind::BAREWORD, at, &s[at..]);
                s.len()
            }
            Some(n) => {
                t.assign(kind::BAREWORD, at, &s[at..=at + n]);
                at + n + 1
            }
        }
    }

    /// A word: the bytes up to the next [`WORD_END`] byte. If a `.` or `` ` `` among its
    /// first 31 bytes follows a prefix that is a keyword (`select.1`), the token is that
    /// prefix; otherwise the whole word, typed by the keyword table when it is shorter
    /// than 32 bytes.
    fn parse_word(&mut self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        let (run_start, run_end) = self.word_run;
        let end = if run_start <= at && at < run_end {
            run_end
        } else {
            at + cspan(&s[at..], &WORD_END)
        };
        self.word_run = (at, end);
        t.assign(kind::BAREWORD, at, &s[at..end]);
        for i in 0..t.len {
            if matches!(t.val[i], b'.' | b'`') {
                let k = lookup(&t.val[..i]);
                if k != 0 && k != kind::BAREWORD {
                    *t = Token::EMPTY;
                    t.assign(k, at, &s[at..at + i]);
                    return at + i;
                }
            }
        }
        if end - at < TOKEN_SIZE {
            t.kind = match lookup(t.text()) {
                0 => kind::BAREWORD,
                k => k,
            };
        }
        end
    }

    /// `` `name` `` (MySQL): a bare word, or a function when the name is one.
    fn parse_tick(&self, t: &mut Token, at: usize) -> usize {
        let next = self.string_core(t, at, b'`', 1);
        t.kind = if lookup(t.text()) == kind::FUNCTION {
            kind::FUNCTION
        } else {
            kind::BAREWORD
        };
        next
    }

    /// `@name`, `@@name`, `` @@`name` ``, `@'name'`.
    fn parse_var(&mut self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        let mut p = at + 1;
        if s.get(p) == Some(&b'@') {
            p += 1;
        }
        match s.get(p) {
            Some(b'`') => {
                let next = self.parse_tick(t, p);
                t.kind = kind::VARIABLE;
                return next;
            }
            Some(&q @ (b'\'' | b'"')) => {
                let next = self.string_core(t, p, q, 1);
                t.kind = kind::VARIABLE;
                return next;
            }
            _ => {}
        }
        let n = cspan(&s[p..], &VAR_END);
        t.assign(kind::VARIABLE, p, &s[p..p + n]);
        p + n
    }

    /// `$`: an amount (`$1,000.00`), a PostgreSQL dollar-quoted string (`$$…$$`,
    /// `$tag$…$tag$`), or a bare `$`. As in C, the digit and letter scans accept NUL
    /// bytes.
    fn parse_money(&mut self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        if at + 1 == s.len() {
            t.assign_byte(kind::BAREWORD, at, b'$');
            return s.len();
        }
        let n = span(&s[at + 1..], &MONEY);
        if n == 1 && s[at + 1] == b'.' {
            return self.parse_word(t, at);
        }
        if n > 0 {
            t.assign(kind::NUMBER, at, &s[at..at + 1 + n]);
            return at + 1 + n;
        }
        let (body, tag_len) = if s[at + 1] == b'$' {
            (at + 2, 2)
        } else {
            let n = span(&s[at + 1..], &LETTERS);
            if n == 0 || at + n + 1 == s.len() || s[at + n + 1] != b'$' {
                t.assign_byte(kind::BAREWORD, at, b'$');
                return at + 1;
            }
            (at + n + 2, n + 2)
        };
        let tag = &s[at..at + tag_len];
        t.str_open = b'$';
        match memmem::find(&s[body..], tag) {
            None => {
                t.assign(kind::STRING, body, &s[body..]);
                t.str_close = 0;
                s.len()
            }
            Some(n) => {
                t.assign(kind::STRING, body, &s[body..body + n]);
                t.str_close = b'$';
                body + n + tag_len
            }
        }
    }

    /// A number: `0x1F`, `0b01`, `12`, `1.5`, `.5`, `1e-3`, `1.5f`; a lone `.` is a dot;
    /// `1e` (an exponent without digits) is a bare word.
    fn parse_number(&self, t: &mut Token, at: usize) -> usize {
        let s = self.s;
        if s[at] == b'0' && at + 1 < s.len() {
            let digits = match s[at + 1] {
                b'x' | b'X' => Some(&HEX),
                b'b' | b'B' => Some(&BINARY),
                _ => None,
            };
            if let Some(digits) = digits {
                let n = span(&s[at + 2..], digits);
                let k = if n == 0 { kind::BAREWORD } else { kind::NUMBER };
                t.assign(k, at, &s[at..at + 2 + n]);
                return at + 2 + n;
            }
        }
        let digit = |p: usize| s.get(p).is_some_and(u8::is_ascii_digit);
        let mut p = at;
        while digit(p) {
            p += 1;
        }
        if s.get(p) == Some(&b'.') {
            p += 1;
            while digit(p) {
                p += 1;
            }
            if p - at == 1 {
                t.assign_byte(kind::DOT, at, b'.');
                return p;
            }
        }
        let mut exponent_without_digits = false;
        if matches!(s.get(p), Some(b'e' | b'E')) {
            p += 1;
            if matches!(s.get(p), Some(b'+' | b'-')) {
                p += 1;
            }
            exponent_without_digits = !digit(p);
            while digit(p) {
                p += 1;
            }
        }
        if matches!(s.get(p), Some(b'd' | b'D' | b'f' | b'F')) {
            match s.get(p + 1) {
                None => p += 1,
                Some(&c) if is_white(c) || matches!(c, b';' | b'u' | b'U') => p += 1,
                Some(_) => {}
            }
        }
        let k = if exponent_without_digits {
            kind::BAREWORD
        } else {
            kind::NUMBER
        };
        t.assign(k, at, &s[at..p]);
        p
    }
}

/// A one-byte operator.
fn operator1(t: &mut Token, s: &[u8], at: usize) -> usize {
    t.assign_byte(kind::OPERATOR, at, s[at]);
    at + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(s: &[u8], quote: Quote, mysql: bool) -> Vec<(char, Vec<u8>)> {
        let mut lexer = Lexer::new(s, quote, mysql);
        let mut t = Token::EMPTY;
        let mut out = Vec::new();
        while lexer.next_token(&mut t) {
            out.push((char::from(t.kind), t.text().to_vec()));
        }
        out
    }

    fn kinds(s: &[u8]) -> String {
        tokens(s, Quote::None, false)
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    /// The shape filter in front of the map never hides a word of the table: every
    /// table word (in any case) and every generated word gets the map's own answer.
    #[test]
    fn lookup_agrees_with_the_map() {
        let direct = |w: &[u8]| {
            let upper = w.to_ascii_uppercase();
            KEYWORDS.words.get(&upper[..]).copied().unwrap_or(0)
        };
        for k in SQL_KEYWORDS {
            let w = k.word.as_bytes();
            if !w.is_empty() && w.len() < TOKEN_SIZE {
                assert_eq!(lookup(w), k.token_type, "{}", k.word);
                assert_eq!(lookup(&w.to_ascii_lowercase()), k.token_type, "{}", k.word);
            }
        }
        let alphabet = b"aeinorstuABCDU0127&|()-_. \x80\xff";
        let mut rng = crate::testkit::XorShift(0x5e1e_c7ed);
        for _ in 0..200_000 {
            let len = 1 + rng.below(9);
            let w: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect();
            assert_eq!(lookup(&w), direct(&w), "{w:?}");
            if direct(&w) != 0 {
                assert!(may_be_keyword(w.len(), w[0], w[w.len() - 1]), "{w:?}");
            }
        }
        for k in SQL_KEYWORDS {
            let w = k.word.as_bytes();
            if !w.is_empty() && w.len() < TOKEN_SIZE {
                let lower = w.to_ascii_lowercase();
                assert!(may_be_keyword(w.len(), w[0], w[w.len() - 1]), "{}", k.word);
                assert!(
                    may_be_keyword(w.len(), lower[0], lower[w.len() - 1]),
                    "{}",
                    k.word
                );
            }
        }
    }

    #[test]
    fn keyword_table_is_sorted_upper_case_ascii() {
        // C's lookup is a binary search with byte order over the upper-cased word;
        // `lookup`'s exact match in a map finds the same entries exactly when the
        // table is strictly sorted and holds no lower-case letter.
        assert!(
            SQL_KEYWORDS
                .windows(2)
                .all(|w| w[0].word.as_bytes() < w[1].word.as_bytes())
        );
        assert!(SQL_KEYWORDS.iter().all(|k| {
            !k.word.is_empty()
                && k.word.len() < TOKEN_SIZE
                && k.word
                    .bytes()
                    .all(|b| b.is_ascii() && !b.is_ascii_lowercase())
        }));
        for k in SQL_KEYWORDS {
            assert_eq!(lookup(k.word.as_bytes()), k.token_type, "{}", k.word);
            assert_eq!(lookup(k.word.to_ascii_lowercase().as_bytes()), k.token_type);
        }
        assert_eq!(lookup(b"select"), b'E');
        assert_eq!(lookup(b"UNION ALL"), b'U');
        assert_eq!(lookup(b"is distinct from"), b'o');
        assert_eq!(lookup(b"sel\0ect"), 0);
        assert_eq!(lookup(b""), 0);
    }

    #[test]
    fn words_and_keyword_prefixes() {
        assert_eq!(kinds(b"select.1"), "E1");
        assert_eq!(kinds(b"select.x"), "E.n");
        assert_eq!(kinds(b"a.b.c"), "n");
        assert_eq!(kinds(b"select`x`"), "En");
        // A dot beyond the 31 kept bytes is not looked at.
        let mut long = vec![b'a'; 40];
        long.extend_from_slice(b"select.x");
        assert_eq!(kinds(&long), "n");
        // The word run is remembered across a split: `x.y` after `select.`.
        assert_eq!(
            tokens(b"select.x.y z", Quote::None, false),
            vec![
                ('E', b"select".to_vec()),
                ('.', b".".to_vec()),
                ('n', b"x.y".to_vec()),
                ('n', b"z".to_vec()),
            ]
        );
    }

    #[test]
    fn strings_and_quotes() {
        let t = tokens(b"a' or 'b''c\\'d", Quote::Single, false);
        assert_eq!(t[0], ('s', b"a".to_vec()));
        assert_eq!(t[2], ('s', b"b''c\\'d".to_vec()));
        assert_eq!(
            kinds(b"q'[x]' N'y' E'z' U&'w' b'01' x'4f' $$x$$ $t$y$t$"),
            "ssss11ss"
        );
        assert_eq!(kinds(b"$1,000 $. $x $x$ab"), "1nnns");
        assert_eq!(kinds(b"@@version @`x` @'y' @"), "vvvv");
    }

    #[test]
    fn comments_and_operators() {
        assert_eq!(kinds(b"1 -- x"), "1c");
        assert_eq!(kinds(b"1 --x"), "1c");
        assert_eq!(
            tokens(b"1 --x", Quote::None, true)
                .iter()
                .map(|t| t.0)
                .collect::<String>(),
            "1oon"
        );
        assert_eq!(kinds(b"1 # x"), "1on");
        assert_eq!(kinds(b"/* x */ /*! x */ /* /* */"), "cXX");
        assert_eq!(kinds(b"a<=>b a!=b a:b a:=b"), "nonnonn:nnon");
        assert_eq!(kinds(b"\\N \\1"), "1\\1");
    }

    #[test]
    fn numbers() {
        assert_eq!(
            kinds(b"0x 0x1f 0b2 .5 . 1e 1e5 1.5f 1fUNION 12FROM"),
            "n1n11.n111U1k"
        );
        // NUL is accepted by C's digit scans.
        assert_eq!(
            tokens(b"0x\0\0", Quote::None, false)[0],
            ('1', b"0x\0\0".to_vec())
        );
    }
}
