//! One request's path through the proxy, shared by the HTTP/1 and HTTP/2 front ends:
//! engine phases, request body buffering, the upstream exchange, response
//! inspection, and the record kept for logs and metrics.
//!
//! The front end hands a request to [`driver::drive`], which runs the phases in
//! their order through an [`Exchange`] and returns a [`Reply`]. The reply's body
//! carries the transaction: when the body has been sent (or dropped), phase 5 runs
//! and the access, error and audit lines are queued.

pub mod decode;
pub mod driver;
pub mod headers;
mod record;
pub mod reply;
pub mod shared;

pub use headers::{forward_target, forward_target_shared, upstream_headers};
pub use reply::{Reply, ReplyBody, Tunnel, Upgrade};
pub use shared::{ConnInfo, IpText, Policy, PolicySnapshot, Shared};

use crate::http::{HeaderLines, strip_hop_by_hop};
use crate::metrics::Action;
use crate::upstream::{Peer, RequestHeadView, UpstreamRequest, UpstreamTiming};
use crate::waf::{BodyFeed, Verdict, VerdictKind, WafTx};
use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Method, StatusCode, Uri};
use http_body::Body;
use http_body_util::BodyExt;
use record::{Record, micros_since};
use reply::BodyKind;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a request body was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyStop {
    /// Over `limits.request_body_bytes`.
    TooLarge,
    /// Over the engine's `SecRequestBodyLimit` with `SecRequestBodyLimitAction Reject`.
    EngineLimit,
    /// A compressed body that does not decode, or decodes beyond
    /// `limits.request_decompression_ratio`: the rules cannot read it.
    Undecodable(String),
}

/// The request as the front end hands it over for forwarding.
#[derive(Debug)]
pub struct ForwardParts {
    /// Method.
    pub method: Method,
    /// Origin-form (or `*`, or authority-form for CONNECT) target.
    pub uri: Uri,
    /// Headers for the upstream: hop-by-hop removed, X-Forwarded-* added.
    pub headers: HeaderLines,
}

/// A request on its way through the proxy.
pub struct Exchange {
    rec: Box<Record>,
    body: Vec<Bytes>,
    body_len: usize,
    /// The largest body taken: `limits.request_body_bytes`, or the site's.
    body_limit: usize,
    engine_body: bool,
    /// The decoder of a compressed request body, whose decoded bytes the engine
    /// reads (the upstream gets the body as sent).
    request_decoder: Option<decode::Decoder>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("unique_id", &self.rec.unique_id)
            .finish()
    }
}

impl Exchange {
    /// Starts a transaction of the request's `site` and gives the engine the
    /// request line and every header. `start`/`start_us` are when the request began
    /// to arrive; `host` the first Host header's value; `head_bytes` the head's size
    /// on the wire. When the site's policy cannot act on a request
    /// ([`Waf::is_empty_for`](crate::waf::Waf::is_empty_for)), no transaction is
    /// made at all.
    #[allow(clippy::too_many_arguments)]
    pub fn begin<'h>(
        shared: &Arc<Shared>,
        site: crate::sites::SiteRef,
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
        let waf = site.waf().clone();
        let index = site.index();
        let empty = waf.is_empty_for(index);
        let rbl = match shared.dns() {
            Some(dns) if !empty && waf.uses_rbl() => {
                Some(dns.for_transaction(waf.rbl_client_names(index, conn.client.ip())))
            }
            _ => None,
        };
        let rbl_waits = if rbl.is_some() {
            waf.rbl_waits(index)
        } else {
            [false; 5]
        };
        let body_limit = site
            .site()
            .request_body_bytes(shared.policy().limits.request_body_bytes);
        // The caller's trace context, when spans are exported.
        let tracing = shared.tracing();
        let mut traceparent: Option<Vec<u8>> = None;
        let mut headers = headers;
        let (tx, unique_id) = if empty {
            (None, None)
        } else {
            let id = shared.unique_id(start_us);
            let mut tx = waf.site_transaction(
                index,
                conn.client,
                conn.peer_if_other(),
                conn.local,
                id.clone(),
                start_us,
                shared.collection_reader(),
                rbl.clone().map(|r| r as Arc<dyn engine::RblResolver>),
            );
            tx.request_line(&method, &uri, &protocol);
            for (n, v) in headers.by_ref() {
                if tracing && traceparent.is_none() && n.eq_ignore_ascii_case(b"traceparent") {
                    traceparent = Some(v.to_vec());
                }
                tx.request_header(n, v);
            }
            (Some(tx), Some(id))
        };
        if tracing && traceparent.is_none() {
            traceparent = headers
                .find(|(n, _)| n.eq_ignore_ascii_case(b"traceparent"))
                .map(|(_, v)| v.to_vec());
        }
        let trace = tracing.then(|| crate::otlp::TraceContext::for_request(traceparent.as_deref()));
        Exchange {
            rec: Box::new(Record {
                shared: shared.clone(),
                site,
                tx,
                unique_id,
                conn,
                start,
                start_us,
                method,
                uri,
                protocol,
                host,
                user: None,
                phase_us: [None; 5],
                waf_cpu_us: None,
                matches: Vec::new(),
                rule_times: Vec::new(),
                probe_id: None,
                trace,
                writes: Vec::new(),
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
                rbl,
                rbl_waits,
            }),
            body: Vec::new(),
            body_len: 0,
            body_limit,
            engine_body: true,
            request_decoder: None,
        }
    }

    /// Runs phase 1, after resolving the block-list names the `@rbl` rules on the
    /// client's address will ask for.
    pub async fn phase1(&mut self) -> Option<Verdict> {
        if let Some(rbl) = &self.rec.rbl {
            rbl.prefetch().await;
        }
        let size = usize::try_from(self.rec.bytes_in).unwrap_or(usize::MAX);
        let failed = self.failed_verdict();
        self.rec
            .inspect_phase(1, size, failed, WafTx::request_headers_done)
            .await
    }

    /// The verdict when an evaluation is lost: per `server.engine_failure`.
    fn failed_verdict(&self) -> Option<Verdict> {
        (self.rec.shared.server.engine_failure == crate::config::FailurePolicy::Closed).then_some(
            Verdict {
                status: 500,
                kind: VerdictKind::Deny,
                rule_id: None,
            },
        )
    }

    /// The largest request body this request may send (`limits.request_body_bytes`,
    /// or its site's).
    pub fn body_limit(&self) -> usize {
        self.body_limit
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
        if self.body_len + chunk.len() > self.body_limit {
            return Err(BodyStop::TooLarge);
        }
        self.feed_request(&chunk, false)?;
        self.body_len += chunk.len();
        self.body.push(chunk);
        Ok(())
    }

    /// Reads the request body under `coding`: the engine is given its decoded
    /// bytes.
    pub fn decode_request_body(&mut self, coding: decode::Coding) {
        let ratio = self.rec.shared.policy().limits.request_decompression_ratio;
        self.request_decoder = Some(decode::Decoder::new(coding, ratio));
    }

    /// The end of the request body: the decoder's last bytes go to the engine, or
    /// the body turns out not to decode.
    pub fn body_end(&mut self) -> Result<(), BodyStop> {
        if self.request_decoder.is_some() {
            self.feed_request(&[], true)?;
        }
        Ok(())
    }

    /// Gives the engine a piece of the request body while it wants it, through the
    /// decoder when the body is compressed; `end` (with an empty piece) ends the
    /// decoding.
    fn feed_request(&mut self, data: &[u8], end: bool) -> Result<(), BodyStop> {
        if !self.engine_body {
            return Ok(());
        }
        let Some(tx) = self.rec.tx.as_mut() else {
            return Ok(());
        };
        if !tx.wants_request_body() {
            return Ok(());
        }
        let t0 = Instant::now();
        let mut feed = BodyFeed::Ok;
        let decoded = match self.request_decoder.as_mut() {
            None => {
                feed = tx.request_body(data);
                Ok(())
            }
            Some(d) => {
                let done = usize::try_from(d.totals().1).unwrap_or(usize::MAX);
                let room = tx.request_body_limit().saturating_sub(done);
                let mut give = |piece: &[u8]| {
                    if feed == BodyFeed::Ok {
                        feed = tx.request_body(piece);
                    }
                };
                if end {
                    d.finish(room, &mut give)
                } else {
                    d.push(data, room, &mut give)
                }
            }
        };
        let us = micros_since(t0);
        let slot = &mut self.rec.phase_us[1];
        *slot = Some(slot.unwrap_or(0) + us);
        match feed {
            BodyFeed::Ok => {}
            BodyFeed::LimitPartial => self.engine_body = false,
            BodyFeed::LimitReject => return Err(BodyStop::EngineLimit),
        }
        match decoded {
            // The engine has been given one byte past its limit, and has decided.
            Ok(()) | Err(decode::Stop::Size) => Ok(()),
            Err(decode::Stop::Ratio) => {
                let (c, n) = self.request_decoder.as_ref().map_or((0, 0), |d| d.totals());
                Err(BodyStop::Undecodable(format!(
                    "request body decodes beyond limits.request_decompression_ratio ({} to 1): \
                     {n} bytes from {c}",
                    self.rec.shared.policy().limits.request_decompression_ratio
                )))
            }
            Err(decode::Stop::Corrupt(e)) => Err(BodyStop::Undecodable(format!(
                "request body cannot be decoded: {e}"
            ))),
        }
    }

    /// Runs phase 2 (call it even when there was no body).
    pub async fn phase2(&mut self) -> Option<Verdict> {
        let size = usize::try_from(self.rec.bytes_in).unwrap_or(usize::MAX);
        let failed = self.failed_verdict();
        self.rec
            .inspect_phase(2, size, failed, WafTx::request_body_done)
            .await
    }

    /// The primary's side of a request sampled for the shadow rule set, once its
    /// phases 1 and 2 decided (`verdict`: what they decided): the transaction
    /// id, the verdict, the rules matched so far and the inbound anomaly score,
    /// and the body as buffered when `with_body` (none when the body was under a
    /// content coding: the rules read it decoded, the buffer holds it as sent).
    pub fn shadow_primary(
        &mut self,
        verdict: Option<&Verdict>,
        with_body: bool,
    ) -> crate::shadow::Primary {
        let side = crate::shadow::Side {
            blocked: verdict.is_some(),
            status: verdict.map(|v| v.status),
            rules: crate::shadow::Side::rule_ids(self.rec.matches.iter().map(|m| m.rule_id)),
            score: self.rec.tx.as_mut().map_or(0, |t| t.anomaly_scores().0),
        };
        let body = (with_body && self.request_decoder.is_none()).then(|| self.body.clone());
        crate::shadow::Primary {
            id: self.rec.unique_id().to_owned(),
            side,
            body,
        }
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

    /// A TX variable of the transaction (none without one).
    pub fn tx_var(&mut self, name: &str) -> Option<Vec<u8>> {
        self.rec.tx.as_mut().and_then(|t| t.tx_var(name))
    }

    /// Answers a request over a `[[rate_limit]]`: its status (429 by default) with
    /// `Retry-After` in whole seconds (at least 1).
    pub fn reply_rate_limited(self, limit: &str, status: u16, retry_after: Duration) -> Reply {
        let secs = (retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0)).max(1);
        let mut reply = self.reply_error(
            status,
            Action::RateLimited,
            &format!("over rate_limit {limit:?}, retry after {secs} s"),
        );
        reply
            .headers
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        reply
    }

    /// Answers a request whose body went over a limit (413).
    pub fn reply_body_stop(self, stop: BodyStop) -> Reply {
        match stop {
            BodyStop::TooLarge => {
                let msg = if self.rec.site.site().own_request_body_bytes() {
                    format!(
                        "request body larger than the limits.request_body_bytes of site {:?} ({})",
                        self.rec.site.name(),
                        self.body_limit
                    )
                } else {
                    format!(
                        "request body larger than limits.request_body_bytes ({})",
                        self.body_limit
                    )
                };
                self.reply_error(413, Action::BadRequest, &msg)
            }
            BodyStop::EngineLimit => self.reply_error(
                413,
                Action::Deny,
                "request body over SecRequestBodyLimit or SecRequestBodyNoFilesLimit",
            ),
            BodyStop::Undecodable(why) => self.reply_error(400, Action::BadRequest, &why),
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

    /// Answers with a proxy-made status and `page` as the body (the forward
    /// proxy's block page), writing `reason` to the error log.
    fn reply_page(
        mut self,
        status: u16,
        action: Action,
        reason: &str,
        page: crate::upstream::LocalAnswer,
    ) -> Reply {
        self.rec.error_line(reason);
        self.rec.error = Some(reason.to_owned());
        self.rec.action = action;
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN);
        self.rec.status = status.as_u16();
        let mut r = Reply::new(self.rec, status, page.body);
        r.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(page.content_type),
        );
        r.headers
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        r.close = true;
        r
    }

    /// Answers `407 Proxy Authentication Required` with `challenge` as
    /// `Proxy-Authenticate`, counting why.
    fn reply_proxy_auth(
        self,
        challenge: &str,
        failure: &crate::forward::auth::AuthFailure,
    ) -> Reply {
        use crate::forward::auth::AuthFailure;
        let reason = match failure {
            AuthFailure::Missing => "missing",
            AuthFailure::Malformed(_) => "malformed",
            AuthFailure::UnknownUser(_) => "unknown_user",
            AuthFailure::WrongPassword(_) => "wrong_password",
        };
        self.rec.shared.metrics.forward_auth_failure(reason);
        let message = format!("proxy authentication required: {failure}");
        let mut r = self.reply_error(407, Action::Deny, &message);
        if let Ok(v) = HeaderValue::from_str(challenge) {
            r.headers.insert(header::PROXY_AUTHENTICATE, v);
        }
        r
    }

    /// On a forward listener, the user of the request's `Proxy-Authorization`
    /// (`header`) when `forward.htpasswd` asks for one, checked before any phase
    /// runs (a client that has not authenticated costs no rule and raises no
    /// alert) and given to the rules as `REMOTE_USER`; or the 407 to answer.
    /// Inside an inspected tunnel, the user is the `CONNECT`'s.
    pub async fn authenticate_forward(mut self, header: Option<Bytes>) -> Result<Exchange, Reply> {
        if !self.rec.conn.forward {
            return Ok(self);
        }
        let user = match crate::forward::inspect::tunnel_user() {
            Some(user) => user,
            None => {
                let forward = self.rec.shared.upstreams().forward().clone();
                let Some(auth) = forward.authenticator_for(&self.rec.method, &self.rec.uri) else {
                    return Ok(self);
                };
                match authenticate(auth, header).await {
                    Ok(user) => Some(Arc::from(user)),
                    Err(e) => return Err(self.reply_proxy_auth(&auth.challenge(), &e)),
                }
            }
        };
        if let Some(user) = user {
            if let Some(tx) = self.rec.tx.as_mut() {
                tx.set_remote_user(user.as_bytes());
            }
            self.rec.user = Some(user);
        }
        Ok(self)
    }

    /// A forward-proxy `CONNECT` that passed phases 1 and 2: connects to the
    /// target and answers 200 with the connection in [`Reply::tunnel`], for the
    /// front end to check the ClientHello and join the client to it; or 502.
    /// A tunnel that TLS inspection may decrypt is answered 200 at once, its
    /// connection deferred (see [`reply::Tunnel::stream`]).
    async fn open_tunnel(mut self, target: crate::forward::TunnelTarget) -> Reply {
        let started = Instant::now();
        self.rec.upstream = Some((Arc::from(crate::forward::destination::FORWARD_PEER), None));
        let deferred = self
            .rec
            .shared
            .forward_inspector()
            .is_some_and(|i| i.may_want(&target.host));
        let stream = if deferred {
            None
        } else {
            match target.connect().await {
                Ok((stream, addr)) => {
                    self.rec.up_timing = Some(UpstreamTiming {
                        connect_us: micros_since(started),
                        ..UpstreamTiming::default()
                    });
                    self.rec.upstream = Some((
                        Arc::from(crate::forward::destination::FORWARD_PEER),
                        Some(Arc::from(addr.to_string())),
                    ));
                    Some(stream)
                }
                Err(e) => {
                    self.rec.shared.metrics.forward_tunnel("connect_failed");
                    return self.reply_error(e.status(), Action::UpstreamError, &e.to_string());
                }
            }
        };
        self.rec.status = 200;
        let mut r = Reply::new(self.rec, StatusCode::OK, Bytes::new());
        r.headers.clear();
        r.tunnel = Some(reply::Tunnel { stream, target });
        r
    }

    /// Sends the request upstream and runs phases 3 and 4 on the response.
    pub async fn forward(mut self, parts: ForwardParts) -> Reply {
        let shared = self.rec.shared.clone();
        let accept = parts.headers.get(b"accept").cloned();
        let head = RequestHeadView {
            method: &parts.method,
            target: &self.rec.uri,
            uri: &parts.uri,
            host: self.rec.host.as_deref(),
            site: &self.rec.site,
            client: self.rec.conn.client,
            user: self.rec.user.as_deref(),
            accept: accept.as_deref(),
        };
        // Inside an inspected tunnel, the tunnel's origin (see forward::inspect).
        let chosen = crate::forward::inspect::choose(&head)
            .unwrap_or_else(|| shared.choose_destination(&head, self.rec.conn.forward));
        let peer = match chosen {
            Ok(Peer::Tunnel(target)) => return self.open_tunnel(*target).await,
            Ok(Peer::Local(answer)) => {
                self.rec.status = 200;
                let mut r = Reply::new(self.rec, StatusCode::OK, answer.body);
                r.headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(answer.content_type),
                );
                r.headers.insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("max-age=300"),
                );
                return r;
            }
            Ok(peer) => peer,
            Err(refused) => {
                let action = if refused.status == 403 {
                    Action::Deny
                } else {
                    Action::BadRequest
                };
                return match refused.page {
                    None => self.reply_error(refused.status, action, &refused.reason),
                    Some(page) => self.reply_page(refused.status, action, &refused.reason, page),
                };
            }
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
        let asks_upgrade = parts.headers.contains(b"upgrade");
        let mut parts = parts;
        if let Some(t) = &self.rec.trace {
            // The upstream's parent is the proxy's span, in the caller's trace.
            parts.headers.remove(b"traceparent");
            parts.headers.push(
                Bytes::from_static(b"traceparent"),
                Bytes::from(t.traceparent()),
            );
        }
        let req = upstream_request(parts, body, self.rec.conn.client.ip());
        let mut timing = UpstreamTiming::default();
        self.rec.upstream = Some((peer.name(), None));
        let sent = peer.send(req, &mut timing).await;
        self.rec.up_timing = Some(timing);
        if !timing.reused {
            probe::probe_lazy!(
                palisade,
                upstream_connect,
                self.rec.probe_id(),
                timing.connect_us as isize
            );
        }
        probe::probe_lazy!(
            palisade,
            upstream_first_byte,
            self.rec.probe_id(),
            timing.first_byte_us as isize
        );
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                let status = e.status();
                let why = e.to_string();
                crate::forward::inspect::upstream_failed(&shared.metrics, &why);
                return self.reply_error(status, Action::UpstreamError, &why);
            }
        };
        self.rec.upstream = Some((peer.name(), Some(resp.server.clone())));
        let mut parts = resp.parts;
        let mut upstream_body = resp.body;
        let upgraded = resp.upgraded;

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
        let upgrade = if status == StatusCode::SWITCHING_PROTOCOLS {
            let protocol = parts.headers.get(header::UPGRADE).cloned();
            match (asks_upgrade, protocol, upgraded) {
                (true, Some(protocol), Some(upstream)) => {
                    Some(reply::Upgrade { protocol, upstream })
                }
                _ => {
                    return self.reply_error(
                        502,
                        Action::UpstreamError,
                        "upstream answered 101 Switching Protocols to a request that did not ask for that protocol",
                    );
                }
            }
        } else {
            None
        };
        strip_hop_by_hop(&mut parts.headers);

        // Phase 4: buffer and inspect the body when the engine wants it.
        let has_body = !is_head
            && !status.is_informational()
            && status != StatusCode::NO_CONTENT
            && status != StatusCode::NOT_MODIFIED;
        let mut prefix = BytesMut::new();
        let mut complete = !has_body || upstream_body.is_end_stream();
        if has_body && !complete && self.rec.tx.as_ref().is_some_and(WafTx::wants_response_body) {
            let limit = shared.policy().limits.response_body_inspect_bytes;
            // A compressed body is decoded for the engine; the client gets it as sent.
            let mut decoder = decode::Coding::of(&parts.headers).map(|c| {
                decode::Decoder::new(c, shared.policy().limits.response_decompression_ratio)
            });
            loop {
                let t0 = Instant::now();
                let frame = upstream_body.frame().await;
                self.rec.transfer_acc += micros_since(t0);
                match frame {
                    None => {
                        complete = true;
                        if let Fed::Refuse(why) = self.feed_response(&mut decoder, &[], true) {
                            return self.reply_error(500, Action::Deny, &why);
                        }
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
                        let fed = self.feed_response(&mut decoder, feed, false);
                        prefix.extend_from_slice(&data);
                        match fed {
                            Fed::Refuse(why) => {
                                return self.reply_error(500, Action::Deny, &why);
                            }
                            Fed::Enough => break,
                            Fed::More => {}
                        }
                        if upstream_body.is_end_stream() {
                            complete = true;
                            if let Fed::Refuse(why) = self.feed_response(&mut decoder, &[], true) {
                                return self.reply_error(500, Action::Deny, &why);
                            }
                            break;
                        }
                        if prefix.len() >= limit {
                            break;
                        }
                    }
                }
            }
        }
        let failed = self.failed_verdict();
        let inspected = self
            .rec
            .inspect_phase(4, prefix.len(), failed, WafTx::response_body_done)
            .await;
        if let Some(v) = inspected {
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
                pace: None,
                done_at_end: false,
            },
            close: false,
            drop: false,
            upgrade,
            tunnel: None,
        }
    }
}

/// What feeding a piece of the response body to the engine came to.
enum Fed {
    /// The engine takes more.
    More,
    /// Inspect what the engine has; the rest of the body streams through.
    Enough,
    /// Refuse the response (a limit with `SecResponseBodyLimitAction Reject`).
    Refuse(String),
}

impl Exchange {
    /// Gives the engine a piece of the response body, through the decoder when the
    /// body is compressed; `end` (with an empty piece) ends the decoding.
    fn feed_response(
        &mut self,
        decoder: &mut Option<decode::Decoder>,
        data: &[u8],
        end: bool,
    ) -> Fed {
        let t0 = Instant::now();
        let fed = match decoder {
            None => match self.rec.tx.as_mut().map_or(BodyFeed::Ok, |tx| {
                if data.is_empty() {
                    BodyFeed::Ok
                } else {
                    tx.response_body(data)
                }
            }) {
                BodyFeed::Ok => Fed::More,
                BodyFeed::LimitPartial => Fed::Enough,
                BodyFeed::LimitReject => {
                    Fed::Refuse("response body over SecResponseBodyLimit".to_owned())
                }
            },
            Some(d) => self.feed_decoded(d, data, end),
        };
        let us = micros_since(t0);
        let slot = &mut self.rec.phase_us[3];
        *slot = Some(slot.unwrap_or(0) + us);
        fed
    }

    fn feed_decoded(&mut self, d: &mut decode::Decoder, data: &[u8], end: bool) -> Fed {
        let Some(tx) = self.rec.tx.as_mut() else {
            return Fed::More;
        };
        let Some((limit, reject)) = tx.response_body_limit() else {
            return Fed::More;
        };
        let done = usize::try_from(d.totals().1).unwrap_or(usize::MAX);
        let room = limit.saturating_sub(done);
        let mut engine = BodyFeed::Ok;
        let mut give = |piece: &[u8]| {
            if engine == BodyFeed::Ok {
                engine = tx.response_body(piece);
            }
        };
        let r = if end {
            d.finish(room, &mut give)
        } else {
            d.push(data, room, &mut give)
        };
        let coding = d.coding().name();
        let metrics = &self.rec.shared.metrics;
        let stopped = |i: usize| {
            metrics.decode_stopped[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        let why = match r {
            Ok(()) => None,
            Err(decode::Stop::Size) => {
                stopped(0);
                None
            }
            Err(decode::Stop::Ratio) => {
                stopped(1);
                let (c, n) = d.totals();
                Some(format!(
                    "{coding} response body decodes beyond limits.response_decompression_ratio ({} to 1): {n} bytes from {c}",
                    self.rec.shared.policy().limits.response_decompression_ratio
                ))
            }
            Err(decode::Stop::Corrupt(e)) => {
                stopped(2);
                Some(format!("{coding} response body cannot be decoded: {e}"))
            }
        };
        match (engine, why) {
            (BodyFeed::LimitReject, _) => Fed::Refuse(format!(
                "response body over SecResponseBodyLimit once decoded ({coding})"
            )),
            (_, Some(why)) if reject => Fed::Refuse(why),
            (_, Some(why)) => {
                // SecResponseBodyLimitAction ProcessPartial: what was decoded is
                // inspected; the breach is logged.
                self.rec
                    .error_line(&format!("{why}; inspecting the part decoded"));
                self.rec.error = Some(why);
                Fed::Enough
            }
            (BodyFeed::LimitPartial, None) => Fed::Enough,
            (BodyFeed::Ok, None) => Fed::More,
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
fn upstream_request(parts: ForwardParts, body: Bytes, client: std::net::IpAddr) -> UpstreamRequest {
    let mut headers = parts.headers;
    if !body.is_empty() || parts.method == Method::POST || parts.method == Method::PUT {
        // `upstream_headers` left no Content-Length line.
        let n = if body.is_empty() {
            Bytes::from_static(b"0")
        } else {
            Bytes::copy_from_slice(itoa::Buffer::new().format(body.len()).as_bytes())
        };
        headers.push(Bytes::from_static(b"content-length"), n);
    }
    UpstreamRequest {
        method: parts.method,
        uri: parts.uri,
        headers,
        body,
        client: Some(client),
    }
}

/// Checks a forward-proxy request's `Proxy-Authorization` (`header`): from the
/// authenticator's cache when it can, else with bcrypt off the worker thread.
/// The user name, or why it is refused.
async fn authenticate(
    auth: &Arc<crate::forward::auth::Authenticator>,
    header: Option<Bytes>,
) -> Result<String, crate::forward::auth::AuthFailure> {
    if let Some(r) = auth.authenticate_cached(header.as_deref()) {
        return r.map(|a| a.user);
    }
    let a = auth.clone();
    match tokio::task::spawn_blocking(move || a.authenticate(header.as_deref())).await {
        Ok(r) => r.map(|a| a.user),
        // The blocking task panicked or was cancelled: refuse as for no header.
        Err(_) => Err(crate::forward::auth::AuthFailure::Missing),
    }
}
