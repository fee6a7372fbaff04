//! The executor: runs a phase's compiled plan ([`crate::plan`]) step by step.
//! Where the interpreter ([`super::interpreter`]) passes over markers, resolves
//! `block`, picks the site's fold table and looks up pause points per rule, the
//! plan has them decided: a step is a rule, its chain's fold outcomes sit in one
//! slice, and a match moves the walk to the step the plan names.

use super::super::Transaction;
use super::Gate;
use crate::intervention::Intervention;
use crate::rule::{Entry, Rule};
use crate::ruleset::fold::Folded;

impl Transaction {
    /// Runs `phase`'s plan from step `start` (0: from its beginning; otherwise
    /// the step a paused walk stopped before).
    pub(super) fn run_plan(&mut self, phase: u8, start: usize) -> Option<Intervention> {
        if let Some(out) = self.walk_barred(phase) {
            return out;
        }
        let ruleset = self.ruleset().clone();
        let policy = self.policy.clone();
        let p = usize::from(phase - 1);
        let plan = &policy
            .as_deref()
            .map_or(&ruleset.plan, |pl| &pl.plan)
            .phases[p];
        let overlay: &[Entry] = policy.as_deref().map_or(&[], |pl| &pl.overlay.phases[p]);
        let base = &ruleset.phases[p];
        if start == 0 {
            // The load-time folds assume every earlier phase ran to its end.
            self.state.folds_valid = self.state.fold_phase == phase - 1;
        }
        let pausing = self.pause_for_lookups && phase < 5;
        let mut next = start;
        while let Some(step) = plan.steps.get(next) {
            let index = next;
            next += 1;
            let e = step.entry as usize;
            let entry = match e.checked_sub(overlay.len()) {
                None => &overlay[e],
                Some(b) => &base[b],
            };
            let Entry::Rule(rule) = entry else {
                // The plan's steps are rule entries only.
                continue;
            };
            match self.before_rule(rule, phase, index, start, pausing && step.pause) {
                Gate::Pass => continue,
                Gate::Stop(out) => return out,
                Gate::Run => {}
            }
            let links = &plan.links[step.first_link as usize..];
            let matched = match self.run_rule(rule, phase, |tx| tx.eval_chain(rule, links)) {
                Ok(m) => m,
                Err(out) => return out,
            };
            if !matched {
                continue;
            }
            next = step.after_match as usize;
            let (disruptive, default_status) = &step.disruptive;
            if let Some(out) = self.chain_matched(rule, phase, disruptive, *default_status) {
                return out;
            }
        }
        self.phase_ended(phase);
        None
    }

    /// Evaluates a chain link by link, without recursion (`links`: the plan's
    /// fold outcomes of its links, in order), and runs its actions when every
    /// link matched.
    fn eval_chain(&mut self, first: &Rule, links: &[Option<Folded>]) -> bool {
        let mut rule = first;
        let mut k = 0;
        loop {
            let folded = links.get(k).and_then(Option::as_ref);
            if !self.eval_one(rule, folded) {
                return false;
            }
            match &rule.chain {
                Some(next) => {
                    rule = next;
                    k += 1;
                }
                None => break,
            }
        }
        self.run_chain_actions(first);
        true
    }
}
