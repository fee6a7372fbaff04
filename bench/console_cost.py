#!/usr/bin/env python3
"""What the operator's console costs a request: instructions per proxied request
(callgrind) with CRS v4 PL1 (bench/run.py's configuration (d)), console off against
console on, in one run.

    python3 bench/console_cost.py [--smoke] [--out-md FILE]

  off  no admin listener, no dashboard, `server.rule_cost_sample = 0`: the request
       summary is still built and its in-line sinks run (they are the logs and
       metrics), but nobody subscribes to it and no rule is timed.
  on   the admin listener with `dashboard = true` (the aggregator task subscribes to
       the summaries), one dashboard event stream open for the whole run (a
       client reading /dashboard/events with the admin token, so snapshots are built
       and sent every 500 ms), and the default `rule_cost_sample` (1%).

Each runs under `valgrind --tool=callgrind` as bench/rules_instr.py runs it: one
keep-alive connection sends the fixed corpus's GET, form and JSON requests, a
warm-up then the measured requests with instrumentation on. Callgrind counts every
thread, so the aggregator's and the event stream's work is in the figure. Under
callgrind the proxy runs about fifty times slower, so the work done per unit of time
(a snapshot every 500 ms) weighs about fifty times more per request than it does at
native speed: the "on" figure is an upper bound.

Then, natively (unless --no-native), both proxies run side by side (release
builds, one worker thread each, pinned to the same CPU) behind the same albedo, with
the same event stream open on "on", and wrk sends the varying corpus
(bench/gen_varying.py, generated from a fixed seed: GET pages, assets and API
calls, forms, multipart and JSON) to each in turn, `--rounds` rounds of
`--duration` seconds; the figure is requests per CPU-second of each proxy process
over all its rounds, and their ratio. At native speed the periodic work weighs what
it weighs in production.

Target (issue 33): on costs at most 2% more than off.
"""

import argparse
import os
import shutil
import socket
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_instr as RI  # noqa: E402  (callgrind measurement of the fixed corpus)
import side_by_side as SBS  # noqa: E402  (the native comparison)
import run as R  # noqa: E402  (bench/run.py: processes, ports, configurations)

TOKEN = "console-cost-bench-token"
TARGET = 0.02


class EventStream:
    """A dashboard client: reads /dashboard/events until stopped, counting bytes."""

    def __init__(self, admin_port):
        self.port = admin_port
        self.bytes = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def start(self, _work):
        deadline_tries = 600
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                break
            except OSError:
                deadline_tries -= 1
                if deadline_tries == 0:
                    raise
                threading.Event().wait(0.5)
        self.sock.sendall(f"GET /dashboard/events HTTP/1.1\r\nHost: admin\r\n"
                          f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())
        self.sock.settimeout(600)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RuntimeError("console_cost: the event stream closed at once")
            head += chunk
        status = head.split(b" ", 2)[1]
        if status != b"200":
            raise RuntimeError(f"console_cost: /dashboard/events answered {status!r}")
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            self.bytes += len(chunk)

    def close(self):
        self.stop.set()
        try:
            self.sock.close()
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="a few requests per series")
    ap.add_argument("--palisade", default=os.path.join(R.REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(R.REPO, "target", "release", "albedo"))
    ap.add_argument("--out-md", default=None)
    ap.add_argument("--only", default=None, metavar="NAME",
                    help="one series of the corpus: get, form or json")
    ap.add_argument("--keep-dumps", default=None, metavar="DIR",
                    help="keep each series' callgrind dump in DIR (for callgrind_annotate)")
    ap.add_argument("--no-callgrind", action="store_true", help="the native run only")
    ap.add_argument("--no-native", action="store_true", help="the callgrind run only")
    ap.add_argument("--rounds", type=int, default=6, help="native: rounds per proxy")
    ap.add_argument("--duration", type=int, default=5, help="native: seconds per round")
    ap.add_argument("--connections", type=int, default=8, help="native: wrk connections")
    args = ap.parse_args()
    series = [(label, name, max(2, warm // 10), max(2, count // 20))
              if args.smoke else (label, name, warm, count)
              for label, name, warm, count in RI.SERIES
              if args.only in (None, name)]
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            raise SystemExit(f"console_cost: {tool} is missing (apt-get install valgrind)")
    work = tempfile.mkdtemp(prefix="palisade-console-cost-")
    table = {}
    stream = None
    native = None
    try:
        _, backend_port = R.start_albedo(args.albedo, work, None, who="console_cost")
        token = os.path.join(work, "admin.token")
        with open(token, "w") as f:
            f.write(TOKEN + "\n")

        def variant(name, admin_port, stream):
            if name == "off":
                return ("off", "\nrule_cost_sample = 0", "", None)
            return ("on", "", f"\n[admin]\naddress = \"127.0.0.1:{admin_port}\"\n"
                    f"token_file = {R.toml_str(token)}\ndashboard = true\n", stream.start)

        if not args.no_callgrind:
            table["off"] = RI.measure(args, "d", work, backend_port, series,
                                      variant=variant("off", None, None))
            admin_port = R.free_port()
            stream = EventStream(admin_port)
            table["on"] = RI.measure(args, "d", work, backend_port, series,
                                     variant=variant("on", admin_port, stream))
            if stream.bytes == 0:
                raise RuntimeError("console_cost: the event stream received nothing")
            stream.close()
        if not args.no_native:
            native = run_native(args, work, backend_port, variant)
    finally:
        if stream:
            stream.close()
        R.stop_all()
        shutil.rmtree(work, ignore_errors=True)
    if table:
        report_callgrind(args, series, table, stream)
    if native:
        report_native(args, native)


def run_native(args, work, backend_port, variant):
    """Requests per CPU-second of both proxies (bench/side_by_side.py), the "on"
    one with its own event stream open."""
    admin_port = R.free_port()
    stream = EventStream(admin_port)
    _, on_server, on_extra, on_started = variant("on", admin_port, stream)
    _, off_server, off_extra, _ = variant("off", None, None)

    def received():
        if stream.bytes == 0:
            raise RuntimeError("console_cost: the native event stream received nothing")

    try:
        return SBS.run(args, work, backend_port, [
            SBS.Variant("off", off_server, off_extra),
            SBS.Variant("on", on_server, on_extra, started=on_started, check=received),
        ], "console_cost")
    finally:
        stream.close()


def report_native(args, native):
    SBS.report(args, native, "off", "console_cost", {"on": TARGET})


def report_callgrind(args, series, table, stream):
    lines = ["| request | console off | console on | change |", "|---|---:|---:|---:|"]
    worst = 0.0
    for label, _, _, _ in series:
        a, b = table["off"][label], table["on"][label]
        change = b / a - 1
        worst = max(worst, change)
        lines.append(f"| {label} | {a:,.0f} | {b:,.0f} | {change * 100:+.2f}% |")
    text = "\n".join(lines)
    print(text)
    print(f"console_cost: console on costs at most {worst * 100:+.2f}% instructions per "
          f"request (target {TARGET * 100:.0f}%): {'met' if worst <= TARGET else 'NOT met'}; "
          f"the event stream received {stream.bytes:,} bytes")
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write("## What the console costs a request\n\n`python3 bench/console_cost.py"
                    f"{' --smoke' if args.smoke else ''}`: CRS v4 PL1, instructions per "
                    "request under callgrind, console off (no subscriber, no rule timing) "
                    "against on (dashboard aggregator, one event stream open, 1% of "
                    "requests timed rule by rule).\n\n" + text + "\n")


if __name__ == "__main__":
    main()
