//! "word, operator, word" patterns with a backreference: the two words must be the
//! same, or differ, depending on the operator (CRS 3.3.4's SQL tautology rule; the
//! reasoning that makes this PCRE's answer is next to its entry in the table of
//! [`super`]).
//!
//! The evaluation walks the word tokens (maximal runs of `[A-Za-z0-9_]`) left to
//! right. For a token `w`, it skips the separators after it, tries the operators in
//! order at that position, skips the separators after the operator, and tests the
//! relation at the position `q` reached:
//!
//! - *same*: the byte before `q` is not a word byte, the bytes at `q` equal `w` up
//!   to ASCII case, and the byte after them is not a word byte (or the value ends);
//!   the match ends after them;
//! - *different*: the byte at `q` is a word byte and *same* does not hold; the
//!   match ends at the end of the run of word bytes at `q`.
//!
//! The first success gives the match: it starts where the separators before the
//! token start, and captures the token as group 1. An operator is a string of
//! bytes compared up to ASCII case, where a space stands for one or more PCRE
//! white space bytes (`\s+`).

use crate::vocab::Captures;
use crate::vocab::{ByteSet, fill_captures};

/// The relation the second word must have with the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relation {
    /// `\b\1\b`
    Same,
    /// `(?!\b\1\b)\w+`
    Different,
}

/// The parameters of one pattern.
#[derive(Debug)]
pub(crate) struct WordRelationSpec {
    /// Bytes that may separate the words and the operator.
    pub separators: &'static [u8],
    /// The operators, in the order PCRE tries them, with their relation.
    pub operators: &'static [(&'static str, Relation)],
}

/// A compiled [`WordRelationSpec`].
#[derive(Debug)]
pub(crate) struct WordRelation {
    spec: &'static WordRelationSpec,
    separator: ByteSet,
    /// For each byte, the operators (indexes, in order) that can start with it.
    by_first: Vec<Vec<usize>>,
}

/// PCRE's `\w` without UTF mode (C locale tables).
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// PCRE's `\s` without UTF mode: space, `\t`, `\n`, VT, `\f`, `\r`.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

impl WordRelation {
    /// Checks the specification. `origin` names the pattern in messages.
    pub(crate) fn new(
        spec: &'static WordRelationSpec,
        origin: &str,
    ) -> Result<WordRelation, String> {
        let mut separator = ByteSet::default();
        for &b in spec.separators {
            separator.insert(b);
        }
        // The proof needs separators that are not word bytes and that no operator
        // starts with, and operators that do not start with a space.
        for (op, _) in spec.operators {
            let first = op.bytes().next();
            if first.is_none_or(|b| separator.contains(b) || b == b' ') {
                return Err(format!("{origin}: operator `{op}` cannot be evaluated"));
            }
        }
        if spec.separators.iter().any(|&b| is_word(b)) {
            return Err(format!("{origin}: a separator is a word byte"));
        }
        let mut by_first = vec![Vec::new(); 256];
        for (i, (op, _)) in spec.operators.iter().enumerate() {
            if let Some(b) = op.bytes().next() {
                by_first[usize::from(b.to_ascii_lowercase())].push(i);
                if b.is_ascii_alphabetic() {
                    by_first[usize::from(b.to_ascii_uppercase())].push(i);
                }
            }
        }
        Ok(WordRelation {
            spec,
            separator,
            by_first,
        })
    }

    /// Whether the pattern matches, with PCRE's captures (whole match and group 1).
    pub(crate) fn matches(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        let Some((start, end, word)) = self.find(input) else {
            return false;
        };
        if let Some(out) = captures {
            fill_captures(
                out,
                [&input[start..end], &input[word.0..word.1]].into_iter(),
            );
        }
        true
    }

    fn skip_separators(&self, input: &[u8], mut at: usize) -> usize {
        while at < input.len() && self.separator.contains(input[at]) {
            at += 1;
        }
        at
    }

    /// PCRE's match: (start, end, group 1).
    fn find(&self, input: &[u8]) -> Option<(usize, usize, (usize, usize))> {
        let mut t = 0;
        while t < input.len() {
            if !is_word(input[t]) {
                t += 1;
                continue;
            }
            // A token starts at `t` (the byte before is not a word byte).
            let e = word_end(input, t);
            let o = self.skip_separators(input, e);
            let candidates = input
                .get(o)
                .map_or(&[][..], |&b| &self.by_first[usize::from(b)]);
            for &k in candidates {
                let (op, relation) = self.spec.operators[k];
                let Some(op_end) = match_operator(op, input, o) else {
                    continue;
                };
                let q = self.skip_separators(input, op_end);
                if let Some(end) = relation_end(relation, input, &input[t..e], q) {
                    let mut start = t;
                    while start > 0 && self.separator.contains(input[start - 1]) {
                        start -= 1;
                    }
                    return Some((start, end, (t, e)));
                }
            }
            t = e;
        }
        None
    }
}

/// The end of the run of word bytes that starts at `at`.
fn word_end(input: &[u8], mut at: usize) -> usize {
    while at < input.len() && is_word(input[at]) {
        at += 1;
    }
    at
}

/// Where operator `op` ends when it starts at `at`.
fn match_operator(op: &str, input: &[u8], mut at: usize) -> Option<usize> {
    for c in op.bytes() {
        if c == b' ' {
            let start = at;
            while at < input.len() && is_space(input[at]) {
                at += 1;
            }
            if at == start {
                return None;
            }
        } else {
            if !input.get(at)?.eq_ignore_ascii_case(&c) {
                return None;
            }
            at += 1;
        }
    }
    Some(at)
}

/// Where the match ends when the second operand, at `q`, has `relation` with
/// `word`.
fn relation_end(relation: Relation, input: &[u8], word: &[u8], q: usize) -> Option<usize> {
    let at_word = input.get(q).is_some_and(|&b| is_word(b));
    if !at_word {
        return None;
    }
    let after = q + word.len();
    let same = q > 0
        && !is_word(input[q - 1])
        && input
            .get(q..after)
            .is_some_and(|w| w.eq_ignore_ascii_case(word))
        && input.get(after).is_none_or(|&b| !is_word(b));
    match relation {
        Relation::Same => same.then_some(after),
        Relation::Different => (!same).then(|| word_end(input, q)),
    }
}
