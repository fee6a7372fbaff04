//! PCRE patterns run in linear time: the translator from PCRE's syntax (as
//! ModSecurity compiles it) to the `regex` crate's, the exact evaluations of the few
//! PCRE features that a linear-time engine can still answer (lookarounds of bounded
//! length, possessive quantifiers, one table of backreferences), the required
//! factors and byte sets a pattern implies, preimages of a pattern under
//! transformations, and [`Rx`], the single-pattern matcher built from all of these.
//!
//! The modules, all private, depend on each other one way: `vocab` (settings,
//! marker names, [`ByteSet`], [`RxError`]) depends on none; `translate` (the
//! translator), `compat` (the exact evaluations), `factors` and `preimage` on `vocab`
//! alone; `rx` (the matcher) on all of them. What other crates use is re-exported
//! here.

mod compat;
mod factors;
mod preimage;
mod rx;
mod translate;
mod vocab;

pub use factors::{required_bytes, required_factors, set_chance};
pub use preimage::Effect;
pub use rx::{Rx, SET_CACHE_CAPACITY, compile, compile_hir, translate};
pub use vocab::{
    ByteSet, Captures, DFA_CACHE_CAPACITY, MAX_CAPTURES, REGEX_SIZE_LIMIT, RxError, builder,
    fill_captures, parse_hir,
};
