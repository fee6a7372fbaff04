//! `@pm`, `@pmFromFile` / `@pmf`: phrase matching and the prefilter's unions of
//! phrase lists, from the `patternsets` crate (its [`pm` module](patternsets::pm)
//! documents the argument and data file syntax).

pub use patternsets::pm::{
    ListsSoFar, ListsWalk, MAX_DFA_BYTES, PhraseLists, Pm, Rows, RowsGuard, data_file_lines,
    is_c_space, numbered_data_file_lines, parse_inline,
};
