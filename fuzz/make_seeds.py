#!/usr/bin/env python3
"""Builds the seed corpus of the fuzz targets from the OWASP CRS.

Reads the CRS rule files and regression tests (YAML) and writes, for each target,
a few hundred small inputs laid out as that target expects them (see the module
docs in src/) under seeds/<target>/crs-<sha1 of the content>. Files whose names do
not start with `crs-` (hand-written seeds, crash reproducers) are left alone.

The output is deterministic for a given CRS tree, so re-running it gives the same
files. Needs PyYAML.

    fuzz/make_seeds.py [--crs DIR]        (default: $CRS_DIR or ../shared/crs)
"""

import argparse
import base64
import hashlib
import os
import random
import re
import sys
import urllib.parse
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
SEEDS = HERE / "seeds"
MAX_SEED = 4096
MAX_PER_TARGET = 300
# Transform::ALL has 35 transformations; the transforms target picks them by index.
TRANSFORMS = 35


def default_crs():
    if os.environ.get("CRS_DIR"):
        return Path(os.environ["CRS_DIR"])
    for candidate in (HERE.parent.parent / "shared" / "crs", Path("/work/shared/crs")):
        if candidate.is_dir():
            return candidate
    return HERE.parent.parent / "shared" / "crs"


class Corpus:
    """Seeds for one target: deduplicated, bounded in size and count."""

    def __init__(self, name):
        self.name = name
        self.items = {}

    def add(self, data):
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        if not data or len(data) > MAX_SEED:
            return
        self.items.setdefault(hashlib.sha1(data).hexdigest(), data)

    def write(self, rng):
        out = SEEDS / self.name
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("crs-*"):
            old.unlink()
        keys = sorted(self.items)
        if len(keys) > MAX_PER_TARGET:
            keys = sorted(rng.sample(keys, MAX_PER_TARGET))
        for k in keys:
            (out / f"crs-{k}").write_bytes(self.items[k])
        return len(keys)


def text(v):
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return str(v).encode("utf-8", "surrogateescape")


def requests(crs):
    """Every test request of the CRS suite as (method, uri, version, headers, body)."""
    for path in sorted((crs / "tests" / "regression" / "tests").rglob("*.yaml")):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8", errors="surrogateescape"))
        except yaml.YAMLError:
            continue
        for test in (doc or {}).get("tests") or []:
            for stage in test.get("stages") or []:
                inp = (stage.get("input") if isinstance(stage, dict) else None) or {}
                if "encoded_request" in inp:
                    raw = base64.b64decode(str(inp["encoded_request"]).strip() + "==")
                    yield raw_request(raw)
                    continue
                headers = [
                    (text(k), text(v))
                    for k, v in (inp.get("headers") or {}).items()
                    if v is not None
                ]
                body = text(inp.get("data")) or b""
                ct = header(headers, b"content-type") or b""
                if b"multipart/form-data" in ct.lower():
                    body = body.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
                yield (
                    text(inp.get("method")) or b"GET",
                    text(inp.get("uri")) or b"/",
                    text(inp.get("version")) or b"HTTP/1.1",
                    headers,
                    body,
                )


def raw_request(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers.append((name, value.strip()))
    parts += [b"", b"", b""]
    return parts[0], parts[1], parts[2], headers, body


def header(headers, name):
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def query_values(uri):
    query = uri.partition(b"?")[2].partition(b"#")[0]
    for piece in query.split(b"&"):
        yield piece.partition(b"=")[2]


def rule_blocks(conf_text):
    """The directives of a rule file, one block of non-comment lines each."""
    block = []
    for line in conf_text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            if block:
                yield "\n".join(block) + "\n"
                block = []
            continue
        block.append(line)
    if block:
        yield "\n".join(block) + "\n"


RX = re.compile(r'"(!?)@rx ((?:[^"\\]|\\.)*)"')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crs", type=Path, default=default_crs())
    args = ap.parse_args()
    crs = args.crs
    if not (crs / "rules").is_dir():
        sys.exit(f"make_seeds: no CRS rules under {crs} (give --crs DIR)")
    rng = random.Random(8)
    corpora = {
        n: Corpus(n)
        for n in (
            "seclang",
            "transforms",
            "url_decode_diff",
            "body_urlencoded",
            "body_multipart",
            "body_json",
            "body_xml",
            "injection",
            "rx",
            "http1_head",
            "http1_httparse_diff",
            "chunked",
            "h1_conn",
            "h2_conn",
        )
    }
    c = corpora

    # Rule files: every directive block, and the @rx patterns in them.
    patterns = []
    confs = sorted((crs / "rules").glob("*.conf")) + [crs / "crs-setup.conf.example"]
    for conf in confs:
        if not conf.is_file():
            continue
        body = conf.read_text(encoding="utf-8", errors="surrogateescape")
        for block in rule_blocks(body):
            c["seclang"].add(block)
        for m in RX.finditer(body):
            patterns.append(re.sub(r'\\(["\\])', r"\1", m.group(2)))

    values = []
    for method, uri, version, headers, data in requests(crs):
        raw = wire_request(method, uri, version, headers, data)
        c["http1_head"].add(bytes([rng.randrange(256), rng.randrange(256)]) + raw)
        c["http1_httparse_diff"].add(raw)
        c["h1_conn"].add(raw)
        c["h2_conn"].add(h2_request(rng, method, uri, headers, data))
        if data:
            c["chunked"].add(chunked_body(rng, data))
        ct = (header(headers, b"content-type") or b"").lower()
        query = uri.partition(b"?")[2]
        if query:
            c["url_decode_diff"].add(bytes([rng.randrange(256)]) + query)
        for v in query_values(uri):
            if v:
                values.append(urllib.parse.unquote_to_bytes(v.replace(b"+", b" ")))
                c["transforms"].add(pipeline(rng) + v)
        if not data:
            continue
        control = bytes([rng.randrange(256)])
        if b"json" in ct:
            c["body_json"].add(control + data)
        elif b"xml" in ct:
            c["body_xml"].add(control + data)
        elif b"multipart/form-data" in ct:
            ct_value = header(headers, b"content-type")
            c["body_multipart"].add(control + ct_value + b"\n" + data)
        else:
            c["body_urlencoded"].add(control + data)
            c["url_decode_diff"].add(control + data)
            for piece in data.split(b"&"):
                value = piece.partition(b"=")[2] or piece
                values.append(urllib.parse.unquote_to_bytes(value.replace(b"+", b" ")))
                c["transforms"].add(pipeline(rng) + value)

    for v in values:
        if v:
            c["injection"].add(v)
    for p in patterns:
        value = rng.choice(values) if values else b""
        c["rx"].add(b"\x00" + p.encode("utf-8", "surrogateescape") + b"\x00" + value)

    for name, corpus in sorted(corpora.items()):
        n = corpus.write(rng)
        print(f"{name}: {n} seeds")


def wire_request(method, uri, version, headers, body):
    """The request as an HTTP/1 client sends it (Content-Length set for a body)."""
    lines = [method + b" " + uri + b" " + version]
    lines += [k + b": " + v for k, v in headers if k.lower() != b"content-length"]
    if body:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def h2_request(rng, method, uri, headers, body):
    """The h2_conn target's request description: control byte (even), header lines
    `name NUL value` (pseudo-headers first, names lower case), an empty line, the body."""
    control = rng.randrange(128) * 2
    lines = [
        b":method\0" + method,
        b":scheme\0http",
        b":path\0" + uri,
        b":authority\0" + (header(headers, b"host") or b"localhost"),
    ]
    for k, v in headers:
        if k.lower() not in (b"host", b"connection", b"content-length", b"keep-alive"):
            lines.append(k.lower() + b"\0" + v)
    return bytes([control]) + b"\n".join(lines) + b"\n\n" + body


def chunked_body(rng, data):
    """The chunked target's input: control byte (even: chunked, with a trailer
    limit), three piece sizes, then `data` in chunks, sometimes with extensions and
    trailers."""
    out = bytearray([rng.randrange(128) * 2] + [rng.randrange(256) for _ in range(3)])
    pos = 0
    while pos < len(data):
        n = rng.randrange(1, 64)
        chunk = data[pos : pos + n]
        ext = b";x=1" if rng.random() < 0.2 else b""
        out += b"%x%s\r\n%s\r\n" % (len(chunk), ext, chunk)
        pos += n
    out += b"0\r\n"
    if rng.random() < 0.3:
        out += b"X-Trailer: 1\r\n"
    out += b"\r\n"
    return bytes(out)


def pipeline(rng):
    steps = rng.randrange(1, 5)
    return bytes([steps - 1] + [rng.randrange(TRANSFORMS) for _ in range(steps)])


if __name__ == "__main__":
    main()
