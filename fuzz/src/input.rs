//! Reading structure out of a fuzz input: a few control bytes up front, then data.
//!
//! The targets take their choices (which transformation, which separator, where to
//! split) from the first bytes of the input, so that libFuzzer's mutations of those
//! bytes explore the choices and its coverage feedback keeps the useful ones.

/// A cursor over a fuzz input.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    rest: &'a [u8],
}

impl<'a> Input<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Input { rest: data }
    }

    /// The next byte, or 0 when the input is used up.
    pub fn byte(&mut self) -> u8 {
        match self.rest.split_first() {
            Some((&b, rest)) => {
                self.rest = rest;
                b
            }
            None => 0,
        }
    }

    /// A number in `0..n` taken from the next byte (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n.max(1)
    }

    /// The bytes up to the first `delimiter` (which is skipped), or all that is left.
    pub fn until(&mut self, delimiter: u8) -> &'a [u8] {
        match self.rest.iter().position(|&b| b == delimiter) {
            Some(at) => {
                let (head, tail) = self.rest.split_at(at);
                self.rest = &tail[1..];
                head
            }
            None => std::mem::take(&mut self.rest),
        }
    }

    /// Whether the input is used up.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Everything that is left.
    pub fn rest(self) -> &'a [u8] {
        self.rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_bytes_then_pieces() {
        let mut input = Input::new(b"\x07ab|cd|e");
        assert_eq!(input.below(4), 3);
        assert_eq!(input.until(b'|'), b"ab");
        assert_eq!(input.until(b'|'), b"cd");
        assert_eq!(input.until(b'|'), b"e");
        assert_eq!(input.until(b'|'), b"");
        assert_eq!(input.byte(), 0);
    }
}
