//! Store benchmark: the request path's reads and writes, with and without an outside
//! writer, on 1 and 2 threads. Each "request" reads three records (two IP keys and
//! GLOBAL) through the reader and submits one increment with `expirevar`, as
//! `initcol` + `setvar:ip.hits=+1,expirevar:ip.hits=60` would. The outside writer is
//! a second store handle on the same directory (its own writer thread, competing for
//! LMDB's write lock) applying at least 5,000 updates per second.
//!
//! Prints absolute figures and, to compare configurations, ratios within this run.
//! `cargo bench -p store --bench store` (STORE_BENCH_SECS sets each phase's length).

use engine::CollectionKind;
use engine::collections::{RecordKey, VarOp, WriteLog};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use store::{Store, StoreConfig, unix_now};

fn ip(i: u64) -> RecordKey {
    RecordKey::new(
        "default",
        CollectionKind::Ip,
        format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255).into_bytes(),
    )
    .unwrap()
}

fn hit(at: i64) -> engine::collections::RecordWrite {
    let mut log = WriteLog::default();
    log.push(b"hits", VarOp::Add(1));
    log.push(b"hits", VarOp::ExpireAt(at + 60));
    log.finish(at, 3600)
}

struct Phase {
    requests: u64,
    secs: f64,
    p50_ns: u64,
    p99_ns: u64,
    store_ns: u64,
    total_ns: u64,
    outside_updates: u64,
}

fn run(store: &Store, threads: usize, outside: Option<&Store>, write: bool, secs: f64) -> Phase {
    let reader = store.reader();
    let global = RecordKey::new("default", CollectionKind::Global, b"global".to_vec()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let outside_handle = outside.map(|o| {
        let o = o.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            // 60 updates every 10 ms: 6,000 per second.
            let mut n = 0u64;
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let at = unix_now();
                let writes = (0..60).map(|i| (ip((n + i) % 20_000), hit(at))).collect();
                o.submit(writes);
                n += 60;
                next += Duration::from_millis(10);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            n
        })
    });
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let reader = reader.clone();
            let store = store.clone();
            let global = global.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut lat = Vec::with_capacity(1 << 20);
                let mut store_ns = 0u64;
                let mut i = t as u64 * 7919;
                while !stop.load(Ordering::Relaxed) {
                    let t0 = Instant::now();
                    let a = ip(i % 20_000);
                    let b = ip((i * 31) % 20_000);
                    let r1 = reader.read(&a).unwrap();
                    let r2 = reader.read(&b).unwrap();
                    let r3 = reader.read(&global).unwrap();
                    std::hint::black_box((r1, r2, r3));
                    let t1 = Instant::now();
                    // Stand-in for rule evaluation (about 20 µs of work).
                    let mut x = i;
                    for _ in 0..20_000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                    let t2 = Instant::now();
                    if write {
                        store.submit(vec![
                            (a, hit(unix_now())),
                            (global.clone(), hit(unix_now())),
                        ]);
                    }
                    let t3 = Instant::now();
                    store_ns += ((t1 - t0) + (t3 - t2)).as_nanos() as u64;
                    lat.push((t3 - t0).as_nanos() as u64);
                    i += 1;
                }
                (lat, store_ns)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let mut lat = Vec::new();
    let mut store_ns = 0;
    for h in handles {
        let (l, s) = h.join().unwrap();
        lat.extend(l);
        store_ns += s;
    }
    let outside_updates = outside_handle.map_or(0, |h| h.join().unwrap());
    let elapsed = start.elapsed().as_secs_f64();
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    Phase {
        requests: lat.len() as u64,
        secs: elapsed,
        p50_ns: pct(0.50),
        p99_ns: pct(0.99),
        store_ns,
        total_ns: lat.iter().sum(),
        outside_updates,
    }
}

fn main() {
    let secs: f64 = std::env::var("STORE_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        path: dir.path().to_path_buf(),
        map_size: 1 << 30,
        batch_interval: StoreConfig::DEFAULT_BATCH_INTERVAL,
        sweep_interval: StoreConfig::DEFAULT_SWEEP_INTERVAL,
        host_id: "bench".into(),
    };
    let store = Store::open(&cfg).unwrap();
    let outside = Store::open(&StoreConfig {
        host_id: "outside".into(),
        ..cfg.clone()
    })
    .unwrap();
    // 20,000 IP records to start with.
    let at = unix_now();
    for chunk in (0..20_000u64).collect::<Vec<_>>().chunks(1000) {
        store.submit(chunk.iter().map(|i| (ip(*i), hit(at))).collect());
    }
    store.flush().unwrap();

    println!("store bench: {secs} s per phase, 3 reads + 2 record writes per request");
    println!(
        "{:<28} {:>10} {:>10} {:>9} {:>9} {:>8} {:>10}",
        "phase", "req", "req/s", "p50 µs", "p99 µs", "store %", "outside/s"
    );
    let mut results = Vec::new();
    let reads_only = run(&store, 1, None, false, secs / 2.0);
    let s0 = store.stats();
    println!(
        "reads only, 1 thread: mean read {:.2} µs",
        s0.read_nanos as f64 / s0.reads.max(1) as f64 / 1000.0
    );
    let _ = reads_only;
    for (name, threads, with_outside) in [
        ("1 thread", 1, false),
        ("2 threads", 2, false),
        ("1 thread + outside writer", 1, true),
        ("2 threads + outside writer", 2, true),
    ] {
        let before = store.stats();
        let p = run(
            &store,
            threads,
            with_outside.then_some(&outside),
            true,
            secs,
        );
        store.flush().unwrap();
        let after = store.stats();
        println!(
            "{:<28} {:>10} {:>10.0} {:>9.1} {:>9.1} {:>7.2}% {:>10.0}   batches {} mean batch {:.1} writes",
            name,
            p.requests,
            p.requests as f64 / p.secs,
            p.p50_ns as f64 / 1000.0,
            p.p99_ns as f64 / 1000.0,
            100.0 * p.store_ns as f64 / p.total_ns.max(1) as f64,
            p.outside_updates as f64 / p.secs,
            after.batches - before.batches,
            (after.writes_committed - before.writes_committed) as f64
                / (after.batches - before.batches).max(1) as f64,
        );
        results.push(p);
    }
    let s = store.stats();
    let reads_per_s = |p: &Phase| 3.0 * p.requests as f64 / p.secs;
    println!();
    println!(
        "reads/s: {:.0} (1 thread), {:.0} (2 threads); mean read {:.2} µs over {} reads (all phases)",
        reads_per_s(&results[0]),
        reads_per_s(&results[1]),
        (s.read_nanos - s0.read_nanos) as f64 / (s.reads - s0.reads).max(1) as f64 / 1000.0,
        s.reads - s0.reads
    );
    println!(
        "ratios: throughput 2/1 threads {:.2}; p99 with/without outside writer {:.2} (1 thread), {:.2} (2 threads)",
        (results[1].requests as f64 / results[1].secs)
            / (results[0].requests as f64 / results[0].secs),
        results[2].p99_ns as f64 / results[0].p99_ns as f64,
        results[3].p99_ns as f64 / results[1].p99_ns as f64,
    );
    println!(
        "write lock waits on the request path: {}; writes dropped (queue full): {}; largest batch {}; outside store batches {} (mean {:.1} writes)",
        s.write_lock_waits_on_request_path,
        s.writes_dropped_queue_full,
        s.max_batch,
        outside.stats().batches,
        outside.stats().writes_committed as f64 / outside.stats().batches.max(1) as f64
    );
}
