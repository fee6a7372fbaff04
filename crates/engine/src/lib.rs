//! Palisade's rule engine: SecLang syntax trees compiled into a [`Ruleset`], and
//! sans-I/O [`Transaction`]s that run phases 1 to 5 against it, with ModSecurity v3
//! semantics.
//!
//! The server creates one [`Transaction`] per request, feeds it the request line,
//! headers and body, runs the phases, and carries out any [`Intervention`]. See
//! [`ruleset`] for an example.

pub mod actions;
pub mod body;
pub mod collections;
pub mod config;
pub mod error;
pub mod intervention;
pub mod log;
pub mod macros;
pub mod operators;
pub mod rule;
pub mod ruleset;
pub mod transaction;
pub mod transforms;
pub mod variables;

pub use collections::{CollectionStore, MemoryStore};
pub use config::{EngineConfig, RuleEngineMode};
pub use error::LoadError;
pub use intervention::{Intervention, InterventionKind};
pub use ruleset::{Ruleset, RulesetBuilder};
pub use transaction::{BodyAppend, Clock, Transaction, TxContext};
