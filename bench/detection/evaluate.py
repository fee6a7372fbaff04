#!/usr/bin/env python3
"""The detection evaluation: the attack and benign corpora of corpus.py sent through
palisade in front of albedo, in three configurations, one run:

  crs        examples/palisade-recommended.conf + CRS (v4, or Debian's 3.3.4) at PL1
  plugin     the same + the Palisade detection plugin (plugins/palisade-detection)
  precision  the same + the plugin's precision mode

An attack counts as blocked when it is answered 403 (other refusals are counted
apart: a WAF that answers 400 to an attack it cannot parse still let the request's
kind through its rules unseen). A benign request passes when answered 200.

It writes DETECTION.md (or --out): rates per class, placement and encoding, benign
pass rates per category, and the CPU cost of the plugin per benign GET and form (requests
per CPU-second of the proxy process, the three configurations in one run).

    python3 bench/detection/evaluate.py [--crs v4|3.3.4] [--per-class N] [--out FILE]
"""

import argparse
import collections
import concurrent.futures
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
sys.path.insert(0, HERE)
sys.path.insert(0, BENCH)

import corpus  # noqa: E402
from run import CRS3_ETC, CRS3_RULES, CRS4, Proc, cpu_seconds, free_port, start_albedo, stop_all, wait_port  # noqa: E402

PLUGIN = os.path.join(REPO, "plugins", "palisade-detection")
RECOMMENDED = os.path.join(REPO, "examples", "palisade-recommended.conf")
CONFIGS = ["crs", "plugin", "precision"]


def rule_files(config, crs):
    if crs == "v4":
        setup = [os.path.join(CRS4, "crs-setup.conf.example")]
        rules = [os.path.join(CRS4, "rules", "*.conf")]
    else:
        setup = [os.path.join(CRS3_ETC, "crs-setup.conf"),
                 os.path.join(CRS3_ETC, "REQUEST-900-EXCLUSION-RULES-BEFORE-CRS.conf")]
        rules = [os.path.join(CRS3_RULES, "*.conf"), os.path.join(CRS3_ETC, "RESPONSE-999-EXCLUSION-RULES-AFTER-CRS.conf")]
    files = [("file", RECOMMENDED)] + [("file", f) for f in setup]
    if config == "precision":
        files.append(("inline", 'SecAction "id:9550001,phase:1,pass,nolog,'
                                "setvar:'tx.palisade-detection-plugin_precision=1'\""))
    if config in ("plugin", "precision"):
        files += [("file", os.path.join(PLUGIN, "palisade-detection-config.conf")),
                  ("file", os.path.join(PLUGIN, "palisade-detection-before.conf"))]
    files += [("file", f) for f in rules]
    if config in ("plugin", "precision"):
        files.append(("file", os.path.join(PLUGIN, "palisade-detection-after.conf")))
    return files


def write_config(config, crs, work, port, backend_port, workers=2, cpu_budget_off=False):
    """Writes `config`'s palisade.toml into `work`; returns its path."""
    server = ["[server]", f"worker_threads = {workers}"] + (['waf_cpu_budget = "off"'] if cpu_budget_off else [])
    lines = server + ["", "[[listener]]", f'address = "127.0.0.1:{port}"', "",
             "[[upstream]]", 'name = "app"', f'servers = ["127.0.0.1:{backend_port}"]', "keepalive = 32", "",
             "[logs]", f'error_log = "{os.path.join(work, config + "-error.log")}"', 'level = "warn"', "",
             "[store]", f'path = "{os.path.join(work, "store-" + config)}"', ""]
    for kind, value in rule_files(config, crs):
        if kind == "file":
            lines += ["[[rules]]", f'file = "{value}"', ""]
        else:
            lines += ["[[rules]]", "inline = '''", value, "'''", ""]
    path = os.path.join(work, f"{config}.toml")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def start(config, crs, binary, work, backend_port):
    port = free_port()
    path = write_config(config, crs, work, port, backend_port)
    check = subprocess.run([binary, "check", "--config", path], capture_output=True, text=True, timeout=300)
    if check.returncode != 0:
        raise SystemExit(f"palisade check failed for {config}:\n{check.stderr}")
    proc = Proc(f"palisade-{config}", [binary, "run", "--config", path], work)
    wait_port(port, proc, timeout=300)
    return proc, port


def send(port, raw, timeout=30):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        buf = b""
        while b"\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    m = re.match(rb"HTTP/1\.[01] (\d{3})", buf)
    return int(m.group(1)) if m else 0


def run_all(port, items, threads=8):
    raws = [corpus.to_bytes(i["request"]) for i in items]
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        return list(ex.map(lambda raw: send(port, raw), raws))


WORDS = ("red blue green small large cotton wool leather summer winter classic modern garden kitchen office "
         "travel running hiking coffee tea book lamp chair table shirt jacket boots phone case cable charger "
         "gift kids women men sale new organic vegan premium").split()
CATEGORIES = "shoes bags books toys garden kitchen sports music games beauty tools".split()
NAMES = "Anne Bob Chloé Dmitri Eva Farid Grace Hiroshi Ines José Kofi Lena Marta Nils Olga Pedro".split()
SORTS = ["price", "-price", "rating", "-created_at", "name", "relevance"]


def user_agents(r, n=60):
    """`n` browser User-Agent strings of the usual shapes, versions from `r`: the
    clients of one site, which come back request after request."""
    out = []
    for _ in range(n):
        v = r.randint(100, 131)
        out.append(r.choice([
            f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Safari/537.36",
            f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_{r.randint(1, 7)}) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/{r.randint(15, 18)}.{r.randint(0, 6)} Safari/605.1.15",
            f"Mozilla/5.0 (X11; Linux x86_64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0",
            f"Mozilla/5.0 (iPhone; CPU iPhone OS {r.randint(15, 18)}_{r.randint(0, 6)} like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/{r.randint(15, 18)}.0 Mobile/15E148 Safari/604.1",
            f"Mozilla/5.0 (Linux; Android {r.randint(10, 15)}; Pixel {r.randint(4, 9)}) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Mobile Safari/537.36",
        ]))
    return out


def cost_traffic(seed, n):
    """`n` benign GETs and `n` benign form POSTs, varied from `seed` (search terms,
    categories, pages, names, comments, and the User-Agent of one of 60 clients),
    as raw keep-alive HTTP/1.1 requests."""
    r = random.Random(seed)
    q = urllib.parse.quote_plus
    agents = user_agents(r)
    gets, forms = [], []
    for _ in range(n):
        head = (f"Host: shop.example\r\nUser-Agent: {r.choice(agents)}\r\n"
                "Accept: text/html,application/xhtml+xml,*/*;q=0.8\r\nAccept-Language: en-US,en;q=0.9\r\n")
        terms = " ".join(r.choice(WORDS) for _ in range(r.randint(1, 4)))
        target = (f"/products?category={r.choice(CATEGORIES)}&q={q(terms)}&page={r.randint(1, 40)}"
                  f"&sort={q(r.choice(SORTS))}&size={r.choice([12, 24, 48])}")
        gets.append(f"GET {target} HTTP/1.1\r\n{head}Cookie: sid={r.getrandbits(64):016x}\r\n\r\n".encode())
        name = r.choice(NAMES)
        text = " ".join(r.choice(WORDS) for _ in range(r.randint(5, 30))).capitalize() + r.choice([".", "!", "?"])
        body = (f"name={q(name)}&email={q(name.lower() + '@example.com')}&rating={r.randint(1, 5)}"
                f"&product={r.randint(1, 99999)}&text={q(text)}").encode()
        forms.append(f"POST /comment HTTP/1.1\r\n{head}Content-Type: application/x-www-form-urlencoded\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return gets, forms


class KeepAlive:
    """One persistent HTTP/1.1 connection: sends a request, reads its whole answer."""

    def __init__(self, port):
        self.port = port
        self.sock = None
        self.buf = b""

    def status(self, raw):
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
            self.buf = b""
        self.sock.sendall(raw)
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._recv()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        status = int(head[9:12])
        fields = {k.strip().lower(): v.strip() for k, _, v in
                  (line.partition(b":") for line in head.split(b"\r\n")[1:])}
        if b"content-length" in fields:
            size = int(fields[b"content-length"])
            while len(self.buf) < size:
                self.buf += self._recv()
            self.buf = self.buf[size:]
        elif fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            while not self.buf.endswith(b"0\r\n\r\n"):
                self.buf += self._recv()
            self.buf = b""
        if fields.get(b"connection", b"").lower() == b"close":
            self.close()
        return status

    def _recv(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed mid-answer")
        return chunk

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def costs_interleaved(procs, traffic, rounds=10):
    """Requests per CPU-second of each proxy process for each kind of traffic. Only
    requests every configuration passes (200) count, so each does the same work
    (inspect, forward, answer); the configurations take turns in `rounds` batches,
    so that a change in the machine's load falls on all of them alike."""
    out = {config: {} for config in procs}
    for kind, requests in traffic.items():
        conns = {config: KeepAlive(port) for config, (_, port) in procs.items()}
        passing = [raw for raw in requests if all(c.status(raw) == 200 for c in conns.values())]
        used = dict.fromkeys(procs, 0.0)
        batch = max(1, len(passing) // rounds)
        for start in range(0, len(passing), batch):
            part = passing[start:start + batch]
            for config, (proc, _) in procs.items():
                before = cpu_seconds([proc.pid])
                for raw in part:
                    conns[config].status(raw)
                used[config] += cpu_seconds([proc.pid]) - before
        for config in procs:
            conns[config].close()
            out[config][kind] = (len(passing) / used[config] if used[config] > 0 else float("inf"), len(passing))
    return out


def explain(config, work, port, attacks, benign, results, limit):
    """Sends missed attacks and blocked benign requests again, one at a time, and
    prints the rules each one matched (from the error log)."""
    log = os.path.join(work, config + "-error.log")
    na = len(attacks)

    def rules_for(raw):
        size = os.path.getsize(log)
        send(port, raw)
        time.sleep(0.05)
        with open(log, "rb") as f:
            f.seek(size)
            new = f.read().decode("utf-8", "replace")
        ids = re.findall(r'\[id "(\d+)"\]', new)
        data = re.findall(r'\[data "([^"]{0,120})', new)
        return [i for i in ids if i not in ("949110", "980170", "980130")], data[:2]

    shown = 0
    for n, a in enumerate(attacks):
        if results[n] != 403 and shown < limit:
            ids, _ = rules_for(corpus.to_bytes(a["request"]))
            print(f"MISS {a['class']}/{a['encoding']}/{a['placement']} -> {results[n]} {ids}: {a['payload']!r}")
            shown += 1
    shown = 0
    for n, b in enumerate(benign):
        if results[na + n] != 200 and shown < limit:
            ids, data = rules_for(corpus.to_bytes(b["request"]))
            method, target = b["request"][0], b["request"][1]
            print(f"FP {b['category']} -> {results[na + n]} {ids} {method} {target[:60]} {data}")
            shown += 1


def pct(a, b):
    return f"{100.0 * a / b:.1f}%" if b else "-"


def table(title, key, items, results, label_ok):
    """Rows of `key` values: the share of items with an ok status, per config."""
    keys = sorted({i[key] for i in items})
    out = [f"### {title}", "", "| " + key + " | n | " + " | ".join(CONFIGS) + " |",
           "|---|---:|" + "---:|" * len(CONFIGS)]
    for k in keys:
        idx = [n for n, i in enumerate(items) if i[key] == k]
        cells = [pct(sum(1 for n in idx if label_ok(results[c][n])), len(idx)) for c in CONFIGS]
        out.append(f"| {k} | {len(idx)} | " + " | ".join(cells) + " |")
    idx = range(len(items))
    cells = [pct(sum(1 for n in idx if label_ok(results[c][n])), len(items)) for c in CONFIGS]
    out.append(f"| **all** | {len(items)} | " + " | ".join(f"**{x}**" for x in cells) + " |")
    return out + [""]


def cross(items, results, config, row, col, label_ok):
    rows = sorted({i[row] for i in items})
    cols = sorted({i[col] for i in items})
    out = [f"| {row} \\ {col} | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            idx = [n for n, i in enumerate(items) if i[row] == r and i[col] == c]
            cells.append(pct(sum(1 for n in idx if label_ok(results[config][n])), len(idx)))
        out.append(f"| {r} | " + " | ".join(cells) + " |")
    return out + [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--crs", choices=["v4", "3.3.4"], default="v4")
    ap.add_argument("--per-class", type=int, default=4, help="payloads per class, encoding and placement")
    ap.add_argument("--benign", type=int, default=6000, help="benign requests (about)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cost-requests", type=int, default=6000, help="GETs and form POSTs each for the CPU cost")
    ap.add_argument("--palisade", default=os.path.join(REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(REPO, "target", "release", "albedo"))
    ap.add_argument("--out", default=os.path.join(REPO, "DETECTION.md"))
    ap.add_argument("--misses", type=int, default=0,
                    help="print this many missed attacks and blocked benign requests (with the rules that matched)")
    ap.add_argument("--explain", choices=CONFIGS, default="plugin", help="the configuration --misses looks at")
    args = ap.parse_args()

    attacks = list(corpus.attacks(args.seed, args.per_class))
    benign = corpus.benign(args.seed + 1, args.benign)
    work = tempfile.mkdtemp(prefix="palisade-detection-")
    results = {}
    try:
        backend, backend_port = start_albedo(args.albedo, work, None, who="detection")
        procs = {config: start(config, args.crs, args.palisade, work, backend_port) for config in CONFIGS}
        for config, (proc, port) in procs.items():
            t0 = time.time()
            results[config] = run_all(port, attacks + benign)
            print(f"{config}: {len(attacks) + len(benign)} requests in {time.time() - t0:.1f} s", file=sys.stderr)
            if args.misses and config == args.explain:
                explain(config, work, port, attacks, benign, results[config], args.misses)
        gets, forms = cost_traffic(args.seed + 2, args.cost_requests)
        costs = costs_interleaved(procs, {"get": gets, "form": forms})
        for proc, _ in procs.values():
            proc.stop()
        backend.stop()
    finally:
        stop_all()

    na = len(attacks)
    att_res = {c: results[c][:na] for c in CONFIGS}
    ben_res = {c: results[c][na:] for c in CONFIGS}
    blocked = lambda s: s == 403  # noqa: E731
    passed = lambda s: s == 200  # noqa: E731
    lines = [
        "# Detection evaluation",
        "",
        "Made by `scripts/detection-eval` (`python3 bench/detection/evaluate.py "
        f"--crs {args.crs} --per-class {args.per_class} --benign {args.benign} --seed {args.seed}`): "
        f"{na} attacks ({len(corpus.CLASSES)} classes x {len(corpus.ENCODINGS)} encodings x "
        f"{len(corpus.PLACEMENTS)} placements, {args.per_class} payloads each) and {len(benign)} benign requests, "
        "generated by this project's own grammars (`bench/detection/corpus.py`), sent through palisade "
        f"(release build) in front of albedo with CRS {args.crs} at paranoia level 1, blocking, in three "
        "configurations in one run: `crs` (examples/palisade-recommended.conf + CRS), `plugin` (+ the detection "
        "plugin), `precision` (+ its precision mode). An attack is blocked when answered 403; a benign request "
        "passes when answered 200.",
        "",
        "## Summary",
        "",
        "| | " + " | ".join(CONFIGS) + " |",
        "|---|" + "---:|" * len(CONFIGS),
        "| attacks blocked | " + " | ".join(pct(sum(map(blocked, att_res[c])), na) for c in CONFIGS) + " |",
        "| attacks refused otherwise (400, 413, 415, 501) | " + " | ".join(
            pct(sum(1 for s in att_res[c] if s in (400, 413, 415, 501)), na) for c in CONFIGS) + " |",
        "| benign passed | " + " | ".join(pct(sum(map(passed, ben_res[c])), len(benign)) for c in CONFIGS) + " |",
        "| benign GET, requests per proxy CPU-second | " + " | ".join(f"{costs[c]['get'][0]:.0f}" for c in CONFIGS) + " |",
        "| benign form POST, requests per proxy CPU-second | " + " | ".join(f"{costs[c]['form'][0]:.0f}" for c in CONFIGS) + " |",
        "",
        "CPU cost against CRS alone (more CPU per request): "
        + "; ".join(f"{c}: GET {100 * (costs['crs']['get'][0] / costs[c]['get'][0] - 1):+.1f}%, "
                    f"form {100 * (costs['crs']['form'][0] / costs[c]['form'][0] - 1):+.1f}%" for c in CONFIGS[1:])
        + f". One run: {costs['crs']['get'][1]} varied GETs and {costs['crs']['form'][1]} varied form POSTs that every "
        "configuration passes, on keep-alive connections, the configurations taking turns in ten batches.",
        "",
        "## Attacks",
        "",
    ]
    lines += table("By class", "class", attacks, att_res, blocked)
    lines += table("By placement", "placement", attacks, att_res, blocked)
    lines += table("By encoding", "encoding", attacks, att_res, blocked)
    lines += ["### Class by placement, `plugin`", ""] + cross(attacks, att_res, "plugin", "class", "placement", blocked)
    lines += ["### Class by encoding, `plugin`", ""] + cross(attacks, att_res, "plugin", "class", "encoding", blocked)
    lines += ["## Benign requests", ""]
    lines += table("Passed, by category", "category", benign, ben_res, passed)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[8:16]))


if __name__ == "__main__":
    main()
