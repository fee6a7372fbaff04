//! Palisade's rule engine: SecLang syntax trees compiled into a [`Ruleset`], and
//! sans-I/O [`Transaction`]s that run phases 1 to 5 against it, with ModSecurity v3
//! semantics.
//!
//! The server creates one [`Transaction`] per request, feeds it the request line,
//! headers and body, runs the phases, and carries out any [`Intervention`]:
//!
//! ```
//! use engine::{RulesetBuilder, Transaction, TxContext};
//! use std::sync::Arc;
//!
//! let mut builder = RulesetBuilder::new(Arc::new(seclang::FsSource));
//! builder
//!     .add_text(
//!         "SecRuleEngine On\n\
//!          SecRule ARGS \"@rx (?i)union\\s+select\" \"id:1,phase:1,deny,status:403,msg:'SQLi'\"",
//!         "inline.conf",
//!     )
//!     .unwrap();
//! let ruleset = Arc::new(builder.build().unwrap());
//!
//! let mut tx = Transaction::new(ruleset, TxContext::default());
//! tx.set_request_line(b"GET", b"/?q=1%20UNION%20SELECT%20pass", b"HTTP/1.1");
//! tx.add_request_header(b"Host", b"example.com");
//! let intervention = tx.process_request_headers().expect("blocked");
//! assert_eq!(intervention.status, 403);
//! assert_eq!(intervention.rule_id, Some(1));
//! ```

pub mod actions;
pub mod body;
pub mod civil;
pub mod collections;
pub mod config;
pub mod error;
pub mod events;
pub mod inputs;
pub mod intervention;
pub mod log;
pub mod lookups;
pub mod macros;
pub mod operators;
mod plan;
pub mod policy;
pub mod rule;
pub mod ruleset;
pub mod transaction;
pub mod transforms;
pub mod variables;

pub use collections::{
    CollectionError, CollectionReader, MemoryStore, RecordKey, RecordWrite, StoredRecord, VarOp,
};
pub use config::{EngineConfig, RuleEngineMode};
pub use error::{LoadError, LoadErrors};
pub use events::{Event, Limit, RuleMatch, RuleTime};
pub use intervention::{Intervention, InterventionKind};
pub use lookups::{GeoDb, RblAnswer, RblFailure, RblResolver};
pub use policy::{Policy, PolicyBuilder, PolicyError, PolicyLimits};
pub use ruleset::{Ruleset, RulesetBuilder};
pub use transaction::{
    BodyAppend, BudgetAction, BudgetExceeded, Clock, CpuBudget, CpuMeter, Transaction, TxContext,
};
