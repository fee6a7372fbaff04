//! What per-key traffic control shares: the parts a key is made of (client
//! address, a header, a cookie, the path, a TX variable), building a request's key
//! from them, [`Gcra`], the one-word bucket that rate limits and shaping take from
//! with a compare-and-swap, and [`KeyTable`], the table of per-key state with
//! bounded memory that `[[rate_limit]]` and `[[shape]]` keep their buckets in.
//!
//! The table has 64 shards, each a concurrent map whose lookups take no lock
//! (papaya) and a lock that only inserting a new key and sweeping take: a request of
//! a key already tracked reads the map and updates its bucket with atomics, so
//! workers on different keys share no written cache line and workers on one key
//! share only its bucket. Keys are hashed with per-process random secrets, so a
//! client cannot choose keys that collide: a key of at most 7 bytes (a
//! client's IPv4 address is 5) is packed into a word and put through a keyed
//! permutation, so no two such keys can share a bucket at all; a longer key takes a
//! SipHash with a random key. Each shard holds at most `max_keys / 64`
//! keys: a full shard first forgets its idle keys (the caller's [`Slot`] says which:
//! those whose state is back to what a new key gets, so forgetting them changes
//! nothing), at most once per millisecond; a key that still finds no room gets the
//! shard's spare entry instead, and is told so. A sweep retires an idle bucket with
//! a compare-and-swap before removing it, so a request that found it just before
//! either updated it first (then it is not idle and stays) or sees it retired and
//! looks the key up again: forgetting stays exact without a lock on lookups.

use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex};

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
        match self {
            KeyPart::ClientIp => Some(peer.to_canonical().to_string().into_bytes()),
            KeyPart::Path => Some(path.to_vec()),
            KeyPart::Header(_) | KeyPart::Cookie(_) => self.value_ref(headers).map(<[u8]>::to_vec),
            KeyPart::Tx(name) => tx(name),
        }
    }

    /// Appends this part's share of a key to `key`: the value [`KeyPart::value`]
    /// gives, except the client address, which is written as a family tag (4 or 6)
    /// and its octets. A key is only hashed and compared, never shown, and writing
    /// an address as text cost more than the rest of a rate-limit check; the tag
    /// keeps an IPv4 key from ever equalling the start of an IPv6 one. False when
    /// the request has no value for this part.
    fn append_to_key<'h, I>(
        &self,
        key: &mut impl FnMut(&[u8]),
        peer: IpAddr,
        path: &[u8],
        headers: I,
        tx: &mut impl FnMut(&str) -> Option<Vec<u8>>,
    ) -> bool
    where
        I: Iterator<Item = (&'h [u8], &'h [u8])>,
    {
        match self {
            KeyPart::ClientIp => {
                match peer.to_canonical() {
                    IpAddr::V4(a) => {
                        let o = a.octets();
                        key(&[4, o[0], o[1], o[2], o[3]]);
                    }
                    IpAddr::V6(a) => {
                        let mut tagged = [6u8; 17];
                        tagged[1..].copy_from_slice(&a.octets());
                        key(&tagged);
                    }
                }
                true
            }
            KeyPart::Path => {
                key(path);
                true
            }
            KeyPart::Header(_) | KeyPart::Cookie(_) => match self.value_ref(headers) {
                Some(v) => {
                    key(v);
                    true
                }
                None => false,
            },
            KeyPart::Tx(name) => match tx(name) {
                Some(v) => {
                    key(&v);
                    true
                }
                None => false,
            },
        }
    }

    /// The value of a header or cookie part among `headers`, borrowed from them;
    /// `None` for the other kinds and when the request has no such header or cookie.
    fn value_ref<'h, I>(&self, mut headers: I) -> Option<&'h [u8]>
    where
        I: Iterator<Item = (&'h [u8], &'h [u8])>,
    {
        match self {
            KeyPart::Header(name) => headers
                .find(|(n, _)| eq_lowercase(n, name.as_bytes()))
                .map(|(_, v)| v),
            KeyPart::Cookie(name) => headers
                .filter(|(n, _)| eq_lowercase(n, b"cookie"))
                .find_map(|(_, v)| cookie_value(v, name)),
            _ => None,
        }
    }
}

/// Whether `name` equals `lower`, which is in lowercase, ignoring ASCII case: a byte
/// matches when it is the same, or when `lower`'s is a letter and setting the case
/// bit of `name`'s makes it the same (then `name`'s is that letter in uppercase).
fn eq_lowercase(name: &[u8], lower: &[u8]) -> bool {
    name.len() == lower.len()
        && name.iter().zip(lower).fold(true, |same, (&a, &b)| {
            same & (a == b || ((a | 0x20) == b && b.is_ascii_lowercase()))
        })
}

/// A request's key as bytes (see [`request_key`]): kept on the stack up to 64 bytes.
pub type Key = smallvec::SmallVec<[u8; 64]>;

/// Writes the key `parts` make for a request to `out`, piece by piece: each part's
/// bytes (see [`KeyPart::append_to_key`]), a NUL byte between two parts. False,
/// with part of the key written, when one part has no value.
fn write_key<'h, I>(
    parts: &[KeyPart],
    peer: IpAddr,
    path: &[u8],
    headers: I,
    tx: &mut impl FnMut(&str) -> Option<Vec<u8>>,
    out: &mut impl FnMut(&[u8]),
) -> bool
where
    I: Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
{
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out(&[0]);
        }
        if !part.append_to_key(out, peer, path, headers.clone(), tx) {
            return false;
        }
    }
    true
}

/// The key `parts` make for a request, the parts joined by NUL bytes (see
/// [`KeyPart::append_to_key`]); `None` when one part has no value. The tables only
/// need its hash, which [`KeyTable::hash_request`] takes without building it.
pub fn request_key<'h, I>(
    parts: &[KeyPart],
    peer: IpAddr,
    path: &[u8],
    headers: I,
    mut tx: impl FnMut(&str) -> Option<Vec<u8>>,
) -> Option<Key>
where
    I: Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
{
    let mut key = Key::new();
    write_key(parts, peer, path, headers, &mut tx, &mut |b: &[u8]| {
        key.extend_from_slice(b)
    })
    .then_some(key)
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
    memchr::memchr(b'?', uri).map_or(uri, |end| &uri[..end])
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

/// The value a retired bucket holds: no bucket is full again this late.
const RETIRED: u64 = u64::MAX;

/// A key's bucket for the generic cell rate algorithm, in one atomic word: the time
/// (ns on its owner's clock, see [`nanos_since`]) at which the bucket is full again.
/// Rate limits and shaping both take from it with a compare-and-swap, without a
/// lock. A [`KeyTable`] sweep may retire an idle bucket (its time is not after now):
/// from then on every take sees [`Taken::Retired`] and looks the key up again.
#[derive(Debug)]
pub struct Gcra(AtomicU64);

/// What [`Gcra::take`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Took the cost: the bucket is now full again at this time.
    Took {
        /// The bucket's new full-again time.
        full_at: u64,
    },
    /// Took nothing: the bucket is already further behind now than the limit, by
    /// this many ns.
    Refused {
        /// How long until the bucket is within the limit again.
        wait_ns: u64,
    },
    /// The bucket was retired by a sweep: the caller looks its key up again.
    Retired,
}

impl Gcra {
    /// A bucket that is full again at `full_at` (a new key's: now).
    pub fn new(full_at: u64) -> Gcra {
        Gcra(AtomicU64::new(full_at.min(RETIRED - 1)))
    }

    /// Takes `cost` ns from the bucket at `now_ns`, unless its full-again time is
    /// already more than `limit_ns` after now (then it takes nothing). A limit of
    /// `u64::MAX` always takes. Lock-free: one compare-and-swap, retried while other
    /// threads take from the same bucket.
    pub fn take(&self, now_ns: u64, cost: u64, limit_ns: u64) -> Taken {
        let mut seen = self.0.load(Ordering::Relaxed);
        loop {
            if seen == RETIRED {
                return Taken::Retired;
            }
            let start = seen.max(now_ns);
            let behind = start - now_ns;
            if behind > limit_ns {
                return Taken::Refused {
                    wait_ns: behind - limit_ns,
                };
            }
            let full_at = start.saturating_add(cost).min(RETIRED - 1);
            match self
                .0
                .compare_exchange_weak(seen, full_at, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Taken::Took { full_at },
                Err(now_seen) => seen = now_seen,
            }
        }
    }

    /// Takes `cost` ns from the bucket at `now_ns` whatever its state, as shaping
    /// does: the bucket's new full-again time, or `None` when it was retired.
    pub fn reserve(&self, now_ns: u64, cost: u64) -> Option<u64> {
        match self.take(now_ns, cost, u64::MAX) {
            Taken::Took { full_at } => Some(full_at),
            // Nothing is further behind now than u64::MAX: only Retired comes here.
            Taken::Refused { .. } | Taken::Retired => None,
        }
    }

    /// The time at which the bucket is full again.
    pub fn full_at(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// True when a sweep retired the bucket.
    pub fn is_retired(&self) -> bool {
        self.0.load(Ordering::SeqCst) == RETIRED
    }

    /// Retires the bucket if it is idle at `now_ns` (full again by then): its
    /// full-again time before, or `None` when it is busy (or already retired). A
    /// take that raced with this either landed first (and the bucket is busy) or
    /// sees it retired.
    fn retire(&self, now_ns: u64) -> Option<u64> {
        let mut seen = self.0.load(Ordering::SeqCst);
        loop {
            if seen == RETIRED || seen > now_ns {
                return None;
            }
            match self
                .0
                .compare_exchange(seen, RETIRED, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return Some(seen),
                Err(now_seen) => seen = now_seen,
            }
        }
    }
}

/// What a [`KeyTable`] keeps per key: state that a sweep can retire when it is idle,
/// so that a lookup racing with its removal notices and looks again.
pub trait Slot {
    /// Retires the slot if it is idle at `now_ns` (forgetting it changes nothing):
    /// true when it did; every use after that sees it retired.
    fn retire_if_idle(&self, now_ns: u64) -> bool;
}

impl Slot for Gcra {
    fn retire_if_idle(&self, now_ns: u64) -> bool {
        self.retire(now_ns).is_some()
    }
}

/// A bucket that handles ([`hold`]) may keep after the lookup: idle when it is full
/// again and no handle holds it.
impl Slot for Arc<Gcra> {
    fn retire_if_idle(&self, now_ns: u64) -> bool {
        if Arc::strong_count(self) != 1 {
            return false;
        }
        let Some(before) = self.retire(now_ns) else {
            return false;
        };
        // Pairs with the fence in `hold`: either that handle's count is seen here (and
        // the bucket is given back), or the handle sees the bucket retired.
        fence(Ordering::SeqCst);
        if Arc::strong_count(self) != 1 {
            self.0.store(before, Ordering::SeqCst);
            return false;
        }
        true
    }
}

/// A handle on a table's shared bucket, to take from it after the lookup; `None`
/// when a sweep retired it meanwhile, or was retiring it and then gave it back
/// (look the key up again: [`KeyTable::with`] does, under the shard's lock). A handle that was
/// given is never retired while it is held (sweeps see it in the count; a sweep
/// racing with this call gives the bucket back).
pub fn hold(bucket: &Arc<Gcra>) -> Option<Arc<Gcra>> {
    let held = bucket.clone();
    // Pairs with the fence in `retire_if_idle` (see there).
    fence(Ordering::SeqCst);
    (!held.is_retired()).then_some(held)
}

/// Per-key state of type `V`, in [`SHARDS`] shards with bounded memory (see the
/// module documentation).
#[derive(Debug)]
pub struct KeyTable<V: 'static> {
    secrets: KeySecrets,
    per_shard: usize,
    shards: Box<[Shard<V>]>,
}

/// One shard: its map, read without a lock, its spare entry, and the lock that
/// inserts and sweeps take, on cache lines of its own so that taking it does not
/// disturb readers of the map.
#[derive(Debug)]
#[repr(align(128))]
struct Shard<V: 'static> {
    map: papaya::HashMap<u64, V, Mix>,
    /// The entry of keys that found no room.
    spare: V,
    lock: Locked,
}

#[derive(Debug, Default)]
#[repr(align(128))]
struct Locked(Mutex<Writers>);

/// What inserts and sweeps keep, under the shard's lock.
#[derive(Debug, Default)]
struct Writers {
    /// Keys in the map (only inserts and sweeps change it, both under the lock).
    len: usize,
    /// When the map was last swept for idle keys (ns on the caller's clock).
    swept_at: u64,
}

impl<V: Slot + Send + Sync + 'static> KeyTable<V> {
    /// A table for at most `max_keys` keys (at least one per shard); each shard's
    /// spare entry is made by `spare()`.
    pub fn new(max_keys: usize, spare: impl Fn() -> V) -> KeyTable<V> {
        KeyTable {
            secrets: KeySecrets::new(),
            per_shard: max_keys.div_ceil(SHARDS).max(1),
            shards: (0..SHARDS)
                .map(|_| Shard {
                    map: papaya::HashMap::builder().hasher(Mix).build(),
                    spare: spare(),
                    lock: Locked::default(),
                })
                .collect(),
        }
    }

    /// The table's hash of a key (per table, random; see the module documentation).
    pub fn hash(&self, key: &[u8]) -> u64 {
        let mut h = self.secrets.hasher();
        h.write(key);
        h.finish()
    }

    /// The table's hash of the key `parts` make for a request, without building the
    /// key: the same as [`KeyTable::hash`] of [`request_key`]'s bytes (the hasher
    /// streams, so writing the pieces one by one hashes their concatenation).
    /// `None` when one part has no value.
    pub fn hash_request<'h, I>(
        &self,
        parts: &[KeyPart],
        peer: IpAddr,
        path: &[u8],
        headers: I,
        mut tx: impl FnMut(&str) -> Option<Vec<u8>>,
    ) -> Option<u64>
    where
        I: Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
    {
        let mut h = self.secrets.hasher();
        write_key(parts, peer, path, headers, &mut tx, &mut |b: &[u8]| {
            h.write(b)
        })
        .then(|| h.finish())
    }

    /// The shard of a key's hash (its top bits), `0..SHARDS`.
    pub fn shard_of(hash: u64) -> usize {
        (hash >> 58) as usize % SHARDS
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock.writers().len).sum()
    }

    /// True when no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until a sweep of the shard of `hash` that is under way has finished
    /// (one that may have retired a bucket for a moment and given it back).
    pub fn settle(&self, hash: u64) {
        drop(self.shards[Self::shard_of(hash)].lock.writers());
    }

    /// Runs `f` on the entry of the key whose [`KeyTable::hash`] is `hash`; `f`
    /// answers `None` when it finds the entry retired by a sweep, and then runs again
    /// on the key's new entry. An existing key is found without a lock. A new key
    /// takes its shard's lock and starts as `fresh()` makes it; `now_ns` is the
    /// caller's clock, for pacing sweeps. When the shard is full, the entries that
    /// are idle ([`Slot::retire_if_idle`]) are forgotten first (at most once per
    /// millisecond per shard); if there is still no room, `f` gets the shard's spare
    /// entry, shared by every key that found no room there (never retired), and
    /// `false`.
    pub fn with<R>(
        &self,
        hash: u64,
        now_ns: u64,
        fresh: impl Fn() -> V,
        mut f: impl FnMut(&V, bool) -> Option<R>,
    ) -> R {
        let shard = &self.shards[Self::shard_of(hash)];
        if let Some(r) = shard.map.pin().get(&hash).and_then(|v| f(v, true)) {
            return r;
        }
        // A new key, or one a sweep retired since: under the shard's lock, where
        // sweeps retire and remove entries in one go.
        let mut writers = shard.lock.writers();
        let map = shard.map.pin();
        loop {
            if let Some(v) = map.get(&hash) {
                if let Some(r) = f(v, true) {
                    return r;
                }
                // Retired and still there: not left so by sweeps, but harmless.
                map.remove(&hash);
                writers.len -= 1;
                continue;
            }
            if writers.len >= self.per_shard {
                if now_ns.saturating_sub(writers.swept_at) >= SWEEP_EVERY_NS
                    || writers.swept_at == 0
                {
                    writers.swept_at = now_ns.max(1);
                    let mut forgotten = 0;
                    map.retain(|_, v| {
                        let idle = v.retire_if_idle(now_ns);
                        forgotten += usize::from(idle);
                        !idle
                    });
                    writers.len -= forgotten;
                }
                if writers.len >= self.per_shard {
                    if let Some(r) = f(&shard.spare, false) {
                        return r;
                    }
                    // The spare entry is never retired: `f` answers it.
                    continue;
                }
            }
            map.insert(hash, fresh());
            writers.len += 1;
        }
    }
}

impl Locked {
    fn writers(&self) -> std::sync::MutexGuard<'_, Writers> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The random secrets of one table's key hash, drawn when the table is made.
#[derive(Debug)]
struct KeySecrets {
    /// SipHash's key, for keys longer than [`SHORT_KEY`] bytes.
    sip: std::collections::hash_map::RandomState,
    /// The permutation's keys, for the short ones.
    words: [u64; 2],
}

/// The longest key packed into a word instead of SipHashed: 7 bytes and the length.
const SHORT_KEY: usize = 7;

impl KeySecrets {
    fn new() -> KeySecrets {
        let sip = std::collections::hash_map::RandomState::new();
        // Two words from the random SipHash key: as secret as the key itself.
        let words = [sip.hash_one(1u64), sip.hash_one(2u64)];
        KeySecrets { sip, words }
    }
}

impl KeySecrets {
    /// A hasher for one key, written in pieces.
    fn hasher(&self) -> KeyHasher<'_> {
        KeyHasher {
            short: 0,
            len: 0,
            long: None,
            secrets: self,
        }
    }
}

/// The hash of a key written in pieces (the hash of their concatenation). A key of at
/// most [`SHORT_KEY`] bytes becomes its bytes and its length in one word, which a
/// keyed permutation of 64-bit words maps to the hash: distinct short keys always
/// get distinct hashes, and without the secrets a client cannot tell which shard a
/// key lands in. A longer key is hashed with SipHash under a random key, as the
/// standard library's maps do against chosen collisions.
struct KeyHasher<'s> {
    /// The key's bytes so far while it is short, little-endian.
    short: u64,
    len: usize,
    /// The SipHash state once the key is longer than [`SHORT_KEY`].
    long: Option<std::collections::hash_map::DefaultHasher>,
    secrets: &'s KeySecrets,
}

impl KeyHasher<'_> {
    fn write(&mut self, bytes: &[u8]) {
        if let Some(long) = &mut self.long {
            long.write(bytes);
            return;
        }
        if self.len + bytes.len() <= SHORT_KEY {
            let mut word = [0u8; 8];
            word[..bytes.len()].copy_from_slice(bytes);
            // `self.len` is at most 7 here: the shift stays below 64.
            self.short |= u64::from_le_bytes(word) << (8 * self.len);
            self.len += bytes.len();
            return;
        }
        let mut long = self.secrets.sip.build_hasher();
        if self.len > 0 {
            long.write(&self.short.to_le_bytes()[..self.len]);
        }
        long.write(bytes);
        self.long = Some(long);
    }

    fn finish(&self) -> u64 {
        match &self.long {
            Some(long) => long.finish(),
            None => permute(self.short | ((self.len as u64) << 56), self.secrets.words),
        }
    }
}

/// A keyed permutation of 64-bit words: every step (xor with a key, xor with a
/// shift of itself, multiplication by an odd constant) is a bijection, so distinct
/// words stay distinct, and the multiplications carry every input bit into the top
/// bits that choose a key's shard.
fn permute(x: u64, k: [u64; 2]) -> u64 {
    const M: u64 = 0xbf58_476d_1ce4_e5b9;
    const N: u64 = 0x94d0_49bb_1331_11eb;
    let mut x = x ^ k[0];
    x = (x ^ (x >> 30)).wrapping_mul(M);
    x = (x ^ (x >> 27)).wrapping_mul(N);
    x ^= k[1];
    x = (x ^ (x >> 31)).wrapping_mul(M);
    x ^ (x >> 29)
}

/// The keys are already hashes (see `KeyHasher`): the maps only spread them again, since
/// within one shard the top bits (which the map reads for its tags) are the same.
#[derive(Debug, Clone, Copy, Default)]
struct Mix;

impl BuildHasher for Mix {
    type Hasher = MixHasher;
    fn build_hasher(&self) -> MixHasher {
        MixHasher(0)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        // An odd multiplier: the low bits stay as random as they were, the top
        // bits take all the bits in.
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
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
        // A mapped IPv4 address is keyed as IPv4: tag 4 and its octets.
        assert_eq!(
            key.as_deref(),
            Some(&b"\x04\x0a\x00\x00\x01\0trial\0abc\0/a\0v"[..])
        );
        // An IPv6 address: tag 6 and its 16 octets, so no IPv4 key is its prefix.
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        let only_ip = KeyPart::parse_all(&["client_ip".into()]).unwrap();
        let key6 = request_key(&only_ip, v6, b"/", headers.iter().copied(), tx).unwrap();
        assert_eq!(key6.len(), 17);
        assert_eq!(key6[0], 6);
        assert_eq!(&key6[1..3], &[0x20, 0x01]);
        // The tables hash the pieces as they come: the same hash as the key's bytes.
        let table = KeyTable::new(640, || Gcra::new(0));
        for (parts, peer) in [(&parts, peer), (&only_ip, v6)] {
            let bytes = request_key(parts, peer, b"/a", headers.iter().copied(), tx).unwrap();
            assert_eq!(
                table.hash_request(parts, peer, b"/a", headers.iter().copied(), tx),
                Some(table.hash(&bytes))
            );
        }
        assert_eq!(
            table.hash_request(&parts, peer, b"/a", headers.iter().copied(), |_: &str| None),
            None
        );
        // Shaping's `when = "client_ip"` still compares the address as text.
        assert_eq!(
            KeyPart::ClientIp.value(peer, b"/", headers.iter().copied(), &mut |_| None),
            Some(b"10.0.0.1".to_vec())
        );
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
        let t: KeyTable<Gcra> = KeyTable::new(640, || Gcra::new(0));
        let mut spare = 0;
        let now = 1_000_000_000;
        for i in 0..10_000u32 {
            let h = t.hash(&i.to_le_bytes());
            let tracked = t.with(
                h,
                now,
                || Gcra::new(now),
                |g, tracked| match g.take(now, 1_000_000_000, u64::MAX) {
                    Taken::Retired => None,
                    _ => Some(tracked),
                },
            );
            spare += usize::from(!tracked);
        }
        assert!(t.len() <= 640, "{}", t.len());
        assert!(spare >= 10_000 - 640);
        // Later, every key is idle: a new key finds room and the table shrank.
        let h = t.hash(b"new");
        let later = 3_000_000_000;
        let fresh = || Gcra::new(later);
        assert!(t.with(h, later, fresh, |_, tracked| Some(tracked)));
        assert!(t.len() < 640);
    }

    #[test]
    fn takes_are_refused_past_the_limit_and_retired_buckets_say_so() {
        let g = Gcra::new(100);
        assert_eq!(g.take(100, 10, 15), Taken::Took { full_at: 110 });
        assert_eq!(g.take(100, 10, 15), Taken::Took { full_at: 120 });
        assert_eq!(g.take(100, 10, 15), Taken::Refused { wait_ns: 5 });
        assert_eq!(g.full_at(), 120);
        // Busy: not retired; idle: retired, and every take then says so.
        assert!(!g.retire_if_idle(119));
        assert!(g.retire_if_idle(120));
        assert_eq!(g.take(200, 10, u64::MAX), Taken::Retired);
        assert!(!g.retire_if_idle(500));
    }

    #[test]
    fn a_held_bucket_is_never_retired() {
        let b = Arc::new(Gcra::new(0));
        let held = hold(&b).expect("live");
        assert!(!b.retire_if_idle(10));
        drop(held);
        assert!(b.retire_if_idle(10));
        assert!(hold(&b).is_none());
    }

    /// A take and a sweep's retire race on one idle bucket, many times over:
    /// exactly one of them wins (the take lands first and the bucket is busy, or
    /// the bucket is retired and the take sees it), never both.
    #[test]
    fn a_take_and_a_retire_never_both_win() {
        let barrier = std::sync::Barrier::new(2);
        let mut both = 0;
        let mut takes_won = 0;
        for _ in 0..5_000 {
            let g = Gcra::new(0);
            let (took, retired) = std::thread::scope(|s| {
                let taker = s.spawn(|| {
                    barrier.wait();
                    matches!(g.take(1, 10, u64::MAX), Taken::Took { .. })
                });
                barrier.wait();
                let retired = g.retire_if_idle(5);
                (taker.join().unwrap(), retired)
            });
            both += usize::from(took && retired);
            takes_won += usize::from(took);
            assert!(took || retired);
        }
        assert_eq!(both, 0, "a take landed on a retired bucket");
        assert!(takes_won > 0);
    }

    /// A handle and a sweep race on one idle shared bucket, many times over: when
    /// the handle is given, the bucket stays live while it is held. Both may lose
    /// (the sweep retires the bucket, the handle sees that, the sweep then sees the
    /// handle's count and gives the bucket back): the bucket is live afterwards, and
    /// the lookup's second pass, under the shard's lock, holds it.
    #[test]
    fn a_hold_and_a_retire_never_both_win() {
        let barrier = std::sync::Barrier::new(2);
        for _ in 0..5_000 {
            let b = Arc::new(Gcra::new(0));
            let (held, retired) = std::thread::scope(|s| {
                let holder = s.spawn(|| {
                    barrier.wait();
                    hold(&b)
                });
                barrier.wait();
                let retired = b.retire_if_idle(5);
                (holder.join().unwrap(), retired)
            });
            match held {
                Some(h) => assert!(!retired && !h.is_retired(), "a held bucket was retired"),
                None if retired => assert!(b.is_retired()),
                None => assert!(
                    hold(&b).is_some(),
                    "a bucket was neither retired nor given back"
                ),
            }
        }
    }

    /// Two threads hammer one key with no lock: together they never take more than
    /// the bucket allows (the burst plus what the time passed refills).
    #[test]
    fn two_threads_on_one_bucket_never_take_more_than_it_allows() {
        let t: KeyTable<Gcra> = KeyTable::new(1_000, || Gcra::new(0));
        let h = t.hash(b"one");
        // 1 ms per take, a burst of 100: over a clock that moves 1 ms every 100
        // attempts, at most 101 + elapsed ms takes succeed.
        let (interval, tolerance) = (1_000_000u64, 100_000_000u64);
        let clock = AtomicU64::new(1);
        let took: usize = std::thread::scope(|s| {
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let mut took = 0;
                        for i in 0..50_000u64 {
                            let now = if i % 100 == 0 {
                                clock.fetch_add(interval, Ordering::Relaxed) + interval
                            } else {
                                clock.load(Ordering::Relaxed)
                            };
                            let taken = t.with(
                                h,
                                now,
                                || Gcra::new(now),
                                |g, _| match g.take(now, interval, tolerance) {
                                    Taken::Retired => None,
                                    taken => Some(taken),
                                },
                            );
                            took += usize::from(matches!(taken, Taken::Took { .. }));
                        }
                        took
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        let elapsed_ms = (clock.load(Ordering::Relaxed) / interval) as usize;
        assert!(took <= 101 + elapsed_ms, "{took} > 101 + {elapsed_ms}");
        // And the bucket was not starved: the clock moved 1,000 ms.
        assert!(took >= elapsed_ms, "{took} < {elapsed_ms}");
        assert_eq!(t.len(), 1);
    }

    /// One thread keeps sweeping (new keys into full shards, the clock a
    /// millisecond further each time) while another takes from its own keys: a
    /// bucket taken from is busy for good, so no sweep may forget it, and each take
    /// on a key must land on the bucket of the key's previous take.
    #[test]
    fn sweeps_racing_with_takes_lose_no_take() {
        let t: KeyTable<Gcra> = KeyTable::new(4 * SHARDS, || Gcra::new(0));
        let keys: Vec<u64> = (0..2 * SHARDS as u32)
            .map(|i| t.hash(&i.to_le_bytes()))
            .collect();
        let cost = 1_000_000_000_000_000;
        let clock = AtomicU64::new(SWEEP_EVERY_NS);
        let last: Vec<u64> = std::thread::scope(|s| {
            s.spawn(|| {
                for round in 0..20_000u64 {
                    let at = clock.fetch_add(SWEEP_EVERY_NS, Ordering::Relaxed);
                    let h = t.hash(&round.to_be_bytes());
                    t.with(h, at, || Gcra::new(at), |_, _| Some(()));
                }
            });
            s.spawn(|| {
                let mut last = vec![0u64; keys.len()];
                for round in 0..100_000 {
                    let k = round % keys.len();
                    let at = clock.load(Ordering::Relaxed);
                    let (taken, tracked) = t.with(
                        keys[k],
                        at,
                        || Gcra::new(at),
                        |g, tracked| match g.take(at, cost, u64::MAX) {
                            Taken::Retired => None,
                            taken => Some((taken, tracked)),
                        },
                    );
                    let Taken::Took { full_at } = taken else {
                        panic!("{taken:?}");
                    };
                    if tracked {
                        if last[k] != 0 {
                            assert_eq!(full_at, last[k] + cost, "a take was lost on key {k}");
                        }
                        last[k] = full_at;
                    }
                }
                last
            })
            .join()
            .unwrap()
        });
        let mut checked = 0;
        for (k, &full_at) in last.iter().enumerate().filter(|(_, l)| **l != 0) {
            let now = clock.load(Ordering::Relaxed);
            let found = t.with(
                keys[k],
                now,
                || Gcra::new(now),
                |g, tracked| Some(tracked.then(|| g.full_at())),
            );
            assert_eq!(found, Some(full_at), "a busy key was forgotten");
            checked += 1;
        }
        assert!(checked > SHARDS, "{checked}");
        assert!(t.len() <= 4 * SHARDS);
    }

    /// A handle taken on a shared bucket keeps it: sweeps racing with the handle
    /// may retire it only for a moment and give it back, and after `settle` the
    /// handle's takes land on the table's bucket.
    #[test]
    fn held_buckets_survive_racing_sweeps() {
        let t: KeyTable<Arc<Gcra>> = KeyTable::new(2 * SHARDS, || Arc::new(Gcra::new(0)));
        let h = t.hash(b"held");
        let clock = AtomicU64::new(SWEEP_EVERY_NS);
        let tracked_rounds = std::thread::scope(|s| {
            s.spawn(|| {
                for round in 0..20_000u64 {
                    let at = clock.fetch_add(SWEEP_EVERY_NS, Ordering::Relaxed);
                    let k = t.hash(&round.to_be_bytes());
                    t.with(k, at, || Arc::new(Gcra::new(at)), |b, _| hold(b).map(drop));
                }
            });
            s.spawn(|| {
                let mut tracked_rounds = 0;
                for _ in 0..20_000 {
                    let at = clock.load(Ordering::Relaxed);
                    let fresh = || Arc::new(Gcra::new(at));
                    let (b, tracked) =
                        t.with(h, at, fresh, |b, tracked| hold(b).map(|b| (b, tracked)));
                    // Cost 0: the bucket stays idle by its time; only the handle
                    // keeps it.
                    let mut taken = b.take(at, 0, u64::MAX);
                    if taken == Taken::Retired {
                        t.settle(h);
                        taken = b.take(at, 0, u64::MAX);
                    }
                    assert!(matches!(taken, Taken::Took { .. }), "{taken:?}");
                    if tracked {
                        let same = t.with(h, at, fresh, |now, _| Some(Arc::ptr_eq(now, &b)));
                        assert!(same, "the table forgot a held bucket");
                        tracked_rounds += 1;
                    }
                }
                tracked_rounds
            })
            .join()
            .unwrap()
        });
        assert!(tracked_rounds > 0);
    }

    #[test]
    fn a_key_hashes_the_same_whatever_its_pieces() {
        let t: KeyTable<Gcra> = KeyTable::new(64, || Gcra::new(0));
        let key: Vec<u8> = (0u8..40).collect();
        for len in 0..key.len() {
            let whole = t.hash(&key[..len]);
            // Every split into two pieces and into single bytes.
            for cut in 0..=len {
                let mut h = t.secrets.hasher();
                h.write(&key[..cut]);
                h.write(&key[cut..len]);
                assert_eq!(h.finish(), whole, "len {len}, cut {cut}");
            }
            let mut h = t.secrets.hasher();
            for b in &key[..len] {
                h.write(std::slice::from_ref(b));
            }
            assert_eq!(h.finish(), whole, "len {len}, byte by byte");
        }
    }

    #[test]
    fn short_keys_never_collide_and_spread_over_the_shards() {
        let t: KeyTable<Gcra> = KeyTable::new(64, || Gcra::new(0));
        let mut seen = std::collections::HashSet::new();
        let mut per_shard = [0usize; SHARDS];
        // Every key of 0, 1 and 2 bytes, and 1,000,000 IPv4 client keys.
        let mut keys: Vec<Vec<u8>> = vec![vec![]];
        keys.extend((0..=255u8).map(|a| vec![a]));
        keys.extend((0..=u16::MAX).map(|a| a.to_le_bytes().to_vec()));
        keys.extend((0..1_000_000u32).map(|i| {
            let o = (i.wrapping_mul(2_654_435_761)).to_be_bytes();
            vec![4, o[0], o[1], o[2], o[3]]
        }));
        for k in &keys {
            let h = t.hash(k);
            assert!(seen.insert(h), "{k:?} collides");
            per_shard[KeyTable::<Gcra>::shard_of(h)] += 1;
        }
        let even = keys.len() / SHARDS;
        for (i, n) in per_shard.iter().enumerate() {
            assert!(
                n.abs_diff(even) < even / 20,
                "shard {i}: {n} keys, {even} expected"
            );
        }
        // Another table draws other secrets.
        let other: KeyTable<Gcra> = KeyTable::new(64, || Gcra::new(0));
        assert_ne!(other.hash(b"\x04\x7f\0\0\x01"), t.hash(b"\x04\x7f\0\0\x01"));
    }

    #[test]
    fn header_names_match_whatever_their_case() {
        assert!(eq_lowercase(b"X-Api-Key", b"x-api-key"));
        assert!(eq_lowercase(b"x-api-key", b"x-api-key"));
        assert!(eq_lowercase(b"COOKIE", b"cookie"));
        assert!(!eq_lowercase(b"x-api-kez", b"x-api-key"));
        assert!(!eq_lowercase(b"x-api-ke", b"x-api-key"));
        // Only letters fold: '^' | 0x20 is '~', and '\r' | 0x20 is '-'.
        assert!(!eq_lowercase(b"a^b", b"a~b"));
        assert!(!eq_lowercase(b"a\rb", b"a-b"));
        assert!(!eq_lowercase(b"\xc1", b"\xe1"));
    }
}
