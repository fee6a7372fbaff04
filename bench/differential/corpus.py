"""The differential corpus: raw HTTP/1.x requests from three sources, all from a seed.

- ``crs``: every stage input of the CRS regression tests (go-ftw YAML), turned into the
  bytes go-ftw would send (request line, headers in file order, ``Connection: close``
  and ``Content-Length`` added unless ``autocomplete_headers: false``, form data
  percent-encoded when it is not already, multipart LF turned into CRLF,
  ``encoded_request`` sent as decoded).
- ``benign``: generated ordinary traffic: GET with query strings, urlencoded forms, JSON,
  multipart with files, XML/SOAP, cookies, non-ASCII text (raw UTF-8 and percent-encoded).
- ``mutated``: the attack payloads of the CRS tests (argument values of the tests that
  expect a rule to fire), each sent with a random transformation (encodings, case,
  whitespace, comments) in a random place of the request (query, path, form body, JSON,
  multipart, XML, cookie, header).

Nothing is picked by hand: every CRS stage is taken, and the generated sources draw from
``random.Random(seed)``, so the same seed gives the same bytes.
"""

import base64
import glob
import json
import os
import random
import re
import urllib.parse

import yaml

# The request header that carries each request's id (its marker rule logs it).
MARKER_HEADER = "X-Diff-Id"


class Request:
    """One corpus request: its raw bytes (without the marker header), where it comes
    from (``source``), what kind it is (``kind``) and a label to find it again."""

    __slots__ = ("rid", "source", "kind", "label", "raw")

    def __init__(self, source, kind, label, raw):
        self.rid = None
        self.source = source
        self.kind = kind
        self.label = label
        self.raw = raw

    def with_marker(self):
        """The bytes to send: the marker header inserted after the request line."""
        return insert_header(self.raw, f"{MARKER_HEADER}: {self.rid}".encode())

    def to_json(self):
        return {"id": self.rid, "source": self.source, "kind": self.kind,
                "label": self.label, "raw_b64": base64.b64encode(self.raw).decode()}


def insert_header(raw, line):
    """Inserts a header line right after the request line (first LF)."""
    nl = raw.find(b"\n")
    if nl < 0:
        return raw + b"\r\n" + line + b"\r\n"
    return raw[:nl + 1] + line + b"\r\n" + raw[nl + 1:]


# ---------------------------------------------------------------------------
# CRS regression tests (go-ftw format)

_BODY_METHODS = re.compile(r"^POST|PUT|PATCH|DELETE$")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _form_encode(data):
    """go-ftw's treatment of urlencoded form data: encoded pair by pair when decoding
    it would change nothing (so it was not encoded yet), else sent as written."""
    if _BAD_ESCAPE.search(data):
        return data  # Go's QueryUnescape fails: go-ftw keeps the data as it is
    if urllib.parse.unquote_plus(data) != data:
        return data
    out = []
    for token in data.split("&"):
        if "=" in token:
            k, v = token.split("=", 1)
            out.append(urllib.parse.quote_plus(k, safe="") + "=" + urllib.parse.quote_plus(v, safe=""))
        else:
            out.append(urllib.parse.quote_plus(token, safe=""))
    return "&".join(out)


def ftw_request(inp):
    """The bytes go-ftw sends for one stage input."""
    if inp.get("encoded_request"):
        return base64.b64decode(inp["encoded_request"])
    method = str(inp.get("method", "GET"))
    uri = str(inp.get("uri", "/"))
    version = str(inp.get("version", "HTTP/1.1"))
    headers = [(str(k), "" if v is None else str(v)) for k, v in (inp.get("headers") or {}).items()]
    auto = inp.get("autocomplete_headers", True)
    data = inp.get("data")
    data = "" if data is None else str(data)

    def has(name):
        return any(k.lower() == name.lower() for k, _ in headers)

    body = data.encode("utf-8")
    if data and auto:
        if not has("Content-Type"):
            headers.append(("Content-Type", "application/x-www-form-urlencoded"))
        if any(k.lower() == "content-type" and v == "application/x-www-form-urlencoded"
               for k, v in headers):
            body = _form_encode(data).encode("utf-8")
    if any(k.lower() == "content-type" and "multipart/form-data;" in v for k, v in headers):
        body = body.replace(b"\n", b"\r\n")
    if auto:
        if not has("Connection"):
            headers.append(("Connection", "close"))
        if not has("Content-Length") and (body or _BODY_METHODS.search(method)):
            headers.append(("Content-Length", str(len(body))))
    head = f"{method} {uri} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode("utf-8") + body


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CRS_CACHE = {}


def crs_tests(crs_dir):
    """(label, input, expect_ids) for every stage of every CRS regression test, in file
    order (parsed once per directory)."""
    if crs_dir not in _CRS_CACHE:
        _CRS_CACHE[crs_dir] = list(_crs_tests(crs_dir))
    return _CRS_CACHE[crs_dir]


def _crs_tests(crs_dir):
    base = os.path.join(crs_dir, "tests", "regression", "tests")
    files = sorted(glob.glob(os.path.join(base, "*", "*.yaml")))
    if not files:
        raise SystemExit(f"differential: no CRS regression tests under {base}")
    for path in files:
        with open(path, encoding="utf-8") as f:
            doc = yaml.load(f, Loader=_LOADER)
        rule = doc.get("rule_id") or os.path.basename(path).split(".")[0]
        for t in doc.get("tests") or []:
            for n, stage in enumerate(t.get("stages") or []):
                inp = stage.get("input") or {}
                out = stage.get("output") or {}
                log = out.get("log") or {}
                yield f"{rule}-{t.get('test_id')}-{n}", inp, log.get("expect_ids") or []


def crs_corpus(crs_dir):
    out = []
    for label, inp, _ in crs_tests(crs_dir):
        kind = "raw" if inp.get("encoded_request") else str(inp.get("method", "GET")).strip()[:10]
        out.append(Request("crs", kind, label, ftw_request(inp)))
    return out


# ---------------------------------------------------------------------------
# Attack payloads of the CRS tests

def _pairs(text):
    for token in text.split("&"):
        if "=" in token:
            k, v = token.split("=", 1)
        else:
            k, v = "", token
        yield urllib.parse.unquote_plus(k), urllib.parse.unquote_plus(v)


def attack_payloads(crs_dir):
    """The argument values (query and form) of the CRS tests that expect a rule to
    fire, deduplicated, in file order: the raw material of the mutated source."""
    seen, out = set(), []
    for _, inp, expect in crs_tests(crs_dir):
        if not expect or inp.get("encoded_request"):
            continue
        texts = []
        uri = str(inp.get("uri", ""))
        if "?" in uri:
            texts.append(uri.split("?", 1)[1])
        data = inp.get("data")
        ctype = " ".join(str(v) for k, v in (inp.get("headers") or {}).items()
                         if str(k).lower() == "content-type")
        if data and ("urlencoded" in ctype or not ctype):
            texts.append(str(data))
        for text in texts:
            for _, v in _pairs(text):
                if 3 <= len(v) <= 2000 and v not in seen:
                    seen.add(v)
                    out.append(v)
    return out


# ---------------------------------------------------------------------------
# Generated requests: shared pieces

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
         "zulu order item price account search page sort filter name email comment title "
         "report invoice customer product basket review city street country").split()
NON_ASCII = ["café", "naïve", "Müller", "Straße", "Ærøskøbing", "Łódź", "Ελληνικά",
             "Привет мир", "日本語のテキスト", "中文测试", "한국어", "עברית", "العربية",
             "हिन्दी", "😀 emoji", "€ 12,50", "½ cup", "São Paulo", "İstanbul", "Ññ"]
AGENTS = [
    "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/119.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.1 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, "
    "like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
    "curl/8.4.0",
    "python-requests/2.31.0",
]
LANGS = ["en-US,en;q=0.9", "de-DE,de;q=0.8,en;q=0.5", "fr-FR,fr;q=0.9", "ja,en;q=0.7",
         "zh-CN,zh;q=0.9", "pt-BR,pt;q=0.8,en-US;q=0.5"]


def _word(rng):
    return rng.choice(WORDS)


def _text(rng, non_ascii=0.2):
    n = rng.randint(1, 8)
    parts = []
    for _ in range(n):
        parts.append(rng.choice(NON_ASCII) if rng.random() < non_ascii else _word(rng))
    s = " ".join(parts)
    r = rng.random()
    if r < 0.15:
        s = s.capitalize() + "."
    elif r < 0.25:
        s += rng.choice(["!", "?", ",", " - ok", " (2)", " & more", ": yes"])
    return s


def _value(rng):
    r = rng.random()
    if r < 0.25:
        return str(rng.randint(0, 10 ** rng.randint(1, 9)))
    if r < 0.35:
        return f"{_word(rng)}.{_word(rng)}{rng.randint(1, 99)}@example.{rng.choice(['com', 'org', 'de'])}"
    if r < 0.45:
        return f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/{rng.randint(1990, 2030)}"
    if r < 0.5:
        return rng.choice(["true", "false", "on", "yes", "no", ""])
    if r < 0.55:
        return f"https://www.example.com/{_word(rng)}/{rng.randint(1, 999)}"
    return _text(rng)


def _name(rng):
    r = rng.random()
    if r < 0.7:
        return _word(rng)
    if r < 0.85:
        return f"{_word(rng)}_{_word(rng)}"
    if r < 0.95:
        return f"{_word(rng)}[{rng.choice(['', str(rng.randint(0, 9)), _word(rng)])}]"
    return f"{_word(rng)}{rng.randint(1, 99)}"


def _path(rng):
    depth = rng.randint(0, 4)
    segs = [_word(rng) for _ in range(depth)]
    p = "/" + "/".join(segs)
    r = rng.random()
    if r < 0.3 and depth:
        p += rng.choice([".php", ".html", ".json", "/", ".aspx", ".jsp"])
    return p


def _quote(rng, s, full=None):
    """Percent-encodes a query/form value: fully (quote_plus), or only what cannot be
    sent raw in a request target (space, &, =, #, %, +, controls, non-ASCII)."""
    if full is None:
        full = rng.random() < 0.6
    if full:
        return urllib.parse.quote_plus(s, safe="")
    out = []
    for ch in s:
        o = ord(ch)
        if ch in " &=#%+;" or o < 0x21 or o == 0x7f or o > 0x7e:
            out.append(urllib.parse.quote(ch, safe=""))
        else:
            out.append(ch)
    return "".join(out)


def _query(rng, pairs, full=None):
    return "&".join(f"{_quote(rng, k, full)}={_quote(rng, v, full)}" for k, v in pairs)


def _base_headers(rng):
    h = [("Host", rng.choice(["localhost", "www.example.com", "shop.example.org"])),
         ("User-Agent", rng.choice(AGENTS)),
         ("Accept", rng.choice(["*/*", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
                                "application/json", "application/json, text/plain, */*"]))]
    if rng.random() < 0.7:
        h.append(("Accept-Language", rng.choice(LANGS)))
    if rng.random() < 0.6:
        h.append(("Accept-Encoding", rng.choice(["gzip, deflate", "gzip, deflate, br", "identity"])))
    if rng.random() < 0.4:
        cookies = "; ".join(f"{_name(rng)}={rng.choice([str(rng.randint(1, 99999)), _word(rng), 'abc' + str(rng.random())[2:12]])}"
                            for _ in range(rng.randint(1, 4)))
        h.append(("Cookie", cookies))
    if rng.random() < 0.3:
        h.append(("Referer", f"https://www.example.com{_path(rng)}"))
    if rng.random() < 0.1:
        h.append(("X-Requested-With", "XMLHttpRequest"))
    return h


def build(method, target, headers, body=b"", version="HTTP/1.1"):
    """Raw request bytes; a Content-Length is added for a body (or a body method)."""
    headers = list(headers)
    if body or method in ("POST", "PUT", "PATCH"):
        headers.append(("Content-Length", str(len(body))))
    headers.append(("Connection", "close"))
    head = f"{method} {target} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode("utf-8") + body


def _json_value(rng, depth=0):
    r = rng.random()
    if depth < 3 and r < 0.15:
        return {_name(rng): _json_value(rng, depth + 1) for _ in range(rng.randint(1, 4))}
    if depth < 3 and r < 0.25:
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if r < 0.4:
        return rng.randint(-1000, 100000)
    if r < 0.45:
        return round(rng.uniform(-100, 1000), 2)
    if r < 0.5:
        return rng.choice([True, False, None])
    return _value(rng)


def _xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _multipart(rng, fields, files):
    """A multipart/form-data body: (boundary, bytes)."""
    boundary = rng.choice(["----WebKitFormBoundary", "---------------------------", "----formdata-"]) + \
        "".join(rng.choice("0123456789abcdefABCDEF") for _ in range(16))
    out = b""
    for k, v in fields:
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n").encode() + \
            v.encode("utf-8") + b"\r\n"
    for k, (fname, ctype, data) in files:
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"; filename=\"{fname}\"\r\n"
                f"Content-Type: {ctype}\r\n\r\n").encode("utf-8") + data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return boundary, out


def _file(rng):
    r = rng.random()
    if r < 0.4:
        return (f"{_word(rng)}.txt", "text/plain", _text(rng).encode("utf-8") + b"\n")
    if r < 0.7:
        n = rng.randint(16, 600)
        return (f"{_word(rng)}.png", "image/png",
                b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(n)))
    if r < 0.85:
        rows = "\n".join(",".join(_word(rng) for _ in range(4)) for _ in range(rng.randint(1, 6)))
        return (f"{_word(rng)}.csv", "text/csv", rows.encode())
    return (f"{_word(rng)}.pdf", "application/pdf",
            b"%PDF-1.4\n" + bytes(rng.randrange(256) for _ in range(rng.randint(16, 300))))


# ---------------------------------------------------------------------------
# Benign traffic

def benign_request(rng):
    kind = rng.choices(["get", "form", "json", "multipart", "xml", "utf8-raw", "head-options"],
                       weights=[30, 20, 20, 12, 8, 6, 4])[0]
    h = _base_headers(rng)
    pairs = [(_name(rng), _value(rng)) for _ in range(rng.randint(0, 6))]
    path = _path(rng)
    if kind == "get":
        target = path + ("?" + _query(rng, pairs) if pairs else "")
        return kind, build("GET", target, h)
    if kind == "utf8-raw":
        # A client that sends non-ASCII raw in the request target (no percent-encoding).
        pairs.append((_name(rng), rng.choice(NON_ASCII)))
        target = path + "?" + "&".join(f"{k}={v.replace(' ', '+').replace('&', '%26')}" for k, v in pairs)
        return kind, build("GET", target, h)
    if kind == "head-options":
        return kind, build(rng.choice(["HEAD", "OPTIONS"]), path, h)
    method = rng.choice(["POST", "POST", "POST", "PUT", "PATCH"])
    if kind == "form":
        if not pairs:
            pairs = [(_name(rng), _value(rng))]
        body = _query(rng, pairs, full=True).encode()
        ct = "application/x-www-form-urlencoded" + rng.choice(["", "; charset=UTF-8"])
        return kind, build(method, path, h + [("Content-Type", ct)], body)
    if kind == "json":
        doc = {_name(rng): _json_value(rng) for _ in range(rng.randint(1, 8))}
        if rng.random() < 0.15:
            doc = [doc, {_name(rng): _json_value(rng)}]
        body = json.dumps(doc, ensure_ascii=rng.random() < 0.3).encode("utf-8")
        ct = rng.choice(["application/json", "application/json; charset=utf-8"])
        return kind, build(method, path, h + [("Content-Type", ct)], body)
    if kind == "multipart":
        files = [(_name(rng), _file(rng)) for _ in range(rng.randint(0, 2))]
        boundary, body = _multipart(rng, pairs, files)
        return kind, build("POST", path, h + [("Content-Type", f"multipart/form-data; boundary={boundary}")], body)
    # xml
    root = _word(rng)
    items = []
    for k, v in pairs or [(_word(rng), _value(rng))]:
        tag = re.sub(r"[^A-Za-z0-9_]", "_", k)
        if rng.random() < 0.3:
            items.append(f'<{tag} id="{rng.randint(1, 999)}">{_xml_escape(v)}</{tag}>')
        else:
            items.append(f"<{tag}>{_xml_escape(v)}</{tag}>")
    doc = f"<{root}>{''.join(items)}</{root}>"
    if rng.random() < 0.4:
        doc = ('<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>'
               + doc + "</soap:Body></soap:Envelope>")
    doc = '<?xml version="1.0" encoding="UTF-8"?>\n' + doc
    ct = rng.choice(["application/xml", "text/xml; charset=utf-8", "application/soap+xml"])
    return kind, build("POST", path, h + [("Content-Type", ct)], doc.encode("utf-8"))


# ---------------------------------------------------------------------------
# Mutated attacks

def _rand_case(rng, s):
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in s)


TRANSFORMS = ["identity", "upper", "random-case", "ws-tab", "ws-newline", "ws-multi",
              "ws-comment", "urlencode", "double-urlencode", "unicode-u", "html-entity",
              "padding", "nul-byte", "hex-escape"]


def transform(rng, name, s):
    """One transformation of a payload (the value the application would receive)."""
    if name == "identity":
        return s
    if name == "upper":
        return s.upper()
    if name == "random-case":
        return _rand_case(rng, s)
    if name == "ws-tab":
        return s.replace(" ", "\t")
    if name == "ws-newline":
        return s.replace(" ", "\n")
    if name == "ws-multi":
        return re.sub(" ", lambda _: " " * rng.randint(2, 5), s)
    if name == "ws-comment":
        return s.replace(" ", "/**/")
    if name == "urlencode":
        return "".join(f"%{b:02X}" for b in s.encode("utf-8"))
    if name == "double-urlencode":
        return "".join(f"%25{b:02X}" for b in s.encode("utf-8"))
    if name == "unicode-u":
        return "".join(f"%u{ord(c):04X}" if ord(c) < 0x10000 and not c.isalnum() else c for c in s)
    if name == "html-entity":
        return "".join(f"&#x{ord(c):x};" if not c.isalnum() else c for c in s)
    if name == "padding":
        return _text(rng, 0.1) + " " + s + " " + _text(rng, 0.1)
    if name == "nul-byte":
        return s + "\x00" + _word(rng)
    if name == "hex-escape":
        return "".join(f"\\x{ord(c):02x}" if not c.isalnum() and ord(c) < 0x80 else c for c in s)
    raise ValueError(name)


PLACEMENTS = ["query", "query-name", "path", "form", "json", "json-key", "multipart",
              "multipart-filename", "xml", "xml-attr", "cookie", "user-agent", "referer",
              "header", "query-raw"]


def _header_safe(s):
    """A header value cannot hold CR, LF or NUL: those are percent-encoded."""
    return s.replace("\r", "%0D").replace("\n", "%0A").replace("\x00", "%00")


def mutated_request(rng, payload):
    t = rng.choice(TRANSFORMS)
    p = rng.choice(PLACEMENTS)
    v = transform(rng, t, payload)
    h = _base_headers(rng)
    pairs = [(_name(rng), _value(rng)) for _ in range(rng.randint(0, 3))]
    path = _path(rng)
    name = _name(rng)
    kind = f"{t}/{p}"

    def with_pairs(k, val):
        out = list(pairs)
        out.insert(rng.randint(0, len(out)), (k, val))
        return out

    if p == "query":
        return kind, build("GET", path + "?" + _query(rng, with_pairs(name, v)), h)
    if p == "query-name":
        return kind, build("GET", path + "?" + _query(rng, with_pairs(v, _value(rng))), h)
    if p == "query-raw":
        # The whole query string is the payload, with only what cannot travel encoded.
        return kind, build("GET", path + "?" + _quote(rng, v, full=False), h)
    if p == "path":
        seg = urllib.parse.quote(v, safe="" if rng.random() < 0.5 else "/'\"<>()=;,:!*$@")
        return kind, build("GET", path.rstrip("/") + "/" + seg, h)
    if p == "cookie":
        cv = urllib.parse.quote(v, safe="") if rng.random() < 0.5 else _header_safe(v).replace(";", "%3B")
        h = [x for x in h if x[0] != "Cookie"] + [("Cookie", f"{name}={cv}")]
        return kind, build("GET", path, h)
    if p in ("user-agent", "referer", "header"):
        hn = {"user-agent": "User-Agent", "referer": "Referer"}.get(p, "X-" + _word(rng).capitalize())
        h = [x for x in h if x[0] != hn] + [(hn, _header_safe(v))]
        return kind, build("GET", path, h)
    method = rng.choice(["POST", "POST", "PUT"])
    if p == "form":
        body = _query(rng, with_pairs(name, v)).encode("utf-8")
        return kind, build(method, path, h + [("Content-Type", "application/x-www-form-urlencoded")], body)
    if p in ("json", "json-key"):
        doc = {k: val for k, val in pairs}
        if p == "json":
            target = doc
            if rng.random() < 0.3:
                target = doc.setdefault(_word(rng), {})
                if not isinstance(target, dict):
                    target = doc
            target[name] = v if rng.random() < 0.8 else [v]
        else:
            doc[v] = _value(rng)
        body = json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode("utf-8")
        return kind, build(method, path, h + [("Content-Type", "application/json")], body)
    if p in ("multipart", "multipart-filename"):
        if p == "multipart":
            boundary, body = _multipart(rng, with_pairs(name, v), [])
        else:
            fname = v.replace('"', "%22").replace("\r", "").replace("\n", "")
            boundary, body = _multipart(rng, pairs, [(name, (fname, "text/plain", b"data\n"))])
        return kind, build("POST", path, h + [("Content-Type", f"multipart/form-data; boundary={boundary}")], body)
    # xml, xml-attr
    tag = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if p == "xml":
        doc = f"<root><{tag}>{_xml_escape(v)}</{tag}></root>"
    else:
        doc = f'<root><{tag} value="{_xml_escape(v)}"/></root>'
    ct = rng.choice(["application/xml", "text/xml"])
    return kind, build("POST", path, h + [("Content-Type", ct)], doc.encode("utf-8"))


# ---------------------------------------------------------------------------

def corpus(crs_dir, seed, benign=3000, mutated=4000):
    """The whole corpus, ids assigned in order (d000001, ...)."""
    rng = random.Random(seed)
    reqs = crs_corpus(crs_dir)
    for i in range(benign):
        kind, raw = benign_request(rng)
        reqs.append(Request("benign", kind, f"benign-{i}", raw))
    payloads = attack_payloads(crs_dir)
    if not payloads:
        raise SystemExit("differential: no attack payloads found in the CRS tests")
    for i in range(mutated):
        payload = rng.choice(payloads)
        kind, raw = mutated_request(rng, payload)
        reqs.append(Request("mutated", kind, f"mutated-{i}", raw))
    for n, r in enumerate(reqs, 1):
        r.rid = f"d{n:06d}"
    return reqs


def sample(reqs, n, seed):
    """A fixed-seed sample of n requests with each source in proportion (at least one
    of each), in corpus order."""
    if n >= len(reqs):
        return list(reqs)
    rng = random.Random(seed ^ 0x5A5A)
    by_src = {}
    for r in reqs:
        by_src.setdefault(r.source, []).append(r)
    picked = []
    for src, items in by_src.items():
        k = max(1, round(n * len(items) / len(reqs)))
        picked += rng.sample(items, min(k, len(items)))
    order = {r.rid: i for i, r in enumerate(reqs)}
    return sorted(picked, key=lambda r: order[r.rid])
