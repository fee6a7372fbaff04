//! The metrics of the store of persistent collections and of its fleet sync.

use crate::metrics::{Collector, Exposition, write_plain};
use store::Store;
use store::sync::Sync;

/// The collection store's counters (`palisade_store_*`).
impl Collector for Store {
    fn collect(&self, out: &mut Exposition) {
        store_counters(out.text_mut(), &self.stats(), self.map_usage());
    }
}

/// Writes the store's counters; `map` is the map size and the bytes of it in use.
fn store_counters(out: &mut String, s: &store::StoreStats, map: (u64, u64)) {
    let counters: [(&str, &str, f64); 16] = [
        (
            "palisade_store_map_size_bytes",
            "Size of the store's map (store.map_size): the most it can hold.",
            map.0 as f64,
        ),
        (
            "palisade_store_used_bytes",
            "Bytes of the store's map in use.",
            map.1 as f64,
        ),
        (
            "palisade_store_reads_total",
            "Collection record reads (each in its own LMDB read transaction).",
            s.reads as f64,
        ),
        (
            "palisade_store_read_errors_total",
            "Collection reads that failed.",
            s.read_errors as f64,
        ),
        (
            "palisade_store_read_seconds_total",
            "Time spent in collection reads.",
            s.read_nanos as f64 / 1e9,
        ),
        (
            "palisade_store_write_lock_waits_on_request_path_total",
            "Write transactions opened outside the writer thread (0 by construction: requests only read).",
            s.write_lock_waits_on_request_path as f64,
        ),
        (
            "palisade_store_writes_submitted_total",
            "Record writes handed to the store's writer.",
            s.writes_submitted as f64,
        ),
        (
            "palisade_store_writes_dropped_queue_full_total",
            "Record writes refused because the writer's queue was full.",
            s.writes_dropped_queue_full as f64,
        ),
        (
            "palisade_store_writes_failed_total",
            "Record writes lost because their batch could not be committed.",
            s.writes_failed as f64,
        ),
        (
            "palisade_store_batches_total",
            "Write transactions committed by the writer.",
            s.batches as f64,
        ),
        (
            "palisade_store_writes_committed_total",
            "Record writes in committed batches.",
            s.writes_committed as f64,
        ),
        (
            "palisade_store_records_committed_total",
            "Distinct records written by committed batches.",
            s.records_committed as f64,
        ),
        (
            "palisade_store_map_full_errors_total",
            "Commits refused because the store is full (store.map_size).",
            s.map_full_errors as f64,
        ),
        (
            "palisade_store_commit_errors_total",
            "Other commit failures.",
            s.commit_errors as f64,
        ),
        (
            "palisade_store_swept_total",
            "Expired records removed by the sweeper.",
            s.swept as f64,
        ),
        (
            "palisade_store_max_batch",
            "Largest batch committed, in record writes.",
            s.max_batch as f64,
        ),
    ];
    write_plain(out, &counters);
}

/// The fleet sync's counters (`palisade_sync_*`).
impl Collector for Sync {
    fn collect(&self, out: &mut Exposition) {
        sync_counters(out.text_mut(), &self.stats());
    }
}

/// Writes the sync's counters.
fn sync_counters(out: &mut String, s: &store::sync::SyncStats) {
    let all: [(&str, &str, f64); 10] = [
        (
            "palisade_sync_unpublished",
            "Committed batches waiting to be published (kept in the store while Redis is down).",
            s.unpublished as f64,
        ),
        (
            "palisade_sync_published_total",
            "Committed batches published to the stream.",
            s.published as f64,
        ),
        (
            "palisade_sync_stream_entries_written_total",
            "Stream entries appended.",
            s.stream_entries_written as f64,
        ),
        (
            "palisade_sync_applied_total",
            "Stream entries read and applied.",
            s.applied as f64,
        ),
        (
            "palisade_sync_bad_entries_total",
            "Stream entries that did not parse (skipped).",
            s.bad_entries as f64,
        ),
        (
            "palisade_sync_errors_total",
            "Redis errors (each followed by a retry).",
            s.errors as f64,
        ),
        (
            "palisade_sync_snapshots_written_total",
            "Fleet snapshots written.",
            s.snapshots_written as f64,
        ),
        (
            "palisade_sync_snapshots_loaded_total",
            "Fleet snapshots merged.",
            s.snapshots_loaded as f64,
        ),
        (
            "palisade_sync_gaps_total",
            "Times this host's stream position was older than the retained stream.",
            s.gaps as f64,
        ),
        (
            "palisade_sync_connected",
            "1 while the sync is connected to Redis.",
            s.connected as f64,
        ),
    ];
    write_plain(out, &all);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_and_sync_counters() {
        let mut out = String::new();
        let stats = store::StoreStats {
            reads: 7,
            read_nanos: 1_500_000_000,
            ..Default::default()
        };
        store_counters(&mut out, &stats, (1 << 20, 4096));
        sync_counters(
            &mut out,
            &store::sync::SyncStats {
                unpublished: 3,
                connected: 1,
                ..Default::default()
            },
        );
        assert!(
            out.contains(
                "# TYPE palisade_store_reads_total counter\npalisade_store_reads_total 7\n"
            )
        );
        assert!(out.contains("palisade_store_read_seconds_total 1.5\n"));
        assert!(out.contains("palisade_store_map_size_bytes 1048576\n"));
        assert!(out.contains("palisade_store_used_bytes 4096\n"));
        assert!(out.contains("palisade_store_write_lock_waits_on_request_path_total 0\n"));
        assert!(
            out.contains("# TYPE palisade_sync_unpublished gauge\npalisade_sync_unpublished 3\n")
        );
        assert!(out.contains("palisade_sync_connected 1\n"));
    }
}
