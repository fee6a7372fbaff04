//! The exact multi-pattern prefilter.
//!
//! Most `@rx` rules are attack detectors that match no benign input. Rules whose
//! patterns are inspected after the same transformations form a group, and each group's
//! patterns are compiled into one [`RxSet`] (a forward-only set: see its module). In each phase, the first time a rule of
//! a group is reached, every request value that any rule of the group could inspect is
//! transformed once and run through the set. A rule whose pattern matched none of those
//! values cannot match any of its own (they are a subset), so it is skipped without
//! collecting its targets. Rules still run in order with their own targets, operator and
//! actions: the set only answers "can this pattern match anything here" ahead of time,
//! so verdicts are exactly those without it.
//!
//! Only rules whose targets are request or response data that stays the same during a
//! phase take part (not TX, collections or MATCHED_VARS, which rules change as they run),
//! and only positive patterns (a negated `!@rx` is a validator that matches ordinary
//! input). `multiMatch` rules form groups of their own, whose sets run on every form
//! of a value the rules inspect (the raw value and each intermediate result that
//! differs from the one before), not only on the last.
//!
//! A long value is answered once per form by the set of every pattern, and that answer
//! also spares the rules' own regexes a search of a form it found their pattern absent
//! from. A single-valued variable that only a few of a group's rules read (such as
//! `REQUEST_BODY`) is answered for their patterns alone, by a search for their
//! required strings ([`Narrow`]).

use crate::operators::Operator;
use crate::operators::pm::PhraseLists;
use crate::operators::rx::Rx;
use crate::operators::rx_set::RxSet;
use crate::rule::{Entry, Rule, RuleOperator};
use crate::transforms::{Effect, Transform};
use crate::variables::Var;
use regex_automata::{PatternID, PatternSet};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// Where a rule's pattern sits in the prefilter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The group (one per transformation chain).
    pub group: u32,
    /// The pattern's index in the group's set.
    pub index: u32,
}

/// One group: rules sharing a transformation chain.
#[derive(Debug)]
pub struct Group {
    /// The group's patterns.
    pub set: RxSet,
    /// The transformations its rules apply.
    pub transforms: Vec<Transform>,
    /// The transformation-cache key of the whole chain (`None` without transformations).
    pub chain_key: Option<u32>,
    /// The cache key of each prefix of `transforms` (a rule's `prefix_ids`).
    pub prefix_ids: Vec<u32>,
    /// A group of `multiMatch` rules: the set runs on every form of a value.
    pub multi: bool,
    /// Every variable a rule of the group inspects.
    pub vars: Vec<Var>,
    /// For each of the group's patterns, its index in [`Prefilter::raw`] (the set of
    /// all patterns) when [`Group::in_all`], else in the set of the other groups'
    /// patterns whose lazy DFA it shares for long values: one run of the set of all
    /// patterns over a value answers for every group that inspects the same bytes.
    pub all_index: Vec<u32>,
    /// For single-valued variables only a few of the group's rules read (such as
    /// `REQUEST_BODY`), the search that answers for their patterns alone on a long
    /// value (see [`Narrow`]).
    pub narrow: Vec<Narrow>,
    /// The group's rules run in the request phases and are reached by the load-time
    /// flow ([`crate::ruleset::fold`]), and its patterns are in [`Prefilter::raw`],
    /// which answers for it. The other groups scan with their own sets: those whose
    /// rules run only when the folds are off for a transaction, and those of the
    /// response phases (3 to 5), which share a lazy DFA of their own for long values
    /// (a response body).
    pub in_all: bool,
}

/// Most patterns a [`Narrow`] holds.
const NARROW_MAX: usize = 8;

/// The patterns of a group whose rules read one single-valued variable (at PL1,
/// `REQUEST_BODY` is read by four of the hundreds of patterns of the group without
/// transformations), when each has required factors (strings one of which every
/// match contains). A long value of that variable is answered for those patterns
/// alone: one search per pattern for its factors (many bytes at a time), and the
/// pattern's own regex for the one pattern whose factors occur, instead of a walk of
/// the set of every pattern over the value. When two or more patterns' factors
/// occur, the value is walked as usual, so a value made to hold them all costs one
/// walk more than the searches, not one regex per pattern.
#[derive(Debug)]
pub struct Narrow {
    /// The variable.
    pub var: Var,
    /// For each pattern (its index in the group): a searcher of its factors, and its
    /// regex.
    patterns: Vec<(u32, aho_corasick::AhoCorasick, regex_automata::meta::Regex)>,
}

impl Narrow {
    /// The patterns of `patterns` (indexes in a group's set, the patterns of `rxs`)
    /// for variable `var`, when there are at most [`NARROW_MAX`] and each has
    /// required factors.
    fn new(var: Var, patterns: &[u32], rxs: &[Rx]) -> Option<Narrow> {
        if patterns.len() > NARROW_MAX {
            return None;
        }
        let mut out = Vec::with_capacity(patterns.len());
        for &i in patterns {
            let rx = rxs.get(i as usize)?;
            let factors = rx.required_factors()?;
            let search = aho_corasick::AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(&factors)
                .ok()?;
            out.push((i, search, rx.regex().clone()));
        }
        Some(Narrow { var, patterns: out })
    }

    /// Whether the narrow has the group's pattern `index`.
    pub(crate) fn has(&self, index: u32) -> bool {
        self.patterns.iter().any(|(i, _, _)| *i == index)
    }

    /// The narrow's pattern (its index in the group) that matches `input`, if any
    /// (at most one is searched for, so at most one matches); `None` when the factors
    /// of more than one occur in it (the caller then walks it as usual).
    pub(crate) fn matching(&self, input: &[u8]) -> Option<Option<u32>> {
        let mut candidate = None;
        for (i, search, regex) in &self.patterns {
            if search.is_match(input) {
                if candidate.is_some() {
                    return None;
                }
                candidate = Some((*i, regex));
            }
        }
        Some(candidate.and_then(|(i, regex)| regex.is_match(input).then_some(i)))
    }
}

/// The compiled groups.
#[derive(Debug, Default)]
pub struct Prefilter {
    /// Groups, indexed by [`Slot::group`].
    pub groups: Vec<Group>,
    /// The patterns of every request-phase group the load-time flow reaches
    /// ([`Group::in_all`]) in one set. Run on a value (raw or transformed), it answers for every such group
    /// that would scan the same bytes: a value that matches none of its patterns is
    /// quiet for all of them, and otherwise the patterns it matches, found in one pass,
    /// are each group's answer. Patterns of rules the flow does not reach (at PL1, those
    /// of the PL2-4 sections) are left out, so that a long value does not pay, in every
    /// form, for patterns whose rules do not run. `None` when there are no such groups
    /// or the set does not compile.
    pub raw: Option<RxSet>,
    /// Every `@pm` phrase list of the rules the load-time flow reaches in one
    /// automaton (`None` without lists, or with more than [`PmUnion::MAX_LISTS`]);
    /// the other `@pm` rules run their own lists.
    pub pm: Option<PmUnion>,
    /// Per phase (index 0 is phase 1), the groups of the rules the load-time flow
    /// reaches ([`crate::ruleset::fold`]), computed together on the first need.
    pub eager: [EagerGroups; 5],
}

/// Groups whose answers are computed together in a phase, from one collection of
/// the variables they read.
#[derive(Debug, Default)]
pub struct EagerGroups {
    /// The groups, ascending.
    pub groups: Vec<u32>,
    /// Every variable one of them reads, once.
    pub vars: Vec<Var>,
}

/// The phrases of every `@pm` list of the rule set in one Aho-Corasick automaton.
/// One pass over a value tells which lists have a phrase in it, the answer of every
/// `@pm` rule that inspects the same bytes; without it each rule scans the value
/// with its own list. The answer is exact: a list matches exactly when one of its
/// phrases occurs, and the walk over the automaton (`PhraseLists`) enters a match
/// state at every occurrence of every phrase.
#[derive(Debug)]
pub struct PmUnion {
    lists: PhraseLists,
}

impl PmUnion {
    /// The most lists one union holds (one bit each in a `u64`).
    pub const MAX_LISTS: usize = 64;

    /// The lists (bit `i` for list `i`) that have a phrase in `input`.
    pub fn lists_in(&self, input: &[u8]) -> u64 {
        self.lists.lists_in(input)
    }

    /// Whether the lists `want` have a phrase in `input`, walked on from `from` (see
    /// [`PhraseLists::lists_until`](crate::operators::pm::PhraseLists::lists_until)).
    pub(crate) fn lists_until(
        &self,
        input: &[u8],
        want: u64,
        from: Option<crate::operators::pm::ListsSoFar>,
    ) -> crate::operators::pm::ListsSoFar {
        self.lists.lists_until(input, want, from)
    }

    /// This thread's table of the union's transitions, for [`PmUnion::walk`].
    pub(crate) fn rows(&self) -> crate::operators::pm::RowsGuard<'_> {
        self.lists.rows()
    }

    /// A walk over the union's automaton through `rows` that another walk can feed
    /// byte by byte (its [`found`](crate::operators::pm::ListsWalk::found) lists are
    /// [`PmUnion::lists_in`] of the bytes fed), giving up past `builds` new
    /// transitions.
    pub(crate) fn walk<'a>(
        &'a self,
        rows: &'a mut crate::operators::pm::Rows,
        builds: Option<usize>,
    ) -> crate::operators::pm::ListsWalk<'a> {
        self.lists.walk(rows, builds)
    }

    /// Gives each static `@pm` rule link its list's index and builds the union;
    /// `None` (and no rule marked) when there are none or too many lists.
    fn build(phases: &mut [Vec<Entry>; 5], reached: &[Vec<bool>; 5]) -> Option<PmUnion> {
        let mut lists: Vec<Arc<[Vec<u8>]>> = Vec::new();
        each_link_reached(phases, reached, &mut |r: &mut Rule, reached: bool| {
            r.pm_list = match &r.operator {
                RuleOperator::Static(_) if !reached => None,
                RuleOperator::Static(op) => match op.as_ref() {
                    Operator::Pm { pm, .. } => {
                        let phrases = pm.shared_phrases();
                        let i = match lists.iter().position(|l| **l == *phrases) {
                            Some(i) => i,
                            None => {
                                lists.push(phrases);
                                lists.len() - 1
                            }
                        };
                        Some(i as u32)
                    }
                    _ => None,
                },
                _ => None,
            };
        });
        let union = PmUnion::from_lists(&lists);
        if union.is_none() {
            each_link(phases, &mut |r: &mut Rule| r.pm_list = None);
        }
        union
    }

    /// The union of `lists` (list `i` gets bit `i`).
    fn from_lists(lists: &[Arc<[Vec<u8>]>]) -> Option<PmUnion> {
        if lists.is_empty() || lists.len() > Self::MAX_LISTS {
            return None;
        }
        let mut phrases: Vec<Vec<u8>> = Vec::new();
        let mut lists_of: Vec<u64> = Vec::new();
        let mut at: HashMap<Vec<u8>, usize> = HashMap::new();
        for (i, list) in lists.iter().enumerate() {
            for p in list.iter().filter(|p| !p.is_empty()) {
                let k = *at.entry(p.clone()).or_insert_with(|| {
                    phrases.push(p.clone());
                    lists_of.push(0);
                    phrases.len() - 1
                });
                lists_of[k] |= 1 << i;
            }
        }
        // The same matching as `Pm` (ASCII case-insensitive); a contiguous NFA, as for
        // large single lists, keeps the union small.
        let lists = PhraseLists::new(&phrases, lists_of).ok()?;
        Some(PmUnion { lists })
    }
}

/// Variables whose values do not change while a phase runs.
fn stable(var: Var) -> bool {
    matches!(
        var,
        Var::Args
            | Var::ArgsGet
            | Var::ArgsPost
            | Var::ArgsNames
            | Var::ArgsGetNames
            | Var::ArgsPostNames
            | Var::RequestHeaders
            | Var::RequestHeadersNames
            | Var::RequestCookies
            | Var::RequestCookiesNames
            | Var::RequestUri
            | Var::RequestUriRaw
            | Var::RequestFilename
            | Var::RequestBasename
            | Var::RequestLine
            | Var::RequestMethod
            | Var::RequestProtocol
            | Var::QueryString
            | Var::RequestBody
            | Var::Files
            | Var::MultipartPartHeaders
            | Var::Xml
            | Var::ResponseHeaders
            | Var::ResponseHeadersNames
            | Var::ResponseBody
    )
}

/// The hand-written sample of ordinary request values (`ordinary.txt`). It is not
/// benchmark data: `bench/test_corpus.py` checks that it shares no string with the
/// benchmark corpora.
const ORDINARY_SAMPLE: &str = include_str!("ordinary.txt");

/// Ordinary request values: the empty value and every value line of
/// [`ORDINARY_SAMPLE`]. A pattern that matches one of them would make its group's set
/// match nearly every request, so it runs on its own instead. This choice only affects
/// speed, never a verdict.
fn ordinary() -> &'static [&'static [u8]] {
    static VALUES: LazyLock<Vec<&'static [u8]>> = LazyLock::new(|| sample_values(ORDINARY_SAMPLE));
    &VALUES
}

/// The values of a sample text: the empty value, then each line that is neither blank
/// nor a `#` comment, byte for byte.
fn sample_values(text: &str) -> Vec<&[u8]> {
    std::iter::once(&b""[..])
        .chain(
            text.lines()
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::as_bytes),
        )
        .collect()
}

/// The chain of rule `r` with transformations peeled off its end, and their effects
/// in the order they were peeled, for [`Rx::preimage`]. A transformation can be peeled
/// when it has an [`Effect`] (`t:lowercase`, `t:removeWhitespace`) and
/// every transformation after it commutes with that effect: `r`'s chain then gives what
/// the shorter chain gives with the effect applied last. Peeled again while one can be.
/// `None` for a chain with nothing to peel, and for `multiMatch` rules (which inspect
/// every form).
fn peeled(r: &Rule) -> Option<(Vec<Transform>, Vec<Effect>)> {
    if r.multi_match {
        return None;
    }
    let mut chain = r.transforms.clone();
    let mut effects = Vec::new();
    while let Some((at, effect)) = chain.iter().enumerate().rev().find_map(|(i, t)| {
        let e = t.effect()?;
        chain[i + 1..]
            .iter()
            .all(|n| n.commutes_with(e))
            .then_some((i, e))
    }) {
        chain.remove(at);
        effects.push(effect);
    }
    (!effects.is_empty()).then_some((chain, effects))
}

fn eligible(r: &Rule) -> Option<&Rx> {
    if r.negated || r.targets.is_empty() {
        return None;
    }
    if !r.targets.iter().all(|t| !t.count && stable(t.var)) {
        return None;
    }
    match &r.operator {
        RuleOperator::Static(op) => match op.as_ref() {
            // Checked with search state that is dropped right after, so that loading
            // leaves no cache per regex behind in the loading thread.
            Operator::Rx(rx) if !rx.matches_any_transient(ordinary()) => Some(rx),
            _ => None,
        },
        _ => None,
    }
}

struct Building {
    patterns: Vec<Rx>,
    /// Per variable its rules read, the patterns of the rules that read it.
    by_var: Vec<(Var, Vec<u32>)>,
    transforms: Vec<Transform>,
    prefix_ids: Vec<u32>,
    multi: bool,
    vars: Vec<Var>,
    reached: bool,
    /// The group's rules run in phases 3 to 5 (see [`Share`]).
    response: bool,
}

/// Which shared lazy DFA a group's long values run (see [`RxSet::from_rxs_sharing`]):
/// the patterns of the request phases the load-time flow reaches (the set of all
/// patterns, [`Prefilter::raw`]), those it does not reach, and those of the response
/// phases, kept apart so that a request value never walks the response rules' patterns
/// (nor a response body the request rules').
#[derive(Debug, Clone, Copy)]
enum Share {
    Reached = 0,
    Unreached = 1,
    Response = 2,
}

impl Building {
    fn share(&self) -> Share {
        match (self.response, self.reached) {
            (true, _) => Share::Response,
            (false, true) => Share::Reached,
            (false, false) => Share::Unreached,
        }
    }
}

impl Prefilter {
    /// Groups the eligible `@rx` rules of every phase and gives each its slot;
    /// `reached` (per phase, per entry) marks the rules the load-time flow reaches,
    /// whose groups are kept apart from the others'.
    /// `intern` gives the transformation-cache key of a chain of transformations (a new
    /// one for a chain no rule has).
    pub(crate) fn build(
        phases: &mut [Vec<Entry>; 5],
        reached: &[Vec<bool>; 5],
        intern: &mut dyn FnMut(&[Transform]) -> u32,
    ) -> Prefilter {
        let mut building: Vec<Building> = Vec::new();
        let mut by_key: HashMap<(Option<u32>, bool, bool, bool), usize> = HashMap::new();
        each_link_reached(phases, reached, &mut |r: &mut Rule, reached: bool| {
            let Some(pattern) = eligible(r).cloned() else {
                return;
            };
            // A rule whose chain ends with `t:lowercase` or a deletion of bytes (or
            // with those and then only transformations that commute with them) is
            // answered on the chain without them, by the pattern that matches those
            // bytes exactly where its own matches them transformed: they are often a
            // form other groups read already, which the set of all patterns then walks
            // once for all.
            let preimage =
                peeled(r).and_then(|(chain, effects)| Some((pattern.preimage(&effects)?, chain)));
            let (pattern, transforms, prefix_ids) = match preimage {
                Some((p, chain)) => {
                    let ids = (0..chain.len()).map(|i| intern(&chain[..=i])).collect();
                    (p, chain, ids)
                }
                None => (pattern, r.transforms.clone(), r.prefix_ids.clone()),
            };
            let response = r.phase >= 3;
            let key = (prefix_ids.last().copied(), r.multi_match, reached, response);
            let g = *by_key.entry(key).or_insert_with(|| {
                building.push(Building {
                    patterns: Vec::new(),
                    by_var: Vec::new(),
                    transforms,
                    prefix_ids,
                    multi: r.multi_match,
                    vars: Vec::new(),
                    reached,
                    response,
                });
                building.len() - 1
            });
            let b = &mut building[g];
            let index = match b
                .patterns
                .iter()
                .position(|p| p.pattern() == pattern.pattern())
            {
                Some(i) => i,
                None => {
                    b.patterns.push(pattern);
                    b.patterns.len() - 1
                }
            };
            for t in &r.targets {
                if !b.vars.contains(&t.var) {
                    b.vars.push(t.var);
                }
                match b.by_var.iter_mut().find(|(v, _)| *v == t.var) {
                    Some((_, ps)) if ps.contains(&(index as u32)) => {}
                    Some((_, ps)) => ps.push(index as u32),
                    None => b.by_var.push((t.var, vec![index as u32])),
                }
            }
            r.prefilter = Some(Slot {
                group: g as u32,
                index: index as u32,
            });
        });
        // The variables `@pm` rules read, with their chains: a form one of them reads
        // is walked by the set of every pattern whatever a narrow could answer, since
        // that walk finds the phrase lists along the way (see `Group::narrow`).
        let mut pm_reads: Vec<(Var, Option<u32>)> = Vec::new();
        each_link_reached(phases, reached, &mut |r: &mut Rule, _| {
            if let RuleOperator::Static(op) = &r.operator
                && matches!(op.as_ref(), Operator::Pm { .. })
            {
                for t in &r.targets {
                    pm_reads.push((t.var, r.prefix_ids.last().copied()));
                }
            }
        });
        // Compile each group; a group whose set does not compile (size limits) gets no
        // prefilter, and its rules run as usual.
        let mut groups = Vec::new();
        let mut final_index: Vec<Option<u32>> = Vec::new();
        let keys: HashMap<usize, Option<u32>> = by_key.iter().map(|(k, &g)| (g, k.0)).collect();
        // The patterns of the reached request groups, and apart those of the others
        // and those of the response groups (only for their long values: one lazy DFA
        // shared by each kind).
        let mut all: [Vec<Rx>; 3] = Default::default();
        let mut all_pos: [HashMap<String, u32>; 3] = Default::default();
        for b in &building {
            let k = b.share() as usize;
            for p in &b.patterns {
                if !all_pos[k].contains_key(p.pattern()) {
                    all_pos[k].insert(p.pattern().to_string(), all[k].len() as u32);
                    all[k].push(p.clone());
                }
            }
        }
        let [raw, others, response] = all.map(|a| {
            if a.is_empty() {
                None
            } else {
                RxSet::from_rxs(&a).ok()
            }
        });
        for (g, b) in building.into_iter().enumerate() {
            let share = b.share();
            let k = share as usize;
            let all_index: Vec<u32> = b
                .patterns
                .iter()
                .map(|p| all_pos[k].get(p.pattern()).copied().unwrap_or(0))
                .collect();
            let shared = match share {
                Share::Reached => &raw,
                Share::Unreached => &others,
                Share::Response => &response,
            };
            // Long values run the lazy DFA of all patterns (one, shared).
            let set = match shared {
                Some(shared) => RxSet::from_rxs_sharing(&b.patterns, shared, &all_index),
                None => RxSet::from_rxs(&b.patterns),
            };
            let chain_key = keys[&g];
            let narrow = b
                .by_var
                .iter()
                .filter(|(var, ps)| {
                    !b.multi
                        && !var.is_collection()
                        && ps.len() < b.patterns.len()
                        && !pm_reads.contains(&(*var, chain_key))
                })
                .filter_map(|(var, ps)| Narrow::new(*var, ps, &b.patterns))
                .collect();
            match set {
                Ok(set) => {
                    final_index.push(Some(groups.len() as u32));
                    groups.push(Group {
                        in_all: matches!(share, Share::Reached) && raw.is_some(),
                        all_index,
                        set,
                        narrow,
                        transforms: b.transforms,
                        chain_key,
                        prefix_ids: b.prefix_ids,
                        multi: b.multi,
                        vars: b.vars,
                    });
                }
                Err(_) => final_index.push(None),
            }
        }
        each_link(phases, &mut |r: &mut Rule| {
            if let Some(slot) = r.prefilter {
                match final_index[slot.group as usize] {
                    Some(g) => {
                        r.prefilter = Some(Slot {
                            group: g,
                            index: slot.index,
                        })
                    }
                    None => r.prefilter = None,
                }
            }
        });
        let pm = PmUnion::build(phases, reached);
        Prefilter {
            groups,
            raw,
            pm,
            eager: Default::default(),
        }
    }

    /// Fills [`Prefilter::eager`]: the groups of the rules `reached` marks (one flag
    /// per entry of each phase).
    pub(crate) fn set_eager(&mut self, phases: &[Vec<Entry>; 5], reached: &[Vec<bool>; 5]) {
        for (p, entries) in phases.iter().enumerate() {
            let mut groups: Vec<u32> = Vec::new();
            for (e, &r) in entries.iter().zip(&reached[p]) {
                let (Entry::Rule(rule), true) = (e, r) else {
                    continue;
                };
                for l in rule.links() {
                    if let Some(slot) = l.prefilter {
                        groups.push(slot.group);
                    }
                }
            }
            groups.sort_unstable();
            groups.dedup();
            let mut vars: Vec<Var> = Vec::new();
            for &g in &groups {
                for &v in &self.groups[g as usize].vars {
                    if !vars.contains(&v) {
                        vars.push(v);
                    }
                }
            }
            self.eager[p] = EagerGroups { groups, vars };
        }
    }
}

/// Which patterns of a group matched some value in the current phase.
#[derive(Debug, Clone, Default)]
pub(crate) struct Union {
    hits: Option<PatternSet>,
    /// The patterns one value matched, emptied after each [`Union::add`]: kept so
    /// that the group's many values (hundreds in a JSON body) allocate it once.
    found: Option<PatternSet>,
}

impl Union {
    /// Adds the patterns that match `input`; false when none does.
    pub(crate) fn add(&mut self, set: &RxSet, input: &[u8]) -> bool {
        self.add_among(set, input, None)
    }

    /// [`Union::add`] for an `input` whose bytes are `present` when the caller has
    /// them (see [`RxSet::which_match_among`]).
    pub(crate) fn add_among(
        &mut self,
        set: &RxSet,
        input: &[u8],
        present: Option<&crate::operators::rx_set::ByteSet>,
    ) -> bool {
        // One pass for every pattern: checking for any match first would scan the
        // value twice whenever one does.
        let found = match &mut self.found {
            Some(f) if f.capacity() == set.len() => f,
            slot => slot.insert(PatternSet::new(set.len())),
        };
        set.which_match_among(input, present, found);
        if found.is_empty() {
            return false;
        }
        let hits = self.hits.get_or_insert_with(|| PatternSet::new(set.len()));
        for p in found.iter() {
            let _ = hits.try_insert(p);
        }
        found.clear();
        true
    }

    /// Adds the group patterns (whose indexes in the set of all patterns are
    /// `all_index`) that are among `all_hits`, the patterns of that set a value
    /// matched; false when none is.
    pub(crate) fn add_from(
        &mut self,
        group_len: usize,
        all_index: &[u32],
        all_hits: &PatternSet,
    ) -> bool {
        let mut any = false;
        for (i, &a) in all_index.iter().enumerate() {
            if all_hits.contains(PatternID::new_unchecked(a as usize)) {
                let hits = self.hits.get_or_insert_with(|| PatternSet::new(group_len));
                if let Ok(id) = PatternID::new(i) {
                    let _ = hits.try_insert(id);
                }
                any = true;
            }
        }
        any
    }

    /// Adds the group's pattern `index` (of a group of `group_len` patterns).
    pub(crate) fn add_index(&mut self, group_len: usize, index: u32) {
        let hits = self.hits.get_or_insert_with(|| PatternSet::new(group_len));
        if let Ok(id) = PatternID::new(index as usize) {
            let _ = hits.try_insert(id);
        }
    }

    /// True when the pattern at `index` matched some value.
    pub(crate) fn may_match(&self, index: u32) -> bool {
        self.hits
            .as_ref()
            .is_some_and(|h| PatternID::new(index as usize).is_ok_and(|p| h.contains(p)))
    }
}

/// Calls `f` on every rule link of every phase, with whether the load-time flow
/// reaches its rule (`reached`, per phase and entry; an entry without a flag counts as
/// reached).
fn each_link_reached(
    phases: &mut [Vec<Entry>; 5],
    reached: &[Vec<bool>; 5],
    f: &mut dyn FnMut(&mut Rule, bool),
) {
    for (phase, flags) in phases.iter_mut().zip(reached) {
        for (i, e) in phase.iter_mut().enumerate() {
            if let Entry::Rule(r) = e {
                let on = flags.get(i).copied().unwrap_or(true);
                let mut link = Some(r.as_mut());
                while let Some(l) = link {
                    f(l, on);
                    link = l.chain.as_deref_mut();
                }
            }
        }
    }
}

/// Calls `f` on every rule link of every phase: each rule and the rules chained to it.
fn each_link(phases: &mut [Vec<Entry>; 5], f: &mut dyn FnMut(&mut Rule)) {
    for phase in phases.iter_mut() {
        for e in phase.iter_mut() {
            if let Entry::Rule(r) = e {
                let mut link = Some(r.as_mut());
                while let Some(l) = link {
                    f(l);
                    link = l.chain.as_deref_mut();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::pm::Pm;

    /// The union's answer for each list is the list's own `@pm` answer.
    #[test]
    fn pm_union_agrees_with_each_list() {
        let lists: Vec<Vec<Vec<u8>>> = vec![
            vec![b"cat".to_vec(), b"/etc/".to_vec(), b"AB".to_vec()],
            vec![b"ab".to_vec(), b"tca".to_vec()],
            vec![b"c".to_vec()],
            vec![b"zz".to_vec(), b"Cat".to_vec()],
            vec![],
        ];
        let shared: Vec<Arc<[Vec<u8>]>> = lists.iter().map(|l| l.clone().into()).collect();
        let union = PmUnion::from_lists(&shared).expect("union");
        let pms: Vec<Pm> = lists
            .iter()
            .map(|l| Pm::new(l.clone()).expect("pm"))
            .collect();
        let alphabet: &[u8] = b"abcCtT/ez";
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..5_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 12) as usize;
            let input: Vec<u8> = (0..len)
                .map(|j| alphabet[((seed >> (j * 5)) % alphabet.len() as u64) as usize])
                .collect();
            let got = union.lists_in(&input);
            for (i, pm) in pms.iter().enumerate() {
                assert_eq!(
                    got >> i & 1 == 1,
                    pm.matches(&input, None),
                    "{input:?} list {i}"
                );
            }
        }
    }

    #[test]
    fn response_rules_have_groups_and_a_shared_automaton_of_their_own() {
        let mut b = crate::RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
        b.add_text(
            r#"SecRule ARGS "@rx attack[0-9]" "id:1,phase:2,pass,t:none"
SecRule RESPONSE_BODY "@rx leak[0-9]" "id:2,phase:4,pass,t:none"
SecRule RESPONSE_BODY "@rx other[0-9]" "id:3,phase:4,pass,t:none"
SecRule RESPONSE_BODY "@pm needle" "id:4,phase:4,pass,t:none""#,
            "test.conf",
        )
        .unwrap();
        let rs = b.build().unwrap();
        let group = |id: i64| {
            let slot = rs.rule_by_id(id).unwrap().prefilter.expect("in a group");
            (slot.group, &rs.prefilter.groups[slot.group as usize])
        };
        let (request, g1) = group(1);
        let (response, g2) = group(2);
        assert_eq!(group(3).0, response);
        assert_ne!(request, response, "same pipeline, but apart by side");
        assert!(g1.in_all);
        assert!(!g2.in_all);
        assert_eq!(g2.vars, vec![Var::ResponseBody]);
        // The set of all request patterns holds the request rule's only.
        assert_eq!(rs.prefilter.raw.as_ref().map(RxSet::len), Some(1));
        assert!(rs.rule_by_id(4).unwrap().pm_list.is_some());
    }

    #[test]
    fn too_many_lists_make_no_union() {
        let lists: Vec<Arc<[Vec<u8>]>> = (0..=PmUnion::MAX_LISTS)
            .map(|i| vec![format!("p{i}").into_bytes()].into())
            .collect();
        assert!(PmUnion::from_lists(&lists).is_none());
        assert!(PmUnion::from_lists(&lists[..PmUnion::MAX_LISTS]).is_some());
    }

    #[test]
    fn sample_values_skip_comments_and_blank_lines() {
        let v = sample_values("# a comment\nfirst\n\n#another\n second \n");
        assert_eq!(v, vec![&b""[..], b"first", b" second "]);
    }

    #[test]
    fn shipped_sample_is_clean() {
        let v = ordinary();
        assert!(v.len() > 30, "only {} ordinary values", v.len());
        assert_eq!(v[0], b"");
        for (i, a) in v.iter().enumerate().skip(1) {
            assert!(!a.is_empty());
            assert_eq!(
                a.trim_ascii(),
                *a,
                "surrounding blanks in {:?}",
                String::from_utf8_lossy(a)
            );
            assert!(
                !v[..i].contains(a),
                "{:?} twice",
                String::from_utf8_lossy(a)
            );
        }
    }
}
