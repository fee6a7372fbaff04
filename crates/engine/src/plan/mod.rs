//! The compiled plan: what a phase's walk needs, decided once at load, so the
//! executor ([`crate::transaction::eval`]'s `run_plan`) reads tables instead of
//! working out the flow rule by rule.
//!
//! A walk is a site's overlay entries followed by the base's (the base alone for a
//! transaction without a site). Per phase the plan holds one [`Step`] per rule entry
//! (markers are gone), in walk order, with:
//! - where the walk goes on after the step's chain matched (`skip`, `skipAfter`
//!   resolved by [`crate::ruleset::jumps`], then mapped from entries to steps);
//! - the disruptive action with `block` already replaced by the default action of
//!   the rule's configuration (the overlay's or the base's), and its status;
//! - whether the walk pauses before it for a DNS lookup;
//! - per link of the chain, the load-time fold outcome that holds for this walk
//!   (the base's, or the site's own table when the site decides them differently).
//!
//! `Rule` stays the compiled form of SecLang, read by the executor for targets,
//! operator and actions; the plan adds the walk's decisions beside it. The
//! interpreter (`run_phase_rules`), which works these out as it walks, is kept as
//! the oracle the plan is tested against (`tests/plan_oracle.rs`).

use crate::actions::Disruptive;
use crate::rule::{Entry, Rule};
use crate::ruleset::fold::{Folded, SiteFolds};
use crate::ruleset::jumps::Jumps;

/// The plan of every phase of one walk (see the module documentation).
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    /// Phases 1 to 5.
    pub phases: [PhasePlan; 5],
}

/// One phase's steps, and the per-link table their chains index.
#[derive(Debug, Clone, Default)]
pub(crate) struct PhasePlan {
    /// One per rule entry of the walk, in order.
    pub steps: Vec<Step>,
    /// Per link of every chain, in step then chain order: its fold outcome in this
    /// walk, if the load-time folds decide it.
    pub links: Vec<Option<Folded>>,
}

/// One rule entry of a walk, with what the walk does around it.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    /// The entry's index in the walk (overlay entries first).
    pub entry: u32,
    /// Its first link's index in [`PhasePlan::links`]; the chain's links follow.
    pub first_link: u32,
    /// The step the walk goes on from after the chain matched
    /// ([`PhasePlan::steps`]'s length: the phase's end).
    pub after_match: u32,
    /// The walk pauses before this step when it pauses for DNS lookups (an `@rbl`
    /// rule of phases 1 to 4).
    pub pause: bool,
    /// The disruptive action on a match, `block` resolved, with the default
    /// action's status when it came from there.
    pub disruptive: (Disruptive, Option<u16>),
}

/// `block`'s meaning per phase: the default action's disruptive action and status.
pub(crate) type Defaults = [(Disruptive, Option<u16>); 5];

/// What a walk's plan is built from: the entries, the tables the passes made for
/// them, and the defaults of the configurations they come from.
pub(crate) struct WalkParts<'a> {
    /// A site's overlay entries, per phase (none for the base alone).
    pub overlay: Option<&'a [Vec<Entry>; 5]>,
    /// The base's entries, per phase.
    pub base: &'a [Vec<Entry>; 5],
    /// Where the walk goes on after each entry's rule matched.
    pub jumps: &'a Jumps,
    /// The site's fold decisions (`None`: the base's, carried by its links).
    pub folds: Option<&'a SiteFolds>,
    /// Per phase, the entries (of the overlay, then of the base) before which a
    /// walk pausing for lookups pauses.
    pub pauses: (Option<&'a [Vec<u32>; 5]>, &'a [Vec<u32>; 5]),
    /// `block`'s meaning for the overlay's rules and for the base's, per phase.
    pub defaults: (Option<&'a Defaults>, &'a Defaults),
}

impl Plan {
    /// Builds the plan of the walk `parts` describes.
    pub(crate) fn build(parts: &WalkParts<'_>) -> Plan {
        let mut plan = Plan::default();
        let own = match parts.folds {
            Some(SiteFolds::Own { folded, .. }) => Some(&**folded),
            _ => None,
        };
        for (p, out) in plan.phases.iter_mut().enumerate() {
            let overlay: &[Entry] = parts.overlay.map_or(&[], |o| &o[p]);
            let walk: Vec<&Entry> = overlay.iter().chain(&parts.base[p]).collect();
            // The first step at or after each entry (and the phase's end).
            let mut step_at = vec![0u32; walk.len() + 1];
            let mut n = 0u32;
            for (i, e) in walk.iter().enumerate() {
                step_at[i] = n;
                if matches!(e, Entry::Rule(_)) {
                    n += 1;
                }
            }
            step_at[walk.len()] = n;
            for (i, e) in walk.iter().enumerate() {
                let Entry::Rule(rule) = e else { continue };
                let in_overlay = i < overlay.len();
                let at = if in_overlay { i } else { i - overlay.len() } as u32;
                let pauses = if in_overlay {
                    parts.pauses.0.map_or(&[][..], |t| &t[p][..])
                } else {
                    &parts.pauses.1[p][..]
                };
                let defaults = match parts.defaults.0 {
                    Some(d) if in_overlay => d,
                    _ => parts.defaults.1,
                };
                let disruptive = match rule.disruptive.clone().unwrap_or(Disruptive::Pass) {
                    Disruptive::Block => defaults[p].clone(),
                    d => (d, None),
                };
                out.steps.push(Step {
                    entry: i as u32,
                    first_link: out.links.len() as u32,
                    after_match: step_at[parts.jumps.after_match(p, i)],
                    pause: pauses.binary_search(&at).is_ok(),
                    disruptive,
                });
                let mut link: Option<&Rule> = Some(rule);
                while let Some(l) = link {
                    let folded = match own {
                        Some(t) => t.get(l.fold_slot as usize).and_then(Option::as_ref),
                        None => l.folded.as_ref(),
                    };
                    out.links.push(folded.cloned());
                    link = l.chain.as_deref();
                }
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RulesetBuilder;
    use std::sync::Arc;

    fn build(text: &str) -> crate::Ruleset {
        let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
        b.add_text(text, "plan.conf").unwrap();
        b.build().unwrap()
    }

    #[test]
    fn steps_skip_markers_and_jumps_land_on_steps() {
        let rs = build(
            "SecDefaultAction \"phase:1,log,deny,status:418\"\n\
             SecRule ARGS \"@rx a\" \"id:1,phase:1,pass,skipAfter:END\"\n\
             SecRule ARGS \"@rx b\" \"id:2,phase:1,block\"\n\
             SecMarker END\n\
             SecRule ARGS \"@rx c\" \"id:3,phase:1,pass,skip:1,chain\"\n\
             SecRule ARGS \"@rx d\" \"t:none\"\n\
             SecRule ARGS \"@rx e\" \"id:4,phase:1,pass\"\n\
             SecRule ARGS \"@rx f\" \"id:5,phase:1,pass\"\n",
        );
        let ph = &rs.plan.phases[0];
        assert_eq!(ph.steps.len(), 5);
        // Rule 1 jumps over rule 2 and the marker to rule 3 (step 2).
        assert_eq!(ph.steps[0].after_match, 2);
        assert_eq!(ph.steps[1].after_match, 2);
        // Rule 3 (two links) skips rule 4: goes on at rule 5 (step 4).
        assert_eq!(ph.steps[2].after_match, 4);
        assert_eq!(ph.steps[2].first_link, 2);
        assert_eq!(ph.steps[3].first_link, 4);
        assert_eq!(ph.steps[4].first_link, 5);
        assert_eq!(ph.links.len(), 6);
        // `block` is the default action's deny, with its status.
        assert_eq!(ph.steps[1].disruptive, (Disruptive::Deny, Some(418)));
        assert_eq!(ph.steps[0].disruptive, (Disruptive::Pass, None));
        assert!(ph.steps.iter().all(|s| !s.pause));
    }

    #[test]
    fn a_jump_to_the_phase_end_is_the_step_count() {
        let rs = build(
            "SecRule ARGS \"@rx a\" \"id:1,phase:2,pass,skipAfter:NOWHERE\"\n\
             SecRule ARGS \"@rx b\" \"id:2,phase:2,pass\"\n",
        );
        let ph = &rs.plan.phases[1];
        assert_eq!(ph.steps[0].after_match as usize, ph.steps.len());
        assert_eq!(ph.steps[1].after_match, 2);
    }
}
