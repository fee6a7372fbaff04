#!/usr/bin/env python3
"""Do worst-case requests stall other clients? (issue 8)

Measures the latency of ordinary GET requests sent at a fixed rate through palisade
with CRS v4 (PL1), first alone, then while two worst-case requests are being
inspected the whole time (each is sent again as soon as it is answered). It does so
for two configurations in one run, so the figures compare as ratios:

  pool    the default: phases over large inputs run on the low-priority inspection
          pool (server.inspect_inline_bytes = 16 KiB)
  inline  every phase inline on the tokio workers (inspect_inline_bytes = 1 TiB),
          which is how palisade ran before the pool

The worst-case requests are urlencoded bodies of --heavy-kib KiB, generated from
--seed out of fragments that keep CRS's SQLi, XSS and RCE rules busy; no string of
them is known to the engine. Both configurations see the same bodies.

Reported per configuration: p50/p90/p99/max of the GET latency without and with the
worst-case load, the ratio of the p99s, GETs answered, worst-case requests answered,
and the proxy's CPU seconds. Every process started is stopped at the end.

Usage: python3 bench/stall.py [--seconds 15] [--rate 40] [--heavy-kib 1024]
       [--palisade target/release/palisade] [--albedo target/release/albedo]
"""

import argparse
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (the side-by-side benchmark's process helpers)


def heavy_body(seed, size):
    """An urlencoded body of about `size` bytes: one argument made of attack-like
    fragments picked at random."""
    rnd = random.Random(seed)
    pieces = [
        "%27%20or%20", "1%3D1", "%2F%2A%2A%2F", "union%20", "select%20", "%3Cscript%3E",
        "%3Cimg%20src%3Dx%20onerror%3D", "%3Bcat%20", "%2Fetc%2F", "..%2F", "%24%7B",
        "a.", "%60", "%28%29", "%22", "%5C", "sleep%28", "char%28", "0x", "--%20",
    ]
    out = ["q="]
    n = 2
    while n < size:
        p = rnd.choice(pieces)
        out.append(p)
        n += len(p)
    return "".join(out).encode()


def write_config(work, name, port, backend_port, inline_bytes):
    crs = bench.CRS4
    path = os.path.join(work, f"palisade-{name}.toml")
    rules = [os.path.join(bench.BENCH, "rules", "base.conf"),
             os.path.join(crs, "crs-setup.conf.example"),
             os.path.join(crs, "rules", "*.conf")]
    lines = [
        "[server]",
        "worker_threads = 2",
        "inspection_threads = 1",
        f"inspect_inline_bytes = {inline_bytes}",
        "",
        "[[listener]]",
        f"address = \"127.0.0.1:{port}\"",
        "",
        "[[upstream]]",
        'name = "backend"',
        f"servers = [\"127.0.0.1:{backend_port}\"]",
        "",
        "[limits]",
        "request_body_bytes = 67108864",
        "",
        "[store]",
        f"path = {bench.toml_str(os.path.join(work, 'store-' + name))}",
        "",
        "[logs]",
        f"error_log = {bench.toml_str(os.path.join(work, name + '-error.log'))}",
        f"access_log = {bench.toml_str(os.path.join(work, name + '-access.log'))}",
        'level = "warn"',
        "",
    ]
    for r in rules:
        lines += ["[[rules]]", f"file = {bench.toml_str(r)}", ""]
    # Body limits raised so that the worst-case bodies are inspected in full.
    lines += ["[[rules]]", 'inline = """',
              "SecRequestBodyLimit 67108864",
              "SecRequestBodyNoFilesLimit 67108864",
              "SecArgumentsLimit 100000",
              '"""', ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def request_once(port, data, timeout):
    """Sends one request on a new connection; returns the status code (0: error)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(data)
            buf = b""
            while b"\r\n" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    return 0
                buf += chunk
            # Read the rest until close (Connection: close) so the server finishes.
            while s.recv(65536):
                pass
            return int(buf.split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        return 0


def get_latencies(port, seconds, rate):
    """GETs at a fixed rate, each on its own connection, for `seconds` (a GET
    still waiting then gets at most as long again); (latencies, failures)."""
    lat, failed = [], 0
    hard_stop = time.monotonic() + 2 * seconds
    rnd = random.Random(7)
    interval = 1.0 / rate
    start = time.monotonic()
    k = 0
    while True:
        due = start + k * interval
        now = time.monotonic()
        if due - start >= seconds:
            break
        if due > now:
            time.sleep(due - now)
        k += 1
        path = f"/items/{rnd.randrange(10**6)}?page={rnd.randrange(50)}"
        req = (f"GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: stall-bench\r\n"
               "Accept: */*\r\nConnection: close\r\n\r\n").encode()
        t0 = time.monotonic()
        left = hard_stop - t0
        if left <= 0:
            failed += 1
            continue
        status = request_once(port, req, timeout=left)
        if status != 200:
            failed += 1
        else:
            lat.append((time.monotonic() - t0) * 1000)
    return lat, failed


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def run_config(args, work, name, inline_bytes, backend_port, bodies):
    port = bench.free_port()
    cfg = write_config(work, name, port, backend_port, inline_bytes)
    proc = bench.Proc(f"palisade-{name}", [args.palisade, "run", "--config", cfg], work)
    bench.wait_port(port, proc)
    try:
        # Warm-up.
        get_latencies(port, 1, args.rate)
        alone, failed_alone = get_latencies(port, args.seconds, args.rate)

        stop = threading.Event()
        heavy_done = [0, 0]

        def hammer(i):
            body = bodies[i]
            req = (b"POST /upload HTTP/1.1\r\nHost: localhost\r\nUser-Agent: stall-bench\r\n"
                   b"Content-Type: application/x-www-form-urlencoded\r\nConnection: close\r\n"
                   + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            while not stop.is_set():
                status = request_once(port, req, timeout=600)
                if status:
                    heavy_done[i] += 1

        threads = [threading.Thread(target=hammer, args=(i,), daemon=True) for i in range(2)]
        cpu0 = bench.cpu_seconds([proc.pid])
        for t in threads:
            t.start()
        time.sleep(1.0)  # both worst-case requests are being inspected
        loaded, failed_loaded = get_latencies(port, args.seconds, args.rate)
        stop.set()
        for t in threads:
            t.join(timeout=600)
        cpu = bench.cpu_seconds([proc.pid]) - cpu0
        return {
            "alone": alone, "loaded": loaded,
            "failed": failed_alone + failed_loaded,
            "heavy": sum(heavy_done), "cpu": cpu,
        }
    finally:
        proc.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--rate", type=float, default=40)
    ap.add_argument("--heavy-kib", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--palisade", default=os.path.join(bench.REPO, "target/release/palisade"))
    ap.add_argument("--albedo", default=os.path.join(bench.REPO, "target/release/albedo"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="palisade-stall-")
    try:
        bport = bench.free_port()
        backend = bench.Proc("albedo", [args.albedo, "--bind", f"127.0.0.1:{bport}"], work)
        bench.wait_port(bport, backend)
        bodies = [heavy_body(args.seed + i, args.heavy_kib * 1024) for i in range(2)]
        results = {}
        for name, inline in (("pool", 16384), ("inline", 1 << 40)):
            bench.log(f"stall: {name} ...")
            results[name] = run_config(args, work, name, inline, bport, bodies)
        print()
        print(f"GET latency in ms at {args.rate:g}/s for {args.seconds:g} s, alone and while two "
              f"{args.heavy_kib} KiB worst-case requests are inspected (CRS v4 PL1, 2 workers)")
        print()
        print("| config | alone p50 | alone p99 | loaded p50 | loaded p90 | loaded p99 | loaded max "
              "| p99 loaded/alone | GETs failed | worst-case answered | proxy CPU s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, r in results.items():
            a, l = r["alone"], r["loaded"]
            print(f"| {name} | {pct(a, 50):.1f} | {pct(a, 99):.1f} | {pct(l, 50):.1f} | "
                  f"{pct(l, 90):.1f} | {pct(l, 99):.1f} | {max(l) if l else float('nan'):.1f} | "
                  f"{pct(l, 99) / pct(a, 99):.2f} | {r['failed']} | {r['heavy']} | {r['cpu']:.1f} |")
        p, i = results["pool"], results["inline"]
        print()
        print(f"stall: p99 loaded/alone: pool {pct(p['loaded'], 99) / pct(p['alone'], 99):.2f}, "
              f"inline {pct(i['loaded'], 99) / pct(i['alone'], 99):.2f}")
    finally:
        bench.stop_all()


if __name__ == "__main__":
    main()
