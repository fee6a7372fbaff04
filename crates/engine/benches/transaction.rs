//! Engine microbenchmarks: CPU time and allocations per transaction for CRS v4 and
//! Debian's CRS 3.3.4 over the fixed corpus of `bench/corpus/` and over a sample of the
//! varying corpus of `bench/gen_varying.py` (no network).
//!
//! The varying rows (`varying-get`, `varying-form`, `varying-multipart`,
//! `varying-json`) take the first `PALISADE_BENCH_VARYING_N` (default 200) distinct
//! requests of that kind and run them in turn, so a figure is the average over those
//! requests, not the cost of one request repeated.
//!
//! Two shapes per request: `request` runs phases 1, 2 and 5 (what a blocked or
//! request-only inspection costs); `full` adds phases 3 and 4 with a small HTML
//! response. Attacks stop at phase 2 with a 403, so their `full` equals `request`.
//!
//! Run: `cargo bench -p engine --bench transaction` (pin it with `taskset -c 0`).
//! Allocations come from divan's counting allocator (`alloc:` rows in the output).
//!
//! Two more modes, chosen by environment variables:
//! - `PALISADE_BENCH_LOOP=v4:get:10` loops one transaction for 10 s after a warm-up
//!   run: a target for `perf record` or `valgrind --tool=callgrind
//!   --collect-atstart=no --toggle-collect=transaction::looped` (`v4:varying-get:10`
//!   loops over the varying sample of that kind instead, after one warm-up pass);
//! - `PALISADE_BENCH_VARYING=check` runs every request of the varying corpus through
//!   CRS v4 and CRS 3.3.4 and prints how many were blocked or scored and by which rules;
//!   it exits 1 when a rule set blocks one (the corpus is benign by construction), and
//!   names the costliest requests;
//! - `PALISADE_BENCH_BREAKDOWN=1` prints what each CRS v4 rule file costs on its own;
//! - `PALISADE_BENCH_MEM=1` prints the resident memory CRS v4 takes, loaded and after
//!   traffic (the fixed requests, then the varying sample) and its peak;
//! - `PALISADE_BENCH_CPU=SECONDS` prints CPU time per transaction (the thread's own CPU
//!   clock, which a busy machine does not inflate), SECONDS per row;
//! - `PALISADE_BENCH_SITES=SECONDS` prints CPU time per transaction of CRS v4 for the
//!   plain rule set and for sites over it ([`engine::Policy`]): one with a few
//!   exclusions, ones that seed a paranoia level (with fold tables of their own),
//!   against the rule set they run over or CRS built at their level, and CRS v4
//!   whose shared prefilter also reaches level 2
//!   (`RulesetBuilder::reach_paranoia_levels`), SECONDS per row;
//! - `PALISADE_BENCH_PLAN=SECONDS` prints CPU time per transaction of CRS v4 and
//!   CRS 3.3.4 walked by the compiled plan (the engine's walk) and by the
//!   interpreter it replaced (kept as the test oracle), alternating in 5 rounds of
//!   SECONDS/5 each, medians and their ratio;
//! - `PALISADE_BENCH_BUDGET=SECONDS` prints what metering the CPU budget costs: each
//!   request without a meter, with the thread CPU clock and with a wall clock as the
//!   meter (a budget that is never reached), as ratios.

mod common;

use common::{CORPUS, RawRequest, Response};
use divan::{AllocProfiler, Bencher};
use engine::Ruleset;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

static V4: LazyLock<Arc<Ruleset>> = LazyLock::new(|| {
    let (rs, secs) = common::crs_v4_with(&common::base_text())
        .unwrap_or_else(|e| panic!("CRS v4 does not load: {e}"));
    eprintln!(
        "CRS v4 loaded in {:.0} ms: {} rules",
        secs * 1e3,
        rs.rule_count()
    );
    rs
});

static V3: LazyLock<Option<Arc<Ruleset>>> =
    LazyLock::new(|| match common::crs_v3_with(&common::base_text()) {
        Ok((rs, secs)) => {
            eprintln!(
                "CRS 3.3.4 loaded in {:.0} ms: {} rules",
                secs * 1e3,
                rs.rule_count()
            );
            Some(rs)
        }
        Err(e) => {
            eprintln!("CRS 3.3.4 benchmarks skipped: the rule set does not load: {e}");
            None
        }
    });

static REQUESTS: LazyLock<HashMap<&'static str, RawRequest>> =
    LazyLock::new(|| CORPUS.iter().map(|&n| (n, common::corpus(n))).collect());

static RESPONSE: LazyLock<Response> = LazyLock::new(common::small_response);

/// How many distinct requests of each kind the varying rows run.
fn varying_n() -> usize {
    std::env::var("PALISADE_BENCH_VARYING_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(200)
}

/// The varying sample, keyed by kind (`get`, `form`, `multipart`, `json`).
static VARYING: LazyLock<HashMap<&'static str, Vec<RawRequest>>> =
    LazyLock::new(|| common::varying_sample(&common::varying(), varying_n()));

/// The varying rows' names, as divan arguments and in the CPU table.
const VARYING_ROWS: &[&str] = &[
    "varying-get",
    "varying-form",
    "varying-multipart",
    "varying-json",
];

/// The sample behind a varying row name (`varying-get` -> the `get` sample).
fn varying_rows(name: &str) -> &'static [RawRequest] {
    let kind = name.strip_prefix("varying-").unwrap_or(name);
    VARYING
        .get(kind)
        .map(Vec::as_slice)
        .unwrap_or_else(|| panic!("the varying corpus has no request of kind {kind}"))
}

/// With `PALISADE_BENCH_VARYING=check`: every request of the varying corpus through
/// each rule set (phases 1-5 with the small response). Prints per kind how many were
/// blocked and how many had a non-zero anomaly score, and which rules matched how
/// often. Returns false when a rule set blocked a request.
fn varying_check() -> bool {
    let all = common::varying();
    let mut sets: Vec<(&str, Arc<Ruleset>)> = vec![("CRS v4", V4.clone())];
    if let Some(rs) = V3.as_ref() {
        sets.push(("CRS 3.3.4", rs.clone()));
    }
    let mut clean = true;
    for (label, rs) in &sets {
        let mut per_kind: Vec<(&str, usize, usize, usize)> = common::VARYING_KINDS
            .iter()
            .map(|&k| (k, 0, 0, 0))
            .collect();
        let mut rules: HashMap<i64, usize> = HashMap::new();
        let mut costs: Vec<(u64, &str, &str)> = Vec::with_capacity(all.len());
        for (kind, req) in &all {
            let c0 = common::thread_cpu_ns();
            let (i, tx) = common::run_tx(rs, req, Some(&RESPONSE));
            if let (Some(a), Some(b)) = (c0, common::thread_cpu_ns()) {
                costs.push((b - a, &req.name, kind));
            }
            let row = per_kind
                .iter_mut()
                .find(|r| r.0 == *kind)
                .expect("a known kind");
            row.1 += 1;
            let mut ids = tx.matched_rule_ids();
            ids.sort_unstable();
            ids.dedup();
            if let Some(i) = &i {
                row.2 += 1;
                let why: Vec<String> = tx
                    .matches()
                    .iter()
                    .filter_map(|m| Some(format!("{}: {}", m.rule_id?, m.data.as_deref()?)))
                    .collect();
                eprintln!(
                    "{label}: {} ({kind}) blocked with {} by {:?}; rules {ids:?}; {}",
                    req.name,
                    i.status,
                    i.rule_id,
                    why.join("; ")
                );
            }
            if tx.anomaly_scores().0 != 0 {
                row.3 += 1;
            }
            for id in ids {
                *rules.entry(id).or_default() += 1;
            }
        }
        let blocked: usize = per_kind.iter().map(|r| r.2).sum();
        let scored: usize = per_kind.iter().map(|r| r.3).sum();
        for (kind, n, b, sc) in &per_kind {
            println!("varying check: {label}: {kind}: {n} requests, {b} blocked, {sc} scored");
        }
        let mut rules: Vec<_> = rules.into_iter().collect();
        rules.sort_unstable();
        println!(
            "varying check: {label}: {} requests, {blocked} blocked, {scored} with a non-zero \
             anomaly score; rules that matched (id: requests): {}",
            all.len(),
            if rules.is_empty() {
                "none".to_string()
            } else {
                rules
                    .iter()
                    .map(|(id, n)| format!("{id}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
        // The costliest requests of this first pass (the very first ones also pay for
        // building regex states that later requests reuse).
        costs.sort_unstable_by(|a, b| b.cmp(a));
        println!(
            "varying check: {label}: costliest requests (CPU ms, first pass): {}",
            costs
                .iter()
                .take(8)
                .map(|(ns, name, kind)| format!("{name} ({kind}) {:.1}", *ns as f64 / 1e6))
                .collect::<Vec<_>>()
                .join(", ")
        );
        clean &= blocked == 0;
    }
    clean
}

/// Prints what each corpus request does under a rule set, so a run shows that benign
/// requests pass and attacks are blocked (a benchmark of the wrong path is worthless).
fn check(label: &str, rs: &Arc<Ruleset>) {
    for &name in CORPUS {
        let (i, tx) = common::run_tx(rs, &REQUESTS[name], Some(&RESPONSE));
        let verdict = match &i {
            Some(i) => format!("{} by {:?}", i.status, i.rule_id),
            None => "pass".to_string(),
        };
        let expect_block = name.starts_with("attack-");
        let ok = i.as_ref().map(|i| i.status == 403).unwrap_or(false) == expect_block;
        eprintln!(
            "{label} {name:<17} {verdict:<14} score {:>3} rules {:?}{}",
            tx.anomaly_scores().0,
            tx.matched_rule_ids(),
            if ok { "" } else { "   <-- UNEXPECTED" }
        );
    }
}

/// With `PALISADE_BENCH_LOOP=RULESET:REQUEST:SECONDS` (RULESET `v4` or `v3`, e.g.
/// `v4:get:10`), runs that one transaction in a loop for that long and exits: the
/// target for `perf record` or `valgrind --tool=callgrind`, with load time a small
/// part of the profile. `REQUEST` may end in `+html` (phases 3 and 4 too, with the
/// 1 KiB HTML response), and may also be `varying-get` (and `-form`,
/// `-multipart`, `-json`): a sample of the varying corpus, in turn. The loop's
/// transactions go through [`looped`], after one warm-up pass that does not:
/// `--toggle-collect=transaction::looped` counts warm transactions only (divide by the
/// count printed at the end).
fn profile_loop(spec: &str) {
    let mut parts = spec.split(':');
    let set = parts.next().unwrap_or("v4");
    let name = parts.next().unwrap_or("get");
    // `get+html`: phases 3 and 4 as well, with the 1 KiB HTML response.
    let (name, response) = match name.strip_suffix("+html") {
        Some(n) => (n, Some(&*RESPONSE)),
        None => (name, None),
    };
    let secs: f64 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let rs = match set {
        "v3" => V3
            .clone()
            .unwrap_or_else(|| panic!("CRS 3.3.4 does not load")),
        _ => V4.clone(),
    };
    let reqs: &[RawRequest] = if name.starts_with("varying-") {
        varying_rows(name)
    } else {
        std::slice::from_ref(
            REQUESTS
                .get(name)
                .unwrap_or_else(|| panic!("no corpus request {name}")),
        )
    };
    // One warm-up pass, so that the loop measures the steady state (the lazily built
    // regex states the requests need exist), as it does for one repeated request.
    for req in reqs {
        std::hint::black_box(common::run(&rs, req, response));
    }
    let start = std::time::Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        looped(&rs, &reqs[n as usize % reqs.len()], response);
        n += 1;
    }
    let el = start.elapsed().as_secs_f64();
    eprintln!(
        "{set} {name}: {n} transactions in {el:.2} s, {:.1} us each",
        el * 1e6 / n as f64
    );
}

/// One transaction of the profile loop, apart from the warm-up: the function to give
/// callgrind's `--toggle-collect` (`transaction::looped`).
#[inline(never)]
fn looped(rs: &Arc<Ruleset>, req: &RawRequest, response: Option<&common::Response>) {
    std::hint::black_box(common::run(rs, req, response));
}

/// CPU time of `req` (phases 1, 2, 5) under `rs`, in microseconds per transaction.
fn median_us(rs: &Arc<Ruleset>, req: &RawRequest, budget: std::time::Duration) -> f64 {
    common::cpu_per_call(
        || {
            std::hint::black_box(common::run(rs, req, None));
        },
        budget,
        5,
    )
    .0
}

/// With `PALISADE_BENCH_BREAKDOWN=1`: the cost of each CRS v4 rule file on its own.
/// Each file is loaded behind base.conf, crs-setup.conf.example and REQUEST-901
/// (which the other files depend on); the table shows the time of the benign GET and
/// form POST over that baseline.
fn breakdown() {
    let crs = common::shared().join("crs");
    let base = common::base_text();
    let setup = crs.join("crs-setup.conf.example");
    let init = crs.join("rules/REQUEST-901-INITIALIZATION.conf");
    let load = |extra: Option<&std::path::Path>| {
        let mut b = engine::RulesetBuilder::new(Arc::new(seclang::FsSource));
        b.add_text(&base, "base.conf").expect("base.conf");
        b.add_file(&setup).expect("crs-setup");
        b.add_file(&init).expect("REQUEST-901");
        if let Some(f) = extra {
            b.add_file(f)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        }
        Arc::new(b.build().expect("build"))
    };
    let budget = std::time::Duration::from_millis(700);
    let names = ["get", "form", "json"];
    for (label, text) in [
        (
            "engine on, no rules",
            "SecRuleEngine On\nSecRequestBodyAccess On\n".to_string(),
        ),
        ("base.conf only", base.clone()),
    ] {
        let mut b = engine::RulesetBuilder::new(Arc::new(seclang::FsSource));
        b.add_text(&text, "inline.conf").expect("settings");
        let rs = Arc::new(b.build().expect("build"));
        let t: Vec<f64> = names
            .iter()
            .map(|n| median_us(&rs, &REQUESTS[n], budget))
            .collect();
        eprintln!(
            "{label}: {} rules; get {:.1} µs, form {:.1} µs, json {:.1} µs",
            rs.rule_count(),
            t[0],
            t[1],
            t[2]
        );
    }
    let baseline = load(None);
    let base_t: Vec<f64> = names
        .iter()
        .map(|n| median_us(&baseline, &REQUESTS[n], budget))
        .collect();
    println!("| CRS v4 file | rules | get µs | form µs | json µs |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| (baseline: base.conf + crs-setup + REQUEST-901) | {} | {:.1} | {:.1} | {:.1} |",
        baseline.rule_count(),
        base_t[0],
        base_t[1],
        base_t[2]
    );
    let mut files: Vec<_> = std::fs::read_dir(crs.join("rules"))
        .expect("CRS v4 rules/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .filter(|p| p != &init)
        .collect();
    files.sort();
    for f in files {
        let rs = load(Some(&f));
        let t: Vec<f64> = names
            .iter()
            .enumerate()
            .map(|(i, n)| median_us(&rs, &REQUESTS[n], budget) - base_t[i])
            .collect();
        println!(
            "| {} | {} | +{:.1} | +{:.1} | +{:.1} |",
            f.file_name().unwrap_or_default().to_string_lossy(),
            rs.rule_count() - baseline.rule_count(),
            t[0],
            t[1],
            t[2]
        );
    }
}

/// With `PALISADE_BENCH_CPU=SECONDS`: CPU time per transaction (the target is
/// CPU time), measured from the thread's own CPU clock so that other processes on a
/// shared machine do not inflate it. Prints a markdown table.
fn cpu_table(secs: f64) {
    let min = std::time::Duration::from_secs_f64(secs);
    let mut sets: Vec<(&str, Arc<Ruleset>)> = vec![("CRS v4", V4.clone())];
    if let Some(rs) = V3.as_ref() {
        sets.push(("CRS 3.3.4", rs.clone()));
    }
    println!("| rule set | request | phases | CPU µs per transaction | wall µs | transactions |");
    println!("|---|---|---|---:|---:|---:|");
    for (label, rs) in &sets {
        for (shape, names) in [
            ("1, 2, 5", CORPUS),
            ("1-5 (1 KiB HTML response)", &["get", "form", "json"][..]),
        ] {
            for &name in names {
                let req = &REQUESTS[name];
                let resp = (shape != "1, 2, 5").then(|| &*RESPONSE);
                let (cpu, wall, n) = common::cpu_per_call(
                    || {
                        std::hint::black_box(common::run(rs, req, resp));
                    },
                    min,
                    20,
                );
                println!("| {label} | {name} | {shape} | {cpu:.1} | {wall:.1} | {n} |");
            }
        }
        // The varying rows: one call runs each request of the sample once, so the
        // figure is the average over the sample's distinct requests.
        for &name in VARYING_ROWS {
            let reqs = varying_rows(name);
            let (cpu, wall, n) = common::cpu_per_call(
                || {
                    for req in reqs {
                        std::hint::black_box(common::run(rs, req, None));
                    }
                },
                min,
                2,
            );
            let k = reqs.len() as f64;
            println!(
                "| {label} | {name} (average of {} distinct) | 1, 2, 5 | {:.1} | {:.1} | {} |",
                reqs.len(),
                cpu / k,
                wall / k,
                n * reqs.len() as u64
            );
        }
    }
}

/// The process's resident set size, in KiB (VmRSS).
fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

/// The process's peak resident set size, in KiB (VmHWM).
fn hwm_kib() -> u64 {
    status_kib("VmHWM:")
}

/// A figure in KiB from /proc/self/status (`key` with its colon), 0 when unknown.
fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// With `PALISADE_BENCH_MEM=1`: resident memory of CRS v4, once loaded and after
/// traffic (the regex engines grow their caches as they meet input).
fn memory() {
    let before = rss_kib();
    let rs = V4.clone();
    let loaded = rss_kib();
    let mib = |k: u64| k as f64 / 1024.0;
    println!(
        "RSS: {:.1} MiB before loading; CRS v4 loaded: +{:.1} MiB",
        mib(before),
        mib(loaded.saturating_sub(before))
    );
    let mut last = loaded;
    for (name, n) in [
        ("get", 1000),
        ("form", 300),
        ("json", 30),
        ("attack-sqli", 300),
        ("attack-xss", 300),
    ] {
        for _ in 0..n {
            std::hint::black_box(common::run(&rs, &REQUESTS[name], Some(&RESPONSE)));
        }
        let now = rss_kib();
        println!(
            "RSS after {n} x {name}: {:.1} MiB (+{:.1} MiB)",
            mib(now),
            mib(now.saturating_sub(last))
        );
        last = now;
    }
    // Then the varying sample, whose distinct values make the lazily built automata
    // grow where the repeated requests above do not. Reading it takes memory of its
    // own (the whole corpus is read, then sampled), counted apart; what that reading
    // frees may be reused by the engine, so the growth below is a lower bound.
    LazyLock::force(&VARYING);
    let now = rss_kib();
    println!(
        "RSS after reading the varying sample (not the engine's): {:.1} MiB (+{:.1} MiB)",
        mib(now),
        mib(now.saturating_sub(last))
    );
    last = now;
    for &name in VARYING_ROWS {
        let reqs = varying_rows(name);
        for req in reqs {
            std::hint::black_box(common::run(&rs, req, Some(&RESPONSE)));
        }
        let now = rss_kib();
        println!(
            "RSS after {} x {name}: {:.1} MiB (+{:.1} MiB)",
            reqs.len(),
            mib(now),
            mib(now.saturating_sub(last))
        );
        last = now;
    }
    println!("peak RSS (VmHWM): {:.1} MiB", mib(hwm_kib()));
}

/// With `PALISADE_BENCH_BUDGET=SECONDS`: the cost of the CPU budget's metering. The
/// three configurations are measured in turn, five rounds each, and the median of the
/// rounds is kept, so that a slow spell of the machine does not favour one of them.
fn budget_table(secs: f64) {
    use engine::{BudgetAction, CpuBudget, CpuMeter};
    let min = std::time::Duration::from_secs_f64(secs / 5.0);
    let text = format!(
        "{}\nSecPalisadeCpuBudget 100000000 Block 503\n",
        common::base_text()
    );
    let rs = common::crs_v4_with(&text)
        .unwrap_or_else(|e| panic!("CRS v4 does not load: {e}"))
        .0;
    assert_eq!(
        rs.config().cpu_budget,
        Some(CpuBudget {
            limit_micros: 100_000_000,
            action: BudgetAction::Block { status: 503 }
        })
    );
    let cpu: Arc<dyn CpuMeter> = Arc::new(common::ThreadCpuMeter);
    let wall: Arc<dyn CpuMeter> = Arc::new(common::WallMeter(std::time::Instant::now()));
    let meters: [(&str, Option<&Arc<dyn CpuMeter>>); 3] = [
        ("none", None),
        ("thread CPU", Some(&cpu)),
        ("wall", Some(&wall)),
    ];
    // The cost of one reading of each meter.
    for (label, m) in &meters[1..] {
        let m = m.expect("a meter");
        let (us, _, n) = common::cpu_per_call(
            || {
                std::hint::black_box(m.now_micros());
            },
            std::time::Duration::from_millis(300),
            1000,
        );
        eprintln!("one {label} reading: {:.0} ns ({n} readings)", us * 1e3);
    }
    println!("| CRS v4 request | no meter µs | thread CPU meter | wall meter | readings |");
    println!("|---|---:|---:|---:|---:|");
    for &name in CORPUS {
        let req = &REQUESTS[name];
        let mut rounds: [Vec<f64>; 3] = Default::default();
        for _ in 0..5 {
            for (i, (_, m)) in meters.iter().enumerate() {
                let (us, _, _) = common::cpu_per_call(
                    || {
                        std::hint::black_box(common::run_metered(&rs, req, None, *m));
                    },
                    min,
                    5,
                );
                rounds[i].push(us);
            }
        }
        let med = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let base = med(&mut rounds[0]);
        let c = med(&mut rounds[1]);
        let w = med(&mut rounds[2]);
        // How often the meter is read in one transaction.
        let counter = Arc::new(CountingMeter::default());
        let counted: Arc<dyn CpuMeter> = counter.clone();
        common::run_metered(&rs, req, None, Some(&counted));
        let reads = counter.0.load(std::sync::atomic::Ordering::Relaxed);
        println!(
            "| {name} | {base:.1} | {:.3}x | {:.3}x | {reads} |",
            c / base,
            w / base
        );
    }
}

/// With `PALISADE_BENCH_PLAN=SECONDS`: the plan against the interpreter, per
/// request (see the module documentation).
fn plan_table(secs: f64) {
    let min = std::time::Duration::from_secs_f64(secs / 5.0);
    let mut sets: Vec<(&str, Arc<Ruleset>)> = vec![("CRS v4", V4.clone())];
    if let Some(rs) = V3.as_ref() {
        sets.push(("CRS 3.3.4", rs.clone()));
    }
    let one = |rs: &Arc<Ruleset>, req: &RawRequest, interpreter: bool| {
        let mut tx = engine::Transaction::new(rs.clone(), engine::TxContext::default());
        if interpreter {
            tx.use_interpreter();
        }
        common::drive(tx, req, None).0
    };
    println!("| rule set | request | plan µs | interpreter µs | interpreter / plan |");
    println!("|---|---|---:|---:|---:|");
    for (label, rs) in &sets {
        let rows: Vec<(String, Vec<&RawRequest>)> = CORPUS
            .iter()
            .map(|&n| (n.to_string(), vec![&REQUESTS[n]]))
            .chain(VARYING_ROWS.iter().map(|&n| {
                let reqs = varying_rows(n);
                (
                    format!("{n} (average of {} distinct)", reqs.len()),
                    reqs.iter().collect(),
                )
            }))
            .collect();
        for (name, reqs) in &rows {
            let mut rounds: [Vec<f64>; 2] = Default::default();
            for _ in 0..5 {
                for (i, interpreter) in [false, true].into_iter().enumerate() {
                    let (us, _, _) = common::cpu_per_call(
                        || {
                            for req in reqs {
                                std::hint::black_box(one(rs, req, interpreter));
                            }
                        },
                        min,
                        3,
                    );
                    rounds[i].push(us / reqs.len() as f64);
                }
            }
            let med = |v: &mut Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let plan = med(&mut rounds[0]);
            let interp = med(&mut rounds[1]);
            println!(
                "| {label} | {name} | {plan:.1} | {interp:.1} | {:.3}x |",
                interp / plan
            );
        }
    }
}

/// A meter that only counts how often it is read.
#[derive(Debug, Default)]
struct CountingMeter(std::sync::atomic::AtomicU64);

impl engine::CpuMeter for CountingMeter {
    fn now_micros(&self) -> u64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        0
    }
}

/// With `PALISADE_BENCH_SITES=SECONDS`: what a site's policy costs per transaction,
/// against the rule set it runs over (CRS v4 at level 1), and a site at paranoia
/// level 2 against CRS v4 built at level 2 (crs-setup's 900000).
fn sites_table(secs: f64) {
    let min = std::time::Duration::from_secs_f64(secs);
    let site_over = |base: &Arc<Ruleset>, name: &str, text: &str, level: Option<u8>| {
        let mut b = engine::PolicyBuilder::new(base, name, Arc::new(seclang::FsSource));
        b.add_text(text, name).expect("site rules");
        if let Some(l) = level {
            b.paranoia_level(l, None).expect("level");
        }
        Arc::new(b.build().expect("site builds"))
    };
    let site = |name: &str, text: &str, level: Option<u8>| site_over(&V4, name, text, level);
    let (v4_wide, _) = common::crs_v4_reaching(&common::base_text(), &[(2, 2)])
        .expect("CRS v4 with the prefilter of level 2");
    let exclusions = "SecRuleRemoveById 920350\nSecRuleUpdateTargetById 942100 \"!ARGS:comment\"\n\
        SecRule REQUEST_FILENAME \"@beginsWith /import/\" \"id:30001,phase:1,pass,nolog,ctl:ruleRemoveById=942430\"";
    let (v4_pl2, _) = common::crs_v4_with(&format!(
        "{}\nSecAction \"id:900000,phase:1,pass,t:none,nolog,setvar:tx.blocking_paranoia_level=2\"\n",
        common::base_text()
    ))
    .expect("CRS v4 at level 2");
    // (label, the site or none, the rule set it runs over, the row it is compared to)
    type Row<'a> = (
        &'a str,
        Option<Arc<engine::Policy>>,
        &'a Arc<Ruleset>,
        usize,
    );
    let rows: Vec<Row<'_>> = vec![
        ("CRS v4 (level 1)", None, &V4, 0),
        (
            "site, nothing of its own",
            Some(site("empty", "", None)),
            &V4,
            0,
        ),
        (
            "site, 3 exclusions",
            Some(site("excl", exclusions, None)),
            &V4,
            0,
        ),
        (
            "site, paranoia level 1",
            Some(site("pl1", "", Some(1))),
            &V4,
            0,
        ),
        ("CRS v4 built at level 2", None, &v4_pl2, 4),
        (
            "site, paranoia level 2",
            Some(site("pl2", "", Some(2))),
            &V4,
            4,
        ),
        (
            "site, paranoia level 2, over CRS v4 whose prefilter reaches level 2",
            Some(site_over(&v4_wide, "pl2w", "", Some(2))),
            &v4_wide,
            4,
        ),
        (
            "CRS v4 (level 1), its prefilter reaching level 2",
            None,
            &v4_wide,
            0,
        ),
    ];
    println!(
        "| policy | folds | request | CPU µs per transaction | ratio to CRS v4 at the same level |"
    );
    println!("|---|---|---|---:|---:|");
    // On a shared machine other work inflates some runs: the rows are measured in
    // turn, seven rounds of SECONDS/7 each, and each row's fastest round is kept.
    let rounds = 7;
    for name in ["get", "form", "json"] {
        let req = &REQUESTS[name];
        let mut best = vec![f64::INFINITY; rows.len()];
        for _ in 0..rounds {
            for (k, (_, p, rs, _)) in rows.iter().enumerate() {
                let (cpu, _, _) = common::cpu_per_call(
                    || match p {
                        Some(p) => {
                            std::hint::black_box(common::run_site(p, req, None));
                        }
                        None => {
                            std::hint::black_box(common::run(rs, req, None));
                        }
                    },
                    min / rounds,
                    5,
                );
                best[k] = best[k].min(cpu);
            }
        }
        for ((label, p, _, reference), cpu) in rows.iter().zip(&best) {
            let folds = match p {
                None => "the rule set's",
                Some(p) if p.own_folds() => "its own",
                Some(p) if p.keeps_folds() => "the rule set's",
                Some(_) => "none",
            };
            println!(
                "| {label} | {folds} | {name} | {cpu:.1} | {:.2} |",
                cpu / best[*reference]
            );
        }
    }
}

fn main() {
    if let Ok(secs) = std::env::var("PALISADE_BENCH_PLAN") {
        plan_table(secs.parse().unwrap_or(5.0));
        return;
    }
    if let Ok(secs) = std::env::var("PALISADE_BENCH_SITES") {
        sites_table(secs.parse().unwrap_or(2.0));
        return;
    }
    if let Ok(secs) = std::env::var("PALISADE_BENCH_BUDGET") {
        budget_table(secs.parse().unwrap_or(10.0));
        return;
    }
    if std::env::var_os("PALISADE_BENCH_MEM").is_some() {
        memory();
        return;
    }
    if let Ok(secs) = std::env::var("PALISADE_BENCH_CPU") {
        cpu_table(secs.parse().unwrap_or(1.0));
        return;
    }
    if std::env::var("PALISADE_BENCH_VARYING").as_deref() == Ok("check") {
        if !varying_check() {
            std::process::exit(1);
        }
        return;
    }
    if let Ok(spec) = std::env::var("PALISADE_BENCH_LOOP") {
        profile_loop(&spec);
        return;
    }
    if std::env::var_os("PALISADE_BENCH_BREAKDOWN").is_some() {
        breakdown();
        return;
    }
    check("crs-v4", &V4);
    if let Some(rs) = V3.as_ref() {
        check("crs-3.3.4", rs);
    }
    divan::main();
}

fn bench_one(b: Bencher, rs: &Arc<Ruleset>, name: &str, full: bool) {
    let req = &REQUESTS[name];
    let resp = full.then(|| &*RESPONSE);
    b.counter(divan::counter::BytesCount::new(req.body.len()))
        .bench(|| common::run(rs, req, resp));
}

/// CRS v4, phases 1, 2 and 5.
#[divan::bench(args = CORPUS)]
fn crs_v4_request(b: Bencher, name: &str) {
    bench_one(b, &V4, name, false);
}

/// CRS v4, phases 1 to 5 with a 1 KiB HTML response.
#[divan::bench(args = ["get", "form", "json"])]
fn crs_v4_full(b: Bencher, name: &str) {
    bench_one(b, &V4, name, true);
}

/// Runs the requests of a varying row in turn, one per iteration.
fn bench_varying(b: Bencher, rs: &Arc<Ruleset>, name: &str) {
    let reqs = varying_rows(name);
    let next = std::cell::Cell::new(0usize);
    b.bench_local(|| {
        let i = next.get();
        next.set((i + 1) % reqs.len());
        common::run(rs, &reqs[i], None)
    });
}

/// CRS v4, phases 1, 2 and 5, over a sample of the varying corpus.
#[divan::bench(args = VARYING_ROWS)]
fn crs_v4_varying(b: Bencher, name: &str) {
    bench_varying(b, &V4, name);
}

/// CRS 3.3.4, phases 1, 2 and 5, over a sample of the varying corpus.
#[divan::bench(args = VARYING_ROWS)]
fn crs3_varying(b: Bencher, name: &str) {
    if let Some(rs) = V3.as_ref() {
        bench_varying(b, rs, name);
    }
}

/// CRS 3.3.4, phases 1, 2 and 5 (skipped when the rule set does not load).
#[divan::bench(args = CORPUS)]
fn crs3_request(b: Bencher, name: &str) {
    if let Some(rs) = V3.as_ref() {
        bench_one(b, rs, name, false);
    }
}

/// CRS 3.3.4, phases 1 to 5 with a 1 KiB HTML response.
#[divan::bench(args = ["get", "form", "json"])]
fn crs3_full(b: Bencher, name: &str) {
    if let Some(rs) = V3.as_ref() {
        bench_one(b, rs, name, true);
    }
}
