//! The per-transaction CPU budget, with a fake meter: where evaluation stops, what the
//! outcome is, and that a transaction within its budget is unaffected.
//!
//! The meter below moves on by 10 µs at every reading. Each rule here inspects one
//! argument of 70,000 bytes, more than the work between two readings
//! (`engine::internals::transaction::budget::CHECK_WORK`), so the meter is read once per rule
//! (or chain link), before its operator runs, and once when a phase ends. A phase's
//! first reading starts its interval: the rules of a phase read 0, 10, 20, ... µs
//! more than the time accounted before the phase.

use engine::{
    BudgetAction, CpuBudget, CpuMeter, Intervention, InterventionKind, RulesetBuilder, Transaction,
    TxContext,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
struct Steps(AtomicU64);

impl CpuMeter for Steps {
    fn now_micros(&self) -> u64 {
        self.0.fetch_add(10, Ordering::Relaxed)
    }
}

fn ruleset(text: &str) -> Arc<engine::Ruleset> {
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    b.add_text(text, "test.conf")
        .unwrap_or_else(|e| panic!("{e}"));
    Arc::new(b.build().unwrap_or_else(|e| panic!("{e}")))
}

/// Runs phases 1, 2 and 5 of a GET whose argument `q` is 70,000 `a`s, with the fake
/// meter when `budget` is given.
fn run(
    rs: &Arc<engine::Ruleset>,
    budget: Option<Option<CpuBudget>>,
) -> (Option<Intervention>, Transaction) {
    let mut tx = Transaction::new(rs.clone(), TxContext::default());
    if let Some(b) = budget {
        tx.set_cpu_meter(Arc::new(Steps(AtomicU64::new(1_000))));
        tx.set_cpu_budget(b);
    }
    let uri = format!("/?q={}", "a".repeat(70_000));
    tx.set_request_line(b"GET", uri.as_bytes(), b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    let mut i = tx.process_request_headers();
    if i.is_none() {
        i = tx.process_request_body();
    }
    tx.process_logging();
    (i, tx)
}

/// Five phase-1 rules that each set `tx.ranN`, one in phase 2 and one in phase 5.
const FIVE: &str = r#"
SecRule ARGS:q "@contains a" "id:1,phase:1,pass,nolog,setvar:tx.ran1=1"
SecRule ARGS:q "@contains a" "id:2,phase:1,pass,nolog,setvar:tx.ran2=1"
SecRule ARGS:q "@contains a" "id:3,phase:1,pass,nolog,setvar:tx.ran3=1"
SecRule ARGS:q "@contains a" "id:4,phase:1,pass,nolog,setvar:tx.ran4=1"
SecRule ARGS:q "@contains a" "id:5,phase:1,pass,nolog,setvar:tx.ran5=1"
SecRule ARGS:q "@contains a" "id:6,phase:2,pass,nolog,setvar:tx.ran6=1"
SecRule ARGS:q "@contains a" "id:7,phase:5,pass,nolog,setvar:tx.ran7=1"
"#;

fn ran(tx: &Transaction) -> Vec<u8> {
    (1..=7)
        .filter(|n| tx.tx_var(&format!("ran{n}")).is_some())
        .collect()
}

fn budget(limit_micros: u64, action: BudgetAction) -> Option<CpuBudget> {
    Some(CpuBudget {
        limit_micros,
        action,
    })
}

#[test]
fn within_budget_nothing_changes() {
    let rs = ruleset(FIVE);
    let (i, plain) = run(&rs, None);
    assert!(i.is_none());
    assert_eq!(ran(&plain), [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(plain.cpu_used_micros(), None);
    let (i, tx) = run(&rs, Some(budget(1_000_000, BudgetAction::Pass)));
    assert!(i.is_none());
    assert_eq!(ran(&tx), [1, 2, 3, 4, 5, 6, 7]);
    assert!(tx.budget_exceeded().is_none());
    // Phase 1: the first rule starts the interval, four more rules and the end add
    // 50; phases 2 and 5: their rule starts the interval, the end adds 10.
    let used = tx.cpu_used_micros().expect("a meter was given");
    assert_eq!(used, 70);
    // A meter with no budget accounts time and stops nothing.
    let (i, tx) = run(&rs, Some(None));
    assert!(i.is_none());
    assert_eq!(ran(&tx), [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(tx.cpu_used_micros(), Some(used));
}

#[test]
fn pass_stops_at_the_right_rule_and_runs_nothing_after() {
    let rs = ruleset(FIVE);
    // Rule 2 reads 10 µs, rule 3 20 > 15: rule 3 does not run.
    let (i, tx) = run(&rs, Some(budget(15, BudgetAction::Pass)));
    assert!(i.is_none(), "a passing budget does not block");
    assert_eq!(ran(&tx), [1, 2], "no rule after the stop, in any phase");
    let e = tx.budget_exceeded().expect("exceeded");
    assert_eq!(e.phase, 1);
    assert_eq!(e.rule_id, Some(3));
    assert_eq!(e.used_micros, 20);
    assert_eq!(e.limit_micros, 15);
    assert!(!e.blocked);
}

#[test]
fn block_answers_with_the_configured_status() {
    let rs = ruleset(FIVE);
    let (i, tx) = run(&rs, Some(budget(35, BudgetAction::Block { status: 503 })));
    let i = i.expect("blocked");
    assert_eq!(i.status, 503);
    assert_eq!(i.kind, InterventionKind::Deny);
    assert_eq!(i.rule_id, None);
    assert_eq!(ran(&tx), [1, 2, 3, 4]);
    let e = tx.budget_exceeded().expect("exceeded");
    assert_eq!((e.phase, e.rule_id, e.blocked), (1, Some(5), true));
    assert_eq!(tx.intervention(), Some(&i));
}

#[test]
fn the_stop_can_come_in_a_later_phase() {
    let rs = ruleset(
        r#"
SecRule ARGS:q "@contains a" "id:1,phase:1,pass,nolog,setvar:tx.ran1=1"
SecRule ARGS:q "@contains a" "id:2,phase:1,pass,nolog,setvar:tx.ran2=1"
SecRule ARGS:q "@contains a" "id:3,phase:2,pass,nolog,setvar:tx.ran3=1"
SecRule ARGS:q "@contains a" "id:4,phase:2,pass,nolog,setvar:tx.ran4=1"
SecRule ARGS:q "@contains a" "id:5,phase:2,pass,nolog,setvar:tx.ran5=1"
SecRule ARGS:q "@contains a" "id:7,phase:5,pass,nolog,setvar:tx.ran7=1"
"#,
    );
    // Phase 1 accounts 20 µs (rule 2 and its end); in phase 2, rule 3 starts the
    // interval, rule 4 reads 30 and rule 5 40 > 35.
    let (i, tx) = run(&rs, Some(budget(35, BudgetAction::Block { status: 429 })));
    assert_eq!(i.map(|i| i.status), Some(429));
    assert_eq!(ran(&tx), [1, 2, 3, 4]);
    let e = tx.budget_exceeded().expect("exceeded");
    assert_eq!((e.phase, e.rule_id, e.used_micros), (2, Some(5), 40));
}

#[test]
fn detection_only_never_blocks() {
    let rs = ruleset(&format!("SecRuleEngine DetectionOnly\n{FIVE}"));
    let (i, tx) = run(&rs, Some(budget(15, BudgetAction::Block { status: 503 })));
    assert!(i.is_none());
    assert_eq!(ran(&tx), [1, 2]);
    assert!(!tx.budget_exceeded().expect("exceeded").blocked);
}

/// skipAfter skips rules without reading the meter; a chain cut short by the budget
/// has not matched: its first link's per-value actions ran (as for any chain whose
/// later link fails), its full-match actions and logging did not.
#[test]
fn chains_and_skip_after() {
    let rs = ruleset(
        r#"
SecRule ARGS:q "@contains a" "id:1,phase:1,pass,nolog,setvar:tx.one=1,skipAfter:END"
SecRule ARGS:q "@contains a" "id:2,phase:1,pass,nolog,setvar:tx.two=1"
SecMarker END
SecRule ARGS:q "@contains a" "id:3,phase:1,pass,log,msg:'chain',setvar:tx.head=1,chain"
    SecRule ARGS:q "@contains a" "setvar:tx.link=1,setenv:chained=1"
SecRule ARGS:q "@contains a" "id:4,phase:1,pass,log,setvar:tx.four=1"
"#,
    );
    let vars = |tx: &Transaction| {
        ["one", "two", "head", "link", "four"]
            .into_iter()
            .filter(|v| tx.tx_var(v).is_some())
            .collect::<Vec<_>>()
    };
    let (_, plain) = run(&rs, None);
    assert_eq!(vars(&plain), ["one", "head", "link", "four"]);
    assert_eq!(plain.matched_rule_ids(), [3, 4]);
    let (_, within) = run(&rs, Some(budget(1_000, BudgetAction::Pass)));
    assert_eq!(vars(&within), vars(&plain));
    assert_eq!(within.matched_rule_ids(), plain.matched_rule_ids());
    // Rule 1 starts the interval, rule 2 is skipped, the chain's first link reads 10
    // and its second 20 > 15.
    let (_, cut) = run(&rs, Some(budget(15, BudgetAction::Pass)));
    assert_eq!(vars(&cut), ["one", "head"]);
    assert!(cut.matched_rule_ids().is_empty());
    assert_eq!(cut.budget_exceeded().map(|e| e.rule_id), Some(Some(3)));
}

#[test]
fn the_directive_sets_the_default_budget() {
    let rs = ruleset(&format!("SecPalisadeCpuBudget 25 Block 503\n{FIVE}"));
    assert_eq!(
        rs.config().cpu_budget,
        budget(25, BudgetAction::Block { status: 503 })
    );
    // The configured budget applies once the transaction has a meter...
    let mut tx = Transaction::new(rs.clone(), TxContext::default());
    tx.set_cpu_meter(Arc::new(Steps(AtomicU64::new(0))));
    tx.set_request_line(
        b"GET",
        format!("/?q={}", "a".repeat(70_000)).as_bytes(),
        b"HTTP/1.1",
    );
    assert_eq!(tx.process_request_headers().map(|i| i.status), Some(503));
    // ... and not without one.
    let (i, tx) = run(&rs, None);
    assert!(i.is_none());
    assert_eq!(ran(&tx), [1, 2, 3, 4, 5, 6, 7]);

    for (text, expect) in [
        ("SecPalisadeCpuBudget Off", None),
        (
            "SecPalisadeCpuBudget 5000 pass",
            budget(5000, BudgetAction::Pass),
        ),
        (
            "SecPalisadeCpuBudget 5000 Block",
            budget(5000, BudgetAction::Block { status: 403 }),
        ),
    ] {
        assert_eq!(ruleset(text).config().cpu_budget, expect, "{text}");
    }
    for bad in [
        "SecPalisadeCpuBudget 5000",
        "SecPalisadeCpuBudget lots Pass",
        "SecPalisadeCpuBudget 5000 Block 99",
        "SecPalisadeCpuBudget 5000 Maybe",
        "SecPalisadeCpuBudget 5000 Pass 403",
    ] {
        let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
        let err = b.add_text(bad, "bad.conf").err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("SecPalisadeCpuBudget")),
            "{bad}: {err:?}"
        );
    }
}
