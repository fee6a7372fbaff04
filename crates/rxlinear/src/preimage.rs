//! Preimages of a pattern under the effects of transformations: the pattern that
//! matches a value exactly when the original matches the value once transformed
//! (see [`Rx::preimage`](crate::Rx::preimage)).

use regex_syntax::hir::{Hir, HirKind, Look};

use crate::vocab::ByteSet;

/// What a transformation does to a value, for a pattern that takes it on: the data
/// a preimage needs, and all of it (the rule engine maps its transformations to these).
#[derive(Debug, Clone, Copy)]
pub enum Effect {
    /// ASCII capitals become small letters; every other byte stays.
    Lowercase,
    /// The bytes for which the function is true are deleted; every other byte stays.
    Delete(fn(u8) -> bool),
}

/// The pattern that matches a value exactly when `hir` matches the value after
/// `effects`, applied in reverse order (see [`Rx::preimage`](crate::Rx::preimage));
/// `None` when there is no such pattern here.
pub fn preimage(hir: &Hir, effects: &[Effect]) -> Option<Hir> {
    let mut pre = hir.clone();
    for effect in effects {
        pre = match *effect {
            Effect::Lowercase => lowercase_preimage(&pre)?,
            Effect::Delete(f) => {
                let mut deleted = ByteSet::default();
                for b in (0..=255u8).filter(|&b| f(b)) {
                    deleted.insert(b);
                }
                deletion_preimage(&pre, &deleted)?
            }
        };
    }
    Some(pre)
}

/// The class of the bytes for which `accepted` is true (empty: never matches).
fn byte_class(accepted: &dyn Fn(u8) -> bool) -> Hir {
    use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange};
    let mut ranges: Vec<ClassBytesRange> = Vec::new();
    for b in 0..=255u8 {
        if accepted(b) {
            match ranges.last_mut() {
                Some(r) if r.end() + 1 == b => *r = ClassBytesRange::new(r.start(), b),
                _ => ranges.push(ClassBytesRange::new(b, b)),
            }
        }
    }
    Hir::class(Class::Bytes(ClassBytes::new(ranges)))
}

/// The pattern that matches `x` exactly where `hir` matches `x` with ASCII capitals
/// lowercased (see [`Rx::preimage`]); `None` for a class of code points.
/// Assertions are unchanged: lowercasing keeps word characters and line ends where
/// they are.
fn lowercase_preimage(hir: &Hir) -> Option<Hir> {
    use regex_syntax::hir::{Class, Repetition};
    // The bytes that lowercasing turns into one of `accepted`.
    let preimage = |accepted: &dyn Fn(u8) -> bool| -> Hir {
        byte_class(&|b| accepted(b.to_ascii_lowercase()))
    };
    Some(match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => hir.clone(),
        HirKind::Literal(lit) => {
            Hir::concat(lit.0.iter().map(|&c| preimage(&|b| b == c)).collect())
        }
        HirKind::Class(Class::Bytes(c)) => {
            preimage(&|b| c.ranges().iter().any(|r| r.start() <= b && b <= r.end()))
        }
        HirKind::Class(Class::Unicode(_)) => return None,
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            sub: Box::new(lowercase_preimage(&r.sub)?),
            ..r.clone()
        }),
        HirKind::Capture(c) => lowercase_preimage(&c.sub)?,
        HirKind::Concat(subs) => Hir::concat(
            subs.iter()
                .map(lowercase_preimage)
                .collect::<Option<Vec<_>>>()?,
        ),
        HirKind::Alternation(subs) => Hir::alternation(
            subs.iter()
                .map(lowercase_preimage)
                .collect::<Option<Vec<_>>>()?,
        ),
    })
}

/// The pattern that matches `x` exactly where `hir` matches `x` with the bytes of
/// `deleted` removed (see [`Rx::preimage`]); `None` for a class of code points or an
/// assertion the deleted bytes change.
///
/// A match of `hir` in the shortened value is a run of accepted bytes; in `x` the
/// same bytes have runs of deleted bytes between them. So each byte the pattern
/// accepts (and is not deleted: a deleted one never occurs in the shortened value)
/// is followed by any run of deleted bytes. A start assertion is followed by one too
/// (the shortened value starts after the deleted bytes that open `x`); an end
/// assertion needs nothing more (the run after the last accepted byte reaches it).
/// A line assertion is one of text when the line ends are deleted; word boundaries
/// have no such reading.
fn deletion_preimage(hir: &Hir, deleted: &ByteSet) -> Option<Hir> {
    use regex_syntax::hir::{Class, Repetition};
    let skipped = || {
        Hir::repetition(Repetition {
            min: 0,
            max: None,
            greedy: true,
            sub: Box::new(byte_class(&|b| deleted.contains(b))),
        })
    };
    let kept = |accepted: &dyn Fn(u8) -> bool| {
        Hir::concat(vec![
            byte_class(&|b| accepted(b) && !deleted.contains(b)),
            skipped(),
        ])
    };
    let line_ends_deleted = deleted.contains(b'\n') && deleted.contains(b'\r');
    Some(match hir.kind() {
        HirKind::Empty => hir.clone(),
        HirKind::Look(look) => match look {
            Look::Start => Hir::concat(vec![hir.clone(), skipped()]),
            Look::End => hir.clone(),
            Look::StartLF | Look::StartCRLF if line_ends_deleted => {
                Hir::concat(vec![Hir::look(Look::Start), skipped()])
            }
            Look::EndLF | Look::EndCRLF if line_ends_deleted => Hir::look(Look::End),
            _ => return None,
        },
        HirKind::Literal(lit) => Hir::concat(lit.0.iter().map(|&c| kept(&|b| b == c)).collect()),
        HirKind::Class(Class::Bytes(c)) => {
            kept(&|b| c.ranges().iter().any(|r| r.start() <= b && b <= r.end()))
        }
        HirKind::Class(Class::Unicode(_)) => return None,
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            sub: Box::new(deletion_preimage(&r.sub, deleted)?),
            ..r.clone()
        }),
        HirKind::Capture(c) => deletion_preimage(&c.sub, deleted)?,
        HirKind::Concat(subs) => Hir::concat(
            subs.iter()
                .map(|h| deletion_preimage(h, deleted))
                .collect::<Option<Vec<_>>>()?,
        ),
        HirKind::Alternation(subs) => Hir::alternation(
            subs.iter()
                .map(|h| deletion_preimage(h, deleted))
                .collect::<Option<Vec<_>>>()?,
        ),
    })
}
