#!/usr/bin/env python3
"""Side-by-side benchmark of palisade against nginx and nginx + ModSecurity (issue 4).

Called by scripts/bench, which installs the tools and builds the binaries first. Runs
everything on 127.0.0.1 with free ports: the system under test pinned to CPU 0, wrk,
oha and the backend pinned to CPU 1. Every run has a bounded duration and every
process it starts is stopped at the end, also on error or Ctrl-C.

Configurations:
  a  backend directly (albedo)
  b  palisade, no rules
  c  palisade, engine on, no rules
  d  palisade + CRS v4 (../shared/crs, PL1, blocking)
  e  palisade + CRS 3.3.4 (Debian's modsecurity-crs)
  f  nginx, plain proxy
  g  nginx + libnginx-mod-http-modsecurity + CRS 3.3.4 (worker_processes 1)

The last line printed is exactly:
  bench: crs-v4 GET R1 req/cpu-s; modsec-crs3 GET R2 req/cpu-s; ratio R1/R2 = X
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "bench")
CORPUS = os.path.join(BENCH, "corpus")
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared"))
CRS4 = os.path.join(SHARED, "crs")
CRS3_RULES = "/usr/share/modsecurity-crs/rules"
CRS3_ETC = "/etc/modsecurity/crs"
MODSEC_MODULE = "/usr/lib/nginx/modules/ngx_http_modsecurity_module.so"
CLK_TCK = os.sysconf("SC_CLK_TCK")

SUT_CPU = "0"
LOAD_CPU = "1"

CONFIGS = {
    "a": "backend directly",
    "b": "palisade, no rules",
    "c": "palisade, engine on, no rules",
    "d": "palisade + CRS v4 PL1",
    "e": "palisade + CRS 3.3.4",
    "f": "nginx, plain proxy",
    "g": "nginx + ModSecurity + CRS 3.3.4",
}
WAF_CONFIGS = {"d", "e", "g"}


ATTACKS = ["attack-sqli", "attack-xss", "attack-traversal", "attack-log4shell"]
BENIGN = ["get", "form", "json"]


def corpus_path(name):
    return os.path.join(CORPUS, name + ".http")


def mix_files():
    """A cycle of 80 requests: 48 GET, 16 form POST, 12 JSON POST, 4 attacks (5%)."""
    cycle = []
    attacks = iter(ATTACKS)
    for k in range(80):
        if k % 20 == 10:
            cycle.append(next(attacks))
        elif k % 5 in (1, 3) and len([c for c in cycle if c == "form"]) < 16:
            cycle.append("form")
        elif k % 20 in (4, 9, 14) and len([c for c in cycle if c == "json"]) < 12:
            cycle.append("json")
        else:
            cycle.append("get")
    return [corpus_path(n) for n in cycle]


# The varying corpus (bench/gen_varying.py), written at bench time; not committed.
VARYING_DIR = os.path.join(REPO, "target", "bench-corpus", "varying")
# The seed of wrk's shuffled order over the varying corpus.
VARYING_SEED = 1
VARYING_PREFIX = "varying "


class Varying:
    """A series of the varying corpus: the generator's kinds it sends, shuffled."""

    def __init__(self, kinds):
        self.kinds = kinds


REQUESTS = {
    "GET": [corpus_path("get")],
    "form POST 2 KiB": [corpus_path("form")],
    "JSON POST 20 KiB": [corpus_path("json")],
    "mix 5% attacks": None,  # filled by mix_files()
    VARYING_PREFIX + "GET": Varying(["get-page", "get-asset", "get-api"]),
    VARYING_PREFIX + "form POST": Varying(["form", "multipart"]),
    VARYING_PREFIX + "JSON POST": Varying(["json"]),
}


def is_varying(req_name):
    return req_name.startswith(VARYING_PREFIX)


def varying_summary():
    """Per varying series: (requests, mean bytes, largest bytes) from the manifest."""
    sizes = {}
    with open(os.path.join(VARYING_DIR, "manifest.tsv")) as f:
        for line in f:
            if line.startswith("#"):
                continue
            _, kind, size = line.rstrip("\n").split("\t")
            sizes.setdefault(kind, []).append(int(size))
    out = {}
    for rn, series in REQUESTS.items():
        if isinstance(series, Varying):
            v = [x for k in series.kinds for x in sizes.get(k, [])]
            if v:
                out[rn] = (len(v), sum(v) / len(v), max(v))
    return out


def log(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------------------
# Processes


def share_scheduling_group(pid):
    """Gives a child started in its own session the benchmark's scheduling weight.

    With autogroup scheduling on (/proc/sys/kernel/sched_autogroup_enabled), every
    session is a group that gets an equal share of the CPUs whatever its processes'
    nice values. A child started with start_new_session=True would compete as a group
    of its own at the default weight against any other job on the machine; copying the
    benchmark's own group weight (set it with `echo -10 > /proc/self/autogroup` before
    starting, as root) keeps the proxy, the backend and the load generator at the
    priority the benchmark was started with. Best effort: without autogroups or the
    right to set them nothing changes.
    """
    try:
        with open("/proc/self/autogroup") as f:
            nice = f.read().split()[-1]
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(nice)
    except (OSError, IndexError):
        pass


class Proc:
    """A child process started by the benchmark; stopped by stop() or at exit."""

    live = []

    def __init__(self, name, argv, work, cpu=None, env=None):
        self.name = name
        if cpu is not None:
            argv = ["taskset", "-c", cpu] + argv
        self.out_path = os.path.join(work, f"{name}.out")
        self.err_path = os.path.join(work, f"{name}.err")
        self.out = open(self.out_path, "wb")
        self.err = open(self.err_path, "wb")
        self.p = subprocess.Popen(
            argv, stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True)
        share_scheduling_group(self.p.pid)
        Proc.live.append(self)

    @property
    def pid(self):
        return self.p.pid

    def alive(self):
        return self.p.poll() is None

    def stop(self, timeout=10):
        if self.p.poll() is None:
            try:
                self.p.send_signal(signal.SIGTERM)
                self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=5)
        self.out.close()
        self.err.close()
        if self in Proc.live:
            Proc.live.remove(self)

    def tail(self, n=20):
        out = []
        for path in (self.out_path, self.err_path):
            try:
                with open(path, "rb") as f:
                    out += f.read().decode("utf-8", "replace").splitlines()[-n:]
            except OSError:
                pass
        return "\n".join(out)


def stop_all():
    for p in list(Proc.live):
        try:
            p.stop(timeout=5)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and not proc.alive():
            raise RuntimeError(f"{proc.name} exited during start-up:\n{proc.tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


def children(pid):
    """Direct children of a process (nginx workers of the master)."""
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def cpu_seconds(pids):
    """utime + stime of the processes (all their threads), in seconds."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # Fields after the command: state is index 0; utime and stime are 11, 12.
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / CLK_TCK


def vm_hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


# ---------------------------------------------------------------------------
# Systems under test


class CpuBudget:
    """A cgroup that caps the CPU time of the processes put in it: `cpus` CPUs' worth per
    period (cgroup v2 `cpu.max`, or cgroup v1's `cpu.cfs_quota_us`), at a high weight so
    that other jobs on the machine do not take the budget away. Needs root."""

    PERIOD_US = 20_000

    def __init__(self, name, cpus):
        quota = max(1000, int(cpus * self.PERIOD_US))
        v2 = "/sys/fs/cgroup"
        v1 = "/sys/fs/cgroup/cpu"
        if os.path.exists(os.path.join(v2, "cgroup.controllers")):
            with open(os.path.join(v2, "cgroup.controllers")) as f:
                if "cpu" not in f.read().split():
                    raise OSError("cgroup v2 without the cpu controller")
            try:
                self._write(os.path.join(v2, "cgroup.subtree_control"), "+cpu")
            except OSError:
                pass
            self.path = os.path.join(v2, name)
            os.makedirs(self.path, exist_ok=True)
            self._write(os.path.join(self.path, "cpu.max"), f"{quota} {self.PERIOD_US}")
            self._write(os.path.join(self.path, "cpu.weight"), "10000")
            self.parent = v2
        elif os.path.isdir(v1):
            self.path = os.path.join(v1, name)
            os.makedirs(self.path, exist_ok=True)
            self._write(os.path.join(self.path, "cpu.cfs_period_us"), str(self.PERIOD_US))
            self._write(os.path.join(self.path, "cpu.cfs_quota_us"), str(quota))
            self._write(os.path.join(self.path, "cpu.shares"), "262144")
            self.parent = v1
        else:
            raise OSError("no cgroup cpu controller mounted")
        self.cpus = quota / self.PERIOD_US

    @staticmethod
    def _write(path, text):
        with open(path, "w") as f:
            f.write(text)

    def add(self, pid):
        """Moves process `pid` (all its threads) into the group."""
        self._write(os.path.join(self.path, "cgroup.procs"), str(pid))

    def throttled(self):
        """Periods in which the group ran out of its budget, so far."""
        with open(os.path.join(self.path, "cpu.stat")) as f:
            for line in f:
                k, _, v = line.partition(" ")
                if k == "nr_throttled":
                    return int(v)
        return 0

    def remove(self):
        """Moves what is left back to the parent group and deletes the group."""
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                pids = f.read().split()
            for pid in pids:
                try:
                    self._write(os.path.join(self.parent, "cgroup.procs"), pid)
                except OSError:
                    pass
            os.rmdir(self.path)
        except OSError:
            pass


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


def pin_workers(pid, n):
    """Pins palisade's worker thread N (`palisade-wN`) to CPU N, for N below `n`."""
    for i, tid in enumerate(worker_tids(pid, n)):
        subprocess.run(["taskset", "-p", "-c", str(i), str(tid)], check=True,
                       capture_output=True)


class System:
    """One configuration: started, measured (pids), stopped."""

    def __init__(self, key, port, proc, pids_fn, note=""):
        self.key = key
        self.port = port
        self.proc = proc
        self.pids_fn = pids_fn
        self.note = note

    def pids(self):
        return self.pids_fn()

    def peak_rss_kib(self):
        """Largest VmHWM among the processes (the nginx worker; palisade itself)."""
        vals = [v for v in (vm_hwm_kib(p) for p in self.pids()) if v]
        return max(vals) if vals else None

    def stop(self):
        if self.proc is not None:
            self.proc.stop()


def palisade_rules(key, work):
    base = os.path.join(BENCH, "rules", "base.conf")
    if key == "b":
        return []
    if key == "c":
        return [os.path.join(BENCH, "rules", "engine-only.conf")]
    if key == "d":
        return [base, os.path.join(CRS4, "crs-setup.conf.example"),
                os.path.join(CRS4, "rules", "*.conf")]
    if key == "e":
        return [base, os.path.join(CRS3_ETC, "crs-setup.conf"),
                os.path.join(CRS3_ETC, "REQUEST-900-EXCLUSION-RULES-BEFORE-CRS.conf"),
                os.path.join(CRS3_RULES, "*.conf"),
                os.path.join(CRS3_ETC, "RESPONSE-999-EXCLUSION-RULES-AFTER-CRS.conf")]
    raise ValueError(key)


def toml_str(s):
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def write_palisade_config(key, work, port, backend_port):
    lines = [
        f"# palisade for benchmark configuration ({key}): {CONFIGS[key]}",
        "[server]",
        "worker_threads = 1",
        "",
        "[[listener]]",
        f"address = {toml_str(f'127.0.0.1:{port}')}",
        "",
        "[[upstream]]",
        'name = "backend"',
        f"servers = [{toml_str(f'127.0.0.1:{backend_port}')}]",
        "keepalive = 32",
        "",
        "[logs]",
        f"error_log = {toml_str(os.path.join(work, f'palisade-{key}-error.log'))}",
        'level = "warn"',
        "",
        "# Persistent collections (CRS opens IP and GLOBAL) in the work directory.",
        "[store]",
        f"path = {toml_str(os.path.join(work, f'store-{key}'))}",
        "",
    ]
    for f in palisade_rules(key, work):
        lines += ["[[rules]]", f"file = {toml_str(f)}", ""]
    path = os.path.join(work, f"palisade-{key}.toml")
    with open(path, "w") as fh:
        fh.write("\n".join(lines))
    return path


def start_palisade(key, args, work, backend_port):
    port = free_port()
    cfg = write_palisade_config(key, work, port, backend_port)
    check = subprocess.run([args.palisade, "check", "--config", cfg],
                           capture_output=True, text=True, timeout=120)
    if check.returncode != 0:
        msg = (check.stderr or check.stdout).strip().splitlines()
        raise SkipConfig("palisade check failed: " + (msg[0] if msg else "?"))
    proc = Proc(f"palisade-{key}", [args.palisade, "run", "--config", cfg], work, cpu=SUT_CPU)
    wait_port(port, proc)
    return System(key, port, proc, lambda: [proc.pid])


def write_modsec_rules(work):
    """The rules file for (g): the same files, in the same order, as (e)."""
    lines = ["# ModSecurity rules for benchmark configuration (g)."]
    for f in palisade_rules("e", work):
        lines.append(f"Include {f}")
    path = os.path.join(work, "modsec-crs3.conf")
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def start_nginx(key, args, work, backend_port):
    port = free_port()
    with open(os.path.join(BENCH, "nginx", "nginx.conf.in")) as f:
        text = f.read()
    if key == "g":
        rules = write_modsec_rules(work)
        load = f"load_module {MODSEC_MODULE};"
        modsec = f"modsecurity on;\n        modsecurity_rules_file {rules};"
    else:
        load = ""
        modsec = ""
    text = (text.replace("@WORK@", work).replace("@NAME@", key)
            .replace("@PORT@", str(port)).replace("@BACKEND_PORT@", str(backend_port))
            .replace("@LOAD_MODULE@", load).replace("@MODSECURITY@", modsec))
    cfg = os.path.join(work, f"nginx-{key}.conf")
    with open(cfg, "w") as fh:
        fh.write(text)
    err = os.path.join(work, f"nginx-{key}-error.log")
    test = subprocess.run(["nginx", "-t", "-q", "-e", err, "-c", cfg, "-p", work],
                          capture_output=True, text=True, timeout=120)
    if test.returncode != 0:
        raise SkipConfig("nginx -t failed: " + (test.stderr.strip().splitlines() or ["?"])[-1])
    proc = Proc(f"nginx-{key}", ["nginx", "-e", err, "-c", cfg, "-p", work], work, cpu=SUT_CPU)
    wait_port(port, proc)
    # The worker is forked after the rules load; wait for it.
    deadline = time.time() + 30
    while not children(proc.pid) and time.time() < deadline:
        time.sleep(0.05)
    return System(key, port, proc, lambda: [proc.pid] + children(proc.pid))


def start_albedo(binary, work, cpu, who="bench"):
    """Starts the backend on a free port (pinned to `cpu`, or not with None);
    returns the process and its port."""
    backend = Proc("albedo", [binary, "--bind", "127.0.0.1:0"], work, cpu=cpu)
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(backend.out_path) as f:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", f.read())
        if m:
            return backend, int(m.group(1))
        if not backend.alive():
            raise SystemExit(f"{who}: albedo exited:\n{backend.tail()}")
        time.sleep(0.05)
    raise SystemExit(f"{who}: albedo did not report its port")


class SkipConfig(Exception):
    """A configuration that cannot run here (a tool or a rule set missing)."""


# What a configuration that broke raises: no start, no answer, a tool that failed or
# hung, output that cannot be read.
BROKEN = (RuntimeError, OSError, subprocess.SubprocessError, ValueError)


# ---------------------------------------------------------------------------
# Checks and load


def send_raw(port, path, timeout=10):
    """Sends one corpus request on a new connection; returns the status code."""
    with open(path, "rb") as f:
        data = f.read()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        buf = b""
        while b"\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    m = re.match(rb"HTTP/1\.[01] (\d{3})", buf)
    if not m:
        raise RuntimeError(f"no HTTP status from port {port} for {os.path.basename(path)}: {buf[:80]!r}")
    return int(m.group(1))


def verify(system):
    """Benign requests get 200 everywhere; attacks get 403 from the WAF configs."""
    problems = []
    for name in BENIGN + ATTACKS:
        want = 403 if (name in ATTACKS and system.key in WAF_CONFIGS) else 200
        got = send_raw(system.port, corpus_path(name))
        if got != want:
            problems.append(f"{name}: {got} (expected {want})")
    return problems


def answer_problems(key, req_name, r):
    """What a load run's answers say is broken (never a throughput figure): a benign
    request not answered 2xx, an attack answered neither 200 (no WAF) nor 403 (WAF).
    A run with no answer at all is not judged here (the slowest configurations may
    finish none in a smoke run's few seconds); the check after the runs is."""
    out = []
    if r["statuses"]:
        # Only the mix holds attacks; the varying corpus is benign by construction.
        allowed = {"200", "403"} if key in WAF_CONFIGS and not is_varying(req_name) else {"200"}
        odd = {c: n for c, n in r["statuses"].items() if c not in allowed}
        if odd:
            out.append("unexpected answers " + ", ".join(f"{c}: {n}" for c, n in odd.items()))
    elif r["non2xx"]:
        out.append(f"{r['non2xx']} benign requests were not answered 2xx")
    return out


def verify_notes_as_failures(verify_notes):
    return [f"verification: {n}" for n in verify_notes]


def parse_duration_ms(s):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", s)
    if not m:
        return None
    v = float(m.group(1))
    return v * {"us": 1e-3, "ms": 1, "s": 1e3, "m": 60e3}[m.group(2)]


def run_wrk(port, files, duration, connections, lua, count_status=False, cpu=LOAD_CPU,
            threads=1):
    """One wrk run; wrk pinned to `cpu` (None: any CPU) with `threads` threads."""
    if isinstance(files, Varying):
        env = dict(os.environ, BENCH_VARYING_DIR=VARYING_DIR,
                   BENCH_VARYING_KINDS=",".join(files.kinds), BENCH_SEED=str(VARYING_SEED))
    else:
        env = dict(os.environ, BENCH_FILES=",".join(files))
    if count_status:
        env["BENCH_COUNT_STATUS"] = "1"
    argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s",
            "--timeout", "10s", "--latency", "-s", lua, f"http://127.0.0.1:{port}/"]
    if cpu is not None:
        argv = ["taskset", "-c", cpu] + argv
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=duration + 60)
    if r.returncode != 0:
        raise RuntimeError(f"wrk failed: {r.stderr.strip()}")
    out = r.stdout
    res = {"raw": out}
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    res["rps"] = float(m.group(1)) if m else 0.0
    m = re.search(r"(\d+) requests in", out)
    res["requests"] = int(m.group(1)) if m else 0
    for pct in ("50", "99"):
        m = re.search(rf"^\s+{pct}%\s+(\S+)", out, re.M)
        res[f"p{pct}_ms"] = parse_duration_ms(m.group(1)) if m else None
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    res["non2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    res["socket_errors"] = sum(int(x) for x in m.groups()) if m else 0
    res["statuses"] = {}
    m = re.search(r"^statuses: (.*)$", out, re.M)
    if m:
        for item in m.group(1).split():
            code, n = item.split("=")
            res["statuses"][code] = int(n)
    return res


def settle(system, limit=60.0):
    """Waits until the system under test is idle: requests still in flight when wrk
    stopped (a slow WAF may have seconds of them queued) are finished before the next
    run starts, so their CPU time is not counted against it and the next run is not
    starved. Returns the seconds waited; gives up after `limit` seconds."""
    t0 = time.time()
    prev = cpu_seconds(system.pids())
    while time.time() - t0 < limit:
        time.sleep(0.25)
        cur = cpu_seconds(system.pids())
        if cur - prev <= 0.02:
            break
        prev = cur
    return time.time() - t0


def measure(system, files, args, lua, count_status=False):
    """Warm-up, then `args.runs` wrk runs; CPU of the SUT read around each run, each
    run starting on an idle system."""
    if args.warmup > 0:
        settle(system)
        run_wrk(system.port, files, args.warmup, args.connections, lua)
    runs = []
    for _ in range(args.runs):
        settle(system)
        pids = system.pids()
        c0 = cpu_seconds(pids)
        r = run_wrk(system.port, files, args.duration, args.connections, lua, count_status)
        r["cpu_s"] = cpu_seconds(pids) - c0
        runs.append(r)
    rps = statistics.median(r["rps"] for r in runs)
    total_req = sum(r["requests"] for r in runs)
    total_cpu = sum(r["cpu_s"] for r in runs)
    mid = sorted(runs, key=lambda r: r["rps"])[len(runs) // 2]
    return {
        "rps": rps,
        "rps_runs": [r["rps"] for r in runs],
        "p50_ms": mid["p50_ms"],
        "p99_ms": mid["p99_ms"],
        "cpu_s": total_cpu,
        "requests": total_req,
        "req_per_cpu_s": (total_req / total_cpu) if total_cpu > 0 and total_req > 0 else None,
        "non2xx": sum(r["non2xx"] for r in runs),
        "socket_errors": sum(r["socket_errors"] for r in runs),
        "statuses": {code: sum(r["statuses"].get(code, 0) for r in runs)
                     for code in sorted({c for r in runs for c in r["statuses"]})},
    }


def run_oha(port, rate, duration, connections):
    """One fixed-rate run of the corpus's GET with coordinated-omission correction;
    latencies in ms."""
    get = corpus_path("get")
    with open(get, "rb") as f:
        head = f.read().split(b"\r\n\r\n", 1)[0].decode()
    lines = head.split("\r\n")
    target = lines[0].split(" ")[1]
    headers = []
    host = None
    for line in lines[1:]:
        k, v = line.split(":", 1)
        if k.lower() == "host":
            # oha writes the Host header itself: the corpus's name, not the address
            # (CRS flags a numeric Host, which would make the benign GET an alert).
            host = v.strip()
            continue
        if k.lower() in ("connection", "content-length"):
            continue
        headers.append(f"{k}: {v.strip()}")
    return oha_fixed_rate(f"http://127.0.0.1:{port}{target}", headers, rate, duration,
                          connections, host=host)


def oha_argv(output, url, headers, rate, duration, connections, rand_regex_url, host=None):
    """oha's command line for one open-loop run on the load CPU, results as `output`
    (json: the summary; csv: every answered request); `host`: the Host header to
    send instead of the URL's address."""
    argv = ["taskset", "-c", LOAD_CPU, "oha", "--no-tui", "--output-format", output,
            "-z", f"{duration}s", "-q", str(rate), "--latency-correction",
            "-c", str(connections)]
    if host:
        argv += ["--host", host]
    for h in headers:
        argv += ["-H", h]
    if rand_regex_url:
        argv.append("--rand-regex-url")
    argv.append(url)
    return argv


def oha_fixed_rate(url, headers, rate, duration, connections, rand_regex_url=False, host=None):
    """One oha run at a fixed offered rate (open loop, `--latency-correction`: a
    request's latency counts from when it was due, so a stall shows in every request
    it delays). `rand_regex_url`: `url` is a regular expression each request's URL is
    drawn from (oha's `--rand-regex-url`). Latencies in ms."""
    argv = oha_argv("json", url, headers, rate, duration, connections, rand_regex_url, host)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    if r.returncode != 0:
        raise RuntimeError(f"oha failed: {r.stderr.strip()[:300]}")
    data = json.loads(r.stdout)
    pct = data.get("latencyPercentiles", {})
    summ = data.get("summary", {})
    codes = data.get("statusCodeDistribution", {}) or {}
    return {
        "rate": rate,
        "achieved": summ.get("requestsPerSec"),
        "success": summ.get("successRate"),
        "p50_ms": (pct.get("p50") or 0) * 1e3,
        "p99_ms": (pct.get("p99") or 0) * 1e3,
        "p999_ms": (pct.get("p99.9") or 0) * 1e3,
        "max_ms": (summ.get("slowest") or 0) * 1e3,
        "requests": sum(codes.values()),
        "non2xx": sum(n for c, n in codes.items() if not str(c).startswith("2")),
        # Requests still in flight when the run's time is up are cut ("aborted due to
        # deadline"): not failures of the system under test.
        "errors": sum(n for e, n in (data.get("errorDistribution") or {}).items()
                      if "deadline" not in e.lower()),
    }


def oha_fixed_rate_samples(url, headers, rate, duration, connections, rand_regex_url=False):
    """Starts one oha run at a fixed offered rate (as `oha_fixed_rate`) that records
    every answered request; returns `(process, launched)`, `launched` the monotonic
    time of the launch. `oha_samples(process)` waits for it and reads the requests."""
    argv = oha_argv("csv", url, headers, rate, duration, connections, rand_regex_url)
    launched = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, launched


def oha_samples(proc, timeout):
    """Waits for an oha run started by `oha_fixed_rate_samples`; returns the answered
    requests as `(start s, latency ms, status)`, start from oha's own start, latency
    counted from when the request was due (`--latency-correction`)."""
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"oha failed: {err.strip()[:300]}")
    rows = []
    for line in out.splitlines()[1:]:
        f = line.split(",")
        if len(f) == 7:
            rows.append((float(f[0]), float(f[4]) * 1e3, int(f[6])))
    return rows


def percentile(sorted_vals, q):
    """The q-th percentile (0-100) of an ascending list, nearest rank; None if empty."""
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, int(math.ceil(q / 100 * len(sorted_vals))) - 1))
    return sorted_vals[k]


# ---------------------------------------------------------------------------
# Report


def machine_info():
    info = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"Model name:\s+(.*)", out)
        info["cpu"] = m.group(1).strip() if m else platform.processor()
    except OSError:
        info["cpu"] = platform.processor()
    info["cores"] = os.cpu_count()
    info["kernel"] = platform.release()
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        info["memory"] = f"{kb / 1048576:.1f} GiB"
    except OSError:
        info["memory"] = "?"
    try:
        with open("/etc/debian_version") as f:
            info["os"] = "Debian " + f.read().strip()
    except OSError:
        info["os"] = platform.platform()

    def version(argv, pat=None):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            text = (r.stdout + r.stderr).strip()
            if pat:
                m = re.search(pat, text)
                return m.group(1) if m else text.splitlines()[0]
            return text.splitlines()[0] if text else "?"
        except (OSError, subprocess.TimeoutExpired):
            return "not installed"

    def dpkg(pkg):
        return version(["dpkg-query", "-W", "-f=${Version}", pkg])

    info["nginx"] = version(["nginx", "-v"], r"nginx/(\S+)")
    info["libmodsecurity3"] = dpkg("libmodsecurity3")
    info["libnginx-mod-http-modsecurity"] = dpkg("libnginx-mod-http-modsecurity")
    info["modsecurity-crs"] = dpkg("modsecurity-crs")
    info["wrk"] = version(["wrk", "-v"], r"wrk (\S+ \S+)")
    info["oha"] = version(["oha", "--version"])
    info["rustc"] = version(["rustc", "--version"])
    info["git"] = version(["git", "-C", REPO, "rev-parse", "--short", "HEAD"])
    try:
        with open("/proc/loadavg") as f:
            info["load"] = " ".join(f.read().split()[:3])
    except OSError:
        info["load"] = "?"
    return info


def fmt(v, spec="{:,.0f}"):
    return "n/a" if v is None else spec.format(v)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def other_answers(r):
    """Answers other than 2xx/3xx: per status code with their share when counted."""
    st = {c: n for c, n in r.get("statuses", {}).items() if not c.startswith(("2", "3"))}
    total = sum(r.get("statuses", {}).values())
    if st and total:
        return ", ".join(f"{c}: {n} ({100 * n / total:.1f}%)" for c, n in st.items())
    return str(r["non2xx"])


def render(results, rss, notes, fixed, info, args, engine_md, plot_name, started, verify_notes):
    req_names = list(REQUESTS)
    md = []
    md.append("# Benchmarks")
    md.append("")
    md.append("Palisade against nginx and nginx + ModSecurity v3 + CRS, on one machine in one run "
              "(issue 4). Written by `scripts/bench`; do not edit by hand.")
    md.append("")
    md.append("## How it was run")
    md.append("")
    md.append("```")
    md.append(args.command)
    md.append("```")
    md.append("")
    md.append(f"- When: {started} UTC, git `{info['git']}`"
              + (" (smoke mode: short runs, figures not meaningful)" if args.smoke else ""))
    md.append(f"- Machine: {info['cpu']}, {info['cores']} CPUs, {info['memory']} RAM, {info['os']}, "
              f"kernel {info['kernel']}; load average at the start {info['load']} "
              "(the machine may be shared: compare ratios within one run, not absolute figures "
              "across runs)")
    md.append(f"- Tools: nginx {info['nginx']}, libmodsecurity3 {info['libmodsecurity3']}, "
              f"libnginx-mod-http-modsecurity {info['libnginx-mod-http-modsecurity']}, "
              f"modsecurity-crs {info['modsecurity-crs']}, wrk {info['wrk']}, {info['oha']}, "
              f"{info['rustc']}")
    md.append(f"- The system under test runs on CPU {SUT_CPU} (`taskset`), with one worker "
              f"(palisade `worker_threads = 1`, nginx `worker_processes 1`); wrk, oha and the "
              f"backend (albedo) share CPU {LOAD_CPU}. All on 127.0.0.1.")
    md.append(f"- Closed loop: wrk, 1 thread, {args.connections} connections, {args.warmup} s "
              f"warm-up, then {args.runs} runs of {args.duration} s per configuration and request; "
              "req/s is the median run, p50/p99 come from that run, requests per CPU-second "
              "is all requests of the runs over the CPU time (utime + stime from /proc, nginx "
              "master and worker summed) the proxy used during them. Every run starts once "
              "the proxy is idle again (the requests the previous run left in flight are "
              "done), so their CPU time is not counted against it.")
    md.append("- Fixed corpus (`bench/corpus/`, sent verbatim): a browser GET with a query string "
              "and 3 cookies; a 2 KiB urlencoded form POST; a 20 KiB JSON POST; a mix of "
              "60% GET, 20% form, 15% JSON and 5% attacks (SQLi, XSS, path traversal, Log4Shell).")
    vsum = varying_summary() if any(is_varying(rn) for rn in req_names) else {}
    if vsum:
        parts = [f"{rn[len(VARYING_PREFIX):]}: {n:,} requests, {mean / 1024:.1f} KiB on average, "
                 f"largest {big / 1024:.1f} KiB" for rn, (n, mean, big) in vsum.items()]
        md.append("- Varying corpus (`bench/gen_varying.py`, fixed seed, written into "
                  "`target/bench-corpus/varying/` at bench time): 10,000 distinct benign "
                  "requests drawn from distributions of browsers and versions, languages, "
                  "pages, assets and API routes, query strings, cookies, referers, urlencoded "
                  "and multipart forms and JSON bodies; each series sends the requests of its "
                  "kinds in a shuffled order (`bench/wrk/corpus.lua`, seed "
                  f"{VARYING_SEED}, a new order per pass). " + "; ".join(parts) + ". The engine "
                  "benchmarks run every request through CRS v4 and CRS 3.3.4 and fail when one "
                  "is blocked (`PALISADE_BENCH_VARYING=check`, engine section); "
                  "`bench/test_corpus.py` fails when the engine's tables share a string with "
                  "either corpus.")
    md.append("- Rules: (d) `bench/rules/base.conf` + CRS v4 `crs-setup.conf.example` + "
              "`rules/*.conf`; (e) and (g) `base.conf` + Debian's `crs-setup.conf`, "
              "`REQUEST-900-...`, `rules/*.conf`, `RESPONSE-999-...` (plain `Include`s for "
              "ModSecurity). `base.conf` holds the settings of Debian's `modsecurity.conf` "
              "with `SecRuleEngine On` and the audit log off, for both engines.")
    md.append("- Expected answers: 200 for every benign request from every configuration; 403 "
              "for every attack from (d), (e) and (g). (The Log4Shell request carries its "
              "payload in an argument, which CRS 3.3.4 catches, and in User-Agent, which only "
              "CRS v4 inspects for it.)")
    md.append("")
    if verify_notes:
        md.append("Verification failures (these configurations answered otherwise):")
        md.append("")
        for n in verify_notes:
            md.append(f"- {n}")
        md.append("")
    if notes:
        md.append("Configurations that did not run:")
        md.append("")
        for k, n in notes.items():
            md.append(f"- ({k}) {CONFIGS[k]}: {n}")
        md.append("")

    md.append("## Throughput and CPU cost")
    md.append("")
    md.append("| config | corpus | request | req/s | p50 ms | p99 ms | proxy CPU s | req per CPU-s | "
              "vs (b) | vs (g) | non-2xx | peak RSS MiB |")
    md.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key in CONFIGS:
        if key not in results:
            continue
        for rn in req_names:
            r = results[key].get(rn)
            if r is None:
                continue
            b = results.get("b", {}).get(rn, {}).get("req_per_cpu_s")
            g = results.get("g", {}).get(rn, {}).get("req_per_cpu_s")
            rb = ratio(r["req_per_cpu_s"], b) if key != "a" else None
            rg = ratio(r["req_per_cpu_s"], g) if key != "a" else None
            cpu_label = fmt(r["cpu_s"], "{:.2f}")
            rpc = fmt(r["req_per_cpu_s"])
            if key == "a":
                cpu_label += " (backend)"
            corpus, shown = (("varying", rn[len(VARYING_PREFIX):]) if is_varying(rn)
                             else ("fixed", rn))
            md.append(
                f"| ({key}) {CONFIGS[key]} | {corpus} | {shown} | {fmt(r['rps'])} | {fmt(r['p50_ms'], '{:.2f}')} | "
                f"{fmt(r['p99_ms'], '{:.2f}')} | {cpu_label} | {rpc} | {fmt(rb, '{:.2f}x')} | "
                f"{fmt(rg, '{:.1f}x')} | {other_answers(r)} | "
                f"{fmt(rss.get(key) and rss[key] / 1024, '{:.1f}')} |")
    md.append("")
    md.append("`vs (b)` and `vs (g)`: requests per CPU-second of this configuration over that "
              "of (b) palisade with no rules, and of (g) nginx + ModSecurity + CRS 3.3.4. "
              "`non-2xx` counts the answers other than 2xx/3xx over all runs; for the mix and "
              "the varying series, per status code with its share of all answers (the mix's "
              "attacks are 5% of the requests sent, answered 403 by the WAFs; the varying "
              "corpus is benign, every answer should be 200). Peak RSS is VmHWM of the proxy "
              "process (for nginx, the larger of master and worker).")
    md.append("")

    md.append("## Targets")
    md.append("")

    def rpc(k, rn):
        return results.get(k, {}).get(rn, {}).get("req_per_cpu_s")

    rows = [
        ("CRS v4 GET vs nginx + ModSecurity + CRS 3.3.4 GET (req per CPU-s)",
         ratio(rpc("d", "GET"), rpc("g", "GET")), ">= 40x", 40),
        ("CRS v4 GET vs palisade no rules GET",
         ratio(rpc("d", "GET"), rpc("b", "GET")), ">= 0.50", 0.5),
        ("CRS 3.3.4: palisade vs ModSecurity, GET",
         ratio(rpc("e", "GET"), rpc("g", "GET")), ">= 40x", 40),
        ("CRS 3.3.4: palisade vs ModSecurity, 2 KiB form POST",
         ratio(rpc("e", "form POST 2 KiB"), rpc("g", "form POST 2 KiB")), ">= 30x", 30),
        ("CRS 3.3.4: palisade vs ModSecurity, 20 KiB JSON POST",
         ratio(rpc("e", "JSON POST 20 KiB"), rpc("g", "JSON POST 20 KiB")), ">= 30x", 30),
        ("CRS 3.3.4: palisade vs ModSecurity, varying GET",
         ratio(rpc("e", VARYING_PREFIX + "GET"), rpc("g", VARYING_PREFIX + "GET")), ">= 40x", 40),
        ("CRS 3.3.4: palisade vs ModSecurity, varying form POST",
         ratio(rpc("e", VARYING_PREFIX + "form POST"), rpc("g", VARYING_PREFIX + "form POST")),
         ">= 30x", 30),
        ("CRS 3.3.4: palisade vs ModSecurity, varying JSON POST",
         ratio(rpc("e", VARYING_PREFIX + "JSON POST"), rpc("g", VARYING_PREFIX + "JSON POST")),
         ">= 30x", 30),
        ("palisade no rules vs nginx plain, GET",
         ratio(rpc("b", "GET"), rpc("f", "GET")), ">= 1.0", 1.0),
    ]
    md.append("| target | measured | wanted | met |")
    md.append("|---|---:|---|---|")
    for label, val, want, thr in rows:
        met = "n/a" if val is None else ("yes" if val >= thr else "no")
        md.append(f"| {label} | {fmt(val, '{:.2f}')} | {want} | {met} |")
    v4_rss = rss.get("d")
    md.append(f"| peak RSS with CRS v4 (MiB) | {fmt(v4_rss and v4_rss / 1024, '{:.1f}')} | <= 40 | "
              f"{'n/a' if v4_rss is None else ('yes' if v4_rss <= 40 * 1024 else 'no')} |")
    md.append("")

    if fixed:
        md.append("## Latency against offered load (fixed rate, benign GET)")
        md.append("")
        if plot_name:
            md.append(f"![latency vs offered load]({plot_name})")
            md.append("")
        md.append(f"oha, {args.fixed_connections} connections, {args.fixed_duration} s per point, "
                  "`--latency-correction` (coordinated omission corrected).")
        md.append("")
        md.append("| config | offered req/s | achieved req/s | success | p50 ms | p99 ms |")
        md.append("|---|---:|---:|---:|---:|---:|")
        for key, pts in fixed.items():
            for p in pts:
                md.append(f"| ({key}) {CONFIGS[key]} | {p['rate']:,} | {fmt(p['achieved'])} | "
                          f"{fmt(p['success'] and p['success'] * 100, '{:.1f}%')} | "
                          f"{fmt(p['p50_ms'], '{:.2f}')} | {fmt(p['p99_ms'], '{:.2f}')} |")
        md.append("")
    if engine_md:
        md.append(engine_md)
    # Hand-written sections, copied unchanged: the profiles, then readings of earlier runs.
    for name in ("PROFILE.md", "NOTES.md"):
        path = os.path.join(BENCH, name)
        if os.path.exists(path):
            with open(path) as f:
                md.append(f.read())
    return "\n".join(md) + "\n"


def plot(fixed, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("bench: matplotlib is missing; no plot")
        return False
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    colours = {"b": "tab:green", "d": "tab:blue", "g": "tab:red"}
    for key, pts in fixed.items():
        xs = [p["rate"] for p in pts]
        ax.plot(xs, [p["p50_ms"] for p in pts], "o-", color=colours.get(key),
                label=f"({key}) {CONFIGS[key]} p50")
        ax.plot(xs, [p["p99_ms"] for p in pts], "s--", color=colours.get(key),
                label=f"({key}) {CONFIGS[key]} p99")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered load, requests/s (benign GET, fixed rate)")
    ax.set_ylabel("latency, ms (coordinated omission corrected)")
    ax.set_title("Latency against offered load, proxy pinned to one core")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


# ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="a few seconds per configuration")
    ap.add_argument("--configs", default="abcdefg", help="which configurations (letters)")
    ap.add_argument("--requests", default="get,form,json,mix,vget,vform,vjson",
                    help="which requests: get, form, json, mix of the fixed corpus; vget, "
                         "vform, vjson of the varying one (comma-separated)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    ap.add_argument("--runs", type=int, default=3, help="wrk runs per configuration and request")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up seconds before the runs")
    ap.add_argument("--connections", type=int, default=32, help="wrk connections")
    ap.add_argument("--fixed-duration", type=int, default=5, help="seconds per fixed-rate point")
    ap.add_argument("--fixed-connections", type=int, default=64, help="oha connections")
    ap.add_argument("--rates", default="100,200,500,1000,2000,5000,10000,20000,40000",
                    help="offered loads for the fixed-rate runs")
    ap.add_argument("--palisade", default=os.path.join(REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(REPO, "target", "release", "albedo"))
    ap.add_argument("--out", default=None,
                    help="the report (default BENCHMARKS.md; with --smoke, "
                         "target/bench-smoke/BENCHMARKS.md, so a smoke run never replaces "
                         "the published figures)")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when a configuration does not come up or answers otherwise "
                         "than expected (implied by --smoke); throughput is never judged")
    ap.add_argument("--engine-md", default=None, help="markdown of the engine benchmarks to append")
    ap.add_argument("--extra-md", action="append", default=[],
                    help="more markdown to append after the engine benchmarks (repeatable; "
                         "bench/ctx.py's section)")
    ap.add_argument("--command", default="scripts/bench", help="the command shown in the report")
    args = ap.parse_args()
    if args.smoke:
        args.duration, args.runs, args.warmup = 3, 1, 0
        args.fixed_duration = 1
        args.rates = "200,1000,5000"
        args.strict = True
    if args.out is None:
        args.out = (os.path.join(REPO, "target", "bench-smoke", "BENCHMARKS.md") if args.smoke
                    else os.path.join(REPO, "BENCHMARKS.md"))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    rates = [int(x) for x in args.rates.split(",") if x]
    REQUESTS["mix 5% attacks"] = mix_files()
    short = {"get": "GET", "form": "form POST 2 KiB", "json": "JSON POST 20 KiB", "mix": "mix 5% attacks",
             "vget": VARYING_PREFIX + "GET", "vform": VARYING_PREFIX + "form POST",
             "vjson": VARYING_PREFIX + "JSON POST"}
    for r in args.requests.split(","):
        if r and r not in short:
            raise SystemExit(f"bench: unknown request {r!r} (one of {', '.join(short)})")
    wanted = [short[r] for r in args.requests.split(",") if r]
    for rn in list(REQUESTS):
        if rn not in wanted:
            del REQUESTS[rn]
    if any(isinstance(v, Varying) for v in REQUESTS.values()):
        sys.path.insert(0, BENCH)
        import gen_varying
        gen_varying.write(VARYING_DIR)
        log(f"bench: varying corpus in {VARYING_DIR}")
    lua = os.path.join(BENCH, "wrk", "corpus.lua")
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    info = machine_info()
    work = tempfile.mkdtemp(prefix="palisade-bench-")
    log(f"bench: work directory {work}")

    def on_signal(signum, frame):
        stop_all()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        sys.exit(130)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    results, rss, notes, fixed, verify_notes = {}, {}, {}, {}, []
    # What makes a strict (smoke) run fail: the benchmark itself broke. Throughput is
    # never judged.
    failures = []
    try:
        if not os.path.exists(args.albedo):
            raise SystemExit(f"bench: {args.albedo} is missing (cargo build --release -p albedo)")
        backend, backend_port = start_albedo(args.albedo, work, LOAD_CPU)
        log(f"bench: backend albedo on 127.0.0.1:{backend_port}")

        for key in args.configs:
            if key not in CONFIGS:
                raise SystemExit(f"bench: unknown configuration {key!r}")
            log(f"bench: ({key}) {CONFIGS[key]}")
            try:
                if key == "a":
                    system = System("a", backend_port, None, lambda: [backend.pid])
                elif key in "bcde":
                    if not os.path.exists(args.palisade):
                        raise SkipConfig(f"{args.palisade} is missing (cargo build --release -p proxy)")
                    system = start_palisade(key, args, work, backend_port)
                else:
                    if shutil.which("nginx") is None:
                        raise SkipConfig("nginx is not installed")
                    if key == "g" and not os.path.exists(MODSEC_MODULE):
                        raise SkipConfig("libnginx-mod-http-modsecurity is not installed")
                    system = start_nginx(key, args, work, backend_port)
            except SkipConfig as e:
                notes[key] = str(e)
                failures.append(f"({key}) {CONFIGS[key]} did not run: {e}")
                log(f"bench:   skipped: {e}")
                continue
            except BROKEN as e:
                notes[key] = f"did not come up: {str(e).splitlines()[0]}"
                failures.append(f"({key}) {CONFIGS[key]} did not come up: {e}")
                log(f"bench:   FAILED to start: {e}")
                continue
            try:
                problems = verify(system)
                if problems:
                    verify_notes.append(f"({key}) {CONFIGS[key]}: " + "; ".join(problems))
                    log(f"bench:   verification: {'; '.join(problems)}")
                else:
                    log("bench:   verified: benign 200" + (", attacks 403" if key in WAF_CONFIGS else ""))
                results[key] = {}
                for rn, files in REQUESTS.items():
                    r = measure(system, files, args, lua,
                                count_status=rn.startswith("mix") or is_varying(rn))
                    results[key][rn] = r
                    log(f"bench:   {rn:<17} {r['rps']:>10,.0f} req/s  p50 {fmt(r['p50_ms'], '{:.2f}')} ms  "
                        f"p99 {fmt(r['p99_ms'], '{:.2f}')} ms  cpu {r['cpu_s']:.2f} s  "
                        f"{fmt(r['req_per_cpu_s'])} req/cpu-s  non-2xx {r['non2xx']}"
                        + (f"  socket errors {r['socket_errors']}" if r["socket_errors"] else ""))
                    if r["requests"] == 0:
                        log("bench:   (no request completed within the run: a slow configuration)")
                    for problem in answer_problems(key, rn, r):
                        failures.append(f"({key}) {CONFIGS[key]}, {rn}: {problem}")
                        log(f"bench:   FAILED: {problem}")
                rss[key] = system.peak_rss_kib() if key != "a" else None
                if key in ("b", "d", "g"):
                    if shutil.which("oha") is None:
                        notes.setdefault("fixed", "oha is not installed: no fixed-rate runs")
                    else:
                        pts = []
                        ceiling = results[key].get("GET", {}).get("rps")
                        for rate in rates:
                            settle(system)
                            p = run_oha(system.port, rate, args.fixed_duration, args.fixed_connections)
                            pts.append(p)
                            log(f"bench:   fixed {rate:>6} req/s: achieved {fmt(p['achieved'])}, "
                                f"p50 {p['p50_ms']:.2f} ms, p99 {p['p99_ms']:.2f} ms")
                            if ceiling is not None and rate > 1.5 * ceiling:
                                break
                        fixed[key] = pts
                if system.proc is not None and not system.proc.alive():
                    raise RuntimeError(f"{system.proc.name} exited during the runs:\n{system.proc.tail()}")
                # Still up and answering as before once the load is over.
                settle(system)
                problems = verify(system)
                if problems:
                    failures.append(f"({key}) {CONFIGS[key]}, after the runs: " + "; ".join(problems))
                    log(f"bench:   FAILED after the runs: {'; '.join(problems)}")
                else:
                    log("bench:   still answering as expected after the runs")
            except BROKEN as e:
                failures.append(f"({key}) {CONFIGS[key]}: {e}")
                notes.setdefault(key, f"failed: {str(e).splitlines()[0]}")
                log(f"bench:   FAILED: {e}")
            finally:
                system.stop()
        backend.stop()
    finally:
        stop_all()

    plot_name = None
    if fixed:
        plot_path = os.path.splitext(args.out)[0] + "-latency.png"
        if plot(fixed, plot_path):
            plot_name = os.path.basename(plot_path)
    engine_md = None
    if args.engine_md and os.path.exists(args.engine_md):
        with open(args.engine_md) as f:
            engine_md = f.read()
    for extra in args.extra_md:
        if os.path.exists(extra):
            with open(extra) as f:
                engine_md = (engine_md + "\n" if engine_md else "") + f.read()
    notes_cfg = {k: v for k, v in notes.items() if k in CONFIGS}
    md = render(results, rss, notes_cfg, fixed, info, args, engine_md, plot_name, started, verify_notes)
    if "fixed" in notes:
        md += f"\nNo fixed-rate runs: {notes['fixed']}\n"
    other = [f for f in failures if " did not run: " not in f]
    if other:
        md += "\nThe benchmark broke:\n\n" + "".join(f"- {f.splitlines()[0]}\n" for f in other)
    with open(args.out, "w") as f:
        f.write(md)
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump({"results": results, "rss_kib": rss, "fixed": fixed, "notes": notes}, f, indent=1)
    failures = verify_notes_as_failures(verify_notes) + failures
    if args.keep or (args.strict and failures):
        log(f"bench: wrote {args.out}" + (f" and {plot_name}" if plot_name else "")
            + f"; configurations, logs and raw results in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
        log(f"bench: wrote {args.out}" + (f" and {plot_name}" if plot_name else ""))

    if args.strict and failures:
        for f in failures:
            log(f"bench: FAILED: {f}")
    r1 = results.get("d", {}).get("GET", {}).get("req_per_cpu_s")
    r2 = results.get("g", {}).get("GET", {}).get("req_per_cpu_s")
    x = ratio(r1, r2)
    print(f"bench: crs-v4 GET {fmt(r1, '{:.0f}')} req/cpu-s; modsec-crs3 GET {fmt(r2, '{:.0f}')} "
          f"req/cpu-s; ratio R1/R2 = {fmt(x, '{:.1f}')}", flush=True)
    if args.strict and failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
