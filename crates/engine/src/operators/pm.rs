//! `@pm`, `@pmFromFile` / `@pmf`: phrase matching and the prefilter's unions of
//! phrase lists, from the `patternsets` crate (`crates/patternsets/src/pm.rs`
//! documents the argument and data file syntax).

pub use patternsets::{
    ListsSoFar, ListsWalk, MAX_DFA_BYTES, PhraseLists, Pm, Rows, RowsGuard, data_file_lines,
    is_c_space, numbered_data_file_lines, parse_inline,
};
