//! Where a phase's walk goes on after a rule matched: `skip` and `skipAfter`
//! resolved at load, the first layer of the compiled plan.
//!
//! SecLang's flow after a match: with `skipAfter:M`, every entry up to the
//! first marker `M` after the rule is passed over (to the phase's end when
//! there is none); then, with `skip:N`, the next `N` rules. Markers never count
//! towards `N`. The interpreter used to carry that as state through the walk,
//! comparing each marker's name with the one it looked for; [`Jumps`] holds, for
//! each rule entry, the entry the walk goes on from instead, so a match costs one
//! lookup and the entries in between are never visited.
//!
//! A site's walk is its overlay's entries then the base's (`crate::policy`), and a
//! `skipAfter` of the overlay may land in the base: a site's table is made over
//! both.

use crate::rule::Entry;

/// For each entry of each phase's walk, the entry the walk goes on from after
/// that entry's rule matched (the walk's length: the phase's end). See the
/// module documentation.
#[derive(Debug, Clone, Default)]
pub(crate) struct Jumps([Vec<u32>; 5]);

impl Jumps {
    /// The table of the walk over `overlay`'s entries (a site's; none for the
    /// base alone) then `base`'s, per phase.
    pub(crate) fn of(overlay: Option<&[Vec<Entry>; 5]>, base: &[Vec<Entry>; 5]) -> Jumps {
        let mut out: [Vec<u32>; 5] = Default::default();
        for (p, table) in out.iter_mut().enumerate() {
            let walk: Vec<&Entry> = overlay
                .map_or(&[][..], |o| &o[p][..])
                .iter()
                .chain(&base[p])
                .collect();
            *table = phase(&walk);
        }
        Jumps(out)
    }

    /// Where the walk of phase `p` (0 for phase 1) goes on after the rule at
    /// `entry` matched.
    #[inline]
    pub(crate) fn after_match(&self, p: usize, entry: usize) -> usize {
        self.0[p][entry] as usize
    }

    /// Checks the table against the flow as the interpreter walked it before
    /// (a state machine that passes over entries one by one): the entries each
    /// walk runs next must be the same. The first difference, if any.
    pub(crate) fn check(
        &self,
        overlay: Option<&[Vec<Entry>; 5]>,
        base: &[Vec<Entry>; 5],
    ) -> Result<(), String> {
        for p in 0..5 {
            let walk: Vec<&Entry> = overlay
                .map_or(&[][..], |o| &o[p][..])
                .iter()
                .chain(&base[p])
                .collect();
            for (i, e) in walk.iter().enumerate() {
                let Entry::Rule(r) = e else { continue };
                let want = stepwise(&walk, i, r.skip_after.as_deref(), r.skip);
                // The table may point at a marker the stepwise walk passes over:
                // compare the next rule each would run.
                let got = next_rule(&walk, self.after_match(p, i));
                if got != want {
                    return Err(format!(
                        "phase {}: after the rule at entry {i} ({}) matched, the table goes on at {got}, the walk at {want}",
                        p + 1,
                        r.label()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The table of one phase's walk.
fn phase(walk: &[&Entry]) -> Vec<u32> {
    let len = walk.len();
    // The positions of the rules, and of each marker name, in order.
    let rules: Vec<usize> = (0..len)
        .filter(|&i| matches!(walk[i], Entry::Rule(_)))
        .collect();
    let mut markers: std::collections::HashMap<&str, Vec<usize>> = Default::default();
    for (i, e) in walk.iter().enumerate() {
        if let Entry::Marker(name) = e {
            markers.entry(name.as_str()).or_default().push(i);
        }
    }
    // The `n`-th rule at or after `from`, or the end.
    let nth_rule_from = |from: usize, n: u32| -> usize {
        let first = rules.partition_point(|&r| r < from);
        rules.get(first + n as usize).copied().unwrap_or(len)
    };
    let to_u32 = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
    walk.iter()
        .enumerate()
        .map(|(i, e)| match e {
            Entry::Marker(_) => to_u32(i + 1),
            Entry::Rule(r) => {
                let from = match &r.skip_after {
                    None => Some(i + 1),
                    Some(m) => markers.get(m.as_str()).and_then(|at| {
                        let k = at.partition_point(|&x| x <= i);
                        at.get(k).map(|&x| x + 1)
                    }),
                };
                to_u32(from.map_or(len, |f| nth_rule_from(f, r.skip)))
            }
        })
        .collect()
}

/// The entry of the next rule at or after `from` (the walk's length when none).
fn next_rule(walk: &[&Entry], from: usize) -> usize {
    (from..walk.len())
        .find(|&j| matches!(walk[j], Entry::Rule(_)))
        .unwrap_or(walk.len())
}

/// The next rule the walk runs after the rule at `i` matched with `skip_after`
/// and `skip`, found as the interpreter's loop did: entry by entry.
fn stepwise(walk: &[&Entry], i: usize, skip_after: Option<&str>, skip: u32) -> usize {
    let mut pending = skip_after;
    let mut skip = skip;
    for (j, e) in walk.iter().enumerate().skip(i + 1) {
        match e {
            Entry::Marker(name) => {
                if pending == Some(name.as_str()) {
                    pending = None;
                }
            }
            Entry::Rule(_) => {
                if pending.is_some() {
                    continue;
                }
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                return j;
            }
        }
    }
    walk.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RulesetBuilder;
    use std::sync::Arc;

    fn ruleset(text: &str) -> crate::Ruleset {
        let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
        b.add_text(text, "t.conf").unwrap();
        b.build().unwrap()
    }

    /// The entry index of the rule with `id` in phase 2.
    fn at(rs: &crate::Ruleset, id: i64) -> usize {
        rs.phases[1]
            .iter()
            .position(|e| matches!(e, Entry::Rule(r) if r.id == Some(id)))
            .unwrap()
    }

    #[test]
    fn skips_and_markers_resolve_to_the_next_rule_run() {
        let rs = ruleset(concat!(
            "SecAction \"id:1,phase:2,pass,nolog,skip:2\"\n",
            "SecAction \"id:2,phase:2,pass,nolog\"\n",
            "SecMarker A\n",
            "SecAction \"id:3,phase:2,pass,nolog,skipAfter:B\"\n",
            "SecAction \"id:4,phase:2,pass,nolog\"\n",
            "SecMarker B\n",
            "SecAction \"id:5,phase:2,pass,nolog,skipAfter:A,skip:1\"\n",
            "SecMarker A\n",
            "SecAction \"id:6,phase:2,pass,nolog\"\n",
            "SecAction \"id:7,phase:2,pass,nolog,skipAfter:NOWHERE\"\n",
            "SecAction \"id:8,phase:2,pass,nolog,skip:9\"\n",
            "SecAction \"id:9,phase:2,pass,nolog\"\n",
        ));
        let j = Jumps::of(None, &rs.phases);
        let next = |id| {
            next_rule(
                &rs.phases[1].iter().collect::<Vec<_>>(),
                j.after_match(1, at(&rs, id)),
            )
        };
        let end = rs.phases[1].len();
        // skip:2 passes over rule 2 and rule 3 (the marker does not count).
        assert_eq!(next(1), at(&rs, 4));
        assert_eq!(next(2), at(&rs, 3));
        assert_eq!(next(3), at(&rs, 5));
        // The first marker A after rule 5, then one rule more.
        assert_eq!(next(5), at(&rs, 7));
        // No such marker: the end of the phase.
        assert_eq!(next(7), end);
        assert_eq!(next(8), end);
        assert_eq!(next(9), end);
        j.check(None, &rs.phases).unwrap();
    }
}
