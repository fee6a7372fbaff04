//! The rule set's table of tags: every distinct `tag` gets a number, each rule
//! carries the set of its tags' numbers, and each `ctl:ruleRemoveByTag` (or
//! `ctl:ruleRemoveTargetByTag`) carries the set of tags its pattern matches.
//!
//! A pattern is a regular expression over tags (as ModSecurity v3 reads it), and the
//! tags are known once the rule set is loaded; so the pattern is run over each
//! distinct tag once, at load time. At run time, removing rules by tag is a union of
//! sets, and asking whether a rule is removed is an intersection, instead of a
//! regular-expression search per tag of every rule.

use crate::actions::{Action, Ctl};
use crate::rule::{Entry, Rule};
use std::collections::HashMap;

/// A set of tag numbers of one rule set (a bit per tag).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagSet(Vec<u64>);

impl TagSet {
    /// Adds tag `id`.
    pub fn insert(&mut self, id: usize) {
        let word = id / 64;
        if self.0.len() <= word {
            self.0.resize(word + 1, 0);
        }
        self.0[word] |= 1 << (id % 64);
    }

    /// Adds every tag of `other`.
    pub fn union_with(&mut self, other: &TagSet) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= b;
        }
    }

    /// Whether the two sets share a tag.
    pub fn intersects(&self, other: &TagSet) -> bool {
        self.0.iter().zip(&other.0).any(|(a, b)| a & b != 0)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }
}

/// A `ctl` action's tag pattern and, once the rule set is built, the tags it
/// matches.
#[derive(Debug, Clone)]
pub struct TagSelector {
    /// The pattern as written.
    pub pattern: regex::bytes::Regex,
    /// The rule set's tags the pattern matches (filled by [`number`]).
    pub tags: TagSet,
}

impl TagSelector {
    /// A selector of the tags `pattern` matches, to be numbered by [`number`].
    pub fn new(pattern: regex::bytes::Regex) -> TagSelector {
        TagSelector {
            pattern,
            tags: TagSet::default(),
        }
    }
}

/// Numbers the tags of every rule in `phases`, sets each link's [`Rule::tag_set`],
/// and fills the [`TagSelector`] of every `ctl` that removes by tag. Returns the
/// table (each distinct tag's number).
pub(crate) fn number(phases: &mut [Vec<Entry>; 5]) -> HashMap<String, usize> {
    let mut ids = HashMap::new();
    number_with(phases, &mut ids);
    ids
}

/// [`number`] continuing the table `ids` (a site's overlay numbers its tags after
/// those of the base rule set, so that a tag has one number in both).
pub(crate) fn number_with(phases: &mut [Vec<Entry>; 5], ids: &mut HashMap<String, usize>) {
    for_each_link(phases, &mut |l| {
        let mut set = TagSet::default();
        for t in &l.meta.tags {
            let next = ids.len();
            set.insert(*ids.entry(t.clone()).or_insert(next));
        }
        l.tag_set = set;
    });
    for_each_link(phases, &mut |l| {
        for a in l
            .match_actions
            .iter_mut()
            .chain(l.full_match_actions.iter_mut())
        {
            if let Action::Ctl(Ctl::RuleRemoveByTag(sel) | Ctl::RuleRemoveTargetByTag(sel, _)) = a {
                fill(sel, ids);
            }
        }
    });
}

/// Fills `sel`'s set with the tags of `ids` its pattern matches.
pub(crate) fn fill(sel: &mut TagSelector, ids: &HashMap<String, usize>) {
    let mut set = TagSet::default();
    for (t, &i) in ids {
        if sel.pattern.is_match(t.as_bytes()) {
            set.insert(i);
        }
    }
    sel.tags = set;
}

fn for_each_link(phases: &mut [Vec<Entry>; 5], f: &mut impl FnMut(&mut Rule)) {
    for e in phases.iter_mut().flatten() {
        if let Entry::Rule(r) = e {
            let mut link = Some(r.as_mut());
            while let Some(l) = link {
                f(l);
                link = l.chain.as_deref_mut();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets() {
        let mut a = TagSet::default();
        assert!(a.is_empty());
        a.insert(3);
        a.insert(130);
        let mut b = TagSet::default();
        b.insert(130);
        assert!(a.intersects(&b));
        let mut c = TagSet::default();
        c.insert(4);
        assert!(!a.intersects(&c));
        c.union_with(&b);
        assert!(a.intersects(&c));
        assert!(!c.is_empty());
    }
}
