//! Load-time folding of rule links whose outcome the configuration decides.
//!
//! Many rules read only TX variables that the rule set itself sets from constants: a
//! paranoia-level check (`TX:DETECTION_PARANOIA_LEVEL "@lt 2"` ending in `skipAfter`)
//! reads a variable that an initialisation rule set to a default, or that the
//! deployment's setup file set before it. When every path through the rules that can
//! reach such a link gives its variables the same values, the link's outcome, and the
//! values it matches, are known before any request arrives.
//!
//! The proof is an abstract run of the rule list: phase by phase, in order, each entry
//! is visited once with the join of the states of every path that can reach it
//! (`skip` and `skipAfter` only jump forward). A state maps TX names to a known value
//! (or known to be unset) or to "unknown". A link whose targets all name single TX
//! variables with known values, and whose operator and transformations are pure, is
//! evaluated with the engine's own transformations and operator; any other link may
//! or may not match, and the variables its `setvar`s name with values that are not
//! known become unknown (all of TX, or all names with a given prefix, for a `setvar`
//! whose name holds a macro). Captures make TX:0 to TX:9 unknown.
//!
//! The abstract run assumes what every ordinary transaction does: the phases run in
//! order, each to its end (or to an `allow:phase`), and no `ctl:ruleRemove*` removed
//! a rule or target the folds depend on (a rule whose first link always matches, or a
//! TX target of a folded link; the links whose `ctl`s may are marked
//! `Rule::breaks_folds`). The transaction checks those assumptions as it goes
//! (`State::folds_valid`) and, when one fails, evaluates every link as written for
//! the rest of the transaction; so a folded link is used only where its outcome is
//! the one the written link would have.

use crate::actions::{Action, AllowScope, CollectionKind, Disruptive, SetOp};
use crate::macros::{Macro, MacroContext};
use crate::rule::{Entry, Rule, RuleOperator};
use crate::transaction::collect::Value;
use crate::transforms::UnicodeMap;
use crate::variables::{KeySelector, Var};
use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashMap;

/// A link whose outcome is known at load time (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Folded {
    /// The link never matches.
    Never,
    /// The link always matches these values (name as MATCHED_VAR_NAME shows it, and
    /// the value the operator saw), in order.
    Always(Vec<(Vec<u8>, Vec<u8>)>),
}

/// What the abstract run knows of one TX variable.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Abs {
    /// Set to this value, or unset (`None`), on every path.
    Known(Option<Vec<u8>>),
    /// Anything.
    Unknown,
}

/// What the abstract run knows of TX at one point.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct AbsTx {
    /// Variables written on some path (lower-case names).
    vars: HashMap<Vec<u8>, Abs>,
    /// Names starting with one of these may have been written by a `setvar` whose
    /// name holds a macro.
    wild: Vec<Vec<u8>>,
    /// Any name may have been written.
    top: bool,
}

impl AbsTx {
    fn get(&self, key: &[u8]) -> Abs {
        if let Some(a) = self.vars.get(key) {
            return a.clone();
        }
        if self.top || self.wild.iter().any(|p| key.starts_with(p)) {
            Abs::Unknown
        } else {
            Abs::Known(None)
        }
    }

    fn join(&self, other: &AbsTx) -> AbsTx {
        let mut out = AbsTx {
            vars: HashMap::new(),
            wild: self.wild.clone(),
            top: self.top || other.top,
        };
        for w in &other.wild {
            if !out.wild.contains(w) {
                out.wild.push(w.clone());
            }
        }
        out.wild.sort();
        for k in self.vars.keys().chain(other.vars.keys()) {
            let (a, b) = (self.get(k), other.get(k));
            out.vars
                .insert(k.clone(), if a == b { a } else { Abs::Unknown });
        }
        out
    }

    /// A write of unknown value to every name starting with `prefix`.
    fn write_wild(&mut self, prefix: &[u8]) {
        if prefix.is_empty() {
            self.top = true;
        } else if !self.wild.iter().any(|w| w.as_slice() == prefix) {
            self.wild.push(prefix.to_vec());
            self.wild.sort();
        }
        for (k, v) in &mut self.vars {
            if k.starts_with(prefix) {
                *v = Abs::Unknown;
            }
        }
    }
}

fn join_opt(a: Option<AbsTx>, b: Option<AbsTx>) -> Option<AbsTx> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.join(&b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Expands macros against the abstract state; `unknown` is set when the expansion
/// reads anything the state does not know.
struct AbsCtx<'a> {
    tx: &'a AbsTx,
    hit: Option<&'a (Vec<u8>, Vec<u8>)>,
    unknown: Cell<bool>,
}

impl MacroContext for AbsCtx<'_> {
    fn lookup(&self, var: Var, key: Option<&[u8]>) -> Option<Cow<'_, [u8]>> {
        match (var, key, self.hit) {
            (Var::Tx, Some(k), _) => match self.tx.get(k) {
                Abs::Known(v) => v.map(Cow::Owned),
                Abs::Unknown => {
                    self.unknown.set(true);
                    None
                }
            },
            (Var::MatchedVar, None, Some(h)) => Some(Cow::Borrowed(&h.1)),
            (Var::MatchedVarName, None, Some(h)) => Some(Cow::Borrowed(&h.0)),
            _ => {
                self.unknown.set(true);
                None
            }
        }
    }
}

/// The expansion of `m`, when the state determines it.
fn expand(m: &Macro, tx: &AbsTx, hit: Option<&(Vec<u8>, Vec<u8>)>) -> Option<Vec<u8>> {
    let ctx = AbsCtx {
        tx,
        hit,
        unknown: Cell::new(false),
    };
    let out = m.expand(&ctx).into_owned();
    (!ctx.unknown.get()).then_some(out)
}

/// What a link does, as far as the abstract state tells.
enum Outcome {
    Never,
    Always(Vec<(Vec<u8>, Vec<u8>)>),
    Maybe,
}

/// Evaluates `link` on the abstract state: `Never` or `Always` only when every value
/// it inspects is known and everything it does with them is a pure function.
fn eval(link: &Rule, tx: &AbsTx, map: Option<&UnicodeMap>) -> Outcome {
    if link.targets.is_empty() || link.capture || link.multi_match {
        return Outcome::Maybe;
    }
    let mut values: Vec<Value<'static>> = Vec::new();
    for t in &link.targets {
        let (Var::Tx, KeySelector::Exact(k)) = (t.var, &t.selector) else {
            return Outcome::Maybe;
        };
        let Abs::Known(v) = tx.get(k) else {
            return Outcome::Maybe;
        };
        if t.count {
            values.push(Value {
                var: Var::Tx,
                key: Cow::Borrowed(b""),
                value: Cow::Owned(if v.is_some() { b"1" } else { b"0" }.to_vec()),
                id: None,
            });
        } else if let Some(v) = v {
            values.push(Value {
                var: Var::Tx,
                key: Cow::Owned(k.clone()),
                value: Cow::Owned(v),
                id: None,
            });
        }
    }
    let mut hits = Vec::new();
    for v in &values {
        if link.exclusions.iter().any(|e| e.excludes(v.var, &v.key)) {
            continue;
        }
        let input = crate::transaction::eval::apply_all(&link.transforms, &v.value, map);
        let matched = match &link.operator {
            RuleOperator::Static(op) => op.matches(&input, None),
            RuleOperator::Dynamic {
                plain: Some(op),
                argument,
                ..
            } => match expand(argument, tx, None) {
                Some(arg) => op.matches(&arg, &input),
                None => return Outcome::Maybe,
            },
            _ => return Outcome::Maybe,
        };
        if matched != link.negated {
            let mut name = Vec::new();
            v.write_name(&mut name);
            hits.push((name, input.into_owned()));
        }
    }
    if hits.is_empty() {
        Outcome::Never
    } else {
        Outcome::Always(hits)
    }
}

/// Applies the TX effects of `link`'s per-value actions for one matched value
/// (`hit`, when known).
fn apply_actions(link: &Rule, tx: &mut AbsTx, hit: Option<&(Vec<u8>, Vec<u8>)>) {
    if link.capture {
        for d in b'0'..=b'9' {
            tx.vars.insert(vec![d], Abs::Unknown);
        }
    }
    for a in &link.match_actions {
        let Action::SetVar {
            collection: CollectionKind::Tx,
            name,
            op,
        } = a
        else {
            continue;
        };
        let Some(mut key) = expand(name, tx, hit) else {
            let mut prefix = name.literal_prefix().to_vec();
            prefix.make_ascii_lowercase();
            tx.write_wild(&prefix);
            continue;
        };
        key.make_ascii_lowercase();
        let new = match op {
            SetOp::Delete => Abs::Known(None),
            SetOp::SetOne => Abs::Known(Some(b"1".to_vec())),
            SetOp::Set(m) => match expand(m, tx, hit) {
                Some(v) => Abs::Known(Some(v)),
                None => Abs::Unknown,
            },
            SetOp::Add(m) | SetOp::Sub(m) => match (tx.get(&key), expand(m, tx, hit)) {
                (Abs::Known(cur), Some(d)) => {
                    let cur = cur.map(|c| crate::collections::to_number(&c)).unwrap_or(0);
                    let d = crate::collections::to_number(&d);
                    // As the transaction computes it (wrapping, as a release build).
                    let n = cur.wrapping_add(if matches!(op, SetOp::Sub(_)) {
                        d.wrapping_neg()
                    } else {
                        d
                    });
                    Abs::Known(Some(n.to_string().into_bytes()))
                }
                _ => Abs::Unknown,
            },
        };
        tx.vars.insert(key, new);
    }
}

/// The TX effects of `link`'s actions for one or more matched values not known at
/// load time: every number of repetitions, joined.
fn apply_actions_unknown(link: &Rule, tx: &AbsTx) -> AbsTx {
    let mut acc = tx.clone();
    apply_actions(link, &mut acc, None);
    for _ in 0..16 {
        let mut again = acc.clone();
        apply_actions(link, &mut again, None);
        let next = acc.join(&again);
        if next == acc {
            return acc;
        }
        acc = next;
    }
    // Did not settle (a chain of more than 16 dependent writes): give up on TX.
    AbsTx {
        top: true,
        ..Default::default()
    }
}

/// One entry of the list the abstract run walks: a marker, or a rule (with its
/// chain).
#[derive(Clone, Copy)]
enum Item<'a> {
    Marker(&'a str),
    Rule(&'a Rule),
    /// A rule a site removed: it never runs, but still counts for a `skip:N`
    /// over it, as in the transaction's walk.
    Removed,
}

impl<'a> Item<'a> {
    fn of(e: &'a Entry) -> Item<'a> {
        match e {
            Entry::Marker(m) => Item::Marker(m),
            Entry::Rule(r) => Item::Rule(r),
        }
    }
}

/// What the abstract run decided, per item walked and per link of its chain (the
/// first link at 0): `None` where the link may or may not match, or was not
/// reached.
type Outcomes = Vec<Vec<Option<Folded>>>;

/// An empty [`Outcomes`] for `items`.
fn outcomes_for(items: &[Item<'_>]) -> Outcomes {
    items
        .iter()
        .map(|i| match i {
            Item::Marker(_) | Item::Removed => Vec::new(),
            Item::Rule(r) => vec![None; r.links().count()],
        })
        .collect()
}

/// Outcome of a chain from `link` (at `depth` in its chain) on: whether the whole
/// rest matched, and the states after a full match and after a chain that stopped
/// (with the actions of the links that matched applied). Records in `out` each link
/// it can decide.
fn chain(
    link: &Rule,
    depth: usize,
    tx: AbsTx,
    map: Option<&UnicodeMap>,
    out: &mut [Option<Folded>],
) -> (Option<AbsTx>, Option<AbsTx>) {
    let outcome = eval(link, &tx, map);
    let (after, unmatched) = match &outcome {
        Outcome::Never => {
            out[depth] = Some(Folded::Never);
            return (None, Some(tx));
        }
        Outcome::Always(hits) => {
            let mut s = tx;
            for h in hits {
                apply_actions(link, &mut s, Some(h));
            }
            out[depth] = Some(Folded::Always(hits.clone()));
            (s, None)
        }
        Outcome::Maybe => {
            let s = if link.targets.is_empty() {
                // SecAction: matches once, with no value.
                let mut s = tx.clone();
                apply_actions(link, &mut s, None);
                s
            } else {
                apply_actions_unknown(link, &tx)
            };
            (s, (!link.targets.is_empty()).then_some(tx))
        }
    };
    match link.chain.as_deref() {
        None => (Some(after), unmatched),
        Some(next) => {
            let (m, u) = chain(next, depth + 1, after, map, out);
            (m, join_opt(unmatched, u))
        }
    }
}

/// Folds what can be folded in `phases` (see the module documentation). Returns,
/// per phase, which entries the load-time flow reaches.
pub(crate) fn fold(phases: &mut [Vec<Entry>; 5], map: Option<&UnicodeMap>) -> [Vec<bool>; 5] {
    let mut reached: [Vec<bool>; 5] = Default::default();
    let mut results: [Outcomes; 5] = Default::default();
    let mut state = Some(AbsTx::default());
    for (p, entries) in phases.iter().enumerate() {
        let items: Vec<Item<'_>> = entries.iter().map(Item::of).collect();
        reached[p] = vec![false; items.len()];
        results[p] = outcomes_for(&items);
        state = match state {
            Some(s) => walk(&items, s, map, &mut reached[p], &mut results[p]),
            None => None,
        };
    }
    let mut slot = 0u32;
    for (entries, outcomes) in phases.iter_mut().zip(results) {
        for (e, links) in entries.iter_mut().zip(outcomes) {
            if let Entry::Rule(r) = e {
                let mut link = Some(r.as_mut());
                for folded in links {
                    let Some(l) = link else { break };
                    l.folded = folded;
                    l.fold_slot = slot;
                    slot += 1;
                    link = l.chain.as_deref_mut();
                }
            }
        }
    }
    let starters: Vec<&Rule> = phases
        .iter()
        .flatten()
        .filter_map(|e| match e {
            Entry::Rule(r) => Some(r.as_ref()),
            Entry::Marker(_) => None,
        })
        .collect();
    let view = FoldView::of_rules(&starters);
    let marks: Vec<bool> = starters
        .iter()
        .flat_map(|r| r.links())
        .map(|l| link_breaks(l, &starters, &view))
        .collect();
    let mut marks = marks.into_iter();
    for e in phases.iter_mut().flatten() {
        if let Entry::Rule(r) = e {
            let mut link = Some(r.as_mut());
            while let Some(l) = link {
                l.breaks_folds = marks.next().unwrap_or(true);
                link = l.chain.as_deref_mut();
            }
        }
    }
    reached
}

/// Which entries the load-time flow reaches in a transaction that starts with
/// `seeds` in TX (lower-case names; a site's paranoia level), per phase: the rules
/// such a site's transactions run, which the shared prefilter may then cover too.
pub(crate) fn reached_with(
    phases: &[Vec<Entry>; 5],
    seeds: &[(Vec<u8>, Vec<u8>)],
    map: Option<&UnicodeMap>,
) -> [Vec<bool>; 5] {
    let mut initial = AbsTx::default();
    for (k, v) in seeds {
        initial.vars.insert(k.clone(), Abs::Known(Some(v.clone())));
    }
    let mut reached: [Vec<bool>; 5] = Default::default();
    let mut state = Some(initial);
    for (p, entries) in phases.iter().enumerate() {
        let items: Vec<Item<'_>> = entries.iter().map(Item::of).collect();
        reached[p] = vec![false; items.len()];
        let mut out = outcomes_for(&items);
        state = match state {
            Some(s) => walk(&items, s, map, &mut reached[p], &mut out),
            None => None,
        };
    }
    reached
}

/// Which links are folded, and how, as the `ctl` check below needs it: by the
/// link's address (the rules live in boxes that do not move while it is used).
struct FoldView {
    folded: std::collections::HashMap<usize, bool>,
}

impl FoldView {
    /// The folds the rules carry.
    fn of_rules(starters: &[&Rule]) -> FoldView {
        let mut folded = std::collections::HashMap::new();
        for l in starters.iter().flat_map(|r| r.links()) {
            if let Some(f) = &l.folded {
                folded.insert(l as *const Rule as usize, matches!(f, Folded::Always(_)));
            }
        }
        FoldView { folded }
    }

    /// Whether `link` is folded.
    fn is_folded(&self, link: &Rule) -> bool {
        self.folded.contains_key(&(link as *const Rule as usize))
    }

    /// Whether the first link of `r` always matches.
    fn always(&self, r: &Rule) -> bool {
        r.targets.is_empty()
            || self
                .folded
                .get(&(r as *const Rule as usize))
                .copied()
                .unwrap_or(false)
    }
}

/// Whether `link` runs a `ctl:ruleRemove*` the folds did not account for
/// (`Rule::breaks_folds`), among the rules `starters` whose folds `view` gives.
/// Removing a rule is the path on which it does not match, which the abstract run
/// covers unless the rule's first link always matches; removing a target changes
/// nothing folded unless it is a TX target of a folded link. Any other removal
/// ends the folds for the transaction when it runs.
fn link_breaks(link: &Rule, starters: &[&Rule], view: &FoldView) -> bool {
    link.full_match_actions.iter().any(|a| match a {
        Action::Ctl(c) => ctl_breaks(c, starters, view),
        _ => false,
    })
}

fn ctl_breaks(ctl: &crate::actions::Ctl, starters: &[&Rule], view: &FoldView) -> bool {
    use crate::actions::Ctl;
    let by_tag =
        |r: &Rule, re: &regex::bytes::Regex| r.meta.tags.iter().any(|t| re.is_match(t.as_bytes()));
    let by_msg = |r: &Rule, m: &str| r.meta.msg.as_ref().is_some_and(|x| x.text() == m);
    let folded_links = || {
        starters
            .iter()
            .flat_map(|r| r.links())
            .filter(|l| view.is_folded(l))
    };
    match ctl {
        Ctl::RuleRemoveById(ranges) => starters.iter().any(|r| {
            view.always(r) && r.id.is_some_and(|id| ranges.iter().any(|x| x.contains(id)))
        }),
        Ctl::RuleRemoveByTag(sel) => starters
            .iter()
            .any(|r| view.always(r) && by_tag(r, &sel.pattern)),
        Ctl::RuleRemoveByMsg(m) => starters.iter().any(|r| view.always(r) && by_msg(r, m)),
        Ctl::RuleRemoveTargetById(_, e)
        | Ctl::RuleRemoveTargetByTag(_, e)
        | Ctl::RuleRemoveTargetByMsg(_, e)
            if e.var != Var::Tx =>
        {
            false
        }
        Ctl::RuleRemoveTargetById(ranges, _) => folded_links().any(|l| {
            l.chain_id
                .is_some_and(|id| ranges.iter().any(|x| x.contains(id)))
        }),
        Ctl::RuleRemoveTargetByTag(sel, _) => folded_links().any(|l| by_tag(l, &sel.pattern)),
        Ctl::RuleRemoveTargetByMsg(m, _) => folded_links().any(|l| by_msg(l, m)),
        _ => false,
    }
}

/// What a site's policy changes about the walk of every transaction, for
/// [`site_folds`].
pub(crate) struct SiteFlow<'a> {
    /// The overlay's entries per phase, walked before the base's.
    pub overlay: &'a [Vec<Entry>; 5],
    /// Whether a rule (of the base or the overlay) is removed for the site's
    /// transactions.
    pub removed: &'a dyn Fn(&Rule) -> bool,
    /// TX variables set before the first rule runs, lower-case.
    pub seeds: &'a [(Vec<u8>, Vec<u8>)],
    /// Whether some target removal of the site may drop a TX target of `link`.
    pub drops_tx_target: &'a dyn Fn(&Rule) -> bool,
}

/// The load-time folds a site's transactions use.
#[derive(Debug, Clone)]
pub(crate) enum SiteFolds {
    /// The base's own (`Rule::folded`, `Rule::breaks_folds`): the site's walk
    /// decides every link the base folded the same way.
    Base,
    /// The site's own outcomes of the base's links, and which of their `ctl`s break
    /// them, by `Rule::fold_slot`: the site's walk differs (a seeded paranoia level,
    /// rules of its own that write what the folds read, removals of rules they lean
    /// on).
    Own {
        /// Per link of the base: its outcome in the site's walk.
        folded: Box<[Option<Folded>]>,
        /// Per link of the base: whether its `ctl`s break the site's folds.
        breaks: Box<[bool]>,
    },
    /// None: the site's transactions evaluate every link as written (a target
    /// exclusion of the site's drops a TX target the abstract run would read).
    Off,
}

/// The load-time folds of a site's transactions, and which of the overlay's links
/// break them (`Rule::breaks_folds` for them, in order). The abstract run is made
/// again over the site's walk: its overlay's rules first in each phase, its removed
/// rules never run, its TX seeds set at the start. Where every base link comes out
/// as the base folded it and the base's `ctl`s break the folds exactly where they
/// do in the base's walk, the site uses the base's folds; otherwise it gets a
/// table of its own, over the base's links (a few KiB). A target exclusion of the
/// site's on TX, which the abstract run does not model, turns the folds off for
/// the site (every link evaluated as written: the same verdicts, more CPU).
pub(crate) fn site_folds(
    base: &[Vec<Entry>; 5],
    site: &SiteFlow<'_>,
    map: Option<&UnicodeMap>,
) -> (Vec<bool>, SiteFolds) {
    let links: usize = base
        .iter()
        .flatten()
        .map(|e| match e {
            Entry::Rule(r) => r.links().count(),
            Entry::Marker(_) => 0,
        })
        .sum();
    let mut folded: Vec<Option<Folded>> = vec![None; links];
    let mut initial = AbsTx::default();
    for (k, v) in site.seeds {
        initial.vars.insert(k.clone(), Abs::Known(Some(v.clone())));
    }
    let mut state = Some(initial);
    let mut same = true;
    // The site's own view of which links fold (for the ctl check).
    let mut site_folds: std::collections::HashMap<usize, bool> = std::collections::HashMap::new();
    let mut starters: Vec<&Rule> = Vec::new();
    let mut base_starters: Vec<&Rule> = Vec::new();
    for (overlay, base) in site.overlay.iter().zip(base) {
        let mut items: Vec<Item<'_>> = Vec::new();
        let mut of_base: Vec<bool> = Vec::new();
        for (from_base, e) in overlay
            .iter()
            .map(|e| (false, e))
            .chain(base.iter().map(|e| (true, e)))
        {
            if let Entry::Rule(r) = e {
                if (site.removed)(r) {
                    items.push(Item::Removed);
                    of_base.push(false);
                    continue;
                }
                starters.push(r);
                if from_base {
                    base_starters.push(r);
                }
            }
            items.push(Item::of(e));
            of_base.push(from_base);
        }
        let mut reached = vec![false; items.len()];
        let mut out = outcomes_for(&items);
        state = match state {
            Some(s) => walk(&items, s, map, &mut reached, &mut out),
            None => None,
        };
        for (i, item) in items.iter().enumerate() {
            let Item::Rule(r) = item else { continue };
            for (l, got) in r.links().zip(&out[i]) {
                if let Some(f) = got {
                    site_folds.insert(l as *const Rule as usize, matches!(f, Folded::Always(_)));
                }
                if !of_base[i] {
                    continue;
                }
                let got = if reached[i] { got.clone() } else { None };
                if reached[i] && l.folded.is_some() && l.folded != got {
                    same = false;
                }
                if let Some(f) = folded.get_mut(l.fold_slot as usize) {
                    *f = got;
                }
            }
        }
    }
    let view = FoldView { folded: site_folds };
    let mut breaks = vec![false; links];
    let mut off = false;
    for r in &base_starters {
        for l in r.links() {
            let b = link_breaks(l, &starters, &view);
            if b != l.breaks_folds {
                same = false;
            }
            if let Some(x) = breaks.get_mut(l.fold_slot as usize) {
                *x = b;
            }
            let folded_here = view.is_folded(l) || l.folded.is_some();
            if folded_here && (site.drops_tx_target)(l) {
                off = true;
            }
        }
    }
    let overlay_marks = site
        .overlay
        .iter()
        .flatten()
        .filter_map(|e| match e {
            Entry::Rule(r) => Some(r),
            Entry::Marker(_) => None,
        })
        .flat_map(|r| r.links())
        .map(|l| link_breaks(l, &starters, &view))
        .collect();
    let folds = if off {
        SiteFolds::Off
    } else if same {
        SiteFolds::Base
    } else {
        SiteFolds::Own {
            folded: folded.into_boxed_slice(),
            breaks: breaks.into_boxed_slice(),
        }
    };
    (overlay_marks, folds)
}

/// The abstract run of one phase's `items` from `entry`; returns the state at its
/// normal end (`None` when no path reaches it). Marks in `reached` the items some
/// path reaches, and records in `out` what it decides of their links.
fn walk(
    items: &[Item<'_>],
    entry: AbsTx,
    map: Option<&UnicodeMap>,
    reached: &mut [bool],
    out: &mut [Vec<Option<Folded>>],
) -> Option<AbsTx> {
    let n = items.len();
    let mut incoming: Vec<Option<AbsTx>> = vec![None; n + 1];
    incoming[0] = Some(entry);
    let mut end: Option<AbsTx> = None;
    for i in 0..n {
        let Some(s) = incoming[i].take() else {
            continue;
        };
        reached[i] = true;
        let rule = match items[i] {
            Item::Marker(_) | Item::Removed => {
                incoming[i + 1] = join_opt(incoming[i + 1].take(), Some(s));
                continue;
            }
            Item::Rule(r) => r,
        };
        if rule.skip > 0 && rule.skip_after.is_some() {
            // Both on one rule: the flow is not modelled; nothing after is folded,
            // and all of it may be reached.
            reached[i..].iter_mut().for_each(|r| *r = true);
            for links in out[i..].iter_mut() {
                links.iter_mut().for_each(|f| *f = None);
            }
            return Some(AbsTx {
                top: true,
                ..Default::default()
            });
        }
        let (matched, unmatched) = chain(rule, 0, s, map, &mut out[i]);
        let allow_phase = matches!(rule.disruptive, Some(Disruptive::Allow(AllowScope::Phase)));
        incoming[i + 1] = join_opt(incoming[i + 1].take(), unmatched);
        let Some(m) = matched else { continue };
        if allow_phase {
            end = join_opt(end, Some(m.clone()));
        }
        let target = if let Some(marker) = &rule.skip_after {
            (i + 1..n)
                .find(|&j| matches!(items[j], Item::Marker(x) if x == marker))
                .unwrap_or(n)
        } else if rule.skip > 0 {
            let mut left = rule.skip;
            let mut j = i + 1;
            while j < n && left > 0 {
                if matches!(items[j], Item::Rule(_) | Item::Removed) {
                    left -= 1;
                }
                j += 1;
            }
            // Markers between the skipped rules and the next one are passed over.
            j
        } else {
            i + 1
        };
        incoming[target] = join_opt(incoming[target].take(), Some(m));
    }
    join_opt(end, incoming[n].take())
}

#[cfg(test)]
mod tests {
    use crate::{RulesetBuilder, Transaction, TxContext};
    use std::sync::Arc;

    fn build(text: &str) -> Arc<crate::Ruleset> {
        let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
        b.add_text(text, "test.conf").unwrap();
        Arc::new(b.build().unwrap())
    }

    fn folded(rs: &crate::Ruleset, id: i64) -> Option<super::Folded> {
        rs.rule_by_id(id).unwrap().folded.clone()
    }

    /// Runs a GET of `uri` through phases 1 to 5; the status of the intervention.
    fn status(rs: &Arc<crate::Ruleset>, uri: &str) -> Option<u16> {
        let tx = Transaction::new(rs.clone(), TxContext::default());
        crate::transaction::test_get::get(tx, uri)
            .0
            .map(|i| i.status)
    }

    const SETUP: &str = r#"
SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.level=1"
SecRule &TX:level "@eq 0" "id:2,phase:1,pass,nolog,setvar:tx.level=2"
SecRule &TX:detect "@eq 0" "id:3,phase:1,pass,nolog,setvar:tx.detect=%{tx.level}"
"#;

    const CHECKS: &str = r#"
SecRule TX:DETECT "@lt 1" "id:10,phase:1,pass,nolog,skipAfter:END-1"
SecRule ARGS "@contains attack" "id:11,phase:1,deny,status:403"
SecRule TX:DETECT "@lt 2" "id:12,phase:1,pass,nolog,skipAfter:END-1"
SecRule ARGS "@contains paranoid" "id:13,phase:1,deny,status:406"
SecMarker END-1
SecRule TX:DETECT "@lt 2" "id:20,phase:2,pass,nolog,skipAfter:END-2"
SecRule ARGS "@contains paranoid" "id:21,phase:2,deny,status:407"
SecMarker END-2
"#;

    #[test]
    fn constants_only_fold_the_checks() {
        let rs = build(&format!("{SETUP}{CHECKS}"));
        // id 2 never matches (level is set), id 3 sets detect to level's 1.
        assert_eq!(folded(&rs, 2), Some(super::Folded::Never));
        assert_eq!(folded(&rs, 10), Some(super::Folded::Never));
        assert_eq!(
            folded(&rs, 12),
            Some(super::Folded::Always(vec![(
                b"TX:detect".to_vec(),
                b"1".to_vec()
            )]))
        );
        assert_eq!(folded(&rs, 20), folded(&rs, 12));
        // Rules that read the request are not folded.
        assert_eq!(folded(&rs, 11), None);
        assert_eq!(status(&rs, "/?a=attack"), Some(403));
        assert_eq!(status(&rs, "/?a=paranoid"), None);
        assert_eq!(status(&rs, "/?a=fine"), None);
    }

    #[test]
    fn a_later_writer_keeps_the_check() {
        // A rule that reads the request may raise the level before the checks.
        let raise = r#"SecRule ARGS:raise "@streq 1" "id:5,phase:1,pass,nolog,setvar:tx.detect=2""#;
        let rs = build(&format!("{SETUP}{raise}\n{CHECKS}"));
        assert_eq!(folded(&rs, 10), None);
        assert_eq!(folded(&rs, 12), None);
        assert_eq!(folded(&rs, 20), None);
        assert_eq!(status(&rs, "/?a=attack"), Some(403));
        assert_eq!(status(&rs, "/?a=paranoid"), None);
        assert_eq!(status(&rs, "/?a=paranoid&raise=1"), Some(406));
    }

    #[test]
    fn a_macro_named_write_keeps_the_checks_it_may_reach() {
        let wild = r#"SecRule ARGS:n "@rx ^(\w+)$" "id:5,phase:1,pass,nolog,capture,setvar:'tx.det%{tx.1}=2'"
SecRule ARGS:n "@rx ^(\w+)$" "id:6,phase:1,pass,nolog,capture,setvar:'tx.other_%{tx.1}=2'""#;
        let rs = build(&format!("{SETUP}{wild}\n{CHECKS}"));
        // `tx.det%{...}` may write `detect`; `tx.other_%{...}` cannot.
        assert_eq!(folded(&rs, 12), None);
        assert_eq!(status(&rs, "/?a=paranoid&n=ect"), Some(406));
        assert_eq!(status(&rs, "/?a=paranoid&n=x"), None);
        let only_other = r#"SecRule ARGS:n "@rx ^(\w+)$" "id:6,phase:1,pass,nolog,capture,setvar:'tx.other_%{tx.1}=2'""#;
        let rs = build(&format!("{SETUP}{only_other}\n{CHECKS}"));
        assert!(folded(&rs, 12).is_some());
        assert_eq!(status(&rs, "/?a=paranoid&n=detect"), None);
    }

    #[test]
    fn a_rule_removal_at_run_time_falls_back_to_the_written_rules() {
        // Removing the writer at run time leaves detect unset: the written checks
        // then do not skip, and the folded ones must not be used.
        let remove =
            r#"SecRule ARGS:off "@streq 1" "id:4,phase:1,pass,nolog,ctl:ruleRemoveById=1-3""#;
        let rs = build(&format!("SecRuleEngine On\n{remove}\n{SETUP}{CHECKS}"));
        assert!(folded(&rs, 12).is_some());
        assert!(rs.rule_by_id(4).unwrap().breaks_folds);
        assert_eq!(status(&rs, "/?a=paranoid"), None);
        assert_eq!(status(&rs, "/?a=paranoid&off=1"), Some(406));
        assert_eq!(status(&rs, "/?a=attack&off=1"), Some(403));
    }

    #[test]
    fn removing_a_rule_that_may_not_match_keeps_the_folds() {
        // Removing rule 11 (it reads the request) is the path where it does not
        // match, which the folds cover: the ctl does not end them.
        let remove =
            r#"SecRule ARGS:off "@streq 1" "id:4,phase:1,pass,nolog,ctl:ruleRemoveById=11""#;
        let rs = build(&format!("SecRuleEngine On\n{remove}\n{SETUP}{CHECKS}"));
        assert!(!rs.rule_by_id(4).unwrap().breaks_folds);
        assert_eq!(status(&rs, "/?a=attack"), Some(403));
        assert_eq!(status(&rs, "/?a=attack&off=1"), None);
        assert_eq!(status(&rs, "/?a=paranoid&off=1"), None);
    }

    #[test]
    fn only_reached_rules_join_the_shared_prefilter_and_phrase_union() {
        // 30 and 31 are reached; 32 and 33 sit behind a check that always skips them
        // (detect is 1), so they run only when the folds are off (`off=1` removes the
        // setup rules: detect stays unset, the check does not skip).
        let remove =
            r#"SecRule ARGS:off "@streq 1" "id:4,phase:1,pass,nolog,ctl:ruleRemoveById=1-3""#;
        let rules = r#"
SecRule ARGS "@rx attack[0-9]" "id:30,phase:1,deny,status:403"
SecRule ARGS "@pm needle" "id:31,phase:1,deny,status:404"
SecRule TX:DETECT "@lt 2" "id:12,phase:1,pass,nolog,skipAfter:END-1"
SecRule ARGS "@rx paranoid[0-9]" "id:32,phase:1,deny,status:406"
SecRule ARGS "@pm haystack" "id:33,phase:1,deny,status:407"
SecMarker END-1
"#;
        let rs = build(&format!("SecRuleEngine On\n{remove}\n{SETUP}{rules}"));
        let group = |id: i64| {
            let slot = rs.rule_by_id(id).unwrap().prefilter.expect("in a group");
            &rs.prefilter.groups[slot.group as usize]
        };
        assert!(group(30).in_all);
        assert!(!group(32).in_all);
        assert!(rs.rule_by_id(31).unwrap().pm_list.is_some());
        assert_eq!(rs.rule_by_id(33).unwrap().pm_list, None);
        // Short values and values over 1 KiB (which take the shared lazy DFAs).
        let long = "x".repeat(3000);
        for pad in ["", long.as_str()] {
            let q = |a: &str| format!("/?a={pad}{a}{pad}");
            assert_eq!(status(&rs, &q("attack1")), Some(403));
            assert_eq!(status(&rs, &q("needle")), Some(404));
            assert_eq!(status(&rs, &q("paranoid1")), None);
            assert_eq!(status(&rs, &q("haystack")), None);
            assert_eq!(status(&rs, &format!("{}&off=1", q("paranoid1"))), Some(406));
            assert_eq!(status(&rs, &format!("{}&off=1", q("haystack"))), Some(407));
            assert_eq!(status(&rs, &format!("{}&off=1", q("attack1"))), Some(403));
            assert_eq!(status(&rs, &format!("{}&off=1", q("quiet"))), None);
        }
    }

    #[test]
    fn a_skipped_writer_makes_the_value_unknown() {
        // A request-dependent skip over the writer: detect may be unset or 1.
        let skip = r#"SecRule ARGS:s "@streq 1" "id:4,phase:1,pass,nolog,skipAfter:AFTER-SETUP""#;
        let text = format!("SecRuleEngine On\n{skip}\n{SETUP}SecMarker AFTER-SETUP\n{CHECKS}");
        let rs = build(&text);
        assert_eq!(folded(&rs, 12), None);
        assert_eq!(status(&rs, "/?a=paranoid"), None);
        assert_eq!(status(&rs, "/?a=paranoid&s=1"), Some(406));
    }
}
