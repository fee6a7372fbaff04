//! Per-client and per-route accounting: requests, bytes in and out, and blocked
//! requests, with the heaviest clients listed by the admin API (`GET /top`).
//!
//! Clients: a weighted Space-Saving summary per dimension (requests, bytes in,
//! bytes out, blocks), in 16 shards by a keyed hash of the address, each shard with
//! its own lock and [`CAPACITY`] entries. Memory is fixed (16 × 4 × 128 entries,
//! under 400 KiB) whatever the number of clients. What a list guarantees, per
//! dimension:
//! - a client with more than 1/128 of its shard's total (so in any case more than
//!   1/128 of the whole total) is in the list;
//! - a listed count is never below the client's true count, and exceeds it by at most
//!   the entry's `error`, itself at most its shard's total / 128.
//!
//! Routes (the upstream pool a request went to, `-` when none) are few and known from
//! the configuration: exact counters, without a lock.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Entries per shard and dimension.
pub const CAPACITY: usize = 128;
const SHARDS: usize = 16;

/// What a top list is ordered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// Requests.
    Requests = 0,
    /// Request bytes received (head and body).
    BytesIn = 1,
    /// Response bytes sent.
    BytesOut = 2,
    /// Requests refused (deny, drop, rate limit).
    Blocks = 3,
}

impl Dimension {
    /// Parses `requests`, `bytes_in`, `bytes_out` or `blocks`.
    pub fn parse(s: &str) -> Option<Dimension> {
        Some(match s {
            "requests" => Dimension::Requests,
            "bytes_in" => Dimension::BytesIn,
            "bytes_out" => Dimension::BytesOut,
            "blocks" => Dimension::Blocks,
            _ => return None,
        })
    }

    /// The name as written in the API.
    pub fn name(self) -> &'static str {
        match self {
            Dimension::Requests => "requests",
            Dimension::BytesIn => "bytes_in",
            Dimension::BytesOut => "bytes_out",
            Dimension::Blocks => "blocks",
        }
    }
}

/// One listed client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TopEntry {
    /// The client's address.
    pub client: IpAddr,
    /// Its count (at most `error` above the true count).
    pub count: u64,
    /// How much `count` may overstate.
    pub error: u64,
}

/// A weighted Space-Saving summary of at most [`CAPACITY`] keys.
#[derive(Debug, Default)]
struct SpaceSaving {
    entries: Vec<TopEntry>,
    index: HashMap<IpAddr, usize>,
    total: u64,
}

impl SpaceSaving {
    fn add(&mut self, key: IpAddr, weight: u64) {
        if weight == 0 {
            return;
        }
        self.total = self.total.saturating_add(weight);
        if let Some(&i) = self.index.get(&key) {
            self.entries[i].count = self.entries[i].count.saturating_add(weight);
            return;
        }
        if self.entries.len() < CAPACITY {
            self.index.insert(key, self.entries.len());
            self.entries.push(TopEntry {
                client: key,
                count: weight,
                error: 0,
            });
            return;
        }
        // Full: the smallest entry gives its place (and its count, as the bound).
        let (i, min) = self
            .entries
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.count)
            .map(|(i, e)| (i, e.count))
            .unwrap_or((0, 0));
        self.index.remove(&self.entries[i].client);
        self.index.insert(key, i);
        self.entries[i] = TopEntry {
            client: key,
            count: min.saturating_add(weight),
            error: min,
        };
    }
}

#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(Mutex<[SpaceSaving; 4]>);

/// Exact counters of one route.
#[derive(Debug, Default)]
pub struct RouteTotals {
    /// Requests.
    pub requests: AtomicU64,
    /// Request bytes received.
    pub bytes_in: AtomicU64,
    /// Response bytes sent.
    pub bytes_out: AtomicU64,
    /// Requests refused.
    pub blocks: AtomicU64,
}

/// The accounting of the whole process.
#[derive(Debug)]
pub struct Accounting {
    shards: Box<[Shard]>,
    hasher: std::collections::hash_map::RandomState,
    routes: HashMap<String, RouteTotals>,
}

/// The route name of a request that reached no upstream pool.
pub const NO_ROUTE: &str = "-";

impl Accounting {
    /// Accounting for the given route (upstream pool) names.
    pub fn new<'a>(routes: impl IntoIterator<Item = &'a str>) -> Accounting {
        let mut map: HashMap<String, RouteTotals> = routes
            .into_iter()
            .map(|r| (r.to_owned(), RouteTotals::default()))
            .collect();
        map.entry(NO_ROUTE.to_owned()).or_default();
        Accounting {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            hasher: std::collections::hash_map::RandomState::new(),
            routes: map,
        }
    }

    /// Counts one finished request.
    pub fn record(
        &self,
        client: IpAddr,
        route: &str,
        bytes_in: u64,
        bytes_out: u64,
        blocked: bool,
    ) {
        let client = client.to_canonical();
        let mut h = self.hasher.build_hasher();
        match client {
            IpAddr::V4(a) => h.write(&a.octets()),
            IpAddr::V6(a) => h.write(&a.octets()),
        }
        let shard = &self.shards[(h.finish() >> 60) as usize % SHARDS];
        {
            let mut s = shard.0.lock().unwrap_or_else(|e| e.into_inner());
            s[Dimension::Requests as usize].add(client, 1);
            s[Dimension::BytesIn as usize].add(client, bytes_in);
            s[Dimension::BytesOut as usize].add(client, bytes_out);
            s[Dimension::Blocks as usize].add(client, u64::from(blocked));
        }
        if let Some(r) = self.routes.get(route).or_else(|| self.routes.get(NO_ROUTE)) {
            r.requests.fetch_add(1, Ordering::Relaxed);
            r.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
            r.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
            r.blocks.fetch_add(u64::from(blocked), Ordering::Relaxed);
        }
    }

    /// The `n` heaviest clients by `by`, heaviest first, and the total over all
    /// clients.
    pub fn top(&self, by: Dimension, n: usize) -> (Vec<TopEntry>, u64) {
        let mut all = Vec::new();
        let mut total = 0u64;
        for shard in self.shards.iter() {
            let s = shard.0.lock().unwrap_or_else(|e| e.into_inner());
            let summary = &s[by as usize];
            total = total.saturating_add(summary.total);
            all.extend(summary.entries.iter().copied());
        }
        all.sort_by(|a, b| b.count.cmp(&a.count).then(a.client.cmp(&b.client)));
        all.truncate(n);
        (all, total)
    }

    /// Every route's counters, by name.
    pub fn routes(&self) -> Vec<(&str, &RouteTotals)> {
        let mut v: Vec<(&str, &RouteTotals)> =
            self.routes.iter().map(|(k, v)| (k.as_str(), v)).collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(i: u32) -> IpAddr {
        IpAddr::V4(std::net::Ipv4Addr::from(i))
    }

    #[test]
    fn heavy_hitters_are_found_with_bounded_error() {
        let a = Accounting::new(["app"]);
        // 20,000 light clients (1 request each), 5 heavy ones (2,000 each), mixed.
        for round in 0..2_000u32 {
            for heavy in 0..5 {
                a.record(ip(1_000_000 + heavy), "app", 100, 1000, heavy == 0);
            }
            for k in 0..10 {
                a.record(ip(round * 10 + k), "app", 100, 1000, false);
            }
        }
        let (top, total) = a.top(Dimension::Requests, 5);
        assert_eq!(total, 2_000 * 15);
        let mut clients: Vec<IpAddr> = top.iter().map(|e| e.client).collect();
        clients.sort();
        assert_eq!(
            clients,
            (0..5).map(|h| ip(1_000_000 + h)).collect::<Vec<_>>()
        );
        for e in &top {
            assert!(e.count >= 2_000 && e.count - e.error <= 2_000, "{e:?}");
        }
        let (blocks, _) = a.top(Dimension::Blocks, 1);
        assert_eq!(blocks[0].client, ip(1_000_000));
        assert_eq!(blocks[0].count, 2_000);
        let (bytes, total_out) = a.top(Dimension::BytesOut, 1);
        assert_eq!(total_out, 2_000 * 15 * 1000);
        assert!(bytes[0].count >= 2_000_000);
        let routes = a.routes();
        let app = routes.iter().find(|(n, _)| *n == "app").unwrap().1;
        assert_eq!(app.requests.load(Ordering::Relaxed), 30_000);
        assert_eq!(app.blocks.load(Ordering::Relaxed), 2_000);
    }

    #[test]
    fn memory_is_fixed() {
        let a = Accounting::new([]);
        for i in 0..100_000 {
            a.record(ip(i), "unknown route", 1, 1, false);
        }
        for shard in a.shards.iter() {
            let s = shard.0.lock().unwrap();
            for summary in s.iter() {
                assert!(summary.entries.len() <= CAPACITY);
                assert!(summary.index.len() <= CAPACITY);
            }
        }
        // An unknown route counts under "-".
        let dash = a
            .routes()
            .into_iter()
            .find(|(n, _)| *n == NO_ROUTE)
            .unwrap()
            .1;
        assert_eq!(dash.requests.load(Ordering::Relaxed), 100_000);
    }
}
