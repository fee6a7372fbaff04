#!/usr/bin/env python3
"""What finding the client's real address costs per proxied request (issue 32: PROXY
protocol and trusted-proxy resolution at most 1% of the plain proxy's CPU per request).

    python3 bench/client_address.py [--requests 3000] [--warmup 300]
                                    [--cpu-requests 20000] [--runs 5]
                                    [--no-callgrind] [--no-cpu] [--out-md FILE] [--smoke]

The release `palisade` without rules (configuration (b) of bench/run.py) in front of
albedo. Each series is measured against a base that sends exactly the same requests
to a proxy without `[client_address]` (and without `proxy_protocol`), so the difference
is the feature's work only, not the bytes of the extra header:

  1. keep-alive, X-Forwarded-For from a trusted proxy: the client (127.0.0.1, in
     `trusted_proxies`) sends `X-Forwarded-For: 203.0.113.9, 192.0.2.7` on every
     request, walked to 192.0.2.7;
  2. keep-alive, PROXY protocol v2 once per connection naming a trusted proxy
     (10.0.0.2) and the same X-Forwarded-For on every request (a CDN in front of a
     layer-4 balancer);
  3. one request per connection, each connection opened with a PROXY v2 header
     naming the client (192.0.2.7, as HAProxy's `send-proxy-v2` does): the worst
     case, where the header is read once per request.

Two measures:
  - instructions per request under callgrind, as bench/proxy_instr.py counts them
    (instrumentation switched on for the measured requests only; user space only,
    repeatable on a shared machine);
  - CPU time of the proxy process (the time its threads ran, from
    /proc/PID/task/*/schedstat, the kernel's work in their context included: the
    PROXY header's peek and read) for --cpu-requests requests, base and feature runs
    interleaved, the median of --runs each. Noisier than the instruction count on a
    shared machine.
"""

import argparse
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxy_instr as P  # noqa: E402  (callgrind_control and totals)
import run as R  # noqa: E402  (processes, ports, configurations)

XFF = "203.0.113.9, 192.0.2.7"

CLIENT_ADDRESS = """
[client_address]
trusted_proxies = ["127.0.0.1", "10.0.0.0/8"]
header = "X-Forwarded-For"
"""

# (label, keep-alive, PROXY source or None, X-Forwarded-For value or None)
SERIES = [
    ("keep-alive, X-Forwarded-For from a trusted proxy", True, None, XFF),
    ("keep-alive, PROXY v2 per connection + X-Forwarded-For walk", True,
     ("10.0.0.2", 40000), XFF),
    ("a connection per request, PROXY v2 on each", False, ("192.0.2.7", 40000), None),
]


def proxy_v2(src, dst_port):
    """A PROXY protocol v2 header for TCP/IPv4 from `src` (ip, port) to 127.0.0.1."""
    ip, port = src
    body = socket.inet_aton(ip) + socket.inet_aton("127.0.0.1")
    body += port.to_bytes(2, "big") + dst_port.to_bytes(2, "big")
    return (b"\r\n\r\n\x00\r\nQUIT\n\x21\x11" + len(body).to_bytes(2, "big") + body)


def config(work, port, backend_port, feature, proxied, name):
    path = R.write_palisade_config("b", work, port, backend_port)
    with open(path) as f:
        text = f.read()
    if feature:
        listen = f'address = "127.0.0.1:{port}"'
        assert listen in text
        if proxied:
            text = text.replace(listen, listen + "\nproxy_protocol = true", 1)
        text += CLIENT_ADDRESS
    out = os.path.join(work, f"ca-{name}.toml")
    with open(out, "w") as f:
        f.write(text)
    return out


class Load:
    """Sends requests one at a time: on one keep-alive connection, or a connection
    each; a PROXY header starts every connection when `proxy` is set."""

    def __init__(self, port, keepalive, proxy, xff):
        self.port, self.keepalive, self.proxy = port, keepalive, proxy
        extra = f"X-Forwarded-For: {xff}\r\n" if xff else ""
        close = "" if keepalive else "Connection: close\r\n"
        self.request = (f"GET /products?page=2 HTTP/1.1\r\nHost: bench.test\r\n"
                        f"Accept: */*\r\n{extra}{close}\r\n").encode()
        self.client = None

    def _connect(self):
        c = P.Client.__new__(P.Client)
        c.sock = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        c.buf = b""
        if self.proxy:
            c.sock.sendall(proxy_v2(self.proxy, self.port))
        return c

    def get(self):
        if self.client is None:
            self.client = self._connect()
        status = self.client.send(self.request)
        if not self.keepalive:
            self.client.close()
            self.client = None
        return status

    def close(self):
        if self.client is not None:
            self.client.close()
            self.client = None


def instructions(args, work, backend_port, label, feature, keepalive, proxy, xff):
    port = R.free_port()
    name = f"{len(os.listdir(work))}"
    cfg = config(work, port, backend_port, feature, proxy is not None, name)
    out = os.path.join(work, f"callgrind-{name}.out")
    proc = R.Proc(f"palisade-ca-{name}",
                  ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                   f"--callgrind-out-file={out}", args.palisade, "run", "--config", cfg],
                  work)
    try:
        wait_listening(port, proc)
        load = Load(port, keepalive, proxy if feature else None, xff)
        for _ in range(args.warmup):
            if load.get() != 200:
                raise RuntimeError(f"client_address: ({label}) a warm-up request was not 200")
        P.ctl(["-i", "on"], proc.pid)
        bad = sum(load.get() != 200 for _ in range(args.requests))
        P.ctl(["-i", "off"], proc.pid)
        P.ctl(["-d"], proc.pid)
        load.close()
        deadline = time.time() + 30
        dumps = []
        while not dumps and time.time() < deadline:
            dumps = sorted((f for f in os.listdir(work) if f.startswith(f"callgrind-{name}.out.")),
                           key=lambda f: int(f.rsplit(".", 1)[1]))
            if not dumps:
                time.sleep(0.2)
        if not dumps:
            raise RuntimeError(f"client_address: ({label}) callgrind wrote no dump")
        total = P.totals(os.path.join(work, dumps[-1]))
        if args.keep_dumps:
            os.makedirs(args.keep_dumps, exist_ok=True)
            slug = "".join(c if c.isalnum() else "-" for c in label).strip("-")
            shutil.copy(os.path.join(work, dumps[-1]),
                        os.path.join(args.keep_dumps, f"callgrind.{slug}.out"))
    finally:
        proc.stop(timeout=30)
    if bad:
        raise RuntimeError(f"client_address: ({label}) {bad} measured requests were not 200")
    per = total / args.requests
    R.log(f"client_address: ({label}) {per:,.0f} instructions per request")
    return per


def wait_listening(port, proc, timeout=120):
    """Waits until `port` is bound without connecting to it: a probe connection on a
    PROXY listener would count as a refused header."""
    deadline = time.time() + timeout
    hexport = f":{port:04X} "
    while time.time() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited during start-up:\n{proc.tail()}")
        with open("/proc/net/tcp") as f:
            if any(hexport in line and line.split()[3] == "0A" for line in f):
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


def on_cpu_seconds(pid):
    """Time the process's threads have run (kernel work in their context included),
    in seconds, from /proc/PID/task/*/schedstat (nanoseconds; /proc/PID/stat counts
    in clock ticks of 10 ms, too coarse for a share of 1%)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def cpu_run(args, work, backend_port, label, feature, keepalive, proxy, xff):
    """CPU seconds of the proxy for --cpu-requests requests (after a warm-up)."""
    port = R.free_port()
    name = f"{len(os.listdir(work))}"
    cfg = config(work, port, backend_port, feature, proxy is not None, name)
    proc = R.Proc(f"palisade-cpu-{name}", [args.palisade, "run", "--config", cfg], work)
    try:
        wait_listening(port, proc)
        load = Load(port, keepalive, proxy if feature else None, xff)
        for _ in range(args.warmup):
            load.get()
        before = on_cpu_seconds(proc.pid)
        bad = sum(load.get() != 200 for _ in range(args.cpu_requests))
        load.close()
        # Let the last connection's close be handled before reading the clock.
        time.sleep(0.2)
        used = on_cpu_seconds(proc.pid) - before
    finally:
        proc.stop(timeout=30)
    if bad:
        raise RuntimeError(f"client_address: ({label}) {bad} requests were not 200")
    return used / args.cpu_requests


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=3000, help="measured requests (callgrind)")
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--cpu-requests", type=int, default=20000,
                    help="requests per CPU-time run")
    ap.add_argument("--runs", type=int, default=5, help="CPU-time runs per configuration")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--no-cpu", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="200 requests, 1 run")
    ap.add_argument("--palisade", default=os.path.join(R.REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(R.REPO, "target", "release", "albedo"))
    ap.add_argument("--out-md", default=None)
    ap.add_argument("--keep-dumps", default=None, metavar="DIR",
                    help="keep each callgrind dump in DIR (for callgrind_annotate)")
    ap.add_argument("--series", default=None,
                    help="only the series whose numbers are given, e.g. 13")
    args = ap.parse_args()
    if args.smoke:
        args.requests, args.warmup, args.cpu_requests, args.runs = 200, 50, 500, 1
    if not args.no_callgrind:
        for tool in ("valgrind", "callgrind_control"):
            if shutil.which(tool) is None:
                raise SystemExit(f"client_address: {tool} is missing (apt-get install valgrind)")
    work = tempfile.mkdtemp(prefix="palisade-ca-")
    rows = []
    try:
        _, backend_port = R.start_albedo(args.albedo, work, None, who="client_address")
        chosen = [s for i, s in enumerate(SERIES, 1)
                  if args.series is None or str(i) in args.series]
        for label, keepalive, proxy, xff in chosen:
            row = {"label": label}
            if not args.no_callgrind:
                row["base_i"] = instructions(args, work, backend_port, f"{label}: base", False,
                                             keepalive, proxy, xff)
                row["with_i"] = instructions(args, work, backend_port, label, True,
                                             keepalive, proxy, xff)
            if not args.no_cpu:
                base, feat = [], []
                for _ in range(args.runs):
                    base.append(cpu_run(args, work, backend_port, f"{label}: base", False,
                                        keepalive, proxy, xff))
                    feat.append(cpu_run(args, work, backend_port, label, True,
                                        keepalive, proxy, xff))
                row["base_c"] = statistics.median(base)
                row["with_c"] = statistics.median(feat)
                R.log(f"client_address: ({label}) CPU per request {row['base_c'] * 1e6:.1f} us "
                      f"-> {row['with_c'] * 1e6:.1f} us (runs: base "
                      f"{', '.join(f'{x * 1e6:.1f}' for x in base)}; with "
                      f"{', '.join(f'{x * 1e6:.1f}' for x in feat)})")
            rows.append(row)
    finally:
        R.stop_all()
        shutil.rmtree(work, ignore_errors=True)
    report(rows, args)


def report(rows, args):
    lines = ["| series | instructions / request: base | with | added | share | "
             "CPU / request: base | with | share |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cells = [r["label"]]
        if "base_i" in r:
            b, w = r["base_i"], r["with_i"]
            cells += [f"{b:,.0f}", f"{w:,.0f}", f"{w - b:,.0f}", f"{100 * (w - b) / b:.2f}%"]
        else:
            cells += ["-"] * 4
        if "base_c" in r:
            b, w = r["base_c"], r["with_c"]
            cells += [f"{b * 1e6:.1f} us", f"{w * 1e6:.1f} us", f"{100 * (w - b) / b:+.1f}%"]
        else:
            cells += ["-"] * 3
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    shares = [(r["with_i"] - r["base_i"]) / r["base_i"] for r in rows if "base_i" in r]
    if shares:
        worst = max(shares)
        print(f"client address: instructions added per request at most {100 * worst:.2f}% "
              f"(target <= 1%: {'met' if worst <= 0.01 else 'not met'})")
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
