//! Issue 36, item 3: which `@rx` patterns of CRS v4 may match a value, answered three
//! ways on the same generated inputs, with their CPU time, build time and memory:
//!
//! - `engine set`: the engine's prefilter set ([`RxSet::from_rxs`] over every distinct
//!   pattern, as the rule set builds it), [`RxSet::which_match`];
//! - `vectorscan`: one block-mode database of the patterns as CRS writes them
//!   (Debian's libvectorscan through the `hyperscan` crate), every id it reports; a
//!   pattern vectorscan refuses is compiled in its prefilter mode (a superset), and
//!   one refused there too is always a candidate;
//! - `literal-anchored`: Aho-Corasick over the literals every match of a pattern
//!   starts with (regex-syntax's prefix extraction, on the engine's translation), and
//!   an anchored search of the pattern's own regex at each occurrence; patterns
//!   without such literals go to an engine set of their own.
//!
//! Each method's candidates are then confirmed with the pattern's own evaluation
//! ([`Rx::matches`], as a rule does after its prefilter says "may match"), through
//! its own compiled copies so no method warms another's caches. The reference
//! answer is every pattern's [`Rx::matches`] on the value: a method that misses a
//! pattern the reference finds is a false negative (reported, and the run fails).
//!
//! Inputs come from a seed (`LIT_SEED`): fresh random printable text (a new value of
//! `LIT_MIB` MiB for each of `LIT_RANDOM_N`), benign-looking text (pseudo-words in
//! sentences, JSON-ish and form-ish pieces; `LIT_BENIGN_N` values), and `LIT_SHORT_N`
//! values of 40 bytes of each of the two. `LIT_ONLY` runs one class (`random`,
//! `benign`, `short-random`, `short-benign`), so that each can run in a fresh
//! process: one class's state in the engine's caches (a spent transition budget)
//! then does not carry into the next. `LIT_CRS` names the CRS folder (default
//! `../shared/crs` beside the repository).

use aho_corasick::AhoCorasick;
use engine::RulesetBuilder;
use engine::internals::operators::Operator;
use engine::internals::operators::rx::{Rx, parse_hir};
use engine::internals::operators::rx_set::RxSet;
use engine::internals::rule::RuleOperator;
use hyperscan::prelude::*;
use regex_automata::{Anchored, Input, PatternSet};
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use rustix::time::{ClockId, clock_gettime};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Shortest literal the literal-anchored scheme anchors on.
const MIN_LITERAL: usize = 3;
/// Most literals one pattern may bring to the literal-anchored scheme.
const MAX_LITERALS: usize = 256;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// This thread's CPU time, in seconds.
fn cpu() -> f64 {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Resident memory, MiB.
fn rss() -> f64 {
    status_kib("VmRSS:") as f64 / 1024.0
}

/// Peak resident memory, MiB.
fn peak() -> f64 {
    status_kib("VmHWM:") as f64 / 1024.0
}

/// Returns the C heap's free memory to the system, so that the resident memory shows
/// what a built database keeps rather than what its compiler left free.
#[allow(unsafe_code)]
fn trim() {
    // SAFETY: malloc_trim takes no pointer and only releases free heap memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// splitmix64: the inputs are reproducible from the seed, and nothing else.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn random_printable(rng: &mut Rng, len: usize) -> Vec<u8> {
    (0..len).map(|_| b' ' + rng.below(95) as u8).collect()
}

/// Pseudo-words from syllables: text that looks like prose or field names.
fn vocabulary(rng: &mut Rng, n: usize) -> Vec<String> {
    const C: &[u8] = b"bcdfghjklmnprstvwz";
    const V: &[u8] = b"aeiou";
    (0..n)
        .map(|_| {
            let syllables = 1 + rng.below(4);
            let mut w = String::new();
            for _ in 0..syllables {
                w.push(C[rng.below(C.len())] as char);
                w.push(V[rng.below(V.len())] as char);
                if rng.below(4) == 0 {
                    w.push(C[rng.below(C.len())] as char);
                }
            }
            w
        })
        .collect()
}

fn benign(rng: &mut Rng, words: &[String], len: usize) -> Vec<u8> {
    let mut out = String::with_capacity(len + 256);
    let word = |rng: &mut Rng| words[rng.below(words.len())].as_str();
    while out.len() < len {
        match rng.below(3) {
            0 => {
                let n = 5 + rng.below(11);
                for i in 0..n {
                    let w = word(rng);
                    if i == 0 {
                        let mut c = w.chars();
                        if let Some(f) = c.next() {
                            out.push(f.to_ascii_uppercase());
                            out.push_str(c.as_str());
                        }
                    } else {
                        out.push(' ');
                        out.push_str(w);
                    }
                }
                out.push_str(if rng.below(5) == 0 { ", " } else { ". " });
            }
            1 => {
                out.push('{');
                let n = 1 + rng.below(5);
                for i in 0..n {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push('"');
                    out.push_str(word(rng));
                    out.push_str("\": ");
                    match rng.below(3) {
                        0 => out.push_str(&rng.below(100_000).to_string()),
                        1 => {
                            out.push('"');
                            out.push_str(word(rng));
                            out.push(' ');
                            out.push_str(word(rng));
                            out.push('"');
                        }
                        _ => {
                            out.push('[');
                            out.push_str(&rng.below(100).to_string());
                            out.push_str(", ");
                            out.push_str(&rng.below(100).to_string());
                            out.push(']');
                        }
                    }
                }
                out.push_str("} ");
            }
            _ => {
                let n = 1 + rng.below(6);
                for _ in 0..n {
                    out.push_str(word(rng));
                    out.push('=');
                    if rng.below(2) == 0 {
                        out.push_str(word(rng));
                        out.push('+');
                        out.push_str(word(rng));
                    } else {
                        out.push_str(&rng.below(1_000_000).to_string());
                    }
                    out.push('&');
                }
            }
        }
    }
    out.truncate(len);
    out.into_bytes()
}

/// One distinct `@rx` pattern of the rule set: as written, and as the engine
/// compiled it.
struct Pattern {
    pcre: String,
    rx: Rx,
}

fn load(crs: &Path) -> Result<Vec<Pattern>, String> {
    let mut b = RulesetBuilder::new(Arc::new(seclang::FsSource));
    for f in [crs.join("crs-setup.conf.example"), crs.join("rules/*.conf")] {
        b.add_file(&f)
            .map_err(|e| format!("{}: {e}", f.display()))?;
    }
    let rs = b.build().map_err(|e| format!("build: {e}"))?;
    let mut seen = HashMap::new();
    let mut out = Vec::new();
    for phase in 1..=5 {
        for rule in rs.rules(phase) {
            for link in rule.links() {
                if let RuleOperator::Static(op) = &link.operator
                    && let Operator::Rx(rx) = op.as_ref()
                    && seen.insert(rx.pattern().to_string(), ()).is_none()
                {
                    out.push(Pattern {
                        pcre: link.operator_text.1.clone(),
                        rx: rx.clone(),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// How a method answers "which patterns may match this value".
enum Method {
    Engine(RxSet),
    Vectorscan {
        db: BlockDatabase,
        scratch: Scratch,
        /// The database's id of each of its patterns -> the pattern.
        ids: Vec<usize>,
        /// Patterns vectorscan refused in both modes: always candidates.
        refused: Vec<usize>,
        /// Patterns compiled exactly: their answer needs no confirmation (see the
        /// "trusted" column).
        exact: Vec<bool>,
    },
    Anchored {
        ac: AhoCorasick,
        /// Literal -> the patterns it starts.
        owners: Vec<Vec<usize>>,
        regexes: Vec<regex_automata::meta::Regex>,
        rest: Option<RxSet>,
        /// The rest set's pattern -> the pattern.
        rest_ids: Vec<usize>,
    },
}

impl Method {
    /// Whether the method's answer for pattern `p` is exact (needs no confirmation).
    fn trusted(&self, p: usize) -> bool {
        match self {
            Method::Vectorscan { exact, .. } => exact[p],
            _ => false,
        }
    }

    fn candidates(&self, v: &[u8], out: &mut [bool]) {
        match self {
            Method::Engine(set) => {
                let mut hits = PatternSet::new(set.len());
                set.which_match(v, &mut hits);
                for p in hits.iter() {
                    out[p.as_usize()] = true;
                }
            }
            Method::Vectorscan {
                db,
                scratch,
                ids,
                refused,
                ..
            } => {
                db.scan(v, scratch, |id: u32, _: u64, _: u64, _: u32| {
                    out[ids[id as usize]] = true;
                    Matching::Continue
                })
                .expect("vectorscan scan");
                for &p in refused {
                    out[p] = true;
                }
            }
            Method::Anchored {
                ac,
                owners,
                regexes,
                rest,
                rest_ids,
            } => {
                for m in ac.find_overlapping_iter(v) {
                    for &p in &owners[m.pattern().as_usize()] {
                        if !out[p] {
                            let input = Input::new(v).range(m.start()..).anchored(Anchored::Yes);
                            if regexes[p].is_match(input) {
                                out[p] = true;
                            }
                        }
                    }
                }
                if let Some(set) = rest {
                    let mut hits = PatternSet::new(set.len());
                    set.which_match(v, &mut hits);
                    for p in hits.iter() {
                        out[rest_ids[p.as_usize()]] = true;
                    }
                }
            }
        }
    }
}

fn build_vectorscan(patterns: &[Pattern]) -> (Method, String) {
    let base = CompileFlags::DOTALL
        | CompileFlags::MULTILINE
        | CompileFlags::SINGLEMATCH
        | CompileFlags::ALLOWEMPTY;
    let mut exact = 0;
    let mut exact_flags = vec![false; patterns.len()];
    let mut prefilter = Vec::new();
    let mut refused = Vec::new();
    let mut reasons: HashMap<String, usize> = HashMap::new();
    let mut chosen = Vec::new();
    let mut ids = Vec::new();
    for (i, p) in patterns.iter().enumerate() {
        let mut try_flags = |flags: CompileFlags| {
            let mut pat = hyperscan::Pattern::with_flags(p.pcre.clone(), flags).ok()?;
            match pat.build::<hyperscan::BlockMode>() {
                Ok(_) => {
                    pat.id = Some(ids.len());
                    Some(pat)
                }
                Err(e) => {
                    if !flags.contains(CompileFlags::PREFILTER) {
                        let reason = e.to_string();
                        let reason = reason
                            .split(" at index")
                            .next()
                            .unwrap_or(&reason)
                            .to_string();
                        *reasons.entry(reason).or_default() += 1;
                    }
                    None
                }
            }
        };
        if let Some(pat) = try_flags(base) {
            exact += 1;
            exact_flags[i] = true;
            ids.push(i);
            chosen.push(pat);
        } else if let Some(pat) = try_flags(base | CompileFlags::PREFILTER) {
            prefilter.push(i);
            ids.push(i);
            chosen.push(pat);
        } else {
            refused.push(i);
        }
    }
    let mut reasons: Vec<_> = reasons.into_iter().collect();
    reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
    let mut note = format!(
        "vectorscan {}: {} patterns compiled exactly, {} only in prefilter mode, {} refused in both\n",
        hyperscan::version_str().to_string_lossy(),
        exact,
        prefilter.len(),
        refused.len()
    );
    for (r, n) in &reasons {
        note.push_str(&format!("  refused (exact mode) x{n}: {r}\n"));
    }
    for &i in prefilter.iter().chain(&refused) {
        let p = &patterns[i].pcre;
        let cut = p.char_indices().nth(70).map_or(p.len(), |(at, _)| at);
        note.push_str(&format!(
            "  {} pattern {i} ({} bytes): {}...\n",
            if refused.contains(&i) {
                "refused"
            } else {
                "prefilter-only"
            },
            p.len(),
            &p[..cut]
        ));
    }
    let rss0 = rss();
    let t = Instant::now();
    let db: BlockDatabase = hyperscan::Patterns(chosen)
        .build()
        .expect("the accepted patterns compile together");
    let scratch = db.alloc_scratch().expect("scratch");
    let build_s = t.elapsed().as_secs_f64();
    let built = rss();
    trim();
    note.push_str(&format!(
        "vectorscan build {:.2} s; database {:.2} MiB, scratch {:.1} KiB; RSS {:.1} MiB before, {:.1} MiB after the build, {:.1} MiB once the C heap is trimmed\n",
        build_s,
        db.size().unwrap_or(0) as f64 / 1048576.0,
        scratch.size().unwrap_or(0) as f64 / 1024.0,
        rss0,
        built,
        rss()
    ));
    (
        Method::Vectorscan {
            db,
            scratch,
            ids,
            refused,
            exact: exact_flags,
        },
        note,
    )
}

fn build_anchored(patterns: &[Pattern]) -> Result<(Method, String), String> {
    let rss0 = rss();
    let t = Instant::now();
    let mut literals: Vec<Vec<u8>> = Vec::new();
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut owners: Vec<Vec<usize>> = Vec::new();
    let mut rest = Vec::new();
    let mut rest_ids = Vec::new();
    let mut ex = Extractor::new();
    ex.kind(ExtractKind::Prefix);
    for (i, p) in patterns.iter().enumerate() {
        let hir = parse_hir(p.rx.pattern()).map_err(|e| e.to_string())?;
        let mut seq = ex.extract(&hir);
        seq.dedup();
        let usable = seq.literals().filter(|lits| {
            !lits.is_empty()
                && lits.len() <= MAX_LITERALS
                && lits.iter().all(|l| l.as_bytes().len() >= MIN_LITERAL)
        });
        match usable {
            Some(lits) => {
                for l in lits {
                    let at = *index.entry(l.as_bytes().to_vec()).or_insert_with(|| {
                        literals.push(l.as_bytes().to_vec());
                        owners.push(Vec::new());
                        literals.len() - 1
                    });
                    if !owners[at].contains(&i) {
                        owners[at].push(i);
                    }
                }
            }
            None => {
                rest.push(p.rx.clone());
                rest_ids.push(i);
            }
        }
    }
    let mut suffix_ex = Extractor::new();
    suffix_ex.kind(ExtractKind::Suffix);
    let with_suffix = rest_ids
        .iter()
        .filter(|&&i| {
            parse_hir(patterns[i].rx.pattern())
                .ok()
                .and_then(|h| {
                    let seq = suffix_ex.extract(&h);
                    seq.literals().map(|l| {
                        !l.is_empty()
                            && l.len() <= MAX_LITERALS
                            && l.iter().all(|x| x.as_bytes().len() >= MIN_LITERAL)
                    })
                })
                .unwrap_or(false)
        })
        .count();
    let ac = AhoCorasick::new(&literals).map_err(|e| e.to_string())?;
    let rest_set = if rest.is_empty() {
        None
    } else {
        Some(RxSet::from_rxs(&rest).map_err(|e| e.to_string())?)
    };
    let note = format!(
        "literal-anchored: {} patterns anchored on {} literals, {} in the rest set ({} of which would have suffix literals); build {:.2} s, RSS +{:.1} MiB, Aho-Corasick {:.2} MiB\n",
        patterns.len() - rest.len(),
        literals.len(),
        rest.len(),
        with_suffix,
        t.elapsed().as_secs_f64(),
        rss() - rss0,
        ac.memory_usage() as f64 / 1048576.0
    );
    Ok((
        Method::Anchored {
            ac,
            owners,
            regexes: patterns.iter().map(|p| p.rx.regex().clone()).collect(),
            rest: rest_set,
            rest_ids,
        },
        note,
    ))
}

#[derive(Default, Clone)]
struct Tally {
    values: usize,
    bytes: usize,
    candidates_s: f64,
    confirm_s: f64,
    /// Of `confirm_s`, the time spent on patterns whose answer was exact.
    confirm_trusted_s: f64,
    /// Patterns reported by an exact answer that the reference does not find.
    trusted_wrong: usize,
    false_neg: usize,
    false_pos: usize,
    true_pos: usize,
}

fn main() -> Result<(), String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let crs = std::env::var("LIT_CRS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo.join("../shared/crs"));
    let seed = env_num("LIT_SEED", 36);
    let mib = env_num("LIT_MIB", 1) as usize;
    let n_random = env_num("LIT_RANDOM_N", 4) as usize;
    let n_benign = env_num("LIT_BENIGN_N", 4) as usize;
    let n_short = env_num("LIT_SHORT_N", 20_000) as usize;

    let rss_start = rss();
    let t = Instant::now();
    let patterns = load(&crs)?;
    println!(
        "CRS v4 from {}: {} distinct @rx patterns, loaded in {:.2} s, RSS {:.1} MiB",
        crs.display(),
        patterns.len(),
        t.elapsed().as_secs_f64(),
        rss()
    );
    let _ = rss_start;

    // Each method's own compiled copies for the confirmation, and the reference's.
    let copies = |patterns: &[Pattern]| -> Result<Vec<Rx>, String> {
        patterns
            .iter()
            .map(|p| Rx::new(&p.pcre).map_err(|e| e.to_string()))
            .collect()
    };
    let reference = copies(&patterns)?;

    let mut methods: Vec<(&str, Method, Vec<Rx>)> = Vec::new();
    let rss0 = rss();
    let t = Instant::now();
    let rxs: Vec<Rx> = patterns.iter().map(|p| p.rx.clone()).collect();
    let set = RxSet::from_rxs(&rxs).map_err(|e| e.to_string())?;
    println!(
        "engine set: build {:.2} s, RSS +{:.1} MiB",
        t.elapsed().as_secs_f64(),
        rss() - rss0
    );
    methods.push(("engine set", Method::Engine(set), copies(&patterns)?));
    let (vs, note) = build_vectorscan(&patterns);
    print!("{note}");
    methods.push(("vectorscan", vs, copies(&patterns)?));
    let (an, note) = build_anchored(&patterns)?;
    print!("{note}");
    methods.push(("literal-anchored", an, copies(&patterns)?));
    println!("RSS after every build: {:.1} MiB", rss());

    let mut rng = Rng(seed);
    let words = vocabulary(&mut rng, 3000);
    let len = mib << 20;
    type Gen<'a> = Box<dyn FnMut(&mut Rng) -> Vec<u8> + 'a>;
    let classes: Vec<(&str, usize, Gen)> = vec![
        (
            "random",
            n_random,
            Box::new(move |rng: &mut Rng| random_printable(rng, len)),
        ),
        (
            "benign",
            n_benign,
            Box::new(|rng: &mut Rng| benign(rng, &words, len)),
        ),
        (
            "short-random",
            n_short,
            Box::new(|rng: &mut Rng| random_printable(rng, 40)),
        ),
        (
            "short-benign",
            n_short,
            Box::new(|rng: &mut Rng| benign(rng, &words, 40)),
        ),
    ];

    let n = patterns.len();
    let mut failed = false;
    println!();
    println!(
        "| input | method | candidates ms/MiB | + confirm ms/MiB | total ms/MiB | µs/value | total, exact answers trusted, ms/MiB | false neg. | false pos./value | exact but wrong | RSS after, MiB |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let only = std::env::var("LIT_ONLY").unwrap_or_default();
    for (name, count, mut gen_value) in classes {
        if !only.is_empty() && name != only {
            continue;
        }
        let mut tallies = vec![Tally::default(); methods.len()];
        let mut reference_s = 0.0;
        let mut rss_after = vec![0.0; methods.len()];
        for _ in 0..count {
            let v = gen_value(&mut rng);
            let t0 = cpu();
            let truth: Vec<bool> = reference.iter().map(|r| r.matches(&v, None)).collect();
            reference_s += cpu() - t0;
            for (k, (_, m, own)) in methods.iter().enumerate() {
                let tally = &mut tallies[k];
                let mut out = vec![false; n];
                let t0 = cpu();
                m.candidates(&v, &mut out);
                let t1 = cpu();
                let mut trusted_s = 0.0;
                for (p, &c) in out.iter().enumerate() {
                    if c {
                        let trusted = m.trusted(p);
                        let ta = if trusted { cpu() } else { 0.0 };
                        let _ = own[p].matches(&v, None);
                        if trusted {
                            trusted_s += cpu() - ta;
                        }
                    }
                }
                let t2 = cpu();
                tally.confirm_trusted_s += trusted_s;
                tally.values += 1;
                tally.bytes += v.len();
                tally.candidates_s += t1 - t0;
                tally.confirm_s += t2 - t1;
                for p in 0..n {
                    match (truth[p], out[p]) {
                        (true, false) => {
                            tally.false_neg += 1;
                            if tally.false_neg <= 3 {
                                eprintln!(
                                    "false negative: {} misses pattern {p} ({}) on {name}",
                                    methods[k].0, patterns[p].pcre
                                );
                            }
                        }
                        (false, true) => {
                            tally.false_pos += 1;
                            if m.trusted(p) {
                                tally.trusted_wrong += 1;
                            }
                        }
                        (true, true) => tally.true_pos += 1,
                        _ => {}
                    }
                }
                rss_after[k] = rss();
            }
        }
        let mib_in = |t: &Tally| t.bytes as f64 / 1048576.0;
        for (k, (method, _, _)) in methods.iter().enumerate() {
            let t = &tallies[k];
            let m = mib_in(t).max(1e-12);
            failed |= t.false_neg > 0;
            println!(
                "| {name} | {method} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.2} | {} | {:.1} |",
                t.candidates_s * 1e3 / m,
                t.confirm_s * 1e3 / m,
                (t.candidates_s + t.confirm_s) * 1e3 / m,
                (t.candidates_s + t.confirm_s) * 1e6 / t.values.max(1) as f64,
                (t.candidates_s + t.confirm_s - t.confirm_trusted_s) * 1e3 / m,
                t.false_neg,
                t.false_pos as f64 / t.values.max(1) as f64,
                t.trusted_wrong,
                rss_after[k],
            );
        }
        let t = &tallies[0];
        println!(
            "| {name} | every pattern's own regex (reference) | | | {:.1} | {:.1} | | | {:.2} true/value | | |",
            reference_s * 1e3 / mib_in(t).max(1e-12),
            reference_s * 1e6 / t.values.max(1) as f64,
            t.true_pos as f64 / t.values.max(1) as f64,
        );
    }
    println!();
    println!("peak RSS {:.1} MiB", peak());
    if failed {
        return Err("a method missed a pattern the reference found".into());
    }
    Ok(())
}
