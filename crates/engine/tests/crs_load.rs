//! CRS v4 and CRS 3.3.4 load with no error and no rule dropped.

mod common;

use engine::Ruleset;

fn counts(rs: &Ruleset) -> (usize, usize) {
    let mut ids = 0;
    let mut links = 0;
    for p in 1..=5 {
        for r in rs.rules(p) {
            if r.id.is_some() {
                ids += 1;
            }
            links += r.links().count() - 1;
        }
    }
    (ids, links)
}

#[test]
fn crs_v4_loads_every_rule() {
    let rs = common::crs_v4();
    let (ids, links) = counts(&rs);
    // 629 rules in rules/*.conf, 900990 from crs-setup.conf.example, and the two
    // body-processor switches of the preamble.
    assert_eq!(ids, 629 + 1 + 2);
    assert_eq!(links, 73);
    assert!(rs.warnings().is_empty(), "{:?}", rs.warnings());
    // Where each walk goes on after a match (skip, skipAfter, resolved at load)
    // is where the walk entry by entry went.
    rs.check_jumps().unwrap();
    // A SecRuleUpdateTargetById in REQUEST-900-EXCLUSION-style files is applied to rules
    // loaded earlier: 942100 keeps its targets (none is excluded in the stock set).
    assert!(rs.rule_by_id(942100).is_some());
}

#[test]
fn crs_v3_loads_every_rule() {
    let rs = common::crs_v3();
    rs.check_jumps().unwrap();
    let (ids, links) = counts(&rs);
    assert!(ids > 600, "only {ids} rules with an id");
    assert!(links > 100, "only {links} chained rules");
}

/// At the default paranoia level (1, set by an initialisation rule when nothing set
/// it before), the rule set decides the paranoia-level checks at load time: the
/// checks `@lt 1` never match, the checks `@lt 2` always skip their file's higher
/// levels (so the checks after them are never reached).
#[test]
fn crs_v4_paranoia_checks_fold_at_pl1() {
    use engine::internals::ruleset::fold::Folded;
    let rs = common::crs_v4();
    let mut seen = 0;
    for p in 1..=5 {
        for r in rs.rules(p) {
            let [t] = r.targets.as_slice() else { continue };
            let pl = t
                .written
                .eq_ignore_ascii_case("TX:DETECTION_PARANOIA_LEVEL")
                || t.written.eq_ignore_ascii_case("TX:BLOCKING_PARANOIA_LEVEL");
            if !pl || !r.operator_text.0.eq_ignore_ascii_case("lt") {
                continue;
            }
            seen += 1;
            // `@lt N` holds for level 1 when N > 1; the check of detection against
            // blocking level (`@lt %{tx.blocking_paranoia_level}`) compares 1 with 1.
            let n = r.operator_text.1.trim().parse::<i64>().ok();
            let want_never = n.is_none_or(|n| n <= 1);
            if n.is_some_and(|n| n > 2) {
                // Behind the `@lt 2` check, which always skips: never reached at PL1.
                assert!(r.folded.is_none(), "rule {:?}", r.id);
                continue;
            }
            match &r.folded {
                Some(Folded::Never) => assert!(want_never, "rule {:?}", r.id),
                Some(Folded::Always(hits)) => {
                    assert!(!want_never, "rule {:?}", r.id);
                    assert_eq!(hits.len(), 1, "rule {:?}", r.id);
                    assert_eq!(hits[0].1, b"1", "rule {:?}", r.id);
                }
                None => panic!("rule {:?} ({}) is not folded", r.id, r.operator_text.1),
            }
        }
    }
    assert!(seen > 150, "only {seen} paranoia checks found");
}
