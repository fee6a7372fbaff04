#!/usr/bin/env python3
"""TLS handshakes per server CPU-second: palisade's listener (rustls) against nginx
(OpenSSL), on the same certificates, one worker each, pinned to CPU 0.

Certificates: ECDSA P-256 and RSA-2048, self-signed, made with `openssl req` in the
work directory. Modes:
  full TLS 1.3   a new handshake per connection (openssl s_time -new -tls1_3)
  full TLS 1.2   the same on TLS 1.2 (ECDHE key exchange)
  resumed TLS 1.2  the client resumes one session over and over (s_time -reuse
                 -tls1_2): a session ID or ticket, whichever the server gives
  resumed TLS 1.3  the same with a ticket, from a small Python client (RESUME13)
The client is `openssl s_time` (C, cheap): `--clients` copies of it in parallel on
CPU 1, each bounded by `--duration` seconds; it sends no request (handshake, then
close). Every handshake counts; for the resumed mode the share the server really
resumed is read from s_time's per-connection marks ('r' = reused) and reported.

Server CPU is utime + stime of the server's processes from /proc (palisade: the
process; nginx: master and worker), read before and after each run. Runs of the two
servers are interleaved (palisade, nginx, palisade, nginx, ...) so that they see the
same machine, and the medians are reported with the ratio palisade / nginx.

Both servers resume by ticket or session cache as configured here: nginx with
`ssl_session_cache shared:SSL:10m` and tickets on (its default); palisade with its
own settings (see docs/config.md, listener `tls`).

Usage: python3 bench/tls.py [--duration S] [--rounds N] [--clients N] [--out FILE]
Needs target/release/palisade, nginx, openssl, taskset.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (bench/run.py: processes, ports, CPU)

SERVER_CPU = "0"
CLIENT_CPU = "1"

CERTS = {
    "ECDSA P-256": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
    "RSA-2048": ["-newkey", "rsa:2048"],
}
MODES = [
    ("full", "1.3", ["-new", "-tls1_3"]),
    ("full", "1.2", ["-new", "-tls1_2"]),
    ("resumed", "1.2", ["-reuse", "-tls1_2"]),
    # s_time cannot resume TLS 1.3 (it never reads the ticket): RESUME13 does.
    ("resumed", "1.3", None),
]

# The TLS 1.3 resumption client: one full handshake, its ticket read, then new
# connections resuming that session until the time is up; prints "handshakes resumed".
# Python's ssl module is OpenSSL underneath; it costs more per connection than s_time,
# which bounds the rate, not the server's CPU per handshake.
RESUME13 = r"""
import select, socket, ssl, sys, time
port, duration = int(sys.argv[1]), float(sys.argv[2])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
def connect(session=None):
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), session=session)
t = connect()
t.setblocking(False)
deadline = time.time() + 5
while not (t.session and t.session.has_ticket) and time.time() < deadline:
    select.select([t], [], [], 0.05)
    try:
        t.recv(1)
    except ssl.SSLWantReadError:
        pass
session = t.session
t.close()
if not session.has_ticket:
    sys.exit("no TLS 1.3 ticket from the server")
n = reused = 0
end = time.time() + duration
while time.time() < end:
    t = connect(session)
    n += 1
    reused += t.session_reused
    t.close()
print(n, reused)
"""

NGINX_CONF = """
worker_processes 1;
daemon off;
master_process on;
pid {work}/nginx-tls-{name}.pid;
error_log {work}/nginx-tls-{name}-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {work}/nginx-tls-{name}-body;
    proxy_temp_path {work}/nginx-tls-{name}-proxy;
    fastcgi_temp_path {work}/nginx-tls-{name}-fastcgi;
    uwsgi_temp_path {work}/nginx-tls-{name}-uwsgi;
    scgi_temp_path {work}/nginx-tls-{name}-scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:SSL:10m;
        ssl_session_tickets on;
        location / {{ return 200 "ok\\n"; }}
    }}
}}
"""


def make_cert(work, name, args):
    slug = name.split()[0].lower().replace("-", "")
    cert = os.path.join(work, f"{slug}.crt")
    key = os.path.join(work, f"{slug}.key")
    subprocess.run(["openssl", "req", "-x509", *args, "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return slug, cert, key


def start_palisade(args, work, slug, cert, key):
    port = R.free_port()
    cfg = os.path.join(work, f"palisade-tls-{slug}.toml")
    with open(cfg, "w") as f:
        f.write("\n".join([
            "[server]",
            "worker_threads = 1",
            "",
            "[[listener]]",
            f"address = {R.toml_str(f'127.0.0.1:{port}')}",
            f"tls = {{ cert = {R.toml_str(cert)}, key = {R.toml_str(key)} }}",
            "",
            "[[upstream]]",
            'name = "backend"',
            # Never reached: the client sends no request.
            'servers = ["127.0.0.1:9"]',
            "",
            "[logs]",
            f"error_log = {R.toml_str(os.path.join(work, f'palisade-tls-{slug}-error.log'))}",
            'level = "warn"',
            "",
            "[store]",
            f"path = {R.toml_str(os.path.join(work, f'store-tls-{slug}'))}",
            "",
        ]))
    proc = R.Proc(f"palisade-tls-{slug}", [args.palisade, "run", "--config", cfg], work,
                  cpu=SERVER_CPU)
    R.wait_port(port, proc)
    return R.System("palisade", port, proc, lambda: [proc.pid])


def start_nginx(work, slug, cert, key):
    port = R.free_port()
    cfg = os.path.join(work, f"nginx-tls-{slug}.conf")
    with open(cfg, "w") as f:
        f.write(NGINX_CONF.format(work=work, name=slug, port=port, cert=cert, key=key))
    err = os.path.join(work, f"nginx-tls-{slug}-error.log")
    proc = R.Proc(f"nginx-tls-{slug}", ["nginx", "-e", err, "-c", cfg, "-p", work], work,
                  cpu=SERVER_CPU)
    R.wait_port(port, proc)
    deadline = time.time() + 30
    while not R.children(proc.pid) and time.time() < deadline:
        time.sleep(0.05)
    return R.System("nginx", port, proc, lambda: [proc.pid] + R.children(proc.pid))


def parallel(argv, duration, clients):
    """Runs `clients` copies of `argv` at once; returns their outputs and the wall
    seconds until the last one ended."""
    t0 = time.monotonic()
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(clients)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=duration + 60)
        if p.returncode != 0:
            raise RuntimeError(f"{argv[3]} failed ({p.returncode}): {err.strip()[-300:]}")
        outs.append(out)
    return outs, time.monotonic() - t0


def s_time(port, flags, duration, clients):
    """Runs `clients` s_time processes at once; returns (handshakes, wall seconds,
    resumed handshakes)."""
    argv = ["taskset", "-c", CLIENT_CPU, "openssl", "s_time", "-connect", f"127.0.0.1:{port}",
            "-time", str(duration), *flags]
    outs, secs = parallel(argv, duration, clients)
    total, resumed = 0, 0
    for out in outs:
        # "N connections in T real seconds, B bytes read per connection" (T is whole
        # seconds, too coarse: the wall time is measured here).
        m = re.search(r"(\d+) connections in \d+ real seconds", out)
        if not m:
            raise RuntimeError(f"s_time output not understood: {out[-300:]}")
        total += int(m.group(1))
        if "-reuse" in flags:
            # One mark per timed connection after "starting": 'r' when the server
            # resumed the session, '*' when it made a new one.
            marks = out.split("starting\n", 1)[-1].split(" connections in", 1)[0]
            resumed += marks.count("r")
    return total, secs, resumed


def resume13(port, duration, clients):
    """Runs `clients` RESUME13 clients at once; returns (handshakes, wall seconds,
    resumed handshakes)."""
    argv = ["taskset", "-c", CLIENT_CPU, sys.executable, "-c", RESUME13, str(port),
            str(duration)]
    outs, secs = parallel(argv, duration, clients)
    counts = [tuple(int(x) for x in out.split()) for out in outs]
    return sum(n for n, _ in counts), secs, sum(r for _, r in counts)


def measure(system, flags, args):
    R.settle(system, limit=10)
    c0 = R.cpu_seconds(system.pids())
    if flags is None:
        n, secs, resumed = resume13(system.port, args.duration, args.clients)
    else:
        n, secs, resumed = s_time(system.port, flags, args.duration, args.clients)
    cpu = R.cpu_seconds(system.pids()) - c0
    return n, secs, cpu, resumed


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=5, help="seconds per s_time run")
    ap.add_argument("--rounds", type=int, default=3, help="palisade/nginx pairs per case")
    ap.add_argument("--clients", type=int, default=2, help="s_time processes at once")
    ap.add_argument("--palisade", default=os.path.join(R.REPO, "target", "release", "palisade"))
    ap.add_argument("--out-md", default=None,
                    help="write the markdown section for BENCHMARKS.md here")
    args = ap.parse_args()
    for tool in ("nginx", "openssl", "taskset"):
        if shutil.which(tool) is None:
            raise SystemExit(f"tls: {tool} is not installed")
    if not os.path.exists(args.palisade):
        raise SystemExit(f"tls: {args.palisade} is missing (cargo build --release -p proxy)")
    work = tempfile.mkdtemp(prefix="palisade-tls-")
    rows = []
    try:
        for cert_name, cert_args in CERTS.items():
            slug, cert, key = make_cert(work, cert_name, cert_args)
            servers = {"palisade": start_palisade(args, work, slug, cert, key),
                       "nginx": start_nginx(work, slug, cert, key)}
            for mode, version, flags in MODES:
                got = {k: [] for k in servers}
                for _ in range(args.rounds):
                    for name, system in servers.items():
                        n, secs, cpu, resumed = measure(system, flags, args)
                        got[name].append((n / secs, n / cpu if cpu > 0 else 0.0,
                                          cpu / secs, resumed / n if n else 0.0))
                        R.log(f"tls: {cert_name} {mode} TLS {version} {name}: "
                              f"{n / secs:,.0f}/s, {n / cpu:,.0f} per server CPU-s"
                              + (f", {resumed}/{n} resumed" if mode == "resumed" else ""))
                med = {k: tuple(statistics.median(x[i] for x in v) for i in range(4))
                       for k, v in got.items()}
                rows.append((cert_name, mode, version, med))
            for s in servers.values():
                s.stop()
    finally:
        R.stop_all()
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "| certificate | handshake | TLS | server | handshakes/s | per server CPU-s "
        "| server CPUs busy | resumed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cert_name, mode, version, med in rows:
        for name in ("palisade", "nginx"):
            hs, per_cpu, busy, res = med[name]
            lines.append(f"| {cert_name} | {mode} | {version} | {name} | {hs:,.0f} | "
                         f"{per_cpu:,.0f} | {busy:.2f} | "
                         + (f"{res:.0%}" if mode == "resumed" else "-") + " |")
        p, n = med["palisade"], med["nginx"]
        lines.append(f"| {cert_name} | {mode} | {version} | **palisade / nginx** | "
                     f"{p[0] / n[0]:.2f}x | **{p[1] / n[1]:.2f}x** | | |")
    table = "\n".join(lines)
    print(table)
    full = [(c, v, med["palisade"][1] / med["nginx"][1]) for c, m, v, med in rows if m == "full"]
    summary = "tls: full handshakes per server CPU-s, palisade / nginx: " + ", ".join(
        f"{c} TLS {v} {r:.2f}x" for c, v, r in full)
    print(summary)
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(SECTION.format(
                command=f"python3 bench/tls.py --duration {args.duration} --rounds "
                        f"{args.rounds} --clients {args.clients}",
                date=time.strftime("%Y-%m-%d", time.gmtime()), table=table, summary=summary))


SECTION = """## TLS handshakes per CPU-second (issue 12)

`{command}` (also run by `scripts/bench`): palisade's TLS listener (rustls, ring
provider, session tickets and the session cache on, as by default) against nginx
1.22 with OpenSSL 3.0 (`ssl_session_cache shared:SSL:10m`, tickets on), the same
self-signed certificate for both, one worker each pinned to CPU 0; the client is
`openssl s_time` (no request: handshake, then close) in parallel copies on CPU 1.
Full handshakes on TLS 1.3 and TLS 1.2 (X25519 key exchange), and resumptions: TLS
1.2 with s_time (the client resumes one session over and over), TLS 1.3 with a
small Python client (`RESUME13` in bench/tls.py: s_time reads nothing after the
handshake, so it never gets a TLS 1.3 ticket), which reads the first ticket and then
resumes with it over and over (PSK with a new X25519 exchange). The `resumed` column
is the share the server really resumed. Server CPU is
utime + stime from /proc (nginx: master and worker). The two servers are
interleaved, medians of the rounds. Handshakes per second are bounded by the client
(one CPU for all the s_time copies, doing the client half of each handshake):
compare the per server CPU-second column. Run on {date}.

{table}

```
{summary}
```
"""


if __name__ == "__main__":
    main()
