//! Persistent collections (IP, GLOBAL, SESSION, USER, RESOURCE), without I/O.
//!
//! A transaction reads a record once, when `initcol`, `setsid` or `setuid` opens it,
//! through a [`CollectionReader`] the server gives it (a snapshot of its store; a
//! failed read is an error the transaction reports, never an empty record). What the
//! rules change is kept as operations in a [`WriteLog`] per record and handed back
//! as data ([`RecordWrite`], see `Transaction::poll_event`): an
//! increment stays an increment all the way to the store, so concurrent
//! transactions and hosts add up instead of overwriting each other. [`apply`] is the
//! reference definition of what a write does to a record on one host (the `store`
//! crate keeps a convergent form for the fleet sync, and tests that it reads back
//! as [`apply`] does).
//!
//! Differences from ModSecurity, on purpose: records are found by exact key
//! (ModSecurity v3 can return the record `sample1` for the key `sample`); keys too
//! long for the store are kept under a digest ([`RecordKey::encode`]); and a
//! variable can hold a set of values (`addmember`, `delmember`, `@memberOf`).

mod record;
mod write;

pub use record::{
    BUILT_IN_FIELDS, DEFAULT_APP, MAX_KEY_BYTES, RecordKey, SET_MEMBER_LIMIT, StoredRecord,
    StoredVar, VarValue, bytes_from_text, bytes_to_text,
};
pub use write::{NamedOp, RecordWrite, VarOp, WriteLog, apply, apply_op};

use std::collections::HashMap;
use std::sync::Mutex;

/// Why a collection could not be read or named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CollectionError {
    /// The name is not one of IP, GLOBAL, SESSION, USER, RESOURCE, TX.
    #[error("unknown collection {0:?} (expected IP, GLOBAL, SESSION, USER or RESOURCE)")]
    UnknownCollection(String),
    /// TX lives for one transaction only.
    #[error("collection {0} is not persistent")]
    NotPersistent(String),
    /// An application id (`SecWebAppId`) that cannot name records.
    #[error("application id {0:?} is empty or holds a NUL byte")]
    BadApp(String),
    /// The store failed to read.
    #[error("reading {key}: {reason}")]
    Read {
        /// The record, as `COLLECTION:key`.
        key: String,
        /// What went wrong.
        reason: String,
    },
    /// Stored bytes that do not decode.
    #[error("corrupt {0}")]
    Corrupt(String),
}

/// Reads persistent records for transactions. Implementations answer from a
/// consistent snapshot without waiting for writers (the `store` crate opens an LMDB
/// read transaction); they must be cheap to call from rule evaluation.
pub trait CollectionReader: Send + Sync + std::fmt::Debug {
    /// The record stored under `key`, as stored (expiry is the caller's business,
    /// see [`StoredRecord::live`]); `Ok(None)` when there is none.
    fn read(&self, key: &RecordKey) -> Result<Option<StoredRecord>, CollectionError>;
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

/// An in-memory store, for tests and embedding: reads under a mutex, writes applied
/// at once with [`apply`].
#[derive(Debug, Default)]
pub struct MemoryStore {
    records: Mutex<HashMap<RecordKey, StoredRecord>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies writes, as a store's writer would.
    pub fn apply_writes(&self, writes: impl IntoIterator<Item = (RecordKey, RecordWrite)>) {
        let mut guard = self.records.lock().unwrap_or_else(|e| e.into_inner());
        for (key, w) in writes {
            let old = guard.remove(&key);
            guard.insert(key, apply(old, &w));
        }
    }
}

impl CollectionReader for MemoryStore {
    fn read(&self, key: &RecordKey) -> Result<Option<StoredRecord>, CollectionError> {
        let guard = self.records.lock().unwrap_or_else(|e| e.into_inner());
        Ok(guard.get(key).cloned())
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
}
