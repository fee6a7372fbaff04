#!/usr/bin/env python3
"""Memory of 20 sites sharing CRS against one site (issue 32, item 2: "20 sites must
not cost 20 copies of CRS"; target: 20 sites at most 1.2x the resident memory of
one).

    python3 bench/sites.py [--sites 1,20] [--requests 200] [--palisade PATH]
                           [--albedo PATH] [--workers 1] [--runs 1]

For each count N of `--sites`, starts the release `palisade` with CRS v4 (as
configuration (d) of bench/run.py: bench/rules/base.conf, CRS v4's
crs-setup.conf.example and rules/*.conf, one worker thread) and N `[[site]]`s, each
with its own host (`siteK.example`), paranoia level 1 or 2 in turn, and a few
exclusion rules (a SecRuleRemoveById, a SecRuleUpdateTargetById, a runtime
ctl:ruleRemoveById for one path), in front of albedo; then:

  1. waits until the proxy is idle after loading and reads /proc/PID/status
     ("after start": VmRSS and its anonymous part);
  2. sends `--requests` requests to every site (keep-alive, one connection per
     site): benign GETs and form POSTs, and an attack every tenth, checks that each
     benign one is answered 200 and each attack 403;
  3. waits until the proxy is idle again and reads VmRSS ("after load"), the figure
     compared.

Prints a table and the ratio N-sites / 1-site of both figures. Exits 1 when the
ratio after load is above 1.2 or a request got an unexpected answer. Every process
started is stopped at the end, also on error or Ctrl-C.
"""

import argparse
import os
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (processes, ports, the benchmark's CRS configuration)

TARGET = 1.2


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def wait_idle(pid, limit=120.0):
    """Waits until the process used no CPU for half a second."""
    deadline = time.time() + limit
    last = cpu_ticks(pid)
    while time.time() < deadline:
        time.sleep(0.5)
        now = cpu_ticks(pid)
        if now == last:
            return
        last = now


def site_rules(k):
    """A few exclusions of the kind a site has."""
    return "\n".join([
        "SecRuleRemoveById 920350",
        f'SecRuleUpdateTargetById 942100 "!ARGS:comment{k}"',
        f'SecRuleUpdateTargetByTag attack-xss "!ARGS:html{k}"',
        f'SecRule REQUEST_FILENAME "@beginsWith /import{k}/" '
        f'"id:{30000 + k},phase:1,pass,nolog,ctl:ruleRemoveById=942430"',
    ])


def write_config(work, port, backend_port, n):
    path = R.write_palisade_config("d", work, port, backend_port)
    with open(path) as f:
        text = f.read()
    lines = [text, ""]
    for k in range(n):
        lines += [
            "[[site]]",
            f'name = "site{k}"',
            f'hosts = ["site{k}.example"]',
            f"paranoia_level = {1 + k % 2}",
            "[[site.rules]]",
            "inline = '''",
            site_rules(k),
            "'''",
            "",
        ]
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def requests_for(k, count):
    host = f"site{k}.example"
    ua = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
    common = (f"Host: {host}\r\nUser-Agent: {ua}\r\nAccept: text/html,*/*;q=0.8\r\n"
              "Accept-Language: en-GB,en;q=0.5\r\n")
    out = []
    for i in range(count):
        if i % 10 == 9:
            out.append((403, (f"GET /item?id=1'%20OR%20'1'='1&n={i} HTTP/1.1\r\n"
                              f"{common}\r\n").encode()))
        elif i % 2:
            body = f"name=Alice+{i}&comment{k}=hello+there&page={i}"
            out.append((200, (f"POST /contact/{i} HTTP/1.1\r\n{common}"
                              "Content-Type: application/x-www-form-urlencoded\r\n"
                              f"Content-Length: {len(body)}\r\n\r\n{body}").encode()))
        else:
            out.append((200, (f"GET /products/{i}?category=books&page={i % 7} HTTP/1.1\r\n"
                              f"{common}\r\n").encode()))
    return out


def read_response(sock, buf):
    """Reads one response (Content-Length framed, as albedo and the proxy answer);
    returns its status and the bytes after it."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed before a response")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for h in lines[1:]:
        name, _, value = h.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed inside a body")
        rest += chunk
    return status, rest[length:], b"connection: close" in head.lower()


def load(port, n, count):
    bad = []
    for k in range(n):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        buf = b""
        for want, raw in requests_for(k, count):
            sock.sendall(raw)
            got, buf, close = read_response(sock, buf)
            if got != want:
                bad.append((k, want, got, raw.split(b"\r\n", 1)[0].decode()))
            if close:
                sock.close()
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                buf = b""
        sock.close()
    return bad


def measure(args, work, backend_port, n):
    port = R.free_port()
    cfg = write_config(work, port, backend_port, n)
    check = R.subprocess.run([args.palisade, "check", "--config", cfg],
                             capture_output=True, text=True, timeout=600)
    if check.returncode != 0:
        raise SystemExit(f"sites: palisade check failed for {n} site(s):\n"
                         f"{check.stderr or check.stdout}")
    t0 = time.time()
    proc = R.Proc(f"palisade-{n}-sites", [args.palisade, "run", "--config", cfg], work)
    try:
        R.wait_port(port, proc, timeout=600)
        started = time.time() - t0
        wait_idle(proc.pid)
        after_start = status(proc.pid)
        bad = load(port, n, args.requests)
        wait_idle(proc.pid)
        time.sleep(2)
        after_load = status(proc.pid)
    finally:
        proc.stop()
    return {"n": n, "start_s": started, "start": after_start, "load": after_load,
            "bad": bad}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sites", default="1,20")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--palisade", default=os.path.join(R.REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(R.REPO, "target", "release", "albedo"))
    args = ap.parse_args()
    for b in (args.palisade, args.albedo):
        if not os.path.exists(b):
            raise SystemExit(f"sites: {b} is missing: cargo build --release -p proxy -p albedo")
    if not os.path.isdir(R.CRS4):
        raise SystemExit(f"sites: CRS v4 is missing at {R.CRS4}")
    counts = [int(x) for x in args.sites.split(",")]
    work = tempfile.mkdtemp(prefix="palisade-sites-")
    results = []
    try:
        backend, backend_port = R.start_albedo(args.albedo, work, None, who="sites")
        for _ in range(args.runs):
            for n in counts:
                r = measure(args, work, backend_port, n)
                results.append(r)
                print(f"sites: {n:>3} site(s): ready in {r['start_s']:.1f} s, "
                      f"VmRSS {r['start']['VmRSS'] / 1024:.1f} MiB after start, "
                      f"{r['load']['VmRSS'] / 1024:.1f} MiB after "
                      f"{args.requests} requests per site "
                      f"(anonymous {r['load']['RssAnon'] / 1024:.1f} MiB, "
                      f"peak {r['load']['VmHWM'] / 1024:.1f} MiB)", flush=True)
        backend.stop()
    finally:
        R.stop_all()
        shutil.rmtree(work, ignore_errors=True)
    failed = False
    for r in results:
        if r["bad"]:
            failed = True
            for k, want, got, line in r["bad"][:10]:
                print(f"sites: {r['n']} site(s): site{k} {line!r}: {got}, expected {want}")
    by_n = {}
    for r in results:
        by_n.setdefault(r["n"], []).append(r)
    base = min(counts)
    for n in counts:
        if n == base:
            continue
        pick = lambda rs, key: sorted(x[key]["VmRSS"] for x in rs)[len(rs) // 2]  # noqa: E731
        for key, label in (("start", "after start"), ("load", "after load")):
            a, b = pick(by_n[base], key), pick(by_n[n], key)
            ratio = b / a
            print(f"sites: {label}: {n} sites / {base} site = {b / 1024:.1f} / "
                  f"{a / 1024:.1f} MiB = {ratio:.3f}x (target <= {TARGET}x)")
            if key == "load" and ratio > TARGET:
                failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
