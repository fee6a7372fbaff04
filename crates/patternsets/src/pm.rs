//! `@pm`, `@pmFromFile` / `@pmf`: case-insensitive multi-phrase matching with an
//! Aho-Corasick automaton built once at load time.
//!
//! Phrases are compared ASCII-case-insensitively, as ModSecurity's own Aho-Corasick
//! matcher does (it lower-cases both sides with the C locale). A capture stores the
//! phrase as written in the rule or data file (ModSecurity reports the phrase, not
//! the input bytes, in `TX.0`).
//!
//! `@pm` argument syntax, as ModSecurity parses it: leading spaces and tabs are
//! skipped; one pair of surrounding double quotes is removed; `|41 42|` spells bytes
//! in hexadecimal (spaces inside ignored); `\:`, `\;`, `\\` and `\"` are escapes for
//! the character itself. If the argument uses any other escape, ModSecurity ignores
//! all of this and splits the raw argument; so does Palisade. The result is then
//! split on whitespace into phrases.
//!
//! Divergence: ModSecurity's `|..|` decoder only accepts the letters `a`-`f` (a bug
//! drops the digits `0`-`9`) and truncates the phrase list at a `|00|` byte; here
//! every hexadecimal digit counts and NUL bytes are kept.
//!
//! Data files: one phrase per line; a trailing `\r` is removed; empty lines, lines
//! of whitespace only and lines whose first non-whitespace character is `#` are
//! skipped. Other lines are phrases byte for byte (leading and trailing spaces kept).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use regex_automata::util::pool::Pool;
use std::sync::Arc;

use rxlinear::{Captures, fill_captures};

use crate::error::SetError;

/// Largest automaton kept as a DFA. The Aho-Corasick crate builds a DFA for phrase
/// lists of up to 100 phrases; case-insensitive lists of long phrases make DFAs of
/// megabytes (CRS v4 has two of 1.7 and 2.4 MiB), where the contiguous NFA takes a
/// tenth of that and answers the same.
pub const MAX_DFA_BYTES: usize = 256 * 1024;

/// An Aho-Corasick automaton over `phrases` that matches them ASCII
/// case-insensitively with standard (overlapping-capable) semantics: a DFA when it
/// stays within [`MAX_DFA_BYTES`], a contiguous NFA otherwise.
pub fn phrase_automaton(phrases: &[Vec<u8>]) -> Result<AhoCorasick, SetError> {
    let build = |kind: Option<AhoCorasickKind>| {
        AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(kind)
            .build(phrases)
            .map_err(|e| SetError::Phrases(e.to_string()))
    };
    let automaton = build(None)?;
    if automaton.kind() == AhoCorasickKind::DFA && automaton.memory_usage() > MAX_DFA_BYTES {
        return build(Some(AhoCorasickKind::ContiguousNFA));
    }
    Ok(automaton)
}

/// An Aho-Corasick automaton over phrases, matched ASCII case-insensitively, for the
/// walks that want to know which phrases occur in a value (each at least once), not
/// where: a DFA when it stays within a given size, a contiguous NFA otherwise (which
/// takes a tenth of the memory and about five times the instructions a byte: its
/// transitions follow failure links).
///
/// [`PhraseWalker::for_each_phrase`] walks the automaton's states itself, one
/// transition a byte, and reports the phrases of each match state it enters. The
/// crate's overlapping iterator answers the same phrases but stops at every match,
/// with a cost per match that on prose (the factors of the prefilter's gated patterns
/// occur every few words) was most of the pass.
#[derive(Debug, Clone)]
pub enum PhraseWalker {
    /// The automaton as a DFA.
    Dfa(aho_corasick::dfa::DFA),
    /// The automaton as a contiguous NFA, for phrase sets whose DFA is too large.
    Nfa(aho_corasick::nfa::contiguous::NFA),
}

impl PhraseWalker {
    /// Builds the automaton over `phrases` (none of them empty), a DFA when that takes
    /// at most `max_dfa_bytes`; the error is a human-readable reason.
    pub fn new(phrases: &[Vec<u8>], max_dfa_bytes: usize) -> Result<PhraseWalker, SetError> {
        use aho_corasick::automaton::Automaton;
        let why = |e: aho_corasick::BuildError| SetError::Phrases(e.to_string());
        let dfa = aho_corasick::dfa::Builder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(phrases)
            .map_err(why)?;
        if dfa.memory_usage() <= max_dfa_bytes {
            return Ok(PhraseWalker::Dfa(dfa));
        }
        drop(dfa);
        aho_corasick::nfa::contiguous::Builder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(phrases)
            .map(PhraseWalker::Nfa)
            .map_err(why)
    }

    /// Calls `f` with the index of each phrase that occurs in `input`, at least once
    /// each (a phrase may come again), until `f` returns true.
    pub fn for_each_phrase(&self, input: &[u8], f: impl FnMut(usize) -> bool) {
        match self {
            PhraseWalker::Dfa(a) => walk_phrases(a, input, f),
            PhraseWalker::Nfa(a) => walk_phrases(a, input, f),
        }
    }
}

/// [`PhraseWalker::for_each_phrase`] over one kind of automaton. A match state holds
/// every phrase that ends where it is entered (standard semantics copy the matches
/// along failure links), and staying in the same state on the next byte finds the
/// same phrases again, so only a change of state into a match state is read.
fn walk_phrases<A: aho_corasick::automaton::Automaton>(
    a: &A,
    input: &[u8],
    mut f: impl FnMut(usize) -> bool,
) {
    use aho_corasick::Anchored;
    let Ok(mut sid) = a.start_state(Anchored::No) else {
        // Unreachable: the automata are built for unanchored searches (their default).
        return;
    };
    let mut last = sid;
    for &b in input {
        sid = a.next_state(Anchored::No, sid, b);
        if sid != last && a.is_special(sid) && a.is_match(sid) {
            for i in 0..a.match_len(sid) {
                if f(a.match_pattern(sid, i).as_usize()) {
                    return;
                }
            }
        }
        last = sid;
    }
}

/// Phrases that each belong to some of up to 64 lists, matched ASCII
/// case-insensitively in one pass that tells which lists have a phrase in a value
/// (the `@pm` union of the prefilter).
///
/// The pass walks a contiguous Aho-Corasick NFA itself instead of iterating over the
/// overlapping matches: that iterator stops at every match, once per phrase ending
/// there, which on attack payloads (a phrase every few bytes) cost more than the walk.
/// Here a match state adds its phrases' lists when it is entered, and the walk ends
/// once every list is found. (A DFA of the CRS v4 union exceeds 16 MiB, and building
/// one only to drop it slowed loading.)
///
/// On long values the NFA's transitions (which follow failure links, about 35
/// instructions a byte) are remembered as they are taken: a per-thread table of rows,
/// one per NFA state met, one column per byte class, filled on first use (a lazily
/// built DFA, bounded: when it is full it is emptied and refilled). The answer is the
/// NFA walk's, since every transition in the table is one the NFA gave.
#[derive(Debug, Clone)]
pub struct PhraseLists {
    nfa: aho_corasick::nfa::contiguous::NFA,
    /// For each phrase, the lists it belongs to, one bit each.
    lists_of: Vec<u64>,
    /// Every list's bit.
    every: u64,
    /// Byte to column of the table: bytes that occur in no phrase (in either case)
    /// share column 0, since no state has a transition of its own on them; a letter
    /// and its other case share one, as the matching ignores ASCII case.
    classes: Arc<[u8; 256]>,
    /// Columns of a row: the number of byte classes, rounded up to a power of two.
    width: usize,
    /// `width`'s logarithm.
    shift: u32,
    /// The per-thread tables.
    rows: Arc<Pool<Rows, RowsFn>>,
    /// Most rows a table holds before it is emptied.
    max_rows: usize,
}

type RowsFn =
    Box<dyn Fn() -> Rows + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>;

/// Values at least this long take the table; shorter ones walk the NFA (the table's
/// per-call cost, taking the thread's table from its pool, is not repaid on a few
/// bytes). At 16 bytes a value walks the NFA's failure links at about 35
/// instructions a byte against the table's 8: the 20 KiB JSON of the benchmark
/// corpus, hundreds of short values, took 2.4% fewer instructions per transaction than
/// with 256 (4 saved nothing more).
const ROWS_MIN_LEN: usize = 16;

/// Default bound on a table's rows (with CRS v4's 50-odd columns, about 1 MiB).
const MAX_ROWS: usize = 4096;

/// In [`Rows::next`]: a transition not taken yet (it has [`MATCH`] set, so the walk
/// tests one bit for both).
const UNKNOWN: u32 = u32::MAX;

/// One thread's table of transitions taken (see [`PhraseLists`]). Rows are
/// `width` columns wide, a power of two, and named by their offset in `Rows::next`
/// (row number times `width`).
#[derive(Debug, Default)]
pub struct Rows {
    /// NFA state to its row's offset.
    of_state: rustc_hash::FxHashMap<u32, u32>,
    /// Per row: its NFA state.
    state: Vec<aho_corasick::automaton::StateID>,
    /// Per row: the lists of the phrases its state matches (0 for other states).
    lists: Vec<u64>,
    /// Per row, `width` columns: the next row's offset, with [`MATCH`] set when that
    /// row's state is a match state; or [`UNKNOWN`].
    next: Vec<u32>,
    /// The current walk's: transitions it may still add (see [`PhraseLists::walk`]).
    /// Kept here, beside the table, rather than in the walk, so that the walk's own
    /// state stays in registers while another walk's loop feeds it.
    builds_left: usize,
    /// The current walk's: whether it gave up.
    gave_up: bool,
}

impl Rows {
    fn clear(&mut self) {
        self.of_state.clear();
        self.state.clear();
        self.lists.clear();
        self.next.clear();
    }
}

/// In [`Rows::next`]: the target row's state is a match state.
const MATCH: u32 = 1 << 31;

impl PhraseLists {
    /// The matcher of `phrases`, the `i`-th of which belongs to the lists of bit mask
    /// `lists_of[i]`; the error is a human-readable reason.
    pub fn new(phrases: &[Vec<u8>], lists_of: Vec<u64>) -> Result<PhraseLists, SetError> {
        PhraseLists::with_max_rows(phrases, lists_of, MAX_ROWS)
    }

    /// As [`PhraseLists::new`], with tables of at most `max_rows` rows.
    fn with_max_rows(
        phrases: &[Vec<u8>],
        lists_of: Vec<u64>,
        max_rows: usize,
    ) -> Result<PhraseLists, SetError> {
        let nfa = aho_corasick::nfa::contiguous::Builder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .prefilter(false)
            .build(phrases)
            .map_err(|e| SetError::Phrases(e.to_string()))?;
        let every = lists_of.iter().fold(0, |a, b| a | b);
        let mut classes = [0u8; 256];
        let mut width = 1usize;
        for b in phrases.iter().flatten().map(u8::to_ascii_lowercase) {
            if classes[b as usize] == 0 {
                if width > usize::from(u8::MAX) {
                    return Err(SetError::TooManyBytes);
                }
                classes[b as usize] = width as u8;
                classes[b.to_ascii_uppercase() as usize] = width as u8;
                width += 1;
            }
        }
        let make: RowsFn = Box::new(Rows::default);
        let width = width.next_power_of_two();
        Ok(PhraseLists {
            nfa,
            lists_of,
            every,
            classes: Arc::new(classes),
            shift: width.trailing_zeros(),
            width,
            rows: Arc::new(Pool::new(make)),
            max_rows: max_rows.max(1),
        })
    }

    /// The lists (bit `i` for list `i`) that have a phrase in `input`.
    pub fn lists_in(&self, input: &[u8]) -> u64 {
        if input.len() >= ROWS_MIN_LEN {
            self.lists_by_rows(input)
        } else {
            self.lists_by_nfa(input)
        }
    }

    /// The lists that have a phrase in `input`, walked from where `from` (an earlier
    /// answer for the same `input`) stopped, until one of the lists `want` is found or
    /// the value ends: a rule asks for one list, and when an early phrase of it
    /// answers, the rest of a long value need not be walked. The answer says which
    /// lists were found so far and whether it is complete; a later call for other
    /// lists goes on from there, so no byte is walked twice.
    pub fn lists_until(&self, input: &[u8], want: u64, from: Option<ListsSoFar>) -> ListsSoFar {
        let from = from.unwrap_or_default();
        if from.done {
            return from;
        }
        if from.read == 0 && input.len() < ROWS_MIN_LEN {
            return ListsSoFar::complete(self.lists_by_nfa(input));
        }
        let mut rows = self.rows();
        let mut walk = self.walk(&mut rows, None);
        if from.read > 0 {
            // The table may have been cleared since: the state's row is found again.
            walk.at = self.row_of(walk.rows, from.state) & !MATCH;
            walk.found = from.found;
        }
        let rest = input.get(from.read..).unwrap_or_default();
        let read = from.read + walk.rest_until(rest, want);
        let found = walk.found;
        if read >= input.len() || found == self.every {
            return ListsSoFar::complete(found);
        }
        ListsSoFar {
            found,
            read,
            state: walk.rows.state[(walk.at >> self.shift) as usize],
            done: false,
        }
    }

    /// [`PhraseLists::lists_in`] by the NFA alone.
    fn lists_by_nfa(&self, input: &[u8]) -> u64 {
        use aho_corasick::Anchored;
        use aho_corasick::automaton::Automaton;
        let nfa = &self.nfa;
        let Ok(mut sid) = nfa.start_state(Anchored::No) else {
            // Unreachable: the NFA is built for unanchored searches (its default).
            return self.every;
        };
        let mut found = 0;
        let mut last = sid;
        for &b in input {
            sid = nfa.next_state(Anchored::No, sid, b);
            if sid != last && nfa.is_special(sid) && nfa.is_match(sid) {
                found |= self.state_lists(sid);
                if found == self.every {
                    break;
                }
            }
            last = sid;
        }
        found
    }

    /// The lists of the phrases NFA state `sid` matches (0 for a state that is not a
    /// match state).
    fn state_lists(&self, sid: aho_corasick::automaton::StateID) -> u64 {
        use aho_corasick::automaton::Automaton;
        let nfa = &self.nfa;
        if !(nfa.is_special(sid) && nfa.is_match(sid)) {
            return 0;
        }
        (0..nfa.match_len(sid)).fold(0, |a, i| {
            a | self.lists_of[nfa.match_pattern(sid, i).as_usize()]
        })
    }

    /// The offset of NFA state `sid`'s row, with [`MATCH`] set for a match state;
    /// the row is added when new.
    fn row_of(&self, rows: &mut Rows, sid: aho_corasick::automaton::StateID) -> u32 {
        if let Some(&r) = rows.of_state.get(&sid.as_u32()) {
            return r;
        }
        let lists = self.state_lists(sid);
        let r = rows.next.len() as u32 | if lists != 0 { MATCH } else { 0 };
        rows.of_state.insert(sid.as_u32(), r);
        rows.state.push(sid);
        rows.lists.push(lists);
        rows.next.resize(rows.next.len() + self.width, UNKNOWN);
        r
    }

    /// [`PhraseLists::lists_in`] through this thread's table of transitions.
    fn lists_by_rows(&self, input: &[u8]) -> u64 {
        let mut rows = self.rows();
        let mut walk = self.walk(&mut rows, None);
        walk.rest(input);
        walk.found()
    }

    /// This thread's table of transitions, for [`PhraseLists::walk`].
    pub fn rows(&self) -> RowsGuard<'_> {
        let mut rows = self.rows.get();
        if rows.state.len() >= self.max_rows {
            rows.clear();
        }
        rows
    }

    /// A walk through the table `rows` ([`PhraseLists::rows`]), fed a byte at a time
    /// ([`ListsWalk::step`]) or a slice at a time ([`ListsWalk::rest`]). Another
    /// automaton's walk over the same bytes can feed it as it goes, so that the two
    /// chains of table reads, each waiting on its last, overlap.
    ///
    /// With `builds`, the walk gives up ([`ListsWalk::gave_up`]) at the first
    /// transition it would add past that many: a walk made on speculation (its answer
    /// may never be asked for) then costs little on bytes that keep the table
    /// growing, such as a file's.
    pub fn walk<'a>(&'a self, rows: &'a mut Rows, builds: Option<usize>) -> ListsWalk<'a> {
        use aho_corasick::Anchored;
        use aho_corasick::automaton::Automaton;
        rows.builds_left = builds.unwrap_or(usize::MAX);
        rows.gave_up = false;
        let (at, found) = match self.nfa.start_state(Anchored::No) {
            // The walk's row offset; the start state matches nothing (no empty
            // phrases).
            Ok(start) => (self.row_of(rows, start) & !MATCH, 0),
            // Unreachable: the NFA is built for unanchored searches (its default).
            Err(_) => (0, self.every),
        };
        ListsWalk {
            lists: self,
            rows,
            at,
            found,
        }
    }

    /// A step of a walk in row `at` on byte `b` whose target `next` is a match state
    /// or not known yet: the new row and the lists found with it (added to `found`).
    /// Takes and gives the walk's state as values, so that a walk stepped inside
    /// another's loop keeps it in registers.
    #[inline(never)]
    fn special(&self, rows: &mut Rows, at: u32, found: u64, b: u8, mut next: u32) -> (u32, u64) {
        use aho_corasick::Anchored;
        use aho_corasick::automaton::Automaton;
        if found == self.every || rows.gave_up {
            // Nothing left to find (the rest of the value need not be walked), or
            // nothing more to learn.
            return (at, found);
        }
        if next == UNKNOWN {
            if rows.builds_left == 0 {
                rows.gave_up = true;
                return (at, found);
            }
            rows.builds_left -= 1;
            let col = self.classes[usize::from(b)] as usize;
            let row = (at >> self.shift) as usize;
            let sid = self.nfa.next_state(Anchored::No, rows.state[row], b);
            if rows.state.len() >= self.max_rows && !rows.of_state.contains_key(&sid.as_u32()) {
                // Full: start again with only the state the walk is in.
                rows.clear();
                next = self.row_of(rows, sid);
            } else {
                next = self.row_of(rows, sid);
                rows.next[at as usize + col] = next;
            }
        }
        let found = if next & MATCH != 0 {
            found | rows.lists[((next & !MATCH) >> self.shift) as usize]
        } else {
            found
        };
        (next & !MATCH, found)
    }
}

/// How far [`PhraseLists::lists_until`] got over a value: the lists found in its first
/// `read` bytes and the automaton's state after them, or, once `done` (the whole value
/// walked, or every list found), the full answer. The default is a walk not started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListsSoFar {
    /// The lists (one bit each) that have a phrase in the bytes walked.
    pub found: u64,
    read: usize,
    state: aho_corasick::automaton::StateID,
    done: bool,
}

impl ListsSoFar {
    /// The full answer `found`.
    pub fn complete(found: u64) -> ListsSoFar {
        ListsSoFar {
            found,
            done: true,
            ..ListsSoFar::default()
        }
    }

    /// Whether list `list` has a phrase in the value: `Some` when the bytes walked
    /// tell (a phrase of it found, or none in the whole value).
    pub fn has(&self, list: u32) -> Option<bool> {
        match (self.found >> list & 1 == 1, self.done) {
            (true, _) => Some(true),
            (false, true) => Some(false),
            (false, false) => None,
        }
    }
}

/// One thread's table of transitions, taken from its pool for a walk.
pub type RowsGuard<'a> = regex_automata::util::pool::PoolGuard<'a, Rows, RowsFn>;

/// One walk of [`PhraseLists`] over a value (see [`PhraseLists::walk`]).
pub struct ListsWalk<'a> {
    lists: &'a PhraseLists,
    rows: &'a mut Rows,
    /// The current row's offset.
    at: u32,
    /// The lists found so far.
    found: u64,
}

impl crate::along::Along for ListsWalk<'_> {
    #[inline(always)]
    fn step(&mut self, b: u8) {
        ListsWalk::step(self, b);
    }
}

impl ListsWalk<'_> {
    /// The lists that have a phrase in the bytes walked so far (not an answer once
    /// the walk [gave up](ListsWalk::gave_up)).
    pub fn found(&self) -> u64 {
        self.found
    }

    /// Whether the walk gave up, having added as many transitions as it was allowed
    /// (see [`PhraseLists::walk`]).
    pub fn gave_up(&self) -> bool {
        self.rows.gave_up
    }

    /// Walks one more byte.
    #[inline(always)]
    pub fn step(&mut self, b: u8) {
        let col = self.lists.classes[usize::from(b)] as usize;
        let next = self.rows.next[self.at as usize + col];
        if next & MATCH == 0 {
            self.at = next;
        } else {
            (self.at, self.found) = self.lists.special(self.rows, self.at, self.found, b, next);
        }
    }

    /// Walks `input`, the bytes after those walked so far.
    pub fn rest(&mut self, input: &[u8]) {
        self.rest_until(input, 0);
    }

    /// Walks `input`, the bytes after those walked so far, stopping after the byte
    /// that finds one of the lists `want`; returns how many bytes it walked.
    fn rest_until(&mut self, input: &[u8], want: u64) -> usize {
        let lists = self.lists;
        let classes: &[u8; 256] = &lists.classes;
        let (mut at, mut found) = (self.at, self.found);
        let mut i = 0;
        while i < input.len() && found != lists.every && !self.rows.gave_up {
            // Transitions already taken into states that match nothing: one table
            // read a byte, through a shared borrow of the table (its address and
            // length stay in registers).
            let table: &[u32] = &self.rows.next;
            let mut stop = None;
            for (k, &b) in input[i..].iter().enumerate() {
                let next = table[at as usize + classes[usize::from(b)] as usize];
                if next & MATCH != 0 {
                    stop = Some((i + k, next));
                    break;
                }
                at = next;
            }
            let Some((j, next)) = stop else {
                i = input.len();
                break;
            };
            i = j + 1;
            (at, found) = lists.special(self.rows, at, found, input[j], next);
            if found & want != 0 {
                break;
            }
        }
        (self.at, self.found) = (at, found);
        i
    }
}

/// A compiled phrase matcher. Clones share the automaton and the phrases.
#[derive(Debug, Clone)]
pub struct Pm {
    automaton: AhoCorasick,
    phrases: Arc<[Vec<u8>]>,
}

impl Pm {
    /// Builds the automaton over `phrases` (which must not be empty strings). No
    /// phrases means the operator never matches.
    pub fn new(phrases: Vec<Vec<u8>>) -> Result<Pm, SetError> {
        let automaton = phrase_automaton(&phrases)?;
        Ok(Pm {
            automaton,
            phrases: phrases.into(),
        })
    }

    /// The phrases, in the order given.
    pub fn phrases(&self) -> &[Vec<u8>] {
        &self.phrases
    }

    /// The phrases, shared with this matcher.
    pub fn shared_phrases(&self) -> Arc<[Vec<u8>]> {
        self.phrases.clone()
    }

    /// Whether any phrase occurs in `input`. With `captures`, a match stores the
    /// phrase that was found first (the one ending earliest) as the only value.
    pub fn matches(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        let Some(out) = captures else {
            return self.automaton.is_match(input);
        };
        let Some(m) = self.automaton.find(input) else {
            return false;
        };
        let phrase = self
            .phrases
            .get(m.pattern().as_usize())
            .map_or(&input[m.start()..m.end()], Vec::as_slice);
        fill_captures(out, std::iter::once(phrase));
        true
    }
}

/// Splits an `@pm` argument into phrases (see the module documentation).
pub fn parse_inline(argument: &str) -> Vec<Vec<u8>> {
    let content = decode_content(argument.as_bytes());
    let bytes = content.as_deref().unwrap_or(argument.as_bytes());
    bytes
        .split(|b| is_c_space(*b))
        .filter(|p| !p.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// ModSecurity's `|hex|` and backslash handling; `None` when it would give up (empty
/// content or an unsupported escape), in which case the raw argument is used.
fn decode_content(arg: &[u8]) -> Option<Vec<u8>> {
    let start = arg
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(arg.len());
    let mut body = &arg[start..];
    if body.len() >= 2 && body.first() == Some(&b'"') && body.last() == Some(&b'"') {
        body = &body[1..body.len() - 1];
    }
    if body.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(body.len());
    let mut in_hex = false;
    let mut escaped = false;
    let mut pending: Option<u8> = None;
    for &c in body {
        if escaped {
            if matches!(c, b':' | b';' | b'\\' | b'"') {
                out.push(c);
                escaped = false;
                continue;
            }
            return None;
        }
        match c {
            b'\\' => escaped = true,
            b'|' => {
                in_hex = !in_hex;
                pending = None;
            }
            _ if in_hex => {
                if let Some(v) = hex_digit(c) {
                    match pending.take() {
                        Some(hi) => out.push(hi << 4 | v),
                        None => pending = Some(v),
                    }
                }
                // Anything else between pipes (spaces included) is ignored.
            }
            _ => out.push(c),
        }
    }
    Some(out)
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// C `isspace` in the C locale.
pub fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// The meaningful lines of a data file (see the module documentation).
pub fn data_file_lines(content: &[u8]) -> impl Iterator<Item = &[u8]> {
    numbered_data_file_lines(content).map(|(_, line)| line)
}

/// [`data_file_lines`] with their 1-based line numbers, for error messages.
pub fn numbered_data_file_lines(content: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    content
        .split(|&b| b == b'\n')
        .enumerate()
        .filter_map(|(i, line)| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let first = line.iter().position(|&b| !is_c_space(b))?;
            (line[first] != b'#').then_some((i + 1, line))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pm(arg: &str) -> Pm {
        Pm::new(parse_inline(arg)).expect("pm")
    }

    #[test]
    fn phrase_lists_agree_with_each_list() {
        let lists: [&[&[u8]]; 4] = [
            &[b"cat", b"etc/passwd"],
            &[b"at", b"Tc/"],
            &[b"zz", b"CAT"],
            &[b"/e", b"a"],
        ];
        let mut phrases: Vec<Vec<u8>> = Vec::new();
        let mut lists_of: Vec<u64> = Vec::new();
        for (i, list) in lists.iter().enumerate() {
            for p in list.iter() {
                match phrases.iter().position(|q| q.eq_ignore_ascii_case(p)) {
                    Some(k) if phrases[k] == *p => lists_of[k] |= 1 << i,
                    _ => {
                        phrases.push(p.to_vec());
                        lists_of.push(1 << i);
                    }
                }
            }
        }
        let union = PhraseLists::new(&phrases, lists_of).expect("union");
        let pms: Vec<Pm> = lists
            .iter()
            .map(|l| Pm::new(l.iter().map(|p| p.to_vec()).collect()).expect("pm"))
            .collect();
        let alphabet: &[u8] = b"acCtT/ezps";
        let mut rng = detect::testkit::XorShift(0x9E37_79B9_7F4A_7C15);
        for _ in 0..10_000 {
            let seed = rng.next();
            let len = (seed % 14) as usize;
            let input: Vec<u8> = (0..len)
                .map(|j| alphabet[((seed >> (j * 4)) % alphabet.len() as u64) as usize])
                .collect();
            let expect = pms.iter().enumerate().fold(0u64, |a, (i, pm)| {
                a | (u64::from(pm.matches(&input, None)) << i)
            });
            assert_eq!(union.lists_in(&input), expect, "{input:?}");
        }
    }

    #[test]
    fn the_table_of_transitions_answers_as_the_nfa() {
        // Lists over a small alphabet with shared prefixes and suffixes, matched on
        // long generated values (which take the table), with the default bound and
        // with tables of 2 and 7 rows (emptied again and again within one value).
        let lists: [&[&[u8]]; 5] = [
            &[b"cat", b"etc/passwd", b"/bin/sh"],
            &[b"At", b"tC/", b"\xff\x00"],
            &[b"zz", b"CAT", b"catz"],
            &[b"/e", b"-e "],
            &[b"passwd|", b"s;", b"$("],
        ];
        let mut phrases: Vec<Vec<u8>> = Vec::new();
        let mut lists_of: Vec<u64> = Vec::new();
        for (i, list) in lists.iter().enumerate() {
            for p in list.iter() {
                match phrases.iter().position(|q| q == p) {
                    Some(k) => lists_of[k] |= 1 << i,
                    None => {
                        phrases.push(p.to_vec());
                        lists_of.push(1 << i);
                    }
                }
            }
        }
        let pms: Vec<Pm> = lists
            .iter()
            .map(|l| Pm::new(l.iter().map(|p| p.to_vec()).collect()).expect("pm"))
            .collect();
        let unions: Vec<PhraseLists> = [MAX_ROWS, 2, 7]
            .iter()
            .map(|&n| PhraseLists::with_max_rows(&phrases, lists_of.clone(), n).expect("union"))
            .collect();
        let pieces: &[&[u8]] = &[
            b"c", b"a", b"T", b"/", b"e", b"tc/", b"passw", b"d|", b"s", b";", b"$", b"(", b"-",
            b" ", b"z", b"\xff", b"\x00", b"x", b"/bin/", b"CA",
        ];
        let mut rng = detect::testkit::XorShift(0x0dd_ba11);
        for round in 0..3_000 {
            let mut input = Vec::new();
            let len = ROWS_MIN_LEN + rng.below(600);
            while input.len() < len {
                input.extend_from_slice(pieces[rng.below(pieces.len())]);
            }
            // Some values with a phrase only at the very end.
            if round % 5 == 0 {
                input.extend_from_slice(lists[round % lists.len()][0]);
            }
            let expect = pms.iter().enumerate().fold(0u64, |a, (i, pm)| {
                a | (u64::from(pm.matches(&input, None)) << i)
            });
            let split = rng.below(input.len() + 1);
            for u in &unions {
                assert_eq!(u.lists_by_nfa(&input), expect, "{input:?}");
                assert_eq!(u.lists_by_rows(&input), expect, "{input:?}");
                assert_eq!(u.lists_in(&input), expect, "{input:?}");
                // Fed a byte at a time up to some point (as another walk feeds it),
                // then the rest at once.
                let mut rows = u.rows();
                let mut walk = u.walk(&mut rows, None);
                for &b in &input[..split] {
                    walk.step(b);
                }
                walk.rest(&input[split..]);
                assert_eq!(walk.found(), expect, "{input:?} split at {split}");
                drop(rows);
                // Asked one list at a time, in some order, each walk going on from
                // where the last stopped, with other values walked in between (which
                // clear the small tables).
                let mut so_far = None;
                let first = rng.below(lists.len());
                for k in 0..lists.len() {
                    let list = (first + k) % lists.len();
                    let now = u.lists_until(&input, 1 << list, so_far);
                    assert_eq!(
                        now.has(list as u32),
                        Some(expect >> list & 1 == 1),
                        "{input:?}, list {list}"
                    );
                    assert_eq!(now.found & !expect, 0, "{input:?}, list {list}");
                    so_far = Some(now);
                    u.lists_in(&input[..input.len() / 2]);
                }
            }
        }
    }

    #[test]
    fn a_walk_for_one_list_stops_at_its_first_phrase_and_goes_on_later() {
        let lists: [&[&[u8]]; 2] = [&[b"cat"], &[b"wget"]];
        let u = PhraseLists::new(
            &lists.iter().map(|l| l[0].to_vec()).collect::<Vec<_>>(),
            vec![1, 2],
        )
        .expect("union");
        let mut input = b"cat /etc/passwd ".repeat(1000);
        input.extend_from_slice(b"wget");
        let first = u.lists_until(&input, 1, None);
        assert_eq!((first.has(0), first.has(1)), (Some(true), None));
        assert_eq!(first.read, 3, "stops after the phrase");
        let second = u.lists_until(&input, 2, Some(first));
        assert_eq!((second.has(0), second.has(1)), (Some(true), Some(true)));
        assert!(second.done, "the other list's phrase is the last bytes");
        // A list with no phrase in the value: the walk goes to the end.
        let none = u.lists_until(&input[..input.len() - 4], 2, Some(first));
        assert_eq!((none.has(0), none.has(1)), (Some(true), Some(false)));
    }

    /// The walker reports exactly the phrases the crate's overlapping iterator finds,
    /// as a DFA and as an NFA, ignoring ASCII case.
    #[test]
    fn phrase_walker_finds_what_overlapping_search_finds() {
        let phrases: Vec<Vec<u8>> = [
            &b"on"[..],
            b"onload",
            b"load",
            b"select",
            b"sel",
            b"ect",
            b"/etc/",
            b"etc",
            b"a",
            b"<SCRIPT",
            b"\xff\x00",
            b"union all",
            b"all",
        ]
        .iter()
        .map(|p| p.to_vec())
        .collect();
        let reference = phrase_automaton(&phrases).expect("automaton");
        let walkers = [
            PhraseWalker::new(&phrases, usize::MAX).expect("dfa"),
            PhraseWalker::new(&phrases, 0).expect("nfa"),
        ];
        assert!(matches!(walkers[0], PhraseWalker::Dfa(_)));
        assert!(matches!(walkers[1], PhraseWalker::Nfa(_)));
        let pieces: &[&[u8]] = &[
            b"o", b"n", b"On", b"LOAD", b"sel", b"ECT", b"/", b"etc", b" ", b"a", b"<scr", b"ipt",
            b"\xff", b"\x00", b"union", b" all", b"x",
        ];
        let mut rng = detect::testkit::XorShift(0x9a7e_5eed);
        let mut found_some = 0;
        for _ in 0..5_000 {
            let input = rng.value_of(pieces, 40, 10);
            let mut want: Vec<usize> = reference
                .find_overlapping_iter(&input)
                .map(|m| m.pattern().as_usize())
                .collect();
            want.sort_unstable();
            want.dedup();
            found_some += usize::from(!want.is_empty());
            for w in &walkers {
                let mut got = Vec::new();
                w.for_each_phrase(&input, |p| {
                    got.push(p);
                    false
                });
                got.sort_unstable();
                got.dedup();
                assert_eq!(got, want, "{input:?}");
            }
        }
        assert!(found_some > 4_000, "{found_some}");
        // Stopping early: `f` returning true ends the walk.
        let mut calls = 0;
        walkers[0].for_each_phrase(b"select on load", |_| {
            calls += 1;
            true
        });
        assert_eq!(calls, 1);
    }

    #[test]
    fn reference_manual_example() {
        // SecRule REQUEST_HEADERS:User-Agent "@pm WebZIP WebCopier Webster WebStripper"
        let p = pm("WebZIP WebCopier Webster WebStripper ... SiteSnagger ProWebWalker CheeseBot");
        assert!(p.matches(b"Mozilla/4.0 (compatible; WebCopier v4.0)", None));
        assert!(p.matches(b"webzip/7", None));
        assert!(p.matches(b"CHEESEBOT", None));
        assert!(!p.matches(b"Mozilla/5.0 Firefox", None));
    }

    #[test]
    fn large_lists_answer_the_same_as_a_nfa() {
        // 80 long phrases: as a DFA the automaton would take megabytes.
        let phrases: Vec<Vec<u8>> = (0..80u32)
            .map(|i| {
                format!("Phrase-{i:02}-{}", "xyzzy".repeat(10 + (i as usize % 7))).into_bytes()
            })
            .collect();
        let p = Pm::new(phrases.clone()).expect("pm");
        assert_ne!(p.automaton.kind(), AhoCorasickKind::DFA);
        assert!(p.automaton.memory_usage() <= MAX_DFA_BYTES);
        let small = Pm::new(vec![b"abc".to_vec()]).expect("pm");
        assert_eq!(small.automaton.kind(), AhoCorasickKind::DFA);
        for (i, phrase) in phrases.iter().enumerate() {
            let mut input = b"..".to_vec();
            input.extend(phrase.to_ascii_uppercase());
            let mut caps = Captures::new();
            assert!(p.matches(&input, Some(&mut caps)), "{i}");
            assert_eq!(caps, vec![phrase.clone()]);
            assert!(!p.matches(&phrase[..phrase.len() - 1], None), "{i}");
        }
    }

    #[test]
    fn edges() {
        let p = pm("a");
        // A one-byte phrase at offset 0 matches (ModSecurity 3.0.0-3.0.4 missed it).
        assert!(p.matches(b"a", None));
        assert!(!p.matches(b"", None));
        let p = pm("");
        assert!(p.phrases().is_empty());
        assert!(!p.matches(b"anything", None));
        // Bytes >= 0x80 and NUL are compared exactly.
        let p = Pm::new(vec![b"\xC3\xA9t\xC3\xA9".to_vec(), b"a\0b".to_vec()]).expect("pm");
        assert!(p.matches(b"l'\xC3\xA9t\xC3\xA9", None));
        assert!(!p.matches(b"l'\xC3\x89T\xC3\x89", None));
        assert!(p.matches(b"xa\0by", None));
        assert!(!p.matches(b"ab", None));
    }

    #[test]
    fn capture_is_the_phrase() {
        let p = pm("SELECT union");
        let mut caps = vec![b"old".to_vec(), b"older".to_vec()];
        assert!(p.matches(b"1 UNION select", Some(&mut caps)));
        assert_eq!(caps, vec![b"union".to_vec()]);
        let mut caps = Captures::new();
        assert!(!p.matches(b"nothing", Some(&mut caps)));
        assert!(caps.is_empty());
    }

    #[test]
    fn argument_syntax() {
        assert_eq!(
            parse_inline("  a\tb  c "),
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        assert_eq!(parse_inline("\"a b\""), vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(
            parse_inline("|41 42|c d"),
            vec![b"ABc".to_vec(), b"d".to_vec()]
        );
        assert_eq!(parse_inline("|0a|x"), vec![b"x".to_vec()]);
        assert_eq!(
            parse_inline(r"a\;b c\:"),
            vec![b"a;b".to_vec(), b"c:".to_vec()]
        );
        // An unsupported escape: the raw argument is split as is.
        assert_eq!(
            parse_inline(r"a\nb |41|"),
            vec![br"a\nb".to_vec(), b"|41|".to_vec()]
        );
    }

    #[test]
    fn data_files() {
        let content = b"# comment\n  # indented comment\n\nphrase one\r\n   \nlast\n two \n";
        let lines: Vec<&[u8]> = data_file_lines(content).collect();
        assert_eq!(lines, vec![&b"phrase one"[..], b"last", b" two "]);
    }
}
