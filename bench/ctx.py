#!/usr/bin/env python3
"""Persistent collections under load, with an outside writer (issue 9).

Reproduces the shape of the incident that motivated the store: many concurrent
connections, rules that read several variables of an IP record and of the GLOBAL
record and increment counters in both on every request, and a separate process
writing into the same store (a risk scorer) the whole time.

The rules (every request passes; the deny rules only read):

    initcol:ip=%{ARGS.client}, initcol:global=global,
    setvar:ip.hits=+1, setvar:global.requests=+1
    IP:BLOCKED, IP:SCORE, IP:HITS, GLOBAL:MODE, GLOBAL:ALERT_LEVEL compared

Requests come from --clients client keys (the query argument `client`).
The outside writer is one long-lived `palisade ctx import --follow` process, the
way a scoring service feeds the store: it is fed write lines (a `score` set on
client records and `alert_level` on GLOBAL) on its standard input at --writer-rate
lines per second and commits every --batch lines or 100 ms; its commits take LMDB's
write lock, which the proxy's requests never take. (An earlier version started one
`palisade ctx import` process per batch: even `palisade --version` started five
times a second doubled the p99 of the two-worker open loop on this two-core machine,
so that measured process start-up, not the store.)

For each worker-thread count (--workers, default 1 and 2), runs without and runs
with the writer, alternating. Closed loop (wrk, as many requests as the proxy takes):
req/s, requests per proxy CPU-second, p50/p99 latency, time in the store per request
(the store's read counters over the proxy's request time, both from /metrics), store
reads per request, requests that waited on a write lock (the store's counter), and the
writer's achieved update rate. Open loop (oha at a fixed rate below saturation, with
coordinated-omission correction; skipped when oha is not installed): p50/p99/p99.9/max
latency, the measure of what the writer and the store add to a request's wait. Then
CRS 3.3.4 with its DoS protection on (collections opened and written by the CRS rules
themselves), closed loop, for each worker count: the proxy's scaling on a real rule set.

"Store / request time" is the time spent in store reads over the proxy's request
time (arrival to end of response, queueing and upstream included: what a client
waits); "store / proxy CPU" compares the same read time with the proxy's CPU time,
a stricter measure of what the store costs.

Placement: with one worker the proxy runs on CPU 0 and the load generator, the
backend and the writer on CPU 1; with two workers the proxy may use both CPUs and
shares them with the load (this machine has two cores), which the report says.

Usage: python3 bench/ctx.py [--duration 10] [--connections 64] [--workers 1,2]
       [--writer-rate 5000] [--fixed-fraction 0.5 | --fixed-rate N] [--no-crs3]
       [--palisade target/release/palisade]
       [--albedo target/release/albedo] [--out-md FILE] [--smoke]
Every process started is stopped at the end. Exits 1 when the benchmark breaks: a
request not answered 200, a socket error, a failed writer run, a request that waited
on a write lock, or CRS runs that never read the store.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (process helpers, wrk runner)

RULES = r"""SecRuleEngine On
SecAction "id:100,phase:1,nolog,pass,initcol:ip=%{ARGS.client},initcol:global=global,setvar:ip.hits=+1,setvar:global.requests=+1"
SecRule IP:BLOCKED "@eq 1" "id:101,phase:1,deny,status:403,nolog"
SecRule IP:SCORE "@gt 90" "id:102,phase:1,deny,status:403,nolog"
SecRule IP:HITS "@gt 1000000000" "id:103,phase:1,deny,status:429,nolog"
SecRule GLOBAL:MODE "@streq lockdown" "id:104,phase:1,deny,status:503,nolog"
SecRule GLOBAL:ALERT_LEVEL "@gt 5" "id:105,phase:1,pass,nolog,setvar:tx.alert=1"
"""


# The same rules on TX variables: what the requests cost without persistent
# collections (the baseline row).
RULES_NO_COLLECTIONS = r"""SecRuleEngine On
SecAction "id:100,phase:1,nolog,pass,setvar:tx.client=%{ARGS.client},setvar:tx.hits=+1,setvar:tx.requests=+1"
SecRule TX:BLOCKED "@eq 1" "id:101,phase:1,deny,status:403,nolog"
SecRule TX:SCORE "@gt 90" "id:102,phase:1,deny,status:403,nolog"
SecRule TX:HITS "@gt 1000000000" "id:103,phase:1,deny,status:429,nolog"
SecRule TX:MODE "@streq lockdown" "id:104,phase:1,deny,status:503,nolog"
SecRule TX:ALERT_LEVEL "@gt 5" "id:105,phase:1,pass,nolog,setvar:tx.alert=1"
"""


USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) ctx-bench/1.0"

# CRS 3.3.4 with its DoS protection (REQUEST-912) switched on: the rule set of the
# incident, where every request reads the IP and GLOBAL records that the 901 rules open
# (keyed by address and User-Agent hash) and the 912 rules count requests in IP. The
# threshold is high enough that the benchmark's own requests are never blocked.
CRS3_DOS = r"""SecAction "id:900700,phase:1,nolog,pass,t:none,setvar:'tx.dos_burst_time_slice=60',setvar:'tx.dos_counter_threshold=100000000',setvar:'tx.dos_block_timeout=600'"
"""


def thread_cpu_seconds(pid, name):
    """utime + stime of the threads of `pid` called `name`, in seconds."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        if comm == name:
            fields = text.rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / bench.CLK_TCK


def client_ip(i):
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def write_corpus(work, clients):
    files = []
    for i in range(clients):
        path = os.path.join(work, f"get-{i}.http")
        with open(path, "wb") as f:
            f.write((f"GET /items/{i}?page=1&client={client_ip(i)} HTTP/1.1\r\n"
                     f"Host: localhost\r\nUser-Agent: {USER_AGENT}\r\nAccept: */*\r\n\r\n")
                    .encode())
        files.append(path)
    return files


def write_config(work, name, port, admin_port, backend_port, workers, store, rules=RULES):
    """A proxy configuration; `rules` is inline SecLang text or a list of rule files."""
    path = os.path.join(work, f"palisade-{name}.toml")
    lines = [
        "[server]",
        f"worker_threads = {workers}",
        "inspection_threads = 1",
        "",
        "[[listener]]",
        f"address = \"127.0.0.1:{port}\"",
        "",
        "[[upstream]]",
        'name = "backend"',
        f"servers = [\"127.0.0.1:{backend_port}\"]",
        "",
        "[store]",
        f"path = {bench.toml_str(store)}",
        "",
        "[admin]",
        f"address = \"127.0.0.1:{admin_port}\"",
        "",
        "[logs]",
        'level = "warn"',
        "",
    ]
    if isinstance(rules, str):
        lines += ["[[rules]]", "inline = '''", rules, "'''", ""]
    else:
        for f in rules:
            lines += ["[[rules]]", f"file = {bench.toml_str(f)}", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def metrics(admin_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-z_]+)(\{[^}]*\})? (\S+)$", line)
        if m and not m.group(2):
            out[m.group(1)] = float(m.group(3))
    return out


class Writer:
    """The outside writer: one long-lived `palisade ctx import --follow` process,
    the way a scoring service feeds the store, fed write lines on its standard input
    at `rate` lines per second (a commit every `batch` lines or 100 ms). `gate(now)`,
    when given, says whether lines are sent at monotonic time `now` (the interleaved
    open loop switches the writer on and off by windows); the process stays up
    between windows. Counts the lines it imported."""

    TICK = 0.01

    def __init__(self, args, work, store, clients, rate, batch, gate=None):
        self.args, self.work, self.store = args, work, store
        self.clients, self.rate, self.batch = clients, rate, batch
        self.gate = gate
        self.stop_ev = threading.Event()
        self.imported = 0
        self.sent = 0
        self.failures = 0
        self.elapsed = 0.0
        self.proc = None
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.lines = self.make_lines(4 * batch)

    def make_lines(self, count):
        now = int(time.time())
        out = []
        for n in range(count):
            if n % 50 == 0:
                line = {"app": "default", "collection": "GLOBAL", "key": "global",
                        "write": {"at": now, "timeout": 3600,
                                  "ops": [{"name": "alert_level", "op": {"set": str(n % 5)}}]}}
            else:
                line = {"app": "default", "collection": "IP",
                        "key": client_ip(n % (self.clients * 4)),
                        "write": {"at": now, "timeout": 3600,
                                  "ops": [{"name": "score", "op": {"set": str(n % 80)}}]}}
            out.append(json.dumps(line) + "\n")
        return out

    def loop(self):
        # This feeding thread only (Linux applies the call to the calling thread):
        # beside the load generator, off the proxy's CPU.
        try:
            os.sched_setaffinity(0, {int(bench.LOAD_CPU)})
        except (OSError, ValueError):
            pass
        start = time.monotonic()
        owed = 0.0
        last = start
        k = 0
        try:
            while not self.stop_ev.is_set():
                time.sleep(self.TICK)
                now = time.monotonic()
                if self.gate is not None and not self.gate(now):
                    owed, last = 0.0, now
                    continue
                owed += (now - last) * self.rate
                last = now
                n = int(owed)
                if n:
                    owed -= n
                    chunk = "".join(self.lines[(k + i) % len(self.lines)] for i in range(n))
                    k += n
                    self.proc.stdin.write(chunk)
                    self.proc.stdin.flush()
                    self.sent += n
        except (BrokenPipeError, OSError) as e:
            self.failures += 1
            bench.log(f"ctx: writer: {e}")
        self.elapsed = time.monotonic() - start

    def start(self):
        self.proc = subprocess.Popen(
            ["taskset", "-c", bench.LOAD_CPU] + WRITER_PRIORITY[self.args.writer_priority]
            + [self.args.palisade, "ctx", "--store", self.store, "import", "--follow",
               "--batch-lines", str(self.batch), "--batch-ms", "100", "-"],
            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        # A session of its own at autogroup nice 19, as a background service runs:
        # with autogroup scheduling on, `nice` orders processes only within their
        # session's group, and the writer would otherwise share the harness's group
        # and weigh as much as the proxy's whole group on the CPU it runs on.
        set_autogroup_nice(self.proc.pid, 19)
        self.thread.start()

    def stop(self):
        """Stops feeding, waits for the last commit; returns the lines imported per
        second of the run."""
        self.stop_ev.set()
        self.thread.join(timeout=120)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        m = re.search(r"imported (\d+) line", err or "")
        if self.proc.returncode != 0 or not m:
            self.failures += 1
            bench.log(f"ctx: writer: {(err or '').strip()[:300]}")
        else:
            self.imported = int(m.group(1))
        return self.imported / self.elapsed if self.elapsed > 0 else 0.0


def busy_cpu_seconds():
    """CPU time the whole machine spent busy (not idle or waiting on I/O)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / bench.CLK_TCK


def one_run(args, port, admin_port, pid, files, lua, writer, spread=False):
    """One closed-loop run. `spread`: wrk with 2 threads on any CPU (the CPU-budget
    series) instead of 1 thread on the load CPU."""
    where = {"cpu": None, "threads": 2} if spread else {}
    bench.run_wrk(port, files, 2, args.connections, lua, **where)  # warm-up
    time.sleep(0.5)
    m0 = metrics(admin_port)
    c0 = bench.cpu_seconds([pid])
    w0 = thread_cpu_seconds(pid, "store-writer")
    b0 = busy_cpu_seconds()
    t0 = time.monotonic()
    if writer:
        writer.start()
        time.sleep(0.5)
    r = bench.run_wrk(port, files, args.duration, args.connections, lua, **where)
    rate = writer.stop() if writer else 0.0
    cpu = bench.cpu_seconds([pid]) - c0
    busy_cores = (busy_cpu_seconds() - b0) / max(time.monotonic() - t0, 1e-9)
    writer_cpu = thread_cpu_seconds(pid, "store-writer") - w0
    m1 = metrics(admin_port)

    def d(name):
        return m1.get(name, 0.0) - m0.get(name, 0.0)

    reqs = d("palisade_request_seconds_count")
    r.update({
        "cpu_s": cpu,
        "proxy_cores": cpu / max(args.duration, 1),
        "busy_cores": busy_cores,
        "req_per_cpu_s": r["requests"] / cpu if cpu > 0 else None,
        "store_reads_per_req": d("palisade_store_reads_total") / reqs if reqs else None,
        "store_us_per_req": d("palisade_store_read_seconds_total") * 1e6 / reqs if reqs else None,
        "request_us": d("palisade_request_seconds_sum") * 1e6 / reqs if reqs else None,
        "store_share": (d("palisade_store_read_seconds_total") / d("palisade_request_seconds_sum")
                        if d("palisade_request_seconds_sum") > 0 else None),
        "store_cpu_share": (d("palisade_store_read_seconds_total") / cpu if cpu > 0 else None),
        "writer_thread_share": writer_cpu / cpu if cpu > 0 else None,
        "lock_waits": m1.get("palisade_store_write_lock_waits_on_request_path_total"),
        "writes_dropped": d("palisade_store_writes_dropped_queue_full_total"),
        "batches": d("palisade_store_batches_total"),
        "writer_rate": rate,
        "writer_failures": writer.failures if writer else 0,
    })
    return r


def interleaved_run(args, port, admin_port, rate, work, store):
    """One open-loop run at `rate` requests/s (oha, latency counted from when each
    request was due) of `--windows` windows of `--window` seconds, with the outside
    writer on in every other window (off in the first, which warms up and is not
    counted). Requests are sorted into windows by when they started, leaving out a
    margin at both ends of each window (a writer run started at the end of a window
    may finish in the next). The slow spells of a shared machine so fall on both
    conditions alike, which separate runs of several seconds each do not achieve."""
    keys = "|".join(client_ip(i) for i in range(args.clients))
    # oha escapes every `.` of the expression itself (so that host names stay literal).
    url = rf"http://127.0.0.1:{port}/items/[1-9][0-9]{{0,2}}\?page=1&client=(?:{keys})"
    headers = [f"User-Agent: {USER_AGENT}", "Accept: */*"]
    period, n = args.window, args.windows
    m0 = metrics(admin_port)
    proc, launched = bench.oha_fixed_rate_samples(url, headers, rate, period * n,
                                                  args.connections, rand_regex_url=True)

    def writer_on(now):
        k = int((now - launched) // period)
        return 0 < k < n and k % 2 == 1

    writer = Writer(args, work, store, args.clients, args.writer_rate, args.batch,
                    gate=writer_on)
    writer.start()
    try:
        rows = bench.oha_samples(proc, timeout=period * n + 60)
    finally:
        writer.stop()
    m1 = metrics(admin_port)
    margin = args.window_margin
    by = {"off": [], "on": []}
    windows = {"off": {}, "on": {}}
    non2xx = {"off": 0, "on": 0}
    for t, ms, status in rows:
        k = int(t // period)
        if k == 0 or k >= n or not margin <= t - k * period <= period - margin:
            continue
        cond = "on" if k % 2 == 1 else "off"
        by[cond].append(ms)
        windows[cond].setdefault(k, []).append(ms)
        if not 200 <= status < 300:
            non2xx[cond] += 1
    on_windows = sum(1 for k in range(1, n) if k % 2 == 1)
    out = {}
    for cond in ("off", "on"):
        v = sorted(by[cond])
        per_window = [bench.percentile(sorted(w), 99) for _, w in sorted(windows[cond].items())]
        out[cond] = {
            "rate": rate,
            "requests": len(v),
            "windows": len(per_window),
            "counted_s": len(per_window) * (period - 2 * margin),
            "p50_ms": bench.percentile(v, 50),
            "p99_ms": bench.percentile(v, 99),
            "p999_ms": bench.percentile(v, 99.9),
            "max_ms": v[-1] if v else None,
            "p99_windows": per_window,
            "p99_window_median": statistics.median(per_window) if per_window else None,
            "non2xx": non2xx[cond],
            "writer_rate": (writer.imported / (on_windows * period)
                            if cond == "on" and on_windows else 0.0),
            "writer_failures": writer.failures if cond == "on" else 0,
        }
    for cond in ("off", "on"):
        out[cond]["achieved"] = out[cond]["requests"] / max(out[cond]["counted_s"], 1e-9)
    out["expected"] = rate * period * (n - 1)
    out["answered"] = sum(1 for t, _, _ in rows if period <= t < period * n)
    out["lock_waits"] = (m1.get("palisade_store_write_lock_waits_on_request_path_total", 0.0)
                         - m0.get("palisade_store_write_lock_waits_on_request_path_total", 0.0))
    reads = m1.get("palisade_store_reads_total", 0.0) - m0.get("palisade_store_reads_total", 0.0)
    out["store_reads_per_req"] = reads / len(rows) if rows else None
    return out


def crs3_rules(work):
    """CRS 3.3.4 as the main benchmark loads it, with the DoS protection on."""
    dos = os.path.join(work, "crs3-dos.conf")
    with open(dos, "w") as f:
        f.write(CRS3_DOS)
    files = bench.palisade_rules("e", work)
    at = next(i for i, f in enumerate(files) if f.endswith("crs-setup.conf")) + 1
    return files[:at] + [dos] + files[at:]


# How the outside writer's processes are started (--writer-priority).
def set_autogroup_nice(pid, nice):
    """Sets the scheduling weight of `pid`'s autogroup (its session) to that of `nice`,
    where the kernel groups by session (/proc/sys/kernel/sched_autogroup_enabled);
    best effort elsewhere."""
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        pass


WRITER_PRIORITY = {"nice": ["nice", "-n", "19"], "idle": ["chrt", "-i", "0"]}
WRITER_WORDS = {"nice": "at nice 19 in a session of its own at autogroup nice 19, a "
                        "background service",
                "idle": "in SCHED_IDLE, `--writer-priority idle`: CPU only when nothing else runs"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--writer-rate", type=float, default=5000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--writer-priority", choices=sorted(WRITER_PRIORITY), default="nice",
                    help="the outside writer at nice 19 (nice) or in SCHED_IDLE (idle: "
                         "it runs only when the CPU has nothing else to do, which tells "
                         "the store's effect on latency from the writer's CPU use)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs without and with the writer, alternating (medians reported)")
    ap.add_argument("--palisade", default=os.path.join(bench.REPO, "target/release/palisade"))
    ap.add_argument("--albedo", default=os.path.join(bench.REPO, "target/release/albedo"))
    ap.add_argument("--fixed-fraction", type=float, default=0.5,
                    help="the open-loop runs' rate as a fraction of the first worker count's "
                         "closed-loop req/s without the writer")
    ap.add_argument("--fixed-rate", type=int, default=0,
                    help="the open-loop runs' rate in req/s (overrides --fixed-fraction)")
    ap.add_argument("--no-crs3", action="store_true",
                    help="skip the CRS 3.3.4 (DoS protection on) scaling runs")
    ap.add_argument("--budget", type=float, default=0.4,
                    help="the scaling series under a CPU budget: this many CPUs of time per "
                         "worker from a cgroup's CPU quota (0: skip the series)")
    ap.add_argument("--window", type=float, default=3.0,
                    help="the open loop's windows, in seconds: the writer is on in every "
                         "other one")
    ap.add_argument("--windows", type=int, default=31,
                    help="windows of the open-loop run (the first warms up and is not "
                         "counted; then the writer is on, off, on, ...)")
    ap.add_argument("--window-margin", type=float, default=0.5,
                    help="seconds left out at both ends of each window")
    ap.add_argument("--out-md", default=None, help="also write the report section here")
    ap.add_argument("--smoke", action="store_true",
                    help="2 s runs, one worker count: checks that the benchmark works")
    args = ap.parse_args()
    if args.smoke:
        args.duration, args.workers, args.rounds, args.windows = 2, "1", 1, 5
    work = tempfile.mkdtemp(prefix="palisade-ctx-bench-")
    lua = os.path.join(bench.BENCH, "wrk", "corpus.lua")
    results, fixed, crs = {}, {}, {}
    baseline = None
    budgeted = {}
    try:
        bport = bench.free_port()
        backend = bench.Proc("albedo", [args.albedo, "--bind", f"127.0.0.1:{bport}"], work,
                             cpu=bench.LOAD_CPU)
        bench.wait_port(bport, backend)
        files = write_corpus(work, args.clients)
        have_oha = shutil.which("oha") is not None
        if not have_oha:
            bench.log("ctx: oha is not installed: no open-loop (fixed-rate) runs")
        rate = None
        for workers in [int(w) for w in args.workers.split(",")]:
            name = f"w{workers}"
            store = os.path.join(work, f"store-{name}")
            port, admin_port = bench.free_port(), bench.free_port()
            cfg = write_config(work, name, port, admin_port, bport, workers, store)
            cpu = bench.SUT_CPU if workers == 1 else None
            proc = bench.Proc(f"palisade-{name}", [args.palisade, "run", "--config", cfg], work,
                              cpu=cpu)
            bench.wait_port(port, proc)
            try:
                alone, loaded = [], []
                # Rounds alternate without and with the writer, so that a slow spell of
                # the shared machine falls on both.
                for k in range(args.rounds):
                    bench.log(f"ctx: {workers} worker(s), round {k + 1}, no writer ...")
                    alone.append(one_run(args, port, admin_port, proc.pid, files, lua, None))
                    bench.log(f"ctx: {workers} worker(s), round {k + 1}, writer at "
                              f"{args.writer_rate:g}/s ...")
                    w = Writer(args, work, store, args.clients, args.writer_rate, args.batch)
                    loaded.append(one_run(args, port, admin_port, proc.pid, files, lua, w))
                results[workers] = (combine(alone), combine(loaded))
                if have_oha:
                    if rate is None:
                        rate = args.fixed_rate or max(100, int(results[workers][0]["rps"]
                                                               * args.fixed_fraction))
                    bench.log(f"ctx: {workers} worker(s), {rate} req/s open loop, "
                              f"{args.windows} windows of {args.window:g} s, the writer at "
                              f"{args.writer_rate:g}/s in every other one ...")
                    fixed[workers] = interleaved_run(args, port, admin_port, rate, work, store)
            finally:
                proc.stop()
        if not args.smoke:
            # The same requests and rules on TX variables, one worker: the baseline.
            port, admin_port = bench.free_port(), bench.free_port()
            cfg = write_config(work, "base", port, admin_port, bport, 1,
                               os.path.join(work, "store-base"), RULES_NO_COLLECTIONS)
            proc = bench.Proc("palisade-base", [args.palisade, "run", "--config", cfg], work,
                              cpu=bench.SUT_CPU)
            bench.wait_port(port, proc)
            try:
                bench.log("ctx: 1 worker, no collections (baseline) ...")
                baseline = combine([one_run(args, port, admin_port, proc.pid, files, lua, None)
                                    for _ in range(args.rounds)])
            finally:
                proc.stop()
        if not args.no_crs3:
            # CRS 3.3.4 with DoS protection: the proxy's scaling on a rule set where the
            # rules, not the load generator, are most of the work.
            rules = crs3_rules(work)
            for workers in ([1] if args.smoke else [int(w) for w in args.workers.split(",")]):
                name = f"crs3-w{workers}"
                port, admin_port = bench.free_port(), bench.free_port()
                cfg = write_config(work, name, port, admin_port, bport, workers,
                                   os.path.join(work, f"store-{name}"), rules)
                cpu = bench.SUT_CPU if workers == 1 else None
                proc = bench.Proc(f"palisade-{name}", [args.palisade, "run", "--config", cfg],
                                  work, cpu=cpu)
                bench.wait_port(port, proc, timeout=60)
                try:
                    bench.log(f"ctx: CRS 3.3.4 with DoS protection, {workers} worker(s) ...")
                    crs[workers] = combine([one_run(args, port, admin_port, proc.pid, files,
                                                    lua, None) for _ in range(args.rounds)])
                finally:
                    proc.stop()
        if args.budget > 0 and not args.smoke:
            budgeted = budget_series(args, work, bport, backend, files, lua)
    finally:
        bench.stop_all()
        shutil.rmtree(work, ignore_errors=True)

    md = render(args, results, baseline, fixed, crs, budgeted)
    print(md)
    if args.out_md:
        with open(args.out_md, "w") as fh:
            fh.write(md)
    broken = []
    for workers, runs in results.items():
        for label, r in zip(("without", "with"), runs):
            if r["non2xx"] or r["socket_errors"]:
                broken.append(f"{workers} worker(s) {label} the writer: "
                              f"{r['non2xx']} non-2xx answers, {r['socket_errors']} socket errors")
            if r["lock_waits"]:
                broken.append(f"{workers} worker(s) {label} the writer: "
                              f"{r['lock_waits']:.0f} write-lock waits on the request path")
            if r["writer_failures"]:
                broken.append(f"{workers} worker(s): the writer failed {r['writer_failures']} time(s)")
    for workers, r in fixed.items():
        for cond in ("off", "on"):
            if r[cond]["non2xx"]:
                broken.append(f"open loop, {workers} worker(s), writer {cond}: "
                              f"{r[cond]['non2xx']} non-2xx answers")
        if r["on"]["writer_failures"]:
            broken.append(f"open loop, {workers} worker(s): the writer failed "
                          f"{r['on']['writer_failures']} time(s)")
        # oha lists only answered requests: a shortfall means requests that failed.
        if r["answered"] < 0.99 * r["expected"]:
            broken.append(f"open loop, {workers} worker(s): {r['answered']} requests answered "
                          f"of {r['expected']:.0f} offered")
        if r["lock_waits"]:
            broken.append(f"open loop, {workers} worker(s): {r['lock_waits']:.0f} write-lock "
                          "waits on the request path")
    for label, runs in budgeted.items():
        for workers, r in runs.items():
            if r["non2xx"] or r["socket_errors"]:
                broken.append(f"{label}, {workers} worker(s) under the CPU budget: "
                              f"{r['non2xx']} non-2xx answers, {r['socket_errors']} socket errors")
    for workers, r in crs.items():
        if r["non2xx"] or r["socket_errors"]:
            broken.append(f"CRS 3.3.4, {workers} worker(s): {r['non2xx']} non-2xx answers, "
                          f"{r['socket_errors']} socket errors")
        if not r["store_reads_per_req"]:
            broken.append(f"CRS 3.3.4, {workers} worker(s): no store reads (the DoS rules "
                          "did not open the IP collection)")
    for b in broken:
        bench.log(f"ctx: BROKEN: {b}")
    return 1 if broken else 0


def budget_series(args, work, bport, backend, files, lua):
    """Worker scaling with the proxy's CPU time fixed per worker: palisade in a cgroup
    whose CPU quota is `--budget` CPUs per worker, its worker threads pinned to CPUs 0
    and 1, wrk (2 threads) and albedo on both CPUs in the time left, the same for 1 and
    2 workers; no outside writer. On this 2-CPU machine the load generator and the
    backend otherwise take the second worker's core (see bench/cores.py). Returns
    {rule set: {workers: combined runs}}; empty when no cgroup can be made."""
    try:
        bench.CpuBudget(f"palisade-ctx-probe-{os.getpid()}", args.budget).remove()
    except OSError as e:
        bench.log(f"ctx: no CPU budget series ({e})")
        return {}
    sets = [("collection rules", RULES)]
    if not args.no_crs3:
        sets.append(("CRS 3.3.4 with DoS protection", crs3_rules(work)))
    subprocess.run(["taskset", "-p", "-a", "-c", "0,1", str(backend.pid)], check=True,
                   capture_output=True)
    out = {}
    try:
        for label, rules in sets:
            out[label] = {}
            for workers in (1, 2):
                name = f"budget-{len(out)}-w{workers}"
                port, admin_port = bench.free_port(), bench.free_port()
                cfg = write_config(work, name, port, admin_port, bport, workers,
                                   os.path.join(work, f"store-{name}"), rules)
                proc = bench.Proc(f"palisade-{name}", [args.palisade, "run", "--config", cfg],
                                  work)
                group = None
                try:
                    bench.wait_port(port, proc, timeout=60)
                    bench.pin_workers(proc.pid, workers)
                    group = bench.CpuBudget(f"palisade-ctx-{proc.pid}", args.budget * workers)
                    group.add(proc.pid)
                    bench.log(f"ctx: {label}, {workers} worker(s), CPU budget "
                              f"{args.budget * workers:g} ...")
                    out[label][workers] = combine([
                        one_run(args, port, admin_port, proc.pid, files, lua, None,
                                spread=True) for _ in range(args.rounds)])
                finally:
                    proc.stop()
                    if group is not None:
                        group.remove()
    finally:
        subprocess.run(["taskset", "-p", "-a", "-c", bench.LOAD_CPU, str(backend.pid)],
                       capture_output=True)
    return out


def combine(runs):
    """One row from several runs: medians of rates and latencies, worst of the
    counters that must stay 0, sums of failures."""
    def med(key):
        vals = [r[key] for r in runs if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    out = {k: med(k) for k in ("rps", "req_per_cpu_s", "p50_ms", "p99_ms", "store_us_per_req",
                                "proxy_cores", "busy_cores",
                                "store_reads_per_req", "request_us", "store_share",
                                "store_cpu_share", "writer_thread_share", "writer_rate")}
    out["p99_runs"] = [r["p99_ms"] for r in runs]
    out["lock_waits"] = max((r["lock_waits"] or 0) for r in runs)
    for k in ("non2xx", "socket_errors", "writer_failures", "writes_dropped"):
        out[k] = sum(r[k] for r in runs)
    return out


def render(args, results, baseline=None, fixed=None, crs=None, budgeted=None):
    """The BENCHMARKS.md section."""
    fixed, crs = fixed or {}, crs or {}

    def f(v, spec):
        return "n/a" if v is None else spec.format(v)

    def ratio(a, b):
        return a / b if a and b else float("nan")

    md = ["## Persistent collections under an outside writer", ""]
    md.append("Written by `bench/ctx.py` (run by `scripts/bench`; alone: `python3 bench/ctx.py`). "
              "The incident this reproduces: per-client context in shared collections, read on "
              "every request by many workers while an outside service writes into the same "
              "store; with reads inside write transactions every worker queued on one lock.")
    md.append("")
    md.append(f"- When: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average at "
              f"the start {' '.join(f'{x:.2f}' for x in os.getloadavg())} (a shared machine: "
              "compare ratios within one run).")
    md.append("- Rules (every request passes, phase 1): `initcol:ip=%{ARGS.client}`, "
              "`initcol:global=global`, `setvar:ip.hits=+1`, `setvar:global.requests=+1`, and "
              "rules reading IP:BLOCKED, IP:SCORE, IP:HITS, GLOBAL:MODE, GLOBAL:ALERT_LEVEL: two "
              "record reads and two counter writes per request (the GLOBAL record written by "
              "every request).")
    md.append(f"- {args.clients} client keys (query argument `client`). Outside writer: another "
              f"process ({WRITER_WORDS[args.writer_priority]}), one long-lived `palisade ctx "
              f"import --follow` fed write lines on its standard input (`score` set on client "
              f"records, `alert_level` on GLOBAL) at {args.writer_rate:g} lines/s, committing "
              f"every {args.batch} lines or 100 ms, through the same LMDB store.")
    md.append(f"- **Closed loop**: {args.rounds} rounds alternating without and with the "
              f"writer, {args.duration} s per run (medians; every run's p99 in brackets), wrk, "
              f"{args.connections} connections, after a 2 s warm-up: as many requests as the "
              "proxy can take, for throughput and CPU cost. At saturation a client's p99 is "
              "mostly queueing behind a full CPU.")
    md.append(f"- **Open loop**, where the latency target is judged: oha, {args.connections} "
              "connections, a fixed rate of "
              f"{f(args.fixed_rate or None, '{} req/s') if args.fixed_rate else f'{args.fixed_fraction:.0%} of the one-worker closed-loop rate'}, "
              "`--latency-correction` (a request's latency counts from when it was due, so a "
              f"stall shows in every request it delays). One run of {args.windows} windows of "
              f"{args.window:g} s: the first warms up and is not counted, then the writer is on "
              "in one window and off in the next, and each request counts for the window it "
              f"started in, leaving out {args.window_margin:g} s at both ends of each window. "
              "On this shared machine separate runs of several seconds differed in p99 by up "
              "to 10x without any writer; interleaved windows put the machine's slow spells "
              "on both conditions alike.")
    md.append("- One worker: the proxy on CPU 0, the load generator, albedo and the writer on "
              "CPU 1. Two workers: the proxy may use both CPUs and shares them with the load "
              "(the machine has two cores).")
    md.append("- Store time: the store's read counters (`palisade_store_read_seconds_total`) over "
              "the proxy's request time (`palisade_request_seconds_sum`: arrival to end of "
              "response, as a client waits) and over the proxy's CPU time (utime + stime). Lock "
              "waits: `palisade_store_write_lock_waits_on_request_path_total`.")
    md.append("")
    md.append("Closed loop:")
    md.append("")
    md.append("| workers | writer | req/s | req/CPU-s | p50 ms | p99 ms (runs) | store us/req "
              "| store reads/req | request us | store / request time | store / proxy CPU "
              "| writer thread / proxy CPU | lock waits | writer updates/s | non-2xx |")
    md.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = [(w, label, r) for w, runs in results.items() for label, r in zip(("off", "on"), runs)]
    if baseline:
        rows.append((1, "no collections (rules on TX)", baseline))
    for workers, label, r in rows:
        p99s = ", ".join(f"{v:.1f}" for v in r["p99_runs"] if v is not None)
        md.append(
            f"| {workers} | {label} | {f(r['rps'], '{:,.0f}')} "
            f"| {f(r['req_per_cpu_s'], '{:,.0f}')} "
            f"| {f(r['p50_ms'], '{:.2f}')} | {f(r['p99_ms'], '{:.2f}')} ({p99s}) "
            f"| {f(r['store_us_per_req'], '{:.2f}')} | {f(r['store_reads_per_req'], '{:.2f}')} "
            f"| {f(r['request_us'], '{:.0f}')} | {f(r['store_share'], '{:.2%}')} "
            f"| {f(r['store_cpu_share'], '{:.2%}')} | {f(r['writer_thread_share'], '{:.2%}')} "
            f"| {f(r['lock_waits'], '{:.0f}')} | {f(r['writer_rate'], '{:,.0f}')} "
            f"| {r['non2xx'] + r['socket_errors']} |")
    md.append("")
    if fixed:
        md.append("Open loop (fixed rate, one run per worker count, the writer on in every "
                  "other window; p99 over all counted requests of each condition, and the "
                  "median and range of the windows' own p99):")
        md.append("")
        md.append("| workers | writer | offered req/s | windows | requests | p50 ms | p99 ms "
                  "| p99 of a window: median (min-max) ms | p99.9 ms | max ms "
                  "| store reads/req | lock waits | writer updates/s | non-2xx |")
        md.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for workers, run in fixed.items():
            for cond in ("off", "on"):
                r = run[cond]
                w = r["p99_windows"]
                spread = f"{min(w):.2f}-{max(w):.2f}" if w else "n/a"
                md.append(
                    f"| {workers} | {cond} | {f(r['rate'], '{:,.0f}')} | {r['windows']} "
                    f"| {r['requests']:,} | {f(r['p50_ms'], '{:.2f}')} "
                    f"| {f(r['p99_ms'], '{:.2f}')} "
                    f"| {f(r['p99_window_median'], '{:.2f}')} ({spread}) "
                    f"| {f(r['p999_ms'], '{:.2f}')} | {f(r['max_ms'], '{:.1f}')} "
                    f"| {f(run['store_reads_per_req'], '{:.2f}')} "
                    f"| {f(run['lock_waits'], '{:.0f}')} | {f(r['writer_rate'], '{:,.0f}')} "
                    f"| {r['non2xx']} |")
        md.append("")
    if crs:
        md.append("CRS 3.3.4 with its DoS protection on (closed loop, no outside writer; the 901 "
                  "rules open IP, keyed by address and User-Agent, and GLOBAL; the 912 rules "
                  "count requests in IP):")
        md.append("")
        md.append("| workers | req/s | req/CPU-s | proxy cores | machine busy cores | p50 ms "
                  "| p99 ms (runs) | store reads/req | store / proxy CPU | lock waits | non-2xx |")
        md.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for workers, r in crs.items():
            p99s = ", ".join(f"{v:.1f}" for v in r["p99_runs"] if v is not None)
            md.append(
                f"| {workers} | {f(r['rps'], '{:,.0f}')} | {f(r['req_per_cpu_s'], '{:,.0f}')} "
                f"| {f(r['proxy_cores'], '{:.2f}')} | {f(r['busy_cores'], '{:.2f}')} "
                f"| {f(r['p50_ms'], '{:.2f}')} | {f(r['p99_ms'], '{:.2f}')} ({p99s}) "
                f"| {f(r['store_reads_per_req'], '{:.2f}')} "
                f"| {f(r['store_cpu_share'], '{:.2%}')} | {f(r['lock_waits'], '{:.0f}')} "
                f"| {r['non2xx'] + r['socket_errors']} |")
        md.append("")
    md.append("Against the targets:")
    md.append("")
    for workers, (alone, loaded) in results.items():
        line = f"- {workers} worker(s): "
        if workers in fixed:
            fa, fl = fixed[workers]["off"], fixed[workers]["on"]
            line += (f"open-loop p99 with the writer / without = "
                     f"{ratio(fl['p99_ms'], fa['p99_ms']):.2f} (target <= 1.2; "
                     f"{fa['p99_ms']:.2f} -> {fl['p99_ms']:.2f} ms; the windows' median p99 "
                     f"{ratio(fl['p99_window_median'], fa['p99_window_median']):.2f}); ")
        line += (f"closed-loop p99 with the writer / without = "
                 f"{ratio(loaded['p99_ms'], alone['p99_ms']):.2f} (at saturation); store time "
                 f"{f(loaded['store_share'], '{:.2%}')} of request time (target <= 2%), "
                 f"{f(loaded['store_cpu_share'], '{:.2%}')} of the proxy's CPU time; requests "
                 f"that waited on a write lock: {f(loaded['lock_waits'], '{:.0f}')} (target 0).")
        md.append(line)
    if 1 in crs and 2 in crs:
        a, b = crs[1], crs[2]
        md.append(f"- 2 workers / 1 worker, CRS 3.3.4 with DoS protection: req/s "
                  f"{ratio(b['rps'], a['rps']):.2f}x (target >= 1.8x), requests per "
                  f"CPU-second {ratio(b['req_per_cpu_s'], a['req_per_cpu_s']):.2f}x. The "
                  f"machine was busy {f(a['busy_cores'], '{:.2f}')} and "
                  f"{f(b['busy_cores'], '{:.2f}')} cores of 2: with 2 workers the proxy "
                  f"took {f(b['proxy_cores'], '{:.2f}')} cores and the load generator "
                  "(wrk with its corpus script) and the backend the rest, so the ratio "
                  "measures the machine, not the proxy, whose cost per request stays "
                  "the same (requests per CPU-second).")
    if 1 in results and 2 in results:
        a, b = results[1][0], results[2][0]
        md.append(f"- 2 workers / 1 worker, the collection rules alone, without the writer: "
                  f"req/s {ratio(b['rps'], a['rps']):.2f}x, requests per CPU-second "
                  f"{ratio(b['req_per_cpu_s'], a['req_per_cpu_s']):.2f}x (here the proxy costs "
                  "about as much per request as the load generator and the backend together, "
                  "which share the same two cores: the ratio is a floor, not the proxy's "
                  "scaling).")
    for label, runs in (budgeted or {}).items():
        if 1 in runs and 2 in runs:
            a, b = runs[1], runs[2]
            md.append(f"- 2 workers / 1 worker under a CPU budget of {args.budget:g} CPU per "
                      f"worker ({label}, no writer; the proxy in a cgroup whose CPU quota is "
                      f"{args.budget:g} and {2 * args.budget:g} CPUs, its workers pinned to CPUs 0 and "
                      f"1, wrk and albedo on both CPUs in the time left, so that the harness "
                      f"does not take the second worker's core): req/s "
                      f"{ratio(b['rps'], a['rps']):.2f}x (target >= 1.8x; "
                      f"{f(a['rps'], '{:,.0f}')} -> {f(b['rps'], '{:,.0f}')}), requests per "
                      f"CPU-second {ratio(b['req_per_cpu_s'], a['req_per_cpu_s']):.2f}x, the "
                      f"proxy busy {f(a['proxy_cores'], '{:.2f}')} and "
                      f"{f(b['proxy_cores'], '{:.2f}')} CPUs; lock waits "
                      f"{f(b['lock_waits'], '{:.0f}')}.")
    if baseline and 1 in results:
        a = results[1][0]
        md.append(f"- Persistent collections against the same rules on TX (1 worker, no writer): "
                  f"requests per CPU-second {ratio(a['req_per_cpu_s'], baseline['req_per_cpu_s']):.2f}x "
                  f"(the proxy's CPU includes its store writer thread).")
    md.append("")
    return "\n".join(md) + "\n"


if __name__ == "__main__":
    sys.exit(main())
