//! The suffix set at the scale of a large public block list, from generated data:
//! load time, resident memory, heap size and lookup time for 1.6 million domains.
//!
//! `cargo bench -p domains` (or `-- N` for another number of domains). The domains are
//! generated from a fixed seed: 2-4 labels (mostly a registrable name under a TLD, some
//! with one or two subdomain labels), label lengths 2-20 skewed towards 6-12, letters
//! with some digits and hyphens, 24 TLDs weighted towards `com`, some two-label public
//! suffixes (`co.uk`), 1% `*.` entries, a comment line every 1000, all names distinct.

#![allow(missing_docs)]

use std::hash::{Hash, Hasher};
use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

use domains::{SuffixSet, normalize_host};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn label(&mut self) -> String {
        const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
        const OTHER: &[u8] = b"0123456789-";
        // Lengths 2..=20, most between 6 and 12 (sum of two uniforms).
        let len = (1 + self.below(10) + self.below(10)).max(2) as usize;
        let mut s = String::with_capacity(len);
        for i in 0..len {
            let c = if i > 0 && i + 1 < len && self.below(12) == 0 {
                OTHER[self.below(OTHER.len() as u64) as usize]
            } else {
                LETTERS[self.below(26) as usize]
            };
            s.push(c as char);
        }
        s.replace("--", "-a")
    }
}

const TLDS: &[(&str, u64)] = &[
    ("com", 40),
    ("net", 8),
    ("org", 6),
    ("de", 5),
    ("ru", 5),
    ("co.uk", 4),
    ("info", 3),
    ("io", 3),
    ("fr", 3),
    ("nl", 2),
    ("br", 2),
    ("com.br", 2),
    ("jp", 2),
    ("it", 2),
    ("pl", 2),
    ("xyz", 2),
    ("top", 2),
    ("cn", 2),
    ("in", 1),
    ("es", 1),
    ("au", 1),
    ("com.au", 1),
    ("online", 1),
    ("xn--p1ai", 1),
];

fn gen_domain(rng: &mut Rng, total_weight: u64) -> String {
    let mut pick = rng.below(total_weight);
    let mut tld = TLDS[0].0;
    for &(t, w) in TLDS {
        if pick < w {
            tld = t;
            break;
        }
        pick -= w;
    }
    let extra = match rng.below(100) {
        0..=69 => 0,
        70..=94 => 1,
        _ => 2,
    };
    let mut name = format!("{}.{tld}", rng.label());
    for _ in 0..extra {
        name = format!("{}.{name}", rng.label());
    }
    name
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_600_000);
    let total_weight: u64 = TLDS.iter().map(|t| t.1).sum();
    let mut rng = Rng(0x5eed_d0a1);
    let path = std::env::temp_dir().join(format!("domains-bench-{}.txt", std::process::id()));
    let mut listed = Vec::with_capacity(20_000);
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
        // Distinct names only (by a 64-bit hash; the table is freed before measuring,
        // and as one large allocation it goes back to the system).
        let mut seen = std::collections::HashSet::with_capacity(n);
        for i in 0..n {
            if i % 1000 == 0 {
                writeln!(out, "# block {i}").expect("write");
            }
            let d = loop {
                let d = gen_domain(&mut rng, total_weight);
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                d.hash(&mut hasher);
                if seen.insert(hasher.finish()) {
                    break d;
                }
            };
            if i % 100 == 0 {
                writeln!(out, "*.{d}").expect("write");
            } else {
                writeln!(out, "{d}").expect("write");
                if i % 80 == 1 {
                    listed.push(d);
                }
            }
        }
    }
    let file_len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!("list: {n} domains, {:.1} MiB file", mib(file_len));

    let rss0 = rss_bytes();
    let t = Instant::now();
    let set = SuffixSet::load_file(&path, 1).expect("load");
    let load = t.elapsed();
    let rss1 = rss_bytes();
    let _ = std::fs::remove_file(&path);
    println!(
        "load: {:.3} s for {} distinct names ({:.0} ns/line)",
        load.as_secs_f64(),
        set.len(),
        load.as_nanos() as f64 / n as f64
    );
    println!(
        "memory: heap {:.1} MiB (computed), resident delta {:.1} MiB",
        mib(set.heap_bytes() as u64),
        mib(rss1.saturating_sub(rss0))
    );

    // Queries: a third subdomains of listed names (hits via a parent), a third listed
    // names themselves, a third generated names (almost all misses).
    let mut queries = Vec::with_capacity(300_000);
    for i in 0..300_000usize {
        let q = match i % 3 {
            0 => format!("{}.{}", rng.label(), listed[i % listed.len()]),
            1 => listed[i % listed.len()].clone(),
            _ => gen_domain(&mut rng, total_weight),
        };
        queries.push(q);
    }
    // Shuffle so consecutive queries touch unrelated slots.
    for i in (1..queries.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        queries.swap(i, j);
    }
    // Several rounds; the machine is shared, so the fastest round is the best estimate
    // of the cost itself, the median of what it costs under the load at the time.
    let rounds = 7;
    let mut hits = 0usize;
    let mut per_round = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        for q in &queries {
            hits += usize::from(set.lookup_name(black_box(q)).is_some());
        }
        per_round.push(t.elapsed().as_nanos() as f64 / queries.len() as f64);
    }
    per_round.sort_by(f64::total_cmp);
    println!(
        "lookup_name: {:.0} ns/lookup fastest round, {:.0} median, {:.0} slowest ({} rounds of {} lookups, {:.1}% hits)",
        per_round[0],
        per_round[rounds / 2],
        per_round[rounds - 1],
        rounds,
        queries.len(),
        100.0 * hits as f64 / (rounds * queries.len()) as f64
    );

    let raw: Vec<String> = queries
        .iter()
        .take(100_000)
        .enumerate()
        .map(|(i, q)| match i % 4 {
            0 => q.to_uppercase(),
            1 => format!("{q}.:443"),
            _ => q.clone(),
        })
        .collect();
    let mut hits = 0usize;
    let t = Instant::now();
    for q in &raw {
        if let Ok(h) = normalize_host(black_box(q)) {
            hits += usize::from(set.lookup(&h).is_some());
        }
    }
    let per = t.elapsed().as_nanos() as f64 / raw.len() as f64;
    println!(
        "normalize_host + lookup: {per:.0} ns per raw Host value ({} hits of {})",
        hits,
        raw.len()
    );

    // Sanity: a listed name matches.
    assert!(set.lookup_name(&listed[0]).is_some());
}
