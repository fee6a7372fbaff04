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

Usage: python3 bench/cores.py [--duration S] [--rounds N] [--configs bd] [--out FILE]
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


def write_config(key, workers, work, port, backend_port):
    """bench/run.py's configuration for `key` with `workers` worker threads."""
    path = R.write_palisade_config(key, work, port, backend_port)
    with open(path) as f:
        text = f.read()
    text = text.replace("worker_threads = 1", f"worker_threads = {workers}", 1)
    path = os.path.join(work, f"palisade-{key}-{workers}w.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def worker_tids(pid, n, timeout=10):
    """The thread ids of palisade-w0 .. palisade-w{n-1}."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = {}
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    m = re.fullmatch(r"palisade-w(\d+)", f.read().strip())
            except OSError:
                continue
            if m:
                found[int(m.group(1))] = int(tid)
        if len(found) == n:
            return [found[i] for i in range(n)]
        time.sleep(0.05)
    raise RuntimeError(f"palisade {pid}: {n} worker threads not found")


def start_palisade(key, workers, args, work, backend_port):
    port = R.free_port()
    cfg = write_config(key, workers, work, port, backend_port)
    cpus = ",".join(str(i) for i in range(workers))
    proc = R.Proc(f"palisade-{key}-{workers}w", [args.palisade, "run", "--config", cfg],
                  work, cpu=cpus)
    R.wait_port(port, proc)
    for i, tid in enumerate(worker_tids(proc.pid, workers)):
        subprocess.run(["taskset", "-p", "-c", str(i), str(tid)], check=True,
                       capture_output=True)
    system = R.System(key, port, proc, lambda: [proc.pid])
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
    ap.add_argument("--palisade", default=os.path.join(R.REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(R.REPO, "target", "release", "albedo"))
    ap.add_argument("--out-md", default=None,
                    help="write the markdown section for BENCHMARKS.md here")
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("cores: needs at least 2 CPUs")
    lua = os.path.join(R.BENCH, "wrk", "corpus.lua")
    files = [R.corpus_path("get")]
    work = tempfile.mkdtemp(prefix="palisade-cores-")
    rows = []
    try:
        backend, backend_port = R.start_albedo(args.albedo, work, None, who="cores")
        for key in args.configs:
            systems = {w: start_palisade(key, w, args, work, backend_port) for w in (1, 2)}
            # Warm-up: CRS's first requests fill caches; both settings alike.
            for w, s in systems.items():
                run_wrk(s.port, files, 2, args.connections, lua, w, "1" if w == 1 else None)
            got = {1: [], 2: []}
            for _ in range(args.rounds):
                for w in (1, 2):
                    s = systems[w]
                    # 1 worker: wrk and albedo on CPU 1. 2 workers: both CPUs for all.
                    subprocess.run(["taskset", "-p", "-a", "-c", "1" if w == 1 else "0,1",
                                    str(backend.pid)], check=True, capture_output=True)
                    R.settle(s)
                    c0 = R.cpu_seconds(s.pids())
                    n, secs, bad = run_wrk(s.port, files, args.duration, args.connections, lua,
                                           w, "1" if w == 1 else None)
                    cpu = R.cpu_seconds(s.pids()) - c0
                    if bad:
                        raise RuntimeError(f"({key}, {w} workers): {bad} non-2xx answers")
                    got[w].append((n / secs, n / cpu if cpu > 0 else 0.0, cpu / secs))
                    R.log(f"cores: ({key}) {w} worker(s): {n / secs:,.0f} req/s, "
                          f"{n / cpu:,.0f} req/proxy-cpu-s, proxy {cpu / secs:.2f} CPUs")
            for s in systems.values():
                s.stop()
            med = {w: tuple(statistics.median(x[i] for x in got[w]) for i in range(3))
                   for w in (1, 2)}
            rows.append((key, med))
    finally:
        R.stop_all()
    lines = [
        "| configuration | workers | req/s | req per proxy CPU-s | proxy CPUs busy |",
        "|---|---|---|---|---|",
    ]
    for key, med in rows:
        for w in (1, 2):
            rps, per_cpu, busy = med[w]
            lines.append(f"| {R.CONFIGS[key]} | {w} | {rps:,.0f} | {per_cpu:,.0f} | {busy:.2f} |")
        lines.append(f"| {R.CONFIGS[key]} | **2 / 1** | **{med[2][0] / med[1][0]:.2f}x** | "
                     f"**{med[2][1] / med[1][1]:.2f}x** | {med[2][2] / med[1][2]:.2f}x |")
    table = "\n".join(lines)
    print(table)
    summary = [f"cores: ({key}) 2/1 workers: req/s {med[2][0] / med[1][0]:.2f}x, "
               f"req per proxy CPU-s {med[2][1] / med[1][1]:.2f}x" for key, med in rows]
    for line in summary:
        print(line)
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(SECTION.format(
                command=f"python3 bench/cores.py --duration {args.duration} --rounds "
                        f"{args.rounds} --configs {args.configs}",
                date=time.strftime("%Y-%m-%d", time.gmtime()), table=table,
                summary="\n".join(summary)))


SECTION = """## Worker threads: 1 against 2 (issue 12)

`{command}` (also run by `scripts/bench`): palisade with `worker_threads = 1` and
`= 2`, each worker thread pinned to its own CPU (`taskset` on the `palisade-wN`
threads), benign GET through wrk (32 connections) to albedo, the two settings
interleaved in one run; medians of the rounds. Requests per proxy CPU-second is
utime + stime of the palisade process over the run. With 1 worker, wrk and albedo
run on CPU 1; with 2 workers, on both CPUs, beside the proxy: on this 2-CPU machine
the load generator and the backend compete with the proxy for its cores, so the
req/s ratio cannot reach 2 here and understates the scaling; the req per proxy
CPU-second ratio is the meaningful one (1.0: the second worker does as much work per
CPU-second as the first, nothing shared slows them down). Run on {date}.

{table}

```
{summary}
```
"""


if __name__ == "__main__":
    main()
