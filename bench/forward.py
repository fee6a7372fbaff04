#!/usr/bin/env python3
"""Palisade's forward mode against Debian's Squid and e2guardian, side by side in one
run (issue 35).

    python3 bench/forward.py [--rounds 3] [--duration 5] [--domains 1600000] [--smoke]
        [--out-md FILE]

Both proxies run on loopback, pinned to the same CPU, with the client and the origin
(bench/forward/: a Go program, built here) on the other one. Neither caches. For
each proxy, in rounds that alternate between them:

  http        absolute-form GETs of a small page from a local HTTP origin (albedo)
              on kept client connections: requests per CPU-second of the proxy
  connect     a new CONNECT tunnel and a TLS handshake with a local TLS origin for
              every request: tunnel setups per CPU-second of the proxy
  throughput  one tunnel carrying a large TLS response: MiB/s, and the proxy's CPU
              seconds per GiB

Then TLS inspection's handshake: Palisade with `inspect_all` (leaves minted from a CA
made here with openssl, cached after the first) against Palisade terminating TLS as
a reverse proxy (a `tls` listener with a certificate from the same CA, albedo behind
it): a new connection, TLS handshake and GET per request in both, the client
trusting that CA; the figure is the CPU per setup of each, and their ratio (target:
the intercepted handshake at most 1.3x the plain termination). The inspected
requests go on to the TLS origin over the pool's kept connections.

Then memory: each proxy loads a list of `--domains` generated domains (a fixed
seed; the same names for all three: Squid's `dstdomain` ACL from a file,
e2guardian's banned site list (its filter group's `sitelist` named `banned`, in
place of Debian's `bannedsitelist`), Palisade's `[forward] deny`), and the run
reports the time until it answers and its resident memory, against the same proxy
without the list; one request for a subdomain of a listed name must be refused by
each (a 403; e2guardian's refusal is its block page naming the listed site, sent
with status 200).

e2guardian (standalone, no upstream proxy, its Debian configuration: content
filtering with its phrase lists, no TLS interception; its transparent HTTPS listener
off) runs the same three modes.
Palisade runs with its forward policy and no rule set (as a filter, like Squid);
the CPU figures are of the proxy processes only (Squid's kids included).
Targets: http and connect at least 2x Squid's per CPU-second, throughput within 10%
of Squid's, the list loaded in at most 2 s in at most 150 MiB.
"""

import argparse
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (processes, ports, CPU time)

HERE = os.path.dirname(os.path.abspath(__file__))


def build_loadgen(work):
    go = shutil.which("go") or "/usr/local/go/bin/go"
    out = os.path.join(work, "loadgen")
    subprocess.run([go, "build", "-o", out, "."], cwd=os.path.join(HERE, "forward"),
                   check=True, timeout=900)
    return out


def loadgen(binary, *argv, timeout=600):
    """Runs the client on the load CPU; returns its JSON line."""
    import json
    r = subprocess.run(["taskset", "-c", R.LOAD_CPU, binary, *argv], capture_output=True,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"loadgen {' '.join(argv)}: {r.stderr.strip()}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def start_origin(binary, work):
    proc = R.Proc("tls-origin", [binary, "origin", "-listen", "127.0.0.1:0", "-dir", work],
                  work, cpu=R.LOAD_CPU)
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(proc.out_path) as f:
            m = re.search(r"listening (\d+)", f.read())
        if m:
            return int(m.group(1))
        time.sleep(0.05)
    raise RuntimeError(f"forward: the TLS origin did not start:\n{proc.tail()}")


def domains(n, seed):
    """`n` distinct generated domains, none under another (Squid refuses nesting
    in one dstdomain list): two-label names, and three-label names whose parents
    come from another alphabet, so no entry is a parent of another."""
    rnd = random.Random(seed)
    tlds = ["com", "net", "org", "io", "de", "fr", "uk", "edu", "info", "biz"]
    low, high = "abcdefghijklm", "nopqrstuvwxyz0123456789"
    seen = set()
    out = []
    while len(out) < n:
        if rnd.random() < 0.6:
            name = "".join(rnd.choice(low) for _ in range(rnd.randint(6, 14)))
            d = f"{name}.{rnd.choice(tlds)}"
        else:
            parent = "".join(rnd.choice(high) for _ in range(rnd.randint(5, 10)))
            sub = "".join(rnd.choice(low + high) for _ in range(rnd.randint(3, 10)))
            d = f"{sub}.{parent}.{rnd.choice(tlds)}"
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def squid_config(work, name, port, blocklist=None):
    conf = os.path.join(work, f"squid-{name}.conf")
    lines = [
        f"http_port 127.0.0.1:{port}",
        f"pid_filename {work}/squid-{name}.pid",
        "cache deny all",
        "cache_mem 8 MB",
        "access_log none",
        f"cache_log {work}/squid-{name}.log",
        f"coredump_dir {work}",
        "pinger_enable off",
        "shutdown_lifetime 1 seconds",
        "workers 1",
    ]
    if blocklist:
        lines += [f'acl blocked dstdomain "{blocklist}"', "http_access deny blocked"]
    lines += ["http_access allow localhost", "http_access deny all"]
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    return conf


def start_squid(work, name, blocklist=None):
    port = R.free_port()
    conf = squid_config(work, name, port, blocklist)
    t0 = time.time()
    proc = R.Proc(f"squid-{name}", ["squid", "-f", conf, "-N"], work, cpu=R.SUT_CPU)
    R.wait_port(port, proc, timeout=600)
    return proc, port, time.time() - t0


def start_e2guardian(work, name="plain", blocklist=None):
    """e2guardian as a standalone filtering proxy on loopback, with Debian's
    configuration and lists, not in the background (`-N`), without its logger. Its
    files go in a directory of their own under `work`, open to its own user. With
    `blocklist` (one domain a line, as its `bannedsitelist`), that file replaces
    Debian's banned site list in the filter group's configuration. Returns the
    process, its port and the time until it accepted a connection."""
    d = os.path.join(work, f"e2guardian-{name}")
    os.mkdir(d)
    os.chmod(work, 0o711)
    os.chmod(d, 0o777)  # it drops to its own user
    port = R.free_port()
    with open("/etc/e2guardian/e2guardian.conf") as f:
        conf = f.read()
    for key, value in (("filterip", "127.0.0.1"), ("filterports", str(port)),
                       ("nodaemon", "on"), ("nologger", "on"), ("httpworkers", "64"),
                       ("pidfilename", f"'{d}/e2guardian.pid'")):
        conf, n = re.subn(rf"^#?{key} =.*$", f"{key} = {value}", conf, count=1, flags=re.M)
        if n == 0:
            conf += f"\n{key} = {value}\n"
    # No transparent HTTPS listener: Debian's enables one on 8443 on every address,
    # which a second run at the same time (or anything else on 8443) would collide
    # with; the clients here name the proxy.
    conf = re.sub(r"^transparenthttpsport =", "#transparenthttpsport =", conf, flags=re.M)
    # The filter group's file is found beside the main one, by its name.
    with open(os.path.join(d, "e2guardian.conf"), "w") as f:
        f.write(conf)
    with open("/etc/e2guardian/e2guardianf1.conf") as f:
        group = f.read()
    if blocklist:
        listed = os.path.join(d, "bannedsitelist")
        shutil.copy(blocklist, listed)
        os.chmod(listed, 0o644)
        group, n = re.subn(r"^sitelist = 'name=banned,(.*)path=[^']*'$",
                           lambda m: f"sitelist = 'name=banned,{m.group(1)}path={listed}'",
                           group, count=1, flags=re.M)
        if n != 1:
            raise RuntimeError("forward: no banned sitelist in e2guardianf1.conf")
    with open(os.path.join(d, "e2guardianf1.conf"), "w") as f:
        f.write(group)
    t0 = time.time()
    proc = R.Proc(f"e2guardian-{name}",
                  ["e2guardian", "-N", "-c", os.path.join(d, "e2guardian.conf")], d,
                  cpu=R.SUT_CPU)
    R.wait_port(port, proc, timeout=600)
    return proc, port, time.time() - t0


def palisade_config(work, name, port, origin_port, blocklist=None):
    path = os.path.join(work, f"palisade-{name}.toml")
    deny = f"deny = [{R.toml_str(blocklist)}]\n" if blocklist else ""
    with open(path, "w") as f:
        f.write(f"""[server]
worker_threads = 1

[[listener]]
address = "127.0.0.1:{port}"
mode = "forward"

[forward]
connect_ports = [{origin_port}]
{deny}
[logs]
error_log = {R.toml_str(os.path.join(work, f"palisade-{name}-error.log"))}
level = "warn"
""")
    return path


def start_palisade(args, work, name, origin_port, blocklist=None):
    port = R.free_port()
    conf = palisade_config(work, name, port, origin_port, blocklist)
    t0 = time.time()
    proc = R.Proc(f"palisade-{name}", [args.palisade, "run", "--config", conf], work,
                  cpu=R.SUT_CPU)
    R.wait_port(port, proc, timeout=600)
    return proc, port, time.time() - t0


def openssl_ca(work):
    """A CA (P-256, PKCS#8 key) and a `localhost` leaf it signed, made with openssl:
    (ca_cert, ca_key, leaf_cert, leaf_key)."""
    def run(*argv):
        subprocess.run(["openssl", *argv], check=True, capture_output=True, timeout=60)
    ca_key, ca, key, csr, leaf = (os.path.join(work, n) for n in (
        "inspect-ca.key", "inspect-ca.pem", "tls.key", "tls.csr", "tls.pem"))
    ext = os.path.join(work, "leaf.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n")
    run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", ca_key)
    run("req", "-x509", "-new", "-key", ca_key, "-subj", "/CN=palisade bench inspection CA",
        "-days", "2", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", ca)
    run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key)
    run("req", "-new", "-key", key, "-subj", "/CN=localhost", "-out", csr)
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-days", "2", "-extfile", ext, "-out", leaf)
    return ca, ca_key, leaf, key


def start_config(args, work, name, text):
    port = R.free_port()
    path = os.path.join(work, f"palisade-{name}.toml")
    with open(path, "w") as f:
        f.write(text.replace("PORT", str(port)))
    proc = R.Proc(f"palisade-{name}", [args.palisade, "run", "--config", path], work,
                  cpu=R.SUT_CPU)
    R.wait_port(port, proc, timeout=600)
    return proc, port


def inspection_cost(args, work, lg, origin_port, http_port):
    """CPU per setup: an inspected tunnel against a plain TLS termination."""
    ca, ca_key, leaf, key = openssl_ca(work)
    logs = f'[logs]\nlevel = "warn"\nerror_log = {R.toml_str(os.path.join(work, "tls-error.log"))}\n'
    inspect, iport = start_config(args, work, "inspect", f"""[server]
worker_threads = 1

[[listener]]
address = "127.0.0.1:PORT"
mode = "forward"

[forward]
connect_ports = [{origin_port}]
inspect_ca_cert = {R.toml_str(ca)}
inspect_ca_key = {R.toml_str(ca_key)}
inspect_all = true
upstream_ca_file = {R.toml_str(os.path.join(work, "ca.pem"))}

{logs}""")
    term, tport = start_config(args, work, "tls", f"""[server]
worker_threads = 1

[[listener]]
address = "127.0.0.1:PORT"
tls = {{ cert = {R.toml_str(leaf)}, key = {R.toml_str(key)} }}

[[upstream]]
name = "backend"
servers = ["127.0.0.1:{http_port}"]

{logs}""")
    runs = {
        "inspected tunnel": (inspect, ["connect", "-proxy", f"http://127.0.0.1:{iport}",
                                       "-origin", f"localhost:{origin_port}", "-ca", ca]),
        "TLS termination": (term, ["tls", "-target", f"https://localhost:{tport}/", "-ca", ca]),
    }
    for p, argv in runs.values():  # warm-up (the leaf is minted and cached here)
        r = loadgen(lg, *argv, "-duration", "1s", "-conns", "2")
        if r["errors"]:
            raise RuntimeError(f"forward: {argv[0]} warm-up: {r['first_error']}")
    tot = {n: [0, 0.0] for n in runs}
    for _ in range(args.rounds):
        for n, (p, argv) in runs.items():
            pids = tree_pids(p)
            c0 = R.cpu_seconds(pids)
            r = loadgen(lg, *argv, "-duration", f"{args.duration}s", "-conns", str(args.conns))
            tot[n][0] += r["setups"]
            tot[n][1] += R.cpu_seconds(pids) - c0
    inspect.stop()
    term.stop()
    lines = ["| Palisade | setups (new connection, TLS handshake, GET) | CPU s | "
             "setups per CPU-second | CPU per setup, us |", "|---|---:|---:|---:|---:|"]
    per = {}
    for n, (k, cpu) in tot.items():
        per[n] = cpu / k * 1e6 if k else float("inf")
        lines.append(f"| {n} | {k:,} | {cpu:.2f} | {k / cpu if cpu else 0:,.0f} | {per[n]:,.0f} |")
    ratio = per["inspected tunnel"] / per["TLS termination"]
    lines += ["", f"forward: an intercepted handshake (leaf cached) costs {ratio:.2f}x a plain "
              f"TLS termination (target at most 1.3x)"]
    return lines


def tree_pids(proc):
    return [proc.pid] + R.children(proc.pid)


def rss_mib(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def refused(port, host, listed, proxy):
    """Whether the proxy refuses an absolute-form GET of `host` (a subdomain of the
    listed `listed`): a 403, not a 200 or a gateway error from trying to reach it.
    e2guardian answers 200 with its block page, which names the listed site."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                  .encode())
        data = b""
        while len(data) < 1 << 20:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    m = re.match(rb"HTTP/1\.[01] (\d+)", data)
    if m is None:
        return False
    if proxy == "e2guardian":
        return m.group(1) == b"200" and f"Blocked site: {listed}<".encode() in data
    return m.group(1) == b"403"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--palisade", default=os.path.join(R.REPO, "target", "release", "palisade"))
    ap.add_argument("--albedo", default=os.path.join(R.REPO, "target", "release", "albedo"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--bytes", type=int, default=1 << 30, help="throughput: bytes per run")
    ap.add_argument("--domains", type=int, default=1_600_000)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--smoke", action="store_true", help="1 round of 2 s, 64 MiB, 100,000 domains")
    ap.add_argument("--out-md", default=None)
    ap.add_argument("--inspection-only", action="store_true",
                    help="only TLS inspection's handshake against the plain termination")
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.duration, args.bytes = 1, 2, 64 << 20
        args.domains = min(args.domains, 100_000)
    for tool in ("squid", "e2guardian"):
        if shutil.which(tool) is None:
            raise SystemExit(f"forward: {tool} is missing (apt-get install {tool})")
    work = tempfile.mkdtemp(prefix="palisade-forward-")
    lines = []
    try:
        lg = build_loadgen(work)
        _, http_port = R.start_albedo(args.albedo, work, R.LOAD_CPU, who="forward")
        origin_port = start_origin(lg, work)
        ca = os.path.join(work, "ca.pem")
        if args.inspection_only:
            print("\n".join(inspection_cost(args, work, lg, origin_port, http_port)))
            return
        proxies = {}
        sq, sq_port, _ = start_squid(work, "plain")
        proxies["squid"] = (sq, sq_port)
        proxies["e2guardian"] = start_e2guardian(work)[:2]
        pa, pa_port, _ = start_palisade(args, work, "plain", origin_port)
        proxies["palisade"] = (pa, pa_port)
        target = f"http://127.0.0.1:{http_port}/"
        origin = f"localhost:{origin_port}"
        tot = {n: {"http": [0, 0.0], "connect": [0, 0.0], "throughput": [0, 0.0, 0.0]}
               for n in proxies}
        for n, (p, port) in proxies.items():  # warm-up, and a check that both work
            for mode, extra in (("http", ["-target", target]),
                                ("connect", ["-origin", origin, "-ca", ca])):
                r = loadgen(lg, mode, "-proxy", f"http://127.0.0.1:{port}", *extra,
                            "-duration", "1s", "-conns", "2")
                if r["errors"]:
                    raise RuntimeError(f"forward: {n} {mode}: {r['first_error']}")
        for _ in range(args.rounds):
            for n, (p, port) in proxies.items():
                pids = tree_pids(p)
                proxy = f"http://127.0.0.1:{port}"
                for mode, extra, key in (
                        ("http", ["-target", target], "requests"),
                        ("connect", ["-origin", origin, "-ca", ca], "setups")):
                    c0 = R.cpu_seconds(pids)
                    r = loadgen(lg, mode, "-proxy", proxy, *extra,
                                "-duration", f"{args.duration}s", "-conns", str(args.conns))
                    tot[n][mode][0] += r[key]
                    tot[n][mode][1] += R.cpu_seconds(pids) - c0
                    if r["errors"]:
                        R.log(f"forward: {n} {mode}: {r['errors']} errors ({r['first_error']})")
                c0 = R.cpu_seconds(pids)
                r = loadgen(lg, "throughput", "-proxy", proxy, "-origin", origin, "-ca", ca,
                            "-bytes", str(args.bytes))
                tot[n]["throughput"][0] += r["bytes"]
                tot[n]["throughput"][1] += r["seconds"]
                tot[n]["throughput"][2] += R.cpu_seconds(pids) - c0
        rates = {}
        lines += [f"| proxy ({args.rounds} rounds x {args.duration} s, {args.conns} clients) | "
                  "HTTP requests per CPU-second | CONNECT setups per CPU-second | "
                  "tunnel MiB/s | proxy CPU s per GiB |", "|---|---:|---:|---:|---:|"]
        for n, t in tot.items():
            h = t["http"][0] / t["http"][1] if t["http"][1] else 0.0
            c = t["connect"][0] / t["connect"][1] if t["connect"][1] else 0.0
            mib = t["throughput"][0] / (1 << 20) / t["throughput"][1]
            per_gib = t["throughput"][2] / (t["throughput"][0] / (1 << 30))
            rates[n] = (h, c, mib)
            lines.append(f"| {n} | {h:,.0f} | {c:,.0f} | {mib:,.0f} | {per_gib:.2f} |")
        p, s, e = rates["palisade"], rates["squid"], rates["e2guardian"]
        lines += ["", f"forward: HTTP {p[0] / s[0]:.2f}x Squid's per CPU-second, CONNECT setups "
                  f"{p[1] / s[1]:.2f}x (target 2x); tunnel throughput {p[2] / s[2] * 100:.0f}% "
                  "of Squid's (target at least 90%)",
                  f"forward: against e2guardian, HTTP {p[0] / e[0]:.2f}x, CONNECT setups "
                  f"{p[1] / e[1]:.2f}x per CPU-second, tunnel throughput {p[2] / e[2] * 100:.0f}%"]
        for p_, _ in proxies.values():
            p_.stop()
        lines += [""] + inspection_cost(args, work, lg, origin_port, http_port)

        # Memory and load time with the domain list.
        names = domains(args.domains, args.seed)
        plain_list = os.path.join(work, "domains.txt")
        squid_list = os.path.join(work, "domains-squid.txt")
        with open(plain_list, "w") as f:
            f.write("\n".join(names) + "\n")
        with open(squid_list, "w") as f:
            f.write("\n".join("." + d for d in names) + "\n")
        listed = names[len(names) // 2]
        probe = "www." + listed
        mem = []
        lists = {"squid": squid_list, "e2guardian": plain_list, "palisade": plain_list}
        for n, start in (("squid", lambda b: start_squid(work, "list" if b else "empty", b)),
                         ("e2guardian", lambda b: start_e2guardian(work, "list" if b else "empty",
                                                                   b)),
                         ("palisade", lambda b: start_palisade(args, work, "list" if b else "empty",
                                                              origin_port, b))):
            p0, port0, t_empty = start(None)
            time.sleep(1)
            base = rss_mib(tree_pids(p0))
            p0.stop()
            p1, port1, t_list = start(lists[n])
            time.sleep(1)
            with_list = rss_mib(tree_pids(p1))
            blocked = refused(port1, probe, listed, n)
            p1.stop()
            mem.append((n, t_empty, t_list, base, with_list, blocked))
        lines += ["", f"| proxy, {args.domains:,} domains | start without the list, s | "
                  "start with it, s | RSS without, MiB | RSS with, MiB | the list costs, MiB | "
                  "a listed name refused |", "|---|---:|---:|---:|---:|---:|---|"]
        for n, t0, t1, b, w, blocked in mem:
            lines.append(f"| {n} | {t0:.2f} | {t1:.2f} | {b:.1f} | {w:.1f} | {w - b:.1f} | "
                         f"{'yes' if blocked else 'NO'} |")
        if not all(m[5] for m in mem):
            raise RuntimeError("forward: a listed name was not refused:\n" + "\n".join(lines))
    finally:
        R.stop_all()
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(lines))
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write("## Forward proxy against Squid (issue 35)\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
