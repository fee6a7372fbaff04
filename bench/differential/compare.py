"""Request-by-request comparison of the engines' matches, and the report (Markdown and
JSON).

A request *agrees* between two engines when both inspected it (their marker line is
there) and they matched exactly the same set of rule ids (the marker excluded), or when
neither inspected it. Matched variables are compared separately, rule by rule, on the
rules both engines matched.
"""

import collections
import json
import re

from engines import ENGINE_NAMES, MARKER_ID

PAIRS = [("nginx", "palisade"), ("wheel", "palisade"), ("nginx", "wheel")]
SHORT = {"nginx": "ModSecurity 3.0.9", "palisade": "Palisade", "wheel": "ModSecurity 3.0.15"}


def collection(var):
    """`ARGS:foo` -> `ARGS`; `REQUEST_HEADERS:User-Agent` stays whole (which header
    matters); `XML:/*` -> `XML`."""
    if var is None:
        return "?"
    if var.startswith("REQUEST_HEADERS:") or var.startswith("RESPONSE_HEADERS:"):
        return var
    return var.split(":", 1)[0]


# Rules whose lines libmodsecurity v3 never writes, whatever matched: 980130 and 980140
# carry `noauditlog`, which in v3 also drops the error-log line (measured: a phase-2 or
# phase-5 rule with `log,noauditlog` writes nothing in 3.0.9 or 3.0.15); and Palisade's
# own limit check (docs/config.md, SecPalisadeLimitAction), which has no counterpart.
# The report gives the agreement with them too, never instead.
LOG_ONLY = {"980130", "980140", "(limit check)"}

_PALISADE_ESC = re.compile(r'\\(["\\]|x[0-9a-f]{2})')
_V3_ESC = re.compile(rb"\\x([0-9a-f]{2})")


def canon_var(var, engine):
    """A matched variable's name as the engine saw it, without its log escaping:
    Palisade escapes `"`, `\\` and control characters (and shows bytes that are not
    UTF-8 as U+FFFD); libmodsecurity writes every byte outside 0x20-0x7e as `\\xNN` and
    nothing else. Both come back to text (invalid UTF-8 as U+FFFD)."""
    if var is None:
        return "?"
    if engine == "palisade":
        return _PALISADE_ESC.sub(lambda m: m.group(1) if len(m.group(1)) == 1
                                 else chr(int(m.group(1)[1:], 16)), var)

    def unhex(m):
        b = int(m.group(1), 16)
        return bytes([b]) if b < 0x20 or b > 0x7e else m.group(0)
    return _V3_ESC.sub(unhex, var.encode("utf-8", "surrogateescape")).decode("utf-8", "replace")


def outcome(entry, engine=None, skip=()):
    """(inspected, {rule: set of vars}) of one engine for one request."""
    if entry is None:
        return False, {}
    rules = {}
    inspected = False
    for m in entry.get("matches", []):
        if m[0] == MARKER_ID:
            inspected = True
            continue
        if m[0] in skip:
            continue
        rules.setdefault(m[0], set()).add(canon_var(m[1], engine))
    return inspected, rules


def compare(reqs, results, pl):
    """Everything the report says about one paranoia level, as plain data."""
    by_id = {r.rid: r for r in reqs}
    out = {"paranoia_level": pl, "requests": len(reqs), "pairs": {}}
    for a, b in PAIRS:
        agree = collections.Counter()
        agree_logged = collections.Counter()
        total = collections.Counter()
        inspected_only = collections.Counter()
        verdict = collections.Counter()
        per_rule = collections.defaultdict(lambda: [0, 0, 0])  # both, only a, only b
        classes = collections.Counter()
        class_example = {}
        var_total = var_agree = var_agree_ci = 0
        var_classes = collections.Counter()
        var_example = {}
        for r in reqs:
            res = results.get(r.rid, {})
            ia, ra = outcome(res.get(a), a)
            ib, rb = outcome(res.get(b), b)
            total[r.source] += 1
            total["all"] += 1
            if ia != ib:
                inspected_only[f"only {SHORT[a] if ia else SHORT[b]} inspected"] += 1
                key = ((f"inspected by {SHORT[a]} only" if ia else f"inspected by {SHORT[b]} only")
                       + f" ({r.source})", r.source, "")
                classes[key] += 1
                class_example.setdefault(key, r.rid)
                continue
            if set(ra) == set(rb):
                agree[r.source] += 1
                agree["all"] += 1
            if set(ra) - LOG_ONLY == set(rb) - LOG_ONLY:
                agree_logged[r.source] += 1
                agree_logged["all"] += 1
            if ("949110" in ra) == ("949110" in rb):
                verdict["all"] += 1
            for rule in set(ra) | set(rb):
                if rule in ra and rule in rb:
                    per_rule[rule][0] += 1
                    var_total += 1
                    if ra[rule] == rb[rule]:
                        var_agree += 1
                    if {v.lower() for v in ra[rule]} == {v.lower() for v in rb[rule]}:
                        var_agree_ci += 1
                    if ra[rule] != rb[rule]:
                        va = ",".join(sorted(collection(v) for v in ra[rule]))
                        vb = ",".join(sorted(collection(v) for v in rb[rule]))
                        k = (rule, va, vb)
                        var_classes[k] += 1
                        var_example.setdefault(k, (r.rid, sorted(ra[rule]), sorted(rb[rule])))
                elif rule in ra:
                    per_rule[rule][1] += 1
                    vars_ = ",".join(sorted({collection(v) for v in ra[rule]}))
                    key = (f"{rule} only in {SHORT[a]}", "", vars_)
                    classes[key] += 1
                    class_example.setdefault(key, r.rid)
                else:
                    per_rule[rule][2] += 1
                    vars_ = ",".join(sorted({collection(v) for v in rb[rule]}))
                    key = (f"{rule} only in {SHORT[b]}", "", vars_)
                    classes[key] += 1
                    class_example.setdefault(key, r.rid)
        sources = sorted(k for k in total if k != "all")
        pair = {
            "a": a, "b": b,
            "agreement": {s: {"agree": agree[s], "total": total[s],
                              "rate": agree[s] / total[s] if total[s] else None}
                          for s in ["all"] + sources},
            "agreement_without_log_only": {
                s: {"agree": agree_logged[s], "total": total[s],
                    "rate": agree_logged[s] / total[s] if total[s] else None}
                for s in ["all"] + sources},
            "inbound_verdict_agreement": verdict["all"] / total["all"] if total["all"] else None,
            "inspection_differences": dict(inspected_only),
            "variables": {"compared": var_total, "agree": var_agree,
                          "rate": var_agree / var_total if var_total else None,
                          "agree_ignoring_case": var_agree_ci,
                          "rate_ignoring_case": var_agree_ci / var_total if var_total else None},
            "per_rule": {k: {"both": v[0], "only_a": v[1], "only_b": v[2]}
                         for k, v in sorted(per_rule.items(), key=lambda kv: _rule_key(kv[0]))},
            "classes": [
                {"class": k[0], "variables": k[2], "count": n,
                 "example": _example(by_id[class_example[k]], results, a, b)}
                for k, n in classes.most_common()],
            "variable_classes": [
                {"rule": k[0], "a_vars": k[1], "b_vars": k[2], "count": n,
                 "example": {"id": var_example[k][0], "a": var_example[k][1], "b": var_example[k][2],
                             "label": by_id[var_example[k][0]].label}}
                for k, n in var_classes.most_common()],
        }
        out["pairs"][f"{a}-{b}"] = pair
    status = collections.Counter()
    for r in reqs:
        res = results.get(r.rid, {})
        for e in ("nginx", "palisade", "wheel"):
            st = res.get(e, {})
            status[(e, st.get("error") or str(st.get("status")))] += 1
    out["statuses"] = {f"{e} {s}": n for (e, s), n in sorted(status.items())}
    return out


def _rule_key(rule):
    try:
        return (0, int(rule))
    except ValueError:
        return (1, rule)


def _example(r, results, a, b):
    res = results.get(r.rid, {})
    _, ra = outcome(res.get(a), a)
    _, rb = outcome(res.get(b), b)
    raw = r.with_marker()
    # Printable in Markdown: CRLF shown as a line break, other control bytes as \xNN.
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", lambda m: f"\\x{ord(m.group(0)):02x}",
                  raw[:700].decode("utf-8", "backslashreplace").replace("\r\n", "\n"))
    if len(raw) > 700:
        text += f"\n... ({len(raw)} bytes)"
    return {"id": r.rid, "source": r.source, "kind": r.kind, "label": r.label,
            "only_a": {k: sorted(v) for k, v in ra.items() if k not in rb},
            "only_b": {k: sorted(v) for k, v in rb.items() if k not in ra},
            "request": text}


def pct(x):
    return "n/a" if x is None else f"{100 * x:.2f}%"


def render(summary, meta, top=15):
    md = ["# Differential run: Palisade against libmodsecurity", ""]
    md.append(f"Command: `{meta['command']}`  ")
    md.append(f"Corpus: {meta['requests']} requests (seed {meta['seed']}"
              + (f", sample of {meta['sample']}" if meta.get("sample") else "") + "): "
              + ", ".join(f"{k} {v}" for k, v in meta["sources"].items()) + "  ")
    md.append(f"Rules: Debian's {meta['modsec_conf']} (DetectionOnly) + CRS {meta['crs']} "
              "(crs-setup.conf copy with tx.paranoia_level set)  ")
    md.append("Engines: " + "; ".join(f"{ENGINE_NAMES[k]}: {v}" for k, v in meta["engines"].items()) + "  ")
    md.append(f"Started {meta['started']} UTC, took {meta['seconds']:.0f} s. Palisade {meta['git']}.")
    md.append("")
    att = meta.get("log_attribution") or {}
    if att:
        md.append("Error-log lines read (per paranoia level and engine: match lines; lines without a "
                  "unique_id, attributed by order; lines whose transaction logged no marker, left "
                  "out): " + "; ".join(
                      f"{pl} {e} {st['lines']}/{st['no_unique_id']}/{st['unattributed']}"
                      for pl, engines_ in att.items() for e, st in engines_.items()) + ".")
        md.append("")
    md.append("A request agrees when both engines inspected it and matched exactly the same "
              "set of rule ids (the marker rule excluded). 'Verdict' compares only whether "
              "949110 (inbound anomaly score exceeded) fired. Variables: on the rules both "
              "matched, the same set of matched variable names, log escaping undone. "
              "libmodsecurity writes one line per rule naming one of the variables that "
              "matched, the last in its own iteration order (hash order inside a collection), "
              "so a variable difference on a rule that matched several variables is not "
              "always a difference in what matched.")
    md.append("")
    for s in summary:
        pl = s["paranoia_level"]
        md.append(f"## Paranoia level {pl}")
        md.append("")
        md.append("| pair | all | " + " | ".join(_sources(s)) + " | verdict | variables | variables (case aside) |")
        md.append("|---|---:|" + "---:|" * len(_sources(s)) + "---:|---:|---:|")
        for key, p in s["pairs"].items():
            ag = p["agreement"]
            cells = [f"{pct(ag['all']['rate'])} ({ag['all']['agree']}/{ag['all']['total']})"]
            cells += [f"{pct(ag[src]['rate'])} ({ag[src]['agree']}/{ag[src]['total']})" for src in _sources(s)]
            md.append(f"| {SHORT[p['a']]} vs {SHORT[p['b']]} | " + " | ".join(cells)
                      + f" | {pct(p['inbound_verdict_agreement'])} | {pct(p['variables']['rate'])} | "
                      f"{pct(p['variables']['rate_ignoring_case'])} |")
        md.append("")
        md.append("The same without the rules whose lines only Palisade writes (LOG_ONLY: "
                  "980130 and 980140, which carry `noauditlog`, and libmodsecurity v3 then "
                  "writes no error-log line either; Palisade's built-in limit check):")
        md.append("")
        md.append("| pair | all | " + " | ".join(_sources(s)) + " |")
        md.append("|---|---:|" + "---:|" * len(_sources(s)))
        for key, p in s["pairs"].items():
            ag = p["agreement_without_log_only"]
            cells = [f"{pct(ag[src]['rate'])} ({ag[src]['agree']}/{ag[src]['total']})"
                     for src in ["all"] + _sources(s)]
            md.append(f"| {SHORT[p['a']]} vs {SHORT[p['b']]} | " + " | ".join(cells) + " |")
        md.append("")
        md.append("Answers (status or error) per engine: "
                  + ", ".join(f"{k}: {v}" for k, v in s["statuses"].items()))
        md.append("")
        for key, p in s["pairs"].items():
            a, b = SHORT[p["a"]], SHORT[p["b"]]
            md.append(f"### {a} vs {b}: top {top} difference classes (PL{pl})")
            md.append("")
            if not p["classes"]:
                md.append("No differences.")
                md.append("")
                continue
            md.append("| # | class | variables | requests | example |")
            md.append("|---:|---|---|---:|---|")
            for n, c in enumerate(p["classes"][:top], 1):
                ex = c["example"]
                md.append(f"| {n} | {c['class']} | {c['variables'] or '-'} | {c['count']} | "
                          f"{ex['id']} ({ex['source']}, {ex['label']}, {ex['kind']}) |")
            md.append("")
            md.append("<details><summary>Example requests</summary>")
            md.append("")
            for n, c in enumerate(p["classes"][:top], 1):
                ex = c["example"]
                md.append(f"{n}. **{c['class']}** ({c['count']}): {ex['id']}, only {a}: "
                          f"`{json.dumps(ex['only_a'])}`, only {b}: `{json.dumps(ex['only_b'])}`")
                md.append("")
                md.append("```")
                md.append(ex["request"].replace("```", "` ` `"))
                md.append("```")
                md.append("")
            md.append("</details>")
            md.append("")
            if p["variable_classes"]:
                md.append(f"Matched variables that differ on a rule both matched ({a} / {b}), top {top}:")
                md.append("")
                md.append("| rule | " + a + " | " + b + " | requests | example |")
                md.append("|---|---|---|---:|---|")
                for c in p["variable_classes"][:top]:
                    ex = c["example"]
                    md.append(f"| {c['rule']} | `{_cut(', '.join(ex['a']))}` | `{_cut(', '.join(ex['b']))}` | "
                              f"{c['count']} | {ex['id']} ({ex['label']}) |")
                md.append("")
        p = s["pairs"]["nginx-palisade"]
        md.append(f"### Per rule (PL{pl}): ModSecurity 3.0.9 (nginx) vs Palisade, and 3.0.15 vs Palisade")
        md.append("")
        md.append("Rules with at least one difference; requests where the rule matched in both "
                  "engines, only in ModSecurity, only in Palisade. The JSON report lists every rule.")
        md.append("")
        md.append("| rule | both | only 3.0.9 | only Palisade | both (3.0.15) | only 3.0.15 | only Palisade (vs 3.0.15) |")
        md.append("|---|---:|---:|---:|---:|---:|---:|")
        w = s["pairs"]["wheel-palisade"]["per_rule"]
        rules = set(p["per_rule"]) | set(w)
        for rule in sorted(rules, key=_rule_key):
            x = p["per_rule"].get(rule, {"both": 0, "only_a": 0, "only_b": 0})
            y = w.get(rule, {"both": 0, "only_a": 0, "only_b": 0})
            if x["only_a"] or x["only_b"] or y["only_a"] or y["only_b"]:
                md.append(f"| {rule} | {x['both']} | {x['only_a']} | {x['only_b']} | "
                          f"{y['both']} | {y['only_a']} | {y['only_b']} |")
        md.append("")
    return "\n".join(md) + "\n"


def _cut(s, n=120):
    s = s.replace("|", "\\|").replace("`", "'")
    return s if len(s) <= n else s[:n] + "..."


def _sources(s):
    p = next(iter(s["pairs"].values()))
    return [k for k in p["agreement"] if k != "all"]
