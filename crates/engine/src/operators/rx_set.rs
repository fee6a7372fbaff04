//! Sets of translated `@rx` patterns for the prefilter: the `patternsets` crate's
//! [`RxSet`] and what goes with it (`crates/patternsets/src/rx_set.rs` says how a set
//! answers).

pub use patternsets::{ByteSet, FULL_SET_MIN_LEN, MEMO_CAPACITY, RxSet};
