//! A set of translated `@rx` patterns that answers "which patterns match somewhere in
//! this value", for the prefilter (the rule engine's prefilter).
//!
//! One lazy DFA over a whole set of CRS patterns meets a new combination of partly
//! matched patterns at nearly every byte of a value it has not seen: on traffic that
//! varies (new User-Agents, cookies, referers) it spent nearly all its time building
//! states and filling its cache. So the set is split by what the patterns require:
//!
//! - A pattern with required factors (`rxlinear::factors`: strings one of which every match
//!   contains) that are unlikely in ordinary text is gated: one Aho-Corasick pass over
//!   the value finds the factors present, and only the patterns they belong to are
//!   checked, each with its own regex (the rule's, shared), whose states stay few.
//! - The other patterns (no factors, or only common ones such as single letters) run
//!   together in one forward lazy DFA without captures. CRS v4 leaves six there.
//!
//! Long values (over 1 KiB) run instead one lazy DFA of every pattern, which the
//! prefilter's groups share with its set of all patterns (see
//! [`RxSet::from_rxs_sharing`]); its NFA is joined from each pattern's own (see
//! `Lazy::build_joined`), which keeps the load's peak memory low.
//!
//! Answers are exact either way. Each thread also keeps a bounded memo of the answers
//! for the values it met lately ([`MEMO_CAPACITY`] bytes per set), since request values
//! repeat across transactions.
//!
//! When the lazy DFA gives up on a value (its cache cleared too often: a long value
//! that walks a large set through many states), the set answers "every pattern may
//! match". That is always a correct answer for a prefilter, whose callers then run
//! each rule's own regex; the other way out, a PikeVM over the whole set's NFA, costs
//! time in proportion to the value's length times the set's thousands of states, and
//! took seconds on a 256 KiB argument.

use regex_automata::hybrid::dfa::{Cache as DfaCache, DFA};
use regex_automata::hybrid::{CacheError, LazyStateID};
use regex_automata::meta::Regex;
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::pool::Pool;
use regex_automata::util::prefilter::Prefilter;
use regex_automata::util::primitives::StateID;
use regex_automata::{Input, MatchKind, PatternID, PatternSet};
use regex_syntax::hir::Hir;

/// The bytes a value is made of, for [`RxSet::which_match_among`].
pub use rxlinear::ByteSet;
use rxlinear::{REGEX_SIZE_LIMIT, RxError, parse_hir};
use rxlinear::{SET_CACHE_CAPACITY, compile_hir, required_bytes, required_factors, set_chance};

use crate::along::Along;
use crate::error::SetError;
use crate::pm::PhraseWalker;

/// Values longer than this run through the lazy DFA of every pattern instead of the
/// gate (see `RxSet::full`).
pub const FULL_SET_MIN_LEN: usize = 1024;

/// Patterns whose factors are likely enough in ordinary text (see
/// [`set_chance`]) to occur in most values stay in the lazy DFA: checking them one
/// by one on nearly every value would cost more than running them together.
const MAX_GATE_CHANCE: f64 = 0.05;

/// Largest gate automaton kept as a DFA. The gate is walked over every short value a
/// set answers, so its speed counts more than the `@pm` matchers' (which stop at
/// 256 KiB): CRS v4's largest gate, about 500 factors, takes 1.0 MiB as a DFA. All of
/// its gates as DFAs hold 2.1 MiB more than as NFAs, for 7.7% fewer instructions per
/// request of the varying JSON series (callgrind, 13.46 -> 12.43 M). The bound leaves
/// room above that gate: with the `t:lowercase` rules' patterns widened to both cases
/// (see `Rx::preimage`) it has 525 factors and is just over 1 MiB, and as
/// an NFA it doubled the gate's instructions on that series.
const GATE_MAX_DFA_BYTES: usize = 2 * 1024 * 1024;

type CacheFn =
    Box<dyn Fn() -> SetCache + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>;

/// Transitions not yet computed that a thread's walks of one lazy DFA may compute
/// before earning more (see [`SetCache::credit`]).
const BUILD_CREDIT_MAX: usize = 16_384;

/// A walk earns one transition of credit per this many bytes it reads.
const BYTES_PER_CREDIT: usize = 16;

/// A thread's cache of a set's lazy DFA and its budget of transitions to compute.
struct SetCache {
    dfa: DfaCache,
    /// Transitions not yet computed this cache's walks may still compute. Computing
    /// one over the NFA of every pattern costs tens of thousands of instructions, and
    /// on values that keep the DFA building (random bytes, a file as base64) nearly
    /// every byte needs one. A walk spends one per transition it computes and earns
    /// one per [`BYTES_PER_CREDIT`] bytes read, up to [`BUILD_CREDIT_MAX`]; with none
    /// left it gives up at its next transition not computed yet, as the lazy DFA does
    /// in its own give-up state, and the set answers as then (every pattern "may
    /// match", the rules run their own regexes). Warm, ordinary traffic computes almost
    /// none and keeps the budget full.
    credit: usize,
}

type MemoFn =
    Box<dyn Fn() -> Memo + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>;

/// Most bytes of values (and their answers) one thread's memo of one set keeps; when
/// full it is emptied and refilled.
pub const MEMO_CAPACITY: usize = 256 * 1024;
/// Longest value the memo keeps: longer ones are rarely repeated verbatim.
const MEMO_MAX_VALUE: usize = 1024;

/// The exact answers of one set for the values one thread met lately: request
/// values repeat across transactions (a browser's headers, a session's cookies), and
/// a repeated value is answered without a search.
#[derive(Default)]
struct Memo {
    /// Value -> the patterns that match it (`None`: the lazy DFA gave up).
    answers: rustc_hash::FxHashMap<Box<[u8]>, Option<Box<[u32]>>>,
    bytes: usize,
}

/// A compiled set of translated patterns (see the module documentation).
pub struct RxSet {
    memo: Pool<Memo, MemoFn>,
    /// The patterns without required factors, in one lazy DFA.
    rest: Option<Lazy>,
    /// The patterns with required factors.
    gate: Option<Gate>,
    /// Every pattern in one lazy DFA, for long values (bodies, attack payloads): on
    /// them one pass costs less than the gate's pass plus a pass per candidate
    /// pattern, and its states get reused within the value. `None` without a gate.
    /// Possibly a larger set's DFA, shared (see [`RxSet::from_rxs_sharing`]).
    full: Option<Full>,
    len: usize,
    /// The shortest match of any pattern: shorter values cannot match.
    min_len: usize,
    /// For each pattern, bytes one of which its every match contains
    /// ([`required_bytes`]; `None`: none to give): when the lazy DFA gives up, the
    /// patterns a value's bytes rule out are still answered "no".
    needs: Box<[Option<ByteSet>]>,
}

/// The lazy DFA a set runs on long values: its own over all its patterns, or that of
/// a larger set (the prefilter's set of all patterns), whose answers are mapped back
/// to the set's patterns. Sharing saves an NFA and a cache per thread for each set,
/// and the shared DFA's states serve every set.
struct Full {
    lazy: std::sync::Arc<Lazy>,
    /// For a shared DFA: for each of its patterns, the set's pattern
    /// ([`NOT_IN_SET`] when the set does not have it).
    map: Option<Box<[u32]>>,
}

/// In [`Full::map`]: a pattern of the shared DFA that the set does not have.
const NOT_IN_SET: u32 = u32::MAX;

impl Full {
    /// Whether one of the set's patterns matches in `input`; true when it gives up.
    fn is_match(&self, input: &[u8], len: usize) -> bool {
        if self.map.is_none() {
            return self.lazy.is_match(input);
        }
        let mut hits = PatternSet::new(len);
        !self.which(input, &mut hits) || !hits.is_empty()
    }

    /// [`Lazy::which`] for the set's patterns.
    fn which(&self, input: &[u8], hits: &mut PatternSet) -> bool {
        self.which_along(input, hits, ()).0
    }

    /// [`Full::which`], feeding `along` the bytes the walk reads; also returns how many
    /// it read (from the start of `input`).
    fn which_along<A: Along>(
        &self,
        input: &[u8],
        hits: &mut PatternSet,
        along: A,
    ) -> (bool, usize, A) {
        match &self.map {
            None => self.lazy.which_along(input, hits, along),
            Some(map) => {
                let mut all = PatternSet::new(self.lazy.ids.len());
                let (ok, read, along) = self.lazy.which_along(input, &mut all, along);
                if !ok {
                    return (false, read, along);
                }
                if all.is_empty() {
                    return (true, read, along);
                }
                for p in all.iter() {
                    let mine = map[p.as_usize()];
                    if mine != NOT_IN_SET {
                        let _ = hits.try_insert(PatternID::new_unchecked(mine as usize));
                    }
                }
                (true, read, along)
            }
        }
    }
}

/// A lazy DFA over some of a set's patterns.
struct Lazy {
    dfa: DFA,
    caches: Pool<SetCache, CacheFn>,
    /// For each of its patterns, the pattern's index in the set.
    ids: Vec<u32>,
}

/// The patterns that have required factors (see `rxlinear::factors`): one Aho-Corasick pass
/// over a value finds the candidates, each then checked with its own regex.
struct Gate {
    automaton: PhraseWalker,
    /// For each factor of the automaton, the set's patterns that require it.
    owners: Vec<Box<[u32]>>,
    /// For each pattern of the set, its own regex when it is gated.
    singles: Vec<Option<Regex>>,
}

impl Gate {
    /// The gated patterns one of whose factors occurs in `input`, each once.
    fn candidates(&self, input: &[u8]) -> Vec<u32> {
        let mut seen: Vec<u64> = Vec::new();
        let mut out = Vec::new();
        self.automaton.for_each_phrase(input, |factor| {
            for &p in self.owners[factor].iter() {
                let i = p as usize;
                if seen.is_empty() {
                    seen = vec![0; self.singles.len().div_ceil(64)];
                }
                if seen[i / 64] >> (i % 64) & 1 == 0 {
                    seen[i / 64] |= 1 << (i % 64);
                    out.push(p);
                }
            }
            false
        });
        out
    }
}

impl std::fmt::Debug for RxSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxSet")
            .field("patterns", &self.len)
            .field(
                "gated",
                &(self.len - self.rest.as_ref().map_or(0, |r| r.ids.len())),
            )
            .field(
                "nfa_states",
                &self
                    .rest
                    .as_ref()
                    .map_or(0, |r| r.dfa.get_nfa().states().len()),
            )
            .finish()
    }
}

impl RxSet {
    /// Compiles translated patterns (from [`Rx::pattern`](rxlinear::Rx::pattern)),
    /// with the settings of [`Rx`](rxlinear::Rx): Unicode off, `.` matches `\n`,
    /// multi-line anchors. Each pattern is parsed when needed, so only a few
    /// patterns' syntax trees are alive at a time. The error says why.
    pub fn new<I, S>(patterns: I) -> Result<RxSet, SetError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let patterns: Vec<S> = patterns.into_iter().collect();
        RxSet::build(
            patterns.len(),
            &|i| parse_hir(patterns[i].as_ref()),
            None,
            SET_CACHE_CAPACITY,
            None,
        )
    }

    /// [`RxSet::new`] from parsed patterns (see [`parse_hir`]).
    #[cfg(test)]
    pub fn from_hirs(hirs: &[Hir]) -> Result<RxSet, SetError> {
        RxSet::build(
            hirs.len(),
            &|i| Ok(hirs[i].clone()),
            None,
            SET_CACHE_CAPACITY,
            None,
        )
    }

    /// [`RxSet::new`] for the patterns of compiled `@rx` operators, whose regexes
    /// check the set's gated patterns (shared, not compiled again).
    pub fn from_rxs(rxs: &[rxlinear::Rx]) -> Result<RxSet, SetError> {
        let regexes = rxs.iter().map(|r| r.regex().clone()).collect();
        RxSet::build(
            rxs.len(),
            &|i| parse_hir(rxs[i].pattern()),
            Some(regexes),
            SET_CACHE_CAPACITY,
            None,
        )
    }

    /// [`RxSet::from_rxs`] for patterns that are all in `larger` (the `i`-th is
    /// `larger`'s pattern `in_larger[i]`): for long values the set runs `larger`'s
    /// lazy DFA of every pattern instead of one of its own (same answers, one NFA and
    /// one cache per thread fewer). Without such a DFA in `larger` the set builds
    /// its own. An index out of `larger`, or given twice, is an error.
    pub fn from_rxs_sharing(
        rxs: &[rxlinear::Rx],
        larger: &RxSet,
        in_larger: &[u32],
    ) -> Result<RxSet, SetError> {
        let regexes = rxs.iter().map(|r| r.regex().clone()).collect();
        let shared = match &larger.full {
            Some(full) if full.map.is_none() && in_larger.len() == rxs.len() => {
                let mut map = vec![NOT_IN_SET; full.lazy.ids.len()];
                for (i, &a) in in_larger.iter().enumerate() {
                    match map.get_mut(a as usize) {
                        Some(slot) if *slot == NOT_IN_SET => *slot = i as u32,
                        Some(slot) => {
                            return Err(SetError::SameInLarger(*slot, i));
                        }
                        None => return Err(SetError::NotInLarger(i)),
                    }
                }
                Some(Full {
                    lazy: full.lazy.clone(),
                    map: Some(map.into_boxed_slice()),
                })
            }
            _ => None,
        };
        RxSet::build(
            rxs.len(),
            &|i| parse_hir(rxs[i].pattern()),
            Some(regexes),
            SET_CACHE_CAPACITY,
            shared,
        )
    }

    /// The set of `len` patterns, the `i`-th parsed by `hir_of(i)` (called once or
    /// twice per pattern, so that only one pattern's syntax tree is alive at a time
    /// apart from the few without selective factors: the trees of a large set took
    /// more memory than its automata), whose compiled regexes are `regexes` when
    /// given (compiled here otherwise, for the gated patterns); each lazy DFA gets a
    /// cache of `capacity` bytes (at least the minimum it needs). `shared` is the DFA
    /// for long values when it is another set's.
    fn build(
        len: usize,
        hir_of: &dyn Fn(usize) -> Result<Hir, RxError>,
        regexes: Option<Vec<Regex>>,
        capacity: usize,
        shared: Option<Full>,
    ) -> Result<RxSet, SetError> {
        let mut regexes = regexes.map(|v| v.into_iter().map(Some).collect::<Vec<_>>());
        let mut factors: Vec<Vec<u8>> = Vec::new();
        let mut owners: Vec<Vec<u32>> = Vec::new();
        let mut at: std::collections::HashMap<Vec<u8>, usize> = std::collections::HashMap::new();
        let mut singles: Vec<Option<Regex>> = Vec::with_capacity(len);
        let mut rest: Vec<u32> = Vec::new();
        let mut rest_hirs: Vec<Hir> = Vec::new();
        // The shortest match of any pattern (`None`: some pattern has none).
        let mut min_len: Option<usize> = None;
        let mut needs: Vec<Option<ByteSet>> = Vec::with_capacity(len);
        for i in 0..len {
            let hir = hir_of(i)?;
            needs.push(required_bytes(&hir));
            let shortest = hir.properties().minimum_len();
            min_len = match (i, min_len, shortest) {
                (0, _, s) => s,
                (_, Some(m), Some(s)) => Some(m.min(s)),
                _ => None,
            };
            let single = match required_factors(&hir) {
                Some(fs) if set_chance(&fs) <= MAX_GATE_CHANCE => {
                    let re = match regexes.as_mut() {
                        Some(v) => v[i].take(),
                        None => Some(compile_hir(&hir)?),
                    };
                    if re.is_some() {
                        for f in fs {
                            let k = *at.entry(f.clone()).or_insert_with(|| {
                                factors.push(f);
                                owners.push(Vec::new());
                                factors.len() - 1
                            });
                            owners[k].push(i as u32);
                        }
                    }
                    re
                }
                _ => None,
            };
            if single.is_none() {
                rest.push(i as u32);
                rest_hirs.push(hir);
            }
            singles.push(single);
        }
        let gate = if factors.is_empty() {
            None
        } else {
            let automaton = PhraseWalker::new(&factors, GATE_MAX_DFA_BYTES)?;
            Some(Gate {
                automaton,
                owners: owners.into_iter().map(Vec::into_boxed_slice).collect(),
                singles,
            })
        };
        let rest = if rest.is_empty() {
            None
        } else {
            Some(Lazy::build(&rest_hirs, rest, capacity)?)
        };
        drop(rest_hirs);
        let full = match (&gate, shared) {
            (None, _) => None,
            (Some(_), Some(shared)) => Some(shared),
            (Some(_), None) => Some(Full {
                lazy: std::sync::Arc::new(Lazy::build_joined(len, hir_of, capacity)?),
                map: None,
            }),
        };
        Ok(RxSet {
            full,
            memo: Pool::new(Box::new(Memo::default)),
            rest,
            gate,
            len,
            min_len: min_len.unwrap_or(0),
            needs: needs.into_boxed_slice(),
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
        if let Some(full) = self.full_for(input) {
            return full.is_match(input, self.len);
        }
        let candidates = self.gate.as_ref().map(|g| g.candidates(input));
        if let (Some(gate), Some(c)) = (&self.gate, &candidates)
            && c.iter().any(|&p| {
                gate.singles[p as usize]
                    .as_ref()
                    .is_some_and(|re| re.is_match(input))
            })
        {
            return true;
        }
        self.rest.as_ref().is_some_and(|rest| rest.is_match(input))
    }

    /// The lazy DFA of every pattern when `input` is long (see [`RxSet::full`]).
    fn full_for(&self, input: &[u8]) -> Option<&Full> {
        (input.len() > FULL_SET_MIN_LEN)
            .then_some(self.full.as_ref())
            .flatten()
    }

    /// Adds to `hits` the patterns that may match somewhere in `input` (`hits` must
    /// have room for [`RxSet::len`] patterns): exactly those that do, or, when the
    /// lazy DFA gave up, every pattern that the bytes of `input` do not rule out
    /// (`RxSet::needs`).
    pub fn which_match(&self, input: &[u8], hits: &mut PatternSet) {
        self.which_match_among(input, None, hits);
    }

    /// [`RxSet::which_match`] for an `input` whose bytes are `present` when the
    /// caller has them ([`RxSet::bytes_of`] `input` by this set or a larger one,
    /// computed here otherwise).
    pub fn which_match_among(
        &self,
        input: &[u8],
        present: Option<&ByteSet>,
        hits: &mut PatternSet,
    ) {
        if !self.try_which_match(input, hits) {
            self.add_possible(
                present.copied().unwrap_or_else(|| self.bytes_of(input)),
                hits,
            );
        }
    }

    /// The bytes of `input`, as far as they can rule out one of the set's patterns
    /// (see `RxSet::needs`): read a block at a time, and once every pattern is
    /// possible with the bytes met so far (random bytes get there in their first
    /// block), every byte, without reading the rest.
    pub fn bytes_of(&self, input: &[u8]) -> ByteSet {
        const BLOCK: usize = 4096;
        let mut present = ByteSet::default();
        for block in input.chunks(BLOCK) {
            present = present.union(&ByteSet::of_bytes(block));
            if self
                .needs
                .iter()
                .all(|n| n.is_none_or(|n| n.intersects(&present)))
            {
                return ByteSet::ALL;
            }
        }
        present
    }

    /// Adds to `hits` every pattern a value made of the bytes `present` does not
    /// rule out (see `RxSet::needs`).
    pub fn add_possible(&self, present: ByteSet, hits: &mut PatternSet) {
        for (p, need) in self.needs.iter().enumerate() {
            if need.is_none_or(|n| n.intersects(&present))
                && let Ok(id) = PatternID::new(p)
            {
                let _ = hits.try_insert(id);
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
        if input.len() > MEMO_MAX_VALUE {
            return self.search_which(input, hits);
        }
        let mut memo = self.memo.get();
        if let Some(known) = memo.answers.get(input) {
            let Some(ids) = known else {
                return false;
            };
            for &p in ids.iter() {
                let _ = hits.try_insert(PatternID::new_unchecked(p as usize));
            }
            return true;
        }
        let mut own = PatternSet::new(self.len);
        let answer = self.search_which(input, &mut own).then(|| {
            if own.is_empty() {
                Box::default()
            } else {
                own.iter().map(|p| p.as_u32()).collect::<Box<[u32]>>()
            }
        });
        if let Some(ids) = &answer {
            for &p in ids.iter() {
                let _ = hits.try_insert(PatternID::new_unchecked(p as usize));
            }
        }
        let ok = answer.is_some();
        let size = input.len() + answer.as_ref().map_or(0, |a| 4 * a.len()) + 64;
        if memo.bytes + size > MEMO_CAPACITY {
            memo.answers.clear();
            memo.bytes = 0;
        }
        memo.bytes += size;
        memo.answers.insert(input.into(), answer);
        ok
    }

    /// [`RxSet::try_which_match`] for a value long enough for the lazy DFA of every
    /// pattern, feeding `along` each byte that walk reads. Also returns how many
    /// bytes from the start of `input` `along` was fed: 0 when the value took
    /// another path, fewer than all when the walk stopped early (every pattern
    /// found, or the lazy DFA gave up); the caller feeds it the rest.
    pub fn try_which_match_along<A: Along>(
        &self,
        input: &[u8],
        hits: &mut PatternSet,
        along: A,
    ) -> (bool, usize, A) {
        match self.full_for(input) {
            Some(full) if input.len() > MEMO_MAX_VALUE && !self.impossible(input) => {
                full.which_along(input, hits, along)
            }
            _ => (self.try_which_match(input, hits), 0, along),
        }
    }

    /// [`RxSet::try_which_match`] without the memo.
    fn search_which(&self, input: &[u8], hits: &mut PatternSet) -> bool {
        if let Some(full) = self.full_for(input) {
            return full.which(input, hits);
        }
        let candidates = self.gate.as_ref().map(|g| g.candidates(input));
        if let Some(rest) = &self.rest
            && !rest.which(input, hits)
        {
            return false;
        }
        if let (Some(gate), Some(c)) = (&self.gate, &candidates) {
            for &p in c {
                let id = PatternID::new_unchecked(p as usize);
                if !hits.contains(id)
                    && gate.singles[p as usize]
                        .as_ref()
                        .is_some_and(|re| re.is_match(input))
                {
                    let _ = hits.try_insert(id);
                }
            }
        }
        true
    }

    /// The patterns that match somewhere in `input`, in order.
    pub fn matches(&self, input: &[u8]) -> Vec<usize> {
        let mut hits = PatternSet::new(self.len);
        self.which_match(input, &mut hits);
        hits.iter().map(|p| p.as_usize()).collect()
    }
}

impl Lazy {
    /// Whether one of its patterns matches in `input`; true when it gives up.
    fn is_match(&self, input: &[u8]) -> bool {
        let input = Input::new(input).earliest(true);
        let mut cache = self.caches.get();
        self.dfa
            .try_search_fwd(&mut cache.dfa, &input)
            .map_or(true, |m| m.is_some())
    }

    /// Adds its patterns that match in `input` to `hits` (as the set's patterns);
    /// false when it gives up.
    fn which(&self, input: &[u8], hits: &mut PatternSet) -> bool {
        self.which_along(input, hits, ()).0
    }

    /// [`Lazy::which`], feeding `along` the bytes the walk reads; also returns how many
    /// it read (from the start of `input`).
    fn which_along<A: Along>(
        &self,
        input: &[u8],
        hits: &mut PatternSet,
        along: A,
    ) -> (bool, usize, A) {
        let mut own = PatternSet::new(self.ids.len());
        let mut cache = self.caches.get();
        let SetCache { dfa, credit } = &mut *cache;
        let builds = if input.len() > FULL_SET_MIN_LEN && looks_binary(input) {
            BINARY_WALK_BUILDS
        } else {
            usize::MAX
        };
        let (out, read, along) =
            which_patterns_along(&self.dfa, dfa, input, &mut own, credit, builds, along);
        if out.is_none() {
            return (false, read, along);
        }
        // A pattern set's iterator reads every slot: skip it for the usual answer,
        // no pattern at all.
        if !own.is_empty() {
            for p in own.iter() {
                let _ = hits.try_insert(PatternID::new_unchecked(self.ids[p.as_usize()] as usize));
            }
        }
        (true, read, along)
    }

    /// The lazy DFA of `hirs`, the set's patterns `ids` (see [`RxSet::build`]).
    fn build(hirs: &[Hir], ids: Vec<u32>, capacity: usize) -> Result<Lazy, SetError> {
        let nfa = set_compiler()
            .build_many_from_hir(hirs)
            .map_err(nfa_error)?;
        // The same prefilter and lazy DFA settings as `regex`'s sets.
        let pre = Prefilter::from_hirs_prefix(MatchKind::All, hirs);
        Lazy::from_nfa(nfa, pre, ids, capacity)
    }

    /// The lazy DFA of all `len` patterns of a set, the `i`-th parsed by `hir_of(i)`:
    /// each pattern is compiled on its own and the NFAs are joined, so that only one
    /// pattern's syntax tree is alive at a time (compiling the whole set at once
    /// holds every tree: for CRS v4's 180 prefilter patterns they took 10 MiB, more
    /// than the set's NFA, at the peak of the rule set's loading). The DFA gets no
    /// literal prefilter: a large set's patterns never all start with literals.
    fn build_joined(
        len: usize,
        hir_of: &dyn Fn(usize) -> Result<Hir, RxError>,
        capacity: usize,
    ) -> Result<Lazy, SetError> {
        let compiler = set_compiler();
        let mut joined = thompson::Builder::new();
        joined.set_utf8(false);
        joined.set_reverse(false);
        joined
            .set_size_limit(Some(REGEX_SIZE_LIMIT))
            .map_err(nfa_error)?;
        let mut starts = Vec::with_capacity(len);
        for i in 0..len {
            let nfa = compiler.build_from_hir(&hir_of(i)?).map_err(nfa_error)?;
            if i == 0 {
                joined.set_look_matcher(nfa.look_matcher().clone());
            }
            starts.push(append_pattern(&mut joined, &nfa)?);
        }
        // The unanchored start: any bytes, as few as possible, then a pattern (the
        // prefix the compiler gives a set).
        let anchored = joined.add_union(starts).map_err(nfa_error)?;
        let unanchored = joined.add_union_reverse(Vec::new()).map_err(nfa_error)?;
        let any = joined
            .add_range(thompson::Transition {
                start: 0,
                end: 255,
                next: unanchored,
            })
            .map_err(nfa_error)?;
        joined.patch(unanchored, any).map_err(nfa_error)?;
        joined.patch(unanchored, anchored).map_err(nfa_error)?;
        let nfa = joined.build(anchored, unanchored).map_err(nfa_error)?;
        drop(joined);
        Lazy::from_nfa(nfa, None, (0..len as u32).collect(), capacity)
    }

    /// The lazy DFA of `nfa` with the prefilter `pre`, for the set's patterns `ids`.
    fn from_nfa(
        nfa: thompson::NFA,
        pre: Option<Prefilter>,
        ids: Vec<u32>,
        capacity: usize,
    ) -> Result<Lazy, SetError> {
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
            .map_err(|e| SetError::Automaton(e.to_string()))?;
        let dfa = DFA::builder()
            .configure(config.cache_capacity(capacity.max(2 * minimum)))
            .build_from_nfa(nfa)
            .map_err(|e| SetError::Automaton(e.to_string()))?;
        let for_cache = dfa.clone();
        Ok(Lazy {
            dfa,
            caches: Pool::new(Box::new(move || SetCache {
                dfa: for_cache.create_cache(),
                credit: BUILD_CREDIT_MAX,
            })),
            ids,
        })
    }
}

/// The NFA compiler of the sets: forward, no captures, bytes (not UTF-8).
fn set_compiler() -> thompson::Compiler {
    let mut compiler = thompson::Compiler::new();
    compiler.configure(
        thompson::Config::new()
            .utf8(false)
            .shrink(false)
            .which_captures(WhichCaptures::None)
            .nfa_size_limit(Some(REGEX_SIZE_LIMIT)),
    );
    compiler
}

/// The reason an NFA of a set could not be built.
fn nfa_error(e: thompson::BuildError) -> SetError {
    match e.size_limit() {
        Some(limit) => SetError::TooLarge(limit),
        None => SetError::Invalid(e.to_string()),
    }
}

/// Copies the one pattern of `nfa` (forward, without captures) into `joined` as
/// its next pattern, and returns the copy's anchored start. The states are added in
/// `nfa`'s order after an empty state that leads to the first, so state `s` of
/// `nfa` becomes state `base + 1 + s` (its unanchored prefix is copied too, and is
/// unreachable).
fn append_pattern(
    joined: &mut thompson::Builder,
    nfa: &thompson::NFA,
) -> Result<StateID, SetError> {
    use thompson::{State, Transition};
    joined.start_pattern().map_err(nfa_error)?;
    let base = joined.add_empty().map_err(nfa_error)?.as_usize() + 1;
    let at = |id: StateID| StateID::new_unchecked(base + id.as_usize());
    let moved = |t: &Transition| Transition {
        start: t.start,
        end: t.end,
        next: at(t.next),
    };
    for state in nfa.states() {
        match state {
            State::ByteRange { trans } => joined.add_range(moved(trans)).map_err(nfa_error)?,
            State::Sparse(sparse) => joined
                .add_sparse(sparse.transitions.iter().map(moved).collect())
                .map_err(nfa_error)?,
            State::Dense(dense) => {
                let mut ranges: Vec<Transition> = Vec::new();
                for (b, &next) in dense.transitions.iter().enumerate() {
                    if next == StateID::ZERO {
                        continue;
                    }
                    let b = b as u8;
                    match ranges.last_mut() {
                        Some(r) if r.next == at(next) && r.end.checked_add(1) == Some(b) => {
                            r.end = b
                        }
                        _ => ranges.push(Transition {
                            start: b,
                            end: b,
                            next: at(next),
                        }),
                    }
                }
                joined.add_sparse(ranges).map_err(nfa_error)?
            }
            State::Look { look, next } => joined.add_look(at(*next), *look).map_err(nfa_error)?,
            State::Union { alternates } => joined
                .add_union(alternates.iter().map(|&a| at(a)).collect())
                .map_err(nfa_error)?,
            State::BinaryUnion { alt1, alt2 } => joined
                .add_union(vec![at(*alt1), at(*alt2)])
                .map_err(nfa_error)?,
            State::Capture { next, .. } => {
                let empty = joined.add_empty().map_err(nfa_error)?;
                joined.patch(empty, at(*next)).map_err(nfa_error)?;
                empty
            }
            State::Fail => joined.add_fail().map_err(nfa_error)?,
            State::Match { .. } => joined.add_match().map_err(nfa_error)?,
        };
    }
    let start = at(nfa.start_anchored());
    joined
        .patch(StateID::new_unchecked(base - 1), start)
        .map_err(nfa_error)?;
    joined.finish_pattern(start).map_err(nfa_error)?;
    Ok(start)
}

/// Slots of the table of match states read in [`which_patterns`] for values of more
/// than [`SHORT_VALUE`] bytes.
const READ_SLOTS: usize = 1024;

/// Values up to this long are walked with a table of [`READ_SLOTS_SHORT`] slots: the
/// table is zeroed for every walk, and the set's lazy DFA of the patterns without
/// factors walks every value of a request (8 KiB zeroed 5,000 times cost more than the
/// walks of 2,500 short arguments).
const SHORT_VALUE: usize = 1024;

/// Slots of the table for values up to [`SHORT_VALUE`] bytes.
const READ_SLOTS_SHORT: usize = 64;

/// A [`std::hash::Hasher`] that keeps the last integer written to it: the bits of a
/// [`LazyStateID`] (its `Hash` writes one `u32`), which the library does not expose
/// otherwise.
#[derive(Default)]
struct IdBits(u64);

impl std::hash::Hasher for IdBits {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0 << 8 | u64::from(b);
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.0 = u64::from(i);
    }
}

/// The slot of match state `sid` in a table of `SLOTS` slots (a power of two, at most
/// 1,024) of [`which_patterns`], and the non-zero key kept there (a state's id with
/// its tags: a match state's is never 0).
#[inline]
fn read_slot<const SLOTS: usize>(sid: LazyStateID) -> (usize, u64) {
    let mut h = IdBits::default();
    std::hash::Hash::hash(&sid, &mut h);
    let bits = std::hash::Hasher::finish(&h);
    // Ids are offsets in the transition table, multiples of its row length: the
    // multiply brings the varying bits to the top.
    let slot = (bits.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize % SLOTS;
    (slot, bits | 1 << 63)
}

/// Adds match state `sid`'s patterns to `found`; true when `found` is then full.
#[inline(never)]
fn read_patterns(dfa: &DFA, cache: &DfaCache, sid: LazyStateID, found: &mut PatternSet) -> bool {
    for i in 0..dfa.match_len(cache, sid) {
        let _ = found.try_insert(dfa.match_pattern(cache, sid, i));
    }
    found.is_full()
}

/// [`which_patterns_along`] with no other walk fed.
#[cfg(test)]
fn which_patterns(
    dfa: &DFA,
    cache: &mut DfaCache,
    haystack: &[u8],
    found: &mut PatternSet,
    credit: &mut usize,
    builds: usize,
) -> Option<()> {
    which_patterns_along(dfa, cache, haystack, found, credit, builds, ()).0
}

/// Adds to `found` every pattern of `dfa` that matches somewhere in `haystack`, in one
/// forward pass; `None` when the lazy DFA gives up (or meets a byte it cannot handle).
/// Each byte the walk reads is fed to `along`; also returns how many it read.
///
/// The answer is that of `try_which_overlapping_matches`, without its cost per match:
/// that search stops at every match and every pattern of a match state, one call each,
/// which on attack payloads (a match every few bytes, several patterns each) cost more
/// than the pass itself. Here a match state's patterns are read when the state is met
/// and skipped when it is met again while still in a small table of states read (a
/// state's patterns never change; state ids are only reused after the cache is
/// cleared, which empties the table).
///
/// Between tagged states (match, start, dead, quit, or a transition not computed yet)
/// the walk only reads the transition table, through a shared borrow of the cache, so
/// that the table's address and length stay in registers.
fn which_patterns_along<A: Along>(
    dfa: &DFA,
    cache: &mut DfaCache,
    haystack: &[u8],
    found: &mut PatternSet,
    credit: &mut usize,
    builds: usize,
    along: A,
) -> (Option<()>, usize, A) {
    let (out, read, along) = if haystack.len() <= SHORT_VALUE {
        walk::<READ_SLOTS_SHORT, A>(dfa, cache, haystack, found, credit, builds, along)
    } else {
        walk::<READ_SLOTS, A>(dfa, cache, haystack, found, credit, builds, along)
    };
    *credit = credit
        .saturating_add(read / BYTES_PER_CREDIT)
        .min(BUILD_CREDIT_MAX);
    (out, read, along)
}

/// Transitions not computed yet that one walk over a long value of binary data
/// ([`looks_binary`]) may compute before it gives up (the set then answers as when its
/// lazy DFA gives up, and the rules run their own regexes). On bytes like a compressed
/// file's nearly every step is a new transition, each tens of thousands of
/// instructions over the NFA of every pattern: a walk that has to build is stopped
/// early, while a value whose states exist (a repeated upload) walks at full speed,
/// and each walk builds one more of them.
const BINARY_WALK_BUILDS: usize = 1;

/// Bytes of a value read, evenly spaced, to tell binary data from text (see
/// [`looks_binary`]): enough to tell a compressed file from text, few enough to cost
/// nothing next to a walk.
const BINARY_SAMPLES: usize = 256;

/// A long value of which more than one sampled byte in this many is binary (at or
/// over 0x80, or a control other than tab, line feed and carriage return) is binary
/// data. Text, URL-encoded or JSON, has none; the body of a compressed file (an image
/// in a multipart upload) about 55 in 100.
const BINARY_SHARE: usize = 8;

/// Whether more than one in [`BINARY_SHARE`] of [`BINARY_SAMPLES`] bytes of `input`,
/// evenly spaced, is binary: at or over 0x80, or a control other than tab, line feed
/// and carriage return.
fn looks_binary(input: &[u8]) -> bool {
    let stride = (input.len() / BINARY_SAMPLES).max(1);
    let mut sampled = 0usize;
    let mut binary = 0usize;
    for &b in input.iter().step_by(stride).take(BINARY_SAMPLES) {
        sampled += 1;
        binary += usize::from(b >= 0x80 || (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')));
    }
    binary * BINARY_SHARE > sampled
}

/// Empties the table of match states read (see [`walk`]) when the cache has been
/// cleared since `clears` was taken: state ids are reused after a clear.
#[inline(always)]
fn forget_if_cleared<const SLOTS: usize>(
    cache: &DfaCache,
    clears: &mut usize,
    read: &mut [u64; SLOTS],
) {
    if cache.clear_count() != *clears {
        *clears = cache.clear_count();
        *read = [0; SLOTS];
    }
}

/// The steps of a walk from state `sid` at `at` (untagged, or a match state whose
/// patterns are read already: in `read`, a table of [`walk`] made while the cache had
/// been cleared `clears` times) while the states met are such states, each byte fed to
/// `along`. Returns the walk's position and state after them, and the transition the
/// next byte leads to, which the caller takes (undefined when the walk reached the
/// end): into a tagged state not read yet, or not computed yet from an untagged state,
/// or one computed from a match state that cleared the cache (the table's ids are then
/// stale).
///
/// Attack payloads meet a match state every few bytes, nearly always one read
/// already: stepping through it here keeps both walks' states in registers instead of
/// handing them back to the caller each time. From an untagged state a step is one
/// table read.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn run<const SLOTS: usize, A: Along>(
    dfa: &DFA,
    cache: &mut DfaCache,
    haystack: &[u8],
    mut at: usize,
    mut sid: LazyStateID,
    along: &mut A,
    read: &[u64; SLOTS],
    clears: usize,
) -> (usize, LazyStateID, Result<LazyStateID, CacheError>) {
    loop {
        let next = if !sid.is_tagged() {
            // A stretch of untagged states, through a shared borrow of the cache (its
            // table's address and length stay in registers).
            let next;
            (at, sid, next) = untagged_steps(dfa, cache, haystack, at, sid, along);
            if at == haystack.len() {
                return (at, sid, Ok(next));
            }
            next
        } else {
            // From a match state: through `next_state`, with the search's progress
            // reported first, as the library's own forward search does (the cache's
            // give-up rule reads it when it clears).
            cache.search_update(at);
            match dfa.next_state(cache, sid, haystack[at]) {
                Ok(next) if cache.clear_count() == clears => next,
                other => return (at, sid, other),
            }
        };
        if next.is_tagged() {
            let known = next.is_match() && {
                let (slot, key) = read_slot::<SLOTS>(next);
                read[slot] == key
            };
            if !known {
                return (at, sid, Ok(next));
            }
        }
        along.step(haystack[at]);
        sid = next;
        at += 1;
        if at == haystack.len() {
            return (at, sid, Ok(next));
        }
    }
}

/// The steps of a walk from the untagged state `sid` at `at` while the states met stay
/// untagged, each byte fed to `along`: the walk's position and state after them, and
/// the tagged state the next byte leads to (undefined when the walk reached the end).
#[inline(always)]
fn untagged_steps<A: Along>(
    dfa: &DFA,
    cache: &DfaCache,
    haystack: &[u8],
    mut at: usize,
    mut sid: LazyStateID,
    along: &mut A,
) -> (usize, LazyStateID, LazyStateID) {
    let mut next = dfa.next_state_untagged(cache, sid, haystack[at]);
    while !next.is_tagged() {
        along.step(haystack[at]);
        sid = next;
        at += 1;
        if at == haystack.len() {
            break;
        }
        next = dfa.next_state_untagged(cache, sid, haystack[at]);
    }
    (at, sid, next)
}

/// [`which_patterns`] with a table of `SLOTS` match states read; spends `credit` on
/// the transitions it computes from untagged states, and gives up when there is none
/// left (see [`SetCache::credit`]) or when it has computed `builds` of them. Also
/// returns the bytes it read, each of which it fed to `along`.
fn walk<const SLOTS: usize, A: Along>(
    dfa: &DFA,
    cache: &mut DfaCache,
    haystack: &[u8],
    found: &mut PatternSet,
    credit: &mut usize,
    mut builds: usize,
    mut along: A,
) -> (Option<()>, usize, A) {
    let input = Input::new(haystack);
    let Ok(mut sid) = dfa.start_state_forward(cache, &input) else {
        return (None, 0, along);
    };
    // The match states read lately, by their ids (a state that finds its slot taken
    // is read again, which adds nothing new: the table only saves work). Checked in
    // line: on attack payloads a match state comes every few bytes.
    let mut read = [0u64; SLOTS];
    let mut clears = cache.clear_count();
    cache.search_start(0);
    let len = haystack.len();
    let mut at = 0;
    // At the top of each turn `sid` is untagged or a match state read already.
    while at < len {
        forget_if_cleared(cache, &mut clears, &mut read);
        let next;
        (at, sid, next) = run::<SLOTS, A>(dfa, cache, haystack, at, sid, &mut along, &read, clears);
        if at == len {
            break;
        }
        let next = match next {
            Ok(next) if next.is_unknown() => {
                // Not computed yet (from an untagged state).
                if *credit == 0 || builds == 0 {
                    cache.search_finish(at);
                    return (None, at, along);
                }
                *credit -= 1;
                builds -= 1;
                cache.search_update(at);
                dfa.next_state(cache, sid, haystack[at])
            }
            other => other,
        };
        sid = match next {
            Ok(s) => s,
            Err(_) => {
                cache.search_finish(at);
                return (None, at, along);
            }
        };
        along.step(haystack[at]);
        at += 1;
        if sid.is_tagged() {
            if sid.is_match() {
                forget_if_cleared(cache, &mut clears, &mut read);
                let (slot, key) = read_slot::<SLOTS>(sid);
                if read[slot] != key {
                    read[slot] = key;
                    if read_patterns(dfa, cache, sid, found) {
                        break;
                    }
                }
            } else if sid.is_dead() {
                break;
            } else if sid.is_quit() {
                cache.search_finish(at);
                return (None, at, along);
            }
        }
    }
    cache.search_update(at);
    cache.search_finish(at);
    if at == len {
        let Ok(eoi) = dfa.next_eoi_state(cache, sid) else {
            return (None, at, along);
        };
        if eoi.is_match() {
            read_patterns(dfa, cache, eoi, found);
        }
    }
    (Some(()), at, along)
}

#[cfg(test)]
mod tests {
    use super::*;
    use detect::testkit::XorShift;
    use rxlinear::Rx;

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

    /// Gated patterns (with selective factors), patterns whose factors are common
    /// and patterns without any, in one set: the set's answers are the single
    /// patterns' answers, built from patterns or from compiled `@rx` operators.
    #[test]
    fn gated_and_lazy_patterns_agree_with_the_single_patterns() {
        let pcre = [
            r"(?i)<script[^>]*>",
            r"(?i)\bon[a-z]{3,}\s*=",
            r"(?i)union\s+(?:all\s+)?select",
            r"\w+=\d{2}",
            r"[a-e]x",
            r"(?i)(?:etc|proc)/(?:passwd|self)",
            r"^[^;]*;\s*$",
            r"\$\{[^}]*\}",
            // Without selective factors: in the lazy DFA.
            r"[a-z]+[0-9]",
            r"[a-z]{2}[^a-z]{2}",
        ];
        let rxs: Vec<Rx> = pcre.iter().map(|p| Rx::new(p).expect("rx")).collect();
        let from_patterns = RxSet::new(rxs.iter().map(Rx::pattern)).expect("set");
        let from_rxs = RxSet::from_rxs(&rxs).expect("set");
        let gated = from_rxs
            .gate
            .as_ref()
            .map_or(0, |g| g.singles.iter().filter(|s| s.is_some()).count());
        let lazy = from_rxs.rest.as_ref().map_or(0, |r| r.ids.len());
        assert!(
            gated >= 4 && lazy >= 2,
            "{gated} gated, {lazy} in the lazy DFA"
        );
        let tokens: &[&[u8]] = &[
            b"<SCRIPT", b">", b" onload", b"=", b"Union", b" ", b"all", b"SELECT", b"x", b"a",
            b"12", b"etc/", b"PASSWD", b";", b"\n", b"${", b"}", b"id", b"q",
        ];
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            let mut input = Vec::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            for j in 0..(seed % 7) {
                input.extend_from_slice(
                    tokens[((seed >> (j * 5 + 3)) % tokens.len() as u64) as usize],
                );
            }
            let expect: Vec<usize> = (0..rxs.len())
                .filter(|&i| rxs[i].regex().is_match(&input))
                .collect();
            assert_eq!(from_patterns.matches(&input), expect, "{input:?}");
            assert_eq!(from_rxs.matches(&input), expect, "{input:?}");
            assert_eq!(from_rxs.is_match(&input), !expect.is_empty(), "{input:?}");
        }
        // Values over FULL_SET_MIN_LEN take the lazy DFA of every pattern.
        for k in 0..tokens.len() {
            let mut input = Vec::new();
            while input.len() <= FULL_SET_MIN_LEN {
                input.extend_from_slice(tokens[(input.len() + k) % tokens.len()]);
                input.extend_from_slice(b"-");
            }
            let expect: Vec<usize> = (0..rxs.len())
                .filter(|&i| rxs[i].regex().is_match(&input))
                .collect();
            assert_eq!(from_rxs.matches(&input), expect, "long value {k}");
            assert_eq!(from_rxs.is_match(&input), !expect.is_empty());
        }
    }

    /// A set that runs a larger set's lazy DFA on long values gives its own
    /// patterns' answers, on short and long values.
    #[test]
    fn a_set_sharing_the_larger_sets_dfa_agrees_with_its_patterns() {
        let pcre = [
            r"(?i)<script[^>]*>",
            r"(?i)\bon[a-z]{3,}\s*=",
            r"(?i)union\s+(?:all\s+)?select",
            r"[a-z]+[0-9]",
            r"(?i)(?:etc|proc)/(?:passwd|self)",
            r"\$\{[^}]*\}",
        ];
        let rxs: Vec<Rx> = pcre.iter().map(|p| Rx::new(p).expect("rx")).collect();
        let larger = RxSet::from_rxs(&rxs).expect("set");
        // Patterns 4, 1 and 3 of the larger set, in that order.
        let picked = [4u32, 1, 3];
        let mine: Vec<Rx> = picked.iter().map(|&i| rxs[i as usize].clone()).collect();
        let set = RxSet::from_rxs_sharing(&mine, &larger, &picked).expect("set");
        assert!(set.full.as_ref().is_some_and(|f| f.map.is_some()));
        let tokens: &[&[u8]] = &[
            b"<script>",
            b" onload=",
            b"union select",
            b"abc1",
            b"etc/passwd",
            b"${x}",
            b"-",
        ];
        let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
        for n in 0..400 {
            let mut input = Vec::new();
            let count = if n % 4 == 0 { 400 } else { rng.below(6) };
            let mut r = XorShift(rng.next());
            for _ in 0..count {
                input.extend_from_slice(tokens[r.below(tokens.len())]);
            }
            let expect: Vec<usize> = (0..mine.len())
                .filter(|&i| mine[i].regex().is_match(&input))
                .collect();
            assert_eq!(set.matches(&input), expect, "{} bytes", input.len());
            assert_eq!(set.is_match(&input), !expect.is_empty());
        }
        let e = RxSet::from_rxs_sharing(&mine, &larger, &[0, 1, 99]).expect_err("bad index");
        assert!(e.to_string().contains("not in the larger set"), "{e}");
        let e = RxSet::from_rxs_sharing(&mine, &larger, &[4, 1, 4]).expect_err("twice");
        assert!(e.to_string().contains("same pattern"), "{e}");
    }

    /// Repeated values are answered from the memo, which empties itself when full
    /// and keeps giving the searched answers.
    #[test]
    fn the_one_pass_walk_finds_what_the_overlapping_search_finds() {
        let pcre = [
            r"(?i)<script[^>]*>",
            r"(?i)\bon[a-z]{3,}\s*=",
            r"^[^;]*;\s*$",
            r"a\b",
            r"[a-z]{2}[^a-z]{2}",
            r"x$",
            r"\$\{[^}]*\}",
            r";",
        ];
        let hirs: Vec<Hir> = pcre
            .iter()
            .map(|p| parse_hir(Rx::new(p).expect("rx").pattern()).expect("hir"))
            .collect();
        let ids: Vec<u32> = (0..hirs.len() as u32).collect();
        // Smaller caches, so that long values clear them (and reuse state ids): the
        // smallest, where they give up, and one where many are walked to the end.
        let mut cleared = 0;
        for capacity in [SET_CACHE_CAPACITY, 0, 32 << 10] {
            let lazy = Lazy::build(&hirs, ids.clone(), capacity).expect("lazy");
            let tokens: &[&[u8]] = &[
                b"<SCRIPT", b">", b" onload", b"=", b"a", b" ", b"x", b";", b"\n", b"${", b"}",
                b"q", b"\xff", b"12",
            ];
            let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
            let mut compared = 0;
            for n in 0..3_000 {
                let mut input = Vec::new();
                let seed = rng.next();
                let count = if n % 50 == 0 { 5_000 } else { seed % 9 };
                let mut r = XorShift(seed);
                // Every other long value repeats a few motifs of its first tokens (so
                // that a small cache is cleared without giving up), then takes its
                // last tokens from the whole list: patterns are then first met after
                // the cache has been cleared.
                let motifs: Vec<Vec<u8>> = if n % 100 == 50 {
                    (0..40)
                        .map(|_| (0..4).flat_map(|_| tokens[r.below(6)].to_vec()).collect())
                        .collect()
                } else {
                    Vec::new()
                };
                for k in 0..count {
                    if !motifs.is_empty() && k + 20 < count {
                        input.extend_from_slice(&motifs[r.below(motifs.len())]);
                    } else {
                        input.extend_from_slice(tokens[r.below(tokens.len())]);
                    }
                }
                let mut expect = PatternSet::new(hirs.len());
                let mut cache = lazy.dfa.create_cache();
                let searched = lazy
                    .dfa
                    .try_which_overlapping_matches(&mut cache, &Input::new(&input), &mut expect)
                    .is_ok();
                let mut got = PatternSet::new(hirs.len());
                let mut cache = lazy.dfa.create_cache();
                let walked = which_patterns(
                    &lazy.dfa,
                    &mut cache,
                    &input,
                    &mut got,
                    &mut usize::MAX.clone(),
                    usize::MAX,
                )
                .is_some();
                if searched && walked {
                    compared += 1;
                    cleared += usize::from(cache.clear_count() > 0);
                    let e: Vec<_> = expect.iter().collect();
                    let g: Vec<_> = got.iter().collect();
                    assert_eq!(g, e, "{input:?}");
                }
            }
            assert!(compared > 2_850, "{compared} compared");
        }
        assert!(cleared > 10, "{cleared} walks compared after a clear");
    }

    /// The lazy DFA built from the patterns' own NFAs, joined, finds what the one
    /// compiled from all patterns at once finds.
    #[test]
    fn the_joined_nfa_agrees_with_the_compiled_set() {
        let pcre = [
            r"(?i)<script[^>]*>",
            r"(?i)\bon[a-z]{3,}\s*=",
            r"^[^;]*;\s*$",
            r"a\b",
            r"(a)(b)?c|(?P<n>x)y",
            r"[a-z]{2}[^a-z]{2}",
            r"x$",
            r"\A\$\{[^}]*\}",
            r"(?m)^q",
            r"",
        ];
        let hirs: Vec<Hir> = pcre
            .iter()
            .map(|p| parse_hir(Rx::new(p).expect("rx").pattern()).expect("hir"))
            .collect();
        let ids: Vec<u32> = (0..hirs.len() as u32).collect();
        let compiled = Lazy::build(&hirs, ids, SET_CACHE_CAPACITY).expect("lazy");
        let joined = Lazy::build_joined(hirs.len(), &|i| Ok(hirs[i].clone()), SET_CACHE_CAPACITY)
            .expect("joined");
        let tokens: &[&[u8]] = &[
            b"<SCRIPT", b">", b" onload", b"=", b"a", b"b", b"c", b" ", b"x", b"y", b";", b"\n",
            b"${", b"}", b"q", b"\xff", b"12",
        ];
        let mut rng = XorShift(0x1234_5678_9ABC_DEF1);
        for _ in 0..3_000 {
            let mut input = Vec::new();
            let mut r = XorShift(rng.next());
            for _ in 0..r.below(12) {
                input.extend_from_slice(tokens[r.below(tokens.len())]);
            }
            let mut expect = PatternSet::new(hirs.len());
            let mut got = PatternSet::new(hirs.len());
            assert!(compiled.which(&input, &mut expect));
            assert!(joined.which(&input, &mut got));
            assert_eq!(got, expect, "{input:?}");
            assert_eq!(joined.is_match(&input), !expect.is_empty(), "{input:?}");
        }
    }

    #[test]
    fn the_memo_gives_the_searched_answers() {
        let set = RxSet::new([r"abc", r"[a-z]{2}[^a-z]{2}", r"x\d"]).expect("set");
        let values: Vec<Vec<u8>> = (0..4_000u32)
            .map(|i| format!("v{i:05} abc x{} zz--", i % 3).into_bytes())
            .collect();
        for round in 0..3 {
            for v in &values {
                let mut hits = PatternSet::new(set.len());
                assert!(set.try_which_match(v, &mut hits));
                let mut fresh = PatternSet::new(set.len());
                assert!(set.search_which(v, &mut fresh));
                assert_eq!(hits, fresh, "round {round}: {v:?}");
            }
        }
        let memo = set.memo.get();
        assert!(memo.bytes <= MEMO_CAPACITY);
        assert!(!memo.answers.is_empty());
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

    /// A walk spends its cache's credit on the transitions it computes and gives up
    /// when none is left; it earns credit by the bytes it reads; a value whose states
    /// are built needs none. A set whose credit is spent answers as when its lazy DFA
    /// gives up (every pattern the value's bytes allow), a superset of the real
    /// matches.
    /// A walk fed along a set's walk of a long value gets exactly the bytes the set's
    /// walk reports it read, in order, whether the walk reads the whole value or stops
    /// early (its lazy DFA gave up); the set's answer is the one it gives alone.
    #[test]
    fn a_walk_along_is_fed_exactly_the_bytes_read() {
        struct Record(Vec<u8>);
        impl Along for Record {
            fn step(&mut self, b: u8) {
                self.0.push(b);
            }
        }
        let pcre = [
            r"(?i)<script[^>]*>",
            r"(?i)union\s+(?:all\s+)?select",
            r"[a-f][0-9a-f]{12}Z",
            r"(?i)(?:etc|proc)/(?:passwd|self)",
        ];
        let rxs: Vec<Rx> = pcre.iter().map(|p| Rx::new(p).expect("rx")).collect();
        let set = RxSet::from_rxs(&rxs).expect("set");
        let mut rng = XorShift(0xa10_4600);
        let mut values: Vec<Vec<u8>> = Vec::new();
        for _ in 0..20 {
            let len = FULL_SET_MIN_LEN + 1 + rng.below(4 * FULL_SET_MIN_LEN);
            let mut v: Vec<u8> = (0..len)
                .map(|_| b"0123456789abcdef <>/Zs"[rng.below(22)])
                .collect();
            if rng.below(2) == 0 {
                let at = rng.below(len - 20);
                v[at..at + 20].copy_from_slice(b"x UNION  SELECT etc/");
            }
            values.push(v);
        }
        // Short values take another path and feed nothing.
        values.push(b"<script> union select".to_vec());
        let mut stopped_early = 0;
        for (round, v) in values.iter().enumerate() {
            if round == 10 {
                // From here on the walks have no credit for new transitions: most give
                // up early.
                let lazy = &set.full.as_ref().expect("full").lazy;
                lazy.caches.get().credit = 0;
            }
            let mut alone = PatternSet::new(set.len());
            let mut along = PatternSet::new(set.len());
            let (ok, read, record) = set.try_which_match_along(v, &mut along, Record(Vec::new()));
            assert_eq!(record.0, &v[..read], "value {round}");
            if v.len() <= FULL_SET_MIN_LEN {
                assert_eq!(read, 0);
            }
            stopped_early += usize::from(read < v.len());
            let ok_alone = set.try_which_match(v, &mut alone);
            if ok && ok_alone {
                assert_eq!(
                    along.iter().collect::<Vec<_>>(),
                    alone.iter().collect::<Vec<_>>(),
                    "value {round}"
                );
            }
        }
        assert!(stopped_early > 0, "some walks stopped before the end");
    }

    #[test]
    fn a_walk_without_credit_gives_up_at_its_next_new_transition() {
        let pcre = [
            r"(?i)<script[^>]*>",
            r"(?i)union\s+(?:all\s+)?select",
            r"[a-f][0-9a-f]{12}Z",
            r"(?i)(?:etc|proc)/(?:passwd|self)",
        ];
        let rxs: Vec<Rx> = pcre.iter().map(|p| Rx::new(p).expect("rx")).collect();
        let set = RxSet::from_rxs(&rxs).expect("set");
        let exact = |input: &[u8]| -> Vec<usize> {
            (0..rxs.len())
                .filter(|&i| rxs[i].regex().is_match(input))
                .collect()
        };
        let mut rng = XorShift(0xc0de_0003);
        // Random hex digits: the third pattern must remember which of the last 12 were
        // letters, thousands of states.
        let mut hex = |n: usize| -> Vec<u8> {
            let mut v: Vec<u8> = (0..n).map(|_| b"0123456789abcdef"[rng.below(16)]).collect();
            v.extend_from_slice(b" UNION SELECT ");
            v
        };
        let lazy = &set
            .full
            .as_ref()
            .expect("a gated set has a full lazy DFA")
            .lazy;
        let value = hex(FULL_SET_MIN_LEN * 4);
        {
            let mut cache = lazy.caches.get();
            let SetCache { dfa, credit } = &mut *cache;
            *credit = 0;
            let mut got = PatternSet::new(lazy.ids.len());
            assert!(
                which_patterns(&lazy.dfa, dfa, &value, &mut got, credit, usize::MAX).is_none(),
                "no credit, new transitions: gave up"
            );
            assert!(
                *credit < value.len() / BYTES_PER_CREDIT,
                "earned by what it read"
            );
            *credit = BUILD_CREDIT_MAX;
            let mut got = PatternSet::new(lazy.ids.len());
            assert!(which_patterns(&lazy.dfa, dfa, &value, &mut got, credit, usize::MAX).is_some());
            assert_eq!(
                got.iter().map(|p| p.as_usize()).collect::<Vec<_>>(),
                exact(&value)
            );
            assert!(
                *credit < BUILD_CREDIT_MAX,
                "spent on the transitions it computed"
            );
            // Walked again, the value needs no new transition, so no credit.
            *credit = 0;
            let mut again = PatternSet::new(lazy.ids.len());
            assert!(
                which_patterns(&lazy.dfa, dfa, &value, &mut again, credit, usize::MAX).is_some()
            );
            assert_eq!(again, got);
            assert_eq!(*credit, value.len() / BYTES_PER_CREDIT);
        }
        // Through the set: fresh values spend the credit, then the set gives up on them
        // and answers every pattern.
        let mut gave_up = None;
        for _ in 0..64 {
            let v = hex(FULL_SET_MIN_LEN * 8);
            let mut hits = PatternSet::new(set.len());
            if !set.try_which_match(&v, &mut hits) {
                gave_up = Some(v);
                break;
            }
            assert_eq!(
                hits.iter().map(|p| p.as_usize()).collect::<Vec<_>>(),
                exact(&v)
            );
        }
        let v = gave_up.expect("fresh values spend the credit");
        // The others need a `<`, a `Z` or a `/`, which the value lacks.
        assert_eq!(set.matches(&v), vec![1]);
        assert!(exact(&v).contains(&1));
        let mut v = v;
        v.extend_from_slice(b"</Z");
        assert_eq!(set.matches(&v), (0..set.len()).collect::<Vec<_>>());
    }

    /// With a cache too small for the input, the lazy DFA gives up; the set then
    /// answers "may match" for every pattern the value's bytes allow instead of
    /// running slowly, which keeps it a superset of the real matches.
    /// A walk over a long value of binary data computes at most
    /// [`BINARY_WALK_BUILDS`] new transitions and then gives up, whatever its credit;
    /// the same bytes as text walk on. Repeated, the binary value is answered exactly
    /// once its states exist, each walk having built one more.
    #[test]
    fn walks_over_binary_data_build_little() {
        let pcre = [
            r"(?i)<script[^>]*>",
            r"(?i)union\s+(?:all\s+)?select",
            r"(?i)(?:etc|proc)/(?:passwd|self)",
        ];
        let rxs: Vec<Rx> = pcre.iter().map(|p| Rx::new(p).expect("rx")).collect();
        let set = RxSet::from_rxs(&rxs).expect("set");
        let lazy = &set.full.as_ref().expect("a gated set has a full DFA").lazy;
        let mut rng = XorShift(0xb1a5_0002);
        let mut binary: Vec<u8> = (0..FULL_SET_MIN_LEN * 2)
            .map(|_| rng.next() as u8)
            .collect();
        binary.extend_from_slice(b" UNION SELECT ");
        assert!(looks_binary(&binary));
        let text: Vec<u8> = binary.iter().map(|b| b' ' + b % 95).collect();
        assert!(!looks_binary(&text));
        let mut hits = PatternSet::new(set.len());
        assert!(lazy.which(&text, &mut hits), "text walks with the credit");
        let credit = || lazy.caches.get().credit;
        let before = credit();
        assert!(before > 1000, "credit left for the binary walk");
        let mut hits = PatternSet::new(set.len());
        assert!(!lazy.which(&binary, &mut hits), "binary gives up early");
        assert!(credit() + BINARY_WALK_BUILDS >= before, "spent one at most");
        let mut walks = 1;
        loop {
            let mut hits = PatternSet::new(set.len());
            if lazy.which(&binary, &mut hits) {
                assert_eq!(
                    hits.iter().map(|p| p.as_usize()).collect::<Vec<_>>(),
                    vec![1]
                );
                break;
            }
            walks += 1;
            assert!(walks < 100_000, "a repeated value gets its states");
        }
        assert!(walks > 10, "{walks} walks: each builds one transition");
    }

    #[test]
    fn a_lazy_dfa_that_gives_up_answers_every_pattern_the_bytes_allow() {
        // Patterns without required factors, which the lazy DFA runs.
        let pcre = [
            r"(?i)[a-m][^x]{0,40}[b-q][0-9a-f]{3}[c-z]",
            r"(?i)[k-z]{2}[q-z]",
            r"[\x00-\x0f][\x00-\x0f]",
        ];
        let rxs: Vec<Rx> = pcre.iter().map(|p| Rx::new(p).expect("rx")).collect();
        let hirs: Vec<Hir> = rxs
            .iter()
            .map(|r| parse_hir(r.pattern()).expect("hir"))
            .collect();
        let set = RxSet::build(hirs.len(), &|i| Ok(hirs[i].clone()), None, 0, None).expect("set");
        // Varied bytes keep creating new DFA states.
        let mut input = Vec::new();
        let mut x: u32 = 12345;
        while input.len() < 200_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            input.push(b"ab0123456789c ZzQ-"[(x >> 16) as usize % 18]);
        }
        let hits = set.matches(&input);
        // The third pattern needs a byte under 0x10, which the value lacks.
        assert_eq!(hits, vec![0, 1], "every pattern the bytes allow may match");
        assert!(set.is_match(&input));
        for (i, r) in rxs.iter().enumerate() {
            if r.matches(&input, None) {
                assert!(hits.contains(&i));
            }
        }
        // One such byte, alone: the third does not match, but the bytes allow it.
        input[100_000] = 0x01;
        assert!(!rxs[2].matches(&input, None));
        assert_eq!(set.matches(&input), vec![0, 1, 2]);
        // With the usual cache, a shorter input gets the exact answer.
        let exact = RxSet::from_hirs(&hirs).expect("set");
        let input = &input[..2_000];
        let expect: Vec<usize> = (0..rxs.len())
            .filter(|&i| rxs[i].matches(input, None))
            .collect();
        assert_eq!(expect, vec![0, 1]);
        assert_eq!(exact.matches(input), expect);
    }

    /// A value's bytes are read as far as they can rule a pattern out: random
    /// bytes allow every pattern after a block, a value of letters and digits is
    /// read to its end.
    #[test]
    fn bytes_are_read_as_far_as_they_rule_out_a_pattern() {
        let set = RxSet::new([r"<script", r"\x27\s*or", r"[a-z]+\d"]).expect("set");
        let mut rng = XorShift(7);
        let random: Vec<u8> = (0..64 * 1024).map(|_| rng.next() as u8).collect();
        assert_eq!(set.bytes_of(&random), ByteSet::ALL);
        let mut text: Vec<u8> = (0..64 * 1024)
            .map(|_| b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.next() as usize % 36])
            .collect();
        let letters = set.bytes_of(&text);
        assert!(!letters.contains(b'<') && letters.contains(b'q'));
        // A byte that one pattern needs, at the very end, is seen.
        text.push(b'<');
        assert!(set.bytes_of(&text).contains(b'<'));
        let mut hits = PatternSet::new(set.len());
        set.add_possible(letters, &mut hits);
        let possible: Vec<usize> = hits.iter().map(|p| p.as_usize()).collect();
        assert_eq!(possible, vec![2]);
    }

    #[test]
    fn errors_name_the_reason() {
        let e = RxSet::new(["a(b"]).expect_err("bad pattern");
        assert!(
            e.to_string().starts_with("invalid regular expression"),
            "{e}"
        );
    }

    /// A set of two translated patterns reports both where both match.
    #[test]
    fn regex_set_agrees() {
        let a = Rx::new(r"(?i)union\s+select").expect("rx");
        let b = Rx::new(r"[\x{80}-\x{ff}]").expect("rx");
        let set = RxSet::new([a.pattern(), b.pattern()]).expect("set");
        let hits: Vec<usize> = set.matches(b"UNION  SELECT \xFF");
        assert_eq!(hits, vec![0, 1]);
        assert!(!set.is_match(b"benign"));
    }
}
