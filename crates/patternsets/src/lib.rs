//! Many patterns at once, over the single-pattern matcher of [`rxlinear`]: sets of
//! translated `@rx` patterns that answer "which of them match this value" (gated by
//! required factors, or one lazy DFA over all of them), and unions of `@pm` phrase
//! lists walked in one Aho-Corasick pass.
//!
//! The modules depend on each other one way: [`along`] (the trait a set's walk feeds
//! bytes through) and [`error`] depend on none; [`pm`] on those two; [`rx_set`] on
//! all three.

pub mod along;
pub mod error;
pub mod pm;
pub mod rx_set;

pub use error::SetError;
pub use pm::{PhraseLists, Pm};
pub use rx_set::RxSet;
