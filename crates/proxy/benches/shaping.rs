//! The cost of shaping one piece of a response body (`[[shape]]`): taking its
//! bytes from the key's bucket, from 1,000 to 1,000,000 distinct clients, on one
//! thread and on two (the class's shards are the only shared state).
//!
//! Each client has one response (its pacer made once, as the proxy does per
//! response); pieces of 16 KiB are reserved cycling through the clients in a
//! shuffled order. The class's rate (1 GB/s per key, a 1 MiB burst) keeps every
//! bucket within its burst, so the measure is the bookkeeping, never a wait.
//! Reported: ns per piece, that cost against 1,000 clients (target: flat), and
//! against copying the piece once (the least a proxy does with those bytes), all
//! in the same run.
//!
//! Run: `cargo bench -p proxy --bench shaping [-- --smoke] [--clients N]`
//! (`--clients N`: only that many clients, for instance to count instructions per
//! piece under callgrind with `--toggle-collect='*reserve_at*'`).

use proxy::config::{RateLimitKey, ShapeSection};
use proxy::shaping::{PIECE, Pacer, Shaper};
use std::sync::Arc;
use std::time::Instant;

fn class(max_keys: usize) -> Arc<Shaper> {
    Arc::new(
        Shaper::new(&ShapeSection {
            name: "bench".into(),
            key: RateLimitKey::One("client_ip".into()),
            rate: "1GB/s".into(),
            burst: "1MiB".into(),
            when: None,
            equals: None,
            path_prefix: None,
            max_keys,
        })
        .expect("class"),
    )
}

/// One pacer per client (addresses as text from a fixed seed), in shuffled order.
fn pacers(c: &Arc<Shaper>, n: usize, seed: u64) -> Vec<Pacer> {
    let mut s = seed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut v: Vec<Pacer> = (0..n)
        .map(|i| {
            let x = (i as u32).wrapping_mul(2_654_435_761) ^ (next() as u32 & 0xff00_0000);
            Shaper::pacer(c, std::net::Ipv4Addr::from(x).to_string().as_bytes())
        })
        .collect();
    for i in (1..v.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// ns per piece over `pieces` pieces cycling through `pacers`, on `threads`
/// threads (each its own share of the clients).
fn run(pacers: &[Pacer], pieces: usize, threads: usize) -> f64 {
    let t = Instant::now();
    std::thread::scope(|sc| {
        for part in pacers.chunks(pacers.len().div_ceil(threads)) {
            sc.spawn(move || {
                let mut waited = 0u128;
                for i in 0..pieces / threads {
                    waited += part[i % part.len()].reserve(PIECE).as_nanos();
                }
                std::hint::black_box(waited);
            });
        }
    });
    t.elapsed().as_nanos() as f64 / pieces as f64
}

/// ns to copy one piece, as a yardstick taken in the same run.
fn copy_ns(rounds: usize) -> f64 {
    let src = vec![7u8; PIECE];
    let mut dst = vec![0u8; PIECE];
    let t = Instant::now();
    for i in 0..rounds {
        dst.copy_from_slice(std::hint::black_box(&src));
        dst[i % PIECE] ^= 1;
        std::hint::black_box(&dst);
    }
    t.elapsed().as_nanos() as f64 / rounds as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let smoke = args.iter().any(|a| a == "--smoke");
    let only: Option<usize> = args
        .iter()
        .position(|a| a == "--clients")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok());
    let sizes: Vec<usize> = match only {
        Some(n) => vec![n],
        None if smoke => vec![1_000, 100_000],
        None => vec![1_000, 10_000, 100_000, 1_000_000],
    };
    let pieces = if smoke { 400_000 } else { 4_000_000 };
    let copy = copy_ns(pieces / 10);
    println!(
        "| distinct clients | ns per 16 KiB piece, 1 thread | against 1,000 clients | against copying the piece ({copy:.0} ns) | pieces/s, 2 threads / 1 thread |"
    );
    println!("|---:|---:|---:|---:|---:|");
    let mut base = None;
    let mut worst_flat: f64 = 0.0;
    for &n in &sizes {
        let c = class(n.max(1_000) * 2);
        let ps = pacers(&c, n, 0x5eed_0000_0000_0002 ^ n as u64);
        // Warm: every key has its bucket once.
        run(&ps, n, 1);
        let one = run(&ps, pieces, 1);
        let c2 = class(n.max(1_000) * 2);
        let ps2 = pacers(&c2, n, 0x5eed_0000_0000_0002 ^ n as u64);
        run(&ps2, n, 2);
        let two = run(&ps2, pieces, 2);
        let flat = one / *base.get_or_insert(one);
        worst_flat = worst_flat.max(flat);
        println!(
            "| {n} | {one:.0} | {flat:.2}x | {:.2}x | {:.2}x |",
            one / copy,
            one / two
        );
        assert!(c.keys() <= n.max(1_000) * 2);
    }
    println!(
        "shaping: the per-piece cost at most {worst_flat:.2}x its cost at 1,000 clients (flat: near 1x)"
    );
}
