//! The one trait the set walks and the phrase walks share: a set's walk over a value
//! can feed each byte it reads to another walk. The sets ([`rx_set`](crate::rx_set))
//! and the phrase lists ([`pm`](crate::pm)) both depend on this module, and it on
//! neither.

/// Another automaton's walk over the same value, fed each byte a set's walk reads (see
/// [`RxSet::try_which_match_along`](crate::RxSet::try_which_match_along)): each walk is a chain of table reads that waits
/// on its last, so two chains stepped together overlap. The walk is moved in and
/// handed back, so that its state can live in registers while the bytes go by.
pub trait Along {
    /// Walks one more byte.
    fn step(&mut self, b: u8);
}

/// No other walk.
impl Along for () {
    #[inline(always)]
    fn step(&mut self, _: u8) {}
}
