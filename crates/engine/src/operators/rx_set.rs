//! A set of translated `@rx` patterns that answers "which patterns match somewhere in
//! this value", for the prefilter (`crate::ruleset::prefilter`).
//!
//! The set only ever runs forward, unanchored searches without captures, so it is built
//! from one forward NFA without capture states: a lazy DFA runs the searches, and a
//! PikeVM over the same NFA takes over when the lazy DFA gives up (its cache cleared
//! too often). This is what `regex`'s `RegexSet` does for these searches, without the
//! reverse NFA, the reverse lazy DFA and the other engines that `RegexSet` builds and
//! never uses here: half the memory, and the same work per search.

use regex_automata::hybrid::dfa::{Cache as DfaCache, DFA};
use regex_automata::nfa::thompson::pikevm::{Cache as VmCache, PikeVM};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::pool::Pool;
use regex_automata::util::prefilter::Prefilter;
use regex_automata::{Input, MatchKind, PatternSet};
use regex_syntax::hir::{Hir, Properties};

use super::rx::{REGEX_SIZE_LIMIT, SET_CACHE_CAPACITY, parse_hir};

type CacheFn =
    Box<dyn Fn() -> SetCache + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>;

/// Per-thread search state: the lazy DFA's cache, and the PikeVM's once it is needed.
struct SetCache {
    dfa: DfaCache,
    vm: Option<VmCache>,
}

/// A compiled set of translated patterns (see the module documentation).
pub struct RxSet {
    dfa: DFA,
    vm: PikeVM,
    caches: Pool<SetCache, CacheFn>,
    len: usize,
    /// The shortest match of any pattern: shorter values cannot match.
    min_len: usize,
}

impl std::fmt::Debug for RxSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxSet")
            .field("patterns", &self.len)
            .field("nfa_states", &self.vm.get_nfa().states().len())
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
            .configure(config.cache_capacity(SET_CACHE_CAPACITY.max(2 * minimum)))
            .build_from_nfa(nfa.clone())
            .map_err(|e| format!("cannot build the automaton: {e}"))?;
        let vm = PikeVM::builder()
            .configure(PikeVM::config().match_kind(MatchKind::All))
            .build_from_nfa(nfa)
            .map_err(|e| format!("cannot build the automaton: {e}"))?;
        let for_cache = dfa.clone();
        let props = Properties::union(hirs.iter().map(Hir::properties));
        Ok(RxSet {
            dfa,
            vm,
            caches: Pool::new(Box::new(move || SetCache {
                dfa: for_cache.create_cache(),
                vm: None,
            })),
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

    /// Whether some pattern matches somewhere in `input`.
    pub fn is_match(&self, input: &[u8]) -> bool {
        if self.impossible(input) {
            return false;
        }
        let input = Input::new(input).earliest(true);
        let mut cache = self.caches.get();
        match self.dfa.try_search_fwd(&mut cache.dfa, &input) {
            Ok(m) => m.is_some(),
            Err(_) => {
                let vm = &self.vm;
                let vm_cache = cache.vm.get_or_insert_with(|| vm.create_cache());
                vm.is_match(vm_cache, input)
            }
        }
    }

    /// Adds to `hits` the patterns that match somewhere in `input` (`hits` must have
    /// room for [`RxSet::len`] patterns).
    pub fn which_match(&self, input: &[u8], hits: &mut PatternSet) {
        if self.impossible(input) {
            return;
        }
        let input = Input::new(input);
        let mut cache = self.caches.get();
        if self
            .dfa
            .try_which_overlapping_matches(&mut cache.dfa, &input, hits)
            .is_err()
        {
            let vm = &self.vm;
            let vm_cache = cache.vm.get_or_insert_with(|| vm.create_cache());
            vm.which_overlapping_matches(vm_cache, &input, hits);
        }
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

    #[test]
    fn errors_name_the_reason() {
        let e = RxSet::new(["a(b"]).expect_err("bad pattern");
        assert!(e.starts_with("invalid regular expression"), "{e}");
    }
}
