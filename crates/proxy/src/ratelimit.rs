//! Rate limits (`[[rate_limit]]`): requests per key (client address, a header, a
//! cookie, the path, or a TX variable that rules set), answered 429 with
//! `Retry-After` when over.
//!
//! Each limit is a generic cell rate algorithm (GCRA, a token bucket kept as one
//! number per key: the time at which the key's bucket is full again). A key's state
//! is 8 bytes in one of 64 shards, each with its own lock, so workers on different
//! keys never wait on one another, and no lock is shared by all requests. Keys are
//! hashed with a per-process random SipHash key, so a client cannot choose keys that
//! collide. Memory is bounded by `max_keys`: a full shard first drops its idle keys
//! (whose bucket is full again, so forgetting them changes nothing); a key that still
//! finds no room is let through uncounted, and counted in
//! `palisade_rate_limit_untracked_total`.

use crate::config::RateLimitSection;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const SHARDS: usize = 64;

/// What a limit's key is made of; several parts are joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// The client's address (`client_ip`).
    ClientIp,
    /// A request header's first value (`header:NAME`); a request without it is not
    /// limited by this limit.
    Header(String),
    /// A cookie's value (`cookie:NAME`); a request without it is not limited.
    Cookie(String),
    /// The request path, without the query (`path`): a limit shared by every client
    /// of a route.
    Path,
    /// A TX variable set by the rules in phase 1 (`tx:NAME`): checked after phase 1,
    /// so SecLang decides the key (for instance
    /// `setvar:tx.rate_key=%{REQUEST_HEADERS.X-Api-Key}`). Unset: not limited.
    Tx(String),
}

impl KeyPart {
    /// Parses one key part as written in the configuration.
    pub fn parse(s: &str) -> Result<KeyPart, String> {
        let (kind, name) = match s.split_once(':') {
            Some((k, n)) => (k, Some(n)),
            None => (s, None),
        };
        let named = |n: Option<&str>| match n {
            Some(n) if !n.is_empty() => Ok(n.to_ascii_lowercase()),
            _ => Err(format!("key part {s:?} needs a name after the colon")),
        };
        match (kind, name) {
            ("client_ip", None) => Ok(KeyPart::ClientIp),
            ("path", None) => Ok(KeyPart::Path),
            ("header", n) => Ok(KeyPart::Header(named(n)?)),
            ("cookie", n) => Ok(KeyPart::Cookie(named(n)?)),
            ("tx", n) => Ok(KeyPart::Tx(named(n)?)),
            _ => Err(format!(
                "unknown key part {s:?} (client_ip, path, header:NAME, cookie:NAME or tx:NAME)"
            )),
        }
    }
}

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
    status: u16,
    interval_ns: u64,
    tolerance_ns: u64,
    per_shard: usize,
    hasher: std::collections::hash_map::RandomState,
    epoch: Instant,
    shards: Box<[Shard]>,
    /// Requests answered with the limit's status.
    pub limited: AtomicU64,
    /// Requests let through because their key found no room.
    pub untracked: AtomicU64,
}

impl RateLimiter {
    /// Builds a limit from its configuration (already checked by the configuration's
    /// validation).
    pub fn new(cfg: &RateLimitSection) -> Result<RateLimiter, String> {
        let rate = parse_rate(&cfg.rate).map_err(|e| format!("rate_limit {:?}: {e}", cfg.name))?;
        let parts = cfg
            .key
            .parts()
            .iter()
            .map(|p| KeyPart::parse(p))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("rate_limit {:?}: {e}", cfg.name))?;
        if parts.is_empty() {
            return Err(format!("rate_limit {:?}: key is empty", cfg.name));
        }
        let interval_ns = (1e9 / rate).max(1.0) as u64;
        Ok(RateLimiter {
            name: cfg.name.clone(),
            parts,
            path_prefix: cfg.path_prefix.clone(),
            status: cfg.status,
            interval_ns,
            tolerance_ns: interval_ns.saturating_mul(u64::from(cfg.burst)),
            per_shard: cfg.max_keys.div_ceil(SHARDS).max(1),
            hasher: std::collections::hash_map::RandomState::new(),
            epoch: Instant::now(),
            shards: (0..SHARDS)
                .map(|_| Shard(Mutex::new(HashMap::default())))
                .collect(),
            limited: AtomicU64::new(0),
            untracked: AtomicU64::new(0),
        })
    }

    /// True when the key is read after phase 1 (it has a `tx:` part).
    pub fn after_phase1(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, KeyPart::Tx(_)))
    }

    /// True when the limit applies to a request for `path`.
    pub fn applies(&self, path: &[u8]) -> bool {
        self.path_prefix
            .as_ref()
            .is_none_or(|p| path.starts_with(p.as_bytes()))
    }

    /// Keys currently tracked.
    pub fn keys(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.0.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }

    /// Counts one request of `key` at `now`.
    pub fn check(&self, key: &[u8], now: Instant) -> Verdict {
        let mut h = self.hasher.build_hasher();
        h.write(key);
        let hash = h.finish();
        let now_ns = u64::try_from(now.saturating_duration_since(self.epoch).as_nanos())
            .unwrap_or(u64::MAX)
            // Never 0, so that a stored 0 cannot be mistaken for a time.
            .max(1);
        let shard = &self.shards[(hash >> 58) as usize % SHARDS];
        let mut map = shard.0.lock().unwrap_or_else(|e| e.into_inner());
        let tat = match map.get(&hash) {
            Some(&t) => t.max(now_ns),
            None => {
                if map.len() >= self.per_shard {
                    // Idle keys' buckets are full again: forgetting them is exact.
                    map.retain(|_, t| *t > now_ns);
                    if map.len() >= self.per_shard {
                        drop(map);
                        self.untracked.fetch_add(1, Ordering::Relaxed);
                        return Verdict::Pass;
                    }
                }
                now_ns
            }
        };
        if tat - now_ns > self.tolerance_ns {
            drop(map);
            self.limited.fetch_add(1, Ordering::Relaxed);
            return Verdict::Limited {
                status: self.status,
                retry_after: Duration::from_nanos(tat - now_ns - self.tolerance_ns),
            };
        }
        map.insert(hash, tat + self.interval_ns);
        Verdict::Pass
    }
}

/// One shard: its lock and map on cache lines of their own, so that two workers
/// on different shards do not slow each other down by sharing a line.
#[derive(Debug)]
#[repr(align(128))]
struct Shard(Mutex<HashMap<u64, u64, PassThrough>>);

/// The keys are already SipHash values: the map uses them as they are.
#[derive(Debug, Clone, Copy, Default)]
struct PassThrough;

impl BuildHasher for PassThrough {
    type Hasher = PassThroughHasher;
    fn build_hasher(&self) -> PassThroughHasher {
        PassThroughHasher(0)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The value of a cookie in a `Cookie` header value.
pub fn cookie_value<'a>(header: &'a [u8], name: &str) -> Option<&'a [u8]> {
    header.split(|&b| b == b';').find_map(|pair| {
        let pair = pair.trim_ascii();
        let eq = pair.iter().position(|&b| b == b'=')?;
        pair[..eq]
            .trim_ascii()
            .eq_ignore_ascii_case(name.as_bytes())
            .then(|| pair[eq + 1..].trim_ascii())
    })
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
            max_keys,
        })
        .unwrap()
    }

    #[test]
    fn rates_and_key_parts_parse() {
        assert_eq!(parse_rate("100/s").unwrap(), 100.0);
        assert_eq!(parse_rate("600/min").unwrap(), 10.0);
        assert_eq!(parse_rate("36 / h").unwrap(), 0.01);
        for bad in ["100", "0/s", "-1/s", "x/s", "10/day"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(
            KeyPart::parse("header:X-Api-Key").unwrap(),
            KeyPart::Header("x-api-key".into())
        );
        assert_eq!(
            KeyPart::parse("tx:Rate_Key").unwrap(),
            KeyPart::Tx("rate_key".into())
        );
        assert!(KeyPart::parse("header:").is_err());
        assert!(KeyPart::parse("ip").is_err());
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
        assert_eq!(l.limited.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn memory_is_bounded_and_idle_keys_make_room() {
        let l = limiter("1/s", 0, 640);
        let t0 = Instant::now();
        for i in 0..10_000u32 {
            l.check(&i.to_le_bytes(), t0);
        }
        assert!(l.keys() <= 640, "{}", l.keys());
        assert!(l.untracked.load(Ordering::Relaxed) > 0);
        // Two seconds later every key is idle: new keys find room (100 keys over 64
        // shards of 10: no shard overflows but with negligible odds).
        let t1 = t0 + Duration::from_secs(2);
        let before = l.untracked.load(Ordering::Relaxed);
        for i in 10_000..10_100u32 {
            assert_eq!(l.check(&i.to_le_bytes(), t1), Verdict::Pass);
        }
        assert_eq!(l.untracked.load(Ordering::Relaxed), before);
        // A tracked key is still limited.
        assert!(matches!(
            l.check(&10_000u32.to_le_bytes(), t1),
            Verdict::Limited { .. }
        ));
    }

    #[test]
    fn cookies() {
        let h = b"a=1; session=abc ; theme=dark";
        assert_eq!(cookie_value(h, "session"), Some(&b"abc"[..]));
        assert_eq!(cookie_value(h, "SESSION"), Some(&b"abc"[..]));
        assert_eq!(cookie_value(h, "none"), None);
    }
}
