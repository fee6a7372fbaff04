//! Running rules: targets, transformations, operator, actions and flow.

use super::budget::{RULE_WORK, VALUE_WORK};
use super::collect::{Value, View, recycle};
use super::{AllAnswer, Hit, Persistent, State, Transaction, TransformCache};
use crate::actions::{Action, AllowScope, CollectionKind, Ctl, Disruptive, SetOp};
use crate::collections::{RecordKey, StoredVar, VarOp, VarValue, to_number};
use crate::config::EngineConfig;
use crate::intervention::{Intervention, InterventionKind};
use crate::log::MatchRecord;
use crate::lookups::TxLookups;
use crate::macros::MacroContext;
use crate::operators::pm::ListsSoFar;
use crate::operators::rx_set::{ByteSet, FULL_SET_MIN_LEN, RxSet};
use crate::operators::{Captures, CompileContext, Operator};
use crate::rule::{Entry, Rule, RuleOperator};
use crate::ruleset::ChainNode;
use crate::ruleset::fold::Folded;
use crate::ruleset::prefilter::{PmUnion, Slot, Union};
use crate::transforms::{Transform, byte_classes};
use crate::variables::{Exclusion, Var};
use regex_automata::{PatternID, PatternSet};
use seclang::IdRange;
use std::borrow::Cow;
use std::sync::Arc;

/// Which rules a `ctl:ruleRemoveTarget*` applies to.
#[derive(Debug, Clone)]
pub(crate) enum TargetRemoval {
    Ids(Vec<IdRange>),
    Tag(crate::ruleset::tags::TagSet),
    Msg(String),
}

impl TargetRemoval {
    /// Whether the removal applies to `rule` (a link of a chain is judged by its
    /// chain's id, and by its own tags and message).
    pub(crate) fn applies(&self, rule: &Rule) -> bool {
        match self {
            TargetRemoval::Ids(r) => rule
                .chain_id
                .is_some_and(|id| r.iter().any(|r| r.contains(id))),
            TargetRemoval::Tag(tags) => rule.tag_set.intersects(tags),
            TargetRemoval::Msg(m) => rule.meta.msg.as_ref().is_some_and(|x| x.text() == m),
        }
    }
}

/// A transformed value: the raw value itself, a cached result, or a fresh one.
enum Input<'v> {
    Raw(&'v [u8]),
    Cached(Arc<[u8]>),
    Fresh(Cow<'v, [u8]>),
}

impl std::ops::Deref for Input<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Input::Raw(b) => b,
            Input::Cached(a) => a,
            Input::Fresh(c) => c,
        }
    }
}

/// Applies a pipeline to a value, through the per-transaction cache when the value has
/// a stable identity. `chain_key` names the whole pipeline (the last of a rule's
/// `prefix_ids`).
fn transform<'v>(
    cache: &mut TransformCache,
    nodes: &[ChainNode],
    transforms: &[Transform],
    chain_key: Option<u32>,
    value: &'v Value<'_>,
) -> Input<'v> {
    let raw: &'v [u8] = &value.value;
    let Some(last) = chain_key else {
        return Input::Raw(raw);
    };
    let Some(id) = value.id else {
        return Input::Fresh(apply_all(transforms, raw, cache.unicode_map.as_deref()));
    };
    let row = cache_row(cache, id);
    let (cell, _) = form(cache, nodes, row, Some(last), raw);
    cached_input(cache, cell, raw)
}

/// As [`transform`], and also where the result sits in the cache: its row and cell
/// (the raw value's row and cell 1 when there is no pipeline), or `None` for a value
/// without a stable identity.
fn transform_at<'v>(
    cache: &mut TransformCache,
    nodes: &[ChainNode],
    transforms: &[Transform],
    chain_key: Option<u32>,
    value: &'v Value<'_>,
) -> (Input<'v>, Option<(usize, u32)>) {
    let Some(id) = value.id else {
        return (transform(cache, nodes, transforms, chain_key, value), None);
    };
    let raw: &'v [u8] = &value.value;
    let row = cache_row(cache, id);
    let cell = match chain_key {
        Some(last) => form(cache, nodes, row, Some(last), raw).0,
        None => 1,
    };
    (cached_input(cache, cell, raw), Some((row, cell)))
}

/// Whether `@pm` list `list` of `union` has a phrase in the form at (`row`, `cell`),
/// whose bytes are `input`. The union's walk over the form is kept: it stops at the
/// first phrase of the list asked for, and a later question about another list goes
/// on from there.
fn pm_has(
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
const SPECULATIVE_PM_BUILDS: usize = 256;

/// Marks a raw value's byte classes as computed in its row.
const KNOWN: u32 = 1 << 31;

/// The start of value `id`'s row in the transformation cache, made on first use.
/// Called for every group a value is scanned for (thousands of times in a JSON
/// body): the lookup is inlined, the making of a row is not.
#[inline]
fn cache_row(cache: &mut TransformCache, id: u32) -> usize {
    let (source, index) = ((id >> 24) as usize, (id & 0xff_ffff) as usize);
    if let Some(&r) = cache.rows.get(source).and_then(|s| s.get(index))
        && r != 0
    {
        return r as usize - 1;
    }
    new_cache_row(cache, source, index)
}

/// [`cache_row`] for a value that has no row yet.
#[inline(never)]
fn new_cache_row(cache: &mut TransformCache, source: usize, index: usize) -> usize {
    if cache.cells.capacity() == 0 {
        // A CRS transaction has a few dozen values: skip the early regrowth.
        cache.cells.reserve(48 * cache.width);
    }
    let r = cache.cells.len();
    cache.cells.resize(r + cache.width, 0);
    if cache.rows.len() <= source {
        cache.rows.resize_with(source + 1, Vec::new);
    }
    let slots = &mut cache.rows[source];
    if slots.len() <= index {
        // Identities are dense within a source (the value's position).
        slots.resize(index + 1, 0);
    }
    slots[index] = r as u32 + 1;
    r
}

/// The value behind a cache cell.
fn cached_input<'v>(cache: &TransformCache, cell: u32, raw: &'v [u8]) -> Input<'v> {
    match cell {
        1 => Input::Raw(raw),
        k => Input::Cached(cache.forms[(k - 2) as usize].0.clone()),
    }
}

/// The cell of the value (whose row starts at `row`) after the pipeline prefix `node`
/// (`None`: no transformation), with its byte classes. Computed from the parent
/// prefix's form, itself cached, so pipelines that start alike share their work; a step
/// whose triggers the value does not contain is skipped without looking at the bytes.
fn form(
    cache: &mut TransformCache,
    nodes: &[ChainNode],
    row: usize,
    node: Option<u32>,
    raw: &[u8],
) -> (u32, u32) {
    let Some(n) = node else {
        return (1, raw_classes(cache, row + nodes.len(), raw));
    };
    let cell = cache.cells[row + n as usize];
    match cell {
        0 => {}
        1 => return (1, cache.cells[row + nodes.len()] & !KNOWN),
        k => return (k, cache.forms[(k - 2) as usize].1),
    }
    let ChainNode {
        parent,
        step,
        triggers,
    } = nodes[n as usize];
    // A value with none of the classes any step reacts to passes the whole prefix
    // unchanged: no need to walk it.
    let classes = raw_classes(cache, row + nodes.len(), raw);
    if classes & triggers == 0 {
        cache.cells[row + n as usize] = 1;
        return (1, classes);
    }
    form_step(cache, nodes, row, n, parent, step, raw)
}

/// [`form`] for a prefix not computed yet (`n`, whose last step is `step` after the
/// prefix `parent`): kept apart so that the usual call, a cell already known, stays
/// short.
#[inline(never)]
fn form_step(
    cache: &mut TransformCache,
    nodes: &[ChainNode],
    row: usize,
    n: u32,
    parent: Option<u32>,
    step: Transform,
    raw: &[u8],
) -> (u32, u32) {
    let (base, classes) = form(cache, nodes, row, parent, raw);
    // A step that acts as another on these bytes shares that one's result.
    let step = step.same_on(classes);
    let map = cache.unicode_map.clone();
    let memo = (row as u32, base, step);
    let result = if classes & step.triggers() == 0 {
        (base, classes)
    } else if let Some(&done) = cache.steps.get(&memo) {
        // Another prefix already applied this step to the same bytes.
        let classes = match done {
            1 => cache.cells[row + nodes.len()] & !KNOWN,
            k => cache.forms[(k - 2) as usize].1,
        };
        (done, classes)
    } else {
        let input: &[u8] = if base == 1 {
            raw
        } else {
            &cache.forms[(base - 2) as usize].0
        };
        let done = match step.apply_with(input, map.as_deref()) {
            // A transformation may borrow a shorter piece of its input (`trim`), so only
            // a borrow of the whole value means "unchanged".
            Cow::Borrowed(b) if b.len() == input.len() => (base, classes),
            out => match (out.len() >= SHARED_FORM_MIN_LEN)
                .then(|| equal_form(cache, row, raw, &out))
                .flatten()
            {
                // Another step made the same bytes of this value: one cell serves
                // both, so the automata and operators that read it run once.
                Some(1) => (1, cache.cells[row + nodes.len()] & !KNOWN),
                Some(k) => (k, cache.forms[(k - 2) as usize].1),
                None => {
                    let bytes: Arc<[u8]> = Arc::from(&*out);
                    let len = bytes.len();
                    let classes = byte_classes(&bytes);
                    cache.forms.push((bytes, classes));
                    let cell = cache.forms.len() as u32 + 1;
                    if len >= SHARED_FORM_MIN_LEN {
                        cache
                            .long_forms
                            .entry((row as u32, len))
                            .or_default()
                            .push(cell);
                    }
                    (cell, classes)
                }
            },
        };
        cache.steps.insert(memo, done.0);
        done
    };
    cache.cells[row + n as usize] = result.0;
    result
}

/// Forms of at least this many bytes are compared with the value's other forms of
/// the same length before they get a cell of their own (see [`equal_form`]). Shorter
/// ones cost little to scan twice, and are many on ordinary traffic.
const SHARED_FORM_MIN_LEN: usize = 256;

/// The cell of the value whose row starts at `row` (raw bytes `raw`) that already
/// holds `bytes`: 1 when they are the raw value, k when `forms[k - 2]`; `None` when no
/// cell does, or when `bytes` is shorter than [`SHARED_FORM_MIN_LEN`]. Pipelines that
/// differ often give the same bytes (`t:cmdLine` and `t:jsDecode` both only drop the
/// backslashes of a lower-case value; `t:normalisePathWin` is `t:normalisePath` on a
/// value without `\`).
#[cold]
fn equal_form(cache: &TransformCache, row: usize, raw: &[u8], bytes: &[u8]) -> Option<u32> {
    if bytes.len() < SHARED_FORM_MIN_LEN {
        return None;
    }
    if bytes == raw {
        return Some(1);
    }
    cache
        .long_forms
        .get(&(row as u32, bytes.len()))?
        .iter()
        .copied()
        .find(|&k| *cache.forms[(k - 2) as usize].0 == *bytes)
}

/// The raw value's byte classes, kept in its row's `cell` once computed.
fn raw_classes(cache: &mut TransformCache, cell: usize, raw: &[u8]) -> u32 {
    let c = &mut cache.cells[cell];
    if *c & KNOWN == 0 {
        *c = byte_classes(raw) | KNOWN;
    }
    *c & !KNOWN
}

/// What the set of all prefilter patterns finds in the form in `cell` (1: the raw
/// value) of the value whose row starts at `row`, computed on first use: kept in the
/// row's `raw_cell` for the raw value (0 unknown, 1 quiet, 2 in `all_hits`) and in
/// `all_hits`. A long form not yet walked by the `@pm` union `pm` is walked by both
/// automata together, and the union's answer kept for [`pm_lists`].
fn all_answer(
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
fn group_answer(
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
fn gave_up_on(cache: &TransformCache, row: usize, cell: u32) -> Option<ByteSet> {
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
fn narrow_answer(
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
fn all_said_no(
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
enum Answer {
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

/// Applies a pipeline to one value, without the cache.
pub(crate) fn apply_all<'v>(
    transforms: &[Transform],
    raw: &'v [u8],
    map: Option<&crate::transforms::UnicodeMap>,
) -> Cow<'v, [u8]> {
    let mut cur: Cow<'v, [u8]> = Cow::Borrowed(raw);
    let mut classes = byte_classes(raw);
    for t in transforms {
        if classes & t.triggers() == 0 {
            continue;
        }
        let (next, changed) = match cur {
            Cow::Borrowed(b) => {
                let r = t.apply_with(b, map);
                let changed = !matches!(&r, Cow::Borrowed(x) if x.len() == b.len());
                (r, changed)
            }
            Cow::Owned(v) => match t.apply_with(&v, map) {
                Cow::Borrowed(b) if b.len() == v.len() => (Cow::Owned(v), false),
                Cow::Borrowed(b) => (Cow::Owned(b.to_vec()), true),
                Cow::Owned(n) => (Cow::Owned(n), true),
            },
        };
        cur = next;
        // The classes only change with the bytes.
        if changed {
            classes = byte_classes(&cur);
        }
    }
    cur
}

/// Calls `f` with the raw value (first) and every intermediate result of a pipeline
/// (`transforms`, whose prefixes have the cache keys `prefix_ids`) that differs from
/// the one before: the inputs a `multiMatch` rule inspects.
fn for_each_form(
    cache: &mut TransformCache,
    nodes: &[ChainNode],
    transforms: &[Transform],
    prefix_ids: &[u32],
    value: &Value<'_>,
    mut f: impl FnMut(&[u8]),
) {
    let raw: &[u8] = &value.value;
    f(raw);
    let Some(id) = value.id else {
        let mut cur: Cow<'_, [u8]> = Cow::Borrowed(raw);
        for t in transforms {
            let next = match t.apply_with(&cur, cache.unicode_map.as_deref()) {
                Cow::Borrowed(b) if b.len() == cur.len() => continue,
                other => other.into_owned(),
            };
            if *cur != next[..] {
                f(&next);
                cur = Cow::Owned(next);
            }
        }
        return;
    };
    let row = cache_row(cache, id);
    let mut last = 1;
    for &node in prefix_ids {
        let (cell, _) = form(cache, nodes, row, Some(node), raw);
        if cell != last {
            let bytes = |c: u32| -> &[u8] {
                match c {
                    1 => raw,
                    k => &cache.forms[(k - 2) as usize].0,
                }
            };
            if bytes(cell) != bytes(last) {
                f(bytes(cell));
            }
            last = cell;
        }
    }
}

/// The transformation prefixes of a transaction: its site's (the base's and the
/// overlay's new ones), or the rule set's.
fn chain_nodes<'a>(
    ruleset: &'a crate::ruleset::Ruleset,
    policy: Option<&'a crate::policy::Policy>,
) -> &'a [ChainNode] {
    policy.map_or(&ruleset.chain_nodes, |p| p.chain_nodes())
}

/// How debug lines name a rule: its id (a chain's links by their chain's id), file and
/// line.
fn rule_label(rule: &Rule) -> String {
    let id = rule
        .id
        .or(rule.chain_id)
        .map(|i| i.to_string())
        .unwrap_or_else(|| "-".into());
    format!(
        "(Rule {id}, {}:{})",
        rule.span.file.display(),
        rule.span.line
    )
}

fn excluded(rule: &Rule, state: &State, value: &Value<'_>) -> bool {
    rule.exclusions
        .iter()
        .any(|e| e.excludes(value.var, &value.key))
        || state
            .target_removals
            .iter()
            .any(|(sel, e): &(TargetRemoval, Exclusion)| {
                e.excludes(value.var, &value.key) && sel.applies(rule)
            })
}

/// Runs the operator on one input. `@rbl` and `@geoLookup` go through `lookups`,
/// with the settings of `cfg`.
fn run_operator(
    rule: &Rule,
    view: &View<'_>,
    input: &[u8],
    captures: Option<&mut Captures>,
    cfg: &EngineConfig,
    lookups: &mut TxLookups,
) -> bool {
    let matched = match &rule.operator {
        RuleOperator::Static(op) => op.matches(input, captures),
        RuleOperator::Dynamic {
            plain: Some(op),
            argument,
            ..
        } => op.matches(&argument.expand(view), input),
        RuleOperator::Dynamic { name, argument, .. } => {
            let bytes = argument.expand(view);
            let arg = match std::str::from_utf8(&bytes) {
                Ok(s) => Cow::Borrowed(s),
                Err(_) => String::from_utf8_lossy(&bytes),
            };
            let source = seclang::MemorySource::new();
            let ctx = CompileContext {
                source: &source,
                base_dir: std::path::Path::new("."),
            };
            match Operator::compile(name, &arg, &ctx) {
                Ok(op) => op.matches(input, captures),
                Err(e) => {
                    tracing::warn!(rule = ?rule.chain_id, "operator argument after expansion is invalid: {e}");
                    false
                }
            }
        }
        RuleOperator::Rbl(zone) => {
            let key = cfg.httpbl_key.as_deref();
            let listed = lookups.rbl(view.ctx.rbl.as_ref(), zone, key, input);
            // With `capture`, TX.0 is the value looked up (as ModSecurity v3).
            if let (true, Some(c)) = (listed, captures) {
                c.push(input.to_vec());
            }
            listed
        }
        RuleOperator::GeoLookup => lookups.geo(cfg.geo_db.as_deref(), input),
        RuleOperator::MemberOf { collection, name } => view.state.persistent[collection.index()]
            .as_ref()
            .and_then(|p| p.values.get(name.as_slice()))
            .is_some_and(|v| matches!(&v.value, VarValue::Set(m) if m.contains_key(input))),
    };
    matched != rule.negated
}

/// The detect-stage check that answers `rule`'s operator on `v`, when `v` is an
/// untransformed value of the input table (INPUTS, INPUTS_DECODED) and the operator
/// is a semantic detector or `@confirmSqlSyntax`.
fn table_check(rule: &Rule, v: &Value<'_>) -> Option<crate::inputs::Check> {
    use crate::inputs::Check;
    if !rule.transforms.is_empty()
        || !matches!(v.var, Var::Inputs | Var::InputsDecoded)
        || v.id.is_none()
    {
        return None;
    }
    match &rule.operator {
        RuleOperator::Static(op) => match op.as_ref() {
            Operator::Detect(class) => Some(Check::Class(*class)),
            Operator::ConfirmSqlSyntax => Some(Check::SqlSyntax),
            _ => None,
        },
        _ => None,
    }
}

/// Adds to `union` the patterns of prefilter group `g` that value `v` matches (in
/// the forms the group's rules inspect), marking the value quiet for the group when
/// none does. False when the CPU budget ran out first.
fn scan_value(
    cache: &mut TransformCache,
    nodes: &[ChainNode],
    prefilter: &crate::ruleset::prefilter::Prefilter,
    g: usize,
    union: &mut Union,
    budget: &mut super::budget::BudgetState,
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
    pub(crate) fn run_phase(&mut self, phase: u8) -> Option<Intervention> {
        // A phase left paused is not finished once another phase starts (the server
        // refused the request instead of resuming it).
        self.paused = None;
        self.run_phase_from(phase, 0)
    }

    /// Continues the phase [`Transaction::paused`] before one of its rules, from that
    /// rule, without pausing again; None when no phase is paused.
    pub(crate) fn resume_paused_phase(&mut self) -> Option<(u8, Option<Intervention>)> {
        let (phase, index) = self.paused.take()?;
        let pausing = std::mem::replace(&mut self.pause_for_lookups, false);
        let out = self.run_phase_from(phase, index);
        self.pause_for_lookups = pausing;
        Some((phase, out))
    }

    /// Runs `phase` from its entry `start` (0: from its beginning, with the phase's
    /// setup; otherwise the continuation of a paused walk, whose setup was done).
    fn run_phase_from(&mut self, phase: u8, start: usize) -> Option<Intervention> {
        if phase < 5 && self.state.intervention.is_some() {
            if self.debug_on(8) {
                self.debug_line(
                    8,
                    &format!("Skipping phase {phase}: the request was already intercepted."),
                );
            }
            return self.state.intervention.clone();
        }
        if self.debug_on(4) {
            let msg = if start == 0 {
                format!("Starting phase {phase}.")
            } else {
                format!("Resuming phase {phase}.")
            };
            self.debug_line(4, &msg);
        }
        self.state.phases_done = self.state.phases_done.max(phase - 1);
        if start == 0 {
            // Values change between phases: prefilter answers are per phase.
            self.cache.unions.iter_mut().for_each(|u| *u = None);
            self.cache.eager_done = false;
        }
        self.budget.open();
        let result = self.run_phase_rules(phase, start);
        self.budget.close();
        if let Some(times) = self.rule_times.as_mut()
            && !times.is_empty()
        {
            let times = std::mem::take(times);
            self.events
                .push_back(crate::events::Event::RuleTimes { phase, times });
        }
        if self.paused.is_some() {
            return None;
        }
        self.state.phases_done = self.state.phases_done.max(phase);
        if phase == 2 {
            // The request's transformed values served phases 1 and 2; the transaction
            // now waits for the response, so their memory (hundreds of KiB for a large
            // JSON body) goes back now. Later phases recompute what they need.
            let width = self.cache.width;
            let unicode_map = self.cache.unicode_map.take();
            self.cache = TransformCache {
                width,
                unicode_map,
                ..Default::default()
            };
        }
        result
    }

    /// Records that the CPU budget stopped evaluation at `rule_id` in `phase`, and
    /// returns the intervention when the outcome is to block.
    fn budget_stop(&mut self, phase: u8, rule_id: Option<i64>) -> Option<Intervention> {
        let enforce = self.state.mode == crate::config::RuleEngineMode::On;
        let first = self.budget.exceeded.is_none();
        let status = self.budget.stop(phase, rule_id, enforce);
        if first && let Some(e) = self.budget.exceeded.clone() {
            self.events.push_back(crate::events::Event::LimitReached(
                crate::events::Limit::CpuBudget(e),
            ));
        }
        if self.debug_on(1) {
            self.debug_line(
                1,
                &format!(
                    "CPU budget exceeded in phase {phase}{}: rule evaluation stops.",
                    rule_id.map(|i| format!(" at rule {i}")).unwrap_or_default()
                ),
            );
        }
        let status = status?;
        let e = self.budget.exceeded.as_ref()?;
        let i = Intervention {
            status,
            kind: InterventionKind::Deny,
            rule_id: None,
            message: Some(format!(
                "CPU budget exceeded: {} of {} microseconds used, in phase {phase}",
                e.used_micros, e.limit_micros
            )),
        };
        self.intervene(phase, &i);
        Some(i)
    }

    fn run_phase_rules(&mut self, phase: u8, start: usize) -> Option<Intervention> {
        if self.state.mode == crate::config::RuleEngineMode::Off {
            return None;
        }
        if self.budget.exceeded.is_some() {
            // Rule evaluation stopped for good when the budget ran out.
            return None;
        }
        if self.budget.tripped() {
            // Body processing used up the budget before the phase's first rule.
            return self.budget_stop(phase, None);
        }
        match self.state.allow {
            Some(AllowScope::All) if phase < 5 => return None,
            Some(AllowScope::Request) if phase <= 2 => return None,
            _ => {}
        }
        let ruleset = self.ruleset().clone();
        let policy = self.policy.clone();
        let p = usize::from(phase - 1);
        // A site's own rules run first, then the base's: one walk over both, so
        // that a `skip` or `skipAfter` of the site's may jump into the base's.
        let overlay: &[Entry] = policy.as_deref().map_or(&[], |pl| &pl.overlay.phases[p]);
        let base = &ruleset.phases[p];
        let overlay_len = overlay.len();
        // A site whose walk decides the folded links differently has its own table.
        let own_folds = policy.as_deref().and_then(|pl| match &pl.folds {
            crate::ruleset::fold::SiteFolds::Own { folded, .. } => Some(&**folded),
            _ => None,
        });
        if start == 0 {
            // The load-time folds assume every earlier phase ran to its end.
            self.state.folds_valid = self.state.fold_phase == phase - 1;
        }
        // Rules that may wait for a DNS lookup, before which the walk pauses.
        let pausing = self.pause_for_lookups && phase < 5;
        let (pause_overlay, pause_base): (&[u32], &[u32]) = if pausing {
            (
                policy
                    .as_deref()
                    .map_or(&[], |pl| &pl.overlay.rbl_use.entries[p]),
                &ruleset.rbl_use.entries[p],
            )
        } else {
            (&[], &[])
        };
        // The walk's state between rules is only its position: a paused walk goes
        // on from the rule it paused before, with no skip pending.
        let mut skip_after: Option<&str> = None;
        let mut skip = 0u32;
        for (index, entry) in overlay.iter().chain(base).enumerate().skip(start) {
            let rule = match entry {
                Entry::Marker(name) => {
                    if skip_after == Some(name.as_str()) {
                        skip_after = None;
                    }
                    continue;
                }
                Entry::Rule(r) => r,
            };
            if skip_after.is_some() {
                continue;
            }
            if skip > 0 {
                skip -= 1;
                continue;
            }
            if self.is_removed(rule) {
                if self.debug_on(9) {
                    self.debug_line(
                        9,
                        &format!("{} skipped: removed by a ctl action.", rule_label(rule)),
                    );
                }
                continue;
            }
            let (pause_at, at) = if index < overlay_len {
                (pause_overlay, index)
            } else {
                (pause_base, index - overlay_len)
            };
            if pause_at.binary_search(&(at as u32)).is_ok() {
                if self.debug_on(4) {
                    let msg = format!("{}: pausing for a DNS lookup.", rule_label(rule));
                    self.debug_line(4, &msg);
                }
                self.paused = Some((phase, index));
                return None;
            }
            if self.budget.charge(RULE_WORK) {
                return self.budget_stop(phase, rule.chain_id);
            }
            self.state.matched_vars.clear();
            let started = self.rule_times.is_some().then(std::time::Instant::now);
            let matched = self.eval_link(rule, own_folds);
            if let (Some(started), Some(times)) = (started, self.rule_times.as_mut()) {
                times.push(crate::events::RuleTime {
                    rule_id: rule.chain_id,
                    nanos: u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX),
                });
            }
            if self.budget.tripped() {
                // The budget ran out inside the rule: it is abandoned, actions and all.
                return self.budget_stop(phase, rule.chain_id);
            }
            if self.debug_on(if matched { 4 } else { 9 }) {
                let msg = format!("{} returned {}.", rule_label(rule), u8::from(matched));
                self.debug_line(if matched { 4 } else { 9 }, &msg);
            }
            if !matched {
                continue;
            }
            if let Some(m) = &rule.skip_after {
                if self.debug_on(9) {
                    self.debug_line(9, &format!("Skipping rules up to the marker {m}."));
                }
                skip_after = Some(m.as_str());
            }
            skip = rule.skip;
            let (disruptive, default_status) =
                match rule.disruptive.clone().unwrap_or(Disruptive::Pass) {
                    Disruptive::Block => match policy.as_deref() {
                        Some(pl) if index < overlay_len => pl.overlay.default_disruptive[p].clone(),
                        _ => ruleset.default_disruptive[p].clone(),
                    },
                    d => (d, None),
                };
            let enforce = self.state.mode == crate::config::RuleEngineMode::On;
            let intervention = match &disruptive {
                Disruptive::Deny => Some((
                    InterventionKind::Deny,
                    rule.status.or(default_status).unwrap_or(403),
                )),
                Disruptive::Drop => Some((
                    InterventionKind::Drop,
                    rule.status.or(default_status).unwrap_or(403),
                )),
                Disruptive::Redirect(url) => {
                    let view = self.view(Some(rule));
                    let url = url.expand_string(&view);
                    Some((
                        InterventionKind::Redirect(url),
                        rule.status.or(default_status).unwrap_or(302),
                    ))
                }
                Disruptive::Pass | Disruptive::Block | Disruptive::Allow(_) => None,
            };
            let disrupts = enforce && intervention.is_some();
            if intervention.is_some() && self.debug_on(4) {
                let msg = format!(
                    "{}: disruptive action {:?}{}.",
                    rule_label(rule),
                    disruptive,
                    if enforce {
                        ""
                    } else {
                        ", not enforced (DetectionOnly)"
                    }
                );
                self.debug_line(4, &msg);
            }
            self.record_match(
                rule,
                phase,
                disrupts
                    .then(|| intervention.as_ref().map(|i| i.1))
                    .flatten(),
            );
            if let Some((kind, status)) = intervention
                && enforce
            {
                let message = rule
                    .meta
                    .msg
                    .as_ref()
                    .map(|m| m.expand_string(&self.view(Some(rule))));
                let i = Intervention {
                    status,
                    kind,
                    rule_id: rule.id,
                    message,
                };
                self.intervene(phase, &i);
                return Some(i);
            }
            if let Disruptive::Allow(scope) = disruptive {
                if self.debug_on(4) {
                    let msg = format!("{}: allow ({scope:?}).", rule_label(rule));
                    self.debug_line(4, &msg);
                }
                if enforce {
                    self.state.allow = Some(scope);
                    self.state.allow_phase = phase;
                    if scope == AllowScope::Phase {
                        self.phase_ended(phase);
                    }
                    return None;
                }
            }
        }
        self.phase_ended(phase);
        None
    }

    /// Records that `phase`'s walk reached its end (or an `allow:phase`).
    fn phase_ended(&mut self, phase: u8) {
        if self.state.folds_valid {
            self.state.fold_phase = phase;
        }
    }

    pub(crate) fn view<'a>(&'a self, rule: Option<&'a Rule>) -> View<'a> {
        View {
            req: &self.req,
            resp: &self.resp,
            state: &self.state,
            ctx: self.ctx(),
            rule,
        }
    }

    /// Whether `rule`'s `ctl`s break the folds this transaction uses: the site's
    /// own table says so for the base's links when the site has one.
    fn breaks_folds(&self, rule: &Rule) -> bool {
        match self.policy.as_deref().map(|p| &p.folds) {
            Some(crate::ruleset::fold::SiteFolds::Own { breaks, .. }) => breaks
                .get(rule.fold_slot as usize)
                .copied()
                .unwrap_or(rule.breaks_folds),
            _ => rule.breaks_folds,
        }
    }

    fn is_removed(&self, rule: &Rule) -> bool {
        let s = &self.state;
        if let Some(id) = rule.id
            && s.removed_ids.contains(id)
        {
            return true;
        }
        if rule.tag_set.intersects(&s.removed_tags) {
            return true;
        }
        !s.removed_msgs.is_empty()
            && rule
                .meta
                .msg
                .as_ref()
                .is_some_and(|m| s.removed_msgs.iter().any(|x| x == m.text()))
    }

    /// Evaluates one link of a chain and, when it matches, the links after it.
    /// Returns true when the whole rest of the chain matched. `own_folds` is the
    /// site's own fold table, when it has one (by `Rule::fold_slot`), else the
    /// links' own folds serve.
    fn eval_link(&mut self, rule: &Rule, own_folds: Option<&[Option<Folded>]>) -> bool {
        let folded = match own_folds {
            Some(t) => t.get(rule.fold_slot as usize).and_then(Option::as_ref),
            None => rule.folded.as_ref(),
        };
        let matched = if rule.targets.is_empty() {
            // SecAction: matches once, with no value.
            self.run_match_actions(rule);
            true
        } else if let (Some(folded), true) = (folded, self.state.folds_valid) {
            self.replay(rule, folded)
        } else {
            self.eval_targets(rule)
        };
        if !matched {
            return false;
        }
        if let Some(next) = &rule.chain
            && !self.eval_link(next, own_folds)
        {
            return false;
        }
        self.run_full_match_actions(rule);
        true
    }

    /// True when the prefilter leaves open that `slot`'s pattern matches some value
    /// in this phase; computes the group's answer on first use in the phase. The
    /// first time in a phase that a group the load-time flow reaches is needed, the
    /// answers of all of them are computed together from one collection of their
    /// variables (`Prefilter::eager`); any other group is computed on its own.
    fn prefilter_may_match(&mut self, slot: Slot) -> bool {
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

    /// Evaluates a link folded at load time: its known matches, without collecting,
    /// transforming or running the operator.
    fn replay(&mut self, rule: &Rule, folded: &Folded) -> bool {
        let Folded::Always(hits) = folded else {
            if self.debug_on(9) {
                let msg = format!("{}: never matches (folded at load time).", rule_label(rule));
                self.debug_line(9, &msg);
            }
            return false;
        };
        for (_, value) in hits {
            if self.budget.charge(VALUE_WORK + value.len() as u64) {
                // Out of CPU budget: the rule is abandoned, as when evaluated.
                return false;
            }
        }
        for (name, value) in hits {
            self.apply_hit(rule, name, value);
        }
        true
    }

    /// Makes one matched value MATCHED_VAR (and its name MATCHED_VAR_NAME, and one of
    /// MATCHED_VARS), then runs the rule's per-value actions.
    fn apply_hit(&mut self, rule: &Rule, name: &[u8], value: &[u8]) {
        let st = &mut self.state;
        // MATCHED_VAR and MATCHED_VAR_NAME keep their buffers from match to match.
        st.matched_var.clear();
        st.matched_var.extend_from_slice(value);
        st.matched_var_name.clear();
        st.matched_var_name.extend_from_slice(name);
        st.matched_vars.push(name, value);
        if self.debug_on(9) {
            let msg = format!(
                "{}: operator @{} {} matched {}: `{}'.",
                rule_label(rule),
                rule.operator_text.0,
                rule.operator_text.1,
                String::from_utf8_lossy(name),
                crate::log::cut(&String::from_utf8_lossy(value), 200)
            );
            self.debug_line(9, &msg);
        }
        self.run_match_actions(rule);
    }

    fn eval_targets(&mut self, rule: &Rule) -> bool {
        if let Some(slot) = rule.prefilter
            && !self.prefilter_may_match(slot)
        {
            return false;
        }
        // Matched values are collected first and acted upon after, because actions
        // change the state the values are read from.
        let mut hits = std::mem::take(&mut self.hits);
        let mut n = 0;
        {
            let Transaction {
                ruleset,
                policy,
                req,
                resp,
                state,
                cache,
                ctx,
                scratch,
                budget,
                lookups,
                ..
            } = self;
            let nodes = chain_nodes(ruleset, policy.as_deref());
            let cfg = &ruleset.config;
            let view = View {
                req,
                resp,
                state,
                ctx,
                rule: Some(rule),
            };
            let mut values = recycle(std::mem::take(scratch));
            for t in &rule.targets {
                view.collect(t, &mut values);
            }
            // Records a match of `v` seen as `input`, reusing the pool's buffers.
            let mut hit = |v: &Value<'_>, input: &[u8], lookups: &mut TxLookups| {
                if n == hits.len() {
                    hits.push(Hit::default());
                }
                let h = &mut hits[n];
                h.name.clear();
                v.write_name(&mut h.name);
                h.value.clear();
                h.value.extend_from_slice(input);
                // Captures cost a slower search: only for values that match.
                h.caps = rule.capture.then(|| {
                    let mut caps = Captures::new();
                    run_operator(rule, &view, input, Some(&mut caps), cfg, lookups);
                    caps
                });
                n += 1;
            };
            for v in &values {
                if excluded(rule, state, v) {
                    continue;
                }
                if budget.charge(VALUE_WORK + v.value.len() as u64) {
                    // Out of CPU budget: the rule is abandoned, its hits dropped.
                    n = 0;
                    break;
                }
                if rule.multi_match {
                    let (ts, ids) = (&rule.transforms, &rule.prefix_ids);
                    for_each_form(cache, nodes, ts, ids, v, |input| {
                        if run_operator(rule, &view, input, None, cfg, lookups) {
                            hit(v, input, lookups);
                        }
                    });
                } else {
                    // The detect stage answers a detector on an untransformed value
                    // of the input table, from the entry's candidates and the
                    // detections already run on it.
                    if let Some(check) = table_check(rule, v) {
                        let index = v.id.map_or(0, |id| (id & 0x00ff_ffff) as usize);
                        if view.req.inputs.check(index, check) != rule.negated {
                            hit(v, &v.value, lookups);
                        }
                        continue;
                    }
                    let (input, at) = transform_at(
                        cache,
                        nodes,
                        &rule.transforms,
                        rule.prefix_ids.last().copied(),
                        v,
                    );
                    let matched = match (rule.pm_list, at, &ruleset.prefilter.pm) {
                        // One pass of every phrase list over these bytes answers for
                        // all `@pm` rules that inspect them.
                        (Some(list), Some((row, cell)), Some(union)) => {
                            pm_has(cache, union, row, cell, &input, list) != rule.negated
                        }
                        // The prefilter's walk already told, exactly, that the
                        // pattern does not match this value: a long value is not
                        // searched again.
                        _ if input.len() > FULL_SET_MIN_LEN
                            && rule.prefilter.is_some_and(|slot| {
                                all_said_no(cache, nodes, &ruleset.prefilter, slot, v)
                            }) =>
                        {
                            false
                        }
                        _ => run_operator(rule, &view, &input, None, cfg, lookups),
                    };
                    if matched {
                        hit(v, &input, lookups);
                    }
                }
            }
            *scratch = recycle(values);
        }
        // A `@geoLookup` that found its address replaces GEO, for the rule's actions
        // and the rules after it.
        if let Some(geo) = self.lookups.geo.take() {
            self.state.geo = geo;
        }
        for h in &mut hits[..n] {
            if let Some(caps) = h.caps.take() {
                for (i, c) in caps.into_iter().enumerate().take(10) {
                    let key: &[u8] = &[b'0' + i as u8];
                    match self.state.tx.get_mut(key) {
                        Some(slot) => *slot = c,
                        None => {
                            self.state.tx.insert(key.to_vec(), c);
                        }
                    }
                }
            }
            self.apply_hit(rule, &h.name, &h.value);
        }
        self.hits = hits;
        n > 0
    }

    fn run_match_actions(&mut self, rule: &Rule) {
        for a in &rule.match_actions {
            self.run_action(rule, a);
        }
    }

    fn run_full_match_actions(&mut self, rule: &Rule) {
        for a in &rule.full_match_actions {
            self.run_action(rule, a);
        }
    }

    fn now_secs(&self) -> i64 {
        self.ctx().now_unix_micros / 1_000_000
    }

    fn run_action(&mut self, rule: &Rule, action: &Action) {
        match action {
            Action::SetVar {
                collection,
                name,
                op,
            } if *collection == CollectionKind::Tx => self.set_tx_var(rule, name, op),
            Action::SetVar {
                collection,
                name,
                op,
            } => {
                let (key, value) = {
                    let view = self.view(Some(rule));
                    let key = name.expand(&view).to_ascii_lowercase();
                    let value = match op {
                        SetOp::Set(m) | SetOp::Add(m) | SetOp::Sub(m) => {
                            Some(m.expand(&view).into_owned())
                        }
                        SetOp::SetOne | SetOp::Delete => None,
                    };
                    (key, value)
                };
                self.set_var(*collection, key, op, value);
            }
            Action::SetEnv { name, value } => {
                let v = value.expand(&self.view(Some(rule))).into_owned();
                self.state.env.insert(name.as_bytes().to_vec(), v);
            }
            Action::ExpireVar {
                collection,
                name,
                seconds,
            } => {
                let (key, secs) = {
                    let view = self.view(Some(rule));
                    (
                        name.expand(&view).to_ascii_lowercase(),
                        to_number(&seconds.expand(&view)),
                    )
                };
                let at = self.now_secs().saturating_add(secs);
                if let Some(p) = self.state.persistent[collection.index()].as_mut()
                    && let Some(v) = p.values.get_mut(&key)
                {
                    v.expires_at = Some(at);
                    p.log.push(&key, VarOp::ExpireAt(at));
                }
            }
            Action::DeprecateVar {
                collection,
                name,
                spec,
            } => {
                let (key, spec) = {
                    let view = self.view(Some(rule));
                    (
                        name.expand(&view).to_ascii_lowercase(),
                        spec.expand_string(&view),
                    )
                };
                self.deprecate_var(*collection, &key, &spec);
            }
            Action::Member {
                collection,
                name,
                value,
                add,
            } => {
                let (key, member) = {
                    let view = self.view(Some(rule));
                    (
                        name.expand(&view).to_ascii_lowercase(),
                        value.expand(&view).into_owned(),
                    )
                };
                let op = if *add {
                    VarOp::AddMember(member)
                } else {
                    VarOp::RemoveMember(member)
                };
                self.write_persistent(*collection, key, op);
            }
            Action::InitCol { collection, key } => {
                let key = key.expand(&self.view(Some(rule))).into_owned();
                self.init_collection(*collection, key);
            }
            Action::SetUid(m) => {
                let key = m.expand(&self.view(Some(rule))).into_owned();
                self.init_collection(CollectionKind::User, key);
            }
            Action::SetSid(m) => {
                let key = m.expand(&self.view(Some(rule))).into_owned();
                self.init_collection(CollectionKind::Session, key);
            }
            Action::Ctl(ctl) => {
                if self.breaks_folds(rule) {
                    // A removal the folds did not account for: from here on every
                    // link is evaluated as written.
                    self.state.folds_valid = false;
                }
                self.run_ctl(ctl)
            }
        }
    }

    /// Opens a persistent collection for the rest of the transaction: reads its
    /// record once (a failed read leaves it empty and is reported through
    /// [`Event::CollectionReadFailed`](crate::events::Event)), and adds the built-in fields.
    fn init_collection(&mut self, kind: CollectionKind, key: Vec<u8>) {
        if self.state.persistent[kind.index()].is_some() {
            return;
        }
        let now = self.now_secs();
        let config = self.ruleset.config();
        let app = config.web_app_id.as_str();
        let timeout = i64::try_from(config.collection_timeout).unwrap_or(i64::MAX);
        let record_key = match RecordKey::new(app, kind, key) {
            Ok(k) => k,
            Err(e) => {
                self.events
                    .push_back(crate::events::Event::CollectionReadFailed(e));
                return;
            }
        };
        let stored = match self.ctx().store.as_ref().map(|s| s.read(&record_key)) {
            None | Some(Ok(None)) => None,
            Some(Ok(Some(r))) => r.live(now),
            Some(Err(e)) => {
                tracing::warn!("collection read failed: {e}");
                self.events
                    .push_back(crate::events::Event::CollectionReadFailed(e));
                None
            }
        };
        let is_new = stored.is_none();
        let record = stored.unwrap_or(crate::collections::StoredRecord {
            create_time: now,
            last_update_time: now,
            timeout,
            ..Default::default()
        });
        let update_rate = record.update_rate(now);
        let mut values = record.vars;
        let mut builtin = |name: &str, v: Vec<u8>| {
            values.insert(name.as_bytes().to_vec(), StoredVar::scalar(v));
        };
        builtin("key", record_key.key.clone());
        builtin("timeout", record.timeout.to_string().into_bytes());
        builtin("create_time", record.create_time.to_string().into_bytes());
        builtin(
            "last_update_time",
            record.last_update_time.to_string().into_bytes(),
        );
        builtin(
            "update_counter",
            record.update_counter.to_string().into_bytes(),
        );
        builtin("is_new", if is_new { b"1".to_vec() } else { b"0".to_vec() });
        if let Some(rate) = update_rate {
            builtin("update_rate", rate.to_string().into_bytes());
        }
        self.state.persistent[kind.index()] = Some(Persistent {
            key: record_key,
            values,
            log: Default::default(),
        });
    }

    /// `deprecatevar:coll.name=N/S`: lowers a counter by N for every S seconds since
    /// the record was last written (ModSecurity's definition), never below 0. It
    /// goes to the store as a decrement, so increments made meanwhile elsewhere stay.
    fn deprecate_var(&mut self, collection: CollectionKind, key: &[u8], spec: &str) {
        let now = self.now_secs();
        let Some(p) = self.state.persistent[collection.index()].as_mut() else {
            return;
        };
        let (amount, period) = match spec.split_once('/') {
            Some((a, s)) => (to_number(a.as_bytes()), to_number(s.as_bytes())),
            None => (to_number(spec.as_bytes()), 0),
        };
        let last = p
            .values
            .get(b"last_update_time".as_slice())
            .map(|v| to_number(&v.value.as_read()))
            .unwrap_or(now);
        let steps = if period > 0 { (now - last) / period } else { 1 };
        let Some(VarValue::Scalar(cur)) = p.values.get(key).map(|v| &v.value) else {
            return;
        };
        let cur = to_number(cur);
        let down = amount.saturating_mul(steps).min(cur);
        if down <= 0 {
            return;
        }
        if let Some(v) = p.values.get_mut(key) {
            v.value = VarValue::Scalar((cur - down).to_string().into_bytes());
        }
        p.log.push(key, VarOp::Add(-down));
    }

    /// `setvar` on TX, which CRS runs dozens of times per request: the key and value are
    /// written in place when the variable exists, so the common case allocates nothing.
    fn set_tx_var(&mut self, rule: &Rule, name: &crate::macros::Macro, op: &SetOp) {
        enum New {
            Bytes(Vec<u8>),
            Number(i64),
            Delete,
        }
        let (key, new) = {
            let view = self.view(Some(rule));
            let key: Cow<'_, [u8]> = match name.as_literal() {
                Some(l) if !l.iter().any(u8::is_ascii_uppercase) => Cow::Borrowed(l),
                _ => {
                    let mut k = name.expand(&view).into_owned();
                    k.make_ascii_lowercase();
                    Cow::Owned(k)
                }
            };
            let new = match op {
                SetOp::Delete => New::Delete,
                SetOp::SetOne => New::Bytes(b"1".to_vec()),
                SetOp::Set(m) => New::Bytes(m.expand(&view).into_owned()),
                SetOp::Add(m) | SetOp::Sub(m) => {
                    let delta = to_number(&m.expand(&view));
                    let delta = if matches!(op, SetOp::Sub(_)) {
                        -delta
                    } else {
                        delta
                    };
                    let cur = self.state.tx.get(&*key).map(|v| to_number(v)).unwrap_or(0);
                    New::Number(cur + delta)
                }
            };
            (key, new)
        };
        let tx = &mut self.state.tx;
        if tx.capacity() == 0 {
            // CRS sets about a hundred TX variables per request.
            tx.reserve(128);
        }
        match new {
            New::Delete => {
                tx.remove(&*key);
            }
            New::Bytes(v) => match tx.get_mut(&*key) {
                Some(slot) => *slot = v,
                None => {
                    tx.insert(key.into_owned(), v);
                }
            },
            New::Number(n) => {
                use std::io::Write;
                let slot = match tx.get_mut(&*key) {
                    Some(slot) => slot,
                    None => tx.entry(key.into_owned()).or_default(),
                };
                slot.clear();
                // Writing to a vector cannot fail.
                let _ = write!(slot, "{n}");
            }
        }
    }

    fn set_var(
        &mut self,
        collection: CollectionKind,
        key: Vec<u8>,
        op: &SetOp,
        value: Option<Vec<u8>>,
    ) {
        if collection == CollectionKind::Tx {
            let tx = &mut self.state.tx;
            match op {
                SetOp::Delete => {
                    tx.remove(&*key);
                }
                SetOp::SetOne => {
                    tx.insert(key, b"1".to_vec());
                }
                SetOp::Set(_) => {
                    tx.insert(key, value.unwrap_or_default());
                }
                SetOp::Add(_) | SetOp::Sub(_) => {
                    let delta = to_number(&value.unwrap_or_default());
                    let delta = if matches!(op, SetOp::Sub(_)) {
                        -delta
                    } else {
                        delta
                    };
                    let cur = tx.get(&key).map(|v| to_number(v)).unwrap_or(0);
                    tx.insert(key, (cur + delta).to_string().into_bytes());
                }
            }
            return;
        }
        let Some(p) = self.state.persistent[collection.index()].as_mut() else {
            tracing::debug!("setvar on {} before initcol: ignored", collection.name());
            return;
        };
        let op = match op {
            SetOp::Delete => VarOp::Delete,
            SetOp::SetOne => VarOp::Set(b"1".to_vec()),
            SetOp::Set(_) => VarOp::Set(value.unwrap_or_default()),
            SetOp::Add(_) | SetOp::Sub(_) => {
                let delta = to_number(&value.unwrap_or_default());
                VarOp::Add(if matches!(op, SetOp::Sub(_)) {
                    delta.saturating_neg()
                } else {
                    delta
                })
            }
        };
        if key == b"timeout" {
            // TIMEOUT is the record's own field: setting it changes how long the
            // record lives without writes.
            if let VarOp::Set(v) = &op {
                let secs = to_number(v);
                p.log.set_timeout(secs);
                p.values
                    .insert(key, StoredVar::scalar(secs.to_string().into_bytes()));
            }
            return;
        }
        self.write_persistent(collection, key, op);
    }

    /// Applies one operation to an open persistent collection: to what the rules
    /// see now, and to the write log for the store.
    fn write_persistent(&mut self, collection: CollectionKind, key: Vec<u8>, op: VarOp) {
        let now = self.now_secs();
        let Some(p) = self.state.persistent[collection.index()].as_mut() else {
            tracing::debug!("write to {} before initcol: ignored", collection.name());
            return;
        };
        let mut view = crate::collections::StoredRecord {
            vars: std::mem::take(&mut p.values),
            ..Default::default()
        };
        crate::collections::apply_op(&mut view, &key, &op, now);
        p.values = view.vars;
        p.log.push(&key, op);
    }

    fn run_ctl(&mut self, ctl: &Ctl) {
        let s = &mut self.state;
        match ctl {
            Ctl::RuleEngine(m) => s.mode = *m,
            Ctl::RuleRemoveById(r) => s.removed_ids.add(r),
            Ctl::RuleRemoveByTag(sel) => s.removed_tags.union_with(&sel.tags),
            Ctl::RuleRemoveByMsg(m) => s.removed_msgs.push(m.clone()),
            Ctl::RuleRemoveTargetById(r, e) => s
                .target_removals
                .push((TargetRemoval::Ids(r.clone()), e.clone())),
            Ctl::RuleRemoveTargetByTag(sel, e) => s
                .target_removals
                .push((TargetRemoval::Tag(sel.tags.clone()), e.clone())),
            Ctl::RuleRemoveTargetByMsg(m, e) => s
                .target_removals
                .push((TargetRemoval::Msg(m.clone()), e.clone())),
            Ctl::RequestBodyProcessor(p) => s.body_processor = Some(*p),
            Ctl::ForceRequestBodyVariable(b) => s.force_body_variable = *b,
            Ctl::RequestBodyAccess(b) => s.request_body_access = *b,
            Ctl::ResponseBodyAccess(b) => s.response_body_access = *b,
            Ctl::RequestBodyLimit(n) => s.request_body_limit = *n,
            Ctl::AuditEngine(m) => s.audit_engine = *m,
            Ctl::AuditLogParts(p) => {
                if let Some(add) = p.strip_prefix('+') {
                    for c in add.chars() {
                        if !s.audit_parts.contains(c) {
                            s.audit_parts.push(c);
                        }
                    }
                } else if let Some(del) = p.strip_prefix('-') {
                    s.audit_parts.retain(|c| !del.contains(c));
                } else {
                    s.audit_parts = p.clone();
                }
            }
        }
    }

    fn record_match(&mut self, rule: &Rule, phase: u8, denied_with: Option<u16>) {
        if let Some(sev) = rule.meta.severity {
            self.state.highest_severity = self.state.highest_severity.min(sev);
        }
        // A match that neither logs nor decides leaves no record (CRS's flow-control
        // rules match on every request).
        let (log, auditlog) = match self.ruleset.config().no_audit_log {
            crate::config::NoAuditLog::AuditLog => (rule.log, rule.auditlog),
            crate::config::NoAuditLog::AllLogs => (rule.v3_log, rule.v3_auditlog),
        };
        if !log && !auditlog && denied_with.is_none() {
            return;
        }
        let view = self.view(Some(rule));
        let msg = rule.meta.msg.as_ref().map(|m| m.expand_string(&view));
        let data = rule.meta.logdata.as_ref().map(|m| {
            let shown = crate::log::SHOWN_LOGDATA;
            crate::log::shown_text(&m.expand_prefix(&view, shown + 3), shown)
        });
        let record = MatchRecord {
            rule_id: rule.id,
            phase,
            file: rule.span.file.display().to_string(),
            line: rule.span.line,
            msg,
            data,
            severity: rule.meta.severity,
            tags: rule.meta.tags.clone(),
            ver: rule.meta.ver.clone(),
            rev: rule.meta.rev.clone(),
            maturity: rule.meta.maturity,
            accuracy: rule.meta.accuracy,
            operator: rule.operator_text.clone(),
            negated: rule.negated,
            var_name: crate::macros::utf8_lossy(Cow::Borrowed(&self.state.matched_var_name)),
            var_value: crate::log::shown_value(&self.state.matched_var),
            log,
            auditlog,
            denied_with,
        };
        let log_line = record
            .log
            .then(|| crate::log::error_log_line(&record, self));
        self.push_match(record, log_line);
    }
}

/// Lets a view of the transaction expand macros (used by tests of this module).
#[allow(dead_code)]
fn expand_for_test(tx: &Transaction, m: &crate::macros::Macro) -> Vec<u8> {
    let view = tx.view(None);
    let ctx: &dyn MacroContext = &view;
    m.expand(ctx).into_owned()
}

#[cfg(test)]
mod tests {
    use super::{TransformCache, cache_row, form};
    use crate::transforms::Transform;
    use crate::{Ruleset, RulesetBuilder};
    use std::borrow::Cow;
    use std::sync::Arc;

    /// The steps of pipeline prefix `n`, from the first.
    fn steps(nodes: &[super::ChainNode], n: u32) -> Vec<Transform> {
        let mut out = Vec::new();
        let mut cur = Some(n);
        while let Some(c) = cur {
            out.push(nodes[c as usize].step);
            cur = nodes[c as usize].parent;
        }
        out.reverse();
        out
    }

    /// Each value identity (source in the top byte, position below) gets its own row,
    /// the same one every time, and rows do not overlap.
    #[test]
    fn cache_rows_are_distinct_and_stable() {
        let mut cache = TransformCache {
            width: 5,
            ..Default::default()
        };
        let ids = [0u32, 7, 3 << 24, (3 << 24) | 2, (13 << 24) | 40, 1 << 24, 2];
        let rows: Vec<usize> = ids.iter().map(|&id| cache_row(&mut cache, id)).collect();
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r % 5, 0);
            assert!(rows[..i].iter().all(|o| o != r), "row {r} given twice");
        }
        for (&id, &r) in ids.iter().zip(&rows).rev() {
            assert_eq!(cache_row(&mut cache, id), r);
        }
        assert_eq!(cache.cells.len(), 5 * ids.len());
    }

    /// Every cached form of a value is what applying its prefix's steps one by one
    /// gives, whichever prefixes were asked for before (the cache builds prefixes
    /// from their parents and skips prefixes whose triggers the value lacks).
    /// A rule set of one rule on ARGS per transformation pipeline, in order.
    fn ruleset_of_pipelines(pipelines: &[&str]) -> Ruleset {
        let text: String = pipelines
            .iter()
            .enumerate()
            .map(|(i, p)| {
                format!(
                    "SecRule ARGS \"@rx x\" \"id:{},phase:2,pass,t:none,{p}\"\n",
                    i + 1
                )
            })
            .collect();
        let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
        b.add_text(&text, "test.conf").expect("loads");
        b.build().expect("builds")
    }

    #[test]
    fn cached_forms_equal_the_steps_applied_in_order() {
        let pipelines = [
            "t:lowercase",
            "t:urlDecodeUni",
            "t:urlDecodeUni,t:lowercase",
            "t:utf8toUnicode,t:urlDecodeUni,t:htmlEntityDecode,t:jsDecode,t:cssDecode,t:removeNulls",
            "t:urlDecodeUni,t:jsDecode,t:removeWhitespace,t:base64Decode,t:urlDecodeUni,t:jsDecode",
            "t:cmdLine,t:normalizePath",
            "t:replaceComments,t:compressWhitespace,t:trim",
            "t:hexDecode,t:lowercase,t:removeWhitespace",
        ];
        let rs = ruleset_of_pipelines(&pipelines);
        let nodes = &rs.chain_nodes;
        assert!(nodes.len() > 20);
        let alphabet = b"aZ09 %+&;'\"<>/\\-_=()#*\t\n\x00\xc3\xa9AbCzQ&#x41;%41%u0041";
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..3_000 {
            let len = (next() % 20) as usize;
            let value: Vec<u8> = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let mut cache = TransformCache {
                width: nodes.len() + 2 + rs.prefilter.groups.len().div_ceil(32),
                ..Default::default()
            };
            let row = cache_row(&mut cache, 0);
            // Ask for the prefixes in a shuffled order.
            let mut order: Vec<u32> = (0..nodes.len() as u32).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            for n in order {
                let (cell, classes) = form(&mut cache, nodes, row, Some(n), &value);
                let got: &[u8] = match cell {
                    1 => &value,
                    k => &cache.forms[(k - 2) as usize].0,
                };
                let mut want: Cow<'_, [u8]> = Cow::Borrowed(&value);
                for t in steps(nodes, n) {
                    want = Cow::Owned(t.apply(&want).into_owned());
                }
                assert_eq!(got, &*want, "prefix {:?} of {value:?}", steps(nodes, n));
                assert_eq!(classes, crate::transforms::byte_classes(got));
            }
        }
    }

    /// Long forms (from `SHARED_FORM_MIN_LEN` bytes) that equal another form of the
    /// same value, or the value itself, share its cell; every form is still what
    /// applying its prefix's steps in order gives.
    #[test]
    fn equal_long_forms_share_a_cell() {
        let pipelines = [
            "t:cmdLine",
            "t:jsDecode",
            "t:lowercase,t:jsDecode",
            "t:jsDecode,t:lowercase",
            "t:normalizePath",
            "t:normalizePathWin",
            "t:urlDecodeUni,t:normalizePathWin",
            "t:urlDecodeUni,t:normalizePath",
            "t:urlDecodeUni,t:cmdLine",
            "t:urlDecodeUni,t:jsDecode",
            "t:removeNulls,t:replaceNulls",
        ];
        let rs = ruleset_of_pipelines(&pipelines);
        let nodes = &rs.chain_nodes;
        let pieces: &[&[u8]] = &[
            b"../", b"a", b"\\", b"%2f", b"%5c", b"/", b".", b"A", b"\\.", b"x", b"\x00",
        ];
        let mut rng = crate::body::fuzz::XorShift(0x0dd5_eed5_0f0f_0001);
        let mut shared = 0;
        for _ in 0..400 {
            // Most values use a few pieces only, so that pipelines often agree.
            let kinds: Vec<&[u8]> = (0..1 + rng.below(3))
                .map(|_| pieces[rng.below(pieces.len())])
                .collect();
            let mut value = Vec::new();
            while value.len() < 300 + rng.below(300) {
                value.extend_from_slice(kinds[rng.below(kinds.len())]);
            }
            let mut cache = TransformCache {
                width: nodes.len() + 2 + rs.prefilter.groups.len().div_ceil(32),
                ..Default::default()
            };
            let row = cache_row(&mut cache, 0);
            let mut cells: Vec<(u32, Vec<u8>)> = Vec::new();
            for n in 0..nodes.len() as u32 {
                let (cell, _) = form(&mut cache, nodes, row, Some(n), &value);
                let got: Vec<u8> = match cell {
                    1 => value.clone(),
                    k => cache.forms[(k - 2) as usize].0.to_vec(),
                };
                let mut want: Cow<'_, [u8]> = Cow::Borrowed(&value);
                for t in steps(nodes, n) {
                    want = Cow::Owned(t.apply(&want).into_owned());
                }
                assert_eq!(got, &*want, "prefix {:?}", steps(nodes, n));
                if got.len() >= super::SHARED_FORM_MIN_LEN {
                    if got == value {
                        assert_eq!(cell, 1, "a long form equal to the value");
                    }
                    for (c, bytes) in &cells {
                        if *bytes == got {
                            assert_eq!(*c, cell, "two cells hold the same long form");
                            shared += 1;
                        }
                    }
                }
                cells.push((cell, got));
            }
        }
        assert!(shared > 100, "only {shared} shared forms");
    }
}
