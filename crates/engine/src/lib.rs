//! Palisade's rule engine: SecLang syntax trees compiled into a `Ruleset`, and
//! sans-I/O transactions that run phases 1 to 5 against it.

pub mod body;
pub mod operators;
pub mod transforms;
