#!/usr/bin/env python3
"""Runs the engine benchmarks (crates/engine/benches) and writes them as markdown.

  engine_report.py OUT.md [--smoke]

- `transaction` (divan): time and allocations per transaction, CRS v4 and CRS 3.3.4,
  over the fixed corpus of bench/corpus/ and a sample of the varying corpus of
  bench/gen_varying.py. Its divan table is turned into one markdown table.
- `transaction` with PALISADE_BENCH_VARYING=check: every request of the varying corpus
  through both rule sets; none may be blocked (a failure with --smoke).
- `adversarial`: engine time per MiB for worst-case inputs at 64 KiB, 256 KiB, 1 MiB.
- `ip_sets`: load time, memory and lookup time of 1.6 million-network IP sets.
- the proxy's `rate_limit` and `shaping` benches: cost per rate-limit check and per paced
  piece of a shaped body, 1,000 to 1,000,000 clients, on one thread and on two.

The engine benches run pinned to CPU 0, the proxy's on both CPUs (they compare one
thread with two). With --smoke, a handful of samples and the small sizes only,
and the exit status is 1 when a benchmark failed (the markdown is written either way).
"""

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

UNITS = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}


def to_us(num, unit):
    return float(num) * UNITS[unit]


def parse_divan(text):
    """Rows of (group, arg, fastest_us, median_us, allocs, alloc_bytes, grows)."""
    rows = []
    group = None
    cur = None
    pending = None
    for raw in text.splitlines():
        line = raw.replace("│", " ").replace("├─", " ").replace("╰─", " ").strip()
        if not line:
            continue
        m = re.match(r"^(\S+)\s+(\S+) (ns|µs|us|ms|s)\s+(\S+) (ns|µs|us|ms|s)\s+(\S+) (ns|µs|us|ms|s)", line)
        if m:
            cur = {"group": group, "arg": m.group(1), "fastest": to_us(m.group(2), m.group(3)),
                   "median": to_us(m.group(6), m.group(7)), "allocs": None, "bytes": None,
                   "grows": None}
            rows.append(cur)
            pending = None
            continue
        if re.match(r"^[a-z_0-9]+$", line) and not line.isdigit():
            group = line
            cur = None
            continue
        if line in ("alloc:", "grow:", "dealloc:", "max alloc:"):
            pending = line
            continue
        if cur is not None and pending in ("alloc:", "grow:"):
            # A count line ("2061"), then a size line ("466 KB" or "461.6 KB").
            m = re.match(r"^([\d.]+) (B|KB|MB|GB)\b", line)
            if m:
                if pending == "alloc:":
                    mult = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9}[m.group(2)]
                    cur["bytes"] = float(m.group(1)) * mult
                pending = None
                continue
            first = line.split()[0]
            if first.isdigit():
                cur["allocs" if pending == "alloc:" else "grows"] = int(first)
                continue
    return rows


GROUPS = {
    "crs_v4_request": ("CRS v4", "1, 2, 5"),
    "crs_v4_full": ("CRS v4", "1-5 (1 KiB HTML response)"),
    "crs3_request": ("CRS 3.3.4", "1, 2, 5"),
    "crs3_full": ("CRS 3.3.4", "1-5 (1 KiB HTML response)"),
    "crs_v4_varying": ("CRS v4", "1, 2, 5"),
    "crs3_varying": ("CRS 3.3.4", "1, 2, 5"),
}


def run(argv, **kw):
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, **kw)


def bench_section(md, failed, title, bench, extra, summary_prefix, timeout, method,
                  package="engine", pin=True):
    """Runs one cargo bench that prints a Markdown table and a summary line, and adds
    its section (title, command, method, table, summary) to `md`; a failure is named in
    `failed` and its output's tail goes into the section. `pin`: on CPU 0 only (a bench
    that compares one thread with two needs both CPUs)."""
    md.append(f"## {title}")
    md.append("")
    cmd = (["taskset", "-c", "0"] if pin else []) + [
        "cargo", "bench", "-q", "-p", package, "--bench", bench, "--"] + extra
    r = run(cmd, timeout=timeout)
    md.append("`" + " ".join(cmd) + "`: " + method)
    md.append("")
    table = [l for l in r.stdout.splitlines() if l.startswith("|")]
    summary = [l for l in r.stdout.splitlines() if l.startswith(summary_prefix)]
    if r.returncode != 0 or not table:
        failed.append(bench)
        md.append(f"The {bench} benchmark failed:")
        md.append("")
        md.append("```")
        md.append("\n".join((r.stdout + r.stderr).splitlines()[-20:]))
        md.append("```")
    else:
        md += table
        md.append("")
        md += summary
    md.append("")


def main():
    out = sys.argv[1]
    smoke = "--smoke" in sys.argv
    failed = []
    md = ["## Engine microbenchmarks (no network)", ""]
    cmd = ["taskset", "-c", "0", "cargo", "bench", "-q", "-p", "engine", "--bench", "transaction",
           "--", "--sample-count", "3" if smoke else "100"]
    r = run(cmd, timeout=1800)
    text = r.stdout + "\n" + r.stderr
    md.append("`" + " ".join(cmd) + "`: median (and fastest) wall time of one transaction on a "
              "pinned core, and heap allocations per transaction (divan's counting allocator). "
              "`bench/rules/base.conf` in front of the rule set, as in the load runs. The "
              "`varying-*` rows run the first 200 distinct requests of that kind of the varying "
              "corpus in turn (`get` holds pages, assets and API calls; `form` urlencoded "
              "forms; `multipart` forms with a small file; `json` bodies up to 64 KiB), one per "
              "iteration, so they are averages over distinct requests.")
    md.append("")
    skipped = [l for l in text.splitlines() if "skipped" in l]
    for s in skipped:
        md.append(f"- {s.strip()}")
    if skipped:
        md.append("")
    rows = parse_divan(r.stdout)
    if r.returncode != 0 or not rows:
        failed.append("transaction (divan)")
        md.append("The transaction benchmark failed:")
        md.append("")
        md.append("```")
        md.append("\n".join(text.splitlines()[-20:]))
        md.append("```")
    else:
        md.append("| rule set | request | phases | median µs | fastest µs | allocations | "
                  "allocated KB | reallocations |")
        md.append("|---|---|---|---:|---:|---:|---:|---:|")
        for row in rows:
            rs, phases = GROUPS.get(row["group"], (row["group"], "?"))
            allocs = "n/a" if row["allocs"] is None else str(row["allocs"])
            kb = "n/a" if row["bytes"] is None else f"{row['bytes'] / 1e3:,.1f}"
            grows = "n/a" if row["grows"] is None else str(row["grows"])
            md.append(f"| {rs} | {row['arg']} | {phases} | {row['median']:,.1f} | "
                      f"{row['fastest']:,.1f} | {allocs} | {kb} | {grows} |")
        get = [x for x in rows if x["group"] == "crs_v4_request" and x["arg"] == "get"]
        if get:
            g = get[0]["median"]
            md.append("")
            md.append(f"Benign GET with CRS v4, median wall time: {g:,.1f} µs.")
    checks = [l for l in r.stderr.splitlines() if l.startswith(("crs-v4 ", "crs-3.3.4 "))]
    if checks:
        md.append("")
        md.append("What each request does (the benchmark checks that it measures the right path):")
        md.append("")
        md.append("```")
        for l in checks:
            md.append(re.sub(r" rules \[.*\]", "", l))
        md.append("```")
    md.append("")

    env = dict(os.environ, PALISADE_BENCH_VARYING="check")
    cmd = ["taskset", "-c", "0", "cargo", "bench", "-q", "-p", "engine", "--bench", "transaction"]
    r = run(cmd, env=env, timeout=1800)
    lines = [l for l in r.stdout.splitlines() if l.startswith("varying check:")]
    md.append("The varying corpus is benign: every one of its requests through each rule set "
              "(`PALISADE_BENCH_VARYING=check " + " ".join(cmd) + "`, phases 1-5), per kind "
              "and in all, with the rules that matched:")
    md.append("")
    if r.returncode != 0 or not lines:
        failed.append("varying corpus check")
        md.append("The check failed (a request blocked, or the run broke):")
        md.append("")
    md.append("```")
    md.append("\n".join(lines + ([] if r.returncode == 0 and lines
                                 else (r.stdout + r.stderr).splitlines()[-20:])))
    md.append("```")
    md.append("")

    env = dict(os.environ, PALISADE_BENCH_CPU="0.3" if smoke else "2")
    cmd = ["taskset", "-c", "0", "cargo", "bench", "-q", "-p", "engine", "--bench", "transaction"]
    r = run(cmd, env=env, timeout=1800)
    table = [l for l in r.stdout.splitlines() if l.startswith("|")]
    md.append(f"CPU time per transaction (`PALISADE_BENCH_CPU={env['PALISADE_BENCH_CPU']} "
              + " ".join(cmd) + "`): the thread's own CPU clock over a loop of transactions, "
              "so time spent waiting for the CPU on a shared machine is left out. On this "
              "virtual machine the speed of one core still varies by up to 2x between runs "
              "(other tenants), so compare figures of one run. A `varying-*` row runs each of "
              "its distinct requests once per round, after one warm-up round, and gives the "
              "average per request.")
    md.append("")
    if r.returncode != 0 or not table:
        failed.append("transaction (CPU time)")
        md.append("The CPU-time run failed: " + " ".join((r.stderr or "").splitlines()[-3:]))
    else:
        md += table
        get = [l for l in table if l.startswith("| CRS v4 | get | 1, 2, 5 |")]
        if get:
            g = float(get[0].split("|")[4])
            md.append("")
            md.append(f"Target: a benign GET at most 20 µs of CPU with CRS v4. Measured: "
                      f"{g:,.1f} µs, {'met' if g <= 20 else 'not met'}.")
    md.append("")

    bench_section(md, failed, "Adversarial inputs (engine time per MiB)", "adversarial",
                  ["--quick", "plain"] if smoke else [], "adversarial:", 3600,
                  "CRS v4 PL1 with body and argument limits lifted so the engine does all the "
                  "work; phases 1, 2 and 5; CPU time per run, averaged over at least 3 runs and "
                  "0.4 s. `ms per MiB` is engine time over input size; `marginal` is the growth "
                  "from the previous size, which shows whether time grows linearly. Target: at "
                  "most 20 ms per MiB.")
    bench_section(md, failed, "IP sets at scale", "ip_sets", ["--smoke"] if smoke else [],
                  "ip sets:", 1800,
                  "`@ipMatchFromFile` and the proxy's `[access]` lists (the same sets) over "
                  "networks generated from a fixed seed (3 in 4 IPv4, half single addresses, "
                  "half /16 to /31; the rest IPv6, single addresses and /16 to /127). Load: the "
                  "operator compiled from the file (read, parse, sort, merge), wall time. "
                  "Lookup: random addresses, as text (what `@ipMatch` gets) and parsed (a "
                  "connection's verdict). Targets: load at most 2 s and lookup at most 1 µs for "
                  "1.6 million networks.")
    bench_section(md, failed, "Rate limits: cost per check", "rate_limit",
                  ["--smoke"] if smoke else [], "rate limit:", 1800,
                  "a `[[rate_limit]]` keyed by client address, 100,000,000/s with a burst of "
                  "1,000,000 so every check passes and updates its key's bucket; keys drawn from "
                  "a fixed seed and visited in a shuffled order; the share is of a 23 us no-rules "
                  "proxy request (about 43,000 requests per CPU-second, row (b) GET). Costs are the "
                  "threads' own CPU time (the machine is shared). The two-thread columns "
                  "run on both CPUs: disjoint keys (each thread its own half, as a client's "
                  "requests stay on one worker) and shared keys (both threads every key), each "
                  "by CPU time (twice one thread's CPU per check over two threads' CPU per check: "
                  "what two cores give when the threads do not slow each other down) and by "
                  "wall clock (which also counts other jobs' time slices). Targets: "
                  "at most 2% of the proxy's cost, flat from 1,000 to 1,000,000 clients; two "
                  "threads at least 1.8x one.", package="proxy", pin=False)
    bench_section(md, failed, "Bandwidth shaping: cost per piece", "shaping",
                  ["--smoke"] if smoke else [], "shaping:", 1800,
                  "the cost of pacing one 16 KiB piece of a shaped response body (`[[shape]]`): "
                  "taking its bytes from the key's bucket, each client with one response in "
                  "progress, pieces cycled over the clients in a shuffled order, at a rate that "
                  "never makes a piece wait (the bookkeeping alone). The two-thread column runs "
                  "on both CPUs.", package="proxy", pin=False)
    with open(out, "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"engine benchmarks: wrote {out}")
    if failed:
        print(f"engine benchmarks: failed: {', '.join(failed)}", file=sys.stderr)
        if smoke:
            sys.exit(1)


if __name__ == "__main__":
    main()
