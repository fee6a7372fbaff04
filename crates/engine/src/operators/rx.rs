//! `@rx`: PCRE-syntax patterns, translated once at load time to `regex::bytes` syntax
//! and run by a linear-time engine.
//!
//! # Semantics
//!
//! libmodsecurity (v3) compiles `@rx` patterns with PCRE and the flags
//! `DOTALL | MULTILINE`, without UTF mode: `.` matches every byte including `\n`,
//! `^`/`$` match at line starts/ends, and the pattern and subject are byte strings.
//! (ModSecurity v2 used `DOTALL | DOLLAR_ENDONLY` instead; Palisade follows v3.)
//! Matching is case-sensitive unless the pattern says `(?i)`.
//!
//! Here the pattern is compiled with [`regex::bytes::RegexBuilder`] with Unicode off,
//! `dot_matches_new_line(true)` and `multi_line(true)`, after a translation pass
//! ([`translate`]) that maps PCRE's byte-oriented syntax onto the `regex` crate's:
//!
//! - `\x{HH}`, `\xH`, `\0`, octal escapes, `\o{..}`, `\cX`, `\e`, `\a` become `\xHH`
//!   byte escapes (CRS v4 writes `\x{80}`-style escapes inside character classes;
//!   without UTF mode they mean bytes);
//! - every non-ASCII character of the pattern becomes the `\xHH` escapes of its
//!   UTF-8 bytes, as PCRE sees them without UTF mode (also inside classes);
//! - PCRE's `\h`, `\H`, `\v`, `\V`, `\R`, `\N` become explicit byte classes (the
//!   `regex` crate reads `\v` as the vertical tab alone);
//! - `{` and `}` that do not form a counted repetition are literal, as in PCRE;
//! - inside a class, `[`, `&`, `~` and `-` outside ranges are escaped (they are set
//!   operators or nested classes for `regex`, literals for PCRE), and `\b` is a
//!   backspace;
//! - `\Q...\E` quoting and `(?#...)` comments are expanded.
//!
//! Three PCRE features that PCRE runs by backtracking get an exact linear-time
//! evaluation instead (the rules and proofs are in `rx_compat`):
//!
//! - possessive quantifiers (`*+`, `++`, `?+`, `{n,m}+`) and atomic groups (`(?>`)
//!   around a single byte class: read as greedy when nothing that can follow them
//!   can start with one of their bytes, else (without an upper bound) run on the
//!   product of the automaton with "the next byte is not in the class";
//! - lookaheads and lookbehinds (`(?=`, `(?!`, `(?<=`, `(?<!`) of bounded length,
//!   at the start or end of a fixed-length top-level alternative: guards tested
//!   around each occurrence of the alternative;
//! - backreferences, only in the patterns of the table in `rx_compat` (CRS 3.3.4's
//!   SQL tautology rule 942130), each with an evaluation of its own.
//!
//! The translated pattern ([`Rx::pattern`]) is then a superset of the PCRE one
//! (lookarounds read as true, possessive as greedy, a backreference as a copy of
//! its group), and [`Rx::matches`] refines it. Everything else that needs a
//! backtracking engine is refused with a clear reason: other backreferences
//! (`\1`, `\k<name>`, `\g{1}`, `(?P=name)`), other lookarounds, atomic groups and
//! possessive quantifiers, recursion and subroutine calls (`(?R)`, `(?1)`,
//! `(?&name)`), conditionals, backtracking verbs (`(*SKIP)`...), `\K` and `\G`.
//! `\Z` is refused as well (it has no zero-width equivalent without lookahead).
//!
//! PCRE's multi-line `^` does not match after a newline that ends the value, while
//! `regex`'s `(?m)^` does (`^$` would match `"abc\n"`). Patterns where this can
//! change the answer are handled exactly (see [`Rx::matches`]); a pattern where such
//! a `^` comes after items that consume input and may be the last thing to match
//! (`a\n^$`) is refused: Palisade has no exact linear-time form for it.
//!
//! Checked against PCRE2 10.42 (`DOTALL | MULTILINE`, no UTF mode, the library
//! libmodsecurity 3.0.9 links): every CRS v4.28 and CRS 3.3.4 pattern gives the
//! same verdict and captures as PCRE on the CRS test payloads (decoded and raw,
//! with newline variants) and random byte strings (the one difference left is in
//! the `regex` crate itself: for CRS v4 921210, `(][^\]]+$|][^\]]+\[)`, it can
//! report the second alternative where both match at the same start; the verdict
//! is the same). The five CRS 3.3.4 patterns with lookarounds, possessive
//! quantifiers or a backreference were also checked on about a million values
//! built from their own tokens, crafted edge cases and random bytes.
//!
//! CI keeps the verdicts checked: `tests/pcre2_corpus.rs` runs every static `@rx`
//! pattern of both rule sets (478 distinct patterns) on a committed corpus of
//! generated values (48 per pattern, 384 for the five evaluated with `rx_compat`)
//! with PCRE2 10.42's verdict and group 0 (made by
//! `bench/pcre2/corpus.py`). Left out are the values on which PCRE2 stops at its
//! match limit and gives no verdict (27, all for 920201's
//! `^bytes=(?:(?:\d+)?-(?:\d+)?\s*,?\s*){63}`; libmodsecurity then reports no match,
//! and so does the engine on each of them, checked once by hand).

use regex::bytes::RegexBuilder;
use regex_automata::meta::{self, Regex};
use regex_automata::util::captures::Captures as Groups;
use regex_automata::util::prefilter::Prefilter;
use regex_automata::{Input, MatchKind};
use regex_syntax::ParserBuilder;
use regex_syntax::hir::{Hir, HirKind, Look, literal};
use std::fmt::Write as _;
use std::sync::Arc;

use super::Captures;
use super::rx_compat::{self, ByteSet, Compat};
use crate::transforms::Effect;

/// Upper bound for the compiled size of one `@rx` program (and of one prefilter set):
/// generous enough for the largest CRS patterns, bounded so that a hostile rule file
/// cannot exhaust memory.
pub const REGEX_SIZE_LIMIT: usize = 64 * 1024 * 1024;

/// Capacity of one lazy DFA cache of an `@rx` regex. Every thread that runs a regex
/// gets its own caches, which grow as the lazy DFA meets new states up to this size,
/// and are then cleared and refilled; a regex whose cache is cleared too often falls
/// back to a slower engine (the PikeVM). This is the `regex` crate's default (it was
/// 64 MiB here before, which let caches grow without practical bound under load).
pub const DFA_CACHE_CAPACITY: usize = 2 * 1024 * 1024;

/// Capacity of one lazy DFA cache of a prefilter set ([`RxSet`](super::rx_set::RxSet);
/// since the literal gate it holds only the patterns without selective factors, six
/// in CRS v4's largest set, which used 1.3 MiB over 2,000 varying GETs). Set when the
/// DFA held every pattern, whose states are unions over many: with 2 MiB, CRS v4's largest group
/// (54 patterns) gives up on the 20 KiB JSON document of the benchmark corpus, which
/// then takes more than ten times longer; 4 MiB is enough for it and for the adversarial benchmark, and
/// this leaves room on top. A set whose fixed per-cache structures alone approach it
/// gets twice its minimum instead.
pub const SET_CACHE_CAPACITY: usize = 8 * 1024 * 1024;

/// Maximum number of values an `@rx` capture fills (`TX.0` to `TX.9`).
pub const MAX_CAPTURES: usize = 10;

/// A compiled `@rx` operator. Clones share the compiled program and its caches.
#[derive(Debug, Clone)]
pub struct Rx {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    regex: Regex,
    pattern: String,
    /// Only for patterns with a `^` that could be tried at the very end of a value
    /// ending with `\n` (see [`Rx::matches`]): the pattern with `\A` for every `^`.
    at_end: Option<Regex>,
    /// For patterns whose translation is only a superset (lookarounds, possessive
    /// quantifiers that cannot be read as greedy, table patterns): the exact
    /// evaluation (see `rx_compat`).
    compat: Option<Compat>,
}

/// Compiles a translated pattern with the settings every `@rx` pattern gets (see
/// [`builder`]), through the `regex` crate's own engine (`regex_automata::meta`) so
/// that the lazy DFA cache capacity and the caches themselves are under control.
pub(crate) fn compile(pattern: &str) -> Result<Regex, String> {
    let hir = parse_hir(pattern)?;
    compile_hir(&hir)
}

/// [`compile`] from a parsed pattern.
///
/// The engine's literal prefilters are off (`auto_prefilter(false)`): with them a
/// pattern whose literal sits inside it (CRS 941120's `on` in
/// `[...]on[a-z]{3,50}...`) is searched backwards from each occurrence of the literal,
/// and when those searches would overlap the library answers the whole value with its
/// PikeVM, without trying the lazy DFA: on prose with many `on`s, about 200
/// instructions a byte. Without them every search is the forward lazy DFA. Measured
/// (callgrind, `PALISADE_BENCH_VARYING_N=10 PALISADE_BENCH_LOOP=v4:varying-json:6`):
/// 15.26 -> 13.82 M instructions per varying JSON request; the fixed GET, form and JSON
/// and the adversarial cases within 1% (one, `json spaces`, 4% more). A pattern whose
/// matches all start with a few literals gets a search for them instead
/// ([`prefix_prefilter`]), which its forward lazy DFA uses to skip ahead.
pub(crate) fn compile_hir(hir: &Hir) -> Result<Regex, String> {
    meta::Builder::new()
        .configure(engine_config().prefilter(prefix_prefilter(hir)))
        .build_from_hir(hir)
        .map_err(|e| match e.size_limit() {
            Some(limit) => format!("pattern too large: its compiled form exceeds {limit} bytes"),
            None => format!("invalid regular expression: {e}"),
        })
}

/// The settings of every `@rx` regex but its prefilter (see [`compile_hir`]).
fn engine_config() -> meta::Config {
    meta::Config::new()
        .match_kind(MatchKind::LeftmostFirst)
        .utf8_empty(false)
        .nfa_size_limit(Some(REGEX_SIZE_LIMIT))
        .hybrid_cache_capacity(DFA_CACHE_CAPACITY)
        .auto_prefilter(false)
}

/// The shortest literal a pattern's prefix prefilter may search for (see
/// [`prefix_prefilter`]): a single byte is too common in text for a skip to pay for
/// the restarts (with one, the adversarial benchmark's `json entities` case, a long
/// value of HTML entities, took 40% longer).
const PREFIX_MIN_LEN: usize = 2;

/// A search for the literals every match of `hir` starts with, for its lazy DFA to
/// skip to (the library's own prefix prefilter, without the reverse searches from
/// inner literals that `auto_prefilter` also brings; see [`compile_hir`]). Only when
/// those literals are few enough and at least [`PREFIX_MIN_LEN`] bytes long for one
/// of the library's vectorised searches (`is_fast`); `None` otherwise. On text that
/// keeps the rules' lazy DFAs busy (random printable text) a pattern such as
/// `(?i)union.*?select.*?from` then costs a skim of the value instead of a walk.
fn prefix_prefilter(hir: &Hir) -> Option<Prefilter> {
    let mut extractor = literal::Extractor::new();
    extractor.kind(literal::ExtractKind::Prefix);
    let mut prefixes = extractor.extract(hir);
    prefixes.optimize_for_prefix_by_preference();
    let literals = prefixes.literals()?;
    if literals.iter().any(|l| l.len() < PREFIX_MIN_LEN) {
        return None;
    }
    // No literals at all (a pattern that never matches) gives no prefilter either.
    Prefilter::new(MatchKind::LeftmostFirst, literals).filter(Prefilter::is_fast)
}

impl Rx {
    /// Translates a PCRE pattern (see the module documentation) and compiles it.
    /// The error is a human-readable reason.
    pub fn new(pcre: &str) -> Result<Rx, String> {
        let t = translate_full(pcre)?;
        let hir = parse_hir(&t.pattern)?;
        let regex = compile_hir(&hir)?;
        let compat = rx_compat::build(pcre, &t)?;
        let pattern = t.pattern;
        let carets = t.carets;
        let at_end = if carets.is_empty() {
            None
        } else {
            match caret_risk(&hir) {
                CaretRisk::None => None,
                CaretRisk::Initial if compat.is_none() => {
                    let mut anchored = String::with_capacity(pattern.len() + carets.len());
                    let mut last = 0;
                    for &at in &carets {
                        anchored.push_str(&pattern[last..at]);
                        anchored.push_str(r"\A");
                        last = at + 1;
                    }
                    anchored.push_str(&pattern[last..]);
                    Some(compile(&anchored)?)
                }
                CaretRisk::Initial => {
                    return Err("a `^` that may be the last thing to match, in a pattern \
                         with a lookaround, a possessive quantifier or a backreference, \
                         cannot get PCRE's multi-line semantics (no line start after a \
                         final newline) here"
                        .to_string());
                }
                CaretRisk::Elsewhere => {
                    return Err("a `^` that follows other pattern items and may be the \
                         last thing to match cannot get PCRE's multi-line semantics (no \
                         line start after a final newline) in a linear-time engine; \
                         rewrite it, e.g. with `\\n` instead of `\\n^`"
                        .to_string());
                }
            }
        };
        Ok(Rx {
            inner: Arc::new(Inner {
                regex,
                pattern,
                at_end,
                compat,
            }),
        })
    }

    /// The final pattern in `regex` syntax, to be compiled with the same settings as
    /// [`builder`] (for instance in an [`RxSet`](super::rx_set::RxSet)). A value
    /// that matches with PCRE also matches this pattern, so a set built from such
    /// patterns is an exact prefilter for [`Rx::matches`]; the converse can fail
    /// for a value ending with `\n` (see [`Rx::matches`]) and, when
    /// [`Rx::regex_is_exact`] is false, for values that only PCRE's lookarounds,
    /// possessive quantifiers or backreferences reject.
    pub fn pattern(&self) -> &str {
        &self.inner.pattern
    }

    /// Strings one of which (ASCII case ignored) every match of [`Rx::pattern`]
    /// contains, so that a value without any of them cannot match; `None` when the
    /// pattern offers none (see `rx_factors`).
    pub(crate) fn required_factors(&self) -> Option<Vec<Vec<u8>>> {
        super::rx_factors::required_factors(&parse_hir(self.pattern()).ok()?)
    }

    /// For a prefilter: the pattern that matches a value exactly when
    /// [`Rx::pattern`] matches the value after `effects`, applied in reverse order
    /// (the last one first: the effects of the transformations peeled off the end of
    /// a chain, in the order they were peeled). A rule whose chain ends with such
    /// transformations can then be answered from the chain without them, whose bytes
    /// other rules' sets often walk already.
    /// - [`Effect::Lowercase`]: each byte the pattern accepts becomes every byte that
    ///   lowercasing turns into it (a small letter also accepts its capital, a capital
    ///   nothing).
    /// - [`Effect::Delete`]: each byte the pattern accepts, unless deleted, may be
    ///   followed by any run of deleted bytes (and so may the start of the value).
    ///
    /// Its [`Rx::matches`] is that pattern's regex alone (no exact PCRE refinement),
    /// so it serves only where a superset of the rule's matches will do. `None` when
    /// the pattern has classes beyond single bytes, or, under a deletion, assertions
    /// whose answer the deleted bytes change (word boundaries).
    pub(crate) fn preimage(&self, effects: &[Effect]) -> Option<Rx> {
        let mut pre = parse_hir(self.pattern()).ok()?;
        for effect in effects {
            pre = match *effect {
                Effect::Lowercase => lowercase_preimage(&pre)?,
                Effect::Delete(f) => {
                    let mut deleted = ByteSet::default();
                    for b in (0..=255u8).filter(|&b| f(b)) {
                        deleted.insert(b);
                    }
                    deletion_preimage(&pre, &deleted)?
                }
            };
        }
        let pattern = pre.to_string();
        // The printed pattern must read back as the same pattern.
        if parse_hir(&pattern).ok()? != pre {
            return None;
        }
        let regex = compile_hir(&pre).ok()?;
        Some(Rx {
            inner: Arc::new(Inner {
                regex,
                pattern,
                at_end: None,
                compat: None,
            }),
        })
    }

    /// The compiled regex of [`Rx::pattern`]: exact when [`Rx::regex_is_exact`],
    /// else a superset of the PCRE pattern that [`Rx::matches`] refines.
    pub fn regex(&self) -> &Regex {
        &self.inner.regex
    }

    /// Whether [`Rx::regex`] alone gives PCRE's answers (except at a final newline,
    /// see [`Rx::matches`]): false for the patterns that need an exact evaluation of
    /// their lookarounds, possessive quantifiers or backreferences.
    pub fn regex_is_exact(&self) -> bool {
        self.inner.compat.is_none()
    }

    /// Whether the pattern matches any of `inputs`, with search state made for this
    /// call and dropped after it: for load-time checks, which would otherwise leave
    /// a cache per regex behind in the loading thread.
    pub fn matches_any_transient(&self, inputs: &[&[u8]]) -> bool {
        let i = &*self.inner;
        if i.compat.is_some() || i.at_end.is_some() {
            return inputs.iter().any(|v| self.matches(v, None));
        }
        let mut cache = i.regex.create_cache();
        inputs.iter().any(|v| {
            i.regex
                .search_half_with(&mut cache, &Input::new(v).earliest(true))
                .is_some()
        })
    }

    /// Whether the pattern matches somewhere in `input`. When `captures` is given
    /// and there is a match, it is replaced by the whole match (index 0) and the
    /// groups 1 to 9, up to the last group that took part in the match (as PCRE
    /// reports them); groups that did not take part are empty.
    ///
    /// PCRE's multi-line `^` does not match after a newline that ends the value,
    /// while `regex`'s does (so `^$` would match `"abc\n"`). For the patterns where
    /// this can change the answer (a `^` that may be the last thing to match), and a
    /// value ending with `\n`, the answer is PCRE's: a match starting before the end
    /// counts as is, and a match at the very end is checked with `^` read as `\A`.
    pub fn matches(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        let i = &*self.inner;
        if let Some(compat) = &i.compat {
            return compat.matches(&i.regex, input, captures);
        }
        if let Some(at_end) = &i.at_end
            && input.last() == Some(&b'\n')
        {
            return Self::matches_ending_with_newline(&i.regex, at_end, input, captures);
        }
        let Some(out) = captures else {
            return i.regex.is_match(input);
        };
        let mut groups = i.regex.create_captures();
        i.regex.search_captures(&Input::new(input), &mut groups);
        if !groups.is_match() {
            return false;
        }
        fill_from_groups(out, &groups, input);
        true
    }

    fn matches_ending_with_newline(
        regex: &Regex,
        at_end: &Regex,
        input: &[u8],
        captures: Option<&mut Captures>,
    ) -> bool {
        let end = input.len();
        // Only empty matches can start at the end; every `^` they meet is at the end,
        // where PCRE's `^` is false, like `\A` (the input is not empty).
        let Some(out) = captures else {
            return regex.find(input).is_some_and(|m| m.start() < end)
                || at_end.search(&Input::new(input).range(end..)).is_some();
        };
        let mut groups = regex.create_captures();
        regex.search_captures(&Input::new(input), &mut groups);
        if groups.get_match().is_some_and(|m| m.start() < end) {
            fill_from_groups(out, &groups, input);
            return true;
        }
        let mut groups = at_end.create_captures();
        at_end.search_captures(&Input::new(input).range(end..), &mut groups);
        if groups.is_match() {
            fill_from_groups(out, &groups, input);
            return true;
        }
        false
    }
}

/// Stores the groups of a match, PCRE style (see [`Rx::matches`]).
fn fill_from_groups(out: &mut Captures, groups: &Groups, input: &[u8]) {
    let n = groups.group_len().min(MAX_CAPTURES);
    let last = (0..n)
        .rev()
        .find(|&g| groups.get_group(g).is_some())
        .unwrap_or(0);
    fill_captures(
        out,
        (0..=last).map(|g| groups.get_group(g).map_or(&[][..], |sp| &input[sp.range()])),
    );
}

/// Where a multi-line `^` could be tried at the end of a value that ends with `\n`
/// as part of a successful match (that is, with nothing but possibly-empty items
/// after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CaretRisk {
    /// Nowhere: `regex` and PCRE agree on every value.
    None,
    /// Only where nothing can have been consumed before it, so such a match is an
    /// empty match at the end of the value.
    Initial,
    /// After items that may consume bytes.
    Elsewhere,
}

/// Parses a translated pattern with the settings of [`builder`].
pub(crate) fn parse_hir(pattern: &str) -> Result<Hir, String> {
    ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .dot_matches_new_line(true)
        .multi_line(true)
        .build()
        .parse(pattern)
        .map_err(|e| format!("invalid regular expression: {e}"))
}

/// The class of the bytes for which `accepted` is true (empty: never matches).
fn byte_class(accepted: &dyn Fn(u8) -> bool) -> Hir {
    use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange};
    let mut ranges: Vec<ClassBytesRange> = Vec::new();
    for b in 0..=255u8 {
        if accepted(b) {
            match ranges.last_mut() {
                Some(r) if r.end() + 1 == b => *r = ClassBytesRange::new(r.start(), b),
                _ => ranges.push(ClassBytesRange::new(b, b)),
            }
        }
    }
    Hir::class(Class::Bytes(ClassBytes::new(ranges)))
}

/// The pattern that matches `x` exactly where `hir` matches `x` with ASCII capitals
/// lowercased (see [`Rx::preimage`]); `None` for a class of code points.
/// Assertions are unchanged: lowercasing keeps word characters and line ends where
/// they are.
fn lowercase_preimage(hir: &Hir) -> Option<Hir> {
    use regex_syntax::hir::{Class, Repetition};
    // The bytes that lowercasing turns into one of `accepted`.
    let preimage = |accepted: &dyn Fn(u8) -> bool| -> Hir {
        byte_class(&|b| accepted(b.to_ascii_lowercase()))
    };
    Some(match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => hir.clone(),
        HirKind::Literal(lit) => {
            Hir::concat(lit.0.iter().map(|&c| preimage(&|b| b == c)).collect())
        }
        HirKind::Class(Class::Bytes(c)) => {
            preimage(&|b| c.ranges().iter().any(|r| r.start() <= b && b <= r.end()))
        }
        HirKind::Class(Class::Unicode(_)) => return None,
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            sub: Box::new(lowercase_preimage(&r.sub)?),
            ..r.clone()
        }),
        HirKind::Capture(c) => lowercase_preimage(&c.sub)?,
        HirKind::Concat(subs) => Hir::concat(
            subs.iter()
                .map(lowercase_preimage)
                .collect::<Option<Vec<_>>>()?,
        ),
        HirKind::Alternation(subs) => Hir::alternation(
            subs.iter()
                .map(lowercase_preimage)
                .collect::<Option<Vec<_>>>()?,
        ),
    })
}

/// The pattern that matches `x` exactly where `hir` matches `x` with the bytes of
/// `deleted` removed (see [`Rx::preimage`]); `None` for a class of code points or an
/// assertion the deleted bytes change.
///
/// A match of `hir` in the shortened value is a run of accepted bytes; in `x` the
/// same bytes have runs of deleted bytes between them. So each byte the pattern
/// accepts (and is not deleted: a deleted one never occurs in the shortened value)
/// is followed by any run of deleted bytes. A start assertion is followed by one too
/// (the shortened value starts after the deleted bytes that open `x`); an end
/// assertion needs nothing more (the run after the last accepted byte reaches it).
/// A line assertion is one of text when the line ends are deleted; word boundaries
/// have no such reading.
fn deletion_preimage(hir: &Hir, deleted: &ByteSet) -> Option<Hir> {
    use regex_syntax::hir::{Class, Repetition};
    let skipped = || {
        Hir::repetition(Repetition {
            min: 0,
            max: None,
            greedy: true,
            sub: Box::new(byte_class(&|b| deleted.contains(b))),
        })
    };
    let kept = |accepted: &dyn Fn(u8) -> bool| {
        Hir::concat(vec![
            byte_class(&|b| accepted(b) && !deleted.contains(b)),
            skipped(),
        ])
    };
    let line_ends_deleted = deleted.contains(b'\n') && deleted.contains(b'\r');
    Some(match hir.kind() {
        HirKind::Empty => hir.clone(),
        HirKind::Look(look) => match look {
            Look::Start => Hir::concat(vec![hir.clone(), skipped()]),
            Look::End => hir.clone(),
            Look::StartLF | Look::StartCRLF if line_ends_deleted => {
                Hir::concat(vec![Hir::look(Look::Start), skipped()])
            }
            Look::EndLF | Look::EndCRLF if line_ends_deleted => Hir::look(Look::End),
            _ => return None,
        },
        HirKind::Literal(lit) => Hir::concat(lit.0.iter().map(|&c| kept(&|b| b == c)).collect()),
        HirKind::Class(Class::Bytes(c)) => {
            kept(&|b| c.ranges().iter().any(|r| r.start() <= b && b <= r.end()))
        }
        HirKind::Class(Class::Unicode(_)) => return None,
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            sub: Box::new(deletion_preimage(&r.sub, deleted)?),
            ..r.clone()
        }),
        HirKind::Capture(c) => deletion_preimage(&c.sub, deleted)?,
        HirKind::Concat(subs) => Hir::concat(
            subs.iter()
                .map(|h| deletion_preimage(h, deleted))
                .collect::<Option<Vec<_>>>()?,
        ),
        HirKind::Alternation(subs) => Hir::alternation(
            subs.iter()
                .map(|h| deletion_preimage(h, deleted))
                .collect::<Option<Vec<_>>>()?,
        ),
    })
}

fn caret_risk(hir: &Hir) -> CaretRisk {
    let mut risk = CaretRisk::None;
    walk_carets(hir, true, true, &mut risk);
    risk
}

/// `rest_may_be_empty`: what follows `hir` up to the end of the pattern can match
/// the empty string (assertions assumed true); `initial`: nothing before `hir`
/// consumes input.
fn walk_carets(hir: &Hir, rest_may_be_empty: bool, initial: bool, risk: &mut CaretRisk) {
    let may_be_empty = |h: &Hir| h.properties().minimum_len() == Some(0);
    let zero_width = |h: &Hir| h.properties().maximum_len() == Some(0);
    match hir.kind() {
        HirKind::Look(Look::StartLF) | HirKind::Look(Look::StartCRLF) if rest_may_be_empty => {
            let found = if initial {
                CaretRisk::Initial
            } else {
                CaretRisk::Elsewhere
            };
            if *risk != CaretRisk::Elsewhere {
                *risk = found;
            }
        }
        HirKind::Concat(subs) => {
            for (i, sub) in subs.iter().enumerate() {
                let rest = rest_may_be_empty && subs[i + 1..].iter().all(may_be_empty);
                let first = initial && subs[..i].iter().all(zero_width);
                walk_carets(sub, rest, first, risk);
            }
        }
        HirKind::Alternation(subs) => {
            for sub in subs {
                walk_carets(sub, rest_may_be_empty, initial, risk);
            }
        }
        HirKind::Repetition(rep) => {
            // After the first round, earlier rounds may have consumed input.
            let first = initial && (rep.max == Some(1) || zero_width(&rep.sub));
            walk_carets(&rep.sub, rest_may_be_empty, first, risk);
        }
        HirKind::Capture(cap) => walk_carets(&cap.sub, rest_may_be_empty, initial, risk),
        _ => {}
    }
}

/// Replaces the content of `out` with `values`, reusing its allocations.
pub(crate) fn fill_captures<'a>(out: &mut Captures, values: impl Iterator<Item = &'a [u8]>) {
    let mut count = 0;
    for value in values {
        if let Some(slot) = out.get_mut(count) {
            slot.clear();
            slot.extend_from_slice(value);
        } else {
            out.push(value.to_vec());
        }
        count += 1;
    }
    out.truncate(count);
}

/// A [`RegexBuilder`] with the settings every `@rx` pattern is compiled with:
/// Unicode off, `.` matches `\n`, multi-line anchors, [`REGEX_SIZE_LIMIT`] and
/// [`DFA_CACHE_CAPACITY`]. `pattern` must already be translated ([`translate`]).
pub fn builder(pattern: &str) -> RegexBuilder {
    let mut b = RegexBuilder::new(pattern);
    b.unicode(false)
        .dot_matches_new_line(true)
        .multi_line(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(DFA_CACHE_CAPACITY);
    b
}

pub(crate) fn regex_error(e: regex::Error) -> String {
    match e {
        regex::Error::CompiledTooBig(limit) => {
            format!("pattern too large: its compiled form exceeds {limit} bytes")
        }
        regex::Error::Syntax(msg) => format!("invalid regular expression: {msg}"),
        other => format!("invalid regular expression: {other}"),
    }
}

pub(crate) const BACKTRACKING: &str = "needs a backtracking regex engine, which Palisade refuses \
     (only linear-time regexes are allowed)";

fn refuse(what: &str, at: usize) -> String {
    format!("{what} at byte {at} {BACKTRACKING}")
}

/// PCRE `\h` in non-UTF mode: tab, space, no-break space.
const HSPACE: &str = r"\x09\x20\xA0";
/// PCRE `\v` in non-UTF mode: LF, VT, FF, CR, NEL.
const VSPACE: &str = r"\x0A-\x0D\x85";

/// Translates a PCRE pattern (as ModSecurity compiles it: no UTF mode) into an
/// equivalent `regex` crate pattern, or explains why it cannot be run by a
/// linear-time engine. See the module documentation for the rules.
///
/// Patterns that [`Rx`] runs with one of its exact linear-time evaluations
/// (lookaround guards, possessive quantifiers whose follow set overlaps, the
/// pattern table of `rx_compat`) have no single equivalent `regex` pattern: they get
/// an error here; [`Rx::new`] accepts them.
pub fn translate(pcre: &str) -> Result<String, String> {
    let rx = Rx::new(pcre)?;
    if rx.regex_is_exact() {
        Ok(rx.pattern().to_string())
    } else {
        Err(
            "the pattern needs Palisade's guarded evaluation (lookaround, possessive \
             quantifier or backreference): it has no single equivalent `regex` pattern"
                .to_string(),
        )
    }
}

/// What the translator produced.
#[derive(Debug)]
pub(crate) struct Translation {
    /// The pattern in `regex` syntax, with lookarounds left out (read as always
    /// true), possessive quantifiers and atomic groups read as greedy ones, and each
    /// backreference replaced by a copy of its group's sub-pattern. A value that
    /// matches the PCRE pattern matches this one (it is exact when the pattern has
    /// none of these features).
    pub pattern: String,
    /// Offsets in `pattern` of the `^` assertions.
    pub carets: Vec<usize>,
    /// When the pattern has lookarounds, possessive quantifiers or atomic groups:
    /// `pattern` with marker groups (see [`MARK_LOOK`], [`MARK_POSSESSIVE`],
    /// [`MARK_ATOMIC`]) that give their place and content, for the analyses of
    /// `rx_compat`. Marker groups are capture groups, so group numbers in this
    /// pattern are not the PCRE ones.
    pub marked: Option<String>,
    /// The kind of each lookaround, by marker number.
    pub lookarounds: Vec<LookKind>,
    /// Whether the pattern has possessive quantifiers or atomic groups.
    pub possessive: bool,
    /// The refusal for the first backreference, if any: backreferences are only run
    /// for the patterns of the table in `rx_compat`.
    pub backreference: Option<String>,
}

/// Name prefix of the marker group that holds the content of lookaround number N
/// (`palisade.look.N`). PCRE group names are made of word characters only, so no
/// translated name can take this form.
pub(crate) const MARK_LOOK: &str = "palisade.look.";
/// Name prefix of the empty marker group that follows a possessive repetition.
pub(crate) const MARK_POSSESSIVE: &str = "palisade.possessive.";
/// Name prefix of the marker group that replaces an atomic group `(?>...)`.
pub(crate) const MARK_ATOMIC: &str = "palisade.atomic.";

/// The four kinds of PCRE lookaround.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LookKind {
    /// `(?=...)`
    Ahead,
    /// `(?!...)`
    NotAhead,
    /// `(?<=...)`
    Behind,
    /// `(?<!...)`
    NotBehind,
}

impl LookKind {
    /// Whether the lookaround looks at the bytes before the current position.
    pub(crate) fn is_behind(self) -> bool {
        matches!(self, LookKind::Behind | LookKind::NotBehind)
    }

    /// Whether the lookaround succeeds when its content matches.
    pub(crate) fn is_positive(self) -> bool {
        matches!(self, LookKind::Ahead | LookKind::Behind)
    }
}

/// Runs the translator.
pub(crate) fn translate_full(pcre: &str) -> Result<Translation, String> {
    let mut t = Translator {
        src: pcre.as_bytes(),
        pos: 0,
        out: String::with_capacity(pcre.len() + 16),
        carets: Vec::new(),
        item_start: 0,
        groups: Vec::new(),
        edits: Vec::new(),
        lookarounds: Vec::new(),
        markers: 0,
        possessive: false,
        look_depth: 0,
        capture_count: 0,
        group_texts: Vec::new(),
        backreference: None,
    };
    t.run()?;
    // An unclosed lookaround, even with other groups opened inside it left unclosed
    // too: its text is still apart from the rest.
    if let Some(at) = t.groups.iter().rev().find_map(|g| match g.kind {
        GroupKind::Look { .. } => Some(g.at),
        _ => None,
    }) {
        return Err(format!("missing `)` for the lookaround at byte {at}"));
    }
    let marked = (!t.edits.is_empty()).then(|| {
        let extra: usize = t.edits.iter().map(|e| e.insert.len()).sum();
        let mut m = String::with_capacity(t.out.len() + extra);
        let mut last = 0;
        for e in &t.edits {
            m.push_str(&t.out[last..e.at]);
            m.push_str(&e.insert);
            last = e.at + e.remove;
        }
        m.push_str(&t.out[last..]);
        m
    });
    Ok(Translation {
        pattern: t.out,
        carets: t.carets,
        marked,
        lookarounds: t.lookarounds,
        possessive: t.possessive,
        backreference: t.backreference,
    })
}

struct Translator<'a> {
    src: &'a [u8],
    pos: usize,
    out: String,
    /// Offsets in `out` of the `^` assertions emitted.
    carets: Vec<usize>,
    /// Offset in `out` where the last complete item (what a quantifier applies to)
    /// starts.
    item_start: usize,
    /// The groups open at `pos`.
    groups: Vec<Group>,
    /// Edits that turn `out` into the marked pattern, in offset order.
    edits: Vec<Edit>,
    /// Kinds of the lookarounds met so far.
    lookarounds: Vec<LookKind>,
    /// Possessive and atomic markers emitted so far.
    markers: usize,
    /// Whether a possessive quantifier or an atomic group was met.
    possessive: bool,
    /// How many lookarounds are open (0 or 1: nesting is refused).
    look_depth: usize,
    /// Capture groups opened so far (PCRE numbers them in that order).
    capture_count: usize,
    /// Translated sub-pattern of each closed capture group (index = number - 1),
    /// `None` while open or when it holds other capture groups.
    group_texts: Vec<Option<String>>,
    /// The refusal message for the first backreference.
    backreference: Option<String>,
}

/// An open group.
struct Group {
    /// Where the group starts in `out` (for a lookaround: in the buffer it saved).
    start: usize,
    /// Offset of its `(` in the PCRE pattern, for messages.
    at: usize,
    kind: GroupKind,
}

enum GroupKind {
    /// A group that is not a capture group (`(?:`, `(?i:`).
    Plain,
    /// Capture group number `n`; `captures_before` is the capture count when it opened.
    Capture { n: usize, captures_before: usize },
    /// `(?>`: marked as `(?P<palisade.atomic.N>`.
    Atomic,
    /// A lookaround: its content is translated into a fresh `out`; `saved` is the
    /// outer one.
    Look { kind: LookKind, saved: String },
}

/// Replace `remove` bytes at `at` in `out` with `insert`, in the marked pattern.
struct Edit {
    at: usize,
    remove: usize,
    insert: String,
}

/// One element of a character class.
enum ClassItem {
    Byte(u8),
    /// Already in `regex` class syntax (`\d`, `[:alpha:]`, a nested class...).
    Set(String),
}

impl Translator<'_> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.src.get(self.pos + ahead).copied()
    }

    fn push_byte(&mut self, b: u8) {
        if b.is_ascii_alphanumeric() {
            self.out.push(char::from(b));
        } else {
            let _ = write!(self.out, "\\x{b:02X}");
        }
    }

    fn run(&mut self) -> Result<(), String> {
        // Whether the previous token was a quantifier (to spot possessive `+`).
        let mut after_quantifier = false;
        // Whether the previous token was a lookaround (which may not be quantified).
        let mut after_look = false;
        while let Some(c) = self.peek(0) {
            let start = self.pos;
            match c {
                b'\\' => {
                    self.item_start = self.out.len();
                    self.escape()?;
                }
                b'[' => {
                    self.item_start = self.out.len();
                    self.class()?;
                }
                b'(' => self.group_open()?,
                b')' => {
                    after_look = self.group_close()?;
                    after_quantifier = false;
                    continue;
                }
                b'*' | b'+' | b'?' | b'{' if after_look => {
                    if c != b'{' || counted_repetition(&self.src[self.pos..]).is_some() {
                        return Err(format!(
                            "quantifier at byte {start} after a lookaround is not supported"
                        ));
                    }
                    self.item_start = self.out.len();
                    self.out.push_str(r"\{");
                    self.pos += 1;
                }
                b'*' | b'+' | b'?' => {
                    if after_quantifier && c == b'+' {
                        self.possessive_mark(start)?;
                        self.pos += 1;
                        after_quantifier = false;
                        continue;
                    }
                    self.out.push(char::from(c));
                    self.pos += 1;
                    // `??`, `*?`... make the quantifier lazy; nothing may follow.
                    after_quantifier = !(after_quantifier && c == b'?');
                    continue;
                }
                b'{' => {
                    if let Some(len) = counted_repetition(&self.src[self.pos..]) {
                        // A repetition right after another one is left for `regex`
                        // to report.
                        self.out
                            .push_str(ascii(&self.src[self.pos..self.pos + len]));
                        self.pos += len;
                        after_quantifier = true;
                        continue;
                    }
                    self.item_start = self.out.len();
                    self.out.push_str(r"\{");
                    self.pos += 1;
                }
                b'}' => {
                    self.item_start = self.out.len();
                    self.out.push_str(r"\}");
                    self.pos += 1;
                }
                b'^' => {
                    if self.look_depth == 0 {
                        self.carets.push(self.out.len());
                    }
                    self.item_start = self.out.len();
                    self.out.push('^');
                    self.pos += 1;
                }
                0x80..=0xFF => {
                    self.item_start = self.out.len();
                    self.push_byte(c);
                    self.pos += 1;
                }
                _ => {
                    self.item_start = self.out.len();
                    self.out.push(char::from(c));
                    self.pos += 1;
                }
            }
            after_quantifier = false;
            after_look = false;
        }
        Ok(())
    }

    /// A possessive `+` at byte `at`, after a quantifier: the quantifier stays
    /// (greedy) and an empty marker group follows it in the marked pattern.
    fn possessive_mark(&mut self, at: usize) -> Result<(), String> {
        if self.look_depth > 0 {
            return Err(refuse("possessive quantifier inside a lookaround", at));
        }
        self.possessive = true;
        let n = self.markers;
        self.markers += 1;
        self.edits.push(Edit {
            at: self.out.len(),
            remove: 0,
            insert: format!("(?P<{MARK_POSSESSIVE}{n}>)"),
        });
        Ok(())
    }

    /// `(`: plain groups pass through; lookarounds and atomic groups are marked
    /// (see [`Translation`]); other PCRE-only group kinds are refused.
    fn group_open(&mut self) -> Result<(), String> {
        let at = self.pos;
        let start = self.out.len();
        match self.peek(1) {
            Some(b'?') => {}
            Some(b'*') => return Err(refuse("backtracking control verb `(*...)`", at)),
            _ => {
                self.open_capture(at)?;
                self.out.push('(');
                self.pos += 1;
                return Ok(());
            }
        }
        let look = match (self.peek(2), self.peek(3)) {
            (Some(b'='), _) => Some((LookKind::Ahead, 3)),
            (Some(b'!'), _) => Some((LookKind::NotAhead, 3)),
            (Some(b'<'), Some(b'=')) => Some((LookKind::Behind, 4)),
            (Some(b'<'), Some(b'!')) => Some((LookKind::NotBehind, 4)),
            _ => None,
        };
        if let Some((kind, len)) = look {
            if self.look_depth > 0 {
                return Err(refuse("lookaround inside a lookaround", at));
            }
            self.look_depth += 1;
            let saved = std::mem::take(&mut self.out);
            self.groups.push(Group {
                start,
                at,
                kind: GroupKind::Look { kind, saved },
            });
            self.pos += len;
            return Ok(());
        }
        match self.peek(2) {
            Some(b'#') => {
                // Comment: skipped up to the next `)`.
                let rest = &self.src[self.pos..];
                let Some(end) = rest.iter().position(|&b| b == b')') else {
                    return Err(format!("unterminated comment `(?#` at byte {at}"));
                };
                self.pos += end + 1;
                Ok(())
            }
            Some(b'>') => {
                if self.look_depth > 0 {
                    return Err(refuse("atomic group `(?>` inside a lookaround", at));
                }
                self.possessive = true;
                let n = self.markers;
                self.markers += 1;
                self.edits.push(Edit {
                    at: start,
                    remove: 3,
                    insert: format!("(?P<{MARK_ATOMIC}{n}>"),
                });
                self.groups.push(Group {
                    start,
                    at,
                    kind: GroupKind::Atomic,
                });
                self.out.push_str("(?:");
                self.pos += 3;
                Ok(())
            }
            Some(b'|') => Err(format!(
                "branch reset group `(?|` at byte {at} is not supported"
            )),
            Some(b'(') => Err(refuse("conditional group `(?(`", at)),
            Some(b'C') => Err(format!("callout `(?C` at byte {at} is not supported")),
            Some(b'R') | Some(b'&') | Some(b'+') | Some(b'0'..=b'9') => {
                Err(refuse("recursion or subroutine call", at))
            }
            Some(b'-') if matches!(self.peek(3), Some(b'0'..=b'9')) => {
                Err(refuse("recursion or subroutine call", at))
            }
            Some(b'P') => match self.peek(3) {
                Some(b'=') => Err(refuse("backreference `(?P=name)`", at)),
                Some(b'>') => Err(refuse("subroutine call `(?P>name)`", at)),
                _ => {
                    if self.peek(3) == Some(b'<') {
                        self.open_capture(at)?;
                    } else {
                        self.groups.push(Group {
                            start,
                            at,
                            kind: GroupKind::Plain,
                        });
                    }
                    self.out.push_str("(?P");
                    self.pos += 3;
                    Ok(())
                }
            },
            Some(b'<') => {
                // `(?<name>...)`: a named capture group.
                self.open_capture(at)?;
                self.out.push_str("(?");
                self.pos += 2;
                Ok(())
            }
            Some(b'\'') => {
                // `(?'name'...)`: the `regex` crate spells it `(?<name>...)`.
                let rest = &self.src[self.pos + 3..];
                let Some(end) = rest.iter().position(|&b| b == b'\'') else {
                    return Err(format!("unterminated group name at byte {at}"));
                };
                self.open_capture(at)?;
                self.out.push_str("(?<");
                self.out.push_str(ascii(&rest[..end]));
                self.out.push('>');
                self.pos += 3 + end + 1;
                Ok(())
            }
            _ => {
                // Flags (`(?i)`, `(?i:`, `(?-s)`) and non-capturing groups: the rest
                // is plain text that `regex` understands or rejects. A flag setting
                // such as `(?i)` opens no group.
                let flags = self.src[self.pos + 2..]
                    .iter()
                    .take_while(|b| b.is_ascii_alphabetic() || **b == b'-' || **b == b'^')
                    .count();
                if self.src.get(self.pos + 2 + flags) != Some(&b')') {
                    self.groups.push(Group {
                        start,
                        at,
                        kind: GroupKind::Plain,
                    });
                }
                self.out.push_str("(?");
                self.pos += 2;
                Ok(())
            }
        }
    }

    /// Opens capture group number `capture_count + 1` (its `(` is not written yet).
    fn open_capture(&mut self, at: usize) -> Result<(), String> {
        if self.look_depth > 0 {
            return Err(format!(
                "capture group at byte {at} inside a lookaround is not supported"
            ));
        }
        let before = self.capture_count;
        self.capture_count += 1;
        self.group_texts.push(None);
        self.groups.push(Group {
            start: self.out.len(),
            at,
            kind: GroupKind::Capture {
                n: self.capture_count,
                captures_before: before,
            },
        });
        Ok(())
    }

    /// `)`: closes the innermost group. Returns whether it was a lookaround.
    fn group_close(&mut self) -> Result<bool, String> {
        self.pos += 1;
        let Some(group) = self.groups.pop() else {
            // Unbalanced: left for `regex` to report.
            self.out.push(')');
            return Ok(false);
        };
        match group.kind {
            GroupKind::Look { kind, saved } => {
                let inner = std::mem::replace(&mut self.out, saved);
                self.look_depth -= 1;
                let n = self.lookarounds.len();
                self.lookarounds.push(kind);
                self.edits.push(Edit {
                    at: self.out.len(),
                    remove: 0,
                    insert: format!("(?P<{MARK_LOOK}{n}>{inner})"),
                });
                self.item_start = self.out.len();
                Ok(true)
            }
            GroupKind::Capture { n, captures_before } => {
                self.out.push(')');
                if self.capture_count == n && captures_before + 1 == n {
                    // The sub-pattern, without the group's own parentheses and
                    // name (named groups: after the `>`).
                    let text = &self.out[group.start + 1..self.out.len() - 1];
                    let text = match text.strip_prefix('?') {
                        Some(named) => named.split_once('>').map_or("", |(_, t)| t),
                        None => text,
                    };
                    if let Some(slot) = self.group_texts.get_mut(n - 1) {
                        *slot = Some(text.to_string());
                    }
                }
                self.item_start = group.start;
                Ok(false)
            }
            GroupKind::Plain | GroupKind::Atomic => {
                self.out.push(')');
                self.item_start = group.start;
                Ok(false)
            }
        }
    }

    /// An escape outside a character class.
    fn escape(&mut self) -> Result<(), String> {
        let at = self.pos;
        let Some(n) = self.peek(1) else {
            return Err("the pattern ends with a lone backslash".to_string());
        };
        self.pos += 2;
        match n {
            b'1'..=b'9' => {
                // Refused unless the pattern is in the table of `rx_compat`; the
                // translation (a superset) holds a copy of the group's sub-pattern.
                if self.backreference.is_none() {
                    self.backreference = Some(refuse("backreference", at));
                }
                let text = self
                    .group_texts
                    .get(usize::from(n - b'1'))
                    .and_then(Option::as_ref);
                match text {
                    Some(t) => {
                        let t = t.clone();
                        let _ = write!(self.out, "(?:{t})");
                    }
                    None => self.out.push_str(r"(?:[\x00-\xFF]*)"),
                }
            }
            b'k' | b'g' => return Err(refuse("backreference or subroutine call", at)),
            b'K' => return Err(refuse("match start reset `\\K`", at)),
            b'G' => return Err(refuse("`\\G` anchor", at)),
            b'Z' => {
                return Err(format!(
                    "`\\Z` at byte {at} (end of subject or before a final newline) has no \
                     linear-time equivalent here; use `\\z` or `$`"
                ));
            }
            b'd' | b'D' | b's' | b'S' | b'w' | b'W' | b'b' | b'B' | b'A' | b'z' => {
                self.out.push('\\');
                self.out.push(char::from(n));
            }
            b'h' => {
                let _ = write!(self.out, "[{HSPACE}]");
            }
            b'H' => {
                let _ = write!(self.out, "[^{HSPACE}]");
            }
            b'v' => {
                let _ = write!(self.out, "[{VSPACE}]");
            }
            b'V' => {
                let _ = write!(self.out, "[^{VSPACE}]");
            }
            b'R' => {
                let _ = write!(self.out, "(?:\\x0D\\x0A|[{VSPACE}])");
            }
            b'N' => self.out.push_str(r"[^\x0A]"),
            b'C' => self.out.push_str(r"[\x00-\xFF]"),
            b'Q' => {
                while self.pos < self.src.len() {
                    if self.src[self.pos] == b'\\' && self.peek(1) == Some(b'E') {
                        self.pos += 2;
                        break;
                    }
                    let b = self.src[self.pos];
                    self.item_start = self.out.len();
                    self.push_byte(b);
                    self.pos += 1;
                }
            }
            b'E' => {}
            _ => {
                let b = self.byte_escape(n, at)?;
                self.push_byte(b);
            }
        }
        Ok(())
    }

    /// Escapes that stand for one byte: `n` is the character after the backslash,
    /// `self.pos` is just after it. Reads any further digits.
    fn byte_escape(&mut self, n: u8, at: usize) -> Result<u8, String> {
        Ok(match n {
            b'0'..=b'7' => {
                // Octal: up to three digits in all (`\0nn` anywhere, `\nnn` inside
                // classes, where `\1` cannot be a backreference).
                let max_more = 2;
                let mut value = u32::from(n - b'0');
                let mut taken = 0;
                while taken < max_more {
                    match self.peek(0) {
                        Some(d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            self.pos += 1;
                            taken += 1;
                        }
                        _ => break,
                    }
                }
                u8::try_from(value)
                    .map_err(|_| format!("octal escape at byte {at} is larger than 0xFF"))?
            }
            b'x' => {
                if self.peek(0) == Some(b'{') {
                    let rest = &self.src[self.pos + 1..];
                    let Some(end) = rest.iter().position(|&b| b == b'}') else {
                        return Err(format!("unterminated `\\x{{` at byte {at}"));
                    };
                    let digits = &rest[..end];
                    if digits.is_empty() || !digits.iter().all(u8::is_ascii_hexdigit) {
                        return Err(format!("invalid hexadecimal escape at byte {at}"));
                    }
                    let value = u32::from_str_radix(ascii(digits), 16).map_err(|_| {
                        format!("hexadecimal escape at byte {at} is larger than 0xFF")
                    })?;
                    self.pos += end + 2;
                    u8::try_from(value).map_err(|_| {
                        format!(
                            "hexadecimal escape at byte {at} is larger than 0xFF (patterns \
                             are byte strings, as in ModSecurity)"
                        )
                    })?
                } else {
                    let mut value = 0u8;
                    for _ in 0..2 {
                        match self.peek(0) {
                            Some(d) if d.is_ascii_hexdigit() => {
                                value = value * 16 + hex_value(d);
                                self.pos += 1;
                            }
                            _ => break,
                        }
                    }
                    value
                }
            }
            b'o' => {
                if self.peek(0) != Some(b'{') {
                    return Err(format!("`\\o` at byte {at} must be followed by `{{`"));
                }
                let rest = &self.src[self.pos + 1..];
                let Some(end) = rest.iter().position(|&b| b == b'}') else {
                    return Err(format!("unterminated `\\o{{` at byte {at}"));
                };
                let digits = &rest[..end];
                if digits.is_empty() || !digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                    return Err(format!("invalid octal escape at byte {at}"));
                }
                let value = u32::from_str_radix(ascii(digits), 8)
                    .ok()
                    .and_then(|v| u8::try_from(v).ok())
                    .ok_or_else(|| format!("octal escape at byte {at} is larger than 0xFF"))?;
                self.pos += end + 2;
                value
            }
            b'c' => {
                let Some(x) = self.peek(0).filter(u8::is_ascii) else {
                    return Err(format!(
                        "`\\c` at byte {at} must be followed by an ASCII character"
                    ));
                };
                self.pos += 1;
                x.to_ascii_uppercase() ^ 0x40
            }
            b'e' => 0x1B,
            b'a' => 0x07,
            b'f' => 0x0C,
            b'n' => 0x0A,
            b'r' => 0x0D,
            b't' => 0x09,
            b'p' | b'P' | b'X' => {
                return Err(format!(
                    "Unicode escape `\\{}` at byte {at} is not supported (patterns are \
                     byte strings, as in ModSecurity)",
                    char::from(n)
                ));
            }
            _ if n.is_ascii_alphanumeric() => {
                return Err(format!(
                    "unrecognized escape `\\{}` at byte {at}",
                    char::from(n)
                ));
            }
            // Any other escaped byte (punctuation, space, non-ASCII) is itself.
            _ => n,
        })
    }

    /// A character class starting at `[`.
    fn class(&mut self) -> Result<(), String> {
        let at = self.pos;
        self.pos += 1;
        let negated = self.peek(0) == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let mut items: Vec<ClassItem> = Vec::new();
        let mut first = true;
        loop {
            let Some(c) = self.peek(0) else {
                return Err(format!("missing `]` for the character class at byte {at}"));
            };
            if c == b']' && !first {
                self.pos += 1;
                break;
            }
            first = false;
            if c == b'\\' && self.peek(1) == Some(b'Q') {
                self.pos += 2;
                while self.pos < self.src.len() {
                    if self.src[self.pos] == b'\\' && self.peek(1) == Some(b'E') {
                        self.pos += 2;
                        break;
                    }
                    items.push(ClassItem::Byte(self.src[self.pos]));
                    self.pos += 1;
                }
                continue;
            }
            if c == b'\\' && self.peek(1) == Some(b'E') {
                self.pos += 2;
                continue;
            }
            let item = self.class_item()?;
            // A range `a-z` needs single bytes on both sides and no `]` after `-`.
            if let ClassItem::Byte(lo) = item
                && self.peek(0) == Some(b'-')
                && !matches!(self.peek(1), Some(b']') | None)
            {
                self.pos += 1;
                match self.class_item()? {
                    ClassItem::Byte(hi) => {
                        if lo > hi {
                            return Err(format!(
                                "range out of order in the character class at byte {at}"
                            ));
                        }
                        let mut s = String::new();
                        push_class_byte(&mut s, lo);
                        s.push('-');
                        push_class_byte(&mut s, hi);
                        items.push(ClassItem::Set(s));
                    }
                    other => {
                        // PCRE reads `-` before a class escape as a literal.
                        items.push(ClassItem::Byte(lo));
                        items.push(ClassItem::Byte(b'-'));
                        items.push(other);
                    }
                }
                continue;
            }
            items.push(item);
        }
        self.out.push('[');
        if negated {
            self.out.push('^');
        }
        for item in items {
            match item {
                ClassItem::Byte(b) => push_class_byte(&mut self.out, b),
                ClassItem::Set(s) => self.out.push_str(&s),
            }
        }
        self.out.push(']');
        Ok(())
    }

    /// One element of a class (not a range), at `self.pos`.
    fn class_item(&mut self) -> Result<ClassItem, String> {
        let at = self.pos;
        let Some(c) = self.peek(0) else {
            return Err("missing `]` for a character class".to_string());
        };
        if c == b'[' && self.peek(1) == Some(b':') {
            // POSIX class `[:name:]` / `[:^name:]`, else a literal `[`.
            let rest = &self.src[self.pos + 2..];
            let end = rest.windows(2).position(|w| w == b":]");
            let name = end.map(|e| &rest[..e]);
            let bare = name.map(|n| n.strip_prefix(b"^").unwrap_or(n));
            if let (Some(end), Some(name), Some(bare)) = (end, name, bare)
                && !bare.is_empty()
                && bare.iter().all(u8::is_ascii_alphabetic)
            {
                if !POSIX_CLASSES.contains(&ascii(bare)) {
                    return Err(format!(
                        "unknown POSIX class `[:{}:]` at byte {at}",
                        String::from_utf8_lossy(name)
                    ));
                }
                self.pos += 2 + end + 2;
                return Ok(ClassItem::Set(format!("[:{}:]", ascii(name))));
            }
        }
        if c != b'\\' {
            self.pos += 1;
            return Ok(ClassItem::Byte(c));
        }
        let Some(n) = self.peek(1) else {
            return Err("the pattern ends with a lone backslash".to_string());
        };
        self.pos += 2;
        Ok(match n {
            b'd' | b'D' | b's' | b'S' | b'w' | b'W' => {
                ClassItem::Set(format!("\\{}", char::from(n)))
            }
            b'h' => ClassItem::Set(HSPACE.to_string()),
            b'v' => ClassItem::Set(VSPACE.to_string()),
            b'H' => ClassItem::Set(format!("[^{HSPACE}]")),
            b'V' => ClassItem::Set(format!("[^{VSPACE}]")),
            b'b' => ClassItem::Byte(0x08),
            b'8' | b'9' => ClassItem::Byte(n),
            b'B' | b'R' | b'N' | b'A' | b'z' | b'Z' | b'G' | b'K' | b'k' | b'g' | b'C' => {
                return Err(format!(
                    "escape `\\{}` at byte {at} is not allowed in a character class",
                    char::from(n)
                ));
            }
            _ => ClassItem::Byte(self.byte_escape(n, at)?),
        })
    }
}

const POSIX_CLASSES: [&str; 14] = [
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

/// A byte inside a class: alphanumerics as themselves, everything else as `\xHH`
/// (so that `regex`'s class operators `[`, `&&`, `--`, `~~` never appear).
fn push_class_byte(out: &mut String, b: u8) {
    if b.is_ascii_alphanumeric() {
        out.push(char::from(b));
    } else {
        let _ = write!(out, "\\x{b:02X}");
    }
}

/// If `s` starts with a PCRE counted repetition (`{n}`, `{n,}`, `{n,m}`), its length.
fn counted_repetition(s: &[u8]) -> Option<usize> {
    let mut i = 1;
    let digits = |i: &mut usize| {
        let start = *i;
        while s.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return None;
    }
    if s.get(i) == Some(&b',') {
        i += 1;
        digits(&mut i);
    }
    (s.get(i) == Some(&b'}')).then_some(i + 1)
}

fn hex_value(d: u8) -> u8 {
    match d {
        b'0'..=b'9' => d - b'0',
        b'a'..=b'f' => d - b'a' + 10,
        _ => d - b'A' + 10,
    }
}

/// Bytes known to be ASCII (checked by the caller's grammar) as `&str`; anything
/// else is shown lossily, which only affects error messages.
fn ascii(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or("\u{FFFD}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lowercase preimage of a pattern matches a value exactly when the pattern
    /// matches the value lowercased: literals and classes with small letters,
    /// capitals, letters and other bytes in one range, negated classes, `(?i)`, word
    /// boundaries and line anchors, repetitions.
    #[test]
    fn lowercase_preimage_matches_what_the_pattern_matches_lowercased() {
        let pcre = [
            r"select",
            r"SELECT",
            r"(?i)union\s+select",
            r"[A-Z]{2}",
            r"[0-z]x",
            r"[^a-z]{3}",
            r"\bon[a-z]+=",
            r"^abc$",
            r"(?:Java|php)\W",
            r"\x{ff}\x{80}[\x{c0}-\x{c1}]",
            r"a.{0,3}b",
        ];
        let pieces: &[&[u8]] = &[
            b"a",
            b"A",
            b"b",
            b"B",
            b"c",
            b"x",
            b"X",
            b"z",
            b"Z",
            b"0",
            b"9",
            b" ",
            b"=",
            b"\n",
            b";",
            b"\xff",
            b"\x80",
            b"\xc0",
            b"\xC1",
            b"_",
            b"-",
            b"select",
            b"SeLeCt",
            b"UNION",
            b"union ",
            b"On",
            b"onLoad",
            b"ABC",
            b"JAVA",
            b"php",
            b"Php",
            b"\xff\x80\xc1",
        ];
        let mut rng = crate::body::fuzz::XorShift(0x10_3e2);
        for p in pcre {
            let rx = Rx::new(p).expect("rx");
            let pre = rx.preimage(&[Effect::Lowercase]).expect("a preimage");
            let mut matched = 0;
            for _ in 0..3_000 {
                let len = rng.below(6);
                let v: Vec<u8> = (0..len)
                    .flat_map(|_| pieces[rng.below(pieces.len())].iter().copied())
                    .collect();
                let want = rx.regex().is_match(&v.to_ascii_lowercase());
                assert_eq!(pre.regex().is_match(&v), want, "{p} on {v:?}");
                matched += usize::from(want);
            }
            // Patterns that need capitals never match lowercased values; the others do.
            if !matches!(p, "SELECT" | "[A-Z]{2}") {
                assert!(matched > 0, "{p} matched nothing");
            }
        }
    }

    /// The preimage under a deletion matches a value exactly when the pattern
    /// matches the value with those bytes deleted: literals and classes that hold
    /// deleted bytes, start and end anchors (of text and of lines, the line ends being
    /// deleted), repetitions, a deletion after `t:lowercase`'s effect. A word boundary
    /// has no preimage.
    #[test]
    fn deletion_preimage_matches_what_the_pattern_matches_with_the_bytes_deleted() {
        let ws = crate::transforms::Transform::RemoveWhitespace
            .effect()
            .expect("an effect");
        let Effect::Delete(deleted) = ws else {
            panic!("removeWhitespace deletes bytes");
        };
        let pcre = [
            r"unionselect",
            r"union select",
            r"(?i)union\s*select",
            r"[a-c\s]{3}",
            r"^abc$",
            r"(?m)^ab$",
            r"\Aa|b\z",
            r"^$",
            r"a[^b]c",
            r"a.{0,2}b",
            r"(?:ab|c)+;",
        ];
        let pieces: &[&[u8]] = &[
            b"a",
            b"A",
            b"b",
            b"c",
            b"C",
            b";",
            b" ",
            b"\t",
            b"\n",
            b"\r",
            b"\x0b",
            b"\x0c",
            b"\xa0",
            b"\xc2",
            b"\xc2\xa0",
            b"x",
            b"union",
            b"UNION ",
            b"se lect",
            b"select",
            b"ab",
            b"a bc",
            b"abc",
        ];
        let mut rng = crate::body::fuzz::XorShift(0xde1_e7e);
        for (p, effects) in pcre
            .iter()
            .map(|p| (p, vec![ws]))
            .chain(pcre.iter().map(|p| (p, vec![ws, Effect::Lowercase])))
        {
            let rx = Rx::new(p).expect("rx");
            let pre = rx.preimage(&effects).expect("a preimage");
            let mut matched = 0;
            for _ in 0..3_000 {
                let len = rng.below(5);
                let raw: Vec<u8> = (0..len)
                    .flat_map(|_| pieces[rng.below(pieces.len())].iter().copied())
                    .collect();
                // The effects in reverse order, as the chain applied them.
                let mut v = raw.clone();
                for e in effects.iter().rev() {
                    v = match e {
                        Effect::Lowercase => v.to_ascii_lowercase(),
                        Effect::Delete(_) => v.iter().copied().filter(|&b| !deleted(b)).collect(),
                    };
                }
                let want = rx.regex().is_match(&v);
                assert_eq!(
                    pre.regex().is_match(&raw),
                    want,
                    "{p} {effects:?} on {raw:?}"
                );
                matched += usize::from(want);
            }
            // Patterns that need a deleted byte never match; the others do.
            if !matches!(*p, "union select" | r"[a-c\s]{3}") {
                assert!(matched > 0, "{p} matched nothing");
            }
        }
        assert!(Rx::new(r"\bselect").expect("rx").preimage(&[ws]).is_none());
    }

    fn rx(p: &str) -> Rx {
        match Rx::new(p) {
            Ok(r) => r,
            Err(e) => panic!("{p:?}: {e}"),
        }
    }

    fn err(p: &str) -> String {
        match Rx::new(p) {
            Ok(r) => panic!("{p:?} compiled to {:?}", r.pattern()),
            Err(e) => e,
        }
    }

    #[test]
    fn reference_manual_examples() {
        // SecRule REQUEST_HEADERS:User-Agent "@rx nikto"
        let r = rx("nikto");
        assert!(r.matches(b"Mozilla nikto/2.1", None));
        assert!(!r.matches(b"Mozilla NIKTO", None));
        // SecRule ARGS "@rx (?i)<script"
        let r = rx("(?i)<script");
        assert!(r.matches(b"x=<ScRiPt>", None));
        // SecRule REQUEST_LINE "@rx ^(?:get|post)" is case-sensitive by default
        let r = rx("^(?:GET|HEAD)$");
        assert!(r.matches(b"GET", None));
        assert!(!r.matches(b"get", None));
    }

    #[test]
    fn dotall_and_multiline() {
        let r = rx("a.b");
        assert!(r.matches(b"a\nb", None));
        let r = rx("^b$");
        assert!(r.matches(b"a\nb\nc", None));
        let r = rx("^abc$");
        assert!(r.matches(b"abc\n", None));
    }

    #[test]
    fn no_line_start_after_a_final_newline() {
        // PCRE (multi-line) has no line start after a newline that ends the value.
        let r = rx("^$");
        assert!(r.matches(b"", None));
        assert!(!r.matches(b"abc\n", None));
        assert!(r.matches(b"\n", None)); // `^` at 0, `$` before the newline
        assert!(r.matches(b"abc\n\nx", None)); // an empty line inside
        assert!(r.matches(b"abc\n\n", None)); // the empty line at offset 4
        let mut caps = Captures::new();
        assert!(!r.matches(b"abc\n", Some(&mut caps)));
        assert!(caps.is_empty());
        // CRS 920171 / 920275 shapes.
        assert!(rx("^0?$").matches(b"\n", None)); // `$` before the newline
        assert!(!rx("^(?:a|b)?$").matches(b"x\n", None));
        assert!(rx("^(?:a|b)?$").matches(b"x\na\n", None));
        // 920120 shape, used negated: a trailing newline must not make it match.
        let r = rx(r#"^(?:[^"';=])*$"#);
        assert!(!r.matches(b"bad\"name\n", None));
        assert!(r.matches(b"good name\n", None));
        // A branch without `^` can still match at the very end.
        assert!(rx("^$|$").matches(b"abc\n", None));
        assert!(rx("^x|\\n$").matches(b"abc\n", None));
        // Captures of a match found by the end check.
        let r = rx(r"(^)?(\b)?$");
        assert!(r.matches(b"a\n", Some(&mut caps)));
        assert_eq!(caps[0], b"".to_vec());
        // `^` inside the pattern followed only by optional items is refused.
        let e = err("a\\n^$");
        assert!(e.contains("final newline"), "{e}");
        // A `^` followed by something that consumes is fine anywhere.
        assert!(rx("a\\n^b").matches(b"a\nb", None));
        assert!(rx("(?:^|;)\\s*id$").matches(b"x; id\n", None));
    }

    #[test]
    fn empty_pattern_and_input() {
        assert!(rx("").matches(b"", None));
        assert!(rx("").matches(b"anything", None));
        assert!(rx("^$").matches(b"", None));
        assert!(!rx("a").matches(b"", None));
    }

    #[test]
    fn bytes_and_nul() {
        let r = rx(r"\x00");
        assert!(r.matches(b"a\0b", None));
        assert!(!r.matches(b"ab", None));
        let r = rx(r"[\x{80}-\x{ff}]");
        assert_eq!(r.pattern(), r"[\x80-\xFF]");
        assert!(r.matches(b"a\xC3b", None));
        assert!(!r.matches(b"plain ascii", None));
        let r = rx(r"\x{C0}\x{af}");
        assert!(r.matches(b"..\xC0\xAF..", None));
        // `.` matches any byte, including invalid UTF-8.
        assert!(rx("^.$").matches(b"\xFF", None));
        // Negated classes match bytes >= 0x80.
        assert!(rx("[^a-z]").matches(b"\xE9", None));
        // Non-ASCII characters in the pattern are their UTF-8 bytes (PCRE without
        // UTF mode), also in classes: `[´]` is the class of 0xC2 and 0xB4.
        let r = rx("[´]");
        assert_eq!(r.pattern(), r"[\xC2\xB4]");
        assert!(r.matches(b"\xB4", None));
        assert!(rx("é+").matches("caf\u{e9}".as_bytes(), None));
        // Short hex and octal escapes.
        assert!(rx(r"\xA").matches(b"\n", None));
        assert!(rx(r"\0").matches(b"\0", None));
        assert!(rx(r"\012").matches(b"\n", None));
        assert!(rx(r"[\12]").matches(b"\n", None));
        assert!(rx(r"\e").matches(b"\x1b", None));
        assert!(rx(r"\cA").matches(b"\x01", None));
    }

    #[test]
    fn pcre_specific_escapes() {
        // PCRE's \v is vertical whitespace, not just VT.
        let r = rx(r"a\vb");
        assert!(r.matches(b"a\nb", None));
        assert!(r.matches(b"a\x0bb", None));
        assert!(!r.matches(b"a b", None));
        let r = rx(r"[\s\v]");
        assert!(r.matches(b"\x85", None));
        assert!(rx(r"\h").matches(b"\xA0", None));
        assert!(!rx(r"\H").matches(b" \t", None));
        assert!(rx(r"^\R$").matches(b"\r\n", None));
        assert!(!rx(r"\N").matches(b"\n", None));
        // \b in a class is a backspace.
        assert!(rx(r"[\b]").matches(b"\x08", None));
        // Escaped punctuation is literal, even where `regex` gives it a meaning.
        let r = rx(r"\<script\>");
        assert!(r.matches(b"<script>", None));
        assert!(rx(r"\/etc\/passwd").matches(b"/etc/passwd", None));
        assert!(rx(r"a\Q.*\Eb").matches(b"a.*b", None));
        assert!(!rx(r"a\Q.*\Eb").matches(b"axxb", None));
        assert!(rx(r"a(?#comment)b").matches(b"ab", None));
    }

    #[test]
    fn literal_braces_and_class_operators() {
        // `{` that is not a repetition is literal in PCRE.
        assert!(rx(r"%{tx.x}").matches(b"%{tx.x}", None));
        assert!(rx(r"a{,3}").matches(b"a{,3}", None));
        assert!(rx(r"a{2}").matches(b"aa", None));
        assert!(!rx(r"^a{2,3}$").matches(b"aaaa", None));
        // `&&`, `--`, `~~` and `[` are literals in a PCRE class.
        let r = rx(r"[&&]");
        assert!(r.matches(b"&", None));
        assert!(!r.matches(b"a", None));
        assert!(rx(r"[~~]").matches(b"~", None));
        assert!(rx(r"[a[]").matches(b"[", None));
        assert!(rx(r"[\w-.]").matches(b"-", None));
        assert!(rx(r"[-a]").matches(b"-", None));
        assert!(rx(r"[a-]").matches(b"-", None));
        assert!(rx(r"[]a]").matches(b"]", None));
        assert!(rx(r"[^]a]").matches(b"b", None));
        assert!(!rx(r"[^]a]").matches(b"]", None));
        assert!(rx(r"[[:digit:]]").matches(b"7", None));
        assert!(rx(r"[[:^alpha:]]").matches(b"7", None));
        // `[:` that does not open a POSIX class is a literal `[` and `:`.
        let r = rx(r"[[:a]x:]");
        assert!(r.matches(b":x:]", None));
        assert!(!r.matches(b"x:]", None));
        assert!(err(r"[[:nope:]]").contains("POSIX"));
        assert!(rx(r"[a\-z]").matches(b"-", None));
        assert!(!rx(r"[a\-z]").matches(b"m", None));
    }

    #[test]
    fn backtracking_features_are_refused() {
        for p in [
            r"(a)\1",
            r"(?<n>a)\k<n>",
            r"(?P<n>a)(?P=n)",
            r"a(?=b)c",
            r"(?:a(?!b))+",
            r"(?<=a+)b",
            r"(?<!a)b+",
            r"(?>a|ab)c",
            r"a?+a",
            r"a{1,3}+a",
            r"(?:ab)++",
            r"(a|b(?R))",
            r"(a)(?1)",
            r"(*SKIP)a",
            r"a\Kb",
        ] {
            let e = err(p);
            assert!(e.contains("backtracking"), "{p}: {e}");
        }
        assert!(err(r"a\Z").contains(r"\Z"));
        // Lazy quantifiers are fine: `*?` is not possessive.
        assert!(rx(r"a*?b").matches(b"aab", None));
        assert!(rx(r"a+?b").matches(b"aab", None));
        // Escaped `*` or `?` followed by `+` is a plain repetition.
        assert!(rx(r"\*+x").matches(b"**x", None));
        assert!(rx(r"\?+$").matches(b"??", None));
        assert!(rx(r"[ab]+").matches(b"ab", None));
    }

    #[test]
    fn evaluated_features_translate_to_a_superset() {
        // Possessive quantifiers that cannot give anything back to what follows
        // are greedy ones: the translation is exact.
        let r = rx(r"\s*+;(?>a+)b");
        assert!(r.regex_is_exact());
        assert_eq!(r.pattern(), r"\s*;(?:a+)b");
        assert_eq!(translate(r"a++b").as_deref(), Ok("a+b"));
        // Lookarounds are left out, backreferences (in the table) copy their group.
        let r = rx(r"<\?(?!xml)");
        assert!(!r.regex_is_exact());
        assert_eq!(r.pattern(), r"<\x3F");
        assert!(translate(r"<\?(?!xml)").is_err());
        let r = rx(r"x*+x");
        assert!(!r.regex_is_exact());
        assert_eq!(r.pattern(), "x*x");
        // The marked pattern gives the analyses their place.
        let t = translate_full(r"(a)(?<!b)c*+\1(?>d)").expect("translates");
        assert_eq!(t.pattern, r"(a)c*(?:a)(?:d)");
        assert_eq!(
            t.marked.as_deref(),
            Some(
                "(a)(?P<palisade.look.0>b)c*(?P<palisade.possessive.0>)(?:a)\
                 (?P<palisade.atomic.1>d)"
            )
        );
        assert_eq!(t.lookarounds, vec![LookKind::NotBehind]);
        assert!(t.possessive);
        assert!(t.backreference.is_some());
    }

    #[test]
    fn other_errors_carry_the_regex_message() {
        let e = err("a(b");
        assert!(e.starts_with("invalid regular expression"), "{e}");
        assert!(err("[a-").contains("missing `]`"));
        assert!(err(r"\x{100}").contains("larger than 0xFF"));
        assert!(err(r"\p{L}").contains("Unicode"));
        assert!(err(r"\i").contains("unrecognized escape"));
        assert!(err(r"[z-a]").contains("out of order"));
        assert!(err("a\\").contains("backslash"));
        // An unclosed lookaround is an error, whether or not a group opened inside
        // it is left unclosed too (the latter once panicked; fuzzing found it).
        assert!(err("a(?!b").contains("missing `)` for the lookaround at byte 1"));
        let e = err("a(?!b(?:c|d");
        assert!(
            e.contains("missing `)` for the lookaround at byte 1"),
            "{e}"
        );
        assert!(err("(?i:x(?=y(?:z").contains("lookaround at byte 5"));
    }

    #[test]
    fn captures() {
        let r = rx(r"(\d+)-(x)?(\d+)");
        let mut caps = vec![b"stale".to_vec(); 12];
        assert!(r.matches(b"id 12-34 end", Some(&mut caps)));
        assert_eq!(
            caps,
            vec![b"12-34".to_vec(), b"12".to_vec(), vec![], b"34".to_vec()]
        );

        // Trailing groups that did not take part are not reported (PCRE's count).
        let r = rx(r"(a)|(b)");
        let mut caps = Captures::new();
        assert!(r.matches(b"a", Some(&mut caps)));
        assert_eq!(caps, vec![b"a".to_vec(), b"a".to_vec()]);
        assert!(r.matches(b"b", Some(&mut caps)));
        assert_eq!(caps, vec![b"b".to_vec(), vec![], b"b".to_vec()]);

        // At most 10 values (TX.0 to TX.9).
        let r = rx("(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)");
        assert!(r.matches(b"abcdefghijk", Some(&mut caps)));
        assert_eq!(caps.len(), 10);
        assert_eq!(caps[9], b"i".to_vec());

        // No match leaves the captures alone.
        let mut caps = vec![b"keep".to_vec()];
        assert!(!rx("zzz").matches(b"abc", Some(&mut caps)));
        assert_eq!(caps, vec![b"keep".to_vec()]);

        // Named groups are numbered like the others.
        let r = rx(r"(?<word>[a-z]+)=(?'num'\d+)");
        assert!(r.matches(b"x=1", Some(&mut caps)));
        assert_eq!(caps, vec![b"x=1".to_vec(), b"x".to_vec(), b"1".to_vec()]);
    }

    /// A pattern whose matches all start with a few literals of two bytes or more gets
    /// a prefix prefilter, others none; with it, every search finds the match it finds
    /// without it: values made of the patterns' own pieces (so that literals occur
    /// at the start, the end, after a newline, inside words and in other cases),
    /// whole and from an offset, with and without captures.
    #[test]
    fn prefix_prefilters_find_what_the_plain_lazy_dfa_finds() {
        let with: &[&str] = &[
            r"(?i)union.*?select.*?from",
            r"(?m)^(?:get|post)\s",
            r"java\.lang\.(?:runtime|processbuilder)",
            r"(?i)php://(?:stdin|input)",
            r"(?:__proto__|constructor)\s*\[",
            r"ab(c+)d|abx",
        ];
        let without: &[&str] = &[
            r"&[a-z]+;",
            // Its 64 spellings are cut back to the `<` they share.
            r"(?i)<script[^>]*>",
            r"(?i)\bon[a-z]+=",
            r"[a-z]{3}select",
            r"(?:a|bc)[0-9]*x",
            r"x*abc",
        ];
        for (patterns, expected) in [(with, true), (without, false)] {
            for p in patterns {
                let hir = parse_hir(&translate(p).expect(p)).expect(p);
                assert_eq!(prefix_prefilter(&hir).is_some(), expected, "{p}");
            }
        }
        let pieces: &[&[u8]] = &[
            b"union",
            b"UNION",
            b"Select",
            b"select",
            b" from",
            b"get ",
            b"GET ",
            b"post\t",
            b"\n",
            b"java.lang.",
            b"Runtime",
            b"processbuilder",
            b"<script",
            b"<SCRIPT x>",
            b">",
            b"__proto__",
            b"constructor",
            b" [",
            b"[",
            b"abccd",
            b"abx",
            b"ab",
            b"&amp;",
            b"onload=",
            b"xxabc",
            b"de",
            b"bcde",
            b" ",
            b"q",
        ];
        let mut rng = crate::body::fuzz::XorShift(0x2545_F491_4F6C_DD1D);
        let values: Vec<Vec<u8>> = (0..600).map(|_| rng.value_of(pieces, 12, 16)).collect();
        for p in with.iter().chain(without) {
            let hir = parse_hir(&translate(p).expect(p)).expect(p);
            let fast = compile_hir(&hir).expect(p);
            let plain = meta::Builder::new()
                .configure(engine_config())
                .build_from_hir(&hir)
                .expect(p);
            let (mut a, mut b) = (fast.create_captures(), plain.create_captures());
            for v in &values {
                for start in [0, v.len() / 3] {
                    let input = Input::new(v).range(start..);
                    assert_eq!(
                        fast.is_match(input.clone()),
                        plain.is_match(input.clone()),
                        "{p} on {v:?}"
                    );
                    assert_eq!(
                        fast.find(input.clone()),
                        plain.find(input.clone()),
                        "{p} on {v:?}"
                    );
                    fast.search_captures(&input, &mut a);
                    plain.search_captures(&input, &mut b);
                    let groups = |c: &Groups| {
                        (0..c.group_len())
                            .map(|i| c.get_group(i))
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(groups(&a), groups(&b), "{p} on {v:?}");
                }
            }
        }
    }

    #[test]
    fn regex_set_agrees() {
        let a = rx(r"(?i)union\s+select");
        let b = rx(r"[\x{80}-\x{ff}]");
        let set = super::super::rx_set::RxSet::new([a.pattern(), b.pattern()]).expect("set");
        let hits: Vec<usize> = set.matches(b"UNION  SELECT \xFF");
        assert_eq!(hits, vec![0, 1]);
        assert!(!set.is_match(b"benign"));
    }
}
