//! The stream entry format (docs/store-sync.md describes it for outside writers).
//!
//! Every entry has the fields `v` (format version, `1`), `host` (the writer's id),
//! `kind` and `data`:
//! - `kind` `state`: `data` is a list of record changes in the store's convergent
//!   form (a version byte, then postcard), published by palisade hosts. Merging one
//!   is idempotent by construction.
//! - `kind` `ops`: `data` is JSON lines, each
//!   `{"app":..,"collection":..,"key":..,"write":{RecordWrite}}` (the import format),
//!   for outside services. An optional `seq` field (a decimal number that grows with
//!   each entry of that host) makes a retried entry harmless: an entry whose `seq`
//!   (else whose stream id) is not above the last one applied for its host is
//!   skipped.

use crate::state::{self, RecState};
use crate::writer::Remote;
use engine::collections::{RecordKey, RecordWrite, bytes_from_text};
use std::collections::HashMap;

/// Format version written in `v`.
pub const VERSION: &str = "1";

/// A stream entry id, `milliseconds-sequence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct EntryId(pub u64, pub u64);

impl EntryId {
    /// Parses `ms-seq` (or a bare `ms`).
    pub fn parse(s: &str) -> Option<EntryId> {
        let (a, b) = s.split_once('-').unwrap_or((s, "0"));
        Some(EntryId(a.parse().ok()?, b.parse().ok()?))
    }
}

impl std::fmt::Display for EntryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.0, self.1)
    }
}

/// The fields of a `state` entry.
pub(crate) fn state_fields(
    host: &str,
    changes: &[(Vec<u8>, RecState)],
) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("v", VERSION.as_bytes().to_vec()),
        ("host", host.as_bytes().to_vec()),
        ("kind", b"state".to_vec()),
        ("data", state::encode_changes(changes)),
    ]
}

/// The fields of an `ops` entry (what an outside service writes; also used by
/// `palisade ctx` to publish without a local store, and by the tests).
pub fn ops_fields(
    host: &str,
    seq: Option<u64>,
    writes: &[(RecordKey, RecordWrite)],
) -> Vec<(&'static str, Vec<u8>)> {
    let mut data = Vec::new();
    for (k, w) in writes {
        let line = serde_json::json!({
            "app": k.app,
            "collection": k.collection.name(),
            "key": engine::collections::bytes_to_text(&k.key),
            "write": w,
        });
        data.extend(line.to_string().into_bytes());
        data.push(b'\n');
    }
    let mut f = vec![
        ("v", VERSION.as_bytes().to_vec()),
        ("host", host.as_bytes().to_vec()),
        ("kind", b"ops".to_vec()),
        ("data", data),
    ];
    if let Some(s) = seq {
        f.push(("seq", s.to_string().into_bytes()));
    }
    f
}

#[derive(serde::Deserialize)]
struct OpsLine {
    app: String,
    collection: String,
    key: String,
    write: RecordWrite,
}

/// Reads one entry into a change for the writer; an error says what is wrong.
pub(crate) fn parse(id: EntryId, fields: &HashMap<String, Vec<u8>>) -> Result<Remote, String> {
    let text = |name: &str| -> Result<&str, String> {
        let v = fields
            .get(name)
            .ok_or_else(|| format!("missing field {name:?}"))?;
        std::str::from_utf8(v).map_err(|_| format!("field {name:?} is not UTF-8"))
    };
    let v = text("v")?;
    if v != VERSION {
        return Err(format!("unknown format version {v:?}"));
    }
    let host = text("host")?;
    if host.is_empty() {
        return Err("empty host".into());
    }
    let data = fields.get("data").ok_or("missing field \"data\"")?;
    match text("kind")? {
        "state" => Ok(Remote::State {
            changes: state::decode_changes(data)?,
        }),
        "ops" => {
            let seq = match fields.get("seq") {
                Some(s) => {
                    let s = std::str::from_utf8(s)
                        .ok()
                        .and_then(|s| s.trim().parse::<u64>().ok())
                        .ok_or("field \"seq\" is not a number")?;
                    Some(s)
                }
                None => None,
            };
            let text = std::str::from_utf8(data).map_err(|_| "ops data is not UTF-8")?;
            let mut writes = Vec::new();
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let bad = |e: String| format!("ops line {}: {e}", i + 1);
                let l: OpsLine = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
                let key = bytes_from_text(&l.key).map_err(bad)?;
                let rk =
                    RecordKey::parse(&l.app, &l.collection, key).map_err(|e| bad(e.to_string()))?;
                writes.push((rk, l.write));
            }
            Ok(Remote::Ops {
                host: host.to_string(),
                id: (id.0, id.1),
                dedup: seq.map_or((id.0, id.1), |s| (s, 0)),
                writes,
            })
        }
        other => Err(format!("unknown kind {other:?}")),
    }
}
