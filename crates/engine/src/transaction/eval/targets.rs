//! Targets: collecting a rule's values, excluding those removed, and running the
//! operator on each of their forms.

use super::forms::*;
use super::prefilter::*;
use crate::collections::VarValue;
use crate::config::EngineConfig;
use crate::lookups::TxLookups;
use crate::operators::rx_set::FULL_SET_MIN_LEN;
use crate::operators::{Captures, CompileContext, Operator};
use crate::rule::{Rule, RuleOperator};
use crate::transaction::budget::VALUE_WORK;
use crate::transaction::collect::{Value, View, recycle};
use crate::transaction::{Hit, State, Transaction};
use crate::variables::{Exclusion, Var};
use seclang::IdRange;
use std::borrow::Cow;

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

pub(super) fn excluded(rule: &Rule, state: &State, value: &Value<'_>) -> bool {
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
pub(super) fn run_operator(
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
pub(super) fn table_check(rule: &Rule, v: &Value<'_>) -> Option<crate::inputs::Check> {
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

impl Transaction {
    /// Makes one matched value MATCHED_VAR (and its name MATCHED_VAR_NAME, and one of
    /// MATCHED_VARS), then runs the rule's per-value actions.
    pub(super) fn apply_hit(&mut self, rule: &Rule, name: &[u8], value: &[u8]) {
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
                rule.label(),
                rule.operator_text.0,
                rule.operator_text.1,
                String::from_utf8_lossy(name),
                crate::log::cut(&String::from_utf8_lossy(value), 200)
            );
            self.debug_line(9, &msg);
        }
        self.run_match_actions(rule);
    }

    pub(super) fn eval_targets(&mut self, rule: &Rule) -> bool {
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
}
