//! One request's path through the proxy, shared by the HTTP/1 and HTTP/2 front ends:
//! engine phases, request body buffering, the upstream exchange, response
//! inspection, and the record kept for logs and metrics.
//!
//! The front end feeds an [`Exchange`] (head, then body chunks) and gets back a
//! [`Reply`]. The reply's body carries the transaction: when the body has been sent
//! (or dropped), phase 5 runs and the access, error and audit lines are queued.

use crate::config::{LimitsConfig, ServerConfig};
use crate::logs::{LogKind, LogSender, Written, one_line, rfc3339_micros};
use crate::metrics::{Action, Metrics, Timer};
use crate::upstream::{UpstreamBody, UpstreamRequest, UpstreamTiming, Upstreams};
use crate::waf::{BodyFeed, Verdict, VerdictKind, Waf, WafTx};
use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Method, StatusCode, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Instant;

/// Everything requests share: rules, pools, logs, metrics, limits.
#[derive(Debug)]
pub struct Shared {
    /// The rules in force; SIGHUP swaps in a newly loaded set.
    waf: RwLock<Arc<Waf>>,
    /// Pools and routes.
    pub upstreams: Upstreams,
    /// The log channel.
    pub logs: LogSender,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Request limits.
    pub limits: LimitsConfig,
    /// Timeouts.
    pub server: ServerConfig,
    /// When the process started.
    pub started: Instant,
    id_seed: u64,
    id_counter: AtomicU64,
}

impl Shared {
    /// Bundles the shared state.
    pub fn new(
        waf: Arc<Waf>,
        upstreams: Upstreams,
        logs: LogSender,
        metrics: Arc<Metrics>,
        limits: LimitsConfig,
        server: ServerConfig,
    ) -> Self {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        Shared {
            waf: RwLock::new(waf),
            upstreams,
            logs,
            metrics,
            limits,
            server,
            started: Instant::now(),
            id_seed: h.finish(),
            id_counter: AtomicU64::new(0),
        }
    }

    /// The rules in force now.
    pub fn waf(&self) -> Arc<Waf> {
        self.waf.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Puts a newly loaded rule set in force; requests already started keep theirs.
    pub fn replace_waf(&self, waf: Arc<Waf>) {
        *self.waf.write().unwrap_or_else(|e| e.into_inner()) = waf;
    }

    /// A new transaction id: 20 hex digits from the start time and a per-process
    /// random counter, unique across requests and restarts.
    fn unique_id(&self, now_us: i64) -> String {
        let n = self.id_counter.fetch_add(1, Ordering::Relaxed);
        let tail = self
            .id_seed
            .wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            & 0xFFF_FFFF;
        format!("{:013x}{tail:07x}", now_us & 0x1F_FFFF_FFFF_FFFF)
    }
}

/// The connection a request arrived on.
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo {
    /// The client's address.
    pub peer: SocketAddr,
    /// The local address.
    pub local: SocketAddr,
    /// True on TLS listeners.
    pub tls: bool,
    /// The client's address as text, made once per connection: X-Forwarded-For is
    /// built from it on every request.
    pub peer_text: IpText,
}

/// An IP address as text (IPv4-mapped IPv6 addresses shown as IPv4), held inline so
/// that [`ConnInfo`] stays `Copy`.
#[derive(Clone, Copy)]
pub struct IpText {
    buf: [u8; 64],
    len: u8,
}

impl IpText {
    /// Formats `ip` in its canonical form.
    pub fn new(ip: std::net::IpAddr) -> IpText {
        use std::io::Write;
        let mut buf = [0u8; 64];
        let mut w: &mut [u8] = &mut buf;
        // The longest IPv6 text is 45 bytes, so the buffer cannot fill up.
        let _ = write!(w, "{}", ip.to_canonical());
        let len = 64 - w.len();
        IpText {
            buf,
            len: len as u8,
        }
    }

    /// The text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for IpText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.as_bytes()))
    }
}

/// What a finished request looked like, kept for the logs.
struct Record {
    shared: Arc<Shared>,
    /// The engine transaction; `None` when the rule set in force cannot act on a
    /// request ([`Waf::is_empty`]): then no phase runs and nothing is timed.
    tx: Option<WafTx>,
    /// The transaction id, made when first needed (at once when the engine runs).
    unique_id: Option<String>,
    conn: ConnInfo,
    start: Instant,
    start_us: i64,
    method: Bytes,
    uri: Bytes,
    protocol: Bytes,
    host: Option<Bytes>,
    phase_us: [Option<u64>; 5],
    upstream: Option<(Arc<str>, Option<Arc<str>>)>,
    up_timing: Option<UpstreamTiming>,
    transfer_us: Option<u64>,
    /// Upstream transfer time accumulated while the proxy waited for body data.
    transfer_acc: u64,
    /// When streaming of the rest of the upstream body began.
    transfer_start: Option<Instant>,
    bytes_in: u64,
    bytes_out: u64,
    status: u16,
    action: Action,
    rule_id: Option<i64>,
    error: Option<String>,
    finished: bool,
    /// With `logs.error_log_before_response`: the acknowledgement of the last
    /// error-log line queued for this request, awaited before the response is sent.
    logged: Option<Written>,
}

fn micros_since(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
}

impl Record {
    /// Runs and times a phase; without a transaction, returns `T::default()` (no
    /// verdict) and records the phase as taking no time, without reading a clock
    /// (logs and metrics keep their shape).
    fn time_phase<T: Default>(&mut self, phase: usize, f: impl FnOnce(&mut WafTx) -> T) -> T {
        let Some(tx) = self.tx.as_mut() else {
            self.phase_us[phase - 1].get_or_insert(0);
            return T::default();
        };
        let t0 = Instant::now();
        let out = f(tx);
        let us = micros_since(t0);
        let slot = &mut self.phase_us[phase - 1];
        *slot = Some(slot.unwrap_or(0) + us);
        self.emit_match_lines();
        out
    }

    /// The transaction id (made now if it was not yet).
    fn unique_id(&mut self) -> &str {
        let (shared, start_us) = (&self.shared, self.start_us);
        self.unique_id
            .get_or_insert_with(|| shared.unique_id(start_us))
    }

    /// Queues the engine's match lines so far. Called after every phase, so that the
    /// lines of a request reach the error log before its response is sent (tools
    /// that tail the log rely on that order), as ModSecurity writes them.
    fn emit_match_lines(&mut self) {
        let Some(tx) = self.tx.as_mut() else {
            return;
        };
        let lines = tx.take_log_lines();
        if lines.is_empty() {
            return;
        }
        let now = rfc3339_micros(crate::logs::now_unix_micros());
        let client_ip = self.conn.peer.ip();
        let last = lines.len() - 1;
        for (i, line) in lines.into_iter().enumerate() {
            // Only the batch's last line needs an acknowledgement: the writer keeps
            // the order, so it covers the others.
            let written = self.shared.logs.send_error(
                format!("{now} [error] [client {client_ip}] {}", one_line(&line)),
                i == last,
            );
            if written.is_some() {
                self.logged = written;
            }
        }
    }

    fn error_line(&mut self, message: &str) {
        self.unique_id();
        let line = format!(
            "{} [error] [client {}] palisade: {} [uri \"{}\"] [unique_id \"{}\"]",
            rfc3339_micros(crate::logs::now_unix_micros()),
            self.conn.peer.ip(),
            one_line(message),
            one_line(&String::from_utf8_lossy(&self.uri)),
            self.unique_id.as_deref().unwrap_or_default()
        );
        if let Some(w) = self.shared.logs.send_error(line, true) {
            self.logged = Some(w);
        }
    }

    /// Phase 5, then the log lines and metrics. Runs once.
    fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        if let Some(t) = self.transfer_start.take() {
            let acc = self.transfer_acc;
            self.transfer_us.get_or_insert(acc + micros_since(t));
        }
        self.time_phase(5, |tx| tx.logging());
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
        if shared.logs.enabled(LogKind::Audit)
            && let Some(rec) = self.tx.as_mut().and_then(|t| t.audit_record())
        {
            shared
                .logs
                .send(LogKind::Audit, one_line(&rec).into_owned());
        }
        let (rules, (anomaly_in, anomaly_out)) = match self.tx.as_mut() {
            Some(tx) => (tx.matched_rule_ids(), tx.anomaly_scores()),
            None => (Vec::new(), (0, 0)),
        };
        let m = &shared.metrics;
        m.request(self.status, self.action);
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
        if shared.logs.enabled(LogKind::Access) {
            self.unique_id();
            let host = self.host.as_ref().map(|h| String::from_utf8_lossy(h));
            let waf_us: u64 = self.phase_us.iter().flatten().sum();
            let line = AccessLine {
                ts_us: self.start_us,
                time: &rfc3339_micros(self.start_us),
                unique_id: self.unique_id.as_deref().unwrap_or_default(),
                client: &self.conn.peer.to_string(),
                server: &self.conn.local.to_string(),
                scheme: if self.conn.tls { "https" } else { "http" },
                protocol: &String::from_utf8_lossy(&self.protocol),
                method: &String::from_utf8_lossy(&self.method),
                uri: &String::from_utf8_lossy(&self.uri),
                host: host.as_deref(),
                status: self.status,
                bytes_in: self.bytes_in,
                bytes_out: self.bytes_out,
                total_us,
                waf_us,
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

#[derive(serde::Serialize)]
struct AccessLine<'a> {
    ts_us: i64,
    time: &'a str,
    unique_id: &'a str,
    client: &'a str,
    server: &'a str,
    scheme: &'a str,
    protocol: &'a str,
    method: &'a str,
    uri: &'a str,
    host: Option<&'a str>,
    status: u16,
    bytes_in: u64,
    bytes_out: u64,
    total_us: u64,
    waf_us: u64,
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

/// Why a request body was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyStop {
    /// Over `limits.request_body_bytes`.
    TooLarge,
    /// Over the engine's `SecRequestBodyLimit` with `SecRequestBodyLimitAction Reject`.
    EngineLimit,
}

/// The request as the front end hands it over for forwarding.
#[derive(Debug)]
pub struct ForwardParts {
    /// Method.
    pub method: Method,
    /// Origin-form (or `*`, or authority-form for CONNECT) target.
    pub uri: Uri,
    /// Headers for the upstream: hop-by-hop removed, X-Forwarded-* added.
    pub headers: HeaderMap,
}

/// A request on its way through the proxy.
pub struct Exchange {
    rec: Box<Record>,
    body: Vec<Bytes>,
    body_len: usize,
    engine_body: bool,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("unique_id", &self.rec.unique_id)
            .finish()
    }
}

impl Exchange {
    /// Starts a transaction and gives the engine the request line and every header.
    /// `start`/`start_us` are when the request began to arrive; `host` the first
    /// Host header's value; `head_bytes` the head's size on the wire. When the rule
    /// set in force cannot act on a request ([`Waf::is_empty`]), no transaction is
    /// made at all.
    #[allow(clippy::too_many_arguments)]
    pub fn begin<'h>(
        shared: &Arc<Shared>,
        conn: ConnInfo,
        start: Instant,
        start_us: i64,
        method: Bytes,
        uri: Bytes,
        protocol: Bytes,
        host: Option<Bytes>,
        headers: impl Iterator<Item = (&'h [u8], &'h [u8])>,
        head_bytes: usize,
    ) -> Exchange {
        let waf = shared.waf();
        let (tx, unique_id) = if waf.is_empty() {
            (None, None)
        } else {
            let id = shared.unique_id(start_us);
            let mut tx = waf.transaction(conn.peer, conn.local, id.clone(), start_us);
            tx.request_line(&method, &uri, &protocol);
            for (n, v) in headers {
                tx.request_header(n, v);
            }
            (Some(tx), Some(id))
        };
        Exchange {
            rec: Box::new(Record {
                shared: shared.clone(),
                tx,
                unique_id,
                conn,
                start,
                start_us,
                method,
                uri,
                protocol,
                host,
                phase_us: [None; 5],
                upstream: None,
                up_timing: None,
                transfer_us: None,
                transfer_acc: 0,
                transfer_start: None,
                bytes_in: head_bytes as u64,
                bytes_out: 0,
                status: 0,
                action: Action::Pass,
                rule_id: None,
                error: None,
                finished: false,
                logged: None,
            }),
            body: Vec::new(),
            body_len: 0,
            engine_body: true,
        }
    }

    /// Runs phase 1.
    pub fn phase1(&mut self) -> Option<Verdict> {
        self.rec.time_phase(1, |tx| tx.request_headers_done())
    }

    /// Counts bytes received for the body (framing included).
    pub fn add_bytes_in(&mut self, n: u64) {
        self.rec.bytes_in += n;
    }

    /// Takes a piece of the request body: buffered for the upstream, and given to
    /// the engine while it wants it. On `Err`, answer with [`Exchange::reply_body_stop`].
    pub fn body_chunk(&mut self, chunk: Bytes) -> Result<(), BodyStop> {
        if chunk.is_empty() {
            return Ok(());
        }
        if self.body_len + chunk.len() > self.rec.shared.limits.request_body_bytes {
            return Err(BodyStop::TooLarge);
        }
        if self.engine_body
            && let Some(tx) = self.rec.tx.as_mut()
            && tx.wants_request_body()
        {
            let t0 = Instant::now();
            let r = tx.request_body(&chunk);
            let us = micros_since(t0);
            let slot = &mut self.rec.phase_us[1];
            *slot = Some(slot.unwrap_or(0) + us);
            match r {
                BodyFeed::Ok => {}
                BodyFeed::LimitPartial => self.engine_body = false,
                BodyFeed::LimitReject => return Err(BodyStop::EngineLimit),
            }
        }
        self.body_len += chunk.len();
        self.body.push(chunk);
        Ok(())
    }

    /// Runs phase 2 (call it even when there was no body).
    pub fn phase2(&mut self) -> Option<Verdict> {
        self.rec.time_phase(2, |tx| tx.request_body_done())
    }

    /// Builds the answer to a rule's verdict.
    pub fn reply_verdict(mut self, v: Verdict) -> Reply {
        self.rec.rule_id = v.rule_id;
        match v.kind {
            VerdictKind::Drop => {
                self.rec.status = 0;
                self.rec.action = Action::Drop;
                let mut r = Reply::new(self.rec, StatusCode::BAD_REQUEST, Bytes::new());
                r.drop = true;
                r.close = true;
                r
            }
            VerdictKind::Redirect(to) => {
                let status = if (300..400).contains(&v.status) {
                    v.status
                } else {
                    302
                };
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FOUND);
                self.rec.status = status.as_u16();
                self.rec.action = Action::Redirect;
                match HeaderValue::from_str(&to) {
                    Ok(loc) => {
                        let mut r = Reply::new(self.rec, status, Bytes::new());
                        r.headers.insert(header::LOCATION, loc);
                        r
                    }
                    // A location that cannot be a header value: deny instead.
                    Err(_) => {
                        self.rec.action = Action::Deny;
                        self.reply_status(StatusCode::FORBIDDEN, true)
                    }
                }
            }
            VerdictKind::Deny => {
                let status = StatusCode::from_u16(v.status)
                    .ok()
                    .filter(|s| !s.is_informational())
                    .unwrap_or(StatusCode::FORBIDDEN);
                self.rec.action = Action::Deny;
                self.reply_status(status, true)
            }
        }
    }

    /// Answers with a proxy-made status (400, 404, 413, ...), writing `reason` to
    /// the error log.
    pub fn reply_error(mut self, status: u16, action: Action, reason: &str) -> Reply {
        self.rec.error_line(reason);
        self.rec.error = Some(reason.to_owned());
        self.rec.action = action;
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
        self.reply_status(status, true)
    }

    /// Answers a request whose body went over a limit (413).
    pub fn reply_body_stop(self, stop: BodyStop) -> Reply {
        match stop {
            BodyStop::TooLarge => {
                let msg = format!(
                    "request body larger than limits.request_body_bytes ({})",
                    self.rec.shared.limits.request_body_bytes
                );
                self.reply_error(413, Action::BadRequest, &msg)
            }
            BodyStop::EngineLimit => {
                self.reply_error(413, Action::Deny, "request body over SecRequestBodyLimit")
            }
        }
    }

    fn reply_status(mut self, status: StatusCode, close: bool) -> Reply {
        self.rec.status = status.as_u16();
        let body = format!(
            "{} {}\nRequest id: {}\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or(""),
            self.rec.unique_id()
        );
        let mut r = Reply::new(self.rec, status, Bytes::from(body));
        r.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r.headers
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        r.close = close;
        r
    }

    /// Sends the request upstream and runs phases 3 and 4 on the response.
    pub async fn forward(self, parts: ForwardParts) -> Reply {
        self.forward_again(parts, None).await
    }

    /// [`Exchange::forward`], where `again` (when given) builds the same parts once
    /// more, for the rare request that must be sent a second time (see
    /// [`crate::upstream::Pool::send`]); without it a copy is kept.
    pub async fn forward_again(
        mut self,
        parts: ForwardParts,
        again: Option<&(dyn Fn() -> Option<ForwardParts> + Sync)>,
    ) -> Reply {
        let shared = self.rec.shared.clone();
        let path = parts
            .uri
            .path_and_query()
            .map_or(&b"/"[..], |p| p.as_str().as_bytes());
        let Some(pool) = shared
            .upstreams
            .route(self.rec.host.as_deref(), path)
            .cloned()
        else {
            return self.reply_error(
                404,
                Action::BadRequest,
                "no route matches this host and path",
            );
        };
        let body = match self.body.len() {
            0 => Bytes::new(),
            1 => self.body.pop().unwrap_or_default(),
            _ => {
                let mut all = BytesMut::with_capacity(self.body_len);
                for c in self.body.drain(..) {
                    all.extend_from_slice(&c);
                }
                all.freeze()
            }
        };
        let is_head = parts.method == Method::HEAD;
        let again_req = again.map(|f| {
            let body = body.clone();
            move || f().map(|p| upstream_request(p, body.clone()))
        });
        let req = upstream_request(parts, body);
        let mut timing = UpstreamTiming::default();
        self.rec.upstream = Some((pool.name.clone(), None));
        let again_dyn = again_req
            .as_ref()
            .map(|f| f as &(dyn Fn() -> Option<UpstreamRequest> + Sync));
        let sent = pool.send(req, &mut timing, again_dyn).await;
        self.rec.up_timing = Some(timing);
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                let status = e.status();
                return self.reply_error(status, Action::UpstreamError, &e.to_string());
            }
        };
        self.rec.upstream = Some((pool.name.clone(), Some(resp.server.clone())));
        let mut parts = resp.parts;
        let mut upstream_body = resp.body;

        // Phase 3.
        let status = parts.status;
        if let Some(tx) = self.rec.tx.as_mut() {
            tx.response_status(status.as_u16(), b"HTTP/1.1");
            for (n, v) in &parts.headers {
                tx.response_header(n.as_str().as_bytes(), v.as_bytes());
            }
        }
        if let Some(v) = self.rec.time_phase(3, |tx| tx.response_headers_done()) {
            return self.reply_verdict(v);
        }
        strip_hop_by_hop(&mut parts.headers);

        // Phase 4: buffer and inspect the body when the engine wants it.
        let has_body = !is_head
            && !status.is_informational()
            && status != StatusCode::NO_CONTENT
            && status != StatusCode::NOT_MODIFIED;
        let mut prefix = BytesMut::new();
        let mut complete = !has_body || upstream_body.is_end_stream();
        if has_body && !complete && self.rec.tx.as_ref().is_some_and(WafTx::wants_response_body) {
            let limit = shared.limits.response_body_inspect_bytes;
            loop {
                let t0 = Instant::now();
                let frame = upstream_body.frame().await;
                self.rec.transfer_acc += micros_since(t0);
                match frame {
                    None => {
                        complete = true;
                        break;
                    }
                    Some(Err(e)) => {
                        let status = if matches!(e, crate::upstream::UpstreamBodyError::Timeout) {
                            504
                        } else {
                            502
                        };
                        return self.reply_error(status, Action::UpstreamError, &e.to_string());
                    }
                    Some(Ok(frame)) => {
                        let Ok(data) = frame.into_data() else {
                            continue;
                        };
                        let room = limit.saturating_sub(prefix.len());
                        let feed = &data[..data.len().min(room)];
                        let t0 = Instant::now();
                        let r = self
                            .rec
                            .tx
                            .as_mut()
                            .map_or(BodyFeed::Ok, |tx| tx.response_body(feed));
                        let us = micros_since(t0);
                        let slot = &mut self.rec.phase_us[3];
                        *slot = Some(slot.unwrap_or(0) + us);
                        prefix.extend_from_slice(&data);
                        match r {
                            BodyFeed::LimitReject => {
                                self.rec.error =
                                    Some("response body over SecResponseBodyLimit".into());
                                return self.reply_error(
                                    500,
                                    Action::Deny,
                                    "response body over SecResponseBodyLimit",
                                );
                            }
                            BodyFeed::LimitPartial => break,
                            BodyFeed::Ok => {}
                        }
                        if upstream_body.is_end_stream() {
                            complete = true;
                            break;
                        }
                        if prefix.len() >= limit {
                            break;
                        }
                    }
                }
            }
        }
        if let Some(v) = self.rec.time_phase(4, |tx| tx.response_body_done()) {
            return self.reply_verdict(v);
        }

        self.rec.status = status.as_u16();
        self.rec.action = Action::Pass;
        let body = if complete {
            self.rec.transfer_us = Some(self.rec.transfer_acc);
            let b = prefix.freeze();
            if has_body {
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, length_value(b.len()));
            }
            BodyKind::Full(Some(b))
        } else {
            // The rest streams to the client; its transfer time runs from here (and
            // includes waiting for the client to take the data).
            self.rec.transfer_start = Some(Instant::now());
            BodyKind::Stream {
                prefix: (!prefix.is_empty()).then(|| prefix.freeze()),
                rest: upstream_body,
            }
        };
        Reply {
            status,
            headers: parts.headers,
            body: ReplyBody {
                kind: body,
                rec: Some(self.rec),
            },
            close: false,
            drop: false,
        }
    }
}

/// A Content-Length value; the common empty body's without making one.
fn length_value(n: usize) -> HeaderValue {
    if n == 0 {
        HeaderValue::from_static("0")
    } else {
        HeaderValue::from(n)
    }
}

/// The request for the upstream: the parts, the buffered body, and its length.
fn upstream_request(parts: ForwardParts, body: Bytes) -> UpstreamRequest {
    let mut headers = parts.headers;
    if !body.is_empty() || parts.method == Method::POST || parts.method == Method::PUT {
        headers.insert(header::CONTENT_LENGTH, length_value(body.len()));
    }
    UpstreamRequest {
        method: parts.method,
        uri: parts.uri,
        headers,
        body,
    }
}

/// Removes hop-by-hop headers (RFC 9110 §7.6.1): the fixed list and every header
/// the Connection header names.
pub fn strip_hop_by_hop(h: &mut HeaderMap) {
    // Most responses carry none: one pass over the names answers that, where a
    // removal per listed name would hash each of them.
    if !h.keys().any(|k| HOP_BY_HOP.contains(&k.as_str())) {
        return;
    }
    let named: Vec<HeaderName> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in HOP_BY_HOP {
        h.remove(*n);
    }
}

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Builds the headers sent upstream from the client's header lines: hop-by-hop
/// headers, Content-Length and Expect removed (the proxy sets the length of the
/// buffered body), X-Forwarded-For and X-Forwarded-Proto appended. Fails on a
/// header line that cannot be sent as it is.
pub fn upstream_headers<'h>(
    lines: impl Iterator<Item = (&'h [u8], Bytes)> + Clone,
    client: &IpText,
    tls: bool,
) -> Result<HeaderMap, &'static str> {
    let mut named: Vec<Vec<u8>> = Vec::new();
    let mut count = 0;
    for (n, v) in lines.clone() {
        count += 1;
        if n.eq_ignore_ascii_case(b"connection") {
            for t in v.split(|&b| b == b',') {
                let t = t.trim_ascii();
                if !t.is_empty() {
                    named.push(t.to_ascii_lowercase());
                }
            }
        }
    }
    // Room for every line and the two X-Forwarded-* headers, and no more: a map
    // sets up (and later frees) every slot it has room for.
    let mut out = HeaderMap::with_capacity(count + 2);
    let mut xff: Option<Vec<u8>> = None;
    let mut xfp: Option<Vec<u8>> = None;
    for (n, v) in lines {
        let name = HeaderName::from_bytes(n).map_err(|_| "invalid header name")?;
        let s = name.as_str();
        if HOP_BY_HOP.contains(&s)
            || s == "content-length"
            || s == "expect"
            || named.iter().any(|x| x.as_slice() == s.as_bytes())
        {
            continue;
        }
        if s == "x-forwarded-for" || s == "x-forwarded-proto" {
            let acc = if s == "x-forwarded-for" {
                &mut xff
            } else {
                &mut xfp
            };
            let acc = acc.get_or_insert_with(Vec::new);
            if !acc.is_empty() {
                acc.extend_from_slice(b", ");
            }
            acc.extend_from_slice(&v);
            continue;
        }
        // Shares the client's buffer instead of copying the value.
        let value = HeaderValue::from_maybe_shared(v).map_err(|_| "invalid header value")?;
        out.append(name, value);
    }
    // Without earlier values, the client's address and the scheme alone: no
    // buffer to build (and a static value for the scheme).
    let scheme: &'static str = if tls { "https" } else { "http" };
    let xff = match xff {
        None => HeaderValue::from_bytes(client.as_bytes()),
        Some(acc) => list_with(acc, client.as_bytes()),
    };
    let xfp = match xfp {
        None => Ok(HeaderValue::from_static(scheme)),
        Some(acc) => list_with(acc, scheme.as_bytes()),
    };
    out.insert(
        X_FORWARDED_FOR,
        xff.map_err(|_| "invalid X-Forwarded-For value")?,
    );
    out.insert(
        X_FORWARDED_PROTO,
        xfp.map_err(|_| "invalid X-Forwarded-Proto value")?,
    );
    Ok(out)
}

/// The comma-separated list `earlier` with `last` appended, as a header value.
fn list_with(
    mut earlier: Vec<u8>,
    last: &[u8],
) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    if !earlier.is_empty() {
        earlier.extend_from_slice(b", ");
    }
    earlier.extend_from_slice(last);
    HeaderValue::from_bytes(&earlier)
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// [`forward_target`] for a target held in a shared buffer: an origin-form target
/// that can travel as it is shares the buffer instead of being copied.
pub fn forward_target_shared(method: &Method, raw: &Bytes) -> Result<Uri, &'static str> {
    if raw.first() == Some(&b'/')
        && method != Method::CONNECT
        && let Ok(u) = Uri::from_maybe_shared(raw.clone())
    {
        return Ok(u);
    }
    forward_target(method, raw)
}

/// The target to send upstream for a raw request target: origin-form as it is (or
/// with bytes that cannot travel raw percent-encoded), the path of an absolute-form
/// target, `*` for OPTIONS, `host:port` for CONNECT.
pub fn forward_target(method: &Method, raw: &[u8]) -> Result<Uri, &'static str> {
    if method == Method::CONNECT {
        let ok = raw.first() != Some(&b'/')
            && memchr::memrchr(b':', raw).is_some_and(|c| {
                c > 0 && c + 1 < raw.len() && raw[c + 1..].iter().all(u8::is_ascii_digit)
            });
        if !ok {
            return Err("CONNECT target must be host:port");
        }
        return Uri::from_maybe_shared(Bytes::copy_from_slice(raw))
            .map_err(|_| "invalid CONNECT target");
    }
    if raw == b"*" {
        return if method == Method::OPTIONS {
            Ok(Uri::from_static("*"))
        } else {
            Err("'*' target is only valid for OPTIONS")
        };
    }
    let path: &[u8] = if raw.first() == Some(&b'/') {
        raw
    } else {
        // absolute-form: scheme "://" authority path
        let lower = raw
            .get(..8)
            .map(<[u8]>::to_ascii_lowercase)
            .unwrap_or_default();
        let skip = if lower.starts_with(b"http://") {
            7
        } else if lower.starts_with(b"https://") {
            8
        } else {
            return Err("request target is neither a path nor an absolute URI");
        };
        let rest = &raw[skip..];
        match memchr::memchr2(b'/', b'?', rest) {
            Some(p) if rest[p] == b'/' => &rest[p..],
            Some(p) => {
                // "http://host?q": the path is empty.
                return Uri::from_maybe_shared(Bytes::from([b"/", &rest[p..]].concat()))
                    .or_else(|_| {
                        Uri::from_maybe_shared(Bytes::from(percent_encode_odd(
                            &[b"/", &rest[p..]].concat(),
                        )))
                    })
                    .map_err(|_| "invalid request target");
            }
            None => b"/",
        }
    };
    Uri::from_maybe_shared(Bytes::copy_from_slice(path))
        .or_else(|_| Uri::from_maybe_shared(Bytes::from(percent_encode_odd(path))))
        .map_err(|_| "invalid request target")
}

/// Percent-encodes every byte that RFC 3986 does not allow in a URI, leaving the
/// rest (and existing `%XX` escapes) alone.
fn percent_encode_odd(raw: &[u8]) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(raw.len() + 16);
    for &b in raw {
        let ok = b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=%".contains(&b);
        if ok {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
    out
}

enum BodyKind {
    Full(Option<Bytes>),
    Stream {
        prefix: Option<Bytes>,
        rest: UpstreamBody,
    },
}

/// The answer to a request: status, headers, and a body that finishes the
/// transaction's record when it has been sent or dropped.
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Headers (no hop-by-hop headers; Content-Length when the length is known).
    pub headers: HeaderMap,
    /// The body.
    pub body: ReplyBody,
    /// The connection must close after this reply.
    pub close: bool,
    /// Close the connection without answering.
    pub drop: bool,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reply")
            .field("status", &self.status)
            .field("close", &self.close)
            .field("drop", &self.drop)
            .finish()
    }
}

impl Reply {
    fn new(rec: Box<Record>, status: StatusCode, body: Bytes) -> Reply {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        Reply {
            status,
            headers,
            body: ReplyBody {
                kind: BodyKind::Full(Some(body)),
                rec: Some(rec),
            },
            close: false,
            drop: false,
        }
    }
}

/// A reply body: a buffer, or a buffered prefix and the rest of an upstream body.
/// Counts the bytes it yields; finishing or dropping it runs phase 5 and logs.
pub struct ReplyBody {
    kind: BodyKind,
    rec: Option<Box<Record>>,
}

impl std::fmt::Debug for ReplyBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReplyBody")
    }
}

/// A reply body failed part-way (the upstream broke off or timed out).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReplyBodyError(String);

impl ReplyBody {
    /// Adds bytes written outside the body (the HTTP/1 head) to the record.
    pub fn add_bytes_out(&mut self, n: u64) {
        if let Some(r) = &mut self.rec {
            r.bytes_out += n;
        }
    }

    /// With `logs.error_log_before_response`, waits until the error-log lines this
    /// request has queued so far are in the file; call it before sending the
    /// response. Returns at once otherwise.
    pub async fn error_lines_written(&mut self) {
        if let Some(w) = self.rec.as_mut().and_then(|r| r.logged.take()) {
            w.wait().await;
        }
    }

    /// Notes that the client went away or the write failed.
    pub fn set_error(&mut self, e: &str) {
        if let Some(r) = &mut self.rec
            && r.error.is_none()
        {
            r.error = Some(e.to_owned());
        }
    }

    /// Finishes the record now (the body will not be polled further).
    pub fn finish(&mut self) {
        if let Some(mut r) = self.rec.take() {
            r.finish();
        }
    }

    /// Length of the body when it is fully known.
    pub fn known_len(&self) -> Option<u64> {
        match &self.kind {
            BodyKind::Full(b) => Some(b.as_ref().map_or(0, |b| b.len() as u64)),
            BodyKind::Stream { .. } => None,
        }
    }
}

impl Drop for ReplyBody {
    fn drop(&mut self) {
        if let Some(r) = &mut self.rec
            && !r.finished
        {
            if matches!(self.kind, BodyKind::Stream { .. }) && r.error.is_none() {
                r.error = Some("response not completed".into());
            }
            r.finish();
        }
    }
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = ReplyBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ReplyBodyError>>> {
        let this = &mut *self;
        let out = match &mut this.kind {
            BodyKind::Full(b) => match b.take() {
                Some(data) if !data.is_empty() => Some(Ok(Frame::data(data))),
                _ => None,
            },
            BodyKind::Stream { prefix, rest } => {
                if let Some(p) = prefix.take() {
                    Some(Ok(Frame::data(p)))
                } else {
                    match Pin::new(rest).poll_frame(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(None) => None,
                        Poll::Ready(Some(Ok(f))) => match f.into_data() {
                            Ok(d) => Some(Ok(Frame::data(d))),
                            // Trailers are not forwarded.
                            Err(_) => None,
                        },
                        Poll::Ready(Some(Err(e))) => Some(Err(ReplyBodyError(e.to_string()))),
                    }
                }
            }
        };
        match &out {
            Some(Ok(f)) => {
                if let (Some(d), Some(r)) = (f.data_ref(), &mut this.rec) {
                    r.bytes_out += d.len() as u64;
                }
            }
            Some(Err(e)) => {
                let msg = e.0.clone();
                if let Some(r) = &mut this.rec {
                    r.error_line(&msg);
                    r.error = Some(msg);
                }
                this.finish();
            }
            None => {
                if let Some(r) = &mut this.rec
                    && let Some(t) = r.transfer_start.take()
                {
                    r.transfer_us = Some(r.transfer_acc + micros_since(t));
                }
                this.finish();
            }
        }
        Poll::Ready(out)
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            BodyKind::Full(b) => b.as_ref().is_none_or(Bytes::is_empty),
            BodyKind::Stream { prefix, rest } => prefix.is_none() && rest.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            BodyKind::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            BodyKind::Stream { prefix, rest } => {
                let p = prefix.as_ref().map_or(0, |b| b.len() as u64);
                let h = rest.size_hint();
                let mut s = SizeHint::new();
                s.set_lower(h.lower() + p);
                if let Some(u) = h.upper() {
                    s.set_upper(u + p);
                }
                s
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(raw: &[(&'static str, &'static str)]) -> Vec<(&'static [u8], Bytes)> {
        raw.iter()
            .map(|(n, v)| (n.as_bytes(), Bytes::from_static(v.as_bytes())))
            .collect()
    }

    #[test]
    fn hop_by_hop_headers_are_removed_and_forwarded_for_appended() {
        let l = lines(&[
            ("Host", "example.com"),
            ("Connection", "keep-alive, X-Secret"),
            ("X-Secret", "1"),
            ("Keep-Alive", "300"),
            ("Transfer-Encoding", "chunked"),
            ("Content-Length", "5"),
            ("TE", "trailers"),
            ("Upgrade", "websocket"),
            ("Proxy-Connection", "keep-alive"),
            ("Expect", "100-continue"),
            ("X-Forwarded-For", "10.0.0.1"),
            ("Accept", "a"),
            ("accept", "b"),
        ]);
        let h = upstream_headers(
            l.iter().map(|(n, v)| (*n, v.clone())),
            &IpText::new("192.168.1.2".parse().unwrap()),
            true,
        )
        .unwrap();
        let names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            vec!["host", "accept", "x-forwarded-for", "x-forwarded-proto"]
        );
        assert_eq!(h["host"], "example.com");
        assert_eq!(h.get_all("accept").iter().count(), 2);
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 192.168.1.2");
        assert_eq!(h["x-forwarded-proto"], "https");
    }

    #[test]
    fn forwarded_headers_without_earlier_values() {
        let l = lines(&[("Host", "a")]);
        let h = upstream_headers(
            l.iter().map(|(n, v)| (*n, v.clone())),
            &IpText::new("::ffff:10.1.2.3".parse().unwrap()),
            false,
        )
        .unwrap();
        assert_eq!(h["x-forwarded-for"], "10.1.2.3");
        assert_eq!(h["x-forwarded-proto"], "http");
        let l = lines(&[("X-Forwarded-For", ""), ("X-Forwarded-Proto", "https")]);
        let h = upstream_headers(
            l.iter().map(|(n, v)| (*n, v.clone())),
            &IpText::new("::1".parse().unwrap()),
            true,
        )
        .unwrap();
        assert_eq!(h["x-forwarded-for"], "::1");
        assert_eq!(h["x-forwarded-proto"], "https, https");
    }

    #[test]
    fn unforwardable_header_lines_are_refused() {
        let l = lines(&[("Bad Name", "x")]);
        assert!(
            upstream_headers(
                l.iter().map(|(n, v)| (*n, v.clone())),
                &IpText::new("::1".parse().unwrap()),
                false
            )
            .is_err()
        );
        let l = lines(&[("X", "a\rb")]);
        assert!(
            upstream_headers(
                l.iter().map(|(n, v)| (*n, v.clone())),
                &IpText::new("::1".parse().unwrap()),
                false
            )
            .is_err()
        );
    }

    #[test]
    fn response_hop_by_hop_headers_are_removed() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("close, x-drop"));
        h.insert("x-drop", HeaderValue::from_static("1"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("content-type", HeaderValue::from_static("text/html"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("content-type"));
    }

    #[test]
    fn targets() {
        let t = |m: Method, raw: &[u8]| forward_target(&m, raw).map(|u| u.to_string());
        assert_eq!(t(Method::GET, b"/a?b=c").unwrap(), "/a?b=c");
        assert_eq!(
            t(Method::GET, b"/?q=\"<script>\"&x=\xff").unwrap(),
            "/?q=%22%3Cscript%3E%22&x=%FF"
        );
        assert_eq!(t(Method::GET, b"http://example.com/x?y").unwrap(), "/x?y");
        assert_eq!(t(Method::GET, b"http://example.com").unwrap(), "/");
        assert_eq!(t(Method::OPTIONS, b"*").unwrap(), "*");
        assert!(t(Method::GET, b"*").is_err());
        assert_eq!(t(Method::CONNECT, b"1.2.3.4:80").unwrap(), "1.2.3.4:80");
        assert!(t(Method::CONNECT, b"www.coreruleset.org").is_err());
        assert!(t(Method::GET, b"index.html").is_err());
        for raw in [
            &b"/a?b=c"[..],
            b"/?q=\"<x>\"&y=\xff",
            b"http://example.com/x?y",
            b"*",
            b"1.2.3.4:80",
            b"/",
        ] {
            for m in [Method::GET, Method::OPTIONS, Method::CONNECT] {
                let shared = Bytes::copy_from_slice(raw);
                assert_eq!(
                    forward_target_shared(&m, &shared).map(|u| u.to_string()),
                    forward_target(&m, raw).map(|u| u.to_string()),
                    "{m} {raw:?}"
                );
            }
        }
    }
}
