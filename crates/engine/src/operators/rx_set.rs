//! A set of translated `@rx` patterns that answers "which patterns match somewhere in
//! this value", for the prefilter (`crate::ruleset::prefilter`).
//!
//! The set only ever runs forward, unanchored searches without captures, so it is built
//! from one forward NFA without capture states, run by a lazy DFA.
//!
//! When the lazy DFA gives up on a value (its cache cleared too often: a long value
//! that walks a large set through many states), the set answers "every pattern may
//! match". That is always a correct answer for a prefilter, whose callers then run
//! each rule's own regex; the other way out, a PikeVM over the whole set's NFA, costs
//! time in proportion to the value's length times the set's thousands of states, and
//! took seconds on a 256 KiB argument.

use regex_automata::hybrid::dfa::{Cache as DfaCache, DFA};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::pool::Pool;
use regex_automata::util::prefilter::Prefilter;
use regex_automata::{Input, MatchKind, PatternID, PatternSet};
use regex_syntax::hir::{Hir, Properties};

use super::rx::{REGEX_SIZE_LIMIT, SET_CACHE_CAPACITY, parse_hir};

type CacheFn =
    Box<dyn Fn() -> DfaCache + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>;

/// A compiled set of translated patterns (see the module documentation).
pub struct RxSet {
    dfa: DFA,
    caches: Pool<DfaCache, CacheFn>,
    len: usize,
    /// The shortest match of any pattern: shorter values cannot match.
    min_len: usize,
}

impl std::fmt::Debug for RxSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxSet")
            .field("patterns", &self.len)
            .field("nfa_states", &self.dfa.get_nfa().states().len())
            .finish()
    }
}

impl RxSet {
    /// Compiles translated patterns (from [`Rx::pattern`](super::rx::Rx::pattern)),
    /// with the settings of [`Rx`](super::rx::Rx): Unicode off, `.` matches `\n`,
    /// multi-line anchors. Each pattern is parsed on its own, so only one pattern's
    /// syntax tree is alive at a time. The error is a human-readable reason.
    pub fn new<I, S>(patterns: I) -> Result<RxSet, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let hirs = patterns
            .into_iter()
            .map(|p| parse_hir(p.as_ref()))
            .collect::<Result<Vec<Hir>, String>>()?;
        RxSet::from_hirs(&hirs)
    }

    /// [`RxSet::new`] from parsed patterns (see [`parse_hir`]).
    pub(crate) fn from_hirs(hirs: &[Hir]) -> Result<RxSet, String> {
        RxSet::build(hirs, SET_CACHE_CAPACITY)
    }

    /// [`RxSet::from_hirs`] with a lazy DFA cache of `capacity` bytes (at least the
    /// minimum the set needs).
    fn build(hirs: &[Hir], capacity: usize) -> Result<RxSet, String> {
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .shrink(false)
                    .which_captures(WhichCaptures::None)
                    .nfa_size_limit(Some(REGEX_SIZE_LIMIT)),
            )
            .build_many_from_hir(hirs)
            .map_err(|e| match e.size_limit() {
                Some(limit) => {
                    format!("pattern set too large: its compiled form exceeds {limit} bytes")
                }
                None => format!("invalid regular expression: {e}"),
            })?;
        // The same prefilter and lazy DFA settings as `regex`'s sets.
        let pre = Prefilter::from_hirs_prefix(MatchKind::All, hirs);
        let config = DFA::config()
            .match_kind(MatchKind::All)
            .specialize_start_states(pre.is_some())
            .prefilter(pre)
            .unicode_word_boundary(true)
            .minimum_cache_clear_count(Some(3))
            .minimum_bytes_per_state(Some(10));
        // A large set needs more than the usual capacity just for its fixed parts.
        let minimum = config
            .get_minimum_cache_capacity(&nfa)
            .map_err(|e| format!("cannot build the automaton: {e}"))?;
        let dfa = DFA::builder()
            .configure(config.cache_capacity(capacity.max(2 * minimum)))
            .build_from_nfa(nfa)
            .map_err(|e| format!("cannot build the automaton: {e}"))?;
        let for_cache = dfa.clone();
        let props = Properties::union(hirs.iter().map(Hir::properties));
        Ok(RxSet {
            dfa,
            caches: Pool::new(Box::new(move || for_cache.create_cache())),
            len: hirs.len(),
            min_len: props.minimum_len().unwrap_or(0),
        })
    }

    /// The number of patterns.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set has no patterns.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// No pattern can match a value this short.
    fn impossible(&self, input: &[u8]) -> bool {
        input.len() < self.min_len
    }

    /// Whether some pattern may match somewhere in `input`: `false` proves that none
    /// does; `true` is exact unless the lazy DFA gave up (see the module
    /// documentation).
    pub fn is_match(&self, input: &[u8]) -> bool {
        if self.impossible(input) {
            return false;
        }
        let input = Input::new(input).earliest(true);
        let mut cache = self.caches.get();
        self.dfa
            .try_search_fwd(&mut cache, &input)
            .map_or(true, |m| m.is_some())
    }

    /// Adds to `hits` the patterns that may match somewhere in `input` (`hits` must
    /// have room for [`RxSet::len`] patterns): exactly those that do, or every
    /// pattern when the lazy DFA gave up.
    pub fn which_match(&self, input: &[u8], hits: &mut PatternSet) {
        if !self.try_which_match(input, hits) {
            for p in 0..self.len {
                if let Ok(id) = PatternID::new(p) {
                    let _ = hits.try_insert(id);
                }
            }
        }
    }

    /// Adds to `hits` exactly the patterns that match somewhere in `input`, and
    /// returns true; returns false when the lazy DFA gave up, leaving in `hits` only
    /// some of them (the caller must then not rely on `hits`).
    pub fn try_which_match(&self, input: &[u8], hits: &mut PatternSet) -> bool {
        if self.impossible(input) {
            return true;
        }
        let input = Input::new(input);
        let mut cache = self.caches.get();
        self.dfa
            .try_which_overlapping_matches(&mut cache, &input, hits)
            .is_ok()
    }

    /// The patterns that match somewhere in `input`, in order.
    pub fn matches(&self, input: &[u8]) -> Vec<usize> {
        let mut hits = PatternSet::new(self.len);
        self.which_match(input, &mut hits);
        hits.iter().map(|p| p.as_usize()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::rx::Rx;

    #[test]
    fn agrees_with_the_single_patterns() {
        let pcre = [
            r"(?i)union\s+select",
            r"[\x{80}-\x{ff}]",
            r"^abc$",
            r"a\b",
            r"x{3,}",
        ];
        let rxs: Vec<Rx> = pcre.iter().map(|p| Rx::new(p).expect("rx")).collect();
        let set = RxSet::new(rxs.iter().map(Rx::pattern)).expect("set");
        assert_eq!(set.len(), 5);
        for input in [
            &b"UNION  SELECT \xFF"[..],
            b"benign",
            b"line\nabc\nxxxx",
            b"a b",
            b"ab",
            b"",
            b"xx",
        ] {
            let expect: Vec<usize> = (0..rxs.len())
                .filter(|&i| rxs[i].matches(input, None))
                .collect();
            assert_eq!(set.matches(input), expect, "{input:?}");
            assert_eq!(set.is_match(input), !expect.is_empty(), "{input:?}");
        }
    }

    #[test]
    fn short_values_are_ruled_out() {
        let set = RxSet::new([r"abcd", r"x{5}"]).expect("set");
        assert!(!set.is_match(b"abc"));
        assert!(set.matches(b"abc").is_empty());
        // Values longer than the longest match are searched as usual.
        assert_eq!(set.matches(b"xxxxx abcd"), vec![0, 1]);
        assert!(set.is_match(b"..........abcd.........."));
    }

    /// With a cache too small for the input, the lazy DFA gives up; the set then
    /// answers "may match" for every pattern instead of running slowly, which keeps
    /// it a superset of the real matches.
    #[test]
    fn a_lazy_dfa_that_gives_up_answers_every_pattern() {
        let pcre = [r"(?i)a[^x]{0,40}b[0-9]{3}c", r"(?i)z{2}q", r"never\x00here"];
        let rxs: Vec<Rx> = pcre.iter().map(|p| Rx::new(p).expect("rx")).collect();
        let hirs: Vec<Hir> = rxs
            .iter()
            .map(|r| parse_hir(r.pattern()).expect("hir"))
            .collect();
        let set = RxSet::build(&hirs, 0).expect("set");
        // Varied bytes keep creating new DFA states.
        let mut input = Vec::new();
        let mut x: u32 = 12345;
        while input.len() < 200_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            input.push(b"ab0123456789c ZzQ-"[(x >> 16) as usize % 18]);
        }
        let hits = set.matches(&input);
        assert_eq!(hits, vec![0, 1, 2], "every pattern may match");
        assert!(set.is_match(&input));
        for (i, r) in rxs.iter().enumerate() {
            if r.matches(&input, None) {
                assert!(hits.contains(&i));
            }
        }
        // With the usual cache, the same input gets the exact answer.
        let exact = RxSet::from_hirs(&hirs).expect("set");
        let expect: Vec<usize> = (0..rxs.len())
            .filter(|&i| rxs[i].matches(&input, None))
            .collect();
        assert_eq!(exact.matches(&input), expect);
    }

    #[test]
    fn errors_name_the_reason() {
        let e = RxSet::new(["a(b"]).expect_err("bad pattern");
        assert!(e.starts_with("invalid regular expression"), "{e}");
    }
}
