#!/usr/bin/env python3
"""Is the inspection pool fair between clients? (issue 36)

One client sends large bodies one after another; another floods the proxy with
large worst-case bodies, several at a time. The inspection pool (one thread here)
evaluates every large phase; its slots go in turn to the clients that wait
(crates/proxy/src/inspect/fair.rs), so the first client's body should wait for at
most one of the flood's evaluations, not for the flood's whole backlog.

Measured, with CRS v4 (PL1) on 2 workers and 1 inspection thread, in one run:

  alone        the client's bodies with no other traffic: its latency
  own address  the same, while the flood comes from another address (127.0.0.2)
  same address the same, while the flood comes from the client's own address
               (127.0.0.1): one client for the pool, so first come, first served,
               as the pool was before it took turns

The figure is the client's median latency under the flood over its median alone
(target: at most 2x with the flood on its own address). Every body is generated
from --seed (attack-like fragments for the flood, as bench/stall.py makes them, and
form fields of plain words for the client), none of them known to the engine.

Usage: python3 bench/fairness.py [--bodies 12] [--flood 6] [--kib 256] [--smoke]
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
import run as bench  # noqa: E402
from stall import heavy_body, write_config  # noqa: E402

WORDS = ["alpha", "river", "stone", "north", "paper", "garden", "silver", "window",
         "market", "yellow", "winter", "orange", "planet", "signal", "bridge", "castle"]


def plain_body(seed, size):
    """A urlencoded form of about `size` bytes: fields of ordinary words, about a
    kilobyte each (the rules in force refuse 1,000 arguments or more)."""
    rnd = random.Random(seed)
    out, n, k = [], 0, 0
    while n < size:
        value = "+".join(rnd.choice(WORDS) for _ in range(rnd.randrange(100, 200)))
        field = f"f{k}={value}"
        out.append(field)
        n += len(field) + 1
        k += 1
    return "&".join(out).encode()


def post(port, body, source, timeout=600):
    """POSTs `body` from `source` on a new connection; (status, seconds)."""
    req = (b"POST /submit HTTP/1.1\r\nHost: localhost\r\nUser-Agent: fairness-bench\r\n"
           b"Content-Type: application/x-www-form-urlencoded\r\nConnection: close\r\n"
           + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                      source_address=(source, 0)) as s:
            s.sendall(req)
            buf = b""
            while b"\r\n" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    return 0, time.monotonic() - t0
                buf += chunk
            while s.recv(65536):
                pass
            return int(buf.split(b" ", 2)[1]), time.monotonic() - t0
    except (OSError, ValueError, IndexError):
        return 0, time.monotonic() - t0


def client_run(port, args, seed_base):
    """The client's bodies in turn: their latencies in ms (failures raise)."""
    lat = []
    bodies = [plain_body(seed_base + i, args.kib * 1024) for i in range(args.bodies)]
    for i, body in enumerate(bodies):
        status, secs = post(port, body, "127.0.0.1")
        if status != 200:
            raise RuntimeError(f"fairness: the client's body {i} was answered {status}")
        lat.append(secs * 1000)
    return lat


def with_flood(port, args, source, seed_base):
    """The client's run while `args.flood` senders from `source` keep a worst-case
    body each in flight; (client latencies, flood bodies answered)."""
    stop = threading.Event()
    done = [0] * args.flood
    # Made before the flood starts: the client's requests must not wait for the
    # generator (Python's threads share one interpreter lock).
    bodies = [heavy_body(seed_base * 1000 + k, args.kib * 1024) for k in range(4 * args.flood)]

    def flood(i):
        k = i
        while not stop.is_set():
            status, _ = post(port, bodies[k % len(bodies)], source)
            if status:
                done[i] += 1
            k += args.flood

    threads = [threading.Thread(target=flood, args=(i,), daemon=True)
               for i in range(args.flood)]
    for t in threads:
        t.start()
    time.sleep(2.0)  # the flood's backlog is queued
    try:
        lat = client_run(port, args, seed_base)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=600)
    return lat, sum(done)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--palisade", default=os.path.join(bench.REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(bench.REPO, "target", "release", "albedo"))
    ap.add_argument("--bodies", type=int, default=12, help="the client's bodies per measurement")
    ap.add_argument("--flood", type=int, default=6, help="worst-case bodies in flight at once")
    ap.add_argument("--kib", type=int, default=256, help="size of every body")
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--smoke", action="store_true", help="4 bodies, a flood of 3, 64 KiB")
    ap.add_argument("--out-md", default=None, help="also write the table to this file")
    args = ap.parse_args()
    if args.smoke:
        args.bodies, args.flood, args.kib = 4, 3, 64
    work = tempfile.mkdtemp(prefix="palisade-fairness-")
    try:
        bport = bench.free_port()
        backend = bench.Proc("albedo", [args.albedo, "--bind", f"127.0.0.1:{bport}"], work,
                             cpu=bench.LOAD_CPU)
        bench.wait_port(bport, backend)
        port = bench.free_port()
        cfg = write_config(work, "fairness", port, bport, 16384)
        # The proxy on one CPU, this script (the client and the flood) on the other.
        proc = bench.Proc("palisade-fairness", [args.palisade, "run", "--config", cfg], work,
                          cpu=bench.SUT_CPU)
        os.sched_setaffinity(0, {int(bench.LOAD_CPU)})
        bench.wait_port(port, proc)
        client_run(port, argparse.Namespace(bodies=2, kib=args.kib), 1)  # warm-up
        alone = client_run(port, args, 100)
        own, own_flood = with_flood(port, args, "127.0.0.2", 200)
        same, same_flood = with_flood(port, args, "127.0.0.1", 300)
        proc.stop()
        rows = [("alone", alone, 0), ("flood from its own address", own, own_flood),
                ("flood from the client's address", same, same_flood)]
        base = statistics.median(alone)
        lines = [
            f"The client's {args.kib} KiB form bodies, {args.bodies} in turn; the flood keeps "
            f"{args.flood} worst-case {args.kib} KiB bodies in flight (CRS v4 PL1, 2 workers, "
            "1 inspection thread, all on one CPU; the clients on the other). Latency in ms:",
            "",
            "| client | median | max | median / alone | flood bodies answered |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, lat, flooded in rows:
            med = statistics.median(lat)
            lines.append(f"| {name} | {med:,.0f} | {max(lat):,.0f} | {med / base:.2f} | "
                         f"{flooded} |")
        r_own = statistics.median(own) / base
        r_same = statistics.median(same) / base
        verdict = "met" if r_own <= 2.0 else "NOT met"
        lines += ["", f"fairness: a flood from another address delays the client's bodies "
                  f"{r_own:.2f}x (target at most 2x: {verdict}); from its own address, "
                  f"first come first served, {r_same:.2f}x"]
        print()
        print("\n".join(lines))
        if args.out_md:
            with open(args.out_md, "w") as f:
                f.write("## Fairness of the inspection pool (bench/fairness.py)\n\n"
                        + "\n".join(lines) + "\n")
    finally:
        bench.stop_all()


if __name__ == "__main__":
    main()
