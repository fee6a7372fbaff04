//! Palisade's store for persistent collections (IP, GLOBAL, SESSION, USER,
//! RESOURCE): an embedded LMDB environment (through `heed`), no server.
//!
//! - **Reads** (the request path) go through [`Store::reader`]: each read opens an
//!   LMDB read transaction, a snapshot of the last commit, which never waits for the
//!   writer. The reader holds a read-only view of the environment that has no way to
//!   open a write transaction (see `lmdb.rs`), and [`StoreStats`] counts the time
//!   spent in reads and the write transactions opened off the writer thread (0).
//! - **Writes** go to one writer thread through a bounded queue ([`Store::submit`]
//!   never blocks; a full queue is counted). The writer coalesces the writes of many
//!   transactions per record and commits them in batches every `batch_interval`
//!   (or sooner when a batch is big); between batches it sweeps records whose
//!   whole-record timeout passed. A full map (`MDB_MAP_FULL`) rolls the batch back
//!   whole and is reported as [`StoreError::MapFull`], counted and logged once.
//! - **Stored format**: a convergent state per record (`state.rs` explains it), so
//!   the fleet sync ([`sync`]) can merge the changes of several hosts, stored after
//!   the record as readers see it (the engine's [`StoredRecord`], rendered by the
//!   writer at commit): a read decodes only that part.
//! - **Outside access**: [`Store::get`], [`Store::list`], [`Store::import`],
//!   [`Store::export`] and [`Store::apply`] serve `palisade ctx` and the admin API;
//!   several processes may open the same store (LMDB locks across processes).

mod lmdb;
mod state;
mod stats;
pub mod sync;

mod writer;

pub use stats::StoreStats;

use engine::CollectionKind;
use engine::collections::{
    CollectionError, CollectionReader, NamedOp, RecordKey, RecordWrite, StoredRecord, VarOp,
    bytes_from_text, bytes_to_text,
};
use flume::TrySendError;
use lmdb::{ReadView, WriteGate};
use stats::Stats;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use writer::{ImportItem, Msg, Writer};

/// Where the store lives and how its writer behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Directory of the LMDB environment (created when missing).
    pub path: PathBuf,
    /// Size of the memory map in bytes: the most the store can hold. When it is
    /// full, batches fail with [`StoreError::MapFull`] until records expire.
    pub map_size: u64,
    /// How long the writer gathers writes before committing them.
    pub batch_interval: Duration,
    /// How often expired records are swept.
    pub sweep_interval: Duration,
    /// This host's id in the fleet sync (stamps and counter parts); must differ
    /// between hosts that sync.
    pub host_id: String,
}

impl StoreConfig {
    /// Default map size: 1 GiB (address space; the file grows as records are added).
    pub const DEFAULT_MAP_SIZE: u64 = 1 << 30;
    /// Default batch interval: 5 ms.
    pub const DEFAULT_BATCH_INTERVAL: Duration = Duration::from_millis(5);
    /// Default sweep interval: 60 s.
    pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

    /// The default directory: `$PALISADE_STORE` when set; else, for root,
    /// `/var/lib/palisade/store`; else `$XDG_STATE_HOME/palisade/store`, or
    /// `$HOME/.local/state/palisade/store`; else `./palisade-store`.
    pub fn default_path() -> PathBuf {
        if let Some(p) = std::env::var_os("PALISADE_STORE").filter(|p| !p.is_empty()) {
            return PathBuf::from(p);
        }
        if rustix::process::geteuid().is_root() {
            return PathBuf::from("/var/lib/palisade/store");
        }
        if let Some(p) = std::env::var_os("XDG_STATE_HOME").filter(|p| !p.is_empty()) {
            return Path::new(&p).join("palisade/store");
        }
        if let Some(h) = std::env::var_os("HOME").filter(|p| !p.is_empty()) {
            return Path::new(&h).join(".local/state/palisade/store");
        }
        PathBuf::from("palisade-store")
    }

    /// Checks the settings, and that the store's directory can be used (it exists
    /// and this process may write in it, or it can be created), without opening or
    /// creating anything: what [`Store::open`] refuses for its settings, for
    /// `palisade check`. (LMDB's own errors, a corrupt data file say, show only
    /// when it is opened.)
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.host_id.is_empty() || self.host_id.contains('@') {
            return Err(StoreError::Config(format!(
                "host id {:?} must be non-empty and without '@'",
                self.host_id
            )));
        }
        if self.batch_interval.is_zero() || self.sweep_interval.is_zero() {
            return Err(StoreError::Config(
                "batch and sweep intervals must be above zero".into(),
            ));
        }
        if self.map_size == 0 {
            return Err(StoreError::Config("map size must be above zero".into()));
        }
        let io = |e: std::io::Error| StoreError::from((self.path.clone(), e));
        // The directory itself, or the nearest directory above it that exists
        // (where it would be created), must be writable.
        let mut at = self.path.as_path();
        loop {
            match std::fs::metadata(at) {
                Ok(m) if m.is_dir() => break,
                Ok(_) => {
                    return Err(io(std::io::Error::new(
                        std::io::ErrorKind::NotADirectory,
                        format!("{} is not a directory", at.display()),
                    )));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    at = match at.parent() {
                        Some(p) if !p.as_os_str().is_empty() => p,
                        _ => Path::new("."),
                    };
                }
                Err(e) => return Err(io(e)),
            }
        }
        use rustix::fs::{Access, access};
        access(at, Access::WRITE_OK | Access::EXEC_OK).map_err(|e| {
            io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("{} is not writable: {e}", at.display()),
            ))
        })
    }

    /// The default host id: the machine's host name, else `palisade`.
    pub fn default_host_id() -> String {
        rustix::system::uname()
            .nodename()
            .to_str()
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or("palisade")
            .to_string()
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            path: Self::default_path(),
            map_size: Self::DEFAULT_MAP_SIZE,
            batch_interval: Self::DEFAULT_BATCH_INTERVAL,
            sweep_interval: Self::DEFAULT_SWEEP_INTERVAL,
            host_id: Self::default_host_id(),
        }
    }
}

/// Why a store operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The store's directory could not be created or read.
    #[error("store directory {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The LMDB map is full: the batch was rolled back whole. Raise `map_size` or
    /// let records expire.
    #[error("{context}: the store is full (LMDB map full); nothing of this batch was written")]
    MapFull {
        /// What was being done.
        context: &'static str,
    },
    /// Another LMDB error.
    #[error("{context}: {reason}")]
    Lmdb {
        /// What was being done.
        context: &'static str,
        /// LMDB's message.
        reason: String,
    },
    /// A stored record that does not decode.
    #[error("record {key:?} is corrupt: {reason}")]
    Corrupt {
        /// The record's key, as text.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A bad line in an import; nothing was imported.
    #[error("import line {line}: {reason}")]
    Import {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// Writing an export failed.
    #[error("export: {0}")]
    Export(String),
    /// The writer thread is gone (the store is closing).
    #[error("the store's writer has stopped")]
    WriterGone,
    /// A bad argument (collection name, key).
    #[error(transparent)]
    Collection(#[from] CollectionError),
    /// A bad store configuration.
    #[error("store configuration: {0}")]
    Config(String),
    /// The sync could not start or run.
    #[error("sync: {0}")]
    Sync(String),
}

impl StoreError {
    pub(crate) fn from_lmdb(context: &'static str, e: heed::Error) -> Self {
        match e {
            heed::Error::Mdb(heed::MdbError::MapFull) => StoreError::MapFull { context },
            heed::Error::Io(io) => StoreError::Lmdb {
                context,
                reason: io.to_string(),
            },
            other => StoreError::Lmdb {
                context,
                reason: other.to_string(),
            },
        }
    }
}

impl From<(PathBuf, std::io::Error)> for StoreError {
    fn from((path, e): (PathBuf, std::io::Error)) -> Self {
        StoreError::Io {
            path,
            source: Arc::new(e),
        }
    }
}

/// Capacity of the writer's queue, in messages (one per transaction that wrote). The
/// queue takes memory only for the messages in it (a bounded `flume` channel), not
/// for its capacity.
const QUEUE: usize = 65_536;

struct Inner {
    view: ReadView,
    stats: Arc<Stats>,
    tx: flume::Sender<Msg>,
    writer: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    cfg: StoreConfig,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Shutdown);
        if let Some(h) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
}

/// The store: cheap to clone (an `Arc` inside). The writer thread stops, after
/// committing what is queued, when the last clone is dropped.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.cfg.path)
            .field("host_id", &self.inner.cfg.host_id)
            .finish()
    }
}

/// Reads records for transactions: one LMDB read transaction per read.
#[derive(Debug, Clone)]
pub struct StoreReader {
    view: ReadView,
    stats: Arc<Stats>,
}

impl StoreReader {
    fn read_record(&self, key: &[u8]) -> Result<Option<StoredRecord>, StoreError> {
        let start = Instant::now();
        let res = (|| {
            let rtxn = self
                .view
                .read_txn()
                .map_err(|e| StoreError::from_lmdb("reading", e))?;
            match self
                .view
                .dbs()
                .records
                .get(&rtxn, key)
                .map_err(|e| StoreError::from_lmdb("reading", e))?
            {
                None => Ok(None),
                Some(b) => state::decode_read(b).map_err(|reason| StoreError::Corrupt {
                    key: String::from_utf8_lossy(key).into_owned(),
                    reason,
                }),
            }
        })();
        self.stats.reads.fetch_add(1, Relaxed);
        self.stats
            .read_nanos
            .fetch_add(start.elapsed().as_nanos() as u64, Relaxed);
        if res.is_err() {
            self.stats.read_errors.fetch_add(1, Relaxed);
        }
        res
    }
}

impl CollectionReader for StoreReader {
    fn read(&self, key: &RecordKey) -> Result<Option<StoredRecord>, CollectionError> {
        // Tracepoints `palisade:store_read_start()` and
        // `palisade:store_read_end(found)` (1 found, 0 not, -1 failed).
        probe::probe_lazy!(palisade, store_read_start);
        let r = self.read_record(&key.encode());
        probe::probe_lazy!(
            palisade,
            store_read_end,
            match &r {
                Ok(Some(_)) => 1isize,
                Ok(None) => 0,
                Err(_) => -1,
            }
        );
        match r {
            Ok(r) => Ok(r),
            Err(StoreError::Corrupt { key, reason }) => Err(CollectionError::Corrupt(format!(
                "record {key:?}: {reason}"
            ))),
            Err(e) => Err(CollectionError::Read {
                key: format!("{}:{}", key.collection.name(), bytes_to_text(&key.key)),
                reason: e.to_string(),
            }),
        }
    }
}

/// The current Unix time in seconds.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// One JSON line of import and export.
#[derive(serde::Serialize, serde::Deserialize)]
struct Line {
    app: String,
    collection: String,
    key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    record: Option<StoredRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    write: Option<RecordWrite>,
}

impl Store {
    /// Opens (creating it when missing) the store at `cfg.path` and starts its writer
    /// thread (which also sweeps).
    pub fn open(cfg: &StoreConfig) -> Result<Store, StoreError> {
        cfg.validate()?;
        let (view, gate): (ReadView, WriteGate) = lmdb::open(&cfg.path, cfg.map_size)?;
        let stats = Arc::new(Stats::default());
        let (tx, rx) = flume::bounded(QUEUE);
        let writer = Writer {
            gate,
            stats: stats.clone(),
            host: cfg.host_id.clone(),
            batch_interval: cfg.batch_interval,
            sweep_interval: cfg.sweep_interval,
            now: unix_now,
        };
        let handle = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| StoreError::from((cfg.path.clone(), e)))?;
        Ok(Store {
            inner: Arc::new(Inner {
                view,
                stats,
                tx,
                writer: std::sync::Mutex::new(Some(handle)),
                cfg: cfg.clone(),
            }),
        })
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.inner.cfg
    }

    /// A reader for transactions (`TxContext.store`): read transactions only.
    pub fn reader(&self) -> Arc<dyn CollectionReader> {
        Arc::new(self.store_reader())
    }

    /// The concrete reader.
    pub fn store_reader(&self) -> StoreReader {
        StoreReader {
            view: self.inner.view.clone(),
            stats: self.inner.stats.clone(),
        }
    }

    /// Hands the writes of a transaction to the writer. Never blocks: when the queue
    /// is full the writes are dropped and counted in `writes_dropped_queue_full`.
    pub fn submit(&self, writes: Vec<(RecordKey, RecordWrite)>) {
        if writes.is_empty() {
            return;
        }
        let n = writes.len() as u64;
        self.inner.stats.writes_submitted.fetch_add(n, Relaxed);
        match self.inner.tx.try_send(Msg::Writes(writes)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.inner
                    .stats
                    .writes_dropped_queue_full
                    .fetch_add(n, Relaxed);
            }
        }
    }

    fn ask<T>(
        &self,
        make: impl FnOnce(std::sync::mpsc::Sender<Result<T, StoreError>>) -> Msg,
    ) -> Result<T, StoreError> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.inner
            .tx
            .send(make(tx))
            .map_err(|_| StoreError::WriterGone)?;
        rx.recv().map_err(|_| StoreError::WriterGone)?
    }

    /// Waits until everything submitted before is committed (or failed: the error
    /// of the batch it was in).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.ask(Msg::Flush)
    }

    /// Applies writes through the writer and waits for their commit (for `ctx` and
    /// the admin API; the request path uses [`Store::submit`]). All or nothing.
    pub fn apply(&self, writes: Vec<(RecordKey, RecordWrite)>) -> Result<(), StoreError> {
        let items: Vec<ImportItem> = writes
            .into_iter()
            .map(|(k, w)| ImportItem::Write(k, w))
            .collect();
        self.ask(|tx| Msg::Import(items, tx)).map(|_| ())
    }

    /// Sets one variable (`ttl`: seconds until it expires) and waits for the commit.
    /// The record keeps its TIMEOUT if it has one, else gets `record_timeout`.
    pub fn set(
        &self,
        key: &RecordKey,
        name: &[u8],
        value: &[u8],
        ttl: Option<i64>,
        record_timeout: i64,
    ) -> Result<(), StoreError> {
        let now = unix_now();
        let timeout = self.get(key)?.map(|r| r.timeout).unwrap_or(record_timeout);
        // A variable set with a TTL lives that long: the record's own timeout is
        // raised to cover it, or the record would expire (and take the variable
        // with it) first.
        let timeout = ttl.map_or(timeout, |ttl| timeout.max(ttl));
        let name = name.to_ascii_lowercase();
        let mut ops = vec![NamedOp {
            name: name.clone(),
            op: VarOp::Set(value.to_vec()),
        }];
        if let Some(ttl) = ttl {
            ops.push(NamedOp {
                name,
                op: VarOp::ExpireAt(now.saturating_add(ttl)),
            });
        }
        self.apply(vec![(
            key.clone(),
            RecordWrite {
                at: now,
                timeout,
                ops,
            },
        )])
    }

    /// Deletes one variable, or with `name` `None` the whole record (every variable,
    /// and the record expires at once; the sweeper removes it). Waits for the
    /// commit; `false` when there was nothing to delete.
    pub fn del(&self, key: &RecordKey, name: Option<&[u8]>) -> Result<bool, StoreError> {
        let Some(rec) = self.get(key)? else {
            return Ok(false);
        };
        let now = unix_now();
        let (ops, timeout) = match name {
            Some(n) => {
                let n = n.to_ascii_lowercase();
                if !rec.vars.contains_key(&n) {
                    return Ok(false);
                }
                (
                    vec![NamedOp {
                        name: n,
                        op: VarOp::Delete,
                    }],
                    rec.timeout,
                )
            }
            None => (
                rec.vars
                    .keys()
                    .map(|n| NamedOp {
                        name: n.clone(),
                        op: VarOp::Delete,
                    })
                    .collect(),
                0,
            ),
        };
        self.apply(vec![(
            key.clone(),
            RecordWrite {
                at: now,
                timeout,
                ops,
            },
        )])?;
        Ok(true)
    }

    /// The record under `key` as a transaction would see it now (expired record or
    /// variables left out).
    pub fn get(&self, key: &RecordKey) -> Result<Option<StoredRecord>, StoreError> {
        let now = unix_now();
        Ok(self
            .store_reader()
            .read_record(&key.encode())?
            .and_then(|r| r.live(now)))
    }

    /// Up to `limit` live records of `app` (one collection, or all), in key order.
    pub fn list(
        &self,
        app: &str,
        collection: Option<CollectionKind>,
        limit: usize,
    ) -> Result<Vec<(RecordKey, StoredRecord)>, StoreError> {
        let mut out = Vec::new();
        self.scan(Some(app), collection, |k, r| {
            out.push((k, r));
            out.len() < limit
        })?;
        Ok(out)
    }

    /// Calls `f` on every live record (of one app, one collection) until it returns
    /// false. One read transaction.
    fn scan(
        &self,
        app: Option<&str>,
        collection: Option<CollectionKind>,
        mut f: impl FnMut(RecordKey, StoredRecord) -> bool,
    ) -> Result<(), StoreError> {
        let now = unix_now();
        let view = &self.inner.view;
        let err = |e| StoreError::from_lmdb("listing", e);
        let rtxn = view.read_txn().map_err(err)?;
        let prefix = match (app, collection) {
            (Some(a), Some(c)) => RecordKey::prefix(a, c),
            (Some(a), None) => [a.as_bytes(), b"\0"].concat(),
            (None, _) => Vec::new(),
        };
        let records = &view.dbs().records;
        type Items<'t> = Box<dyn Iterator<Item = heed::Result<(&'t [u8], &'t [u8])>> + 't>;
        let iter: Items<'_> = if prefix.is_empty() {
            Box::new(records.iter(&rtxn).map_err(err)?)
        } else {
            Box::new(records.prefix_iter(&rtxn, &prefix).map_err(err)?)
        };
        for item in iter {
            let (k, v) = item.map_err(err)?;
            let rk = RecordKey::decode(k)?;
            if collection.is_some_and(|c| c != rk.collection) {
                continue;
            }
            let rec = state::decode_read(v).map_err(|reason| StoreError::Corrupt {
                key: String::from_utf8_lossy(k).into_owned(),
                reason,
            })?;
            if let Some(r) = rec.and_then(|r| r.live(now))
                && !f(rk, r)
            {
                break;
            }
        }
        Ok(())
    }

    /// Imports JSON lines (`{"app","collection","key","record"}` replaces a record,
    /// `{"app","collection","key","write"}` applies a write). Every line is checked
    /// before anything is written, then all are committed in one transaction: on any
    /// error nothing is imported, and a bad line is named by its number. Returns the
    /// number of lines applied.
    pub fn import(&self, input: impl BufRead) -> Result<usize, StoreError> {
        let mut items = Vec::new();
        for (i, line) in input.lines().enumerate() {
            let n = i + 1;
            let line = line.map_err(|e| StoreError::Import {
                line: n,
                reason: e.to_string(),
            })?;
            if line.trim().is_empty() {
                continue;
            }
            let bad = |reason: String| StoreError::Import { line: n, reason };
            let l: Line = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
            let key = bytes_from_text(&l.key).map_err(bad)?;
            let rk =
                RecordKey::parse(&l.app, &l.collection, key).map_err(|e| bad(e.to_string()))?;
            items.push(match (l.record, l.write) {
                (Some(r), None) => ImportItem::Record(rk, r),
                (None, Some(w)) => ImportItem::Write(rk, w),
                _ => return Err(bad("expected exactly one of \"record\" or \"write\"".into())),
            });
        }
        if items.is_empty() {
            return Ok(0);
        }
        self.ask(|tx| Msg::Import(items, tx))
    }

    /// Writes live records as JSON lines (all, one app, or one app's collection);
    /// returns how many.
    pub fn export(
        &self,
        mut out: impl Write,
        app: Option<&str>,
        collection: Option<CollectionKind>,
    ) -> Result<usize, StoreError> {
        let mut n = 0;
        let mut failed = None;
        self.scan(app, collection, |k, r| {
            let line = Line {
                app: k.app.clone(),
                collection: k.collection.name().to_string(),
                key: bytes_to_text(&k.key),
                record: Some(r),
                write: None,
            };
            let res = serde_json::to_writer(&mut out, &line)
                .map_err(|e| e.to_string())
                .and_then(|_| out.write_all(b"\n").map_err(|e| e.to_string()));
            match res {
                Ok(()) => {
                    n += 1;
                    true
                }
                Err(e) => {
                    failed = Some(e);
                    false
                }
            }
        })?;
        if let Some(e) = failed {
            return Err(StoreError::Export(e));
        }
        out.flush().map_err(|e| StoreError::Export(e.to_string()))?;
        Ok(n)
    }

    /// The counters.
    pub fn stats(&self) -> StoreStats {
        self.inner.stats.snapshot()
    }

    /// Bytes of the memory map, and of it in use.
    pub fn map_usage(&self) -> (u64, u64) {
        self.inner.view.map_usage()
    }

    /// Turns publishing to the sync stream on or off: while on, every committed
    /// batch (of any process writing to this store) leaves its changes in an outbox
    /// that [`sync::Sync`] publishes. Turning it off drops the outbox. The proxy turns
    /// it off when its configuration has no `[sync]`.
    pub fn set_publishing(&self, on: bool) -> Result<(), StoreError> {
        self.ask(|tx| Msg::SetPublishing(on, tx))
    }

    pub(crate) fn send(&self, msg: Msg) -> Result<(), StoreError> {
        self.inner.tx.send(msg).map_err(|_| StoreError::WriterGone)
    }

    pub(crate) fn view(&self) -> &ReadView {
        &self.inner.view
    }
}
