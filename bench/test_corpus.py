#!/usr/bin/env python3
"""The engine's built-in tables hold no string of the benchmark corpora.

    python3 bench/test_corpus.py          (scripts/test-all runs it)

The prefilter's sample of ordinary values (crates/engine/src/ruleset/ordinary.txt) decides
which `@rx` patterns count as attack detectors. Were it written from the benchmark's own
requests, the benchmark would measure a best case. This test takes every string of both
benchmark corpora (the fixed one of bench/corpus/ and the varying one of
bench/gen_varying.py with its default seed and count) and checks that no entry of the
table contains one.

What counts as a string of a corpus, per request:
  - values: the request line, target, path and each path segment, the query string, each
    header value and each of its ","- or ";"-separated elements, each cookie (name=value),
    cookie name and value, each argument name and value of the query string and of an
    urlencoded body (decoded), each multipart field value and file name, each JSON key
    and string value, and the body;
  - tokens: every maximal run of ASCII letters and digits, at least 4 long, in any value.
A table entry fails when it contains a value at least 4 bytes long, or has a token of at
least 4 characters, that is also one of the corpora's (tokens compared case-insensitively).

Exempt is the vocabulary fixed by the protocols themselves, which every client sends
and no benchmark chooses (PROTOCOL_WORDS: media types, codings, connection and cache
directives, fetch metadata, JSON literals): a token in that list is not a corpus token,
and a value all of whose tokens are in it is not a corpus value. Shorter values ("1",
"/", "en") carry nothing of a corpus.
"""

import email.parser
import email.policy
import json
import os
import re
import sys
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TABLE = os.path.join(REPO, "crates", "engine", "src", "ruleset", "ordinary.txt")
FIXED = os.path.join(HERE, "corpus")
sys.path.insert(0, HERE)

import gen_varying  # noqa: E402

MIN = 4
TOKEN = re.compile(rb"[A-Za-z0-9]{%d,}" % MIN)

# Words that HTTP, MIME and JSON fix; see the module documentation.
PROTOCOL_WORDS = {
    # methods and versions
    "http", "https", "post", "head", "options",
    # media types and their parameters
    "text", "html", "xhtml", "plain", "application", "json", "form", "data", "urlencoded",
    "multipart", "boundary", "charset", "utf8", "image", "avif", "webp", "apng", "jpeg",
    "font", "woff", "woff2", "signed", "exchange",
    # content codings, connection and cache directives
    "gzip", "deflate", "zstd", "identity", "keep", "alive", "close", "cache", "control",
    "cors", "navigate", "document", "same", "origin", "site", "none", "empty", "script",
    "style",
    # JSON literals
    "true", "false", "null",
}


def table_entries(path=TABLE):
    """The table's values as the engine reads them (comment lines start with '#')."""
    with open(path, "rb") as f:
        return [line for line in f.read().split(b"\n") if line and not line.startswith(b"#")]


def tokens(value):
    return {t.lower() for t in TOKEN.findall(value)}


def is_protocol(value):
    return all(t.decode() in PROTOCOL_WORDS for t in tokens(value))


def json_strings(v, out):
    if isinstance(v, dict):
        for k, x in v.items():
            out.append(k.encode())
            json_strings(x, out)
    elif isinstance(v, list):
        for x in v:
            json_strings(x, out)
    elif isinstance(v, str):
        out.append(v.encode())


def request_values(raw):
    """The values of one raw request (see the module documentation)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    out = [lines[0]]
    parts = lines[0].split(b" ")
    target = parts[1] if len(parts) > 1 else b""
    path, _, query = target.partition(b"?")
    out += [target, path, query] + path.split(b"/")
    args = urllib.parse.parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    ctype = b""
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        value = value.strip()
        out.append(value)
        out += [e.strip() for e in re.split(rb"[,;]", value)]
        if name.lower() == b"cookie":
            for pair in value.split(b";"):
                pair = pair.strip()
                out.append(pair)
                out += pair.split(b"=", 1)
        if name.lower() == b"content-type":
            ctype = value.lower()
    if body:
        out.append(body)
        if ctype.startswith(b"application/x-www-form-urlencoded"):
            args += urllib.parse.parse_qsl(body.decode("latin-1"), keep_blank_values=True)
        elif ctype.startswith(b"application/json"):
            json_strings(json.loads(body), out)
        elif ctype.startswith(b"multipart/form-data"):
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + ctype + b"\r\n\r\n" + body)
            for part in msg.iter_parts():
                if part.get_filename():
                    out.append(part.get_filename().encode())
                else:
                    out.append(part.get_payload(decode=True) or b"")
    for k, v in args:
        out += [k.encode("latin-1"), v.encode("latin-1")]
    return out


def corpus_strings(requests):
    """(values, tokens) of the requests: the values at least MIN long, neither of them
    protocol vocabulary."""
    values, toks = set(), set()
    for raw in requests:
        for v in request_values(raw):
            if len(v) >= MIN and not is_protocol(v):
                values.add(v)
            toks |= {t for t in tokens(v) if t.decode() not in PROTOCOL_WORDS}
    return values, toks


def benchmark_requests():
    fixed = []
    for name in sorted(os.listdir(FIXED)):
        if name.endswith(".http"):
            with open(os.path.join(FIXED, name), "rb") as f:
                fixed.append(f.read())
    varying = [raw for _, raw in gen_varying.generate()]
    return fixed + varying


def violations(entries, values, toks):
    """What each table entry shares with the corpora, as readable lines."""
    out = []
    for e in entries:
        shared = sorted(t.decode() for t in tokens(e) & toks)
        if shared:
            out.append(f"{e[:80]!r}: tokens {', '.join(shared)}")
        # A value inside an entry (entries are short: test each window against the set).
        inside = {e[i:j] for i in range(len(e)) for j in range(i + MIN, len(e) + 1)} & values
        if inside:
            out.append(f"{e[:80]!r}: contains {sorted(inside, key=len)[-1][:60]!r}")
    return out


class Disjoint(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.values, cls.toks = corpus_strings(benchmark_requests())

    def test_table_holds_no_benchmark_string(self):
        bad = violations(table_entries(), self.values, self.toks)
        self.assertEqual(bad, [], "ordinary.txt shares strings with a benchmark corpus:\n"
                         + "\n".join(bad))

    def test_a_benchmark_string_is_caught(self):
        # The check fails when a benchmark string is put back: a header value of the
        # fixed corpus, a path of it, and a token of the varying one.
        with open(os.path.join(FIXED, "get.http"), "rb") as f:
            raw = f.read()
        ua = re.search(rb"User-Agent: ([^\r]+)", raw).group(1)
        cookie = re.search(rb"Cookie: ([^\r;]+)", raw).group(1)
        path = raw.split(b" ")[1].split(b"?")[0]
        for planted in (ua, b"x " + cookie + b" y", b"https://host" + path):
            self.assertNotEqual(violations(table_entries() + [planted], self.values, self.toks),
                                [], planted)
        host = gen_varying.HOSTS[0].encode()
        self.assertNotEqual(violations([b"a " + host], self.values, self.toks), [])

    def test_the_generator_is_seeded(self):
        # Same seed, same bytes; another seed, other requests; no request twice.
        a = gen_varying.generate(seed=7, count=300)
        self.assertEqual(a, gen_varying.generate(seed=7, count=300))
        self.assertNotEqual(a, gen_varying.generate(seed=8, count=300))
        self.assertEqual(len({raw for _, raw in a}), 300)

    def test_the_corpora_are_covered(self):
        # The extraction sees the strings the tables used to copy.
        for s in (b"/products/list", b"session=6f1c2a9b4e7d0a13", b"localhost", b"Firefox"):
            self.assertTrue(s in self.values or s.lower() in self.toks, s)
        self.assertIn(b"cookie_consent=all", self.values)


if __name__ == "__main__":
    unittest.main()
