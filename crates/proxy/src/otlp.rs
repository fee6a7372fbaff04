//! OpenTelemetry export (`[otlp]`): one span per request, and the log lines,
//! sent to an OTLP/HTTP receiver (`/v1/traces`, `/v1/logs`, JSON encoding).
//!
//! - **Spans** are built from the request summary once the request is over: the
//!   WAF's decision (`palisade.action`, the deciding rule), the matched rule ids,
//!   the anomaly scores and each phase's time are attributes, next to the HTTP
//!   semantic conventions (method, path, status, client, server address).
//! - **W3C trace context**: a request's `traceparent` (version `00`) makes the
//!   proxy's span a child of the caller's, in the caller's trace; without one, a
//!   new trace starts. The upstream receives a `traceparent` naming the proxy's
//!   span as its parent (and `tracestate` as sent).
//! - **Transport**: `http://` or `https://` (rustls with ring; the receiver's
//!   certificate checked against `tls_ca_file` or the system's roots, by the
//!   endpoint's host name). One HTTP/1.1 connection is kept open between exports
//!   and made again when the receiver closed it or it failed.
//! - **Never on the request path**: spans and lines go into one bounded queue
//!   (full: dropped and counted); one thread sends batches every `interval`, or
//!   sooner when a batch is full. When the receiver is away or refuses (5xx, 429),
//!   the batch stays queued and the thread retries with a growing back-off (0.5 s
//!   to 5 s); what was queued is sent when it is back. A batch whose spans went
//!   through but whose records did not is sent again whole, so a receiver may see
//!   a span twice after an outage (OTLP export is at least once).
//!
//! The JSON encoding of OTLP is written with `serde_json` here rather than
//! through the OpenTelemetry SDK crates: the spans are made after the fact from
//! the summary (not from live instrumentation), and the queue, its bounds and the
//! retries have to be this module's own anyway.

use crate::config::OtlpSection;
use crate::json_out;
use crate::logs::LogKind;
use crate::metrics::{Collector, Exposition};
use crate::shipqueue::{Backoff, ShipQueue};
use crate::summary::RequestSummary;
use bytes::Bytes;
use http_body_util::Full;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The W3C trace context of a request: the trace, the proxy's own span in it,
/// and the caller's span when the request carried a `traceparent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace id.
    pub trace_id: [u8; 16],
    /// The proxy's span id.
    pub span_id: [u8; 8],
    /// The caller's span id, from its `traceparent`.
    pub parent: Option<[u8; 8]>,
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

/// Reads `N` bytes from lowercase hex.
fn hex_bytes<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, pair) in s.chunks(2).enumerate() {
        let d = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        out[i] = d(pair[0])? << 4 | d(pair[1])?;
    }
    Some(out)
}

/// Appends `b` in lowercase hex to `out` (a table walk: this runs several times
/// per request, where `format!` per byte cost thousands of instructions).
fn push_hex(out: &mut String, b: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(2 * b.len());
    for &x in b {
        out.push(char::from(DIGITS[usize::from(x >> 4)]));
        out.push(char::from(DIGITS[usize::from(x & 15)]));
    }
}

#[cfg(test)]
fn hex(b: &[u8]) -> String {
    let mut out = String::new();
    push_hex(&mut out, b);
    out
}

/// The trace id, parent span id and flags of a `traceparent` value
/// (`00-TRACE-PARENT-FLAGS`); `None` when it is not one (an all-zero id, upper
/// case hex, version `ff`, or a version-00 value with more fields).
pub fn parse_traceparent(v: &[u8]) -> Option<([u8; 16], [u8; 8], u8)> {
    let v = v.trim_ascii();
    let mut parts = v.split(|&c| c == b'-');
    let version = hex_bytes::<1>(parts.next()?)?[0];
    let trace = hex_bytes::<16>(parts.next()?)?;
    let parent = hex_bytes::<8>(parts.next()?)?;
    let flags = hex_bytes::<1>(parts.next()?)?[0];
    let more = parts.next().is_some();
    if version == 0xff || (version == 0 && more) || trace == [0; 16] || parent == [0; 8] {
        return None;
    }
    Some((trace, parent, flags))
}

impl TraceContext {
    /// The context of a request carrying `traceparent` (or none): the caller's
    /// trace with a new span, or a new trace.
    pub fn for_request(traceparent: Option<&[u8]>) -> TraceContext {
        let mut r = [0u8; 24];
        // Without randomness (no getrandom), the ids still differ per request:
        // the clock's nanoseconds and the thread-local counter fill them.
        if getrandom::fill(&mut r).is_err() {
            let n = crate::logs::now_unix_micros().to_le_bytes();
            r[..8].copy_from_slice(&n);
            r[16..].copy_from_slice(&n);
        }
        let span_id: [u8; 8] = r[16..].try_into().expect("8 bytes");
        match traceparent.and_then(parse_traceparent) {
            Some((trace_id, parent, flags)) => TraceContext {
                trace_id,
                span_id,
                parent: Some(parent),
                flags,
            },
            None => TraceContext {
                trace_id: r[..16].try_into().expect("16 bytes"),
                span_id,
                parent: None,
                flags: 1,
            },
        }
    }

    /// The `traceparent` the upstream receives: this trace, the proxy's span.
    pub fn traceparent(&self) -> String {
        let mut out = String::with_capacity(55);
        out.push_str("00-");
        push_hex(&mut out, &self.trace_id);
        out.push('-');
        push_hex(&mut out, &self.span_id);
        out.push('-');
        push_hex(&mut out, &[self.flags]);
        out
    }
}

/// What one export sends: a span already encoded (OTLP JSON), or a log line
/// with its time. Shared, so the sender's look at the queue copies no text.
#[derive(Debug, Clone)]
enum Item {
    Span(Arc<str>),
    Log(LogKind, Arc<str>, i64),
}

/// The exporter's counters.
#[derive(Debug, Default)]
pub struct OtlpStats {
    /// Spans the receiver accepted.
    pub spans: AtomicU64,
    /// Log records the receiver accepted.
    pub logs: AtomicU64,
    /// Exports that failed (no connection, a failed TLS handshake, an error
    /// status).
    pub errors: AtomicU64,
    /// Connections made to the receiver.
    pub connections: AtomicU64,
    /// Whether the last export went through.
    pub up: AtomicBool,
}

/// The OTLP exporter: its queue, its thread and its counters.
#[derive(Debug)]
pub struct Exporter {
    cfg: OtlpSection,
    kinds: [bool; 4],
    queue: Arc<ShipQueue<Item>>,
    stats: Arc<OtlpStats>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Why the exporter could not start.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The endpoint is not `http://HOST:PORT` or `https://HOST:PORT`.
    #[error("[otlp] endpoint {endpoint:?}: {reason}")]
    Endpoint {
        /// The endpoint as configured.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The TLS client of an https endpoint could not be set up.
    #[error("[otlp] tls_ca_file {0}")]
    Tls(crate::tls::client::ClientTlsError),
    /// The thread could not start.
    #[error("[otlp]: starting its thread: {0}")]
    Thread(std::io::Error),
}

/// Where exports go: the connection to the receiver and the endpoint's path
/// prefix (without a trailing `/`).
#[derive(Debug)]
struct Endpoint {
    conn: crate::http_client::Connection,
    prefix: String,
}

impl Endpoint {
    /// The receiver of `endpoint` (`http://` or `https://`, checked at load), with
    /// its TLS client for https.
    fn new(endpoint: &str, tls_ca_file: Option<&std::path::Path>) -> Result<Endpoint, OtlpError> {
        let bad = |reason: &str| OtlpError::Endpoint {
            endpoint: endpoint.to_owned(),
            reason: reason.to_owned(),
        };
        let uri: http::Uri = endpoint.parse().map_err(|e| bad(&format!("{e}")))?;
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("no host"))?;
        let target = match uri.scheme_str() {
            Some("http") => crate::http_client::Target::plain(host, uri.port_u16().unwrap_or(80)),
            Some("https") => {
                let mut cfg =
                    crate::tls::client::client_config(tls_ca_file).map_err(OtlpError::Tls)?;
                cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
                crate::http_client::Target::tls(host, uri.port_u16().unwrap_or(443), Arc::new(cfg))
                    .map_err(|e| bad(&e.to_string()))?
            }
            _ => return Err(bad("expected http://HOST:PORT or https://HOST:PORT")),
        };
        Ok(Endpoint {
            conn: crate::http_client::Connection::new(target),
            prefix: uri.path().trim_end_matches('/').to_owned(),
        })
    }
}

impl Exporter {
    /// Starts the exporter's thread.
    pub fn start(cfg: &OtlpSection) -> Result<Arc<Exporter>, OtlpError> {
        let queue = Arc::new(ShipQueue::new(cfg.queue));
        let stats = Arc::new(OtlpStats::default());
        let endpoint = Endpoint::new(&cfg.endpoint, cfg.tls_ca_file.as_deref())?;
        let sender = Sender {
            endpoint,
            cfg: cfg.clone(),
            resource: resource(&cfg.service_name),
            queue: queue.clone(),
            stats: stats.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("palisade-otlp".into())
            .spawn(move || sender.run())
            .map_err(OtlpError::Thread)?;
        Ok(Arc::new(Exporter {
            kinds: LogKind::ALL.map(|k| cfg.logs.iter().any(|l| l == k.label())),
            cfg: cfg.clone(),
            queue,
            stats,
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// Whether spans are exported (`[otlp] traces`).
    pub fn traces(&self) -> bool {
        self.cfg.traces
    }

    fn push(&self, item: Item) {
        self.queue.push(item, self.cfg.batch);
    }

    /// Queues the span of a finished request; never waits.
    pub fn offer_span(&self, s: &RequestSummary) {
        if let Some(t) = &s.trace {
            let mut json = String::with_capacity(2048 + 2 * s.uri.len());
            encode_span(&mut json, s, t);
            self.push(Item::Span(json.into()));
        }
    }

    /// Sends what is queued (within a few seconds) and stops the thread.
    pub fn finish(&self) {
        self.queue.finish();
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

impl crate::logship::LineSink for Exporter {
    fn wants(&self, kind: LogKind) -> bool {
        self.kinds[kind as usize]
    }

    fn offer(&self, kind: LogKind, line: &str) {
        if self.kinds[kind as usize] {
            self.push(Item::Log(kind, line.into(), crate::logs::now_unix_micros()));
        }
    }
}

impl Collector for Exporter {
    fn collect(&self, out: &mut Exposition) {
        let queued = self.queue.len();
        let s = &self.stats;
        out.counter(
            "palisade_otlp_spans_exported_total",
            "Spans the OTLP receiver accepted.",
            s.spans.load(Ordering::Relaxed) as f64,
        );
        out.counter(
            "palisade_otlp_logs_exported_total",
            "Log records the OTLP receiver accepted.",
            s.logs.load(Ordering::Relaxed) as f64,
        );
        out.counter(
            "palisade_otlp_dropped_total",
            "Spans and log records dropped because the OTLP queue was full.",
            self.queue.dropped() as f64,
        );
        out.counter(
            "palisade_otlp_errors_total",
            "OTLP exports that failed (no connection, a failed TLS handshake, or an error status); their batch stays queued.",
            s.errors.load(Ordering::Relaxed) as f64,
        );
        out.counter(
            "palisade_otlp_connections_total",
            "Connections the OTLP exporter made to its receiver (one is kept between exports).",
            s.connections.load(Ordering::Relaxed) as f64,
        );
        out.gauge(
            "palisade_otlp_up",
            "1 when the last OTLP export went through.",
            f64::from(u8::from(s.up.load(Ordering::Relaxed))),
        );
        out.gauge(
            "palisade_otlp_queued",
            "Spans and log records waiting to be exported.",
            queued as f64,
        );
    }
}

/// The attributes of one span or record, written as OTLP's JSON encoding writes
/// `KeyValue`s; the keys are fixed names that need no escape.
struct Attributes<'o> {
    out: &'o mut String,
    first: bool,
}

impl<'o> Attributes<'o> {
    /// Opens the `attributes` array.
    fn open(out: &'o mut String) -> Attributes<'o> {
        out.push_str("\"attributes\":[");
        Attributes { out, first: true }
    }

    fn key(&mut self, key: &str) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        self.out.push_str("{\"key\":\"");
        self.out.push_str(key);
        self.out.push_str("\",\"value\":{");
    }

    fn str(&mut self, key: &str, v: &str) {
        self.key(key);
        self.out.push_str("\"stringValue\":");
        json_out::push_str(self.out, v);
        self.out.push_str("}}");
    }

    fn int(&mut self, key: &str, v: i64) {
        self.key(key);
        self.out.push_str("\"intValue\":");
        json_out::push_int_str(self.out, v);
        self.out.push_str("}}");
    }

    fn bool(&mut self, key: &str, v: bool) {
        self.key(key);
        self.out.push_str(if v {
            "\"boolValue\":true}}"
        } else {
            "\"boolValue\":false}}"
        });
    }

    fn ints(&mut self, key: &str, v: impl Iterator<Item = i64>) {
        self.key(key);
        self.out.push_str("\"arrayValue\":{\"values\":[");
        for (n, x) in v.enumerate() {
            if n > 0 {
                self.out.push(',');
            }
            self.out.push_str("{\"intValue\":");
            json_out::push_int_str(self.out, x);
            self.out.push('}');
        }
        self.out.push_str("]}}}");
    }

    /// Closes the array.
    fn close(self) {
        self.out.push(']');
    }
}

/// The resource every export names, encoded once.
fn resource(service: &str) -> String {
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let mut out = String::from("{");
    let mut a = Attributes::open(&mut out);
    a.str("service.name", service);
    a.str("service.version", env!("CARGO_PKG_VERSION"));
    a.str("host.name", &host);
    a.close();
    out.push('}');
    out
}

/// The attribute names of the phase times, phase 1 first.
const PHASE_KEYS: [&str; 5] = [
    "palisade.phase1.us",
    "palisade.phase2.us",
    "palisade.phase3.us",
    "palisade.phase4.us",
    "palisade.phase5.us",
];

/// Appends the span of one request, as OTLP's JSON encoding writes a span.
fn encode_span(out: &mut String, r: &RequestSummary, t: &TraceContext) {
    let (path, query) = r.uri.split_once('?').unwrap_or((&r.uri, ""));
    let start = r.start_us.saturating_mul(1000);
    let end = start.saturating_add(
        i64::try_from(r.total_us)
            .unwrap_or(i64::MAX)
            .saturating_mul(1000),
    );
    out.push_str("{\"traceId\":\"");
    push_hex(out, &t.trace_id);
    out.push_str("\",\"spanId\":\"");
    push_hex(out, &t.span_id);
    if let Some(p) = &t.parent {
        out.push_str("\",\"parentSpanId\":\"");
        push_hex(out, p);
    }
    out.push_str("\",\"name\":");
    json_out::push_str(out, &r.method);
    out.push_str(",\"kind\":2,\"startTimeUnixNano\":");
    json_out::push_int_str(out, start);
    out.push_str(",\"endTimeUnixNano\":");
    json_out::push_int_str(out, end);
    out.push(',');
    let mut a = Attributes::open(out);
    a.str("http.request.method", &r.method);
    a.str("url.path", path);
    a.int("http.response.status_code", i64::from(r.status));
    let mut ip = String::with_capacity(40);
    let _ = std::fmt::Write::write_fmt(&mut ip, format_args!("{}", r.client.ip()));
    a.str("client.address", &ip);
    a.str(
        "network.protocol.version",
        r.protocol.trim_start_matches("HTTP/"),
    );
    a.str("palisade.unique_id", &r.unique_id);
    a.str("palisade.site", &r.site);
    a.str("palisade.action", r.action.label());
    a.bool("palisade.blocked", r.blocked());
    a.ints(
        "palisade.rule_ids",
        r.matches.iter().filter_map(|m| m.rule_id),
    );
    a.int("palisade.anomaly_score.inbound", r.anomaly.0);
    a.int("palisade.anomaly_score.outbound", r.anomaly.1);
    if !query.is_empty() {
        a.str("url.query", query);
    }
    if let Some(h) = &r.host {
        a.str("server.address", h);
    }
    if let Some(id) = r.rule_id {
        a.int("palisade.rule_id", id);
    }
    for (key, us) in PHASE_KEYS.iter().zip(r.phase_us) {
        if let Some(us) = us {
            a.int(key, i64::try_from(us).unwrap_or(i64::MAX));
        }
    }
    if let Some((pool, server)) = &r.upstream {
        a.str("palisade.upstream.pool", pool);
        if let Some(server) = server {
            a.str("server.upstream", server);
        }
    }
    a.close();
    // Status: an error for answers the proxy or the upstream failed (5xx); a
    // refusal by the rules is the WAF working, not an error.
    if r.status >= 500 {
        out.push_str(",\"status\":{\"code\":2,\"message\":");
        json_out::push_str(out, r.error.as_deref().unwrap_or_default());
        out.push('}');
    } else {
        out.push_str(",\"status\":{}");
    }
    out.push_str(",\"flags\":");
    out.push_str(itoa::Buffer::new().format(t.flags));
    out.push('}');
}

/// Appends one log record, as OTLP's JSON encoding writes it: the line is its
/// body, the log's name an attribute.
fn encode_log_record(out: &mut String, kind: LogKind, line: &str, unix_micros: i64) {
    let (number, text) = match kind {
        LogKind::Error => ("13", "WARN"),
        LogKind::Audit => ("10", "INFO2"),
        LogKind::Access => ("9", "INFO"),
        LogKind::Debug => ("5", "DEBUG"),
    };
    out.push_str("{\"timeUnixNano\":");
    json_out::push_int_str(out, unix_micros.saturating_mul(1000));
    out.push_str(",\"severityNumber\":");
    out.push_str(number);
    out.push_str(",\"severityText\":\"");
    out.push_str(text);
    out.push_str("\",\"body\":{\"stringValue\":");
    json_out::push_str(out, line);
    out.push_str("},");
    let mut a = Attributes::open(out);
    a.str("log.name", kind.label());
    a.close();
    out.push('}');
}

/// One export's body: `resource` and the encoded `items` in OTLP's envelope for
/// `signal` (`Spans` or `Logs`).
fn envelope(signal: &str, resource: &str, items: &[impl AsRef<str>]) -> String {
    let records = if signal == "Spans" {
        "spans"
    } else {
        "logRecords"
    };
    let mut out =
        String::with_capacity(items.iter().map(|i| i.as_ref().len() + 1).sum::<usize>() + 256);
    out.push_str(&format!(
        "{{\"resource{signal}\":[{{\"resource\":{resource},\"scope{signal}\":[{{\"scope\":{{\"name\":\"palisade\"}},\"{records}\":["
    ));
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(item.as_ref());
    }
    out.push_str("]}]}]}");
    out
}

/// The exporter's thread.
struct Sender {
    /// The receiver, and the connection kept to it.
    endpoint: Endpoint,
    cfg: OtlpSection,
    /// The resource, encoded.
    resource: String,
    queue: Arc<ShipQueue<Item>>,
    stats: Arc<OtlpStats>,
}

impl Sender {
    fn run(mut self) {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!("[otlp]: no runtime for the exporter: {e}");
                return;
            }
        };
        let mut backoff = Backoff::new();
        loop {
            // A full batch, or what came within the interval, or the end.
            let (batch, finishing) =
                self.queue
                    .front(self.cfg.batch, self.cfg.batch, Some(self.cfg.interval));
            if batch.is_empty() {
                if finishing {
                    return;
                }
                continue;
            }
            let mut spans: Vec<Arc<str>> = Vec::new();
            let mut logs: Vec<String> = Vec::new();
            for item in &batch {
                match item {
                    Item::Span(json) => spans.push(json.clone()),
                    Item::Log(k, l, t) => {
                        let mut json = String::with_capacity(l.len() + l.len() / 4 + 256);
                        encode_log_record(&mut json, *k, l, *t);
                        logs.push(json);
                    }
                }
            }
            let sent = rt.block_on(async {
                if !spans.is_empty() {
                    let body = envelope("Spans", &self.resource, &spans);
                    self.post("/v1/traces", body).await?;
                }
                if !logs.is_empty() {
                    let body = envelope("Logs", &self.resource, &logs);
                    self.post("/v1/logs", body).await?;
                }
                Ok::<_, String>(())
            });
            match sent {
                Ok(()) => {
                    backoff.reset();
                    self.stats
                        .spans
                        .fetch_add(spans.len() as u64, Ordering::Relaxed);
                    self.stats
                        .logs
                        .fetch_add(logs.len() as u64, Ordering::Relaxed);
                    if !self.stats.up.swap(true, Ordering::Relaxed) {
                        tracing::info!("[otlp] {}: exporting", self.cfg.endpoint);
                    }
                    self.queue.remove_front(batch.len());
                }
                Err(e) => {
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    if self.stats.up.swap(false, Ordering::Relaxed) || backoff.is_first() {
                        tracing::warn!(
                            "[otlp] {}: {e}; spans and records stay queued (at most {}) and are sent again",
                            self.cfg.endpoint,
                            self.cfg.queue
                        );
                    }
                    if finishing {
                        self.queue.drop_all();
                        return;
                    }
                    self.queue.pause(backoff.next_wait());
                }
            }
        }
    }

    /// POSTs one JSON export to `path` under the endpoint, on the kept
    /// connection; an error unless the receiver answers 2xx.
    async fn post(&mut self, path: &str, body: String) -> Result<(), String> {
        let target = format!("{}{path}", self.endpoint.prefix);
        let req = http::Request::post(target.as_str())
            .header(http::header::HOST, self.endpoint.conn.target().authority())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("{path}: {e}"))?;
        let conn = &mut self.endpoint.conn;
        let sent = tokio::time::timeout(self.cfg.timeout, conn.send(req, 64 * 1024)).await;
        self.stats
            .connections
            .store(conn.connects(), Ordering::Relaxed);
        let (status, text) = match sent {
            Ok(answer) => answer.map_err(|e| e.to_string())?,
            Err(_) => {
                // Halfway through an exchange: the connection cannot be used again.
                conn.close();
                return Err(format!("{path}: no answer within {:?}", self.cfg.timeout));
            }
        };
        if status.is_success() {
            Ok(())
        } else {
            let text = text.unwrap_or_default();
            Err(format!(
                "{path}: {status}: {}",
                crate::http_client::body_start(&text)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_records_are_json() {
        let mut r = RequestSummary::for_test("/a \"quoted\"?q=\\x");
        r.status = 502;
        r.error = Some("upstream said \"no\"".into());
        r.phase_us = [Some(10), Some(20), None, None, Some(5)];
        let t = TraceContext::for_request(Some(
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ));
        let mut out = String::new();
        encode_span(&mut out, &r, &t);
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}: {e}"));
        assert_eq!(v["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(v["parentSpanId"], "00f067aa0ba902b7");
        assert_eq!(v["status"]["code"], 2);
        assert_eq!(v["status"]["message"], "upstream said \"no\"");
        let attr = |k: &str| {
            v["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == k)
                .map(|a| a["value"].clone())
        };
        assert_eq!(attr("url.path").unwrap()["stringValue"], "/a \"quoted\"");
        assert_eq!(attr("url.query").unwrap()["stringValue"], "q=\\x");
        assert_eq!(attr("palisade.phase2.us").unwrap()["intValue"], "20");
        assert_eq!(attr("palisade.phase3.us"), None);
        assert_eq!(
            attr("http.response.status_code").unwrap()["intValue"],
            "502"
        );
        let mut out = String::new();
        encode_log_record(&mut out, LogKind::Access, "{\"a\":\"b\nc\"}", 7);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["body"]["stringValue"], "{\"a\":\"b\nc\"}");
        assert_eq!(v["timeUnixNano"], "7000");
        assert_eq!(v["attributes"][0]["value"]["stringValue"], "access");
        let res: serde_json::Value = serde_json::from_str(&resource("svc")).unwrap();
        assert_eq!(res["attributes"][0]["value"]["stringValue"], "svc");
    }

    #[test]
    fn traceparent_values_parse_or_are_refused() {
        let v = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let (t, p, f) = parse_traceparent(v).unwrap();
        assert_eq!(hex(&t), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&p), "00f067aa0ba902b7");
        assert_eq!(f, 1);
        for bad in [
            &b"00-00000000000000000000000000000000-00f067aa0ba902b7-01"[..],
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            b"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            b"garbage",
        ] {
            assert_eq!(
                parse_traceparent(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // A later version may carry more fields.
        assert!(
            parse_traceparent(b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra")
                .is_some()
        );
    }

    #[test]
    fn a_request_joins_its_callers_trace_or_starts_one() {
        let v = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        let c = TraceContext::for_request(Some(v));
        assert_eq!(hex(&c.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            c.parent.map(|p| hex(&p)).as_deref(),
            Some("00f067aa0ba902b7")
        );
        assert_eq!(c.flags, 0);
        let up = c.traceparent();
        assert!(
            up.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
            "{up}"
        );
        assert!(
            up.ends_with("-00") && !up.contains("00f067aa0ba902b7"),
            "{up}"
        );
        let (_, p, _) = parse_traceparent(up.as_bytes()).unwrap();
        assert_eq!(p, c.span_id);
        let fresh = TraceContext::for_request(None);
        assert_eq!((fresh.parent, fresh.flags), (None, 1));
        assert_ne!(fresh.trace_id, TraceContext::for_request(None).trace_id);
    }
}
