//! The rule ids a transaction's `ctl:ruleRemoveById` actions removed, kept as sorted,
//! disjoint ranges: a rule set checks every rule against them, so a lookup is a
//! binary search rather than a walk over every range a `ctl` named.

use seclang::IdRange;

/// Removed rule ids: sorted, disjoint, non-adjacent ranges.
#[derive(Debug, Clone, Default)]
pub struct RemovedIds(Vec<IdRange>);

impl RemovedIds {
    /// Adds `ranges` (in any order, overlapping or not).
    pub fn add(&mut self, ranges: &[IdRange]) {
        for &r in ranges {
            self.insert(r);
        }
    }

    /// Adds one range, merging it with the ranges it overlaps or touches.
    fn insert(&mut self, mut r: IdRange) {
        let i = self
            .0
            .partition_point(|x| x.end.saturating_add(1) < r.start);
        let mut j = i;
        while j < self.0.len() && self.0[j].start <= r.end.saturating_add(1) {
            r.start = r.start.min(self.0[j].start);
            r.end = r.end.max(self.0[j].end);
            j += 1;
        }
        self.0.splice(i..j, [r]);
    }

    /// Whether `id` was removed.
    pub fn contains(&self, id: i64) -> bool {
        let i = self.0.partition_point(|r| r.end < id);
        self.0.get(i).is_some_and(|r| r.contains(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: i64, end: i64) -> IdRange {
        IdRange { start, end }
    }

    #[test]
    fn ranges_merge_and_answer() {
        let mut s = RemovedIds::default();
        assert!(!s.contains(5));
        s.add(&[r(10, 20), r(5, 5)]);
        s.add(&[r(21, 25), r(100, 100), r(15, 30)]);
        assert_eq!(s.0.len(), 3);
        for id in [5, 10, 20, 21, 30, 100] {
            assert!(s.contains(id), "{id}");
        }
        for id in [4, 6, 9, 31, 99, 101, i64::MAX] {
            assert!(!s.contains(id), "{id}");
        }
        s.add(&[r(i64::MAX, i64::MAX)]);
        assert!(s.contains(i64::MAX));
    }
}
