//! A lazily allocating output buffer for transformations.
//!
//! Most transformations, on most values, change nothing. `Out` tracks the output as a
//! prefix of the input for as long as every byte written equals the input byte at the same
//! position, and only allocates once the output first differs. The result is then either a
//! borrowed prefix of the input (no copy at all) or an owned vector.

use std::borrow::Cow;

/// Output under construction: a prefix of `input` until the first byte that differs.
pub(super) struct Out<'a> {
    input: &'a [u8],
    /// Length of the output while it is still `input[..len]`.
    len: usize,
    /// The owned output, once it differs from the input prefix.
    owned: Option<Vec<u8>>,
}

impl<'a> Out<'a> {
    /// Starts an empty output over `input`.
    #[inline]
    pub(super) fn new(input: &'a [u8]) -> Self {
        Out {
            input,
            len: 0,
            owned: None,
        }
    }

    /// Switches to an owned buffer holding the current output.
    #[cold]
    fn make_owned(&mut self) -> &mut Vec<u8> {
        let mut v = Vec::with_capacity(self.input.len() + 8);
        v.extend_from_slice(&self.input[..self.len]);
        self.owned.insert(v)
    }

    /// Appends one byte.
    #[inline]
    pub(super) fn push(&mut self, b: u8) {
        match &mut self.owned {
            Some(v) => v.push(b),
            None => {
                if self.input.get(self.len) == Some(&b) {
                    self.len += 1;
                } else {
                    self.make_owned().push(b);
                }
            }
        }
    }

    /// Appends `input[start..end]`: free while the output is still a prefix of the input and
    /// `start` is where it ends.
    #[inline]
    pub(super) fn copy_input(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        match &mut self.owned {
            Some(v) => v.extend_from_slice(&self.input[start..end]),
            None => {
                if start == self.len {
                    self.len = end;
                } else {
                    let input = self.input;
                    self.make_owned().extend_from_slice(&input[start..end]);
                }
            }
        }
    }

    /// Appends arbitrary bytes.
    #[inline]
    pub(super) fn extend(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(b);
        }
    }

    /// Removes the last byte written, if any (for the byte-wise reference of `cmdLine`).
    #[cfg(test)]
    pub(super) fn pop(&mut self) {
        match &mut self.owned {
            Some(v) => {
                v.pop();
            }
            None => self.len = self.len.saturating_sub(1),
        }
    }

    /// Finishes: a borrowed prefix of the input when nothing differed, else the owned bytes.
    #[inline]
    pub(super) fn finish(self) -> Cow<'a, [u8]> {
        match self.owned {
            Some(v) => Cow::Owned(v),
            None => Cow::Borrowed(&self.input[..self.len]),
        }
    }
}

/// Output under construction once it is known to differ from the input, for the walks
/// over values dense with what a transformation changes: a buffer sized once for the
/// whole output (`cap` bytes, never grown) and a write index, so a byte written is one
/// store and one bounds check, not `Vec::push`'s capacity test nor [`Out`]'s prefix
/// tracking.
pub(super) struct Dense<'a> {
    input: &'a [u8],
    /// Length of the prefix copied from the input unchanged at the start.
    from: usize,
    buf: Vec<u8>,
    w: usize,
}

impl<'a> Dense<'a> {
    /// An output that starts with `input[..from]`, with room for `cap` bytes in all
    /// (`cap >= from`; writing past `cap` panics).
    #[inline]
    pub(super) fn new(input: &'a [u8], from: usize, cap: usize) -> Self {
        let mut buf = vec![0u8; cap];
        buf[..from].copy_from_slice(&input[..from]);
        Dense {
            input,
            from,
            buf,
            w: from,
        }
    }

    /// The buffer and the write index, for a loop that writes bytes itself (it must
    /// leave the index just past the last byte it wrote).
    #[inline(always)]
    pub(super) fn parts(&mut self) -> (&mut [u8], &mut usize) {
        (&mut self.buf, &mut self.w)
    }

    /// Finishes as [`Out::finish`] would have: a borrowed prefix of the input when the
    /// output is one (every byte written equals the input's at its place), else the
    /// owned bytes.
    pub(super) fn finish(mut self) -> Cow<'a, [u8]> {
        let w = self.w;
        if w <= self.input.len() && self.buf[self.from.min(w)..w] == self.input[self.from.min(w)..w]
        {
            return Cow::Borrowed(&self.input[..w]);
        }
        self.buf.truncate(w);
        Cow::Owned(self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_borrowed_while_equal() {
        let input = b"abcdef";
        let mut o = Out::new(input);
        o.push(b'a');
        o.copy_input(1, 4);
        o.push(b'e');
        let r = o.finish();
        assert!(matches!(r, Cow::Borrowed(_)));
        assert_eq!(&*r, b"abcde");
    }

    #[test]
    fn switches_to_owned_on_difference() {
        let input = b"abcdef";
        let mut o = Out::new(input);
        o.copy_input(0, 2);
        o.push(b'X');
        o.copy_input(3, 5);
        let r = o.finish();
        assert!(matches!(r, Cow::Owned(_)));
        assert_eq!(&*r, b"abXde");
    }

    #[test]
    fn dense_borrows_a_prefix_like_out() {
        let input = b"abcdef";
        let mut d = Dense::new(input, 2, input.len());
        let (buf, w) = d.parts();
        buf[2..5].copy_from_slice(b"cde");
        *w = 5;
        assert!(matches!(d.finish(), Cow::Borrowed(b"abcde")));
        let mut d = Dense::new(input, 1, input.len());
        let (buf, w) = d.parts();
        buf[1..3].copy_from_slice(b"bY");
        *w = 3;
        assert_eq!(&*d.finish(), b"abY");
    }

    #[test]
    fn non_contiguous_copy_goes_owned() {
        let input = b"abcdef";
        let mut o = Out::new(input);
        o.copy_input(2, 4);
        assert_eq!(&*o.finish(), b"cd");
    }
}
