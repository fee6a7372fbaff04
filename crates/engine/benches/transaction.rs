//! Engine microbenchmarks: CPU time and allocations per transaction for CRS v4 and
//! Debian's CRS 3.3.4 over the fixed corpus of `bench/corpus/` (no network).
//!
//! Two shapes per request: `request` runs phases 1, 2 and 5 (what a blocked or
//! request-only inspection costs); `full` adds phases 3 and 4 with a small HTML
//! response. Attacks stop at phase 2 with a 403, so their `full` equals `request`.
//!
//! Run: `cargo bench -p engine --bench transaction` (pin it with `taskset -c 0`).
//! Allocations come from divan's counting allocator (`alloc:` rows in the output).

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

/// Prints what each corpus request does under a rule set, so a run shows that benign
/// requests pass and attacks are blocked (a benchmark of the wrong path is worthless).
fn check(label: &str, rs: &Arc<Ruleset>) {
    for &name in CORPUS {
        let (i, tx) = common::run_tx(rs, &REQUESTS[name], Some(&RESPONSE));
        let verdict = match &i {
            Some(i) => format!("{} by {:?}", i.status, i.rule_id),
            None => "pass".to_string(),
        };
        // CRS 3.3.4 (Debian) has no Log4Shell rule; CRS v4 has 944150.
        let expect_block = name.starts_with("attack-")
            && !(label.starts_with("crs-3") && name == "attack-log4shell");
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
/// part of the profile.
fn profile_loop(spec: &str) {
    let mut parts = spec.split(':');
    let set = parts.next().unwrap_or("v4");
    let name = parts.next().unwrap_or("get");
    let secs: f64 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let rs = match set {
        "v3" => V3
            .clone()
            .unwrap_or_else(|| panic!("CRS 3.3.4 does not load")),
        _ => V4.clone(),
    };
    let req = REQUESTS
        .get(name)
        .unwrap_or_else(|| panic!("no corpus request {name}"));
    let start = std::time::Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        std::hint::black_box(common::run(&rs, req, None));
        n += 1;
    }
    let el = start.elapsed().as_secs_f64();
    eprintln!(
        "{set} {name}: {n} transactions in {el:.2} s, {:.1} us each",
        el * 1e6 / n as f64
    );
}

fn main() {
    if let Ok(spec) = std::env::var("PALISADE_BENCH_LOOP") {
        profile_loop(&spec);
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
