//! The vocabulary the rest of the crate shares, one way: the settings every
//! translated pattern is parsed and compiled with, the translator's output
//! ([`Translation`]) and its marker group names, byte sets, and the helpers that fill
//! captures and word errors. Nothing here depends on another module of the crate.

use regex::bytes::RegexBuilder;
use regex_syntax::ParserBuilder;
use regex_syntax::hir::{Class, Hir, HirKind};

/// Values captured by a match, for `capture` (TX.0 to TX.9). Index 0 is the whole match.
pub type Captures = Vec<Vec<u8>>;

/// Upper bound for the compiled size of one `@rx` program (and of one prefilter set):
/// generous enough for the largest CRS patterns, bounded so that a hostile rule file
/// cannot exhaust memory.
pub const REGEX_SIZE_LIMIT: usize = 64 * 1024 * 1024;

/// Capacity of one lazy DFA cache of an `@rx` regex. Every thread that runs a regex
/// gets its own caches, which grow as the lazy DFA meets new states up to this size,
/// and are then cleared and refilled; a regex whose cache is cleared too often falls
/// back to a slower engine (the PikeVM). This is the `regex` crate's default (it was
/// 64 MiB here before, which let caches grow without practical bound under load).
pub const DFA_CACHE_CAPACITY: usize = 2 * 1024 * 1024;

/// Maximum number of values an `@rx` capture fills (`TX.0` to `TX.9`).
pub const MAX_CAPTURES: usize = 10;

/// Why a pattern cannot be compiled. The text of each is the reason, as the `@rx`
/// operator reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RxError {
    /// The (translated) pattern is not a regular expression the `regex` crate reads;
    /// the parser's or compiler's message.
    #[error("invalid regular expression: {0}")]
    Invalid(String),
    /// The compiled form would exceed this many bytes ([`REGEX_SIZE_LIMIT`]).
    #[error("pattern too large: its compiled form exceeds {0} bytes")]
    TooLarge(usize),
    /// The PCRE pattern cannot be translated, or not run in linear time here (a
    /// feature that needs backtracking, a `^` PCRE reads otherwise, ...); the reason.
    #[error("{0}")]
    Refused(String),
}

/// Parses a translated pattern with the settings of [`builder`].
pub fn parse_hir(pattern: &str) -> Result<Hir, RxError> {
    ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .dot_matches_new_line(true)
        .multi_line(true)
        .build()
        .parse(pattern)
        .map_err(|e| RxError::Invalid(e.to_string()))
}

/// Replaces the content of `out` with `values`, reusing its allocations.
pub fn fill_captures<'a>(out: &mut Captures, values: impl Iterator<Item = &'a [u8]>) {
    let mut count = 0;
    for value in values {
        if let Some(slot) = out.get_mut(count) {
            slot.clear();
            slot.extend_from_slice(value);
        } else {
            out.push(value.to_vec());
        }
        count += 1;
    }
    out.truncate(count);
}

/// A [`RegexBuilder`] with the settings every `@rx` pattern is compiled with:
/// Unicode off, `.` matches `\n`, multi-line anchors, [`REGEX_SIZE_LIMIT`] and
/// [`DFA_CACHE_CAPACITY`]. `pattern` must already be translated ([`translate`](crate::translate)).
pub fn builder(pattern: &str) -> RegexBuilder {
    let mut b = RegexBuilder::new(pattern);
    b.unicode(false)
        .dot_matches_new_line(true)
        .multi_line(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(DFA_CACHE_CAPACITY);
    b
}

/// The reason a `regex` crate error gives, worded as the `@rx` errors are.
pub fn regex_error(e: regex::Error) -> String {
    match e {
        regex::Error::CompiledTooBig(limit) => {
            format!("pattern too large: its compiled form exceeds {limit} bytes")
        }
        regex::Error::Syntax(msg) => format!("invalid regular expression: {msg}"),
        other => format!("invalid regular expression: {other}"),
    }
}

/// The end of every refusal of a feature that needs backtracking.
pub const BACKTRACKING: &str = "needs a backtracking regex engine, which Palisade refuses \
     (only linear-time regexes are allowed)";

/// What the translator produced.
#[derive(Debug)]
pub struct Translation {
    /// The pattern in `regex` syntax, with lookarounds left out (read as always
    /// true), possessive quantifiers and atomic groups read as greedy ones, and each
    /// backreference replaced by a copy of its group's sub-pattern. A value that
    /// matches the PCRE pattern matches this one (it is exact when the pattern has
    /// none of these features).
    pub pattern: String,
    /// Offsets in `pattern` of the `^` assertions.
    pub carets: Vec<usize>,
    /// When the pattern has lookarounds, possessive quantifiers or atomic groups:
    /// `pattern` with marker groups (see [`MARK_LOOK`], [`MARK_POSSESSIVE`],
    /// [`MARK_ATOMIC`]) that give their place and content, for the analyses of
    /// `compat`. Marker groups are capture groups, so group numbers in this
    /// pattern are not the PCRE ones.
    pub marked: Option<String>,
    /// The kind of each lookaround, by marker number.
    pub lookarounds: Vec<LookKind>,
    /// Whether the pattern has possessive quantifiers or atomic groups.
    pub possessive: bool,
    /// The refusal for the first backreference, if any: backreferences are only run
    /// for the patterns of the table in `compat`.
    pub backreference: Option<String>,
}

/// Name prefix of the marker group that holds the content of lookaround number N
/// (`palisade.look.N`). PCRE group names are made of word characters only, so no
/// translated name can take this form.
pub const MARK_LOOK: &str = "palisade.look.";
/// Name prefix of the empty marker group that follows a possessive repetition.
pub const MARK_POSSESSIVE: &str = "palisade.possessive.";
/// Name prefix of the marker group that replaces an atomic group `(?>...)`.
pub const MARK_ATOMIC: &str = "palisade.atomic.";

/// The four kinds of PCRE lookaround.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookKind {
    /// `(?=...)`
    Ahead,
    /// `(?!...)`
    NotAhead,
    /// `(?<=...)`
    Behind,
    /// `(?<!...)`
    NotBehind,
}

impl LookKind {
    /// Whether the lookaround looks at the bytes before the current position.
    pub fn is_behind(self) -> bool {
        matches!(self, LookKind::Behind | LookKind::NotBehind)
    }

    /// Whether the lookaround succeeds when its content matches.
    pub fn is_positive(self) -> bool {
        matches!(self, LookKind::Ahead | LookKind::Behind)
    }
}

/// A set of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ByteSet([u64; 4]);

impl ByteSet {
    /// No byte.
    pub const EMPTY: ByteSet = ByteSet([0; 4]);

    /// Every byte.
    pub const ALL: ByteSet = ByteSet([u64::MAX; 4]);

    /// Adds the bytes `lo..=hi`.
    pub fn insert_range(&mut self, lo: u8, hi: u8) {
        for b in lo..=hi {
            self.insert(b);
        }
    }

    /// Adds one byte.
    pub fn insert(&mut self, b: u8) {
        self.0[usize::from(b >> 6)] |= 1 << (b & 63);
    }

    /// The bytes that occur in `input`. Marks a table of 256 flags first (one
    /// independent store a byte) and packs it once.
    pub fn of_bytes(input: &[u8]) -> ByteSet {
        let mut seen = [false; 256];
        for &b in input {
            seen[usize::from(b)] = true;
        }
        let mut set = ByteSet::default();
        for (b, _) in seen.iter().enumerate().filter(|(_, s)| **s) {
            set.insert(b as u8);
        }
        set
    }

    /// Whether `b` is in the set.
    pub fn contains(&self, b: u8) -> bool {
        self.0[usize::from(b >> 6)] & (1 << (b & 63)) != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// The union of two sets.
    pub fn union(&self, other: &ByteSet) -> ByteSet {
        let mut out = *self;
        for (a, b) in out.0.iter_mut().zip(other.0) {
            *a |= b;
        }
        out
    }

    /// Whether the two sets share a byte.
    pub fn intersects(&self, other: &ByteSet) -> bool {
        self.0.iter().zip(other.0).any(|(a, b)| a & b != 0)
    }

    /// The bytes of a one-byte HIR item (a class, or a literal of one byte), or
    /// `None` for anything else.
    pub fn of_item(hir: &Hir) -> Option<ByteSet> {
        let mut set = ByteSet::default();
        match hir.kind() {
            HirKind::Literal(lit) if lit.0.len() == 1 => set.insert(lit.0[0]),
            HirKind::Class(Class::Bytes(c)) => {
                for r in c.ranges() {
                    set.insert_range(r.start(), r.end());
                }
            }
            HirKind::Class(Class::Unicode(c)) => {
                for r in c.ranges() {
                    let (lo, hi) = (u32::from(r.start()), u32::from(r.end()));
                    if hi > 0x7F {
                        return None;
                    }
                    set.insert_range(lo as u8, hi as u8);
                }
            }
            _ => return None,
        }
        Some(set)
    }
}
