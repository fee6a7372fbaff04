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
