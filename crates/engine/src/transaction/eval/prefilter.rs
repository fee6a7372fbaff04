//! Prefilter answers: whether any rule of a group (its patterns' union, its `@pm`
//! phrase union) can match a value's form, decided once for the whole group.

use super::forms::*;
use crate::operators::pm::ListsSoFar;
use crate::operators::rx_set::{ByteSet, FULL_SET_MIN_LEN, RxSet};
use crate::ruleset::ChainNode;
use crate::ruleset::prefilter::{PmUnion, Slot, Union};
use crate::transaction::budget::VALUE_WORK;
use crate::transaction::collect::{Value, View, recycle};
use crate::transaction::{AllAnswer, Transaction, TransformCache};
use crate::variables::Var;
use regex_automata::{PatternID, PatternSet};

/// Whether `@pm` list `list` of `union` has a phrase in the form at (`row`, `cell`),
/// whose bytes are `input`. The union's walk over the form is kept: it stops at the
/// first phrase of the list asked for, and a later question about another list goes
/// on from there.
pub(super) fn pm_has(
    cache: &mut TransformCache,
    union: &PmUnion,
    row: usize,
    cell: u32,
    input: &[u8],
    list: u32,
) -> bool {
    let key = (row as u32, cell);
    let so_far = cache.pm_lists.get(&key).copied();
    if let Some(known) = so_far.and_then(|s| s.has(list)) {
        return known;
    }
    let now = union.lists_until(input, 1 << list, so_far);
    cache.pm_lists.insert(key, now);
    // The walk stops only at a phrase of `want` or at the end: it always tells.
    now.has(list)
        .unwrap_or_else(|| union.lists_in(input) >> list & 1 == 1)
}

/// New transitions a walk of the `@pm` union made along the set of all patterns' walk
/// (see [`all_answer`]) may add before it gives up. A repeated or ordinary value needs
/// a few dozen at most once the thread's table has seen its like; a file or random
/// text needs one every few bytes.
pub(super) const SPECULATIVE_PM_BUILDS: usize = 256;

/// What the set of all prefilter patterns finds in the form in `cell` (1: the raw
/// value) of the value whose row starts at `row`, computed on first use: kept in the
/// row's `raw_cell` for the raw value (0 unknown, 1 quiet, 2 in `all_hits`) and in
/// `all_hits`. A long form not yet walked by the `@pm` union `pm` is walked by both
/// automata together, and the union's answer kept for [`pm_lists`].
pub(super) fn all_answer(
    cache: &mut TransformCache,
    row: usize,
    raw_cell: usize,
    cell: u32,
    all: &RxSet,
    pm: Option<&PmUnion>,
    raw: &[u8],
) -> Answer {
    let key = (row as u32, cell);
    if cell == 1 && cache.cells[row + raw_cell] == 1 {
        return Answer::Quiet;
    }
    if let Some(a) = cache.all_hits.get(&key) {
        return Answer::of(a);
    }
    let input: &[u8] = match cell {
        1 => raw,
        k => &cache.forms[(k - 2) as usize].0,
    };
    // One pass finds every pattern (a check for any match first would scan the
    // value twice whenever one does). The pattern set is the cache's own, cleared
    // after use; it is copied only for a value that matches.
    let mut hits = match cache.all_scratch.take() {
        Some(h) if h.capacity() == all.len() => h,
        _ => PatternSet::new(all.len()),
    };
    let pm = pm.filter(|_| {
        input.len() > FULL_SET_MIN_LEN && !cache.pm_lists.contains_key(&(row as u32, cell))
    });
    let matched = match pm {
        // Both walks are chains of table reads, each waiting on its last: stepped
        // together they overlap, for nearly the time of one. A form the set of all
        // patterns walks is usually one the `@pm` rules read too, but not always (a
        // file's contents): the phrase walk, made on speculation, gives up on bytes
        // that keep its table growing, and is dropped when the set's walk gave up
        // (bytes such as a file's, which the set's walk declines early); it is then
        // made again if it is asked for.
        Some(pm) => {
            let mut rows = pm.rows();
            let lists = pm.walk(&mut rows, Some(SPECULATIVE_PM_BUILDS));
            let (matched, read, mut lists) = all.try_which_match_along(input, &mut hits, lists);
            if matched {
                lists.rest(&input[read..]);
                if !lists.gave_up() {
                    cache
                        .pm_lists
                        .insert((row as u32, cell), ListsSoFar::complete(lists.found()));
                }
            }
            matched
        }
        None => all.try_which_match(input, &mut hits),
    };
    let answer = if !matched {
        AllAnswer::GaveUp(all.bytes_of(input))
    } else if hits.is_empty() {
        AllAnswer::Quiet
    } else {
        AllAnswer::Hits(hits.clone())
    };
    hits.clear();
    cache.all_scratch = Some(hits);
    let out = Answer::of(&answer);
    if cell == 1 {
        cache.cells[row + raw_cell] = if out == Answer::Quiet { 1 } else { 2 };
    }
    if cell != 1 || out != Answer::Quiet {
        cache.all_hits.insert(key, answer);
    }
    out
}

/// Adds to `union` the patterns of `group` that match the form in `cell` of the value
/// whose row starts at `row` (raw bytes `raw`): read off the set of all patterns' answer
/// for that cell when there is one (`all`), else by the group's own set. False when
/// none matches.
#[allow(clippy::too_many_arguments)]
pub(super) fn group_answer(
    cache: &mut TransformCache,
    row: usize,
    raw_cell: usize,
    cell: u32,
    all: Option<&RxSet>,
    pm: Option<&PmUnion>,
    group: &crate::ruleset::prefilter::Group,
    union: &mut Union,
    raw: &[u8],
) -> bool {
    let mut present = None;
    if let Some(all) = all {
        match all_answer(cache, row, raw_cell, cell, all, pm, raw) {
            Answer::Quiet => return false,
            Answer::Hits => {
                if let Some(AllAnswer::Hits(h)) = cache.all_hits.get(&(row as u32, cell)) {
                    return union.add_from(group.set.len(), &group.all_index, h);
                }
            }
            Answer::GaveUp => present = gave_up_on(cache, row, cell),
        }
    }
    let input = cached_input(cache, cell, raw);
    union.add_among(&group.set, &input, present.as_ref())
}

/// The bytes of the form in `cell` of the value whose row starts at `row`, kept when
/// the set of all patterns gave up on it.
pub(super) fn gave_up_on(cache: &TransformCache, row: usize, cell: u32) -> Option<ByteSet> {
    match cache.all_hits.get(&(row as u32, cell)) {
        Some(AllAnswer::GaveUp(present)) => Some(*present),
        _ => None,
    }
}

/// Answers the form in `cell` of the value whose row starts at `row` (raw bytes `raw`)
/// for the patterns of group `g` in `narrow` (see
/// [`Narrow`](crate::ruleset::prefilter::Narrow)), adding those that match to
/// `union`; false when it does not (the form is short, the set of every pattern
/// already answered it, or the factors of several patterns occur in it), and the
/// caller answers as usual.
#[allow(clippy::too_many_arguments)]
pub(super) fn narrow_answer(
    cache: &mut TransformCache,
    row: usize,
    raw_cell: usize,
    cell: u32,
    g: usize,
    narrow: &crate::ruleset::prefilter::Narrow,
    union: &mut Union,
    group_len: usize,
    raw: &[u8],
) -> bool {
    let key = (row as u32, cell, g as u32);
    if !cache.narrow_hits.contains_key(&key) {
        let walked = if cell == 1 {
            cache.cells[row + raw_cell] != 0
        } else {
            cache.all_hits.contains_key(&(row as u32, cell))
        };
        let input = cached_input(cache, cell, raw);
        if walked || input.len() <= FULL_SET_MIN_LEN {
            return false;
        }
        let Some(found) = narrow.matching(&input) else {
            return false;
        };
        cache.narrow_hits.insert(key, found);
    }
    if let Some(&Some(i)) = cache.narrow_hits.get(&key) {
        union.add_index(group_len, i);
    }
    true
}

/// Whether the prefilter's set of all patterns (or the group's narrow search), run on
/// the form of value `v` that the group of `slot` reads, found that the slot's pattern
/// does not match it (an exact answer, kept from the group's scan); false when it was
/// not run on that form, or gave up.
pub(super) fn all_said_no(
    cache: &mut TransformCache,
    nodes: &[ChainNode],
    prefilter: &crate::ruleset::prefilter::Prefilter,
    slot: Slot,
    v: &Value<'_>,
) -> bool {
    let group = &prefilter.groups[slot.group as usize];
    let Some(id) = v.id.filter(|_| group.in_all && !group.multi) else {
        return false;
    };
    let row = cache_row(cache, id);
    let cell = form(cache, nodes, row, group.chain_key, &v.value).0;
    if let Some(found) = cache.narrow_hits.get(&(row as u32, cell, slot.group))
        && group
            .narrow
            .iter()
            .any(|n| n.var == v.var && n.has(slot.index))
    {
        return *found != Some(slot.index);
    }
    if cell == 1 && cache.cells[row + nodes.len() + 1] == 1 {
        return true;
    }
    match cache.all_hits.get(&(row as u32, cell)) {
        Some(AllAnswer::Quiet) => true,
        Some(AllAnswer::Hits(h)) => {
            let p = group.all_index[slot.index as usize] as usize;
            !h.contains(PatternID::new_unchecked(p))
        }
        Some(AllAnswer::GaveUp(_)) | None => false,
    }
}

/// [`AllAnswer`] without its patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    Quiet,
    Hits,
    GaveUp,
}

impl Answer {
    fn of(a: &AllAnswer) -> Answer {
        match a {
            AllAnswer::Quiet => Answer::Quiet,
            AllAnswer::Hits(_) => Answer::Hits,
            AllAnswer::GaveUp(_) => Answer::GaveUp,
        }
    }
}

/// Adds to `union` the patterns of prefilter group `g` that value `v` matches (in
/// the forms the group's rules inspect), marking the value quiet for the group when
/// none does. False when the CPU budget ran out first.
pub(super) fn scan_value(
    cache: &mut TransformCache,
    nodes: &[ChainNode],
    prefilter: &crate::ruleset::prefilter::Prefilter,
    g: usize,
    union: &mut Union,
    budget: &mut crate::transaction::budget::BudgetState,
    v: &Value<'_>,
) -> bool {
    let group = &prefilter.groups[g];
    let raw_cell = nodes.len() + 1;
    let quiet_cell = nodes.len() + 2 + g / 32;
    let quiet_bit = 1u32 << (g % 32);
    if budget.charge(VALUE_WORK + v.value.len() as u64) {
        return false;
    }
    let Some(id) = v.id else {
        if group.multi {
            let (ts, ids) = (&group.transforms, &group.prefix_ids);
            for_each_form(cache, nodes, ts, ids, v, |input| {
                union.add(&group.set, input);
            });
        } else {
            let input = transform(cache, nodes, &group.transforms, group.chain_key, v);
            union.add(&group.set, &input);
        }
        return true;
    };
    let row = cache_row(cache, id);
    if cache.cells[row + quiet_cell] & quiet_bit != 0 {
        return true;
    }
    let all = prefilter.raw.as_ref().filter(|_| group.in_all);
    let pm = prefilter.pm.as_ref();
    if group.multi {
        // Every form the rules inspect: the raw value first, which the set of all
        // patterns answers for; the other forms by the group's own set (answering
        // them through the set of all patterns too was tried: it overflows that set's
        // memo on varying forms, 1.85x the instructions per varying urlencoded form).
        let mut any = false;
        let mut skip_raw = false;
        let mut present = None;
        if let Some(all) = all {
            match all_answer(cache, row, raw_cell, 1, all, pm, &v.value) {
                Answer::Quiet => skip_raw = true,
                Answer::Hits => {
                    if let Some(AllAnswer::Hits(h)) = cache.all_hits.get(&(row as u32, 1)) {
                        any |= union.add_from(group.set.len(), &group.all_index, h);
                        skip_raw = true;
                    }
                }
                Answer::GaveUp => present = gave_up_on(cache, row, 1),
            }
        }
        if !skip_raw {
            any |= union.add_among(&group.set, &v.value, present.as_ref());
        }
        // The other forms, each once: a long one (which the group's set would run
        // through the lazy DFA of every pattern, the set of all patterns' own) is
        // answered by the set of all patterns per cache cell, shared with every group
        // that reads the same cell; a short one by the group's own set.
        let raw: &[u8] = &v.value;
        let mut last = 1;
        for &node in &group.prefix_ids {
            let (cell, _) = form(cache, nodes, row, Some(node), raw);
            if cell == last {
                continue;
            }
            let bytes = |c: u32| -> &[u8] {
                match c {
                    1 => raw,
                    k => &cache.forms[(k - 2) as usize].0,
                }
            };
            let (same, len) = (bytes(cell) == bytes(last), bytes(cell).len());
            last = cell;
            if same {
                continue;
            }
            let mut present = None;
            if let Some(all) = all.filter(|_| len > FULL_SET_MIN_LEN) {
                match all_answer(cache, row, raw_cell, cell, all, pm, raw) {
                    Answer::Quiet => continue,
                    Answer::Hits => {
                        if let Some(AllAnswer::Hits(h)) = cache.all_hits.get(&(row as u32, cell)) {
                            any |= union.add_from(group.set.len(), &group.all_index, h);
                            continue;
                        }
                    }
                    Answer::GaveUp => present = gave_up_on(cache, row, cell),
                }
            }
            let input = cached_input(cache, cell, raw);
            any |= union.add_among(&group.set, &input, present.as_ref());
        }
        if !any {
            cache.cells[row + quiet_cell] |= quiet_bit;
        }
        return true;
    }
    let cell = match group.chain_key {
        Some(key) => form(cache, nodes, row, Some(key), &v.value).0,
        None => 1,
    };
    if v.value.len() > FULL_SET_MIN_LEN
        && let Some(narrow) = group.narrow.iter().find(|n| n.var == v.var)
        && narrow_answer(
            cache,
            row,
            raw_cell,
            cell,
            g,
            narrow,
            union,
            group.set.len(),
            &v.value,
        )
    {
        // Answered for the patterns of the rules that read this variable only: the
        // value is not marked quiet for the whole group.
        return true;
    }
    if !group_answer(cache, row, raw_cell, cell, all, pm, group, union, &v.value) {
        cache.cells[row + quiet_cell] |= quiet_bit;
    }
    true
}

impl Transaction {
    /// True when the prefilter leaves open that `slot`'s pattern matches some value
    /// in this phase; computes the group's answer on first use in the phase. The
    /// first time in a phase that a group the load-time flow reaches is needed, the
    /// answers of all of them are computed together from one collection of their
    /// variables (`Prefilter::eager`); any other group is computed on its own.
    pub(super) fn prefilter_may_match(&mut self, slot: Slot) -> bool {
        let g = slot.group as usize;
        if let Some(Some(u)) = self.cache.unions.get(g) {
            return u.may_match(slot.index);
        }
        let Transaction {
            ruleset,
            policy,
            req,
            resp,
            state,
            cache,
            ctx,
            budget,
            scratch,
            ..
        } = self;
        let prefilter = &ruleset.prefilter;
        let groups = &prefilter.groups;
        let nodes = chain_nodes(ruleset, policy.as_deref());
        if cache.unions.len() != groups.len() {
            cache.unions = vec![None; groups.len()];
        }
        let view = View {
            req,
            resp,
            state,
            ctx,
            rule: None,
        };
        // The buffer that serves every rule's targets serves the groups' values too.
        let mut values = recycle(std::mem::take(scratch));
        let phase = usize::from(state.phases_done.clamp(0, 4));
        let eager = &prefilter.eager[phase];
        let mut out_of_budget = false;
        if state.folds_valid && !cache.eager_done && eager.groups.contains(&(g as u32)) {
            cache.eager_done = true;
            // Each variable once, for every group that reads it.
            let mut ranges: Vec<(Var, std::ops::Range<usize>)> =
                Vec::with_capacity(eager.vars.len());
            for &var in &eager.vars {
                let at = values.len();
                view.collect_superset(var, &mut values);
                ranges.push((var, at..values.len()));
            }
            for &h in &eager.groups {
                let h = h as usize;
                if cache.unions[h].is_some() {
                    continue;
                }
                let group = &groups[h];
                let mut union = Union::default();
                for &var in &group.vars {
                    let Some((_, r)) = ranges.iter().find(|(v, _)| *v == var) else {
                        continue;
                    };
                    for v in &values[r.clone()] {
                        if !scan_value(cache, nodes, prefilter, h, &mut union, budget, v) {
                            out_of_budget = true;
                            break;
                        }
                    }
                    if out_of_budget {
                        break;
                    }
                }
                if out_of_budget {
                    break;
                }
                cache.unions[h] = Some(union);
            }
        } else {
            let group = &groups[g];
            for &var in &group.vars {
                view.collect_superset(var, &mut values);
            }
            let mut union = Union::default();
            for v in &values {
                if !scan_value(cache, nodes, prefilter, g, &mut union, budget, v) {
                    out_of_budget = true;
                    break;
                }
            }
            if !out_of_budget {
                cache.unions[g] = Some(union);
            }
        }
        *scratch = recycle(values);
        if out_of_budget {
            // Out of CPU budget: the group's answer stays unknown, and the phase
            // stops at this rule.
            return false;
        }
        self.cache.unions[g]
            .as_ref()
            .is_some_and(|u| u.may_match(slot.index))
    }
}
