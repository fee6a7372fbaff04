//! The worker runtime: which worker thread runs this ([`current_worker`]), values
//! kept per worker ([`PerWorker`]) and per-worker counters ([`Workers`]), how many
//! workers there are ([`worker_count`]), each worker's single-threaded tokio runtime
//! ([`worker_runtime`], [`run_worker`]), and waiting for shutdown ([`stopped`]).
//!
//! Everything below the listeners ([`crate::server`]) that needs to know about
//! workers or shutdown imports it from here.

use anyhow::Context as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Resolves once shutdown has begun (at once if it already has).
pub async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await.is_ok();
}

/// Connections accepted by each worker thread, each counter on its own cache line
/// so that workers never write to a line another worker writes to.
#[derive(Debug)]
pub struct Workers {
    connections: Box<[WorkerCounter]>,
}

#[derive(Debug, Default)]
#[repr(align(128))]
struct WorkerCounter(std::sync::atomic::AtomicU64);

impl Workers {
    /// Counters for `n` worker threads (at least one).
    pub fn new(n: usize) -> Workers {
        Workers {
            connections: (0..n.max(1)).map(|_| WorkerCounter::default()).collect(),
        }
    }

    /// The number of worker threads.
    pub fn len(&self) -> usize {
        self.connections.len()
    }

    /// Always false: there is at least one worker.
    pub fn is_empty(&self) -> bool {
        self.connections.is_empty()
    }

    /// Counts a connection accepted by worker `worker`.
    pub fn count_connection(&self, worker: usize) {
        if let Some(c) = self.connections.get(worker) {
            c.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Connections accepted so far by each worker, worker 0 first.
    pub fn connections(&self) -> Vec<u64> {
        self.connections
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .collect()
    }

    /// Appends `palisade_worker_connections_total{worker="N"}` in the Prometheus
    /// text format.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        out.push_str(
            "# HELP palisade_worker_connections_total Client connections accepted, by worker thread.\n",
        );
        out.push_str("# TYPE palisade_worker_connections_total counter\n");
        for (i, n) in self.connections().iter().enumerate() {
            let _ = writeln!(
                out,
                "palisade_worker_connections_total{{worker=\"{i}\"}} {n}"
            );
        }
    }
}

thread_local! {
    static WORKER: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The index of the worker thread running this (0 on any other thread), for
/// state kept per worker so that workers never share a lock or a cache line.
pub fn current_worker() -> usize {
    WORKER.with(std::cell::Cell::get)
}

/// Runs `f` as if on worker thread `index` (unit tests of per-worker state).
#[cfg(test)]
pub(crate) fn as_worker<T>(index: usize, f: impl FnOnce() -> T) -> T {
    let before = WORKER.with(|w| w.replace(index));
    let out = f();
    WORKER.with(|w| w.set(before));
    out
}

/// A value each worker thread reads from its own copy, on a cache line of its own,
/// so that reading it never writes memory another worker reads (a shared lock's
/// reader count would); replacing it writes every copy. For state read on every
/// request and replaced rarely (the rules in force, the access lists).
#[derive(Debug)]
pub struct PerWorker<T> {
    slots: Box<[Slot<T>]>,
}

#[derive(Debug)]
#[repr(align(128))]
struct Slot<T>(std::sync::RwLock<T>);

impl<T: Clone> PerWorker<T> {
    /// `value` for `n` worker threads (at least one).
    pub fn new(value: T, n: usize) -> PerWorker<T> {
        PerWorker {
            slots: (0..n.max(1))
                .map(|_| Slot(std::sync::RwLock::new(value.clone())))
                .collect(),
        }
    }

    /// The same value for `n` worker threads.
    pub fn resized(&self, n: usize) -> PerWorker<T> {
        PerWorker::new(self.get(), n)
    }

    /// The value, as seen by the worker thread running this.
    pub fn get(&self) -> T {
        let slot = &self.slots[current_worker() % self.slots.len()];
        slot.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Calls `f` with the value the worker thread running this sees, without
    /// cloning it.
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        let slot = &self.slots[current_worker() % self.slots.len()];
        f(&slot.0.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Replaces the value for every worker.
    pub fn set(&self, value: T) {
        for slot in self.slots.iter() {
            *slot.0.write().unwrap_or_else(|e| e.into_inner()) = value.clone();
        }
    }
}

/// The number of worker threads `server.worker_threads` asks for: `0` means one
/// per CPU this process may run on.
pub fn worker_count(configured: usize) -> usize {
    if configured > 0 {
        return configured;
    }
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// What every worker thread shares with the main thread.
#[derive(Debug, Clone)]
pub struct WorkerContext {
    /// Set when the worker threads are to end (the grace period is over or every
    /// connection has closed).
    pub exit: watch::Receiver<bool>,
    /// Held by every accept loop and connection, so the main thread knows when
    /// all of them have ended.
    pub alive: mpsc::Sender<()>,
    /// With systemd's watchdog on: where the worker's event loop records that it
    /// runs ([`crate::notify::Heartbeats`]); `None`: no heartbeat is kept.
    pub heartbeats: Option<Arc<crate::notify::Heartbeats>>,
}

/// The single-threaded runtime of one worker thread.
pub fn worker_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a worker runtime")
}

/// Body of worker thread `index`: runs its own runtime, on which the main thread
/// starts the accept loops of the listeners ([`crate::listeners`]) and which serves
/// their connections, until `ctx.exit` is set; then the connections still open are
/// closed.
pub fn run_worker(index: usize, rt: tokio::runtime::Runtime, ctx: WorkerContext) {
    WORKER.with(|w| w.set(index));
    rt.block_on(async move {
        let WorkerContext {
            mut exit,
            alive,
            heartbeats,
        } = ctx;
        if let Some(h) = heartbeats {
            // Dropped with the runtime's other tasks when the worker stops.
            tokio::spawn(h.run(index));
        }
        drop(alive);
        // Dropped with the runtime's other tasks when the worker stops.
        tokio::spawn(crate::memory::collect_periodically());
        stopped(&mut exit).await;
    });
    rt.shutdown_timeout(Duration::from_millis(500));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_worker_values_are_replaced_everywhere() {
        let v = PerWorker::new(1u32, 3).resized(4);
        assert_eq!(v.slots.len(), 4);
        v.set(7);
        for w in 0..4 {
            assert_eq!(as_worker(w, || v.get()), 7);
        }
        // A thread that is no worker reads worker 0's copy.
        assert_eq!(v.get(), 7);
    }
}
