// Palisade dashboard. Everything the server sends is rendered with DOM APIs and
// textContent: request data (which an attacker wrote) is never parsed as HTML.
"use strict";

(function () {
  const MAX_ROWS = 200;
  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function fmtUs(us) {
    if (us >= 1000000) return (us / 1000000).toFixed(1) + " s";
    if (us >= 1000) return (us / 1000).toFixed(us >= 10000 ? 0 : 1) + " ms";
    return us + " µs";
  }

  function renderCounters(s) {
    $("c-requests").textContent = s.requests;
    $("c-blocked").textContent = s.blocked;
    $("c-detected").textContent = s.detected;
    const last = s.rate.slice(-10);
    const sum = last.reduce((a, r) => a + r.requests, 0);
    $("c-rate").textContent = (sum / Math.max(last.length, 1)).toFixed(1);
  }

  function renderRate(rate) {
    const box = $("rate");
    clear(box);
    const max = Math.max(1, ...rate.map((r) => r.requests));
    for (const r of rate) {
      const bar = el("div", null, "bar");
      bar.title = new Date(r.t * 1000).toLocaleTimeString() + ": " + r.requests + " requests, " + r.blocked + " blocked";
      const pass = el("div", null, "pass");
      pass.style.height = ((r.requests - r.blocked) / max) * 100 + "%";
      const blocked = el("div", null, "blocked");
      blocked.style.height = (r.blocked / max) * 100 + "%";
      bar.appendChild(blocked);
      bar.appendChild(pass);
      box.appendChild(bar);
    }
  }

  function renderHistograms(bounds, hs) {
    const box = $("histograms");
    clear(box);
    for (const name of Object.keys(hs)) {
      const counts = hs[name];
      const total = counts.reduce((a, b) => a + b, 0);
      const card = el("div", null, "histogram");
      card.appendChild(el("h3", name + " (" + total + ")"));
      const max = Math.max(1, ...counts);
      counts.forEach((n, i) => {
        const row = el("div", null, "hrow");
        const label = i < bounds.length ? "≤ " + fmtUs(bounds[i]) : "> " + fmtUs(bounds[bounds.length - 1]);
        row.appendChild(el("span", label, "hlabel"));
        const track = el("span", null, "htrack");
        const fill = el("span", null, "hfill");
        fill.style.width = (n / max) * 100 + "%";
        track.appendChild(fill);
        row.appendChild(track);
        row.appendChild(el("span", n, "hcount"));
        card.appendChild(row);
      });
      box.appendChild(card);
    }
  }

  function renderTop(id, rows) {
    const body = $(id).tBodies[0];
    clear(body);
    for (const r of rows) {
      const tr = el("tr");
      tr.appendChild(el("td", r.key, "key"));
      tr.appendChild(el("td", r.count, "num"));
      tr.appendChild(el("td", r.blocked, "num"));
      body.appendChild(tr);
    }
  }

  function dl(node, pairs) {
    clear(node);
    for (const [k, v] of pairs) {
      node.appendChild(el("dt", k));
      node.appendChild(el("dd", v === null || v === undefined ? "—" : v));
    }
  }

  function renderHealth(h) {
    $("version").textContent = "v" + h.version + " · " + h.rules.count + " rules · " + h.rules.engine_mode + " · up " + h.uptime_seconds + " s";
    const body = $("upstreams").tBodies[0];
    clear(body);
    for (const u of h.upstreams) {
      const tr = el("tr");
      tr.appendChild(el("td", u.pool));
      tr.appendChild(el("td", u.server));
      tr.appendChild(el("td", u.up ? "up" : "down", u.up ? "up" : "down"));
      tr.appendChild(el("td", u.in_flight, "num"));
      body.appendChild(tr);
    }
    const store = [];
    if (h.store) {
      store.push(["store reads", h.store.stats.reads]);
      store.push(["store writes committed", h.store.stats.writes_committed]);
      store.push(["store writes failed", h.store.stats.writes_failed]);
      store.push(["store map used", h.store.map_used_bytes + " / " + h.store.map_size_bytes + " bytes"]);
    } else {
      store.push(["store", "not open"]);
    }
    if (h.sync) {
      store.push(["sync connected", h.sync.connected ? "yes" : "no"]);
      store.push(["sync unpublished", h.sync.unpublished]);
      store.push(["sync errors", h.sync.errors]);
    } else {
      store.push(["sync", "off"]);
    }
    dl($("store"), store);
    const r = h.reload || {};
    const last = r.last;
    dl($("reload"), [
      ["last", last ? (last.ok === false ? "failed" : "ok") + (last.time ? " at " + last.time : "") : "none since start"],
      ["error", last && last.error ? last.error : null],
      ["succeeded", r.succeeded],
      ["failed", r.failed],
    ]);
  }

  function readinessTable(title, rows) {
    const t = el("table");
    const head = el("tr");
    head.appendChild(el("th", title));
    head.appendChild(el("th", "Would block"));
    t.appendChild(el("thead")).appendChild(head);
    const body = el("tbody");
    for (const r of rows) {
      const tr = el("tr");
      tr.appendChild(el("td", r.key, "key"));
      tr.appendChild(el("td", r.count, "num"));
      body.appendChild(tr);
    }
    t.appendChild(body);
    return t;
  }

  function renderReadiness(list) {
    const box = $("readiness");
    clear(box);
    if (!list || list.length === 0) {
      box.appendChild(el("p", "No site runs in DetectionOnly.", "hint"));
      return;
    }
    for (const r of list) {
      const card = el("div", null, "ready-site");
      card.dataset.site = r.site;
      const h = el("h3", r.site + ": ");
      const cls = r.verdict === "ready" ? "ok" : r.verdict === "not ready" ? "bad" : "wait";
      h.appendChild(el("span", r.verdict, "verdict " + cls));
      card.appendChild(h);
      card.appendChild(el("p", r.reason, "reason"));
      card.appendChild(el("p", r.would_block + " of " + r.requests + " requests would have been blocked (" + (r.rate * 100).toFixed(3) + "%) in the last " + r.criterion.window_minutes + " min", "hint"));
      const bars = el("div", null, "rate small");
      const max = Math.max(1, ...r.series.map((m) => m.requests));
      for (const m of r.series) {
        const bar = el("div", null, "bar");
        bar.title = new Date(m.t * 1000).toLocaleTimeString() + ": " + m.requests + " requests, " + m.would_block + " would block";
        const pass = el("div", null, "pass");
        pass.style.height = ((m.requests - m.would_block) / max) * 100 + "%";
        const wb = el("div", null, "blocked");
        wb.style.height = (m.would_block / max) * 100 + "%";
        bar.appendChild(wb);
        bar.appendChild(pass);
        bars.appendChild(bar);
      }
      card.appendChild(bars);
      const tops = el("div", null, "tops");
      tops.appendChild(readinessTable("Rule", r.top_rules));
      tops.appendChild(readinessTable("Path", r.top_paths));
      tops.appendChild(readinessTable("Client", r.top_clients));
      card.appendChild(tops);
      box.appendChild(card);
    }
  }

  function renderRuleCost(c) {
    $("rule-cost-note").textContent = c.sampled_requests + " requests timed (" +
      (c.sample * 100).toFixed(2) + "% sampled)";
    const body = $("rule-cost").tBodies[0];
    clear(body);
    for (const r of c.rules) {
      const tr = el("tr");
      tr.appendChild(el("td", r.rule_id === null ? "—" : r.rule_id, "key"));
      tr.appendChild(el("td", r.phase, "num"));
      tr.appendChild(el("td", r.evaluations, "num"));
      tr.appendChild(el("td", r.mean_us.toFixed(1), "num"));
      tr.appendChild(el("td", r.max_us.toFixed(1), "num"));
      tr.appendChild(el("td", r.per_request_us.toFixed(1), "num"));
      tr.appendChild(el("td", (r.share * 100).toFixed(1) + "%", "num"));
      body.appendChild(tr);
    }
  }

  function sideText(x) {
    return (x.blocked ? "blocked " + (x.status || "") : "passed") + " · score " + x.score + " · rules " + (x.rules.length ? x.rules.join(" ") : "—");
  }

  function renderShadow(sh) {
    if (!sh) return;
    $("shadow-state").textContent = sh.enabled
      ? "sample " + sh.sample + " · CPU budget " + sh.cpu_budget + " of a core and " + sh.cpu_share + " of the proxy's CPU time · " + sh.cpu_seconds.toFixed(3) + " CPU s used · " + sh.queued + " queued · " + sh.head_only + " seen without body · " + sh.errors + " engine errors"
      : "No [shadow] rule set in force.";
    const box = $("shadow-counters");
    clear(box);
    for (const k of Object.keys(sh.outcomes)) {
      const c = el("div", null, "counter");
      c.dataset.outcome = k;
      c.appendChild(el("span", k.replace("_", " "), "label"));
      c.appendChild(el("span", sh.outcomes[k], "value"));
      box.appendChild(c);
    }
    const rules = $("shadow-rules").tBodies[0];
    clear(rules);
    for (const r of sh.rules) {
      const tr = el("tr");
      tr.appendChild(el("td", r.rule, "key"));
      tr.appendChild(el("td", r.shadow_only, "num"));
      tr.appendChild(el("td", r.primary_only, "num"));
      rules.appendChild(tr);
    }
    const body = $("shadow-disagreements").tBodies[0];
    clear(body);
    for (const d of sh.disagreements) {
      const tr = el("tr", null, "shadow " + d.outcome);
      tr.dataset.seq = d.seq;
      tr.appendChild(el("td", d.time));
      tr.appendChild(el("td", d.outcome + (d.head_only ? " (head only)" : ""), "verdict"));
      tr.appendChild(el("td", d.site));
      tr.appendChild(el("td", d.method + " " + d.target, "uri"));
      tr.appendChild(el("td", sideText(d.primary)));
      tr.appendChild(el("td", sideText(d.shadow)));
      tr.appendChild(el("td", d.id, "key"));
      body.appendChild(tr);
    }
  }

  function renderSnapshot(s) {
    renderCounters(s);
    renderRate(s.rate);
    renderHistograms(s.buckets_us, s.histograms);
    renderTop("top-rules", s.top.rules);
    renderTop("top-clients", s.top.clients);
    renderTop("top-paths", s.top.paths);
    renderTop("top-sites", s.top.sites);
    renderHealth(s.health);
    renderReadiness(s.readiness);
    renderRuleCost(s.rule_cost);
    renderShadow(s.shadow);
  }

  const seen = new Set();

  function addRequest(r) {
    if (seen.has(r.seq)) return;
    seen.add(r.seq);
    const body = $("explorer").tBodies[0];
    const tr = el("tr", null, "req " + r.verdict);
    tr.dataset.seq = r.seq;
    tr.appendChild(el("td", new Date(r.start_us / 1000).toLocaleTimeString()));
    tr.appendChild(el("td", r.verdict + " (" + r.action + ")", "verdict"));
    tr.appendChild(el("td", r.lineage.client));
    tr.appendChild(el("td", r.site));
    tr.appendChild(el("td", r.method + " " + r.uri, "uri"));
    tr.appendChild(el("td", r.status, "num"));
    tr.appendChild(el("td", r.rules.join(" "), "rules"));
    tr.appendChild(el("td", "in " + r.anomaly_inbound + " / out " + r.anomaly_outbound, "num"));

    const detail = el("tr", null, "detail");
    const td = el("td");
    td.colSpan = 8;
    const d = el("details");
    d.appendChild(el("summary", r.matches.length + " match(es), id " + r.unique_id));
    const m = el("table", null, "matches");
    const head = el("tr");
    for (const h of ["Rule", "Phase", "Variable", "Value", "Message", "Severity", "Tags"]) head.appendChild(el("th", h));
    m.appendChild(head);
    for (const x of r.matches) {
      const row = el("tr");
      row.appendChild(el("td", x.rule_id));
      row.appendChild(el("td", x.phase));
      row.appendChild(el("td", x.variable));
      row.appendChild(el("td", x.value, "value"));
      row.appendChild(el("td", x.msg));
      row.appendChild(el("td", x.severity));
      row.appendChild(el("td", (x.tags || []).join(", ")));
      m.appendChild(row);
    }
    d.appendChild(m);
    const lin = el("dl", null, "lineage");
    for (const k of Object.keys(r.lineage)) {
      lin.appendChild(el("dt", k));
      lin.appendChild(el("dd", r.lineage[k] === null ? "—" : r.lineage[k]));
    }
    d.appendChild(lin);
    td.appendChild(d);
    detail.appendChild(td);

    body.insertBefore(detail, body.firstChild);
    body.insertBefore(tr, detail);
    while (body.rows.length > MAX_ROWS * 2) body.deleteRow(body.rows.length - 1);
  }

  function renderTune(r) {
    const out = $("tune-result");
    clear(out);
    const p = r.proof;
    const proven = r.proposals.filter((x) => x.verdict.status === "proven");
    out.appendChild(el("p", r.records + " record(s) in " + r.audit_log + ", " + r.refused +
      " refused; replay agrees with " + r.replay_agrees + ". Proposals: " + proven.length +
      " proven, " + (r.proposals.length - proven.length) + " dropped."));
    let proof = "Recorded requests blocked " + p.blocked_before + " → " + p.blocked_after +
      " (" + p.passed_now.length + " pass now, " + p.blocked_now.length + " blocked now). ";
    proof += p.attack_corpus
      ? "Attack corpus blocked " + p.attacks_blocked_before + " → " + p.attacks_blocked_after +
        " of " + p.attacks + " (" + p.attacks_passing_now.length + " pass now)."
      : "No attack corpus ([admin] tune_attacks): the proof covers the recorded requests only.";
    out.appendChild(el("p", proof));
    if (r.proposals.length === 0) {
      out.appendChild(el("p", "No proposal: " + r.not_proposed_total +
        " rule × variable group(s) of the refused requests, none a likely false positive" +
        (r.not_proposed.length > 0 ? " (for example rule " + r.not_proposed[0].rule_id + " on " +
          r.not_proposed[0].var + ": " + r.not_proposed[0].reason + ")." : ".")));
      return;
    }
    const table = el("table");
    table.id = "tune-proposals";
    const head = el("tr");
    for (const h of ["Verdict", "Rule", "Variable", "Scope", "Requests", "Clients", "Rank", "Exclusion"]) {
      head.appendChild(el("th", h));
    }
    const thead = el("thead");
    thead.appendChild(head);
    table.appendChild(thead);
    const body = el("tbody");
    for (const x of r.proposals) {
      const tr = el("tr");
      const ok = x.verdict.status === "proven";
      tr.appendChild(el("td", ok ? "proven" : "dropped: " + x.verdict.reason, ok ? "pass" : "block"));
      tr.appendChild(el("td", x.rule_id));
      if (x.notes.length > 0) tr.title = x.notes.join("\n");
      tr.appendChild(el("td", x.var));
      let scope = "every path";
      if (Array.isArray(x.form.paths)) scope = x.form.paths.join(", ");
      else if (Array.isArray(x.form.all_but)) scope = "every path but " + x.form.all_but.join(", ");
      tr.appendChild(el("td", (x.site ? x.site + ": " : "") + scope));
      tr.appendChild(el("td", ok ? x.removes.length + " pass" : x.covers.length));
      tr.appendChild(el("td", x.clients));
      tr.appendChild(el("td", x.signals.rank.toFixed(2)));
      const td = el("td");
      td.appendChild(el("pre", x.text));
      tr.appendChild(td);
      body.appendChild(tr);
    }
    table.appendChild(body);
    out.appendChild(table);
    if (proven.length > 0) {
      out.appendChild(el("p", "To write the proven exclusions, then reload:"));
      out.appendChild(el("pre", r.command));
    }
  }

  function runTune() {
    const status = $("tune-status");
    const button = $("tune-run");
    button.disabled = true;
    status.textContent = "analysing…";
    fetch("/dashboard/api/tune", { credentials: "same-origin" })
      .then((resp) => resp.json().then((doc) => ({ ok: resp.ok, doc: doc })))
      .then(({ ok, doc }) => {
        if (!ok) throw new Error(doc.error || "failed");
        status.textContent = "";
        renderTune(doc);
      })
      .catch((err) => {
        status.textContent = "analysis failed: " + err.message;
      })
      .finally(() => {
        button.disabled = false;
      });
  }

  function start() {
    $("tune-run").addEventListener("click", runTune);
    const csrf = document.querySelector('meta[name="csrf-token"]').content;
    if (!csrf) $("logout").hidden = true;
    const conn = $("conn");
    const es = new EventSource("/dashboard/events");
    es.addEventListener("open", () => {
      conn.textContent = "live";
      conn.className = "conn live";
    });
    es.addEventListener("error", () => {
      conn.textContent = "reconnecting…";
      conn.className = "conn down";
    });
    es.addEventListener("snapshot", (e) => {
      try {
        renderSnapshot(JSON.parse(e.data));
      } catch (err) {
        conn.textContent = "bad snapshot: " + err;
      }
    });
    es.addEventListener("request", (e) => {
      try {
        addRequest(JSON.parse(e.data));
      } catch (err) {
        conn.textContent = "bad event: " + err;
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
