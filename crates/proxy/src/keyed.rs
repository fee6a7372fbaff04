//! What per-key traffic control shares: the parts a key is made of (client
//! address, a header, a cookie, the path, a TX variable), building a request's key
//! from them, and [`KeyTable`], the sharded table of per-key state with bounded
//! memory that `[[rate_limit]]` and `[[shape]]` keep their buckets in.
//!
//! The table has 64 shards, each with its own lock on cache lines of its own, so
//! workers on different keys rarely wait on one another and no lock is shared by
//! all requests. Keys are hashed with a per-process random SipHash key, so a client
//! cannot choose keys that collide. Each shard holds at most `max_keys / 64` keys:
//! a full shard first forgets its idle keys (the caller says which are idle: those
//! whose state is back to what a new key gets, so forgetting them changes nothing),
//! at most once per millisecond; a key that still finds no room gets the shard's
//! spare entry instead, and is told so.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::sync::Mutex;

/// Shards of a [`KeyTable`].
pub const SHARDS: usize = 64;

/// Nanoseconds between two sweeps of a full shard for idle keys.
const SWEEP_EVERY_NS: u64 = 1_000_000;

/// One part of a key; several parts are joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// The client's address (`client_ip`).
    ClientIp,
    /// A request header's first value (`header:NAME`); a request without it has no
    /// key.
    Header(String),
    /// A cookie's value (`cookie:NAME`); a request without it has no key.
    Cookie(String),
    /// The request path, without the query (`path`): one key shared by every
    /// client of a route.
    Path,
    /// A TX variable set by the rules (`tx:NAME`), for instance
    /// `setvar:tx.rate_key=%{REQUEST_HEADERS.X-Api-Key}`. Unset: no key.
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

    /// Parses a key as written in the configuration: its parts, at least one.
    pub fn parse_all(parts: &[String]) -> Result<Vec<KeyPart>, String> {
        if parts.is_empty() {
            return Err("key is empty".into());
        }
        parts.iter().map(|p| KeyPart::parse(p)).collect()
    }

    /// This part's value for a request: the client `peer`, the `path` (without the
    /// query), its header lines, and `tx` to read a TX variable. `None` when the
    /// request has no such header, cookie or variable.
    pub fn value<'h, I>(
        &self,
        peer: IpAddr,
        path: &[u8],
        headers: I,
        tx: &mut impl FnMut(&str) -> Option<Vec<u8>>,
    ) -> Option<Vec<u8>>
    where
        I: Iterator<Item = (&'h [u8], &'h [u8])>,
    {
        let mut headers = headers;
        match self {
            KeyPart::ClientIp => Some(peer.to_canonical().to_string().into_bytes()),
            KeyPart::Path => Some(path.to_vec()),
            KeyPart::Header(name) => headers
                .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
                .map(|(_, v)| v.to_vec()),
            KeyPart::Cookie(name) => headers
                .filter(|(n, _)| n.eq_ignore_ascii_case(b"cookie"))
                .find_map(|(_, v)| cookie_value(v, name))
                .map(<[u8]>::to_vec),
            KeyPart::Tx(name) => tx(name),
        }
    }
}

/// The key `parts` make for a request (see [`KeyPart::value`]), the parts joined
/// by NUL bytes; `None` when one part has no value.
pub fn request_key<'h, I>(
    parts: &[KeyPart],
    peer: IpAddr,
    path: &[u8],
    headers: I,
    mut tx: impl FnMut(&str) -> Option<Vec<u8>>,
) -> Option<Vec<u8>>
where
    I: Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
{
    let mut key = Vec::with_capacity(64);
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            key.push(0);
        }
        key.extend_from_slice(&part.value(peer, path, headers.clone(), &mut tx)?);
    }
    Some(key)
}

/// Nanoseconds from `epoch` to `now` on a table's clock: never 0, so that a
/// stored 0 cannot be mistaken for a time.
pub fn nanos_since(epoch: std::time::Instant, now: std::time::Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(epoch).as_nanos())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// The path of a request target: the part before the query.
pub fn path_of(uri: &[u8]) -> &[u8] {
    uri.split(|&b| b == b'?').next().unwrap_or(uri)
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

/// Per-key state of type `V`, in [`SHARDS`] shards with bounded memory (see the
/// module documentation).
#[derive(Debug)]
pub struct KeyTable<V> {
    hasher: std::collections::hash_map::RandomState,
    per_shard: usize,
    shards: Box<[Shard<V>]>,
}

/// One shard: its lock and map on cache lines of their own, so that two workers
/// on different shards do not slow each other down by sharing a line.
#[derive(Debug)]
#[repr(align(128))]
struct Shard<V>(Mutex<ShardState<V>>);

#[derive(Debug)]
struct ShardState<V> {
    map: HashMap<u64, V, PassThrough>,
    /// The entry of keys that found no room.
    spare: V,
    /// When the map was last swept for idle keys (ns on the caller's clock).
    swept_at: u64,
}

impl<V: Default> KeyTable<V> {
    /// A table for at most `max_keys` keys (at least one per shard).
    pub fn new(max_keys: usize) -> KeyTable<V> {
        KeyTable {
            hasher: std::collections::hash_map::RandomState::new(),
            per_shard: max_keys.div_ceil(SHARDS).max(1),
            shards: (0..SHARDS)
                .map(|_| {
                    Shard(Mutex::new(ShardState {
                        map: HashMap::default(),
                        spare: V::default(),
                        swept_at: 0,
                    }))
                })
                .collect(),
        }
    }

    /// The table's hash of a key (per process, random).
    pub fn hash(&self, key: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write(key);
        h.finish()
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.0.lock().unwrap_or_else(|e| e.into_inner()).map.len())
            .sum()
    }

    /// True when no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `f` on the entry of the key whose [`KeyTable::hash`] is `hash`, under
    /// its shard's lock; a new key's entry starts as `fresh()` makes it. `now_ns` is the
    /// caller's clock, for pacing sweeps. When the shard is full, entries for which
    /// `idle` holds are forgotten first (at most once per millisecond per shard);
    /// if there is still no room, `f` gets the shard's spare entry, shared by every
    /// key that found no room there, and `false`.
    pub fn with<R>(
        &self,
        hash: u64,
        now_ns: u64,
        fresh: impl FnOnce() -> V,
        mut idle: impl FnMut(&V) -> bool,
        f: impl FnOnce(&mut V, bool) -> R,
    ) -> R {
        let shard = &self.shards[(hash >> 58) as usize % SHARDS];
        let mut guard = shard.0.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        if st.map.len() >= self.per_shard && !st.map.contains_key(&hash) {
            if now_ns.saturating_sub(st.swept_at) >= SWEEP_EVERY_NS || st.swept_at == 0 {
                st.swept_at = now_ns.max(1);
                st.map.retain(|_, v| !idle(v));
            }
            if st.map.len() >= self.per_shard {
                return f(&mut st.spare, false);
            }
        }
        f(st.map.entry(hash).or_insert_with(fresh), true)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_parts_parse() {
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
        assert!(KeyPart::parse_all(&[]).is_err());
    }

    #[test]
    fn keys_are_built_from_the_request() {
        let peer: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let headers: Vec<(&[u8], &[u8])> =
            vec![(b"X-Plan", b"trial"), (b"Cookie", b"a=1; sid=abc")];
        let parts = KeyPart::parse_all(&[
            "client_ip".into(),
            "header:x-plan".into(),
            "cookie:sid".into(),
            "path".into(),
            "tx:k".into(),
        ])
        .unwrap();
        let tx = |n: &str| (n == "k").then(|| b"v".to_vec());
        let key = request_key(&parts, peer, b"/a", headers.iter().copied(), tx);
        assert_eq!(key.as_deref(), Some(&b"10.0.0.1\0trial\0abc\0/a\0v"[..]));
        let none = |_: &str| None;
        assert_eq!(
            request_key(&parts, peer, b"/a", headers.iter().copied(), none),
            None
        );
        assert_eq!(path_of(b"/x/y?z=1"), b"/x/y");
    }

    #[test]
    fn cookies() {
        let h = b"a=1; session=abc ; theme=dark";
        assert_eq!(cookie_value(h, "session"), Some(&b"abc"[..]));
        assert_eq!(cookie_value(h, "SESSION"), Some(&b"abc"[..]));
        assert_eq!(cookie_value(h, "none"), None);
    }

    #[test]
    fn bounded_with_a_spare_entry_and_idle_sweeps() {
        let t: KeyTable<u64> = KeyTable::new(640);
        let mut spare = 0;
        for i in 0..10_000u32 {
            let h = t.hash(&i.to_le_bytes());
            t.with(
                h,
                1_000_000_000,
                || 0,
                |v| *v <= 1_000_000_000,
                |v, tracked| {
                    *v = 2_000_000_000;
                    spare += usize::from(!tracked);
                },
            );
        }
        assert!(t.len() <= 640, "{}", t.len());
        assert!(spare >= 10_000 - 640);
        // Later, every key is idle: a new key finds room and the table shrank.
        let h = t.hash(b"new");
        let later = 3_000_000_000;
        assert!(t.with(h, later, || 0, |v| *v <= later, |_, tracked| tracked));
        assert!(t.len() < 640);
    }
}
