//! PCRE patterns run in linear time: the translator from PCRE's syntax (as
//! ModSecurity compiles it) to the `regex` crate's, the exact evaluations of the few
//! PCRE features that a linear-time engine can still answer (lookarounds of bounded
//! length, possessive quantifiers, one table of backreferences), the required
//! factors and byte sets a pattern implies, preimages of a pattern under
//! transformations, and [`Rx`], the single-pattern matcher built from all of these.
//!
//! The modules depend on each other one way: [`vocab`] (settings, marker names,
//! [`ByteSet`]) depends on none; [`translate`], [`compat`], [`factors`] and
//! [`preimage`] on `vocab` alone; [`rx`] on all of them.

pub mod compat;
pub mod factors;
pub mod preimage;
pub mod rx;
pub mod translate;
pub mod vocab;

pub use preimage::Effect;
pub use rx::{Rx, translate};
pub use vocab::{ByteSet, Captures, MAX_CAPTURES, RxError, builder};
