//! IP sets at scale: `@ipMatchFromFile` (and the proxy's `[access]` lists, which use
//! the same sets) with 1.6 million IPv4 and IPv6 networks.
//!
//! The list is generated from a fixed seed (a mix of single addresses and networks of
//! every prefix length, IPv4 and IPv6) into a temporary file, then:
//! - load: the operator compiled from the file (read, parse, sort, merge), wall time;
//! - memory: the process's resident set before and after the load, and the set's own
//!   size;
//! - lookup: random addresses, as the engine gets REMOTE_ADDR (text, parsed per
//!   lookup) and as a connection's verdict is asked (a parsed address), in ns.
//!
//! Run: `cargo bench -p engine --bench ip_sets [-- --smoke]` (`--smoke`: 50,000
//! networks). Targets (the traffic-control issue): load at most 2 s, lookup at most
//! 1 µs.

mod common;

use common::Rng;
use engine::internals::operators::ip::IpSetBuilder;
use engine::internals::operators::{CompileContext, Operator};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// One list line: 3 in 4 IPv4 (half single addresses, half networks /16 to /31), the
/// rest IPv6 (single addresses and networks /16 to /127).
fn entry(rng: &mut Rng, out: &mut String) {
    use std::fmt::Write as _;
    let r = rng.next();
    if !r.is_multiple_of(4) {
        let a = Ipv4Addr::from(rng.next() as u32);
        if r % 8 < 4 {
            let _ = writeln!(out, "{a}");
        } else {
            let _ = writeln!(out, "{a}/{}", 16 + (r >> 8) % 16);
        }
    } else {
        let a = Ipv6Addr::from(u128::from(rng.next()) << 64 | u128::from(rng.next()));
        if r.is_multiple_of(8) {
            let _ = writeln!(out, "{a}");
        } else {
            let _ = writeln!(out, "{a}/{}", 16 + (r >> 8) % 112);
        }
    }
}

fn main() {
    let smoke = std::env::args().any(|a| a == "--smoke");
    let n: usize = if smoke { 50_000 } else { 1_600_000 };
    let dir = std::env::temp_dir().join(format!("palisade-ipsets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("networks.txt");
    let mut rng = Rng(0x5eed_1b5e_7000_0001);
    let mut text = String::with_capacity(n * 24);
    for _ in 0..n {
        entry(&mut rng, &mut text);
    }
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .expect("write the list");
    let file_bytes = text.len();
    drop(text);

    let rss0 = rss_kib();
    let source = seclang::FsSource;
    let ctx = CompileContext {
        source: &source,
        base_dir: &dir,
    };
    let t = Instant::now();
    let op = Operator::compile("ipMatchFromFile", "networks.txt", &ctx).expect("load");
    let load = t.elapsed();
    let rss1 = rss_kib();

    // The same list as a connection-verdict set, to time lookups on parsed addresses.
    let content = std::fs::read(&path).expect("read");
    let mut b = IpSetBuilder::default();
    b.add_list(&content, "networks.txt").expect("parse");
    let set = b.build();
    drop(content);

    let lookups = if smoke { 200_000 } else { 2_000_000 };
    let mut addrs_text = Vec::with_capacity(lookups);
    let mut addrs = Vec::with_capacity(lookups);
    for i in 0..lookups {
        let ip = if i % 4 != 0 {
            IpAddr::V4(Ipv4Addr::from(rng.next() as u32))
        } else {
            IpAddr::V6(Ipv6Addr::from(
                u128::from(rng.next()) << 64 | u128::from(rng.next()),
            ))
        };
        addrs_text.push(ip.to_string());
        addrs.push(ip);
    }
    let t = Instant::now();
    let mut hits = 0usize;
    for a in &addrs_text {
        hits += usize::from(op.matches(a.as_bytes(), None));
    }
    let per_text = t.elapsed().as_nanos() as f64 / lookups as f64;
    let t = Instant::now();
    let mut hits2 = 0usize;
    for a in &addrs {
        hits2 += usize::from(set.contains_ip(*a));
    }
    let per_addr = t.elapsed().as_nanos() as f64 / lookups as f64;
    assert_eq!(hits, hits2, "the two paths disagree");
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "| networks | list file | load s | RSS growth MiB | set MiB | lookup ns (text, as @ipMatch) | lookup ns (address, per connection) | hits |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {n} | {:.1} MiB | {:.2} | {:.1} | {:.1} | {per_text:.0} | {per_addr:.0} | {hits} of {lookups} |",
        file_bytes as f64 / 1048576.0,
        load.as_secs_f64(),
        rss1.saturating_sub(rss0) as f64 / 1024.0,
        set.heap_bytes() as f64 / 1048576.0,
    );
    let worst = per_text.max(per_addr);
    println!(
        "ip sets: load {:.2} s (target <= 2 s: {}), lookup at most {worst:.0} ns (target <= 1000 ns: {})",
        load.as_secs_f64(),
        if load.as_secs_f64() <= 2.0 {
            "met"
        } else {
            "not met"
        },
        if worst <= 1000.0 { "met" } else { "not met" }
    );
}
