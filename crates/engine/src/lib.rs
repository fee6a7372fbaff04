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

// The public surface: the modules a server and a store need, and the types
// re-exported below. Everything else is private; `internals` opens it for the
// engine's own benchmarks, examples, integration tests and fuzz targets.
mod actions;
mod body;
pub mod civil;
pub mod collections;
pub mod config;
mod error;
pub mod events;
mod inputs;
mod intervention;
pub mod log;
pub mod lookups;
mod macros;
mod operators;
mod plan;
mod policy;
mod rule;
mod ruleset;
mod transaction;
mod transforms;
mod variables;

/// Opens each of the named private modules inside `internals`.
macro_rules! open_modules {
    ($($m:ident),* $(,)?) => {
        $(
            #[doc = concat!("The engine's `", stringify!($m), "` module.")]
            pub mod $m {
                pub use crate::$m::*;
            }
        )*
    };
}

/// The engine's inner modules, for its benchmarks, examples, integration tests and
/// fuzz targets only: no stable interface, not for servers (they use the crate
/// root).
#[doc(hidden)]
pub mod internals {
    open_modules!(
        actions,
        body,
        inputs,
        macros,
        operators,
        policy,
        rule,
        ruleset,
        transaction,
        transforms,
        variables,
    );
}

pub use actions::CollectionKind;
pub use collections::{
    CollectionError, CollectionReader, MemoryStore, RecordKey, RecordWrite, StoredRecord, VarOp,
};
pub use config::{EngineConfig, RuleEngineMode};
pub use error::{LoadError, LoadErrors};
pub use events::{Event, Limit, RuleMatch, RuleTime};
pub use intervention::{Intervention, InterventionKind};
pub use lookups::{GeoDb, RblAnswer, RblFailure, RblResolver};
pub use operators::ip::{IpSet, IpSetBuilder};
pub use policy::{Policy, PolicyBuilder, PolicyError, PolicyLimits};
pub use rule::{Rule, RuleMeta, RuleOperator};
pub use ruleset::{RblUse, Ruleset, RulesetBuilder};
pub use transaction::{
    BodyAppend, BudgetAction, BudgetExceeded, Clock, CpuBudget, CpuMeter, Transaction, TxContext,
};
