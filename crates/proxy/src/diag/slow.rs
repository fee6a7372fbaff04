//! The slowest recent requests, with their phase times: what an incident bundle
//! (`palisade diag`) and `GET /debug/slow` show.
//!
//! The in-line summary sink offers every request; a request faster than the
//! slowest kept ones is turned away by one atomic load, so the request path pays
//! nothing more in the common case. Requests are kept per window of
//! [`WINDOW_SECS`]: the current window and the one before it, so "recent" means
//! the last five to ten minutes.

use crate::summary::RequestSummary;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many requests each window keeps.
pub const KEPT: usize = 32;

/// The length of a window, in seconds.
pub const WINDOW_SECS: i64 = 300;

/// The longest request URI kept, in bytes.
const URI_KEPT: usize = 512;

/// One slow request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SlowRequest {
    /// When it arrived, microseconds since the Unix epoch.
    pub start_us: i64,
    /// Its transaction id, when one was made.
    pub unique_id: String,
    /// The method.
    pub method: String,
    /// The URI, cut to 512 bytes.
    pub uri: String,
    /// Its site.
    pub site: String,
    /// The response status.
    pub status: u16,
    /// The whole request, in microseconds.
    pub total_us: u64,
    /// Each WAF phase's wall time (`None`: did not run).
    pub phase_us: [Option<u64>; 5],
    /// The rule engine's CPU time, when measured.
    pub waf_cpu_us: Option<u64>,
    /// The upstream's connect and first-byte times, in microseconds.
    pub upstream_connect_us: Option<u64>,
    /// The upstream's first byte, in microseconds.
    pub upstream_first_byte_us: Option<u64>,
    /// The rules that matched.
    pub rules: Vec<i64>,
}

#[derive(Debug, Default)]
struct Window {
    /// The window's start, Unix seconds / [`WINDOW_SECS`].
    at: i64,
    kept: Vec<SlowRequest>,
}

/// The slowest requests of the current and the previous window.
#[derive(Debug, Default)]
pub struct SlowRequests {
    windows: Mutex<[Window; 2]>,
    /// A request at most this slow cannot enter the current window (its slowest
    /// [`KEPT`] are all slower): the fast path's one atomic load.
    threshold_us: AtomicU64,
    /// The current window's start, as `threshold_us` knows it.
    threshold_at: AtomicU64,
}

impl SlowRequests {
    /// Offers a finished request.
    // Not inlined: bench/instrumentation.py reads its cost by name.
    #[inline(never)]
    pub fn offer(&self, s: &RequestSummary) {
        let at = s.start_us.div_euclid(1_000_000).div_euclid(WINDOW_SECS);
        if self.threshold_at.load(Ordering::Relaxed) == at as u64
            && s.total_us <= self.threshold_us.load(Ordering::Relaxed)
        {
            return;
        }
        let mut w = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if w[1].at != at {
            if w[1].at < at {
                let old = std::mem::take(&mut w[1]);
                w[0] = if old.at == at - 1 {
                    old
                } else {
                    Window::default()
                };
                w[1].at = at;
            } else {
                // A request that started in an earlier window and ended now.
                return;
            }
        }
        let kept = &mut w[1].kept;
        if kept.len() >= KEPT {
            let (i, fastest) = kept
                .iter()
                .enumerate()
                .min_by_key(|(_, r)| r.total_us)
                .map(|(i, r)| (i, r.total_us))
                .unwrap_or((0, 0));
            if s.total_us <= fastest {
                return;
            }
            kept.swap_remove(i);
        }
        kept.push(SlowRequest {
            start_us: s.start_us,
            unique_id: s.unique_id.clone(),
            method: s.method.clone(),
            uri: crate::summary::cut(s.uri.clone(), URI_KEPT),
            site: s.site.to_string(),
            status: s.status,
            total_us: s.total_us,
            phase_us: s.phase_us,
            waf_cpu_us: s.waf_cpu_us,
            upstream_connect_us: s.up_timing.map(|u| u.connect_us),
            upstream_first_byte_us: s.up_timing.map(|u| u.first_byte_us),
            rules: s.rule_ids(),
        });
        let threshold = if kept.len() >= KEPT {
            kept.iter().map(|r| r.total_us).min().unwrap_or(0)
        } else {
            0
        };
        self.threshold_us.store(threshold, Ordering::Relaxed);
        self.threshold_at.store(at as u64, Ordering::Relaxed);
    }

    /// The slowest recent requests (both windows), slowest first.
    pub fn slowest(&self) -> Vec<SlowRequest> {
        let w = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<SlowRequest> = w.iter().flat_map(|w| w.kept.iter().cloned()).collect();
        all.sort_by(|a, b| {
            b.total_us
                .cmp(&a.total_us)
                .then(a.start_us.cmp(&b.start_us))
        });
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(start_s: i64, total_us: u64, uri: &str) -> RequestSummary {
        RequestSummary {
            start_us: start_s * 1_000_000,
            total_us,
            ..RequestSummary::for_test(uri)
        }
    }

    #[test]
    fn keeps_the_slowest_of_the_last_two_windows() {
        let slow = SlowRequests::default();
        let t0 = WINDOW_SECS * 1000;
        for i in 0..100u64 {
            slow.offer(&summary(t0, i, &format!("/a{i}")));
        }
        let kept = slow.slowest();
        assert_eq!(kept.len(), KEPT);
        assert_eq!(kept[0].total_us, 99);
        assert_eq!(kept[KEPT - 1].total_us, 100 - KEPT as u64);
        assert_eq!(kept[0].uri, "/a99");
        // The next window keeps the last one's; the one after drops it.
        slow.offer(&summary(t0 + WINDOW_SECS, 5, "/b"));
        assert_eq!(slow.slowest().len(), KEPT + 1);
        slow.offer(&summary(t0 + 2 * WINDOW_SECS, 7, "/c"));
        let kept = slow.slowest();
        assert_eq!(
            kept.iter().map(|r| r.uri.as_str()).collect::<Vec<_>>(),
            ["/c", "/b"]
        );
        // A request that began in an earlier window is not kept.
        slow.offer(&summary(t0, 1_000_000, "/late"));
        assert!(slow.slowest().iter().all(|r| r.uri != "/late"));
    }
}
