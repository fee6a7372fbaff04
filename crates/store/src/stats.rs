//! Counters of the store, kept as atomics and read as a plain [`StoreStats`].

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The store's counters at one moment, for metrics and the benchmark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreStats {
    /// Record reads (request path and library calls).
    pub reads: u64,
    /// Reads that failed (LMDB error or a record that does not decode).
    pub read_errors: u64,
    /// Nanoseconds spent in reads, from opening the read transaction to the decoded
    /// record.
    pub read_nanos: u64,
    /// Write transactions opened by a thread other than the writer thread. The
    /// request path holds only a read view that cannot open one, so this stays 0;
    /// it is counted at the one place write transactions are opened.
    pub write_lock_waits_on_request_path: u64,
    /// Record writes handed to `submit` (one per record per transaction).
    pub writes_submitted: u64,
    /// Record writes refused because the writer's queue was full (or the writer
    /// had stopped).
    pub writes_dropped_queue_full: u64,
    /// Record writes lost because their batch could not be committed (full map or
    /// another LMDB error); the batch is rolled back whole.
    pub writes_failed: u64,
    /// Committed write transactions.
    pub batches: u64,
    /// Record writes in committed batches (batches / this = mean batch size).
    pub writes_committed: u64,
    /// Distinct records written by committed batches (after coalescing per key).
    pub records_committed: u64,
    /// Largest batch committed, in record writes.
    pub max_batch: u64,
    /// Commits refused because the LMDB map is full.
    pub map_full_errors: u64,
    /// Other commit failures.
    pub commit_errors: u64,
    /// Records deleted by the sweeper (whole-record timeout passed).
    pub swept: u64,
    /// Outside sync entries skipped because they were applied before.
    pub remote_duplicates: u64,
}

/// The live counters.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub reads: AtomicU64,
    pub read_errors: AtomicU64,
    pub read_nanos: AtomicU64,
    pub write_lock_waits_on_request_path: AtomicU64,
    pub writes_submitted: AtomicU64,
    pub writes_dropped_queue_full: AtomicU64,
    pub writes_failed: AtomicU64,
    pub batches: AtomicU64,
    pub writes_committed: AtomicU64,
    pub records_committed: AtomicU64,
    pub max_batch: AtomicU64,
    pub map_full_errors: AtomicU64,
    pub commit_errors: AtomicU64,
    pub swept: AtomicU64,
    pub remote_duplicates: AtomicU64,
}

impl Stats {
    pub fn snapshot(&self) -> StoreStats {
        StoreStats {
            reads: self.reads.load(Relaxed),
            read_errors: self.read_errors.load(Relaxed),
            read_nanos: self.read_nanos.load(Relaxed),
            write_lock_waits_on_request_path: self.write_lock_waits_on_request_path.load(Relaxed),
            writes_submitted: self.writes_submitted.load(Relaxed),
            writes_dropped_queue_full: self.writes_dropped_queue_full.load(Relaxed),
            writes_failed: self.writes_failed.load(Relaxed),
            batches: self.batches.load(Relaxed),
            writes_committed: self.writes_committed.load(Relaxed),
            records_committed: self.records_committed.load(Relaxed),
            max_batch: self.max_batch.load(Relaxed),
            map_full_errors: self.map_full_errors.load(Relaxed),
            commit_errors: self.commit_errors.load(Relaxed),
            swept: self.swept.load(Relaxed),
            remote_duplicates: self.remote_duplicates.load(Relaxed),
        }
    }
}
