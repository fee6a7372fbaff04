#!/usr/bin/env python3
"""Writes the varying benchmark corpus: benign HTTP/1.1 requests drawn from a fixed seed.

    python3 bench/gen_varying.py [--out DIR] [--count N] [--seed S]

The fixed corpus of bench/corpus/ sends the same few requests again and again; real
traffic varies. This generator draws `--count` (default 10,000) distinct requests from
distributions meant to look like a shop's traffic: browsers and their versions (Firefox,
Chrome, Safari, Edge; desktop and mobile), language preferences, pages, static assets and
API routes with ids and slugs, query strings, cookies (sessions, consent, analytics-like
ids), referers; urlencoded and multipart forms (with a small file part) and JSON API calls
from a few hundred bytes up to about 64 KiB.

The requests are benign: none may be blocked by CRS v4 at paranoia level 1 (the engine
benchmark checks it: `PALISADE_BENCH_VARYING=check`, see crates/engine/benches/
transaction.rs). Values are realistic but never attack-like.

Output (default: target/bench-corpus/varying/ under the repository, not committed):
  NNNNN.http      one raw request per file, sent verbatim by wrk
  manifest.tsv    a stamp line, then one line per request: file, kind, size in bytes
Kinds: get-page, get-asset, get-api, form, multipart, json.

The output depends only on the seed, the count and this file: the same arguments give
the same bytes. A directory whose stamp matches is left as it is.
"""

import argparse
import hashlib
import json
import os
import random
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_OUT = os.path.join(REPO, "target", "bench-corpus", "varying")
DEFAULT_SEED = 20250611
DEFAULT_COUNT = 10000

# Share of each kind of request (they add up to 100).
KINDS = [
    ("get-page", 36),
    ("get-asset", 24),
    ("get-api", 15),
    ("form", 8),
    ("multipart", 3),
    ("json", 14),
]

# --- Vocabulary -------------------------------------------------------------------------

HOSTS = ["www.northwind-outfitters.test", "shop.lindqvist-design.test",
         "store.kestrel-audio.test", "www.marisol-books.test"]
CATEGORIES = ["shoes", "jackets", "backpacks", "headphones", "speakers", "novels",
              "cookbooks", "lamps", "chairs", "rugs", "tents", "bicycles", "watches",
              "kettles", "gloves", "scarves", "notebooks", "puzzles"]
ADJECTIVES = ["classic", "compact", "waterproof", "wireless", "organic", "vintage",
              "lightweight", "merino", "oak", "linen", "recycled", "foldable", "studio",
              "alpine", "coastal", "midnight", "sunrise", "walnut", "granite", "velvet"]
NOUNS = ["runner", "parka", "daypack", "earbuds", "soundbar", "lantern", "armchair",
         "throw", "shelter", "roadster", "chronograph", "teapot", "mittens", "journal",
         "jigsaw", "sneaker", "hoodie", "cardigan", "duffel", "tumbler"]
COLOURS = ["black", "white", "navy", "olive", "sand", "burgundy", "grey", "teal",
           "mustard", "coral"]
SORTS = ["price_asc", "price_desc", "newest", "rating", "popular", "relevance"]
FIRST = ["Emma", "Liam", "Sofia", "Noah", "Mia", "Lucas", "Hannah", "Mateo", "Chloe",
         "Jonas", "Amelie", "Oskar", "Ines", "Tomasz", "Yuki", "Priya", "Daniel", "Freya",
         "Marta", "Henrik", "Aisha", "Pablo", "Nora", "Felix"]
LAST = ["Becker", "Moreau", "Rossi", "Nowak", "Jansen", "Svensson", "Tanaka", "Garcia",
        "Kowalski", "Fischer", "Dubois", "Lindgren", "Costa", "Novak", "Okafor", "Haddad",
        "Murphy", "Virtanen", "Schulz", "Ferreira"]
MAIL_DOMAINS = ["mailbox.test", "post.invalid", "inbox.test", "webmail.invalid"]
CITIES = [("Hamburg", "DE", "20095"), ("Lyon", "FR", "69002"), ("Turin", "IT", "10121"),
          ("Utrecht", "NL", "3511"), ("Gothenburg", "SE", "41101"), ("Krakow", "PL", "31-042"),
          ("Porto", "PT", "4050-123"), ("Valencia", "ES", "46001"), ("Leeds", "GB", "LS1 4DY"),
          ("Denver", "US", "80202"), ("Osaka", "JP", "530-0001"), ("Graz", "AT", "8010")]
STREETS = ["Lindenweg", "Rue des Tanneurs", "Via Garibaldi", "Oudegracht", "Kungsgatan",
           "Ulica Florianska", "Rua das Flores", "Calle de la Paz", "Briggate",
           "Larimer Street", "Midosuji", "Sporgasse"]
TOPICS = ["shipping", "returns", "payment-methods", "gift-cards", "size-guide",
          "warranty", "track-order", "contact"]
BLOG = ["care-guide-for-wool", "packing-for-a-weekend-hike", "choosing-studio-headphones",
        "ten-reading-nooks", "how-we-source-our-oak", "autumn-lookbook",
        "repair-cafe-report", "behind-the-workshop", "caring-for-leather-boots"]
# Prose for messages and descriptions: plain sentences (no quotes, no operators).
SENTENCES = [
    "The parcel arrived two days early and everything was packed with care",
    "Could you tell me whether the navy version comes back in stock next month",
    "My daughter loves the puzzle and we finished it over the holidays",
    "The strap is a little shorter than I expected but the quality is great",
    "Please send the invoice to my work address as well",
    "We would like to order twelve mugs for our office kitchen",
    "The colour matches the photos very well",
    "I changed my mind about the size and would like to exchange it for a medium",
    "Is there a discount for members of the running club",
    "Delivery to the pickup point near the station would be perfect",
    "The lamp gives a warm light and fits nicely on the bedside table",
    "Thank you for answering so quickly last time",
    "The zip on the left pocket feels stiff after a week of use",
    "Do you ship to the islands and how long does it take",
    "Lovely fabric and very comfortable on long walks",
    "I would recommend the lighter model for travelling",
    "Our team needs an invoice with the company name on it",
    "The chair was easy to assemble in about twenty minutes",
    "Could the gift wrapping include a handwritten card",
    "The sound is clear even at low volume",
]
SEARCH_WORDS = ["rain jacket", "wool socks", "bluetooth speaker", "reading lamp",
                "hiking boots", "green tea", "desk chair", "travel mug", "yoga mat",
                "kids puzzle", "winter gloves", "linen shirt", "oak shelf", "noise cancelling",
                "camping stove", "cotton tote", "running shoes", "wall clock"]
LOCALES = [
    ("en-US", ["en"], 30), ("en-GB", ["en"], 10), ("de-DE", ["de", "en-US", "en"], 14),
    ("fr-FR", ["fr", "en-US", "en"], 9), ("es-ES", ["es", "en"], 7), ("it-IT", ["it", "en"], 5),
    ("nl-NL", ["nl", "en-US", "en"], 5), ("pt-BR", ["pt", "en-US", "en"], 6),
    ("pl-PL", ["pl", "en"], 4), ("sv-SE", ["sv", "en"], 3), ("ja-JP", ["ja", "en-US", "en"], 4),
    ("tr-TR", ["tr", "en"], 3),
]
SEARCH_ENGINES = ["https://www.google.com/", "https://www.bing.com/", "https://duckduckgo.com/",
                  "https://www.ecosia.org/", "https://search.brave.com/"]


class Gen:
    """All draws go through one seeded `random.Random`."""

    def __init__(self, seed):
        self.r = random.Random(seed)

    def pick(self, seq):
        return self.r.choice(seq)

    def weighted(self, pairs):
        items = [p[0] for p in pairs]
        weights = [p[-1] for p in pairs]
        return self.r.choices(items, weights)[0]

    def hexid(self, n):
        return "".join(self.r.choice("0123456789abcdef") for _ in range(n))

    def b64id(self, n):
        """A base64url token. Never with "--": after a digit it reads as an SQL comment
        to CRS's SQL injection detection (a real site would see that false positive)."""
        abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        out = []
        while len(out) < n:
            c = self.r.choice(abc)
            if c == "-" and out and out[-1] == "-":
                continue
            out.append(c)
        return "".join(out)

    def uuid(self):
        h = self.hexid(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{self.pick('89ab')}{h[17:20]}-{h[20:]}"

    def slug(self):
        return f"{self.pick(ADJECTIVES)}-{self.pick(COLOURS)}-{self.pick(NOUNS)}"

    def prose(self, lo, hi):
        n = self.r.randint(lo, hi)
        if n == 0:
            return ""
        return ". ".join(self.pick(SENTENCES) for _ in range(n)) + "."

    def person(self):
        first, last = self.pick(FIRST), self.pick(LAST)
        mail = f"{first.lower()}.{last.lower()}{self.r.randint(1, 99)}@{self.pick(MAIL_DOMAINS)}"
        return first, last, mail

    # --- Clients --------------------------------------------------------------------------

    def browser(self):
        """A browser profile: user agent, navigation Accept, client hints, encodings."""
        kind = self.weighted([("chrome-desktop", 34), ("chrome-android", 20),
                              ("safari-iphone", 16), ("safari-mac", 6), ("firefox-desktop", 9),
                              ("firefox-android", 2), ("edge-desktop", 10), ("safari-ipad", 3)])
        r = self.r
        chrome_accept = ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,"
                         "image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7")
        ff_accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        hints = []
        if kind in ("chrome-desktop", "chrome-android", "edge-desktop"):
            major = r.randint(112, 131)
            plat = self.pick([
                "Windows NT 10.0; Win64; x64", "Macintosh; Intel Mac OS X 10_15_7",
                "X11; Linux x86_64"]) if kind != "chrome-android" else (
                f"Linux; Android {r.randint(10, 14)}; K")
            mobile = " Mobile" if kind == "chrome-android" else ""
            ua = (f"Mozilla/5.0 ({plat}) AppleWebKit/537.36 (KHTML, like Gecko) "
                  f"Chrome/{major}.0.0.0{mobile} Safari/537.36")
            brand = "Google Chrome"
            if kind == "edge-desktop":
                ua += f" Edg/{major}.0.{r.randint(1000, 2900)}.{r.randint(10, 99)}"
                brand = "Microsoft Edge"
            grease = self.pick(['"Not_A Brand";v="8"', '"Not/A)Brand";v="24"',
                                '"Not?A_Brand";v="99"'])
            hints = [("sec-ch-ua", f'"Chromium";v="{major}", "{brand}";v="{major}", {grease}'),
                     ("sec-ch-ua-mobile", "?1" if mobile else "?0"),
                     ("sec-ch-ua-platform", '"Android"' if mobile else (
                         '"Windows"' if "Windows" in plat else
                         '"macOS"' if "Mac" in plat else '"Linux"'))]
            accept = chrome_accept
            enc = "gzip, deflate, br, zstd" if major >= 123 else "gzip, deflate, br"
        elif kind.startswith("firefox"):
            v = r.randint(115, 133)
            plat = {"firefox-desktop": self.pick(["Windows NT 10.0; Win64; x64",
                                                  "Macintosh; Intel Mac OS X 10.15",
                                                  "X11; Ubuntu; Linux x86_64",
                                                  "X11; Linux x86_64"]),
                    "firefox-android": f"Android {r.randint(11, 14)}; Mobile"}[kind]
            ua = f"Mozilla/5.0 ({plat}; rv:{v}.0) Gecko/20100101 Firefox/{v}.0"
            accept = ff_accept
            enc = "gzip, deflate, br, zstd" if v >= 126 else "gzip, deflate, br"
        else:
            major = r.randint(15, 18)
            minor = r.randint(0, 6)
            if kind == "safari-mac":
                plat = "Macintosh; Intel Mac OS X 10_15_7"
                tail = f"Version/{major}.{minor} Safari/605.1.15"
            else:
                dev = "iPhone; CPU iPhone OS" if kind == "safari-iphone" else "iPad; CPU OS"
                plat = f"{dev} {major}_{minor} like Mac OS X"
                tail = f"Version/{major}.{minor} Mobile/15E148 Safari/604.1"
            ua = f"Mozilla/5.0 ({plat}) AppleWebKit/605.1.15 (KHTML, like Gecko) {tail}"
            accept = ff_accept
            enc = "gzip, deflate, br"
        return {"kind": kind, "ua": ua, "accept": accept, "hints": hints, "enc": enc}

    def accept_language(self, chrome_style):
        tag, rest, _ = self.r.choices(LOCALES, [w for _, _, w in LOCALES])[0]
        parts = [tag]
        for lang in rest[: self.r.randint(0, len(rest))]:
            if lang != tag:
                parts.append(lang)
        if len(parts) == 1:
            return tag if self.r.random() < 0.3 else f"{tag},{tag.split('-')[0]};q=0.9"
        qs = [0.9, 0.8, 0.7, 0.6] if chrome_style else [0.7, 0.5, 0.3, 0.2]
        return ",".join([parts[0]] + [f"{p};q={qs[i]}" for i, p in enumerate(parts[1:])])

    def cookies(self):
        c = []
        if self.r.random() < 0.85:
            c.append((self.pick(["sid", "session_id", "SESSION", "shop_session"]),
                      self.pick([self.hexid(32), self.b64id(43), self.hexid(24)])))
        if self.r.random() < 0.7:
            c.append(("cookie_consent", self.pick(["all", "necessary", "necessary.analytics",
                                                    "v2.functional.analytics"])))
        if self.r.random() < 0.6:
            t = self.r.randint(1690000000, 1735000000)
            c.append(("_ga", f"GA1.1.{self.r.randint(100000000, 2147483647)}.{t}"))
            if self.r.random() < 0.5:
                c.append((f"_ga_{self.b64id(10).upper().replace('-', 'Q').replace('_', 'Z')}",
                          f"GS1.1.{t + self.r.randint(0, 9000000)}.{self.r.randint(1, 40)}.1."
                          f"{t + self.r.randint(0, 9000000)}.0.0.0"))
        if self.r.random() < 0.3:
            c.append(("_fbp", f"fb.1.{self.r.randint(1690000000000, 1735000000000)}."
                              f"{self.r.randint(100000000, 999999999)}"))
        if self.r.random() < 0.4:
            c.append(("cart", self.uuid()))
        if self.r.random() < 0.3:
            c.append(("theme", self.pick(["light", "dark", "auto"])))
        if self.r.random() < 0.3:
            c.append(("currency", self.pick(["EUR", "USD", "GBP", "SEK", "PLN", "JPY"])))
        self.r.shuffle(c)
        return "; ".join(f"{k}={v}" for k, v in c)

    def page_path(self):
        r = self.r
        k = self.weighted([("home", 8), ("product", 30), ("category", 22), ("search", 12),
                           ("blog", 8), ("help", 6), ("account", 8), ("cart", 6)])
        if k == "home":
            path = self.pick(["/", "/en/", "/de/", "/fr/", "/new-arrivals", "/sale"])
        elif k == "product":
            path = f"/products/{self.pick(CATEGORIES)}/{self.slug()}-{r.randint(1000, 99999)}"
        elif k == "category":
            path = f"/c/{self.pick(CATEGORIES)}"
        elif k == "search":
            path = "/search"
        elif k == "blog":
            path = f"/journal/{r.randint(2019, 2025)}/{r.randint(1, 12):02d}/{self.pick(BLOG)}"
        elif k == "help":
            path = f"/help/{self.pick(TOPICS)}"
        elif k == "account":
            path = self.pick(["/account", "/account/orders", "/account/addresses",
                              f"/account/orders/{r.randint(100000, 999999)}", "/account/wishlist"])
        else:
            path = self.pick(["/cart", "/checkout/shipping", "/checkout/payment"])
        q = []
        if k == "search":
            q.append(("q", self.pick(SEARCH_WORDS)))
            if r.random() < 0.4:
                q.append(("page", str(r.randint(2, 9))))
        if k == "category":
            if r.random() < 0.7:
                q.append(("sort", self.pick(SORTS)))
            if r.random() < 0.5:
                q.append(("colour", self.pick(COLOURS)))
            if r.random() < 0.4:
                lo = r.randint(1, 20) * 5
                q += [("price_min", str(lo)), ("price_max", str(lo + r.randint(2, 40) * 5))]
            if r.random() < 0.4:
                q.append(("page", str(r.randint(2, 14))))
        if k == "product" and r.random() < 0.3:
            q.append(("variant", str(r.randint(10000000, 99999999))))
        if r.random() < 0.15:
            q += [("utm_source", self.pick(["newsletter", "instagram", "partner", "google"])),
                  ("utm_medium", self.pick(["email", "social", "cpc", "referral"])),
                  ("utm_campaign", self.pick(["spring_sale", "autumn24", "welcome", "restock"]))]
        if r.random() < 0.05:
            q.append(("gclid", self.b64id(r.randint(60, 90))))
        return path + ("?" + urllib.parse.urlencode(q) if q else "")

    def referer(self, host):
        r = self.r.random()
        if r < 0.55:
            return f"https://{host}{self.page_path()}"
        if r < 0.75:
            return self.pick(SEARCH_ENGINES)
        return None

    def base_headers(self, host, b, nav):
        h = [("Host", host), ("User-Agent", b["ua"])]
        h += b["hints"]
        return h

    # --- Requests -------------------------------------------------------------------------

    def get_page(self, host, b):
        h = self.base_headers(host, b, True)
        h += [("Accept", b["accept"]),
              ("Accept-Language", self.accept_language(b["kind"] != "firefox-desktop")),
              ("Accept-Encoding", b["enc"])]
        ref = self.referer(host)
        if ref:
            h.append(("Referer", ref))
        cookie = self.cookies()
        if cookie:
            h.append(("Cookie", cookie))
        h += [("Upgrade-Insecure-Requests", "1"), ("Sec-Fetch-Dest", "document"),
              ("Sec-Fetch-Mode", "navigate"),
              ("Sec-Fetch-Site", "same-origin" if ref and host in ref else "none"),
              ("Sec-Fetch-User", "?1"), ("Connection", "keep-alive")]
        return "GET", self.page_path(), h, b""

    def get_asset(self, host, b):
        r = self.r
        k = self.weighted([("js", 25), ("css", 15), ("img", 45), ("font", 8), ("icon", 7)])
        if k == "js":
            path = f"/static/js/{self.pick(['app', 'vendor', 'checkout', 'gallery', 'runtime'])}.{self.hexid(8)}.js"
            accept, dest = "*/*", "script"
        elif k == "css":
            path = f"/static/css/{self.pick(['main', 'theme', 'print', 'product'])}.{self.hexid(8)}.css"
            accept, dest = "text/css,*/*;q=0.1", "style"
        elif k == "img":
            w = self.pick([160, 320, 480, 640, 960, 1280])
            path = (f"/images/{self.pick(CATEGORIES)}/{self.slug()}-{r.randint(1, 6)}"
                    f"-{w}w.{self.pick(['webp', 'jpg', 'avif', 'png'])}")
            if r.random() < 0.3:
                path += f"?v={r.randint(1, 40)}"
            accept, dest = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8", "image"
        elif k == "font":
            path = f"/static/fonts/{self.pick(['inter', 'lora', 'source-sans'])}-{self.pick(['regular', 'bold', 'italic'])}.woff2"
            accept, dest = "font/woff2;q=1.0,application/font-woff;q=0.9,*/*;q=0.8", "font"
        else:
            path = self.pick(["/favicon.ico", "/apple-touch-icon.png", "/site.webmanifest",
                              "/favicon-32x32.png"])
            accept, dest = "image/avif,image/webp,*/*", "image"
        h = self.base_headers(host, b, False)
        h += [("Accept", accept),
              ("Accept-Language", self.accept_language(b["kind"] != "firefox-desktop")),
              ("Accept-Encoding", b["enc"]),
              ("Referer", f"https://{host}{self.page_path()}")]
        cookie = self.cookies()
        if cookie and r.random() < 0.8:
            h.append(("Cookie", cookie))
        h += [("Sec-Fetch-Dest", dest), ("Sec-Fetch-Mode", "no-cors" if dest != "font" else "cors"),
              ("Sec-Fetch-Site", "same-origin"), ("Connection", "keep-alive")]
        return "GET", path, h, b""

    def api_headers(self, host, b, content_type=None):
        h = self.base_headers(host, b, False)
        h += [("Accept", self.pick(["application/json", "application/json, text/plain, */*"])),
              ("Accept-Language", self.accept_language(b["kind"] != "firefox-desktop")),
              ("Accept-Encoding", b["enc"])]
        if content_type:
            h.append(("Content-Type", content_type))
        if self.r.random() < 0.5:
            h.append(("X-Requested-With", "XMLHttpRequest"))
        if self.r.random() < 0.4:
            h.append(("X-CSRF-Token", self.b64id(43)))
        h.append(("Origin", f"https://{host}"))
        h.append(("Referer", f"https://{host}{self.page_path()}"))
        cookie = self.cookies()
        if cookie:
            h.append(("Cookie", cookie))
        h += [("Sec-Fetch-Dest", "empty"), ("Sec-Fetch-Mode", "cors"),
              ("Sec-Fetch-Site", "same-origin"), ("Connection", "keep-alive")]
        return h

    def get_api(self, host, b):
        r = self.r
        v = self.pick(["v1", "v2"])
        k = self.weighted([("product", 30), ("list", 25), ("orders", 12), ("stock", 12),
                           ("reviews", 12), ("suggest", 9)])
        if k == "product":
            path = f"/api/{v}/products/{r.randint(1000, 99999)}"
        elif k == "list":
            q = [("category", self.pick(CATEGORIES)), ("limit", str(self.pick([12, 24, 48]))),
                 ("offset", str(r.randint(0, 20) * 12))]
            if r.random() < 0.5:
                q.append(("sort", self.pick(SORTS)))
            path = f"/api/{v}/products?" + urllib.parse.urlencode(q)
        elif k == "orders":
            path = (f"/api/{v}/users/{self.uuid()}/orders?"
                    + urllib.parse.urlencode([("limit", "20"), ("page", str(r.randint(1, 5)))]))
        elif k == "stock":
            ids = ",".join(str(r.randint(1000, 99999)) for _ in range(r.randint(1, 8)))
            path = f"/api/{v}/stock?" + urllib.parse.urlencode([("ids", ids)])
        elif k == "reviews":
            path = (f"/api/{v}/products/{r.randint(1000, 99999)}/reviews?"
                    + urllib.parse.urlencode([("page", str(r.randint(1, 6))),
                                              ("lang", self.pick(LOCALES)[0][:2])]))
        else:
            word = self.pick(SEARCH_WORDS)
            path = f"/api/{v}/suggest?" + urllib.parse.urlencode(
                [("q", word[: r.randint(3, len(word))].strip())])
        return "GET", path, self.api_headers(host, b), b""

    def form(self, host, b):
        r = self.r
        first, last, mail = self.person()
        city, country, postcode = self.pick(CITIES)
        k = self.weighted([("login", 25), ("contact", 20), ("address", 25), ("newsletter", 15),
                           ("review", 15)])
        csrf = ("csrf_token", self.b64id(43))
        if k == "login":
            pw = self.b64id(r.randint(10, 20)).replace("-", "").replace("_", "")
            fields = [csrf, ("email", mail), ("password", pw),
                      ("remember_me", self.pick(["on", "1"])), ("next", "/account")]
            path = "/account/login"
        elif k == "contact":
            fields = [csrf, ("name", f"{first} {last}"), ("email", mail),
                      ("topic", self.pick(TOPICS)),
                      ("order_number", str(r.randint(100000, 999999))),
                      ("message", self.prose(1, 12))]
            path = "/help/contact"
        elif k == "address":
            fields = [csrf, ("first_name", first), ("last_name", last),
                      ("street", f"{self.pick(STREETS)} {r.randint(1, 180)}"),
                      ("city", city), ("postcode", postcode), ("country", country),
                      ("phone", f"+{r.randint(30, 49)} {r.randint(100, 999)} {r.randint(1000000, 9999999)}"),
                      ("delivery_note", self.prose(0, 3) if r.random() < 0.5 else ""),
                      ("save_address", "1")]
            path = "/checkout/shipping"
        elif k == "newsletter":
            fields = [("email", mail), ("lang", self.pick(LOCALES)[0]),
                      ("interests", self.pick(CATEGORIES)), ("source", self.pick(["footer", "popup", "checkout"]))]
            path = "/newsletter/subscribe"
        else:
            fields = [csrf, ("product_id", str(r.randint(1000, 99999))),
                      ("rating", str(r.randint(3, 5))),
                      ("title", self.pick(SENTENCES)[: r.randint(20, 40)].strip()),
                      ("body", self.prose(2, 20)), ("display_name", first)]
            path = f"/products/{r.randint(1000, 99999)}/reviews"
        body = urllib.parse.urlencode(fields).encode()
        h = self.base_headers(host, b, True)
        h += [("Accept", b["accept"]),
              ("Accept-Language", self.accept_language(b["kind"] != "firefox-desktop")),
              ("Accept-Encoding", b["enc"]),
              ("Content-Type", "application/x-www-form-urlencoded"),
              ("Origin", f"https://{host}"), ("Referer", f"https://{host}{path}")]
        cookie = self.cookies()
        if cookie:
            h.append(("Cookie", cookie))
        h += [("Upgrade-Insecure-Requests", "1"), ("Sec-Fetch-Dest", "document"),
              ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-Site", "same-origin"),
              ("Sec-Fetch-User", "?1"), ("Connection", "keep-alive")]
        return "POST", path, h, body

    def multipart(self, host, b):
        r = self.r
        first, last, mail = self.person()
        if b["kind"].startswith("firefox"):
            boundary = "-" * 27 + "".join(self.pick("0123456789") for _ in range(r.randint(26, 30)))
        elif b["kind"].startswith("safari"):
            boundary = "----WebKitFormBoundary" + self.b64id(16).replace("-", "x").replace("_", "y")
        else:
            boundary = "----WebKitFormBoundary" + self.b64id(16).replace("-", "Q").replace("_", "Z")
        k = self.pick(["avatar", "return", "review-photo"])
        if k == "avatar":
            fields = [("display_name", f"{first} {last[0]}."), ("bio", self.prose(0, 2))]
            fname = f"{first.lower()}-{r.randint(1, 999)}.png"
            ftype = "image/png"
            content = self.png(r.randint(200, 3000))
            path = "/account/profile"
        elif k == "return":
            fields = [("order_number", str(r.randint(100000, 999999))),
                      ("reason", self.pick(["too-small", "too-large", "damaged", "changed-mind"])),
                      ("comment", self.prose(1, 4))]
            fname = f"receipt-{r.randint(1000, 9999)}.txt"
            ftype = "text/plain"
            content = (self.prose(2, 8) + "\n").encode()
            path = "/account/returns"
        else:
            fields = [("product_id", str(r.randint(1000, 99999))), ("caption", self.pick(SENTENCES))]
            fname = f"IMG_{r.randint(1000, 9999)}.jpg"
            ftype = "image/jpeg"
            content = self.jpeg(r.randint(300, 4000))
            path = "/reviews/photos"
        parts = []
        for name, value in [("csrf_token", self.b64id(43))] + fields:
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                         .encode() + value.encode() + b"\r\n")
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                     f'filename="{fname}"\r\nContent-Type: {ftype}\r\n\r\n'.encode()
                     + content + b"\r\n")
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        h = self.base_headers(host, b, True)
        h += [("Accept", b["accept"]),
              ("Accept-Language", self.accept_language(b["kind"] != "firefox-desktop")),
              ("Accept-Encoding", b["enc"]),
              ("Content-Type", f"multipart/form-data; boundary={boundary}"),
              ("Origin", f"https://{host}"), ("Referer", f"https://{host}{path}")]
        cookie = self.cookies()
        if cookie:
            h.append(("Cookie", cookie))
        h += [("Sec-Fetch-Dest", "document"), ("Sec-Fetch-Mode", "navigate"),
              ("Sec-Fetch-Site", "same-origin"), ("Connection", "keep-alive")]
        return "POST", path, h, body

    def png(self, n):
        """Bytes with a PNG signature and header chunk, then compressed-looking noise."""
        head = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x40\x00\x00\x00\x40\x08\x06\x00\x00\x00"
        return head + bytes(self.r.getrandbits(8) for _ in range(n)) + b"\x00\x00\x00\x00IEND\xaeB`\x82"

    def jpeg(self, n):
        head = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
        return head + bytes(self.r.getrandbits(8) for _ in range(n)) + b"\xff\xd9"

    def json_doc(self, target):
        """A JSON document of about `target` bytes, of one of several API shapes."""
        r = self.r
        # Many small values fill a document quickly up to the argument limit, so the
        # large documents are the text-heavy shapes.
        if target > 24576:
            k = "document"
        elif target > 12288:
            k = self.pick(["order", "document"])
        else:
            k = self.pick(["order", "cart", "events", "document", "search"])
        first, last, mail = self.person()
        city, country, postcode = self.pick(CITIES)
        if k == "order":
            doc = {"customer": {"id": r.randint(10000, 999999), "name": f"{first} {last}",
                                "email": mail},
                   "shipping": {"street": f"{self.pick(STREETS)} {r.randint(1, 180)}",
                                "city": city, "postcode": postcode, "country": country},
                   "currency": self.pick(["EUR", "USD", "GBP"]), "items": [],
                   "note": self.prose(0, 2)}
            grow = doc["items"]

            def item():
                return {"sku": f"{self.pick(CATEGORIES)[:3].upper()}-{r.randint(10000, 99999)}",
                        "name": self.slug().replace("-", " ").title(),
                        "quantity": r.randint(1, 4), "unit_price": round(r.uniform(4, 300), 2),
                        "gift": r.random() < 0.1, "description": self.prose(1, 5)}
        elif k == "cart":
            doc = {"cart_id": self.uuid(), "updated_at": r.randint(1700000000, 1735000000),
                   "lines": [], "coupon": None}
            grow = doc["lines"]

            def item():
                return {"product_id": r.randint(1000, 99999), "variant_id": r.randint(10000000, 99999999),
                        "qty": r.randint(1, 3), "options": {"colour": self.pick(COLOURS),
                                                            "size": self.pick(["XS", "S", "M", "L", "XL"])}}
        elif k == "events":
            doc = {"client_id": f"{r.randint(100000000, 2147483647)}.{r.randint(1690000000, 1735000000)}",
                   "events": []}
            grow = doc["events"]

            def item():
                return {"name": self.pick(["page_view", "view_item", "add_to_cart", "scroll",
                                           "select_item", "begin_checkout"]),
                        "ts": r.randint(1700000000000, 1735000000000),
                        "params": {"page_path": self.page_path().split("?")[0],
                                   "engagement_ms": r.randint(100, 90000),
                                   "item_id": str(r.randint(1000, 99999))}}
        elif k == "document":
            doc = {"id": self.uuid(), "title": self.pick(SENTENCES), "author": f"{first} {last}",
                   "tags": [self.pick(CATEGORIES) for _ in range(3)], "blocks": []}
            grow = doc["blocks"]

            def item():
                return {"type": self.pick(["paragraph", "heading", "quote"]),
                        "text": self.prose(1, 10)}
        else:
            doc = {"query": self.pick(SEARCH_WORDS), "page": r.randint(1, 5),
                   "filters": {"colour": [self.pick(COLOURS)], "in_stock": True},
                   "facets": []}
            grow = doc["facets"]

            def item():
                return {"field": self.pick(["brand", "colour", "material", "size"]),
                        "values": [self.pick(COLOURS + ADJECTIVES) for _ in range(r.randint(2, 8))]}
        size = len(json.dumps(doc, separators=(",", ":")))
        leaves = count_leaves(doc)
        while size < target:
            one = item()
            # Stay well under the engine's argument limit (SecArgumentsLimit 1000 in
            # bench/rules/base.conf): a document with more leaves is refused as
            # unparsed, which no benign client meets. Large documents are therefore
            # the text-heavy shapes.
            leaves += count_leaves(one)
            if leaves > 600:
                break
            # The item and the comma before it (none before the first).
            size += len(json.dumps(one, separators=(",", ":"))) + (1 if grow else 0)
            grow.append(one)
        return json.dumps(doc, separators=(",", ":")).encode()

    def json_call(self, host, b):
        r = self.r
        # Sizes from about 200 bytes to 64 KiB, most of them small (log-uniform).
        target = int(2 ** r.uniform(7.6, 16))
        body = self.json_doc(target)
        path = self.pick(["/api/v1/orders", "/api/v1/cart", "/api/v2/events", "/api/v1/documents",
                          "/api/v2/search", "/api/v1/cart/lines"])
        # POST only: CRS's default allowed methods (GET HEAD POST OPTIONS) refuse PUT.
        return "POST", path, self.api_headers(host, b, "application/json"), body

    def one(self, kind):
        host = self.pick(HOSTS)
        b = self.browser()
        return {"get-page": self.get_page, "get-asset": self.get_asset, "get-api": self.get_api,
                "form": self.form, "multipart": self.multipart, "json": self.json_call}[kind](host, b)


def count_leaves(v):
    """The scalar values of a JSON value (what the engine makes arguments of)."""
    if isinstance(v, dict):
        return sum(count_leaves(x) for x in v.values())
    if isinstance(v, list):
        return sum(count_leaves(x) for x in v)
    return 1


def encode(method, target, headers, body):
    lines = [f"{method} {target} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def generate(seed=DEFAULT_SEED, count=DEFAULT_COUNT):
    """The corpus as a list of (kind, raw request bytes): `count` distinct requests."""
    g = Gen(seed)
    seen = set()
    out = []
    while len(out) < count:
        kind = g.weighted(KINDS)
        raw = encode(*g.one(kind))
        digest = hashlib.sha256(raw).digest()
        if digest in seen:
            continue
        seen.add(digest)
        out.append((kind, raw))
    return out


def stamp(seed, count):
    with open(os.path.abspath(__file__), "rb") as f:
        me = hashlib.sha256(f.read()).hexdigest()[:16]
    return f"# gen_varying seed={seed} count={count} generator={me}"


def write(out_dir, seed=DEFAULT_SEED, count=DEFAULT_COUNT):
    """Writes the corpus into `out_dir` unless a matching one is already there."""
    manifest = os.path.join(out_dir, "manifest.tsv")
    want = stamp(seed, count)
    try:
        with open(manifest) as f:
            if f.readline().rstrip("\n") == want:
                return False
    except OSError:
        pass
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(out_dir):
        if name.endswith(".http") or name == "manifest.tsv":
            os.remove(os.path.join(out_dir, name))
    lines = [want]
    for i, (kind, raw) in enumerate(generate(seed, count)):
        name = f"{i:05d}.http"
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(raw)
        lines.append(f"{name}\t{kind}\t{len(raw)}")
    tmp = manifest + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, manifest)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT, help="output directory")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--count", type=int, default=DEFAULT_COUNT)
    args = ap.parse_args()
    if args.count < 1:
        sys.exit("gen_varying: --count must be at least 1")
    wrote = write(args.out, args.seed, args.count)
    print(f"gen_varying: {'wrote' if wrote else 'up to date:'} {args.count} requests in {args.out}")


if __name__ == "__main__":
    main()
