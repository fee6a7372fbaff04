//! `@rx`: PCRE patterns translated for a linear-time engine, and the exact
//! evaluation of what needs rewriting (lookarounds, possessive quantifiers, atomic
//! groups), compiled and run on data.
//!
//! Input: a control byte, then the pattern and the value. With an even control
//! byte the pattern is the text up to the first NUL byte; with an odd one it is
//! built from the next bytes, each picking a piece of PCRE syntax from [`PIECES`]
//! (up to a 0xFF byte), which reaches the rewritten features far more often than
//! raw text does. The value is the rest.
//!
//! Compiling may refuse a pattern but never panic; a compiled pattern must give the
//! same verdict with and without captures, captures that are parts of the value,
//! and a verdict the translated pattern (a superset) agrees with. The engine's search
//! of the translated pattern (with its own prefix prefilter, when it has one) must
//! find the match the `regex` crate finds with the same settings and its own
//! optimisations. The time limit of the fuzzer catches a pattern that runs in more
//! than linear time.

use crate::input::Input;
use engine::internals::operators::Captures;
use engine::internals::operators::rx::{MAX_CAPTURES, Rx, builder};

/// Pieces of PCRE syntax, weighted towards what `rxlinear::compat` rewrites.
pub const PIECES: &[&str] = &[
    "a",
    "b",
    "ab",
    "x",
    "\\n",
    "\\s",
    "\\S",
    "\\w",
    "\\W",
    "\\d",
    ".",
    "[ab]",
    "[^a]",
    "[a-z]",
    "[\\s'\"]",
    "\\b",
    "^",
    "$",
    "\\A",
    "\\z",
    "(",
    "(?:",
    "(?i)",
    "(?i:",
    ")",
    "|",
    "*",
    "+",
    "?",
    "*?",
    "+?",
    "{2}",
    "{1,3}",
    "{2,}",
    "*+",
    "++",
    "?+",
    "{1,3}+",
    "{2,}+",
    "(?>",
    "(?=",
    "(?!",
    "(?<=",
    "(?<!",
    "\\x{41}",
    "\\x00",
    "\\Qa.b\\E",
    "\\h",
    "\\v",
    "\\R",
    "\\1",
    "\\K",
    "[\\x80-\\xff]",
    "\\.",
    "\\$",
];

/// Compiles one pattern and runs it on one value.
pub fn fuzz_rx(data: &[u8]) {
    let mut input = Input::new(data);
    let control = input.byte();
    let pattern = if control & 1 == 0 {
        String::from_utf8_lossy(input.until(0)).into_owned()
    } else {
        let mut p = String::new();
        while !input.is_empty() && p.len() <= 256 {
            let b = input.byte();
            if b == 0xff {
                break;
            }
            p.push_str(PIECES[usize::from(b) % PIECES.len()]);
        }
        p
    };
    let value = input.rest();
    let Ok(rx) = Rx::new(&pattern) else {
        return;
    };
    if let Ok(reference) = builder(rx.pattern()).build() {
        assert_eq!(
            rx.regex().find(value).map(|m| m.range()),
            reference.find(value).map(|m| m.range()),
            "{pattern:?}: the engine's search of {:?} finds another match than the regex crate's",
            rx.pattern()
        );
    }
    let mut caps = Captures::new();
    let with = rx.matches(value, Some(&mut caps));
    let without = rx.matches(value, None);
    assert_eq!(with, without, "{pattern:?}: verdict depends on captures");
    if with {
        assert!(
            (1..=MAX_CAPTURES).contains(&caps.len()),
            "{pattern:?}: {} captures",
            caps.len()
        );
        for c in &caps {
            assert!(
                c.is_empty() || value.windows(c.len()).any(|w| w == c.as_slice()),
                "{pattern:?}: capture {c:?} is not part of the value"
            );
        }
        assert!(
            rx.regex().is_match(value),
            "{pattern:?} matched, but its translation {:?} (a superset) did not",
            rx.pattern()
        );
    }
    if rx.regex_is_exact() && !value.ends_with(b"\n") {
        assert_eq!(
            with,
            rx.regex().is_match(value),
            "{pattern:?}: an exact translation {:?} disagrees",
            rx.pattern()
        );
    }
}
