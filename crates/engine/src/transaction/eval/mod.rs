//! Running rules: the flow of a phase (rule order, chains, skips, folds), with
//! the transformation cache ([`forms`]), the prefilter's group answers
//! ([`prefilter`]), targets and operators ([`targets`]) and actions ([`actions`])
//! in modules of their own.

mod actions;
mod forms;
mod interpreter;
mod plan;
mod prefilter;
mod targets;

pub(crate) use forms::apply_all;
pub(crate) use targets::TargetRemoval;

use super::budget::{RULE_WORK, VALUE_WORK};
use super::collect::View;
use super::{Transaction, TransformCache};
use crate::actions::{AllowScope, Disruptive};
use crate::intervention::{Intervention, InterventionKind};
use crate::rule::Rule;
use crate::ruleset::fold::Folded;

/// What a walk does with a rule it reached ([`Transaction::before_rule`]).
enum Gate {
    /// Evaluate it.
    Run,
    /// Go on to the next one (a `ctl` removed it).
    Pass,
    /// End the phase's walk here (paused, or out of CPU budget), returning this.
    Stop(Option<Intervention>),
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
        // A slice is counted from where this walk began or resumed.
        self.budget.slice_work = 0;
        self.budget.open();
        let result = if self.interpreter {
            self.run_phase_rules(phase, start)
        } else {
            self.run_plan(phase, start)
        };
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

    /// Decides whether the walk evaluates `rule`, the entry (or step) `index` of
    /// `phase`'s walk that began or resumed at `start`: passes over it when a
    /// `ctl` removed it; pauses before it when the slice is used up or when
    /// `pause_here` (a rule that may wait for a DNS lookup); stops when the CPU
    /// budget runs out. Shared by the plan's executor and the interpreter.
    fn before_rule(
        &mut self,
        rule: &Rule,
        phase: u8,
        index: usize,
        start: usize,
        pause_here: bool,
    ) -> Gate {
        if self.is_removed(rule) {
            if self.debug_on(9) {
                let msg = format!("{} skipped: removed by a ctl action.", rule.label());
                self.debug_line(9, &msg);
            }
            return Gate::Pass;
        }
        if let Some(slice) = self.slice
            && index > start
            && self.budget.slice_work >= slice
        {
            if self.debug_on(9) {
                let msg = format!("{}: pausing, the slice is used up.", rule.label());
                self.debug_line(9, &msg);
            }
            self.paused = Some((phase, index));
            return Gate::Stop(None);
        }
        if pause_here {
            if self.debug_on(4) {
                let msg = format!("{}: pausing for a DNS lookup.", rule.label());
                self.debug_line(4, &msg);
            }
            self.paused = Some((phase, index));
            return Gate::Stop(None);
        }
        if self.budget.charge(RULE_WORK) {
            return Gate::Stop(self.budget_stop(phase, rule.chain_id));
        }
        self.state.matched_vars.clear();
        Gate::Run
    }

    /// Evaluates `rule`'s chain through `eval` (timed when the transaction is);
    /// whether it matched, or `Err` with what the phase returns when the CPU
    /// budget ran out inside it (the rule is then abandoned, actions and all).
    fn run_rule(
        &mut self,
        rule: &Rule,
        phase: u8,
        eval: impl FnOnce(&mut Self) -> bool,
    ) -> Result<bool, Option<Intervention>> {
        let started = self.rule_times.is_some().then(std::time::Instant::now);
        let matched = eval(self);
        if let (Some(started), Some(times)) = (started, self.rule_times.as_mut()) {
            times.push(crate::events::RuleTime {
                rule_id: rule.chain_id,
                nanos: u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX),
            });
        }
        if self.budget.tripped() {
            return Err(self.budget_stop(phase, rule.chain_id));
        }
        if self.debug_on(if matched { 4 } else { 9 }) {
            let msg = format!("{} returned {}.", rule.label(), u8::from(matched));
            self.debug_line(if matched { 4 } else { 9 }, &msg);
        }
        Ok(matched)
    }

    /// Whether `phase`'s rules are not to run at all; then what the phase
    /// returns. The engine is off, the CPU budget is spent (an intervention the
    /// first time it is found spent before a phase), or an `allow` covers it.
    fn walk_barred(&mut self, phase: u8) -> Option<Option<Intervention>> {
        if self.state.mode == crate::config::RuleEngineMode::Off {
            return Some(None);
        }
        if self.budget.exceeded.is_some() {
            // Rule evaluation stopped for good when the budget ran out.
            return Some(None);
        }
        if self.budget.tripped() {
            // Body processing used up the budget before the phase's first rule.
            return Some(self.budget_stop(phase, None));
        }
        match self.state.allow {
            Some(AllowScope::All) if phase < 5 => Some(None),
            Some(AllowScope::Request) if phase <= 2 => Some(None),
            _ => None,
        }
    }

    /// Carries out a matched chain (first link `rule`): logs it and applies its
    /// disruptive action (`block` already resolved to `disruptive`, with the
    /// default action's status). `Some` when the phase ends here, with what it
    /// returns (an intervention, or none after an `allow`); `None` to walk on.
    fn chain_matched(
        &mut self,
        rule: &Rule,
        phase: u8,
        disruptive: &Disruptive,
        default_status: Option<u16>,
    ) -> Option<Option<Intervention>> {
        if let Some(m) = &rule.skip_after
            && self.debug_on(9)
        {
            self.debug_line(9, &format!("Skipping rules up to the marker {m}."));
        }
        let enforce = self.state.mode == crate::config::RuleEngineMode::On;
        let intervention = match disruptive {
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
                rule.label(),
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
            return Some(Some(i));
        }
        if let Disruptive::Allow(scope) = *disruptive {
            if self.debug_on(4) {
                let msg = format!("{}: allow ({scope:?}).", rule.label());
                self.debug_line(4, &msg);
            }
            if enforce {
                self.state.allow = Some(scope);
                self.state.allow_phase = phase;
                if scope == AllowScope::Phase {
                    self.phase_ended(phase);
                }
                return Some(None);
            }
        }
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

    /// Evaluates one link of a chain on its own (not the links after it): a
    /// `SecAction` matches once with no value; a link whose outcome the load-time
    /// folds decide (`folded`, while the transaction keeps them valid) replays it;
    /// any other collects its targets and runs its operator. True when it matched
    /// (its per-value actions have run).
    fn eval_one(&mut self, rule: &Rule, folded: Option<&Folded>) -> bool {
        if rule.targets.is_empty() {
            self.run_match_actions(rule);
            true
        } else if let (Some(folded), true) = (folded, self.state.folds_valid) {
            self.replay(rule, folded)
        } else {
            self.eval_targets(rule)
        }
    }

    /// Runs the actions of a fully matched chain whose first link is `rule`:
    /// each link's, the last link's first (the order of ModSecurity's recursion
    /// over a chain).
    fn run_chain_actions(&mut self, rule: &Rule) {
        if let Some(next) = &rule.chain {
            self.run_chain_actions(next);
        }
        self.run_full_match_actions(rule);
    }

    /// Evaluates a link folded at load time: its known matches, without collecting,
    /// transforming or running the operator.
    fn replay(&mut self, rule: &Rule, folded: &Folded) -> bool {
        let Folded::Always(hits) = folded else {
            if self.debug_on(9) {
                let msg = format!("{}: never matches (folded at load time).", rule.label());
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
}
