//! What a transaction reports to its server, as typed events through one queue
//! ([`Transaction::poll_event`](crate::transaction::Transaction::poll_event)), in
//! the manner of quinn-proto's `poll()`: the engine queues, the server takes them
//! when it likes (after each phase, say) and logs, counts or stores them.

use crate::collections::{CollectionError, RecordKey, RecordWrite};
use crate::intervention::Intervention;
use crate::transaction::BudgetExceeded;

/// One thing a transaction did that its server acts on.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Event {
    /// A rule matched and is logged (or decided): one per record of the audit
    /// log's matches, in order.
    RuleMatched(Box<RuleMatch>),
    /// The transaction was disrupted: a rule, a limit or the CPU budget decided
    /// its answer.
    Intervention {
        /// The phase that decided.
        phase: u8,
        /// What was decided.
        intervention: Intervention,
    },
    /// The rules' writes to one persistent record, for the server's store. Queued
    /// by phase 5 and by [`Transaction::close`](crate::transaction::Transaction::close).
    CollectionWrite(RecordKey, RecordWrite),
    /// A persistent collection could not be read: the rules saw it empty.
    CollectionReadFailed(CollectionError),
    /// A DNS block-list lookup gave no answer: its rule did not match.
    LookupFailed {
        /// The name looked up.
        name: String,
        /// Why, as the resolver said.
        reason: String,
    },
    /// A limit of the transaction was reached.
    LimitReached(Limit),
    /// A debug-log line (`SecDebugLog`), `[UNIQUE_ID] [URI] [LEVEL] message`, as
    /// ModSecurity writes them, without a newline.
    Debug(String),
    /// The time each rule evaluated in a phase took, in the order they ran: only
    /// for a transaction timed with
    /// [`Transaction::time_rules`](crate::transaction::Transaction::time_rules).
    RuleTimes {
        /// The phase.
        phase: u8,
        /// One entry per rule evaluation (a chain counts once, by its first rule).
        times: Vec<RuleTime>,
    },
}

/// One rule evaluation's time in a timed transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleTime {
    /// The rule's id (a chain's first rule's), if it has one.
    pub rule_id: Option<i64>,
    /// How long its evaluation took, in nanoseconds.
    pub nanos: u64,
}

/// A limit a transaction reached.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limit {
    /// Rule evaluation went over the CPU budget and stopped.
    CpuBudget(BudgetExceeded),
    /// The transaction reached its `@rbl` lookup limit: this name and any later
    /// one were not looked up (reported once per transaction).
    Lookups {
        /// The first name not looked up.
        name: String,
        /// The limit.
        limit: usize,
    },
}

/// A rule's match, as the logs and a summary show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleMatch {
    /// The rule id (a chain's starter's), if it has one.
    pub rule_id: Option<i64>,
    /// The phase it matched in.
    pub phase: u8,
    /// The expanded `msg`.
    pub msg: Option<String>,
    /// MATCHED_VAR_NAME at the time of the match.
    pub var_name: String,
    /// MATCHED_VAR at the time of the match, cut to
    /// [`SHOWN_VALUE`](crate::log::SHOWN_VALUE) bytes of text as the logs show it.
    pub value: String,
    /// `severity`.
    pub severity: Option<u8>,
    /// `tag`s.
    pub tags: Vec<String>,
    /// The status, when this match denied the transaction.
    pub denied_with: Option<u16>,
    /// The error-log line (ModSecurity's `ModSecurity: Warning. ...` form), when
    /// the rule logs (`log`); `None` for a `nolog` rule.
    pub log_line: Option<String>,
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::CpuBudget(b) => write!(
                f,
                "rule evaluation over its CPU budget in phase {} ({} us used, budget {} us)",
                b.phase, b.used_micros, b.limit_micros
            ),
            Limit::Lookups { name, limit } => crate::lookups::RblFailure::OverLimit {
                name: name.clone(),
                limit: *limit,
            }
            .fmt(f),
        }
    }
}

impl Event {
    /// The error-log line of a logged rule match, taking it.
    pub fn into_log_line(self) -> Option<String> {
        match self {
            Event::RuleMatched(m) => m.log_line,
            _ => None,
        }
    }

    /// A collection write, taking it.
    pub fn into_collection_write(self) -> Option<(RecordKey, RecordWrite)> {
        match self {
            Event::CollectionWrite(k, w) => Some((k, w)),
            _ => None,
        }
    }

    /// A collection read error, taking it.
    pub fn into_collection_error(self) -> Option<CollectionError> {
        match self {
            Event::CollectionReadFailed(e) => Some(e),
            _ => None,
        }
    }

    /// A debug-log line, taking it.
    pub fn into_debug_line(self) -> Option<String> {
        match self {
            Event::Debug(l) => Some(l),
            _ => None,
        }
    }

    /// A failed `@rbl` lookup or the lookup limit, as an [`RblFailure`](crate::RblFailure).
    pub fn into_rbl_failure(self) -> Option<crate::lookups::RblFailure> {
        match self {
            Event::LookupFailed { name, reason } => {
                Some(crate::lookups::RblFailure::Failed { name, reason })
            }
            Event::LimitReached(Limit::Lookups { name, limit }) => {
                Some(crate::lookups::RblFailure::OverLimit { name, limit })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Event, RuleTime};
    use crate::{RulesetBuilder, Transaction, TxContext};
    use std::sync::Arc;

    const RULES: &str = r#"
SecRuleEngine On
SecRule ARGS "@contains a" "id:1,phase:1,pass,nolog"
SecRule ARGS "@contains b" "id:2,phase:1,pass,nolog,chain"
    SecRule ARGS "@contains c" ""
SecAction "id:3,phase:1,pass,nolog,skip:1"
SecAction "id:4,phase:1,pass,nolog"
SecRule ARGS "@contains x" "id:5,phase:2,deny,status:403"
"#;

    /// The rule times a GET of `uri` reports per phase, timed or not.
    fn times(timed: bool, uri: &str) -> Vec<(u8, Vec<Option<i64>>)> {
        let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
        b.add_text(RULES, "test.conf").unwrap();
        let mut tx = Transaction::new(Arc::new(b.build().unwrap()), TxContext::default());
        if timed {
            tx.time_rules();
        }
        let (_, mut tx) = crate::transaction::test_get::get(tx, uri);
        std::iter::from_fn(|| tx.poll_event())
            .filter_map(|e| match e {
                Event::RuleTimes { phase, times } => {
                    Some((phase, times.iter().map(|t: &RuleTime| t.rule_id).collect()))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_timed_transaction_reports_each_evaluated_rule_once_per_phase() {
        // Rule 4 is skipped, the chain counts once by its first rule, and phase 2
        // stops at the deny.
        assert_eq!(
            times(true, "/?q=abcx"),
            vec![(1, vec![Some(1), Some(2), Some(3)]), (2, vec![Some(5)])]
        );
        assert!(times(false, "/?q=abcx").is_empty());
    }
}
