"""Differential run: the same corpus through nginx + libmodsecurity 3.0.9, Palisade and
libmodsecurity 3.0.15 (PyPI wheel), one request at a time, with the same rules (Debian's
modsecurity.conf in DetectionOnly + CRS 3.3.4 at paranoia level 1 and 4), compared
request by request on the matched rule ids and variables.

Called by scripts/differential, which sets up the venv with the wheel and builds the
binaries. Writes target/differential/report.md and report.json (with --sample,
target/differential/sample/), plus the corpus (corpus.jsonl) and each engine's
per-request matches (results-plN.jsonl) for reruns and digging.
"""

import argparse
import base64
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare  # noqa: E402
import corpus as corpus_mod  # noqa: E402
import engines  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))


def log(msg):
    print(f"differential: {msg}", flush=True)


def dpkg(pkg):
    try:
        return subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                              text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def run_pl(reqs, pl, work, args, albedo_port):
    """Sends every request through the three engines at one paranoia level; returns
    {rid: {engine: {"status", "error", "matches": [[rule, var], ...]}}}."""
    rules = {e: engines.write_rules(work, pl, e) for e in engines.ENGINES}
    log(f"PL{pl}: starting nginx + ModSecurity, Palisade and the wheel")
    nginx = engines.start_nginx(work, pl, rules["nginx"], albedo_port)
    pal = engines.start_palisade(work, pl, rules["palisade"], albedo_port, args.palisade)
    wheel = engines.Wheel(rules["wheel"], albedo_port)
    who = wheel.who()
    results = {}
    progress = {}
    items = [(r.rid, r.with_marker(), engines.request_method(r.raw)) for r in reqs]

    def via(port):
        def fn(data, method):
            status, _, err = engines.exchange(port, data, method)
            return {"status": status, "error": err}
        return fn

    def in_wheel(data, method):
        status, lines, err = wheel.run(data, method)
        matches = []
        for ln in lines:
            p = engines.parse_line(ln)
            if p is not None:
                matches.append([p[0] or "(cut)", p[2]])
        return {"status": status, "error": err, "matches": matches}

    # The wheel's libxml2 prints its parse errors on standard error: into a file.
    wheel_err = open(os.path.join(work, f"wheel-pl{pl}.err"), "wb")
    saved_err = os.dup(2)
    sys.stderr.flush()
    os.dup2(wheel_err.fileno(), 2)
    t0 = time.time()
    threads = [engines.run_engine_thread(via(nginx.port), items, results, "nginx", progress),
               engines.run_engine_thread(via(pal.port), items, results, "palisade", progress),
               engines.run_engine_thread(in_wheel, items, results, "wheel", progress)]
    last = time.time()
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(timeout=1)
        if time.time() - last >= 15:
            last = time.time()
            log(f"PL{pl}: " + ", ".join(f"{k} {progress.get(k, 0)}/{len(items)}" for k in engines.ENGINES)
                + f" ({time.time() - t0:.0f} s)")
    sys.stderr.flush()
    os.dup2(saved_err, 2)
    os.close(saved_err)
    wheel_err.close()
    log(f"PL{pl}: sent {len(items)} requests to each engine in {time.time() - t0:.0f} s")
    wheel.close()
    # Stopping the proxies flushes their logs.
    nginx.stop()
    pal.stop()
    stats = {}
    for name, server in (("nginx", nginx), ("palisade", pal)):
        per_rid, st = engines.attribute(engines.read_lines(server.log))
        stats[name] = st
        for rid, ms in per_rid.items():
            if rid in results:
                results[rid].setdefault(name, {})["matches"] = (
                    [[engines.MARKER_ID, None]] + [[m.rule, m.var] for m in ms])
    return results, stats, who


def load_corpus(path):
    reqs = []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            r = corpus_mod.Request(d["source"], d["kind"], d["label"], base64.b64decode(d["raw_b64"]))
            r.rid = d["id"]
            reqs.append(r)
    return reqs


def report_only(out, pls, top):
    """Rebuilds report.md and report.json from the files of an earlier run."""
    reqs = load_corpus(os.path.join(out, "corpus.jsonl"))
    with open(os.path.join(out, "report.json")) as f:
        meta = json.load(f)["meta"]
    summary = []
    for pl in pls:
        results = {}
        with open(os.path.join(out, f"results-pl{pl}.jsonl")) as f:
            for line in f:
                d = json.loads(line)
                results[d.pop("id")] = d
        summary.append(compare.compare(reqs, results, pl))
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(compare.render(summary, meta, top))
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump({"meta": meta, "paranoia_levels": summary}, f, indent=1)
    log(f"rebuilt {os.path.join(out, 'report.md')} and report.json")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sample", type=int, default=0,
                    help="run a fixed-seed sample of N requests (each source in proportion)")
    ap.add_argument("--seed", type=int, default=20261124, help="corpus seed")
    ap.add_argument("--benign", type=int, default=3000, help="generated benign requests")
    ap.add_argument("--mutated", type=int, default=4000, help="generated mutated attacks")
    ap.add_argument("--pl", default="1,4", help="paranoia levels, comma-separated")
    ap.add_argument("--out", default=None, help="output directory (default target/differential, "
                    "with --sample target/differential/sample)")
    ap.add_argument("--crs-tests", default=os.path.normpath(os.path.join(REPO, "..", "shared", "crs")),
                    help="CRS checkout whose tests/regression/tests feed the corpus")
    ap.add_argument("--palisade", default=os.path.join(REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(REPO, "target", "release", "albedo"))
    ap.add_argument("--top", type=int, default=15, help="difference classes listed per pair")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, configs)")
    ap.add_argument("--report-only", action="store_true",
                    help="send nothing: rebuild the report from the corpus.jsonl, "
                         "results-plN.jsonl and report.json of an earlier run in --out")
    args = ap.parse_args()
    out = args.out or os.path.join(REPO, "target", "differential", "sample" if args.sample else "")
    os.makedirs(out, exist_ok=True)
    pls = [int(x) for x in args.pl.split(",") if x]
    if args.report_only:
        report_only(out, pls, args.top)
        return

    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.time()
    reqs = corpus_mod.corpus(args.crs_tests, args.seed, args.benign, args.mutated)
    full = len(reqs)
    if args.sample:
        reqs = corpus_mod.sample(reqs, args.sample, args.seed)
    sources = {}
    for r in reqs:
        sources[r.source] = sources.get(r.source, 0) + 1
    log(f"corpus: {len(reqs)} of {full} requests ({', '.join(f'{k} {v}' for k, v in sources.items())})")
    with open(os.path.join(out, "corpus.jsonl"), "w") as f:
        for r in reqs:
            f.write(json.dumps(r.to_json()) + "\n")

    work = tempfile.mkdtemp(prefix="palisade-differential-")

    def on_signal(signum, frame):
        bench_stop()
        sys.exit(130)

    def bench_stop():
        engines.bench.stop_all()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    summary, log_stats, who, failures = [], {}, "?", []
    try:
        albedo, albedo_port = engines.start_albedo(work, args.albedo)
        for pl in pls:
            results, stats, who = run_pl(reqs, pl, work, args, albedo_port)
            log_stats[f"pl{pl}"] = stats
            with open(os.path.join(out, f"results-pl{pl}.jsonl"), "w") as f:
                for r in reqs:
                    f.write(json.dumps({"id": r.rid, **results.get(r.rid, {})}) + "\n")
            # The harness's own health (never the agreement): every engine must have
            # inspected requests, else the marker or the log reading is broken.
            for e in engines.ENGINES:
                seen = sum(1 for r in reqs if compare.outcome(results.get(r.rid, {}).get(e))[0])
                if seen < len(reqs) // 2:
                    failures.append(f"PL{pl}: {e} inspected only {seen} of {len(reqs)} requests "
                                    f"(log attribution: {stats.get(e, 'in process')})")
            s = compare.compare(reqs, results, pl)
            summary.append(s)
            for key, p in s["pairs"].items():
                ag = p["agreement"]
                log(f"PL{pl}: {compare.SHORT[p['a']]} vs {compare.SHORT[p['b']]}: "
                    f"{compare.pct(ag['all']['rate'])} of requests agree ("
                    + ", ".join(f"{k} {compare.pct(v['rate'])}" for k, v in ag.items() if k != "all")
                    + f"); verdict {compare.pct(p['inbound_verdict_agreement'])}; without the "
                    f"log-only rules {compare.pct(p['agreement_without_log_only']['all']['rate'])}")
        albedo.stop()
    finally:
        bench_stop()
    if args.keep:
        log(f"work directory kept: {work}")

    meta = {
        "command": "scripts/differential " + " ".join(sys.argv[1:]),
        "requests": len(reqs), "seed": args.seed, "sample": args.sample or None,
        "sources": sources,
        "modsec_conf": engines.MODSEC_CONF,
        "crs": dpkg("modsecurity-crs"),
        "engines": {"nginx": f"nginx {dpkg('nginx')}, libmodsecurity3 {dpkg('libmodsecurity3')}, "
                             f"libnginx-mod-http-modsecurity {dpkg('libnginx-mod-http-modsecurity')}",
                    "palisade": os.path.relpath(args.palisade, REPO),
                    "wheel": who},
        "started": started.strftime("%Y-%m-%d %H:%M"),
        "seconds": time.time() - t0,
        "git": subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip() or "?",
        "log_attribution": log_stats,
    }
    md = compare.render(summary, meta, args.top)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump({"meta": meta, "paranoia_levels": summary}, f, indent=1)
    log(f"wrote {os.path.join(out, 'report.md')} and report.json in {time.time() - t0:.0f} s")
    for f in failures:
        log(f"FAILED: {f}")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
