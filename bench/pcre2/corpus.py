#!/usr/bin/env python3
"""Writes the PCRE2 verdict corpus: every static `@rx` pattern of CRS v4 and CRS 3.3.4,
each with generated values and PCRE2's verdict on each, for the engine's test
crates/engine/tests/pcre2_corpus.rs.

Made once, by hand, and committed (the test reads the file and needs neither PCRE2 nor
CRS). Run it again after a CRS upgrade or when the generator changes:

    bench/pcre2/corpus.py [--values N] [--seed S] [--out FILE]

What it needs: a C compiler and Debian's libpcre2-dev (PCRE2 10.42, the library
Debian's libmodsecurity3 links), CRS v4.28.0 in ../shared/crs (or PALISADE_CRS_DIR)
and Debian's modsecurity-crs (CRS 3.3.4, /usr/share/modsecurity-crs).

Steps:
1. the engine lists the patterns as its loader parsed them (SecLang quoting undone,
   exactly what `Operator::compile("rx", ...)` receives) and generates the values
   (crates/engine/examples/rx_corpus_values.rs: random walks of each pattern's syntax
   tree, walks in random context, mutations, random printable and binary strings,
   from a fixed seed; 48 values per pattern, 384 for the patterns the engine evaluates
   apart because of their lookarounds, possessive quantifiers or backreferences);
2. bench/pcre2/verdicts.c compiles each pattern with PCRE2 as libmodsecurity v3 does
   (PCRE2_DOTALL | PCRE2_MULTILINE, no UTF mode) and matches each value (no JIT,
   PCRE2's default match limit): a match with its group 0 span, or no match; values on
   which PCRE2 stops with an error (the match limit) are left out and counted;
3. the corpus is written as gzip'd JSON lines (gzip header without a timestamp, so the
   same input gives the same bytes): a first line with the provenance, then one line
   per pattern: {"ids": ["v4:942100", ...], "pattern": "...", "values": [["value",
   start, end] for a match, ["value"] for none]}. Values are escaped: printable ASCII
   as itself except `\\`, which is doubled; every other byte as `\\xHH`.
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "crates/engine/tests/data/pcre2-verdicts.jsonl.gz"
CRS3 = Path("/usr/share/modsecurity-crs")


def escape(value: bytes) -> str:
    out = []
    for b in value:
        if b == 0x5C:
            out.append("\\\\")
        elif 0x20 <= b <= 0x7E:
            out.append(chr(b))
        else:
            out.append("\\x%02x" % b)
    return "".join(out)


def package_version(name: str) -> str:
    try:
        return subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--values", type=int, default=48, help="values per pattern (default 48)")
    ap.add_argument("--compat-values", type=int, default=384,
                    help="values per pattern with lookarounds, possessive quantifiers or a "
                    "backreference, which the engine evaluates apart (default 384)")
    ap.add_argument("--seed", type=int, default=0x5EC1A7C0DE5EED01, help="generator seed")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()

    crs4 = Path(os.environ.get("PALISADE_CRS_DIR", ROOT.parent / "shared/crs")).resolve()
    for need in [crs4 / "crs-setup.conf.example", crs4 / "rules", CRS3 / "owasp-crs.load"]:
        if not need.exists():
            print(f"corpus: {need} is missing (CRS v4 in ../shared/crs, "
                  "apt-get install modsecurity-crs)", file=sys.stderr)
            return 2

    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "verdicts"
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libpcre2-8"],
                               capture_output=True, text=True)
        if flags.returncode != 0:
            print("corpus: libpcre2-8 not found: apt-get install libpcre2-dev", file=sys.stderr)
            return 2
        subprocess.run(["cc", "-O2", "-o", str(exe), str(ROOT / "bench/pcre2/verdicts.c"),
                        *flags.stdout.split()], check=True)

        started = time.time()
        gen = subprocess.run(
            ["cargo", "run", "-q", "-p", "engine", "--example", "rx_corpus_values", "--",
             f"--values={args.values}", f"--compat-values={args.compat_values}",
             f"--seed={args.seed}",
             f"v4={crs4 / 'crs-setup.conf.example'}", f"v4={crs4 / 'rules/*.conf'}",
             f"v3={CRS3 / 'owasp-crs.load'}"],
            cwd=ROOT, capture_output=True, text=True)
        sys.stderr.write(gen.stderr)
        if gen.returncode != 0:
            return 1
        entries = [json.loads(line) for line in gen.stdout.splitlines() if line.strip()]
        print(f"corpus: {len(entries)} patterns generated in {time.time() - started:.0f} s",
              file=sys.stderr)

        request = []
        for e in entries:
            request.append("P " + e["pattern"].encode().hex())
            request.extend("V " + v for v in e["values"])
        run = subprocess.run([str(exe)], input="\n".join(request) + "\n",
                             capture_output=True, text=True, check=True)
        answers = iter(run.stdout.splitlines())

    pcre_errors = 0
    match_errors = 0
    matched = 0
    total = 0
    lines = []
    for e in entries:
        compiled = next(answers)
        values = [bytes.fromhex(v) for v in e["values"]]
        got = [next(answers) for _ in values]
        if compiled != "C ok":
            pcre_errors += 1
            print(f"corpus: PCRE2 refuses {e['ids']}: {compiled}", file=sys.stderr)
            continue
        out = []
        for v, a in zip(values, got):
            if a.startswith("M "):
                s, t = (int(x) for x in a.split()[1:])
                out.append([escape(v), s, t])
                matched += 1
            elif a == "N":
                out.append([escape(v)])
            else:
                match_errors += 1
                print(f"corpus: PCRE2 error {a} on {e['ids']} value {escape(v)[:80]}", file=sys.stderr)
                continue
            total += 1
        lines.append(json.dumps({"ids": e["ids"], "pattern": e["pattern"], "values": out},
                                ensure_ascii=False, separators=(",", ":")))

    header = {
        "made_by": "bench/pcre2/corpus.py",
        "pcre2": "libpcre2-8-0 " + package_version("libpcre2-8-0"),
        "flags": "PCRE2_DOTALL|PCRE2_MULTILINE, no UTF, no JIT",
        "crs": ["v4: " + str(crs4.name) + " (v4.28.0)",
                "v3: modsecurity-crs " + package_version("modsecurity-crs")],
        "values_per_pattern": args.values,
        "values_per_compat_pattern": args.compat_values,
        "seed": args.seed,
        "patterns": len(lines),
        "values": total,
        "matches": matched,
        "left_out_pcre2_errors": match_errors,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    data = "\n".join([json.dumps(header, separators=(",", ":"))] + lines) + "\n"
    with open(args.out, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as g:
            g.write(data.encode())
    print(f"corpus: {len(lines)} patterns, {total} values ({matched} match), "
          f"{match_errors} values left out on a PCRE2 error, {pcre_errors} patterns refused "
          f"by PCRE2; {args.out.stat().st_size} bytes in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
