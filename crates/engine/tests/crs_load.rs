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
    // A SecRuleUpdateTargetById in REQUEST-900-EXCLUSION-style files is applied to rules
    // loaded earlier: 942100 keeps its targets (none is excluded in the stock set).
    assert!(rs.rule_by_id(942100).is_some());
}

#[test]
fn crs_v3_loads_every_rule() {
    let rs = common::crs_v3();
    let (ids, links) = counts(&rs);
    assert!(ids > 600, "only {ids} rules with an id");
    assert!(links > 100, "only {links} chained rules");
}
