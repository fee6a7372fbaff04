//! Operators (`@rx`, `@pm`, ...): compiled once, then run against each value.

use seclang::FileSource;
use std::path::Path;

/// Values captured by a match, for `capture` (TX.0 to TX.9). Index 0 is the whole match.
pub type Captures = Vec<Vec<u8>>;

/// Why an operator could not be compiled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("@{operator}: {reason}")]
pub struct OperatorError {
    /// The operator name.
    pub operator: String,
    /// What is wrong.
    pub reason: String,
}

/// What an operator may need at compile time: files for `@pmFromFile` and
/// `@ipMatchFromFile`, resolved relative to the directory of the rule file.
pub struct CompileContext<'a> {
    /// Reads data files.
    pub source: &'a dyn FileSource,
    /// The directory of the rule file that uses the operator.
    pub base_dir: &'a Path,
}

/// A compiled operator.
#[derive(Debug, Clone)]
pub enum Operator {
    /// `@unconditionalMatch`.
    UnconditionalMatch,
}

impl Operator {
    /// Compiles an operator from its name (without `@`, case-insensitive) and argument.
    /// The argument has already had its macros expanded.
    pub fn compile(
        name: &str,
        argument: &str,
        ctx: &CompileContext<'_>,
    ) -> Result<Operator, OperatorError> {
        let _ = (name, argument, ctx);
        unimplemented!("operators")
    }

    /// Runs the operator on one value. When `captures` is given and the operator
    /// captures (`@rx` groups, `@pm` keyword), it is filled with up to 10 values.
    pub fn matches(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        let _ = (input, captures);
        unimplemented!("operators")
    }
}
