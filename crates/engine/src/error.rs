//! Load-time errors: a rule set that cannot be compiled is refused with file:line and
//! the rule id.

use seclang::{ParseError, Span};

/// Why a rule set could not be loaded. Displays as
/// `file:line:column: [id 942100] reason`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The text is not valid SecLang.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// A directive or rule is syntactically fine but cannot be compiled.
    #[error("{span}: {}{reason}", rule_id.map(|id| format!("[id {id}] ")).unwrap_or_default())]
    Rule {
        /// Where the directive starts.
        span: Span,
        /// The rule id, when the rule has one (or the id of the chain's first rule).
        rule_id: Option<i64>,
        /// What is wrong.
        reason: String,
    },
}

impl LoadError {
    /// Builds a compile error at `span`.
    pub(crate) fn rule(span: &Span, rule_id: Option<i64>, reason: impl Into<String>) -> Self {
        LoadError::Rule {
            span: span.clone(),
            rule_id,
            reason: reason.into(),
        }
    }
}
