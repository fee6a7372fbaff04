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
use std::sync::Arc;

use super::Captures;
use super::rx::fill_captures;

/// Largest automaton kept as a DFA. The Aho-Corasick crate builds a DFA for phrase
/// lists of up to 100 phrases; case-insensitive lists of long phrases make DFAs of
/// megabytes (CRS v4 has two of 1.7 and 2.4 MiB), where the contiguous NFA takes a
/// tenth of that and answers the same.
pub const MAX_DFA_BYTES: usize = 256 * 1024;

/// An Aho-Corasick automaton over `phrases` that matches them ASCII
/// case-insensitively with standard (overlapping-capable) semantics: a DFA when it
/// stays within [`MAX_DFA_BYTES`], a contiguous NFA otherwise.
pub(crate) fn phrase_automaton(phrases: &[Vec<u8>]) -> Result<AhoCorasick, String> {
    let build = |kind: Option<AhoCorasickKind>| {
        AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(kind)
            .build(phrases)
            .map_err(|e| format!("cannot build the phrase matcher: {e}"))
    };
    let automaton = build(None)?;
    if automaton.kind() == AhoCorasickKind::DFA && automaton.memory_usage() > MAX_DFA_BYTES {
        return build(Some(AhoCorasickKind::ContiguousNFA));
    }
    Ok(automaton)
}

/// Phrases that each belong to some of up to 64 lists, matched ASCII
/// case-insensitively in one pass that tells which lists have a phrase in a value
/// (the `@pm` union of the prefilter).
///
/// The pass walks a contiguous Aho-Corasick NFA itself instead of iterating over the
/// overlapping matches: that iterator stops at every match, once per phrase ending
/// there, which on attack payloads (a phrase every few bytes) cost more than the walk.
/// Here a match state adds its phrases' lists when it is entered, skipped when the
/// walk stays in it, and the walk ends once every list is found. (A DFA of the CRS v4
/// union exceeds 16 MiB, and building one only to drop it slowed loading.)
#[derive(Debug, Clone)]
pub(crate) struct PhraseLists {
    nfa: aho_corasick::nfa::contiguous::NFA,
    /// For each phrase, the lists it belongs to, one bit each.
    lists_of: Vec<u64>,
    /// Every list's bit.
    every: u64,
}

impl PhraseLists {
    /// The matcher of `phrases`, the `i`-th of which belongs to the lists of bit mask
    /// `lists_of[i]`; the error is a human-readable reason.
    pub(crate) fn new(phrases: &[Vec<u8>], lists_of: Vec<u64>) -> Result<PhraseLists, String> {
        let nfa = aho_corasick::nfa::contiguous::Builder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .prefilter(false)
            .build(phrases)
            .map_err(|e| format!("cannot build the phrase matcher: {e}"))?;
        let every = lists_of.iter().fold(0, |a, b| a | b);
        Ok(PhraseLists {
            nfa,
            lists_of,
            every,
        })
    }

    /// The lists (bit `i` for list `i`) that have a phrase in `input`.
    pub(crate) fn lists_in(&self, input: &[u8]) -> u64 {
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
                for i in 0..nfa.match_len(sid) {
                    found |= self.lists_of[nfa.match_pattern(sid, i).as_usize()];
                }
                if found == self.every {
                    break;
                }
            }
            last = sid;
        }
        found
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
    pub fn new(phrases: Vec<Vec<u8>>) -> Result<Pm, String> {
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
pub(crate) fn is_c_space(b: u8) -> bool {
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
        let mut rng = crate::body::fuzz::XorShift(0x9E37_79B9_7F4A_7C15);
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
