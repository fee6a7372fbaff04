//! The cost of a `[[rate_limit]]` check per request, from 1,000 to 1,000,000
//! distinct clients, on one thread and on two (the limiter's shards are the only
//! shared state: two threads on different keys should not wait on each other).
//!
//! Keys are client addresses as text, drawn from a fixed seed, cycled in a shuffled
//! order; the limit (1000/s, burst 100) lets almost every request through, so the
//! measure is the bookkeeping. Reported: ns per check, and that cost as a share of
//! the proxy's own per-request CPU cost without rules (taken as an argument,
//! `--proxy-us US`, default 40 µs: about 25,000 requests per CPU-second, BENCHMARKS.md
//! row (b)). Target (traffic-control issue): at most 2%, flat across key counts;
//! two threads at least 1.8x one.
//!
//! Run: `cargo bench -p proxy --bench rate_limit [-- --smoke] [--proxy-us 40]`.

use proxy::config::{RateLimitKey, RateLimitSection};
use proxy::ratelimit::RateLimiter;
use std::time::Instant;

fn limiter(max_keys: usize) -> RateLimiter {
    RateLimiter::new(&RateLimitSection {
        name: "bench".into(),
        key: RateLimitKey::One("client_ip".into()),
        rate: "1000/s".into(),
        burst: 100,
        status: 429,
        path_prefix: None,
        max_keys,
    })
    .expect("limiter")
}

fn keys(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut s = seed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut v: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let x = (i as u32).wrapping_mul(2_654_435_761) ^ (next() as u32 & 0xff00_0000);
            std::net::Ipv4Addr::from(x).to_string().into_bytes()
        })
        .collect();
    // Fisher-Yates with the same generator: a shuffled order.
    for i in (1..v.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// ns per check over `checks` checks cycling through `keys`, on `threads` threads
/// (each its own half of the keys).
fn run(l: &RateLimiter, keys: &[Vec<u8>], checks: usize, threads: usize) -> f64 {
    let t = Instant::now();
    std::thread::scope(|sc| {
        for part in keys.chunks(keys.len().div_ceil(threads)) {
            sc.spawn(move || {
                let mut passed = 0usize;
                for i in 0..checks / threads {
                    let k = &part[i % part.len()];
                    passed += usize::from(matches!(
                        l.check(k, Instant::now()),
                        proxy::ratelimit::Verdict::Pass
                    ));
                }
                std::hint::black_box(passed);
            });
        }
    });
    t.elapsed().as_nanos() as f64 / checks as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let smoke = args.iter().any(|a| a == "--smoke");
    let proxy_us: f64 = args
        .iter()
        .position(|a| a == "--proxy-us")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(40.0);
    let sizes: &[usize] = if smoke {
        &[1_000, 100_000]
    } else {
        &[1_000, 10_000, 100_000, 1_000_000]
    };
    let checks = if smoke { 400_000 } else { 4_000_000 };
    println!(
        "| distinct clients | ns per check, 1 thread | share of the proxy's {proxy_us} us | checks/s, 2 threads / 1 thread |"
    );
    println!("|---:|---:|---:|---:|");
    let mut worst_share: f64 = 0.0;
    let mut worst_scaling = f64::MAX;
    for &n in sizes {
        let ks = keys(n, 0x5eed_0000_0000_0001 ^ n as u64);
        let l = limiter(n.max(1_000) * 2);
        // Warm: every key tracked once.
        run(&l, &ks, n, 1);
        let one = run(&l, &ks, checks, 1);
        let l2 = limiter(n.max(1_000) * 2);
        run(&l2, &ks, n, 2);
        let two = run(&l2, &ks, checks, 2);
        let share = one / (proxy_us * 1000.0);
        let scaling = one / two;
        worst_share = worst_share.max(share);
        worst_scaling = worst_scaling.min(scaling);
        println!("| {n} | {one:.0} | {:.2}% | {scaling:.2}x |", share * 100.0);
    }
    println!(
        "rate limit: at most {:.2}% of the proxy's per-request cost (target <= 2%), 2 threads at least {worst_scaling:.2}x one (target >= 1.8x; the machine's other load counts)",
        worst_share * 100.0
    );
}
