#!/usr/bin/env python3
"""Instructions per benign request, counted by callgrind, for CRS alone, CRS + the
detection plugin and its precision mode: the deterministic twin of evaluate.py's CPU
cost (requests per CPU-second), which a busy machine makes noisy.

    python3 bench/detection/instructions.py [--requests 200] [--crs v4] [--append FILE]

Each configuration's palisade (release build, one worker thread) runs under
`valgrind --tool=callgrind --instr-atstart=no`; after a warm-up, counting is turned
on for N varied benign GETs, then for N varied form POSTs (evaluate.py's cost
traffic, one keep-alive connection), and each count is dumped on its own. Prints a
Markdown section: instructions per request and the ratio to CRS alone; with
`--append FILE`, also puts that section at the end of FILE (replacing the one an
earlier run put there). scripts/detection-eval runs it after the evaluation.
"""

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import evaluate  # noqa: E402
from evaluate import CONFIGS, KeepAlive, cost_traffic, write_config  # noqa: E402
from run import Proc, free_port, start_albedo, stop_all, wait_port  # noqa: E402


def dumped(path):
    """The instruction total of one callgrind dump file."""
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise SystemExit(f"{path}: no summary line")


def measure(config, crs, binary, work, backend_port, traffic, warmup):
    port = free_port()
    path = write_config(config, crs, work, port, backend_port, workers=1, cpu_budget_off=True)
    out = os.path.join(work, f"callgrind-{config}.out")
    proc = Proc(f"callgrind-{config}",
                ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                 binary, "run", "--config", path], work)
    try:
        wait_port(port, proc, timeout=600)
        conn = KeepAlive(port)
        result = {}
        dump = 0
        for kind, requests in traffic.items():
            for raw in requests[:warmup]:
                conn.status(raw)
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], capture_output=True, check=True)
            subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], capture_output=True, check=True)
            counted = requests[warmup:]
            for raw in counted:
                status = conn.status(raw)
                if status != 200:
                    raise SystemExit(f"{config}: a benign {kind} was answered {status}")
            subprocess.run(["callgrind_control", "-d", str(proc.pid)], capture_output=True, check=True)
            subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], capture_output=True, check=True)
            dump += 1
            result[kind] = dumped(f"{out}.{dump}") / len(counted)
        conn.close()
        return result
    finally:
        proc.stop(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200, help="requests counted per kind")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--crs", choices=["v4", "v3"], default="v4")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--binary", default=os.path.join(evaluate.REPO, "target", "release", "palisade"))
    ap.add_argument("--append", metavar="FILE", help="also write the section at the end of FILE")
    args = ap.parse_args()
    gets, forms = cost_traffic(args.seed, args.requests + args.warmup)
    traffic = {"GET": gets, "form POST": forms}
    albedo = os.path.join(os.path.dirname(args.binary), "albedo")
    with tempfile.TemporaryDirectory(prefix="palisade-instr-") as work:
        _, backend_port = start_albedo(albedo, work, None, who="instructions")
        try:
            counts = {c: measure(c, args.crs, args.binary, work, backend_port, traffic, args.warmup)
                      for c in CONFIGS}
        finally:
            stop_all()
    lines = [HEADING, "",
             f"Counted by callgrind (`python3 bench/detection/instructions.py --requests {args.requests}`): "
             f"{args.requests} varied benign requests of each kind, after {args.warmup} not counted, on one "
             f"keep-alive connection to palisade (release build, one worker thread) under valgrind, CRS "
             f"{args.crs} at paranoia level 1. Unlike requests per CPU-second, the count does not move with "
             "the machine's load.", "",
             "| instructions per request | " + " | ".join(CONFIGS) + " |",
             "|---|" + "---:|" * len(CONFIGS)]
    for kind in traffic:
        base = counts["crs"][kind]
        cells = [f"{counts[c][kind] / 1000:.0f}k" + ("" if c == "crs" else f" ({counts[c][kind] / base - 1:+.1%})")
                 for c in CONFIGS]
        lines.append(f"| benign {kind} | " + " | ".join(cells) + " |")
    section = "\n".join(lines) + "\n"
    print(section)
    if args.append:
        with open(args.append) as f:
            text = f.read()
        if HEADING in text:
            text = text[:text.index(HEADING)].rstrip("\n") + "\n"
        with open(args.append, "w") as f:
            f.write(text.rstrip("\n") + "\n\n" + section)


HEADING = "## Cost in instructions"


if __name__ == "__main__":
    main()
