//! Many patterns at once, over the single-pattern matcher of [`rxlinear`]: sets of
//! translated `@rx` patterns that answer "which of them match this value" (gated by
//! required factors, or one lazy DFA over all of them), and unions of `@pm` phrase
//! lists walked in one Aho-Corasick pass.
//!
//! The modules depend on each other one way: [`along`] (the trait a set's walk feeds
//! bytes through) depends on none; [`pm`] on `along`; [`rx_set`] on both.

pub mod along;
pub mod pm;
pub mod rx_set;

pub use pm::{PhraseLists, Pm};
pub use rx_set::RxSet;
