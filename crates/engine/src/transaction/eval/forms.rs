//! The transformation cache: each value's forms (the value after each prefix of
//! a transformation pipeline), computed once per transaction and shared by every
//! rule that reads them.

use crate::ruleset::ChainNode;
use crate::transaction::TransformCache;
use crate::transaction::collect::Value;
use crate::transforms::{Transform, byte_classes};
use std::borrow::Cow;
use std::sync::Arc;

/// A transformed value: the raw value itself, a cached result, or a fresh one.
pub(super) enum Input<'v> {
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
pub(super) fn transform<'v>(
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
pub(super) fn transform_at<'v>(
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

/// Marks a raw value's byte classes as computed in its row.
pub(super) const KNOWN: u32 = 1 << 31;

/// The start of value `id`'s row in the transformation cache, made on first use.
/// Called for every group a value is scanned for (thousands of times in a JSON
/// body): the lookup is inlined, the making of a row is not.
#[inline]
pub(super) fn cache_row(cache: &mut TransformCache, id: u32) -> usize {
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
pub(super) fn new_cache_row(cache: &mut TransformCache, source: usize, index: usize) -> usize {
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
pub(super) fn cached_input<'v>(cache: &TransformCache, cell: u32, raw: &'v [u8]) -> Input<'v> {
    match cell {
        1 => Input::Raw(raw),
        k => Input::Cached(cache.forms[(k - 2) as usize].0.clone()),
    }
}

/// The cell of the value (whose row starts at `row`) after the pipeline prefix `node`
/// (`None`: no transformation), with its byte classes. Computed from the parent
/// prefix's form, itself cached, so pipelines that start alike share their work; a step
/// whose triggers the value does not contain is skipped without looking at the bytes.
pub(super) fn form(
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
pub(super) fn form_step(
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
pub(super) const SHARED_FORM_MIN_LEN: usize = 256;

/// The cell of the value whose row starts at `row` (raw bytes `raw`) that already
/// holds `bytes`: 1 when they are the raw value, k when `forms[k - 2]`; `None` when no
/// cell does, or when `bytes` is shorter than [`SHARED_FORM_MIN_LEN`]. Pipelines that
/// differ often give the same bytes (`t:cmdLine` and `t:jsDecode` both only drop the
/// backslashes of a lower-case value; `t:normalisePathWin` is `t:normalisePath` on a
/// value without `\`).
#[cold]
pub(super) fn equal_form(
    cache: &TransformCache,
    row: usize,
    raw: &[u8],
    bytes: &[u8],
) -> Option<u32> {
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
pub(super) fn raw_classes(cache: &mut TransformCache, cell: usize, raw: &[u8]) -> u32 {
    let c = &mut cache.cells[cell];
    if *c & KNOWN == 0 {
        *c = byte_classes(raw) | KNOWN;
    }
    *c & !KNOWN
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
pub(super) fn for_each_form(
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
pub(super) fn chain_nodes<'a>(
    ruleset: &'a crate::ruleset::Ruleset,
    policy: Option<&'a crate::policy::Policy>,
) -> &'a [ChainNode] {
    policy.map_or(&ruleset.chain_nodes, |p| p.chain_nodes())
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
