//! Exact linear-time evaluation of the PCRE features that `@rx` cannot hand to the
//! `regex` crate as they are: lookarounds, possessive quantifiers and atomic groups,
//! and (for the patterns of [`TABLE`] only) backreferences.
//!
//! PCRE runs these features by backtracking. Palisade never runs a backtracking
//! engine on request data, so each feature is evaluated here by a mechanism whose
//! cost is linear in the length of the value and whose answer is PCRE's (the match
//! or no match, and the captured groups). What cannot be proven equal to PCRE is
//! refused at load time with the reason.
//!
//! - **Possessive quantifiers and atomic groups** ([`possessive`]): when the bytes
//!   the repeated class can match are disjoint from the first bytes of everything
//!   that can follow it, the possessive and the greedy quantifier accept the same
//!   values with the same match, so the greedy one is used. Otherwise, for a
//!   repetition without an upper bound (`X*+`, `X++`, `X{n,}+`, `(?>X*)`) of a
//!   single byte class `X`, "possessive" means "greedy, and the next byte is not in
//!   `X`": the automaton of the greedy pattern is multiplied with that one-byte
//!   condition, and the product runs on a lazy DFA (match or not) and a PikeVM
//!   (captures). Bounded possessive repetitions that overlap their follow set, and
//!   atomic groups around anything else, are refused.
//! - **Lookarounds** ([`lookaround`]): a lookaround of bounded length, look-free
//!   and capture-free, at the start or end of a fixed-length top-level alternative
//!   (`(?<!L)R`, `R(?!L)`, `(?=L)R`, `R(?<=L)`) is a guard: every occurrence of `R`
//!   is found and the bytes around it are tested with an anchored regex for `L`.
//!   Any other lookaround is refused.
//! - **Backreferences**: refused, except for the patterns of [`TABLE`], which have
//!   their own evaluation with its proof next to the entry.
//!
//! In every case [`Rx::pattern`](crate::Rx::pattern) and
//! [`Rx::regex`](crate::Rx::regex) are a superset of the PCRE pattern (lookarounds
//! read as true, possessive read as greedy, a backreference read as a copy of its
//! group's sub-pattern): a value they do not match is a value PCRE does not match,
//! which keeps multi-pattern prefilters exact.

mod lookaround;
mod possessive;
mod word_relation;

use regex_automata::meta::Regex;
use regex_syntax::hir::{Hir, HirKind, LookSet};

use crate::vocab::Captures;
use crate::vocab::{ByteSet, MARK_ATOMIC, MARK_LOOK, MARK_POSSESSIVE, Translation, parse_hir};
use word_relation::{Relation, WordRelation, WordRelationSpec};

/// The patterns that need an evaluation of their own, keyed by their exact PCRE
/// text (the `@rx` argument as the rule file gives it, after SecLang unescaping).
/// Each entry says where the pattern comes from and why its evaluation gives
/// PCRE's answer.
const TABLE: &[Entry] = &[Entry {
    // CRS 3.3.4, REQUEST-942-APPLICATION-ATTACK-SQLI.conf, rule 942130 ("SQL
    // Tautology Detected", paranoia level 2, with `capture`).
    //
    // Shape, with `S` the separator class `[\s'"`()]` and `W` the word class
    // `[\d\w]` (= `\w`: ASCII letters, digits, `_`), case-insensitive:
    //
    //     S*? \b(W+)\b S*? OP S*? SECOND
    //
    // where OP and SECOND are, in the order PCRE tries them:
    //     `<=`  different      `<=>` same        `<>` different    `<`   different
    //     `not\s+regexp`, `not\s+like`, `is\s+not`, `>=`, `>`, `!=`, `^`: different
    //     `sounds\s+like`, `like`, `regexp`, `rlike`, `=`: same
    // "same" is `\b\1\b` and "different" is `(?!\b\1\b)W+`.
    //
    // Why the evaluation below gives PCRE's verdict and match, with no search:
    // 1. `\b(W+)\b` can only capture a whole word (a maximal run of `W`): shorter
    //    runs end between two word bytes, where `\b` fails. So group 1 is a word
    //    token, and the evaluation walks the tokens left to right.
    // 2. `S` has no word byte and no byte an operator starts with (`<>!^=` and the
    //    letters n, i, s, l, r), so each lazy `S*?` can only stop at the end of
    //    the run of `S` bytes it starts on: the operator starts at the end of the
    //    separators after the word, and the second operand at the end of the
    //    separators after the operator (both "same" and "different" need a word
    //    byte there). The `\s+` inside `not\s+like` and the like is followed by a
    //    letter, so only the whole run of white space works.
    // 3. At a given operator position at most a few operators match (`<=`, `<`);
    //    trying them in PCRE's order gives PCRE's first success.
    // 4. With `w` the first word and `q` where the second operand starts, "same"
    //    holds iff the byte before `q` is not a word byte, the bytes at `q` equal
    //    `w` up to ASCII case (PCRE's caseless backreference without UTF mode),
    //    and the byte after them is not a word byte (or the value ends); the match
    //    then ends after them. "different" holds iff the byte at `q` is a word byte
    //    and "same" does not; the greedy `W+` then ends the match at the end of
    //    that run of word bytes.
    // 5. PCRE tries start positions left to right; every start in the run of `S`
    //    bytes before a token leads to that token, so the match starts at the
    //    beginning of that run, for the first token that succeeds.
    // Each byte is looked at a bounded number of times (a token is compared only
    // with the operand after its own operator), so the cost is linear.
    // CRS v4 replaced this rule by a capture and a chained `@streq`; CRS 3.3.4 is
    // run here with PCRE's answers instead.
    pattern: r#"(?i:[\s'"`()]*?\b([\d\w]+)\b[\s'"`()]*?(?:<(?:=(?:[\s'"`()]*?(?!\b\1\b)[\d\w]+|>[\s'"`()]*?(?:\b\1\b))|>?[\s'"`()]*?(?!\b\1\b)[\d\w]+)|(?:not\s+(?:regexp|like)|is\s+not|>=?|!=|\^)[\s'"`()]*?(?!\b\1\b)[\d\w]+|(?:(?:sounds\s+)?like|r(?:egexp|like)|=)[\s'"`()]*?(?:\b\1\b)))"#,
    origin: "CRS 3.3.4 rule 942130",
    eval: Special::WordRelation(&WordRelationSpec {
        separators: b" \t\n\x0B\x0C\r'\"`()",
        operators: &[
            ("<=", Relation::Different),
            ("<=>", Relation::Same),
            ("<>", Relation::Different),
            ("<", Relation::Different),
            ("not regexp", Relation::Different),
            ("not like", Relation::Different),
            ("is not", Relation::Different),
            (">=", Relation::Different),
            (">", Relation::Different),
            ("!=", Relation::Different),
            ("^", Relation::Different),
            ("sounds like", Relation::Same),
            ("like", Relation::Same),
            ("regexp", Relation::Same),
            ("rlike", Relation::Same),
            ("=", Relation::Same),
        ],
    }),
}];

/// An entry of [`TABLE`].
struct Entry {
    /// The exact PCRE pattern.
    pattern: &'static str,
    /// Where the pattern comes from (for messages and documentation).
    origin: &'static str,
    /// How it is evaluated.
    eval: Special,
}

/// The evaluations a [`TABLE`] entry can use.
enum Special {
    /// "word, operator, word" with a relation between the two words
    /// (see [`word_relation`]).
    WordRelation(&'static WordRelationSpec),
}

/// The exact evaluation of a pattern whose translation is only a superset.
#[derive(Debug)]
pub(crate) enum Compat {
    /// Lookaround guards around fixed-length top-level alternatives.
    Guarded(lookaround::Guarded),
    /// Possessive repetitions evaluated on a product automaton.
    Possessive(Box<possessive::Possessive>),
    /// A [`TABLE`] entry of the "word operator word" kind.
    WordRelation(WordRelation),
}

/// Builds the exact evaluation of `pcre` when its translation `t` needs one:
/// `Ok(None)` when the translation is exact by itself.
pub(crate) fn build(pcre: &str, t: &Translation) -> Result<Option<Compat>, String> {
    if let Some(entry) = TABLE.iter().find(|e| e.pattern == pcre) {
        return match entry.eval {
            Special::WordRelation(spec) => {
                WordRelation::new(spec, entry.origin).map(|w| Some(Compat::WordRelation(w)))
            }
        };
    }
    if let Some(refusal) = &t.backreference {
        return Err(refusal.clone());
    }
    let Some(marked) = &t.marked else {
        return Ok(None);
    };
    let hir = parse_hir(marked).map_err(|e| e.to_string())?;
    if !t.lookarounds.is_empty() {
        if t.possessive {
            return Err(format!(
                "a lookaround together with a possessive quantifier or an atomic group \
                 {}",
                crate::vocab::BACKTRACKING
            ));
        }
        return lookaround::Guarded::new(&hir, &t.lookarounds).map(|g| Some(Compat::Guarded(g)));
    }
    Ok(possessive::Possessive::new(&hir)?.map(|p| Compat::Possessive(Box::new(p))))
}

impl Compat {
    /// Whether the pattern matches `input`, as PCRE answers; `superset` is the
    /// translated pattern's regex (a superset), `captures` as in
    /// [`Rx::matches`](crate::Rx::matches).
    pub(crate) fn matches(
        &self,
        superset: &Regex,
        input: &[u8],
        captures: Option<&mut Captures>,
    ) -> bool {
        match self {
            Compat::Guarded(g) => g.matches(input, captures),
            // The product runs on a lazy DFA, as fast as the superset's would.
            Compat::Possessive(p) => p.matches(input, captures),
            Compat::WordRelation(w) => superset.is_match(input) && w.matches(input, captures),
        }
    }
}

/// What can come first when a sub-pattern (and what follows it) matches: the
/// bytes it may consume first (looking through zero-width assertions), whether it
/// may consume nothing, and the assertions met on such an empty path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct First {
    /// Bytes that may be consumed first.
    pub bytes: ByteSet,
    /// Whether the empty string may match.
    pub nullable: bool,
    /// The assertions on the paths that consume nothing.
    pub looks: LookSet,
}

impl First {
    /// The end of the pattern: nothing more is consumed, no assertion.
    pub(crate) const END: First = First {
        bytes: ByteSet::EMPTY,
        nullable: true,
        looks: LookSet { bits: 0 },
    };

    /// `self` followed by `next`.
    pub(crate) fn then(&self, next: &First) -> First {
        First {
            bytes: if self.nullable {
                self.bytes.union(&next.bytes)
            } else {
                self.bytes
            },
            nullable: self.nullable && next.nullable,
            looks: if self.nullable && next.nullable {
                self.looks.union(next.looks)
            } else {
                LookSet::empty()
            },
        }
    }

    /// `self` or `other`.
    pub(crate) fn or(&self, other: &First) -> First {
        let looks = |f: &First| {
            if f.nullable {
                f.looks
            } else {
                LookSet::empty()
            }
        };
        First {
            bytes: self.bytes.union(&other.bytes),
            nullable: self.nullable || other.nullable,
            looks: looks(self).union(looks(other)),
        }
    }

    /// The [`First`] of a sub-pattern (alone).
    pub(crate) fn of(hir: &Hir) -> First {
        let consuming = |bytes| First {
            bytes,
            nullable: false,
            looks: LookSet::empty(),
        };
        match hir.kind() {
            HirKind::Empty => First::END,
            HirKind::Literal(lit) => {
                let mut set = ByteSet::default();
                if let Some(&b) = lit.0.first() {
                    set.insert(b);
                }
                consuming(set)
            }
            HirKind::Class(_) => consuming(ByteSet::of_item(hir).unwrap_or(ByteSet::ALL)),
            HirKind::Look(look) => First {
                bytes: ByteSet::default(),
                nullable: true,
                looks: LookSet::singleton(*look),
            },
            HirKind::Repetition(rep) => {
                if rep.max == Some(0) {
                    return First::END;
                }
                let sub = First::of(&rep.sub);
                First {
                    bytes: sub.bytes,
                    nullable: rep.min == 0 || sub.nullable,
                    looks: if sub.nullable {
                        sub.looks
                    } else {
                        LookSet::empty()
                    },
                }
            }
            HirKind::Capture(cap) => First::of(&cap.sub),
            HirKind::Concat(subs) => subs
                .iter()
                .rev()
                .fold(First::END, |acc, sub| First::of(sub).then(&acc)),
            HirKind::Alternation(subs) => {
                let mut acc: Option<First> = None;
                for sub in subs {
                    let f = First::of(sub);
                    acc = Some(acc.map_or(f, |a| a.or(&f)));
                }
                acc.unwrap_or(First {
                    bytes: ByteSet::default(),
                    nullable: false,
                    looks: LookSet::empty(),
                })
            }
        }
    }
}

/// The marker kind and number of a marker group name (see [`Translation`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marker {
    /// Lookaround number N.
    Look(usize),
    /// The empty group after possessive repetition number N.
    Possessive(usize),
    /// Atomic group number N.
    Atomic(usize),
}

impl Marker {
    /// The marker of a capture group, if it is one.
    pub(crate) fn of(hir: &Hir) -> Option<Marker> {
        let HirKind::Capture(cap) = hir.kind() else {
            return None;
        };
        Marker::from_name(cap.name.as_deref()?)
    }

    /// The marker a group name stands for.
    pub(crate) fn from_name(name: &str) -> Option<Marker> {
        let num = |rest: &str| rest.parse::<usize>().ok();
        if let Some(rest) = name.strip_prefix(MARK_LOOK) {
            num(rest).map(Marker::Look)
        } else if let Some(rest) = name.strip_prefix(MARK_POSSESSIVE) {
            num(rest).map(Marker::Possessive)
        } else if let Some(rest) = name.strip_prefix(MARK_ATOMIC) {
            num(rest).map(Marker::Atomic)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests;
