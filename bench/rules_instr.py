#!/usr/bin/env python3
"""Instructions per proxied request with the rules (callgrind): what the rule sets cost
a request in the one figure this shared machine cannot blur.

    python3 bench/rules_instr.py [--configs bde] [--out-md FILE] [--keep-dumps DIR] [--smoke]

The release `palisade` of each configuration of bench/run.py ((b) no rules, (d) CRS
v4, (e) CRS 3.3.4) runs under `valgrind --tool=callgrind` with instrumentation off.
One keep-alive connection sends each request of the fixed corpus (`bench/corpus/`:
the benign GET, the 2 KiB form, the 20 KiB JSON) first for a warm-up, then with
instrumentation on for the measured requests, one at a time; a dump after each
series gives the instructions of exactly those requests. The rules' share of a
request is the configuration's count minus that of (b), the proxy's own cost for the
same bytes. The backend (albedo) answers 200 with an empty body, so phases 3 and 4 do
little; the engine benchmark's `1-5` rows show a response body's cost.

The CPU budget is off and the head timeout long, since callgrind runs the proxy about
fifty times slower than it runs natively (a budget of 1 s would refuse the first,
cold requests).
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxy_instr as P  # noqa: E402  (callgrind_control, dump totals, one connection)
import run as R  # noqa: E402  (bench/run.py: processes, ports, configurations)

# (label, corpus file, warm-up requests, measured requests)
SERIES = [
    ("GET", "get", 100, 400),
    ("form POST 2 KiB", "form", 50, 200),
    ("JSON POST 20 KiB", "json", 10, 40),
]

# Issue 11's targets for the engine with CRS v4 (configuration (d)): instructions per
# request at most.
TARGETS = {"GET": 0.2e6, "form POST 2 KiB": 0.6e6, "JSON POST 20 KiB": 2e6}


def config(key, work, port, backend_port, server_extra="", extra=""):
    """bench/run.py's configuration, with no CPU budget and a long head timeout;
    `server_extra` is added to its [server] section and `extra` at its end."""
    path = R.write_palisade_config(key, work, port, backend_port)
    with open(path) as f:
        text = f.read()
    text = text.replace("worker_threads = 1", "worker_threads = 1\nwaf_cpu_budget = \"off\"\n"
                        "client_header_timeout = \"600s\"" + server_extra, 1) + extra
    with open(path, "w") as f:
        f.write(text)
    return path


def newest_dump(work, prefix, seen):
    """The dump callgrind wrote after `seen` (waits for it)."""
    deadline = time.time() + 60
    while time.time() < deadline:
        dumps = [f for f in os.listdir(work) if f.startswith(prefix + ".") and f not in seen]
        if dumps:
            time.sleep(0.5)  # let callgrind finish writing it
            return max(dumps, key=lambda f: int(f.rsplit(".", 1)[1]))
        time.sleep(0.2)
    raise RuntimeError("rules_instr: callgrind wrote no dump")


def measure(args, key, work, backend_port, series, variant=None):
    """Instructions per request of each series under configuration `key`; a
    `variant` (name, server_extra, extra, started) changes the configuration and
    calls started(work) once the proxy listens (before the warm-up)."""
    port = R.free_port()
    name_, server_extra, extra, started = variant or (key, "", "", None)
    cfg = config(key, work, port, backend_port, server_extra, extra)
    key = name_
    out = os.path.join(work, f"callgrind-{key}.out")
    proc = R.Proc(f"palisade-rules-instr-{key}",
                  ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                   f"--callgrind-out-file={out}", args.palisade, "run", "--config", cfg],
                  work)
    results = {}
    seen = set()
    try:
        R.wait_port(port, proc, timeout=600)
        if started:
            started(work)
        client = P.Client(port)
        client.sock.settimeout(600)
        for label, name, warm, count in series:
            with open(R.corpus_path(name), "rb") as f:
                data = f.read()
            for _ in range(warm):
                if client.send(data) != 200:
                    raise RuntimeError(f"rules_instr: ({key}) a warm-up {label} was not 200")
            P.ctl(["-i", "on"], proc.pid)
            bad = sum(client.send(data) != 200 for _ in range(count))
            P.ctl(["-i", "off"], proc.pid)
            P.ctl(["-d"], proc.pid)
            dump = newest_dump(work, f"callgrind-{key}.out", seen)
            seen.add(dump)
            if bad:
                raise RuntimeError(f"rules_instr: ({key}) {bad} measured {label} were not 200")
            results[label] = P.totals(os.path.join(work, dump)) / count
            R.log(f"rules_instr: ({key}) {label}: {results[label]:,.0f} instructions per request")
            if args.keep_dumps:
                os.makedirs(args.keep_dumps, exist_ok=True)
                shutil.copy(os.path.join(work, dump),
                            os.path.join(args.keep_dumps, f"callgrind.{key}.{name}.out"))
        client.close()
    finally:
        proc.stop(timeout=60)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="bde", help="configurations of bench/run.py (b first)")
    ap.add_argument("--smoke", action="store_true", help="a few requests per series")
    ap.add_argument("--palisade", default=os.path.join(R.REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(R.REPO, "target", "release", "albedo"))
    ap.add_argument("--out-md", default=None)
    ap.add_argument("--keep-dumps", default=None, metavar="DIR",
                    help="keep each series' callgrind dump in DIR (for callgrind_annotate)")
    args = ap.parse_args()
    configs = [c for c in args.configs if c in "bde"]
    if "b" not in configs:
        configs.insert(0, "b")
    series = [(label, name, max(2, warm // 10), max(2, count // 20))
              if args.smoke else (label, name, warm, count)
              for label, name, warm, count in SERIES]
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            raise SystemExit(f"rules_instr: {tool} is missing (apt-get install valgrind)")
    work = tempfile.mkdtemp(prefix="palisade-rules-instr-")
    table = {}
    try:
        _, backend_port = R.start_albedo(args.albedo, work, None, who="rules_instr")
        for key in configs:
            table[key] = measure(args, key, work, backend_port, series)
    finally:
        R.stop_all()
        shutil.rmtree(work, ignore_errors=True)
    report(table, configs, series, args)


def report(table, configs, series, args):
    lines = ["| config | request | instructions per request | rules' share (minus (b)) | target | met |",
             "|---|---|---:|---:|---:|---|"]
    for key in configs:
        for label, _, _, _ in series:
            total = table[key][label]
            share = "" if key == "b" else f"{total - table['b'][label]:,.0f}"
            target, met = "", ""
            if key == "d":
                target = f"<= {TARGETS[label]:,.0f}"
                met = "yes" if total - table["b"][label] <= TARGETS[label] else "no"
            lines.append(f"| ({key}) {R.CONFIGS[key]} | {label} | {total:,.0f} | {share} | "
                         f"{target} | {met} |")
    text = "\n".join(lines)
    print(text)
    for key in configs:
        if key != "b":
            parts = ", ".join(f"{label} {(table[key][label] - table['b'][label]) / 1e6:.3f} M"
                              for label, _, _, _ in series)
            print(f"rules_instr: ({key}) rules' instructions per request: {parts}")
    if args.out_md:
        counts = ", ".join(f"{label} {warm} + {count}" for label, _, warm, count in series)
        with open(args.out_md, "w") as f:
            f.write(SECTION.format(table=text, counts=counts,
                                   smoke=" --smoke" if args.smoke else ""))


SECTION = """## Instructions per proxied request with the rules

`python3 bench/rules_instr.py{smoke}` (also run by `scripts/bench`): each configuration's
release proxy under callgrind, one keep-alive connection sending the fixed corpus's
requests one at a time to albedo (warm-up + measured requests: {counts}); the
instructions of the measured requests only, per request. The rules' share is the
configuration's count minus that of (b) for the same request: the engine's cost,
phases 1 to 5 (the backend answers with an empty body). Callgrind counts user-space
instructions, repeatable whatever the machine's other load. The targets (issue 11)
are the engine's with CRS v4.

{table}

"""


if __name__ == "__main__":
    main()
