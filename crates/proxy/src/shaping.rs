//! Bandwidth shaping of response bodies (`[[shape]]`): a class, chosen per request
//! (by a header, a cookie, the path, or a TX variable the rules set), sends the
//! bodies of each key (by default the client address) at most at its rate, after a
//! burst; every response of one key draws on the key's one bucket, so two
//! downloads at once share the rate.
//!
//! A key's bucket is a generic cell rate algorithm counted in bytes: one number,
//! the time at which the key's bucket is full again. A response takes its body in
//! pieces of at most [`PIECE`] bytes; each piece moves that time on by its cost at
//! the rate, and is sent once the time is within the burst of now (the response
//! waits on a tokio timer in between). So a response holds at most the upstream
//! frame it is cutting into pieces: pacing never buffers.
//!
//! The buckets ([`Gcra`], as the rate limits' are) live in a [`KeyTable`] (64
//! shards, lookups without a lock, memory bounded by `max_keys`), as the rate
//! limits' do. A response looks its key up once, when it starts, and keeps a handle
//! on the bucket: each piece then costs one compare-and-swap on the bucket, no lock
//! and no lookup. The counters are per
//! shard, so nothing is shared by all responses. A bucket is forgotten only when
//! no response holds it and it is full again (so forgetting it is exact). A key
//! that finds its shard full of busy keys shares the shard's spare bucket with the
//! other such keys: it is shaped more strictly, never less (counted in
//! `palisade_shaping_overflow_total`).

use crate::config::ShapeSection;
use crate::keyed::{Gcra, KeyPart, KeyTable, SHARDS, hold, path_of};
use byte_unit::Byte;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The largest piece of a body sent at once by a shaped response: small enough for
/// smooth pacing, large enough for few timers.
pub const PIECE: usize = 16 * 1024;

const NANOS: u128 = 1_000_000_000;

/// Parses a rate such as `256KiB/s`, `2Mbit/s` or `1MB/s` into bytes per second
/// (`B` is a byte, `b` or `bit` a bit; `Ki`, `Mi` are powers of 1024, `K`, `M` of
/// 1000).
pub fn parse_byte_rate(s: &str) -> Result<u64, String> {
    let amount = s
        .trim()
        .strip_suffix("/s")
        .ok_or_else(|| format!("rate {s:?}: expected an amount per second, as 256KiB/s"))?;
    let n = parse_bytes(amount).map_err(|e| format!("rate {s:?}: {e}"))?;
    if n == 0 {
        return Err(format!("rate {s:?}: must be at least 1 byte per second"));
    }
    Ok(n)
}

/// Parses an amount of bytes such as `64KiB`, `1MB` or `0`.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    Byte::parse_str(s.trim(), false)
        .map(|b| b.as_u64())
        .map_err(|e| format!("{s:?} is not an amount of bytes ({e})"))
}

/// One shard's counters, on cache lines of their own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stats {
    responses: AtomicU64,
    bytes: AtomicU64,
    delayed_ns: AtomicU64,
    overflow: AtomicU64,
}

/// One `[[shape]]` class, with its keys' buckets.
#[derive(Debug)]
pub struct Shaper {
    /// The class's name (metrics label).
    pub name: String,
    /// Whose bucket a response draws on.
    pub parts: Vec<KeyPart>,
    /// The class applies only to requests with this key part...
    pub when: Option<KeyPart>,
    /// ...with this value, when given.
    pub equals: Option<Vec<u8>>,
    /// Only requests whose path starts with this are shaped.
    pub path_prefix: Option<String>,
    rate: u64,
    tolerance_ns: u64,
    max_keys: usize,
    /// The keys' buckets and the counters: shared with the class of the same
    /// name, key and `max_keys` that a reload puts in force (see
    /// [`Shaper::new_keeping`]).
    state: Arc<ShapeState>,
}

/// What a class has counted: its keys' buckets and its counters. A reload hands
/// it on to the new definition of the same class.
#[derive(Debug)]
struct ShapeState {
    epoch: Instant,
    table: KeyTable<Bucket>,
    stats: Box<[Stats]>,
}

/// A key's bucket: the time (ns since the class's epoch) at which it is full again,
/// shared by the responses that hold it.
type Bucket = Arc<Gcra>;

/// What a class has done so far (summed over its shards).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShapeStats {
    /// Responses the class shaped.
    pub responses: u64,
    /// Body bytes that went through its buckets.
    pub bytes: u64,
    /// Time pieces were held back, over all responses, in nanoseconds.
    pub delayed_ns: u64,
    /// Pieces that drew on a shard's spare bucket (their key found no room).
    pub overflow: u64,
}

impl Shaper {
    /// Builds a class from its configuration; the error names the class and what
    /// is wrong.
    pub fn new(cfg: &ShapeSection) -> Result<Shaper, String> {
        Shaper::new_keeping(cfg, &[])
    }

    /// Builds a class like [`Shaper::new`] for a reload: when `running` has a
    /// class of the same identity (the same name, key parts and `max_keys`), the
    /// new one takes over its buckets and counters; the new rate, burst and
    /// conditions apply from now.
    pub fn new_keeping(cfg: &ShapeSection, running: &[Arc<Shaper>]) -> Result<Shaper, String> {
        let err = |e: String| format!("shape {:?}: {e}", cfg.name);
        let rate = parse_byte_rate(&cfg.rate).map_err(err)?;
        let burst = parse_bytes(&cfg.burst).map_err(|e| err(format!("burst: {e}")))?;
        let parts = KeyPart::parse_all(&cfg.key.parts()).map_err(err)?;
        let when = cfg
            .when
            .as_deref()
            .map(KeyPart::parse)
            .transpose()
            .map_err(|e| err(format!("when: {e}")))?;
        if cfg.equals.is_some() && when.is_none() {
            return Err(err("equals needs when (the key part it compares)".into()));
        }
        if cfg.max_keys == 0 {
            return Err(err("max_keys must be at least 1".into()));
        }
        let tolerance = u128::from(burst) * NANOS / u128::from(rate);
        let state = running
            .iter()
            .find(|c| c.name == cfg.name && c.parts == parts && c.max_keys == cfg.max_keys)
            .map_or_else(
                || {
                    Arc::new(ShapeState {
                        epoch: Instant::now(),
                        table: KeyTable::new(cfg.max_keys, || Arc::new(Gcra::new(0))),
                        stats: (0..SHARDS).map(|_| Stats::default()).collect(),
                    })
                },
                |c| c.state.clone(),
            );
        Ok(Shaper {
            name: cfg.name.clone(),
            parts,
            when,
            equals: cfg.equals.as_ref().map(|e| e.as_bytes().to_vec()),
            path_prefix: cfg.path_prefix.clone(),
            rate,
            tolerance_ns: u64::try_from(tolerance).unwrap_or(u64::MAX),
            max_keys: cfg.max_keys,
            state,
        })
    }

    /// The rate in bytes per second.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Keys tracked now.
    pub fn keys(&self) -> usize {
        self.state.table.len()
    }

    /// The class's counters.
    pub fn stats(&self) -> ShapeStats {
        let mut s = ShapeStats::default();
        for st in self.state.stats.iter() {
            s.responses += st.responses.load(Ordering::Relaxed);
            s.bytes += st.bytes.load(Ordering::Relaxed);
            s.delayed_ns += st.delayed_ns.load(Ordering::Relaxed);
            s.overflow += st.overflow.load(Ordering::Relaxed);
        }
        s
    }

    fn stats_of(&self, hash: u64) -> &Stats {
        &self.state.stats[KeyTable::<Bucket>::shard_of(hash)]
    }

    /// The pacer of a response whose request has this client, target, header lines
    /// and TX variables (`tx`): from the first class of `classes` that selects the
    /// request and whose key it has; `None` when none does.
    pub fn select<'h, I>(
        classes: &[Arc<Shaper>],
        peer: IpAddr,
        uri: &[u8],
        headers: I,
        mut tx: impl FnMut(&str) -> Option<Vec<u8>>,
    ) -> Option<Pacer>
    where
        I: Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
    {
        let path = path_of(uri);
        for class in classes {
            if class
                .path_prefix
                .as_ref()
                .is_some_and(|p| !path.starts_with(p.as_bytes()))
            {
                continue;
            }
            if let Some(when) = &class.when {
                match when.value(peer, path, headers.clone(), &mut tx) {
                    None => continue,
                    Some(v) if class.equals.as_ref().is_some_and(|e| *e != v) => continue,
                    Some(_) => {}
                }
            }
            let Some(hash) =
                class
                    .state
                    .table
                    .hash_request(&class.parts, peer, path, headers.clone(), &mut tx)
            else {
                continue;
            };
            return Some(Shaper::pacer_of_hash(class, hash, Instant::now()));
        }
        None
    }

    /// The pacer of a response of `key` in this class (counted as one response):
    /// the key's bucket, found or made now.
    pub fn pacer(class: &Arc<Shaper>, key: &[u8]) -> Pacer {
        Shaper::pacer_at(class, key, Instant::now())
    }

    /// [`Shaper::pacer`] at `now`.
    pub fn pacer_at(class: &Arc<Shaper>, key: &[u8], now: Instant) -> Pacer {
        Shaper::pacer_of_hash(class, class.state.table.hash(key), now)
    }

    /// [`Shaper::pacer_at`] for the key whose table hash is `hash`.
    fn pacer_of_hash(class: &Arc<Shaper>, hash: u64, now: Instant) -> Pacer {
        let now_ns = crate::keyed::nanos_since(class.state.epoch, now);
        // A bucket no response holds and that is full again is idle (the table's
        // `Slot` for shared buckets): forgetting it is exact; a handle keeps it.
        let (bucket, tracked) = class.state.table.with(
            hash,
            now_ns,
            || Arc::new(Gcra::new(0)),
            |b, tracked| hold(b).map(|b| (b, tracked)),
        );
        class
            .stats_of(hash)
            .responses
            .fetch_add(1, Ordering::Relaxed);
        Pacer {
            class: class.clone(),
            bucket,
            hash,
            tracked,
        }
    }

    /// Takes `n` bytes from `bucket` (of the key whose hash is `hash`) at `now`:
    /// how long to wait before sending them.
    fn reserve(&self, bucket: &Gcra, hash: u64, tracked: bool, n: usize, now: Instant) -> Duration {
        let now_ns = crate::keyed::nanos_since(self.state.epoch, now);
        let cost = u128::try_from(n).unwrap_or(u128::MAX) * NANOS / u128::from(self.rate);
        let cost = u64::try_from(cost).unwrap_or(u64::MAX);
        let end = loop {
            match bucket.reserve(now_ns, cost) {
                Some(end) => break end,
                // A sweep found the bucket idle as this response took its handle,
                // and is giving it back (a held bucket is never forgotten).
                None => self.state.table.settle(hash),
            }
        };
        let wait = end.saturating_sub(self.tolerance_ns).saturating_sub(now_ns);
        let st = self.stats_of(hash);
        st.bytes.fetch_add(n as u64, Ordering::Relaxed);
        if wait > 0 {
            st.delayed_ns.fetch_add(wait, Ordering::Relaxed);
        }
        if !tracked {
            st.overflow.fetch_add(1, Ordering::Relaxed);
        }
        Duration::from_nanos(wait)
    }
}

/// One response's handle on its key's bucket.
#[derive(Debug, Clone)]
pub struct Pacer {
    class: Arc<Shaper>,
    bucket: Bucket,
    hash: u64,
    /// False when the bucket is its shard's spare one.
    tracked: bool,
}

impl Pacer {
    /// Takes `n` bytes from the bucket now: how long to wait before sending them.
    pub fn reserve(&self, n: usize) -> Duration {
        self.reserve_at(n, Instant::now())
    }

    /// Takes `n` bytes from the bucket at `now`: how long to wait before sending
    /// them.
    pub fn reserve_at(&self, n: usize, now: Instant) -> Duration {
        self.class
            .reserve(&self.bucket, self.hash, self.tracked, n, now)
    }

    /// The class's name.
    pub fn class(&self) -> &str {
        &self.class.name
    }
}

/// Writes the `[[shape]]` classes' counters, labelled by class.
pub fn write_metrics(out: &mut crate::metrics::Exposition, classes: &[Arc<Shaper>]) {
    use crate::metrics::escape_label;
    use std::fmt::Write as _;
    let out = out.text_mut();
    if classes.is_empty() {
        return;
    }
    let stats: Vec<_> = classes.iter().map(|c| (c, c.stats())).collect();
    type Value = fn(&Shaper, &ShapeStats) -> f64;
    let series: [(&str, &str, &str, Value); 5] = [
        (
            "palisade_shaped_responses_total",
            "counter",
            "Responses a bandwidth class shaped.",
            |_, s| s.responses as f64,
        ),
        (
            "palisade_shaped_bytes_total",
            "counter",
            "Response body bytes sent through a bandwidth class's buckets.",
            |_, s| s.bytes as f64,
        ),
        (
            "palisade_shaping_delay_seconds_total",
            "counter",
            "Time response body pieces were held back by a bandwidth class, summed over responses.",
            |_, s| s.delayed_ns as f64 / 1e9,
        ),
        (
            "palisade_shaping_overflow_total",
            "counter",
            "Pieces whose key found no room (max_keys) and drew on a shared spare bucket.",
            |_, s| s.overflow as f64,
        ),
        (
            "palisade_shaping_keys",
            "gauge",
            "Keys a bandwidth class tracks now.",
            |c, _| c.keys() as f64,
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (c, s) in &stats {
            let _ = writeln!(
                out,
                "{name}{{class=\"{}\"}} {}",
                escape_label(&c.name),
                value(c, s)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RateLimitKey;

    fn section(rate: &str, burst: &str, max_keys: usize) -> ShapeSection {
        ShapeSection {
            name: "t".into(),
            key: RateLimitKey::One("client_ip".into()),
            rate: rate.into(),
            burst: burst.into(),
            when: None,
            equals: None,
            path_prefix: None,
            max_keys,
        }
    }

    #[test]
    fn rates_and_sizes_parse() {
        assert_eq!(parse_byte_rate("256KiB/s").unwrap(), 256 * 1024);
        assert_eq!(parse_byte_rate("2Mbit/s").unwrap(), 250_000);
        assert_eq!(parse_byte_rate("8 Mb/s").unwrap(), 1_000_000);
        assert_eq!(parse_byte_rate("1MB/s").unwrap(), 1_000_000);
        assert_eq!(parse_bytes("64KiB").unwrap(), 65_536);
        assert_eq!(parse_bytes("0").unwrap(), 0);
        for bad in ["256KiB", "0/s", "x/s", "1 parsec/s"] {
            assert!(parse_byte_rate(bad).is_err(), "{bad}");
        }
        let mut s = section("1MB/s", "1KiB", 10);
        s.equals = Some("x".into());
        assert!(Shaper::new(&s).unwrap_err().contains("equals needs when"));
        assert!(
            Shaper::new(&section("1MB/s", "lots", 10))
                .unwrap_err()
                .contains("burst")
        );
    }

    #[test]
    fn a_key_is_paced_at_its_rate_after_its_burst() {
        // 1,000 bytes per second, a burst of 500 bytes.
        let s = Arc::new(Shaper::new(&section("1KB/s", "500B", 100)).unwrap());
        let t0 = Instant::now();
        let first = Shaper::pacer(&s, b"10.0.0.1");
        assert_eq!(first.reserve_at(500, t0), Duration::ZERO);
        // The next 100 bytes wait for their own cost: 100 ms.
        assert_eq!(first.reserve_at(100, t0), Duration::from_millis(100));
        // A second response of the same key queues behind the first.
        let second = Shaper::pacer(&s, b"10.0.0.1");
        assert_eq!(second.reserve_at(100, t0), Duration::from_millis(200));
        // Another key has its own bucket.
        let other = Shaper::pacer(&s, b"10.0.0.2");
        assert_eq!(other.reserve_at(500, t0), Duration::ZERO);
        // After a while the bucket refills, up to the burst.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(first.reserve_at(500, later), Duration::ZERO);
        assert_eq!(second.reserve_at(1, later), Duration::from_millis(1));
        let st = s.stats();
        assert_eq!(st.responses, 3);
        assert_eq!(st.bytes, 1_701);
        assert_eq!(st.delayed_ns, 301_000_000);
    }

    #[test]
    fn memory_stays_bounded_with_many_keys() {
        let s = Arc::new(Shaper::new(&section("1KB/s", "0", 640)).unwrap());
        let t0 = Instant::now();
        for i in 0..100_000u32 {
            Shaper::pacer_at(&s, &i.to_le_bytes(), t0).reserve_at(100, t0);
        }
        assert!(s.keys() <= 640, "{}", s.keys());
        // Keys beyond the bound share their shard's spare bucket: still shaped.
        let st = s.stats();
        assert!(st.overflow >= 100_000 - 640, "{st:?}");
        let crowded = Shaper::pacer_at(&s, b"late", t0);
        let first = crowded.reserve_at(100, t0);
        assert!(first >= Duration::from_millis(100), "{first:?}");
        drop(crowded);
        // Once the buckets are full again, those no response holds are forgotten
        // and new keys get buckets of their own.
        let later = t0 + Duration::from_secs(3600);
        let new = Shaper::pacer_at(&s, b"new", later);
        assert_eq!(new.reserve_at(100, later), Duration::from_millis(100));
        assert!(s.keys() < 640);
    }

    #[test]
    fn classes_are_selected_by_when_equals_and_path() {
        let mut trial = section("1KB/s", "0", 100);
        trial.name = "trial".into();
        trial.when = Some("cookie:plan".into());
        trial.equals = Some("trial".into());
        let mut downloads = section("1MB/s", "0", 100);
        downloads.name = "downloads".into();
        downloads.path_prefix = Some("/dl/".into());
        let classes = [
            Arc::new(Shaper::new(&trial).unwrap()),
            Arc::new(Shaper::new(&downloads).unwrap()),
        ];
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        let pick = |uri: &[u8], headers: &[(&'static [u8], &'static [u8])]| {
            Shaper::select(&classes, peer, uri, headers.iter().copied(), |_| None)
                .map(|p| p.class().to_owned())
        };
        let trial_cookie: &[(&[u8], &[u8])] = &[(b"Cookie", b"plan=trial")];
        let paid_cookie: &[(&[u8], &[u8])] = &[(b"Cookie", b"plan=paid")];
        assert_eq!(pick(b"/a", trial_cookie).as_deref(), Some("trial"));
        assert_eq!(pick(b"/a", paid_cookie), None);
        assert_eq!(pick(b"/dl/x?y", paid_cookie).as_deref(), Some("downloads"));
        assert_eq!(classes[0].stats().responses, 1);
    }
}
