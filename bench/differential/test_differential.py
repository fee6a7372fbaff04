"""Unit tests of the differential harness's own logic: request building, log parsing and
attribution, variable canonicalisation, the comparison. Run by scripts/test-all (through
the venv python of scripts/differential) before the sample run:

    target/differential/venv/bin/python -m unittest discover -s bench/differential
"""

import base64
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compare  # noqa: E402
import corpus  # noqa: E402
import engines  # noqa: E402


def line(rule, uid=None, var=None, data=None, text=None):
    """A ModSecurity-style error-log line."""
    s = "2026/01/01 00:00:00 [info] 1#1: *1 ModSecurity: Warning. "
    if text is not None:
        s += text
    elif var is not None:
        s += f"Matched \"Operator `Rx' with parameter `x' against variable `{var}' (Value: `v' )"
    s += f' [file "f"] [line "1"] [id "{rule}"]'
    if data is not None:
        s += f' [data "{data}"]'
    if uid is not None:
        s += f' [unique_id "{uid}"] [ref ""]'
    return s


class FtwRequest(unittest.TestCase):
    def test_autocomplete_adds_type_length_and_connection(self):
        raw = corpus.ftw_request({"method": "POST", "uri": "/p", "headers": {"Host": "h"},
                                  "data": "a=b c&d=<x>"})
        head, body = raw.split(b"\r\n\r\n", 1)
        self.assertEqual(body, b"a=b+c&d=%3Cx%3E")
        self.assertIn(b"Content-Type: application/x-www-form-urlencoded", head)
        self.assertIn(b"Connection: close", head)
        self.assertIn(f"Content-Length: {len(body)}".encode(), head)
        self.assertTrue(head.startswith(b"POST /p HTTP/1.1\r\nHost: h\r\n"))

    def test_encoded_form_data_is_sent_as_written(self):
        raw = corpus.ftw_request({"method": "POST", "headers": {}, "data": "a=%27x"})
        self.assertTrue(raw.endswith(b"\r\n\r\na=%27x"))

    def test_no_autocomplete_sends_exactly_the_headers(self):
        raw = corpus.ftw_request({"method": "GET", "uri": "/", "headers": {"Host": "h"},
                                  "data": "x", "autocomplete_headers": False})
        self.assertEqual(raw, b"GET / HTTP/1.1\r\nHost: h\r\n\r\nx")

    def test_multipart_lf_becomes_crlf(self):
        raw = corpus.ftw_request({"method": "POST", "headers": {
            "Content-Type": "multipart/form-data; boundary=b"}, "data": "--b\nx\n--b--\n"})
        self.assertTrue(raw.endswith(b"--b\r\nx\r\n--b--\r\n"))

    def test_encoded_request_is_decoded(self):
        raw = b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n"
        self.assertEqual(corpus.ftw_request({"encoded_request": base64.b64encode(raw).decode()}), raw)

    def test_marker_goes_after_the_request_line(self):
        r = corpus.Request("crs", "GET", "t", b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        r.rid = "d000001"
        self.assertEqual(r.with_marker(), b"GET / HTTP/1.1\r\nX-Diff-Id: d000001\r\nHost: h\r\n\r\n")


class Corpus(unittest.TestCase):
    def test_generated_sources_are_fixed_by_the_seed(self):
        import random
        a = [corpus.benign_request(random.Random(7)) for _ in range(3)]
        b = [corpus.benign_request(random.Random(7)) for _ in range(3)]
        self.assertEqual(a, b)
        r1, r2 = random.Random(9), random.Random(9)
        self.assertEqual(corpus.mutated_request(r1, "' or 1=1 --"), corpus.mutated_request(r2, "' or 1=1 --"))

    def test_every_transform_and_placement_builds_a_request(self):
        import random
        rng = random.Random(1)
        for t in corpus.TRANSFORMS:
            self.assertIsInstance(corpus.transform(rng, t, "<a b='c'>"), str)
        for _ in range(300):
            kind, raw = corpus.mutated_request(rng, "x\r\ny\x00 \"z\"")
            self.assertIsNotNone(engines.parse_request(raw), kind)

    def test_sample_keeps_every_source(self):
        reqs = [corpus.Request(s, "k", "l", b"") for s in ["a"] * 90 + ["b"] * 9 + ["c"]]
        for n, r in enumerate(reqs):
            r.rid = f"d{n:06d}"
        got = corpus.sample(reqs, 20, 3)
        self.assertEqual({r.source for r in got}, {"a", "b", "c"})
        self.assertEqual(got, sorted(got, key=lambda r: r.rid))


class LogLines(unittest.TestCase):
    def test_parse(self):
        rule, uid, var, data = engines.parse_line(line("942100", "u1", "ARGS:id", "d"))
        self.assertEqual((rule, uid, var, data), ("942100", "u1", "ARGS:id", "d"))
        self.assertIsNone(engines.parse_line("2026/01/01 [notice] nginx started"))

    def test_libinjection_wording_takes_the_variable_from_data(self):
        p = engines.parse_line(line("942100", "u", text="detected SQLi using libinjection.",
                                    data="Matched Data: s&1 found within ARGS_NAMES:a \\x22b: x"))
        self.assertEqual(p[2], 'ARGS_NAMES:a "b')

    def test_a_cut_line_and_palisades_limit_check(self):
        self.assertIsNone(engines.parse_line("ModSecurity: Warning. Matched \"Operator")[0])
        p = engines.parse_line('ModSecurity: Warning. Palisade limit check: x [id ""] [unique_id "u"]')
        self.assertEqual(p[0], "(limit check)")

    def test_attribution_by_unique_id_then_by_order(self):
        lines = [
            line(engines.MARKER_ID, "u1", "REQUEST_HEADERS:X-Diff-Id", "d000001"),
            line("1", "u1", "ARGS:a"),
            line(engines.MARKER_ID, "u2", "REQUEST_HEADERS:X-Diff-Id", "d000002"),
            line("2", "u1", "TX:x"),        # a late line of the first request
            line("3", None, "ARGS:b"),      # cut before its unique_id: the latest request
            line("4", "u9", "ARGS:c"),      # a transaction without a marker
        ]
        got, stats = engines.attribute(lines)
        self.assertEqual([m.rule for m in got["d000001"]], ["1", "2"])
        self.assertEqual([m.rule for m in got["d000002"]], ["3"])
        self.assertEqual(stats["unattributed"], 1)
        self.assertEqual(stats["no_unique_id"], 1)


class ParseRequest(unittest.TestCase):
    def test_content_length_and_chunked(self):
        m, t, v, h, b = engines.parse_request(b"POST /a?b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcdef")
        self.assertEqual((m, t, v, b), (b"POST", b"/a?b", b"HTTP/1.1", b"abc"))
        self.assertEqual(h, [(b"Host", b"h"), (b"Content-Length", b"3")])
        got = engines.parse_request(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n1\r\nd\r\n0\r\n\r\n")
        self.assertEqual(got[4], b"abcd")

    def test_unreadable(self):
        self.assertIsNone(engines.parse_request(b"GET /\r\n\r\n"))
        self.assertIsNone(engines.parse_request(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"))

    def test_response_complete(self):
        self.assertTrue(engines._complete(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET"))
        self.assertFalse(engines._complete(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok", "GET"))
        self.assertTrue(engines._complete(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", "HEAD"))


class Compare(unittest.TestCase):
    def test_canonical_names(self):
        self.assertEqual(compare.canon_var('ARGS:a\\"b\\\\c\\x0a', "palisade"), 'ARGS:a"b\\c\n')
        self.assertEqual(compare.canon_var("ARGS:\\xc3\\x91\\x0a\\x27", "nginx"), "ARGS:Ñ\n\\x27")
        self.assertEqual(compare.canon_var(None, "wheel"), "?")

    def test_agreement_and_classes(self):
        reqs = []
        for n, src in enumerate(["crs", "crs", "benign"]):
            r = corpus.Request(src, "GET", f"l{n}", b"GET / HTTP/1.1\r\n\r\n")
            r.rid = f"d{n:06d}"
            reqs.append(r)
        mk = engines.MARKER_ID

        def res(*rules):
            return {"matches": [[mk, None]] + [[r, "ARGS:a"] for r in rules]}
        results = {
            "d000000": {"nginx": res("1"), "palisade": res("1"), "wheel": res("1")},
            "d000001": {"nginx": res("1", "2"), "palisade": res("1", "980130"), "wheel": res("1", "2")},
            "d000002": {"nginx": {"matches": []}, "palisade": res(), "wheel": res()},
        }
        s = compare.compare(reqs, results, 1)
        p = s["pairs"]["nginx-palisade"]
        self.assertEqual(p["agreement"]["all"]["agree"], 1)
        self.assertEqual(p["agreement"]["crs"], {"agree": 1, "total": 2, "rate": 0.5})
        self.assertEqual(p["agreement_without_log_only"]["crs"]["agree"], 1)
        classes = {c["class"]: c["count"] for c in p["classes"]}
        self.assertEqual(classes["2 only in ModSecurity 3.0.9"], 1)
        self.assertEqual(classes["980130 only in Palisade"], 1)
        self.assertEqual(classes["inspected by Palisade only (benign)"], 1)
        self.assertEqual(p["per_rule"]["1"], {"both": 2, "only_a": 0, "only_b": 0})
        self.assertIn("Paranoia level 1", compare.render([s], {
            "command": "c", "requests": 3, "seed": 1, "sources": {"crs": 2, "benign": 1},
            "modsec_conf": "m", "crs": "3.3.4", "engines": {"nginx": "n"}, "started": "now",
            "seconds": 1.0, "git": "g"}))


if __name__ == "__main__":
    unittest.main()
