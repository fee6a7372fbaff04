//! The record a request leaves behind: phase and upstream timings, sizes, the
//! verdict, and the engine transaction. Finishing it runs phase 5 and queues the
//! access, error and audit lines and the metrics.

use super::shared::{ConnInfo, Shared};
use crate::inspect::{Spent, measured};
use crate::logs::{LogKind, Written, one_line, rfc3339_micros};
use crate::metrics::{Action, Timer};
use crate::upstream::UpstreamTiming;
use crate::waf::{Verdict, WafTx};
use bytes::Bytes;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// What a finished request looked like, kept for the logs.
pub(super) struct Record {
    pub(super) shared: Arc<Shared>,
    /// The request's site (`[[site]]`, or `default`), in the rules it began with.
    pub(super) site: crate::sites::SiteRef,
    /// The engine transaction; `None` when the rule set in force cannot act on a
    /// request ([`Waf::is_empty`]): then no phase runs and nothing is timed.
    pub(super) tx: Option<WafTx>,
    /// The transaction id, made when first needed (at once when the engine runs).
    pub(super) unique_id: Option<String>,
    pub(super) conn: ConnInfo,
    pub(super) start: Instant,
    pub(super) start_us: i64,
    pub(super) method: Bytes,
    pub(super) uri: Bytes,
    pub(super) protocol: Bytes,
    pub(super) host: Option<Bytes>,
    pub(super) phase_us: [Option<u64>; 5],
    /// CPU time the rule engine took for this request, over all phases.
    pub(super) waf_cpu_us: u64,
    /// The CPU budget's verdict has been logged.
    pub(super) budget_noted: bool,
    pub(super) upstream: Option<(Arc<str>, Option<Arc<str>>)>,
    pub(super) up_timing: Option<UpstreamTiming>,
    pub(super) transfer_us: Option<u64>,
    /// Upstream transfer time accumulated while the proxy waited for body data.
    pub(super) transfer_acc: u64,
    /// When streaming of the rest of the upstream body began.
    pub(super) transfer_start: Option<Instant>,
    pub(super) bytes_in: u64,
    pub(super) bytes_out: u64,
    pub(super) status: u16,
    pub(super) action: Action,
    pub(super) rule_id: Option<i64>,
    pub(super) error: Option<String>,
    pub(super) finished: bool,
    /// With `logs.error_log_before_response`: the acknowledgement of the last
    /// error-log line queued for this request, awaited before the response is sent.
    pub(super) logged: Option<Written>,
    /// The `@rbl` hook of this transaction, when the rules look names up.
    pub(super) rbl: Option<Arc<crate::dns::TxResolver>>,
    /// Per phase (index 0 for phase 1): an `@rbl` rule of that phase may wait for
    /// a lookup, so the phase runs on the inspection pool.
    pub(super) rbl_waits: [bool; 5],
}

pub(super) fn micros_since(t: Instant) -> u64 {
    micros(t.elapsed())
}

fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Record {
    /// Runs and times a phase; without a transaction, returns `T::default()` (no
    /// verdict) and records the phase as taking no time, without reading a clock
    /// (logs and metrics keep their shape).
    pub(super) fn time_phase<T: Default>(
        &mut self,
        phase: usize,
        f: impl FnOnce(&mut WafTx) -> T,
    ) -> T {
        let cpu = self.wants_cpu();
        let Some(tx) = self.tx.as_mut() else {
            self.phase_us[phase - 1].get_or_insert(0);
            return T::default();
        };
        let (out, spent) = measured(cpu, || f(tx));
        self.account(phase, spent);
        self.emit_match_lines();
        self.note_budget();
        self.note_collection_errors(phase);
        self.note_rbl_failures(phase);
        out
    }

    /// [`Record::time_phase`] for a phase over `size` bytes of input, which may be
    /// evaluated off the worker thread ([`crate::inspect`]). `failed` is the
    /// answer when the evaluation itself fails (the transaction is then lost).
    ///
    /// A lookup may be waited for only off the worker threads. A phase that holds an
    /// `@rbl` rule on a value other than the client's address, small enough to run
    /// inline, runs inline until its walk reaches such a rule (most walks never do:
    /// CRS 3.3.4 skips its 910140 unless one of its `tx.block_*_ip` settings is
    /// set), and goes on from that rule on the pool.
    pub(super) async fn inspect_phase(
        &mut self,
        phase: usize,
        mut size: usize,
        failed: Option<Verdict>,
        mut f: fn(&mut WafTx) -> Option<Verdict>,
    ) -> Option<Verdict> {
        if self.rbl_waits[phase - 1] {
            if self.shared.inspector.inline(size) && self.tx.is_some() {
                let out = self.time_phase(phase, |tx| {
                    tx.set_pause_for_lookups(true);
                    let out = f(tx);
                    tx.set_pause_for_lookups(false);
                    out
                });
                if out.is_some() || !self.tx.as_ref().is_some_and(WafTx::paused) {
                    return out;
                }
                f = WafTx::resume_phase;
            }
            size = usize::MAX;
        }
        let Some(mut tx) = self.tx.take() else {
            self.phase_us[phase - 1].get_or_insert(0);
            return None;
        };
        let shared = self.shared.clone();
        let mut in_flight = InFlight {
            tx: None,
            shared: shared.clone(),
        };
        let job = move || {
            let out = f(&mut tx);
            in_flight.tx = Some(tx);
            (in_flight, out)
        };
        match shared.inspector.run(size, self.wants_cpu(), job).await {
            Ok(((mut in_flight, out), spent)) => {
                self.tx = in_flight.tx.take();
                self.account(phase, spent);
                self.emit_match_lines();
                self.note_budget();
                self.note_collection_errors(phase);
                self.note_rbl_failures(phase);
                out
            }
            Err(e) => {
                shared.metrics.engine_errors.fetch_add(1, Ordering::Relaxed);
                let msg = format!("rule engine failure: {e}");
                self.error_line(&msg);
                self.error.get_or_insert(msg);
                failed
            }
        }
    }

    /// Logs and counts, once, a transaction that went over its CPU budget.
    fn note_budget(&mut self) {
        if self.budget_noted {
            return;
        }
        let Some(b) = self.tx.as_mut().and_then(WafTx::budget_exceeded) else {
            return;
        };
        self.budget_noted = true;
        self.shared.metrics.budget_exceeded(b.blocked);
        let at = b
            .rule_id
            .map(|id| format!(" at rule {id}"))
            .unwrap_or_default();
        let outcome = if b.blocked {
            "request refused"
        } else {
            "the rest of the request passes uninspected"
        };
        let msg = format!(
            "rule evaluation over its CPU budget in phase {}{at} ({} us used, budget {} us): {outcome}",
            b.phase, b.used_micros, b.limit_micros
        );
        self.error_line(&msg);
        self.error.get_or_insert(msg);
    }

    /// Logs and counts the persistent collections a phase could not read (the
    /// failure policy has already decided the request's fate, see [`WafTx`]).
    fn note_collection_errors(&mut self, phase: usize) {
        let Some(errors) = self.tx.as_mut().map(WafTx::take_collection_errors) else {
            return;
        };
        if errors.is_empty() {
            return;
        }
        let closed = self.shared.server.engine_failure == crate::config::FailurePolicy::Closed;
        for e in errors {
            self.shared
                .metrics
                .collection_errors
                .fetch_add(1, Ordering::Relaxed);
            let msg = format!(
                "persistent collection in phase {phase}: {e} ({})",
                if closed {
                    "server.engine_failure = closed: request refused"
                } else {
                    "server.engine_failure = open: the rules saw the collection empty"
                }
            );
            self.error_line(&msg);
            self.error.get_or_insert(msg);
        }
    }

    /// Logs the `@rbl` lookups of a phase that gave no answer (the rule did not
    /// match), and counts transactions that reached their lookup limit.
    fn note_rbl_failures(&mut self, phase: usize) {
        let Some(failures) = self.tx.as_mut().map(WafTx::take_rbl_failures) else {
            return;
        };
        for f in failures {
            if matches!(f, engine::RblFailure::OverLimit { .. })
                && let Some(r) = &self.rbl
            {
                r.dns().stats.over_limit.fetch_add(1, Ordering::Relaxed);
            }
            self.error_line(&format!("phase {phase}: {f}; the rule did not match"));
        }
    }

    /// Hands the transaction's collection writes to the store. The writes of a
    /// transaction that could not read the store are dropped and counted: they were
    /// computed from records it did not see.
    pub(super) fn submit_collection_writes(&mut self) {
        if let Some(tx) = self.tx.as_mut() {
            submit_writes(&self.shared, tx);
        }
    }

    /// Whether the phases' CPU time is read: only the access log (`waf_cpu_us`)
    /// shows it. (The CPU budget has its own meter, in the engine.)
    fn wants_cpu(&self) -> bool {
        self.shared.logs.enabled(LogKind::Access)
    }

    /// Adds a phase's time to the record.
    fn account(&mut self, phase: usize, spent: Spent) {
        let slot = &mut self.phase_us[phase - 1];
        *slot = Some(slot.unwrap_or(0) + micros(spent.wall));
        self.waf_cpu_us += micros(spent.cpu);
    }

    /// The transaction id (made now if it was not yet).
    pub(super) fn unique_id(&mut self) -> &str {
        let (shared, start_us) = (&self.shared, self.start_us);
        self.unique_id
            .get_or_insert_with(|| shared.unique_id(start_us))
    }

    /// Queues the engine's debug-log lines so far (only when `SecDebugLog` is on).
    pub(super) fn emit_debug_lines(&mut self) {
        if !self.shared.logs.enabled(LogKind::Debug) {
            return;
        }
        let Some(tx) = self.tx.as_mut() else {
            return;
        };
        for line in tx.take_debug_lines() {
            self.shared.logs.send(LogKind::Debug, line);
        }
    }

    /// Queues the engine's match lines so far. Called after every phase, so that the
    /// lines of a request reach the error log before its response is sent (tools
    /// that tail the log rely on that order), as ModSecurity writes them.
    pub(super) fn emit_match_lines(&mut self) {
        let Some(tx) = self.tx.as_mut() else {
            return;
        };
        let lines = tx.take_log_lines();
        if lines.is_empty() {
            return;
        }
        let now = rfc3339_micros(crate::logs::now_unix_micros());
        let client_ip = self.conn.client.ip();
        let last = lines.len() - 1;
        let site = self.site_tag();
        for (i, line) in lines.into_iter().enumerate() {
            // Only the batch's last line needs an acknowledgement: the writer keeps
            // the order, so it covers the others.
            let written = self.shared.logs.send_error(
                format!(
                    "{now} [error] [client {client_ip}] {}{site}",
                    one_line(&line)
                ),
                i == last,
            );
            if written.is_some() {
                self.logged = written;
            }
        }
    }

    /// ` [site "NAME"]`, which ends a request's error-log lines when the
    /// configuration has `[[site]]`s (empty otherwise).
    fn site_tag(&self) -> String {
        if self.site.waf().sites().configured() {
            format!(" [site \"{}\"]", self.site.name())
        } else {
            String::new()
        }
    }

    pub(super) fn error_line(&mut self, message: &str) {
        self.unique_id();
        let line = format!(
            "{} [error] [client {}] palisade: {} [uri \"{}\"] [unique_id \"{}\"]{}",
            rfc3339_micros(crate::logs::now_unix_micros()),
            self.conn.client.ip(),
            one_line(message),
            one_line(&String::from_utf8_lossy(&self.uri)),
            self.unique_id.as_deref().unwrap_or_default(),
            self.site_tag()
        );
        if let Some(w) = self.shared.logs.send_error(line, true) {
            self.logged = Some(w);
        }
    }

    /// Phase 5, then the log lines and metrics. Runs once.
    pub(super) fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        if let Some(t) = self.transfer_start.take() {
            let acc = self.transfer_acc;
            self.transfer_us.get_or_insert(acc + micros_since(t));
        }
        self.time_phase(5, |tx| tx.logging());
        self.submit_collection_writes();
        if let Some(f) = self
            .tx
            .as_ref()
            .and_then(|t| t.failure())
            .map(str::to_owned)
        {
            self.shared
                .metrics
                .engine_errors
                .fetch_add(1, Ordering::Relaxed);
            self.error_line(&format!("rule engine failure: {f}"));
            self.error
                .get_or_insert(format!("rule engine failure: {f}"));
        }
        let total_us = micros_since(self.start);
        let shared = self.shared.clone();
        self.emit_debug_lines();
        if shared.logs.enabled(LogKind::Audit)
            && let Some(rec) = self.tx.as_mut().and_then(|t| t.audit_record())
        {
            match rec.concurrent {
                Some(c) => shared
                    .logs
                    .send_audit_file(c.path.into(), rec.text, c.index_line),
                // A JSON record is one line; a native one is several by design.
                None if rec.text.starts_with('{') => shared
                    .logs
                    .send(LogKind::Audit, one_line(&rec.text).into_owned()),
                None => shared.logs.send(LogKind::Audit, rec.text),
            }
        }
        let (rules, (anomaly_in, anomaly_out)) = match self.tx.as_mut() {
            Some(tx) => (tx.matched_rule_ids(), tx.anomaly_scores()),
            None => (Vec::new(), (0, 0)),
        };
        let m = &shared.metrics;
        m.request(self.status, self.action);
        shared.accounting.record(
            self.conn.client.ip(),
            self.upstream
                .as_ref()
                .map_or(crate::accounting::NO_ROUTE, |(pool, _)| pool),
            self.bytes_in,
            self.bytes_out,
            matches!(
                self.action,
                Action::Deny | Action::Drop | Action::RateLimited
            ),
        );
        m.rule_hits(&rules);
        let timers = [
            Timer::Phase1,
            Timer::Phase2,
            Timer::Phase3,
            Timer::Phase4,
            Timer::Phase5,
        ];
        for (t, us) in timers.iter().zip(self.phase_us) {
            if let Some(us) = us {
                m.observe(*t, us);
            }
        }
        if let Some(u) = &self.up_timing {
            if !u.reused {
                m.observe(Timer::UpstreamConnect, u.connect_us);
            }
            m.observe(Timer::UpstreamFirstByte, u.first_byte_us);
        }
        if let Some(us) = self.transfer_us {
            m.observe(Timer::UpstreamTransfer, us);
        }
        m.observe(Timer::Total, total_us);
        let waf_us: u64 = self.phase_us.iter().flatten().sum();
        m.site_request(
            self.site.site().counters(m),
            self.status,
            self.action,
            total_us,
            waf_us,
        );
        if shared.logs.enabled(LogKind::Access) {
            self.unique_id();
            let host = self.host.as_ref().map(|h| String::from_utf8_lossy(h));
            let line = AccessLine {
                ts_us: self.start_us,
                time: &rfc3339_micros(self.start_us),
                unique_id: self.unique_id.as_deref().unwrap_or_default(),
                client: &self.conn.client.to_string(),
                peer: &self.conn.peer.to_string(),
                server: &self.conn.local.to_string(),
                scheme: if self.conn.tls { "https" } else { "http" },
                protocol: &String::from_utf8_lossy(&self.protocol),
                method: &String::from_utf8_lossy(&self.method),
                uri: &String::from_utf8_lossy(&self.uri),
                host: host.as_deref(),
                site: self.site.name(),
                status: self.status,
                bytes_in: self.bytes_in,
                bytes_out: self.bytes_out,
                total_us,
                waf_us,
                waf_cpu_us: self.waf_cpu_us,
                phase1_us: self.phase_us[0],
                phase2_us: self.phase_us[1],
                phase3_us: self.phase_us[2],
                phase4_us: self.phase_us[3],
                phase5_us: self.phase_us[4],
                upstream: self.upstream.as_ref().map(|u| &*u.0),
                upstream_addr: self.upstream.as_ref().and_then(|u| u.1.as_deref()),
                upstream_reused: self.up_timing.map(|u| u.reused),
                upstream_connect_us: self.up_timing.map(|u| u.connect_us),
                upstream_first_byte_us: self.up_timing.map(|u| u.first_byte_us),
                upstream_transfer_us: self.transfer_us,
                rules: &rules,
                anomaly_inbound: anomaly_in,
                anomaly_outbound: anomaly_out,
                action: self.action.label(),
                rule_id: self.rule_id,
                error: self.error.as_deref(),
            };
            if let Ok(json) = serde_json::to_string(&line) {
                shared.logs.send(LogKind::Access, json);
            }
        }
    }
}

/// Hands `tx`'s collection writes to the store, or drops and counts them when the
/// transaction could not read the store (they were computed from records it did not
/// see).
fn submit_writes(shared: &Shared, tx: &mut WafTx) {
    let writes = tx.take_collection_writes();
    if writes.is_empty() {
        return;
    }
    if tx.store_failed() {
        shared
            .metrics
            .collection_writes_discarded
            .fetch_add(writes.len() as u64, Ordering::Relaxed);
        return;
    }
    shared.submit_writes(writes);
}

/// A transaction coming back from a phase evaluated on an inspection thread. When
/// its exchange is gone before the phase ends (the client went away and the
/// exchange's future was dropped), the result is dropped where it is, and this
/// still hands the transaction's collection writes to the store, as
/// [`Record`]'s own drop does for a transaction it holds. Not when the phase
/// panicked: a transaction cut by an engine failure writes nothing.
struct InFlight {
    tx: Option<WafTx>,
    shared: Arc<Shared>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        if let Some(tx) = self.tx.as_mut() {
            submit_writes(&self.shared, tx);
        }
    }
}

impl Drop for Record {
    /// A transaction cut short (the client went away before an answer was made)
    /// still hands over what its phases wrote to persistent collections.
    fn drop(&mut self) {
        if !self.finished {
            self.submit_collection_writes();
        }
    }
}

#[derive(serde::Serialize)]
struct AccessLine<'a> {
    ts_us: i64,
    time: &'a str,
    unique_id: &'a str,
    client: &'a str,
    /// The TCP peer (the client unless a trusted proxy named another).
    peer: &'a str,
    server: &'a str,
    scheme: &'a str,
    protocol: &'a str,
    method: &'a str,
    uri: &'a str,
    host: Option<&'a str>,
    /// The request's site (`[[site]]`), or `default`.
    site: &'a str,
    status: u16,
    bytes_in: u64,
    bytes_out: u64,
    total_us: u64,
    waf_us: u64,
    waf_cpu_us: u64,
    phase1_us: Option<u64>,
    phase2_us: Option<u64>,
    phase3_us: Option<u64>,
    phase4_us: Option<u64>,
    phase5_us: Option<u64>,
    upstream: Option<&'a str>,
    upstream_addr: Option<&'a str>,
    upstream_reused: Option<bool>,
    upstream_connect_us: Option<u64>,
    upstream_first_byte_us: Option<u64>,
    upstream_transfer_us: Option<u64>,
    rules: &'a [i64],
    anomaly_inbound: i64,
    anomaly_outbound: i64,
    action: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}
