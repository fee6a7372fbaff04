//! Many patterns at once, over the single-pattern matcher of [`rxlinear`]: sets of
//! translated `@rx` patterns that answer "which of them match this value" (gated by
//! required factors, or one lazy DFA over all of them), and unions of `@pm` phrase
//! lists walked in one Aho-Corasick pass.
//!
//! The modules, all private, depend on each other one way: `along` (the trait a
//! set's walk feeds bytes through, [`Along`]) and `error` ([`SetError`]) depend on
//! none; `pm` (phrase lists) on those two; `rx_set` (pattern sets) on all three.
//! What other crates use is re-exported here.

mod along;
mod error;
mod pm;
mod rx_set;

pub use along::Along;
pub use error::SetError;
pub use pm::{
    ListsSoFar, ListsWalk, MAX_DFA_BYTES, PhraseLists, Pm, Rows, RowsGuard, data_file_lines,
    is_c_space, numbered_data_file_lines, parse_inline,
};
pub use rx_set::{ByteSet, FULL_SET_MIN_LEN, MEMO_CAPACITY, RxSet};
