//! Required factors of a pattern: a set of byte strings such that every match of the
//! pattern contains one of them (ASCII case ignored). A value that contains none of a
//! pattern's factors cannot match it, which one Aho-Corasick pass over the value
//! proves for many patterns at once (see `RxSet` in the `patternsets` crate).
//!
//! The factors are read off the pattern's syntax tree: a literal is its own factor,
//! a run of pieces that each match one of a few short strings gives their
//! concatenations, a repetition of at least one gives its body's factors, an
//! alternation gives the union of its branches' factors, and a concatenation keeps
//! the best factors of any of its parts. Everything is lowercased (ASCII), so the
//! factors are only necessary up to ASCII case, which is how they are searched.

use regex_syntax::hir::{Class, Hir, HirKind};

use crate::vocab::ByteSet;

/// Most strings one finite language or factor set may hold.
const MAX_STRINGS: usize = 64;
/// Most bytes of one string of a finite language; longer products are cut into
/// factors.
const MAX_LEN: usize = 12;
/// Most distinct bytes (after lowercasing) a class may have to count as a finite
/// language of one-byte strings.
const MAX_CLASS: usize = 10;

/// What is known of one node: the finite language it matches (`exact`, lowercased,
/// possibly with the empty string), and strings one of which every match contains
/// (`need`, never with the empty string).
#[derive(Debug, Clone, Default)]
struct Info {
    exact: Option<Vec<Vec<u8>>>,
    need: Option<Vec<Vec<u8>>>,
}

impl Info {
    fn exact(set: Vec<Vec<u8>>) -> Info {
        let need = usable(&set).then(|| set.clone());
        Info {
            exact: Some(set),
            need,
        }
    }
}

/// A factor set every match of `hir` contains one of (lowercased ASCII, none
/// empty), or `None` when the pattern offers none (it can match the empty string,
/// or its pieces are too open).
pub fn required_factors(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    info(hir).need.map(minimize)
}

/// A set whose strings can serve as required factors: not empty, none empty.
fn usable(set: &[Vec<u8>]) -> bool {
    !set.is_empty() && set.iter().all(|s| !s.is_empty())
}

/// The rough chance that a byte of ordinary request text (headers, paths, form
/// values; ASCII case ignored) is `b`: a model for ranking factor sets, not a
/// measurement of any corpus.
fn byte_chance(b: u8) -> f64 {
    match b.to_ascii_lowercase() {
        b'e' | b'a' | b'o' | b'i' | b't' | b'n' | b's' | b'r' => 0.05,
        b'a'..=b'z' => 0.02,
        b'0'..=b'9' => 0.02,
        b' ' | b'.' | b'/' | b'=' | b'-' | b';' | b',' | b':' | b'_' | b'&' => 0.015,
        b'(' | b')' | b'%' | b'+' | b'*' | b'?' | b'"' | b'\'' | b'[' | b']' | b'{' | b'}' => 0.004,
        0x21..=0x7e => 0.002,
        _ => 0.0005,
    }
}

/// The rough chance that one of `set` starts at a given position of ordinary text
/// (see `byte_chance`).
pub fn set_chance(set: &[Vec<u8>]) -> f64 {
    set.iter()
        .map(|s| s.iter().map(|&b| byte_chance(b)).product::<f64>())
        .sum()
}

/// The better of two factor sets: the one less likely to occur in ordinary text.
fn better(a: Option<Vec<Vec<u8>>>, b: Option<Vec<Vec<u8>>>) -> Option<Vec<Vec<u8>>> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) => {
            if set_chance(&b) < set_chance(&a) {
                Some(b)
            } else {
                Some(a)
            }
        }
    }
}

fn dedup(mut set: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    set.sort();
    set.dedup();
    set
}

/// Drops strings that contain another string of the set: a value holding the longer
/// one holds the shorter, so the set stays necessary.
fn minimize(set: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let set = dedup(set);
    set.iter()
        .filter(|s| {
            !set.iter()
                .any(|t| t.len() < s.len() && s.windows(t.len()).any(|w| w == &t[..]))
        })
        .cloned()
        .collect()
}

/// Every concatenation of a string of `a` with one of `b`, or `None` beyond the
/// limits.
fn product(a: &[Vec<u8>], b: &[Vec<u8>]) -> Option<Vec<Vec<u8>>> {
    if a.len().saturating_mul(b.len()) > MAX_STRINGS {
        return None;
    }
    let mut out = Vec::with_capacity(a.len() * b.len());
    for x in a {
        for y in b {
            if x.len() + y.len() > MAX_LEN {
                return None;
            }
            let mut s = x.clone();
            s.extend_from_slice(y);
            out.push(s);
        }
    }
    Some(dedup(out))
}

fn class_bytes(class: &Class) -> Option<Vec<Vec<u8>>> {
    let mut bytes: Vec<u8> = Vec::new();
    let mut push_range = |lo: u32, hi: u32| -> Option<()> {
        if hi - lo >= 2 * MAX_CLASS as u32 + 2 || hi > 0xFF {
            return None;
        }
        for c in lo..=hi {
            bytes.push((c as u8).to_ascii_lowercase());
            if bytes.len() > 4 * MAX_CLASS {
                return None;
            }
        }
        Some(())
    };
    match class {
        Class::Bytes(c) => {
            for r in c.ranges() {
                push_range(u32::from(r.start()), u32::from(r.end()))?;
            }
        }
        Class::Unicode(c) => {
            for r in c.ranges() {
                push_range(u32::from(r.start()), u32::from(r.end()))?;
            }
        }
    }
    bytes.sort_unstable();
    bytes.dedup();
    if bytes.is_empty() || bytes.len() > MAX_CLASS {
        return None;
    }
    Some(bytes.into_iter().map(|b| vec![b]).collect())
}

fn info(hir: &Hir) -> Info {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::exact(vec![Vec::new()]),
        HirKind::Literal(lit) => {
            let s = lit.0.to_ascii_lowercase();
            if s.len() <= MAX_LEN {
                Info::exact(vec![s])
            } else {
                // Too long to combine further, but still a factor of every match.
                Info {
                    exact: None,
                    need: Some(vec![s]),
                }
            }
        }
        HirKind::Class(c) => match class_bytes(c) {
            Some(set) => Info::exact(set),
            None => Info::default(),
        },
        HirKind::Capture(c) => info(&c.sub),
        HirKind::Repetition(r) => {
            let sub = info(&r.sub);
            if r.min == 0 {
                // An optional piece: its language with the empty string, if finite.
                return match (r.max, sub.exact) {
                    (Some(1), Some(mut e)) if e.len() < MAX_STRINGS => {
                        e.push(Vec::new());
                        Info {
                            exact: Some(dedup(e)),
                            need: None,
                        }
                    }
                    _ => Info::default(),
                };
            }
            let mut exact = None;
            if r.max == Some(r.min)
                && r.min <= 4
                && let Some(e) = &sub.exact
            {
                let mut acc = vec![Vec::new()];
                for _ in 0..r.min {
                    match product(&acc, e) {
                        Some(p) => acc = p,
                        None => {
                            acc = Vec::new();
                            break;
                        }
                    }
                }
                if !acc.is_empty() {
                    exact = Some(acc);
                }
            }
            match exact {
                Some(e) => {
                    let mut i = Info::exact(e);
                    i.need = better(i.need, sub.need);
                    i
                }
                None => Info {
                    exact: None,
                    need: sub.need,
                },
            }
        }
        HirKind::Alternation(subs) => {
            let infos: Vec<Info> = subs.iter().map(info).collect();
            let exact = infos
                .iter()
                .try_fold(Vec::new(), |mut acc, i| {
                    acc.extend(i.exact.as_ref()?.iter().cloned());
                    (acc.len() <= MAX_STRINGS).then_some(acc)
                })
                .map(dedup);
            let need = infos
                .iter()
                .try_fold(Vec::new(), |mut acc, i| {
                    acc.extend(i.need.as_ref()?.iter().cloned());
                    (acc.len() <= 2 * MAX_STRINGS).then_some(acc)
                })
                .map(minimize);
            match exact {
                Some(e) => {
                    let mut i = Info::exact(e);
                    i.need = better(i.need, need);
                    i
                }
                None => Info { exact: None, need },
            }
        }
        HirKind::Concat(subs) => {
            let infos: Vec<Info> = subs.iter().map(info).collect();
            let mut need: Option<Vec<Vec<u8>>> = None;
            // The whole concatenation's language, while every part has one.
            let mut whole: Option<Vec<Vec<u8>>> = Some(vec![Vec::new()]);
            // The product of the current run of parts with a finite language.
            let mut run: Vec<Vec<u8>> = vec![Vec::new()];
            for i in &infos {
                need = better(need, i.need.clone());
                match &i.exact {
                    Some(e) => {
                        whole = whole.and_then(|w| product(&w, e));
                        match product(&run, e) {
                            Some(p) => run = p,
                            None => {
                                if usable(&run) {
                                    need = better(need, Some(run));
                                }
                                run = e.clone();
                            }
                        }
                    }
                    None => {
                        whole = None;
                        if usable(&run) {
                            need = better(need, Some(run));
                        }
                        run = vec![Vec::new()];
                    }
                }
            }
            if usable(&run) {
                need = better(need, Some(run));
            }
            match whole {
                Some(w) => {
                    let mut i = Info::exact(w);
                    i.need = better(i.need, need);
                    i
                }
                None => Info { exact: None, need },
            }
        }
    }
}

/// Bytes one of which every match of `hir` contains, or `None` when there are none
/// to give (the pattern can match the empty string, or a part of it matches bytes
/// outside what one set describes). A value with none of those bytes cannot match:
/// a check of one 256-bit set against the value's bytes, for when a set's lazy DFA
/// gave up and the rules would otherwise each run their regex (a file as base64
/// holds letters, digits, `+`, `/` and `=` only, which most injection patterns
/// need one byte outside of).
///
/// A literal needs its rarest byte, a class its bytes, a repetition of at least one
/// its body's, an alternation the union of its branches' (each must give one), a
/// concatenation the rarest of its parts' (by `byte_chance`, summed over the set).
/// Exact bytes, not lowercased: a case-insensitive letter is a class of both cases.
pub fn required_bytes(hir: &Hir) -> Option<ByteSet> {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => None,
        HirKind::Literal(lit) => {
            let rarest = lit.0.iter().copied().min_by(|&a, &b| {
                byte_chance(a)
                    .partial_cmp(&byte_chance(b))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })?;
            let mut set = ByteSet::default();
            set.insert(rarest);
            Some(set)
        }
        HirKind::Class(_) => ByteSet::of_item(hir).filter(|s| !s.is_empty()),
        HirKind::Capture(c) => required_bytes(&c.sub),
        HirKind::Repetition(r) if r.min == 0 => None,
        HirKind::Repetition(r) => required_bytes(&r.sub),
        HirKind::Alternation(subs) => subs.iter().try_fold(ByteSet::default(), |acc, sub| {
            Some(acc.union(&required_bytes(sub)?))
        }),
        HirKind::Concat(subs) => subs
            .iter()
            .filter_map(required_bytes)
            .map(|set| (bytes_chance(&set), set))
            .min_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal))
            .map(|(_, set)| set),
    }
}

/// The rough chance that a byte of ordinary text is in `set` (see [`byte_chance`]).
fn bytes_chance(set: &ByteSet) -> f64 {
    (0..=255u8)
        .filter(|&b| set.contains(b))
        .map(byte_chance)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rx::Rx;
    use crate::vocab::parse_hir;

    fn factors(pcre: &str) -> Option<Vec<String>> {
        let rx = Rx::new(pcre).expect("rx");
        let hir = parse_hir(rx.pattern()).expect("hir");
        required_factors(&hir).map(|v| {
            v.into_iter()
                .map(|s| String::from_utf8_lossy(&s).into_owned())
                .collect()
        })
    }

    fn needed(pcre: &str) -> Option<String> {
        let rx = Rx::new(pcre).expect("rx");
        let hir = parse_hir(rx.pattern()).expect("hir");
        required_bytes(&hir).map(|set| {
            (0..=255u8)
                .filter(|&b| set.contains(b))
                .map(char::from)
                .collect()
        })
    }

    #[test]
    fn needed_bytes_are_the_rarest_required_ones() {
        // A literal's rarest byte; a concatenation's rarest part.
        assert_eq!(needed("abc"), Some("b".into()));
        assert_eq!(
            needed(r"(?i)union\s+select"),
            Some("\t\n\x0b\x0c\r ".into())
        );
        assert_eq!(needed(r"<script"), Some("<".into()));
        // Case-insensitive letters are classes of both cases.
        assert_eq!(needed(r"(?i)x"), Some("Xx".into()));
        // An alternation: the union of its branches' needs.
        assert_eq!(needed(r"(?:'a|<b)"), Some("'<".into()));
        // A branch that can be empty, or an optional part alone: nothing needed.
        assert_eq!(needed(r"(?:'a|b?)"), None);
        assert_eq!(needed(r"(?:x)*"), None);
        assert_eq!(needed(r"^$"), None);
        // A repetition of at least one: its body's.
        assert_eq!(needed(r"[;|]+"), Some(";|".into()));
    }

    #[test]
    fn reads_literals_runs_and_alternations() {
        assert_eq!(factors("abc"), Some(vec!["abc".into()]));
        assert_eq!(factors(r"(?i)union\s+select"), Some(vec!["select".into()]));
        assert_eq!(
            factors(r"(?:<script|javascript:)"),
            Some(vec!["<script".into(), "javascript:".into()])
        );
        assert_eq!(factors(r"x[0-9]*"), Some(vec!["x".into()]));
        assert_eq!(
            factors(r"a(?:b|c)d"),
            Some(vec!["abd".into(), "acd".into()])
        );
        // A longer part wins over a shorter one; a plus keeps its body's factors.
        assert_eq!(factors(r"q.*(?:ab)+"), Some(vec!["ab".into()]));
    }

    #[test]
    fn patterns_that_can_match_without_a_literal_have_none() {
        assert_eq!(factors(r"\w+"), None);
        assert_eq!(factors(r"a?"), None);
        assert_eq!(factors(r"(?:abc|\w+)"), None);
        assert_eq!(
            factors(r"(?:abc|\d+)").map(|v| v.len()),
            Some(11),
            "a digit or abc"
        );
        assert_eq!(factors(r"^$"), None);
    }

    /// Every match of a pattern contains one of its factors: checked on random
    /// values for patterns of several shapes.
    #[test]
    fn every_match_contains_a_factor() {
        let pcre = [
            r"(?i)on(?:load|error)\s*=",
            r"a[bc]{2}d",
            r"(?:x|yz)[0-9]",
            r"(?i)s(?:e|3)l",
            r"[ab]{1,3}c",
            r"(?:\bor\b|&&)\s*\d",
        ];
        let alphabet = b"abcdxyzSELonlodr3= &0129\n";
        let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
        for p in pcre {
            let rx = Rx::new(p).expect("rx");
            let hir = parse_hir(rx.pattern()).expect("hir");
            let f = required_factors(&hir).expect("factors");
            for _ in 0..20_000 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let len = (seed % 10) as usize;
                let input: Vec<u8> = (0..len)
                    .map(|j| alphabet[((seed >> (j * 6)) % alphabet.len() as u64) as usize])
                    .collect();
                if rx.matches(&input, None) {
                    let low = input.to_ascii_lowercase();
                    assert!(
                        f.iter().any(|s| low.windows(s.len()).any(|w| w == &s[..])),
                        "{p} matches {input:?} without a factor of {f:?}"
                    );
                }
            }
        }
    }
}
