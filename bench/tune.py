#!/usr/bin/env python3
"""`palisade tune` against its target: on the project's own benign corpus replayed
through CRS v4 at paranoia level 2, tune's proven exclusions remove at least 90% of
the false positives, and no attack of the project's attack corpus newly passes.

1. palisade (CRS v4, paranoia level 2, JSON audit log of refused requests) in front
   of albedo; the tune files tune-before.conf and tune-after.conf are in the
   configuration from the start (empty).
2. The benign corpus of bench/detection/benign.py (seed A) is sent, each request from
   one of 40 client addresses (X-Forwarded-For from a trusted 127.0.0.1): every
   refusal is a false positive, recorded in the audit log.
3. `palisade tune --attacks FILE --write` (the attack corpus of
   bench/detection/corpus.py, seed B): proposals, proof, the exclusion files.
4. SIGHUP: the exclusions apply. The same benign set is sent again, then a fresh one
   (seed C) that tune has not seen, then the attack corpus of seed B and a fresh one
   (seed D).

Prints the false positives before and after on both benign sets, and the attacks
blocked before and after on both attack sets.

    python3 bench/tune.py [--benign N] [--per-class N] [--palisade BIN] [--albedo BIN]
"""

import argparse
import concurrent.futures
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, os.path.join(BENCH, "detection"))
sys.path.insert(0, BENCH)

import benign as benign_corpus  # noqa: E402
import corpus  # noqa: E402
from detection.evaluate import send  # noqa: E402
from run import CRS4, Proc, free_port, start_albedo, stop_all, wait_port  # noqa: E402

RECOMMENDED = os.path.join(REPO, "examples", "palisade-recommended.conf")
CLIENTS = [f"198.51.100.{i}" for i in range(1, 41)]


def config(work, port, backend_port, audit_log):
    tune_dir = os.path.join(work, "tune")
    os.makedirs(tune_dir, exist_ok=True)
    for name in ("tune-before.conf", "tune-after.conf"):
        open(os.path.join(tune_dir, name), "a").close()
    audit = "\n".join([
        "SecAuditEngine RelevantOnly",
        'SecAuditLogRelevantStatus "^(?:5|4(?!04))"',
        "SecAuditLogParts ABCFHZ",
        "SecAuditLogFormat JSON",
        "SecAuditLogType Serial",
        f"SecAuditLog {audit_log}",
    ])
    pl2 = 'SecAction "id:900000,phase:1,pass,nolog,setvar:tx.blocking_paranoia_level=2"'
    lines = [
        "[server]", "worker_threads = 2", "",
        "[[listener]]", f'address = "127.0.0.1:{port}"', "",
        "[[upstream]]", 'name = "app"', f'servers = ["127.0.0.1:{backend_port}"]', "keepalive = 32", "",
        "[client_address]", 'trusted_proxies = ["127.0.0.1"]', 'header = "X-Forwarded-For"', "",
        "[logs]", f'error_log = "{os.path.join(work, "error.log")}"', 'level = "warn"', "",
        "[store]", f'path = "{os.path.join(work, "store")}"', "",
        "[[rules]]", f'file = "{RECOMMENDED}"', "",
        "[[rules]]", "inline = '''", audit, "'''", "",
        "[[rules]]", f'file = "{os.path.join(CRS4, "crs-setup.conf.example")}"', "",
        "[[rules]]", "inline = '''", pl2, "'''", "",
        "[[rules]]", f'file = "{os.path.join(tune_dir, "tune-before.conf")}"', "",
        "[[rules]]", f'file = "{os.path.join(CRS4, "rules", "*.conf")}"', "",
        "[[rules]]", f'file = "{os.path.join(tune_dir, "tune-after.conf")}"', "",
    ]
    path = os.path.join(work, "palisade.toml")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path, tune_dir


def with_client(req, ip):
    method, target, headers, body = req
    return method, target, list(headers) + [("X-Forwarded-For", ip)], body


def statuses(port, reqs, threads=4):
    raws = [corpus.to_bytes(r) for r in reqs]
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        return list(ex.map(lambda raw: send(port, raw), raws))


def benign_set(seed, n):
    r = random.Random(seed)
    return [with_client(i["request"], r.choice(CLIENTS)) for i in benign_corpus.benign(seed, n)]


def attack_set(seed, per_class):
    return [i for i in corpus.attacks(seed, per_class)]


def pct(a, b):
    return 100.0 * a / b if b else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--benign", type=int, default=3000, help="benign requests per set")
    ap.add_argument("--per-class", type=int, default=1, help="attack payloads per class, encoding and placement")
    ap.add_argument("--seeds", default="11,12,13,14", help="A,B,C,D: benign seen, attacks seen, benign fresh, attacks fresh")
    ap.add_argument("--palisade", default=os.path.join(REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(REPO, "target", "release", "albedo"))
    args = ap.parse_args()
    seed_a, seed_b, seed_c, seed_d = (int(s) for s in args.seeds.split(","))
    work = tempfile.mkdtemp(prefix="palisade-tune-bench-")
    try:
        backend, backend_port = start_albedo(args.albedo, work, None, who="tune")
        port = free_port()
        audit_log = os.path.join(work, "audit.log")
        cfg, tune_dir = config(work, port, backend_port, audit_log)
        proc = Proc("palisade", [args.palisade, "run", "--config", cfg], work)
        wait_port(port, proc, timeout=300)

        seen = benign_set(seed_a, args.benign)
        fresh = benign_set(seed_c, args.benign)
        attacks_seen = attack_set(seed_b, args.per_class)
        attacks_fresh = attack_set(seed_d, args.per_class)
        attacks_file = os.path.join(work, "attacks.jsonl")
        with open(attacks_file, "w") as f:
            for n, item in enumerate(attacks_seen):
                f.write(corpus.attack_line(item, n) + "\n")

        def relevant(st):
            return st >= 500 or (400 <= st < 500 and st != 404)

        def wait_lines(path, n, limit=60):
            deadline = time.time() + limit
            while time.time() < deadline:
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        if sum(1 for _ in f) >= n:
                            return
                time.sleep(0.2)
            raise SystemExit(f"the audit log {path} did not reach {n} lines")

        # The seen set first: its refusals alone make the audit log tune reads.
        before = {"seen": statuses(port, seen)}
        fp_lines = sum(1 for st in before["seen"] if relevant(st))
        wait_lines(audit_log, fp_lines)
        seen_log = os.path.join(work, "audit-seen.log")
        with open(audit_log, "rb") as src, open(seen_log, "wb") as dst:
            dst.write(src.read())
        before["fresh"] = statuses(port, fresh)
        before["attacks seen"] = statuses(port, [i["request"] for i in attacks_seen])
        before["attacks fresh"] = statuses(port, [i["request"] for i in attacks_fresh])
        t0 = time.time()
        out = subprocess.run([args.palisade, "tune", "--config", cfg, "--audit-log", seen_log,
                              "--attacks", attacks_file, "--write", "--json"],
                             capture_output=True, text=True, timeout=3600)
        tune_s = time.time() - t0
        if out.returncode != 0:
            raise SystemExit(f"palisade tune failed ({out.returncode}):\n{out.stderr}")
        report = json.loads(out.stdout)
        proven = [p for p in report["proposals"] if p["verdict"]["status"] == "proven"]
        dropped = [p for p in report["proposals"] if p["verdict"]["status"] != "proven"]
        with open(os.path.join(work, "tune-report.json"), "w") as f:
            f.write(out.stdout)
        text = subprocess.run([args.palisade, "tune", "--config", cfg, "--audit-log", seen_log,
                               "--attacks", attacks_file], capture_output=True, text=True, timeout=3600)
        with open(os.path.join(work, "tune-report.txt"), "w") as f:
            f.write(text.stdout + text.stderr)
        proc.p.send_signal(signal.SIGHUP)
        # The reload is in force once a false positive tune removed passes (bounded).
        fps = [seen[i] for i, st in enumerate(before["seen"]) if st != 200][:20]
        deadline = time.time() + 120
        while fps and time.time() < deadline:
            if any(s == 200 for s in statuses(port, fps)):
                break
            time.sleep(0.5)
        offset = os.path.getsize(audit_log)
        after = {"seen": statuses(port, seen)}
        left_lines = sum(1 for st in after["seen"] if relevant(st))
        with open(audit_log, "rb") as f:
            f.seek(offset)
            deadline = time.time() + 60
            data = f.read()
            while data.count(b"\n") < left_lines and time.time() < deadline:
                time.sleep(0.2)
                data += f.read()
        left = {}
        for line in data.splitlines():
            t = json.loads(line)["transaction"]
            for m in t.get("messages", []):
                d = m.get("details", {})
                rid = d.get("ruleId", "")
                if rid.startswith(("949", "959", "980")):
                    continue
                var = d.get("match", "").rpartition("against variable `")[2].partition("'")[0]
                left[(rid, var)] = left.get((rid, var), 0) + 1
        after["fresh"] = statuses(port, fresh)
        after["attacks seen"] = statuses(port, [i["request"] for i in attacks_seen])
        after["attacks fresh"] = statuses(port, [i["request"] for i in attacks_fresh])
        print(f"palisade tune on CRS v4 at paranoia level 2 ({len(seen)} benign requests seen, seed {seed_a}; "
              f"attack corpus {len(attacks_seen)}, seed {seed_b}); audit records: {fp_lines}")
        print(f"tune: {report['records']} record(s), {len(proven)} exclusion(s) proven, {len(dropped)} dropped, "
              f"{report['not_proposed_total']} candidate(s) not proposed, {tune_s:.1f} s")
        p = report["proof"]
        print(f"tune's own proof: recorded blocked {p['blocked_before']} -> {p['blocked_after']}; "
              f"attacks blocked {p['attacks_blocked_before']} -> {p['attacks_blocked_after']} "
              f"({len(p['attacks_passing_now'])} newly passing)")
        for name in ("seen", "fresh"):
            b = sum(1 for s in before[name] if s != 200)
            a = sum(1 for s in after[name] if s != 200)
            print(f"benign {name:5}: false positives {b} -> {a} of {len(before[name])} "
                  f"({pct(b - a, b):.1f}% removed)")
        for name in ("attacks seen", "attacks fresh"):
            b = [s == 403 for s in before[name]]
            a = [s == 403 for s in after[name]]
            newly = sum(1 for x, y in zip(b, a) if x and not y)
            print(f"{name:13}: blocked {sum(b)} -> {sum(a)} of {len(b)} ({newly} newly passing)")
        top = sorted(left.items(), key=lambda kv: -kv[1])[:12]
        print("matches left on the seen set's refusals (rule, variable: count): "
              + ", ".join(f"{r} {v}: {n}" for (r, v), n in top))
        print(f"work directory: {work} (tune-report.json, tune/)")
    finally:
        stop_all()


if __name__ == "__main__":
    main()
