//! Rate limits (`[[rate_limit]]`): requests per key (client address, a header, a
//! cookie, the path, or a TX variable that rules set), answered 429 with
//! `Retry-After` when over.
//!
//! Each limit is a generic cell rate algorithm (GCRA, a token bucket kept as one
//! number per key: the time at which the key's bucket is full again, a [`Gcra`]). A
//! key's state is one atomic word in a [`KeyTable`]: a request of a key already
//! tracked finds it without a lock and counts itself with a compare-and-swap; only a
//! new key takes its shard's lock (64 shards), so no lock is shared by all requests
//! and none is taken by most. Memory is bounded by `max_keys`: a full shard first drops its
//! idle keys (whose bucket is full again, so forgetting them changes nothing); a key
//! that still finds no room is let through uncounted, and counted in
//! `palisade_rate_limit_untracked_total`.

use crate::config::RateLimitSection;
use crate::keyed::{Gcra, KeyPart, KeyTable, Taken};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Parses a rate such as `100/s`, `600/min` or `36000/h` into requests per second.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let (n, unit) = s
        .split_once('/')
        .ok_or_else(|| format!("rate {s:?}: expected N/s, N/min or N/h"))?;
    let n: f64 = n
        .trim()
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n > 0.0)
        .ok_or_else(|| format!("rate {s:?}: the count must be a positive number"))?;
    let per = match unit.trim() {
        "s" | "sec" | "second" => 1.0,
        "m" | "min" | "minute" => 60.0,
        "h" | "hour" => 3600.0,
        u => return Err(format!("rate {s:?}: unknown unit {u:?} (s, min or h)")),
    };
    Ok(n / per)
}

/// The verdict of a limit on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within the limit (or the limit does not apply).
    Pass,
    /// Over the limit: answer with this status and `Retry-After`.
    Limited {
        /// The status (`status`, 429 by default).
        status: u16,
        /// When the key may send again.
        retry_after: Duration,
    },
}

/// One `[[rate_limit]]`.
#[derive(Debug)]
pub struct RateLimiter {
    /// The limit's name (metrics label).
    pub name: String,
    /// The key's parts.
    pub parts: Vec<KeyPart>,
    /// Only requests whose path starts with this are limited.
    pub path_prefix: Option<String>,
    /// Only requests of these sites are limited (`None`: every request).
    sites: Option<Vec<Box<str>>>,
    status: u16,
    /// A part of the key is a TX variable: the limit is checked after phase 1.
    tx_keyed: bool,
    /// The limit reads the request's path (a `path_prefix`, or a `path` key part).
    reads_path: bool,
    interval_ns: u64,
    tolerance_ns: u64,
    max_keys: usize,
    /// The per-key state and counters: shared with the limit of the same name,
    /// key and `max_keys` that a reload puts in force (see
    /// [`RateLimiter::new_keeping`]).
    state: std::sync::Arc<LimitState>,
}

/// What a rate limit has counted: its keys' buckets and its counters. A reload
/// hands it on to the new definition of the same limit.
#[derive(Debug)]
struct LimitState {
    epoch: Instant,
    table: KeyTable<Gcra>,
    /// Requests answered with the limit's status.
    limited: AtomicU64,
    /// Requests let through because their key found no room.
    untracked: AtomicU64,
}

impl RateLimiter {
    /// Builds a limit from its configuration (already checked by the configuration's
    /// validation).
    pub fn new(cfg: &RateLimitSection) -> Result<RateLimiter, String> {
        RateLimiter::new_keeping(cfg, &[])
    }

    /// Builds a limit like [`RateLimiter::new`] for a reload: when `running` has a
    /// limit of the same identity (the same name, key parts and `max_keys`), the new
    /// one takes over its per-key state and counters, so its clients' buckets stay
    /// as they were; the new rate, burst, status, path and sites apply from now.
    pub fn new_keeping(
        cfg: &RateLimitSection,
        running: &[std::sync::Arc<RateLimiter>],
    ) -> Result<RateLimiter, String> {
        let rate = parse_rate(&cfg.rate).map_err(|e| format!("rate_limit {:?}: {e}", cfg.name))?;
        let parts = KeyPart::parse_all(&cfg.key.parts())
            .map_err(|e| format!("rate_limit {:?}: {e}", cfg.name))?;
        let interval_ns = (1e9 / rate).max(1.0) as u64;
        let state = running
            .iter()
            .find(|l| l.name == cfg.name && l.parts == parts && l.max_keys == cfg.max_keys)
            .map_or_else(
                || {
                    std::sync::Arc::new(LimitState {
                        epoch: Instant::now(),
                        table: KeyTable::new(cfg.max_keys, || Gcra::new(0)),
                        limited: AtomicU64::new(0),
                        untracked: AtomicU64::new(0),
                    })
                },
                |l| l.state.clone(),
            );
        Ok(RateLimiter {
            name: cfg.name.clone(),
            tx_keyed: parts.iter().any(|p| matches!(p, KeyPart::Tx(_))),
            reads_path: cfg.path_prefix.is_some() || parts.contains(&KeyPart::Path),
            parts,
            path_prefix: cfg.path_prefix.clone(),
            sites: cfg
                .sites
                .as_ref()
                .map(|v| v.iter().map(|s| s.as_str().into()).collect()),
            status: cfg.status,
            interval_ns,
            tolerance_ns: interval_ns.saturating_mul(u64::from(cfg.burst)),
            max_keys: cfg.max_keys,
            state,
        })
    }

    /// True when the key is read after phase 1 (it has a `tx:` part).
    pub fn after_phase1(&self) -> bool {
        self.tx_keyed
    }

    /// True when the limit reads the request's path: otherwise [`RateLimiter::applies`]
    /// and [`RateLimiter::check_request`] may be given an empty one.
    pub fn reads_path(&self) -> bool {
        self.reads_path
    }

    /// True when the limit applies to a request for `path`.
    pub fn applies(&self, path: &[u8]) -> bool {
        self.path_prefix
            .as_ref()
            .is_none_or(|p| path.starts_with(p.as_bytes()))
    }

    /// True when the limit applies to the requests of the site named `site`
    /// (`default` for requests of no site).
    pub fn applies_to_site(&self, site: &str) -> bool {
        self.sites
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| &**n == site))
    }

    /// Keys currently tracked.
    pub fn keys(&self) -> usize {
        self.state.table.len()
    }

    /// Requests answered with the limit's status so far.
    pub fn limited(&self) -> u64 {
        self.state.limited.load(Ordering::Relaxed)
    }

    /// Requests let through so far because their key found no room.
    pub fn untracked(&self) -> u64 {
        self.state.untracked.load(Ordering::Relaxed)
    }

    /// Counts one request of `key` at `now`.
    pub fn check(&self, key: &[u8], now: Instant) -> Verdict {
        self.check_hash(self.state.table.hash(key), now)
    }

    /// Counts one request at `now` under the key this limit's parts make for it
    /// (the client `peer`, the `path` without the query, the header lines, `tx` to
    /// read TX variables): `None` when the request has no such key and so is not
    /// limited by this limit.
    pub fn check_request<'h, I>(
        &self,
        peer: IpAddr,
        path: &[u8],
        headers: I,
        tx: impl FnMut(&str) -> Option<Vec<u8>>,
        now: Instant,
    ) -> Option<Verdict>
    where
        I: Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
    {
        let hash = self
            .state
            .table
            .hash_request(&self.parts, peer, path, headers, tx)?;
        Some(self.check_hash(hash, now))
    }

    /// Counts one request of the key whose table hash is `hash`, at `now`.
    fn check_hash(&self, hash: u64, now: Instant) -> Verdict {
        let now_ns = crate::keyed::nanos_since(self.state.epoch, now);
        // Idle keys' buckets are full again: forgetting them is exact (the table
        // retires them first, and a take on a retired bucket looks again).
        let verdict = self.state.table.with(
            hash,
            now_ns,
            || Gcra::new(now_ns),
            |bucket, tracked| {
                if !tracked {
                    return Some(None);
                }
                match bucket.take(now_ns, self.interval_ns, self.tolerance_ns) {
                    Taken::Took { .. } => Some(Some(Verdict::Pass)),
                    Taken::Refused { wait_ns } => Some(Some(Verdict::Limited {
                        status: self.status,
                        retry_after: Duration::from_nanos(wait_ns),
                    })),
                    Taken::Retired => None,
                }
            },
        );
        match verdict {
            None => {
                self.state.untracked.fetch_add(1, Ordering::Relaxed);
                Verdict::Pass
            }
            Some(v @ Verdict::Limited { .. }) => {
                self.state.limited.fetch_add(1, Ordering::Relaxed);
                v
            }
            Some(Verdict::Pass) => Verdict::Pass,
        }
    }
}

/// Writes the `[[rate_limit]]`s' counters, labelled by limit.
pub fn write_metrics(out: &mut crate::metrics::Exposition, limits: &[std::sync::Arc<RateLimiter>]) {
    use crate::metrics::escape_label;
    use std::fmt::Write as _;
    let out = out.text_mut();
    if limits.is_empty() {
        return;
    }
    type Value = fn(&RateLimiter) -> f64;
    let series: [(&str, &str, &str, Value); 3] = [
        (
            "palisade_rate_limited_total",
            "counter",
            "Requests refused by a rate limit.",
            |l| l.limited() as f64,
        ),
        (
            "palisade_rate_limit_untracked_total",
            "counter",
            "Requests let through unlimited because the limit tracked max_keys keys, none idle.",
            |l| l.untracked() as f64,
        ),
        (
            "palisade_rate_limit_keys",
            "gauge",
            "Keys a rate limit tracks now.",
            |l| l.keys() as f64,
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for l in limits {
            let _ = writeln!(
                out,
                "{name}{{limit=\"{}\"}} {}",
                escape_label(&l.name),
                value(l)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{RateLimitKey, RateLimitSection};

    fn limiter(rate: &str, burst: u32, max_keys: usize) -> RateLimiter {
        RateLimiter::new(&RateLimitSection {
            name: "t".into(),
            key: RateLimitKey::One("client_ip".into()),
            rate: rate.into(),
            burst,
            status: 429,
            path_prefix: None,
            sites: None,
            max_keys,
        })
        .unwrap()
    }

    #[test]
    fn rates_parse() {
        assert_eq!(parse_rate("100/s").unwrap(), 100.0);
        assert_eq!(parse_rate("600/min").unwrap(), 10.0);
        assert_eq!(parse_rate("36 / h").unwrap(), 0.01);
        for bad in ["100", "0/s", "-1/s", "x/s", "10/day"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn burst_then_steady_rate_with_retry_after() {
        let l = limiter("10/s", 2, 1000);
        let t0 = Instant::now();
        // 1 + burst at once.
        for _ in 0..3 {
            assert_eq!(l.check(b"a", t0), Verdict::Pass);
        }
        let Verdict::Limited {
            status,
            retry_after,
        } = l.check(b"a", t0)
        else {
            panic!("the fourth is over");
        };
        assert_eq!(status, 429);
        assert_eq!(retry_after, Duration::from_millis(100));
        // Another key is independent.
        assert_eq!(l.check(b"b", t0), Verdict::Pass);
        // One interval later, one more.
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(l.check(b"a", t1), Verdict::Pass);
        assert!(matches!(l.check(b"a", t1), Verdict::Limited { .. }));
        // Idle long enough: the full burst again.
        let t2 = t1 + Duration::from_secs(1);
        for _ in 0..3 {
            assert_eq!(l.check(b"a", t2), Verdict::Pass);
        }
        assert_eq!(l.limited(), 2);
    }

    #[test]
    fn memory_is_bounded_and_idle_keys_make_room() {
        let l = limiter("1/s", 0, 640);
        let t0 = Instant::now();
        for i in 0..10_000u32 {
            l.check(&i.to_le_bytes(), t0);
        }
        assert!(l.keys() <= 640, "{}", l.keys());
        assert!(l.untracked() > 0);
        // Two seconds later every key is idle: new keys find room (100 keys over 64
        // shards of 10: no shard overflows but with negligible odds).
        let t1 = t0 + Duration::from_secs(2);
        let before = l.untracked();
        for i in 10_000..10_100u32 {
            assert_eq!(l.check(&i.to_le_bytes(), t1), Verdict::Pass);
        }
        assert_eq!(l.untracked(), before);
        // A tracked key is still limited.
        assert!(matches!(
            l.check(&10_000u32.to_le_bytes(), t1),
            Verdict::Limited { .. }
        ));
    }
}
