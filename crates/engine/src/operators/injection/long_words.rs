//! `@detectSQLi` without the crate's quadratic cost on long words.
//!
//! # The cost
//!
//! `libinjectionrs` 0.1.1 reads a *word* (a run of bytes up to the next byte of
//! [`WORD_END`]) in one piece, then, for every `.` and `` ` `` inside it, validates the
//! whole prefix before that byte as UTF-8 and looks an upper-case copy of it up among
//! the SQL keywords (a word such as `DBMS_PIPE.RECEIVE_MESSAGE` or `select.` ends at
//! such a byte when the prefix is a keyword). That is O(i) work at offset i: a word
//! of n bytes with a dot every other byte costs O(n²); a 1 MiB `a.a.a.…` took 53 s.
//!
//! # The rewrite
//!
//! A prefix of 32 bytes or more is never a keyword (the longest, checked by a test
//! against the crate's own table, has 29 bytes), a token keeps only its first 31
//! bytes, and a word of 32 bytes or more is never looked up as a whole. So inside a
//! word, a `.` or `` ` `` at word offset 32 or beyond changes nothing but the cost:
//! the detector is run on a copy of the input where such bytes are replaced by
//! [`FILLER`] (0x01), which ends no word, is not a letter, `$`, quote, backslash or
//! digit, is ASCII (the input's UTF-8 validity is kept) and is not in `sp_password`.
//!
//! Which bytes are "inside a word" depends on how the crate's tokenizer cuts the input,
//! and that differs between the readings `detect` makes (as is, as if after `'`, as if
//! after `"`, ANSI or MySQL comments): the same bytes can be a word in one reading and
//! a number, a backtick identifier or string content in another. So this module runs
//! those readings itself, in the crate's order, each on its own rewritten copy, and
//! keeps a copy only after checking it against the crate's own tokenizer:
//!
//! 1. The copy replaces every `.` and `` ` `` that sits 32 bytes or more into its run of
//!    word bytes (the bytes outside [`WORD_END`]), so at least 32 bytes after any word
//!    start.
//! 2. The crate evaluates the reading on the copy; `stats_tokens` tells how many tokens
//!    its fold took from the tokenizer (k).
//! 3. The crate's tokenizer runs again on the copy, with the reading's flags, for k + 1
//!    tokens. Every replaced byte before the start of token k + 1 (plus the two bytes of
//!    look-ahead any parser takes past a token's end) must lie inside one of the first
//!    k tokens that is a long word: produced by the word parser (a bareword with no
//!    quote, starting with a byte that starts a word), of 31 bytes or more (so not cut
//!    at a keyword prefix, which is at most 29 bytes), whose run of word bytes reaches
//!    the replaced byte, at least 32 bytes after the word's start.
//! 4. If one is not, those bytes get their original value back and the check runs
//!    again (up to [`ATTEMPTS`] times); after that the reading runs on the original.
//!
//! Why a checked copy gives the crate's answer on the original, token by token: the
//! tokenizer is deterministic and moves forward; assume the first i tokens and the
//! position after them are the same on both inputs. The bytes it skips before token
//! i + 1 hold no replaced byte (a replaced byte there lies in no word: the check
//! fails). The parser that makes token i + 1 starts on an unchanged byte (a replaced
//! byte is never a token start). If token i + 1 is a checked long word, the word
//! parser reads the same bytes except replaced ones, which it treats alike before and
//! after (none ends a word; a `.` or `` ` `` at offset 32 or more finds no keyword
//! prefix, and the filler is not looked at); it keeps the same 31 bytes, makes no
//! whole-word lookup and stops at the same run end. Any other parser reads only bytes
//! of its own token plus at most two past its end, none of them replaced (they would
//! lie outside a long word), except two scans that read further and treat the filler
//! like `.` and `` ` ``: the word parser's scan to the end of a run (a split word reads
//! it only for "ends a word?"), and the money parser's scan of letters after `$`
//! ("letter?", then "is it `$`?"). So token i + 1 and the next position are the same.
//! By induction the fold sees the same k tokens, and the tokenizer's comment counts
//! (which choose the MySQL re-reading) are the same. What the detector then reads of
//! the input itself is unchanged too: whether it holds `'` or `"`, whether it holds
//! `sp_password` (no replaced byte can be part of it) and is valid UTF-8 (ASCII
//! replaced by ASCII), and the byte right after the first token's length (an index
//! of at most 31, and replaced bytes sit at 32 or beyond).
//!
//! The differential tests below run the wrapper against the plain crate on many
//! random and built inputs, and count how often the checked copy was kept.
//!
//! # What the rewrite cannot fix: the word scan
//!
//! The crate's word parser also scans every word to the end of its run of word bytes
//! *before* it looks for a keyword prefix, even when it then keeps only that prefix
//! (`or` out of `or.or.or.…`). Each such cut word costs the length of the rest of the
//! run, and the fold can take any number of them (`or . or` folds into `or`), so
//! `or.or.or.…`, `and.and.…` and `or\`or\`…` are quadratic too: 10 s at 64 KiB. No
//! byte of those inputs can change without changing a token, so no rewrite helps.
//! Instead, before the crate runs on an input or a copy, [`word_scan_exceeds`] bounds
//! that work: the number of `.` and `` ` `` that end a keyword prefix of a possible
//! word, times the length of their run. Past [`word_scan_limit`] (four bytes per input
//! byte, plus some 4 ms worth) the crate is not given that input. A copy, where such
//! bytes are left only near the start of each run, usually stays below the limit, and
//! when its check passes the answer is the crate's even for an input that is over.
//! When no copy passes, a reading whose input is over is reported as SQL injection
//! with libinjection's fingerprint for evil input, `X`: an input that packs thousands
//! of keyword-dot pairs into one unbroken run is an attack on the detector, and
//! answering it in linear time beats answering it in minutes. This is the one place
//! where the answer can differ from the crate's (the crate, given minutes, might call
//! such an input harmless); ordinary values are far below the limit.

use libinjectionrs::sqli::sqli_data::{CharType, get_char_type};
use libinjectionrs::sqli::{SqliTokenizer, Token, TokenType};
use libinjectionrs::{SqliFlags, SqliState};

/// The bytes at which the crate's word parser ends a word.
pub(super) const WORD_END: &[u8] = b" []{}<>:\\?=@!#~+-*/&|^%(),';\t\n\x0B\x0C\r\"\xA0\0";

/// Word offset from which a `.` or `` ` `` can be replaced.
const DEEP: usize = 32;

/// What replaces them.
const FILLER: u8 = 0x01;

/// Checks of a rewritten copy per reading before falling back to the original.
const ATTEMPTS: usize = 3;

/// The most word-scan work (bytes the crate's word parser would scan past cut words)
/// an input of `len` bytes may need before it is reported without running the crate:
/// four bytes per input byte (the crate then spends at most some 60 ns per byte on
/// it) plus 256 Ki (some 4 ms).
pub(super) fn word_scan_limit(len: usize) -> u64 {
    4 * len as u64 + (1 << 18)
}

/// The fingerprint reported for such an input: libinjection's mark of evil input.
const EVIL: [u8; 8] = *b"X\0\0\0\0\0\0\0";

/// `WORD_END` as a table.
const ENDS_WORD: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < WORD_END.len() {
        t[WORD_END[i] as usize] = true;
        i += 1;
    }
    t
};

/// How a reading was evaluated (for the tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Path {
    /// Nothing to replace: the crate ran on the input.
    Plain,
    /// On a checked rewritten copy.
    Rewritten,
    /// The copies did not pass the check: on the original.
    Fallback,
    /// Too much word-scan work: reported as SQL injection without the crate.
    Guarded,
}

/// One reading's result.
struct Reading {
    sqli: bool,
    fingerprint: [u8; 8],
    /// The tokenizer saw `--` followed by a non-space or `#`: the crate reads again
    /// with MySQL comments.
    reparse: bool,
    path: Path,
}

/// The crate's `SqliState::detect`, reading by reading, each on a checked rewritten
/// copy where possible. Returns the fingerprint when the input is SQL injection;
/// `path` hears how each reading was evaluated (for the tests).
pub(super) fn detect(input: &[u8], path: &mut impl FnMut(Path)) -> Option<[u8; 8]> {
    let candidates = candidates(input);
    if candidates.is_empty() {
        if word_scan_exceeds(input, word_scan_limit(input.len())) {
            path(Path::Guarded);
            return Some(EVIL);
        }
        path(Path::Plain);
        let mut state = SqliState::new(input, SqliFlags::FLAG_NONE);
        return state.detect().then_some(state.fingerprint);
    }
    let expensive = word_scan_exceeds(input, word_scan_limit(input.len()));
    let mut read = |flags: SqliFlags| {
        let r = reading(input, &candidates, flags, expensive);
        path(r.path);
        r
    };
    // The order and flags of the crate's `detect`: as is (ANSI, then MySQL when
    // comments call for it), as if after a single quote (the same), as if after a
    // double quote (MySQL only).
    let none = SqliFlags::FLAG_QUOTE_NONE;
    let single = SqliFlags::FLAG_QUOTE_SINGLE;
    let ansi = SqliFlags::FLAG_SQL_ANSI;
    let mysql = SqliFlags::FLAG_SQL_MYSQL;
    let mut quotes: Vec<SqliFlags> = vec![none];
    if input.contains(&b'\'') {
        quotes.push(single);
    }
    for quote in quotes {
        let r = read(quote | ansi);
        if r.sqli {
            return Some(r.fingerprint);
        }
        if r.reparse {
            let r = read(quote | mysql);
            if r.sqli {
                return Some(r.fingerprint);
            }
        }
    }
    if input.contains(&b'"') {
        let r = read(SqliFlags::FLAG_QUOTE_DOUBLE | mysql);
        if r.sqli {
            return Some(r.fingerprint);
        }
    }
    None
}

/// The positions of the `.` and `` ` `` bytes at least [`DEEP`] bytes into their run
/// of word bytes, in order.
fn candidates(input: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut run = 0usize;
    for (i, &b) in input.iter().enumerate() {
        if ENDS_WORD[b as usize] {
            run = 0;
            continue;
        }
        if run >= DEEP && (b == b'.' || b == b'`') {
            out.push(i);
        }
        run += 1;
    }
    out
}

/// One reading of the crate's `detect`. `expensive`: the original input is over the
/// word-scan limit, so it is never given to the crate: when no copy passes the check
/// (each copy is given to the crate only while it is below the limit itself), the
/// reading is guarded.
fn reading(input: &[u8], candidates: &[usize], flags: SqliFlags, expensive: bool) -> Reading {
    let limit = word_scan_limit(input.len());
    let mut replaced: Vec<usize> = candidates.to_vec();
    let mut copy = input.to_vec();
    for &p in &replaced {
        copy[p] = FILLER;
    }
    let guarded = Reading {
        sqli: true,
        fingerprint: EVIL,
        reparse: false,
        path: Path::Guarded,
    };
    for _ in 0..ATTEMPTS {
        if word_scan_exceeds(&copy, limit) {
            return guarded;
        }
        let mut state = SqliState::new(&copy, flags);
        let sqli = state.is_sqli();
        let result = Reading {
            sqli,
            fingerprint: state.fingerprint,
            reparse: state.stats_comment_ddx != 0 || state.stats_comment_hash != 0,
            path: Path::Rewritten,
        };
        let uncovered = uncovered(&copy, &replaced, flags, state.stats_tokens);
        if uncovered.is_empty() {
            return result;
        }
        for &p in &uncovered {
            copy[p] = input[p];
        }
        replaced.retain(|p| uncovered.binary_search(p).is_err());
        if replaced.is_empty() {
            break;
        }
    }
    if expensive {
        return guarded;
    }
    let mut state = SqliState::new(input, flags);
    let sqli = state.is_sqli();
    Reading {
        sqli,
        fingerprint: state.fingerprint,
        reparse: state.stats_comment_ddx != 0 || state.stats_comment_hash != 0,
        path: Path::Fallback,
    }
}

/// Whether the crate's word parser could scan more than `limit` bytes
/// past words it cuts at a keyword prefix: the sum, over the `.` and `` ` `` that end
/// a keyword (of a type the parser cuts at) starting at a word byte at most 29 bytes
/// before them in the same run, of the length of their run. An upper bound, since a
/// reading cuts a word only where a word starts and the fold may stop early.
fn word_scan_exceeds(input: &[u8], limit: u64) -> bool {
    // A cheap bound first: every `.` and `` ` `` times its run.
    let mut crude = 0u64;
    for_each_run(input, |start, end| {
        let marks = memchr::memchr2_iter(b'.', b'`', &input[start..end]).count() as u64;
        crude = crude.saturating_add(marks.saturating_mul((end - start) as u64));
    });
    if crude <= limit {
        return false;
    }
    let mut work = 0u64;
    // The cut positions of the current run already counted: a cut at d is found from
    // every word start t in [d - 29, d), so a window of the last 32 offsets suffices.
    let mut seen = [usize::MAX; 32];
    for_each_run(input, |start, end| {
        if work > limit {
            return;
        }
        let run = (end - start) as u64;
        for t in start..end {
            if !starts_word(input[t]) {
                continue;
            }
            keyword_ends(&input[t..end], |d| {
                let d = t + d;
                if seen[d % 32] != d {
                    seen[d % 32] = d;
                    work = work.saturating_add(run);
                }
            });
            if work > limit {
                return;
            }
        }
    });
    work > limit
}

/// Calls `f` with the start and end of every run of word bytes.
fn for_each_run(input: &[u8], mut f: impl FnMut(usize, usize)) {
    let mut i = 0;
    while i < input.len() {
        if ENDS_WORD[input[i] as usize] {
            i += 1;
            continue;
        }
        let start = i;
        while i < input.len() && !ENDS_WORD[input[i] as usize] {
            i += 1;
        }
        f(start, i);
    }
}

/// A byte the word parser can start at (directly, or through the parsers of `b'`,
/// `e'`, `n'`, `q'`, `u&'`, `x'` and `$.` when they fall back to it).
fn starts_word(b: u8) -> bool {
    matches!(
        get_char_type(b),
        CharType::Word
            | CharType::BString
            | CharType::EString
            | CharType::NQString
            | CharType::QString
            | CharType::UString
            | CharType::XString
            | CharType::Money
    )
}

/// For each upper-case two-byte prefix, the range of the crate's sorted keyword table
/// whose words start with it (empty ranges for prefixes no keyword has), so that a
/// walk along a word narrows the range byte by byte instead of searching the table.
struct KeywordRanges {
    /// `firsts[a]`: some keyword starts with `a`.
    firsts: [bool; 256],
    /// `pairs[a * 256 + b]`: the table range of the keywords that start with `a b`.
    pairs: Vec<(u32, u32)>,
}

static KEYWORD_RANGES: std::sync::LazyLock<KeywordRanges> = std::sync::LazyLock::new(|| {
    let table = libinjectionrs::sqli::sqli_data::SQL_KEYWORDS;
    let mut k = KeywordRanges {
        firsts: [false; 256],
        pairs: vec![(0, 0); 256 * 256],
    };
    for (i, w) in table.iter().enumerate() {
        let b = w.word.as_bytes();
        if let Some(&a) = b.first() {
            k.firsts[a as usize] = true;
            if let Some(&c) = b.get(1) {
                let r = &mut k.pairs[a as usize * 256 + c as usize];
                if r.0 == r.1 {
                    *r = (i as u32, i as u32 + 1);
                } else {
                    // The table is sorted: the words with one prefix are contiguous.
                    r.1 = i as u32 + 1;
                }
            }
        }
    }
    k
});

/// The byte at `d` of a keyword, 0 past its end (shorter words sort first).
fn byte_at(word: &str, d: usize) -> u8 {
    word.as_bytes().get(d).copied().unwrap_or(0)
}

/// Calls `f` with each offset d (at most 29) of `word` such that `word[d]` is `.` or
/// `` ` `` and `word[..d]` is a keyword the word parser cuts at. Walks the keyword
/// table's sorted words along the prefix, narrowing the range of words that start
/// with it, and stops as soon as none does.
fn keyword_ends(word: &[u8], mut f: impl FnMut(usize)) {
    let table = libinjectionrs::sqli::sqli_data::SQL_KEYWORDS;
    let ranges = &*KEYWORD_RANGES;
    let cuts = |i: usize| !matches!(table[i].token_type, b'n' | 0);
    let mut upper = [0u8; 2];
    let (mut lo, mut hi) = (0usize, 0usize);
    for (d, &b) in word.iter().enumerate().take(30) {
        let u = b.to_ascii_uppercase();
        match d {
            0 => {
                if !ranges.firsts[u as usize] {
                    return;
                }
                upper[0] = u;
                continue;
            }
            1 => {
                // A one-byte keyword before a mark (none starts a word today).
                if (b == b'.' || b == b'`')
                    && table
                        .binary_search_by(|k| k.word.as_bytes().cmp(&upper[..1]))
                        .is_ok_and(cuts)
                {
                    f(1);
                }
                upper[1] = u;
                let (l, h) = ranges.pairs[upper[0] as usize * 256 + u as usize];
                (lo, hi) = (l as usize, h as usize);
            }
            _ => {
                // [lo, hi) holds the words that start with word[..d]; the one equal
                // to it, if any, sorts first.
                if (b == b'.' || b == b'`') && table[lo].word.len() == d && cuts(lo) {
                    f(d);
                }
                let span = &table[lo..hi];
                let from = span.partition_point(|k| byte_at(k.word, d) < u);
                let to = span.partition_point(|k| byte_at(k.word, d) <= u);
                (lo, hi) = (lo + from, lo + to);
            }
        }
        if lo >= hi {
            return;
        }
    }
}

/// The replaced positions (sorted) that the crate's tokenizer, reading `copy` with
/// `flags` for `consumed` tokens (and one more for the bound), does not leave deep
/// inside a long word.
fn uncovered(copy: &[u8], replaced: &[usize], flags: SqliFlags, consumed: usize) -> Vec<usize> {
    let mut tokenizer = SqliTokenizer::new(copy, flags);
    // Where each long word's replaceable part starts and ends, in order.
    let mut covered: Vec<(usize, usize)> = Vec::new();
    let mut bound = usize::MAX;
    for i in 0..=consumed {
        let Some(token) = tokenizer.next_token() else {
            break;
        };
        if i == consumed {
            // Token k + 1 was never made by the fold; its parser's look-ahead from
            // token k reaches at most two bytes past token k's end.
            bound = token.pos.saturating_add(2);
            break;
        }
        if is_long_word(copy, &token) {
            let end = token.pos
                + copy[token.pos..]
                    .iter()
                    .position(|&b| ENDS_WORD[b as usize])
                    .unwrap_or(copy.len() - token.pos);
            covered.push((token.pos + DEEP, end));
        }
    }
    let mut out = Vec::new();
    let mut iv = covered.iter().peekable();
    for &p in replaced {
        if p >= bound {
            break;
        }
        while iv.next_if(|&&(_, end)| end <= p).is_some() {}
        if iv.peek().is_none_or(|&&(start, _)| start > p) {
            out.push(p);
        }
    }
    out
}

/// A token made by the crate's word parser, not cut at a keyword prefix: a bareword
/// with no quote, of 31 bytes or more, starting with a byte that starts a word (a
/// letter, `_`, a high byte, or `$` followed by `.`).
fn is_long_word(copy: &[u8], token: &Token) -> bool {
    token.token_type == TokenType::Bareword
        && token.str_open == 0
        && token.len >= 31
        && matches!(
            get_char_type(copy[token.pos]),
            CharType::Word
                | CharType::BString
                | CharType::EString
                | CharType::NQString
                | CharType::QString
                | CharType::UString
                | CharType::XString
                | CharType::Money
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The crate's answer.
    fn plain(input: &[u8]) -> Option<[u8; 8]> {
        let mut s = SqliState::new(input, SqliFlags::FLAG_NONE);
        s.detect().then_some(s.fingerprint)
    }

    fn check(input: &[u8], paths: &mut Vec<Path>) {
        let got = detect(input, &mut |p| paths.push(p));
        assert_eq!(
            got,
            plain(input),
            "differs from the crate on {:?}",
            String::from_utf8_lossy(input)
        );
    }

    #[test]
    fn no_keyword_reaches_the_depth() {
        let longest = libinjectionrs::sqli::sqli_data::SQL_KEYWORDS
            .iter()
            .map(|k| k.word.len())
            .max()
            .unwrap_or(0);
        assert!(longest < DEEP - 1, "a keyword of {longest} bytes");
        assert!(!ENDS_WORD[FILLER as usize]);
        assert!(!FILLER.is_ascii_alphanumeric());
        assert!(!b"sp_password".contains(&FILLER));
    }

    #[test]
    fn candidates_sit_deep_in_runs() {
        let mut v = b"x=".to_vec();
        v.extend_from_slice(&[b'a'; 31]);
        v.extend_from_slice(b"..` .");
        assert_eq!(candidates(&v), [34, 35]);
        assert!(candidates(b"a.b.c").is_empty());
    }

    /// A small deterministic generator (the tests need no randomness crate).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            self.0 >> 33
        }
        fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
            &v[self.next() as usize % v.len()]
        }
    }

    /// Pieces that make long words with dots and backticks, and everything that can
    /// cut them differently in another reading: quotes, comments, numbers, money,
    /// variables, backtick identifiers, keywords before a dot, NULs.
    const PIECES: &[&[u8]] = &[
        b"a",
        b"b",
        b"x",
        b"e",
        b"n",
        b"q",
        b"u",
        b"_",
        b"1",
        b"0",
        b"9",
        b".",
        b".",
        b"`",
        b"`",
        b"'",
        b"\"",
        b" ",
        b"\0",
        b"\x01",
        b"\xff",
        b"\xc3\xa9",
        b"$",
        b"@",
        b"@@",
        b"\\",
        b"\\N",
        b"-",
        b"--",
        b"-- ",
        b"#",
        b"/*",
        b"*/",
        b"/*!",
        b"\n",
        b"(",
        b")",
        b"=",
        b",",
        b";",
        b"[",
        b"]",
        b"{",
        b"}",
        b"select",
        b"union",
        b"or",
        b"and",
        b"in",
        b"DBMS_PIPE.RECEIVE_MESSAGE",
        b"user",
        b"sp_password",
        b"1e",
        b"0x",
        b"$$",
        b"$a$",
        b"q'[",
        b"N'",
        b"E'",
        b"u&'",
        b"b'",
        b"x'",
        b"::",
        b"int",
        b"char",
    ];

    fn random_input(rng: &mut Lcg, max: usize) -> Vec<u8> {
        let len = 1 + rng.next() as usize % max;
        let mut v = Vec::with_capacity(len + 32);
        while v.len() < len {
            match rng.next() % 4 {
                // A long run of word bytes with dots or backticks in it.
                0 => {
                    let n = 20 + rng.next() as usize % 60;
                    let dense = *rng.pick(&[&b"a."[..], b"a`", b"ab.", b"a..", b"a1.", b"x`y"]);
                    for i in 0..n {
                        v.push(dense[i % dense.len()]);
                    }
                }
                _ => {
                    let piece: &&[u8] = rng.pick(PIECES);
                    v.extend_from_slice(piece);
                }
            }
        }
        v
    }

    #[test]
    fn agrees_with_the_crate_on_random_inputs() {
        let mut rng = Lcg(0x5EED_1234_ABCD_0001);
        let mut paths = Vec::new();
        let mut positive = 0;
        for _ in 0..40_000 {
            let v = random_input(&mut rng, 160);
            check(&v, &mut paths);
            positive += usize::from(plain(&v).is_some());
        }
        let rewritten = paths.iter().filter(|p| **p == Path::Rewritten).count();
        let fallback = paths.iter().filter(|p| **p == Path::Fallback).count();
        eprintln!(
            "{positive} positive inputs; {rewritten} rewritten and {fallback} fallback readings"
        );
        assert!(positive > 2_000, "only {positive} inputs are SQL injection");
        // The rewritten path must be exercised, and the check must fail sometimes
        // (readings where the dots are not in a word), or the test proves nothing.
        assert!(rewritten > 10_000, "only {rewritten} rewritten readings");
        assert!(fallback > 100, "only {fallback} fallbacks");
    }

    /// Words with a dot or backtick at every offset around the depth, behind every
    /// kind of prefix, in every reading.
    #[test]
    fn agrees_around_the_depth() {
        let prefixes: &[&[u8]] = &[
            b"",
            b"x=",
            b"'",
            b"\"",
            b"`",
            b"@",
            b"$",
            b"1",
            b"0x",
            b"select.",
            b"or.",
            b"DBMS_PIPE.RECEIVE_MESSAGE",
            b"/*",
            b"-- ",
            b"#",
            b"[",
            b"q'[",
            b"N'",
            b"1e",
            b"$$",
            b"$ab$",
            b"\\N",
            b"a'b\"c",
            b"`\"",
            b"\"`'",
        ];
        let suffixes: &[&[u8]] = &[
            b"",
            b"'",
            b"\"",
            b"`",
            b" or 1=1--",
            b"' or '1'='1",
            b"*/",
            b"$$",
            b"]",
            b"$ab$",
            b"\n1",
            b".'",
            b"`'",
            b"\0",
        ];
        let mut paths = Vec::new();
        for pre in prefixes {
            for fill in [&b"a"[..], b"1", b"a1", b"\xff", b"_", b"a$"] {
                for offset in 26..40 {
                    for mark in [b'.', b'`'] {
                        for suf in suffixes {
                            let mut v = pre.to_vec();
                            while v.len() < pre.len() + offset {
                                v.extend_from_slice(fill);
                            }
                            v.truncate(pre.len() + offset);
                            v.push(mark);
                            v.extend_from_slice(b"abc");
                            v.push(mark);
                            v.extend_from_slice(b"select");
                            v.extend_from_slice(suf);
                            check(&v, &mut paths);
                        }
                    }
                }
            }
        }
        assert!(paths.contains(&Path::Rewritten));
    }

    #[test]
    fn keyword_ends_follow_the_crate_lookup() {
        let mut ends = Vec::new();
        keyword_ends(b"or.or", |d| ends.push(d));
        assert_eq!(ends, [2]);
        ends.clear();
        keyword_ends(b"DBMS_PIPE.RECEIVE_MESSAGE.x", |d| ends.push(d));
        assert_eq!(ends, [25]);
        ends.clear();
        keyword_ends(b"aaaa.bbbb", |d| ends.push(d));
        assert!(ends.is_empty());
        // The same keywords as the crate's lookup (bareword entries excepted).
        for k in libinjectionrs::sqli::sqli_data::SQL_KEYWORDS {
            if k.word.len() > 29 || k.word.contains('`') {
                continue;
            }
            let t = libinjectionrs::sqli::sqli_data::lookup_word(k.word);
            let cuts = t != TokenType::Bareword && t != TokenType::None;
            for w in [k.word.to_string(), k.word.to_ascii_lowercase()] {
                for mark in [".", "`"] {
                    let w = format!("{w}{mark}x");
                    let mut ends = Vec::new();
                    keyword_ends(w.as_bytes(), |d| ends.push(d));
                    assert_eq!(ends.last() == Some(&k.word.len()), cuts, "{w}");
                }
            }
        }
    }

    /// Shapes that stay quadratic in the crate are answered without it; ordinary
    /// text with keywords and dots is not.
    #[test]
    fn the_word_scan_guard() {
        // The fold takes these cut words one after another without end.
        for unit in [&b"or."[..], b"and.", b"or`", b"OR."] {
            let mut v = Vec::new();
            while v.len() < 64 << 10 {
                v.extend_from_slice(unit);
            }
            let mut paths = Vec::new();
            let got = detect(&v, &mut |p| paths.push(p));
            let unit = String::from_utf8_lossy(unit);
            assert_eq!(got, Some(EVIL), "{unit}: {paths:?}");
            assert_eq!(paths, [Path::Guarded], "{unit}");
            // Small enough, the crate answers as usual.
            v.truncate(300);
            check(&v, &mut Vec::new());
        }
        // Here the fold stops after a few tokens: the rewritten copy keeps the cut
        // words near the start only, and the crate's answer comes back.
        for unit in [&b"union."[..], b"DBMS_PIPE.RECEIVE_MESSAGE.", b"select."] {
            let mut v = Vec::new();
            while v.len() < 64 << 10 {
                v.extend_from_slice(unit);
            }
            let mut paths = Vec::new();
            check(&v, &mut paths);
            assert!(!paths.contains(&Path::Guarded), "{paths:?}");
        }
        let mut text = Vec::new();
        while text.len() < 1 << 20 {
            text.extend_from_slice(b"select this or. that and. union of db.table.column, ");
        }
        assert!(!word_scan_exceeds(&text, word_scan_limit(text.len())));
        let digits = b"1.".repeat(1 << 19);
        assert!(!word_scan_exceeds(&digits, word_scan_limit(digits.len())));
    }

    /// The reported shapes: long repetitions are rewritten, not evaluated slowly.
    #[test]
    fn repetitions_take_the_rewritten_path() {
        for unit in [&b"a."[..], b"a`", b"ab.", b"a..", b"`a", b".x", b"a1."] {
            let mut v = Vec::new();
            while v.len() < 4096 {
                v.extend_from_slice(unit);
            }
            let mut paths = Vec::new();
            check(&v, &mut paths);
            assert!(
                paths.iter().all(|p| *p == Path::Rewritten),
                "{:?}: {paths:?}",
                String::from_utf8_lossy(unit)
            );
        }
    }
}
