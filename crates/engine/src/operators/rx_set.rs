//! Sets of translated `@rx` patterns for the prefilter: the `patternsets` crate's
//! [`RxSet`] and what goes with it (its [`rx_set` module](patternsets::rx_set)
//! documents how a set answers).

pub use patternsets::rx_set::{ByteSet, FULL_SET_MIN_LEN, MEMO_CAPACITY, RxSet};
