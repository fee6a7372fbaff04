"""Configurations of the release proxy compared natively, side by side, in one run:
requests per CPU-second of each proxy process.

Each configuration is bench/run.py's configuration (d) (CRS v4 PL1, one worker
thread) with its own additions, started at once, all pinned to the same CPU,
behind the same albedo. wrk sends the varying corpus (bench/gen_varying.py, from a
fixed seed: GET pages, assets and API calls, forms, multipart and JSON) to each in
turn, `rounds` rounds of `duration` seconds; a configuration's figure is its
requests over its CPU seconds, over all its rounds. Used by bench/console_cost.py
and bench/instrumentation.py.
"""

import os
import shutil
import statistics

import rules_instr as RI  # the configuration of (d) with additions
import run as R  # processes, ports, wrk, CPU time


class Variant:
    """One configuration: `server_extra` goes into [server], `logs_extra` into
    [logs], `extra` at the end; `started(work)` runs once it listens,
    `during(system)` around each of its rounds (a context manager factory, or
    None), `check()` after the run."""

    def __init__(self, name, server_extra="", extra="", started=None, during=None, check=None,
                 logs_extra=""):
        self.name = name
        self.server_extra = server_extra
        self.logs_extra = logs_extra
        self.extra = extra
        self.started = started
        self.during = during
        self.check = check


def run(args, work, backend_port, variants, who):
    """Runs the comparison; returns {name: (requests, cpu_s, [per-round rates])}."""
    import gen_varying
    if shutil.which("wrk") is None:
        raise SystemExit(f"{who}: wrk is missing (apt-get install wrk)")
    gen_varying.write(R.VARYING_DIR)
    lua = os.path.join(R.BENCH, "wrk", "corpus.lua")
    files = R.Varying(["get-page", "get-asset", "get-api", "form", "multipart", "json"])
    systems = {}
    for v in variants:
        port = R.free_port()
        path = RI.config("d", work, port, backend_port, v.server_extra, v.extra)
        native_path = os.path.join(work, f"palisade-native-{v.name}.toml")
        with open(path) as f:
            text = f.read().replace('client_header_timeout = "600s"', "")
        with open(native_path, "w") as f:
            text = text.replace('waf_cpu_budget = "off"\n', "")
            f.write(text.replace("[logs]\n", "[logs]\n" + v.logs_extra, 1))
        proc = R.Proc(f"palisade-native-{v.name}",
                      [args.palisade, "run", "--config", native_path], work, cpu=R.SUT_CPU)
        R.wait_port(port, proc)
        if v.started:
            v.started(work)
        systems[v.name] = (v, R.System(v.name, port, proc, lambda p=proc: [p.pid]))
    for _, s in systems.values():
        R.run_wrk(s.port, files, 2, args.connections, lua)  # warm-up
    totals = {name: [0, 0.0, []] for name in systems}
    for _ in range(args.rounds):
        for name, (v, s) in systems.items():
            R.settle(s)
            ctx = v.during(s) if v.during else None
            if ctx:
                ctx.__enter__()
            try:
                c0 = R.cpu_seconds(s.pids())
                r = R.run_wrk(s.port, files, args.duration, args.connections, lua)
                cpu = R.cpu_seconds(s.pids()) - c0
            finally:
                if ctx:
                    ctx.__exit__(None, None, None)
            if r["socket_errors"]:
                R.log(f"{who}: ({name}) {r['socket_errors']} socket errors")
            totals[name][0] += r["requests"]
            totals[name][1] += cpu
            totals[name][2].append(r["requests"] / cpu if cpu > 0 else 0.0)
    for v, _ in systems.values():
        if v.check:
            v.check()
    return {name: tuple(t) for name, t in totals.items()}


def report(args, native, base, who, targets):
    """Prints the table and each configuration's cost against `base`; `targets`
    maps a name to its largest allowed cost (a fraction). Returns the lines."""
    rate = {name: v[0] / v[1] for name, v in native.items()}
    lines = [f"| configuration ({args.rounds} rounds x {args.duration} s, varying corpus) | "
             "requests | CPU s | requests per CPU-second | median of rounds | CPU per request "
             f"against {base} |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, v in native.items():
        cost = "" if name == base else f"{(rate[base] / rate[name] - 1) * 100:+.2f}%"
        lines.append(f"| {name} | {v[0]:,} | {v[1]:.2f} | {rate[name]:,.0f} | "
                     f"{statistics.median(v[2]):,.0f} | {cost} |")
    print("\n".join(lines))
    for name, limit in targets.items():
        cost = rate[base] / rate[name] - 1
        print(f"{who}: {name} costs {cost * 100:+.2f}% CPU per request against {base} "
              f"(target {limit * 100:.0f}%): {'met' if cost <= limit else 'NOT met'}")
    return lines
