//! The order in which a pool's servers are tried for one request.
//!
//! The first servers are the primary ones that are up, ordered by the pool's
//! method: `round_robin` rotates them, `least_conn` sorts them by requests in flight
//! (ties in rotation order), `hash` sorts them by rendezvous score. Then come the
//! backups that are up, and last every server that is out (tried only when all
//! the others failed).
//!
//! `hash` is rendezvous (highest random weight) hashing: each server scores a key
//! with XXH3 seeded by the hash of the server's address, and the key goes to the
//! highest score. When a server leaves, only the keys it had move (about 1/n of
//! them), each to its own second choice, so they spread over the rest; the keys of
//! the other servers stay put. Failover follows the same order.

use super::pool::Server;
use crate::config::{Balance, HashKey};
use crate::http::HeaderLines;
use smallvec::SmallVec;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The hash seed of a server: its address as written.
pub(super) fn server_seed(addr: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(addr.as_bytes())
}

/// The bytes a `hash` pool hashes for a request, if the request has them.
pub(super) fn key_of<'h>(
    key: &HashKey,
    headers: &'h HeaderLines,
    client: Option<&'h crate::exchange::IpText>,
) -> Option<&'h [u8]> {
    match key {
        HashKey::ClientIp => {
            if let Some(c) = client {
                return Some(c.as_bytes());
            }
            // Palisade appends the connection's client last.
            let v = headers.get_all(b"x-forwarded-for").next_back()?;
            let last = v.rsplit(|&b| b == b',').next()?.trim_ascii();
            (!last.is_empty()).then_some(last)
        }
        HashKey::Header(name) => {
            let v = headers.get(name.as_str().as_bytes())?;
            (!v.is_empty()).then_some(v)
        }
        HashKey::Cookie(name) => headers
            .get_all(b"cookie")
            .flat_map(|v| v.split(|&b| b == b';'))
            .find_map(|pair| {
                let pair = pair.trim_ascii();
                let eq = memchr::memchr(b'=', pair)?;
                (pair[..eq].trim_ascii() == name.as_bytes())
                    .then(|| pair[eq + 1..].trim_ascii())
                    .filter(|v| !v.is_empty())
            }),
    }
}

/// The servers one request tries, in order: inline up to this many (a pool with
/// more servers allocates).
const INLINE: usize = 8;

/// The servers to try, in order, borrowed from the pool.
pub(super) type Order<'a> = SmallVec<[&'a Arc<Server>; INLINE]>;

/// The servers to try, in order (see the module documentation).
pub(super) fn order<'a>(
    method: Balance,
    servers: &'a [Arc<Server>],
    backups: &'a [Arc<Server>],
    rotation: usize,
    key: Option<&[u8]>,
) -> Order<'a> {
    let n = servers.len();
    let mut up: Order<'a> = SmallVec::new();
    let mut out_of_service: Order<'a> = SmallVec::new();
    for i in 0..n {
        let s = &servers[(rotation + i) % n];
        if s.health.is_up() {
            up.push(s);
        } else {
            out_of_service.push(s);
        }
    }
    match (method, key) {
        (Balance::LeastConn, _) => {
            up.sort_by_key(|s| s.in_flight.load(Ordering::Relaxed));
        }
        (Balance::Hash, Some(k)) => {
            up.sort_by_key(|s| std::cmp::Reverse(xxh3_64_with_seed(k, s.seed)));
            out_of_service.sort_by_key(|s| std::cmp::Reverse(xxh3_64_with_seed(k, s.seed)));
        }
        _ => {}
    }
    let mut order = up;
    for b in backups {
        if b.health.is_up() {
            order.push(b);
        } else {
            out_of_service.push(b);
        }
    }
    order.extend(out_of_service);
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn servers(n: usize) -> Vec<Arc<Server>> {
        (0..n)
            .map(|i| Arc::new(Server::plain(&format!("10.0.0.{i}:80"))))
            .collect()
    }

    fn first(servers: &[Arc<Server>], key: &[u8]) -> Arc<str> {
        order(Balance::Hash, servers, &[], 0, Some(key))[0]
            .addr
            .clone()
    }

    #[test]
    fn round_robin_rotates() {
        let s = servers(3);
        let firsts: Vec<Arc<str>> = (0..3)
            .map(|r| order(Balance::RoundRobin, &s, &[], r, None)[0].addr.clone())
            .collect();
        assert_eq!(&*firsts[0], "10.0.0.0:80");
        assert_eq!(&*firsts[1], "10.0.0.1:80");
        assert_eq!(&*firsts[2], "10.0.0.2:80");
        // Up to 8 servers, the order is kept without a heap allocation.
        let eight = servers(8);
        assert!(!order(Balance::RoundRobin, &eight, &[], 0, None).spilled());
        assert!(order(Balance::RoundRobin, &eight, &s, 0, None).spilled());
    }

    #[test]
    fn least_conn_prefers_the_idle_server() {
        let s = servers(3);
        s[0].in_flight.store(2, Ordering::Relaxed);
        s[1].in_flight.store(1, Ordering::Relaxed);
        let o = order(Balance::LeastConn, &s, &[], 0, None);
        assert_eq!(&*o[0].addr, "10.0.0.2:80");
        assert_eq!(&*o[1].addr, "10.0.0.1:80");
        assert_eq!(&*o[2].addr, "10.0.0.0:80");
    }

    #[test]
    fn servers_out_come_last_and_backups_before_them() {
        let s = servers(2);
        let b = vec![Arc::new(Server::plain("10.0.1.0:80"))];
        s[0].health.failed(1, std::time::Duration::from_secs(60));
        let o = order(Balance::RoundRobin, &s, &b, 0, None);
        let names: Vec<&str> = o.iter().map(|s| &*s.addr).collect();
        assert_eq!(names, ["10.0.0.1:80", "10.0.1.0:80", "10.0.0.0:80"]);
    }

    /// A key always goes to the same server; the keys spread over all servers;
    /// when a server leaves only its keys move.
    #[test]
    fn rendezvous_hashing_is_consistent() {
        let all = servers(5);
        let keys: Vec<String> = (0..5000).map(|i| format!("user-{i}")).collect();
        let before: Vec<Arc<str>> = keys.iter().map(|k| first(&all, k.as_bytes())).collect();
        for (k, b) in keys.iter().zip(&before) {
            assert_eq!(&first(&all, k.as_bytes()), b);
        }
        for s in &all {
            let share = before.iter().filter(|b| **b == s.addr).count();
            // 1000 expected for each; far from it means a skewed hash.
            assert!((800..1200).contains(&share), "{} has {share}", s.addr);
        }
        let gone = all[2].addr.clone();
        let rest: Vec<Arc<Server>> = all.iter().filter(|s| s.addr != gone).cloned().collect();
        let mut moved = 0;
        for (k, b) in keys.iter().zip(&before) {
            let now = first(&rest, k.as_bytes());
            if *b == gone {
                moved += 1;
            } else {
                assert_eq!(&now, b, "a key of a remaining server moved");
            }
        }
        assert!((800..1200).contains(&moved), "{moved}");
    }

    #[test]
    fn hash_keys_from_the_request() {
        let mut h = HeaderLines::default();
        let mut add = |n: &'static str, v: &'static str| {
            h.push(
                Bytes::from_static(n.as_bytes()),
                Bytes::from_static(v.as_bytes()),
            );
        };
        add("X-Forwarded-For", "203.0.113.9, 198.51.100.4");
        add("x-user", "alice");
        add("Cookie", "a=1; sid=xyz ; b=2");
        assert_eq!(
            key_of(&HashKey::ClientIp, &h, None),
            Some(&b"198.51.100.4"[..])
        );
        // The client a trusted proxy named, when there is one.
        let named = crate::exchange::IpText::new("192.0.2.7".parse().unwrap());
        assert_eq!(
            key_of(&HashKey::ClientIp, &h, Some(&named)),
            Some(&b"192.0.2.7"[..])
        );
        let header = HashKey::parse("header:X-User").unwrap();
        assert_eq!(key_of(&header, &h, None), Some(&b"alice"[..]));
        let cookie = HashKey::parse("cookie:sid").unwrap();
        assert_eq!(key_of(&cookie, &h, None), Some(&b"xyz"[..]));
        let missing = HashKey::parse("cookie:none").unwrap();
        assert_eq!(key_of(&missing, &h, None), None);
        assert!(HashKey::parse("header:").is_err());
        assert!(HashKey::parse("uri").is_err());
    }
}
