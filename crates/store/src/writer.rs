//! The writer thread: the only code that writes to the store. It drains a bounded
//! queue, coalesces the writes of many transactions per record (each record is read
//! and written once per batch, so increments add up in memory), commits them in one
//! LMDB transaction per batch, and sweeps expired records between batches.

use crate::StoreError;
use crate::lmdb::WriteGate;
use crate::state::{self, Origin, RecState, Stamp, Touched};
use crate::stats::Stats;
use engine::collections::{RecordKey, RecordWrite, StoredRecord};
use flume::{Receiver, RecvTimeoutError, TryRecvError};
use heed::RwTxn;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// Most record writes one batch takes before it is committed early.
pub(crate) const MAX_BATCH: usize = 20_000;

/// Where the writer answers a caller that waits.
pub(crate) type Reply<T> = Sender<Result<T, StoreError>>;

/// A change that came from the sync stream.
#[derive(Debug)]
pub(crate) enum Remote {
    /// Record states (partial) published by a host; merged as they are.
    State { changes: Vec<(Vec<u8>, RecState)> },
    /// Writes from an outside service, applied once: `id` is the stream entry id
    /// (milliseconds, sequence), which orders its changes; entries of `host` whose
    /// `dedup` (the entry's `seq` field, else its id) is not above the last one
    /// applied are skipped.
    Ops {
        host: String,
        id: (u64, u64),
        dedup: (u64, u64),
        writes: Vec<(RecordKey, RecordWrite)>,
    },
    /// Outside entries already in a snapshot: raise the last-applied marks.
    Applied(Applied),
}

/// Per outside host, the last entry applied (`seq`, or stream id), as a snapshot
/// carries it.
pub(crate) type Applied = Vec<(String, (u64, u64))>;

/// What the writer is asked to do.
pub(crate) enum Msg {
    /// Writes of transactions (fire and forget).
    Writes(Vec<(RecordKey, RecordWrite)>),
    /// Whole records and writes to apply in one transaction, all or nothing.
    Import(Vec<ImportItem>, Reply<usize>),
    /// Commit what is pending and answer.
    Flush(Reply<()>),
    /// Entries read from the sync stream, with the stream position after them,
    /// committed together.
    Remote(Vec<Remote>, Option<String>, Reply<()>),
    /// Outbox entries up to this number (included) were published.
    Published(u64),
    /// Publishing on or off (sync configured or not).
    SetPublishing(bool, Reply<()>),
    /// Commit and stop.
    Shutdown,
}

/// One line of an import.
#[derive(Debug, Clone)]
pub(crate) enum ImportItem {
    /// Replace the record.
    Record(RecordKey, StoredRecord),
    /// Apply a write.
    Write(RecordKey, RecordWrite),
}

/// Meta keys.
pub(crate) const META_CLOCK: &[u8] = b"clock";
pub(crate) const META_PUBLISH: &[u8] = b"publish";
pub(crate) const META_OUTBOX_NEXT: &[u8] = b"outbox_next";
pub(crate) const META_STREAM_POS: &[u8] = b"stream_pos";
pub(crate) const META_APPLIED_PREFIX: &[u8] = b"applied:";

/// Whole-record expiry the sweeper waits past before deleting a record, so that a
/// late change from another host still finds the record it belongs to.
pub(crate) const SWEEP_GRACE_SECS: i64 = 60;

pub(crate) struct Writer {
    pub gate: WriteGate,
    pub stats: Arc<Stats>,
    pub host: String,
    pub batch_interval: Duration,
    pub sweep_interval: Duration,
    pub now: fn() -> i64,
}

/// Per-batch work: pending messages and those waiting for the commit.
#[derive(Default)]
struct Pending {
    writes: Vec<(RecordKey, RecordWrite)>,
    imports: Vec<(Vec<ImportItem>, Reply<usize>)>,
    remote: Vec<Remote>,
    position: Option<String>,
    remote_waiters: Vec<Reply<()>>,
    flushes: Vec<Reply<()>>,
    published: Option<u64>,
    publishing: Option<(bool, Vec<Reply<()>>)>,
    since: Option<Instant>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.writes.is_empty()
            && self.imports.is_empty()
            && self.remote.is_empty()
            && self.position.is_none()
            && self.flushes.is_empty()
            && self.published.is_none()
            && self.publishing.is_none()
    }

    fn size(&self) -> usize {
        self.writes.len()
            + self.imports.iter().map(|(i, _)| i.len()).sum::<usize>()
            + self.remote.len()
    }
}

/// Logs a failure kind once until a commit succeeds again.
#[derive(Default)]
struct LoggedOnce {
    map_full: bool,
    other: bool,
}

impl Writer {
    pub fn run(mut self, rx: Receiver<Msg>) {
        self.gate.adopt();
        let mut pending = Pending::default();
        let mut next_sweep = Instant::now() + self.sweep_interval;
        let mut logged = LoggedOnce::default();
        loop {
            let now = Instant::now();
            let deadline = match pending.since {
                Some(t) => (t + self.batch_interval).min(next_sweep),
                None => next_sweep,
            };
            let mut stop = false;
            if pending.since.is_some() {
                // A batch is open: sleep until it is due and take what came meanwhile
                // in one go, instead of waking for every request's submit (a futex
                // wake and a context switch each). A flush or import waits at most
                // the rest of the batch interval; the queue (65,536 messages) cannot
                // fill in that time.
                std::thread::sleep(deadline.saturating_duration_since(now));
            } else {
                match rx.recv_timeout(deadline.saturating_duration_since(now)) {
                    Ok(msg) => stop = self.take(msg, &mut pending),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => stop = true,
                }
            }
            // Drain what is already queued without waiting.
            while !stop && pending.size() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(msg) => stop = self.take(msg, &mut pending),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => stop = true,
                }
            }
            let due = pending
                .since
                .is_some_and(|t| t.elapsed() >= self.batch_interval);
            if stop
                || due
                || pending.size() >= MAX_BATCH
                || !pending.flushes.is_empty()
                || !pending.remote_waiters.is_empty()
                || !pending.imports.is_empty()
                || pending.publishing.is_some()
            {
                self.commit(std::mem::take(&mut pending), &mut logged);
            }
            if Instant::now() >= next_sweep {
                self.sweep(&mut logged);
                next_sweep = Instant::now() + self.sweep_interval;
            }
            if stop {
                return;
            }
        }
    }

    /// Adds a message to the batch; true on shutdown.
    fn take(&self, msg: Msg, p: &mut Pending) -> bool {
        if p.since.is_none() {
            p.since = Some(Instant::now());
        }
        match msg {
            Msg::Writes(w) => p.writes.extend(w),
            Msg::Import(items, tx) => p.imports.push((items, tx)),
            Msg::Flush(tx) => p.flushes.push(tx),
            Msg::Remote(r, pos, tx) => {
                p.remote.extend(r);
                if pos.is_some() {
                    p.position = pos;
                }
                p.remote_waiters.push(tx);
            }
            Msg::Published(n) => p.published = Some(p.published.unwrap_or(0).max(n)),
            Msg::SetPublishing(on, tx) => match &mut p.publishing {
                Some((v, waiters)) => {
                    *v = on;
                    waiters.push(tx);
                }
                None => p.publishing = Some((on, vec![tx])),
            },
            Msg::Shutdown => return true,
        }
        false
    }

    fn commit(&self, mut p: Pending, logged: &mut LoggedOnce) {
        if p.is_empty() {
            return;
        }
        let n_writes =
            p.writes.len() as u64 + p.imports.iter().map(|(i, _)| i.len() as u64).sum::<u64>();
        // Imports are all or nothing each: an import that fails alone (a bad key
        // cannot happen here, they are checked before) takes the batch with it.
        let started = std::time::Instant::now();
        let result = self.write_batch(&mut p);
        // Tracepoint `palisade:store_commit(writes, records, us)` (records -1: failed).
        probe::probe_lazy!(
            palisade,
            store_commit,
            n_writes as isize,
            result.as_ref().map_or(-1, |r| *r as isize),
            started.elapsed().as_micros() as isize
        );
        match result {
            Ok(records) => {
                *logged = LoggedOnce::default();
                self.stats.batches.fetch_add(1, Relaxed);
                self.stats.writes_committed.fetch_add(n_writes, Relaxed);
                self.stats.records_committed.fetch_add(records, Relaxed);
                self.stats.max_batch.fetch_max(n_writes, Relaxed);
                for (items, tx) in p.imports {
                    let _ = tx.send(Ok(items.len()));
                }
                for tx in p.flushes.into_iter().chain(p.remote_waiters) {
                    let _ = tx.send(Ok(()));
                }
                if let Some((_, waiters)) = p.publishing {
                    for tx in waiters {
                        let _ = tx.send(Ok(()));
                    }
                }
            }
            Err(e) => {
                self.stats.writes_failed.fetch_add(n_writes, Relaxed);
                match &e {
                    StoreError::MapFull { .. } => {
                        self.stats.map_full_errors.fetch_add(1, Relaxed);
                        if !logged.map_full {
                            logged.map_full = true;
                            tracing::error!(error = %e, writes = n_writes, "store: batch not committed, map full (logged once until a commit succeeds)");
                        }
                    }
                    _ => {
                        self.stats.commit_errors.fetch_add(1, Relaxed);
                        if !logged.other {
                            logged.other = true;
                            tracing::error!(error = %e, writes = n_writes, "store: batch not committed (logged once until a commit succeeds)");
                        }
                    }
                }
                for (_, tx) in p.imports {
                    let _ = tx.send(Err(e.clone()));
                }
                for tx in p.flushes.into_iter().chain(p.remote_waiters) {
                    let _ = tx.send(Err(e.clone()));
                }
                if let Some((_, waiters)) = p.publishing {
                    for tx in waiters {
                        let _ = tx.send(Err(e.clone()));
                    }
                }
            }
        }
    }

    /// Applies a batch in one write transaction; the number of records written.
    fn write_batch(&self, p: &mut Pending) -> Result<u64, StoreError> {
        let ctx = "committing a batch";
        let err = |e| StoreError::from_lmdb(ctx, e);
        let dbs = self.gate.dbs();
        let mut wtxn = self.gate.write_txn(&self.stats).map_err(err)?;
        let mut clock = read_clock(&wtxn, dbs)?;
        // Each record is read once, changed in memory by every write of the batch,
        // and written once.
        let mut work: HashMap<Vec<u8>, (RecState, Touched)> = HashMap::new();
        let mut order: Vec<Vec<u8>> = Vec::new();
        let mut load = |wtxn: &RwTxn<'_>,
                        key: Vec<u8>,
                        work: &mut HashMap<Vec<u8>, (RecState, Touched)>|
         -> Result<Vec<u8>, StoreError> {
            if !work.contains_key(&key) {
                let state = match dbs.records.get(wtxn, &key).map_err(err)? {
                    Some(bytes) => state::decode(bytes).map_err(|reason| StoreError::Corrupt {
                        key: String::from_utf8_lossy(&key).into_owned(),
                        reason,
                    })?,
                    None => RecState::default(),
                };
                work.insert(key.clone(), (state, Touched::default()));
                order.push(key.clone());
            }
            Ok(key)
        };
        let me = self.host.as_str();
        // Remote changes first (they are older than anything queued locally since
        // the last batch), then local writes in submission order.
        for r in std::mem::take(&mut p.remote) {
            match r {
                Remote::State { changes } => {
                    for (key, delta) in changes {
                        clock.0 = clock.0.max(delta.max_at());
                        let key = load(&wtxn, key, &mut work)?;
                        if let Some((st, _)) = work.get_mut(&key) {
                            st.merge(&delta);
                        }
                    }
                }
                Remote::Applied(marks) => {
                    for (host, mark) in marks {
                        let meta_key = [META_APPLIED_PREFIX, host.as_bytes()].concat();
                        let last = dbs
                            .meta
                            .get(&wtxn, &meta_key)
                            .map_err(err)?
                            .and_then(decode_id);
                        if last.is_none_or(|l| l < mark) {
                            dbs.meta
                                .put(&mut wtxn, &meta_key, &encode_id(mark))
                                .map_err(err)?;
                        }
                    }
                }
                Remote::Ops {
                    host,
                    id,
                    dedup,
                    writes,
                } => {
                    let meta_key = [META_APPLIED_PREFIX, host.as_bytes()].concat();
                    let last = dbs
                        .meta
                        .get(&wtxn, &meta_key)
                        .map_err(err)?
                        .and_then(decode_id);
                    if last.is_some_and(|l| dedup <= l) {
                        self.stats.remote_duplicates.fetch_add(1, Relaxed);
                        continue;
                    }
                    for (i, (rk, w)) in writes.iter().enumerate() {
                        let key = load(&wtxn, rk.encode(), &mut work)?;
                        let Some((st, t)) = work.get_mut(&key) else {
                            continue;
                        };
                        let mut n = 0u64;
                        let mut stamps = |at: i64| {
                            n += 1;
                            Stamp {
                                at,
                                seq: outside_seq(id, i, n),
                                host: host.clone(),
                            }
                        };
                        let mut origin = Origin {
                            host: &host,
                            echo_host: Some(me),
                            stamps: &mut stamps,
                        };
                        st.apply_write(w, &mut origin, t);
                        // Outside changes reach every host through the stream:
                        // nothing to publish again.
                        *t = Touched::default();
                    }
                    dbs.meta
                        .put(&mut wtxn, &meta_key, &encode_id(dedup))
                        .map_err(err)?;
                }
            }
        }
        let mut stamps = |at: i64| {
            clock.0 = clock.0.max(at);
            clock.1 += 1;
            Stamp {
                at: clock.0,
                seq: clock.1,
                host: self.host.clone(),
            }
        };
        for (rk, w) in p.writes.iter() {
            let key = load(&wtxn, rk.encode(), &mut work)?;
            if let Some((st, t)) = work.get_mut(&key) {
                st.apply_write(
                    w,
                    &mut Origin {
                        host: me,
                        echo_host: None,
                        stamps: &mut stamps,
                    },
                    t,
                );
            }
        }
        for (items, _) in &p.imports {
            for item in items {
                let rk = match item {
                    ImportItem::Record(rk, _) | ImportItem::Write(rk, _) => rk,
                };
                let key = load(&wtxn, rk.encode(), &mut work)?;
                if let Some((st, t)) = work.get_mut(&key) {
                    let mut origin = Origin {
                        host: me,
                        echo_host: None,
                        stamps: &mut stamps,
                    };
                    match item {
                        ImportItem::Record(_, rec) => st.replace(rec, &mut origin, t),
                        ImportItem::Write(_, w) => st.apply_write(w, &mut origin, t),
                    }
                }
            }
        }
        let publishing = match &p.publishing {
            Some((on, _)) => {
                if *on {
                    dbs.meta.put(&mut wtxn, META_PUBLISH, &[1]).map_err(err)?;
                } else {
                    dbs.meta.delete(&mut wtxn, META_PUBLISH).map_err(err)?;
                    dbs.outbox.clear(&mut wtxn).map_err(err)?;
                }
                *on
            }
            None => dbs.meta.get(&wtxn, META_PUBLISH).map_err(err)?.is_some(),
        };
        let mut outgoing = Vec::new();
        for key in &order {
            let Some((st, t)) = work.get(key) else {
                continue;
            };
            dbs.records
                .put(&mut wtxn, key, &state::encode(st))
                .map_err(err)?;
            if publishing && (t.record || !t.vars.is_empty()) {
                outgoing.push((key.clone(), st.delta(t)));
            }
        }
        if !outgoing.is_empty() {
            let next = dbs
                .meta
                .get(&wtxn, META_OUTBOX_NEXT)
                .map_err(err)?
                .and_then(|b| b.try_into().ok().map(u64::from_be_bytes))
                .unwrap_or(1);
            dbs.outbox
                .put(
                    &mut wtxn,
                    &next.to_be_bytes(),
                    &state::encode_changes(&outgoing),
                )
                .map_err(err)?;
            dbs.meta
                .put(&mut wtxn, META_OUTBOX_NEXT, &(next + 1).to_be_bytes())
                .map_err(err)?;
        }
        if let Some(upto) = p.published {
            let upto = upto.to_be_bytes();
            let range: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Unbounded, Bound::Included(&upto));
            dbs.outbox.delete_range(&mut wtxn, &range).map_err(err)?;
        }
        if let Some(pos) = &p.position {
            dbs.meta
                .put(&mut wtxn, META_STREAM_POS, pos.as_bytes())
                .map_err(err)?;
        }
        write_clock(&mut wtxn, dbs, clock)?;
        wtxn.commit().map_err(err)?;
        Ok(order.len() as u64)
    }

    /// Deletes records whose whole-record timeout passed (plus a grace period), a
    /// bounded number per write transaction so the write lock is held briefly.
    fn sweep(&self, logged: &mut LoggedOnce) {
        const PER_TXN: usize = 5_000;
        let now = (self.now)();
        let mut from: Option<Vec<u8>> = None;
        loop {
            let res = (|| -> Result<Option<Vec<u8>>, StoreError> {
                let err = |e| StoreError::from_lmdb("sweeping", e);
                let dbs = self.gate.dbs();
                let mut wtxn = self.gate.write_txn(&self.stats).map_err(err)?;
                let mut doomed = Vec::new();
                let mut last = None;
                {
                    let lower = match &from {
                        Some(f) => Bound::Excluded(f.as_slice()),
                        None => Bound::Unbounded,
                    };
                    let range: (Bound<&[u8]>, Bound<&[u8]>) = (lower, Bound::Unbounded);
                    let iter = dbs.records.range(&wtxn, &range).map_err(err)?;
                    for (seen, item) in iter.enumerate() {
                        let (k, v) = item.map_err(err)?;
                        if seen >= PER_TXN {
                            break;
                        }
                        last = Some(k.to_vec());
                        // A record that does not decode is left for `get` to report.
                        if let Ok(Some(r)) = state::decode_read(v)
                            && r.expires_at().saturating_add(SWEEP_GRACE_SECS) <= now
                        {
                            doomed.push(k.to_vec());
                        }
                    }
                }
                for k in &doomed {
                    dbs.records.delete(&mut wtxn, k).map_err(err)?;
                }
                wtxn.commit().map_err(err)?;
                self.stats.swept.fetch_add(doomed.len() as u64, Relaxed);
                Ok(last)
            })();
            match res {
                Ok(Some(last)) => from = Some(last),
                Ok(None) => return,
                Err(e) => {
                    if matches!(e, StoreError::MapFull { .. }) {
                        self.stats.map_full_errors.fetch_add(1, Relaxed);
                        if !logged.map_full {
                            logged.map_full = true;
                            tracing::error!(error = %e, "store: sweep not committed, map full");
                        }
                    } else {
                        self.stats.commit_errors.fetch_add(1, Relaxed);
                        if !logged.other {
                            logged.other = true;
                            tracing::error!(error = %e, "store: sweep failed");
                        }
                    }
                    return;
                }
            }
        }
    }
}

/// The stamp sequence of an outside entry's change: ordered by entry id, then by
/// the write's place in the entry and the change's place in the write.
fn outside_seq(id: (u64, u64), write: usize, n: u64) -> u64 {
    id.0.saturating_mul(1_000_000)
        .saturating_add(id.1.min(999).saturating_mul(1_000))
        .saturating_add((write as u64).saturating_mul(32).saturating_add(n).min(999))
}

fn encode_id(id: (u64, u64)) -> [u8; 16] {
    let mut out = [0; 16];
    out[..8].copy_from_slice(&id.0.to_be_bytes());
    out[8..].copy_from_slice(&id.1.to_be_bytes());
    out
}

pub(crate) fn decode_id(b: &[u8]) -> Option<(u64, u64)> {
    let a: [u8; 8] = b.get(..8)?.try_into().ok()?;
    let c: [u8; 8] = b.get(8..16)?.try_into().ok()?;
    Some((u64::from_be_bytes(a), u64::from_be_bytes(c)))
}

fn read_clock(wtxn: &RwTxn<'_>, dbs: &crate::lmdb::Dbs) -> Result<(i64, u64), StoreError> {
    let b = dbs
        .meta
        .get(wtxn, META_CLOCK)
        .map_err(|e| StoreError::from_lmdb("reading the clock", e))?;
    Ok(match b {
        Some(b) if b.len() == 16 => {
            let mut at = [0; 8];
            let mut seq = [0; 8];
            at.copy_from_slice(&b[..8]);
            seq.copy_from_slice(&b[8..]);
            (i64::from_be_bytes(at), u64::from_be_bytes(seq))
        }
        _ => (i64::MIN, 0),
    })
}

fn write_clock(
    wtxn: &mut RwTxn<'_>,
    dbs: &crate::lmdb::Dbs,
    clock: (i64, u64),
) -> Result<(), StoreError> {
    let mut b = [0; 16];
    b[..8].copy_from_slice(&clock.0.to_be_bytes());
    b[8..].copy_from_slice(&clock.1.to_be_bytes());
    dbs.meta
        .put(wtxn, META_CLOCK, &b)
        .map_err(|e| StoreError::from_lmdb("writing the clock", e))
}
