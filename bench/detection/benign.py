"""Benign requests for the detection evaluation: what today's users, browsers,
mobile apps, API clients and integrations send, generated from grammars and word
lists, so that each seed gives mostly different texts.

`benign(seed, count)` returns about `count` labelled requests spread over the
categories in CATEGORIES (the end of this file):

- prose in eighteen languages, and English prose full of words and punctuation
  that look like SQL, shell or JavaScript (prose, prose-keywords, chat);
- developer forum posts quoting code in fences and backticks (forum-<lang>);
- rich-text editor HTML (richtext) and Markdown documents (markdown);
- REST/JSON APIs with every method, filters, MongoDB-style queries, JSON Patch,
  JSON:API, webhooks, OAuth, SOAP and XML documents, GraphQL;
- multipart uploads (binary and text files), data: URIs, ids, hashes and tokens;
- page and asset loads with real browsers', bots', tools' and apps' headers,
  framework cookies, tracking parameters, return URLs, search operators;
- sign-up, login and checkout forms; analytics beacons and browser reports.

Nothing here is an attack, and nothing comes from a public WAF test tool or
traffic collection: every template is written from how these formats look.
"""

import base64
import datetime
import hashlib
import json
import random
import unicodedata
import urllib.parse
import uuid

Q = urllib.parse.quote

# --------------------------------------------------------------------------------
# Small helpers

HEX = "0123456789abcdef"
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


def _sub(t, **kw):
    """Fills «name» slots (no braces, so code and templates need no escaping)."""
    for k, v in kw.items():
        t = t.replace("\u00ab" + k + "\u00bb", str(v))
    return t


def _hex(r, n):
    return "".join(r.choice(HEX) for _ in range(n))


def _alnum(r, n, chars=ALNUM):
    return "".join(r.choice(chars) for _ in range(n))


def _bytes(r, n):
    return r.getrandbits(8 * n).to_bytes(n, "little") if n > 0 else b""


def _uuid(r):
    return str(uuid.UUID(int=r.getrandbits(128), version=4))


def _b64(r, n, url=False, pad=True):
    raw = _bytes(r, n)
    s = base64.urlsafe_b64encode(raw).decode() if url else base64.b64encode(raw).decode()
    return s if pad else s.rstrip("=")


def _b64s(s, url=False):
    b = s.encode() if isinstance(s, str) else s
    return (base64.urlsafe_b64encode(b) if url else base64.b64encode(b)).decode()


def _sha256(r):
    return hashlib.sha256(_bytes(r, 16)).hexdigest()


def _ts(r):
    """Seconds since the epoch, 2023-01-01 .. 2025-06-30."""
    return r.randint(1672531200, 1751241600)


def _dt(r):
    return datetime.datetime.fromtimestamp(_ts(r), datetime.timezone.utc)


def _iso(r, ms=None):
    d = _dt(r)
    style = r.randrange(4)
    if style == 0:
        return d.strftime("%Y-%m-%dT%H:%M:%SZ")
    if style == 1:
        return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{r.randrange(1000):03d}Z"
    if style == 2:
        off = r.choice(["+02:00", "+01:00", "-05:00", "+05:30", "+09:00", "-03:00"])
        return d.strftime("%Y-%m-%dT%H:%M:%S") + off
    return d.strftime("%Y-%m-%d")


def _http_date(r):
    return _dt(r).strftime("%a, %d %b %Y %H:%M:%S GMT")


def _ijson(r, obj):
    """JSON as browsers (raw UTF-8, compact) or server clients (escaped, spaced) send it."""
    if r.random() < 0.6:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    return json.dumps(obj, ensure_ascii=r.random() < 0.5).encode()


def _json_ct(r):
    return r.choice(["application/json", "application/json", "application/json; charset=utf-8",
                     "application/json;charset=UTF-8"])


def _form_ct(r):
    return r.choice(["application/x-www-form-urlencoded", "application/x-www-form-urlencoded",
                     "application/x-www-form-urlencoded; charset=UTF-8"])


def _form(pairs):
    return urllib.parse.urlencode(pairs).encode()


def _query(r, pairs, plus=None):
    """A query string: browsers' forms write spaces as '+', JavaScript clients as %20."""
    if plus is None:
        plus = r.random() < 0.5
    if plus:
        return urllib.parse.urlencode(pairs)
    return urllib.parse.urlencode(pairs, quote_via=Q)


def _qbrackets(r, pairs):
    """Query with bracketed names (page[size]) left raw, as many clients send them."""
    out = []
    for k, v in pairs:
        kk = Q(k, safe="[]") if r.random() < 0.6 else Q(k, safe="")
        out.append(f"{kk}={Q(str(v), safe=',:')}")
    return "&".join(out)


def _multipart(r, parts):
    """parts: (name, value, filename or None, content type or None). Returns (ctype, body)."""
    style = r.randrange(5)
    if style == 0:
        b = "----WebKitFormBoundary" + _alnum(r, 16)
    elif style == 1:
        b = "----geckoformboundary" + _hex(r, 32)
    elif style == 2:
        b = "-" * 27 + "".join(r.choice("0123456789") for _ in range(29))
    elif style == 3:
        b = "-" * 24 + _hex(r, 16)
    else:
        b = _hex(r, 32)
    out = []
    for name, value, filename, ctype in parts:
        disp = f'Content-Disposition: form-data; name="{name}"'
        if filename is not None:
            disp += f'; filename="{filename}"'
        head = disp + "\r\n"
        if ctype:
            head += f"Content-Type: {ctype}\r\n"
        v = value if isinstance(value, bytes) else str(value).encode()
        out.append(b"--" + b.encode() + b"\r\n" + head.encode() + b"\r\n" + v + b"\r\n")
    body = b"".join(out) + b"--" + b.encode() + b"--\r\n"
    return f"multipart/form-data; boundary={b}", body


def _cap(s):
    return s[:1].upper() + s[1:]


# --------------------------------------------------------------------------------
# People, places, addresses, e-mail

FIRST = ["Emma", "Liam", "Olivia", "Noah", "Siobhán", "Jack", "Priya", "Mateo", "Zoë", "Jürgen", "Anke", "Lukas",
         "Amélie", "Théo", "François", "José", "María", "Íñigo", "Lucía", "Giulia", "Niccolò", "João", "Conceição",
         "Sanne", "Daan", "Łukasz", "Małgorzata", "Wojciech", "Ivan", "Olga", "Dmitri", "Ayşe", "Çağrı", "Mehmet",
         "Nguyễn", "Thảo", "Minh", "Aiko", "Haruto", "Min-jun", "Seo-yeon", "Wei", "Fang", "Ahmed", "Fatima", "Omar",
         "Noa", "Itai", "Rahul", "Ananya", "Björn", "Søren", "Åsa", "Chloé", "Renée", "Dónal", "Aoife", "Kwame",
         "Chiamaka", "Tomás", "Ximena", "Gülşen", "Eleni", "Giorgos", "Mary-Kate", "Jean-Luc", "Anne-Sophie"]
LAST = ["O'Brien", "O'Neil", "D'Arcy", "McDonald", "Mc Donald", "Smith", "Müller", "Schröder", "Dubois", "Lefèvre",
        "García", "Álvarez-García", "Rossi", "Dell'Acqua", "Silva", "Gonçalves", "de Vries", "van der Berg",
        "Kowalski", "Wójcik", "Brzęczyszczykiewicz", "Ivanova", "Yılmaz", "Öztürk", "Nguyen", "Trần", "Tanaka",
        "Sato", "Kim", "Park", "Wang", "Li", "Haddad", "Al-Sayed", "Cohen", "Levi", "Sharma", "Patel", "Andersen",
        "Øvergaard", "Ní Bhriain", "Ó Súilleabháin", "Mensah", "Okafor", "Fernández", "Papadopoulos", "St. John",
        "Smith-Jones", "von Trapp", "D'Angelo", "Ng"]
CITIES = [("London", "GB", "SW1A 1AA"), ("Dublin", "IE", "D02 X285"), ("New York", "US", "10001"),
          ("Austin", "US", "78701"), ("Toronto", "CA", "M5V 2T6"), ("Berlin", "DE", "10115"),
          ("München", "DE", "80331"), ("Zürich", "CH", "8001"), ("Wien", "AT", "1010"), ("Paris", "FR", "75011"),
          ("Lyon", "FR", "69002"), ("Madrid", "ES", "28013"), ("Barcelona", "ES", "08002"), ("Milano", "IT", "20121"),
          ("Lisboa", "PT", "1100-148"), ("São Paulo", "BR", "01310-100"), ("Amsterdam", "NL", "1012 JS"),
          ("Kraków", "PL", "31-042"), ("İstanbul", "TR", "34433"), ("Athína", "GR", "105 57"), ("Tokyo", "JP", "100-0005"),
          ("Seoul", "KR", "04524"), ("Hà Nội", "VN", "100000"), ("Tel Aviv", "IL", "6100000"), ("Dubai", "AE", ""),
          ("Mumbai", "IN", "400001"), ("Sydney", "AU", "2000"), ("Cape Town", "ZA", "8001"), ("México", "MX", "06000"),
          ("Reykjavík", "IS", "101"), ("Göteborg", "SE", "411 03"), ("Kraków", "PL", "30-001")]
STREETS = ["{n} Main St, Apt. {a}", "{n} Baker Street", "Flat {a}, {n} O'Connell St", "Hauptstraße {n}a",
           "Rue de l'Église {n}", "Calle de Alcalá {n}, {a}º izq.", "Via dell'Indipendenza {n}", "Rua Augusta, {n} - {a}º andar",
           "ul. Marszałkowska {n}/{a} m. {a}", "Keizersgracht {n}-II", "{n} Nguyễn Huệ, Quận 1", "{n}-{a} Jingumae, Shibuya-ku",
           "P.O. Box {n}", "{n} Route 66 #{a}", "c/o Smith & Sons Ltd., {n} High Rd", "Straße des 17. Juni {n}",
           "{n} Rue Saint-Honoré (bât. B)", "İstiklal Cd. No:{n} D:{a}", "{n}, 5th Ave; rear entrance",
           "Unit {a}/{n} George St", "{n} Elm St., Suite #{a}00"]
EMAIL_DOMAINS = ["gmail.com", "outlook.com", "yahoo.co.uk", "web.de", "gmx.net", "orange.fr", "libero.it", "icloud.com",
                 "protonmail.com", "example.com", "example.org", "mail.example.co.jp", "uni-heidelberg.de", "company.example",
                 "student.example.edu", "xn--mller-kva.example", "hotmail.es", "naver.com", "qq.com", "yandex.ru", "fastmail.fm"]


def _ascii_fold(s):
    s = unicodedata.normalize("NFKD", s.replace("ł", "l").replace("Ł", "L").replace("ß", "ss").replace("ø", "o")
                              .replace("Ø", "O").replace("ı", "i").replace("đ", "d"))
    return "".join(c for c in s if c.isascii() and not unicodedata.combining(c))


def _name(r):
    return r.choice(FIRST), r.choice(LAST)


def _email(r, first=None, last=None):
    if first is None:
        first, last = _name(r)
    f = _ascii_fold(first).lower().replace(" ", "").replace("'", "") or "anna"
    l_ = _ascii_fold(last).lower().replace(" ", "") or "lee"
    dom = r.choice(EMAIL_DOMAINS)
    shape = r.randrange(12)
    if shape == 0:
        local = f"{f}.{l_.replace(chr(39), '')}"
    elif shape == 1:
        local = f"{f}+{r.choice(['shop', 'news', 'orders', 'github', 'spam', '2024', 'work'])}"
    elif shape == 2:
        local = f"{f[0]}{l_.replace(chr(39), '')}{r.randint(1, 99)}"
    elif shape == 3:
        local = l_ if "'" in l_ else f"{l_}_{f}"  # o'brien@ is a valid address
    elif shape == 4:
        local = f"{f}-{l_.replace(chr(39), '')}"
    elif shape == 5:
        local = f"{f}.{l_.replace(chr(39), '')}+{r.choice(['a', 'b', 'test', 'invoices'])}"
    elif shape == 6:
        return f"{f}@{r.choice(['mail', 'eu', 'corp'])}.{dom}"
    elif shape == 7:
        local = f"{f}_{r.randint(1970, 2006)}"
    elif shape == 8:
        local = f"{f}.{l_.replace(chr(39), '')}".upper() if r.random() < 0.3 else f"{f}{l_.replace(chr(39), '')}"
    elif shape == 9:
        local = f"{f}" + r.choice(["", ".", "_"]) + str(r.randint(1, 9999))
    elif shape == 10:
        local = f"{f}.{r.choice(['jr', 'sr', 'iii'])}"
    else:
        local = f"{f[0]}.{l_.replace(chr(39), '')}"
    return f"{local}@{dom}"


def _email_display(r):
    first, last = _name(r)
    addr = _email(r, first, last)
    style = r.randrange(4)
    if style == 0:
        return f"{first} {last} <{addr}>"
    if style == 1:
        return f"\"{last}, {first}\" <{addr}>"
    if style == 2:
        return addr
    return f"\"{first} {last} (work)\" <{addr}>"


def _phone(r):
    forms = [
        lambda: f"+1 ({r.randint(201, 989)}) 555-{r.randint(100, 199):04d}",
        lambda: f"+44 20 7946 {r.randint(0, 999):04d}",
        lambda: f"+49 30 {r.randint(1000000, 9999999)}",
        lambda: f"030 {r.randint(100, 999)} {r.randint(1000, 9999)}",
        lambda: f"+33 6 {r.randint(10, 99)} {r.randint(10, 99)} {r.randint(10, 99)} {r.randint(10, 99)}",
        lambda: f"(0{r.randint(10, 99)}) {r.randint(1000, 9999)}-{r.randint(1000, 9999)}",
        lambda: f"+81-3-{r.randint(1000, 9999)}-{r.randint(1000, 9999)}",
        lambda: f"+91 {r.randint(70000, 99999)} {r.randint(10000, 99999)}",
        lambda: f"{r.randint(200, 999)}.555.{r.randint(100, 199):04d} ext. {r.randint(10, 999)}",
        lambda: f"+34 6{r.randint(10, 99)} {r.randint(100, 999)} {r.randint(100, 999)}",
        lambda: f"+48 {r.randint(500, 799)}-{r.randint(100, 999)}-{r.randint(100, 999)}",
    ]
    return r.choice(forms)()


def _street(r):
    return r.choice(STREETS).format(n=r.randint(1, 250), a=r.randint(1, 9))


def _public_ip(r):
    first = r.choice([23, 31, 37, 45, 51, 62, 77, 81, 85, 91, 94, 104, 109, 145, 151, 176, 178, 185, 188, 193, 195,
                      212, 213, 217, 2, 5, 24, 41, 49, 58, 66, 73, 89, 98, 121, 141, 154, 161, 200, 201])
    return f"{first}.{r.randint(1, 254)}.{r.randint(1, 254)}.{r.randint(1, 254)}"


def _public_ip6(r):
    return f"2a0{r.randint(0, 9)}:{_hex(r, 4)}:{_hex(r, 4)}:{_hex(r, 3)}::{_hex(r, 2)}"


# --------------------------------------------------------------------------------
# Headers: browsers, mobile apps, bots, tools

HOSTS = ["shop.example", "www.example.com", "app.example.com", "example.org", "portal.example.co.uk", "example.de",
         "my.example.io", "store.example.fr"]
API_HOSTS = ["api.example.com", "api.example.io", "app.example.com", "example.org", "backend.example.net"]


def _ua(r, kind=None):
    kind = kind or r.choices(["browser", "mobile", "bot", "tool", "app"], [66, 18, 4, 6, 6])[0]
    cv, fv = r.randint(116, 126), r.randint(115, 127)
    if kind == "browser":
        return r.choice([
            f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{cv}.0.0.0 Safari/537.36",
            f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{cv}.0.0.0 Safari/537.36",
            f"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{cv}.0.0.0 Safari/537.36",
            f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{cv}.0.0.0 "
            f"Safari/537.36 Edg/{cv}.0.{r.randint(1000, 2999)}.{r.randint(10, 99)}",
            f"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:{fv}.0) Gecko/20100101 Firefox/{fv}.0",
            f"Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:{fv}.0) Gecko/20100101 Firefox/{fv}.0",
            f"Mozilla/5.0 (Macintosh; Intel Mac OS X 14.{r.randint(0, 5)}; rv:{fv}.0) Gecko/20100101 Firefox/{fv}.0",
            f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
            f"Version/17.{r.randint(0, 5)} Safari/605.1.15",
            f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{cv}.0.0.0 "
            f"Safari/537.36 OPR/{cv - 14}.0.0.0",
            f"Mozilla/5.0 (X11; CrOS x86_64 15633.69.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{cv}.0.0.0 Safari/537.36",
        ])
    if kind == "mobile":
        ios = f"17_{r.randint(0, 5)}" + (f"_{r.randint(1, 2)}" if r.random() < 0.4 else "")
        return r.choice([
            f"Mozilla/5.0 (iPhone; CPU iPhone OS {ios} like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
            f"Version/17.{r.randint(0, 5)} Mobile/15E148 Safari/604.1",
            f"Mozilla/5.0 (Linux; Android {r.randint(11, 14)}; Pixel {r.randint(5, 8)}) AppleWebKit/537.36 (KHTML, like Gecko) "
            f"Chrome/{cv}.0.0.0 Mobile Safari/537.36",
            f"Mozilla/5.0 (Linux; Android 13; SM-S91{r.randint(1, 8)}B) AppleWebKit/537.36 (KHTML, like Gecko) "
            f"SamsungBrowser/{r.randint(21, 25)}.0 Chrome/{cv - 6}.0.0.0 Mobile Safari/537.36",
            f"Mozilla/5.0 (iPad; CPU OS {ios} like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
            f"Version/17.{r.randint(0, 5)} Mobile/15E148 Safari/604.1",
            f"Mozilla/5.0 (iPhone; CPU iPhone OS {ios} like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
            f"Mobile/15E148 Instagram {r.randint(300, 330)}.0.0.{r.randint(10, 40)}.{r.randint(100, 120)} "
            f"(iPhone14,{r.randint(2, 8)}; iOS {ios}; en_US; en; scale=3.00; 1170x2532; {r.randint(500000000, 599999999)})",
            f"Mozilla/5.0 (Linux; Android 14; Pixel 7 Build/AP1A.240305.019; wv) AppleWebKit/537.36 (KHTML, like Gecko) "
            f"Version/4.0 Chrome/{cv}.0.{r.randint(6000, 6400)}.{r.randint(10, 200)} Mobile Safari/537.36",
            f"Mozilla/5.0 (Android 14; Mobile; rv:{fv}.0) Gecko/{fv}.0 Firefox/{fv}.0",
        ])
    if kind == "bot":
        return r.choice([
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            f"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) "
            f"Chrome/{cv}.0.0.0 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            "DuckDuckBot-Https/1.1; (+https://duckduckgo.com/duckduckbot)",
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) "
            "Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)",
            "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
            "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
            "Twitterbot/1.0",
            "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
            "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
            "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)",
            "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
        ])
    if kind == "tool":
        return r.choice([
            f"curl/8.{r.randint(0, 8)}.{r.randint(0, 1)}", f"python-requests/2.{r.randint(28, 32)}.{r.randint(0, 3)}",
            "Go-http-client/1.1", "Go-http-client/2.0", f"okhttp/4.{r.randint(9, 12)}.0",
            f"axios/1.{r.randint(4, 7)}.{r.randint(0, 9)}", f"PostmanRuntime/7.{r.randint(32, 39)}.{r.randint(0, 3)}",
            "Wget/1.21.4", "node-fetch/1.0 (+https://github.com/bitinn/node-fetch)", "Python-urllib/3.11",
            f"aiohttp/3.9.{r.randint(0, 5)}", f"Apache-HttpClient/4.5.14 (Java/17.0.{r.randint(8, 11)})",
            f"HTTPie/3.2.{r.randint(1, 3)}", f"Java-http-client/17.0.{r.randint(8, 11)}", "undici",
            f"Faraday v2.{r.randint(7, 9)}.0", f"GuzzleHttp/7", f"RestSharp/110.2.0.0",
        ])
    return r.choice([
        f"ShopApp/5.{r.randint(1, 20)}.{r.randint(0, 9)} (iPhone; iOS {r.randint(16, 17)}.{r.randint(0, 5)}; Scale/3.00)",
        f"Acme/{r.randint(20, 24)}.{r.randint(1, 30)}.1 (com.acme.app; build:{r.randint(1000, 9999)}; Android 14) "
        f"okhttp/4.12.0",
        f"Dalvik/2.1.0 (Linux; U; Android 13; SM-A53{r.randint(0, 9)}B Build/TP1A.220624.014)",
        f"MyBank/{r.randint(5, 9)}.{r.randint(0, 9)} CFNetwork/1494.0.7 Darwin/23.4.0",
        f"Spotify/8.9.{r.randint(10, 40)} iOS/17.4 (iPhone15,3)",
        f"com.example.news/{r.randint(3, 6)}.{r.randint(0, 9)}.{r.randint(0, 9)} (Android {r.randint(10, 14)}; "
        f"Xiaomi 2201117TG)",
        f"FitTrack/{r.randint(2, 4)}.{r.randint(0, 30)} (Watch; watchOS 10.{r.randint(0, 4)})",
    ])


LANG_PREFS = [["en-US", "en"], ["en-GB", "en"], ["de-DE", "de", "en-US", "en"], ["fr-FR", "fr", "en"], ["es-ES", "es"],
              ["es-419", "es", "en"], ["it-IT", "it", "en"], ["pt-BR", "pt", "en"], ["pt-PT", "pt"], ["nl-NL", "nl", "en"],
              ["pl-PL", "pl", "en"], ["ru-RU", "ru", "en"], ["el-GR", "el", "en"], ["tr-TR", "tr"], ["ar", "en"],
              ["he-IL", "he", "en"], ["hi-IN", "hi", "en"], ["zh-CN", "zh", "en"], ["zh-TW", "zh"], ["ja-JP", "ja"],
              ["ko-KR", "ko", "en-US", "en"], ["vi-VN", "vi", "fr", "en"], ["de-CH", "de", "fr", "it", "en"], ["sv-SE", "sv"]]


def _accept_language(r):
    langs = r.choice(LANG_PREFS)
    if r.random() < 0.15:
        return langs[0]
    if r.random() < 0.2:  # Safari sends short lists without weights
        return langs[0] if len(langs) == 1 else f"{langs[0]},{langs[1]};q=0.9"
    out = [langs[0]]
    q = 0.9
    for l_ in langs[1:]:
        out.append(f"{l_};q={q:.1f}")
        q -= 0.1
    return ",".join(out)


def _chromium_hints(r, ua):
    m = "Chrome/" in ua and "Mobile" not in ua and "Edg/" not in ua
    if not m:
        return []
    v = ua.split("Chrome/")[1].split(".")[0]
    plat = '"Windows"' if "Windows" in ua else ('"macOS"' if "Mac" in ua else '"Linux"')
    return [("sec-ch-ua", f'"Chromium";v="{v}", "Google Chrome";v="{v}", "Not-A.Brand";v="99"'),
            ("sec-ch-ua-mobile", "?0"), ("sec-ch-ua-platform", plat)]


def _traceparent(r):
    return f"00-{_hex(r, 32)}-{_hex(r, 16)}-0{r.choice('01')}"


REFERERS = ["https://www.google.com/", "https://www.bing.com/", "https://duckduckgo.com/", "https://t.co/{a}",
            "https://www.facebook.com/", "https://l.instagram.com/", "https://news.ycombinator.com/item?id={n}",
            "https://www.reddit.com/r/{sub}/comments/{a}/", "https://{host}/", "https://{host}/products/{slug}",
            "https://{host}/search?q={word}&page={p}", "https://{host}/blog/{slug}#comments",
            "https://mail.google.com/", "https://teams.microsoft.com/", "android-app://com.google.android.gm/"]


def _referer(r, host=None):
    return r.choice(REFERERS).format(a=_alnum(r, 10), n=r.randint(30000000, 40000000),
                                     sub=r.choice(["webdev", "buildapc", "de", "france", "programming"]),
                                     host=host or r.choice(HOSTS), slug=_slug(r), word=Q(r.choice(SEARCH_WORDS)),
                                     p=r.randint(1, 5))


def _headers(r, extra=(), kind="browser", host=None, accept=None, ua=None, nav=False):
    """A realistic header list. kind: browser, api (a browser's fetch), tool, app, bot.
    Later entries in `extra` replace earlier headers of the same name."""
    if kind == "browser":
        ua = ua or _ua(r, r.choices(["browser", "mobile"], [78, 22])[0])
    elif kind == "api":
        ua = ua or _ua(r, r.choices(["browser", "mobile", "tool", "app"], [50, 15, 20, 15])[0])
    else:
        ua = ua or _ua(r, kind)
    h = [("Host", host or (r.choice(API_HOSTS) if kind in ("api", "tool", "app") else r.choice(HOSTS))),
         ("User-Agent", ua)]
    if kind in ("browser", "bot"):
        h.append(("Accept", accept or ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
                                       "*/*;q=0.8" if r.random() < 0.7 else "text/html,application/xhtml+xml,"
                                       "application/xml;q=0.9,*/*;q=0.8")))
    else:
        h.append(("Accept", accept or r.choice(["application/json", "application/json, text/plain, */*", "*/*",
                                                "application/json;charset=UTF-8"])))
    if kind in ("browser", "api") or r.random() < 0.3:
        h.append(("Accept-Language", _accept_language(r)))
    if kind != "tool" or r.random() < 0.5:
        h.append(("Accept-Encoding", r.choice(["gzip, deflate, br", "gzip, deflate, br, zstd", "gzip", "gzip, deflate"])))
    if kind in ("browser", "api") and r.random() < 0.5:
        h += _chromium_hints(r, ua)
    if kind == "browser" and nav and r.random() < 0.5:
        h += [("Sec-Fetch-Dest", "document"), ("Sec-Fetch-Mode", "navigate"),
              ("Sec-Fetch-Site", r.choice(["none", "same-origin", "cross-site"])), ("Sec-Fetch-User", "?1"),
              ("Upgrade-Insecure-Requests", "1")]
    browser_ua = ua.startswith("Mozilla/") and "compatible;" not in ua
    if kind == "api" and browser_ua and r.random() < 0.4:
        h += [("Sec-Fetch-Dest", "empty"), ("Sec-Fetch-Mode", "cors"), ("Sec-Fetch-Site", "same-origin")]
    if kind in ("browser", "api") and browser_ua and r.random() < 0.45:
        h.append(("Referer", _referer(r, h[0][1])))
    if r.random() < 0.15:
        h.append(("X-Request-ID", _uuid(r)))
    if r.random() < 0.12:
        h.append(("X-Forwarded-For", ", ".join(_public_ip(r) for _ in range(r.randint(1, 3)))))
        if r.random() < 0.5:
            h.append(("X-Forwarded-Proto", "https"))
    if r.random() < 0.1:
        h.append(("traceparent", _traceparent(r)))
    if kind == "browser" and r.random() < 0.1:
        h.append(("DNT", "1"))
    if kind == "browser" and r.random() < 0.3:
        h.append(("Cookie", _cookie_header(r, light=True)))
    for k, v in extra:
        h = [(a, b) for a, b in h if a.lower() != k.lower()]
        h.append((k, v))
    return h


# --------------------------------------------------------------------------------
# Words for slugs, paths, searches

SLUG_ADJ = ["quick", "blue", "summer", "vintage", "wireless", "organic", "classic", "compact", "ultra", "smart",
            "cozy", "daily", "modern", "rustic", "little", "best", "easy", "new", "2024", "ultimate", "minimal", "green"]
SLUG_NOUN = ["guide", "jacket", "lamp", "backpack", "chair", "recipe", "update", "review", "release", "tips", "setup",
             "checklist", "story", "headphones", "kettle", "sneakers", "garden", "trip", "bread", "keyboard", "desk",
             "tent", "camera", "course", "podcast", "budget", "workflow"]
SEARCH_WORDS = ["running shoes", "usb-c cable", "birthday gift ideas", "sourdough starter", "noise cancelling",
                "standing desk", "winter jacket", "python tutorial", "flights to lisbon", "cheap hotels berlin",
                "how to tie a tie", "vegan lasagne", "laptop sleeve 14 inch", "kids bike", "espresso grinder",
                "wedding dress", "rust borrow checker", "docker compose volumes", "tax return deadline"]


def _slug(r):
    words = [r.choice(SLUG_ADJ), r.choice(SLUG_NOUN)]
    if r.random() < 0.5:
        words.append(r.choice(SLUG_NOUN))
    if r.random() < 0.3:
        words.append(str(r.randint(2, 999)))
    return "-".join(words)


LINK_DOMAINS = ["en.wikipedia.org", "www.example.com", "docs.python.org", "developer.mozilla.org", "github.com",
                "stackoverflow.com", "news.ycombinator.com", "www.bbc.co.uk", "www.youtube.com", "www.amazon.de",
                "medium.com", "www.nytimes.com", "cdn.example.net", "shop.example", "www.reddit.com", "www.spiegel.de",
                "www.lemonde.fr", "maps.google.com", "vimeo.com", "docs.example.io", "blog.example.org"]


def _url(r, fragment=None):
    d = r.choice(LINK_DOMAINS)
    kind = r.randrange(8)
    if d == "en.wikipedia.org":
        path = "/wiki/" + r.choice(["Union_(set_theory)", "SELECT_(SQL)", "Order_of_operations", "Café",
                                    "Bash_(Unix_shell)", "Drop_(liquid)", "Null_(SQL)", "Ampersand", "Semicolon"])
    elif d == "www.youtube.com":
        return f"https://www.youtube.com/watch?v={_alnum(r, 11, ALNUM + '-_')}" + (f"&t={r.randint(5, 900)}s" if r.random() < 0.4 else "")
    elif d == "github.com":
        path = f"/{r.choice(['rust-lang', 'nodejs', 'pallets', 'acme-corp', 'torvalds', 'vercel'])}/" + \
               f"{r.choice(['rust', 'node', 'flask', 'widgets', 'linux', 'next.js'])}/" + \
               r.choice([f"issues/{r.randint(1, 30000)}", f"pull/{r.randint(1, 30000)}", "blob/main/README.md",
                         f"releases/tag/v{r.randint(1, 5)}.{r.randint(0, 20)}.{r.randint(0, 9)}"])
    elif kind < 3:
        path = f"/{r.choice(['blog', 'news', 'articles', 'p', 'posts'])}/{r.randint(2019, 2025)}/{r.randint(1, 12):02d}/{_slug(r)}"
    elif kind < 5:
        path = f"/{r.choice(['products', 'item', 'dp', 'shop'])}/{_slug(r)}"
    elif kind < 7:
        path = f"/{r.choice(['docs', 'help', 'en-us/docs', 'guide'])}/{_slug(r)}.html"
    else:
        path = f"/search?q={Q(r.choice(SEARCH_WORDS))}&hl={r.choice(['en', 'de', 'fr'])}"
    url = f"https://{d}{Q(path, safe='/?=&%()_.-')}"
    if fragment or (fragment is None and r.random() < 0.25):
        url += "#" + r.choice(["comments", "section-2", "install", "faq", "top", f"L{r.randint(1, 400)}",
                               f"cite_note-{r.randint(1, 40)}", "reviews"])
    return url


# --------------------------------------------------------------------------------
# Prose in many languages

MONTHS = {
    "en": "January February March April May June July August September October November December".split(),
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember".split(),
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre".split(),
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre".split(),
    "it": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre".split(),
    "nl": "januari februari maart april mei juni juli augustus september oktober november december".split(),
    "pl": "stycznia lutego marca kwietnia maja czerwca lipca sierpnia września października listopada grudnia".split(),
    "ru": "января февраля марта апреля мая июня июля августа сентября октября ноября декабря".split(),
    "el": "Ιανουαρίου Φεβρουαρίου Μαρτίου Απριλίου Μαΐου Ιουνίου Ιουλίου Αυγούστου Σεπτεμβρίου Οκτωβρίου "
          "Νοεμβρίου Δεκεμβρίου".split(),
    "tr": "Ocak Şubat Mart Nisan Mayıs Haziran Temmuz Ağustos Eylül Ekim Kasım Aralık".split(),
    "hi": "जनवरी फ़रवरी मार्च अप्रैल मई जून जुलाई अगस्त सितंबर अक्टूबर नवंबर दिसंबर".split(),
}


def _ldate(r, lang):
    d, m, y = r.randint(1, 28), r.randint(1, 12), r.randint(2023, 2025)
    if lang == "en":
        return r.choice([f"{MONTHS['en'][m - 1]} {d}", f"{m:02d}/{d:02d}/{y}", f"{d} {MONTHS['en'][m - 1][:3]} {y}"])
    if lang == "de":
        return r.choice([f"{d:02d}.{m:02d}.{y}", f"{d}. {MONTHS['de'][m - 1]}"])
    if lang in ("fr", "it", "es", "nl", "pl", "ru", "el", "tr", "hi"):
        if r.random() < 0.5:
            sep = "." if lang in ("ru", "pl", "tr") else "/"
            return f"{d:02d}{sep}{m:02d}{sep}{y}"
        mon = MONTHS[lang][m - 1]
        return {"es": f"{d} de {mon}", "fr": f"{d} {mon}" if d != 1 else f"1er {mon}"}.get(lang, f"{d} {mon}")
    if lang in ("zh", "ja"):
        return r.choice([f"{m}月{d}日", f"{y}年{m}月{d}日"])
    if lang == "ko":
        return f"{m}월 {d}일"
    if lang == "he":
        return f"{d}.{m}"
    return f"{d:02d}/{m:02d}/{y}"


def _ltime(r, lang):
    h, mi = r.randint(8, 21), r.choice([0, 15, 30, 45])
    if lang == "en" and r.random() < 0.5:
        return f"{(h - 1) % 12 + 1}:{mi:02d} {'PM' if h >= 12 else 'AM'}"
    if lang == "fr" and r.random() < 0.5:
        return f"{h}h{mi:02d}" if mi else f"{h}h"
    return f"{h}:{mi:02d}"


def _lprice(r, lang):
    a = r.randint(3, 400)
    c = r.choice([0, 49, 90, 95, 99])
    return {
        "en": f"${a}.{c:02d}" if r.random() < 0.7 else f"£{a}",
        "de": f"{a},{c:02d} €", "fr": f"{a},{c:02d} €", "es": f"{a},{c:02d} €", "it": f"€ {a},{c:02d}",
        "pt": f"R$ {a},{c:02d}", "nl": f"€ {a},{c:02d}", "pl": f"{a},{c:02d} zł", "ru": f"{a * 90} ₽",
        "el": f"{a},{c:02d}€", "tr": f"₺{a * 30}", "ar": f"{a * 3} ر.س", "he": f"₪{a}.{c:02d}",
        "hi": f"₹{a * 80:,}", "zh": f"¥{a * 7}", "ja": f"{a * 150:,}円", "ko": f"{a * 1300:,}원",
        "vi": f"{a * 25000:,}₫".replace(",", "."),
    }[lang]


PROSE = {
    "en": {
        "pre": ["Hi,", "Hello!", "Hey there,", "Good morning,", "Dear support team,", ""],
        "t": ["I ordered «thing» on «date» and it still hasn't arrived.", "Is «thing» also available in «color»?",
              "Thanks «name»! Delivery to «city» took only «n» days.",
              "We're «n» people; can we book a table for «day» at «time»?",
              "The price dropped to «price» -- great deal.", "Could you send the invoice for order #«order» to my email?",
              "My parcel has been stuck in «city» since «day».",
              "Love the new design, but the font is a bit small on my phone.",
              "Is it possible to change the delivery address after checkout?"],
        "post": ["Thanks!", "Cheers, «name»", "Best regards,\n«name»", "Thank you in advance.", ""],
        "things": ["the blue jacket", "a pair of running shoes", "the espresso machine", "a phone case",
                   "the standing desk", "two mugs", "the hiking backpack"],
        "colors": ["red", "navy", "forest green", "black", "white", "beige"],
        "days": "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(),
        "cities": ["London", "New York", "Dublin", "Sydney", "Toronto", "Austin", "Cape Town"],
        "names": ["Emma", "Liam", "Olivia", "Noah", "Siobhan", "Jack", "Priya", "Mateo"],
    },
    "de": {
        "pre": ["Hallo,", "Guten Tag,", "Liebes Support-Team,", "Moin!", ""],
        "t": ["Ich habe am «date» «thing» bestellt, aber noch keine Versandbestätigung erhalten.",
              "Gibt es «thing» auch in «color»?", "Vielen Dank, «name»! Die Lieferung nach «city» hat nur «n» Tage gedauert.",
              "Wir sind «n» Personen und möchten am «day» um «time» Uhr einen Tisch reservieren.",
              "Leider ist «thing» beschädigt angekommen – ich hätte gern mein Geld zurück («price»).",
              "Können Sie mir bitte die Rechnung zur Bestellung Nr. «order» per E-Mail schicken?",
              "Grüße aus «city»! Das Wetter ist herrlich, «n»0 °C und Sonne."],
        "post": ["Viele Grüße\n«name»", "Danke im Voraus!", "MfG, «name»", "Schöne Grüße aus «city»", ""],
        "things": ["die Jacke", "das Ladekabel", "die Kaffeemühle", "das Buch", "die Lampe", "die Tasche",
                   "das Fahrradschloss"],
        "colors": ["Rot", "Blau", "Grün", "Schwarz", "Weiß", "Grau"],
        "days": "Montag Dienstag Mittwoch Donnerstag Freitag Samstag Sonntag".split(),
        "cities": ["Berlin", "München", "Köln", "Hamburg", "Düsseldorf", "Zürich", "Wien"],
        "names": ["Jürgen", "Anke", "Lukas", "Sophie", "Jörg", "Mareike", "Björn", "Gül"],
    },
    "fr": {
        "pre": ["Bonjour,", "Bonsoir,", "Salut !", "Madame, Monsieur,", ""],
        "t": ["J'ai commandé «thing» le «date», mais je n'ai toujours rien reçu.",
              "Est-ce que «thing» existe aussi en «color» ?", "Merci «name» ! La livraison à «city» n'a pris que «n» jours.",
              "Nous serons «n» personnes ; est-il possible de réserver «day» à «time» ?",
              "C'est l'été : on part à «city» avec les enfants, qu'en pensez-vous ?",
              "Le prix est passé à «price» — c'est « normal » ?", "L'hôtel était magnifique et le personnel très aimable."],
        "post": ["Cordialement,\n«name»", "Merci d'avance !", "Bonne journée,", "Bises, «name»", ""],
        "things": ["la veste", "le sac à dos", "la lampe", "le chargeur", "la cafetière", "le livre", "l'écharpe"],
        "colors": ["rouge", "bleu", "vert", "noir", "blanc", "gris"],
        "days": "lundi mardi mercredi jeudi vendredi samedi dimanche".split(),
        "cities": ["Paris", "Lyon", "Marseille", "Bordeaux", "Genève", "Montréal", "Bruxelles"],
        "names": ["Amélie", "Théo", "Chloé", "François", "Zoé", "Hélène", "Jérôme"],
    },
    "es": {
        "pre": ["Hola,", "Buenas tardes,", "¡Hola!", "Estimados señores:", ""],
        "t": ["Pedí «thing» el «date» y todavía no ha llegado.", "¿Tienen «thing» en «color»? Es un regalo para «name».",
              "¡Muchas gracias! El envío a «city» tardó solo «n» días.",
              "Somos «n» personas, ¿podemos reservar para el «day» a las «time»?",
              "El precio bajó a «price», ¡qué buena oferta!", "¿Dónde está la estación de tren más cercana, por favor?",
              "Me encanta el café con leche y un poco de azúcar."],
        "post": ["Un saludo,\n«name»", "¡Gracias de antemano!", "Atentamente,", ""],
        "things": ["la chaqueta", "la mochila", "el cargador", "la cafetera", "el libro", "la lámpara"],
        "colors": ["rojo", "azul", "verde", "negro", "blanco"],
        "days": "lunes martes miércoles jueves viernes sábado domingo".split(),
        "cities": ["Madrid", "Barcelona", "Sevilla", "Valencia", "Bilbao", "Ciudad de México", "Buenos Aires"],
        "names": ["José", "María", "Lucía", "Íñigo", "Sofía", "Martín", "Begoña"],
    },
    "it": {
        "pre": ["Ciao,", "Buongiorno,", "Salve,", "Gentile assistenza,", ""],
        "t": ["Ho ordinato «thing» il «date» ma non è ancora arrivato nulla.", "Avete «thing» anche in «color»?",
              "Grazie mille, «name»! La spedizione a «city» ha richiesto solo «n» giorni.",
              "Siamo in «n»: è possibile prenotare per «day» alle «time»?",
              "L'albergo era bellissimo e lo staff molto gentile, torneremo a «city»!",
              "Il prezzo è sceso a «price», perché non l'ho visto prima?"],
        "post": ["Cordiali saluti,\n«name»", "Grazie in anticipo!", "A presto,", ""],
        "things": ["la giacca", "lo zaino", "il caricabatterie", "la moka", "il libro", "la lampada"],
        "colors": ["rosso", "blu", "verde", "nero", "bianco"],
        "days": "lunedì martedì mercoledì giovedì venerdì sabato domenica".split(),
        "cities": ["Roma", "Milano", "Napoli", "Torino", "Firenze", "Bologna"],
        "names": ["Giulia", "Matteo", "Niccolò", "Chiara", "Luca", "Francesca"],
    },
    "pt": {
        "pre": ["Olá,", "Bom dia,", "Boa tarde!", "Prezados,", ""],
        "t": ["Encomendei «thing» no dia «date» e ainda não recebi.", "Vocês têm «thing» na cor «color»?",
              "Muito obrigado, «name»! A entrega em «city» levou só «n» dias.",
              "Somos «n» pessoas; dá para reservar para «day» às «time»?", "O preço caiu para «price», que promoção!",
              "Não consigo alterar o endereço de entrega, podem ajudar?"],
        "post": ["Abraços,\n«name»", "Obrigada desde já!", "Atenciosamente,", ""],
        "things": ["a jaqueta", "a mochila", "o carregador", "a cafeteira", "o livro", "a luminária"],
        "colors": ["azul", "verde", "preta", "branca", "cinza", "vermelha"],
        "days": ["segunda-feira", "terça-feira", "quarta-feira", "quinta-feira", "sexta-feira", "sábado", "domingo"],
        "cities": ["Lisboa", "Porto", "São Paulo", "Rio de Janeiro", "Belo Horizonte", "Coimbra"],
        "names": ["João", "Ana", "Conceição", "Gonçalo", "Inês", "Tiago"],
    },
    "nl": {
        "pre": ["Hallo,", "Goedemiddag,", "Beste klantenservice,", "Hoi!", ""],
        "t": ["Ik heb op «date» «thing» besteld, maar nog niets ontvangen.", "Is «thing» ook verkrijgbaar in het «color»?",
              "Bedankt, «name»! De levering naar «city» duurde maar «n» dagen.",
              "We zijn met «n» personen; kunnen we op «day» om «time» reserveren?", "De prijs is gezakt naar «price», top!",
              "Mijn pakket ligt al sinds «day» in «city»."],
        "post": ["Met vriendelijke groet,\n«name»", "Alvast bedankt!", "Groetjes, «name»", ""],
        "things": ["de jas", "de rugzak", "de oplader", "het boek", "de lamp", "de koffiemolen"],
        "colors": ["rood", "blauw", "groen", "zwart", "wit"],
        "days": "maandag dinsdag woensdag donderdag vrijdag zaterdag zondag".split(),
        "cities": ["Amsterdam", "Rotterdam", "Utrecht", "Den Haag", "Gent", "Antwerpen"],
        "names": ["Sanne", "Daan", "Bram", "Femke", "Sem", "Joëlle"],
    },
    "pl": {
        "pre": ["Dzień dobry,", "Cześć!", "Witam,", ""],
        "t": ["Zamówiłem «thing» «date», ale paczka jeszcze nie dotarła.",
              "Czy ten produkt jest dostępny w kolorze «color»?", "Dziękuję, «name»! Dostawa trwała tylko «n» dni.",
              "Jest nas «n5» osób; czy można zarezerwować stolik na «time»?", "Cena spadła do «price», super okazja!",
              "Zażółć gęślą jaźń — sprawdzam polskie znaki."],
        "post": ["Pozdrawiam,\n«name»", "Z góry dziękuję!", "Miłego dnia!", ""],
        "things": ["kurtkę", "plecak", "ładowarkę", "książkę", "lampę", "ekspres do kawy"],
        "colors": ["czerwonym", "niebieskim", "zielonym", "czarnym", "białym"],
        "names": ["Łukasz", "Agnieszka", "Paweł", "Małgorzata", "Wojciech", "Zofia"],
    },
    "ru": {
        "pre": ["Здравствуйте!", "Добрый день,", "Привет!", ""],
        "t": ["Я заказал «thing» «date», но посылка ещё не пришла.",
              "Подскажите, пожалуйста, есть ли этот товар в «color» цвете?",
              "Спасибо, «name»! Доставка заняла всего «n24» дня.",
              "Нас будет «n5» человек, можно забронировать столик на «time»?",
              "Цена снизилась до «price» — отличная скидка!", "Отличный сервис, всем рекомендую :)",
              "Подскажите, пожалуйста, как оформить возврат?"],
        "post": ["С уважением,\n«name»", "Заранее спасибо!", "Хорошего дня!", ""],
        "things": ["куртку", "рюкзак", "зарядку", "книгу", "лампу", "кофемолку"],
        "colors": ["красном", "синем", "чёрном", "белом", "зелёном"],
        "names": ["Иван", "Ольга", "Дмитрий", "Наталья", "Сергей", "Юлия"],
    },
    "el": {
        "pre": ["Καλησπέρα,", "Γεια σας,", "Καλημέρα!", ""],
        "t": ["Παρήγγειλα «thing» στις «date» αλλά δεν έχει έρθει ακόμα.", "Υπάρχει και σε «color» χρώμα;",
              "Ευχαριστώ πολύ, «name»! Η παράδοση στην «city» πήρε μόνο «n» μέρες.",
              "Είμαστε «n» άτομα· μπορούμε να κλείσουμε τραπέζι για τις «time»;",
              "Η τιμή έπεσε στα «price», τέλεια!"],
        "post": ["Ευχαριστώ,\n«name»", "Φιλικά,", ""],
        "things": ["ένα μπουφάν", "ένα σακίδιο", "έναν φορτιστή", "ένα βιβλίο", "μια λάμπα"],
        "colors": ["κόκκινο", "μπλε", "μαύρο", "λευκό", "πράσινο"],
        "cities": ["Αθήνα", "Θεσσαλονίκη", "Πάτρα", "Λάρισα", "Κρήτη"],
        "names": ["Γιώργος", "Μαρία", "Νίκος", "Ελένη", "Κώστας", "Δήμητρα"],
    },
    "tr": {
        "pre": ["Merhaba,", "İyi günler,", "Selam!", ""],
        "t": ["«date» tarihinde «thing» sipariş ettim ama henüz gelmedi.", "Bu ürünün «color» rengi var mı?",
              "Teşekkürler «name»! Kargo «city» şehrine sadece «n» günde geldi.",
              "«n» kişiyiz, «time» için masa ayırtabilir miyiz?", "Fiyat «price» oldu, harika bir indirim!",
              "Çok güzel bir otel, personel çok ilgiliydi; İstanbul'a tekrar geleceğiz."],
        "post": ["Saygılarımla,\n«name»", "Şimdiden teşekkürler!", ""],
        "things": ["bir ceket", "bir sırt çantası", "bir şarj aleti", "bir kitap", "bir lamba"],
        "colors": ["kırmızı", "mavi", "siyah", "beyaz", "yeşil"],
        "cities": ["İstanbul", "Ankara", "İzmir", "Bursa", "Antalya"],
        "names": ["Ayşe", "Mehmet", "Çağrı", "Gülşen", "Emre", "Şule"],
    },
    "ar": {
        "pre": ["مرحباً،", "السلام عليكم،", "مساء الخير،", ""],
        "t": ["طلبت «thing» بتاريخ «date» ولم يصل بعد.", "شكراً جزيلاً يا «name»! وصل الطلب إلى «city» خلال «n» أيام.",
              "هل هذا المنتج متوفر باللون «color»؟", "نحن «n» أشخاص، هل يمكن حجز طاولة الساعة «time»؟",
              "انخفض السعر إلى «price»، عرض رائع!"],
        "post": ["مع خالص الشكر،\n«name»", "شكراً مقدماً", ""],
        "things": ["حقيبة ظهر", "سترة", "شاحناً", "كتاباً", "مصباحاً"],
        "colors": ["الأحمر", "الأزرق", "الأسود", "الأبيض"],
        "cities": ["الرياض", "دبي", "القاهرة", "عمّان", "الدار البيضاء"],
        "names": ["أحمد", "فاطمة", "محمد", "ليلى", "عمر", "نور"],
    },
    "he": {
        "pre": ["שלום,", "היי,", "ערב טוב,", ""],
        "t": ["הזמנתי «thing» ב-«date» ועדיין לא הגיע.", "תודה רבה, «name»! המשלוח ל«city» לקח רק «n» ימים.",
              "האם המוצר קיים גם בצבע «color»?", "אנחנו «n» אנשים, אפשר להזמין שולחן ל-«time»?",
              "המחיר ירד ל-«price», מבצע מעולה!"],
        "post": ["תודה מראש!", "בברכה,\n«name»", ""],
        "things": ["תיק גב", "מעיל", "מטען", "ספר", "מנורה"],
        "colors": ["אדום", "כחול", "שחור", "לבן"],
        "cities": ["תל אביב", "ירושלים", "חיפה", "באר שבע"],
        "names": ["נועה", "דוד", "יעל", "איתי", "מיכל", "אורי"],
    },
    "hi": {
        "pre": ["नमस्ते,", "नमस्कार!", "हेलो,", ""],
        "t": ["मैंने «date» को «thing» ऑर्डर किया था, लेकिन अभी तक नहीं मिला।",
              "धन्यवाद «name»! «city» में डिलीवरी सिर्फ़ «n» दिनों में हो गई।", "क्या यह उत्पाद «color» रंग में उपलब्ध है?",
              "हम «n» लोग हैं, क्या «time» बजे के लिए टेबल बुक हो सकती है?", "कीमत घटकर «price» हो गई, बढ़िया ऑफ़र!"],
        "post": ["धन्यवाद,\n«name»", "शुभकामनाएँ!", ""],
        "things": ["एक बैग", "एक जैकेट", "एक चार्जर", "एक किताब", "एक लैंप"],
        "colors": ["लाल", "नीले", "काले", "सफ़ेद"],
        "cities": ["दिल्ली", "मुंबई", "पुणे", "जयपुर", "बेंगलुरु"],
        "names": ["राहुल", "प्रिया", "अमित", "सुनीता", "अर्जुन", "अनन्या"],
    },
    "zh": {
        "pre": ["你好，", "您好！", "请问，", ""],
        "t": ["我在«date»订购了«thing»，但是到现在还没有收到。", "谢谢«name»！寄到«city»只用了«n»天。", "请问这款有«color»的吗？",
              "我们一共«n»个人，可以预订«time»的位子吗？", "价格降到«price»了，太划算了！", "质量很好，包装也很用心，五星好评👍"],
        "post": ["谢谢！", "祝好，«name»", ""],
        "things": ["一个背包", "一件外套", "一个充电器", "一本书", "一盏台灯"],
        "colors": ["红色", "蓝色", "黑色", "白色"],
        "cities": ["北京", "上海", "广州", "成都", "杭州", "深圳"],
        "names": ["小明", "王芳", "李伟", "张静", "刘洋", "陈晨"],
    },
    "ja": {
        "pre": ["こんにちは。", "お世話になっております。", "すみません、", ""],
        "t": ["«date»に«thing»を注文しましたが、まだ届いていません。", "«name»さん、ありがとうございます！«city»まで«n»日で届きました。",
              "この商品の«color»はありますか？", "«n»名で«time»に予約できますか？", "価格が«price»に下がっていました。お得ですね！",
              "ご返信ありがとうございます。"],
        "post": ["よろしくお願いします。", "ありがとうございました。", ""],
        "things": ["リュック", "ジャケット", "充電器", "本", "デスクライト"],
        "colors": ["赤", "青", "黒", "白"],
        "cities": ["東京", "大阪", "京都", "札幌", "福岡"],
        "names": ["佐藤", "鈴木", "高橋", "田中", "伊藤"],
    },
    "ko": {
        "pre": ["안녕하세요,", "저기요,", ""],
        "t": ["«date»에 «thing» 주문했는데 아직 안 왔어요.", "«name»님 감사합니다! «city»까지 «n»일 만에 도착했어요.",
              "이 상품 «color» 색상도 있나요?", "«n»명인데 «time»에 예약 가능할까요?", "가격이 «price»(으)로 내려갔네요, 대박!",
              "배송 빠르고 포장도 꼼꼼해요 ㅎㅎ"],
        "post": ["감사합니다!", "좋은 하루 되세요~", ""],
        "things": ["가방", "재킷", "충전기", "책", "스탠드"],
        "colors": ["빨간", "파란", "검은", "흰"],
        "cities": ["서울", "부산", "인천", "대구", "제주"],
        "names": ["민준", "서연", "지훈", "하은", "도윤"],
    },
    "vi": {
        "pre": ["Xin chào,", "Chào shop,", "Chào bạn,", ""],
        "t": ["Tôi đã đặt «thing» vào ngày «date» nhưng vẫn chưa nhận được.",
              "Cảm ơn «name» nhiều! Giao hàng đến «city» chỉ mất «n» ngày.", "Sản phẩm này có màu «color» không?",
              "Chúng tôi có «n» người, có thể đặt bàn lúc «time» không?", "Giá đã giảm còn «price», quá hời!",
              "Hàng đẹp, đóng gói cẩn thận, sẽ ủng hộ shop tiếp ạ."],
        "post": ["Cảm ơn!", "Trân trọng,\n«name»", ""],
        "things": ["một chiếc ba lô", "một chiếc áo khoác", "một bộ sạc", "một cuốn sách", "một chiếc đèn bàn"],
        "colors": ["đỏ", "xanh", "đen", "trắng"],
        "cities": ["Hà Nội", "TP. Hồ Chí Minh", "Đà Nẵng", "Huế", "Cần Thơ"],
        "names": ["Minh", "Lan", "Hùng", "Thảo", "Dũng", "Ngọc"],
    },
}

EMOJI = ["🙂", "😀", "😂", "🙏", "👍", "🎉", "❤️", "🔥", "😅", "🤔", "✅", "🚀", "☕", "🌧️", "😍", "👀", "💯", "🇩🇪", "🇫🇷",
         "🇯🇵", "🤷‍♀️", "👩🏽‍💻", "🐛"]
HASHTAGS = ["#travel", "#foodie", "#tbt", "#sale", "#summer2024", "#devlife", "#100DaysOfCode", "#BlackFriday",
            "#gardening", "#photography", "#München", "#café", "#nofilter", "#rustlang", "#WorldCup"]
HANDLES = ["@anna_k", "@dev.ops", "@support", "@MikeTheBaker", "@jürgen", "@ciara.o", "@team-lead", "@kenji_t",
           "@the.real.bob", "@marketing", "@ops_oncall"]


def _lang_sentence(r, lang):
    d = PROSE[lang]
    t = r.choice(d["t"])
    return _sub(t, thing=r.choice(d["things"]), color=r.choice(d["colors"]),
                name=r.choice(d["names"]), city=r.choice(d.get("cities", ["—"])),
                day=r.choice(d.get("days", ["—"])), date=_ldate(r, lang), time=_ltime(r, lang),
                n=r.randint(2, 9), n5=r.randint(5, 12), n24=r.randint(2, 4), price=_lprice(r, lang),
                order=r.randint(10000, 999999))


def prose_text(r, lang=None, sentences=None):
    lang = lang or r.choice(list(PROSE))
    d = PROSE[lang]
    parts = []
    pre = r.choice(d["pre"])
    if pre and r.random() < 0.6:
        parts.append(pre)
    for _ in range(sentences or r.randint(1, 3)):
        parts.append(_lang_sentence(r, lang))
    if r.random() < 0.35:
        parts.append(r.choice(EMOJI) * r.randint(1, 2))
    if r.random() < 0.12:
        parts.append(r.choice(HASHTAGS))
    post = _sub(r.choice(d["post"]), name=r.choice(d["names"]), city=r.choice(d.get("cities", [""])))
    text = " ".join(p for p in parts if p)
    if post and r.random() < 0.5:
        text += "\n\n" + post
    return text


# English prose that innocently carries SQL, shell and JavaScript words and punctuation.

KW_CLAUSES = [
    "please select «n» «things» from the menu and we'll do the rest",
    "the union meeting moved to «day» at «time»",
    "don't drop the «thing» -- it's fragile",
    "can you update the order by «day»?",
    "where do I insert the SIM card on the «device»?",
    "I'd like to delete my old address from the account",
    "the exec summary is on page «n» (see table «n2»)",
    "sleep: «n» hours; coffee: «n2» cups; productivity: zero :)",
    "the benchmark says «pct» faster & «pct2» cheaper",
    "my kid wrote a script for the school play <3",
    "weather alert for «city» tonight, stay safe",
    "my performance eval is due «date», ugh",
    "is it «adj» or «adj2»? not sure, and I don't like guessing",
    "O'Brien & Sons said \"«quote»\"",
    "we're at «address» | ring twice",
    "call «phone» or email «email»",
    "the price went from «price» to «price2» (that's «pct» off!)",
    "step 1 -> open the lid; step 2 -> pour; step 3 => enjoy",
    "it's 50/50 whether the table fits where the couch was",
    "from «city» to «city2» by train, then a «n»0-minute walk",
    "«name» said: 'I'll be there by «time»'",
    "the union of sets A and B is everything in A or B, not just the overlap",
    "order of operations: brackets, exponents, then the rest",
    "sold out?! I've been waiting since «time» :(",
    "1/2 cup sugar & 2 tbsp butter; bake at 180°C for «n»0 min",
    "no, I didn't click 'like' -- the cat did",
    "«n» stars, would order again! 10/10",
    "the $«n» plan or the «n2»€ plan, which one is better?",
    "l'été à Paris was lovely, c'est la vie",
    "I selected «n» items but the cart shows «n2» ¯\\_(ツ)_/¯",
    "agenda: (1) budget, (2) hiring, (3) where to eat",
    "sorry for the typo -- I meant 'from', not 'form'",
    "please don't sleep on this deal; it ends «day» at «time»",
    "alert me when it's back in stock, or just email me",
    "they played \"Drop It Like It's Hot\" and then «song»",
    "is the «thing» compatible with model «model»? (asking for a friend)",
    "«pct» of us voted for the cheaper option; the rest didn't care",
    "room «n»«letter», 2nd floor -- the one with the big table",
    "«name»'s birthday is «date» #surprise (don't tell!)",
    "and/or: both work here, it's not a big deal",
    "I like #«tag» and @«handle»'s posts a lot",
    "select all, copy & paste -- done",
    "we'll join the others at «time»; left or right at the fork?",
    "the 'where' and 'when' are still TBD (50% sure it's «day»)",
    "tabs vs. spaces? spaces, obviously ;)",
    "Q&A at «time» -- bring questions!",
    "it's #«n» on the list, right after 'buy milk' & 'call mum'",
    "5 > 3 and 2 < 4; my son's math homework is done",
    "update: the table from IKEA arrived, drop-off was at «time»",
    "execute the plan, then relax -- easy, right?",
    "«name» O'Connor (née «last») won the raffle",
    "if it rains, or if it's below 5°C, we stay in",
    "it costs «price» + shipping (~«n»%)",
    "rock & roll | jazz | blues: pick one",
    "price: «price»; qty: «n»; total: do the math :P",
    "like, where's the «thing»?? -- found it, never mind",
]
KW_FILL = {
    "things": ["pizzas", "toppings", "colours", "books", "sizes", "seats", "dates"],
    "thing": ["vase", "laptop", "cake", "glass table", "TV", "mirror", "charger", "bike"],
    "device": ["iPhone 15", "Pixel 8", "Galaxy S24", "old Nokia", "tablet", "router"],
    "adj": ["blue", "teal", "too big", "too small", "cheap", "worth it", "vegan"],
    "quote": ["quality first", "we deliver, rain or shine", "no refunds after 30 days", "or else!", "select wisely"],
    "song": ["'Union Street'", "'Sleep Now in the Fire'", "'Select Your Destiny'", "'Order & Chaos'", "'Drop'"],
    "model": ["X-200", "A1234", "T-800 (2nd gen)", "S/N 44-B", "Mk II"],
    "tag": ["foodie", "tbt", "SQLSaturday", "bash2024", "JavaScriptDay", "selectcommittee"],
}


def _price_en(r):
    return r.choice([f"${r.randint(2, 300)}", f"${r.randint(2, 300)}.{r.randint(0, 99):02d}", f"{r.randint(2, 300)}€",
                     f"€{r.randint(2, 300)},{r.randint(0, 99):02d}", f"£{r.randint(2, 300)}", f"US$ {r.randint(2, 300)}"])


def keyword_text(r):
    n = r.randint(1, 4)
    out = []
    for i in range(n):
        c = r.choice(KW_CLAUSES)
        first, last = _name(r)
        c = _sub(c, n=r.randint(2, 12), n2=r.randint(2, 30), things=r.choice(KW_FILL["things"]),
                 thing=r.choice(KW_FILL["thing"]), device=r.choice(KW_FILL["device"]), adj=r.choice(KW_FILL["adj"]),
                 adj2=r.choice(KW_FILL["adj"]), quote=r.choice(KW_FILL["quote"]), song=r.choice(KW_FILL["song"]),
                 model=r.choice(KW_FILL["model"]), tag=r.choice(KW_FILL["tag"]), handle=r.choice(HANDLES)[1:],
                 day=r.choice(PROSE["en"]["days"]), time=_ltime(r, "en"), date=_ldate(r, "en"),
                 city=r.choice(CITIES)[0], city2=r.choice(CITIES)[0], pct=f"{r.randint(5, 95)}%",
                 pct2=f"{r.randint(5, 95)}%", price=_price_en(r), price2=_price_en(r), name=first, last=last,
                 address=_street(r), phone=_phone(r), email=_email(r), letter=r.choice("ABCDEF"))
        out.append(c)
    text = ""
    for i, c in enumerate(out):
        if i == 0:
            text = _cap(c)
        else:
            j = r.choice([". ", "; ", " -- ", "! ", " | ", " & ", ", and ", "... ", "\n", " - "])
            text += j + (_cap(c) if j in (". ", "! ", "... ", "\n") else c)
    if text[-1] not in ".?!)":
        text += r.choice([".", "!", "", " :)", " <3", " :D", " ;)", " xD", "!!", "?", " ^^"])
    if r.random() < 0.25:
        text += " " + r.choice(EMOJI)
    if r.random() < 0.15:
        text += " " + r.choice(HASHTAGS) + " " + r.choice(HANDLES)
    return text


# --------------------------------------------------------------------------------
# Developer forum posts that quote code

NOUNS = ["user", "order", "item", "invoice", "customer", "product", "report", "session", "event", "ticket", "payment",
         "account", "message", "task", "file", "record", "post", "comment", "job", "shipment", "booking", "project",
         "team", "note", "asset", "device", "metric", "review"]
APPS = ["api", "webapp", "billing", "worker", "frontend", "shop", "blog", "crm", "etl", "gateway", "auth", "search"]
DIRS = ["logs", "data", "uploads", "tmp", "reports", "exports", "build", "dist", "backup", "archive"]
EXTS = ["log", "csv", "json", "txt", "tmp", "bak", "png", "xml"]
COLS = ["status", "region", "country", "category", "plan", "source", "currency", "channel"]
BRANCHES = ["main", "develop", "feature/login-form", "fix/timezone-bug", "release/2.4", "chore/deps"]


def _ids(r):
    n = r.choice(NOUNS)
    ns = n + "s"
    N = _cap(n)
    return dict(n=n, ns=ns, N=N, Ns=_cap(ns), tbl=ns, nid=n + "_id", nId=n + "Id", app=r.choice(APPS),
                dir=r.choice(DIRS), ext=r.choice(EXTS), k=r.randint(2, 50), m=r.randint(2, 9), port=r.choice(
                    [3000, 5000, 5432, 8000, 8080, 8443, 9000, 6379, 27017, 4200]), col=r.choice(COLS),
                branch=r.choice(BRANCHES), num=r.randint(100, 9999), file=f"{n}s_{r.randint(2019, 2025)}",
                old=r.choice(["foo", "staging", "v1", "localhost:3000", "http://", "oldname"]),
                new=r.choice(["bar", "production", "v2", "api.example.com", "https://", "newname"]))


def _c(r, *templates):
    return _sub(r.choice(templates), **_ids(r))


def code_shell(r):
    return "bash", _c(r,
        "#!/usr/bin/env bash\nset -euo pipefail\n\nfor f in «dir»/*.«ext»; do\n  gzip -9 \"$f\" && mv \"$f.gz\" /backup/«dir»/\ndone",
        "find ./«dir» -type f -name '*.«ext»' -mtime +«k» -print -delete",
        "curl -s -H \"Authorization: Bearer $TOKEN\" \"https://api.example.com/v1/«ns»?limit=«k»\" \\\n  | jq -r '.data[] | \"\\(.id)\\t\\(.name)\"'",
        "DATE=$(date +%F)\ntar -czf \"/backups/«app»-$DATE.tar.gz\" -C /srv «app»\nrsync -avz --delete /backups/ backup@files.example.com:/data/«app»/",
        "ps aux | grep '[n]ode' | awk '{print $2}' | xargs -r kill -TERM",
        "git fetch origin\ngit rebase -i HEAD~«m»\ngit push --force-with-lease origin «branch»",
        "sed -i.bak 's/«old»/«new»/g' config/*.yml",
        "while IFS=, read -r id name email; do\n  echo \"Processing $name <$email>\"\ndone < «file».csv",
        "sudo journalctl -u «app».service --since \"1 hour ago\" | grep -i error | tail -n «k»",
        "ls *.png | xargs -P 4 -I{} convert {} -resize 50% small/{}",
        "export PATH=\"$HOME/.local/bin:$PATH\"\npython3 -m venv .venv && source .venv/bin/activate\npip install -r requirements.txt",
        "count=$(wc -l < «file».csv)\nif [ \"$count\" -gt «num» ]; then\n  split -l «num» «file».csv part_\nfi",
        "docker ps --format '{{.Names}}\\t{{.Status}}' | grep «app»\ndocker logs -f --tail 100 «app»-1",
        "sudo lsof -i :«port» | grep LISTEN",
        "CC := gcc\nCFLAGS := -O2 -Wall -Wextra\nSRC := $(wildcard src/*.c)\nOBJ := $(SRC:.c=.o)\n\n«app»: $(OBJ)\n\t$(CC) $(CFLAGS) -o $@ $^\n\n.PHONY: clean\nclean:\n\trm -f $(OBJ) «app»",
        ".PHONY: test lint\n\ntest:\n\tpytest -q tests/ -k \"not slow\"\n\nlint:\n\truff check . && mypy «app»/",
        "for i in $(seq 1 «k»); do\n  curl -s -o /dev/null -w \"%{http_code} %{time_total}\\n\" https://staging.example.com/health\ndone",
        "kubectl get pods -n «app» -o wide | grep -v Running\nkubectl rollout restart deployment/«app» -n «app»",
    ), "shell"


def code_powershell(r):
    if r.random() < 0.35:
        return "bat", _c(r,
            "@echo off\nsetlocal enabledelayedexpansion\nset SRC=C:\\«dir»\nset DEST=D:\\Backup\\%DATE:~-4%-%DATE:~3,2%-%DATE:~0,2%\n"
            "if not exist \"%DEST%\" mkdir \"%DEST%\"\nfor %%f in (\"%SRC%\\*.«ext»\") do (\n    copy /Y \"%%f\" \"%DEST%\\\" >nul\n"
            "    echo Copied %%~nxf\n)\nendlocal",
            "robocopy C:\\«dir» \\\\nas01\\backup\\«dir» /MIR /R:2 /W:5 /LOG:C:\\logs\\robocopy.log",
            "netstat -ano | findstr :«port»\ntaskkill /PID «num» /F",
            "@echo off\nset /p NAME=Enter project name: \nmkdir \"%NAME%\\src\" \"%NAME%\\docs\"\necho Created %NAME% & pause",
            "set PATH=%PATH%;C:\\Program Files\\Git\\cmd\nwhere git && git --version",
        ), "cmd"
    return "powershell", _c(r,
        "Get-ChildItem -Path C:\\«dir» -Filter *.«ext» -Recurse |\n    Where-Object { $_.LastWriteTime -lt (Get-Date).AddDays(-«k») } |\n    Remove-Item -WhatIf",
        "$headers = @{ Authorization = \"Bearer $token\" }\n$response = Invoke-RestMethod -Uri \"https://api.example.com/v1/«ns»?top=«k»\" -Headers $headers\n"
        "$response.data | Select-Object id, name | Export-Csv -Path .\\«ns».csv -NoTypeInformation",
        "Get-Service | Where-Object {$_.Status -eq 'Running'} | Sort-Object DisplayName | Format-Table -AutoSize",
        "$servers = @('web01', 'web02', 'db01')\nforeach ($s in $servers) {\n    try {\n        Test-Connection -ComputerName $s -Count 1 -ErrorAction Stop | Out-Null\n"
        "        Write-Host \"$s is up\" -ForegroundColor Green\n    } catch {\n        Write-Warning \"$s is unreachable: $($_.Exception.Message)\"\n    }\n}",
        "Import-Csv .\\«file».csv | Group-Object -Property «col» | Select-Object Name, Count | Sort-Object Count -Descending",
        "$env:ASPNETCORE_ENVIRONMENT = 'Development'\ndotnet run --project .\\src\\«N».Api\\«N».Api.csproj",
        "Get-Process | Sort-Object WS -Descending | Select-Object -First «m» Name, Id, @{n='MB';e={[math]::Round($_.WS/1MB,1)}}",
    ), "PowerShell"


def code_python(r):
    return "python", _c(r,
        "import os\n\ntotal = 0\nfor root, dirs, files in os.walk('«dir»'):\n    total += sum(1 for f in files if f.endswith('.«ext»'))\nprint(total)",
        "import pandas as pd\n\ndf = pd.read_csv(\"«file».csv\", parse_dates=[\"created_at\"])\nsummary = (df.groupby(\"«col»\")[\"amount\"]\n"
        "             .agg([\"count\", \"sum\", \"mean\"])\n             .sort_values(\"sum\", ascending=False))\nprint(summary.head(«k»))",
        "import requests\nfrom requests.adapters import HTTPAdapter, Retry\n\ns = requests.Session()\ns.mount(\"https://\", HTTPAdapter(max_retries=Retry(total=«m», backoff_factor=0.5)))\n"
        "resp = s.get(\"https://api.example.com/v1/«ns»\", params={\"page\": 1, \"per_page\": «k»}, timeout=10)\nresp.raise_for_status()\n«ns» = resp.json()[\"data\"]",
        "from dataclasses import dataclass\n\n@dataclass(order=True)\nclass «N»:\n    priority: int\n    name: str = \"\"\n\n«ns» = sorted([«N»(3, \"c\"), «N»(1, \"a\")], key=lambda x: (x.priority, x.name))",
        "@app.route(\"/«ns»/<int:«nid»>\", methods=[\"GET\"])\ndef get_«n»(«nid»):\n    «n» = «N».query.get_or_404(«nid»)\n    return jsonify(«n».to_dict())",
        "import asyncio\nimport aiohttp\n\nasync def fetch(session, url):\n    async with session.get(url) as resp:\n        return await resp.json()\n\n"
        "async def main(urls):\n    async with aiohttp.ClientSession() as session:\n        return await asyncio.gather(*(fetch(session, u) for u in urls))",
        "import subprocess\n\nout = subprocess.run([\"git\", \"log\", \"--oneline\", \"-n\", \"«k»\"], capture_output=True, text=True, check=True)\nprint(out.stdout)",
        "import sqlite3\n\nconn = sqlite3.connect(\"«app».db\")\ncur = conn.execute(\n    \"SELECT id, name FROM «tbl» WHERE created_at > ? ORDER BY created_at DESC LIMIT ?\",\n    (since, «k»),\n)\nrows = cur.fetchall()",
        "for name, score in results.items():\n    print(f\"{name!r:>12} | {score:6.2f} | {'*' * int(score)}\")",
        "«ns» = [x for x in data if x.get(\"«col»\") in {\"open\", \"pending\"} and x[\"amount\"] > «k»]\nby_id = {x[\"id\"]: x for x in «ns»}",
        "with open(\"«file».json\", encoding=\"utf-8\") as f:\n    config = json.load(f)\nport = int(os.environ.get(\"PORT\", «port»))",
        "class «N»Serializer(serializers.ModelSerializer):\n    class Meta:\n        model = «N»\n        fields = [\"id\", \"name\", \"created_at\"]\n        read_only_fields = [\"created_at\"]",
    ), "Python"


def code_js(r):
    return r.choice(["js", "javascript", "ts", "tsx", "jsx"]), _c(r,
        "const res = await fetch(`/api/«ns»?page=${page}&limit=«k»`, { headers: { Accept: 'application/json' } });\n"
        "const { data } = await res.json();\nconst total = data.reduce((sum, «n») => sum + «n».amount, 0);",
        "interface «N» {\n  id: string;\n  name: string;\n  tags?: string[];\n  createdAt: Date;\n}\n\n"
        "function groupBy<T, K extends keyof T>(xs: T[], key: K): Map<T[K], T[]> {\n  const m = new Map<T[K], T[]>();\n"
        "  for (const x of xs) m.set(x[key], [...(m.get(x[key]) ?? []), x]);\n  return m;\n}",
        "export function «N»List({ «ns» }: { «ns»: «N»[] }) {\n  if («ns».length === 0) return <p className=\"empty\">No «ns» yet</p>;\n"
        "  return (\n    <ul className=\"«n»-list\">\n      {«ns».map((x) => (\n        <li key={x.id}>\n          {x.name} <small>({x.status})</small>\n"
        "        </li>\n      ))}\n    </ul>\n  );\n}",
        "app.get('/api/«ns»/:id', async (req, res, next) => {\n  try {\n    const «n» = await «N».findById(req.params.id);\n"
        "    if (!«n») return res.status(404).json({ error: 'not found' });\n    res.json(«n»);\n  } catch (err) {\n    next(err);\n  }\n});",
        "function debounce(fn, ms = «k»0) {\n  let t;\n  return (...args) => {\n    clearTimeout(t);\n    t = setTimeout(() => fn.apply(this, args), ms);\n  };\n}",
        "const city = user?.address?.city ?? 'unknown';\nconst [first, ...rest] = «ns».filter(Boolean);\nconsole.log(`${first.name} and ${rest.length} more`);",
        "import { readFile, writeFile } from 'node:fs/promises';\n\nconst raw = await readFile('./«file».json', 'utf8');\n"
        "const items = JSON.parse(raw).map(({ id, name }) => ({ id, name: name.trim() }));\nawait writeFile('./out.json', JSON.stringify(items, null, 2));",
        "const slug = title\n  .toLowerCase()\n  .normalize('NFKD')\n  .replace(/[^a-z0-9]+/g, '-')\n  .replace(/(^-|-$)/g, '');",
        "const results = await Promise.all(ids.map((id) => api.get(`/«ns»/${id}`).then((r) => r.data)));",
        "useEffect(() => {\n  const id = setInterval(() => setCount((c) => c + 1), 1000);\n  return () => clearInterval(id);\n}, []);",
        "export const «n»Schema = z.object({\n  email: z.string().email(),\n  age: z.number().int().min(18).optional(),\n  role: z.enum(['admin', 'editor', 'viewer']),\n});",
        "const «ns» = new Map();\nfor (const row of rows) {\n  const key = `${row.«col»}:${row.year}`;\n  «ns».set(key, («ns».get(key) || 0) + row.amount);\n}",
    ), "JavaScript"


def code_java(r):
    if r.random() < 0.5:
        return "csharp", _c(r,
            "var totals = «ns»\n    .Where(o => o.CreatedAt >= DateTime.UtcNow.AddDays(-«k»))\n    .GroupBy(o => o.CustomerId)\n"
            "    .Select(g => new { CustomerId = g.Key, Total = g.Sum(o => o.Amount) })\n    .OrderByDescending(x => x.Total)\n    .ToList();",
            "using var client = new HttpClient { BaseAddress = new Uri(\"https://api.example.com/\") };\n"
            "client.DefaultRequestHeaders.Authorization = new AuthenticationHeaderValue(\"Bearer\", token);\n"
            "var «ns» = await client.GetFromJsonAsync<List<«N»>>(\"v1/«ns»?top=«k»\");",
            "public record «N»(int Id, string Name, decimal Price);\n\nstring Describe(«N» x) => x switch\n{\n"
            "    { Price: > «k»0 } => \"expensive\",\n    { Price: 0 } => \"free\",\n    _ => \"normal\"\n};",
            "[HttpGet(\"{id:int}\")]\npublic async Task<ActionResult<«N»Dto>> Get(int id)\n{\n    var «n» = await _db.«Ns».FindAsync(id);\n"
            "    return «n» is null ? NotFound() : Ok(_mapper.Map<«N»Dto>(«n»));\n}",
            "builder.Services.AddDbContext<AppDbContext>(o =>\n    o.UseNpgsql(builder.Configuration.GetConnectionString(\"Default\")));",
        ), "C#"
    return "java", _c(r,
        "List<String> names = «ns».stream()\n    .filter(«N»::isActive)\n    .map(«N»::getName)\n    .sorted()\n    .collect(Collectors.toList());",
        "@RestController\n@RequestMapping(\"/api/«ns»\")\npublic class «N»Controller {\n    private final «N»Repository repo;\n\n"
        "    public «N»Controller(«N»Repository repo) { this.repo = repo; }\n\n    @GetMapping(\"/{id}\")\n"
        "    public ResponseEntity<«N»> get(@PathVariable Long id) {\n        return repo.findById(id).map(ResponseEntity::ok)\n"
        "                   .orElse(ResponseEntity.notFound().build());\n    }\n}",
        "try (PreparedStatement ps = conn.prepareStatement(\"SELECT id, name FROM «tbl» WHERE «col» = ? LIMIT ?\")) {\n"
        "    ps.setString(1, «col»);\n    ps.setInt(2, «k»);\n    try (ResultSet rs = ps.executeQuery()) {\n"
        "        while (rs.next()) { out.add(new «N»(rs.getLong(1), rs.getString(2))); }\n    }\n}",
        "try (BufferedReader br = Files.newBufferedReader(Path.of(\"«file».csv\"), StandardCharsets.UTF_8)) {\n"
        "    long count = br.lines().skip(1).filter(l -> !l.isBlank()).count();\n    System.out.printf(\"%d rows%n\", count);\n}",
        "Map<String, Long> byStatus = «ns».stream()\n    .collect(Collectors.groupingBy(«N»::getStatus, TreeMap::new, Collectors.counting()));",
        "@Entity\n@Table(name = \"«tbl»\")\npublic class «N» {\n    @Id @GeneratedValue(strategy = GenerationType.IDENTITY)\n    private Long id;\n\n"
        "    @Column(nullable = false, length = 120)\n    private String name;\n}",
    ), "Java"


def code_rust(r):
    if r.random() < 0.45:
        return "go", _c(r,
            "func get«N»(w http.ResponseWriter, r *http.Request) {\n\tid := r.PathValue(\"id\")\n\t«n», err := store.Find(r.Context(), id)\n"
            "\tif errors.Is(err, sql.ErrNoRows) {\n\t\thttp.Error(w, \"not found\", http.StatusNotFound)\n\t\treturn\n\t}\n"
            "\tw.Header().Set(\"Content-Type\", \"application/json\")\n\tjson.NewEncoder(w).Encode(«n»)\n}",
            "var wg sync.WaitGroup\nresults := make(chan Result, len(urls))\nfor _, u := range urls {\n\twg.Add(1)\n"
            "\tgo func(u string) {\n\t\tdefer wg.Done()\n\t\tresults <- fetch(u)\n\t}(u)\n}\nwg.Wait()\nclose(results)",
            "data, err := os.ReadFile(path)\nif err != nil {\n\treturn nil, fmt.Errorf(\"load %s: %w\", path, err)\n}\n"
            "var cfg Config\nif err := yaml.Unmarshal(data, &cfg); err != nil {\n\treturn nil, err\n}",
            "type «N» struct {\n\tID        int64     `json:\"id\"`\n\tName      string    `json:\"name\"`\n\tCreatedAt time.Time `json:\"created_at\"`\n}",
            "ctx, cancel := context.WithTimeout(context.Background(), «m»*time.Second)\ndefer cancel()\nrows, err := db.QueryContext(ctx, \"SELECT id FROM «tbl» WHERE «col» = $1\", «col»)",
        ), "Go"
    return "rust", _c(r,
        "fn main() {\n    let v: Vec<u32> = (1..«k»).filter(|x| x % «m» == 0).collect();\n    println!(\"{:?}\", v);\n}",
        "#[derive(Debug, Serialize, Deserialize)]\nstruct «N» {\n    id: u64,\n    name: String,\n    #[serde(default)]\n    tags: Vec<String>,\n}",
        "fn load(path: &Path) -> Result<Vec<«N»>, Box<dyn std::error::Error>> {\n    let text = std::fs::read_to_string(path)?;\n"
        "    let «ns»: Vec<«N»> = serde_json::from_str(&text)?;\n    Ok(«ns»)\n}",
        "let handles: Vec<_> = (0..«m»)\n    .map(|i| tokio::spawn(async move { work(i).await }))\n    .collect();\nfor h in handles {\n    h.await??;\n}",
        "match «n».status {\n    Status::Open | Status::Pending => queue.push(«n»),\n    Status::Closed => {}\n    _ => unreachable!(),\n}",
        "impl fmt::Display for «N» {\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n        write!(f, \"{} ({})\", self.name, self.id)\n    }\n}",
        "let mut counts: HashMap<&str, usize> = HashMap::new();\nfor word in text.split_whitespace() {\n    *counts.entry(word).or_insert(0) += 1;\n}",
    ), "Rust"


def code_php(r):
    if r.random() < 0.4:
        return "ruby", _c(r,
            "@«ns» = «N».where(published: true).includes(:author).order(created_at: :desc).limit(«k»)",
            "%w[apple banana cherry].each_with_index do |fruit, i|\n  puts \"#{i}. #{fruit.capitalize}\"\nend",
            "class «N» < ApplicationRecord\n  belongs_to :account\n  validates :name, presence: true, length: { maximum: 120 }\n  scope :recent, -> { where('created_at > ?', «m».days.ago) }\nend",
            "totals = «ns».group_by(&:«col»).transform_values { |xs| xs.sum(&:amount) }",
            "Rails.application.routes.draw do\n  resources :«ns», only: %i[index show create]\n  root 'home#index'\nend",
        ), "Ruby"
    return "php", _c(r,
        "<?php\n$stmt = $pdo->prepare('SELECT id, name FROM «tbl» WHERE email = ? LIMIT 1');\n$stmt->execute([$email]);\n$«n» = $stmt->fetch(PDO::FETCH_ASSOC);",
        "$«ns» = «N»::where('active', 1)\n    ->orderBy('created_at', 'desc')\n    ->paginate(«k»);",
        "$names = array_map(fn($u) => $u['name'], array_filter($«ns», fn($u) => $u['age'] >= 18));",
        "Route::get('/«ns»/{id}', [«N»Controller::class, 'show'])->name('«ns».show');",
        "foreach ($«ns» as $key => $value) {\n    echo htmlspecialchars($value['title'], ENT_QUOTES, 'UTF-8') . \"<br>\\n\";\n}",
        "public function store(Request $request)\n{\n    $data = $request->validate([\n        'name' => 'required|string|max:255',\n"
        "        'email' => 'required|email|unique:«tbl»',\n    ]);\n    return «N»::create($data);\n}",
        "$date = DateTime::createFromFormat('d/m/Y', $input) ?: new DateTime();\necho $date->format('Y-m-d');",
    ), "PHP"


def code_sql(r):
    return "sql", _c(r,
        "SELECT c.name, COUNT(o.id) AS «ns», SUM(o.total) AS revenue\nFROM customers c\nJOIN orders o ON o.customer_id = c.id\n"
        "WHERE o.created_at >= '2024-01-01'\nGROUP BY c.name\nHAVING COUNT(o.id) > «m»\nORDER BY revenue DESC\nLIMIT «k»;",
        "WITH monthly AS (\n  SELECT date_trunc('month', created_at) AS month, «col», SUM(amount) AS total\n  FROM «tbl»\n  GROUP BY 1, 2\n)\n"
        "SELECT month, «col», total,\n       total - LAG(total) OVER (PARTITION BY «col» ORDER BY month) AS delta\nFROM monthly\nORDER BY month;",
        "UPDATE «tbl» SET «col» = 'archived', updated_at = NOW() WHERE id = «num»;",
        "CREATE TABLE «tbl» (\n  id BIGSERIAL PRIMARY KEY,\n  «col» VARCHAR(32) NOT NULL,\n  created_at TIMESTAMPTZ DEFAULT now()\n);\n"
        "CREATE INDEX idx_«tbl»_«col» ON «tbl» («col»);",
        "DELETE FROM sessions WHERE expires_at < NOW() - INTERVAL '«k» days';",
        "INSERT INTO «tbl» (id, name, «col») VALUES («num», 'Widget', 'new')\nON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name;",
        "EXPLAIN ANALYZE SELECT * FROM «tbl» WHERE «col» = 'open' ORDER BY created_at DESC LIMIT «k»;",
        "SELECT id, email, 'customer' AS kind FROM customers\nUNION ALL\nSELECT id, email, 'lead' FROM leads\nORDER BY email;",
        "ALTER TABLE «tbl» ADD COLUMN «col» VARCHAR(255) NULL AFTER email;",
        "SELECT «col»,\n       SUM(CASE WHEN paid THEN amount ELSE 0 END) AS paid,\n       SUM(CASE WHEN NOT paid THEN amount ELSE 0 END) AS unpaid\n"
        "FROM invoices\nGROUP BY «col»;",
        "DROP TABLE IF EXISTS tmp_import;\nCREATE TEMP TABLE tmp_import (LIKE «tbl» INCLUDING ALL);",
        "SELECT u.id, u.name\nFROM users u\nLEFT JOIN «tbl» x ON x.user_id = u.id\nWHERE x.id IS NULL;",
        "SELECT * FROM products WHERE name LIKE 'Smi%' AND price BETWEEN 10 AND «k»0 ORDER BY price;",
    ), "SQL"


def code_html(r):
    kind = r.random()
    if kind < 0.3:
        return "css", _c(r,
            ".«n»-grid {\n  display: grid;\n  grid-template-columns: repeat(auto-fill, minmax(«k»0px, 1fr));\n  gap: 1rem;\n}\n\n"
            "@media (max-width: 600px) {\n  .«n»-grid { grid-template-columns: 1fr; }\n}",
            ".btn:hover,\n.btn:focus-visible {\n  background: #0055ff;\n  outline: 2px solid rgba(0, 85, 255, .4);\n}\n\n"
            ".badge::before {\n  content: \"\\2022\";\n  margin-right: .25em;\n}",
            ":root {\n  --brand: #e63946;\n  --radius: «m»px;\n}\n.card { border-radius: var(--radius); box-shadow: 0 1px 3px rgb(0 0 0 / 12%); }",
        ), "CSS"
    if kind < 0.6:
        return r.choice(["jinja", "handlebars", "html", "vue", "liquid"]), _c(r,
            "{% for «n» in «ns» %}\n  <h2>{{ «n».title | e }}</h2>\n  <p>{{ «n».summary | truncate(«k»0) }}</p>\n{% else %}\n  <p>No «ns».</p>\n{% endfor %}",
            "{{#if user}}\n  <p>Hello, {{user.firstName}}!</p>\n{{else}}\n  <a href=\"/login\">Sign in</a>\n{{/if}}\n\n"
            "{{#each «ns»}}\n  {{> «n»-card this}}\n{{/each}}",
            "<template>\n  <ul>\n    <li v-for=\"«n» in «ns»\" :key=\"«n».id\">{{ «n».name }}</li>\n  </ul>\n</template>",
            "{% if customer %}\n  Welcome back, {{ customer.first_name }}!\n{% endif %}\n{{ product.price | money_with_currency }}",
            "<li *ngFor=\"let «n» of «ns»; trackBy: trackById\">{{ «n».name | titlecase }}</li>",
            "{% extends \"base.html\" %}\n{% block content %}\n  {{ form.as_p }}\n  {% csrf_token %}\n{% endblock %}",
        ), "template"
    return "html", _c(r,
        "<div class=\"card\">\n  <img src=\"/img/«n».png\" alt=\"«N» photo\" loading=\"lazy\">\n  <div class=\"card-body\">\n"
        "    <h5 class=\"card-title\">«N» #«num»</h5>\n    <a href=\"/«ns»/«num»\" class=\"btn btn-primary\">Open</a>\n  </div>\n</div>",
        "<form action=\"/subscribe\" method=\"post\">\n  <label for=\"email\">Email</label>\n  <input type=\"email\" id=\"email\" name=\"email\" required>\n"
        "  <button type=\"submit\">Subscribe</button>\n</form>",
        "<head>\n  <meta charset=\"utf-8\">\n  <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "  <link rel=\"stylesheet\" href=\"/css/app.css\">\n  <title>«N»s</title>\n</head>",
        "<table class=\"table\">\n  <thead><tr><th>Name</th><th>«col»</th></tr></thead>\n  <tbody>\n    <tr><td>Alpha</td><td>open</td></tr>\n"
        "  </tbody>\n</table>",
        "<picture>\n  <source srcset=\"/img/hero.avif\" type=\"image/avif\">\n  <img src=\"/img/hero.jpg\" alt=\"Hero\" width=\"1200\" height=\"600\">\n</picture>",
    ), "HTML"


def code_yaml(r):
    kind = r.random()
    if kind < 0.25:
        return "dockerfile", _c(r,
            "FROM python:3.12-slim\nWORKDIR /app\nRUN apt-get update && apt-get install -y --no-install-recommends build-essential \\\n"
            "    && rm -rf /var/lib/apt/lists/*\nCOPY requirements.txt .\nRUN pip install --no-cache-dir -r requirements.txt\nCOPY . .\n"
            "EXPOSE «port»\nCMD [\"gunicorn\", \"-b\", \"0.0.0.0:«port»\", \"«app».wsgi:application\"]",
            "FROM node:20-alpine AS build\nWORKDIR /src\nCOPY package*.json ./\nRUN npm ci\nCOPY . .\nRUN npm run build\n\n"
            "FROM nginx:1.25-alpine\nCOPY --from=build /src/dist /usr/share/nginx/html",
            "FROM ubuntu:22.04\nRUN apt-get update && apt-get install -y curl ca-certificates \\\n"
            "    && curl -fsSL https://deb.nodesource.com/setup_20.x | bash - \\\n    && apt-get install -y nodejs",
        ), "Docker"
    if kind < 0.45:
        return "json", _c(r,
            "{\n  \"name\": \"«app»\",\n  \"version\": \"1.«m».0\",\n  \"scripts\": {\n    \"dev\": \"vite\",\n    \"build\": \"tsc && vite build\",\n"
            "    \"test\": \"vitest run\"\n  },\n  \"dependencies\": {\n    \"react\": \"^18.3.1\"\n  }\n}",
            "{\n  \"compilerOptions\": {\n    \"target\": \"ES2022\",\n    \"module\": \"ESNext\",\n    \"strict\": true,\n"
            "    \"paths\": { \"@/*\": [\"./src/*\"] }\n  }\n}",
            "{\n  \"data\": [\n    { \"id\": «num», \"type\": \"«n»\", \"attributes\": { \"«col»\": \"open\", \"amount\": 12.5 } }\n  ],\n"
            "  \"meta\": { \"total\": «k» }\n}",
        ), "JSON"
    return "yaml", _c(r,
        "services:\n  web:\n    image: nginx:1.25\n    ports: [\"8080:80\"]\n    volumes:\n      - ./html:/usr/share/nginx/html:ro\n"
        "  db:\n    image: postgres:16\n    environment:\n      POSTGRES_PASSWORD: example",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: «app»\nspec:\n  replicas: «m»\n  selector:\n    matchLabels: { app: «app» }\n"
        "  template:\n    metadata:\n      labels: { app: «app» }\n    spec:\n      containers:\n        - name: «app»\n"
        "          image: registry.example.com/«app»:1.«k».0\n          ports: [{ containerPort: «port» }]",
        "name: CI\non:\n  push:\n    branches: [main]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    strategy:\n"
        "      matrix:\n        node: [18, 20, 22]\n    steps:\n      - uses: actions/checkout@v4\n      - uses: actions/setup-node@v4\n"
        "        with:\n          node-version: ${{ matrix.node }}\n      - run: npm ci && npm test",
        "- name: Install packages\n  ansible.builtin.apt:\n    name: [nginx, git]\n    state: present\n    update_cache: true",
        "logging:\n  level:\n    root: INFO\n    com.example.«app»: DEBUG\nspring:\n  datasource:\n    url: jdbc:postgresql://db:5432/«app»",
    ), "YAML"


def code_nginx(r):
    if r.random() < 0.35:
        return "apache", _c(r,
            "<VirtualHost *:443>\n    ServerName www.example.com\n    DocumentRoot /var/www/«app»/public\n    <Directory /var/www/«app»/public>\n"
            "        AllowOverride All\n        Require all granted\n    </Directory>\n    SSLEngine on\n</VirtualHost>",
            "RewriteEngine On\nRewriteCond %{REQUEST_FILENAME} !-f\nRewriteCond %{REQUEST_FILENAME} !-d\nRewriteRule ^(.*)$ index.php?q=$1 [L,QSA]",
            "RewriteCond %{HTTPS} off\nRewriteRule ^ https://%{HTTP_HOST}%{REQUEST_URI} [R=301,L]",
            "<IfModule mod_headers.c>\n    Header set Cache-Control \"max-age=«k»00, public\"\n</IfModule>",
        ), "Apache"
    return "nginx", _c(r,
        "location /api/ {\n    proxy_pass http://«app»_backend;\n    proxy_set_header Host $host;\n    proxy_set_header X-Real-IP $remote_addr;\n"
        "    limit_req zone=one burst=«k»;\n}",
        "server {\n    listen 80;\n    server_name example.com www.example.com;\n    return 301 https://$host$request_uri;\n}",
        "location / {\n    root /usr/share/nginx/html;\n    try_files $uri $uri/ /index.html;\n}",
        "location ~* \\.(?:css|js|png|jpg|svg|woff2)$ {\n    expires 30d;\n    add_header Cache-Control \"public, immutable\";\n}",
        "upstream «app»_backend {\n    least_conn;\n    server 10.0.«m».11:«port» max_fails=3;\n    server 10.0.«m».12:«port» max_fails=3;\n    keepalive 32;\n}",
        "gzip on;\ngzip_types text/plain text/css application/json application/javascript;\nclient_max_body_size «k»m;",
    ), "nginx"


def code_regex(r):
    return r.choice(["regex", "text", "js", "python"]), _c(r,
        "^[\\w.+-]+@[\\w-]+\\.[\\w.-]+$",
        "(?<year>\\d{4})-(?<month>\\d{2})-(?<day>\\d{2})",
        "^(?=.*[A-Z])(?=.*[a-z])(?=.*\\d)(?=.*[^\\w\\s]).{«m»,}$",
        "^(\\S+) \\S+ \\S+ \\[([^\\]]+)\\] \"(\\w+) ([^\"]*?) HTTP/[\\d.]+\" (\\d{3}) (\\d+|-)",
        "const re = /\\b(?:foo|bar)-(\\d+)\\b/gi;\nconst ids = [...text.matchAll(re)].map((m) => Number(m[1]));",
        "re.sub(r\"\\s+\", \" \", text).strip()",
        "^\\+?\\d{1,3}[\\s-]?\\(?\\d{2,4}\\)?[\\s-]?\\d{3,4}[\\s-]?\\d{3,4}$",
        "^#?([a-fA-F0-9]{6}|[a-fA-F0-9]{3})$",
        "\\b\\d{1,3}(?:,\\d{3})*(?:\\.\\d+)?\\b",
        "^v?(\\d+)\\.(\\d+)\\.(\\d+)(?:-([\\w.]+))?$",
    ), "regex"


FORUM = {
    "shell": code_shell, "powershell": code_powershell, "python": code_python, "js": code_js, "java": code_java,
    "rust": code_rust, "php": code_php, "sql": code_sql, "html": code_html, "yaml": code_yaml, "nginx": code_nginx,
    "regex": code_regex,
}

ERRORS = {
    "shell": ["bash: ./deploy.sh: Permission denied", "find: paths must precede expression", "jq: error (at <stdin>:0): Cannot iterate over null",
              "rsync error: some files/attrs were not transferred (code 23)"],
    "PowerShell": ["Get-ChildItem : Cannot find path 'C:\\Logs' because it does not exist.",
                   "Invoke-RestMethod : The remote server returned an error: (401) Unauthorized."],
    "cmd": ["The system cannot find the path specified.", "'git' is not recognized as an internal or external command,"],
    "Python": ["TypeError: 'NoneType' object is not subscriptable", "KeyError: 'amount'",
               "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9 in position 12: invalid continuation byte"],
    "JavaScript": ["TypeError: Cannot read properties of undefined (reading 'map')",
                   "Warning: Each child in a list should have a unique \"key\" prop.", "SyntaxError: Unexpected token '<'"],
    "Java": ["java.lang.NullPointerException: Cannot invoke \"String.length()\" because \"name\" is null",
             "org.hibernate.LazyInitializationException: could not initialize proxy - no Session"],
    "C#": ["System.InvalidOperationException: Sequence contains no elements",
           "error CS0029: Cannot implicitly convert type 'string' to 'int'"],
    "Go": ["panic: runtime error: index out of range [3] with length 3", "fatal error: all goroutines are asleep - deadlock!"],
    "Rust": ["error[E0502]: cannot borrow `v` as mutable because it is also borrowed as immutable",
             "error[E0382]: borrow of moved value: `name`"],
    "PHP": ["PHP Warning:  Undefined array key \"email\" in /var/www/html/form.php on line 12",
            "SQLSTATE[23000]: Integrity constraint violation: 1062 Duplicate entry 'a@b.c' for key 'email'"],
    "Ruby": ["NoMethodError: undefined method `name' for nil:NilClass", "ActiveRecord::RecordNotFound"],
    "SQL": ["ERROR: column \"c.email\" must appear in the GROUP BY clause or be used in an aggregate function",
            "ERROR 1064 (42000): You have an error in your SQL syntax; check the manual near 'AFTER email' at line 1"],
    "CSS": ["the grid overflows on Safari 16"], "template": ["jinja2.exceptions.UndefinedError: 'post' is undefined"],
    "HTML": ["the image is stretched on mobile"], "Docker": ["failed to solve: process \"/bin/sh -c npm ci\" did not complete successfully: exit code: 1"],
    "JSON": ["SyntaxError: Unexpected token } in JSON at position 112"], "YAML": ["yaml: line 7: did not find expected key"],
    "nginx": ["upstream timed out (110: Connection timed out) while reading response header from upstream"],
    "Apache": ["AH00526: Syntax error on line 12 of /etc/apache2/sites-enabled/000-default.conf"],
    "regex": ["it matches \"a@b\" but not \"first.last+tag@mail.example.co.uk\""],
}
INTROS = ["I'm trying to «goal» but «problem».", "How do I «goal»? Here's what I have so far:",
          "Quick question about «lang»: I want to «goal».", "This works locally but fails in CI when I «goal»:",
          "Following the docs, I wrote this to «goal»:", "Sharing a snippet that helped me «goal», in case it's useful:",
          "Newbie here. I need to «goal» and came up with this.", "Can someone review this? It's supposed to «goal».",
          "After upgrading to «lang» «ver», this stopped working:", "Is there a cleaner way to «goal»?"]
GOALS = ["clean up old files", "group records by «col»", "call our REST API", "parse a CSV export", "speed up the nightly job",
         "deploy to staging", "match e-mail addresses", "paginate the results", "cache static assets",
         "run the tests in parallel", "handle missing values", "rename a column", "retry failed requests",
         "redirect HTTP to HTTPS", "count rows per «col»", "render a list of «ns»"]
PROBLEMS = ["it's really slow on large inputs", "I get an error on line «k»", "the output is empty",
            "it works for «k» records but not for «num»", "it hangs after a few seconds", "the result is off by one",
            "nothing happens at all", "it only fails on Windows", "the numbers don't add up"]
OUTROS = ["Any ideas? Thanks in advance!", "What am I missing?", "Is there a more idiomatic way?",
          "EDIT: solved, I had a typo in `«n»_«col»`.", "Using «lang» «ver» on «os».", "Thanks!",
          "UPDATE: still happening after upgrading to «ver».", "Cheers.", "(Sorry for the formatting, posting from my phone.)",
          "Related: «url»"]


def forum_post(r, key):
    fence, code, lang = FORUM[key](r)
    ids = _ids(r)
    ver = f"{r.randint(1, 22)}.{r.randint(0, 12)}" + (f".{r.randint(0, 9)}" if r.random() < 0.5 else "")
    os_ = r.choice(["Ubuntu 22.04", "macOS 14.4", "Windows 11", "Debian 12", "WSL2", "Alpine 3.19", "Fedora 40"])
    fill = dict(ids, lang=lang, ver=ver, os=os_, url=_url(r))
    fill["goal"] = _sub(r.choice(GOALS), **ids)
    fill["problem"] = _sub(r.choice(PROBLEMS), **ids)
    parts = [_sub(r.choice(INTROS), **fill)]
    tag = fence if r.random() < 0.8 else ""
    if r.random() < 0.85:
        parts.append(f"```{tag}\n{code}\n```")
    else:  # indented code block, or everything inline
        parts.append("\n".join("    " + line for line in code.splitlines()))
    if r.random() < 0.55:
        err = r.choice(ERRORS.get(lang, ERRORS["shell"]))
        parts.append(r.choice([f"It fails with:\n\n```\n{err}\n```", f"> {err}", f"Error: `{err}`"]))
    if r.random() < 0.5:
        parts.append(_sub(r.choice([
            "I also tried `«n»_«col»` instead of `«n»s` but got the same result.",
            "Setting `«app».timeout = «k»` didn't help.", "Running `«app» --version` prints «k».«m».0.",
            "The table has about «num»k rows and an index on `«col»`.", "My `«file».csv` looks like `id,name,«col»`.",
        ]), **ids))
    parts.append(_sub(r.choice(OUTROS), **fill))
    title = _sub(r.choice(["How to «goal» in «lang»?", "«lang»: «problem»", "«lang» «ver» – «problem»", "[«lang»] «goal»",
                           "Why does this «lang» snippet fail?", "Best way to «goal» with «lang»"]), **fill)
    return title, "\n\n".join(parts), lang


def forum_request(r, key):
    title, body, lang = forum_post(r, key)
    tags = [lang.lower().replace("#", "sharp"), r.choice(["performance", "beginner", "debugging", "linux", "windows", "api"])]
    way = r.randrange(5)
    if way == 0:
        return ("POST", "/forum/reply", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
                _form([("title", title), ("body", body), ("tags", ",".join(tags)), ("csrf_token", _b64(r, 24, url=True, pad=False))]))
    if way == 1:
        return ("POST", "/api/v1/questions", _headers(r, [("Content-Type", _json_ct(r)), ("X-CSRF-Token", _b64(r, 32))], kind="api"),
                _ijson(r, {"title": title, "body": body, "tags": tags, "notify": r.random() < 0.5}))
    if way == 2:
        o, n = r.choice(["acme", "octo-org", "widgets-inc", "rust-lang"]), r.randint(1, 9000)
        return ("POST", f"/api/v3/repos/{o}/{r.choice(APPS)}/issues/{n}/comments",
                _headers(r, [("Content-Type", "application/json"), ("Authorization", "token ghp_" + _alnum(r, 36)),
                             ("Accept", "application/vnd.github+json"), ("X-GitHub-Api-Version", "2022-11-28")], kind="tool"),
                _ijson(r, {"body": body}))
    if way == 3:
        return ("POST", "/posts.json", _headers(r, [("Content-Type", _json_ct(r)), ("X-CSRF-Token", _b64(r, 64, url=True, pad=False)),
                                                     ("X-Requested-With", "XMLHttpRequest")], kind="api"),
                _ijson(r, {"raw": body, "topic_id": r.randint(1000, 99999), "category": r.randint(1, 40),
                           "reply_to_post_number": r.choice([None, r.randint(1, 50)])}))
    ct, mp = _multipart(r, [("title", title, None, None), ("body", body, None, None),
                            ("tags[]", tags[0], None, None), ("tags[]", tags[1], None, None)])
    return ("POST", f"/community/t/{Q(_slug(r))}/{r.randint(100, 99999)}/reply", _headers(r, [("Content-Type", ct)], nav=True), mp)


# --------------------------------------------------------------------------------
# Rich-text editor output and Markdown

def _html_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _inline_html(r, text):
    words = _html_escape(text).split(" ")
    if len(words) > 4:
        i = r.randrange(len(words) - 2)
        span = r.randint(1, 2)
        tag = r.choice(["b", "i", "strong", "em", "u", "s", "mark", "code", "a", "span"])
        seg = " ".join(words[i:i + span])
        if tag == "a":
            rel = r.choice(['', ' target="_blank" rel="noopener noreferrer"', ' rel="nofollow"'])
            seg = f'<a href="{_html_escape(_url(r))}"{rel}>{seg}</a>'
        elif tag == "span":
            style = r.choice(["color: red;", "color: rgb(230, 0, 0);", "background-color: #fff3a0;", "font-size: 18px;",
                              "font-family: Georgia, serif;", "text-decoration: underline;"])
            seg = f'<span style="{style}">{seg}</span>'
        else:
            seg = f"<{tag}>{seg}</{tag}>"
        words[i:i + span] = [seg]
    s = " ".join(words)
    s = s.replace(" -- ", " &mdash; ").replace("...", "&hellip;")
    if r.random() < 0.3:
        s += "&nbsp;" + r.choice(EMOJI)
    return s


def richtext_html(r):
    editor = r.choice(["tinymce", "ckeditor", "quill", "plain", "wordpress"])
    blocks = []
    for _ in range(r.randint(1, 5)):
        k = r.random()
        text = keyword_text(r) if r.random() < 0.4 else prose_text(r, sentences=r.randint(1, 2)).replace("\n", " ")
        if k < 0.45:
            attr = ""
            if editor == "quill" and r.random() < 0.3:
                attr = f' class="ql-align-{r.choice(["center", "right", "justify"])}"'
            elif r.random() < 0.2:
                attr = f' style="text-align: {r.choice(["center", "right", "justify"])};"'
            blocks.append(f"<p{attr}>{_inline_html(r, text)}</p>")
        elif k < 0.55:
            lst = r.choice(["ul", "ol"])
            items = "".join(f"<li>{_inline_html(r, keyword_text(r)[:80])}</li>" for _ in range(r.randint(2, 5)))
            blocks.append(f"<{lst}>{items}</{lst}>")
        elif k < 0.63:
            blocks.append(f"<blockquote><p>{_html_escape(text)}</p></blockquote>")
        elif k < 0.71:
            slug = _slug(r)
            img = (f'<img src="https://cdn.{r.choice(["example.com", "example.net", "images.example.org"])}/uploads/'
                   f'{r.randint(2020, 2025)}/{r.randint(1, 12):02d}/{slug}.{r.choice(["png", "jpg", "webp"])}" '
                   f'alt="{_html_escape(slug.replace("-", " "))}" width="{r.choice([320, 640, 800, 1200])}" '
                   f'height="{r.choice([240, 480, 600, 675])}">')
            if editor == "ckeditor":
                blocks.append(f'<figure class="image">{img}<figcaption>{_html_escape(_cap(slug.replace("-", " ")))}</figcaption></figure>')
            elif editor == "wordpress":
                blocks.append(f'<!-- wp:image {{"id":{r.randint(10, 9999)},"sizeSlug":"large"}} -->\n<figure class="wp-block-image size-large">{img}</figure>\n<!-- /wp:image -->')
            else:
                blocks.append(f"<p>{img}</p>")
        elif k < 0.78:
            code = _html_escape(FORUM[r.choice(list(FORUM))](r)[1])
            blocks.append(f'<pre><code class="language-{r.choice(["js", "python", "bash", "sql"])}">{code}</code></pre>'
                          if r.random() < 0.6 else f"<p>Use <code>{_html_escape(code.splitlines()[0][:60])}</code> for that.</p>")
        elif k < 0.86:
            rows = "".join(f"<tr><td>{_html_escape(r.choice(SLUG_NOUN))}</td><td>{r.randint(1, 99)}</td>"
                           f"<td>{_price_en(r)}</td></tr>" for _ in range(r.randint(2, 4)))
            blocks.append(f'<table border="1" style="border-collapse: collapse; width: 100%;"><thead><tr><th>Item</th>'
                          f'<th>Qty</th><th>Price</th></tr></thead><tbody>{rows}</tbody></table>')
        elif k < 0.93:
            lv = r.randint(2, 4)
            blocks.append(f"<h{lv}>{_html_escape(_cap(_slug(r).replace('-', ' ')))}</h{lv}>")
        else:
            blocks.append(r.choice(["<hr>", "<p><br></p>", "<p>&nbsp;</p>", "<p>Tom &amp; Jerry &lt;3</p>"]))
    html = "".join(blocks) if r.random() < 0.6 else "\n".join(blocks)
    return html


def richtext_request(r):
    html = richtext_html(r)
    title = _cap(_slug(r).replace("-", " "))
    way = r.randrange(5)
    if way == 0:
        return ("POST", "/wp-json/wp/v2/posts", _headers(r, [("Content-Type", "application/json"), ("X-WP-Nonce", _hex(r, 10))], kind="api"),
                _ijson(r, {"title": title, "content": html, "status": r.choice(["draft", "publish", "pending"]),
                           "categories": [r.randint(1, 30)], "tags": [r.randint(1, 200) for _ in range(r.randint(0, 3))]}))
    if way == 1:
        return ("POST", f"/comments/{r.randint(1, 99999)}", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
                _form([("comment[body]", html), ("comment[parent_id]", str(r.randint(0, 5000))),
                       ("authenticity_token", _b64(r, 64))]))
    if way == 2:
        return ("PUT", f"/api/v1/pages/{_uuid(r)}", _headers(r, [("Content-Type", _json_ct(r))], kind="api"),
                _ijson(r, {"page": {"title": title, "body_html": html, "published": r.random() < 0.5,
                                    "seo": {"description": html[:140].split("<")[0] or title, "noindex": False}}}))
    if way == 3:
        ct, mp = _multipart(r, [("subject", title, None, None), ("html_body", html, None, None),
                                ("list_ids[]", str(r.randint(1, 40)), None, None),
                                ("send_at", _iso(r), None, None)])
        return ("POST", "/campaigns/new", _headers(r, [("Content-Type", ct)], nav=True), mp)
    return ("POST", "/support/tickets", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
            _form([("subject", title), ("description", html), ("priority", r.choice(["low", "normal", "high"])),
                   ("email", _email(r))]))


def markdown_doc(r):
    parts = []
    title = _cap(_slug(r).replace("-", " "))
    parts.append(r.choice(["# ", "## ", ""]) + title if r.random() < 0.8 else f"{title}\n{'=' * len(title)}")
    for _ in range(r.randint(2, 6)):
        k = r.random()
        if k < 0.25:
            parts.append(keyword_text(r) if r.random() < 0.5 else prose_text(r))
        elif k < 0.4:
            parts.append("\n".join(f"{r.choice(['*', '-', '1.'])} {r.choice(['[ ] ', '[x] ', '', '', ''])}"
                                   f"{_cap(r.choice(SLUG_NOUN))}: {keyword_text(r)[:70]}" for _ in range(r.randint(2, 5))))
        elif k < 0.52:
            parts.append(f"See [{r.choice(['the docs', 'this issue', 'here', 'Wikipedia', 'the changelog'])}]({_url(r)}) "
                         f"and ![{r.choice(SLUG_NOUN)}](https://cdn.example.com/img/{_slug(r)}.png \"{r.choice(SLUG_ADJ)}\").")
        elif k < 0.65:
            fence, code, _ = FORUM[r.choice(list(FORUM))](r)
            parts.append(f"```{fence}\n{code}\n```")
        elif k < 0.75:
            rows = "\n".join(f"| {r.choice(SLUG_NOUN)} | {r.randint(1, 99)} | {_price_en(r)} | {r.choice(['✅', '❌', 'n/a', '~'])} |"
                             for _ in range(r.randint(2, 5)))
            parts.append("| Name | Qty | Price | OK? |\n|:-----|----:|------:|:---:|\n" + rows)
        elif k < 0.83:
            parts.append("> " + keyword_text(r).replace("\n", "\n> "))
        elif k < 0.9:
            parts.append(f"{'#' * r.randint(2, 4)} {_cap(r.choice(SLUG_NOUN))} {r.randint(1, 9)}")
        else:
            parts.append(f"Inline `{r.choice(['npm i -D vite', 'SELECT 1;', 'git stash pop', 'ls -la', 'x => x * 2', 'a && b || c'])}`"
                         f" works, **bold**, _italic_, ~~strike~~, and a footnote[^{r.randint(1, 3)}].")
    return "\n\n".join(parts)


def markdown_request(r):
    doc = markdown_doc(r)
    way = r.randrange(4)
    if way == 0:
        return ("POST", "/api/v1/notes", _headers(r, [("Content-Type", _json_ct(r))], kind="api"),
                _ijson(r, {"title": doc.splitlines()[0].lstrip("# "), "body": doc, "pinned": r.random() < 0.2}))
    if way == 1:
        return ("PATCH", f"/api/v4/projects/{r.randint(1, 9999)}/wikis/{Q(_slug(r))}",
                _headers(r, [("Content-Type", "application/json"), ("PRIVATE-TOKEN", "glpat-" + _alnum(r, 20, ALNUM + "-_"))], kind="tool"),
                _ijson(r, {"content": doc, "format": "markdown"}))
    if way == 2:
        return ("POST", "/gists", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
                _form([("description", doc.splitlines()[0]), ("gist[files][README.md]", doc), ("public", "false")]))
    return ("POST", "/api/v1/issues", _headers(r, [("Content-Type", _json_ct(r)), ("Authorization", "Bearer " + _jwt(r))], kind="api"),
            _ijson(r, {"title": _cap(_slug(r).replace("-", " ")), "description": doc,
                       "labels": r.sample(["bug", "docs", "enhancement", "good first issue", "p1"], 2)}))


# --------------------------------------------------------------------------------
# Tokens

def _jwt(r):
    def seg(obj):
        return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")
    first, last = _name(r)
    iat = _ts(r)
    header = {"alg": r.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    if header["alg"] != "HS256":
        header["kid"] = _b64(r, 12, url=True, pad=False)
    claims = {"sub": r.choice([str(r.randint(1, 10 ** 7)), _uuid(r), f"auth0|{_hex(r, 24)}"]), "iat": iat,
              "exp": iat + r.choice([300, 900, 3600, 86400])}
    if r.random() < 0.6:
        claims["name"] = f"{first} {last}"
        claims["email"] = _email(r, first, last)
    if r.random() < 0.5:
        claims["iss"] = r.choice(["https://auth.example.com/", "https://login.example.org", "https://accounts.google.com"])
        claims["aud"] = r.choice(["api", "https://api.example.com", _alnum(r, 24)])
    if r.random() < 0.4:
        claims["scope"] = " ".join(r.sample(["read:orders", "write:orders", "profile", "email", "openid", "offline_access"], 3))
    if r.random() < 0.3:
        claims["roles"] = r.sample(["admin", "editor", "viewer", "billing"], r.randint(1, 2))
    sig = _b64(r, 32 if header["alg"] == "HS256" else r.choice([64, 256]), url=True, pad=False)
    return seg(header) + "." + seg(claims) + "." + sig


def _api_key(r):
    return r.choice([
        lambda: "sk_live_" + _alnum(r, 24), lambda: "pk_test_" + _alnum(r, 24), lambda: "key-" + _hex(r, 32),
        lambda: _hex(r, 40), lambda: "AIza" + _alnum(r, 35, ALNUM + "-_"), lambda: _uuid(r),
        lambda: "xoxb-" + "-".join(str(r.randint(10 ** 11, 10 ** 12)) for _ in range(2)) + "-" + _alnum(r, 24),
        lambda: "SG." + _alnum(r, 22, ALNUM + "-_") + "." + _alnum(r, 43, ALNUM + "-_"),
    ])()


def _auth_header(r):
    k = r.random()
    if k < 0.6:
        return ("Authorization", "Bearer " + _jwt(r))
    if k < 0.75:
        return ("X-API-Key", _api_key(r))
    if k < 0.85:
        return ("Authorization", "Bearer " + _alnum(r, r.choice([32, 40, 64]), ALNUM + "-._~"))
    if k < 0.93:
        user = _ascii_fold(r.choice(FIRST)).lower()
        return ("Authorization", "Basic " + _b64s(f"{user}:{_password(r)}"))
    return ("Authorization", "Token " + _hex(r, 40))


# --------------------------------------------------------------------------------
# Passwords

PW_WORDS = ["correct", "horse", "battery", "staple", "purple", "monkey", "dishwasher", "sunset", "tiger", "Kaffee",
            "Sonnenblume", "Schmetterling", "papillon", "mariposa", "drache", "galaxy", "pickle", "velvet", "orbit"]
PW_SYMBOLS = "!@#$%^&*()-_=+[]{};:'\",.<>/?\\|~`"


def _password(r):
    k = r.random()
    if k < 0.45:
        chars = ALNUM + PW_SYMBOLS
        return "".join(r.choice(chars) for _ in range(r.randint(12, 28)))
    if k < 0.65:
        sep = r.choice(["-", " ", ".", "_", "", "!", ";"])
        return sep.join(r.choice(PW_WORDS) for _ in range(r.randint(3, 5))) + (str(r.randint(0, 99)) if r.random() < 0.5 else "")
    if k < 0.8:
        return r.choice(["Summer", "Winter", "Hallo", "Bonjour", "Welcome", "Spring", "Mustang"]) + str(r.randint(2019, 2025)) + \
            r.choice(["!", "?", "#", "$", "!!", "*", "@"])
    if k < 0.9:
        return "P@ss" + r.choice([";", "'", '"', "<", ">", "&", "|", "%", "#"]) + "w0rd" + "".join(
            r.choice(PW_SYMBOLS) for _ in range(r.randint(1, 4)))
    return r.choice(["ü", "ß", "é", "ñ", "ø", "ł"]) + _alnum(r, r.randint(8, 14)) + r.choice(PW_SYMBOLS)


# --------------------------------------------------------------------------------
# REST APIs

RESOURCES = ["users", "orders", "products", "invoices", "customers", "tickets", "articles", "projects", "teams",
             "subscriptions", "devices", "files", "shipments", "bookings", "events", "webhooks", "carts", "reviews"]


def _rid(r):
    k = r.random()
    if k < 0.4:
        return str(r.randint(1, 9999999))
    if k < 0.65:
        return _uuid(r)
    if k < 0.8:
        return _slug(r)
    if k < 0.9:
        return r.choice(["ord_", "cus_", "prod_", "inv_", "usr_"]) + _alnum(r, 14)
    return _hex(r, 24)


def _api_path(r, with_id=True):
    v = r.choice(["/api/v1", "/api/v2", "/v1", "/api", "/rest/v3", "/api/2024-04"])
    res = r.choice(RESOURCES)
    p = f"{v}/{res}"
    if with_id:
        p += "/" + Q(_rid(r))
        if r.random() < 0.35:
            p += "/" + r.choice(["items", "comments", "members", "attachments", "notes", "line-items", "events"])
            if r.random() < 0.4:
                p += "/" + Q(_rid(r))
    return p


def _doc(r, depth=0):
    """A realistic JSON document for an API resource."""
    first, last = _name(r)
    city, country, zip_ = r.choice(CITIES)
    k = r.randrange(7)
    if k == 0:
        d = {"first_name": first, "last_name": last, "email": _email(r, first, last), "phone": _phone(r),
             "locale": r.choice(["en-US", "de-DE", "fr-FR", "ja-JP", "pt-BR"]), "marketing_opt_in": r.random() < 0.5,
             "address": {"line1": _street(r), "line2": None, "city": city, "postal_code": zip_, "country": country},
             "tags": r.sample(["vip", "newsletter", "b2b", "beta", "wholesale", "churn-risk"], r.randint(0, 3))}
    elif k == 1:
        d = {"sku": f"{r.choice(['TSH', 'MUG', 'BAG', 'LMP'])}-{r.randint(100, 999)}-{r.choice(['S', 'M', 'L', 'XL'])}",
             "title": _cap(_slug(r).replace("-", " ")), "price": {"amount": round(r.uniform(1, 500), 2),
                                                              "currency": r.choice(["EUR", "USD", "GBP", "JPY"])},
             "stock": r.randint(0, 500), "active": r.random() < 0.8, "weight_kg": round(r.uniform(0.05, 12), 3),
             "dimensions": [r.randint(1, 80) for _ in range(3)], "description": keyword_text(r),
             "attributes": {"color": r.choice(PROSE["en"]["colors"]), "material": r.choice(["cotton", "steel", "oak", "recycled PET"])}}
    elif k == 2:
        d = {"customer_id": _rid(r), "currency": "EUR", "items": [
            {"product_id": _rid(r), "quantity": r.randint(1, 5), "unit_price": round(r.uniform(1, 99), 2),
             "options": {"size": r.choice(["S", "M", "L"]), "gift_wrap": r.random() < 0.2}} for _ in range(r.randint(1, 4))],
             "shipping": {"method": r.choice(["standard", "express", "pickup"]), "address": {"city": city, "country": country}},
             "note": keyword_text(r) if r.random() < 0.5 else None, "coupon": r.choice([None, "WELCOME10", "SPRING-20"])}
    elif k == 3:
        d = {"title": _cap(_slug(r).replace("-", " ")), "description": prose_text(r), "status": r.choice(["open", "in_progress", "done"]),
             "priority": r.randint(1, 5), "assignee": {"id": r.randint(1, 500), "name": f"{first} {last}"},
             "due_date": _iso(r), "estimate_hours": r.choice([0.5, 1, 2.5, 8, None]), "labels": r.sample(SLUG_NOUN, 2),
             "checklist": [{"text": r.choice(SLUG_NOUN), "done": r.random() < 0.5} for _ in range(r.randint(0, 3))]}
    elif k == 4:
        d = {"name": f"{r.choice(['Living room', 'Office', 'Garage', 'Kitchen'])} sensor", "serial": _hex(r, 12).upper(),
             "firmware": f"{r.randint(1, 4)}.{r.randint(0, 20)}.{r.randint(0, 9)}",
             "location": {"lat": round(r.uniform(-60, 70), 6), "lng": round(r.uniform(-170, 170), 6)},
             "readings": [{"t": _iso(r), "temp_c": round(r.uniform(-10, 35), 1), "humidity": r.randint(20, 90)}
                          for _ in range(r.randint(1, 5))], "battery": round(r.random(), 2), "online": True}
    elif k == 5:
        d = {"event": r.choice(["Team offsite", "Sprint review", "Dentist", "Yoga", "Q3 planning"]), "start": _iso(r),
             "end": _iso(r), "all_day": False, "timezone": r.choice(["Europe/Berlin", "America/New_York", "Asia/Tokyo",
                                                                      "America/Sao_Paulo", "Australia/Sydney"]),
             "attendees": [_email(r) for _ in range(r.randint(1, 4))], "location": f"{_street(r)}, {city}",
             "recurrence": r.choice([None, "RRULE:FREQ=WEEKLY;BYDAY=MO,WE;COUNT=10"]), "reminders": [{"minutes": 10}]}
    else:
        d = {"settings": {"theme": r.choice(["dark", "light", "system"]), "language": r.choice(["en", "de", "fr", "ja"]),
                          "notifications": {"email": r.random() < 0.5, "push": r.random() < 0.5, "digest": r.choice(["daily", "weekly", "off"])},
                          "timezone_offset": r.choice([-300, 0, 60, 120, 330, 540]), "beta_features": r.sample(["ai", "new-editor", "dark-v2"], 1)},
             "display_name": f"{first} {last[0]}.", "bio": keyword_text(r), "website": _url(r, fragment=False),
             "pronouns": r.choice(["she/her", "he/him", "they/them", None])}
    if r.random() < 0.2:
        d["metadata"] = {"source": r.choice(["web", "ios", "android", "import"]), "version": r.randint(1, 40),
                         "ratio": r.choice([1e-3, 2.5e6, -0.75, 0]), "ref": None}
    return d


def api_request(r):
    method = r.choices(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"], [30, 22, 12, 12, 10, 6, 8])[0]
    kind = r.choice(["api", "tool", "app"])
    auth = [_auth_header(r)]
    if method == "OPTIONS":
        origin = r.choice(["https://app.example.com", "https://www.example.org", "https://admin.example.io", "https://example.de"])
        return ("OPTIONS", _api_path(r, r.random() < 0.6),
                _headers(r, [("Origin", origin), ("Access-Control-Request-Method", r.choice(["POST", "PUT", "PATCH", "DELETE"])),
                             ("Access-Control-Request-Headers", r.choice(["authorization,content-type", "content-type,x-request-id",
                                                                          "authorization,content-type,x-csrf-token"]))],
                         kind="api", accept="*/*"), b"")
    if method in ("GET", "HEAD"):
        path = _api_path(r, r.random() < 0.6)
        extra = auth[:]
        if r.random() < 0.3:
            extra.append(("If-None-Match", r.choice(['W/"', '"']) + _hex(r, r.choice([8, 16, 32])) + '"'))
        if r.random() < 0.3:
            path += "?" + _query(r, [("expand", r.choice(["customer", "items,shipping", "owner"])),
                                     ("fields", ",".join(r.sample(["id", "name", "email", "status", "total", "created_at"], 3)))])
        return (method, path, _headers(r, extra, kind=kind), b"")
    if method == "DELETE":
        extra = auth + ([("If-Match", f'"{_hex(r, 16)}"')] if r.random() < 0.3 else [])
        return ("DELETE", _api_path(r, True) + (f"?{_query(r, [('reason', r.choice(['duplicate', 'requested by customer', 'spam']))])}"
                                                 if r.random() < 0.2 else ""), _headers(r, extra, kind=kind), b"")
    extra = auth + [("Content-Type", _json_ct(r))]
    if method == "POST" and r.random() < 0.4:
        extra.append(("Idempotency-Key", _uuid(r)))
    if method in ("PUT", "PATCH") and r.random() < 0.3:
        extra.append(("If-Match", f'W/"{_hex(r, 12)}"'))
    body = _doc(r)
    if r.random() < 0.15:
        body = {"data": [_doc(r) for _ in range(r.randint(2, 4))]}
    return (method, _api_path(r, method != "POST" or r.random() < 0.3), _headers(r, extra, kind=kind), _ijson(r, body))


def api_query_request(r):
    res = r.choice(RESOURCES)
    base = f"{r.choice(['/api/v1', '/api', '/v2'])}/{res}"
    k = r.randrange(8)
    if k == 0:
        pairs = [("filter[status]", r.choice(["open", "closed", "pending", "active"])),
                 ("filter[created_at][gte]", _iso(r)), ("sort", r.choice(["-created_at", "title,-updated_at", "priority"])),
                 ("page[size]", r.choice([10, 25, 50, 100])), ("page[number]", r.randint(1, 40)),
                 ("include", r.choice(["author", "author,comments.author", "customer,items.product"]))]
        qs = _qbrackets(r, r.sample(pairs, r.randint(3, len(pairs))))
    elif k == 1:
        pairs = [("lat", f"{r.uniform(-60, 70):.5f}"), ("lng", f"{r.uniform(-170, 170):.5f}"),
                 ("radius", r.choice(["500m", "5km", "10mi", "2000"])), ("q", r.choice(SEARCH_WORDS)),
                 ("open_now", r.choice(["true", "1"])), ("limit", r.randint(5, 50))]
        qs = _query(r, pairs)
    elif k == 2:
        pairs = [("price_min", r.randint(0, 50)), ("price_max", f"{r.randint(51, 999)}.99"), ("brand[]", r.choice(["acme", "Müller & Co"])),
                 ("brand[]", r.choice(["globex", "O'Neill"])), ("in_stock", "true"), ("sort", "price_asc")]
        qs = _qbrackets(r, pairs)
    elif k == 3:
        pairs = [("from", _iso(r)), ("to", _iso(r)), ("interval", r.choice(["1h", "1d", "15m"])),
                 ("metrics", ",".join(r.sample(["cpu", "mem", "p95_latency", "errors", "rps"], 3))), ("tz", r.choice(["UTC", "Europe/Berlin"]))]
        qs = _query(r, pairs)
    elif k == 4:
        name = r.choice(["Milk", "Bread", "O'Neil", "Café Crème"])
        qs = _query(r, [("$filter", f"Name eq '{name.replace(chr(39), chr(39) * 2)}' and Price lt {r.randint(2, 20)}.{r.randint(0, 99)}"),
                        ("$orderby", "Name desc"), ("$top", r.randint(5, 50)), ("$skip", r.randint(0, 200)), ("$count", "true"),
                        ("$select", "Name,Price,Category")], plus=False)
    elif k == 5:
        qs = _query(r, [("ids", ",".join(str(r.randint(1, 99999)) for _ in range(r.randint(2, 8)))), ("fields", "id,name,status"),
                        ("updated_since", str(_ts(r)))])
    elif k == 6:
        qs = _query(r, [("q", f"status:{r.choice(['active', 'open'])} AND age:[{r.randint(18, 30)} TO {r.randint(31, 70)}]"),
                        ("bbox", f"{r.uniform(2, 3):.3f},{r.uniform(48, 49):.3f},{r.uniform(3, 4):.3f},{r.uniform(49, 50):.3f}"),
                        ("cursor", _b64(r, 18, url=True, pad=False))])
    else:
        qs = _query(r, [("search", r.choice(SEARCH_WORDS)), ("per_page", r.randint(10, 100)), ("page", r.randint(1, 9)),
                        ("order", r.choice(["asc", "desc"])), ("orderby", r.choice(["date", "title", "relevance"])),
                        ("_embed", "1"), ("after", _iso(r))])
    return ("GET", f"{base}?{qs}", _headers(r, [_auth_header(r)] if r.random() < 0.6 else [], kind=r.choice(["api", "tool", "app"])), b"")


def api_mongo_request(r):
    name = r.choice(["Smi", "Mül", "O'Br", "Gar", "Ngu", "Kow", "Tan", "Dub"])
    conds = [
        {"age": {"$gte": r.randint(18, 30), "$lte": r.randint(31, 80)}},
        {"status": {"$in": r.sample(["new", "open", "pending", "shipped", "paid"], r.randint(2, 3))}},
        {"last_name": {"$regex": f"^{name}", "$options": r.choice(["i", ""])}},
        {"price": {"$lt": r.randint(50, 500), "$gt": r.randint(1, 49)}},
        {"tags": {"$all": r.sample(["sale", "new", "eco", "bestseller"], 2)}},
        {"deleted_at": {"$exists": False}},
        {"status": {"$ne": "archived"}},
        {"country": {"$nin": r.sample(["US", "GB", "DE", "FR", "JP"], 2)}},
        {"created_at": {"$gte": {"$date": _iso(r)}}},
        {"location": {"$near": {"$geometry": {"type": "Point", "coordinates": [round(r.uniform(-20, 30), 4), round(r.uniform(35, 60), 4)]},
                                "$maxDistance": r.randint(100, 5000)}}},
        {"items": {"$elemMatch": {"sku": f"SKU-{r.randint(100, 999)}", "qty": {"$gte": 2}}}},
        {"email": _email(r)},
    ]
    picked = r.sample(conds, r.randint(1, 3))
    flt = {"$and": picked} if len(picked) > 1 and r.random() < 0.5 else {k: v for c in picked for k, v in c.items()}
    if r.random() < 0.15:
        flt = {"$or": [picked[0], {"vip": True}]}
    body = {"filter": flt, "sort": {r.choice(["created_at", "price", "last_name"]): r.choice([1, -1])},
            "limit": r.randint(10, 100), "skip": r.randint(0, 500)}
    if r.random() < 0.3:
        body["projection"] = {"_id": 0, "name": 1, "email": 1}
    if r.random() < 0.2:
        body = {"pipeline": [{"$match": flt}, {"$group": {"_id": f"${r.choice(['status', 'country'])}", "total": {"$sum": "$amount"},
                                                          "n": {"$sum": 1}}}, {"$sort": {"total": -1}}, {"$limit": 10}]}
    if r.random() < 0.2:
        qs = _query(r, [("filter", json.dumps(flt, separators=(",", ":"))), ("limit", r.randint(10, 50))])
        return ("GET", f"/api/v1/{r.choice(RESOURCES)}?{qs}", _headers(r, [_auth_header(r)], kind="api"), b"")
    return ("POST", f"/api/v1/{r.choice(RESOURCES)}/{r.choice(['search', 'query', 'find', 'aggregate'])}",
            _headers(r, [("Content-Type", _json_ct(r)), _auth_header(r)], kind=r.choice(["api", "tool"])), _ijson(r, body))


def json_patch_request(r):
    ops = []
    for _ in range(r.randint(1, 5)):
        op = r.choice(["replace", "add", "remove", "test", "move", "copy"])
        path = "/" + "/".join(r.choice(["name", "address", "city", "tags", "settings", "notifications", "email", "items", "0",
                                        "price", "amount", "title", "status"]) for _ in range(r.randint(1, 3)))
        o = {"op": op, "path": path}
        if op in ("replace", "add", "test"):
            o["value"] = r.choice([r.randint(0, 999), "Müller & Söhne", True, None, [1, 2], {"a": 1}, keyword_text(r)[:40], 4.5])
            if op == "add" and r.random() < 0.4:
                o["path"] = "/tags/-"
        if op in ("move", "copy"):
            o["from"] = "/" + r.choice(["old_name", "draft/body", "addresses/0", "meta~1legacy"])
        ops.append(o)
    if r.random() < 0.3:  # JSON Merge Patch
        return ("PATCH", _api_path(r), _headers(r, [("Content-Type", "application/merge-patch+json"), _auth_header(r)], kind="api"),
                _ijson(r, {"title": _cap(_slug(r).replace("-", " ")), "settings": {"theme": None, "digest": "weekly"}}))
    ct = "application/json-patch+json" if r.random() < 0.7 else "application/json"
    return ("PATCH", _api_path(r), _headers(r, [("Content-Type", ct), _auth_header(r)], kind=r.choice(["api", "tool"])), _ijson(r, ops))


def jsonapi_request(r):
    typ = r.choice(["articles", "people", "comments", "orders", "products"])
    ct = "application/vnd.api+json"
    if r.random() < 0.35:
        qs = _qbrackets(r, [("include", r.choice(["author", "comments.author", "tags"])),
                            (f"fields[{typ}]", ",".join(r.sample(["title", "body", "created", "updated", "status"], 3))),
                            ("page[offset]", r.randint(0, 200)), ("page[limit]", r.choice([10, 20, 50])),
                            ("filter[search]", r.choice(SEARCH_WORDS)), ("sort", "-created")])
        return ("GET", f"/jsonapi/{typ}?{qs}", _headers(r, [("Accept", ct)], kind="api"), b"")
    rid = _uuid(r) if r.random() < 0.5 else str(r.randint(1, 99999))
    attrs = {"title": _cap(_slug(r).replace("-", " ")), "body": prose_text(r), "published": r.random() < 0.5,
             "created": _iso(r), "rating": round(r.uniform(0, 5), 1)}
    data = {"type": typ, "attributes": attrs,
            "relationships": {"author": {"data": {"type": "people", "id": str(r.randint(1, 999))}},
                              "tags": {"data": [{"type": "tags", "id": str(r.randint(1, 99))} for _ in range(r.randint(0, 3))]}}}
    method = r.choice(["POST", "PATCH"])
    path = f"/jsonapi/{typ}"
    if method == "PATCH":
        data["id"] = rid
        path += "/" + rid
    return (method, path, _headers(r, [("Content-Type", ct), ("Accept", ct), _auth_header(r)], kind="api"), _ijson(r, {"data": data}))


# --------------------------------------------------------------------------------
# Webhooks and OAuth

COMMIT_MSGS = ["Fix typo in README", "Bump lodash from 4.17.20 to 4.17.21", "Add dark mode toggle", "Refactor order service",
               "Merge pull request #«n» from «user»/«branch»", "Update CI matrix (node 18, 20 & 22)",
               "Handle NULL values in report query", "Don't crash when the cart is empty", "WIP: new checkout flow",
               "Revert \"Use select() instead of poll()\"", "docs: explain --dry-run flag", "chore(deps): update rust crate serde to 1.0.200"]


def webhook_request(r):
    k = r.randrange(6)
    ts = _ts(r)
    if k == 0:
        user = r.choice(["octocat", "jdoe", "maria-g", "dev-bot", "kenji-t"])
        repo = r.choice(APPS)
        commits = [{"id": _hex(r, 40), "message": _sub(r.choice(COMMIT_MSGS), n=r.randint(1, 999), user=user, branch=r.choice(BRANCHES)),
                    "timestamp": _iso(r), "author": {"name": " ".join(_name(r)), "email": _email(r), "username": user},
                    "added": [], "removed": [], "modified": [r.choice(["README.md", "src/main.rs", "package.json", "app/models/order.rb"])]}
                   for _ in range(r.randint(1, 3))]
        body = {"ref": "refs/heads/" + r.choice(BRANCHES), "before": _hex(r, 40), "after": commits[-1]["id"],
                "repository": {"id": r.randint(10 ** 6, 10 ** 9), "name": repo, "full_name": f"{user}/{repo}", "private": r.random() < 0.5,
                               "html_url": f"https://github.com/{user}/{repo}"}, "pusher": {"name": user, "email": _email(r)},
                "commits": commits, "head_commit": commits[-1]}
        raw = json.dumps(body, separators=(",", ":")).encode()
        h = [("Host", r.choice(API_HOSTS)), ("User-Agent", f"GitHub-Hookshot/{_hex(r, 7)}"), ("Accept", "*/*"),
             ("X-GitHub-Event", "push"), ("X-GitHub-Delivery", _uuid(r)), ("X-GitHub-Hook-ID", str(r.randint(10 ** 8, 10 ** 9))),
             ("X-Hub-Signature-256", "sha256=" + _hex(r, 64)), ("Content-Type", "application/json")]
        return ("POST", "/webhooks/github", h, raw)
    if k == 1:
        typ = r.choice(["payment_intent.succeeded", "invoice.paid", "customer.subscription.updated", "charge.refunded",
                        "checkout.session.completed"])
        obj = {"id": r.choice(["pi_", "in_", "sub_", "ch_", "cs_live_"]) + _alnum(r, 24), "object": typ.split(".")[0],
               "amount": r.randint(100, 99999), "currency": r.choice(["eur", "usd", "gbp"]), "customer": "cus_" + _alnum(r, 14),
               "metadata": {"order_id": str(r.randint(1000, 99999)), "note": keyword_text(r)[:60]}, "livemode": r.random() < 0.5,
               "status": r.choice(["succeeded", "paid", "active"])}
        body = {"id": "evt_" + _alnum(r, 24), "object": "event", "api_version": "2024-04-10", "created": ts, "type": typ,
                "data": {"object": obj, "previous_attributes": {"status": "incomplete"} if r.random() < 0.3 else None},
                "request": {"id": "req_" + _alnum(r, 14), "idempotency_key": _uuid(r)}}
        h = [("Host", r.choice(API_HOSTS)), ("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)"),
             ("Accept", "*/*; q=0.5, application/xml"), ("Content-Type", "application/json; charset=utf-8"),
             ("Stripe-Signature", f"t={ts},v1={_hex(r, 64)}")]
        return ("POST", "/webhooks/stripe", h, json.dumps(body, indent=2).encode())
    if k == 2:
        first, last = _name(r)
        body = {"id": r.randint(10 ** 12, 10 ** 13), "email": _email(r, first, last), "created_at": _iso(r), "currency": "EUR",
                "total_price": f"{r.randint(5, 500)}.{r.randint(0, 99):02d}", "note": r.choice([None, keyword_text(r)]),
                "line_items": [{"title": _cap(_slug(r).replace("-", " ")), "quantity": r.randint(1, 4), "sku": _alnum(r, 8).upper(),
                                "price": f"{r.randint(1, 99)}.00"} for _ in range(r.randint(1, 3))],
                "shipping_address": {"first_name": first, "last_name": last, "address1": _street(r), "city": r.choice(CITIES)[0],
                                     "phone": _phone(r)}}
        h = [("Host", r.choice(API_HOSTS)), ("User-Agent", "Shopify-Captain-Hook"), ("Accept", "*/*"), ("Content-Type", "application/json"),
             ("X-Shopify-Topic", "orders/create"), ("X-Shopify-Hmac-Sha256", _b64(r, 32)),
             ("X-Shopify-Shop-Domain", f"{r.choice(SLUG_ADJ)}-{r.choice(SLUG_NOUN)}.myshopify.com"), ("X-Shopify-Webhook-Id", _uuid(r))]
        return ("POST", "/webhooks/shopify/orders-create", h, json.dumps(body).encode())
    if k == 3:
        text = keyword_text(r) if r.random() < 0.5 else prose_text(r)
        body = {"token": _alnum(r, 24), "team_id": "T" + _alnum(r, 8).upper(), "api_app_id": "A" + _alnum(r, 10).upper(),
                "event": {"type": "message", "channel": "C" + _alnum(r, 10).upper(), "user": "U" + _alnum(r, 10).upper(),
                          "text": text, "ts": f"{ts}.{r.randint(0, 999999):06d}", "channel_type": "channel"},
                "type": "event_callback", "event_id": "Ev" + _alnum(r, 10).upper(), "event_time": ts}
        h = [("Host", r.choice(API_HOSTS)), ("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)"), ("Accept", "*/*"),
             ("Content-Type", "application/json"), ("X-Slack-Request-Timestamp", str(ts)), ("X-Slack-Signature", "v0=" + _hex(r, 64))]
        return ("POST", "/slack/events", h, json.dumps(body).encode())
    if k == 4:
        body = _form([("ToCountry", "US"), ("SmsMessageSid", "SM" + _hex(r, 32)), ("NumMedia", "0"), ("From", "+1" + str(r.randint(2012000000, 9899999999))),
                      ("To", "+1" + str(r.randint(2012000000, 9899999999))), ("Body", keyword_text(r)[:160]), ("AccountSid", "AC" + _hex(r, 32)),
                      ("MessageSid", "SM" + _hex(r, 32)), ("ApiVersion", "2010-04-01")])
        h = [("Host", r.choice(API_HOSTS)), ("User-Agent", "TwilioProxy/1.1"), ("Accept", "*/*"),
             ("Content-Type", "application/x-www-form-urlencoded"), ("X-Twilio-Signature", _b64(r, 20))]
        return ("POST", "/sms/incoming", h, body)
    body = {"type": r.choice(["issue.created", "deployment.finished", "user.signed_up", "form.submitted"]), "id": _uuid(r),
            "occurred_at": _iso(r), "data": _doc(r), "attempt": r.randint(1, 5)}
    h = [("Host", r.choice(API_HOSTS)), ("User-Agent", r.choice(["Svix-Webhooks/1.21", "Zapier", "Typeform Webhooks", "Go-http-client/2.0"])),
         ("Accept", "*/*"), ("Content-Type", "application/json"), ("webhook-id", "msg_" + _alnum(r, 27)),
         ("webhook-timestamp", str(ts)), ("webhook-signature", "v1," + _b64(r, 32))]
    return ("POST", f"/hooks/{_alnum(r, 20)}", h, json.dumps(body).encode())


REDIRECTS = ["https://app.example.com/callback", "https://www.example.org/auth/callback", "com.example.app:/oauth2redirect",
             "https://example.de/login/oauth/complete?provider=google", "https://shop.example/account/sso"]


def oauth_request(r):
    k = r.randrange(6)
    cid = r.choice([_alnum(r, 24), _uuid(r), f"{r.randint(10 ** 11, 10 ** 12)}-{_alnum(r, 32).lower()}.apps.googleusercontent.com"])
    redirect = r.choice(REDIRECTS)
    scope = " ".join(r.sample(["openid", "profile", "email", "offline_access", "read:orders", "repo", "user:email",
                               "https://www.googleapis.com/auth/calendar.readonly"], r.randint(1, 4)))
    if k == 0:
        qs = _query(r, [("response_type", "code"), ("client_id", cid), ("redirect_uri", redirect), ("scope", scope),
                        ("state", _b64(r, 24, url=True, pad=False)), ("code_challenge", _b64(r, 32, url=True, pad=False)),
                        ("code_challenge_method", "S256"), ("nonce", _alnum(r, 16)), ("prompt", r.choice(["consent", "login", "none"]))])
        return ("GET", f"/oauth/authorize?{qs}", _headers(r, nav=True), b"")
    if k == 1:
        pairs = [("grant_type", "authorization_code"), ("code", _b64(r, 30, url=True, pad=False)), ("redirect_uri", redirect),
                 ("client_id", cid), ("code_verifier", _alnum(r, 64, ALNUM + "-._~"))]
    elif k == 2:
        pairs = [("grant_type", "refresh_token"), ("refresh_token", _b64(r, 48, url=True, pad=False)), ("client_id", cid)]
    elif k == 3:
        pairs = [("grant_type", "client_credentials"), ("scope", scope), ("audience", "https://api.example.com")]
    elif k == 4:
        pairs = [("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", _alnum(r, 40)), ("client_id", cid)]
    else:
        return ("GET", f"/auth/callback?{_query(r, [('code', _b64(r, 30, url=True, pad=False)), ('state', _b64(r, 24, url=True, pad=False)), ('scope', scope), ('authuser', '0'), ('prompt', 'none')])}",
                _headers(r, [("Referer", "https://accounts.google.com/")], nav=True), b"")
    extra = [("Content-Type", "application/x-www-form-urlencoded")]
    if k == 3 or r.random() < 0.4:
        extra.append(("Authorization", "Basic " + _b64s(f"{cid}:{_alnum(r, 40, ALNUM + '-_')}")))
    return ("POST", r.choice(["/oauth/token", "/oauth2/v1/token", "/connect/token", "/realms/main/protocol/openid-connect/token"]),
            _headers(r, extra, kind=r.choice(["tool", "app", "api"])), _form(pairs))


# --------------------------------------------------------------------------------
# SOAP and XML documents (no DOCTYPE)

def _x(s):
    return _html_escape(str(s)).replace('"', "&quot;")


def xml_request(r):
    k = r.randrange(7)
    first, last = _name(r)
    city, country, zip_ = r.choice(CITIES)
    if k <= 1:
        op = r.choice(["GetOrderStatus", "CreateInvoice", "UpdateCustomer", "CheckAvailability"])
        if op == "CreateInvoice":
            lines = "".join(f"<inv:Line><inv:Sku>{_alnum(r, 6).upper()}</inv:Sku><inv:Description>{_x(_cap(_slug(r).replace('-', ' ')))}"
                            f"</inv:Description><inv:Qty>{r.randint(1, 20)}</inv:Qty><inv:UnitPrice currency=\"EUR\">"
                            f"{r.randint(1, 999)}.{r.randint(0, 99):02d}</inv:UnitPrice></inv:Line>" for _ in range(r.randint(1, 4)))
            inner = (f"<inv:CreateInvoice><inv:Customer><inv:Name>{_x(first + ' ' + last)}</inv:Name><inv:VatId>DE{r.randint(10 ** 8, 10 ** 9 - 1)}"
                     f"</inv:VatId><inv:Address>{_x(_street(r))}, {_x(zip_)} {_x(city)}</inv:Address></inv:Customer>"
                     f"<inv:Lines>{lines}</inv:Lines><inv:Notes>{_x(keyword_text(r))}</inv:Notes></inv:CreateInvoice>")
        elif op == "UpdateCustomer":
            inner = (f"<inv:UpdateCustomer><inv:Id>{r.randint(1, 99999)}</inv:Id><inv:Email>{_x(_email(r, first, last))}</inv:Email>"
                     f"<inv:Phone>{_x(_phone(r))}</inv:Phone><inv:Company>{_x(r.choice(['Smith & Sons Ltd.', 'Müller GmbH & Co. KG', 'O’Reilly Media', 'AT&T']))}"
                     f"</inv:Company></inv:UpdateCustomer>")
        else:
            inner = f"<inv:{op}><inv:OrderNumber>{r.randint(10 ** 5, 10 ** 7)}</inv:OrderNumber><inv:Date>{_iso(r)}</inv:Date></inv:{op}>"
        soap12 = r.random() < 0.4
        ns = "http://www.w3.org/2003/05/soap-envelope" if soap12 else "http://schemas.xmlsoap.org/soap/envelope/"
        hdr = (f"<soap:Header><wsse:Security xmlns:wsse=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd\">"
               f"<wsse:UsernameToken><wsse:Username>{_x(_ascii_fold(first).lower())}</wsse:Username><wsse:Password>{_x(_password(r))}"
               f"</wsse:Password></wsse:UsernameToken></wsse:Security></soap:Header>") if r.random() < 0.3 else ""
        body = (f'<?xml version="1.0" encoding="utf-8"?>\n<soap:Envelope xmlns:soap="{ns}" xmlns:inv="urn:example:billing:v2">'
                f"{hdr}<soap:Body>{inner}</soap:Body></soap:Envelope>")
        if soap12:
            h = _headers(r, [("Content-Type", f'application/soap+xml; charset=utf-8; action="urn:example:billing:v2/{op}"')], kind="tool")
        else:
            h = _headers(r, [("Content-Type", "text/xml; charset=utf-8"), ("SOAPAction", f'"urn:example:billing:v2/{op}"')], kind="tool")
        return ("POST", r.choice(["/soap", "/services/BillingService", "/ws/billing.asmx"]), h, body.encode())
    if k == 2:
        urls = "".join(f"<url><loc>https://{r.choice(HOSTS)}/{_slug(r)}?lang={r.choice(['en', 'de'])}&amp;v={r.randint(1, 9)}</loc>"
                       f"<lastmod>{_iso(r)[:10]}</lastmod><changefreq>weekly</changefreq><priority>0.{r.randint(1, 9)}</priority></url>"
                       for _ in range(r.randint(2, 8)))
        body = f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        return ("PUT", f"/api/v1/sites/{r.randint(1, 999)}/sitemap", _headers(r, [("Content-Type", "application/xml"), _auth_header(r)], kind="tool"), body.encode())
    if k == 3:
        items = "".join(f"<item><title>{_x(_cap(_slug(r).replace('-', ' ')))}</title><link>{_x(_url(r, fragment=False))}</link>"
                        f"<description><![CDATA[<p>{prose_text(r)}</p>]]></description><pubDate>{_http_date(r)}</pubDate>"
                        f"<guid isPermaLink=\"false\">{_uuid(r)}</guid></item>" for _ in range(r.randint(1, 4)))
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel><title>{_x(first)}\'s blog</title>'
                f"<link>https://blog.example.org/</link><description>Notes &amp; links</description>{items}</channel></rss>")
        return ("POST", "/feeds/import", _headers(r, [("Content-Type", "application/rss+xml" if r.random() < 0.3 else "application/xml")],
                                                   kind="tool"), body.encode())
    if k == 4:
        deps = "".join(f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{r.randint(1, 6)}.{r.randint(0, 20)}.{r.randint(0, 9)}"
                       f"</version>{'<scope>test</scope>' if r.random() < 0.3 else ''}</dependency>"
                       for g, a in r.sample([("org.springframework.boot", "spring-boot-starter-web"), ("com.fasterxml.jackson.core", "jackson-databind"),
                                             ("org.junit.jupiter", "junit-jupiter"), ("org.postgresql", "postgresql"),
                                             ("org.projectlombok", "lombok")], r.randint(2, 4)))
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<project xmlns="http://maven.apache.org/POM/4.0.0">'
                f"<modelVersion>4.0.0</modelVersion><groupId>com.example</groupId><artifactId>{r.choice(APPS)}</artifactId>"
                f"<version>1.{r.randint(0, 9)}.0-SNAPSHOT</version><dependencies>{deps}</dependencies></project>")
        ct, mp = _multipart(r, [("file", body.encode(), "pom.xml", "text/xml"), ("project", r.choice(APPS), None, None)])
        return ("POST", "/api/v1/scans", _headers(r, [("Content-Type", ct), _auth_header(r)], kind="tool"), mp)
    if k == 5:
        body = (f'<?xml version="1.0" encoding="utf-8"?>\n<resources>\n  <string name="app_name">{_x(r.choice(APPS).title())}</string>\n'
                f'  <string name="welcome">{_x(prose_text(r, sentences=1)).replace(chr(39), chr(92) + chr(39))}</string>\n'
                f'  <plurals name="items"><item quantity="one">%d item</item><item quantity="other">%d items</item></plurals>\n</resources>')
        return ("PUT", f"/api/v2/projects/{r.randint(1, 999)}/translations/{r.choice(['de', 'fr', 'ja', 'pt-BR'])}/strings.xml",
                _headers(r, [("Content-Type", "application/xml"), _auth_header(r)], kind="tool"), body.encode())
    pts = "".join(f'<trkpt lat="{r.uniform(45, 48):.6f}" lon="{r.uniform(6, 11):.6f}"><ele>{r.randint(300, 2500)}</ele><time>{_iso(r)}</time></trkpt>'
                  for _ in range(r.randint(3, 12)))
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<gpx version="1.1" creator="{r.choice(["Garmin Connect", "Strava", "Komoot"])}" '
            f'xmlns="http://www.topografix.com/GPX/1/1"><trk><name>{_x(_cap(_slug(r).replace("-", " ")))}</name><trkseg>{pts}</trkseg></trk></gpx>')
    return ("POST", "/api/v1/activities/upload", _headers(r, [("Content-Type", "application/xml")], kind="app"), body.encode())


# --------------------------------------------------------------------------------
# GraphQL

def graphql_request(r):
    k = r.randrange(10)
    rid = str(r.randint(1, 99999)) if r.random() < 0.5 else _b64s(f"{r.choice(['Product', 'User', 'Order'])}:{r.randint(1, 99999)}")
    op = None
    variables = {}
    if k == 0:
        op = r.choice(["GetProduct", "ProductPage", "ProductDetails"])
        q = (f"query {op}($id: ID!, $withReviews: Boolean = false) {{\n  product(id: $id) {{\n    ...ProductFields\n"
             f"    reviews(first: {r.randint(3, 20)}) @include(if: $withReviews) {{\n      edges {{ node {{ id rating body author {{ name }} }} }}\n"
             f"    }}\n  }}\n}}\n\nfragment ProductFields on Product {{\n  id\n  name\n  slug\n  price {{ amount currency }}\n"
             f"  images(first: 4) {{ url alt }}\n  __typename\n}}")
        variables = {"id": rid, "withReviews": r.random() < 0.5}
    elif k == 1:
        op = r.choice(["UpdateProfile", "SaveSettings"])
        q = f"mutation {op}($input: UpdateProfileInput!) {{\n  updateProfile(input: $input) {{\n    user {{ id displayName bio }}\n    errors {{ field message }}\n  }}\n}}"
        first, last = _name(r)
        variables = {"input": {"displayName": f"{first} {last}", "bio": keyword_text(r), "website": _url(r, fragment=False),
                               "location": r.choice(CITIES)[0]}}
    elif k == 2:
        keys = r.sample(["cart.title", "checkout.pay", "nav.home", "footer.legal", "errors.required"], 2)
        q = "{\n" + "\n".join(f"  {lang}_{i}: translation(key: \"{key}\", locale: \"{lang}\")" for i, key in enumerate(keys)
                              for lang in r.sample(["en", "de", "fr", "ja", "es"], 2)) + "\n}"
    elif k == 3:
        op = "Search"
        q = ("query Search($q: String!, $after: String, $first: Int = 20) {\n  search(query: $q, first: $first, after: $after) {\n"
             "    pageInfo { hasNextPage endCursor }\n    edges {\n      cursor\n      node {\n        __typename\n"
             "        ... on Product { id name price { amount } }\n        ... on Article { id title excerpt }\n      }\n    }\n  }\n}")
        variables = {"q": r.choice(SEARCH_WORDS), "after": _b64s(f"arrayconnection:{r.randint(0, 200)}") if r.random() < 0.5 else None}
    elif k == 4:
        op = "Viewer"
        q = ("query Viewer($skipOrders: Boolean!) {\n  viewer {\n    id\n    email\n    orders(last: 5) @skip(if: $skipOrders) {\n"
             "      nodes { id number total { amount currency } status createdAt }\n    }\n  }\n}")
        variables = {"skipOrders": r.random() < 0.5}
    elif k == 5:
        owner, name = r.choice([("rust-lang", "rust"), ("facebook", "react"), ("acme", r.choice(APPS))])
        q = (f"query {{\n  repository(owner: \"{owner}\", name: \"{name}\") {{\n    issues(first: {r.randint(5, 50)}, states: OPEN, "
             f"orderBy: {{field: CREATED_AT, direction: DESC}}, labels: [\"bug\"]) {{\n      totalCount\n"
             f"      nodes {{ number title author {{ login }} createdAt }}\n    }}\n  }}\n}}")
    elif k == 6:
        q = (f"{{\n  products(first: {r.randint(5, 30)}, query: \"tag:sale AND price:<{r.randint(20, 200)}\", sortKey: PRICE) {{\n"
             f"    edges {{ node {{ id title handle priceRange {{ minVariantPrice {{ amount currencyCode }} }} }} }}\n  }}\n}}")
    elif k == 7:
        op = "AddComment"
        q = ("mutation AddComment($postId: ID!, $body: String!) {\n  addComment(postId: $postId, body: $body) {\n"
             "    comment { id body createdAt author { name } }\n  }\n}")
        variables = {"postId": rid, "body": keyword_text(r) if r.random() < 0.6 else prose_text(r)}
    elif k == 8:
        h = _sha256(r)
        op = r.choice(["HomeFeed", "CartQuery", "ProductPage"])
        qs = _query(r, [("operationName", op), ("variables", json.dumps({"first": r.randint(5, 30), "locale": r.choice(["en", "de-DE"])},
                                                                         separators=(",", ":"))),
                        ("extensions", json.dumps({"persistedQuery": {"version": 1, "sha256Hash": h}}, separators=(",", ":")))], plus=False)
        return ("GET", f"/graphql?{qs}", _headers(r, [("apollographql-client-name", "web"), ("apollographql-client-version", f"{r.randint(1, 5)}.{r.randint(0, 40)}.0")],
                                                  kind="api"), b"")
    else:
        batch = [{"operationName": "Me", "variables": {}, "query": "query Me { me { id name __typename } }"},
                 {"operationName": "Cart", "variables": {"id": _uuid(r)},
                  "query": "query Cart($id: ID!) { cart(id: $id) { id lines(first: 50) { edges { node { id quantity } } } } }"}]
        return ("POST", "/graphql", _headers(r, [("Content-Type", "application/json")], kind="api"), _ijson(r, batch))
    doc = {"query": q}
    if op:
        doc["operationName"] = op
    if variables or r.random() < 0.5:
        doc["variables"] = variables
    extra = [("Content-Type", _json_ct(r))]
    if r.random() < 0.6:
        extra.append(_auth_header(r))
    if r.random() < 0.2:
        extra.append(("X-Shopify-Storefront-Access-Token", _hex(r, 32)))
    return ("POST", r.choice(["/graphql", "/api/graphql", "/api/2024-04/graphql.json", "/gql"]), _headers(r, extra, kind="api"), _ijson(r, doc))


# --------------------------------------------------------------------------------
# Cookies of real frameworks and tools

def _optanon(r):
    d = _dt(r).strftime("%a %b %d %Y %H:%M:%S GMT+0200 (Central European Summer Time)")
    return urllib.parse.urlencode([("isGpcEnabled", "0"), ("datestamp", d), ("version", "202403.1.0"), ("browserGpcFlag", "0"),
                                   ("isIABGlobal", "false"), ("hosts", ""), ("consentId", _uuid(r)), ("interactionCount", "1"),
                                   ("landingPath", "NotLandingPage"),
                                   ("groups", f"C0001:1,C0002:{r.randint(0, 1)},C0003:1,C0004:{r.randint(0, 1)}")])


def _cookiebot(r):
    return (f"{{stamp:%27{Q(_b64(r, 36), safe='')}%27%2Cnecessary:true%2Cpreferences:{r.choice(['true', 'false'])}"
            f"%2Cstatistics:{r.choice(['true', 'false'])}%2Cmarketing:{r.choice(['true', 'false'])}%2Cmethod:%27explicit%27"
            f"%2Cver:{r.randint(1, 4)}%2Cutc:{_ts(r) * 1000}%2Cregion:%27{r.choice(['de', 'fr', 'gb', 'us-06'])}%27}}")


def _cookie_pairs(r):
    user = _ascii_fold(r.choice(FIRST)).lower()
    return [
        lambda: ("_ga", f"GA1.{r.choice([1, 2])}.{r.randint(10 ** 8, 10 ** 10)}.{_ts(r)}"),
        lambda: (f"_ga_{_alnum(r, 10).upper()}", f"GS1.1.{_ts(r)}.{r.randint(1, 40)}.1.{_ts(r)}.0.0.0"),
        lambda: ("_gid", f"GA1.2.{r.randint(10 ** 8, 10 ** 10)}.{_ts(r)}"),
        lambda: ("_fbp", f"fb.1.{_ts(r) * 1000 + r.randint(0, 999)}.{r.randint(10 ** 8, 10 ** 10)}"),
        lambda: ("_gcl_au", f"1.1.{r.randint(10 ** 8, 10 ** 10)}.{_ts(r)}"),
        lambda: ("PHPSESSID", _alnum(r, 26, "abcdefghijklmnopqrstuv0123456789")),
        lambda: ("JSESSIONID", _hex(r, 32).upper() + r.choice(["", ".node0", ".worker1"])),
        lambda: ("ASP.NET_SessionId", _alnum(r, 24, "abcdefghijklmnopqrstuvwxyz012345")),
        lambda: (".AspNetCore.Antiforgery." + _alnum(r, 11, ALNUM + "-_"), "CfDJ8" + _alnum(r, 150, ALNUM + "-_")),
        lambda: ("connect.sid", "s%3A" + _alnum(r, 32, ALNUM + "-_") + "." + Q(_b64(r, 32, pad=False), safe="")),
        lambda: ("laravel_session", Q(_b64s(json.dumps({"iv": _b64(r, 16), "value": _b64(r, 48), "mac": _hex(r, 64), "tag": ""},
                                                      separators=(",", ":"))), safe="")),
        lambda: ("XSRF-TOKEN", Q(_b64s(json.dumps({"iv": _b64(r, 16), "value": _b64(r, 48), "mac": _hex(r, 64)},
                                                  separators=(",", ":"))), safe="")),
        lambda: ("_session_id", _hex(r, 32)),
        lambda: (f"_{r.choice(APPS)}_session", Q(_b64(r, 120), safe="") + "--" + _hex(r, 40)),
        lambda: ("csrftoken", _alnum(r, 32)),
        lambda: ("sessionid", _alnum(r, 32, LOWER_ALNUM)),
        lambda: ("session", _b64(r, 30, url=True, pad=False) + "." + _alnum(r, 6, ALNUM + "-_") + "." + _alnum(r, 27, ALNUM + "-_")),
        lambda: ("OptanonConsent", _optanon(r)),
        lambda: ("OptanonAlertBoxClosed", _iso(r)),
        lambda: ("CookieConsent", _cookiebot(r)),
        lambda: ("euconsent-v2", "CP" + _alnum(r, 70, ALNUM + "-_") + ".YAAAAAAAAAAA"),
        lambda: ("cart", Q(json.dumps({"items": [{"id": r.randint(1, 9999), "qty": r.randint(1, 3)} for _ in range(r.randint(1, 3))],
                                       "currency": r.choice(["EUR", "USD"])}, separators=(",", ":")), safe="")),
        lambda: ("prefs", _b64s(json.dumps({"theme": r.choice(["dark", "light"]), "lang": r.choice(["de", "en", "fr"]),
                                            "sidebar": r.random() < 0.5}, separators=(",", ":")))),
        lambda: ("AWSALB", _b64(r, 96)),
        lambda: ("AWSALBCORS", _b64(r, 96)),
        lambda: ("__cf_bm", f"{_alnum(r, 43, ALNUM + '_')}-{_ts(r)}-1.0.1.1-{_alnum(r, 60, ALNUM + '._')}"),
        lambda: ("cf_clearance", f"{_alnum(r, 43, ALNUM + '_')}-{_ts(r)}-1.2.1.1-{_alnum(r, 120, ALNUM + '._')}"),
        lambda: ("ajs_anonymous_id", Q(f'"{_uuid(r)}"', safe="")),
        lambda: (f"_hjSessionUser_{r.randint(10 ** 6, 4 * 10 ** 6)}",
                 _b64s(json.dumps({"id": _hex(r, 16), "created": _ts(r) * 1000, "existing": True}, separators=(",", ":")))),
        lambda: ("theme", r.choice(["dark", "light", "auto"])),
        lambda: ("lang", r.choice(["de-DE", "en", "fr_FR", "pt-BR", "ja"])),
        lambda: ("tz", Q(r.choice(["Europe/Berlin", "America/New_York", "Asia/Tokyo"]), safe="")),
        lambda: ("wordpress_logged_in_" + _hex(r, 32), Q(f"{user}|{_ts(r)}|{_alnum(r, 43)}|{_hex(r, 64)}", safe="")),
        lambda: ("wp-settings-time-1", str(_ts(r))),
        lambda: ("intercom-session-" + _alnum(r, 8, LOWER_ALNUM), Q(_b64(r, 60), safe="")),
        lambda: ("__stripe_mid", _uuid(r) + _hex(r, 6)),
        lambda: ("_shopify_y", _uuid(r)),
        lambda: ("cart_currency", r.choice(["EUR", "USD", "GBP"])),
        lambda: ("auth_token", _jwt(r)),
        lambda: ("recently_viewed", Q(",".join(str(r.randint(100, 99999)) for _ in range(r.randint(2, 6))), safe="")),
        lambda: ("_pk_id.1." + _hex(r, 4), f"{_hex(r, 16)}.{_ts(r)}."),
        lambda: ("_clck", f"{_alnum(r, 6, LOWER_ALNUM)}%7C2%7Cf{r.choice('abcdef')}%7C0%7C{r.randint(1000, 1600)}"),
        lambda: ("remember_me", "true"),
        lambda: ("locale", r.choice(["en_US", "de_DE", "es_ES"])),
        lambda: ("__Host-next-auth.csrf-token", Q(f"{_hex(r, 64)}|{_hex(r, 64)}", safe="")),
        lambda: ("__Secure-next-auth.session-token", _b64(r, 140, url=True, pad=False) + ".." + _b64(r, 16, url=True, pad=False)),
    ]


def _cookie_header(r, light=False):
    pool = _cookie_pairs(r)
    n = r.randint(1, 3) if light else r.randint(3, 12)
    return "; ".join(f"{k}={v}" for k, v in (f() for f in r.sample(pool, n)))


def cookies_request(r):
    path = r.choice(["/", "/account", "/cart", f"/products/{_slug(r)}", "/checkout/shipping", f"/blog/{_slug(r)}",
                     "/api/v1/me", "/api/cart", "/dashboard", f"/orders/{r.randint(1000, 99999)}"])
    kind = "api" if path.startswith("/api") else "browser"
    return ("GET", path, _headers(r, [("Cookie", _cookie_header(r))], kind=kind, nav=kind == "browser"), b"")


# --------------------------------------------------------------------------------
# Tracking parameters, return URLs, searches

def tracking_request(r):
    pairs = []
    if r.random() < 0.8:
        pairs += [("utm_source", r.choice(["google", "newsletter", "facebook", "instagram", "linkedin", "bing", "tiktok", "partner_site"])),
                  ("utm_medium", r.choice(["cpc", "email", "social", "display", "affiliate", "organic"])),
                  ("utm_campaign", r.choice(["spring_sale_2024", "black-friday", "Launch+Q3", "brand|exact", "retargeting (EU)",
                                             "newsletter_2024-05-07", "summer%off"]))]
        if r.random() < 0.5:
            pairs.append(("utm_content", r.choice(["hero_banner", "cta-button", "text link", "v2"])))
        if r.random() < 0.4:
            pairs.append(("utm_term", r.choice(SEARCH_WORDS)))
    extra = r.choice([
        [("gclid", "Cj0KCQjw" + _alnum(r, 80, ALNUM + "-_") + "_BwE")],
        [("fbclid", "IwAR" + _alnum(r, 55, ALNUM + "-_"))],
        [("msclkid", _hex(r, 32))],
        [("mc_cid", _hex(r, 10)), ("mc_eid", _hex(r, 10))],
        [("_hsenc", "p2ANqtz-" + _alnum(r, 60, ALNUM + "-_")), ("_hsmi", str(r.randint(10 ** 7, 10 ** 9)))],
        [("ttclid", _alnum(r, 40, ALNUM + "-_"))], [("igshid", _alnum(r, 16))], [("yclid", str(r.randint(10 ** 15, 10 ** 17)))],
        [("ref", r.choice(["producthunt", "hn", "twitter"]))], [("srsltid", "AfmBOo" + _alnum(r, 60, ALNUM + "-_"))],
        [("gad_source", "1"), ("gbraid", "0AAAAA" + _alnum(r, 30, ALNUM + "-_"))], [],
    ])
    pairs += extra
    r.shuffle(pairs)
    base = r.choice(["/", f"/products/{_slug(r)}", f"/landing/{_slug(r)}", f"/blog/{_slug(r)}", "/pricing", "/signup",
                     f"/collections/{r.choice(SLUG_NOUN)}"])
    if r.random() < 0.3:
        pairs.insert(0, ("variant", str(r.randint(10 ** 10, 10 ** 11))))
    return ("GET", f"{base}?{_query(r, pairs)}", _headers(r, nav=True), b"")


RETURN_PATHS = ["/account/orders?page=«n»", "/checkout/payment", "/dashboard#settings", "/cart?coupon=SPRING-20",
                "/settings/profile?tab=security", "/products/«slug»?color=blue&size=M", "/de/konto/übersicht", "/",
                "/projects/«n»/issues?state=open&sort=-updated", "/admin/reports?from=2024-01-01&to=2024-03-31",
                "/wiki/Main_Page", "/courses/«slug»/lessons/«n»#transcript"]


def url_param_request(r):
    rel = _sub(r.choice(RETURN_PATHS), n=r.randint(1, 99), slug=_slug(r))
    absu = r.choice([_url(r), f"https://{r.choice(HOSTS)}{rel}", f"https://app.example.com/oauth/done?state={_alnum(r, 16)}"])
    k = r.randrange(9)
    if k == 0:
        return ("GET", f"/login?{_query(r, [('next', rel)])}", _headers(r, nav=True), b"")
    if k == 1:
        # unencoded slashes in a relative return path, as many apps write it
        return ("GET", f"/login?next={Q(rel, safe='/')}", _headers(r, nav=True), b"")
    if k == 2:
        return ("GET", f"/sso/start?{_query(r, [('return_to', absu), ('locale', r.choice(['en', 'de']))])}", _headers(r, nav=True), b"")
    if k == 3:
        text = keyword_text(r)[:100]
        return ("GET", f"/share?{_query(r, [('url', _url(r)), ('text', text), ('via', r.choice(HANDLES)[1:])])}", _headers(r, nav=True), b"")
    if k == 4:
        return ("GET", f"/r?{_query(r, [('u', _url(r)), ('sig', _hex(r, 16)), ('src', 'email')])}", _headers(r, nav=True), b"")
    if k == 5:
        return ("POST", "/api/v1/link-preview", _headers(r, [("Content-Type", _json_ct(r))], kind="api"), _ijson(r, {"url": _url(r)}))
    if k == 6:
        return ("GET", f"/logout?{_query(r, [('post_logout_redirect_uri', r.choice(REDIRECTS)), ('id_token_hint', _jwt(r))])}",
                _headers(r, nav=True), b"")
    if k == 7:
        return ("POST", "/session", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
                _form([("email", _email(r)), ("password", _password(r)), ("redirect", rel), ("remember", "1")]))
    return ("GET", f"/embed?{_query(r, [('src', _url(r)), ('width', r.choice([560, 640])), ('height', r.choice([315, 360])), ('autoplay', '0')])}",
            _headers(r, nav=True), b"")


SEARCH_FORMS = ["\"«w»\" -«x» site:«site»", "«w» price:<«n»", "«w» OR «w2»", "C++ vs C#", "node.js «w»", ".NET 8 «w»",
                "1/2 cup flour in grams", "intitle:review \"«w»\"", "filetype:pdf «w» «y»", "«w» near me", "O'Reilly «w»",
                "what does \"select * from\" mean", "how to exit vim", "rock & roll hall of fame", "tom & jerry episode «n»",
                "«n»% off «w»", "#«tag»", "@«handle»", "AT&T customer service", "«email»", "\"union station\" chicago",
                "drop shipping «w»", "sleep apnea symptoms", "script writing course", "alert dialog android", "java vs javascript",
                "c:\\users\\«name»\\documents", "¿qué hora es en «city»?", "東京 ラーメン おすすめ", "café près de moi",
                "Straße vs Strasse", "size:>«n»MB", "is:unread from:«name»", "label:work after:«y»/01/01",
                "author:\"«first» «last»\"", "tag:rust -tag:async", "(red OR blue) AND «w»", "price:[10 TO «n»]", "«w»~",
                "title:\"how to\" «w»", "«w» NOT «w2»", "«w» -«x» -«x2»", "«w» | «w2»", "«w» && «w2»", "«w»?", "«w»*",
                "«first» «last»", "«w» («y»)", "«w» \"«w2»\"", "$«n» «w»", "«n» × «n» cm «w»", "what is 2+2",
                "«w» <«n»€", "delete facebook account", "update iphone to ios 17.4", "order by date excel", "insert row excel shortcut"]


def search_text(r):
    first, last = _name(r)
    w = r.choice(SEARCH_WORDS)
    return _sub(r.choice(SEARCH_FORMS), w=w, w2=r.choice(SEARCH_WORDS), x=r.choice(SLUG_NOUN), x2=r.choice(SLUG_ADJ),
                site=r.choice(["example.com", "reddit.com", "stackoverflow.com", "*.gov", "docs.python.org"]), n=r.randint(2, 500),
                y=r.randint(2015, 2025), tag=r.choice(HASHTAGS)[1:], handle=r.choice(HANDLES)[1:], email=_email(r),
                name=_ascii_fold(first).lower(), city=r.choice(CITIES)[0], first=first, last=last)


def search_request(r):
    q = search_text(r)
    k = r.randrange(6)
    if k == 0:
        return ("GET", f"/search?{_query(r, [('q', q)], plus=True)}", _headers(r, nav=True), b"")
    if k == 1:
        return ("GET", f"/search?{_query(r, [('q', q), ('page', r.randint(1, 9)), ('sort', r.choice(['relevance', 'newest', 'price_asc']))])}",
                _headers(r, nav=True), b"")
    if k == 2:
        return ("GET", f"/api/suggest?{_query(r, [('term', q[:r.randint(2, max(3, len(q)))]), ('limit', 8)], plus=False)}",
                _headers(r, [("X-Requested-With", "XMLHttpRequest")], kind="api"), b"")
    if k == 3:
        facets = [("q", q), ("category", r.choice(["shoes", "home & garden", "books", "électronique"])),
                  ("price", f"{r.randint(0, 50)}-{r.randint(51, 500)}"), ("brand[]", r.choice(["Acme", "Müller", "O'Neill"])),
                  ("rating", r.randint(1, 4)), ("in_stock", "1")]
        return ("GET", f"/s?{_query(r, facets)}", _headers(r, nav=True), b"")
    if k == 4:
        return ("POST", "/api/v1/search", _headers(r, [("Content-Type", _json_ct(r))], kind="api"),
                _ijson(r, {"query": q, "filters": {"lang": r.choice(["en", "de", None])}, "page": r.randint(1, 5), "size": 20,
                           "highlight": True}))
    return ("GET", f"/{r.choice(['forum', 'docs', 'help'])}/search?{_query(r, [('q', q), ('in', r.choice(['title', 'body', 'all']))], plus=False)}",
            _headers(r, nav=True), b"")


# --------------------------------------------------------------------------------
# Sign-up, login, checkout

COUNTRIES = ["DE", "FR", "GB", "US", "ES", "IT", "PL", "NL", "JP", "KR", "BR", "IN", "TR", "VN", "IL", "AE", "GR", "CA"]


def signup_request(r):
    first, last = _name(r)
    email = _email(r, first, last)
    pw = _password(r)
    k = r.randrange(6)
    if k == 0:
        return ("POST", "/register", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
                _form([("first_name", first), ("last_name", last), ("email", email), ("password", pw), ("password_confirmation", pw),
                       ("country", r.choice(COUNTRIES)), ("terms", "on"), ("newsletter", r.choice(["1", "0"])),
                       ("_token", _alnum(r, 40))]))
    if k == 1:
        return ("POST", "/api/v1/auth/signup", _headers(r, [("Content-Type", _json_ct(r))], kind="api"),
                _ijson(r, {"name": f"{first} {last}", "email": email, "password": pw, "locale": r.choice(["de-DE", "fr-FR", "en-GB", "ja-JP"]),
                           "phone": _phone(r), "birthday": _iso(r)[:10], "accepted_terms_at": _iso(r),
                           "referral_code": r.choice([None, _alnum(r, 8).upper()]), "captcha": _b64(r, 200, url=True, pad=False)}))
    if k == 2:
        invites = r.choice([", ", "; ", "\n"]).join(_email_display(r) for _ in range(r.randint(2, 5)))
        return ("POST", f"/teams/{_slug(r)}/invitations", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
                _form([("emails", invites), ("role", r.choice(["member", "admin", "viewer"])),
                       ("message", keyword_text(r) if r.random() < 0.5 else prose_text(r))]))
    if k == 3:
        return ("POST", "/newsletter/subscribe", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
                _form([("EMAIL", email), ("FNAME", first), ("LNAME", last), ("b_" + _hex(r, 25) + "_" + _hex(r, 10), "")]))
    if k == 4:
        ct, mp = _multipart(r, [("user[name]", f"{first} {last}", None, None), ("user[email]", email, None, None),
                                ("user[password]", pw, None, None), ("user[company]", r.choice(["Smith & Sons", "Müller GmbH", "L'Oréal", "AT&T", ""]), None, None),
                                ("user[website]", _url(r, fragment=False), None, None)])
        return ("POST", "/users", _headers(r, [("Content-Type", ct)], nav=True), mp)
    return ("GET", f"/confirm-email?{_query(r, [('token', _b64(r, 32, url=True, pad=False)), ('email', email)])}", _headers(r, nav=True), b"")


def login_request(r):
    first, last = _name(r)
    user = r.choice([_email(r, first, last), _ascii_fold(first).lower() + str(r.randint(1, 999)), f"{first} {last}",
                     _ascii_fold(last).lower().replace(" ", "")])
    pw = _password(r)
    k = r.randrange(7)
    if k == 0:
        return ("POST", "/login", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
                _form([("username", user), ("password", pw), ("remember_me", r.choice(["on", "1"])), ("csrf_token", _b64(r, 32))]))
    if k == 1:
        return ("POST", "/api/auth/login", _headers(r, [("Content-Type", _json_ct(r))], kind="api"),
                _ijson(r, {"email": user, "password": pw, "remember": r.random() < 0.5, "device_name": r.choice(["iPhone", "Chrome on Windows", "Pixel 8"])}))
    if k == 2:
        return ("POST", "/wp-login.php", _headers(r, [("Content-Type", "application/x-www-form-urlencoded"),
                                                      ("Cookie", "wordpress_test_cookie=WP%20Cookie%20check")], nav=True),
                _form([("log", user), ("pwd", pw), ("rememberme", "forever"), ("wp-submit", "Log In"),
                       ("redirect_to", f"https://{r.choice(HOSTS)}/wp-admin/"), ("testcookie", "1")]))
    if k == 3:
        return ("POST", "/j_security_check", _headers(r, [("Content-Type", "application/x-www-form-urlencoded")], nav=True),
                _form([("j_username", user), ("j_password", pw)]))
    if k == 4:
        return ("GET", "/api/v1/me", _headers(r, [("Authorization", "Basic " + _b64s(f"{_ascii_fold(first).lower()}:{pw}"))], kind="tool"), b"")
    if k == 5:
        return ("POST", "/account/password", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
                _form([("current_password", _password(r)), ("new_password", pw), ("new_password_confirm", pw), ("logout_others", "on")]))
    return ("POST", "/api/auth/2fa", _headers(r, [("Content-Type", _json_ct(r))], kind="api"),
            _ijson(r, {"otp": f"{r.randint(0, 999999):06d}", "remember_device": True, "challenge_id": _uuid(r)}))


NOTES = ["Please leave at the back door; the dog is friendly :)", "Gate code 1234# -- ring twice", "Call 10 min before arrival",
         "Bitte beim Nachbarn (Nr. 5) abgeben", "Laisser chez la gardienne, merci !", "No plastic bag please & no invoice in the box",
         "It's a gift -- don't include the receipt!", "Deliver after 6pm (I'm at work 9-5)", "3rd floor, no elevator :(",
         "Por favor, entregar en recepción", "Buzzer #12B / side entrance on O'Connell St", ""]


def checkout_request(r):
    first, last = _name(r)
    city, country, zip_ = r.choice(CITIES)
    company = r.choice(["", "", "Smith & Sons Ltd.", "O'Reilly Media", "Müller GmbH & Co. KG", "Café \"Le Petit\" SARL", "AT&T", "Ben & Jerry's"])
    items = [(f"{r.choice(['TSH', 'MUG', 'BAG', 'LMP'])}-{r.randint(100, 999)}", r.randint(1, 4), f"{r.randint(3, 200)}.{r.choice([0, 49, 95, 99]):02d}")
             for _ in range(r.randint(1, 4))]
    if r.random() < 0.55:
        pairs = [("email", _email(r, first, last)), ("shipping[first_name]", first), ("shipping[last_name]", last),
                 ("shipping[company]", company), ("shipping[address1]", _street(r)), ("shipping[address2]", r.choice(["", f"Apt {r.randint(1, 99)}", "c/o Reception"])),
                 ("shipping[city]", city), ("shipping[zip]", zip_), ("shipping[country]", country), ("shipping[phone]", _phone(r)),
                 ("delivery_window", r.choice(["08:00-12:00", "12:00–18:00", "evening (18-21h)"])), ("note", r.choice(NOTES)),
                 ("coupon", r.choice(["", "WELCOME10", "SPRING-20", "FREESHIP", "VIP#2024"])),
                 ("payment_method_id", "pm_" + _alnum(r, 24)), ("gift_message", r.choice(["", keyword_text(r)[:120], prose_text(r)[:120]]))]
        for i, (sku, qty, price) in enumerate(items):
            pairs += [(f"items[{i}][sku]", sku), (f"items[{i}][qty]", str(qty)), (f"items[{i}][price]", price)]
        pairs.append(("authenticity_token", _b64(r, 64)))
        return ("POST", "/checkout", _headers(r, [("Content-Type", _form_ct(r))], nav=True), _form(pairs))
    body = {"email": _email(r, first, last), "shippingAddress": {"firstName": first, "lastName": last, "company": company or None,
                                                                  "street": _street(r), "city": city, "postalCode": zip_, "countryCode": country,
                                                                  "phone": _phone(r)},
            "billingSameAsShipping": r.random() < 0.7, "lines": [{"sku": s, "quantity": q, "unitPrice": float(p)} for s, q, p in items],
            "deliveryNote": r.choice(NOTES), "paymentMethod": {"type": r.choice(["card", "paypal", "sepa_debit", "klarna"]),
                                                               "token": "tok_" + _alnum(r, 24), "last4": f"{r.randint(0, 9999):04d}"},
            "currency": r.choice(["EUR", "USD", "GBP"]), "acceptsMarketing": r.random() < 0.4, "clientTotal": round(r.uniform(5, 900), 2)}
    return ("POST", r.choice(["/api/checkout", "/api/v2/carts/" + _uuid(r) + "/complete", "/store/checkout/complete"]),
            _headers(r, [("Content-Type", _json_ct(r)), ("Idempotency-Key", _uuid(r))], kind="api"), _ijson(r, body))


# --------------------------------------------------------------------------------
# Chat, analytics, browser reports

def chat_request(r):
    k = r.random()
    if k < 0.45:
        text = keyword_text(r)
    elif k < 0.85:
        text = prose_text(r)
    else:
        text = r.choice(["can you run `npm ci && npm test` again?", "PR is up: " + _url(r), "lgtm 👍 ship it", "brb ☕",
                         "the build is red again -- `make lint` fails on main", "meeting moved to 3pm (CET) / 9am (EST)"])
    if r.random() < 0.3:
        text = r.choice(HANDLES) + " " + text
    body = {"text": text, "client_msg_id": _uuid(r)}
    if r.random() < 0.3:
        body["mentions"] = [{"user_id": _alnum(r, 9).upper(), "offset": 0, "length": r.randint(4, 12)}]
    if r.random() < 0.2:
        body["attachments"] = [{"type": "image", "url": f"https://cdn.example.com/u/{_hex(r, 16)}/{_slug(r)}.jpg",
                                "width": 1280, "height": 960}]
    if r.random() < 0.2:
        body["thread_ts"] = f"{_ts(r)}.{r.randint(0, 999999):06d}"
    way = r.randrange(4)
    if way == 0:
        return ("POST", f"/api/v1/channels/{_alnum(r, 10).upper()}/messages", _headers(r, [("Content-Type", _json_ct(r)), _auth_header(r)], kind="api"),
                _ijson(r, body))
    if way == 1:
        return ("POST", f"/api/conversations/{r.randint(1000, 999999)}/messages", _headers(r, [("Content-Type", _json_ct(r))], kind="app"),
                _ijson(r, {"message": {"body": text, "sent_at": _iso(r), "reply_to": r.choice([None, r.randint(1, 99999)])}}))
    if way == 2:
        return ("PUT", f"/api/v1/messages/{_uuid(r)}", _headers(r, [("Content-Type", _json_ct(r)), _auth_header(r)], kind="api"),
                _ijson(r, {"text": text, "edited": True}))
    return ("POST", "/chat/send", _headers(r, [("Content-Type", _form_ct(r)), ("X-Requested-With", "XMLHttpRequest")], kind="api"),
            _form([("room", _slug(r)), ("msg", text), ("nonce", _hex(r, 16))]))


def analytics_request(r):
    k = r.randrange(7)
    page = f"https://{r.choice(HOSTS)}/{_slug(r)}?{_query(r, [('utm_source', 'newsletter'), ('ref', r.choice(['nav', 'footer']))])}"
    if k == 0:
        ev = {"event": r.choice(["page_view", "add_to_cart", "begin_checkout", "scroll", "click", "search"]), "url": page,
              "referrer": _url(r), "title": _cap(_slug(r).replace("-", " ")) + " | Shop", "screen": r.choice(["1920x1080", "390x844", "1440x900"]),
              "lang": r.choice(["de-DE", "en-US", "fr-FR"]), "tz": r.choice(["Europe/Berlin", "America/Chicago"]), "ts": _ts(r) * 1000,
              "session_id": _uuid(r), "props": {"search_term": search_text(r)} if r.random() < 0.3 else {}}
        return ("POST", r.choice(["/collect", "/api/event", "/t"]), _headers(r, [("Content-Type", "text/plain;charset=UTF-8")], kind="api"),
                json.dumps(ev, ensure_ascii=False).encode())
    if k == 1:
        pairs = [("v", "2"), ("tid", "G-" + _alnum(r, 10).upper()), ("gtm", "45je4" + _alnum(r, 5).lower()), ("_p", str(r.randint(10 ** 9, 10 ** 10))),
                 ("cid", f"{r.randint(10 ** 8, 10 ** 10)}.{_ts(r)}"), ("ul", r.choice(["en-us", "de-de", "fr"])), ("sr", "1920x1080"),
                 ("_s", str(r.randint(1, 9))), ("sid", str(_ts(r))), ("sct", str(r.randint(1, 40))), ("seg", "1"), ("dl", page),
                 ("dr", _url(r)), ("dt", _cap(_slug(r).replace("-", " ")) + " – Example"), ("en", "page_view"), ("_et", str(r.randint(1, 60000)))]
        return ("GET", f"/g/collect?{_query(r, pairs, plus=False)}", _headers(r, [("Sec-Fetch-Dest", "empty")], kind="api", accept="*/*"), b"")
    if k == 2:
        metric = r.choice(["LCP", "CLS", "INP", "FCP", "TTFB"])
        body = {"name": metric, "value": round(r.uniform(0, 0.4) if metric == "CLS" else r.uniform(50, 6000), 4),
                "rating": r.choice(["good", "needs-improvement", "poor"]), "id": f"v4-{_ts(r)}{r.randint(100, 999)}-{r.randint(10 ** 12, 10 ** 13)}",
                "navigationType": r.choice(["navigate", "reload", "back-forward"]), "page": page,
                "attribution": {"element": r.choice(["#main>div.hero>img", "body>header>nav", "button.add-to-cart"]), "loadState": "complete"}}
        return ("POST", "/api/vitals", _headers(r, [("Content-Type", "application/json")], kind="api"), _ijson(r, body))
    if k == 3:
        blocked = r.choice(["https://tracker.example.net/pixel.gif", "inline", "eval", "https://fonts.example.org/x.woff2", "data"])
        body = {"csp-report": {"document-uri": page, "referrer": "", "violated-directive": r.choice(["img-src", "script-src-elem", "font-src", "connect-src"]),
                               "effective-directive": r.choice(["img-src", "script-src-elem", "font-src"]),
                               "original-policy": "default-src 'self'; img-src 'self' https://cdn.example.com data:; script-src 'self' "
                                                  "'nonce-" + _b64(r, 16) + "'; report-uri /csp-report",
                               "disposition": r.choice(["enforce", "report"]), "blocked-uri": blocked, "status-code": 200,
                               "line-number": r.randint(1, 400), "source-file": f"https://{r.choice(HOSTS)}/static/js/app.{_hex(r, 8)}.js"}}
        return ("POST", "/csp-report", _headers(r, [("Content-Type", "application/csp-report")], kind="api"), json.dumps(body).encode())
    if k == 4:
        fn = r.choice(["renderList", "onSubmit", "formatPrice", "useCart", "t.map"])
        env_head = {"event_id": _hex(r, 32), "sent_at": _iso(r), "sdk": {"name": "sentry.javascript.react", "version": "7.112.2"}}
        ev = {"exception": {"values": [{"type": "TypeError", "value": r.choice(["Cannot read properties of undefined (reading 'map')",
                                                                                  "Failed to fetch", "x is not a function",
                                                                                  "Load failed", "Unexpected token '<', \"<!DOCTYPE \"... is not valid JSON"]),
                                        "stacktrace": {"frames": [{"filename": f"https://{r.choice(HOSTS)}/static/js/main.{_hex(r, 8)}.js",
                                                                   "function": fn, "lineno": 2, "colno": r.randint(100, 90000)}]}}]},
              "level": "error", "platform": "javascript", "request": {"url": page, "headers": {"User-Agent": _ua(r, "browser")}},
              "tags": {"release": f"web@{r.randint(1, 9)}.{r.randint(0, 40)}.0"}}
        payload = json.dumps(env_head) + "\n" + json.dumps({"type": "event"}) + "\n" + json.dumps(ev) + "\n"
        return ("POST", f"/api/{r.randint(1, 99)}/envelope/?sentry_key={_hex(r, 32)}&sentry_version=7",
                _headers(r, [("Content-Type", "text/plain;charset=UTF-8")], kind="api"), payload.encode())
    if k == 5:
        batch = {"batch": [{"type": r.choice(["track", "page", "identify"]), "event": r.choice(["Product Viewed", "Order Completed", "Signed Up"]),
                            "anonymousId": _uuid(r), "properties": {"product_id": _rid(r), "price": round(r.uniform(1, 300), 2),
                                                                    "name": _cap(_slug(r).replace("-", " ")), "coupon": r.choice([None, "SPRING-20"])},
                            "context": {"locale": "en-US", "page": {"url": page, "search": "?utm_source=newsletter"}},
                            "timestamp": _iso(r), "messageId": "ajs-next-" + _hex(r, 32)} for _ in range(r.randint(1, 4))],
                 "sentAt": _iso(r)}
        return ("POST", "/v1/batch", _headers(r, [("Content-Type", "application/json"), ("Authorization", "Basic " + _b64s(_alnum(r, 32) + ":"))],
                                              kind="api"), _ijson(r, batch))
    rep = [{"age": r.randint(1, 60000), "type": r.choice(["deprecation", "intervention", "network-error"]), "url": page,
            "user_agent": _ua(r, "browser"), "body": {"id": "UnloadHandler", "message": "Unload event listeners are deprecated and will be removed.",
                                                     "sourceFile": f"https://{r.choice(HOSTS)}/static/js/vendor.{_hex(r, 8)}.js",
                                                     "lineNumber": r.randint(1, 9), "columnNumber": r.randint(1, 90000)}}]
    return ("POST", "/reports", _headers(r, [("Content-Type", "application/reports+json")], kind="api"), json.dumps(rep).encode())


# --------------------------------------------------------------------------------
# Page and asset loads

def browse_request(r):
    k = r.randrange(12)
    extra = []
    nav = True
    accept = None
    kind = r.choices(["browser", "bot", "tool", "app"], [75, 12, 8, 5])[0]
    if k == 0:
        path = "/"
    elif k == 1:
        path = f"/products/{_slug(r)}" + (f"?{_query(r, [('color', r.choice(PROSE['en']['colors'])), ('size', r.choice(['S', 'M', 'L', '42', '10.5']))])}"
                                          if r.random() < 0.5 else "")
    elif k == 2:
        path = f"/blog/{r.randint(2018, 2025)}/{r.randint(1, 12):02d}/{_slug(r)}"
    elif k == 3:
        path = "/" + Q(r.choice(["de/kategorie/küche-haushalt", "fr/catégorie/été", "ja/商品/" + str(r.randint(1, 9999)),
                                  "es/niños/juguetes", "pl/łazienka", "ru/каталог/обувь", "el/προϊόντα", "tr/ürünler/çanta",
                                  "zh/产品/" + str(r.randint(1, 999)), "ko/상품/" + str(r.randint(1, 999))]))
    elif k == 4:
        nav = False
        h = _hex(r, 8)
        path = r.choice([f"/static/js/main.{h}.js", f"/static/js/{r.randint(100, 999)}.{h}.chunk.js", f"/assets/index-{h}.css",
                         f"/_next/static/chunks/pages/{r.choice(['index', '_app', 'products/[slug]'])}-{_hex(r, 16)}.js",
                         f"/build/app.{h}.css", f"/fonts/{r.choice(['Inter-var', 'Roboto-Regular', 'NotoSansJP-Bold'])}.woff2"])
        path = Q(path, safe="/._-")
        accept = r.choice(["*/*", "text/css,*/*;q=0.1", "font/woff2,*/*;q=0.8"])
        if r.random() < 0.4:
            extra.append(("If-None-Match", f'"{_hex(r, 16)}"'))
    elif k == 5:
        nav = False
        path = f"/images/{_slug(r)}-{r.choice([320, 640, 800, 1200])}x{r.choice([240, 480, 600, 900])}.{r.choice(['webp', 'jpg', 'png', 'avif'])}"
        if r.random() < 0.5:
            path += f"?{_query(r, [('w', r.choice([320, 640, 1080])), ('q', r.choice([75, 80, 90])), ('fm', 'webp'), ('fit', 'crop')])}"
        accept = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
    elif k == 6:
        nav = False
        path = r.choice(["/favicon.ico", "/robots.txt", "/sitemap.xml", "/apple-touch-icon.png", "/manifest.webmanifest",
                         "/.well-known/apple-app-site-association", "/.well-known/security.txt", "/sw.js", "/feed.xml", "/ads.txt",
                         "/.well-known/openid-configuration", "/humans.txt", "/browserconfig.xml"])
    elif k == 7:
        path = f"/help/articles/{r.randint(1000, 99999)}-{_slug(r)}"
    elif k == 8:
        path = f"/category/{r.choice(SLUG_NOUN)}?{_query(r, [('page', r.randint(2, 30)), ('sort', r.choice(['price_asc', 'price_desc', 'newest', 'popularity']))])}"
        if r.random() < 0.3:
            extra.append(("Cache-Control", "max-age=0"))
    elif k == 9:
        path = f"/account/orders/{r.randint(10000, 999999)}"
        extra.append(("Cookie", _cookie_header(r)))
    elif k == 10:
        nav = False
        path = f"/videos/{_hex(r, 12)}/{r.choice(['720p', '1080p'])}/segment_{r.randint(0, 400):05d}.ts"
        extra.append(("Range", f"bytes={r.randint(0, 10 ** 6)}-"))
        accept = "*/*"
    else:
        path = r.choice(["/health", "/healthz", "/status", "/api/health", "/ping"])
        kind = "tool"
    if r.random() < 0.2 and k not in (9,):
        extra.append(("If-Modified-Since", _http_date(r)))
    method = "HEAD" if (kind in ("bot", "tool") and r.random() < 0.3) else "GET"
    return (method, path, _headers(r, extra, kind=kind, accept=accept, nav=nav), b"")


# --------------------------------------------------------------------------------
# Uploads, data: URIs, ids and tokens

FILENAMES = ["Résumé (final) v2.pdf", "IMG_«y»-«mm»-«dd» «hh».«mi».jpg", "report;draft.docx", "O'Brien notes.txt",
             "Scan «y»-«mm»-«dd» at «hh».«mi».12.png", "photo («n»).jpeg", "Quarterly report Q«q» «y» – FINAL (2).xlsx",
             "Screenshot «y»-«mm»-«dd» at «hh».«mi».05.png", "invoice_#«n».pdf", "contrat_de_location_signé.pdf",
             "Präsentation_Müller & Co.pptx", "写真_«n».jpg", "תמונה «n».png", "Тестовый документ.docx", "my file [copy].txt",
             "budget 50%.xlsx", "100$ receipt.pdf", "notes@meeting.txt", "a+b=c.png", "DSC_«n».NEF", "voice memo «n».m4a",
             "CV - «first» «last».pdf", "«slug».zip", "data («n») - Copy.csv", "tax-return_«y».pdf", "holiday~«n».heic",
             "PXL_«y»«mm»«dd»_«hh»«mi»«n».mp4", "Ünïcödé файл 📎.pdf", "contract (signed, «dd».«mm».«y»).pdf", "logo@2x.png",
             "Lebenslauf_«last».pdf", "whatsapp image «y»-«mm»-«dd» at «hh».«mi».«n».jpeg", "«first»'s birthday.gif", "plan_v«n».dwg",
             "bank statement «mm»-«y».pdf", "recipe - grandma's apple pie.docx"]
FILE_TYPES = {"pdf": "application/pdf", "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif",
              "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
              "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
              "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation", "txt": "text/plain",
              "csv": "text/csv", "zip": "application/zip", "NEF": "image/x-nikon-nef", "m4a": "audio/x-m4a", "heic": "image/heic",
              "mp4": "video/mp4", "dwg": "application/octet-stream"}


def _filename(r):
    first, last = _name(r)
    return _sub(r.choice(FILENAMES), y=r.randint(2015, 2025), mm=f"{r.randint(1, 12):02d}", dd=f"{r.randint(1, 28):02d}",
                hh=f"{r.randint(0, 23):02d}", mi=f"{r.randint(0, 59):02d}", n=r.randint(1, 9999), q=r.randint(1, 4),
                first=first, last=last, slug=_slug(r))


def _file_bytes(r, ext):
    n = r.randint(200, 3000)
    if ext in ("jpg", "jpeg"):
        return b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + _bytes(r, n) + b"\xff\xd9"
    if ext == "png":
        return b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + _bytes(r, n)
    if ext == "gif":
        return b"GIF89a" + _bytes(r, n)
    if ext == "pdf":
        text = prose_text(r).encode("latin-1", "replace")
        return (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\n"
                b"endobj\n3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R >>\nendobj\n4 0 obj\n<< /Length "
                + str(len(text) + 20).encode() + b" >>\nstream\nBT /F1 12 Tf (" + text.replace(b"(", b"\\(").replace(b")", b"\\)")
                + b") Tj ET\nendstream\nendobj\n" + b"5 0 obj\n<< /Filter /FlateDecode /Length " + str(n).encode() + b" >>\nstream\n"
                + _bytes(r, n) + b"\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n")
    if ext in ("docx", "xlsx", "pptx", "zip"):
        return b"PK\x03\x04\x14\x00\x06\x00\x08\x00\x00\x00!\x00" + _bytes(r, n)
    if ext in ("heic", "mp4", "m4a"):
        brand = {"heic": b"heic", "mp4": b"isom", "m4a": b"M4A "}[ext]
        return b"\x00\x00\x00\x18ftyp" + brand + b"\x00\x00\x00\x00" + brand + b"mif1" + _bytes(r, n)
    if ext == "NEF":
        return b"MM\x00*\x00\x00\x00\x08" + _bytes(r, n)
    if ext in ("txt",):
        return prose_text(r).encode() + b"\n"
    if ext == "csv":
        return _csv(r).encode()
    return _bytes(r, n)


def upload_request(r):
    fn = _filename(r)
    ext = fn.rsplit(".", 1)[-1]
    data = _file_bytes(r, ext)
    ctype = FILE_TYPES.get(ext, "application/octet-stream")
    if r.random() < 0.12:
        ctype = "application/octet-stream"
    k = r.randrange(6)
    if k == 5:  # raw body upload, as resumable and mobile clients send it
        return ("PUT", f"/api/v1/files/{_uuid(r)}/content", _headers(r, [("Content-Type", "application/octet-stream"),
                                                                        ("Content-Disposition", f"attachment; filename*=UTF-8''{Q(fn, safe='')}"),
                                                                        _auth_header(r)], kind="app"), data)
    parts = [("file" if k != 1 else "files[]", data, fn, ctype)]
    if k == 1:
        fn2 = _filename(r)
        ext2 = fn2.rsplit(".", 1)[-1]
        parts.append(("files[]", _file_bytes(r, ext2), fn2, FILE_TYPES.get(ext2, "application/octet-stream")))
    if r.random() < 0.6:
        parts.insert(0, ("caption", prose_text(r, sentences=1) if r.random() < 0.5 else keyword_text(r), None, None))
    if r.random() < 0.5:
        parts.append(("album_id", str(r.randint(1, 9999)), None, None))
    if r.random() < 0.5:
        parts.append(("_csrf", _b64(r, 32), None, None))
    if r.random() < 0.3:
        parts.append(("metadata", json.dumps({"taken_at": _iso(r), "gps": [round(r.uniform(-60, 70), 5), round(r.uniform(-170, 170), 5)],
                                              "camera": r.choice(["iPhone 15 Pro", "Pixel 8", "NIKON D750"])}), None, "application/json"))
    ct, body = _multipart(r, parts)
    path = r.choice(["/photos", "/upload", "/api/v1/attachments", "/documents/new", f"/tickets/{r.randint(1, 99999)}/attachments",
                     "/profile/cv", "/api/files"])
    return ("POST", path, _headers(r, [("Content-Type", ct)], kind=r.choice(["browser", "api", "app"]), nav=False), body)


def _csv(r):
    cols = r.choice([["id", "name", "email", "city", "amount", "date"], ["sku", "title", "qty", "price", "notes"],
                     ["Date", "Description", "Debit", "Credit", "Balance"]])
    sep = r.choice([",", ",", ";", "\t"])
    lines = [sep.join(cols)]
    for i in range(r.randint(3, 25)):
        first, last = _name(r)
        vals = []
        for c in cols:
            if c in ("id", "qty"):
                v = str(r.randint(1, 9999))
            elif c == "name":
                v = f"{last}, {first}" if r.random() < 0.3 else f"{first} {last}"
            elif c == "email":
                v = _email(r, first, last)
            elif c == "city":
                v = r.choice(CITIES)[0]
            elif c in ("amount", "price", "Debit", "Credit", "Balance"):
                v = r.choice([f"{r.uniform(-500, 2000):.2f}", f"{r.randint(1, 999)},{r.randint(0, 99):02d}", ""])
            elif c in ("date", "Date"):
                v = _iso(r)[:10]
            elif c == "sku":
                v = _alnum(r, 8).upper()
            elif c == "title":
                v = _cap(_slug(r).replace("-", " "))
            else:
                v = r.choice([keyword_text(r)[:60], "", "n/a", 'said "thanks!"'])
            if sep in v or '"' in v or "\n" in v or "," in v:
                v = '"' + v.replace('"', '""') + '"'
            vals.append(v)
        lines.append(sep.join(vals))
    return "\r\n".join(lines) + "\r\n"


def _text_file(r):
    k = r.randrange(11)
    first, last = _name(r)
    if k == 0:
        return f"export_{_iso(r)[:10]}.csv", "text/csv", _csv(r)
    if k == 1:
        tbl = r.choice(["customers", "orders", "products"])
        rows = ",".join(f"({i},'{_name(r)[0]}','{_name(r)[1].replace(chr(39), chr(92) + chr(39))}','{_email(r)}')" for i in range(1, r.randint(3, 9)))
        return (f"{tbl}_dump.sql", r.choice(["application/sql", "application/octet-stream", "text/x-sql"]),
                f"-- MySQL dump 10.13  Distrib 8.0.36, for Linux (x86_64)\n--\n-- Host: db-primary    Database: {r.choice(APPS)}\n"
                f"-- ------------------------------------------------------\n\nDROP TABLE IF EXISTS `{tbl}`;\nCREATE TABLE `{tbl}` (\n"
                f"  `id` int NOT NULL AUTO_INCREMENT,\n  `first_name` varchar(64) DEFAULT NULL,\n  `last_name` varchar(64) DEFAULT NULL,\n"
                f"  `email` varchar(255) NOT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;\n\n"
                f"LOCK TABLES `{tbl}` WRITE;\nINSERT INTO `{tbl}` VALUES {rows};\nUNLOCK TABLES;\n\n-- Dump completed on {_iso(r)[:10]}\n")
    if k == 2:
        fence, code, _ = code_python(r)
        return f"{r.choice(NOUNS)}_utils.py", "text/x-python", f"#!/usr/bin/env python3\n\"\"\"Helpers for {r.choice(NOUNS)}s.\"\"\"\nimport json\nimport os\n\n{code}\n"
    if k == 3:
        fence, code, _ = code_shell(r)
        return f"{r.choice(['deploy', 'backup', 'setup', 'cleanup'])}.sh", "application/x-sh", code + "\n"
    if k == 4:
        return f"{r.choice(['config', 'settings', 'fixtures'])}.json", "application/json", json.dumps(_doc(r), indent=2, ensure_ascii=False)
    if k == 5:
        fence, code, _ = code_yaml(r)
        return r.choice(["docker-compose.yml", "values.yaml", "config.yaml", "Dockerfile", "package.json"]), "application/x-yaml", code + "\n"
    if k == 6:
        return "README.md", "text/markdown", markdown_doc(r)
    if k == 7:
        lines = []
        for _ in range(r.randint(4, 20)):
            lv = r.choice(["INFO ", "WARN ", "DEBUG", "ERROR"])
            lines.append(r.choice([
                f"{_iso(r)} {lv} [worker-{r.randint(1, 8)}] Processed {r.randint(1, 500)} {r.choice(NOUNS)}s in {r.uniform(0.01, 9):.2f}s",
                f"{_iso(r)} {lv} [http] {r.choice(['GET', 'POST'])} /api/v1/{r.choice(RESOURCES)}/{r.randint(1, 9999)} -> {r.choice([200, 201, 204, 404, 503])} ({r.randint(1, 900)} ms)",
                f"{_public_ip(r)} - - [{_dt(r).strftime('%d/%b/%Y:%H:%M:%S +0000')}] \"GET /{_slug(r)}?page={r.randint(1, 9)} HTTP/1.1\" {r.choice([200, 304, 404])} "
                f"{r.randint(200, 90000)} \"{_url(r, fragment=False)}\" \"{_ua(r, 'browser')}\"",
                f"{_iso(r)} {lv} retrying request to payments API (attempt {r.randint(2, 5)}/5): timeout after 30s",
            ]))
        return f"{r.choice(APPS)}-{_iso(r)[:10]}.log", "text/plain", "\n".join(lines) + "\n"
    if k == 8:
        city = r.choice(CITIES)[0]
        d = _dt(r)
        return ("invite.ics", "text/calendar",
                f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Example Corp//Calendar 1.0//EN\r\nBEGIN:VEVENT\r\nUID:{_uuid(r)}@example.com\r\n"
                f"DTSTAMP:{d.strftime('%Y%m%dT%H%M%SZ')}\r\nDTSTART;TZID=Europe/Berlin:{d.strftime('%Y%m%dT%H%M00')}\r\n"
                f"SUMMARY:{r.choice(['Team lunch', 'Sprint review', 'Dentist', '1:1 with ' + first])}\r\nLOCATION:{_street(r)}\\, {city}\r\n"
                f"DESCRIPTION:{keyword_text(r).replace(',', chr(92) + ',').replace(';', chr(92) + ';').replace(chr(10), ' ')}\r\n"
                f"END:VEVENT\r\nEND:VCALENDAR\r\n")
    if k == 9:
        return (f"{_ascii_fold(first)}.vcf", "text/vcard",
                f"BEGIN:VCARD\r\nVERSION:3.0\r\nFN:{first} {last}\r\nN:{last};{first};;;\r\nORG:{r.choice(['Smith & Sons', 'Müller GmbH', 'ACME'])}\r\n"
                f"EMAIL;TYPE=INTERNET:{_email(r, first, last)}\r\nTEL;TYPE=CELL:{_phone(r)}\r\n"
                f"ADR;TYPE=HOME:;;{_street(r)};{r.choice(CITIES)[0]};;{r.choice(CITIES)[2]};{r.choice(COUNTRIES)}\r\nEND:VCARD\r\n")
    subs = []
    t = 0
    for i in range(1, r.randint(3, 8)):
        a, t = t + r.randint(0, 2000), t + r.randint(2000, 6000)
        subs.append(f"{i}\n00:{a // 60000:02d}:{a // 1000 % 60:02d},{a % 1000:03d} --> 00:{t // 60000:02d}:{t // 1000 % 60:02d},{t % 1000:03d}\n"
                    f"{prose_text(r, sentences=1)}\n")
    return f"{_slug(r)}.{r.choice(['en', 'de', 'fr'])}.srt", "application/x-subrip", "\n".join(subs)


def upload_text_request(r):
    fn, ctype, text = _text_file(r)
    parts = [("file", text.encode(), fn, ctype)]
    if r.random() < 0.5:
        parts.append(("description", keyword_text(r), None, None))
    if r.random() < 0.4:
        parts.append(("overwrite", r.choice(["true", "false"]), None, None))
    ct, body = _multipart(r, parts)
    return ("POST", r.choice(["/import", "/api/v1/imports", "/attachments", "/gists/upload", "/api/v1/files", "/contacts/import",
                              "/calendar/import", "/api/v1/datasets"]),
            _headers(r, [("Content-Type", ct)], kind=r.choice(["browser", "api"]), nav=False), body)


def _svg(r):
    color = "#" + _hex(r, 6)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{r.randint(16, 64)}" height="{r.randint(16, 64)}" viewBox="0 0 24 24">'
            f'<path d="M12 2L2 7l10 5 10-5-10-5z" fill="{color}"/><circle cx="12" cy="16" r="{r.randint(2, 6)}" fill="none" '
            f'stroke="{color}" stroke-width="2"/></svg>')


def data_uri_request(r):
    k = r.randrange(8)
    img = base64.b64encode(_file_bytes(r, r.choice(["png", "jpg"]))).decode()
    mime = r.choice(["image/png", "image/jpeg", "image/webp"])
    if k == 0:
        return ("POST", "/profile", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
                _form([("nick", _ascii_fold(r.choice(FIRST)).lower()), ("avatar", f"data:{mime};base64,{img}")]))
    if k == 1:
        return ("POST", "/api/v1/receipts/scan", _headers(r, [("Content-Type", _json_ct(r)), _auth_header(r)], kind="app"),
                _ijson(r, {"image": f"data:image/jpeg;base64,{img}", "currency": r.choice(["EUR", "USD"]), "note": keyword_text(r)[:80]}))
    if k == 2:
        return ("POST", f"/contracts/{r.randint(1, 9999)}/sign", _headers(r, [("Content-Type", _json_ct(r))], kind="api"),
                _ijson(r, {"signature": f"data:image/png;base64,{img}", "signed_at": _iso(r), "name": " ".join(_name(r))}))
    if k == 3:
        svg = _svg(r)
        uri = (f"data:image/svg+xml;base64,{_b64s(svg)}" if r.random() < 0.5
               else "data:image/svg+xml;utf8," + Q(svg, safe=" =:/\"'"))
        return ("PUT", f"/api/v1/workspaces/{_slug(r)}/icon", _headers(r, [("Content-Type", _json_ct(r))], kind="api"), _ijson(r, {"icon": uri}))
    if k == 4:
        pdf = base64.b64encode(_file_bytes(r, "pdf")).decode()
        return ("POST", "/api/v1/documents", _headers(r, [("Content-Type", _json_ct(r)), _auth_header(r)], kind="tool"),
                _ijson(r, {"file_name": _filename(r), "content_base64": pdf if r.random() < 0.5 else f"data:application/pdf;base64,{pdf}",
                           "tags": ["inbox"]}))
    if k == 5:
        csv = _csv(r)
        return ("POST", "/share/export", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
                _form([("href", "data:text/csv;charset=utf-8," + Q(csv)), ("filename", "export.csv")]))
    if k == 6:
        html = f'<p>{_html_escape(prose_text(r, sentences=1))}</p><p><img src="data:{mime};base64,{img}" alt="pasted image"></p>'
        return ("POST", "/api/v1/comments", _headers(r, [("Content-Type", _json_ct(r))], kind="api"), _ijson(r, {"html": html}))
    ct, body = _multipart(r, [("cropped", f"data:{mime};base64,{img}", None, None), ("x", str(r.randint(0, 200)), None, None),
                              ("y", str(r.randint(0, 200)), None, None), ("scale", f"{r.uniform(0.5, 2):.3f}", None, None)])
    return ("POST", "/avatar/crop", _headers(r, [("Content-Type", ct)], nav=False), body)


def ids_tokens_request(r):
    k = r.randrange(11)
    if k == 0:
        return ("GET", f"/download/{_sha256(r)}?{_query(r, [('expires', _ts(r)), ('signature', _hex(r, 64))])}", _headers(r, nav=True), b"")
    if k == 1:
        d = _dt(r)
        key = f"uploads/{_uuid(r)}/{Q(_filename(r))}"
        pairs = [("X-Amz-Algorithm", "AWS4-HMAC-SHA256"), ("X-Amz-Credential", f"AKIA{_alnum(r, 16).upper()}/{d.strftime('%Y%m%d')}/eu-central-1/s3/aws4_request"),
                 ("X-Amz-Date", d.strftime("%Y%m%dT%H%M%SZ")), ("X-Amz-Expires", "3600"), ("X-Amz-SignedHeaders", "host"),
                 ("X-Amz-Signature", _hex(r, 64))]
        return ("GET", f"/{key}?{_query(r, pairs, plus=False)}", _headers(r, kind="browser", nav=False, accept="*/*"), b"")
    if k == 2:
        return ("GET", f"/verify-email?{_query(r, [('token', _b64(r, 48, url=True, pad=False)), ('uid', _b64s(str(r.randint(1, 99999)), url=True).rstrip('='))])}",
                _headers(r, nav=True), b"")
    if k == 3:
        return ("POST", "/api/v1/devices", _headers(r, [("Content-Type", _json_ct(r)), _auth_header(r)], kind="app"),
                _ijson(r, {"push_token": _hex(r, 64), "device_id": _uuid(r).upper(), "platform": r.choice(["ios", "android"]),
                           "public_key": _b64(r, 65), "app_version": f"{r.randint(1, 9)}.{r.randint(0, 30)}.{r.randint(0, 9)}"}))
    if k == 4:
        return ("GET", f"/reset/{_b64s(str(r.randint(1, 99999)), url=True).rstrip('=')}/{_alnum(r, 6, LOWER_ALNUM)}-{_hex(r, 32)}/",
                _headers(r, nav=True), b"")
    if k == 5:
        parts = [{"ETag": f'"{_hex(r, 32)}"', "PartNumber": i} for i in range(1, r.randint(2, 6))]
        return ("POST", "/api/v1/uploads/complete", _headers(r, [("Content-Type", _json_ct(r))], kind="api"),
                _ijson(r, {"upload_id": _b64(r, 48, url=True, pad=False), "key": f"videos/{_uuid(r)}.mp4", "parts": parts,
                           "checksum_sha256": base64.b64encode(bytes.fromhex(_sha256(r))).decode()}))
    if k == 6:
        return ("GET", f"/v2/{r.choice(APPS)}/{r.choice(['blobs', 'manifests'])}/sha256:{_sha256(r)}",
                _headers(r, [("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"),
                             ("Authorization", "Bearer " + _jwt(r))], kind="tool"), b"")
    if k == 7:
        return ("GET", f"/api/v1/transactions/0x{_hex(r, 64)}?{_query(r, [('chain', r.choice(['1', '137', '8453']))])}", _headers(r, kind="api"), b"")
    if k == 8:
        key = "-".join(_alnum(r, 5, "ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(5))
        return ("POST", "/api/v1/licenses/activate", _headers(r, [("Content-Type", _json_ct(r))], kind="app"),
                _ijson(r, {"license_key": key, "machine_id": _hex(r, 32), "hostname": f"{r.choice(['DESKTOP', 'LAPTOP', 'MBP'])}-{_alnum(r, 7).upper()}"}))
    if k == 9:
        return ("GET", f"/invite/{_alnum(r, r.choice([8, 10, 22]))}", _headers(r, nav=True), b"")
    return ("GET", f"/api/v1/objects/{_uuid(r)}?{_query(r, [('version', _hex(r, 40)), ('etag', _hex(r, 32)), ('ts', _ts(r))])}",
            _headers(r, [("X-Signature", "sha256=" + _hex(r, 64)), ("X-Timestamp", str(_ts(r)))], kind="tool"), b"")


# --------------------------------------------------------------------------------
# Prose placements

def _prose_request(r, text):
    k = r.randrange(5)
    first, last = _name(r)
    if k == 0:
        short = text.split("\n")[0][:120]
        return ("GET", f"/search?{_query(r, [('q', short)])}", _headers(r, nav=True), b"")
    if k == 1:
        return ("POST", "/comment", _headers(r, [("Content-Type", _form_ct(r))], nav=True),
                _form([("name", f"{first} {last}"), ("email", _email(r, first, last)), ("text", text), ("post_id", str(r.randint(1, 9999)))]))
    if k == 2:
        return ("POST", f"/api/v1/products/{r.randint(1, 99999)}/reviews", _headers(r, [("Content-Type", _json_ct(r))], kind="api"),
                _ijson(r, {"rating": r.randint(1, 5), "title": text.split("\n")[0][:60], "body": text, "recommend": r.random() < 0.7,
                           "author": {"name": first, "location": r.choice(CITIES)[0]}}))
    if k == 3:
        ct, body = _multipart(r, [("name", f"{first} {last}", None, None), ("email", _email(r, first, last), None, None),
                                  ("subject", text.split("\n")[0][:50], None, None), ("message", text, None, None)])
        return ("POST", "/contact", _headers(r, [("Content-Type", ct)], nav=True), body)
    return ("PATCH", "/api/v1/me", _headers(r, [("Content-Type", _json_ct(r)), _auth_header(r)], kind="api"),
            _ijson(r, {"bio": text, "display_name": f"{first} {last}"}))


def prose_request(r):
    return _prose_request(r, prose_text(r) if r.random() < 0.85 else keyword_text(r))


def prose_keywords_request(r):
    return _prose_request(r, keyword_text(r))


# --------------------------------------------------------------------------------
# The generator

CATEGORIES = [
    ("prose", prose_request, 2.0),
    ("prose-keywords", prose_keywords_request, 1.5),
    ("chat", chat_request, 1.0),
    ("richtext", richtext_request, 1.2),
    ("markdown", markdown_request, 1.0),
] + [(f"forum-{k}", (lambda key: lambda r: forum_request(r, key))(k), 0.6) for k in FORUM] + [
    ("api", api_request, 1.6),
    ("api-query", api_query_request, 1.2),
    ("api-mongo", api_mongo_request, 0.8),
    ("json-patch", json_patch_request, 0.6),
    ("jsonapi", jsonapi_request, 0.6),
    ("graphql", graphql_request, 1.2),
    ("webhook", webhook_request, 1.0),
    ("oauth", oauth_request, 0.8),
    ("xml", xml_request, 1.0),
    ("upload", upload_request, 1.0),
    ("upload-text", upload_text_request, 0.8),
    ("data-uri", data_uri_request, 0.8),
    ("ids-tokens", ids_tokens_request, 0.9),
    ("cookies", cookies_request, 1.0),
    ("tracking", tracking_request, 0.8),
    ("url-param", url_param_request, 1.0),
    ("search", search_request, 1.2),
    ("signup", signup_request, 1.0),
    ("login", login_request, 1.0),
    ("checkout", checkout_request, 1.0),
    ("analytics", analytics_request, 1.0),
    ("browse", browse_request, 1.5),
]

MAX_BODY = 64 * 1024


def _valid(req):
    method, target, headers, body = req
    if not target.startswith("/") or any(ord(c) <= 32 or ord(c) >= 127 for c in target):
        return False
    for k, v in headers:
        if any(ord(c) < 32 or ord(c) >= 127 for c in k + v):
            return False
    return len(body) < MAX_BODY


def benign(seed=2, count=600):
    """About `count` benign requests (exactly `count` when it is at least the number
    of categories), spread over CATEGORIES by weight, deterministic from `seed`."""
    r = random.Random(seed)
    total = sum(w for _, _, w in CATEGORIES)
    shares = [(count * w / total) for _, _, w in CATEGORIES]
    n = [int(s) for s in shares]
    left = count - sum(n)
    for i in sorted(range(len(shares)), key=lambda i: (n[i] - shares[i], i))[:left]:
        n[i] += 1
    out = []
    for (cat, gen, _), k in zip(CATEGORIES, n):
        made = 0
        tries = 0
        while made < k and tries < k * 5 + 10:
            tries += 1
            req = gen(r)
            if not _valid(req):
                continue
            out.append({"label": "benign", "category": cat, "request": req})
            made += 1
    r.shuffle(out)
    return out
