"""The three engines of the differential run and how their matches are read back.

- ``nginx``: Debian's nginx with libnginx-mod-http-modsecurity (libmodsecurity 3.0.9),
  one worker, in front of albedo; matches read from its error log.
- ``palisade``: target/release/palisade in front of the same albedo; matches read from
  its error log (``[logs] error_log``).
- ``wheel``: PyPI's ``libmodsecurity`` (3.0.15) driven in process, one Transaction per
  request, fed the request as parsed from the same bytes and the response albedo gives
  for it; matches read from its log callback.

All three load one generated rules file (marker rule, Debian's modsecurity.conf, a copy
of crs-setup.conf with the paranoia level set, CRS 3.3.4). Lines are attributed to
requests by the marker rule, which logs the request's X-Diff-Id in phase 1 together
with the transaction's unique_id; every later line carrying that unique_id belongs to
the request. nginx cuts error-log lines at 2048 bytes, which can lose the unique_id at
the end of a long line; such a line goes to the request whose marker came last, which is
right because nginx (one worker) finishes a request, its logging phase included, before
it reads the next one, and requests are sent one at a time.
"""

import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import run as bench  # noqa: E402  bench/run.py: Proc, free_port, wait_port, children

MODSEC_CONF = "/etc/nginx/modsecurity.conf"
CRS3_SETUP = "/etc/modsecurity/crs/crs-setup.conf"
CRS3_BEFORE = "/etc/modsecurity/crs/REQUEST-900-EXCLUSION-RULES-BEFORE-CRS.conf"
CRS3_AFTER = "/etc/modsecurity/crs/RESPONSE-999-EXCLUSION-RULES-AFTER-CRS.conf"
CRS3_RULES = "/usr/share/modsecurity-crs/rules"
MODSEC_MODULE = bench.MODSEC_MODULE
MARKER_ID = "9999901"
ENGINES = ("nginx", "palisade", "wheel")
ENGINE_NAMES = {
    "nginx": "nginx + libmodsecurity 3.0.9",
    "palisade": "Palisade",
    "wheel": "libmodsecurity 3.0.15 (PyPI wheel)",
}


# ---------------------------------------------------------------------------
# Rules


def write_rules(work, pl, engine):
    """The rules file one engine loads at paranoia level `pl`: marker rule, Debian's
    base configuration (DetectionOnly; its audit log moved into the work directory),
    crs-setup.conf with the paranoia level, CRS 3.3.4. Returns its path."""
    setup = os.path.join(work, f"crs-setup-pl{pl}.conf")
    if not os.path.exists(setup):
        with open(CRS3_SETUP) as f:
            text = f.read()
        text += (
            "\n# Added by scripts/differential: the paranoia level of this run.\n"
            f'SecAction "id:900000,phase:1,nolog,pass,t:none,setvar:tx.paranoia_level={pl}"\n')
        with open(setup, "w") as f:
            f.write(text)
    rules = sorted(glob.glob(os.path.join(CRS3_RULES, "*.conf")))
    if not rules:
        raise SystemExit(f"differential: no CRS rules in {CRS3_RULES} (apt-get install modsecurity-crs)")
    if engine == "wheel":
        rules = [_without_geo(work, r) for r in rules]
    lines = [
        f"# Rules of the differential run: {engine}, paranoia level {pl}.",
        "# Marker: logs the request's X-Diff-Id with the transaction's unique_id.",
        f'SecRule REQUEST_HEADERS:X-Diff-Id "@rx ^d[0-9]+$" "id:{MARKER_ID},phase:1,pass,log,t:none,'
        "msg:'differential marker',logdata:'%{MATCHED_VAR}'\"",
        f"Include {MODSEC_CONF}",
        f"SecAuditLog {os.path.join(work, f'audit-{engine}-pl{pl}.log')}",
        f"Include {setup}",
        f"Include {CRS3_BEFORE}",
    ] + [f"Include {r}" for r in rules] + [f"Include {CRS3_AFTER}"]
    path = os.path.join(work, f"rules-{engine}-pl{pl}.conf")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def _without_geo(work, path):
    """The wheel is built without GeoIP/MaxMind and refuses `@geoLookup`; CRS 3.3.4 uses
    it in one chain (910100), which cannot match unless tx.high_risk_country_codes is
    set, and crs-setup.conf leaves it unset. For the wheel that operator becomes
    `@unconditionalMatch` in a copy of the file: the same matches, since the chain's
    first rule never matches."""
    with open(path) as f:
        text = f.read()
    if '"@geoLookup"' not in text:
        return path
    copy = os.path.join(work, "wheel-" + os.path.basename(path))
    with open(copy, "w") as f:
        f.write(text.replace('"@geoLookup"', '"@unconditionalMatch"'))
    return copy


# ---------------------------------------------------------------------------
# Error-log lines


_ID = re.compile(r'\[id "([^"]*)"\]')
_UID = re.compile(r'\[unique_id "([^"]*)"\]')
_DATA = re.compile(r'\[data "([^"]*)"\]')
_VAR = re.compile(r"against variable `(.*?)' \(Value: `")
# libmodsecurity words the lines of @detectSQLi/@detectXSS as "detected SQLi using
# libinjection." without the variable; CRS's logdata names it ("... found within VAR: ").
_DATA_VAR = re.compile(r'\[data "Matched Data: .*? found within (.+?): ')


class Match:
    """What one log line says: the rule id and the variable that matched."""

    __slots__ = ("rule", "var")

    def __init__(self, rule, var):
        self.rule = rule
        self.var = var


def parse_line(line):
    """(rule id or None, unique_id or None, variable or None, data or None) of a
    ModSecurity-style match line; None when the line is no match line."""
    if "ModSecurity: " not in line:
        return None
    m = _ID.search(line)
    if m is None:
        rule = None  # cut off (nginx's 2048-byte line limit)
    elif m.group(1):
        rule = m.group(1)
    elif "Palisade limit check" in line:
        rule = "(limit check)"  # Palisade's built-in check (docs/config.md), no rule id
    else:
        rule = "(no id)"
    u = _UID.search(line)
    v = _VAR.search(line)
    var = v.group(1) if v else None
    if var is None:
        v = _DATA_VAR.search(line)
        # Inside [data "..."] libmodsecurity writes a double quote as \x22.
        var = v.group(1).replace("\\x22", '"') if v else None
    d = _DATA.search(line)
    return (rule or None, u.group(1) if u else None, var, d.group(1) if d else None)


def attribute(lines):
    """Attributes match lines (in file order) to request ids. Returns
    ({rid: [Match]}, stats)."""
    by_uid = {}
    out = {}
    current = None
    stats = {"lines": 0, "no_unique_id": 0, "no_rule_id": 0, "unattributed": 0}
    for line in lines:
        p = parse_line(line)
        if p is None:
            continue
        rule, uid, var, data = p
        stats["lines"] += 1
        if rule == MARKER_ID and uid and data:
            by_uid[uid] = data
            current = data
            out.setdefault(data, [])
            continue
        rid = by_uid.get(uid) if uid else None
        if uid is None:
            stats["no_unique_id"] += 1
            rid = current
        if rid is None:
            stats["unattributed"] += 1
            continue
        if rule is None:
            stats["no_rule_id"] += 1
            rule = "(cut)"
        out.setdefault(rid, []).append(Match(rule, var))
    return out, stats


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        return [ln.decode("utf-8", "replace") for ln in f]


# ---------------------------------------------------------------------------
# HTTP over raw sockets


def _complete(buf, method):
    """True when `buf` holds a whole response (head and framed body)."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return False
    head = buf[:end].decode("latin-1")
    body = buf[end + 4:]
    m = re.match(r"HTTP/\d\.\d (\d{3})", head)
    if not m:
        return False
    status = int(m.group(1))
    if 100 <= status < 200:
        return _complete(body, method)
    if method == "HEAD" or status in (204, 304):
        return True
    cl = re.search(r"\r\ncontent-length:\s*(\d+)", head, re.I)
    if cl:
        return len(body) >= int(cl.group(1))
    if re.search(r"\r\ntransfer-encoding:[^\r]*chunked", head, re.I):
        return body.endswith(b"0\r\n\r\n")
    return False  # read until the server closes


def exchange(port, data, method, timeout=10.0, stall=3.0):
    """Sends one request on a new connection and reads the response. Returns
    (status or None, raw response bytes, error or None). When nothing comes back
    within `stall` seconds (a request whose body is shorter than its Content-Length),
    the sending side is shut so the server sees the end of the request."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError as e:
        return None, b"", f"connect: {e}"
    buf = b""
    err = None
    try:
        s.sendall(data)
        s.settimeout(stall)
        shut = False
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                if not shut and not buf:
                    s.shutdown(socket.SHUT_WR)
                    shut = True
                    continue
                if buf:
                    break
                continue
            except OSError as e:
                err = f"recv: {e}"
                break
            if not chunk:
                break
            buf += chunk
            if _complete(buf, method):
                # Wait briefly for the close, so the server's logging phase is done.
                s.settimeout(0.5)
                try:
                    while s.recv(65536):
                        pass
                except OSError:
                    pass
                break
        else:
            err = "timeout"
    except OSError as e:
        err = f"send: {e}"
    finally:
        s.close()
    m = re.match(rb"HTTP/\d\.\d (\d{3})", buf)
    status = int(m.group(1)) if m else None
    if status is None and err is None:
        err = "no response" if not buf else "unreadable response"
    return status, buf, err


def request_method(raw):
    return raw.split(b" ", 1)[0].strip().decode("latin-1", "replace").upper()


# ---------------------------------------------------------------------------
# Servers


NGINX_CONF = """# nginx + ModSecurity for scripts/differential.
worker_processes 1;
daemon off;
master_process on;
pid {work}/nginx-{name}.pid;
error_log {work}/nginx-{name}-error.log info;
load_module {module};
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {work}/nginx-{name}-body;
    proxy_temp_path {work}/nginx-{name}-proxy;
    fastcgi_temp_path {work}/nginx-{name}-fastcgi;
    uwsgi_temp_path {work}/nginx-{name}-uwsgi;
    scgi_temp_path {work}/nginx-{name}-scgi;
    client_max_body_size 16m;
    client_body_buffer_size 1m;
    # Hand every header line to ModSecurity, as Palisade hands it to its engine.
    ignore_invalid_headers off;
    underscores_in_headers on;
    server {{
        listen 127.0.0.1:{port};
        server_name _;
        modsecurity on;
        modsecurity_rules_file {rules};
        location / {{
            proxy_pass http://127.0.0.1:{backend};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""


class Server:
    """A proxy started for the run: its port, its process and its error log."""

    def __init__(self, port, proc, log):
        self.port = port
        self.proc = proc
        self.log = log

    def stop(self):
        self.proc.stop()


def start_nginx(work, pl, rules, backend_port):
    if shutil.which("nginx") is None or not os.path.exists(MODSEC_MODULE):
        raise SystemExit("differential: nginx and libnginx-mod-http-modsecurity are needed")
    name = f"pl{pl}"
    port = bench.free_port()
    cfg = os.path.join(work, f"nginx-{name}.conf")
    with open(cfg, "w") as f:
        f.write(NGINX_CONF.format(work=work, name=name, module=MODSEC_MODULE, port=port,
                                  rules=rules, backend=backend_port))
    log = os.path.join(work, f"nginx-{name}-error.log")
    t = subprocess.run(["nginx", "-t", "-q", "-e", log, "-c", cfg, "-p", work],
                       capture_output=True, text=True, timeout=300)
    if t.returncode != 0:
        raise SystemExit("differential: nginx -t failed: " + (t.stderr.strip() or t.stdout.strip()))
    # The check wrote its own lines; the run's lines start after them.
    open(log, "w").close()
    proc = bench.Proc(f"nginx-{name}", ["nginx", "-e", log, "-c", cfg, "-p", work], work)
    bench.wait_port(port, proc, timeout=300)
    deadline = time.time() + 120
    while not bench.children(proc.pid) and time.time() < deadline:
        time.sleep(0.05)
    return Server(port, proc, log)


def start_palisade(work, pl, rules, backend_port, binary):
    if not os.path.exists(binary):
        raise SystemExit(f"differential: {binary} is missing (cargo build --release -p proxy)")
    port = bench.free_port()
    log = os.path.join(work, f"palisade-pl{pl}-error.log")
    lines = [
        "# palisade for scripts/differential",
        "[server]",
        "worker_threads = 1",
        # Every rule runs to the end, as in ModSecurity (no CPU budget cut-off).
        'waf_cpu_budget = "off"',
        "",
        "[[listener]]",
        f"address = {bench.toml_str(f'127.0.0.1:{port}')}",
        "",
        "[[upstream]]",
        'name = "backend"',
        f"servers = [{bench.toml_str(f'127.0.0.1:{backend_port}')}]",
        "",
        # Palisade's settings for ModSecurity v3's REQUEST_BODY (every body processor)
        # and log flags (noauditlog silences the error-log line; docs/config.md): the
        # settings a v3 user moving over sets. Their defaults follow the CRS v4 tests.
        "[[rules]]",
        "inline = \"SecPalisadeRequestBodyVariable All\\nSecPalisadeNoAuditLog AllLogs\"",
        "",
        "[[rules]]",
        f"file = {bench.toml_str(rules)}",
        "",
        "[logs]",
        f"error_log = {bench.toml_str(log)}",
        'level = "warn"',
        "",
        # Persistent collections (CRS opens IP and GLOBAL) in the work directory, so
        # every run starts from an empty store.
        "[store]",
        f"path = {bench.toml_str(os.path.join(work, f'store-pl{pl}'))}",
        "",
    ]
    cfg = os.path.join(work, f"palisade-pl{pl}.toml")
    with open(cfg, "w") as f:
        f.write("\n".join(lines))
    check = subprocess.run([binary, "check", "--config", cfg], capture_output=True, text=True, timeout=300)
    if check.returncode != 0:
        raise SystemExit("differential: palisade check failed: " + (check.stderr or check.stdout).strip())
    proc = bench.Proc(f"palisade-pl{pl}", [binary, "run", "--config", cfg], work)
    bench.wait_port(port, proc, timeout=120)
    return Server(port, proc, log)


def start_albedo(work, binary):
    if not os.path.exists(binary):
        raise SystemExit(f"differential: {binary} is missing (cargo build --release -p albedo)")
    proc = bench.Proc("albedo", [binary, "--bind", "127.0.0.1:0"], work)
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(proc.out_path) as f:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", f.read())
        if m:
            return proc, int(m.group(1))
        if not proc.alive():
            raise SystemExit(f"differential: albedo exited:\n{proc.tail()}")
        time.sleep(0.05)
    raise SystemExit("differential: albedo did not report its port")


# ---------------------------------------------------------------------------
# The wheel (libmodsecurity 3.0.15 in process)


def parse_request(raw):
    """Splits raw request bytes the way an HTTP/1.1 server would, for the in-process
    engine: (method, target, version, [(name, value)], body). None when it cannot be
    read (a server would answer 400 without inspecting it)."""
    end = raw.find(b"\r\n\r\n")
    sep = 4
    if end < 0:
        end = raw.find(b"\n\n")
        sep = 2
    if end < 0:
        return None
    head, rest = raw[:end], raw[end + sep:]
    lines = re.split(rb"\r?\n", head)
    parts = lines[0].split(b" ")
    parts = [p for p in parts if p]
    if len(parts) != 3:
        return None
    method, target, version = parts
    headers = []
    for ln in lines[1:]:
        if b":" not in ln:
            return None
        k, v = ln.split(b":", 1)
        headers.append((k, v.strip(b" \t")))
    body = b""
    te = [v for k, v in headers if k.lower() == b"transfer-encoding"]
    cl = [v for k, v in headers if k.lower() == b"content-length"]
    if te and b"chunked" in te[-1].lower():
        body = _dechunk(rest)
        if body is None:
            return None
    elif cl:
        try:
            n = int(cl[0])
        except ValueError:
            return None
        body = rest[:n]
    return method, target, version, headers, body


def _dechunk(data):
    out = b""
    while True:
        nl = data.find(b"\r\n")
        if nl < 0:
            return None
        try:
            n = int(data[:nl].split(b";")[0], 16)
        except ValueError:
            return None
        if n == 0:
            return out
        out += data[nl + 2:nl + 2 + n]
        data = data[nl + 4 + n:]


def _parse_response(buf):
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = buf[:end].split(b"\r\n")
    m = re.match(rb"HTTP/(\d\.\d) (\d{3})", lines[0])
    if not m:
        return None
    headers = []
    for ln in lines[1:]:
        if b":" in ln:
            k, v = ln.split(b":", 1)
            headers.append((k, v.strip()))
    body = buf[end + 4:]
    te = [v for k, v in headers if k.lower() == b"transfer-encoding"]
    if te and b"chunked" in te[-1].lower():
        body = _dechunk(body) or b""
    return int(m.group(2)), m.group(1).decode(), headers, body


class Wheel:
    """libmodsecurity 3.0.15 (PyPI `libmodsecurity`), one Transaction per request."""

    def __init__(self, rules_path, backend_port):
        try:
            import libmodsecurity  # noqa: PLC0415 - optional until the wheel is used
        except ImportError as e:
            raise SystemExit("differential: the libmodsecurity wheel is missing "
                             "(scripts/differential installs it in a venv)") from e
        self.mod = libmodsecurity
        self.version = getattr(libmodsecurity, "__version__", "?")
        self.engine = libmodsecurity.ModSecurity()
        self.engine.set_connector_information("palisade-differential")
        self.lines = []
        self.engine.set_log_callback(self.lines.append)
        self.rules = libmodsecurity.RulesSet()
        if self.rules.load_from_uri(rules_path) < 0:
            raise SystemExit(f"differential: the wheel refused {rules_path}: {self.rules.get_parser_error()}")
        self.backend_port = backend_port

    def who(self):
        return self.engine.who_am_i()

    def run(self, raw, method):
        """Evaluates one request; returns (status, lines, error)."""
        del self.lines[:]
        parsed = parse_request(raw)
        if parsed is None:
            return None, [], "unparsed"
        m, target, version, headers, body = parsed
        status, resp, err = exchange(self.backend_port, raw, method)
        r = _parse_response(resp) if resp else None
        t = self.mod.Transaction(self.engine, self.rules)
        t.process_connection("127.0.0.1", 40000, "127.0.0.1", 80)
        v = version.decode("latin-1")
        t.process_uri(target, m, v[5:] if v.startswith("HTTP/") else v)
        for k, val in headers:
            t.add_request_header(k, val)
        t.process_request_headers()
        if body:
            t.append_request_body(body)
        t.process_request_body()
        if r is not None:
            rstatus, proto, rheaders, rbody = r
            for k, val in rheaders:
                t.add_response_header(k, val)
            t.process_response_headers(rstatus, "HTTP/" + proto)
            if rbody:
                t.append_response_body(rbody)
            t.process_response_body()
        t.process_logging()
        return (r[0] if r else status), list(self.lines), err

    def close(self):
        self.engine.set_log_callback(None)


def run_engine_thread(fn, items, results, key, progress):
    """Runs `fn` over `items` in a thread, storing results[rid][key]."""
    def body():
        for n, (rid, *args) in enumerate(items):
            results.setdefault(rid, {})[key] = fn(*args)
            progress[key] = n + 1
    th = threading.Thread(target=body, name=key, daemon=True)
    th.start()
    return th
