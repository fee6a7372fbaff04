//! Eight bytes at a time in a `u64` ("SIMD within a register"): tests on every byte of a
//! word at once, for the walks that look for the next byte a transformation acts on.
//!
//! Each test sets the top bit of a byte of its result exactly where that byte of the
//! word passes it (no false positives: the arithmetic never carries from one byte into
//! the next), so [`first`] of a result is the index of the first byte that passes.

/// The low seven bits of every byte.
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// The top bit of every byte.
const HIGH: u64 = 0x8080_8080_8080_8080;

/// `b` in every byte.
#[inline(always)]
const fn splat(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

/// The eight bytes of `input` from `at`, the first in the low byte.
#[inline(always)]
pub(super) fn load(input: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&input[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Top bit set in the bytes of `v` that are zero.
#[inline(always)]
fn zero(v: u64) -> u64 {
    !(((v & LOW7) + LOW7) | v | LOW7)
}

/// Top bit set in the bytes of `v` equal to `b`.
#[inline(always)]
pub(super) fn eq(v: u64, b: u8) -> u64 {
    zero(v ^ splat(b))
}

/// Top bit set in the bytes of `v` below `n` (`n <= 128`).
#[inline(always)]
pub(super) fn lt(v: u64, n: u8) -> u64 {
    !((v & LOW7) + splat(0x80 - n)) & !v & HIGH
}

/// Top bit set in the bytes of `v` from `lo` to `hi` inclusive (`lo <= hi < 128`).
#[inline(always)]
pub(super) fn within(v: u64, lo: u8, hi: u8) -> u64 {
    lt(v, hi + 1) & !lt(v, lo)
}

/// Index of the first byte marked in `mask` (8 when none is).
#[inline(always)]
pub(super) fn first(mask: u64) -> usize {
    (mask.trailing_zeros() / 8) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each test, on words made of every byte value at every place, marks exactly the
    /// bytes the byte-wise test passes.
    #[test]
    fn tests_agree_with_byte_tests() {
        let mut rng = crate::body::fuzz::XorShift(0x5a5a_0001_0002_0003);
        for round in 0..20_000u32 {
            let mut bytes = rng.next().to_le_bytes();
            // Every byte value, in every place, next to random neighbours.
            bytes[(round % 8) as usize] = (round / 8 % 256) as u8;
            let v = u64::from_le_bytes(bytes);
            let c = (round / 7 % 256) as u8;
            let n = (round / 5 % 129) as u8;
            let (lo, hi) = ((round / 3 % 128) as u8, (round / 11 % 128) as u8);
            let (lo, hi) = (lo.min(hi), lo.max(hi));
            for (k, &b) in bytes.iter().enumerate() {
                let bit = |m: u64| m >> (8 * k) & 0xff;
                assert_eq!(bit(eq(v, c)), if b == c { 0x80 } else { 0 });
                assert_eq!(bit(lt(v, n)), if b < n { 0x80 } else { 0 });
                assert_eq!(
                    bit(within(v, lo, hi)),
                    if (lo..=hi).contains(&b) { 0x80 } else { 0 }
                );
            }
            let m = eq(v, c);
            assert_eq!(first(m), bytes.iter().position(|&b| b == c).unwrap_or(8));
        }
    }
}
