//! `@rx`: PCRE-syntax patterns run by a linear-time engine. The matcher, the
//! translator and the exact evaluations are the `rxlinear` crate's (the semantics are
//! documented at the top of `crates/rxlinear/src/rx.rs`); this module names what the
//! engine uses of them.

pub use rxlinear::{
    DFA_CACHE_CAPACITY, MAX_CAPTURES, REGEX_SIZE_LIMIT, Rx, SET_CACHE_CAPACITY, builder,
    fill_captures, parse_hir, translate,
};
