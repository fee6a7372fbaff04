//! Parse errors: what went wrong and where.

use crate::ast::Span;
use std::path::PathBuf;

/// A SecLang file could not be read or parsed. Displays as `file:line:column: reason`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{span}: {kind}")]
pub struct ParseError {
    /// Where the problem is.
    pub span: Span,
    /// What the problem is.
    pub kind: ParseErrorKind,
}

/// The reason a parse failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseErrorKind {
    /// A directive that Palisade does not know.
    #[error("unknown directive {0:?}")]
    UnknownDirective(String),
    /// A directive got the wrong number of arguments.
    #[error("{directive}: expected {expected}, got {got} argument(s)")]
    ArgumentCount {
        /// The directive.
        directive: String,
        /// A description of what it takes.
        expected: &'static str,
        /// How many it got.
        got: usize,
    },
    /// A quoted string was not closed before the end of the directive.
    #[error("unterminated quoted string")]
    UnterminatedQuote,
    /// The variable list of a rule is malformed.
    #[error("bad variable {0:?}")]
    BadVariable(String),
    /// The action list of a rule is malformed.
    #[error("bad action list: {0}")]
    BadAction(String),
    /// A rule id or id range is not a number.
    #[error("bad rule id or range {0:?}")]
    BadId(String),
    /// An included file could not be read, or a glob matched nothing that could be read.
    #[error("cannot read {path}: {reason}")]
    Io {
        /// The file or pattern.
        path: PathBuf,
        /// The system's reason.
        reason: String,
    },
    /// `Include` nested too deeply (a loop).
    #[error("includes nested deeper than {0} levels (include loop?)")]
    IncludeDepth(usize),
    /// A file includes itself, directly or through other files.
    #[error("include loop: {0} includes itself")]
    IncludeLoop(PathBuf),
}
