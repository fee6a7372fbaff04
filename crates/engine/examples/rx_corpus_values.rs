//! Lists every static `@rx` pattern of one or more rule sets as the engine parsed them,
//! with generated values to try each one on: the first half of the PCRE2 verdict
//! corpus (`bench/pcre2/corpus.py` runs it, then asks PCRE2 for the verdicts and
//! writes `crates/engine/tests/data/pcre2-verdicts.jsonl.gz`).
//!
//! Run: `cargo run -p engine --example rx_corpus_values -- [--values=N]
//! [--compat-values=M] [--seed=S] LABEL=FILE...`. Each `LABEL=FILE` is a rule set: FILE (a path or glob, as `Include`
//! takes it; several files of one set are given as several `LABEL=FILE` with the same
//! label, in load order) is loaded with the engine's loader, and every rule and chain
//! link whose operator is `@rx` or `!@rx` with an argument free of macros is listed
//! under `LABEL:ID` (a chain link under its chain's id). Patterns are deduplicated.
//!
//! Output: one JSON object per line, `{"ids": [...], "pattern": "...", "values":
//! ["hex", ...]}`, the pattern exactly as the loader hands it to `Operator::compile`
//! (SecLang quoting undone).
//!
//! Values (N per pattern, 48 by default, and M, 8 N by default, for the patterns the
//! engine evaluates with `rxlinear::compat` because of their lookarounds, possessive
//! quantifiers or backreferences; from a fixed seed mixed with the pattern's
//! hash, so that a pattern's values do not depend on the other patterns): random
//! walks of the translated pattern's syntax tree (its literals, classes, repetitions
//! and alternatives, so that many match), walks inside random context, mutations of
//! walks (a byte deleted, replaced or inserted, a cut, a case flip, a newline), two
//! walks joined, and random printable and binary strings (so that many do not). The
//! generator reads the engine's translation only to find strings worth trying; the
//! verdicts come from PCRE2.

use engine::RulesetBuilder;
use engine::internals::operators::{CompileContext, Operator};
use engine::internals::rule::{Rule, RuleOperator};
use regex_syntax::hir::{Class, Hir, HirKind};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

/// xorshift64*: small, fixed and enough to spread the choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn printable(&mut self) -> u8 {
        b' ' + self.below(95) as u8
    }
}

/// FNV-1a, to mix the pattern into the seed.
fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Longest value the walks build (a cut keeps the pattern's start).
const MAX_LEN: usize = 400;

/// Appends one random string of the language of `h` (or a prefix of one, past
/// [`MAX_LEN`]). Assertions produce nothing.
fn walk(h: &Hir, rng: &mut Rng, out: &mut Vec<u8>) {
    if out.len() > MAX_LEN {
        return;
    }
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(l) => out.extend_from_slice(&l.0),
        HirKind::Class(Class::Bytes(c)) => {
            let ranges = c.ranges();
            if !ranges.is_empty() {
                let r = ranges[rng.below(ranges.len())];
                let span = usize::from(r.end() - r.start()) + 1;
                out.push(r.start() + rng.below(span) as u8);
            }
        }
        HirKind::Class(Class::Unicode(c)) => {
            let ranges = c.ranges();
            if !ranges.is_empty() {
                let r = ranges[rng.below(ranges.len())];
                let span = (r.end() as u32 - r.start() as u32) as usize + 1;
                let ch = char::from_u32(r.start() as u32 + rng.below(span.min(256)) as u32)
                    .unwrap_or('a');
                let mut buf = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            }
        }
        HirKind::Repetition(r) => {
            let min = r.min as usize;
            let extra = match r.max {
                Some(max) => (max as usize - min).min(3),
                None => 3,
            };
            // Mostly few repetitions, sometimes the most allowed here.
            let n = min + rng.below(extra + 1);
            for _ in 0..n {
                walk(&r.sub, rng, out);
                if out.len() > MAX_LEN {
                    break;
                }
            }
        }
        HirKind::Capture(c) => walk(&c.sub, rng, out),
        HirKind::Concat(v) => {
            for h in v {
                walk(h, rng, out);
            }
        }
        HirKind::Alternation(v) => walk(&v[rng.below(v.len())], rng, out),
    }
}

fn random_bytes(rng: &mut Rng, printable: bool) -> Vec<u8> {
    let len = rng.below(41);
    (0..len)
        .map(|_| {
            if printable {
                rng.printable()
            } else {
                rng.next() as u8
            }
        })
        .collect()
}

/// One mutation of `v`.
fn mutate(v: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut v = v.to_vec();
    let at = |rng: &mut Rng, len: usize| rng.below(len.max(1));
    match rng.below(9) {
        0 if !v.is_empty() => {
            let i = at(rng, v.len());
            v.remove(i);
        }
        1 if !v.is_empty() => {
            let i = at(rng, v.len());
            v[i] = rng.printable();
        }
        2 => {
            let i = rng.below(v.len() + 1);
            let b = rng.printable();
            v.insert(i, b);
        }
        3 if !v.is_empty() => {
            let i = at(rng, v.len());
            v.truncate(i);
        }
        4 => {
            if let Some(b) = v.iter_mut().find(|b| b.is_ascii_alphabetic()) {
                *b ^= 0x20;
            }
        }
        5 => v.push(b'\n'),
        6 => v.insert(0, b'\n'),
        7 if !v.is_empty() => {
            let i = at(rng, v.len());
            v.drain(..i);
        }
        _ => {
            let i = rng.below(v.len() + 1);
            let b = rng.next() as u8;
            v.insert(i, b);
        }
    }
    v
}

/// `count` distinct values for `pattern` (fewer when the pattern's language is small).
fn values(hir: &Hir, pattern: &str, seed: u64, count: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed ^ fnv(pattern.as_bytes()) | 1);
    let mut out: Vec<Vec<u8>> = Vec::new();
    let push = |v: Vec<u8>, out: &mut Vec<Vec<u8>>| {
        if !out.contains(&v) {
            out.push(v);
        }
    };
    let walk_one = |rng: &mut Rng| {
        let mut v = Vec::new();
        walk(hir, rng, &mut v);
        v
    };
    // Shares of `count`: 3/8 walks, 3/16 in context, 1/4 mutations, the rest joined
    // walks and random strings.
    let walks = count * 3 / 8;
    let context = count * 3 / 16;
    let mutations = count / 4;
    for _ in 0..walks * 2 {
        if out.len() >= walks {
            break;
        }
        push(walk_one(&mut rng), &mut out);
    }
    for _ in 0..context {
        let w = walk_one(&mut rng);
        let mut v = random_bytes(&mut rng, true);
        v.truncate(8);
        if rng.below(3) == 0 {
            v.push(b'\n');
        }
        v.extend_from_slice(&w);
        if rng.below(3) == 0 {
            v.push(b'\n');
        }
        let mut tail = random_bytes(&mut rng, true);
        tail.truncate(8);
        v.extend_from_slice(&tail);
        push(v, &mut out);
    }
    for _ in 0..mutations {
        let w = walk_one(&mut rng);
        let mut v = mutate(&w, &mut rng);
        if rng.below(3) == 0 {
            v = mutate(&v, &mut rng);
        }
        push(v, &mut out);
    }
    let mut k = 0;
    while out.len() < count && k < count * 4 {
        k += 1;
        let v = match k % 4 {
            0 => {
                let mut v = walk_one(&mut rng);
                v.extend(walk_one(&mut rng));
                v
            }
            1 | 2 => random_bytes(&mut rng, true),
            _ => random_bytes(&mut rng, false),
        };
        push(v, &mut out);
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Every link of a chain, with the chain's id.
fn links<'a>(rule: &'a Rule, out: &mut Vec<(i64, &'a Rule)>) {
    let id = rule.chain_id.or(rule.id).unwrap_or(0);
    let mut link = Some(rule);
    while let Some(r) = link {
        out.push((id, r));
        link = r.chain.as_deref();
    }
}

fn main() {
    let mut count = 48;
    let mut compat_count = None;
    let mut seed: u64 = 0x5EC1_A7C0_DE5E_ED01;
    let mut sets: Vec<(String, Vec<String>)> = Vec::new();
    for arg in std::env::args().skip(1) {
        if let Some(v) = arg.strip_prefix("--values=") {
            count = v.parse().expect("--values=N");
        } else if let Some(v) = arg.strip_prefix("--compat-values=") {
            compat_count = Some(v.parse().expect("--compat-values=M"));
        } else if let Some(v) = arg.strip_prefix("--seed=") {
            seed = v.parse().expect("--seed=S");
        } else if let Some((label, file)) = arg.split_once('=') {
            match sets.iter_mut().find(|(l, _)| l == label) {
                Some((_, files)) => files.push(file.to_string()),
                None => sets.push((label.to_string(), vec![file.to_string()])),
            }
        } else {
            panic!("unexpected argument {arg:?} (want LABEL=FILE)");
        }
    }
    let source = seclang::MemorySource::new();
    let ctx = CompileContext {
        source: &source,
        base_dir: Path::new("."),
    };
    // Pattern -> ids, in first-seen order.
    let mut order: Vec<String> = Vec::new();
    let mut ids: HashMap<String, Vec<String>> = HashMap::new();
    for (label, files) in &sets {
        let mut b = RulesetBuilder::new(Arc::new(seclang::FsSource));
        for f in files {
            b.add_file(Path::new(f))
                .unwrap_or_else(|e| panic!("{label}: {f}: {e}"));
        }
        let rs = b.build().unwrap_or_else(|e| panic!("{label}: {e}"));
        let mut all = Vec::new();
        for phase in 1..=5 {
            for rule in rs.rules(phase) {
                links(rule, &mut all);
            }
        }
        let mut n = 0;
        for (id, rule) in all {
            let (name, arg) = &rule.operator_text;
            let name = name.trim_start_matches('!').trim_start_matches('@');
            if !name.eq_ignore_ascii_case("rx") || !matches!(rule.operator, RuleOperator::Static(_))
            {
                continue;
            }
            n += 1;
            let entry = ids.entry(arg.clone()).or_insert_with(|| {
                order.push(arg.clone());
                Vec::new()
            });
            let tag = format!("{label}:{id}");
            if !entry.contains(&tag) {
                entry.push(tag);
            }
        }
        eprintln!("{label}: {n} @rx operators");
    }
    eprintln!("{} distinct patterns", order.len());
    let compat_count = compat_count.unwrap_or(count * 8);
    let mut compat = 0;
    for pattern in &order {
        let op =
            Operator::compile("rx", pattern, &ctx).unwrap_or_else(|e| panic!("{pattern}: {e}"));
        let Operator::Rx(rx) = &op else {
            unreachable!("@rx compiles to Operator::Rx")
        };
        let hir = regex_syntax::ParserBuilder::new()
            .unicode(false)
            .utf8(false)
            .dot_matches_new_line(true)
            .multi_line(true)
            .build()
            .parse(rx.pattern())
            .expect("the engine's translation parses");
        let n = if rx.regex_is_exact() {
            count
        } else {
            compat += 1;
            compat_count
        };
        let vals: Vec<String> = values(&hir, pattern, seed, n)
            .iter()
            .map(|v| hex(v))
            .collect();
        let line = serde_json::json!({
            "ids": ids[pattern],
            "pattern": pattern,
            "values": vals,
        });
        println!("{line}");
    }
    eprintln!("{compat} patterns evaluated with rx_compat ({compat_count} values each)");
}
