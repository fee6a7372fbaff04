//! Load-time errors: a rule set that cannot be compiled is refused with file:line and
//! the rule id; a load that goes on after its errors
//! ([`RulesetBuilder::keep_going`](crate::RulesetBuilder::keep_going)) gives them all.

use seclang::{ParseError, Span};
use std::path::PathBuf;
use std::sync::Arc;

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

/// Every error of a load that went on after its errors
/// ([`RulesetBuilder::keep_going`](crate::RulesetBuilder::keep_going)), in the
/// order found: the first ones up to the builder's limit are kept, the others only
/// counted. Never empty. Displays one error per line, then `and N more error(s)`
/// when some were only counted.
#[derive(Debug, Clone)]
pub struct LoadErrors {
    listed: Vec<LoadError>,
    total: usize,
}

impl LoadErrors {
    /// Errors kept, `total` of them found in all (`total >= listed.len()`); an
    /// empty list stands for one unnamed error.
    pub(crate) fn new(listed: Vec<LoadError>, total: usize) -> Self {
        let listed = if listed.is_empty() {
            vec![LoadError::rule(
                &Span {
                    file: Arc::new(PathBuf::from("?")),
                    line: 0,
                    column: 0,
                },
                None,
                "the rule set could not be loaded",
            )]
        } else {
            listed
        };
        let total = total.max(listed.len());
        LoadErrors { listed, total }
    }

    /// The errors kept, in the order found (at least one).
    pub fn listed(&self) -> &[LoadError] {
        &self.listed
    }

    /// How many errors were found, kept or not.
    pub fn total(&self) -> usize {
        self.total
    }

    /// How many errors were found beyond those kept.
    pub fn unlisted(&self) -> usize {
        self.total - self.listed.len()
    }

    /// The first error found.
    pub fn first(&self) -> &LoadError {
        &self.listed[0]
    }

    /// The first error found, taken.
    pub fn into_first(self) -> LoadError {
        self.listed.into_iter().next().unwrap_or_else(|| {
            LoadError::rule(
                &Span {
                    file: Arc::new(PathBuf::from("?")),
                    line: 0,
                    column: 0,
                },
                None,
                "the rule set could not be loaded",
            )
        })
    }
}

impl std::fmt::Display for LoadErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.listed.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        if self.unlisted() > 0 {
            write!(f, "\nand {} more error(s)", self.unlisted())?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadErrors {}
