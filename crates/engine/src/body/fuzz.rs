//! Test helpers: a reproducible pseudo-random mutator for fuzz-style tests of the
//! body processors (no dependency needed).

/// A xorshift64 generator.
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A copy of `seed` with one to six random edits: deletions, random bytes, inserted
/// `pieces` (syntax that matters to the format), bit flips and duplicated runs.
pub(crate) fn mutate(rng: &mut XorShift, seed: &[u8], pieces: &[&[u8]]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(6) {
        let at = rng.below(v.len() + 1);
        match rng.below(5) {
            0 if !v.is_empty() => {
                let end = (at + rng.below(8)).min(v.len());
                v.drain(at.min(end)..end);
            }
            1 => v.insert(at, rng.next() as u8),
            2 if !pieces.is_empty() => {
                let piece = pieces[rng.below(pieces.len())];
                v.splice(at..at, piece.iter().copied());
            }
            3 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            _ => {
                let end = (at + rng.below(64)).min(v.len());
                let copy = v[at..end].to_vec();
                v.splice(at..at, copy);
            }
        }
    }
    v
}
