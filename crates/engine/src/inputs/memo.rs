//! A per-thread memo of the detect stage's work on request header values.
//!
//! The same header values come back request after request (a browser's User-Agent,
//! Accept and Accept-Language, an API client's Authorization scheme); the detectors
//! are pure functions of the value, so what they found in a value once holds for
//! every later request that carries it. A header value's candidates, the detections
//! run on it and their answers, and whether it decodes to anything, are kept here
//! when its transaction ends, and taken back when the value arrives again.
//!
//! Bounded: values of at most [`MAX_VALUE`] bytes, at most [`CAPACITY`] of them per
//! generation, two generations per thread (a value found in the old one moves to the
//! current one; when the current one is full, the old one is dropped). The maps hash
//! with std's keyed SipHash, so a client cannot aim values at one bucket.

use std::cell::RefCell;
use std::collections::HashMap;

/// The longest header value kept.
pub(super) const MAX_VALUE: usize = 512;

/// Values per generation.
const CAPACITY: usize = 2048;

/// What the detect stage knows of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Known {
    /// [`detect::candidates`] of the value.
    pub candidates: detect::ClassSet,
    /// The detections run on it (the bits of `Entry::checked`).
    pub checked: u16,
    /// Which of them found something.
    pub found: u16,
    /// Whether the decode stage found a decoding of it.
    pub decodes: bool,
}

#[derive(Default)]
struct Memo {
    current: HashMap<Box<[u8]>, Known>,
    old: HashMap<Box<[u8]>, Known>,
}

thread_local! {
    static MEMO: RefCell<Memo> = RefCell::new(Memo::default());
}

/// What is known of `value`, if it was seen on this thread lately.
pub(super) fn get(value: &[u8]) -> Option<Known> {
    MEMO.with_borrow_mut(|m| {
        if let Some(k) = m.current.get(value) {
            return Some(*k);
        }
        let k = m.old.remove(value)?;
        insert(m, value, k);
        Some(k)
    })
}

/// Keeps what the transaction learned of `value`.
pub(super) fn put(value: &[u8], known: Known) {
    if value.len() > MAX_VALUE {
        return;
    }
    MEMO.with_borrow_mut(|m| {
        if let Some(k) = m.current.get_mut(value) {
            *k = known;
        } else {
            insert(m, value, known);
        }
    });
}

fn insert(m: &mut Memo, value: &[u8], known: Known) {
    if m.current.len() >= CAPACITY {
        m.old = std::mem::take(&mut m.current);
    }
    m.current.insert(value.into(), known);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_found_again() {
        let k = Known {
            candidates: detect::candidates(b"x;y"),
            checked: 3,
            found: 1,
            decodes: false,
        };
        put(b"ua-0", k);
        assert_eq!(get(b"ua-0"), Some(k));
        assert_eq!(get(b"never seen"), None);
        put(&[b'a'; MAX_VALUE + 1], k);
        assert_eq!(get(&[b'a'; MAX_VALUE + 1]), None);
        // Past two generations the first value is gone; the memo never holds more.
        for i in 0..CAPACITY * 2 + 1 {
            put(format!("v{i}").as_bytes(), k);
        }
        assert_eq!(get(b"ua-0"), None);
        MEMO.with_borrow(|m| assert!(m.current.len() + m.old.len() <= 2 * CAPACITY));
    }
}
