#!/usr/bin/env python3
"""libmodsecurity's CPU time on the adversarial benchmark's `fresh` cases.

The engine benchmark `crates/engine/benches/adversarial.rs` has cases whose bytes are
new on every run (random-byte multipart uploads, random printable text as a form
argument and as a JSON string, a file as base64 in a JSON call). This script builds requests of the same shapes and
sizes, from its own fixed seed, and times them through the PyPI libmodsecurity wheel
(libmodsecurity 3.0.15, driven in process, as scripts/differential does) with Debian's
/etc/nginx/modsecurity.conf and CRS 3.3.4 at paranoia level 1, the body limits raised
as the engine benchmark raises them, and `SecRuleEngine On`. Compare with

    PALISADE_ADV_CRS=v3 cargo bench -p engine --bench adversarial -- fresh --quick

Run: `target/differential/venv/bin/python bench/modsec_fresh.py [--quick] [FILTER]`
(the venv comes from `scripts/differential --setup`; FILTER keeps the cases whose
name holds it). CPU time is the process's
(`time.process_time`), per request, averaged over each size's requests after one
warm-up request; a row prints as soon as it is measured.
"""

import base64
import json
import os
import random
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "differential"))
import engines  # noqa: E402  bench/differential/engines.py: write_rules

# The engine benchmark's settings, after Debian's base configuration (which already
# has its JSON rule, 200001).
SETTINGS = """
SecRuleEngine On
SecRequestBodyAccess On
SecRequestBodyLimit 67108864
SecRequestBodyNoFilesLimit 67108864
SecRequestBodyLimitAction Reject
SecArgumentsLimit 1000000
SecAuditEngine Off
"""

HEADERS = [
    ("Host", "localhost"),
    ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"),
    ("Accept", "text/html,application/xhtml+xml,*/*;q=0.8"),
    ("Accept-Language", "en-GB,en;q=0.5"),
    ("Cookie", "session=6f1c2a9b4e7d0a13; theme=dark; consent=yes"),
]


def fresh_runs(size):
    """The engine benchmark's count of requests per case and size."""
    return max(6, min(64, (4 << 20) // size))


def text(rng, n):
    return bytes(rng.randrange(32, 127) for _ in range(n))


def urlencode(v):
    out = bytearray()
    for b in v:
        c = chr(b)
        if c.isascii() and (c.isalnum() or c in "-._~"):
            out.append(b)
        else:
            out += b"%%%02X" % b
    return bytes(out)


def upload(rng, size):
    boundary = "----form%016x" % rng.getrandbits(64)
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            "filename=\"photo.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    fill = max(0, size - len(head) - len(tail))
    body = head + rng.randbytes(fill) + tail
    return "/upload", f"multipart/form-data; boundary={boundary}", body


def form(rng, size):
    body = bytearray(b"comment=")
    while len(body) < size:
        body += urlencode(text(rng, 64))
    del body[size:]
    # No cut percent escape at the end.
    while b"%" in body[-2:]:
        body.pop()
    return "/comment", "application/x-www-form-urlencoded", bytes(body)


def json_text(rng, size):
    s = ""
    while len(s) < size - 16:
        s += text(rng, 64).decode()
    s = s[: size - 16]
    body = json.dumps({"comment": s}).encode()
    return "/api/comment", "application/json", body


def json_base64(rng, size):
    raw = rng.randbytes((max(0, size - 32)) // 4 * 3)
    body = json.dumps({"name": "photo.jpg", "data": base64.b64encode(raw).decode()}).encode()
    return "/api/files", "application/json", body


SHAPES = [
    ("fresh upload random bytes", upload),
    ("fresh form random text", form),
    ("fresh json random text", json_text),
    ("fresh json base64 file", json_base64),
]


def run(mod, engine, rules, path, ctype, body):
    t = mod.Transaction(engine, rules)
    t.process_connection("127.0.0.1", 40000, "127.0.0.1", 80)
    t.process_uri(path, "POST", "1.1")
    for k, v in HEADERS:
        t.add_request_header(k, v)
    t.add_request_header("Content-Type", ctype)
    t.add_request_header("Content-Length", str(len(body)))
    t.process_request_headers()
    t.append_request_body(body)
    t.process_request_body()
    t.process_logging()


def main():
    import libmodsecurity as mod  # noqa: PLC0415 - from the differential venv

    quick = "--quick" in sys.argv
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    sizes = [4 << 10, 16 << 10, 64 << 10, 256 << 10] + ([] if quick else [1 << 20])
    work = tempfile.mkdtemp(prefix="palisade-modsec-fresh-")
    path = engines.write_rules(work, 1, "wheel")
    with open(path, "a") as f:
        f.write(SETTINGS)
    engine = mod.ModSecurity()
    engine.set_log_callback(lambda line: None)
    rules = mod.RulesSet()
    if rules.load_from_uri(path) < 0:
        raise SystemExit(f"modsec_fresh: rules refused: {rules.get_parser_error()}")
    print(f"{engine.who_am_i()}, CRS 3.3.4 PL1", file=sys.stderr)
    rng = random.Random(0x9E3779B97F4A7C15)
    print("| case | size | engine ms | ms per MiB |")
    print("|---|---:|---:|---:|")
    for size in sizes:
        for name, make in SHAPES:
            if only and not any(o in name for o in only):
                continue
            reqs = [make(rng, size) for _ in range(fresh_runs(size))]
            run(mod, engine, rules, *reqs[0])
            t0 = time.process_time()
            for r in reqs[1:]:
                run(mod, engine, rules, *r)
            ms = (time.process_time() - t0) * 1e3 / (len(reqs) - 1)
            print(f"| {name} | {size >> 10} KiB | {ms:.2f} | {ms / (size / 1048576):.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
