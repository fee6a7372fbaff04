//! `@rx`: PCRE-syntax patterns run by a linear-time engine. The matcher, the
//! translator and the exact evaluations are the `rxlinear` crate's (its [`rx`
//! module](rxlinear::rx) documents the semantics); this module names what the
//! engine uses of them.

pub use rxlinear::rx::{Rx, SET_CACHE_CAPACITY, translate};
pub use rxlinear::vocab::{
    DFA_CACHE_CAPACITY, MAX_CAPTURES, REGEX_SIZE_LIMIT, builder, fill_captures, parse_hir,
};
