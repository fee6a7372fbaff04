//! Helpers shared by the store's integration tests.

use engine::CollectionKind;
use engine::collections::{RecordKey, RecordWrite, VarOp, WriteLog};
use store::Store;

/// The IP record of `key` in the default application.
pub fn ip(key: &str) -> RecordKey {
    RecordKey::new("default", CollectionKind::Ip, key.as_bytes().to_vec()).unwrap()
}

/// `setvar:ip.hits=+1,expirevar:ip.hits=TTL` made at `at`, as a transaction hands it
/// over.
pub fn hit_at(at: i64, ttl: i64) -> RecordWrite {
    let mut log = WriteLog::default();
    log.push(b"hits", VarOp::Add(1));
    log.push(b"hits", VarOp::ExpireAt(at + ttl));
    log.finish(at, 3600)
}

/// A variable's value as stored, as text.
pub fn value(store: &Store, key: &RecordKey, name: &str) -> Option<String> {
    store.get(key).unwrap().and_then(|r| {
        r.vars
            .get(name.as_bytes())
            .map(|v| String::from_utf8_lossy(&v.value.as_read()).into_owned())
    })
}
