//! Collections: the transaction's TX variables and the persistent collections (IP,
//! GLOBAL, SESSION, USER, RESOURCE) behind the [`CollectionStore`] trait.

use std::collections::HashMap;
use std::sync::Mutex;

/// One stored variable of a collection, with its expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredValue {
    /// The value.
    pub value: Vec<u8>,
    /// Unix time in seconds after which the variable is gone (`expirevar`), if any.
    pub expires_at: Option<i64>,
}

/// A persistent collection record: variable name (lower-case) to value.
pub type Record = HashMap<Vec<u8>, StoredValue>;

/// Where persistent collections live between transactions. Implementations must be
/// safe to share between threads; readers should not block writers (see the `store`
/// crate for an LMDB-backed store).
pub trait CollectionStore: Send + Sync + std::fmt::Debug {
    /// Reads the record `key` of `collection` (such as `IP`, `"192.0.2.1"`), without
    /// expired variables. `None` when there is no record.
    fn load(&self, collection: &str, key: &[u8], now: i64) -> Option<Record>;

    /// Writes back the variables a transaction changed: `set` replaces or adds
    /// variables, `deleted` removes them. Counters are merged by the caller's delta
    /// semantics: `deltas` holds numeric increments to apply on top of the stored value,
    /// so concurrent transactions do not lose each other's counts.
    fn store(&self, collection: &str, key: &[u8], update: &RecordUpdate, now: i64);
}

/// The changes one transaction made to one persistent record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordUpdate {
    /// Variables set to a new value.
    pub set: Vec<(Vec<u8>, StoredValue)>,
    /// Numeric increments (from `setvar:ip.x=+1`), applied to the stored value.
    pub deltas: Vec<(Vec<u8>, i64, Option<i64>)>,
    /// Variables deleted.
    pub deleted: Vec<Vec<u8>>,
}

/// An in-memory store, for tests and single-process use.
#[derive(Debug, Default)]
pub struct MemoryStore {
    records: Mutex<HashMap<(String, Vec<u8>), Record>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Reads a value as a number the way ModSecurity does (leading integer, else 0).
pub fn to_number(v: &[u8]) -> i64 {
    let s = std::str::from_utf8(v).unwrap_or("").trim();
    let end = s
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && (c == '-' || c == '+'))))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    s[..end].parse().unwrap_or(0)
}

impl CollectionStore for MemoryStore {
    fn load(&self, collection: &str, key: &[u8], now: i64) -> Option<Record> {
        let guard = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let rec = guard.get(&(collection.to_string(), key.to_vec()))?;
        Some(
            rec.iter()
                .filter(|(_, v)| v.expires_at.is_none_or(|t| t > now))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }

    fn store(&self, collection: &str, key: &[u8], update: &RecordUpdate, now: i64) {
        let mut guard = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let rec = guard
            .entry((collection.to_string(), key.to_vec()))
            .or_default();
        rec.retain(|_, v| v.expires_at.is_none_or(|t| t > now));
        for (k, v) in &update.set {
            rec.insert(k.clone(), v.clone());
        }
        for (k, delta, expires) in &update.deltas {
            let e = rec.entry(k.clone()).or_insert(StoredValue {
                value: b"0".to_vec(),
                expires_at: None,
            });
            e.value = (to_number(&e.value) + delta).to_string().into_bytes();
            if expires.is_some() {
                e.expires_at = *expires;
            }
        }
        for k in &update.deleted {
            rec.remove(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(to_number(b"42"), 42);
        assert_eq!(to_number(b" -3x"), -3);
        assert_eq!(to_number(b"abc"), 0);
        assert_eq!(to_number(b""), 0);
    }

    #[test]
    fn memory_store_counts_and_expires() {
        let s = MemoryStore::new();
        assert!(s.load("IP", b"1.2.3.4", 0).is_none());
        let up = RecordUpdate {
            deltas: vec![(b"hits".to_vec(), 2, None)],
            ..Default::default()
        };
        s.store("IP", b"1.2.3.4", &up, 0);
        s.store("IP", b"1.2.3.4", &up, 0);
        let r = s.load("IP", b"1.2.3.4", 0).unwrap();
        assert_eq!(r[&b"hits".to_vec()].value, b"4");
        let up = RecordUpdate {
            set: vec![(
                b"block".to_vec(),
                StoredValue {
                    value: b"1".to_vec(),
                    expires_at: Some(10),
                },
            )],
            ..Default::default()
        };
        s.store("IP", b"1.2.3.4", &up, 0);
        assert!(
            s.load("IP", b"1.2.3.4", 5)
                .unwrap()
                .contains_key(b"block".as_slice())
        );
        assert!(
            !s.load("IP", b"1.2.3.4", 11)
                .unwrap()
                .contains_key(b"block".as_slice())
        );
        let del = RecordUpdate {
            deleted: vec![b"hits".to_vec()],
            ..Default::default()
        };
        s.store("IP", b"1.2.3.4", &del, 0);
        assert!(
            !s.load("IP", b"1.2.3.4", 0)
                .unwrap()
                .contains_key(b"hits".as_slice())
        );
    }
}
