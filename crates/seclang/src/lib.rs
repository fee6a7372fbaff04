//! SecLang, the rule language of ModSecurity, turned from text into a syntax tree.
//!
//! This crate knows the *syntax* of SecLang: directives, line continuations, quoting,
//! `SecRule` variables / operator / actions, and `Include` (with globs). It does not
//! know what a variable or an action *means*; the `engine` crate compiles the tree.
//!
//! The only I/O is reading files through the [`FileSource`] trait, so that callers can
//! load rules from disk ([`FsSource`]) or from memory ([`MemorySource`], used by tests).
//!
//! Entry points: [`parse_str`] (text, includes from disk), [`parse_source`] (text,
//! includes through a [`FileSource`]) and [`parse_file`], which stop at the first
//! error; [`parse_source_each`] and [`parse_file_each`] go on after an error and hand
//! over every directive and every error in order (so that `palisade check` can
//! report them all). The [`rule`] module parses the variable, operator and action
//! syntax on its own, for the places where the same syntax appears inside an action
//! (such as `ctl:ruleRemoveTargetById=1;ARGS:x`).
//!
//! ```
//! use seclang::{parse_str, DirectiveKind};
//! let dirs = parse_str(
//!     "SecRule ARGS \"@rx foo\" \"id:1,phase:2,deny\"",
//!     "inline.conf",
//! ).unwrap();
//! assert!(matches!(dirs[0].kind, DirectiveKind::Rule(_)));
//! ```

pub mod ast;
mod directives;
pub mod error;
mod lexer;
pub mod parser;
pub mod rule;
pub mod source;

pub use ast::*;
pub use error::{ParseError, ParseErrorKind};
pub use parser::{
    Failure, MAX_INCLUDE_DEPTH, Parsed, parse_file, parse_file_each, parse_source,
    parse_source_each, parse_str,
};
pub use source::{FileSource, FsSource, MemorySource};
