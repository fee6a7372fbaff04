//! Per-client and per-route accounting: requests, bytes in and out, and blocked
//! requests, with the heaviest clients listed by the admin API (`GET /top`).
//!
//! Clients: a weighted Space-Saving summary per dimension (requests, bytes in,
//! bytes out, blocks), in 16 shards by a keyed hash of the address, each shard with
//! [`CAPACITY`] entries. Every worker thread has its own 16 shards: a request is
//! counted by the worker that served it, under a lock only that worker and `/top`
//! take, so workers never wait for one another nor write to the same memory. Memory
//! is fixed (workers × 16 × 4 × 128 entries, under 400 KiB per worker) whatever the
//! number of clients. `/top` merges the workers' summaries of each shard: a client's
//! count is the sum of its counts where it is listed plus, where a full summary does
//! not list it, that summary's smallest count (the most it can have there), which is
//! added to its `error` too. What a list guarantees, per dimension:
//! - a client with more than 1/128 of its shard's total (so in any case more than
//!   1/128 of the whole total) is in the list (it has more than 1/128 of that
//!   shard's total on at least one worker, where Space-Saving keeps it);
//! - a listed count is never below the client's true count, and exceeds it by at most
//!   the entry's `error`, itself at most its shard's total / 128 (the workers'
//!   bounds add up to that).
//!
//! Routes (the upstream pool a request went to, `-` when none) are few and known from
//! the configuration: exact counters per worker, without a lock, summed when read.

use rustc_hash::FxHashMap;
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
///
/// Its index uses FxHash, not a keyed hash: the index never holds more than
/// [`CAPACITY`] addresses, so addresses chosen to collide can make a lookup walk at
/// most that many entries, the bound the smallest-entry scan of a full summary has
/// anyway; the shard a client lands in is still chosen by a keyed hash. Four keyed
/// hashes per request cost about 1.5% of a proxied GET.
#[derive(Debug, Default)]
struct SpaceSaving {
    entries: Vec<TopEntry>,
    index: FxHashMap<IpAddr, usize>,
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

/// Exact counters of one route on one worker (on a cache line of its own).
#[derive(Debug, Default)]
#[repr(align(128))]
struct RouteTotals {
    requests: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    blocks: AtomicU64,
}

/// What one route has counted, all workers together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteCounts {
    /// Requests.
    pub requests: u64,
    /// Request bytes received.
    pub bytes_in: u64,
    /// Response bytes sent.
    pub bytes_out: u64,
    /// Requests refused.
    pub blocks: u64,
}

/// What one worker thread counts: only that worker writes here.
#[derive(Debug)]
struct PerWorker {
    shards: Box<[Shard]>,
    /// Indexed like `Accounting::route_names`.
    routes: Box<[RouteTotals]>,
}

impl PerWorker {
    fn new(routes: usize) -> PerWorker {
        PerWorker {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            routes: (0..routes).map(|_| RouteTotals::default()).collect(),
        }
    }
}

/// The accounting of the whole process.
#[derive(Debug)]
pub struct Accounting {
    workers: Box<[PerWorker]>,
    hasher: std::collections::hash_map::RandomState,
    /// Route names, sorted; [`NO_ROUTE`] among them.
    route_names: Vec<String>,
    route_index: FxHashMap<String, usize>,
}

/// The route name of a request that reached no upstream pool.
pub const NO_ROUTE: &str = "-";

impl Accounting {
    /// Accounting for the given route (upstream pool) names, on one worker thread.
    pub fn new<'a>(routes: impl IntoIterator<Item = &'a str>) -> Accounting {
        let mut names: Vec<String> = routes.into_iter().map(str::to_owned).collect();
        names.push(NO_ROUTE.to_owned());
        names.sort();
        names.dedup();
        let route_index = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        Accounting {
            workers: vec![PerWorker::new(names.len())].into_boxed_slice(),
            hasher: std::collections::hash_map::RandomState::new(),
            route_names: names,
            route_index,
        }
    }

    /// The same accounting, empty, for `n` worker threads (see
    /// [`crate::runtime::current_worker`]).
    pub fn with_workers(mut self, n: usize) -> Accounting {
        self.workers = (0..n.max(1))
            .map(|_| PerWorker::new(self.route_names.len()))
            .collect();
        self
    }

    /// Counts one finished request, on the worker thread running this.
    // Not inlined: bench/instrumentation.py reads its cost by name.
    #[inline(never)]
    pub fn record(
        &self,
        client: IpAddr,
        route: &str,
        bytes_in: u64,
        bytes_out: u64,
        blocked: bool,
    ) {
        self.record_on(
            crate::runtime::current_worker(),
            client,
            route,
            bytes_in,
            bytes_out,
            blocked,
        );
    }

    fn record_on(
        &self,
        worker: usize,
        client: IpAddr,
        route: &str,
        bytes_in: u64,
        bytes_out: u64,
        blocked: bool,
    ) {
        let w = &self.workers[worker % self.workers.len()];
        let client = client.to_canonical();
        let mut h = self.hasher.build_hasher();
        match client {
            IpAddr::V4(a) => h.write(&a.octets()),
            IpAddr::V6(a) => h.write(&a.octets()),
        }
        let shard = &w.shards[(h.finish() >> 60) as usize % SHARDS];
        {
            let mut s = shard.0.lock().unwrap_or_else(|e| e.into_inner());
            s[Dimension::Requests as usize].add(client, 1);
            s[Dimension::BytesIn as usize].add(client, bytes_in);
            s[Dimension::BytesOut as usize].add(client, bytes_out);
            s[Dimension::Blocks as usize].add(client, u64::from(blocked));
        }
        let i = self
            .route_index
            .get(route)
            .or_else(|| self.route_index.get(NO_ROUTE));
        if let Some(r) = i.and_then(|&i| w.routes.get(i)) {
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
        for shard in 0..SHARDS {
            // Each worker's summary of this shard: its entries and the most an
            // unlisted client can have there.
            let mut parts = Vec::with_capacity(self.workers.len());
            for w in self.workers.iter() {
                let s = w.shards[shard].0.lock().unwrap_or_else(|e| e.into_inner());
                let summary = &s[by as usize];
                total = total.saturating_add(summary.total);
                let unlisted = if summary.entries.len() < CAPACITY {
                    0
                } else {
                    summary.entries.iter().map(|e| e.count).min().unwrap_or(0)
                };
                parts.push((summary.index.clone(), summary.entries.clone(), unlisted));
            }
            let mut clients: Vec<IpAddr> = parts
                .iter()
                .flat_map(|(_, entries, _)| entries.iter().map(|e| e.client))
                .collect();
            clients.sort();
            clients.dedup();
            for client in clients {
                let mut e = TopEntry {
                    client,
                    count: 0,
                    error: 0,
                };
                for (index, entries, unlisted) in &parts {
                    match index.get(&client) {
                        Some(&i) => {
                            e.count = e.count.saturating_add(entries[i].count);
                            e.error = e.error.saturating_add(entries[i].error);
                        }
                        None => {
                            e.count = e.count.saturating_add(*unlisted);
                            e.error = e.error.saturating_add(*unlisted);
                        }
                    }
                }
                all.push(e);
            }
        }
        all.sort_by(|a, b| b.count.cmp(&a.count).then(a.client.cmp(&b.client)));
        all.truncate(n);
        (all, total)
    }

    /// Every route's counters, all workers together, by name.
    pub fn routes(&self) -> Vec<(&str, RouteCounts)> {
        self.route_names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let mut c = RouteCounts::default();
                for w in self.workers.iter() {
                    let t = &w.routes[i];
                    c.requests += t.requests.load(Ordering::Relaxed);
                    c.bytes_in += t.bytes_in.load(Ordering::Relaxed);
                    c.bytes_out += t.bytes_out.load(Ordering::Relaxed);
                    c.blocks += t.blocks.load(Ordering::Relaxed);
                }
                (name.as_str(), c)
            })
            .collect()
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
        assert_eq!(app.requests, 30_000);
        assert_eq!(app.blocks, 2_000);
    }

    #[test]
    fn memory_is_fixed() {
        let a = Accounting::new([]);
        for i in 0..100_000 {
            a.record(ip(i), "unknown route", 1, 1, false);
        }
        for shard in a.workers.iter().flat_map(|w| w.shards.iter()) {
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
        assert_eq!(dash.requests, 100_000);
    }

    #[test]
    fn workers_are_merged_with_the_same_guarantees() {
        let a = Accounting::new(["app"]).with_workers(3);
        // Heavy clients spread unevenly over the workers, among 30,000 light ones
        // that overflow every summary.
        for round in 0..3_000u32 {
            for heavy in 0..4u32 {
                let worker = (round as usize + heavy as usize) % (1 + heavy as usize % 3);
                a.record_on(worker, ip(2_000_000 + heavy), "app", 10, 10, false);
            }
            for k in 0..10 {
                a.record_on(k as usize % 3, ip(round * 10 + k), "app", 1, 1, false);
            }
        }
        let (top, total) = a.top(Dimension::Requests, 4);
        assert_eq!(total, 3_000 * 14);
        let mut clients: Vec<IpAddr> = top.iter().map(|e| e.client).collect();
        clients.sort();
        assert_eq!(
            clients,
            (0..4).map(|h| ip(2_000_000 + h)).collect::<Vec<_>>()
        );
        for e in &top {
            assert!(e.count >= 3_000, "never below the true count: {e:?}");
            assert!(e.count - e.error <= 3_000, "error bounds the excess: {e:?}");
            assert!(e.error <= total / 128, "{e:?}");
        }
        // A client seen on one worker only, with summaries not full: exact.
        let b = Accounting::new([]).with_workers(2);
        for _ in 0..7 {
            b.record_on(1, ip(5), "-", 1, 1, false);
        }
        b.record_on(0, ip(6), "-", 1, 1, false);
        let (top, total) = b.top(Dimension::Requests, 1);
        assert_eq!(total, 8);
        assert_eq!(
            top,
            vec![TopEntry {
                client: ip(5),
                count: 7,
                error: 0
            }]
        );
        let dash = b
            .routes()
            .into_iter()
            .find(|(n, _)| *n == NO_ROUTE)
            .unwrap()
            .1;
        assert_eq!(dash.requests, 8, "route counters summed over the workers");
    }
}
