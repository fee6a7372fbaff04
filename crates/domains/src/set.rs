//! [`SuffixSet`]: millions of domains, where a name matches itself or any parent domain.
//!
//! # Design
//!
//! A lookup of `a.b.example.com` must find an entry for `a.b.example.com`,
//! `b.example.com`, `example.com` or `com`, and never one for `notexample.com`. Every
//! candidate is a *suffix of the name that starts at a label boundary*, so the set is an
//! open-addressing hash table keyed by a hash of such suffixes, and a lookup probes once
//! per label:
//!
//! * **Chained label hash.** The key of a name is computed label by label from the right:
//!   `h(com) = xxh3(com, seed)`, `h(example.com) = xxh3(example, h(com))`, and so on.
//!   One right-to-left pass over the name yields the hash of every suffix (the
//!   "reversed-suffix" hash) without hashing any byte twice, and a label boundary is
//!   part of the key by construction: `notexample.com` hashes the label `notexample`,
//!   never `example`.
//! * **Collisions are verified.** A slot holds 32 bits of the hash (the tag) and the
//!   offset of its entry in one byte arena; a tag match is confirmed by comparing the
//!   stored name with the suffix of the looked-up name, so a hash collision can never
//!   make a name match an entry it is not under.
//! * **Compact.** A slot is 8 bytes (tag, arena offset); the table is kept at most half
//!   full (a power of two), so a miss usually ends at the first or second slot, within one
//!   cache line. An entry in the arena is `[len: u8][self value: u32][subdomain value:
//!   u32][name bytes]`: 9 bytes plus the name, with no per-entry allocation. For 1.6
//!   million domains that is 32 MiB of slots and about 40 MB of arena (see the crate's
//!   README for the measured figures).
//!
//! A trie (labels as edges) was the other candidate: it shares the suffix `com` between
//! entries, but each node costs a pointer-sized child map and a lookup chases one
//! pointer per label through memory that is not contiguous; with names of 2-4 labels the
//! hash table does the same number of probes, each one a single cache line, and loads in
//! one pass with no per-node allocation.
//!
//! # Values and kinds
//!
//! Each entry carries a small integer (a list id, a category id, or an index into a
//! caller's table), separately for the name itself and for its subdomains, which is how
//! the [`EntryKind`]s are told apart: `example.com` ([`EntryKind::Domain`]) sets both,
//! `*.example.com` ([`EntryKind::SubdomainsOnly`]) only the subdomain value, and an IP
//! address ([`EntryKind::Exact`]) only its own. Names must be normalised first (see
//! [`crate::normalize`]); [`SuffixSet::lookup`] takes a [`Host`], which only the
//! normalisation functions produce from client input.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::normalize::{Host, HostError, normalize_name};

/// The value an entry carries: a list id, a category id or an index into a table of the
/// caller's. At most [`MAX_VALUE`].
pub type Value = u32;

/// The largest [`Value`] an entry may carry (`u32::MAX` marks "no value").
pub const MAX_VALUE: Value = u32::MAX - 1;

const NONE: u32 = u32::MAX;
const EMPTY: u32 = u32::MAX;
const SEED: u64 = 0x9e37_79b9_7f4a_7c15;
const HEADER: usize = 9;

/// What an entry covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// The name and all its subdomains (a plain `example.com` line).
    Domain,
    /// Only the subdomains, not the name itself (a `*.example.com` line).
    SubdomainsOnly,
    /// Only the name itself (an IP address).
    Exact,
}

/// A match found by a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match<'a> {
    /// The value of the entry that matched (for the name itself, or for its subdomains).
    pub value: Value,
    /// The entry's name: the looked-up name or one of its parent domains (a suffix of
    /// the looked-up name).
    pub entry: &'a str,
    /// Whether the entry is the looked-up name itself rather than a parent domain.
    pub exact: bool,
}

/// Why an entry could not be added to a set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    /// The value is `u32::MAX`, which marks "no value".
    #[error("value {0} is out of range (at most {MAX_VALUE})")]
    ValueOutOfRange(u32),
    /// The arena of names would pass 4 GiB.
    #[error("the set is full (its names would take over 4 GiB)")]
    Full,
    /// An IP address with a kind other than [`EntryKind::Domain`] or [`EntryKind::Exact`]
    /// (`*.1.2.3.4`).
    #[error("an IP address has no subdomains")]
    WildcardIp,
    /// A name that is not normalised (empty, over 253 bytes, empty label).
    #[error("not a normalised name: {0:?}")]
    NotNormalised(String),
}

/// Why a line of a list file is not an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// The host does not normalise.
    #[error("{0}")]
    Host(#[from] HostError),
    /// `*.` before an IP address.
    #[error("an IP address has no subdomains (`*.` before it)")]
    WildcardIp,
    /// A URL path where only domains are allowed.
    #[error("a URL path is not allowed in a domain list")]
    PathNotAllowed,
    /// More than one field on the line (a hosts-file line, say).
    #[error("more than one field on the line")]
    ExtraField,
    /// The line is not UTF-8.
    #[error("the line is not UTF-8")]
    NotUtf8,
    /// A `*` anywhere but in a leading `*.`.
    #[error("`*` is allowed only as a leading `*.`")]
    MisplacedWildcard,
}

/// Why a list file could not be loaded. Names the file and, for an entry, the line.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What reading it gave.
        source: std::io::Error,
    },
    /// A line is not a valid entry.
    #[error("{}:{line}: {source}: {text:?}", path.display())]
    Entry {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// The line's text (lossily decoded, at most 200 bytes).
        text: String,
        /// What is wrong with it.
        source: EntryError,
    },
    /// The entry could not be added.
    #[error("{}:{line}: {source}", path.display())]
    Set {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// What the set said.
        source: SetError,
    },
    /// Something other than a list, such as a category directory, was not as expected.
    #[error("{}: {message}", path.display())]
    Other {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// One parsed line of a list file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The normalised host.
    pub host: Host,
    /// What the entry covers ([`EntryKind::Exact`] for an IP address).
    pub kind: EntryKind,
    /// A URL path prefix (`/games/` of `example.com/games/`), for category lists.
    pub path: Option<String>,
}

/// Parses one line of a list file: a domain (Unicode or punycode, any case, one trailing
/// dot allowed), an optional `*.` prefix for subdomains only, an IP address, and an
/// optional path (`example.com/games/`). Blank lines and `#` comments (whole-line, or
/// after whitespace) give `Ok(None)`.
pub fn parse_entry(line: &[u8]) -> Result<Option<Entry>, EntryError> {
    let line = std::str::from_utf8(line).map_err(|_| EntryError::NotUtf8)?;
    let mut line = line.trim_matches(|c: char| c.is_ascii_whitespace());
    if let Some(hash) = line.find('#') {
        let before = &line[..hash];
        if hash == 0 || before.ends_with(|c: char| c.is_ascii_whitespace()) {
            line = before.trim_end_matches(|c: char| c.is_ascii_whitespace());
        }
    }
    if line.is_empty() {
        return Ok(None);
    }
    if line.contains(|c: char| c.is_ascii_whitespace()) {
        return Err(EntryError::ExtraField);
    }
    let (kind, rest) = match line.strip_prefix("*.") {
        Some(rest) => (EntryKind::SubdomainsOnly, rest),
        None => (EntryKind::Domain, line),
    };
    let (host, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], Some(rest[slash..].to_owned())),
        None => (rest, None),
    };
    if host.contains('*') {
        return Err(EntryError::MisplacedWildcard);
    }
    let host = normalize_name(host)?;
    let kind = match (&host, kind) {
        (Host::Ip(_), EntryKind::SubdomainsOnly) => return Err(EntryError::WildcardIp),
        (Host::Ip(_), _) => EntryKind::Exact,
        (Host::Name(_), k) => k,
    };
    Ok(Some(Entry { host, kind, path }))
}

/// A set of domains where a name matches itself or any parent domain in the set. See
/// the module documentation for the design.
#[derive(Debug, Clone)]
pub struct SuffixSet {
    /// Per slot: `[tag, arena offset]`; offset `EMPTY` for an empty slot.
    slots: Vec<[u32; 2]>,
    arena: Vec<u8>,
    len: usize,
}

impl Default for SuffixSet {
    fn default() -> Self {
        Self::new()
    }
}

/// Calls `f(start, hash)` for each label-boundary suffix of `name`, from the last label
/// (the TLD) to the whole name; `start` is the suffix's offset in `name`.
#[inline]
fn for_each_suffix(name: &[u8], mut f: impl FnMut(usize, u64) -> bool) {
    let mut h = SEED;
    let mut end = name.len();
    loop {
        // Labels are short: a plain scan does as well as a vectorised search here
        // (measured; so did a word-at-a-time scan for the dots).
        let start = name[..end]
            .iter()
            .rposition(|&b| b == b'.')
            .map_or(0, |dot| dot + 1);
        h = xxh3_64_with_seed(&name[start..end], h);
        if !f(start, h) || start == 0 {
            return;
        }
        end = start - 1;
    }
}

fn full_hash(name: &[u8]) -> u64 {
    let mut out = 0;
    for_each_suffix(name, |_, h| {
        out = h;
        true
    });
    out
}

impl SuffixSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty set with room for `n` entries before it grows.
    pub fn with_capacity(n: usize) -> Self {
        let slots = (n.saturating_mul(2)).max(16).next_power_of_two();
        SuffixSet {
            slots: vec![[0, EMPTY]; slots],
            arena: Vec::new(),
            len: 0,
        }
    }

    /// The number of distinct names in the set.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes the set holds on the heap (its slot table and name arena, by capacity).
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<[u32; 2]>() + self.arena.capacity()
    }

    /// Releases spare capacity of the name arena (after loading).
    pub fn shrink_to_fit(&mut self) {
        self.arena.shrink_to_fit();
    }

    fn entry_name(&self, off: u32) -> &[u8] {
        let off = off as usize;
        let len = usize::from(self.arena[off]);
        &self.arena[off + HEADER..off + HEADER + len]
    }

    fn value_at(&self, off: u32, sub: bool) -> u32 {
        let at = off as usize + 1 + if sub { 4 } else { 0 };
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.arena[at..at + 4]);
        u32::from_le_bytes(b)
    }

    fn set_value_at(&mut self, off: u32, sub: bool, v: u32) {
        let at = off as usize + 1 + if sub { 4 } else { 0 };
        self.arena[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// The arena offset of `name` (whose chained hash is `h`), if stored.
    #[inline]
    fn find(&self, name: &[u8], h: u64) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let tag = (h >> 32) as u32;
        let mut i = h as usize & mask;
        loop {
            let [t, off] = self.slots[i];
            if off == EMPTY {
                return None;
            }
            if t == tag && self.entry_name(off) == name {
                return Some(off);
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let new_len = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, vec![[0, EMPTY]; new_len]);
        let mask = new_len - 1;
        for [_, off] in old {
            if off == EMPTY {
                continue;
            }
            let h = full_hash(self.entry_name(off));
            let mut i = h as usize & mask;
            while self.slots[i][1] != EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = [(h >> 32) as u32, off];
        }
    }

    /// Adds an entry; if the name is already there, its values are replaced.
    pub fn insert(&mut self, host: &Host, kind: EntryKind, value: Value) -> Result<(), SetError> {
        self.insert_with(host, kind, value, |_, new| new)
    }

    /// Adds an entry; where the name already has a value for the same part (the name
    /// itself, or its subdomains), `merge(old, new)` gives the value kept.
    pub fn insert_with(
        &mut self,
        host: &Host,
        kind: EntryKind,
        value: Value,
        mut merge: impl FnMut(Value, Value) -> Value,
    ) -> Result<(), SetError> {
        if value > MAX_VALUE {
            return Err(SetError::ValueOutOfRange(value));
        }
        let ip_text;
        let (name, kind) = match host {
            Host::Name(n) => (n.as_str(), kind),
            Host::Ip(ip) => {
                if kind == EntryKind::SubdomainsOnly {
                    return Err(SetError::WildcardIp);
                }
                ip_text = ip.to_string();
                (ip_text.as_str(), EntryKind::Exact)
            }
        };
        let bytes = name.as_bytes();
        if bytes.is_empty()
            || bytes.len() > 255
            || bytes.starts_with(b".")
            || bytes.ends_with(b".")
            || memchr::memmem::find(bytes, b"..").is_some()
        {
            return Err(SetError::NotNormalised(name.to_owned()));
        }
        let h = full_hash(bytes);
        let off = match self.find(bytes, h) {
            Some(off) => off,
            None => {
                if (self.len + 1) * 2 > self.slots.len() {
                    self.grow();
                }
                let off = u32::try_from(self.arena.len())
                    .ok()
                    .filter(|&o| o != EMPTY)
                    .ok_or(SetError::Full)?;
                if self.arena.len() + HEADER + bytes.len() > EMPTY as usize {
                    return Err(SetError::Full);
                }
                self.arena.push(bytes.len() as u8);
                self.arena.extend_from_slice(&NONE.to_le_bytes());
                self.arena.extend_from_slice(&NONE.to_le_bytes());
                self.arena.extend_from_slice(bytes);
                let mask = self.slots.len() - 1;
                let mut i = h as usize & mask;
                while self.slots[i][1] != EMPTY {
                    i = (i + 1) & mask;
                }
                self.slots[i] = [(h >> 32) as u32, off];
                self.len += 1;
                off
            }
        };
        let parts: &[bool] = match kind {
            EntryKind::Domain => &[false, true],
            EntryKind::SubdomainsOnly => &[true],
            EntryKind::Exact => &[false],
        };
        for &sub in parts {
            let old = self.value_at(off, sub);
            let v = if old == NONE {
                value
            } else {
                merge(old, value)
            };
            self.set_value_at(off, sub, v.min(MAX_VALUE));
        }
        Ok(())
    }

    /// Calls `f` for every entry that matches `name`, from the least specific (the TLD)
    /// to the most specific (the name itself). `name` must be normalised (a
    /// [`Host::Name`]'s text); other text simply finds fewer matches.
    pub fn for_each_match<'a>(&'a self, name: &'a str, mut f: impl FnMut(Match<'a>)) {
        let bytes = name.as_bytes();
        if bytes.is_empty() {
            return;
        }
        // First every suffix's hash, then every suffix's first slot, then the probes:
        // the slot loads do not depend on each other, so their cache misses overlap
        // instead of queueing one behind the other.
        const MAX: usize = 16;
        let mut starts = [0usize; MAX];
        let mut hashes = [0u64; MAX];
        let mut n = 0;
        let mut overflow = false;
        for_each_suffix(bytes, |start, h| {
            if n == MAX {
                overflow = true;
                return false;
            }
            starts[n] = start;
            hashes[n] = h;
            n += 1;
            true
        });
        if overflow {
            // More labels than a normalised name can have: probe one by one.
            for_each_suffix(bytes, |start, h| {
                self.report(name, start, self.find(&bytes[start..], h), &mut f);
                true
            });
            return;
        }
        let mask = self.slots.len() - 1;
        let mut first = [[0u32; 2]; MAX];
        for i in 0..n {
            first[i] = self.slots[hashes[i] as usize & mask];
        }
        for i in 0..n {
            let found = if first[i][1] == EMPTY {
                None
            } else {
                self.find(&bytes[starts[i]..], hashes[i])
            };
            self.report(name, starts[i], found, &mut f);
        }
    }

    #[inline]
    fn report<'a>(
        &'a self,
        name: &'a str,
        start: usize,
        found: Option<u32>,
        f: &mut impl FnMut(Match<'a>),
    ) {
        let Some(off) = found else { return };
        let exact = start == 0;
        let value = self.value_at(off, !exact);
        if value != NONE {
            // The stored name equals this suffix of `name`, which starts after a dot
            // (or at 0), so it is a `str` boundary.
            let entry = name.get(start..).unwrap_or_default();
            f(Match {
                value,
                entry,
                exact,
            });
        }
    }

    /// The most specific entry matching a domain name: the name itself, else its nearest
    /// parent in the set.
    pub fn lookup_name<'a>(&'a self, name: &'a str) -> Option<Match<'a>> {
        let mut best = None;
        self.for_each_match(name, |m| best = Some(m));
        best
    }

    /// The entry for an IP address, if the set holds it (IP entries match only
    /// themselves; the address is taken to its canonical form first).
    pub fn lookup_ip(&self, ip: IpAddr) -> Option<Match<'_>> {
        let text = crate::normalize::canonical_ip(ip).to_string();
        let off = self.find(text.as_bytes(), full_hash(text.as_bytes()))?;
        let value = self.value_at(off, false);
        (value != NONE).then(|| Match {
            value,
            entry: std::str::from_utf8(self.entry_name(off)).unwrap_or_default(),
            exact: true,
        })
    }

    /// The most specific entry matching a normalised host.
    pub fn lookup<'a>(&'a self, host: &'a Host) -> Option<Match<'a>> {
        match host {
            Host::Name(n) => self.lookup_name(n),
            Host::Ip(ip) => self.lookup_ip(*ip),
        }
    }

    /// Whether any entry matches the host.
    pub fn contains(&self, host: &Host) -> bool {
        self.lookup(host).is_some()
    }

    /// Loads a list file (one entry per line, see [`parse_entry`]; URL paths are
    /// refused) into a new set, every entry with `value`.
    pub fn load_file(path: impl AsRef<Path>, value: Value) -> Result<Self, LoadError> {
        let mut set = SuffixSet::new();
        set.add_file(path, value)?;
        set.shrink_to_fit();
        Ok(set)
    }

    /// Adds the entries of a list file with `value`, replacing values already held.
    pub fn add_file(&mut self, path: impl AsRef<Path>, value: Value) -> Result<(), LoadError> {
        let path = path.as_ref();
        let data = read_file(path)?;
        self.reserve_for(&data);
        for_each_line(&data, |line_no, line| {
            let Some(entry) =
                parse_entry(line).map_err(|source| entry_error(path, line_no, line, source))?
            else {
                return Ok(());
            };
            if entry.path.is_some() {
                return Err(entry_error(path, line_no, line, EntryError::PathNotAllowed));
            }
            self.insert(&entry.host, entry.kind, value)
                .map_err(|source| LoadError::Set {
                    path: path.to_owned(),
                    line: line_no,
                    source,
                })
        })
    }

    /// Makes room for the entries of a list file's text (one per line at most), so
    /// that loading neither rehashes nor regrows the arena.
    pub(crate) fn reserve_for(&mut self, data: &[u8]) {
        let lines = memchr::memchr_iter(b'\n', data).count() + 1;
        let want = self.len + lines;
        if want * 2 > self.slots.len() {
            let mut bigger = SuffixSet::with_capacity(want);
            bigger.arena = std::mem::take(&mut self.arena);
            bigger.len = self.len;
            let mask = bigger.slots.len() - 1;
            for &[_, off] in self.slots.iter().filter(|s| s[1] != EMPTY) {
                let h = full_hash(bigger.entry_name(off));
                let mut i = h as usize & mask;
                while bigger.slots[i][1] != EMPTY {
                    i = (i + 1) & mask;
                }
                bigger.slots[i] = [(h >> 32) as u32, off];
            }
            *self = bigger;
        }
        self.arena.reserve(data.len() + lines * (HEADER - 1));
    }
}

/// Reads a whole list file.
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, LoadError> {
    std::fs::read(path).map_err(|source| LoadError::Io {
        path: path.to_owned(),
        source,
    })
}

pub(crate) fn entry_error(path: &Path, line: usize, text: &[u8], source: EntryError) -> LoadError {
    let text = &text[..text.len().min(200)];
    LoadError::Entry {
        path: path.to_owned(),
        line,
        text: String::from_utf8_lossy(text).trim_end().to_owned(),
        source,
    }
}

/// Calls `f(line number, line)` for each line (`\n` or `\r\n`) of `data`.
pub(crate) fn for_each_line(
    data: &[u8],
    mut f: impl FnMut(usize, &[u8]) -> Result<(), LoadError>,
) -> Result<(), LoadError> {
    let mut line_no = 0;
    let mut rest = data;
    while !rest.is_empty() {
        line_no += 1;
        let (line, next) = match memchr::memchr(b'\n', rest) {
            Some(nl) => (&rest[..nl], &rest[nl + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        f(line_no, line)?;
        rest = next;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize::{normalize_authority, normalize_host, normalize_name};

    fn host(s: &str) -> Host {
        normalize_name(s).unwrap()
    }

    fn set_of(entries: &[(&str, EntryKind, Value)]) -> SuffixSet {
        let mut set = SuffixSet::new();
        for &(n, k, v) in entries {
            set.insert(&host(n), k, v).unwrap();
        }
        set
    }

    #[test]
    fn parents_match_not_siblings() {
        let set = set_of(&[("example.com", EntryKind::Domain, 7)]);
        let h = host("a.b.example.com");
        let m = set.lookup(&h).unwrap();
        assert_eq!((m.value, m.entry, m.exact), (7, "example.com", false));
        let h = host("example.com");
        let m = set.lookup(&h).unwrap();
        assert_eq!((m.value, m.exact), (7, true));
        for miss in [
            "notexample.com",
            "example.co",
            "com",
            "example.com.evil",
            "xample.com",
        ] {
            assert!(set.lookup(&host(miss)).is_none(), "{miss}");
        }
    }

    #[test]
    fn kinds_and_most_specific() {
        let set = set_of(&[
            ("example.com", EntryKind::Domain, 1),
            ("ads.example.com", EntryKind::SubdomainsOnly, 2),
            ("com", EntryKind::SubdomainsOnly, 3),
        ]);
        assert_eq!(set.lookup(&host("ads.example.com")).unwrap().value, 1);
        assert_eq!(set.lookup(&host("x.ads.example.com")).unwrap().value, 2);
        assert_eq!(set.lookup(&host("other.com")).unwrap().value, 3);
        assert!(set.lookup(&host("com")).is_none());
        let mut all = Vec::new();
        set.for_each_match("x.ads.example.com", |m| all.push(m.value));
        assert_eq!(all, [3, 1, 2]);
        assert_eq!(set.len(), 3);
    }

    #[test]
    fn merge_and_replace() {
        let mut set = SuffixSet::new();
        set.insert(&host("a.com"), EntryKind::SubdomainsOnly, 1)
            .unwrap();
        set.insert_with(&host("a.com"), EntryKind::Domain, 2, |o, n| o * 10 + n)
            .unwrap();
        assert_eq!(set.lookup(&host("a.com")).unwrap().value, 2);
        assert_eq!(set.lookup(&host("x.a.com")).unwrap().value, 12);
        assert_eq!(
            set.insert(&host("a.com"), EntryKind::Domain, u32::MAX),
            Err(SetError::ValueOutOfRange(u32::MAX))
        );
        assert_eq!(
            set.insert(&Host::Name("a..b".into()), EntryKind::Domain, 1),
            Err(SetError::NotNormalised("a..b".into()))
        );
    }

    #[test]
    fn ip_entries_match_every_spelling_and_only_exactly() {
        let mut set = set_of(&[
            ("127.0.0.1", EntryKind::Exact, 1),
            ("[2001:db8::1]", EntryKind::Exact, 2),
        ]);
        for s in [
            "127.0.0.1",
            "127.1",
            "0x7f.0.0.1",
            "2130706433",
            "0177.0.0.1",
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1]:443",
            "127.0.0.1.",
            "%31%32%37.0.0.1",
        ] {
            assert_eq!(
                set.lookup(&normalize_host(s).unwrap()).unwrap().value,
                1,
                "{s}"
            );
        }
        assert_eq!(
            set.lookup(&normalize_host("[2001:DB8:0::1]:80").unwrap())
                .unwrap()
                .value,
            2
        );
        assert!(set.lookup(&normalize_host("127.0.0.2").unwrap()).is_none());
        assert!(set.lookup_name("0.0.1").is_none());
        assert_eq!(
            set.insert(&host("1.2.3.4"), EntryKind::SubdomainsOnly, 1),
            Err(SetError::WildcardIp)
        );
    }

    #[test]
    fn no_evasion_of_a_name_entry() {
        for listed in ["bücher.example", "xn--bcher-kva.example", "BÜCHER.EXAMPLE."] {
            let set = set_of(&[(listed, EntryKind::Domain, 1)]);
            for s in [
                "bücher.example",
                "xn--bcher-kva.example",
                "XN--BCHER-KVA.example",
                "Bücher.Example.",
                "www.bücher.example:8443",
                "b%C3%BCcher.example",
                "bu\u{308}cher.example",
                "www.xn--bcher-kva.example.:80",
                "bücher\u{3002}example",
            ] {
                let h = normalize_host(s).unwrap();
                assert_eq!(set.lookup(&h).map(|m| m.value), Some(1), "{listed} / {s}");
            }
            let h = normalize_authority("user@bücher.example:80").unwrap();
            assert!(set.contains(&h));
        }
    }

    /// A tiny deterministic generator (splitmix64), so the tests need no crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn label(&mut self) -> String {
            const A: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
            let len = 1 + self.below(12) as usize;
            let mut s: String = (0..len)
                .map(|_| A[self.below(A.len() as u64) as usize] as char)
                .collect();
            if len > 2 && self.below(4) == 0 {
                s.replace_range(1..2, "-");
            }
            s
        }
    }

    #[test]
    fn property_generated_names() {
        let mut rng = Rng(42);
        let tlds = ["com", "net", "org", "de", "co.uk", "xn--p1ai"];
        let mut set = SuffixSet::new();
        let mut listed = Vec::new();
        for i in 0..20_000u32 {
            let depth = 1 + rng.below(3) as usize;
            let mut name = tlds[rng.below(tlds.len() as u64) as usize].to_owned();
            for _ in 0..depth {
                name = format!("{}.{name}", rng.label());
            }
            let h = normalize_name(&name).unwrap();
            set.insert(&h, EntryKind::Domain, i).unwrap();
            listed.push((name, i));
        }
        for (name, v) in &listed {
            let own = set.lookup_name(name).unwrap();
            assert!(own.exact, "{name}");
            // A later duplicate may have replaced the value; it is still this entry.
            assert_eq!(own.entry, name);
            let _ = v;
            // Every subdomain matches, through this entry or a more specific one.
            let sub = format!("{}.{}.{name}", rng.label(), rng.label());
            let m = set.lookup_name(&sub).unwrap();
            assert!(
                sub.ends_with(&format!(".{}", m.entry)),
                "{sub} matched {}",
                m.entry
            );
            // A sibling with the same suffix string but another label boundary: the
            // first label glued to a prefix (`xexample.com`), or the name with its first
            // dot removed. Neither may match this entry.
            for sibling in [
                format!("x{name}"),
                format!("{}{name}", rng.label()),
                name.replacen('.', "", 1),
            ] {
                if let Some(m) = set.lookup_name(&sibling) {
                    assert_ne!(m.entry, name, "{sibling} matched {name}");
                    assert!(
                        m.exact && m.entry == sibling
                            || sibling.ends_with(&format!(".{}", m.entry)),
                        "{sibling} matched {}",
                        m.entry
                    );
                }
            }
        }
    }

    #[test]
    fn property_spellings_of_listed_names_all_match() {
        let mut rng = Rng(7);
        let mut set = SuffixSet::new();
        let mut listed = Vec::new();
        for i in 0..3_000u32 {
            let name = format!(
                "{}.{}.{}",
                rng.label(),
                rng.label(),
                ["com", "org", "xn--p1ai"][i as usize % 3]
            );
            set.insert(&normalize_name(&name).unwrap(), EntryKind::Domain, 1)
                .unwrap();
            listed.push(name);
        }
        for name in &listed {
            for _ in 0..8 {
                // A subdomain, some upper case, percent-encoded bytes, a trailing dot, a
                // port, userinfo: every spelling must still find the entry.
                let mut s = String::new();
                if rng.below(2) == 0 {
                    s.push_str(&rng.label());
                    s.push('.');
                }
                for c in name.chars() {
                    match rng.below(6) {
                        0 => s.push(c.to_ascii_uppercase()),
                        1 => s.push_str(&format!("%{:02X}", c as u32)),
                        _ => s.push(c),
                    }
                }
                if rng.below(2) == 0 {
                    s.push('.');
                }
                if rng.below(2) == 0 {
                    s.push_str(&format!(":{}", rng.below(65536)));
                }
                let host = if rng.below(3) == 0 {
                    normalize_authority(format!("u:p@{s}")).unwrap()
                } else {
                    normalize_host(&s).unwrap()
                };
                assert!(set.contains(&host), "{name}: {s} gave {host}");
            }
        }
    }

    #[test]
    fn load_file_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deny.txt");
        std::fs::write(
            &path,
            "# comment\n\nExample.COM.\r\n*.ads.net  # trailing comment\nbücher.example\n10.0.0.1\n",
        )
        .unwrap();
        let set = SuffixSet::load_file(&path, 5).unwrap();
        assert_eq!(set.len(), 4);
        assert!(set.contains(&normalize_host("www.example.com").unwrap()));
        assert!(set.contains(&normalize_host("x.ads.net").unwrap()));
        assert!(!set.contains(&normalize_host("ads.net").unwrap()));
        assert!(set.contains(&normalize_host("xn--bcher-kva.example").unwrap()));
        assert!(set.contains(&normalize_host("012.0.1").unwrap()));

        std::fs::write(&path, "ok.com\nbad..com\n").unwrap();
        let err = SuffixSet::load_file(&path, 1).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("deny.txt:2:"), "{text}");
        assert!(matches!(err, LoadError::Entry { line: 2, .. }));
        for bad in [
            "a.com/path",
            "*.1.2.3.4",
            "a.*.com",
            "**.a.com",
            "0.0.0.0 a.com",
            "xn--a.com",
            "a b",
            "1.2.3.4.5",
        ] {
            std::fs::write(&path, format!("{bad}\n")).unwrap();
            assert!(SuffixSet::load_file(&path, 1).is_err(), "{bad}");
        }
        std::fs::write(&path, b"a.com\n\xff\n").unwrap();
        assert!(matches!(
            SuffixSet::load_file(&path, 1),
            Err(LoadError::Entry {
                line: 2,
                source: EntryError::NotUtf8,
                ..
            })
        ));
        assert!(matches!(
            SuffixSet::load_file(dir.path().join("missing"), 1),
            Err(LoadError::Io { .. })
        ));
    }
}
