//! Test helpers: a reproducible pseudo-random generator and mutator for fuzz-style
//! tests, here and in the crates built on this one (the engine's body processors
//! use them too). No dependency needed, and nothing here runs outside tests.

/// A xorshift64 generator; the seed must not be 0.
pub struct XorShift(pub u64);

impl XorShift {
    /// The next number. (Named like `Iterator::next` on purpose: the generator is
    /// endless, and the tests call it as a plain method.)
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// A value of up to `items - 1` items, each one of `pieces` or, one time in
    /// `byte_one_in` (never when 0), a random byte: the generated inputs of the tests
    /// that hold a fast path to its reference.
    pub fn value_of(&mut self, pieces: &[&[u8]], items: usize, byte_one_in: usize) -> Vec<u8> {
        let mut v = Vec::new();
        for _ in 0..self.below(items) {
            if byte_one_in > 0 && self.below(byte_one_in) == 0 {
                v.push(self.next() as u8);
            } else {
                v.extend_from_slice(pieces[self.below(pieces.len())]);
            }
        }
        v
    }
}

/// Text pieces that put every kind of UTF-8 sequence, valid and cut short, next to
/// each other: for tests of lossy conversions.
pub const UTF8_PIECES: [&[u8]; 8] = [
    b"abc",
    "\u{e9}".as_bytes(),
    "\u{20ac}".as_bytes(),
    "\u{1f600}".as_bytes(),
    b"\xff",
    b"\xc3",
    b"\xe2\x82",
    b"\xf0\x9f\x98",
];

/// A copy of `seed` with one to six random edits: deletions, random bytes, inserted
/// `pieces` (syntax that matters to the format), bit flips and duplicated runs.
pub fn mutate(rng: &mut XorShift, seed: &[u8], pieces: &[&[u8]]) -> Vec<u8> {
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
