//! The inner loop shared by the automaton walks that keep their own table of
//! transitions (the prefilter's set of all patterns, `rx_set`, and the `@pm` union,
//! `pm`): one table read a byte, one compare, no bounds check.
//!
//! A table is [`ENTRIES`] `u32` entries, a power of two, allocated zeroed (so the
//! pages of rows never used are never touched). Its rows are a power-of-two number of
//! columns wide, one per byte class, and are named by their offset (row number times
//! width, "premultiplied"). An entry is the next row's offset, or a value with
//! [`FLAG`] set that the walk must stop at: a transition not taken yet
//! ([`UNKNOWN`]) or one into a state that needs attention (a match state, a dead
//! one). Indices are masked with `ENTRIES - 1`, which costs one `and` instead of a
//! bounds check; a row offset plus a column is always below `ENTRIES`, so the mask
//! never changes an index.

/// Entries of a table (2 MiB of `u32`).
pub(crate) const ENTRIES: usize = 1 << 19;

/// Set in an entry the walk stops at.
pub(crate) const FLAG: u32 = 1 << 31;

/// An entry whose transition is not known yet.
pub(crate) const UNKNOWN: u32 = u32::MAX;

/// A table of [`ENTRIES`] entries, zeroed.
pub(crate) fn new_table() -> Box<[u32; ENTRIES]> {
    vec![0u32; ENTRIES]
        .into_boxed_slice()
        .try_into()
        .unwrap_or_else(|_| unreachable!("the vector has ENTRIES entries"))
}

/// Walks `bytes` from row offset `at` while the entries met have no [`FLAG`]:
/// returns how many bytes were consumed, the row offset reached, and the flagged
/// entry met at the next byte (meaningless when every byte was consumed).
#[inline(always)]
pub(crate) fn run(
    table: &[u32; ENTRIES],
    classes: &[u8; 256],
    mut at: usize,
    bytes: &[u8],
) -> (usize, usize, u32) {
    let step =
        |at: usize, b: u8| table[(at + usize::from(classes[usize::from(b)])) & (ENTRIES - 1)];
    // Eight bytes a round (the loop's own count and compare spread over them).
    let mut chunks = bytes.chunks_exact(8);
    let mut done = 0;
    for c in &mut chunks {
        for (k, &b) in c.iter().enumerate() {
            let t = step(at, b);
            if t >= FLAG {
                return (done + k, at, t);
            }
            at = t as usize;
        }
        done += 8;
    }
    for &b in chunks.remainder() {
        let t = step(at, b);
        if t >= FLAG {
            return (done, at, t);
        }
        at = t as usize;
        done += 1;
    }
    (done, at, 0)
}
