//! What each rule costs in production: a sampled account of rule evaluation time
//! (what ModSecurity v2's `SecRulePerfTime` gave, and v3 dropped).
//!
//! One request in `server.rule_cost_sample` is timed rule by rule
//! ([`engine::Transaction::time_rules`]); its times reach [`RuleCosts`] through
//! the request summary, once per request. The table is read by `GET /top` on the
//! admin listener and by the dashboard, and its totals by `/metrics`. Requests not
//! sampled pay one branch per rule.

use crate::metrics::{Collector, Exposition};
use rustc_hash::FxHashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most distinct rules the table keeps (CRS has about 700; a site's own
/// rules add some). Rules seen after that are counted only in the totals.
pub const MAX_RULES: usize = 8192;

/// The sampled time of every rule, since the process started.
#[derive(Debug, Default)]
pub struct RuleCosts {
    table: Mutex<FxHashMap<(Option<i64>, u8), Cost>>,
    /// Requests timed.
    sampled: AtomicU64,
    /// Nanoseconds of rule evaluation in the timed requests, all rules together.
    nanos: AtomicU64,
}

/// One rule's account, in one phase.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Cost {
    evaluations: u64,
    nanos: u64,
    max_nanos: u64,
}

/// A rule's line in the top list.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RuleCostLine {
    /// The rule id (a chain's first rule's); `None` for a rule without one.
    pub rule_id: Option<i64>,
    /// The phase it ran in.
    pub phase: u8,
    /// Evaluations in the timed requests.
    pub evaluations: u64,
    /// All its evaluations together, in microseconds.
    pub total_us: f64,
    /// Its mean evaluation, in microseconds.
    pub mean_us: f64,
    /// Its longest evaluation, in microseconds.
    pub max_us: f64,
    /// What it adds to a timed request on average, in microseconds.
    pub per_request_us: f64,
    /// Its share of all rule time in the timed requests (0 to 1).
    pub share: f64,
}

impl RuleCosts {
    /// Adds one timed request's rule times (phase, time) to the account.
    // Not inlined: bench/instrumentation.py reads its cost by name.
    #[inline(never)]
    pub fn record(&self, times: &[(u8, engine::RuleTime)]) {
        if times.is_empty() {
            return;
        }
        let mut sum = 0u64;
        {
            let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
            for (phase, t) in times {
                sum = sum.saturating_add(t.nanos);
                let key = (t.rule_id, *phase);
                let full = table.len() >= MAX_RULES;
                let c = match table.get_mut(&key) {
                    Some(c) => c,
                    None if full => continue,
                    None => table.entry(key).or_default(),
                };
                c.evaluations += 1;
                c.nanos = c.nanos.saturating_add(t.nanos);
                c.max_nanos = c.max_nanos.max(t.nanos);
            }
        }
        self.sampled.fetch_add(1, Ordering::Relaxed);
        self.nanos.fetch_add(sum, Ordering::Relaxed);
    }

    /// Requests timed so far.
    pub fn sampled(&self) -> u64 {
        self.sampled.load(Ordering::Relaxed)
    }

    /// The `n` rules that took the most time, the most first (ties by rule id).
    pub fn top(&self, n: usize) -> Vec<RuleCostLine> {
        let sampled = self.sampled().max(1) as f64;
        let all = self.nanos.load(Ordering::Relaxed).max(1) as f64;
        let mut rows: Vec<_> = {
            let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
            table.iter().map(|(k, c)| (*k, *c)).collect()
        };
        rows.sort_by(|a, b| b.1.nanos.cmp(&a.1.nanos).then(a.0.cmp(&b.0)));
        rows.truncate(n);
        rows.into_iter()
            .map(|((rule_id, phase), c)| RuleCostLine {
                rule_id,
                phase,
                evaluations: c.evaluations,
                total_us: c.nanos as f64 / 1e3,
                mean_us: c.nanos as f64 / 1e3 / c.evaluations.max(1) as f64,
                max_us: c.max_nanos as f64 / 1e3,
                per_request_us: c.nanos as f64 / 1e3 / sampled,
                share: c.nanos as f64 / all,
            })
            .collect()
    }
}

impl Collector for RuleCosts {
    fn collect(&self, out: &mut Exposition) {
        out.counter(
            "palisade_rule_cost_sampled_requests_total",
            "Requests whose rules were timed one by one (server.rule_cost_sample); GET /top lists the rules that took the most time.",
            self.sampled() as f64,
        );
        out.counter(
            "palisade_rule_cost_seconds_total",
            "Rule evaluation time in the timed requests, all rules together.",
            self.nanos.load(Ordering::Relaxed) as f64 / 1e9,
        );
    }
}

/// Decides which requests are timed: one in `every`, counted per thread (no
/// shared counter on the request path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampler {
    every: u64,
}

impl Sampler {
    /// The fraction of requests timed (1 / the interval; 0 when off).
    pub fn rate(&self) -> f64 {
        if self.every == 0 {
            0.0
        } else {
            1.0 / self.every as f64
        }
    }
}

impl Sampler {
    /// A sampler timing the fraction `rate` (0 to 1) of requests: one in
    /// `round(1 / rate)`; none for 0.
    pub fn new(rate: f64) -> Sampler {
        let every = if rate > 0.0 && rate.is_finite() {
            (1.0 / rate.min(1.0)).round().max(1.0) as u64
        } else {
            0
        };
        Sampler { every }
    }

    /// Whether the next request on this thread is timed.
    pub fn next(&self) -> bool {
        thread_local! {
            static SEEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
        }
        if self.every == 0 {
            return false;
        }
        SEEN.with(|s| {
            let n = s.get().wrapping_add(1);
            s.set(n);
            n % self.every == 0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(rule_id: i64, nanos: u64) -> engine::RuleTime {
        engine::RuleTime {
            rule_id: Some(rule_id),
            nanos,
        }
    }

    #[test]
    fn the_top_list_ranks_rules_by_total_time() {
        let c = RuleCosts::default();
        c.record(&[(1, t(10, 1_000)), (2, t(20, 9_000)), (2, t(30, 5_000))]);
        c.record(&[(1, t(10, 3_000)), (2, t(20, 1_000)), (2, t(20, 2_000))]);
        c.record(&[]);
        assert_eq!(c.sampled(), 2);
        let top = c.top(10);
        let order: Vec<_> = top.iter().map(|l| (l.rule_id, l.phase)).collect();
        assert_eq!(order, [(Some(20), 2), (Some(30), 2), (Some(10), 1)]);
        let r20 = &top[0];
        assert_eq!(r20.evaluations, 3);
        assert_eq!(r20.total_us, 12.0);
        assert_eq!(r20.mean_us, 4.0);
        assert_eq!(r20.max_us, 9.0);
        assert_eq!(r20.per_request_us, 6.0);
        assert!((r20.share - 12.0 / 21.0).abs() < 1e-9);
        assert_eq!(c.top(1).len(), 1);
        let mut e = Exposition::default();
        c.collect(&mut e);
        let text = e.into_text();
        assert!(
            text.contains("palisade_rule_cost_sampled_requests_total 2\n"),
            "{text}"
        );
        assert!(
            text.contains("palisade_rule_cost_seconds_total 0.000021\n"),
            "{text}"
        );
    }

    #[test]
    fn the_table_is_bounded() {
        let c = RuleCosts::default();
        let many: Vec<_> = (0..MAX_RULES as i64 + 10).map(|i| (2, t(i, 1))).collect();
        c.record(&many);
        assert_eq!(c.top(usize::MAX).len(), MAX_RULES);
        // The rules past the bound still count in the totals.
        assert_eq!(c.nanos.load(Ordering::Relaxed), MAX_RULES as u64 + 10);
    }

    #[test]
    fn the_sampler_times_one_request_in_every() {
        let count = |rate: f64| (0..1000).filter(|_| Sampler::new(rate).next()).count();
        assert_eq!(count(0.0), 0);
        assert_eq!(count(1.0), 1000);
        let s = Sampler::new(0.01);
        assert_eq!((0..1000).filter(|_| s.next()).count(), 10);
        assert_eq!(Sampler::new(f64::NAN), Sampler::new(0.0));
    }
}
