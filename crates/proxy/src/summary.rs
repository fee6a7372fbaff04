//! One immutable summary per request, built once when the request is over, and
//! the sinks that read it: the access log, the audit log, metrics, accounting and
//! rule-hit counters are called with it in line (in that order, once per
//! summary), then it is published on a bounded broadcast for any other reader
//! (a dashboard). A subscriber that falls behind loses the oldest summaries,
//! counted in `palisade_summaries_lagged_total`; the request path never waits.

use crate::metrics::{Action, Timer};
use crate::upstream::UpstreamTiming;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::broadcast;

/// The longest request URI a summary keeps, in bytes (longer ones are cut at a
/// character boundary). The request head's own limit usually bounds it first.
pub const URI_MAX: usize = 16 * 1024;

/// How many summaries the broadcast keeps for a slow subscriber.
pub const CHANNEL_CAPACITY: usize = 1024;

/// What a finished request looked like: built once, read by every sink.
#[derive(Debug, Clone)]
pub struct RequestSummary {
    /// The transaction id (UNIQUE_ID); empty when nothing made it (no rule, log
    /// line or audit record used it) and no reader shows it (no access log, no
    /// subscriber).
    pub unique_id: String,
    /// When the request arrived, in microseconds since the Unix epoch.
    pub start_us: i64,
    /// The client (a trusted proxy's or PROXY header's word, or the peer).
    pub client: SocketAddr,
    /// The TCP peer.
    pub peer: SocketAddr,
    /// The local address the request arrived on.
    pub server: SocketAddr,
    /// Whether it came over TLS.
    pub tls: bool,
    /// The request line's protocol (`HTTP/1.1`, `HTTP/2.0`).
    pub protocol: String,
    /// The method.
    pub method: String,
    /// The URI as sent, cut to [`URI_MAX`] bytes.
    pub uri: String,
    /// The Host header (or `:authority`).
    pub host: Option<String>,
    /// The user the forward proxy authenticated (`Proxy-Authorization`).
    pub user: Option<Arc<str>>,
    /// The request's site (`[[site]]`), or `default`.
    pub site: Arc<str>,
    /// The response status (0 when none was sent).
    pub status: u16,
    /// What the proxy did.
    pub action: Action,
    /// The rule that decided, if one did.
    pub rule_id: Option<i64>,
    /// What went wrong, if something did.
    pub error: Option<String>,
    /// The phases' wall times in microseconds (index 0 for phase 1), `None` for a
    /// phase that did not run.
    pub phase_us: [Option<u64>; 5],
    /// CPU time the rule engine took, over all phases, when it was measured (the
    /// transactions sampled for rule costs, or all with
    /// `server.waf_cpu_measure = "always"`).
    pub waf_cpu_us: Option<u64>,
    /// The whole request, from arrival to the end of the response.
    pub total_us: u64,
    /// The upstream pool and server address, when the request went upstream.
    pub upstream: Option<(Arc<str>, Option<Arc<str>>)>,
    /// The upstream's connect and first-byte times.
    pub up_timing: Option<UpstreamTiming>,
    /// The upstream body's transfer time.
    pub transfer_us: Option<u64>,
    /// Request bytes received.
    pub bytes_in: u64,
    /// Response bytes sent.
    pub bytes_out: u64,
    /// The rule matches, in order, with their variables (values cut as the logs
    /// cut them, [`engine::log::SHOWN_VALUE`]); without their log lines.
    pub matches: Vec<engine::RuleMatch>,
    /// Each evaluated rule's time by phase, in the order they ran, when this
    /// request was timed (`server.rule_cost_sample`); empty otherwise.
    pub rule_times: Vec<(u8, engine::RuleTime)>,
    /// The request's W3C trace context, when spans are exported (`[otlp]`).
    pub trace: Option<crate::otlp::TraceContext>,
    /// The inbound and outbound anomaly scores, as the engine sums them up.
    pub anomaly: (i64, i64),
    /// The audit record, when the audit engine selected this transaction and the
    /// audit log is on.
    pub audit: Option<engine::log::AuditRecord>,
}

impl RequestSummary {
    /// Time in the WAF phases, all together.
    pub fn waf_us(&self) -> u64 {
        self.phase_us.iter().flatten().sum()
    }

    /// The ids of the matched rules, in order (chains by their first rule).
    pub fn rule_ids(&self) -> Vec<i64> {
        self.matches.iter().filter_map(|m| m.rule_id).collect()
    }

    /// Whether the request was refused (denied, dropped or rate limited).
    pub fn blocked(&self) -> bool {
        matches!(
            self.action,
            Action::Deny | Action::Drop | Action::RateLimited
        )
    }
}

#[cfg(test)]
impl RequestSummary {
    /// For unit tests: a GET of `uri` from 192.0.2.1:4000, answered 200 and passed
    /// after 2 ms (phase 1 10 us, phase 2 300 us), without matches; tests change
    /// what they need.
    pub(crate) fn for_test(uri: &str) -> RequestSummary {
        let addr: std::net::SocketAddr = "192.0.2.1:4000".parse().expect("an address");
        RequestSummary {
            unique_id: "u1".into(),
            start_us: 0,
            client: addr,
            peer: addr,
            server: addr,
            tls: false,
            protocol: "HTTP/1.1".into(),
            method: "GET".into(),
            uri: uri.into(),
            host: None,
            user: None,
            site: "default".into(),
            status: 200,
            action: Action::Pass,
            rule_id: None,
            error: None,
            phase_us: [Some(10), Some(300), None, None, None],
            waf_cpu_us: None,
            total_us: 2_000,
            upstream: None,
            up_timing: None,
            transfer_us: None,
            bytes_in: 0,
            bytes_out: 0,
            matches: Vec::new(),
            rule_times: Vec::new(),
            trace: None,
            anomaly: (0, 0),
            audit: None,
        }
    }
}

/// Cuts `s` to at most `max` bytes, at a character boundary.
pub fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut at = max;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
    s
}

/// The broadcast of request summaries.
#[derive(Debug)]
pub struct Summaries {
    tx: broadcast::Sender<Arc<RequestSummary>>,
    stats: Arc<SummaryStats>,
}

/// The broadcast's counters.
#[derive(Debug, Default)]
pub struct SummaryStats {
    /// Summaries published.
    pub published: AtomicU64,
    /// Summaries subscribers lost because they fell behind.
    pub lagged: AtomicU64,
}

impl Default for Summaries {
    fn default() -> Self {
        Self::new(CHANNEL_CAPACITY)
    }
}

impl Summaries {
    /// A broadcast keeping up to `capacity` summaries for slow subscribers.
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(1));
        Summaries {
            tx,
            stats: Arc::default(),
        }
    }

    /// Publishes a summary to the subscribers, never waiting (without subscribers
    /// it is dropped at once).
    pub fn publish(&self, s: Arc<RequestSummary>) {
        self.stats.published.fetch_add(1, Ordering::Relaxed);
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(s);
        }
    }

    /// Whether anyone subscribes now (the dashboard's aggregator, for one).
    pub fn has_subscribers(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// A new subscriber, which sees the summaries published from now on.
    pub fn subscribe(&self) -> Subscription {
        Subscription {
            rx: self.tx.subscribe(),
            stats: self.stats.clone(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> &SummaryStats {
        &self.stats
    }
}

impl crate::metrics::Collector for Summaries {
    fn collect(&self, out: &mut crate::metrics::Exposition) {
        out.counter(
            "palisade_summaries_published_total",
            "Request summaries built (one per request).",
            self.stats.published.load(Ordering::Relaxed) as f64,
        );
        out.counter(
            "palisade_summaries_lagged_total",
            "Request summaries a subscriber lost because it fell behind.",
            self.stats.lagged.load(Ordering::Relaxed) as f64,
        );
        out.gauge(
            "palisade_summary_subscribers",
            "Subscribers to the request summaries now.",
            self.tx.receiver_count() as f64,
        );
    }
}

/// A subscriber to the request summaries.
#[derive(Debug)]
pub struct Subscription {
    rx: broadcast::Receiver<Arc<RequestSummary>>,
    stats: Arc<SummaryStats>,
}

impl Subscription {
    /// The next summary; summaries lost by falling behind are counted and
    /// skipped. `None` once the broadcast is gone.
    pub async fn recv(&mut self) -> Option<Arc<RequestSummary>> {
        loop {
            match self.rx.recv().await {
                Ok(s) => return Some(s),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    self.stats.lagged.fetch_add(n, Ordering::Relaxed);
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// The in-line sinks, each called once per summary: the audit log, metrics,
/// accounting and rule hits, the per-rule cost account, the slowest requests, then
/// the access log. `site` is the request's site
/// (its metric counters).
pub(crate) fn consume(
    shared: &crate::exchange::Shared,
    site: &crate::sites::Site,
    s: &RequestSummary,
) {
    audit_log(shared, s);
    metrics(shared, site, s);
    shared.accounting.record(
        s.client.ip(),
        s.upstream
            .as_ref()
            .map_or(crate::accounting::NO_ROUTE, |(pool, _)| pool),
        s.bytes_in,
        s.bytes_out,
        s.blocked(),
    );
    if let Some(user) = &s.user {
        shared
            .metrics
            .forward_user(user, s.bytes_in, s.bytes_out, s.blocked());
    }
    shared.rule_costs.record(&s.rule_times);
    shared.slow.offer(s);
    if let Some(o) = shared.otlp() {
        o.offer_span(s);
    }
    access_log(shared, s);
}

/// The audit record, when there is one.
fn audit_log(shared: &crate::exchange::Shared, s: &RequestSummary) {
    use crate::logs::LogKind;
    let Some(rec) = &s.audit else {
        return;
    };
    match &rec.concurrent {
        Some(c) => shared.logs.send_audit_file(
            c.path.clone().into(),
            rec.text.clone(),
            c.index_line.clone(),
        ),
        // A JSON record is one line; a native one is several by design.
        None if rec.text.starts_with('{') => shared.logs.send(
            LogKind::Audit,
            crate::logs::one_line(&rec.text).into_owned(),
        ),
        None => shared.logs.send(LogKind::Audit, rec.text.clone()),
    }
}

/// Request counters, timers, the site's counters and rule hits.
// Not inlined: bench/instrumentation.py reads its cost by name.
#[inline(never)]
fn metrics(shared: &crate::exchange::Shared, site: &crate::sites::Site, s: &RequestSummary) {
    let m = &shared.metrics;
    m.request(s.status, s.action);
    let hits = s.rule_ids();
    m.rule_hits(&hits);
    let timers = [
        Timer::Phase1,
        Timer::Phase2,
        Timer::Phase3,
        Timer::Phase4,
        Timer::Phase5,
    ];
    for (t, us) in timers.iter().zip(s.phase_us) {
        if let Some(us) = us {
            m.observe(*t, us);
        }
    }
    if let Some(u) = &s.up_timing {
        if !u.reused {
            m.observe(Timer::UpstreamConnect, u.connect_us);
        }
        m.observe(Timer::UpstreamFirstByte, u.first_byte_us);
    }
    if let Some(us) = s.transfer_us {
        m.observe(Timer::UpstreamTransfer, us);
    }
    m.observe(Timer::Total, s.total_us);
    m.site_request(site.counters(m), s.status, s.action, s.total_us, s.waf_us());
}

/// The access-log line (JSON), when the access log is on.
fn access_log(shared: &crate::exchange::Shared, s: &RequestSummary) {
    use crate::logs::{LogKind, rfc3339_micros};
    if !shared.logs.enabled(LogKind::Access) {
        return;
    }
    let rules = s.rule_ids();
    let line = AccessLine {
        ts_us: s.start_us,
        time: &rfc3339_micros(s.start_us),
        unique_id: &s.unique_id,
        client: &s.client.to_string(),
        peer: &s.peer.to_string(),
        server: &s.server.to_string(),
        scheme: if s.tls { "https" } else { "http" },
        protocol: &s.protocol,
        method: &s.method,
        uri: &s.uri,
        host: s.host.as_deref(),
        user: s.user.as_deref(),
        site: &s.site,
        status: s.status,
        bytes_in: s.bytes_in,
        bytes_out: s.bytes_out,
        total_us: s.total_us,
        waf_us: s.waf_us(),
        waf_cpu_us: s.waf_cpu_us,
        phase1_us: s.phase_us[0],
        phase2_us: s.phase_us[1],
        phase3_us: s.phase_us[2],
        phase4_us: s.phase_us[3],
        phase5_us: s.phase_us[4],
        upstream: s.upstream.as_ref().map(|u| &*u.0),
        upstream_addr: s.upstream.as_ref().and_then(|u| u.1.as_deref()),
        upstream_reused: s.up_timing.map(|u| u.reused),
        upstream_connect_us: s.up_timing.map(|u| u.connect_us),
        upstream_first_byte_us: s.up_timing.map(|u| u.first_byte_us),
        upstream_transfer_us: s.transfer_us,
        rules: &rules,
        anomaly_inbound: s.anomaly.0,
        anomaly_outbound: s.anomaly.1,
        action: s.action.label(),
        rule_id: s.rule_id,
        error: s.error.as_deref(),
    };
    if let Ok(json) = serde_json::to_string(&line) {
        shared.logs.send(LogKind::Access, json);
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
    /// The forward proxy's authenticated user, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    /// The request's site (`[[site]]`), or `default`.
    site: &'a str,
    status: u16,
    bytes_in: u64,
    bytes_out: u64,
    total_us: u64,
    waf_us: u64,
    waf_cpu_us: Option<u64>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_characters_whole() {
        assert_eq!(cut("abcdef".into(), 3), "abc");
        assert_eq!(cut("aé".into(), 2), "a");
        assert_eq!(cut("ab".into(), 5), "ab");
    }
}
