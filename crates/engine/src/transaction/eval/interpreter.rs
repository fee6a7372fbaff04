//! The interpreter: walks a phase's entries rule by rule, working out the flow
//! (markers, jumps, `block`'s meaning, folds, pauses) as it goes. The compiled plan
//! ([`super::plan`]) replaced it as the engine's walk; it stays as the oracle the
//! plan is tested against (`Transaction::use_interpreter`, `tests/plan_oracle.rs`).

use super::super::Transaction;
use super::Gate;
use crate::actions::Disruptive;
use crate::intervention::Intervention;
use crate::rule::{Entry, Rule};
use crate::ruleset::fold::Folded;

impl Transaction {
    /// Runs `phase`'s rules from entry `start` of the walk, as the interpreter.
    pub(super) fn run_phase_rules(&mut self, phase: u8, start: usize) -> Option<Intervention> {
        if let Some(out) = self.walk_barred(phase) {
            return out;
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
        // on from the rule it paused before. After a match, `skip` and
        // `skipAfter` are one jump, resolved at load (`ruleset/jumps.rs`).
        let jumps = policy
            .as_deref()
            .map_or(&ruleset.jumps, |pl| &pl.overlay.jumps);
        let len = overlay_len + base.len();
        let mut next = start;
        while next < len {
            let index = next;
            next += 1;
            let entry = if index < overlay_len {
                &overlay[index]
            } else {
                &base[index - overlay_len]
            };
            let rule = match entry {
                Entry::Marker(_) => continue,
                Entry::Rule(r) => r,
            };
            let (pause_at, at) = if index < overlay_len {
                (pause_overlay, index)
            } else {
                (pause_base, index - overlay_len)
            };
            let pause_here = pause_at.binary_search(&(at as u32)).is_ok();
            match self.before_rule(rule, phase, index, start, pause_here) {
                Gate::Pass => continue,
                Gate::Stop(out) => return out,
                Gate::Run => {}
            }
            let matched = match self.run_rule(rule, phase, |tx| tx.eval_link(rule, own_folds)) {
                Ok(m) => m,
                Err(out) => return out,
            };
            if !matched {
                continue;
            }
            next = jumps.after_match(p, index);
            let (disruptive, default_status) =
                match rule.disruptive.clone().unwrap_or(Disruptive::Pass) {
                    Disruptive::Block => match policy.as_deref() {
                        Some(pl) if index < overlay_len => pl.overlay.default_disruptive[p].clone(),
                        _ => ruleset.default_disruptive[p].clone(),
                    },
                    d => (d, None),
                };
            if let Some(out) = self.chain_matched(rule, phase, &disruptive, default_status) {
                return out;
            }
        }
        self.phase_ended(phase);
        None
    }

    /// Evaluates one link of a chain and, when it matches, the links after it.
    /// Returns true when the whole rest of the chain matched (its actions have
    /// then run). `own_folds` is the site's own fold table, when it has one (by
    /// `Rule::fold_slot`), else the links' own folds serve.
    fn eval_link(&mut self, rule: &Rule, own_folds: Option<&[Option<Folded>]>) -> bool {
        let folded = match own_folds {
            Some(t) => t.get(rule.fold_slot as usize).and_then(Option::as_ref),
            None => rule.folded.as_ref(),
        };
        if !self.eval_one(rule, folded) {
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
}
