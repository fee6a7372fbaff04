#!/usr/bin/env python3
"""Memory of the `palisade` proxy under a bounded load (issue 11, item 4).

    python3 bench/mem.py [--configs bd] [--requests get,form,json,vget,vform,vjson]
                         [--duration 5] [--rates 1000,10000,40000] [--env K=V ...]
                         [--smaps] [--palisade PATH] [--albedo PATH]

Starts the backend and each configuration of bench/run.py ((b) no rules, (c) engine on
without rules, (d) CRS v4, (e) CRS 3.3.4) exactly as the benchmark does (one worker
thread, pinned to CPU 0; wrk, oha and the backend on CPU 1; 127.0.0.1 only), then:

  1. waits until the proxy is idle after loading and reads /proc/PID/status:
     "after load" (VmRSS, its anonymous and file-backed parts);
  2. sends each series of `--requests` with wrk for `--duration` seconds (32
     connections, the benchmark's script and corpora, the varying one shuffled),
     then each offered rate of `--rates` with oha (64 connections, the fixed GET),
     sampling VmRSS every 20 ms: the largest VmRSS seen after each step, and VmHWM
     at the end ("peak", the figure BENCHMARKS.md reports);
  3. waits until the proxy is idle again, two more seconds, and reads VmRSS again
     ("idle after the load").

`--env K=V` passes an environment variable to palisade (MIMALLOC_* options, for
instance); `--heaptrack FILE` runs it under heaptrack (`heaptrack -o FILE`; build it
with `--features system-allocator` first, heaptrack does not see mimalloc), the RSS
figures are then those of the profiled process; `--smaps` prints the largest mappings of /proc/PID/smaps after the load
(anonymous memory per mapping: thread stacks, allocator arenas, the binary).

Bounded: every wrk and oha run lasts `--duration` seconds; every process started is
stopped at the end, also on error or Ctrl-C.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (bench/run.py: the benchmark's configurations and load tools)


def status(pid):
    """VmRSS, VmHWM, RssAnon, RssFile (KiB) and the thread count of `pid`."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                out[k] = int(v.split()[0])
            elif k == "Threads":
                out[k] = int(v)
    return out


def smaps(pid, top=12):
    """The mappings of `pid` with the most resident memory: (KiB resident, KiB
    anonymous, size KiB, name)."""
    maps, cur = [], None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and not parts[0].endswith(":"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                name = parts[5] if len(parts) > 5 else "[anon]"
                cur = {"name": name, "size": (hi - lo) // 1024, "rss": 0, "anon": 0}
                maps.append(cur)
            elif parts[0] == "Rss:":
                cur["rss"] = int(parts[1])
            elif parts[0] == "Anonymous:":
                cur["anon"] = int(parts[1])
    maps.sort(key=lambda m: -m["rss"])
    return maps[:top], maps


class Sampler:
    """Reads VmRSS of `pid` every `period` seconds in a thread; `take()` returns the
    largest value seen since the last call."""

    def __init__(self, pid, period=0.02):
        self.pid = pid
        self.period = period
        self.peak = 0
        self.lock = threading.Lock()
        self.stop_flag = False
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop_flag:
            try:
                v = status(self.pid)["VmRSS"]
            except OSError:
                return
            with self.lock:
                self.peak = max(self.peak, v)
            time.sleep(self.period)

    def take(self):
        with self.lock:
            v, self.peak = self.peak, 0
        return v

    def stop(self):
        self.stop_flag = True
        self.t.join()


def profiled_pid(top, binary):
    """The process under `top` (heaptrack's script) that runs `binary`."""
    want = os.path.realpath(binary)
    deadline = time.time() + 30
    while time.time() < deadline:
        todo = [top]
        while todo:
            p = todo.pop()
            try:
                if os.path.realpath(f"/proc/{p}/exe") == want:
                    return p
            except OSError:
                pass
            todo += run.children(p)
        time.sleep(0.1)
    raise RuntimeError(f"no process runs {binary} under {top}")


def heaptrack_wrapper(work, binary, out):
    """A script that runs `palisade run` under heaptrack and anything else as is."""
    path = os.path.join(work, "palisade-heaptrack.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n"
                f"[ \"$1\" = run ] && exec heaptrack -o {out!r} {binary!r} \"$@\"\n"
                f"exec {binary!r} \"$@\"\n")
    os.chmod(path, 0o755)
    return path


def mib(kib):
    return f"{kib / 1024:.1f}"


def wait_idle(system):
    run.settle(system)
    time.sleep(2)


def probe(key, args, work, backend_port, lua, env):
    if env:
        # Proc takes the environment of the process it starts; start_palisade does not
        # pass one, so the variables go into ours for the start.
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
    try:
        system = run.start_palisade(key, args, work, backend_port)
    finally:
        if env:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    pid = system.proc.pid
    if args.heaptrack:
        pid = profiled_pid(pid, args.palisade_binary)
    rows = []
    try:
        problems = run.verify(system)
        if problems:
            raise RuntimeError("; ".join(problems))
        wait_idle(system)
        s = status(pid)
        rows.append(("after load", s["VmRSS"], s["RssAnon"], s["RssFile"], s["Threads"]))
        sampler = Sampler(pid)
        for rn in args.requests.split(","):
            files = run.REQUESTS[SHORT[rn]]
            r = run.run_wrk(system.port, files, args.duration, args.connections, lua,
                            count_status=True)
            s = status(pid)
            rows.append((f"wrk {SHORT[rn]} ({r['requests']} req, non-2xx {r['non2xx']})",
                         sampler.take(), s["RssAnon"], s["RssFile"], s["Threads"]))
        for rate in [int(x) for x in args.rates.split(",") if x]:
            run.settle(system)
            p = run.run_oha(system.port, rate, args.duration, args.oha_connections)
            s = status(pid)
            rows.append((f"oha GET {rate}/s (achieved {p['achieved']:.0f})",
                         sampler.take(), s["RssAnon"], s["RssFile"], s["Threads"]))
        sampler.stop()
        wait_idle(system)
        s = status(pid)
        rows.append(("idle after the load", s["VmRSS"], s["RssAnon"], s["RssFile"],
                     s["Threads"]))
        hwm = s["VmHWM"]
        top = smaps(pid)[0] if args.smaps else None
    finally:
        if args.heaptrack:
            # heaptrack's script waits for its child without passing signals on.
            # Its data is complete once the script exits on its own.
            try:
                os.kill(pid, signal.SIGTERM)
                system.proc.p.wait(timeout=300)
            except (OSError, subprocess.TimeoutExpired):
                pass
        system.stop()
    return rows, hwm, top


SHORT = {"get": "GET", "form": "form POST 2 KiB", "json": "JSON POST 20 KiB",
         "vget": run.VARYING_PREFIX + "GET", "vform": run.VARYING_PREFIX + "form POST",
         "vjson": run.VARYING_PREFIX + "JSON POST"}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="bd")
    ap.add_argument("--requests", default="get,form,json,vget,vform,vjson")
    ap.add_argument("--duration", type=int, default=5, help="seconds per wrk or oha run")
    ap.add_argument("--connections", type=int, default=32, help="wrk connections")
    ap.add_argument("--oha-connections", type=int, default=64)
    ap.add_argument("--rates", default="1000,10000,40000",
                    help="offered rates of the oha runs (empty: none)")
    ap.add_argument("--env", action="append", default=[], help="K=V for palisade")
    ap.add_argument("--heaptrack", default=None, metavar="FILE",
                    help="run palisade under heaptrack, writing FILE.zst")
    ap.add_argument("--smaps", action="store_true", help="print the largest mappings")
    ap.add_argument("--palisade", default=os.path.join(run.REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(run.REPO, "target", "release", "albedo"))
    args = ap.parse_args()
    for rn in args.requests.split(","):
        if rn not in SHORT:
            raise SystemExit(f"mem: unknown request {rn!r} (one of {', '.join(SHORT)})")
    env = dict(kv.split("=", 1) for kv in args.env)
    if any(rn.startswith("v") for rn in args.requests.split(",")):
        import gen_varying
        gen_varying.write(run.VARYING_DIR)
    lua = os.path.join(run.BENCH, "wrk", "corpus.lua")
    work = tempfile.mkdtemp(prefix="palisade-mem-")

    def on_signal(signum, frame):
        run.stop_all()
        shutil.rmtree(work, ignore_errors=True)
        sys.exit(130)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.heaptrack:
        binary = os.path.realpath(args.palisade)
        args.palisade = heaptrack_wrapper(work, binary, os.path.abspath(args.heaptrack))
        args.palisade_binary = binary
    try:
        backend, backend_port = run.start_albedo(args.albedo, work, run.LOAD_CPU, who="mem")
        for key in args.configs:
            print(f"({key}) {run.CONFIGS[key]}" + (f", env {args.env}" if env else ""))
            rows, hwm, top = probe(key, args, work, backend_port, lua, env)
            print(f"  {'step':<52} {'RSS MiB':>8} {'anon':>6} {'file':>6} {'threads':>7}")
            for name, rss, anon, file_, threads in rows:
                print(f"  {name:<52} {mib(rss):>8} {mib(anon):>6} {mib(file_):>6} {threads:>7}")
            print(f"  peak (VmHWM) {mib(hwm)} MiB")
            if top:
                print(f"  largest mappings after the load: {'rss':>7} {'anon':>7} {'size':>9}")
                for m in top:
                    print(f"    {m['name'][-40:]:<40} {mib(m['rss']):>7} {mib(m['anon']):>7} "
                          f"{mib(m['size']):>9}")
            sys.stdout.flush()
        backend.stop()
    finally:
        run.stop_all()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
