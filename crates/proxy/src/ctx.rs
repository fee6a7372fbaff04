//! Context from outside: the operations `palisade ctx` and the admin API's `/ctx`
//! endpoints share, on the store the proxy uses (LMDB lets several processes open
//! it at once; writes from here go through this process's own writer).
//!
//! Records travel as JSON lines, one per record, in the format `export` writes and
//! `import` reads:
//! `{"app":"default","collection":"IP","key":"192.0.2.1","record":{...}}`.

use engine::actions::CollectionKind;
use engine::collections::{
    BUILT_IN_FIELDS, CollectionError, MAX_KEY_BYTES, RecordKey, StoredRecord, bytes_to_text,
};
use std::io::Write;
use store::{Store, StoreError};

/// The record TIMEOUT a record made from outside gets (ModSecurity's default
/// `SecCollectionTimeout`), unless it already has one.
pub const DEFAULT_RECORD_TIMEOUT: i64 = 3600;

/// Why a context operation failed; the message names the collection, key, variable
/// or input line at fault.
#[derive(Debug, thiserror::Error)]
pub enum CtxError {
    /// A bad collection name, application id or key.
    #[error(transparent)]
    Collection(#[from] CollectionError),
    /// The store refused (a corrupt import line, a full map, an I/O error).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A variable name that cannot be written from outside.
    #[error("variable {0:?}: {1}")]
    Variable(String, &'static str),
    /// Writing the output failed.
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
}

/// The key of a record from the names a person types: an unknown collection is an
/// error naming it and the ones that exist.
pub fn record_key(app: &str, collection: &str, key: &[u8]) -> Result<RecordKey, CtxError> {
    Ok(RecordKey::parse(app, collection, key.to_vec())?)
}

/// A note for a key too long to be kept as is (see [`RecordKey::encode`]): it is
/// stored, and found again, under its SHA-256 digest.
pub fn long_key_note(key: &RecordKey) -> Option<String> {
    let encoded = key.encode();
    let head = key.app.len() + key.collection.name().len() + 2;
    (head + key.key.len() > MAX_KEY_BYTES).then(|| {
        format!(
            "the key is {} bytes, more than the store keeps ({} with the application and collection names): it is stored under {}",
            key.key.len(),
            MAX_KEY_BYTES,
            String::from_utf8_lossy(&encoded[head..])
        )
    })
}

#[derive(serde::Serialize)]
struct Line<'a> {
    app: &'a str,
    collection: &'static str,
    key: String,
    record: &'a StoredRecord,
}

/// One record as a JSON line (without the line end), in the export format.
pub fn record_line(key: &RecordKey, record: &StoredRecord) -> String {
    serde_json::to_string(&Line {
        app: &key.app,
        collection: key.collection.name(),
        key: bytes_to_text(&key.key),
        record,
    })
    .unwrap_or_else(|e| format!("{{\"error\":\"cannot encode the record: {e}\"}}"))
}

/// The record under `key`, as stored, with expired variables left out; `None` when
/// there is none (or it has expired).
pub fn get(store: &Store, key: &RecordKey) -> Result<Option<StoredRecord>, CtxError> {
    Ok(store.get(key)?)
}

/// A variable name as the engine keeps it (lower case); the built-in fields are
/// refused (they are computed, not stored).
fn var_name(var: &str) -> Result<Vec<u8>, CtxError> {
    let lower = var.to_ascii_lowercase();
    if lower.is_empty() {
        return Err(CtxError::Variable(var.into(), "the name is empty"));
    }
    if BUILT_IN_FIELDS.contains(&lower.as_str()) {
        return Err(CtxError::Variable(
            var.into(),
            "is a built-in field of every record, not a variable",
        ));
    }
    Ok(lower.into_bytes())
}

/// Sets `var` of the record under `key` (made if needed, with the TIMEOUT of
/// [`DEFAULT_RECORD_TIMEOUT`]; an existing record keeps its own), expiring `ttl`
/// seconds from now when given, and waits until it is committed.
pub fn set(
    store: &Store,
    key: &RecordKey,
    var: &str,
    value: &[u8],
    ttl: Option<u64>,
) -> Result<(), CtxError> {
    let name = var_name(var)?;
    let ttl = ttl.map(|t| i64::try_from(t).unwrap_or(i64::MAX));
    store.set(key, &name, value, ttl, DEFAULT_RECORD_TIMEOUT)?;
    Ok(())
}

/// Deletes `var` of the record under `key` (the whole record when `None`) and waits
/// until it is committed; false when there was nothing to delete.
pub fn delete(store: &Store, key: &RecordKey, var: Option<&str>) -> Result<bool, CtxError> {
    let name = var.map(var_name).transpose()?;
    Ok(store.del(key, name.as_deref())?)
}

/// Writes up to `limit` records of `app` (of one collection, or all) as JSON lines;
/// returns how many.
pub fn list(
    store: &Store,
    app: &str,
    collection: Option<CollectionKind>,
    limit: usize,
    out: &mut impl Write,
) -> Result<usize, CtxError> {
    let records = store.list(app, collection, limit)?;
    for (k, r) in &records {
        writeln!(out, "{}", record_line(k, r))?;
    }
    Ok(records.len())
}

/// A collection name for `list` and `export`: an error names an unknown one.
pub fn collection(name: &str) -> Result<CollectionKind, CtxError> {
    match CollectionKind::from_name(name) {
        Some(CollectionKind::Tx) => Err(CollectionError::NotPersistent("TX".into()).into()),
        Some(k) => Ok(k),
        None => Err(CollectionError::UnknownCollection(name.into()).into()),
    }
}

/// `palisade ctx`: where the store is, and what to do with it.
#[derive(Debug, clap::Args)]
pub struct CtxArgs {
    /// The proxy's configuration file: its `[store]` names the store (the default
    /// path when it has none).
    #[arg(
        short,
        long,
        value_name = "FILE",
        global = true,
        conflicts_with = "store"
    )]
    pub config: Option<std::path::PathBuf>,
    /// The store's directory, instead of a configuration file.
    #[arg(long, value_name = "PATH", global = true)]
    pub store: Option<std::path::PathBuf>,
    /// The application namespace (`SecWebAppId`).
    #[arg(long, default_value = engine::collections::DEFAULT_APP, global = true)]
    pub app: String,
    /// What to do.
    #[command(subcommand)]
    pub command: CtxCommand,
}

/// The `palisade ctx` operations.
#[derive(Debug, clap::Subcommand)]
pub enum CtxCommand {
    /// Print a record as a JSON line (exit 1 when there is none).
    Get {
        /// IP, GLOBAL, SESSION, USER or RESOURCE.
        collection: String,
        /// The record's key (what `initcol`, `setsid` or `setuid` gave).
        key: String,
    },
    /// Set a variable of a record (made if needed), and wait until it is committed.
    Set {
        /// IP, GLOBAL, SESSION, USER or RESOURCE.
        collection: String,
        /// The record's key.
        key: String,
        /// The variable's name (kept in lower case).
        variable: String,
        /// The value.
        value: String,
        /// Seconds until the variable expires (like `expirevar`).
        #[arg(long, value_name = "SECONDS")]
        ttl: Option<u64>,
    },
    /// Delete a variable, or the whole record when no variable is named.
    Del {
        /// IP, GLOBAL, SESSION, USER or RESOURCE.
        collection: String,
        /// The record's key.
        key: String,
        /// The variable to delete; absent: the record.
        variable: Option<String>,
    },
    /// Print records as JSON lines.
    List {
        /// Only this collection.
        collection: Option<String>,
        /// At most this many records.
        #[arg(long, default_value_t = 1000)]
        limit: usize,
    },
    /// Read records (or writes) as JSON lines from FILE or standard input; a bad
    /// line imports nothing and is named.
    Import {
        /// The file; `-` or absent: standard input.
        file: Option<std::path::PathBuf>,
    },
    /// Write every record (of `--app`, or of all applications with `--all-apps`)
    /// as JSON lines.
    Export {
        /// Only this collection.
        #[arg(long)]
        collection: Option<String>,
        /// Every application, not only `--app`.
        #[arg(long)]
        all_apps: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_fields_and_empty_names_are_refused() {
        let e = var_name("UPDATE_COUNTER").unwrap_err().to_string();
        assert!(
            e.contains("UPDATE_COUNTER") && e.contains("built-in"),
            "{e}"
        );
        assert!(var_name("").is_err());
        assert_eq!(var_name("Score").unwrap(), b"score");
    }

    #[test]
    fn unknown_collections_and_long_keys() {
        let e = record_key("default", "IPS", b"x").unwrap_err().to_string();
        assert!(e.contains("IPS"), "{e}");
        assert!(collection("tx").is_err());
        let k = record_key("default", "session", &[b'k'; 600]).unwrap();
        let note = long_key_note(&k).unwrap();
        assert!(
            note.contains("600 bytes") && note.contains("#sha256:"),
            "{note}"
        );
        assert!(long_key_note(&record_key("default", "ip", b"1.2.3.4").unwrap()).is_none());
        let line = record_line(
            &record_key("shop", "ip", b"192.0.2.1").unwrap(),
            &StoredRecord::default(),
        );
        assert!(
            line.starts_with("{\"app\":\"shop\",\"collection\":\"IP\",\"key\":\"192.0.2.1\""),
            "{line}"
        );
    }
}
