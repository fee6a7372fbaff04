#!/usr/bin/env python3
"""Differential test of Palisade's @detectSQLi / @detectXSS against C libinjection.

The reference (--reference):

  modsecurity  (default) the libinjection inside Debian's libmodsecurity 3.0.9
               (package libmodsecurity3, /usr/lib/x86_64-linux-gnu/libmodsecurity.so.3,
               which exports libinjection's functions): libinjection commit bfba51f,
               the one ModSecurity 3.0.9 bundles as others/libinjection. This is what
               Palisade follows.
  pypi         PyPI's `libinjection-python` 1.1.6 (pip install
               libinjection-python==1.1.6): the same "3.9.2" version string, but older
               SQLi code (its `$tag$...$tag$` search starts at the wrong offset, fixed
               upstream in 691e041) and an XSS patched to flag only 87 listed `on*`
               event names. Kept to show how the two C builds differ.

The C functions are called through ctypes on raw bytes, NUL bytes included.
Palisade's side is the `injection_verdicts` example of the fuzz crate
(engine::operators::injection).

Inputs: the files of the given corpus directories (default: seeds/injection), then
generated values: SQL and HTML built from tokens, mutated, and random bytes, all
from a seeded generator (same seed, same inputs).

Every disagreement is put in the first class that explains it:

  nul              the value holds a NUL byte
  multiword        SQLi: C's token list (read through ctypes) holds a merged
                   multi-word keyword, or the value holds such words
  dollar-quote     SQLi: C's tokens hold a PostgreSQL dollar-quoted string
  xss-on-attribute XSS: the value holds `on` followed by a name byte
  unexplained      anything else

All of them are differences to fix or list as bugs; the classes only group them.

    fuzz/differential/libinjection_diff.py [--reference modsecurity|pypi]
        [--count N] [--seed S] [--strict] [CORPUS_DIR...]

--strict exits 1 when a disagreement is left outside the --known KIND:CLASS pairs
(the known bugs listed in injection.rs; CI passes `--known xss:nul`). The values
that disagree are written (hex, one per line) to --out (default:
fuzz/logs/libinjection-differences.txt).
"""

import argparse
import ctypes
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

FUZZ = Path(__file__).resolve().parent.parent


MODSECURITY_LIB = "/usr/lib/x86_64-linux-gnu/libmodsecurity.so.3"


def load_c(reference):
    if reference == "modsecurity":
        if not Path(MODSECURITY_LIB).exists():
            sys.exit(f"libinjection_diff.py: {MODSECURITY_LIB} is missing "
                     "(apt-get install libmodsecurity3)")
        lib = ctypes.CDLL(MODSECURITY_LIB)
    else:
        try:
            import libinjection  # noqa: F401  (the package ships the C library)
        except ImportError:
            sys.exit("libinjection_diff.py: needs `pip install libinjection-python==1.1.6`")
        lib = ctypes.CDLL(libinjection.__file__)
    lib.libinjection_sqli.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]
    lib.libinjection_sqli.restype = ctypes.c_int
    lib.libinjection_xss.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.libinjection_xss.restype = ctypes.c_int
    lib.libinjection_version.restype = ctypes.c_char_p
    lib.libinjection_sqli_init.argtypes = [
        ctypes.POINTER(SqliState), ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int,
    ]
    lib.libinjection_sqli_init.restype = None
    lib.libinjection_sqli_fingerprint.argtypes = [ctypes.POINTER(SqliState), ctypes.c_int]
    lib.libinjection_sqli_fingerprint.restype = ctypes.c_char_p
    return lib


def c_verdicts(lib, value):
    fp = ctypes.create_string_buffer(8)
    sqli = lib.libinjection_sqli(value, len(value), fp)
    xss = lib.libinjection_xss(value, len(value))
    return (1 if sqli else 0, fp.value.decode("latin-1") if sqli else "-", 1 if xss else 0)


def rust_verdicts(values):
    cmd = [
        "cargo", "run", "--quiet", "--release", "--example", "injection_verdicts",
        "--manifest-path", str(FUZZ / "Cargo.toml"),
    ]
    stdin = "".join(v.hex() + "\n" for v in values)
    out = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        sqli, fp, xss = line.split(" ")
        rows.append((int(sqli), fp, int(xss)))
    if len(rows) != len(values):
        sys.exit(f"libinjection_diff.py: {len(rows)} answers for {len(values)} values")
    return rows


SQL = [
    "1", "0", "-1", "1e5", "0x41", "'", '"', "`", "a'", "1'", "admin'", "''", "'1'", "\"x\"",
    "or", "OR", "and", "||", "&&", "not", "xor", "select", "SELECT", "union", "UNION ALL",
    "from", "where", "users", "table_name", "information_schema.tables", "like", "rlike",
    "regexp", "sounds like", "is", "distinct", "is distinct from", "is not distinct from",
    "create", "create or replace view v as", "replace", "view", "at", "time", "zone",
    "at time zone", "in boolean mode", "in", "boolean", "mode", "lock in share mode",
    "lock", "share", "next value for", "previous value for", "value", "for", "sleep(5)",
    "benchmark(1,md5(1))", "char(65)", "concat(", "@@version", "@v", "version()", "--",
    "-- -", "#", "/*", "*/", "/*!50000", ";", ",", "(", ")", "=", "<", ">", "<>", "!=",
    "<=>", "+", "-", "*", "/", "%", "\\", ".", ":", "?", "{", "}", "[", "]", "$", "N'x'",
    "b'1'", "x'41'", "collate", "utf8_bin", "drop", "insert", "into", "values", "exec",
    "waitfor delay '0:0:5'", "having", "group by", "order by 1", "limit 1", "case when",
    "then", "else", "end", "null", "true", "if(", "procedure", "analyse", "$$", "$q$",
    "$q$x$q$",
]
HTML = [
    "<", ">", "</", "/>", "<script>", "</script>", "<img", "<svg", "<a", "<iframe",
    "<body", "<style>", "<div", "<x", "<math", "<object", "<embed", "<form", "<input",
    "<!--", "-->", "<!DOCTYPE html>", "<![CDATA[", "]]>", "<?", "?>", " ", "\t", "\n", "/",
    "src=", "href=", "style=", "onerror=", "onload=", "onclick=", "onmouseover=",
    "onmouseover8=", "onerror+=", "onscrollend=", "onfocusin=", "ontoggle=", "onbegin=",
    "onx=", "on=", "one=", "once=", "online=", "onion=", "attributeName=", "formaction=",
    "xmlns=", "values=", "to=", "by=", "from=", "action=", "data=", "javascript:",
    "vbscript:", "data:text/html,", "alert(1)", "'", '"', "`", "x", "=", "&#x61;", "&lt;",
    "expression(", "url(", "@import", "-moz-binding",
]
PREFIXES = ["", "1", "1'", "'", '"', "`", ">", "\">", "'>", "1)", "')", "a", " "]


def generate(rng, pool):
    kind = rng.random()
    if kind < 0.40:
        words = SQL
    elif kind < 0.75:
        words = HTML
    elif kind < 0.90 and pool:
        return mutate(rng, rng.choice(pool))
    else:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 24)))
    parts = [rng.choice(PREFIXES)]
    for _ in range(rng.randrange(1, 9)):
        parts.append(rng.choice(words))
        parts.append(rng.choice(["", " ", " ", "  ", "\t", "\n", "/**/", "+", "\x0b", "\xa0"]))
    value = "".join(parts).encode("latin-1")
    if rng.random() < 0.3:
        value = mutate(rng, value)
    return value


def mutate(rng, value):
    v = bytearray(value)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(4)
        at = rng.randrange(len(v) + 1)
        if op == 0 and v:
            del v[min(at, len(v) - 1)]
        elif op == 1:
            v.insert(at, rng.choice(b"'\"`()-#/*;= \x00\xa0<>&aA0"))
        elif op == 2 and v:
            v[min(at, len(v) - 1)] = rng.randrange(256)
        else:
            v[at:at] = rng.choice(SQL + HTML).encode("latin-1")
    return bytes(v)


WS = r"[\s\x00\xa0\x0b\x0c]+"
MULTIWORD = re.compile(
    (
        r"(?i)(at{w}time|create{w}or|in{w}boolean|is{w}(not{w})?distinct|lock{w}in|"
        r"next{w}value|previous{w}value)"
    ).format(w=WS).encode()
)
ON_ATTRIBUTE = re.compile(rb"(?i)on[a-z0-9_+-]")


class Token(ctypes.Structure):
    """struct libinjection_sqli_token of C libinjection 3.9.2."""

    _fields_ = [
        ("pos", ctypes.c_size_t),
        ("len", ctypes.c_size_t),
        ("count", ctypes.c_int),
        ("type", ctypes.c_char),
        ("str_open", ctypes.c_char),
        ("str_close", ctypes.c_char),
        ("val", ctypes.c_char * 32),
    ]


class SqliState(ctypes.Structure):
    """struct libinjection_sqli_state of C libinjection 3.9.2 (checked against the
    package's own Python API, which reads the same tokens)."""

    _fields_ = [
        ("s", ctypes.c_char_p),
        ("slen", ctypes.c_size_t),
        ("lookup", ctypes.c_void_p),
        ("userdata", ctypes.c_void_p),
        ("flags", ctypes.c_int),
        ("pos", ctypes.c_size_t),
        ("tokenvec", Token * 8),
        ("current", ctypes.c_void_p),
        ("fingerprint", ctypes.c_char * 8),
        ("reason", ctypes.c_int),
        ("stats", ctypes.c_int * 6),
    ]


# The readings C tries (quote context | SQL dialect), as libinjection's flags.
READINGS = [1 | 8, 1 | 16, 2 | 8, 2 | 16, 4 | 8, 4 | 16]


def c_tokens(lib, value):
    """C's token lists for `value`, one per reading C may try."""
    out = []
    buf = ctypes.create_string_buffer(value, len(value))
    for flags in READINGS:
        state = SqliState()
        lib.libinjection_sqli_init(ctypes.byref(state), buf, len(value), flags)
        lib.libinjection_sqli_fingerprint(ctypes.byref(state), flags)
        out += [t for t in state.tokenvec if t.type != b"\0"]
    return out


def c_merged_words(tokens):
    """Whether C's tokens (of any reading) hold a merged multi-word keyword: a word
    token (not a string or comment) with white space inside."""
    return any(
        t.type not in (b"s", b"c") and t.str_open == b"\0" and re.search(rb"\s", t.val)
        for t in tokens
    )


def c_dollar_string(tokens):
    """Whether C's tokens (of any reading) hold a PostgreSQL dollar-quoted string
    (`$$...$$`, `$tag$...$tag$`)."""
    return any(t.type == b"s" and t.str_open == b"$" for t in tokens)


def classify(lib, value, kind):
    if b"\x00" in value:
        return "nul"
    if kind in ("sqli", "sqli-extra", "fingerprint"):
        tokens = c_tokens(lib, value)
        if MULTIWORD.search(value) or c_merged_words(tokens):
            return "multiword"
        if c_dollar_string(tokens):
            return "dollar-quote"
    if kind == "xss" and ON_ATTRIBUTE.search(value):
        return "xss-on-attribute"
    return "unexplained"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="*", type=Path)
    ap.add_argument("--count", type=int, default=100_000, help="generated values")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--reference", choices=["modsecurity", "pypi"], default="modsecurity")
    ap.add_argument("--out", type=Path, default=FUZZ / "logs" / "libinjection-differences.txt")
    ap.add_argument("--show", type=int, default=10, help="differing values to print")
    ap.add_argument("--known", action="append", default=[], metavar="KIND:CLASS",
                    help="a listed difference --strict tolerates (e.g. xss:nul)")
    args = ap.parse_args()

    lib = load_c(args.reference)
    dirs = args.corpus or [FUZZ / "seeds" / "injection"]
    pool = []
    for d in dirs:
        pool += [p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()]
    rng = random.Random(args.seed)
    values = list(pool) + [generate(rng, pool) for _ in range(args.count)]

    ours = rust_verdicts(values)
    # sqli: C says SQLi and Palisade does not; sqli-extra: the other way round.
    counts = {k: Counter() for k in ("sqli", "sqli-extra", "fingerprint", "xss")}
    differing = []
    for value, (r_sqli, r_fp, r_xss) in zip(values, ours):
        c_sqli, c_fp, c_xss = c_verdicts(lib, value)
        diffs = []
        if r_sqli != c_sqli:
            diffs.append(("sqli" if c_sqli else "sqli-extra",
                          f"sqli ours={r_sqli}:{r_fp} C={c_sqli}:{c_fp}"))
        elif r_sqli and r_fp != c_fp:
            diffs.append(("fingerprint", f"fingerprint ours={r_fp} C={c_fp}"))
        if r_xss != c_xss:
            diffs.append(("xss", f"xss ours={r_xss} C={c_xss}"))
        for kind, what in diffs:
            cls = classify(lib, value, kind)
            counts[kind][cls] += 1
            differing.append((value, kind, what, cls))

    version = lib.libinjection_version().decode()
    print(f"C libinjection {version} ({args.reference}); {len(values)} values "
          f"({len(pool)} from corpus, {args.count} generated, seed {args.seed})")
    for kind, counter in counts.items():
        total = sum(counter.values())
        detail = ", ".join(f"{cls} {n}" for cls, n in sorted(counter.items())) or "none"
        label = {
            "sqli": "SQLi missed (C: SQLi, Palisade: not)",
            "sqli-extra": "SQLi extra (Palisade: SQLi, C: not)",
            "fingerprint": "SQLi fingerprint (both SQLi)",
            "xss": "XSS verdict",
        }[kind]
        print(f"{label}: {total} ({detail})")
    if differing:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("".join(v.hex() + "\n" for v, _, _, _ in differing))
        print(f"differences: {len(differing)} (hex in {args.out}); first ones:")
        for value, _, what, cls in differing[: args.show]:
            print(f"  [{cls}] {what}: {value!r}")
    unknown = [d for d in differing if f"{d[1]}:{d[3]}" not in args.known]
    if args.strict and unknown:
        print(f"libinjection_diff.py: {len(unknown)} difference(s) outside --known")
        sys.exit(1)


if __name__ == "__main__":
    main()
