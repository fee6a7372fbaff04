//! Context from outside: the operations `palisade ctx` and the admin API's `/ctx`
//! endpoints share, on the store the proxy uses (LMDB lets several processes open
//! it at once; writes from here go through this process's own writer).
//!
//! Records travel as JSON lines, one per record, in the format `export` writes and
//! `import` reads:
//! `{"app":"default","collection":"IP","key":"192.0.2.1","record":{...}}`.

use engine::CollectionKind;
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
        value_hint = clap::ValueHint::FilePath,
        global = true,
        conflicts_with = "store"
    )]
    pub config: Option<std::path::PathBuf>,
    /// The store's directory, instead of a configuration file.
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::DirPath, global = true)]
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
    /// Print a record as a JSON line (exit 3 when there is none).
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
    /// Delete a variable, or the whole record when no variable is named (exit 3
    /// when there is nothing to delete).
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
        #[arg(value_hint = clap::ValueHint::FilePath)]
        file: Option<std::path::PathBuf>,
        /// Keep reading until the end of the input (a pipe from a scoring service, a
        /// FIFO), committing each batch as it comes: every `--batch-lines` lines, or
        /// `--batch-ms` after the first line of a batch, whichever is first. Each
        /// batch is all or nothing; a bad line stops the feed and is named, and the
        /// batches before it stay committed.
        #[arg(long)]
        follow: bool,
        /// With `--follow`: the most lines in one commit.
        #[arg(long, default_value_t = 1000, requires = "follow", value_parser = clap::value_parser!(u64).range(1..))]
        batch_lines: u64,
        /// With `--follow`: the longest a line waits for its commit, in milliseconds.
        #[arg(long, default_value_t = 100, requires = "follow", value_parser = clap::value_parser!(u64).range(1..=60_000))]
        batch_ms: u64,
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

/// What a followed import did: lines committed and commits made.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FollowTotals {
    /// Lines applied (blank lines are not counted).
    pub lines: usize,
    /// Batches committed.
    pub batches: usize,
}

/// `ctx import --follow`: reads JSON lines from `input` until its end and imports
/// them in batches of at most `batch_lines` lines, each committed at the latest
/// `batch_wait` after its first line arrived, so that a slow feed is not held back
/// and a fast one is committed in few transactions. A bad line stops the feed with
/// its number in the whole input; the batches before it are committed, the lines of
/// its own batch are not.
pub fn import_follow(
    store: &Store,
    input: impl std::io::BufRead + Send + 'static,
    batch_lines: usize,
    batch_wait: std::time::Duration,
) -> Result<FollowTotals, CtxError> {
    use std::sync::mpsc::{RecvTimeoutError, sync_channel};
    let batch_lines = batch_lines.max(1);
    // A reader thread, so that a batch can be committed while the input is quiet.
    let (tx, rx) = sync_channel::<std::io::Result<String>>(batch_lines.min(65_536));
    std::thread::Builder::new()
        .name("ctx-import-read".into())
        .spawn(move || {
            for line in input.lines() {
                let failed = line.is_err();
                if tx.send(line).is_err() || failed {
                    break;
                }
            }
        })
        .map_err(CtxError::Output)?;
    let mut batch = Batch::default();
    let mut deadline: Option<std::time::Instant> = None;
    loop {
        let next = match deadline {
            Some(d) => rx.recv_timeout(d.saturating_duration_since(std::time::Instant::now())),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(Ok(line)) => {
                batch.text.push_str(&line);
                batch.text.push('\n');
                batch.lines += 1;
                deadline.get_or_insert_with(|| std::time::Instant::now() + batch_wait);
                if batch.lines >= batch_lines {
                    batch.commit(store)?;
                    deadline = None;
                }
            }
            Ok(Err(e)) => {
                batch.commit(store)?;
                return Err(StoreError::Import {
                    line: batch.before + 1,
                    reason: e.to_string(),
                }
                .into());
            }
            Err(RecvTimeoutError::Timeout) => {
                batch.commit(store)?;
                deadline = None;
            }
            Err(RecvTimeoutError::Disconnected) => {
                batch.commit(store)?;
                return Ok(batch.totals);
            }
        }
    }
}

/// The pending lines of a followed import, and what is committed before them.
#[derive(Default)]
struct Batch {
    /// The pending lines, each ended by a newline.
    text: String,
    /// How many lines `text` holds (blank ones included, as import numbers them).
    lines: usize,
    /// Lines of the input before the pending ones.
    before: usize,
    totals: FollowTotals,
}

impl Batch {
    /// Imports the pending lines in one transaction; a bad line's number is made a
    /// number in the whole input.
    fn commit(&mut self, store: &Store) -> Result<(), CtxError> {
        if self.lines == 0 {
            return Ok(());
        }
        let before = self.before;
        let n = store.import(self.text.as_bytes()).map_err(|e| match e {
            StoreError::Import { line, reason } => StoreError::Import {
                line: before + line,
                reason,
            },
            other => other,
        })?;
        self.totals.lines += n;
        self.totals.batches += 1;
        self.before += self.lines;
        self.lines = 0;
        self.text.clear();
        Ok(())
    }
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

    fn write_line(key: &str, score: u32) -> String {
        format!(
            "{{\"app\":\"default\",\"collection\":\"IP\",\"key\":\"{key}\",\"write\":{{\"at\":{},\"timeout\":3600,\"ops\":[{{\"name\":\"score\",\"op\":{{\"set\":\"{score}\"}}}}]}}}}\n",
            store::unix_now()
        )
    }

    fn score(store: &Store, key: &str) -> Option<Vec<u8>> {
        let k = record_key("default", "ip", key.as_bytes()).unwrap();
        get(store, &k).unwrap().and_then(|r| {
            r.vars
                .get(b"score".as_slice())
                .map(|v| v.value.as_read().into_owned())
        })
    }

    #[test]
    fn a_followed_import_commits_by_count_by_time_and_stops_at_a_bad_line() {
        let dir = std::env::temp_dir().join(format!("palisade-follow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(&store::StoreConfig {
            path: dir.clone(),
            ..store::StoreConfig::default()
        })
        .unwrap();

        // By count: 7 lines in batches of 3 are 3 commits.
        let input: String = (0..7)
            .map(|i| write_line(&format!("10.0.0.{i}"), i))
            .collect();
        let t = import_follow(
            &store,
            std::io::Cursor::new(input.into_bytes()),
            3,
            std::time::Duration::from_secs(60),
        )
        .unwrap();
        assert_eq!(
            t,
            FollowTotals {
                lines: 7,
                batches: 3
            }
        );
        assert_eq!(score(&store, "10.0.0.6").as_deref(), Some(b"6".as_slice()));

        // By time: a line that is not followed by more is committed while the input
        // stays open.
        let (feed, mut tx) = std::io::pipe().unwrap();
        let s2 = store.clone();
        let worker = std::thread::spawn(move || {
            import_follow(
                &s2,
                std::io::BufReader::new(feed),
                1000,
                std::time::Duration::from_millis(20),
            )
        });
        std::io::Write::write_all(&mut tx, write_line("192.0.2.9", 42).as_bytes()).unwrap();
        let start = std::time::Instant::now();
        while score(&store, "192.0.2.9").is_none() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "the pending line was never committed"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        drop(tx);
        assert_eq!(
            worker.join().unwrap().unwrap(),
            FollowTotals {
                lines: 1,
                batches: 1
            }
        );

        // A bad line: named by its number in the whole input; the batch before it is
        // committed, its own batch is not.
        let mut input: String = (0..4)
            .map(|i| write_line(&format!("10.1.0.{i}"), i))
            .collect();
        input.push_str("{\"app\":\"default\",\"collection\":\"IPS\",\"key\":\"x\"}\n");
        input.push_str(&write_line("10.1.0.9", 9));
        let e = import_follow(
            &store,
            std::io::Cursor::new(input.into_bytes()),
            2,
            std::time::Duration::from_secs(60),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 5") && e.contains("IPS"), "{e}");
        assert!(score(&store, "10.1.0.3").is_some());
        assert!(score(&store, "10.1.0.9").is_none());
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
