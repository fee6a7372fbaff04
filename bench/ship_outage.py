#!/usr/bin/env python3
"""Shipping off the box while its receivers are away (issue 34): the release proxy
(CRS v4 PL1, bench/run.py's configuration (d)) with an access log, every access line
shipped to a syslog receiver over TCP and to an OTLP receiver (with a span per
request), under a steady load, in three windows of `--window` seconds:

    normal   both receivers up
    down     both receivers gone (the syslog listener closed and its connections
             cut, the OTLP receiver killed): connections are refused
    back     both receivers up again on the same ports

    python3 bench/ship_outage.py [--window 30] [--connections 4]

The load is wrk over the varying corpus (bench/gen_varying.py, fixed seed) with
`--connections` connections, pinned to another CPU than the proxy. For each window:
requests, the latency percentiles wrk reports (p50, p99, max), and the shipping
counters from /metrics (lines sent and dropped, spans exported, OTLP records
dropped, errors, what is queued). After the "back" window it waits until both queues
are empty and says how long shipping took to resume.

Targets: during the outage no request waits for shipping (p99 within the normal
window's, allowing for the machine's noise), drops are counted, and shipping
resumes by itself once the receivers return.
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
import gen_varying  # noqa: E402
import instrumentation as I  # noqa: E402  (the OTLP receiver)
import rules_instr as RI  # noqa: E402  (configuration (d) with additions)
import run as R  # noqa: E402

# p99 during the outage may exceed the normal window's by this factor before the
# run says the request path waited (two cores, shared with the load generator).
NOISE = 1.5


class Syslog(I.Discard):
    """A TCP syslog receiver that reads and discards (bench/instrumentation.py's,
    whose reading it keeps), and can go away and return on the same port."""

    def __init__(self):
        self.port = R.free_port()
        self.bytes = 0
        self.conns = []
        self.sock = None
        self.up()

    def up(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(16)
        threading.Thread(target=self.accept, args=(self.sock,), daemon=True).start()

    def down(self):
        # shutdown() first: a close() alone leaves the listener open while its
        # accepting thread still holds it.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for c in self.conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()
        self.conns = []

    def accept(self, sock):
        while True:
            try:
                c, _ = sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self.read, args=(c,), daemon=True).start()


class Otlp:
    """tests/otlp's receiver (the OpenTelemetry Collector's otlpreceiver), stopped
    and started again on the same port."""

    def __init__(self, work):
        proc, self.port = I.otlp_receiver(work)
        self.binary = os.path.join(work, "otlprecv")
        self.proc = proc

    def down(self):
        self.proc.kill()
        self.proc.wait(timeout=30)

    def up(self):
        self.proc = subprocess.Popen([self.binary, f"127.0.0.1:{self.port}"],
                                     stdout=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), 1):
                return
            time.sleep(0.1)
        raise RuntimeError("ship_outage: the OTLP receiver did not come back")


SERIES = [
    "palisade_syslog_sent_total", "palisade_syslog_dropped_total",
    "palisade_syslog_errors_total", "palisade_syslog_queued",
    "palisade_otlp_spans_exported_total", "palisade_otlp_logs_exported_total",
    "palisade_otlp_dropped_total", "palisade_otlp_errors_total", "palisade_otlp_queued",
]


def metrics(admin_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for name in SERIES:
        total = 0.0
        for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M):
            total += float(m.group(1))
        out[name] = total
    return out


def wrk_max_ms(raw):
    m = re.search(r"^\s+Latency\s+\S+\s+\S+\s+(\S+)", raw, re.M)
    return R.parse_duration_ms(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--palisade", default=os.path.join(R.REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(R.REPO, "target", "release", "albedo"))
    ap.add_argument("--window", type=int, default=30, help="seconds per window")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--smoke", action="store_true",
                    help="5 s windows; the p99 is reported, not judged (CI's smoke run)")
    ap.add_argument("--out-md", default=None, help="also write the table to this file")
    args = ap.parse_args()
    if args.smoke:
        args.window = min(args.window, 5)
    if shutil.which("wrk") is None:
        raise SystemExit("ship_outage: wrk is missing (apt-get install wrk)")
    work = tempfile.mkdtemp(prefix="palisade-ship-outage-")
    otlp = None
    try:
        _, backend_port = R.start_albedo(args.albedo, work, None, who="ship_outage")
        syslog = Syslog()
        otlp = Otlp(work)
        port, admin_port = R.free_port(), R.free_port()
        extra = (f'\n[admin]\naddress = "127.0.0.1:{admin_port}"\n'
                 f'\n[[syslog]]\naddress = "127.0.0.1:{syslog.port}"\ntransport = "tcp"\n'
                 'logs = ["access"]\n'
                 f'\n[otlp]\nendpoint = "http://127.0.0.1:{otlp.port}"\nlogs = ["access"]\n')
        path = RI.config("d", work, port, backend_port, "", extra)
        with open(path) as f:
            text = f.read().replace('client_header_timeout = "600s"', "")
        text = text.replace('waf_cpu_budget = "off"\n', "")
        text = text.replace("[logs]\n", "[logs]\naccess_log = "
                            + R.toml_str(os.path.join(work, "access.log")) + "\n", 1)
        with open(path, "w") as f:
            f.write(text)
        proc = R.Proc("palisade-ship-outage", [args.palisade, "run", "--config", path], work,
                      cpu=R.SUT_CPU)
        R.wait_port(port, proc)
        gen_varying.write(R.VARYING_DIR)
        lua = os.path.join(R.BENCH, "wrk", "corpus.lua")
        files = R.Varying(["get-page", "get-asset", "get-api", "form", "multipart", "json"])
        R.run_wrk(port, files, 3, args.connections, lua)  # warm-up
        rows = []

        def window(name):
            before = metrics(admin_port)
            r = R.run_wrk(port, files, args.window, args.connections, lua)
            after = metrics(admin_port)
            delta = {k: after[k] - before[k] for k in SERIES}
            delta["palisade_syslog_queued"] = after["palisade_syslog_queued"]
            delta["palisade_otlp_queued"] = after["palisade_otlp_queued"]
            rows.append((name, r, delta))
            R.log(f"ship_outage: {name}: {r['requests']} requests, p99 {r['p99_ms']} ms, "
                  f"{delta}")
            return r

        normal = window("normal")
        syslog.down()
        otlp.down()
        down = window("down")
        syslog.up()
        otlp.up()
        window("back")
        t0 = time.time()
        resumed = None
        while time.time() - t0 < 120:
            m = metrics(admin_port)
            if m["palisade_syslog_queued"] == 0 and m["palisade_otlp_queued"] == 0:
                resumed = time.time() - t0
                break
            time.sleep(0.5)
        final = metrics(admin_port)
        if not proc.alive():
            raise RuntimeError(f"ship_outage: the proxy exited:\n{proc.tail()}")
    finally:
        if otlp:
            with contextlib.suppress(Exception):
                otlp.down()
        R.stop_all()
        shutil.rmtree(work, ignore_errors=True)

    lines = [f"| window ({args.window} s, {args.connections} connections) | requests | "
             "p50 ms | p99 ms | max ms | syslog sent | syslog dropped | syslog errors | "
             "spans exported | OTLP records exported | OTLP dropped | OTLP errors | "
             "queued at the end (syslog / OTLP) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, r, d in rows:
        lines.append(
            f"| {name} | {r['requests']:,} | {r['p50_ms']} | {r['p99_ms']} | "
            f"{wrk_max_ms(r['raw'])} | {d['palisade_syslog_sent_total']:,.0f} | "
            f"{d['palisade_syslog_dropped_total']:,.0f} | {d['palisade_syslog_errors_total']:,.0f} | "
            f"{d['palisade_otlp_spans_exported_total']:,.0f} | "
            f"{d['palisade_otlp_logs_exported_total']:,.0f} | "
            f"{d['palisade_otlp_dropped_total']:,.0f} | {d['palisade_otlp_errors_total']:,.0f} | "
            f"{d['palisade_syslog_queued']:,.0f} / {d['palisade_otlp_queued']:,.0f} |")
    waited = down["p99_ms"] is not None and normal["p99_ms"] is not None \
        and down["p99_ms"] > normal["p99_ms"] * NOISE
    drops = rows[1][2]["palisade_syslog_dropped_total"] + rows[1][2]["palisade_otlp_dropped_total"]
    lines += [
        "",
        f"ship_outage: p99 {normal['p99_ms']} ms with the receivers up, {down['p99_ms']} ms "
        f"while they were away: {'the request path WAITED' if waited else 'no wait'}",
        f"ship_outage: {drops:,.0f} lines and spans dropped and counted during the outage "
        f"(queues: syslog {final['palisade_syslog_queued']:,.0f}, OTLP "
        f"{final['palisade_otlp_queued']:,.0f} at the end)",
        "ship_outage: shipping resumed by itself: "
        + (f"both queues empty {resumed:.1f} s after the back window" if resumed is not None
           else "NO, the queues did not drain within 120 s"),
    ]
    print("\n".join(lines))
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write("## Diagnostics: shipping while the receivers are away\n\n"
                    + "\n".join(lines) + "\n")
    if resumed is None or (waited and not args.smoke):
        sys.exit(1)


if __name__ == "__main__":
    main()
