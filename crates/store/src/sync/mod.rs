//! Fleet sync through one Redis stream, off the request path.
//!
//! - **Publishing.** While sync is on, every batch the writer commits also leaves
//!   its changes (the touched parts of the records' convergent state, see
//!   `state.rs`) in an LMDB outbox, in the same transaction. A publisher thread
//!   appends outbox entries to the stream (`XADD … MAXLEN ~ retention`), merging
//!   a backlog into fewer entries, and removes them from the outbox once Redis
//!   acknowledged them. While Redis is down the outbox keeps them (a restart loses
//!   nothing) and they are published when it is back.
//! - **Applying.** A reader thread tails the stream (`XREAD BLOCK`) and hands what
//!   it reads to the writer thread, which merges it and stores the stream position
//!   in the same transaction. Merging a state change twice changes nothing;
//!   outside `ops` entries are applied once per host (`entry.rs`). A host reads its
//!   own entries back too: that tells it which of its increments the others know.
//! - **Starting.** A host that has a position resumes from it. A new host (no
//!   position) loads the fleet's snapshot, a Redis hash `<stream>:snapshot` that
//!   every host rewrites every `snapshot_interval` (its records as the stream knows
//!   them, with the stream position they include), then tails from that position;
//!   with no snapshot yet it reads the whole retained stream. A host whose position
//!   fell out of the retained stream (it was away longer than the retention) merges
//!   the snapshot too, and counts a gap.
//!
//! Redis is never on the request path: the proxy keeps serving from the local store
//! whatever Redis does.

pub mod entry;

use crate::lmdb::ReadView;
use crate::state::{self, RecState};
use crate::writer::{Applied, META_APPLIED_PREFIX, META_STREAM_POS, Msg, Remote, decode_id};
use crate::{Store, StoreError};
use entry::EntryId;
use redis::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Record changes by encoded key.
type Changes = Vec<(Vec<u8>, RecState)>;

/// The `[sync]` configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncConfig {
    /// `redis://[user:password@]host:port[/db]`.
    pub redis: String,
    /// The stream's key (the snapshot is `<stream>:snapshot`).
    pub stream: String,
    /// Entries the stream keeps (`XADD MAXLEN ~`); a host away for longer than the
    /// stream takes to grow by this many entries restarts from the snapshot.
    pub retention: u64,
    /// How often this host rewrites the fleet snapshot.
    pub snapshot_interval: Duration,
    /// Longest wait of one `XREAD BLOCK`; also bounds how long `stop` takes.
    pub block: Duration,
    /// Wait before reconnecting after a Redis error.
    pub retry: Duration,
}

impl SyncConfig {
    /// Default stream key.
    pub const DEFAULT_STREAM: &'static str = "palisade:collections";
    /// Default retention: 1,000,000 entries.
    pub const DEFAULT_RETENTION: u64 = 1_000_000;
    /// Default snapshot interval: 5 minutes.
    pub const DEFAULT_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(300);

    /// A configuration for `redis` with the defaults.
    pub fn new(redis: impl Into<String>) -> Self {
        SyncConfig {
            redis: redis.into(),
            stream: Self::DEFAULT_STREAM.into(),
            retention: Self::DEFAULT_RETENTION,
            snapshot_interval: Self::DEFAULT_SNAPSHOT_INTERVAL,
            block: Duration::from_secs(1),
            retry: Duration::from_secs(1),
        }
    }

    /// Checks the settings without connecting: the Redis address parses and the
    /// stream has a name. What [`Sync::start`] refuses, for `palisade check`.
    pub fn validate(&self) -> Result<redis::Client, StoreError> {
        let client = redis::Client::open(self.redis.as_str())
            .map_err(|e| StoreError::Sync(format!("redis address {:?}: {e}", self.redis)))?;
        if self.stream.is_empty() {
            return Err(StoreError::Sync("stream name is empty".into()));
        }
        Ok(client)
    }
}

/// The sync's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SyncStats {
    /// Outbox entries (committed batches) waiting to be published now.
    pub unpublished: u64,
    /// Outbox entries published.
    pub published: u64,
    /// Stream entries appended (a backlog is merged into fewer entries).
    pub stream_entries_written: u64,
    /// Stream entries read and applied (this host's own included).
    pub applied: u64,
    /// Stream entries that did not parse (skipped, position moved past them).
    pub bad_entries: u64,
    /// Redis errors (connection, command); each is followed by a retry.
    pub errors: u64,
    /// Snapshots written to Redis.
    pub snapshots_written: u64,
    /// Snapshots merged (a new host, or one back from a gap).
    pub snapshots_loaded: u64,
    /// Times this host found its position older than the retained stream.
    pub gaps: u64,
    /// 1 while both threads are connected to Redis.
    pub connected: u64,
}

#[derive(Default)]
struct Counters {
    published: AtomicU64,
    stream_entries_written: AtomicU64,
    applied: AtomicU64,
    bad_entries: AtomicU64,
    errors: AtomicU64,
    snapshots_written: AtomicU64,
    snapshots_loaded: AtomicU64,
    gaps: AtomicU64,
    publisher_up: AtomicBool,
    reader_up: AtomicBool,
}

struct Shared {
    cfg: SyncConfig,
    client: redis::Client,
    host: String,
    stop: AtomicBool,
    counters: Counters,
    /// Log each kind of Redis failure once until the connection works again.
    logged_down: AtomicBool,
}

impl Shared {
    fn connect(&self) -> Result<redis::Connection, redis::RedisError> {
        let con = self
            .client
            .get_connection_with_timeout(Duration::from_secs(2))?;
        con.set_read_timeout(Some(self.cfg.block + Duration::from_secs(5)))?;
        con.set_write_timeout(Some(Duration::from_secs(5)))?;
        Ok(con)
    }

    fn failed(&self, what: &str, e: &dyn std::fmt::Display) {
        self.counters.errors.fetch_add(1, Relaxed);
        if !self.logged_down.swap(true, Relaxed) {
            tracing::warn!(error = %e, "sync: {what} failed; serving on local state and retrying (logged once until Redis answers again)");
        }
    }

    fn recovered(&self) {
        if self.logged_down.swap(false, Relaxed) {
            tracing::info!("sync: Redis answers again");
        }
    }

    /// Sleeps up to `d`, waking early on stop; false when stopping.
    fn pause(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        while Instant::now() < end {
            if self.stop.load(Relaxed) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10).min(end - Instant::now()));
        }
        !self.stop.load(Relaxed)
    }
}

/// A running sync: a publisher thread and a reader thread (which also writes
/// snapshots). Stops when dropped.
pub struct Sync {
    shared: Arc<Shared>,
    view: ReadView,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Sync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sync")
            .field("stream", &self.shared.cfg.stream)
            .field("host", &self.shared.host)
            .finish()
    }
}

impl Sync {
    /// Starts syncing `store` (its host id names this host) with the stream. Redis
    /// need not be up: the threads keep retrying. Turns publishing on in the store.
    pub fn start(store: &Store, cfg: SyncConfig) -> Result<Sync, StoreError> {
        let client = cfg.validate()?;
        store.set_publishing(true)?;
        let shared = Arc::new(Shared {
            cfg,
            client,
            host: store.config().host_id.clone(),
            stop: AtomicBool::new(false),
            counters: Counters::default(),
            logged_down: AtomicBool::new(false),
        });
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| StoreError::Sync(format!("starting {name}: {e}")))
        };
        let (s1, st1) = (shared.clone(), store.clone());
        let (s2, st2) = (shared.clone(), store.clone());
        let threads = vec![
            spawn("sync-publish", Box::new(move || publisher(&s1, &st1)))?,
            spawn("sync-read", Box::new(move || reader(&s2, &st2)))?,
        ];
        Ok(Sync {
            shared,
            view: store.view().clone(),
            threads,
        })
    }

    /// The counters.
    pub fn stats(&self) -> SyncStats {
        let c = &self.shared.counters;
        let unpublished = self
            .view
            .read_txn()
            .ok()
            .and_then(|r| self.view.dbs().outbox.len(&r).ok())
            .unwrap_or(0);
        SyncStats {
            unpublished,
            published: c.published.load(Relaxed),
            stream_entries_written: c.stream_entries_written.load(Relaxed),
            applied: c.applied.load(Relaxed),
            bad_entries: c.bad_entries.load(Relaxed),
            errors: c.errors.load(Relaxed),
            snapshots_written: c.snapshots_written.load(Relaxed),
            snapshots_loaded: c.snapshots_loaded.load(Relaxed),
            gaps: c.gaps.load(Relaxed),
            connected: u64::from(c.publisher_up.load(Relaxed) && c.reader_up.load(Relaxed)),
        }
    }

    /// Stops the threads (within about `block`) and waits for them.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Sync {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Most outbox entries merged into one stream entry.
const MERGE_ENTRIES: usize = 256;
/// Merged entries stop growing past this many bytes.
const MERGE_BYTES: usize = 512 << 10;

/// Publishes the outbox: oldest first, a backlog merged into fewer entries.
fn publisher(sh: &Shared, store: &Store) {
    let mut con: Option<redis::Connection> = None;
    let view = store.view();
    while !sh.stop.load(Relaxed) {
        // Read a run of outbox entries.
        let batch = (|| -> Result<Vec<(u64, Vec<u8>)>, heed::Error> {
            let rtxn = view.read_txn()?;
            let mut out = Vec::new();
            let mut bytes = 0;
            for item in view.dbs().outbox.iter(&rtxn)? {
                let (k, v) = item?;
                let n = k.try_into().map(u64::from_be_bytes).unwrap_or(0);
                bytes += v.len();
                out.push((n, v.to_vec()));
                if out.len() >= MERGE_ENTRIES || bytes >= MERGE_BYTES {
                    break;
                }
            }
            Ok(out)
        })();
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                sh.failed("reading the outbox", &e);
                if !sh.pause(sh.cfg.retry) {
                    return;
                }
                continue;
            }
        };
        if batch.is_empty() {
            if !sh.pause(Duration::from_millis(5)) {
                return;
            }
            continue;
        }
        let last = batch.last().map_or(0, |b| b.0);
        let payload = match merge_outbox(&batch) {
            Ok(p) => p,
            Err(e) => {
                // An outbox entry this version cannot read: drop it rather than
                // block every later one.
                tracing::error!(error = %e, "sync: dropping unreadable outbox entries");
                sh.counters.bad_entries.fetch_add(1, Relaxed);
                let _ = store.send(Msg::Published(last));
                continue;
            }
        };
        let c = match con.as_mut() {
            Some(c) => c,
            None => match sh.connect() {
                Ok(c) => con.insert(c),
                Err(e) => {
                    sh.counters.publisher_up.store(false, Relaxed);
                    sh.failed("connecting to publish", &e);
                    if !sh.pause(sh.cfg.retry) {
                        return;
                    }
                    continue;
                }
            },
        };
        let mut cmd = redis::cmd("XADD");
        cmd.arg(&sh.cfg.stream)
            .arg("MAXLEN")
            .arg("~")
            .arg(sh.cfg.retention)
            .arg("*");
        for (f, v) in entry::state_fields(&sh.host, &payload) {
            cmd.arg(f).arg(v);
        }
        let sent = cmd.query::<String>(c);
        // Tracepoint `palisade:sync_publish(batches, ok)`.
        probe::probe_lazy!(
            palisade,
            sync_publish,
            batch.len() as isize,
            isize::from(sent.is_ok())
        );
        match sent {
            Ok(_) => {
                sh.counters.publisher_up.store(true, Relaxed);
                sh.recovered();
                sh.counters.published.fetch_add(batch.len() as u64, Relaxed);
                sh.counters.stream_entries_written.fetch_add(1, Relaxed);
                // The writer removes them; until it has, do not read them again.
                let (tx, rx) = std::sync::mpsc::channel();
                if store.send(Msg::Published(last)).is_err() {
                    return;
                }
                if store.send(Msg::Flush(tx)).is_err() {
                    return;
                }
                if let Ok(Err(e)) = rx.recv() {
                    // Not removed (a full map): they will be published again,
                    // harmlessly, after a pause.
                    sh.failed("clearing the outbox", &e);
                    if !sh.pause(sh.cfg.retry) {
                        return;
                    }
                }
            }
            Err(e) => {
                sh.counters.publisher_up.store(false, Relaxed);
                sh.failed("publishing", &e);
                con = None;
                if !sh.pause(sh.cfg.retry) {
                    return;
                }
            }
        }
    }
}

/// Merges outbox entries into one list of record changes.
fn merge_outbox(batch: &[(u64, Vec<u8>)]) -> Result<Vec<(Vec<u8>, RecState)>, String> {
    if batch.len() == 1 {
        return state::decode_changes(&batch[0].1);
    }
    let mut merged: BTreeMap<Vec<u8>, RecState> = BTreeMap::new();
    for (_, bytes) in batch {
        for (k, st) in state::decode_changes(bytes)? {
            merged.entry(k).or_default().merge(&st);
        }
    }
    Ok(merged.into_iter().collect())
}

/// Most entries read per `XREAD`.
const READ_COUNT: usize = 512;

/// Tails the stream and hands entries to the writer; writes snapshots.
fn reader(sh: &Shared, store: &Store) {
    let mut con: Option<redis::Connection> = None;
    let mut checked_gap = false;
    let mut next_snapshot = Instant::now() + sh.cfg.snapshot_interval;
    while !sh.stop.load(Relaxed) {
        let c = match con.as_mut() {
            Some(c) => c,
            None => match sh.connect() {
                Ok(c) => {
                    checked_gap = false;
                    con.insert(c)
                }
                Err(e) => {
                    sh.counters.reader_up.store(false, Relaxed);
                    sh.failed("connecting to read", &e);
                    if !sh.pause(sh.cfg.retry) {
                        return;
                    }
                    continue;
                }
            },
        };
        let res = (|| -> Result<(), redis::RedisError> {
            let pos = stream_position(store);
            if !checked_gap {
                start_or_catch_up(sh, store, c, pos)?;
                checked_gap = true;
                return Ok(());
            }
            let pos = pos.unwrap_or_default();
            if Instant::now() >= next_snapshot {
                write_snapshot(sh, store, c)?;
                next_snapshot = Instant::now() + sh.cfg.snapshot_interval;
            }
            let reply: Value = redis::cmd("XREAD")
                .arg("COUNT")
                .arg(READ_COUNT)
                .arg("BLOCK")
                .arg(sh.cfg.block.as_millis() as u64)
                .arg("STREAMS")
                .arg(&sh.cfg.stream)
                .arg(pos.to_string())
                .query(c)?;
            sh.counters.reader_up.store(true, Relaxed);
            sh.recovered();
            let entries = stream_entries(reply);
            if !entries.is_empty() {
                apply_entries(sh, store, entries);
            }
            Ok(())
        })();
        if let Err(e) = res {
            sh.counters.reader_up.store(false, Relaxed);
            sh.failed("reading the stream", &e);
            con = None;
            if !sh.pause(sh.cfg.retry) {
                return;
            }
        }
    }
}

/// The stream position stored with the records.
fn stream_position(store: &Store) -> Option<EntryId> {
    let view = store.view();
    let rtxn = view.read_txn().ok()?;
    let b = view.dbs().meta.get(&rtxn, META_STREAM_POS).ok()??;
    EntryId::parse(std::str::from_utf8(b).ok()?)
}

/// On connecting: a new host loads the snapshot; a host whose position is older
/// than the retained stream merges it too (and counts a gap).
fn start_or_catch_up(
    sh: &Shared,
    store: &Store,
    c: &mut redis::Connection,
    pos: Option<EntryId>,
) -> Result<(), redis::RedisError> {
    let first: Value = redis::cmd("XRANGE")
        .arg(&sh.cfg.stream)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(1)
        .query(c)?;
    let first = stream_ids(first).into_iter().next().map(|(id, _)| id);
    let gap = match (pos, first) {
        (Some(p), Some(f)) => p < f && p != EntryId::default(),
        _ => false,
    };
    if pos.is_some() && !gap {
        return Ok(());
    }
    if gap {
        sh.counters.gaps.fetch_add(1, Relaxed);
        tracing::warn!(position = %pos.unwrap_or_default(), first = %first.unwrap_or_default(),
            "sync: this host's stream position is older than the retained stream; merging the snapshot");
    }
    let snap: HashMap<String, Vec<u8>> = redis::cmd("HGETALL")
        .arg(format!("{}:snapshot", sh.cfg.stream))
        .query(c)?;
    let loaded = if snap.is_empty() {
        None
    } else {
        match parse_snapshot(&snap) {
            Ok(s) => Some(s),
            Err(e) => {
                sh.counters.bad_entries.fetch_add(1, Relaxed);
                tracing::error!(error = %e, "sync: the fleet snapshot does not parse; reading the retained stream instead");
                None
            }
        }
    };
    // Resume from the later of our position and the snapshot's.
    let (changes, snap_pos, applied) = loaded.unwrap_or_default();
    let new_pos = pos.unwrap_or_default().max(snap_pos);
    let had_snapshot = !changes.is_empty() || snap_pos != EntryId::default();
    let (tx, rx) = std::sync::mpsc::channel();
    let msg = Msg::Remote(
        vec![Remote::Applied(applied), Remote::State { changes }],
        Some(new_pos.to_string()),
        tx,
    );
    if store.send(msg).is_err() {
        return Ok(());
    }
    match rx.recv() {
        Ok(Ok(())) => {
            if had_snapshot {
                sh.counters.snapshots_loaded.fetch_add(1, Relaxed);
            }
        }
        Ok(Err(e)) => sh.failed("storing the snapshot", &e),
        Err(_) => {}
    }
    Ok(())
}

/// A snapshot: records, the stream position they include, and the outside
/// entries' last-applied marks.
type Snapshot = (Changes, EntryId, Applied);

fn parse_snapshot(h: &HashMap<String, Vec<u8>>) -> Result<Snapshot, String> {
    let get = |k: &str| h.get(k).ok_or_else(|| format!("snapshot without {k:?}"));
    if get("v")?.as_slice() != entry::VERSION.as_bytes() {
        return Err("unknown snapshot version".into());
    }
    let pos = std::str::from_utf8(get("position")?)
        .ok()
        .and_then(EntryId::parse)
        .ok_or("bad snapshot position")?;
    let applied: Applied = match h.get("applied") {
        Some(b) => postcard::from_bytes(b).map_err(|e| format!("snapshot marks: {e}"))?,
        None => Vec::new(),
    };
    Ok((state::decode_changes(get("data")?)?, pos, applied))
}

/// Writes this host's view (as the stream knows it) as the fleet snapshot.
fn write_snapshot(
    sh: &Shared,
    store: &Store,
    c: &mut redis::Connection,
) -> Result<(), redis::RedisError> {
    let view = store.view();
    let snap = (|| -> Result<Option<(Changes, String, Applied)>, heed::Error> {
        let rtxn = view.read_txn()?;
        let Some(pos) = view.dbs().meta.get(&rtxn, META_STREAM_POS)? else {
            return Ok(None);
        };
        let pos = String::from_utf8_lossy(pos).into_owned();
        let mut applied = Vec::new();
        for item in view.dbs().meta.prefix_iter(&rtxn, META_APPLIED_PREFIX)? {
            let (k, v) = item?;
            if let (Ok(host), Some(mark)) = (
                std::str::from_utf8(&k[META_APPLIED_PREFIX.len()..]),
                decode_id(v),
            ) {
                applied.push((host.to_string(), mark));
            }
        }
        let now = crate::unix_now();
        let mut out = Vec::new();
        for item in view.dbs().records.iter(&rtxn)? {
            let (k, v) = item?;
            if let Ok(st) = state::decode(v)
                && st.expires_at() > now
            {
                out.push((k.to_vec(), st.published_view()));
            }
        }
        Ok(Some((out, pos, applied)))
    })();
    match snap {
        Ok(Some((records, pos, applied))) => {
            redis::cmd("HSET")
                .arg(format!("{}:snapshot", sh.cfg.stream))
                .arg("v")
                .arg(entry::VERSION)
                .arg("host")
                .arg(&sh.host)
                .arg("position")
                .arg(pos)
                .arg("applied")
                .arg(postcard::to_stdvec(&applied).unwrap_or_default())
                .arg("data")
                .arg(state::encode_changes(&records))
                .query::<()>(c)?;
            sh.counters.snapshots_written.fetch_add(1, Relaxed);
        }
        Ok(None) => {}
        Err(e) => sh.failed("reading the store for a snapshot", &e),
    }
    Ok(())
}

/// Parses and applies entries (in order), storing the position of the last one.
fn apply_entries(sh: &Shared, store: &Store, entries: Vec<(EntryId, HashMap<String, Vec<u8>>)>) {
    let Some(last) = entries.last().map(|e| e.0) else {
        return;
    };
    let mut remote = Vec::with_capacity(entries.len());
    for (id, fields) in &entries {
        match entry::parse(*id, fields) {
            Ok(r) => remote.push(r),
            Err(e) => {
                sh.counters.bad_entries.fetch_add(1, Relaxed);
                tracing::warn!(entry = %id, error = %e, "sync: skipping a stream entry that does not parse");
            }
        }
    }
    let n = remote.len() as u64;
    let (tx, rx) = std::sync::mpsc::channel();
    if store
        .send(Msg::Remote(remote, Some(last.to_string()), tx))
        .is_err()
    {
        return;
    }
    match rx.recv() {
        Ok(Ok(())) => {
            sh.counters.applied.fetch_add(n, Relaxed);
        }
        Ok(Err(e)) => {
            // Not committed (a full map): the position did not move, so they are
            // read again after a pause.
            sh.failed("applying stream entries", &e);
            sh.pause(sh.cfg.retry);
        }
        Err(_) => {}
    }
}

/// Entries of an `XREAD` reply (one stream).
fn stream_entries(reply: Value) -> Vec<(EntryId, HashMap<String, Vec<u8>>)> {
    // [[stream, [[id, [f, v, ...]], ...]]] (RESP2) or a map (RESP3).
    let streams = match reply {
        Value::Array(a) => a,
        Value::Map(m) => m
            .into_iter()
            .map(|(k, v)| Value::Array(vec![k, v]))
            .collect(),
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    for s in streams {
        if let Value::Array(mut kv) = s
            && kv.len() == 2
        {
            out.extend(stream_ids(kv.pop().unwrap_or(Value::Nil)));
        }
    }
    out
}

/// `[[id, [f, v, ...]], ...]` as ids and fields.
fn stream_ids(v: Value) -> Vec<(EntryId, HashMap<String, Vec<u8>>)> {
    let Value::Array(items) = v else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items {
        let Value::Array(pair) = item else { continue };
        let mut pair = pair.into_iter();
        let (Some(id), Some(Value::Array(fields))) = (pair.next(), pair.next()) else {
            continue;
        };
        let Some(id) = bytes(id)
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| EntryId::parse(&s))
        else {
            continue;
        };
        let mut map = HashMap::new();
        let mut it = fields.into_iter();
        while let (Some(f), Some(v)) = (it.next(), it.next()) {
            if let (Some(f), Some(v)) = (bytes(f).and_then(|b| String::from_utf8(b).ok()), bytes(v))
            {
                map.insert(f, v);
            }
        }
        out.push((id, map));
    }
    out
}

fn bytes(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        _ => None,
    }
}
