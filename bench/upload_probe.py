#!/usr/bin/env python3
"""Sends file uploads of fresh random bytes to a running Palisade and prints the WAF
CPU time of each, read from its access log (`waf_cpu_us`).

Random bytes, new in every request, are what a compressed file's body looks like to
the rules: `--shape multipart` sends them as a multipart upload, `--shape json-base64`
as a base64 string in a JSON call (`{"name":...,"data":"..."}`, SIZE bytes of file).
bench/PROFILE.md ("The set of every pattern on bytes it has not seen") has the
figures. Start the proxy with an `access_log` in `[logs]` and `waf_cpu_measure =
"always"` in `[server]` (for instance benchmark configuration (d) from `bench/run.py
--keep`, with both added), then:

    python3 bench/upload_probe.py --port PORT --access-log FILE [--sizes 1024,4096,16384]
        [--count 8] [--seed 7] [--shape multipart|json-base64]

Requests go to 127.0.0.1 only, one at a time, `count` per size.
"""

import argparse
import base64
import http.client
import json
import os
import random
import sys
import time


def upload(rng, size, shape):
    """(path, Content-Type, body) of one upload of `size` fresh random bytes."""
    if shape == "json-base64":
        data = base64.b64encode(rng.randbytes(size)).decode()
        return "/api/files", "application/json", json.dumps(
            {"name": "photo.jpg", "data": data}).encode()
    boundary = "----probe%016x" % rng.getrandbits(64)
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            "filename=\"photo.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n").encode()
    body = head + rng.randbytes(size) + f"\r\n--{boundary}--\r\n".encode()
    return "/upload", f"multipart/form-data; boundary={boundary}", body


def waf_cpu(lines):
    """The `waf_cpu_us` of each access-log line (JSON lines), None where missing."""
    out = []
    for line in lines:
        try:
            out.append(json.loads(line).get("waf_cpu_us"))
        except ValueError:
            out.append(None)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--access-log", required=True)
    ap.add_argument("--sizes", default="1024,4096,16384")
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--shape", choices=["multipart", "json-base64"], default="multipart")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    sizes = [int(s) for s in args.sizes.split(",")]
    start = os.path.getsize(args.access_log) if os.path.exists(args.access_log) else 0
    statuses = []
    for size in sizes:
        for _ in range(args.count):
            path, ctype, body = upload(rng, size, args.shape)
            c = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
            c.request("POST", path, body=body, headers={
                "Host": "shop.example",
                "User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
                "Accept": "*/*",
                "Content-Type": ctype,
            })
            r = c.getresponse()
            r.read()
            c.close()
            statuses.append(r.status)
    want = len(sizes) * args.count
    for _ in range(50):
        with open(args.access_log, "rb") as f:
            f.seek(start)
            lines = f.read().decode("utf-8", "replace").splitlines()
        if len(lines) >= want:
            break
        time.sleep(0.1)
    cpu = waf_cpu(lines[-want:])
    if len(cpu) < want:
        sys.exit(f"upload_probe: {len(cpu)} access-log lines for {want} requests")
    print(f"| {args.shape} upload, file size | status | waf_cpu_us of each request, in order |")
    print("|---:|---|---|")
    for k, size in enumerate(sizes):
        part = slice(k * args.count, (k + 1) * args.count)
        print(f"| {size} | {sorted(set(statuses[part]))} | {', '.join(str(v) for v in cpu[part])} |")


if __name__ == "__main__":
    main()
