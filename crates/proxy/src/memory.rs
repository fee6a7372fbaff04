//! Handing memory the allocator no longer uses back to the system.
//!
//! `palisade` allocates with mimalloc (see `main.rs`). mimalloc gives back the
//! pages a thread freed only after a delay (10 ms by default), and only when that
//! same thread calls into the allocator again: a thread that goes idle right after
//! freeing much keeps those pages resident for as long as it stays idle. That is
//! the main thread once the rule set is compiled (the compiler's temporaries, about
//! 9 MiB with CRS v4: see bench/PROFILE.md, "Proxy memory under load"), and a worker
//! or an inspection thread once a burst of large requests is over. [`collect`]
//! gives them back at once; the proxy calls it on the main thread after every rule
//! load, and on every worker and inspection thread once per [`INTERVAL`].
//!
//! Under the `system-allocator` feature (heap profiling) mimalloc is not the global
//! allocator and [`collect`] only visits mimalloc's own empty heap.

use std::time::Duration;

/// How often each worker and inspection thread gives back the memory it freed. A
/// forced collection walks the thread's allocator pages once and returns what is
/// free with `madvise`; it runs between requests, never inside one.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// Gives back to the system the memory the calling thread's allocator heap holds
/// free, and the free parts of the process's allocator arenas, without waiting for
/// mimalloc's purge delay.
pub fn collect() {
    #[allow(unsafe_code)]
    // SAFETY: `mi_collect` takes no pointer and touches no caller memory: it walks
    // the calling thread's own mimalloc heap and the process's arenas under
    // mimalloc's own synchronisation, and mimalloc documents it as callable at any
    // time from any thread (an uninitialised heap returns at once).
    unsafe {
        libmimalloc_sys::mi_collect(true)
    }
}

/// Runs [`collect`] on the calling thread every [`INTERVAL`] until the task is
/// dropped (spawned on each worker runtime).
pub async fn collect_periodically() {
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collect_keeps_live_memory_intact() {
        let live: Vec<Vec<u8>> = (0..64u8).map(|i| vec![i; 100_000]).collect();
        drop((0..64).map(|_| vec![0u8; 100_000]).collect::<Vec<_>>());
        collect();
        collect();
        for (i, v) in live.iter().enumerate() {
            assert!(v.iter().all(|&b| usize::from(b) == i));
        }
    }
}
