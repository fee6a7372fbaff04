#!/usr/bin/env python3
"""Worker-thread scaling: palisade with 1 worker thread against 2, each worker pinned
to its own CPU, on the proxy alone (no rules) and with CRS v4 (PL1, blocking).

One run interleaves the two settings (1, 2, 1, 2, ...) so that they see the same
machine, and reports per setting requests per second and requests per proxy
CPU-second (utime + stime of the palisade process from /proc, all its threads), then
the ratios 2 workers / 1 worker.

Layout: with 1 worker, palisade is pinned to CPU 0 and wrk + the backend (albedo) to
CPU 1. With 2 workers, worker thread N is pinned to CPU N (its other threads may run
on either), and wrk (2 threads) and albedo run unpinned: on a 2-CPU machine the load
generator and the backend compete with the proxy for the same cores, so the rps ratio
understates what a second core gives the proxy. Requests per proxy CPU-second is the
figure that stays meaningful: a ratio near 1.0 means the second worker does as much
work per CPU-second as the first (no lock or shared cache line slowing both down),
so throughput scales with the cores the proxy is given.

Each setting runs the fixed requests named by --requests (GET, 2 KiB form, 20 KiB JSON)
without and with a rate limit that every request passes (--rate-limit), and gets as
many inspection threads as workers (large bodies are evaluated there).

Scheduling: with autogroups on, run it in a group of its own at a high weight
(`setsid bash -c 'echo -15 > /proc/self/autogroup; python3 bench/cores.py'` as root);
the processes it starts share that weight (bench/run.py, share_scheduling_group), so
other jobs on the machine take little from the measurement.

Second layout, the CPU budget (--layout budget, or both): on a 2-CPU machine the
first layout cannot show a 2x, since the load generator and the backend need CPU time
beside the proxy's. Here the proxy gets a fixed budget of CPU time per worker
(--budget, 0.4 of a CPU by default) from a cgroup's CPU quota (cgroup v2 `cpu.max`, or
v1's CFS quota), with its worker threads pinned as above: 1 worker may use 0.4 of
CPU 0, 2 workers 0.8 of CPUs 0 and 1 together, and wrk and albedo run on both CPUs in
the time left. Both settings are then limited by the proxy's own budget, not by the
harness (the `budget used` column says so: near 100%), and the req/s ratio answers
the question of the issue: given twice the CPU time on two cores, does the proxy
serve twice the requests, or do its workers slow each other down (a shared lock,
a cache line both write)? Within each quota period both workers run at the same time
on their two cores, so contention between them is paid as it would be at full speed.

Usage: python3 bench/cores.py [--duration S] [--rounds N] [--configs bd]
       [--requests get,form,json] [--rate-limit off|on|both] [--out-md FILE]
       [--layout shared|budget|both] [--budget CPUS]
Needs target/release/palisade and target/release/albedo, wrk, taskset. Every run is
bounded in time; every process started is stopped at the end.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (bench/run.py: processes, ports, CPU, wrk)


# A limit every request of the benchmark passes through (one client, 127.0.0.1, far
# below its rate): the limit's check and its shard's lock are paid on each request.
RATE_LIMIT = """
[[rate_limit]]
name = "bench"
key = "client_ip"
rate = "10000000/s"
burst = 1000000
"""


def write_config(key, workers, work, port, backend_port, rate_limit):
    """bench/run.py's configuration for `key` with `workers` worker threads."""
    path = R.write_palisade_config(key, work, port, backend_port)
    with open(path) as f:
        text = f.read()
    # As many inspection threads as workers: large bodies (the 20 KiB JSON) are
    # evaluated there, and the default (half the CPUs) would cap both settings at one.
    text = text.replace("worker_threads = 1",
                        f"worker_threads = {workers}\ninspection_threads = {workers}", 1)
    if rate_limit:
        text += RATE_LIMIT
    path = os.path.join(work, f"palisade-{key}-{workers}w{'-rl' if rate_limit else ''}.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def start_palisade(key, workers, rate_limit, work, backend_port, palisade, budget=None):
    """Starts palisade with its worker threads pinned; with `budget` (CPUs per worker),
    in a cgroup of its own capped at `budget * workers` CPUs (system.budget)."""
    port = R.free_port()
    cfg = write_config(key, workers, work, port, backend_port, rate_limit)
    cpus = ",".join(str(i) for i in range(workers))
    proc = R.Proc(f"palisade-{key}-{workers}w{'-rl' if rate_limit else ''}", [palisade, "run", "--config", cfg],
                  work, cpu=cpus)
    R.wait_port(port, proc)
    R.pin_workers(proc.pid, workers)
    system = R.System(key, port, proc, lambda: [proc.pid])
    system.budget = None
    if budget:
        group = R.CpuBudget(f"palisade-cores-{proc.pid}", budget * workers)
        group.add(proc.pid)
        system.budget = group
    problems = R.verify(system)
    if problems:
        raise RuntimeError(f"({key}, {workers} workers): " + "; ".join(problems))
    return system


def run_wrk(port, files, duration, connections, lua, threads, cpu):
    env = dict(os.environ, BENCH_FILES=",".join(files))
    argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--timeout", "10s",
            "-s", lua, f"http://127.0.0.1:{port}/"]
    if cpu is not None:
        argv = ["taskset", "-c", cpu] + argv
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=duration + 60)
    if r.returncode != 0:
        raise RuntimeError(f"wrk failed: {r.stderr.strip()}")
    m = re.search(r"(\d+) requests in ([\d.]+)s", r.stdout)
    if not m:
        raise RuntimeError(f"wrk output not understood: {r.stdout[:200]}")
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", r.stdout)
    return int(m.group(1)), float(m.group(2)), int(errors.group(1)) if errors else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="bd", help="b: no rules, d: CRS v4 (bench/run.py letters)")
    ap.add_argument("--duration", type=int, default=8, help="seconds per wrk run")
    ap.add_argument("--rounds", type=int, default=3, help="1-worker/2-worker pairs per config")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--requests", default="get,form,json",
                    help="comma-separated fixed requests of bench/corpus (get, form, json)")
    ap.add_argument("--rate-limit", choices=["off", "on", "both"], default="both",
                    help="with a [[rate_limit]] keyed by client IP that every request passes "
                         "(on), without (off), or each in turn (both)")
    ap.add_argument("--layout", choices=["shared", "budget", "both"], default="both",
                    help="shared: the proxy's CPUs shared with wrk and albedo; budget: the "
                         "proxy capped at --budget CPUs per worker by a cgroup (see above)")
    ap.add_argument("--budget", type=float, default=0.4,
                    help="CPUs of time per worker in the budget layout")
    ap.add_argument("--palisade", default=os.path.join(R.REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(R.REPO, "target", "release", "albedo"))
    ap.add_argument("--out-md", default=None,
                    help="write the markdown section for BENCHMARKS.md here")
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("cores: needs at least 2 CPUs")
    if not 0.05 <= args.budget <= 1.0:
        raise SystemExit("cores: --budget must be between 0.05 and 1 CPU per worker")
    lua = os.path.join(R.BENCH, "wrk", "corpus.lua")
    requests = [r.strip() for r in args.requests.split(",") if r.strip()]
    for r in requests:
        if not os.path.exists(R.corpus_path(r)):
            raise SystemExit(f"cores: --requests: no request {r!r} in {R.CORPUS}")
    limits = {"off": [False], "on": [True], "both": [False, True]}[args.rate_limit]
    budgets = {"shared": [None], "budget": [args.budget], "both": [None, args.budget]}[args.layout]
    if args.budget in budgets:
        try:
            R.CpuBudget(f"palisade-cores-probe-{os.getpid()}", args.budget).remove()
        except OSError as e:
            if args.layout == "budget":
                raise SystemExit(f"cores: the CPU budget layout needs a cgroup: {e}")
            R.log(f"cores: no CPU budget layout ({e}); the shared layout only")
            budgets = [None]
    work = tempfile.mkdtemp(prefix="palisade-cores-")
    rows = []
    systems = {}
    try:
        backend, backend_port = R.start_albedo(args.albedo, work, None, who="cores")
        for key in args.configs:
            for limit in limits:
                for budget in budgets:
                    systems = {w: start_palisade(key, w, limit, work, backend_port,
                                                 args.palisade, budget)
                               for w in (1, 2)}
                    for request in requests:
                        files = [R.corpus_path(request)]
                        name = f"{R.CONFIGS[key]}{' + rate limit' if limit else ''}, {request}"
                        rows.append((name, budget, measure(key, name, systems, files, args,
                                                           lua, backend, budget)))
                    stop_systems(systems)
    finally:
        stop_systems(systems)
        R.stop_all()
    report(rows, args)


def stop_systems(systems):
    for s in systems.values():
        s.stop()
        if s.budget is not None:
            s.budget.remove()
            s.budget = None


def measure(key, name, systems, files, args, lua, backend, budget):
    """Medians over the rounds of (req/s, req per proxy CPU-s, proxy CPUs) per worker count."""
    # Shared layout, 1 worker: wrk and albedo on CPU 1. Otherwise both CPUs for them.
    def harness_cpu(w):
        return "1" if w == 1 and budget is None else None

    # wrk's threads: as many as workers with the shared layout (1 worker: wrk on its
    # own CPU); with the budget, the same harness (2 threads on both CPUs) for both.
    def wrk_threads(w):
        return 2 if budget is not None else w

    # Warm-up: CRS's first requests fill caches; both settings alike.
    for w, s in systems.items():
        run_wrk(s.port, files, 2, args.connections, lua, wrk_threads(w), harness_cpu(w))
    got = {1: [], 2: []}
    for _ in range(args.rounds):
        for w in (1, 2):
            s = systems[w]
            subprocess.run(["taskset", "-p", "-a", "-c", harness_cpu(w) or "0,1",
                            str(backend.pid)], check=True, capture_output=True)
            R.settle(s)
            c0 = R.cpu_seconds(s.pids())
            n, secs, bad = run_wrk(s.port, files, args.duration, args.connections, lua,
                                   wrk_threads(w), harness_cpu(w))
            cpu = R.cpu_seconds(s.pids()) - c0
            if bad:
                raise RuntimeError(f"({key}, {w} workers): {bad} non-2xx answers")
            got[w].append((n / secs, n / cpu if cpu > 0 else 0.0, cpu / secs))
            used = f", {100 * cpu / secs / (budget * w):.0f}% of its budget" if budget else ""
            R.log(f"cores: ({name}{', budget' if budget else ''}) {w} worker(s): "
                  f"{n / secs:,.0f} req/s, {n / cpu:,.0f} req/proxy-cpu-s, "
                  f"proxy {cpu / secs:.2f} CPUs{used}")
    return {w: tuple(statistics.median(x[i] for x in got[w]) for i in range(3)) for w in (1, 2)}


def report(rows, args):
    lines = [
        "| configuration | layout | workers | req/s | req per proxy CPU-s | proxy CPUs busy |",
        "|---|---|---|---|---|---|",
    ]
    summary = []
    for name, budget, med in rows:
        layout = f"budget {budget:g} CPU per worker" if budget else "shared CPUs"
        for w in (1, 2):
            rps, per_cpu, busy = med[w]
            used = f" ({100 * busy / (budget * w):.0f}% of {budget * w:g})" if budget else ""
            lines.append(f"| {name} | {layout} | {w} | {rps:,.0f} | {per_cpu:,.0f} | "
                         f"{busy:.2f}{used} |")
        lines.append(f"| {name} | {layout} | **2 / 1** | **{med[2][0] / med[1][0]:.2f}x** | "
                     f"**{med[2][1] / med[1][1]:.2f}x** | {med[2][2] / med[1][2]:.2f}x |")
        target = " (target >= 1.8x)" if budget else ""
        summary.append(f"cores: ({name}, {layout}) 2/1 workers: req/s "
                       f"{med[2][0] / med[1][0]:.2f}x{target}, req per proxy CPU-s "
                       f"{med[2][1] / med[1][1]:.2f}x")
    table = "\n".join(lines)
    print(table)
    for line in summary:
        print(line)
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(SECTION.format(
                command=f"python3 bench/cores.py --duration {args.duration} --rounds "
                        f"{args.rounds} --configs {args.configs} --requests {args.requests} "
                        f"--rate-limit {args.rate_limit} --layout {args.layout} "
                        f"--budget {args.budget:g}",
                date=time.strftime("%Y-%m-%d", time.gmtime()), table=table,
                summary="\n".join(summary)))


SECTION = """## Worker threads: 1 against 2 (issue 12)

`{command}` (also run by `scripts/bench`): palisade with `worker_threads = 1` and
`= 2`, each worker thread pinned to its own CPU (`taskset` on the `palisade-wN`
threads, as many inspection threads as workers), the fixed benign GET, 2 KiB form and
20 KiB JSON through wrk (32 connections) to albedo, without and with a rate limit
keyed by client IP that every request passes, the two settings interleaved in one
run; medians of the rounds; the benchmark's processes at a high scheduling weight
(other jobs shared the machine). Requests per proxy CPU-second is utime + stime of
the palisade process over the run. Run on {date}.

Two layouts. **Shared CPUs**: with 1 worker, wrk and albedo run on CPU 1; with 2
workers, on both CPUs beside the proxy. On this 2-CPU machine the load generator and
the backend then take CPU time from the proxy's second core, so the req/s ratio
cannot reach 2 and measures the machine; the req per proxy CPU-second ratio is the
meaningful one there (1.0: the second worker does as much work per CPU-second as the
first). **CPU budget**: the proxy in a cgroup whose CPU quota gives it the stated
CPUs of time per worker (1 worker: that much of CPU 0; 2 workers: twice that, over
CPUs 0 and 1, both workers running at the same time in each quota period), wrk and
albedo on both CPUs in the time left. Both settings are bound by the proxy's budget
(the busy column shows how much of it was used), so the req/s ratio is the issue's
figure: twice the CPU time on two cores against one, target at least 1.8x.

{table}

```
{summary}
```
"""


if __name__ == "__main__":
    main()
