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
//! evaluation instead (the rules and proofs are in `compat`):
//!
//! - possessive quantifiers (`*+`, `++`, `?+`, `{n,m}+`) and atomic groups (`(?>`)
//!   around a single byte class: read as greedy when nothing that can follow them
//!   can start with one of their bytes, else (without an upper bound) run on the
//!   product of the automaton with "the next byte is not in the class";
//! - lookaheads and lookbehinds (`(?=`, `(?!`, `(?<=`, `(?<!`) of bounded length,
//!   at the start or end of a fixed-length top-level alternative: guards tested
//!   around each occurrence of the alternative;
//! - backreferences, only in the patterns of the table in `compat` (CRS 3.3.4's
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
//! generated values (48 per pattern, 384 for the five evaluated with `compat`)
//! with PCRE2 10.42's verdict and group 0 (made by
//! `bench/pcre2/corpus.py`). Left out are the values on which PCRE2 stops at its
//! match limit and gives no verdict (27, all for 920201's
//! `^bytes=(?:(?:\d+)?-(?:\d+)?\s*,?\s*){63}`; libmodsecurity then reports no match,
//! and so does the engine on each of them, checked once by hand).

use regex_automata::meta::{self, Regex};
use regex_automata::util::captures::Captures as Groups;
use regex_automata::util::prefilter::Prefilter;
use regex_automata::{Input, MatchKind};
use regex_syntax::hir::{Hir, HirKind, Look, literal};
use std::sync::Arc;

use crate::compat::{self, Compat};
use crate::preimage::Effect;
use crate::translate::translate_full;
use crate::vocab::{
    Captures, DFA_CACHE_CAPACITY, MAX_CAPTURES, REGEX_SIZE_LIMIT, RxError, fill_captures, parse_hir,
};

/// Capacity of one lazy DFA cache of a prefilter set (`RxSet` of the `patternsets` crate;
/// since the literal gate it holds only the patterns without selective factors, six
/// in CRS v4's largest set, which used 1.3 MiB over 2,000 varying GETs). Set when the
/// DFA held every pattern, whose states are unions over many: with 2 MiB, CRS v4's largest group
/// (54 patterns) gives up on the 20 KiB JSON document of the benchmark corpus, which
/// then takes more than ten times longer; 4 MiB is enough for it and for the adversarial benchmark, and
/// this leaves room on top. A set whose fixed per-cache structures alone approach it
/// gets twice its minimum instead.
pub const SET_CACHE_CAPACITY: usize = 8 * 1024 * 1024;

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
    /// evaluation (see `compat`).
    compat: Option<Compat>,
}

/// Compiles a translated pattern with the settings every `@rx` pattern gets (see
/// [`builder`](crate::builder)), through the `regex` crate's own engine (`regex_automata::meta`) so
/// that the lazy DFA cache capacity and the caches themselves are under control.
pub fn compile(pattern: &str) -> Result<Regex, RxError> {
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
/// (`prefix_prefilter`), which its forward lazy DFA uses to skip ahead.
pub fn compile_hir(hir: &Hir) -> Result<Regex, RxError> {
    meta::Builder::new()
        .configure(engine_config().prefilter(prefix_prefilter(hir)))
        .build_from_hir(hir)
        .map_err(|e| match e.size_limit() {
            Some(limit) => RxError::TooLarge(limit),
            None => RxError::Invalid(e.to_string()),
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
    pub fn new(pcre: &str) -> Result<Rx, RxError> {
        let t = translate_full(pcre).map_err(RxError::Refused)?;
        let hir = parse_hir(&t.pattern)?;
        let regex = compile_hir(&hir)?;
        let compat = compat::build(pcre, &t).map_err(RxError::Refused)?;
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
                    return Err(RxError::Refused(
                        "a `^` that may be the last thing to match, in a pattern \
                         with a lookaround, a possessive quantifier or a backreference, \
                         cannot get PCRE's multi-line semantics (no line start after a \
                         final newline) here"
                            .to_string(),
                    ));
                }
                CaretRisk::Elsewhere => {
                    return Err(RxError::Refused(
                        "a `^` that follows other pattern items and may be the \
                         last thing to match cannot get PCRE's multi-line semantics (no \
                         line start after a final newline) in a linear-time engine; \
                         rewrite it, e.g. with `\\n` instead of `\\n^`"
                            .to_string(),
                    ));
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
    /// [`builder`](crate::builder) (for instance in an `RxSet` of the `patternsets` crate). A value
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
    /// pattern offers none (see `factors`).
    pub fn required_factors(&self) -> Option<Vec<Vec<u8>>> {
        crate::factors::required_factors(&parse_hir(self.pattern()).ok()?)
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
    pub fn preimage(&self, effects: &[Effect]) -> Option<Rx> {
        let pre = crate::preimage::preimage(&parse_hir(self.pattern()).ok()?, effects)?;
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

/// Translates a PCRE pattern (as ModSecurity compiles it: no UTF mode) into an
/// equivalent `regex` crate pattern, or explains why it cannot be run by a
/// linear-time engine. See the module documentation for the rules.
///
/// Patterns that [`Rx`] runs with one of its exact linear-time evaluations
/// (lookaround guards, possessive quantifiers whose follow set overlaps, the
/// pattern table of `compat`) have no single equivalent `regex` pattern: they get
/// an error here; [`Rx::new`] accepts them.
pub fn translate(pcre: &str) -> Result<String, RxError> {
    let rx = Rx::new(pcre)?;
    if rx.regex_is_exact() {
        Ok(rx.pattern().to_string())
    } else {
        Err(RxError::Refused(
            "the pattern needs Palisade's guarded evaluation (lookaround, possessive \
             quantifier or backreference): it has no single equivalent `regex` pattern"
                .to_string(),
        ))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::vocab::LookKind;

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
        let mut rng = detect::testkit::XorShift(0x10_3e2);
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
        // The bytes `t:removeWhitespace` deletes: C's `isspace`, the no-break space
        // and the first byte of its UTF-8 form.
        fn deleted(b: u8) -> bool {
            matches!(b, b'\t'..=b'\r' | b' ' | 0xa0 | 0xc2)
        }
        let ws = Effect::Delete(deleted);
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
        let mut rng = detect::testkit::XorShift(0xde1_e7e);
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

    /// `p` compiled, or a panic naming it (shared with `compat`'s tests).
    pub(crate) fn rx(p: &str) -> Rx {
        match Rx::new(p) {
            Ok(r) => r,
            Err(e) => panic!("{p:?}: {e}"),
        }
    }

    /// Why `p` is refused, or a panic naming what it compiled to.
    pub(crate) fn err(p: &str) -> String {
        match Rx::new(p) {
            Ok(r) => panic!("{p:?} compiled to {:?}", r.pattern()),
            Err(e) => e.to_string(),
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
        let mut rng = detect::testkit::XorShift(0x2545_F491_4F6C_DD1D);
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
}
