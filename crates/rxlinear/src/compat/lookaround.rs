//! Lookarounds as guards around a fixed-length top-level alternative.
//!
//! A top-level alternative of the form `G* R G*`, where `R` is a fixed-length
//! sequence of bytes and byte classes and each guard `G` is a lookaround
//! (`(?=L)`, `(?!L)`, `(?<=L)`, `(?<!L)`) whose content `L` has a bounded length, no
//! assertion and no capture group, matches exactly at the occurrences of `R` whose
//! guards hold. A guard before `R` looks at the start of the occurrence, a guard
//! after it at the end. "`L` matches just before position `x`" is tested with
//! `(?:L)\z` on the at most `max_len(L)` bytes before `x`, "`L` matches at `x`" with
//! `\A(?:L)` on the at most `max_len(L)` bytes from `x`: `L` has no assertion, so
//! the bytes outside the window cannot change the answer.
//!
//! Every occurrence of `R` is tried, left to right. When `R` cannot overlap itself
//! (no shift `d < len(R)` lets the classes at positions `j` and `j + d` share a byte
//! for every `j`), consecutive searches start at the end of the previous occurrence
//! and see each byte once. Otherwise each search starts one byte after the previous
//! occurrence's start, which reads each byte at most `len(R)` times. Each guard costs
//! at most `max_len(L)`. The cost is linear in the value.
//!
//! The other top-level alternatives form one ordinary regex. The PCRE match is the
//! one with the leftmost start; at the same start the alternative that comes first
//! in the pattern wins (checked with the ordinary alternatives that come before the
//! guarded one). A guarded alternative captures only the whole match (it has no
//! group); the ordinary alternatives keep their group numbers, since the guarded
//! ones hold no group.
//!
//! Anything else (a lookaround inside a group or a repetition, around a
//! variable-length item, with unbounded or assertion-bearing content) is refused.

use regex::bytes::Regex;
use regex_syntax::hir::{Hir, HirKind};

use super::Marker;
use crate::vocab::Captures;
use crate::vocab::{BACKTRACKING, ByteSet, LookKind, builder, fill_captures, regex_error};

/// Longest lookaround content and fixed item handled (in bytes).
const MAX_LEN: usize = 255;

/// A pattern whose top-level alternatives may carry lookaround guards.
#[derive(Debug)]
pub(crate) struct Guarded {
    /// The guarded alternatives, in pattern order.
    branches: Vec<Branch>,
    /// The other alternatives, in pattern order, as one regex.
    plain: Option<Regex>,
}

#[derive(Debug)]
struct Branch {
    /// The fixed-length item.
    item: Regex,
    /// Whether two occurrences of the item may overlap.
    overlapping: bool,
    /// Guards at the start and at the end of the item.
    guards: Vec<Guard>,
    /// The ordinary alternatives that come before this one, as one regex.
    plain_before: Option<Regex>,
}

#[derive(Debug)]
struct Guard {
    kind: LookKind,
    /// Whether the guard sits after the item (else before it).
    after: bool,
    /// `(?:L)\z` for a lookbehind, `\A(?:L)` for a lookahead.
    regex: Regex,
    /// The longest match of `L`.
    max_len: usize,
}

fn unsupported(what: &str) -> String {
    format!(
        "lookaround ({what}) {BACKTRACKING}; Palisade runs a lookaround only as a \
         guard of bounded length, without assertions or groups, at the start or end \
         of a fixed-length top-level alternative"
    )
}

fn compile(hir: &Hir) -> Result<Regex, String> {
    builder(&hir.to_string()).build().map_err(regex_error)
}

impl Guarded {
    /// Analyses a marked pattern (see
    /// [`Translation`](crate::vocab::Translation)) with lookarounds of the
    /// given kinds.
    pub(crate) fn new(hir: &Hir, kinds: &[LookKind]) -> Result<Guarded, String> {
        let alternatives: Vec<&Hir> = match hir.kind() {
            HirKind::Alternation(subs) => subs.iter().collect(),
            _ => vec![hir],
        };
        let mut branches = Vec::new();
        let mut plain_hirs: Vec<Hir> = Vec::new();
        for alt in alternatives {
            if !has_look_marker(alt) {
                plain_hirs.push(alt.clone());
                continue;
            }
            let mut branch = guarded_branch(alt, kinds)?;
            if !plain_hirs.is_empty() {
                branch.plain_before = Some(compile(&Hir::alternation(plain_hirs.clone()))?);
            }
            branches.push(branch);
        }
        let plain = if plain_hirs.is_empty() {
            None
        } else {
            Some(compile(&Hir::alternation(plain_hirs))?)
        };
        Ok(Guarded { branches, plain })
    }

    /// Whether the pattern matches, with PCRE's captures (see
    /// [`Rx::matches`](crate::Rx::matches)).
    pub(crate) fn matches(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        let Some(out) = captures else {
            return self.plain.as_ref().is_some_and(|r| r.is_match(input))
                || self.branches.iter().any(|b| b.find(input).is_some());
        };
        // The leftmost guarded match; the first alternative wins at equal starts.
        let mut best: Option<(usize, usize, &Branch)> = None;
        for b in &self.branches {
            if let Some((s, e)) = b.find(input)
                && best.is_none_or(|(bs, _, _)| s < bs)
            {
                best = Some((s, e, b));
            }
        }
        let plain = self.plain.as_ref().and_then(|r| {
            let mut locs = r.capture_locations();
            r.captures_read(&mut locs, input).map(|m| (m.start(), locs))
        });
        let guarded_wins = match (&best, &plain) {
            (None, None) => return false,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((gs, _, b)), Some((ps, _))) => {
                if gs != ps {
                    gs < ps
                } else {
                    // Same start: the plain match wins if an ordinary alternative
                    // before the guarded one matches there.
                    b.plain_before
                        .as_ref()
                        .and_then(|r| r.find_at(input, *gs))
                        .is_none_or(|m| m.start() != *gs)
                }
            }
        };
        if guarded_wins {
            if let Some((s, e, _)) = best {
                fill_captures(out, std::iter::once(&input[s..e]));
            }
        } else if let Some((_, locs)) = plain {
            let n = locs.len().min(crate::vocab::MAX_CAPTURES);
            let last = (0..n).rev().find(|&g| locs.get(g).is_some()).unwrap_or(0);
            fill_captures(
                out,
                (0..=last).map(|g| locs.get(g).map_or(&[][..], |(s, e)| &input[s..e])),
            );
        }
        true
    }
}

impl Branch {
    /// The first occurrence of the item whose guards hold.
    fn find(&self, input: &[u8]) -> Option<(usize, usize)> {
        let mut at = 0;
        while at <= input.len() {
            let m = self.item.find_at(input, at)?;
            let (s, e) = (m.start(), m.end());
            if self
                .guards
                .iter()
                .all(|g| g.holds(input, if g.after { e } else { s }))
            {
                return Some((s, e));
            }
            at = if self.overlapping {
                s + 1
            } else {
                e.max(s + 1)
            };
        }
        None
    }
}

impl Guard {
    fn holds(&self, input: &[u8], x: usize) -> bool {
        let found = if self.kind.is_behind() {
            self.regex
                .is_match(&input[x.saturating_sub(self.max_len)..x])
        } else {
            self.regex
                .is_match(&input[x..input.len().min(x + self.max_len)])
        };
        found == self.kind.is_positive()
    }
}

fn has_look_marker(hir: &Hir) -> bool {
    if let Some(Marker::Look(_)) = Marker::of(hir) {
        return true;
    }
    match hir.kind() {
        HirKind::Repetition(rep) => has_look_marker(&rep.sub),
        HirKind::Capture(cap) => has_look_marker(&cap.sub),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(has_look_marker),
        _ => false,
    }
}

/// A top-level alternative with guards: `G* R G*`.
fn guarded_branch(alt: &Hir, kinds: &[LookKind]) -> Result<Branch, String> {
    let items: &[Hir] = match alt.kind() {
        HirKind::Concat(subs) => subs,
        _ => std::slice::from_ref(alt),
    };
    let mut guards = Vec::new();
    let mut item: Vec<Hir> = Vec::new();
    let mut positions: Vec<ByteSet> = Vec::new();
    let mut seen_item = false;
    let mut closed = false;
    for sub in items {
        if let Some(Marker::Look(n)) = Marker::of(sub) {
            let kind = *kinds.get(n).ok_or_else(|| unsupported("unknown marker"))?;
            if seen_item {
                closed = true;
            }
            let HirKind::Capture(cap) = sub.kind() else {
                return Err(unsupported("unknown marker"));
            };
            guards.push(guard(&cap.sub, kind, seen_item)?);
            continue;
        }
        if closed {
            return Err(unsupported("not at the start or end of the alternative"));
        }
        match sub.kind() {
            HirKind::Literal(lit) => {
                for &b in lit.0.iter() {
                    let mut set = ByteSet::default();
                    set.insert(b);
                    positions.push(set);
                }
            }
            HirKind::Class(_) => {
                positions.push(
                    ByteSet::of_item(sub).ok_or_else(|| unsupported("around a Unicode class"))?,
                );
            }
            HirKind::Look(_) => return Err(unsupported("next to an assertion")),
            _ if has_look_marker(sub) => {
                return Err(unsupported("inside a group or a repetition"));
            }
            _ => return Err(unsupported("around an item that is not of fixed length")),
        }
        seen_item = true;
        item.push(sub.clone());
    }
    if positions.is_empty() {
        return Err(unsupported("with nothing to guard"));
    }
    if positions.len() > MAX_LEN {
        return Err(unsupported("around a long item"));
    }
    let overlapping = (1..positions.len())
        .any(|d| (0..positions.len() - d).all(|j| positions[j].intersects(&positions[j + d])));
    Ok(Branch {
        item: compile(&Hir::concat(item))?,
        overlapping,
        guards,
        plain_before: None,
    })
}

/// The guard for lookaround content `l` of the given kind.
fn guard(l: &Hir, kind: LookKind, after: bool) -> Result<Guard, String> {
    let props = l.properties();
    if !props.look_set().is_empty() {
        return Err(unsupported("with an assertion inside"));
    }
    if props.explicit_captures_len() > 0 {
        return Err(unsupported("with a group inside"));
    }
    let Some(max_len) = props.maximum_len().filter(|&m| m <= MAX_LEN) else {
        return Err(unsupported("of unbounded length"));
    };
    let anchored = if kind.is_behind() {
        Hir::concat(vec![l.clone(), Hir::look(regex_syntax::hir::Look::End)])
    } else {
        Hir::concat(vec![Hir::look(regex_syntax::hir::Look::Start), l.clone()])
    };
    Ok(Guard {
        kind,
        after,
        regex: compile(&anchored)?,
        max_len,
    })
}
