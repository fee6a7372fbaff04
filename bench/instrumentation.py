#!/usr/bin/env python3
"""What diagnostics and shipping cost a request (issue 34): the release proxy with
CRS v4 PL1 in three configurations, side by side in one run (bench/side_by_side.py:
wrk over the varying corpus, requests per CPU-second of each proxy process).

    python3 bench/instrumentation.py [--rounds N] [--duration S] [--connections C]

  base       no admin listener, `server.rule_cost_sample = 0`, the access log
             written to a file, nothing shipped
  shipping   the same, and every request's access line shipped to a syslog
             receiver over TCP
             ([[syslog]]) and a span per request with the access lines as log
             records to an OTLP receiver ([otlp]; the OpenTelemetry Collector's
             otlpreceiver of tests/otlp, built with Go); the syslog receiver here is
             a socket that reads and discards
  profiling  the same as base, with the admin listener, and a CPU profile
             (/debug/profile, 99 Hz) running for the whole of each round

Targets: shipping at most 3% more CPU per request, a running profile at most 5%.

Then (unless --no-callgrind) the share of Palisade's own instrumentation, which is
always on: the proxy (configuration (d) with its defaults: no access log,
`rule_cost_sample` 1%) runs under callgrind, one keep-alive connection sends the
fixed corpus's GET, form and JSON requests (as bench/rules_instr.py does), and the
inclusive instructions of the functions that are the instrumentation are read from
the same dump as the total, by name (they are kept out of line for that):

  metrics        proxy::summary::metrics (request counters, phase histograms, the
                 site's counters, rule hits)
  accounting     proxy::accounting::Accounting::record (/top's clients and routes)
  rule costs     proxy::rulecost::RuleCosts::record
  slowest        proxy::diag::slow::SlowRequests::offer
  phase account  proxy::exchange::record::Record::account (the phase's times, the
                 sampled phases' CPU split, the phase_end tracepoint)
  CPU clocks     proxy::inspect::thread_cpu_time, proxy::procstat::ThreadUsage::now
                 (the sampled transactions)
  wall clocks    std's Instant::now, elapsed and duration_since, as called from
                 Palisade's own crates (the async runtime's own timer reads are
                 not Palisade's instrumentation)

"Off" is the total less these. An idle tracepoint is a load and a branch inlined
where it stands, in these functions or on the request path; it is in the total and
not separable. Kernel time (the CPU clock's system call) is not counted by
callgrind: `server.waf_cpu_measure` keeps it to the sampled requests.
Target: at most 1%.
"""

import argparse
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxy_instr as P  # noqa: E402  (callgrind dumps)
import rules_instr as RI  # noqa: E402  (callgrind measurement of the fixed corpus)
import run as R  # noqa: E402
import side_by_side as SBS  # noqa: E402

# The instrumentation's functions, by what they are (see the docstring).
INSTRUMENTATION = [
    ("metrics", ["proxy::summary::metrics"]),
    ("accounting", ["proxy::accounting::Accounting::record"]),
    ("rule costs", ["proxy::rulecost::RuleCosts::record"]),
    ("slowest", ["proxy::diag::slow::SlowRequests::offer"]),
    ("phase account", ["proxy::exchange::record::Record::account"]),
    ("CPU clocks", ["proxy::inspect::thread_cpu_time", "proxy::procstat::ThreadUsage::now"]),
    ("wall clocks", ["<std::time::Instant>::now", "<std::time::Instant>::elapsed",
                     "<std::time::Instant>::duration_since"]),
]
WALL_CLOCKS = set(INSTRUMENTATION[-1][1])
# The workspace's crates: a clock read from one of them is Palisade's.
OWN_CRATES = {"proxy", "engine", "seclang", "store", "detect"}
TARGET_INSTRUMENTATION = 0.01

TOKEN = "instrumentation-bench-token"


class Discard:
    """A TCP receiver that reads and discards (the syslog receiver), counting bytes."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.bytes = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.read, args=(c,), daemon=True).start()

    def read(self, c):
        while True:
            try:
                b = c.recv(1 << 16)
            except OSError:
                return
            if not b:
                return
            self.bytes += len(b)


def otlp_receiver(work):
    """Builds and starts tests/otlp's receiver; returns (process, port)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    binary = os.path.join(work, "otlprecv")
    subprocess.run([go, "build", "-o", binary, "."], cwd=os.path.join(R.REPO, "tests", "otlp"),
                   check=True, timeout=900)
    port = R.free_port()
    p = subprocess.Popen([binary, f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return p, port
        time.sleep(0.1)
    p.kill()
    raise RuntimeError("instrumentation: the OTLP receiver did not listen")


ROW = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+([<>*]\s+)?([^:]*):(.*?)(?: \((\d[\d,]*)x\))?(?: \[.*\])?$")


def inclusive(dump):
    """Inclusive instructions per function name in a callgrind dump (the rows of one
    function, split by source file, added up), and for the wall clocks only the
    part called from Palisade's own code (`proxy::`, `engine::`...: not the async
    runtime's timer and its metrics, nor the channels')."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--tree=caller",
                          "--threshold=100", dump],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    costs = {}
    callers = []  # the "<" rows above the current "*" row
    for line in out.splitlines():
        m = ROW.match(line)
        if not m:
            if not line.strip():
                callers = []
            continue
        n = int(m.group(1).replace(",", ""))
        kind = (m.group(2) or "").strip()
        name = re.sub(r"'\d+$", "", m.group(4).strip())
        if kind == "<":
            callers.append((name, n))
        elif kind == "*":
            if name in WALL_CLOCKS:
                own = sum(c for caller, c in callers if caller.split("::")[0] in OWN_CRATES)
                costs[name] = costs.get(name, 0) + own
            else:
                costs[name] = costs.get(name, 0) + n
            callers = []
    return costs


def instrumentation_share(args, work, backend_port):
    """Callgrind: the instrumentation's instructions against the total, per series."""
    keep = os.path.join(work, "dumps")
    cg = argparse.Namespace(palisade=args.palisade, keep_dumps=keep)
    series = [(label, name, max(2, warm // 10), max(2, count // 20)) if args.smoke
              else (label, name, warm, count) for label, name, warm, count in RI.SERIES]
    per_request = RI.measure(cg, "d", work, backend_port, series,
                             variant=("instrumented", "", "", None))
    lines = ["| request | instructions per request | instrumentation | share | "
             + " | ".join(k for k, _ in INSTRUMENTATION) + " |",
             "|---|---:|---:|---:|" + "---:|" * len(INSTRUMENTATION)]
    worst = 0.0
    for label, name, _, count in series:
        dump = os.path.join(keep, f"callgrind.instrumented.{name}.out")
        costs = inclusive(dump)
        total = P.totals(dump)
        parts = [sum(v for n, v in costs.items() if n in names) for _, names in INSTRUMENTATION]
        share = sum(parts) / total
        worst = max(worst, share)
        lines.append(f"| {label} | {per_request[label]:,.0f} | {sum(parts) / count:,.0f} | "
                     f"{share * 100:.2f}% | " + " | ".join(f"{p / count:,.0f}" for p in parts) + " |")
    lines.append("")
    lines.append(f"instrumentation: its share is at most {worst * 100:.2f}% of the instructions "
                 f"per request (target {TARGET_INSTRUMENTATION * 100:.0f}%): "
                 f"{'met' if worst <= TARGET_INSTRUMENTATION else 'NOT met'}")
    print("\n".join(lines))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--palisade", default=os.path.join(R.REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(R.REPO, "target", "release", "albedo"))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--smoke", action="store_true", help="callgrind: a few requests per series")
    ap.add_argument("--no-callgrind", action="store_true", help="the native run only")
    ap.add_argument("--no-native", action="store_true", help="the callgrind run only")
    ap.add_argument("--out-md", default=None, help="also write the tables to this file")
    args = ap.parse_args()
    report = []
    work = tempfile.mkdtemp(prefix="palisade-instrumentation-")
    recv = None
    try:
        _, backend_port = R.start_albedo(args.albedo, work, None, who="instrumentation")
        if not args.no_callgrind:
            report += instrumentation_share(args, work, backend_port) + [""]
        if args.no_native:
            return
        discard = Discard()
        recv, otlp_port = otlp_receiver(work)
        token = os.path.join(work, "admin.token")
        with open(token, "w") as f:
            f.write(TOKEN + "\n")
        admin_port = R.free_port()
        off = "\nrule_cost_sample = 0"
        def access(name):
            return f"access_log = {R.toml_str(os.path.join(work, name + '-access.log'))}\n"
        shipping = (f'\n[[syslog]]\naddress = "127.0.0.1:{discard.port}"\ntransport = "tcp"\n'
                    f'logs = ["access"]\n\n[otlp]\nendpoint = "http://127.0.0.1:{otlp_port}"\n'
                    'logs = ["access"]\n')
        profiling = (f'\n[admin]\naddress = "127.0.0.1:{admin_port}"\n'
                     f"token_file = {R.toml_str(token)}\ndashboard = false\n")

        @contextlib.contextmanager
        def profile_running(_system):
            # A profile a little longer than the round, started just before it; the
            # round's CPU time is measured while it runs, and the next round starts
            # once it has ended.
            seconds = args.duration + 2
            done = threading.Event()

            def take():
                req = urllib.request.Request(
                    f"http://127.0.0.1:{admin_port}/debug/profile?seconds={seconds}&format=pprof",
                    headers={"Authorization": f"Bearer {TOKEN}"})
                with contextlib.suppress(Exception), urllib.request.urlopen(req, timeout=seconds + 60) as r:
                    r.read()
                done.set()

            threading.Thread(target=take, daemon=True).start()
            time.sleep(0.3)
            try:
                yield
            finally:
                done.wait(seconds + 60)

        def shipped():
            if discard.bytes == 0:
                raise RuntimeError("instrumentation: the syslog receiver got nothing")

        native = SBS.run(args, work, backend_port, [
            SBS.Variant("base", off, logs_extra=access("base")),
            SBS.Variant("shipping", off, shipping, check=shipped, logs_extra=access("shipping")),
            SBS.Variant("profiling", off, profiling, during=profile_running,
                        logs_extra=access("profiling")),
        ], "instrumentation")
        report += SBS.report(args, native, "base", "instrumentation",
                             {"shipping": 0.03, "profiling": 0.05})
    finally:
        if args.out_md and report:
            with open(args.out_md, "w") as f:
                f.write("## Diagnostics: what the instrumentation, shipping and a profile cost\n\n"
                        + "\n".join(report) + "\n")
        if recv:
            recv.kill()
        R.stop_all()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
