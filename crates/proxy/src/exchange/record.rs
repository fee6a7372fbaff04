//! The record a request keeps while it runs: phase and upstream timings, sizes,
//! the verdict, the engine transaction and what its events said. Finishing it
//! runs phase 5 and builds the request's one [`RequestSummary`], which every sink
//! reads ([`crate::summary`]).

use super::shared::{ConnInfo, Shared};
use crate::inspect::{Measure, Spent, measured};
use crate::logs::{LogKind, Written, one_line, rfc3339_micros};
use crate::metrics::Action;
use crate::summary::RequestSummary;
use crate::upstream::UpstreamTiming;
use crate::waf::{Verdict, WafTx};
use bytes::Bytes;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The work (the engine's CPU budget units, a few nanoseconds each) of one slice
/// of a phase walked on the inspection pool: one to a few milliseconds of rules
/// (bench/fairness.py: a quarter of it gained little and cost a pool round trip
/// every few hundred microseconds).
const POOL_SLICE_WORK: u64 = 512 * 1024;

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
    /// The W3C trace context, when spans are exported (`[otlp]`).
    pub(super) trace: Option<crate::otlp::TraceContext>,
    /// The transaction id, NUL-terminated, for the static tracepoints' first
    /// argument; made only when a tracer is attached.
    pub(super) probe_id: Option<std::ffi::CString>,
    pub(super) conn: ConnInfo,
    pub(super) start: Instant,
    pub(super) start_us: i64,
    pub(super) method: Bytes,
    pub(super) uri: Bytes,
    pub(super) protocol: Bytes,
    pub(super) host: Option<Bytes>,
    /// The user the forward proxy authenticated.
    pub(super) user: Option<Arc<str>>,
    pub(super) phase_us: [Option<u64>; 5],
    /// CPU time the rule engine took for this request, over all phases.
    pub(super) waf_cpu_us: Option<u64>,
    /// The rule matches the engine reported so far, without their log lines.
    pub(super) matches: Vec<engine::RuleMatch>,
    /// Each rule's time by phase, when the engine timed this request
    /// (`server.rule_cost_sample`).
    pub(super) rule_times: Vec<(u8, engine::RuleTime)>,
    /// Collection writes the engine reported, not yet handed to the store.
    pub(super) writes: Vec<(engine::RecordKey, engine::RecordWrite)>,
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

/// [`Record::probe_id`] from the record's fields, for where its transaction is
/// borrowed.
fn probe_id(
    probe: &mut Option<std::ffi::CString>,
    unique: &mut Option<String>,
    shared: &Shared,
    start_us: i64,
) -> isize {
    if probe.is_none() {
        let id = unique.get_or_insert_with(|| shared.unique_id(start_us));
        // A unique id is hex digits: it has no NUL.
        *probe = std::ffi::CString::new(id.as_str()).ok();
    }
    probe.as_ref().map_or(0, |c| c.as_ptr() as isize)
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
        let how = self.measure();
        if self.tx.is_some() {
            self.probe_phase_start(phase);
        }
        let Some(tx) = self.tx.as_mut() else {
            self.phase_us[phase - 1].get_or_insert(0);
            return T::default();
        };
        let (out, spent) = measured(how, || f(tx));
        self.account(phase, spent);
        self.take_events(phase);
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
        if self.tx.is_none() {
            self.phase_us[phase - 1].get_or_insert(0);
            return None;
        }
        self.probe_phase_start(phase);
        // On the pool, while others wait for it, the phase is walked in slices:
        // between two, the clients waiting take their turns (`inspect/fair.rs`),
        // so one client's long evaluations cannot hold the pool from another's.
        let pooled = !self.shared.inspector.inline(size);
        // What the slices took, accounted once for the phase.
        let mut total: Option<Spent> = None;
        loop {
            let mut tx = self.tx.take()?;
            let how = self.measure_for(Some(&tx));
            let shared = self.shared.clone();
            let mut in_flight = InFlight {
                tx: None,
                shared: shared.clone(),
            };
            let client = self.conn.client.ip();
            let job = move || {
                // Sliced only while others wait for the pool. At the end of a
                // slice the walk goes on in place unless another client waits:
                // only then is the thread given back (a round trip through the
                // pool, its threads' wake-up and spin included); the same
                // client's own waiting bodies gain nothing from taking turns.
                let inspector = &in_flight.shared.inspector;
                if pooled && inspector.contended() {
                    tx.set_slice(Some(POOL_SLICE_WORK));
                }
                let mut out = f(&mut tx);
                while out.is_none() && tx.paused() && !inspector.contended_for(client) {
                    out = WafTx::resume_phase(&mut tx);
                }
                tx.set_slice(None);
                in_flight.tx = Some(tx);
                (in_flight, out)
            };
            match shared.inspector.run(size, client, how, job).await {
                Ok(((mut in_flight, out), spent)) => {
                    self.tx = in_flight.tx.take();
                    let spent = total.map_or(spent, |t| t.plus(&spent));
                    self.take_events(phase);
                    if pooled && out.is_none() && self.tx.as_ref().is_some_and(WafTx::paused) {
                        total = Some(spent);
                        f = WafTx::resume_phase;
                        continue;
                    }
                    self.account(phase, spent);
                    return out;
                }
                Err(e) => {
                    if let Some(t) = total {
                        self.account(phase, t);
                    }
                    shared.metrics.engine_errors.fetch_add(1, Ordering::Relaxed);
                    let msg = format!("rule engine failure: {e}");
                    self.error_line(&msg);
                    self.error.get_or_insert(msg);
                    return failed;
                }
            }
        }
    }

    /// Takes the transaction's events after a phase: match lines go to the error
    /// log (before the response is sent, as ModSecurity writes them: tools that
    /// tail the log rely on that order), matches into the record, failed reads and
    /// lookups and limits are logged and counted, debug lines queued, collection
    /// writes kept for the store.
    pub(super) fn take_events(&mut self, phase: usize) {
        let Some(tx) = self.tx.as_mut() else {
            return;
        };
        let mut lines = Vec::new();
        let mut notes = Vec::new();
        let debug = self.shared.logs.enabled(LogKind::Debug);
        while let Some(e) = tx.poll_event() {
            match e {
                engine::Event::RuleMatched(mut m) => {
                    if let Some(l) = m.log_line.take() {
                        lines.push(l);
                    }
                    probe::probe_lazy!(
                        palisade,
                        rule_match,
                        probe_id(
                            &mut self.probe_id,
                            &mut self.unique_id,
                            &self.shared,
                            self.start_us
                        ),
                        m.rule_id.unwrap_or(0) as isize,
                        isize::from(m.phase)
                    );
                    self.matches.push(*m);
                }
                engine::Event::Intervention {
                    phase: p,
                    intervention,
                } => {
                    probe::probe_lazy!(
                        palisade,
                        intervention,
                        probe_id(
                            &mut self.probe_id,
                            &mut self.unique_id,
                            &self.shared,
                            self.start_us
                        ),
                        isize::from(p),
                        intervention.status as isize,
                        intervention.rule_id.unwrap_or(0) as isize
                    );
                }
                engine::Event::CollectionWrite(k, w) => self.writes.push((k, w)),
                engine::Event::CollectionReadFailed(e) => {
                    self.shared
                        .metrics
                        .collection_errors
                        .fetch_add(1, Ordering::Relaxed);
                    let closed =
                        self.shared.server.engine_failure == crate::config::FailurePolicy::Closed;
                    notes.push((
                        true,
                        format!(
                            "persistent collection in phase {phase}: {e} ({})",
                            if closed {
                                "server.engine_failure = closed: request refused"
                            } else {
                                "server.engine_failure = open: the rules saw the collection empty"
                            }
                        ),
                    ));
                }
                engine::Event::LookupFailed { name, reason } => notes.push((
                    false,
                    format!(
                        "phase {phase}: {}; the rule did not match",
                        engine::RblFailure::Failed { name, reason }
                    ),
                )),
                engine::Event::LimitReached(engine::Limit::Lookups { name, limit }) => {
                    if let Some(r) = &self.rbl {
                        r.dns().stats.over_limit.fetch_add(1, Ordering::Relaxed);
                    }
                    notes.push((
                        false,
                        format!(
                            "phase {phase}: {}; the rule did not match",
                            engine::RblFailure::OverLimit { name, limit }
                        ),
                    ));
                }
                engine::Event::LimitReached(engine::Limit::CpuBudget(b)) => {
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
                    notes.push((
                        true,
                        format!(
                            "rule evaluation over its CPU budget in phase {}{at} ({} us used, budget {} us): {outcome}",
                            b.phase, b.used_micros, b.limit_micros
                        ),
                    ));
                }
                engine::Event::RuleTimes { phase, times } => {
                    self.rule_times
                        .extend(times.into_iter().map(|t| (phase, t)));
                }
                engine::Event::Debug(line) if debug => {
                    self.shared.logs.send(LogKind::Debug, line);
                }
                _ => {}
            }
        }
        self.match_lines(lines);
        for (keep, msg) in notes {
            self.error_line(&msg);
            if keep {
                self.error.get_or_insert(msg);
            }
        }
    }

    /// Hands the collection writes reported so far to the store. The writes of a
    /// transaction that could not read the store are dropped and counted: they were
    /// computed from records it did not see.
    pub(super) fn submit_collection_writes(&mut self) {
        if let Some(tx) = self.tx.as_mut() {
            tx.close();
            self.take_events(5);
        }
        let writes = std::mem::take(&mut self.writes);
        let failed = self.tx.as_ref().is_some_and(WafTx::store_failed);
        submit_writes(&self.shared, writes, failed);
    }

    /// What a phase's timing reads: the CPU clock and its split by mode for a
    /// transaction sampled for rule costs, the CPU clock for every transaction with
    /// `server.waf_cpu_measure = "always"`, else the wall clock only. The CPU
    /// clock is a system call: read twice per phase, it cost a GET about 5 us.
    /// (The CPU budget has its own meter, in the engine.)
    fn measure(&self) -> Measure {
        self.measure_for(self.tx.as_ref())
    }

    fn measure_for(&self, tx: Option<&WafTx>) -> Measure {
        match tx {
            Some(tx) if tx.sampled() => Measure::Split,
            Some(tx) if tx.cpu_always() => Measure::Cpu,
            _ => Measure::Wall,
        }
    }

    /// Adds a phase's time to the record.
    // Not inlined: bench/instrumentation.py reads its cost by name.
    #[inline(never)]
    fn account(&mut self, phase: usize, spent: Spent) {
        let slot = &mut self.phase_us[phase - 1];
        *slot = Some(slot.unwrap_or(0) + micros(spent.wall));
        if let Some(cpu) = spent.cpu {
            *self.waf_cpu_us.get_or_insert(0) += micros(cpu);
        }
        if let Some(usage) = spent.split {
            self.shared.metrics.phase_usage(phase, &usage);
        }
        probe::probe_lazy!(
            palisade,
            phase_end,
            self.probe_id(),
            phase as isize,
            micros(spent.wall) as isize,
            micros(spent.cpu.unwrap_or_default()) as isize
        );
    }

    /// The transaction id for a tracepoint's first argument: the address of a
    /// NUL-terminated copy of the unique id (as the logs show it), which lives as
    /// long as the request. Made only when a tracer is attached (the tracepoints'
    /// arguments are evaluated only then).
    pub(super) fn probe_id(&mut self) -> isize {
        probe_id(
            &mut self.probe_id,
            &mut self.unique_id,
            &self.shared,
            self.start_us,
        )
    }

    /// Tracepoint `palisade:phase_start(id, phase)`.
    fn probe_phase_start(&mut self, phase: usize) {
        probe::probe_lazy!(palisade, phase_start, self.probe_id(), phase as isize);
    }

    /// The transaction id (made now if it was not yet).
    pub(super) fn unique_id(&mut self) -> &str {
        let (shared, start_us) = (&self.shared, self.start_us);
        self.unique_id
            .get_or_insert_with(|| shared.unique_id(start_us))
    }

    /// Queues a phase's match lines to the error log.
    fn match_lines(&mut self, lines: Vec<String>) {
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

    /// Phase 5, then the request's summary, given to every sink. Runs once.
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
        let summary = self.summary();
        let shared = self.shared.clone();
        crate::summary::consume(&shared, self.site.site(), &summary);
        shared.summaries.publish(Arc::new(summary));
    }

    /// The request's summary, built once from the record.
    fn summary(&mut self) -> RequestSummary {
        let total_us = micros_since(self.start);
        let audit = match self.tx.as_mut() {
            Some(tx) if self.shared.logs.enabled(LogKind::Audit) => tx.audit_record(),
            _ => None,
        };
        let anomaly = self.tx.as_mut().map_or((0, 0), WafTx::anomaly_scores);
        // The id is made (hex formatting) only when a reader of the summary shows it:
        // the access log or a subscriber; the rules or an error line may have made it
        // already.
        if self.shared.logs.enabled(LogKind::Access) || self.shared.summaries.has_subscribers() {
            self.unique_id();
        }
        // Valid UTF-8 (nearly always) is checked by the fast validator and copied;
        // only other bytes take the lossy path, which walks the text in chunks.
        let text = |b: &Bytes| match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(b).into_owned(),
        };
        RequestSummary {
            unique_id: self.unique_id.clone().unwrap_or_default(),
            start_us: self.start_us,
            client: self.conn.client,
            peer: self.conn.peer,
            server: self.conn.local,
            tls: self.conn.tls,
            protocol: text(&self.protocol),
            method: text(&self.method),
            uri: crate::summary::cut(text(&self.uri), crate::summary::URI_MAX),
            host: self.host.as_ref().map(text),
            user: self.user.clone(),
            site: self.site.site().name().clone(),
            status: self.status,
            action: self.action,
            rule_id: self.rule_id,
            error: self.error.take(),
            phase_us: self.phase_us,
            waf_cpu_us: self.waf_cpu_us,
            total_us,
            upstream: self.upstream.take(),
            up_timing: self.up_timing,
            transfer_us: self.transfer_us,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
            matches: std::mem::take(&mut self.matches),
            rule_times: std::mem::take(&mut self.rule_times),
            trace: self.trace,
            anomaly,
            audit,
        }
    }
}

/// Hands `writes` to the store, or drops and counts them when their transaction
/// could not read the store (`failed`: they were computed from records it did not
/// see).
fn submit_writes(
    shared: &Shared,
    writes: Vec<(engine::RecordKey, engine::RecordWrite)>,
    failed: bool,
) {
    if writes.is_empty() {
        return;
    }
    if failed {
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
            tx.close();
            let writes = std::iter::from_fn(|| tx.poll_event())
                .filter_map(engine::Event::into_collection_write)
                .collect();
            submit_writes(&self.shared, writes, tx.store_failed());
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
