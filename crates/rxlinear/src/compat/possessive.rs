//! Possessive quantifiers (`X*+`, `X++`, `X?+`, `X{n,m}+`) and atomic groups
//! (`(?>...)`) without backtracking.
//!
//! # When greedy gives the same answer
//!
//! Let `X` be a single byte class `S` (or one byte), repeated possessively, and
//! let `K` be everything that can follow the repetition up to the end of the
//! pattern. PCRE takes `m` bytes: the whole run of bytes of `S`, cut at the upper
//! bound, and never gives any back. Suppose no byte of `S` can be the first byte
//! `K` consumes (looking through zero-width assertions), and every way `K` can
//! match without consuming anything passes no assertion but `\z`, and `$` when
//! `\n` is not in `S`. Then greedy `X` gives the same verdict and the same match.
//! Greedy never takes more than `m` bytes. A greedy path that takes `k < m` bytes
//! stops on a byte of `S`: `K` cannot consume it, so `K` can only match there
//! without consuming; `\z` fails before a byte and `$` before a byte of `S` (when
//! `\n` is not in `S`), so that empty match passes no assertion at all, and the
//! path that takes `m` bytes then succeeds in the same way and comes first in the
//! greedy order. The leftmost-first greedy match therefore takes `m` bytes, as
//! PCRE does.
//!
//! The first bytes are computed on the HIR of the greedy pattern (a superset of
//! the possessive one), taking the loops of enclosing repetitions into account.
//!
//! # When they overlap
//!
//! Without an upper bound, the run PCRE takes is exactly the one after which the
//! next byte is not in `S` (or the value ends): `S*+` is `S*` followed by the
//! one-byte condition "the next byte is not in `S`". For instance `\s*+[C]+`
//! equals `\s*[C--\s][C]*` for any class `C`: after PCRE's run the next byte is
//! not white space, so `[C]+` starts with a byte of `C--\s`; conversely greedy
//! `\s*` followed by a byte of `C--\s` has stopped before a byte that is not white
//! space, which is the end of the run PCRE takes. The condition can reach far
//! (through the end of groups, loops and optional items, as in CRS 920600's
//! `;\s*+(?:...|;?)`, where `\s*+` may be followed by `[^c...]` that holds white
//! space, by the next `\s*+;` of the loop, or by the final `$`), so it is applied
//! to the automaton instead of the pattern text: the Thompson NFA of the greedy
//! pattern is multiplied with the condition. A state of the product is an NFA state plus
//! the set of bytes the next consumed byte must avoid (empty, or the union of the
//! classes of the possessive runs that just ended). Byte transitions lose the
//! forbidden bytes and clear the set; `$` with `\n` forbidden becomes `\z` (after
//! a run that may hold `\n`, `$` can only hold at the end); `\z` stays. Reaching
//! the match state with a pending set is fine when no other assertion was passed
//! since the run (the longest run also matches, and comes first, as above); with
//! another assertion in between, the pattern is refused. The product keeps the
//! priority order of every NFA state, so the leftmost-first match and its
//! captures are PCRE's. It runs on a lazy DFA for the verdict and on a PikeVM for
//! captures, both linear in the input.
//!
//! Refused: a bounded possessive repetition whose follow set overlaps, a
//! possessive repetition or atomic group of anything other than a single byte
//! class, and (by the caller) a `^` that may be tried at the end of the value.

use std::collections::HashMap;
use std::sync::Arc;

use regex_automata::Input;
use regex_automata::hybrid::dfa::{Cache as DfaCache, DFA};
use regex_automata::nfa::thompson::pikevm::{Cache as PikeCache, PikeVM};
use regex_automata::nfa::thompson::{self, NFA, State, Transition, WhichCaptures};
use regex_automata::util::look::Look as NfaLook;
use regex_automata::util::pool::Pool;
use regex_automata::util::primitives::{PatternID, StateID};
use regex_syntax::hir::{Hir, HirKind, Look};

use super::{First, Marker};
use crate::vocab::Captures;
use crate::vocab::{BACKTRACKING, ByteSet, MAX_CAPTURES, REGEX_SIZE_LIMIT, fill_captures};

type CacheFn<T> =
    Box<dyn Fn() -> T + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>;

/// A pattern with possessive repetitions, evaluated on the product automaton.
pub(crate) struct Possessive {
    dfa: DFA,
    dfa_caches: Pool<DfaCache, CacheFn<DfaCache>>,
    vm: PikeVM,
    vm_caches: Pool<PikeCache, CacheFn<PikeCache>>,
}

impl std::fmt::Debug for Possessive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Possessive")
            .field("states", &self.vm.get_nfa().states().len())
            .finish()
    }
}

/// One possessive repetition (or atomic group) of the pattern.
#[derive(Debug)]
struct Run {
    /// Index of its marker group in the marked HIR (and NFA).
    group: u32,
    /// The repeated bytes.
    set: ByteSet,
    /// Whether the repetition has no upper bound.
    unbounded: bool,
    /// What may follow it.
    follow: First,
}

impl Possessive {
    /// Analyses the possessive repetitions of a marked pattern (see
    /// [`Translation`](crate::vocab::Translation)). `Ok(None)` when every one
    /// of them can be read as greedy (the translated pattern is then exact).
    pub(crate) fn new(hir: &Hir) -> Result<Option<Possessive>, String> {
        let mut runs = Vec::new();
        collect(hir, &First::END, &mut runs)?;
        let mut active: HashMap<u32, ByteSet> = HashMap::new();
        for run in &runs {
            if greedy_is_exact(run) {
                continue;
            }
            if !run.unbounded {
                return Err(format!(
                    "a bounded possessive quantifier whose bytes may also start what \
                     follows it {BACKTRACKING}"
                ));
            }
            active.insert(run.group, run.set);
        }
        if active.is_empty() {
            return Ok(None);
        }
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .shrink(false)
                    .which_captures(WhichCaptures::All)
                    .nfa_size_limit(Some(REGEX_SIZE_LIMIT)),
            )
            .build_from_hir(hir)
            .map_err(|e| format!("invalid regular expression: {e}"))?;
        let product = product(&nfa, &active)?;
        let dfa = DFA::builder()
            .configure(DFA::config().cache_capacity(2 * 1024 * 1024))
            .build_from_nfa(product.clone())
            .map_err(|e| format!("cannot build the automaton: {e}"))?;
        let vm = PikeVM::builder()
            .build_from_nfa(product)
            .map_err(|e| format!("cannot build the automaton: {e}"))?;
        let for_dfa = dfa.clone();
        let for_vm = vm.clone();
        Ok(Some(Possessive {
            dfa,
            dfa_caches: Pool::new(Box::new(move || for_dfa.create_cache())),
            vm,
            vm_caches: Pool::new(Box::new(move || for_vm.create_cache())),
        }))
    }

    /// Whether the pattern matches, with PCRE's captures (see
    /// [`Rx::matches`](crate::Rx::matches)).
    pub(crate) fn matches(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        let found = {
            let mut cache = self.dfa_caches.get();
            match self
                .dfa
                .try_search_fwd(&mut cache, &Input::new(input).earliest(true))
            {
                Ok(m) => m.is_some(),
                // The lazy DFA gave up (it does not by default): ask the PikeVM.
                Err(_) => {
                    let mut cache = self.vm_caches.get();
                    self.vm.is_match(&mut cache, input)
                }
            }
        };
        if !found {
            return false;
        }
        if let Some(out) = captures {
            let mut cache = self.vm_caches.get();
            let mut caps = self.vm.create_captures();
            self.vm.captures(&mut cache, input, &mut caps);
            if !caps.is_match() {
                // Both automata are the same; they cannot disagree.
                return false;
            }
            let n = caps.group_len().min(MAX_CAPTURES);
            let last = (0..n)
                .rev()
                .find(|&g| caps.get_group(g).is_some())
                .unwrap_or(0);
            fill_captures(
                out,
                (0..=last).map(|g| caps.get_group(g).map_or(&[][..], |s| &input[s.range()])),
            );
        }
        true
    }
}

/// Whether the greedy form gives PCRE's answer for this run (see the module
/// documentation).
fn greedy_is_exact(run: &Run) -> bool {
    if run.set.is_empty() {
        // An atomic group around a fixed item: nothing to give back.
        return true;
    }
    if run.follow.bytes.intersects(&run.set) {
        return false;
    }
    if !run.follow.nullable {
        return true;
    }
    run.follow.looks.iter().all(|look| match look {
        Look::End => true,
        Look::EndLF => !run.set.contains(b'\n'),
        _ => false,
    })
}

/// Finds the possessive runs of `hir`, given what follows it.
fn collect(hir: &Hir, follow: &First, runs: &mut Vec<Run>) -> Result<(), String> {
    match hir.kind() {
        HirKind::Concat(subs) => {
            // after[i]: what follows subs[i] (the rest of the concatenation, then
            // `follow`).
            let mut after = vec![*follow; subs.len()];
            let mut acc = *follow;
            for i in (0..subs.len()).rev() {
                after[i] = acc;
                acc = First::of(&subs[i]).then(&acc);
            }
            for (i, sub) in subs.iter().enumerate() {
                if let Some(Marker::Possessive(_)) = Marker::of(sub) {
                    let group = group_index(sub);
                    let Some(item) = i.checked_sub(1).map(|j| &subs[j]) else {
                        return Err(refusal());
                    };
                    runs.push(run_of(item, group, &after[i])?);
                    continue;
                }
                collect(sub, &after[i], runs)?;
            }
            Ok(())
        }
        HirKind::Alternation(subs) => {
            for sub in subs {
                collect(sub, follow, runs)?;
            }
            Ok(())
        }
        HirKind::Repetition(rep) => {
            let inner = if matches!(rep.max, Some(0) | Some(1)) {
                *follow
            } else {
                First::of(&rep.sub).then(follow).or(follow)
            };
            collect(&rep.sub, &inner, runs)
        }
        HirKind::Capture(cap) => {
            match Marker::of(hir) {
                Some(Marker::Atomic(_)) => {
                    runs.push(run_of(&cap.sub, cap.index, follow)?);
                    Ok(())
                }
                // A possessive marker outside a concatenation has no item before it.
                Some(Marker::Possessive(_)) => Err(refusal()),
                _ => collect(&cap.sub, follow, runs),
            }
        }
        _ => Ok(()),
    }
}

fn group_index(hir: &Hir) -> u32 {
    match hir.kind() {
        HirKind::Capture(cap) => cap.index,
        _ => 0,
    }
}

fn refusal() -> String {
    format!(
        "a possessive quantifier or atomic group on something other than a single \
         character or class {BACKTRACKING}"
    )
}

/// The run of a possessive repetition `item` (or of an atomic group's content).
fn run_of(item: &Hir, group: u32, follow: &First) -> Result<Run, String> {
    let (set, unbounded) = match item.kind() {
        HirKind::Repetition(rep) if rep.greedy => (
            ByteSet::of_item(&rep.sub).ok_or_else(refusal)?,
            rep.max.is_none(),
        ),
        // One byte, or a fixed string: a single way to match, nothing to give back.
        HirKind::Literal(_) => (ByteSet::default(), false),
        HirKind::Class(_) => (ByteSet::default(), false),
        _ => return Err(refusal()),
    };
    Ok(Run {
        group,
        set,
        unbounded,
        follow: *follow,
    })
}

/// Key of a product state: the NFA state, the bytes the next consumed byte must
/// avoid, and whether an assertion other than `\z`/`$` was passed since then.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    state: StateID,
    pending: ByteSet,
    risky: bool,
}

/// A state of the product, with targets as product indexes.
enum Node {
    Empty(usize),
    Ranges(Vec<(u8, u8, usize)>),
    Look(NfaLook, usize),
    Union(Vec<usize>),
    CaptureStart(u32, Option<Arc<str>>, usize),
    CaptureEnd(u32, usize),
    Fail,
    Match,
}

struct ProductBuilder<'a> {
    nfa: &'a NFA,
    active: &'a HashMap<u32, ByteSet>,
    /// New index of each original group (`None` for marker groups).
    renumber: Vec<Option<u32>>,
    ids: HashMap<Key, usize>,
    keys: Vec<Key>,
}

impl ProductBuilder<'_> {
    fn intern(&mut self, state: StateID, pending: ByteSet, risky: bool) -> usize {
        let key = Key {
            state,
            pending,
            risky: risky && !pending.is_empty(),
        };
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.keys.len();
        self.keys.push(key);
        self.ids.insert(key, id);
        id
    }

    fn ranges(&mut self, trans: &[Transition], pending: ByteSet) -> Node {
        let mut out = Vec::new();
        for t in trans {
            let next = self.intern(t.next, ByteSet::default(), false);
            let mut lo: Option<u8> = None;
            for b in t.start..=t.end {
                let allowed = !pending.contains(b);
                match (allowed, lo) {
                    (true, None) => lo = Some(b),
                    (false, Some(l)) => {
                        out.push((l, b - 1, next));
                        lo = None;
                    }
                    _ => {}
                }
            }
            if let Some(l) = lo {
                out.push((l, t.end, next));
            }
        }
        Node::Ranges(out)
    }

    fn expand(&mut self, key: Key) -> Result<Node, String> {
        let p = key.pending;
        Ok(match self.nfa.state(key.state) {
            State::ByteRange { trans } => self.ranges(&[*trans], p),
            State::Sparse(sparse) => {
                let trans = sparse.transitions.to_vec();
                self.ranges(&trans, p)
            }
            State::Dense(dense) => {
                let mut trans = Vec::new();
                for (b, &next) in dense.transitions.iter().enumerate() {
                    if next == StateID::ZERO {
                        continue;
                    }
                    let b = b as u8;
                    match trans.last_mut() {
                        Some(Transition { end, next: n, .. })
                            if *n == next && usize::from(*end) + 1 == usize::from(b) =>
                        {
                            *end = b;
                        }
                        _ => trans.push(Transition {
                            start: b,
                            end: b,
                            next,
                        }),
                    }
                }
                self.ranges(&trans, p)
            }
            State::Look { look, next } => {
                let (look, risky) = match look {
                    _ if p.is_empty() => (*look, false),
                    NfaLook::End => (NfaLook::End, key.risky),
                    NfaLook::EndLF if p.contains(b'\n') => (NfaLook::End, key.risky),
                    NfaLook::EndLF => (NfaLook::EndLF, key.risky),
                    other => (*other, true),
                };
                Node::Look(look, self.intern(*next, p, risky))
            }
            State::Union { alternates } => {
                let alts = alternates.to_vec();
                Node::Union(
                    alts.into_iter()
                        .map(|a| self.intern(a, p, key.risky))
                        .collect(),
                )
            }
            State::BinaryUnion { alt1, alt2 } => {
                let (a1, a2) = (*alt1, *alt2);
                Node::Union(vec![
                    self.intern(a1, p, key.risky),
                    self.intern(a2, p, key.risky),
                ])
            }
            State::Capture {
                next,
                group_index,
                slot,
                ..
            } => {
                let group = group_index.as_u32();
                let is_start = slot.as_usize() % 2 == 0;
                let next = *next;
                match self.renumber.get(group as usize).copied().flatten() {
                    None => {
                        // A marker group: an empty step; the end of an active run
                        // adds its bytes to the pending set.
                        let pending = match self.active.get(&group) {
                            Some(set) if !is_start => p.union(set),
                            _ => p,
                        };
                        Node::Empty(self.intern(next, pending, key.risky))
                    }
                    Some(new) => {
                        let target = self.intern(next, p, key.risky);
                        if is_start {
                            let name = self
                                .nfa
                                .group_info()
                                .to_name(PatternID::ZERO, group as usize)
                                .map(Arc::from);
                            Node::CaptureStart(new, name, target)
                        } else {
                            Node::CaptureEnd(new, target)
                        }
                    }
                }
            }
            State::Fail => Node::Fail,
            State::Match { .. } => {
                if key.risky {
                    return Err(format!(
                        "a possessive quantifier followed by an assertion that may end \
                         the match (other than `$` or `\\z`) {BACKTRACKING}"
                    ));
                }
                Node::Match
            }
        })
    }
}

/// The product of `nfa` with the "next byte not in the run's class" conditions of
/// the `active` runs (marker group index to class); see the module documentation.
fn product(nfa: &NFA, active: &HashMap<u32, ByteSet>) -> Result<NFA, String> {
    let info = nfa.group_info();
    let groups = info.group_len(PatternID::ZERO);
    let mut renumber = Vec::with_capacity(groups);
    let mut next_index = 0u32;
    for g in 0..groups {
        let marker = info
            .to_name(PatternID::ZERO, g)
            .and_then(Marker::from_name)
            .is_some();
        if marker {
            renumber.push(None);
        } else {
            renumber.push(Some(next_index));
            next_index += 1;
        }
    }
    let mut pb = ProductBuilder {
        nfa,
        active,
        renumber,
        ids: HashMap::new(),
        keys: Vec::new(),
    };
    let start = pb.intern(nfa.start_anchored(), ByteSet::default(), false);
    let mut nodes = Vec::new();
    while nodes.len() < pb.keys.len() {
        let key = pb.keys[nodes.len()];
        nodes.push(pb.expand(key)?);
        if nodes.len() > 1_000_000 {
            return Err("pattern too large for the possessive evaluation".to_string());
        }
    }

    let err = |e: thompson::BuildError| format!("cannot build the automaton: {e}");
    let sid = |i: usize| StateID::new(i).map_err(|e| format!("too many states: {e}"));
    let mut b = thompson::Builder::new();
    b.set_utf8(false);
    b.set_size_limit(Some(REGEX_SIZE_LIMIT)).map_err(err)?;
    b.start_pattern().map_err(err)?;
    // Node i is added as builder state i.
    for node in nodes {
        match node {
            Node::Empty(next) => {
                let id = b.add_empty().map_err(err)?;
                b.patch(id, sid(next)?).map_err(err)?;
            }
            Node::Ranges(ranges) => {
                let mut trans = Vec::with_capacity(ranges.len());
                for (start, end, next) in ranges {
                    trans.push(Transition {
                        start,
                        end,
                        next: sid(next)?,
                    });
                }
                b.add_sparse(trans).map_err(err)?;
            }
            Node::Look(look, next) => {
                b.add_look(sid(next)?, look).map_err(err)?;
            }
            Node::Union(alts) => {
                let alts = alts.into_iter().map(sid).collect::<Result<Vec<_>, _>>()?;
                b.add_union(alts).map_err(err)?;
            }
            Node::CaptureStart(group, name, next) => {
                b.add_capture_start(sid(next)?, group, name).map_err(err)?;
            }
            Node::CaptureEnd(group, next) => {
                b.add_capture_end(sid(next)?, group).map_err(err)?;
            }
            Node::Fail => {
                b.add_fail().map_err(err)?;
            }
            Node::Match => {
                b.add_match().map_err(err)?;
            }
        }
    }
    // The unanchored start: a lazy `(?s-u:.)*?` before the pattern.
    let start = sid(start)?;
    let any = b.add_union(vec![start]).map_err(err)?;
    let step = b
        .add_range(Transition {
            start: 0,
            end: 255,
            next: any,
        })
        .map_err(err)?;
    b.patch(any, step).map_err(err)?;
    b.finish_pattern(start).map_err(err)?;
    b.build(start, any).map_err(err)
}
