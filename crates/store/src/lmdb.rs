//! The LMDB environment and the two ways into it: [`ReadView`] (read transactions
//! only; what the request path holds) and [`WriteGate`] (write transactions; owned
//! by the writer thread alone). The environment itself stays private to this module,
//! so no code outside it can open a write transaction except through the one
//! [`WriteGate`] the store creates and moves into its writer thread.

use crate::StoreError;
use crate::stats::Stats;
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvOpenOptions, RoTxn, RwTxn, WithoutTls};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::thread::ThreadId;

/// The environment's databases.
pub(crate) struct Dbs {
    /// Records: `RecordKey::encode()` → `state::encode(RecState)`.
    pub records: Database<'static, Bytes, Bytes>,
    /// Small values: the stamp clock, the sync position, flags.
    pub meta: Database<'static, Bytes, Bytes>,
    /// Changes waiting to be published to the sync stream: big-endian `u64` → entry.
    pub outbox: Database<'static, Bytes, Bytes>,
}

struct Lmdb {
    env: Env<WithoutTls>,
    dbs: Dbs,
}

/// Environments open in this process, by canonical path.
static OPENED: Mutex<BTreeMap<PathBuf, Weak<Lmdb>>> = Mutex::new(BTreeMap::new());

/// Readers that may be open at once (threads of this process and of others, such
/// as `palisade ctx`); each read transaction holds a slot only while it lasts.
pub const MAX_READERS: u32 = 4096;

/// Opens (creating it when missing) the environment at `path`.
pub(crate) fn open(path: &Path, map_size: u64) -> Result<(ReadView, WriteGate), StoreError> {
    std::fs::create_dir_all(path).map_err(|e| StoreError::from((path.to_path_buf(), e)))?;
    let canonical = path
        .canonicalize()
        .map_err(|e| StoreError::from((path.to_path_buf(), e)))?;
    // heed opens a path once per process: a second store on the same directory in
    // this process shares the environment (each store still has its own writer
    // thread; LMDB's write lock orders them, as it does for other processes).
    let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
    opened.retain(|_, w| w.strong_count() > 0);
    if let Some(inner) = opened.get(&canonical).and_then(Weak::upgrade) {
        return Ok((
            ReadView(inner.clone()),
            WriteGate {
                lmdb: inner,
                owner: None,
            },
        ));
    }
    let lmdb = |e: heed::Error| StoreError::from_lmdb("opening the store", e);
    let map_size = usize::try_from(map_size).unwrap_or(usize::MAX);
    let mut opts = EnvOpenOptions::new().read_txn_without_tls();
    opts.map_size(map_size).max_readers(MAX_READERS).max_dbs(4);
    // SAFETY: LMDB maps the data file; the mapping stays valid because only LMDB
    // writes the file (through its own locks, in this and other processes), the
    // environment is opened with default (synchronous, locked) flags, and nothing in
    // this program modifies or truncates the file outside LMDB. heed allows opening
    // the same path twice in one process (it hands back the same environment).
    #[allow(unsafe_code)]
    let env = unsafe { opts.open(path) }.map_err(lmdb)?;
    let wtxn = env.write_txn().map_err(lmdb)?;
    let (records, meta, outbox) = env
        .create_databases_and_commit(wtxn, |dbo, wtxn| -> Result<_, heed::Error> {
            let records = dbo.create_database::<Bytes, Bytes>(wtxn, Some("records"))?;
            let meta = dbo.create_database::<Bytes, Bytes>(wtxn, Some("meta"))?;
            let outbox = dbo.create_database::<Bytes, Bytes>(wtxn, Some("outbox"))?;
            Ok(CommitOrAbort::<_, ()>::Commit((records, meta, outbox)))
        })
        .map_err(lmdb)?
        .unwrap_commit();
    let inner = Arc::new(Lmdb {
        env,
        dbs: Dbs {
            records,
            meta,
            outbox,
        },
    });
    opened.insert(canonical, Arc::downgrade(&inner));
    Ok((
        ReadView(inner.clone()),
        WriteGate {
            lmdb: inner,
            owner: None,
        },
    ))
}

/// Read-only access: read transactions, which in LMDB never wait for a writer (they
/// see the last committed snapshot). It has no way to open a write transaction.
#[derive(Clone)]
pub(crate) struct ReadView(Arc<Lmdb>);

impl ReadView {
    /// A read transaction (a snapshot of the last commit).
    pub fn read_txn(&self) -> Result<RoTxn<'_, WithoutTls>, heed::Error> {
        self.0.env.read_txn()
    }

    /// The databases.
    pub fn dbs(&self) -> &Dbs {
        &self.0.dbs
    }

    /// Bytes of the memory map and of it in use, for the stats.
    pub fn map_usage(&self) -> (u64, u64) {
        let info = self.0.env.info();
        let page = u64::from(self.0.env.unnamed_database_stat().page_size);
        (
            info.map_size as u64,
            (info.last_page_number as u64 + 1) * page,
        )
    }
}

impl std::fmt::Debug for ReadView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReadView({})", self.0.env.path().display())
    }
}

/// Write access. One exists per [`crate::Store`]; it is moved into the writer thread,
/// which is its owner. A write transaction opened from any other thread is counted
/// in `write_lock_waits_on_request_path` (and cannot happen: no other thread holds
/// the gate).
pub(crate) struct WriteGate {
    lmdb: Arc<Lmdb>,
    owner: Option<ThreadId>,
}

impl WriteGate {
    /// Marks the calling thread as the owner (the writer thread, once it starts).
    pub fn adopt(&mut self) {
        self.owner = Some(std::thread::current().id());
    }

    /// A write transaction (takes LMDB's write lock).
    pub fn write_txn(&self, stats: &Stats) -> Result<RwTxn<'_>, heed::Error> {
        if self.owner != Some(std::thread::current().id()) {
            stats
                .write_lock_waits_on_request_path
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.lmdb.env.write_txn()
    }

    /// The databases.
    pub fn dbs(&self) -> &Dbs {
        &self.lmdb.dbs
    }
}
